/* train/hf_state.h — what trainer_state.json holds for the tools that read
 * transformers' checkpoints: TrainerState's fields (log_history, global_step,
 * max_steps, epoch, logging_steps, eval_steps, save_steps, train_batch_size,
 * num_train_epochs, num_input_tokens_seen, total_flos, best_metric, ...,
 * stateful_callbacks), log_history kept across a resume, and where our own fields
 * go in the file.
 *
 * The file's top level holds TrainerState's fields only, since transformers'
 * TrainerState.load_from_json is cls(**json.loads(text)): an unknown key is a
 * TypeError. Ours (version, algorithm, adam_step, ..., an algorithm's) go under
 * stateful_callbacks.GrpoTrainer in the shape transformers' ExportableState
 * records a callback: "args" (the recorded options) and "attributes" (the rest;
 * transformers restores no callback unless asked, and skips unknown ones). The
 * loop and the algorithms see one flat object: hf_state_nest makes the file's
 * form when a checkpoint is written, hf_state_unnest undoes it when one is read.
 *
 * log_history is a list of the logged dicts as transformers appends them: the
 * metrics of a logging step or an evaluation (its eval_* values), then "epoch"
 * and "step"; the values are those metrics.jsonl shows (the same rounding), a
 * NaN is null. Not here: the loop's own fields (train/loop.c) or the files of a
 * checkpoint (train/checkpoint.c). */
#ifndef GRPO_TRAIN_HF_STATE_H
#define GRPO_TRAIN_HF_STATE_H

#include <jansson.h>

#include "core/check.h"
#include "log/metrics.h"

/* The numbers TrainerState records beside log_history: what a checkpoint
 * writes, and what a reward function gets as trainer_state. */
typedef struct {
    long global_step, max_steps;
    double epoch;            /* examples consumed / examples in the data; NaN: None (no training run) */
    long num_train_epochs;   /* epochs the run spans, whole (transformers rounds up) */
    long logging_steps, eval_steps, save_steps;
    long train_batch_size;   /* per_device_train_batch_size; 0: None (no training run) */
    long num_input_tokens_seen;
    int is_world_process_zero, is_local_process_zero;
} HfStateInfo;

/* What transformers' TrainerState() holds before any training (a Trainer that
 * only evaluates): step 0, max_steps 0, epoch and train_batch_size None,
 * logging/eval/save_steps 500, process zero. */
void hf_state_fresh(HfStateInfo *info);

/* TrainerState's fields but log_history and stateful_callbacks (new reference):
 * epoch, global_step, max_steps, ..., is_world_process_zero, best_metric (None),
 * as save_to_json writes them. A reward function's trainer_state. */
json_t *hf_state_fields(const HfStateInfo *info);

/* Appends acc's means (as metrics.jsonl writes them, "epoch" among them) to
 * history as one entry, with "step" last, as transformers' log() appends it. */
void hf_state_log_append(json_t *history, const MetricAcc *acc, long step);

/* Adds TrainerState's fields to state (a new object for log_history, a copy of
 * history): what TrainerState.save_to_json writes, the loop's fields untouched. */
void hf_state_add(json_t *state, const HfStateInfo *info, const json_t *history);

/* The log_history of checkpoint dir's trainer_state.json st at global_step step
 * (new reference): a list of objects, each with an integer "step", in
 * non-decreasing order and none past step; an empty list when st has none (a
 * checkpoint from before log_history was kept). NULL with err naming the file and
 * what was expected otherwise. */
json_t *hf_state_read_history(const json_t *st, long step, const char *dir, GrpoErr *err);

/* Where our own fields are in the file, for messages that name one. */
#define HF_STATE_OURS "stateful_callbacks.GrpoTrainer.attributes"

/* The file's form of the flat state (new reference): TrainerState's fields at
 * the top (global_step and max_steps are ours too, the same numbers), "args" as
 * stateful_callbacks.GrpoTrainer.args and every other field in its attributes. */
json_t *hf_state_nest(const json_t *state);

/* The flat form of a file's state st, in place: stateful_callbacks.GrpoTrainer's
 * args and attributes moved back to the top. A state without that callback (the
 * flat layout of a checkpoint written before the fields were nested) is left as
 * it is. -1 with err naming the file and the field when the callback is not
 * {"args": {...}, "attributes": {...}} or an attribute is also at the top level. */
int hf_state_unnest(json_t *st, const char *dir, GrpoErr *err);

#endif
