/* model/transformer.h — the generic decoder-only transformer (Qwen2, Qwen3, Llama):
 * training forward/backward over a padded batch, with per-token log-probabilities of
 * target tokens as the output. Decoding with a KV cache is in model/kvcache.h.
 *
 * Memory: Activations are planned once from (max tokens per micro-batch, config,
 * checkpointing) — never from the group size — and reused for every micro-batch.
 * With checkpointing each layer's input is kept and the layer recomputed during
 * backward: all of it (CKPT_FULL), or all but its MLP's gate/up product, which is
 * kept too (CKPT_SELECTIVE). */
#ifndef GRPO_MODEL_TRANSFORMER_H
#define GRPO_MODEL_TRANSFORMER_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/grads.h"
#include "model/params.h"
#include "ops/ops.h"

struct LoraLayers;

/* How a model that nothing trains holds its weight matrices (model_load_ex). */
typedef enum {
    WEIGHTS_FP32,      /* in fp32 */
    WEIGHTS_BF16,      /* in bf16, and every product of them in bf16 (fp32 sums): bf16 as TRL means it, and as
                          a model cast with model.to(torch.bfloat16) computes */
    WEIGHTS_BF16_HELD, /* in bf16, widened for fp32 products: half the memory, fp32's results for a model stored
                          in bf16 (--bf16_held) */
    WEIGHTS_MIXED,     /* a model that trains under mixed precision (model_use_bf16_compute), loaded so */
} WeightForm;

/* A model whose weight matrices are held in bf16 (model_create_half): nothing trains
 * them, so half their bytes suffice; their products in bf16 or, widened, in fp32
 * (WeightMatrix, ops/ops.h). */
typedef struct {
    int products16;        /* WEIGHTS_BF16: the products in bf16; else fp32 on the widened values */
    uint16_t *params16;    /* table.total16 values */
    LayerView16 *w16;      /* [L] into params16 */
    const uint16_t *embed16, *head16; /* [V, C] into params16 (the same when tied) */
} ModelHalf;

/* Mixed precision's weights (model_use_bf16_compute): every parameter's fp32 value
 * held as two 16-bit halves (f32_split, ops/ops.h), in table order, so that the
 * upper halves are the weights' bf16 copy and the two together the fp32 master
 * weights, at 4 bytes a parameter where an fp32 buffer and a bf16 copy took 6. */
typedef struct {
    uint16_t *hi, *lo;     /* [table.total] */
    ParamTable vt;         /* the table with the matrices moved out (params_hold_half): where vectors
                              holds each norm and bias */
    float *vectors;        /* [vt.total] the norms and biases in fp32 (the forward reads them) */
    LayerView16 *w16;      /* [L] the layers' matrices, into hi */
    const uint16_t *embed16, *head16; /* into hi */
} ModelMixed;

typedef struct {
    ModelConfig cfg;
    ParamTable table;
    float *params;         /* table.total floats; NULL under mixed precision (mixed holds them) */
    ModelView w;           /* with half or mixed: the matrices are NULL */
    float *inv_freq;       /* [D/2] RoPE inverse frequencies */
    struct LoraLayers *lora; /* NULL, or adapters applied in every pass but a ModelPass's base_only
                                (borrowed; model/lora_layers.h) */
    ModelHalf *half;       /* NULL, or the weight matrices in bf16 */
    ModelMixed *mixed;     /* NULL, or mixed precision's weights */
} Model;

/* Where model_backward puts gradients. Each tensor it reaches is written (beta 0
 * products, no memset first) when its buffer's state says this step has not
 * written it yet, and summed into otherwise (model/grads.h); a buffer without a
 * state is always summed into. */
typedef struct {
    const ModelView *base;  /* a buffer shaped like the model's table, or NULL: the base is frozen */
    float *lora;            /* the adapters' gradients (m->lora->table layout), or NULL */
    GradState *base_state;  /* NULL, or base's buffer's write-or-add state */
    GradState *lora_state;  /* NULL, or the adapters' */
} ModelGrads;

/* Takes ownership of *cfg (its raw JSON). Parameters start at zero. */
void model_create(Model *m, ModelConfig *cfg);
/* The same with the weight matrices held in bf16 (params_hold_half), never whole
 * in fp32; form WEIGHTS_BF16 or WEIGHTS_BF16_HELD. The embedding widens the rows
 * it looks up. WEIGHTS_BF16: every product in bf16, as mixed precision's (decoding:
 * matmul_forward_rowwise_bf16_products; training-shaped passes: gemm_bf16).
 * WEIGHTS_BF16_HELD: fp32 products, decoding reading the matrices as they are
 * (matmul_forward_rowwise_bf16), a training-shaped pass's products widening a
 * block of a matrix at a time (gemm_f32_b16). */
