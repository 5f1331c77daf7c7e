/* tokenizer/jinja_builtins.c — what a chat template can call: string methods
 * (startswith, split, strip, replace, ...), dict methods (get, items, keys,
 * values), the global functions (namespace, dict, range, raise_exception,
 * strftime_now), the filters (length, tojson, join, default, ...) and the tests
 * (defined, none, string, ...). Anything else is an error naming it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/jinja_eval.h"

/* Where pat next occurs in s at or after i (s.n when nowhere): position by
 * position, first byte then the rest, so that each call costs what it scans. */
static size_t find_from(JStr s, JStr pat, size_t i) {
    for (; i + pat.n <= s.n; i++)
        if (s.p[i] == pat.p[0] && !memcmp(s.p + i, pat.p, pat.n)) return i;
    return s.n;
}

/* split() and replace() compare the pattern at every position: a long text with
 * a long pattern is refused rather than left to run for hours. */
static int search_too_long(JEval *e, const JExpr *x, const char *what, JStr s, JStr pat) {
    if ((double)s.n * (double)pat.n <= 2e9) return 0;
    jx_fail(e, x->line, "%.*s of a string this long by a pattern this long is over the template's budget", what,
            strlen(what));
    return 1;
}

static JVal str_method(JEval *e, const JExpr *x, JStr s, JStr m, JVal *args, int n) {
    JStr *a0 = n > 0 && args[0].k == JV_STR ? &args[0].u.s : NULL;
    if (jstr_eq(m, (JStr){"startswith", 10}) && a0)
        return jv_bool(a0->n <= s.n && !memcmp(s.p, a0->p, a0->n));
    if (jstr_eq(m, (JStr){"endswith", 8}) && a0)
        return jv_bool(a0->n <= s.n && !memcmp(s.p + s.n - a0->n, a0->p, a0->n));
    if (jstr_eq(m, (JStr){"strip", 5})) return jv_str(jx_strip(s, a0, 1, 1));
    if (jstr_eq(m, (JStr){"lstrip", 6})) return jv_str(jx_strip(s, a0, 1, 0));
    if (jstr_eq(m, (JStr){"rstrip", 6})) return jv_str(jx_strip(s, a0, 0, 1));
    if (jstr_eq(m, (JStr){"upper", 5}) || jstr_eq(m, (JStr){"lower", 5})) {
        JStr r = jx_strdup(e, s.p, s.n);
        for (size_t i = 0; i < r.n; i++) {
            char c = r.p[i];
            ((char *)r.p)[i] = m.p[0] == 'u' ? (c >= 'a' && c <= 'z' ? c - 32 : c) : (c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        return jv_str(r);
    }
    if (jstr_eq(m, (JStr){"split", 5})) {
        if ((s.n + 1) * sizeof(JVal) > JINJA_MAX_BYTES - jar_bytes(e->ar)) /* up to a piece per byte */
            return jx_fail(e, x->line, "split() of a string this long is over the render's memory limit%.*s", "", 0);
        JList *l = jar_alloc(e->ar, sizeof *l);
        if (!a0) { /* whitespace runs */
            size_t i = 0;
            while (i < s.n) {
                while (i < s.n && jx_is_space(s.p[i])) i++;
                size_t st = i;
                while (i < s.n && !jx_is_space(s.p[i])) i++;
                if (i > st) jlist_push(e->ar, l, jv_str((JStr){s.p + st, i - st}));
            }
            return jv_list(l);
        }
        if (!a0->n) return jx_fail(e, x->line, "split: empty separator%.*s", "", 0);
        if (search_too_long(e, x, "split()", s, *a0)) return UNDEF;
        size_t st = 0;
        for (size_t i; (i = find_from(s, *a0, st)) < s.n; st = i + a0->n)
            jlist_push(e->ar, l, jv_str((JStr){s.p + st, i - st}));
        jlist_push(e->ar, l, jv_str((JStr){s.p + st, s.n - st}));
        return jv_list(l);
    }
    if (jstr_eq(m, (JStr){"replace", 7}) && n >= 2 && a0 && args[1].k == JV_STR && a0->n) {
        if (search_too_long(e, x, "replace()", s, *a0)) return UNDEF;
        size_t hits = 0;
        for (size_t i = 0; (i = find_from(s, *a0, i)) < s.n; i += a0->n) hits++;
        if (args[1].u.s.n > a0->n && hits * (args[1].u.s.n - a0->n) > JINJA_MAX_BYTES - s.n)
            return jx_fail(e, x->line, "replace() would make a string over the render's memory limit%.*s", "", 0);
        TokBuf b = {0};
        for (size_t i = 0, at; i < s.n; i = at + a0->n) {
            at = find_from(s, *a0, i);
            tbuf_put(&b, s.p + i, at - i);
            if (at == s.n) break;
            tbuf_put(&b, args[1].u.s.p, args[1].u.s.n);
        }
        JStr r = jx_strdup(e, b.p ? b.p : "", b.n);
        tbuf_free(&b);
        return jv_str(r);
    }
    return jx_fail(e, x->line, "unsupported string method '%.*s'", m.p, m.n);
}

/* range(stop), range(start, stop[, step]) as Python's, up to JINJA_MAX_RANGE items. */
static JVal range(JEval *e, const JExpr *x, const JVal *args, int n) {
    if (n < 1 || n > 3) return jx_fail(e, x->line, "range() takes 1 to 3 arguments%.*s", "", 0);
    for (int i = 0; i < n; i++)
        if (args[i].k != JV_INT && args[i].k != JV_BOOL)
            return jx_fail(e, x->line, "range() arguments must be integers%.*s", "", 0);
    long long lo = 0, hi, step = 1;
    if (n == 1) hi = args[0].u.i;
    else lo = args[0].u.i, hi = args[1].u.i;
    if (n == 3) step = args[2].u.i;
    if (!step) return jx_fail(e, x->line, "range() step must not be zero%.*s", "", 0);
    /* the count, in unsigned arithmetic: hi - lo may not fit in 64 bits */
    unsigned long long span = step > 0 ? (hi > lo ? (unsigned long long)hi - (unsigned long long)lo : 0)
                                       : (lo > hi ? (unsigned long long)lo - (unsigned long long)hi : 0);
    unsigned long long mag = step > 0 ? (unsigned long long)step : 0ULL - (unsigned long long)step;
    unsigned long long count = span ? (span - 1) / mag + 1 : 0;
    if (count > JINJA_MAX_RANGE) {
        char m[128];
        snprintf(m, sizeof m, "range() of %llu items is over the limit of %d%%.*s", count, JINJA_MAX_RANGE);
        return jx_fail(e, x->line, m, "", 0);
    }
    e->steps += (long long)count;
    JList *l = jar_alloc(e->ar, sizeof *l);
    for (unsigned long long k = 0; k < count; k++) /* lo + k * step, which lies in [lo, hi) */
        jlist_push(e->ar, l, jv_int((long long)((unsigned long long)lo + k * (unsigned long long)step)));
    return jv_list(l);
}

JVal jx_call(JEval *e, const JExpr *x) {
    JVal args[8];
    int n = x->n_args < 8 ? x->n_args : 8;
    for (int i = 0; i < n; i++) args[i] = jx_eval(e, x->args[i]);
    if (x->a->kind == JE_ATTR) { /* a method */
        JVal obj = jx_eval(e, x->a->a);
        JStr m = x->a->s;
        if (obj.k == JV_STR) return str_method(e, x, obj.u.s, m, args, n);
        if (obj.k == JV_DICT && jstr_eq(m, (JStr){"get", 3}) && n >= 1 && args[0].k == JV_STR) {
            JVal *v = jdict_get(obj.u.d, args[0].u.s);
            return v ? *v : n >= 2 ? args[1] : (JVal){.k = JV_NONE};
        }
        if (obj.k == JV_DICT && (jstr_eq(m, (JStr){"items", 5}) || jstr_eq(m, (JStr){"keys", 4}) ||
                                 jstr_eq(m, (JStr){"values", 6}))) {
            JList *l = jar_alloc(e->ar, sizeof *l);
            for (int i = 0; i < obj.u.d->n; i++) {
                JVal k = jv_str(obj.u.d->keys[i]), v = obj.u.d->vals[i];
                if (m.p[0] == 'k') jlist_push(e->ar, l, k);
                else if (m.p[0] == 'v') jlist_push(e->ar, l, v);
                else {
                    JList *pair = jar_alloc(e->ar, sizeof *pair);
                    jlist_push(e->ar, pair, k);
                    jlist_push(e->ar, pair, v);
                    jlist_push(e->ar, l, jv_list(pair));
                }
            }
            return jv_list(l);
        }
        return jx_fail(e, x->line, "unsupported method '%.*s'", m.p, m.n);
    }
    if (x->a->kind != JE_NAME) return jx_fail(e, x->line, "unsupported call%.*s", "", 0);
    JStr f = x->a->s;
    if (jstr_eq(f, (JStr){"namespace", 9}) || jstr_eq(f, (JStr){"dict", 4})) {
        JVal v = {.k = f.p[0] == 'n' ? JV_NS : JV_DICT};
        v.u.d = jar_alloc(e->ar, sizeof *v.u.d);
        for (int i = 0; i < n; i++)
            if (x->kw[i].n) jdict_set(e->ar, v.u.d, x->kw[i], args[i]);
        return v;
    }
    if (jstr_eq(f, (JStr){"raise_exception", 15})) {
        JStr msg = n ? jx_stringify(e, args[0], 0) : (JStr){"", 0};
        return jx_fail(e, x->line, "the template raised: %.*s", msg.p, msg.n);
    }
    if (jstr_eq(f, (JStr){"range", 5})) return range(e, x, args, n);
    if (jstr_eq(f, (JStr){"strftime_now", 12}) && n >= 1 && args[0].k == JV_STR) {
        char fmt[128], buf[256];
        snprintf(fmt, sizeof fmt, "%.*s", (int)args[0].u.s.n, args[0].u.s.p);
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        size_t k = strftime(buf, sizeof buf, fmt, &tmv);
        return jv_str(jx_strdup(e, buf, k));
    }
    return jx_fail(e, x->line, "unsupported function '%.*s'", f.p, f.n);
}

JVal jx_filter(JEval *e, const JExpr *x) {
    JVal v = jx_eval(e, x->a);
    JStr f = x->s;
    JVal a[4];
    int n = x->n_args < 4 ? x->n_args : 4;
    for (int i = 0; i < n; i++) a[i] = jx_eval(e, x->args[i]);
#define IS(name) jstr_eq(f, (JStr){name, sizeof name - 1})
    if (IS("length") || IS("count")) {
        if (v.k == JV_STR) { /* characters, not bytes */
            long long c = 0;
            for (size_t i = 0; i < v.u.s.n; i++) c += ((unsigned char)v.u.s.p[i] & 0xC0) != 0x80;
            return jv_int(c);
        }
        if (v.k == JV_LIST) return jv_int(v.u.l->n);
        if (v.k == JV_DICT) return jv_int(v.u.d->n);
        return jx_fail(e, x->line, "length of a value without one%.*s", "", 0);
    }
    if (IS("trim")) return v.k == JV_STR ? jv_str(jx_strip(v.u.s, NULL, 1, 1)) : v;
    if (IS("tojson")) return jv_str(jx_stringify(e, v, 1));
    if (IS("string")) return jv_str(jx_stringify(e, v, 0));
    if (IS("safe")) return v;
    if (IS("upper") || IS("lower")) {
        if (v.k != JV_STR) return v;
        return str_method(e, x, v.u.s, f, NULL, 0);
    }
    if (IS("default") || IS("d")) return v.k == JV_UNDEF ? (n ? a[0] : jv_cstr("")) : v;
    if (IS("first") || IS("last")) {
        if (v.k != JV_LIST || !v.u.l->n) return UNDEF;
        return v.u.l->v[f.p[0] == 'f' ? 0 : v.u.l->n - 1];
    }
    if (IS("join") && v.k == JV_LIST) {
        TokBuf b = {0};
        for (int i = 0; i < v.u.l->n; i++) {
            if (i && n) tbuf_put(&b, a[0].u.s.p, a[0].k == JV_STR ? a[0].u.s.n : 0);
            jx_to_text(e, &b, v.u.l->v[i], 0, 1);
            if (e->failed) break;
        }
        JStr r = jx_strdup(e, b.p ? b.p : "", b.n);
        tbuf_free(&b);
        return jv_str(r);
    }
    if (IS("list")) return v;
    if (IS("reverse") && v.k == JV_LIST) {
        JList *l = jar_alloc(e->ar, sizeof *l);
        for (int i = v.u.l->n - 1; i >= 0; i--) jlist_push(e->ar, l, v.u.l->v[i]);
        return jv_list(l);
    }
    if (IS("items") && v.k == JV_DICT) {
        JExpr m = {.kind = JE_CALL, .line = x->line};
        JExpr attr = {.kind = JE_ATTR, .s = {"items", 5}, .a = x->a};
        m.a = &attr;
        return jx_call(e, &m);
    }
    return jx_fail(e, x->line, "unsupported filter '%.*s'", f.p, f.n);
#undef IS
}

JVal jx_test(JEval *e, const JExpr *x) {
    JVal v = jx_eval(e, x->a);
    JStr t = x->s;
    int r;
#define IS(name) jstr_eq(t, (JStr){name, sizeof name - 1})
    if (IS("defined")) r = v.k != JV_UNDEF;
    else if (IS("undefined")) r = v.k == JV_UNDEF;
    else if (IS("none")) r = v.k == JV_NONE;
    else if (IS("string")) r = v.k == JV_STR;
    else if (IS("number")) r = v.k == JV_INT || v.k == JV_FLOAT;
    else if (IS("integer")) r = v.k == JV_INT;
    else if (IS("float")) r = v.k == JV_FLOAT;
    else if (IS("boolean")) r = v.k == JV_BOOL;
    else if (IS("true")) r = v.k == JV_BOOL && v.u.b;
    else if (IS("false")) r = v.k == JV_BOOL && !v.u.b;
    else if (IS("mapping")) r = v.k == JV_DICT;
    else if (IS("sequence") || IS("iterable")) r = v.k == JV_LIST || v.k == JV_STR || v.k == JV_DICT;
    else if ((IS("equalto") || IS("eq")) && x->n_args == 1) r = jx_equal(e, v, jx_eval(e, x->args[0]), 0);
    else if (IS("odd") || IS("even")) r = v.k == JV_INT && (v.u.i % 2 != 0) == (t.p[0] == 'o');
    else return jx_fail(e, x->line, "unsupported test '%.*s'", t.p, t.n);
#undef IS
    return jv_bool(x->negate ? !r : r);
}

