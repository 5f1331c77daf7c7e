/* gpu/kernels/adamw.cu — one AdamW step over a flat buffer, element by element the
 * expressions of optim/adamw.c in the same order, in fp32 with IEEE division and
 * square root and no contraction into FMAs (-ffp-contract=off): the CPU's bits. The
 * step's scalars come computed by the host, as the CPU's step_begin computes them. */
#include "device.h"

/* decay: 1 - lr wd applied where mask[i] (mask NULL: everywhere; use_decay 0: nowhere). */
KERNEL void adamw_step(float *p, float *m, float *v, const float *g, const unsigned char *mask, u64 n, float step_size,
                       float bc2_sqrt, float decay, float one_minus_b1, float b2, float one_minus_b2, float eps,
                       int use_decay) {
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < n; i += (u64)grid_dim_x() * block_dim_x()) {
        float keep = !use_decay ? 1.0f : !mask || mask[i] ? decay : 1.0f;
        float pi = p[i] * keep, gi = g[i];
        float mi = m[i] + one_minus_b1 * (gi - m[i]);
        float vi = b2 * v[i] + one_minus_b2 * gi * gi;
        float denom = sqrt_rn(vi) / bc2_sqrt + eps;
        pi -= step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
    }
}
