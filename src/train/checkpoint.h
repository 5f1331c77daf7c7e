/* train/checkpoint.h — checkpoint directories shared by `grpo train` and `grpo sft`:
 * output_dir/checkpoint-N/ holds the model in the HF layout (fp32, so training
 * resumes from the exact weights), optimizer.safetensors (AdamW's exp_avg /
 * exp_avg_sq per parameter name), optionally ref_model.safetensors, one extra JSON
 * file of the caller's, and trainer_state.json. Written into a temporary directory
 * and renamed, so a crash never leaves a half checkpoint. */
#ifndef GRPO_TRAIN_CHECKPOINT_H
#define GRPO_TRAIN_CHECKPOINT_H

#include <jansson.h>

#include "core/check.h"
#include "model/model_io.h"
#include "model/transformer.h"
#include "optim/optim.h"

typedef struct {
    const char *output_dir;
    long step;
    const Model *model;
    const char *copy_from;      /* model directory whose tokenizer files are copied */
    const AdamW *opt;
    json_t *state;              /* trainer_state.json, flat (borrowed; the hook may add to it); written with
                                   our fields under stateful_callbacks (train/hf_state.h) */
    /* NULL, or writes the caller's own files into dir (the checkpoint being made) */
    int (*add)(void *ctx, const char *dir, json_t *state, GrpoErr *err);
    void *add_ctx;
    int total_limit;            /* keep at most this many checkpoints (0 = all) */
    const ModelSaveMeta *meta;  /* special ids and generation config for the model files, or NULL */
} CkptWrite;

/* Writes output_dir/checkpoint-N; returns its path (malloc'd) in *path when path != NULL. */
int ckpt_write(const CkptWrite *w, char **path, GrpoErr *err);

/* Restores model params and optimizer m/v from dir; *state gets
 * trainer_state.json (new reference) in the flat form ckpt_write was given: our
 * fields moved back out of stateful_callbacks, or as they are in a checkpoint
 * written before they were moved there. */
int ckpt_read(const char *dir, Model *model, AdamW *opt, json_t **state, GrpoErr *err);

/* Parameters by the table's names (e.g. a reference model) to and from a
 * safetensors file of a checkpoint. */
int ckpt_write_params(const char *path, const ParamTable *tab, const float *params, GrpoErr *err);
int ckpt_read_params(const char *path, const ParamTable *tab, float *params, GrpoErr *err);

/* "latest" -> the newest checkpoint-N in output_dir (malloc'd), else a copy of spec. */
char *ckpt_resolve(const char *output_dir, const char *spec, GrpoErr *err);

/* A resume from step `step`: output_dir's checkpoint-N with N > step are what a
 * run that went on past it wrote, which `latest` (the highest N, as transformers'
 * get_last_checkpoint picks) would later pick over this run's. Refused (-1,
 * naming them), or with overwrite removed, note[note_bytes] saying so (else ""). */
int ckpt_check_later(const char *output_dir, long step, int overwrite, char *note, size_t note_bytes, GrpoErr *err);

/* Keeps the lines of output_dir/file whose "step" is <= step (drops what an
 * interrupted run logged after its last checkpoint), replacing the file atomically.
 * A line that is not a JSON object with an integer "step": the last one without
 * its newline (an interrupted write) is dropped, note[note_bytes] saying so with
 * FILE:LINE (else ""); any other is an error naming FILE:LINE, the file untouched. */
int ckpt_truncate_log(const char *output_dir, const char *file, long step, char *note, size_t note_bytes,
                      GrpoErr *err);

/* Removes the temporary directories (NAME.tmp-PID-N) that a killed save of this
 * program left: checkpoint-N's in output_dir and the final save's beside it —
 * only those whose process no longer runs. */
void ckpt_remove_leftovers(const char *output_dir);

/* Before a new (not resumed) run: an output_dir holding an earlier run's
 * metrics or checkpoints is refused, or with overwrite emptied of them (so that
 * `latest` cannot find the earlier run's checkpoints). */
int ckpt_prepare_output_dir(const char *output_dir, int overwrite, GrpoErr *err);

#endif
