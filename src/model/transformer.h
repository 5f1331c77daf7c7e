/* model/transformer.h — the generic decoder-only transformer (Qwen2, Qwen3, Llama):
 * training forward/backward over a padded batch, with per-token log-probabilities of
 * target tokens as the output. Decoding with a KV cache is in model/kvcache.h.
 *
 * Memory: Activations are planned once from (max tokens per micro-batch, config,
 * checkpointing) — never from the group size — and reused for every micro-batch.
 * With checkpointing only each layer's input is kept and the layer is recomputed
 * during backward. */
#ifndef GRPO_MODEL_TRANSFORMER_H
#define GRPO_MODEL_TRANSFORMER_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/params.h"
#include "ops/ops.h"

typedef struct {
    ModelConfig cfg;
    ParamTable table;
    float *params;         /* table.total floats */
    ModelView w;
    float *inv_freq;       /* [D/2] RoPE inverse frequencies */
} Model;

/* Takes ownership of *cfg (its raw JSON). Parameters start at zero. */
void model_create(Model *m, ModelConfig *cfg);
void model_free(Model *m);

/* Saved tensors of one layer (shapes per token row; N rows). */
typedef struct {
    float *rstd1;   /* [N] */
    float *h1;      /* [N,C] normed layer input */
    float *qkv;     /* [N,(H+2Hkv)D] projections before q/k norm and RoPE */
    float *qk;      /* [N,(H+Hkv)D] q and k after norm and RoPE */
    float *qk_rstd; /* [H+Hkv, N] per-head norm statistics (qk_norm only) */
    float *att;     /* [N,H D] attention output */
    float *lse;     /* [B,H,T] */
    float *xmid;    /* [N,C] residual after attention */
    float *rstd2;   /* [N] */
    float *h2;      /* [N,C] */
    float *gu;      /* [N,2F] gate | up */
    float *act;     /* [N,F] silu(gate) * up */
} LayerActs;

typedef struct {
    int max_tokens;        /* N capacity */
    int checkpointing;
    int B, T, N;           /* of the last forward */
    int32_t *ids, *pos, *targets;  /* [N] */
    uint8_t *mask;         /* [N] */
    float inv_temp;
    float *x;              /* [L+1, N, C] residual stream at each layer input (and final) */
    LayerActs *layers;     /* [L], or [1] reused when checkpointing */
    float *hf, *rstdf;     /* [N,C], [N] final norm */
    float *lse;            /* [N] of the LM head */
    /* backward scratch */
    float *dx, *dh, *dqkv, *dqk, *datt, *dgu, *dact, *dhf;
    float *lp_buf;
    LogprobScratch lp;
    size_t bytes;          /* total allocated, for the memory plan printout */
    float *arena;
} Activations;

/* Plans and allocates activations for micro-batches of up to max_tokens (B*T)
 * tokens; chunk_rows sets the LM-head chunk (logits rows computed at once). */
void acts_create(Activations *a, const ModelConfig *cfg, int max_tokens, int checkpointing,
                 int chunk_rows);
void acts_free(Activations *a);
size_t acts_plan_bytes(const ModelConfig *cfg, int max_tokens, int checkpointing, int chunk_rows);

/* Forward to the final normed hidden states. ids[B,T], mask[B,T] (1 real, 0 pad);
 * positions are cumsum(mask) - 1 as Hugging Face computes them from the mask.
 * Requires B*T <= max_tokens and ids in [0, V). */
void model_forward(Model *m, Activations *a, const int32_t *ids, const uint8_t *mask, int B, int T);
/* After model_forward: logits[N,V] of every position (unscaled). For tests and
 * small vocabularies: materialises [N,V]. */
void model_logits(Model *m, Activations *a, float *logits);
/* After model_forward: logprob[N] (and entropy[N], may be NULL) of targets[N]
 * (-1 = no target) under softmax(logits * inv_temp). Saved for model_backward. */
void model_logprobs(Model *m, Activations *a, const int32_t *targets, float inv_temp,
                    float *logprob, float *entropy);
/* Accumulates into grads (a view of a buffer shaped like m->table) the gradient of
 * Σ_n dlogprob[n] · logprob[n] + dentropy[n] · entropy[n] (dentropy may be NULL). */
void model_backward(Model *m, Activations *a, const ModelView *grads, const float *dlogprob, const float *dentropy);

#endif
