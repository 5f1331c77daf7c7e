/* gpu/model_lora.h — the whole model's training pass in LoRA's form on the GPU: what
 * train/model.c runs on the CPU for a run with adapters (a frozen base held in bf16,
 * WEIGHTS_BF16, fp32 activations, the adapters' gradient alone):
 *   forward:  x_0 = embedding(ids) (the bf16 table widened); x_{l+1} = layer_l(x_l)
 *             with its adapters (gpu/layer_lora.h, each layer's saved tensors and
 *             dropout bits kept); hf = rmsnorm(x_L, norm); the LM head's log-probs
 *             and entropies (gpu/head_pass.h, shared with gpu/model_train.h), lse kept;
 *   backward: from dlogprob per row: the head's dhf only (its weight is frozen: no
 *             gradient formed; without an entropy gradient from the E_p[W] its forward
 *             kept, no logits recomputed), the final norm's input gradient, every layer from
 *             the last (dA, dB of its adapters, dx through the frozen products), and
 *             nothing for the embedding.
 * The gradient lives in one device buffer in the adapters' flat layout (the
 * LoraLayers table: the vector the CPU's LoRA run clips, sums over processes and
 * hands to AdamW), each tensor written by the step's first backward to reach it and
 * added to by later ones (model/grads.h's GradState, kept on the host per table
 * entry); gpu_model_lora_settle zeroes what no backward reached. Dropout follows
 * the CPU's streams: a sequence's key (train/model.c's, from the step and the
 * sequence's id) with each row's position, layer and module, so a token's mask does
 * not depend on its micro-batch. Recomputation (gpu_model_lora_create_ckpt) as
 * gpu/model_train.h's: the layers' inputs and one layer's set kept (CKPT_SELECTIVE:
 * and each layer's gate/up, fp32 with the adapters' terms), each layer's forward
 * re-run from its input before its backward (selective: all but the base's gate/up
 * and down products), its dropout masks drawn again from the same keys (the same
 * bits), so the gradient is the one of the pass that keeps every set, bit for bit.
 * Not here: the optimizer. */
#ifndef GRPO_GPU_MODEL_LORA_H
#define GRPO_GPU_MODEL_LORA_H

#include <stdint.h>

#include "gpu/head_pass.h"
#include "gpu/layer_lora.h"
#include "gpu/model.h"

typedef struct {
    int max_tokens, L, C;
    int N, B;                    /* the last forward's rows and sequences; N 0: none to go back through */
    const LoraLayers *lo;        /* borrowed: the host's adapters (shapes, dropout, seed) */
    CheckpointMode ckpt;         /* CKPT_FULL: acts holds one shared set, each layer's remade in the backward;
                                  * CKPT_SELECTIVE: acts[l] own their gate/up, share the rest with acts[0] */
    GpuLoraLayerActs *acts;      /* [L] each layer's saved tensors; CKPT_FULL: [1], the layer's at hand */
    GpuLayerTrainScratch scratch; /* shared by every layer */
    CUdeviceptr x;               /* fp32 [L+1, N, C]: each layer's input, then the last one's output */
    CUdeviceptr dx;              /* fp32 [N, C]: the residual stream's gradient */
    CUdeviceptr batch;           /* int32 [N ids | N positions | N+1 starts] */
    CUdeviceptr keys, seq;       /* uint64 [max_tokens] the sequences' dropout keys, int32 [max_tokens] each row's */
    int dropout;                 /* the last forward drew dropout masks (keys given, p > 0) */
    int entropy_grad;            /* backwards may take an entropy gradient: no frozen-head shortcut */
    int32_t *host, *host_seq;    /* [3 max_tokens + 1], [max_tokens]: made on the host */
    GpuHeadPass head;            /* the frozen final norm and LM head: what their backward reads */
    CUdeviceptr grads;           /* fp32 [lo->table.total], the adapters' layout */
    GpuLayerLora *views;         /* [L] the policy's adapters with dA, dB into grads */
    uint8_t *written;            /* [lo->table.n]: entry e holds this step's gradient */
} GpuModelLora;

/* For g (uploaded from m: WEIGHTS_BF16 with m->lora attached), batches of up to
 * max_tokens rows and LM-head chunks of chunk_rows: -1 with err naming what is
 * refused (no adapters, a base not in bf16, max_tokens < 1, out
 * of device memory); then nothing stays allocated. */
int gpu_model_lora_create(GpuDevice *d, GpuModelLora *t, const GpuModel *g, const Model *m, int max_tokens,
                          int chunk_rows, GrpoErr *err);
/* The same with recomputation as ckpt says (see above; CKPT_NONE: gpu_model_lora_create).
 * entropy_grad: backwards may take an entropy gradient (GRPO's entropy bonus), which the
 * frozen head's shortcut cannot serve (gpu/head_pass.h): the head then recomputes its
 * logits, and its forward keeps no E_p[W] (gpu_model_lora_create: 0, the shortcut on). */
int gpu_model_lora_create_ckpt(GpuDevice *d, GpuModelLora *t, const GpuModel *g, const Model *m, int max_tokens,
                               int chunk_rows, CheckpointMode ckpt, int entropy_grad, GrpoErr *err);
void gpu_model_lora_free(GpuDevice *d, GpuModelLora *t);

/* A new optimizer step: no tensor written. The step's gradient complete: each
 * tensor no backward reached zeroed (-1 with err on a device error). */
void gpu_model_lora_begin(GpuModelLora *t);
int gpu_model_lora_settle(GpuDevice *d, GpuModelLora *t, GrpoErr *err);

/* The training forward of B packed sequences (gpu_model_train_forward's batch),
 * keys[B] each sequence's dropout key (NULL: no dropout, as the CPU's pass without
 * drop_keys): logprob[N], entropy[N] (NULL: none) on the host. */
int gpu_model_lora_forward(GpuDevice *d, const GpuModel *g, GpuModelLora *t, const int32_t *ids, const int *starts,
                           int B, const int32_t *targets, const uint64_t *keys, float inv_temp, float *logprob,
                           float *entropy, GrpoErr *err);
/* After the forward: the gradient of sum_n dlogprob[n] logprob[n] (+ dentropy[n]
 * entropy[n]; dentropy NULL: none) into the adapters' gradient, each tensor written
 * or added to as the step's state says. */
int gpu_model_lora_backward(GpuDevice *d, const GpuModel *g, GpuModelLora *t, const float *dlogprob,
                            const float *dentropy, GrpoErr *err);

/* The same on a packed PaddedBatch, per target in CSR order (model_train.h's). */
int gpu_model_lora_batch_forward(GpuDevice *d, const GpuModel *g, GpuModelLora *t, PaddedBatch *pb,
                                 const uint64_t *keys, float inv_temp, float *logp, float *entropy, GrpoErr *err);
int gpu_model_lora_batch_backward(GpuDevice *d, const GpuModel *g, GpuModelLora *t, PaddedBatch *pb,
                                  const float *dlogp, const float *dentropy, GrpoErr *err);

#endif
