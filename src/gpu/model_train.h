/* gpu/model_train.h — the whole model's training pass on the GPU: model/transformer.c's
 * model_forward_packed + model_logprobs, then model_backward, for a Qwen2- or Qwen3-form model
 * under mixed precision with bf16 activations (what train/model.c runs for such a
 * model), on the device from the batch's ids to every parameter's gradient:
 *   forward:  x_0 = embedding(ids); x_{l+1} = layer_l(x_l) (gpu/layer_train.h, each
 *             layer's saved tensors kept); hf = rmsnorm(x_L, norm); the LM head's
 *             log-probs and entropies of the targets (gpu/head_pass.h), lse kept;
 *   backward: from dlogprob (and dentropy) per row: the head (dhf, and the head's weight gradient)
 *             and the final norm (gpu/head_pass.h), every layer from the last, the embedding's scatter (a
 *             tied table: added to the head's gradient, as the CPU's).
 * The gradients live in one device buffer laid out as the CPU model's parameter table
 * (model/params.h: the same offsets), so AdamW and clipping can run over it as one
 * flat vector as the CPU's loop does. Which tensors this step has written is kept on
 * the host as model/grads.h's GradState keeps it: a step's first backward writes each
 * tensor over (no clearing first), later ones add; gpu_model_train_settle zeroes what
 * no backward reached. Everything is allocated once for max_tokens rows.
 * Recomputation (gradient checkpointing, gpu_model_train_create_ckpt), model/transformer.h's
 * CheckpointMode: CKPT_FULL keeps only the layers' inputs x and ONE set of a layer's
 * saved tensors; the backward re-runs each layer's forward from its kept input into that
 * set before its backward. CKPT_SELECTIVE keeps each layer's gate/up too (gu16 and act16,
 * what SwiGLU's backward and wdown's weight gradient read) beside one shared set of the
 * rest, and re-runs the layer only up to its gate/up product
 * (gpu_layer_forward_train_kept): the gate/up and down products, the layer's largest,
 * are not run again. The kernels are deterministic, so the set holds the forward's bits
 * and the gradients are those of the pass that keeps every layer's set, bit for bit.
 * Not here: adapters. */
#ifndef GRPO_GPU_MODEL_TRAIN_H
#define GRPO_GPU_MODEL_TRAIN_H

#include <stdint.h>

#include "gpu/head_pass.h"
#include "gpu/layer_train.h"
#include "gpu/model.h"

typedef struct {
    int max_tokens, L, C;
    int N, B;                   /* the last forward's rows and sequences; N 0: none to go back through */
    CheckpointMode ckpt;        /* CKPT_FULL: acts holds one shared set, each layer's remade in the backward;
                                 * CKPT_SELECTIVE: acts[l] own their gate/up, share the rest with acts[0] */
    GpuLayerActs *acts;         /* [L] each layer's saved tensors; CKPT_FULL: [1], the layer's at hand */
    GpuLayerTrainScratch scratch; /* shared by every layer */
    CUdeviceptr x;              /* fp32 [L+1, N, C]: each layer's input, then the last one's output */
    CUdeviceptr dx;             /* fp32 [N, C]: the residual stream's gradient */
    CUdeviceptr batch;          /* int32 [N ids | N positions | N+1 starts] */
    int32_t *host;              /* [3 max_tokens + 1]: the batch made on the host */
    GpuHeadPass head;           /* the final norm and the LM head: what their backward reads */
    /* the gradients, in the table's layout */
    const ParamTable *table;    /* borrowed: the model's */
    CUdeviceptr grads;          /* fp32 [table->total] */
    GpuLayerGrads *lgrads;      /* [L] views into grads */
    CUdeviceptr g_embed, g_norm, g_head; /* views; g_head == g_embed when the head is tied */
    uint8_t *written;           /* [table->n]: tensor e holds this step's gradient */
} GpuModelTrain;

/* For g, uploaded from m (mixed precision), batches of up to max_tokens rows and
 * LM-head chunks of chunk_rows: -1 with err naming what is refused (a model not
 * under mixed precision, max_tokens < 1, out of device memory); then nothing stays
 * allocated. The step starts with no tensor
 * written. */
int gpu_model_train_create(GpuDevice *d, GpuModelTrain *t, const GpuModel *g, const Model *m, int max_tokens,
                           int chunk_rows, GrpoErr *err);
/* The same with recomputation as ckpt says (see above; CKPT_NONE: gpu_model_train_create). */
int gpu_model_train_create_ckpt(GpuDevice *d, GpuModelTrain *t, const GpuModel *g, const Model *m, int max_tokens,
                                int chunk_rows, CheckpointMode ckpt, GrpoErr *err);
void gpu_model_train_free(GpuDevice *d, GpuModelTrain *t);

/* A new optimizer step: no tensor written (grad_state_begin). Touches no gradient. */
void gpu_model_train_begin(GpuModelTrain *t);
/* The step's gradient complete: every tensor no backward reached is zeroed
 * (grad_state_settle). -1 with err on a device error. */
int gpu_model_train_settle(GpuDevice *d, GpuModelTrain *t, GrpoErr *err);

/* The forward of B sequences packed end to end (gpu_model_logprobs' batch: starts[B+1],
 * ids[N], targets[N] with -1 for none), keeping what the backward reads:
 * logprob[N] and entropy[N] (NULL: not computed) on the host, a row without a
 * target 0. -1 with err for a bad batch (named) or a device error. */
int gpu_model_train_forward(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, const int32_t *ids, const int *starts,
                            int B, const int32_t *targets, float inv_temp, float *logprob, float *entropy,
                            GrpoErr *err);
/* The same with the head's backward of a token-local objective in the same pass
 * (gpu/head_pass.h: gpu_head_pass_forward_grad, one product of the logits fewer):
 * grad gives dlogprob of each row with a target (named by its row in the batch) from
 * its log-prob, on the host, a chunk at a time. The backward after it is given no
 * dlogprob and no dentropy (NULL). */
int gpu_model_train_forward_grad(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, const int32_t *ids,
                                 const int *starts, int B, const int32_t *targets, float inv_temp, float *logprob,
                                 float *entropy, const LogprobGrad *grad, GrpoErr *err);
/* After gpu_model_train_forward: the gradient of sum_n dlogprob[n] logprob[n]
 * + dentropy[n] entropy[n] (dlogprob[N], dentropy[N] or NULL on the host; rows
 * without a target ignored) into the gradient buffer, each tensor written or added
 * to as this step's state says: model_backward's dlogprob and dentropy. -1 with err
 * when no forward precedes it, or on a device error. */
int gpu_model_train_backward(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, const float *dlogprob,
                             const float *dentropy, GrpoErr *err);

/* The same for a packed PaddedBatch (model/batch.h), per target in CSR order:
 * logp[offsets[S]] (entropy or NULL) out of the forward, dlogp[offsets[S]] (and
 * dentropy or NULL) into the backward (through pb's per-position scratch, as
 * padded_batch_logprobs and train_model_backward); grad (NULL: none) a token-local
 * gradient over CSR indices, as padded_batch_logprobs_train's, after which the
 * backward takes dlogp NULL. */
int gpu_model_train_batch_forward(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, PaddedBatch *pb,
                                  float inv_temp, float *logp, float *entropy, const LogprobGrad *grad, GrpoErr *err);
int gpu_model_train_batch_backward(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, PaddedBatch *pb,
                                   const float *dlogp, const float *dentropy, GrpoErr *err);

#endif
