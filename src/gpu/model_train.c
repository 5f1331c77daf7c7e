/* gpu/model_train.c — see model_train.h: the stack of gpu/layer_train.h's layers
 * between the embedding and gpu/head_pass.h's final norm and head, each layer's input kept in one
 * [L+1, N, C] buffer as the CPU's Activations.x, and the gradients in one buffer of
 * the parameter table's layout with the host's record of what this step wrote. It
 * adds no kernel. With recomputation, one layer's saved tensors shared by every layer
 * (acts_of; selective: all but each layer's own gate/up), each remade in the backward
 * from x (recompute_layer). Not here: adapters, the optimizer. */
#include "gpu/model_train.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"

/* The offset (floats) of tensor name in the table, or -1 (printf-style name). */
static long long offset_of(const ParamTable *tb, const char *name) {
    int e = params_find(tb, name);
    return e < 0 ? -1 : (long long)tb->entries[e].offset;
}

/* A view of the gradient buffer at the table's tensor "model.layers.<l>.<suffix>", or
 * 0 where the table has none. */
static CUdeviceptr layer_view(const GpuModelTrain *t, int l, const char *suffix) {
    char name[96];
    snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix);
    long long o = offset_of(t->table, name);
    return o < 0 ? 0 : t->grads + 4 * (size_t)o;
}

/* Layer l's q_norm and k_norm gradient views (Qwen3), where its weights have them. */
static int qk_norm_views(GpuModelTrain *t, const GpuModel *g, int l, GrpoErr *err) {
    GpuLayerGrads *v = &t->lgrads[l];
    v->q_norm = layer_view(t, l, "self_attn.q_norm.weight"), v->k_norm = layer_view(t, l, "self_attn.k_norm.weight");
    int want = g->layers[l].qk_norm != 0;
    if ((v->q_norm != 0) != want || (v->k_norm != 0) != want)
        return err_set(err, "GPU training: layer %d's q/k norm in the parameter table does not match its weights", l);
    return 0;
}

/* The gradient views into t->grads: every layer's (GpuLayerGrads' fused matrices
 * start at q_proj and gate_proj: the table keeps them adjacent), the embedding's,
 * the final norm's and the head's. */
static int make_views(GpuModelTrain *t, const GpuModel *g, GrpoErr *err) {
    for (int l = 0; l < t->L; l++) {
        GpuLayerGrads *v = &t->lgrads[l];
        *v = (GpuLayerGrads){layer_view(t, l, "input_layernorm.weight"),
                             layer_view(t, l, "post_attention_layernorm.weight"),
                             layer_view(t, l, "self_attn.q_proj.bias"), layer_view(t, l, "self_attn.o_proj.bias"),
                             layer_view(t, l, "self_attn.q_proj.weight"), layer_view(t, l, "self_attn.o_proj.weight"),
                             layer_view(t, l, "mlp.gate_proj.weight"), layer_view(t, l, "mlp.down_proj.weight"),
                             0, 0};
        if (qk_norm_views(t, g, l, err)) return -1;
        if (!v->ln1 || !v->ln2 || !v->wqkv || !v->wo || !v->wgu || !v->wdown || !v->bqkv != !g->layers[l].bqkv ||
            !v->bo != !g->layers[l].bo)
            return err_set(err, "GPU training: layer %d's tensors in the parameter table do not match its weights", l);
    }
    long long e = offset_of(t->table, "model.embed_tokens.weight"), n = offset_of(t->table, "model.norm.weight"),
              h = offset_of(t->table, "lm_head.weight");
    if (e < 0 || n < 0) return err_set(err, "GPU training: the parameter table has no embedding or final norm");
    t->g_embed = t->grads + 4 * (size_t)e, t->g_norm = t->grads + 4 * (size_t)n;
    t->g_head = h < 0 ? t->g_embed : t->grads + 4 * (size_t)h; /* tied: the table has no lm_head */
    return 0;
}

/* How many sets of a layer's saved tensors the pass keeps: one when it recomputes in
 * full (selective: L, all but the first sharing the first's buffers but gate/up). */
static int acts_sets(const GpuModelTrain *t) { return t->ckpt == CKPT_FULL && t->L ? 1 : t->L; }

