/* gen/generate.c — group generation with a shared prompt prefix, in memory-bounded
 * chunks (see generate.h). Not here: the logits processors (gen/sampler.c) or the
 * model's cached forward (model/kvcache.c). */
#include "gen/generate.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/memory.h"
#include "core/rng.h"
#include "gen/device.h"

/* Element j of the concatenation a[na] b[nb]. */
static int32_t eos_at(const int32_t *a, int na, const int32_t *b, int j) {
    return j < na ? a[j] : b[j - na];
}

int gen_opts_set_eos(GenOpts *o, const int32_t *a, int na, const int32_t *b, int nb, GrpoErr *err) {
    int32_t ids[GEN_MAX_EOS];
    int n = 0;   /* distinct ids, counted past the limit for the message */
    for (int i = 0; i < na + nb; i++) {
        int32_t id = eos_at(a, na, b, i);
        int dup = id < 0;
        for (int k = 0; k < i && !dup; k++) dup = eos_at(a, na, b, k) == id;
        if (dup) continue;
        if (n < GEN_MAX_EOS) ids[n] = id;
        n++;
    }
    if (n > GEN_MAX_EOS)
        return err_set(err, "%d distinct eos token ids (model config and tokenizer together); "
                       "generation supports at most %d", n, GEN_MAX_EOS);
    memcpy(o->eos_ids, ids, sizeof(int32_t) * n);
    o->n_eos = n;
    return 0;
}

void completion_free(Completion *c) {
    free(c->ids);
    free(c->logp);
    free(c->mask);
    c->ids = NULL;
    c->logp = NULL;
    c->mask = NULL;
    c->n = 0;
}


/* Rows from .. from + n - 1 of group `group` of a gen_groups call, at rows at .. of a chunk. */
struct GenPiece {
    int group, from, n, at;
};

/* A chunk's rows while decoding, sized once by gen_create for chunk rows, prompts
 * of max_prompt and completions of max_completion_length. */
struct GenRows {
    Live *live;          /* [chunk] */
    int32_t *ctx;        /* [chunk][max_prompt + max_completion_length]: live[i].ctx's memory */
    Completion **out;    /* [chunk] each row's completion (a caller's out[]) */
    int *index, *slot;   /* [chunk] each row's index in its group, its cache slot */
    struct GenPiece *piece; /* [chunk] the groups' parts in the chunk */
    int *which, *slots;  /* [chunk] the rows decoded next and their cache slots */
    int32_t *tok;        /* [chunk] */
    float *lp;           /* [chunk] */
    int *turn_rows, *turn_len; /* [chunk] rows whose turn just ended with appended ids, and the ids' count */
    int *tslots;         /* [max_completion_length + 1] one row's turn decoded alone */
    uint8_t *twant;      /* [max_completion_length + 1] */
};

/* The bytes of gen_rows_create's buffers. */
static size_t gen_rows_bytes(int chunk, int max_prompt, int maxc) {
    return sizeof(struct GenRows) + (size_t)chunk * (sizeof(Live) + sizeof(int32_t) * (max_prompt + maxc)) +
           (size_t)chunk * (sizeof(Completion *) + sizeof(struct GenPiece) + 6 * sizeof(int) + sizeof(int32_t) +
                            sizeof(float)) +
           (size_t)(maxc + 1) * (sizeof(int) + 1);
}

static struct GenRows *gen_rows_create(int chunk, int max_prompt, int maxc) {
    struct GenRows *r = xcalloc(1, sizeof *r);
    r->live = xcalloc(chunk, sizeof(Live));
    r->ctx = xmalloc(sizeof(int32_t) * chunk * (size_t)(max_prompt + maxc));
    for (int i = 0; i < chunk; i++) r->live[i].ctx = r->ctx + (size_t)i * (max_prompt + maxc);
    r->out = xcalloc(chunk, sizeof(Completion *));
    r->index = xmalloc(sizeof(int) * chunk), r->slot = xmalloc(sizeof(int) * chunk);
    r->piece = xmalloc(sizeof(struct GenPiece) * chunk);
    r->which = xmalloc(sizeof(int) * chunk), r->slots = xmalloc(sizeof(int) * chunk);
    r->tok = xmalloc(sizeof(int32_t) * chunk);
    r->lp = xmalloc(sizeof(float) * chunk);
    r->turn_rows = xmalloc(sizeof(int) * chunk), r->turn_len = xmalloc(sizeof(int) * chunk);
    r->tslots = xmalloc(sizeof(int) * (maxc + 1));
    r->twant = xmalloc((size_t)maxc + 1);
    return r;
}

