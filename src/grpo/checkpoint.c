/* grpo/checkpoint.c — what a GRPO checkpoint adds to train/checkpoint.c: the
 * generation batch still being used (rollout.json: completions, rewards,
 * advantages, old/reference log-probs) and the trainer's position
 * (trainer_state.json: step, data position, random-stream state), so a resumed run
 * equals one never interrupted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grpo/trainer_internal.h"
#include "io/fsutil.h"
#include "train/checkpoint.h"

#define STATE_VERSION 1

/* ---- the rollout still in use ---- */

static json_t *floats_json(const float *x, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(x[i]));
    return a;
}

static json_t *doubles_json(const double *x, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, isnan(x[i]) ? json_null() : json_real(x[i]));
    return a;
}

static json_t *rollout_json(const Rollout *r, int F) {
    json_t *o = json_pack("{s:I, s:i, s:i, s:i, s:i}", "index", (json_int_t)r->index, "n", r->n, "P", r->P, "G", r->G,
                          "uses", r->uses);
    json_t *ex = json_array(), *ord = json_array(), *comps = json_array();
    for (int p = 0; p < r->P; p++) json_array_append_new(ex, json_integer(r->example[p]));
    for (int i = 0; i < r->n; i++) json_array_append_new(ord, json_integer(r->order[i]));
    for (int i = 0; i < r->n; i++) {
        json_t *ids = json_array();
        for (int k = 0; k < r->comp[i].n; k++) json_array_append_new(ids, json_integer(r->comp[i].ids[k]));
        json_t *c = json_pack("{s:o, s:b, s:s}", "ids", ids, "stopped", r->comp[i].stopped, "text", r->text[i]);
        if (r->old_logp) json_object_set_new(c, "old_logp", floats_json(r->old_logp[i], r->comp[i].n));
        if (r->ref_logp) json_object_set_new(c, "ref_logp", floats_json(r->ref_logp[i], r->comp[i].n));
        json_array_append_new(comps, c);
    }
    json_object_set_new(o, "example", ex);
    json_object_set_new(o, "order", ord);
    json_object_set_new(o, "completions", comps);
    json_object_set_new(o, "per_func", doubles_json(r->per_func, F * r->n));
    json_object_set_new(o, "rewards", doubles_json(r->rewards, r->n));
    json_object_set_new(o, "advantages", doubles_json(r->adv, r->n));
    return o;
}

static int ints_from(json_t *a, int *out, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return -1;
    for (int i = 0; i < n; i++) {
        if (!json_is_integer(json_array_get(a, i))) return -1;
        out[i] = (int)json_integer_value(json_array_get(a, i));
    }
    return 0;
}

static int doubles_from(json_t *a, double *out, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return -1;
    for (int i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (json_is_null(v)) out[i] = NAN;
        else if (json_is_number(v)) out[i] = json_number_value(v);
        else return -1;
    }
    return 0;
}

static float *floats_from(json_t *a, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) return NULL;
    float *x = xmalloc(sizeof(float) * (n ? n : 1));
    for (int i = 0; i < n; i++) x[i] = (float)json_number_value(json_array_get(a, i));
    return x;
}

