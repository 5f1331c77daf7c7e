/* gpu/layer_lora.c — see layer_lora.h: LoRA's training layer composed from gpu/ops.h's
 * kernels, gpu/gemm.h's products and gpu/lora.h's adapters, in the order of
 * model/transformer.c's layer_forward / layer_backward with fp32 activations and no
 * base gradient. Not gpu/layer_train.c: that is mixed precision's layer (bf16
 * activations saved, every weight's gradient), a different set of saved tensors. */
#include "gpu/layer_lora.h"

#include <string.h>

#include "gpu/ops.h"

static const LoraLinear linear_of[LORA_N_MODULES] = {LORA_LIN_QKV, LORA_LIN_QKV, LORA_LIN_QKV, LORA_LIN_O,
                                                     LORA_LIN_GU,  LORA_LIN_GU,  LORA_LIN_DOWN};

static size_t larger(size_t a, size_t b) { return a > b ? a : b; }

int gpu_lora_layer_acts_create(GpuDevice *d, GpuLoraLayerActs *a, const GpuLayerWeights *w, const LoraLayers *lo,
                               int max_tokens, GrpoErr *err) {
    memset(a, 0, sizeof *a);
    if (max_tokens < 1) return err_set(err, "GPU LoRA layer: max_tokens %d (expected >= 1)", max_tokens);
    size_t N = (size_t)max_tokens, C = (size_t)w->C, F = (size_t)w->F, HD = (size_t)w->H * w->D;
    size_t QKV = (size_t)(w->H + 2 * w->Hkv) * w->D, widest = larger(larger(C, HD), F), r = (size_t)lo->spec.r;
    size_t QK = w->qk_norm ? (size_t)(w->H + w->Hkv) * w->D : 0; /* Qwen3's q/k norm's, else none */
    a->max_tokens = max_tokens, a->r = lo->spec.r, a->mask_row_bytes = (int)((widest + 7) / 8);
    struct { CUdeviceptr *p; size_t bytes; } want[] = {
        {&a->rstd1, 4 * N},   {&a->rstd2, 4 * N},         {&a->h1, 4 * N * C},   {&a->h2, 4 * N * C},
        {&a->qkv, 4 * N * QKV}, {&a->att, 4 * N * HD},    {&a->lse, 4 * N * w->H}, {&a->xmid, 4 * N * C},
        {&a->gu, 4 * N * 2 * F}, {&a->act, 4 * N * F},    {&a->u, 4 * LORA_N_MODULES * N * r}, {&a->du, 4 * N * r},
        {&a->xd, lo->spec.dropout > 0 ? 4 * N * widest : 0},
        {&a->bits, lo->spec.dropout > 0 ? LORA_N_MODULES * N * (size_t)a->mask_row_bytes : 0},
        {&a->qk, 4 * N * QK}, {&a->qk_rstd, w->qk_norm ? 4 * N * (size_t)(w->H + w->Hkv) : 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (want[i].bytes && gpu_alloc(d, want[i].p, want[i].bytes, err)) {
            gpu_lora_layer_acts_free(d, a);
            return -1;
        }
    return 0;
}

int gpu_lora_layer_acts_create_sharing(GpuDevice *d, GpuLoraLayerActs *a, const GpuLoraLayerActs *owner,
                                       const GpuLayerWeights *w, GrpoErr *err) {
    *a = *owner;
    a->shares = 1, a->gu = 0;
    return gpu_alloc(d, &a->gu, 4 * (size_t)owner->max_tokens * 2 * w->F, err) ? (a->gu = 0, -1) : 0;
}

void gpu_lora_layer_acts_free(GpuDevice *d, GpuLoraLayerActs *a) {
    if (a->shares) { /* the owner frees the rest */
        if (a->gu) gpu_free(d, a->gu);
        a->gu = 0;
        return;
    }
    CUdeviceptr *all[] = {&a->rstd1, &a->rstd2, &a->h1,  &a->h2, &a->qkv, &a->att, &a->lse,
                          &a->xmid,  &a->gu,    &a->act, &a->u,  &a->du,  &a->xd,  &a->bits,
                          &a->qk,    &a->qk_rstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i]) gpu_free(d, *all[i]);
        *all[i] = 0;
    }
}

/* Module mod's dropout in a (bits 0: none in this pass). */
static GpuLoraDropout dropout_of(const GpuLoraLayerActs *a, const GpuLoraPass *p, int mod) {
    GpuLoraDropout dr = {0, 1.0f};
    if (!p->keys || !a->bits) return dr;
    dr.bits = a->bits + (size_t)mod * a->max_tokens * a->mask_row_bytes;
    dr.scale = (float)(1.0 / (1.0 - p->lo->spec.dropout)); /* apply_mask's */
    return dr;
}

