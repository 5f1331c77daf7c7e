/* tests/gpu/test_gpu_decode_layer.c — one decoding step of one Qwen2 layer, and of one
 * Qwen3 layer, on the GPU
 * (gpu/decode.h) against the CPU's model_decode of a 1-layer model under mixed
 * precision (its residual stream after the layer, DecodeState's x, and the keys and
 * values it writes into the cache), on the GPU where there is one and on the tests'
 * emulated GPU otherwise: C 128, 4 heads over 2 KV heads of 32, F 256, q/k/v biases
 * (Qwen3: none, and q/k norm), random norms (q_norm and k_norm too); six slots — a prompt of 5 tokens, four slots continuing it (shared
 * prefix) with 0 to 2 tokens of their own, one of 3 tokens without a parent — and a
 * step of 6 rows, one a slot, in shuffled slot order, the parent's own slot included.
 *
 * Tolerance: |gpu - cpu| <= 1e-2 max|cpu| + 1e-2 |cpu| per element (x, and the new k and
 * v), and the error's norm within 2e-3 of the tensor's (test_gpu_layer's). The GPU runs the CPU's rounding points, but its products sum in another order
 * (gpu/kernels/rowwise.cu) and its attention is its own (test_gpu_attention's
 * bounds): an fp32 difference of an ulp can move an activation across a bf16
 * rounding boundary before the next product (2^-8 of that operand). Batch invariance,
 * bit for bit: the step's rows each alone, and in calls of 4 then 2, give the batch's
 * x and cache bits. Bad input: more rows than the scratch's, one line. */
#include <stdlib.h>
#include <string.h>

#include "gpu/decode.h"
#include "gpu/ops.h"
#include "model/init.h"
#include "model/kvcache.h"
#include "ops/ops.h"
#define GPU_TEST_SEED 36
#include "gpu_test.h"

enum { C = 128, H = 4, HKV = 2, D = 32, F = 256, V = 64, SLOTS = 6, CAP = 16, KV = HKV * D, NR = 6 };

static void make_model(Model *m, int qwen3) {
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.type = qwen3 ? MODEL_QWEN3 : MODEL_QWEN2, c.qk_norm = qwen3;
    c.hidden_size = C, c.intermediate_size = F, c.n_layers = 1, c.n_heads = H, c.n_kv_heads = HKV;
    c.head_dim = D, c.vocab_size = V, c.max_position_embeddings = 4096, c.rms_norm_eps = 1e-6f;
    c.rope_theta = 1e6, c.qkv_bias = !qwen3, c.tie_word_embeddings = 1, c.bos_token_id = -1;
    strcpy(c.torch_dtype, "float32");
    model_create(m, &c);
    model_init_random(m, 13, 0.2f);
    LayerView *v = &m->w.layers[0]; /* norms and biases random: one read from the wrong place shows */
    for (int i = 0; i < C; i++) v->ln1[i] = 1.0f + 0.5f * frand(), v->ln2[i] = 1.0f + 0.5f * frand();
    for (int i = 0; v->bqkv && i < (H + 2 * HKV) * D; i++) v->bqkv[i] = 0.5f * frand();
    for (int i = 0; v->q_norm && i < D; i++) v->q_norm[i] = 1.0f + 0.5f * frand(), v->k_norm[i] = 1.0f + 0.5f * frand();
    model_use_bf16_compute(m);
}

/* The CPU cache before the step: slot 0 a prompt of 5 tokens, slots 1-4 continuing it
 * with 2, 1, 0, 1 tokens of their own, slot 5 a prompt of 3 without a parent. */
static void fill_cache(Model *m, KVCache *c, DecodeState *s) {
    float logits[8 * V];
    int slots[8];
    int32_t tok[8];
    for (int i = 0; i < 5; i++) slots[i] = 0, tok[i] = (int32_t)((7 * i + 3) % V);
    model_decode(m, c, s, 5, slots, tok, NULL, logits);
    for (int sl = 1; sl <= 4; sl++) kv_cache_share_prefix(c, sl, 0);
    for (int i = 0; i < 3; i++) slots[i] = 5, tok[i] = (int32_t)((11 * i + 1) % V);
    model_decode(m, c, s, 3, slots, tok, NULL, logits);
    const int step1[] = {1, 2, 4}, step2[] = {1};
    for (int i = 0; i < 3; i++) tok[i] = (int32_t)(20 + i);
    model_decode(m, c, s, 3, step1, tok, NULL, logits);
    model_decode(m, c, s, 1, step2, tok, NULL, logits);
}

