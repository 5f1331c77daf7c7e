/* bench/bench_generate.c — speed of group generation (gen_groups) on random-weight
 * models, the figure bench/run.sh puts next to bench/torch_generate.py (the same
 * work in PyTorch, measured in the same run).
 *
 * Work per case: one 64-token prompt, prefilled once into the shared prefix slot,
 * then G completions of exactly 128 tokens (no eos ids, so none stops early),
 * sampled at temperature 1.0 with no other logits processor; with --prompts P, P
 * such prompts' groups decoded together (P x G rows a step, each prompt prefilled
 * into a slot of its own: a round of several prompts). Figure: completion tokens /
 * wall time of the whole gen_groups call (prefills included).
 *
 * Shapes (fp32 weights, N(0, 0.02^2), Qwen2 architecture: q/k/v bias, tied head):
 *   qwen2-0.5b  hidden 896, 24 layers, 14 heads, 2 KV heads, intermediate 4864, vocab 151936
 *   small       hidden 256,  4 layers,  8 heads, 4 KV heads, intermediate  768, vocab  32000
 *
 *   build/bench/bench_generate [--shape qwen2-0.5b|small|all] [--G N] [--prompts P] [--reps R] [--bf16]
 * prints one line per case:
 *   gen impl=grpo shape=S G=N P=P tokens=T seconds=X tokens_per_s=Y
 * With --bf16 each case is also run on the same weights rounded to bf16 and held so
 * (model_create_half: the layer matrices; decoding streams half their bytes, its
 * arithmetic fp32), impl=grpo-bf16; and on the fp32 model under mixed precision
 * (model_use_bf16_compute: what train --bf16 generates with, products in bf16 on the
 * bf16 copy, on AVX512_BF16 the vdpbf16ps kernel), impl=grpo-mixed; the three alternated.
 * With R > 1 the case is run R times and the best time is reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "gen/generate.h"
#include "io/safetensors.h"
#include "model/init.h"

enum { PROMPT_TOKENS = 64, COMPLETION_TOKENS = 128 };

typedef struct {
    const char *name;
    int hidden, layers, heads, kv_heads, intermediate, vocab;
} Shape;

static const Shape SHAPES[] = {
    {"qwen2-0.5b", 896, 24, 14, 2, 4864, 151936},
    {"small", 256, 4, 8, 4, 768, 32000},
};

static ModelConfig shape_config(const Shape *s) {
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:i}", "model_type", "qwen2",
                          "hidden_size", s->hidden, "intermediate_size", s->intermediate, "num_hidden_layers",
                          s->layers, "num_attention_heads", s->heads, "num_key_value_heads", s->kv_heads,
                          "vocab_size", s->vocab, "rms_norm_eps", 1e-6, "rope_theta", 1000000.0,
                          "tie_word_embeddings", 1, "max_position_embeddings", 32768);
    ModelConfig c;
    GrpoErr err;
    if (config_from_json(&c, j, s->name, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    json_decref(j);
    return c;
}

/* Seconds for one gen_groups call over P prompts' groups of G completions of n_tokens
 * each, all in one chunk (prompt p: prompts + p * PROMPT_TOKENS); checks that every
 * completion has exactly n_tokens tokens. */
static double time_group(Model *m, const int32_t *prompts, int P, int G, int n_tokens, uint64_t seed) {
    GenOpts o;
    gen_opts_default(&o);
    o.max_completion_length = n_tokens;
    o.seed = seed;
    o.sampler.temperature = 1.0f;
    o.chunk_size = P * G + P - 1; /* all P x G in one decode batch, as the PyTorch peer does (P parent slots) */
    o.n_eos = 0;
    Generator g;
    GrpoErr err;
    if (gen_create(&g, m, &o, PROMPT_TOKENS, &err)) {
        fprintf(stderr, "gen_create: %s\n", err.msg);
        exit(1);
    }
    Completion *out = calloc((size_t)P * G, sizeof(Completion));
    GenGroup *parts = calloc(P, sizeof(GenGroup));
    for (int i = 0; i < P * G; i++)
        out[i] = (Completion){.ids = malloc(sizeof(int32_t) * n_tokens), .logp = malloc(sizeof(float) * n_tokens)};
    for (int p = 0; p < P; p++)
        parts[p] = (GenGroup){prompts + (size_t)p * PROMPT_TOKENS, PROMPT_TOKENS, 0, G, (uint64_t)p, out + (size_t)p * G};
    double t0 = time_now_s();
    long n = gen_groups(&g, parts, P);
    double dt = time_now_s() - t0;
    if (n != (long)P * G * n_tokens || g.steps != n_tokens - 1) {
        fprintf(stderr, "gen_groups generated %ld tokens in %ld steps, expected %d in %d\n", n, g.steps,
                P * G * n_tokens, n_tokens - 1);
        exit(1);
    }
    for (int i = 0; i < P * G; i++) {
        if (out[i].n != n_tokens) {
            fprintf(stderr, "completion %d has %d tokens, expected %d\n", i, out[i].n, n_tokens);
            exit(1);
        }
        completion_free(&out[i]);
    }
    free(out), free(parts);
    gen_free(&g);
    return dt;
}

