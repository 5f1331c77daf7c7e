/* core/options.c — defaults, parsing, checks, help and records of declared
 * options (see options.h). Not here: where text comes from (cli/args.c reads the
 * command line and YAML files). */
#include "core/options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const OptSpec seed_option[1] = {
    {"seed", OPT_U64, 0, 42, NULL, 0, 18446744073709551615.0, NULL, NULL, 0, "random seed"},
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

static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return errno == ERANGE || end == s || *end ? -1 : 0;
}

static int parse_long(const char *s, long *out) {
    char *end;
    errno = 0;
    *out = strtol(s, &end, 10);
    return errno || end == s || *end ? -1 : 0;
}

static void choices_text(const OptSpec *o, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; o->choices[i] && n < cap; i++)
        n += snprintf(buf + n, cap - n, "%s%s", i ? (o->choices[i + 1] ? ", " : " or ") : "", o->choices[i]);
}

int opt_set_text(const OptSpec *o, void *v, const char *s, GrpoErr *err) {
    long l;
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
    case OPT_INT: case OPT_LONG: case OPT_U64: case OPT_MIB:
        if (parse_long(s, &l)) return err_set(err, "%s expects an integer, not '%s'", o->name, s);
        if (o->type == OPT_INT) {
            if (l < -2147483647L || l > 2147483647L) return err_set(err, "%s: %s is out of range", o->name, s);
            *(int *)v = (int)l;
        } else if (o->type == OPT_LONG) {
            *(long *)v = l;
        } else if (o->type == OPT_U64) {
            *(uint64_t *)v = (uint64_t)l;
        } else {
            if (l < 0 || l > (1L << 40)) return err_set(err, "%s: %s MiB is out of range", o->name, s);
            *(size_t *)v = (size_t)l << 20;
        }
        return 0;
    case OPT_F64: case OPT_F32:
        if (parse_double(s, &d)) return err_set(err, "%s expects a number, not '%s'", o->name, s);
        if (o->type == OPT_F64) *(double *)v = d;
        else *(float *)v = (float)d;
        return 0;
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

static int out_of_range(const OptSpec *o, double x) {
    return o->min <= o->max && !(x >= o->min && (o->flags & OPT_OPEN_MAX ? x < o->max : x <= o->max));
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

/* A bound as people write it: integers as integers (a u64 seed's 2^64 - 1 too). */
static int bound_text(const OptSpec *o, double x, char *buf, size_t cap) {
    if (is_integer(o) && fabs(x) < 1.9e19) return snprintf(buf, cap, "%.0f", x);
    return snprintf(buf, cap, "%.15g", x);
}

/* The range as people write it: "in [1, 100]", "in (0, 1]", "in [0, 1)", ">= 0",
 * "> 0", "<= 5", or "" when every value is valid. A side at +-1e300 (or beyond
 * what the type holds) is unbounded and not shown; min 1e-300 is an open 0. In help
 * (loose), an integer's sanity cap of 2^20 or more is left out too: the error
 * message that meets it (loose 0) still names it. */
static void range_text(const OptSpec *o, int loose, char *buf, size_t cap) {
    double type_max = o->type == OPT_INT ? 2147483647.0 : o->type == OPT_U64 ? 18446744073709551615.0
                    : o->type == OPT_LONG ? 9223372036854775807.0 : 1e300;
    int open_min = o->min == 1e-300, open_max = (o->flags & OPT_OPEN_MAX) != 0;
    int no_min = o->min <= -1e300 || (o->type == OPT_U64 && o->min <= 0);
    int no_max = o->max >= 1e300 || o->max >= type_max || (loose && is_integer(o) && o->max >= 1048576);
    char lo[40], hi[40];
    if (open_min) snprintf(lo, sizeof lo, "0");
    else bound_text(o, o->min, lo, sizeof lo);
    bound_text(o, o->max, hi, sizeof hi);
    if (no_min && no_max) snprintf(buf, cap, "%s", "");
    else if (no_max) snprintf(buf, cap, "%s %s", open_min ? ">" : ">=", lo);
    else if (no_min) snprintf(buf, cap, "%s %s", open_max ? "<" : "<=", hi);
    else snprintf(buf, cap, "in %c%s, %s%c", open_min ? '(' : '[', lo, hi, open_max ? ')' : ']');
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
            if (isnan(x) || out_of_range(o, x)) {
                char r[100], val[64];
                range_text(o, 0, r, sizeof r);
                opt_format(o, v, val, sizeof val);
                return err_set(err, "%s must be %s (got %s)", o->name, *r ? r : "a finite number", val);
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
        range_text(o, 1, r, sizeof r);
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
