/* gpu/model.c — see model.h: the embedding, the stack of gpu/layer.h's layers run in
 * place on one residual buffer, the final norm and gpu/logprob.h's chunk loop,
 * launched in order on the device's stream. It adds no kernel: each step is one
 * the CPU's forward has, with the same operands. Not here: a backward, adapters'
 * dropout (training's), the head held in bf16 with fp32 products (--bf16_held), fp32 products. */
#include "gpu/model.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"
#include "model/lora_layers.h"

/* host[bytes] into a fresh device buffer at *p. */
static int put_new(GpuDevice *d, CUdeviceptr *p, const void *host, size_t bytes, GrpoErr *err) {
    *p = 0;
    if (gpu_alloc(d, p, bytes, err)) return -1;
    return gpu_put(d, *p, host, bytes, err);
}

/* The embedding as the CPU's model_embed reads it: mixed precision's fp32 values
 * (its two halves joined: an fp32 model's rows), a WEIGHTS_BF16 model's bf16 ones. */
static int upload_embedding(GpuDevice *d, GpuModel *g, const Model *m, GrpoErr *err) {
    size_t n = (size_t)g->V * g->C;
    if (m->half) {
        g->embed_bf16 = 1;
        return put_new(d, &g->embed, m->half->embed16, 2 * n, err);
    }
    int i = params_find(&m->table, "model.embed_tokens.weight");
    if (i < 0) return err_set(err, "GPU model: the model has no model.embed_tokens.weight");
    float *rows = xmalloc(sizeof(float) * n);
    model_get_params(m, m->table.entries[i].offset, n, rows);
    int rc = put_new(d, &g->embed, rows, 4 * n, err);
    free(rows);
    return rc;
}

/* The LM head's bf16 values (model_lm_head's): a tied bf16 table is the embedding's buffer. */
static int upload_head(GpuDevice *d, GpuModel *g, const Model *m, GrpoErr *err) {
    WeightMatrix W = model_lm_head(m);
    g->head.bf16_products = 1;
    if (m->half && W.w16 == m->half->embed16) {
        g->head.w = g->embed;
        return 0;
    }
    return put_new(d, &g->head.w, W.w16, 2 * (size_t)g->V * g->C, err);
}

/* LoRA: m->lora's parameters onto the device and each layer's views into them. */
static int upload_lora(GpuDevice *d, GpuModel *g, const Model *m, GrpoErr *err) {
    const LoraLayers *lo = m->lora;
    if (!lo) return 0;
    if (lo->n_layers != g->L)
        return err_set(err, "GPU model: adapters for %d layers on a model of %d", lo->n_layers, g->L);
    g->lora_r = lo->spec.r;
    g->lora = xcalloc((size_t)(g->L ? g->L : 1), sizeof *g->lora);
    if (put_new(d, &g->lora_params, lo->params, 4 * lo->table.total, err)) return -1;
    for (int l = 0; l < g->L; l++)
        for (int mod = 0; mod < LORA_N_MODULES; mod++)
            g->lora[l].has[mod] = gpu_lora_view(&g->lora[l].mod[mod], lo, &m->cfg, l, (LoraModule)mod, g->lora_params, 0);
    return 0;
}

int gpu_model_lora_put(GpuDevice *d, GpuModel *g, const LoraLayers *lo, GrpoErr *err) {
    if (!g->lora_params || lo->spec.r != g->lora_r || lo->n_layers != g->L)
        return err_set(err, "GPU model: adapters of rank %d for %d layers, the model's were uploaded with rank %d%s",
                       lo->spec.r, lo->n_layers, g->lora_r, g->lora_params ? "" : " (none were)");
    return gpu_put(d, g->lora_params, lo->params, 4 * lo->table.total, err);
}

int gpu_model_upload(GpuDevice *d, GpuModel *g, const Model *m, GrpoErr *err) {
    const ModelConfig *c = &m->cfg;
    memset(g, 0, sizeof *g);
    /* the GPU's products are bf16 ones: an fp32 or bf16_held model's would differ from its CPU forward */
    if (!(m->mixed || (m->half && m->half->products16)))
        return err_set(err, "GPU model: the model's products are not bf16 (expected mixed precision or --bf16)");
    g->L = c->n_layers, g->C = c->hidden_size, g->V = c->vocab_size, g->D = c->head_dim, g->eps = c->rms_norm_eps;
    g->layers = xcalloc((size_t)(g->L ? g->L : 1), sizeof *g->layers);
    int rc = 0;
    for (int l = 0; l < g->L && !rc; l++) rc = gpu_layer_upload(d, &g->layers[l], m, l, err);
    if (rc || upload_embedding(d, g, m, err) || upload_head(d, g, m, err) ||
        put_new(d, &g->norm, m->w.norm, 4 * (size_t)g->C, err) ||
        put_new(d, &g->inv_freq, m->inv_freq, 4 * (size_t)(g->D / 2), err) || upload_lora(d, g, m, err)) {
        gpu_model_free(d, g);
        return -1;
    }
    return 0;
}

