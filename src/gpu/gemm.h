/* gpu/gemm.h — the GPU's products, on NVIDIA's cuBLASLt (gpu/cublaslt.h, opened at
 * run time): the CPU's GEMM interface (ops/gemm.h) on device pointers. Row-major
 * C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C, C fp32, with
 * - gpu_gemm_bf16: A and B bf16 (mixed precision's products; gpu_round_bf16 in
 *   gpu/ops.h makes an operand from fp32), their products summed in fp32;
 * - gpu_gemm_f32: A and B fp32, fp32 arithmetic (TF32 off: CUBLAS_COMPUTE_32F).
 * lda, ldb, ldc are row strides in elements, as gemm_f32's. beta 0: C is written, not
 * read, so it may hold NaNs (the BLAS convention, which cuBLAS states for its gemm;
 * tools/gpu-check.sh checks cuBLASLt keeps it). The order of the sums is cuBLASLt's (its algorithm for the
 * shape on this GPU): deterministic for a GPU, a library and a shape, not the CPU's —
 * and since the algorithm is chosen per shape, a row of C may differ in its last bits
 * with M. So these serve training and prefill, not decoding, where a row's result
 * must not depend on the batch (the CPU's matmul_rowwise: a kernel of our own).
 *
 * The library, its handle, a 32 MiB workspace and a plan per shape (the descriptors
 * and the algorithm cuBLASLt's heuristic picked) are made on a device's first
 * product and kept until gpu_close. Each call returns 0, or -1 with err (bad sizes
 * named; no cuBLASLt here; the library refused). Products run in order with the
 * kernels (the context's default stream). */
#ifndef GRPO_GPU_GEMM_H
#define GRPO_GPU_GEMM_H

#include "gpu/cublaslt.h"
#include "gpu/device.h"

int gpu_gemm_bf16(GpuDevice *d, int trans_a, int trans_b, int M, int N, int K, float alpha, CUdeviceptr A, int lda,
                  CUdeviceptr B, int ldb, float beta, CUdeviceptr C, int ldc, GrpoErr *err);
int gpu_gemm_f32(GpuDevice *d, int trans_a, int trans_b, int M, int N, int K, float alpha, CUdeviceptr A, int lda,
                 CUdeviceptr B, int ldb, float beta, CUdeviceptr C, int ldc, GrpoErr *err);

/* Plans a device holds now (for the tests: one per shape, never one per call). */
int gpu_gemm_plans(const GpuDevice *d);

/* The tests' seam: the cuBLASLt the products open, in place of libcublasLt
 * (cublaslt_api_open); NULL for the library. tests/machine/gpu_emulator_blas.c
 * installs an emulated one so (with the emulated GPU: test_gpu_machine). */
void gpu_set_blas(int (*open_blas)(CublasLtApi *api, char *why, size_t n));
/* Frees d's cuBLASLt state (gpu_close calls it). */
void gpu_blas_close(GpuDevice *d);

#endif
