/* tests/gpu/test_gpu_gemm.c — the GPU's products (gpu/gemm.h, on cuBLASLt) and the
 * bf16 rounding kernel (gpu/ops.h: gpu_round_bf16), on the GPU where there is one
 * and on the tests' emulated GPU and cuBLASLt otherwise (tests/machine/): every
 * transpose combination, odd sizes, row strides past the minimum, beta 0 (C filled
 * with NaN: not read) and 1, operands starting mid-row (alignments below cuBLASLt's
 * default 256 bytes), against the CPU's gemm_bf16 / gemm_f32 and against a float64
 * product of the same operands; the rounding bit for bit against ops.h's
 * f32_to_bf16 on ties, NaNs, overflow and subnormals; bad sizes refused by name; a
 * missing libcublasLt named; one plan per shape.
 *
 * Tolerances, per element, S = |alpha| sum_k |a_ik b_kj| + |beta c_ij| and
 * u = 2^-24: |gpu - float64| <= 2 (K + 1) u S (an fp32 sum of K exact bf16 products
 * is within (K - 1) u S of the exact sum, plus the scaling's two roundings; twice
 * that for the order of a GPU's blocked sums); |gpu - cpu| <= 4 (K + 1) u S (both
 * within the bound, in different orders). The fp32 products are held to the same
 * bounds, which TF32 (10 mantissa bits, an error near 2^-11 S) would be far outside. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gemm.h"
#include "gpu/ops.h"
#include "machine/gpu_emulator_blas.h"
#include "ops/gemm.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 23
#include "gpu_test.h"

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- the rounding kernel, bit for bit ---- */

static void check_round(void) {
    enum { ROWS = 7, COLS = 45, LDS = 51, LDD = 48 };
    static const uint32_t special[] = {
        0x3f808000u, 0x3f818000u, 0x3f808001u, 0xbf808000u, /* ties to even (down, up), just past, negative */
        0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7f812345u, /* NaNs: payload only in the low bits, quiet, both */
        0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x7f7f7fffu, /* infinities; rounding to Inf; just below */
        0x00000001u, 0x00008000u, 0x80018000u, 0x007fffffu, /* subnormals */
        0x00000000u, 0x80000000u, 0x3f800000u, 0x4049a000u, /* zeros, exact values */
    };
    float *src = malloc(sizeof(float) * ROWS * LDS);
    for (int i = 0; i < ROWS * LDS; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t u = (uint32_t)(seed >> 32); /* any bit pattern: every exponent, NaNs included */
        src[i] = i < (int)(sizeof special / sizeof special[0]) ? bits_f32(special[i]) : bits_f32(u);
    }
    uint16_t *got = malloc(2 * ROWS * LDD), *want = malloc(2 * ROWS * LDD);
    for (int i = 0; i < ROWS * LDD; i++) got[i] = want[i] = 0x1234; /* the strides' gaps stay as they are */
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) want[r * LDD + c] = f32_to_bf16(src[r * LDS + c]);
    CUdeviceptr d_src = upload(src, sizeof(float) * ROWS * LDS), d_dst = upload(got, 2 * ROWS * LDD);
    T_CHECK(!gpu_round_bf16(&dev, d_dst, d_src, ROWS, COLS, LDD, LDS, &err), "%s", err.msg);
    download(got, d_dst, 2 * ROWS * LDD);
    int diff = 0;
    for (int i = 0; i < ROWS * LDD; i++) diff += got[i] != want[i];
    printf("  round_bf16: %d of %d values differ from f32_to_bf16's bits\n", diff, ROWS * LDD);
    T_CHECK(diff == 0, "round_bf16: %d values differ from ops.h's f32_to_bf16", diff);
    T_CHECK(gpu_round_bf16(&dev, d_dst, d_src, ROWS, COLS, COLS - 1, LDS, &err) == -1 && strstr(err.msg, "ld_dst"),
            "a destination stride below cols is refused by name (%s)", err.msg);
    gpu_free(&dev, d_src), gpu_free(&dev, d_dst);
    free(src), free(got), free(want);
}

/* ---- the products ---- */