void gpu_model_free(GpuDevice *d, GpuModel *g) {
    for (int l = 0; g->layers && l < g->L; l++) gpu_layer_free(d, &g->layers[l]);
    free(g->layers);
    free(g->lora);
    if (g->lora_params) gpu_free(d, g->lora_params);
    if (g->head.w && g->head.w != g->embed) gpu_free(d, g->head.w);
    CUdeviceptr all[] = {g->embed, g->norm, g->inv_freq};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) gpu_free(d, all[i]);
    memset(g, 0, sizeof *g);
}

int gpu_model_scratch_create(GpuDevice *d, GpuModelScratch *s, const GpuModel *g, int max_tokens, int chunk_rows,
                             GrpoErr *err) {
    memset(s, 0, sizeof *s);
    s->max_tokens = max_tokens;
    if (max_tokens < 1) return err_set(err, "GPU model: scratch for %d tokens (expected at least 1)", max_tokens);
    size_t N = (size_t)max_tokens, NC = N * g->C;
    s->host = xmalloc(sizeof(int32_t) * (3 * N + 1));
    /* every layer reads the first layer's shapes: one scratch serves the stack */
    if (gpu_alloc(d, &s->x, 4 * NC, err) || gpu_alloc(d, &s->hf, 4 * NC, err) || gpu_alloc(d, &s->rstd, 4 * N, err) ||
        gpu_alloc(d, &s->batch, 4 * (3 * N + 1), err) || gpu_alloc(d, &s->logprob, 4 * N, err) ||
        gpu_alloc(d, &s->entropy, 4 * N, err) || gpu_alloc(d, &s->lse, 4 * N, err) ||
        (g->L && gpu_layer_scratch_create(d, &s->layer, &g->layers[0], max_tokens, err)) ||
        (g->L && g->lora && gpu_layer_scratch_lora(d, &s->layer, g->lora_r, err)) ||
        gpu_logprob_scratch_init(d, &s->head, chunk_rows, max_tokens, g->C, g->V, err)) {
        gpu_model_scratch_free(d, s);
        return -1;
    }
    return 0;
}

void gpu_model_scratch_free(GpuDevice *d, GpuModelScratch *s) {
    CUdeviceptr *all[] = {&s->x, &s->hf, &s->rstd, &s->batch, &s->logprob, &s->entropy, &s->lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i]) gpu_free(d, *all[i]);
        *all[i] = 0;
    }
    gpu_layer_scratch_free(d, &s->layer);
    gpu_logprob_scratch_free(d, &s->head);
    free(s->host);
    s->host = NULL;
}

int gpu_model_upload_batch(GpuDevice *d, const GpuModel *g, CUdeviceptr batch, int32_t *host, int max_tokens,
                           const int32_t *ids, const int *starts, int B, const char *who, GrpoErr *err) {
    if (B < 1 || starts[0] != 0 || starts[B] > max_tokens)
        return err_set(err, "%s: %d sequences of %d rows in all (expected 1 or more sequences, starts[0] 0, at most %d "
                       "rows)", who, B, B >= 1 ? starts[B] : 0, max_tokens);
    int N = starts[B];
    int32_t *hid = host, *hpos = host + N, *hstart = host + 2 * N;
    for (int b = 0; b < B; b++) {
        if (starts[b + 1] <= starts[b])
            return err_set(err, "%s: sequence %d is empty (starts[%d] %d, starts[%d] %d)", who, b, b, starts[b], b + 1,
                           starts[b + 1]);
        for (int n = starts[b]; n < starts[b + 1]; n++) {
            if (ids[n] < 0 || ids[n] >= g->V)
                return err_set(err, "%s: token id %d at row %d is outside the vocabulary of %d", who, ids[n], n, g->V);
            hid[n] = ids[n], hpos[n] = n - starts[b];
        }
    }
    for (int b = 0; b <= B; b++) hstart[b] = starts[b];
    if (gpu_put(d, batch, host, sizeof(int32_t) * (2 * (size_t)N + B + 1), err)) return -1;
    return N;
}

static int upload_batch(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, const int32_t *ids, const int *starts,
                        int B, GrpoErr *err) {
    return gpu_model_upload_batch(d, g, s->batch, s->host, s->max_tokens, ids, starts, B, "GPU model", err);
}

/* The trunk: embedding, the layers in place on s->x (with lora[L]'s adapters, or
 * NULL: the base alone), the final norm into s->hf. */
