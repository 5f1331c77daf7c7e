/* tests/model/test_lora_train.c — trainable LoRA adapters (model/lora_layers.h) on a
 * frozen model:
 *  - log-probs and the gradients of every A and B against the float64 reference
 *    (tools/make_lora_reference.py, tests/fixtures/lora_train/): all seven modules
 *    on the Qwen3 fixture (fused q|k|v and gate|up each fully adapted), and q, v,
 *    down with rslora on the Qwen2 fixture (q and v rows of the fused matrix only,
 *    k left alone); with and without recomputation (bit-identical);
 *  - the adapters switched off give the base model, merged ones the same log-probs;
 *  - PEFT's initialisation (B = 0: the base model exactly; A within 1/sqrt(in));
 *  - decoding with the KV cache applies the adapters as the training forward does;
 *  - dropout: a sequence's masks follow its key and positions, not its batch; the
 *    backward uses the forward's masks (a directional derivative agrees); the masks
 *    are their documented draws and scale the adapters' input and its gradient as
 *    defined, on widths that leave a tail past the vector steps. */
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "io/safetensors.h"
#include "model/kvcache.h"
#include "model/init.h"
#include "model/lora.h"
#include "model/model_io.h"
#include "testutil.h"
#include "fixture_tensors.h"

#define RTOL 1e-5

/* The base fixture's padded batch. */
typedef struct {
    int B, T, N;
    int32_t *ids, *targets;
    uint8_t *mask;
    float *dlp;
    float inv_temp;
} Batch;

