/* grpo/rollout.c — the first half of a GRPO step: for P prompts, sample G
 * completions each, score them with the reward functions, turn the rewards into
 * group-relative advantages, and (when the loss needs them) record the log-probs
 * of the generating policy and of the reference model, and the sampler/trainer
 * correction's weights (is_correction.h). With filter_groups (DAPO's dynamic
 * sampling) the P groups are those with signal among as many rounds of P prompts
 * as it takes. Also logs the rollout's metrics and, with log_completions,
 * completions.jsonl. */
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

#define STREAM_GEN 0x67656e65726174ULL   /* "generat" */
#define STREAM_SHUFFLE 0x73687566666c65ULL /* "shuffle" */

void rollout_free(Rollout *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->text[i]);
    free(r->example), free(r->prompt), free(r->comp), free(r->text), free(r->per_func), free(r->rewards);
    free(r->adv), free(r->order), free(r->tool_calls), free(r->tool_failures), free(r->env_reward);
    free(r->ids_buf), free(r->logp_buf), free(r->mask_buf);
    free(r->old_rows), free(r->ref_rows), free(r->isw_rows), free(r->old_buf), free(r->ref_buf), free(r->isw_buf);
    free(r->items), free(r->scores), free(r->score_rows), free(r->len), free(r->share), free(r->fmean), free(r->fstd);
    free(r->seqs);
    tok_decode_work_free(r->decode);
    free(r);
}

/* r's completions empty on their rows of the rollout's memory, its texts freed. */
static void rollout_clear(Rollout *r) {
    for (int i = 0; i < r->n; i++) {
        size_t row = (size_t)i * r->maxc;
        r->comp[i] = (Completion){.ids = r->ids_buf + row, .logp = r->logp_buf + row,
                                  .mask = r->mask_buf ? r->mask_buf + row : NULL};
        free(r->text[i]);
        r->text[i] = NULL;
    }
}

/* A rollout with the run's sizes: n = the generation batch, G, F reward functions,
 * rows of max_completion_length. */
static Rollout *rollout_new(const GrpoTrainer *t) {
    int n = t->gen_batch, G = t->c.num_generations, F = t->rewards.n_funcs, maxc = t->c.gen.max_completion_length;
    int F1 = F ? F : 1, B = t->c.train.per_device_train_batch_size;
    Rollout *r = xcalloc(1, sizeof *r);
    r->G = G;
    r->n = n;
    r->P = n / G;
    r->maxc = maxc;
    r->example = xmalloc(sizeof(int) * r->P);
    r->prompt = xmalloc(sizeof(DatasetExample *) * r->P);
    r->comp = xcalloc(n, sizeof(Completion));
    r->text = xcalloc(n, sizeof(char *));
    r->decode = tok_decode_work_new();
    r->per_func = xmalloc(sizeof(double) * F1 * n);
    r->rewards = xmalloc(sizeof(double) * n);
    r->adv = xmalloc(sizeof(double) * n);
    r->order = xmalloc(sizeof(int) * n);
    r->ids_buf = xmalloc(sizeof(int32_t) * n * (size_t)maxc);
    r->logp_buf = xmalloc(sizeof(float) * n * (size_t)maxc);
    if (t->tools.proc || t->env.proc) r->mask_buf = xmalloc((size_t)n * maxc);
    if (t->tools.proc) r->tool_calls = xcalloc(n, sizeof(int)), r->tool_failures = xcalloc(n, sizeof(int));
    if (t->env.proc) r->env_reward = xmalloc(sizeof(double) * n);
    r->items = xmalloc(sizeof(RewardItem) * n);
    r->scores = xmalloc(sizeof(double) * F1 * n);
    r->score_rows = xmalloc(sizeof(double *) * n);
    r->len = xmalloc(sizeof(int) * n);
    r->share = xmalloc(sizeof(void *) * n);
    r->fmean = xmalloc(sizeof(double) * F1), r->fstd = xmalloc(sizeof(double) * F1);
    r->seqs = xmalloc(sizeof(CompletionRef) * B);
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
    rollout_clear(r);
    return r;
}

void rollout_release(GrpoTrainer *t, Rollout *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->text[i]), r->text[i] = NULL;
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
    return (float **)rows_of((void ***)&r->old_rows, (void **)&r->old_buf, r->n, r->maxc, sizeof(float));
}

