/* model/kvcache.c — the KV cache and cached decoding (see kvcache.h).
 * The projections are the same ops/ kernels as training; only attention differs:
 * each row attends over the cached keys of its slot (parent prefix + own), with
 * vector loops since a decode row has a single query per head. */
#include "model/kvcache.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "model/lora_layers.h"
#include "ops/vec.h"

size_t kv_cache_bytes(const ModelConfig *cfg, int n_slots, int cap) {
    return 2 * sizeof(float) * (size_t)cfg->n_layers * n_slots * cap * cfg->n_kv_heads * cfg->head_dim;
}

void kv_cache_create(KVCache *c, const ModelConfig *cfg, int n_slots, int cap) {
    CHECK(n_slots > 0 && cap > 0);
    memset(c, 0, sizeof *c);
    c->n_layers = cfg->n_layers;
    c->n_slots = n_slots;
    c->cap = cap;
    c->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    size_t n = (size_t)c->n_layers * n_slots * cap * c->kv_dim;
    c->k = xaligned(sizeof(float) * n);
    c->v = xaligned(sizeof(float) * n);
    c->len = xcalloc(n_slots, sizeof(int));
    c->parent = xmalloc(sizeof(int) * n_slots);
    c->parent_len = xcalloc(n_slots, sizeof(int));
    for (int i = 0; i < n_slots; i++) c->parent[i] = -1;
}

void kv_cache_free(KVCache *c) {
    free(c->k);
    free(c->v);
    free(c->len);
    free(c->parent);
    free(c->parent_len);
    memset(c, 0, sizeof *c);
}

void kv_cache_reset(KVCache *c, int slot) {
    CHECK(slot >= 0 && slot < c->n_slots);
    c->len[slot] = 0;
    c->parent[slot] = -1;
    c->parent_len[slot] = 0;
}

void kv_cache_share_prefix(KVCache *c, int slot, int parent) {
    CHECK(slot >= 0 && slot < c->n_slots && parent >= 0 && parent < c->n_slots && slot != parent);
    CHECK(c->parent[parent] < 0);
    c->len[slot] = 0;
    c->parent[slot] = parent;
    c->parent_len[slot] = c->len[parent];
}

int kv_cache_seq_len(const KVCache *c, int slot) {
    return c->parent_len[slot] + c->len[slot];
}

/* where position t of slot's layer l sits in c->k, and its value in c->v */
static size_t kv_offset(const KVCache *c, int l, int slot, int t) {
    return (((size_t)l * c->n_slots + slot) * c->cap + t) * c->kv_dim;
}

static float *kv_at(const KVCache *c, float *base, int l, int slot, int t) {
    return base + kv_offset(c, l, slot, t);
}

/* ---- scratch ---- */

typedef struct {
    size_t x, h, qkv, qk, att, tmp, gu, act, rstd, scores, hrows;
} DecodePlan;

static DecodePlan decode_plan(const ModelConfig *c, int R, int K, int n_threads) {
    size_t C = c->hidden_size, F = c->intermediate_size, D = c->head_dim, H = c->n_heads,
           Hkv = c->n_kv_heads;
    DecodePlan p = {
        .x = R * C, .h = R * C, .qkv = R * (H + 2 * Hkv) * D, .qk = R * (H + Hkv) * D,
        .att = R * H * D, .tmp = R * C, .gu = R * 2 * F, .act = R * F, .rstd = R * (H + Hkv + 1),
        .scores = (size_t)n_threads * (H / Hkv) * K, .hrows = R * C,
    };
    return p;
}

static size_t decode_plan_floats(const DecodePlan *p) {
    return p->x + p->h + p->qkv + p->qk + p->att + p->tmp + p->gu + p->act + p->rstd + p->scores + p->hrows;
}

