/* gpu/lora.h — LoRA adapters on the GPU: one adapted module of a linear layer,
 * forward and backward, as model/lora_layers.c computes them on the CPU,
 *
 *     y += scaling · (dropout(x) A^T) B^T,   u = dropout(x) A^T saved for backward,
 *
 * every product in fp32 (gpu_gemm_f32: the CPU's adapters are fp32 products on the
 * fp32 activations, under mixed precision too), on device pointers. The adapters'
 * parameters and gradients live on the device in the CPU's flat layout (the
 * LoraLayers table's offsets: a copy of lo->params, and a gradient buffer of the same
 * size), so AdamW and clipping can run over them as over any flat buffer.
 *
 * Dropout's keep bits are drawn on the device (gpu_lora_dropout_mask) from the CPU's
 * streams, keyed by (sequence key, position, layer, module): the CPU's bits, so a
 * token's mask does not depend on its micro-batch; the forward draws them, its
 * recomputation and the backward reuse them, as the CPU's mask_ready. */
#ifndef GRPO_GPU_LORA_H
#define GRPO_GPU_LORA_H

#include "gpu/device.h"
#include "model/lora_layers.h"

/* One adapted module: A [r, in] and B [out, r] (fp32), their gradients dA and dB (0:
 * not wanted), its output rows [row0, row0 + out) of its fused linear layer. */
typedef struct {
    int r, in, out, row0;
    float scaling;
    CUdeviceptr A, B, dA, dB;
} GpuLoraAdapter;

/* Module mod of layer l as a view into params (and grads; 0: none), device copies of
 * lo->params' layout: 1 with *a set, 0 where the module is not adapted. */
int gpu_lora_view(GpuLoraAdapter *a, const LoraLayers *lo, const ModelConfig *cfg, int l, LoraModule mod,
                  CUdeviceptr params, CUdeviceptr grads);

/* A batch's dropout for one module: bits [N, (in + 7) / 8] (0: no dropout: no keys, or
 * p = 0), scale 1 / (1 - p). */
typedef struct {
    CUdeviceptr bits;
    float scale;
} GpuLoraDropout;

/* Draws module mod of layer l's keep bits for N rows (model/lora_layers.c's draw_mask):
 * keys[B] (uint64, each sequence's dropout key), seq[N] and pos[N] (int32) on the
 * device, bits [N, (in + 7) / 8] written; p the dropout probability. */
int gpu_lora_dropout_mask(GpuDevice *d, CUdeviceptr bits, CUdeviceptr keys, CUdeviceptr seq, CUdeviceptr pos, int N,
                          int in, const LoraLayers *lo, int l, LoraModule mod, GrpoErr *err);

/* y[N, ldy] (the fused output, the module's rows from row0) += scaling u B^T, u[N, r]
 * = dropout(x) A^T written; x[N, in]; xd[N, in] scratch (with dropout). y 0: u only
 * (a recomputation for a backward). */
int gpu_lora_forward(GpuDevice *d, const GpuLoraAdapter *a, CUdeviceptr y, int ldy, CUdeviceptr u, CUdeviceptr x,
                     CUdeviceptr xd, const GpuLoraDropout *drop, int N, GrpoErr *err);
/* Given dy[N, ldy] (the fused output's gradient): dB += scaling dy^T u, du = scaling
 * dy B (du[N, r] scratch), dA += du^T dropout(x), dx[N, in] += dropout'(du A) (0: not
 * wanted); xd[N, in] scratch (with dropout, or dx). */
int gpu_lora_backward(GpuDevice *d, const GpuLoraAdapter *a, CUdeviceptr dx, CUdeviceptr dy, int ldy, CUdeviceptr x,
                      CUdeviceptr u, CUdeviceptr du, CUdeviceptr xd, const GpuLoraDropout *drop, int N, GrpoErr *err);
/* The same with dA and dB written over (write: the step's first backward to reach
 * them, model/grads.h's rule; beta 0 products) instead of added to. */
int gpu_lora_backward_write(GpuDevice *d, const GpuLoraAdapter *a, int write, CUdeviceptr dx, CUdeviceptr dy, int ldy,
                            CUdeviceptr x, CUdeviceptr u, CUdeviceptr du, CUdeviceptr xd, const GpuLoraDropout *drop,
                            int N, GrpoErr *err);

/* Decoding (gpu/decode.h): y[n, ldy] (the fused output, the module's rows from row0)
 * += (scaling x A^T) B^T for n rows, u[n, r] = scaling x A^T written (scratch), as
 * model/lora_layers.c's lora_linear_decode: fp32, no dropout, and row-local kernels
 * (gpu/kernels/lora_decode.cu) in place of cuBLASLt, so a row's result never depends on
 * the other rows of the step. -1 with err for n < 1 or a launch refused. */
int gpu_lora_decode(GpuDevice *d, const GpuLoraAdapter *a, CUdeviceptr y, int ldy, CUdeviceptr u, CUdeviceptr x, int n,
                    GrpoErr *err);

#endif