float **rollout_ref_rows(Rollout *r) {
    return (float **)rows_of((void ***)&r->ref_rows, (void **)&r->ref_buf, r->n, r->maxc, sizeof(float));
}

/* After this process filled rows[i] for i in [lo, hi) (len[i] elements of elem
 * bytes, rows of the rollout's memory): every process has every row, a received
 * one copied into its row. with_len: the lengths travel too. */
static void share_rows(const TrainWorld *w, Rollout *r, void *const *rows, int *len, size_t elem, int with_len,
                       int lo, int hi) {
    if (train_world_size(w) == 1) return;
    for (int i = 0; i < r->n; i++) r->share[i] = i >= lo && i < hi ? rows[i] : NULL;
    train_world_share(w, r->share, len, r->n, elem, with_len);
    for (int i = 0; i < r->n; i++)
        if (i < lo || i >= hi) {
            memcpy(rows[i], r->share[i], elem * len[i]);
            free(r->share[i]); /* received: malloc'd by the share */
        }
}

/* Log-probs of every completion of r under the policy or the reference: this
 * process's range of them, in micro-batches of the training size; then every
 * process has all of them. */
static float **all_logprobs(GrpoTrainer *t, TrainWhich which, Rollout *r) {
    int B = t->c.train.per_device_train_batch_size, lo, hi;
    float **out = which == TRAIN_POLICY ? rollout_old_rows(r) : rollout_ref_rows(r);
    train_world_range(t->world, r->n, &lo, &hi);
    CompletionRef *seqs = r->seqs;
    for (int k0 = lo; k0 < hi; k0 += B) {
        int S = hi - k0 < B ? hi - k0 : B;
        for (int i = 0; i < S; i++) seqs[i] = (CompletionRef){r, k0 + i};
        TrainBatch b;
        micro_batch_of(&t->ms, seqs, S, &b, 1.0f / t->c.gen.sampler.temperature);
        train_model_logprobs(t->tm, which, &b, t->ms.logp, NULL);
        for (int i = 0; i < S; i++) {
            int c = k0 + i;
            memcpy(out[c], t->ms.logp + t->ms.off[i], sizeof(float) * r->comp[c].n);
        }
    }
    for (int i = 0; i < r->n; i++) r->len[i] = r->comp[i].n;
    share_rows(t->world, r, (void *const *)out, r->len, sizeof(float), 0, lo, hi);
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
    if (!t->completions_f) {
        char *p = fs_join(t->c.train.output_dir, "completions.jsonl");
        t->completions_f = fopen(p, t->resumed ? "a" : "w");
        int rc = t->completions_f ? 0 : err_set(err, "%s: cannot open for writing", p);
        free(p);
        if (rc) return -1;
    }
    FILE *f = t->completions_f;
    int F = t->rewards.n_funcs;
    const char **names = xmalloc(sizeof(char *) * (F ? F : 1));
    for (int fi = 0; fi < F; fi++) names[fi] = t->rewards.funcs[fi]->name;
    for (int i = 0; i < r->n; i++)
        completion_record_write(f, &(CompletionRecord){t->st.step + 1, r->prompt[i / r->G]->prompt_text, r->text[i],
                                                        r->comp[i].ids, r->comp[i].n, names, r->per_func + i, r->n,
                                                        F, r->rewards[i], r->adv[i], r->comp[i].mask});
    free(names);
    if (fflush(f) || ferror(f))
        return err_set(err, "%s/completions.jsonl: write failed: %s; stopping (the checkpoints are untouched)",
                       t->c.train.output_dir, strerror(errno));
    return 0;
}

/* The calls the tool loop made since (calls, failures), counted to completion index. */
static void count_calls(struct RolloutTurns *rt, int index, long calls, long failures) {
    if (!rt->calls || index < 0) return;
    rt->calls[index] += (int)(rt->loop->calls - calls);
    rt->failures[index] += (int)(rt->loop->failures - failures);
}

int rollout_turn_end(void *ctx, int index, const Completion *c, const int32_t **ids) {
    struct RolloutTurns *rt = ctx;
    long calls = rt->loop->calls, failures = rt->loop->failures;
    int k = tool_loop_turn_end(rt->loop, index, c, ids);
    count_calls(rt, index, calls, failures);
    return k;
}