/* Device buffers of the forward/backward for max_tokens rows; the layers' acts. */
static int alloc_buffers(GpuDevice *d, GpuModelTrain *t, const GpuModel *g, int chunk_rows, GrpoErr *err) {
    size_t N = (size_t)t->max_tokens, NC = N * t->C;
    if (gpu_alloc(d, &t->x, 4 * NC * (t->L + 1), err) || gpu_alloc(d, &t->dx, 4 * NC, err) ||
        gpu_alloc(d, &t->batch, 4 * (3 * N + 1), err) || gpu_alloc(d, &t->grads, 4 * t->table->total, err) ||
        /* the table's padding between tensors (q_norm's D floats, aligned) is in the flat
         * vector clipping and AdamW read, and no backward writes it: zeros, as the CPU's */
        gpu_zero(d, t->grads, 4 * t->table->total, err) ||
        gpu_head_pass_create(d, &t->head, t->max_tokens, g->C, g->V, chunk_rows, 0, err))
        return -1;
    for (int l = 0; l < acts_sets(t); l++)
        if (t->ckpt == CKPT_SELECTIVE && l > 0
                ? gpu_layer_acts_create_sharing(d, &t->acts[l], &t->acts[0], &g->layers[l], err)
                : gpu_layer_acts_create(d, &t->acts[l], &g->layers[l], t->max_tokens, err))
            return -1;
    return t->L ? gpu_layer_train_scratch_create(d, &t->scratch, &g->layers[0], t->max_tokens, err) : 0;
}

int gpu_model_train_create(GpuDevice *d, GpuModelTrain *t, const GpuModel *g, const Model *m, int max_tokens,
                           int chunk_rows, GrpoErr *err) {
    return gpu_model_train_create_ckpt(d, t, g, m, max_tokens, chunk_rows, CKPT_NONE, err);
}

int gpu_model_train_create_ckpt(GpuDevice *d, GpuModelTrain *t, const GpuModel *g, const Model *m, int max_tokens,
                                int chunk_rows, CheckpointMode ckpt, GrpoErr *err) {
    memset(t, 0, sizeof *t);
    if (ckpt < CKPT_NONE || ckpt > CKPT_SELECTIVE)
        return err_set(err, "GPU training: checkpointing mode %d (expected none, full or selective)", (int)ckpt);
    t->ckpt = ckpt;
    if (g->lora) return err_set(err, "GPU training: the model has LoRA adapters (gpu/model_lora.h trains them)");
    if (!m->mixed) return err_set(err, "GPU training: the model is not under mixed precision (expected --bf16)");
    if (max_tokens < 1) return err_set(err, "GPU training: max_tokens %d (expected at least 1)", max_tokens);
    t->max_tokens = max_tokens, t->L = g->L, t->C = g->C, t->table = &m->table;
    t->acts = xcalloc((size_t)(t->L ? t->L : 1), sizeof *t->acts);
    t->lgrads = xcalloc((size_t)(t->L ? t->L : 1), sizeof *t->lgrads);
    t->host = xmalloc(sizeof(int32_t) * (3 * (size_t)max_tokens + 1));
    t->written = xcalloc((size_t)t->table->n, 1);
    if (alloc_buffers(d, t, g, chunk_rows, err) || make_views(t, g, err)) {
        gpu_model_train_free(d, t);
        return -1;
    }
    return 0;
}

void gpu_model_train_free(GpuDevice *d, GpuModelTrain *t) {
    CUdeviceptr *all[] = {&t->x, &t->dx, &t->batch, &t->grads};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i]) gpu_free(d, *all[i]);
        *all[i] = 0;
    }
    for (int l = 0; t->acts && l < acts_sets(t); l++) gpu_layer_acts_free(d, &t->acts[l]);
    gpu_layer_train_scratch_free(d, &t->scratch);
    gpu_head_pass_free(d, &t->head);
    free(t->acts), free(t->lgrads), free(t->host), free(t->written);
    memset(t, 0, sizeof *t);
}

/* ---- which tensors this step has written (model/grads.c's rules, on the host) ---- */

void gpu_model_train_begin(GpuModelTrain *t) { memset(t->written, 0, (size_t)t->table->n); }

/* The entry starting at offset off (floats), or -1. */
static int entry_at(const ParamTable *tb, size_t off) {
    for (int e = 0; e < tb->n; e++)
        if (tb->entries[e].offset == off) return e;
    return -1;
}

/* grad_state_take for the device view p of n floats: 1 when this step has not
 * written it (the caller writes over it), 0 when it has; marks it written. -1 with
 * err for a view that starts no tensor or spans tensors of differing states. */
static int take(GpuModelTrain *t, CUdeviceptr p, size_t n, GrpoErr *err) {
    size_t off = (size_t)(p - t->grads) / 4;
    int e = entry_at(t->table, off);
    if (e < 0) return err_set(err, "GPU training: a gradient view at %zu starts no tensor", off);
    int first = !t->written[e];
    for (int i = e; i < t->table->n && t->table->entries[i].offset < off + n; i++) {
        if (t->written[i] == first)
            return err_set(err, "GPU training: %s's gradient state differs from %s's", t->table->entries[i].name,
                           t->table->entries[e].name);
        t->written[i] = 1;
    }
    return first;
}

