/* reward/reward_answer.c — exact_match: the final answer of a completion
 * against a dataset column.
 *
 * The answer is read the way math-reasoning recipes write it: the last
 * \boxed{...}, else the last <answer>...</answer>, else the last number. This
 * is string and number matching, not symbolic math (no math_verify: \frac{1}{2}
 * and 0.5 differ). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reward/reward_internal.h"

static char *dup_range(const char *s, size_t n) {
    char *out = xmalloc(n + 1);
    memcpy(out, s, n);
    out[n] = 0;
    return out;
}

/* Content of the last \boxed{...} whose braces balance, or NULL. */
static char *last_boxed(const char *s) {
    static const char key[] = "\\boxed{";
    char *best = NULL;
    for (const char *p = strstr(s, key); p; p = strstr(p + 1, key)) {
        const char *start = p + sizeof key - 1, *q = start;
        int depth = 1;
        for (; *q; q++) {
            if (*q == '{') depth++;
            else if (*q == '}' && --depth == 0) break;
        }
        if (depth != 0) continue; /* unbalanced: not an answer */
        free(best);
        best = dup_range(start, (size_t)(q - start));
    }
    return best;
}

/* Content of the last <answer>...</answer>, or NULL. */
static char *last_answer_tag(const char *s) {
    const char *open = NULL;
    for (const char *p = strstr(s, "<answer>"); p; p = strstr(p + 1, "<answer>")) {
        if (strstr(p, "</answer>")) open = p;
    }
    if (!open) return NULL;
    const char *start = open + 8, *end = strstr(start, "</answer>");
    return dup_range(start, (size_t)(end - start));
}

/* The last number: [-]digits with optional ',ddd' groups and '.digits'.
 * Thousands separators are removed; a '-' counts as a sign only when it does
 * not follow a letter or digit ("3-2" ends in 2, not -2). */
static char *last_number(const char *s) {
    const char *best = NULL, *best_end = NULL;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        if (!isdigit((unsigned char)s[i]) || (i > 0 && (isdigit((unsigned char)s[i - 1])))) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && isdigit((unsigned char)s[j])) j++;
        while (j + 3 < n + 0 && s[j] == ',' && isdigit((unsigned char)s[j + 1]) &&
               isdigit((unsigned char)s[j + 2]) && isdigit((unsigned char)s[j + 3]) &&
               (j + 4 >= n || !isdigit((unsigned char)s[j + 4])))
            j += 4;
        if (j + 1 < n && s[j] == '.' && isdigit((unsigned char)s[j + 1])) {
            j++;
            while (j < n && isdigit((unsigned char)s[j])) j++;
        }
        size_t start = i;
        if (i > 0 && s[i - 1] == '-' &&
            (i == 1 || !isalnum((unsigned char)s[i - 2])))
            start = i - 1;
        best = s + start;
        best_end = s + j;
        i = j;
    }
    if (!best) return NULL;
    char *out = xmalloc((size_t)(best_end - best) + 1), *o = out;
    for (const char *p = best; p < best_end; p++)
        if (*p != ',') *o++ = *p;
    *o = 0;
    return out;
}

char *reward_extract_answer(const char *completion) {
    char *a = last_boxed(completion);
    if (!a) a = last_answer_tag(completion);
    if (!a) a = last_number(completion);
    return a;
}

/* Normalises in place: trim, drop '$' and whitespace, strip trailing '.'. */
static void normalise(char *s) {
    char *o = s;
    for (char *p = s; *p; p++)
        if (*p != '$' && !isspace((unsigned char)*p)) *o++ = *p;
    *o = 0;
    while (o > s && o[-1] == '.') *--o = 0;
}

