/* reward/math_normalise.c — the answer text made ready for math_parse.c, as
 * latex2sympy2_extended's normalize_latex does it for math_verify (basic
 * LaTeX and units on): spacing commands, $, \left/\right and \displaystyle
 * removed, \dfrac and friends read as \frac, \mathrm and friends as \text,
 * "and"/"or" and {,} as commas, percent words as %, a trailing unit dropped.
 * It does not parse: a text it cannot make sense of goes through unchanged
 * and fails in the parser. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "reward/math_expr.h"

static void replace_all(char **s, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to), count = 0;
    for (const char *p = strstr(*s, from); p; p = strstr(p + nf, from)) count++;
    if (!count) return;
    char *out = xmalloc(strlen(*s) + count * nt + 1), *o = out;
    for (const char *p = *s; *p;) {
        if (!strncmp(p, from, nf)) memcpy(o, to, nt), o += nt, p += nf;
        else *o++ = *p++;
    }
    *o = 0;
    free(*s);
    *s = out;
}

/* Drops a trailing \text{...} (with a ^2-like power) when something precedes it: a unit. */
static void drop_trailing_text_unit(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    char *end = s + n;
    if (n >= 2 && end[-2] == '^' && isdigit((unsigned char)end[-1])) end -= 2;
    else if (n >= 4 && !strncmp(end - 4, "{^", 2) && isdigit((unsigned char)end[-2]) && end[-1] == '}') end -= 4;
    if (end == s || end[-1] != '}') return;
    int depth = 0;
    char *q = end - 1;
    for (; q >= s; q--) {
        if (*q == '}') depth++;
        else if (*q == '{' && --depth == 0) break;
    }
    if (q < s || q - s < 5 || strncmp(q - 5, "\\text", 5)) return;
    char *start = q - 5;
    for (const char *r = s; r < start; r++)
        if (!isspace((unsigned char)*r)) {
            *start = 0;
            return;
        }
}

/* A trailing unit word after a number, a brace or a blank, with an optional
 * plural s/es: latex2sympy's one-word units (its few multi-word ones aside). */
static void drop_trailing_unit_word(char *s) {
    static const char *const units[] = {"integerpoint", "feet", "sue", "digit", "pound", "meal", "edge", "student",
                                        "multiple", "east", "degree", "mph", "kmph", "ft", "deg", "mile", "monkey",
                                        "prime", "ratio", "rd", "o", "gm", "metre", "meter", "inch"};
    for (int round = 0; round < 2; round++) {
        size_t n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
        size_t w = n;
        while (w && isalpha((unsigned char)s[w - 1])) w--;
        if (w == n || w == 0) return;
        if (s[w - 1] == '\\') return;
        size_t len = n - w;
        int hit = 0;
        for (size_t k = 0; k < sizeof units / sizeof units[0] && !hit; k++) {
            size_t u = strlen(units[k]);
            if (len >= u && !strncmp(s + w, units[k], u) &&
                (len == u || !strcmp(s + w + u, "s") || !strcmp(s + w + u, "es")))
                hit = 1;
        }
        size_t b = w;
        while (b && isspace((unsigned char)s[b - 1])) b--;
        if (!hit || !b || !(isdigit((unsigned char)s[b - 1]) || s[b - 1] == '}' || b < w)) return;
        if (!b) return;
        s[b] = 0;
    }
}

/* latex2sympy's "\!\s*" and "\s*{\s*,\s*}" rules: 11,\! 111 and 14 {, }916 are numbers. */
static void squeeze_commas(char *s) {
    char *o = s;
    for (char *p = s; *p;) {
        if (p[0] == '\\' && p[1] == '!') {
            p += 2;
            while (isspace((unsigned char)*p)) p++;
            continue;
        }
        char *q = p;
        while (isspace((unsigned char)*q)) q++;
        if (*q == '{') {
            char *r = q + 1;
            while (isspace((unsigned char)*r)) r++;
            if (*r == ',') {
                r++;
                while (isspace((unsigned char)*r)) r++;
                if (*r == '}') {
                    *o++ = ',';
                    p = r + 1;
                    continue;
                }
            }
        }
        *o++ = *p++;
    }
    *o = 0;
}

