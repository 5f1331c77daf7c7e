/* tests/gpu/test_gpu_linear.c — the linear layer on the GPU (gpu/ops.h:
 * gpu_matmul_forward_bf16 / gpu_matmul_backward_bf16, on cuBLASLt) against the CPU's
 * matmul_forward_bf16 / matmul_backward_bf16_in16, on the GPU where there is one and
 * on the tests' emulated GPU and cuBLASLt otherwise: odd sizes, with and without a
 * bias, the weight gradient written then added to, the input's bf16 rounding kept
 * for the backward.
 *
 * Tolerances: the products per element within 4 (K + 1) u S of the CPU's, u = 2^-24,
 * S the sum of the magnitudes of what the element adds up (its K products, the bias
 * or the value added to; K = I forward, O for din, 2N for dW over two backwards):
 * both sums are within (K + 1) u S of the exact one in any order, twice that for a
 * GPU's blocked sums. The input's bf16 copy and dbias bit for bit (the same rounding;
 * the same fp32 sum over the rows in the same order). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gemm.h"
#include "gpu/ops.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 31
#include "gpu_test.h"

static CUdeviceptr scratch(size_t bytes) {
    CUdeviceptr p;
    T_CHECK(!gpu_alloc(&dev, &p, bytes, &err), "%s", err.msg);
    return p;
}

/* got against the CPU's want, |got - want| <= 4 (K + 1) u S[i] element by element. */
static void compare(const char *what, const float *got, const float *want, const double *S, size_t n, int K) {
    double worst = 0;
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (0x1p-24 * S[i]);
        if (!(e <= 4.0 * (K + 1))) bad++;
        worst = isnan(got[i]) ? INFINITY : fmax(worst, e);
    }
    printf("  %-30s max |gpu - cpu| %6.2f u S (bound %d u S)\n", what, worst, 4 * (K + 1));
    T_CHECK(bad == 0, "%s: %ld elements outside 4 (K+1) u S of the CPU's (worst %.3g u S)", what, bad, worst);
}

static void compare_bits(const char *what, const void *got, const void *want, size_t n, size_t size) {
    long diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp((const char *)got + i * size, (const char *)want + i * size, size) != 0;
    printf("  %-30s %ld of %zu values differ from the CPU's bits\n", what, diff, n);
    T_CHECK(diff == 0, "%s: %ld values differ from the CPU's", what, diff);
}

enum { N = 45, I = 67, O = 38 };

/* S for C[r, c] += sum_k |X(r, k) Y(k, c)|: X[r, k] at x[r * ldx_r + k * ldx_k], likewise Y. */
static void magnitudes(double *S, int R, int C, int K, const float *x, int xr, int xk, const float *y, int yk, int yc) {
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += fabs((double)x[r * xr + k * xk] * y[k * yk + c * yc]);
            S[(size_t)r * C + c] += s;
        }
}

static void widen16(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}

static void check_forward(const float *in, const uint16_t *W16, const float *bias, CUdeviceptr d_W16, CUdeviceptr d_in16) {
    float *out = malloc(sizeof(float) * N * O), *got = malloc(sizeof(float) * N * O), *in_w = malloc(sizeof(float) * N * I);
    float *W_w = malloc(sizeof(float) * O * I);
    uint16_t *in16 = malloc(2 * N * I), *got16 = malloc(2 * N * I);
    double *S = calloc((size_t)N * O, sizeof(double));
    f32_to_bf16_n(in16, in, (size_t)N * I);
    widen16(in_w, in16, (size_t)N * I), widen16(W_w, W16, (size_t)O * I);
    magnitudes(S, N, O, I, in_w, I, 1, W_w, 1, I);
    CUdeviceptr d_in = upload(in, sizeof(float) * N * I), d_bias = bias ? upload(bias, sizeof(float) * O) : 0,
                d_out = scratch(sizeof(float) * N * O);
    matmul_forward_bf16(out, in, W16, bias, N, I, O);
    T_CHECK(!gpu_matmul_forward_bf16(&dev, d_out, d_in, d_in16, d_W16, d_bias, N, I, O, &err), "%s", err.msg);
    download(got, d_out, sizeof(float) * N * O);
    download(got16, d_in16, 2 * N * I);
    for (int i = 0; bias && i < N * O; i++) S[i] += fabs(bias[i % O]);
    compare(bias ? "forward (bias)" : "forward (no bias)", got, out, S, (size_t)N * O, I);
    compare_bits("forward: the input's bf16 copy", got16, in16, (size_t)N * I, 2);
    /* the input given in bf16 already (in 0): the same product, the same bits */
    float *again = malloc(sizeof(float) * N * O);
    T_CHECK(!gpu_matmul_forward_bf16(&dev, d_out, 0, d_in16, d_W16, d_bias, N, I, O, &err), "%s", err.msg);
    download(again, d_out, sizeof(float) * N * O);
    T_CHECK(!memcmp(again, got, sizeof(float) * N * O), "forward from in16: not the bits of the forward from in");
    gpu_free(&dev, d_in), gpu_free(&dev, d_bias), gpu_free(&dev, d_out);
    free(out), free(got), free(in_w), free(W_w), free(in16), free(got16), free(S), free(again);
}

