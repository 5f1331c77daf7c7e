/* tests/gpu/test_gpu_logprob.c — the LM head's chunk loop on the GPU
 * (gpu/logprob.h: gpu_logprob_forward / gpu_logprob_backward, and a frozen head's
 * pw / gpu_logprob_backward_frozen) against the CPU's logprob_forward /
 * logprob_backward / logprob_backward_frozen (ops/logprob.c) on random h and W: on the GPU
 * where gpu_open finds one, on the tests' emulated GPU and cuBLASLt otherwise
 * (GRPO_REQUIRE_GPU=1, as tools/gpu-check.sh runs it: no GPU is a failure).
 *
 * The cases: fp32 and bf16 products, temperatures 1 and 0.7, with and without an
 * entropy gradient, rows without a target among the others (and a batch with none),
 * N rows with targets not a multiple of the chunk (a short last chunk), dh added to
 * and dW written then added to by a second backward, as the CPU's.
 * What each must meet (the products' sums are in cuBLASLt's order, the chunk
 * kernels' in a tree: not the CPU's bits):
 * - lse, logprob: 1e-6 + 1e-6 |cpu|; entropy: 1e-6 + 1e-5 |cpu| (logits of size
 *   ~5 from C = 64 products: their sums' order moves each by about 1e-7);
 * - dh, dW: within 1e-5 (fp32) or 2e-3 (bf16) of the largest |cpu| of the tensor.
 *   With bf16 products dz is rounded to bf16 once, and on a GPU a dz an ulp from the
 *   CPU's (its logits summed in another order) can round to the neighbouring bf16
 *   value (2^-8 relative, one term of V): the bound is that rounding's, not the
 *   sums'. The emulated cuBLASLt sums in the CPU's order, so here no dz rounds
 *   apart and the bf16 results agree to 1e-6 of the largest;
 * - rows without a target: logprob, lse, entropy exactly 0, dh exactly unchanged;
 *   no row with a target and write_dw: dW exactly 0;
 * - a frozen head's shortcut (check_frozen): pw and dh in the bounds of dh above;
 * - bad input: a target past the vocabulary and more rows than the scratch holds,
 *   each one message naming it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gemm.h"
#include "gpu/logprob.h"
#include "gpu/ops.h"
#include "ops/ops.h"
#include "machine/gpu_emulator_blas.h"
#define GPU_TEST_SEED 35
#include "gpu_test.h"

static int irand(int n) { return (int)((frand() + 1.0f) * 0.5f * n) % n; }

/* got against want element by element, |got - want| <= atol + rtol |want| (of_max:
 * rtol times the largest |want| instead); prints the worst error's ratio to it. */
static void compare(const char *what, const float *got, const float *want, size_t n, double atol, double rtol,
                    int of_max) {
    double big = 0, worst = 0;
    for (size_t i = 0; i < n; i++) big = fabs(want[i]) > big ? fabs(want[i]) : big;
    long at = -1;
    for (size_t i = 0; i < n; i++) {
        double tol = atol + rtol * (of_max ? big : fabs(want[i])), e = fabs((double)got[i] - want[i]) / tol;
        if (isnan(e) || isnan(got[i])) e = INFINITY;
        if (e > worst || at < 0) worst = e, at = (long)i;
    }
    printf("  %-44s worst %.3f of the tolerance\n", what, worst);
    T_CHECK(worst <= 1.0, "%s: element %ld got %.9g want %.9g", what, at, at >= 0 ? got[at] : 0.0,
            at >= 0 ? want[at] : 0.0);
}

/* Rows without a target: every 5th, and rows 2..4 (a run), -1. */
static int32_t *make_targets(int N, int V, int none) {
    int32_t *t = malloc(sizeof(int32_t) * N);
    for (int n = 0; n < N; n++) t[n] = none || n % 5 == 3 || (n >= 2 && n <= 4) ? -1 : irand(V);
    return t;
}

typedef struct {
    int N, C, V, chunk, bf16, entropy_grad, none;
    float inv_temp;
} Case;

