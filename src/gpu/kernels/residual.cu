/* gpu/kernels/residual.cu — the residual stream's add, y += x, as model/transformer.c's
 * add_inplace: one fp32 add an element (a + b = b + a, so the CPU's bits), a
 * grid-stride loop over n. */
#include "device.h"

KERNEL void residual_add(float *y, const float *x, u64 n) {
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < n; i += (u64)grid_dim_x() * block_dim_x())
        y[i] = y[i] + x[i];
}