static void gen_rows_free(struct GenRows *r) {
    if (!r) return;
    free(r->live), free(r->ctx), free(r->out), free(r->index), free(r->slot), free(r->piece);
    free(r->which), free(r->slots), free(r->tok), free(r->lp);
    free(r->turn_rows), free(r->turn_len), free(r->tslots), free(r->twant);
    free(r);
}

/* What gen_create is about to allocate, against the memory available, before
 * allocating it. In double: an explicit chunk size with a long cache can pass
 * 64 bits. The sampler scratch is 21 bytes per vocabulary entry and thread. */
static int check_plan(const Model *m, const GenOpts *o, int slots, int cap, int rows, int keys, int n_threads,
                      GrpoErr *err) {
    const ModelConfig *c = &m->cfg;
    double mb = 1048576.0, kv = 2.0 * sizeof(float) * c->n_layers * (double)slots * cap * c->n_kv_heads * c->head_dim;
    double logits = sizeof(float) * ((double)rows + 1) * c->vocab_size + 21.0 * n_threads * c->vocab_size;
    double need = kv + (double)decode_state_bytes(c, rows, keys) + logits, avail = (double)mem_available_bytes();
    if (need <= avail && need < 0x1p62) return 0;
    return err_set(err, "generation needs %.0f MB (KV cache %.0f MB: %d layers x %d slots x %d tokens; decoding and "
                   "logits %.0f MB for %d rows) and %.0f MB is available; lower %s, max_prompt_length or "
                   "max_completion_length", need / mb, kv / mb, c->n_layers, slots, cap, (need - kv) / mb, rows,
                   avail / mb, o->chunk_size > 0 ? "generation_chunk_size" : "kv_cache_mb");
}

int gen_create(Generator *g, Model *m, const GenOpts *o, int max_prompt, GrpoErr *err) {
    memset(g, 0, sizeof *g);
    if (max_prompt < 1 || o->max_completion_length < 1)
        return err_set(err, "max_prompt_length and max_completion_length must be >= 1");
    g->m = m;
    g->opts = *o;
    g->max_prompt = max_prompt;
    /* shared: slot 0 holds the prompt, slots 1..chunk the completions; unshared:
     * each slot holds prompt + completion */
    g->cap = o->share_prefix ? (max_prompt > o->max_completion_length ? max_prompt : o->max_completion_length)
                             : max_prompt + o->max_completion_length;
    size_t per_slot = kv_cache_bytes(&m->cfg, 1, g->cap);
    int extra = o->share_prefix ? 1 : 0;
    long fit = (long)(o->kv_cache_bytes / per_slot) - extra;
    if (o->chunk_size > 0) {
        g->chunk = o->chunk_size;
    } else {
        if (fit < 1)
            return err_set(err, "the generation KV cache limit (%zu MB) holds no completion: one needs %.1f MB "
                           "(%d layers x %d tokens); raise the limit or lower max_completion_length / max_prompt_length",
                           o->kv_cache_bytes >> 20, (double)per_slot * (1 + extra) / 1048576.0,
                           m->cfg.n_layers, g->cap);
        g->chunk = fit > 256 ? 256 : (int)fit;
    }
    int rows = g->chunk > max_prompt ? g->chunk : max_prompt, V = m->cfg.vocab_size;
    if (o->device) {
        g->rows = gen_rows_create(g->chunk, max_prompt, o->max_completion_length);
        g->bytes = gen_rows_bytes(g->chunk, max_prompt, o->max_completion_length);
        if (!gen_gpu_create(g, o->device, g->chunk + extra, rows, err)) return 0;
        gen_rows_free(g->rows);
        memset(g, 0, sizeof *g);
        return -1;
    }
    int keys = max_prompt + o->max_completion_length + 1, n_threads = omp_get_max_threads();
    if (check_plan(m, o, g->chunk + extra, g->cap, rows, keys, n_threads, err)) return -1;
    kv_cache_create(&g->kv, &m->cfg, g->chunk + extra, g->cap);
    decode_state_create(&g->ds, &m->cfg, rows, keys);
    g->n_scratch = n_threads;
    g->scratch = xmalloc(sizeof(SamplerScratch) * g->n_scratch);
    for (int i = 0; i < g->n_scratch; i++) sampler_scratch_create(&g->scratch[i], V);
    g->logits = xaligned(sizeof(float) * (size_t)rows * V);
    g->first = xaligned(sizeof(float) * V);
    g->rows = gen_rows_create(g->chunk, max_prompt, o->max_completion_length);
    g->bytes = kv_cache_bytes(&m->cfg, g->chunk + extra, g->cap) +
               decode_state_bytes(&m->cfg, rows, keys) +
               sizeof(float) * ((size_t)rows + 1) * V + (size_t)g->n_scratch * V * 21 +
               gen_rows_bytes(g->chunk, max_prompt, o->max_completion_length);
    return 0;
}

