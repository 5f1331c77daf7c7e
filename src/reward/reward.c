/* reward/reward.c — reward specs, the simple built-ins (reward_len,
 * format:REGEX) and RewardSet: weights and TRL's nansum.
 *
 * Not here: open-r1's rewards (reward_openr1.c, reward_openr1_len.c), the
 * names and their check (reward_names.c), exact_match (reward_answer.c), the child-process protocol
 * (reward_cmd.c), Python functions (reward_python.c), dlopen plugins (reward_plugin.c). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <oniguruma.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "reward/reward_internal.h"
#include "reward/reward_plugin.h"

void reward_item_where(const RewardItem *it, int i, char *buf, size_t size) {
    if (it->file && it->line > 0)
        snprintf(buf, size, "%s:%ld", it->file, it->line);
    else
        snprintf(buf, size, "batch item %d", i);
}

/* ---- length: TRL's docs example reward_len, -|target - len(completion)| ---- */

/* Python's len() of a str: code points. Completions are decoded with U+FFFD
 * replacement, so counting the bytes that do not continue a sequence is exact. */
static long utf8_code_points(const char *s) {
    long n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xC0) != 0x80;
    return n;
}

static int length_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    long target = *(long *)f->state;
    for (int i = 0; i < b->n; i++) out[i] = -fabs((double)(target - utf8_code_points(b->items[i].completion)));
    return 0;
}

static void free_state(RewardFunc *f) { free(f->state); }

/* The largest target: 2^53, below which every reward -|target - len| is exact in a double. */
#define LENGTH_TARGET_MAX 9007199254740992LL

static int length_init(RewardFunc *f, const char *arg, const char *spec, GrpoErr *err) {
    long target = REWARD_DEFAULT_LENGTH_TARGET;
    if (arg) {
        char *end = NULL;
        errno = 0;
        long long t = strtoll(arg, &end, 10);
        char shown[96];
        text_escaped(shown, sizeof shown, arg, 60);
        if (!*arg || *end || errno == ERANGE || t < 0 || t > LENGTH_TARGET_MAX)
            return err_set(err, "reward '%s': the target length must be a non-negative integer, at most 2^53, got '%s'",
                           spec, shown);
        target = (long)t;
    }
    long *st = xmalloc(sizeof *st);
    *st = target;
    f->state = st;
    f->compute = length_compute;
    f->destroy = free_state;
    return 0;
}

/* ---- format: 1.0 when the regex is found in the completion ---- */

static int format_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    regex_t *re = f->state;
    for (int i = 0; i < b->n; i++) {
        const UChar *s = (const UChar *)b->items[i].completion, *end = s + strlen(b->items[i].completion);
        int r = onig_search(re, s, end, s, end, NULL, ONIG_OPTION_NONE);
        if (r < ONIG_MISMATCH) {
            UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
            onig_error_code_to_str(msg, r);
            return err_set(err, "reward '%s': regex search failed: %s", f->name, (char *)msg);
        }
        out[i] = r >= 0 ? 1.0 : 0.0;
    }
    return 0;
}

static void format_destroy(RewardFunc *f) { onig_free(f->state); }

static int format_init(RewardFunc *f, const char *pattern, const char *spec, GrpoErr *err) {
    static int onig_ready = 0;
    if (!onig_ready) { /* idempotent; the tokenizer may have done it already */
        OnigEncoding encs[1] = {ONIG_ENCODING_UTF8};
        onig_initialize(encs, 1);
        onig_ready = 1;
    }
    if (!pattern || !*pattern) return err_set(err, "reward '%s': expected format:REGEX", spec);
    regex_t *re = NULL;
    OnigErrorInfo einfo;
    /* Perl syntax: ^ is the start of the text, $ its end (or before a final
     * newline), '.' does not match a newline unless (?s) — as Python's re. */
    int r = onig_new(&re, (const UChar *)pattern, (const UChar *)pattern + strlen(pattern),
                     ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_PERL, &einfo);
    if (r != ONIG_NORMAL) {
        UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r, &einfo);
        return err_set(err, "reward '%s': bad regex: %s", spec, (char *)msg);
    }
    f->state = re;
    f->compute = format_compute;
    f->destroy = format_destroy;
    return 0;
}

/* ---- specs ---- */

/* The default name of a cmd function: its script — the first word that names a
 * file (has a '/' or an extension), else the program — without directory and
 * extension ("python3 rewards/len.py 20" -> "len", "./score --fast" -> "score").
 * Arguments after the script (thresholds, flags) do not name it. */
