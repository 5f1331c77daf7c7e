/* bench/bench_grpo_step.c — end-to-end speed of one GRPO optimizer step of the
 * trainer (trainer_run, the code `grpo train` runs), the figure bench/run.sh puts
 * next to bench/torch_grpo_step.py (the same step in PyTorch, measured in the same run).
 *
 * The step: one prompt of 64 tokens, a group of G completions of 128 tokens sampled
 * at temperature 1.0, rewarded by `length:50`, group advantages, then the dapo loss
 * (beta 0 unless --beta) over G/4 micro-batches of 4 completions with gradient
 * accumulation, gradient clipping at 1.0 and one AdamW step. Trainer defaults
 * otherwise (gradient checkpointing on unless --no_ckpt, selective unless
 * --ckpt_policy full, log-prob chunk 64 rows, KV cache limit 1 GiB).
 *
 * The model directory is written to a temporary directory: random fp32 Qwen2
 * weights (N(0, 0.02^2), q/k/v bias, tied head) of one of the shapes
 *   qwen2-0.5b    hidden  896, 24 layers, 14 heads, 2 KV heads, intermediate  4864, vocab 151936
 *   small         hidden  256,  4 layers,  8 heads, 4 KV heads, intermediate   768, vocab  32000
 *   qwen2.5-1.5b  hidden 1536, 28 layers, 12 heads, 2 KV heads, intermediate  8960, vocab 151936
 *   qwen2.5-3b    hidden 2048, 36 layers, 16 heads, 2 KV heads, intermediate 11008, vocab 151936
 *                 (the last two for --write_dir: bench/lora_rss.sh)
 * and a synthetic byte-level tokenizer whose vocabulary covers every model id (the
 * 256 byte tokens of assets/byte-tokenizer, filler tokens "x<id>" up to V - 3, and
 * its three ChatML specials at V-3..V-1): the trainer decodes every completion for
 * the reward, and tok_decode rejects an id the tokenizer does not have, so the
 * 259-id byte tokenizer itself cannot serve a model of vocab 32000. The tokenizer
 * names no eos token and config.json no eos_token_id, so every completion is exactly
 * 128 tokens, as in the PyTorch peer (unless --lengths uniform, below).
 *
 * Timing: max_steps = warm-up steps + 1; the figures are the last step's
 * step_time and step_time/{generation,scoring,reference,training} from the
 * trainer's own metrics.jsonl (logging_steps 1).
 *
 * With --lengths uniform, realistic completion lengths (bench/torch_grpo_step.py's
 * workload): completion i of a step is cut to L_i tokens, L_i = 16 + rng_mix(seed, i)
 * mod 113 (uniform over 16..128), seed 100 + w for warm-up step w and 1 for the timed
 * step — the peer's rule, so both sides train on the same lengths. The cut is made
 * where the rollout receives its completions: this program wraps gen_groups at
 * link time (-Wl,--wrap=gen_groups, the Makefile's line for it), lets the real one
 * decode all 128 tokens and then shortens each completion to its L_i, marking it
 * stopped, as an eos drawn at position L_i would have. Why there: the model has no
 * seam that makes a random-weight model stop at a chosen position, and the peer too
 * decodes its whole group to 128 tokens (HF generate runs until the longest stops,
 * and of 32 draws from 16..128 the longest is all but surely near 128), so generation
 * costs the same on both sides and is timed at full length; scoring, the reference
 * and training then see only the real tokens, as the trainer would after a real eos.
 * The library is not changed. The L_i-th token stays the sampled one (the peer keeps
 * its token there too): what it is does not change the cost.
 *
 * With --lora R the step trains LoRA adapters instead (use_peft, r R, lora_alpha
 * 2R, all-linear, dropout 0.05) on the frozen model: the same generation, and
 * train_s + opt_s (the rest of the step: clipping, AdamW) to compare.
 *
 *   build/bench/bench_grpo_step [--shape small|qwen2-0.5b] [--G 32] [--warmup 1] [--beta 0]
 *                               [--no_ckpt] [--ckpt_policy selective|full] [--bf16] [--kv_cache_mb N]
 *                               [--lora R] [--lengths fixed|uniform]
 *   build/bench/bench_grpo_step --shape small --write_dir DIR   (writes the model
 *       directory and DIR/data.jsonl, then exits: for bench/grpo_step_rss.sh)
 * prints one line per run:
 *   grpo_step impl=grpo shape=S G=N ckpt=0|1 policy=selective|full bf16=0|1 beta=B lora=R lengths=fixed|uniform
 *     step_s=X gen_s=..
 *             score_s=.. ref_s=.. train_s=.. opt_s=.. mean_len=L */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "gen/generate.h"
