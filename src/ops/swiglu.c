/* ops/swiglu.c — SwiGLU activation out = silu(gate) * up, on a fused [gate | up] row.
 * The sigmoid is vec_sigmoid (eight at a time with AVX2), the same bits in every
 * build. The bf16 variants (mixed precision) run the same row kernels a block at a
 * time and round what they write, so that a layer's MLP makes one pass over its
 * [N, 2F] values each way instead of three. */
#include "ops/ops.h"
#include "ops/vec.h"

/* out[f] = silu(g[f]) * u[f], f < n */
static void swiglu_row(float *o, const float *g, const float *u, int n) {
    int f = 0;
#ifdef __AVX2__
    for (; f + 8 <= n; f += 8) {
        __m256 vg = _mm256_loadu_ps(g + f);
        _mm256_storeu_ps(o + f, _mm256_mul_ps(_mm256_mul_ps(vg, vec_sigmoid8(vg)), _mm256_loadu_ps(u + f)));
    }
#endif
    for (; f < n; f++) o[f] = g[f] * vec_sigmoid(g[f]) * u[f];
}

/* d/dg silu(g) = s * (1 + g * (1 - s)) with s = sigmoid(g). */
static void swiglu_grad_row(float *dg, float *du, const float *d, const float *g, const float *u, int n) {
    int f = 0;
#ifdef __AVX2__
    __m256 one = _mm256_set1_ps(1.0f);
    for (; f + 8 <= n; f += 8) {
        __m256 vg = _mm256_loadu_ps(g + f), vd = _mm256_loadu_ps(d + f), s = vec_sigmoid8(vg);
        _mm256_storeu_ps(du + f, _mm256_mul_ps(vd, _mm256_mul_ps(vg, s)));
        __m256 slope = _mm256_add_ps(one, _mm256_mul_ps(vg, _mm256_sub_ps(one, s)));
        _mm256_storeu_ps(dg + f, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(vd, _mm256_loadu_ps(u + f)), s), slope));
    }
#endif
    for (; f < n; f++) {
        float s = vec_sigmoid(g[f]);
        du[f] = d[f] * (g[f] * s);
        dg[f] = d[f] * u[f] * s * (1.0f + g[f] * (1.0f - s));
    }
}

void swiglu_forward(float *out, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F;
        swiglu_row(out + (size_t)n * F, g, g + F, F);
    }
}

void swiglu_backward(float *dgu, const float *dout, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F;
        float *dg = dgu + (size_t)n * 2 * F;
        swiglu_grad_row(dg, dg + F, dout + (size_t)n * F, g, g + F, F);
    }
}

/* Columns a block at a time: a block's fp32 values fit the stack and stay in L1. */
#define SWIGLU_BLOCK 256

void swiglu_forward_bf16(uint16_t *out16, uint16_t *gu16, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        uint16_t *o = out16 + (size_t)n * F, *g16 = gu16 + (size_t)n * 2 * F, *u16 = g16 + F;
        float tmp[SWIGLU_BLOCK];
        for (int f = 0; f < F; f += SWIGLU_BLOCK) {
            int b = F - f < SWIGLU_BLOCK ? F - f : SWIGLU_BLOCK;
            swiglu_row(tmp, g + f, u + f, b);
            f32_to_bf16_n(o + f, tmp, (size_t)b);
            f32_to_bf16_n(g16 + f, g + f, (size_t)b);
            f32_to_bf16_n(u16 + f, u + f, (size_t)b);
        }
    }
}

void swiglu_backward_bf16(uint16_t *dgu16, const float *dout, const uint16_t *gu16, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const uint16_t *g16 = gu16 + (size_t)n * 2 * F, *u16 = g16 + F;
        uint16_t *dg16 = dgu16 + (size_t)n * 2 * F, *du16 = dg16 + F;
        const float *d = dout + (size_t)n * F;
        float g[SWIGLU_BLOCK], u[SWIGLU_BLOCK], dg[SWIGLU_BLOCK], du[SWIGLU_BLOCK];
        for (int f = 0; f < F; f += SWIGLU_BLOCK) {
            int b = F - f < SWIGLU_BLOCK ? F - f : SWIGLU_BLOCK;
            bf16_to_f32_n(g, g16 + f, (size_t)b);
            bf16_to_f32_n(u, u16 + f, (size_t)b);
            swiglu_grad_row(dg, du, d + f, g, u, b);
            f32_to_bf16_n(dg16 + f, dg, (size_t)b);
            f32_to_bf16_n(du16 + f, du, (size_t)b);
        }
    }
}
