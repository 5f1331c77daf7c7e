/* ops/gemm_bf16.c — gemm_bf16 (see gemm.h): products of bf16 operands summed in
 * fp32, on oneDNN's bf16 matmul where this CPU has bf16 instructions (ops/onednn.c),
 * else on gemm_f32 over the widened operands. Not here: fp32 products (gemm.c). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "ops/gemm.h"
#include "ops/onednn.h"
#include "ops/ops.h"

/* ---- conversion buffers: kept between calls, grown to the largest operand ---- */

static struct {
    void *p;
    size_t bytes;
} bufs[3]; /* gemm_bf16's two operands, and gemm_bf16_round's */

static void *buf(int i, size_t bytes) {
    if (bufs[i].bytes < bytes) {
        free(bufs[i].p);
        bufs[i].p = xaligned(bytes);
        bufs[i].bytes = bytes;
    }
    return bufs[i].p;
}

/* The operand's rows x cols as contiguous fp32 holding bf16 values. */
static const float *operand_f32(int slot, GemmBf16Operand x, int rows, int cols) {
    float *out = buf(slot, sizeof(float) * (size_t)rows * cols);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        float *o = out + (size_t)r * cols;
        if (x.f)
            bf16_round_n(o, x.f + (size_t)r * x.ld, (size_t)cols);
        else
            bf16_to_f32_n(o, x.h + (size_t)r * x.ld, (size_t)cols);
    }
    return out;
}

/* The operand in bf16: h itself, or f rounded into a contiguous buffer (*ld set). */
static const uint16_t *operand_bf16(int slot, GemmBf16Operand x, int rows, int cols, int *ld) {
    if (x.h) {
        *ld = x.ld;
        return x.h;
    }
    uint16_t *out = buf(slot, sizeof(uint16_t) * (size_t)rows * cols);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) f32_to_bf16_n(out + (size_t)r * cols, x.f + (size_t)r * x.ld, (size_t)cols);
    *ld = cols;
    return out;
}

GemmBf16Operand gemm_bf16_round(const float *x, int rows, int cols, int ld) {
    int ldo;
    return (GemmBf16Operand){.h = operand_bf16(2, (GemmBf16Operand){.f = x, .ld = ld}, rows, cols, &ldo), .ld = ldo};
}

GemmBf16Operand gemm_bf16_round_in_place(float *x, int rows, int cols, int ld) {
    CHECK(!omp_in_parallel() && ld >= cols);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        float *row = x + (size_t)r * ld;
        uint16_t tmp[512];
        /* a piece's bf16 bytes land on floats of this piece or earlier ones, read already */
        for (int c = 0; c < cols; c += 512) {
            int n = cols - c < 512 ? cols - c : 512;
            f32_to_bf16_n(tmp, row + c, (size_t)n);
            memcpy((char *)row + sizeof(uint16_t) * c, tmp, sizeof(uint16_t) * n);
        }
    }
    return (GemmBf16Operand){.h = (const uint16_t *)x, .ld = 2 * ld};
}

/* ---- backend choice ---- */

static int native = -1;           /* gemm_bf16_native(), once known */
static char native_impl[64];      /* oneDNN's name for its bf16 matmul here */
static GemmBf16Backend chosen = GEMM_BF16_AUTO;

int gemm_bf16_native(void) {
    if (native < 0) native = onednn_impl(1, native_impl, sizeof native_impl) && strncmp(native_impl, "ref", 3) != 0;
    return native;
}

int gemm_bf16_use(GemmBf16Backend b) {
    if (b == GEMM_BF16_ONEDNN && !gemm_bf16_native()) return -1;
    chosen = b;
    return 0;
}

static GemmBf16Backend resolved(void) {
    if (chosen != GEMM_BF16_AUTO) return chosen;
    return gemm_bf16_native() ? GEMM_BF16_ONEDNN : GEMM_BF16_WIDEN;
}

const char *gemm_bf16_backend_name(void) {
    static char name[96];
    switch (resolved()) {
    case GEMM_BF16_ONEDNN: snprintf(name, sizeof name, "oneDNN %s", native_impl); break;
    case GEMM_BF16_ONEDNN_F32: snprintf(name, sizeof name, "oneDNN fp32 on bf16 values"); break;
    default: snprintf(name, sizeof name, "fp32 GEMM on bf16 values (no bf16 matmul on this CPU)"); break;
    }
    return name;
}

static void gemm_bf16_run(int trans_a, int trans_b, int M, int N, int K, float alpha, GemmBf16Operand A,
                          GemmBf16Operand B, float beta, float *C, int ldc);

void gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, GemmBf16Operand A, GemmBf16Operand B,
               float beta, float *C, int ldc) {
    double t0 = gemm_stats_enter();
    gemm_bf16_run(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, ldc);
    gemm_stats_leave(t0, M, N, K);
}

static void gemm_bf16_run(int trans_a, int trans_b, int M, int N, int K, float alpha, GemmBf16Operand A,
                          GemmBf16Operand B, float beta, float *C, int ldc) {
    CHECK((!A.f) != (!A.h) && (!B.f) != (!B.h) && (beta == 0.0f || beta == 1.0f) && !omp_in_parallel());
    if (M <= 0 || N <= 0 || K <= 0) { /* nothing to multiply: gemm_f32 scales C by beta */
        gemm_f32(trans_a, trans_b, M, N, K, alpha, NULL, 1, NULL, 1, beta, C, ldc);
        return;
    }
    int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K, b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    GemmBf16Backend b = resolved();
    if (b == GEMM_BF16_ONEDNN) {
        int lda, ldb;
        const uint16_t *a = operand_bf16(0, A, a_rows, a_cols, &lda), *bb = operand_bf16(1, B, b_rows, b_cols, &ldb);
        if (onednn_gemm(1, trans_a, trans_b, M, N, K, alpha, a, lda, bb, ldb, beta, C, ldc) == 0) return;
    } /* else, or where oneDNN has only its reference code for this shape: the widened operands */
    const float *a = operand_f32(0, A, a_rows, a_cols), *bb = operand_f32(1, B, b_rows, b_cols);
    if (b != GEMM_BF16_ONEDNN_F32 || onednn_gemm(0, trans_a, trans_b, M, N, K, alpha, a, a_cols, bb, b_cols, beta, C, ldc))
        gemm_f32(trans_a, trans_b, M, N, K, alpha, a, a_cols, bb, b_cols, beta, C, ldc);
}
