/* model/transformer.c — training forward and backward of the generic transformer
 * (see transformer.h). Every kernel call goes through ops/; this file only wires
 * layers together and owns the activation memory plan. */
#include "model/transformer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "model/lora_layers.h"
#include "ops/gemm.h"

void model_create(Model *m, ModelConfig *cfg) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    cfg->raw = NULL; /* ownership moved */
    params_build(&m->table, &m->cfg);
    m->params = xaligned(sizeof(float) * m->table.total);
    memset(m->params, 0, sizeof(float) * m->table.total);
    params_view(&m->w, &m->table, &m->cfg, m->params);
    m->inv_freq = xmalloc(sizeof(float) * (m->cfg.head_dim / 2));
    config_rope_inv_freq(&m->cfg, m->inv_freq);
}

void model_create_half(Model *m, ModelConfig *cfg, WeightForm form) {
    CHECK(form == WEIGHTS_BF16 || form == WEIGHTS_BF16_HELD);
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    cfg->raw = NULL;
    params_build(&m->table, &m->cfg);
    params_hold_half(&m->table);
    m->params = xaligned(sizeof(float) * (m->table.total ? m->table.total : 1));
    memset(m->params, 0, sizeof(float) * m->table.total);
    params_view(&m->w, &m->table, &m->cfg, m->params);
    ModelHalf *h = m->half = xcalloc(1, sizeof *h);
    h->products16 = form == WEIGHTS_BF16;
    h->params16 = xaligned(sizeof(uint16_t) * m->table.total16);
    memset(h->params16, 0, sizeof(uint16_t) * m->table.total16);
    h->w16 = params_view16(&m->table, &m->cfg, h->params16);
    h->embed16 = params_at16(&m->table, h->params16, "model.embed_tokens.weight");
    h->head16 = m->cfg.tie_word_embeddings ? h->embed16 : params_at16(&m->table, h->params16, "lm_head.weight");
    m->inv_freq = xmalloc(sizeof(float) * (m->cfg.head_dim / 2));
    config_rope_inv_freq(&m->cfg, m->inv_freq);
}

size_t model_weight_bytes(const Model *m) {
    if (m->mixed) return sizeof(uint16_t) * 2 * m->table.total + sizeof(float) * m->mixed->vt.total;
    return sizeof(float) * m->table.total + sizeof(uint16_t) * m->table.total16;
}

/* m's ModelMixed with zero halves (the table's gaps stay zero), and the views over it:
 * the norms and biases in fp32 where the forward reads them, the matrices from hi. */
static ModelMixed *mixed_create(Model *m) {
    ModelMixed *x = m->mixed = xcalloc(1, sizeof *x);
    size_t n = m->table.total ? m->table.total : 1;
    x->hi = xaligned(sizeof(uint16_t) * n);
    x->lo = xaligned(sizeof(uint16_t) * n);
    params_copy(&x->vt, &m->table);
    params_hold_half(&x->vt);
    x->vectors = xaligned(sizeof(float) * (x->vt.total ? x->vt.total : 1));
    memset(x->vectors, 0, sizeof(float) * x->vt.total);
    params_view_free(&m->w);
    params_view(&m->w, &x->vt, &m->cfg, x->vectors);
    x->w16 = params_view16(&m->table, &m->cfg, x->hi);
    x->embed16 = params_at16(&m->table, x->hi, "model.embed_tokens.weight");
    x->head16 = m->cfg.tie_word_embeddings ? x->embed16 : params_at16(&m->table, x->hi, "lm_head.weight");
    return x;
}

void model_create_mixed(Model *m, ModelConfig *cfg) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    cfg->raw = NULL;
    params_build(&m->table, &m->cfg);
    ModelMixed *x = mixed_create(m);
    memset(x->hi, 0, sizeof(uint16_t) * m->table.total);
    memset(x->lo, 0, sizeof(uint16_t) * m->table.total);
    m->inv_freq = xmalloc(sizeof(float) * (m->cfg.head_dim / 2));
    config_rope_inv_freq(&m->cfg, m->inv_freq);
}

void model_use_bf16_compute(Model *m) {
    CHECK(!m->half && !m->mixed); /* a half model's weights are bf16 already and never train */
    ModelMixed *x = mixed_create(m);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < m->table.total; i += 4096) /* 4096 at a time: the threads' shares */
        f32_split_n(x->hi + i, x->lo + i, m->params + i, m->table.total - i < 4096 ? m->table.total - i : 4096);
    free(m->params);
    m->params = NULL;
    model_sync_bf16(m);
}

void model_sync_bf16(Model *m) {
    ModelMixed *x = m->mixed;
    if (!x) return;
    for (int i = 0; i < x->vt.n; i++) {
        const ParamEntry *v = &x->vt.entries[i], *e = &m->table.entries[i]; /* the same tensor */
        if (!v->half) f32_join_n(x->vectors + v->offset, x->hi + e->offset, x->lo + e->offset, e->numel);
    }
}

static void mixed_free(ModelMixed *x) {
    if (!x) return;
    free(x->hi);
    free(x->lo);
    free(x->vectors);
    free(x->w16);
    params_free(&x->vt);
    free(x);
}

void model_use_fp32_compute(Model *m) {
    ModelMixed *x = m->mixed;
    if (!x) return;
    m->params = xaligned(sizeof(float) * (m->table.total ? m->table.total : 1));
    model_get_params(m, 0, m->table.total, m->params);
    m->mixed = NULL;
    mixed_free(x);
    params_view_free(&m->w);
    params_view(&m->w, &m->table, &m->cfg, m->params);
}

void model_get_params(const Model *m, size_t i0, size_t n, float *out) {
    CHECK(!m->half && i0 + n <= m->table.total);
    if (!m->mixed) {
        memcpy(out, m->params + i0, sizeof(float) * n);
        return;
    }
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i += 4096)
        f32_join_n(out + i, m->mixed->hi + i0 + i, m->mixed->lo + i0 + i, n - i < 4096 ? n - i : 4096);
}

