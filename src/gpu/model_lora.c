/* gpu/model_lora.c — see model_lora.h: gpu/layer_lora.h's layers between the
 * embedding and gpu/head_pass.h's final norm and head, each layer's input kept in one [L+1, N, C]
 * buffer as the CPU's Activations.x, the adapters' gradient in their table's layout
 * with the host's record of what this step wrote. Not gpu/model_train.c: that is
 * full fine-tuning's pass (every weight's gradient, bf16 activations); this one has
 * other layers, no head or embedding gradient and the dropout keys. With recomputation,
 * one layer's saved tensors shared by every layer (acts_of; selective: all but each
 * layer's own gate/up), each remade in the backward from x (recompute_layer). Adds no
 * kernel. */
#include "gpu/model_lora.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/ops.h"

/* How many sets of a layer's saved tensors the pass keeps: one when it recomputes in
 * full (selective: L, all but the first sharing the first's buffers but gate/up). */
static int acts_sets(const GpuModelLora *t) { return t->ckpt == CKPT_FULL && t->L ? 1 : t->L; }

/* Device buffers for max_tokens rows and the layers' saved tensors. */
static int alloc_buffers(GpuDevice *d, GpuModelLora *t, const GpuModel *g, int chunk_rows, GrpoErr *err) {
    size_t N = (size_t)t->max_tokens, NC = N * t->C;
    if (gpu_alloc(d, &t->x, 4 * NC * (t->L + 1), err) || gpu_alloc(d, &t->dx, 4 * NC, err) ||
        gpu_alloc(d, &t->batch, 4 * (3 * N + 1), err) || gpu_alloc(d, &t->keys, 8 * N, err) ||
        gpu_alloc(d, &t->seq, 4 * N, err) ||
        gpu_alloc(d, &t->grads, 4 * (t->lo->table.total ? t->lo->table.total : 1), err) ||
        /* the table's gaps between tensors (alignment) are in the flat vector clipping and AdamW read, and no
         * backward writes them: zeros, as the CPU's */
        gpu_zero(d, t->grads, 4 * t->lo->table.total, err) ||
        gpu_head_pass_create(d, &t->head, t->max_tokens, g->C, g->V, chunk_rows, !t->entropy_grad, err))
        return -1;
    for (int l = 0; l < acts_sets(t); l++)
        if (t->ckpt == CKPT_SELECTIVE && l > 0
                ? gpu_lora_layer_acts_create_sharing(d, &t->acts[l], &t->acts[0], &g->layers[l], err)
                : gpu_lora_layer_acts_create(d, &t->acts[l], &g->layers[l], t->lo, t->max_tokens, err))
            return -1;
    return t->L ? gpu_layer_train_scratch_create(d, &t->scratch, &g->layers[0], t->max_tokens, err) : 0;
}

int gpu_model_lora_create(GpuDevice *d, GpuModelLora *t, const GpuModel *g, const Model *m, int max_tokens,
                          int chunk_rows, GrpoErr *err) {
    return gpu_model_lora_create_ckpt(d, t, g, m, max_tokens, chunk_rows, CKPT_NONE, 0, err);
}

int gpu_model_lora_create_ckpt(GpuDevice *d, GpuModelLora *t, const GpuModel *g, const Model *m, int max_tokens,
                               int chunk_rows, CheckpointMode ckpt, int entropy_grad, GrpoErr *err) {
    memset(t, 0, sizeof *t);
    t->entropy_grad = entropy_grad;
    if (ckpt < CKPT_NONE || ckpt > CKPT_SELECTIVE)
        return err_set(err, "GPU LoRA training: checkpointing mode %d (expected none, full or selective)", (int)ckpt);
    t->ckpt = ckpt;
    if (!m->lora || !g->lora_params) return err_set(err, "GPU LoRA training: the model has no adapters attached");
    if (!g->embed_bf16 || m->mixed)
        return err_set(err, "GPU LoRA training: the base is not held in bf16 (expected --bf16 with adapters)");
    if (max_tokens < 1) return err_set(err, "GPU LoRA training: max_tokens %d (expected at least 1)", max_tokens);
    t->max_tokens = max_tokens, t->L = g->L, t->C = g->C, t->lo = m->lora;
    size_t L1 = (size_t)(t->L ? t->L : 1);
    t->acts = xcalloc(L1, sizeof *t->acts);
    t->views = xcalloc(L1, sizeof *t->views);
    t->host = xmalloc(sizeof(int32_t) * (3 * (size_t)max_tokens + 1));
    t->host_seq = xmalloc(sizeof(int32_t) * (size_t)max_tokens);
    t->written = xcalloc((size_t)(t->lo->table.n ? t->lo->table.n : 1), 1);
    if (alloc_buffers(d, t, g, chunk_rows, err)) {
        gpu_model_lora_free(d, t);
        return -1;
    }
    for (int l = 0; l < t->L; l++)
        for (int mod = 0; mod < LORA_N_MODULES; mod++)
            t->views[l].has[mod] = gpu_lora_view(&t->views[l].mod[mod], t->lo, &m->cfg, l, (LoraModule)mod,
                                                 g->lora_params, t->grads);
    return 0;
}

