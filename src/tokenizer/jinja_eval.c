/* tokenizer/jinja_eval.c — runs a parsed chat template (jinja_parse.c).
 *
 * Values are Python-like (none, bool, int, float, str, list, dict, namespace)
 * and behave as in Jinja2: truthiness, `in`, slicing with negative steps,
 * `loop.*`, and for-loop scoping (a `set` inside a loop does not leak out;
 * namespace() is the way out, as in Jinja2); what templates call is in
 * jinja_builtins.c. Integers are exact in 64 bits, as Python's within them.
 * Anything else is an error naming the construct and the template line.
 *
 * A template is untrusted input: nesting, steps and memory are bounded
 * (jinja.h's JINJA_MAX_*), each an error rather than a crash or a hang. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_eval.h"

JVal jx_fail(JEval *e, int line, const char *fmt, const char *a, size_t an) {
    if (!e->failed) {
        char m[256];
        snprintf(m, sizeof m, fmt, (int)an, a);
        err_set(e->err, "line %d: %s", line ? line : e->line, m);
    }
    e->failed = 1;
    return UNDEF;
}

JVal jv_str(JStr s) { JVal v = {.k = JV_STR}; v.u.s = s; return v; }
JVal jv_cstr(const char *s) { return jv_str((JStr){s, strlen(s)}); }

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

int jx_truthy(JVal v) {
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

JStr jx_strdup(JEval *e, const char *p, size_t n) {
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

/* Python's str() for output, or json.dumps for tojson. Values can nest (a
 * list built in a loop) and repeat (one long string many times): both are
 * bounded, as an error. */
void jx_to_text(JEval *e, TokBuf *b, JVal v, int json, int depth) {
    char num[64];
    if (e->failed) return;
    if (depth > JINJA_MAX_DEPTH || b->n > JINJA_MAX_BYTES) {
        jx_fail(e, 0, depth > JINJA_MAX_DEPTH ? "a value nested deeper than the limit%.*s"
                                            : "text longer than the render's memory limit%.*s", "", 0);
        return;
    }
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
        for (int i = 0; i < v.u.l->n && !e->failed; i++) {
            if (i) tbuf_put(b, ", ", 2);
            if (!json && v.u.l->v[i].k == JV_STR) {
                tbuf_putc(b, '\'');
                tbuf_put(b, v.u.l->v[i].u.s.p, v.u.l->v[i].u.s.n);
                tbuf_putc(b, '\'');
            } else jx_to_text(e, b, v.u.l->v[i], json, depth + 1);
        }
        tbuf_putc(b, ']');
        break;
    case JV_DICT: case JV_NS:
        tbuf_putc(b, '{');
        for (int i = 0; i < v.u.d->n && !e->failed; i++) {
            if (i) tbuf_put(b, ", ", 2);
            if (json) json_str(b, v.u.d->keys[i]);
            else { tbuf_putc(b, '\''); tbuf_put(b, v.u.d->keys[i].p, v.u.d->keys[i].n); tbuf_putc(b, '\''); }
            tbuf_put(b, ": ", 2);
            jx_to_text(e, b, v.u.d->vals[i], json, depth + 1);
        }
        tbuf_putc(b, '}');
        break;
    case JV_FUNC: break;
    }
}

JStr jx_stringify(JEval *e, JVal v, int json) {
    if (v.k == JV_STR && !json) return v.u.s;
    TokBuf b = {0};
    jx_to_text(e, &b, v, json, 0);
    JStr s = e->failed ? (JStr){"", 0} : jx_strdup(e, b.p ? b.p : "", b.n);
    tbuf_free(&b);
    return s;
}