size_t decode_state_bytes(const ModelConfig *cfg, int max_rows, int max_keys) {
    DecodePlan p = decode_plan(cfg, max_rows, max_keys, omp_get_max_threads());
    return sizeof(float) * decode_plan_floats(&p) + 2 * sizeof(int32_t) * max_rows +
           sizeof(size_t) * (size_t)max_keys * omp_get_max_threads();
}

void decode_state_create(DecodeState *s, const ModelConfig *cfg, int max_rows, int max_keys) {
    memset(s, 0, sizeof *s);
    s->max_rows = max_rows;
    s->max_keys = max_keys;
    s->n_threads = omp_get_max_threads();
    DecodePlan p = decode_plan(cfg, max_rows, max_keys, s->n_threads);
    s->arena = xaligned(sizeof(float) * decode_plan_floats(&p));
    float *cur = s->arena;
#define TAKE(n) (cur += (n), cur - (n))
    s->x = TAKE(p.x);
    s->h = TAKE(p.h);
    s->qkv = TAKE(p.qkv);
    s->qk = TAKE(p.qk);
    s->att = TAKE(p.att);
    s->tmp = TAKE(p.tmp);
    s->gu = TAKE(p.gu);
    s->act = TAKE(p.act);
    s->rstd = TAKE(p.rstd);
    s->scores = TAKE(p.scores);
    s->hrows = TAKE(p.hrows);
#undef TAKE
    s->pos = xmalloc(sizeof(int32_t) * max_rows);
    s->own = xmalloc(sizeof(int32_t) * max_rows);
    s->key_at = xmalloc(sizeof(size_t) * (size_t)max_keys * s->n_threads);
}

void decode_state_free(DecodeState *s) {
    free(s->lora_tmp);
    free(s->arena);
    free(s->pos);
    free(s->own);
    free(s->key_at);
    memset(s, 0, sizeof *s);
}

/* ---- attention of one row (all heads of kv group g) over its slot's keys ---- */

#ifdef __AVX2__
/* q against four keys at once (D a multiple of 8): four independent chains, then one
 * reduction of the four. */
static inline __m128 dot4(const float *q, const float *k0, const float *k1, const float *k2, const float *k3,
                          int D) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int d = 0; d < D; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
        a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + d), a0);
        a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k1 + d), a1);
        a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k2 + d), a2);
        a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k3 + d), a3);
    }
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* out[0..32) = sum over s of p[s] v[at[s]..+32), the sums in registers */
static inline void weighted_sum32(float *out, const float *p, const float *v, const size_t *at, int nk) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int s = 0; s < nk; s++) {
        __m256 ps = _mm256_set1_ps(p[s]);
        const float *vs = v + at[s];
        a0 = _mm256_fmadd_ps(ps, _mm256_loadu_ps(vs), a0);
        a1 = _mm256_fmadd_ps(ps, _mm256_loadu_ps(vs + 8), a1);
        a2 = _mm256_fmadd_ps(ps, _mm256_loadu_ps(vs + 16), a2);
        a3 = _mm256_fmadd_ps(ps, _mm256_loadu_ps(vs + 24), a3);
    }
    _mm256_storeu_ps(out, a0), _mm256_storeu_ps(out + 8, a1), _mm256_storeu_ps(out + 16, a2),
        _mm256_storeu_ps(out + 24, a3);
}
#endif

#ifdef __AVX512F__
/* The AVX-512 path (D a multiple of 16) takes the heads of a group HB at a time, so
 * that a key or value row read once serves HB heads: HB x 4 keys of score sums, and
 * HB x 64 columns of weighted sums, each 16 zmm registers. */
enum { HB = 4 };

/* the sums of the 16 lanes of a0..a3, in that order: pairs of lanes added within each
 * 128-bit block, then the four blocks added */