/* The step's rows on the device, rows [r0, r0 + n) of the step. */
typedef struct {
    int slots[NR], own[NR], pos[NR], parent[SLOTS], parent_len[SLOTS];
} StepRows;

static GpuDecodeRows device_rows(const StepRows *h, int r0, int n, CUdeviceptr inv_freq) {
    GpuDecodeRows r = {n, upload(h->slots + r0, sizeof(int) * n), upload(h->own + r0, sizeof(int) * n),
                       upload(h->pos + r0, sizeof(int) * n), upload(h->parent, sizeof h->parent),
                       upload(h->parent_len, sizeof h->parent_len), inv_freq};
    return r;
}

static void free_rows(GpuDecodeRows *r) {
    gpu_free(&dev, r->slots), gpu_free(&dev, r->own), gpu_free(&dev, r->pos), gpu_free(&dev, r->parent);
    gpu_free(&dev, r->parent_len);
}

/* The step on the GPU from the CPU cache's state kc0/vc0 and the embedded rows x0, in
 * calls of `calls[]` rows (summing to NR): x[NR, C] and the cache after it. */
static void gpu_step(const GpuLayerWeights *w, const StepRows *h, const float *kc0, const float *vc0, const float *x0,
                     CUdeviceptr inv_freq, const int *calls, float *x, float *kc, float *vc) {
    GpuLayerCache c;
    GpuDecodeScratch s;
    size_t cache_bytes = sizeof(float) * SLOTS * CAP * KV;
    T_CHECK(!gpu_layer_cache_create(&dev, &c, w, SLOTS, CAP, &err), "%s", err.msg);
    T_CHECK(!gpu_decode_scratch_create(&dev, &s, w, NR, &err), "%s", err.msg);
    T_CHECK(!gpu_put(&dev, c.k, kc0, cache_bytes, &err) && !gpu_put(&dev, c.v, vc0, cache_bytes, &err), "%s",
            err.msg);
    CUdeviceptr dx = upload(x0, sizeof(float) * NR * C);
    for (int r0 = 0, i = 0; r0 < NR; r0 += calls[i++]) {
        GpuDecodeRows rows = device_rows(h, r0, calls[i], inv_freq);
        T_CHECK(!gpu_decode_layer(&dev, w, &c, &s, &rows, dx + sizeof(float) * (size_t)r0 * C, &err), "%s", err.msg);
        free_rows(&rows);
    }
    download(x, dx, sizeof(float) * NR * C);
    download(kc, c.k, cache_bytes);
    download(vc, c.v, cache_bytes);
    GpuDecodeRows rows = device_rows(h, 0, NR, inv_freq); /* a step past the scratch: one line */
    rows.n = NR + 1;
    T_CHECK(gpu_decode_layer(&dev, w, &c, &s, &rows, dx, &err) == -1 && strstr(err.msg, "rows"),
            "a step of %d rows in scratch for %d was not refused", NR + 1, NR);
    rows.n = NR;
    free_rows(&rows);
    gpu_free(&dev, dx);
    gpu_decode_scratch_free(&dev, &s);
    gpu_layer_cache_free(&dev, &c);
}

/* got against want over n values: 1e-2 max|want| + 1e-2 |want| each, the error's norm
 * within 2e-3 of want's. */
static void compare(const char *what, const float *got, const float *want, int n) {
    double top = 0, worst = 0, err2 = 0, ref2 = 0;
    long bad = 0, same = 0;
    for (int i = 0; i < n; i++) top = fmax(top, fabs(want[i]));
    for (int i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        err2 += e * e, ref2 += (double)want[i] * want[i];
        if (!(e <= 1e-2 * top + 1e-2 * fabs(want[i]))) bad++;
        worst = isnan(got[i]) ? INFINITY : fmax(worst, e);
        same += memcmp(&got[i], &want[i], 4) == 0;
    }
    double rel = sqrt(err2 / fmax(ref2, 1e-300));
    printf("  %-22s max |gpu - cpu| %.3g = %.3g max|cpu|, ||gpu - cpu|| %.3g ||cpu||, %ld of %d bit for bit\n", what,
           worst, worst / top, rel, same, n);
    T_CHECK(bad == 0, "%s: %ld of %d values outside 1e-2 max|cpu| + 1e-2 |cpu| (worst %.3g)", what, bad, n, worst);
    T_CHECK(rel <= 2e-3, "%s: ||gpu - cpu|| is %.3g of ||cpu|| (expected <= 2e-3)", what, rel);
}