/* One product's operands in host memory, in the layout gemm_f32 reads. */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, off_a, off_b, off_c; /* off_*: elements before the view's start */
    float alpha, beta;
    int f32;                      /* fp32 operands (else bf16) */
    float *a, *b, *c;             /* values (bf16 ones exactly), views at off_* */
    uint16_t *a16, *b16;          /* the bf16 products' operands */
} Case;

static size_t rows_a(const Case *t) { return t->ta ? t->K : t->M; }
static size_t rows_b(const Case *t) { return t->tb ? t->N : t->K; }
static double at_a(const Case *t, int i, int k) { return t->ta ? t->a[(size_t)k * t->lda + i] : t->a[(size_t)i * t->lda + k]; }
static double at_b(const Case *t, int k, int j) { return t->tb ? t->b[(size_t)j * t->ldb + k] : t->b[(size_t)k * t->ldb + j]; }

static void case_make(Case *t) {
    size_t na = rows_a(t) * t->lda + t->off_a, nb = rows_b(t) * t->ldb + t->off_b, nc = (size_t)t->M * t->ldc + t->off_c;
    t->a = malloc(sizeof(float) * na), t->b = malloc(sizeof(float) * nb), t->c = malloc(sizeof(float) * nc);
    t->a16 = malloc(2 * na), t->b16 = malloc(2 * nb);
    for (size_t i = 0; i < na; i++) t->a[i] = t->f32 ? frand() : bf16_round(frand());
    for (size_t i = 0; i < nb; i++) t->b[i] = t->f32 ? frand() : bf16_round(frand());
    for (size_t i = 0; i < nc; i++) /* beta 0: C is NaN where the product writes (never read), 7 in the gaps */
        t->c[i] = t->beta != 0 ? frand() : ((i - t->off_c) % t->ldc < (size_t)t->N ? NAN : 7.0f);
    f32_to_bf16_n(t->a16, t->a, na), f32_to_bf16_n(t->b16, t->b, nb);
    t->a += t->off_a, t->b += t->off_b, t->c += t->off_c, t->a16 += t->off_a, t->b16 += t->off_b;
}

static void case_free(Case *t) {
    free(t->a - t->off_a), free(t->b - t->off_b), free(t->c - t->off_c);
    free(t->a16 - t->off_a), free(t->b16 - t->off_b);
}

/* The GPU's C for t (the whole [M, ldc] buffer, gaps included). */
static float *gpu_product(const Case *t) {
    size_t ea = t->f32 ? 4 : 2, na = rows_a(t) * t->lda + t->off_a, nb = rows_b(t) * t->ldb + t->off_b;
    size_t nc = (size_t)t->M * t->ldc + t->off_c;
    CUdeviceptr A = upload(t->f32 ? (const void *)(t->a - t->off_a) : (const void *)(t->a16 - t->off_a), ea * na);
    CUdeviceptr B = upload(t->f32 ? (const void *)(t->b - t->off_b) : (const void *)(t->b16 - t->off_b), ea * nb);
    CUdeviceptr C = upload(t->c - t->off_c, sizeof(float) * nc);
    CUdeviceptr a = A + ea * t->off_a, b = B + ea * t->off_b, c = C + sizeof(float) * t->off_c;
    int r = t->f32 ? gpu_gemm_f32(&dev, t->ta, t->tb, t->M, t->N, t->K, t->alpha, a, t->lda, b, t->ldb, t->beta, c,
                                  t->ldc, &err)
                   : gpu_gemm_bf16(&dev, t->ta, t->tb, t->M, t->N, t->K, t->alpha, a, t->lda, b, t->ldb, t->beta, c,
                                   t->ldc, &err);
    T_CHECK(r == 0, "%s", err.msg);
    float *out = malloc(sizeof(float) * nc);
    download(out, C, sizeof(float) * nc);
    gpu_free(&dev, A), gpu_free(&dev, B), gpu_free(&dev, C);
    return out + t->off_c;
}

/* The CPU's C for t, from the same operands. */
static float *cpu_product(const Case *t) {
    size_t nc = (size_t)t->M * t->ldc;
    float *c = malloc(sizeof(float) * nc);
    memcpy(c, t->c, sizeof(float) * nc);
    if (t->f32)
        gemm_f32(t->ta, t->tb, t->M, t->N, t->K, t->alpha, t->a, t->lda, t->b, t->ldb, t->beta, c, t->ldc);
    else
        gemm_bf16(t->ta, t->tb, t->M, t->N, t->K, t->alpha, (GemmBf16Operand){.h = t->a16, .ld = t->lda},
                  (GemmBf16Operand){.h = t->b16, .ld = t->ldb}, t->beta, c, t->ldc);
    return c;
}

