/* core/options.c — defaults, parsing, checks, help and records of declared
 * options (see options.h). Not here: where text comes from (cli/args.c reads the
 * command line and YAML files). */
#include "core/options.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const OptSpec seed_option[1] = {
    {"seed", OPT_U64, 0, 42, NULL, -9223372036854775808.0, 18446744073709551615.0, NULL, NULL, 0,
     "random seed, as torch.manual_seed takes it: a negative seed s is the seed s + 2^64"},
};

void opts_defaults(const OptGroup *g, int ng, void *obj) {
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            const OptSpec *o = &g[k].specs[i];
            void *v = opt_value(o, obj, g[k].base);
            switch (o->type) {
            case OPT_BOOL: case OPT_INT: case OPT_ENUM: *(int *)v = (int)o->def; break;
            case OPT_LONG: *(long *)v = (long)o->def; break;
            case OPT_U64: *(uint64_t *)v = (uint64_t)o->def; break;
            case OPT_F64: *(double *)v = o->def; break;
            case OPT_F32: *(float *)v = (float)o->def; break;
            case OPT_MIB: *(size_t *)v = (size_t)o->def << 20; break;
            case OPT_STR: case OPT_CONFIG: case OPT_JSON: *(const char **)v = o->def_str; break;
            case OPT_LIST: *(StrList *)v = (StrList){0, NULL}; break;
            case OPT_F64_LIST: *(F64List *)v = (F64List){0, NULL}; break;
            }
        }
}

const OptSpec *opts_find(const OptGroup *g, int ng, const char *name, size_t len, size_t *base) {
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++)
            if (strlen(g[k].specs[i].name) == len && !strncmp(g[k].specs[i].name, name, len)) {
                if (base) *base = g[k].base;
                return &g[k].specs[i];
            }
    return NULL;
}

/* What transformers' HfArgumentParser (string_to_bool) accepts, in any case:
 * yes/true/t/y/1 and no/false/f/n/0 — also YAML 1.1's yes/no. */
int opt_parse_bool(const char *s, int *out) {
    static const char *const t[] = {"true", "yes", "t", "y", "1"}, *const f[] = {"false", "no", "f", "n", "0"};
    for (int i = 0; i < 5; i++) {
        if (!strcasecmp(s, t[i])) return *out = 1, 0;
        if (!strcasecmp(s, f[i])) return *out = 0, 0;
    }
    return -1;
}

/* Text to a double as strtod reads it ("nan", "inf", "1e-310" too). 1: the text
 * is no number; 2: its magnitude is beyond a double (*out is +-inf); 3: it is
 * closer to 0 than a double holds (*out is 0). A subnormal is a value, not an error. */
static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    if (end == s || *end) return 1;
    if (errno == ERANGE && isinf(*out)) return 2;
    if (errno == ERANGE && *out == 0) return 3;
    return 0;
}

/* A decimal integer: 0, 1 (no integer) or 2 (beyond int64 / uint64). A seed (u64)
 * takes -2^63 .. 2^64 - 1, a negative one stored as its two's complement. */
static int parse_integer(const char *s, int is_u64, long long *sl, unsigned long long *ul) {
    char *end;
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    int neg = *p == '-';
    errno = 0;
    if (is_u64 && !neg) *ul = strtoull(s, &end, 10), *sl = (long long)*ul;
    else *sl = strtoll(s, &end, 10), *ul = (unsigned long long)*sl;
    if (end == s || *end) return 1;
    return errno == ERANGE ? 2 : 0;
}

static void choices_text(const OptSpec *o, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; o->choices[i] && n < cap; i++)
        n += snprintf(buf + n, cap - n, "%s%s", i ? (o->choices[i + 1] ? ", " : " or ") : "", o->choices[i]);
}

static double type_max(const OptSpec *o);
static int range_error(const OptSpec *o, const char *got, int beyond_type, GrpoErr *err);

