/* model/lora_layers.c — trainable LoRA adapters: layout, PEFT's initialisation,
 * and their share of the forward, backward and decoding passes (lora_layers.h). */
#include "model/lora_layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "ops/gemm.h"
#include "ops/ops.h"

#ifdef __AVX512VL__
#include <immintrin.h>
#endif

const char *const lora_module_names[LORA_N_MODULES + 1] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                           "gate_proj", "up_proj", "down_proj", NULL};

int lora_parse_targets(const char *const *names, int n, unsigned *targets, GrpoErr *err) {
    *targets = 0;
    if (n == 0) {
        *targets = 1u << LORA_Q | 1u << LORA_V;
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if (!strcmp(names[i], "all-linear")) {
            *targets |= (1u << LORA_N_MODULES) - 1;
            continue;
        }
        int k = 0;
        while (lora_module_names[k] && strcmp(lora_module_names[k], names[i])) k++;
        if (!lora_module_names[k])
            return err_set(err, "lora_target_modules: '%.80s' is not a linear layer of the model (q_proj, k_proj, "
                           "v_proj, o_proj, gate_proj, up_proj, down_proj, or all-linear)", names[i]);
        *targets |= 1u << k;
    }
    return 0;
}

void lora_module_geometry(const ModelConfig *c, LoraModule mod, LoraLinear *lin, int *row0, int *out, int *in) {
    int C = c->hidden_size, F = c->intermediate_size, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    static const LoraLinear lins[LORA_N_MODULES] = {LORA_LIN_QKV, LORA_LIN_QKV, LORA_LIN_QKV, LORA_LIN_O,
                                                    LORA_LIN_GU,  LORA_LIN_GU,  LORA_LIN_DOWN};
    const int r0[LORA_N_MODULES] = {0, q, q + kv, 0, 0, F, 0};
    const int o[LORA_N_MODULES] = {q, kv, kv, C, F, F, C};
    const int i[LORA_N_MODULES] = {C, C, C, q, C, C, F};
    *lin = lins[mod];
    *row0 = r0[mod];
    *out = o[mod];
    *in = i[mod];
}

void lora_layers_create(LoraLayers *lo, const ModelConfig *cfg, const LoraSpec *spec, uint64_t dropout_seed) {
    memset(lo, 0, sizeof *lo);
    lo->spec = *spec;
    lo->scaling = (float)(spec->use_rslora ? spec->alpha / sqrt(spec->r) : spec->alpha / spec->r);
    lo->n_layers = cfg->n_layers;
    lo->dropout_seed = dropout_seed;
    lo->entry = xmalloc(sizeof *lo->entry * (size_t)cfg->n_layers);
    int cap = 0;
    char name[96];
    for (int l = 0; l < cfg->n_layers; l++)
        for (int m = 0; m < LORA_N_MODULES; m++) {
            lo->entry[l][m] = -1;
            if (!(spec->targets & 1u << m)) continue;
            LoraLinear lin;
            int row0, out, in;
            lora_module_geometry(cfg, (LoraModule)m, &lin, &row0, &out, &in);
            const char *part = m <= LORA_O ? "self_attn" : "mlp";
            lo->entry[l][m] = lo->table.n;
            snprintf(name, sizeof name, "base_model.model.model.layers.%d.%s.%s.lora_A.weight", l, part,
                     lora_module_names[m]);
            params_add(&lo->table, &cap, name, spec->r, in, 0);
            snprintf(name, sizeof name, "base_model.model.model.layers.%d.%s.%s.lora_B.weight", l, part,
                     lora_module_names[m]);
            params_add(&lo->table, &cap, name, out, spec->r, 0);
        }
    lo->params = xaligned(sizeof(float) * (lo->table.total ? lo->table.total : 1));
    memset(lo->params, 0, sizeof(float) * lo->table.total);
}

void lora_layers_free(LoraLayers *lo) {
    params_free(&lo->table);
    free(lo->params);
    free(lo->entry);
    memset(lo, 0, sizeof *lo);
}

void lora_init_peft(LoraLayers *lo, uint64_t seed) {
    for (int i = 0; i < lo->table.n; i++) {
        const ParamEntry *e = &lo->table.entries[i];
        float *p = lo->params + e->offset;
        if (strstr(e->name, ".lora_B.")) {
            memset(p, 0, sizeof(float) * e->numel);
            continue;
        }
        /* kaiming_uniform_(a=sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain sqrt(3 / fan_in) = 1 / sqrt(fan_in) */
        float bound = (float)(1.0 / sqrt((double)e->shape[1]));
        Rng r;
        rng_init(&r, seed, rng_mix(0x4c6f5241u /* "LoRA" */, (uint64_t)i));
        for (size_t k = 0; k < e->numel; k++) p[k] = (2.0f * rng_uniform(&r) - 1.0f) * bound;
    }
}

