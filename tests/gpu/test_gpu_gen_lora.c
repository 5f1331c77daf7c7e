/* tests/gpu/test_gpu_gen_lora.c — LoRA adapters in the GPU's decoding (gpu/decode.h's
 * gpu_decode_layer_lora, gpu/generate.h, gen/device.c) and `grpo generate` / `grpo eval`
 * with --adapter on the GPU: on the GPU where gpu_open finds one, on the tests'
 * emulated GPU otherwise. The form is the CPU's LoRA rollouts' (train/model.c): a
 * frozen bf16 base (WEIGHTS_BF16) with the adapters beside it in fp32, unmerged
 * (model/kvcache.c's model_decode with m->lora); the CPU's reference is that form on
 * the host Generator.
 *
 * - Random rank-4 adapters on every module (q, k, v, o, gate, up, down) of
 *   tests/fixtures/qwen2; they move the logits by a printed amount (the checks see them).
 * - Greedy: the host Generator's ids (or a near tie where they part), the GPU's logits
 *   along them within test_gpu_generate's bound (1e-2 max|cpu| + 1e-2 |cpu|).
 * - Sampled (T 1, top_k, top_p, min_p, repetition penalty): chunk sizes 1 and 64 and
 *   share_prefix on/off the same bits; the CPU's sampler on the GPU's logits (each
 *   completion replayed) the same tokens; on the emulated GPU the host Generator's
 *   ids and stops, log-probs within 1e-5 + 1e-5 relative.
 * - A batch of three different prompts, prefilled in one step and decoded together:
 *   each row's logits the bits it has alone in a GpuGen of its own.
 * - Borrowed adapters (gpu_gen_set_lora): views into a buffer of the test's own on a
 *   base model uploaded without adapters give the bits of the model uploaded with
 *   them; B zeroed in that buffer gives the base's bits from the next step (read in
 *   place, never copied); NULL gives the base.
 * - Qwen3 (q/k norm) with tests/fixtures/lora/adapter (PEFT's files): greedy as above.
 * - `grpo generate --adapter` on the GPU: no line about the CPU, greedy lines the host
 *   Generator's ids for the same prompt, sampled lines the same for
 *   --generation_chunk_size 1 and 64; --bf16 true the same lines as auto's, greedy and
 *   sampled, and with --use_cpu true the host Generator's ids (the CPU runs the
 *   same form); --bf16 false with --adapter: the CPU run's lines and one line; an
 *   adapter the bf16 form does not run unmerged (a module in some layers only): one
 *   line naming --bf16 false, on the GPU and on the CPU under --bf16 true.
 *   `grpo eval --adapter` on the GPU: no CPU line, --bf16 true auto's report.
 * Sizes are small: an emulated decoding step is about a second on a loaded machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "core/rng.h"
#include "gen/generate.h"
#include "gen/pretrained.h"
#include "gpu/generate.h"
#include "io/safetensors.h"
#include "model/kvcache.h"
#include "model/lora.h"
#include "model/model_io.h"
#define GPU_TEST_SEED 53
#include "gpu_test.h"
#include "gpu_test_cli.h"

enum { G = 4, MAXC = 6, NP = 5, R = 4 };
static const int32_t prompt[NP] = {11, 42, 7, 90, 3};
static const uint64_t stream_id = 99;
static Model m;        /* the fixture, WEIGHTS_BF16, m.lora = &lo */
static LoraLayers lo;
static GpuModel gm;    /* m with its adapters */
static GenDevice gdev;

/* Random adapters on every module, large enough to move the logits. */
static void make_lora(LoraLayers *l, const ModelConfig *cfg) {
    LoraSpec spec = {R, 8.0, 0.0, 0, (1u << LORA_N_MODULES) - 1};
    lora_layers_create(l, cfg, &spec, 5);
    for (size_t i = 0; i < l->table.total; i++) l->params[i] = 0.25f * frand();
}

static GenOpts gen_opts(int chunk, int share, double temperature, int on_gpu) {
    GenOpts o;
    gen_opts_default(&o);
    o.sampler.temperature = (float)temperature;
    if (temperature > 0) o.sampler.top_k = 40, o.sampler.top_p = 0.95f, o.sampler.min_p = 0.02f,
                         o.sampler.repetition_penalty = 1.3f;
    o.max_completion_length = MAXC, o.seed = 7, o.share_prefix = share, o.chunk_size = chunk;
    o.n_eos = 2, o.eos_ids[0] = 2, o.eos_ids[1] = 5;
    o.weights = WEIGHTS_BF16;
    o.device = on_gpu ? &gdev : NULL;
    return o;
}

static int generate(Model *mm, const GenOpts *o, int n_out, Completion *out) {
    Generator g;
    if (gen_create(&g, mm, o, NP, &err)) {
        T_CHECK(0, "gen_create: %s", err.msg);
        return -1;
    }
    long n = gen_group(&g, prompt, NP, n_out, stream_id, out);
    T_CHECK(n > 0, "gen_group: %ld (%s)", n, g.err.msg);
    gen_free(&g);
    return n > 0 ? 0 : -1;
}

