/* ops/logprob.c — log-probabilities (and entropies) of target tokens through the LM
 * head, computed a chunk of rows at a time so [tokens x vocab] logits never exist
 * for the whole batch. Only rows with a target (>= 0) are computed: prompt and
 * padding positions cost nothing. Backward recomputes each chunk's logits from the
 * saved log-sum-exp instead of storing them; through a frozen head it needs none
 * (the forward's E_p[W] per row); and when the objective's gradient is known row
 * by row (logprob_forward_backward) forward and backward share one set of logits. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "ops/gemm.h"
#include "ops/ops.h"
#include "ops/vec.h"

int logprob_dw_rows(int chunk_rows, int max_rows) {
    long r = (long)LOGPROB_DW_CHUNKS * chunk_rows;
    return r < max_rows ? (int)r : max_rows;
}

/* Floats that n bf16 values take. */
static size_t halves(size_t n) { return (n + 1) / 2; }

size_t logprob_scratch_floats(int chunk_rows, int C, int V, int dw_rows) {
    return (size_t)chunk_rows * V + 2 * (size_t)chunk_rows * C + halves((size_t)dw_rows * V) +
           halves((size_t)dw_rows * C) + (size_t)omp_get_max_threads() * (V + 16) + 16;
}

void logprob_scratch_init(LogprobScratch *s, float *base, int chunk_rows, int C, int V, int dw_rows) {
    CHECK(chunk_rows > 0 && dw_rows >= 0);
    s->chunk_rows = chunk_rows;
    s->scratch = base;
    s->h_rows = base + (size_t)chunk_rows * V;
    s->d_rows = s->h_rows + (size_t)chunk_rows * C;
    float *rest = s->d_rows + (size_t)chunk_rows * C;
    s->dw_rows = dw_rows;
    s->dw_n = 0;
    s->dzT = dw_rows ? (uint16_t *)rest : NULL;
    s->h16 = dw_rows ? (uint16_t *)(rest + halves((size_t)dw_rows * V)) : NULL;
    s->threads = omp_get_max_threads();
    float *exp_rows = rest + halves((size_t)dw_rows * V) + halves((size_t)dw_rows * C);
    s->exp_rows = (float *)(((uintptr_t)exp_rows + 63) & ~(uintptr_t)63); /* each thread's row on 64 bytes */
    s->exp_stride = ((size_t)V + 15) & ~(size_t)15;
}

/* Fills idx with the next up-to-chunk rows having a target, starting at *n. */
static int next_chunk(int *idx, int chunk, const int32_t *targets, int N, int *n) {
    int m = 0;
    while (*n < N && m < chunk) {
        if (targets[*n] >= 0) idx[m++] = *n;
        (*n)++;
    }
    return m;
}

static void gather_rows(float *dst, const float *h, const int *idx, int m, int C) {
    for (int i = 0; i < m; i++) memcpy(dst + (size_t)i * C, h + (size_t)idx[i] * C, sizeof(float) * C);
}

/* out[m, C] = x[m, V] · W (dz · W, p · W). x is bf16 already where W's products are. */
static void times_head(float *out, const float *x, GemmBf16Operand x16, WeightMatrix W, int m, int C, int V) {
    if (W.bf16_products)
        gemm_bf16(0, 0, m, C, V, 1.0f, x16, (GemmBf16Operand){.h = W.w16, .ld = C}, 0.0f, out, C);
    else if (W.w16)
        gemm_f32_b16(0, 0, m, C, V, 1.0f, x, V, W.w16, C, 0.0f, out, C);
    else
        gemm_f32(0, 0, m, C, V, 1.0f, x, V, W.w, C, 0.0f, out, C);
}

