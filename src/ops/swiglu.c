/* ops/swiglu.c — SwiGLU activation out = silu(gate) * up, on a fused [gate | up] row.
 * The sigmoid is vec_sigmoid (eight at a time with AVX2), the same bits in every
 * build. */
#include "ops/ops.h"
#include "ops/vec.h"

void swiglu_forward(float *out, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        float *o = out + (size_t)n * F;
        int f = 0;
#ifdef __AVX2__
        for (; f + 8 <= F; f += 8) {
            __m256 vg = _mm256_loadu_ps(g + f);
            _mm256_storeu_ps(o + f, _mm256_mul_ps(_mm256_mul_ps(vg, vec_sigmoid8(vg)), _mm256_loadu_ps(u + f)));
        }
#endif
        for (; f < F; f++) o[f] = g[f] * vec_sigmoid(g[f]) * u[f];
    }
}

/* d/dg silu(g) = s * (1 + g * (1 - s)) with s = sigmoid(g). */
void swiglu_backward(float *dgu, const float *dout, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F, *d = dout + (size_t)n * F;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
        int f = 0;
#ifdef __AVX2__
        __m256 one = _mm256_set1_ps(1.0f);
        for (; f + 8 <= F; f += 8) {
            __m256 vg = _mm256_loadu_ps(g + f), vd = _mm256_loadu_ps(d + f), s = vec_sigmoid8(vg);
            _mm256_storeu_ps(du + f, _mm256_mul_ps(vd, _mm256_mul_ps(vg, s)));
            __m256 slope = _mm256_add_ps(one, _mm256_mul_ps(vg, _mm256_sub_ps(one, s)));
            _mm256_storeu_ps(dg + f, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(vd, _mm256_loadu_ps(u + f)), s), slope));
        }
#endif
        for (; f < F; f++) {
            float s = vec_sigmoid(g[f]);
            du[f] = d[f] * (g[f] * s);
            dg[f] = d[f] * u[f] * s * (1.0f + g[f] * (1.0f - s));
        }
    }
}
