/* ops/gemm_bf16.c — gemm_bf16 (see gemm.h): products of bf16 operands summed in
 * fp32, on oneDNN's bf16 matmul where this CPU has bf16 instructions (ops/onednn.c),
 * else on gemm_f32 over the operands widened a block at a time; and gemm_f32_b16,
 * fp32 products with a bf16-held operand, on that widened path. Not here: fp32
 * products (gemm.c). */
#include <emmintrin.h>
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
} bufs[4]; /* the widened path's blocks of A and B (0, 1); A and B given in fp32, rounded for the bf16 matmul (2, 3) */

static void *buf(int i, size_t bytes) {
    if (bufs[i].bytes < bytes) {
        free(bufs[i].p);
        bufs[i].p = xaligned(bytes);
        bufs[i].bytes = bytes;
    }
    return bufs[i].p;
}

size_t gemm_bf16_buffer_bytes(void) {
    size_t n = 0;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) n += bufs[i].bytes;
    return n;
}

/* x[rows, cols] (ld apart) rounded into out, rows cols apart. */
static void round_rows(uint16_t *out, const float *x, int rows, int cols, int ld) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) f32_to_bf16_n(out + (size_t)r * cols, x + (size_t)r * ld, (size_t)cols);
}

/* The operand in bf16: h itself, or f rounded into buffer slot for this call (*ld set). */
static const uint16_t *operand_bf16(int slot, GemmBf16Operand x, int rows, int cols, int *ld) {
    if (x.h) {
        *ld = x.ld;
        return x.h;
    }
    uint16_t *out = buf(slot, sizeof(uint16_t) * (size_t)rows * cols);
    round_rows(out, x.f, rows, cols, x.ld);
    *ld = cols;
    return out;
}

static GemmBf16Backend resolved(void);

GemmBf16Operand gemm_bf16_round(const float *x, int rows, int cols, int ld, uint16_t *dst) {
    if (resolved() != GEMM_BF16_ONEDNN) /* widened: each block is rounded as it is widened */
        return (GemmBf16Operand){.f = x, .ld = ld};
    CHECK(dst && !omp_in_parallel());
    round_rows(dst, x, rows, cols, ld);
    return (GemmBf16Operand){.h = dst, .ld = cols};
}

GemmBf16Operand gemm_bf16_round_in_place(float *x, int rows, int cols, int ld) {
    CHECK(!omp_in_parallel() && ld >= cols);
    uint16_t *h = (uint16_t *)x;
    /* row 0 over its own first half, a piece at a time: a piece's bf16 bytes land on
     * floats of this piece or earlier ones, read already */
    for (int c = 0; c < cols; c += 512) {
        uint16_t tmp[512];
        int n = cols - c < 512 ? cols - c : 512;
        f32_to_bf16_n(tmp, x + c, (size_t)n);
        memcpy(h + c, tmp, sizeof(uint16_t) * n);
    }
    /* then rows [a, 2a) for a = 1, 2, 4, ...: row r's bf16 bytes [2 r cols, 2 (r + 1) cols)
     * end before its fp32 ones begin (4 r ld, r >= 1), and the wave's destinations,
     * below 4 a cols, before any of its rows' or later rows' fp32 values: each wave's
     * rows in parallel, never over values not yet read */
    for (int a = 1; a < rows; a *= 2) {
        int b = 2 * a < rows ? 2 * a : rows;
#pragma omp parallel for schedule(static) if ((long)(b - a) * cols >= 65536)
        for (int r = a; r < b; r++) f32_to_bf16_n(h + (size_t)r * cols, x + (size_t)r * ld, (size_t)cols);
    }
    return (GemmBf16Operand){.h = h, .ld = cols};
}

/* 8 x 8 values: rows src[0..8) (ld apart) into columns of dst (ldd apart), by three
 * rounds of interleaving (SSE2, every x86-64 CPU). */
static void transpose8(uint16_t *dst, int ldd, const uint16_t *src, long ld) {
    __m128i r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i *)(src + i * ld));
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            r[4 * i + 2 * j] = _mm_unpacklo_epi32(t[4 * i + j], t[4 * i + j + 2]);
            r[4 * i + 2 * j + 1] = _mm_unpackhi_epi32(t[4 * i + j], t[4 * i + j + 2]);
        }
    for (int j = 0; j < 4; j++) {
        _mm_storeu_si128((__m128i *)(dst + (2 * j) * ldd), _mm_unpacklo_epi64(r[j], r[j + 4]));
        _mm_storeu_si128((__m128i *)(dst + (2 * j + 1) * ldd), _mm_unpackhi_epi64(r[j], r[j + 4]));
    }
}

/* In tiles of 64 x 64 values (8 KB of each side, in L1), a block of columns a thread;
 * whole 8 x 8 blocks interleaved in registers, the edges value by value. */