/* src's weights, the layer matrices rounded to bf16 and held so. */
static void make_half(Model *h, const Model *src, const Shape *s) {
    ModelConfig cfg = shape_config(s);
    model_create_half(h, &cfg, WEIGHTS_BF16_HELD);
    for (int i = 0; i < h->table.n; i++) {
        const ParamEntry *e = &h->table.entries[i], *se = &src->table.entries[i];
        const float *x = src->params + se->offset;
        if (e->half)
            for (size_t k = 0; k < e->numel; k++) h->half->params16[e->offset + k] = st_f32_to_bf16(x[k]);
        else memcpy(h->params + e->offset, x, sizeof(float) * e->numel);
    }
}

static void run_shape(const Shape *s, int only_G, int P, int reps, int bf16) {
    ModelConfig cfg = shape_config(s);
    Model m, h;
    model_create(&m, &cfg);
    model_init_random(&m, 1, 0.02f);
    if (bf16) make_half(&h, &m, s);
    int32_t *prompt = malloc(sizeof(int32_t) * PROMPT_TOKENS * P); /* prompt 0 the same whatever P */
    for (int t = 0; t < PROMPT_TOKENS * P; t++) prompt[t] = (int32_t)((t * 7919 + 13) % s->vocab);
    /* warm-up: touches the weights and starts the thread pool, as torch's peer does */
    time_group(&m, prompt, 1, 2, 4, 99);
    if (bf16) {
        time_group(&h, prompt, 1, 2, 4, 99);
        model_use_bf16_compute(&m);
        time_group(&m, prompt, 1, 2, 4, 99);
        model_use_fp32_compute(&m);
    }
    static const int Gs[] = {8, 32, 64};
    for (int gi = 0; gi < 3; gi++) {
        int G = Gs[gi];
        if (only_G > 0 && G != only_G) continue;
        double best = 1e30, best16 = 1e30, bestmix = 1e30;
        for (int r = 0; r < reps; r++) { /* alternated: both see the same neighbours */
            double dt = time_group(&m, prompt, P, G, COMPLETION_TOKENS, 1 + r);
            best = dt < best ? dt : best;
            if (!bf16) continue;
            dt = time_group(&h, prompt, P, G, COMPLETION_TOKENS, 1 + r), best16 = dt < best16 ? dt : best16;
            model_use_bf16_compute(&m);
            dt = time_group(&m, prompt, P, G, COMPLETION_TOKENS, 1 + r), bestmix = dt < bestmix ? dt : bestmix;
            model_use_fp32_compute(&m);
        }
        long tokens = (long)P * G * COMPLETION_TOKENS;
        printf("gen impl=grpo shape=%s G=%d P=%d tokens=%ld seconds=%.3f tokens_per_s=%.1f\n", s->name, G, P, tokens,
               best, tokens / best);
        if (bf16) {
            printf("gen impl=grpo-bf16 shape=%s G=%d P=%d tokens=%ld seconds=%.3f tokens_per_s=%.1f\n", s->name, G, P,
                   tokens, best16, tokens / best16);
            printf("gen impl=grpo-mixed shape=%s G=%d P=%d tokens=%ld seconds=%.3f tokens_per_s=%.1f\n", s->name, G, P,
                   tokens, bestmix, tokens / bestmix);
        }
        fflush(stdout);
    }
    free(prompt);
    model_free(&m);
    if (bf16) model_free(&h);
}

int main(int argc, char **argv) {
    const char *shape = "all";
    int only_G = 0, P = 1, reps = 1, bf16 = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) shape = argv[++i];
        else if (!strcmp(argv[i], "--G") && i + 1 < argc) only_G = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompts") && i + 1 < argc) P = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bf16")) bf16 = 1;
        else {
            fprintf(stderr, "usage: %s [--shape qwen2-0.5b|small|all] [--G N] [--prompts P] [--reps R] [--bf16]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || only_G < 0 || P < 1) {
        fprintf(stderr, "--reps, --G and --prompts must be >= 1\n");
        return 2;
    }
    int found = 0;
    for (size_t k = 0; k < sizeof SHAPES / sizeof SHAPES[0]; k++) {
        if (strcmp(shape, "all") && strcmp(shape, SHAPES[k].name)) continue;
        found = 1;
        run_shape(&SHAPES[k], only_G, P, reps, bf16);
    }
    if (!found) {
        fprintf(stderr, "unknown --shape %s (qwen2-0.5b, small, all)\n", shape);
        return 2;
    }
    return 0;
}
