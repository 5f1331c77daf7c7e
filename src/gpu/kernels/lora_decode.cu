/* gpu/kernels/lora_decode.cu — LoRA adapters beside the frozen base in a decoding
 * step (gpu/decode.h), as model/lora_layers.c's lora_linear_decode adds them on the
 * CPU: u = scaling (x A^T), then y[:, row0 ..] += u B^T, in fp32. Row-local by
 * construction: a row's u and its additions are summed by threads that read that row
 * only, in an order fixed by `in` and `r` alone, so a row's result is the same bits
 * alone or in any batch (no cuBLASLt here: its order may change with the rows). */
#include "device.h"

/* u[n, k] = scaling sum_j x[n, j] A[k, j] for k < r: block b is row b (grid n); warp
 * w of the block takes k = w, w + warps, ...; lane l chains j = l, l + 32, ... with
 * fused multiply-adds in increasing j, and the warp's 32 partial sums are added by a
 * butterfly (every lane ends with the same sum: each step adds the same two values). */
KERNEL void lora_decode_down(float *u, const float *x, const float *A, int r, int in, float scaling) {
    int row = block_x(), lane = thread_x() & 31, warp = thread_x() >> 5, warps = block_dim_x() >> 5;
    const float *xr = x + (u64)row * in;
    for (int k = warp; k < r; k += warps) { /* the same trip count on a warp's lanes: the shuffles see all 32 */
        const float *a = A + (u64)k * in;
        float acc = 0.0f;
        for (int j = lane; j < in; j += 32) acc = fma_rn(xr[j], a[j], acc);
        acc = warp_sum(acc);
        if (lane == 0) u[(u64)row * r + k] = acc * scaling;
    }
}

/* y[i, row0 + o] += sum_k u[i, k] B[o, k] for i < n, o < out (y's rows ldy floats
 * apart): a thread an element, its r products chained with fused multiply-adds in
 * increasing k, then added to y as the CPU adds its product's result. */
KERNEL void lora_decode_up(float *y, int ldy, int row0, const float *u, const float *B, int n, int r, int out) {
    u64 total = (u64)n * out;
    for (u64 e = (u64)block_x() * block_dim_x() + thread_x(); e < total; e += (u64)grid_dim_x() * block_dim_x()) {
        u64 i = e / out, o = e % out;
        const float *ui = u + i * r, *b = B + o * r;
        float acc = 0.0f;
        for (int k = 0; k < r; k++) acc = fma_rn(ui[k], b[k], acc);
        float *yo = y + i * ldy + row0 + o;
        *yo = *yo + acc;
    }
}