/* latex2sympy's "and"/"or" rule: the words, not inside another word or a
 * command, with a comma and blanks before them, become one comma
 * ("(11,7)or(7,11)", "21,16 or 11"). */
static void and_or_commas(char *s) {
    char *o = s;
    for (char *p = s; *p;) {
        size_t n = !strncmp(p, "and", 3) ? 3 : !strncmp(p, "or", 2) ? 2 : 0;
        if (n && (p == s || (!isalpha((unsigned char)p[-1]) && p[-1] != '\\')) && !isalpha((unsigned char)p[n])) {
            while (o > s && isspace((unsigned char)o[-1])) o--;
            if (o > s && o[-1] == ',') o--;
            *o++ = ',';
            p += n;
            continue;
        }
        *o++ = *p++;
    }
    *o = 0;
}

char *math_normalise(const char *latex) {
    char *s = xstrdup(latex);
    static const char *const drop[] = {"\\displaystyle", "\\,", "\\;", "\\:", "\\quad", "\\qquad", "\\$",
                                       "$", "^{\\circ}", "^\\circ", "^{\\degree}", "^\\degree", "\\circ", "\\degree",
                                       "\\left.", "\\right.", "\\mathrm{th}", "\\ldots", "\\dots", "\\cdots"};
    for (size_t k = 0; k < sizeof drop / sizeof drop[0]; k++) replace_all(&s, drop[k], "");
    static const char *const pairs[][2] = {
        {"\\left", ""}, {"\\right", ""}, {"\\mleft", ""}, {"\\mright", ""}, {"\\dfrac", "\\frac"},
        {"\\tfrac", "\\frac"}, {"\\cfrac", "\\frac"}, {"\\textbf{", "\\text{"}, {"\\textnormal{", "\\text{"},
        {"\\textrm{", "\\text{"}, {"\\textit{", "\\text{"}, {"\\mathrm{", "\\text{"}, {"\\mathbf{", "\\text{"},
        {"\\mathit{", "\\text{"}, {"\\mbox{", "\\text{"}, {"\\operatorname{", "\\text{"}, {"\\lbrace", "\\{"},
        {"\\rbrace", "\\}"}, {"\\lbrack", "["}, {"\\rbrack", "]"}, {"\\text{ and }", ","}, {"\\text{and}", ","}, {"\\text{ or }", ","}, {"\\text{or}", ","},
        {"\\text{percentage}", "%"}, {"\\text{percent}", "%"}, {"\\text{pct}", "%"}, {"percentage", "%"},
        {"percent", "%"}, {"pct", "%"}, {"\\%", "%"}, {"\\ ", " "}, {"\n", " "}, {"\t", " "}, {"~", " "},
        {"\\le ", "\\leq "}, {"\\ge ", "\\geq "}, {"\\neq", "!="}, {"\\ne ", "!= "}, {"\\leqslant", "\\leq"},
        {"\\geqslant", "\\geq"}, {"\\emptyset", "\\{\\}"}, {"\\varnothing", "\\{\\}"}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) replace_all(&s, pairs[k][0], pairs[k][1]);
    /* " and " / " or " between items */
    and_or_commas(s);
    squeeze_commas(s);
    drop_trailing_text_unit(s);
    drop_trailing_unit_word(s);
    /* trim, and a trailing full stop */
    size_t n = strlen(s);
    while (n && (isspace((unsigned char)s[n - 1]) || s[n - 1] == '.')) s[--n] = 0;
    size_t lead = 0;
    while (isspace((unsigned char)s[lead])) lead++;
    memmove(s, s + lead, n - lead + 1);
    return s;
}
