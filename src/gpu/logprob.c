/* gpu/logprob.c — the LM head's chunk loop on the GPU (see gpu/logprob.h), composed
 * of cuBLASLt's products and the head's kernels; it is the loop of ops/logprob.c's
 * logprob_forward / logprob_backward, not a new algorithm: the same rows (those with
 * a target, in order, chunk_rows at a time), the same products on the same operands
 * (bf16 rounded once where the CPU rounds), dW written or added as the CPU's. What
 * differs is the order of the products' sums (cuBLASLt's) and the kernels' (a tree
 * in double): the tolerances of tests/gpu/test_gpu_logprob.c. The CPU's gathering of
 * dW's rows over several chunks (a speed-up for oneDNN) is not copied: one dW
 * product a chunk. A frozen head's shortcut is the CPU's: pw = E_p[W] from the forward's
 * chunks (one more product each), then a backward reading only pw and W's target rows
 * (gpu_logprob_backward_frozen: no logits recomputed, no dz products). A token-local
 * objective's head shares one set of logits between forward and backward
 * (gpu_logprob_forward_backward, logprob_forward_backward's loop): the chunk's gradient
 * taken on the device where the objective is given as data (ops/token_objective.h), else
 * its log-probs go to the host for the gradient and its dlogprob comes back. */
#include "gpu/logprob.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/gemm.h"
#include "gpu/ops.h"
#include "ops/token_objective.h"

/* a row's token-local objective inputs: w, adv, isw (doubles), old, ref (floats) */
enum { OBJ_BYTES = 3 * 8 + 2 * 4 };

int gpu_logprob_scratch_init(GpuDevice *d, GpuLogprobScratch *s, int chunk_rows, int max_rows, int C, int V,
                             GrpoErr *err) {
    *s = (GpuLogprobScratch){.chunk_rows = chunk_rows, .max_rows = max_rows, .C = C, .V = V};
    if (chunk_rows <= 0 || max_rows <= 0 || C <= 0 || V <= 0)
        return err_set(err, "GPU log-probs: chunk_rows %d, max_rows %d, C %d, V %d (each must be > 0)", chunk_rows,
                       max_rows, C, V);
    size_t zv = (size_t)chunk_rows * V, hc = (size_t)chunk_rows * C;
    if (gpu_alloc(d, &s->logits, 4 * zv, err) || gpu_alloc(d, &s->dz16, 2 * zv, err) ||
        gpu_alloc(d, &s->h_rows, 4 * hc, err) || gpu_alloc(d, &s->h16, 2 * hc, err) ||
        gpu_alloc(d, &s->d_rows, 4 * hc, err) || gpu_alloc(d, &s->stats, 3 * 4 * (size_t)chunk_rows, err) ||
        gpu_alloc(d, &s->rows, 2 * 4 * (size_t)max_rows, err) || gpu_alloc(d, &s->obj, OBJ_BYTES * (size_t)max_rows, err)) {
        gpu_logprob_scratch_free(d, s);
        return -1;
    }
    s->host_rows = xmalloc(2 * sizeof(int32_t) * (size_t)max_rows);
    s->host_lp = xmalloc(2 * sizeof(float) * (size_t)chunk_rows);
    s->host_obj = xmalloc((OBJ_BYTES + sizeof(int)) * (size_t)max_rows);
    return 0;
}

void gpu_logprob_scratch_free(GpuDevice *d, GpuLogprobScratch *s) {
    CUdeviceptr *all[] = {&s->logits, &s->dz16, &s->h_rows, &s->h16, &s->d_rows, &s->stats, &s->rows, &s->obj};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i]) gpu_free(d, *all[i]);
        *all[i] = 0;
    }
    free(s->host_rows), free(s->host_lp), free(s->host_obj);
    s->host_rows = NULL, s->host_lp = NULL, s->host_obj = NULL;
}

/* The rows with a target and their targets into s->rows (one upload a call, before
 * the chunks read them); their count, or -1 with err (a target past the vocabulary:
 * the CPU would read outside the row). */
static int upload_rows(GpuDevice *d, GpuLogprobScratch *s, const int32_t *targets, int N, GrpoErr *err) {
    if (N < 0 || N > s->max_rows)
        return err_set(err, "GPU log-probs: %d rows, more than the %d the scratch was made for", N, s->max_rows);
    int R = 0;
    for (int n = 0; n < N; n++) {
        if (targets[n] >= s->V)
            return err_set(err, "GPU log-probs: target %d of row %d is outside the vocabulary of %d tokens",
                           targets[n], n, s->V);
        if (targets[n] >= 0) {
            s->host_rows[R] = n;
            s->host_rows[s->max_rows + R] = targets[n];
            R++;
        }
    }
    if (R && (gpu_put(d, s->rows, s->host_rows, sizeof(int32_t) * R, err) ||
              gpu_put(d, s->rows + 4 * (size_t)s->max_rows, s->host_rows + s->max_rows, sizeof(int32_t) * R, err)))
        return -1;
    return R;
}