void gpu_model_lora_free(GpuDevice *d, GpuModelLora *t) {
    CUdeviceptr *all[] = {&t->x, &t->dx, &t->batch, &t->keys, &t->seq, &t->grads};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i]) gpu_free(d, *all[i]);
        *all[i] = 0;
    }
    for (int l = 0; t->acts && l < acts_sets(t); l++) gpu_lora_layer_acts_free(d, &t->acts[l]);
    gpu_layer_train_scratch_free(d, &t->scratch);
    gpu_head_pass_free(d, &t->head);
    free(t->acts), free(t->views), free(t->host), free(t->host_seq), free(t->written);
    memset(t, 0, sizeof *t);
}

/* ---- which tensors this step has written (model/grads.c's rules, on the host) ---- */

void gpu_model_lora_begin(GpuModelLora *t) { memset(t->written, 0, (size_t)t->lo->table.n); }

int gpu_model_lora_settle(GpuDevice *d, GpuModelLora *t, GrpoErr *err) {
    for (int e = 0; e < t->lo->table.n; e++) {
        const ParamEntry *pe = &t->lo->table.entries[e];
        if (t->written[e]) continue;
        if (gpu_zero(d, t->grads + 4 * pe->offset, 4 * pe->numel, err)) return -1;
        t->written[e] = 1;
    }
    return 0;
}

/* grad_state_take for layer l's adapters, module by module: write[mod] 1 when this
 * step has not written its A and B (the backward writes over them), 0 when it has;
 * both marked written. A and B always go together (lora_linear_backward takes both). */
static void take_layer(GpuModelLora *t, int l, int write[LORA_N_MODULES]) {
    for (int mod = 0; mod < LORA_N_MODULES; mod++) {
        int e = t->lo->entry[l][mod];
        write[mod] = 0;
        if (e < 0) continue;
        CHECK(t->written[e] == t->written[e + 1]);
        write[mod] = !t->written[e];
        t->written[e] = t->written[e + 1] = 1;
    }
}

/* ---- the passes ---- */

static GpuLayerBatch layer_batch(const GpuModel *g, const GpuModelLora *t) {
    size_t N = (size_t)t->N;
    return (GpuLayerBatch){t->B, t->N, t->batch + 4 * 2 * N, t->batch + 4 * N, g->inv_freq};
}

static CUdeviceptr x_at(const GpuModelLora *t, int l) { return t->x + 4 * (size_t)l * t->N * t->C; }

/* Layer l's saved tensors: its own, or the one shared set when the pass recomputes in
 * full (selective: its own gate/up, the shared rest). */
static GpuLoraLayerActs *acts_of(GpuModelLora *t, int l) { return &t->acts[t->ckpt == CKPT_FULL ? 0 : l]; }

/* Before layer l's backward with recomputation: its forward again from its kept input
 * x_l into the shared set, the dropout masks drawn from p's keys again (the forward's
 * bits). The last layer's set is still there from the forward. Full: x_{l+1} is
 * rewritten with the bits it holds, and no later step reads it (layer l+1's backward
 * is done); selective: all but the base's gate/up and down products, gate/up kept. */
static int recompute_layer(GpuDevice *d, const GpuModel *g, GpuModelLora *t, const GpuLoraPass *p,
                           const GpuLayerBatch *lb, int l, GrpoErr *err) {
    if (t->ckpt == CKPT_NONE || l == g->L - 1) return 0;
    if (t->ckpt == CKPT_SELECTIVE)
        return gpu_lora_layer_forward_kept(d, &g->layers[l], &t->views[l], p, acts_of(t, l), &t->scratch, lb,
                                           x_at(t, l), err);
    return gpu_lora_layer_forward(d, &g->layers[l], &t->views[l], p, acts_of(t, l), &t->scratch, lb, x_at(t, l + 1),
                                  x_at(t, l), err);
}

/* The sequences' keys and each row's sequence onto the device (draw_mask's inputs);
 * t->dropout says whether this forward draws masks. */