size_t lora_saved_floats_per_token(const LoraLayers *lo) { return (size_t)LORA_N_MODULES * lo->spec.r; }

/* The widest input or output of an adaptable module: max(C, H D, F). */
static size_t widest_module(const ModelConfig *c) {
    size_t w = c->hidden_size;
    if ((size_t)c->n_heads * c->head_dim > w) w = (size_t)c->n_heads * c->head_dim;
    if ((size_t)c->intermediate_size > w) w = c->intermediate_size;
    return w;
}

size_t lora_scratch_floats_per_token(const LoraLayers *lo, const ModelConfig *c) {
    return widest_module(c) + lo->spec.r;
}

size_t lora_mask_bytes_per_token(const ModelConfig *cfg) {
    size_t n = 0;
    for (int m = 0; m < LORA_N_MODULES; m++) {
        LoraLinear lin;
        int row0, out, in;
        lora_module_geometry(cfg, (LoraModule)m, &lin, &row0, &out, &in);
        n += ((size_t)in + 7) / 8;
    }
    return n;
}

/* ---- dropout ---- */

static int dropout_on(const LoraLayers *lo, const LoraBatch *b) { return b->keys && lo->spec.dropout > 0; }

/* Module mod's mask within the layer's rows: its byte offset in a row of the mask
 * and its bytes per row. */
static size_t mask_offset(const ModelConfig *cfg, int mod, size_t *row_bytes) {
    size_t off = 0;
    for (int m = 0; m <= mod; m++) {
        LoraLinear lin;
        int row0, out, in;
        lora_module_geometry(cfg, (LoraModule)m, &lin, &row0, &out, &in);
        *row_bytes = ((size_t)in + 7) / 8;
        if (m < mod) off += *row_bytes;
    }
    return off;
}

/* Draws module mod's keep bits for layer l (bit j of a row: keep element j), each
 * row from its own stream (sequence key, position, layer, module): a 16-bit draw
 * per element, kept when >= round(p 65536) (rng_keep_bits). */
static void draw_mask(const LoraLayers *lo, const ModelConfig *cfg, const LoraBatch *b, int l, int mod) {
    uint32_t thresh = (uint32_t)lrint(lo->spec.dropout * 65536.0);
    size_t rb, off = mask_offset(cfg, mod, &rb), stride = lora_mask_bytes_per_token(cfg);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < b->N; n++) {
        uint64_t site = rng_mix(rng_mix(b->keys[b->seq[n]], (uint64_t)b->pos[n]), (uint64_t)l * LORA_N_MODULES + mod);
        rng_keep_bits(lo->dropout_seed, site, 0, rb, thresh, b->mask + (size_t)n * stride + off);
    }
}

/* out[N, in] = x * mask / (1 - p) with module mod's mask (out may be x); with
 * accumulate, out += that instead. */
static void apply_mask(const LoraLayers *lo, const ModelConfig *cfg, float *out, const float *x, int in,
                       const LoraBatch *b, int mod, int accumulate) {
    float scale = (float)(1.0 / (1.0 - lo->spec.dropout));
    size_t rb, off = mask_offset(cfg, mod, &rb), stride = lora_mask_bytes_per_token(cfg);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < b->N; n++) {
        const uint8_t *bits = b->mask + (size_t)n * stride + off;
        const float *xr = x + (size_t)n * in;
        float *o = out + (size_t)n * in;
        int j = 0;
#ifdef __AVX512VL__
        __m256 s8 = _mm256_set1_ps(scale);
        for (; j + 8 <= in; j += 8) {
            __m256 v = _mm256_maskz_mul_ps((__mmask8)bits[j >> 3], _mm256_loadu_ps(xr + j), s8);
            _mm256_storeu_ps(o + j, accumulate ? _mm256_add_ps(_mm256_loadu_ps(o + j), v) : v);
        }
#endif
        for (; j < in; j++) {
            float v = bits[j >> 3] >> (j & 7) & 1 ? xr[j] * scale : 0.0f;
            o[j] = accumulate ? o[j] + v : v;
        }
    }
}

/* x, or dropout(x) in the scratch; the forward draws the mask, later passes reuse it */
static const float *adapter_input(const LoraLayers *lo, const ModelConfig *cfg, const float *x, int in,
                                  const LoraBatch *b, int l, int mod) {
    if (!dropout_on(lo, b)) return x;
    if (!b->mask_ready[mod]) {
        draw_mask(lo, cfg, b, l, mod);
        b->mask_ready[mod] = 1;
    }
    apply_mask(lo, cfg, b->scratch, x, in, b, mod, 0);
    return b->scratch;
}

/* ---- forward, backward, decoding ---- */

/* Is module mod of layer l adapted and part of linear lin? Then its table entry
 * (A; B follows) and geometry. */
