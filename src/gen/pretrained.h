/* gen/pretrained.h — a model directory opened for generation, the one way every
 * command opens one: the weights (config.json, generation_config.json,
 * safetensors), the tokenizer (tokenizer.json, tokenizer_config.json), and the
 * generation defaults they imply — today the eos ids, the union of the model's
 * and the tokenizer's, as transformers' generate stops on either. */
#ifndef GRPO_GEN_PRETRAINED_H
#define GRPO_GEN_PRETRAINED_H

#include "data/dataset.h"
#include "gen/generate.h"
#include "model/lora_layers.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    Model model;
    Tokenizer *tok;
} Pretrained;

/* Loads dir, its matrices in form (model_load_ex). When o is not NULL, sets its eos
 * ids. On error nothing is left to free. */
int pretrained_open(Pretrained *p, const char *dir, WeightForm form, GenOpts *o, GrpoErr *err);
/* Frees what pretrained_open loaded; safe on a zeroed Pretrained. */
void pretrained_close(Pretrained *p);

/* What a saved directory adds to the model's files, as save_pretrained writes
 * them after TRL: the tokenizer's special ids for config.json (pad: the
 * tokenizer's, else eos, as TRL sets it) and a generation_config.json holding
 * them and, when o is given, the sampling settings the run used (do_sample,
 * temperature, top_p, top_k, min_p, repetition_penalty), so that generate()
 * samples as training did. json_decref(meta->generation_config) when done. */
void gen_save_meta(ModelSaveMeta *meta, const Tokenizer *tok, const GenOpts *o);

/* The end-of-sequence id a training example is closed with: the tokenizer's eos
 * token, else the first of its eos ids, else the model's (config.json), else -1. */
int32_t pretrained_eos(const Pretrained *p);

/* dir's PEFT LoRA adapter on m: folded into fp32 weights (lora_apply_dir, as grpo merge
 * does); on bf16 ones (m->half) read unmerged into *l (lora_layers_load: every layer must
 * adapt the same modules) and attached (m->lora, *attached 1): the form bf16 products
 * run an adapter in on either machine — the bf16 base's products, the adapter's own
 * fp32 path beside them (PEFT's unmerged LoRA on a bf16 model). A fold into the bf16
 * matrices would round most of a small adapter's delta away. On error (the loader's
 * line, with what --bf16 false does instead) nothing is attached or left to free; when
 * attached, lora_layers_free(l) after m is done with it. */
int pretrained_adapter_apply(Model *m, LoraLayers *l, int *attached, const char *dir, GrpoErr *err);

/* What `grpo train`, `generate` and `eval` all set up: a model and its tokenizer,
 * a prompt dataset tokenized for it (left-truncated to max_prompt_length), and a
 * generator planned for the longest of its first n prompts (all when n <= 0). */
typedef struct {
    Pretrained own; /* what gen_session_open loaded (empty when the session borrows its model) */
    Model *model;   /* the model generating: own.model, or a training run's */
    Tokenizer *tok;
    Dataset data;
    Generator gen;
    int n;          /* prompts planned for */
    int longest;    /* the longest of them, in tokens: what the generator is planned for */
    GpuModel gpu_model; /* gen_session_open_gpu's upload of model (gen.opts.device's), else empty */
    GenDevice device;   /* its device and gpu_model, the generator's opts.device */
    LoraLayers lora;    /* the session's adapter, unmerged beside a bf16 base (model->lora), when has_lora */
    int has_lora;
} GenSession;

/* Opens model_dir (its matrices in form o->weights). Takes ownership
 * of *data (loaded by the caller). o's eos ids are set from the model directory.
 * adapter (NULL: none), a PEFT LoRA directory: folded into fp32 weights
 * (lora_apply_dir, as grpo merge) under WEIGHTS_FP32; under the bf16 forms read
 * unmerged and decoded beside the bf16 base (pretrained_adapter_apply), as on the
 * GPU. On error nothing is left to free. */
int gen_session_open(GenSession *s, const char *model_dir, const char *adapter, Dataset *data, GenOpts *o,
                     int max_prompt_length, int n, GrpoErr *err);
/* The same generating on the GPU d (open; the caller's, closed after the session):
 * o->weights must be a bf16-product form (WEIGHTS_BF16), the model is uploaded
 * (gpu_model_upload) and the generator made on the device (GenOpts.device). adapter
 * (NULL: none), a PEFT LoRA directory, is read unmerged (pretrained_adapter_apply)
 * and decoded beside the bf16 base, as a LoRA run's policy, `grpo score --adapter`
 * on the GPU and the CPU's --bf16 true compute it. */
int gen_session_open_gpu(GenSession *s, GpuDevice *d, const char *model_dir, const char *adapter, Dataset *data,
                         GenOpts *o, int max_prompt_length, int n, GrpoErr *err);
/* The prompts over a model and tokenizer opened already (a training run's:
 * borrowed, never freed here); o's eos ids are set by the caller. No generator
 * yet: gen_session_start makes it, once the run has planned its own memory (on a
 * GPU the generator's plan is checked against what training left free). */
int gen_session_borrow(GenSession *s, Model *model, Tokenizer *tok, Dataset *data, const GenOpts *o,
                       int max_prompt_length, int n, GrpoErr *err);
/* A borrowing session's generator, planned for s->longest: on the host, or with
 * o->device on that GPU (decoding its GpuModel; s->model gives the config). */
int gen_session_start(GenSession *s, const GenOpts *o, GrpoErr *err);
void gen_session_close(GenSession *s);

/* Another prompt dataset for the same generator (training's eval_dataset):
 * tokenized like the session's, checked against the model, and the generator
 * planned again when its prompts are longer. */
int gen_session_prepare(GenSession *s, Dataset *data, const GenOpts *o, int max_prompt_length, GrpoErr *err);

#endif
