/* reward/reward_openr1.c — open-r1's reward functions by their open-r1 names
 * (open_r1/rewards.py, get_reward_funcs): accuracy, format, tag_count,
 * reasoning_steps and repetition_penalty, and the dispatch of every open-r1
 * name with its parameters (OpenR1Params, GRPOScriptArguments' defaults).
 *
 * Not here: the rewards that weigh correctness by length — cosine, length,
 * soft_overlong_punishment (reward_openr1_len.c) — and the math verifier that
 * accuracy uses (reward_math.c, TRL's accuracy_reward). Text is the decoded
 * completion, which open-r1 reads as completion[0]["content"]. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "reward/reward_internal.h"

void reward_openr1_defaults(OpenR1Params *p) {
    *p = (OpenR1Params){.cosine_min_value_wrong = 0.0,
                        .cosine_max_value_wrong = -0.5,
                        .cosine_min_value_correct = 0.5,
                        .cosine_max_value_correct = 1.0,
                        .cosine_max_len_chars = 1000,
                        .repetition_n_grams = 3,
                        .repetition_max_penalty = -1.0,
                        .max_completion_len_tokens = 16384,
                        .soft_punish_cache_tokens = 4096};
}

long reward_utf8_chars(const char *s) {
    long n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xC0) != 0x80;
    return n;
}

/* ---- format: open-r1's format_reward ---------------------------------------- */

/* re.match(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", text,
 * re.DOTALL | re.MULTILINE): the text starts with "<think>\n"; some later
 * "\n</think>\n<answer>\n" follows it, and after that a "\n</answer>" that ends
 * the text or a line ($ in MULTILINE mode). The lazy groups backtrack, so the
 * first separator is the one that leaves the most room for the closing tag. */
static int openr1_format_ok(const char *s) {
    static const char open[] = "<think>\n", mid[] = "\n</think>\n<answer>\n", close[] = "\n</answer>";
    if (strncmp(s, open, sizeof open - 1)) return 0;
    const char *m = strstr(s + sizeof open - 1, mid);
    if (!m) return 0;
    for (const char *c = strstr(m + sizeof mid - 1, close); c; c = strstr(c + 1, close)) {
        char after = c[sizeof close - 1];
        if (after == 0 || after == '\n') return 1;
    }
    return 0;
}

static int format_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    for (int i = 0; i < b->n; i++) out[i] = openr1_format_ok(b->items[i].completion) ? 1.0 : 0.0;
    return 0;
}

/* ---- tag_count: open-r1's tag_count_reward ---------------------------------- */

/* Python's str.count: occurrences that do not overlap, left to right. */
static int count_substr(const char *s, const char *sub) {
    int n = 0;
    size_t len = strlen(sub);
    for (const char *p = strstr(s, sub); p; p = strstr(p + len, sub)) n++;
    return n;
}

static int tag_count_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    static const char *const tags[4] = {"<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>"};
    for (int i = 0; i < b->n; i++) {
        double v = 0.0;
        for (int t = 0; t < 4; t++) v += count_substr(b->items[i].completion, tags[t]) == 1 ? 0.25 : 0.0;
        out[i] = v;
    }
    return 0;
}

/* ---- reasoning_steps: open-r1's reasoning_steps_reward ---------------------- */

/* The length of a run of decimal digits at s (\d of Python's re on str: any
 * Unicode Nd code point), in bytes; 0 when none. */
static size_t digits_at(const char *s) {
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    size_t n = 0;
    for (;;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(p + n, -1, &c);
        if (k <= 0 || c == 0 || utf8proc_category(c) != UTF8PROC_CATEGORY_ND) return n;
        n += (size_t)k;
    }
}

/* The length of a match of (Step \d+:|^\d+\.|\n-|\n\*|First,|Second,|Next,|Finally,)
 * at s (the first alternative that matches; ^ only at the text's start, no
 * MULTILINE), or 0. */