void model_set_params(Model *m, size_t i0, size_t n, const float *in) {
    CHECK(!m->half && i0 + n <= m->table.total);
    if (!m->mixed) {
        memcpy(m->params + i0, in, sizeof(float) * n);
        return;
    }
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i += 4096)
        f32_split_n(m->mixed->hi + i0 + i, m->mixed->lo + i0 + i, in + i, n - i < 4096 ? n - i : 4096);
    model_sync_bf16(m);
}

void model_bf16_describe(const Model *m, char *out, size_t n) {
    if (m->mixed)
        snprintf(out, n, " (held as bf16 values and low halves: products in bf16 on %s)", gemm_bf16_backend_name());
    else if (n)
        out[0] = 0;
}

WeightMatrix model_weight(const Model *m, const float *w, const uint16_t *w16) {
    if (m->half) return (WeightMatrix){.w16 = w16, .bf16_products = m->half->products16};
    if (m->mixed) return (WeightMatrix){.w16 = w16, .bf16_products = 1};
    return (WeightMatrix){.w = w};
}

WeightMatrix model_lm_head(const Model *m) {
    return model_weight(m, m->w.lm_head, m->half ? m->half->head16 : m->mixed ? m->mixed->head16 : NULL);
}

const LayerView16 *model_layer16(const Model *m, int l) {
    return m->half ? &m->half->w16[l] : m->mixed ? &m->mixed->w16[l] : NULL;
}

void model_embed(const Model *m, float *out, const int32_t *ids, int N) {
    int C = m->cfg.hidden_size;
    if (m->half)
        embedding_forward_bf16(out, ids, m->half->embed16, N, C);
    else if (m->mixed) /* the fp32 rows, as an fp32 model's embedding reads them */
        embedding_forward_split(out, ids, m->mixed->embed16, m->mixed->lo + (m->mixed->embed16 - m->mixed->hi), N, C);
    else
        embedding_forward(out, ids, m->w.embed, N, C);
}

void model_free(Model *m) {
    if (m->half) {
        free(m->half->params16);
        free(m->half->w16);
        free(m->half);
    }
    mixed_free(m->mixed);
    params_view_free(&m->w);
    params_free(&m->table);
    free(m->params);
    free(m->inv_freq);
    config_free(&m->cfg);
    memset(m, 0, sizeof *m);
}

/* ---- memory plan ---- */

typedef struct {
    size_t x, layer, final, back, lp, att;
} Plan;

/* Floats that n bf16 values take (whole floats, so the arena stays in floats). */
static size_t halves(size_t n) { return (n + 1) / 2; }

/* A layer's saved tensors but gate/up: what CKPT_SELECTIVE recomputes. */
static size_t layer_floats_recomputed(const ModelConfig *c, size_t N, int bf16) {
    size_t C = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    size_t H = c->n_heads, Hkv = c->n_kv_heads;
    size_t qkv = (H + 2 * Hkv) * D, qk = (H + Hkv) * D;
    size_t saved16 = bf16 ? 2 * halves(N * C) : N * (C + C + F); /* h1, h2 (and act in fp32) */
    return N * (1 + qkv + qk + (H + Hkv) + H * D + H + C + 1) + saved16;
}

/* Gate/up as the backward reads it: gu in fp32, or gu16 with act16 (SwiGLU's bf16 output is
 * rounded from the fp32 gate/up, which gu16 no longer holds: it is kept, not recomputed). */
static size_t layer_floats_gate_up(const ModelConfig *c, size_t N, int bf16) {
    size_t F = c->intermediate_size;
    return bf16 ? halves(N * F) + halves(N * 2 * F) : N * 2 * F;
}

/* Floats of the layers' saved tensors: one layer's recomputed part (every layer's
 * without checkpointing) and the gate/up of one layer (CKPT_FULL) or of each. */
static size_t layers_floats(const ModelConfig *c, size_t N, CheckpointMode ckpt, int bf16) {
    size_t L = c->n_layers;
    return (ckpt ? 1 : L) * layer_floats_recomputed(c, N, bf16) +
           (ckpt == CKPT_FULL ? 1 : L) * layer_floats_gate_up(c, N, bf16);
}

size_t acts_kept_bytes(const ModelConfig *c, CheckpointMode ckpt, int bf16) {
    size_t x = c->hidden_size; /* the layer's input, a->x */
    if (ckpt == CKPT_NONE) x += layer_floats_recomputed(c, 2, bf16) / 2 + layer_floats_gate_up(c, 2, bf16) / 2;
    if (ckpt == CKPT_SELECTIVE) x += layer_floats_gate_up(c, 2, bf16) / 2;
    return sizeof(float) * x; /* 2 tokens: whole floats of bf16 values */
}

void acts_describe(const ModelConfig *c, CheckpointMode ckpt, int bf16, char *out, size_t n) {
    double kb = acts_kept_bytes(c, ckpt, bf16) / 1024.0;
    if (ckpt == CKPT_NONE)
        snprintf(out, n, "no checkpointing: %.1f KB a token a layer kept", kb);
    else if (ckpt == CKPT_FULL)
        snprintf(out, n, "checkpointed, full: a layer's input kept, %.1f KB a token a layer, the layer recomputed", kb);
    else
        snprintf(out, n, "checkpointed, selective: a layer's input and gate/up product kept, %.1f KB a token a layer, "
                 "its attention side recomputed", kb);
}

/* The LM head's gathered dz^T (LogprobScratch.dw_rows): with bf16 activations and no
 * checkpointing, where the layers' gate/up outputs saved in bf16 free more than it
 * takes (467 KB a token against 306 KB at Qwen2-0.5B); checkpointing keeps one layer's,
 * and there it would be memory the user asked not to spend. */
static int head_dw_rows(int max_tokens, CheckpointMode ckpt, int chunk_rows, int bf16) {
    return bf16 && !ckpt ? logprob_dw_rows(chunk_rows, max_tokens) : 0;
}

