/* model/config.c — reading and validating config.json (see config.h).
 * Not here: the tensors themselves (model/params.c) or their files (model/model_io.c). */
#include "model/config.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/memory.h"
#include "io/fsutil.h"

const char *config_model_type_name(ModelType t) {
    switch (t) {
    case MODEL_QWEN2: return "qwen2";
    case MODEL_QWEN3: return "qwen3";
    case MODEL_LLAMA: return "llama";
    }
    return "?";
}

/* Integer field; `required` fields missing are an error, others get def. */
static int get_int(json_t *root, const char *path, const char *key, int required, int def,
                   int *out, GrpoErr *err) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) return err_set(err, "%s: missing field '%s' (an integer)", path, key);
        *out = def;
        return 0;
    }
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x < -2147483647LL || x > 2147483647LL)
            return err_set(err, "%s: field '%s' = %lld is out of range", path, key, (long long)x);
        *out = (int)x;
        return 0;
    }
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
        fabs(json_real_value(v)) < 2147483647.0) {
        *out = (int)json_real_value(v);
        return 0;
    }
    return err_set(err, "%s: field '%s' must be an integer", path, key);
}

static int get_num(json_t *root, const char *path, const char *key, int required, double def,
                   double *out, GrpoErr *err) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) return err_set(err, "%s: missing field '%s' (a number)", path, key);
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) return err_set(err, "%s: field '%s' must be a number", path, key);
    *out = json_number_value(v);
    return 0;
}

static int get_bool(json_t *root, const char *path, const char *key, int def, int *out,
                    GrpoErr *err) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) return err_set(err, "%s: field '%s' must be true or false", path, key);
    *out = json_is_true(v);
    return 0;
}

/* eos_token_id: an integer or a list of integers; appended to cfg's list (no duplicates). */
static int add_eos(ModelConfig *cfg, json_t *v, const char *path, GrpoErr *err) {
    if (!v || json_is_null(v)) return 0;
    json_t *one;
    size_t i, n = json_is_array(v) ? json_array_size(v) : 1;
    for (i = 0; i < n; i++) {
        one = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(one) || json_integer_value(one) < 0)
            return err_set(err, "%s: eos_token_id must be a non-negative integer or a list of them", path);
        if (cfg->vocab_size > 0 && json_integer_value(one) >= cfg->vocab_size)
            return err_set(err, "%s: eos_token_id %lld is outside the vocabulary (vocab_size %d)", path,
                           (long long)json_integer_value(one), cfg->vocab_size);
        int id = (int)json_integer_value(one), dup = 0;
        for (int k = 0; k < cfg->n_eos; k++) dup |= cfg->eos_token_ids[k] == id;
        if (dup) continue;
        if (cfg->n_eos == MODEL_MAX_EOS)
            return err_set(err, "%s: more than %d eos_token_id values", path, MODEL_MAX_EOS);
        cfg->eos_token_ids[cfg->n_eos++] = id;
    }
    return 0;
}

static int parse_rope_scaling(ModelConfig *cfg, json_t *root, const char *path, GrpoErr *err) {
    json_t *rs = json_object_get(root, "rope_scaling");
    if (!rs || json_is_null(rs)) return 0;
    if (!json_is_object(rs)) return err_set(err, "%s: rope_scaling must be an object or null", path);
    json_t *type = json_object_get(rs, "rope_type");
    if (!type) type = json_object_get(rs, "type");
    if (!json_is_string(type))
        return err_set(err, "%s: rope_scaling needs a 'rope_type' string", path);
    const char *t = json_string_value(type);
    if (!strcmp(t, "default")) return 0;
    if (strcmp(t, "llama3"))
        return err_set(err, "%s: rope_scaling type '%s' is not supported (supported: llama3, default)", path, t);
    char sub[600];
    snprintf(sub, sizeof sub, "%s: rope_scaling", path);
    cfg->rope_llama3 = 1;
    if (get_num(rs, sub, "factor", 1, 0, &cfg->rope_factor, err) ||
        get_num(rs, sub, "low_freq_factor", 1, 0, &cfg->rope_low_freq_factor, err) ||
        get_num(rs, sub, "high_freq_factor", 1, 0, &cfg->rope_high_freq_factor, err) ||
        get_int(rs, sub, "original_max_position_embeddings", 1, 0, &cfg->rope_original_max_position, err))
        return -1;
    if (!(cfg->rope_factor > 0) || !(cfg->rope_low_freq_factor > 0) ||
        !(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor) || cfg->rope_original_max_position <= 0)
        return err_set(err, "%s: rope_scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0", path);
    return 0;
}