static int trunk_forward(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, int N, int B, const GpuLayerLora *lora,
                         GrpoErr *err) {
    CUdeviceptr ids = s->batch;
    GpuLayerBatch lb = {B, N, s->batch + 4 * 2 * (size_t)N, s->batch + 4 * (size_t)N, g->inv_freq};
    if (g->embed_bf16 ? gpu_embedding_forward_bf16(d, s->x, ids, g->embed, N, g->C, err)
                      : gpu_embedding_forward(d, s->x, ids, g->embed, N, g->C, err))
        return -1;
    for (int l = 0; l < g->L; l++)
        if (gpu_layer_forward_lora(d, &g->layers[l], lora ? &lora[l] : NULL, &s->layer, &lb, s->x, s->x, err))
            return -1;
    return gpu_rmsnorm_forward(d, s->hf, s->rstd, s->x, g->norm, N, g->C, g->C, g->C, g->eps, err);
}

int gpu_model_logprobs(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, const int32_t *ids, const int *starts,
                       int B, const int32_t *targets, float inv_temp, float *logprob, float *entropy, GrpoErr *err) {
    return gpu_model_logprobs_pass(d, g, s, ids, starts, B, targets, inv_temp, NULL, logprob, entropy, err);
}

/* The forward of the trunk with lora's adapters, the head's log-probs downloaded. */
static int logprobs_with(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, const int32_t *ids, const int *starts,
                         int B, const int32_t *targets, float inv_temp, const GpuLayerLora *lora, float *logprob,
                         float *entropy, GrpoErr *err) {
    int N = upload_batch(d, g, s, ids, starts, B, err);
    if (N < 0 || trunk_forward(d, g, s, N, B, lora, err) ||
        gpu_logprob_forward(d, s->logprob, entropy ? s->entropy : 0, s->lse, 0, s->hf, g->head, targets, N, inv_temp,
                            &s->head, err) ||
        gpu_sync(d, err) || gpu_get(d, logprob, s->logprob, sizeof(float) * (size_t)N, err) ||
        (entropy && gpu_get(d, entropy, s->entropy, sizeof(float) * (size_t)N, err)))
        return -1;
    return 0;
}

int gpu_model_logprobs_pass(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, const int32_t *ids,
                            const int *starts, int B, const int32_t *targets, float inv_temp, const ModelPass *pass,
                            float *logprob, float *entropy, GrpoErr *err) {
    if (pass && pass->drop_keys && g->lora)
        return err_set(err, "GPU model: a pass with adapter dropout (training) in the inference forward");
    const GpuLayerLora *lora = pass && pass->base_only ? NULL : g->lora;
    return logprobs_with(d, g, s, ids, starts, B, targets, inv_temp, lora, logprob, entropy, err);
}

int gpu_model_batch_logprobs(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, PaddedBatch *pb, float inv_temp,
                             float *logp, float *entropy, GrpoErr *err) {
    return gpu_model_batch_logprobs_pass(d, g, s, pb, inv_temp, NULL, logp, entropy, err);
}

int gpu_model_batch_logprobs_pass(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, PaddedBatch *pb,
                                  float inv_temp, const ModelPass *pass, float *logp, float *entropy, GrpoErr *err) {
    if (pass && pass->drop_keys && g->lora)
        return err_set(err, "GPU model: a pass with adapter dropout (training) in the inference forward");
    return gpu_model_batch_logprobs_lora(d, g, s, pb, inv_temp, pass && pass->base_only ? NULL : g->lora, logp,
                                         entropy, err);
}

/* ---- other adapters on the same base (a run continuing --adapter: its frozen starting adapter, the KL
 * reference) ---- */

int gpu_model_batch_logprobs_lora(GpuDevice *d, const GpuModel *g, GpuModelScratch *s, PaddedBatch *pb,
                                  float inv_temp, const GpuLayerLora *lora, float *logp, float *entropy,
                                  GrpoErr *err) {
    if (!pb->packed) return err_set(err, "GPU model: the batch is right-padded (expected one packed end to end)");
    for (int l = 0; lora && l < g->L; l++) /* the scratch's u is sized for the rank g was uploaded with */
        for (int mod = 0; mod < LORA_N_MODULES; mod++)
            if (lora[l].has[mod] && lora[l].mod[mod].r > g->lora_r)
                return err_set(err, "GPU model: adapters of rank %d lent to a model uploaded with rank %d",
                               lora[l].mod[mod].r, g->lora_r);
    float *lp = pb->full, *ent = entropy ? pb->full2 : NULL;
    if (logprobs_with(d, g, s, pb->ids, pb->start, pb->S, pb->targets, inv_temp, lora, lp, ent, err)) return -1;
    padded_batch_gather(pb, lp, logp);
    if (entropy) padded_batch_gather(pb, ent, entropy);
    return 0;
}