static size_t step_at(const char *s, int at_start) {
    static const char *const words[] = {"\n-", "\n*", "First,", "Second,", "Next,", "Finally,"};
    size_t d;
    if (!strncmp(s, "Step ", 5) && (d = digits_at(s + 5)) && s[5 + d] == ':') return 5 + d + 1;
    if (at_start && (d = digits_at(s)) && s[d] == '.') return d + 1;
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (!strncmp(s, words[w], strlen(words[w]))) return strlen(words[w]);
    return 0;
}

static int steps_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    for (int i = 0; i < b->n; i++) {
        const char *s = b->items[i].completion;
        int count = 0;
        for (const char *p = s; *p;) { /* re.findall: leftmost matches, none overlapping */
            size_t m = step_at(p, p == s);
            if (m) count++, p += m;
            else p++;
        }
        double v = count / 3.0; /* "magic number 3 to encourage 3 steps and more" */
        out[i] = v < 1.0 ? v : 1.0;
    }
    return 0;
}

/* ---- repetition_penalty: open-r1's get_repetition_penalty_reward (language "en") ---- */

typedef struct {
    int n_grams;
    double max_penalty;
} RepetitionState;

/* Python's str.isspace, which str.split() splits on. */
static int py_space(utf8proc_int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

typedef struct {
    const utf8proc_int32_t *cps; /* the lowered text */
    const int *start, *len;      /* [words] */
    const int *id;               /* [words] equal words, equal ids */
    int n_grams;
} NgramCtx;

static int word_cmp(const void *a, const void *b, void *ctx) {
    const NgramCtx *c = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (c->len[x] != c->len[y]) return c->len[x] < c->len[y] ? -1 : 1;
    return memcmp(c->cps + c->start[x], c->cps + c->start[y], sizeof(utf8proc_int32_t) * (size_t)c->len[x]);
}

static int ngram_cmp(const void *a, const void *b, void *ctx) {
    const NgramCtx *c = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    for (int k = 0; k < c->n_grams; k++)
        if (c->id[x + k] != c->id[y + k]) return c->id[x + k] < c->id[y + k] ? -1 : 1;
    return 0;
}

/* (1 - distinct n-grams / n-grams) * max_penalty over text.lower().split(); 0
 * for an empty text or fewer words than n. Lowercase is Unicode's simple
 * mapping (utf8proc); Python's lower() also applies its few special cases
 * (final sigma, dotted capital I), which splits no word differently. */
static double repetition_one(const char *s, int n, double max_penalty) {
    if (!*s) return 0.0;
    size_t bytes = strlen(s);
    utf8proc_int32_t *cps = xmalloc(sizeof *cps * (bytes + 1));
    int *start = xmalloc(sizeof(int) * (bytes + 1)), *len = xmalloc(sizeof(int) * (bytes + 1));
    int n_cps = 0, n_words = 0, in_word = 0;
    for (const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s; *p;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(p, -1, &c);
        if (k <= 0) c = 0xFFFD, k = 1; /* invalid UTF-8: not in decoded text */
        p += k;
        if (py_space(c)) {
            in_word = 0;
            continue;
        }
        if (!in_word) start[n_words] = n_cps, len[n_words] = 0, n_words++, in_word = 1;
        cps[n_cps++] = utf8proc_tolower(c);
        len[n_words - 1]++;
    }
    double reward = 0.0;
    if (n_words >= n) {
        int n_ngrams = n_words - n + 1, *order = xmalloc(sizeof(int) * (size_t)n_words);
        int *id = xmalloc(sizeof(int) * (size_t)n_words);
        NgramCtx ctx = {cps, start, len, id, n};
        for (int w = 0; w < n_words; w++) order[w] = w;
        qsort_r(order, (size_t)n_words, sizeof(int), word_cmp, &ctx);
        for (int w = 0, next = 0; w < n_words; w++) /* equal words get one id */
            id[order[w]] = w > 0 && !word_cmp(&order[w - 1], &order[w], &ctx) ? id[order[w - 1]] : next++;
        for (int g = 0; g < n_ngrams; g++) order[g] = g;
        qsort_r(order, (size_t)n_ngrams, sizeof(int), ngram_cmp, &ctx);
        int distinct = 0;
        for (int g = 0; g < n_ngrams; g++) distinct += g == 0 || ngram_cmp(&order[g - 1], &order[g], &ctx) != 0;
        double scaling = 1.0 - (double)distinct / n_ngrams;
        reward = scaling * max_penalty;
        free(order), free(id);
    }
    free(cps), free(start), free(len);
    return reward;
}

static int repetition_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    const RepetitionState *st = f->state;
    for (int i = 0; i < b->n; i++) out[i] = repetition_one(b->items[i].completion, st->n_grams, st->max_penalty);
    return 0;
}