static inline __m128 hsum4_zmm(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 u0 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
    __m512 u1 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
    __m512 w = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u0), _mm512_castps_pd(u1))),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u0), _mm512_castps_pd(u1))));
    return _mm_add_ps(_mm_add_ps(_mm512_castps512_ps128(w), _mm512_extractf32x4_ps(w, 1)),
                      _mm_add_ps(_mm512_extractf32x4_ps(w, 2), _mm512_extractf32x4_ps(w, 3)));
}

/* scores[j][s0..s0+4) = scale * q_j . k(s0 + i) for the nj <= HB heads at q */
static inline __attribute__((always_inline)) void scores_heads_4keys(float *scores, size_t ld, const float *q,
                                                                     const float *k, const size_t *at, int D,
                                                                     int nj, float scale) {
    __m512 acc[HB][4];
#pragma GCC unroll 4
    for (int j = 0; j < nj; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = _mm512_setzero_ps();
    const float *k0 = k + at[0], *k1 = k + at[1], *k2 = k + at[2], *k3 = k + at[3];
    for (int d = 0; d < D; d += 16) {
        __m512 x0 = _mm512_loadu_ps(k0 + d), x1 = _mm512_loadu_ps(k1 + d), x2 = _mm512_loadu_ps(k2 + d),
               x3 = _mm512_loadu_ps(k3 + d);
#pragma GCC unroll 4
        for (int j = 0; j < nj; j++) {
            __m512 qv = _mm512_loadu_ps(q + (size_t)j * D + d);
            acc[j][0] = _mm512_fmadd_ps(qv, x0, acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(qv, x1, acc[j][1]);
            acc[j][2] = _mm512_fmadd_ps(qv, x2, acc[j][2]);
            acc[j][3] = _mm512_fmadd_ps(qv, x3, acc[j][3]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nj; j++)
        _mm_storeu_ps(scores + (size_t)j * ld,
                      _mm_mul_ps(hsum4_zmm(acc[j][0], acc[j][1], acc[j][2], acc[j][3]), _mm_set1_ps(scale)));
}

/* out[j][0..16 nc) = sum over s of p[j][s] v(s)[0..16 nc), for the nj <= HB heads, the
 * sums in registers: each value row is loaded once for all nj heads */
static inline __attribute__((always_inline)) void weighted_sum_heads(float *out, int D, const float *p, size_t ld,
                                                                     const float *v, const size_t *at, int nk,
                                                                     int nj, int nc) {
    __m512 acc[HB][4];
#pragma GCC unroll 4
    for (int j = 0; j < nj; j++)
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) acc[j][c] = _mm512_setzero_ps();
    for (int s = 0; s < nk; s++) {
        const float *vs = v + at[s];
        __m512 x[4];
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) x[c] = _mm512_loadu_ps(vs + 16 * c);
#pragma GCC unroll 4
        for (int j = 0; j < nj; j++) {
            __m512 ps = _mm512_set1_ps(p[(size_t)j * ld + s]);
#pragma GCC unroll 4
            for (int c = 0; c < nc; c++) acc[j][c] = _mm512_fmadd_ps(ps, x[c], acc[j][c]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nj; j++)
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) _mm512_storeu_ps(out + (size_t)j * D + 16 * c, acc[j][c]);
}

/* attend_group's scores for D a multiple of 16 (see there), keys 4 at a time: returns
 * how many keys it scored */
static int scores_zmm(const float *q, const float *k, const size_t *at, int nk, int G, int D, float scale,
                      float *scores) {
    int s0 = 0;
    for (; s0 + 4 <= nk; s0 += 4)
        for (int j0 = 0; j0 < G; j0 += HB) {
            float *sc = scores + (size_t)j0 * nk + s0;
            const float *qj = q + (size_t)j0 * D;
            switch (G - j0 < HB ? G - j0 : HB) {
            case 1: scores_heads_4keys(sc, nk, qj, k, at + s0, D, 1, scale); break;
            case 2: scores_heads_4keys(sc, nk, qj, k, at + s0, D, 2, scale); break;
            case 3: scores_heads_4keys(sc, nk, qj, k, at + s0, D, 3, scale); break;
            default: scores_heads_4keys(sc, nk, qj, k, at + s0, D, 4, scale); break;
            }
        }
    return s0;
}

/* attend_group's weighted sums for D a multiple of 16 (see there) */
static void weighted_sums_zmm(float *out, const float *v, const size_t *at, int nk, int G, int D,
                              const float *scores) {
    for (int j0 = 0; j0 < G; j0 += HB) {
        int nj = G - j0 < HB ? G - j0 : HB;
        const float *p = scores + (size_t)j0 * nk;
        for (int d0 = 0; d0 < D;) {
            float *o = out + (size_t)j0 * D + d0;
            int nc = D - d0 >= 64 ? 4 : 1;
            switch (nj * 8 + nc) {
            case 1 * 8 + 1: weighted_sum_heads(o, D, p, nk, v + d0, at, nk, 1, 1); break;
            case 2 * 8 + 1: weighted_sum_heads(o, D, p, nk, v + d0, at, nk, 2, 1); break;
            case 3 * 8 + 1: weighted_sum_heads(o, D, p, nk, v + d0, at, nk, 3, 1); break;
            case 4 * 8 + 1: weighted_sum_heads(o, D, p, nk, v + d0, at, nk, 4, 1); break;
            case 1 * 8 + 4: weighted_sum_heads(o, D, p, nk, v + d0, at, nk, 1, 4); break;
            case 2 * 8 + 4: weighted_sum_heads(o, D, p, nk, v + d0, at, nk, 2, 4); break;
            case 3 * 8 + 4: weighted_sum_heads(o, D, p, nk, v + d0, at, nk, 3, 4); break;
            default: weighted_sum_heads(o, D, p, nk, v + d0, at, nk, 4, 4); break;
            }
            d0 += 16 * nc;
        }
    }
}
#endif

/* The scores of the G query heads q[G][D] against the nk keys k + at[s], scaled, into
 * scores[G][nk]; then out[G][D] = softmax(scores) · (the values v + at[s]). With AVX2 and D a
 * multiple of 8, four keys at a time and the weighted sums of 32 columns in
 * registers (a chain per key and a load and store of out per key before: decoding
 * attention was a fifth of a small model's generation); with AVX-512 and D a multiple
 * of 16, scores_zmm and weighted_sums_zmm, up to 4 heads a key (in a profile of bench_generate at
 * G = 64, Qwen2-0.5B shape: 4.5 % of the samples with the AVX2 code, 2.7 % with this
 * one). Each row alone: the order
 * depends on its own length only, never on the other rows of the batch. */
static void attend_group(const float *q, float *out, const float *k, const float *v, const size_t *at, int nk,
                         int G, int D, float *scores) {
    float scale = 1.0f / sqrtf((float)D);
    int s0 = 0, zmm = 0; /* zmm: the AVX-512 path takes this row */
#ifdef __AVX512F__
    zmm = D % 16 == 0;
    if (zmm) s0 = scores_zmm(q, k, at, nk, G, D, scale, scores);
#endif
#ifdef __AVX2__
    if (!zmm && D % 8 == 0)
        for (; s0 + 4 <= nk; s0 += 4)
            for (int j = 0; j < G; j++) {
                __m128 d = dot4(q + (size_t)j * D, k + at[s0], k + at[s0 + 1], k + at[s0 + 2], k + at[s0 + 3], D);
                _mm_storeu_ps(scores + (size_t)j * nk + s0, _mm_mul_ps(d, _mm_set1_ps(scale)));
            }
#endif
    (void)zmm; /* read by the vector paths only */
    for (int s = s0; s < nk; s++)
        for (int j = 0; j < G; j++) scores[(size_t)j * nk + s] = vec_dot(q + (size_t)j * D, k + at[s], D) * scale;
    for (int j = 0; j < G; j++) {
        float *sc = scores + (size_t)j * nk, mx = vec_max(sc, nk);
        float inv = (float)(1.0 / vec_exp_sum(sc, sc, mx, 1.0f, nk));
        for (int s = 0; s < nk; s++) sc[s] *= inv;
    }
#ifdef __AVX512F__
    if (zmm) {
        weighted_sums_zmm(out, v, at, nk, G, D, scores);
        return;
    }
#endif
    for (int j = 0; j < G; j++) {
        const float *sc = scores + (size_t)j * nk;
        float *o = out + (size_t)j * D;
        int d0 = 0;
#ifdef __AVX2__
        for (; d0 + 32 <= D; d0 += 32) weighted_sum32(o + d0, sc, v + d0, at, nk);
#endif
        if (d0 < D) {
            memset(o + d0, 0, sizeof(float) * (D - d0));
            for (int s = 0; s < nk; s++) vec_axpy(o + d0, sc[s], v + at[s] + d0, D - d0);
        }
    }
}

/* key_at: room for the offsets of the row's keys (kv_offset) */
static void attend_row(const KVCache *c, int l, int slot, int own_idx, const float *q, float *out, int g, int G,
                       int D, float *scores, size_t *key_at) {
    int par = c->parent[slot], np = par >= 0 ? c->parent_len[slot] : 0;
    int nk = np + own_idx + 1;
    for (int s = 0; s < nk; s++)
        key_at[s] = s < np ? kv_offset(c, l, par, s) : kv_offset(c, l, slot, s - np);
    attend_group(q, out, c->k + (size_t)g * D, c->v + (size_t)g * D, key_at, nk, G, D, scores);
}

/* A decoding product: bf16 matrices read directly; a half model's against fp32
 * activations, the bf16 copy under mixed precision in bf16 products as training's. */
static void rowwise(float *out, const float *in, WeightMatrix W, const float *bias, int n, int I, int O) {
    if (W.bf16_products)
        matmul_forward_rowwise_bf16_products(out, in, W.w16, bias, n, I, O);
    else if (W.w16)
        matmul_forward_rowwise_bf16(out, in, W.w16, bias, n, I, O);
    else
        matmul_forward_rowwise(out, in, W.w, bias, n, I, O);
}

int model_decode(Model *m, KVCache *c, DecodeState *s, int n, const int *slots,
                 const int32_t *tokens, const uint8_t *want, float *logits_out) {
    const ModelConfig *cfg = &m->cfg;
    int C = cfg->hidden_size, F = cfg->intermediate_size, D = cfg->head_dim;
    int H = cfg->n_heads, Hkv = cfg->n_kv_heads, G = H / Hkv;
    int QKV = (H + 2 * Hkv) * D, QK = (H + Hkv) * D;
    CHECK(n > 0 && n <= s->max_rows);
    for (int r = 0; r < n; r++) {
        int sl = slots[r];
        CHECK(sl >= 0 && sl < c->n_slots && c->len[sl] < c->cap);
        CHECK(tokens[r] >= 0 && tokens[r] < cfg->vocab_size);
        s->own[r] = c->len[sl];
        s->pos[r] = c->parent_len[sl] + c->len[sl];
        CHECK(s->pos[r] < s->max_keys);
        c->len[sl]++;
    }
    model_embed(m, s->x, tokens, n);
    const LoraLayers *lo = m->lora;
    size_t lora_need = lo ? lora_decode_scratch_floats(lo, cfg, n) : 0;
    if (lora_need > s->lora_tmp_floats) {
        free(s->lora_tmp);
        s->lora_tmp = xmalloc(sizeof(float) * lora_need);
        s->lora_tmp_floats = lora_need;
    }
    for (int l = 0; l < cfg->n_layers; l++) {
        const LayerView *w = &m->w.layers[l];
        const LayerView16 *h = model_layer16(m, l);
#define ROWWISE(out, in, W, bias, I, O) rowwise(out, in, model_weight(m, w->W, h ? h->W : NULL), bias, n, I, O)
        rmsnorm_forward(s->h, s->rstd, s->x, w->ln1, n, C, C, C, cfg->rms_norm_eps);
        ROWWISE(s->qkv, s->h, wqkv, w->bqkv, C, QKV);
        if (lo) lora_linear_decode(lo, cfg, l, LORA_LIN_QKV, s->qkv, QKV, s->h, n, s->lora_tmp);
        if (cfg->qk_norm) {
            for (int h = 0; h < H + Hkv; h++)
                rmsnorm_forward(s->qk + h * D, s->rstd, s->qkv + h * D, h < H ? w->q_norm : w->k_norm,
                                n, D, QK, QKV, cfg->rms_norm_eps);
        } else {
            for (int r = 0; r < n; r++)
                memcpy(s->qk + (size_t)r * QK, s->qkv + (size_t)r * QKV, sizeof(float) * QK);
        }
        rope_forward(s->qk, s->pos, m->inv_freq, n, H + Hkv, D, QK);
        for (int r = 0; r < n; r++) {
            memcpy(kv_at(c, c->k, l, slots[r], s->own[r]), s->qk + (size_t)r * QK + H * D,
                   sizeof(float) * c->kv_dim);
            memcpy(kv_at(c, c->v, l, slots[r], s->own[r]), s->qkv + (size_t)r * QKV + (H + Hkv) * D,
                   sizeof(float) * c->kv_dim);
        }
        /* num_threads: one scores area per thread exists for n_threads only */
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->n_threads)
        for (int rg = 0; rg < n * Hkv; rg++) {
            int r = rg / Hkv, g = rg % Hkv, tid = omp_get_thread_num();
            CHECK(tid < s->n_threads);
            float *sc = s->scores + (size_t)tid * G * s->max_keys;
            attend_row(c, l, slots[r], s->own[r], s->qk + (size_t)r * QK + (size_t)g * G * D,
                       s->att + (size_t)r * H * D + (size_t)g * G * D, g, G, D, sc,
                       s->key_at + (size_t)tid * s->max_keys);
        }
        ROWWISE(s->tmp, s->att, wo, w->bo, H * D, C);
        if (lo) lora_linear_decode(lo, cfg, l, LORA_LIN_O, s->tmp, C, s->att, n, s->lora_tmp);
        for (size_t i = 0; i < (size_t)n * C; i++) s->x[i] += s->tmp[i];
        rmsnorm_forward(s->h, s->rstd, s->x, w->ln2, n, C, C, C, cfg->rms_norm_eps);
        ROWWISE(s->gu, s->h, wgu, NULL, C, 2 * F);
        if (lo) lora_linear_decode(lo, cfg, l, LORA_LIN_GU, s->gu, 2 * F, s->h, n, s->lora_tmp);
        swiglu_forward(s->act, s->gu, n, F);
        ROWWISE(s->tmp, s->act, wdown, NULL, F, C);
        if (lo) lora_linear_decode(lo, cfg, l, LORA_LIN_DOWN, s->tmp, C, s->act, n, s->lora_tmp);
        for (size_t i = 0; i < (size_t)n * C; i++) s->x[i] += s->tmp[i];
#undef ROWWISE
    }
    int n_out = 0;
    for (int r = 0; r < n; r++)
        if (!want || want[r]) memcpy(s->hrows + (size_t)n_out++ * C, s->x + (size_t)r * C, sizeof(float) * C);
    if (n_out == 0) return 0;
    rmsnorm_forward(s->h, s->rstd, s->hrows, m->w.norm, n_out, C, C, C, cfg->rms_norm_eps);
    rowwise(logits_out, s->h, model_lm_head(m), NULL, n_out, C, cfg->vocab_size);
    return n_out;
}