static int same1(const Completion *a, const Completion *b, int logp) {
    return a->n == b->n && a->stopped == b->stopped && !memcmp(a->ids, b->ids, 4 * (size_t)a->n) &&
           (!logp || !memcmp(a->logp, b->logp, 4 * (size_t)a->n));
}

static void free_all(Completion *c, int n) {
    for (int i = 0; i < n; i++) completion_free(&c[i]);
}

/* The logits after each step of a completion fed a token a step into one slot, on the
 * GPU (a GpuGen of g; lora: gpu_gen_set_lora's views, or the model's own when
 * use_own) and, cpu != NULL, on the CPU (model_decode of mm). */
static void replay(Model *mm, const GpuModel *g, const int32_t *ids, int steps, float *gpu, float *cpu) {
    int V = mm->cfg.vocab_size, slots[NP] = {0};
    GpuGen rg;
    T_CHECK(!gpu_gen_create(&dev, &rg, g, 1, NP + MAXC, NP, &err), "%s", err.msg);
    KVCache kv;
    DecodeState ds;
    kv_cache_create(&kv, &mm->cfg, 1, NP + MAXC);
    decode_state_create(&ds, &mm->cfg, NP, NP + MAXC + 1);
    float *host = malloc(sizeof(float) * NP * V);
    for (int t = 0; t < steps; t++) {
        int n = t == 0 ? NP : 1;
        const int32_t *tok = t == 0 ? prompt : &ids[t - 1];
        T_CHECK(!gpu_gen_step(&dev, &rg, n, slots, tok, &err), "%s", err.msg);
        download(gpu + (size_t)t * V, rg.logits + sizeof(float) * (size_t)(n - 1) * V, sizeof(float) * V);
        if (cpu) {
            model_decode(mm, &kv, &ds, n, slots, tok, NULL, host);
            memcpy(cpu + (size_t)t * V, host + (size_t)(n - 1) * V, sizeof(float) * V);
        }
    }
    free(host);
    kv_cache_free(&kv);
    decode_state_free(&ds);
    gpu_gen_free(&dev, &rg);
}

/* The GPU's logits against the CPU's along a completion: the bound, and the figure. */
static double compare_logits(const char *what, const float *lg, const float *lc, size_t n) {
    double top = 0, worst = 0;
    for (size_t j = 0; j < n; j++) top = fmax(top, fabs(lc[j]));
    for (size_t j = 0; j < n; j++) {
        double e = fabs((double)lg[j] - lc[j]);
        worst = fmax(worst, e / top);
        T_CHECK(e <= 1e-2 * top + 1e-2 * fabs(lc[j]), "%s: logit %zu: GPU %g, CPU %g", what, j, lg[j], lc[j]);
    }
    return worst;
}

/* Greedy on the GPU against the host Generator's on the same form (mm with its
 * adapters; g its upload). */
static void check_greedy(const char *what, Model *mm, const GpuModel *g) {
    Completion cg, cc;
    GenOpts og = gen_opts(1, 1, 0.0, 1), oc = gen_opts(1, 1, 0.0, 0);
    GenDevice gd = {&dev, g};
    og.device = &gd;
    if (generate(mm, &og, 1, &cg) || generate(mm, &oc, 1, &cc)) return;
    int V = mm->cfg.vocab_size;
    float *lg = malloc(sizeof(float) * V * MAXC), *lc = malloc(sizeof(float) * V * MAXC);
    replay(mm, g, cc.ids, cc.n, lg, lc);
    double worst = compare_logits(what, lg, lc, (size_t)V * cc.n);
    int t = 0;
    while (t < cg.n && t < cc.n && cg.ids[t] == cc.ids[t]) t++;
    int equal = t == cg.n && t == cc.n;
    if (!equal) { /* where they part, the CPU's best two within the bound of each other */
        const float *z = lc + (size_t)t * V;
        float a = -INFINITY, b = -INFINITY, top = 0;
        for (int v = 0; v < V; v++) {
            top = fmaxf(top, fabsf(z[v]));
            if (z[v] > a) b = a, a = z[v];
            else if (z[v] > b) b = z[v];
        }
        T_CHECK(a - b <= 1e-2 * top + 1e-2 * fabs(a), "%s: greedy parts at step %d, no near tie (%g vs %g)", what, t,
                a, b);
    }
    printf("  %s, greedy: the host Generator's ids%s (%d tokens); the GPU's logits along them within %.2g "
           "max|cpu|\n", what, equal ? "" : " up to a near tie", cc.n, worst);
    free(lg), free(lc);
    completion_free(&cg), completion_free(&cc);
}

