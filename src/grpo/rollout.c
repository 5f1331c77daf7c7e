/* grpo/rollout.c — the first half of a GRPO step: a round of P prompts x G
 * completions from the rollouts' source (rollout/source.h: sampled and scored),
 * the rewards turned into group-relative advantages, and (when the loss needs
 * them) the log-probs of the generating policy and of the reference model, and
 * the sampler/trainer correction's weights (is_correction.h). With filter_groups
 * (DAPO's dynamic sampling) the P groups are those with signal among as many
 * rounds of P prompts as it takes. Also logs the rollout's metrics and, with
 * log_completions, completions.jsonl. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/timer.h"
#include "grpo/is_correction.h"
#include "grpo/trainer_internal.h"
#include "io/fsutil.h"
#include "log/completions.h"
#include "train/world.h"

#define STREAM_SHUFFLE 0x73687566666c65ULL /* "shuffle" */

void rollout_free(Rollout *r) {
    if (!r) return;
    rollout_groups_free(&r->g);
    free(r->rewards), free(r->adv), free(r->order);
    free(r->old_rows), free(r->ref_rows), free(r->isw_rows), free(r->old_buf), free(r->ref_buf), free(r->isw_buf);
    free(r->fmean), free(r->fstd), free(r->seqs);
    free(r);
}

/* A rollout with the run's sizes: n = the generation batch, G, F reward functions,
 * rows of max_completion_length. */
static Rollout *rollout_new(const GrpoTrainer *t) {
    int n = t->gen_batch, F = t->src.rewards.n_funcs, F1 = F ? F : 1;
    Rollout *r = xcalloc(1, sizeof *r);
    rollout_groups_init(&r->g, n, t->c.num_generations, F, t->c.gen.max_completion_length, t->src.tools.proc != NULL,
                        t->src.env.proc != NULL);
    r->rewards = xmalloc(sizeof(double) * n);
    r->adv = xmalloc(sizeof(double) * n);
    r->order = xmalloc(sizeof(int) * n);
    r->fmean = xmalloc(sizeof(double) * F1), r->fstd = xmalloc(sizeof(double) * F1);
    r->seqs = xmalloc(sizeof(CompletionRef) * train_model_logprobs_cap(t->tm, TRAIN_REFERENCE)); /* >= B */
    return r;
}

Rollout *rollout_take(GrpoTrainer *t, long index) {
    Rollout *r = t->spare;
    if (r) t->spare = r->next;
    else r = rollout_new(t);
    r->next = NULL;
    r->index = index;
    r->uses = r->pending = 0;
    r->old_logp = r->ref_logp = NULL;
    r->is_w = NULL;
    rollout_groups_clear(&r->g);
    return r;
}

void rollout_release(GrpoTrainer *t, Rollout *r) {
    if (!r) return;
    rollout_groups_free_texts(&r->g);
    r->next = t->spare;
    t->spare = r;
}

/* [n] rows of maxc elements of elem bytes into *buf, both made on first use. */
static void **rows_of(void ***rows, void **buf, int n, int maxc, size_t elem) {
    if (!*rows) {
        *buf = xmalloc(elem * n * (size_t)maxc);
        *rows = xmalloc(sizeof(void *) * n);
        for (int i = 0; i < n; i++) (*rows)[i] = (char *)*buf + elem * i * (size_t)maxc;
    }
    return *rows;
}

float **rollout_old_rows(Rollout *r) {
    return (float **)rows_of((void ***)&r->old_rows, (void **)&r->old_buf, r->g.n, r->g.maxc, sizeof(float));
}

float **rollout_ref_rows(Rollout *r) {
    return (float **)rows_of((void ***)&r->ref_rows, (void **)&r->ref_buf, r->g.n, r->g.maxc, sizeof(float));
}

/* Log-probs of every completion of r under the policy or the reference: this
 * process's range of them, as many a forward as the trainable model takes (the
 * policy's: micro-batches of the training size; the reference's: as many as fit the
 * plan's tokens); then every process has all of them. */
