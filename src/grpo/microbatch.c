/* grpo/microbatch.c — one micro-batch of completions: the trainable model's
 * log-probs of their tokens (prompt + completion, the completion's tokens the
 * targets), the loss (grpo/loss.c) and its gradient with respect to those
 * log-probs, handed back to the model for the backward. A token-local loss gives
 * each token's gradient as soon as its log-prob exists, and the LM head's backward
 * then shares its forward's logits. */
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "grpo/trainer_internal.h"

void micro_scratch_init(MicroScratch *ms, int B, int max_tokens) {
    size_t T = (size_t)max_tokens + 1;
    ms->seqs = xmalloc(sizeof(BatchSeq) * B);
    ms->ids = xmalloc(sizeof(uint64_t) * B);
    ms->off = xmalloc(sizeof(int) * (B + 1));
    ms->adv = xmalloc(sizeof(double) * B);
    ms->w = xmalloc(sizeof(double) * B);
    ms->trunc = xmalloc(B);
    ms->tmask = xmalloc(T);
    float **f[] = {&ms->logp, &ms->ent, &ms->old, &ms->ref, &ms->dlp, &ms->dent};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) *f[i] = xmalloc(sizeof(float) * T);
    ms->dlogp = xmalloc(sizeof(double) * T);
    ms->dentropy = xmalloc(sizeof(double) * T);
    ms->isw = xmalloc(sizeof(double) * T);
    ms->seq_of = xmalloc(sizeof(int) * T);
}

void micro_scratch_free(MicroScratch *ms) {
    free(ms->seqs), free(ms->ids), free(ms->off), free(ms->adv), free(ms->w), free(ms->trunc), free(ms->tmask);
    free(ms->logp), free(ms->ent), free(ms->old), free(ms->ref), free(ms->dlp), free(ms->dent);
    free(ms->dlogp), free(ms->dentropy), free(ms->isw), free(ms->seq_of);
    memset(ms, 0, sizeof *ms);
}

void micro_batch_of(MicroScratch *ms, const CompletionRef *seqs, int S, TrainBatch *b, float inv_temperature) {
    ms->off[0] = 0;
    for (int i = 0; i < S; i++) {
        const Rollout *r = seqs[i].r;
        const DatasetExample *ex = r->g.prompt[seqs[i].i / r->g.G];
        const Completion *c = &r->g.comp[seqs[i].i];
        ms->seqs[i] = (BatchSeq){ex->prompt_ids, ex->n_prompt_ids, c->ids, c->n, ex->n_prompt_ids};
        /* adapter dropout: one mask per completion and optimizer step, whichever micro-batch holds it */
        ms->ids[i] = rng_mix((uint64_t)r->index, (uint64_t)seqs[i].i);
        ms->off[i + 1] = ms->off[i] + c->n;
    }
    *b = (TrainBatch){ms->seqs, S, ms->ids, inv_temperature};
}

/* The completions' advantages, truncation flags, recorded log-probs and correction
 * weights; *old, *ref and *isw NULL where the rollouts recorded none; *tmask the
 * tool mask (Completion.mask), NULL when no completion has tool turns. */
static void gather_inputs(MicroScratch *ms, const CompletionRef *seqs, int S, float **old, float **ref,
                          double **isw, uint8_t **tmask) {
    *tmask = NULL;
    *old = seqs[0].r->old_logp ? ms->old : NULL;
    *ref = seqs[0].r->ref_logp ? ms->ref : NULL;
    *isw = seqs[0].r->is_w ? ms->isw : NULL;
    for (int i = 0; i < S; i++) {
        const Rollout *r = seqs[i].r;
        int k = seqs[i].i, len = ms->off[i + 1] - ms->off[i];
        ms->adv[i] = r->adv[k];
        ms->trunc[i] = !r->g.comp[k].stopped;
        if (*old) memcpy(*old + ms->off[i], r->old_logp[k], sizeof(float) * len);
        if (*ref) memcpy(*ref + ms->off[i], r->ref_logp[k], sizeof(float) * len);
        if (*isw) memcpy(*isw + ms->off[i], r->is_w[k], sizeof(double) * len);
        if (r->g.comp[k].mask) *tmask = ms->tmask;
    }
    if (*tmask)
        for (int i = 0; i < S; i++) {
            const Completion *c = &seqs[i].r->g.comp[seqs[i].i];
            if (c->mask) memcpy(ms->tmask + ms->off[i], c->mask, (size_t)c->n);
            else memset(ms->tmask + ms->off[i], 1, (size_t)c->n);
        }
}

/* A token-local loss's gradient, token by token (LogprobGrad's function; ctx the
 * micro-batch's TokenObjective). */
static void token_grads(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    tokobj_grads(ctx, js, m, logp, dlogp);
}

double micro_train(TrainModel *tm, MicroScratch *ms, const GrpoLossConfig *loss, const CompletionRef *seqs, int S,
                   float inv_temperature, double normalizer, GrpoLossStats *stats) {
    TrainBatch b;
    micro_batch_of(ms, seqs, S, &b, inv_temperature);
    const int *off = ms->off;
    int ntok = off[S];
    float *old, *ref;
    double *isw;
    uint8_t *tmask;
    gather_inputs(ms, seqs, S, &old, &ref, &isw, &tmask);
    memset(ms->dlogp, 0, sizeof(double) * ntok);
    const int fused = grpo_loss_token_local(loss);
    if (fused) {
        for (int i = 0; i < S; i++) {
            ms->w[i] = grpo_loss_seq_weight(loss, ms->trunc, tmask, i, off, normalizer);
            for (int j = off[i]; j < off[i + 1]; j++) ms->seq_of[j] = i;
        }
        /* the loss as data too: a GPU evaluates it where the log-probs are */
        TokenObjective o = {grpo_loss_objective_params(loss), ms->seq_of, ms->w, ms->adv, old, ref, isw, tmask};
        train_model_forward(tm, &b, ms->logp, ms->ent, &(LogprobGrad){token_grads, &o, &o, NULL});
    } else {
        train_model_forward(tm, &b, ms->logp, ms->ent, NULL);
    }
    /* the loss and its statistics; fused, the gradient it also gives was taken already */
    double *dent = NULL;
    if (loss->entropy_coef != 0.0) memset(dent = ms->dentropy, 0, sizeof(double) * ntok);
    double l = grpo_loss_accumulate(ms->dlogp, dent, stats, ms->logp, old, ref, ms->ent, isw, ms->adv, ms->trunc, tmask,
                                    off, S, normalizer, loss);
    if (fused) {
        train_model_backward(tm, NULL, NULL);
        return l;
    }
    for (int j = 0; j < ntok; j++) ms->dlp[j] = (float)ms->dlogp[j];
    if (dent) /* the entropy bonus's gradient, laid out like dlogprob */
        for (int j = 0; j < ntok; j++) ms->dent[j] = (float)dent[j];
    train_model_backward(tm, ms->dlp, dent ? ms->dent : NULL);
    return l;
}