/* The CPU's forward and two backwards (dW written, then added) on the case. */
static void cpu_run(const Case *c, const float *h, const float *W, const uint16_t *W16, const int32_t *t,
                    const float *dlp, const float *dent, float *lp, float *ent, float *lse, float *dh, float *dW) {
    LogprobScratch s;
    int dw_rows = c->bf16 ? logprob_dw_rows(c->chunk, c->N) : 0;
    float *base = malloc(sizeof(float) * logprob_scratch_floats(c->chunk, c->C, c->V, dw_rows));
    logprob_scratch_init(&s, base, c->chunk, c->C, c->V, dw_rows);
    WeightMatrix Wm = {.w = W, .w16 = c->bf16 ? W16 : NULL, .bf16_products = c->bf16};
    logprob_forward(lp, ent, lse, NULL, h, Wm, t, c->N, c->C, c->V, c->inv_temp, &s);
    for (int pass = 0; pass < 2; pass++)
        logprob_backward(dh, dW, dlp, c->entropy_grad ? dent : NULL, h, Wm, t, lse, c->N, c->C, c->V, c->inv_temp, &s,
                         pass == 0);
    free(base);
}

/* The same on the GPU, outputs downloaded into the g_ arrays. */
static void gpu_run(const Case *c, const float *h, const float *W, const uint16_t *W16, const int32_t *t,
                    const float *dlp, const float *dent, const float *dh0, float *lp, float *ent, float *lse,
                    float *dh, float *dW) {
    size_t nb = sizeof(float) * c->N, hb = nb * c->C, wb = sizeof(float) * (size_t)c->V * c->C;
    GpuLogprobScratch s;
    T_CHECK(!gpu_logprob_scratch_init(&dev, &s, c->chunk, c->N, c->C, c->V, &err), "%s", err.msg);
    GpuHeadWeight Wd = {.w = c->bf16 ? upload(W16, wb / 2) : upload(W, wb), .bf16_products = c->bf16};
    CUdeviceptr d_h = upload(h, hb), d_dh = upload(dh0, hb), d_dlp = upload(dlp, nb), d_dent = upload(dent, nb);
    CUdeviceptr d_lp, d_ent, d_lse, d_dW; /* left as allocated: NaN bytes on the emulator */
    T_CHECK(!gpu_alloc(&dev, &d_lp, nb, &err) && !gpu_alloc(&dev, &d_ent, nb, &err) &&
                !gpu_alloc(&dev, &d_lse, nb, &err) && !gpu_alloc(&dev, &d_dW, wb, &err),
            "%s", err.msg);
    T_CHECK(!gpu_logprob_forward(&dev, d_lp, d_ent, d_lse, 0, d_h, Wd, t, c->N, c->inv_temp, &s, &err), "%s", err.msg);
    for (int pass = 0; pass < 2; pass++)
        T_CHECK(!gpu_logprob_backward(&dev, d_dh, d_dW, d_dlp, c->entropy_grad ? d_dent : 0, d_h, Wd, t, d_lse, c->N,
                                      c->inv_temp, &s, pass == 0, &err),
                "%s", err.msg);
    download(lp, d_lp, nb), download(ent, d_ent, nb), download(lse, d_lse, nb);
    download(dh, d_dh, hb), download(dW, d_dW, wb);
    CUdeviceptr all[] = {Wd.w, d_h, d_dh, d_dlp, d_dent, d_lp, d_ent, d_lse, d_dW};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(&dev, all[i]);
    gpu_logprob_scratch_free(&dev, &s);
}