int rollout_turn_begin(void *ctx, int index, const Completion *c, const int32_t **ids) {
    struct RolloutTurns *rt = ctx;
    long calls = rt->loop->calls, failures = rt->loop->failures;
    int k = tool_loop_turn_begin(rt->loop, index, c, ids);
    count_calls(rt, index, calls, failures);
    return k;
}

int rollout_turn_wait(void *ctx, int block, int *index, const int32_t **ids) {
    struct RolloutTurns *rt = ctx;
    long calls = rt->loop->calls, failures = rt->loop->failures;
    *index = -1;
    int k = tool_loop_turn_wait(rt->loop, block, index, ids);
    count_calls(rt, *index, calls, failures);
    return k;
}

/* With tools or an environment, every process gets the masks of every completion
 * (and with tools their call counts). */
static void share_tools(GrpoTrainer *t, Rollout *r, int lo, int hi) {
    void **mask = xmalloc(sizeof(void *) * r->n), **cnt = xmalloc(sizeof(void *) * r->n);
    int *len = xmalloc(sizeof(int) * r->n), *two = xmalloc(sizeof(int) * r->n);
    for (int i = 0; i < r->n; i++) {
        mask[i] = r->comp[i].mask, len[i] = r->comp[i].n, two[i] = 2;
        cnt[i] = NULL;
        if (i >= lo && i < hi && r->tool_calls) {
            int *c2 = xmalloc(sizeof(int) * 2);
            c2[0] = r->tool_calls[i], c2[1] = r->tool_failures[i];
            cnt[i] = c2;
        }
    }
    share_rows(t->world, r, mask, len, 1, 0, lo, hi);
    if (r->tool_calls) train_world_share(t->world, cnt, two, r->n, sizeof(int), 0);
    for (int i = 0; i < r->n; i++) {
        const int *c2 = cnt[i];
        if (c2) r->tool_calls[i] = c2[0], r->tool_failures[i] = c2[1];
        free(cnt[i]);
    }
    free(mask), free(cnt), free(len), free(two);
}

void rollout_weights_current(GrpoTrainer *t) {
    const GenDevice *dv = train_model_gen_device(t->tm); /* after a resume the device's weights are the old ones */
    CHECK(dv == t->sess.gen.opts.device);                /* the generator decodes where the model trains */
}

/* The round's prompts (data positions pos0 .. pos0 + P - 1) and this process's
 * slice of their completions, completion i of prompt position pos drawing from
 * stream (pos, i) whichever process draws it; then every process has them all.
 * With tools, the calls of each completion are counted; a tool process failing
 * on any process stops every one. */
