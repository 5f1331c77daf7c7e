/* ops/matmul_rowwise.c — y = x W^T + b for few rows (decoding), our own AVX-512 / AVX2 kernel.
 *
 * Two reasons it exists beside OpenBLAS:
 *  - speed at 1..64 rows, where a decode step streams every weight once: the weight
 *    is read in place (no packing), W[o, k] is broadcast against a packed block of
 *    up to 48 input rows (8 rows in a ymm, or 16..48 in 1-3 zmm; 64 as two panels of
 *    32), 4 to 12 weight rows at a time, 12 accumulators (bf16 products: four
 *    weights against 8 rows a zmm, 12 to 24 accumulators); the next block of weight
 *    rows prefetched while one is used, the outputs gathered in a tile and written a
 *    run at a time;
 *  - batch invariance: every output element is one sequential fused-multiply-add
 *    chain over k (bf16 products: two vdpbf16ps chains, summed; see there),
 *    whatever the number of rows or the block it falls in, so a
 *    sequence's logits do not depend on which other sequences share the batch
 *    (generation must not depend on chunking).
 * With AVX2 + FMA (no AVX-512) the same kernels run on ymm registers, blocks of
 * 8..24 rows, and past 24 rows panels of 16 (up to 4) that each few weight rows meet
 * in turn; without either, a scalar loop with the same chain (fmaf). All three give
 * the same bits. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/check.h"
#include "ops/ops.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>

/* R weight rows x (NV vectors of LANES) input rows. Every output element is the
 * chain acc = fma(w[k], x[k], acc) for k = 0..I-1 in one vector lane, whatever the
 * block width, which is what makes the result batch-invariant. The pieces: the
 * accumulators, one step of the chain (input row k of the packed block against the
 * R weights WJ(j)), and the stores: weight row j's outputs to row j of a tile t
 * (leading dimension ldt), whole vectors, which rowwise() transposes into out. */
#define ACC_INIT(VT, NV, R, ZERO)                                                              \
    VT acc[R][NV];                                                                             \
    _Pragma("GCC unroll 16") for (int j = 0; j < R; j++)                                       \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[j][v] = ZERO();
#define ACC_STEP(VT, LANES, NV, R, LOAD, FMA, k, WJ)                                           \
    {                                                                                          \
        VT b[NV];                                                                              \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                                   \
            b[v] = LOAD(xT + (size_t)(k) * (NV * LANES) + v * LANES);                          \
        _Pragma("GCC unroll 16") for (int j = 0; j < R; j++) {                                 \
            VT sj = WJ;                                                                        \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[j][v] = FMA(sj, b[v], acc[j][v]); \
        }                                                                                      \
    }
#define ACC_STORE(LANES, NV, R, STORE)                                                         \
    _Pragma("GCC unroll 16") for (int j = 0; j < R; j++)                                       \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) STORE(t + (size_t)j * ldt + v * LANES, acc[j][v]);
/* The next block's R weight rows (`next`, contiguous after this block's), line c of
 * each: a kernel reads one line of each of its rows per 64 bytes of k, so calling this
 * at every such step (c = 0, 1, ...) brings the next block in, line by line, one block
 * ahead of its use. Weights past the matrix's end are prefetched too: harmless, a
 * prefetch does not fault. With the hardware's prefetch alone, decoding 8 rows read
 * its weights at about 20 GB/s on a 2-core Zen 5 that reads 50-60 GB/s; with this,
 * about 30. Into L2 (T1), not L1: a block is 21 KB at 896 inputs and 12 rows, two of
 * them more than a Zen 4's 32 KB L1, and L1 prefetches wait on its few miss buffers;
 * on a 2-core Zen 4 (30-50 GB/s) 8 rows' bf16 products read 10-14 GB/s with T0 and
 * 22-26 with T1, fp32 weights 15 and 21-27, 32 rows (compute-bound) alike. */
