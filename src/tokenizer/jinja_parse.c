/* tokenizer/jinja_parse.c — chat_template source -> statement tree.
 *
 * Two passes: the template is cut into text, {{ expr }} and {% stmt %}
 * segments (applying {%- -%}, trim_blocks and lstrip_blocks as transformers'
 * Jinja environment does), then a recursive-descent parser builds the tree.
 * Operator precedence is Jinja2's: or < and < not < comparisons/in < + - <
 * ~ < * / // % < unary -; filters (|) and tests (is) bind to the operand. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"

/* ---- arena ------------------------------------------------------------------ */
struct JArena {
    struct JChunk {
        struct JChunk *next;
        size_t used, cap;
        _Alignas(16) char data[];
    } *head;
    size_t bytes;
};

JArena *jar_new(void) { return xcalloc(1, sizeof(JArena)); }

void *jar_alloc(JArena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->used + n > a->head->cap) {
        size_t cap = n > 65536 ? n : 65536;
        struct JChunk *c = xmalloc(sizeof *c + cap);
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    a->bytes += n;
    memset(p, 0, n);
    return p;
}

size_t jar_bytes(const JArena *a) { return a->bytes; }

void jar_free(JArena *a) {
    if (!a) return;
    for (struct JChunk *c = a->head, *n; c; c = n) { n = c->next; free(c); }
    free(a);
}

/* ---- lexer ------------------------------------------------------------------ */
typedef enum { T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_END } TokKind;
typedef struct {
    TokKind k;
    JStr s; /* name / op text / decoded string */
    long long i;
    double f;
    int line;
} JTok;

typedef enum { SEG_TEXT, SEG_EXPR, SEG_STMT } SegKind;
typedef struct {
    SegKind k;
    int line;
    JStr text;
    JTok *toks; /* ends with T_END */
    int n_toks;
} Seg;

typedef struct {
    JArena *ar;
    GrpoErr *err;
    Seg *segs;
    int n_segs, cap_segs;
    int si;  /* current segment */
    int ti;  /* current token in it */
    int depth; /* nesting of expressions and blocks being parsed */
} P;