static int rollout_from_json(Trainer *t, json_t *o, Rollout **out, const char *path, GrpoErr *err) {
    int F = t->rewards.n_funcs;
    Rollout *r = xcalloc(1, sizeof *r);
    json_int_t idx;
    if (json_unpack(o, "{s:I, s:i, s:i, s:i, s:i}", "index", &idx, "n", &r->n, "P", &r->P, "G", &r->G, "uses", &r->uses) ||
        r->n != t->gen_batch || r->G != t->c->num_generations || r->P * r->G != r->n) {
        free(r);
        return err_set(err, "%s: the saved generation batch does not match this run's batch settings", path);
    }
    r->index = idx;
    r->example = xmalloc(sizeof(int) * r->P);
    r->order = xmalloc(sizeof(int) * r->n);
    r->comp = xcalloc(r->n, sizeof(Completion));
    r->text = xcalloc(r->n, sizeof(char *));
    r->per_func = xmalloc(sizeof(double) * F * r->n);
    r->rewards = xmalloc(sizeof(double) * r->n);
    r->adv = xmalloc(sizeof(double) * r->n);
    json_t *comps = json_object_get(o, "completions");
    int bad = ints_from(json_object_get(o, "example"), r->example, r->P) ||
              ints_from(json_object_get(o, "order"), r->order, r->n) ||
              doubles_from(json_object_get(o, "per_func"), r->per_func, F * r->n) ||
              doubles_from(json_object_get(o, "rewards"), r->rewards, r->n) ||
              doubles_from(json_object_get(o, "advantages"), r->adv, r->n) || !json_is_array(comps) ||
              (int)json_array_size(comps) != r->n;
    for (int i = 0; i < r->n && !bad; i++) {
        json_t *c = json_array_get(comps, i), *ids = json_object_get(c, "ids");
        int n = json_is_array(ids) ? (int)json_array_size(ids) : -1;
        if (n < 1 || n > t->c->max_completion_length) {
            bad = 1;
            break;
        }
        r->comp[i].ids = xmalloc(sizeof(int32_t) * t->c->max_completion_length);
        r->comp[i].n = n;
        r->comp[i].stopped = json_is_true(json_object_get(c, "stopped"));
        int tmp[n];
        bad |= ints_from(ids, tmp, n);
        for (int k = 0; k < n; k++) r->comp[i].ids[k] = tmp[k];
        json_t *tx = json_object_get(c, "text");
        r->text[i] = xstrdup(json_is_string(tx) ? json_string_value(tx) : "");
        json_t *old = json_object_get(c, "old_logp"), *ref = json_object_get(c, "ref_logp");
        if (old) {
            if (!r->old_logp) r->old_logp = xcalloc(r->n, sizeof(float *));
            bad |= !(r->old_logp[i] = floats_from(old, n));
        }
        if (ref) {
            if (!r->ref_logp) r->ref_logp = xcalloc(r->n, sizeof(float *));
            bad |= !(r->ref_logp[i] = floats_from(ref, n));
        }
    }
    for (int p = 0; p < r->P && !bad; p++) bad |= r->example[p] < 0 || r->example[p] >= t->data.n;
    if (bad) {
        rollout_free(r);
        return err_set(err, "%s: malformed or from another dataset", path);
    }
    *out = r;
    return 0;
}

int checkpoint_save(Trainer *t, GrpoErr *err) {
    const TrainConfig *c = t->c;
    int per_round = t->spg * c->num_iterations;
    json_t *state = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:i, s:I, s:{s:s, s:I, s:s}}", "version", STATE_VERSION,
                              "global_step", (json_int_t)t->step, "max_steps", (json_int_t)t->total_steps,
                              "generation_rounds", (json_int_t)t->rounds, "data_position",
                              (json_int_t)(t->rounds * (t->gen_batch / c->num_generations)), "num_tokens",
                              (json_int_t)t->num_tokens, "nonfinite_streak", t->nonfinite_streak, "adam_step",
                              (json_int_t)t->opt.step, "rng", "algorithm", "philox4x32-10", "seed",
                              (json_int_t)c->train.seed, "streams", "derived from (seed, data position, round index)");
    json_t *ro = t->cur && t->cur->uses < per_round ? rollout_json(t->cur, t->rewards.n_funcs) : NULL;
    CkptWrite w = {c->output_dir, t->step, &t->policy, c->model_dir, &t->opt, t->have_ref ? &t->ref : NULL,
                   state, "rollout.json", ro, c->train.save_total_limit};
    int rc = ckpt_write(&w, err);
    json_decref(ro);
    json_decref(state);
    return rc;
}

int checkpoint_load(Trainer *t, const char *dir, GrpoErr *err) {
    json_t *st = NULL;
    if (ckpt_read(dir, &t->policy, &t->opt, t->have_ref ? &t->ref : NULL, &st, err)) return -1;
    json_int_t step, rounds, tokens, astep;
    int streak, version, rc = 0;
    if (json_unpack(st, "{s:i, s:I, s:I, s:I, s:i, s:I}", "version", &version, "global_step", &step,
                    "generation_rounds", &rounds, "num_tokens", &tokens, "nonfinite_streak", &streak, "adam_step",
                    &astep) || version != STATE_VERSION)
        rc = err_set(err, "%s/trainer_state.json: malformed (expected global_step, generation_rounds, num_tokens, "
                     "adam_step of a grpo train checkpoint)", dir);
    json_decref(st);
    if (rc) return -1;
    t->step = step;
    t->rounds = rounds;
    t->num_tokens = tokens;
    t->nonfinite_streak = streak;
    t->opt.step = astep;
    char *p = fs_join(dir, "rollout.json");
    if (fs_exists(p)) {
        json_error_t je;
        json_t *ro = json_load_file(p, 0, &je);
        rc = ro ? rollout_from_json(t, ro, &t->cur, p, err) : err_set(err, "%s: invalid JSON: %s", p, je.text);
        json_decref(ro);
    }
    free(p);
    ckpt_truncate_log(t->c->output_dir, "metrics.jsonl", t->step);
    ckpt_truncate_log(t->c->output_dir, "completions.jsonl", t->step);
    return rc;
}
