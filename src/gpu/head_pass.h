/* gpu/head_pass.h — the head end of the GPU's two training passes (gpu/model_train.h's full
 * fine-tuning, gpu/model_lora.h's LoRA), written once for both:
 *   forward:  hf = rmsnorm(x_L, norm); the LM head's log-probs (and entropies) of the
 *             targets through gpu/logprob.h's chunk loop, lse kept; copied back to the host;
 *   backward: from dlogprob (and dentropy) per row: the head's backward into dhf, then the
 *             final norm's into dx, the residual stream's gradient the layers go back through.
 * The two passes differ only in whether the head and the final norm train: full fine-tuning
 * hands in their gradients (GpuHeadGrads), LoRA's frozen base hands in none and gets dx
 * alone, through the frozen head's shortcut where the CPU takes it (pw kept by the
 * forward). A token-local objective's head backward can run inside the forward
 * (gpu_head_pass_forward_grad: the logits computed once). What the pass keeps between its
 * forward and backward (hf, rstdf, lse, the targets, 1/T) lives here, allocated once for
 * max_tokens rows; the layers' x_L is the caller's. */
#ifndef GRPO_GPU_HEAD_PASS_H
#define GRPO_GPU_HEAD_PASS_H

#include <stdint.h>

#include "gpu/model.h"

typedef struct {
    int max_tokens, C;
    float inv_temp;             /* the last forward's 1/T */
    CUdeviceptr hf, rstdf;      /* fp32 [N, C], [N]: the final norm's output and statistics */
    CUdeviceptr dhf;            /* fp32 [N, C]: hf's gradient */
    CUdeviceptr logprob, entropy, lse; /* fp32 [N]: the forward's; lse is what the head's backward reads */
    CUdeviceptr dlogprob, dentropy;    /* fp32 [N]: the backward's inputs, uploaded */
    int32_t *targets;           /* [max_tokens] on the host: the last forward's (gpu/logprob.h reads them there) */
    CUdeviceptr pw;             /* fp32 [N, C] a frozen head's E_p[W] (gpu_logprob_forward), or 0: not kept */
    int pw_valid;               /* the last forward filled pw */
    int head_done;              /* the last forward ran the head's backward too (gpu_head_pass_forward_grad) */
    GpuLogprobScratch chunk;    /* the head's chunk of logits and its gathers */
} GpuHeadPass;

/* The gradients of a trainable head and final norm, each written over (write_*: the step's
 * first backward to reach it, model/grads.h's rule) or added to. */
typedef struct {
    CUdeviceptr head;           /* fp32 [V, C]: the embedding's when the head is tied */
    CUdeviceptr norm;           /* fp32 [C] */
    int write_head, write_norm;
} GpuHeadGrads;

/* h for batches of up to max_tokens rows of width C, a head of V rows, chunks of chunk_rows
 * rows: -1 with err (bad sizes named, out of device memory); h is then safe to free.
 * frozen: the head never trains (LoRA's pass), so the forward also keeps E_p[W] of each
 * row (ops/logprob.c's shortcut: one more product a chunk) and a backward without an
 * entropy gradient reads it in place of recomputing the logits (two products fewer). */
int gpu_head_pass_create(GpuDevice *d, GpuHeadPass *h, int max_tokens, int C, int V, int chunk_rows, int frozen,
                         GrpoErr *err);
void gpu_head_pass_free(GpuDevice *d, GpuHeadPass *h);

/* The forward from x[N, C] (the last layer's output): logprob[N] and entropy[N] (NULL: not
 * computed) on the host of targets[N] (host; < 0: no target, 0s) through g's final norm and
 * head at 1/T = inv_temp; the targets and inv_temp kept for the backward. -1 with err for a
 * target >= V, N > max_tokens or a device error. */
int gpu_head_pass_forward(GpuDevice *d, const GpuModel *g, GpuHeadPass *h, float *logprob, float *entropy,
                          CUdeviceptr x, const int32_t *targets, int N, float inv_temp, GrpoErr *err);
/* The forward as above with a token-local objective's backward through the head in the same
 * pass (gpu_logprob_forward_backward: grad gives dlogprob of each row with a target from
 * its log-prob, on the host): dhf formed and, with grads, the head's weight gradient
 * written or added to as grads->write_head says (taken now: the backward that follows
 * does not take it again). The backward after it is given no dlogprob and no dentropy
 * (NULL) and goes through the final norm alone. */
int gpu_head_pass_forward_grad(GpuDevice *d, const GpuModel *g, GpuHeadPass *h, float *logprob, float *entropy,
                               CUdeviceptr x, const int32_t *targets, int N, float inv_temp, const LogprobGrad *grad,
                               const GpuHeadGrads *grads, GrpoErr *err);
/* After gpu_head_pass_forward over the same x and N: dx[N, C] = (written, not added) the
 * gradient of sum_n dlogprob[n] logprob[n] + dentropy[n] entropy[n] (host; dentropy NULL:
 * none) at the final norm's input; with grads, the head's and the norm's weight gradients
 * too; grads NULL: both frozen, their input gradients only. -1 with err on a device error. */
int gpu_head_pass_backward(GpuDevice *d, const GpuModel *g, GpuHeadPass *h, CUdeviceptr dx, const GpuHeadGrads *grads,
                           const float *dlogprob, const float *dentropy, CUdeviceptr x, int N, GrpoErr *err);

#endif
