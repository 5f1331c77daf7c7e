/* tests/gpu/test_gpu_layer_train.c — one decoder layer's training forward and
 * backward on the GPU (gpu/layer_train.h) against the CPU's under mixed precision
 * with bf16 activations (a 1-layer model: model_forward_packed, then
 * model_layer_backward from a gradient the test chooses), on the GPU where there is
 * one and on the tests' emulated GPU and cuBLASLt otherwise. Three layers: Qwen2's
 * (C 128, 4 heads over 2 KV heads of 32, F 256, q/k/v biases; packed sequences of
 * 5, 40 and 17 tokens), Llama's form with an o bias and none on q/k/v (C 96, 3
 * heads over 1, F 160; sequences of 30, 1 and 19) and Qwen3's (q/k norm, no biases,
 * C 64 under H D 128, 4 heads over 2 of 32, F 160; sequences of 17, 1 and 32); random
 * norms (q_norm and k_norm too) and biases.
 *
 * Checked: the layer's output and what it saved (att, q/k after RoPE with v — Qwen3:
 * the product's q/k/v, the normed and RoPE'd q/k and the norm's rstd —, rstd1);
 * after a backward with write_dw into gradients filled with garbage, dx_in and every
 * weight gradient (wqkv, bqkv or bo, wo, wgu, wdown, ln1, ln2, q_norm and k_norm); after a second
 * backward from another dx with write_dw 0, the sums. And the new kernel alone:
 * swiglu_backward_bf16 against the CPU's op, within one bf16 step (2^-8 |cpu|).
 *
 * Tolerance, per tensor: |gpu - cpu| <= 2e-2 max|cpu| + 1e-2 |cpu| each, and
 * ||gpu - cpu|| <= 1e-2 ||cpu||. Why so wide: the GPU rounds the same operands to
 * bf16 at the same points, but its sums run in another order (cuBLASLt's, a block's
 * tree) and its exponentials are ex2.approx, so an fp32 value one ulp off can round
 * to the neighbouring bf16 value before a product reads it: a change of 2^-8 of that
 * operand, which every later step carries on. In the second layer here two of 4800
 * attention outputs round so (att agrees to 2e-7), and by the MLP 136 of 8000 act
 * values differ: the output is off by up to 1.2e-3 max|cpu| (norm 3e-4), the
 * gradients by up to 3.4e-3 max|cpu| (norm 1.2e-3); the first layer, with no such
 * flip upstream of the MLP, has its MLP's weight gradients bit for bit. A wrong
 * operand, row or sequence moves the norm by far more than 1e-2. The figures seen
 * are printed. Bad input: a batch past the activations', max_tokens 0, each refused
 * with one line. */
#include <stdlib.h>
#include <string.h>

#include "gpu/layer_train.h"
#include "gpu/ops.h"
#include "model/grads.h"
#include "model/init.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 36
#include "gpu_test.h"

/* A layer's shape and batch: Qwen2's (q/k/v biases, GQA), and Llama's form with an
 * o bias and none on q/k/v, odd sizes and a sequence of one token. */
typedef struct {
    const char *name;
    ModelType type;
    int C, H, Hkv, D, F, qkv_bias, o_bias, B;
    int starts[4];
    int qk_norm;
} Case;
static const Case cases[] = {
    {"qwen2", MODEL_QWEN2, 128, 4, 2, 32, 256, 1, 0, 3, {0, 5, 45, 62}, 0},
    {"llama, o bias", MODEL_LLAMA, 96, 3, 1, 32, 160, 0, 1, 3, {0, 30, 31, 50}, 0},
    /* Qwen3: q/k norm, no biases; H D (128) past C, so q|k (192) is wider than a row */
    {"qwen3", MODEL_QWEN3, 64, 4, 2, 32, 160, 0, 0, 3, {0, 17, 18, 50}, 1},
};
enum { V = 64 };
/* the case running */
static int C, H, HKV, D, F, QKV, B;
static const int *starts;

static void make_config(ModelConfig *c, const Case *k) {
    memset(c, 0, sizeof *c);
    c->type = k->type;
    c->hidden_size = C, c->intermediate_size = F, c->n_layers = 1, c->n_heads = H, c->n_kv_heads = HKV;
    c->head_dim = D, c->vocab_size = V, c->max_position_embeddings = 4096, c->rms_norm_eps = 1e-6f;
    c->rope_theta = 1e6, c->qkv_bias = k->qkv_bias, c->o_bias = k->o_bias, c->tie_word_embeddings = 1;
    c->qk_norm = k->qk_norm;
    c->bos_token_id = -1, c->n_eos = 0;
    strcpy(c->torch_dtype, "float32");
}

