/* tokenizer/tok_internal.h — the structures shared by the tokenizer's files.
 * Not a public interface: only the tokenizer's own .c files include it.
 *
 * Reading order: vocab.c (string pool, hash tables), load.c (tokenizer.json ->
 * these structs), added.c, normalize.c, pretokenize.c, bpe.c, encode.c,
 * decode.c, then jinja_*.c and chat.c. */
#ifndef GRPO_TOKENIZER_TOK_INTERNAL_H
#define GRPO_TOKENIZER_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <oniguruma.h>

#include "tokenizer/tokenizer.h"

/* ---- byte buffer ---------------------------------------------------------- */
typedef struct {
    char *p;
    size_t n, cap;
} TokBuf;
void tbuf_reserve(TokBuf *b, size_t extra);
void tbuf_put(TokBuf *b, const void *s, size_t n);
static inline void tbuf_putc(TokBuf *b, char c) {
    if (b->n + 1 > b->cap) tbuf_reserve(b, 1);
    b->p[b->n++] = c;
}
void tbuf_put_cp(TokBuf *b, uint32_t cp); /* UTF-8 encode */
void tbuf_free(TokBuf *b);

/* Decodes one UTF-8 code point at s[0..n); returns its byte length (>= 1), or
 * 0 when the bytes there are not valid UTF-8 (then *cp is unset). */
int tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
/* Copies s into out replacing each maximal invalid subsequence with U+FFFD. */
void tok_utf8_sanitize(const char *s, size_t n, TokBuf *out);

/* ---- vocabulary: id -> string, string -> id ------------------------------- */
typedef struct {
    uint32_t off, len; /* into pool; len == UINT32_MAX: no token with this id */
} TokSpan;

typedef struct {
    TokBuf pool;
    TokSpan *spans; /* [n_ids] */
    int32_t n_ids;
    uint32_t *slots; /* open addressing: id + 1, 0 = empty */
    uint32_t mask;
} TokVocab;

void vocab_init(TokVocab *v, int32_t n_ids, size_t n_entries);
/* Returns 0, or the previous id when the string was already present, or -2
 * when the id already had a string. */
int vocab_add(TokVocab *v, int32_t id, const char *s, size_t len);
int32_t vocab_find(const TokVocab *v, const char *s, size_t len);
static inline const char *vocab_str(const TokVocab *v, int32_t id, size_t *len) {
    if (id < 0 || id >= v->n_ids || v->spans[id].len == UINT32_MAX) return NULL;
    *len = v->spans[id].len;
    return v->pool.p + v->spans[id].off;
}
void vocab_free(TokVocab *v);
uint64_t tok_hash(const void *s, size_t n);

/* ---- BPE merges: (left id, right id) -> (rank, merged id) ----------------- */
typedef struct {
    uint64_t *keys; /* (left << 32 | right) + 1, 0 = empty */
    int32_t *rank, *merged;
    uint32_t mask;
} TokMerges;
void merges_init(TokMerges *m, size_t n);
void merges_put(TokMerges *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
static inline int merges_get(const TokMerges *m, int32_t a, int32_t b, int32_t *rank,
                             int32_t *merged) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    for (uint32_t i = (uint32_t)(h >> 32) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == key) {
            *rank = m->rank[i];
            *merged = m->merged[i];
            return 1;
        }
        if (m->keys[i] == 0) return 0;
    }
}
void merges_free(TokMerges *m);

/* ---- word cache: pre-token string -> ids ---------------------------------- */
typedef struct {
    uint32_t *slots; /* entry index + 1 */
    uint32_t mask;
    struct TokCacheEntry {
        uint64_t hash;
        uint32_t key_off, key_len, ids_off, n_ids;
    } *entries;
    uint32_t n_entries, cap_entries, max_entries;
    TokBuf keys;
    int32_t *ids;
    size_t n_id_store, cap_id_store;
} TokCache;

/* pre-tokens: a list of pieces, piece i = buf.p[off[i] .. off[i+1]) */
typedef struct {
    TokBuf buf;
    uint32_t *off; /* n + 1 entries */
    size_t n, cap;
} TokPieces;

/* ---- components ------------------------------------------------------------ */
typedef enum { NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_LOWERCASE, NORM_SEQUENCE,
               NORM_REPLACE, NORM_PREPEND, NORM_STRIP } NormKind;
typedef struct TokNormalizer {
    NormKind kind;
    struct TokNormalizer *children;
    int n_children;
    char *pattern, *content; /* Replace (string pattern), Prepend */
    regex_t *regex;          /* Replace with a Regex pattern */
    int strip_left, strip_right;
} TokNormalizer;

typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT,
               SPLIT_CONTIGUOUS } SplitBehavior;
