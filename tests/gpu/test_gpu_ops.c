/* tests/gpu/test_gpu_ops.c — the GPU's kernels (gpu/ops.h) against the CPU's on
 * random inputs, where there is a GPU; on every machine, that the embedded PTX
 * defines every kernel the host's table names and that a machine without a GPU is
 * told so (gpu_open returns 0 with the reason, no error; with GRPO_REQUIRE_GPU=1, as
 * tools/gpu-check.sh runs it, a failure).
 *
 * Tolerances, |gpu - cpu| <= atol + rtol |cpu|: RMSNorm forward and backward 1e-6 +
 * 1e-5 (the GPU sums a row in fp32 over a block, the CPU in double); SwiGLU 1e-6 +
 * 1e-5 (ex2.approx against the CPU's vec_sigmoid); AdamW bit for bit (the same fp32
 * expressions in the same order, IEEE division and square root, no FMA
 * contraction), three steps, with and without a decay mask. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 11
#include "gpu_test.h"

/* The worst |got - want| - (atol + rtol |want|) over n values (> 0: outside). */
static double excess(const float *got, const float *want, size_t n, double atol, double rtol, double *worst_err) {
    double worst = -INFINITY;
    *worst_err = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]), x = isnan(got[i]) ? INFINITY : e - (atol + rtol * fabs(want[i]));
        if (x > worst) worst = x;
        if (e > *worst_err) *worst_err = e;
    }
    return worst;
}

static void compare(const char *what, const float *got, const float *want, size_t n, double atol, double rtol) {
    double e, x = excess(got, want, n, atol, rtol, &e);
    printf("  %-28s max |gpu - cpu| %.3g\n", what, e);
    T_CHECK(x <= 0, "%s: outside %g + %g |cpu| (max error %.3g)", what, atol, rtol, e);
}

static void check_rmsnorm(void) {
    enum { N = 37, C = 896, LDI = C + 3, LDO = C + 5 };
    float *in = randoms((size_t)N * LDI, 2.0f), *w = randoms(C, 1.5f), *dout = randoms((size_t)N * LDO, 1.0f);
    float *out = calloc((size_t)N * LDO, sizeof(float)), *g_out = calloc((size_t)N * LDO, sizeof(float));
    float rstd[N], g_rstd[N];
    rmsnorm_forward(out, rstd, in, w, N, C, LDO, LDI, 1e-6f);
    CUdeviceptr d_in = upload(in, sizeof(float) * N * LDI), d_w = upload(w, sizeof(float) * C),
                d_out = upload(g_out, sizeof(float) * N * LDO), d_rstd = upload(g_rstd, sizeof(float) * N);
    T_CHECK(!gpu_rmsnorm_forward(&dev, d_out, d_rstd, d_in, d_w, N, C, LDO, LDI, 1e-6f, &err), "%s", err.msg);
    download(g_out, d_out, sizeof(float) * N * LDO);
    download(g_rstd, d_rstd, sizeof(float) * N);
    compare("rmsnorm forward", g_out, out, (size_t)N * LDO, 1e-6, 1e-5);
    compare("rmsnorm forward: rstd", g_rstd, rstd, N, 1e-6, 1e-5);
    /* backward: din summed into random values, dw written then summed into */
    float *din = randoms((size_t)N * LDI, 1.0f), *g_din = malloc(sizeof(float) * N * LDI), dw[C], g_dw[C];
    memcpy(g_din, din, sizeof(float) * N * LDI);
    CUdeviceptr d_dout = upload(dout, sizeof(float) * N * LDO), d_din = upload(g_din, sizeof(float) * N * LDI),
                d_dw = upload(w, sizeof(float) * C);
    for (int write = 1; write >= 0; write--) {
        rmsnorm_backward(din, dw, dout, in, rstd, w, N, C, LDI, LDO, LDI, write);
        T_CHECK(!gpu_rmsnorm_backward(&dev, d_din, d_dw, d_dout, d_in, d_rstd, d_w, N, C, LDI, LDO, LDI, write, &err),
                "%s", err.msg);
    }
    download(g_din, d_din, sizeof(float) * N * LDI);
    download(g_dw, d_dw, sizeof(float) * C);
    compare("rmsnorm backward: din", g_din, din, (size_t)N * LDI, 1e-6, 1e-5);
    compare("rmsnorm backward: dw", g_dw, dw, C, 1e-6, 1e-5);
    gpu_free(&dev, d_in), gpu_free(&dev, d_w), gpu_free(&dev, d_out), gpu_free(&dev, d_rstd);
    gpu_free(&dev, d_dout), gpu_free(&dev, d_din), gpu_free(&dev, d_dw);
    free(in), free(w), free(dout), free(out), free(g_out), free(din), free(g_din);
}