static char *cmd_default_name(const char *cmd) {
    const char *best = NULL, *first = NULL;
    size_t best_len = 0, first_len = 0;
    for (const char *p = cmd; *p && !best;) {
        while (*p && isspace((unsigned char)*p)) p++;
        const char *w = p;
        while (*p && !isspace((unsigned char)*p)) p++;
        size_t n = (size_t)(p - w);
        if (!n || *w == '-') continue;
        if (!first) first = w, first_len = n;
        const char *dot = memchr(w, '.', n), *slash = memchr(w, '/', n);
        if (slash || (dot && dot > w && dot + 1 < w + n)) best = w, best_len = n;
    }
    if (!best) best = first, best_len = first_len;
    if (!best) return xstrdup("cmd");
    const char *base = best;
    for (size_t i = 0; i < best_len; i++)
        if (best[i] == '/') base = best + i + 1;
    size_t len = (size_t)(best + best_len - base);
    for (size_t i = len; i > 0; i--)
        if (base[i - 1] == '.') { len = i - 1; break; }
    if (len == 0) return xstrdup("cmd");
    char *name = xmalloc(len + 1);
    memcpy(name, base, len);
    name[len] = 0;
    return name;
}

int reward_new(RewardFunc **out, const char *spec, const RewardOptions *opt, GrpoErr *err) {
    *out = NULL;
    double timeout_s = opt && opt->timeout_s > 0 ? opt->timeout_s : REWARD_DEFAULT_TIMEOUT_S;
    /* optional NAME= prefix: an identifier before any ':' */
    char *name = NULL;
    const char *body = spec;
    size_t id = 0;
    while (isalnum((unsigned char)spec[id]) || spec[id] == '_' || spec[id] == '-' || spec[id] == '.') id++;
    if (id > 0 && spec[id] == '=') {
        name = xmalloc(id + 1);
        memcpy(name, spec, id);
        name[id] = 0;
        body = spec + id + 1;
    }
    const char *colon = strchr(body, ':');
    size_t kind_len = colon ? (size_t)(colon - body) : strlen(body);
    const char *arg = colon ? colon + 1 : NULL;
    char kind[32] = {0};
    if (kind_len < sizeof kind) memcpy(kind, body, kind_len);
    RewardFunc *f = xcalloc(1, sizeof *f);
    int rc;
    char *owned_default = NULL; /* cmd and plugin: a name from the command or the file */
    if (reward_openr1_claims(kind, arg)) {
        rc = reward_openr1_init(f, kind, arg, spec, opt ? opt->openr1 : NULL, err);
        if (!rc) owned_default = xstrdup(reward_openr1_log_name(kind));
    } else if (!strcmp(kind, "length") || !strcmp(kind, "reward_len")) {
        rc = length_init(f, arg, spec, err);
    } else if (!strcmp(kind, "format")) {
        rc = format_init(f, arg, spec, err);
    } else if (!strcmp(kind, "accuracy_reward")) {
        rc = reward_accuracy_init(f, arg, err);
    } else if (!strcmp(kind, "think_format_reward")) {
        rc = arg ? err_set(err, "reward '%s': think_format_reward takes no argument", spec) : reward_think_format_init(f, err);
    } else if (!strcmp(kind, "exact_match")) {
        const char *column = arg;
        if (!column || !*column)
            rc = err_set(err, "reward '%s': expected exact_match:COLUMN (the column holding the answer)", spec);
        else
            rc = reward_exact_match_init(f, column, err);
    } else if (!strcmp(kind, "environment_reward")) {
        rc = arg ? err_set(err, "reward '%s': environment_reward takes no argument", spec)
                 : reward_environment_init(f, err);
    } else if (reward_python_spec(body)) { /* FILE.py:FUNCTION or module.function */
        rc = reward_python_init(f, body, name, timeout_s, &owned_default, err);
    } else if (!strcmp(kind, "cmd")) {
        if (!arg || !*arg)
            rc = err_set(err, "reward '%s': expected cmd:COMMAND LINE", spec);
        else {
            owned_default = cmd_default_name(arg);
            rc = reward_cmd_init(f, arg, name ? name : owned_default, timeout_s, err);
        }
    } else if (!strcmp(kind, "plugin")) {
        /* plugin:PATH[:SYMBOL], SYMBOL a C identifier after the last ':' */
        char *path = arg ? xstrdup(arg) : NULL;
        const char *symbol = GRPO_REWARD_DEFAULT_SYMBOL;
        int explicit_symbol = 0;
        char *last = path ? strrchr(path, ':') : NULL;
        if (last && last[1] && !strpbrk(last + 1, "/.") &&
            (isalpha((unsigned char)last[1]) || last[1] == '_')) {
            *last = 0;
            symbol = last + 1;
            explicit_symbol = 1;
        }
        if (!path || !*path)
            rc = err_set(err, "reward '%s': expected plugin:PATH.so[:SYMBOL]", spec);
        else {
            rc = reward_plugin_init(f, path, symbol, err);
            owned_default = explicit_symbol ? xstrdup(symbol) : cmd_default_name(path);
        }
        free(path);
    } else {
        rc = reward_unknown_err(spec, kind, err);
    }
    if (rc) {
        free(name);
        free(owned_default);
        free(f);
        return -1;
    }
    f->name = name ? name : owned_default ? owned_default : xstrdup(kind);
    if (name) free(owned_default);
    *out = f;
    return 0;
}

