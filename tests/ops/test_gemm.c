/* tests/ops/test_gemm.c — gemm_f32 on each backend (OpenBLAS, oneDNN) and gemm_bf16
 * with the bf16 linear layers (mixed precision), against double references.
 *
 * gemm_f32: Σ_k a b in double, within (K + 2) · 2^-23 · Σ|a b| (fp32 products and
 * sums), for every transpose, row strides wider than the rows, alpha and beta,
 * K = 0, and outside and inside a parallel region (which is always OpenBLAS).
 *
 * gemm_bf16: the reference is Σ_k bf16(a) · bf16(b) in double.
 *
 * The reference is Σ_k bf16(a) · bf16(b) in double. A bf16 value and the product
 * of two are exact in fp32, so the only error left is fp32 summation: the bound is
 * |got - want| <= K · 2^-23 · Σ_k |a b| (+ the beta term's rounding). Skipping the
 * rounding of an fp32 operand (or rounding it the wrong way) moves the result by
 * about 2^-9 relative, far outside it. Every way this CPU can run is checked: the
 * widened operands on oneDNN's fp32 matmul (its layouts, scales, sum post-op and
 * primitive cache) and on OpenBLAS, the native path on the tests' emulated bf16 matmul
 * (tests/machine: the operands rounded into buffers, widened sums — the widened
 * path's bits, checked bit for bit), and the machine's own bf16 matmul where it has
 * one. And bf16_transpose (the LM head's dz^T for its weight gradient's product), bit
 * for bit, its destination's bounds kept. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "machine/bf16_matmul.h"
#include "ops/gemm.h"
#include "ops/onednn.h"
#include "ops/ops.h"
#include "testutil.h"

static uint64_t seed = 7;

/* The ways gemm_bf16 runs: the widened path on gemm_f32's oneDNN fp32 matmul or on
 * OpenBLAS; the native path on the tests' emulated bf16 matmul; or on this machine's
 * own (as make test-isa may have set it: tests/machine). */
typedef enum { WIDEN_ONEDNN, WIDEN_OPENBLAS, EMULATED, NATIVE } Way;
static GemmBf16Matmul machine; /* the machine's, as main found it */

/* 0, or -1 where the way cannot run here (NATIVE without a bf16 matmul). */
static int use_way(Way w) {
    gemm_f32_use(w == WIDEN_OPENBLAS ? GEMM_F32_OPENBLAS : GEMM_F32_AUTO);
    gemm_bf16_set_matmul(w == EMULATED ? test_bf16_matmul : machine);
    return gemm_bf16_use(w == WIDEN_ONEDNN || w == WIDEN_OPENBLAS ? GEMM_BF16_WIDEN : GEMM_BF16_ONEDNN);
}

static void use_auto(void) {
    gemm_f32_use(GEMM_F32_AUTO);
    gemm_bf16_set_matmul(machine);
    gemm_bf16_use(GEMM_BF16_AUTO);
}

static float frand(void) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void check_rounding(void) {
    /* ties go to the even neighbour; above half rounds up; NaN stays NaN; overflow gives Inf */
    float one_plus_half_ulp, v;
    uint32_t u = 0x3f808000u; /* 1 + 2^-8: exactly between 1 + 2^-7·0 and 1 + 2^-7 */
    memcpy(&one_plus_half_ulp, &u, 4);
    T_CHECK(f32_to_bf16(one_plus_half_ulp) == 0x3f80, "tie to even (down) gave %04x", f32_to_bf16(one_plus_half_ulp));
    u = 0x3f818000u; /* between 0x3f81 and 0x3f82: even is 0x3f82 */
    memcpy(&v, &u, 4);
    T_CHECK(f32_to_bf16(v) == 0x3f82, "tie to even (up) gave %04x", f32_to_bf16(v));
    u = 0x3f808001u;
    memcpy(&v, &u, 4);
    T_CHECK(f32_to_bf16(v) == 0x3f81, "above half gave %04x", f32_to_bf16(v));
    u = 0x7f7fffffu; /* FLT_MAX rounds past the largest bf16 */
    memcpy(&v, &u, 4);
    T_CHECK(f32_to_bf16(v) == 0x7f80, "FLT_MAX gave %04x", f32_to_bf16(v));
    T_CHECK(isnan(bf16_round(NAN)), "NaN lost");
    uint32_t top_nan = 0x7fffffffu; /* rounding up would carry it into -0 */
    memcpy(&v, &top_nan, 4);
    T_CHECK(f32_to_bf16(v) == 0x7fff, "NaN 7fffffff gave %04x", f32_to_bf16(v));
    T_CHECK(bf16_round(-INFINITY) == -INFINITY && bf16_round(0.0f) == 0.0f, "Inf or 0 changed");
    T_CHECK(bf16_round(3.0f) == 3.0f && bf16_round(1.00390625f) == 1.0f, "exact or tie value wrong");
}

/* f32_split / f32_join (mixed precision's master weights): for every upper half and
 * a set of lower halves (the ties, their neighbours, the ends, some others): the
 * join gives the value back bit for bit (a NaN as a NaN); hi is f32_to_bf16's
 * rounding except at a tie, where it goes away from zero. */
