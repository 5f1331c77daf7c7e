/* ops/rmsnorm.c — RMSNorm y = x * rsqrt(mean(x^2) + eps) * w, forward and backward.
 * Sums are accumulated in double: C is up to a few thousand and the fp32 kernels
 * must match a float64 reference to 1e-5 relative. A row's sums run in 8 lanes
 * (element c in lane c mod 8) added in a fixed order at the end, so they vectorise
 * and give the same bits in every build; dw sums each column over the rows in row
 * order, a block of columns at a time. */
#include <math.h>

#include "ops/ops.h"

#define LANES 8

/* The 8 lanes' sums, then the leftover terms. */
static double lanes_total(const double acc[LANES], double rest) {
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + rest;
}

/* Σ x[c]^2 */
static double sum_squares(const float *x, int C) {
    double acc[LANES] = {0}, rest = 0;
    int c = 0;
    for (; c + LANES <= C; c += LANES)
#pragma omp simd
        for (int j = 0; j < LANES; j++) acc[j] += (double)x[c + j] * x[c + j];
    for (; c < C; c++) rest += (double)x[c] * x[c];
    return lanes_total(acc, rest);
}

/* Σ g[c] w[c] x[c] r */
static double sum_gwxr(const float *g, const float *w, const float *x, float r, int C) {
    double acc[LANES] = {0}, rest = 0;
    int c = 0;
    for (; c + LANES <= C; c += LANES)
#pragma omp simd
        for (int j = 0; j < LANES; j++) acc[j] += (double)g[c + j] * w[c + j] * x[c + j] * r;
    for (; c < C; c++) rest += (double)g[c] * w[c] * x[c] * r;
    return lanes_total(acc, rest);
}

void rmsnorm_forward(float *out, float *rstd, const float *in, const float *w,
                     int N, int C, int ld_out, int ld_in, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = in + (size_t)n * ld_in;
        float *y = out + (size_t)n * ld_out;
        float r = (float)(1.0 / sqrt(sum_squares(x, C) / C + eps));
        rstd[n] = r;
        for (int c = 0; c < C; c++) y[c] = x[c] * r * w[c];
    }
}

/* With xhat = x * r:  dx = r * (g*w - xhat * mean(g*w*xhat)),  dw = Σ_n g * xhat. */
void rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                      const float *rstd, const float *w, int N, int C,
                      int ld_din, int ld_dout, int ld_in, int write_dw) {
    if (din) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            const float *x = in + (size_t)n * ld_in, *g = dout + (size_t)n * ld_dout;
            float *dx = din + (size_t)n * ld_din;
            float r = rstd[n];
            float m = (float)(sum_gwxr(g, w, x, r, C) / C);
            for (int c = 0; c < C; c++) dx[c] += r * (g[c] * w[c] - x[c] * r * m);
        }
    }
    if (dw) {
        enum { COLS = 64 }; /* a block's sums stay in registers; its rows' slices are contiguous */
#pragma omp parallel for schedule(static)
        for (int c0 = 0; c0 < C; c0 += COLS) {
            int nc = C - c0 < COLS ? C - c0 : COLS;
            double s[COLS] = {0};
            for (int n = 0; n < N; n++) {
                const float *g = dout + (size_t)n * ld_dout + c0, *x = in + (size_t)n * ld_in + c0;
                float r = rstd[n];
#pragma omp simd
                for (int j = 0; j < nc; j++) s[j] += (double)g[j] * x[j] * r;
            }
            for (int j = 0; j < nc; j++) dw[c0 + j] = write_dw ? (float)s[j] : dw[c0 + j] + (float)s[j];
        }
    }
}
