/* gen/device.c — the generator's steps on the GPU (device.h): the same loop as the
 * host's (gen/generate.c: chunks, eos, turns, streams), each step here a call into
 * gpu/generate.h on the device's KV caches. What stays on the device: the caches, every
 * step's logits (gathered into GpuGen's pick buffer, `picked`: row r is what row r of
 * the next sample draws from, row `chunk` the group's shared first logits), the
 * sampler's scratch. What comes back: each sampled token and its log-prob. What goes
 * up: a step's rows, the rows' streams and draw indices, and (with a repetition
 * penalty) the rows' contexts.
 *
 * The draws are the host's: completion i's uniform for its k-th token is words 2k,
 * 2k + 1 of Philox stream rng_mix(stream_id, i) of the seed (rng_uniform_f64 on the
 * host's Rng), and every decoding kernel is batch-invariant, so completions do not
 * depend on chunking or on which rows share a step, as on the host. LoRA adapters
 * (the GpuModel's views) decode beside the base (gpu/generate.h). Not here: the
 * model's upload (the caller's GpuModel). */
#include "gen/device.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "gpu/generate.h"

struct GenGpu {
    GpuDevice *d;
    GpuGen gen;
    int first_row;      /* picked's row holding the group's first logits (the chunk size) */
    int stride;         /* ids a row's context holds: max_prompt + max_completion_length */
    CUdeviceptr rows;   /* uint64 seed, stream, draw [3 chunk] | int32 ctx_first, ctx_len [2 chunk] */
    CUdeviceptr ctx;    /* int32 [chunk, stride]: the rows' contexts (repetition penalty) */
    void *host_rows;    /* rows' layout made on the host */
    int32_t *idx;       /* [max(max_rows, chunk)]: rows gathered by a step */
};

/* The device bytes gen_gpu_create allocates (gpu/generate.c's GpuGen, gpu/decode.c's
 * caches and scratch, and this file's), in double: a chunk size given explicitly with
 * long slots can pass 64 bits. */
static double device_bytes(const ModelConfig *c, int n_slots, int cap, int R, int chunk, int stride, int lora_r) {
    double C = c->hidden_size, F = c->intermediate_size, V = c->vocab_size, D = c->head_dim;
    double P = n_slots > R ? n_slots : R, QKV = (c->n_heads + 2.0 * c->n_kv_heads) * D, HD = c->n_heads * D;
    double kv = 2.0 * sizeof(float) * c->n_layers * (double)n_slots * cap * c->n_kv_heads * D;
    double scratch = 4.0 * R * (C + 1 + QKV + HD + C + 3 * F);
    double step = 4.0 * R * (2 * C + 1 + V + 4) + 8.0 * n_slots + P * (12.0 * V + 12);
    return kv + scratch + step + (double)chunk * (32 + 4.0 * stride) + 4.0 * R * lora_r;
}

/* The plan against the GPU's free memory, before anything is allocated. */
static int check_device_plan(const Generator *g, GpuDevice *d, int n_slots, int R, int lora_r, GrpoErr *err) {
    const ModelConfig *c = &g->m->cfg;
    size_t free_bytes = 0, total = 0;
    int stride = g->max_prompt + g->opts.max_completion_length;
    double need = device_bytes(c, n_slots, g->cap, R, g->chunk, stride, lora_r), mb = 1048576.0;
    if (d->api.MemGetInfo(&free_bytes, &total) != CUDA_SUCCESS)
        return err_set(err, "GPU generation: the device's free memory cannot be read (cuMemGetInfo)");
    if (need <= (double)free_bytes) return 0;
    double kv = 2.0 * sizeof(float) * c->n_layers * (double)n_slots * g->cap * c->n_kv_heads * c->head_dim;
    return err_set(err, "GPU generation needs %.0f MB of device memory (KV cache %.0f MB: %d layers x %d slots x %d "
                   "tokens; steps and sampling %.0f MB for %d rows) and the GPU has %.0f MB free; lower %s, "
                   "max_prompt_length or max_completion_length", need / mb, kv / mb, c->n_layers, n_slots, g->cap,
                   (need - kv) / mb, R, free_bytes / mb, g->opts.chunk_size > 0 ? "generation_chunk_size" : "kv_cache_mb");
}

int gen_gpu_create(Generator *g, const GenDevice *dv, int n_slots, int max_rows, GrpoErr *err) {
    int lora_r = gpu_decode_lora_rank(dv->model->lora, dv->model->L);
    if (check_device_plan(g, dv->dev, n_slots, max_rows, lora_r, err)) return -1;
    struct GenGpu *G = xcalloc(1, sizeof *G);
    G->d = dv->dev, G->first_row = g->chunk, G->stride = g->max_prompt + g->opts.max_completion_length;
    size_t chunk = (size_t)g->chunk, idx_n = (size_t)(max_rows > g->chunk ? max_rows : g->chunk);
    size_t row_bytes = chunk * (3 * sizeof(uint64_t) + 2 * sizeof(int32_t));
    G->host_rows = xcalloc(1, row_bytes); /* copied whole: no unset bytes */
    G->idx = xmalloc(sizeof(int32_t) * idx_n);
    if (gpu_gen_create(G->d, &G->gen, dv->model, n_slots, g->cap, max_rows, err) ||
        gpu_alloc(G->d, &G->rows, row_bytes, err) ||
        gpu_alloc(G->d, &G->ctx, sizeof(int32_t) * chunk * (size_t)G->stride, err)) {
        g->gpu = G;
        gen_gpu_free(g);
        return -1;
    }
    g->gpu = G;
    g->bytes += (size_t)device_bytes(&g->m->cfg, n_slots, g->cap, max_rows, g->chunk, G->stride, lora_r);
    return 0;
}

