/* model/config.h — the architecture of a Qwen2 / Qwen3 / Llama model, read from a
 * Hugging Face config.json (+ generation_config.json), validated, and written back.
 *
 * One generic transformer covers the three families through flags:
 *   qwen2: bias on q/k/v (not o)        qwen3: per-head q/k RMSNorm, optional bias
 *   llama: optional bias on q/k/v/o, rope_scaling {"rope_type": "llama3"} */
#ifndef GRPO_MODEL_CONFIG_H
#define GRPO_MODEL_CONFIG_H

#include <jansson.h>

#include "core/check.h"

typedef enum { MODEL_QWEN2, MODEL_QWEN3, MODEL_LLAMA } ModelType;

#define MODEL_MAX_EOS 8

typedef struct {
    ModelType type;
    int hidden_size;          /* C */
    int intermediate_size;    /* F */
    int n_layers;             /* L */
    int n_heads;              /* H */
    int n_kv_heads;           /* Hkv */
    int head_dim;             /* D */
    int vocab_size;           /* V */
    int max_position_embeddings;
    float rms_norm_eps;
    double rope_theta;
    int rope_llama3;          /* rope_scaling of type llama3 */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_position;
    int qkv_bias, o_bias;     /* q/k/v bias; o_proj bias */
    int qk_norm;              /* per-head RMSNorm on q and k (Qwen3) */
    int tie_word_embeddings;
    int bos_token_id;         /* -1 when absent */
    int n_eos;
    int eos_token_ids[MODEL_MAX_EOS];
    char torch_dtype[16];     /* "float32", "bfloat16", "float16" */
    json_t *raw;              /* the config.json object as read (owned), written back on save */
} ModelConfig;

/* Parses dir/config.json and, when present, dir/generation_config.json (extra eos ids).
 * Errors name the file and the field: "DIR/config.json: num_attention_heads (14) must
 * divide hidden_size (900) when head_dim is absent". */
int config_load(ModelConfig *cfg, const char *dir, GrpoErr *err);
/* Same from an already-parsed object; `path` is used in messages. Takes a reference. */
int config_from_json(ModelConfig *cfg, json_t *root, const char *path, GrpoErr *err);
void config_free(ModelConfig *cfg);

/* RoPE inverse frequencies inv_freq[D/2], llama3 scaling applied (computed in double). */
void config_rope_inv_freq(const ModelConfig *cfg, float *inv_freq);

const char *config_model_type_name(ModelType t);
/* Parameter count, the same number Hugging Face reports (tied head counted once). */
long long config_param_count(const ModelConfig *cfg);
/* Refuses, with the numbers, a model whose fp32 parameters do not fit in the
 * memory available now (core/memory.h) — before anything is allocated. */
int config_check_memory(const ModelConfig *cfg, const char *path, GrpoErr *err);

#endif
