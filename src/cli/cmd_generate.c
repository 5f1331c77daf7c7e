/* cli/cmd_generate.c — `grpo generate`: sample completions from a model, the quick
 * way to look at one. A prompt from --prompt (or --chat, rendered with the chat
 * template) or every prompt of a --dataset; --num_generations completions each, with
 * TRL's sampling options. Text on stdout (or JSON lines with --json); a tokens/s
 * figure on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/dataset.h"
#include "gen/generate.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"

/* eos ids: the model's config/generation_config and the tokenizer's. */
int cli_collect_eos(GenOpts *o, const Model *m, const Tokenizer *tok, GrpoErr *err) {
    const TokSpecial *sp = tok_special(tok);
    return gen_opts_set_eos(o, m->cfg.eos_token_ids, m->cfg.n_eos, sp->eos_ids, sp->n_eos, err);
}

static void print_json_string(const char *s) {
    json_t *j = json_string(s);
    char *d = json_dumps(j, JSON_ENCODE_ANY);
    fputs(d ? d : "\"\"", stdout);
    free(d);
    json_decref(j);
}

int cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *prompt = NULL, *chat = NULL, *dataset = NULL;
    long G = 8, maxc = 256, maxp = DATASET_DEFAULT_MAX_PROMPT_LENGTH, seed = 42, top_k = 0;
    long kv_mb = 1024, chunk = 0, max_prompts = 0;
    double temperature = 1.0, top_p = 1.0, min_p = 0.0, rep = 1.0;
    int json_out = 0, no_share = 0;
    Opt opts[] = {
        {"model", OPT_STR, &model_dir, "model directory (HF layout) (required)"},
        {"prompt", OPT_STR, &prompt, "prompt text, used as it is"},
        {"chat", OPT_STR, &chat, "a user message, rendered with the model's chat template"},
        {"dataset", OPT_STR, &dataset, "JSON lines with a `prompt` column (string or messages)"},
        {"max_prompts", OPT_INT, &max_prompts, "with --dataset: only the first N prompts (0 = all)"},
        {"num_generations", OPT_INT, &G, "completions per prompt (default 8)"},
        {"max_completion_length", OPT_INT, &maxc, "tokens per completion at most (default 256)"},
        {"max_prompt_length", OPT_INT, &maxp, "prompt tokens kept, from the right (default 512)"},
        {"temperature", OPT_FLOAT, &temperature, "sampling temperature (default 1.0; 0 = greedy)"},
        {"top_p", OPT_FLOAT, &top_p, "nucleus sampling (default 1.0 = off)"},
        {"top_k", OPT_INT, &top_k, "keep the k most likely tokens (default 0 = off)"},
        {"min_p", OPT_FLOAT, &min_p, "drop tokens below min_p x the top probability (default 0)"},
        {"repetition_penalty", OPT_FLOAT, &rep, "penalty for tokens already present (default 1.0)"},
        {"seed", OPT_INT, &seed, "random seed (default 42)"},
        {"kv_cache_mb", OPT_INT, &kv_mb, "memory limit of the generation KV cache in MiB (default 1024)"},
        {"generation_chunk_size", OPT_INT, &chunk, "completions decoded together (default: as the limit allows)"},
        {"no_shared_prefix", OPT_FLAG, &no_share, "prefill the prompt per completion (for testing)"},
        {"json", OPT_FLAG, &json_out, "JSON lines with ids and finish_reason"},
    };
    int rc = args_parse("generate", "--model DIR (--prompt TEXT | --chat TEXT | --dataset FILE) [options]",
                        argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (rc) return rc == 1 ? 0 : rc;
    if (!model_dir || (!!prompt + !!chat + !!dataset) != 1) {
        fprintf(stderr, "grpo generate: --model and exactly one of --prompt, --chat, --dataset are required\n");
        return 2;
    }
    GenOpts go;
    gen_opts_default(&go);
    go.sampler.temperature = (float)temperature;
    go.sampler.top_p = (float)top_p;
    go.sampler.top_k = (int)top_k;
    go.sampler.min_p = (float)min_p;
    go.sampler.repetition_penalty = (float)rep;
    go.max_completion_length = (int)maxc;
    go.seed = (uint64_t)seed;
    go.share_prefix = !no_share;
    go.chunk_size = (int)chunk;
    go.kv_cache_bytes = (size_t)kv_mb << 20;
    const char *bad = sampler_opts_check(&go.sampler);
    if (bad || G < 1 || maxc < 1 || maxp < 1 || kv_mb < 1 || chunk < 0) {
        fprintf(stderr, "grpo generate: %s\n", bad ? bad : "num_generations, max_completion_length, max_prompt_length and kv_cache_mb must be >= 1");
        return 2;
    }
    cli_setup_threads();
    GrpoErr err;
    Model m;
    Tokenizer *tok = NULL;
    Dataset ds = {0};
    if (model_load(&m, model_dir, &err)) return cli_fail("generate", err.msg);
    if (tok_load(&tok, model_dir, &err)) {
        model_free(&m);
        return cli_fail("generate", err.msg);
    }
    if (cli_collect_eos(&go, &m, tok, &err)) {
        tok_free(tok);
        model_free(&m);
        return cli_fail("generate", err.msg);
    }
    /* prompts: a one-line in-memory dataset for --prompt / --chat */
    if (dataset) {
        rc = dataset_load(&ds, dataset, &err);
    } else {
        char tmpl[] = "/tmp/grpo-prompt-XXXXXX";
        int fd = mkstemp(tmpl);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        json_t *row = chat ? json_pack("{s:[{s:s,s:s}]}", "prompt", "role", "user", "content", chat)
                           : json_pack("{s:s}", "prompt", prompt);
        if (f) json_dumpf(row, f, JSON_COMPACT), fputc('\n', f), fclose(f);
        json_decref(row);
        rc = f ? dataset_load(&ds, tmpl, &err) : err_set(&err, "cannot write a temporary file");
        unlink(tmpl);
    }
    if (!rc) rc = dataset_tokenize(&ds, tok, (int)maxp, -1, &err);
    int n_prompts = ds.n;
    if (max_prompts > 0 && max_prompts < n_prompts) n_prompts = (int)max_prompts;
    int longest = 1;
    if (!rc) rc = dataset_longest_prompt(&ds, n_prompts, &longest, &err);
    Generator gen;
    if (!rc) rc = gen_create(&gen, &m, &go, longest, &err);
    if (rc) {
        dataset_free(&ds);
        tok_free(tok);
        model_free(&m);
        return cli_fail("generate", err.msg);
    }
    fprintf(stderr, "grpo generate: %d prompt(s) x %ld completions, decoding %d at a time (%.0f MB planned)\n",
            n_prompts, G, gen.chunk, gen.bytes / 1048576.0);
    Completion *out = xcalloc(G, sizeof(Completion));
    double t0 = time_now_s();
    long tokens = 0;
    for (int p = 0; p < n_prompts; p++) {
        DatasetExample *ex = &ds.ex[p];
        tokens += gen_group(&gen, ex->prompt_ids, ex->n_prompt_ids, (int)G, rng_mix(0, (uint64_t)p), out);
        if (!json_out) printf("=== prompt %d: %s\n", p, ex->prompt_text);
        for (int i = 0; i < G; i++) {
            char *text = NULL;
            size_t len = 0;
            if (tok_decode_generated(tok, out[i].ids, out[i].n, 1, &text, &len, &err)) text = xstrdup("");
            if (json_out) {
                printf("{\"prompt_index\": %d, \"generation_index\": %d, \"text\": ", p, i);
                print_json_string(text);
                printf(", \"ids\": [");
                for (int t = 0; t < out[i].n; t++) printf("%s%d", t ? ", " : "", out[i].ids[t]);
                printf("], \"finish_reason\": \"%s\"}\n", out[i].stopped ? "stop" : "length");
            } else {
                printf("--- %d.%d (%s, %d tokens)\n%s\n", p, i, out[i].stopped ? "stop" : "length", out[i].n, text);
            }
            free(text);
            completion_free(&out[i]);
        }
        fflush(stdout);
    }
    double dt = time_now_s() - t0;
    fprintf(stderr, "grpo generate: %ld tokens in %.2f s: %.1f tokens/s (prompt prefill included)\n", tokens, dt,
            tokens / (dt > 0 ? dt : 1e-9));
    free(out);
    gen_free(&gen);
    dataset_free(&ds);
    tok_free(tok);
    model_free(&m);
    return 0;
}
