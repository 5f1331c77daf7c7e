/* train/hf_state.c — transformers' TrainerState fields in trainer_state.json
 * (hf_state.h). Is: the field list and its types as transformers' dataclass
 * declares them, log_history's entries, and the move of our own fields under
 * stateful_callbacks and back. Is not: anything the resume depends on except
 * log_history itself (the loop reads its own fields). */
#include "train/hf_state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* v as metrics.jsonl shows it (metric_write_line's %.10g), so the two files
 * hold the same numbers and a resumed run's history equals an uninterrupted one's. */
static json_t *logged_number(double v) {
    if (!isfinite(v)) return json_null();
    char text[40];
    snprintf(text, sizeof text, "%.10g", v);
    return json_real(strtod(text, NULL));
}

void hf_state_log_append(json_t *history, const MetricAcc *acc, long step) {
    json_t *entry = json_object();
    for (int i = 0; i < acc->n; i++) {
        const Metric *m = &acc->m[i];
        json_object_set_new(entry, m->name, logged_number(m->count ? m->sum / m->count : NAN));
    }
    json_object_set_new(entry, "step", json_integer((json_int_t)step));
    json_array_append_new(history, entry);
}

void hf_state_fresh(HfStateInfo *in) {
    /* transformers' trainer_callback.py: the dataclass's defaults */
    *in = (HfStateInfo){.epoch = NAN, .logging_steps = 500, .eval_steps = 500, .save_steps = 500,
                        .is_world_process_zero = 1, .is_local_process_zero = 1};
}

json_t *hf_state_fields(const HfStateInfo *in) {
    json_t *hf = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I, s:f, s:n, s:n, s:n, s:b, s:b, s:b, s:n, "
                           "s:n}",
                           "epoch", logged_number(in->epoch), "global_step", (json_int_t)in->global_step, "max_steps",
                           (json_int_t)in->max_steps, "logging_steps", (json_int_t)in->logging_steps, "eval_steps",
                           (json_int_t)in->eval_steps, "save_steps", (json_int_t)in->save_steps, "train_batch_size",
                           in->train_batch_size > 0 ? json_integer(in->train_batch_size) : json_null(),
                           "num_train_epochs", (json_int_t)in->num_train_epochs,
                           "num_input_tokens_seen", (json_int_t)in->num_input_tokens_seen, "total_flos", 0.0,
                           "best_metric", "best_global_step", "best_model_checkpoint", "is_local_process_zero",
                           in->is_local_process_zero, "is_world_process_zero", in->is_world_process_zero,
                           "is_hyper_param_search", 0, "trial_name", "trial_params");
    CHECK(hf);
    return hf;
}

void hf_state_add(json_t *state, const HfStateInfo *in, const json_t *history) {
    /* TrainerControl as transformers records it in a checkpoint: saving now,
     * stopping when this is the last step */
    json_t *control = json_pack("{s:{s:b, s:b, s:b, s:b, s:b}, s:{}}", "args", "should_epoch_stop", 0,
                                "should_evaluate", 0, "should_log", 0, "should_save", 1, "should_training_stop",
                                in->global_step >= in->max_steps, "attributes");
    json_t *hf = hf_state_fields(in);
    json_object_set_new(hf, "stateful_callbacks", json_pack("{s:o}", "TrainerControl", control));
    json_object_set_new(hf, "log_history", json_deep_copy(history));
    json_object_update_missing(state, hf); /* the loop's global_step and max_steps are the same numbers */
    json_decref(hf);
}

/* TrainerState's fields (transformers' trainer_callback.py): the only keys the
 * file's top level may hold, since load_from_json passes each to the dataclass. */
static const char *const TRAINER_STATE_FIELDS[] = {
    "epoch", "global_step", "max_steps", "logging_steps", "eval_steps", "save_steps", "train_batch_size",
    "num_train_epochs", "num_input_tokens_seen", "total_flos", "log_history", "best_metric", "best_global_step",
    "best_model_checkpoint", "is_local_process_zero", "is_world_process_zero", "is_hyper_param_search",
    "trial_name", "trial_params", "stateful_callbacks", NULL};

/* Our callback's key in stateful_callbacks (transformers keys a callback by its class name). */
#define OURS "GrpoTrainer"

static int trainer_state_field(const char *key) {
    for (int i = 0; TRAINER_STATE_FIELDS[i]; i++)
        if (!strcmp(key, TRAINER_STATE_FIELDS[i])) return 1;
    return 0;
}

json_t *hf_state_nest(const json_t *state) {
    json_t *out = json_object(), *attributes = json_object(), *args = json_object_get(state, "args");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)state, key, v) {
        if (trainer_state_field(key)) json_object_set(out, key, v);
        else if (strcmp(key, "args")) json_object_set(attributes, key, v);
    }
    const json_t *cbs = json_object_get(state, "stateful_callbacks");
    json_t *callbacks = json_is_object(cbs) ? json_copy((json_t *)cbs) : json_object();
    json_t *ours = json_pack("{s:o, s:o}", "args", args ? json_incref(args) : json_object(), "attributes", attributes);
    CHECK(out && callbacks && ours);
    json_object_set_new(callbacks, OURS, ours);
    json_object_set_new(out, "stateful_callbacks", callbacks);
    return out;
}

int hf_state_unnest(json_t *st, const char *dir, GrpoErr *err) {
    json_t *callbacks = json_object_get(st, "stateful_callbacks"), *ours = json_object_get(callbacks, OURS);
    if (!ours) return 0; /* the flat layout */
    json_t *args = json_object_get(ours, "args"), *attributes = json_object_get(ours, "attributes");
    if (!json_is_object(args) || !json_is_object(attributes))
        return err_set(err, "%s/trainer_state.json: stateful_callbacks." OURS " is malformed (expected {\"args\": "
                       "{...}, \"attributes\": {...}})", dir);
    const char *key, *twice = json_object_get(st, "args") || json_object_get(attributes, "args") ? "args" : NULL;
    json_t *v;
    json_object_foreach(attributes, key, v) {
        if (!twice && json_object_get(st, key)) twice = key;
    }
    if (twice)
        return err_set(err, "%s/trainer_state.json: %s is both at the top level and in stateful_callbacks." OURS
                       " (expected it once)", dir, twice);
    json_object_set(st, "args", args);
    json_object_update(st, attributes);
    json_object_del(callbacks, OURS);
    return 0;
}

json_t *hf_state_read_history(const json_t *st, long step, const char *dir, GrpoErr *err) {
    const json_t *h = json_object_get(st, "log_history");
    if (!h) return json_array();
    long prev = 0;
    const char *bad = json_is_array(h) ? NULL : "not a list";
    size_t i = 0;
    for (; !bad && i < json_array_size(h); i++) {
        const json_t *e = json_array_get(h, i), *s = json_object_get(e, "step");
        if (!json_is_object(e) || !json_is_integer(s)) bad = "an entry without an integer \"step\"";
        else if (json_integer_value(s) < prev || json_integer_value(s) > step)
            bad = "steps out of order or past global_step";
        else prev = (long)json_integer_value(s);
    }
    if (!bad) return json_deep_copy(h);
    if (json_is_array(h))
        err_set(err, "%s/trainer_state.json: log_history entry %zu: %s (expected a list of the logged dicts, steps "
                "from 0 to %ld in order)", dir, i - 1, bad, step);
    else err_set(err, "%s/trainer_state.json: log_history is %s (expected a list of the logged dicts)", dir, bad);
    return NULL;
}
