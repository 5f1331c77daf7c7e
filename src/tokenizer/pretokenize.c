/* tokenizer/pretokenize.c — tokenizer.json pre-tokenizers: Split (regex or
 * literal, five behaviours, invert), ByteLevel (prefix space, GPT-2 regex,
 * byte -> printable char mapping), Digits and Sequence.
 *
 * Regexes run on Oniguruma with Ruby syntax and UTF-8, the engine and syntax
 * HF's Rust `tokenizers` compiles tokenizer.json patterns with, so \s, \p{L},
 * (?i:...) and lookaheads mean the same thing. Splitting follows HF's
 * `NormalizedString::split`: matches and the gaps between them cover the text,
 * the behaviour decides what is kept and what is glued, empty pieces vanish. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

void pieces_reset(TokPieces *p) {
    p->n = 0;
    p->buf.n = 0;
    if (!p->cap) {
        p->cap = 64;
        p->off = xmalloc(p->cap * sizeof *p->off);
    }
    p->off[0] = 0;
}

void pieces_push(TokPieces *p, const char *s, size_t len) {
    if (!len) return;
    if (p->n + 2 > p->cap) {
        p->cap *= 2;
        p->off = xrealloc(p->off, p->cap * sizeof *p->off);
    }
    tbuf_put(&p->buf, s, len);
    p->off[++p->n] = (uint32_t)p->buf.n;
}

void pieces_free(TokPieces *p) {
    tbuf_free(&p->buf);
    free(p->off);
    memset(p, 0, sizeof *p);
}

static int onig_ready = 0;

int tok_regex_compile(regex_t **re, const char *pattern, size_t len, int literal, char *why,
                      size_t why_len) {
    if (!onig_ready) {
        OnigEncoding encs[1] = {ONIG_ENCODING_UTF8};
        onig_initialize(encs, 1);
        onig_ready = 1;
    }
    TokBuf esc = {0};
    if (literal) { /* a String pattern: escape every ASCII punctuation byte */
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)pattern[i];
            if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                              (c >= 'A' && c <= 'Z') || c == ' ')) {
                if (c < 0x20 || c == 0x7F) {
                    char hex[8];
                    snprintf(hex, sizeof hex, "\\x%02X", c);
                    tbuf_put(&esc, hex, 4);
                    continue;
                }
                tbuf_putc(&esc, '\\');
            }
            tbuf_putc(&esc, (char)c);
        }
        pattern = esc.p ? esc.p : "";
        len = esc.n;
    }
    OnigErrorInfo einfo;
    int r = onig_new(re, (const UChar *)pattern, (const UChar *)pattern + len, ONIG_OPTION_NONE,
                     ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &einfo);
    if (r != ONIG_NORMAL) {
        UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r, &einfo);
        snprintf(why, why_len, "%s", (char *)msg);
        *re = NULL;
    }
    tbuf_free(&esc);
    return r == ONIG_NORMAL ? 0 : -1;
}

/* One (start, end, flag) span of the split. */
typedef struct {
    size_t a, b;
    int match;
} Span;

static void span_push(Span **v, size_t *n, size_t *cap, size_t a, size_t b, int match) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *v = xrealloc(*v, *cap * sizeof **v);
    }
    (*v)[(*n)++] = (Span){a, b, match};
}

int tok_regex_failed(int code, const char *where, GrpoErr *err) {
    UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, code);
    return err_set(err, "%s: the regex search failed (Oniguruma: %s); the text cannot be tokenized as the "
                   "tokenizer defines it", where, (char *)msg);
}

/* Splits s[0..len) into spans of matches and gaps (HF `find_matches`) into *v,
 * their count in *n_out. A search that fails — not "no match" but an engine
 * error such as its backtracking limit — is an error, never a shorter split. */