/* The chunk's m rows idx gathered into s->h_rows (and s->h16, bf16 products), and
 * their logits z = h W^T * inv_temp into s->logits, as ops/logprob.c's chunk_logits. */
static int chunk_logits(GpuDevice *d, GpuLogprobScratch *s, CUdeviceptr idx, int m, CUdeviceptr h, GpuHeadWeight W,
                        float inv_temp, GrpoErr *err) {
    int C = s->C, V = s->V;
    if (gpu_rows_gather(d, s->h_rows, h, idx, m, C, err)) return -1;
    if (!W.bf16_products) return gpu_gemm_f32(d, 0, 1, m, V, C, inv_temp, s->h_rows, C, W.w, C, 0.0f, s->logits, V, err);
    return gpu_round_bf16(d, s->h16, s->h_rows, m, C, C, C, err) ||
           gpu_gemm_bf16(d, 0, 1, m, V, C, inv_temp, s->h16, C, W.w, C, 0.0f, s->logits, V, err);
}

/* pw: E_p[W] of the chunk's m rows idx = p W, p made in place of the logits (bf16
 * products: p rounded once, as the CPU's times_head rounds its operand), scattered. */
static int chunk_pw(GpuDevice *d, GpuLogprobScratch *s, CUdeviceptr idx, int m, CUdeviceptr lse_rows, CUdeviceptr pw,
                    GpuHeadWeight W, GrpoErr *err) {
    int C = s->C, V = s->V;
    if (gpu_logprob_chunk_probs(d, s->logits, lse_rows, m, V, err)) return -1;
    int rc = W.bf16_products
                 ? gpu_round_bf16(d, s->dz16, s->logits, m, V, V, V, err) ||
                       gpu_gemm_bf16(d, 0, 0, m, C, V, 1.0f, s->dz16, V, W.w, C, 0.0f, s->d_rows, C, err)
                 : gpu_gemm_f32(d, 0, 0, m, C, V, 1.0f, s->logits, V, W.w, C, 0.0f, s->d_rows, C, err);
    return rc || gpu_rows_scatter(d, pw, s->d_rows, idx, m, C, 0, err) ? -1 : 0;
}

/* A forward's start: the rows with a target uploaded (their count, or -1 with err) and the
 * per-row outputs zeroed (rows without a target keep 0s, as the CPU's zero_rows). */
static int forward_rows(GpuDevice *d, GpuLogprobScratch *s, CUdeviceptr logprob, CUdeviceptr entropy, CUdeviceptr lse,
                        const int32_t *targets, int N, GrpoErr *err) {
    int R = upload_rows(d, s, targets, N, err);
    size_t row_bytes = sizeof(float) * (size_t)N;
    return R < 0 || gpu_zero(d, logprob, row_bytes, err) || gpu_zero(d, lse, row_bytes, err) ||
                   gpu_zero(d, entropy, row_bytes, err)
               ? -1
               : R;
}

/* The chunk's rows [first, first + m): logits into s->logits, their statistics into s->stats
 * (log-prob, entropy, lse rows) and scattered into the outputs. */
static int chunk_forward(GpuDevice *d, GpuLogprobScratch *s, int first, int m, CUdeviceptr logprob,
                         CUdeviceptr entropy, CUdeviceptr lse, CUdeviceptr h, GpuHeadWeight W, float inv_temp,
                         GrpoErr *err) {
    CUdeviceptr s_lp = s->stats, s_ent = s->stats + 4 * (size_t)s->chunk_rows,
                s_lse = s->stats + 8 * (size_t)s->chunk_rows;
    CUdeviceptr idx = s->rows + 4 * (size_t)first, tgt = s->rows + 4 * ((size_t)s->max_rows + first);
    return chunk_logits(d, s, idx, m, h, W, inv_temp, err) ||
                   gpu_logprob_chunk_forward(d, s_lp, entropy ? s_ent : 0, s_lse, s->logits, tgt, m, s->V, err) ||
                   gpu_rows_scatter(d, logprob, s_lp, idx, m, 1, 0, err) ||
                   gpu_rows_scatter(d, lse, s_lse, idx, m, 1, 0, err) ||
                   (entropy && gpu_rows_scatter(d, entropy, s_ent, idx, m, 1, 0, err))
               ? -1
               : 0;
}

