/* gpu/layer.c — see layer.h: one decoder layer composed from gpu/ops.h's kernels
 * and gpu/gemm.h's products, launched in order on the device's stream. */
#include "gpu/layer.h"

#include <string.h>

#include "gpu/ops.h"

/* n bytes of host memory into a fresh device buffer at *p (*p 0 for a NULL host). */
static int put_new(GpuDevice *d, CUdeviceptr *p, const void *host, size_t bytes, GrpoErr *err) {
    *p = 0;
    if (!host) return 0;
    if (gpu_alloc(d, p, bytes, err)) return -1;
    return gpu_put(d, *p, host, bytes, err);
}

int gpu_layer_upload(GpuDevice *d, GpuLayerWeights *w, const Model *m, int l, GrpoErr *err) {
    const ModelConfig *c = &m->cfg;
    const LayerView16 *w16 = model_layer16(m, l);
    memset(w, 0, sizeof *w);
    /* the GPU layer's products are bf16 ones: an fp32 model's would differ from its CPU forward */
    int bf16_products = m->mixed || (m->half && m->half->products16);
    if (!w16 || !bf16_products)
        return err_set(err, "GPU layer: the model's products are not bf16 (expected mixed precision or --bf16)");
    if (l < 0 || l >= c->n_layers) return err_set(err, "GPU layer: layer %d of %d", l, c->n_layers);
    const LayerView *v = &m->w.layers[l];
    w->C = c->hidden_size, w->F = c->intermediate_size, w->H = c->n_heads, w->Hkv = c->n_kv_heads;
    w->D = c->head_dim, w->eps = c->rms_norm_eps;
    w->qk_norm = c->qk_norm;
    size_t C = (size_t)w->C, F = (size_t)w->F, QKV = (size_t)(w->H + 2 * w->Hkv) * w->D, HD = (size_t)w->H * w->D;
    if (put_new(d, &w->ln1, v->ln1, 4 * C, err) || put_new(d, &w->ln2, v->ln2, 4 * C, err) ||
        put_new(d, &w->bqkv, v->bqkv, 4 * QKV, err) || put_new(d, &w->bo, v->bo, 4 * C, err) ||
        put_new(d, &w->q_norm, c->qk_norm ? v->q_norm : NULL, 4 * (size_t)w->D, err) ||
        put_new(d, &w->k_norm, c->qk_norm ? v->k_norm : NULL, 4 * (size_t)w->D, err) ||
        put_new(d, &w->wqkv, w16->wqkv, 2 * QKV * C, err) || put_new(d, &w->wo, w16->wo, 2 * C * HD, err) ||
        put_new(d, &w->wgu, w16->wgu, 2 * 2 * F * C, err) || put_new(d, &w->wdown, w16->wdown, 2 * C * F, err)) {
        gpu_layer_free(d, w);
        return -1;
    }
    return 0;
}

void gpu_layer_free(GpuDevice *d, GpuLayerWeights *w) {
    CUdeviceptr *all[] = {&w->ln1, &w->ln2, &w->bqkv, &w->bo, &w->q_norm, &w->k_norm,
                          &w->wqkv, &w->wo, &w->wgu, &w->wdown};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i]) gpu_free(d, *all[i]);
        *all[i] = 0;
    }
}

int gpu_layer_scratch_create(GpuDevice *d, GpuLayerScratch *s, const GpuLayerWeights *w, int max_tokens,
                             GrpoErr *err) {
    memset(s, 0, sizeof *s);
    s->max_tokens = max_tokens;
    size_t N = (size_t)max_tokens, QKV = (size_t)(w->H + 2 * w->Hkv) * w->D, HD = (size_t)w->H * w->D;
    size_t widest = (size_t)w->C; /* the widest product input: C, H D or F */
    if (HD > widest) widest = HD;
    if ((size_t)w->F > widest) widest = (size_t)w->F;
    struct { CUdeviceptr *p; size_t bytes; } want[] = {
        {&s->h, 4 * N * w->C},    {&s->rstd, 4 * N},         {&s->qkv, 4 * N * QKV},          {&s->att, 4 * N * HD},
        {&s->lse, 4 * N * w->H},  {&s->xmid, 4 * N * w->C},  {&s->gu, 4 * N * 2 * w->F},     {&s->act, 4 * N * w->F},
        {&s->in16, 2 * N * widest}, {&s->qk_rstd, w->qk_norm ? 4 * N * (w->H + w->Hkv) : 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (want[i].bytes && gpu_alloc(d, want[i].p, want[i].bytes, err)) {
            gpu_layer_scratch_free(d, s);
            return -1;
        }
    return 0;
}

int gpu_layer_scratch_lora(GpuDevice *d, GpuLayerScratch *s, int r, GrpoErr *err) {
    if (r < 1) return err_set(err, "GPU layer: LoRA rank %d (expected >= 1)", r);
    if (s->lora_u) gpu_free(d, s->lora_u), s->lora_u = 0;
    return gpu_alloc(d, &s->lora_u, 4 * (size_t)s->max_tokens * r, err);
}

void gpu_layer_scratch_free(GpuDevice *d, GpuLayerScratch *s) {
    CUdeviceptr *all[] = {&s->h, &s->rstd, &s->qkv, &s->att, &s->lse, &s->xmid, &s->gu, &s->act, &s->in16,
                          &s->qk_rstd, &s->lora_u};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i]) gpu_free(d, *all[i]);
        *all[i] = 0;
    }
}

