/* tests/core/test_option_ranges.c — every number option of `grpo train` answers
 * as its --help says (issue 38): for each row of the command's option table, the
 * range is read back from the row's help text (opt_help, what --help prints), and
 * each probe — nan, inf, -inf, 1e400, -1e400, 1e-310, -0, the printed bounds, the
 * first values past them, a huge integer — is accepted exactly when it lies inside
 * that printed range and the row's type holds it; a refusal names the option and
 * quotes the printed range, never an inverted one. The seed takes what
 * torch.manual_seed takes, [-2^63, 2^64 - 1], a negative seed as its two's complement. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/options.h"
#include "grpo/trainer.h"
#include "testutil.h"

typedef struct {
    int any;                 /* a range was printed */
    long double lo, hi;      /* +-inf where open-ended */
    int lo_open, hi_open;    /* "(", ">" / ")", "<" */
    char text[100];          /* as printed: "in [0, 1)", ">= 0" */
} Printed;

static int is_number_type(OptType t) {
    return t == OPT_INT || t == OPT_LONG || t == OPT_U64 || t == OPT_F64 || t == OPT_F32 || t == OPT_MIB;
}

static int is_integer_type(OptType t) { return t == OPT_INT || t == OPT_LONG || t == OPT_U64 || t == OPT_MIB; }

/* A printed bound: a number, or a seed's -2^63 / 2^64 - 1. */
static long double bound_value(const char *s, char **end) {
    char *e;
    if (!strncmp(s, "-2^63", 5)) {
        if (end) *end = (char *)s + 5;
        return -9223372036854775808.0L;
    }
    if (!strncmp(s, "2^64 - 1", 8)) {
        if (end) *end = (char *)s + 8;
        return 18446744073709551615.0L;
    }
    long double x = strtold(s, &e);
    if (end) *end = e;
    return x;
}

/* The range at the end of a help text "... (default 1; in (0, 1])", or none. */
static Printed printed_range(const char *help) {
    Printed p = {0, -INFINITY, INFINITY, 0, 0, ""};
    const char *marks[] = {"; in ", "(in ", "; >", "(>", "; <", "(<"};
    const char *at = NULL;
    for (int i = 0; i < 6; i++) {
        const char *s = help, *f;
        while ((f = strstr(s, marks[i]))) at = f > at ? f : at, s = f + 1;
    }
    if (!at) return p;
    at += at[0] == ';' ? 2 : 1;
    size_t n = strlen(at);
    if (n && at[n - 1] == ')') n--; /* the help's closing parenthesis */
    snprintf(p.text, sizeof p.text, "%.*s", (int)n, at);
    p.any = 1;
    if (!strncmp(at, "in ", 3)) {
        p.lo_open = at[3] == '(';
        char *end;
        p.lo = bound_value(at + 4, &end);
        p.hi = bound_value(end + 2, &end);
        p.hi_open = *end == ')';
    } else if (at[0] == '>') {
        p.lo_open = at[1] != '=';
        p.lo = bound_value(at + (p.lo_open ? 2 : 3), NULL);
    } else {
        p.hi_open = at[1] != '=';
        p.hi = bound_value(at + (p.hi_open ? 2 : 3), NULL);
    }
    return p;
}

/* Whether the row should take text t, from the printed range and its type alone. */
static int should_accept(const OptSpec *o, const Printed *p, const char *t) {
    char *end;
    if (is_integer_type(o->type)) {
        /* an integer in decimal digits, inside the type (a seed: -2^63 .. 2^64 - 1) */
        const char *d = t + (t[0] == '-');
        if (!*d || strspn(d, "0123456789") != strlen(d)) return 0;
        long double x = strtold(t, NULL);
        long double tmax = o->type == OPT_INT ? 2147483647.0L : o->type == OPT_LONG ? 9223372036854775807.0L
                         : o->type == OPT_U64 ? 18446744073709551615.0L : 1099511627776.0L;
        long double tmin = o->type == OPT_U64 ? -9223372036854775808.0L : o->type == OPT_MIB ? 0 : -tmax;
        if (x > tmax || x < tmin) return 0;
        return !((p->lo_open ? x <= p->lo : x < p->lo) || (p->hi_open ? x >= p->hi : x > p->hi));
    }
    long double x = strtod(t, &end);
    if (!isfinite(x)) return 0;
    if (o->type == OPT_F32 && (fabsl(x) > FLT_MAX || (x != 0 && (float)x == 0))) return 0;
    if (o->type == OPT_F32) x = (float)x; /* what the row stores */
    return !((p->lo_open ? x <= p->lo : x < p->lo) || (p->hi_open ? x >= p->hi : x > p->hi));
}

