/* gpu/kernels/qk_norm.cu — Qwen3's q/k norm: an RMSNorm over D of each head of q
 * and k (H query heads, then Hkv key heads, side by side in a row), the query heads
 * with wq[D], the key heads with wk[D], as model/transformer.c applies ops/rmsnorm.c
 * once per head. The CPU's arithmetic step for step: a row's sums in double over 8
 * lanes (element c in lane c mod 8, the leftover terms apart) combined in its order,
 * r = (float)(1 / sqrt(mean + eps)) in double, then fp32; so a row's results are the
 * CPU's bits. D is small (64 .. 256): 8 threads a (row, head), 16 heads a block.
 * rstd is laid out as the CPU saves it: [nh, N] (head-major). */
#include "device.h"

enum { QKN_LANES = 8, QKN_HEADS = 16 }; /* a block: 16 heads x 8 lanes = 128 threads */

/* ops/rmsnorm.c's lanes_total: the 8 lanes' sums in its order, then the rest. */
DEVICE double qkn_total(const double *acc, double rest) {
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + rest;
}

/* out[n, h D ..] = in[n, h D ..] r w, rstd[h N + n] = r, for row n = block_x() and
 * heads h of block_y(); out may be in (each element is read and written by one
 * thread, the writes after the barrier that ends every read of the row). */
KERNEL void qk_norm_forward(float *out, float *rstd, const float *in, const float *wq, const float *wk, int N, int H,
                            int nh, int D, int ld_out, int ld_in, float eps) {
    SHARED double acc[QKN_HEADS][QKN_LANES];
    SHARED double rest[QKN_HEADS];
    SHARED float r_head[QKN_HEADS];
    int g = thread_x() / QKN_LANES, j = thread_x() % QKN_LANES, n = block_x(), h = block_y() * QKN_HEADS + g;
    int live = h < nh, D8 = D / QKN_LANES * QKN_LANES; /* no early return: every thread meets the barriers */
    const float *x = in + (u64)n * ld_in + (u64)h * D;
    if (live) {
        double s = 0;
        for (int c = j; c < D8; c += QKN_LANES) s += (double)x[c] * x[c];
        acc[g][j] = s;
        if (j == 0) {
            double t = 0;
            for (int c = D8; c < D; c++) t += (double)x[c] * x[c];
            rest[g] = t;
        }
    }
    sync_block();
    if (live && j == 0) {
        float r = (float)(1.0 / sqrt_rn_f64(qkn_total(acc[g], rest[g]) / D + eps));
        r_head[g] = r;
        rstd[(u64)h * N + n] = r;
    }
    sync_block();
    if (!live) return;
    const float *w = h < H ? wq : wk;
    float r = r_head[g], *y = out + (u64)n * ld_out + (u64)h * D;
    for (int c = j; c < D; c += QKN_LANES) y[c] = x[c] * r * w[c];
}

/* din[n, h D ..] += r (g w - x r m), m = mean(g w x r) (ops/rmsnorm.c's rmsnorm_backward,
 * input half), the same lanes and order as the forward. */
KERNEL void qk_norm_backward_input(float *din, const float *dout, const float *in, const float *rstd, const float *wq,
                                   const float *wk, int N, int H, int nh, int D, int ld_din, int ld_dout, int ld_in) {
    SHARED double acc[QKN_HEADS][QKN_LANES];
    SHARED double rest[QKN_HEADS];
    SHARED float m_head[QKN_HEADS];
    int g = thread_x() / QKN_LANES, j = thread_x() % QKN_LANES, n = block_x(), h = block_y() * QKN_HEADS + g;
    int live = h < nh, D8 = D / QKN_LANES * QKN_LANES;
    const float *x = in + (u64)n * ld_in + (u64)h * D, *gr = dout + (u64)n * ld_dout + (u64)h * D;
    const float *w = h < H ? wq : wk;
    float r = live ? rstd[(u64)h * N + n] : 0.0f;
    if (live) {
        double s = 0;
        for (int c = j; c < D8; c += QKN_LANES) s += (double)gr[c] * w[c] * x[c] * r;
        acc[g][j] = s;
        if (j == 0) {
            double t = 0;
            for (int c = D8; c < D; c++) t += (double)gr[c] * w[c] * x[c] * r;
            rest[g] = t;
        }
    }
    sync_block();
    if (live && j == 0) m_head[g] = (float)(qkn_total(acc[g], rest[g]) / D);
    sync_block();
    if (!live) return;
    float m = m_head[g], *dx = din + (u64)n * ld_din + (u64)h * D;
    for (int c = j; c < D; c += QKN_LANES) dx[c] += r * (gr[c] * w[c] - x[c] * r * m);
}

/* part[h D + c] = (float) sum_n g[n, h D + c] x[n, h D + c] r[h N + n], in double over
 * the rows in order (the CPU's per-head weight sum): a thread per (head, column). */
KERNEL void qk_norm_backward_weight_heads(float *part, const float *dout, const float *in, const float *rstd, int N,
                                          int nh, int D, int ld_dout, int ld_in) {
    int c = block_x() * block_dim_x() + thread_x(), h = block_y();
    if (c >= D || h >= nh) return;
    double s = 0;
    for (int n = 0; n < N; n++)
        s += (double)dout[(u64)n * ld_dout + (u64)h * D + c] * in[(u64)n * ld_in + (u64)h * D + c] *
             rstd[(u64)h * N + n];
    part[(u64)h * D + c] = (float)s;
}

/* dwq[c] (+)= part[0 ..H) in head order, dwk[c] (+)= part[H .. nh) likewise, in fp32
 * (the CPU adds each head's sum to the weight's gradient in turn; write_dw: the first
 * head's is written). A thread per column of [dwq | dwk]; a norm whose pointer is 0
 * is left alone. */
KERNEL void qk_norm_backward_weight_sum(float *dwq, float *dwk, const float *part, int H, int nh, int D,
                                        int write_dw) {
    int i = block_x() * block_dim_x() + thread_x();
    if (i >= 2 * D) return;
    int key = i >= D, c = key ? i - D : i, h0 = key ? H : 0, h1 = key ? nh : H;
    float *dw = key ? dwk : dwq;
    if (!dw) return;
    float s = write_dw ? part[(u64)h0 * D + c] : dw[c] + part[(u64)h0 * D + c];
    for (int h = h0 + 1; h < h1; h++) s = s + part[(u64)h * D + c];
    dw[c] = s;
}
