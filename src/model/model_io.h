/* model/model_io.h — Hugging Face model directories in and out.
 *
 * A directory holds config.json, model.safetensors (or shards + index),
 * optionally generation_config.json and the tokenizer files. Loading converts
 * F32/BF16/F16 tensors to fp32 and remembers each tensor's dtype; saving writes
 * them back in that dtype (or one chosen), so load-then-save is bit-identical. */
#ifndef GRPO_MODEL_MODEL_IO_H
#define GRPO_MODEL_MODEL_IO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/check.h"
#include "model/transformer.h"

int model_load(Model *m, const char *dir, GrpoErr *err);
/* A model nothing trains, in form (transformer.h): the bf16 forms hold the matrices
 * in bf16 (model_create_half), read straight from the file's tensors, never as a
 * whole fp32 copy. */
int model_load_ex(Model *m, const char *dir, WeightForm form, GrpoErr *err);

/* What save_pretrained writes beside the weights that a source directory may
 * lack: the special ids in config.json, and a generation_config.json. */
typedef struct {
    int32_t bos, eos, pad;            /* -1: unknown; each added to config.json where it has no such key */
    const json_t *generation_config;  /* written when no generation_config.json was copied (NULL: none) */
    const char *chat_template;        /* the tokenizer's template when it is not the source's (NULL: as copied) */
} ModelSaveMeta;

/* Makes template the chat template of the model directory dir: tokenizer_config.json's
 * chat_template (the file made when missing), and chat_template.jinja where there is
 * one, as a tokenizer whose chat_template was set saves it. Each file written whole. */
int model_set_chat_template(const char *dir, const char *template_text, GrpoErr *err);

typedef struct {
    int dtype;                 /* StDtype to store every tensor as, or -1 to keep each tensor's own */
    size_t max_shard_bytes;    /* shard past this size (0: never); HF's default is 5 GB */
    const char *copy_from;     /* directory whose tokenizer / generation files are copied, or NULL */
    const ModelSaveMeta *meta; /* or NULL */
} ModelSaveOpts;

void model_save_opts_default(ModelSaveOpts *o);

/* Writes the model directory to out_dir through a temporary sibling directory
 * renamed into place when complete: an error never leaves a partial directory. */
int model_save(const Model *m, const char *out_dir, const ModelSaveOpts *opts, GrpoErr *err);

/* A fingerprint of the weights of the model directory dir that m was loaded from,
 * as 16 hex digits in hex[17]: 64-bit FNV-1a over each tensor of m's table — its
 * name, stored dtype, shape, and 64 runs of 8 bytes spread evenly over its data
 * (all of it below 512 bytes). Cheap (a few pages per tensor, whatever the model's
 * size) and tells apart another model of the same shape (other weights everywhere);
 * the same weights stored in another dtype read as another model. */
int model_weights_digest(const Model *m, const char *dir, char hex[17], GrpoErr *err);

/* The files copied through from a source model directory when present. */
extern const char *const model_side_files[];
/* Copies those of from's side files that exist into directory to (the
 * tokenizer's; generation_config.json too when with_generation_config). */
int model_copy_side_files(const char *from, const char *to, int with_generation_config, GrpoErr *err);

#endif