/* take for every tensor of layer l, which one gpu_layer_backward writes or adds to
 * together: 1 or 0 as they all say, -1 with err when they differ. */
static int take_layer(GpuModelTrain *t, const GpuLayerWeights *w, int l, GrpoErr *err) {
    const GpuLayerGrads *v = &t->lgrads[l];
    size_t C = (size_t)w->C, F = (size_t)w->F, HD = (size_t)w->H * w->D, QKV = (size_t)(w->H + 2 * w->Hkv) * w->D;
    struct { CUdeviceptr p; size_t n; } all[] = {
        {v->ln1, C},         {v->ln2, C},  {v->bqkv, QKV},    {v->bo, C},
        {v->wqkv, QKV * C},  {v->wo, C * HD}, {v->wgu, 2 * F * C}, {v->wdown, C * F},
        {v->q_norm, (size_t)w->D}, {v->k_norm, (size_t)w->D},
    };
    int first = -2;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!all[i].p) continue;
        int f = take(t, all[i].p, all[i].n, err);
        if (f < 0) return -1;
        if (first != -2 && f != first)
            return err_set(err, "GPU training: layer %d's gradients are partly written this step", l);
        first = f;
    }
    return first;
}

int gpu_model_train_settle(GpuDevice *d, GpuModelTrain *t, GrpoErr *err) {
    for (int e = 0; e < t->table->n; e++) {
        const ParamEntry *pe = &t->table->entries[e];
        if (t->written[e]) continue;
        if (gpu_zero(d, t->grads + 4 * pe->offset, 4 * pe->numel, err)) return -1;
        t->written[e] = 1;
    }
    return 0;
}

/* ---- the passes ---- */

static int upload_batch(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, const int32_t *ids, const int *starts,
                        int B, GrpoErr *err) {
    return gpu_model_upload_batch(d, g, t->batch, t->host, t->max_tokens, ids, starts, B, "GPU training", err);
}

static GpuLayerBatch layer_batch(const GpuModel *g, const GpuModelTrain *t) {
    size_t N = (size_t)t->N;
    return (GpuLayerBatch){t->B, t->N, t->batch + 4 * 2 * N, t->batch + 4 * N, g->inv_freq};
}

/* x_l of the last forward: layer l's input (l = L: the last layer's output). */
static CUdeviceptr x_at(const GpuModelTrain *t, int l) { return t->x + 4 * (size_t)l * t->N * t->C; }

/* Layer l's saved tensors: its own, or the one shared set when the pass recomputes in
 * full (selective: its own gate/up, the shared rest). */
static GpuLayerActs *acts_of(GpuModelTrain *t, int l) { return &t->acts[t->ckpt == CKPT_FULL ? 0 : l]; }

/* Before layer l's backward with recomputation: its forward again from its kept input
 * x_l into the shared set; the last layer's set is still there from the forward. Full:
 * the whole layer, whose output rewrites x_{l+1} with the bits it holds (the same
 * kernels on the same input), which no later step reads: layer l+1's backward is done.
 * Selective: up to the gate/up product, which the layer's set kept. */
static int recompute_layer(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, const GpuLayerBatch *lb, int l,
                           GrpoErr *err) {
    if (t->ckpt == CKPT_NONE || l == g->L - 1) return 0;
    if (t->ckpt == CKPT_SELECTIVE)
        return gpu_layer_forward_train_kept(d, &g->layers[l], acts_of(t, l), &t->scratch, lb, x_at(t, l), err);
    return gpu_layer_forward_train(d, &g->layers[l], acts_of(t, l), &t->scratch, lb, x_at(t, l + 1), x_at(t, l), err);
}

/* The forward (grad: with the head's backward of a token-local objective, the head's weight
 * gradient taken now). */
static int forward(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, const int32_t *ids, const int *starts, int B,
                   const int32_t *targets, float inv_temp, float *logprob, float *entropy, const LogprobGrad *grad,
                   GrpoErr *err) {
    t->N = 0;
    int N = upload_batch(d, g, t, ids, starts, B, err);
    if (N < 0) return -1;
    if (g->embed_bf16) return err_set(err, "GPU training: the embedding is held in bf16 (expected mixed precision)");
    t->N = N, t->B = B;
    GpuLayerBatch lb = layer_batch(g, t);
    int rc = gpu_embedding_forward(d, x_at(t, 0), t->batch, g->embed, N, g->C, err);
    for (int l = 0; l < g->L && !rc; l++)
        rc = gpu_layer_forward_train(d, &g->layers[l], acts_of(t, l), &t->scratch, &lb, x_at(t, l + 1), x_at(t, l),
                                     err);
    GpuHeadGrads hg = {t->g_head, t->g_norm, 0, 0};
    if (!rc && grad) /* the head's weight gradient: the embedding's when tied, taken (written) first, as the CPU's */
        rc = (hg.write_head = take(t, t->g_head, (size_t)g->V * g->C, err)) < 0 ||
             gpu_head_pass_forward_grad(d, g, &t->head, logprob, entropy, x_at(t, g->L), targets, N, inv_temp, grad,
                                        &hg, err);
    else if (!rc)
        rc = gpu_head_pass_forward(d, g, &t->head, logprob, entropy, x_at(t, g->L), targets, N, inv_temp, err);
    if (rc) {
        t->N = 0;
        return -1;
    }
    return 0;
}