static Plan plan(const ModelConfig *c, int max_tokens, CheckpointMode ckpt, int chunk_rows, int bf16) {
    size_t N = max_tokens, C = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    size_t H = c->n_heads, Hkv = c->n_kv_heads;
    Plan p;
    p.x = (size_t)(c->n_layers + 1) * N * C;
    p.layer = layers_floats(c, N, ckpt, bf16);
    p.final = N * C + N + N;
    p.back = N * (C + C + (H + 2 * Hkv) * D + (H + Hkv) * D + H * D + 2 * F + F + C) + halves(N * C);
    p.lp = logprob_scratch_floats(chunk_rows, c->hidden_size, c->vocab_size,
                                  head_dw_rows(max_tokens, ckpt, chunk_rows, bf16));
    p.att = attention_scratch_floats(max_tokens, (int)H, (int)D) + 16; /* + its start on 64 bytes */
    return p;
}

size_t acts_plan_bytes(const ModelConfig *cfg, int max_tokens, CheckpointMode ckpt, int chunk_rows, int bf16) {
    /* Every term but the LM-head scratch is max_tokens x a size per token: with a
     * hostile config and a long micro-batch the product can pass 64 bits, so it
     * saturates at SIZE_MAX (never fits) instead of wrapping to a small plan. */
    Plan one = plan(cfg, 1, ckpt, chunk_rows, 0); /* per token at most the fp32 plan's, */
    size_t per_token = sizeof(float) * (one.x + one.layer + one.final + one.back + one.att) + 3 * sizeof(int32_t) + 1;
    per_token += sizeof(uint16_t) * ((size_t)cfg->vocab_size + cfg->hidden_size); /* + a bf16 head's dz^T and h */
    size_t lp_bytes = sizeof(float) * logprob_scratch_floats(chunk_rows, cfg->hidden_size, cfg->vocab_size, 0);
    if (max_tokens > 0 && per_token > (SIZE_MAX / 2 - lp_bytes) / (size_t)max_tokens) return SIZE_MAX;
    Plan p = plan(cfg, max_tokens, ckpt, chunk_rows, bf16);
    size_t ints = (size_t)max_tokens * (3 * sizeof(int32_t) + 1);
    return sizeof(float) * (p.x + p.layer + p.final + p.back + p.lp + p.att) + ints;
}

void acts_create(Activations *a, const ModelConfig *c, int max_tokens, CheckpointMode ckpt, int chunk_rows, int bf16) {
    CHECK(max_tokens > 0 && chunk_rows > 0 && ckpt >= CKPT_NONE && ckpt <= CKPT_SELECTIVE);
    memset(a, 0, sizeof *a);
    a->max_tokens = max_tokens;
    a->checkpointing = ckpt;
    a->bf16 = bf16;
    a->bytes = acts_plan_bytes(c, max_tokens, ckpt, chunk_rows, bf16);
    CHECK(a->bytes != SIZE_MAX); /* callers compare the plan with the memory available first */
    Plan p = plan(c, max_tokens, ckpt, chunk_rows, bf16);
    size_t total = p.x + p.layer + p.final + p.back + p.lp + p.att;
    a->arena = xaligned(sizeof(float) * total);
    float *cur = a->arena;
#define TAKE(n) (cur += (n), cur - (n))
    size_t N = max_tokens, C = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    size_t H = c->n_heads, Hkv = c->n_kv_heads;
    size_t QKV = (H + 2 * Hkv) * D, QK = (H + Hkv) * D;
    a->x = TAKE(p.x);
    int nl = ckpt == CKPT_FULL ? 1 : c->n_layers;
    a->layers = xcalloc(nl, sizeof(LayerActs));
    for (int l = 0; l < nl; l++) {
        LayerActs *L = &a->layers[l];
        if (ckpt == CKPT_SELECTIVE && l > 0) { /* layer 0's recomputed buffers, its own gate/up */
            *L = a->layers[0];
            if (bf16) {
                L->act16 = (uint16_t *)TAKE(halves(N * F));
                L->gu16 = (uint16_t *)TAKE(halves(N * 2 * F));
            } else {
                L->gu = TAKE(N * 2 * F);
            }
            continue;
        }
        L->rstd1 = TAKE(N);
        L->qkv = TAKE(N * QKV);
        L->qk = TAKE(N * QK);
        L->qk_rstd = TAKE(N * (H + Hkv));
        L->att = TAKE(N * H * D);
        L->lse = TAKE(N * H);
        L->xmid = TAKE(N * C);
        L->rstd2 = TAKE(N);
        if (bf16) {
            L->h1_16 = (uint16_t *)TAKE(halves(N * C));
            L->h2_16 = (uint16_t *)TAKE(halves(N * C));
            L->act16 = (uint16_t *)TAKE(halves(N * F));
            L->gu16 = (uint16_t *)TAKE(halves(N * 2 * F));
        } else {
            L->h1 = TAKE(N * C);
            L->h2 = TAKE(N * C);
            L->act = TAKE(N * F);
            L->gu = TAKE(N * 2 * F);
        }
    }
    a->hf = TAKE(N * C);
    a->rstdf = TAKE(N);
    a->lse = TAKE(N);
    a->dx = TAKE(N * C);
    a->dh = TAKE(N * C);
    a->dqkv = TAKE(N * QKV);
    a->dqk = TAKE(N * QK);
    a->datt = TAKE(N * H * D);
    a->dgu = TAKE(N * 2 * F);
    a->dact = TAKE(N * F);
    a->dhf = TAKE(N * C);
    a->dx16 = (uint16_t *)TAKE(halves(N * C));
    a->lp_buf = TAKE(p.lp);
    a->att_scratch = (float *)(((uintptr_t)TAKE(p.att) + 63) & ~(uintptr_t)63);
#undef TAKE
    CHECK((size_t)(cur - a->arena) == total);
    logprob_scratch_init(&a->lp, a->lp_buf, chunk_rows, c->hidden_size, c->vocab_size,
                         head_dw_rows(max_tokens, ckpt, chunk_rows, bf16));
    a->ids = xmalloc(sizeof(int32_t) * N);
    a->pos = xmalloc(sizeof(int32_t) * N);
    a->seq = xmalloc(sizeof(int32_t) * N);
    a->starts = xmalloc(sizeof(int) * (N + 1));
    a->skip = xmalloc(sizeof(int) * N);
    a->from = xmalloc(sizeof(int) * N);
    a->targets = xmalloc(sizeof(int32_t) * N);
    a->mask = xmalloc(N);
    a->head_dlp = xmalloc(sizeof(float) * N);
    a->rows = xmalloc(sizeof(int) * N);
}