/* Two backwards (dW and dbias written, then added to), against the CPU's. */
static void check_backward(const uint16_t *in16, const uint16_t *W16, CUdeviceptr d_in16, CUdeviceptr d_W16) {
    float *dout[2] = {randoms((size_t)N * O, 1.0f), randoms((size_t)N * O, 1.0f)}, *in_w = malloc(sizeof(float) * N * I);
    float *W_w = malloc(sizeof(float) * O * I), *dout_w = malloc(sizeof(float) * N * O);
    float *din = malloc(sizeof(float) * N * I), *dW = malloc(sizeof(float) * O * I), dbias[O];
    float *g_din = malloc(sizeof(float) * N * I), *g_dW = malloc(sizeof(float) * O * I), g_dbias[O];
    uint16_t *dout16 = malloc(2 * N * O);
    double *S_din = calloc((size_t)N * I, sizeof(double)), *S_dW = calloc((size_t)O * I, sizeof(double));
    widen16(in_w, in16, (size_t)N * I), widen16(W_w, W16, (size_t)O * I);
    CUdeviceptr d_din = scratch(sizeof(float) * N * I), d_dW = scratch(sizeof(float) * O * I),
                d_dbias = scratch(sizeof(float) * O), d_dout16 = scratch(2 * N * O);
    for (int pass = 0; pass < 2; pass++) {
        int write = pass == 0;
        CUdeviceptr d_dout = upload(dout[pass], sizeof(float) * N * O);
        matmul_backward_bf16_in16(din, dW, dbias, dout[pass], dout16, in16, W16, N, I, O, write);
        T_CHECK(!gpu_matmul_backward_bf16(&dev, d_din, d_dW, d_dbias, d_dout, d_dout16, d_in16, d_W16, N, I, O, write,
                                          &err),
                "%s", err.msg);
        for (int i = 0; i < N * O; i++) dout_w[i] = bf16_round(dout[pass][i]);
        magnitudes(S_dW, O, I, N, dout_w, 1, O, in_w, I, 1);
        if (pass == 1) magnitudes(S_din, N, I, O, dout_w, O, 1, W_w, I, 1);
        gpu_free(&dev, d_dout);
    }
    download(g_din, d_din, sizeof(float) * N * I);
    download(g_dW, d_dW, sizeof(float) * O * I);
    download(g_dbias, d_dbias, sizeof(float) * O);
    compare("backward: din (written)", g_din, din, S_din, (size_t)N * I, O);
    compare("backward: dW (written, added)", g_dW, dW, S_dW, (size_t)O * I, 2 * N);
    compare_bits("backward: dbias (written, added)", g_dbias, dbias, O, 4);
    gpu_free(&dev, d_din), gpu_free(&dev, d_dW), gpu_free(&dev, d_dbias), gpu_free(&dev, d_dout16);
    free(dout[0]), free(dout[1]), free(in_w), free(W_w), free(dout_w), free(din), free(dW), free(g_din), free(g_dW);
    free(dout16), free(S_din), free(S_dW);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    float *in = randoms((size_t)N * I, 1.0f), *Wf = randoms((size_t)O * I, 1.0f), *bias = randoms(O, 1.0f);
    uint16_t *W16 = malloc(2 * O * I), *in16 = malloc(2 * N * I);
    f32_to_bf16_n(W16, Wf, (size_t)O * I);
    f32_to_bf16_n(in16, in, (size_t)N * I);
    CUdeviceptr d_W16 = upload(W16, 2 * O * I), d_in16 = scratch(2 * N * I);
    check_forward(in, W16, NULL, d_W16, d_in16);
    check_forward(in, W16, bias, d_W16, d_in16); /* leaves in16 on the GPU for the backward */
    check_backward(in16, W16, d_in16, d_W16);
    gpu_free(&dev, d_W16), gpu_free(&dev, d_in16);
    free(in), free(Wf), free(bias), free(W16), free(in16);
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_linear", check_all);
}
