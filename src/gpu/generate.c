/* gpu/generate.c — see generate.h: the embedding, gpu/decode.h's layer step for
 * every layer on one residual buffer, the final norm and the head's row-wise
 * product, launched in order on the device's stream; the slots' bookkeeping on the
 * host, checked before anything is launched, uploaded with the step's rows in one
 * copy. It adds no kernel. */
#include "gpu/generate.h"

#include <stdlib.h>
#include <string.h>

int gpu_gen_create(GpuDevice *d, GpuGen *gen, const GpuModel *g, int n_slots, int cap, int max_rows, GrpoErr *err) {
    memset(gen, 0, sizeof *gen);
    if (n_slots < 1 || cap < 1 || max_rows < 1 || g->L < 1)
        return err_set(err, "GPU generation: %d slots of %d positions, steps of %d rows, %d layers (expected each "
                       ">= 1)", n_slots, cap, max_rows, g->L);
    gen->g = g, gen->n_slots = n_slots, gen->cap = cap, gen->max_rows = max_rows;
    gen->max_picks = n_slots > max_rows ? n_slots : max_rows;
    size_t R = (size_t)max_rows, C = (size_t)g->C, V = (size_t)g->V, P = (size_t)gen->max_picks;
    gen->caches = xcalloc((size_t)g->L, sizeof *gen->caches);
    gen->host = xcalloc(4 * R + 2 * (size_t)n_slots, sizeof(int32_t)); /* copied whole: no unset bytes */
    gen->host_from = xmalloc(sizeof(int32_t) * P);
    gen->len = xcalloc((size_t)n_slots, sizeof(int)), gen->parent = xmalloc(sizeof(int) * n_slots);
    gen->next_len = xcalloc((size_t)n_slots, sizeof(int));
    gen->parent_len = xcalloc((size_t)n_slots, sizeof(int));
    for (int s = 0; s < n_slots; s++) gen->parent[s] = -1;
    int rc = 0;
    for (int l = 0; l < g->L && !rc; l++)
        rc = gpu_layer_cache_create(d, &gen->caches[l], &g->layers[l], n_slots, cap, err);
    /* every layer has the first one's shapes: one scratch serves the stack */
    if (rc || gpu_decode_scratch_create(d, &gen->scratch, &g->layers[0], max_rows, err) ||
        gpu_alloc(d, &gen->x, 4 * R * C, err) || gpu_alloc(d, &gen->hf, 4 * R * C, err) ||
        gpu_alloc(d, &gen->rstd, 4 * R, err) || gpu_alloc(d, &gen->logits, 4 * R * V, err) ||
        gpu_alloc(d, &gen->rows, sizeof(int32_t) * (4 * R + 2 * (size_t)n_slots), err) ||
        gpu_alloc(d, &gen->picked, 4 * P * V, err) || gpu_alloc(d, &gen->from, 4 * P, err) ||
        gpu_alloc(d, &gen->tok, 4 * P, err) || gpu_alloc(d, &gen->logp, 4 * P, err) ||
        gpu_alloc(d, &gen->sample_scratch, sizeof(double) * P * V, err) ||
        (g->lora && gpu_gen_set_lora(d, gen, g->lora, err))) {
        gpu_gen_free(d, gen);
        return -1;
    }
    return 0;
}

