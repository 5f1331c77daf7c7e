/* tokenizer/normalize.c — tokenizer.json normalizers: NFC, NFD, NFKC, NFKD
 * (through utf8proc), Lowercase, Replace, Prepend, Strip and Sequence.
 * Input is valid UTF-8 (encode sanitises first). Not here: added tokens, which
 * are matched before and after normalization by encode.c. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

static int unicode_form(NormKind kind, const char *s, size_t len, TokBuf *out, GrpoErr *err) {
    int opts = UTF8PROC_STABLE;
    switch (kind) {
    case NORM_NFC: opts |= UTF8PROC_COMPOSE; break;
    case NORM_NFD: opts |= UTF8PROC_DECOMPOSE; break;
    case NORM_NFKC: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    /* ASCII is invariant under every normalization form. */
    size_t i = 0;
    while (i < len && (unsigned char)s[i] < 0x80) i++;
    if (i == len) { tbuf_put(out, s, len); return 0; }
    utf8proc_uint8_t *res = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &res,
                                      (utf8proc_option_t)opts);
    if (n < 0) {
        free(res);
        return err_set(err, "normalizer: utf8proc: %s", utf8proc_errmsg(n));
    }
    tbuf_put(out, res, (size_t)n);
    free(res);
    return 0;
}

static void lowercase(const char *s, size_t len, TokBuf *out) {
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        int k = tok_utf8_next((const unsigned char *)s + i, len - i, &cp);
        if (k <= 0) { tbuf_putc(out, s[i]); i++; continue; }
        tbuf_put_cp(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
        i += (size_t)k;
    }
}

static int is_space_cp(uint32_t cp) {
    if (cp == ' ' || (cp >= 9 && cp <= 13) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
        (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
        cp == 0x205F || cp == 0x3000)
        return 1;
    return 0;
}

static void strip(const char *s, size_t len, int left, int right, TokBuf *out) {
    size_t a = 0, b = len;
    while (left && a < b) {
        uint32_t cp;
        int k = tok_utf8_next((const unsigned char *)s + a, b - a, &cp);
        if (k <= 0 || !is_space_cp(cp)) break;
        a += (size_t)k;
    }
    while (right && b > a) {
        size_t j = b - 1;
        while (j > a && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
        uint32_t cp;
        int k = tok_utf8_next((const unsigned char *)s + j, b - j, &cp);
        if (k <= 0 || !is_space_cp(cp)) break;
        b = j;
    }
    tbuf_put(out, s + a, b - a);
}

static int replace(const TokNormalizer *n, const char *s, size_t len, TokBuf *out, GrpoErr *err) {
    if (!n->regex) {
        size_t plen = strlen(n->pattern);
        size_t i = 0;
        while (i < len) {
            if (plen && i + plen <= len && !memcmp(s + i, n->pattern, plen)) {
                tbuf_put(out, n->content, strlen(n->content));
                i += plen;
            } else tbuf_putc(out, s[i++]);
        }
        return 0;
    }
    OnigRegion *r = onig_region_new();
    const UChar *str = (const UChar *)s, *end = str + len;
    size_t pos = 0;
    while (pos <= len) {
        int at = onig_search(n->regex, str, end, str + pos, end, r, ONIG_OPTION_NONE);
        if (at == ONIG_MISMATCH) break;
        if (at < 0) {
            onig_region_free(r, 1);
            return tok_regex_failed(at, "normalizer Replace", err);
        }
        size_t ms = (size_t)r->beg[0], me = (size_t)r->end[0];
        tbuf_put(out, s + pos, ms - pos);
        tbuf_put(out, n->content, strlen(n->content));
        if (me == ms) { /* empty match: copy one char and move on */
            if (ms >= len) { pos = len + 1; break; }
            size_t k = 1;
            while (ms + k < len && ((unsigned char)s[ms + k] & 0xC0) == 0x80) k++;
            tbuf_put(out, s + ms, k);
            me = ms + k;
        }
        pos = me;
    }
    if (pos < len) tbuf_put(out, s + pos, len - pos);
    onig_region_free(r, 1);
    return 0;
}

int norm_apply(const TokNormalizer *n, const char *s, size_t len, TokBuf *out, GrpoErr *err) {
    out->n = 0;
    switch (n->kind) {
    case NORM_NFC: case NORM_NFD: case NORM_NFKC: case NORM_NFKD:
        if (unicode_form(n->kind, s, len, out, err)) return -1;
        break;
    case NORM_LOWERCASE: lowercase(s, len, out); break;
    case NORM_STRIP: strip(s, len, n->strip_left, n->strip_right, out); break;
    case NORM_PREPEND:
        if (len) tbuf_put(out, n->content, strlen(n->content));
        tbuf_put(out, s, len);
        break;
    case NORM_REPLACE:
        if (replace(n, s, len, out, err)) return -1;
        break;
    case NORM_SEQUENCE: {
        TokBuf a = {0}, b = {0};
        tbuf_put(&a, s, len);
        for (int i = 0; i < n->n_children; i++) {
            if (norm_apply(&n->children[i], a.p, a.n, &b, err)) {
                tbuf_free(&a); tbuf_free(&b);
                return -1;
            }
            TokBuf t = a; a = b; b = t;
        }
        tbuf_put(out, a.p, a.n);
        tbuf_free(&a); tbuf_free(&b);
        break;
    }
    }
    tbuf_reserve(out, 1);
    out->p[out->n] = 0;
    return 0;
}

void norm_free(TokNormalizer *n) {
    if (!n) return;
    for (int i = 0; i < n->n_children; i++) norm_free(&n->children[i]);
    free(n->children);
    free(n->pattern);
    free(n->content);
    if (n->regex) onig_free(n->regex);
}
