/* grpo/rollout.c — the first half of a GRPO step: for P prompts, sample G
 * completions each, score them with the reward functions, turn the rewards into
 * group-relative advantages, and (when the loss needs them) record the log-probs
 * of the generating policy and of the reference model. Also logs the rollout's
 * metrics and, with log_completions, completions.jsonl. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/timer.h"
#include "grpo/trainer_internal.h"
#include "io/fsutil.h"

#define STREAM_GEN 0x67656e65726174ULL   /* "generat" */
#define STREAM_SHUFFLE 0x73687566666c65ULL /* "shuffle" */

void rollout_free(Rollout *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        completion_free(&r->comp[i]);
        free(r->text[i]);
        if (r->old_logp) free(r->old_logp[i]);
        if (r->ref_logp) free(r->ref_logp[i]);
    }
    free(r->example), free(r->prompt), free(r->comp), free(r->text), free(r->per_func), free(r->rewards);
    free(r->adv), free(r->old_logp), free(r->ref_logp), free(r->order);
    free(r);
}

/* Log-probs of every completion of r under m, in micro-batches of the training size. */
static float **all_logprobs(GrpoTrainer *t, Model *m, Rollout *r) {
    int B = t->c.train.per_device_train_batch_size;
    MicroPass pass = {m, &t->acts, 1.0f / t->c.gen.sampler.temperature, 0};
    float **out = xcalloc(r->n, sizeof(float *));
    CompletionRef *seqs = xmalloc(sizeof(CompletionRef) * B);
    int *off = xmalloc(sizeof(int) * (B + 1));
    for (int k0 = 0; k0 < r->n; k0 += B) {
        int S = r->n - k0 < B ? r->n - k0 : B;
        off[0] = 0;
        for (int i = 0; i < S; i++) {
            seqs[i] = (CompletionRef){r, k0 + i};
            off[i + 1] = off[i] + r->comp[k0 + i].n;
        }
        float *lp = xmalloc(sizeof(float) * (off[S] + 1));
        micro_logprobs(&pass, seqs, S, off, lp, NULL);
        for (int i = 0; i < S; i++) {
            out[k0 + i] = xmalloc(sizeof(float) * r->comp[k0 + i].n);
            memcpy(out[k0 + i], lp + off[i], sizeof(float) * r->comp[k0 + i].n);
        }
        free(lp);
    }
    free(seqs), free(off);
    return out;
}

static int log_completions(GrpoTrainer *t, const Rollout *r, GrpoErr *err) {
    if (!t->completions_f) {
        char *p = fs_join(t->c.train.output_dir, "completions.jsonl");
        t->completions_f = fopen(p, t->resumed ? "a" : "w");
        int rc = t->completions_f ? 0 : err_set(err, "%s: cannot open for writing", p);
        free(p);
        if (rc) return -1;
    }
    FILE *f = t->completions_f;
    int F = t->rewards.n_funcs;
    for (int i = 0; i < r->n; i++) {
        const DatasetExample *ex = r->prompt[i / r->G];
        json_t *o = json_object();
        json_object_set_new(o, "step", json_integer(t->step + 1));
        json_object_set_new(o, "prompt", json_string(ex->prompt_text));
        json_object_set_new(o, "completion", json_string(r->text[i]));
        json_t *ids = json_array();
        for (int k = 0; k < r->comp[i].n; k++) json_array_append_new(ids, json_integer(r->comp[i].ids[k]));
        json_object_set_new(o, "completion_ids", ids);
        json_t *rw = json_object();
        for (int fi = 0; fi < F; fi++) {
            double v = r->per_func[(size_t)fi * r->n + i];
            json_object_set_new(rw, t->rewards.funcs[fi]->name, isnan(v) ? json_null() : json_real(v));
        }
        json_object_set_new(o, "rewards", rw);
        json_object_set_new(o, "reward", json_real(r->rewards[i]));
        json_object_set_new(o, "advantage", json_real(r->adv[i]));
        json_dumpf(o, f, JSON_COMPACT);
        fputc('\n', f);
        json_decref(o);
    }
    if (fflush(f) || ferror(f))
        return err_set(err, "%s/completions.jsonl: write failed: %s; stopping (the checkpoints are untouched)",
                       t->c.train.output_dir, strerror(errno));
    return 0;
}

static Rollout *rollout_alloc(long index, int n, int G, int F) {
    Rollout *r = xcalloc(1, sizeof *r);
    r->index = index;
    r->G = G;
    r->n = n;
    r->P = n / G;
    r->example = xmalloc(sizeof(int) * r->P);
    r->prompt = xmalloc(sizeof(DatasetExample *) * r->P);
    r->comp = xcalloc(n, sizeof(Completion));
    r->text = xcalloc(n, sizeof(char *));
    r->per_func = xmalloc(sizeof(double) * F * n);
    r->rewards = xmalloc(sizeof(double) * n);
    r->adv = xmalloc(sizeof(double) * n);
    r->order = xmalloc(sizeof(int) * n);
    return r;
}

/* The round's prompts (dataset positions index*P ..) and G completions of each,
 * completion i of prompt position pos drawing from stream (pos, i). */