static int fail(P *p, int line, const char *what) {
    return err_set(p->err, "line %d: %s", line, what);
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static Seg *seg_push(P *p, SegKind k, int line) {
    if (p->n_segs == p->cap_segs) {
        p->cap_segs = p->cap_segs ? p->cap_segs * 2 : 64;
        Seg *n = jar_alloc(p->ar, (size_t)p->cap_segs * sizeof *n);
        if (p->n_segs) memcpy(n, p->segs, (size_t)p->n_segs * sizeof *n);
        p->segs = n;
    }
    Seg *s = &p->segs[p->n_segs++];
    memset(s, 0, sizeof *s);
    s->k = k;
    s->line = line;
    return s;
}

/* Tokenizes src[*i ..] up to the closing "}}" / "%}"; sets *strip_after for a
 * "-" before it. */
static int lex_tag(P *p, const char *src, size_t *i, char close, int *line, Seg *seg,
                   int *strip_after) {
    int cap = 16, n = 0;
    JTok *t = jar_alloc(p->ar, (size_t)cap * sizeof *t);
    size_t k = *i;
    for (;;) {
        while (src[k] && is_ws(src[k])) { if (src[k] == '\n') (*line)++; k++; }
        if (!src[k]) return fail(p, *line, "unterminated tag");
        if (n + 1 >= cap) {
            JTok *nt = jar_alloc(p->ar, (size_t)cap * 2 * sizeof *nt);
            memcpy(nt, t, (size_t)n * sizeof *t);
            t = nt;
            cap *= 2;
        }
        if (src[k] == '-' && src[k + 1] == close && src[k + 2] == '}') { *strip_after = 1; k += 3; break; }
        if (src[k] == close && src[k + 1] == '}') { k += 2; break; }
        JTok *tk = &t[n++];
        tk->line = *line;
        char c = src[k];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t s = k;
            while ((src[k] >= 'a' && src[k] <= 'z') || (src[k] >= 'A' && src[k] <= 'Z') ||
                   (src[k] >= '0' && src[k] <= '9') || src[k] == '_') k++;
            tk->k = T_NAME;
            tk->s = (JStr){src + s, k - s};
        } else if (c >= '0' && c <= '9') {
            char *end;
            errno = 0;
            tk->i = strtoll(src + k, &end, 10);
            tk->k = T_INT;
            if (*end == '.' && end[1] >= '0' && end[1] <= '9') {
                tk->f = strtod(src + k, &end);
                tk->k = T_FLOAT;
            } else if (errno == ERANGE) {
                return fail(p, *line, "integer literal out of the 64-bit range");
            }
            k = (size_t)(end - src);
        } else if (c == '\'' || c == '"') {
            size_t len = 1; /* up to the closing quote: the decoded text is no longer */
            while (src[k + len] && src[k + len] != c) len += src[k + len] == '\\' && src[k + len + 1] ? 2 : 1;
            char *buf = jar_alloc(p->ar, len + 1);
            size_t m = 0;
            k++;
            while (src[k] && src[k] != c) {
                if (src[k] == '\\' && src[k + 1]) {
                    k++;
                    char e = src[k];
                    buf[m++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
                } else {
                    if (src[k] == '\n') (*line)++;
                    buf[m++] = src[k];
                }
                k++;
            }
            if (!src[k]) return fail(p, *line, "unterminated string");
            k++;
            tk->k = T_STR;
            tk->s = (JStr){buf, m};
        } else {
            static const char *ops2[] = {"==", "!=", "<=", ">=", "//", "**"};
            tk->k = T_OP;
            tk->s = (JStr){src + k, 1};
            for (int o = 0; o < 6; o++)
                if (!strncmp(src + k, ops2[o], 2)) tk->s.n = 2;
            if (!strchr("()[]{}.,:|~+-*/%<>=!", c)) return fail(p, *line, "unexpected character in tag");
            k += tk->s.n;
        }
    }
    t[n].k = T_END;
    t[n].line = *line;
    seg->toks = t;
    seg->n_toks = n;
    *i = k;
    return 0;
}

static int split_segments(P *p, const char *src) {
    size_t i = 0, len = strlen(src);
    int line = 1, strip_next = 0, trim_nl = 0;
    while (i <= len) {
        /* next tag start */
        size_t j = i;
        while (j < len && !(src[j] == '{' && (src[j + 1] == '{' || src[j + 1] == '%' || src[j + 1] == '#'))) j++;
        size_t a = i, b = j;
        if (strip_next) while (a < b && is_ws(src[a])) a++;
        else if (trim_nl && a < b && src[a] == '\n') a++;
        else if (trim_nl && a + 1 < b && src[a] == '\r' && src[a + 1] == '\n') a += 2;
        strip_next = trim_nl = 0;
        if (j < len) {
            char kind = src[j + 1];
            if (src[j + 2] == '-') while (b > a && is_ws(src[b - 1])) b--;
            else if (kind != '{' && src[j + 2] != '+') { /* lstrip_blocks */
                size_t w = b;
                while (w > a && (src[w - 1] == ' ' || src[w - 1] == '\t')) w--;
                if (w == 0 || src[w - 1] == '\n') b = w;
            }
        }
        Seg *t = seg_push(p, SEG_TEXT, line);
        t->text = (JStr){src + a, b - a};
        for (size_t k = i; k < j; k++) line += src[k] == '\n';
        if (j >= len) break;
        char kind = src[j + 1];
        i = j + 2;
        if (src[i] == '-' || src[i] == '+') i++;
        if (kind == '#') {
            const char *e = strstr(src + i, "#}");
            if (!e) return fail(p, line, "unterminated comment");
            for (const char *q = src + i; q < e; q++) line += *q == '\n';
            strip_next = e > src + i && e[-1] == '-';
            trim_nl = !strip_next;
            i = (size_t)(e - src) + 2;
            continue;
        }
        Seg *s = seg_push(p, kind == '{' ? SEG_EXPR : SEG_STMT, line);
        if (lex_tag(p, src, &i, kind == '{' ? '}' : '%', &line, s, &strip_next)) return -1;
        if (kind == '%' && !strip_next) trim_nl = 1;
    }
    return 0;
}

/* ---- expression parser ------------------------------------------------------ */
static JTok *cur(P *p) { return &p->segs[p->si].toks[p->ti]; }
static int is_op(P *p, const char *op) {
    JTok *t = cur(p);
    return t->k == T_OP && t->s.n == strlen(op) && !memcmp(t->s.p, op, t->s.n);
}
static int is_name(P *p, const char *kw) {
    JTok *t = cur(p);
    return t->k == T_NAME && t->s.n == strlen(kw) && !memcmp(t->s.p, kw, t->s.n);
}
static int expect_op(P *p, const char *op) {
    if (!is_op(p, op)) {
        char m[64];
        snprintf(m, sizeof m, "expected '%s'", op);
        return fail(p, cur(p)->line, m);
    }
    p->ti++;
    return 0;
}

static JExpr *node(P *p, JExprKind k) {
    JExpr *e = jar_alloc(p->ar, sizeof *e);
    e->kind = k;
    e->line = cur(p)->line;
    return e;
}

static JExpr *expr(P *p);
static JExpr *unary(P *p);

/* Nesting (parentheses, lists, unary operators, blocks) is recursion here and
 * when rendering: a template nested deeper than this is refused, not a stack
 * overflow. Real chat templates nest fewer than 20 levels. */
static int enter(P *p) {
    if (++p->depth <= JINJA_MAX_DEPTH) return 0;
    char m[96];
    snprintf(m, sizeof m, "nested deeper than %d levels", JINJA_MAX_DEPTH);
    return fail(p, p->si < p->n_segs ? cur(p)->line : p->n_segs ? p->segs[p->n_segs - 1].line : 1, m);
}

static int add_arg(P *p, JExpr *e, JExpr *v, JStr kw) {
    JExpr **na = jar_alloc(p->ar, (size_t)(e->n_args + 1) * sizeof *na);
    JStr *nk = jar_alloc(p->ar, (size_t)(e->n_args + 1) * sizeof *nk);
    if (e->n_args) {
        memcpy(na, e->args, (size_t)e->n_args * sizeof *na);
        memcpy(nk, e->kw, (size_t)e->n_args * sizeof *nk);
    }
    na[e->n_args] = v;
    nk[e->n_args] = kw;
    e->args = na;
    e->kw = nk;
    e->n_args++;
    return 0;
}

/* ( args ) after the '(' has been consumed */
static int call_args(P *p, JExpr *e) {
    while (!is_op(p, ")")) {
        JStr kw = {0};
        JTok *t = cur(p);
        if (t->k == T_NAME && t[1].k == T_OP && t[1].s.n == 1 && t[1].s.p[0] == '=') {
            kw = t->s;
            p->ti += 2;
        }
        JExpr *v = expr(p);
        if (!v) return -1;
        add_arg(p, e, v, kw);
        if (is_op(p, ",")) p->ti++;
        else if (!is_op(p, ")")) return fail(p, cur(p)->line, "expected ',' or ')' in call");
    }
    p->ti++;
    return 0;
}

/* A string literal; adjacent literals concatenate ("a" "b" is "ab"). */
static JExpr *string_literal(P *p) {
    JExpr *e = node(p, JE_STR);
    e->s = cur(p)->s;
    p->ti++;
    while (cur(p)->k == T_STR) {
        JStr s2 = cur(p)->s;
        char *b = jar_alloc(p->ar, e->s.n + s2.n + 1);
        memcpy(b, e->s.p, e->s.n);
        memcpy(b + e->s.n, s2.p, s2.n);
        e->s = (JStr){b, e->s.n + s2.n};
        p->ti++;
    }
    return e;
}

/* A name: the constants true/false/none (either capitalisation) or a variable. */
static JExpr *name_or_constant(P *p) {
    JExpr *e;
    if (is_name(p, "true") || is_name(p, "True")) e = node(p, JE_TRUE);
    else if (is_name(p, "false") || is_name(p, "False")) e = node(p, JE_FALSE);
    else if (is_name(p, "none") || is_name(p, "None")) e = node(p, JE_NONE);
    else { e = node(p, JE_NAME); e->s = cur(p)->s; }
    p->ti++;
    return e;
}

/* [a, b, ...] after the '[' has been consumed (a trailing comma is allowed). */
static JExpr *list_literal(P *p) {
    JExpr *e = node(p, JE_LIST);
    while (!is_op(p, "]")) {
        JExpr *v = expr(p);
        if (!v) return NULL;
        add_arg(p, e, v, (JStr){0});
        if (is_op(p, ",")) p->ti++;
        else if (!is_op(p, "]")) { fail(p, cur(p)->line, "expected ',' or ']'"); return NULL; }
    }
    p->ti++;
    return e;
}

/* {k: v, ...} after the '{' has been consumed; args hold k0, v0, k1, v1, ... */
static JExpr *dict_literal(P *p) {
    JExpr *e = node(p, JE_DICT);
    while (!is_op(p, "}")) {
        JExpr *k = expr(p);
        if (!k || expect_op(p, ":")) return NULL;
        JExpr *v = expr(p);
        if (!v) return NULL;
        add_arg(p, e, k, (JStr){0});
        add_arg(p, e, v, (JStr){0});
        if (is_op(p, ",")) p->ti++;
        else if (!is_op(p, "}")) { fail(p, cur(p)->line, "expected ',' or '}'"); return NULL; }
    }
    p->ti++;
    return e;
}

/* A literal, a name, a list, a dict or a parenthesised expression. */
static JExpr *atom(P *p) {
    JTok *t = cur(p);
    JExpr *e;
    if (t->k == T_STR) return string_literal(p);
    if (t->k == T_INT) { e = node(p, JE_INT); e->i = t->i; p->ti++; return e; }
    if (t->k == T_FLOAT) { e = node(p, JE_FLOAT); e->f = t->f; p->ti++; return e; }
    if (t->k == T_NAME) return name_or_constant(p);
    if (is_op(p, "(")) {
        p->ti++;
        e = expr(p);
        if (!e || expect_op(p, ")")) return NULL;
        return e;
    }
    if (is_op(p, "[")) { p->ti++; return list_literal(p); }
    if (is_op(p, "{")) { p->ti++; return dict_literal(p); }
    fail(p, t->line, t->k == T_END ? "unexpected end of tag" : "unexpected token");
    return NULL;
}

/* e[index] or e[lo:hi:step] (each part optional) after the '[' has been consumed. */
static JExpr *subscript(P *p, JExpr *e) {
    JExpr *lo = NULL, *hi = NULL, *st = NULL, *r;
    if (!is_op(p, ":")) { lo = expr(p); if (!lo) return NULL; }
    if (is_op(p, ":")) {
        p->ti++;
        if (!is_op(p, ":") && !is_op(p, "]")) { hi = expr(p); if (!hi) return NULL; }
        if (is_op(p, ":")) {
            p->ti++;
            if (!is_op(p, "]")) { st = expr(p); if (!st) return NULL; }
        }
        r = node(p, JE_SLICE);
        r->a = e;
        r->args = jar_alloc(p->ar, 3 * sizeof *r->args);
        r->args[0] = lo; r->args[1] = hi; r->args[2] = st;
        r->n_args = 3;
    } else {
        r = node(p, JE_ITEM);
        r->a = e;
        r->b = lo;
    }
    if (expect_op(p, "]")) return NULL;
    return r;
}

/* Postfix operators on e, left to right: .attr  [index|slice]  (call). */
static JExpr *postfix(P *p, JExpr *e) {
    for (;;) {
        if (is_op(p, ".")) {
            p->ti++;
            if (cur(p)->k != T_NAME) { fail(p, cur(p)->line, "expected a name after '.'"); return NULL; }
            JExpr *a = node(p, JE_ATTR);
            a->a = e;
            a->s = cur(p)->s;
            p->ti++;
            e = a;
        } else if (is_op(p, "[")) {
            p->ti++;
            if (!(e = subscript(p, e))) return NULL;
        } else if (is_op(p, "(")) {
            p->ti++;
            JExpr *c = node(p, JE_CALL);
            c->a = e;
            if (call_args(p, c)) return NULL;
            e = c;
        } else
            return e;
    }
}

static JExpr *primary(P *p);

/* Filters and tests on e, left to right: |name[(args)]  is [not] name[(args) | literal]. */
static JExpr *filters_and_tests(P *p, JExpr *e) {
    for (;;) {
        if (is_op(p, "|")) {
            p->ti++;
            if (cur(p)->k != T_NAME) { fail(p, cur(p)->line, "expected a filter name"); return NULL; }
            JExpr *f = node(p, JE_FILTER);
            f->a = e;
            f->s = cur(p)->s;
            p->ti++;
            if (is_op(p, "(")) { p->ti++; if (call_args(p, f)) return NULL; }
            e = f;
        } else if (is_name(p, "is")) {
            p->ti++;
            JExpr *t2 = node(p, JE_TEST);
            if (is_name(p, "not")) { t2->negate = 1; p->ti++; }
            if (cur(p)->k != T_NAME) { fail(p, cur(p)->line, "expected a test name"); return NULL; }
            t2->a = e;
            t2->s = cur(p)->s;
            p->ti++;
            if (is_op(p, "(")) { p->ti++; if (call_args(p, t2)) return NULL; }
            else if (cur(p)->k == T_STR || cur(p)->k == T_INT) { /* `is equalto 3` */
                JExpr *v = primary(p);
                if (!v) return NULL;
                add_arg(p, t2, v, (JStr){0});
            }
            e = t2;
        } else
            return e;
    }
}

/* An atom with its postfix operators, then its filters and tests. */
static JExpr *primary(P *p) {
    JExpr *e = atom(p);
    if (e) e = postfix(p, e);
    if (e) e = filters_and_tests(p, e);
    return e;
}

static JExpr *unary(P *p) {
    if (!is_op(p, "-") && !is_op(p, "+")) return primary(p);
    int neg = is_op(p, "-");
    p->ti++;
    if (enter(p)) return NULL;
    JExpr *e = node(p, JE_NEG), *a = unary(p);
    p->depth--;
    if (!a) return NULL;
    if (!neg) return a;
    e->a = a;
    return e;
}

static JExpr *bin(P *p, const char *op, JExpr *l, JExpr *r) {
    if (!l || !r) return NULL;
    JExpr *e = node(p, JE_BIN);
    e->s = (JStr){op, strlen(op)};
    e->a = l;
    e->b = r;
    return e;
}

static JExpr *math2(P *p) {
    JExpr *e = unary(p);
    while (e && (is_op(p, "*") || is_op(p, "/") || is_op(p, "//") || is_op(p, "%"))) {
        const char *op = is_op(p, "*") ? "*" : is_op(p, "//") ? "//" : is_op(p, "/") ? "/" : "%";
        p->ti++;
        e = bin(p, op, e, unary(p));
    }
    return e;
}

static JExpr *concat(P *p) {
    JExpr *e = math2(p);
    while (e && is_op(p, "~")) { p->ti++; e = bin(p, "~", e, math2(p)); }
    return e;
}

static JExpr *math1(P *p) {
    JExpr *e = concat(p);
    while (e && (is_op(p, "+") || is_op(p, "-"))) {
        const char *op = is_op(p, "+") ? "+" : "-";
        p->ti++;
        e = bin(p, op, e, concat(p));
    }
    return e;
}

static JExpr *compare(P *p) {
    JExpr *e = math1(p);
    for (;;) {
        if (!e) return NULL;
        static const char *ops[] = {"==", "!=", "<=", ">=", "<", ">"};
        int found = 0;
        for (int i = 0; i < 6 && !found; i++)
            if (is_op(p, ops[i])) { p->ti++; e = bin(p, ops[i], e, math1(p)); found = 1; }
        if (found) continue;
        if (is_name(p, "in")) { p->ti++; e = bin(p, "in", e, math1(p)); continue; }
        if (is_name(p, "not") && cur(p)[1].k == T_NAME && cur(p)[1].s.n == 2 &&
            !memcmp(cur(p)[1].s.p, "in", 2)) {
            p->ti += 2;
            e = bin(p, "notin", e, math1(p));
            continue;
        }
        return e;
    }
}

static JExpr *not_expr(P *p) {
    if (!is_name(p, "not")) return compare(p);
    p->ti++;
    if (enter(p)) return NULL;
    JExpr *e = node(p, JE_NOT);
    e->a = not_expr(p);
    p->depth--;
    return e->a ? e : NULL;
}

static JExpr *and_expr(P *p) {
    JExpr *e = not_expr(p);
    while (e && is_name(p, "and")) { p->ti++; e = bin(p, "and", e, not_expr(p)); }
    return e;
}

static JExpr *or_expr(P *p) {
    JExpr *e = and_expr(p);
    while (e && is_name(p, "or")) { p->ti++; e = bin(p, "or", e, and_expr(p)); }
    return e;
}

static JExpr *cond_expr(P *p);
static JExpr *expr(P *p) {
    if (enter(p)) return NULL;
    JExpr *e = cond_expr(p);
    p->depth--;
    return e;
}

static JExpr *cond_expr(P *p) {
    JExpr *e = or_expr(p);
    if (e && is_name(p, "if")) {
        p->ti++;
        JExpr *c = node(p, JE_COND);
        c->a = e;
        c->c = or_expr(p);
        if (!c->c) return NULL;
        if (is_name(p, "else")) {
            p->ti++;
            c->b = expr(p);
            if (!c->b) return NULL;
        }
        return c;
    }
    return e;
}

/* ---- statements -------------------------------------------------------------- */
/* The list's capacity is the power of two at or above its length: it grows
 * when the length reaches one. */
static int stmt_list_push(P *p, JStmt ***list, int *n, JStmt *s) {
    if ((*n & (*n - 1)) == 0) {
        JStmt **nl = jar_alloc(p->ar, (size_t)(*n ? 2 * *n : 1) * sizeof *nl);
        if (*n) memcpy(nl, *list, (size_t)*n * sizeof *nl);
        *list = nl;
    }
    (*list)[(*n)++] = s;
    return 0;
}

static int at_end(P *p) {
    if (cur(p)->k != T_END) return fail(p, cur(p)->line, "unexpected token at end of tag");
    return 0;
}

/* Parses statements until a {% kw %} with kw in stops (NULL-terminated);
 * leaves p->ti after that keyword and returns its index, or -1 on error.
 * With stops == NULL, runs to the end of the template. */
static int block_at(P *p, JStmt ***list, int *n, const char *const *stops);
static int block(P *p, JStmt ***list, int *n, const char *const *stops) {
    if (stops && enter(p)) return -1;
    int k = block_at(p, list, n, stops);
    if (stops) p->depth--;
    return k;
}

/* {% if %} ... {% elif %} ... {% else %} ... {% endif %}: the keyword read, s->line set. */
static int if_stmt(P *p, JStmt *s) {
    s->kind = JS_IF;
    JStmt *cur_if = s;
    if (!(s->expr = expr(p)) || at_end(p)) return -1;
    p->si++;
    static const char *const if_stops[] = {"elif", "else", "endif", NULL};
    for (;;) {
        int k = block(p, &cur_if->body, &cur_if->n_body, if_stops);
        if (k < 0) return -1;
        if (k == 0) { /* elif: a nested if in the else branch */
            JStmt *e = jar_alloc(p->ar, sizeof *e);
            e->kind = JS_IF;
            e->line = p->segs[p->si].line;
            if (!(e->expr = expr(p)) || at_end(p)) return -1;
            p->si++;
            stmt_list_push(p, &cur_if->orelse, &cur_if->n_orelse, e);
            cur_if = e;
            continue;
        }
        if (k == 1) {
            if (at_end(p)) return -1;
            p->si++;
            static const char *const end_if[] = {"endif", NULL};
            if (block(p, &cur_if->orelse, &cur_if->n_orelse, end_if) < 0) return -1;
        }
        if (at_end(p)) return -1;
        p->si++;
        return 0;
    }
}

/* {% for x[, y] in seq [if cond] %} ... [{% else %} ...] {% endfor %}. */
static int for_stmt(P *p, JStmt *s) {
    s->kind = JS_FOR;
    if (cur(p)->k != T_NAME) return fail(p, s->line, "for: expected a loop variable");
    s->var = cur(p)->s;
    p->ti++;
    if (is_op(p, ",")) {
        p->ti++;
        if (cur(p)->k != T_NAME) return fail(p, s->line, "for: expected a second loop variable");
        s->var2 = cur(p)->s;
        p->ti++;
    }
    if (!is_name(p, "in")) return fail(p, s->line, "for: expected 'in'");
    p->ti++;
    if (!(s->expr = or_expr(p))) return -1;
    if (is_name(p, "if")) { p->ti++; if (!(s->filter = or_expr(p))) return -1; }
    if (at_end(p)) return -1;
    p->si++;
    static const char *const for_stops[] = {"else", "endfor", NULL};
    int k = block(p, &s->body, &s->n_body, for_stops);
    if (k < 0) return -1;
    if (k == 0) {
        if (at_end(p)) return -1;
        p->si++;
        static const char *const end_for[] = {"endfor", NULL};
        if (block(p, &s->orelse, &s->n_orelse, end_for) < 0) return -1;
    }
    if (at_end(p)) return -1;
    p->si++;
    return 0;
}

/* {% set name[.attr] = value %}. */
static int set_stmt(P *p, JStmt *s) {
    s->kind = JS_SET;
    if (cur(p)->k != T_NAME) return fail(p, s->line, "set: expected a name");
    s->var = cur(p)->s;
    p->ti++;
    if (is_op(p, ".")) {
        p->ti++;
        if (cur(p)->k != T_NAME) return fail(p, s->line, "set: expected an attribute name");
        s->attr = cur(p)->s;
        p->ti++;
    }
    if (!is_op(p, "=")) return fail(p, s->line, "set: only `set name = value` is supported");
    p->ti++;
    if (!(s->expr = expr(p)) || at_end(p)) return -1;
    p->si++;
    return 0;
}

static int block_at(P *p, JStmt ***list, int *n, const char *const *stops) {
    while (p->si < p->n_segs) {
        Seg *sg = &p->segs[p->si];
        if (sg->k == SEG_TEXT) {
            if (sg->text.n) {
                JStmt *s = jar_alloc(p->ar, sizeof *s);
                s->kind = JS_TEXT;
                s->text = sg->text;
                stmt_list_push(p, list, n, s);
            }
            p->si++;
            continue;
        }
        p->ti = 0;
        JStmt *s = jar_alloc(p->ar, sizeof *s);
        s->line = sg->line;
        if (sg->k == SEG_EXPR) {
            s->kind = JS_OUT;
            if (!(s->expr = expr(p)) || at_end(p)) return -1;
            stmt_list_push(p, list, n, s);
            p->si++;
            continue;
        }
        if (cur(p)->k != T_NAME) return fail(p, sg->line, "expected a statement keyword");
        for (int k = 0; stops && stops[k]; k++)
            if (is_name(p, stops[k])) { p->ti++; return k; }
        int rc;
        if (is_name(p, "if")) {
            p->ti++;
            rc = if_stmt(p, s);
        } else if (is_name(p, "for")) {
            p->ti++;
            rc = for_stmt(p, s);
        } else if (is_name(p, "set")) {
            p->ti++;
            rc = set_stmt(p, s);
        } else {
            char m[160];
            snprintf(m, sizeof m, "unsupported statement '%.*s' (supported: if/elif/else, for, set)",
                     (int)cur(p)->s.n, cur(p)->s.p);
            return fail(p, sg->line, m);
        }
        if (rc) return -1;
        stmt_list_push(p, list, n, s);
    }
    if (stops) {
        char m[96];
        snprintf(m, sizeof m, "missing {%% %s %%}", stops[0][0] == 'e' && stops[1] ? "endfor/endif" : stops[0]);
        return fail(p, p->n_segs ? p->segs[p->n_segs - 1].line : 1, m);
    }
    return 0;
}

int jinja_parse(JArena *ar, const char *src, JTemplate *out, GrpoErr *err) {
    P p = {.ar = ar, .err = err};
    memset(out, 0, sizeof *out);
    if (split_segments(&p, src)) return -1;
    return block(&p, &out->stmts, &out->n, NULL) < 0 ? -1 : 0;
}
