/* tokenizer/added.c — finding added tokens (special or not) inside text.
 *
 * HF matches added tokens before the model sees the text, leftmost first and
 * longest at that position. Tokens with normalized=false are matched in the raw
 * text, those with normalized=true in the normalized text (encode.c calls us
 * once per phase). lstrip/rstrip swallow the whitespace beside a match;
 * single_word only accepts a match not glued to word characters.
 * The candidates are indexed by first byte; a model has a few hundred added
 * tokens at most, so a short list per byte beats a full automaton here. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

static const TokAdded *sort_base;
static int by_len_desc(const void *a, const void *b) {
    const TokAdded *x = &sort_base[*(const int *)a], *y = &sort_base[*(const int *)b];
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return *(const int *)a - *(const int *)b;
}

void added_build_index(Tokenizer *tok) {
    for (int norm = 0; norm < 2; norm++)
        for (int c = 0; c < 256; c++) {
            int n = 0;
            for (int i = 0; i < tok->n_added; i++) {
                const TokAdded *a = &tok->added[i];
                if (a->len && !!a->normalized == norm && (unsigned char)a->content[0] == c) n++;
            }
            if (!n) { tok->cand[norm][c] = NULL; continue; }
            int *list = xmalloc((size_t)(n + 1) * sizeof *list);
            n = 0;
            for (int i = 0; i < tok->n_added; i++) {
                const TokAdded *a = &tok->added[i];
                if (a->len && !!a->normalized == norm && (unsigned char)a->content[0] == c) list[n++] = i;
            }
            sort_base = tok->added;
            qsort(list, (size_t)n, sizeof *list, by_len_desc);
            list[n] = -1;
            tok->cand[norm][c] = list;
        }
}

static int is_ws(uint32_t cp) {
    return cp == ' ' || (cp >= 9 && cp <= 13) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

static int is_word_cp(uint32_t cp) {
    if (cp == '_') return 1;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

/* code point ending right before s[at] (at > 0) */
static size_t prev_cp(const char *s, size_t at, uint32_t *cp) {
    size_t j = at - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
    if (tok_utf8_next((const unsigned char *)s + j, at - j, cp) <= 0) *cp = 0xFFFD;
    return j;
}

int added_find(const Tokenizer *tok, int normalized, const char *s, size_t len, size_t from,
               size_t *start, size_t *end) {
    int *const *cand = tok->cand[normalized ? 1 : 0];
    for (size_t i = from; i < len; i++) {
        const int *list = cand[(unsigned char)s[i]];
        if (!list) continue;
        for (; *list >= 0; list++) {
            const TokAdded *a = &tok->added[*list];
            if (a->len > len - i || memcmp(s + i, a->content, a->len)) continue;
            size_t ms = i, me = i + a->len;
            uint32_t cp;
            if (a->single_word) {
                if (ms > 0) { prev_cp(s, ms, &cp); if (is_word_cp(cp)) continue; }
                if (me < len && tok_utf8_next((const unsigned char *)s + me, len - me, &cp) > 0 &&
                    is_word_cp(cp))
                    continue;
            }
            if (a->lstrip)
                while (ms > from) {
                    size_t j = prev_cp(s, ms, &cp);
                    if (!is_ws(cp)) break;
                    ms = j;
                }
            if (a->rstrip)
                while (me < len) {
                    int k = tok_utf8_next((const unsigned char *)s + me, len - me, &cp);
                    if (k <= 0 || !is_ws(cp)) break;
                    me += (size_t)k;
                }
            *start = ms;
            *end = me;
            return *list;
        }
    }
    return -1;
}