/* A 1-layer model of random weights under mixed precision, its norms and biases
 * random too (1 and 0 would hide a norm or bias read from the wrong place). */
static void make_model(Model *m, const Case *k) {
    ModelConfig c;
    make_config(&c, k);
    model_create(m, &c);
    model_init_random(m, 12, 0.2f);
    LayerView *v = &m->w.layers[0];
    for (int i = 0; i < C; i++) v->ln1[i] = 1.0f + 0.5f * frand(), v->ln2[i] = 1.0f + 0.5f * frand();
    for (int i = 0; v->bqkv && i < QKV; i++) v->bqkv[i] = 0.5f * frand();
    for (int i = 0; v->bo && i < C; i++) v->bo[i] = 0.5f * frand();
    for (int i = 0; v->q_norm && i < D; i++) v->q_norm[i] = 1.0f + 0.5f * frand(), v->k_norm[i] = 1.0f + 0.5f * frand();
    model_use_bf16_compute(m);
}

/* The bounds of a tensor past a bf16 product (see the header): per element, and on
 * the whole tensor's error norm. */
#define BF16_ATOL 2e-2
#define BF16_RTOL 1e-2
#define BF16_L2 1e-2

#define compare gpu_test_compare

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
    compare("swiglu_bf16", got, want, (size_t)N * 2 * FF, 1e-30, 1.0 / 256, 1.0 / 256);
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
    G->b = (GpuLayerBatch){B, N, upload(starts, sizeof(int) * (B + 1)), upload(pos, sizeof(int32_t) * N),
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
        {G->g.ln1, C}, {G->g.ln2, C}, {G->g.bqkv, QKV}, {G->g.bo, C}, {G->g.wqkv, (size_t)QKV * C},
        {G->g.wo, (size_t)C * H * D}, {G->g.wgu, (size_t)2 * F * C}, {G->g.wdown, (size_t)C * F},
        {G->g.q_norm, D}, {G->g.k_norm, D},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i].p) T_CHECK(!gpu_put(&dev, all[i].p, junk, sizeof(float) * all[i].n, &err), "%s", err.msg);
    free(junk);
}

/* Every gradient of the GPU's against the CPU's g, and dx_in against want_dx. */
static void compare_grads(const GpuSide *G, const LayerView *g, const float *want_dx, int N, const char *when) {
    struct { const char *name; CUdeviceptr p; const float *want; size_t n; } all[] = {
        {"dx_in", G->dx, want_dx, (size_t)N * C},
        {"d wqkv", G->g.wqkv, g->wqkv, (size_t)QKV * C},
        {"d bqkv", G->g.bqkv, g->bqkv, QKV},
        {"d bo", G->g.bo, g->bo, C},
        {"d wo", G->g.wo, g->wo, (size_t)C * H * D},
        {"d wgu", G->g.wgu, g->wgu, (size_t)2 * F * C},
        {"d wdown", G->g.wdown, g->wdown, (size_t)C * F},
        {"d ln1", G->g.ln1, g->ln1, C},
        {"d ln2", G->g.ln2, g->ln2, C},
        {"d q_norm", G->g.q_norm, g->q_norm, D},
        {"d k_norm", G->g.k_norm, g->k_norm, D},
    };
    printf(" %s:\n", when);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        T_CHECK(!all[i].p == !all[i].want, "%s: on one side only", all[i].name);
        if (!all[i].p || !all[i].want) continue;
        float *got = malloc(sizeof(float) * all[i].n);
        download(got, all[i].p, sizeof(float) * all[i].n);
        compare(all[i].name, got, all[i].want, all[i].n, BF16_ATOL, BF16_RTOL, BF16_L2);
        free(got);
    }
}

/* Qwen3's saved q/k: the product's output (the CPU's qkv), the heads normed and
 * RoPE'd (its qk), the norm's rstd. */