/* The chunk's logits: z[i] = (h[idx[i]] · W^T) * inv_temp into s->scratch. */
static void chunk_logits(LogprobScratch *s, const int *idx, int m, const float *h, WeightMatrix W, int C, int V,
                         float inv_temp) {
    gather_rows(s->h_rows, h, idx, m, C);
    if (W.bf16_products)
        gemm_bf16(0, 1, m, V, C, inv_temp, (GemmBf16Operand){.f = s->h_rows, .ld = C},
                  (GemmBf16Operand){.h = W.w16, .ld = C}, 0.0f, s->scratch, V);
    else if (W.w16)
        gemm_f32_b16(0, 1, m, V, C, inv_temp, s->h_rows, C, W.w16, C, 0.0f, s->scratch, V);
    else
        gemm_f32(0, 1, m, V, C, inv_temp, s->h_rows, C, W.w, C, 0.0f, s->scratch, V);
}

/* lse, logprob (and entropy) of the chunk's rows from their logits: e^(z - max) in
 * float (ops/vec.h), its sums in double. */
static void chunk_stats(const LogprobScratch *s, const int *idx, int m, int V, const int32_t *targets, float *lse,
                        float *logprob, float *entropy) {
#pragma omp parallel num_threads(s->threads)
    {
        float *e = s->exp_rows + (size_t)omp_get_thread_num() * s->exp_stride;
#pragma omp for schedule(static)
        for (int i = 0; i < m; i++) {
            const float *z = s->scratch + (size_t)i * V;
            float mx = vec_max(z, V);
            double sum = vec_exp_sum(e, z, mx, 1.0f, V);
            double l = mx + log(sum);
            int n = idx[i];
            lse[n] = (float)l;
            logprob[n] = (float)(z[targets[n]] - l);
            if (entropy) { /* H = lse - E_p[z] */
                double zsum = 0;
                for (int v = 0; v < V; v++) zsum += (double)e[v] * (z[v] - mx);
                entropy[n] = (float)(log(sum) - zsum / sum);
            }
        }
    }
}

/* *beta: what dW's next product sums into it, 0 until one has written it (write_dw),
 * then 1. */
static float next_beta(float *beta) {
    float b = *beta;
    *beta = 1.0f;
    return b;
}

/* The rows gathered for a mixed-precision head's dW: their one product. */
static void dw_flush(LogprobScratch *s, float *dW, int C, int V, float *beta) {
    if (s->dw_n)
        gemm_bf16(0, 0, V, C, s->dw_n, 1.0f, (GemmBf16Operand){.h = s->dzT, .ld = s->dw_rows},
                  (GemmBf16Operand){.h = s->h16, .ld = C}, next_beta(beta), dW, C);
    s->dw_n = 0;
}

/* After the last chunk: the gathered rows' product; dW zeros if write_dw asked for
 * it and no row had a target. */
static void dw_finish(LogprobScratch *s, float *dW, int C, int V, float *beta) {
    dw_flush(s, dW, C, V, beta);
    if (*beta == 0.0f) memset(dW, 0, sizeof(float) * (size_t)V * C);
}

/* The chunk's backward from its logits in s->scratch (overwritten with dz):
 * dh[idx] += dz · W, dW += dz^T · h (with bf16 products, both in bf16; dW's gathered
 * over chunks where s has room, dw_flush then adds them). */