void gen_free(Generator *g) {
    gen_gpu_free(g);
    kv_cache_free(&g->kv);
    decode_state_free(&g->ds);
    for (int i = 0; i < g->n_scratch; i++) sampler_scratch_free(&g->scratch[i]);
    free(g->scratch);
    free(g->logits);
    free(g->first);
    gen_rows_free(g->rows);
    memset(g, 0, sizeof *g);
}

void gen_set_turns(Generator *g, const GenTurns *t) {
    g->turns = t ? *t : (GenTurns){0};
    if (!t) g->overlap = (GenOverlap){0};
    int need = g->opts.max_completion_length + 1; /* a turn's ids after its eos, in one call */
    if (t && !g->gpu && g->ds.max_rows < need) { /* the device splits a turn's ids into steps instead */
        int keys = g->ds.max_keys, old = g->ds.max_rows;
        decode_state_free(&g->ds);
        decode_state_create(&g->ds, &g->m->cfg, need, keys);
        g->bytes += decode_state_bytes(&g->m->cfg, need, keys) - decode_state_bytes(&g->m->cfg, old, keys);
    }
}

void gen_set_overlap(Generator *g, const GenOverlap *ov) {
    CHECK(!ov || (ov->turn_begin && ov->turn_wait && g->turns.turn_end));
    g->overlap = ov ? *ov : (GenOverlap){0};
}

static int is_eos(const GenOpts *o, int32_t t) {
    for (int i = 0; i < o->n_eos; i++)
        if (o->eos_ids[i] == t) return 1;
    return 0;
}

/* Prefills prompt into slot, writing its last logits to out. */
static void prefill(Generator *g, int slot, const int32_t *prompt, int n, float *out) {
    int slots[n];
    uint8_t want[n];
    for (int t = 0; t < n; t++) slots[t] = slot, want[t] = t == n - 1;
    kv_cache_reset(&g->kv, slot);
    model_decode(g->m, &g->kv, &g->ds, n, slots, prompt, want, out);
}

static void sample_rows(Generator *g, Live *live, const int *which, const float *logits, int n,
                        int32_t *tok, float *logp) {
    int V = g->m->cfg.vocab_size;
    /* num_threads: scratch exists for the n_scratch threads of gen_create only */
#pragma omp parallel for schedule(dynamic, 1) num_threads(g->n_scratch)
    for (int r = 0; r < n; r++) {
        Live *L = &live[which[r]];
        int tid = omp_get_thread_num();
        CHECK(tid < g->n_scratch);
        double u = rng_uniform_f64(&L->rng);
        tok[r] = sampler_sample_logp(logits + (size_t)r * V, V, &g->opts.sampler, L->ctx, L->n_ctx, u,
                                     &g->scratch[tid], &logp[r]);
    }
}

/* The loop's steps, each on the host Model or on the device (gen/device.c: -1 with
 * g->err set). The logits they leave are "pick rows": row r is what the next
 * step_sample draws row r's token from. */

/* Prompt prefilled into slot; its last logits into pick row at (GEN_FIRST: the group's
 * shared first logits, which step_first hands to the chunk's rows). */
static int step_prefill(Generator *g, int slot, const int32_t *prompt, int n, int at) {
    if (g->gpu) return gen_gpu_prefill(g, slot, prompt, n, at);
    prefill(g, slot, prompt, n, at == GEN_FIRST ? g->first : g->logits + (size_t)at * g->m->cfg.vocab_size);
    return 0;
}

