/* tokenizer/jinja_eval.c — runs a parsed chat template (jinja_parse.c).
 *
 * Values are Python-like (none, bool, int, float, str, list, dict, namespace)
 * and behave as in Jinja2: truthiness, `in`, slicing with negative steps,
 * string methods (startswith, split, strip, ...), the filters and tests chat
 * templates use, `loop.*`, and for-loop scoping (a `set` inside a loop does not
 * leak out; namespace() is the way out, as in Jinja2). Anything else is an
 * error naming the construct and the template line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/jinja.h"
#include "tokenizer/tok_internal.h"

typedef struct {
    JArena *ar;
    GrpoErr *err;
    JDict **frames;
    int n_frames, cap_frames;
    TokBuf out;
    int failed;
} E;

static const JVal UNDEF = {.k = JV_UNDEF};

static JVal efail(E *e, int line, const char *fmt, const char *a, size_t an) {
    if (!e->failed) {
        char m[256];
        snprintf(m, sizeof m, fmt, (int)an, a);
        err_set(e->err, "line %d: %s", line, m);
    }
    e->failed = 1;
    return UNDEF;
}

JVal jv_str(JStr s) { JVal v = {.k = JV_STR}; v.u.s = s; return v; }
JVal jv_cstr(const char *s) { return jv_str((JStr){s, strlen(s)}); }
static JVal jv_int(long long i) { JVal v = {.k = JV_INT}; v.u.i = i; return v; }
static JVal jv_bool(int b) { JVal v = {.k = JV_BOOL}; v.u.b = !!b; return v; }
static JVal jv_list(JList *l) { JVal v = {.k = JV_LIST}; v.u.l = l; return v; }

void jlist_push(JArena *ar, JList *l, JVal v) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        JVal *nv = jar_alloc(ar, (size_t)cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

static int jstr_eq(JStr a, JStr b) { return a.n == b.n && !memcmp(a.p, b.p, a.n); }

JVal *jdict_get(const JDict *d, JStr key) {
    for (int i = 0; i < d->n; i++)
        if (jstr_eq(d->keys[i], key)) return &d->vals[i];
    return NULL;
}

void jdict_set(JArena *ar, JDict *d, JStr key, JVal v) {
    JVal *have = jdict_get(d, key);
    if (have) { *have = v; return; }
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 8;
        JStr *nk = jar_alloc(ar, (size_t)cap * sizeof *nk);
        JVal *nv = jar_alloc(ar, (size_t)cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->keys, (size_t)d->n * sizeof *nk);
            memcpy(nv, d->vals, (size_t)d->n * sizeof *nv);
        }
        d->keys = nk;
        d->vals = nv;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n++] = v;
}

static int truthy(JVal v) {
    switch (v.k) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s.n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

static JStr jstr_dup(E *e, const char *p, size_t n) {
    char *b = jar_alloc(e->ar, n + 1);
    memcpy(b, p, n);
    return (JStr){b, n};
}

static void json_str(TokBuf *b, JStr s) {
    tbuf_putc(b, '"');
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        if (c == '"' || c == '\\') { tbuf_putc(b, '\\'); tbuf_putc(b, (char)c); }
        else if (c == '\n') tbuf_put(b, "\\n", 2);
        else if (c == '\t') tbuf_put(b, "\\t", 2);
        else if (c == '\r') tbuf_put(b, "\\r", 2);
        else if (c < 0x20) { char u[8]; snprintf(u, sizeof u, "\\u%04x", c); tbuf_put(b, u, 6); }
        else tbuf_putc(b, (char)c);
    }
    tbuf_putc(b, '"');
}

/* Python's str() for output, or json.dumps for tojson. */
static void to_text(TokBuf *b, JVal v, int json) {
    char num[64];
    switch (v.k) {
    case JV_UNDEF: if (json) tbuf_put(b, "null", 4); break;
    case JV_NONE: if (json) tbuf_put(b, "null", 4); else tbuf_put(b, "None", 4); break;
    case JV_BOOL:
        if (json) tbuf_put(b, v.u.b ? "true" : "false", v.u.b ? 4 : 5);
        else tbuf_put(b, v.u.b ? "True" : "False", v.u.b ? 4 : 5);
        break;
    case JV_INT: tbuf_put(b, num, (size_t)snprintf(num, sizeof num, "%lld", v.u.i)); break;
    case JV_FLOAT: {
        int n = snprintf(num, sizeof num, "%.17g", v.u.f);
        for (int p = 1; p < 17; p++) { /* shortest repr that round-trips */
            n = snprintf(num, sizeof num, "%.*g", p, v.u.f);
            if (strtod(num, NULL) == v.u.f) break;
        }
        tbuf_put(b, num, (size_t)n);
        if (!strpbrk(num, ".eEn")) tbuf_put(b, ".0", 2);
        break;
    }
    case JV_STR:
        if (json) json_str(b, v.u.s);
        else tbuf_put(b, v.u.s.p, v.u.s.n);
        break;
    case JV_LIST:
        tbuf_putc(b, '[');
        for (int i = 0; i < v.u.l->n; i++) {
            if (i) tbuf_put(b, ", ", 2);
            if (!json && v.u.l->v[i].k == JV_STR) {
                tbuf_putc(b, '\'');
                tbuf_put(b, v.u.l->v[i].u.s.p, v.u.l->v[i].u.s.n);
                tbuf_putc(b, '\'');
            } else to_text(b, v.u.l->v[i], json);
        }
        tbuf_putc(b, ']');
        break;
    case JV_DICT: case JV_NS:
        tbuf_putc(b, '{');
        for (int i = 0; i < v.u.d->n; i++) {
            if (i) tbuf_put(b, ", ", 2);
            if (json) json_str(b, v.u.d->keys[i]);
            else { tbuf_putc(b, '\''); tbuf_put(b, v.u.d->keys[i].p, v.u.d->keys[i].n); tbuf_putc(b, '\''); }
            tbuf_put(b, ": ", 2);
            to_text(b, v.u.d->vals[i], json);
        }
        tbuf_putc(b, '}');
        break;
    case JV_FUNC: break;
    }
}