int opt_set_text(const OptSpec *o, void *v, const char *s, GrpoErr *err) {
    double d;
    switch (o->type) {
    case OPT_BOOL:
        if ((o->flags & OPT_AUTO) && !strcasecmp(s, "auto")) {
            *(int *)v = -1;
            return 0;
        }
        if (opt_parse_bool(s, (int *)v))
            return err_set(err, "%s takes true or false%s, not '%s'", o->name, o->flags & OPT_AUTO ? " or auto" : "",
                           s);
        return 0;
    case OPT_INT: case OPT_LONG: case OPT_U64: case OPT_MIB: {
        long long sl;
        unsigned long long ul;
        int rc = parse_integer(s, o->type == OPT_U64, &sl, &ul);
        if (rc == 1) return err_set(err, "%s expects an integer, not '%s'", o->name, s);
        if (o->type == OPT_U64) {
            if (rc) return range_error(o, s, strchr(s, '-') ? -1 : 1, err);
            *(uint64_t *)v = (uint64_t)ul;
            return 0;
        }
        double hi = type_max(o), lo = o->type == OPT_MIB ? 0 : -hi;
        if (rc || (double)sl > hi || (double)sl < lo) return range_error(o, s, sl < 0 ? -1 : 1, err);
        if (o->type == OPT_INT) *(int *)v = (int)sl;
        else if (o->type == OPT_LONG) *(long *)v = (long)sl;
        else *(size_t *)v = (size_t)sl << 20;
        return 0;
    }
    case OPT_F64: case OPT_F32: {
        int rc = parse_double(s, &d);
        if (rc == 1) return err_set(err, "%s expects a number, not '%s'", o->name, s);
        /* NaN is never a value (an unset optional number is null in YAML, or left out) */
        if (rc == 2 || isnan(d)) return range_error(o, s, 0, err);
        if (o->type == OPT_F32 && isfinite(d) && fabs(d) > FLT_MAX) return range_error(o, s, d < 0 ? -1 : 1, err);
        if (rc == 3 || (o->type == OPT_F32 && d != 0 && (float)d == 0))
            return err_set(err, "%s: %s is closer to 0 than a %s holds (the smallest is %g); write 0 or a larger value",
                           o->name, s, o->type == OPT_F32 ? "32-bit float" : "double",
                           o->type == OPT_F32 ? (double)FLT_TRUE_MIN : DBL_TRUE_MIN);
        if (o->type == OPT_F64) *(double *)v = d;
        else *(float *)v = (float)d;
        return 0;
    }
    case OPT_STR: case OPT_CONFIG:
        *(const char **)v = s;
        return 0;
    case OPT_JSON: {
        json_error_t je;
        json_t *j = json_loads(s, JSON_DECODE_ANY, &je);
        int is_obj = json_is_object(j);
        json_decref(j);
        if (!is_obj)
            return err_set(err, "%s expects a JSON object such as {\"enable_thinking\": false}, not '%s'", o->name, s);
        *(const char **)v = s;
        return 0;
    }
    case OPT_ENUM:
        for (int i = 0; o->aliases && o->aliases[i]; i += 2)
            if (!strcmp(s, o->aliases[i])) s = o->aliases[i + 1];
        for (int i = 0; o->choices[i]; i++)
            if (!strcmp(s, o->choices[i])) return *(int *)v = i, 0;
        char names[400];
        choices_text(o, names, sizeof names);
        return err_set(err, "%s '%s' is not one of %s", o->name, s, names);
    case OPT_LIST: case OPT_F64_LIST:
        return err_set(err, "%s: a list is set with opt_set_list", o->name);
    }
    return 0;
}

/* Whether x is outside the row's range; min 1e-300 stands for an open 0 (x > 0, so
 * a subnormal such as 1e-310 is inside, as "> 0" says). */
static int out_of_range(const OptSpec *o, double x) {
    if (o->min > o->max) return 0;
    int above_min = o->min == 1e-300 ? x > 0 : x >= o->min;
    return !(above_min && (o->flags & OPT_OPEN_MAX ? x < o->max : x <= o->max));
}

static double number(const OptSpec *o, const void *v) {
    switch (o->type) {
    case OPT_BOOL: case OPT_INT: case OPT_ENUM: return *(const int *)v;
    case OPT_LONG: return (double)*(const long *)v;
    case OPT_U64: return (double)*(const uint64_t *)v;
    case OPT_F64: return *(const double *)v;
    case OPT_F32: return *(const float *)v;
    case OPT_MIB: return (double)(*(const size_t *)v >> 20);
    default: return NAN;
    }
}

static int is_number(const OptSpec *o) {
    return o->type == OPT_INT || o->type == OPT_LONG || o->type == OPT_U64 || o->type == OPT_F64 ||
           o->type == OPT_F32 || o->type == OPT_MIB;
}

static int is_integer(const OptSpec *o) {
    return o->type == OPT_INT || o->type == OPT_LONG || o->type == OPT_U64 || o->type == OPT_MIB;
}

/* The largest magnitude a row's type holds (a MiB count: 2^40 MiB). */
static double type_max(const OptSpec *o) {
    switch (o->type) {
    case OPT_INT: return 2147483647.0;
    case OPT_LONG: return 9223372036854775807.0;
    case OPT_U64: return 18446744073709551615.0;
    case OPT_MIB: return 1099511627776.0;
    case OPT_F32: return FLT_MAX;
    default: return DBL_MAX;
    }
}