static void check_case(Case c) {
    printf("N %d C %d V %d chunk %d %s T %.2f%s%s\n", c.N, c.C, c.V, c.chunk, c.bf16 ? "bf16" : "fp32",
           1.0 / c.inv_temp, c.entropy_grad ? " +dentropy" : "", c.none ? " no targets" : "");
    size_t nc = (size_t)c.N * c.C, vc = (size_t)c.V * c.C;
    float *h = randoms(nc, 2.0f), *W = randoms(vc, 1.0f), *dlp = randoms(c.N, 1.0f), *dent = randoms(c.N, 0.5f);
    float *dh0 = randoms(nc, 0.1f);
    uint16_t *W16 = malloc(sizeof(uint16_t) * vc);
    f32_to_bf16_n(W16, W, vc);
    int32_t *t = make_targets(c.N, c.V, c.none);
    float *lp = malloc(4 * c.N), *ent = malloc(4 * c.N), *lse = malloc(4 * c.N), *dh = malloc(4 * nc),
          *dW = malloc(4 * vc);
    float *g_lp = malloc(4 * c.N), *g_ent = malloc(4 * c.N), *g_lse = malloc(4 * c.N), *g_dh = malloc(4 * nc),
          *g_dW = malloc(4 * vc);
    memcpy(dh, dh0, 4 * nc);
    cpu_run(&c, h, W, W16, t, dlp, dent, lp, ent, lse, dh, dW);
    gpu_run(&c, h, W, W16, t, dlp, dent, dh0, g_lp, g_ent, g_lse, g_dh, g_dW);
    compare("lse", g_lse, lse, c.N, 1e-6, 1e-6, 0);
    compare("logprob", g_lp, lp, c.N, 1e-6, 1e-6, 0);
    compare("entropy", g_ent, ent, c.N, 1e-6, 1e-5, 0);
    double rel = c.bf16 ? 2e-3 : 1e-5;
    compare("dh (added to)", g_dh, dh, nc, 0, rel, 1);
    if (!c.none) compare("dW (written, then added to)", g_dW, dW, vc, 0, rel, 1);
    int exact = 1;
    for (int n = 0; n < c.N; n++)
        if (t[n] < 0) {
            exact &= g_lp[n] == 0 && g_lse[n] == 0 && g_ent[n] == 0;
            exact &= !memcmp(g_dh + (size_t)n * c.C, dh0 + (size_t)n * c.C, 4 * (size_t)c.C);
        }
    for (size_t i = 0; c.none && i < vc; i++) exact &= g_dW[i] == 0;
    T_CHECK(exact, "rows without a target: 0s and dh unchanged%s", c.none ? "; dW written as zeros" : "");
    free(h), free(W), free(dlp), free(dent), free(dh0), free(W16), free(t);
    free(lp), free(ent), free(lse), free(dh), free(dW), free(g_lp), free(g_ent), free(g_lse), free(g_dh), free(g_dW);
}

/* A frozen head's shortcut: the forward's pw (E_p[W] of each row with a target)
 * against the CPU's logprob_forward with pw, then gpu_logprob_backward_frozen's dh
 * (added to, twice) against the CPU's logprob_backward_frozen, in the bounds above;
 * the CPU's shortcut itself against its recomputing backward (the same gradient:
 * fp32 1e-5, bf16 products 1e-2 of the largest, p and dz rounded to bf16 at
 * different points). Rows without a target: pw and dh untouched. On the emulated
 * GPU the products' multiply-adds are counted: pw costs one [rows x V x C] product
 * in the forward, the backward none (the recomputing one costs two). */
