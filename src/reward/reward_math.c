/* reward/reward_math.c — TRL's accuracy_reward and think_format_reward.
 *
 * accuracy_reward follows trl.rewards.accuracy_reward, which parses with
 * math_verify: the gold answer (the `solution` column) is read from its last
 * \boxed{}, else its last LaTeX environment ($..$, $$..$$, \(..\), \[..\]),
 * else the whole text; an empty one gives no value (TRL's None, so the example
 * is left out of the reward's mean). The completion's answer is LaTeX only and
 * anchored, as TRL configures math_verify (boxed first, no extraction without
 * an anchor, first match): the last \boxed{} (or \fbox{}), else a LaTeX
 * environment after "final answer ... is", else after "answer:", else after
 * "answer" (within 50 characters) — the rightmost match of the first kind
 * found. A bare number or an unanchored $x$ scores 0, as in TRL.
 *
 * Answers compare as numbers when both read as one — integers, decimals,
 * thousands separators, \frac{a}{b} (\dfrac, \tfrac, \frac12), a/b, a sign,
 * parentheses, a trailing \% or ^\circ, units in \text{}, "x = 3" — rounded to 6 decimals
 * (math_verify's float_rounding); otherwise as text with spaces, \left/\right,
 * spacing commands and $ removed. Not supported (math_verify would do them
 * symbolically): expressions with variables or roots (\sqrt{2} == 2^{1/2}),
 * sets, intervals, tuples in any order, matrices, and equivalences beyond
 * equal text. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "reward/reward_internal.h"

static char *dup_range(const char *s, size_t n) {
    char *out = xmalloc(n + 1);
    memcpy(out, s, n);
    out[n] = 0;
    return out;
}

/* ---- extraction --------------------------------------------------------------- */

/* The content of the last \boxed{...} or \fbox{...} whose braces balance, or NULL. */
static char *last_boxed(const char *s) {
    static const char *const keys[] = {"\\boxed{", "\\fbox{"};
    const char *best = NULL, *best_end = NULL;
    for (int k = 0; k < 2; k++)
        for (const char *p = strstr(s, keys[k]); p; p = strstr(p + 1, keys[k])) {
            const char *start = p + strlen(keys[k]), *q = start;
            int depth = 1;
            for (; *q; q++) {
                if (*q == '{') depth++;
                else if (*q == '}' && --depth == 0) break;
            }
            if (depth == 0 && (!best || q > best_end)) best = start, best_end = q;
        }
    return best ? dup_range(best, (size_t)(best_end - best)) : NULL;
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
    return best ? dup_range(best, (size_t)(best_end - best)) : NULL;
}

/* The completion's answer as TRL's accuracy_reward extracts it, or NULL. */
char *math_completion_answer(const char *s) {
    char *a = last_boxed(s);
    if (!a) a = anchored(s, "final answer", 1, 0);
    if (!a) a = anchored(s, "answer:", 0, 50);
    if (!a) a = anchored(s, "answer", 0, 50);
    return a;
}

/* The gold answer: its last \boxed{}, else its last LaTeX environment, else all of it. */
static char *gold_answer(const char *s) {
    char *a = last_boxed(s);
    if (a) return a;
    const char *best = NULL, *best_end = NULL;
    for (const char *p = s; *p; p++) {
        const char *st, *en, *af;
        if (latex_env_at(p, &st, &en, &af)) best = st, best_end = en, p = af - 1;
    }
    return best ? dup_range(best, (size_t)(best_end - best)) : xstrdup(s);
}

/* ---- normalisation and values ------------------------------------------------- */

/* Removes `what` everywhere in s (in place). */
static void remove_all(char *s, const char *what) {
    size_t n = strlen(what);
    char *o = s;
    for (char *p = s; *p;) {
        if (!strncmp(p, what, n)) p += n;
        else *o++ = *p++;
    }
    *o = 0;
}

/* Replaces every `from` with the no-longer `to` (in place). */
static void replace_all(char *s, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to);
    char *o = s;
    for (char *p = s; *p;) {
        if (!strncmp(p, from, nf)) memcpy(o, to, nt), o += nt, p += nf;
        else *o++ = *p++;
    }
    *o = 0;
}

/* Drops \text{...}-like groups (units, words) when keep_inner is 0, else keeps their content. */
static void strip_text_groups(char *s, int keep_inner) {
    static const char *const cmds[] = {"\\text{", "\\textbf{", "\\mathrm{", "\\mbox{", "\\textrm{"};
    for (int k = 0; k < 5; k++)
        for (char *p; (p = strstr(s, cmds[k]));) {
            char *start = p + strlen(cmds[k]), *q = start;
            int depth = 1;
            for (; *q; q++) {
                if (*q == '{') depth++;
                else if (*q == '}' && --depth == 0) break;
            }
            if (!*q) return; /* unbalanced: leave it */
            size_t inner = keep_inner ? (size_t)(q - start) : 0;
            memmove(p, start, inner);
            memmove(p + inner, q + 1, strlen(q + 1) + 1);
        }
}

/* The text of an answer, normalised for comparison (malloc'd). */
static char *normalise(const char *in) {
    char *s = xstrdup(in);
    static const char *const drop[] = {"\\left", "\\right", "\\displaystyle", "\\!", "\\,", "\\;", "\\:", "\\ ",
                                       "^{\\circ}", "^\\circ", "\\circ", "\\$", "$"};
    for (size_t k = 0; k < sizeof drop / sizeof drop[0]; k++) remove_all(s, drop[k]);
    replace_all(s, "\\dfrac", "\\frac");
    replace_all(s, "\\tfrac", "\\frac");
    char *o = s;
    for (char *p = s; *p; p++)
        if (!isspace((unsigned char)*p)) *o++ = *p;
    *o = 0;
    while (o > s && o[-1] == '.') *--o = 0;
    return s;
}

