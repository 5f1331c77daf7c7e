/* tests/gpu/test_gpu_lora_model.c — LoRA adapters inside the GPU's layers and whole
 * model (gpu/layer.h's gpu_layer_forward_lora, gpu/model.h with m->lora attached)
 * against the CPU's model_forward_packed under the same adapters on a frozen bf16
 * base (WEIGHTS_BF16, fp32 activations: what train/model.c makes for LoRA), on the
 * GPU where there is one and on the tests' emulated GPU and cuBLASLt otherwise.
 * A random Qwen2-shaped model (C 64, 4 heads over 2 KV heads of 16, F 128, V 301,
 * q/k/v biases, random norms) with rank-4 adapters (lora_alpha 8) on q, v, o, gate,
 * up and down — k_proj left out, so a fused product with an unadapted part is run
 * — A and B random (PEFT's B = 0 would hide the adapters' path). One layer's
 * training pass (gpu/layer_lora.h: forward, dx_in, dA and dB written then added)
 * also on the same shape in Qwen3's form (q/k norm, no biases; the norms frozen).
 *
 * Tolerances (test_gpu_layer's and test_gpu_model's, why there): one layer's output
 * within 1e-2 max|cpu| + 1e-2 |cpu| per element and 2e-3 in norm; the whole model's
 * log-probs and entropies (2 layers, 3 packed sequences, T 0.7, the head 8 rows a
 * chunk) against the CPU's fp32 model under the same adapters: max |gpu - fp32| <= 2
 * max |cpu bf16 - fp32| + 1e-4, mean likewise (+ 1e-5), and mean |gpu - cpu bf16| <=
 * 0.5 mean |cpu bf16 - fp32| + 1e-6. The adapters move the log-probs far more than
 * these bounds (printed), so a missing or misplaced adapter fails them.
 * Also: a base_only pass (the KL reference of a LoRA run) against the CPU's base_only
 * pass in the same bounds; adapters with B = 0 put with gpu_model_lora_put give the
 * base_only run's bits; refused, one line each: a pass with dropout keys, adapters of
 * another rank put on the model, adapters on the training pass and on decoding. */
#include <stdlib.h>
#include <string.h>

#include "gpu/generate.h"
#include "gpu/layer_lora.h"
#include "gpu/model.h"
#include "gpu/model_train.h"
#include "model/lora_layers.h"
#define GPU_TEST_SEED 53
#include "gpu_test.h"
#include "gpu_test_model.h"

enum { C = 64, H = 4, HKV = 2, D = 16, F = 128, V = 301, S = 3, CHUNK = 8, R = 4 };
static const int lens[S] = {7, 23, 12}, prompts[S] = {3, 9, 1};

/* Adapters on every module but k_proj, A and B random; dropout p. */
static void make_lora_p(LoraLayers *lo, const ModelConfig *cfg, double p) {
    LoraSpec spec = {R, 8.0, p, 0, ((1u << LORA_N_MODULES) - 1) & ~(1u << LORA_K)};
    lora_layers_create(lo, cfg, &spec, 7);
    for (size_t i = 0; i < lo->table.total; i++) lo->params[i] = 0.3f * frand();
}
static void make_lora(LoraLayers *lo, const ModelConfig *cfg) { make_lora_p(lo, cfg, 0.0); }

typedef struct {
    int32_t ids[64];
    BatchSeq seqs[S];
    PaddedBatch pb;
} Batch;

static void make_batch(Batch *b) {
    for (int i = 0, at = 0; i < S; at += lens[i], i++) {
        for (int t = 0; t < lens[i]; t++) b->ids[at + t] = (int32_t)((at + t) * 97 % V);
        b->seqs[i] = (BatchSeq){b->ids + at, lens[i], NULL, 0, prompts[i]};
    }
    padded_batch_build(&b->pb, b->seqs, S, 1);
}

/* ---- one layer ---- */

/* Layer 0's adapters on the device: params uploaded into *buf, the views into lo. */
static void layer_lora(GpuLayerLora *gl, CUdeviceptr *buf, const LoraLayers *lo, const ModelConfig *cfg) {
    *buf = upload(lo->params, sizeof(float) * lo->table.total);
    for (int mod = 0; mod < LORA_N_MODULES; mod++)
        gl->has[mod] = gpu_lora_view(&gl->mod[mod], lo, cfg, 0, (LoraModule)mod, *buf, 0);
}

