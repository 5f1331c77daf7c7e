/* sft/sft.h — supervised fine-tuning / pre-training with next-token cross-entropy,
 * the way TRL users run SFTTrainer before GRPO, on the training loop
 * (train/loop.h), over the dataset formats of data/sft_data.h. The loss of an optimizer step
 * is the mean over every target token of its gradient_accumulation_steps
 * micro-batches, computed exactly across micro-batches as in the GRPO trainer. */
#ifndef GRPO_SFT_SFT_H
#define GRPO_SFT_SFT_H

#include "core/check.h"
#include "core/options.h"
#include "train/args.h"
#include "train/loop.h"

typedef struct {
    TrainingArgs train;                /* learning_rate 2e-5 (TRL SFTConfig) */
    int max_length;                    /* 1024: tokens kept per example, from the left */
    int completion_only_loss;          /* 1 */
    char *chat_template;               /* NULL: the model's (open-r1's SFTConfig.chat_template) */
} SftConfig;

/* The options of `grpo sft`, declared once: their groups placed in SftConfig. */
#define SFT_CONFIG_N_GROUPS 3
void sft_config_groups(OptGroup g[SFT_CONFIG_N_GROUPS]);

void sft_config_default(SftConfig *c);
int sft_config_check(const SftConfig *c, GrpoErr *err);

/* Runs the whole training (hooks may be NULL); returns as trainer_run. */
int sft_run(const SftConfig *c, const TrainHooks *hooks, GrpoErr *err);

#endif
