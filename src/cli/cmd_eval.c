/* cli/cmd_eval.c — `grpo eval`: how well a model does on a dataset under the
 * same reward functions the trainer uses. For every example, --num_generations
 * completions (greedy by default, where training's evaluation samples
 * num_generations_eval at the training temperature, as TRL's does: both print
 * which), scored with a RewardSet; reported: the mean
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
 * so `grpo generate --dataset` with the same seed shows the same completions
 * (eval/evaluate.h does the work; training's eval_strategy uses it too).
 * Prompts are built as `grpo train` builds them, open-r1's options included (gen/options.h's
 * rows), and --config reads a training recipe: what is eval's is taken, the training
 * settings are left aside (args_config_also), so a model is measured on its recipe's prompts.
 *
 * Numbers on stdout (text, or one JSON object with --json); progress on stderr. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/gpu_pick.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/dataset.h"
#include "eval/evaluate.h"
#include "gen/options.h"
#include "gen/pretrained.h"
#include "grpo/trainer.h"
#include "reward/reward.h"
#include "env/env_args.h"
#include "env/env_loop.h"
#include "tools/tool_args.h"
#include "tools/tool_loop.h"
#include "train/hf_state.h"

#define SYNOPSIS "--model DIR --dataset FILE --reward_funcs SPEC... [options]"

static void print_json_number(const char *key, double v, int comma) {
    if (isfinite(v)) printf("\"%s\": %.10g%s", key, v, comma ? ", " : "");
    else printf("\"%s\": null%s", key, comma ? ", " : "");
}

static void report(const EvalTotals *t, const RewardSet *rs, long G, const SamplerOpts *so, double threshold,
                   int json_out) {
    double mean = eval_reward(t), sd = eval_reward_std(t), pass = eval_pass_at_1(t);
    if (json_out) {
        printf("{\"examples\": %ld, \"num_generations\": %ld, \"completions\": %ld, ", t->examples, G, t->completions);
        printf("\"temperature\": %.10g, ", so->temperature);
        print_json_number("reward", mean, 1);
        print_json_number("reward_std", sd, 1);
        printf("\"rewards\": {");
        for (int f = 0; f < rs->n_funcs; f++) {
            json_t *name = json_string(rs->funcs[f]->name);
            char *d = json_dumps(name, JSON_ENCODE_ANY);
            printf("%s%s: {", f ? ", " : "", d ? d : "\"?\"");
            print_json_number("mean", eval_func_mean(t, f), 1);
            printf("\"count\": %ld, \"weight\": %.10g}", t->func_n[f], rs->weights[f]);
            free(d);
            json_decref(name);
        }
        printf("}, ");
        print_json_number("pass@1", pass, 1);
        printf("\"passed\": %ld, \"pass_threshold\": %.10g, ", t->passed, threshold);
        print_json_number("mean_completion_length", eval_mean_length(t), 1);
        print_json_number("frac_stopped", eval_frac_stopped(t), 0);
        printf("}\n");
        return;
    }
    char how[240];
    eval_describe_sampling(how, sizeof how, so);
    printf("examples      %ld x %ld generation%s = %ld completions, %s\n", t->examples, G, G == 1 ? "" : "s",
           t->completions, how);
    printf("reward        %.4f  (std %.4f; weighted sum of the functions, as in training)\n", mean, sd);
    for (int f = 0; f < rs->n_funcs; f++)
        printf("  %-11s %.4f  (weight %g, %ld values)\n", rs->funcs[f]->name, eval_func_mean(t, f), rs->weights[f],
               t->func_n[f]);
    printf("pass@1        %.4f  (%ld of %ld completions with reward >= %g)\n", pass, t->passed, t->completions,
           threshold);
    printf("length        %.1f tokens on average, %.0f%% ended by eos\n", eval_mean_length(t),
           100 * eval_frac_stopped(t));
}

typedef struct {
    const char *config, *model_dir, *dataset, *adapter;
    PromptOptions prompts; /* open-r1's, as train builds its prompts */
    RewardArgs rewards;
    int num_generations, max_prompt_length, max_examples, json, use_cpu;
    double pass_threshold;
    GenOpts gen;
    Bf16Options bf16;
    ToolArgs tools;
    EnvArgs env;
} EvalArgs;