/* Dropout masks are kept for every layer, checkpointed or not: drawn once in the
 * forward, reused by the recomputation and the backward. */
static size_t mask_bytes(const ModelConfig *c, const LoraLayers *lo, int max_tokens) {
    return lo->spec.dropout > 0 ? (size_t)c->n_layers * max_tokens * lora_mask_bytes_per_token(c) : 0;
}

size_t acts_lora_plan_bytes(const ModelConfig *c, const LoraLayers *lo, int max_tokens, CheckpointMode ckpt) {
    size_t nl = ckpt ? 1 : (size_t)c->n_layers;
    return sizeof(float) * (size_t)max_tokens *
           (nl * lora_saved_floats_per_token(lo) + lora_scratch_floats_per_token(lo, c) + c->hidden_size) +
           mask_bytes(c, lo, max_tokens);
}

void acts_reserve_lora(Activations *a, const ModelConfig *c, const LoraLayers *lo) {
    CHECK(!a->lora_arena);
    size_t N = a->max_tokens, saved = N * lora_saved_floats_per_token(lo);
    size_t bytes = acts_lora_plan_bytes(c, lo, a->max_tokens, a->checkpointing), masks = mask_bytes(c, lo, a->max_tokens);
    a->lora_arena = xaligned(bytes - masks);
    int nl = a->checkpointing ? 1 : c->n_layers, nstruct = a->checkpointing == CKPT_FULL ? 1 : c->n_layers;
    for (int l = 0; l < nstruct; l++) /* recomputed with checkpointing: one layer's, shared */
        a->layers[l].lora_u = a->lora_arena + (size_t)(l < nl ? l : 0) * saved;
    a->lora_scratch = a->lora_arena + (size_t)nl * saved;
    a->pw = a->lora_scratch + N * lora_scratch_floats_per_token(lo, c);
    if (masks) {
        a->lora_mask = xmalloc(masks);
        a->lora_mask_ready = xcalloc((size_t)c->n_layers * LORA_N_MODULES, 1);
    }
    a->bytes += bytes;
}

void acts_free(Activations *a) {
    free(a->lora_arena);
    free(a->lora_mask);
    free(a->lora_mask_ready);
    free(a->arena);
    free(a->layers);
    free(a->ids);
    free(a->pos);
    free(a->seq);
    free(a->starts);
    free(a->skip);
    free(a->from);
    free(a->targets);
    free(a->mask);
    free(a->head_dlp);
    free(a->rows);
    memset(a, 0, sizeof *a);
}

/* ---- one layer ---- */

static void add_inplace(float *y, const float *x, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* The adapters the forward applies (none in a base_only pass). */
static const LoraLayers *applied(const Model *m, const Activations *a) { return a->pass.base_only ? NULL : m->lora; }

/* The adapters' view of the batch at layer l, or NULL when the pass applies none. */
static const LoraLayers *adapters(const Model *m, const Activations *a, int l, LoraBatch *b) {
    const LoraLayers *lo = applied(m, a);
    if (!lo) return NULL;
    CHECK(a->lora_arena); /* acts_reserve_lora */
    size_t width = lora_scratch_floats_per_token(lo, &m->cfg) - lo->spec.r;
    *b = (LoraBatch){a->N, a->seq, a->pos, a->lora_mask ? a->pass.drop_keys : NULL, a->lora_scratch,
                     a->lora_scratch + (size_t)a->N * width, NULL, NULL};
    if (a->lora_mask) {
        b->mask = a->lora_mask + (size_t)l * a->N * lora_mask_bytes_per_token(&m->cfg);
        b->mask_ready = a->lora_mask_ready + (size_t)l * LORA_N_MODULES;
    }
    return lo;
}

/* A product's input as a layer saves it: in fp32 (x), or in bf16 (x16, bf16 activations). */
static void product_forward(float *out, const float *x, const uint16_t *x16, WeightMatrix W, const float *bias, int N,
                            int I, int O) {
    if (x16)
        matmul_forward_bf16_in16(out, x16, W.w16, bias, N, I, O);
    else
        matmul_forward_weight(out, x, W, bias, N, I, O);
}

/* scratch: dout itself where the caller does not read it again (its memory then takes
 * its bf16 values in bf16 products, matmul_backward_bf16_scratch), else NULL and
 * dout16 takes them */
static void product_backward(float *din, float *dW, float *dbias, const float *dout, float *scratch, uint16_t *dout16,
                             const float *x, const uint16_t *x16, WeightMatrix W, int N, int I, int O, int write_dw) {
    if ((x16 || W.bf16_products) && scratch)
        matmul_backward_bf16_scratch(din, dW, dbias, scratch, x16 ? NULL : x, x16, W.w16, N, I, O, write_dw);
    else if (x16)
        matmul_backward_bf16_in16(din, dW, dbias, dout, dout16, x16, W.w16, N, I, O, write_dw);
    else
        matmul_backward_weight(din, dW, dbias, dout, dout16, x, W, N, I, O, write_dw);
}

/* With bf16 activations: the fp32 input x[n] saved as bf16 in x16 — for a model whose
 * products read bf16 (then the products read x16: the same values they would round x
 * to) — or not at all (NULL: the products read x, from scratch; no backward follows). */
static const uint16_t *save16(const Model *m, uint16_t *x16, const float *x, size_t n) {
    if (!m->mixed) return NULL;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += 4096) f32_to_bf16_n(x16 + i, x + i, n - i < 4096 ? n - i : 4096);
    return x16;
}


