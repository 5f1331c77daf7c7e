/* gpu/layer_lora.h — one decoder layer's training pass in LoRA's form on the GPU: a
 * frozen base whose products are bf16 (WEIGHTS_BF16), fp32 activations, and the
 * adapters (gpu/lora.h) beside each fused product — model/transformer.c's
 * layer_forward / layer_backward as train/model.c runs them for LoRA (acts_create
 * without bf16 activations, acts_reserve_lora, ModelGrads with no base buffer).
 *
 * Forward: gpu/layer.h's forward keeping what the backward reads: rstd1, rstd2, h1,
 * h2, act and gate/up in fp32 (the adapters read h1, att, h2 and act; SwiGLU's
 * backward gate/up), q/k after RoPE with v, att, lse, xmid, each module's u =
 * dropout(x) A^T and its dropout bits, drawn from the CPU's streams (gpu/lora.h).
 * Backward: dx_out -> dx_in in place, only input gradients through the frozen
 * products (bf16(dout) W: the base's weight gradients are not formed) and the norms,
 * and each module's dA, dB written (the step's first backward to reach it, by the
 * caller's flags) or added to. Qwen3's q/k norm (model/transformer.c's place: on the
 * qkv product's output with its adapters, before RoPE): qkv keeps the norm's input,
 * qk the heads normed then RoPE'd, qk_rstd its statistics; the backward gives the
 * norm its input gradient only (q_norm and k_norm are frozen under LoRA, as on the
 * CPU, where a LoRA run has no base gradient). */
#ifndef GRPO_GPU_LAYER_LORA_H
#define GRPO_GPU_LAYER_LORA_H

#include "gpu/layer.h"
#include "gpu/layer_train.h"

/* What one layer's forward keeps, for up to max_tokens rows (N: the batch's). */
typedef struct {
    int max_tokens, r, mask_row_bytes;  /* mask_row_bytes: the widest module input's (in + 7) / 8 */
    CUdeviceptr rstd1, rstd2;           /* fp32 [N] */
    CUdeviceptr h1, h2;                 /* fp32 [N, C]: the normed rows, the qkv and gate|up products' input */
    CUdeviceptr qkv;                    /* fp32 [N, (H+2Hkv)D]: q and k after RoPE (q/k norm: before the
                                         * norm, the product's), v */
    CUdeviceptr qk, qk_rstd;            /* Qwen3 (else 0): fp32 [N, (H+Hkv)D] normed then RoPE'd, [H+Hkv, N] */
    CUdeviceptr att, lse, xmid;         /* fp32 [N, H D], [H N], [N, C] */
    CUdeviceptr gu, act;                /* fp32 [N, 2F], [N, F] */
    CUdeviceptr u;                      /* fp32 [LORA_N_MODULES][N, r] (the CPU's lora_u layout) */
    CUdeviceptr bits;                   /* [LORA_N_MODULES][max_tokens, mask_row_bytes]; 0 without dropout */
    CUdeviceptr du, xd;                 /* scratch: fp32 [N, r], [N, max in] (every layer may share them) */
    int shares;                         /* 1: every buffer but gu is another set's, which frees it (selective
                                         * recomputation: each layer keeps its gate/up alone) */
} GpuLoraLayerActs;

/* The adapters' batch: the dropout of a training pass (model/lora_layers.h's
 * LoraBatch keys): keys[B] (uint64) and seq[N] (int32) on the device, keys 0: no
 * dropout; lo and l name the streams (the adapters' seed, layer l). */
typedef struct {
    const LoraLayers *lo;
    int l;
    CUdeviceptr keys, seq;
} GpuLoraPass;

/* Activations for w's shapes and lo's adapters (bits where lo->spec.dropout > 0). -1
 * with err: max_tokens < 1, a refused allocation (nothing kept). */
int gpu_lora_layer_acts_create(GpuDevice *d, GpuLoraLayerActs *a, const GpuLayerWeights *w, const LoraLayers *lo,
                               int max_tokens, GrpoErr *err);
/* A set for another layer of w's shapes that owns only its gate/up (gu) and shares
 * every other buffer with owner (selective recomputation: owner's buffers hold the
 * layer at hand, remade by gpu_lora_layer_forward_kept). */
int gpu_lora_layer_acts_create_sharing(GpuDevice *d, GpuLoraLayerActs *a, const GpuLoraLayerActs *owner,
                                       const GpuLayerWeights *w, GrpoErr *err);
/* Frees what a owns (a sharing set: its gu alone). */
void gpu_lora_layer_acts_free(GpuDevice *d, GpuLoraLayerActs *a);

/* x_out[N, C] = the layer with its adapters lo applied to x_in (x_out may not be
 * x_in: the backward reads x_in), saving into a; s the training layer's scratch
 * (its h, wide, mid and bf16 buffers, as temporaries). */
int gpu_lora_layer_forward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, const GpuLoraPass *p,
                           GpuLoraLayerActs *a, GpuLayerTrainScratch *s, const GpuLayerBatch *b, CUdeviceptr x_out,
                           CUdeviceptr x_in, GrpoErr *err);
/* Selective recomputation: the forward of x_in again into a with a's gate/up (gu, the
 * adapters' terms in it) kept as gpu_lora_layer_forward of the same batch, pass and
 * x_in left it: the attention half with its adapters, h2, the gate/up adapters' u (no
 * output: y 0), act = SwiGLU(gu) and the down adapters' u, each module's dropout bits
 * drawn again from p's keys. The base's gate/up and down products are not run; no
 * output (the next layer's input is kept). The same bits as that forward. */
int gpu_lora_layer_forward_kept(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, const GpuLoraPass *p,
                                GpuLoraLayerActs *a, GpuLayerTrainScratch *s, const GpuLayerBatch *b, CUdeviceptr x_in,
                                GrpoErr *err);
/* After the forward of the same batch into a: dx[N, C] holds dL/dx_out on entry,
 * dL/dx_in on exit; x_in the forward's input. lo's views carry dA, dB (the adapters'
 * gradient buffer); write[m]: module m's are written over, else added to. */
int gpu_lora_layer_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, const GpuLoraPass *p,
                            const GpuLoraLayerActs *a, GpuLayerTrainScratch *s, const GpuLayerBatch *b,
                            const int write[LORA_N_MODULES], CUdeviceptr dx, CUdeviceptr x_in, GrpoErr *err);

#endif