int config_from_json(ModelConfig *cfg, json_t *root, const char *path, GrpoErr *err) {
    memset(cfg, 0, sizeof *cfg);
    cfg->bos_token_id = -1;
    if (!json_is_object(root)) return err_set(err, "%s: expected a JSON object", path);
    json_t *mt = json_object_get(root, "model_type");
    if (!json_is_string(mt)) return err_set(err, "%s: missing field 'model_type' (a string)", path);
    const char *t = json_string_value(mt);
    if (!strcmp(t, "qwen2")) cfg->type = MODEL_QWEN2;
    else if (!strcmp(t, "qwen3")) cfg->type = MODEL_QWEN3;
    else if (!strcmp(t, "llama")) cfg->type = MODEL_LLAMA;
    else return err_set(err, "%s: model_type '%s' is not supported (supported: qwen2, qwen3, llama)", path, t);

    double eps = 0, theta = 0;
    int attention_bias = 0, mlp_bias = 0, sliding = 0;
    if (get_int(root, path, "hidden_size", 1, 0, &cfg->hidden_size, err) ||
        get_int(root, path, "intermediate_size", 1, 0, &cfg->intermediate_size, err) ||
        get_int(root, path, "num_hidden_layers", 1, 0, &cfg->n_layers, err) ||
        get_int(root, path, "num_attention_heads", 1, 0, &cfg->n_heads, err) ||
        get_int(root, path, "num_key_value_heads", 0, cfg->n_heads, &cfg->n_kv_heads, err) ||
        get_int(root, path, "vocab_size", 1, 0, &cfg->vocab_size, err) ||
        get_int(root, path, "max_position_embeddings", 0, 32768, &cfg->max_position_embeddings, err) ||
        get_num(root, path, "rms_norm_eps", 0, 1e-6, &eps, err) ||
        get_num(root, path, "rope_theta", 0, 10000.0, &theta, err) ||
        get_bool(root, path, "tie_word_embeddings", cfg->type != MODEL_LLAMA, &cfg->tie_word_embeddings, err) ||
        get_bool(root, path, "attention_bias", 0, &attention_bias, err) ||
        get_bool(root, path, "mlp_bias", 0, &mlp_bias, err) ||
        get_bool(root, path, "use_sliding_window", 0, &sliding, err) ||
        get_int(root, path, "bos_token_id", 0, -1, &cfg->bos_token_id, err) ||
        parse_rope_scaling(cfg, root, path, err) ||
        add_eos(cfg, json_object_get(root, "eos_token_id"), path, err))
        return -1;
    if (cfg->hidden_size <= 0 || cfg->intermediate_size <= 0 || cfg->n_layers <= 0 ||
        cfg->n_heads <= 0 || cfg->n_kv_heads <= 0 || cfg->vocab_size <= 0 ||
        cfg->max_position_embeddings <= 0)
        return err_set(err, "%s: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, "
                       "num_key_value_heads, vocab_size and max_position_embeddings must be positive", path);
    /* Bounds far above any published model (Llama 3.1 405B: hidden 16384, intermediate
     * 53248, 126 layers, 128 heads; vocabularies up to ~262k), so that every size
     * derived from them is exact in 64 bits and every tensor indexable in 32. */
    static const struct { const char *name; int max; size_t off; } bounds[] = {
        {"hidden_size", 1 << 16, offsetof(ModelConfig, hidden_size)},
        {"intermediate_size", 1 << 20, offsetof(ModelConfig, intermediate_size)},
        {"num_hidden_layers", 1 << 10, offsetof(ModelConfig, n_layers)},
        {"num_attention_heads", 1 << 10, offsetof(ModelConfig, n_heads)},
        {"vocab_size", 1 << 24, offsetof(ModelConfig, vocab_size)},
    };
    for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++) {
        int v = *(const int *)((const char *)cfg + bounds[i].off);
        if (v > bounds[i].max)
            return err_set(err, "%s: %s (%d) is larger than any supported model (at most %d)", path, bounds[i].name,
                           v, bounds[i].max);
    }
    if (cfg->n_heads % cfg->n_kv_heads)
        return err_set(err, "%s: num_key_value_heads (%d) must divide num_attention_heads (%d)", path,
                       cfg->n_kv_heads, cfg->n_heads);
    json_t *hd = json_object_get(root, "head_dim");
    if (hd && !json_is_null(hd)) {
        if (get_int(root, path, "head_dim", 1, 0, &cfg->head_dim, err)) return -1;
    } else {
        if (cfg->hidden_size % cfg->n_heads)
            return err_set(err, "%s: num_attention_heads (%d) must divide hidden_size (%d) when head_dim is absent",
                           path, cfg->n_heads, cfg->hidden_size);
        cfg->head_dim = cfg->hidden_size / cfg->n_heads;
    }
    if (cfg->head_dim <= 0 || cfg->head_dim % 2 || cfg->head_dim > 1024)
        return err_set(err, "%s: head_dim (%d) must be even and in 2..1024", path, cfg->head_dim);
    long long C = cfg->hidden_size, q = (long long)cfg->n_heads * cfg->head_dim;
    long long biggest[3][2] = {{cfg->vocab_size, C}, {cfg->intermediate_size, C}, {q, C}};
    static const char *what[3] = {"vocab_size x hidden_size", "intermediate_size x hidden_size",
                                  "num_attention_heads x head_dim x hidden_size"};
    for (int i = 0; i < 3; i++)
        if (biggest[i][0] * biggest[i][1] > 2147483647LL)
            return err_set(err, "%s: %s = %lld values in one tensor; at most 2147483647 are supported", path,
                           what[i], biggest[i][0] * biggest[i][1]);
    if (!(eps > 0 && eps < 1)) return err_set(err, "%s: rms_norm_eps must be in (0, 1)", path);
    if (!(theta > 0)) return err_set(err, "%s: rope_theta must be positive", path);
    cfg->rms_norm_eps = (float)eps;
    cfg->rope_theta = theta;
    if (mlp_bias) return err_set(err, "%s: mlp_bias true is not supported", path);
    if (sliding) return err_set(err, "%s: use_sliding_window true is not supported", path);
    json_t *act = json_object_get(root, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
        return err_set(err, "%s: hidden_act must be \"silu\"", path);
    cfg->qkv_bias = cfg->type == MODEL_QWEN2 ? 1 : attention_bias;
    cfg->o_bias = cfg->type == MODEL_QWEN2 ? 0 : attention_bias;
    cfg->qk_norm = cfg->type == MODEL_QWEN3;
    if (cfg->bos_token_id >= cfg->vocab_size) cfg->bos_token_id = -1;
    json_t *dt = json_object_get(root, "torch_dtype");
    if (!dt) dt = json_object_get(root, "dtype");
    snprintf(cfg->torch_dtype, sizeof cfg->torch_dtype, "%s",
             json_is_string(dt) ? json_string_value(dt) : "float32");
    cfg->raw = json_incref(root);
    return 0;
}