#define A(f) offsetof(EvalArgs, f)
static const OptSpec eval_options[] = {
    OPT_CONFIG_ROW(A(config)),
    {"model", OPT_STR, A(model_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED | OPT_MODEL_PATH, "model directory (HF layout)"},
    {"adapter", OPT_STR, A(adapter), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "a PEFT LoRA adapter directory: with bf16 products (on the GPU, or --bf16 true) unmerged beside the bf16 "
     "base, as PEFT runs it on a bf16 model; else folded into fp32 weights as grpo merge does"},
    {"dataset", OPT_STR, A(dataset), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED | OPT_DATA_PATH,
     "JSON lines with a `prompt` column and the reward functions' columns"},
    {"num_generations", OPT_INT, A(num_generations), 1, NULL, 1, 1 << 20, NULL, NULL, OPT_IN(OPT_SEC_GENERATION),
     "completions per example"},
    {"max_examples", OPT_INT, A(max_examples), 0, NULL, 0, 1 << 30, NULL, NULL, 0, "only the first N examples (0 = all)"},
    {"pass_threshold", OPT_F64, A(pass_threshold), 1.0, NULL, -1e300, 1e300, NULL, NULL, OPT_IN(OPT_SEC_REWARDS),
     "a completion passes when its reward is >= this"},
    {"json", OPT_BOOL, A(json), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0, "one JSON object with the numbers and counts"},
    {"use_cpu", OPT_BOOL, A(use_cpu), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_SPEED),
     "generate on the CPU where there is a GPU (transformers' use_cpu); without it an NVIDIA GPU, when one is "
     "found, generates with bf16 products"},
};

/* What a run of eval holds once its inputs are read; eval_close frees what eval_open opened. */
typedef struct {
    RewardSet rs;
    GenSession s;
    int have_session;
    json_t *tool_schemas; /* the tools file: the prompts' tools= */
    char *tools_json;
    ToolLoop tools;       /* with tools: the generator goes on after each tool turn, as in training */
    int have_tools;
    EnvLoop env;          /* with an environment: the generator goes on after each of its messages */
    int have_env;
    GpuDevice dev;        /* where the model generates when on_gpu (cli/gpu_pick.h) */
    int on_gpu;
} EvalRun;

static void eval_close(EvalRun *r) {
    if (r->have_tools) tool_loop_close(&r->tools);
    if (r->have_env) env_loop_close(&r->env);
    if (r->have_session) gen_session_close(&r->s);
    if (r->on_gpu) gpu_close(&r->dev);
    reward_set_free(&r->rs);
    json_decref(r->tool_schemas);
    free(r->tools_json);
}

/* The rewards, the dataset, the model (and adapter), the tool loop and the
 * environment of a, in that order; -1 with err at the first that fails. */
static int eval_open(EvalRun *r, EvalArgs *a, GrpoErr *err) {
    memset(r, 0, sizeof *r);
    Dataset ds;
    DatasetConversation conv;
    a->gen.chat_template = a->prompts.chat_template;
    if (a->tools.tools_path && tool_schemas_load(a->tools.tools_path, &r->tool_schemas, err)) return -1;
    if (r->tool_schemas) a->gen.tools_json = r->tools_json = json_dumps(r->tool_schemas, JSON_COMPACT);
    if (reward_set_from_args(&r->rs, &a->rewards, err) ||
        dataset_load_conversation(&ds, a->dataset, prompt_options_conversation(&a->prompts, &conv), err))
        return -1;
    if (eval_check_columns(&r->rs, &ds, a->max_examples, err)) { /* before the model is even read */
        dataset_free(&ds);
        return -1;
    }
    r->on_gpu = cli_gpu_pick("eval", a->use_cpu, &a->bf16, &r->dev, &a->gen.weights, err);
    if (r->on_gpu < 0) {
        r->on_gpu = 0;
        dataset_free(&ds);
        return -1;
    }
    if (r->on_gpu ? gen_session_open_gpu(&r->s, &r->dev, a->model_dir, a->adapter, &ds, &a->gen,
                                         a->max_prompt_length, a->max_examples, err)
                  : gen_session_open(&r->s, a->model_dir, a->adapter, &ds, &a->gen, a->max_prompt_length,
                                     a->max_examples, err))
        return -1;
    r->have_session = 1;
    if (tool_loop_open(&r->tools, &a->tools, r->tool_schemas, r->s.tok, a->gen.chat_template_kwargs, err)) return -1;
    r->have_tools = 1;
    if (r->tools.proc) gen_set_turns(&r->s.gen, &(GenTurns){tool_loop_turn_end, &r->tools});
    if (r->tools.pool) /* tool_workers: the tool waits overlap the other sequences' decoding */
        gen_set_overlap(&r->s.gen, &(GenOverlap){tool_loop_turn_begin, tool_loop_turn_wait});
    if (env_loop_open(&r->env, &a->env, r->s.tok, a->gen.chat_template_kwargs, err)) return -1;
    r->have_env = 1;
    if (r->env.proc) gen_set_turns(&r->s.gen, &(GenTurns){env_loop_turn_end, &r->env});
    return 0;
}

/* Every example of r scored into t, progress on stderr; -1 with err (the tool's
 * or the environment's message where theirs stopped it). */