static void check_layer(void) {
    static const GpuTestShape shape1 = {C, H, HKV, D, F, V, 1};
    Model m32, h;
    gpu_test_random_model(&m32, &shape1, 1, 21);
    gpu_test_half_model(&h, &m32, &shape1);
    LoraLayers lo;
    make_lora(&lo, &h.cfg);
    h.lora = &lo;
    static const int starts[S + 1] = {0, 5, 45, 62};
    int N = starts[S];
    int32_t ids[64], pos[64];
    for (int n = 0; n < N; n++) ids[n] = (int32_t)((n * 37 + 5) % V);
    for (int b = 0; b < S; b++)
        for (int n = starts[b]; n < starts[b + 1]; n++) pos[n] = n - starts[b];
    Activations a;
    acts_create(&a, &h.cfg, N, 0, 4, 0);
    acts_reserve_lora(&a, &h.cfg, &lo);
    model_forward_packed(&h, &a, ids, starts, S, NULL);
    float *want = malloc(sizeof(float) * N * C), *base = malloc(sizeof(float) * N * C);
    float *got = malloc(sizeof(float) * N * C);
    memcpy(want, a.x + (size_t)N * C, sizeof(float) * N * C);
    model_forward_packed(&h, &a, ids, starts, S, &(ModelPass){.base_only = 1});
    memcpy(base, a.x + (size_t)N * C, sizeof(float) * N * C);

    GpuLayerWeights w;
    GpuLayerScratch s;
    GpuLayerLora gl;
    CUdeviceptr lbuf;
    T_CHECK(!gpu_layer_upload(&dev, &w, &h, 0, &err), "%s", err.msg);
    T_CHECK(!gpu_layer_scratch_create(&dev, &s, &w, N, &err), "%s", err.msg);
    layer_lora(&gl, &lbuf, &lo, &h.cfg);
    T_CHECK(!gl.has[LORA_K] && gl.has[LORA_Q] && gl.has[LORA_DOWN], "the adapted modules' views");
    GpuLayerBatch batch = {S, N, upload(starts, sizeof starts), upload(pos, sizeof(int32_t) * N),
                           upload(h.inv_freq, sizeof(float) * D / 2)};
    CUdeviceptr x = upload(a.x, sizeof(float) * N * C);
    /* no lora_u yet: refused */
    T_CHECK(gpu_layer_forward_lora(&dev, &w, &gl, &s, &batch, x, x, &err) == -1 && strstr(err.msg, "scratch"),
            "adapters without their scratch were not refused (%s)", err.msg);
    printf("  refused: %s\n", err.msg);
    T_CHECK(!gpu_layer_scratch_lora(&dev, &s, R, &err), "%s", err.msg);
    T_CHECK(!gpu_layer_forward_lora(&dev, &w, &gl, &s, &batch, x, x, &err), "%s", err.msg); /* in place */
    download(got, x, sizeof(float) * N * C);
    double moved = 0, top = 0;
    for (int i = 0; i < N * C; i++) moved = fmax(moved, fabs(want[i] - base[i])), top = fmax(top, fabs(want[i]));
    printf("  the adapters move the layer's output by up to %.3g max|cpu|\n", moved / top);
    T_CHECK(moved > 0.05 * top, "the adapters barely change the layer (%.3g): the test could not see them", moved);
    gpu_test_compare("layer+LoRA", got, want, (size_t)N * C, 1e-2, 1e-2, 2e-3);
    /* without adapters (base_only): the CPU's base */
    T_CHECK(!gpu_put(&dev, x, a.x, sizeof(float) * N * C, &err), "%s", err.msg);
    T_CHECK(!gpu_layer_forward_lora(&dev, &w, NULL, &s, &batch, x, x, &err), "%s", err.msg);
    download(got, x, sizeof(float) * N * C);
    gpu_test_compare("layer, base", got, base, (size_t)N * C, 1e-2, 1e-2, 2e-3);
    gpu_free(&dev, x), gpu_free(&dev, lbuf);
    gpu_free(&dev, batch.starts), gpu_free(&dev, batch.pos), gpu_free(&dev, batch.inv_freq);
    gpu_layer_scratch_free(&dev, &s);
    gpu_layer_free(&dev, &w);
    free(want), free(base), free(got);
    acts_free(&a);
    lora_layers_free(&lo);
    model_free(&h), model_free(&m32);
}

/* ---- one layer's training pass (gpu/layer_lora.h) ---- */