/* y[N, ldy] += the adapters on linear lin of x[N, in], each module's u saved, its
 * dropout bits drawn first (lora_linear_forward with a training pass's keys). */
static int adapters_forward(GpuDevice *d, const GpuLayerLora *lo, const GpuLoraPass *p, const GpuLoraLayerActs *a,
                            const GpuLayerBatch *b, LoraLinear lin, CUdeviceptr y, int ldy, CUdeviceptr x,
                            GrpoErr *err) {
    int N = b->N;
    for (int mod = 0; mod < LORA_N_MODULES; mod++) {
        if (!lo->has[mod] || linear_of[mod] != lin) continue;
        const GpuLoraAdapter *m = &lo->mod[mod];
        GpuLoraDropout dr = dropout_of(a, p, mod);
        CUdeviceptr u = a->u + 4 * (size_t)mod * N * a->r;
        if ((dr.bits && gpu_lora_dropout_mask(d, dr.bits, p->keys, p->seq, b->pos, N, m->in, p->lo, p->l,
                                              (LoraModule)mod, err)) ||
            gpu_lora_forward(d, m, y, ldy, u, x, a->xd, &dr, N, err))
            return -1;
    }
    return 0;
}

/* dx[N, in] += the adapters' input gradient on linear lin, dA and dB of each module
 * written or added to (lora_linear_backward). */
static int adapters_backward(GpuDevice *d, const GpuLayerLora *lo, const GpuLoraPass *p, const GpuLoraLayerActs *a,
                             int N, const int *write, LoraLinear lin, CUdeviceptr dx, CUdeviceptr dy, int ldy,
                             CUdeviceptr x, GrpoErr *err) {
    for (int mod = 0; mod < LORA_N_MODULES; mod++) {
        if (!lo->has[mod] || linear_of[mod] != lin) continue;
        GpuLoraDropout dr = dropout_of(a, p, mod);
        CUdeviceptr u = a->u + 4 * (size_t)mod * N * a->r;
        if (gpu_lora_backward_write(d, &lo->mod[mod], write[mod], dx, dy, ldy, x, u, a->du, a->xd, &dr, N, err))
            return -1;
    }
    return 0;
}

static int check_batch(const GpuLoraLayerActs *a, const GpuLayerTrainScratch *s, const GpuLayerBatch *b,
                       const GpuLoraPass *p, GrpoErr *err) {
    int most = a->max_tokens < s->max_tokens ? a->max_tokens : s->max_tokens;
    if (b->N < 1 || b->N > most || b->B < 1 || b->B > b->N)
        return err_set(err, "GPU LoRA layer: batch of %d rows in %d sequences (expected 1 .. %d rows, 1 .. rows "
                       "sequences)", b->N, b->B, most);
    if (p->keys && a->bits && !p->seq) return err_set(err, "GPU LoRA layer: dropout keys without the rows' sequences");
    return 0;
}

/* Where attention reads q and k, with their row stride: without the norm qkv's own
 * (RoPE'd in place); with it (Qwen3) a->qk, the heads normed then RoPE'd, while qkv
 * keeps the norm's input for the backward (the CPU's L->qkv and L->qk). */
static CUdeviceptr qk_rows(const GpuLayerWeights *w, const GpuLoraLayerActs *a, int *ld) {
    *ld = (w->H + w->Hkv + (w->qk_norm ? 0 : w->Hkv)) * w->D; /* (H+Hkv)D: qk's rows; else qkv's */
    return w->qk_norm ? a->qk : a->qkv;
}

/* x_in -> a->xmid: norm, q/k/v (+ adapters), (Qwen3) q/k norm, RoPE, attention, o
 * (+ adapters), residual. The adapters add into the product's output before the
 * norm, as the CPU's layer_forward. */