/* A sequence sharing its first k tokens with an earlier one (model_forward_shared):
 * its attention is the one its whole sequence would have, the shared rows' queries,
 * keys and values gathered before its own into the backward's scratch (free: no
 * backward follows such a forward) with the strides of the batch, the call the
 * same as for the sequence laid out whole; then its own rows' outputs copied out. */
static void attend_shared(const Activations *a, const LayerActs *L, int b, int H, int Hkv, int D) {
    int QK = (H + Hkv) * D, QKV = (H + 2 * Hkv) * D, HD = H * D;
    int k = a->skip[b], len = a->starts[b + 1] - a->starts[b], T = k + len;
    size_t p = (size_t)a->starts[a->from[b]], s0 = (size_t)a->starts[b];
    float *qk = a->dqk, *qkv = a->dqkv, *att = a->datt, *lse = a->dx; /* [T,QK] [T,QKV] [T,HD] [H,T] */
    for (int t = 0; t < T; t++) {
        size_t r = t < k ? p + t : s0 + t - k;
        memcpy(qk + (size_t)t * QK, L->qk + r * QK, sizeof(float) * QK);
        memcpy(qkv + (size_t)t * QKV + (H + Hkv) * D, L->qkv + r * QKV + (H + Hkv) * D, sizeof(float) * Hkv * D);
    }
    attention_forward(att, lse, qk, qk + HD, qkv + (H + Hkv) * D, a->mask, 1, T, H, Hkv, D, HD, QK, QK, QKV,
                      a->att_scratch); /* mask: N >= T ones (packed) */
    memcpy(L->att + s0 * HD, att + (size_t)k * HD, sizeof(float) * len * HD);
    for (int h = 0; h < H; h++)
        memcpy(L->lse + s0 * H + (size_t)h * len, lse + (size_t)h * T + k, sizeof(float) * len);
}

/* Attention over the batch: padded, one call over B x T; packed, one call per
 * sequence over its own rows (B 1, T its length), so no row meets another
 * sequence's keys. lse [B,H,T] padded; packed, sequence b's [H, len] block starts at
 * H starts[b]. */
static void attend_forward(const Activations *a, const LayerActs *L, int H, int Hkv, int D) {
    int QK = (H + Hkv) * D, QKV = (H + 2 * Hkv) * D;
    if (a->T) {
        attention_forward(L->att, L->lse, L->qk, L->qk + H * D, L->qkv + (H + Hkv) * D, a->mask, a->B, a->T, H, Hkv,
                          D, H * D, QK, QK, QKV, a->att_scratch);
        return;
    }
    for (int b = 0; b < a->B; b++) {
        if (a->shared && a->skip[b]) {
            attend_shared(a, L, b, H, Hkv, D);
            continue;
        }
        size_t s0 = (size_t)a->starts[b];
        int len = a->starts[b + 1] - a->starts[b];
        attention_forward(L->att + s0 * H * D, L->lse + s0 * H, L->qk + s0 * QK, L->qk + s0 * QK + H * D,
                          L->qkv + s0 * QKV + (H + Hkv) * D, a->mask + s0, 1, len, H, Hkv, D, H * D, QK, QK, QKV,
                          a->att_scratch);
    }
}

/* Its backward: a->dqk's query and key parts, a->dqkv's value part (accumulated). */
static void attend_backward(Activations *a, const LayerActs *L, int H, int Hkv, int D) {
    int QK = (H + Hkv) * D, QKV = (H + 2 * Hkv) * D;
    if (a->T) {
        attention_backward(a->dqk, a->dqk + H * D, a->dqkv + (H + Hkv) * D, a->datt, L->qk, L->qk + H * D,
                           L->qkv + (H + Hkv) * D, L->att, L->lse, a->mask, a->B, a->T, H, Hkv, D, QK, QK, QKV, H * D,
                           QK, QK, QKV, H * D, a->att_scratch);
        return;
    }
    for (int b = 0; b < a->B; b++) {
        size_t s0 = (size_t)a->starts[b];
        int len = a->starts[b + 1] - a->starts[b];
        attention_backward(a->dqk + s0 * QK, a->dqk + s0 * QK + H * D, a->dqkv + s0 * QKV + (H + Hkv) * D,
                           a->datt + s0 * H * D, L->qk + s0 * QK, L->qk + s0 * QK + H * D,
                           L->qkv + s0 * QKV + (H + Hkv) * D, L->att + s0 * H * D, L->lse + s0 * H, a->mask + s0, 1,
                           len, H, Hkv, D, QK, QK, QKV, H * D, QK, QK, QKV, H * D, a->att_scratch);
    }
}

/* x_out may be NULL during checkpoint recomputation (only the saved tensors are wanted;
 * CKPT_SELECTIVE kept gate/up, and in bf16 act, so their products are not run again).
 * With bf16 activations h1, h2 and act are computed in the backward's scratch (dh,
 * dact: free until a layer's backward starts) and saved in bf16 (save16). */
