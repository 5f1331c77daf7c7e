/* cli/cmd_init.c — `grpo init`: write a randomly initialised model directory in the
 * Hugging Face layout, from a preset (tiny, small) or a config.json, with the
 * tokenizer files of --tokenizer copied through. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "core/text.h"
#include "cli/commands.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "gen/pretrained.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"

/* Qwen3-style presets (q/k norm, tied embeddings); vocab and special ids come
 * from the tokenizer. */
static json_t *preset(const char *name) {
    int C, F, L, H, Hkv, D;
    if (!strcmp(name, "tiny")) C = 64, F = 192, L = 2, H = 4, Hkv = 2, D = 16;
    else if (!strcmp(name, "small")) C = 256, F = 768, L = 4, H = 8, Hkv = 4, D = 32;
    else return NULL;
    return json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:f, s:b, s:b, s:i, s:f, s:b}",
                     "architectures", "Qwen3ForCausalLM", "model_type", "qwen3", "hidden_size", C,
                     "intermediate_size", F, "num_hidden_layers", L, "num_attention_heads", H,
                     "num_key_value_heads", Hkv, "head_dim", D, "hidden_act", "silu",
                     "rms_norm_eps", 1e-6, "rope_theta", 1000000.0, "tie_word_embeddings", 1,
                     "attention_bias", 0, "max_position_embeddings", 4096,
                     "initializer_range", 0.02, "use_cache", 1);
}

typedef struct {
    const char *config, *tokenizer, *output_dir;
    int dtype;
    uint64_t seed;
} InitArgs;

/* "auto": the config's torch_dtype (or dtype, transformers' newer name), else float32 */
static const char *const DTYPE_NAMES[] = {"auto", "float32", "bfloat16", "float16", NULL};
static const StDtype DTYPES[] = {ST_F32, ST_F32, ST_BF16, ST_F16}; /* [0]: auto, resolved below */

#define A(f) offsetof(InitArgs, f)
static const OptSpec init_options[] = {
    {"config", OPT_STR, A(config), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED, "tiny | small | PATH/config.json"},
    {"tokenizer", OPT_STR, A(tokenizer), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0,
     "directory with tokenizer.json (required for presets)"},
    {"output_dir", OPT_STR, A(output_dir), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED, "directory to create"},
    {"dtype", OPT_ENUM, A(dtype), 0, NULL, OPT_NO_RANGE, DTYPE_NAMES, NULL, 0,
     "stored tensor dtype (auto: the config's torch_dtype, else float32)"},
};

int cmd_init(int argc, char **argv) {
    InitArgs a;
    OptGroup g[] = {OPT_GROUP(init_options, 0), SEED_OPTION_GROUP(A(seed), OPT_SEC_NONE)};
    opts_defaults(g, 2, &a);
    a.seed = 0;
    int rc = args_parse("init", "--config tiny|small|PATH --output_dir DIR [options]", argc, argv, g, 2, &a);
    if (rc) return rc == 1 ? 0 : rc;
    const char *config = a.config, *tokenizer = a.tokenizer, *output_dir = a.output_dir;
    if (fs_exists(output_dir)) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s: already exists; choose a new --output_dir", output_dir);
        return cli_fail("init", msg);
    }
    GrpoErr err;
    Tokenizer *tok = NULL;
    if (tokenizer && tok_load(&tok, tokenizer, &err)) return cli_fail("init", err.msg);
    json_t *root = preset(config);
    if (root) {
        if (!tok) {
            char shown[200];
            fprintf(stderr, "grpo init: the '%s' preset takes its vocabulary from --tokenizer DIR\n",
                    text_escaped(shown, sizeof shown, config, 80));
            json_decref(root);
            return 2;
        }
        const TokSpecial *sp = tok_special(tok);
        json_object_set_new(root, "vocab_size", json_integer(tok_vocab_size(tok)));
        if (sp->bos >= 0) json_object_set_new(root, "bos_token_id", json_integer(sp->bos));
        if (sp->n_eos > 0) json_object_set_new(root, "eos_token_id", json_integer(sp->eos_ids[0]));
    } else {
        root = fs_exists(config) ? fs_load_json(config, 0, &err) : NULL;
        if (!root) {
            if (!fs_exists(config)) snprintf(err.msg, sizeof err.msg, "%s: no such file", config);
            char m[sizeof err.msg + 64];
            snprintf(m, sizeof m, "%s (expected tiny, small or a config.json path)", err.msg);
            tok_free(tok);
            return cli_fail("init", m);
        }
    }
    ModelConfig cfg;
    rc = config_from_json(&cfg, root, config, &err);
    json_decref(root);
    if (!rc && tok && tok_vocab_size(tok) > cfg.vocab_size)
        rc = err_set(&err, "%s: vocab_size %d is smaller than the tokenizer's %d ids (%s)", config,
                     cfg.vocab_size, tok_vocab_size(tok), tokenizer);
    if (!rc) rc = config_check_memory(&cfg, config, &err);
    if (rc && cfg.raw) config_free(&cfg);
    ModelSaveMeta meta = {-1, -1, -1, NULL, NULL}; /* the special ids and a generation_config.json, from the tokenizer */
    if (!rc && tok) gen_save_meta(&meta, tok, NULL);
    tok_free(tok);
    if (rc) return cli_fail("init", err.msg);
    json_t *ir = json_object_get(cfg.raw, "initializer_range");
    float std = json_is_number(ir) ? (float)json_number_value(ir) : 0.02f;
    int dtype = a.dtype;
    if (dtype == 0) { /* auto */
        json_t *d = json_object_get(cfg.raw, "torch_dtype");
        if (!d) d = json_object_get(cfg.raw, "dtype");
        dtype = 1;
        if (json_is_string(d)) {
            int k = 1;
            while (DTYPE_NAMES[k] && strcmp(DTYPE_NAMES[k], json_string_value(d))) k++;
            if (!DTYPE_NAMES[k]) {
                char m[600];
                snprintf(m, sizeof m, "%s: torch_dtype '%s' is not float32, bfloat16 or float16 (or give --dtype)", config,
                         json_string_value(d));
                config_free(&cfg);
                json_decref((json_t *)meta.generation_config);
                return cli_fail("init", m);
            }
            dtype = k;
        }
    }
    Model m;
    model_create(&m, &cfg);
    model_init_random(&m, a.seed, std);
    ModelSaveOpts so;
    model_save_opts_default(&so);
    so.dtype = DTYPES[dtype];
    so.copy_from = tokenizer;
    so.meta = &meta;
    rc = model_save(&m, output_dir, &so, &err);
    char shown[300];
    if (!rc)
        fprintf(stderr, "grpo init: wrote %s (%s, %lld parameters, %s)\n", text_escaped(shown, sizeof shown, output_dir, 200),
                config_model_type_name(m.cfg.type), config_param_count(&m.cfg), DTYPE_NAMES[dtype]);
    model_free(&m);
    json_decref((json_t *)meta.generation_config);
    return rc ? cli_fail("init", err.msg) : 0;
}