/* got against float64 (bound 2 (K+1) u S) and the CPU (4 (K+1) u S), the gaps
 * between rows untouched; the worst error as a multiple of u S printed. */
static void case_compare(const char *what, const Case *t, const float *got, const float *cpu) {
    const double u = 0x1p-24;
    double worst_ref = 0, worst_cpu = 0;
    long bad_ref = 0, bad_cpu = 0, bad_gap = 0;
    for (int i = 0; i < t->M; i++) {
        for (int j = 0; j < t->N; j++) {
            double sum = 0, mag = 0, c0 = t->beta != 0 ? t->c[(size_t)i * t->ldc + j] : 0;
            for (int k = 0; k < t->K; k++) sum += at_a(t, i, k) * at_b(t, k, j), mag += fabs(at_a(t, i, k) * at_b(t, k, j));
            double want = t->alpha * sum + t->beta * c0, S = fabs(t->alpha) * mag + fabs(t->beta * c0);
            double g = got[(size_t)i * t->ldc + j], e_ref = fabs(g - want) / (u * S);
            double e_cpu = cpu ? fabs(g - cpu[(size_t)i * t->ldc + j]) / (u * S) : 0;
            if (!(e_ref <= 2.0 * (t->K + 1))) bad_ref++;
            if (!(e_cpu <= 4.0 * (t->K + 1))) bad_cpu++;
            worst_ref = isnan(g) ? INFINITY : fmax(worst_ref, e_ref), worst_cpu = isnan(g) ? INFINITY : fmax(worst_cpu, e_cpu);
        }
        for (int j = t->N; j < t->ldc; j++)
            bad_gap += memcmp(&got[(size_t)i * t->ldc + j], &t->c[(size_t)i * t->ldc + j], 4) != 0;
    }
    if (cpu)
        printf("  %-40s max error %6.2f u S (float64), %6.2f u S (cpu); bound %d, %d\n", what, worst_ref, worst_cpu,
               2 * (t->K + 1), 4 * (t->K + 1));
    else
        printf("  %-40s max error %6.2f u S (float64; no CPU GEMM in this build); bound %d\n", what, worst_ref,
               2 * (t->K + 1));
    T_CHECK(bad_ref == 0, "%s: %ld elements outside 2 (K+1) u S of the float64 product (worst %.3g u S)", what, bad_ref, worst_ref);
    T_CHECK(bad_cpu == 0, "%s: %ld elements outside 4 (K+1) u S of the CPU's (worst %.3g u S)", what, bad_cpu, worst_cpu);
    T_CHECK(bad_gap == 0, "%s: %ld values between C's rows were written", what, bad_gap);
}

static void check_case(Case t) {
    char what[96];
    snprintf(what, sizeof what, "%s %s%s beta %g ld %d %d %d%s", t.f32 ? "f32 " : "bf16", t.ta ? "A^T" : "A",
             t.tb ? " B^T" : " B", t.beta, t.lda, t.ldb, t.ldc, t.off_a || t.off_b || t.off_c ? " (mid-row)" : "");
    case_make(&t);
    float *got = gpu_product(&t), *cpu = cpu_product(&t);
    case_compare(what, &t, got, cpu);
    free(got - t.off_c), free(cpu);
    case_free(&t);
}

static void check_products(int f32) {
    enum { M = 37, N = 29, K = 53 };
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++)
            for (int beta = 0; beta <= 1; beta++) {
                Case t = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .f32 = f32, .alpha = beta ? 0.75f : 1.0f,
                          .beta = (float)beta};
                t.lda = (ta ? M : K) + 3, t.ldb = (tb ? K : N) + 5, t.ldc = N + 2;
                check_case(t);
            }
    /* the first shape again with one row stride longer each time: a plan is per
     * stride too (one kept for another stride would read the wrong elements) */
    for (int which = 0; which < 3; which++) {
        Case t = {.M = M, .N = N, .K = K, .f32 = f32, .alpha = 1.0f, .beta = 0.0f, .lda = K + 3, .ldb = N + 5,
                  .ldc = N + 2};
        *(which == 0 ? &t.lda : which == 1 ? &t.ldb : &t.ldc) += 1;
        check_case(t);
    }
    /* operands that start mid-row (2- and 4-byte alignments, promised to cuBLASLt as
     * such), after the same shape on 256-byte aligned ones, whose plan they cannot use */
    Case t = {.ta = 0, .tb = 1, .M = M, .N = N, .K = K, .f32 = f32, .alpha = 1.0f, .beta = 1.0f,
              .lda = K, .ldb = K + 1, .ldc = N};
    check_case(t);
    for (int which = 0; which < 3; which++) {
        Case v = t;
        *(which == 0 ? &v.off_a : which == 1 ? &v.off_b : &v.off_c) = 1 + 2 * which;
        check_case(v);
    }
}