static void free_state(RewardFunc *f) { free(f->state); }

/* ---- the open-r1 names ------------------------------------------------------ */

static const struct {
    const char *kind, *log_name;
} openr1_names[] = {
    {"accuracy", "accuracy_reward"},
    {"format", "format_reward"},
    {"tag_count", "tag_count_reward"},
    {"reasoning_steps", "reasoning_steps_reward"},
    {"cosine", "cosine_scaled_reward"},
    {"repetition_penalty", "repetition_penalty_reward"},
    {"length", "len_reward"},
    {"soft_overlong_punishment", "soft_overlong_punishment_reward"},
};
#define N_OPENR1 (int)(sizeof openr1_names / sizeof openr1_names[0])

const char *reward_openr1_log_name(const char *kind) {
    for (int i = 0; i < N_OPENR1; i++)
        if (!strcmp(kind, openr1_names[i].kind)) return openr1_names[i].log_name;
    return NULL;
}

int reward_openr1_claims(const char *kind, const char *arg) {
    if (!reward_openr1_log_name(kind)) return 0;
    /* format:REGEX and length:TARGET keep their own meaning */
    return !(arg && (!strcmp(kind, "format") || !strcmp(kind, "length")));
}

int reward_openr1_init(RewardFunc *f, const char *kind, const char *arg, const char *spec, const OpenR1Params *p,
                       GrpoErr *err) {
    OpenR1Params defaults;
    if (!p) reward_openr1_defaults(&defaults), p = &defaults;
    if (!strcmp(kind, "accuracy")) { /* open-r1's accuracy_reward reads `solution`; COLUMN names another */
        if (arg && !*arg) return err_set(err, "reward '%s': expected accuracy or accuracy:COLUMN", spec);
        return reward_accuracy_init(f, arg, err);
    }
    if (arg) return err_set(err, "reward '%s': %s takes no argument (its parameters are options: docs/rewards.md)",
                            spec, kind);
    if (!strcmp(kind, "format")) f->compute = format_compute;
    else if (!strcmp(kind, "tag_count")) f->compute = tag_count_compute;
    else if (!strcmp(kind, "reasoning_steps")) f->compute = steps_compute;
    else if (!strcmp(kind, "cosine")) return reward_openr1_cosine_init(f, p, err);
    else if (!strcmp(kind, "length")) return reward_openr1_len_init(f, err);
    else if (!strcmp(kind, "soft_overlong_punishment")) return reward_openr1_overlong_init(f, p, err);
    else if (!strcmp(kind, "repetition_penalty")) {
        /* open-r1 raises ValueError for these; the option ranges refuse them first */
        if (p->repetition_n_grams < 1)
            return err_set(err, "reward '%s': repetition_n_grams must be >= 1, got %d", spec, p->repetition_n_grams);
        if (!(p->repetition_max_penalty <= 0))
            return err_set(err, "reward '%s': repetition_max_penalty %g should not be positive", spec,
                           p->repetition_max_penalty);
        RepetitionState *st = xmalloc(sizeof *st);
        *st = (RepetitionState){p->repetition_n_grams, p->repetition_max_penalty};
        f->state = st;
        f->compute = repetition_compute;
        f->destroy = free_state;
    } else {
        return err_set(err, "reward '%s': '%s' is not an open-r1 reward", spec, kind);
    }
    return 0;
}