static void check_saved_qk_norm(const GpuSide *G, const LayerActs *L, int N) {
    int QK = (H + HKV) * D;
    float *got = malloc(sizeof(float) * N * QKV);
    download(got, G->a.qkv, sizeof(float) * N * QKV);
    compare("saved qkv", got, L->qkv, (size_t)N * QKV, BF16_ATOL, BF16_RTOL, BF16_L2);
    download(got, G->a.qk, sizeof(float) * N * QK);
    compare("saved qk", got, L->qk, (size_t)N * QK, BF16_ATOL, BF16_RTOL, BF16_L2);
    download(got, G->a.qk_rstd, sizeof(float) * N * (H + HKV));
    compare("saved qk_rstd", got, L->qk_rstd, (size_t)N * (H + HKV), BF16_ATOL, BF16_RTOL, BF16_L2);
    free(got);
}

/* Qwen2's saved q/k: after RoPE in place, with v (the CPU's qk and qkv's v). */
static void check_saved_qkv(const GpuSide *G, const LayerActs *L, int N) {
    int QK = (H + HKV) * D;
    float *got = malloc(sizeof(float) * N * QKV), *want = malloc(sizeof(float) * N * QKV);
    download(got, G->a.qkv, sizeof(float) * N * QKV);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < QKV; j++)
            want[(size_t)n * QKV + j] = j < QK ? L->qk[(size_t)n * QK + j] : L->qkv[(size_t)n * QKV + j];
    compare("saved qkv", got, want, (size_t)N * QKV, BF16_ATOL, BF16_RTOL, BF16_L2);
    free(got), free(want);
}

/* What the forward saved and the CPU's forward saved too: att, q/k (and v), rstd1 —
 * to say where a difference starts. */
static void check_saved(const GpuSide *G, const LayerActs *L, int N) {
    float *got = malloc(sizeof(float) * N * H * D);
    download(got, G->a.att, sizeof(float) * N * H * D);
    compare("saved att", got, L->att, (size_t)N * H * D, BF16_ATOL, BF16_RTOL, BF16_L2);
    if (G->w.qk_norm) check_saved_qk_norm(G, L, N);
    else check_saved_qkv(G, L, N);
    download(got, G->a.rstd1, sizeof(float) * N);
    compare("saved rstd1", got, L->rstd1, N, BF16_ATOL, BF16_RTOL, BF16_L2);
    free(got);
}

/* Two backwards: the first writes the gradients (write_dw), the second adds to them. */
static void check_backward(Model *m, Activations *a, GpuSide *G, int N) {
    float *gbuf = calloc(m->table.total, sizeof(float)), *dx = randoms((size_t)N * C, 1.0f);
    ModelView gv;
    params_view(&gv, &m->table, &m->cfg, gbuf);
    GradState st; /* a new step: the first backward writes layer 0's gradients, the second adds */
    grad_state_create(&st, &m->table, gbuf);
    grad_state_begin(&st);
    ModelGrads mg = {&gv, NULL, &st, NULL};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) free(dx), dx = randoms((size_t)N * C, 0.5f);
        T_CHECK(!gpu_put(&dev, G->dx, dx, sizeof(float) * N * C, &err), "%s", err.msg);
        if (pass == 0) fill_garbage(G);
        model_layer_backward(m, a, 0, &mg, dx);
        T_CHECK(!gpu_layer_backward(&dev, &G->w, &G->a, &G->s, &G->b, &G->g, G->dx, G->x_in, pass == 0, &err), "%s",
                err.msg);
        compare_grads(G, &gv.layers[0], dx, N, pass == 0 ? "backward 1 (write_dw: written over garbage)"
                                                          : "backward 2 (added to backward 1's)");
    }
    grad_state_free(&st);
    params_view_free(&gv);
    free(gbuf), free(dx);
}

static void check_layer_train(const Case *k) {
    C = k->C, H = k->H, HKV = k->Hkv, D = k->D, F = k->F, QKV = (H + 2 * HKV) * D, B = k->B, starts = k->starts;
    Model m;
    make_model(&m, k);
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
    printf("%s: C %d, %d heads over %d of %d, F %d; forward (N %d in %d sequences):\n", k->name, C, H, HKV, D, F, N,
           B);
    compare("x_out", got, a.x + (size_t)N * C, (size_t)N * C, BF16_ATOL, BF16_RTOL, BF16_L2);
    free(got);
    check_saved(&G, &a.layers[0], N);
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
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_layer_train(&cases[i]);
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_layer_train", check_all);
}
