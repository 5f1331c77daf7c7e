/* tests/gpu/test_gpu_layer_train.c — one Qwen2 decoder layer's training forward and
 * backward on the GPU (gpu/layer_train.h) against the CPU's under mixed precision
 * with bf16 activations (a 1-layer model: model_forward_packed, then
 * model_layer_backward from a gradient the test chooses), on the GPU where there is
 * one and on the tests' emulated GPU and cuBLASLt otherwise. C 128, 4 heads over 2 KV
 * heads of 32, F 256, q/k/v biases, random norms and biases, three packed sequences
 * of 5, 40 and 17 tokens.
 *
 * Checked: the layer's output; after a backward with write_dw into gradients filled
 * with garbage, dx_in and every weight gradient (wqkv, bqkv, wo, wgu, wdown, ln1,
 * ln2); after a second backward from another dx with write_dw 0, the sums. And the
 * new kernel alone: swiglu_backward_bf16 against the CPU's op.
 *
 * Tolerances, per tensor, |gpu - cpu| <= 2e-3 max|cpu| + 1e-3 |cpu| (the output:
 * 1e-4 max|cpu| + 1e-3 |cpu|, as test_gpu_layer). The GPU rounds the same operands
 * to bf16 at the same points, but its products sum in cuBLASLt's order and its
 * exponentials are ex2.approx: an fp32 difference of an ulp can move a value across
 * a bf16 rounding boundary before a product reads it, a change of 2^-8 of that one
 * term (test_gpu_logprob's bf16 bound, 2e-3 of the largest). The figures seen are
 * printed. swiglu_backward_bf16: within one bf16 step, 2^-8 |cpu|. Bad input: a
 * batch past the activations', max_tokens 0, each refused with one line. */
#include <stdlib.h>
#include <string.h>

#include "gpu/layer_train.h"
#include "gpu/ops.h"
#include "model/init.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 36
#include "gpu_test.h"

enum { C = 128, H = 4, HKV = 2, D = 32, F = 256, V = 64, B = 3, QKV = (H + 2 * HKV) * D };
static const int starts[B + 1] = {0, 5, 45, 62};

static void make_config(ModelConfig *c) {
    memset(c, 0, sizeof *c);
    c->type = MODEL_QWEN2;
    c->hidden_size = C, c->intermediate_size = F, c->n_layers = 1, c->n_heads = H, c->n_kv_heads = HKV;
    c->head_dim = D, c->vocab_size = V, c->max_position_embeddings = 4096, c->rms_norm_eps = 1e-6f;
    c->rope_theta = 1e6, c->qkv_bias = 1, c->tie_word_embeddings = 1;
    c->bos_token_id = -1, c->n_eos = 0;
    strcpy(c->torch_dtype, "float32");
}

/* A 1-layer model of random weights under mixed precision, its norms and biases
 * random too (1 and 0 would hide a norm or bias read from the wrong place). */
static void make_model(Model *m) {
    ModelConfig c;
    make_config(&c);
    model_create(m, &c);
    model_init_random(m, 12, 0.2f);
    LayerView *v = &m->w.layers[0];
    for (int i = 0; i < C; i++) v->ln1[i] = 1.0f + 0.5f * frand(), v->ln2[i] = 1.0f + 0.5f * frand();
    for (int i = 0; i < QKV; i++) v->bqkv[i] = 0.5f * frand();
    model_use_bf16_compute(m);
}

/* got against want, n values: |got - want| <= atol max|want| + rtol |want|; prints the
 * figures seen. Returns 1 when every value passes. */
static int compare(const char *what, const float *got, const float *want, size_t n, double atol, double rtol) {
    double top = 0, worst = 0, worst_rel = 0;
    for (size_t i = 0; i < n; i++) top = fmax(top, fabs(want[i]));
    long bad = 0, same = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= atol * top + rtol * fabs(want[i]))) bad++;
        worst = isnan(got[i]) ? INFINITY : fmax(worst, e);
        if (fabs(want[i]) > 1e-3 * top) worst_rel = fmax(worst_rel, e / fabs(want[i]));
        same += memcmp(&got[i], &want[i], 4) == 0;
    }
    printf("  %-14s max|cpu| %.3g, max |gpu - cpu| %.3g = %.2g max|cpu|, worst relative (|cpu| > 1e-3 max) %.2g, "
           "%ld of %zu bit for bit\n", what, top, worst, worst / top, worst_rel, same, n);
    T_CHECK(bad == 0, "%s: %ld of %zu values outside %g max|cpu| + %g |cpu| (worst %.3g)", what, bad, n, atol, rtol,
            worst);
    return bad == 0;
}

