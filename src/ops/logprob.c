/* ops/logprob.c — log-probabilities (and entropies) of target tokens through the LM
 * head, computed a chunk of rows at a time so [tokens x vocab] logits never exist
 * for the whole batch. Only rows with a target (>= 0) are computed: prompt and
 * padding positions cost nothing. Backward recomputes each chunk's logits from the
 * saved log-sum-exp instead of storing them; through a frozen head it needs none
 * (the forward's E_p[W] per row). */
#include <math.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/ops.h"

size_t logprob_scratch_floats(int chunk_rows, int C, int V) {
    return (size_t)chunk_rows * V + 2 * (size_t)chunk_rows * C;
}

void logprob_scratch_init(LogprobScratch *s, float *base, int chunk_rows, int C, int V) {
    s->chunk_rows = chunk_rows;
    s->scratch = base;
    s->h_rows = base + (size_t)chunk_rows * V;
    s->d_rows = s->h_rows + (size_t)chunk_rows * C;
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

void logprob_forward(float *logprob, float *entropy, float *lse, float *pw, const float *h,
                     const float *W, const int32_t *targets, int N, int C, int V,
                     float inv_temp, LogprobScratch *s) {
    int idx[s->chunk_rows];
    for (int n = 0; n < N; n++) {
        logprob[n] = 0;
        lse[n] = 0;
        if (entropy) entropy[n] = 0;
    }
    int next = 0, m;
    while ((m = next_chunk(idx, s->chunk_rows, targets, N, &next)) > 0) {
        gather_rows(s->h_rows, h, idx, m, C);
        gemm_f32(0, 1, m, V, C, inv_temp, s->h_rows, C, W, C, 0.0f, s->scratch, V);
#pragma omp parallel for schedule(static)
        for (int i = 0; i < m; i++) {
            const float *z = s->scratch + (size_t)i * V;
            float mx = -INFINITY;
            for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
            double sum = 0, zsum = 0;
            for (int v = 0; v < V; v++) {
                double e = exp((double)(z[v] - mx));
                sum += e;
                zsum += e * (z[v] - mx);
            }
            double l = mx + log(sum);
            int n = idx[i];
            lse[n] = (float)l;
            logprob[n] = (float)(z[targets[n]] - l);
            /* H = lse - E_p[z] */
            if (entropy) entropy[n] = (float)(log(sum) - zsum / sum);
        }
        if (pw) { /* p in place of the logits, then E_p[W] = p · W */
#pragma omp parallel for schedule(static)
            for (int i = 0; i < m; i++) {
                float *z = s->scratch + (size_t)i * V, l = lse[idx[i]];
                for (int v = 0; v < V; v++) z[v] = expf(z[v] - l);
            }
            gemm_f32(0, 0, m, C, V, 1.0f, s->scratch, V, W, C, 0.0f, s->d_rows, C);
            for (int i = 0; i < m; i++) memcpy(pw + (size_t)idx[i] * C, s->d_rows + (size_t)i * C, sizeof(float) * C);
        }
    }
}

void logprob_backward_frozen(float *dh, const float *dlogprob, const float *pw, const float *W,
                             const int32_t *targets, int N, int C, float inv_temp) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        if (targets[n] < 0) continue;
        float g = dlogprob[n] * inv_temp;
        const float *wt = W + (size_t)targets[n] * C, *e = pw + (size_t)n * C;
        float *d = dh + (size_t)n * C;
        for (int c = 0; c < C; c++) d[c] += g * (wt[c] - e[c]);
    }
}

void logprob_backward(float *dh, float *dW, const float *dlogprob, const float *dentropy, const float *h,
                      const float *W, const int32_t *targets, const float *lse, int N, int C,
                      int V, float inv_temp, LogprobScratch *s) {
    int idx[s->chunk_rows];
    int next = 0, m;
    while ((m = next_chunk(idx, s->chunk_rows, targets, N, &next)) > 0) {
        gather_rows(s->h_rows, h, idx, m, C);
        gemm_f32(0, 1, m, V, C, inv_temp, s->h_rows, C, W, C, 0.0f, s->scratch, V);
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
            } else {
                for (int v = 0; v < V; v++) z[v] = -g * expf(z[v] - l) * inv_temp;
            }
            z[targets[n]] += g * inv_temp;
        }
        if (dh) {
            gemm_f32(0, 0, m, C, V, 1.0f, s->scratch, V, W, C, 0.0f, s->d_rows, C);
            for (int i = 0; i < m; i++) {
                float *dst = dh + (size_t)idx[i] * C;
                const float *src = s->d_rows + (size_t)i * C;
                for (int c = 0; c < C; c++) dst[c] += src[c];
            }
        }
        if (dW) gemm_f32(1, 0, V, C, m, 1.0f, s->scratch, V, s->h_rows, C, 1.0f, dW, C);
    }
}
