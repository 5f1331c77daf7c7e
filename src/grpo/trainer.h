/* grpo/trainer.h — the GRPO training loop: generate and score a whole generation
 * batch (groups of num_generations completions), then compute the gradient over
 * micro-batches of per_device_train_batch_size completions, accumulated over
 * gradient_accumulation_steps, with every loss normaliser taken over the whole
 * accumulated batch — so the update equals the one-big-batch update, and memory
 * follows the micro-batch, not the group size.
 *
 * Batch semantics are TRL's GRPOConfig (one process):
 *   generation_batch_size = per_device_train_batch_size * steps_per_generation
 *   (steps_per_generation defaults to gradient_accumulation_steps), divisible by
 *   num_generations; each generation batch is used num_iterations times; its
 *   completions are shuffled and split into steps_per_generation micro-batches. */
#ifndef GRPO_GRPO_TRAINER_H
#define GRPO_GRPO_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "core/check.h"
#include "gen/sampler.h"
#include "grpo/advantages.h"
#include "grpo/loss.h"
#include "optim/optim.h"
#include "train/args.h"

typedef struct {
    /* inputs and outputs */
    const char *model_dir, *dataset, *output_dir;
    const char *const *reward_funcs;   /* specs (reward/reward.h) */
    int n_reward_funcs;
    const double *reward_weights;      /* NULL or [n_reward_weights] */
    int n_reward_weights;
    double reward_timeout;
    /* batch semantics */
    int per_device_train_batch_size;   /* 8 */
    int gradient_accumulation_steps;   /* 1 */
    int steps_per_generation;          /* 0: = gradient_accumulation_steps */
    int generation_batch_size;         /* 0: derived; exclusive with steps_per_generation */
    int num_generations;               /* 8 */
    int num_iterations;                /* 1 (mu) */
    int max_prompt_length;             /* 512 */
    int max_completion_length;         /* 256 */
    int shuffle_dataset;               /* 1 */
    /* generation */
    SamplerOpts sampler;               /* temperature also scales the training log-probs */
    size_t kv_cache_bytes;
    int generation_chunk_size;
    /* algorithm */
    GrpoLossConfig loss;
    GrpoScaleRewards scale_rewards;
    GrpoRewardAggregation aggregation;
    int sync_ref_model;
    double ref_model_mixup_alpha;      /* 0.6 */
    int ref_model_sync_steps;          /* 512 */
    /* optimisation, schedule, logging, saving (learning_rate 1e-6) */
    TrainingArgs train;
    int log_completions;
    int max_nonfinite_steps;           /* consecutive skipped steps before stopping (3) */
} TrainConfig;

void train_config_default(TrainConfig *c);

/* Validates every combination, with a message that states the rule and the numbers. */
int train_config_check(const TrainConfig *c, GrpoErr *err);

/* Runs the whole training; writes output_dir (metrics.jsonl, checkpoints, final
 * model). Returns 0, or -1 with err (bad input, reward failure, repeated NaN). */
int trainer_run(const TrainConfig *c, GrpoErr *err);

#endif
