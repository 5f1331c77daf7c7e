/* model/kvcache.h — a batched KV cache for incremental decoding, in which several
 * sequences can share one cached prefix (a GRPO group's prompt is prefilled once
 * and its keys/values read by all G completions).
 *
 * The cache has n_slots slots of up to cap tokens each. A slot may name a parent
 * slot: its keys are then the parent's first parent_len keys followed by its own.
 * One level of sharing: a parent has no parent itself. */
#ifndef GRPO_MODEL_KVCACHE_H
#define GRPO_MODEL_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "model/transformer.h"

typedef struct {
    int n_layers, n_slots, cap, kv_dim;   /* kv_dim = Hkv * D */
    float *k, *v;                         /* [L, n_slots, cap, kv_dim] */
    int *len;                             /* own tokens per slot */
    int *parent, *parent_len;             /* -1 / 0 when none */
} KVCache;

size_t kv_cache_bytes(const ModelConfig *cfg, int n_slots, int cap);
void kv_cache_create(KVCache *c, const ModelConfig *cfg, int n_slots, int cap);
void kv_cache_free(KVCache *c);
/* Empties a slot (and detaches it from any parent). */
void kv_cache_reset(KVCache *c, int slot);
/* Empties slot and makes it continue parent's current contents. */
void kv_cache_share_prefix(KVCache *c, int slot, int parent);
/* Total keys slot attends to now (parent part + own). */
int kv_cache_seq_len(const KVCache *c, int slot);

/* Scratch for model_decode, planned for up to max_rows rows per call and sequences
 * of up to max_keys keys. The attention scores hold one area per OpenMP thread at
 * creation (n_threads = omp_get_max_threads() then); model_decode runs its attention
 * on at most n_threads threads, so raising the thread count later cannot overrun it. */
typedef struct {
    int max_rows, max_keys, n_threads;
    float *x, *h, *qkv, *qk, *att, *tmp, *gu, *act, *rstd, *scores, *hrows;
    size_t *key_at; /* per thread: a row's keys' offsets in the cache, max_keys */
    int32_t *pos, *own;
    float *arena;
    float *lora_tmp;                      /* adapters' scratch, grown on first use */
    size_t lora_tmp_floats;
} DecodeState;

size_t decode_state_bytes(const ModelConfig *cfg, int max_rows, int max_keys);
void decode_state_create(DecodeState *s, const ModelConfig *cfg, int max_rows, int max_keys);
void decode_state_free(DecodeState *s);

/* Runs n rows through the model against the cache: row r appends token tokens[r]
 * to slot slots[r] at the slot's next position; rows of one slot must appear in
 * order (a prompt is several rows of one slot). Each row attends to its slot's
 * earlier keys and itself. For every row with want[r] != 0 (every row when want
 * is NULL), V logits are written to logits_out, in row order. Returns the number
 * of logits rows written. Slots must have room: len + rows <= cap (checked). */
int model_decode(Model *m, KVCache *c, DecodeState *s, int n, const int *slots,
                 const int32_t *tokens, const uint8_t *want, float *logits_out);

#endif
