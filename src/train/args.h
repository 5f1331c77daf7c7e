/* train/args.h — the options `grpo train` and `grpo sft` share, as transformers'
 * TrainingArguments holds them for TRL's GRPOConfig and SFTConfig: optimizer,
 * schedule, length of training, seed, recomputation, logging, saving, resuming. */
#ifndef GRPO_TRAIN_ARGS_H
#define GRPO_TRAIN_ARGS_H

#include <stdint.h>

#include "core/check.h"
#include "optim/optim.h"

typedef struct {
    double learning_rate;              /* GRPOConfig 1e-6, SFTConfig 2e-5 */
    AdamWConfig adam;
    SchedType lr_scheduler_type;       /* linear */
    double warmup_ratio;
    long warmup_steps;
    double max_grad_norm;              /* 1.0; 0 = no clipping */
    long max_steps;                    /* > 0 wins over num_train_epochs */
    double num_train_epochs;           /* 3 */
    uint64_t seed;                     /* 42 */
    int gradient_checkpointing;        /* 1 */
    int logprob_chunk_rows;            /* LM-head rows per chunk (64) */
    int logging_steps;                 /* 10 */
    long save_steps;                   /* 500; 0 = never */
    int save_total_limit;              /* 0 = keep all */
    const char *resume_from_checkpoint;/* DIR, "latest" or NULL */
    int quiet;                         /* no progress line */
} TrainingArgs;

void training_args_default(TrainingArgs *a, double learning_rate);
/* Range checks with a message that names the option and the value. */
int training_args_check(const TrainingArgs *a, GrpoErr *err);

#endif