void model_create_half(Model *m, ModelConfig *cfg, WeightForm form);
void model_free(Model *m);
/* 1 when m holds a model (created, not yet freed): a zeroed Model holds none. */
static inline int model_loaded(const Model *m) { return m->table.entries != NULL; }
/* Bytes the weights take (fp32 and bf16 parts, or both halves). */
size_t model_weight_bytes(const Model *m);

/* Mixed precision, as TRL's bf16: true on a model whose weights train: the
 * training passes' matrix products — every linear layer, forward and both backward
 * products, and the LM head — run on gemm_bf16 over the weights' bf16 values, the
 * activations rounded to bf16 as the products read them and every sum in fp32.
 * Norms, RoPE, attention, softmax, log-probs and the loss stay fp32, and so do the
 * master weights that AdamW updates (adamw_step_split, optim/optim.h). Decoding
 * (model/kvcache.h) reads the bf16 values too, its activations in fp32
 * (matmul_forward_rowwise_bf16), so a step streams half the weight bytes.
 * model_use_bf16_compute moves params into m->mixed (ModelMixed: two halves, the
 * upper one the bf16 copy) and frees them: m->params is NULL from then on, and
 * model_get_params / model_set_params read and write the weights. After the
 * halves change otherwise (the training loop's optimizer step), model_sync_bf16
 * refreshes the fp32 norms and biases the forward reads; model_set_params does so
 * itself.
 * The bf16 copy rounds ties away from zero, not to even as PyTorch's cast does:
 * it differs from that cast only where a weight lies exactly halfway between two
 * bf16 values, by one bf16 step. */
void model_use_bf16_compute(Model *m);
/* model_create's model under mixed precision straight away: its fp32 parameters never
 * exist as one buffer (model_load_ex reads a tensor at a time into the halves). */
void model_create_mixed(Model *m, ModelConfig *cfg);
void model_sync_bf16(Model *m);
/* Back to fp32 weights in m->params (the same values) and fp32 products. */
void model_use_fp32_compute(Model *m);
/* The fp32 values of params [i0, i0 + n) into out, from params or from the halves;
 * model_set_params: from in (then model_sync_bf16 under mixed precision). */
void model_get_params(const Model *m, size_t i0, size_t n, float *out);
void model_set_params(Model *m, size_t i0, size_t n, const float *in);
/* A matrix of the model as its products read it: held in bf16 (a half model's:
 * w16), its bf16 values under mixed precision (w16 too), or w in fp32. The one
 * place that decides; model_lm_head: the LM head's; model_layer16: layer l's
 * bf16 matrices, or NULL for an fp32 model. */
WeightMatrix model_weight(const Model *m, const float *w, const uint16_t *w16);
WeightMatrix model_lm_head(const Model *m);
const LayerView16 *model_layer16(const Model *m, int l);
/* out[N, C] = the embeddings of ids (a half model's widened from bf16). */
void model_embed(const Model *m, float *out, const int32_t *ids, int N);
/* For a plan line: " (held as bf16 values and low halves: products in bf16 on BACKEND)", or "" without
 * mixed precision. */
void model_bf16_describe(const Model *m, char *out, size_t n);

/* What a forward is for, said in its call (model_forward) and kept for the log-probs
 * and the backward that follow it: nothing is set on the model or the activations
 * before a pass and restored after it. A zeroed ModelPass (or NULL) is inference:
 * the adapters applied, no dropout, no backward. */
typedef struct {
    int backward;              /* a backward follows (training): with adapters, the log-probs keep E_p[lm_head]
                                  per row, so the backward through the frozen head recomputes no logits */
    int base_only;             /* the model without its adapters (m->lora): the frozen base, the KL reference
                                  of a LoRA run */
    const uint64_t *drop_keys; /* [B] each sequence's adapter-dropout key (training), or NULL: no dropout */
} ModelPass;

/* What a backward recomputes (acts_create). Recomputation runs the forward's kernels
 * on the forward's inputs, so every mode gives the same gradients bit for bit; they
 * differ in memory and time only. Recomputation never runs wdown's product (its
 * output is the next layer's input, kept); of what it does run at Qwen2-0.5B's shape
 * the gate/up product is 82 % of the FLOPs, the q/k/v and o products 17 %. Keeping
 * gate/up ([N,2F]: 38 KB a token a layer in fp32; in bf16, with act, 28.5 KB) makes
 * recomputation ~5x cheaper for half the memory of keeping everything (83 KB with
 * the input; acts_kept_bytes). */
typedef enum {
    CKPT_NONE = 0,      /* every layer's saved tensors kept */
    CKPT_FULL = 1,      /* each layer's input kept (x), the whole layer recomputed */
    CKPT_SELECTIVE = 2, /* each layer's input and gate/up product kept (gu; in bf16 gu16 and act16, what
                           SwiGLU's backward and wdown's weight gradient read): the attention side, the
                           norms and (fp32) SwiGLU recomputed, the gate/up product not */
} CheckpointMode;

