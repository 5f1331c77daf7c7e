/* ops/gemm.c — gemm_f32 and gemm_f32_batch (see gemm.h): OpenBLAS's sgemm or
 * oneDNN's fp32 matmul (ops/onednn.c). Inside a parallel region it is always
 * OpenBLAS, which then runs single-threaded (gemm_f32_batch's fallback runs its
 * products that way). */
#include "ops/gemm.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "ops/onednn.h"

static GemmF32Backend chosen = GEMM_F32_AUTO;

static GemmF32Backend resolved(void) { return chosen == GEMM_F32_AUTO ? GEMM_F32_ONEDNN : chosen; }

void gemm_f32_use(GemmF32Backend b) { chosen = b; }

const char *gemm_f32_backend_name(void) {
    static char name[96];
    char impl[64];
    if (resolved() == GEMM_F32_ONEDNN && onednn_impl(0, impl, sizeof impl))
        snprintf(name, sizeof name, "oneDNN %s", impl);
    else
        snprintf(name, sizeof name, "OpenBLAS sgemm");
    return name;
}

/* ---- gemm_stats ---- */

static GemmStats stats;
static _Thread_local int depth; /* > 0 inside a counted product */

void gemm_stats_reset(void) { memset(&stats, 0, sizeof stats); }
GemmStats gemm_stats(void) { return stats; }

void gemm_stats_primitive(double seconds) {
#pragma omp atomic
    stats.primitives_made++;
#pragma omp atomic
    stats.primitive_seconds += seconds;
}

double gemm_stats_enter(void) { return depth++ ? 0.0 : omp_get_wtime(); }

void gemm_stats_leave(double t0, int M, int N, int K) {
    if (--depth) return;
    double s = omp_get_wtime() - t0, g = 2e-9 * M * N * K;
    if (omp_in_parallel()) {
#pragma omp atomic
        stats.region_seconds += s;
#pragma omp atomic
        stats.region_gflop += g;
    } else {
        stats.seconds += s;
        stats.gflop += g;
    }
}

static void gemm_f32_run(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc);

void gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    double t0 = gemm_stats_enter();
    gemm_f32_run(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    gemm_stats_leave(t0, M, N, K);
}

static void gemm_f32_run(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        /* BLAS leaves C scaled by beta; make that explicit for K = 0. */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0 ? 0 : beta * C[(size_t)i * ldc + j];
        return;
    }
    if (resolved() == GEMM_F32_ONEDNN && !omp_in_parallel() &&
        onednn_gemm(0, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 0)
        return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

void gemm_f32_batch(const GemmBatch *bt, int trans_a, int trans_b, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    CHECK(!omp_in_parallel() && bt->n[0] >= 1 && bt->n[1] >= 1 && bt->n[2] >= 1);
    int count = bt->n[0] * bt->n[1] * bt->n[2];
    if (M <= 0 || N <= 0) return;
    double t0 = gemm_stats_enter();
    int openblas = K <= 0 || resolved() != GEMM_F32_ONEDNN ||
                   onednn_gemm_batch(bt->n, bt->a, bt->b, bt->c, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                                     beta, C, ldc);
    if (openblas) {
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < count; i++) {
            int i2 = i % bt->n[2], i1 = i / bt->n[2] % bt->n[1], i0 = i / bt->n[2] / bt->n[1];
            long oa = i0 * bt->a[0] + i1 * bt->a[1] + i2 * bt->a[2], ob = i0 * bt->b[0] + i1 * bt->b[1] + i2 * bt->b[2];
            long oc = i0 * bt->c[0] + i1 * bt->c[1] + i2 * bt->c[2];
            gemm_f32_run(trans_a, trans_b, M, N, K, alpha, A + oa, lda, B + ob, ldb, beta, C + oc, ldc);
        }
    }
    gemm_stats_leave(t0, M * count, N, K);
    if (t0 > 0) { /* 0: nested in another counted product */
        stats.batch_seconds += omp_get_wtime() - t0;
        stats.batch_gflop += 2e-9 * M * count * N * K;
        stats.batch_calls++;
        stats.batch_openblas += openblas;
    }
}

void gemm_set_threads(int n) {
    if (n < 1) n = 1;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}