void gen_gpu_free(Generator *g) {
    struct GenGpu *G = g->gpu;
    if (!G) return;
    if (G->gen.g) gpu_gen_free(G->d, &G->gen);
    gpu_free(G->d, G->rows), gpu_free(G->d, G->ctx);
    free(G->host_rows), free(G->idx), free(G);
    g->gpu = NULL;
}

/* Rows idx[0 .. m-1] of the last step's logits into pick rows at .. at + m - 1. */
static int keep_rows(struct GenGpu *G, int m, int at, GrpoErr *err) {
    size_t V = (size_t)G->gen.g->V;
    if (m == 0) return 0;
    return gpu_put(G->d, G->gen.from, G->idx, sizeof(int32_t) * (size_t)m, err) ||
           gpu_rows_gather(G->d, G->gen.picked + sizeof(float) * V * (size_t)at, G->gen.logits, G->gen.from, m,
                           (int)V, err);
}

int gen_gpu_decode(Generator *g, int n, const int *slots, const int32_t *tok, const uint8_t *want, int at) {
    struct GenGpu *G = g->gpu;
    int R = G->gen.max_rows;
    if (at == GEN_FIRST) at = G->first_row;
    /* steps of at most max_rows rows (a turn's ids can pass it): the rows of a slot in order, each
     * row's logits its own whatever the split (batch-invariant kernels) */
    for (int r0 = 0; r0 < n; r0 += R) {
        int m = n - r0 < R ? n - r0 : R, kept = 0;
        if (gpu_gen_step(G->d, &G->gen, m, slots + r0, tok + r0, &g->err)) return -1;
        for (int r = 0; r < m; r++)
            if (!want || want[r0 + r]) G->idx[kept++] = r;
        if (keep_rows(G, kept, at, &g->err)) return -1;
        at += kept;
    }
    return 0;
}

int gen_gpu_prefill(Generator *g, int slot, const int32_t *prompt, int n, int at) {
    int slots[n];
    uint8_t want[n];
    for (int t = 0; t < n; t++) slots[t] = slot, want[t] = t == n - 1;
    if (gpu_gen_reset(&g->gpu->gen, slot, &g->err)) return -1;
    return gen_gpu_decode(g, n, slots, prompt, want, at);
}

int gen_gpu_share(Generator *g, int slot, int parent) {
    return gpu_gen_share_prefix(&g->gpu->gen, slot, parent, &g->err);
}

int gen_gpu_first(Generator *g, int at, int n) {
    struct GenGpu *G = g->gpu;
    size_t V = (size_t)G->gen.g->V;
    for (int i = 0; i < n; i++) G->idx[i] = G->first_row;
    /* from picked's first row into its rows at .. at+n-1 (at + n <= chunk = first_row: no row both read and
     * written) */
    CHECK(at >= 0 && at + n <= G->first_row);
    return gpu_put(G->d, G->gen.from, G->idx, sizeof(int32_t) * (size_t)n, &g->err) ||
           gpu_rows_gather(G->d, G->gen.picked + sizeof(float) * V * (size_t)at, G->gen.picked, G->gen.from, n,
                           (int)V, &g->err);
}

int gen_gpu_sample(Generator *g, Live *live, const int *which, int n, int32_t *tok, float *logp) {
    struct GenGpu *G = g->gpu;
    size_t chunk = (size_t)g->chunk;
    uint64_t *seed = G->host_rows, *stream = seed + chunk, *draw = stream + chunk;
    int32_t *ctx_first = (int32_t *)(draw + chunk), *ctx_len = ctx_first + chunk;
    const SamplerOpts *o = &g->opts.sampler;
    int penalty = o->repetition_penalty != 1.0f;
    for (int r = 0; r < n; r++) {
        Live *L = &live[which[r]];
        seed[r] = g->opts.seed, stream[r] = L->stream, draw[r] = L->words;
        ctx_first[r] = which[r] * G->stride;
        ctx_len[r] = penalty ? L->n_ctx : 0; /* the context is read for the penalty alone */
        L->words += 2;                       /* rng_uniform_f64: two words */
    }
    GpuSampleRows rows = {G->rows, G->rows + 8 * chunk, G->rows + 16 * chunk, G->rows + 24 * chunk,
                          G->rows + 28 * chunk, G->ctx};
    /* live[0].ctx is the first row of the host's block of chunk rows of stride ids */
    if (gpu_put(G->d, G->rows, G->host_rows, chunk * (3 * sizeof(uint64_t) + 2 * sizeof(int32_t)), &g->err) ||
        (penalty && gpu_put(G->d, G->ctx, live[0].ctx, sizeof(int32_t) * chunk * (size_t)G->stride, &g->err)) ||
        gpu_sampler_sample(G->d, G->gen.tok, G->gen.logp, G->gen.picked, G->gen.sample_scratch, &rows, n,
                           G->gen.g->V, o, 0, &g->err) ||
        gpu_sync(G->d, &g->err) || gpu_get(G->d, tok, G->gen.tok, sizeof(int32_t) * (size_t)n, &g->err) ||
        gpu_get(G->d, logp, G->gen.logp, sizeof(float) * (size_t)n, &g->err))
        return -1;
    return 0;
}