/* Numbers: [+-] then digits (with ',ddd' groups) [. digits], \frac{A}{B},
 * \frac12, or A/B; a whole-string parser over the normalised text. */
typedef struct {
    const char *p;
} Cursor;

static int read_plain_number(Cursor *c, double *v) {
    const char *p = c->p;
    char buf[96];
    size_t n = 0;
    int digits = 0;
    while (isdigit((unsigned char)*p) || (*p == ',' && digits && isdigit((unsigned char)p[1]) &&
                                         isdigit((unsigned char)p[2]) && isdigit((unsigned char)p[3]) &&
                                         !isdigit((unsigned char)p[4]))) {
        if (*p != ',') {
            if (n + 1 >= sizeof buf) return 0;
            buf[n++] = *p, digits++;
        }
        p++;
    }
    if (*p == '.' && isdigit((unsigned char)p[1])) {
        buf[n++] = *p++;
        while (isdigit((unsigned char)*p)) {
            if (n + 1 >= sizeof buf) return 0;
            buf[n++] = *p++, digits++;
        }
    }
    if (!digits) return 0;
    buf[n] = 0;
    *v = strtod(buf, NULL);
    c->p = p;
    return 1;
}

static int read_signed(Cursor *c, double *v);

/* {signed} or one digit (\frac12) */
static int read_group(Cursor *c, double *v) {
    if (*c->p == '{') {
        c->p++;
        if (!read_signed(c, v) || *c->p != '}') return 0;
        c->p++;
        return 1;
    }
    if (isdigit((unsigned char)*c->p)) {
        *v = *c->p++ - '0';
        return 1;
    }
    return 0;
}

static int read_term(Cursor *c, double *v) {
    if (!strncmp(c->p, "\\frac", 5)) {
        double a, b;
        c->p += 5;
        if (!read_group(c, &a) || !read_group(c, &b) || b == 0) return 0;
        *v = a / b;
        return 1;
    }
    if (*c->p == '{') return read_group(c, v);
    if (!read_plain_number(c, v)) return 0;
    if (*c->p == '/') {
        double b;
        c->p++;
        if (!read_plain_number(c, &b) || b == 0) return 0;
        *v /= b;
    }
    return 1;
}

static int read_signed(Cursor *c, double *v) {
    int neg = 0;
    while (*c->p == '-' || *c->p == '+') neg ^= *c->p++ == '-';
    if (!read_term(c, v)) return 0;
    if (neg) *v = -*v;
    return 1;
}

/* The normalised answer as a number (a trailing \% or %, units dropped, the
 * right side of "x=..."), or 0. */
static int as_number(const char *norm, double *v) {
    char *s = xstrdup(norm);
    strip_text_groups(s, 0);
    char *eq = strchr(s, '=');
    const char *body = s;
    if (eq && !strchr(eq + 1, '=')) { /* "x=3", "x_1=3": a variable on the left */
        const char *l = s;
        int ok = eq > s && isalpha((unsigned char)*l);
        for (l++; ok && l < eq; l++) ok = isalnum((unsigned char)*l) || *l == '_' || *l == '{' || *l == '}';
        if (ok) body = eq + 1;
    }
    size_t n = strlen(body);
    if (n >= 2 && body[0] == '(' && body[n - 1] == ')') body++, n -= 2; /* "(7)" */
    char *t = dup_range(body, n);
    if (n >= 2 && !strcmp(t + n - 2, "\\%")) t[n - 2] = 0;
    else if (n >= 1 && t[n - 1] == '%') t[n - 1] = 0;
    Cursor c = {t};
    int ok = *t && read_signed(&c, v) && !*c.p && isfinite(*v);
    free(t);
    free(s);
    return ok;
}

/* math_verify's float_rounding: equal when equal to 6 decimals. */
static int numbers_equal(double a, double b) {
    if (a == b) return 1;
    double scale = 1e6;
    return fabs(a) < 1e12 && fabs(b) < 1e12 && llround(a * scale) == llround(b * scale);
}

int math_answers_equal(const char *answer, const char *gold) {
    char *a = normalise(answer), *g = normalise(gold);
    double x, y;
    int same;
    if (as_number(a, &x) && as_number(g, &y)) {
        same = numbers_equal(x, y);
    } else {
        strip_text_groups(a, 1);
        strip_text_groups(g, 1);
        same = *a && !strcmp(a, g);
    }
    free(a);
    free(g);
    return same;
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
        char *gold = gold_answer(text), *gn = normalise(gold);
        if (!*gn) { /* nothing to compare with: no value (TRL: None) */
            out[i] = NAN;
        } else {
            char *got = math_completion_answer(it->completion);
            out[i] = got && math_answers_equal(got, gold) ? 1.0 : 0.0;
            free(got);
        }
        free(gn);
        free(gold);
    }
    return 0;
}

static void accuracy_destroy(RewardFunc *f) { free(f->state); }

int reward_accuracy_init(RewardFunc *f, const char *column, GrpoErr *err) {
    f->state = xstrdup(column && *column ? column : "solution");
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
    char *gn = normalise(gold);
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
