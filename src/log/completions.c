/* log/completions.c — completions.jsonl lines (completions.h). */
#include "log/completions.h"

#include <jansson.h>
#include <math.h>

#include "io/json_numbers.h"

/* JSON has no NaN or infinity, and jansson's json_real gives NULL for them (the key
 * would be left out without a word): a value that is no finite number is null. */
static json_t *number_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

void completion_record_write(FILE *f, const CompletionRecord *r) {
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer(r->step));
    json_object_set_new(o, "prompt", json_string(r->prompt));
    json_object_set_new(o, "completion", json_string(r->completion));
    json_t *ids = json_array();
    for (int k = 0; k < r->n; k++) json_array_append_new(ids, json_integer(r->ids[k]));
    json_object_set_new(o, "completion_ids", ids);
    if (r->mask) json_object_set_new(o, "tool_spans", json_from_zero_runs(r->mask, r->n)); /* [start, end) */
    json_t *rw = json_object();
    for (int i = 0; i < r->n_rewards; i++) {
        double v = r->rewards[i * r->stride];
        json_object_set_new(rw, r->reward_names[i], number_or_null(v));
    }
    json_object_set_new(o, "rewards", rw);
    json_object_set_new(o, "reward", number_or_null(r->reward));
    json_object_set_new(o, "advantage", number_or_null(r->advantage));
    json_dumpf(o, f, JSON_COMPACT);
    fputc('\n', f);
    json_decref(o);
}