static void check_split(void) {
    const uint32_t lows[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234, 0x9abc, 0x4000, 0xc000};
    long bad_join = 0, bad_hi = 0, bad_nan = 0, ties = 0;
    for (uint32_t top = 0; top < 65536; top++)
        for (size_t j = 0; j < sizeof lows / sizeof lows[0]; j++) {
            uint32_t u = top << 16 | lows[j], back;
            float x, y;
            memcpy(&x, &u, 4);
            uint16_t hi, lo;
            f32_split(x, &hi, &lo);
            y = f32_join(hi, lo);
            memcpy(&back, &y, 4);
            if (isnan(x)) {
                bad_nan += !isnan(y) || !isnan(bf16_to_f32(hi));
                continue;
            }
            bad_join += back != u;
            uint16_t want = f32_to_bf16(x);
            if (lows[j] == 0x8000) { /* a tie: away from zero, the upper neighbour in magnitude */
                ties++;
                want = (uint16_t)(top + 1);
            }
            bad_hi += hi != want;
        }
    T_CHECK(!bad_join, "f32_join(f32_split(x)) != x for %ld values", bad_join);
    T_CHECK(!bad_hi, "f32_split's upper half is not x rounded (ties away from zero) for %ld values", bad_hi);
    T_CHECK(!bad_nan, "f32_split lost a NaN %ld times", bad_nan);
    T_CHECK(ties > 60000, "only %ld ties checked", ties);
    /* the n-wide forms are the scalar ones */
    float xs[37], ys[37];
    uint16_t his[37], los[37];
    for (int i = 0; i < 37; i++) xs[i] = frand() * 1e3f;
    f32_split_n(his, los, xs, 37);
    f32_join_n(ys, his, los, 37);
    T_CHECK(!memcmp(xs, ys, sizeof xs), "f32_split_n / f32_join_n lose bits");
}

typedef struct {
    int ta, tb, M, N, K, pad_a, pad_b, pad_c, a_half, b_half;
    float alpha, beta;
    int a_exact; /* gemm_f32_b16: A fp32 read as it is (b_half set) */
} Case;

static float **keep_C; /* when set, run_case leaves its C there (to be freed) */

/* Runs one case on the current backend; returns 1 when within the bound. */
static int run_case(const Case *c, const char *backend) {
    int ar = c->ta ? c->K : c->M, ac = c->ta ? c->M : c->K, br = c->tb ? c->N : c->K, bc = c->tb ? c->K : c->N;
    int lda = ac + c->pad_a, ldb = bc + c->pad_b, ldc = c->N + c->pad_c;
    float *af = malloc(sizeof(float) * ar * lda), *bf = malloc(sizeof(float) * br * ldb);
    uint16_t *ah = malloc(sizeof(uint16_t) * ar * lda), *bh = malloc(sizeof(uint16_t) * br * ldb);
    float *C = malloc(sizeof(float) * c->M * ldc), *C0 = malloc(sizeof(float) * c->M * ldc);
    for (int i = 0; i < ar * lda; i++) af[i] = frand() * 3, ah[i] = f32_to_bf16(frand());
    for (int i = 0; i < br * ldb; i++) bf[i] = frand() * 3, bh[i] = f32_to_bf16(frand());
    for (int i = 0; i < c->M * ldc; i++) C0[i] = C[i] = frand();
    GemmBf16Operand A = c->a_half ? (GemmBf16Operand){.h = ah, .ld = lda} : (GemmBf16Operand){.f = af, .ld = lda};
    GemmBf16Operand B = c->b_half ? (GemmBf16Operand){.h = bh, .ld = ldb} : (GemmBf16Operand){.f = bf, .ld = ldb};
    if (c->a_exact)
        gemm_f32_b16(c->ta, c->tb, c->M, c->N, c->K, c->alpha, af, lda, bh, ldb, c->beta, C, ldc);
    else
        gemm_bf16(c->ta, c->tb, c->M, c->N, c->K, c->alpha, A, B, c->beta, C, ldc);
    int ok = 1;
    for (int i = 0; i < c->M && ok; i++)
        for (int j = 0; j < c->N && ok; j++) {
            double s = 0, mag = 0;
            for (int k = 0; k < c->K; k++) {
                size_t ia = c->ta ? (size_t)k * lda + i : (size_t)i * lda + k;
                size_t ib = c->tb ? (size_t)j * ldb + k : (size_t)k * ldb + j;
                double a = c->a_exact ? af[ia] : c->a_half ? bf16_to_f32(ah[ia]) : bf16_round(af[ia]);
                double b = c->b_half ? bf16_to_f32(bh[ib]) : bf16_round(bf[ib]);
                s += a * b;
                mag += fabs(a * b);
            }
            double want = c->alpha * s + c->beta * C0[(size_t)i * ldc + j];
            double tol = (c->K + 2) * 0x1p-23 * (fabs(c->alpha) * mag + fabs(C0[(size_t)i * ldc + j])) + 1e-30;
            double got = C[(size_t)i * ldc + j];
            if (!(fabs(got - want) <= tol)) {
                T_CHECK(0, "%s ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g: C[%d,%d] = %.9g, want %.9g (tol %.3g)",
                        backend, c->ta, c->tb, c->M, c->N, c->K, c->alpha, c->beta, i, j, got, want, tol);
                ok = 0;
            }
        }
    for (int i = 0; i < c->M && ok; i++) /* the padding between rows of C is untouched */
        for (int j = c->N; j < ldc; j++) ok &= C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
    T_CHECK(ok, "%s: C's padding was written", backend);
    if (keep_C) *keep_C = C, C = NULL;
    free(af), free(bf), free(ah), free(bh), free(C), free(C0);
    return ok;
}

