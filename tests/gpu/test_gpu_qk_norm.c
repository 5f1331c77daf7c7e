/* tests/gpu/test_gpu_qk_norm.c — Qwen3's q/k norm on the GPU (gpu_qk_norm_forward /
 * _backward, gpu/kernels/qk_norm.cu) against the CPU's, which model/transformer.c
 * runs as one ops/rmsnorm.c call per head (rmsnorm_forward / rmsnorm_backward with the
 * qkv row's strides; each norm's first head writes its weight gradient under
 * write_dw), on random inputs, on the GPU where there is one and on the tests'
 * emulated GPU otherwise.
 *
 * Shapes: q/k in a qkv row of (H + 2 Hkv) D (ld QKV), the output in a [N, (H+Hkv) D]
 * buffer (the CPU's qk) and in place (the GPU layer's); D 32 (a multiple of the
 * kernel's 8 lanes), 20 (4 leftover terms), 24 with 16 + 4 heads (two blocks of heads);
 * rows with scales from 1e-3 to 1e2. Backward: din accumulated onto random values,
 * dwq/dwk written then added to.
 *
 * Tolerance: 1e-6 + 1e-6 |cpu| per element (out, rstd, din, dw). The kernels repeat
 * the CPU's arithmetic step for step (its 8 lanes of double sums in its order, sqrt
 * and division in double, the rows of a weight sum in order, the heads added in
 * order), so the values are expected to be the CPU's bits: the count of values that
 * differ is printed, and on the emulated GPU (the host's IEEE arithmetic) any is a
 * failure. Bad input: sizes or strides that do not fit, one line naming them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 3503
#include "gpu_test.h"

/* |got - want| <= 1e-6 + 1e-6 |want| for n values; prints the worst and the values
 * not bit for bit, which fail on the emulated GPU. */
static void compare(const char *what, const float *got, const float *want, size_t n) {
    size_t bad = 0, differ = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= 1e-6 + 1e-6 * fabs(want[i]))) bad++;
        if (isnan(got[i])) e = INFINITY;
        worst = fmax(worst, e);
        differ += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    }
    printf("  %-34s %6zu values: max |gpu - cpu| %.3g, %zu not the CPU's bits\n", what, n, worst, differ);
    T_CHECK(bad == 0, "%s: %zu of %zu values outside 1e-6 + 1e-6 |cpu| (worst %.3g)", what, bad, n, worst);
    T_CHECK(!emulated || differ == 0, "%s: %zu of %zu values differ from the CPU's bits on the emulated GPU", what,
            differ, n);
}

static float *download_floats(CUdeviceptr p, size_t n) {
    float *x = malloc(sizeof(float) * n);
    download(x, p, sizeof(float) * n);
    return x;
}