static JStr stringify(E *e, JVal v, int json) {
    if (v.k == JV_STR && !json) return v.u.s;
    TokBuf b = {0};
    to_text(&b, v, json);
    JStr s = jstr_dup(e, b.p ? b.p : "", b.n);
    tbuf_free(&b);
    return s;
}

static int equal(JVal a, JVal b) {
    if ((a.k == JV_INT || a.k == JV_FLOAT || a.k == JV_BOOL) && (b.k == JV_INT || b.k == JV_FLOAT || b.k == JV_BOOL)) {
        double x = a.k == JV_FLOAT ? a.u.f : a.k == JV_INT ? (double)a.u.i : a.u.b;
        double y = b.k == JV_FLOAT ? b.u.f : b.k == JV_INT ? (double)b.u.i : b.u.b;
        return x == y;
    }
    if (a.k != b.k) return 0;
    switch (a.k) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return jstr_eq(a.u.s, b.u.s);
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return 0;
        for (int i = 0; i < a.u.l->n; i++) if (!equal(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    default: return a.u.d == b.u.d;
    }
}

static JVal lookup(E *e, JStr name) {
    for (int f = e->n_frames - 1; f >= 0; f--) {
        JVal *v = jdict_get(e->frames[f], name);
        if (v) return *v;
    }
    return UNDEF;
}

static JVal eval(E *e, const JExpr *x);

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static JStr strip_chars(JStr s, const JStr *chars, int left, int right) {
    size_t a = 0, b = s.n;
#define STRIPPABLE(c) (chars ? memchr(chars->p, (c), chars->n) != NULL : is_space(c))
    while (left && a < b && STRIPPABLE(s.p[a])) a++;
    while (right && b > a && STRIPPABLE(s.p[b - 1])) b--;
#undef STRIPPABLE
    return (JStr){s.p + a, b - a};
}

static JVal str_method(E *e, const JExpr *x, JStr s, JStr m, JVal *args, int n) {
    JStr *a0 = n > 0 && args[0].k == JV_STR ? &args[0].u.s : NULL;
    if (jstr_eq(m, (JStr){"startswith", 10}) && a0)
        return jv_bool(a0->n <= s.n && !memcmp(s.p, a0->p, a0->n));
    if (jstr_eq(m, (JStr){"endswith", 8}) && a0)
        return jv_bool(a0->n <= s.n && !memcmp(s.p + s.n - a0->n, a0->p, a0->n));
    if (jstr_eq(m, (JStr){"strip", 5})) return jv_str(strip_chars(s, a0, 1, 1));
    if (jstr_eq(m, (JStr){"lstrip", 6})) return jv_str(strip_chars(s, a0, 1, 0));
    if (jstr_eq(m, (JStr){"rstrip", 6})) return jv_str(strip_chars(s, a0, 0, 1));
    if (jstr_eq(m, (JStr){"upper", 5}) || jstr_eq(m, (JStr){"lower", 5})) {
        JStr r = jstr_dup(e, s.p, s.n);
        for (size_t i = 0; i < r.n; i++) {
            char c = r.p[i];
            ((char *)r.p)[i] = m.p[0] == 'u' ? (c >= 'a' && c <= 'z' ? c - 32 : c) : (c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        return jv_str(r);
    }
    if (jstr_eq(m, (JStr){"split", 5})) {
        JList *l = jar_alloc(e->ar, sizeof *l);
        if (!a0) { /* whitespace runs */
            size_t i = 0;
            while (i < s.n) {
                while (i < s.n && is_space(s.p[i])) i++;
                size_t st = i;
                while (i < s.n && !is_space(s.p[i])) i++;
                if (i > st) jlist_push(e->ar, l, jv_str((JStr){s.p + st, i - st}));
            }
            return jv_list(l);
        }
        if (!a0->n) return efail(e, x->line, "split: empty separator%.*s", "", 0);
        size_t st = 0;
        for (size_t i = 0; i + a0->n <= s.n;) {
            if (!memcmp(s.p + i, a0->p, a0->n)) {
                jlist_push(e->ar, l, jv_str((JStr){s.p + st, i - st}));
                i += a0->n;
                st = i;
            } else i++;
        }
        jlist_push(e->ar, l, jv_str((JStr){s.p + st, s.n - st}));
        return jv_list(l);
    }
    if (jstr_eq(m, (JStr){"replace", 7}) && n >= 2 && a0 && args[1].k == JV_STR && a0->n) {
        TokBuf b = {0};
        for (size_t i = 0; i < s.n;) {
            if (i + a0->n <= s.n && !memcmp(s.p + i, a0->p, a0->n)) {
                tbuf_put(&b, args[1].u.s.p, args[1].u.s.n);
                i += a0->n;
            } else tbuf_putc(&b, s.p[i++]);
        }
        JStr r = jstr_dup(e, b.p ? b.p : "", b.n);
        tbuf_free(&b);
        return jv_str(r);
    }
    return efail(e, x->line, "unsupported string method '%.*s'", m.p, m.n);
}

static JVal call(E *e, const JExpr *x) {
    JVal args[8];
    int n = x->n_args < 8 ? x->n_args : 8;
    for (int i = 0; i < n; i++) args[i] = eval(e, x->args[i]);
    if (x->a->kind == JE_ATTR) { /* a method */
        JVal obj = eval(e, x->a->a);
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
        return efail(e, x->line, "unsupported method '%.*s'", m.p, m.n);
    }
    if (x->a->kind != JE_NAME) return efail(e, x->line, "unsupported call%.*s", "", 0);
    JStr f = x->a->s;
    if (jstr_eq(f, (JStr){"namespace", 9}) || jstr_eq(f, (JStr){"dict", 4})) {
        JVal v = {.k = f.p[0] == 'n' ? JV_NS : JV_DICT};
        v.u.d = jar_alloc(e->ar, sizeof *v.u.d);
        for (int i = 0; i < n; i++)
            if (x->kw[i].n) jdict_set(e->ar, v.u.d, x->kw[i], args[i]);
        return v;
    }
    if (jstr_eq(f, (JStr){"raise_exception", 15})) {
        JStr msg = n ? stringify(e, args[0], 0) : (JStr){"", 0};
        return efail(e, x->line, "the template raised: %.*s", msg.p, msg.n);
    }
    if (jstr_eq(f, (JStr){"range", 5}) && n >= 1 && args[0].k == JV_INT) {
        long long lo = n >= 2 ? args[0].u.i : 0, hi = n >= 2 && args[1].k == JV_INT ? args[1].u.i : args[0].u.i;
        JList *l = jar_alloc(e->ar, sizeof *l);
        for (long long i = lo; i < hi && i - lo < 1000000; i++) jlist_push(e->ar, l, jv_int(i));
        return jv_list(l);
    }
    if (jstr_eq(f, (JStr){"strftime_now", 12}) && n >= 1 && args[0].k == JV_STR) {
        char fmt[128], buf[256];
        snprintf(fmt, sizeof fmt, "%.*s", (int)args[0].u.s.n, args[0].u.s.p);
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        size_t k = strftime(buf, sizeof buf, fmt, &tmv);
        return jv_str(jstr_dup(e, buf, k));
    }
    return efail(e, x->line, "unsupported function '%.*s'", f.p, f.n);
}

static JVal filter(E *e, const JExpr *x) {
    JVal v = eval(e, x->a);
    JStr f = x->s;
    JVal a[4];
    int n = x->n_args < 4 ? x->n_args : 4;
    for (int i = 0; i < n; i++) a[i] = eval(e, x->args[i]);
#define IS(name) jstr_eq(f, (JStr){name, sizeof name - 1})
    if (IS("length") || IS("count")) {
        if (v.k == JV_STR) { /* characters, not bytes */
            long long c = 0;
            for (size_t i = 0; i < v.u.s.n; i++) c += ((unsigned char)v.u.s.p[i] & 0xC0) != 0x80;
            return jv_int(c);
        }
        if (v.k == JV_LIST) return jv_int(v.u.l->n);
        if (v.k == JV_DICT) return jv_int(v.u.d->n);
        return efail(e, x->line, "length of a value without one%.*s", "", 0);
    }
    if (IS("trim")) return v.k == JV_STR ? jv_str(strip_chars(v.u.s, NULL, 1, 1)) : v;
    if (IS("tojson")) return jv_str(stringify(e, v, 1));
    if (IS("string")) return jv_str(stringify(e, v, 0));
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
            to_text(&b, v.u.l->v[i], 0);
        }
        JStr r = jstr_dup(e, b.p ? b.p : "", b.n);
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
        return call(e, &m);
    }
    return efail(e, x->line, "unsupported filter '%.*s'", f.p, f.n);
#undef IS
}

static JVal test(E *e, const JExpr *x) {
    JVal v = eval(e, x->a);
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
    else if ((IS("equalto") || IS("eq")) && x->n_args == 1) r = equal(v, eval(e, x->args[0]));
    else if (IS("odd") || IS("even")) r = v.k == JV_INT && (v.u.i % 2 != 0) == (t.p[0] == 'o');
    else return efail(e, x->line, "unsupported test '%.*s'", t.p, t.n);
#undef IS
    return jv_bool(x->negate ? !r : r);
}

static long long norm_index(long long i, long long n) { return i < 0 ? i + n : i; }

static JVal item(E *e, const JExpr *x, JVal obj, JVal idx) {
    if (obj.k == JV_DICT || obj.k == JV_NS) {
        if (idx.k != JV_STR) return UNDEF;
        JVal *v = jdict_get(obj.u.d, idx.u.s);
        return v ? *v : UNDEF;
    }
    if (idx.k != JV_INT) return UNDEF;
    if (obj.k == JV_LIST) {
        long long i = norm_index(idx.u.i, obj.u.l->n);
        return i >= 0 && i < obj.u.l->n ? obj.u.l->v[i] : UNDEF;
    }
    if (obj.k == JV_STR) { /* byte index: chat templates index ASCII only */
        long long i = norm_index(idx.u.i, (long long)obj.u.s.n);
        return i >= 0 && i < (long long)obj.u.s.n ? jv_str((JStr){obj.u.s.p + i, 1}) : UNDEF;
    }
    (void)e; (void)x;
    return UNDEF;
}

static JVal slice(E *e, const JExpr *x) {
    JVal obj = eval(e, x->a);
    long long len = obj.k == JV_LIST ? obj.u.l->n : obj.k == JV_STR ? (long long)obj.u.s.n : -1;
    if (len < 0) return efail(e, x->line, "slice of a value that is not a list or string%.*s", "", 0);
    JVal lo = x->args[0] ? eval(e, x->args[0]) : UNDEF, hi = x->args[1] ? eval(e, x->args[1]) : UNDEF;
    JVal st = x->args[2] ? eval(e, x->args[2]) : UNDEF;
    long long step = st.k == JV_INT ? st.u.i : 1;
    if (!step) return efail(e, x->line, "slice step 0%.*s", "", 0);
    long long a, b;
    /* Python's slice.indices */
    if (step > 0) {
        a = lo.k == JV_INT ? norm_index(lo.u.i, len) : 0;
        b = hi.k == JV_INT ? norm_index(hi.u.i, len) : len;
        if (a < 0) a = 0;
        if (a > len) a = len;
        if (b < 0) b = 0;
        if (b > len) b = len;
    } else {
        a = lo.k == JV_INT ? norm_index(lo.u.i, len) : len - 1;
        b = hi.k == JV_INT ? norm_index(hi.u.i, len) : -1;
        if (a < -1) a = -1;
        if (a > len - 1) a = len - 1;
        if (b < -1) b = -1;
        if (b > len - 1) b = len - 1;
    }
    JList *l = jar_alloc(e->ar, sizeof *l);
    TokBuf sb = {0};
    for (long long i = a; step > 0 ? i < b : i > b; i += step) {
        if (obj.k == JV_LIST) jlist_push(e->ar, l, obj.u.l->v[i]);
        else tbuf_putc(&sb, obj.u.s.p[i]);
    }
    if (obj.k == JV_STR) {
        JStr r = jstr_dup(e, sb.p ? sb.p : "", sb.n);
        tbuf_free(&sb);
        return jv_str(r);
    }
    return jv_list(l);
}

static double num(JVal v) { return v.k == JV_FLOAT ? v.u.f : v.k == JV_INT ? (double)v.u.i : v.u.b; }
static int is_num(JVal v) { return v.k == JV_INT || v.k == JV_FLOAT || v.k == JV_BOOL; }

static JVal binary(E *e, const JExpr *x) {
    JStr op = x->s;
    if (jstr_eq(op, (JStr){"and", 3})) { JVal a = eval(e, x->a); return truthy(a) ? eval(e, x->b) : a; }
    if (jstr_eq(op, (JStr){"or", 2})) { JVal a = eval(e, x->a); return truthy(a) ? a : eval(e, x->b); }
    JVal a = eval(e, x->a), b = eval(e, x->b);
    if (e->failed) return UNDEF;
    char c0 = op.p[0];
    if (jstr_eq(op, (JStr){"==", 2})) return jv_bool(equal(a, b));
    if (jstr_eq(op, (JStr){"!=", 2})) return jv_bool(!equal(a, b));
    if (jstr_eq(op, (JStr){"in", 2}) || jstr_eq(op, (JStr){"notin", 5})) {
        int r = 0;
        if (b.k == JV_STR && a.k == JV_STR)
            r = a.u.s.n == 0 || memmem(b.u.s.p, b.u.s.n, a.u.s.p, a.u.s.n) != NULL;
        else if (b.k == JV_LIST) for (int i = 0; i < b.u.l->n && !r; i++) r = equal(a, b.u.l->v[i]);
        else if ((b.k == JV_DICT || b.k == JV_NS) && a.k == JV_STR) r = jdict_get(b.u.d, a.u.s) != NULL;
        else if (b.k != JV_UNDEF && b.k != JV_NONE)
            return efail(e, x->line, "'in' on a value that is not a string, list or dict%.*s", "", 0);
        return jv_bool(op.p[0] == 'i' ? r : !r);
    }
    if (c0 == '~') {
        JStr l = stringify(e, a, 0), r = stringify(e, b, 0);
        char *p = jar_alloc(e->ar, l.n + r.n + 1);
        memcpy(p, l.p, l.n);
        memcpy(p + l.n, r.p, r.n);
        return jv_str((JStr){p, l.n + r.n});
    }
    if (c0 == '+' && a.k == JV_STR && b.k == JV_STR) {
        char *p = jar_alloc(e->ar, a.u.s.n + b.u.s.n + 1);
        memcpy(p, a.u.s.p, a.u.s.n);
        memcpy(p + a.u.s.n, b.u.s.p, b.u.s.n);
        return jv_str((JStr){p, a.u.s.n + b.u.s.n});
    }
    if (c0 == '+' && a.k == JV_LIST && b.k == JV_LIST) {
        JList *l = jar_alloc(e->ar, sizeof *l);
        for (int i = 0; i < a.u.l->n; i++) jlist_push(e->ar, l, a.u.l->v[i]);
        for (int i = 0; i < b.u.l->n; i++) jlist_push(e->ar, l, b.u.l->v[i]);
        return jv_list(l);
    }
    if ((c0 == '<' || c0 == '>') && a.k == JV_STR && b.k == JV_STR) {
        size_t m = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int c = memcmp(a.u.s.p, b.u.s.p, m);
        if (!c) c = a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
        int r = c0 == '<' ? (op.n == 2 ? c <= 0 : c < 0) : (op.n == 2 ? c >= 0 : c > 0);
        return jv_bool(r);
    }
    if (!is_num(a) || !is_num(b))
        return efail(e, x->line, "operator '%.*s' needs numbers here", op.p, op.n);
    int ints = a.k != JV_FLOAT && b.k != JV_FLOAT;
    double x1 = num(a), y1 = num(b);
    long long xi = (long long)x1, yi = (long long)y1;
    if (c0 == '<') return jv_bool(op.n == 2 ? x1 <= y1 : x1 < y1);
    if (c0 == '>') return jv_bool(op.n == 2 ? x1 >= y1 : x1 > y1);
    if (c0 == '+') return ints ? jv_int(xi + yi) : (JVal){.k = JV_FLOAT, .u.f = x1 + y1};
    if (c0 == '-') return ints ? jv_int(xi - yi) : (JVal){.k = JV_FLOAT, .u.f = x1 - y1};
    if (c0 == '*') return ints ? jv_int(xi * yi) : (JVal){.k = JV_FLOAT, .u.f = x1 * y1};
    if (y1 == 0) return efail(e, x->line, "division by zero%.*s", "", 0);
    if (jstr_eq(op, (JStr){"//", 2})) return ints ? jv_int((long long)floor(x1 / y1)) : (JVal){.k = JV_FLOAT, .u.f = floor(x1 / y1)};
    if (c0 == '/') return (JVal){.k = JV_FLOAT, .u.f = x1 / y1};
    if (c0 == '%') return ints ? jv_int(((xi % yi) + yi) % yi) : (JVal){.k = JV_FLOAT, .u.f = fmod(x1, y1)};
    return efail(e, x->line, "unsupported operator '%.*s'", op.p, op.n);
}

static JVal eval(E *e, const JExpr *x) {
    if (e->failed) return UNDEF;
    switch (x->kind) {
    case JE_STR: return jv_str(x->s);
    case JE_INT: return jv_int(x->i);
    case JE_FLOAT: return (JVal){.k = JV_FLOAT, .u.f = x->f};
    case JE_TRUE: return jv_bool(1);
    case JE_FALSE: return jv_bool(0);
    case JE_NONE: return (JVal){.k = JV_NONE};
    case JE_NAME: return lookup(e, x->s);
    case JE_LIST: {
        JList *l = jar_alloc(e->ar, sizeof *l);
        for (int i = 0; i < x->n_args; i++) jlist_push(e->ar, l, eval(e, x->args[i]));
        return jv_list(l);
    }
    case JE_DICT: {
        JVal v = {.k = JV_DICT};
        v.u.d = jar_alloc(e->ar, sizeof *v.u.d);
        for (int i = 0; i + 1 < x->n_args; i += 2) {
            JVal k = eval(e, x->args[i]);
            if (k.k != JV_STR) return efail(e, x->line, "dict keys must be strings%.*s", "", 0);
            jdict_set(e->ar, v.u.d, k.u.s, eval(e, x->args[i + 1]));
        }
        return v;
    }
    case JE_ATTR: {
        JVal o = eval(e, x->a);
        return item(e, x, o, jv_str(x->s));
    }
    case JE_ITEM: return item(e, x, eval(e, x->a), eval(e, x->b));
    case JE_SLICE: return slice(e, x);
    case JE_CALL: return call(e, x);
    case JE_FILTER: return filter(e, x);
    case JE_TEST: return test(e, x);
    case JE_NOT: return jv_bool(!truthy(eval(e, x->a)));
    case JE_NEG: {
        JVal v = eval(e, x->a);
        if (v.k == JV_INT) return jv_int(-v.u.i);
        if (v.k == JV_FLOAT) return (JVal){.k = JV_FLOAT, .u.f = -v.u.f};
        return efail(e, x->line, "unary '-' needs a number%.*s", "", 0);
    }
    case JE_BIN: return binary(e, x);
    case JE_COND:
        if (truthy(eval(e, x->c))) return eval(e, x->a);
        return x->b ? eval(e, x->b) : UNDEF;
    }
    return UNDEF;
}

static void push_frame(E *e) {
    if (e->n_frames == e->cap_frames) {
        e->cap_frames = e->cap_frames ? e->cap_frames * 2 : 8;
        JDict **nf = jar_alloc(e->ar, (size_t)e->cap_frames * sizeof *nf);
        if (e->n_frames) memcpy(nf, e->frames, (size_t)e->n_frames * sizeof *nf);
        e->frames = nf;
    }
    e->frames[e->n_frames++] = jar_alloc(e->ar, sizeof(JDict));
}

static int exec(E *e, JStmt **ss, int n);

static int exec_for(E *e, const JStmt *s) {
    JVal it = eval(e, s->expr);
    if (e->failed) return -1;
    JList *items;
    if (it.k == JV_LIST) items = it.u.l;
    else if (it.k == JV_DICT) { /* iterating a dict gives its keys */
        items = jar_alloc(e->ar, sizeof *items);
        for (int i = 0; i < it.u.d->n; i++) jlist_push(e->ar, items, jv_str(it.u.d->keys[i]));
    } else if (it.k == JV_UNDEF || it.k == JV_NONE) items = jar_alloc(e->ar, sizeof *items);
    else { efail(e, s->line, "for: cannot iterate this value%.*s", "", 0); return -1; }
    push_frame(e);
    JDict *fr = e->frames[e->n_frames - 1];
    if (s->filter) { /* `for x in xs if cond`: filter first, so loop.length counts kept items */
        JList *kept = jar_alloc(e->ar, sizeof *kept);
        for (int i = 0; i < items->n; i++) {
            jdict_set(e->ar, fr, s->var, items->v[i]);
            if (truthy(eval(e, s->filter))) jlist_push(e->ar, kept, items->v[i]);
        }
        items = kept;
    }
    for (int i = 0; i < items->n && !e->failed; i++) {
        fr->n = 0; /* a fresh scope per iteration, as in Jinja2 */
        JVal loop = {.k = JV_DICT};
        loop.u.d = jar_alloc(e->ar, sizeof *loop.u.d);
        jdict_set(e->ar, loop.u.d, (JStr){"index0", 6}, jv_int(i));
        jdict_set(e->ar, loop.u.d, (JStr){"index", 5}, jv_int(i + 1));
        jdict_set(e->ar, loop.u.d, (JStr){"revindex0", 9}, jv_int(items->n - 1 - i));
        jdict_set(e->ar, loop.u.d, (JStr){"revindex", 8}, jv_int(items->n - i));
        jdict_set(e->ar, loop.u.d, (JStr){"first", 5}, jv_bool(i == 0));
        jdict_set(e->ar, loop.u.d, (JStr){"last", 4}, jv_bool(i == items->n - 1));
        jdict_set(e->ar, loop.u.d, (JStr){"length", 6}, jv_int(items->n));
        if (i > 0) jdict_set(e->ar, loop.u.d, (JStr){"previtem", 8}, items->v[i - 1]);
        if (i + 1 < items->n) jdict_set(e->ar, loop.u.d, (JStr){"nextitem", 8}, items->v[i + 1]);
        jdict_set(e->ar, fr, (JStr){"loop", 4}, loop);
        JVal v = items->v[i];
        if (s->var2.n) {
            if (v.k != JV_LIST || v.u.l->n != 2) {
                efail(e, s->line, "for: cannot unpack into two variables%.*s", "", 0);
                break;
            }
            jdict_set(e->ar, fr, s->var, v.u.l->v[0]);
            jdict_set(e->ar, fr, s->var2, v.u.l->v[1]);
        } else jdict_set(e->ar, fr, s->var, v);
        exec(e, s->body, s->n_body);
    }
    e->n_frames--;
    if (!items->n && !e->failed) exec(e, s->orelse, s->n_orelse);
    return e->failed ? -1 : 0;
}

static int exec(E *e, JStmt **ss, int n) {
    for (int i = 0; i < n && !e->failed; i++) {
        const JStmt *s = ss[i];
        switch (s->kind) {
        case JS_TEXT: tbuf_put(&e->out, s->text.p, s->text.n); break;
        case JS_OUT: {
            JVal v = eval(e, s->expr);
            if (!e->failed) to_text(&e->out, v, 0);
            break;
        }
        case JS_IF:
            if (truthy(eval(e, s->expr))) exec(e, s->body, s->n_body);
            else exec(e, s->orelse, s->n_orelse);
            break;
        case JS_FOR: exec_for(e, s); break;
        case JS_SET: {
            JVal v = eval(e, s->expr);
            if (e->failed) break;
            if (s->attr.n) {
                JVal ns = lookup(e, s->var);
                if (ns.k != JV_NS) { efail(e, s->line, "set %.*s.attr: not a namespace", s->var.p, s->var.n); break; }
                jdict_set(e->ar, ns.u.d, s->attr, v);
            } else jdict_set(e->ar, e->frames[e->n_frames - 1], s->var, v);
            break;
        }
        }
    }
    return e->failed ? -1 : 0;
}

int jinja_render(JArena *ar, const JTemplate *t, JDict *ctx, char **out, size_t *out_len,
                 GrpoErr *err) {
    E e = {.ar = ar, .err = err};
    push_frame(&e);
    e.frames[0] = ctx;
    push_frame(&e); /* the template's own top-level scope */
    int rc = exec(&e, t->stmts, t->n);
    if (rc) { tbuf_free(&e.out); return -1; }
    tbuf_reserve(&e.out, 1);
    e.out.p[e.out.n] = 0;
    *out = e.out.p;
    *out_len = e.out.n;
    return 0;
}
