/* gpu/kernels/rows.cu — rows of a matrix gathered by an index list and scattered
 * back: the LM head's chunk loop (gpu/logprob.c) sends only the rows with a target
 * through the head, as ops/logprob.c does. Copies, and one add an element: the CPU's
 * bits. Each element is one thread's; the indices are distinct, so no two threads
 * write one element. */
#include "device.h"

/* dst[i, :] = src[idx[i], :] for i < m, rows of C floats. */
KERNEL void rows_gather(float *dst, const float *src, const int *idx, int m, int C) {
    u64 total = (u64)m * C;
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < total; i += (u64)grid_dim_x() * block_dim_x())
        dst[i] = src[(u64)idx[i / C] * C + i % C];
}

/* dst[idx[i], :] = src[i, :] (add: dst[idx[i], :] += src[i, :]) for i < m. */
KERNEL void rows_scatter(float *dst, const float *src, const int *idx, int m, int C, int add) {
    u64 total = (u64)m * C;
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < total; i += (u64)grid_dim_x() * block_dim_x()) {
        float *o = dst + (u64)idx[i / C] * C + i % C;
        *o = add ? *o + src[i] : src[i];
    }
}
