/* ops/gemm.c — gemm_f32 over OpenBLAS (see gemm.h). */
#include "ops/gemm.h"

#include <cblas.h>
#include <omp.h>

void gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        /* BLAS leaves C scaled by beta; make that explicit for K = 0. */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0 ? 0 : beta * C[(size_t)i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

void gemm_set_threads(int n) {
    if (n < 1) n = 1;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}
