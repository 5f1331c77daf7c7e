/* tests/core/test_options.c — declared options (core/options.h): defaults from
 * the rows, parsing of every type with its errors, range and required checks
 * naming the option, enum choices and aliases, the help text reading the default
 * from the value, the record written into checkpoints, and groups placed at an
 * offset inside a larger struct. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/options.h"
#include "testutil.h"

typedef struct {
    int flag, count, kind;
    long steps;
    uint64_t seed;
    double rate, high;
    float temp;
    size_t cache_bytes;
    const char *path;
    StrList names;
    F64List weights;
} Inner;

typedef struct {
    int before;
    Inner in;
} Outer;

static const char *const KINDS[] = {"alpha", "beta", "gamma", NULL};
static const char *const KIND_ALIASES[] = {"true", "alpha", "false", "gamma", NULL};

#define I(f) offsetof(Inner, f)
static const OptSpec rows[] = {
    {"flag", OPT_BOOL, I(flag), 1, NULL, OPT_NO_RANGE, NULL, NULL, 0, "a switch"},
    {"count", OPT_INT, I(count), 8, NULL, 1, 100, NULL, NULL, 0, "how many"},
    {"kind", OPT_ENUM, I(kind), 1, NULL, OPT_NO_RANGE, KINDS, KIND_ALIASES, 0, "which"},
    {"steps", OPT_LONG, I(steps), 0, NULL, 0, 1e300, NULL, NULL, 0, "steps"},
    {"rate", OPT_F64, I(rate), 1e-6, NULL, 1e-300, 1e300, NULL, NULL, 0, "a rate"},
    {"high", OPT_F64, I(high), NAN, NULL, 0, 1, NULL, NULL, OPT_UNSET_NAN, "optional"},
    {"temp", OPT_F32, I(temp), 0.5, NULL, 0, 2, NULL, NULL, 0, "temperature"},
    {"cache_mb", OPT_MIB, I(cache_bytes), 1024, NULL, 1, 4096, NULL, NULL, 0, "cache"},
    {"path", OPT_STR, I(path), 0, "x.txt", OPT_NO_RANGE, NULL, NULL, OPT_NO_RECORD, "a file"},
    {"names", OPT_LIST, I(names), 0, NULL, OPT_NO_RANGE, NULL, NULL, OPT_REQUIRED, "names"},
    {"weights", OPT_F64_LIST, I(weights), 0, NULL, OPT_NO_RANGE, NULL, NULL, 0, "weights"},
};

static void defaults_and_groups(void) {
    Outer o;
    memset(&o, 0x55, sizeof o);
    OptGroup g[2] = {OPT_GROUP(rows, offsetof(Outer, in)), SEED_OPTION_GROUP(offsetof(Outer, in.seed), OPT_SEC_NONE)};
    opts_defaults(g, 2, &o);
    T_CHECK(o.before == 0x55555555, "a group writes only its own struct");
    T_CHECK(o.in.flag == 1 && o.in.count == 8 && o.in.kind == 1 && o.in.steps == 0 && o.in.seed == 42, "defaults");
    T_CHECK(o.in.rate == 1e-6 && isnan(o.in.high) && o.in.temp == 0.5f && o.in.cache_bytes == (size_t)1024 << 20,
            "number defaults");
    T_CHECK(!strcmp(o.in.path, "x.txt") && o.in.names.n == 0 && o.in.weights.n == 0, "string and list defaults");
    size_t base = 0;
    const OptSpec *s = opts_find(g, 2, "seedless", 4, &base);
    T_CHECK(s && !strcmp(s->name, "seed") && base == offsetof(Outer, in.seed), "find by length-limited name");
    T_CHECK(!opts_find(g, 2, "nope", 4, NULL), "unknown name");
    GrpoErr err;
    T_CHECK(opts_check(g, 2, &o, &err) == -1 && strstr(err.msg, "names is required"), "required: %s", err.msg);
    const char *n[] = {"a", "b"};
    o.in.names = (StrList){2, n};
    T_CHECK(opts_check(g, 2, &o, &err) == 0, "valid: %s", err.msg);
}

static void parsing(void) {
    Inner in;
    OptGroup g = OPT_GROUP(rows, 0);
    opts_defaults(&g, 1, &in);
    GrpoErr err;
    const OptSpec *o = opts_find(&g, 1, "flag", 4, NULL);
    T_CHECK(!opt_set_text(o, &in.flag, "False", &err) && in.flag == 0, "False");
    T_CHECK(!opt_set_text(o, &in.flag, "true", &err) && in.flag == 1, "true");
    /* transformers' string_to_bool: yes/true/t/y/1, no/false/f/n/0, any case */
    const char *yes[] = {"yes", "Yes", "TRUE", "t", "Y", "1"}, *no[] = {"no", "NO", "False", "f", "n", "0"};
    for (int i = 0; i < 6; i++) {
        T_CHECK(!opt_set_text(o, &in.flag, yes[i], &err) && in.flag == 1, "%s", yes[i]);
        T_CHECK(!opt_set_text(o, &in.flag, no[i], &err) && in.flag == 0, "%s", no[i]);
    }
    T_CHECK(opt_set_text(o, &in.flag, "maybe", &err) == -1 && strstr(err.msg, "flag takes true or false, not 'maybe'"),
            "%s", err.msg);
    o = opts_find(&g, 1, "count", 5, NULL);
    T_CHECK(!opt_set_text(o, &in.count, "12", &err) && in.count == 12, "int");
    T_CHECK(opt_set_text(o, &in.count, "1.5", &err) == -1 && strstr(err.msg, "count expects an integer, not '1.5'"), "%s",
            err.msg);
    T_CHECK(opt_set_text(o, &in.count, "99999999999", &err) == -1 &&
                strstr(err.msg, "count must be in [1, 100] (got 99999999999)"),
            "int overflow: %s", err.msg);
    in.count = 0;
    T_CHECK(opts_check(&g, 1, &in, &err) == -1 && strstr(err.msg, "count must be in [1, 100] (got 0)"), "%s", err.msg);
    in.count = 8;
    o = opts_find(&g, 1, "kind", 4, NULL);
    T_CHECK(!opt_set_text(o, &in.kind, "gamma", &err) && in.kind == 2, "enum");
    T_CHECK(!opt_set_text(o, &in.kind, "true", &err) && in.kind == 0, "enum alias");
    T_CHECK(opt_set_text(o, &in.kind, "delta", &err) == -1 && strstr(err.msg, "kind 'delta' is not one of alpha, beta or gamma"),
            "%s", err.msg);
    o = opts_find(&g, 1, "rate", 4, NULL);
    T_CHECK(opt_set_text(o, &in.rate, "fast", &err) == -1 && strstr(err.msg, "rate expects a number"), "number");
    T_CHECK(!opt_set_text(o, &in.rate, "0", &err) && opts_check(&g, 1, &in, &err) == -1 &&
                strstr(err.msg, "rate must be > 0 (got 0)"),
            "%s", err.msg);
    in.rate = 1;
    o = opts_find(&g, 1, "high", 4, NULL);
    const char *n[] = {"a"};
    in.names = (StrList){1, n};
    T_CHECK(opts_check(&g, 1, &in, &err) == 0, "NaN means unset: %s", err.msg);
    T_CHECK(!opt_set_text(o, &in.high, "2", &err) && opts_check(&g, 1, &in, &err) == -1 && strstr(err.msg, "high must be in [0, 1]"),
            "%s", err.msg);
    in.high = NAN;
    o = opts_find(&g, 1, "cache_mb", 8, NULL);
    T_CHECK(!opt_set_text(o, &in.cache_bytes, "3", &err) && in.cache_bytes == (size_t)3 << 20, "MiB");
    T_CHECK(opt_set_text(o, &in.cache_bytes, "-1", &err) == -1, "negative MiB");
    in.weights = (F64List){1, (double[]){INFINITY}};
    T_CHECK(opts_check(&g, 1, &in, &err) == -1 && strstr(err.msg, "weights: value 1 is not a finite number"), "%s", err.msg);
}

