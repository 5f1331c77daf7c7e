/* cli/cmd_eval.c — `grpo eval`: how well a model does on a dataset under the
 * same reward functions the trainer uses. For every example, --num_generations
 * completions (greedy by default), scored with a RewardSet; reported: the mean
 * weighted reward (TRL's nansum over functions, as in training), each function's
 * mean (NaN values left out, as TRL's nanmean), and pass@1.
 *
 * pass@1 here is the fraction of all completions (every example, every
 * generation) whose weighted reward is >= --pass_threshold (default 1.0, the
 * success value of exact_match / format). With N > 1 samples per example this is
 * the unbiased pass@1 estimate of Chen et al. 2021 (mean of c/n per problem, when
 * every example has the same n).
 *
 * Completions of example i come from stream rng_mix(0, i), as in `grpo generate`,
 * so `grpo generate --dataset` with the same seed shows the same completions.
 * Numbers on stdout (text, or one JSON object with --json); progress on stderr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/dataset.h"
#include "gen/generate.h"
#include "model/model_io.h"
#include "reward/reward.h"
#include "tokenizer/tokenizer.h"

#define SYNOPSIS "--model DIR --dataset FILE --reward_funcs SPEC... [options]"

typedef struct {
    long examples, completions, passed, tokens, stopped;
    double total_sum, total_sqsum;
    double *func_sum; /* [F] over the non-NaN values */
    long *func_n;     /* [F] */
} EvalTotals;

static double ratio(double a, long n) {
    return n > 0 ? a / n : NAN;
}

static void print_json_number(const char *key, double v, int comma) {
    if (isfinite(v)) printf("\"%s\": %.10g%s", key, v, comma ? ", " : "");
    else printf("\"%s\": null%s", key, comma ? ", " : "");
}

static void report(const EvalTotals *t, const RewardSet *rs, long G, double threshold, int json_out) {
    double mean = ratio(t->total_sum, t->completions);
    double var = ratio(t->total_sqsum, t->completions) - mean * mean;
    double sd = t->completions > 1 ? sqrt(fmax(var, 0) * t->completions / (t->completions - 1)) : NAN;
    double pass = ratio((double)t->passed, t->completions);
    if (json_out) {
        printf("{\"examples\": %ld, \"num_generations\": %ld, \"completions\": %ld, ", t->examples, G, t->completions);
        print_json_number("reward", mean, 1);
        print_json_number("reward_std", sd, 1);
        printf("\"rewards\": {");
        for (int f = 0; f < rs->n_funcs; f++) {
            json_t *name = json_string(rs->funcs[f]->name);
            char *d = json_dumps(name, JSON_ENCODE_ANY);
            printf("%s%s: {", f ? ", " : "", d ? d : "\"?\"");
            print_json_number("mean", ratio(t->func_sum[f], t->func_n[f]), 1);
            printf("\"count\": %ld, \"weight\": %.10g}", t->func_n[f], rs->weights[f]);
            free(d);
            json_decref(name);
        }
        printf("}, ");
        print_json_number("pass@1", pass, 1);
        printf("\"passed\": %ld, \"pass_threshold\": %.10g, ", t->passed, threshold);
        print_json_number("mean_completion_length", ratio((double)t->tokens, t->completions), 1);
        print_json_number("frac_stopped", ratio((double)t->stopped, t->completions), 0);
        printf("}\n");
        return;
    }
    printf("examples      %ld x %ld generation%s = %ld completions\n", t->examples, G, G == 1 ? "" : "s",
           t->completions);
    printf("reward        %.4f  (std %.4f; weighted sum of the functions, as in training)\n", mean, sd);
    for (int f = 0; f < rs->n_funcs; f++)
        printf("  %-11s %.4f  (weight %g, %ld values)\n", rs->funcs[f]->name, ratio(t->func_sum[f], t->func_n[f]),
               rs->weights[f], t->func_n[f]);
    printf("pass@1        %.4f  (%ld of %ld completions with reward >= %g)\n", pass, t->passed, t->completions,
           threshold);
    printf("length        %.1f tokens on average, %.0f%% ended by eos\n", ratio((double)t->tokens, t->completions),
           100 * ratio((double)t->stopped, t->completions));
}