static float **all_logprobs(GrpoTrainer *t, TrainWhich which, Rollout *r) {
    int cap = train_model_logprobs_cap(t->tm, which), lo, hi;
    RolloutGroups *g = &r->g;
    float **out = which == TRAIN_POLICY ? rollout_old_rows(r) : rollout_ref_rows(r);
    train_world_range(t->world, g->n, &lo, &hi);
    CompletionRef *seqs = r->seqs;
    for (int k0 = lo, S = 0; k0 < hi; k0 += S) {
        int n = hi - k0 < cap ? hi - k0 : cap;
        for (int i = 0; i < n; i++) seqs[i] = (CompletionRef){r, k0 + i};
        TrainBatch b;
        micro_batch_of(&t->ms, seqs, n, &b, 1.0f / t->c.gen.sampler.temperature);
        b.S = S = train_model_logprobs_fit(t->tm, which, b.seqs, n);
        train_model_logprobs(t->tm, which, &b, t->ms.logp, NULL);
        for (int i = 0; i < S; i++) {
            int c = k0 + i;
            memcpy(out[c], t->ms.logp + t->ms.off[i], sizeof(float) * g->comp[c].n);
        }
    }
    for (int i = 0; i < g->n; i++) g->len[i] = g->comp[i].n;
    rollout_groups_share_rows(t->world, g, (void *const *)out, g->len, sizeof(float), 0, lo, hi);
    return out;
}

typedef struct {
    GrpoTrainer *t;
    const Rollout *r;
} LogCompletions;

/* completions.jsonl: every completion of the round, in order (on the process that writes files). */
static int log_completions(void *ctx, GrpoErr *err) {
    GrpoTrainer *t = ((LogCompletions *)ctx)->t;
    const Rollout *r = ((LogCompletions *)ctx)->r;
    const RolloutGroups *g = &r->g;
    if (!t->completions_f) {
        char *p = fs_join(t->c.train.output_dir, "completions.jsonl");
        t->completions_f = fopen(p, t->resumed ? "a" : "w");
        int rc = t->completions_f ? 0 : err_set(err, "%s: cannot open for writing", p);
        free(p);
        if (rc) return -1;
    }
    FILE *f = t->completions_f;
    int F = g->F;
    const char **names = xmalloc(sizeof(char *) * (F ? F : 1));
    for (int fi = 0; fi < F; fi++) names[fi] = t->src.rewards.funcs[fi]->name;
    for (int i = 0; i < g->n; i++)
        completion_record_write(f, &(CompletionRecord){t->st.step + 1, g->prompt[i / g->G]->prompt_text, g->text[i],
                                                        g->comp[i].ids, g->comp[i].n, names, g->per_func + i, g->n,
                                                        F, r->rewards[i], r->adv[i], g->comp[i].mask});
    free(names);
    if (fflush(f) || ferror(f))
        return err_set(err, "%s/completions.jsonl: write failed: %s; stopping (the checkpoints are untouched)",
                       t->c.train.output_dir, strerror(errno));
    return 0;
}

/* The rollout's metrics, with TRL's names. */
static void add_metrics(GrpoTrainer *t, const Rollout *r, const GrpoRewardStats *st) {
    MetricAcc *m = t->st.metrics;
    metric_add(m, "reward", st->reward_mean);
    metric_add(m, "reward_std", st->reward_std);
    char name[300];
    for (int f = 0; f < r->g.F; f++) {
        snprintf(name, sizeof name, "rewards/%s/mean", t->src.rewards.funcs[f]->name);
        metric_add(m, name, st->func_mean[f]);
        snprintf(name, sizeof name, "rewards/%s/std", t->src.rewards.funcs[f]->name);
        metric_add(m, name, st->func_std[f]);
    }
    metric_add(m, "frac_reward_zero_std", st->frac_reward_zero_std);
    rollout_groups_metrics(&r->g, m);
}

