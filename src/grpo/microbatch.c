/* grpo/microbatch.c — one micro-batch of completions through the model: the padded
 * batch (prompt + completion, right-padded), the temperature-scaled log-probs of
 * the completion tokens, and for training the loss, its gradient with respect to
 * those log-probs (grpo/loss.c) and the backward pass into the accumulated
 * gradients. */
#include <stdlib.h>
#include <string.h>

#include "grpo/trainer_internal.h"

typedef struct {
    int S, T;
    int32_t *ids, *targets;
    uint8_t *mask;
    int *row0;          /* [S] flat position of the first completion token's prediction */
} Padded;

static void pad_batch(Padded *p, Trainer *t, const Rollout *const *rounds, const int *idx, int S) {
    p->S = S;
    p->T = 1;
    for (int i = 0; i < S; i++) {
        const DatasetExample *ex = &t->data.ex[rounds[i]->example[idx[i] / rounds[i]->G]];
        int len = ex->n_prompt_ids + rounds[i]->comp[idx[i]].n;
        p->T = len > p->T ? len : p->T;
    }
    int N = S * p->T;
    p->ids = xcalloc(N, sizeof(int32_t));
    p->targets = xmalloc(sizeof(int32_t) * N);
    p->mask = xcalloc(N, 1);
    p->row0 = xmalloc(sizeof(int) * S);
    for (int n = 0; n < N; n++) p->targets[n] = -1;
    for (int i = 0; i < S; i++) {
        const DatasetExample *ex = &t->data.ex[rounds[i]->example[idx[i] / rounds[i]->G]];
        const Completion *c = &rounds[i]->comp[idx[i]];
        int np = ex->n_prompt_ids, base = i * p->T;
        memcpy(p->ids + base, ex->prompt_ids, sizeof(int32_t) * np);
        memcpy(p->ids + base + np, c->ids, sizeof(int32_t) * c->n);
        memset(p->mask + base, 1, np + c->n);
        /* position np-1+j predicts completion token j */
        for (int j = 0; j < c->n; j++) p->targets[base + np - 1 + j] = c->ids[j];
        p->row0[i] = base + np - 1;
    }
}

static void pad_free(Padded *p) {
    free(p->ids), free(p->targets), free(p->mask), free(p->row0);
}

/* Forward through m and the LM head; fills logp/entropy in CSR order. Leaves the
 * activations in t->acts for a backward. */
static void forward(Trainer *t, Model *m, Padded *p, const int *offsets, float *logp, float *entropy) {
    int N = p->S * p->T;
    float *lp = xmalloc(sizeof(float) * N), *ent = entropy ? xmalloc(sizeof(float) * N) : NULL;
    model_forward(m, &t->acts, p->ids, p->mask, p->S, p->T);
    model_logprobs(m, &t->acts, p->targets, 1.0f / t->c->sampler.temperature, lp, ent);
    for (int i = 0; i < p->S; i++) {
        int len = offsets[i + 1] - offsets[i];
        memcpy(logp + offsets[i], lp + p->row0[i], sizeof(float) * len);
        if (entropy) memcpy(entropy + offsets[i], ent + p->row0[i], sizeof(float) * len);
    }
    free(lp);
    free(ent);
}

void micro_logprobs(Trainer *t, Model *m, const Rollout *const *rounds, const int *idx, int S,
                    const int *offsets, float *logp, float *entropy) {
    Padded p;
    pad_batch(&p, t, rounds, idx, S);
    forward(t, m, &p, offsets, logp, entropy);
    pad_free(&p);
}

double micro_train(Trainer *t, const Rollout *const *rounds, const int *idx, int S,
                   double normalizer, GrpoLossStats *stats) {
    int *off = xmalloc(sizeof(int) * (S + 1));
    off[0] = 0;
    for (int i = 0; i < S; i++) off[i + 1] = off[i] + rounds[i]->comp[idx[i]].n;
    int ntok = off[S];
    float *logp = xmalloc(sizeof(float) * ntok), *ent = xmalloc(sizeof(float) * ntok);
    float *old = NULL, *ref = NULL;
    double *adv = xmalloc(sizeof(double) * S), *dlogp = xcalloc(ntok, sizeof(double));
    uint8_t *trunc = xmalloc(S);
    for (int i = 0; i < S; i++) {
        const Rollout *r = rounds[i];
        adv[i] = r->adv[idx[i]];
        trunc[i] = !r->comp[idx[i]].stopped;
        int len = off[i + 1] - off[i];
        if (r->old_logp) {
            if (!old) old = xmalloc(sizeof(float) * ntok);
            memcpy(old + off[i], r->old_logp[idx[i]], sizeof(float) * len);
        }
        if (r->ref_logp) {
            if (!ref) ref = xmalloc(sizeof(float) * ntok);
            memcpy(ref + off[i], r->ref_logp[idx[i]], sizeof(float) * len);
        }
    }
    Padded p;
    pad_batch(&p, t, rounds, idx, S);
    forward(t, &t->policy, &p, off, logp, ent);
    double loss = grpo_loss_accumulate(dlogp, stats, logp, old, ref, ent, adv, trunc, off, S, normalizer,
                                       &t->c->loss);
    int N = p.S * p.T;
    float *dlp = xcalloc(N, sizeof(float));
    for (int i = 0; i < S; i++)
        for (int j = 0; j < off[i + 1] - off[i]; j++) dlp[p.row0[i] + j] = (float)dlogp[off[i] + j];
    model_backward(&t->policy, &t->acts, &t->gview, dlp);
    free(dlp);
    pad_free(&p);
    free(off), free(logp), free(ent), free(old), free(ref), free(adv), free(dlogp), free(trunc);
    return loss;
}
