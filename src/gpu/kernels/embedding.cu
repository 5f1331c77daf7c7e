/* gpu/kernels/embedding.cu — the token embedding as ops/embedding.c: a block per
 * token copies its table row (fp32, or bf16 widened exactly), and the backward
 * scatter-adds dout's rows into dtable in the CPU's order without atomics. */
#include "kmath.h"

/* out[N, C] = table[ids[n]], a block per token n. */
KERNEL void embedding_forward(float *out, const int *ids, const float *table, int C) {
    const float *src = table + (u64)ids[block_x()] * C;
    float *dst = out + (u64)block_x() * C;
    for (int c = thread_x(); c < C; c += block_dim_x()) dst[c] = src[c];
}

/* The same from bf16 values: a bf16 is the upper half of its float (exact). */
KERNEL void embedding_forward_bf16(float *out, const int *ids, const unsigned short *table, int C) {
    const unsigned short *src = table + (u64)ids[block_x()] * C;
    float *dst = out + (u64)block_x() * C;
    for (int c = thread_x(); c < C; c += block_dim_x()) dst[c] = f32_from_bits((unsigned)src[c] << 16);
}

/* dtable[V, C] += dout[n] at row ids[n]. Block b owns the vocabulary rows r with
 * r % gridDim == b and goes over the tokens in order, each thread over its own
 * columns: no two threads ever touch one element, and each element's sum runs over
 * n in increasing order — the CPU's order, so the CPU's bits, for any grid. */
KERNEL void embedding_backward(float *dtable, const float *dout, const int *ids, int N, int C) {
    int b = block_x(), blocks = grid_dim_x();
    for (int n = 0; n < N; n++) {
        int id = ids[n];
        if (id % blocks != b) continue; /* the same for every thread of the block */
        float *row = dtable + (u64)id * C;
        const float *g = dout + (u64)n * C;
        for (int c = thread_x(); c < C; c += block_dim_x()) row[c] += g[c];
    }
}