/* generation_config.json's sampling fields have the types transformers'
 * GenerationConfig gives them (it fails on "temperature": "hot" too). Training
 * and generation take their sampling from the options, as TRL does; these are
 * checked so that a broken file is not silently accepted. */
static int check_generation_config(json_t *g, const char *path, GrpoErr *err) {
    static const char *const nums[] = {"temperature", "top_p", "min_p", "typical_p", "repetition_penalty",
                                       "length_penalty", NULL};
    static const char *const ints[] = {"top_k", "max_new_tokens", "max_length", "min_length", "min_new_tokens",
                                       "num_beams", "bos_token_id", "pad_token_id", NULL};
    for (int i = 0; nums[i]; i++) {
        json_t *v = json_object_get(g, nums[i]);
        if (v && !json_is_null(v) && !json_is_number(v))
            return err_set(err, "%s: %s must be a number", path, nums[i]);
        if (json_is_number(v) && !(json_number_value(v) >= 0 && isfinite(json_number_value(v))))
            return err_set(err, "%s: %s must be a finite number >= 0 (got %g)", path, nums[i], json_number_value(v));
    }
    for (int i = 0; ints[i]; i++) {
        json_t *v = json_object_get(g, ints[i]);
        if (v && !json_is_null(v) && !json_is_integer(v))
            return err_set(err, "%s: %s must be an integer", path, ints[i]);
    }
    json_t *ds = json_object_get(g, "do_sample");
    if (ds && !json_is_null(ds) && !json_is_boolean(ds)) return err_set(err, "%s: do_sample must be true or false", path);
    return 0;
}

