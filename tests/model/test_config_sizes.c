/* tests/model/test_config_sizes.c — sizes derived from config.json and the
 * options stay exact or are refused, never wrap:
 *  1. the fuzz reproducer param_count_overflow (hidden 2^31-2, intermediate 2^31-1)
 *     is refused by name; a config at every bound is accepted and its parameter
 *     count matches the same sum in double (exact below 2^53);
 *  2. an activation plan past 64 bits saturates at SIZE_MAX instead of wrapping;
 *  3. config_check_memory and gen_create refuse, with the numbers, a plan larger
 *     than GRPO_MEMORY_LIMIT_MB, and accept it under a larger one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gen/generate.h"
#include "model/model_io.h"
#include "testutil.h"

static int parse(ModelConfig *cfg, const char *text, GrpoErr *err) {
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root) return err_set(err, "bad test JSON: %s", je.text);
    int rc = config_from_json(cfg, root, "config.json", err);
    json_decref(root);
    return rc;
}

static void check_bounds(void) {
    ModelConfig c;
    GrpoErr err;
    /* fuzz/corpus/config/repro_param_count_overflow.json, once a signed overflow in config_param_count */
    T_CHECK(parse(&c, "{\"model_type\":\"llama\",\"hidden_size\":2147483646,\"intermediate_size\":2147483647,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":1,\"vocab_size\":1,\"head_dim\":2}", &err) == -1 &&
                strstr(err.msg, "config.json: hidden_size (2147483646) is larger than any supported model"),
            "the overflow reproducer: %s", err.msg);
    T_CHECK(parse(&c, "{\"model_type\":\"qwen2\",\"hidden_size\":64,\"intermediate_size\":64,\"num_hidden_layers\":1025,"
                      "\"num_attention_heads\":1,\"vocab_size\":8}", &err) == -1 && strstr(err.msg, "num_hidden_layers (1025)"),
            "1025 layers: %s", err.msg);
    /* every per-field bound at once, each tensor just under 2^31 values: accepted, counted exactly */
    const char *big = "{\"model_type\":\"qwen2\",\"hidden_size\":2048,\"intermediate_size\":1048575,\"num_hidden_layers\":1024,"
                      "\"num_attention_heads\":1024,\"num_key_value_heads\":1,\"head_dim\":1022,\"vocab_size\":1048575,"
                      "\"tie_word_embeddings\":false}";
    if (parse(&c, big, &err)) {
        T_CHECK(0, "a config at the bounds: %s", err.msg);
        return;
    }
    double C = 2048, F = 1048575, q = 1024.0 * 1022, kv = 1022, V = 1048575;
    double layer = C + C * (q + 2 * kv) + q * C + C + 3 * C * F + (q + 2 * kv);
    double want = 2 * V * C + 1024 * layer + C;
    T_CHECK((double)config_param_count(&c) == want, "parameter count %lld, want %.0f", config_param_count(&c), want);
    config_free(&c);
}

static void check_acts_saturate(void) {
    ModelConfig c;
    GrpoErr err;
    if (parse(&c, "{\"model_type\":\"qwen3\",\"hidden_size\":2,\"intermediate_size\":1048576,\"num_hidden_layers\":1024,"
                  "\"num_attention_heads\":1,\"head_dim\":2,\"vocab_size\":4}", &err)) {
        T_CHECK(0, "%s", err.msg);
        return;
    }
    /* about 12.9 GB per token x 2^31 tokens: past 2^64 */
    T_CHECK(acts_plan_bytes(&c, INT32_MAX, 0, 32, 0) == SIZE_MAX, "a plan past 64 bits must saturate");
    size_t one = acts_plan_bytes(&c, 1, 0, 32, 0), two = acts_plan_bytes(&c, 2, 0, 32, 0);
    T_CHECK(one > 12e9 && one < 14e9 && two > one, "one token %zu, two %zu bytes", one, two);
    config_free(&c);
}

static void check_memory_limit(void) {
    GrpoErr err;
    Model m;
    if (model_load(&m, "tests/fixtures/qwen2", &err)) {
        T_CHECK(0, "%s", err.msg);
        return;
    }
    setenv("GRPO_MEMORY_LIMIT_MB", "1", 1);
    ModelConfig huge = m.cfg;
    huge.n_layers = 1024; /* 1024 layers of the fixture's width: more than 1 MB */
    T_CHECK(config_check_memory(&huge, "x/config.json", &err) == -1 && strstr(err.msg, "x/config.json: the model needs ") &&
                strstr(err.msg, "num_hidden_layers 1024") && strstr(err.msg, "and 1.0 MB is available"),
            "%s", err.msg);
    GenOpts o;
    gen_opts_default(&o);
    o.max_completion_length = 64;
    o.chunk_size = 1 << 20;
    Generator g;
    T_CHECK(gen_create(&g, &m, &o, 8, &err) == -1 && strstr(err.msg, "generation needs ") &&
                strstr(err.msg, "1048577 slots x 64 tokens") && strstr(err.msg, "and 1 MB is available; lower generation_chunk_size"),
            "%s", err.msg);
    setenv("GRPO_MEMORY_LIMIT_MB", "4096", 1);
    o.chunk_size = 4;
    T_CHECK(gen_create(&g, &m, &o, 8, &err) == 0, "%s", err.msg);
    if (g.m) gen_free(&g);
    T_CHECK(config_check_memory(&huge, "x/config.json", &err) == 0, "%s", err.msg);
    unsetenv("GRPO_MEMORY_LIMIT_MB");
    model_free(&m);
}

int main(void) {
    check_bounds();
    check_acts_saturate();
    check_memory_limit();
    return t_summary("test_config_sizes");
}
