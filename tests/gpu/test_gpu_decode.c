/* tests/gpu/test_gpu_decode.c — decoding's batch-invariant product on the GPU
 * (gpu/ops.h: gpu_matmul_rowwise_bf16, gpu/kernels/rowwise.cu) against the CPU's
 * matmul_forward_rowwise_bf16_products, on the GPU where there is one and on the tests'
 * emulated GPU otherwise.
 *
 * Tolerances, per element, u = 2^-24, S = sum_k |bf16(x_k) w_k| + |bias|: against the
 * CPU's, 2 (I + 2) u S (each sum of exact products is within (I + 1) u S of the exact
 * one, in any order); against a float64 reference, (L + 14) u S with L = 8 ceil(I / 2048)
 * the longest chain one thread sums — the GPU's order (short chains, then a 5-level
 * butterfly, then 8 warps and the bias) is much tighter than the CPU's, and a product
 * summed twice or dropped shows here. Forward only: decoding has no backward.
 *
 * Batch invariance, bit for bit: 33 rows computed at once, each row alone, the rows in
 * calls of 2 and of 7 (the last call shorter), and the 33 rows in reverse order (each
 * row among other neighbours) give every row the same bits; and so does an input not
 * on 16 bytes, read element by element instead of by 16-byte vectors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 35
#include "gpu_test.h"

static CUdeviceptr scratch(size_t bytes) {
    CUdeviceptr p;
    T_CHECK(!gpu_alloc(&dev, &p, bytes, &err), "%s", err.msg);
    return p;
}

/* S and the float64 reference of each element, from the rounded inputs. */
static void reference(double *S, double *ref, const float *x, const uint16_t *W16, const float *bias, int n, int I,
                      int O) {
    for (int r = 0; r < n; r++)
        for (int o = 0; o < O; o++) {
            double s = 0, m = 0;
            for (int k = 0; k < I; k++) {
                double p = (double)bf16_round(x[(size_t)r * I + k]) * bf16_to_f32(W16[(size_t)o * I + k]);
                s += p, m += fabs(p);
            }
            ref[(size_t)r * O + o] = s + (bias ? bias[o] : 0.0);
            S[(size_t)r * O + o] = m + (bias ? fabs(bias[o]) : 0.0);
        }
}

/* got within bound u S[i] of want, element by element. */
static void compare(const char *what, const float *got, const float *want_f, const double *want_d, const double *S,
                    size_t count, double bound) {
    double worst = 0;
    long bad = 0;
    for (size_t i = 0; i < count; i++) {
        double want = want_f ? (double)want_f[i] : want_d[i], e = fabs((double)got[i] - want) / (0x1p-24 * S[i]);
        if (!(e <= bound)) bad++;
        worst = isnan(got[i]) ? INFINITY : fmax(worst, e);
    }
    printf("    %-26s max %6.2f u S (bound %.0f u S)\n", what, worst, bound);
    T_CHECK(bad == 0, "%s: %ld of %zu elements outside %.0f u S (worst %.3g u S)", what, bad, count, bound, worst);
}

/* rows [r0, r0 + m) of x (on the device at d_x) through the GPU into out rows r0.. */
static void product(CUdeviceptr d_out, CUdeviceptr d_x, CUdeviceptr d_W, CUdeviceptr d_bias, int r0, int m, int I,
                    int O) {
    T_CHECK(!gpu_matmul_rowwise_bf16(&dev, d_out + sizeof(float) * (size_t)r0 * O, d_x + sizeof(float) * (size_t)r0 * I,
                                     d_W, d_bias, m, I, O, &err),
            "%s", err.msg);
}

/* Every row's bits whether computed with all n rows, alone, in calls of 2 and 7, or
 * among the rows reversed. */
static void check_invariance(const float *x, const float *all, CUdeviceptr d_x, CUdeviceptr d_W, CUdeviceptr d_bias,
                             int n, int I, int O) {
    size_t count = (size_t)n * O;
    float *got = malloc(sizeof(float) * count), *xr = malloc(sizeof(float) * (size_t)n * I);
    CUdeviceptr d_out = scratch(sizeof(float) * count);
    const int sizes[] = {1, 2, 7};
    for (int s = 0; s < 3; s++) {
        for (int r0 = 0; r0 < n; r0 += sizes[s])
            product(d_out, d_x, d_W, d_bias, r0, n - r0 < sizes[s] ? n - r0 : sizes[s], I, O);
        download(got, d_out, sizeof(float) * count);
        long diff = 0;
        for (size_t i = 0; i < count; i++) diff += memcmp(&got[i], &all[i], sizeof(float)) != 0;
        printf("    rows in calls of %d: %ld of %zu values differ from the %d-row call's bits\n", sizes[s], diff, count,
               n);
        T_CHECK(diff == 0, "I %d O %d: rows in calls of %d: %ld values differ from the %d-row call", I, O, sizes[s],
                diff, n);
    }
    for (int r = 0; r < n; r++) memcpy(xr + (size_t)r * I, x + (size_t)(n - 1 - r) * I, sizeof(float) * I);
    CUdeviceptr d_xr = upload(xr, sizeof(float) * (size_t)n * I);
    product(d_out, d_xr, d_W, d_bias, 0, n, I, O);
    download(got, d_out, sizeof(float) * count);
    long diff = 0;
    for (int r = 0; r < n; r++)
        diff += memcmp(got + (size_t)r * O, all + (size_t)(n - 1 - r) * O, sizeof(float) * O) != 0;
    printf("    the rows reversed: %ld of %d rows differ\n", diff, n);
    T_CHECK(diff == 0, "I %d O %d: the rows reversed: %ld rows differ from their bits in order", I, O, diff);
    gpu_free(&dev, d_out), gpu_free(&dev, d_xr);
    free(got), free(xr);
}

