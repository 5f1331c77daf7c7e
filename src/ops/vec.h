/* ops/vec.h — small inner-loop helpers (dot product, y += a x) written so they
 * vectorise without -ffast-math: independent accumulator lanes with AVX-512 when
 * the build targets it, a portable multi-accumulator loop otherwise. */
#ifndef GRPO_OPS_VEC_H
#define GRPO_OPS_VEC_H

#ifdef __AVX512F__
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

/* y[n] += a * x[n] */
static inline void vec_axpy(float *y, float a, const float *x, int n) {
    int i = 0;
#ifdef __AVX512F__
    __m512 va = _mm512_set1_ps(a);
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] += a * x[i];
}

#endif