static void check_backend(Way w, const char *name) {
    T_CHECK(use_way(w) == 0, "backend %s refused", name);
    int n = 0;
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++)
            for (int halves = 0; halves < 4; halves++) {
                Case c = {ta, tb, 13 + halves, 17 + 3 * ta, 37 + 5 * tb, halves & 1 ? 3 : 0, halves & 2 ? 0 : 5,
                          tb ? 2 : 0, halves & 1, halves >> 1, halves == 2 ? 0.7f : 1.0f, (float)(halves & 1), 0};
                n += run_case(&c, name);
            }
    Case big = {0, 1, 33, 130, 300, 0, 0, 0, 0, 1, 1.0f, 1.0f, 0}; /* longer sums: the fp32 bound must hold */
    n += run_case(&big, name);
    Case empty = {0, 0, 4, 5, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f, 0}; /* K = 0: C = beta C */
    n += run_case(&empty, name);
    T_CHECK(n == 18, "%s: %d of 18 cases within the bound", name, n);
}

/* Operands past the widened path's block (2 Mi values): split along N, along M, and
 * a K past 8192 split with its blocks summed into C (beta 0: the first block's
 * product replaces C's values); gemm_f32_b16 likewise, A read unrounded. Where the
 * backend is oneDNN's bf16 matmul only gemm_f32_b16 takes the widened path. */
static void check_blocks(Way w, const char *name) {
    T_CHECK(use_way(w) == 0, "backend %s refused", name);
    Case cases[] = {
        {0, 1, 5, 70001, 64, 0, 3, 0, 0, 1, 1.0f, 1.0f, 0},     /* B 4.5 Mi values: three blocks of N */
        {1, 0, 6, 220, 20011, 2, 0, 1, 0, 0, 0.5f, 0.0f, 0},    /* B 4.4 Mi: K in three blocks */
        {0, 0, 4100, 9, 1100, 0, 0, 0, 1, 0, 1.0f, 1.0f, 0},    /* A 4.5 Mi: three blocks of M */
        {1, 1, 4100, 9, 1100, 1, 0, 0, 0, 1, 1.0f, 0.0f, 0},    /* the same, A transposed */
        {1, 1, 44, 44, 100000, 0, 0, 0, 0, 0, 1.0f, 1.0f, 0},   /* both 4.4 Mi: K split, A widened per block */
        {0, 1, 3, 70001, 64, 0, 0, 0, 0, 1, 1.0f, 0.0f, 1},     /* gemm_f32_b16: the LM head's logits */
        {0, 0, 3, 220, 20011, 0, 0, 0, 0, 1, 1.0f, 0.0f, 1},    /* gemm_f32_b16: E_p[W], K = vocab */
        {1, 0, 9, 31, 17, 2, 1, 0, 0, 1, 1.0f, 1.0f, 1},        /* gemm_f32_b16, small, A transposed */
    };
    int n = 0, count = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < count; i++) n += run_case(&cases[i], name);
    T_CHECK(n == count, "%s: %d of %d blocked cases within the bound", name, n, count);
}

/* The emulated bf16 matmul (the operands rounded into buffers as for a bf16 matmul)
 * gives the widened path's bits, on the small cases, the blocked ones and a K = 0 one: the same inputs (the
 * generator's state replayed), C compared bit for bit. */
static void check_rounded_is_widened(void) {
    Case cases[] = {
        {0, 1, 13, 17, 37, 0, 5, 2, 0, 0, 1.0f, 0.0f, 0}, {1, 0, 14, 20, 42, 3, 0, 0, 1, 0, 0.7f, 1.0f, 0},
        {1, 1, 15, 20, 42, 0, 5, 2, 0, 1, 1.0f, 1.0f, 0}, {0, 1, 5, 70001, 64, 0, 3, 0, 0, 1, 1.0f, 1.0f, 0},
        {1, 0, 6, 220, 20011, 2, 0, 1, 0, 0, 0.5f, 0.0f, 0}, {0, 0, 4100, 9, 1100, 0, 0, 0, 1, 0, 1.0f, 1.0f, 0},
        {1, 1, 44, 44, 100000, 0, 0, 0, 0, 0, 1.0f, 1.0f, 0}, {0, 0, 4, 5, 0, 0, 0, 0, 0, 0, 1.0f, 0.0f, 0},
    };
    int same = 0, count = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < count; i++) {
        const Case *c = &cases[i];
        uint64_t at = seed;
        float *C[2];
        for (int k = 0; k < 2; k++) {
            use_way(k ? EMULATED : WIDEN_ONEDNN);
            seed = at;
            keep_C = &C[k];
            run_case(c, k ? "rounded" : "widened");
            keep_C = NULL;
        }
        same += !memcmp(C[0], C[1], sizeof(float) * c->M * (c->N + c->pad_c));
        free(C[0]), free(C[1]);
    }
    T_CHECK(same == count, "the emulated bf16 matmul gives the widened bits in %d of %d cases", same, count);
    use_auto();
}

/* More shapes than the primitive cache holds, then the first again: an evicted
 * primitive is made anew, and a cached one must belong to its own shape (with
 * shape families off, where they are on). */
static void check_cache(void) {
    use_way(WIDEN_ONEDNN);
    onednn_families_off(1); /* where fp32 products run per family, a shape's own primitives */
    int ok = 0;
    for (int i = 0; i < 110; i++) {
        Case c = {0, 1, 1 + i % 7, 2 + i, 3 + i % 5, 0, 0, 0, 0, 1, 1.0f, (float)(i & 1), 0};
        ok += run_case(&c, "oneDNN fp32 (cache)");
    }
    Case first = {0, 1, 1, 2, 3, 0, 0, 0, 0, 1, 1.0f, 0.0f, 0};
    ok += run_case(&first, "oneDNN fp32 (evicted shape)");
    onednn_families_off(0);
    T_CHECK(ok == 111, "%d of 111 cache cases right", ok);
}