int cmd_eval(int argc, char **argv) {
    const char *model_dir = NULL, *dataset = NULL;
    StrList funcs = {0}, weights = {0};
    long G = 1, maxc = 256, maxp = DATASET_DEFAULT_MAX_PROMPT_LENGTH, seed = 42, max_examples = 0, kv_mb = 1024;
    double temperature = 0.0, threshold = 1.0, timeout = REWARD_DEFAULT_TIMEOUT_S;
    int json_out = 0;
    Opt opts[] = {
        {"model", OPT_STR, &model_dir, "model directory (HF layout) (required)"},
        {"dataset", OPT_STR, &dataset, "JSON lines with a `prompt` column and the reward functions' columns (required)"},
        {"reward_funcs", OPT_LIST, &funcs, "reward function specs, as for grpo train (required; docs/rewards.md)"},
        {"reward_weights", OPT_LIST, &weights, "one weight per reward function (default 1.0 each)"},
        {"num_generations", OPT_INT, &G, "completions per example (default 1)"},
        {"temperature", OPT_FLOAT, &temperature, "sampling temperature (default 0 = greedy)"},
        {"max_completion_length", OPT_INT, &maxc, "tokens per completion at most (default 256)"},
        {"max_prompt_length", OPT_INT, &maxp, "prompt tokens kept, from the right (default 512)"},
        {"seed", OPT_INT, &seed, "random seed for sampling (default 42)"},
        {"max_examples", OPT_INT, &max_examples, "only the first N examples (default 0 = all)"},
        {"pass_threshold", OPT_FLOAT, &threshold, "a completion passes when its reward is >= this (default 1.0)"},
        {"reward_timeout", OPT_FLOAT, &timeout, "seconds to wait for a cmd: reward's reply (default 600)"},
        {"kv_cache_mb", OPT_INT, &kv_mb, "memory limit of the generation KV cache in MiB (default 1024)"},
        {"json", OPT_FLAG, &json_out, "one JSON object with the numbers and counts"},
    };
    int rc = args_parse("eval", SYNOPSIS, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (rc) {
        args_free();
        return rc == 1 ? 0 : rc;
    }
    char msg[600] = "";
    GenOpts go;
    gen_opts_default(&go);
    go.sampler.temperature = (float)temperature;
    go.max_completion_length = (int)maxc;
    go.seed = (uint64_t)seed;
    go.kv_cache_bytes = (size_t)kv_mb << 20;
    const char *bad = sampler_opts_check(&go.sampler);
    double *w = weights.n ? xmalloc(sizeof(double) * weights.n) : NULL;
    if (!model_dir || !dataset || funcs.n == 0)
        snprintf(msg, sizeof msg, "--model, --dataset and --reward_funcs are required (usage: grpo eval %s)", SYNOPSIS);
    else if (bad)
        snprintf(msg, sizeof msg, "%s", bad);
    else if (G < 1 || maxc < 1 || maxp < 1 || kv_mb < 1 || max_examples < 0)
        snprintf(msg, sizeof msg, "num_generations, max_completion_length, max_prompt_length and kv_cache_mb must "
                                  "be >= 1, max_examples >= 0");
    else if (!isfinite(threshold))
        snprintf(msg, sizeof msg, "pass_threshold must be a finite number");
    else if (weights.n && weights.n != funcs.n)
        snprintf(msg, sizeof msg, "reward_weights has %d values but reward_funcs has %d functions", weights.n, funcs.n);
    for (int i = 0; i < weights.n && !*msg; i++) {
        char *end;
        w[i] = strtod(weights.v[i], &end);
        if (end == weights.v[i] || *end) snprintf(msg, sizeof msg, "reward_weights: '%s' is not a number", weights.v[i]);
    }
    if (*msg) {
        fprintf(stderr, "grpo eval: %s\n", msg);
        free(w);
        args_free();
        return 2;
    }
    cli_setup_threads();
    GrpoErr err;
    RewardSet rs = {0};
    RewardOptions ro = {timeout};
    rc = reward_set_init(&rs, funcs.v, funcs.n, w, weights.n, &ro, &err);
    free(w);
    if (rc) {
        args_free();
        return cli_fail("eval", err.msg);
    }
    Model m;
    Tokenizer *tok = NULL;
    Dataset ds = {0};
    int have_model = 0;
    rc = model_load(&m, model_dir, &err);
    if (!rc) have_model = 1, rc = tok_load(&tok, model_dir, &err);
    if (!rc) rc = cli_collect_eos(&go, &m, tok, &err);
    if (!rc) rc = dataset_load(&ds, dataset, &err);
    if (!rc) rc = dataset_tokenize(&ds, tok, (int)maxp, -1, &err);
    int n_ex = ds.n;
    if (max_examples > 0 && max_examples < n_ex) n_ex = (int)max_examples;
    int longest = 1;
    if (!rc) rc = dataset_longest_prompt(&ds, n_ex, &longest, &err);
    Generator gen;
    if (!rc) rc = gen_create(&gen, &m, &go, longest, &err);
    if (rc) {
        dataset_free(&ds);
        tok_free(tok);
        if (have_model) model_free(&m);
        reward_set_free(&rs);
        args_free();
        return cli_fail("eval", err.msg);
    }
    fprintf(stderr, "grpo eval: %d example(s) x %ld completion(s), %s, %d reward function(s)\n", n_ex, G,
            temperature == 0 ? "greedy" : "sampled", rs.n_funcs);

    int F = rs.n_funcs;
    EvalTotals t = {0};
    t.func_sum = xcalloc(F, sizeof(double));
    t.func_n = xcalloc(F, sizeof(long));
    Completion *out = xcalloc(G, sizeof(Completion));
    char **text = xcalloc(G, sizeof(char *));
    RewardItem *items = xcalloc(G, sizeof(RewardItem));
    double *per_func = xmalloc(sizeof(double) * F * G), *total = xmalloc(sizeof(double) * G);
    int every = n_ex >= 20 ? n_ex / 20 : 1;
    double t0 = time_now_s();
    for (int p = 0; p < n_ex && !rc; p++) {
        DatasetExample *ex = &ds.ex[p];
        gen_group(&gen, ex->prompt_ids, ex->n_prompt_ids, (int)G, rng_mix(0, (uint64_t)p), out);
        for (int i = 0; i < G && !rc; i++) {
            size_t len = 0;
            if (tok_decode_generated(tok, out[i].ids, out[i].n, 1, &text[i], &len, &err)) rc = -1;
            items[i] = (RewardItem){ex->prompt, ex->prompt_text, text[i], out[i].ids, out[i].n, ex->row, ds.path, ex->line};
        }
        RewardBatch batch = {items, (int)G, 0};
        if (!rc) rc = reward_set_compute(&rs, &batch, per_func, total, &err);
        for (int i = 0; i < G && !rc; i++) {
            t.completions++;
            t.total_sum += total[i], t.total_sqsum += total[i] * total[i];
            t.passed += total[i] >= threshold;
            t.tokens += out[i].n;
            t.stopped += out[i].stopped;
            for (int f = 0; f < F; f++) {
                double v = per_func[(size_t)f * G + i];
                if (!isnan(v)) t.func_sum[f] += v, t.func_n[f]++;
            }
        }
        for (int i = 0; i < G; i++) {
            completion_free(&out[i]);
            free(text[i]);
            text[i] = NULL;
        }
        if (!rc) t.examples++;
        if (!rc && ((p + 1) % every == 0 || p + 1 == n_ex))
            fprintf(stderr, "grpo eval: %d/%d examples, reward %.4f, pass@1 %.4f, %.1f s\n", p + 1, n_ex,
                    t.total_sum / t.completions, (double)t.passed / t.completions, time_now_s() - t0);
    }
    if (!rc) report(&t, &rs, G, threshold, json_out);
    else cli_fail("eval", err.msg);
    free(out), free(text), free(items), free(per_func), free(total), free(t.func_sum), free(t.func_n);
    gen_free(&gen);
    dataset_free(&ds);
    tok_free(tok);
    model_free(&m);
    reward_set_free(&rs);
    args_free();
    return rc ? 1 : 0;
}
