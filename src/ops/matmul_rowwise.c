/* ops/matmul_rowwise.c — y = x W^T + b for few rows (decoding), our own AVX-512 kernel.
 *
 * Two reasons it exists beside OpenBLAS:
 *  - speed at 1..32 rows, where a decode step streams every weight once: the weight
 *    is read in place (no packing), W[o, k] is broadcast against a packed block of
 *    up to 32 input rows, 6 or 12 weight rows at a time;
 *  - batch invariance: every output element is one sequential fused-multiply-add
 *    chain over k, whatever the number of rows or the block it falls in, so a
 *    sequence's logits do not depend on which other sequences share the batch
 *    (generation must not depend on chunking).
 * Without AVX-512 a scalar loop with the same chain (fmaf) is used. */
#include <math.h>
#include <string.h>

#include "core/check.h"
#include "ops/ops.h"

#ifdef __AVX512F__
#include <immintrin.h>

/* R weight rows x 32 input rows (two zmm per weight row) */
#define KERNEL32(R)                                                                            \
    static void k32_##R(float *out, const float *xT, const float *W, const float *bias, int I,  \
                        int O, int o0, int r0, int nr) {                                        \
        __m512 a0[R], a1[R];                                                                   \
        _Pragma("GCC unroll 16") for (int j = 0; j < R; j++) a0[j] = a1[j] = _mm512_setzero_ps();                       \
        const float *w = W + (size_t)o0 * I;                                                   \
        for (int k = 0; k < I; k++) {                                                          \
            __m512 b0 = _mm512_load_ps(xT + (size_t)k * 32), b1 = _mm512_load_ps(xT + (size_t)k * 32 + 16); \
            _Pragma("GCC unroll 16") for (int j = 0; j < R; j++) {                                                      \
                __m512 s = _mm512_set1_ps(w[(size_t)j * I + k]);                              \
                a0[j] = _mm512_fmadd_ps(s, b0, a0[j]);                                        \
                a1[j] = _mm512_fmadd_ps(s, b1, a1[j]);                                        \
            }                                                                                  \
        }                                                                                      \
        float t[32] __attribute__((aligned(64)));                                              \
        _Pragma("GCC unroll 16") for (int j = 0; j < R; j++) {                                                          \
            _mm512_store_ps(t, a0[j]);                                                         \
            _mm512_store_ps(t + 16, a1[j]);                                                    \
            float b = bias ? bias[o0 + j] : 0.0f;                                              \
            for (int r = 0; r < nr; r++) out[(size_t)(r0 + r) * O + o0 + j] = t[r] + b;       \
        }                                                                                      \
    }

/* R weight rows x 16 input rows (one zmm per weight row) */
#define KERNEL16(R)                                                                            \
    static void k16_##R(float *out, const float *xT, const float *W, const float *bias, int I,  \
                        int O, int o0, int r0, int nr) {                                        \
        __m512 a[R];                                                                           \
        _Pragma("GCC unroll 16") for (int j = 0; j < R; j++) a[j] = _mm512_setzero_ps();                                \
        const float *w = W + (size_t)o0 * I;                                                   \
        for (int k = 0; k < I; k++) {                                                          \
            __m512 b0 = _mm512_load_ps(xT + (size_t)k * 16);                                  \
            _Pragma("GCC unroll 16") for (int j = 0; j < R; j++)                                                        \
                a[j] = _mm512_fmadd_ps(_mm512_set1_ps(w[(size_t)j * I + k]), b0, a[j]);       \
        }                                                                                      \
        float t[16] __attribute__((aligned(64)));                                              \
        _Pragma("GCC unroll 16") for (int j = 0; j < R; j++) {                                                          \
            _mm512_store_ps(t, a[j]);                                                          \
            float b = bias ? bias[o0 + j] : 0.0f;                                              \
            for (int r = 0; r < nr; r++) out[(size_t)(r0 + r) * O + o0 + j] = t[r] + b;       \
        }                                                                                      \
    }

KERNEL32(6)
KERNEL32(1)
KERNEL16(12)
KERNEL16(1)

void matmul_forward_rowwise(float *out, const float *in, const float *W, const float *bias,
                            int N, int I, int O) {
    float *xT = xaligned(sizeof(float) * (size_t)I * 32);
    for (int r0 = 0; r0 < N; r0 += 32) {
        int nr = N - r0 < 32 ? N - r0 : 32;
        int wide = nr > 16 ? 32 : 16;
        /* pack rows r0.. transposed: xT[k][r], zero-padded to the block width */
        for (int k = 0; k < I; k++)
            for (int r = 0; r < wide; r++)
                xT[(size_t)k * wide + r] = r < nr ? in[(size_t)(r0 + r) * I + k] : 0.0f;
        int R = wide == 32 ? 6 : 12;
        int full = O / R;
#pragma omp parallel for schedule(static)
        for (int blk = 0; blk < full + (O % R); blk++) {
            if (blk < full) {
                if (wide == 32) k32_6(out, xT, W, bias, I, O, blk * R, r0, nr);
                else k16_12(out, xT, W, bias, I, O, blk * R, r0, nr);
            } else {
                int o = full * R + (blk - full);
                if (wide == 32) k32_1(out, xT, W, bias, I, O, o, r0, nr);
                else k16_1(out, xT, W, bias, I, O, o, r0, nr);
            }
        }
    }
    free(xT);
}

#else

void matmul_forward_rowwise(float *out, const float *in, const float *W, const float *bias,
                            int N, int I, int O) {
#pragma omp parallel for schedule(static)
    for (int o = 0; o < O; o++)
        for (int r = 0; r < N; r++) {
            float s = 0;
            for (int k = 0; k < I; k++) s = fmaf(W[(size_t)o * I + k], in[(size_t)r * I + k], s);
            out[(size_t)r * O + o] = s + (bias ? bias[o] : 0.0f);
        }
}

#endif