static void chunk_backward(LogprobScratch *s, const int *idx, int m, float *dh, float *dW, float *dw_beta,
                           const float *dlogprob, const float *dentropy, WeightMatrix W, const int32_t *targets,
                           const float *lse, int C, int V, float inv_temp) {
    CHECK(!(dW && W.w16 && !W.bf16_products)); /* a head held in bf16 is frozen */
    CHECK(m <= s->chunk_rows);
    /* dz = dlogprob * (onehot - p) + dentropy * dH/dz, dH/dz_v = -p_v (log p_v + H);
     * d(logits) = dz * inv_temp */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; i++) {
        float *z = s->scratch + (size_t)i * V;
        int n = idx[i];
        float g = dlogprob[n], l = lse[n], de = dentropy ? dentropy[n] : 0.0f;
        if (de != 0.0f) {
            double H = 0;
            for (int v = 0; v < V; v++) {
                double lp = (double)z[v] - l;
                H -= exp(lp) * lp;
            }
            for (int v = 0; v < V; v++) { /* in double: log p + H cancels */
                double lp = (double)z[v] - l, p = exp(lp);
                z[v] = (float)(-p * (g + de * (lp + H)) * inv_temp);
            }
        } else { /* p = e^(z - lse) in place, then dz */
            vec_exp_sum(z, z, l, 1.0f, V);
            for (int v = 0; v < V; v++) z[v] = -g * z[v] * inv_temp;
        }
        z[targets[n]] += g * inv_temp;
    }
    /* with bf16 products, they read dz rounded once, in the scratch itself */
    GemmBf16Operand dz16 = W.bf16_products ? gemm_bf16_round_in_place(s->scratch, m, V, V) : (GemmBf16Operand){0};
    if (dh) {
        times_head(s->d_rows, s->scratch, dz16, W, m, C, V);
        for (int i = 0; i < m; i++) {
            float *dst = dh + (size_t)idx[i] * C;
            const float *src = s->d_rows + (size_t)i * C;
            for (int c = 0; c < C; c++) dst[c] += src[c];
        }
    }
    if (dW && W.bf16_products) {
        /* dW's product reads dz^T, dz's bf16 values transposed into the gathered columns:
         * a plain operand, 1.2-1.5x faster than a transposed one on oneDNN's bf16 matmul
         * for the head's [vocab x hidden x rows] (issue 14); ~11 ms a 256-row chunk at
         * Qwen2-0.5B. Without a gather buffer (dw_rows 0: checkpointing), this chunk's own
         * product on dz^T in the scratch's second half, free once dz is in bf16 (m <=
         * chunk_rows). */
        GemmBf16Operand h = {.f = s->h_rows, .ld = C};
        uint16_t *own = (uint16_t *)s->scratch + (size_t)s->chunk_rows * V;
        if (s->dw_rows && s->dw_n + m > s->dw_rows) dw_flush(s, dW, C, V, dw_beta);
        if (s->dw_rows >= m) {
            bf16_transpose(s->dzT + s->dw_n, s->dw_rows, dz16.h, m, V);
            f32_to_bf16_n(s->h16 + (size_t)s->dw_n * C, s->h_rows, (size_t)m * C);
            s->dw_n += m;
        } else {
            CHECK(!s->dw_rows);
            bf16_transpose(own, m, dz16.h, m, V);
            gemm_bf16(0, 0, V, C, m, 1.0f, (GemmBf16Operand){.h = own, .ld = m}, h, next_beta(dw_beta), dW, C);
        }
    } else if (dW) {
        gemm_f32(1, 0, V, C, m, 1.0f, s->scratch, V, s->h_rows, C, next_beta(dw_beta), dW, C);
    }
}

static void zero_rows(float *logprob, float *entropy, float *lse, int N) {
    for (int n = 0; n < N; n++) {
        logprob[n] = 0;
        lse[n] = 0;
        if (entropy) entropy[n] = 0;
    }
}

void logprob_forward(float *logprob, float *entropy, float *lse, float *pw, const float *h, WeightMatrix W,
                     const int32_t *targets, int N, int C, int V, float inv_temp, LogprobScratch *s) {
    int idx[s->chunk_rows];
    zero_rows(logprob, entropy, lse, N);
    int next = 0, m;
    while ((m = next_chunk(idx, s->chunk_rows, targets, N, &next)) > 0) {
        chunk_logits(s, idx, m, h, W, C, V, inv_temp);
        chunk_stats(s, idx, m, V, targets, lse, logprob, entropy);
        if (pw) { /* p in place of the logits, then E_p[W] = p · W */
#pragma omp parallel for schedule(static)
            for (int i = 0; i < m; i++) {
                float *z = s->scratch + (size_t)i * V;
                vec_exp_sum(z, z, lse[idx[i]], 1.0f, V);
            }
            times_head(s->d_rows, s->scratch, (GemmBf16Operand){.f = s->scratch, .ld = V}, W, m, C, V);
            for (int i = 0; i < m; i++) memcpy(pw + (size_t)idx[i] * C, s->d_rows + (size_t)i * C, sizeof(float) * C);
        }
    }
}

