/* log/completions.c — completions.jsonl lines (completions.h). */
#include "log/completions.h"

#include <jansson.h>
#include <math.h>

void completion_record_write(FILE *f, const CompletionRecord *r) {
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer(r->step));
    json_object_set_new(o, "prompt", json_string(r->prompt));
    json_object_set_new(o, "completion", json_string(r->completion));
    json_t *ids = json_array();
    for (int k = 0; k < r->n; k++) json_array_append_new(ids, json_integer(r->ids[k]));
    json_object_set_new(o, "completion_ids", ids);
    json_t *rw = json_object();
    for (int i = 0; i < r->n_rewards; i++) {
        double v = r->rewards[i * r->stride];
        json_object_set_new(rw, r->reward_names[i], isnan(v) ? json_null() : json_real(v));
    }
    json_object_set_new(o, "rewards", rw);
    json_object_set_new(o, "reward", json_real(r->reward));
    json_object_set_new(o, "advantage", json_real(r->advantage));
    json_dumpf(o, f, JSON_COMPACT);
    fputc('\n', f);
    json_decref(o);
}
