/* gpu/decode.c — see decode.h: one layer's decoding step composed from gpu/ops.h's
 * kernels, launched in order on the device's stream; the CPU's steps and rounding
 * points (model/kvcache.c's model_decode), no product on cuBLASLt; LoRA's adapters
 * (when given) added after each fused product, as model_decode adds them. */
#include "gpu/decode.h"

#include <string.h>

#include "gpu/ops.h"

int gpu_layer_cache_create(GpuDevice *d, GpuLayerCache *c, const GpuLayerWeights *w, int n_slots, int cap,
                           GrpoErr *err) {
    memset(c, 0, sizeof *c);
    if (n_slots < 1 || cap < 1)
        return err_set(err, "GPU KV cache: %d slots of %d positions (expected both >= 1)", n_slots, cap);
    c->n_slots = n_slots, c->cap = cap, c->kv_dim = w->Hkv * w->D;
    size_t bytes = sizeof(float) * (size_t)n_slots * cap * c->kv_dim;
    if (gpu_alloc(d, &c->k, bytes, err) || gpu_alloc(d, &c->v, bytes, err)) {
        gpu_layer_cache_free(d, c);
        return -1;
    }
    return 0;
}

void gpu_layer_cache_free(GpuDevice *d, GpuLayerCache *c) {
    gpu_free(d, c->k), gpu_free(d, c->v);
    c->k = c->v = 0;
}