/* The vector forms (f32_to_bf16_n, bf16_round_n, bf16_to_f32_n) and gemm_bf16_round
 * give the scalar conversion's bits: NaNs (payload kept, or quieted), ties both ways,
 * overflow to Inf, subnormals, on lengths that leave a vector tail; a strided operand. */
static void check_vector_rounding(void) {
    enum { N = 77 };
    const uint32_t special[] = {0x7fc00000u, 0x7f800001u, 0xff810000u, 0x7f80ffffu, 0x3f808000u, 0x3f818000u,
                                0x3f808001u, 0x7f7fffffu, 0x00000001u, 0x807fffffu, 0x00008000u, 0x00018000u,
                                0x7f800000u, 0xff800000u, 0x80000000u};
    float x[N], r[N], w[N];
    uint16_t h[N];
    for (int i = 0; i < N; i++) {
        frand();
        uint32_t u = i < (int)(sizeof special / sizeof special[0]) ? special[i] : (uint32_t)(seed >> 32);
        memcpy(&x[i], &u, 4); /* any bits: NaNs, subnormals and Infs among them */
    }
    int bad = 0;
    for (int n = 0; n <= N; n += 11) {
        f32_to_bf16_n(h, x, (size_t)n);
        bf16_round_n(r, x, (size_t)n);
        bf16_to_f32_n(w, h, (size_t)n);
        for (int i = 0; i < n; i++) {
            float want = bf16_round(x[i]);
            bad += h[i] != f32_to_bf16(x[i]) || memcmp(&r[i], &want, 4) || memcmp(&w[i], &want, 4);
        }
    }
    T_CHECK(bad == 0, "%d vector conversions differ from the scalar ones", bad);
    /* rows of 13 every 14 floats: rounded into the caller's 5 x 13 values for a bf16
     * matmul (the value after them untouched); where the operands are widened, x itself
     * (rounded as it is widened), dst untouched */
    for (Way w = WIDEN_ONEDNN; w <= NATIVE; w++) {
        if (use_way(w)) continue; /* no bf16 matmul on this CPU */
        uint16_t dst[5 * 13 + 1];
        for (int i = 0; i <= 5 * 13; i++) dst[i] = 0xabcd;
        GemmBf16Operand o = gemm_bf16_round(x + 3, 5, 13, 14, dst);
        if (w == EMULATED || w == NATIVE) {
            bad = o.ld != 13 || o.h != dst || o.f || dst[5 * 13] != 0xabcd;
            for (int i = 0; !bad && i < 5; i++)
                for (int j = 0; j < 13; j++) bad += o.h[i * 13 + j] != f32_to_bf16(x[3 + i * 14 + j]);
        } else {
            bad = o.f != x + 3 || o.ld != 14 || o.h;
            for (int i = 0; i <= 5 * 13; i++) bad += dst[i] != 0xabcd;
        }
        T_CHECK(bad == 0, "gemm_bf16_round (way %d): %d values or the layout wrong", (int)w, bad);
    }
    use_auto();
    /* in place: rows of 1100 (row 0 in three pieces of at most 512) every 1103 floats,
     * packed from the start; 200 rows: waves of 1, 2, .. 72 rows, the larger in parallel */
    enum { R = 200, Cw = 1100, LD = 1103 };
    float *y = malloc(sizeof(float) * R * LD), *y0 = malloc(sizeof(float) * R * LD);
    for (int i = 0; i < R * LD; i++) y[i] = y0[i] = frand() * 3.0f;
    GemmBf16Operand p = gemm_bf16_round_in_place(y, R, Cw, LD);
    bad = p.ld != Cw || p.h != (const uint16_t *)y || p.f;
    for (int i = 0; !bad && i < R; i++)
        for (int j = 0; j < Cw; j++) bad += p.h[(size_t)i * Cw + j] != f32_to_bf16(y0[(size_t)i * LD + j]);
    T_CHECK(bad == 0, "gemm_bf16_round_in_place: %d values or the layout wrong", bad);
    free(y), free(y0);
}

/* gemm_stats: one product's FLOPs, counted once when gemm_bf16 runs gemm_f32 inside,
 * and apart when made inside a parallel region. */
static void check_stats(void) {
    enum { M = 5, N = 7, K = 9 };
    float A[M * K], B[K * N], C[M * N];
    for (int i = 0; i < M * K; i++) A[i] = frand();
    for (int i = 0; i < K * N; i++) B[i] = frand();
    use_way(WIDEN_ONEDNN);
    gemm_stats_reset();
    gemm_f32(0, 0, M, N, K, 1, A, K, B, N, 0, C, N);
    gemm_bf16(0, 0, M, N, K, 1, (GemmBf16Operand){.f = A, .ld = K}, (GemmBf16Operand){.f = B, .ld = N}, 0, C, N);
    int team = 0;
#pragma omp parallel num_threads(2)
    {
        float Ct[M * N];
#pragma omp single
        team = omp_get_num_threads();
        gemm_f32(0, 0, M, N, K, 1, A, K, B, N, 0, Ct, N);
    }
    GemmStats g = gemm_stats();
    double one = 2e-9 * M * N * K;
    T_CHECK(fabs(g.gflop - 2 * one) < 1e-15 && g.seconds > 0, "stats: %g GFLOP (want %g), %g s", g.gflop, 2 * one,
            g.seconds);
    T_CHECK(fabs(g.region_gflop - team * one) < 1e-15 && g.region_seconds > 0, "stats in parallel regions: %g GFLOP",
            g.region_gflop);
    gemm_stats_reset();
    T_CHECK(gemm_stats().gflop == 0 && gemm_stats().region_seconds == 0, "reset");
}