#define PREFETCH_NEXT(next, R, c)                                                             \
    _Pragma("GCC unroll 16") for (int j = 0; j < R; j++)                                       \
        _mm_prefetch((const char *)(next) + ((size_t)(c) * R + j) * 64, _MM_HINT_T1);

#define KERNEL(NAME, VT, LANES, NV, R, ZERO, LOAD, SET1, FMA, STORE)                          \
    static void NAME(float *t, int ldt, const float *xT, const void *Wv, int I, int o0) {       \
        const float *w = (const float *)Wv + (size_t)o0 * I;                                   \
        ACC_INIT(VT, NV, R, ZERO)                                                              \
        for (int k0 = 0, c = 0; k0 < I; k0 += 16, c++) { /* 16 fp32 weights a line */         \
            PREFETCH_NEXT(w + (size_t)R * I, R, c)                                             \
            for (int k = k0; k < (k0 + 16 < I ? k0 + 16 : I); k++)                             \
                ACC_STEP(VT, LANES, NV, R, LOAD, FMA, k, SET1(w[(size_t)j * I + k]))           \
        }                                                                                      \
        ACC_STORE(LANES, NV, R, STORE)                                                         \
    }

/* bf16 weights, widened as they are broadcast: the 32-bit word holding values k-1 and
 * k of a row (k >= 1), broadcast with its lower half cleared, is value k widened to
 * fp32 in every lane (bf16 is the upper half of a float); value 0 is widened on its
 * own. The chain is KERNEL's on the widened weights, so the same bits, at one
 * AND per weight more than fp32 and half the bytes read. (Widening a panel of rows
 * first and broadcasting from it cost a store and a load per weight: slower than
 * fp32 weights when decoding, bandwidth-bound though that is.) */
#define KERNEL16(NAME, VT, LANES, NV, R, ZERO, LOAD, SET1, FMA, STORE, WIDEN_HI)                \
    static void NAME(float *t, int ldt, const float *xT, const void *Wv, int I, int o0) {       \
        const uint16_t *w = (const uint16_t *)Wv + (size_t)o0 * I;                             \
        ACC_INIT(VT, NV, R, ZERO)                                                              \
        ACC_STEP(VT, LANES, NV, R, LOAD, FMA, 0, SET1(bf16_to_f32(w[(size_t)j * I])))          \
        for (int k0 = 0, c = 0; k0 < I; k0 += 32, c++) { /* 32 bf16 weights a line */         \
            PREFETCH_NEXT(w + (size_t)R * I, R, c)                                             \
            for (int k = k0 ? k0 : 1; k < (k0 + 32 < I ? k0 + 32 : I); k++)                    \
                ACC_STEP(VT, LANES, NV, R, LOAD, FMA, k, WIDEN_HI(w + (size_t)j * I + k - 1))  \
        }                                                                                      \
        ACC_STORE(LANES, NV, R, STORE)                                                         \
    }
/* bf16 value p[1] as fp32 in every lane, from the unaligned 32-bit word at p */
static inline __m256 widen_hi8(const uint16_t *p) {
    uint32_t u;
    memcpy(&u, p, 4);
    return _mm256_and_ps(_mm256_castsi256_ps(_mm256_set1_epi32((int)u)),
                         _mm256_castsi256_ps(_mm256_set1_epi32((int)0xffff0000u)));
}
/* With AVX2, one input row per lane (NV = 1, the 8-wide block: decoding 8 sequences),
 * weights k and k+1 come from one broadcast 32-bit word: shifted left, value k; its
 * lower half cleared, value k+1. Half the broadcasts, and about 25 % faster on a Zen 3
 * than one per weight; the chain and its bits are KERNEL16's. (Wider blocks would need two
 * rows of inputs in registers at once, more than AVX2 has.) */
