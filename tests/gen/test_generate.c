/* tests/gen/test_generate.c — group generation.
 *  - the same seed gives identical completions for chunk sizes 1, 3, 8 and G, and
 *    with and without the shared prompt prefix;
 *  - every sampled token is a draw from the model's own distribution: recomputing
 *    the logits with a full forward pass, the completion's uniform falls in the
 *    token's CDF interval (up to 1e-5 for the different summation order);
 *  - an eos token stops a completion (and is kept), max_completion_length truncates;
 *  - another stream or seed gives other completions; the memory limit sets the chunk;
 *  - gen_opts_set_eos keeps the union in order up to GEN_MAX_EOS and fails past it;
 *  - a Generator made on one OpenMP thread and run on eight gives the same completions
 *    (its per-thread scratch is never overrun: ASan, and CHECKs in the library);
 *  - with turns (tool calling): ids appended after a turn's eos are in the context,
 *    masked 0, draw nothing; samples are the same for every chunk size and with and
 *    without the shared prefix; the model's tokens are draws from the model given
 *    the whole context; max_completion_length bounds both; a failing turn is -1.
 *    Overlapped turns (gen_set_overlap) answered late and out of order give the same;
 *  - several groups decoded together (gen_groups: prompts of other lengths, parts of
 *    groups, chunks splitting them) give each group's completions alone, with and
 *    without the shared prefix and with turns, in fewer decode steps; a failing turn
 *    empties every group's part. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "gen/generate.h"
#include "model/model_io.h"
#include "testutil.h"

#define G 8
#define NP 5

/* tests/fixtures/<name> into m; 0, or -1 after a failed check. */
static int load_fixture(const char *name, Model *m) {
    char dir[128];
    GrpoErr err;
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    if (!model_load(m, dir, &err)) return 0;
    T_CHECK(0, "%s", err.msg);
    return -1;
}