void bf16_transpose(uint16_t *dst, int ld_dst, const uint16_t *src, int rows, int cols) {
    CHECK(rows > 0 && cols > 0 && ld_dst >= rows && !omp_in_parallel());
    enum { TILE = 64 };
#pragma omp parallel for schedule(static) if ((long)rows * cols >= 65536)
    for (int c0 = 0; c0 < cols; c0 += TILE)
        for (int r0 = 0; r0 < rows; r0 += TILE) {
            int c1 = c0 + TILE < cols ? c0 + TILE : cols, r1 = r0 + TILE < rows ? r0 + TILE : rows;
            int c8 = c0 + (c1 - c0) / 8 * 8, r8 = r0 + (r1 - r0) / 8 * 8;
            for (int r = r0; r < r8; r += 8)
                for (int c = c0; c < c8; c += 8)
                    transpose8(dst + (size_t)c * ld_dst + r, ld_dst, src + (size_t)r * cols + c, cols);
            for (int c = c0; c < c1; c++) { /* the edges: columns past c8, rows past r8 */
                uint16_t *d = dst + (size_t)c * ld_dst;
                for (int r = c < c8 ? r8 : r0; r < r1; r++) d[r] = src[(size_t)r * cols + c];
            }
        }
}

/* ---- backend choice ---- */

static int native = -1;           /* oneDNN has a bf16 matmul here, once known */
static char native_impl[64];      /* oneDNN's name for it */
static GemmBf16Backend chosen = GEMM_BF16_AUTO;
static GemmBf16Matmul seam = {-1, NULL, NULL}; /* gemm_bf16_set_matmul's */

int gemm_bf16_native(void) {
    if (seam.present >= 0) return seam.present;
    if (native < 0) native = onednn_impl(1, native_impl, sizeof native_impl) && strncmp(native_impl, "ref", 3) != 0;
    return native;
}

GemmBf16Matmul gemm_bf16_set_matmul(GemmBf16Matmul m) {
    CHECK(m.present < 1 || m.fn);
    GemmBf16Matmul was = seam;
    seam = m;
    return was;
}

int gemm_bf16_use(GemmBf16Backend b) {
    if (b == GEMM_BF16_ONEDNN && !gemm_bf16_native()) return -1;
    chosen = b;
    return 0;
}

static GemmBf16Backend resolved(void) {
    if (chosen == GEMM_BF16_ONEDNN && !gemm_bf16_native()) return GEMM_BF16_WIDEN; /* the seam changed since */
    if (chosen != GEMM_BF16_AUTO) return chosen;
    return gemm_bf16_native() ? GEMM_BF16_ONEDNN : GEMM_BF16_WIDEN;
}

const char *gemm_bf16_backend_name(void) {
    static char name[96];
    if (resolved() == GEMM_BF16_WIDEN)
        snprintf(name, sizeof name, "fp32 GEMM on bf16 values (no bf16 matmul on this CPU)");
    else if (seam.present == 1)
        snprintf(name, sizeof name, "%s", seam.name ? seam.name : "a bf16 matmul of the tests'");
    else
        snprintf(name, sizeof name, "oneDNN %s", native_impl);
    return name;
}

