/* gpu/kernels/rmsnorm.cu — RMSNorm as ops/rmsnorm.c computes it, y = x r w with
 * r = 1 / sqrt(mean(x^2) + eps): one block per row, the row's sums in fp32 over
 * the block (the CPU sums in double: the results agree to about 1e-6 relative). */
#include "device.h"

KERNEL void rmsnorm_forward(float *out, float *rstd, const float *in, const float *w, int C, int ld_out, int ld_in,
                            float eps) {
    SHARED float scratch[32];
    const float *x = in + (u64)block_x() * ld_in;
    float *y = out + (u64)block_x() * ld_out;
    float s = 0.0f;
    for (int c = thread_x(); c < C; c += block_dim_x()) s += x[c] * x[c];
    s = block_sum(s, scratch);
    float r = 1.0f / sqrt_rn(s / C + eps);
    if (thread_x() == 0) rstd[block_x()] = r;
    for (int c = thread_x(); c < C; c += block_dim_x()) y[c] = x[c] * r * w[c];
}

/* din += r (g w - x r mean(g w x r)), a block per row (din NULL: none). */
KERNEL void rmsnorm_backward_input(float *din, const float *dout, const float *in, const float *rstd, const float *w,
                                   int C, int ld_din, int ld_dout, int ld_in) {
    SHARED float scratch[32];
    const float *x = in + (u64)block_x() * ld_in, *g = dout + (u64)block_x() * ld_dout;
    float *dx = din + (u64)block_x() * ld_din;
    float r = rstd[block_x()], s = 0.0f;
    for (int c = thread_x(); c < C; c += block_dim_x()) s += g[c] * w[c] * x[c] * r;
    float m = block_sum(s, scratch) / C;
    for (int c = thread_x(); c < C; c += block_dim_x()) dx[c] += r * (g[c] * w[c] - x[c] * r * m);
}

/* dw[c] (+)= sum_n g[n,c] x[n,c] r[n]: a thread per column, the rows in order (the
 * same order as the CPU's, in fp32). */
KERNEL void rmsnorm_backward_weight(float *dw, const float *dout, const float *in, const float *rstd, int N, int C,
                                    int ld_dout, int ld_in, int write_dw) {
    int c = block_x() * block_dim_x() + thread_x();
    if (c >= C) return;
    float s = 0.0f;
    for (int n = 0; n < N; n++) s += dout[(u64)n * ld_dout + c] * in[(u64)n * ld_in + c] * rstd[n];
    dw[c] = write_dw ? s : dw[c] + s;
}