int gpu_logprob_forward(GpuDevice *d, CUdeviceptr logprob, CUdeviceptr entropy, CUdeviceptr lse, CUdeviceptr pw,
                        CUdeviceptr h, GpuHeadWeight W, const int32_t *targets, int N, float inv_temp,
                        GpuLogprobScratch *s, GrpoErr *err) {
    int R = forward_rows(d, s, logprob, entropy, lse, targets, N, err);
    for (int first = 0; first < R; first += s->chunk_rows) {
        int m = R - first < s->chunk_rows ? R - first : s->chunk_rows;
        if (chunk_forward(d, s, first, m, logprob, entropy, lse, h, W, inv_temp, err) ||
            (pw && chunk_pw(d, s, s->rows + 4 * (size_t)first, m, s->stats + 8 * (size_t)s->chunk_rows, pw, W, err)))
            return -1;
    }
    return R < 0 ? -1 : 0;
}

int gpu_logprob_backward_frozen(GpuDevice *d, CUdeviceptr dh, CUdeviceptr dlogprob, CUdeviceptr pw, GpuHeadWeight W,
                                const int32_t *targets, int N, float inv_temp, GpuLogprobScratch *s, GrpoErr *err) {
    int R = upload_rows(d, s, targets, N, err);
    if (R <= 0) return R;
    CUdeviceptr rows = s->rows, tgts = s->rows + 4 * (size_t)s->max_rows;
    return gpu_logprob_backward_frozen_rows(d, dh, dlogprob, pw, W.bf16_products ? W.w : 0, W.bf16_products ? 0 : W.w,
                                            rows, tgts, R, s->C, inv_temp, err);
}

/* dz (in s->logits) through the head: dh[idx] += dz W, dW (+)= dz^T h (beta 0: written). */
static int chunk_products(GpuDevice *d, GpuLogprobScratch *s, CUdeviceptr idx, int m, CUdeviceptr dh, CUdeviceptr dW,
                          float beta, GpuHeadWeight W, GrpoErr *err) {
    int C = s->C, V = s->V;
    if (W.bf16_products) { /* dz rounded once, read by both products (the CPU's gemm_bf16_round_in_place) */
        if (gpu_round_bf16(d, s->dz16, s->logits, m, V, V, V, err)) return -1;
        if (dh && (gpu_gemm_bf16(d, 0, 0, m, C, V, 1.0f, s->dz16, V, W.w, C, 0.0f, s->d_rows, C, err) ||
                   gpu_rows_scatter(d, dh, s->d_rows, idx, m, C, 1, err)))
            return -1;
        return dW ? gpu_gemm_bf16(d, 1, 0, V, C, m, 1.0f, s->dz16, V, s->h16, C, beta, dW, C, err) : 0;
    }
    if (dh && (gpu_gemm_f32(d, 0, 0, m, C, V, 1.0f, s->logits, V, W.w, C, 0.0f, s->d_rows, C, err) ||
               gpu_rows_scatter(d, dh, s->d_rows, idx, m, C, 1, err)))
        return -1;
    return dW ? gpu_gemm_f32(d, 1, 0, V, C, m, 1.0f, s->logits, V, s->h_rows, C, beta, dW, C, err) : 0;
}

int gpu_logprob_backward(GpuDevice *d, CUdeviceptr dh, CUdeviceptr dW, CUdeviceptr dlogprob, CUdeviceptr dentropy,
                         CUdeviceptr h, GpuHeadWeight W, const int32_t *targets, CUdeviceptr lse, int N,
                         float inv_temp, GpuLogprobScratch *s, int write_dw, GrpoErr *err) {
    int R = upload_rows(d, s, targets, N, err);
    if (R < 0) return -1;
    CUdeviceptr s_dlp = s->stats, s_dent = s->stats + 4 * (size_t)s->chunk_rows,
                s_lse = s->stats + 8 * (size_t)s->chunk_rows;
    float beta = write_dw ? 0.0f : 1.0f; /* the first product writes dW, the rest add */
    for (int first = 0; first < R; first += s->chunk_rows) {
        int m = R - first < s->chunk_rows ? R - first : s->chunk_rows;
        CUdeviceptr idx = s->rows + 4 * (size_t)first, tgt = s->rows + 4 * ((size_t)s->max_rows + first);
        if (gpu_rows_gather(d, s_dlp, dlogprob, idx, m, 1, err) || gpu_rows_gather(d, s_lse, lse, idx, m, 1, err) ||
            (dentropy && gpu_rows_gather(d, s_dent, dentropy, idx, m, 1, err)) ||
            chunk_logits(d, s, idx, m, h, W, inv_temp, err) ||
            gpu_logprob_chunk_backward(d, s->logits, s_dlp, dentropy ? s_dent : 0, s_lse, tgt, m, s->V, inv_temp,
                                       err) ||
            chunk_products(d, s, idx, m, dh, dW, beta, W, err))
            return -1;
        beta = 1.0f;
    }
    return write_dw && R == 0 ? gpu_zero(d, dW, sizeof(float) * (size_t)s->V * s->C, err) : 0;
}

/* A token-local objective's inputs on the device, for the R rows with a target in their
 * order: o's, looked up by grad's index of each row (the row itself without one). */
