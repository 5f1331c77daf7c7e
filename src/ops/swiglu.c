/* ops/swiglu.c — SwiGLU activation out = silu(gate) * up, on a fused [gate | up] row. */
#include <math.h>

#include "ops/ops.h"

void swiglu_forward(float *out, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        float *o = out + (size_t)n * F;
        for (int f = 0; f < F; f++) {
            float s = 1.0f / (1.0f + expf(-g[f]));
            o[f] = g[f] * s * u[f];
        }
    }
}

/* d/dg silu(g) = s * (1 + g * (1 - s)) with s = sigmoid(g). */
void swiglu_backward(float *dgu, const float *dout, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F, *d = dout + (size_t)n * F;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
        for (int f = 0; f < F; f++) {
            float s = 1.0f / (1.0f + expf(-g[f]));
            float silu = g[f] * s;
            du[f] = d[f] * silu;
            dg[f] = d[f] * u[f] * s * (1.0f + g[f] * (1.0f - s));
        }
    }
}