static void help_and_record(void) {
    Inner in;
    OptGroup g[2] = {OPT_GROUP(rows, 0), SEED_OPTION_GROUP(offsetof(Inner, seed), OPT_SEC_NONE)};
    opts_defaults(g, 2, &in);
    char buf[600];
    in.count = 9; /* a command's own default is what --help shows */
    opt_help(&rows[1], &in.count, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "how many (default 9; in [1, 100])"), "help: %s", buf);
    opt_help(&rows[2], &in.kind, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "which (default beta; alpha, beta or gamma)"), "enum help: %s", buf);
    opt_help(&rows[4], &in.rate, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "a rate (default 1e-06; > 0)"), "rate help: %s", buf);
    opt_help(&rows[9], &in.names, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "names (required)"), "required help: %s", buf);
    const char *n[] = {"a", "b c"};
    in.names = (StrList){2, n};
    in.weights = (F64List){2, (double[]){1, 0.5}};
    json_t *j = opts_to_json(g, 2, &in);
    T_CHECK(json_integer_value(json_object_get(j, "count")) == 9, "count recorded");
    T_CHECK(json_real_value(json_object_get(j, "rate")) == 1e-6, "rate recorded");
    T_CHECK(!strcmp(json_string_value(json_object_get(j, "kind")), "beta"), "enum recorded by name");
    T_CHECK(json_is_null(json_object_get(j, "high")), "unset recorded as null");
    T_CHECK(json_is_true(json_object_get(j, "flag")), "bool recorded");
    T_CHECK(json_integer_value(json_object_get(j, "cache_mb")) == 1024, "MiB recorded in MiB");
    T_CHECK(json_integer_value(json_object_get(j, "seed")) == 42, "seed recorded");
    T_CHECK(!json_object_get(j, "path"), "NO_RECORD left out");
    json_t *names = json_object_get(j, "names"), *w = json_object_get(j, "weights");
    T_CHECK(json_array_size(names) == 2 && !strcmp(json_string_value(json_array_get(names, 1)), "b c"), "list recorded");
    T_CHECK(json_array_size(w) == 2 && json_real_value(json_array_get(w, 1)) == 0.5, "number list recorded");
    json_decref(j);
    opt_format(&rows[6], &in.temp, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "0.5"), "float format: %s", buf);
}