/* matmul_*_bf16 on the widening backend equal matmul_* on the rounded operands bit for
 * bit: the same gemm_f32 call on the same values (bias included). */
static void check_linear(void) {
    use_way(WIDEN_ONEDNN);
    int N = 9, I = 24, O = 11;
    float in[N * I], W[O * I], bias[O], dout[N * O], rin[N * I], rW[O * I], rdout[N * O];
    uint16_t W16[O * I];
    for (int i = 0; i < N * I; i++) in[i] = frand(), rin[i] = bf16_round(in[i]);
    for (int i = 0; i < O * I; i++) W16[i] = f32_to_bf16(frand()), W[i] = bf16_to_f32(W16[i]), rW[i] = W[i];
    for (int i = 0; i < O; i++) bias[i] = frand();
    for (int i = 0; i < N * O; i++) dout[i] = frand(), rdout[i] = bf16_round(dout[i]);
    float o1[N * O], o2[N * O];
    matmul_forward_bf16(o1, in, W16, bias, N, I, O);
    matmul_forward(o2, rin, rW, bias, N, I, O);
    T_CHECK(!memcmp(o1, o2, sizeof o1), "matmul_forward_bf16 differs from matmul_forward on rounded operands");
    float din1[N * I], din2[N * I], dW1[O * I], dW2[O * I], db1[O], db2[O];
    for (int i = 0; i < N * I; i++) din1[i] = din2[i] = 0.5f;
    for (int i = 0; i < O * I; i++) dW1[i] = dW2[i] = -0.25f;
    for (int i = 0; i < O; i++) db1[i] = db2[i] = 1.0f;
    uint16_t dout16[N * O];
    matmul_backward_bf16(din1, dW1, db1, dout, dout16, in, W16, N, I, O, 0);
    matmul_backward(din2, dW2, NULL, rdout, rin, rW, N, I, O, 0);
    matmul_backward(NULL, NULL, db2, dout, NULL, NULL, N, I, O, 0); /* the bias gradient sums the fp32 dout */
    T_CHECK(!memcmp(din1, din2, sizeof din1), "matmul_backward_bf16: din differs");
    T_CHECK(!memcmp(dW1, dW2, sizeof dW1), "matmul_backward_bf16: dW differs");
    T_CHECK(!memcmp(db1, db2, sizeof db1), "matmul_backward_bf16: dbias differs");
}

/* matmul_backward_bf16_scratch, dout rounded into its own memory, gives
 * matmul_backward_bf16_in16's results bit for bit (dout rounded into the caller's
 * dout16) on way w, and both give those of the two with the input in fp32 (holding
 * the same bf16 values); on a bf16 matmul the two with the input in bf16 take no
 * buffer of gemm_bf16's (every operand is bf16 already; run first: buffers empty). */
static void check_backward_scratch(Way w, const char *name) {
    use_way(w);
    int N = 33, I = 40, O = 2000;
    float *dout = malloc(sizeof(float) * N * O), *scratch[2] = {malloc(sizeof(float) * N * O), malloc(sizeof(float) * N * O)};
    float *in = malloc(sizeof(float) * N * I);
    uint16_t *dout16 = malloc(sizeof(uint16_t) * N * O);
    float *din[4], *dW[4], *db[4];
    uint16_t *in16 = malloc(sizeof(uint16_t) * N * I), *W16 = malloc(sizeof(uint16_t) * O * I);
    for (int i = 0; i < N * I; i++) in16[i] = f32_to_bf16(frand()), in[i] = bf16_to_f32(in16[i]);
    for (int i = 0; i < O * I; i++) W16[i] = f32_to_bf16(frand());
    for (int i = 0; i < N * O; i++) dout[i] = scratch[0][i] = scratch[1][i] = frand();
    for (int k = 0; k < 4; k++) {
        din[k] = malloc(sizeof(float) * N * I), dW[k] = malloc(sizeof(float) * O * I), db[k] = malloc(sizeof(float) * O);
        for (int i = 0; i < N * I; i++) din[k][i] = 0.5f;
        for (int i = 0; i < O * I; i++) dW[k][i] = -0.25f;
        for (int i = 0; i < O; i++) db[k][i] = 1.0f;
    }
    size_t before = gemm_bf16_buffer_bytes();
    matmul_backward_bf16_scratch(din[0], dW[0], db[0], scratch[0], NULL, in16, W16, N, I, O, 0);
    matmul_backward_bf16_in16(din[1], dW[1], db[1], dout, dout16, in16, W16, N, I, O, 0);
    size_t grew = gemm_bf16_buffer_bytes() - before;
    matmul_backward_bf16_scratch(din[2], dW[2], db[2], scratch[1], in, NULL, W16, N, I, O, 0);
    matmul_backward_bf16(din[3], dW[3], db[3], dout, dout16, in, W16, N, I, O, 0);
    for (int k = 1; k < 4; k++)
        T_CHECK(!memcmp(din[0], din[k], sizeof(float) * N * I) && !memcmp(dW[0], dW[k], sizeof(float) * O * I) &&
                    !memcmp(db[0], db[k], sizeof(float) * O),
                "%s: backward %d (in place / into dout16; input in bf16 / in fp32) differs from the first", name, k);
    if (w == NATIVE && machine.present != 1) /* not an emulation's widening */
        T_CHECK(grew == 0, "%s: gemm_bf16's buffers grew by %zu bytes", name, grew);
    for (int k = 0; k < 4; k++) free(din[k]), free(dW[k]), free(db[k]);
    free(dout), free(scratch[0]), free(scratch[1]), free(in), free(dout16), free(in16), free(W16);
}