#define KERNEL16_PAIRS(NAME, R)                                                                \
    static void NAME(float *t, int ldt, const float *xT, const void *Wv, int I, int o0) {       \
        const uint16_t *w = (const uint16_t *)Wv + (size_t)o0 * I;                             \
        const __m256 hi = _mm256_castsi256_ps(_mm256_set1_epi32((int)0xffff0000u));           \
        ACC_INIT(__m256, 1, R, _mm256_setzero_ps)                                              \
        int k = 0;                                                                             \
        for (int c = 0; k + 1 < I; c++) { /* a line of 32 weights per row, in pairs */        \
          PREFETCH_NEXT(w + (size_t)R * I, R, c)                                               \
          for (int kend = k + 32 < I ? k + 32 : I; k + 1 < kend; k += 2) {                     \
            __m256 b0 = _mm256_load_ps(xT + (size_t)k * 8), b1 = _mm256_load_ps(xT + (size_t)k * 8 + 8); \
            _Pragma("GCC unroll 16") for (int j = 0; j < R; j++) {                             \
                uint32_t u;                                                                    \
                memcpy(&u, w + (size_t)j * I + k, 4);                                          \
                __m256i p = _mm256_set1_epi32((int)u);                                         \
                acc[j][0] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(p, 16)), b0, acc[j][0]); \
                acc[j][0] = _mm256_fmadd_ps(_mm256_and_ps(_mm256_castsi256_ps(p), hi), b1, acc[j][0]); \
            }                                                                                  \
          }                                                                                    \
        }                                                                                      \
        if (k < I) /* odd I: the last value, from the word that ends with it (or alone) */     \
            ACC_STEP(__m256, 8, 1, R, _mm256_load_ps, _mm256_fmadd_ps, k,                      \
                     k ? widen_hi8(w + (size_t)j * I + k - 1) : _mm256_set1_ps(bf16_to_f32(w[(size_t)j * I]))) \
        ACC_STORE(8, 1, R, _mm256_store_ps)                                                    \
    }
#ifdef __AVX512F__
static inline __m512 widen_hi16(const uint16_t *p) {
    uint32_t u;
    memcpy(&u, p, 4);
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_set1_epi32((int)u), _mm512_set1_epi32((int)0xffff0000u)));
}
#endif

/* bf16 products (mixed precision's decode) with AVX512_BF16. An input row is packed as
 * 32-bit words, values 2i and 2i+1 rounded to bf16 (low half 2i); a zmm holds 8 input
 * rows, each as two lanes: words 2q and 2q+1 (lane pair r: row r). The 64-bit word of a
 * weight row holding the same four values is broadcast against it, so one broadcast and
 * one vdpbf16ps take four weights of a row against 8 rows: half the instructions of a
 * lane per row (the 8-row kernel was issue-bound at about 30 GB/s of weights, hot or
 * cold, on a Zen 5 that reads 50). Every output element is two chains, the instruction's
 * in each lane: over the even words i = 0, 2, 4.. and over the odd words i = 1, 3, 5..,
 * each step acc += x[2i+1] w[2i+1], then acc += x[2i] w[2i] (each product exact, each sum
 * rounded to nearest even, denormal inputs and results flushed to zero); then the even
 * chain plus the odd. An odd last word pairs with zeros, an odd last value too. The
 * same in every block: batch-invariant. (In the kernel before this one, a word a lane,
 * the broadcast embedded in the instruction, {1toN} by inline assembly, was no faster
 * at 8 rows and half as fast at 32.) */
#if defined(__AVX512BF16__) && defined(__AVX512VL__)
#define ROWWISE_DOT 1
/* the packed steps of a row of I values: words (I + 1) / 2, two words a step */
static inline int dot_steps(int I) {
    return ((I + 1) / 2 + 1) / 2;
}
static inline uint64_t qword_at(const uint16_t *p) {
    uint64_t u;
    memcpy(&u, p, 8);
    return u;
}
/* even-chain lanes of a then b, and odd-chain lanes, summed: row r of a (r < 8) and of
 * b (8 + r) */
