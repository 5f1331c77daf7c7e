/* tokenizer/bpe.c — the BPE model: one pre-token in, its ids out.
 *
 * A word starts as one symbol per character; the adjacent pair with the lowest
 * merge rank is merged first, ties going to the leftmost pair, until no pair
 * has a merge (the rule of HF's BPE model). A min-heap of candidate pairs makes
 * this O(n log n), so a 1 MB word without spaces stays fast. `ignore_merges`
 * (Llama 3) emits a word that is itself in the vocabulary as one token.
 * Characters not in the vocabulary become <0xXX> byte tokens when
 * byte_fallback is set, else unk_token when set, else they are dropped.
 * Results for words under 256 bytes are cached per Tokenizer. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

struct TokSym {
    int32_t id; /* -1: a character outside the vocabulary */
    uint32_t start, len;
    int32_t prev, next;
};

struct TokHeapEnt {
    int32_t rank;
    uint32_t pos; /* left symbol's start: the tie-break */
    int32_t left, right, left_id, right_id, merged;
};

void tok_ids_push(TokIds *ids, int32_t id) {
    if (ids->n == ids->cap) {
        ids->cap = ids->cap ? ids->cap * 2 : 64;
        ids->ids = xrealloc(ids->ids, ids->cap * sizeof *ids->ids);
    }
    ids->ids[ids->n++] = id;
}

void tok_ids_free(TokIds *ids) {
    free(ids->ids);
    memset(ids, 0, sizeof *ids);
}

/* ---- cache ------------------------------------------------------------------ */
/* The cache starts empty and grows by doubling up to max_entries, so that a
 * tokenizer which encodes a few words (a test, a fuzz input) does not pay for
 * clearing a full-size table. */
void cache_init(TokCache *c, uint32_t max_entries) {
    memset(c, 0, sizeof *c);
    c->max_entries = max_entries;
}

/* Room for at least `want` entries (at most max_entries), slots at most half full. */
static void cache_grow(TokCache *c, uint32_t want) {
    uint32_t n_entries = want < 64 ? 64 : want;
    if (n_entries > c->max_entries) n_entries = c->max_entries;
    uint32_t cap = 16;
    while (cap < n_entries * 2) cap *= 2;
    free(c->slots);
    c->slots = xcalloc(cap, sizeof *c->slots);
    c->mask = cap - 1;
    c->entries = xrealloc(c->entries, n_entries * sizeof *c->entries);
    c->cap_entries = n_entries;
    for (uint32_t e = 0; e < c->n_entries; e++) {
        uint32_t i = (uint32_t)c->entries[e].hash & c->mask;
        while (c->slots[i]) i = (i + 1) & c->mask;
        c->slots[i] = e + 1;
    }
}