static void check_swiglu_bf16(void) {
    enum { N = 37, FF = 300 };
    float *dout = randoms((size_t)N * FF, 2.0f), *gu = randoms((size_t)N * 2 * FF, 6.0f);
    uint16_t *gu16 = malloc(2 * (size_t)N * 2 * FF), *want16 = malloc(2 * (size_t)N * 2 * FF),
             *got16 = malloc(2 * (size_t)N * 2 * FF);
    f32_to_bf16_n(gu16, gu, (size_t)N * 2 * FF);
    swiglu_backward_bf16(want16, dout, gu16, N, FF);
    CUdeviceptr ddout = upload(dout, sizeof(float) * N * FF), dgu16 = upload(gu16, 2 * (size_t)N * 2 * FF), dres;
    T_CHECK(!gpu_alloc(&dev, &dres, 2 * (size_t)N * 2 * FF, &err), "%s", err.msg);
    T_CHECK(!gpu_swiglu_backward_bf16(&dev, dres, ddout, dgu16, N, FF, &err), "%s", err.msg);
    download(got16, dres, 2 * (size_t)N * 2 * FF);
    float *got = malloc(sizeof(float) * N * 2 * FF), *want = malloc(sizeof(float) * N * 2 * FF);
    bf16_to_f32_n(got, got16, (size_t)N * 2 * FF);
    bf16_to_f32_n(want, want16, (size_t)N * 2 * FF);
    compare("swiglu_bf16", got, want, (size_t)N * 2 * FF, 1e-30, 1.0 / 256);
    gpu_free(&dev, ddout), gpu_free(&dev, dgu16), gpu_free(&dev, dres);
    free(dout), free(gu), free(gu16), free(want16), free(got16), free(got), free(want);
}

/* The GPU's side of one layer: its weights, activations, scratch, gradients, batch. */
typedef struct {
    GpuLayerWeights w;
    GpuLayerActs a;
    GpuLayerTrainScratch s;
    GpuLayerGrads g;
    GpuLayerBatch b;
    CUdeviceptr x_in, x_out, dx;
} GpuSide;

static void gpu_side_create(GpuSide *G, const Model *m, const float *x_in, int N) {
    T_CHECK(!gpu_layer_upload(&dev, &G->w, m, 0, &err), "%s", err.msg);
    T_CHECK(!gpu_layer_acts_create(&dev, &G->a, &G->w, N, &err), "%s", err.msg);
    T_CHECK(!gpu_layer_train_scratch_create(&dev, &G->s, &G->w, N, &err), "%s", err.msg);
    T_CHECK(!gpu_layer_grads_create(&dev, &G->g, &G->w, &err), "%s", err.msg);
    int32_t pos[64];
    for (int b = 0; b < B; b++)
        for (int n = starts[b]; n < starts[b + 1]; n++) pos[n] = n - starts[b];
    G->b = (GpuLayerBatch){B, N, upload(starts, sizeof starts), upload(pos, sizeof(int32_t) * N),
                           upload(m->inv_freq, sizeof(float) * D / 2)};
    G->x_in = upload(x_in, sizeof(float) * N * C);
    T_CHECK(!gpu_alloc(&dev, &G->x_out, sizeof(float) * N * C, &err) &&
                !gpu_alloc(&dev, &G->dx, sizeof(float) * N * C, &err),
            "%s", err.msg);
}

static void gpu_side_free(GpuSide *G) {
    CUdeviceptr p[] = {G->x_in, G->x_out, G->dx, G->b.starts, G->b.pos, G->b.inv_freq};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) gpu_free(&dev, p[i]);
    gpu_layer_grads_free(&dev, &G->g);
    gpu_layer_train_scratch_free(&dev, &G->s);
    gpu_layer_acts_free(&dev, &G->a);
    gpu_layer_free(&dev, &G->w);
}