static void layer_forward(const Model *m, const Activations *a, int l, LayerActs *L, const float *x_in,
                          float *x_out) {
    const ModelConfig *c = &m->cfg;
    const LayerView *w = &m->w.layers[l];
    const LayerView16 *w16 = model_layer16(m, l);
    int N = a->N, C = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    int H = c->n_heads, Hkv = c->n_kv_heads;
    int QKV = (H + 2 * Hkv) * D, QK = (H + Hkv) * D;
    LoraBatch lb;
    const LoraLayers *lo = adapters(m, a, l, &lb);
    CHECK(!lo || !a->bf16); /* adapters read h1, h2 and act in fp32 */
    float *h1 = a->bf16 ? a->dh : L->h1, *h2 = a->bf16 ? a->dh : L->h2, *act = a->bf16 ? a->dact : L->act;
#define W(f) model_weight(m, w->f, w16 ? w16->f : NULL)
    rmsnorm_forward(h1, L->rstd1, x_in, w->ln1, N, C, C, C, c->rms_norm_eps);
    const uint16_t *h1_16 = a->bf16 ? save16(m, L->h1_16, h1, (size_t)N * C) : NULL;
    product_forward(L->qkv, h1, h1_16, W(wqkv), w->bqkv, N, C, QKV);
    if (lo) lora_linear_forward(lo, c, l, LORA_LIN_QKV, L->qkv, QKV, h1, L->lora_u, &lb);
    if (c->qk_norm) {
        for (int h = 0; h < H + Hkv; h++)
            rmsnorm_forward(L->qk + h * D, L->qk_rstd + (size_t)h * N, L->qkv + h * D,
                            h < H ? w->q_norm : w->k_norm, N, D, QK, QKV, c->rms_norm_eps);
    } else {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            memcpy(L->qk + (size_t)n * QK, L->qkv + (size_t)n * QKV, sizeof(float) * QK);
    }
    rope_forward(L->qk, a->pos, m->inv_freq, N, H + Hkv, D, QK);
    attend_forward(a, L, H, Hkv, D);
    matmul_forward_weight(L->xmid, L->att, W(wo), w->bo, N, H * D, C);
    if (lo) lora_linear_forward(lo, c, l, LORA_LIN_O, L->xmid, C, L->att, L->lora_u, &lb);
    add_inplace(L->xmid, x_in, (size_t)N * C);
    rmsnorm_forward(h2, L->rstd2, L->xmid, w->ln2, N, C, C, C, c->rms_norm_eps);
    const uint16_t *h2_16 = a->bf16 ? save16(m, L->h2_16, h2, (size_t)N * C) : NULL;
    float *gu = a->bf16 ? a->dgu : L->gu; /* bf16: the fp32 values in scratch, gu16 keeps them */
    int gu_kept = !x_out && a->checkpointing == CKPT_SELECTIVE;
    if (!gu_kept) product_forward(gu, h2, h2_16, W(wgu), NULL, N, C, 2 * F);
    if (lo) lora_linear_forward(lo, c, l, LORA_LIN_GU, gu_kept ? NULL : gu, 2 * F, h2, L->lora_u, &lb);
    const uint16_t *act16 = NULL;
    if (a->bf16 && m->mixed) {
        if (!gu_kept) swiglu_forward_bf16(L->act16, L->gu16, gu, N, F);
        act16 = L->act16;
    } else {
        swiglu_forward(act, gu, N, F);
    }
    if (x_out) {
        product_forward(x_out, act, act16, W(wdown), NULL, N, F, C);
        if (lo) lora_linear_forward(lo, c, l, LORA_LIN_DOWN, x_out, C, act, L->lora_u, &lb);
        add_inplace(x_out, L->xmid, (size_t)N * C);
    } else if (lo) {
        lora_linear_forward(lo, c, l, LORA_LIN_DOWN, NULL, C, act, L->lora_u, &lb);
    }
#undef W
}

/* 1 when this backward is the step's first to reach gradient tensor t[n] of base:
 * it writes t over what it held (model/grads.h). Marks it reached. */
static int first(const ModelGrads *gr, const float *t, size_t n) { return grad_state_take(gr->base_state, t, n); }

/* The same for a product's weight gradient dW[O, I] and its bias's dbias[O] (or NULL),
 * which one call writes or sums into together. */
static int first_product(const ModelGrads *gr, const float *dW, const float *dbias, int I, int O) {
    int w = first(gr, dW, (size_t)O * I);
    if (dbias) CHECK(first(gr, dbias, (size_t)O) == w);
    return w;
}

/* On entry a->dx = dL/dx_out; on exit dL/dx_in. Weight gradients go into gr's base
 * (NULL: the base is frozen), the adapters' into lg (NULL: none), each written or
 * summed into as its state says. */