static void read_batch(Batch *b, const char *model) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/%s/reference.safetensors", model);
    StFile f;
    GrpoErr err;
    if (st_open(&f, path, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    const StTensor *t = st_find(&f, "input_ids");
    b->B = (int)t->shape[0], b->T = (int)t->shape[1], b->N = b->B * b->T;
    long n;
    int64_t *ids = read_i64(&f, "input_ids", &n), *mask = read_i64(&f, "attention_mask", &n),
            *tgt = read_i64(&f, "target_ids", &n);
    double *lw = read_f64(&f, "loss_weight", &n), *temp = read_f64(&f, "temperature", &n);
    b->ids = malloc(sizeof(int32_t) * b->N), b->targets = malloc(sizeof(int32_t) * b->N);
    b->mask = malloc(b->N), b->dlp = malloc(sizeof(float) * b->N);
    for (int i = 0; i < b->N; i++) {
        b->ids[i] = (int32_t)ids[i];
        b->mask[i] = (uint8_t)mask[i];
        b->targets[i] = b->mask[i] ? (int32_t)tgt[i] : -1;
        b->dlp[i] = (float)lw[i];
    }
    b->inv_temp = (float)(1.0 / temp[0]);
    free(ids), free(mask), free(tgt), free(lw), free(temp);
    st_close(&f);
}

static void batch_free(Batch *b) { free(b->ids), free(b->targets), free(b->mask), free(b->dlp); }

/* forward + log-probs (+ backward into lg when lg) of the batch; returns Σ dlp·lp.
 * With lg the forward is a training pass (the frozen head's backward from the
 * forward's E_p[W]) unless recompute_head. */
static int recompute_head, base_only;
static double run(Model *m, const Batch *b, int ckpt, const uint64_t *keys, float *lp, float *lg, float *base_g) {
    Activations a;
    acts_create(&a, &m->cfg, b->N, ckpt, 4, 0);
    if (m->lora) acts_reserve_lora(&a, &m->cfg, m->lora);
    model_forward(m, &a, b->ids, b->mask, b->B, b->T, 
                  &(ModelPass){.backward = lg && !recompute_head, .base_only = base_only, .drop_keys = keys});
    model_logprobs(m, &a, b->targets, b->inv_temp, lp, NULL);
    ModelView gv;
    if (base_g) params_view(&gv, &m->table, &m->cfg, base_g);
    if (lg || base_g) model_backward(m, &a, &(ModelGrads){base_g ? &gv : NULL, lg, NULL, NULL}, b->dlp, NULL);
    if (base_g) params_view_free(&gv);
    acts_free(&a);
    double loss = 0;
    for (int i = 0; i < b->N; i++) loss += (double)b->dlp[i] * lp[i];
    return loss;
}

static void check_reference(const char *cse, const char *model) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", model);
    GrpoErr err;
    Model m;
    T_CHECK(model_load(&m, dir, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "tests/fixtures/lora_train/%s/adapter", cse);
    LoraLayers lo;
    if (lora_layers_load(&lo, path, &m, 1, &err)) {
        T_CHECK(0, "lora_layers_load %s: %s", path, err.msg);
        model_free(&m);
        return;
    }
    m.lora = &lo;
    Batch b;
    read_batch(&b, model);
    snprintf(path, sizeof path, "tests/fixtures/lora_train/%s/reference.safetensors", cse);
    StFile ref;
    T_CHECK(st_open(&ref, path, &err) == 0, "%s", err.msg);
    long n;
    double *want_lp = read_f64(&ref, "logprobs", &n), *want_loss = read_f64(&ref, "loss", &n);
    float lp[b.N];
    float *g[3] = {calloc(lo.table.total, sizeof(float)), calloc(lo.table.total, sizeof(float)),
                   calloc(lo.table.total, sizeof(float))};
    for (int pass = 0; pass <= 2; pass++) { /* no recomputation, recomputation, the head's logits recomputed */
        int ckpt = pass == 1;
        recompute_head = pass == 2;
        double loss = run(&m, &b, ckpt, NULL, lp, g[pass], NULL);
        T_CLOSE_ARRAY(cse, lp, want_lp, b.N, RTOL * max_abs(want_lp, b.N), RTOL);
        T_CHECK(t_close(loss, want_loss[0], RTOL * fabs(want_loss[0]), RTOL), "%s loss %.9g want %.9g", cse, loss,
                want_loss[0]);
    }
    for (int i = 0; i < lo.table.n; i++) {
        const ParamEntry *e = &lo.table.entries[i];
        char name[160];
        snprintf(name, sizeof name, "grad.%s", e->name);
        double *want = read_f64(&ref, name, &n);
        T_CHECK(n == (long)e->numel, "%s: %ld values, want %zu", name, n, e->numel);
        T_CLOSE_ARRAY(name, g[0] + e->offset, want, n, RTOL * max_abs(want, n), RTOL);
        T_CLOSE_ARRAY(name, g[2] + e->offset, want, n, RTOL * max_abs(want, n), RTOL);
        free(want);
    }
    T_CHECK(!memcmp(g[0], g[1], sizeof(float) * lo.table.total), "%s: recomputation changes the adapters' gradients",
            cse);
    /* the adapters off: the base model, bit for bit */
    Model plain;
    T_CHECK(model_load(&plain, dir, &err) == 0, "%s", err.msg);
    float lp_plain[b.N], lp_off[b.N];
    run(&plain, &b, 0, NULL, lp_plain, NULL, NULL);
    base_only = 1;
    run(&m, &b, 0, NULL, lp_off, NULL, NULL);
    base_only = 0;
    T_CHECK(!memcmp(lp_plain, lp_off, sizeof lp_off), "%s: adapters switched off are not the base model", cse);
    /* merged into the weights (grpo merge, --adapter): the same log-probs within fp32 rounding */
    snprintf(path, sizeof path, "tests/fixtures/lora_train/%s/adapter", cse);
    T_CHECK(lora_apply_dir(&plain, path, &err) == 0, "%s", err.msg);
    run(&plain, &b, 0, NULL, lp_plain, NULL, NULL);
    double worst = 0, scale = 0;
    for (int i = 0; i < b.N; i++) worst = fmax(worst, fabs(lp_plain[i] - lp[i])), scale = fmax(scale, fabs(lp[i]));
    T_CHECK(worst <= 1e-5 * scale, "%s: the merged model's log-probs differ from base + adapter by %g", cse, worst);
    /* decoding: the adapters in the KV-cache path give the training forward's logits */
    {
        int T = b.T, V = m.cfg.vocab_size;
        KVCache kc;
        DecodeState ds;
        kv_cache_create(&kc, &m.cfg, 1, T);
        decode_state_create(&ds, &m.cfg, T, T);
        int slots[T];
        for (int t = 0; t < T; t++) slots[t] = 0;
        float *dec = malloc(sizeof(float) * T * V), *fwd = malloc(sizeof(float) * T * V);
        model_decode(&m, &kc, &ds, T, slots, b.ids, NULL, dec); /* row 0 of the batch is unpadded */
        Activations a;
        acts_create(&a, &m.cfg, T, 0, 4, 0);
        acts_reserve_lora(&a, &m.cfg, &lo);
        uint8_t ones[T];
        memset(ones, 1, T);
        model_forward(&m, &a, b.ids, ones, 1, T, NULL);
        model_logits(&m, &a, fwd);
        double mx = 0, d = 0;
        for (int i = 0; i < T * V; i++) mx = fmax(mx, fabs(fwd[i])), d = fmax(d, fabs(fwd[i] - dec[i]));
        T_CHECK(d <= 1e-5 * mx, "%s: decoding with adapters differs from the forward: %g (scale %g)", cse, d, mx);
        acts_free(&a);
        free(dec), free(fwd);
        kv_cache_free(&kc);
        decode_state_free(&ds);
    }
    model_free(&plain);
    free(g[0]), free(g[1]), free(g[2]), free(want_lp), free(want_loss);
    recompute_head = 0;
    st_close(&ref);
    batch_free(&b);
    lora_layers_free(&lo);
    model_free(&m);
}

static void check_init_and_dropout(void) {
    GrpoErr err;
    Model m, plain;
    T_CHECK(model_load(&m, "tests/fixtures/qwen3", &err) == 0 && model_load(&plain, "tests/fixtures/qwen3", &err) == 0,
            "%s", err.msg);
    LoraSpec spec = {8, 16, 0.5, 0, 0};
    const char *targets[] = {"all-linear"};
    T_CHECK(lora_parse_targets(targets, 1, &spec.targets, &err) == 0 && spec.targets == 0x7f, "all-linear");
    const char *bad[] = {"q_proj", "lm_head"};
    T_CHECK(lora_parse_targets(bad, 2, &spec.targets, &err) == -1 && strstr(err.msg, "'lm_head'"), "lm_head refused");
    T_CHECK(lora_parse_targets(NULL, 0, &spec.targets, &err) == 0 && spec.targets == (1u << LORA_Q | 1u << LORA_V),
            "PEFT's default: q_proj v_proj");
    spec.targets = 0x7f;
    LoraLayers lo;
    lora_layers_create(&lo, &m.cfg, &spec, 5);
    lora_init_peft(&lo, 3);
    int a_ok = 1, b_zero = 1, a_spread = 0;
    for (int i = 0; i < lo.table.n; i++) {
        const ParamEntry *e = &lo.table.entries[i];
        const float *p = lo.params + e->offset;
        float bound = 1.0f / sqrtf((float)e->shape[1]), mx = 0;
        for (size_t k = 0; k < e->numel; k++) mx = fmaxf(mx, fabsf(p[k]));
        if (strstr(e->name, "lora_B")) b_zero &= mx == 0;
        else a_ok &= mx <= bound, a_spread += mx > 0.8f * bound;
    }
    T_CHECK(a_ok && b_zero && a_spread == lo.table.n / 2, "PEFT init: A ~ U(+-1/sqrt(in)), B = 0");
    m.lora = &lo;
    Batch b;
    read_batch(&b, "qwen3");
    float lp0[b.N], lp1[b.N];
    run(&plain, &b, 0, NULL, lp0, NULL, NULL);
    run(&m, &b, 0, NULL, lp1, NULL, NULL);
    T_CHECK(!memcmp(lp0, lp1, sizeof lp0), "B = 0: the adapted model is the base model");
    /* non-zero B for the dropout checks */
    for (int i = 0; i < lo.table.n; i++) {
        const ParamEntry *e = &lo.table.entries[i];
        for (size_t k = 0; k < e->numel; k++) lo.params[e->offset + k] = 0.3f * sinf(0.37f * (float)k + (float)i);
    }
    uint64_t keys[3] = {101, 202, 303};
    float lpd[b.N], lpn[b.N];
    run(&m, &b, 0, keys, lpd, NULL, NULL);
    run(&m, &b, 0, NULL, lpn, NULL, NULL);
    T_CHECK(memcmp(lpd, lpn, sizeof lpd) != 0, "dropout (keys given) changes the forward");
    /* sequence 0 alone, with its key, gives what it gave inside the batch */
    Batch one = b;
    one.B = 1, one.N = b.T;
    float lps[b.T];
    run(&m, &one, 0, keys, lps, NULL, NULL);
    double d = 0;
    for (int t = 0; t < b.T; t++) d = fmax(d, fabs(lps[t] - lpd[t]));
    T_CHECK(d < 1e-4, "a sequence's dropout masks depend on its batch: %g", d);
    /* the backward uses the forward's masks: the derivative along the gradient is |g|^2 */
    size_t P = lo.table.total;
    float *g = calloc(P, sizeof(float)), *save = malloc(sizeof(float) * P);
    memcpy(save, lo.params, sizeof(float) * P);
    run(&m, &b, 1, keys, lpd, g, NULL);
    double gg = 0;
    for (size_t k = 0; k < P; k++) gg += (double)g[k] * g[k];
    double h = 1e-3 / sqrt(gg), f[2];
    for (int s = 0; s < 2; s++) {
        for (size_t k = 0; k < P; k++) lo.params[k] = save[k] + (float)((s ? -h : h) * g[k]);
        f[s] = run(&m, &b, 1, keys, lpd, NULL, NULL);
    }
    double fd = (f[0] - f[1]) / (2 * h);
    T_CHECK(fabs(fd - gg) < 0.02 * gg, "with dropout, d/dt L(p + t g) = %.6g, |g|^2 = %.6g", fd, gg);
    memcpy(lo.params, save, sizeof(float) * P);
    free(g), free(save);
    batch_free(&b);
    lora_layers_free(&lo);
    model_free(&m);
    model_free(&plain);
}

/* A 2-layer Qwen3 config of these widths (vocabulary 40, tied, 64 positions). */
static void small_qwen3(ModelConfig *cfg, int hidden, int inter, int heads, int kv_heads, int head_dim) {
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:b, s:i}", "model_type", "qwen3",
                          "hidden_size", hidden, "intermediate_size", inter, "num_hidden_layers", 2,
                          "num_attention_heads", heads, "num_key_value_heads", kv_heads, "head_dim", head_dim,
                          "vocab_size", 40, "rms_norm_eps", 1e-6, "tie_word_embeddings", 1,
                          "max_position_embeddings", 64);
    GrpoErr err;
    T_CHECK(config_from_json(cfg, j, "small qwen3", &err) == 0, "%s", err.msg);
    json_decref(j);
}

