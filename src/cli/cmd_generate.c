/* cli/cmd_generate.c — `grpo generate`: sample completions from a model, the quick
 * way to look at one. A prompt from --prompt (or --chat, rendered with the chat
 * template) or every prompt of a --dataset; --num_generations completions each, with
 * TRL's sampling options. Text on stdout (or JSON lines with --json); a tokens/s
 * figure on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/gpu_pick.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/dataset.h"
#include "gen/options.h"
#include "gen/pretrained.h"

static void print_json_string(const char *s) {
    json_t *j = json_string(s);
    char *d = json_dumps(j, JSON_ENCODE_ANY);
    fputs(d ? d : "\"\"", stdout);
    free(d);
    json_decref(j);
}

typedef struct {
    const char *model_dir, *prompt, *chat, *dataset, *adapter;
    int max_prompts, num_generations, max_prompt_length, no_shared_prefix, json, use_cpu;
    PromptOptions prompts; /* open-r1's: system_prompt, dataset_prompt_column for --dataset's rows */
    GenOpts gen;
    Bf16Options bf16;
} GenerateArgs;

#define A(f) offsetof(GenerateArgs, f)
static const OptSpec generate_options[] = {
    {"model", OPT_STR, A(model_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED | OPT_MODEL_PATH, "model directory (HF layout)"},
    {"adapter", OPT_STR, A(adapter), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "a PEFT LoRA adapter directory: with bf16 products (on the GPU, or --bf16 true) unmerged beside the bf16 "
     "base, as PEFT runs it on a bf16 model; else folded into fp32 weights as grpo merge does"},
    {"prompt", OPT_STR, A(prompt), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0, "prompt text, used as it is"},
    {"chat", OPT_STR, A(chat), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0, "a user message, rendered with the chat template"},
    {"dataset", OPT_STR, A(dataset), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_DATA_PATH,
     "JSON lines with a `prompt` column (string or messages)"},
    {"max_prompts", OPT_INT, A(max_prompts), 0, NULL, 0, 1 << 30, NULL, NULL, 0, "with --dataset: only the first N (0 = all)"},
    {"num_generations", OPT_INT, A(num_generations), 8, NULL, 1, 1 << 20, NULL, NULL, OPT_IN(OPT_SEC_GENERATION),
     "completions per prompt"},
    {"no_shared_prefix", OPT_BOOL, A(no_shared_prefix), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_SPEED),
     "prefill the prompt per completion (for testing)"},
    {"json", OPT_BOOL, A(json), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0, "JSON lines with ids and finish_reason"},
    {"use_cpu", OPT_BOOL, A(use_cpu), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_SPEED),
     "generate on the CPU where there is a GPU (transformers' use_cpu); without it an NVIDIA GPU, when one is "
     "found, generates with bf16 products"},
};

/* The prompts: the dataset, or a one-row dataset from --prompt / --chat. */
static int load_prompts(const GenerateArgs *a, Dataset *ds, GrpoErr *err) {
    DatasetConversation conv;
    if (a->dataset) return dataset_load_conversation(ds, a->dataset, prompt_options_conversation(&a->prompts, &conv), err);
    const char *sys = a->prompts.system_prompt;
    json_t *row = a->chat && sys ? json_pack("{s:[{s:s,s:s},{s:s,s:s}]}", "prompt", "role", "system", "content", sys,
                                             "role", "user", "content", a->chat)
                  : a->chat ? json_pack("{s:[{s:s,s:s}]}", "prompt", "role", "user", "content", a->chat)
                            : json_pack("{s:s}", "prompt", a->prompt);
    int rc = dataset_from_rows(ds, a->chat ? "--chat" : "--prompt", &row, 1, err);
    json_decref(row);
    return rc;
}

/* Prompt p's G completions on stdout: as text, or a JSON line each (--json). */
static void print_group(const Tokenizer *tok, int p, const char *prompt_text, const Completion *out, int G,
                        int json_out) {
    GrpoErr err;
    if (!json_out) printf("=== prompt %d: %s\n", p, prompt_text);
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
    }
    fflush(stdout);
}