/* gemm_f32 on backend b: every transpose, padded rows, alpha, beta, K = 0. */
static void check_f32(GemmF32Backend b, const char *name, int in_parallel) {
    gemm_f32_use(b);
    int bad = 0, cases = 0;
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++)
            for (int v = 0; v < 3; v++) {
                int M = 11 + v, N = 19 + 2 * ta, K = v == 2 ? 0 : 45 + 3 * tb + 150 * v, pad = v;
                float alpha = v == 1 ? 0.5f : 1.0f, beta = (float)v * 0.5f;
                int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
                int lda = ac + pad, ldb = bc + pad, ldc = N + pad;
                float *A = malloc(sizeof(float) * (ar * lda + 1)), *B = malloc(sizeof(float) * (br * ldb + 1));
                float *C = malloc(sizeof(float) * M * ldc), *C0 = malloc(sizeof(float) * M * ldc);
                for (int i = 0; i < ar * lda; i++) A[i] = frand();
                for (int i = 0; i < br * ldb; i++) B[i] = frand();
                for (int i = 0; i < M * ldc; i++) C[i] = C0[i] = frand();
                if (in_parallel) {
#pragma omp parallel num_threads(2)
#pragma omp single
                    gemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
                } else {
                    gemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
                }
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < ldc; j++) {
                        double s = 0, mag = 0;
                        for (int k = 0; k < K && j < N; k++) {
                            double a = A[ta ? (size_t)k * lda + i : (size_t)i * lda + k];
                            double bb = B[tb ? (size_t)j * ldb + k : (size_t)k * ldb + j];
                            s += a * bb, mag += fabs(a * bb);
                        }
                        double c0 = C0[(size_t)i * ldc + j], got = C[(size_t)i * ldc + j];
                        double want = j < N ? alpha * s + beta * c0 : c0; /* the padding is untouched */
                        double tol = j < N ? (K + 2) * 0x1p-23 * (fabs(alpha) * mag + fabs(c0)) : 0;
                        bad += !(fabs(got - want) <= tol);
                    }
                cases++;
                free(A), free(B), free(C), free(C0);
            }
    T_CHECK(bad == 0, "gemm_f32 on %s%s: %d elements outside the bound over %d cases", name,
            in_parallel ? " (in a parallel region)" : "", bad, cases);
}

/* gemm_f32_batch on backend b: a [2, 3, 2] batch whose A broadcasts over dim 2
 * and B over dim 1 (grouped-query attention's shape), operands and C strided with
 * gaps, each transpose, beta 0 and 1; every product against the double sum, the
 * gaps untouched. Returns how many of the calls ran per product on OpenBLAS. */
static long check_batch(GemmF32Backend b, const char *name) {
    gemm_f32_use(b);
    gemm_stats_reset();
    int bad = 0, cases = 0;
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++)
            for (int beta = 0; beta <= 1; beta++) {
                int M = 6 + ta, N = 5 + tb, K = 13, n[3] = {2, 3, 2};
                int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
                int lda = ac + 2, ldb = bc + 1, ldc = N + 3;
                long sa[3] = {3L * ar * lda + 5, (long)ar * lda + 1, 0}, sb[3] = {2L * br * ldb + 7, 0, (long)br * ldb};
                long sc[3] = {6L * M * ldc + 9, 2L * M * ldc + 2, (long)M * ldc + 1};
                long na = 2 * sa[0], nb = 2 * sb[0], nc = 2 * sc[0];
                float *A = malloc(sizeof(float) * na), *B = malloc(sizeof(float) * nb);
                float *C = malloc(sizeof(float) * nc), *C0 = malloc(sizeof(float) * nc);
                for (long i = 0; i < na; i++) A[i] = frand();
                for (long i = 0; i < nb; i++) B[i] = frand();
                for (long i = 0; i < nc; i++) C[i] = C0[i] = frand();
                GemmBatch bt = {{n[0], n[1], n[2]}, {sa[0], sa[1], sa[2]}, {sb[0], sb[1], sb[2]}, {sc[0], sc[1], sc[2]}};
                gemm_f32_batch(&bt, ta, tb, M, N, K, 0.5f, A, lda, B, ldb, (float)beta, C, ldc);
                uint8_t *hit = calloc(nc, 1);
                for (int i0 = 0; i0 < n[0]; i0++)
                    for (int i1 = 0; i1 < n[1]; i1++)
                        for (int i2 = 0; i2 < n[2]; i2++) {
                            const float *a = A + i0 * sa[0] + i1 * sa[1] + i2 * sa[2];
                            const float *bb = B + i0 * sb[0] + i1 * sb[1] + i2 * sb[2];
                            long oc = i0 * sc[0] + i1 * sc[1] + i2 * sc[2];
                            for (int i = 0; i < M; i++)
                                for (int j = 0; j < N; j++) {
                                    double sum = 0, mag = 0;
                                    for (int k = 0; k < K; k++) {
                                        double x = a[ta ? (size_t)k * lda + i : (size_t)i * lda + k];
                                        double y = bb[tb ? (size_t)j * ldb + k : (size_t)k * ldb + j];
                                        sum += x * y, mag += fabs(x * y);
                                    }
                                    long at = oc + (long)i * ldc + j;
                                    double want = 0.5 * sum + beta * C0[at];
                                    bad += !(fabs(C[at] - want) <= (K + 2) * 0x1p-23 * (mag + fabs(C0[at])));
                                    hit[at] = 1;
                                }
                        }
                for (long i = 0; i < nc; i++) bad += !hit[i] && C[i] != C0[i];
                cases++;
                free(A), free(B), free(C), free(C0), free(hit);
            }
    GemmStats g = gemm_stats();
    T_CHECK(bad == 0, "gemm_f32_batch on %s: %d elements wrong over %d cases", name, bad, cases);
    T_CHECK(g.batch_calls == cases && g.batch_gflop > 0 && fabs(g.batch_gflop - g.gflop) < 1e-12,
            "gemm_f32_batch stats on %s: %ld calls, %g of %g GFLOP", name, g.batch_calls, g.batch_gflop, g.gflop);
    return g.batch_openblas;
}