static int upload_keys(GpuDevice *d, GpuModelLora *t, const uint64_t *keys, const int *starts, int B, GrpoErr *err) {
    t->dropout = keys && t->lo->spec.dropout > 0;
    if (!t->dropout) return 0;
    for (int b = 0; b < B; b++)
        for (int n = starts[b]; n < starts[b + 1]; n++) t->host_seq[n] = b;
    return gpu_put(d, t->keys, keys, sizeof(uint64_t) * (size_t)B, err) ||
                   gpu_put(d, t->seq, t->host_seq, sizeof(int32_t) * (size_t)starts[B], err)
               ? -1
               : 0;
}

int gpu_model_lora_forward(GpuDevice *d, const GpuModel *g, GpuModelLora *t, const int32_t *ids, const int *starts,
                           int B, const int32_t *targets, const uint64_t *keys, float inv_temp, float *logprob,
                           float *entropy, GrpoErr *err) {
    t->N = 0;
    int N = gpu_model_upload_batch(d, g, t->batch, t->host, t->max_tokens, ids, starts, B, "GPU LoRA training", err);
    if (N < 0 || upload_keys(d, t, keys, starts, B, err)) return -1;
    t->N = N, t->B = B;
    GpuLayerBatch lb = layer_batch(g, t);
    int rc = gpu_embedding_forward_bf16(d, x_at(t, 0), t->batch, g->embed, N, g->C, err);
    for (int l = 0; l < g->L && !rc; l++) {
        GpuLoraPass p = {t->lo, l, t->dropout ? t->keys : 0, t->dropout ? t->seq : 0};
        rc = gpu_lora_layer_forward(d, &g->layers[l], &t->views[l], &p, acts_of(t, l), &t->scratch, &lb,
                                    x_at(t, l + 1), x_at(t, l), err);
    }
    if (rc || gpu_head_pass_forward(d, g, &t->head, logprob, entropy, x_at(t, g->L), targets, N, inv_temp, err)) {
        t->N = 0;
        return -1;
    }
    return 0;
}

int gpu_model_lora_backward(GpuDevice *d, const GpuModel *g, GpuModelLora *t, const float *dlogprob,
                            const float *dentropy, GrpoErr *err) {
    int N = t->N;
    if (N < 1) return err_set(err, "GPU LoRA training: a backward without a forward before it");
    /* the head and the final norm are frozen (no GpuHeadGrads): their input gradients only */
    if (gpu_head_pass_backward(d, g, &t->head, t->dx, NULL, dlogprob, dentropy, x_at(t, g->L), N, err)) return -1;
    GpuLayerBatch lb = layer_batch(g, t);
    for (int l = g->L - 1; l >= 0; l--) {
        int write[LORA_N_MODULES];
        take_layer(t, l, write);
        GpuLoraPass p = {t->lo, l, t->dropout ? t->keys : 0, t->dropout ? t->seq : 0};
        if (recompute_layer(d, g, t, &p, &lb, l, err) ||
            gpu_lora_layer_backward(d, &g->layers[l], &t->views[l], &p, acts_of(t, l), &t->scratch, &lb, write, t->dx,
                                    x_at(t, l), err))
            return -1;
    }
    return 0; /* the embedding is frozen: dx stops here */
}

int gpu_model_lora_batch_forward(GpuDevice *d, const GpuModel *g, GpuModelLora *t, PaddedBatch *pb,
                                 const uint64_t *keys, float inv_temp, float *logp, float *entropy, GrpoErr *err) {
    if (!pb->packed) return err_set(err, "GPU LoRA training: the batch is right-padded (expected one packed)");
    float *lp = pb->full, *ent = entropy ? pb->full2 : NULL;
    if (gpu_model_lora_forward(d, g, t, pb->ids, pb->start, pb->S, pb->targets, keys, inv_temp, lp, ent, err))
        return -1;
    padded_batch_gather(pb, lp, logp);
    if (entropy) padded_batch_gather(pb, ent, entropy);
    return 0;
}

int gpu_model_lora_batch_backward(GpuDevice *d, const GpuModel *g, GpuModelLora *t, PaddedBatch *pb,
                                  const float *dlogp, const float *dentropy, GrpoErr *err) {
    if (!pb->packed) return err_set(err, "GPU LoRA training: the batch is right-padded (expected one packed)");
    padded_batch_scatter(pb, dlogp, pb->full);
    if (dentropy) padded_batch_scatter(pb, dentropy, pb->full2); /* free again: the forward's entropies were gathered */
    return gpu_model_lora_backward(d, g, t, pb->full, dentropy ? pb->full2 : NULL, err);
}