static const char *type_name(const OptSpec *o) {
    switch (o->type) {
    case OPT_INT: return "32-bit integer";
    case OPT_LONG: return "64-bit integer";
    case OPT_U64: return "seed";
    case OPT_MIB: return "size in MiB";
    case OPT_F32: return "32-bit float";
    default: return "double";
    }
}

/* A bound as people write it: integers as integers, a seed's ends as -2^63 and 2^64 - 1. */
static int bound_text(const OptSpec *o, double x, char *buf, size_t cap) {
    if (o->type == OPT_U64 && x >= 18446744073709551615.0) return snprintf(buf, cap, "2^64 - 1");
    if (o->type == OPT_U64 && x <= -9223372036854775808.0) return snprintf(buf, cap, "-2^63");
    if (is_integer(o)) return snprintf(buf, cap, "%.0f", x);
    return snprintf(buf, cap, "%.15g", x);
}

/* The range as people write it: "in [1, 100]", "in (0, 1]", "in [0, 1)", ">= 0",
 * "> 0", "<= 5", or "" when every value is valid. A side at +-1e300 (or, a seed
 * aside, at what the type holds) is unbounded and not shown; min 1e-300 is an open
 * 0. --help prints this text and every range error quotes it, so the two agree. */
static void range_text(const OptSpec *o, char *buf, size_t cap) {
    int open_min = o->min == 1e-300, open_max = (o->flags & OPT_OPEN_MAX) != 0;
    int no_min = o->min <= -1e300 || (o->type != OPT_U64 && o->min <= -type_max(o));
    int no_max = o->max >= 1e300 || (o->type != OPT_U64 && o->max >= type_max(o));
    char lo[40], hi[40];
    if (o->min > o->max) no_min = no_max = 1;
    if (open_min) snprintf(lo, sizeof lo, "0");
    else bound_text(o, o->min, lo, sizeof lo);
    bound_text(o, o->max, hi, sizeof hi);
    if (no_min && no_max) snprintf(buf, cap, "%s", "");
    else if (no_max) snprintf(buf, cap, "%s %s", open_min ? ">" : ">=", lo);
    else if (no_min) snprintf(buf, cap, "%s %s", open_max ? "<" : "<=", hi);
    else snprintf(buf, cap, "in %c%s, %s%c", open_min ? '(' : '[', lo, hi, open_max ? ')' : ']');
}

/* "NAME must be RANGE (got TEXT)". A value that is no finite number (nan, inf,
 * 1e400) is told "a finite number" where the range alone would not say it
 * (">= 0"); one beyond what the type holds (beyond_type: the side, -1 or 1) on a
 * side the range leaves open is told the type's limit. */
static int range_error(const OptSpec *o, const char *got, int beyond_type, GrpoErr *err) {
    char r[100], what[220];
    range_text(o, r, sizeof r);
    int open_side = beyond_type > 0 ? !strchr(r, ']') && !strchr(r, ')') && !strchr(r, '<')
                  : beyond_type < 0 ? !strchr(r, '[') && !strchr(r, '(') && !strchr(r, '>') : 0;
    double x = strtod(got, NULL);
    if (open_side) {
        char lim[40];
        bound_text(o, beyond_type > 0 ? type_max(o) : o->type == OPT_U64 ? -9223372036854775808.0 : -type_max(o),
                   lim, sizeof lim);
        if (o->type == OPT_F32) snprintf(lim, sizeof lim, "%s%.7g", beyond_type > 0 ? "" : "-", (double)FLT_MAX);
        snprintf(what, sizeof what, "%s%sat %s %s (the %s a %s holds)", r, *r ? ", " : "",
                 beyond_type > 0 ? "most" : "least", lim, beyond_type > 0 ? "largest" : "smallest", type_name(o));
    } else if (!isfinite(x) && strncmp(r, "in ", 3)) {
        snprintf(what, sizeof what, "a finite number%s%s", *r ? " " : "", r);
    } else {
        snprintf(what, sizeof what, "%s", r);
    }
    return err_set(err, "%s must be %s (got %s)", o->name, what, got);
}

int opts_check(const OptGroup *g, int ng, const void *obj, GrpoErr *err) {
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            const OptSpec *o = &g[k].specs[i];
            const void *v = opt_value(o, obj, g[k].base);
            if (o->flags & OPT_REQUIRED) {
                int set = o->type == OPT_LIST ? ((const StrList *)v)->n > 0
                          : o->type == OPT_F64_LIST ? ((const F64List *)v)->n > 0
                                                    : *(const char *const *)v != NULL;
                if (!set) return err_set(err, "%s is required", o->name);
            }
            if (o->type == OPT_F64_LIST) {
                const F64List *l = v;
                for (int j = 0; j < l->n; j++)
                    if (!isfinite(l->v[j])) return err_set(err, "%s: value %d is not a finite number", o->name, j + 1);
                continue;
            }
            if (!is_number(o)) continue;
            double x = number(o, v);
            if (isnan(x) && (o->flags & OPT_UNSET_NAN)) continue;
            if (!isfinite(x) || out_of_range(o, x)) {
                char val[64];
                opt_format(o, v, val, sizeof val);
                return range_error(o, val, 0, err);
            }
        }
    return 0;
}