#include "grpo/trainer.h"
#include "io/fsutil.h"
#include "model/init.h"
#include "model/model_io.h"

enum { PROMPT_TOKENS = 64, COMPLETION_TOKENS = 128, MICRO_BATCH = 4, MIN_COMPLETION = 16 };

typedef struct {
    const char *name;
    int hidden, layers, heads, kv_heads, intermediate, vocab;
} Shape;

static const Shape SHAPES[] = {
    {"qwen2-0.5b", 896, 24, 14, 2, 4864, 151936},
    {"small", 256, 4, 8, 4, 768, 32000},
    {"qwen2.5-1.5b", 1536, 28, 12, 2, 8960, 151936},
    {"qwen2.5-3b", 2048, 36, 16, 2, 11008, 151936},
};

static void die(const char *what, const GrpoErr *err) {
    fprintf(stderr, "bench_grpo_step: %s: %s\n", what, err ? err->msg : "failed");
    exit(1);
}

/* GPT-2's byte -> printable code point map (the ByteLevel alphabet), as
 * tools/make_byte_tokenizer.py writes it. */
static int byte_char(int b) {
    static int map[256], ready;
    if (!ready) {
        int extra = 0;
        for (int i = 0; i < 256; i++) {
            int keep = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
            map[i] = keep ? i : 256 + extra++;
        }
        ready = 1;
    }
    return map[b];
}

static void utf8_put(char *out, int cp) {
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

/* tokenizer.json + tokenizer_config.json covering ids 0..V-1, no eos token. */
static void write_tokenizer(const char *dir, int V) {
    static const char *specials[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    json_t *vocab = json_object();
    char key[32];
    for (int b = 0; b < 256; b++) {
        utf8_put(key, byte_char(b));
        json_object_set_new(vocab, key, json_integer(b));
    }
    for (int id = 256; id < V - 3; id++) {
        snprintf(key, sizeof key, "x%d", id);
        json_object_set_new(vocab, key, json_integer(id));
    }
    json_t *added = json_array(), *decoder = json_object();
    for (int i = 0; i < 3; i++) {
        json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", V - 3 + i, "content",
                                               specials[i], "single_word", 0, "lstrip", 0, "rstrip", 0,
                                               "normalized", 0, "special", 1));
        snprintf(key, sizeof key, "%d", V - 3 + i);
        json_object_set_new(decoder, key, json_pack("{s:s, s:b}", "content", specials[i], "special", 1));
    }
    json_t *bl = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                           "use_regex", 1);
    json_t *model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:[]}", "type", "BPE", "dropout",
                              "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                              "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges");
    json_t *tok = json_pack("{s:s, s:n, s:n, s:o, s:n, s:O, s:O, s:O, s:o}", "version", "1.0", "truncation",
                            "padding", "added_tokens", added, "normalizer", "pre_tokenizer", bl, "post_processor",
                            bl, "decoder", bl, "model", model);
    json_decref(bl);
    json_t *cfg = json_pack("{s:o, s:n, s:n, s:s, s:b, s:i, s:s}", "added_tokens_decoder", decoder, "bos_token",
                            "eos_token", "pad_token", specials[0], "clean_up_tokenization_spaces", 0,
                            "model_max_length", 4096, "tokenizer_class", "PreTrainedTokenizerFast");
    char *p = fs_join(dir, "tokenizer.json");
    if (!tok || !cfg || json_dump_file(tok, p, JSON_COMPACT)) die(p, NULL);
    free(p);
    p = fs_join(dir, "tokenizer_config.json");
    if (json_dump_file(cfg, p, JSON_INDENT(1))) die(p, NULL);
    free(p);
    json_decref(tok);
    json_decref(cfg);
}

/* Model directory (config.json, model.safetensors, tokenizer) and dir/data.jsonl:
 * one prompt of exactly PROMPT_TOKENS bytes of ASCII text. */
