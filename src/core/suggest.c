/* core/suggest.c — did-you-mean over known names (suggest.h). Plain edit distance
 * alone misreads how people misname options: they shorten words ("lr",
 * "grad_accum"), drop one ("per_device_batch_size") or swap in a synonym, and a
 * short distance can land on an unrelated name ("lora_rank" is two edits from
 * "local_rank"). So names are compared word by word first, the whole name by edit
 * distance as well, and the better of the two counts. Not here: where the
 * candidates come from or how a suggestion is worded (cli/). */
#include "core/suggest.h"

#include <ctype.h>
#include <string.h>

enum { MAX_WORDS = 16, MAX_WORD = 64, MAX_NAME = 128 };

typedef struct {
    int n;
    char w[MAX_WORDS][MAX_WORD];
} Words;

/* Common shorthands, read out before comparing: a whole name, or one word. */
static const char *const shorthand[][2] = {
    {"batch_size", "per_device_train_batch_size"}, /* the batch size a person sets */
    {"bs", "per_device_train_batch_size"},
    {"lr", "learning_rate"},
    {"bs", "batch_size"},
    {"wd", "weight_decay"},
    {"ckpt", "checkpoint"},
    {"max_new_tokens", "max_completion_length"},
    {"num_return_sequences", "num_generations"},
};
enum { N_SHORTHAND = sizeof shorthand / sizeof shorthand[0] };

/* Appends the words of s (split at '_' and '-', lowercased) to out. */
static void split(const char *s, Words *out) {
    while (*s && out->n < MAX_WORDS) {
        while (*s == '_' || *s == '-') s++;
        size_t len = strcspn(s, "_-");
        if (!len) break;
        if (len < MAX_WORD) {
            for (size_t i = 0; i < len; i++) out->w[out->n][i] = (char)tolower((unsigned char)s[i]);
            out->w[out->n++][len] = 0;
        }
        s += len;
    }
}

/* The words of s with its shorthands read out. */
static void split_expanded(const char *s, Words *out) {
    out->n = 0;
    for (int i = 0; i < N_SHORTHAND; i++)
        if (!strcmp(s, shorthand[i][0])) {
            split(shorthand[i][1], out);
            return;
        }
    Words raw = {0};
    split(s, &raw);
    for (int k = 0; k < raw.n; k++) {
        int done = 0;
        for (int i = 0; i < N_SHORTHAND && !done; i++)
            if (!strcmp(raw.w[k], shorthand[i][0])) split(shorthand[i][1], out), done = 1;
        if (!done && out->n < MAX_WORDS) memcpy(out->w[out->n++], raw.w[k], MAX_WORD);
    }
}

/* Optimal string alignment distance (adjacent transpositions count 1), or
 * limit + 1 when it is more than limit: only the band |i - j| <= limit of the
 * table is filled, and a row whose band is all over limit ends it. */
static int edit_distance(const char *a, const char *b, int limit) {
    int la = (int)strlen(a), lb = (int)strlen(b), far = limit + 1;
    if (la > MAX_NAME || lb > MAX_NAME || la - lb > limit || lb - la > limit) return far;
    int rows[3][MAX_NAME + 1], *pp = rows[0], *p = rows[1], *c = rows[2]; /* rows i-2, i-1, i */
    for (int j = 0; j <= lb; j++) p[j] = j <= limit ? j : far, pp[j] = far;
    for (int i = 1; i <= la; i++) {
        int lo = i - limit > 1 ? i - limit : 1, hi = i + limit < lb ? i + limit : lb, row_min = far;
        for (int j = 0; j <= lb; j++) c[j] = far;
        if (i <= limit) c[0] = i;
        for (int j = lo; j <= hi; j++) {
            int v = p[j] + 1;
            if (c[j - 1] + 1 < v) v = c[j - 1] + 1;
            if (p[j - 1] + (a[i - 1] != b[j - 1]) < v) v = p[j - 1] + (a[i - 1] != b[j - 1]);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < v) v = pp[j - 2] + 1;
            c[j] = v < far ? v : far;
            if (c[j] < row_min) row_min = c[j];
        }
        if (row_min >= far) return far;
        int *t = pp;
        pp = p, p = c, c = t;
    }
    return p[lb];
}

/* How alike a word the person wrote (q) and a word of a candidate (c) are. */
static double word_score(const char *q, const char *c) {
    size_t lq = strlen(q), lc = strlen(c);
    if (!strcmp(q, c)) return 1;
    size_t shorter = lq < lc ? lq : lc;
    if (!strncmp(q, c, shorter)) /* one a prefix of the other */
        return shorter >= 3 ? 0.8 : lc < lq ? 0.6 /* the candidate abbreviates: lora_r */ : 0.4;
    if (shorter >= 4 && edit_distance(q, c, 1) <= 1) return 0.8;
    if (shorter >= 8 && edit_distance(q, c, 2) <= 2) return 0.6;
    if (lq <= 4 && lq >= 2 && lq < lc && q[0] == c[0]) { /* letters in order: "fn" for "funcs" */
        size_t j = 1;
        for (size_t i = 1; i < lc && j < lq; i++) j += c[i] == q[j];
        if (j == lq) return 0.6;
    }
    return 0;
}

/* Words matched one to one, each of q to its most alike unused word of c: the
 * share of q's words found weighs 0.7, the share of c's 0.3. */
static double words_score(const Words *q, const Words *c) {
    if (!q->n || !c->n) return 0;
    int used[MAX_WORDS] = {0};
    double matched = 0;
    for (int i = 0; i < q->n; i++) {
        double best = 0;
        int pick = -1;
        for (int j = 0; j < c->n; j++) {
            double s = used[j] ? 0 : word_score(q->w[i], c->w[j]);
            if (s > best) best = s, pick = j;
        }
        if (pick >= 0) used[pick] = 1, matched += best;
    }
    return 0.7 * matched / q->n + 0.3 * matched / c->n;
}

double suggest_score(const char *name, const char *cand) {
    char lower[MAX_NAME + 1];
    size_t len = strlen(name);
    if (len > MAX_NAME || strlen(cand) > MAX_NAME) return 0;
    for (size_t i = 0; i <= len; i++) lower[i] = (char)tolower((unsigned char)name[i]);
    Words q = {0}, qx, c = {0};
    split(lower, &q);
    split_expanded(lower, &qx);
    split(cand, &c);
    double s = words_score(&q, &c), sx = words_score(&qx, &c);
    if (sx > s) s = sx;
    /* the whole name within a few typos: 1.5 points of score per edit per letter */
    int limit = len < 5 ? 1 : len < 12 ? 2 : 3, d = edit_distance(lower, cand, limit);
    size_t longer = len > strlen(cand) ? len : strlen(cand);
    double se = d <= limit ? 1 - 1.5 * d / (double)longer : 0;
    return se > s ? se : s;
}

const char *suggest_name(const char *name, const char *const *cands, int n) {
    double best = 0.5;
    const char *pick = NULL;
    for (int i = 0; i < n; i++) {
        double s = suggest_score(name, cands[i]);
        if (s > best) best = s, pick = cands[i];
    }
    return pick;
}