static void check_shape(int n, int I, int O, int with_bias) {
    size_t count = (size_t)n * O;
    printf("  n %d, I %d, O %d, %s\n", n, I, O, with_bias ? "bias" : "no bias");
    float *x = randoms((size_t)n * I, 2.0f), *Wf = randoms((size_t)O * I, 0.5f);
    float *bias = with_bias ? randoms(O, 1.0f) : NULL;
    uint16_t *W16 = malloc(2 * (size_t)O * I);
    f32_to_bf16_n(W16, Wf, (size_t)O * I);
    float *cpu = malloc(sizeof(float) * count), *gpu = malloc(sizeof(float) * count);
    double *S = malloc(sizeof(double) * count), *ref = malloc(sizeof(double) * count);
    matmul_forward_rowwise_bf16_products(cpu, x, W16, bias, n, I, O);
    reference(S, ref, x, W16, bias, n, I, O);
    CUdeviceptr d_x = upload(x, sizeof(float) * (size_t)n * I), d_W = upload(W16, 2 * (size_t)O * I);
    CUdeviceptr d_bias = bias ? upload(bias, sizeof(float) * O) : 0, d_out = scratch(sizeof(float) * count);
    product(d_out, d_x, d_W, d_bias, 0, n, I, O);
    download(gpu, d_out, sizeof(float) * count);
    compare("against the CPU's", gpu, cpu, NULL, S, count, 2.0 * (I + 2));
    compare("against float64", gpu, NULL, ref, S, count, 8.0 * ((I + 2047) / 2048) + 14);
    check_invariance(x, gpu, d_x, d_W, d_bias, n, I, O);
    if (I % 8 == 0) { /* the input 4 bytes past 16: element loads, the same sums, the same bits */
        CUdeviceptr d_x4 = scratch(sizeof(float) * ((size_t)n * I + 1));
        T_CHECK(!gpu_put(&dev, d_x4 + 4, x, sizeof(float) * (size_t)n * I, &err), "%s", err.msg);
        float *again = malloc(sizeof(float) * count);
        product(d_out, d_x4 + 4, d_W, d_bias, 0, n, I, O);
        download(again, d_out, sizeof(float) * count);
        int same = !memcmp(again, gpu, sizeof(float) * count);
        printf("    the input off 16 bytes (element loads): %s\n", same ? "the same bits" : "other bits");
        T_CHECK(same, "I %d: the input off 16 bytes: not the bits of the 16-byte loads", I);
        gpu_free(&dev, d_x4);
        free(again);
    }
    gpu_free(&dev, d_x), gpu_free(&dev, d_W), gpu_free(&dev, d_bias), gpu_free(&dev, d_out);
    free(x), free(Wf), free(bias), free(W16), free(cpu), free(gpu), free(S), free(ref);
}

/* Sizes it refuses: one line naming them. */
static void check_bad_sizes(void) {
    GrpoErr e = {0};
    T_CHECK(gpu_matmul_rowwise_bf16(&dev, 0, 0, 0, 0, -1, 8, 8, &e) == -1 && strstr(e.msg, "n -1"),
            "n = -1: expected an error naming n, got '%s'", e.msg);
    T_CHECK(gpu_matmul_rowwise_bf16(&dev, 0, 0, 0, 0, 1, 0, 8, &e) == -1 && strstr(e.msg, "I 0"),
            "I = 0: expected an error naming I, got '%s'", e.msg);
    T_CHECK(gpu_matmul_rowwise_bf16(&dev, 0, 0, 0, 0, 0, 8, 8, &e) == 0, "n = 0: expected nothing done, got '%s'",
            e.msg);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_bad_sizes();
    check_shape(33, 67, 37, 1);   /* I % 8 != 0: element loads and a short last group; a partial last block */
    check_shape(33, 2088, 19, 0); /* 16-byte loads; threads with 1 or 2 groups; 9 passes of 4 rows, the last of 1 */
    check_shape(9, 4100, 11, 1);  /* 3 groups for some threads, the short one last */
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_decode", check_all);
}
