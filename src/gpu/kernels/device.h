/* gpu/kernels/device.h — what the kernels need of CUDA C, from clang's NVPTX
 * builtins alone: the build has no CUDA toolkit (clang -x cuda -nocudainc
 * -nocudalib). Thread indices, the block barrier, warp shuffles, and the few
 * functions the kernels use, each lowered to one PTX instruction. */
#ifndef GRPO_GPU_KERNELS_DEVICE_H
#define GRPO_GPU_KERNELS_DEVICE_H

#define KERNEL extern "C" __attribute__((global))
#define DEVICE static __attribute__((device)) inline
#define SHARED __attribute__((shared))

typedef unsigned long long u64;

DEVICE int thread_x(void) { return __nvvm_read_ptx_sreg_tid_x(); }
DEVICE int block_dim_x(void) { return __nvvm_read_ptx_sreg_ntid_x(); }
DEVICE int block_x(void) { return __nvvm_read_ptx_sreg_ctaid_x(); }
DEVICE int grid_dim_x(void) { return __nvvm_read_ptx_sreg_nctaid_x(); }
DEVICE void sync_block(void) { __nvvm_bar_sync(0); }

/* The sum of v over the warp's 32 lanes, in every lane (a butterfly: the same
 * order of additions in every lane, so every lane has the same bits). */
DEVICE float warp_sum(float v) {
    for (int m = 16; m > 0; m >>= 1) v += __nvvm_shfl_sync_bfly_f32(0xffffffffu, v, m, 0x1f);
    return v;
}

/* The sum of v over the block (blockDim.x a multiple of 32, at most 1024), in
 * every thread; scratch: 32 floats of shared memory. A fixed order of additions:
 * the same bits for the same inputs and block size. */
DEVICE float block_sum(float v, float *scratch) {
    int lane = thread_x() & 31, warp = thread_x() >> 5, warps = block_dim_x() >> 5;
    v = warp_sum(v);
    sync_block(); /* scratch may still be read by an earlier block_sum */
    if (lane == 0) scratch[warp] = v;
    sync_block();
    v = lane < warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

/* IEEE round-to-nearest square root and division (sqrt.rn, div.rn), as the CPU's. */
DEVICE float sqrt_rn(float x) { return __builtin_sqrtf(x); }
/* e^x through 2^(x log2 e) (ex2.approx: about 2 ulp). */
DEVICE float exp_fast(float x) { return __nvvm_ex2_approx_f(x * 1.4426950408889634f); }

#endif