/* A product of operands rounded on the GPU (gpu_round_bf16) against the CPU's
 * gemm_bf16 on the same fp32 values (which it rounds the same way). */
static void check_rounded_operands(void) {
    enum { M = 19, N = 24, K = 33 };
    Case t = {.ta = 0, .tb = 1, .M = M, .N = N, .K = K, .f32 = 1, .alpha = 1.0f, .beta = 0.0f, .lda = K, .ldb = K, .ldc = N};
    case_make(&t); /* fp32 values; their bf16 roundings in a16, b16 */
    CUdeviceptr A = upload(t.a, sizeof(float) * M * K), B = upload(t.b, sizeof(float) * N * K), A16, B16, C;
    T_CHECK(!gpu_alloc(&dev, &A16, 2 * M * K, &err) && !gpu_alloc(&dev, &B16, 2 * N * K, &err) &&
                !gpu_alloc(&dev, &C, sizeof(float) * M * N, &err),
            "%s", err.msg);
    T_CHECK(!gpu_round_bf16(&dev, A16, A, M, K, K, K, &err) && !gpu_round_bf16(&dev, B16, B, N, K, K, K, &err) &&
                !gpu_gemm_bf16(&dev, 0, 1, M, N, K, 1.0f, A16, K, B16, K, 0.0f, C, N, &err),
            "%s", err.msg);
    float *got = malloc(sizeof(float) * M * N), *cpu = malloc(sizeof(float) * M * N);
    download(got, C, sizeof(float) * M * N);
    gemm_bf16(0, 1, M, N, K, 1.0f, (GemmBf16Operand){.f = t.a, .ld = K}, (GemmBf16Operand){.f = t.b, .ld = K}, 0.0f,
              cpu, N);
    t.f32 = 0; /* compare as the bf16 product of the rounded values */
    for (int i = 0; i < M * K; i++) t.a[i] = bf16_to_f32(t.a16[i]);
    for (int i = 0; i < N * K; i++) t.b[i] = bf16_to_f32(t.b16[i]);
    case_compare("bf16 from operands rounded on GPU", &t, got, cpu);
    gpu_free(&dev, A), gpu_free(&dev, B), gpu_free(&dev, A16), gpu_free(&dev, B16), gpu_free(&dev, C);
    free(got), free(cpu);
    case_free(&t);
}

/* Sizes a product cannot have, refused by name before cuBLASLt sees them; empty
 * products leave C alone. */
static void check_bad_sizes(void) {
    CUdeviceptr p;
    float sentinel = 5.0f, back = 0;
    T_CHECK(!gpu_alloc(&dev, &p, 4096, &err) && !gpu_put(&dev, p, &sentinel, 4, &err), "%s", err.msg);
    T_CHECK(gpu_gemm_bf16(&dev, 0, 0, 4, 4, 8, 1, p, 7, p, 4, 0, p, 4, &err) == -1 && strstr(err.msg, "lda 7"),
            "lda below K refused by name (%s)", err.msg);
    T_CHECK(gpu_gemm_f32(&dev, 0, 1, 4, 6, 8, 1, p, 8, p, 6, 0, p, 6, &err) == -1 && strstr(err.msg, "ldb 6"),
            "ldb below K for B^T refused by name (%s)", err.msg);
    T_CHECK(gpu_gemm_bf16(&dev, 1, 0, 4, 6, 8, 1, p, 4, p, 6, 0, p, 5, &err) == -1 && strstr(err.msg, "ldc 5"),
            "ldc below N refused by name (%s)", err.msg);
    T_CHECK(gpu_gemm_bf16(&dev, 0, 0, 4, 4, 0, 1, p, 4, p, 4, 0, p, 4, &err) == -1 && strstr(err.msg, "K 0"),
            "K = 0 refused by name (%s)", err.msg);
    T_CHECK(gpu_gemm_bf16(&dev, 0, 0, 0, 4, 8, 1, p, 8, p, 4, 0, p, 4, &err) == 0, "M = 0: nothing to do (%s)", err.msg);
    download(&back, p, 4);
    T_CHECK(back == sentinel, "an empty product wrote C (%g)", back);
    gpu_free(&dev, p);
}