int config_load(ModelConfig *cfg, const char *dir, GrpoErr *err) {
    char *path = fs_join(dir, "config.json");
    json_t *root = NULL;
    int rc;
    if (!fs_exists(path))
        rc = err_set(err, "%s: no such file (a model directory needs config.json)", path);
    else if (!(root = fs_load_json(path, 0, err)))
        rc = -1;
    else
        rc = config_from_json(cfg, root, path, err);
    json_decref(root);
    free(path);
    if (rc) return -1;
    char *gpath = fs_join(dir, "generation_config.json");
    if (fs_exists(gpath)) {
        json_t *g = fs_load_json(gpath, 0, err);
        if (!g) rc = -1;
        else if (!json_is_object(g)) rc = err_set(err, "%s: expected a JSON object", gpath);
        else rc = check_generation_config(g, gpath, err) || add_eos(cfg, json_object_get(g, "eos_token_id"), gpath, err);
        json_decref(g);
    }
    free(gpath);
    if (rc) config_free(cfg);
    return rc;
}

void config_free(ModelConfig *cfg) {
    if (cfg->raw) json_decref(cfg->raw);
    cfg->raw = NULL;
}

/* Llama 3 frequency scaling (HF modeling_rope_utils, "llama3"): long wavelengths are
 * divided by factor, short ones kept, the band between interpolated smoothly. */
void config_rope_inv_freq(const ModelConfig *cfg, float *inv_freq) {
    int D = cfg->head_dim;
    for (int i = 0; i < D / 2; i++) {
        double f = 1.0 / pow(cfg->rope_theta, (2.0 * i) / D);
        if (cfg->rope_llama3) {
            double old = cfg->rope_original_max_position;
            double low_wl = old / cfg->rope_low_freq_factor, high_wl = old / cfg->rope_high_freq_factor;
            double wl = 2 * M_PI / f;
            if (wl > low_wl) f = f / cfg->rope_factor;
            else if (wl >= high_wl) {
                double smooth = (old / wl - cfg->rope_low_freq_factor) /
                                (cfg->rope_high_freq_factor - cfg->rope_low_freq_factor);
                f = (1 - smooth) * f / cfg->rope_factor + smooth * f;
            }
        }
        inv_freq[i] = (float)f;
    }
}

/* "1615.0 GB" or "3.3 MB", for messages. */
static const char *bytes_str(char *buf, size_t size, double b) {
    snprintf(buf, size, b >= 1e9 ? "%.1f GB" : "%.1f MB", b >= 1e9 ? b / 1e9 : b / 1e6);
    return buf;
}

int config_check_memory(const ModelConfig *cfg, const char *path, GrpoErr *err) {
    long long n = config_param_count(cfg);
    double need = 4.0 * (double)n;
    size_t avail = mem_available_bytes();
    if (avail == SIZE_MAX || need <= (double)avail) return 0;
    char a[32], b[32];
    return err_set(err, "%s: the model needs %s for its %lld parameters in fp32 (hidden_size %d, intermediate_size "
                   "%d, num_hidden_layers %d, vocab_size %d) and %s is available",
                   path, bytes_str(a, sizeof a, need), n, cfg->hidden_size, cfg->intermediate_size, cfg->n_layers,
                   cfg->vocab_size, bytes_str(b, sizeof b, (double)avail));
}

long long config_param_count(const ModelConfig *c) {
    long long C = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    long long q = (long long)c->n_heads * D, kv = (long long)c->n_kv_heads * D;
    long long layer = C /*ln1*/ + C * (q + 2 * kv) + q * C + C /*ln2*/ + 3 * C * F;
    if (c->qkv_bias) layer += q + 2 * kv;
    if (c->o_bias) layer += C;
    if (c->qk_norm) layer += 2 * D;
    long long total = (long long)c->vocab_size * C + c->n_layers * layer + C;
    if (!c->tie_word_embeddings) total += (long long)c->vocab_size * C;
    return total;
}
