/* reward/reward_math.c — TRL's accuracy_reward and think_format_reward.
 *
 * accuracy_reward follows trl.rewards.accuracy_reward, which parses with
 * math_verify: the gold answer (the `solution` column) is read from its last
 * \boxed{}, else its last LaTeX environment ($..$, $$..$$, \(..\), \[..\]),
 * else the whole text when it is math ("6", "63/400"), else its last number;
 * prose with none, or an empty solution, gives no value (TRL's None, so the
 * example is left out of the reward's mean). The completion's answer is LaTeX only and
 * anchored, as TRL configures math_verify (boxed first, no extraction without
 * an anchor, first match): the last \boxed{} (or \fbox{}), else a LaTeX
 * environment after "final answer ... is", else after "answer:", else after
 * "answer" (within 50 characters) — the rightmost match of the first kind
 * found. A bare number or an unanchored $x$ scores 0, as in TRL.
 *
 * Both answers are then read into values and compared by math_verify's rules
 * (math_expr.h: math_parse.c, math_value.c), or as equal normalised text,
 * as math_verify also compares the extracted strings. What is read, the
 * method and the differences from math_verify: docs/rewards.md. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "reward/math_expr.h"
#include "reward/reward_internal.h"

static char *dup_range(const char *s, size_t n) {
    char *out = xmalloc(n + 1);
    memcpy(out, s, n);
    out[n] = 0;
    return out;
}

/* ---- extraction --------------------------------------------------------------- */

/* A \boxed{...} or \fbox{...} at p with balanced braces: its command's start,
 * its content [start, end) without surrounding blanks. */
typedef struct {
    const char *at, *start, *end, *close;
} Boxed;

static int boxed_at(const char *p, Boxed *b) {
    size_t n = !strncmp(p, "\\boxed", 6) ? 6 : !strncmp(p, "\\fbox", 5) ? 5 : 0;
    if (!n) return 0;
    const char *q = p + n;
    while (isspace((unsigned char)*q)) q++;
    if (*q != '{') return 0;
    const char *start = q + 1;
    int depth = 1;
    for (q = start; *q; q++) {
        if (*q == '{') depth++;
        else if (*q == '}' && --depth == 0) break;
    }
    if (depth) return 0;
    b->at = p, b->close = q;
    while (start < q && isspace((unsigned char)*start)) start++;
    while (q > start && isspace((unsigned char)q[-1])) q--;
    b->start = start, b->end = q;
    return 1;
}

/* Whether text [p, e) holds latex2sympy's separator: the word and/or, ',' or ';'. */
static int has_separator(const char *p, const char *e) {
    for (const char *q = p; q < e; q++) {
        if (*q == ',' || *q == ';') return 1;
        size_t n = e - q >= 3 && !strncmp(q, "and", 3) ? 3 : e - q >= 2 && !strncmp(q, "or", 2) ? 2 : 0;
        if (n && (q == p || !isalnum((unsigned char)q[-1])) && (q + n == e || !isalnum((unsigned char)q[n])))
            return 1;
    }
    return 0;
}

/* Whether a percent marker follows p (blanks, then %, \%, percent,
 * percentage or pct), as math_verify's LaTeX patterns allow one after an
 * environment: "$28$ %" is 28%. */
static int percent_after(const char *p) {
    while (isspace((unsigned char)*p)) p++;
    return *p == '%' || !strncmp(p, "\\%", 2) || !strncasecmp(p, "percent", 7) || !strncasecmp(p, "pct", 3);
}

/* A malloc'd answer with "\%" appended when the text after it marks a percent. */
static char *with_percent(char *answer, const char *after) {
    if (!answer || !percent_after(after)) return answer;
    size_t n = strlen(answer);
    char *out = xmalloc(n + 3);
    memcpy(out, answer, n);
    memcpy(out + n, "\\%", 3);
    free(answer);
    return out;
}

/* The closing delimiter of a LaTeX environment at p ($$, $, \], \)), skipped with the blanks before it. */
static const char *after_env_close(const char *p) {
    while (isspace((unsigned char)*p)) p++;
    if (!strncmp(p, "$$", 2) || !strncmp(p, "\\]", 2) || !strncmp(p, "\\)", 2)) return p + 2;
    if (*p == '$') return p + 1;
    return NULL;
}