/* The first value past bound b going in direction dir, as text the row parses. */
static void past(const OptSpec *o, long double b, int dir, char *buf, size_t cap) {
    if (is_integer_type(o->type)) {
        long double x = b + dir;
        if (o->type == OPT_U64 && dir > 0) snprintf(buf, cap, "18446744073709551616"); /* only bound: 2^64 - 1 */
        else if (o->type == OPT_U64 && dir < 0 && b < -9e18) snprintf(buf, cap, "-9223372036854775809");
        else snprintf(buf, cap, "%.0Lf", x);
    } else if (o->type == OPT_F32) {
        snprintf(buf, cap, "%.9g", (double)nextafterf((float)b, dir > 0 ? INFINITY : -INFINITY));
    } else {
        snprintf(buf, cap, "%.17g", nextafter((double)b, dir > 0 ? INFINITY : -INFINITY));
    }
}

static void bound(const OptSpec *o, long double b, char *buf, size_t cap) {
    if (o->type == OPT_U64 && b > 1.8e19) snprintf(buf, cap, "18446744073709551615");
    else if (o->type == OPT_U64 && b < -9.2e18) snprintf(buf, cap, "-9223372036854775808");
    else if (is_integer_type(o->type)) snprintf(buf, cap, "%.0Lf", b);
    else snprintf(buf, cap, "%.17Lg", b);
}

static int rows_checked, probes_checked;

static void probe_row(const OptSpec *o, size_t base, const Printed *p) {
    TrainConfig c;
    train_config_default(&c);
    OptGroup one = {o, 1, base, OPT_SEC_NONE};
    char probes[20][64];
    int np = 0;
    const char *fixed[] = {"nan", "NaN", "inf", "-inf", "1e400", "-1e400", "1e-310", "-0", "0",
                           "99999999999999999999999", "-99999999999999999999999"};
    for (int i = 0; i < 11; i++) snprintf(probes[np++], 64, "%s", fixed[i]);
    if (isfinite(p->lo)) bound(o, p->lo, probes[np++], 64), past(o, p->lo, -1, probes[np++], 64);
    if (isfinite(p->hi)) bound(o, p->hi, probes[np++], 64), past(o, p->hi, 1, probes[np++], 64);
    for (int i = 0; i < np; i++) {
        const char *t = probes[i];
        TrainConfig w = c;
        GrpoErr err = {{0}};
        void *v = opt_value(o, &w, base);
        int rc = opt_set_text(o, v, t, &err);
        if (rc == 0) rc = opts_check(&one, 1, &w, &err);
        int want = should_accept(o, p, t);
        probes_checked++;
        T_CHECK((rc == 0) == want, "--%s %s: %s (printed range '%s')%s%s", o->name, t, rc == 0 ? "accepted" : "refused",
                p->text, rc ? ": " : "", rc ? err.msg : "");
        if (rc == 0) continue;
        T_CHECK(strstr(err.msg, o->name) != NULL, "--%s %s: the message names the option: %s", o->name, t, err.msg);
        /* a range refusal quotes the printed range; a text that is no integer, or that
         * rounds to 0, says so instead */
        int other = strstr(err.msg, "expects an integer") || strstr(err.msg, "closer to 0 than");
        T_CHECK(other || (p->any ? strstr(err.msg, p->text) != NULL : strstr(err.msg, "a finite number") != NULL),
                "--%s %s: the message quotes the printed range '%s': %s", o->name, t, p->text, err.msg);
        T_CHECK(!strstr(err.msg, "[1, 0]"), "--%s %s: an inverted range: %s", o->name, t, err.msg);
    }
}

