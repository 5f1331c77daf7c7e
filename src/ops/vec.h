/* ops/vec.h — small inner-loop helpers (dot product, y += a x, exp and its sum)
 * written so they vectorise without -ffast-math: independent accumulator lanes with
 * AVX-512 when the build targets it, a portable multi-accumulator loop otherwise. */
#ifndef GRPO_OPS_VEC_H
#define GRPO_OPS_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

static inline float vec_dot(const float *a, const float *b, int n) {
    int i = 0;
#ifdef __AVX512F__
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    }
    for (; i + 16 <= n; i += 16)
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#else
    float acc[8] = {0};
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* The largest of x[0..n), from -inf, NaN values passed over: `x > m ? x : m` in each
 * of 16 lanes, then over the lanes. Maximum is exact, so any order gives this value. */
static inline float vec_max(const float *x, int n) {
    float m = -INFINITY;
    int i = 0;
#ifdef __AVX2__
    __m256 a = _mm256_set1_ps(-INFINITY), b = a;
    for (; i + 16 <= n; i += 16) { /* vmaxps returns its second operand unless the first is larger */
        a = _mm256_max_ps(_mm256_loadu_ps(x + i), a);
        b = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), b);
    }
    float lane[8];
    _mm256_storeu_ps(lane, _mm256_max_ps(a, b));
    for (int j = 0; j < 8; j++) m = lane[j] > m ? lane[j] : m;
#endif
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* y[n] += a * x[n] */
static inline void vec_axpy(float *y, float a, const float *x, int n) {
    int i = 0;
#ifdef __AVX512F__
    __m512 va = _mm512_set1_ps(a);
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
#endif
#ifdef __AVX2__
    __m256 va8 = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va8, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] += a * x[i];
}

/* e^x in float for x <= 0, within 2 ulp: x = n ln2 + r, |r| <= ln2/2, e^r by
 * Cephes' degree-7 polynomial, times 2^n; below -87 (2^-126) it is 0. Every
 * build computes the same bits (the vector versions do the scalar's operations,
 * fused where it fuses), so sampling does not depend on the machine. */
#define VEC_EXP_MIN (-87.0f)
#define VEC_EXP_COEFFS 1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, \
                       1.6666665459e-1f, 5.0000001201e-1f
static inline float vec_exp_neg(float x) {
    static const float c[6] = {VEC_EXP_COEFFS};
    if (!(x >= VEC_EXP_MIN)) return 0.0f;
    float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    float y = c[0];
    for (int i = 1; i < 6; i++) y = fmaf(y, r, c[i]);
    y = fmaf(y, r * r, r) + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

#ifdef __AVX2__
static inline __m256 vec_exp_neg8(__m256 x) {
    static const float c[6] = {VEC_EXP_COEFFS};
    __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(VEC_EXP_MIN), _CMP_GE_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(VEC_EXP_MIN));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(c[0]);
    for (int i = 1; i < 6; i++) y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(c[i]));
    y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), keep);
}
#endif

/* The logistic sigmoid 1 / (1 + e^-x) from e^-|x| (vec_exp_neg: every build gives
 * the same bits; NaN gives 1, so silu(NaN) = NaN). */
static inline float vec_sigmoid(float x) {
    float e = vec_exp_neg(-fabsf(x)), r = 1.0f / (1.0f + e);
    return x < 0 ? e * r : r;
}

#ifdef __AVX2__
static inline __m256 vec_sigmoid8(__m256 x) {
    __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    __m256 e = vec_exp_neg8(_mm256_sub_ps(zero, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)));
    __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, e));
    return _mm256_blendv_ps(r, _mm256_mul_ps(e, r), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
}
#endif

/* e[i] = exp((x[i] - shift) * scale) for x[i] <= shift, scale > 0 (e may be x);
 * returns their sum, taken in double over 8 lanes (lane i mod 8) added in a fixed
 * order: the same bits in every build. */
static inline double vec_exp_sum(float *e, const float *x, float shift, float scale, int n) {
    double lane[8] = {0};
    int i = 0;
#ifdef __AVX2__
    __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    for (; i + 8 <= n; i += 8) {
        __m256 v = vec_exp_neg8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs), vk));
        _mm256_storeu_ps(e + i, v);
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    _mm256_storeu_pd(lane, lo);
    _mm256_storeu_pd(lane + 4, hi);
#else
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            e[i + j] = vec_exp_neg((x[i + j] - shift) * scale);
            lane[j] += e[i + j];
        }
#endif
    for (int j = 0; i < n; i++, j++) {
        e[i] = vec_exp_neg((x[i] - shift) * scale);
        lane[j] += e[i];
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

#endif