static inline __m512 dot_fold(__m512 a, __m512 b) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_ps(_mm512_permutex2var_ps(a, ev, b), _mm512_permutex2var_ps(a, od, b));
}
#define DOT_STEP(NV, R, q, WORDS)                                                              \
    {                                                                                          \
        __m512 b[NV];                                                                          \
        _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) b[v] = _mm512_load_ps(xT + (size_t)(q) * (NV * 16) + v * 16); \
        _Pragma("GCC unroll 16") for (int j = 0; j < R; j++) {                                 \
            __m512bh sj = (__m512bh)_mm512_set1_epi64((long long)(WORDS));                    \
            _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[j][v] = _mm512_dpbf16_ps(acc[j][v], (__m512bh)b[v], sj); \
        }                                                                                      \
    }
/* R weight rows x NV zmm of 8 input rows (a panel of 8 NV rows) */
#define KERNEL_DOT(NAME, NV, R)                                                                \
    static void NAME(float *t, int ldt, const float *xT, const void *Wv, int I, int o0) {       \
        const uint16_t *w = (const uint16_t *)Wv + (size_t)o0 * I;                             \
        int Q = I / 4; /* whole steps: four values of a row each */                            \
        ACC_INIT(__m512, NV, R, _mm512_setzero_ps)                                             \
        for (int q0 = 0, c = 0; q0 < Q; q0 += 8, c++) { /* 8 steps a line */                   \
            PREFETCH_NEXT(w + (size_t)R * I, R, c)                                             \
            for (int q = q0; q < (q0 + 8 < Q ? q0 + 8 : Q); q++)                               \
                DOT_STEP(NV, R, q, qword_at(w + (size_t)j * I + 4 * q))                        \
        }                                                                                      \
        if (I % 4) /* one to three values left, zeros after them */                            \
            DOT_STEP(NV, R, Q, dot_tail(w + (size_t)j * I + 4 * Q, I % 4))                     \
        _Pragma("GCC unroll 16") for (int j = 0; j < R; j++) {                                 \
            float *tj = t + (size_t)j * ldt;                                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v + 1 < NV; v += 2)                        \
                _mm512_store_ps(tj + v * 8, dot_fold(acc[j][v], acc[j][v + 1]));               \
            if (NV & 1)                                                                        \
                _mm256_store_ps(tj + (NV - 1) * 8,                                             \
                                _mm512_castps512_ps256(dot_fold(acc[j][NV - 1], acc[j][NV - 1]))); \
        }                                                                                      \
    }
/* the last n < 4 values at p as a step's 64-bit word, zeros after them */
static inline uint64_t dot_tail(const uint16_t *p, int n) {
    uint64_t u = 0;
    memcpy(&u, p, 2 * (size_t)n);
    return u;
}
#define D8(NAME, R) KERNEL_DOT(NAME, 1, R)
#define D16(NAME, NV, R) KERNEL_DOT(NAME, 2 * (NV), R)
#else
#define D8(NAME, R)
#define D16(NAME, NV, R)
#endif