static void every_train_option(void) {
    TrainConfig c;
    train_config_default(&c);
    OptGroup g[TRAIN_CONFIG_N_GROUPS];
    train_config_groups(g);
    for (int k = 0; k < TRAIN_CONFIG_N_GROUPS; k++)
        for (int i = 0; i < g[k].n; i++) {
            const OptSpec *o = &g[k].specs[i];
            if (!is_number_type(o->type)) continue;
            char help[800];
            opt_help(o, opt_value(o, &c, g[k].base), help, sizeof help);
            Printed p = printed_range(help);
            /* a row with bounds declares them in its help */
            T_CHECK(p.any || o->min > o->max || (o->min <= -1e300 && o->max >= 1e300),
                    "--%s declares [%g, %g] but its help prints none: %s", o->name, o->min, o->max, help);
            probe_row(o, g[k].base, &p);
            rows_checked++;
        }
    T_CHECK(rows_checked > 40, "%d number rows", rows_checked);
}

/* The seed as torch.manual_seed takes it: -1 is 2^64 - 1 (two's complement), the
 * ends of [-2^63, 2^64 - 1] are values, one past them is refused. */
static void seeds(void) {
    uint64_t s = 0;
    GrpoErr err;
    T_CHECK(!opt_set_text(seed_option, &s, "-1", &err) && s == UINT64_MAX, "seed -1 = 2^64 - 1");
    T_CHECK(!opt_set_text(seed_option, &s, "18446744073709551615", &err) && s == UINT64_MAX, "seed 2^64 - 1");
    T_CHECK(!opt_set_text(seed_option, &s, "-9223372036854775808", &err) && s == (uint64_t)1 << 63, "seed -2^63");
    T_CHECK(!opt_set_text(seed_option, &s, "-0", &err) && s == 0, "seed -0");
    T_CHECK(opt_set_text(seed_option, &s, "18446744073709551616", &err) == -1 &&
                strstr(err.msg, "seed must be in [-2^63, 2^64 - 1] (got 18446744073709551616)"),
            "%s", err.msg);
    T_CHECK(opt_set_text(seed_option, &s, "1e3", &err) == -1 && strstr(err.msg, "seed expects an integer"), "%s", err.msg);
}

/* The messages of a row without a range and of subnormals. */
static void messages(void) {
    typedef struct {
        double any, pos;
        float f;
    } R;
    static const OptSpec r[] = {
        {"any", OPT_F64, offsetof(R, any), 1, NULL, OPT_NO_RANGE, NULL, NULL, 0, "any"},
        {"pos", OPT_F64, offsetof(R, pos), 1, NULL, 1e-300, 1e300, NULL, NULL, 0, "positive"},
        {"f", OPT_F32, offsetof(R, f), 1, NULL, 0, 1e300, NULL, NULL, 0, "a float"},
    };
    R v;
    OptGroup g = OPT_GROUP(r, 0);
    opts_defaults(&g, 1, &v);
    GrpoErr err;
    T_CHECK(opt_set_text(&r[0], &v.any, "nan", &err) == -1 && !strcmp(err.msg, "any must be a finite number (got nan)"),
            "%s", err.msg);
    T_CHECK(!opt_set_text(&r[1], &v.pos, "1e-310", &err) && v.pos == 1e-310 && !opts_check(&g, 1, &v, &err),
            "a subnormal is > 0: %s", err.msg);
    T_CHECK(opt_set_text(&r[1], &v.pos, "1e-400", &err) == -1 && strstr(err.msg, "pos: 1e-400 is closer to 0 than a double"),
            "%s", err.msg);
    T_CHECK(opt_set_text(&r[1], &v.pos, "1e400", &err) == -1 &&
                !strcmp(err.msg, "pos must be a finite number > 0 (got 1e400)"), "%s", err.msg);
    T_CHECK(opt_set_text(&r[2], &v.f, "1e-310", &err) == -1 && strstr(err.msg, "f: 1e-310 is closer to 0 than a 32-bit float"),
            "%s", err.msg);
    T_CHECK(opt_set_text(&r[2], &v.f, "1e39", &err) == -1 && strstr(err.msg, "f must be >= 0, at most 3.402823e+38"),
            "%s", err.msg);
    T_CHECK(!opt_set_text(&r[2], &v.f, "1e-40", &err) && v.f > 0, "a float subnormal is a value");
}

int main(void) {
    every_train_option();
    seeds();
    messages();
    printf("%d rows, %d probes\n", rows_checked, probes_checked);
    return t_summary("test_option_ranges");
}