/* One shape: forward (to a qk buffer and in place), then backward, against the CPU. */
static void check_shape(int N, int H, int Hkv, int D) {
    int nh = H + Hkv, QK = nh * D, QKV = (H + 2 * Hkv) * D;
    float eps = 1e-6f;
    printf(" N %d, H %d, Hkv %d, D %d\n", N, H, Hkv, D);
    float *qkv = randoms((size_t)N * QKV, 1.0f), *wq = randoms(D, 1.0f), *wk = randoms(D, 1.0f);
    for (int n = 0; n < N; n++) { /* rows of very different scales: r from ~1e-2 to ~1e3 */
        float s = powf(10.0f, (float)(n % 6) - 3.0f);
        for (int i = 0; i < QKV; i++) qkv[(size_t)n * QKV + i] *= s;
    }
    float *qk = malloc(sizeof(float) * N * QK), *rstd = malloc(sizeof(float) * nh * N);
    for (int h = 0; h < nh; h++)
        rmsnorm_forward(qk + h * D, rstd + (size_t)h * N, qkv + h * D, h < H ? wq : wk, N, D, QK, QKV, eps);

    CUdeviceptr d_qkv = upload(qkv, sizeof(float) * N * QKV), d_wq = upload(wq, 4 * D), d_wk = upload(wk, 4 * D);
    CUdeviceptr d_qk, d_rstd;
    T_CHECK(!gpu_alloc(&dev, &d_qk, sizeof(float) * N * QK, &err) && !gpu_alloc(&dev, &d_rstd, 4 * nh * N, &err), "%s",
            err.msg);
    T_CHECK(!gpu_qk_norm_forward(&dev, d_qk, d_rstd, d_qkv, d_wq, d_wk, N, H, Hkv, D, QK, QKV, eps, &err), "%s",
            err.msg);
    float *got = download_floats(d_qk, (size_t)N * QK), *got_r = download_floats(d_rstd, (size_t)nh * N);
    compare("forward, out [N, (H+Hkv) D]", got, qk, (size_t)N * QK);
    compare("forward, rstd [H+Hkv, N]", got_r, rstd, (size_t)nh * N);
    free(got), free(got_r);

    /* in place, in the qkv row (the GPU layer's form): v untouched */
    CUdeviceptr d_in = upload(qkv, sizeof(float) * N * QKV);
    T_CHECK(!gpu_qk_norm_forward(&dev, d_in, d_rstd, d_in, d_wq, d_wk, N, H, Hkv, D, QKV, QKV, eps, &err), "%s",
            err.msg);
    float *inplace = download_floats(d_in, (size_t)N * QKV), *want = malloc(sizeof(float) * N * QKV);
    for (int n = 0; n < N; n++) {
        memcpy(want + (size_t)n * QKV, qk + (size_t)n * QK, sizeof(float) * QK);
        memcpy(want + (size_t)n * QKV + QK, qkv + (size_t)n * QKV + QK, sizeof(float) * Hkv * D);
    }
    compare("forward in place, the qkv rows", inplace, want, (size_t)N * QKV);
    free(inplace), free(want);
    gpu_free(&dev, d_in);

    /* backward: din (= dqkv, ld QKV) += ..., dwq/dwk written, then added to */
    float *dqk = randoms((size_t)N * QK, 1.0f), *dqkv = randoms((size_t)N * QKV, 1.0f);
    float *dwq = malloc(4 * D), *dwk = malloc(4 * D);
    CUdeviceptr d_dqk = upload(dqk, sizeof(float) * N * QK), d_dqkv = upload(dqkv, sizeof(float) * N * QKV);
    CUdeviceptr d_dwq, d_dwk, d_part;
    T_CHECK(!gpu_alloc(&dev, &d_dwq, 4 * D, &err) && !gpu_alloc(&dev, &d_dwk, 4 * D, &err) &&
                !gpu_alloc(&dev, &d_part, sizeof(float) * nh * D, &err),
            "%s", err.msg);
    for (int pass = 0; pass < 2; pass++) {
        int wr = pass == 0;
        for (int h = 0; h < nh; h++)
            rmsnorm_backward(dqkv + h * D, h < H ? dwq : dwk, dqk + h * D, qkv + h * D, rstd + (size_t)h * N,
                             h < H ? wq : wk, N, D, QKV, QK, QKV, wr && (h == 0 || h == H));
        T_CHECK(!gpu_qk_norm_backward(&dev, d_dqkv, d_dwq, d_dwk, d_part, d_dqk, d_qkv, d_rstd, d_wq, d_wk, N, H, Hkv,
                                      D, QKV, QK, QKV, wr, &err),
                "%s", err.msg);
        float *g_dx = download_floats(d_dqkv, (size_t)N * QKV), *g_dwq = download_floats(d_dwq, D),
              *g_dwk = download_floats(d_dwk, D);
        compare(wr ? "backward, din (+=)" : "backward again, din (+=)", g_dx, dqkv, (size_t)N * QKV);
        compare(wr ? "backward, dwq written" : "backward again, dwq added", g_dwq, dwq, D);
        compare(wr ? "backward, dwk written" : "backward again, dwk added", g_dwk, dwk, D);
        free(g_dx), free(g_dwq), free(g_dwk);
    }
    CUdeviceptr all[] = {d_qkv, d_wq, d_wk, d_qk, d_rstd, d_dqk, d_dqkv, d_dwq, d_dwk, d_part};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(&dev, all[i]);
    free(qkv), free(wq), free(wk), free(qk), free(rstd), free(dqk), free(dqkv), free(dwq), free(dwk);
}

/* Sizes that do not fit are refused with one line naming them, nothing launched. */
static void check_refused(void) {
    T_CHECK(gpu_qk_norm_forward(&dev, 0, 0, 0, 0, 0, 4, 2, 1, 32, 64, 96, 1e-6f, &err) == -1 &&
                strstr(err.msg, "strides"),
            "a stride below (H + Hkv) D was not refused (%s)", err.msg);
    printf("  refused: %s\n", err.msg);
    T_CHECK(gpu_qk_norm_backward(&dev, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 2, 1, 0, 0, 0, 0, 1, &err) == -1 &&
                strstr(err.msg, "D 0"),
            "D = 0 was not refused (%s)", err.msg);
    T_CHECK(gpu_qk_norm_backward(&dev, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 2, 1, 8, 24, 24, 24, 1, &err) == -1 &&
                strstr(err.msg, "part"),
            "a weight gradient without its scratch was not refused (%s)", err.msg);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_shape(37, 4, 2, 32);
    check_shape(13, 2, 1, 20);
    check_shape(9, 16, 4, 24);
    check_refused();
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_qk_norm", check_all);
}