static int adapted(const LoraLayers *lo, const ModelConfig *cfg, int l, int mod, LoraLinear lin, int *e, int *row0,
                   int *out, int *in) {
    LoraLinear ml;
    *e = lo->entry[l][mod];
    if (*e < 0) return 0;
    lora_module_geometry(cfg, (LoraModule)mod, &ml, row0, out, in);
    return ml == lin;
}

void lora_linear_forward(const LoraLayers *lo, const ModelConfig *cfg, int l, LoraLinear lin, float *y, int ldy,
                         const float *x, float *u, const LoraBatch *b) {
    int r = lo->spec.r, N = b->N;
    for (int mod = 0; mod < LORA_N_MODULES; mod++) {
        int e, row0, out, in;
        if (!adapted(lo, cfg, l, mod, lin, &e, &row0, &out, &in)) continue;
        const float *A = lo->params + lo->table.entries[e].offset, *B = lo->params + lo->table.entries[e + 1].offset;
        float *um = u + (size_t)mod * N * r;
        const float *xin = adapter_input(lo, cfg, x, in, b, l, mod);
        gemm_f32(0, 1, N, r, in, 1.0f, xin, in, A, in, 0.0f, um, r);
        if (y) gemm_f32(0, 1, N, out, r, lo->scaling, um, r, B, r, 1.0f, y + row0, ldy);
    }
}

void lora_linear_backward(const LoraLayers *lo, const ModelConfig *cfg, int l, LoraLinear lin, float *dx,
                          const float *dy, int ldy, const float *x, const float *u, float *grads, GradState *state,
                          const LoraBatch *b) {
    int r = lo->spec.r, N = b->N;
    for (int mod = 0; mod < LORA_N_MODULES; mod++) {
        int e, row0, out, in;
        if (!adapted(lo, cfg, l, mod, lin, &e, &row0, &out, &in)) continue;
        const ParamEntry *ea = &lo->table.entries[e], *eb = &lo->table.entries[e + 1];
        const float *A = lo->params + ea->offset, *B = lo->params + eb->offset;
        const float *um = u + (size_t)mod * N * r;
        /* dB[out, r] += s dy^T u;  du[N, r] = s dy B;  dA[r, in] += du^T dropout(x) (= when the step's first) */
        float beta_b = grad_state_take(state, grads + eb->offset, eb->numel) ? 0.0f : 1.0f;
        float beta_a = grad_state_take(state, grads + ea->offset, ea->numel) ? 0.0f : 1.0f;
        gemm_f32(1, 0, out, r, N, lo->scaling, dy + row0, ldy, um, r, beta_b, grads + eb->offset, r);
        gemm_f32(0, 0, N, r, out, lo->scaling, dy + row0, ldy, B, r, 0.0f, b->du, r);
        const float *xin = adapter_input(lo, cfg, x, in, b, l, mod);
        gemm_f32(1, 0, r, in, N, 1.0f, b->du, r, xin, in, beta_a, grads + ea->offset, in);
        if (!dropout_on(lo, b)) {
            gemm_f32(0, 0, N, in, r, 1.0f, b->du, r, A, in, 1.0f, dx, in);
            continue;
        }
        /* dx += dropout'(du A): the same mask and scale as the forward */
        gemm_f32(0, 0, N, in, r, 1.0f, b->du, r, A, in, 0.0f, b->scratch, in);
        apply_mask(lo, cfg, dx, b->scratch, in, b, mod, 1);
    }
}

size_t lora_decode_scratch_floats(const LoraLayers *lo, const ModelConfig *cfg, int n) {
    return (size_t)n * lora_scratch_floats_per_token(lo, cfg);
}

void lora_linear_decode(const LoraLayers *lo, const ModelConfig *cfg, int l, LoraLinear lin, float *y, int ldy,
                        const float *x, int n, float *tmp) {
    int r = lo->spec.r;
    /* few rows: plain dot products per row, so a row's result never depends on
     * the others (generation must not depend on chunking) */
    for (int mod = 0; mod < LORA_N_MODULES; mod++) {
        int e, row0, out, in;
        if (!adapted(lo, cfg, l, mod, lin, &e, &row0, &out, &in)) continue;
        const float *A = lo->params + lo->table.entries[e].offset, *B = lo->params + lo->table.entries[e + 1].offset;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            const float *xi = x + (size_t)i * in;
            float *u = tmp + (size_t)i * r;
            for (int k = 0; k < r; k++) {
                const float *a = A + (size_t)k * in;
                float acc = 0;
#pragma omp simd reduction(+ : acc)
                for (int j = 0; j < in; j++) acc += xi[j] * a[j];
                u[k] = acc * lo->scaling;
            }
        }
        float *t = tmp + (size_t)n * r; /* t[n, out] = (s u) B^T, then added into y's rows */
        matmul_forward_rowwise(t, tmp, B, NULL, n, r, out);
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++)
            for (int o = 0; o < out; o++) y[(size_t)i * ldy + row0 + o] += t[(size_t)i * out + o];
    }
}