static void layer_backward(const Model *m, Activations *a, int l, const ModelGrads *gr, float *lg, const LayerActs *L,
                           const float *x_in) {
    const LayerView *g = gr->base ? &gr->base->layers[l] : NULL;
    GradState *ls = gr->lora_state;
    const ModelConfig *c = &m->cfg;
    const LayerView *w = &m->w.layers[l];
    const LayerView16 *w16 = model_layer16(m, l);
    int N = a->N, C = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    int H = c->n_heads, Hkv = c->n_kv_heads;
    int QKV = (H + 2 * Hkv) * D, QK = (H + Hkv) * D;
    LoraBatch lb;
    const LoraLayers *lo = lg ? adapters(m, a, l, &lb) : NULL;
    CHECK(!a->bf16 || (m->mixed && !lo)); /* bf16 activations were saved for bf16 products */
#define GW(f) (g ? g->f : NULL)
#define W(f) model_weight(m, w->f, w16 ? w16->f : NULL)
    /* MLP */
    product_backward(a->dact, GW(wdown), NULL, a->dx, NULL, a->dx16, L->act, L->act16, W(wdown), N, F, C,
                     first_product(gr, GW(wdown), NULL, F, C));
    if (lo) lora_linear_backward(lo, c, l, LORA_LIN_DOWN, a->dact, a->dx, C, L->act, L->lora_u, lg, ls, &lb);
    if (a->bf16) { /* dgu written in bf16 into its scratch, the operand of both products */
        uint16_t *dgu16 = (uint16_t *)a->dgu;
        swiglu_backward_bf16(dgu16, a->dact, L->gu16, N, F);
        matmul_backward_bf16_dout16(a->dh, GW(wgu), dgu16, L->h2_16, W(wgu).w16, N, C, 2 * F,
                                    first_product(gr, GW(wgu), NULL, C, 2 * F));
    } else {
        swiglu_backward(a->dgu, a->dact, L->gu, N, F);
        product_backward(a->dh, GW(wgu), NULL, a->dgu, lo ? NULL : a->dgu, NULL, L->h2, L->h2_16, W(wgu), N, C, 2 * F,
                         first_product(gr, GW(wgu), NULL, C, 2 * F));
    }
    if (lo) lora_linear_backward(lo, c, l, LORA_LIN_GU, a->dh, a->dgu, 2 * F, L->h2, L->lora_u, lg, ls, &lb);
    rmsnorm_backward(a->dx, GW(ln2), a->dh, L->xmid, L->rstd2, w->ln2, N, C, C, C, C, first(gr, GW(ln2), C));
    /* attention */
    matmul_backward_weight(a->datt, GW(wo), GW(bo), a->dx, a->dx16, L->att, W(wo), N, H * D, C,
                           first_product(gr, GW(wo), GW(bo), H * D, C));
    if (lo) lora_linear_backward(lo, c, l, LORA_LIN_O, a->datt, a->dx, C, L->att, L->lora_u, lg, ls, &lb);
    memset(a->dqk, 0, sizeof(float) * N * QK);
    memset(a->dqkv, 0, sizeof(float) * N * QKV);
    attend_backward(a, L, H, Hkv, D);
    rope_backward(a->dqk, a->pos, m->inv_freq, N, H + Hkv, D, QK);
    if (c->qk_norm) { /* the heads share each norm: its first head writes or sums, the others sum */
        int wq = first(gr, GW(q_norm), D), wk = first(gr, GW(k_norm), D);
        for (int h = 0; h < H + Hkv; h++)
            rmsnorm_backward(a->dqkv + h * D, h < H ? GW(q_norm) : GW(k_norm), a->dqk + h * D,
                             L->qkv + h * D, L->qk_rstd + (size_t)h * N,
                             h < H ? w->q_norm : w->k_norm, N, D, QKV, QK, QKV,
                             h == 0 ? wq : h == H ? wk : 0);
    } else {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            memcpy(a->dqkv + (size_t)n * QKV, a->dqk + (size_t)n * QK, sizeof(float) * QK);
    }
    product_backward(a->dh, GW(wqkv), GW(bqkv), a->dqkv, lo ? NULL : a->dqkv, NULL, L->h1, L->h1_16, W(wqkv), N, C, QKV,
                     first_product(gr, GW(wqkv), GW(bqkv), C, QKV));
    if (lo) lora_linear_backward(lo, c, l, LORA_LIN_QKV, a->dh, a->dqkv, QKV, L->h1, L->lora_u, lg, ls, &lb);
    rmsnorm_backward(a->dx, GW(ln1), a->dh, x_in, L->rstd1, w->ln1, N, C, C, C, C, first(gr, GW(ln1), C));
#undef GW
#undef W
}

/* ---- whole model ---- */

static void run_layers(Model *m, Activations *a);

void model_forward(Model *m, Activations *a, const int32_t *ids, const uint8_t *mask, int B, int T,
                   const ModelPass *pass) {
    const ModelConfig *c = &m->cfg;
    CHECK(B > 0 && T > 0 && (long)B * T <= a->max_tokens);
    a->pass = pass ? *pass : (ModelPass){0};
    a->B = B;
    a->T = T;
    a->N = B * T;
    a->head = HEAD_NONE;
    a->shared = 0;
    for (int b = 0; b < B; b++) {
        int p = 0;
        for (int t = 0; t < T; t++) {
            int n = b * T + t;
            CHECK(ids[n] >= 0 && ids[n] < c->vocab_size);
            a->ids[n] = ids[n];
            a->mask[n] = mask[n] ? 1 : 0;
            a->pos[n] = a->mask[n] ? p++ : 0;
            a->seq[n] = b;
        }
    }
    run_layers(m, a);
}

/* model_forward_packed's layout; with skip, sequence b's tokens are its tokens skip[b].. */
static void lay_out_packed(Model *m, Activations *a, const int32_t *ids, const int *starts, const int *skip, int B,
                           const ModelPass *pass) {
    const ModelConfig *c = &m->cfg;
    CHECK(B > 0 && starts[0] == 0 && starts[B] <= a->max_tokens);
    a->pass = pass ? *pass : (ModelPass){0};
    a->B = B;
    a->T = 0;
    a->N = starts[B];
    a->head = HEAD_NONE;
    a->shared = skip != NULL;
    for (int b = 0; b <= B; b++) a->starts[b] = starts[b];
    for (int b = 0; b < B; b++) {
        CHECK(starts[b + 1] > starts[b]);
        int k = skip ? skip[b] : 0;
        for (int n = starts[b]; n < starts[b + 1]; n++) {
            CHECK(ids[n] >= 0 && ids[n] < c->vocab_size);
            a->ids[n] = ids[n];
            a->mask[n] = 1;
            a->pos[n] = k + n - starts[b];
            a->seq[n] = b;
        }
    }
}

void model_forward_packed(Model *m, Activations *a, const int32_t *ids, const int *starts, int B,
                          const ModelPass *pass) {
    lay_out_packed(m, a, ids, starts, NULL, B, pass);
    run_layers(m, a);
}

void model_forward_shared(Model *m, Activations *a, const int32_t *ids, const int *starts, const int *skip,
                          const int *from, int B, const ModelPass *pass) {
    CHECK(!pass || !pass->backward);
    lay_out_packed(m, a, ids, starts, skip, B, pass);
    for (int b = 0; b < B; b++) {
        a->skip[b] = skip[b];
        a->from[b] = from[b];
        CHECK(skip[b] == 0 || (from[b] >= 0 && from[b] < b && skip[from[b]] == 0 &&
                               skip[b] <= starts[from[b] + 1] - starts[from[b]]));
    }
    run_layers(m, a);
}