void rollout_is_weights(const GrpoTrainer *t, Rollout *r) {
    const GrpoLossConfig *c = &t->c.loss;
    const RolloutGroups *g = &r->g;
    CHECK(c->is_correction && r->old_logp);
    r->is_w = (double **)rows_of((void ***)&r->isw_rows, (void **)&r->isw_buf, g->n, g->maxc, sizeof(double));
    for (int i = 0; i < g->n; i++) {
        CHECK(g->comp[i].logp);
        int masked = c->mask_truncated_completions && !g->comp[i].stopped;
        const Completion *ci = &g->comp[i];
        if (!ci->mask) {
            grpo_is_weights(r->is_w[i], r->old_logp[i], ci->logp, ci->n, masked, c);
            continue;
        }
        /* TRL's (old - sampling) * tool_mask: a tool's token differs by 0 (its weight exp(0), its
         * share of a sequence's sum none) */
        float *samp = xmalloc(sizeof(float) * (ci->n ? ci->n : 1));
        for (int k = 0; k < ci->n; k++) samp[k] = ci->mask[k] ? ci->logp[k] : r->old_logp[i][k];
        grpo_is_weights(r->is_w[i], r->old_logp[i], samp, ci->n, masked, c);
        free(samp);
    }
}

/* TRL's sampling metrics: each process's over the completions it generated,
 * then the mean of the means, the max of the maxima, the min of the minima. */
static void add_is_metrics(GrpoTrainer *t, const Rollout *r) {
    const GrpoLossConfig *c = &t->c.loss;
    const RolloutGroups *g = &r->g;
    int P = train_world_size(t->world), n = g->n;
    const float **old = xmalloc(sizeof(float *) * n), **samp = xmalloc(sizeof(float *) * n);
    int *len = xmalloc(sizeof(int) * n);
    uint8_t *masked = xmalloc(n);
    const uint8_t **tmask = xmalloc(sizeof(uint8_t *) * n);
    for (int i = 0; i < n; i++) {
        old[i] = r->old_logp[i], samp[i] = g->comp[i].logp, len[i] = g->comp[i].n, tmask[i] = g->comp[i].mask;
        masked[i] = c->mask_truncated_completions && !g->comp[i].stopped;
    }
    GrpoIsMetrics *each = xmalloc(sizeof(GrpoIsMetrics) * P), all;
    for (int k = 0; k < P; k++) {
        int lo, hi;
        train_world_range_of(t->world, n, k, &lo, &hi);
        grpo_is_metrics(&each[k], old, samp, (const double *const *)r->is_w, len, masked, tmask, lo, hi, c);
    }
    grpo_is_metrics_gather(&all, each, P);
    MetricAcc *m = t->st.metrics;
    metric_add(m, "sampling/sampling_logp_difference/mean", all.diff_mean);
    metric_add(m, "sampling/sampling_logp_difference/max", all.diff_max);
    metric_add(m, "sampling/importance_sampling_ratio/min", all.ratio_min);
    metric_add(m, "sampling/importance_sampling_ratio/mean", all.ratio_mean);
    metric_add(m, "sampling/importance_sampling_ratio/max", all.ratio_max);
    free(old), free(samp), free(len), free(masked), free(each), free(tmask);
}

/* TRL shuffles the generation batch before splitting it into micro-batches. */
static void shuffle(const TrainConfig *c, Rollout *r) {
    Rng rng;
    rng_init(&rng, c->train.seed, rng_mix(STREAM_SHUFFLE, (uint64_t)r->index));
    for (int i = 0; i < r->g.n; i++) r->order[i] = i;
    rng_shuffle(&rng, r->order, r->g.n);
}

/* One round drawn into r at the data position. sum_then_normalize's sum passing
 * what a double holds would give NaN advantages (the same per_func on every
 * process: each stops alike). */
static int draw_round(GrpoTrainer *t, Rollout *r, GrpoErr *err) {
    if (rollout_source_draw(&t->src, &r->g, &t->st.state, err)) return -1;
    if (t->c.aggregation == GRPO_AGG_SUM_THEN_NORMALIZE)
        return reward_weighted_check(&t->src.rewards, r->g.per_func, r->g.n, err);
    return 0;
}