void gpu_gen_free(GpuDevice *d, GpuGen *gen) {
    for (int l = 0; gen->caches && l < gen->g->L; l++) gpu_layer_cache_free(d, &gen->caches[l]);
    gpu_decode_scratch_free(d, &gen->scratch);
    CUdeviceptr all[] = {gen->x,    gen->hf,   gen->rstd, gen->logits, gen->rows,
                         gen->picked, gen->from, gen->tok, gen->logp, gen->sample_scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu_free(d, all[i]);
    free(gen->caches), free(gen->host), free(gen->host_from), free(gen->len), free(gen->parent), free(gen->parent_len);
    free(gen->next_len);
    memset(gen, 0, sizeof *gen);
}

int gpu_gen_set_lora(GpuDevice *d, GpuGen *gen, const GpuLayerLora *lora, GrpoErr *err) {
    int r = gpu_decode_lora_rank(lora, gen->g->L);
    if (r && gpu_decode_scratch_lora(d, &gen->scratch, r, err)) return -1;
    gen->lora = r ? lora : NULL; /* views adapting nothing: the base alone */
    return 0;
}

int gpu_gen_reset(GpuGen *gen, int slot, GrpoErr *err) {
    if (slot < 0 || slot >= gen->n_slots)
        return err_set(err, "GPU generation: slot %d reset (expected 0 .. %d)", slot, gen->n_slots - 1);
    gen->len[slot] = 0, gen->parent[slot] = -1, gen->parent_len[slot] = 0;
    return 0;
}

int gpu_gen_share_prefix(GpuGen *gen, int slot, int parent, GrpoErr *err) {
    if (slot < 0 || slot >= gen->n_slots || parent < 0 || parent >= gen->n_slots || slot == parent)
        return err_set(err, "GPU generation: slot %d to continue slot %d (expected two different slots 0 .. %d)", slot,
                       parent, gen->n_slots - 1);
    if (gen->parent[parent] >= 0) /* one level of sharing, as KVCache's */
        return err_set(err, "GPU generation: slot %d to continue slot %d, which continues slot %d itself (expected a "
                       "parent without a parent)", slot, parent, gen->parent[parent]);
    gen->len[slot] = 0, gen->parent[slot] = parent, gen->parent_len[slot] = gen->len[parent];
    return 0;
}

/* The step's rows checked and laid out on the host as model_decode numbers them, the
 * slots' lengths after the step into gen->next_len (gen->len itself grows only once
 * the step has run: a refused or failed step changes no bookkeeping). */
static int layout_rows(GpuGen *gen, int n, const int *slots, const int32_t *tokens, GrpoErr *err) {
    int R = gen->max_rows, S = gen->n_slots;
    if (n < 1 || n > R) return err_set(err, "GPU generation: a step of %d rows (expected 1 .. %d)", n, R);
    int32_t *tok = gen->host, *sl = tok + R, *own = sl + R, *pos = own + R, *par = pos + R, *plen = par + S;
    for (int r = 0; r < n; r++) {
        if (slots[r] < 0 || slots[r] >= S)
            return err_set(err, "GPU generation: row %d's slot %d (expected 0 .. %d)", r, slots[r], S - 1);
        if (tokens[r] < 0 || tokens[r] >= gen->g->V)
            return err_set(err, "GPU generation: row %d's token id %d is outside the vocabulary of %d", r, tokens[r],
                           gen->g->V);
    }
    int *next = gen->next_len;
    memcpy(next, gen->len, sizeof(int) * (size_t)S);
    for (int r = 0; r < n; r++) own[r] = next[slots[r]]++; /* a prompt's rows: one slot several times */
    for (int r = 0; r < n; r++)
        if (next[slots[r]] > gen->cap) {
            int bad = slots[r];
            return err_set(err, "GPU generation: slot %d is full (%d positions: the step adds %d to its %d)", bad,
                           gen->cap, next[bad] - gen->len[bad], gen->len[bad]);
        }
    for (int r = 0; r < n; r++) tok[r] = tokens[r], sl[r] = slots[r], pos[r] = gen->parent_len[slots[r]] + own[r];
    for (int s = 0; s < S; s++) par[s] = gen->parent[s], plen[s] = gen->parent_len[s];
    return 0;
}

/* The step: its rows uploaded (one copy of the whole layout, its unused rows too:
 * fewer copies beat fewer bytes here), then the launches up to the logits. */
static int run_step(GpuDevice *d, GpuGen *gen, int n, GrpoErr *err) {
    const GpuModel *g = gen->g;
    size_t R4 = sizeof(int32_t) * (size_t)gen->max_rows;
    if (gpu_put(d, gen->rows, gen->host, sizeof(int32_t) * (4 * (size_t)gen->max_rows + 2 * (size_t)gen->n_slots),
                err))
        return -1;
    CUdeviceptr ids = gen->rows, par = gen->rows + 4 * R4;
    GpuDecodeRows rows = {n, ids + R4, ids + 2 * R4, ids + 3 * R4, par, par + sizeof(int32_t) * gen->n_slots,
                          g->inv_freq};
    if (g->embed_bf16 ? gpu_embedding_forward_bf16(d, gen->x, ids, g->embed, n, g->C, err)
                      : gpu_embedding_forward(d, gen->x, ids, g->embed, n, g->C, err))
        return -1;
    for (int l = 0; l < g->L; l++)
        if (gpu_decode_layer_lora(d, &g->layers[l], gen->lora ? &gen->lora[l] : NULL, &gen->caches[l], &gen->scratch,
                                  &rows, gen->x, err))
            return -1;
    if (gpu_rmsnorm_forward(d, gen->hf, gen->rstd, gen->x, g->norm, n, g->C, g->C, g->C, g->eps, err)) return -1;
    return gpu_matmul_rowwise_bf16(d, gen->logits, gen->hf, g->head.w, 0, n, g->C, g->V, err);
}

int gpu_gen_step(GpuDevice *d, GpuGen *gen, int n, const int *slots, const int32_t *tokens, GrpoErr *err) {
    if (layout_rows(gen, n, slots, tokens, err)) return -1; /* refused: nothing changed */
    gen->last_n = 0; /* until this step's logits exist: a failed launch may have written part of them */
    if (run_step(d, gen, n, err)) return -1;             /* the slots' lengths unchanged */
    memcpy(gen->len, gen->next_len, sizeof(int) * (size_t)gen->n_slots); /* the slots grow: the step ran */
    gen->last_n = n;
    return 0;
}

int gpu_gen_sample(GpuDevice *d, GpuGen *gen, int n, const int *from, const GpuSampleRows *rows, const SamplerOpts *o,
                   int32_t *tok, float *logp, GrpoErr *err) {
    if (n < 1 || n > gen->max_picks)
        return err_set(err, "GPU generation: sampling %d rows (expected 1 .. %d)", n, gen->max_picks);
    for (int r = 0; r < n; r++) {
        int at = from ? from[r] : r;
        if (at < 0 || at >= gen->last_n)
            return err_set(err, "GPU generation: pick %d from row %d of the last step's logits (expected 0 .. %d)", r,
                           at, gen->last_n - 1);
        gen->host_from[r] = at;
    }
    /* the picked rows side by side: the sampler reads [n, V] */
    if (gpu_put(d, gen->from, gen->host_from, sizeof(int32_t) * (size_t)n, err) ||
        gpu_rows_gather(d, gen->picked, gen->logits, gen->from, n, gen->g->V, err) ||
        gpu_sampler_sample(d, gen->tok, gen->logp, gen->picked, gen->sample_scratch, rows, n, gen->g->V, o, 0, err) ||
        gpu_sync(d, err) || gpu_get(d, tok, gen->tok, sizeof(int32_t) * (size_t)n, err))
        return -1;
    return logp ? gpu_get(d, logp, gen->logp, sizeof(float) * (size_t)n, err) : 0;
}