/* The bf16 matmul: 0, or -1 where it has no code for this shape (oneDNN's reference code). */
static int matmul_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                       const uint16_t *B, int ldb, float beta, float *C, int ldc) {
    if (seam.present == 1) return seam.fn(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return onednn_gemm(1, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ---- the widened path: fp32 products over blocks of the widened operands ----
 * An operand is widened to fp32 a block at a time, at most BLOCK values, so that a
 * large weight (the LM head: 545 MB in fp32 at Qwen2-0.5B) never exists in fp32
 * whole. Where an operand fits in BLOCK values it is widened once; a K longer than
 * KBLOCK is split and its blocks' products summed into C. The blocks depend on the
 * shape alone, so results stay deterministic. */
enum { BLOCK = 1 << 21, KBLOCK = 8192 };

/* An operand: bf16 values h; fp32 values f rounded to bf16; or (exact) f read as is. */
typedef struct {
    const float *f;
    const uint16_t *h;
    int ld, exact;
} Src;

/* Rows [r0, r0 + nr) x cols [c0, c0 + nc) of x in fp32: x itself where exact, else
 * widened into buffer slot (*ld set). */
static const float *block_f32(int slot, Src x, int r0, int nr, int c0, int nc, int *ld) {
    if (x.exact) {
        *ld = x.ld;
        return x.f + (size_t)r0 * x.ld + c0;
    }
    float *out = buf(slot, sizeof(float) * (size_t)nr * nc);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < nr; r++) {
        size_t at = (size_t)(r0 + r) * x.ld + c0;
        if (x.f)
            bf16_round_n(out + (size_t)r * nc, x.f + at, (size_t)nc);
        else
            bf16_to_f32_n(out + (size_t)r * nc, x.h + at, (size_t)nc);
    }
    *ld = nc;
    return out;
}

/* The length of n's pieces when n is split evenly into pieces of at most most
 * (16 at least; a multiple of 16 unless n itself). */
static int piece(int n, long most) {
    if (most < 16) most = 16;
    if (n <= most) return n;
    long count = (n + most - 1) / most, p = ((n + count - 1) / count + 15) & ~15L;
    return p < n ? (int)p : n;
}

static void widened_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, Src A, Src B, float beta,
                         float *C, int ldc) {
    int whole_a = A.exact || (long)M * K <= BLOCK, whole_b = B.exact || (long)K * N <= BLOCK;
    int kb = whole_a && whole_b ? K : piece(K, KBLOCK);
    int mb = whole_a ? M : piece(M, BLOCK / kb), nb = whole_b ? N : piece(N, BLOCK / kb);
    int lda = 0, ldb = 0; /* a whole operand is widened once, its blocks are offsets into it */
    const float *aw = whole_a ? block_f32(0, A, 0, trans_a ? K : M, 0, trans_a ? M : K, &lda) : NULL;
    const float *bw = whole_b ? block_f32(1, B, 0, trans_b ? N : K, 0, trans_b ? K : N, &ldb) : NULL;
    for (int n0 = 0; n0 < N; n0 += nb)
        for (int k0 = 0; k0 < K; k0 += kb) {
            int n = N - n0 < nb ? N - n0 : nb, k = K - k0 < kb ? K - k0 : kb;
            const float *bp = whole_b  ? bw + (trans_b ? (size_t)n0 * ldb + k0 : (size_t)k0 * ldb + n0)
                              : trans_b ? block_f32(1, B, n0, n, k0, k, &ldb)
                                        : block_f32(1, B, k0, k, n0, n, &ldb);
            for (int m0 = 0; m0 < M; m0 += mb) {
                int m = M - m0 < mb ? M - m0 : mb;
                const float *ap = whole_a  ? aw + (trans_a ? (size_t)k0 * lda + m0 : (size_t)m0 * lda + k0)
                                  : trans_a ? block_f32(0, A, k0, k, m0, m, &lda)
                                            : block_f32(0, A, m0, m, k0, k, &lda);
                gemm_f32(trans_a, trans_b, m, n, k, alpha, ap, lda, bp, ldb, k0 ? 1.0f : beta,
                         C + (size_t)m0 * ldc + n0, ldc);
            }
        }
}

void gemm_bf16_widened(int trans_a, int trans_b, int M, int N, int K, float alpha, GemmBf16Operand A,
                       GemmBf16Operand B, float beta, float *C, int ldc) {
    CHECK((!A.f) != (!A.h) && (!B.f) != (!B.h) && (beta == 0.0f || beta == 1.0f) && !omp_in_parallel());
    if (M <= 0 || N <= 0 || K <= 0) /* nothing to multiply: gemm_f32 scales C by beta */
        gemm_f32(trans_a, trans_b, M, N, K, alpha, NULL, 1, NULL, 1, beta, C, ldc);
    else
        widened_gemm(trans_a, trans_b, M, N, K, alpha, (Src){.f = A.f, .h = A.h, .ld = A.ld},
                     (Src){.f = B.f, .h = B.h, .ld = B.ld}, beta, C, ldc);
}

/* On the bf16 matmul, the operands in bf16 (slots clear of the widened path's, which
 * a test's matmul may take); else, or where it has only reference code for the
 * shape, on the widened operands. */
static void gemm_bf16_run(int trans_a, int trans_b, int M, int N, int K, float alpha, GemmBf16Operand A,
                          GemmBf16Operand B, float beta, float *C, int ldc) {
    if (resolved() == GEMM_BF16_ONEDNN && M > 0 && N > 0 && K > 0) {
        CHECK((!A.f) != (!A.h) && (!B.f) != (!B.h) && (beta == 0.0f || beta == 1.0f) && !omp_in_parallel());
        int lda, ldb;
        const uint16_t *a = operand_bf16(2, A, trans_a ? K : M, trans_a ? M : K, &lda),
                       *b = operand_bf16(3, B, trans_b ? N : K, trans_b ? K : N, &ldb);
        if (matmul_bf16(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, C, ldc) == 0) return;
    }
    gemm_bf16_widened(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, ldc);
}

void gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, GemmBf16Operand A, GemmBf16Operand B,
               float beta, float *C, int ldc) {
    double t0 = gemm_stats_enter();
    gemm_bf16_run(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, ldc);
    gemm_stats_leave(t0, M, N, K);
}

void gemm_f32_b16(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const uint16_t *B, int ldb, float beta, float *C, int ldc) {
    double t0 = gemm_stats_enter();
    CHECK((beta == 0.0f || beta == 1.0f) && !omp_in_parallel());
    if (M <= 0 || N <= 0 || K <= 0)
        gemm_f32(trans_a, trans_b, M, N, K, alpha, NULL, 1, NULL, 1, beta, C, ldc);
    else
        widened_gemm(trans_a, trans_b, M, N, K, alpha, (Src){.f = A, .ld = lda, .exact = 1}, (Src){.h = B, .ld = ldb},
                     beta, C, ldc);
    gemm_stats_leave(t0, M, N, K);
}
