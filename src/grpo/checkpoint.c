/* grpo/checkpoint.c — what a GRPO checkpoint adds to the training loop's (and
 * the trainable model's reference): the generation batch still being used
 * (rollout.json: completions, rewards, advantages, old/reference log-probs, with
 * tools or an environment the token spans their turns appended, so a resume never
 * calls a tool or the environment again) and
 * GRPO's position in trainer_state.json (generation rounds, data position, random
 * streams), so a resumed run equals one never interrupted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grpo/trainer_internal.h"
#include "io/fsutil.h"
#include "io/json_numbers.h"

/* ---- the rollout still in use ---- */

static json_t *rollout_json(const Rollout *r, int F) {
    const RolloutGroups *g = &r->g;
    json_t *o = json_pack("{s:I, s:i, s:i, s:i, s:i}", "index", (json_int_t)r->index, "n", g->n, "P", g->P, "G", g->G,
                          "uses", r->uses);
    json_t *ex = json_array(), *ord = json_array(), *comps = json_array();
    for (int p = 0; p < g->P; p++) json_array_append_new(ex, json_integer(g->example[p]));
    for (int i = 0; i < g->n; i++) json_array_append_new(ord, json_integer(r->order[i]));
    for (int i = 0; i < g->n; i++) {
        json_t *ids = json_array();
        for (int k = 0; k < g->comp[i].n; k++) json_array_append_new(ids, json_integer(g->comp[i].ids[k]));
        json_t *c = json_pack("{s:o, s:b, s:s}", "ids", ids, "stopped", g->comp[i].stopped, "text", g->text[i]);
        if (r->old_logp) json_object_set_new(c, "old_logp", json_from_floats(r->old_logp[i], g->comp[i].n));
        if (r->ref_logp) json_object_set_new(c, "ref_logp", json_from_floats(r->ref_logp[i], g->comp[i].n));
        if (r->is_w) /* the correction's weights are recomputed from these and old_logp */
            json_object_set_new(c, "sampling_logp", json_from_floats(g->comp[i].logp, g->comp[i].n));
        if (g->comp[i].mask) /* the tool mask's 0s, as completions.jsonl's tool_spans */
            json_object_set_new(c, "tool_spans", json_from_zero_runs(g->comp[i].mask, g->comp[i].n));
        json_array_append_new(comps, c);
    }
    json_object_set_new(o, "example", ex);
    json_object_set_new(o, "order", ord);
    json_object_set_new(o, "completions", comps);
    json_object_set_new(o, "per_func", json_from_doubles(g->per_func, F * g->n));
    json_object_set_new(o, "rewards", json_from_doubles(r->rewards, g->n));
    json_object_set_new(o, "advantages", json_from_doubles(r->adv, g->n));
    return o;
}

/* to[n] := the JSON array of n numbers; 1 when it is not one. */
static int copy_floats(float *to, const json_t *a, int n) {
    float *v = json_to_floats(a, n);
    if (v) memcpy(to, v, sizeof(float) * n);
    free(v);
    return !v;
}

static int rollout_from_json(GrpoTrainer *t, json_t *o, Rollout **out, const char *path, GrpoErr *err) {
    int F = t->src.rewards.n_funcs, n_saved, P, G, uses;
    json_int_t idx;
    if (json_unpack(o, "{s:I, s:i, s:i, s:i, s:i}", "index", &idx, "n", &n_saved, "P", &P, "G", &G, "uses", &uses) ||
        n_saved != t->gen_batch || G != t->c.num_generations || P * G != n_saved)
        return err_set(err, "%s: the saved generation batch does not match this run's batch settings", path);
    Rollout *r = rollout_take(t, idx); /* the run's sizes: n, P, G as saved */
    RolloutGroups *g = &r->g;
    r->uses = uses;
    json_t *comps = json_object_get(o, "completions");
    int bad = json_to_ints(json_object_get(o, "example"), g->example, g->P) ||
              json_to_ints(json_object_get(o, "order"), r->order, g->n) ||
              json_to_doubles(json_object_get(o, "per_func"), g->per_func, F * g->n) ||
              json_to_doubles(json_object_get(o, "rewards"), r->rewards, g->n) ||
              json_to_doubles(json_object_get(o, "advantages"), r->adv, g->n) || !json_is_array(comps) ||
              (int)json_array_size(comps) != g->n;
    for (int i = 0; i < g->n && !bad; i++) {
        json_t *c = json_array_get(comps, i), *ids = json_object_get(c, "ids");
        int n = json_is_array(ids) ? (int)json_array_size(ids) : -1;
        if (n < 1 || n > t->c.gen.max_completion_length) {
            bad = 1;
            break;
        }
        g->comp[i].n = n;
        g->comp[i].stopped = json_is_true(json_object_get(c, "stopped"));
        int tmp[n];
        bad |= json_to_ints(ids, tmp, n);
        for (int k = 0; k < n; k++) {
            bad |= tmp[k] < 0 || tmp[k] >= train_model_config(t->tm)->vocab_size; /* ids index the embedding */
            g->comp[i].ids[k] = tmp[k];
        }
        json_t *spans = json_object_get(c, "tool_spans");
        if (t->src.tools.proc || t->src.env.proc) { /* with turns every completion has its mask, as a made rollout's */
            bad |= json_to_zero_runs(spans, g->comp[i].mask, n, &g->comp[i].n_turns);
        } else if (spans) { /* tool or environment turns saved, both off now */
            rollout_release(t, r);
            return err_set(err, "%s: saved by a run with tools or an environment: resume it with the same tools and "
                                "tool_command, or environment_command", path);
        }
        json_t *tx = json_object_get(c, "text");
        g->text[i] = xstrdup(json_is_string(tx) ? json_string_value(tx) : "");
        json_t *old = json_object_get(c, "old_logp"), *ref = json_object_get(c, "ref_logp");
        json_t *samp = json_object_get(c, "sampling_logp");
        if (t->c.loss.is_correction) bad |= !samp || !old || copy_floats(g->comp[i].logp, samp, n);
        if (old) bad |= copy_floats((r->old_logp = rollout_old_rows(r))[i], old, n);
        if (ref) bad |= copy_floats((r->ref_logp = rollout_ref_rows(r))[i], ref, n);
    }
    for (int i = 0; i < g->n && !bad; i++) bad |= r->order[i] < 0 || r->order[i] >= g->n;
    bad |= r->uses < 0 || r->uses > t->spg * t->c.num_iterations;
    for (int p = 0; p < g->P && !bad; p++) {
        bad |= g->example[p] < 0 || g->example[p] >= t->src.sess.data.n;
        if (!bad) g->prompt[p] = &t->src.sess.data.ex[g->example[p]];
    }
    if (bad) {
        rollout_release(t, r);
        return err_set(err, "%s: malformed or from another dataset%s%s", path,
                       t->c.loss.is_correction ? " (or saved without vllm_importance_sampling_correction)" : "",
                       t->src.tools.proc ? " (or saved without tools)"
                       : t->src.env.proc ? " (or saved without an environment)" : "");
    }
    if (t->c.loss.is_correction) rollout_is_weights(t, r);
    *out = r;
    return 0;
}