static void write_model_dir(const Shape *s, const char *dir) {
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:i}", "model_type", "qwen2",
                          "hidden_size", s->hidden, "intermediate_size", s->intermediate, "num_hidden_layers",
                          s->layers, "num_attention_heads", s->heads, "num_key_value_heads", s->kv_heads,
                          "vocab_size", s->vocab, "rms_norm_eps", 1e-6, "rope_theta", 1000000.0,
                          "tie_word_embeddings", 1, "max_position_embeddings", 32768);
    ModelConfig cfg;
    GrpoErr err;
    if (config_from_json(&cfg, j, s->name, &err)) die("config", &err);
    json_decref(j);
    Model m;
    model_create(&m, &cfg);
    model_init_random(&m, 1, 0.02f);
    ModelSaveOpts so;
    model_save_opts_default(&so);
    if (model_save(&m, dir, &so, &err)) die("model_save", &err);
    model_free(&m);
    write_tokenizer(dir, s->vocab);
    static const char text[] = "Write a short story about a robot who learns to paint at night.\n";
    _Static_assert(sizeof text - 1 == PROMPT_TOKENS, "the prompt is 64 bytes = 64 byte tokens");
    char *p = fs_join(dir, "data.jsonl");
    FILE *f = fopen(p, "w");
    if (!f) die(p, NULL);
    json_t *row = json_pack("{s:s}", "prompt", text);
    json_dumpf(row, f, JSON_COMPACT);
    fputc('\n', f);
    fclose(f);
    json_decref(row);
    free(p);
}

/* --lengths uniform (see the top of the file): the drawn lengths, and which step's. */
static struct {
    int uniform;     /* 0: every completion COMPLETION_TOKENS tokens */
    int warmup;      /* warm-up steps before the timed one */
    long groups;     /* groups generated so far: one per step (one prompt, one process) */
} lengths;

/* Length of completion i of the group drawn with seed: uniform over
 * MIN_COMPLETION .. COMPLETION_TOKENS (bench/torch_grpo_step.py's draw_lengths). */
static int drawn_length(uint64_t seed, int i) {
    return MIN_COMPLETION + (int)(rng_mix(seed, (uint64_t)i) % (COMPLETION_TOKENS - MIN_COMPLETION + 1));
}

long __real_gen_groups(Generator *g, const GenGroup *groups, int n_groups);

/* The rollout's gen_groups (linked with --wrap): the real one's completions, each
 * then cut to its drawn length with --lengths uniform (a group's part at a time, in
 * the order drawn). Returns the real one's count: the tokens decoded. */
long __wrap_gen_groups(Generator *g, const GenGroup *groups, int n_groups) {
    long n = __real_gen_groups(g, groups, n_groups);
    if (n < 0 || !lengths.uniform) return n;
    for (int j = 0; j < n_groups; j++) {
        uint64_t seed = lengths.groups < lengths.warmup ? 100 + (uint64_t)lengths.groups : 1; /* the peer's seeds */
        lengths.groups++;
        for (int i = 0; i < groups[j].n; i++) {
            Completion *c = &groups[j].out[i];
            int L = drawn_length(seed, groups[j].first + i);
            if (c->n > L) c->n = L, c->stopped = 1;
        }
    }
    return n;
}

static double metric(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : -1;
}