typedef struct {
    CUdeviceptr w, adv, isw, old, ref; /* 0: none */
} ObjectiveRows;

static int upload_objective(GpuDevice *d, GpuLogprobScratch *s, const LogprobGrad *grad, int R, ObjectiveRows *on,
                            GrpoErr *err) {
    const TokenObjective *o = grad->objective;
    size_t n = (size_t)s->max_rows;
    double *w = (double *)s->host_obj, *adv = w + n, *isw = adv + n;
    float *old = (float *)(isw + n), *ref = old + n;
    int *js = (int *)(ref + n);
    if (grad->index) grad->index(grad->ctx, s->host_rows, R, js);
    else memcpy(js, s->host_rows, sizeof(int) * (size_t)R);
    for (int k = 0; k < R; k++) {
        int j = js[k], q = o->seq_of ? o->seq_of[j] : 0;
        w[k] = o->tmask && !o->tmask[j] ? 0.0 : o->w[q];
        adv[k] = o->adv ? o->adv[q] : 0.0;
        if (o->isw) isw[k] = o->isw[j];
        if (o->old) old[k] = o->old[j];
        if (o->ref) ref[k] = o->ref[j];
    }
    CUdeviceptr base = s->obj;
    *on = (ObjectiveRows){base, base + 8 * n, o->isw ? base + 16 * n : 0, o->old ? base + 24 * n : 0,
                          o->ref ? base + 28 * n : 0};
    size_t b8 = 8 * (size_t)R, b4 = 4 * (size_t)R;
    return gpu_put(d, on->w, w, b8, err) || gpu_put(d, on->adv, adv, b8, err) ||
                   (on->isw && gpu_put(d, on->isw, isw, b8, err)) || (on->old && gpu_put(d, on->old, old, b4, err)) ||
                   (on->ref && gpu_put(d, on->ref, ref, b4, err))
               ? -1
               : 0;
}

/* The chunk's dlogprob in s_lp's place (its log-probs are scattered already): on the
 * device from the objective's rows, or through the host's function. */
static int chunk_gradient(GpuDevice *d, GpuLogprobScratch *s, const LogprobGrad *grad, const ObjectiveRows *on,
                          int first, int m, GrpoErr *err) {
    CUdeviceptr s_lp = s->stats;
    if (grad->objective) {
        size_t f8 = 8 * (size_t)first, f4 = 4 * (size_t)first;
        return gpu_token_objective_grad(d, s_lp, m, &grad->objective->p, on->w + f8, on->adv + f8,
                                        on->isw ? on->isw + f8 : 0, on->old ? on->old + f4 : 0,
                                        on->ref ? on->ref + f4 : 0, err);
    }
    float *lp = s->host_lp, *dlp = s->host_lp + s->chunk_rows;
    if (gpu_get(d, lp, s_lp, sizeof(float) * (size_t)m, err)) return -1;
    grad->fn(grad->ctx, s->host_rows + first, m, lp, dlp);
    return gpu_put(d, s_lp, dlp, sizeof(float) * (size_t)m, err);
}

int gpu_logprob_forward_backward(GpuDevice *d, CUdeviceptr logprob, CUdeviceptr entropy, CUdeviceptr lse,
                                 CUdeviceptr dh, CUdeviceptr dW, const LogprobGrad *grad, CUdeviceptr h,
                                 GpuHeadWeight W, const int32_t *targets, int N, float inv_temp, GpuLogprobScratch *s,
                                 int write_dw, GrpoErr *err) {
    int R = forward_rows(d, s, logprob, entropy, lse, targets, N, err);
    ObjectiveRows on = {0};
    if (R < 0 || (grad->objective && upload_objective(d, s, grad, R, &on, err))) return -1;
    CUdeviceptr s_lp = s->stats, s_lse = s->stats + 8 * (size_t)s->chunk_rows;
    float beta = write_dw ? 0.0f : 1.0f;
    for (int first = 0; first < R; first += s->chunk_rows) {
        int m = R - first < s->chunk_rows ? R - first : s->chunk_rows;
        CUdeviceptr idx = s->rows + 4 * (size_t)first, tgt = s->rows + 4 * ((size_t)s->max_rows + first);
        if (chunk_forward(d, s, first, m, logprob, entropy, lse, h, W, inv_temp, err) ||
            chunk_gradient(d, s, grad, &on, first, m, err) ||
            gpu_logprob_chunk_backward(d, s->logits, s_lp, 0, s_lse, tgt, m, s->V, inv_temp, err) ||
            chunk_products(d, s, idx, m, dh, dW, beta, W, err))
            return -1;
        beta = 1.0f;
    }
    return write_dw && R == 0 ? gpu_zero(d, dW, sizeof(float) * (size_t)s->V * s->C, err) : 0;
}