/* One plan per shape: the same product again asks cuBLASLt's heuristic nothing. */
static void check_plans(void) {
    enum { M = 8, N = 16, K = 32 };
    CUdeviceptr a, b, c;
    T_CHECK(!gpu_alloc(&dev, &a, 2 * M * K, &err) && !gpu_alloc(&dev, &b, 2 * K * N, &err) &&
                !gpu_alloc(&dev, &c, 4 * M * N, &err),
            "%s", err.msg);
    int plans = gpu_gemm_plans(&dev);
    long asked = gpu_emulator_blas_heuristic_calls();
    for (int rep = 0; rep < 3; rep++)
        T_CHECK(!gpu_gemm_bf16(&dev, 0, 0, M, N, K, 1, a, K, b, N, 0, c, N, &err), "%s", err.msg);
    T_CHECK(gpu_gemm_plans(&dev) == plans + 1, "three calls of one new shape made %d plans", gpu_gemm_plans(&dev) - plans);
    if (emulated)
        T_CHECK(gpu_emulator_blas_heuristic_calls() == asked + 1, "three calls of one shape asked the heuristic %ld times",
                gpu_emulator_blas_heuristic_calls() - asked);
    gpu_free(&dev, a), gpu_free(&dev, b), gpu_free(&dev, c);
}

static void check_missing_library(void);

static void check_all(void) {
    printf("%s, compute capability %d.%d, %d multiprocessors\n", dev.name, dev.cc_major, dev.cc_minor, dev.sms);
    check_round();
    check_products(0);
    check_products(1);
    check_rounded_operands();
    check_bad_sizes();
    check_plans();
    gpu_close(&dev);
    if (emulated) check_missing_library();
    if (emulated) T_CHECK(gpu_emulator_blas_live() == 0, "%d cuBLASLt objects outlive gpu_close", gpu_emulator_blas_live());
}

static int no_blas(CublasLtApi *api, char *why, size_t n) {
    memset(api, 0, sizeof *api);
    snprintf(why, n, "libcublasLt.so.13: cannot open shared object file (the test's)");
    return -1;
}

/* A product where cuBLASLt cannot be opened says so with the reason: a stand-in
 * that fails, then (where this machine has no libcublasLt) the real dlopen, whose
 * reason names the libraries tried. */
static void check_missing_library(void) {
    CublasLtApi api;
    char why[512];
    int absent = cublaslt_api_open(&api, why, sizeof why) != 0;
    if (absent)
        T_CHECK(strstr(why, "libcublasLt.so.13") && strstr(why, "libcublasLt.so.12"), "no reason naming the libraries: %s",
                why);
    else
        cublaslt_api_close(&api); /* CUDA's libraries are here, without a GPU: the stand-in is used */
    char gwhy[256];
    gpu_set_blas(absent ? NULL : no_blas);
    T_CHECK(gpu_open(&dev, gwhy, sizeof gwhy, &err) == 1, "the emulated GPU did not open: %s%s", gwhy, err.msg);
    CUdeviceptr p;
    T_CHECK(!gpu_alloc(&dev, &p, 1024, &err), "%s", err.msg);
    int r = gpu_gemm_f32(&dev, 0, 0, 2, 2, 2, 1, p, 2, p, 2, 0, p + 512, 2, &err);
    printf("  without libcublasLt: %s\n", err.msg);
    T_CHECK(r == -1 && strstr(err.msg, "cuBLASLt") && strstr(err.msg, "libcublasLt.so.13"),
            "a product without libcublasLt: %d, %s", r, err.msg);
    gpu_free(&dev, p);
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_gemm", check_all);
}
