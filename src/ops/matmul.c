/* ops/matmul.c — linear layers y = x W^T + b, forward and backward, on gemm_f32. */
#include "ops/gemm.h"
#include "ops/ops.h"

void matmul_forward(float *out, const float *in, const float *W, const float *bias,
                    int N, int I, int O) {
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++) out[(size_t)n * O + o] = bias[o];
    }
    gemm_f32(0, 1, N, O, I, 1.0f, in, I, W, I, bias ? 1.0f : 0.0f, out, O);
}

void matmul_backward(float *din, float *dW, float *dbias, const float *dout,
                     const float *in, const float *W, int N, int I, int O) {
    if (din) gemm_f32(0, 0, N, I, O, 1.0f, dout, O, W, I, 1.0f, din, I);
    if (dW) gemm_f32(1, 0, O, I, N, 1.0f, dout, O, in, I, 1.0f, dW, I);
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < O; o++) {
            float s = 0;
            for (int n = 0; n < N; n++) s += dout[(size_t)n * O + o];
            dbias[o] += s;
        }
    }
}