int jx_equal(JEval *e, JVal a, JVal b, int depth) {
    if (depth > JINJA_MAX_DEPTH) {
        jx_fail(e, 0, "a value nested deeper than the limit%.*s", "", 0);
        return 0;
    }
    if ((a.k == JV_INT || a.k == JV_BOOL) && (b.k == JV_INT || b.k == JV_BOOL))
        return (a.k == JV_INT ? a.u.i : a.u.b) == (b.k == JV_INT ? b.u.i : b.u.b);
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
        for (int i = 0; i < a.u.l->n; i++) if (!jx_equal(e, a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
        return 1;
    default: return a.u.d == b.u.d;
    }
}

static JVal lookup(JEval *e, JStr name) {
    for (int f = e->n_frames - 1; f >= 0; f--) {
        JVal *v = jdict_get(e->frames[f], name);
        if (v) return *v;
    }
    return UNDEF;
}


int jx_is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

JStr jx_strip(JStr s, const JStr *chars, int left, int right) {
    size_t a = 0, b = s.n;
#define STRIPPABLE(c) (chars ? memchr(chars->p, (c), chars->n) != NULL : jx_is_space(c))
    while (left && a < b && STRIPPABLE(s.p[a])) a++;
    while (right && b > a && STRIPPABLE(s.p[b - 1])) b--;
#undef STRIPPABLE
    return (JStr){s.p + a, b - a};
}

static long long norm_index(long long i, long long n) { return i < 0 ? i + n : i; }

static JVal item(JEval *e, const JExpr *x, JVal obj, JVal idx) {
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

static JVal slice(JEval *e, const JExpr *x) {
    JVal obj = jx_eval(e, x->a);
    long long len = obj.k == JV_LIST ? obj.u.l->n : obj.k == JV_STR ? (long long)obj.u.s.n : -1;
    if (len < 0) return jx_fail(e, x->line, "slice of a value that is not a list or string%.*s", "", 0);
    JVal lo = x->args[0] ? jx_eval(e, x->args[0]) : UNDEF, hi = x->args[1] ? jx_eval(e, x->args[1]) : UNDEF;
    JVal st = x->args[2] ? jx_eval(e, x->args[2]) : UNDEF;
    long long step = st.k == JV_INT ? st.u.i : 1;
    if (!step) return jx_fail(e, x->line, "slice step 0%.*s", "", 0);
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
    /* a + k * step for k < count: never past b, whatever the step */
    unsigned long long span = step > 0 ? (b > a ? (unsigned long long)(b - a) : 0) : (a > b ? (unsigned long long)(a - b) : 0);
    unsigned long long mag = step > 0 ? (unsigned long long)step : 0ULL - (unsigned long long)step;
    long long count = span ? (long long)((span - 1) / mag + 1) : 0;
    e->steps += count;
    JList *l = jar_alloc(e->ar, sizeof *l);
    TokBuf sb = {0};
    for (long long k = 0; k < count; k++) {
        long long i = step > 0 ? a + (long long)(k * (unsigned long long)mag) : a - (long long)(k * mag);
        if (obj.k == JV_LIST) jlist_push(e->ar, l, obj.u.l->v[i]);
        else tbuf_putc(&sb, obj.u.s.p[i]);
    }
    if (obj.k == JV_STR) {
        JStr r = jx_strdup(e, sb.p ? sb.p : "", sb.n);
        tbuf_free(&sb);
        return jv_str(r);
    }
    return jv_list(l);
}

static double num(JVal v) { return v.k == JV_FLOAT ? v.u.f : v.k == JV_INT ? (double)v.u.i : v.u.b; }
static int is_num(JVal v) { return v.k == JV_INT || v.k == JV_FLOAT || v.k == JV_BOOL; }

static long long ival(JVal v) { return v.k == JV_INT ? v.u.i : v.u.b; }

/* Integer arithmetic as Python's, exact in 64 bits: a result beyond them is an
 * error (Python would go on with big integers), // and % floor, / gives a float. */
static JVal int_op(JEval *e, const JExpr *x, JStr op, long long a, long long b) {
    char c0 = op.p[0];
    long long r;
    if (c0 == '<') return jv_bool(op.n == 2 ? a <= b : a < b);
    if (c0 == '>') return jv_bool(op.n == 2 ? a >= b : a > b);
    int over = c0 == '+' ? __builtin_add_overflow(a, b, &r) : c0 == '-' ? __builtin_sub_overflow(a, b, &r)
             : c0 == '*' ? __builtin_mul_overflow(a, b, &r) : -1;
    if (over == 0) return jv_int(r);
    if (over == 1) return jx_fail(e, x->line, "integer overflow in '%.*s' (the result needs more than 64 bits)", op.p, op.n);
    if (c0 != '/' && c0 != '%') return jx_fail(e, x->line, "unsupported operator '%.*s'", op.p, op.n);
    if (b == 0) return jx_fail(e, x->line, "division by zero%.*s", "", 0);
    if (op.n == 1 && c0 == '/') return jv_float((double)a / (double)b);
    if (b == -1) { /* a / -1 and a % -1: the one case C's operators overflow */
        if (c0 == '%') return jv_int(0);
        if (a == LLONG_MIN) return jx_fail(e, x->line, "integer overflow in '%.*s' (the result needs more than 64 bits)", op.p, op.n);
        return jv_int(-a);
    }
    if (c0 == '%') {
        r = a % b;
        return jv_int(r != 0 && (r < 0) != (b < 0) ? r + b : r);
    }
    r = a / b;
    return jv_int(a % b != 0 && (a < 0) != (b < 0) ? r - 1 : r);
}

static JVal binary(JEval *e, const JExpr *x) {
    JStr op = x->s;
    if (jstr_eq(op, (JStr){"and", 3})) { JVal a = jx_eval(e, x->a); return jx_truthy(a) ? jx_eval(e, x->b) : a; }
    if (jstr_eq(op, (JStr){"or", 2})) { JVal a = jx_eval(e, x->a); return jx_truthy(a) ? a : jx_eval(e, x->b); }
    JVal a = jx_eval(e, x->a), b = jx_eval(e, x->b);
    if (e->failed) return UNDEF;
    char c0 = op.p[0];
    if (jstr_eq(op, (JStr){"==", 2})) return jv_bool(jx_equal(e, a, b, 0));
    if (jstr_eq(op, (JStr){"!=", 2})) return jv_bool(!jx_equal(e, a, b, 0));
    if (jstr_eq(op, (JStr){"in", 2}) || jstr_eq(op, (JStr){"notin", 5})) {
        int r = 0;
        if (b.k == JV_STR && a.k == JV_STR)
            r = a.u.s.n == 0 || memmem(b.u.s.p, b.u.s.n, a.u.s.p, a.u.s.n) != NULL;
        else if (b.k == JV_LIST) for (int i = 0; i < b.u.l->n && !r; i++) r = jx_equal(e, a, b.u.l->v[i], 0);
        else if ((b.k == JV_DICT || b.k == JV_NS) && a.k == JV_STR) r = jdict_get(b.u.d, a.u.s) != NULL;
        else if (b.k != JV_UNDEF && b.k != JV_NONE)
            return jx_fail(e, x->line, "'in' on a value that is not a string, list or dict%.*s", "", 0);
        return jv_bool(op.p[0] == 'i' ? r : !r);
    }
    if (c0 == '~' || (c0 == '+' && a.k == JV_STR && b.k == JV_STR)) {
        JStr l = c0 == '~' ? jx_stringify(e, a, 0) : a.u.s, r = c0 == '~' ? jx_stringify(e, b, 0) : b.u.s;
        if (e->failed) return UNDEF;
        if (l.n + r.n > JINJA_MAX_BYTES)
            return jx_fail(e, x->line, "'%.*s' would make a string over the render's memory limit", op.p, op.n);
        char *p = jar_alloc(e->ar, l.n + r.n + 1);
        memcpy(p, l.p, l.n);
        memcpy(p + l.n, r.p, r.n);
        return jv_str((JStr){p, l.n + r.n});
    }
    if (c0 == '+' && a.k == JV_LIST && b.k == JV_LIST) {
        e->steps += (long long)a.u.l->n + b.u.l->n;
        if (((size_t)a.u.l->n + (size_t)b.u.l->n) * sizeof(JVal) > JINJA_MAX_BYTES)
            return jx_fail(e, x->line, "'+' would make a list over the render's memory limit%.*s", "", 0);
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
        return jx_fail(e, x->line, "operator '%.*s' needs numbers here", op.p, op.n);
    if (a.k != JV_FLOAT && b.k != JV_FLOAT) return int_op(e, x, op, ival(a), ival(b));
    double x1 = num(a), y1 = num(b);
    if (c0 == '<') return jv_bool(op.n == 2 ? x1 <= y1 : x1 < y1);
    if (c0 == '>') return jv_bool(op.n == 2 ? x1 >= y1 : x1 > y1);
    if (c0 == '+') return jv_float(x1 + y1);
    if (c0 == '-') return jv_float(x1 - y1);
    if (c0 == '*') return jv_float(x1 * y1);
    if (y1 == 0) return jx_fail(e, x->line, "division by zero%.*s", "", 0);
    if (jstr_eq(op, (JStr){"//", 2})) return jv_float(floor(x1 / y1));
    if (c0 == '/') return jv_float(x1 / y1);
    if (c0 == '%') { /* the sign of the divisor, as Python */
        double r = fmod(x1, y1);
        return jv_float(r != 0 && (r < 0) != (y1 < 0) ? r + y1 : r);
    }
    return jx_fail(e, x->line, "unsupported operator '%.*s'", op.p, op.n);
}

static JVal eval_at(JEval *e, const JExpr *x);

/* Every evaluation is counted, nested and charged: the budget of steps, the
 * depth of the stack and the memory a render may use. */
JVal jx_eval(JEval *e, const JExpr *x) {
    if (e->failed) return UNDEF;
    e->line = x->line;
    if (++e->steps > JINJA_MAX_STEPS)
        return jx_fail(e, x->line, "the template runs too long (over its budget of 20 million steps)%.*s", "", 0);
    if (jar_bytes(e->ar) + e->out.n > JINJA_MAX_BYTES)
        return jx_fail(e, x->line, "the template uses more than 256 MiB (the render's memory limit)%.*s", "", 0);
    if (e->depth >= JINJA_MAX_DEPTH * 2) /* operator chains (1 + 1 + ...) nest without parentheses */
        return jx_fail(e, x->line, "expression nested too deeply%.*s", "", 0);
    e->depth++;
    JVal v = eval_at(e, x);
    e->depth--;
    return v;
}

static JVal eval_at(JEval *e, const JExpr *x) {
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
        for (int i = 0; i < x->n_args; i++) jlist_push(e->ar, l, jx_eval(e, x->args[i]));
        return jv_list(l);
    }
    case JE_DICT: {
        JVal v = {.k = JV_DICT};
        v.u.d = jar_alloc(e->ar, sizeof *v.u.d);
        for (int i = 0; i + 1 < x->n_args; i += 2) {
            JVal k = jx_eval(e, x->args[i]);
            if (k.k != JV_STR) return jx_fail(e, x->line, "dict keys must be strings%.*s", "", 0);
            jdict_set(e->ar, v.u.d, k.u.s, jx_eval(e, x->args[i + 1]));
        }
        return v;
    }
    case JE_ATTR: {
        JVal o = jx_eval(e, x->a);
        return item(e, x, o, jv_str(x->s));
    }
    case JE_ITEM: return item(e, x, jx_eval(e, x->a), jx_eval(e, x->b));
    case JE_SLICE: return slice(e, x);
    case JE_CALL: return jx_call(e, x);
    case JE_FILTER: return jx_filter(e, x);
    case JE_TEST: return jx_test(e, x);
    case JE_NOT: return jv_bool(!jx_truthy(jx_eval(e, x->a)));
    case JE_NEG: {
        JVal v = jx_eval(e, x->a);
        if (v.k == JV_INT) {
            if (v.u.i == LLONG_MIN)
                return jx_fail(e, x->line, "integer overflow in unary '-' (the result needs more than 64 bits)%.*s", "", 0);
            return jv_int(-v.u.i);
        }
        if (v.k == JV_FLOAT) return (JVal){.k = JV_FLOAT, .u.f = -v.u.f};
        return jx_fail(e, x->line, "unary '-' needs a number%.*s", "", 0);
    }
    case JE_BIN: return binary(e, x);
    case JE_COND:
        if (jx_truthy(jx_eval(e, x->c))) return jx_eval(e, x->a);
        return x->b ? jx_eval(e, x->b) : UNDEF;
    }
    return UNDEF;
}

static void push_frame(JEval *e) {
    if (e->n_frames == e->cap_frames) {
        e->cap_frames = e->cap_frames ? e->cap_frames * 2 : 8;
        JDict **nf = jar_alloc(e->ar, (size_t)e->cap_frames * sizeof *nf);
        if (e->n_frames) memcpy(nf, e->frames, (size_t)e->n_frames * sizeof *nf);
        e->frames = nf;
    }
    e->frames[e->n_frames++] = jar_alloc(e->ar, sizeof(JDict));
}

static int exec(JEval *e, JStmt **ss, int n);

static int exec_for(JEval *e, const JStmt *s) {
    JVal it = jx_eval(e, s->expr);
    if (e->failed) return -1;
    JList *items;
    if (it.k == JV_LIST) items = it.u.l;
    else if (it.k == JV_DICT) { /* iterating a dict gives its keys */
        items = jar_alloc(e->ar, sizeof *items);
        for (int i = 0; i < it.u.d->n; i++) jlist_push(e->ar, items, jv_str(it.u.d->keys[i]));
    } else if (it.k == JV_UNDEF || it.k == JV_NONE) items = jar_alloc(e->ar, sizeof *items);
    else { jx_fail(e, s->line, "for: cannot iterate this value%.*s", "", 0); return -1; }
    push_frame(e);
    JDict *fr = e->frames[e->n_frames - 1];
    if (s->filter) { /* `for x in xs if cond`: filter first, so loop.length counts kept items */
        JList *kept = jar_alloc(e->ar, sizeof *kept);
        for (int i = 0; i < items->n; i++) {
            jdict_set(e->ar, fr, s->var, items->v[i]);
            if (jx_truthy(jx_eval(e, s->filter))) jlist_push(e->ar, kept, items->v[i]);
        }
        items = kept;
    }
    /* one loop object, updated per iteration (Jinja2's LoopContext is one object too) */
    JVal loop = {.k = JV_DICT};
    loop.u.d = jar_alloc(e->ar, sizeof *loop.u.d);
    for (int i = 0; i < items->n && !e->failed; i++) {
        if (++e->steps > JINJA_MAX_STEPS) {
            jx_fail(e, s->line, "the template runs too long (over its budget of 20 million steps)%.*s", "", 0);
            break;
        }
        fr->n = 0; /* a fresh scope per iteration, as in Jinja2 */
        jdict_set(e->ar, loop.u.d, (JStr){"index0", 6}, jv_int(i));
        jdict_set(e->ar, loop.u.d, (JStr){"index", 5}, jv_int(i + 1));
        jdict_set(e->ar, loop.u.d, (JStr){"revindex0", 9}, jv_int(items->n - 1 - i));
        jdict_set(e->ar, loop.u.d, (JStr){"revindex", 8}, jv_int(items->n - i));
        jdict_set(e->ar, loop.u.d, (JStr){"first", 5}, jv_bool(i == 0));
        jdict_set(e->ar, loop.u.d, (JStr){"last", 4}, jv_bool(i == items->n - 1));
        jdict_set(e->ar, loop.u.d, (JStr){"length", 6}, jv_int(items->n));
        jdict_set(e->ar, loop.u.d, (JStr){"previtem", 8}, i > 0 ? items->v[i - 1] : UNDEF);
        jdict_set(e->ar, loop.u.d, (JStr){"nextitem", 8}, i + 1 < items->n ? items->v[i + 1] : UNDEF);
        jdict_set(e->ar, fr, (JStr){"loop", 4}, loop);
        JVal v = items->v[i];
        if (s->var2.n) {
            if (v.k != JV_LIST || v.u.l->n != 2) {
                jx_fail(e, s->line, "for: cannot unpack into two variables%.*s", "", 0);
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

static int exec(JEval *e, JStmt **ss, int n) {
    for (int i = 0; i < n && !e->failed; i++) {
        const JStmt *s = ss[i];
        e->line = s->line;
        if (e->out.n > JINJA_MAX_BYTES) {
            jx_fail(e, s->line, "the output is over the render's memory limit (256 MiB)%.*s", "", 0);
            break;
        }
        switch (s->kind) {
        case JS_TEXT: tbuf_put(&e->out, s->text.p, s->text.n); break;
        case JS_OUT: {
            JVal v = jx_eval(e, s->expr);
            if (!e->failed) jx_to_text(e, &e->out, v, 0, 0);
            break;
        }
        case JS_IF:
            if (jx_truthy(jx_eval(e, s->expr))) exec(e, s->body, s->n_body);
            else exec(e, s->orelse, s->n_orelse);
            break;
        case JS_FOR: exec_for(e, s); break;
        case JS_SET: {
            JVal v = jx_eval(e, s->expr);
            if (e->failed) break;
            if (s->attr.n) {
                JVal ns = lookup(e, s->var);
                if (ns.k != JV_NS) { jx_fail(e, s->line, "set %.*s.attr: not a namespace", s->var.p, s->var.n); break; }
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
    JEval e = {.ar = ar, .err = err};
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