/* Slot emptied and continuing parent's prompt (one level: kv_cache_share_prefix). */
static int step_share(Generator *g, int slot, int parent) {
    if (g->gpu) return gen_gpu_share(g, slot, parent);
    kv_cache_share_prefix(&g->kv, slot, parent);
    return 0;
}

/* The last prefilled prompt's logits (GEN_FIRST) into pick rows at .. at + n - 1. */
static int step_first(Generator *g, int at, int n) {
    if (g->gpu) return gen_gpu_first(g, at, n);
    size_t V = (size_t)g->m->cfg.vocab_size;
    for (int i = 0; i < n; i++) memcpy(g->logits + (at + i) * V, g->first, sizeof(float) * V);
    return 0;
}

/* model_decode of n rows; the logits of the rows with want[r] (NULL: every row)
 * into pick rows at, at + 1, ... */
static int step_decode(Generator *g, int n, const int *slots, const int32_t *tok, const uint8_t *want, int at) {
    if (g->gpu) return gen_gpu_decode(g, n, slots, tok, want, at);
    model_decode(g->m, &g->kv, &g->ds, n, slots, tok, want, g->logits + (size_t)at * g->m->cfg.vocab_size);
    return 0;
}

/* Pick rows 0 .. n-1 sampled for completions which[r]: one uniform each from its
 * own stream, its context for the repetition penalty. */
static int step_sample(Generator *g, Live *live, const int *which, int n, int32_t *tok, float *logp) {
    if (g->gpu) return gen_gpu_sample(g, live, which, n, tok, logp);
    sample_rows(g, live, which, g->logits, n, tok, logp);
    return 0;
}

/* Appends a turn's k ids (add: turn_end's answer) to completion c, or ends it:
 * k <= 0, or ids that would pass maxc (TRL's: the completion ends at its eos).
 * 1 when the row goes on, its eos and the ids to be decoded. */
static int turn_append(Completion *c, Live *L, const int32_t *add, int k, int maxc) {
    if (k <= 0 || c->n + k > maxc) {
        c->stopped = 1, L->done = 1;
        return 0;
    }
    /* the turn's ids go in after the eos, decoded on their own */
    memcpy(c->ids + c->n, add, sizeof(int32_t) * k);
    memset(c->mask + c->n, 0, k);
    /* a tool's ids were not sampled: no sampling log-prob (masked out of the loss) */
    for (int t = 0; t < k; t++) c->logp[c->n + t] = 0.0f;
    memcpy(L->ctx + L->n_ctx, add, sizeof(int32_t) * k);
    c->n += k, L->n_ctx += k, c->n_turns++;
    if (c->n < maxc) return 1;
    L->done = 1;
    return 0;
}

/* The next free cache slot of a chunk: slots are handed out in order, skipping the
 * parent slot the chunk keeps from the one before (reuse; -1: none). */
static int take_slot(int *next, int reuse) {
    if (*next == reuse) (*next)++;
    return (*next)++;
}

/* Sets out a chunk of pieces R->piece[0 .. np-1] of groups gr[] (rows 0 .. rows-1):
 * each row's completion empty on its buffers, its random stream and context (its
 * prompt), its cache slot holding the prompt, and its pick row the prompt's last
 * logits. With the shared prefix each piece's prompt is prefilled into a parent slot
 * of its own, except the first piece's where it continues the group of the last
 * piece before (*keep_group), whose parent slot (*keep_slot) still holds it and whose
 * logits are still GEN_FIRST's; both are updated for the next chunk. */
