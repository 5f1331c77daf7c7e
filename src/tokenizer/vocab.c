/* tokenizer/vocab.c — the tokenizer's data structures: byte buffers, UTF-8
 * helpers, the string pool with its string -> id hash, the BPE merge table and
 * GPT-2's byte-level alphabet. No JSON and no tokenizer semantics here. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

void tbuf_reserve(TokBuf *b, size_t extra) {
    if (b->n + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

void tbuf_put(TokBuf *b, const void *s, size_t n) {
    tbuf_reserve(b, n);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}

void tbuf_put_cp(TokBuf *b, uint32_t cp) {
    char u[4];
    int n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    tbuf_put(b, u, (size_t)n);
}

void tbuf_free(TokBuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

int tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    uint32_t v, lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3; v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4; v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        unsigned d = s[i];
        if (d < lo || d > hi) return 0;
        lo = 0x80; hi = 0xBF;
        v = v << 6 | (d & 0x3F);
    }
    *cp = v;
    return len;
}

/* The WHATWG decoder's rule: a maximal prefix of a valid sequence that is cut
 * short becomes one U+FFFD; any other bad byte becomes one U+FFFD. */
void tok_utf8_sanitize(const char *s, size_t n, TokBuf *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    out->n = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && u[run] < 0x80) run++;
        if (run > i) { tbuf_put(out, s + i, run - i); i = run; if (i >= n) break; }
        uint32_t cp;
        int k = tok_utf8_next(u + i, n - i, &cp);
        if (k > 0) { tbuf_put(out, s + i, (size_t)k); i += (size_t)k; continue; }
        /* count how many bytes form a valid prefix */
        unsigned c = u[i];
        size_t need = 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        size_t j = i + 1;
        for (size_t t = 0; t < need && j < n && u[j] >= lo && u[j] <= hi; t++, j++) { lo = 0x80; hi = 0xBF; }
        tbuf_put(out, "\xEF\xBF\xBD", 3);
        i = j;
    }
    tbuf_reserve(out, 1);
    out->p[out->n] = 0;
}

uint64_t tok_hash(const void *s, size_t n) {
    /* FNV-1a over 8-byte words, then a final mix */
    const unsigned char *p = s;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        p += 8; n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static uint32_t pow2_at_least(size_t n) {
    uint32_t c = 16;
    while (c < n) c *= 2;
    return c;
}

void vocab_init(TokVocab *v, int32_t n_ids, size_t n_entries) {
    memset(v, 0, sizeof *v);
    v->n_ids = n_ids;
    v->spans = xmalloc((size_t)(n_ids > 0 ? n_ids : 1) * sizeof *v->spans);
    for (int32_t i = 0; i < n_ids; i++) v->spans[i].len = UINT32_MAX;
    uint32_t cap = pow2_at_least(n_entries * 2 + 16);
    v->slots = xcalloc(cap, sizeof *v->slots);
    v->mask = cap - 1;
}

int32_t vocab_find(const TokVocab *v, const char *s, size_t len) {
    uint64_t h = tok_hash(s, len);
    for (uint32_t i = (uint32_t)h & v->mask;; i = (i + 1) & v->mask) {
        uint32_t e = v->slots[i];
        if (!e) return -1;
        const TokSpan *sp = &v->spans[e - 1];
        if (sp->len == len && !memcmp(v->pool.p + sp->off, s, len)) return (int32_t)(e - 1);
    }
}

int vocab_add(TokVocab *v, int32_t id, const char *s, size_t len) {
    if (v->spans[id].len != UINT32_MAX) return -2;
    uint64_t h = tok_hash(s, len);
    uint32_t i = (uint32_t)h & v->mask;
    for (;; i = (i + 1) & v->mask) {
        uint32_t e = v->slots[i];
        if (!e) break;
        const TokSpan *sp = &v->spans[e - 1];
        if (sp->len == len && !memcmp(v->pool.p + sp->off, s, len)) {
            /* the string has another id already: this id still decodes to it */
            v->spans[id] = *sp;
            return (int)(e - 1) + 1;
        }
    }
    v->spans[id].off = (uint32_t)v->pool.n;
    v->spans[id].len = (uint32_t)len;
    tbuf_put(&v->pool, s, len);
    v->slots[i] = (uint32_t)id + 1;
    return 0;
}

void vocab_free(TokVocab *v) {
    tbuf_free(&v->pool);
    free(v->spans);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

void merges_init(TokMerges *m, size_t n) {
    uint32_t cap = pow2_at_least(n * 2 + 16);
    m->keys = xcalloc(cap, sizeof *m->keys);
    m->rank = xmalloc(cap * sizeof *m->rank);
    m->merged = xmalloc(cap * sizeof *m->merged);
    m->mask = cap - 1;
}

void merges_put(TokMerges *m, int32_t a, int32_t b, int32_t rank, int32_t merged) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    for (uint32_t i = (uint32_t)(h >> 32) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == key) return; /* a repeated merge keeps its first (best) rank */
        if (m->keys[i] == 0) {
            m->keys[i] = key;
            m->rank[i] = rank;
            m->merged[i] = merged;
            return;
        }
    }
}

void merges_free(TokMerges *m) {
    free(m->keys);
    free(m->rank);
    free(m->merged);
    memset(m, 0, sizeof *m);
}

/* GPT-2's byte-level alphabet: printable Latin-1 bytes map to themselves, the
 * other 68 bytes to U+0100.. in byte order (the `bytes_to_unicode` table of the
 * GPT-2 release, which tokenizer.json's ByteLevel components assume). */
uint32_t tok_byte_to_cp[256];
int16_t tok_cp_to_byte[512];

void tok_bytelevel_init(void) {
    static int done = 0;
    if (done) return;
    for (int i = 0; i < 512; i++) tok_cp_to_byte[i] = -1;
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t cp = printable ? (uint32_t)b : next++;
        tok_byte_to_cp[b] = cp;
        tok_cp_to_byte[cp] = (int16_t)b;
    }
    done = 1;
}
