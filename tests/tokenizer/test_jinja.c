/* tests/tokenizer/test_jinja.c — the chat-template engine against hostile
 * templates (they come with whoever published the model): integers exact in 64
 * bits with Python's floor division and modulo, overflow as an error, range()
 * with its step and limit, and nesting, memory and running time bounded — each
 * a one-line error, never a crash. Plus the ordinary constructs still render. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "tokenizer/jinja.h"

static char out_text[4096];

/* Renders src with an empty context: 0 and the output in out_text, or -1 and
 * the error in err. */
static int render(const char *src, GrpoErr *err) {
    JArena *ar = jar_new();
    JTemplate t;
    char *out = NULL;
    size_t len = 0;
    int rc = jinja_parse(ar, src, &t, err);
    if (!rc) rc = jinja_render(ar, &t, jar_alloc(ar, sizeof(JDict)), &out, &len, err);
    if (!rc) snprintf(out_text, sizeof out_text, "%.*s", (int)(len < 4000 ? len : 4000), out);
    free(out);
    jar_free(ar);
    return rc;
}

static void expect(const char *src, const char *want) {
    GrpoErr err = {{0}};
    int rc = render(src, &err);
    T_CHECK(rc == 0 && !strcmp(out_text, want), "%.80s: rc %d, got '%s' want '%s' (%s)", src, rc,
            rc ? "" : out_text, want, err.msg);
}

static void expect_error(const char *src, const char *want) {
    GrpoErr err = {{0}};
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    int rc = render(src, &err);
    double dt = (double)clock() / CLOCKS_PER_SEC - t0;
    T_CHECK(rc == -1 && strstr(err.msg, want) && !strchr(err.msg, '\n'), "%.80s: rc %d, '%s' (want '%s')", src,
            rc, err.msg, want);
    T_CHECK(dt < 20, "%.80s: took %.1f s of CPU", src, dt);
}

/* src is prefix + n copies of unit + suffix. */
static char *repeat(const char *prefix, const char *unit, int n, const char *suffix) {
    size_t u = strlen(unit), np = strlen(prefix);
    char *s = malloc(np + u * (size_t)n + strlen(suffix) + 1);
    memcpy(s, prefix, np);
    for (int i = 0; i < n; i++) memcpy(s + np + u * (size_t)i, unit, u);
    strcpy(s + np + u * (size_t)n, suffix);
    return s;
}

static void test_integers(void) {
    expect("{{ 9007199254740993 + 0 }}", "9007199254740993");
    expect("{{ 9223372036854775807 - 1 }}", "9223372036854775806");
    expect("{{ 9007199254740993 == 9007199254740992 }}", "False");
    expect("{{ 7 // -2 }} {{ -7 // 2 }} {{ 7 // 2 }} {{ -7 // -2 }}", "-4 -4 3 3");
    expect("{{ -7 % 3 }} {{ 7 % -3 }} {{ 7 % 3 }} {{ -7 % -3 }}", "2 -2 1 -1");
    expect("{{ 7 / 2 }} {{ 6 / 3 }}", "3.5 2.0");
    expect("{{ -7.5 // 2 }} {{ -7.5 % 2 }} {{ 7.5 % -2 }}", "-4.0 0.5 -0.5");
    expect("{{ (-9223372036854775807 - 1) % -1 }}", "0");
    expect("{{ 1 + 10000000000000000000.0 }}", "1e+19");
    expect("{{ true + 1 }}", "2");
    expect_error("{{ 9223372036854775807 + 1 }}", "integer overflow in '+'");
    expect_error("{{ -9223372036854775807 - 2 }}", "integer overflow in '-'");
    expect_error("{{ 4611686018427387904 * 2 }}", "integer overflow in '*'");
    expect_error("{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow in '//'");
    expect_error("{{ -(-9223372036854775807 - 1) }}", "integer overflow in unary '-'");
    expect_error("{{ 9223372036854775808 }}", "integer literal out of the 64-bit range");
    expect_error("{{ 1 // 0 }}", "division by zero");
    expect_error("{{ 1 % 0 }}", "division by zero");
    expect_error("{{ 1.5 / 0 }}", "division by zero");
}

static void test_range(void) {
    expect("{{ range(0, 10, 2) | join(',') }}", "0,2,4,6,8");
    expect("{{ range(10, 0, -3) | join(',') }}", "10,7,4,1");
    expect("{{ range(4) | join(',') }}|{{ range(3, 1) | length }}|{{ range(-2, 2) | join(',') }}", "0,1,2,3|0|-2,-1,0,1");
    expect("{{ range(-9223372036854775807 - 1, 9223372036854775807, 4611686018427387904) | join(',') }}",
           "-9223372036854775808,-4611686018427387904,0,4611686018427387904");
    expect("{{ range(100000) | length }}", "100000");
    expect_error("{{ range(100001) | length }}", "range() of 100001 items is over the limit of 100000");
    expect_error("{{ range(1000000) }}", "over the limit of 100000");
    expect_error("{{ range(0, 5, 0) }}", "range() step must not be zero");
    expect_error("{{ range('a') }}", "range() arguments must be integers");
    expect_error("{{ range() }}", "range() takes 1 to 3 arguments");
}

