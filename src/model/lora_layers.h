/* model/lora_layers.h — trainable LoRA adapters on a frozen model, as PEFT's
 * LoraLayer computes them:
 *
 *     y = W x + scaling · B A dropout(x),   scaling = lora_alpha / r
 *                                           (lora_alpha / sqrt(r) with use_rslora)
 *
 * for each targeted linear layer (q_proj, k_proj, v_proj, o_proj, gate_proj,
 * up_proj, down_proj of every decoder layer). The model stores q|k|v and
 * gate|up as fused matrices (params.h); an adapter on q_proj adds to the q rows
 * of the fused output only. A is [r, in], B is [out, r], kept in one flat
 * buffer described by a ParamTable with PEFT's tensor names
 * (base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight), so AdamW,
 * gradient clipping and checkpoints treat them as they treat a model's weights.
 *
 * Dropout acts on the adapter's input only, in training only (the activations
 * carry per-sequence keys; no keys = no dropout), and is drawn from counter-based
 * streams keyed by (sequence key, token position, layer, module): a token's mask
 * does not depend on which micro-batch holds its sequence, nor on padding. The
 * keep test compares 16 random bits with round(p · 65536), so p is applied in
 * steps of 1/65536.
 *
 * Forward and backward are called by model/transformer.c and model/kvcache.c at
 * each fused linear layer; the rest of the program sees a Model whose `lora`
 * field is set. */
#ifndef GRPO_MODEL_LORA_LAYERS_H
#define GRPO_MODEL_LORA_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "core/check.h"
#include "model/config.h"
#include "model/grads.h"
#include "model/params.h"

typedef enum { LORA_Q, LORA_K, LORA_V, LORA_O, LORA_GATE, LORA_UP, LORA_DOWN, LORA_N_MODULES } LoraModule;
/* The fused linear layers of a decoder layer, in the order of the forward pass. */
typedef enum { LORA_LIN_QKV, LORA_LIN_O, LORA_LIN_GU, LORA_LIN_DOWN } LoraLinear;

/* "q_proj" ... "down_proj", NULL-terminated, by LoraModule. */
extern const char *const lora_module_names[LORA_N_MODULES + 1];

typedef struct {
    int r;               /* rank (lora_r, 16) */
    double alpha;        /* lora_alpha (32) */
    double dropout;      /* lora_dropout (0.05), in [0, 1) */
    int use_rslora;      /* scaling alpha / sqrt(r) */
    unsigned targets;    /* bit (1u << LoraModule) per adapted module */
} LoraSpec;

typedef struct LoraLayers {
    LoraSpec spec;
    float scaling;
    int n_layers;
    ParamTable table;    /* lora_A then lora_B of each adapted (layer, module), PEFT's names */
    float *params;       /* table.total floats, 64-byte aligned */
    int (*entry)[LORA_N_MODULES]; /* [L][module]: table index of lora_A (B follows), or -1 */
    uint64_t dropout_seed;
} LoraLayers;

/* Parses target module names (q_proj ... down_proj, or all-linear) into a
 * LoraSpec.targets mask; names is NULL or empty for PEFT's default for these
 * architectures, q_proj and v_proj. On error names the offending entry. */
int lora_parse_targets(const char *const *names, int n, unsigned *targets, GrpoErr *err);

/* Builds the adapters for cfg with A and B zero (see lora_init_peft). */
void lora_layers_create(LoraLayers *lo, const ModelConfig *cfg, const LoraSpec *spec, uint64_t dropout_seed);
void lora_layers_free(LoraLayers *lo);
/* PEFT's initialisation: A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_ with
 * a = sqrt(5)), B = 0, so the adapted model starts as the base model. The draws
 * come from counter-based streams of seed, one per tensor. */
void lora_init_peft(LoraLayers *lo, uint64_t seed);

/* Where module mod sits in its fused linear layer: its output rows
 * [row0, row0 + out) and its input width. */
void lora_module_geometry(const ModelConfig *cfg, LoraModule mod, LoraLinear *lin, int *row0, int *out, int *in);

/* One batch's view for the adapters: N rows of B sequences, padded or packed. */
typedef struct {
    int N;
    const int32_t *seq;      /* [N] the sequence of each row, in [0, B) */
    const int32_t *pos;      /* [N] position of each row in its sequence */
    const uint64_t *keys;    /* [B] dropout key of each sequence, or NULL: no dropout */
    float *scratch;          /* [N, max in] */
    float *du;               /* [N, r] */
    uint8_t *mask;           /* this layer's dropout masks, lora_mask_bytes_per_token per row (with keys) */
    uint8_t *mask_ready;     /* [LORA_N_MODULES]: the module's mask is drawn (the forward draws, the
                                recomputation and the backward reuse) */
} LoraBatch;

/* Floats of saved adapter activations per token and layer (u = dropout(x) A^T of
 * every module), of scratch per token, and bytes of dropout masks per token and
 * layer (one bit per input element of every module). */
size_t lora_saved_floats_per_token(const LoraLayers *lo);
size_t lora_scratch_floats_per_token(const LoraLayers *lo, const ModelConfig *cfg);
size_t lora_mask_bytes_per_token(const ModelConfig *cfg);

/* y[N, ldy] (the fused output of linear `lin` in layer l) += scaling · B A
 * dropout(x); x[N, in]; u[LORA_N_MODULES][N, r] saved for backward. y NULL: u
 * only (a checkpointed layer recomputed for its backward). */
void lora_linear_forward(const LoraLayers *lo, const ModelConfig *cfg, int l, LoraLinear lin, float *y, int ldy,
                         const float *x, float *u, const LoraBatch *b);
/* Given dy[N, ldy]: grads (lo->table layout) += dA, dB of the layer's adapters on
 * `lin`, or = where state (NULL: always +=) says the step has not written that
 * tensor yet (model/grads.h); dx[N, in] += the adapter path's input gradient. */
void lora_linear_backward(const LoraLayers *lo, const ModelConfig *cfg, int l, LoraLinear lin, float *dx,
                          const float *dy, int ldy, const float *x, const float *u, float *grads, GradState *state,
                          const LoraBatch *b);
/* Decoding (no dropout, batch-invariant rows): y[n, ldy] += scaling · B A x;
 * tmp holds lora_decode_scratch_floats(n) floats. */
void lora_linear_decode(const LoraLayers *lo, const ModelConfig *cfg, int l, LoraLinear lin, float *y, int ldy,
                        const float *x, int n, float *tmp);
size_t lora_decode_scratch_floats(const LoraLayers *lo, const ModelConfig *cfg, int n);

#endif