/* Saved tensors of one layer (shapes per token row; N rows). With bf16 activations
 * (acts_create) the three that only products read are saved in bf16 instead: h1,
 * h2 and act are NULL and h1_16, h2_16, act16 hold them (else NULL); and gu is
 * NULL, gu16 holding its values rounded to bf16 for SwiGLU's backward (the bf16
 * products then read its gradient in bf16 too, as autocast's). */
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
    float *lora_u;  /* [LORA_N_MODULES, N, r] adapter activations, or NULL without adapters */
    uint16_t *h1_16, *h2_16, *act16, *gu16; /* [N,C], [N,C], [N,F], [N,2F] */
} LayerActs;

typedef struct {
    int max_tokens;        /* N capacity */
    CheckpointMode checkpointing;
    int bf16;              /* the products' saved inputs in bf16 (LayerActs) */
    int B, T, N;           /* of the last forward; T 0 when it was packed (model_forward_packed) */
    int32_t *ids, *pos, *targets;  /* [N] */
    int32_t *seq;          /* [N] the sequence of each position */
    int *starts;           /* [max_tokens+1] packed: sequence b holds positions starts[b] .. starts[b+1]-1 */
    int shared;            /* the last forward was model_forward_shared's: */
    int *skip, *from;      /* [max_tokens] its sequence b begins with sequence from[b]'s first skip[b] tokens */
    uint8_t *mask;         /* [N] */
    float inv_temp;
    float *x;              /* [L+1, N, C] residual stream at each layer input (and final) */
    LayerActs *layers;     /* [L], or [1] reused (CKPT_FULL); CKPT_SELECTIVE: [L] sharing every buffer but
                              the kept gate/up (gu, or gu16 and act16) */
    float *hf, *rstdf;     /* [N,C], [N] final norm */
    float *lse;            /* [N] of the LM head */
    /* backward scratch */
    float *dx, *dh, *dqkv, *dqk, *datt, *dgu, *dact, *dhf;
    uint16_t *dx16;        /* [N,C] dx in bf16 where both backward products of wdown or wo read it */
    float *lp_buf;
    LogprobScratch lp;
    float *att_scratch;    /* attention's (attention_scratch_floats) */
    size_t bytes;          /* total allocated, for the memory plan printout */
    float *arena;
    float *lora_arena;     /* adapters' saved activations and scratch (acts_reserve_lora) */
    float *lora_scratch;   /* [N, widest input + r] */
    uint8_t *lora_mask;    /* [L, N, lora_mask_bytes_per_token] adapter dropout masks (lora_dropout > 0) */
    uint8_t *lora_mask_ready; /* [L, LORA_N_MODULES] drawn in this forward */
    ModelPass pass;        /* the last forward's (model_forward): what its log-probs and backward are for */
    float *pw;             /* [N, C] those rows (acts_reserve_lora) */
    int pw_valid;          /* the last model_logprobs filled pw */
    enum { HEAD_NONE, HEAD_GRADIENT, HEAD_DONE } head; /* after model_logprobs_train: head_dlp holds the
                              log-probs' gradient, and (HEAD_DONE) dhf and the head's weight gradient
                              are already computed */
    float *head_dlp;       /* [N] */
    int *rows;             /* [N] scratch: the rows holding a target */
} Activations;

/* Plans and allocates activations for micro-batches of up to max_tokens (B*T)
 * tokens; chunk_rows sets the LM-head chunk (logits rows computed at once). bf16:
 * for a model under mixed precision (model_use_bf16_compute), whose products read
 * their inputs rounded to bf16: the inputs a backward's products read again (h1,
 * h2, act) are saved in bf16, half their memory, the same results bit for bit.
 * Such activations serve forwards of any model (one without bf16 products, a KL
 * reference, saves nothing there: no backward follows), backwards only under mixed
 * precision without adapters. */
void acts_create(Activations *a, const ModelConfig *cfg, int max_tokens, CheckpointMode checkpointing,
                 int chunk_rows, int bf16);
void acts_free(Activations *a);
size_t acts_plan_bytes(const ModelConfig *cfg, int max_tokens, CheckpointMode checkpointing, int chunk_rows, int bf16);
/* Bytes a token keeps in every layer between its forward and its backward under a
 * mode: the layer's input (CKPT_FULL), with its gate/up product (CKPT_SELECTIVE), or
 * every saved tensor (CKPT_NONE), for the plan's text (acts_describe). */
size_t acts_kept_bytes(const ModelConfig *cfg, CheckpointMode checkpointing, int bf16);
/* The plan line's words for a mode: "no checkpointing: 78.0 KB a token a layer kept", or
 * "checkpointed, selective: a layer's input and gate/up product kept, 41.5 KB a token a
 * layer", ... */