void cache_free(TokCache *c) {
    free(c->slots);
    free(c->entries);
    tbuf_free(&c->keys);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

static const struct TokCacheEntry *cache_get(const TokCache *c, const char *w, size_t len,
                                             uint64_t h) {
    if (!c->slots) return NULL;
    for (uint32_t i = (uint32_t)h & c->mask;; i = (i + 1) & c->mask) {
        uint32_t e = c->slots[i];
        if (!e) return NULL;
        const struct TokCacheEntry *en = &c->entries[e - 1];
        if (en->hash == h && en->key_len == len && !memcmp(c->keys.p + en->key_off, w, len))
            return en;
    }
}

static void cache_put(TokCache *c, const char *w, size_t len, uint64_t h, const int32_t *ids,
                      size_t n) {
    if (c->n_entries == c->max_entries) { /* full: start over (cheap, and rare) */
        memset(c->slots, 0, ((size_t)c->mask + 1) * sizeof *c->slots);
        c->n_entries = 0;
        c->keys.n = 0;
        c->n_id_store = 0;
    }
    if (c->n_entries == c->cap_entries) cache_grow(c, 2 * c->cap_entries);
    uint32_t i = (uint32_t)h & c->mask;
    while (c->slots[i]) i = (i + 1) & c->mask;
    struct TokCacheEntry *en = &c->entries[c->n_entries];
    en->hash = h;
    en->key_off = (uint32_t)c->keys.n;
    en->key_len = (uint32_t)len;
    tbuf_put(&c->keys, w, len);
    if (c->n_id_store + n > c->cap_id_store) {
        c->cap_id_store = (c->n_id_store + n) * 2 + 1024;
        c->ids = xrealloc(c->ids, c->cap_id_store * sizeof *c->ids);
    }
    en->ids_off = (uint32_t)c->n_id_store;
    en->n_ids = (uint32_t)n;
    if (n) memcpy(c->ids + c->n_id_store, ids, n * sizeof *ids);
    c->n_id_store += n;
    c->slots[i] = ++c->n_entries;
}

/* ---- heap --------------------------------------------------------------------- */
static int heap_less(const struct TokHeapEnt *a, const struct TokHeapEnt *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(Tokenizer *tok, size_t *n, struct TokHeapEnt e) {
    if (*n == tok->heap_cap) {
        tok->heap_cap = tok->heap_cap ? tok->heap_cap * 2 : 256;
        tok->heap = xrealloc(tok->heap, tok->heap_cap * sizeof *tok->heap);
    }
    struct TokHeapEnt *h = tok->heap;
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static struct TokHeapEnt heap_pop(Tokenizer *tok, size_t *n) {
    struct TokHeapEnt *h = tok->heap, top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void try_pair(Tokenizer *tok, size_t *hn, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    struct TokSym *s = tok->syms;
    if (s[l].id < 0 || s[r].id < 0) return;
    int32_t rank, merged;
    if (!merges_get(&tok->merges, s[l].id, s[r].id, &rank, &merged)) return;
    heap_push(tok, hn, (struct TokHeapEnt){rank, s[l].start, l, r, s[l].id, s[r].id, merged});
}

static int32_t char_id(const Tokenizer *tok, const char *c, size_t len) {
    int32_t id = vocab_find(&tok->vocab, c, len);
    return id >= 0 && !tok->is_added[id] ? id : -1;
}

static void emit_unknown(const Tokenizer *tok, const char *s, size_t len, TokIds *out) {
    if (tok->byte_fallback) {
        int all = 1;
        for (size_t i = 0; i < len; i++) all &= tok->byte_ids[(unsigned char)s[i]] >= 0;
        if (all) {
            for (size_t i = 0; i < len; i++) tok_ids_push(out, tok->byte_ids[(unsigned char)s[i]]);
            return;
        }
    }
    if (tok->unk_id >= 0) tok_ids_push(out, tok->unk_id);
}

static void bpe_merge(Tokenizer *tok, const char *w, size_t len, TokIds *out) {
    if (tok->sym_cap < len) {
        tok->sym_cap = len * 2;
        tok->syms = xrealloc(tok->syms, tok->sym_cap * sizeof *tok->syms);
    }
    struct TokSym *s = tok->syms;
    int32_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t k = 1;
        while (i + k < len && ((unsigned char)w[i + k] & 0xC0) == 0x80) k++;
        s[n] = (struct TokSym){char_id(tok, w + i, k), (uint32_t)i, (uint32_t)k, n - 1, n + 1};
        n++;
        i += k;
    }
    s[n - 1].next = -1;
    size_t hn = 0;
    for (int32_t i = 0; i + 1 < n; i++) try_pair(tok, &hn, i, i + 1);
    while (hn) {
        struct TokHeapEnt e = heap_pop(tok, &hn);
        struct TokSym *l = &s[e.left];
        if (l->len == 0 || l->next != e.right || l->id != e.left_id) continue;
        struct TokSym *r = &s[e.right];
        if (r->len == 0 || r->id != e.right_id) continue;
        l->id = e.merged;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = e.left;
        r->len = 0;
        try_pair(tok, &hn, l->prev, e.left);
        try_pair(tok, &hn, e.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = s[i].next) {
        if (s[i].id >= 0) tok_ids_push(out, s[i].id);
        else emit_unknown(tok, w + s[i].start, s[i].len, out);
    }
}

void bpe_word(Tokenizer *tok, const char *w, size_t len, TokIds *out) {
    if (!len) return;
    if (tok->ignore_merges) {
        int32_t id = vocab_find(&tok->vocab, w, len);
        if (id >= 0 && !tok->is_added[id]) { tok_ids_push(out, id); return; }
    }
    int cacheable = len < 256;
    uint64_t h = 0;
    if (cacheable) {
        h = tok_hash(w, len);
        const struct TokCacheEntry *en = cache_get(&tok->cache, w, len, h);
        if (en) {
            for (uint32_t i = 0; i < en->n_ids; i++) tok_ids_push(out, tok->cache.ids[en->ids_off + i]);
            return;
        }
    }
    size_t n0 = out->n;
    bpe_merge(tok, w, len, out);
    if (cacheable) cache_put(&tok->cache, w, len, h, out->n > n0 ? out->ids + n0 : NULL, out->n - n0);
}