void logprob_backward_frozen(float *dh, const float *dlogprob, const float *pw, WeightMatrix W,
                             const int32_t *targets, int N, int C, float inv_temp) {
#pragma omp parallel
    {
        float *row = W.w16 ? xmalloc(sizeof(float) * C) : NULL; /* the target's row widened */
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            if (targets[n] < 0) continue;
            float g = dlogprob[n] * inv_temp;
            const float *wt = W.w16 ? row : W.w + (size_t)targets[n] * C, *e = pw + (size_t)n * C;
            if (W.w16) bf16_to_f32_n(row, W.w16 + (size_t)targets[n] * C, (size_t)C);
            float *d = dh + (size_t)n * C;
            for (int c = 0; c < C; c++) d[c] += g * (wt[c] - e[c]);
        }
        free(row);
    }
}

void logprob_backward(float *dh, float *dW, const float *dlogprob, const float *dentropy, const float *h,
                      WeightMatrix W, const int32_t *targets, const float *lse, int N, int C, int V, float inv_temp,
                      LogprobScratch *s, int write_dw) {
    int idx[s->chunk_rows];
    int next = 0, m;
    float dw_beta = write_dw ? 0.0f : 1.0f;
    while ((m = next_chunk(idx, s->chunk_rows, targets, N, &next)) > 0) {
        chunk_logits(s, idx, m, h, W, C, V, inv_temp);
        chunk_backward(s, idx, m, dh, dW, &dw_beta, dlogprob, dentropy, W, targets, lse, C, V, inv_temp);
    }
    if (dW) dw_finish(s, dW, C, V, &dw_beta);
}

/* The rows a piece at a time through buffers on the stack (the gradient is
 * token-local: the pieces give what the whole would), so that a training pass
 * allocates nothing here. */
void logprob_grad_rows(const LogprobGrad *grad, const int *rows, int m, const float *logprob, float *dlogprob) {
    enum { PIECE = 256 };
    float lp[PIECE], g[PIECE];
    for (int i0 = 0; i0 < m; i0 += PIECE) {
        int k = m - i0 < PIECE ? m - i0 : PIECE;
        for (int i = 0; i < k; i++) lp[i] = logprob[rows[i0 + i]];
        grad->fn(grad->ctx, rows + i0, k, lp, g);
        for (int i = 0; i < k; i++) dlogprob[rows[i0 + i]] = g[i];
    }
}

void logprob_forward_backward(float *logprob, float *entropy, float *lse, float *dlogprob, float *dh, float *dW,
                              const LogprobGrad *grad, const float *h, WeightMatrix W, const int32_t *targets,
                              int N, int C, int V, float inv_temp, LogprobScratch *s, int write_dw) {
    int idx[s->chunk_rows];
    zero_rows(logprob, entropy, lse, N);
    for (int n = 0; n < N; n++) dlogprob[n] = 0;
    int next = 0, m;
    float dw_beta = write_dw ? 0.0f : 1.0f;
    while ((m = next_chunk(idx, s->chunk_rows, targets, N, &next)) > 0) {
        chunk_logits(s, idx, m, h, W, C, V, inv_temp);
        chunk_stats(s, idx, m, V, targets, lse, logprob, entropy);
        logprob_grad_rows(grad, idx, m, logprob, dlogprob);
        chunk_backward(s, idx, m, dh, dW, &dw_beta, dlogprob, NULL, W, targets, lse, C, V, inv_temp);
    }
    if (dW) dw_finish(s, dW, C, V, &dw_beta);
}