/* LoRA: the fused linear each module adds to (model/lora_layers.c's geometry). */
static const LoraLinear lora_linear_of[LORA_N_MODULES] = {LORA_LIN_QKV, LORA_LIN_QKV, LORA_LIN_QKV, LORA_LIN_O,
                                                          LORA_LIN_GU,  LORA_LIN_GU,  LORA_LIN_DOWN};

/* LoRA: y[N, ldy] += the adapters on linear lin of x[N, in] (lora_linear_forward
 * without dropout), u the scratch each module's u passes through. None without lo. */
static int lora_add(GpuDevice *d, const GpuLayerLora *lo, LoraLinear lin, CUdeviceptr y, int ldy, CUdeviceptr x,
                    CUdeviceptr u, int N, GrpoErr *err) {
    for (int mod = 0; lo && mod < LORA_N_MODULES; mod++)
        if (lo->has[mod] && lora_linear_of[mod] == lin &&
            gpu_lora_forward(d, &lo->mod[mod], y, ldy, u, x, 0, NULL, N, err))
            return -1;
    return 0;
}

/* The attention half: x_in -> s->xmid = x_in + o(attention(RoPE(qk_norm(qkv(rmsnorm(x_in)))))), the q/k
 * norm (Qwen3) in place on the qkv rows, where the CPU writes it to its qk copy: the same values. */
static int attention_half(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, GpuLayerScratch *s,
                          const GpuLayerBatch *b, CUdeviceptr x_in, GrpoErr *err) {
    int N = b->N, C = w->C, H = w->H, Hkv = w->Hkv, D = w->D, QKV = (H + 2 * Hkv) * D;
    /* q, k and v stay in one [N, QKV] buffer: RoPE and attention read it by stride,
     * where the CPU copies q and k out first (the same values) */
    CUdeviceptr q = s->qkv, k = s->qkv + 4 * (size_t)H * D, v = s->qkv + 4 * (size_t)(H + Hkv) * D;
    if (gpu_rmsnorm_forward(d, s->h, s->rstd, x_in, w->ln1, N, C, C, C, w->eps, err) ||
        gpu_matmul_forward_bf16(d, s->qkv, s->h, s->in16, w->wqkv, w->bqkv, N, C, QKV, err) ||
        lora_add(d, lo, LORA_LIN_QKV, s->qkv, QKV, s->h, s->lora_u, N, err) ||
        (w->qk_norm && gpu_qk_norm_forward(d, s->qkv, s->qk_rstd, s->qkv, w->q_norm, w->k_norm, N, H, Hkv, D, QKV,
                                           QKV, w->eps, err)) ||
        gpu_rope_forward(d, s->qkv, b->pos, b->inv_freq, N, H + Hkv, D, QKV, err) ||
        gpu_attention_forward(d, s->att, s->lse, q, k, v, 0, b->starts, b->B, N, H, Hkv, D, H * D, QKV, QKV, QKV,
                              err) ||
        gpu_matmul_forward_bf16(d, s->xmid, s->att, s->in16, w->wo, w->bo, N, H * D, C, err) ||
        lora_add(d, lo, LORA_LIN_O, s->xmid, C, s->att, s->lora_u, N, err))
        return -1;
    return gpu_residual_add(d, s->xmid, x_in, (size_t)N * C, err);
}

int gpu_layer_forward(GpuDevice *d, const GpuLayerWeights *w, GpuLayerScratch *s, const GpuLayerBatch *b,
                      CUdeviceptr x_out, CUdeviceptr x_in, GrpoErr *err) {
    return gpu_layer_forward_lora(d, w, NULL, s, b, x_out, x_in, err);
}

int gpu_layer_forward_lora(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, GpuLayerScratch *s,
                           const GpuLayerBatch *b, CUdeviceptr x_out, CUdeviceptr x_in, GrpoErr *err) {
    int N = b->N, C = w->C, F = w->F;
    if (N < 1 || N > s->max_tokens || b->B < 1 || b->B > N)
        return err_set(err, "GPU layer: batch of %d rows in %d sequences (expected 1 .. %d rows, 1 .. rows sequences)",
                       N, b->B, s->max_tokens);
    if (lo && !s->lora_u) return err_set(err, "GPU layer: adapters without their scratch (gpu_layer_scratch_lora)");
    /* x_in is read for the last time by the first residual add, so x_out may be x_in */
    if (attention_half(d, w, lo, s, b, x_in, err) ||
        gpu_rmsnorm_forward(d, s->h, s->rstd, s->xmid, w->ln2, N, C, C, C, w->eps, err) ||
        gpu_matmul_forward_bf16(d, s->gu, s->h, s->in16, w->wgu, 0, N, C, 2 * F, err) ||
        lora_add(d, lo, LORA_LIN_GU, s->gu, 2 * F, s->h, s->lora_u, N, err) ||
        gpu_swiglu_forward(d, s->act, s->gu, N, F, err) ||
        gpu_matmul_forward_bf16(d, x_out, s->act, s->in16, w->wdown, 0, N, F, C, err) ||
        lora_add(d, lo, LORA_LIN_DOWN, x_out, C, s->act, s->lora_u, N, err))
        return -1;
    return gpu_residual_add(d, x_out, s->xmid, (size_t)N * C, err);
}
