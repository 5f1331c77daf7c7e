/* grpo/microbatch.c — one micro-batch of completions through the model: the
 * padded batch (prompt + completion, right-padded; model/batch.h), the
 * temperature-scaled log-probs of the completion tokens, and for training the
 * loss, its gradient with respect to those log-probs (grpo/loss.c) and the
 * backward pass into the accumulated gradients. A token-local loss gives each
 * token's gradient as soon as its log-prob exists, and the LM head's backward
 * then shares its forward's logits. */
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "grpo/trainer_internal.h"
#include "model/batch.h"

static void build(PaddedBatch *pb, const CompletionRef *seqs, int S) {
    BatchSeq *bs = xmalloc(sizeof(BatchSeq) * S);
    for (int i = 0; i < S; i++) {
        const Rollout *r = seqs[i].r;
        const DatasetExample *ex = r->prompt[seqs[i].i / r->G];
        const Completion *c = &r->comp[seqs[i].i];
        bs[i] = (BatchSeq){ex->prompt_ids, ex->n_prompt_ids, c->ids, c->n, ex->n_prompt_ids};
    }
    padded_batch_build(pb, bs, S);
    free(bs);
}

void micro_logprobs(const MicroPass *p, const CompletionRef *seqs, int S, const int *offsets, float *logp,
                    float *entropy) {
    PaddedBatch pb;
    build(&pb, seqs, S);
    CHECK(pb.offsets[S] == offsets[S]);
    padded_batch_logprobs(p->model, p->acts, &pb, &(ModelPass){.base_only = p->base_only}, p->inv_temperature, logp,
                          entropy);
    padded_batch_free(&pb);
}

/* Gathers the completions' advantages, truncation flags and recorded log-probs. */
static void gather_inputs(const CompletionRef *seqs, int S, const int *off, double *adv, uint8_t *trunc, float **old,
                          float **ref) {
    for (int i = 0; i < S; i++) {
        const Rollout *r = seqs[i].r;
        int k = seqs[i].i, len = off[i + 1] - off[i];
        adv[i] = r->adv[k];
        trunc[i] = !r->comp[k].stopped;
        if (r->old_logp) {
            if (!*old) *old = xmalloc(sizeof(float) * off[S]);
            memcpy(*old + off[i], r->old_logp[k], sizeof(float) * len);
        }
        if (r->ref_logp) {
            if (!*ref) *ref = xmalloc(sizeof(float) * off[S]);
            memcpy(*ref + off[i], r->ref_logp[k], sizeof(float) * len);
        }
    }
}

/* Adapter dropout keys: one per completion and optimizer step, whichever
 * micro-batch holds it. */
static uint64_t *dropout_keys(const MicroPass *p, const CompletionRef *seqs, int S) {
    uint64_t *k = xmalloc(sizeof(uint64_t) * S);
    for (int i = 0; i < S; i++)
        k[i] = rng_mix(rng_mix(0x64726f70u /* "drop" */, (uint64_t)p->step), rng_mix((uint64_t)seqs[i].r->index,
                                                                                     (uint64_t)seqs[i].i));
    return k;
}

/* What a token's gradient needs when the loss is token-local: the LM head's
 * backward then runs alongside its forward (padded_batch_logprobs_train). */
typedef struct {
    const GrpoLossConfig *loss;
    const int *seq_of;      /* [ntok] each token's sequence */
    const double *w, *adv;  /* [S] */
    const float *old, *ref; /* [ntok] or NULL */
} TokenGrad;

static void token_grads(void *ctx, const int *js, int m, const float *logp, float *dlogp) {
    const TokenGrad *t = ctx;
    for (int i = 0; i < m; i++) {
        int j = js[i], s = t->seq_of[j];
        dlogp[i] = (float)grpo_loss_token_grad(t->loss, t->w[s], t->adv[s], logp[i], t->old ? &t->old[j] : NULL,
                                               t->ref ? &t->ref[j] : NULL);
    }
}

double micro_train(const MicroPass *p, const ModelGrads *grads, const GrpoLossConfig *loss, const CompletionRef *seqs,
                   int S, double normalizer, GrpoLossStats *stats) {
    PaddedBatch pb;
    build(&pb, seqs, S);
    const int *off = pb.offsets;
    int ntok = off[S];
    float *logp = xmalloc(sizeof(float) * (ntok + 1)), *ent = xmalloc(sizeof(float) * (ntok + 1));
    float *old = NULL, *ref = NULL;
    double *adv = xmalloc(sizeof(double) * S), *dlogp = xcalloc(ntok + 1, sizeof(double));
    uint8_t *trunc = xmalloc(S);
    gather_inputs(seqs, S, off, adv, trunc, &old, &ref);
    uint64_t *keys = dropout_keys(p, seqs, S);
    ModelPass pass = {.backward = 1, .drop_keys = keys};
    const int fused = grpo_loss_token_local(loss);
    if (fused) {
        int *seq_of = xmalloc(sizeof(int) * (ntok + 1));
        double *w = xmalloc(sizeof(double) * S);
        for (int i = 0; i < S; i++) {
            w[i] = grpo_loss_seq_weight(loss, trunc, i, off, normalizer);
            for (int j = off[i]; j < off[i + 1]; j++) seq_of[j] = i;
        }
        TokenGrad tg = {loss, seq_of, w, adv, old, ref};
        padded_batch_logprobs_train(p->model, p->acts, &pb, &pass, p->inv_temperature, logp, ent, grads,
                                    &(LogprobGrad){token_grads, &tg});
        free(seq_of), free(w);
    } else {
        padded_batch_logprobs(p->model, p->acts, &pb, &pass, p->inv_temperature, logp, ent);
    }
    /* the loss and its statistics; fused, the gradient it also gives was taken already */
    double *dent = loss->entropy_coef != 0.0 ? xcalloc(ntok + 1, sizeof(double)) : NULL;
    double l = grpo_loss_accumulate(dlogp, dent, stats, logp, old, ref, ent, adv, trunc, off, S, normalizer, loss);
    if (fused) {
        model_backward(p->model, p->acts, grads, NULL, NULL);
    } else {
        float *dlp_csr = xmalloc(sizeof(float) * (ntok + 1)), *dlp = xmalloc(sizeof(float) * pb.S * pb.T);
        for (int j = 0; j < ntok; j++) dlp_csr[j] = (float)dlogp[j];
        padded_batch_scatter(&pb, dlp_csr, dlp);
        float *dent_pad = NULL;
        if (dent) { /* the entropy bonus's gradient, laid out like dlogprob */
            for (int j = 0; j < ntok; j++) dlp_csr[j] = (float)dent[j];
            dent_pad = xmalloc(sizeof(float) * pb.S * pb.T);
            padded_batch_scatter(&pb, dlp_csr, dent_pad);
        }
        model_backward(p->model, p->acts, grads, dlp, dent_pad);
        free(dlp), free(dlp_csr), free(dent_pad);
    }
    free(keys);
    free(dent);
    padded_batch_free(&pb);
    free(logp), free(ent), free(old), free(ref), free(adv), free(dlogp), free(trunc);
    return l;
}
