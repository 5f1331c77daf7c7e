/* gpu/layer_train.c — see layer_train.h: one decoder layer's training forward and
 * backward composed from gpu/ops.h's kernels and gpu/gemm.h's products, launched in
 * order on the device's stream. The steps and their order are model/transformer.c's
 * layer_forward / layer_backward under bf16 activations; the comments name the CPU
 * call each step stands for where the GPU's differs in form. */
#include "gpu/layer_train.h"

#include <string.h>

#include "gpu/ops.h"

typedef struct {
    CUdeviceptr *p;
    size_t bytes;
} Want;

static void free_all(GpuDevice *d, CUdeviceptr *const *all, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (*all[i]) gpu_free(d, *all[i]);
        *all[i] = 0;
    }
}

/* Every buffer of want[n], or none: a refusal frees those already made. */
static int alloc_all(GpuDevice *d, const Want *want, size_t n, GrpoErr *err) {
    for (size_t i = 0; i < n; i++) *want[i].p = 0;
    for (size_t i = 0; i < n; i++)
        if (want[i].bytes && gpu_alloc(d, want[i].p, want[i].bytes, err)) {
            for (size_t j = 0; j < i; j++)
                if (*want[j].p) gpu_free(d, *want[j].p), *want[j].p = 0;
            return -1;
        }
    return 0;
}

static size_t qkv_width(const GpuLayerWeights *w) { return (size_t)(w->H + 2 * w->Hkv) * w->D; }
static size_t larger(size_t a, size_t b) { return a > b ? a : b; }

int gpu_layer_acts_create(GpuDevice *d, GpuLayerActs *a, const GpuLayerWeights *w, int max_tokens, GrpoErr *err) {
    memset(a, 0, sizeof *a);
    if (max_tokens < 1) return err_set(err, "GPU layer activations: max_tokens %d (expected >= 1)", max_tokens);
    a->max_tokens = max_tokens;
    size_t N = (size_t)max_tokens, C = (size_t)w->C, F = (size_t)w->F, HD = (size_t)w->H * w->D;
    size_t QK = w->qk_norm ? (size_t)(w->H + w->Hkv) * w->D : 0; /* Qwen3's q/k norm's, else none */
    Want want[] = {
        {&a->rstd1, 4 * N},       {&a->rstd2, 4 * N},     {&a->qkv, 4 * N * qkv_width(w)}, {&a->att, 4 * N * HD},
        {&a->lse, 4 * N * w->H},  {&a->xmid, 4 * N * C},  {&a->h1_16, 2 * N * C},         {&a->h2_16, 2 * N * C},
        {&a->act16, 2 * N * F},   {&a->gu16, 2 * N * 2 * F},
        {&a->qk, 4 * N * QK},     {&a->qk_rstd, w->qk_norm ? 4 * N * (w->H + w->Hkv) : 0},
    };
    return alloc_all(d, want, sizeof want / sizeof want[0], err);
}

int gpu_layer_acts_create_sharing(GpuDevice *d, GpuLayerActs *a, const GpuLayerActs *owner, const GpuLayerWeights *w,
                                  GrpoErr *err) {
    *a = *owner;
    a->shares = 1;
    size_t N = (size_t)owner->max_tokens, F = (size_t)w->F;
    Want want[] = {{&a->act16, 2 * N * F}, {&a->gu16, 2 * N * 2 * F}};
    return alloc_all(d, want, sizeof want / sizeof want[0], err);
}

void gpu_layer_acts_free(GpuDevice *d, GpuLayerActs *a) {
    if (a->shares) { /* the owner frees the rest */
        CUdeviceptr *const own[] = {&a->act16, &a->gu16};
        free_all(d, own, sizeof own / sizeof own[0]);
        return;
    }
    CUdeviceptr *const all[] = {&a->rstd1, &a->rstd2, &a->qkv,   &a->att,   &a->lse,
                                &a->xmid,  &a->h1_16, &a->h2_16, &a->act16, &a->gu16,
                                &a->qk,    &a->qk_rstd};
    free_all(d, all, sizeof all / sizeof all[0]);
}

int gpu_layer_train_scratch_create(GpuDevice *d, GpuLayerTrainScratch *s, const GpuLayerWeights *w, int max_tokens,
                                   GrpoErr *err) {
    memset(s, 0, sizeof *s);
    if (max_tokens < 1) return err_set(err, "GPU layer scratch: max_tokens %d (expected >= 1)", max_tokens);
    s->max_tokens = max_tokens;
    size_t N = (size_t)max_tokens, C = (size_t)w->C, F = (size_t)w->F, HD = (size_t)w->H * w->D;
    size_t wide = larger(2 * F, qkv_width(w)), mid = larger(F, HD);
    size_t QK = w->qk_norm ? (size_t)(w->H + w->Hkv) * w->D : 0; /* Qwen3's q/k norm's, else none */
    Want want[] = {
        {&s->h, 4 * N * C},    {&s->wide, 4 * N * wide},   {&s->mid, 4 * N * mid},
        {&s->dx16, 2 * N * C}, {&s->wide16, 2 * N * wide}, {&s->mid16, 2 * N * mid},
        {&s->dqk, 4 * N * QK}, {&s->qk_part, 4 * QK},
    };
    return alloc_all(d, want, sizeof want / sizeof want[0], err);
}

