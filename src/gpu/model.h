/* gpu/model.h — the whole model's forward on the GPU, to per-token log-probs and
 * entropies: model/transformer.c's model_forward_packed then model_logprobs, for a
 * model whose products are bf16 (mixed precision, or WEIGHTS_BF16), in the CPU's
 * order and with its rounding points:
 *   x = embedding(ids) (the table as the CPU model reads it: mixed precision's fp32
 *   values, WEIGHTS_BF16's bf16 values widened); x = layer_l(x) for every layer
 *   (gpu/layer.h); hf = rmsnorm(x, norm) in fp32; the LM head's log-probs of
 *   softmax(bf16(hf) W^T * inv_temp) (gpu/logprob.h: hf is rounded to bf16 as the
 *   head's product reads it, 1/T is the product's alpha, as on the CPU).
 * With LoRA adapters attached (m->lora), each layer adds them as the CPU's does
 * under a frozen bf16 base (gpu_layer_forward_lora), unless a pass asks for the
 * base alone (ModelPass.base_only: the KL reference of new adapters), or other
 * adapters lent for one pass (gpu_model_batch_logprobs_lora: a starting adapter's).
 * Inference only: nothing is saved for a backward. Everything is sized once
 * (gpu_model_scratch_create); a call uploads the batch's ids, positions and starts
 * and downloads the per-position results. */
#ifndef GRPO_GPU_MODEL_H
#define GRPO_GPU_MODEL_H

#include <stdint.h>

#include "gpu/layer.h"
#include "gpu/logprob.h"
#include "model/batch.h"

/* The model's weights on the device. */
typedef struct {
    int L, C, V, D;
    float eps;                  /* rms_norm_eps of the final norm */
    GpuLayerWeights *layers;    /* [L] */
    CUdeviceptr embed;          /* [V, C]: fp32 (mixed precision) or bf16 (WEIGHTS_BF16: embed_bf16) */
    int embed_bf16;
    CUdeviceptr norm;           /* fp32 [C] */
    GpuHeadWeight head;         /* bf16 [V, C], bf16 products; == embed when a bf16 table is tied */
    CUdeviceptr inv_freq;       /* fp32 [D/2] RoPE's */
    /* LoRA: m->lora's adapters, or 0 / NULL where none are attached */
    int lora_r;
    CUdeviceptr lora_params;    /* fp32, lo->params' layout (lo->table) */
    GpuLayerLora *lora;         /* [L] each layer's views into lora_params */
} GpuModel;

/* m (mixed precision or WEIGHTS_BF16, with or without adapters attached) onto the
 * device. -1 with err naming what the GPU does not run (fp32 products,
 * --bf16_held, what gpu_layer_upload refuses) or a refused allocation; nothing
 * stays allocated. The adapters are copied as they are now: a later change to
 * m->lora's values needs gpu_model_lora_put. */
int gpu_model_upload(GpuDevice *d, GpuModel *g, const Model *m, GrpoErr *err);
void gpu_model_free(GpuDevice *d, GpuModel *g);
/* LoRA: lo's parameters (the shapes uploaded with the model) onto g's copy. */
int gpu_model_lora_put(GpuDevice *d, GpuModel *g, const struct LoraLayers *lo, GrpoErr *err);

/* Everything a forward of up to max_tokens packed rows uses, allocated once:
 * the residual stream, the final norm, the batch's ids/positions/starts, the
 * per-row results, one layer's scratch (reused by every layer) and the head's
 * (chunk_rows rows of logits at a time). */
typedef struct {
    int max_tokens;
    CUdeviceptr x, hf, rstd;             /* fp32 [N, C], [N, C], [N] */
    CUdeviceptr batch;                   /* int32 [N ids | N positions | N+1 starts] */
    CUdeviceptr logprob, entropy, lse;   /* fp32 [N] */
    int32_t *host;                       /* [3 max_tokens + 1]: the batch made on the host */
    GpuLayerScratch layer;
    GpuLogprobScratch head;
} GpuModelScratch;
int gpu_model_scratch_create(GpuDevice *d, GpuModelScratch *s, const GpuModel *g, int max_tokens, int chunk_rows,
                             GrpoErr *err);
void gpu_model_scratch_free(GpuDevice *d, GpuModelScratch *s);

/* A packed batch checked and laid out on the host in host (2 N + B + 1 ints) as
 * model_forward_packed lays it out — ids[N], positions restarting at each sequence's
 * start, starts[B + 1] — then uploaded to batch in one copy: N, or -1 with err (who
 * names the caller) for no sequence, an empty one, more than max_tokens rows, or an id
 * outside the vocabulary. */
int gpu_model_upload_batch(GpuDevice *d, const GpuModel *g, CUdeviceptr batch, int32_t *host, int max_tokens,
                           const int32_t *ids, const int *starts, int B, const char *who, GrpoErr *err);
/* model_forward_packed + model_logprobs: B sequences packed end to end (sequence b
 * rows starts[b] .. starts[b+1]-1, starts[0] = 0, each at least one row; its
 * positions restart at 0), ids[N] in [0, V), targets[N] (-1: none; a row without
 * one gets 0s). logprob[N] and entropy[N] (NULL: not computed) on the host. -1 with
 * err for a bad batch (named: sizes, a token id, a target) or a device error. */
int gpu_model_logprobs(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, const int32_t *ids, const int *starts,
                       int B, const int32_t *targets, float inv_temp, float *logprob, float *entropy, GrpoErr *err);
/* The same for a pass (ModelPass, model/transformer.h; NULL: inference, the adapters
 * applied): base_only runs the base without its adapters. A pass with dropout keys
 * (training) is refused: the forward here keeps nothing for a backward. */
int gpu_model_logprobs_pass(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, const int32_t *ids,
                            const int *starts, int B, const int32_t *targets, float inv_temp, const ModelPass *pass,
                            float *logprob, float *entropy, GrpoErr *err);
/* padded_batch_logprobs (model/batch.h) on the GPU for a packed batch (pb->packed):
 * the log-probs logp[offsets[S]] (and entropy, or NULL) of its targets, sequence by
 * sequence (CSR), through pb's per-position scratch. */
int gpu_model_batch_logprobs(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, PaddedBatch *pb, float inv_temp,
                             float *logp, float *entropy, GrpoErr *err);
int gpu_model_batch_logprobs_pass(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, PaddedBatch *pb,
                                  float inv_temp, const ModelPass *pass, float *logp, float *entropy, GrpoErr *err);
/* The same with lora[L] (views such as gpu_lora_view's into another buffer, of at
 * most the rank g was uploaded with; NULL: the base alone) in place of g's own
 * adapters: the same bf16 base under other adapters, with no second copy of it (a
 * run continuing --adapter: its frozen starting adapter, the KL reference). */
int gpu_model_batch_logprobs_lora(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, PaddedBatch *pb,
                                  float inv_temp, const GpuLayerLora *lora, float *logp, float *entropy,
                                  GrpoErr *err);

#endif
