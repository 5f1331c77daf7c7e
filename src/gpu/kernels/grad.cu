/* gpu/kernels/grad.cu — the step's gradient on the device: optim/grad.c's norm, its
 * blocks' sums of squares bit for bit, and the clip's scaling.
 *
 * grad_sumsq_blocks: part[b] = sum over block b's GRAD_SUMSQ_BLOCK values of g[i]^2,
 * in order, in double — the CPU's grad_norm partials (a float's square is exact in
 * double, so the sum's only roundings are the additions, taken in the CPU's order).
 * Each thread owns one block (one row of a CUDA block's GRAD_SUMSQ_ROWS); the CUDA
 * block loads its rows GRAD_SUMSQ_TILE columns at a time through shared memory, so a
 * warp's loads are 128 consecutive bytes, and each thread then adds its row's tile in
 * column order. Values past n load as zeros: s + 0 is s. */
#include "device.h"

#define GRAD_SUMSQ_BLOCK 4096 /* optim/optim.h's GRAD_NORM_BLOCK */
#define GRAD_SUMSQ_ROWS 128   /* threads (gradient blocks) per CUDA block */
#define GRAD_SUMSQ_TILE 32

KERNEL void grad_sumsq_blocks(double *part, const float *g, u64 n) {
    SHARED float tile[GRAD_SUMSQ_ROWS][GRAD_SUMSQ_TILE + 1];
    int t = thread_x();
    u64 row0 = (u64)block_x() * GRAD_SUMSQ_ROWS, nb = (n + GRAD_SUMSQ_BLOCK - 1) / GRAD_SUMSQ_BLOCK;
    double s = 0.0;
    for (int j0 = 0; j0 < GRAD_SUMSQ_BLOCK; j0 += GRAD_SUMSQ_TILE) {
        for (int k = t; k < GRAD_SUMSQ_ROWS * GRAD_SUMSQ_TILE; k += GRAD_SUMSQ_ROWS) {
            int r = k / GRAD_SUMSQ_TILE, c = k % GRAD_SUMSQ_TILE;
            u64 i = (row0 + (u64)r) * GRAD_SUMSQ_BLOCK + (u64)(j0 + c);
            tile[r][c] = i < n ? g[i] : 0.0f;
        }
        sync_block();
        for (int c = 0; c < GRAD_SUMSQ_TILE; c++) {
            double v = (double)tile[t][c];
            s += v * v;
        }
        sync_block();
    }
    if (row0 + (u64)t < nb) part[row0 + (u64)t] = s;
}

/* g[n] *= c (the clip's factor, a float as torch's), a grid-stride loop. */
KERNEL void grad_scale(float *g, u64 n, float c) {
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < n; i += (u64)grid_dim_x() * block_dim_x())
        g[i] *= c;
}