static void run(Model *m, const GenOpts *o, const int32_t *prompt, uint64_t stream, Completion *out) {
    Generator g;
    GrpoErr err;
    if (gen_create(&g, m, o, 16, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    gen_group(&g, prompt, NP, G, stream, out);
    gen_free(&g);
}

/* run(), with the Generator created on n_create threads and used on n_run. */
static void run_threads(Model *m, const GenOpts *o, const int32_t *prompt, uint64_t stream,
                        Completion *out, int n_create, int n_run) {
    int saved = omp_get_max_threads();
    Generator g;
    GrpoErr err;
    omp_set_num_threads(n_create);
    if (gen_create(&g, m, o, 16, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    omp_set_num_threads(n_run);
    gen_group(&g, prompt, NP, G, stream, out);
    gen_free(&g);
    omp_set_num_threads(saved);
}

/* The same tokens, and the same sampling log-probs bit for bit (a row's logits,
 * hence its log-probs, do not depend on the rows decoded beside it). */
static int same(const Completion *a, const Completion *b) {
    for (int i = 0; i < G; i++)
        if (a[i].n != b[i].n || a[i].stopped != b[i].stopped || memcmp(a[i].ids, b[i].ids, sizeof(int32_t) * a[i].n) ||
            !a[i].logp || !b[i].logp || memcmp(a[i].logp, b[i].logp, sizeof(float) * a[i].n))
            return 0;
    return 1;
}

static void free_all(Completion *c) {
    for (int i = 0; i < G; i++) completion_free(&c[i]);
}

/* Each token's uniform must fall inside its CDF interval under a full forward pass;
 * tokens a turn appended (mask 0) are context only and draw nothing. */
static int tokens_follow_model(Model *m, const GenOpts *o, const int32_t *prompt, uint64_t stream,
                               const Completion *c) {
    int V = m->cfg.vocab_size, ok = 1;
    SamplerScratch s;
    sampler_scratch_create(&s, V);
    double *p = malloc(sizeof(double) * V);
    for (int i = 0; i < G; i++) {
        int T = NP + c[i].n;
        int32_t ids[T];
        uint8_t mask[T];
        memcpy(ids, prompt, sizeof(int32_t) * NP);
        memcpy(ids + NP, c[i].ids, sizeof(int32_t) * c[i].n);
        memset(mask, 1, T);
        Activations a;
        acts_create(&a, &m->cfg, T, 0, 4, 0);
        model_forward(m, &a, ids, mask, 1, T, NULL);
        float *logits = malloc(sizeof(float) * T * V);
        model_logits(m, &a, logits);
        Rng r;
        rng_init(&r, o->seed, rng_mix(stream, (uint64_t)i));
        for (int t = 0; t < c[i].n; t++) {
            if (c[i].mask && !c[i].mask[t]) continue;
            double u = rng_uniform_f64(&r);
            sampler_distribution(p, logits + (size_t)(NP + t - 1) * V, V, &o->sampler, ids, NP + t, &s);
            double lo = 0;
            for (int v = 0; v < c[i].ids[t]; v++) lo += p[v];
            double hi = lo + p[c[i].ids[t]];
            /* the recorded log-prob: the decoder's, the forward pass's within fp32 rounding */
            if (!(fabs(c[i].logp[t] - log(p[c[i].ids[t]])) <= 1e-4)) {
                fprintf(stderr, "completion %d token %d: sampling log-prob %.7g, forward pass %.7g\n", i, t,
                        c[i].logp[t], log(p[c[i].ids[t]]));
                ok = 0;
            }
            if (!(u >= lo - 1e-5 && u < hi + 1e-5)) {
                fprintf(stderr, "completion %d token %d: u %.6f outside [%.6f, %.6f)\n", i, t, u, lo, hi);
                ok = 0;
            }
        }
        free(logits);
        acts_free(&a);
    }
    free(p);
    sampler_scratch_free(&s);
    return ok;
}

/* The checks' sampling: seed, up to 10 tokens, eos id 2, top_k 50, repetition penalty 1.1. */
static GenOpts sampled_opts(uint64_t seed) {
    GenOpts o;
    gen_opts_default(&o);
    o.seed = seed;
    o.max_completion_length = 10;
    o.n_eos = 1;
    o.eos_ids[0] = 2;
    o.sampler.top_k = 50;
    o.sampler.repetition_penalty = 1.1f;
    return o;
}

static void check(const char *name) {
    GrpoErr err;
    Model m;
    if (load_fixture(name, &m)) return;
    int32_t prompt[NP] = {3, 17, 42, 8, 91};
    GenOpts o = sampled_opts(1234);
    Completion ref[G], c[G];
    o.chunk_size = G;
    run(&m, &o, prompt, 77, ref);
    int chunks[] = {1, 3, 8};
    for (int k = 0; k < 3; k++) {
        o.chunk_size = chunks[k];
        run(&m, &o, prompt, 77, c);
        T_CHECK(same(ref, c), "%s: chunk %d differs from chunk G", name, chunks[k]);
        free_all(c);
        o.share_prefix = 0;
        run(&m, &o, prompt, 77, c);
        T_CHECK(same(ref, c), "%s: chunk %d without the shared prefix differs", name, chunks[k]);
        free_all(c);
        o.share_prefix = 1;
    }
    o.chunk_size = G;
    run_threads(&m, &o, prompt, 77, c, 1, 8);
    T_CHECK(same(ref, c), "%s: created on 1 thread, run on 8: completions differ", name);
    free_all(c);
    T_CHECK(tokens_follow_model(&m, &o, prompt, 77, ref), "%s: tokens are not draws from the model", name);
    int full = 1;
    for (int i = 0; i < G; i++) full &= ref[i].n == 10 || ref[i].stopped;
    T_CHECK(full, "%s: a completion ended early without eos", name);
    /* another stream gives other completions */
    run(&m, &o, prompt, 78, c);
    T_CHECK(!same(ref, c), "%s: stream 78 equals stream 77", name);
    free_all(c);
    /* eos: make completion 0's first token the eos id */
    o.eos_ids[0] = ref[0].ids[0];
    run(&m, &o, prompt, 77, c);
    T_CHECK(c[0].stopped && c[0].n == 1 && c[0].ids[0] == ref[0].ids[0], "%s: eos does not stop", name);
    for (int i = 0; i < G; i++) {
        int first = -1;
        for (int t = 0; t < ref[i].n && first < 0; t++)
            if (ref[i].ids[t] == o.eos_ids[0]) first = t;
        if (first >= 0) T_CHECK(c[i].n == first + 1 && c[i].stopped, "%s: completion %d stops at %d", name, i, first);
    }
    free_all(c);
    free_all(ref);
    /* memory limit -> chunk size */
    Generator g;
    o.chunk_size = 0;
    o.kv_cache_bytes = kv_cache_bytes(&m.cfg, 4, 16);
    T_CHECK(gen_create(&g, &m, &o, 16, &err) == 0 && g.chunk == 3, "%s: 4 slots of memory -> chunk 3 (got %d)", name, g.chunk);
    gen_free(&g);
    o.kv_cache_bytes = 100;
    T_CHECK(gen_create(&g, &m, &o, 16, &err) == -1 && strstr(err.msg, "holds no completion"), "%s: tiny limit error: %s", name, err.msg);
    model_free(&m);
}

/* The union of two eos lists: order kept, duplicates and negative ids dropped, and
 * one id past GEN_MAX_EOS an error naming both counts, the options unchanged. */
static void check_eos_union(void) {
    GenOpts o;
    gen_opts_default(&o);
    GrpoErr err = {{0}};
    enum { NA = GEN_MAX_EOS / 2, NB = GEN_MAX_EOS / 2 + 1 };
    int32_t a[NA], b[NB];
    for (int i = 0; i < NA; i++) a[i] = 1000 + i;            /* 1000 .. 1000+NA-1 */
    for (int i = 0; i < NB; i++) b[i] = 1000 + NA - 1 + i;   /* overlaps a's last id */
    a[1] = -1;
    int rc = gen_opts_set_eos(&o, a, NA, b, NB, &err);     /* NA - 1 + NB - 1 = GEN_MAX_EOS - 1 */
    T_CHECK(rc == 0 && o.n_eos == GEN_MAX_EOS - 1 && o.eos_ids[0] == 1000 && o.eos_ids[1] == 1002 &&
                o.eos_ids[GEN_MAX_EOS - 2] == b[NB - 1],
            "union of %d: rc %d n %d", GEN_MAX_EOS - 1, rc, o.n_eos);
    a[1] = 1001;
    b[0] = 5;                                               /* now GEN_MAX_EOS + 1 distinct */
    rc = gen_opts_set_eos(&o, a, NA, b, NB, &err);
    char want[96];
    snprintf(want, sizeof want, "%d distinct eos token ids", GEN_MAX_EOS + 1);
    T_CHECK(rc == -1 && strstr(err.msg, want) && strstr(err.msg, "at most 32"), "union of %d: rc %d '%s'",
            GEN_MAX_EOS + 1, rc, err.msg);
    T_CHECK(o.n_eos == GEN_MAX_EOS - 1 && o.eos_ids[1] == 1002, "a failed call left the ids unchanged");
    rc = gen_opts_set_eos(&o, a, NA, a, NA, &err);
    T_CHECK(rc == 0 && o.n_eos == NA, "duplicates: rc %d n %d", rc, o.n_eos);
}

/* A fake tool: after each of a completion's first two turns it appends 1 to 3 ids
 * that depend on the completion so far; fails on call fail_at (0: never). */
typedef struct {
    int calls, fail_at;
    int32_t ids[4];
} FakeTool;

static int fake_turn_end(void *ctx, int index, const Completion *c, const int32_t **ids) {
    FakeTool *f = ctx;
    if (++f->calls == f->fail_at) return -1;
    if (c->n_turns >= 2) return 0;
    int k = 1 + (c->ids[0] + index + c->n) % 3;
    for (int j = 0; j < k; j++) f->ids[j] = 40 + (c->ids[c->n - 1] + j * 7 + index) % 50;
    *ids = f->ids;
    return k;
}

static long run_turns(Model *m, const GenOpts *o, const int32_t *prompt, uint64_t stream, FakeTool *f,
                      Completion *out) {
    Generator g;
    GrpoErr err;
    if (gen_create(&g, m, o, 16, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    GenTurns t = {fake_turn_end, f};
    gen_set_turns(&g, &t);
    long n = gen_group(&g, prompt, NP, G, stream, out);
    gen_free(&g);
    return n;
}

/* The same tool, overlapped (GenOverlap): turn_begin keeps fake_turn_end's answer
 * aside; turn_wait gives a kept answer only after it was asked for `delay` times
 * (a latency counted in decode steps, different per completion and turn) and, of
 * those ready, the one begun last, so answers come back out of order and rows wait
 * several steps while the others decode. fail_at's -1 comes back through turn_wait. */
typedef struct {
    FakeTool tool;
    int n_pending, max_pending;
    struct { int index, k, polls_left; int32_t ids[4]; } pending[G];
    int32_t out[4];
} FakeOverlap;

static int fake_turn_begin(void *ctx, int index, const Completion *c, const int32_t **ids) {
    FakeOverlap *f = ctx;
    const int32_t *add = NULL;
    int k = fake_turn_end(&f->tool, index, c, &add);
    if (k == 0) return 0; /* no call: answered at once, as tools/tool_loop.c does */
    CHECK(f->n_pending < G);
    __typeof__(f->pending[0]) *p = &f->pending[f->n_pending++];
    p->index = index, p->k = k, p->polls_left = (index * 5 + c->n) % 4;
    if (k > 0) memcpy(p->ids, add, sizeof(int32_t) * k);
    if (f->n_pending > f->max_pending) f->max_pending = f->n_pending;
    (void)ids;
    return GEN_TURN_PENDING;
}

static int fake_turn_wait(void *ctx, int block, int *index, const int32_t **ids) {
    FakeOverlap *f = ctx;
    int pick = -1;
    for (int q = 0; q < f->n_pending; q++)
        if (f->pending[q].polls_left-- <= 0 || block) pick = q;
    if (pick < 0) return GEN_TURN_PENDING;
    int k = f->pending[pick].k;
    *index = f->pending[pick].index;
    memcpy(f->out, f->pending[pick].ids, sizeof f->out);
    f->pending[pick] = f->pending[--f->n_pending];
    *ids = f->out;
    return k;
}

static long run_overlap(Model *m, const GenOpts *o, const int32_t *prompt, uint64_t stream, FakeOverlap *f,
                        Completion *out) {
    Generator g;
    GrpoErr err;
    if (gen_create(&g, m, o, 16, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    gen_set_turns(&g, &(GenTurns){fake_turn_end, &f->tool});
    gen_set_overlap(&g, &(GenOverlap){fake_turn_begin, fake_turn_wait});
    long n = gen_group(&g, prompt, NP, G, stream, out);
    gen_free(&g);
    return n;
}

static int same_turns(const Completion *a, const Completion *b) {
    if (!same(a, b)) return 0;
    for (int i = 0; i < G; i++)
        if (a[i].n_turns != b[i].n_turns || memcmp(a[i].mask, b[i].mask, a[i].n)) return 0;
    return 1;
}

static void check_turns(const char *name) {
    Model m;
    if (load_fixture(name, &m)) return;
    int32_t prompt[NP] = {3, 17, 42, 8, 91};
    GenOpts o;
    gen_opts_default(&o);
    o.seed = 99;
    o.max_completion_length = 24;
    o.n_eos = 12; /* turns end often */
    for (int i = 0; i < 12; i++) o.eos_ids[i] = 2 + 3 * i;
    o.sampler.top_k = 50;
    o.sampler.repetition_penalty = 1.1f;
    Completion ref[G], c[G];
    FakeTool f = {0};
    o.chunk_size = G;
    long model_tokens = run_turns(&m, &o, prompt, 5, &f, ref);
    int turns1 = 0, turns2 = 0, ok = 1;
    long counted = 0;
    for (int i = 0; i < G; i++) {
        turns1 += ref[i].n_turns >= 1, turns2 += ref[i].n_turns == 2;
        ok &= ref[i].n <= 24 && ref[i].mask != NULL && ref[i].mask[0] == 1;
        /* a run of 0s follows an eos the model wrote; the turns counted are those runs */
        int runs = 0;
        for (int t = 0; t < ref[i].n; t++) {
            counted += ref[i].mask[t];
            if (!ref[i].mask[t] && ref[i].mask[t - 1]) {
                runs++;
                int e = 0;
                for (int k = 0; k < o.n_eos; k++) e |= ref[i].ids[t - 1] == o.eos_ids[k];
                ok &= e;
            }
        }
        ok &= runs == ref[i].n_turns;
        /* it ends with the model's eos (stopped), or at the length limit */
        ok &= ref[i].stopped ? ref[i].mask[ref[i].n - 1] == 1 : ref[i].n == 24;
    }
    T_CHECK(ok, "%s: masks, lengths and turns consistent", name);
    T_CHECK(counted == model_tokens, "%s: generated counts the model's tokens (%ld vs %ld)", name, model_tokens, counted);
    T_CHECK(turns1 >= 2 && turns2 >= 1, "%s: turns happened (%d with one or more, %d with two)", name, turns1, turns2);
    int chunks[] = {1, 3, 5};
    for (int k = 0; k < 3; k++) {
        o.chunk_size = chunks[k];
        run_turns(&m, &o, prompt, 5, &f, c);
        T_CHECK(same_turns(ref, c), "%s: turns, chunk %d differs from chunk G", name, chunks[k]);
        free_all(c);
        o.share_prefix = 0;
        run_turns(&m, &o, prompt, 5, &f, c);
        T_CHECK(same_turns(ref, c), "%s: turns, chunk %d without the shared prefix differs", name, chunks[k]);
        free_all(c);
        o.share_prefix = 1;
    }
    /* overlapped: the answers arrive late and out of order, the samples are the same */
    for (int k = 0; k < 3; k++) {
        FakeOverlap fo = {0};
        o.chunk_size = k == 0 ? G : chunks[k];
        long n = run_overlap(&m, &o, prompt, 5, &fo, c);
        T_CHECK(n == model_tokens && same_turns(ref, c) && fo.n_pending == 0,
                "%s: overlapped turns, chunk %d differ from the synchronous ones (%ld tokens, %d left pending)",
                name, o.chunk_size, n, fo.n_pending);
        if (k == 0) T_CHECK(fo.max_pending >= 2, "%s: overlapped turns waited together (%d)", name, fo.max_pending);
        free_all(c);
    }
    T_CHECK(tokens_follow_model(&m, &o, prompt, 5, ref), "%s: with turns, tokens are not draws from the model", name);
    /* without turns the same seed differs once a turn happened, and has no mask */
    o.chunk_size = G;
    run(&m, &o, prompt, 5, c);
    T_CHECK(!same(ref, c) && c[0].mask == NULL, "%s: turns change the completions", name);
    free_all(c);
    free_all(ref);
    /* a failing turn: -1, nothing left allocated */
    f = (FakeTool){.fail_at = 3};
    o.chunk_size = 3;
    long n = run_turns(&m, &o, prompt, 5, &f, c);
    int freed = 1;
    for (int i = 0; i < G; i++) freed &= c[i].ids == NULL && c[i].mask == NULL;
    T_CHECK(n == -1 && freed, "%s: a failing turn gives -1 (%ld), completions freed", name, n);
    /* overlapped, the failure arriving late: -1, freed, every pending answer collected */
    FakeOverlap fo = {.tool = {.fail_at = 3}};
    n = run_overlap(&m, &o, prompt, 5, &fo, c);
    freed = 1;
    for (int i = 0; i < G; i++) freed &= c[i].ids == NULL && c[i].mask == NULL;
    T_CHECK(n == -1 && freed && fo.n_pending == 0, "%s: a failing overlapped turn gives -1 (%ld), freed, %d pending",
            name, n, fo.n_pending);
    model_free(&m);
}

/* Four groups' parts: prompts of 5, 3, 9 and 1 ids, completions from index first. */
#define NG 4
static const int32_t gp0[] = {3, 17, 42, 8, 91}, gp1[] = {60, 5, 33}, gp2[] = {7, 7, 12, 90, 44, 2, 18, 65, 30},
                     gp3[] = {81};
static const int32_t *const g_prompt[NG] = {gp0, gp1, gp2, gp3};
static const int g_np[NG] = {5, 3, 9, 1}, g_first[NG] = {0, 2, 0, 7}, g_n[NG] = {8, 5, 11, 1};

/* Each group's part alone (gen_group_part, one chunk of 16) into ref[j], or all of them
 * together (gen_groups) with o's chunk size; buffers made here. Returns the tokens
 * (-1 on failure) and *steps the decode steps taken. */
static long run_groups(Model *m, const GenOpts *o, int together, const GenTurns *t, Completion (*out)[16],
                       long *steps) {
    Generator g;
    GrpoErr err;
    GenOpts oo = *o;
    if (!together) oo.chunk_size = 16;
    if (gen_create(&g, m, &oo, 16, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    if (t) gen_set_turns(&g, t);
    int maxc = o->max_completion_length;
    GenGroup gr[NG];
    for (int j = 0; j < NG; j++) {
        for (int i = 0; i < g_n[j]; i++)
            out[j][i] = (Completion){.ids = xmalloc(sizeof(int32_t) * maxc), .logp = xmalloc(sizeof(float) * maxc),
                                     .mask = t ? xmalloc(maxc) : NULL};
        gr[j] = (GenGroup){g_prompt[j], g_np[j], g_first[j], g_n[j], 500 + j, out[j]};
    }
    long n = 0;
    if (together) n = gen_groups(&g, gr, NG);
    for (int j = 0; j < NG && !together && n >= 0; j++) {
        long k = gen_group_part(&g, gr[j].prompt, gr[j].n_prompt, gr[j].first, gr[j].n, gr[j].stream_id, gr[j].out);
        n = k < 0 ? -1 : n + k;
    }
    *steps = g.steps;
    gen_free(&g);
    return n;
}

static int same_groups(Completion (*a)[16], Completion (*b)[16], int turns) {
    for (int j = 0; j < NG; j++)
        for (int i = 0; i < g_n[j]; i++) {
            const Completion *x = &a[j][i], *y = &b[j][i];
            if (x->n != y->n || x->stopped != y->stopped || x->n_turns != y->n_turns ||
                memcmp(x->ids, y->ids, sizeof(int32_t) * x->n) || memcmp(x->logp, y->logp, sizeof(float) * x->n) ||
                (turns && memcmp(x->mask, y->mask, x->n)))
                return 0;
        }
    return 1;
}

static void free_groups(Completion (*c)[16]) {
    for (int j = 0; j < NG; j++)
        for (int i = 0; i < g_n[j]; i++) completion_free(&c[j][i]);
}

static void check_groups(const char *name) {
    GrpoErr err;
    Model m;
    if (load_fixture(name, &m)) return;
    GenOpts o = sampled_opts(4321);
    Completion ref[NG][16], c[NG][16];
    long ref_steps = 0, steps = 0, total = 0;
    long n_ref = run_groups(&m, &o, 0, NULL, ref, &ref_steps);
    for (int j = 0; j < NG; j++)
        for (int i = 0; i < g_n[j]; i++) total += ref[j][i].n;
    T_CHECK(n_ref == total && n_ref > 0, "%s: groups alone: %ld tokens generated, %ld in the completions", name, n_ref,
            total);
    /* group 1's part is its completions 2..6: the same as gen_group's 2..6 */
    Generator g;
    Completion whole[8];
    o.chunk_size = 8;
    CHECK(gen_create(&g, &m, &o, 16, &err) == 0);
    gen_group(&g, gp1, 3, 8, 501, whole);
    int part_ok = 1;
    for (int i = 0; i < 5; i++)
        part_ok &= whole[2 + i].n == ref[1][i].n && !memcmp(whole[2 + i].ids, ref[1][i].ids, sizeof(int32_t) * ref[1][i].n);
    T_CHECK(part_ok, "%s: a group's part is its completions from first on", name);
    for (int i = 0; i < 8; i++) completion_free(&whole[i]);
    int per[3] = {gen_groups_per_chunk(&g, 1), gen_groups_per_chunk(&g, 3), gen_groups_per_chunk(&g, 9)};
    T_CHECK(per[0] == 4 && per[1] == 2 && per[2] == 1, "%s: chunk 8 shared: groups per chunk of 1, 3, 9: %d %d %d",
            name, per[0], per[1], per[2]);
    gen_free(&g);
    int chunks[] = {1, 3, 8, 13, 64};
    for (int k = 0; k < 5; k++)
        for (int share = 1; share >= 0; share--) {
            o.chunk_size = chunks[k], o.share_prefix = share;
            long n = run_groups(&m, &o, 1, NULL, c, &steps);
            T_CHECK(n == n_ref && same_groups(ref, c, 0), "%s: groups together, chunk %d%s: differ from alone (%ld tokens)",
                    name, chunks[k], share ? "" : " unshared", n);
            if (chunks[k] == 64)
                T_CHECK(steps <= o.max_completion_length && steps < ref_steps,
                        "%s: 25 rows in one chunk%s: %ld decode steps (alone: %ld)", name, share ? "" : " unshared", steps,
                        ref_steps);
            free_groups(c);
        }
    o.share_prefix = 1;
    free_groups(ref);
    /* with turns: a chunk holds one group; each completion is the one it is alone */
    o.max_completion_length = 24;
    o.n_eos = 12;
    for (int i = 0; i < 12; i++) o.eos_ids[i] = 2 + 3 * i;
    FakeTool f = {0};
    GenTurns t = {fake_turn_end, &f};
    run_groups(&m, &o, 0, &t, ref, &ref_steps);
    int turned = 0;
    for (int j = 0; j < NG; j++)
        for (int i = 0; i < g_n[j]; i++) turned += ref[j][i].n_turns > 0;
    T_CHECK(turned >= 2, "%s: groups with turns: %d completions took turns", name, turned);
    for (int k = 0; k < 3; k++) {
        o.chunk_size = chunks[k + 1];
        run_groups(&m, &o, 1, &t, c, &steps);
        T_CHECK(same_groups(ref, c, 1), "%s: groups together with turns, chunk %d: differ from alone", name, chunks[k + 1]);
        free_groups(c);
    }
    free_groups(ref);
    /* a failing turn: -1 and every group's part left empty */
    f = (FakeTool){.fail_at = 20};
    o.chunk_size = 13;
    long n = run_groups(&m, &o, 1, &t, c, &steps);
    int empty = 1;
    for (int j = 0; j < NG; j++)
        for (int i = 0; i < g_n[j]; i++) empty &= c[j][i].n == 0 && c[j][i].n_turns == 0;
    T_CHECK(n == -1 && empty, "%s: a failing turn among groups gives -1 (%ld), every part empty", name, n);
    free_groups(c);
    model_free(&m);
}

int main(void) {
    check_eos_union();
    check_turns("qwen2");
    check_turns("llama");
    check("qwen2");
    check("llama");
    check("qwen3");
    check_groups("qwen2");
    check_groups("llama");
    return t_summary("test_generate");
}