static void generate(GrpoTrainer *t, Rollout *r) {
    for (int p = 0; p < r->P; p++) {
        long pos = r->index * r->P + p;
        r->example[p] = dataset_sampler_index(&t->data_order, pos);
        const DatasetExample *ex = r->prompt[p] = &t->sess.data.ex[r->example[p]];
        gen_group(&t->sess.gen, ex->prompt_ids, ex->n_prompt_ids, r->G, rng_mix(STREAM_GEN, (uint64_t)pos),
                  r->comp + (size_t)p * r->G);
        for (int i = 0; i < r->G; i++) t->tokens += ex->n_prompt_ids + r->comp[p * r->G + i].n;
    }
}

/* Decodes and scores every completion, then the group-relative advantages. */
static int score(GrpoTrainer *t, Rollout *r, GrpoRewardStats *st, GrpoErr *err) {
    RewardItem *items = xcalloc(r->n, sizeof(RewardItem));
    int rc = 0;
    for (int i = 0; i < r->n && !rc; i++) {
        const DatasetExample *ex = r->prompt[i / r->G];
        size_t len = 0;
        if (tok_decode_generated(t->sess.pre.tok, r->comp[i].ids, r->comp[i].n, 1, &r->text[i], &len, err)) rc = -1;
        items[i] = (RewardItem){ex->prompt, ex->prompt_text, r->text[i], r->comp[i].ids, r->comp[i].n,
                                ex->row, t->sess.data.path, ex->line};
    }
    RewardBatch batch = {items, r->n, t->step};
    if (!rc) rc = reward_set_compute(&t->rewards, &batch, r->per_func, NULL, err);
    free(items);
    if (!rc)
        grpo_advantages(r->adv, r->rewards, st, r->per_func, t->rewards.weights, t->rewards.n_funcs, r->n, r->G,
                        t->c.scale_rewards, t->c.aggregation);
    return rc;
}

/* The rollout's metrics, with TRL's names. */
static void add_metrics(GrpoTrainer *t, const Rollout *r, const GrpoRewardStats *st) {
    metric_add(t->metrics, "reward", st->reward_mean);
    metric_add(t->metrics, "reward_std", st->reward_std);
    char name[300];
    for (int f = 0; f < t->rewards.n_funcs; f++) {
        snprintf(name, sizeof name, "rewards/%s/mean", t->rewards.funcs[f]->name);
        metric_add(t->metrics, name, st->func_mean[f]);
        snprintf(name, sizeof name, "rewards/%s/std", t->rewards.funcs[f]->name);
        metric_add(t->metrics, name, st->func_std[f]);
    }
    metric_add(t->metrics, "frac_reward_zero_std", st->frac_reward_zero_std);
    double sum = 0, mn = INFINITY, mx = 0, clipped = 0;
    for (int i = 0; i < r->n; i++) {
        int L = r->comp[i].n;
        sum += L;
        mn = L < mn ? L : mn;
        mx = L > mx ? L : mx;
        clipped += !r->comp[i].stopped;
    }
    metric_add(t->metrics, "completions/mean_length", sum / r->n);
    metric_add(t->metrics, "completions/min_length", mn);
    metric_add(t->metrics, "completions/max_length", mx);
    metric_add(t->metrics, "completions/clipped_ratio", clipped / r->n);
}

/* TRL shuffles the generation batch before splitting it into micro-batches. */
static void shuffle(const TrainConfig *c, Rollout *r) {
    Rng rng;
    rng_init(&rng, c->train.seed, rng_mix(STREAM_SHUFFLE, (uint64_t)r->index));
    for (int i = 0; i < r->n; i++) r->order[i] = i;
    rng_shuffle(&rng, r->order, r->n);
}

int rollout_make(GrpoTrainer *t, Rollout **out, GrpoErr *err) {
    int F = t->rewards.n_funcs;
    Rollout *r = rollout_alloc(t->rounds_made, t->gen_batch, t->c.num_generations, F);
    double t0 = time_now_s();
    generate(t, r);
    double t1 = time_now_s();
    t->t_gen += t1 - t0;
    double *fmean = xmalloc(sizeof(double) * F), *fstd = xmalloc(sizeof(double) * F);
    GrpoRewardStats st = {0, 0, 0, fmean, fstd};
    int rc = score(t, r, &st, err);
    if (!rc) add_metrics(t, r, &st);
    free(fmean), free(fstd);
    double t2 = time_now_s();
    t->t_score += t2 - t1;
    /* the generating policy's and the reference's log-probs */
    if (!rc && t->need_old) r->old_logp = all_logprobs(t, &t->sess.pre.model, r);
    if (!rc && t->have_ref) r->ref_logp = all_logprobs(t, &t->ref, r);
    if (!rc && t->ref_is_base) { /* TRL with PEFT: the reference is the base, adapters disabled */
        t->lora.enabled = 0;
        r->ref_logp = all_logprobs(t, &t->sess.pre.model, r);
        t->lora.enabled = 1;
    }
    t->t_ref += time_now_s() - t2;
    if (!rc) shuffle(&t->c, r);
    if (!rc && t->c.log_completions) rc = log_completions(t, r, err);
    if (rc) {
        rollout_free(r);
        return -1;
    }
    t->rounds_made++;
    *out = r;
    return 0;
}