static int generate(GrpoTrainer *t, Rollout *r, long pos0, GrpoErr *err) {
    int lo, hi, rc = 0;
    rollout_weights_current(t);
    train_world_range(t->world, r->n, &lo, &hi);
    if (r->tool_calls) {
        memset(r->tool_calls, 0, sizeof(int) * r->n);
        memset(r->tool_failures, 0, sizeof(int) * r->n);
    }
    for (int i = 0; r->env_reward && i < r->n; i++) r->env_reward[i] = NAN;
    for (int p = 0; p < r->P; p++) {
        long pos = pos0 + p;
        r->example[p] = dataset_sampler_index(&t->data_order, pos);
        const DatasetExample *ex = r->prompt[p] = &t->sess.data.ex[r->example[p]];
        int a = p * r->G > lo ? p * r->G : lo, b = (p + 1) * r->G < hi ? (p + 1) * r->G : hi;
        if (a >= b || rc) continue;
        if (r->tool_calls) /* turn_end's index is the completion's within its group */
            t->turns.calls = r->tool_calls + p * r->G, t->turns.failures = r->tool_failures + p * r->G;
        if (r->env_reward) /* the environment sees the group's prompt and row */
            env_loop_begin_group(&t->env, ex->prompt, ex->row, r->G);
        if (gen_group_part(&t->sess.gen, ex->prompt_ids, ex->n_prompt_ids, a - p * r->G, b - a,
                           rng_mix(STREAM_GEN, (uint64_t)pos), r->comp + a) < 0) {
            rc = err_set(err, "%s", r->env_reward ? t->env.err.msg : t->tools.err.msg); /* the completions left empty */
            continue;
        }
        for (int i = a; r->env_reward && i < b; i++) r->env_reward[i] = env_loop_reward(&t->env, i - p * r->G);
        for (int i = a; i < b; i++) t->st.tokens += ex->n_prompt_ids + r->comp[i].n;
    }
    t->turns.calls = t->turns.failures = NULL;
    if (train_world_check(t->world, rc, err)) return -1;
    if (train_world_size(t->world) == 1) return 0;
    /* across processes (not a single process's steady state): the shares' own lists */
    void **ids = xmalloc(sizeof(void *) * r->n), **stop = xmalloc(sizeof(void *) * r->n);
    int *len = xmalloc(sizeof(int) * r->n), *one = xmalloc(sizeof(int) * r->n);
    for (int i = 0; i < r->n; i++) ids[i] = r->comp[i].ids, len[i] = r->comp[i].n, stop[i] = &r->comp[i].stopped, one[i] = 1;
    share_rows(t->world, r, ids, len, sizeof(int32_t), 1, lo, hi);
    train_world_share(t->world, stop, one, r->n, sizeof(int), 0);
    void **lp = xmalloc(sizeof(void *) * r->n); /* the sampling log-probs, as long as the ids */
    for (int i = 0; i < r->n; i++) lp[i] = r->comp[i].logp;
    share_rows(t->world, r, lp, len, sizeof(float), 0, lo, hi);
    for (int i = 0; i < r->n; i++)
        if (i < lo || i >= hi) {
            r->comp[i].n = len[i], r->comp[i].stopped = *(int *)stop[i];
            free(stop[i]);
        }
    free(ids), free(stop), free(len), free(one), free(lp);
    if (r->tool_calls || r->env_reward) share_tools(t, r, lo, hi);
    return 0;
}

/* Decodes every completion; scores this process's slice (a reward failing on
 * any process stops every one), then every process has every score. */
static int score(GrpoTrainer *t, Rollout *r, GrpoErr *err) {
    int F = t->rewards.n_funcs, lo, hi;
    train_world_range(t->world, r->n, &lo, &hi);
    int cnt = hi - lo;
    RewardItem *items = r->items;
    int rc = 0;
    for (int i = 0; i < r->n && !rc; i++) {
        const DatasetExample *ex = r->prompt[i / r->G];
        size_t len = 0;
        if (tok_decode_generated_in(t->sess.tok, r->decode, r->comp[i].ids, r->comp[i].n, 1, &r->text[i], &len, err))
            rc = -1;
        if (i >= lo && i < hi)
            items[i - lo] = (RewardItem){ex->prompt, ex->prompt_text, r->text[i], r->comp[i].ids, r->comp[i].n,
                                         ex->row, t->sess.data.path, ex->line,
                                         r->env_reward ? &r->env_reward[i] : NULL};
    }
    double *mine = r->scores; /* [F][cnt] */
    json_t *trainer_state = hf_state_fields(&t->st.state); /* TRL passes the trainer's state */
    RewardBatch batch = {items, cnt, trainer_state, t->sess.data.columns, t->sess.data.n_columns};
    if (!rc && cnt) rc = reward_set_compute(&t->rewards, &batch, mine, NULL, err);
    json_decref(trainer_state);
    rc = train_world_check(t->world, rc, err); /* a reward failing on any process stops every one */
    if (!rc && train_world_size(t->world) == 1) {
        for (int f = 0; f < F; f++)
            memcpy(r->per_func + (size_t)f * r->n, mine + (size_t)f * cnt, sizeof(double) * cnt);
    } else if (!rc) { /* per_func[f][i]: each completion's F scores travel together */
        double **row = r->score_rows;
        for (int i = 0; i < r->n; i++) {
            r->len[i] = F;
            row[i] = i >= lo && i < hi ? xmalloc(sizeof(double) * (F ? F : 1)) : NULL;
            if (row[i])
                for (int f = 0; f < F; f++) row[i][f] = mine[(size_t)f * cnt + (i - lo)];
        }
        train_world_share(t->world, (void **)row, r->len, r->n, sizeof(double), 0);
        for (int i = 0; i < r->n; i++) {
            for (int f = 0; f < F; f++) r->per_func[(size_t)f * r->n + i] = row[i][f];
            free(row[i]);
        }
    }
    /* sum_then_normalize's sum passing what a double holds would give NaN advantages
     * (the same per_func on every process: each stops alike) */
    if (!rc && t->c.aggregation == GRPO_AGG_SUM_THEN_NORMALIZE)
        rc = reward_weighted_check(&t->rewards, r->per_func, r->n, err);
    return rc;
}