/* Decoding with adapters on every module of a model whose q projection (H D = 64)
 * is wider than both the hidden size (16) and the MLP (24): the decode scratch is
 * sized by the widest module, and the decoded logits equal the training forward's. */
static void check_decode_wide_heads(void) {
    ModelConfig cfg;
    small_qwen3(&cfg, 16, 24, 4, 2, 16);
    Model m;
    model_create(&m, &cfg);
    model_init_random(&m, 3, 0.3f);
    LoraSpec spec = {4, 8, 0, 0, (1u << LORA_N_MODULES) - 1};
    LoraLayers lo;
    lora_layers_create(&lo, &m.cfg, &spec, 1);
    for (size_t i = 0; i < lo.table.total; i++) lo.params[i] = 0.2f * sinf(0.7f * (float)i);
    m.lora = &lo;
    enum { T = 9, V = 40 };
    int32_t ids[T];
    int slots[T];
    uint8_t ones[T];
    for (int t = 0; t < T; t++) ids[t] = (t * 7 + 3) % V, slots[t] = 0, ones[t] = 1;
    KVCache kc;
    DecodeState ds;
    kv_cache_create(&kc, &m.cfg, 1, T);
    decode_state_create(&ds, &m.cfg, T, T);
    float dec[T * V], fwd[T * V];
    model_decode(&m, &kc, &ds, T, slots, ids, NULL, dec);
    Activations a;
    acts_create(&a, &m.cfg, T, 0, 4, 0);
    acts_reserve_lora(&a, &m.cfg, &lo);
    model_forward(&m, &a, ids, ones, 1, T, NULL);
    model_logits(&m, &a, fwd);
    double mx = 0, d = 0;
    for (int i = 0; i < T * V; i++) mx = fmax(mx, fabs(fwd[i])), d = fmax(d, fabs(fwd[i] - dec[i]));
    T_CHECK(d <= 1e-5 * mx, "wide heads: decoding with adapters differs from the forward: %g (scale %g)", d, mx);
    acts_free(&a);
    kv_cache_free(&kc);
    decode_state_free(&ds);
    lora_layers_free(&lo);
    model_free(&m);
}