void gpu_layer_train_scratch_free(GpuDevice *d, GpuLayerTrainScratch *s) {
    CUdeviceptr *const all[] = {&s->h, &s->wide, &s->mid, &s->dx16, &s->wide16, &s->mid16, &s->dqk, &s->qk_part};
    free_all(d, all, sizeof all / sizeof all[0]);
}

int gpu_layer_grads_create(GpuDevice *d, GpuLayerGrads *g, const GpuLayerWeights *w, GrpoErr *err) {
    memset(g, 0, sizeof *g);
    size_t C = (size_t)w->C, F = (size_t)w->F, QKV = qkv_width(w), HD = (size_t)w->H * w->D;
    Want want[] = {
        {&g->ln1, 4 * C},        {&g->ln2, 4 * C},         {&g->bqkv, w->bqkv ? 4 * QKV : 0},
        {&g->bo, w->bo ? 4 * C : 0}, {&g->wqkv, 4 * QKV * C}, {&g->wo, 4 * C * HD},
        {&g->wgu, 4 * 2 * F * C}, {&g->wdown, 4 * C * F},
        {&g->q_norm, w->qk_norm ? 4 * (size_t)w->D : 0}, {&g->k_norm, w->qk_norm ? 4 * (size_t)w->D : 0},
    };
    return alloc_all(d, want, sizeof want / sizeof want[0], err);
}

void gpu_layer_grads_free(GpuDevice *d, GpuLayerGrads *g) {
    CUdeviceptr *const all[] = {&g->ln1, &g->ln2, &g->bqkv, &g->bo, &g->wqkv, &g->wo, &g->wgu, &g->wdown,
                                &g->q_norm, &g->k_norm};
    free_all(d, all, sizeof all / sizeof all[0]);
}

/* The batch fits the activations and the scratch. */
static int check_batch(const GpuLayerActs *a, const GpuLayerTrainScratch *s, const GpuLayerBatch *b, GrpoErr *err) {
    int most = a->max_tokens < s->max_tokens ? a->max_tokens : s->max_tokens;
    if (b->N < 1 || b->N > most || b->B < 1 || b->B > b->N)
        return err_set(err, "GPU layer (training): batch of %d rows in %d sequences (expected 1 .. %d rows, 1 .. rows "
                       "sequences)", b->N, b->B, most);
    return 0;
}

/* ---- Qwen3's q/k norm: where q and k live after RoPE, their norm forward and backward ----
 * Without the norm RoPE runs on qkv's q and k in place (the CPU's qk holds the same
 * values) and attention reads them there; with it, qkv keeps the norm's input and
 * the normed, RoPE'd heads go to a->qk (the CPU's L->qk), which attention reads. */

/* The [N, (H+Hkv) D] q|k rows attention reads (q at the row's start, k after H D), and their row stride. */
static CUdeviceptr qk_rows(const GpuLayerWeights *w, const GpuLayerActs *a, int *ld) {
    *ld = w->qk_norm ? (w->H + w->Hkv) * w->D : (int)qkv_width(w);
    return w->qk_norm ? a->qk : a->qkv;
}

/* q and k from the qkv product's output to attention's input: (Qwen3) each head
 * RMS-normed over D, then RoPE. */
static int qk_forward(GpuDevice *d, const GpuLayerWeights *w, GpuLayerActs *a, const GpuLayerBatch *b,
                      GrpoErr *err) {
    int N = b->N, H = w->H, Hkv = w->Hkv, D = w->D, QKV = (int)qkv_width(w), ld;
    CUdeviceptr qk = qk_rows(w, a, &ld);
    if (w->qk_norm && gpu_qk_norm_forward(d, a->qk, a->qk_rstd, a->qkv, w->q_norm, w->k_norm, N, H, Hkv, D, ld, QKV,
                                          w->eps, err))
        return -1;
    return gpu_rope_forward(d, qk, b->pos, b->inv_freq, N, H + Hkv, D, ld, err);
}

/* Where attention's backward leaves dq and dk (RoPE's backward runs there): s->dqk
 * under the q/k norm, whose backward then adds dL/d(the product's q, k) into dqkv's
 * q and k (s->wide, zeroed by the caller), with q_norm's and k_norm's gradients;
 * without the norm, dqkv's own q and k. */
