/* cli/train_opts.h — the command-line options `grpo train` and `grpo sft` share
 * (train/args.h: optimizer, schedule, steps, seed, recomputation, logging, saving,
 * resuming), defined once. */
#ifndef GRPO_CLI_TRAIN_OPTS_H
#define GRPO_CLI_TRAIN_OPTS_H

#include "cli/args.h"
#include "train/args.h"

#define TRAIN_OPTS_COUNT 19

typedef struct {
    double lr, b1, b2, eps, wd, warmup_ratio, max_grad_norm, epochs;
    long warmup_steps, max_steps, seed, logging_steps, save_steps, save_limit, lp_chunk;
    int ckpt, quiet;
    const char *sched, *resume;
} TrainOptValues;

/* Fills opts[0 .. TRAIN_OPTS_COUNT) with the shared options, their values in v
 * starting from the defaults in a. */
void train_opts_add(Opt *opts, TrainOptValues *v, const TrainingArgs *a);
/* Copies the parsed values into a. Returns NULL, or a usage message. */
const char *train_opts_apply(const TrainOptValues *v, TrainingArgs *a);

#endif