static int find_matches(Tokenizer *tok, regex_t *re, const char *where, const char *s, size_t len, Span **v,
                        size_t *cap, size_t *n_out, GrpoErr *err) {
    size_t n = 0, prev = 0, pos = 0;
    const UChar *str = (const UChar *)s, *end = str + len;
    while (pos <= len) {
        int at = onig_search(re, str, end, str + pos, end, tok->region, ONIG_OPTION_NONE);
        if (at == ONIG_MISMATCH) break;
        if (at < 0) return tok_regex_failed(at, where, err);
        size_t ms = (size_t)tok->region->beg[0], me = (size_t)tok->region->end[0];
        if (me == ms) { /* an empty match splits nothing; step one char */
            if (ms >= len) break;
            size_t k = 1;
            while (ms + k < len && ((unsigned char)s[ms + k] & 0xC0) == 0x80) k++;
            pos = ms + k;
            continue;
        }
        if (ms > prev) span_push(v, &n, cap, prev, ms, 0);
        span_push(v, &n, cap, ms, me, 1);
        prev = pos = me;
    }
    if (prev < len) span_push(v, &n, cap, prev, len, 0);
    *n_out = n;
    return 0;
}

/* Applies a split behaviour to spans in place; returns the new count. After
 * this, span.match means "remove". */
static size_t apply_behavior(SplitBehavior beh, Span *v, size_t n) {
    size_t m = 0;
    int prev_match = 0;
    switch (beh) {
    case SPLIT_REMOVED: return n;
    case SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++) v[i].match = 0;
        return n;
    case SPLIT_MERGED_PREV:
        for (size_t i = 0; i < n; i++) {
            int is = v[i].match;
            if (is && !prev_match && m > 0) v[m - 1].b = v[i].b;
            else v[m++] = (Span){v[i].a, v[i].b, 0};
            prev_match = is;
        }
        return m;
    case SPLIT_MERGED_NEXT: /* the mirror image: walk from the end */
        for (size_t k = n; k-- > 0;) {
            int is = v[k].match;
            if (is && !prev_match && m > 0) v[n - m].a = v[k].a;
            else { v[n - 1 - m] = (Span){v[k].a, v[k].b, 0}; m++; }
            prev_match = is;
        }
        memmove(v, v + (n - m), m * sizeof *v);
        return m;
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            int is = v[i].match;
            if (m > 0 && is == prev_match) v[m - 1].b = v[i].b;
            else v[m++] = (Span){v[i].a, v[i].b, 0};
            prev_match = is;
        }
        return m;
    }
    return n;
}

static int split_piece(Tokenizer *tok, const TokPre *p, const char *s, size_t len, TokPieces *out,
                       GrpoErr *err) {
    size_t n;
    if (find_matches(tok, p->regex, "pre_tokenizer Split", s, len, (Span **)&tok->spans, &tok->spans_cap, &n, err))
        return -1;
    Span *spans_buf = tok->spans;
    if (p->invert)
        for (size_t i = 0; i < n; i++) spans_buf[i].match = !spans_buf[i].match;
    n = apply_behavior(p->behavior, spans_buf, n);
    for (size_t i = 0; i < n; i++)
        if (!spans_buf[i].match) pieces_push(out, s + spans_buf[i].a, spans_buf[i].b - spans_buf[i].a);
    return 0;
}