/* Garbage in every gradient, so that a write_dw that adds shows. */
static void fill_garbage(const GpuSide *G) {
    size_t most = (size_t)2 * F * C;
    float *junk = malloc(sizeof(float) * most);
    for (size_t i = 0; i < most; i++) junk[i] = 1e3f;
    struct { CUdeviceptr p; size_t n; } all[] = {
        {G->g.ln1, C}, {G->g.ln2, C}, {G->g.bqkv, QKV}, {G->g.wqkv, (size_t)QKV * C}, {G->g.wo, (size_t)C * H * D},
        {G->g.wgu, (size_t)2 * F * C}, {G->g.wdown, (size_t)C * F},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        T_CHECK(!gpu_put(&dev, all[i].p, junk, sizeof(float) * all[i].n, &err), "%s", err.msg);
    free(junk);
}

/* Every gradient of the GPU's against the CPU's g, and dx_in against want_dx. */
static void compare_grads(const GpuSide *G, const LayerView *g, const float *want_dx, int N, const char *when) {
    struct { const char *name; CUdeviceptr p; const float *want; size_t n; } all[] = {
        {"dx_in", G->dx, want_dx, (size_t)N * C},
        {"d wqkv", G->g.wqkv, g->wqkv, (size_t)QKV * C},
        {"d bqkv", G->g.bqkv, g->bqkv, QKV},
        {"d wo", G->g.wo, g->wo, (size_t)C * H * D},
        {"d wgu", G->g.wgu, g->wgu, (size_t)2 * F * C},
        {"d wdown", G->g.wdown, g->wdown, (size_t)C * F},
        {"d ln1", G->g.ln1, g->ln1, C},
        {"d ln2", G->g.ln2, g->ln2, C},
    };
    printf(" %s:\n", when);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        float *got = malloc(sizeof(float) * all[i].n);
        download(got, all[i].p, sizeof(float) * all[i].n);
        compare(all[i].name, got, all[i].want, all[i].n, 2e-3, 1e-3);
        free(got);
    }
}

/* Two backwards: the first writes the gradients (write_dw), the second adds to them. */
static void check_backward(Model *m, Activations *a, GpuSide *G, int N) {
    float *gbuf = calloc(m->table.total, sizeof(float)), *dx = randoms((size_t)N * C, 1.0f);
    ModelView gv;
    params_view(&gv, &m->table, &m->cfg, gbuf);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) free(dx), dx = randoms((size_t)N * C, 0.5f);
        T_CHECK(!gpu_put(&dev, G->dx, dx, sizeof(float) * N * C, &err), "%s", err.msg);
        if (pass == 0) fill_garbage(G);
        model_layer_backward(m, a, 0, &gv.layers[0], pass == 0, dx);
        T_CHECK(!gpu_layer_backward(&dev, &G->w, &G->a, &G->s, &G->b, &G->g, G->dx, G->x_in, pass == 0, &err), "%s",
                err.msg);
        compare_grads(G, &gv.layers[0], dx, N, pass == 0 ? "backward 1 (write_dw: written over garbage)"
                                                          : "backward 2 (added to backward 1's)");
    }
    params_view_free(&gv);
    free(gbuf), free(dx);
}

static void check_layer_train(void) {
    Model m;
    make_model(&m);
    int N = starts[B];
    int32_t ids[64];
    for (int n = 0; n < N; n++) ids[n] = (int32_t)((n * 37 + 5) % V);
    Activations a;
    acts_create(&a, &m.cfg, N, CKPT_NONE, 4, 1); /* bf16 activations: train/model.c's for a mixed model */
    ModelPass pass = {.backward = 1};
    model_forward_packed(&m, &a, ids, starts, B, &pass);
    GpuSide G;
    gpu_side_create(&G, &m, a.x, N);
    T_CHECK(!gpu_layer_forward_train(&dev, &G.w, &G.a, &G.s, &G.b, G.x_out, G.x_in, &err), "%s", err.msg);
    float *got = malloc(sizeof(float) * N * C);
    download(got, G.x_out, sizeof(float) * N * C);
    printf(" forward (N %d in %d sequences):\n", N, B);
    compare("x_out", got, a.x + (size_t)N * C, (size_t)N * C, 1e-4, 1e-3);
    free(got);
    check_backward(&m, &a, &G, N);
    /* a batch past the activations: one line naming the sizes */
    G.b.N = N + 1;
    T_CHECK(gpu_layer_forward_train(&dev, &G.w, &G.a, &G.s, &G.b, G.x_out, G.x_in, &err) == -1 &&
                strstr(err.msg, "rows"),
            "a batch of %d rows for activations of %d was not refused", N + 1, N);
    T_CHECK(gpu_layer_backward(&dev, &G.w, &G.a, &G.s, &G.b, &G.g, G.dx, G.x_in, 1, &err) == -1 &&
                strstr(err.msg, "rows"),
            "a backward of %d rows for activations of %d was not refused", N + 1, N);
    printf("  refused: %s\n", err.msg);
    G.b.N = N;
    GpuLayerActs none;
    T_CHECK(gpu_layer_acts_create(&dev, &none, &G.w, 0, &err) == -1 && strstr(err.msg, "max_tokens"),
            "activations for 0 tokens were not refused");
    gpu_side_free(&G);
    acts_free(&a);
    model_free(&m);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_swiglu_bf16();
    check_layer_train();
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_layer_train", check_all);
}