static int attention_half(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, const GpuLoraPass *p,
                          GpuLoraLayerActs *a, GpuLayerTrainScratch *s, const GpuLayerBatch *b, CUdeviceptr x_in,
                          GrpoErr *err) {
    int N = b->N, C = w->C, H = w->H, Hkv = w->Hkv, D = w->D, QKV = (H + 2 * Hkv) * D, ldqk;
    CUdeviceptr q = qk_rows(w, a, &ldqk), k = q + 4 * (size_t)H * D, v = a->qkv + 4 * (size_t)(H + Hkv) * D;
    if (gpu_rmsnorm_forward(d, a->h1, a->rstd1, x_in, w->ln1, N, C, C, C, w->eps, err) ||
        gpu_matmul_forward_bf16(d, a->qkv, a->h1, s->dx16, w->wqkv, w->bqkv, N, C, QKV, err) ||
        adapters_forward(d, lo, p, a, b, LORA_LIN_QKV, a->qkv, QKV, a->h1, err) ||
        (w->qk_norm && gpu_qk_norm_forward(d, a->qk, a->qk_rstd, a->qkv, w->q_norm, w->k_norm, N, H, Hkv, D, ldqk,
                                           QKV, w->eps, err)) ||
        gpu_rope_forward(d, q, b->pos, b->inv_freq, N, H + Hkv, D, ldqk, err) ||
        gpu_attention_forward(d, a->att, a->lse, q, k, v, 0, b->starts, b->B, N, H, Hkv, D, H * D, ldqk, ldqk, QKV,
                              err) ||
        gpu_matmul_forward_bf16(d, a->xmid, a->att, s->mid16, w->wo, w->bo, N, H * D, C, err) ||
        adapters_forward(d, lo, p, a, b, LORA_LIN_O, a->xmid, C, a->att, err))
        return -1;
    return gpu_residual_add(d, a->xmid, x_in, (size_t)N * C, err);
}

/* The whole layer (x_out), or with x_out 0 its recomputation from a kept gate/up: the
 * base's gate/up and down products skipped, the adapters' u made with no output (the
 * CPU's layer_forward with x_out NULL under CKPT_SELECTIVE). */
static int layer_forward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, const GpuLoraPass *p,
                         GpuLoraLayerActs *a, GpuLayerTrainScratch *s, const GpuLayerBatch *b, CUdeviceptr x_out,
                         CUdeviceptr x_in, GrpoErr *err) {
    int N = b->N, C = w->C, F = w->F, kept = !x_out;
    if (check_batch(a, s, b, p, err)) return -1;
    if (attention_half(d, w, lo, p, a, s, b, x_in, err) ||
        gpu_rmsnorm_forward(d, a->h2, a->rstd2, a->xmid, w->ln2, N, C, C, C, w->eps, err) ||
        (!kept && gpu_matmul_forward_bf16(d, a->gu, a->h2, s->dx16, w->wgu, 0, N, C, 2 * F, err)) ||
        adapters_forward(d, lo, p, a, b, LORA_LIN_GU, kept ? 0 : a->gu, 2 * F, a->h2, err) ||
        gpu_swiglu_forward(d, a->act, a->gu, N, F, err) ||
        (!kept && gpu_matmul_forward_bf16(d, x_out, a->act, s->mid16, w->wdown, 0, N, F, C, err)) ||
        adapters_forward(d, lo, p, a, b, LORA_LIN_DOWN, x_out, C, a->act, err))
        return -1;
    return kept ? 0 : gpu_residual_add(d, x_out, a->xmid, (size_t)N * C, err);
}

int gpu_lora_layer_forward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, const GpuLoraPass *p,
                           GpuLoraLayerActs *a, GpuLayerTrainScratch *s, const GpuLayerBatch *b, CUdeviceptr x_out,
                           CUdeviceptr x_in, GrpoErr *err) {
    if (!x_out) return err_set(err, "GPU LoRA layer: no output (gpu_lora_layer_forward_kept recomputes without one)");
    return layer_forward(d, w, lo, p, a, s, b, x_out, x_in, err);
}

int gpu_lora_layer_forward_kept(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, const GpuLoraPass *p,
                                GpuLoraLayerActs *a, GpuLayerTrainScratch *s, const GpuLayerBatch *b, CUdeviceptr x_in,
                                GrpoErr *err) {
    return layer_forward(d, w, lo, p, a, s, b, 0, x_in, err);
}

/* dx (dL/dx_out) -> dL/dxmid: down (frozen: dact only) + adapters, SwiGLU in fp32,
 * gate|up + adapters into dh, ln2's input gradient added to dx. */
static int mlp_half_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, const GpuLoraPass *p,
                             const GpuLoraLayerActs *a, GpuLayerTrainScratch *s, int N, const int *write,
                             CUdeviceptr dx, GrpoErr *err) {
    int C = w->C, F = w->F;
    if (gpu_matmul_backward_bf16(d, s->mid, 0, 0, dx, s->dx16, 0, w->wdown, N, F, C, 0, err) ||
        adapters_backward(d, lo, p, a, N, write, LORA_LIN_DOWN, s->mid, dx, C, a->act, err) ||
        gpu_swiglu_backward(d, s->wide, s->mid, a->gu, N, F, err) ||
        gpu_matmul_backward_bf16(d, s->h, 0, 0, s->wide, s->wide16, 0, w->wgu, N, C, 2 * F, 0, err) ||
        adapters_backward(d, lo, p, a, N, write, LORA_LIN_GU, s->h, s->wide, 2 * F, a->h2, err))
        return -1;
    return gpu_rmsnorm_backward(d, dx, 0, s->h, a->xmid, a->rstd2, w->ln2, N, C, C, C, C, 0, err);
}

