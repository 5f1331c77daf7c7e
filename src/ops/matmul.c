/* ops/matmul.c — linear layers y = x W^T + b, forward and backward, on gemm_f32,
 * the same with bf16 operands on gemm_bf16 (mixed precision), and on a frozen W
 * held in bf16 (gemm_f32_b16). */
#include "core/check.h"
#include "ops/gemm.h"
#include "ops/ops.h"

static void bias_rows(float *out, const float *bias, int N, int O) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) out[(size_t)n * O + o] = bias[o];
}

static void bias_backward(float *dbias, const float *dout, int N, int O, int write) {
#pragma omp parallel for schedule(static)
    for (int o = 0; o < O; o++) {
        float s = 0;
        for (int n = 0; n < N; n++) s += dout[(size_t)n * O + o];
        dbias[o] = write ? s : dbias[o] + s;
    }
}

void matmul_forward(float *out, const float *in, const float *W, const float *bias,
                    int N, int I, int O) {
    if (bias) bias_rows(out, bias, N, O);
    gemm_f32(0, 1, N, O, I, 1.0f, in, I, W, I, bias ? 1.0f : 0.0f, out, O);
}

void matmul_backward(float *din, float *dW, float *dbias, const float *dout,
                     const float *in, const float *W, int N, int I, int O, int write_dw) {
    if (din) gemm_f32(0, 0, N, I, O, 1.0f, dout, O, W, I, 0.0f, din, I);
    if (dW) gemm_f32(1, 0, O, I, N, 1.0f, dout, O, in, I, write_dw ? 0.0f : 1.0f, dW, I);
    if (dbias) bias_backward(dbias, dout, N, O, write_dw);
}

static void forward_bf16(float *out, GemmBf16Operand in, const uint16_t *W, const float *bias, int N, int I, int O) {
    if (bias) bias_rows(out, bias, N, O);
    gemm_bf16(0, 1, N, O, I, 1.0f, in, (GemmBf16Operand){.h = W, .ld = I}, bias ? 1.0f : 0.0f, out, O);
}

/* scratch: dout is the caller's scratch (then dout == scratch), not read again; else
 * dout16 takes dout's bf16 values */
static void backward_bf16(float *din, float *dW, float *dbias, const float *dout, float *scratch, uint16_t *dout16,
                          GemmBf16Operand in, const uint16_t *W, int N, int I, int O, int write_dw) {
    if (dbias) bias_backward(dbias, dout, N, O, write_dw);
    /* both products read dout: rounded once, into dout itself where it is scratch (a
     * gate/up product's dout is the largest operand a layer's backward rounds) */
    GemmBf16Operand d = !(din && dW) ? (GemmBf16Operand){.f = dout, .ld = O}
                        : scratch    ? gemm_bf16_round_in_place(scratch, N, O, O)
                                     : gemm_bf16_round(dout, N, O, O, dout16);
    if (din) gemm_bf16(0, 0, N, I, O, 1.0f, d, (GemmBf16Operand){.h = W, .ld = I}, 0.0f, din, I);
    if (dW) gemm_bf16(1, 0, O, I, N, 1.0f, d, in, write_dw ? 0.0f : 1.0f, dW, I);
}

void matmul_forward_bf16(float *out, const float *in, const uint16_t *W, const float *bias, int N, int I, int O) {
    forward_bf16(out, (GemmBf16Operand){.f = in, .ld = I}, W, bias, N, I, O);
}

void matmul_backward_bf16(float *din, float *dW, float *dbias, const float *dout, uint16_t *dout16, const float *in,
                          const uint16_t *W, int N, int I, int O, int write_dw) {
    backward_bf16(din, dW, dbias, dout, NULL, dout16, (GemmBf16Operand){.f = in, .ld = I}, W, N, I, O, write_dw);
}

void matmul_forward_bf16_in16(float *out, const uint16_t *in, const uint16_t *W, const float *bias, int N, int I,
                              int O) {
    forward_bf16(out, (GemmBf16Operand){.h = in, .ld = I}, W, bias, N, I, O);
}

void matmul_backward_bf16_in16(float *din, float *dW, float *dbias, const float *dout, uint16_t *dout16,
                               const uint16_t *in, const uint16_t *W, int N, int I, int O, int write_dw) {
    backward_bf16(din, dW, dbias, dout, NULL, dout16, (GemmBf16Operand){.h = in, .ld = I}, W, N, I, O, write_dw);
}

void matmul_backward_bf16_scratch(float *din, float *dW, float *dbias, float *dout, const float *in,
                                  const uint16_t *in16, const uint16_t *W, int N, int I, int O, int write_dw) {
    CHECK(!in != !in16);
    backward_bf16(din, dW, dbias, dout, dout, NULL, (GemmBf16Operand){.f = in, .h = in16, .ld = I}, W, N, I, O,
                  write_dw);
}

void matmul_backward_bf16_dout16(float *din, float *dW, const uint16_t *dout16, const uint16_t *in, const uint16_t *W,
                                 int N, int I, int O, int write_dw) {
    GemmBf16Operand d = {.h = dout16, .ld = O};
    if (din) gemm_bf16(0, 0, N, I, O, 1.0f, d, (GemmBf16Operand){.h = W, .ld = I}, 0.0f, din, I);
    if (dW) gemm_bf16(1, 0, O, I, N, 1.0f, d, (GemmBf16Operand){.h = in, .ld = I}, write_dw ? 0.0f : 1.0f, dW, I);
}

void matmul_forward_weight(float *out, const float *in, WeightMatrix W, const float *bias, int N, int I, int O) {
    if (W.bf16_products) {
        matmul_forward_bf16(out, in, W.w16, bias, N, I, O);
    } else if (W.w16) {
        if (bias) bias_rows(out, bias, N, O);
        gemm_f32_b16(0, 1, N, O, I, 1.0f, in, I, W.w16, I, bias ? 1.0f : 0.0f, out, O);
    } else {
        matmul_forward(out, in, W.w, bias, N, I, O);
    }
}

void matmul_backward_weight(float *din, float *dW, float *dbias, const float *dout, uint16_t *dout16, const float *in,
                            WeightMatrix W, int N, int I, int O, int write_dw) {
    if (W.bf16_products) {
        matmul_backward_bf16(din, dW, dbias, dout, dout16, in, W.w16, N, I, O, write_dw);
    } else if (W.w16) {
        CHECK(!dW); /* held in bf16: frozen */
        if (din) gemm_f32_b16(0, 0, N, I, O, 1.0f, dout, O, W.w16, I, 0.0f, din, I);
        if (dbias) bias_backward(dbias, dout, N, O, write_dw);
    } else {
        matmul_backward(din, dW, dbias, dout, in, W.w, N, I, O, write_dw);
    }
}
