/* fuzz/fuzz_config.c — model/config.h: a Hugging Face config.json, parsed the way
 * config_load reads it (jansson, default flags) and validated by
 * config_from_json; an accepted config is then used as the model code uses it
 * (parameter count, the parameter table, RoPE frequencies, the activation plan,
 * which must grow with the tokens or saturate, never wrap). Not covered: generation_config.json
 * (config_load's second file; its eos ids go through the same add_eos). */
#include <jansson.h>

#include "fuzz.h"
#include "model/config.h"
#include "model/params.h"
#include "model/transformer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *root = json_loadb((const char *)data, size, 0, &je);
    if (!root) return 0;
    ModelConfig cfg;
    GrpoErr err;
    int rc = config_from_json(&cfg, root, "config.json", &err);
    json_decref(root);
    if (rc) return 0;
    FUZZ_ASSERT(cfg.head_dim >= 2 && cfg.head_dim % 2 == 0);
    FUZZ_ASSERT(cfg.n_kv_heads > 0 && cfg.n_heads % cfg.n_kv_heads == 0);
    long long n = config_param_count(&cfg);
    FUZZ_ASSERT(n > 0);
    ParamTable table;
    params_build(&table, &cfg);   /* one entry per tensor, aligned: at least the count */
    FUZZ_ASSERT(table.total >= (size_t)n);
    params_free(&table);
    size_t one = acts_plan_bytes(&cfg, 1, 0, 32, 0), most = acts_plan_bytes(&cfg, INT32_MAX, 0, 32, 0);
    FUZZ_ASSERT(one != SIZE_MAX && (most == SIZE_MAX || most >= one));
    (void)config_model_type_name(cfg.type);
    float *inv_freq = malloc((size_t)(cfg.head_dim / 2) * sizeof *inv_freq);
    config_rope_inv_freq(&cfg, inv_freq);
    free(inv_freq);
    config_free(&cfg);
    return 0;
}
