/* bench/qwen2_shape.h — the Qwen2-0.5B shape (hidden 896, 14 heads, 2 KV heads,
 * intermediate 4864, vocab 151936, tied head) with `layers` layers, as a
 * ModelConfig: the shape bench_model and bench_packing measure on. Exits on a
 * config the library refuses (a programmer error here). */
#ifndef GRPO_BENCH_QWEN2_SHAPE_H
#define GRPO_BENCH_QWEN2_SHAPE_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/config.h"

static inline ModelConfig qwen2_05b(int layers) {
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:i}", "model_type", "qwen2",
                          "hidden_size", 896, "intermediate_size", 4864, "num_hidden_layers", layers,
                          "num_attention_heads", 14, "num_key_value_heads", 2, "vocab_size", 151936,
                          "rms_norm_eps", 1e-6, "rope_theta", 1000000.0, "tie_word_embeddings", 1,
                          "max_position_embeddings", 32768);
    ModelConfig c;
    GrpoErr err;
    if (config_from_json(&c, j, "qwen2-0.5b", &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    json_decref(j);
    return c;
}

#endif
