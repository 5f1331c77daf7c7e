/* tests/gpu/gpu_test.h — what every GPU test shares: the device and its error, a
 * seeded uniform stream (GPU_TEST_SEED, defined by the test before including this),
 * upload/download checked, and the run: on the GPU where gpu_open finds one, on the
 * tests' emulated GPU otherwise (tests/machine/gpu_emulator.c), never on the
 * emulator with GRPO_REQUIRE_GPU=1 (tools/gpu-check.sh on the GPU machine: no GPU
 * there is a failure). Each test's own comparisons stay in the test. */
#ifndef GRPO_TESTS_GPU_GPU_TEST_H
#define GRPO_TESTS_GPU_GPU_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/device.h"
#include "machine/gpu_emulator.h"
#include "testutil.h"


#ifndef GPU_TEST_SEED
#error "define GPU_TEST_SEED before including gpu_test.h"
#endif

static GpuDevice dev;
static GrpoErr err;
static uint64_t seed = GPU_TEST_SEED;
/* 1 while the checks run on the emulated GPU */
static int emulated;

static inline float frand(void) { /* uniform in [-1, 1) */
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((seed >> 40) / 8388608.0 - 1.0);
}

static inline float *randoms(size_t n, float scale) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = frand() * scale;
    return x;
}

static inline CUdeviceptr upload(const void *x, size_t bytes) {
    CUdeviceptr p;
    T_CHECK(!gpu_alloc(&dev, &p, bytes, &err) && !gpu_put(&dev, p, x, bytes, &err), "%s", err.msg);
    return p;
}

static inline void download(void *x, CUdeviceptr p, size_t bytes) {
    T_CHECK(!gpu_sync(&dev, &err) && !gpu_get(&dev, x, p, bytes, &err), "%s", err.msg);
}

/* The bf16 tests' comparison: got against want, n values: |got - want| <= atol
 * max|want| + rtol |want| each, and ||got - want|| <= l2 ||want||; prints the
 * figures seen. */
static inline void gpu_test_compare(const char *what, const float *got, const float *want, size_t n, double atol,
                                    double rtol, double l2) {
    double top = 0, worst = 0, worst_rel = 0, e2 = 0, w2 = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - want[i];
        top = fmax(top, fabs(want[i])), e2 += e * e, w2 += (double)want[i] * want[i];
    }
    long bad = 0, same = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= atol * top + rtol * fabs(want[i]))) bad++;
        worst = isnan(got[i]) ? INFINITY : fmax(worst, e);
        if (fabs(want[i]) > 1e-3 * top) worst_rel = fmax(worst_rel, e / fabs(want[i]));
        same += memcmp(&got[i], &want[i], 4) == 0;
    }
    double norm = w2 > 0 ? sqrt(e2 / w2) : sqrt(e2);
    printf("  %-12s max |gpu - cpu| %.2g max|cpu|, ||gpu - cpu|| %.2g ||cpu||, worst relative (|cpu| > 1e-3 max) "
           "%.2g, %ld of %zu bit for bit\n", what, top > 0 ? worst / top : worst, norm, worst_rel, same, n);
    T_CHECK(bad == 0, "%s: %ld of %zu values outside %g max|cpu| + %g |cpu| (worst %.3g)", what, bad, n, atol,
            rtol, worst);
    T_CHECK(norm <= l2, "%s: ||gpu - cpu|| = %.3g ||cpu|| (expected <= %g)", what, norm, l2);
}

/* The test's main: the embedded PTX holds every kernel of the table, then
 * check_all() on the GPU, or on the emulated GPU where there is none (unless
 * GRPO_REQUIRE_GPU=1); check_all closes dev. Returns t_summary's exit code. */
static inline int gpu_test_main(const char *name, void (*check_all)(void)) {
    const char *missing = gpu_ptx_missing_kernel();
    T_CHECK(!missing, "the embedded PTX has no kernel %s", missing);
    char why[256] = "";
    int r = gpu_open(&dev, why, sizeof why, &err);
    T_CHECK(r >= 0, "gpu_open: %s", err.msg);
    if (r == 1) check_all();
    if (r != 0) return t_summary(name);
    T_CHECK(why[0] != 0, "no GPU, and no reason given");
    const char *need = getenv("GRPO_REQUIRE_GPU");
    T_CHECK(!need || strcmp(need, "1"), "GRPO_REQUIRE_GPU=1 and no GPU: %s", why);
    if (need && !strcmp(need, "1")) return t_summary(name);
    printf("no GPU here (%s): the kernels run on the emulated GPU\n", why);
    test_gpu_machine(1);
    emulated = 1;
    r = gpu_open(&dev, why, sizeof why, &err);
    T_CHECK(r == 1, "the emulated GPU did not open: %s%s", why, err.msg);
    if (r == 1) check_all();
    emulated = 0;
    test_gpu_machine(0);
    return t_summary(name);
}

#endif
