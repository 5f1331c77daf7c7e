/* gpu/logprob.h — ops/logprob.c's logprob_forward / logprob_backward on the GPU:
 * the log-probabilities (and entropies) of target tokens through the LM head, a
 * chunk of rows at a time, so the [tokens x vocab] logits never exist whole on the
 * device either. Per chunk: the rows with a target gathered, logits = h W^T / T by
 * cuBLASLt (gpu/gemm.h) into the chunk's buffer, the chunk kernels (gpu/ops.h:
 * gpu_logprob_chunk_forward / _backward), and for the backward dz in place, then
 * dh += dz W and dW += dz^T h. The arguments and results are the CPU op's, on device
 * pointers; the tolerances are tests/gpu/test_gpu_logprob.c's. */
#ifndef GRPO_GPU_LOGPROB_H
#define GRPO_GPU_LOGPROB_H

#include <stdint.h>

#include "gpu/device.h"
#include "ops/ops.h"

/* The LM head W[V, C] on the device: bf16 values with bf16 products (mixed
 * precision's copy; the other operand rounded to bf16 too, as the CPU's gemm_bf16),
 * or fp32 values with fp32 products. (The CPU's third form, a frozen head held in
 * bf16 with fp32 products, has no GPU form yet.) */
typedef struct {
    CUdeviceptr w;
    int bf16_products;
} GpuHeadWeight;

/* The device buffers of one chunk, allocated once (gpu_logprob_scratch_init) for at
 * most max_rows rows a call: nothing is allocated per call. */
typedef struct {
    int chunk_rows, max_rows, C, V;
    CUdeviceptr logits;   /* [chunk_rows, V] fp32: the chunk's logits, then dz */
    CUdeviceptr dz16;     /* [chunk_rows, V] bf16: dz rounded once for both products */
    CUdeviceptr h_rows;   /* [chunk_rows, C] fp32: the chunk's hidden rows gathered */
    CUdeviceptr h16;      /* [chunk_rows, C] bf16: their rounding */
    CUdeviceptr d_rows;   /* [chunk_rows, C] fp32: dz W before it is added into dh */
    CUdeviceptr stats;    /* [3, chunk_rows] fp32: the chunk's per-row values */
    CUdeviceptr rows;     /* [2, max_rows] int32: the rows with a target, then their targets */
    int32_t *host_rows;   /* [2, max_rows]: the same, made on the host */
    float *host_lp;       /* [2, chunk_rows]: a chunk's log-probs and their gradient on the host (forward_backward) */
    CUdeviceptr obj;      /* [max_rows] x (w, adv, isw doubles; old, ref floats): a token-local objective's
                             inputs for the rows with a target, in their order (forward_backward) */
    unsigned char *host_obj; /* the same, made on the host, and [max_rows] ints: the rows' indices */
} GpuLogprobScratch;

/* Allocates s for chunks of chunk_rows rows, calls of up to max_rows rows, the head
 * [V, C]. 0, or -1 with err (bad sizes named; out of device memory). */
int gpu_logprob_scratch_init(GpuDevice *d, GpuLogprobScratch *s, int chunk_rows, int max_rows, int C, int V,
                             GrpoErr *err);
void gpu_logprob_scratch_free(GpuDevice *d, GpuLogprobScratch *s);

/* logprob_forward: logprob[N], entropy[N] (0: none), lse[N] (saved for the
 * backward) of h[N, C] through W at 1/T = inv_temp; targets[N] on the HOST (the
 * caller built the batch: a row without a target, < 0, gets 0s and costs nothing).
 * pw[N, C] (0: none): also E_p[W] of each row with a target (one more [rows x V]
 * product a chunk; other rows untouched), all a frozen head's backward needs
 * (gpu_logprob_backward_frozen). C and V are s's. A target >= V, or N > s's
 * max_rows: -1 with err naming it. */
int gpu_logprob_forward(GpuDevice *d, CUdeviceptr logprob, CUdeviceptr entropy, CUdeviceptr lse, CUdeviceptr pw,
                        CUdeviceptr h, GpuHeadWeight W, const int32_t *targets, int N, float inv_temp,
                        GpuLogprobScratch *s, GrpoErr *err);
/* logprob_backward_frozen: with W frozen and no entropy gradient, dh[N, C] +=
 * dlogprob[n] inv_temp (W[target[n]] - pw[n]) for the rows with a target: the dh of
 * gpu_logprob_backward from the forward's pw, without its logits or products. */
int gpu_logprob_backward_frozen(GpuDevice *d, CUdeviceptr dh, CUdeviceptr dlogprob, CUdeviceptr pw, GpuHeadWeight W,
                                const int32_t *targets, int N, float inv_temp, GpuLogprobScratch *s, GrpoErr *err);
/* logprob_forward_backward: the forward above, and in the same pass over the chunks
 * the backward of a token-local objective, each chunk's logits used once: the chunk's
 * gradient is taken on the device from grad->objective where grad has one (its inputs
 * uploaded once a call: no round trip a chunk), else its log-probs go to the host and
 * grad's function gives their gradient there (rows named as the forward's, the batch's
 * row indices; grad may run a chunk at a time); then the chunk's dz is formed from
 * those, dh[N, C] += (0: none) and dW[V, C] += (write_dw: written) as
 * gpu_logprob_backward's. The same products on the same operands as the forward and
 * then gpu_logprob_backward with that gradient: their bits, one product of the logits
 * fewer a chunk. No entropy gradient (the objective is token-local). */
int gpu_logprob_forward_backward(GpuDevice *d, CUdeviceptr logprob, CUdeviceptr entropy, CUdeviceptr lse,
                                 CUdeviceptr dh, CUdeviceptr dW, const LogprobGrad *grad, CUdeviceptr h,
                                 GpuHeadWeight W, const int32_t *targets, int N, float inv_temp, GpuLogprobScratch *s,
                                 int write_dw, GrpoErr *err);
/* logprob_backward: dh[N, C] += (0: none), dW[V, C] += (0: none; write_dw: written,
 * zeros where no row has a target) from dlogprob[N] and dentropy[N] (0: none), the
 * forward's lse[N], h and W; the logits recomputed a chunk at a time. */
int gpu_logprob_backward(GpuDevice *d, CUdeviceptr dh, CUdeviceptr dW, CUdeviceptr dlogprob, CUdeviceptr dentropy,
                         CUdeviceptr h, GpuHeadWeight W, const int32_t *targets, CUdeviceptr lse, int N,
                         float inv_temp, GpuLogprobScratch *s, int write_dw, GrpoErr *err);

#endif
