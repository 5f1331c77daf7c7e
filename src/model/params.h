/* model/params.h — the one table that drives the parameters.
 *
 * Each entry is an HF tensor name, its shape and its offset in one flat fp32
 * allocation. The table sizes the allocation, reads and writes safetensors, and
 * mirrors into gradients and optimizer state (same offsets). Its order is chosen
 * so that tensors used by one GEMM are adjacent:
 *   q_proj | k_proj | v_proj  weights form one [(H + 2 Hkv) D, C] matrix (and biases one vector),
 *   gate_proj | up_proj        weights form one [2F, C] matrix. */
#ifndef GRPO_MODEL_PARAMS_H
#define GRPO_MODEL_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

typedef struct {
    char name[96];
    int ndim;
    long long shape[2];
    size_t offset;           /* in floats (in bf16 values when half) */
    size_t numel;
    int src_dtype;           /* StDtype the tensor was read as (or will be written as) */
    int packed;              /* the next entry follows with no alignment gap */
    int half;                /* held in the bf16 buffer (params_hold_half) */
} ParamEntry;

typedef struct {
    int n;
    ParamEntry *entries;
    size_t total;            /* floats */
    size_t total16;          /* bf16 values (0 unless params_hold_half) */
} ParamTable;

/* Views of one layer inside a flat buffer (parameters or their gradients). */
typedef struct {
    float *ln1;       /* [C] input_layernorm */
    float *wqkv;      /* [(H+2Hkv)D, C] q_proj | k_proj | v_proj */
    float *bqkv;      /* [(H+2Hkv)D] or NULL */
    float *wo;        /* [C, H D] */
    float *bo;        /* [C] or NULL */
    float *q_norm;    /* [D] or NULL */
    float *k_norm;    /* [D] or NULL */
    float *ln2;       /* [C] post_attention_layernorm */
    float *wgu;       /* [2F, C] gate_proj | up_proj */
    float *wdown;     /* [C, F] */
} LayerView;

typedef struct {
    float *embed;     /* [V, C] */
    LayerView *layers;/* [L] */
    float *norm;      /* [C] */
    float *lm_head;   /* [V, C]; == embed when tied */
} ModelView;

void params_build(ParamTable *t, const ModelConfig *cfg);
void params_free(ParamTable *t);
/* dst: a copy of src with its own entries. */
void params_copy(ParamTable *dst, const ParamTable *src);
/* Appends an entry (d1 = 0: a vector) at t->total; *cap tracks the entries'
 * allocation (0 for a fresh table). The next entry starts 16-float aligned (64
 * bytes, for the kernels) unless packed: then it follows with no gap. */
void params_add(ParamTable *t, int *cap, const char *name, long long d0, long long d1, int packed);
int params_find(const ParamTable *t, const char *name);   /* index or -1 */
/* Moves the weight matrices (the layers' q k v o gate up down, the embedding and
 * the LM head) into a bf16 buffer of t->total16 values, contiguous in table order
 * (q|k|v and gate|up stay one matrix each); the other tensors (norms, biases) keep
 * fp32 offsets, t->total shrinks. For models whose weights nothing trains
 * (model/transformer.h: model_create_half). */
void params_hold_half(ParamTable *t);
/* The tensor name inside base16, or NULL where it is not held in bf16: for a half
 * table, its bf16 buffer (t->total16 values, the vectors not in it); for any other,
 * a buffer of t->total bf16 values laid out as the fp32 one (mixed precision's
 * upper halves, model/transformer.h). */
const uint16_t *params_at16(const ParamTable *t, const uint16_t *base16, const char *name);
/* The layer matrices inside base16, found as params_at16 finds them. */
typedef struct {
    const uint16_t *wqkv, *wo, *wgu, *wdown;
} LayerView16;
LayerView16 *params_view16(const ParamTable *t, const ModelConfig *cfg, const uint16_t *base16);
/* Fills v with pointers into base (which holds t->total floats); NULL for tensors
 * held in bf16. v->layers is malloc'd. */
void params_view(ModelView *v, const ParamTable *t, const ModelConfig *cfg, float *base);
void params_view_free(ModelView *v);

#endif