/* The adapters matter: the GPU's logits along a completion with them and without. */
static void check_effect(void) {
    int V = m.cfg.vocab_size;
    static const int32_t ids[3] = {4, 9, 16};
    float *with = malloc(sizeof(float) * V * 4), *base = malloc(sizeof(float) * V * 4);
    replay(&m, &gm, ids, 4, with, NULL);
    GpuModel g0;
    m.lora = NULL;
    T_CHECK(!gpu_model_upload(&dev, &g0, &m, &err), "%s", err.msg);
    m.lora = &lo;
    replay(&m, &g0, ids, 4, base, NULL);
    double top = 0, moved = 0;
    for (size_t j = 0; j < (size_t)V * 4; j++) top = fmax(top, fabs(base[j])), moved = fmax(moved, fabs(with[j] - base[j]));
    T_CHECK(moved > 0.05 * top, "the adapters move the logits by %.3g of max|base| only: the checks would see little",
            moved / top);
    printf("  the adapters move the logits by up to %.2f max|base|\n", moved / top);
    gpu_model_free(&dev, &g0);
    free(with), free(base);
}

static void check_sampled(void) {
    Completion ref[G], c[G], h[G];
    GenOpts o64 = gen_opts(64, 1, 1.0, 1);
    if (generate(&m, &o64, G, ref)) return;
    int stopped = 0;
    for (int i = 0; i < G; i++) stopped += ref[i].stopped;
    static const int chunks[] = {1, 64};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2; k++) {
            GenOpts o = gen_opts(chunks[k], s, 1.0, 1);
            if ((s == 1 && k == 1) || generate(&m, &o, G, c)) continue;
            for (int i = 0; i < G; i++)
                T_CHECK(same1(&c[i], &ref[i], 1), "chunk %d, share_prefix %d: completion %d differs from chunk 64's",
                        chunks[k], s, i);
            free_all(c, G);
        }
    printf("  sampled (T 1, top_k 40, top_p 0.95, min_p 0.02, repetition_penalty 1.3; %d of %d stopped): chunk 1 "
           "and 64 x share_prefix on/off the same bits\n", stopped, G);
    /* the CPU's sampler on the GPU's logits, each completion replayed */
    int V = m.cfg.vocab_size, checked = 0;
    SamplerScratch sc;
    sampler_scratch_create(&sc, V);
    for (int i = 0; i < G; i++) {
        float *logits = malloc(sizeof(float) * V * (size_t)ref[i].n);
        replay(&m, &gm, ref[i].ids, ref[i].n, logits, NULL);
        Rng rng;
        rng_init(&rng, o64.seed, rng_mix(stream_id, (uint64_t)i));
        int32_t ctx[NP + MAXC];
        memcpy(ctx, prompt, sizeof prompt);
        for (int t = 0; t < ref[i].n; t++, checked++) {
            float lp;
            int32_t tok = sampler_sample_logp(logits + (size_t)t * V, V, &o64.sampler, ctx, NP + t,
                                              rng_uniform_f64(&rng), &sc, &lp);
            T_CHECK(tok == ref[i].ids[t] && fabs((double)lp - ref[i].logp[t]) <= 1e-6 + 1e-6 * fabs(lp),
                    "completion %d token %d: the GPU sampled %d, the CPU's sampler on its logits %d", i, t,
                    ref[i].ids[t], tok);
            ctx[NP + t] = tok;
        }
        free(logits);
    }
    sampler_scratch_free(&sc);
    printf("  the CPU's sampler on the GPU's logits: %d of %d tokens the same\n", checked, checked);
    /* the host Generator on the same form: its completions (the emulated GPU's arithmetic is the CPU's up to
     * the order of fp32 sums; a real GPU's may flip a bf16 rounding, so there it is reported) */
    GenOpts oh = gen_opts(64, 1, 1.0, 0);
    if (!generate(&m, &oh, G, h)) {
        int same = 0;
        double worst = 0;
        for (int i = 0; i < G; i++) {
            int s = same1(&h[i], &ref[i], 0);
            same += s;
            for (int t = 0; s && t < h[i].n; t++) {
                double e = fabs((double)h[i].logp[t] - ref[i].logp[t]);
                worst = fmax(worst, e);
                T_CHECK(e <= 1e-5 + 1e-5 * fabs(h[i].logp[t]), "completion %d token %d: log-prob %.9g, the host's %.9g",
                        i, t, ref[i].logp[t], h[i].logp[t]);
            }
        }
        T_CHECK(same == G || !emulated, "sampled: %d of %d completions are the host Generator's", same, G);
        printf("  sampled: %d of %d completions the host Generator's ids and stops, log-probs within %.2g\n", same, G,
               worst);
        free_all(h, G);
    }
    free_all(ref, G);
}

/* Three different prompts prefilled in one step into slots 0..2, then two decoding
 * steps of the three rows: each row's logits the bits it has alone. */