/* The boxed answer as math_verify extracts it (latex2sympy2_extended's
 * extract_boxed_content, mode "last"): the content of the last \boxed{} (or
 * \fbox{}) with balanced braces, and of the boxes before it as long as each is
 * close to the next kept one — fewer than 10 characters between them, or fewer
 * than 70 holding "and", "or", ',' or ';' when its content differs — joined by
 * commas ("\boxed{1} and \boxed{2}" is "1,2"; a repeat next to itself once).
 * NULL when there is no balanced box. */
static char *last_boxed(const char *s) {
    enum { MAX_BOXES = 64 };
    Boxed boxes[MAX_BOXES];
    int n = 0;
    for (const char *p = strchr(s, '\\'); p; p = strchr(p + 1, '\\')) {
        Boxed b;
        if (!boxed_at(p, &b)) continue;
        if (n == MAX_BOXES) memmove(boxes, boxes + 1, (MAX_BOXES - 1) * sizeof *boxes), n--;
        boxes[n++] = b;
    }
    if (!n) return NULL;
    /* the rightmost box starts last; walk left over the ones it accepts */
    int keep[MAX_BOXES], kept = 0, next = n - 1;
    keep[kept++] = next;
    for (int i = n - 2; i >= 0; i--) {
        const Boxed *b = &boxes[i], *after = &boxes[next], *prev = &boxes[keep[kept - 1]];
        if (b->close >= after->at) break; /* a box around the later one ends the walk */
        size_t gap = (size_t)(after->at - b->close - 1);
        size_t len = (size_t)(b->end - b->start), prev_len = (size_t)(prev->end - prev->start);
        int same = len == prev_len && !strncmp(b->start, prev->start, len);
        if (!(gap < 10 || (!same && gap < 70 && has_separator(b->close + 1, after->at)))) break;
        if (!same) keep[kept++] = i;
        next = i;
    }
    size_t total = 0;
    for (int k = 0; k < kept; k++) total += (size_t)(boxes[keep[k]].end - boxes[keep[k]].start) + 1;
    char *out = xmalloc(total + 1), *o = out;
    for (int k = kept - 1; k >= 0; k--) {
        const Boxed *b = &boxes[keep[k]];
        memcpy(o, b->start, (size_t)(b->end - b->start));
        o += b->end - b->start;
        if (k) *o++ = ',';
    }
    *o = 0;
    /* "$\boxed{28}$ pct": a percent after the environment around the box */
    const char *after = after_env_close(boxes[n - 1].close + 1);
    return after ? with_percent(out, after) : out;
}

/* A LaTeX environment starting at p ($$..$$, $..$, \[..\], \(..\)): its content
 * [*start, *end) and where it closes (*after); 0 if there is none at p. */
static int latex_env_at(const char *p, const char **start, const char **end, const char **after) {
    const char *open = NULL, *close = NULL;
    if (!strncmp(p, "$$", 2)) open = "$$", close = "$$";
    else if (*p == '$') open = "$", close = "$";
    else if (!strncmp(p, "\\[", 2)) open = "\\[", close = "\\]";
    else if (!strncmp(p, "\\(", 2)) open = "\\(", close = "\\)";
    if (!open) return 0;
    const char *c = p + strlen(open), *e = strstr(c, close);
    if (!e || e == c) return 0;
    *start = c, *end = e, *after = e + strlen(close);
    return 1;
}

/* The rightmost answer after an anchor: for each case-insensitive occurrence of
 * `anchor`, then (when `is_word`) " is" within 100 characters, an optional
 * ':' and blanks, or (when window > 0) any text of up to `window` characters,
 * a LaTeX environment. */
