/* gpu/head_pass.c — see head_pass.h: the final norm and gpu/logprob.h's chunked head, forward
 * and backward, with what the backward reads kept from the forward (a frozen head's: pw too).
 * Adds no kernel. Not here: the layers, the embedding, the gradient's write-or-add
 * bookkeeping (the caller's: it says so through GpuHeadGrads). */
#include "gpu/head_pass.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"

int gpu_head_pass_create(GpuDevice *d, GpuHeadPass *h, int max_tokens, int C, int V, int chunk_rows, int frozen,
                         GrpoErr *err) {
    memset(h, 0, sizeof *h);
    if (max_tokens < 1 || C < 1)
        return err_set(err, "GPU head pass: max_tokens %d, C %d (expected at least 1 each)", max_tokens, C);
    h->max_tokens = max_tokens, h->C = C;
    h->targets = xmalloc(sizeof(int32_t) * (size_t)max_tokens);
    size_t N = (size_t)max_tokens, NC = N * C;
    if (gpu_alloc(d, &h->hf, 4 * NC, err) || gpu_alloc(d, &h->rstdf, 4 * N, err) ||
        gpu_alloc(d, &h->dhf, 4 * NC, err) || gpu_alloc(d, &h->logprob, 4 * N, err) ||
        gpu_alloc(d, &h->entropy, 4 * N, err) || gpu_alloc(d, &h->lse, 4 * N, err) ||
        gpu_alloc(d, &h->dlogprob, 4 * N, err) || gpu_alloc(d, &h->dentropy, 4 * N, err) ||
        (frozen && gpu_alloc(d, &h->pw, 4 * NC, err)) ||
        gpu_logprob_scratch_init(d, &h->chunk, chunk_rows, max_tokens, C, V, err)) {
        gpu_head_pass_free(d, h);
        return -1;
    }
    return 0;
}

void gpu_head_pass_free(GpuDevice *d, GpuHeadPass *h) {
    CUdeviceptr *all[] = {&h->hf,       &h->rstdf,    &h->dhf,      &h->logprob, &h->entropy,
                          &h->lse,      &h->dlogprob, &h->dentropy, &h->pw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i]) gpu_free(d, *all[i]);
        *all[i] = 0;
    }
    gpu_logprob_scratch_free(d, &h->chunk);
    free(h->targets);
    memset(h, 0, sizeof *h);
}

/* Both forwards: the final norm, then the head's chunk loop (with grad, its backward in the same
 * pass into dhf and grads' head), the log-probs (and entropies) down to the host. */
static int forward(GpuDevice *d, const GpuModel *g, GpuHeadPass *h, float *logprob, float *entropy, CUdeviceptr x,
                   const int32_t *targets, int N, float inv_temp, const LogprobGrad *grad, const GpuHeadGrads *grads,
                   GrpoErr *err) {
    if (N < 0 || N > h->max_tokens)
        return err_set(err, "GPU head pass: %d rows (expected 0 to max_tokens %d)", N, h->max_tokens);
    h->inv_temp = inv_temp;
    h->pw_valid = h->head_done = 0;
    memcpy(h->targets, targets, sizeof(int32_t) * (size_t)N);
    size_t bytes = sizeof(float) * (size_t)N;
    CUdeviceptr ent = entropy ? h->entropy : 0;
    if (gpu_rmsnorm_forward(d, h->hf, h->rstdf, x, g->norm, N, g->C, g->C, g->C, g->eps, err) ||
        (grad ? gpu_zero(d, h->dhf, 4 * (size_t)N * g->C, err) ||
                    gpu_logprob_forward_backward(d, h->logprob, ent, h->lse, h->dhf, grads ? grads->head : 0, grad,
                                                 h->hf, g->head, h->targets, N, inv_temp, &h->chunk,
                                                 grads ? grads->write_head : 0, err)
              : gpu_logprob_forward(d, h->logprob, ent, h->lse, h->pw, h->hf, g->head, h->targets, N, inv_temp,
                                    &h->chunk, err)) ||
        gpu_sync(d, err) || gpu_get(d, logprob, h->logprob, bytes, err) ||
        (entropy && gpu_get(d, entropy, h->entropy, bytes, err)))
        return -1;
    h->pw_valid = !grad && h->pw != 0;
    h->head_done = grad != NULL;
    return 0;
}

int gpu_head_pass_forward(GpuDevice *d, const GpuModel *g, GpuHeadPass *h, float *logprob, float *entropy,
                          CUdeviceptr x, const int32_t *targets, int N, float inv_temp, GrpoErr *err) {
    return forward(d, g, h, logprob, entropy, x, targets, N, inv_temp, NULL, NULL, err);
}

int gpu_head_pass_forward_grad(GpuDevice *d, const GpuModel *g, GpuHeadPass *h, float *logprob, float *entropy,
                               CUdeviceptr x, const int32_t *targets, int N, float inv_temp, const LogprobGrad *grad,
                               const GpuHeadGrads *grads, GrpoErr *err) {
    return forward(d, g, h, logprob, entropy, x, targets, N, inv_temp, grad, grads, err);
}

/* The head's part of the backward into dhf (zeroed first): the frozen head's shortcut where
 * the CPU's model_backward takes it (no weight gradient, pw kept, no entropy gradient),
 * else the logits recomputed a chunk at a time. */
static int head_backward(GpuDevice *d, const GpuModel *g, GpuHeadPass *h, const GpuHeadGrads *grads,
                         const float *dentropy, int N, GrpoErr *err) {
    if (gpu_zero(d, h->dhf, 4 * (size_t)N * g->C, err)) return -1;
    if (!grads && h->pw_valid && !dentropy)
        return gpu_logprob_backward_frozen(d, h->dhf, h->dlogprob, h->pw, g->head, h->targets, N, h->inv_temp,
                                           &h->chunk, err);
    if (dentropy && gpu_put(d, h->dentropy, dentropy, sizeof(float) * (size_t)N, err)) return -1;
    return gpu_logprob_backward(d, h->dhf, grads ? grads->head : 0, h->dlogprob, dentropy ? h->dentropy : 0, h->hf,
                                g->head, h->targets, h->lse, N, h->inv_temp, &h->chunk, grads ? grads->write_head : 0,
                                err);
}

int gpu_head_pass_backward(GpuDevice *d, const GpuModel *g, GpuHeadPass *h, CUdeviceptr dx, const GpuHeadGrads *grads,
                           const float *dlogprob, const float *dentropy, CUdeviceptr x, int N, GrpoErr *err) {
    int C = g->C;
    /* a frozen head and norm (grads NULL): no weight gradient formed, the input gradients only */
    CUdeviceptr dw_norm = grads ? grads->norm : 0;
    int write_norm = grads ? grads->write_norm : 0;
    if (h->head_done ? dlogprob || dentropy : !dlogprob)
        return err_set(err, "GPU head pass: a backward %s", h->head_done ? "given a gradient its forward already took"
                                                                          : "without dlogprob");
    int done = h->head_done;
    h->head_done = 0; /* the head's part taken in the forward serves one backward, as the CPU's HEAD_DONE */
    return (!done && (gpu_put(d, h->dlogprob, dlogprob, sizeof(float) * (size_t)N, err) ||
                      head_backward(d, g, h, grads, dentropy, N, err))) ||
                   gpu_zero(d, dx, 4 * (size_t)N * C, err) ||
                   gpu_rmsnorm_backward(d, dx, dw_norm, h->dhf, x, h->rstdf, g->norm, N, C, C, C, C, write_norm, err)
               ? -1
               : 0;
}