static void check_batch(void) {
    enum { S = 3, L0 = 3, STEPS = 2 };
    static const int32_t ps[S][L0] = {{11, 42, 7}, {5, 80, 13}, {66, 1, 29}};
    static const int32_t next[STEPS][S] = {{17, 3, 44}, {8, 91, 2}};
    int V = m.cfg.vocab_size;
    float *alone = malloc(sizeof(float) * V * S * (STEPS + 1)), *batch = malloc(sizeof(float) * V * S * (STEPS + 1));
    for (int p = 0; p < S; p++) { /* alone: a GpuGen of one slot */
        GpuGen g1;
        int sl[L0] = {0};
        T_CHECK(!gpu_gen_create(&dev, &g1, &gm, 1, 8, L0, &err), "%s", err.msg);
        for (int t = 0; t <= STEPS; t++) {
            int n = t == 0 ? L0 : 1;
            T_CHECK(!gpu_gen_step(&dev, &g1, n, sl, t == 0 ? ps[p] : &next[t - 1][p], &err), "%s", err.msg);
            download(alone + ((size_t)t * S + p) * V, g1.logits + sizeof(float) * (size_t)(n - 1) * V, 4 * (size_t)V);
        }
        gpu_gen_free(&dev, &g1);
    }
    GpuGen gb;
    T_CHECK(!gpu_gen_create(&dev, &gb, &gm, S, 8, S * L0, &err), "%s", err.msg);
    int slots[S * L0];
    int32_t toks[S * L0];
    for (int p = 0; p < S; p++)
        for (int t = 0; t < L0; t++) slots[p * L0 + t] = p, toks[p * L0 + t] = ps[p][t];
    T_CHECK(!gpu_gen_step(&dev, &gb, S * L0, slots, toks, &err), "%s", err.msg);
    for (int p = 0; p < S; p++)
        download(batch + (size_t)p * V, gb.logits + sizeof(float) * (size_t)(p * L0 + L0 - 1) * V, 4 * (size_t)V);
    for (int t = 1; t <= STEPS; t++) {
        int sl[S] = {2, 0, 1}; /* another order than the slots' */
        int32_t tk[S];
        for (int r = 0; r < S; r++) tk[r] = next[t - 1][sl[r]];
        T_CHECK(!gpu_gen_step(&dev, &gb, S, sl, tk, &err), "%s", err.msg);
        for (int r = 0; r < S; r++)
            download(batch + ((size_t)t * S + sl[r]) * V, gb.logits + sizeof(float) * (size_t)r * V, 4 * (size_t)V);
    }
    gpu_gen_free(&dev, &gb);
    T_CHECK(!memcmp(alone, batch, sizeof(float) * V * S * (STEPS + 1)),
            "a batch of different prompts: a row's logits are not the bits it has alone");
    printf("  a batch of %d different prompts (prefilled in one step, rows in another order): each row's logits "
           "the bits it has alone\n", S);
    free(alone), free(batch);
}