int main(int argc, char **argv) {
    const char *shape = "small", *write_dir = NULL;
    int G = 32, warmup = 1, ckpt = 1, lora = 0, bf16 = 0;
    const char *policy = "selective"; /* the trainer's default */
    long kv_mb = 1024;
    double beta = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) shape = argv[++i];
        else if (!strcmp(argv[i], "--G") && i + 1 < argc) G = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--beta") && i + 1 < argc) beta = atof(argv[++i]);
        else if (!strcmp(argv[i], "--kv_cache_mb") && i + 1 < argc) kv_mb = atol(argv[++i]);
        else if (!strcmp(argv[i], "--no_ckpt")) ckpt = 0;
        else if (!strcmp(argv[i], "--ckpt_policy") && i + 1 < argc) policy = argv[++i];
        else if (!strcmp(argv[i], "--bf16")) bf16 = 1;
        else if (!strcmp(argv[i], "--lora") && i + 1 < argc) lora = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--write_dir") && i + 1 < argc) write_dir = argv[++i];
        else if (!strcmp(argv[i], "--lengths") && i + 1 < argc && !strcmp(argv[i + 1], "fixed")) lengths.uniform = 0, i++;
        else if (!strcmp(argv[i], "--lengths") && i + 1 < argc && !strcmp(argv[i + 1], "uniform")) lengths.uniform = 1, i++;
        else {
            if (!strcmp(argv[i], "--lengths"))
                fprintf(stderr, "bench_grpo_step: --lengths: expected fixed or uniform, got '%s'\n",
                        i + 1 < argc ? argv[i + 1] : "nothing");
            fprintf(stderr,
                    "usage: %s [--shape small|qwen2-0.5b] [--G N] [--warmup N] [--beta B] [--no_ckpt] "
                    "[--ckpt_policy selective|full] [--bf16] [--kv_cache_mb N] [--lora R] [--lengths fixed|uniform] "
                    "[--write_dir DIR]\n",
                    argv[0]);
            return 2;
        }
    }
    lengths.warmup = warmup;
    const Shape *s = NULL;
    for (size_t k = 0; k < sizeof SHAPES / sizeof SHAPES[0]; k++)
        if (!strcmp(shape, SHAPES[k].name)) s = &SHAPES[k];
    int full = !strcmp(policy, "full");
    if (!s || G < MICRO_BATCH || G % MICRO_BATCH || warmup < 0 || kv_mb < 1 || lora < 0 ||
        (!full && strcmp(policy, "selective"))) {
        fprintf(stderr, "--shape must be small, qwen2-0.5b, qwen2.5-1.5b or qwen2.5-3b, --G a multiple of %d, "
                "--warmup >= 0, --ckpt_policy selective or full\n", MICRO_BATCH);
        return 2;
    }
    if (write_dir) {
        write_model_dir(s, write_dir);
        return 0;
    }
    char tmp[] = "/tmp/bench_grpo_step.XXXXXX";
    if (!mkdtemp(tmp)) die("mkdtemp", NULL);
    char *model_dir = fs_join(tmp, "model"), *out_dir = fs_join(tmp, "out"), *data = fs_join(model_dir, "data.jsonl");
    write_model_dir(s, model_dir);

    TrainConfig c;
    train_config_default(&c);
    const char *funcs[] = {"length:50"};
    c.train.model_dir = model_dir, c.train.dataset = data, c.train.output_dir = out_dir;
    c.rewards.funcs = (StrList){1, funcs};
    c.num_generations = G;
    c.train.per_device_train_batch_size = MICRO_BATCH;
    c.train.gradient_accumulation_steps = G / MICRO_BATCH; /* one prompt's group per step */
    c.gen.max_completion_length = COMPLETION_TOKENS;
    c.train.max_steps = warmup + 1;
    c.train.logging_steps = 1;
    c.train.save_steps = 0;
    c.loss.beta = beta;
    c.train.gradient_checkpointing = ckpt;
    c.train.gradient_checkpointing_policy = full ? TRAIN_CKPT_FULL : TRAIN_CKPT_SELECTIVE;
    c.train.bf16 = bf16;
    c.gen.kv_cache_bytes = (size_t)kv_mb << 20;
    c.train.quiet = 1;
    static const char *all_linear[] = {"all-linear"};
    if (lora) {
        c.train.use_peft = 1;
        c.train.lora_r = lora;
        c.train.lora_alpha = 2.0 * lora;
        c.train.lora_target_modules = (StrList){1, all_linear};
    }
    GrpoErr err;
    if (trainer_run(&c, NULL, &err)) die("trainer_run", &err);

    /* the last step's line of metrics.jsonl is the timed step (the run's summary line,
     * train_runtime and the like, follows it and has no step_time) */
    char *mp = fs_join(out_dir, "metrics.jsonl");
    FILE *f = fopen(mp, "r");
    if (!f) die(mp, NULL);
    char line[1 << 14], last[1 << 14] = "";
    while (fgets(line, sizeof line, f))
        if (line[0] == '{' && strstr(line, "\"step_time\":")) memcpy(last, line, sizeof line);
    fclose(f);
    json_error_t je;
    json_t *o = json_loads(last, 0, &je);
    if (!o) die(mp, NULL);
    double step = metric(o, "step_time"), gen = metric(o, "step_time/generation"), score = metric(o, "step_time/scoring"),
           ref = metric(o, "step_time/reference"), train = metric(o, "step_time/training");
    printf("grpo_step impl=grpo shape=%s G=%d ckpt=%d policy=%s bf16=%d beta=%g lora=%d lengths=%s step_s=%.3f "
           "gen_s=%.3f score_s=%.3f ref_s=%.3f train_s=%.3f opt_s=%.3f mean_len=%.1f\n",
           s->name, G, ckpt, full ? "full" : "selective", bf16, beta, lora, lengths.uniform ? "uniform" : "fixed", step,
           gen, score, ref, train, step - gen - score - ref - train,
           metric(o, "completions/mean_length"));
    fflush(stdout);
    json_decref(o);
    free(mp);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "bench_grpo_step: could not remove %s\n", tmp);
    free(model_dir), free(out_dir), free(data);
    return 0;
}