/* DAPO's dynamic sampling (arXiv 2503.14476, as verl's filter_groups): rounds of
 * P prompts, drawn in data order, generated and scored until r holds P groups
 * whose aggregated rewards differ, in data order. A group with equal rewards is
 * dropped; groups with signal beyond a full batch are left unused; every prompt
 * drawn is consumed either way (verl's). After max_num_gen_batches rounds (> 0)
 * that leave r short, the run stops, as verl's does. Every process decides
 * alike: each has every score. Each round is drawn into t->round, made once and
 * reused. */
static int draw_filtered(GrpoTrainer *t, Rollout *r, GrpoErr *err) {
    int F = r->g.F, G = r->g.G, P = r->g.P, kept = 0, rounds = 0, dropped = 0, surplus = 0, rc = 0;
    int max = t->c.max_num_gen_batches;
    double *agg = xmalloc(sizeof(double) * r->g.n);
    while (kept < P && !rc) {
        if (max > 0 && rounds == max) {
            rc = err_set(err, "dynamic sampling (filter_groups): after max_num_gen_batches (%d) rounds of %d prompts, "
                         "%d of the %d groups of a generation batch have rewards that differ (%d groups with equal "
                         "rewards dropped); the prompts may be too easy or too hard for the model: raise "
                         "max_num_gen_batches (0 = no bound) or turn filter_groups off", max, P, kept, P, dropped);
            break;
        }
        if (!t->round) t->round = rollout_take(t, r->index);
        Rollout *c = t->round;
        c->index = r->index;
        rounds++;
        rc = draw_round(t, c, err);
        if (!rc) {
            grpo_aggregate_rewards(agg, c->g.per_func, t->src.rewards.weights, F, c->g.n, G, t->c.aggregation);
            for (int p = 0; p < c->g.P; p++) {
                if (grpo_group_rewards_equal(agg + (size_t)p * G, G)) dropped++;
                else if (kept == P) surplus++;
                else rollout_groups_move(&r->g, kept++, &c->g, p);
            }
        }
        rollout_groups_clear(&c->g);
    }
    free(agg);
    if (!rc) {
        metric_add(t->st.metrics, "dynamic_sampling/gen_rounds", rounds);
        metric_add(t->st.metrics, "dynamic_sampling/groups_dropped", dropped);
        metric_add(t->st.metrics, "dynamic_sampling/groups_surplus", surplus);
    }
    return rc;
}

int rollout_make(GrpoTrainer *t, Rollout **out, GrpoErr *err) {
    long drawn = t->src.position;
    Rollout *r = rollout_take(t, t->rounds_made);
    RolloutGroups *g = &r->g;
    shuffle(&t->c, r);
    int rc = t->c.filter_groups ? draw_filtered(t, r, err) : draw_round(t, r, err);
    if (!rc) { /* the group-relative advantages over the batch trained on */
        GrpoRewardStats st = {0, 0, 0, r->fmean, r->fstd};
        grpo_advantages(r->adv, r->rewards, &st, g->per_func, t->src.rewards.weights, g->F, g->n, g->G,
                        t->c.scale_rewards, t->c.aggregation);
        add_metrics(t, r, &st);
    }
    double t2 = time_now_s();
    /* the generating policy's and the reference's log-probs */
    if (!rc && t->need_old) r->old_logp = all_logprobs(t, TRAIN_POLICY, r);
    if (!rc && t->c.loss.beta != 0) r->ref_logp = all_logprobs(t, TRAIN_REFERENCE, r);
    if (!rc && t->c.loss.is_correction) {
        rollout_is_weights(t, r);
        add_is_metrics(t, r);
    }
    t->st.t_ref += time_now_s() - t2;
    if (!rc && t->c.log_completions) rc = train_world_once(t->world, log_completions, &(LogCompletions){t, r}, err);
    if (rc) {
        rollout_release(t, r);
        t->src.position = drawn;
        return -1;
    }
    t->rounds_made++;
    *out = r;
    return 0;
}