static CUdeviceptr dqk_rows(const GpuLayerWeights *w, const GpuLayerTrainScratch *s, int *ld) {
    *ld = w->qk_norm ? (w->H + w->Hkv) * w->D : (int)qkv_width(w);
    return w->qk_norm ? s->dqk : s->wide;
}

/* RoPE's backward on dq|dk, then (Qwen3) the norm's: the CPU's order (model_layer_backward). */
static int qk_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerActs *a, GpuLayerTrainScratch *s,
                       const GpuLayerBatch *b, const GpuLayerGrads *g, int wr, GrpoErr *err) {
    int N = b->N, H = w->H, Hkv = w->Hkv, D = w->D, QKV = (int)qkv_width(w), ld;
    CUdeviceptr dqk = dqk_rows(w, s, &ld);
    if (gpu_rope_backward(d, dqk, b->pos, b->inv_freq, N, H + Hkv, D, ld, err)) return -1;
    if (!w->qk_norm) return 0;
    return gpu_qk_norm_backward(d, s->wide, g->q_norm, g->k_norm, s->qk_part, s->dqk, a->qkv, a->qk_rstd, w->q_norm,
                                w->k_norm, N, H, Hkv, D, QKV, ld, QKV, wr, err);
}

/* The attention half: x_in -> a->xmid, keeping rstd1, h1_16, qkv, (Qwen3) qk and
 * qk_rstd, att and lse. wo's input is rounded into scratch, not kept: the backward
 * rounds att again (the CPU's matmul_backward_weight reads att in fp32 and rounds it). */
static int attention_half(GpuDevice *d, const GpuLayerWeights *w, GpuLayerActs *a, GpuLayerTrainScratch *s,
                          const GpuLayerBatch *b, CUdeviceptr x_in, GrpoErr *err) {
    int N = b->N, C = w->C, H = w->H, Hkv = w->Hkv, D = w->D, QKV = (H + 2 * Hkv) * D, ldqk;
    CUdeviceptr q = qk_rows(w, a, &ldqk), k = q + 4 * (size_t)H * D, v = a->qkv + 4 * (size_t)(H + Hkv) * D;
    if (gpu_rmsnorm_forward(d, s->h, a->rstd1, x_in, w->ln1, N, C, C, C, w->eps, err) ||
        gpu_matmul_forward_bf16(d, a->qkv, s->h, a->h1_16, w->wqkv, w->bqkv, N, C, QKV, err) ||
        qk_forward(d, w, a, b, err) ||
        gpu_attention_forward(d, a->att, a->lse, q, k, v, 0, b->starts, b->B, N, H, Hkv, D, H * D, ldqk, ldqk, QKV,
                              err) ||
        gpu_matmul_forward_bf16(d, a->xmid, a->att, s->mid16, w->wo, w->bo, N, H * D, C, err))
        return -1;
    return gpu_residual_add(d, a->xmid, x_in, (size_t)N * C, err);
}

/* Everything before the gate/up product (layer_train.h): the attention half, then ln2
 * into h2_16 (the rounding gpu_matmul_forward_bf16 would do on its input, so the
 * product reads h2_16). */
int gpu_layer_forward_train_kept(GpuDevice *d, const GpuLayerWeights *w, GpuLayerActs *a, GpuLayerTrainScratch *s,
                                 const GpuLayerBatch *b, CUdeviceptr x_in, GrpoErr *err) {
    int N = b->N, C = w->C;
    if (check_batch(a, s, b, err) || attention_half(d, w, a, s, b, x_in, err) ||
        gpu_rmsnorm_forward(d, s->h, a->rstd2, a->xmid, w->ln2, N, C, C, C, w->eps, err))
        return -1;
    return gpu_round_bf16(d, a->h2_16, s->h, N, C, C, C, err);
}

int gpu_layer_forward_train(GpuDevice *d, const GpuLayerWeights *w, GpuLayerActs *a, GpuLayerTrainScratch *s,
                            const GpuLayerBatch *b, CUdeviceptr x_out, CUdeviceptr x_in, GrpoErr *err) {
    int N = b->N, C = w->C, F = w->F;
    /* swiglu_forward_bf16's two outputs: gate/up rounded (gu16), and act from the fp32
     * gate/up, rounded by wdown's product into act16 */
    if (gpu_layer_forward_train_kept(d, w, a, s, b, x_in, err) ||
        gpu_matmul_forward_bf16(d, s->wide, 0, a->h2_16, w->wgu, 0, N, C, 2 * F, err) ||
        gpu_round_bf16(d, a->gu16, s->wide, N, 2 * F, 2 * F, 2 * F, err) ||
        gpu_swiglu_forward(d, s->mid, s->wide, N, F, err) ||
        gpu_matmul_forward_bf16(d, x_out, s->mid, a->act16, w->wdown, 0, N, F, C, err))
        return -1;
    return gpu_residual_add(d, x_out, a->xmid, (size_t)N * C, err);
}

