/* cli/cmd_train.c — `grpo train`: GRPO training from the command line or a YAML
 * file (--config run.yaml; same option names, TRL's GRPOConfig; the command line
 * wins). Parses options into a TrainConfig and runs grpo/trainer.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "grpo/trainer.h"

int cmd_train(int argc, char **argv) {
    TrainConfig c;
    train_config_default(&c);
    const char *model = NULL, *dataset = NULL, *output_dir = NULL, *config = NULL, *resume = NULL;
    const char *loss_type = "dapo", *is_level = "token", *scale = "group", *agg = "sum_then_normalize";
    const char *sched = "linear";
    StrList funcs = {0, NULL}, weights = {0, NULL};
    long B = c.per_device_train_batch_size, GA = c.gradient_accumulation_steps, spg = 0, gbs = 0;
    long G = c.num_generations, mu = c.num_iterations, maxp = c.max_prompt_length, maxc = c.max_completion_length;
    long top_k = 0, kv_mb = 1024, chunk = 0, sync_steps = c.ref_model_sync_steps, warmup_steps = 0;
    long max_steps = 0, seed = 42, logging_steps = c.logging_steps, save_steps = c.save_steps, save_limit = 0;
    long max_nonfinite = c.max_nonfinite_steps, lp_chunk = c.logprob_chunk_rows;
    double temperature = 1, top_p = 1, min_p = 0, rep = 1, beta = 0, eps = 0.2, eps_high = NAN, delta = 0;
    double top_q = 1, alpha = c.ref_model_mixup_alpha, lr = c.learning_rate, b1 = 0.9, b2 = 0.999, adam_eps = 1e-8;
    double wd = 0, warmup_ratio = 0, max_grad_norm = 1.0, epochs = 3, timeout = c.reward_timeout;
    int shuffle = 1, mask_trunc = 0, sync_ref = 0, ckpt = 1, log_compl = 0, quiet = 0;
    Opt opts[] = {
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
        {"learning_rate", OPT_FLOAT, &lr, "AdamW learning rate (default 1e-6)"},
        {"adam_beta1", OPT_FLOAT, &b1, "default 0.9"},
        {"adam_beta2", OPT_FLOAT, &b2, "default 0.999"},
        {"adam_epsilon", OPT_FLOAT, &adam_eps, "default 1e-8"},
        {"weight_decay", OPT_FLOAT, &wd, "decoupled weight decay (default 0.0)"},
        {"lr_scheduler_type", OPT_STR, &sched, "linear (default) | cosine | constant | constant_with_warmup"},
        {"warmup_ratio", OPT_FLOAT, &warmup_ratio, "fraction of steps for linear warmup (default 0)"},
        {"warmup_steps", OPT_INT, &warmup_steps, "warmup steps (wins over warmup_ratio)"},
        {"max_grad_norm", OPT_FLOAT, &max_grad_norm, "gradient clipping norm (default 1.0; 0 = off)"},
        {"max_steps", OPT_INT, &max_steps, "optimizer steps (wins over num_train_epochs)"},
        {"num_train_epochs", OPT_FLOAT, &epochs, "passes over the prompts (default 3)"},
        {"seed", OPT_INT, &seed, "random seed (default 42)"},
        {"gradient_checkpointing", OPT_FLAG, &ckpt, "recompute layers in backward (default true)"},
        {"logprob_chunk_rows", OPT_INT, &lp_chunk, "LM-head rows computed at once (default 64)"},
        {"logging_steps", OPT_INT, &logging_steps, "steps per metrics.jsonl line (default 10)"},
        {"log_completions", OPT_FLAG, &log_compl, "write completions.jsonl"},
        {"save_steps", OPT_INT, &save_steps, "steps between checkpoints (default 500; 0 = none)"},
        {"save_total_limit", OPT_INT, &save_limit, "checkpoints kept (default 0 = all)"},
        {"resume_from_checkpoint", OPT_STR, &resume, "checkpoint directory, or latest"},
        {"max_nonfinite_steps", OPT_INT, &max_nonfinite, "consecutive NaN/Inf steps before stopping (default 3)"},
        {"quiet", OPT_FLAG, &quiet, "no progress output"},
    };
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
    if (!*msg && sched_parse(sched, &c.lr_scheduler_type))
        snprintf(msg, sizeof msg, "lr_scheduler_type '%s' is not linear, cosine, constant or constant_with_warmup", sched);
    if (!*msg && (kv_mb < 1 || chunk < 0 || lp_chunk < 1))
        snprintf(msg, sizeof msg, "kv_cache_mb and logprob_chunk_rows must be >= 1, generation_chunk_size >= 0");
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
    c.learning_rate = lr;
    c.adam.beta1 = b1;
    c.adam.beta2 = b2;
    c.adam.eps = adam_eps;
    c.adam.weight_decay = wd;
    c.warmup_ratio = warmup_ratio;
    c.warmup_steps = warmup_steps;
    c.max_grad_norm = max_grad_norm;
    c.max_steps = max_steps;
    c.num_train_epochs = epochs;
    c.seed = (uint64_t)seed;
    c.gradient_checkpointing = ckpt;
    c.logprob_chunk_rows = (int)lp_chunk;
    c.logging_steps = (int)logging_steps;
    c.log_completions = log_compl;
    c.save_steps = save_steps;
    c.save_total_limit = (int)save_limit;
    c.resume_from_checkpoint = resume;
    c.max_nonfinite_steps = (int)max_nonfinite;
    c.quiet = quiet;
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