/* A bool with OPT_AUTO (bf16's row): "auto" is -1, shown and recorded as auto; a plain
 * bool refuses "auto", and the auto one's error names the three values. */
static void auto_bool(void) {
    static const OptSpec row[] = {{"fast", OPT_BOOL, 0, -1, NULL, OPT_NO_RANGE, NULL, NULL, OPT_AUTO, "speed"}};
    int v = 7;
    OptGroup g = OPT_GROUP(row, 0);
    opts_defaults(&g, 1, &v);
    T_CHECK(v == -1, "auto default: %d", v);
    char buf[200];
    opt_help(&row[0], &v, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "speed (default auto)"), "auto help: %s", buf);
    json_t *j = opts_to_json(&g, 1, &v);
    T_CHECK(!strcmp(json_string_value(json_object_get(j, "fast")) ? json_string_value(json_object_get(j, "fast")) : "",
                    "auto"), "auto recorded as \"auto\"");
    json_decref(j);
    GrpoErr err;
    T_CHECK(!opt_set_text(&row[0], &v, "false", &err) && v == 0, "false");
    T_CHECK(!opt_set_text(&row[0], &v, "AUTO", &err) && v == -1, "AUTO");
    T_CHECK(opt_set_text(&row[0], &v, "maybe", &err) == -1 &&
                strstr(err.msg, "fast takes true or false or auto, not 'maybe'"),
            "%s", err.msg);
    int plain = 0;
    T_CHECK(opt_set_text(&rows[0], &plain, "auto", &err) == -1 &&
                strstr(err.msg, "flag takes true or false, not 'auto'"),
            "a plain bool took auto: %s", err.msg);
}

/* Ranges in help and errors as people write them: no side shown that is effectively
 * unbounded (1e300, a type's limit; in help, an integer's cap of 2^20 or more),
 * integers as integers, open ends with ( and ). */
static void ranges(void) {
    typedef struct {
        int n;
        uint64_t seed;
        double any, frac, beta, neg;
    } R;
    static const OptSpec r[] = {
        {"n", OPT_INT, offsetof(R, n), 8, NULL, 1, 1 << 20, NULL, NULL, 0, "count"},
        {"seed", OPT_U64, offsetof(R, seed), 42, NULL, 0, 18446744073709551615.0, NULL, NULL, 0, "seed"},
        {"any", OPT_F64, offsetof(R, any), 1, NULL, -1e300, 1e300, NULL, NULL, 0, "any number"},
        {"frac", OPT_F64, offsetof(R, frac), 1, NULL, 1e-300, 1, NULL, NULL, 0, "fraction"},
        {"beta", OPT_F64, offsetof(R, beta), 0.5, NULL, 0, 1, NULL, NULL, OPT_OPEN_MAX, "beta"},
        {"neg", OPT_F64, offsetof(R, neg), -1, NULL, -1e300, 0, NULL, NULL, 0, "at most 0"},
    };
    R v;
    OptGroup g = OPT_GROUP(r, 0);
    opts_defaults(&g, 1, &v);
    const char *want[] = {"count (default 8; in [1, 1048576])", "seed (default 42; in [0, 2^64 - 1])",
                          "any number (default 1)",
                          "fraction (default 1; in (0, 1])", "beta (default 0.5; in [0, 1))", "at most 0 (default -1; <= 0)"};
    char buf[300];
    for (int i = 0; i < 6; i++) {
        opt_help(&r[i], opt_value(&r[i], &v, 0), buf, sizeof buf);
        T_CHECK(!strcmp(buf, want[i]), "help %s: '%s', want '%s'", r[i].name, buf, want[i]);
    }
    GrpoErr err;
    v.n = 2000000; /* the cap help prints is the one met */
    T_CHECK(opts_check(&g, 1, &v, &err) == -1 && strstr(err.msg, "n must be in [1, 1048576] (got 2000000)"), "%s", err.msg);
    v.n = 8, v.frac = 0;
    T_CHECK(opts_check(&g, 1, &v, &err) == -1 && strstr(err.msg, "frac must be in (0, 1] (got 0)"), "%s", err.msg);
    v.frac = 1, v.any = INFINITY;
    T_CHECK(opts_check(&g, 1, &v, &err) == -1 && strstr(err.msg, "any must be a finite number (got inf)"), "%s", err.msg);
    v.any = 1, v.neg = 0.5;
    T_CHECK(opts_check(&g, 1, &v, &err) == -1 && strstr(err.msg, "neg must be <= 0 (got 0.5)"), "%s", err.msg);
}