/* One product of check_families: 2-D (batched = 0) or attention's batched layout
 * ([1, 2, 2], A broadcast over the last dim), sizes from (M, N, K), rows padded by pad. */
static void family_product(int batched, int ta, int tb, int M, int N, int K, int pad, float alpha, float beta,
                           const float *A, const float *B, float *C) {
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    if (!batched) {
        gemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    long na = (long)(ta ? K : M) * lda, nbb = (long)(tb ? N : K) * ldb, nc = (long)M * ldc;
    GemmBatch bt = {{1, 2, 2}, {0, na + 3, 0}, {0, 2 * nbb + 1, nbb}, {0, 2 * nc + 5, nc + 2}};
    gemm_f32_batch(&bt, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The family path's memory objects (onednn.c's mem_get: one per operand descriptor,
 * MEM_CACHE = 512 kept, the oldest replaced): 1,100 products of one family with the
 * same A and C and a B of a new row stride each. B's objects fill the cache and the
 * replacement wraps round to the slots of A and C, objects the product has already
 * taken when B's miss comes (A's and C's are fetched before or after B's, whichever
 * order a build evaluates them in). Replacing one then leaves the product with a
 * destroyed object, or with B's new one in its place (M != K: oneDNN's 'matmul failed
 * (status 2)', as the demo's sft died at its 10th step), or a crash, or wrong sums.
 * Small integers: every sum is exact, so the bits are known. */
static void check_family_memory(void) {
    gemm_f32_use(GEMM_F32_ONEDNN);
    onednn_families_off(0);
    if (!onednn_families()) {
        printf("shape families: not on this CPU, their memory objects not checked\n");
        return;
    }
    enum { M = 3, K = 5, N = 4, PRODUCTS = 1100 };
    /* C has B's room: where a product takes B's object for C (the old cache did), its
     * stray rows land in the buffer and the check below reports them */
    float A[M * K], *B = malloc(sizeof(float) * K * (N + PRODUCTS)), *C = malloc(sizeof(float) * K * (N + PRODUCTS));
    for (int i = 0; i < M * K; i++) A[i] = (float)(i * 7 % 5 - 2);
    int wrong = 0;
    long made = 0;
    for (int p = 0; p < PRODUCTS; p++) {
        int ldb = N + p; /* a new descriptor for B, the same for A and C */
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++) B[k * ldb + j] = (float)((k + 2 * j + p) % 7 - 3);
        long before = gemm_stats().primitives_made;
        gemm_f32(0, 0, M, N, K, 1.0f, A, K, B, ldb, 0.0f, C, N);
        if (p > 0) made += gemm_stats().primitives_made - before;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float want = 0;
                for (int k = 0; k < K; k++) want += A[i * K + k] * B[k * ldb + j];
                wrong += C[i * N + j] != want;
            }
    }
    T_CHECK(wrong == 0, "shape families past the memory objects' cache: %d of %d values wrong", wrong,
            PRODUCTS * M * N);
    T_CHECK(made == 0, "shape families past the memory objects' cache: %ld primitives made (want 0: one family)",
            made);
    free(B), free(C);
    gemm_f32_use(GEMM_F32_AUTO);
}

/* Where fp32 products run on a primitive per shape family (onednn_families), every
 * product gives the bits the primitive of its own shape gives: 2-D and batched, each
 * transpose, alpha and beta, sizes from 1 to past a block, padded rows. And once a
 * family has run, products of sizes and strides not seen before make no primitive. */
static void check_families(void) {
    gemm_f32_use(GEMM_F32_ONEDNN);
    onednn_families_off(0);
    if (!onednn_families()) {
        printf("shape families: not on this CPU (a primitive per shape), not checked\n");
        return;
    }
    enum { BIG = 4 * 300 * 300 + 4096 };
    float *A = malloc(sizeof(float) * BIG), *B = malloc(sizeof(float) * BIG);
    float *C0 = malloc(sizeof(float) * BIG), *Cf = malloc(sizeof(float) * BIG), *Cs = malloc(sizeof(float) * BIG);
    for (int i = 0; i < BIG; i++) A[i] = frand(), B[i] = frand(), C0[i] = frand();
    static const int Ms[] = {1, 2, 5, 17, 130}, Ns[] = {1, 7, 33}, Ks[] = {1, 3, 40, 300};
    int cases = 0, differ = 0, pass = 0;
    long made[2] = {0, 0};
    for (pass = 0; pass < 2; pass++) { /* pass 1: sizes and pads new to every family */
        gemm_stats_reset();
        for (int batched = 0; batched <= 1; batched++)
            for (int ta = 0; ta <= 1; ta++)
                for (int tb = 0; tb <= 1; tb++)
                    for (int v = 0; v < 4; v++)
                        for (int m = 0; m < 5; m++) {
                            int M = Ms[m] + pass, N = Ns[(m + v) % 3] + pass, K = Ks[(m + 2 * v) % 4] + pass;
                            int pad = (v + pass) % 3;
                            float alpha = v & 1 ? 0.5f : 1.0f, beta = v & 2 ? 1.0f : 0.0f;
                            memcpy(Cf, C0, sizeof(float) * BIG), memcpy(Cs, C0, sizeof(float) * BIG);
                            family_product(batched, ta, tb, M, N, K, pad, alpha, beta, A, B, Cf);
                            long before = gemm_stats().primitives_made;
                            onednn_families_off(1);
                            family_product(batched, ta, tb, M, N, K, pad, alpha, beta, A, B, Cs);
                            onednn_families_off(0);
                            made[pass] -= gemm_stats().primitives_made - before; /* the per-shape ones */
                            differ += memcmp(Cf, Cs, sizeof(float) * BIG) != 0;
                            cases++;
                        }
        made[pass] += gemm_stats().primitives_made;
    }
    T_CHECK(differ == 0, "shape families: %d of %d products differ from their shape's primitive", differ, cases);
    T_CHECK(made[0] > 0 && made[1] == 0, "shape families: %ld primitives made by the first pass, %ld by products "
            "of new sizes (want 0)", made[0], made[1]);
    free(A), free(B), free(C0), free(Cf), free(Cs);
    gemm_f32_use(GEMM_F32_AUTO);
}