int gpu_model_train_forward(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, const int32_t *ids, const int *starts,
                            int B, const int32_t *targets, float inv_temp, float *logprob, float *entropy,
                            GrpoErr *err) {
    return forward(d, g, t, ids, starts, B, targets, inv_temp, logprob, entropy, NULL, err);
}

int gpu_model_train_forward_grad(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, const int32_t *ids,
                                 const int *starts, int B, const int32_t *targets, float inv_temp, float *logprob,
                                 float *entropy, const LogprobGrad *grad, GrpoErr *err) {
    return forward(d, g, t, ids, starts, B, targets, inv_temp, logprob, entropy, grad, err);
}

int gpu_model_train_backward(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, const float *dlogprob,
                             const float *dentropy, GrpoErr *err) {
    int N = t->N, C = g->C;
    size_t VC = (size_t)g->V * C;
    if (N < 1) return err_set(err, "GPU training: a backward without a forward before it");
    /* the head's weight gradient: the embedding's when tied, taken (written) first, as the CPU's (by the
     * forward when it ran the head's backward) */
    GpuHeadGrads hg = {t->g_head, t->g_norm, t->head.head_done ? 0 : take(t, t->g_head, VC, err), 0};
    if (hg.write_head < 0 || (hg.write_norm = take(t, t->g_norm, (size_t)C, err)) < 0 ||
        gpu_head_pass_backward(d, g, &t->head, t->dx, &hg, dlogprob, dentropy, x_at(t, g->L), N, err))
        return -1;
    int wr;
    GpuLayerBatch lb = layer_batch(g, t);
    for (int l = g->L - 1; l >= 0; l--) {
        wr = take_layer(t, &g->layers[l], l, err);
        if (wr < 0 || recompute_layer(d, g, t, &lb, l, err) ||
            gpu_layer_backward(d, &g->layers[l], acts_of(t, l), &t->scratch, &lb, &t->lgrads[l], t->dx, x_at(t, l),
                               wr, err))
            return -1;
    }
    /* a scatter sums into its table: zeroed first when this step has not written it
     * (untied); a tied table already holds the head's gradient */
    wr = take(t, t->g_embed, VC, err);
    if (wr < 0 || (wr && gpu_zero(d, t->g_embed, 4 * VC, err)))
        return -1;
    return gpu_embedding_backward(d, t->g_embed, t->dx, t->batch, N, C, err);
}

int gpu_model_train_batch_forward(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, PaddedBatch *pb,
                                  float inv_temp, float *logp, float *entropy, const LogprobGrad *grad, GrpoErr *err) {
    if (!pb->packed) return err_set(err, "GPU training: the batch is right-padded (expected one packed end to end)");
    float *lp = pb->full, *ent = entropy ? pb->full2 : NULL;
    PaddedBatchRowGrad r;
    LogprobGrad by_row = grad ? padded_batch_row_grad(&r, pb, grad) : (LogprobGrad){0};
    if (forward(d, g, t, pb->ids, pb->start, pb->S, pb->targets, inv_temp, lp, ent, grad ? &by_row : NULL, err))
        return -1;
    padded_batch_gather(pb, lp, logp);
    if (entropy) padded_batch_gather(pb, ent, entropy);
    return 0;
}

int gpu_model_train_batch_backward(GpuDevice *d, const GpuModel *g, GpuModelTrain *t, PaddedBatch *pb,
                                   const float *dlogp, const float *dentropy, GrpoErr *err) {
    if (!pb->packed) return err_set(err, "GPU training: the batch is right-padded (expected one packed end to end)");
    if (!dlogp) return gpu_model_train_backward(d, g, t, NULL, dentropy, err); /* the forward took the head's */
    padded_batch_scatter(pb, dlogp, pb->full);
    if (dentropy) padded_batch_scatter(pb, dentropy, pb->full2); /* free again: the forward's entropies were gathered */
    return gpu_model_train_backward(d, g, t, pb->full, dentropy ? pb->full2 : NULL, err);
}
