/* core/options_help.c — the options part of `--help` laid out for a person to
 * scan: rows under their section's heading, related rows together, help wrapped
 * to the terminal's width (options.h). Not here: one row's text (opt_help in
 * options.c), printing and the terminal's width (cli/). */
#include "core/options.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const opt_section_names[OPT_N_SECTIONS] = {
    [OPT_SEC_NONE] = "options",
    [OPT_SEC_MODEL_DATA] = "model & data",
    [OPT_SEC_REWARDS] = "rewards",
    [OPT_SEC_GENERATION] = "generation",
    [OPT_SEC_LOSS] = "GRPO loss",
    [OPT_SEC_BATCH] = "batches & length of training",
    [OPT_SEC_OPTIM] = "optimization",
    [OPT_SEC_EVAL] = "evaluation during training",
    [OPT_SEC_LOG] = "logging & checkpoints",
    [OPT_SEC_LORA] = "LoRA",
    [OPT_SEC_SPEED] = "precision, memory & speed",
};

/* A growing string. */
typedef struct {
    char *s;
    size_t n, cap;
} Text;

static void put(Text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->n + (size_t)need + 1 > t->cap) {
        t->cap = (t->n + (size_t)need + 1) * 2;
        t->s = xrealloc(t->s, t->cap);
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
    va_end(ap);
    t->n += (size_t)need;
}

/* Columns the UTF-8 text s[0..len) takes: one per code point. */
static int columns(const char *s, size_t len) {
    int c = 0;
    for (size_t i = 0; i < len; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static OptSection section_of(const OptGroup *g, const OptSpec *o) {
    return OPT_SECTION_OF(o->flags) != OPT_SEC_NONE ? OPT_SECTION_OF(o->flags) : g->section;
}

static void left_text(const OptSpec *o, char *buf, size_t cap) {
    const char *arg = o->type == OPT_BOOL ? " [BOOL]" : o->type == OPT_CONFIG ? " FILE.yaml"
                      : o->type == OPT_LIST || o->type == OPT_F64_LIST ? " V [V...]"
                      : o->type == OPT_STR || o->type == OPT_ENUM ? " VALUE"
                      : o->type == OPT_JSON ? " JSON" : " N";
    snprintf(buf, cap, "--%s%s", o->name, arg);
}

/* Whether the last word of the unit p[0..n) stays on one line with the next word:
 * a comparison and its number (">= 0"), "(default" and its value, a range
 * ("in [0, 1]"). */
static int glued(const char *p, size_t n, const char *next) {
    static const char *const op[] = {">=", "<=", ">", "<", "(default"};
    const char *w = p + n;
    while (w > p && w[-1] != ' ') w--; /* the unit's last word */
    size_t wn = (size_t)(p + n - w);
    for (int i = 0; i < 5; i++)
        if (wn == strlen(op[i]) && !strncmp(w, op[i], wn)) return 1;
    if (wn == 2 && !strncmp(w, "in", 2)) return *next == '[' || *next == '(';
    return wn > 1 && (*w == '[' || *w == '(') && w[wn - 1] == ',';
}

/* help's words from column `indent` on, each line ending by width, continued lines
 * indented to the same column. */
static void put_wrapped(Text *t, const char *help, int indent, int width) {
    const char *p = help;
    int col = indent, first = 1;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        size_t len = strcspn(p, " ");
        while (p[len] == ' ' && glued(p, len, p + len + 1)) len += 1 + strcspn(p + len + 1, " ");
        int w = columns(p, len);
        if (!first && col + 1 + w > width) {
            put(t, "\n%*s", indent, "");
            col = indent;
            first = 1;
        }
        put(t, "%s%.*s", first ? "" : " ", (int)len, p);
        col += w + !first;
        first = 0;
        p += len;
    }
    put(t, "\n");
}

char *opts_help_text(const OptGroup *g, int ng, const void *obj, int width) {
    enum { LEFT_MAX = 32 };
    int left_w = 0, any_section = 0;
    char left[160], help[1600];
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            left_text(&g[k].specs[i], left, sizeof left);
            int w = (int)strlen(left);
            if (w <= LEFT_MAX && w > left_w) left_w = w;
            any_section |= section_of(&g[k], &g[k].specs[i]) != OPT_SEC_NONE;
        }
    int indent = 2 + left_w + 2;
    if (width < indent + 20) width = indent + 20;
    Text t = {0};
    put(&t, "%s", "");
    /* the named sections in their order, then the rows without one */
    for (int step = 1; step <= OPT_N_SECTIONS; step++) {
        OptSection s = (OptSection)(step % OPT_N_SECTIONS);
        int shown = 0;
        for (int k = 0; k < ng; k++)
            for (int i = 0; i < g[k].n; i++) {
                const OptSpec *o = &g[k].specs[i];
                if (section_of(&g[k], o) != s) continue;
                if (!shown++)
                    put(&t, "%s%s%s:\n", t.n ? "\n" : "", s == OPT_SEC_NONE && any_section ? "other " : "",
                        opt_section_names[s]);
                left_text(o, left, sizeof left);
                opt_help(o, opt_value(o, obj, g[k].base), help, sizeof help);
                int w = (int)strlen(left);
                if (w > left_w) { /* too long for the column: its help starts on the next line */
                    put(&t, "  %s\n%*s", left, indent, "");
                } else {
                    put(&t, "  %-*s  ", left_w, left);
                }
                put_wrapped(&t, help, indent, width);
            }
    }
    return t.s;
}