/* The MLP half's backward: dx (dL/dx_out) becomes dL/dxmid (the residual's and the
 * norm's parts), into g's wdown, wgu and ln2. */
static int mlp_half_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerActs *a, GpuLayerTrainScratch *s,
                             const GpuLayerGrads *g, CUdeviceptr dx, int N, int wr, GrpoErr *err) {
    int C = w->C, F = w->F;
    /* the CPU's matmul_backward_bf16_in16, swiglu_backward_bf16, matmul_backward_bf16_dout16 */
    if (gpu_matmul_backward_bf16(d, s->mid, g->wdown, 0, dx, s->dx16, a->act16, w->wdown, N, F, C, wr, err) ||
        gpu_swiglu_backward_bf16(d, s->wide16, s->mid, a->gu16, N, F, err) ||
        gpu_matmul_backward_bf16_dout16(d, s->h, g->wgu, s->wide16, a->h2_16, w->wgu, N, C, 2 * F, wr, err))
        return -1;
    return gpu_rmsnorm_backward(d, dx, g->ln2, s->h, a->xmid, a->rstd2, w->ln2, N, C, C, C, C, wr, err);
}

/* The attention half's backward: dx (dL/dxmid) becomes dL/dx_in, into g's wo, bo,
 * wqkv, bqkv and ln1. */
static int attention_half_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerActs *a,
                                   GpuLayerTrainScratch *s, const GpuLayerBatch *b, const GpuLayerGrads *g,
                                   CUdeviceptr dx, CUdeviceptr x_in, int wr, GrpoErr *err) {
    int N = b->N, C = w->C, H = w->H, Hkv = w->Hkv, D = w->D, QKV = (H + 2 * Hkv) * D, HD = H * D, ldqk, lddqk;
    CUdeviceptr q = qk_rows(w, a, &ldqk), k = q + 4 * (size_t)H * D, v = a->qkv + 4 * (size_t)(H + Hkv) * D;
    CUdeviceptr dq = dqk_rows(w, s, &lddqk), dk = dq + 4 * (size_t)H * D, dv = s->wide + 4 * (size_t)(H + Hkv) * D;
    /* wo's backward reads att in bf16 (the CPU rounds it inside its product) */
    if (gpu_round_bf16(d, s->mid16, a->att, N, HD, HD, HD, err) ||
        gpu_matmul_backward_bf16(d, s->mid, g->wo, w->bo ? g->bo : 0, dx, s->dx16, s->mid16, w->wo, N, HD, C, wr,
                                 err))
        return -1;
    /* dq written, dk and dv summed into: the CPU's memsets of dqk and dqkv first; then
     * RoPE's backward and (Qwen3) the norm's (without it, on dqkv's q and k in place:
     * the CPU's copy of dqk into dqkv gives the same values) */
    if (gpu_zero(d, s->wide, 4 * (size_t)N * QKV, err) ||
        (w->qk_norm && gpu_zero(d, s->dqk, 4 * (size_t)N * lddqk, err)) ||
        gpu_attention_backward(d, dq, dk, dv, s->mid, q, k, v, a->att, a->lse, 0, b->starts, b->B, N, H, Hkv, D, lddqk,
                               lddqk, QKV, HD, ldqk, ldqk, QKV, HD, err) ||
        qk_backward(d, w, a, s, b, g, wr, err))
        return -1;
    /* the CPU's matmul_backward_bf16_scratch: dbias from the fp32 dqkv, then both
     * products on its bf16 values */
    if (gpu_matmul_backward_bf16(d, s->h, g->wqkv, w->bqkv ? g->bqkv : 0, s->wide, s->wide16, a->h1_16, w->wqkv, N, C,
                                 QKV, wr, err))
        return -1;
    return gpu_rmsnorm_backward(d, dx, g->ln1, s->h, x_in, a->rstd1, w->ln1, N, C, C, C, C, wr, err);
}

int gpu_layer_backward(GpuDevice *d, const GpuLayerWeights *w, const GpuLayerActs *a, GpuLayerTrainScratch *s,
                       const GpuLayerBatch *b, const GpuLayerGrads *g, CUdeviceptr dx, CUdeviceptr x_in, int write_dw,
                       GrpoErr *err) {
    if (check_batch(a, s, b, err)) return -1;
    if (mlp_half_backward(d, w, a, s, g, dx, b->N, write_dw, err)) return -1;
    return attention_half_backward(d, w, a, s, b, g, dx, x_in, write_dw, err);
}
