/* tests/gpu/test_gpu_gen.c — the generator on the GPU (gen/device.c, GenOpts.device)
 * and `grpo generate` / `grpo eval` there: on the GPU where gpu_open finds one, on
 * the tests' emulated GPU otherwise, with tests/fixtures/qwen2 (2 layers, q/k/v
 * biases, a tied head) in bf16 products (WEIGHTS_BF16).
 *
 * - Chunking: completions (ids, stops, sampling log-probs) bit for bit the same for
 *   chunk sizes 1, 3 and 64, share_prefix on and off, at temperature 1 with top_k,
 *   top_p, min_p and a repetition penalty on (the streams, contexts and draws of the
 *   rows are their own whatever shares a step).
 * - Several groups decoded together (gen_groups: three prompts of 5, 3 and 1 ids, parts
 *   of their groups): chunk 3 and 64, share_prefix on and off, each completion the one
 *   its group gives alone, bit for bit, in fewer device steps at chunk 64.
 * - The sampler on the GPU's logits: each completion replayed a token a step on a
 *   GpuGen of one slot, the CPU's sampler_sample_logp on the logits that step leaves,
 *   with the completion's own stream (rng_mix(stream_id, i) of the seed): the same
 *   token, the log-prob within 1e-6 + 1e-6 relative.
 * - Greedy against the CPU's bf16 greedy (the host Generator on the same weights):
 *   the logits of every step of the CPU's completion, replayed on both, within
 *   test_gpu_generate's bound (1e-2 max|cpu| + 1e-2 |cpu|); the ids equal, or, where
 *   not, the CPU's two best logits at the first differing step within that bound of
 *   each other (a near tie that a last-bit difference may decide). The figures seen
 *   are printed.
 * - Multi-turn: a tool turn of 5 ids after a completion's first eos (two device steps at
 *   chunk 1): chunk 1 and 64 the same, and on the emulated GPU the host Generator's ids,
 *   stops and masks, its log-probs within 1e-5 + 1e-5 relative.
 * - `grpo generate` (its entry, cmd_generate) on the GPU against --use_cpu --bf16 true:
 *   greedy JSON lines the same; sampled lines the same for --generation_chunk_size 1
 *   and 64; a Qwen3 model's greedy lines the CPU bf16's; --bf16 false generates on the
 *   CPU with one line saying so and the CPU run's output; without a GPU, the plain command prints --use_cpu's
 *   stdout and stderr (the timing figure aside). `grpo eval` likewise, briefly.
 * Sizes are small (4 completions of up to 6 tokens; the commands 2 of up to 5): an
 * emulated decoding step is about a second on a loaded machine. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/rng.h"
#include "core/timer.h"
#include "gen/generate.h"
#include "gpu/generate.h"
#include "model/kvcache.h"
#include "model/model_io.h"
#define GPU_TEST_SEED 41
#include "gpu_test.h"
#include "gpu_test_cli.h"

/* small: every emulated GPU thread is a coroutine (a decoding step is about a second here) */
enum { G = 4, MAXC = 6, NP = 5 };
static const int32_t prompt[NP] = {11, 42, 7, 90, 3};
static const uint64_t stream_id = 1234;
static Model m;        /* the fixture, WEIGHTS_BF16 */
static GpuModel gm;
static GenDevice gdev;

static GenOpts gen_opts(int chunk, int share, double temperature, int on_gpu) {
    GenOpts o;
    gen_opts_default(&o);
    o.sampler.temperature = (float)temperature;
    if (temperature > 0) o.sampler.top_k = 40, o.sampler.top_p = 0.95f, o.sampler.min_p = 0.02f,
                         o.sampler.repetition_penalty = 1.3f;
    o.max_completion_length = MAXC, o.seed = 7, o.share_prefix = share, o.chunk_size = chunk;
    o.n_eos = 2, o.eos_ids[0] = 2, o.eos_ids[1] = 5; /* two eos ids: some completions stop */
    o.weights = WEIGHTS_BF16;
    o.device = on_gpu ? &gdev : NULL;
    return o;
}

/* A tool's turn: after a completion's first eos, five ids appended (then it goes on);
 * after its second, the end. */