static void check_bits(const char *what, int same) {
    printf("  %-40s %s\n", what, same ? "the batch's bits" : "OTHER BITS");
    T_CHECK(same, "%s: not the bits of the 6-row step", what);
}

static void check_step(int qwen3) {
    Model m;
    KVCache c;
    DecodeState ds;
    make_model(&m, qwen3);
    printf("%s layer:\n", qwen3 ? "Qwen3 (q/k norm)" : "Qwen2");
    kv_cache_create(&c, &m.cfg, SLOTS, CAP);
    decode_state_create(&ds, &m.cfg, 8, 64);
    fill_cache(&m, &c, &ds);
    StepRows h;
    const int order[NR] = {3, 1, 5, 2, 4, 0};
    int32_t tok[NR];
    for (int sl = 0; sl < SLOTS; sl++) h.parent[sl] = c.parent[sl], h.parent_len[sl] = c.parent_len[sl];
    for (int r = 0; r < NR; r++) {
        int sl = order[r];
        h.slots[r] = sl, h.own[r] = c.len[sl], h.pos[r] = c.parent_len[sl] + c.len[sl];
        tok[r] = (int32_t)((5 * r + 9) % V);
    }
    size_t cache_floats = (size_t)SLOTS * CAP * KV;
    float *kc0 = malloc(sizeof(float) * cache_floats), *vc0 = malloc(sizeof(float) * cache_floats);
    float *x0 = malloc(sizeof(float) * NR * C), *logits = malloc(sizeof(float) * NR * V);
    memcpy(kc0, c.k, sizeof(float) * cache_floats), memcpy(vc0, c.v, sizeof(float) * cache_floats);
    model_embed(&m, x0, tok, NR);
    model_decode(&m, &c, &ds, NR, order, tok, NULL, logits); /* ds.x: the stream after the layer */

    GpuLayerWeights w;
    T_CHECK(!gpu_layer_upload(&dev, &w, &m, 0, &err), "%s", err.msg);
    CUdeviceptr inv_freq = upload(m.inv_freq, sizeof(float) * D / 2);
    float *x[3], *kc[3], *vc[3];
    const int batch[] = {NR}, alone[] = {1, 1, 1, 1, 1, 1}, split[] = {4, 2};
    const int *calls[3] = {batch, alone, split};
    for (int i = 0; i < 3; i++) {
        x[i] = malloc(sizeof(float) * NR * C);
        kc[i] = malloc(sizeof(float) * cache_floats), vc[i] = malloc(sizeof(float) * cache_floats);
        gpu_step(&w, &h, kc0, vc0, x0, inv_freq, calls[i], x[i], kc[i], vc[i]);
    }
    compare("x after the layer", x[0], ds.x, NR * C);
    float kg[NR * KV], kw[NR * KV], vg[NR * KV], vw[NR * KV];
    for (int r = 0; r < NR; r++) {
        size_t at = ((size_t)h.slots[r] * CAP + h.own[r]) * KV;
        memcpy(kg + r * KV, kc[0] + at, sizeof(float) * KV), memcpy(kw + r * KV, c.k + at, sizeof(float) * KV);
        memcpy(vg + r * KV, vc[0] + at, sizeof(float) * KV), memcpy(vw + r * KV, c.v + at, sizeof(float) * KV);
    }
    compare("the new keys", kg, kw, NR * KV);
    compare("the new values", vg, vw, NR * KV);
    const char *names[3] = {NULL, "rows alone: x, keys, values", "rows in calls of 4, 2: x, keys, values"};
    for (int i = 1; i < 3; i++) {
        int same = !memcmp(x[i], x[0], sizeof(float) * NR * C) && !memcmp(kc[i], kc[0], sizeof(float) * cache_floats) &&
                   !memcmp(vc[i], vc[0], sizeof(float) * cache_floats);
        check_bits(names[i], same);
    }
    for (int i = 0; i < 3; i++) free(x[i]), free(kc[i]), free(vc[i]);
    gpu_free(&dev, inv_freq);
    gpu_layer_free(&dev, &w);
    free(kc0), free(vc0), free(x0), free(logits);
    decode_state_free(&ds);
    kv_cache_free(&c);
    model_free(&m);
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    check_step(0);
    check_step(1);
    gpu_close(&dev);
}

int main(void) {
    return gpu_test_main("test_gpu_decode_layer", check_all);
}