static int chunk_begin(Generator *g, const GenGroup *gr, int np, int *keep_group, int *keep_slot) {
    const GenOpts *o = &g->opts;
    struct GenRows *R = g->rows;
    int share = o->share_prefix, next = 0, parent = -1;
    int reuse = share && R->piece[0].group == *keep_group ? *keep_slot : -1;
    for (int j = 0; j < np; j++) {
        const struct GenPiece *pc = &R->piece[j];
        const GenGroup *q = &gr[pc->group];
        if (share) {
            int kept = j == 0 && reuse >= 0;
            parent = kept ? reuse : take_slot(&next, reuse);
            if ((!kept && step_prefill(g, parent, q->prompt, q->n_prompt, GEN_FIRST)) || step_first(g, pc->at, pc->n))
                return -1;
        }
        for (int k = 0; k < pc->n; k++) {
            int i = pc->at + k, slot = take_slot(&next, reuse);
            CHECK(slot < g->chunk + share);
            Live *L = &R->live[i];
            R->index[i] = q->first + pc->from + k;
            R->slot[i] = slot;
            L->stream = rng_mix(q->stream_id, (uint64_t)R->index[i]);
            L->words = 0;
            rng_init(&L->rng, o->seed, L->stream);
            memcpy(L->ctx, q->prompt, sizeof(int32_t) * q->n_prompt);
            L->n_ctx = q->n_prompt;
            L->done = 0;
            Completion *c = R->out[i] = &q->out[pc->from + k];
            CHECK(c->ids && c->logp && (c->mask || !g->turns.turn_end));
            if (!g->turns.turn_end) c->mask = NULL; /* one turn: no tool mask */
            c->n = 0;
            c->n_turns = 0;
            c->stopped = 0;
            if (share ? step_share(g, slot, parent) : step_prefill(g, slot, q->prompt, q->n_prompt, i)) return -1;
        }
    }
    *keep_group = R->piece[np - 1].group, *keep_slot = parent;
    return 0;
}

long gen_group(Generator *g, const int32_t *prompt, int n_prompt, int G, uint64_t stream_id,
               Completion *out) {
    int maxc = g->opts.max_completion_length;
    for (int i = 0; i < G; i++)
        out[i] = (Completion){.ids = xmalloc(sizeof(int32_t) * maxc), .logp = xmalloc(sizeof(float) * maxc),
                              .mask = g->turns.turn_end ? xmalloc(maxc) : NULL};
    long n = gen_group_part(g, prompt, n_prompt, 0, G, stream_id, out);
    for (int i = 0; n < 0 && i < G; i++) completion_free(&out[i]);
    return n;
}

/* One chunk's decoding, its nc rows set out by chunk_begin, until each stops. Adds
 * the tokens sampled to *generated. 0; 1 when a turn failed (the call's groups are
 * dropped); -1 when the device failed (g->err). */
static int chunk_decode(Generator *g, int nc, long *generated) {
    const GenOpts *o = &g->opts;
    int maxc = o->max_completion_length;
    struct GenRows *R = g->rows;
    Live *live = R->live;
    int *which = R->which, *slots = R->slots, *turn_rows = R->turn_rows, *turn_len = R->turn_len, *tslots = R->tslots;
    int32_t *tok = R->tok;
    float *lp = R->lp;
    uint8_t *twant = R->twant;
    for (int i = 0; i < nc; i++) which[i] = i; /* first tokens from the prompt's logits */
    /* n_wait: rows whose turn is with turn_begin, waiting aside (overlapped turns) */
    int step_rows = nc, failed = 0, n_wait = 0, overlap = g->overlap.turn_begin != NULL, dev_failed = 0;
    while (step_rows > 0 || n_wait > 0) {
        if (step_rows > 0 && step_sample(g, live, which, step_rows, tok, lp)) dev_failed = failed = 1, step_rows = 0;
        int next = 0, n_turn = 0;
        for (int r = 0; r < step_rows; r++) {
            int i = which[r];
            Completion *c = R->out[i];
            c->logp[c->n] = lp[r];
            if (c->mask) c->mask[c->n] = 1;
            c->ids[c->n++] = tok[r];
            live[i].ctx[live[i].n_ctx++] = tok[r];
            (*generated)++;
            if (is_eos(o, tok[r])) {
                const int32_t *add = NULL;
                int k = 0;
                if (overlap && !failed) k = g->overlap.turn_begin(g->turns.ctx, R->index[i], c, &add);
                else if (g->turns.turn_end && !failed) k = g->turns.turn_end(g->turns.ctx, R->index[i], c, &add);
                if (k == GEN_TURN_PENDING) {
                    n_wait++;
                    continue;
                }
                if (k < 0) failed = 1;
                if (turn_append(c, &live[i], add, k, maxc)) turn_len[n_turn] = k, turn_rows[n_turn++] = i;
            } else if (c->n == maxc) live[i].done = 1;
            else {
                which[next] = i;
                slots[next] = R->slot[i];
                tok[next] = tok[r];
                next++;
            }
        }
        /* the overlapped turns answered by now; waiting for one only when no row has anything to
         * decode. Whenever an answer comes, it is appended as turn_end's would be: the row's
         * samples do not depend on it. */
        while (n_wait > 0) {
            const int32_t *add = NULL;
            int index = -1, block = (next == 0 && n_turn == 0) || dev_failed;
            int k = g->overlap.turn_wait(g->turns.ctx, block, &index, &add);
            if (k == GEN_TURN_PENDING) {
                CHECK(!block);
                break;
            }
            int i = index - R->index[0]; /* with turns a chunk holds one group's consecutive rows */
            CHECK(i >= 0 && i < nc && !live[i].done);
            n_wait--;
            if (k < 0) failed = 1;
            if (failed) k = 0; /* the group is dropped: the rows only end */
            if (turn_append(R->out[i], &live[i], add, k, maxc)) turn_len[n_turn] = k, turn_rows[n_turn++] = i;
        }
        if (dev_failed) break; /* every waiting turn answered above */
        if (next > 0 && (g->steps++, step_decode(g, next, slots, tok, NULL, 0))) dev_failed = failed = 1;
        /* each row after a turn alone, its eos and the turn's ids in one call, so its
         * logits do not depend on which rows share its chunk */
        for (int q = 0; q < n_turn && !dev_failed; q++) {
            int i = turn_rows[q], k = 1 + turn_len[q];
            Completion *c = R->out[i];
            for (int t = 0; t < k; t++) tslots[t] = R->slot[i], twant[t] = t == k - 1;
            if (step_decode(g, k, tslots, c->ids + c->n - k, twant, next)) dev_failed = failed = 1;
            which[next] = i;
            slots[next] = R->slot[i];
            next++;
        }
        step_rows = dev_failed ? 0 : next;
    }
    return dev_failed ? -1 : failed;
}

