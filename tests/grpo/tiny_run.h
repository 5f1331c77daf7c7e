/* tests/grpo/tiny_run.h — what the end-to-end GRPO tests share: a tiny random
 * Qwen3-style model on the byte-level tokenizer, and reading back what a run
 * wrote (its final weights, a file of its output directory). Not the runs'
 * configurations: each test's own. */
#ifndef GRPO_TESTS_GRPO_TINY_RUN_H
#define GRPO_TESTS_GRPO_TINY_RUN_H

#include <stdio.h>
#include <stdlib.h>

#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "model/model_io.h"
#include "testutil.h"

/* dir := a tiny random model: qwen3 architecture, 2 layers of width 32, vocab =
 * the byte tokenizer's 259 ids (eos 258), weights from seed 5. Run from the
 * repository root (the tokenizer is copied from assets/byte-tokenizer). */
static inline void tiny_model_save(const char *dir) {
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:b, s:i, s:i}", "model_type", "qwen3",
                          "hidden_size", 32, "intermediate_size", 64, "num_hidden_layers", 2, "num_attention_heads", 4,
                          "num_key_value_heads", 2, "head_dim", 8, "vocab_size", 259, "rms_norm_eps", 1e-6,
                          "rope_theta", 10000.0, "tie_word_embeddings", 1, "max_position_embeddings", 256,
                          "eos_token_id", 258);
    ModelConfig cfg;
    GrpoErr err;
    CHECK(config_from_json(&cfg, j, "tiny", &err) == 0);
    json_decref(j);
    Model m;
    model_create(&m, &cfg);
    model_init_random(&m, 5, 0.2f);
    ModelSaveOpts o;
    model_save_opts_default(&o);
    o.copy_from = "assets/byte-tokenizer";
    CHECK(model_save(&m, dir, &o, &err) == 0);
    model_free(&m);
}

/* Every weight of the model a run saved in out (one file or shards), in file and
 * tensor order, as fp32 (*n of them); exits when it cannot be read. */
static inline float *tiny_run_weights(const char *out, size_t *n) {
    StSet s;
    GrpoErr err;
    if (stset_open_dir(&s, out, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    size_t total = 0;
    for (int f = 0; f < s.n_files; f++)
        for (int i = 0; i < s.files[f].n_tensors; i++) total += s.files[f].tensors[i].numel;
    float *w = malloc(sizeof(float) * (total ? total : 1));
    size_t k = 0;
    for (int f = 0; f < s.n_files; f++)
        for (int i = 0; i < s.files[f].n_tensors; i++) {
            CHECK(st_read_f32(&s.files[f], &s.files[f].tensors[i], w + k, &err) == 0);
            k += s.files[f].tensors[i].numel;
        }
    stset_close(&s);
    *n = total;
    return w;
}

/* dir/file's contents (malloc'd, NUL-terminated), or NULL when it cannot be read. */
static inline char *tiny_run_file(const char *dir, const char *file) {
    char *p = fs_join(dir, file), *buf = NULL;
    size_t len;
    GrpoErr err;
    if (fs_read_file(p, &buf, &len, &err)) buf = NULL;
    free(p);
    return buf;
}

#endif
