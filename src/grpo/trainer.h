/* grpo/trainer.h — GRPO on the training loop (train/loop.h): generate and score a
 * whole generation batch (groups of num_generations completions), then compute
 * the gradient over micro-batches of per_device_train_batch_size completions,
 * accumulated over gradient_accumulation_steps, with every loss normaliser taken
 * over the whole accumulated batch — so the update equals the one-big-batch
 * update, and memory follows the micro-batch, not the group size.
 *
 * Batch semantics are TRL's GRPOConfig (one process):
 *   generation_batch_size = per_device_train_batch_size * steps_per_generation
 *   (steps_per_generation defaults to gradient_accumulation_steps), divisible by
 *   num_generations; each generation batch is used num_iterations times; its
 *   completions are shuffled and split into steps_per_generation micro-batches.
 * With filter_groups (DAPO's dynamic sampling, named as verl's; TRL has none), a
 * generation batch holds only groups whose rewards differ: rounds of as many
 * prompts are generated until it is full (at most max_num_gen_batches). */
#ifndef GRPO_GRPO_TRAINER_H
#define GRPO_GRPO_TRAINER_H

#include "core/check.h"
#include "core/options.h"
#include "data/dataset.h"
#include "gen/generate.h"
#include "gen/options.h"
#include "grpo/advantages.h"
#include "grpo/loss.h"
#include "reward/reward.h"
#include "env/env_args.h"
#include "tools/tool_args.h"
#include "train/args.h"
#include "train/loop.h"

typedef struct {
    TrainingArgs train;                /* model, dataset, output_dir, batch, optimizer, ... (learning_rate 1e-6) */
    RewardArgs rewards;                /* reward_funcs, reward_weights, reward_timeout */
    GenOpts gen;                       /* sampling, max_completion_length, KV cache (its seed: train.seed) */
    int steps_per_generation;          /* 0: = gradient_accumulation_steps */
    int generation_batch_size;         /* 0: derived; exclusive with steps_per_generation */
    int num_generations;               /* 8, the group size G */
    int num_iterations;                /* 1 (mu) */
    int max_prompt_length;             /* 512 */
    int filter_groups;                 /* DAPO's dynamic sampling: groups with equal rewards dropped (0) */
    int max_num_gen_batches;           /* with filter_groups: generation rounds per generation batch (0: no bound) */
    GrpoLossConfig loss;               /* loss_type, beta, epsilon, ... (max_completion_length: gen's) */
    GrpoScaleRewards scale_rewards;
    GrpoRewardAggregation aggregation;
    int sync_ref_model;
    double ref_model_mixup_alpha;      /* 0.6 */
    int ref_model_sync_steps;          /* 512 */
    int log_completions;
    const char *eval_dataset;          /* prompts evaluated during training (eval_strategy steps) */
    int eval_strategy;                 /* 0 no, 1 steps */
    int eval_steps;                    /* 0: logging_steps */
    int num_generations_eval;          /* 0: num_generations */
    double pass_threshold;             /* eval_pass@1: reward >= this (1.0) */
    PromptOptions prompts;             /* open-r1's system_prompt, dataset_prompt_column, chat_template */
    ToolArgs tools;                    /* tool calling in rollouts: tools, tool_command, ... (tools/tool_args.h) */
    EnvArgs env;                       /* an environment in rollouts: environment_command, ... (env/env_args.h) */
} TrainConfig;

/* The options of `grpo train`, declared once: their groups placed in TrainConfig. */
#define TRAIN_CONFIG_N_GROUPS 10
void train_config_groups(OptGroup g[TRAIN_CONFIG_N_GROUPS]);

void train_config_default(TrainConfig *c);

/* Validates every option and every combination, with a message that states the
 * rule and the numbers. */
int train_config_check(const TrainConfig *c, GrpoErr *err);

/* Runs the whole training; writes output_dir (metrics.jsonl, completions.jsonl,
 * checkpoints, the final model). hooks may be NULL. Returns 0, TRAIN_STOPPED,
 * or -1 with err (bad input, reward failure, repeated NaN). */
int trainer_run(const TrainConfig *c, const TrainHooks *hooks, GrpoErr *err);

#endif