/* --help's layout: rows under their section's heading in the sections' order (a row's
 * own section, else its group's; neither: "other options" last), each section's
 * rows in group order, help wrapped to the width with a range kept whole. */
static void help_layout(void) {
    typedef struct {
        int a, b, c, d;
        double e;
    } H;
    static const OptSpec first[] = {
        {"alpha", OPT_INT, offsetof(H, a), 1, NULL, 0, 9, NULL, NULL, OPT_IN(OPT_SEC_LORA), "lora row"},
        {"beta", OPT_INT, offsetof(H, b), 2, NULL, OPT_NO_RANGE, NULL, NULL, 0, "the group's section"},
        {"gamma", OPT_INT, offsetof(H, c), 3, NULL, OPT_NO_RANGE, NULL, NULL, OPT_IN(OPT_SEC_MODEL_DATA), "data row"},
    };
    static const OptSpec second[] = {
        {"delta", OPT_INT, offsetof(H, d), 4, NULL, OPT_NO_RANGE, NULL, NULL, 0, "no section"},
        {"epsilon_with_a_name_too_long_for_its_column", OPT_F64, offsetof(H, e), 0.5, NULL, 0, 1, NULL, NULL, OPT_IN(OPT_SEC_GENERATION),
         "words words words words words words words words words words words"},
    };
    H v;
    OptGroup g[2] = {OPT_GROUP_IN(first, 0, OPT_SEC_GENERATION), OPT_GROUP(second, 0)};
    opts_defaults(g, 2, &v);
    char *t = opts_help_text(g, 2, &v, 60);
    const char *order[] = {"model & data:\n", "--gamma N", "\ngeneration:\n", "--beta N", "--epsilon_with_a_name_too_long_for_its_column N",
                           "\nLoRA:\n", "--alpha N", "\nother options:\n", "--delta N"};
    const char *at = t;
    for (int i = 0; i < 9; i++) {
        const char *f = strstr(at, order[i]);
        T_CHECK(f != NULL, "help layout: '%s' missing or out of order in:\n%s", order[i], t);
        if (f) at = f;
    }
    int longest = 0, len = 0, ranges_whole = strstr(t, "in [0, 1]") != NULL;
    for (const char *p = t; *p; p++) {
        len = *p == '\n' ? 0 : len + 1;
        if (len > longest) longest = len;
    }
    T_CHECK(longest <= 60, "a help line of %d columns at width 60:\n%s", longest, t);
    T_CHECK(ranges_whole, "a range broken over lines:\n%s", t);
    /* the long name takes its own line, its help below at the column of the others */
    T_CHECK(strstr(t, "  --epsilon_with_a_name_too_long_for_its_column N\n") != NULL, "long name:\n%s", t);
    free(t);
    /* no row with a section: one heading */
    static const OptSpec none[] = {{"zeta", OPT_INT, 0, 1, NULL, OPT_NO_RANGE, NULL, NULL, 0, "z"}};
    OptGroup plain = OPT_GROUP(none, 0);
    int z;
    opts_defaults(&plain, 1, &z);
    t = opts_help_text(&plain, 1, &z, 100);
    T_CHECK(!strncmp(t, "options:\n  --zeta N", 19) && !strstr(t, "other"), "sectionless help:\n%s", t);
    free(t);
}

int main(void) {
    defaults_and_groups();
    help_layout();
    ranges();
    parsing();
    help_and_record();
    auto_bool();
    return t_summary("test_options");
}
