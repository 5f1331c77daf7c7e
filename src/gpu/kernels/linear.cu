/* gpu/kernels/linear.cu — a linear layer's bias, forward and backward, as
 * ops/matmul.c's: each output row set to the bias before the product adds into it
 * (beta 1: out = sum + bias, the CPU's order), and the bias gradient summed over the
 * rows in fp32, row 0 first, one thread a column — the CPU's sum, bit for bit, and a
 * column's result never depends on how many threads there are. */
#include "device.h"

/* out[N, O] = bias[O] in every row. */
KERNEL void linear_bias_rows(float *out, const float *bias, int N, int O) {
    u64 total = (u64)N * O;
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < total; i += (u64)grid_dim_x() * block_dim_x())
        out[i] = bias[i % O];
}

/* dbias[o] = (write ? 0 : dbias[o]) + sum_n dout[n, o], the sum formed apart first. */
KERNEL void linear_bias_backward(float *dbias, const float *dout, int N, int O, int write) {
    int o = block_x() * block_dim_x() + thread_x();
    if (o >= O) return;
    float s = 0.0f;
    for (int n = 0; n < N; n++) s += dout[(u64)n * O + o];
    dbias[o] = write ? s : dbias[o] + s;
}
