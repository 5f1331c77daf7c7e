/* train/args.h — the options every training command shares, as transformers'
 * TrainingArguments holds them for TRL's GRPOConfig and SFTConfig: model, data and
 * output, batch, optimizer, schedule, length of training, seed, recomputation,
 * logging, saving, resuming, the non-finite policy. Declared once in
 * training_args_options (core/options.h); `grpo train` and `grpo sft` place the
 * group in their own options. */
#ifndef GRPO_TRAIN_ARGS_H
#define GRPO_TRAIN_ARGS_H

#include <stdint.h>

#include "core/check.h"
#include "core/options.h"
#include "model/transformer.h"
#include "optim/optim.h"

/* save_strategy, as transformers' SaveStrategy ("best" is refused by training_args_check) */
enum { TRAIN_SAVE_STEPS, TRAIN_SAVE_EPOCH, TRAIN_SAVE_NO, TRAIN_SAVE_BEST };
extern const char *const train_save_strategy_names[];
/* gradient_checkpointing_policy: what a checkpointed backward recomputes (CheckpointMode,
 * model/transformer.h) */
enum { TRAIN_CKPT_SELECTIVE, TRAIN_CKPT_FULL };
extern const char *const train_ckpt_policy_names[];

typedef struct {
    const char *config;                /* --config FILE.yaml (read by cli/args.c) */
    const char *model_dir;             /* model */
    const char *dataset;
    const char *output_dir;
    int overwrite_output_dir;          /* 0: an output_dir with an earlier run is refused */
    int per_device_train_batch_size;   /* 8 */
    int gradient_accumulation_steps;   /* 1 */
    int shuffle_dataset;               /* 1 */
    double learning_rate;              /* GRPOConfig 1e-6, SFTConfig 2e-5 */
    AdamWConfig adam;
    SchedType lr_scheduler_type;       /* linear */
    const char *lr_scheduler_kwargs;   /* a JSON object's text (sched_init), NULL = none */
    double warmup_ratio;
    long warmup_steps;
    double max_grad_norm;              /* 1.0; 0 = no clipping */
    long max_steps;                    /* > 0 wins over num_train_epochs */
    double num_train_epochs;           /* 3 */
    uint64_t seed;                     /* 42 */
    int gradient_checkpointing;        /* 1 */
    int gradient_checkpointing_policy; /* with it: TRAIN_CKPT_SELECTIVE (gate/up kept) or TRAIN_CKPT_FULL */
    int bf16;                          /* 1: products in bf16, frozen models held in bf16; 0; -1: auto */
    int use_cpu;                       /* 1: the CPU even where there is a GPU (transformers' use_cpu) */
    int logprob_chunk_rows;            /* LM-head rows per chunk (256) */
    int ddp_timeout_s;                 /* under mpirun: the longest wait in a collective (1800 s, transformers') */
    int logging_steps;                 /* 10 */
    int logging_first_step;            /* 0: a metrics line after step 1 too when 1 */
    int save_strategy;                 /* TRAIN_SAVE_*: steps */
    double save_steps;                 /* 500; 0 = never; below 1: a fraction of the run's steps, rounded up */
    int save_total_limit;              /* 0 = keep all */
    const char *resume_from_checkpoint;/* DIR, "latest" or NULL */
    int max_nonfinite_steps;           /* consecutive NaN/Inf steps before stopping (3) */
    int quiet;                         /* no progress events */
    StrList report_to;                 /* "tensorboard"/"all": TensorBoard event files too; "none" */
    const char *logging_dir;           /* TensorBoard's directory (NULL: output_dir/runs/DATE_HOST) */
    const char *dataset_train_split;   /* a dataset directory's file: SPLIT.jsonl, SPLIT.json (TRL's, "train") */
    const char *dataset_test_split;    /* the same for eval_dataset ("test") */
    /* LoRA (TRL's ModelConfig): train adapters on a frozen base */
    int use_peft;
    int lora_r;                        /* 16 */
    double lora_alpha;                 /* 32 */
    double lora_dropout;               /* 0.05 */
    StrList lora_target_modules;       /* empty: q_proj v_proj (PEFT's default for these models) */
    int use_rslora;
    const char *adapter;               /* a PEFT adapter to continue training (implies use_peft) */
} TrainingArgs;

extern const OptSpec training_args_options[];
extern const int training_args_n_options;
#define TRAINING_ARGS_GROUP(base) ((OptGroup){training_args_options, training_args_n_options, (base), OPT_SEC_NONE})

/* The rules between these options (their ranges are checked by opts_check over
 * the command's groups), with a message that names the options and values. */
int training_args_check(const TrainingArgs *a, GrpoErr *err);

/* The run's schedule: lr_scheduler_type with lr_scheduler_kwargs over total_steps
 * optimizer steps, warmup from warmup_steps or warmup_ratio (sched_init). */
/* Steps between checkpoints under save_strategy steps in a run of total_steps:
 * save_steps, or ceil(total_steps x save_steps) when it is below 1 (transformers'
 * rule); 0 = none. */
long training_args_save_every(const TrainingArgs *a, long total_steps);
/* gradient_checkpointing and its policy as the training passes take them, on the CPU
 * (acts_create) and the GPU (gpu/model_train.h): CKPT_NONE, CKPT_SELECTIVE or CKPT_FULL. */
CheckpointMode training_args_ckpt(const TrainingArgs *a);
/* What a run short of activation memory can set to keep less under ckpt ("set
 * gradient_checkpointing true", "... _policy full"); NULL under CKPT_FULL. */
const char *training_args_ckpt_less(CheckpointMode ckpt);

int training_args_schedule(const TrainingArgs *a, long total_steps, Schedule *s, GrpoErr *err);

#endif