static int turn_end(void *ctx, int index, const Completion *c, const int32_t **ids) {
    static const int32_t add[5] = {17, 18, 19, 20, 21};
    *ids = add;
    return c->n_turns < 1 ? 5 : 0;
}
static const GenTurns *turns; /* set: generate() runs with these turns */

/* n completions of prompt under o into out (gen_group's buffers). */
static int generate(const GenOpts *o, int n_out, Completion *out) {
    Generator g;
    if (gen_create(&g, &m, o, NP, &err)) {
        T_CHECK(0, "gen_create: %s", err.msg);
        return -1;
    }
    if (turns) gen_set_turns(&g, turns);
    long n = gen_group(&g, prompt, NP, n_out, stream_id, out);
    T_CHECK(n > 0, "gen_group: %ld (%s)", n, g.err.msg);
    gen_free(&g);
    return n > 0 ? 0 : -1;
}

static int same_completions1(const Completion *a, const Completion *b) {
    return a->n == b->n && a->stopped == b->stopped && a->n_turns == b->n_turns && !a->mask == !b->mask &&
           !memcmp(a->ids, b->ids, 4 * (size_t)a->n) && !memcmp(a->logp, b->logp, 4 * (size_t)a->n) &&
           (!a->mask || !memcmp(a->mask, b->mask, (size_t)a->n));
}

static int same_completions(const Completion *a, const Completion *b) {
    for (int i = 0; i < G; i++)
        if (!same_completions1(&a[i], &b[i])) return 0;
    return 1;
}

static void free_all(Completion *c, int n) {
    for (int i = 0; i < n; i++) completion_free(&c[i]);
}

static void check_chunking(Completion *ref) {
    int stopped = 0;
    GenOpts o64 = gen_opts(64, 1, 1.0, 1);
    T_CHECK(!generate(&o64, G, ref), "reference run");
    for (int i = 0; i < G; i++) stopped += ref[i].stopped;
    printf("  sampled (T 1, top_k 40, top_p 0.95, min_p 0.02, repetition_penalty 1.3): %d of %d completions "
           "stopped by eos\n", stopped, G);
    static const int chunks[] = {1, 3, 64};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 3; k++) {
            Completion c[G];
            GenOpts o = gen_opts(chunks[k], s, 1.0, 1);
            if ((s == 1 && chunks[k] == 64) || generate(&o, G, c)) continue; /* the reference itself */
            T_CHECK(same_completions(c, ref), "chunk %d, share_prefix %d: completions differ from chunk 64's", chunks[k], s);
            free_all(c, G);
        }
    printf("  chunk sizes 1, 3, 64 x share_prefix on/off: the same ids, stops and log-probs bit for bit\n");
}

/* Three groups' parts (prompts of 5, 3 and 1 ids) decoded together on the device
 * against each alone (gen_group_part, chunk 64): the same completions bit for bit. */
static void check_groups(void) {
    static const int32_t p2[3] = {60, 5, 33}, p3[1] = {81};
    const int32_t *pr[3] = {prompt, p2, p3};
    const int np[3] = {NP, 3, 1}, first[3] = {0, 1, 0}, n[3] = {3, 2, 4};
    Completion ref[3][4], c[3][4];
    long ref_steps = 0;
    for (int pass = 0; pass < 5; pass++) {
        /* pass 0: each alone at chunk 64; then together at chunk 3 and 64, shared and not */
        int chunk = pass == 0 || pass >= 3 ? 64 : 3, share = pass != 2 && pass != 4;
        GenOpts o = gen_opts(chunk, share, 1.0, 1);
        Generator g;
        if (gen_create(&g, &m, &o, NP, &err)) {
            T_CHECK(0, "gen_create: %s", err.msg);
            return;
        }
        Completion(*out)[4] = pass == 0 ? ref : c;
        GenGroup gr[3];
        for (int j = 0; j < 3; j++) {
            for (int i = 0; i < n[j]; i++)
                out[j][i] = (Completion){.ids = xmalloc(4 * MAXC), .logp = xmalloc(4 * MAXC)};
            gr[j] = (GenGroup){pr[j], np[j], first[j], n[j], stream_id + j, out[j]};
        }
        long made = 0;
        for (int j = 0; j < 3 && pass == 0; j++) made += gen_groups(&g, &gr[j], 1);
        if (pass > 0) made = gen_groups(&g, gr, 3);
        T_CHECK(made > 0, "groups, pass %d: %ld (%s)", pass, made, g.err.msg);
        if (pass == 0) ref_steps = g.steps;
        int same = 1;
        for (int j = 0; j < 3 && pass > 0; j++)
            for (int i = 0; i < n[j]; i++) same &= same_completions1(&c[j][i], &ref[j][i]);
        if (pass > 0) T_CHECK(same, "groups together, chunk %d, share_prefix %d: not each group's alone", chunk, share);
        if (pass == 3)
            T_CHECK(g.steps < ref_steps, "groups together at chunk 64: %ld device steps, alone %ld", g.steps, ref_steps);
        gen_free(&g);
        for (int j = 0; j < 3 && pass > 0; j++) free_all(c[j], n[j]);
    }
    for (int j = 0; j < 3; j++) free_all(ref[j], n[j]);
    printf("  three groups' parts decoded together (chunk 3 and 64, share_prefix on/off): each group's alone, bit for "
           "bit\n");
}