static void check_swiglu(void) {
    enum { N = 53, F = 4864 };
    float *gu = randoms((size_t)N * 2 * F, 6.0f), *dout = randoms((size_t)N * F, 1.0f);
    float *out = malloc(sizeof(float) * N * F), *g_out = malloc(sizeof(float) * N * F);
    float *dgu = malloc(sizeof(float) * N * 2 * F), *g_dgu = malloc(sizeof(float) * N * 2 * F);
    swiglu_forward(out, gu, N, F);
    swiglu_backward(dgu, dout, gu, N, F);
    CUdeviceptr d_gu = upload(gu, sizeof(float) * N * 2 * F), d_dout = upload(dout, sizeof(float) * N * F), d_out, d_dgu;
    T_CHECK(!gpu_alloc(&dev, &d_out, sizeof(float) * N * F, &err) && !gpu_alloc(&dev, &d_dgu, sizeof(float) * N * 2 * F, &err),
            "%s", err.msg);
    T_CHECK(!gpu_swiglu_forward(&dev, d_out, d_gu, N, F, &err) && !gpu_swiglu_backward(&dev, d_dgu, d_dout, d_gu, N, F, &err),
            "%s", err.msg);
    download(g_out, d_out, sizeof(float) * N * F);
    download(g_dgu, d_dgu, sizeof(float) * N * 2 * F);
    compare("swiglu forward", g_out, out, (size_t)N * F, 1e-6, 1e-5);
    compare("swiglu backward", g_dgu, dgu, (size_t)N * 2 * F, 1e-6, 1e-5);
    gpu_free(&dev, d_gu), gpu_free(&dev, d_dout), gpu_free(&dev, d_out), gpu_free(&dev, d_dgu);
    free(gu), free(dout), free(out), free(g_out), free(dgu), free(g_dgu);
}

static void check_adamw(int masked) {
    enum { n = 100003 };
    AdamWConfig c;
    adamw_config_default(&c);
    c.weight_decay = masked ? 0.1 : 0.0;
    AdamW opt;
    adamw_init(&opt, n);
    float *p = randoms(n, 1.0f), *g = randoms(n, 1e-3f), *gp = malloc(sizeof(float) * n);
    float *gm = calloc(n, sizeof(float)), *gv = calloc(n, sizeof(float));
    uint8_t *mask = malloc(n);
    for (size_t i = 0; i < n; i++) mask[i] = frand() > 0;
    CUdeviceptr d_p = upload(p, sizeof(float) * n), d_m = upload(gm, sizeof(float) * n), d_v = upload(gv, sizeof(float) * n),
                d_g = upload(g, sizeof(float) * n), d_mask = masked ? upload(mask, n) : 0;
    for (int step = 1; step <= 3; step++) {
        double lr = 1e-3 * step;
        adamw_step(&opt, p, g, masked ? mask : NULL, lr, &c);
        AdamWStep s = adamw_step_scalars(step, lr, &c);
        T_CHECK(!gpu_adamw_step(&dev, d_p, d_m, d_v, d_g, d_mask, n, &s, &err), "%s", err.msg);
    }
    download(gp, d_p, sizeof(float) * n);
    download(gm, d_m, sizeof(float) * n);
    download(gv, d_v, sizeof(float) * n);
    long diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&gp[i], &p[i], 4) || memcmp(&gm[i], &opt.m[i], 4) || memcmp(&gv[i], &opt.v[i], 4);
    printf("  adamw (%s)%*s %ld of %d elements differ from the CPU's bits\n", masked ? "decay mask" : "no decay",
           masked ? 5 : 7, "", diff, n);
    T_CHECK(diff == 0, "adamw (%s): %ld elements differ from the CPU's", masked ? "masked decay" : "no decay", diff);
    gpu_free(&dev, d_p), gpu_free(&dev, d_m), gpu_free(&dev, d_v), gpu_free(&dev, d_g), gpu_free(&dev, d_mask);
    adamw_free(&opt);
    free(p), free(g), free(gp), free(gm), free(gv), free(mask);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d, %d multiprocessors, %.1f GiB\n", dev.name, dev.cc_major, dev.cc_minor, dev.sms,
           dev.total_bytes / 1073741824.0);
    check_rmsnorm();
    check_swiglu();
    check_adamw(0);
    check_adamw(1);
    gpu_close(&dev);
}

int main(void) {
    T_CHECK(strstr(gpu_kernels_ptx, ".target sm_80") != NULL, "the embedded PTX is not for sm_80");
    return gpu_test_main("test_gpu_ops", check_all);
}