#ifdef __AVX512F__
#define Z16(NAME, NV, R)                                                                       \
    KERNEL(NAME, __m512, 16, NV, R, _mm512_setzero_ps, _mm512_load_ps, _mm512_set1_ps,         \
           _mm512_fmadd_ps, _mm512_store_ps)                                                   \
    KERNEL16(NAME##_h, __m512, 16, NV, R, _mm512_setzero_ps, _mm512_load_ps, _mm512_set1_ps,   \
             _mm512_fmadd_ps, _mm512_store_ps, widen_hi16)                                     \
    D16(NAME##_d, NV, R)
#endif
#define Y8N(NAME, NV, R)                                                                       \
    KERNEL(NAME, __m256, 8, NV, R, _mm256_setzero_ps, _mm256_load_ps, _mm256_set1_ps,          \
           _mm256_fmadd_ps, _mm256_store_ps)                                                   \
    KERNEL16(NAME##_h, __m256, 8, NV, R, _mm256_setzero_ps, _mm256_load_ps, _mm256_set1_ps,    \
             _mm256_fmadd_ps, _mm256_store_ps, widen_hi8)
#ifdef __AVX512F__
#define Y8(NAME, R) Y8N(NAME, 1, R) D8(NAME##_d, R)
#else
#define Y8(NAME, R)                                                                            \
    KERNEL(NAME, __m256, 8, 1, R, _mm256_setzero_ps, _mm256_load_ps, _mm256_set1_ps,           \
           _mm256_fmadd_ps, _mm256_store_ps)                                                   \
    KERNEL16_PAIRS(NAME##_h, R)
#endif

typedef void (*RowKernel)(float *, int, const float *, const void *, int, int);

/* A block of input rows: P panels of `wide` rows each, packed apart, and the kernels
 * over one panel: R weight rows and their one-row tail, for fp32 weights, (_h)
 * bf16 weights and (_d, with AVX512_BF16) bf16 products. Each block of R weight rows
 * meets every panel in turn, so a weight is read from memory once per block and from
 * cache for the other panels. */
typedef struct {
    int wide, P, R;
    RowKernel big, one, big_h, one_h, big_d, one_d;
} RowBlock;

/* a block: panel width, panels, R, and its kernels (fp32 weights, bf16 weights, bf16
 * products where built; R rows and one) */
#ifdef ROWWISE_DOT
#define B(w, P, R, big, one) {w, P, R, big, one, big##_h, one##_h, big##_d, one##_d}
#else
#define B(w, P, R, big, one) {w, P, R, big, one, big##_h, one##_h, NULL, NULL}
#endif
#ifdef __AVX512F__
/* width 8: 12 weight rows (ymm); 16: 12; 32: 6; 48: 4 — 12 accumulators each; 64 rows
 * as two panels of 32 that each 6 weight rows meet in turn (a 64-wide kernel of 3
 * weight rows read 256 bytes of inputs per 3 weights: 12-27 % slower on a Zen 5) */
Y8(k8_12, 12)
Y8(k8_1, 1)
Z16(k16_12, 1, 12)
Z16(k16_1, 1, 1)
Z16(k32_6, 2, 6)
Z16(k32_1, 2, 1)
Z16(k48_4, 3, 4)
Z16(k48_1, 3, 1)
static const RowBlock BLOCKS[] = {B(8, 1, 12, k8_12, k8_1),  B(16, 1, 12, k16_12, k16_1), B(32, 1, 6, k32_6, k32_1),
                                  B(48, 1, 4, k48_4, k48_1), B(32, 2, 6, k32_6, k32_1)};
#else
/* 16 ymm registers: width 8: 10 weight rows (bf16 weights in pairs hold two inputs and
 * a pair besides the accumulators); 16: 6; 24: 4 (12 accumulators + the packed inputs
 * + one broadcast fit without spilling); past 24 rows, panels of 16 (a 32-wide
 * kernel would hold only 2 weight rows, 8 accumulators: 25 % slower here) */
Y8(k8_10, 10)
Y8(k8_1, 1)
Y8N(k16_6, 2, 6)
Y8N(k16_1, 2, 1)
Y8N(k24_4, 3, 4)
Y8N(k24_1, 3, 1)
static const RowBlock BLOCKS[] = {B(8, 1, 10, k8_10, k8_1), B(16, 1, 6, k16_6, k16_1), B(24, 1, 4, k24_4, k24_1),
                                  B(16, 2, 6, k16_6, k16_1), B(16, 3, 6, k16_6, k16_1), B(16, 4, 6, k16_6, k16_1)};
#endif
#undef B
enum { N_BLOCKS = sizeof BLOCKS / sizeof BLOCKS[0] };

/* what a product reads: fp32 weights, bf16 weights (widened), or bf16 products (the
 * inputs rounded to bf16 too) */
enum { ROW_F32, ROW_W16, ROW_B16 };

/* Steps q0.. (64 at most) of pack's dot layout, rows 0..wide of panel x (pr real). */
static void pack_dot_steps(float *xp, const float *x, int I, int steps, int q0, int pr, int wide) {
    int nq = steps - q0 < 64 ? steps - q0 : 64, i0 = 4 * q0, n = I - i0 < 4 * nq ? I - i0 : 4 * nq;
    uint16_t row[256];
    for (int r = 0; r < wide; r++) {
        if (r < pr) f32_to_bf16_n(row, x + (size_t)r * I + i0, n);
        memset(row + (r < pr ? n : 0), 0, sizeof(uint16_t) * (4 * nq - (r < pr ? n : 0)));
        for (int q = 0; q < nq; q++) memcpy(xp + ((size_t)(q0 + q) * wide + r) * 2, row + 4 * q, 8);
    }
}

/* Input k of pack's plain layout, rows 0..wide of panel x (pr real). */
static void pack_input(float *xp, const float *x, int mode, int I, int k, int pr, int wide) {
    float *d = xp + (size_t)k * wide;
    if (mode == ROW_B16) {
        for (int r = 0; r < pr; r++) d[r] = bf16_round(x[(size_t)r * I + k]);
    } else {
        for (int r = 0; r < pr; r++) d[r] = x[(size_t)r * I + k];
    }
    for (int r = pr; r < wide; r++) d[r] = 0.0f;
}

/* pack rows r0..r0+nr of in, transposed, panel by panel: xT[p][k][r], zero-padded to
 * the width; for the bf16 products' dot kernels xT[p][q][r][h], 32-bit words 2q + h of
 * two values each (K = 2 dot_steps floats per row). Split over k between the threads: at
 * 32 rows it is millions of values a step. A small block is packed without entering a
 * parallel region at all: libgomp allocates a team for each region it runs on one
 * thread (an if clause that is false), a few hundred allocations a decoding step. */
static void pack(float *xT, const float *in, int mode, int dot, int I, int K, int r0, int nr, int P, int wide) {
    int threads = (long)K * wide >= 8192;
    for (int p = 0; p < P; p++) {
        float *xp = xT + (size_t)p * K * wide;
        const float *x = in + (size_t)(r0 + p * wide) * I;
        int pr = nr - p * wide < wide ? (nr - p * wide > 0 ? nr - p * wide : 0) : wide;
        if (dot) { /* xp[q][r] = the 64-bit step q of row r (values 4q..4q+3, zeros past I) */
            int steps = K / 2;
            if (threads) {
#pragma omp parallel for schedule(static)
                for (int q0 = 0; q0 < steps; q0 += 64) pack_dot_steps(xp, x, I, steps, q0, pr, wide);
            } else {
                for (int q0 = 0; q0 < steps; q0 += 64) pack_dot_steps(xp, x, I, steps, q0, pr, wide);
            }
        } else if (threads) {
#pragma omp parallel for schedule(static)
            for (int k = 0; k < K; k++) pack_input(xp, x, mode, I, k, pr, wide);
        } else {
            for (int k = 0; k < K; k++) pack_input(xp, x, mode, I, k, pr, wide);
        }
    }
}

/* Outputs are collected in a tile per thread, [weight row][input row], and written to
 * out a chunk of weight rows at a time: row r's CHUNK outputs as one contiguous run.
 * Storing R outputs per input row straight into out touched 64 lines per kernel call;
 * where O's row stride maps those lines to few cache sets (O = 9728: 2 of L1's 64
 * sets) they were evicted between calls, and a product of 64 rows ran at half speed. */
enum { CHUNK = 48, TILE_ROWS = 64 }; /* a tile: CHUNK weight rows x up to 64 input rows */

/* out[r][q] = t[q][r] + bias[q] (or + 0), r < nr input rows, q < c weight rows: the
 * tile written out transposed, row r of out O floats after row r - 1. */
static void tile_store_scalar(float *out, int O, const float *t, int ldt, int r0, int nr, int q0, int c,
                              const float *bias) {
    for (int r = r0; r < nr; r++)
        for (int q = q0; q < c; q++) out[(size_t)r * O + q] = t[(size_t)q * ldt + r] + (bias ? bias[q] : 0.0f);
}
#ifdef __AVX512F__
/* v[i][j] -> v[j][i], 16 x 16 floats in registers */
static inline void transpose16(__m512 v[16]) {
    __m512 a[16], b[16];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i += 2) { /* pairs of rows, interleaved within each 128-bit lane */
        a[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i += 4) { /* quads: each lane holds a column's 4 values of rows i..i+3 */
        b[i] = _mm512_shuffle_ps(a[i], a[i + 2], 0x44);
        b[i + 1] = _mm512_shuffle_ps(a[i], a[i + 2], 0xee);
        b[i + 2] = _mm512_shuffle_ps(a[i + 1], a[i + 3], 0x44);
        b[i + 3] = _mm512_shuffle_ps(a[i + 1], a[i + 3], 0xee);
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) { /* lanes gathered across the four quads */
        a[i] = _mm512_shuffle_f32x4(b[i], b[i + 4], 0x88);
        a[i + 4] = _mm512_shuffle_f32x4(b[i], b[i + 4], 0xdd);
        a[i + 8] = _mm512_shuffle_f32x4(b[i + 8], b[i + 12], 0x88);
        a[i + 12] = _mm512_shuffle_f32x4(b[i + 8], b[i + 12], 0xdd);
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < 4; i++) {
        v[i] = _mm512_shuffle_f32x4(a[i], a[i + 8], 0x88);
        v[i + 4] = _mm512_shuffle_f32x4(a[i + 4], a[i + 12], 0x88);
        v[i + 8] = _mm512_shuffle_f32x4(a[i], a[i + 8], 0xdd);
        v[i + 12] = _mm512_shuffle_f32x4(a[i + 4], a[i + 12], 0xdd);
    }
}
#endif
/* The tile to out, 16 x 16 blocks transposed in registers (a column of the tile read
 * one float at a time was 8 % of decoding 64 rows); the same sums, the same bits. */
static void tile_store(float *out, int O, const float *t, int ldt, int nr, int c, const float *bias) {
    int r16 = 0, q16 = 0;
#ifdef __AVX512F__
    r16 = nr / 16 * 16, q16 = c / 16 * 16;
    for (int r = 0; r < r16; r += 16)
        for (int q = 0; q < q16; q += 16) {
            __m512 v[16];
            _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++)
                v[i] = _mm512_loadu_ps(t + (size_t)(q + i) * ldt + r);
            transpose16(v);
            __m512 b = bias ? _mm512_loadu_ps(bias + q) : _mm512_setzero_ps();
            _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++)
                _mm512_storeu_ps(out + (size_t)(r + i) * O + q, _mm512_add_ps(v[i], b));
        }
#endif
    tile_store_scalar(out, O, t, ldt, 0, r16, q16, c, bias);  /* the columns past the blocks */
    tile_store_scalar(out, O, t, ldt, r16, nr, 0, c, bias);   /* the rows past them */
}