static int is_numeric_cp(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

static void digits_piece(const TokPre *p, const char *s, size_t len, TokPieces *out) {
    size_t i = 0, run = 0;
    int run_num = -1;
    while (i < len) {
        uint32_t cp;
        int k = tok_utf8_next((const unsigned char *)s + i, len - i, &cp);
        if (k <= 0) k = 1, cp = 0xFFFD;
        int num = is_numeric_cp(cp);
        if (run_num >= 0 && (num != run_num || (num && p->individual_digits))) {
            pieces_push(out, s + run, i - run);
            run = i;
        }
        run_num = num;
        i += (size_t)k;
    }
    if (i > run) pieces_push(out, s + run, i - run);
}

static void bytelevel_map(const char *s, size_t len, TokPieces *out) {
    tbuf_reserve(&out->buf, 2 * len);
    char *w = out->buf.p + out->buf.n;
    for (size_t i = 0; i < len; i++) {
        uint32_t cp = tok_byte_to_cp[(unsigned char)s[i]];
        if (cp < 0x80) *w++ = (char)cp;
        else { *w++ = (char)(0xC0 | cp >> 6); *w++ = (char)(0x80 | (cp & 0x3F)); }
    }
    size_t n = (size_t)(w - (out->buf.p + out->buf.n)); /* written in place */
    if (out->n + 2 > out->cap) {
        out->cap *= 2;
        out->off = xrealloc(out->off, out->cap * sizeof *out->off);
    }
    out->buf.n += n;
    out->off[++out->n] = (uint32_t)out->buf.n;
}

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int bytelevel_piece(Tokenizer *tok, const TokPre *p, const char *s, size_t len, TokPieces *out,
                           GrpoErr *err) {
    TokBuf *pre = &tok->prefix_buf;
    if (p->add_prefix_space && (len == 0 || s[0] != ' ')) {
        pre->n = 0;
        tbuf_putc(pre, ' ');
        tbuf_put(pre, s, len);
        s = pre->p;
        len = pre->n;
    }
    if (!p->use_regex) {
        if (len) bytelevel_map(s, len, out);
        return 0;
    }
    if (!tok->bytelevel_regex) {
        char why[256];
        CHECK(tok_regex_compile(&tok->bytelevel_regex, GPT2_PATTERN, strlen(GPT2_PATTERN), 0, why,
                                sizeof why) == 0);
    }
    size_t n;
    if (find_matches(tok, tok->bytelevel_regex, "pre_tokenizer ByteLevel", s, len, (Span **)&tok->spans,
                     &tok->spans_cap, &n, err))
        return -1;
    Span *spans_buf = tok->spans;
    for (size_t i = 0; i < n; i++)
        if (spans_buf[i].b > spans_buf[i].a)
            bytelevel_map(s + spans_buf[i].a, spans_buf[i].b - spans_buf[i].a, out);
    return 0;
}

/* One pre-tokenizer over every piece of in, into out. */
static int pre_step(Tokenizer *tok, const TokPre *p, const TokPieces *in, TokPieces *out, GrpoErr *err) {
    pieces_reset(out);
    for (size_t i = 0; i < in->n; i++) {
        const char *s = in->buf.p + in->off[i];
        size_t len = in->off[i + 1] - in->off[i];
        int rc = 0;
        switch (p->kind) {
        case PRE_SPLIT: rc = split_piece(tok, p, s, len, out, err); break;
        case PRE_BYTELEVEL: rc = bytelevel_piece(tok, p, s, len, out, err); break;
        case PRE_DIGITS: digits_piece(p, s, len, out); break;
        case PRE_SEQUENCE: break; /* flattened by pre_apply */
        }
        if (rc) return -1;
    }
    return 0;
}

/* Runs p (a Sequence recursively) over tok->pieces[0], result in pieces[0]. */
static int pre_run(Tokenizer *tok, const TokPre *p, GrpoErr *err) {
    if (p->kind == PRE_SEQUENCE) {
        for (int i = 0; i < p->n_children; i++)
            if (pre_run(tok, &p->children[i], err)) return -1;
        return 0;
    }
    TokPieces *a = &tok->pieces[0], *b = &tok->pieces[1];
    if (pre_step(tok, p, a, b, err)) return -1;
    TokPieces t = *a; *a = *b; *b = t;
    return 0;
}

int pre_apply(Tokenizer *tok, const char *s, size_t len, GrpoErr *err) {
    pieces_reset(&tok->pieces[0]);
    pieces_push(&tok->pieces[0], s, len);
    if (tok->pre && pre_run(tok, tok->pre, err)) return err_prefix(err, "%s", tok->path);
    return 0;
}

void pre_free(TokPre *p) {
    if (!p) return;
    for (int i = 0; i < p->n_children; i++) pre_free(&p->children[i]);
    free(p->children);
    if (p->regex) onig_free(p->regex);
}