/* The layers and the final norm of the batch model_forward or _packed laid out. */
static void run_layers(Model *m, Activations *a) {
    const ModelConfig *c = &m->cfg;
    int N = a->N, C = c->hidden_size;
    if (a->lora_mask_ready) memset(a->lora_mask_ready, 0, (size_t)c->n_layers * LORA_N_MODULES);
    model_embed(m, a->x, a->ids, N);
    for (int l = 0; l < c->n_layers; l++) {
        LayerActs *L = &a->layers[a->checkpointing == CKPT_FULL ? 0 : l];
        layer_forward(m, a, l, L, a->x + (size_t)l * N * C, a->x + (size_t)(l + 1) * N * C);
    }
    rmsnorm_forward(a->hf, a->rstdf, a->x + (size_t)c->n_layers * N * C, m->w.norm, N, C, C, C,
                    c->rms_norm_eps);
}

void model_logits(Model *m, Activations *a, float *logits) {
    matmul_forward_weight(logits, a->hf, model_lm_head(m), NULL, a->N, m->cfg.hidden_size, m->cfg.vocab_size);
}

static void set_targets(const Model *m, Activations *a, const int32_t *targets, float inv_temp) {
    for (int n = 0; n < a->N; n++) {
        CHECK(targets[n] < m->cfg.vocab_size);
        a->targets[n] = targets[n];
    }
    a->inv_temp = inv_temp;
}

void model_logprobs(Model *m, Activations *a, const int32_t *targets, float inv_temp,
                    float *logprob, float *entropy) {
    set_targets(m, a, targets, inv_temp);
    float *pw = a->pass.backward && a->pw && applied(m, a) ? a->pw : NULL;
    a->pw_valid = pw != NULL;
    logprob_forward(logprob, entropy, a->lse, pw, a->hf, model_lm_head(m), a->targets, a->N, m->cfg.hidden_size, m->cfg.vocab_size, inv_temp, &a->lp);
}

void model_logprobs_train(Model *m, Activations *a, const int32_t *targets, float inv_temp, float *logprob,
                          float *entropy, const ModelGrads *grads, const LogprobGrad *grad) {
    int N = a->N, C = m->cfg.hidden_size;
    if (!grads->base) { /* a frozen head: model_logprobs keeps what its backward needs */
        model_logprobs(m, a, targets, inv_temp, logprob, entropy);
        int *rows = a->rows, k = 0;
        for (int n = 0; n < N; n++) {
            a->head_dlp[n] = 0;
            if (a->targets[n] >= 0) rows[k++] = n;
        }
        if (k) logprob_grad_rows(grad, rows, k, logprob, a->head_dlp);
        a->head = HEAD_GRADIENT;
        return;
    }
    set_targets(m, a, targets, inv_temp);
    a->pw_valid = 0;
    memset(a->dhf, 0, sizeof(float) * N * C);
    logprob_forward_backward(logprob, entropy, a->lse, a->head_dlp, a->dhf, grads->base->lm_head, grad, a->hf,
                             model_lm_head(m), a->targets, N, C, m->cfg.vocab_size, inv_temp, &a->lp,
                             first(grads, grads->base->lm_head, (size_t)m->cfg.vocab_size * C));
    a->head = HEAD_DONE;
}

void model_backward(Model *m, Activations *a, const ModelGrads *grads, const float *dlogprob, const float *dentropy) {
    const ModelConfig *c = &m->cfg;
    int N = a->N, C = c->hidden_size, L = c->n_layers;
    const ModelView *g = grads->base;
    float *lg = applied(m, a) ? grads->lora : NULL;
    CHECK((g || lg) && !a->shared);
    if (!dlogprob) { /* model_logprobs_train gave the gradient */
        CHECK(a->head != HEAD_NONE && !dentropy);
        dlogprob = a->head_dlp;
    }
    if (a->head != HEAD_DONE) {
        memset(a->dhf, 0, sizeof(float) * N * C);
        if (!g && a->pw_valid && !dentropy) /* the head is frozen: its forward kept what the backward needs */
            logprob_backward_frozen(a->dhf, dlogprob, a->pw, model_lm_head(m), a->targets, N, C, a->inv_temp);
        else
            logprob_backward(a->dhf, g ? g->lm_head : NULL, dlogprob, dentropy, a->hf, model_lm_head(m), a->targets,
                             a->lse, N, C, c->vocab_size, a->inv_temp, &a->lp,
                             first(grads, g ? g->lm_head : NULL, (size_t)c->vocab_size * C));
    }
    a->head = HEAD_NONE;
    memset(a->dx, 0, sizeof(float) * N * C);
    rmsnorm_backward(a->dx, g ? g->norm : NULL, a->dhf, a->x + (size_t)L * N * C, a->rstdf, m->w.norm, N, C,
                     C, C, C, first(grads, g ? g->norm : NULL, C));
    for (int l = L - 1; l >= 0; l--) {
        const float *x_in = a->x + (size_t)l * N * C;
        LayerActs *la = &a->layers[a->checkpointing == CKPT_FULL ? 0 : l];
        if (a->checkpointing) layer_forward(m, a, l, la, x_in, NULL);
        layer_backward(m, a, l, grads, lg, la, x_in);
    }
    if (g) { /* a scatter: summed into, so zeroed first when written (a tied table holds the head's gradient) */
        size_t VC = (size_t)c->vocab_size * C;
        if (first(grads, g->embed, VC)) memset(g->embed, 0, sizeof(float) * VC);
        embedding_backward(g->embed, a->dx, a->ids, N, C);
    }
}

/* ---- one layer's backward alone (transformer.h: another backend's reference) ---- */

void model_layer_backward(Model *m, Activations *a, int l, const ModelGrads *g, float *dx) {
    int N = a->N, C = m->cfg.hidden_size;
    CHECK(l >= 0 && l < m->cfg.n_layers && N > 0);
    const float *x_in = a->x + (size_t)l * N * C;
    LayerActs *la = &a->layers[a->checkpointing == CKPT_FULL ? 0 : l];
    memcpy(a->dx, dx, sizeof(float) * N * C);
    if (a->checkpointing) layer_forward(m, a, l, la, x_in, NULL);
    layer_backward(m, a, l, g, applied(m, a) ? g->lora : NULL, la, x_in);
    memcpy(dx, a->dx, sizeof(float) * N * C);
}