/* The adapters' gradients, tensor by tensor of lo's table: got (GPU) against want. */
static void compare_lora_grads(const char *what, const LoraLayers *lo, const float *got, const float *want) {
    float *g = malloc(sizeof(float) * lo->table.total), *w = malloc(sizeof(float) * lo->table.total);
    size_t n = 0;
    for (int i = 0; i < lo->table.n; i++) { /* the tensors only: the table's alignment gaps are never written */
        const ParamEntry *e = &lo->table.entries[i];
        memcpy(g + n, got + e->offset, sizeof(float) * e->numel), memcpy(w + n, want + e->offset, sizeof(float) * e->numel);
        n += e->numel;
    }
    gpu_test_compare(what, g, w, n, 2e-2, 1e-2, 1e-2);
    free(g), free(w);
}

/* One layer's forward, dx_in and the adapters' dA, dB against the CPU's
 * model_layer_backward; qwen3: the layer with q/k norm (no biases), whose input
 * gradient the backward must carry through the norm to the qkv adapters. */
static void check_layer_train(int qwen3) {
    static const GpuTestShape shape1 = {C, H, HKV, D, F, V, 1};
    Model m32, h;
    printf("  %s layer:\n", qwen3 ? "Qwen3 (q/k norm)" : "Qwen2");
    if (qwen3) gpu_test_qwen3_model(&m32, &shape1, 1, 31);
    else gpu_test_random_model(&m32, &shape1, 1, 29);
    gpu_test_half_model(&h, &m32, &shape1);
    LoraLayers lo;
    make_lora_p(&lo, &h.cfg, 0.25);
    h.lora = &lo;
    static const int starts[S + 1] = {0, 5, 45, 62};
    int N = starts[S];
    int32_t ids[64], pos[64], seq[64];
    uint64_t keys[S] = {0x1234567890abcdefULL, 77, 0xfeedULL};
    for (int n = 0; n < N; n++) ids[n] = (int32_t)((n * 37 + 5) % V);
    for (int b = 0; b < S; b++)
        for (int n = starts[b]; n < starts[b + 1]; n++) pos[n] = n - starts[b], seq[n] = b;
    Activations a;
    acts_create(&a, &h.cfg, N, 0, 4, 0);
    acts_reserve_lora(&a, &h.cfg, &lo);
    model_forward_packed(&h, &a, ids, starts, S, &(ModelPass){.backward = 1, .drop_keys = keys});
    size_t P = lo.table.total, NC = (size_t)N * C;
    float *cpu_g = malloc(sizeof(float) * P), *gpu_g = malloc(sizeof(float) * P), *got = malloc(sizeof(float) * NC);
    for (size_t i = 0; i < P; i++) cpu_g[i] = gpu_g[i] = NAN; /* garbage: the first backward writes */

    GpuLayerWeights w;
    GpuLayerTrainScratch s;
    GpuLoraLayerActs la;
    GpuLayerLora gl;
    T_CHECK(!gpu_layer_upload(&dev, &w, &h, 0, &err), "%s", err.msg);
    T_CHECK(w.qk_norm == qwen3, "the uploaded layer's q/k norm: %d (expected %d)", w.qk_norm, qwen3);
    T_CHECK(!gpu_layer_train_scratch_create(&dev, &s, &w, N, &err), "%s", err.msg);
    T_CHECK(!gpu_lora_layer_acts_create(&dev, &la, &w, &lo, N, &err), "%s", err.msg);
    CUdeviceptr lparams = upload(lo.params, sizeof(float) * P), lgrads = upload(gpu_g, sizeof(float) * P);
    for (int mod = 0; mod < LORA_N_MODULES; mod++)
        gl.has[mod] = gpu_lora_view(&gl.mod[mod], &lo, &h.cfg, 0, (LoraModule)mod, lparams, lgrads);
    GpuLayerBatch batch = {S, N, upload(starts, sizeof starts), upload(pos, sizeof(int32_t) * N),
                           upload(h.inv_freq, sizeof(float) * D / 2)};
    GpuLoraPass lp = {&lo, 0, upload(keys, sizeof keys), upload(seq, sizeof(int32_t) * N)};
    CUdeviceptr x_in = upload(a.x, sizeof(float) * NC), x_out, dx;
    T_CHECK(!gpu_alloc(&dev, &x_out, 4 * NC, &err) && !gpu_alloc(&dev, &dx, 4 * NC, &err), "%s", err.msg);
    T_CHECK(!gpu_lora_layer_forward(&dev, &w, &gl, &lp, &la, &s, &batch, x_out, x_in, &err), "%s", err.msg);
    download(got, x_out, sizeof(float) * NC);
    gpu_test_compare("train fwd", got, a.x + NC, NC, 1e-2, 1e-2, 2e-3);

    GradState st; /* a new step: the first backward writes the adapters' gradients, the second adds */
    grad_state_create(&st, &lo.table, cpu_g);
    grad_state_begin(&st);
    ModelGrads mg = {NULL, cpu_g, NULL, &st};
    for (int pass = 0; pass < 2; pass++) {
        float *dxv = randoms(NC, 0.5f);
        T_CHECK(!gpu_put(&dev, dx, dxv, sizeof(float) * NC, &err), "%s", err.msg);
        model_layer_backward(&h, &a, 0, &mg, dxv);
        int write[LORA_N_MODULES];
        for (int mod = 0; mod < LORA_N_MODULES; mod++) write[mod] = pass == 0;
        T_CHECK(!gpu_lora_layer_backward(&dev, &w, &gl, &lp, &la, &s, &batch, write, dx, x_in, &err), "%s", err.msg);
        download(got, dx, sizeof(float) * NC);
        download(gpu_g, lgrads, sizeof(float) * P);
        gpu_test_compare(pass ? "dx_in 2" : "dx_in 1", got, dxv, NC, 2e-2, 1e-2, 1e-2);
        compare_lora_grads(pass ? "dA,dB added" : "dA,dB written", &lo, gpu_g, cpu_g);
        free(dxv);
    }
    grad_state_free(&st);
    CUdeviceptr all[] = {lparams, lgrads, batch.starts, batch.pos, batch.inv_freq, lp.keys, lp.seq, x_in, x_out, dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(&dev, all[i]);
    gpu_lora_layer_acts_free(&dev, &la);
    gpu_layer_train_scratch_free(&dev, &s);
    gpu_layer_free(&dev, &w);
    free(cpu_g), free(gpu_g), free(got);
    acts_free(&a);
    h.lora = NULL;
    lora_layers_free(&lo);
    model_free(&h), model_free(&m32);
}

/* ---- the whole model ---- */

static void cpu_logprobs(Model *m, Batch *b, const ModelPass *pass, float inv_temp, float *lp, float *ent) {
    Activations a;
    acts_create(&a, &m->cfg, b->pb.N, 0, 4, 0);
    if (m->lora) acts_reserve_lora(&a, &m->cfg, m->lora);
    padded_batch_logprobs(m, &a, &b->pb, pass, inv_temp, lp, ent);
    acts_free(&a);
}

static void distance(const float *x, const float *ref, int n, double *max, double *mean) {
    *max = *mean = 0;
    for (int j = 0; j < n; j++) {
        double e = isnan(x[j]) ? INFINITY : fabs((double)x[j] - ref[j]);
        *max = fmax(*max, e), *mean += e / n;
    }
}

/* got (GPU) against cpu16 (the CPU, bf16 base) and cpu32 (the CPU, fp32), R values. */
static void check_close(const char *name, const char *what, const float *got, const float *cpu16,
                        const float *cpu32, int n) {
    double gmax, gmean, cmax, cmean, dmax, dmean;
    distance(got, cpu32, n, &gmax, &gmean);
    distance(cpu16, cpu32, n, &cmax, &cmean);
    distance(got, cpu16, n, &dmax, &dmean);
    printf("  %s, %s: |gpu - cpu fp32| max %.3g mean %.3g; |cpu bf16 - cpu fp32| max %.3g mean %.3g; |gpu - cpu "
           "bf16| max %.3g mean %.3g\n", name, what, gmax, gmean, cmax, cmean, dmax, dmean);
    T_CHECK(gmax <= 2 * cmax + 1e-4 && gmean <= 2 * cmean + 1e-5,
            "%s: the GPU's %ss are further from fp32's (max %.3g, mean %.3g) than twice the CPU bf16's (%.3g, %.3g)",
            name, what, gmax, gmean, cmax, cmean);
    T_CHECK(dmean <= 0.5 * cmean + 1e-6,
            "%s: the GPU's %ss differ from the CPU bf16's by %.3g on average, more than half of bf16's own distance "
            "from fp32 (%.3g)", name, what, dmean, cmean);
}

/* The GPU's log-probs and entropies of pass against the CPU's (h: bf16 base, m32: fp32), both under lo. */
static void check_pass(const char *name, GpuModel *g, GpuModelScratch *s, Model *h, Model *m32, Batch *b,
                       const ModelPass *pass, float *gpu_lp) {
    int n = b->pb.offsets[S];
    float inv_temp = 1.0f / 0.7f;
    float *v[6]; /* cpu16, gpu, cpu32: log-probs, entropies */
    for (int k = 0; k < 6; k++) v[k] = malloc(sizeof(float) * n);
    cpu_logprobs(h, b, pass, inv_temp, v[0], v[1]);
    cpu_logprobs(m32, b, pass, inv_temp, v[4], v[5]);
    T_CHECK(!gpu_model_batch_logprobs_pass(&dev, g, s, &b->pb, inv_temp, pass, v[2], v[3], &err), "%s: %s", name,
            err.msg);
    check_close(name, "log-prob", v[2], v[0], v[4], n);
    check_close(name, "entropy", v[3], v[1], v[5], n);
    memcpy(gpu_lp, v[2], sizeof(float) * n);
    for (int k = 0; k < 6; k++) free(v[k]);
}

/* What the model with adapters refuses, one line each. */
static void check_refused(GpuModel *g, GpuModelScratch *s, Model *h, Batch *b) {
    uint64_t keys[S] = {1, 2, 3};
    float lp[64];
    T_CHECK(gpu_model_batch_logprobs_pass(&dev, g, s, &b->pb, 1.0f, &(ModelPass){.drop_keys = keys}, lp, NULL,
                                          &err) == -1 && strstr(err.msg, "dropout"),
            "a pass with dropout keys was not refused (%s)", err.msg);
    printf("  refused: %s\n", err.msg);
    LoraLayers other;
    LoraSpec spec = {R + 1, 8.0, 0.0, 0, 1u << LORA_Q};
    lora_layers_create(&other, &h->cfg, &spec, 7);
    T_CHECK(gpu_model_lora_put(&dev, g, &other, &err) == -1 && strstr(err.msg, "rank 5"),
            "adapters of another rank were not refused (%s)", err.msg);
    printf("  refused: %s\n", err.msg);
    lora_layers_free(&other);
    GpuModelTrain t;
    T_CHECK(gpu_model_train_create(&dev, &t, g, h, 16, CHUNK, &err) == -1 && strstr(err.msg, "LoRA"),
            "GPU training with adapters was not refused (%s)", err.msg);
    printf("  refused: %s\n", err.msg);
}

static void check_model(void) {
    static const GpuTestShape shape = {C, H, HKV, D, F, V, 2};
    Model m32, h;
    gpu_test_random_model(&m32, &shape, 1, 23);
    gpu_test_half_model(&h, &m32, &shape);
    LoraLayers lo;
    make_lora(&lo, &h.cfg);
    h.lora = m32.lora = &lo;
    Batch b;
    make_batch(&b);
    int n = b.pb.offsets[S];
    GpuModel g;
    GpuModelScratch s;
    T_CHECK(!gpu_model_upload(&dev, &g, &h, &err), "%s", err.msg);
    T_CHECK(!gpu_model_scratch_create(&dev, &s, &g, b.pb.N, CHUNK, &err), "%s", err.msg);
    float *adapted = malloc(sizeof(float) * n), *base = malloc(sizeof(float) * n), *zero_b = malloc(sizeof(float) * n);
    check_pass("adapters", &g, &s, &h, &m32, &b, NULL, adapted);
    check_pass("base_only", &g, &s, &h, &m32, &b, &(ModelPass){.base_only = 1}, base);
    double moved = 0;
    for (int j = 0; j < n; j++) moved = fmax(moved, fabs((double)adapted[j] - base[j]));
    printf("  the adapters move the GPU's log-probs by up to %.3g\n", moved);
    T_CHECK(moved > 0.1, "the adapters barely change the log-probs (%.3g): the test could not see them", moved);
    /* B = 0 put on the device: the adapters add exact zeros, the base's bits */
    for (int l = 0; l < lo.n_layers; l++)
        for (int mod = 0; mod < LORA_N_MODULES; mod++) {
            int e = lo.entry[l][mod];
            if (e >= 0) memset(lo.params + lo.table.entries[e + 1].offset, 0, sizeof(float) * lo.table.entries[e + 1].numel);
        }
    T_CHECK(!gpu_model_lora_put(&dev, &g, &lo, &err), "%s", err.msg);
    T_CHECK(!gpu_model_batch_logprobs(&dev, &g, &s, &b.pb, 1.0f / 0.7f, zero_b, NULL, &err), "%s", err.msg);
    T_CHECK(!memcmp(zero_b, base, sizeof(float) * n), "adapters with B = 0 (gpu_model_lora_put) do not give the base's "
            "log-probs");
    check_refused(&g, &s, &h, &b);
    free(adapted), free(base), free(zero_b);
    gpu_model_scratch_free(&dev, &s);
    gpu_model_free(&dev, &g);
    padded_batch_free(&b.pb);
    h.lora = m32.lora = NULL;
    lora_layers_free(&lo);
    model_free(&h), model_free(&m32);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_layer();
    check_layer_train(0);
    check_layer_train(1);
    check_model();
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_lora_model", check_all);
}
