/* model/lora.h — LoRA adapters in PEFT's format, read and merged into a model.
 *
 * A PEFT LoRA adapter directory holds adapter_config.json (peft_type "LORA", r,
 * lora_alpha, use_rslora, target_modules, ...) and adapter_model.safetensors
 * with, per adapted linear layer MODULE (e.g. model.layers.0.self_attn.q_proj),
 * base_model.model.MODULE.lora_A.weight [r, in] and .lora_B.weight [out, r]
 * (the adapter name, ".default", may appear before ".weight"). The layer then
 * computes W x + scaling · B A x, scaling = lora_alpha / r (lora_alpha / sqrt(r)
 * with use_rslora), and merging folds it in: W += scaling · B A, as PEFT's
 * merge_and_unload does. What PEFT can write and this does not take — DoRA,
 * biases, fan_in_fan_out, modules_to_save, per-module rank or alpha patterns,
 * embedding adapters — is refused with the field named. */
#ifndef GRPO_MODEL_LORA_H
#define GRPO_MODEL_LORA_H

#include "core/check.h"
#include "model/lora_layers.h"
#include "model/transformer.h"

typedef struct {
    int param;          /* the adapted weight's entry in the model's ParamTable */
    int out, in;
    float *A;           /* [r, in] */
    float *B;           /* [out, r] */
} LoraPair;

/* target_modules or exclude_modules as PEFT reads them. */
typedef enum { LORA_MATCH_NONE, LORA_MATCH_LIST, LORA_MATCH_REGEX } LoraMatchKind;
typedef struct {
    LoraMatchKind kind;
    char **names;       /* LIST: a module's name or its last dotted parts */
    int n;
    void *re;           /* REGEX: the Oniguruma regex_t (Python syntax) the whole module name must match */
    char shown[128];    /* the field as written, escaped, for messages */
} LoraMatch;

typedef struct {
    int r;
    double alpha, scaling;
    double dropout;     /* lora_dropout (0 when absent) */
    int use_rslora;
    LoraMatch target, exclude;
    char *dir;          /* the adapter directory read (lora_load) */
    int n;
    LoraPair *pairs;
} LoraAdapter;

/* Reads dir's adapter and checks it against m: its adapter_config.json
 * (lora_config_read); every pair names a linear weight of m with shapes exactly
 * [r, in] and [out, r]; its values finite; the modules that have tensors exactly
 * those target_modules (less exclude_modules) names among m's. Errors name the
 * file, the field or tensor and what was expected. On error nothing is left to free. */
int lora_load(LoraAdapter *a, const char *dir, const Model *m, GrpoErr *err);

/* W += scaling · B A for every pair, into m's parameters; -1 with err naming the
 * weight when a merged value is not finite in fp32 (m is then partly merged). */
int lora_merge(const LoraAdapter *a, Model *m, GrpoErr *err);

/* ---- adapter_config.json (model/lora_config.c) ---- */

/* dir/adapter_config.json into a's r, alpha, scaling, dropout, use_rslora, target
 * and exclude: peft_type "LORA"; task_type "CAUSAL_LM", null or absent (as PEFT
 * loads it); r an integer in [1, 65536]; lora_alpha a finite number whose scaling
 * is finite in fp32; lora_dropout in [0, 1); target_modules a list of names, a
 * string (a regular expression, or "all-linear"), or null (PEFT's default here,
 * q_proj and v_proj); PEFT features not implemented refused by name. */
int lora_config_read(LoraAdapter *a, const char *dir, GrpoErr *err);
/* Would PEFT adapt the module of this name (e.g. "model.layers.0.self_attn.q_proj")? */
int lora_config_targets(const LoraAdapter *a, const char *module);
void lora_config_free(LoraAdapter *a);

void lora_free(LoraAdapter *a);

/* The adapter in dir folded into m (load, check, merge): what --adapter does on
 * generate, eval and score, the same as running the `grpo merge` output. */
int lora_apply_dir(Model *m, const char *dir, GrpoErr *err);

/* ---- trainable adapters in PEFT's files (model/lora_io.c) ---- */

/* Trainable adapters holding dir's adapter for m: every layer must adapt the
 * same modules with the same rank (what a LoraSpec describes). */
int lora_layers_load(LoraLayers *lo, const char *dir, const Model *m, uint64_t dropout_seed, GrpoErr *err);
/* dir's adapter_config.json (a checkpoint's) describes lo's adapters: the same r,
 * lora_alpha, use_rslora, lora_dropout and target modules, else -1 with err
 * naming the first that differs and both values. */
int lora_layers_check_config(const LoraLayers *lo, const char *dir, GrpoErr *err);
/* Replaces lo's A and B with dir's (a checkpoint of the same run): the same
 * tensors with the same shapes and finite values, else an error naming the
 * difference. */
int lora_layers_read_params(LoraLayers *lo, const char *dir, GrpoErr *err);

typedef struct {
    const char *base_model;    /* base_model_name_or_path */
    const char *copy_from;     /* directory whose tokenizer files are copied, or NULL */
} LoraSaveOpts;

/* Writes out_dir/adapter_config.json and adapter_model.safetensors (fp32, PEFT's
 * names) and the tokenizer files, through a temporary directory renamed into
 * place: an error never leaves a partial adapter. */
int lora_layers_save(const LoraLayers *lo, const char *out_dir, const LoraSaveOpts *o, GrpoErr *err);

#endif