int reward_compute(RewardFunc *f, const RewardBatch *b, double *out, GrpoErr *err) {
    return f->compute(f, b, out, err);
}

void reward_free(RewardFunc *f) {
    if (!f) return;
    if (f->destroy) f->destroy(f);
    free(f->name);
    free(f);
}

/* ---- sets ---- */

int reward_set_init_funcs(RewardSet *s, RewardFunc **funcs, int n_funcs, const double *weights,
                          int n_weights, GrpoErr *err) {
    memset(s, 0, sizeof *s);
    if (weights && n_weights != n_funcs) {
        for (int i = 0; i < n_funcs; i++) reward_free(funcs[i]);
        return err_set(err, "reward_weights: %d weights given for %d reward functions (they must match)",
                       n_weights, n_funcs);
    }
    s->n_funcs = n_funcs;
    s->funcs = xcalloc((size_t)(n_funcs ? n_funcs : 1), sizeof *s->funcs);
    s->weights = xmalloc((size_t)(n_funcs ? n_funcs : 1) * sizeof *s->weights);
    for (int i = 0; i < n_funcs; i++) {
        s->funcs[i] = funcs[i];
        s->weights[i] = weights ? weights[i] : 1.0;
        /* keep log names apart: a second "format" becomes "format_2" */
        int dup = 1;
        for (int j = 0; j < i; j++)
            if (!strcmp(s->funcs[j]->name, funcs[i]->name)) dup++;
        if (dup > 1) {
            size_t len = strlen(funcs[i]->name) + 16;
            char *nn = xmalloc(len);
            snprintf(nn, len, "%s_%d", funcs[i]->name, dup);
            free(funcs[i]->name);
            funcs[i]->name = nn;
        }
    }
    return 0;
}

int reward_set_init(RewardSet *s, const char *const *specs, int n_specs, const double *weights,
                    int n_weights, const RewardOptions *opt, GrpoErr *err) {
    memset(s, 0, sizeof *s);
    if (weights && n_weights != n_specs)
        return err_set(err, "reward_weights: %d weights given for %d reward functions (they must match)",
                       n_weights, n_specs);
    RewardFunc **funcs = xcalloc((size_t)(n_specs ? n_specs : 1), sizeof *funcs);
    for (int i = 0; i < n_specs; i++) {
        if (reward_new(&funcs[i], specs[i], opt, err)) {
            for (int j = 0; j < i; j++) reward_free(funcs[j]);
            free(funcs);
            return -1;
        }
    }
    int rc = reward_set_init_funcs(s, funcs, n_specs, weights, n_weights, err);
    free(funcs);
    return rc;
}

void reward_weighted_nansum(const double *per_func, int n_funcs, int n, const double *weights,
                            double *total) {
    /* TRL: (rewards_per_func * reward_weights).nansum(dim=1) */
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int f = 0; f < n_funcs; f++) {
            double v = per_func[(size_t)f * n + i];
            if (!isnan(v)) sum += weights[f] * v;
        }
        total[i] = sum;
    }
}

int reward_weighted_check(const RewardSet *s, const double *per_func, int n, GrpoErr *err) {
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        int given_inf = 0; /* a function's own inf is its value: the trainer's non-finite policy meets it */
        for (int f = 0; f < s->n_funcs; f++) {
            double v = per_func[(size_t)f * n + i];
            given_inf |= isinf(v);
            if (!isnan(v)) sum += s->weights[f] * v;
        }
        if (isfinite(sum) || given_inf) continue;
        char terms[600];
        size_t k = 0;
        for (int f = 0; f < s->n_funcs && k < sizeof terms; f++) {
            char name[80];
            text_escaped(name, sizeof name, s->funcs[f]->name, 40);
            k += snprintf(terms + k, sizeof terms - k, "%s'%s' %.6g x weight %g", f ? ", " : "", name,
                          per_func[(size_t)f * n + i], s->weights[f]);
        }
        return err_set(err, "the weighted sum of the rewards of completion %d is %g, not a finite number: %s; "
                       "scale the rewards or reward_weights so that it stays below 1.8e308", i + 1, sum, terms);
    }
    return 0;
}

int reward_set_compute(RewardSet *s, const RewardBatch *b, double *per_func, double *total,
                       GrpoErr *err) {
    for (int f = 0; f < s->n_funcs; f++) {
        double *row = per_func + (size_t)f * b->n;
        for (int i = 0; i < b->n; i++) row[i] = NAN;
        if (reward_compute(s->funcs[f], b, row, err)) return -1;
    }
    if (total && reward_weighted_check(s, per_func, b->n, err)) return -1;
    if (total) reward_weighted_nansum(per_func, s->n_funcs, b->n, s->weights, total);
    return 0;
}

void reward_set_free(RewardSet *s) {
    for (int i = 0; i < s->n_funcs; i++) reward_free(s->funcs[i]);
    free(s->funcs);
    free(s->weights);
    memset(s, 0, sizeof *s);
}