int gen_groups_per_chunk(const Generator *g, int G) {
    CHECK(G >= 1);
    if (g->turns.turn_end) return 1;
    int k = g->chunk / G;
    if (g->opts.share_prefix && (g->chunk + 1) / (G + 1) < k) k = (g->chunk + 1) / (G + 1); /* a parent slot each */
    return k > 1 ? k : 1;
}

/* The next chunk's pieces from group *gi's row *from on: rows while a chunk has
 * room for them (at most chunk rows; with the shared prefix, rows and the pieces'
 * parent slots together at most chunk + 1 slots), one group only with turns (their
 * callbacks see a group's indices). Returns the pieces' count, *rows their rows. */
static int plan_chunk(Generator *g, const GenGroup *gr, int n_groups, int *gi, int *from, int *rows) {
    struct GenRows *R = g->rows;
    int np = 0, share = g->opts.share_prefix;
    *rows = 0;
    while (*gi < n_groups && *rows < g->chunk && !(np > 0 && g->turns.turn_end)) {
        int room = g->chunk - *rows;
        if (share && g->chunk + 1 - (np + 1) - *rows < room) room = g->chunk + 1 - (np + 1) - *rows;
        if (room < 1) break;
        int left = gr[*gi].n - *from, take = left < room ? left : room;
        R->piece[np++] = (struct GenPiece){*gi, *from, take, *rows};
        *rows += take, *from += take;
        if (*from == gr[*gi].n) (*gi)++, *from = 0;
    }
    return np;
}

long gen_groups(Generator *g, const GenGroup *gr, int n_groups) {
    for (int j = 0; j < n_groups; j++)
        CHECK(gr[j].n_prompt >= 1 && gr[j].n_prompt <= g->max_prompt && gr[j].n >= 1 && gr[j].first >= 0);
    long generated = 0;
    g->err.msg[0] = 0;
    int rc = 0, gi = 0, from = 0, rows = 0, keep_group = -1, keep_slot = -1;
    while (gi < n_groups && !rc) {
        int np = plan_chunk(g, gr, n_groups, &gi, &from, &rows);
        rc = chunk_begin(g, gr, np, &keep_group, &keep_slot);
        if (!rc) rc = chunk_decode(g, rows, &generated);
    }
    if (!rc) return generated;
    for (int j = 0; j < n_groups; j++)
        for (int i = 0; i < gr[j].n; i++) gr[j].out[i].n = 0, gr[j].out[i].n_turns = 0, gr[j].out[i].stopped = 0;
    return -1;
}

long gen_group_part(Generator *g, const int32_t *prompt, int n_prompt, int first, int G, uint64_t stream_id,
                    Completion *out) {
    GenGroup one = {prompt, n_prompt, first, G, stream_id, out};
    return gen_groups(g, &one, 1);
}
