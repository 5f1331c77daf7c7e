/* gpu/kernels/bf16.cu — fp32 rounded to bf16, as ops/ops.h's f32_to_bf16 (nearest,
 * ties to even; a NaN stays a NaN, quiet when its upper payload bits are 0): an
 * operand of the bf16 products (gpu/gemm.h) made from fp32 values. A grid-stride
 * loop over rows x cols. */
#include "device.h"

DEVICE unsigned short f32_to_bf16_rne(float f) {
    union {
        float f;
        unsigned u;
    } v;
    v.f = f;
    unsigned u = v.u, h = u >> 16;
    unsigned rounded = (u + 0x7fffu + (h & 1u)) >> 16, nan = (h & 0x7fu) ? h : (h | 0x40u);
    return (unsigned short)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/* dst[rows, cols] (row stride ld_dst) = src[rows, cols] (ld_src) rounded. */
KERNEL void round_bf16(unsigned short *dst, const float *src, int rows, int cols, int ld_dst, int ld_src) {
    u64 total = (u64)rows * cols;
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < total; i += (u64)grid_dim_x() * block_dim_x()) {
        u64 r = i / cols, c = i % cols;
        dst[r * ld_dst + c] = f32_to_bf16_rne(src[r * ld_src + c]);
    }
}