static int eval_all(EvalRun *r, const EvalArgs *a, EvalTotals *t, GrpoErr *err) {
    int n_ex = r->s.n, G = a->num_generations, rc = 0;
    char how[300];
    eval_describe(how, sizeof how, n_ex, G, &a->gen.sampler);
    fprintf(stderr, "grpo eval: %s, %d reward function(s)\n", how, r->rs.n_funcs);
    int every = n_ex >= 20 ? n_ex / 20 : 1;
    double t0 = time_now_s();
    HfStateInfo fresh; /* no training run: the rewards see a fresh TrainerState, as Trainer.evaluate() alone */
    hf_state_fresh(&fresh);
    json_t *trainer_state = hf_state_fields(&fresh);
    int batch = gen_groups_per_chunk(&r->s.gen, G); /* examples whose groups one chunk decodes together */
    for (int p = 0; p < n_ex && !rc; p += batch) {
        int n = n_ex - p < batch ? n_ex - p : batch, end = p + n;
        rc = eval_examples(t, &r->s.gen, r->s.tok, &r->s.data, p, n, G, 0, &r->rs, trainer_state, a->pass_threshold,
                           r->env.proc ? &r->env : NULL, err);
        if (!rc && (end / every > p / every || end == n_ex)) /* a multiple of every among p+1 .. end, or the last */
            fprintf(stderr, "grpo eval: %d/%d examples, reward %.4f, pass@1 %.4f, %.1f s\n", end, n_ex,
                    eval_reward(t), eval_pass_at_1(t), time_now_s() - t0);
    }
    json_decref(trainer_state);
    if (rc && r->tools.proc && r->tools.err.msg[0]) *err = r->tools.err;
    else if (rc && r->env.proc && r->env.err.msg[0]) *err = r->env.err;
    if (rc) return -1;
    if (r->tools.proc) /* TRL's tools/call_frequency and tools/failure_frequency, on stderr */
        fprintf(stderr, "grpo eval: tools: %ld calls (%.4f per completion), %ld failed (failure_frequency %.4f)\n",
                r->tools.calls, t->completions ? (double)r->tools.calls / t->completions : 0.0, r->tools.failures,
                r->tools.calls ? (double)r->tools.failures / r->tools.calls : 0.0);
    if (r->env.proc) /* how the conversations went, on stderr */
        fprintf(stderr, "grpo eval: environment: %ld replies (%.4f per completion), %ld conversations it ended, %ld "
                        "ended by max_environment_turns\n",
                r->env.steps, t->completions ? (double)r->env.steps / t->completions : 0.0, r->env.done,
                r->env.limited);
    return 0;
}

int cmd_eval(int argc, char **argv) {
    EvalArgs a;
    memset(&a, 0, sizeof a);
    OptGroup g[] = {OPT_GROUP_IN(eval_options, 0, OPT_SEC_MODEL_DATA), PROMPT_OPTIONS_GROUP(A(prompts)),
                    REWARD_OPTIONS_GROUP(A(rewards)),
                    PROMPT_LENGTH_GROUP(A(max_prompt_length)), GEN_OPTIONS_GROUP(A(gen)),
                    SEED_OPTION_GROUP(A(gen.seed), OPT_SEC_GENERATION), BF16_OPTIONS_GROUP(A(bf16)),
                    TOOL_OPTIONS_GROUP(A(tools)), ENV_OPTIONS_GROUP(A(env))};
    int ng = sizeof g / sizeof g[0];
    gen_opts_default(&a.gen); /* first: it clears GenOpts */
    opts_defaults(g, ng, &a);
    a.gen.sampler.temperature = 0; /* eval is greedy unless asked otherwise */
    OptGroup train_g[TRAIN_CONFIG_N_GROUPS]; /* a training recipe as --config: its training settings left aside */
    train_config_groups(train_g);
    args_config_also("train", train_g, TRAIN_CONFIG_N_GROUPS);
    int rc = args_parse("eval", SYNOPSIS, argc, argv, g, ng, &a);
    if (rc) {
        args_free();
        return rc == 1 ? 0 : rc;
    }
    const char *bad = sampler_opts_check(&a.gen.sampler);
    if (!bad) bad = bf16_options_form(&a.bf16, !!a.adapter, &a.gen.weights);
    GrpoErr err;
    if (bad || reward_args_check(&a.rewards, &err) || tool_args_check(&a.tools, &err) ||
        env_args_check(&a.env, a.tools.tools_path, &a.rewards.funcs, &err)) {
        fprintf(stderr, "grpo eval: %s\n", bad ? bad : err.msg);
        args_free();
        return 2;
    }
    cli_setup_threads();
    EvalRun r;
    EvalTotals t;
    rc = eval_open(&r, &a, &err);
    if (!rc) {
        eval_totals_init(&t, r.rs.n_funcs);
        rc = eval_all(&r, &a, &t, &err);
        if (!rc) report(&t, &r.rs, a.num_generations, &a.gen.sampler, a.pass_threshold, a.json);
        eval_totals_free(&t);
    }
    if (rc) cli_fail("eval", err.msg);
    eval_close(&r);
    args_free();
    return rc ? 1 : 0;
}