int cmd_generate(int argc, char **argv) {
    GenerateArgs a;
    memset(&a, 0, sizeof a);
    OptGroup g[] = {OPT_GROUP_IN(generate_options, 0, OPT_SEC_MODEL_DATA), PROMPT_OPTIONS_GROUP(A(prompts)),
                    PROMPT_LENGTH_GROUP(A(max_prompt_length)),
                    GEN_OPTIONS_GROUP(A(gen)), SEED_OPTION_GROUP(A(gen.seed), OPT_SEC_GENERATION),
                    BF16_OPTIONS_GROUP(A(bf16))};
    int ng = sizeof g / sizeof g[0];
    gen_opts_default(&a.gen); /* first: it clears GenOpts */
    opts_defaults(g, ng, &a);
    int rc = args_parse("generate", "--model DIR (--prompt TEXT | --chat TEXT | --dataset FILE) [options]", argc, argv,
                        g, ng, &a);
    if (rc) return rc == 1 ? 0 : rc;
    a.gen.share_prefix = !a.no_shared_prefix;
    a.gen.chat_template = a.prompts.chat_template;
    const char *bad = sampler_opts_check(&a.gen.sampler);
    if (!bad) bad = bf16_options_form(&a.bf16, !!a.adapter, &a.gen.weights);
    if (!bad && (!!a.prompt + !!a.chat + !!a.dataset) != 1) bad = "exactly one of --prompt, --chat, --dataset is required";
    if (!bad && a.prompt && a.prompts.system_prompt)
        bad = "--system_prompt makes conversational prompts: give --chat or --dataset, not --prompt (text used as it is)";
    if (!bad && !a.dataset && a.prompts.dataset_prompt_column)
        bad = "--dataset_prompt_column names a column of --dataset's rows";
    if (bad) {
        fprintf(stderr, "grpo generate: %s\n", bad);
        args_free();
        return 2;
    }
    cli_setup_threads();
    GrpoErr err;
    Dataset ds;
    GenSession s;
    GpuDevice dev;
    int on_gpu = cli_gpu_pick("generate", a.use_cpu, &a.bf16, &dev, &a.gen.weights, &err);
    if (on_gpu < 0 || load_prompts(&a, &ds, &err) ||
        (on_gpu ? gen_session_open_gpu(&s, &dev, a.model_dir, a.adapter, &ds, &a.gen, a.max_prompt_length,
                                       a.max_prompts, &err)
                : gen_session_open(&s, a.model_dir, a.adapter, &ds, &a.gen, a.max_prompt_length, a.max_prompts,
                                   &err))) {
        if (on_gpu > 0) gpu_close(&dev);
        args_free();
        return cli_fail("generate", err.msg);
    }
    int n_prompts = s.n, G = a.num_generations, json_out = a.json;
    Generator *gen = &s.gen;
    Tokenizer *tok = s.tok;
    fprintf(stderr, "grpo generate: %d prompt(s) x %d completions, decoding %d at a time%s%s%s (%.0f MB planned)\n",
            n_prompts, G, gen->chunk, on_gpu ? " on the GPU (" : "", on_gpu ? dev.name : "", on_gpu ? ")" : "",
            gen->bytes / 1048576.0);
    /* the prompts whose groups one chunk decodes together, on buffers reused from batch to batch */
    int batch = gen_groups_per_chunk(gen, (int)G), maxc = a.gen.max_completion_length;
    Completion *out = xcalloc((size_t)batch * G, sizeof(Completion));
    GenGroup *parts = xmalloc(sizeof(GenGroup) * batch);
    for (size_t i = 0; i < (size_t)batch * G; i++)
        out[i] = (Completion){.ids = xmalloc(sizeof(int32_t) * maxc), .logp = xmalloc(sizeof(float) * maxc)};
    double t0 = time_now_s();
    long tokens = 0;
    for (int p0 = 0; p0 < n_prompts && rc == 0; p0 += batch) {
        int n = n_prompts - p0 < batch ? n_prompts - p0 : batch;
        for (int j = 0; j < n; j++) {
            DatasetExample *ex = &s.data.ex[p0 + j];
            parts[j] = (GenGroup){ex->prompt_ids, ex->n_prompt_ids, 0, (int)G, rng_mix(0, (uint64_t)(p0 + j)),
                                  out + (size_t)j * G};
        }
        long made = gen_groups(gen, parts, n);
        if (made < 0) { /* no turns here: the device failed */
            rc = cli_fail("generate", gen->err.msg);
            break;
        }
        tokens += made;
        for (int j = 0; j < n; j++) print_group(tok, p0 + j, s.data.ex[p0 + j].prompt_text, parts[j].out, (int)G, json_out);
    }
    double dt = time_now_s() - t0;
    if (rc == 0) fprintf(stderr, "grpo generate: %ld tokens in %.2f s: %.1f tokens/s (prompt prefill included)\n", tokens, dt,
            tokens / (dt > 0 ? dt : 1e-9));
    for (size_t i = 0; i < (size_t)batch * G; i++) completion_free(&out[i]);
    free(out), free(parts);
    gen_session_close(&s);
    if (on_gpu) gpu_close(&dev);
    args_free();
    return rc;
}