/* Multi-turn: a turn's ids decoded on the device as rows of their slot (chunk 1 plans
 * steps of NP = 5 rows, so a turn's 6 rows, eos + ids, take two; chunk 64 one): the same,
 * and, on the emulated GPU (the CPU's bits), the host Generator's completions. Many eos
 * ids, so that turns happen within a few tokens. */
static void check_turns(void) {
    GenTurns t = {turn_end, NULL};
    turns = &t;
    Completion a[G], b[G], c[G];
    GenOpts o1 = gen_opts(1, 1, 1.0, 1), o64 = gen_opts(64, 0, 1.0, 1), oc = gen_opts(64, 1, 1.0, 0);
    o1.n_eos = o64.n_eos = oc.n_eos = 24;
    o1.max_completion_length = o64.max_completion_length = oc.max_completion_length = 10;
    for (int k = 0; k < 24; k++) o1.eos_ids[k] = o64.eos_ids[k] = oc.eos_ids[k] = 4 * k + 1;
    if (!generate(&o1, G, a) && !generate(&o64, G, b) && !generate(&oc, G, c)) {
        int n_turns = 0;
        for (int i = 0; i < G; i++) n_turns += a[i].n_turns;
        T_CHECK(n_turns > 0, "no turn happened: the check sees nothing");
        int same = same_completions(a, b);
        T_CHECK(same, "turns: chunk 1 (shared prefix) and 64 (not) differ");
        /* the host's logits differ from the GPU's in their last bits (test_gpu_generate), so its
         * log-probs do too: the ids, stops and masks equal, the log-probs within 1e-5 + 1e-5 relative */
        double worst = 0;
        for (int i = 0; i < G && emulated; i++) {
            Completion x = c[i];
            x.logp = a[i].logp;
            T_CHECK(same_completions1(&a[i], &x), "turns: completion %d on the emulated GPU is not the host's", i);
            for (int t = 0; t < c[i].n && t < a[i].n; t++) {
                double e = fabs((double)a[i].logp[t] - c[i].logp[t]);
                worst = fmax(worst, e);
                T_CHECK(e <= 1e-5 + 1e-5 * fabs(c[i].logp[t]), "turns: completion %d token %d: log-prob %.9g, the "
                        "host's %.9g", i, t, a[i].logp[t], c[i].logp[t]);
            }
        }
        printf("  turns: %d appended over %d completions; chunk 1 and 64 %s", n_turns, G, same ? "the same" : "DIFFER");
        if (emulated) printf("; the host Generator's ids, stops and masks, log-probs within %.2g", worst);
        printf("\n");
        free_all(a, G), free_all(b, G), free_all(c, G);
    }
    turns = NULL;
}

/* The logits after each of steps rows of a completion fed a token a step into one
 * slot: logits[t] after the prompt and ids[0 .. t-1], on the GPU (GpuGen) and,
 * cpu != NULL, on the CPU (model_decode). */
