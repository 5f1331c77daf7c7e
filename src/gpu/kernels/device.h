/* gpu/kernels/device.h — what the kernels need of CUDA C, in two lowerings:
 *
 * - for the GPU (clang -x cuda, __CUDA__): clang's NVPTX builtins alone, as the build
 *   has no CUDA toolkit (-nocudainc -nocudalib). Thread indices, the block barrier,
 *   warp shuffles, and the few functions the kernels use, each one PTX instruction;
 * - for the host (plain C): the same names on the tests' emulated GPU
 *   (tests/machine/gpu_emulator.c, which includes the kernels and runs every thread
 *   of a block as a coroutine), so `make test` runs each kernel against the CPU's op
 *   on machines without a GPU.
 *
 * Kernels are therefore written in the C that both accept: no templates, references
 * or overloads; a kernel is `KERNEL void name(...)`, a helper `DEVICE`, block-shared
 * memory `SHARED` (static shared arrays) or dynamic_shared() (the launch's bytes). */
#ifndef GRPO_GPU_KERNELS_DEVICE_H
#define GRPO_GPU_KERNELS_DEVICE_H

typedef unsigned long long u64;

#if defined(__CUDA__)

#define KERNEL extern "C" __attribute__((global))
#define DEVICE static __attribute__((device)) inline
/* A helper that must be inlined: its array arguments then stay in registers. */
#define DEVICE_INLINE static __attribute__((device)) __attribute__((always_inline)) inline
#define SHARED __attribute__((shared))
/* A loop of constant trip count unrolled whole, so that arrays it indexes stay in
 * registers (an array indexed at run time lives in local memory). */
#define UNROLL _Pragma("unroll")
/* A loop kept a loop: what one iteration holds in registers is not hoisted from the
 * next ones (where unrolling would spill). */
#define NO_UNROLL _Pragma("unroll 1")

DEVICE int thread_x(void) { return __nvvm_read_ptx_sreg_tid_x(); }
DEVICE int block_dim_x(void) { return __nvvm_read_ptx_sreg_ntid_x(); }
DEVICE int block_x(void) { return __nvvm_read_ptx_sreg_ctaid_x(); }
DEVICE int block_y(void) { return __nvvm_read_ptx_sreg_ctaid_y(); }
DEVICE int grid_dim_x(void) { return __nvvm_read_ptx_sreg_nctaid_x(); }
DEVICE int grid_dim_y(void) { return __nvvm_read_ptx_sreg_nctaid_y(); }
DEVICE void sync_block(void) { __nvvm_bar_sync(0); }
/* The lane's v exchanged with lane ^ m's (m < 32) / lane src's / lane + d's (a lane
 * past the warp's end keeps its own), across the whole warp (all 32 lanes call it). */
DEVICE float shfl_xor(float v, int m) { return __nvvm_shfl_sync_bfly_f32(0xffffffffu, v, m, 0x1f); }
DEVICE float shfl_idx(float v, int src) { return __nvvm_shfl_sync_idx_f32(0xffffffffu, v, src, 0x1f); }
DEVICE float shfl_down(float v, int d) { return __nvvm_shfl_sync_down_f32(0xffffffffu, v, d, 0x1f); }
/* The launch's dynamic shared memory (cuLaunchKernel's sharedMemBytes), 16-byte aligned. */
extern __attribute__((shared)) __attribute__((aligned(16))) unsigned char gpu_dynamic_shared[];
DEVICE void *dynamic_shared(void) { return gpu_dynamic_shared; }
/* IEEE round-to-nearest square root and division (sqrt.rn, div.rn), as the CPU's. */
DEVICE float sqrt_rn(float x) { return __builtin_sqrtf(x); }
/* ...in double (sqrt.rn.f64): the q/k norm's 1 / sqrt(mean + eps), as ops/rmsnorm.c's. */
DEVICE double sqrt_rn_f64(double x) { return __builtin_sqrt(x); }
/* e^x through 2^(x log2 e) (ex2.approx: about 2 ulp). */
DEVICE float exp_fast(float x) { return __nvvm_ex2_approx_f(x * 1.4426950408889634f); }
/* ln x through log2 x ln 2 (lg2.approx: about 2^-22 relative). */
DEVICE float log_fast(float x) { return __nvvm_lg2_approx_f(x) * 0.6931471805599453f; }
/* The head's family (embedding, logprob, sampler): the CPU's own rounding steps —
 * a fused multiply-add rounded once (fma.rn), round to the nearest integer, ties to
 * even (cvt.rni) — so kernels/kmath.h computes the CPU's vec_exp_neg bits. */
DEVICE float fma_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
DEVICE float rint_f32(float x) { return __builtin_rintf(x); }
DEVICE double rint_f64(double x) { return __builtin_rint(x); }
/* x rounded to TF32 (10 fraction bits; to nearest, ties away from zero: cvt.rna.tf32.f32),
 * as a float whose low 13 bits are 0: a tensor-core operand of mma_tf32. */
