/* cli/cmd_train.c — `grpo train`: GRPO training from the command line or a YAML
 * file (--config run.yaml; same option names, TRL's GRPOConfig; the command line
 * wins). Parses options into a TrainConfig and runs grpo/trainer.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/train_opts.h"
#include "grpo/trainer.h"

int cmd_train(int argc, char **argv) {
    TrainConfig c;
    train_config_default(&c);
    const char *model = NULL, *dataset = NULL, *output_dir = NULL, *config = NULL;
    const char *loss_type = "dapo", *is_level = "token", *scale = "group", *agg = "sum_then_normalize";
    StrList funcs = {0, NULL}, weights = {0, NULL};
    long B = c.per_device_train_batch_size, GA = c.gradient_accumulation_steps, spg = 0, gbs = 0;
    long G = c.num_generations, mu = c.num_iterations, maxp = c.max_prompt_length, maxc = c.max_completion_length;
    long top_k = 0, kv_mb = 1024, chunk = 0, sync_steps = c.ref_model_sync_steps;
    long max_nonfinite = c.max_nonfinite_steps;
    double temperature = 1, top_p = 1, min_p = 0, rep = 1, beta = 0, eps = 0.2, eps_high = NAN, delta = 0;
    double top_q = 1, alpha = c.ref_model_mixup_alpha, timeout = c.reward_timeout;
    int shuffle = 1, mask_trunc = 0, sync_ref = 0, log_compl = 0;
    Opt own[] = {
        {"config", OPT_YAML, &config, "YAML file of these options (the command line wins)"},
        {"model", OPT_STR, &model, "model directory (HF layout) to train (required)"},
        {"dataset", OPT_STR, &dataset, "JSON lines with a `prompt` column (required)"},
        {"output_dir", OPT_STR, &output_dir, "where metrics, checkpoints and the final model go (required)"},
        {"reward_funcs", OPT_LIST, &funcs, "reward function specs (docs/rewards.md) (required)"},
        {"reward_weights", OPT_LIST, &weights, "one weight per reward function (default 1.0 each)"},
        {"reward_timeout", OPT_FLOAT, &timeout, "seconds to wait for a cmd: reward process (default 600)"},
        {"per_device_train_batch_size", OPT_INT, &B, "completions per forward/backward (default 8)"},
        {"gradient_accumulation_steps", OPT_INT, &GA, "micro-batches per optimizer step (default 1)"},
        {"steps_per_generation", OPT_INT, &spg, "micro-batches per generation batch (default: gradient_accumulation_steps)"},
        {"generation_batch_size", OPT_INT, &gbs, "completions per generation batch (exclusive with steps_per_generation)"},
        {"num_generations", OPT_INT, &G, "completions per prompt, the group size G (default 8)"},
        {"num_iterations", OPT_INT, &mu, "uses of each generation batch (mu, default 1)"},
        {"max_prompt_length", OPT_INT, &maxp, "prompt tokens kept, from the right (default 512)"},
        {"max_completion_length", OPT_INT, &maxc, "tokens per completion at most (default 256)"},
        {"shuffle_dataset", OPT_FLAG, &shuffle, "shuffle prompts each epoch (default true)"},
        {"temperature", OPT_FLOAT, &temperature, "sampling temperature, also applied to log-probs (default 1.0)"},
        {"top_p", OPT_FLOAT, &top_p, "nucleus sampling (default 1.0)"},
        {"top_k", OPT_INT, &top_k, "top-k sampling (default 0 = off)"},
        {"min_p", OPT_FLOAT, &min_p, "min-p sampling (default 0 = off)"},
        {"repetition_penalty", OPT_FLOAT, &rep, "repetition penalty (default 1.0)"},
        {"kv_cache_mb", OPT_INT, &kv_mb, "memory limit of the generation KV cache in MiB (default 1024)"},
        {"generation_chunk_size", OPT_INT, &chunk, "completions decoded together (default: as the limit allows)"},
        {"beta", OPT_FLOAT, &beta, "KL coefficient; > 0 loads a frozen reference model (default 0.0)"},
        {"epsilon", OPT_FLOAT, &eps, "clipping epsilon (default 0.2)"},
        {"epsilon_high", OPT_FLOAT, &eps_high, "upper clipping epsilon (default: epsilon)"},
        {"delta", OPT_FLOAT, &delta, "upper bound of the ratio in two-sided clipping (default: none)"},
        {"loss_type", OPT_STR, &loss_type, "dapo (default) | grpo | dr_grpo | bnpo | cispo | sapo | luspo"},
        {"importance_sampling_level", OPT_STR, &is_level, "token (default) | sequence (GSPO)"},
        {"scale_rewards", OPT_STR, &scale, "group (default) | batch | none (true = group, false = none)"},
        {"multi_objective_aggregation", OPT_STR, &agg, "sum_then_normalize (default) | normalize_then_sum"},
        {"mask_truncated_completions", OPT_FLAG, &mask_trunc, "leave truncated completions out of the loss"},
        {"top_entropy_quantile", OPT_FLOAT, &top_q, "train only on the top-entropy tokens (default 1.0 = all)"},
        {"sync_ref_model", OPT_FLAG, &sync_ref, "mix the policy into the reference every ref_model_sync_steps"},
        {"ref_model_mixup_alpha", OPT_FLOAT, &alpha, "reference mix-up alpha (default 0.6)"},
        {"ref_model_sync_steps", OPT_INT, &sync_steps, "steps between reference syncs (default 512)"},
        {"log_completions", OPT_FLAG, &log_compl, "write completions.jsonl"},
        {"max_nonfinite_steps", OPT_INT, &max_nonfinite, "consecutive NaN/Inf steps before stopping (default 3)"},
    };
    enum { N_OWN = sizeof own / sizeof own[0] };
    Opt opts[N_OWN + TRAIN_OPTS_COUNT];
    TrainOptValues tv;
    memcpy(opts, own, sizeof own);
    train_opts_add(opts + N_OWN, &tv, &c.train);
    int rc = args_parse("train", "--model DIR --dataset FILE --reward_funcs SPEC... --output_dir DIR [options]",
                        argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (rc) {
        args_free();
        return rc == 1 ? 0 : rc;
    }
    char msg[600] = "";
    double *w = weights.n ? xmalloc(sizeof(double) * weights.n) : NULL;
    for (int i = 0; i < weights.n && !*msg; i++) {
        char *end;
        w[i] = strtod(weights.v[i], &end);
        if (end == weights.v[i] || *end) snprintf(msg, sizeof msg, "reward_weights: '%s' is not a number", weights.v[i]);
    }
    if (!*msg && !strcmp(scale, "true")) scale = "group";
    if (!*msg && !strcmp(scale, "false")) scale = "none";
    if (!*msg && grpo_loss_type_parse(loss_type, &c.loss.loss_type))
        snprintf(msg, sizeof msg, "loss_type '%s' is not one of dapo, grpo, dr_grpo, bnpo, cispo, sapo, luspo", loss_type);
    if (!*msg && grpo_is_level_parse(is_level, &c.loss.is_level))
        snprintf(msg, sizeof msg, "importance_sampling_level '%s' is not token or sequence", is_level);
    if (!*msg && grpo_scale_rewards_parse(scale, &c.scale_rewards))
        snprintf(msg, sizeof msg, "scale_rewards '%s' is not group, batch or none", scale);
    if (!*msg && grpo_aggregation_parse(agg, &c.aggregation))
        snprintf(msg, sizeof msg, "multi_objective_aggregation '%s' is not sum_then_normalize or normalize_then_sum", agg);
    const char *bad = *msg ? NULL : train_opts_apply(&tv, &c.train);
    if (bad) snprintf(msg, sizeof msg, "%s", bad);
    if (!*msg && (kv_mb < 1 || chunk < 0))
        snprintf(msg, sizeof msg, "kv_cache_mb must be >= 1 and generation_chunk_size >= 0");
    if (*msg) {
        fprintf(stderr, "grpo train: %s\n", msg);
        free(w);
        args_free();
        return 2;
    }
    c.model_dir = model;
    c.dataset = dataset;
    c.output_dir = output_dir;
    c.reward_funcs = funcs.v;
    c.n_reward_funcs = funcs.n;
    c.reward_weights = w;
    c.n_reward_weights = weights.n;
    c.reward_timeout = timeout;
    c.per_device_train_batch_size = (int)B;
    c.gradient_accumulation_steps = (int)GA;
    c.steps_per_generation = (int)spg;
    c.generation_batch_size = (int)gbs;
    c.num_generations = (int)G;
    c.num_iterations = (int)mu;
    c.max_prompt_length = (int)maxp;
    c.max_completion_length = (int)maxc;
    c.shuffle_dataset = shuffle;
    c.sampler.temperature = (float)temperature;
    c.sampler.top_p = (float)top_p;
    c.sampler.top_k = (int)top_k;
    c.sampler.min_p = (float)min_p;
    c.sampler.repetition_penalty = (float)rep;
    c.kv_cache_bytes = (size_t)kv_mb << 20;
    c.generation_chunk_size = (int)chunk;
    c.loss.beta = beta;
    c.loss.epsilon_low = eps;
    c.loss.epsilon_high = isnan(eps_high) ? eps : eps_high;
    c.loss.delta = delta;
    c.loss.mask_truncated_completions = mask_trunc;
    c.loss.top_entropy_quantile = top_q;
    c.loss.max_completion_length = (int)maxc;
    c.sync_ref_model = sync_ref;
    c.ref_model_mixup_alpha = alpha;
    c.ref_model_sync_steps = (int)sync_steps;
    c.log_completions = log_compl;
    c.max_nonfinite_steps = (int)max_nonfinite;
    GrpoErr err;
    if (!model || !dataset || !output_dir || funcs.n == 0) {
        fprintf(stderr, "grpo train: --model, --dataset, --output_dir and --reward_funcs are required\n");
        rc = 2;
    } else if (train_config_check(&c, &err)) {
        fprintf(stderr, "grpo train: %s\n", err.msg);
        rc = 2;
    } else {
        cli_setup_threads();
        rc = trainer_run(&c, &err) ? cli_fail("train", err.msg) : 0;
    }
    free(w);
    args_free();
    return rc;
}
