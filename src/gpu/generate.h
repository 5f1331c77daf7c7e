/* gpu/generate.h — the whole model's decoding step on the GPU, as model/kvcache.c's
 * model_decode runs it under bf16 products (mixed precision, or WEIGHTS_BF16):
 *   x = embedding(tokens) (gpu/model.h's table, as model_embed reads it);
 *   x = gpu_decode_layer(x) for every layer against that layer's device KV cache;
 *   logits = rmsnorm(x, norm) W_head^T, the head on the row-wise product
 *   (gpu_matmul_rowwise_bf16, the CPU's matmul_forward_rowwise_bf16_products),
 * then, when asked, the sampler's tokens from those logits (gpu_sampler_sample).
 * Every step is batch-invariant (gpu/decode.h): a row's logits are the same bits
 * alone, in any batch, in any order or split of calls, so completions do not depend
 * on how generation is chunked.
 *
 * The weights are GpuModel's (gpu/model.h: the scoring forward's upload, the tied
 * head included); this adds the caches of every layer, sized once for n_slots slots
 * of cap positions, their bookkeeping (the slots' lengths and parents, kept on the
 * host as model/kvcache.h's KVCache keeps it, one level of shared prefix) and the
 * step's buffers for up to max_rows rows. A prompt is prefilled as rows of one slot
 * in one step (model_decode's way: the rows write their keys first, then each
 * attends to the slot's keys up to its own), not with the packed training forward;
 * every row's logits are computed (no want mask yet). Qwen3's q/k norm runs in
 * gpu_decode_layer. LoRA adapters run beside the frozen base (gpu_decode_layer_lora):
 * the model's own (uploaded with it), or views the caller hands in (gpu_gen_set_lora:
 * a trainer's device adapters, read in place at every step). Not here: the loop that
 * decodes whole completions. */
#ifndef GRPO_GPU_GENERATE_H
#define GRPO_GPU_GENERATE_H

#include <stdint.h>

#include "gpu/decode.h"
#include "gpu/model.h"
#include "gpu/ops.h"

typedef struct {
    const GpuModel *g;
    const GpuLayerLora *lora;    /* [L] the adapters decoded beside g's base (borrowed), or NULL */
    int n_slots, cap, max_rows;
    GpuLayerCache *caches;       /* [L], one per layer */
    GpuDecodeScratch scratch;    /* one layer's, reused by every layer */
    CUdeviceptr x, hf, rstd;     /* fp32 [max_rows, C], [max_rows, C], [max_rows] */
    CUdeviceptr logits;          /* fp32 [max_rows, V]: the last step's, row by row */
    CUdeviceptr rows;            /* int32 [4 max_rows | 2 n_slots]: tokens, slots, own, pos | parent, parent_len */
    int32_t *host;               /* the same, made on the host */
    int *len, *parent, *parent_len; /* [n_slots]: KVCache's bookkeeping */
    int *next_len;               /* [n_slots]: the lengths a step makes, taken when it has run */
    int last_n;                  /* the last step's rows */
    int max_picks;               /* max(n_slots, max_rows): picks a call */
    CUdeviceptr picked;          /* fp32 [max_picks, V]: the rows to sample, gathered */
    CUdeviceptr from;            /* int32 [max_picks]: their rows in logits */
    int32_t *host_from;          /* [max_picks] */
    CUdeviceptr tok, logp;       /* int32, fp32 [max_picks]: the sampler's picks */
    CUdeviceptr sample_scratch;  /* double [max_picks, V]: the sampler's */
} GpuGen;

/* Caches for n_slots slots of cap positions in every layer of g and buffers for
 * steps of up to max_rows rows; every slot empty. g must outlive gen; its adapters,
 * where it was uploaded with some (g->lora), are decoded beside its base. -1 with err
 * for sizes below 1 or a refused allocation (nothing stays allocated). */
int gpu_gen_create(GpuDevice *d, GpuGen *gen, const GpuModel *g, int n_slots, int cap, int max_rows, GrpoErr *err);
void gpu_gen_free(GpuDevice *d, GpuGen *gen);
/* LoRA: the adapters the next steps decode beside the base, lora[L] (gpu/layer.h's
 * views, e.g. gpu_lora_view into a trainer's device buffer; NULL: none), borrowed:
 * read at every step, so they must outlive their use here, and an update of the
 * values they point to is decoded from the next step on. The step's scratch grows to
 * the largest rank once. -1 with err for a refused allocation (the adapters before
 * kept). A cache filled under other adapters is the caller's to reset. */
int gpu_gen_set_lora(GpuDevice *d, GpuGen *gen, const GpuLayerLora *lora, GrpoErr *err);
/* kv_cache_reset and kv_cache_share_prefix: slot emptied (and detached), or emptied
 * and continuing parent's current contents (a parent with no parent of its own). -1
 * with err naming the slot for a bad one. Only the host's bookkeeping changes: the
 * parent's keys are read in place. */
int gpu_gen_reset(GpuGen *gen, int slot, GrpoErr *err);
int gpu_gen_share_prefix(GpuGen *gen, int slot, int parent, GrpoErr *err);

/* model_decode for n rows: row r appends tokens[r] to slot slots[r] at the slot's
 * next position (rows of one slot in order: a prompt's rows). The rows' logits
 * [n, V] are left on the device in gen->logits (row r at r V floats). -1 with err,
 * nothing changed, for n outside 1 .. max_rows, a slot outside the cache or full, a
 * token outside the vocabulary. -1 with err for a copy or launch refused: the slots'
 * bookkeeping unchanged (the keys a part-run step wrote lie past the slots' lengths,
 * read by no one and written over by the next step), and no last step's logits to
 * sample (they may be part-written). */
int gpu_gen_step(GpuDevice *d, GpuGen *gen, int n, const int *slots, const int32_t *tokens, GrpoErr *err);
/* The sampler on the last step's logits: pick r from row from[r] of them (NULL: row
 * r; a prompt's last row may be sampled for each slot continuing it), drawing from
 * rows' (device arrays: gpu/ops.h's GpuSampleRows, the caller's) Philox stream and
 * context; tok[n] and logp[n] (NULL: not wanted) downloaded to the host. n up to
 * max(n_slots, max_rows). -1 with err for n outside that, a row the last step did not
 * have, or a launch refused. */
int gpu_gen_sample(GpuDevice *d, GpuGen *gen, int n, const int *from, const GpuSampleRows *rows, const SamplerOpts *o,
                   int32_t *tok, float *logp, GrpoErr *err);

#endif