typedef enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_DIGITS, PRE_SEQUENCE } PreKind;
typedef struct TokPre {
    PreKind kind;
    struct TokPre *children;
    int n_children;
    regex_t *regex;      /* Split (also literal String patterns, escaped), ByteLevel use_regex */
    SplitBehavior behavior;
    int invert;
    int add_prefix_space, use_regex, individual_digits;
} TokPre;

typedef enum { POST_BYTELEVEL, POST_TEMPLATE, POST_SEQUENCE } PostKind;
typedef struct TokPost {
    PostKind kind;
    struct TokPost *children;
    int n_children;
    /* TemplateProcessing "single": items, each a special token's ids or the
     * sequence (n_ids == -1). */
    struct TokTemplItem {
        int32_t *ids;
        int n_ids;
    } *items;
    int n_items;
} TokPost;

typedef enum { DEC_BYTELEVEL, DEC_SEQUENCE, DEC_BYTEFALLBACK, DEC_FUSE } DecKind;
typedef struct TokDec {
    DecKind kind;
    struct TokDec *children;
    int n_children;
} TokDec;

typedef struct {
    int32_t id;
    char *content;
    uint32_t len;
    int special, lstrip, rstrip, single_word, normalized;
} TokAdded;

struct Tokenizer {
    char *path;          /* tokenizer.json, for messages */
    char *config_path;   /* tokenizer_config.json or NULL */
    char *model_dir;     /* for chat-template messages */
    TokVocab vocab;      /* model vocabulary + added tokens: id <-> string */
    TokMerges merges;
    int byte_fallback, ignore_merges;
    int32_t unk_id;
    int32_t byte_ids[256]; /* <0xXX> tokens for byte_fallback, -1 if absent */
    uint8_t *is_special;   /* [vocab.n_ids] */
    uint8_t *is_added;     /* [vocab.n_ids]: the BPE model never produces these */

    TokAdded *added;
    int n_added;
    /* Added-token matching: for each first byte, the candidates longest first. */
    int *cand[2][256]; /* [normalized?][byte] -> indices into added, -1 terminated */

    TokNormalizer *normalizer; /* NULL: none */
    TokPre *pre;               /* NULL: none */
    TokPost *post;             /* NULL: none */
    TokDec *decoder;           /* NULL: none (tokens joined by spaces) */

    TokSpecial special;
    char *bos_token, *eos_token, *pad_token;
    char *chat_template; /* NULL when tokenizer_config.json has none */
    int clean_up_spaces; /* tokenizer_config.json's clean_up_tokenization_spaces (tok_decode applies it) */

    /* Scratch reused across encode calls (hence one thread per Tokenizer). */
    TokCache cache;
    OnigRegion *region;
    TokBuf norm_buf, sanitize_buf, word_buf, prefix_buf;
    void *spans; /* pretokenize.c's match spans */
    size_t spans_cap;
    TokPieces pieces[2];
    regex_t *bytelevel_regex; /* compiled on first use */
    struct TokSym *syms;
    size_t sym_cap;
    struct TokHeapEnt *heap;
    size_t heap_cap;
};

/* byte <-> printable code point of GPT-2's byte-level alphabet */
extern uint32_t tok_byte_to_cp[256];
extern int16_t tok_cp_to_byte[512]; /* -1: not a byte-level char */
void tok_bytelevel_init(void);

/* normalize.c */
int norm_apply(const TokNormalizer *n, const char *s, size_t len, TokBuf *out, GrpoErr *err);
void norm_free(TokNormalizer *n);

/* pretokenize.c */
void pieces_reset(TokPieces *p);
void pieces_push(TokPieces *p, const char *s, size_t len);
void pieces_free(TokPieces *p);
/* Splits s (valid UTF-8) into pre-tokens, written to tok->pieces[0]. */
int pre_apply(Tokenizer *tok, const char *s, size_t len, GrpoErr *err);
void pre_free(TokPre *p);
/* An Oniguruma search error (not ONIG_MISMATCH) at `where`, as err; returns -1. */
int tok_regex_failed(int code, const char *where, GrpoErr *err);
int tok_regex_compile(regex_t **re, const char *pattern, size_t len, int literal,
                      char *why, size_t why_len);

/* bpe.c: appends the ids of one pre-token */
void bpe_word(Tokenizer *tok, const char *w, size_t len, TokIds *out);
void cache_init(TokCache *c, uint32_t max_entries);
void cache_free(TokCache *c);
void tok_ids_push(TokIds *ids, int32_t id);

/* added.c: finds the leftmost-longest added token in s[from..len) of the given
 * class (normalized 0/1); returns its index or -1; start and end cover the
 * match including lstrip/rstrip whitespace. */
int added_find(const Tokenizer *tok, int normalized, const char *s, size_t len, size_t from,
               size_t *start, size_t *end);
void added_build_index(Tokenizer *tok);

/* decode.c */
void dec_free(TokDec *d);
void post_free(TokPost *p);





#endif