static void check_frozen(Case c) {
    printf("frozen head: N %d C %d V %d chunk %d %s T %.2f\n", c.N, c.C, c.V, c.chunk, c.bf16 ? "bf16" : "fp32",
           1.0 / c.inv_temp);
    size_t nc = (size_t)c.N * c.C, vc = (size_t)c.V * c.C, nb = sizeof(float) * c.N, hb = nb * c.C;
    float *h = randoms(nc, 2.0f), *W = randoms(vc, 1.0f), *dlp = randoms(c.N, 1.0f), *dh0 = randoms(nc, 0.1f);
    float *pw0 = randoms(nc, 3.0f); /* what pw held before: rows without a target keep it */
    uint16_t *W16 = malloc(sizeof(uint16_t) * vc);
    f32_to_bf16_n(W16, W, vc);
    int32_t *t = make_targets(c.N, c.V, 0);
    int R = 0;
    for (int n = 0; n < c.N; n++) R += t[n] >= 0;
    float *lp = malloc(nb), *lse = malloc(nb), *pw = malloc(hb), *dh = malloc(hb), *dh_re = malloc(hb);
    float *g_lp = malloc(nb), *g_pw = malloc(hb), *g_dh = malloc(hb);
    /* the CPU: the shortcut twice, and once against the recomputing backward */
    LogprobScratch ls;
    float *base = malloc(sizeof(float) * logprob_scratch_floats(c.chunk, c.C, c.V, 0));
    logprob_scratch_init(&ls, base, c.chunk, c.C, c.V, 0);
    WeightMatrix Wm = {.w = W, .w16 = c.bf16 ? W16 : NULL, .bf16_products = c.bf16};
    memcpy(pw, pw0, hb), memcpy(dh, dh0, hb), memcpy(dh_re, dh0, hb);
    logprob_forward(lp, NULL, lse, pw, h, Wm, t, c.N, c.C, c.V, c.inv_temp, &ls);
    logprob_backward(dh_re, NULL, dlp, NULL, h, Wm, t, lse, c.N, c.C, c.V, c.inv_temp, &ls, 0);
    logprob_backward_frozen(dh, dlp, pw, Wm, t, c.N, c.C, c.inv_temp);
    compare("CPU: the shortcut's dh = the recomputed one's", dh, dh_re, nc, 0, c.bf16 ? 1e-2 : 1e-5, 1);
    logprob_backward_frozen(dh, dlp, pw, Wm, t, c.N, c.C, c.inv_temp);
    /* the GPU */
    GpuLogprobScratch s;
    T_CHECK(!gpu_logprob_scratch_init(&dev, &s, c.chunk, c.N, c.C, c.V, &err), "%s", err.msg);
    GpuHeadWeight Wd = {.w = c.bf16 ? upload(W16, vc * 2) : upload(W, vc * 4), .bf16_products = c.bf16};
    CUdeviceptr d_h = upload(h, hb), d_dh = upload(dh0, hb), d_dlp = upload(dlp, nb), d_pw = upload(pw0, hb);
    CUdeviceptr d_lp, d_lse;
    T_CHECK(!gpu_alloc(&dev, &d_lp, nb, &err) && !gpu_alloc(&dev, &d_lse, nb, &err), "%s", err.msg);
    unsigned long long m0 = emulated ? gpu_emulator_blas_multiply_adds() : 0;
    T_CHECK(!gpu_logprob_forward(&dev, d_lp, 0, d_lse, d_pw, d_h, Wd, t, c.N, c.inv_temp, &s, &err), "%s", err.msg);
    unsigned long long m1 = emulated ? gpu_emulator_blas_multiply_adds() : 0;
    for (int pass = 0; pass < 2; pass++)
        T_CHECK(!gpu_logprob_backward_frozen(&dev, d_dh, d_dlp, d_pw, Wd, t, c.N, c.inv_temp, &s, &err), "%s",
                err.msg);
    unsigned long long m2 = emulated ? gpu_emulator_blas_multiply_adds() : 0;
    download(g_lp, d_lp, nb), download(g_pw, d_pw, hb), download(g_dh, d_dh, hb);
    compare("logprob", g_lp, lp, c.N, 1e-6, 1e-6, 0);
    compare("pw = E_p[W]", g_pw, pw, nc, 0, c.bf16 ? 2e-3 : 1e-5, 1);
    compare("dh (added to, twice)", g_dh, dh, nc, 0, c.bf16 ? 2e-3 : 1e-5, 1);
    int exact = 1;
    for (int n = 0; n < c.N; n++)
        if (t[n] < 0) {
            exact &= !memcmp(g_pw + (size_t)n * c.C, pw0 + (size_t)n * c.C, 4 * (size_t)c.C);
            exact &= !memcmp(g_dh + (size_t)n * c.C, dh0 + (size_t)n * c.C, 4 * (size_t)c.C);
        }
    T_CHECK(exact, "rows without a target: pw and dh untouched");
    if (emulated) {
        unsigned long long want = 2ULL * R * c.V * c.C; /* the logits and p W */
        printf("  products' multiply-adds: forward %llu (want %llu), backward %llu (want 0)\n", m1 - m0, want, m2 - m1);
        T_CHECK(m1 - m0 == want && m2 == m1, "multiply-adds: forward %llu (want %llu), backward %llu (want 0)",
                m1 - m0, want, m2 - m1);
    }
    CUdeviceptr all[] = {Wd.w, d_h, d_dh, d_dlp, d_pw, d_lp, d_lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(&dev, all[i]);
    gpu_logprob_scratch_free(&dev, &s);
    free(base), free(h), free(W), free(dlp), free(dh0), free(pw0), free(W16), free(t);
    free(lp), free(lse), free(pw), free(dh), free(dh_re), free(g_lp), free(g_pw), free(g_dh);
}

/* A target past the vocabulary and too many rows: refused, one line naming them. */
static void check_bad_input(void) {
    enum { N = 4, C = 8, V = 50 };
    GpuLogprobScratch s;
    T_CHECK(!gpu_logprob_scratch_init(&dev, &s, 2, N, C, V, &err), "%s", err.msg);
    T_CHECK(gpu_logprob_scratch_init(&dev, &(GpuLogprobScratch){0}, 0, N, C, V, &err) == -1 &&
                strstr(err.msg, "chunk_rows 0"),
            "a chunk of 0 rows: %s", err.msg);
    float *h = randoms((size_t)N * C, 1.0f), *W = randoms((size_t)V * C, 1.0f);
    CUdeviceptr d_h = upload(h, sizeof(float) * N * C), d_W = upload(W, sizeof(float) * V * C),
                d_out = upload(h, sizeof(float) * N * 3);
    GpuHeadWeight Wd = {.w = d_W};
    int32_t t[N] = {1, -1, V, 3};
    T_CHECK(gpu_logprob_forward(&dev, d_out, 0, d_out + 4 * N, 0, d_h, Wd, t, N, 1.0f, &s, &err) == -1 &&
                strstr(err.msg, "target 50 of row 2 is outside the vocabulary of 50"),
            "a target past the vocabulary: %s", err.msg);
    t[2] = 2;
    T_CHECK(gpu_logprob_backward(&dev, d_h, 0, d_out, 0, d_h, Wd, t, d_out, N + 1, 1.0f, &s, 1, &err) == -1 &&
                strstr(err.msg, "5 rows, more than the 4"),
            "too many rows: %s", err.msg);
    gpu_free(&dev, d_h), gpu_free(&dev, d_W), gpu_free(&dev, d_out);
    gpu_logprob_scratch_free(&dev, &s);
    free(h), free(W);
}

static void check_all(void) {
    printf("device: %s\n", dev.name);
    /* N rows, of which 23 have a target (every 5th and rows 2..4 have none): chunks of
     * 8 leave a last chunk of 7 */
    check_case((Case){.N = 32, .C = 64, .V = 1000, .chunk = 8, .inv_temp = 1.0f});
    check_case((Case){.N = 32, .C = 64, .V = 1000, .chunk = 8, .bf16 = 1, .inv_temp = 1.0f});
    check_case((Case){.N = 32, .C = 64, .V = 1000, .chunk = 8, .inv_temp = 1.0f / 0.7f, .entropy_grad = 1});
    check_case((Case){.N = 32, .C = 64, .V = 1000, .chunk = 8, .bf16 = 1, .inv_temp = 1.0f / 0.7f, .entropy_grad = 1});
    check_case((Case){.N = 13, .C = 32, .V = 4099, .chunk = 4, .bf16 = 1, .inv_temp = 1.0f / 0.9f});
    check_case((Case){.N = 6, .C = 32, .V = 1000, .chunk = 4, .bf16 = 1, .inv_temp = 1.0f, .none = 1});
    check_frozen((Case){.N = 32, .C = 64, .V = 1000, .chunk = 8, .inv_temp = 1.0f / 0.7f});
    check_frozen((Case){.N = 32, .C = 64, .V = 1000, .chunk = 8, .bf16 = 1, .inv_temp = 1.0f});
    check_frozen((Case){.N = 13, .C = 32, .V = 4099, .chunk = 4, .bf16 = 1, .inv_temp = 1.0f / 0.9f});
    check_bad_input();
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_logprob", check_all);
}