/* Borrowed adapters: views into the test's own buffer, on a base uploaded without them. */
static void check_borrowed(void) {
    int V = m.cfg.vocab_size, L = m.cfg.n_layers, slots[NP] = {0};
    static const int32_t t1 = 17;
    GpuModel g0;
    m.lora = NULL;
    T_CHECK(!gpu_model_upload(&dev, &g0, &m, &err), "%s", err.msg);
    m.lora = &lo;
    CUdeviceptr buf = upload(lo.params, sizeof(float) * lo.table.total);
    GpuLayerLora *views = calloc((size_t)L, sizeof *views);
    for (int l = 0; l < L; l++)
        for (int mod = 0; mod < LORA_N_MODULES; mod++)
            views[l].has[mod] = gpu_lora_view(&views[l].mod[mod], &lo, &m.cfg, l, (LoraModule)mod, buf, 0);
    float *own = malloc(sizeof(float) * V * 2), *lent = malloc(sizeof(float) * V * 2), *base = malloc(sizeof(float) * V);
    GpuGen ga, gb, gc;
    T_CHECK(!gpu_gen_create(&dev, &ga, &gm, 1, 8, NP, &err) && !gpu_gen_create(&dev, &gb, &g0, 1, 8, NP, &err) &&
            !gpu_gen_create(&dev, &gc, &g0, 1, 8, NP, &err), "%s", err.msg);
    T_CHECK(!gpu_gen_set_lora(&dev, &gb, views, &err), "%s", err.msg);
    T_CHECK(!gpu_gen_step(&dev, &ga, NP, slots, prompt, &err) && !gpu_gen_step(&dev, &gb, NP, slots, prompt, &err) &&
            !gpu_gen_step(&dev, &gc, NP, slots, prompt, &err), "%s", err.msg);
    download(own, ga.logits + 4 * (size_t)(NP - 1) * V, 4 * (size_t)V);
    download(lent, gb.logits + 4 * (size_t)(NP - 1) * V, 4 * (size_t)V);
    /* B zeroed in the lender's buffer: the base from the next step (gc decoded the base throughout) */
    float *zero = calloc(lo.table.total, sizeof(float));
    for (int l = 0; l < L; l++)
        for (int mod = 0; mod < LORA_N_MODULES; mod++) {
            int e = lo.entry[l][mod];
            if (e >= 0) memcpy(zero + lo.table.entries[e].offset, lo.params + lo.table.entries[e].offset,
                               sizeof(float) * lo.table.entries[e].numel); /* A kept, B 0 */
        }
    T_CHECK(!gpu_put(&dev, buf, zero, sizeof(float) * lo.table.total, &err), "%s", err.msg);
    T_CHECK(!gpu_gen_step(&dev, &ga, 1, slots, &t1, &err) && !gpu_gen_step(&dev, &gc, 1, slots, &t1, &err), "%s",
            err.msg);
    download(own + V, ga.logits, 4 * (size_t)V);
    download(base, gc.logits, 4 * (size_t)V);
    /* gb: its cache holds the prompt under the adapters; a fresh slot decodes the base's prompt */
    T_CHECK(!gpu_gen_reset(&gb, 0, &err) && !gpu_gen_step(&dev, &gb, NP, slots, prompt, &err) &&
            !gpu_gen_step(&dev, &gb, 1, slots, &t1, &err), "%s", err.msg);
    download(lent + V, gb.logits, 4 * (size_t)V);
    T_CHECK(!memcmp(own, lent, 4 * (size_t)V), "lent views: not the bits of the model uploaded with its adapters");
    T_CHECK(!memcmp(lent + V, base, 4 * (size_t)V), "B zeroed in the lent buffer: not the base's bits");
    T_CHECK(memcmp(own + V, base, 4 * (size_t)V), "the model's own adapters changed with the lender's buffer");
    T_CHECK(!gpu_gen_set_lora(&dev, &ga, NULL, &err) && !gpu_gen_reset(&ga, 0, &err) &&
            !gpu_gen_step(&dev, &ga, NP, slots, prompt, &err) && !gpu_gen_step(&dev, &ga, 1, slots, &t1, &err), "%s",
            err.msg);
    download(own + V, ga.logits, 4 * (size_t)V);
    T_CHECK(!memcmp(own + V, base, 4 * (size_t)V), "gpu_gen_set_lora NULL: not the base's bits");
    printf("  borrowed adapters: views into another buffer give the uploaded model's bits; B zeroed there, the "
           "base's bits; NULL, the base's\n");
    gpu_gen_free(&dev, &ga), gpu_gen_free(&dev, &gb), gpu_gen_free(&dev, &gc);
    gpu_model_free(&dev, &g0);
    gpu_free(&dev, buf);
    free(views), free(own), free(lent), free(base), free(zero);
}

static void check_qwen3(void) {
    Model q;
    LoraLayers ql;
    GpuModel gq;
    T_CHECK(!model_load_ex(&q, "tests/fixtures/qwen3", WEIGHTS_BF16, &err), "%s", err.msg);
    T_CHECK(!lora_layers_load(&ql, "tests/fixtures/lora/adapter", &q, 0, &err), "%s", err.msg);
    q.lora = &ql;
    T_CHECK(!gpu_model_upload(&dev, &gq, &q, &err), "%s", err.msg);
    check_greedy("Qwen3 with tests/fixtures/lora/adapter", &q, &gq);
    gpu_model_free(&dev, &gq);
    lora_layers_free(&ql);
    model_free(&q);
}

/* ---- the commands' entries ---- */
enum { MAXOUT = 1 << 16 };
static char dir[128], out_path[192], err_path[192];
static char out_a[MAXOUT], out_b[MAXOUT], err_a[MAXOUT], err_b[MAXOUT];

static int run_cmd(int (*fn)(int, char **), const char *line_in, char *out, char *errs) {
    int rc = gpu_test_run_entry(fn, line_in, out_path, err_path, out, errs, MAXOUT);
    gpu_test_keep_own_lines(errs, 1);
    return rc;
}

/* A model directory of tests/fixtures/qwen2's config (vocabulary 300 for the byte
 * tokenizer, eos 258) by `grpo init`, and a random adapter for it in dir/adapter. */