void acts_describe(const ModelConfig *cfg, CheckpointMode checkpointing, int bf16, char *out, size_t n);
/* Adds the memory the adapters of lo need (their saved products and scratch);
 * required before a forward of a model with lora set. */
void acts_reserve_lora(Activations *a, const ModelConfig *cfg, const struct LoraLayers *lo);
size_t acts_lora_plan_bytes(const ModelConfig *cfg, const struct LoraLayers *lo, int max_tokens,
                            CheckpointMode checkpointing);

/* Forward to the final normed hidden states. ids[B,T], mask[B,T] (1 real, 0 pad);
 * positions are cumsum(mask) - 1 as Hugging Face computes them from the mask.
 * pass: what the forward is for (NULL: inference). Requires B*T <= max_tokens and
 * ids in [0, V). */
void model_forward(Model *m, Activations *a, const int32_t *ids, const uint8_t *mask, int B, int T,
                   const ModelPass *pass);
/* The same for B sequences packed end to end, without padding: sequence b is
 * ids[starts[b] .. starts[b+1]-1] (starts[0] = 0, each at least 1 token), its
 * positions restart at 0 and its attention sees its own earlier tokens only. Every
 * position's results equal model_forward's for the sequence padded, to the GEMMs'
 * rounding at the other shape; the batch costs N = starts[B] tokens. Requires
 * N <= max_tokens and ids in [0, V). */
void model_forward_packed(Model *m, Activations *a, const int32_t *ids, const int *starts, int B,
                          const ModelPass *pass);
/* model_forward_packed for sequences that begin alike, each common start computed
 * once (a GRPO group's prompt): sequence b's first skip[b] tokens are not laid out
 * — ids[starts[b] ..] are its tokens skip[b] onwards, at positions skip[b].. — but
 * are sequence from[b]'s first ones (from[b] < b, itself laid out whole: skip 0),
 * whose rows its attention reads before its own. Every row's results are those of
 * model_forward_packed with sequence b laid out whole (the same attention call,
 * gathered), to the GEMMs' rounding at the other shape. No backward follows: pass
 * NULL or without backward. */
void model_forward_shared(Model *m, Activations *a, const int32_t *ids, const int *starts, const int *skip,
                          const int *from, int B, const ModelPass *pass);
/* After model_forward: logits[N,V] of every position (unscaled). For tests and
 * small vocabularies: materialises [N,V]. */
void model_logits(Model *m, Activations *a, float *logits);
/* After model_forward: logprob[N] (and entropy[N], may be NULL) of targets[N]
 * (-1 = no target) under softmax(logits * inv_temp). Saved for model_backward. */
void model_logprobs(Model *m, Activations *a, const int32_t *targets, float inv_temp,
                    float *logprob, float *entropy);
/* model_logprobs and the LM head's share of model_backward in one pass, for an
 * objective whose gradient with respect to each target's log-prob follows from
 * that log-prob alone (grad; ops/ops.h): with a trainable head (grads->base) the
 * [tokens x vocab] logits are computed once instead of twice, the head's weight
 * gradient accumulated into grads now. Complete it with model_backward(m, a,
 * grads, NULL, NULL): the same gradients, bit for bit, as model_logprobs then
 * model_backward with the dlogprob grad gives. */
void model_logprobs_train(Model *m, Activations *a, const int32_t *targets, float inv_temp, float *logprob,
                          float *entropy, const ModelGrads *grads, const LogprobGrad *grad);
/* Accumulates into g the gradient of Σ_n dlogprob[n] · logprob[n] + dentropy[n] ·
 * entropy[n] (dentropy may be NULL): the base's weights into g->base unless it is
 * NULL (frozen: only input gradients flow through the base), the adapters' into
 * g->lora when the forward applied m->lora. dlogprob NULL: after model_logprobs_train. */
void model_backward(Model *m, Activations *a, const ModelGrads *g, const float *dlogprob, const float *dentropy);

/* ---- one layer's backward alone: the reference for another backend's layer
 * (tests/gpu/test_gpu_layer_train.c checks gpu/layer_train.h against it) ---- */
/* After model_forward(_packed) of a pass with a backward: layer l's backward from a
 * gradient of the caller's choosing, dx[N, C] = dL/d(layer l's output) on entry and
 * dL/d(its input) on exit, as model_backward runs it (a checkpointed layer
 * recomputed first). Its weight gradients into g->base's layer l (NULL: a frozen
 * base), and its adapters' into g->lora (NULL: not differentiated) where the pass
 * applied them, each written over or added to as g's states say (model/grads.h). */
void model_layer_backward(Model *m, Activations *a, int l, const ModelGrads *g, float *dx);

#endif