static void replay(const int32_t *ids, int steps, float *gpu, float *cpu) {
    int V = m.cfg.vocab_size, slots[NP] = {0};
    GpuGen rg;
    T_CHECK(!gpu_gen_create(&dev, &rg, &gm, 1, NP + MAXC, NP, &err), "%s", err.msg);
    KVCache kv;
    DecodeState ds;
    kv_cache_create(&kv, &m.cfg, 1, NP + MAXC);
    decode_state_create(&ds, &m.cfg, NP, NP + MAXC + 1);
    float *host = malloc(sizeof(float) * NP * V);
    for (int t = 0; t < steps; t++) {
        int n = t == 0 ? NP : 1;
        const int32_t *tok = t == 0 ? prompt : &ids[t - 1];
        T_CHECK(!gpu_gen_step(&dev, &rg, n, slots, tok, &err), "%s", err.msg);
        download(gpu + (size_t)t * V, rg.logits + sizeof(float) * (size_t)(n - 1) * V, sizeof(float) * V);
        if (cpu) {
            model_decode(&m, &kv, &ds, n, slots, tok, NULL, host);
            memcpy(cpu + (size_t)t * V, host + (size_t)(n - 1) * V, sizeof(float) * V);
        }
    }
    free(host);
    kv_cache_free(&kv);
    decode_state_free(&ds);
    gpu_gen_free(&dev, &rg);
}

static void check_sampler_replay(const Completion *ref) {
    GenOpts o = gen_opts(64, 1, 1.0, 1);
    int V = m.cfg.vocab_size, checked = 0, same_bits = 0;
    double worst = 0;
    SamplerScratch sc;
    sampler_scratch_create(&sc, V);
    for (int i = 0; i < G; i++) {
        const Completion *c = &ref[i];
        float *logits = malloc(sizeof(float) * V * (size_t)c->n);
        replay(c->ids, c->n, logits, NULL);
        Rng rng;
        rng_init(&rng, o.seed, rng_mix(stream_id, (uint64_t)i));
        int32_t ctx[NP + MAXC];
        memcpy(ctx, prompt, sizeof prompt);
        for (int t = 0; t < c->n; t++) {
            float lp;
            int32_t tok = sampler_sample_logp(logits + (size_t)t * V, V, &o.sampler, ctx, NP + t,
                                              rng_uniform_f64(&rng), &sc, &lp);
            double e = fabs((double)lp - c->logp[t]);
            T_CHECK(tok == c->ids[t] && e <= 1e-6 + 1e-6 * fabs(lp),
                    "completion %d token %d: the GPU sampled %d (log-prob %.9g), the CPU's sampler on its logits "
                    "%d (%.9g)", i, t, c->ids[t], c->logp[t], tok, lp);
            worst = fmax(worst, e), checked++, same_bits += memcmp(&lp, &c->logp[t], 4) == 0;
            ctx[NP + t] = tok;
        }
        free(logits);
    }
    sampler_scratch_free(&sc);
    printf("  the CPU's sampler on the GPU's logits: %d of %d tokens checked the same, log-probs within %.2g "
           "(%d bit for bit)\n", checked, checked, worst, same_bits);
}

/* Greedy: the GPU's completion against the host Generator's on the same bf16 weights
 * (greedy completions of one prompt are all alike: two, the second in its own chunk). */
