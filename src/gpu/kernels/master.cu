/* gpu/kernels/master.cu — mixed precision's master weights (fp32, in the parameter
 * table's layout) to the copies the forward reads: a matrix's bf16 values as
 * ops/ops.h's f32_split takes its upper half (nearest, ties away from zero; a NaN a
 * quiet NaN), which is what the CPU's model holds after adamw_step_split, or an fp32
 * tensor (norms, biases, the embedding) copied. A grid-stride loop over n. */
#include "device.h"

DEVICE unsigned short f32_split_hi(float f) {
    union {
        float f;
        unsigned u;
    } v;
    v.f = f;
    unsigned u = v.u, h = (u + 0x8000u) >> 16, nan = (u >> 16) | 0x40u;
    return (unsigned short)((u & 0x7fffffffu) > 0x7f800000u ? nan : h);
}

/* dst16[n] = f32_split's upper half of src[n] when dst16 is not NULL, else dst32[n] = src[n]. */
KERNEL void master_to_weights(unsigned short *dst16, float *dst32, const float *src, u64 n) {
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < n; i += (u64)grid_dim_x() * block_dim_x()) {
        if (dst16) dst16[i] = f32_split_hi(src[i]);
        else dst32[i] = src[i];
    }
}
