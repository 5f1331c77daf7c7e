/* gpu/kernels/swiglu.cu — SwiGLU on a fused [gate | up] row, out = silu(g) u, and its
 * backward, as ops/swiglu.c: a grid-stride loop over the N x F outputs. */
#include "device.h"

DEVICE float sigmoid(float x) { return 1.0f / (1.0f + exp_fast(-x)); }

KERNEL void swiglu_forward(float *out, const float *gu, int N, int F) {
    u64 total = (u64)N * F;
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < total; i += (u64)grid_dim_x() * block_dim_x()) {
        u64 n = i / F, f = i % F;
        float g = gu[n * 2 * F + f], u = gu[n * 2 * F + F + f];
        out[i] = g * sigmoid(g) * u;
    }
}

/* dgu = [d u s (1 + g (1 - s)) | d g s], s = sigmoid(g): written over. */
KERNEL void swiglu_backward(float *dgu, const float *dout, const float *gu, int N, int F) {
    u64 total = (u64)N * F;
    for (u64 i = (u64)block_x() * block_dim_x() + thread_x(); i < total; i += (u64)grid_dim_x() * block_dim_x()) {
        u64 n = i / F, f = i % F;
        float g = gu[n * 2 * F + f], u = gu[n * 2 * F + F + f], d = dout[i], s = sigmoid(g);
        dgu[n * 2 * F + F + f] = d * (g * s);
        dgu[n * 2 * F + f] = d * u * s * (1.0f + g * (1.0f - s));
    }
}
