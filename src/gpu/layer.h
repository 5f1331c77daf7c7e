/* gpu/layer.h — one decoder layer's forward on the GPU (Qwen2's, and Qwen3's with its
 * q/k norm), for a packed batch, in the CPU's order and with its formulas under mixed precision
 * (model/transformer.c's layer_forward on a model with bf16 products):
 *   h = rmsnorm(x, ln1); qkv = h W_qkv^T + b_qkv; (Qwen3: each head of q
 *   and k RMS-normed over D, q_norm / k_norm); RoPE on q and k; attention (GQA,
 *   each sequence its own rows); xmid = att W_o^T (+ b_o) + x; h = rmsnorm(xmid,
 *   ln2); [gate | up] = h W_gu^T; x_out = swiglu(gate, up) W_down^T + xmid,
 * every product reading its input rounded to bf16 and the weights' bf16 values (the
 * model's own bf16 copy, uploaded as it is), sums, norms, RoPE, attention and the
 * residual adds in fp32. Forward only: nothing is saved for a backward. */
#ifndef GRPO_GPU_LAYER_H
#define GRPO_GPU_LAYER_H

#include "gpu/device.h"
#include "gpu/lora.h"
#include "model/transformer.h"

/* One layer's weights on the device. */
typedef struct {
    int C, F, H, Hkv, D;
    int qk_norm;                        /* Qwen3: q and k RMS-normed per head */
    float eps;                          /* rms_norm_eps */
    CUdeviceptr ln1, ln2;               /* fp32 [C] */
    CUdeviceptr bqkv, bo;               /* fp32 [(H+2Hkv)D], [C]; 0 where the model has none */
    CUdeviceptr q_norm, k_norm;         /* fp32 [D] each (Qwen3's qk_norm); 0 where the model has none */
    CUdeviceptr wqkv, wo, wgu, wdown;   /* bf16 [(H+2Hkv)D, C], [C, H D], [2F, C] gate | up, [C, F] */
} GpuLayerWeights;

/* Layer l of m, a model whose products are bf16 (mixed precision, or WEIGHTS_BF16),
 * onto the device. -1 with err for a model the GPU layer does not run (fp32
 * products) or a refused allocation (then nothing stays allocated). */
int gpu_layer_upload(GpuDevice *d, GpuLayerWeights *w, const Model *m, int l, GrpoErr *err);
void gpu_layer_free(GpuDevice *d, GpuLayerWeights *w);

/* The forward's intermediate tensors, for batches of up to max_tokens rows. */
typedef struct {
    int max_tokens;
    CUdeviceptr h, rstd, qkv, att, lse, xmid, gu, act; /* fp32 */
    CUdeviceptr qk_rstd;                               /* fp32 [H+Hkv, N]: the q/k norm's (0 without one) */
    CUdeviceptr in16;                                  /* bf16: the product's input as it reads it */
    CUdeviceptr lora_u;                                /* fp32 [N, r]: an adapter's u (gpu_layer_scratch_lora) */
} GpuLayerScratch;
int gpu_layer_scratch_create(GpuDevice *d, GpuLayerScratch *s, const GpuLayerWeights *w, int max_tokens,
                             GrpoErr *err);
void gpu_layer_scratch_free(GpuDevice *d, GpuLayerScratch *s);

/* LoRA: one layer's adapters on the device (gpu/lora.h's views into the model's
 * adapter buffer): mod[m] where has[m], the modules LoraLayers.entry adapts. */
typedef struct {
    int has[LORA_N_MODULES];
    GpuLoraAdapter mod[LORA_N_MODULES];
} GpuLayerLora;

/* LoRA: the scratch's lora_u for adapters of rank r (gpu_layer_forward_lora). */
int gpu_layer_scratch_lora(GpuDevice *d, GpuLayerScratch *s, int r, GrpoErr *err);

/* A packed batch on the device: B sequences, sequence b rows starts[b] ..
 * starts[b+1]-1 (N = starts[B] rows, given on the host too), pos[N] each row's
 * position (int32), inv_freq[D/2] RoPE's inverse frequencies (the model's). */
typedef struct {
    int B, N;
    CUdeviceptr starts, pos, inv_freq;
} GpuLayerBatch;

/* x_out[N, C] = the layer applied to x_in[N, C] (fp32; x_out may be x_in). -1 with
 * err for a batch larger than the scratch's, or a launch refused. */
int gpu_layer_forward(GpuDevice *d, const GpuLayerWeights *w, GpuLayerScratch *s, const GpuLayerBatch *b,
                      CUdeviceptr x_out, CUdeviceptr x_in, GrpoErr *err);
/* LoRA: the same with adapters (lo; NULL: none), as model/transformer.c's layer_forward
 * under a frozen bf16 base (WEIGHTS_BF16, fp32 activations): each fused product in
 * bf16, then its adapters' fp32 path (gpu_lora_forward, no dropout: inference) on
 * the product's fp32 input — h1, att, h2, act — added to its output before any
 * residual add, the CPU's order. s needs gpu_layer_scratch_lora. */
int gpu_layer_forward_lora(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, GpuLayerScratch *s,
                           const GpuLayerBatch *b, CUdeviceptr x_out, CUdeviceptr x_in, GrpoErr *err);

#endif
