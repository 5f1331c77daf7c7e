/* model/params.c — building the parameter table from a config (see params.h). */
#include "model/params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

void params_add(ParamTable *t, int *cap, const char *name, long long d0, long long d1, int packed) {
    if (t->n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        t->entries = xrealloc(t->entries, sizeof(ParamEntry) * *cap);
    }
    ParamEntry *e = &t->entries[t->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ndim = d1 ? 2 : 1;
    e->shape[0] = d0;
    e->shape[1] = d1;
    e->numel = (size_t)d0 * (d1 ? (size_t)d1 : 1);
    e->offset = t->total;
    e->src_dtype = ST_F32;
    e->packed = packed;
    t->total += e->numel;
    if (!packed) t->total = (t->total + 15) & ~(size_t)15;
}

void params_build(ParamTable *t, const ModelConfig *c) {
    memset(t, 0, sizeof *t);
    int cap = 0;
    long long C = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
    long long q = (long long)c->n_heads * D, kv = (long long)c->n_kv_heads * D;
    char name[96];
    params_add(t, &cap, "model.embed_tokens.weight", c->vocab_size, C, 0);
    for (int l = 0; l < c->n_layers; l++) {
#define LAYER(suffix, d0, d1, packed)                                       \
    do {                                                                    \
        snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix);       \
        params_add(t, &cap, name, d0, d1, packed);                                 \
    } while (0)
#define P(suffix, d0, d1) LAYER(suffix, d0, d1, 0)
#define PACK(suffix, d0, d1) LAYER(suffix, d0, d1, 1) /* the next one follows with no gap */
        P("input_layernorm.weight", C, 0);
        /* q, k, v weights adjacent with no alignment gap: they form one matrix
         * (so do the q, k, v biases, and gate and up) */
        PACK("self_attn.q_proj.weight", q, C);
        PACK("self_attn.k_proj.weight", kv, C);
        P("self_attn.v_proj.weight", kv, C);
        if (c->qkv_bias) {
            PACK("self_attn.q_proj.bias", q, 0);
            PACK("self_attn.k_proj.bias", kv, 0);
            P("self_attn.v_proj.bias", kv, 0);
        }
        P("self_attn.o_proj.weight", C, q);
        if (c->o_bias) P("self_attn.o_proj.bias", C, 0);
        if (c->qk_norm) {
            P("self_attn.q_norm.weight", D, 0);
            P("self_attn.k_norm.weight", D, 0);
        }
        P("post_attention_layernorm.weight", C, 0);
        PACK("mlp.gate_proj.weight", F, C);
        P("mlp.up_proj.weight", F, C);
        P("mlp.down_proj.weight", C, F);
#undef PACK
#undef P
#undef LAYER
    }
    params_add(t, &cap, "model.norm.weight", C, 0, 0);
    if (!c->tie_word_embeddings) params_add(t, &cap, "lm_head.weight", c->vocab_size, C, 0);
}

void params_free(ParamTable *t) {
    free(t->entries);
    memset(t, 0, sizeof *t);
}

void params_copy(ParamTable *dst, const ParamTable *src) {
    *dst = *src;
    dst->entries = xmalloc(sizeof(ParamEntry) * (src->n ? src->n : 1));
    memcpy(dst->entries, src->entries, sizeof(ParamEntry) * src->n);
}

int params_find(const ParamTable *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->entries[i].name, name)) return i;
    return -1;
}

/* The weight matrices: the layers' projections, the embedding and the LM head. */
static int is_matrix(const char *name) {
    static const char *m[] = {".q_proj.weight", ".k_proj.weight", ".v_proj.weight", ".o_proj.weight",
                              ".gate_proj.weight", ".up_proj.weight", ".down_proj.weight"};
    size_t n = strlen(name);
    if (!strcmp(name, "model.embed_tokens.weight") || !strcmp(name, "lm_head.weight")) return 1;
    if (strncmp(name, "model.layers.", 13)) return 0;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (n > strlen(m[i]) && !strcmp(name + n - strlen(m[i]), m[i])) return 1;
    return 0;
}

void params_hold_half(ParamTable *t) {
    t->total = t->total16 = 0;
    for (int i = 0; i < t->n; i++) {
        ParamEntry *e = &t->entries[i];
        e->half = is_matrix(e->name);
        if (e->half) {
            e->offset = t->total16;
            t->total16 += e->numel;
        } else {
            e->offset = t->total;
            t->total += e->numel;
            if (!e->packed) t->total = (t->total + 15) & ~(size_t)15;
        }
    }
}

static float *at(const ParamTable *t, float *base, const char *name) {
    int i = params_find(t, name);
    return i < 0 || t->entries[i].half ? NULL : base + t->entries[i].offset;
}

const uint16_t *params_at16(const ParamTable *t, const uint16_t *base16, const char *name) {
    int i = params_find(t, name);
    return i < 0 || (t->total16 && !t->entries[i].half) ? NULL : base16 + t->entries[i].offset;
}

LayerView16 *params_view16(const ParamTable *t, const ModelConfig *c, const uint16_t *base16) {
    LayerView16 *v = xcalloc(c->n_layers, sizeof(LayerView16));
    char name[96];
    for (int l = 0; l < c->n_layers; l++) {
#define AT16(suffix) (snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix), params_at16(t, base16, name))
        v[l].wqkv = AT16("self_attn.q_proj.weight");
        v[l].wo = AT16("self_attn.o_proj.weight");
        v[l].wgu = AT16("mlp.gate_proj.weight");
        v[l].wdown = AT16("mlp.down_proj.weight");
#undef AT16
    }
    return v;
}

void params_view(ModelView *v, const ParamTable *t, const ModelConfig *c, float *base) {
    char name[96];
    v->embed = at(t, base, "model.embed_tokens.weight");
    v->norm = at(t, base, "model.norm.weight");
    v->lm_head = c->tie_word_embeddings ? v->embed : at(t, base, "lm_head.weight");
    v->layers = xcalloc(c->n_layers, sizeof(LayerView));
    for (int l = 0; l < c->n_layers; l++) {
        LayerView *lv = &v->layers[l];
#define AT(suffix) (snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix), at(t, base, name))
        lv->ln1 = AT("input_layernorm.weight");
        lv->wqkv = AT("self_attn.q_proj.weight");
        lv->bqkv = AT("self_attn.q_proj.bias");
        lv->wo = AT("self_attn.o_proj.weight");
        lv->bo = AT("self_attn.o_proj.bias");
        lv->q_norm = AT("self_attn.q_norm.weight");
        lv->k_norm = AT("self_attn.k_norm.weight");
        lv->ln2 = AT("post_attention_layernorm.weight");
        lv->wgu = AT("mlp.gate_proj.weight");
        lv->wdown = AT("mlp.down_proj.weight");
#undef AT
    }
}

void params_view_free(ModelView *v) {
    free(v->layers);
    v->layers = NULL;
}