static char *anchored(const char *s, const char *anchor, int is_word, int window) {
    const char *best = NULL, *best_end = NULL, *best_after = NULL;
    size_t alen = strlen(anchor);
    for (const char *p = s; (p = strcasestr(p, anchor)); p++) {
        const char *q = p + alen;
        if (is_word) {
            const char *is = NULL;
            for (const char *r = q; *r && r - q <= 100 && !is; r++)
                if (isspace((unsigned char)*r) && !strncasecmp(r + 1, "is", 2)) is = r + 3;
            if (!is) continue;
            q = is;
            if (*q == ':') q++;
            while (isspace((unsigned char)*q)) q++;
        }
        for (int k = 0; k <= window && q[k]; k++) {
            const char *st, *en, *af;
            if (latex_env_at(q + k, &st, &en, &af)) {
                if (!best || af > best_after) best = st, best_end = en, best_after = af;
                break;
            }
            if (!window) break;
        }
    }
    return best ? with_percent(dup_range(best, (size_t)(best_end - best)), best_after) : NULL;
}

/* The completion's answer as TRL's accuracy_reward extracts it, or NULL. */
char *math_completion_answer(const char *s) {
    char *a = last_boxed(s);
    if (!a) a = anchored(s, "final answer", 1, 0);
    if (!a) a = anchored(s, "answer:", 0, 50);
    if (!a) a = anchored(s, "answer", 0, 50);
    return a;
}

/* The gold answer's text: its last \boxed{}, else its last LaTeX environment,
 * else NULL (the whole text is read by gold_value). */
static char *gold_latex(const char *s) {
    char *a = last_boxed(s);
    if (a) return a;
    const char *best = NULL, *best_end = NULL;
    for (const char *p = s; *p; p++) {
        const char *st, *en, *af;
        if (latex_env_at(p, &st, &en, &af)) best = st, best_end = en, p = af - 1;
    }
    return best ? dup_range(best, (size_t)(best_end - best)) : NULL;
}

/* Whether plain text (no LaTeX around it) is prose: a word of two or more
 * letters that is not a command. math_verify reads only numbers and
 * expressions out of such text, not the words. */
static int is_prose(const char *s) {
    for (const char *p = s; *p;) {
        if (*p == '\\') {
            p++;
            while (isalpha((unsigned char)*p)) p++;
            continue;
        }
        if (isalpha((unsigned char)*p) && isalpha((unsigned char)p[1])) return 1;
        p++;
    }
    return 0;
}

/* The last number in prose ("The answer is 42." → "42"), or NULL. */
static char *last_number(const char *s) {
    const char *best = NULL, *best_end = NULL;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p)) continue;
        const char *st = p;
        if (st > s && st[-1] == '-') st--;
        while (isdigit((unsigned char)*p) || ((*p == '.' || *p == ',') && isdigit((unsigned char)p[1]))) p++;
        best = st, best_end = p;
        if (!*p) break;
    }
    return best ? dup_range(best, (size_t)(best_end - best)) : NULL;
}

/* The gold answer as math_verify's parse(solution) finds it: text to compare
 * (*text, malloc'd, normalised) and its value (*value, NULL when it does not
 * read as one). 0 when there is no answer at all (TRL's None). */
static int gold_answer(MathArena *arena, const char *solution, char **text, const MathValue **value) {
    char *latex = gold_latex(solution);
    if (!latex) {
        latex = is_prose(solution) ? last_number(solution) : xstrdup(solution);
        if (latex && !math_parse(arena, latex) && !is_prose(solution)) {
            char *num = last_number(solution);
            free(latex);
            latex = num;
        }
    }
    if (!latex) return 0;
    *text = math_normalise(latex);
    *value = math_parse(arena, latex);
    free(latex);
    if (!**text) {
        free(*text);
        return 0;
    }
    return 1;
}

/* math_verify's verify over its two readings of each side: the values, or the
 * normalised texts when they are equal. */
static int answer_matches(MathArena *arena, const char *answer, const char *gold_text, const MathValue *gold) {
    char *a = math_normalise(answer);
    int same = *a && !strcmp(a, gold_text);
    free(a);
    if (!same && gold) {
        const MathValue *v = math_parse(arena, answer);
        same = v && math_values_equal(gold, v);
    }
    return same;
}

int math_answers_equal(const char *answer, const char *gold) {
    MathArena *arena = math_arena_new();
    char *g = math_normalise(gold);
    int same = *g && answer_matches(arena, answer, g, math_parse(arena, gold));
    free(g);
    math_arena_free(arena);
    return same;
}

