/* ops/gemm.h — the one GEMM interface every kernel calls.
 *
 * Row-major C[M,N] = alpha * op(A)[M,K] · op(B)[K,N] + beta * C. Today it is
 * OpenBLAS's cblas_sgemm; our own AVX-512 kernels or CUDA can stand behind the
 * same call. Called inside an OpenMP parallel region, OpenBLAS (OpenMP flavour)
 * runs single-threaded, which is what the per-head attention loops want. */
#ifndef GRPO_OPS_GEMM_H
#define GRPO_OPS_GEMM_H

void gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* Number of threads the kernels may use (OpenMP and OpenBLAS alike). */
void gemm_set_threads(int n);

#endif
