/* tests/gpu/gpu_test_model.h — a small random Qwen2-shaped model for the GPU tests of
 * whole models (test_gpu_model, test_gpu_generate): its config from a shape, random
 * fp32 weights with random norms and q/k/v biases (Hugging Face's init leaves them 1
 * and 0, which would hide a read from the wrong place), and WEIGHTS_BF16's form of the
 * same values; and a Qwen3-shaped one (q/k norm with random q_norm and k_norm, no q/k/v
 * biases); random LoRA adapters attached to the bf16 form. Include after gpu_test.h (frand). */
#ifndef GRPO_TESTS_GPU_TEST_MODEL_H
#define GRPO_TESTS_GPU_TEST_MODEL_H

#include <string.h>

#include "model/init.h"
#include "model/lora_layers.h"
#include "model/transformer.h"
#include "ops/ops.h"

typedef struct {
    int C, H, Hkv, D, F, V, L;
} GpuTestShape;

static void gpu_test_config(ModelConfig *c, const GpuTestShape *s, int tied) {
    memset(c, 0, sizeof *c);
    c->type = MODEL_QWEN2;
    c->hidden_size = s->C, c->intermediate_size = s->F, c->n_layers = s->L, c->n_heads = s->H;
    c->n_kv_heads = s->Hkv, c->head_dim = s->D, c->vocab_size = s->V, c->max_position_embeddings = 4096;
    c->rms_norm_eps = 1e-6f, c->rope_theta = 1e6, c->qkv_bias = 1, c->tie_word_embeddings = tied;
    c->bos_token_id = -1, c->n_eos = 0;
    strcpy(c->torch_dtype, "float32");
}

/* A model of config c (of shape s): random fp32 weights drawn from seed
 * (model_init_random, std 0.2), then the norms and biases (and q/k norms) from frand. */
static void gpu_test_fill_model(Model *m, ModelConfig *c, const GpuTestShape *s, uint64_t seed) {
    model_create(m, c);
    model_init_random(m, seed, 0.2f);
    for (int l = 0; l < s->L; l++) {
        LayerView *v = &m->w.layers[l];
        for (int i = 0; i < s->C; i++) v->ln1[i] = 1.0f + 0.5f * frand(), v->ln2[i] = 1.0f + 0.5f * frand();
        for (int i = 0; v->bqkv && i < (s->H + 2 * s->Hkv) * s->D; i++) v->bqkv[i] = 0.5f * frand();
        for (int i = 0; v->q_norm && i < s->D; i++)
            v->q_norm[i] = 1.0f + 0.5f * frand(), v->k_norm[i] = 1.0f + 0.5f * frand();
    }
    for (int i = 0; i < s->C; i++) m->w.norm[i] = 1.0f + 0.5f * frand();
}

static void gpu_test_random_model(Model *m, const GpuTestShape *s, int tied, uint64_t seed) {
    ModelConfig c;
    gpu_test_config(&c, s, tied);
    gpu_test_fill_model(m, &c, s, seed);
}

/* Qwen3's form of the shape: q/k norm, no q/k/v biases. */
static inline void gpu_test_qwen3_model(Model *m, const GpuTestShape *s, int tied, uint64_t seed) {
    ModelConfig c;
    gpu_test_config(&c, s, tied);
    c.type = MODEL_QWEN3, c.qk_norm = 1, c.qkv_bias = 0;
    gpu_test_fill_model(m, &c, s, seed);
}

/* WEIGHTS_BF16's model of m's values (m in fp32, of shape s, its config: Qwen3's q/k
 * norm kept): the matrices rounded. */
static void gpu_test_half_model(Model *h, const Model *m, const GpuTestShape *s) {
    (void)s;
    ModelConfig c = m->cfg;
    model_create_half(h, &c, WEIGHTS_BF16);
    for (int i = 0; i < m->table.n; i++) {
        const ParamEntry *e = &m->table.entries[i], *he = &h->table.entries[i];
        for (size_t k = 0; k < e->numel; k++) {
            float x = m->params[e->offset + k];
            if (he->half) h->half->params16[he->offset + k] = f32_to_bf16(x);
            else h->params[he->offset + k] = x;
        }
    }
}

/* Rank-4 adapters (alpha 8, dropout 0.25) on every module of h but k_proj, laid out from
 * seed 7, every value 0.3 frand() (B not 0, so they move the output), attached to h. */
static inline void gpu_test_random_lora(LoraLayers *lo, Model *h) {
    LoraSpec spec = {4, 8.0, 0.25, 0, ((1u << LORA_N_MODULES) - 1) & ~(1u << LORA_K)};
    lora_layers_create(lo, &h->cfg, &spec, 7);
    for (size_t i = 0; i < lo->table.total; i++) lo->params[i] = 0.3f * frand();
    h->lora = lo;
}

#endif