static void check_greedy(void) {
    enum { NG = 2 };
    Completion g[NG], c[NG];
    GenOpts og = gen_opts(1, 1, 0.0, 1), oc = gen_opts(1, 1, 0.0, 0);
    if (generate(&og, NG, g) || generate(&oc, NG, c)) return;
    T_CHECK(same_completions1(&g[0], &g[1]) && same_completions1(&c[0], &c[1]), "greedy completions differ");
    int V = m.cfg.vocab_size, equal = 0;
    double worst = 0;
    for (int i = 0; i < 1; i++) {
        float *lg = malloc(sizeof(float) * V * MAXC), *lc = malloc(sizeof(float) * V * MAXC);
        replay(c[i].ids, c[i].n, lg, lc);
        double top = 0;
        for (size_t j = 0; j < (size_t)V * c[i].n; j++) top = fmax(top, fabs(lc[j]));
        for (size_t j = 0; j < (size_t)V * c[i].n; j++) {
            double e = fabs((double)lg[j] - lc[j]);
            worst = fmax(worst, e / top);
            T_CHECK(e <= 1e-2 * top + 1e-2 * fabs(lc[j]), "greedy %d, step %zu: GPU logit %g, CPU %g", i, j / V,
                    lg[j], lc[j]);
        }
        int t = 0;
        while (t < g[i].n && t < c[i].n && g[i].ids[t] == c[i].ids[t]) t++;
        if (t == g[i].n && t == c[i].n) {
            equal++;
        } else { /* where they part, the CPU's best two within the bound of each other */
            const float *z = lc + (size_t)t * V;
            float a = -INFINITY, b = -INFINITY;
            for (int v = 0; v < V; v++)
                if (z[v] > a) b = a, a = z[v];
                else if (z[v] > b) b = z[v];
            printf("  greedy %d parts at step %d: the CPU's best two logits %.6g, %.6g\n", i, t, a, b);
            T_CHECK(a - b <= 1e-2 * top + 1e-2 * fabs(a), "greedy %d parts at step %d, no near tie (%g vs %g)", i, t,
                    a, b);
        }
        free(lg), free(lc);
    }
    printf("  greedy: the CPU bf16's ids%s (%d tokens); logits along them within %.2g max|cpu| of the CPU's\n",
           equal ? "" : " up to a near tie", c[0].n, worst);
    free_all(g, NG), free_all(c, NG);
}