DEVICE float round_tf32(float x) {
    unsigned r;
    __asm__("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __builtin_bit_cast(float, r);
}
/* d += A B for one 16 x 8 x 8 tile on the tensor cores, A and B TF32 (round_tf32's
 * values), fp32 sums (mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32): a warp's
 * collective, all 32 lanes call it. Lane 4 g + t holds (PTX ISA, the fragments of
 * mma.m16n8k8 .tf32): a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]; b = B[t][g],
 * B[t+4][g]; d = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]. */
DEVICE_INLINE void mma_tf32(float *d, const float *a, const float *b) {
    __asm__ volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(__builtin_bit_cast(unsigned, a[0])), "r"(__builtin_bit_cast(unsigned, a[1])),
                       "r"(__builtin_bit_cast(unsigned, a[2])), "r"(__builtin_bit_cast(unsigned, a[3])),
                       "r"(__builtin_bit_cast(unsigned, b[0])), "r"(__builtin_bit_cast(unsigned, b[1])));
}

#else /* the tests' emulated GPU */

#include <math.h>

#define KERNEL static
#define DEVICE static inline
#define DEVICE_INLINE static inline
/* One copy per kernel, shared by the block's threads: the emulator runs one block at
 * a time. */
#define SHARED static
#define UNROLL _Pragma("GCC unroll 64")
#define NO_UNROLL

enum { GPU_EMU_SHFL_XOR, GPU_EMU_SHFL_IDX, GPU_EMU_SHFL_DOWN, GPU_EMU_MMA_TF32 };
/* tests/machine/gpu_emulator.c: the running thread's indices, the barriers. */
int gpu_emu_index(int which); /* 0 thread x, 1 block dim x, 2 block x, 3 block y, 4 grid x, 5 grid y */
void gpu_emu_sync_block(void);
float gpu_emu_shfl(float v, int kind, int arg);
void gpu_emu_mma_tf32(float *d, const float *a, const float *b);
void *gpu_emu_dynamic_shared(void);

DEVICE int thread_x(void) { return gpu_emu_index(0); }
DEVICE int block_dim_x(void) { return gpu_emu_index(1); }
DEVICE int block_x(void) { return gpu_emu_index(2); }
DEVICE int block_y(void) { return gpu_emu_index(3); }
DEVICE int grid_dim_x(void) { return gpu_emu_index(4); }
DEVICE int grid_dim_y(void) { return gpu_emu_index(5); }
DEVICE void sync_block(void) { gpu_emu_sync_block(); }
DEVICE float shfl_xor(float v, int m) { return gpu_emu_shfl(v, GPU_EMU_SHFL_XOR, m); }
DEVICE float shfl_idx(float v, int src) { return gpu_emu_shfl(v, GPU_EMU_SHFL_IDX, src); }
DEVICE float shfl_down(float v, int d) { return gpu_emu_shfl(v, GPU_EMU_SHFL_DOWN, d); }
DEVICE void *dynamic_shared(void) { return gpu_emu_dynamic_shared(); }
DEVICE float sqrt_rn(float x) { return sqrtf(x); }
DEVICE double sqrt_rn_f64(double x) { return sqrt(x); }
DEVICE float exp_fast(float x) { return exp2f(x * 1.4426950408889634f); }
DEVICE float log_fast(float x) { return log2f(x) * 0.6931471805599453f; }
DEVICE float fma_rn(float a, float b, float c) { return fmaf(a, b, c); }
DEVICE float rint_f32(float x) { return rintf(x); }
DEVICE double rint_f64(double x) { return rint(x); }
/* cvt.rna.tf32.f32 on the bits: the magnitude's low 13 bits rounded off, a half up
 * (away from zero); infinities and NaNs as they are. */
DEVICE float round_tf32(float x) {
    union {
        float f;
        unsigned u;
    } v = {x};
    if ((v.u & 0x7f800000u) != 0x7f800000u) v.u = (v.u + 0x1000u) & 0xffffe000u;
    return v.f;
}
DEVICE void mma_tf32(float *d, const float *a, const float *b) { gpu_emu_mma_tf32(d, a, b); }

#endif

/* The sum of v over the warp's 32 lanes, in every lane (a butterfly: the same
 * order of additions in every lane, so every lane has the same bits). */
DEVICE float warp_sum(float v) {
    for (int m = 16; m > 0; m >>= 1) v += shfl_xor(v, m);
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

/* The largest of v over the block, in every thread (the maximum is exact: any order
 * gives it); scratch: 32 floats of shared memory. NaN partials are passed over, as
 * the CPU's vec_max passes them. */
DEVICE float block_max(float v, float *scratch) {
    int lane = thread_x() & 31, warp = thread_x() >> 5, warps = block_dim_x() >> 5;
    for (int m = 16; m > 0; m >>= 1) {
        float o = shfl_xor(v, m);
        v = o > v ? o : v;
    }
    sync_block(); /* scratch may still be read by an earlier reduction */
    if (lane == 0) scratch[warp] = v;
    sync_block();
    v = lane < warps ? scratch[lane] : -__builtin_inff();
    for (int m = 16; m > 0; m >>= 1) {
        float o = shfl_xor(v, m);
        v = o > v ? o : v;
    }
    return v;
}

#endif