int reward_math_correct(const char *completion, const char *solution) {
    MathArena *arena = math_arena_new();
    char *gold_text = NULL;
    const MathValue *gold = NULL;
    int r = -1;
    if (gold_answer(arena, solution, &gold_text, &gold)) {
        char *got = math_completion_answer(completion);
        r = got && answer_matches(arena, got, gold_text, gold);
        free(got);
        free(gold_text);
    }
    math_arena_free(arena);
    return r;
}

/* ---- the reward functions ----------------------------------------------------- */

static int accuracy_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    const char *column = f->state;
    for (int i = 0; i < b->n; i++) {
        const RewardItem *it = &b->items[i];
        char num[64];
        const char *text;
        int r = reward_column_text(f, it, i, column, num, &text, err);
        if (r < 0) return -1;
        if (r == 1) { /* a null solution: no value (TRL's None) */
            out[i] = NAN;
            continue;
        }
        int r2 = reward_math_correct(it->completion, text);
        out[i] = r2 < 0 ? NAN : r2; /* no gold answer: no value (TRL's None) */
    }
    return 0;
}

static void accuracy_destroy(RewardFunc *f) { free(f->state); }

int reward_accuracy_init(RewardFunc *f, const char *column, GrpoErr *err) {
    f->state = xstrdup(column && *column ? column : "solution");
    f->column = f->state;
    f->compute = accuracy_compute;
    f->destroy = accuracy_destroy;
    return 0;
}

/* TRL's think_format_reward: re.match(r"^<think>(?!.*<think>)(.*?)</think>.*$",
 * text, DOTALL | MULTILINE) — the text starts with <think>, no other <think>
 * follows, and a </think> does. */
static int think_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    for (int i = 0; i < b->n; i++) {
        const char *s = b->items[i].completion;
        out[i] = !strncmp(s, "<think>", 7) && !strstr(s + 7, "<think>") && strstr(s + 7, "</think>") ? 1.0 : 0.0;
    }
    return 0;
}

int reward_think_format_init(RewardFunc *f, GrpoErr *err) {
    f->compute = think_compute;
    return 0;
}

/* ---- open-r1's cosine and len rewards: the gold read as LaTeX only ------------ */

/* The last bare -?\frac{N}{N} (N: digits, optionally [.,]digits) in s, with where
 * it ends (*after), or NULL: math_verify's plain-LaTeX fraction pattern. */
static char *last_simple_frac(const char *s, const char **after) {
    const char *best = NULL, *best_end = NULL;
    for (const char *p = strstr(s, "\\frac{"); p; p = strstr(p + 1, "\\frac{")) {
        const char *q = p + 6;
        for (int part = 0; part < 2; part++) {
            const char *d = q;
            while (isdigit((unsigned char)*q)) q++;
            if ((*q == '.' || *q == ',') && isdigit((unsigned char)q[1]))
                for (q++; isdigit((unsigned char)*q); q++) {}
            if (q == d || *q != '}' || (part == 0 && q[1] != '{')) { q = NULL; break; }
            q += part == 0 ? 2 : 1;
        }
        if (q) best = p > s && p[-1] == '-' ? p - 1 : p, best_end = q;
    }
    if (after) *after = best_end;
    return best ? dup_range(best, (size_t)(best_end - best)) : NULL;
}

int math_openr1_correct(const char *completion, const char *gold_text) {
    char *gold = last_boxed(gold_text);
    if (!gold) { /* the rightmost of the plain LaTeX forms */
        const char *env = NULL, *env_end = NULL, *env_after = NULL, *frac_after = NULL;
        for (const char *p = gold_text; *p; p++) {
            const char *st, *en, *af;
            if (latex_env_at(p, &st, &en, &af)) env = st, env_end = en, env_after = af, p = af - 1;
        }
        char *frac = last_simple_frac(gold_text, &frac_after);
        if (frac && (!env || frac_after > env_after)) gold = frac;
        else {
            free(frac);
            gold = env ? dup_range(env, (size_t)(env_end - env)) : NULL;
        }
    }
    if (!gold) return -1;
    char *gn = math_normalise(gold);
    int empty = !*gn;
    free(gn);
    if (empty) {
        free(gold);
        return -1;
    }
    char *got = math_completion_answer(completion);
    int ok = got && math_answers_equal(got, gold);
    free(got);
    free(gold);
    return ok;
}