int grpo_checkpoint_save(void *self, const char *dir, json_t *state, GrpoErr *err) {
    GrpoTrainer *t = self;
    const TrainConfig *c = &t->c;
    json_t *g = json_pack("{s:I, s:I, s:{s:s, s:I, s:s}}", "generation_rounds", (json_int_t)t->rounds_made,
                          "data_position", (json_int_t)t->src.position, "rng",
                          "algorithm", "philox4x32-10", "seed", (json_int_t)c->train.seed, "streams",
                          "derived from (seed, data position, round index)");
    json_object_update(state, g);
    json_decref(g);
    if (c->loss.use_adaptive_entropy) /* the controller's state (TRL: entropy_ctrl_state.json) */
        json_object_set_new(state, "entropy_control",
                            json_pack("{s:f, s:o}", "entropy_coef", t->entropy_coef, "last_world_entropy",
                                      isfinite(t->last_world_entropy) ? json_real(t->last_world_entropy) : json_null()));
    int rc = 0;
    if (t->cur && t->cur->uses < t->spg * c->num_iterations) {
        json_t *ro = rollout_json(t->cur, t->src.rewards.n_funcs);
        char *p = fs_join(dir, "rollout.json");
        if (json_dump_file(ro, p, JSON_COMPACT)) rc = err_set(err, "%s: cannot write", p);
        free(p);
        json_decref(ro);
    }
    return rc;
}

int grpo_checkpoint_load(void *self, const char *dir, const json_t *state, GrpoErr *err) {
    GrpoTrainer *t = self;
    json_int_t rounds;
    if (json_unpack((json_t *)state, "{s:I}", "generation_rounds", &rounds))
        return err_set(err, "%s/trainer_state.json: malformed (expected generation_rounds of a grpo train checkpoint)",
                       dir);
    t->rounds_made = rounds;
    /* the prompts drawn: more than the rounds' with filter_groups (older checkpoints
     * have it too, as rounds x prompts per round) */
    const json_t *pos = json_object_get(state, "data_position");
    t->src.position = json_is_integer(pos) ? (long)json_integer_value(pos) : rounds * (t->gen_batch / t->c.num_generations);
    if (t->src.position < 0)
        return err_set(err, "%s/trainer_state.json: data_position (%ld) must be >= 0", dir, t->src.position);
    t->resumed = 1;
    const json_t *ec = json_object_get(state, "entropy_control");
    if (t->c.loss.use_adaptive_entropy) {
        const json_t *coef = json_object_get(ec, "entropy_coef"), *last = json_object_get(ec, "last_world_entropy");
        if (!json_is_number(coef) || (!json_is_number(last) && !json_is_null(last)))
            return err_set(err, "%s/trainer_state.json: entropy_control (entropy_coef, last_world_entropy) is missing or "
                           "malformed; the checkpoint was not written with use_adaptive_entropy", dir);
        t->entropy_coef = json_number_value(coef);
        t->last_world_entropy = json_is_null(last) ? INFINITY : json_number_value(last);
    }
    int rc = 0;
    char *p = fs_join(dir, "rollout.json");
    if (fs_exists(p)) {
        json_t *ro = fs_load_json(p, 0, err);
        rc = ro ? rollout_from_json(t, ro, &t->cur, p, err) : -1;
        json_decref(ro);
    }
    free(p);
    return rc;
}