/* The dropout masks and their use, against their definition: element j of row n of
 * module mod's input is kept when bit j of rng_keep_bits(seed, site, 0, ...) is set,
 * site = mix(mix(key of n's sequence, n's position), layer * LORA_N_MODULES + mod),
 * a keep bit being a 16-bit draw >= round(p 65536); a kept element is scaled by
 * 1 / (1 - p). Checked on every module of layer 1 of a model whose input widths (20,
 * 36 and 60) leave 4 elements past the last 8 (the masking code's vector steps):
 * the masks drawn; u = dropout(x) A^T (forward); dx += dropout'(s (dy B) A)
 * (backward) within 1e-5 of float64; about 1 - p kept. */
static void check_dropout_masks(void) {
    ModelConfig cfg;
    small_qwen3(&cfg, 20, 36, 3, 1, 20);
    const double p = 0.3;
    LoraSpec spec = {4, 8, p, 0, (1u << LORA_N_MODULES) - 1};
    LoraLayers lo;
    const uint64_t seed = 99;
    lora_layers_create(&lo, &cfg, &spec, seed);
    for (size_t i = 0; i < lo.table.total; i++) lo.params[i] = 0.2f * sinf(0.7f * (float)i + 0.1f);
    enum { B = 2, T = 7, N = B * T, L = 1 };
    int32_t pos[N], seq[N];
    uint64_t keys[B] = {1234, 5678};
    for (int n = 0; n < N; n++) pos[n] = n % T + 3, seq[n] = n / T;
    size_t stride = lora_mask_bytes_per_token(&cfg);
    int r = spec.r;
    float *scratch = malloc(sizeof(float) * N * lora_scratch_floats_per_token(&lo, &cfg)), *du = malloc(sizeof(float) * N * r);
    float *u = malloc(sizeof(float) * LORA_N_MODULES * N * r), *grads = calloc(lo.table.total, sizeof(float));
    uint8_t *mask = calloc(N, stride), ready[LORA_N_MODULES] = {0};
    LoraBatch b = {N, seq, pos, keys, scratch, du, mask, ready};
    const double keep_scale = 1.0 / (1.0 - p);
    size_t off = 0, kept = 0, total = 0;
    int masks_ok = 1, tails = 0;
    double worst_u = 0, worst_dx = 0;
    for (int mod = 0; mod < LORA_N_MODULES; mod++) {
        LoraLinear lin;
        int row0, out, in;
        lora_module_geometry(&cfg, (LoraModule)mod, &lin, &row0, &out, &in);
        size_t rb = ((size_t)in + 7) / 8;
        tails += in % 8 != 0;
        int ldy = 0; /* the fused linear's width: its modules' rows end to end */
        for (int k = 0; k < LORA_N_MODULES; k++) {
            LoraLinear kl;
            int kr, ko, ki;
            lora_module_geometry(&cfg, (LoraModule)k, &kl, &kr, &ko, &ki);
            if (kl == lin && kr + ko > ldy) ldy = kr + ko;
        }
        float *x = malloc(sizeof(float) * N * in), *dx = malloc(sizeof(float) * N * in);
        float *dy = malloc(sizeof(float) * N * ldy);
        for (int i = 0; i < N * in; i++) x[i] = cosf(0.31f * (float)i + (float)mod), dx[i] = 0.5f * sinf((float)i);
        for (int i = 0; i < N * ldy; i++) dy[i] = sinf(0.17f * (float)i - (float)mod);
        float *dx0 = malloc(sizeof(float) * N * in);
        memcpy(dx0, dx, sizeof(float) * N * in);
        /* one module at a time: the others' entries hidden */
        int saved[LORA_N_MODULES];
        for (int k = 0; k < LORA_N_MODULES; k++) saved[k] = lo.entry[L][k], lo.entry[L][k] = k == mod ? saved[k] : -1;
        lora_linear_forward(&lo, &cfg, L, lin, NULL, ldy, x, u, &b);
        lora_linear_backward(&lo, &cfg, L, lin, dx, dy, ldy, x, u, grads, NULL, &b);
        for (int k = 0; k < LORA_N_MODULES; k++) lo.entry[L][k] = saved[k];
        const float *A = lo.params + lo.table.entries[saved[mod]].offset;
        const float *Bm = lo.params + lo.table.entries[saved[mod] + 1].offset;
        for (int n = 0; n < N; n++) {
            uint8_t want[64];
            uint64_t site = rng_mix(rng_mix(keys[n / T], (uint64_t)pos[n]), (uint64_t)L * LORA_N_MODULES + mod);
            rng_keep_bits(seed, site, 0, rb, (uint32_t)lrint(p * 65536.0), want);
            const uint8_t *got = mask + (size_t)n * stride + off;
            masks_ok &= !memcmp(got, want, rb);
            double dxs = 0;
            for (int k = 0; k < r; k++) {
                double s = 0, scale = 0;
                for (int c = 0; c < in; c++) {
                    double v = got[c >> 3] >> (c & 7) & 1 ? x[(size_t)n * in + c] * keep_scale : 0.0;
                    s += A[(size_t)k * in + c] * v, scale += fabs(A[(size_t)k * in + c] * v);
                }
                worst_u = fmax(worst_u, fabs(u[((size_t)mod * N + n) * r + k] - s) / (scale + 1e-30));
            }
            for (int c = 0; c < in; c++) { /* dx[n, c] - dx0 = keep / (1 - p) * sum_k (s dy B)[n, k] A[k, c] */
                int keep = got[c >> 3] >> (c & 7) & 1;
                kept += keep, total++;
                double s = 0, scale = 0;
                for (int k = 0; k < r; k++) {
                    double dun = 0;
                    for (int o = 0; o < out; o++) dun += lo.scaling * dy[(size_t)n * ldy + row0 + o] * Bm[(size_t)o * r + k];
                    s += dun * A[(size_t)k * in + c], scale += fabs(dun * A[(size_t)k * in + c]);
                }
                s = keep ? s * keep_scale : 0.0;
                dxs = fmax(dxs, fabs((dx[(size_t)n * in + c] - dx0[(size_t)n * in + c]) - s) / (scale * keep_scale + 1e-30));
            }
            worst_dx = fmax(worst_dx, dxs);
        }
        off += rb;
        free(x), free(dx), free(dx0), free(dy);
    }
    T_CHECK(tails == LORA_N_MODULES, "every module's input leaves a tail past the 8-wide steps");
    T_CHECK(masks_ok, "the dropout masks are not rng_keep_bits' draws for their (key, position, layer, module)");
    T_CHECK(worst_u <= 1e-5, "u = dropout(x) A^T: relative error %.3g", worst_u);
    T_CHECK(worst_dx <= 1e-5, "dx through the dropout mask: relative error %.3g", worst_dx);
    double frac = (double)kept / total;
    T_CHECK(fabs(frac - (1 - p)) < 0.05, "kept %.3f of %zu elements, not about %.2f", frac, total, 1 - p);
    free(scratch), free(du), free(u), free(grads), free(mask);
    lora_layers_free(&lo);
    config_free(&cfg);
}

int main(void) {
    check_dropout_masks();
    check_decode_wide_heads();
    check_reference("qwen3_all", "qwen3");
    check_reference("qwen2_rslora", "qwen2");
    check_init_and_dropout();
    return t_summary("test_lora_train");
}
