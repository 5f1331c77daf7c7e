/* ops/rmsnorm.c — RMSNorm y = x * rsqrt(mean(x^2) + eps) * w, forward and backward.
 * Sums are accumulated in double: C is up to a few thousand and the fp32 kernels
 * must match a float64 reference to 1e-5 relative. */
#include <math.h>

#include "ops/ops.h"

void rmsnorm_forward(float *out, float *rstd, const float *in, const float *w,
                     int N, int C, int ld_out, int ld_in, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = in + (size_t)n * ld_in;
        float *y = out + (size_t)n * ld_out;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        rstd[n] = r;
        for (int c = 0; c < C; c++) y[c] = x[c] * r * w[c];
    }
}

/* With xhat = x * r:  dx = r * (g*w - xhat * mean(g*w*xhat)),  dw = Σ_n g * xhat. */
void rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                      const float *rstd, const float *w, int N, int C,
                      int ld_din, int ld_dout, int ld_in) {
    if (din) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            const float *x = in + (size_t)n * ld_in, *g = dout + (size_t)n * ld_dout;
            float *dx = din + (size_t)n * ld_din;
            float r = rstd[n];
            double dot = 0;
            for (int c = 0; c < C; c++) dot += (double)g[c] * w[c] * x[c] * r;
            float m = (float)(dot / C);
            for (int c = 0; c < C; c++) dx[c] += r * (g[c] * w[c] - x[c] * r * m);
        }
    }
    if (dw) {
#pragma omp parallel for schedule(static)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int n = 0; n < N; n++)
                s += (double)dout[(size_t)n * ld_dout + c] * in[(size_t)n * ld_in + c] * rstd[n];
            dw[c] += (float)s;
        }
    }
}