int gpu_decode_scratch_create(GpuDevice *d, GpuDecodeScratch *s, const GpuLayerWeights *w, int max_rows,
                              GrpoErr *err) {
    memset(s, 0, sizeof *s);
    s->max_rows = max_rows;
    size_t n = (size_t)max_rows, QKV = (size_t)(w->H + 2 * w->Hkv) * w->D, HD = (size_t)w->H * w->D;
    struct { CUdeviceptr *p; size_t floats; } want[] = {
        {&s->h, n * w->C},  {&s->rstd, n},          {&s->qkv, n * QKV},        {&s->att, n * HD},
        {&s->tmp, n * w->C}, {&s->gu, n * 2 * w->F}, {&s->act, n * w->F},
        {&s->qk_rstd, w->qk_norm ? n * (w->H + w->Hkv) : 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (want[i].floats && gpu_alloc(d, want[i].p, sizeof(float) * want[i].floats, err)) {
            gpu_decode_scratch_free(d, s);
            return -1;
        }
    return 0;
}

void gpu_decode_scratch_free(GpuDevice *d, GpuDecodeScratch *s) {
    CUdeviceptr *all[] = {&s->h, &s->rstd, &s->qkv, &s->att, &s->tmp, &s->gu, &s->act, &s->qk_rstd, &s->lora_u};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        gpu_free(d, *all[i]);
        *all[i] = 0;
    }
    s->lora_r = 0;
}

int gpu_decode_lora_rank(const GpuLayerLora *lo, int L) {
    int r = 0;
    for (int l = 0; lo && l < L; l++)
        for (int mod = 0; mod < LORA_N_MODULES; mod++)
            if (lo[l].has[mod] && lo[l].mod[mod].r > r) r = lo[l].mod[mod].r;
    return r;
}

int gpu_decode_scratch_lora(GpuDevice *d, GpuDecodeScratch *s, int r, GrpoErr *err) {
    if (r < 1) return err_set(err, "GPU decode: LoRA rank %d (expected >= 1)", r);
    if (r <= s->lora_r) return 0;
    CUdeviceptr u = 0;
    if (gpu_alloc(d, &u, sizeof(float) * (size_t)s->max_rows * r, err)) return -1; /* the old one kept */
    gpu_free(d, s->lora_u);
    s->lora_u = u, s->lora_r = r;
    return 0;
}

/* The fused product each module adds to (model/lora_layers.c's geometry). */
static const LoraLinear lora_linear_of[LORA_N_MODULES] = {LORA_LIN_QKV, LORA_LIN_QKV, LORA_LIN_QKV, LORA_LIN_O,
                                                          LORA_LIN_GU,  LORA_LIN_GU,  LORA_LIN_DOWN};

/* y[n, ldy] += the layer's adapters on linear lin of x[n, in] (lora_linear_decode);
 * nothing without lo. */
static int lora_add(GpuDevice *d, const GpuLayerLora *lo, GpuDecodeScratch *s, LoraLinear lin, CUdeviceptr y, int ldy,
                    CUdeviceptr x, int n, GrpoErr *err) {
    for (int mod = 0; lo && mod < LORA_N_MODULES; mod++) {
        if (!lo->has[mod] || lora_linear_of[mod] != lin) continue;
        if (lo->mod[mod].r > s->lora_r)
            return err_set(err, "GPU decode: a LoRA adapter of rank %d and a scratch for rank %d", lo->mod[mod].r,
                           s->lora_r);
        if (gpu_lora_decode(d, &lo->mod[mod], y, ldy, s->lora_u, x, n, err)) return -1;
    }
    return 0;
}

/* Qwen3's q/k norm on the step's rows, in place on qkv's q and k (model_decode writes
 * them to its qk copy: the same values); nothing without one. Per row and head, so
 * batch-invariant as every other step. */
static int qk_norm_rows(GpuDevice *d, const GpuLayerWeights *w, GpuDecodeScratch *s, int n, GrpoErr *err) {
    int QKV = (w->H + 2 * w->Hkv) * w->D;
    if (!w->qk_norm) return 0;
    return gpu_qk_norm_forward(d, s->qkv, s->qk_rstd, s->qkv, w->q_norm, w->k_norm, n, w->H, w->Hkv, w->D, QKV, QKV,
                               w->eps, err);
}

/* The attention half: x += o(attention(RoPE(qk_norm(qkv(rmsnorm(x)))))), the keys and
 * values into the cache first (a row attends to itself, and a prompt's rows to each other). */
static int attention_half(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, GpuLayerCache *c,
                          GpuDecodeScratch *s, const GpuDecodeRows *r, CUdeviceptr x, GrpoErr *err) {
    int n = r->n, C = w->C, H = w->H, Hkv = w->Hkv, D = w->D, QKV = (H + 2 * Hkv) * D, HD = H * D;
    /* q, k and v stay in one [n, QKV] buffer that RoPE, the cache write and attention
     * read by stride (the CPU copies q and k out first: the same values) */
    if (gpu_rmsnorm_forward(d, s->h, s->rstd, x, w->ln1, n, C, C, C, w->eps, err) ||
        gpu_matmul_rowwise_bf16(d, s->qkv, s->h, w->wqkv, w->bqkv, n, C, QKV, err) ||
        lora_add(d, lo, s, LORA_LIN_QKV, s->qkv, QKV, s->h, n, err) || qk_norm_rows(d, w, s, n, err) ||
        gpu_rope_forward(d, s->qkv, r->pos, r->inv_freq, n, H + Hkv, D, QKV, err) ||
        gpu_kv_write(d, c->k, c->v, s->qkv, r->slots, r->own, n, c->cap, c->kv_dim, QKV, HD, HD + c->kv_dim, err) ||
        gpu_attention_decode(d, s->att, s->qkv, c->k, c->v, r->slots, r->own, r->parent, r->parent_len, n, c->cap, H,
                             Hkv, D, HD, QKV, err) ||
        gpu_matmul_rowwise_bf16(d, s->tmp, s->att, w->wo, w->bo, n, HD, C, err) ||
        lora_add(d, lo, s, LORA_LIN_O, s->tmp, C, s->att, n, err))
        return -1;
    return gpu_residual_add(d, x, s->tmp, (size_t)n * C, err);
}

int gpu_decode_layer(GpuDevice *d, const GpuLayerWeights *w, GpuLayerCache *c, GpuDecodeScratch *s,
                     const GpuDecodeRows *rows, CUdeviceptr x, GrpoErr *err) {
    return gpu_decode_layer_lora(d, w, NULL, c, s, rows, x, err);
}

int gpu_decode_layer_lora(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, GpuLayerCache *c,
                          GpuDecodeScratch *s, const GpuDecodeRows *rows, CUdeviceptr x, GrpoErr *err) {
    int n = rows->n, C = w->C, F = w->F;
    if (n < 1 || n > s->max_rows)
        return err_set(err, "GPU decode: %d rows (expected 1 .. %d, the scratch's)", n, s->max_rows);
    if (c->kv_dim != w->Hkv * w->D)
        return err_set(err, "GPU decode: a KV cache of %d values a position for a layer of %d x %d", c->kv_dim, w->Hkv,
                       w->D);
    if (attention_half(d, w, lo, c, s, rows, x, err) ||
        gpu_rmsnorm_forward(d, s->h, s->rstd, x, w->ln2, n, C, C, C, w->eps, err) ||
        gpu_matmul_rowwise_bf16(d, s->gu, s->h, w->wgu, 0, n, C, 2 * F, err) ||
        lora_add(d, lo, s, LORA_LIN_GU, s->gu, 2 * F, s->h, n, err) ||
        gpu_swiglu_forward(d, s->act, s->gu, n, F, err) ||
        gpu_matmul_rowwise_bf16(d, s->tmp, s->act, w->wdown, 0, n, F, C, err) ||
        lora_add(d, lo, s, LORA_LIN_DOWN, s->tmp, C, s->act, n, err))
        return -1;
    return gpu_residual_add(d, x, s->tmp, (size_t)n * C, err);
}