/* dL/d(attention's q, k) -> dL/d(the qkv product's q, k) in s->wide: RoPE's backward
 * in place, then (Qwen3) the norm's input gradient added into s->wide's q and k
 * (zeroed by the caller). The norm weights are frozen under LoRA (the CPU's backward
 * has no base gradient to give them): no weight gradient is formed. */
static int qk_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLoraLayerActs *a, GpuLayerTrainScratch *s,
                       const GpuLayerBatch *b, CUdeviceptr dqk, int ld, GrpoErr *err) {
    int N = b->N, H = w->H, Hkv = w->Hkv, D = w->D, QKV = (H + 2 * Hkv) * D;
    if (gpu_rope_backward(d, dqk, b->pos, b->inv_freq, N, H + Hkv, D, ld, err)) return -1;
    if (!w->qk_norm) return 0;
    return gpu_qk_norm_backward(d, s->wide, 0, 0, 0, dqk, a->qkv, a->qk_rstd, w->q_norm, w->k_norm, N, H, Hkv, D, QKV,
                                ld, QKV, 0, err);
}

/* dx (dL/dxmid) -> dL/dx_in: o + adapters into datt, attention, RoPE, (Qwen3) the
 * q/k norm, q/k/v + adapters into dh, ln1's input gradient added to dx. */
static int attention_half_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo,
                                   const GpuLoraPass *p, const GpuLoraLayerActs *a, GpuLayerTrainScratch *s,
                                   const GpuLayerBatch *b, const int *write, CUdeviceptr dx, CUdeviceptr x_in,
                                   GrpoErr *err) {
    int N = b->N, C = w->C, H = w->H, Hkv = w->Hkv, D = w->D, QKV = (H + 2 * Hkv) * D, HD = H * D, ldqk;
    CUdeviceptr q = qk_rows(w, a, &ldqk), k = q + 4 * (size_t)H * D, v = a->qkv + 4 * (size_t)(H + Hkv) * D;
    /* dq and dk where q and k were read (s->dqk under the norm, else dqkv's own) */
    CUdeviceptr dq = w->qk_norm ? s->dqk : s->wide, dk = dq + 4 * (size_t)H * D;
    CUdeviceptr dv = s->wide + 4 * (size_t)(H + Hkv) * D;
    if (gpu_matmul_backward_bf16(d, s->mid, 0, 0, dx, s->dx16, 0, w->wo, N, HD, C, 0, err) ||
        adapters_backward(d, lo, p, a, N, write, LORA_LIN_O, s->mid, dx, C, a->att, err))
        return -1;
    /* dq written, dk and dv summed into (the CPU's memsets of dqk and dqkv first) */
    if (gpu_zero(d, s->wide, 4 * (size_t)N * QKV, err) ||
        (w->qk_norm && gpu_zero(d, s->dqk, 4 * (size_t)N * ldqk, err)) ||
        gpu_attention_backward(d, dq, dk, dv, s->mid, q, k, v, a->att, a->lse, 0, b->starts, b->B, N, H, Hkv, D, ldqk,
                               ldqk, QKV, HD, ldqk, ldqk, QKV, HD, err) ||
        qk_backward(d, w, a, s, b, dq, ldqk, err) ||
        gpu_matmul_backward_bf16(d, s->h, 0, 0, s->wide, s->wide16, 0, w->wqkv, N, C, QKV, 0, err) ||
        adapters_backward(d, lo, p, a, N, write, LORA_LIN_QKV, s->h, s->wide, QKV, a->h1, err))
        return -1;
    return gpu_rmsnorm_backward(d, dx, 0, s->h, x_in, a->rstd1, w->ln1, N, C, C, C, C, 0, err);
}

int gpu_lora_layer_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerLora *lo, const GpuLoraPass *p,
                            const GpuLoraLayerActs *a, GpuLayerTrainScratch *s, const GpuLayerBatch *b,
                            const int write[LORA_N_MODULES], CUdeviceptr dx, CUdeviceptr x_in, GrpoErr *err) {
    if (check_batch(a, s, b, p, err)) return -1;
    return mlp_half_backward(d, w, lo, p, a, s, b->N, write, dx, err) ||
                   attention_half_backward(d, w, lo, p, a, s, b, write, dx, x_in, err)
               ? -1
               : 0;
}