static void test_nesting(void) {
    char *s = repeat("{{ ", "not ", 100000, "true }}");
    expect_error(s, "nested deeper than 200 levels");
    free(s);
    s = repeat("{{ ", "-", 100000, "1 }}");
    expect_error(s, "nested deeper than 200 levels");
    free(s);
    s = repeat("{{ ", "(", 100000, "1 }}");
    expect_error(s, "nested deeper than 200 levels");
    free(s);
    s = repeat("{{ ", "[", 100000, "1 }}");
    expect_error(s, "nested deeper than 200 levels");
    free(s);
    s = repeat("", "{% if true %}", 50000, "x");
    expect_error(s, "nested deeper than 200 levels");
    free(s);
    s = repeat("{{ 1", " + 1", 100000, " }}");
    expect_error(s, "expression nested too deeply");
    free(s);
    /* 150 levels: within the limits */
    s = repeat("{{ ", "(", 150, "1");
    char *t = repeat(s, ")", 150, " }}");
    expect(t, "1");
    free(s), free(t);
    /* values nested by a loop: printing and comparing them */
    expect_error("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                 "{{ ns.x | tojson }}", "a value nested deeper than the limit");
    expect_error("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                 "{{ ns.x }}", "a value nested deeper than the limit");
    expect_error("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                 "{{ ns.x == ns.x }}", "a value nested deeper than the limit");
}

static void test_size_and_time(void) {
    expect_error("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                 "{{ ns.s | length }}", "memory limit");
    expect_error("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                 "memory limit");
    expect_error("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                 "");
    expect_error("{% set ns = namespace(s='aaaa') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                 "{{ ns.s.replace('a', '" "0123456789012345678901234567890123456789012345678901234567890123456789"
                 "0123456789012345678901234567890123456789') }}", "replace() would make a string over");
    expect_error("{% set ns = namespace(s='aaaa', p='a') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}"
                 "{% endfor %}{% for i in range(10) %}{% set ns.p = ns.p ~ ns.p %}{% endfor %}{{ ns.s.replace(ns.p, 'b') }}",
                 "replace() of a string this long by a pattern this long is over the template's budget");
    expect_error("{% set ns = namespace(s='x') %}{% for i in range(100000) %}{{ ns.s }}{% set ns.s = ns.s ~ 'x' %}"
                 "{% endfor %}", "");
    expect_error("{% set xs = range(1000) %}{% for i in xs %}{% for j in xs %}{% for k in xs %}{% endfor %}"
                 "{% endfor %}{% endfor %}", "over its budget of 20 million steps");
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}", "");
}

static void test_ordinary(void) {
    expect("{{ 'hello'[::-1] }} {{ [1, 2, 3][1:] }} {{ [1, 2, 3][::-2] }} {{ 'abc'[-1] }}", "olleh [2, 3] [3, 1] c");
    expect("{% for x in [3, 1, 2] %}{{ loop.index }}={{ x }}{% if not loop.last %},{% endif %}{% endfor %}", "1=3,2=1,3=2");
    expect("{{ 'a,b,c'.split(',') | join('|') }} {{ 'xax'.replace('a', 'bb') }} {{ {'k': [1, 'v']} | tojson }}",
           "a|b|c xbbx {\"k\": [1, \"v\"]}");
    expect("{{ 2 if false else 3 }}", "3");
    expect("{{ 'xaxax'.replace('a', '') }}|{{ 'aaa'.replace('aa', 'b') }}|{{ 'ab'.replace('b', 'cd') }}|{{ 'a'.replace('zz', 'q') }}",
           "xxx|ba|acd|a");
    expect("{{ 'a--b--'.split('--') | tojson }} {{ '--'.split('--') | length }} {{ ' a  b '.split() | tojson }}",
           "[\"a\", \"b\", \"\"] 2 [\"a\", \"b\"]");
    expect("{% for x in [1, 2] %}{{ loop.previtem is defined }}{{ loop.nextitem is defined }}{% endfor %}",
           "FalseTrueTrueFalse");
}

int main(void) {
    test_integers();
    test_range();
    test_nesting();
    test_size_and_time();
    test_ordinary();
    return t_summary("test_jinja");
}
