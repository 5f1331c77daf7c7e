/* gpu/decode.h — one decoding step of one Qwen2 or Qwen3 decoder layer on the GPU, for n rows
 * of one new token each, as model/kvcache.c's model_decode runs a layer under mixed
 * precision (bf16 products, fp32 norms, RoPE, attention and adds):
 *   h = rmsnorm(x, ln1); qkv = h W_qkv^T + b_qkv; (Qwen3) each head of q and k
 *   RMS-normed over D (q_norm, k_norm); RoPE on q and k at each row's
 *   position; k and v into the layer's cache at (slot, own); attention over the
 *   slot's parent prefix then its own keys; x += att W_o^T (+ b_o);
 *   h = rmsnorm(x, ln2); x += swiglu(h W_gu^T) W_down^T,
 * every product on gpu_matmul_rowwise_bf16 (gpu/ops.h), whose sums do not depend on
 * the other rows, nor does any other step: a row's result is the same bits alone or
 * in any batch, so generation on the GPU does not depend on chunking or batching.
 *
 * With LoRA adapters (gpu_decode_layer_lora), each fused product's adapters are added
 * beside the frozen bf16 base as model_decode adds them (lora_linear_decode: fp32,
 * after the base product and its bias, before q/k norm, SwiGLU or the residual add),
 * on row-local kernels (gpu_lora_decode), so the invariance holds with them. The
 * adapters are the caller's, read by pointer at each step (never copied): a trainer's
 * updated adapters decode as they stand.
 *
 * What is not here: the cache's bookkeeping (lengths, parents: the caller's, once a
 * step for all layers, as model_decode's), the embedding, the final norm and the LM
 * head. */
#ifndef GRPO_GPU_DECODE_H
#define GRPO_GPU_DECODE_H

#include "gpu/layer.h"

/* One layer's KV cache on the device: k, v [n_slots, cap, kv_dim] fp32, kv_dim = Hkv D
 * (model/kvcache.h's KVCache's layout for one layer). */
typedef struct {
    int n_slots, cap, kv_dim;
    CUdeviceptr k, v;
} GpuLayerCache;
int gpu_layer_cache_create(GpuDevice *d, GpuLayerCache *c, const GpuLayerWeights *w, int n_slots, int cap,
                           GrpoErr *err);
void gpu_layer_cache_free(GpuDevice *d, GpuLayerCache *c);

/* A step's rows, device int arrays: row r appends to slot slots[r] at its own
 * position own[r] (the slot's tokens so far), pos[r] = parent_len[slot] + own[r] its
 * position in the sequence; parent, parent_len [n_slots] (parent -1: none). Rows of
 * one slot come in order (a prompt's rows), as model_decode takes them. */
typedef struct {
    int n;
    CUdeviceptr slots, own, pos;
    CUdeviceptr parent, parent_len;
    CUdeviceptr inv_freq; /* RoPE's [D/2], the model's */
} GpuDecodeRows;

/* The step's intermediate tensors, for up to max_rows rows. */
typedef struct {
    int max_rows;
    CUdeviceptr h, rstd, qkv, att, tmp, gu, act; /* fp32 */
    CUdeviceptr qk_rstd;                         /* fp32 [H+Hkv, n]: Qwen3's q/k norm's (0 without one) */
    int lora_r;                                  /* LoRA: the largest rank lora_u holds (0: none) */
    CUdeviceptr lora_u;                          /* fp32 [max_rows, lora_r]: an adapter's u */
} GpuDecodeScratch;
int gpu_decode_scratch_create(GpuDevice *d, GpuDecodeScratch *s, const GpuLayerWeights *w, int max_rows,
                              GrpoErr *err);
void gpu_decode_scratch_free(GpuDevice *d, GpuDecodeScratch *s);
/* LoRA: the largest rank of the adapters of lo[L] (0: none adapts anything). */
int gpu_decode_lora_rank(const GpuLayerLora *lo, int L);
/* LoRA: the scratch's lora_u for adapters of rank up to r (kept when it holds r already). */
int gpu_decode_scratch_lora(GpuDevice *d, GpuDecodeScratch *s, int r, GrpoErr *err);

/* x[n, C] (fp32, the residual stream) through the layer in place, the rows' keys and
 * values written into c. -1 with err for more rows than the scratch's, a cache of
 * another shape than the layer's, or a launch refused. */
int gpu_decode_layer(GpuDevice *d, const GpuLayerWeights *w, GpuLayerCache *c, GpuDecodeScratch *s,
                     const GpuDecodeRows *rows, CUdeviceptr x, GrpoErr *err);
/* The same with the layer's adapters lo (gpu/layer.h's views; borrowed; NULL: none)
 * beside the base. -1 with err also for an adapter of a rank the scratch's lora_u
 * does not hold (gpu_decode_scratch_lora). */
int gpu_decode_layer_lora(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, GpuLayerCache *c,
                          GpuDecodeScratch *s, const GpuDecodeRows *rows, CUdeviceptr x, GrpoErr *err);

#endif