/* ---- the commands' entries ---- */
enum { MAXOUT = 1 << 16 };
static char dir[128], out_path[192], err_path[192];
static char out_a[MAXOUT], out_b[MAXOUT], err_a[MAXOUT], err_b[MAXOUT];

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* fn(argv of line's words), stdout into out, stderr into errs (stable lines only). */
static int run_cmd(int (*fn)(int, char **), const char *line_in, char *out, char *errs) {
    int rc = gpu_test_run_entry(fn, line_in, out_path, err_path, out, errs, MAXOUT);
    gpu_test_keep_own_lines(errs, 1);
    return rc;
}

/* A model directory from fixture's config (vocabulary 300 for the byte tokenizer's 259
 * ids, eos 258), random weights by `grpo init`. */
static void make_model(const char *fixture, const char *name) {
    char cfg[256], path[256], cmd[600], buf[4096];
    snprintf(path, sizeof path, "tests/fixtures/%s/config.json", fixture);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    snprintf(cfg, sizeof cfg, "%s/%s.json", dir, name);
    f = fopen(cfg, "w");
    T_CHECK(f && n > 0, "cannot make %s", cfg);
    if (!f) return;
    for (char *p = buf; *p; p++) { /* "vocab_size": 96 -> 300, "eos_token_id": 2 -> 258 */
        if (!strncmp(p, "\"vocab_size\": 96", 16)) fputs("\"vocab_size\": 300", f), p += 15;
        else if (!strncmp(p, "\"eos_token_id\": 2,", 18)) fputs("\"eos_token_id\": 258,", f), p += 17;
        else fputc(*p, f);
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "init --config %s --tokenizer assets/byte-tokenizer --seed 3 --output_dir %s/%s", cfg,
             dir, name);
    T_CHECK(run_cmd(cmd_init, cmd, out_a, err_a) == 0, "grpo init %s: %s", name, err_a);
}

#define GEN_LINE "generate --model %s/qwen2 --prompt hello --num_generations 2 --max_completion_length 5 --json "
#define EVAL_LINE "eval --model %s/qwen2 --dataset %s/d.jsonl --reward_funcs length:4 --num_generations 2 " \
                  "--max_completion_length 4 --json "

static int run_fmt(int (*fn)(int, char **), char *out, char *errs, const char *fmt, const char *extra) {
    char line[1024];
    snprintf(line, sizeof line, fmt, dir, dir);
    strncat(line, extra, sizeof line - strlen(line) - 1);
    return run_cmd(fn, line, out, errs);
}

/* One line on stderr names what and says the CPU generates. */
static void check_fallback_line(const char *what, const char *errs, const char *needle) {
    int said = 0;
    for (const char *p = errs; (p = strstr(p, "on the CPU")); p++) said++;
    T_CHECK(said == 1 && strstr(errs, needle), "%s: expected one line saying it generates on the CPU, naming %s; "
            "got:\n%s", what, needle, errs);
}

static void check_commands(void) {
    T_CHECK(run_fmt(cmd_generate, out_a, err_a, GEN_LINE, "--temperature 0") == 0, "gpu: %s", err_a);
    T_CHECK(strstr(err_a, "on the GPU (") != NULL, "the GPU run does not say it decodes on the GPU:\n%s", err_a);
    T_CHECK(run_fmt(cmd_generate, out_b, err_b, GEN_LINE, "--temperature 0 --use_cpu true --bf16 true") == 0, "cpu: %s",
            err_b);
    T_CHECK(lines(out_a) == 2 && lines(out_b) == 2, "greedy: %d and %d lines (2 expected)", lines(out_a),
            lines(out_b));
    T_CHECK(!strcmp(out_a, out_b), "greedy: the GPU's lines are not the CPU bf16's:\n%s---\n%s", out_a, out_b);
    printf("  grpo generate, greedy: the GPU's 2 JSON lines are the CPU bf16's\n");
    const char *sampled = "--temperature 1 --top_k 50 --top_p 0.9 --repetition_penalty 1.2 --generation_chunk_size ";
    char x[256];
    snprintf(x, sizeof x, "%s1", sampled);
    T_CHECK(run_fmt(cmd_generate, out_a, err_a, GEN_LINE, x) == 0, "gpu chunk 1: %s", err_a);
    snprintf(x, sizeof x, "%s64", sampled);
    T_CHECK(run_fmt(cmd_generate, out_b, err_b, GEN_LINE, x) == 0, "gpu chunk 64: %s", err_b);
    T_CHECK(lines(out_a) == 2 && !strcmp(out_a, out_b), "sampled: chunk 1 and 64 differ:\n%s---\n%s", out_a, out_b);
    printf("  grpo generate, sampled: --generation_chunk_size 1 and 64 the same lines\n");
    /* forms the GPU does not run: the CPU's output and one line */
    T_CHECK(run_fmt(cmd_generate, out_a, err_a, GEN_LINE, "--bf16 false") == 0, "--bf16 false: %s", err_a);
    T_CHECK(run_fmt(cmd_generate, out_b, err_b, GEN_LINE, "--bf16 false --use_cpu true") == 0, "cpu: %s", err_b);
    T_CHECK(!strcmp(out_a, out_b), "--bf16 false with a GPU: not the CPU run's lines");
    check_fallback_line("--bf16 false", err_a, "--bf16 false");
    const char *said = strstr(err_a, "grpo generate: --bf16");
    printf("  --bf16 false: %.*s\n", said ? (int)strcspn(said, "\n") : 0, said ? said : "");
    char q3[1024];
    /* a Qwen3 model (q/k norm in the decoding layer) on the GPU: greedy, the CPU bf16's lines */
    snprintf(q3, sizeof q3, "generate --model %s/qwen3 --prompt hello --num_generations 2 --max_completion_length 4 "
             "--json --temperature 0", dir);
    T_CHECK(run_cmd(cmd_generate, q3, out_a, err_a) == 0, "qwen3: %s", err_a);
    T_CHECK(strstr(err_a, "on the GPU (") != NULL, "qwen3: the run does not say it decodes on the GPU:\n%s", err_a);
    strncat(q3, " --use_cpu true --bf16 true", sizeof q3 - strlen(q3) - 1);
    T_CHECK(run_cmd(cmd_generate, q3, out_b, err_b) == 0, "qwen3 cpu: %s", err_b);
    T_CHECK(lines(out_a) == 2 && !strcmp(out_a, out_b), "qwen3, greedy: the GPU's lines are not the CPU bf16's:\n%s---\n%s",
            out_a, out_b);
    printf("  grpo generate, a Qwen3 model, greedy: on the GPU, the CPU bf16's lines\n");
    /* eval, greedy: the numbers of the CPU bf16 run */
    T_CHECK(run_fmt(cmd_eval, out_a, err_a, EVAL_LINE, "") == 0, "eval gpu: %s", err_a);
    T_CHECK(run_fmt(cmd_eval, out_b, err_b, EVAL_LINE, "--use_cpu true --bf16 true") == 0, "eval cpu: %s", err_b);
    T_CHECK(lines(out_a) == 1 && !strcmp(out_a, out_b), "grpo eval: the GPU's numbers are not the CPU bf16's:\n%s---\n%s",
            out_a, out_b);
    T_CHECK(run_fmt(cmd_eval, out_a, err_a, EVAL_LINE, "--bf16 false") == 0, "eval --bf16 false: %s", err_a);
    check_fallback_line("eval --bf16 false", err_a, "--bf16 false");
    printf("  grpo eval: the GPU's numbers are the CPU bf16's; --bf16 false on the CPU in one line\n");
}

/* No GPU (the driver not found): each command as it was, in silence. */
static void check_no_gpu(void) {
    char why[256] = "";
    GpuDevice d;
    int r = gpu_open(&d, why, sizeof why, &err);
    if (r != 0) {
        if (r == 1) gpu_close(&d);
        printf("  (a GPU is here: the no-GPU runs are checked where there is none)\n");
        return;
    }
    T_CHECK(run_fmt(cmd_generate, out_a, err_a, GEN_LINE, "") == 0, "no GPU: %s", err_a);
    T_CHECK(run_fmt(cmd_generate, out_b, err_b, GEN_LINE, "--use_cpu true") == 0, "no GPU, cpu: %s", err_b);
    T_CHECK(!strcmp(out_a, out_b) && !strcmp(err_a, err_b), "no GPU: generate's output differs from --use_cpu's:\n"
            "%s%s---\n%s%s", out_a, err_a, out_b, err_b);
    T_CHECK(run_fmt(cmd_eval, out_a, err_a, EVAL_LINE, "") == 0, "no GPU eval: %s", err_a);
    T_CHECK(run_fmt(cmd_eval, out_b, err_b, EVAL_LINE, "--use_cpu true") == 0, "no GPU eval, cpu: %s", err_b);
    T_CHECK(!strcmp(out_a, out_b) && !strcmp(err_a, err_b), "no GPU: eval's output differs from --use_cpu's");
    printf("  no GPU (%s): generate and eval print --use_cpu's stdout and stderr\n", why);
}

/* Seconds since the last lap, printed after a part: the emulated GPU is slow and the
 * test is kept to seconds, not minutes. */
static void lap(const char *what) {
    static double t0;
    double t = time_now_s();
    if (t0 > 0) printf("  (%s: %.1f s)\n", what, t - t0);
    t0 = t;
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    lap("");
    T_CHECK(!gpu_model_upload(&dev, &gm, &m, &err), "%s", err.msg);
    gdev = (GenDevice){&dev, &gm};
    Completion ref[G];
    check_chunking(ref);
    lap("chunking");
    check_groups();
    lap("groups");
    check_sampler_replay(ref);
    lap("sampler replay");
    free_all(ref, G);
    check_greedy();
    lap("greedy");
    check_turns();
    lap("turns");
    gpu_model_free(&dev, &gm);
    gpu_close(&dev); /* the commands open their own */
    check_commands();
    lap("commands");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_gpu_gen_%d", (int)getpid());
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    mkdir(dir, 0700);
    make_model("qwen2", "qwen2");
    make_model("qwen3", "qwen3");
    char d[256];
    snprintf(d, sizeof d, "%s/d.jsonl", dir);
    FILE *f = fopen(d, "w");
    if (f) fputs("{\"prompt\": \"1 + 1 =\"}\n{\"prompt\": \"hi\"}\n", f), fclose(f);
    T_CHECK(!model_load_ex(&m, "tests/fixtures/qwen2", WEIGHTS_BF16, &err), "%s", err.msg);
    check_no_gpu();
    int rc = gpu_test_main("test_gpu_gen", check_all);
    model_free(&m);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm)) printf("  (could not remove %s)\n", dir);
    return rc;
}