/* The rollout's metrics, with TRL's names. */
static void add_metrics(GrpoTrainer *t, const Rollout *r, const GrpoRewardStats *st) {
    MetricAcc *m = t->st.metrics;
    metric_add(m, "reward", st->reward_mean);
    metric_add(m, "reward_std", st->reward_std);
    char name[300];
    for (int f = 0; f < t->rewards.n_funcs; f++) {
        snprintf(name, sizeof name, "rewards/%s/mean", t->rewards.funcs[f]->name);
        metric_add(m, name, st->func_mean[f]);
        snprintf(name, sizeof name, "rewards/%s/std", t->rewards.funcs[f]->name);
        metric_add(m, name, st->func_std[f]);
    }
    metric_add(m, "frac_reward_zero_std", st->frac_reward_zero_std);
    double sum = 0, mn = INFINITY, mx = 0, clipped = 0;
    for (int i = 0; i < r->n; i++) {
        const Completion *c = &r->comp[i];
        int L = c->n; /* TRL counts the model's tokens only (tool_mask 1) */
        if (c->mask) {
            L = 0;
            for (int k = 0; k < c->n; k++) L += c->mask[k];
        }
        sum += L;
        mn = L < mn ? L : mn;
        mx = L > mx ? L : mx;
        clipped += !r->comp[i].stopped;
    }
    metric_add(m, "completions/mean_length", sum / r->n);
    metric_add(m, "completions/min_length", mn);
    metric_add(m, "completions/max_length", mx);
    metric_add(m, "completions/clipped_ratio", clipped / r->n);
    if (r->tool_calls) { /* TRL: calls per completion of the generation batch; failed calls per call */
        long calls = 0, failures = 0;
        for (int i = 0; i < r->n; i++) calls += r->tool_calls[i], failures += r->tool_failures[i];
        metric_add(m, "tools/call_frequency", (double)calls / r->n);
        metric_add(m, "tools/failure_frequency", calls > 0 ? (double)failures / calls : 0.0);
    }
}