/* bf16_transpose: dst[c][r] = src[r][c] bit for bit (NaN and subnormal patterns among
 * the values: oneDNN's reorder, used before, flushed those on an AVX2 CPU), on shapes with one row,
 * one column, odd sizes and rows past 256, dst's rows contiguous or ld apart (the
 * LM head's columns of a wider dz^T); each shape twice; the gap after
 * each dst row and the uint16 after dst untouched. */
static void check_transpose(void) {
    int shapes[][3] = {{1, 1, 1},       {1, 37, 1},   {29, 1, 29},     {3, 5, 3},     {17, 1000, 17}, {256, 300, 256},
                       {300, 256, 300}, {2, 65537, 2}, {3, 5, 7},       {1, 37, 4},    {17, 1000, 48}, {256, 300, 768}};
    int n = sizeof shapes / sizeof shapes[0];
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            int R = shapes[i][0], C = shapes[i][1], ld = shapes[i][2];
            size_t sz = (size_t)R * C, dsz = (size_t)ld * C;
            uint16_t *src = malloc(sizeof(uint16_t) * sz), *dst = malloc(sizeof(uint16_t) * (dsz + 1));
            for (size_t k = 0; k < sz; k++) src[k] = (uint16_t)(k * 2654435761u >> 13);
            for (size_t k = 0; k < dsz; k++) dst[k] = 0xffff;
            dst[dsz] = 0x1234;
            bf16_transpose(dst, ld, src, R, C);
            long bad = 0, touched = 0;
            for (int c = 0; c < C; c++) {
                for (int r = 0; r < R; r++) bad += dst[(size_t)c * ld + r] != src[(size_t)r * C + c];
                for (int r = R; r < ld; r++) touched += dst[(size_t)c * ld + r] != 0xffff; /* the gap between rows */
            }
            T_CHECK(bad == 0 && touched == 0 && dst[dsz] == 0x1234,
                    "transpose %dx%d ld %d (pass %d): %ld values wrong, %ld past the rows written, after dst %#x", R, C,
                    ld, pass, bad, touched, dst[dsz]);
            free(src), free(dst);
        }
}

int main(void) {
    machine = gemm_bf16_set_matmul((GemmBf16Matmul){-1, NULL, NULL});
    gemm_bf16_set_matmul(machine);
    if (gemm_bf16_native()) check_backward_scratch(NATIVE, "bf16 matmul");
    check_backward_scratch(EMULATED, "emulated");
    check_backward_scratch(WIDEN_ONEDNN, "widened");
    check_f32(GEMM_F32_OPENBLAS, "OpenBLAS", 0);
    check_f32(GEMM_F32_ONEDNN, "oneDNN", 0);
    check_f32(GEMM_F32_ONEDNN, "oneDNN", 1);
    T_CHECK(check_batch(GEMM_F32_OPENBLAS, "OpenBLAS") == 8, "gemm_f32_batch on OpenBLAS ran on oneDNN");
    long fallback = check_batch(GEMM_F32_ONEDNN, "oneDNN");
    printf("gemm_f32_batch on oneDNN: %ld of 8 calls fell back to OpenBLAS\n", fallback);
    gemm_f32_use(GEMM_F32_AUTO);
    printf("gemm_f32 backend here: %s\n", gemm_f32_backend_name());
    check_rounding();
    check_split();
    check_vector_rounding();
    check_stats();
    check_backend(WIDEN_ONEDNN, "widened on oneDNN fp32");
    check_backend(WIDEN_OPENBLAS, "widened on OpenBLAS");
    check_blocks(WIDEN_ONEDNN, "widened on oneDNN fp32");
    /* the widened operands' buffers stayed at a block each (a whole operand: 6 Mi values) */
    T_CHECK(gemm_bf16_buffer_bytes() <= 2 * sizeof(float) * (2 << 20), "widening buffers hold %zu bytes",
            gemm_bf16_buffer_bytes());
    check_blocks(WIDEN_OPENBLAS, "widened on OpenBLAS");
    check_backend(EMULATED, "emulated bf16 matmul");
    check_blocks(EMULATED, "emulated bf16 matmul");
    check_rounded_is_widened();
    if (gemm_bf16_native()) {
        check_backend(NATIVE, "bf16 matmul");
        check_blocks(NATIVE, "bf16 matmul");
    } else {
        T_CHECK(use_way(NATIVE) == -1, "the native backend was accepted on a CPU without it");
    }
    check_cache();
    check_family_memory();
    check_families();
    check_linear();
    check_transpose();
    use_auto();
    printf("gemm_bf16 backend here: %s\n", gemm_bf16_backend_name());
    return t_summary("test_gemm");
}
