/* sft/sft.h — supervised fine-tuning / pre-training with next-token cross-entropy,
 * the way TRL users run SFTTrainer before GRPO. JSON lines with
 *   {"text": ...}                       language modelling: every token is a target
 *   {"prompt": ..., "completion": ...}  loss on the completion only (completion_only_loss)
 *   {"messages": [{role, content}...]}  the conversation rendered by the chat template
 * (an eos token is appended to text and completions). The loss of an optimizer step
 * is the mean over every target token of its gradient_accumulation_steps
 * micro-batches, computed exactly across micro-batches as in the GRPO trainer.
 * Same optimizer, schedule, checkpoints, resume, metrics and progress. */
#ifndef GRPO_SFT_SFT_H
#define GRPO_SFT_SFT_H

#include <stdint.h>

#include "core/check.h"
#include "train/args.h"

typedef struct {
    const char *model_dir, *dataset, *output_dir;
    int per_device_train_batch_size;   /* 8 */
    int gradient_accumulation_steps;   /* 1 */
    int max_length;                    /* 1024: tokens kept per example, from the left */
    int completion_only_loss;          /* 1 */
    int shuffle_dataset;               /* 1 */
    TrainingArgs train;                /* learning_rate 2e-5 (TRL SFTConfig) */
} SftConfig;

void sft_config_default(SftConfig *c);
int sft_run(const SftConfig *c, GrpoErr *err);

#endif
