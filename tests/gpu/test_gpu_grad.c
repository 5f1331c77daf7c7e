/* tests/gpu/test_gpu_grad.c — the step's gradient on the device (gpu/kernels/grad.cu):
 * gpu_grad_sumsq_blocks against optim/grad.c, bit for bit — each block's sum of
 * squares as the CPU takes it (in order, in double), and grad_norm_parts of them equal
 * to grad_norm of the same gradient — for sizes under one block, a ragged last
 * block, and more blocks than one CUDA block holds (128); a NaN anywhere gives a NaN
 * norm; gpu_grad_scale multiplies as the CPU's clip does (the same bits); and
 * grad_clip_factor is 1 where grad_clip_norm leaves the gradient alone. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"
#include "optim/optim.h"
#define GPU_TEST_SEED 53
#include "gpu_test.h"

/* The CPU's block sums, as grad_norm takes them (optim/grad.c). */
static void cpu_parts(double *part, const float *g, size_t n) {
    for (size_t b = 0; b * GRAD_NORM_BLOCK < n; b++) {
        size_t hi = (b + 1) * GRAD_NORM_BLOCK < n ? (b + 1) * GRAD_NORM_BLOCK : n;
        double s = 0.0;
        for (size_t j = b * GRAD_NORM_BLOCK; j < hi; j++) s += (double)g[j] * (double)g[j];
        part[b] = s;
    }
}

static void check_norm(size_t n, int with_nan) {
    size_t nb = (n + GRAD_NORM_BLOCK - 1) / GRAD_NORM_BLOCK;
    float *g = randoms(n, 0.3f);
    for (size_t i = 0; i < n; i += 97) g[i] *= 1e-6f; /* small and large squares mixed: the order matters */
    if (with_nan) g[n / 2] = NAN;
    double *want = malloc(sizeof(double) * nb), *got = malloc(sizeof(double) * nb);
    cpu_parts(want, g, n);
    CUdeviceptr d_g = upload(g, sizeof(float) * n), d_part = 0;
    T_CHECK(!gpu_alloc(&dev, &d_part, sizeof(double) * nb, &err), "%s", err.msg);
    T_CHECK(!gpu_grad_sumsq_blocks(&dev, d_part, d_g, n, &err), "%s", err.msg);
    download(got, d_part, sizeof(double) * nb);
    double norm = grad_norm_parts(got, nb), cpu = grad_norm(g, n);
    if (with_nan) {
        T_CHECK(isnan(norm), "n %zu with a NaN: the norm is %g", n, norm);
    } else {
        T_CHECK(!memcmp(got, want, sizeof(double) * nb), "n %zu: a block's sum of squares differs from the CPU's", n);
        T_CHECK(!memcmp(&norm, &cpu, sizeof norm), "n %zu: norm %.17g, grad_norm %.17g", n, norm, cpu);
        printf("  %zu values (%zu blocks): the CPU's block sums and norm (%.6g) bit for bit\n", n, nb, norm);
    }
    gpu_free(&dev, d_g), gpu_free(&dev, d_part);
    free(g), free(want), free(got);
}

static void check_scale(void) {
    enum { N = 5000 };
    float *g = randoms(N, 2.0f), *want = malloc(sizeof(float) * N), *got = malloc(sizeof(float) * N);
    memcpy(want, g, sizeof(float) * N);
    double norm = grad_clip_norm(want, N, 0.5); /* the CPU's clip: scales in place */
    float c = grad_clip_factor(norm, 0.5);
    T_CHECK(c < 1.0f, "the clip to 0.5 of a norm of %g has factor %g", norm, c);
    CUdeviceptr d_g = upload(g, sizeof(float) * N);
    T_CHECK(!gpu_grad_scale(&dev, d_g, N, c, &err), "%s", err.msg);
    download(got, d_g, sizeof(float) * N);
    T_CHECK(!memcmp(got, want, sizeof(float) * N), "gpu_grad_scale: not the CPU's clipped gradient");
    T_CHECK(grad_clip_factor(norm, 0) == 1.0f && grad_clip_factor(NAN, 1) == 1.0f &&
                grad_clip_factor(INFINITY, 1) == 1.0f && grad_clip_factor(0.5, 1) == 1.0f,
            "grad_clip_factor is not 1 where grad_clip_norm leaves the gradient alone");
    printf("  gpu_grad_scale by %.6g (clip %.3g to 0.5): the CPU's clipped gradient bit for bit\n", c, norm);
    gpu_free(&dev, d_g);
    free(g), free(want), free(got);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_norm(100, 0);
    check_norm(3 * GRAD_NORM_BLOCK + 17, 0);
    check_norm(3 * GRAD_NORM_BLOCK + 17, 1);
    check_norm(130 * (size_t)GRAD_NORM_BLOCK + 5, 0); /* two CUDA blocks of 128 gradient blocks */
    check_scale();
    gpu_close(&dev);
}

int main(void) { return gpu_test_main("test_gpu_grad", check_all); }