/* Reads s as a decimal number (commas between digits dropped); 1 on success. */
static int read_number(const char *s, double *v) {
    char buf[128];
    size_t n = 0;
    for (const char *p = s; *p; p++) {
        if (*p == ',') continue;
        if (n + 1 >= sizeof buf) return 0;
        buf[n++] = *p;
    }
    buf[n] = 0;
    /* strict decimal: [+-]digits[.digits] or [+-].digits, optional exponent */
    const char *p = buf;
    if (*p == '+' || *p == '-') p++;
    int digits = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) p++, digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
    }
    if (*p) return 0;
    *v = strtod(buf, NULL);
    return isfinite(*v);
}

int reward_answers_match(const char *got, const char *want) {
    char *a = xstrdup(got), *b = xstrdup(want);
    normalise(a);
    normalise(b);
    double x, y;
    int same;
    if (read_number(a, &x) && read_number(b, &y))
        same = x == y;
    else
        same = !strcmp(a, b);
    free(a);
    free(b);
    return same;
}

/* The gold answer of a column's text: a \boxed{} in it, else what follows the
 * last "####" (GSM8K's answer format), else the whole text. */
static char *gold_answer(const char *text) {
    char *a = last_boxed(text);
    if (a) return a;
    const char *hash = NULL;
    for (const char *p = strstr(text, "####"); p; p = strstr(p + 1, "####")) hash = p;
    return xstrdup(hash ? hash + 4 : text);
}

/* A column's value as the answer checks read it: a string or a number (0), null
 * (1: no value), or anything else (-1). */
static int column_kind(const json_t *v) {
    if (json_is_null(v)) return 1;
    return json_is_string(v) || json_is_integer(v) || json_is_real(v) ? 0 : -1;
}

int reward_set_check_row(const RewardSet *s, const json_t *row, const char *file, long line, GrpoErr *err) {
    for (int k = 0; k < s->n_funcs; k++) {
        const RewardFunc *f = s->funcs[k];
        json_t *v = f->column && row ? json_object_get(row, f->column) : NULL;
        if (!f->column || (v && column_kind(v) >= 0)) continue;
        return v ? err_set(err, "%s:%ld: column '%s' must be a string, a number or null, which reward '%s' reads",
                           file, line, f->column, f->name)
                 : err_set(err, "%s:%ld: no '%s' column, which reward '%s' reads", file, line, f->column, f->name);
    }
    return 0;
}

int reward_column_text(const RewardFunc *f, const RewardItem *it, int i, const char *column, char num[64],
                       const char **text, GrpoErr *err) {
    char where[512];
    json_t *v = it->row ? json_object_get(it->row, column) : NULL;
    if (v && column_kind(v) == 1) return 1;
    if (v && json_is_string(v)) {
        *text = json_string_value(v);
    } else if (v && json_is_integer(v)) {
        snprintf(num, 64, "%lld", (long long)json_integer_value(v));
        *text = num;
    } else if (v && json_is_real(v)) {
        snprintf(num, 64, "%.17g", json_real_value(v));
        *text = num;
    } else {
        reward_item_where(it, i, where, sizeof where);
        return v ? err_set(err, "reward '%s': %s: column '%s' must be a string or a number", f->name, where, column)
                 : err_set(err, "reward '%s': %s: the example has no column '%s'", f->name, where, column);
    }
    return 0;
}

static int exact_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    const char *column = f->state;
    for (int i = 0; i < b->n; i++) {
        const RewardItem *it = &b->items[i];
        char num[64];
        const char *want;
        int r = reward_column_text(f, it, i, column, num, &want, err);
        if (r < 0) return -1;
        if (r == 1) { /* no reference answer: no value, as TRL's None */
            out[i] = NAN;
            continue;
        }
        char *gold = gold_answer(want);
        char *got = reward_extract_answer(it->completion);
        out[i] = got && reward_answers_match(got, gold) ? 1.0 : 0.0;
        free(gold);
        free(got);
    }
    return 0;
}

static void exact_destroy(RewardFunc *f) { free(f->state); }

int reward_exact_match_init(RewardFunc *f, const char *column, GrpoErr *err) {
    f->state = xstrdup(column);
    f->column = f->state;
    f->compute = exact_compute;
    f->destroy = exact_destroy;
    return 0;
}