static void make_model_and_adapter(void) {
    char cfg[256], cmd[600], buf[4096], md[256], ad[256];
    FILE *f = fopen("tests/fixtures/qwen2/config.json", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    snprintf(cfg, sizeof cfg, "%s/qwen2.json", dir);
    f = fopen(cfg, "w");
    T_CHECK(f && n > 0, "cannot make %s", cfg);
    if (!f) return;
    for (char *p = buf; *p; p++) {
        if (!strncmp(p, "\"vocab_size\": 96", 16)) fputs("\"vocab_size\": 300", f), p += 15;
        else if (!strncmp(p, "\"eos_token_id\": 2,", 18)) fputs("\"eos_token_id\": 258,", f), p += 17;
        else fputc(*p, f);
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "init --config %s --tokenizer assets/byte-tokenizer --seed 3 --output_dir %s/qwen2", cfg,
             dir);
    T_CHECK(run_cmd(cmd_init, cmd, out_a, err_a) == 0, "grpo init: %s", err_a);
    Model mm;
    LoraLayers l;
    snprintf(md, sizeof md, "%s/qwen2", dir);
    snprintf(ad, sizeof ad, "%s/adapter", dir);
    T_CHECK(!model_load_ex(&mm, md, WEIGHTS_FP32, &err), "%s", err.msg);
    make_lora(&l, &mm.cfg);
    LoraSaveOpts so = {md, NULL};
    T_CHECK(!lora_layers_save(&l, ad, &so, &err), "%s", err.msg);
    lora_layers_free(&l);
    model_free(&mm);
}

#define GEN_LINE "generate --model %s/qwen2 --adapter %s/adapter --prompt hello --num_generations 2 " \
                 "--max_completion_length 5 --json "

static int run_gen(char *out, char *errs, const char *extra) {
    char line[1024];
    snprintf(line, sizeof line, GEN_LINE, dir, dir);
    strncat(line, extra, sizeof line - strlen(line) - 1);
    return run_cmd(cmd_generate, line, out, errs);
}

/* The command's completions on the host: its session (the same prompt and options:
 * greedy, or SAMPLED's), the adapter attached unmerged to the bf16 base; each
 * completion's ids as the command's JSON writes them. */
#define SAMPLED "--temperature 1 --top_k 50 --top_p 0.9 --repetition_penalty 1.2 "
static void host_ids(int sampled, char ids[2][256]) {
    char md[256], ad[256];
    snprintf(md, sizeof md, "%s/qwen2", dir);
    snprintf(ad, sizeof ad, "%s/adapter", dir);
    Dataset ds;
    json_t *row = json_pack("{s:s}", "prompt", "hello");
    T_CHECK(!dataset_from_rows(&ds, "--prompt", &row, 1, &err), "%s", err.msg);
    json_decref(row);
    GenOpts o;
    gen_opts_default(&o);
    o.max_completion_length = 5, o.weights = WEIGHTS_BF16;
    if (sampled) o.sampler.temperature = 1, o.sampler.top_k = 50, o.sampler.top_p = 0.9f,
                 o.sampler.repetition_penalty = 1.2f;
    else o.sampler.temperature = 0;
    GenSession s;
    LoraLayers l;
    Completion c[2];
    ids[0][0] = ids[1][0] = 0;
    if (gen_session_open(&s, md, NULL, &ds, &o, 0, 0, &err)) {
        T_CHECK(0, "%s", err.msg);
        return;
    }
    T_CHECK(!lora_layers_load(&l, ad, s.model, 0, &err), "%s", err.msg);
    s.model->lora = &l; /* model_decode reads it at each step */
    long made = gen_group(&s.gen, s.data.ex[0].prompt_ids, s.data.ex[0].n_prompt_ids, 2, rng_mix(0, 0), c);
    T_CHECK(made > 0, "host generation: %s", s.gen.err.msg);
    for (int i = 0; i < 2 && made > 0; i++) {
        size_t k = (size_t)snprintf(ids[i], 256, "\"ids\": [");
        for (int t = 0; t < c[i].n && k < 200; t++) k += (size_t)snprintf(ids[i] + k, 256 - k, "%s%d", t ? ", " : "", c[i].ids[t]);
        snprintf(ids[i] + k, 256 - k, "]");
        completion_free(&c[i]);
    }
    gen_session_close(&s);
    lora_layers_free(&l);
}

/* out's two lines hold ids[0] and ids[1], in that order. */
static int lines_hold(const char *out, char ids[2][256]) {
    const char *nl = strchr(out, '\n'), *a = strstr(out, ids[0]), *b = nl ? strstr(nl, ids[1]) : NULL;
    return ids[0][0] && ids[1][0] && nl && a && a < nl && b;
}

/* One line on stderr says the CPU generates, and names what. */
static void check_fallback_line(const char *what, const char *errs, const char *needle) {
    int said = 0;
    for (const char *p = errs; (p = strstr(p, "on the CPU")); p++) said++;
    T_CHECK(said == 1 && strstr(errs, needle), "%s: expected one line saying it generates on the CPU, naming %s; "
            "got:\n%s", what, needle, errs);
}

/* generate --adapter --bf16 true (extra: the run's sampling options): on the GPU the
 * lines out_a holds (auto's run, just made), with no CPU line; with --use_cpu true the
 * CPU runs the same form, the bf16 base with the adapter unmerged: the host
 * Generator's ids. */
static void check_bf16_true(const char *what, const char *extra, char ids[2][256]) {
    char opts[256];
    snprintf(opts, sizeof opts, "%s --bf16 true", extra);
    T_CHECK(run_gen(out_b, err_b, opts) == 0, "%s --bf16 true --adapter: %s", what, err_b);
    T_CHECK(!strcmp(out_a, out_b) && strstr(err_b, "on the GPU (") && !strstr(err_b, "on the CPU"),
            "%s --adapter --bf16 true: not auto's lines on the GPU:\n%s---\n%s%s", what, out_a, out_b, err_b);
    strncat(opts, " --use_cpu true", sizeof opts - strlen(opts) - 1);
    T_CHECK(run_gen(out_b, err_b, opts) == 0, "%s --bf16 true --use_cpu true --adapter: %s", what, err_b);
    T_CHECK(lines_hold(out_b, ids) && !strstr(err_b, "on the GPU"), "%s --adapter --bf16 true --use_cpu true: the "
            "CPU's lines do not hold the host Generator's %s, %s:\n%s", what, ids[0], ids[1], out_b);
    printf("  grpo generate --adapter --bf16 true, %s: auto's lines on the GPU; on the CPU the host Generator's\n",
           what);
}

static void check_commands(void) {
    char ids[2][256], line[1024];
    T_CHECK(run_gen(out_a, err_a, "--temperature 0") == 0, "gpu: %s", err_a);
    T_CHECK(strstr(err_a, "on the GPU (") && !strstr(err_a, "on the CPU"),
            "--adapter: the run does not decode on the GPU alone:\n%s", err_a);
    host_ids(0, ids);
    T_CHECK(lines_hold(out_a, ids), "greedy --adapter: the GPU's lines do not hold the host Generator's %s:\n%s",
            ids[0], out_a);
    snprintf(line, sizeof line, "generate --model %s/qwen2 --prompt hello --num_generations 2 --max_completion_length 5 "
             "--json --temperature 0", dir);
    T_CHECK(run_cmd(cmd_generate, line, out_b, err_b) == 0, "base: %s", err_b);
    T_CHECK(strcmp(out_a, out_b), "greedy: the lines with --adapter are the base's: the check cannot see the adapter");
    printf("  grpo generate --adapter, greedy: on the GPU, the host Generator's %s (the base's differ)\n", ids[0]);
    check_bf16_true("greedy", "--temperature 0", ids);
    T_CHECK(run_gen(out_a, err_a, SAMPLED "--generation_chunk_size 1") == 0, "gpu chunk 1: %s", err_a);
    T_CHECK(run_gen(out_b, err_b, SAMPLED "--generation_chunk_size 64") == 0, "gpu chunk 64: %s", err_b);
    T_CHECK(strchr(out_a, '\n') && !strcmp(out_a, out_b), "sampled --adapter: chunk 1 and 64 differ:\n%s---\n%s",
            out_a, out_b);
    host_ids(1, ids);
    /* the host's completions: on the emulated GPU always (the CPU's arithmetic up to the order of fp32 sums);
     * a real GPU's may flip a bf16 rounding, so there it is reported */
    int same = lines_hold(out_a, ids);
    T_CHECK(same || !emulated, "sampled --adapter: the GPU's lines do not hold the host Generator's %s, %s:\n%s",
            ids[0], ids[1], out_a);
    printf("  grpo generate --adapter, sampled: --generation_chunk_size 1 and 64 the same lines; %sthe host "
           "Generator's (%s, %s)\n", same ? "" : "NOT ", ids[0], ids[1]);
    check_bf16_true("sampled", SAMPLED "--generation_chunk_size 64", ids);
    /* --bf16 false: the CPU's folded fp32 form, with one line */
    T_CHECK(run_gen(out_a, err_a, "--bf16 false") == 0, "--bf16 false: %s", err_a);
    T_CHECK(run_gen(out_b, err_b, "--bf16 false --use_cpu true") == 0, "cpu: %s", err_b);
    T_CHECK(!strcmp(out_a, out_b), "--adapter --bf16 false with a GPU: not the CPU run's lines");
    check_fallback_line("--adapter --bf16 false", err_a, "--bf16 false");
    const char *said = strstr(err_a, "grpo generate: --bf16");
    printf("  --adapter --bf16 false: the CPU run's lines and one line: %.*s\n", said ? (int)strcspn(said, "\n") : 0,
           said ? said : "");
    /* eval with the adapter on the GPU */
    snprintf(line, sizeof line, "eval --model %s/qwen2 --adapter %s/adapter --dataset %s/d.jsonl --reward_funcs "
             "length:4 --num_generations 2 --max_completion_length 4 --json", dir, dir, dir);
    T_CHECK(run_cmd(cmd_eval, line, out_a, err_a) == 0, "eval --adapter: %s", err_a);
    T_CHECK(!strstr(err_a, "on the CPU") && strchr(out_a, '\n'), "eval --adapter on the GPU:\n%s%s", out_a, err_a);
    strncat(line, " --bf16 true", sizeof line - strlen(line) - 1);
    T_CHECK(run_cmd(cmd_eval, line, out_b, err_b) == 0, "eval --adapter --bf16 true: %s", err_b);
    T_CHECK(!strcmp(out_a, out_b), "eval --adapter --bf16 true: not auto's report on the GPU:\n%s---\n%s", out_a,
            out_b);
    printf("  grpo eval --adapter: on the GPU, no CPU line; --bf16 true the same report\n");
}

/* An adapter of a module in some layers only (PEFT's target_modules as a regular
 * expression naming layer 0's q_proj): the GPU does not run it unmerged. Written with
 * the library's writers: the saved adapter's config with that target, layer 0's pair. */
static void check_refused_adapter(void) {
    char md[256], ad[256], one_dir[256], path[300];
    snprintf(md, sizeof md, "%s/qwen2", dir);
    snprintf(ad, sizeof ad, "%s/adapter", dir);
    snprintf(one_dir, sizeof one_dir, "%s/adapter1", dir);
    mkdir(one_dir, 0700);
    snprintf(path, sizeof path, "%s/adapter_config.json", ad);
    json_t *cfg = json_load_file(path, 0, NULL);
    T_CHECK(cfg != NULL, "cannot read %s", path);
    if (!cfg) return;
    json_object_set_new(cfg, "target_modules", json_string("model\\.layers\\.0\\.self_attn\\.q_proj"));
    snprintf(path, sizeof path, "%s/adapter_config.json", one_dir);
    T_CHECK(json_dump_file(cfg, path, 0) == 0, "cannot write %s", path);
    json_decref(cfg);
    Model mm;
    LoraLayers full;
    T_CHECK(!model_load_ex(&mm, md, WEIGHTS_FP32, &err) && !lora_layers_load(&full, ad, &mm, 0, &err), "%s", err.msg);
    int e = full.entry[0][LORA_Q];
    StWriteTensor t[2];
    for (int k = 0; k < 2; k++) {
        const ParamEntry *pe = &full.table.entries[e + k];
        t[k] = (StWriteTensor){.name = pe->name, .dtype = ST_F32, .ndim = 2, .data = full.params + pe->offset};
        t[k].shape[0] = pe->shape[0], t[k].shape[1] = pe->shape[1];
    }
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", one_dir);
    T_CHECK(!st_write_file(path, t, 2, &err), "%s", err.msg);
    lora_layers_free(&full);
    model_free(&mm);
    char line[1024];
    snprintf(line, sizeof line, "generate --model %s/qwen2 --adapter %s --prompt hello --num_generations 1 "
             "--max_completion_length 2", dir, one_dir);
    int rc = run_cmd(cmd_generate, line, out_a, err_a);
    T_CHECK(rc == 1 && strstr(err_a, "layer 1") && strstr(err_a, "--bf16 false"),
            "an adapter of layer 0 alone: expected one line naming the layer and --bf16 false (rc %d):\n%s", rc, err_a);
    printf("  an adapter of layer 0 alone: %.*s\n", (int)strcspn(err_a, "\n"), err_a);
    char cpu[1100];
    snprintf(cpu, sizeof cpu, "%s --use_cpu true --bf16 true", line); /* the same form, the same line */
    rc = run_cmd(cmd_generate, cpu, out_b, err_b);
    const char *nl = strchr(err_b, '\n');
    T_CHECK(rc == 1 && strstr(err_b, "layer 1") && strstr(err_b, "--bf16 false") && nl && !nl[1],
            "the same adapter with --use_cpu true --bf16 true: expected the one line (rc %d):\n%s", rc, err_b);
    strncat(line, " --use_cpu true", sizeof line - strlen(line) - 1);
    T_CHECK(run_cmd(cmd_generate, line, out_b, err_b) == 0, "the same adapter on the CPU (folded): %s", err_b);
    printf("  the same adapter with --use_cpu true --bf16 true: the same line; with --use_cpu true (auto): folded, "
           "generated on the CPU\n");
}

static void check_all(void) {
    printf("%s, compute capability %d.%d\n", dev.name, dev.cc_major, dev.cc_minor);
    T_CHECK(!gpu_model_upload(&dev, &gm, &m, &err), "%s", err.msg);
    gdev = (GenDevice){&dev, &gm};
    check_effect();
    check_greedy("Qwen2 with random adapters on every module", &m, &gm);
    check_sampled();
    check_batch();
    check_borrowed();
    check_qwen3();
    gpu_model_free(&dev, &gm);
    gpu_close(&dev); /* the commands open their own */
    check_commands();
    check_refused_adapter();
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_gpu_gen_lora_%d", (int)getpid());
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    mkdir(dir, 0700);
    make_model_and_adapter();
    char d[256];
    snprintf(d, sizeof d, "%s/d.jsonl", dir);
    FILE *f = fopen(d, "w");
    if (f) fputs("{\"prompt\": \"1 + 1 =\"}\n{\"prompt\": \"hi\"}\n", f), fclose(f);
    T_CHECK(!model_load_ex(&m, "tests/fixtures/qwen2", WEIGHTS_BF16, &err), "%s", err.msg);
    make_lora(&lo, &m.cfg);
    m.lora = &lo;
    int rc = gpu_test_main("test_gpu_gen_lora", check_all);
    m.lora = NULL;
    lora_layers_free(&lo);
    model_free(&m);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    return rc;
}