void opt_format(const OptSpec *o, const void *v, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    switch (o->type) {
    case OPT_BOOL: snprintf(buf, cap, "%s", *(const int *)v < 0 ? "auto" : *(const int *)v ? "true" : "false"); break;
    case OPT_INT: snprintf(buf, cap, "%d", *(const int *)v); break;
    case OPT_LONG: snprintf(buf, cap, "%ld", *(const long *)v); break;
    case OPT_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)v); break;
    case OPT_MIB: snprintf(buf, cap, "%zu", *(const size_t *)v >> 20); break;
    case OPT_F64: case OPT_F32: {
        double x = number(o, v);
        if (isnan(x) && (o->flags & OPT_UNSET_NAN)) break;
        snprintf(buf, cap, "%g", x);
        break;
    }
    case OPT_STR: case OPT_CONFIG: case OPT_JSON:
        snprintf(buf, cap, "%s", *(const char *const *)v ? *(const char *const *)v : "");
        break;
    case OPT_ENUM: snprintf(buf, cap, "%s", o->choices[*(const int *)v]); break;
    case OPT_LIST: {
        const StrList *l = v;
        for (int i = 0; i < l->n && n < cap; i++) n += snprintf(buf + n, cap - n, "%s%s", i ? " " : "", l->v[i]);
        break;
    }
    case OPT_F64_LIST: {
        const F64List *l = v;
        for (int i = 0; i < l->n && n < cap; i++) n += snprintf(buf + n, cap - n, "%s%g", i ? " " : "", l->v[i]);
        break;
    }
    }
}

void opt_help(const OptSpec *o, const void *v, char *buf, size_t cap) {
    char def[200] = "", extra[460] = "";
    opt_format(o, v, def, sizeof def);
    size_t n = 0;
    if (o->flags & OPT_REQUIRED) n += snprintf(extra + n, sizeof extra - n, "required");
    else if (*def) n += snprintf(extra + n, sizeof extra - n, "default %s", def);
    if (o->type == OPT_ENUM) {
        char names[400];
        choices_text(o, names, sizeof names);
        n += snprintf(extra + n, sizeof extra - n, "%s%s", n ? "; " : "", names);
    } else if (is_number(o) && o->min <= o->max) {
        char r[100];
        range_text(o, r, sizeof r);
        if (*r) n += snprintf(extra + n, sizeof extra - n, "%s%s", n ? "; " : "", r);
    }
    snprintf(buf, cap, n ? "%s (%s)" : "%s", o->help, extra);
}

json_t *opts_to_json(const OptGroup *g, int ng, const void *obj) {
    json_t *out = json_object();
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            const OptSpec *o = &g[k].specs[i];
            if (o->flags & OPT_NO_RECORD || o->type == OPT_CONFIG) continue;
            const void *v = opt_value(o, obj, g[k].base);
            json_t *j = NULL;
            switch (o->type) {
            case OPT_BOOL: j = *(const int *)v < 0 ? json_string("auto") : json_boolean(*(const int *)v); break;
            case OPT_INT: case OPT_LONG: case OPT_MIB: j = json_integer((json_int_t)number(o, v)); break;
            case OPT_U64: j = json_integer((json_int_t)*(const uint64_t *)v); break;
            case OPT_F64: case OPT_F32: {
                double x = number(o, v);
                j = isfinite(x) ? json_real(x) : json_null();
                break;
            }
            case OPT_STR: case OPT_CONFIG: {
                const char *s = *(const char *const *)v;
                j = s ? json_string(s) : json_null();
                break;
            }
            case OPT_JSON: {
                const char *s = *(const char *const *)v;
                j = s ? json_loads(s, 0, NULL) : json_null();
                break;
            }
            case OPT_ENUM: j = json_string(o->choices[*(const int *)v]); break;
            case OPT_LIST: {
                const StrList *l = v;
                j = json_array();
                for (int t = 0; t < l->n; t++) json_array_append_new(j, json_string(l->v[t]));
                break;
            }
            case OPT_F64_LIST: {
                const F64List *l = v;
                j = json_array();
                for (int t = 0; t < l->n; t++) json_array_append_new(j, json_real(l->v[t]));
                break;
            }
            }
            json_object_set_new(out, o->name, j ? j : json_null());
        }
    return out;
}