static void rowwise(float *out, const float *in, const void *W, int mode, const float *bias, int N, int I, int O) {
    const int MAXW = BLOCKS[N_BLOCKS - 1].wide * BLOCKS[N_BLOCKS - 1].P;
    const int dot = mode == ROW_B16 && BLOCKS[0].big_d;
    /* packed floats per row and input */
#ifdef ROWWISE_DOT
    const int K = dot ? 2 * dot_steps(I) : I;
#else
    const int K = I;
#endif
    /* the packed block, kept between calls (per calling thread): allocated per call, its
     * pages were mapped and faulted in anew at every product once glibc served it by
     * mmap, which took a third of decoding's time at 8 rows */
    static _Thread_local float *packed;
    static _Thread_local size_t packed_floats;
    if (packed_floats < (size_t)K * MAXW)
        free(packed), packed = xaligned(sizeof(float) * (packed_floats = (size_t)K * MAXW));
    float *xT = packed; /* the OpenMP threads below see the caller's */
    for (int r0 = 0; r0 < N; r0 += MAXW) {
        int nr = N - r0 < MAXW ? N - r0 : MAXW, b = 0;
        while (BLOCKS[b].wide * BLOCKS[b].P < nr) b++; /* the narrowest block that holds them */
        const RowBlock *blk = &BLOCKS[b];
        int wide = blk->wide, P = blk->P, R = blk->R, ldt = P * wide;
        CHECK(ldt <= TILE_ROWS && R <= CHUNK);
        RowKernel big = dot ? blk->big_d : mode == ROW_F32 ? blk->big : blk->big_h;
        RowKernel one = dot ? blk->one_d : mode == ROW_F32 ? blk->one : blk->one_h;
        pack(xT, in, mode, dot, I, K, r0, nr, P, wide);
        /* blocks: O / R of R weight rows, then the O % R left one by one; each thread a
         * contiguous range of them, as schedule(static) would give */
        int full = O / R, n_blocks = full + O % R;
#pragma omp parallel
        {
            float t[CHUNK * TILE_ROWS] __attribute__((aligned(64)));
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            int jb = (int)((long)n_blocks * id / nt), je = (int)((long)n_blocks * (id + 1) / nt);
            for (int j = jb; j < je;) {
                int c0 = j < full ? j * R : full * R + (j - full), c = 0;
                for (; j < je && c + (j < full ? R : 1) <= CHUNK; j++) {
                    int o0 = c0 + c;
                    for (int p = 0; p < P && p * wide < nr; p++)
                        (j < full ? big : one)(t + (size_t)c * ldt + p * wide, ldt, xT + (size_t)p * K * wide, W, I, o0);
                    c += j < full ? R : 1;
                }
                tile_store(out + (size_t)r0 * O + c0, O, t, ldt, nr, c, bias ? bias + c0 : NULL);
            }
        }
    }
}