void rollout_is_weights(const GrpoTrainer *t, Rollout *r) {
    const GrpoLossConfig *c = &t->c.loss;
    CHECK(c->is_correction && r->old_logp);
    r->is_w = (double **)rows_of((void ***)&r->isw_rows, (void **)&r->isw_buf, r->n, r->maxc, sizeof(double));
    for (int i = 0; i < r->n; i++) {
        CHECK(r->comp[i].logp);
        int masked = c->mask_truncated_completions && !r->comp[i].stopped;
        const Completion *ci = &r->comp[i];
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
    int P = train_world_size(t->world);
    const float **old = xmalloc(sizeof(float *) * r->n), **samp = xmalloc(sizeof(float *) * r->n);
    int *len = xmalloc(sizeof(int) * r->n);
    uint8_t *masked = xmalloc(r->n);
    const uint8_t **tmask = xmalloc(sizeof(uint8_t *) * r->n);
    for (int i = 0; i < r->n; i++) {
        old[i] = r->old_logp[i], samp[i] = r->comp[i].logp, len[i] = r->comp[i].n, tmask[i] = r->comp[i].mask;
        masked[i] = c->mask_truncated_completions && !r->comp[i].stopped;
    }
    GrpoIsMetrics *each = xmalloc(sizeof(GrpoIsMetrics) * P), all;
    for (int k = 0; k < P; k++) {
        int lo, hi;
        train_world_range_of(t->world, r->n, k, &lo, &hi);
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
    for (int i = 0; i < r->n; i++) r->order[i] = i;
    rng_shuffle(&rng, r->order, r->n);
}

/* One round: r's P prompts drawn at the data position, generated and scored. */
static int draw_round(GrpoTrainer *t, Rollout *r, GrpoErr *err) {
    double t0 = time_now_s();
    if (generate(t, r, t->prompts_drawn, err)) return -1;
    t->prompts_drawn += r->P;
    double t1 = time_now_s();
    t->st.t_gen += t1 - t0;
    int rc = score(t, r, err);
    t->st.t_score += time_now_s() - t1;
    return rc;
}

/* Group g of src becomes group k of dst: its prompt, completions, texts and scores. */
static void move_group(Rollout *dst, int k, Rollout *src, int g, int F) {
    int G = src->G;
    dst->example[k] = src->example[g];
    dst->prompt[k] = src->prompt[g];
    for (int j = 0; j < G; j++) {
        int a = k * G + j, b = g * G + j;
        Completion *ca = &dst->comp[a];
        const Completion *cb = &src->comp[b];
        /* into dst's own rows: each rollout keeps its memory */
        memcpy(ca->ids, cb->ids, sizeof(int32_t) * cb->n);
        memcpy(ca->logp, cb->logp, sizeof(float) * cb->n);
        if (cb->mask) memcpy(ca->mask, cb->mask, (size_t)cb->n);
        ca->n = cb->n, ca->stopped = cb->stopped, ca->n_turns = cb->n_turns;
        dst->text[a] = src->text[b];
        src->text[b] = NULL;
        for (int f = 0; f < F; f++) dst->per_func[(size_t)f * dst->n + a] = src->per_func[(size_t)f * src->n + b];
        if (src->tool_calls) {
            if (!dst->tool_calls) {
                dst->tool_calls = xcalloc(dst->n, sizeof(int));
                dst->tool_failures = xcalloc(dst->n, sizeof(int));
            }
            dst->tool_calls[a] = src->tool_calls[b], dst->tool_failures[a] = src->tool_failures[b];
        }
    }
}

/* DAPO's dynamic sampling (arXiv 2503.14476, as verl's filter_groups): rounds of
 * r->P prompts, drawn in data order, generated and scored until r holds r->P
 * groups whose aggregated rewards differ, in data order. A group with equal
 * rewards is dropped; groups with signal beyond a full batch are left unused;
 * every prompt drawn is consumed either way (verl's). After max_num_gen_batches
 * rounds (> 0) that leave r short, the run stops, as verl's does. Every process
 * decides alike: each has every score. Each round is drawn into t->round, made
 * once and reused. */
static int draw_filtered(GrpoTrainer *t, Rollout *r, GrpoErr *err) {
    int F = t->rewards.n_funcs, G = r->G, kept = 0, rounds = 0, dropped = 0, surplus = 0, rc = 0;
    int max = t->c.max_num_gen_batches;
    double *agg = xmalloc(sizeof(double) * r->n);
    while (kept < r->P && !rc) {
        if (max > 0 && rounds == max) {
            rc = err_set(err, "dynamic sampling (filter_groups): after max_num_gen_batches (%d) rounds of %d prompts, "
                         "%d of the %d groups of a generation batch have rewards that differ (%d groups with equal "
                         "rewards dropped); the prompts may be too easy or too hard for the model: raise "
                         "max_num_gen_batches (0 = no bound) or turn filter_groups off", max, r->P, kept, r->P, dropped);
            break;
        }
        if (!t->round) t->round = rollout_take(t, r->index);
        Rollout *c = t->round;
        c->index = r->index;
        rounds++;
        rc = draw_round(t, c, err);
        if (!rc) {
            grpo_aggregate_rewards(agg, c->per_func, t->rewards.weights, F, c->n, G, t->c.aggregation);
            for (int p = 0; p < c->P; p++) {
                if (grpo_group_rewards_equal(agg + (size_t)p * G, G)) dropped++;
                else if (kept == r->P) surplus++;
                else move_group(r, kept++, c, p, F);
            }
        }
        rollout_clear(c);
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
    int F = t->rewards.n_funcs;
    long drawn = t->prompts_drawn;
    Rollout *r = rollout_take(t, t->rounds_made);
    shuffle(&t->c, r);
    int rc = t->c.filter_groups ? draw_filtered(t, r, err) : draw_round(t, r, err);
    if (!rc) { /* the group-relative advantages over the batch trained on */
        GrpoRewardStats st = {0, 0, 0, r->fmean, r->fstd};
        grpo_advantages(r->adv, r->rewards, &st, r->per_func, t->rewards.weights, F, r->n, r->G, t->c.scale_rewards,
                        t->c.aggregation);
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
        t->prompts_drawn = drawn;
        return -1;
    }
    t->rounds_made++;
    *out = r;
    return 0;
}