int matmul_rowwise_bf16_dot(void) {
    return BLOCKS[0].big_d != NULL;
}

void matmul_forward_rowwise(float *out, const float *in, const float *W, const float *bias, int N, int I, int O) {
    rowwise(out, in, W, ROW_F32, bias, N, I, O);
}

void matmul_forward_rowwise_bf16(float *out, const float *in, const uint16_t *W, const float *bias, int N, int I,
                                 int O) {
    rowwise(out, in, W, ROW_W16, bias, N, I, O);
}

void matmul_forward_rowwise_bf16_products(float *out, const float *in, const uint16_t *W, const float *bias, int N,
                                          int I, int O) {
    rowwise(out, in, W, ROW_B16, bias, N, I, O);
}

#else

/* the chain over fp32 weights W or bf16 weights W16, its inputs rounded to bf16 or not */
static void scalar_rowwise(float *out, const float *in, const float *W, const uint16_t *W16, int round_in,
                           const float *bias, int N, int I, int O) {
#pragma omp parallel for schedule(static)
    for (int o = 0; o < O; o++)
        for (int r = 0; r < N; r++) {
            float s = 0;
            for (int k = 0; k < I; k++) {
                size_t wi = (size_t)o * I + k;
                float x = in[(size_t)r * I + k];
                s = fmaf(W ? W[wi] : bf16_to_f32(W16[wi]), round_in ? bf16_round(x) : x, s);
            }
            out[(size_t)r * O + o] = s + (bias ? bias[o] : 0.0f);
        }
}

void matmul_forward_rowwise(float *out, const float *in, const float *W, const float *bias, int N, int I, int O) {
    scalar_rowwise(out, in, W, NULL, 0, bias, N, I, O);
}

void matmul_forward_rowwise_bf16(float *out, const float *in, const uint16_t *W, const float *bias, int N, int I,
                                 int O) {
    scalar_rowwise(out, in, NULL, W, 0, bias, N, I, O);
}

int matmul_rowwise_bf16_dot(void) {
    return 0;
}

void matmul_forward_rowwise_bf16_products(float *out, const float *in, const uint16_t *W, const float *bias, int N,
                                          int I, int O) {
    scalar_rowwise(out, in, NULL, W, 1, bias, N, I, O);
}

#endif
