/* reward/math_parse.c — LaTeX math answers read into MathValues (math_expr.h).
 *
 * The text is normalised first (math_normalise.c); the grammar covers what answers are
 * written in: numbers (thousands separators, decimals, percents), + - * / ^,
 * implicit products, mixed numbers (2\frac{1}{2} = 5/2, as latex2sympy reads
 * them), \frac \sqrt \binom, functions, constants, variables, \text{} words,
 * sets, lists, tuples, intervals, unions, matrices and relation chains with
 * latex2sympy's rules for "x = ...", "x \approx ..." and "x \in S". It is not
 * a LaTeX parser: anything else (integrals, sums, unknown commands) makes the
 * parse fail, and the caller compares text instead. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "reward/math_expr.h"

/* ---- arena --------------------------------------------------------------------- */

typedef struct ArenaBlock {
    struct ArenaBlock *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} ArenaBlock;

struct MathArena {
    ArenaBlock *head; /* the block being filled; older ones behind it */
};

MathArena *math_arena_new(void) { return xcalloc(1, sizeof(MathArena)); }

void math_arena_free(MathArena *a) {
    if (!a) return;
    for (ArenaBlock *b = a->head, *next; b; b = next) next = b->next, free(b);
    free(a);
}

/* Zeroed memory from the arena, a new block when the head one is full. */
static void *arena_alloc(MathArena *a, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    if (!a->head || a->head->used + bytes > a->head->size) {
        size_t size = bytes > 8192 ? bytes : 8192;
        ArenaBlock *b = xmalloc(sizeof *b + size);
        b->next = a->head, b->used = 0, b->size = size;
        a->head = b;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += bytes;
    memset(p, 0, bytes);
    return p;
}

/* ---- the parser ---------------------------------------------------------------- */

typedef struct {
    const char *p;
    MathArena *arena;
    int depth, failed;
    int comma_number; /* the whole answer is one number with thousands separators */
    int nodes;       /* nodes and values made so far */
} Parser;

/* Answers are short: deeper nesting or more nodes than these is refused, so
 * neither the parse nor the evaluation's recursion can exhaust the stack. */
enum { MAX_DEPTH = 200, MAX_NODES = 4000 };

static void skip_ws(Parser *ps) {
    while (isspace((unsigned char)*ps->p)) ps->p++;
}

/* Consumes `word` (after blanks) when it is next; a command is not taken as a prefix of a longer one. */
static int eat(Parser *ps, const char *word) {
    skip_ws(ps);
    size_t n = strlen(word);
    if (strncmp(ps->p, word, n)) return 0;
    if (word[0] == '\\' && isalpha((unsigned char)word[n - 1]) && isalpha((unsigned char)ps->p[n])) return 0;
    ps->p += n;
    return 1;
}

static MathNode *node(Parser *ps, MathNodeKind kind, MathNode *a, MathNode *b) {
    if (++ps->nodes > MAX_NODES) ps->failed = 1; /* the parse fails; the node is still valid */
    MathNode *n = arena_alloc(ps->arena, sizeof *n);
    n->kind = kind, n->a = a, n->b = b;
    return n;
}

static MathValue *value(Parser *ps, MathValueKind kind) {
    if (++ps->nodes > MAX_NODES) ps->failed = 1;
    MathValue *v = arena_alloc(ps->arena, sizeof *v);
    v->kind = kind;
    return v;
}

static void *fail(Parser *ps) {
    ps->failed = 1;
    return NULL;
}

/* latex2sympy reads commas as thousands separators only when the whole
 * answer is such a number (-?d{1,3}(,ddd)+(.d+)?): 7,425,000 is one number,
 * (12,102) an interval and 1,000, 2 a list. */
static int is_comma_number(const char *s) {
    while (isspace((unsigned char)*s)) s++;
    if (*s == '-') s++;
    int lead = 0, groups = 0;
    while (isdigit((unsigned char)*s)) s++, lead++;
    if (lead < 1 || lead > 3) return 0;
    while (s[0] == ',' && isdigit((unsigned char)s[1]) && isdigit((unsigned char)s[2]) && isdigit((unsigned char)s[3]))
        s += 4, groups++;
    if (*s == '.' && isdigit((unsigned char)s[1]))
        for (s++; isdigit((unsigned char)*s);) s++;
    while (isspace((unsigned char)*s)) s++;
    return groups > 0 && !*s;
}

/* A ',' that separates thousands: after a digit, exactly three digits follow. */
static int thousands_comma(const char *p, const char *start) {
    return *p == ',' && p > start && isdigit((unsigned char)p[-1]) && isdigit((unsigned char)p[1]) &&
           isdigit((unsigned char)p[2]) && isdigit((unsigned char)p[3]) && !isdigit((unsigned char)p[4]);
}

static MathNode *parse_expr(Parser *ps);
static MathValue *parse_list(Parser *ps);

static MathNode *parse_number(Parser *ps) {
    const char *p = ps->p, *start = p;
    char buf[128];
    size_t n = 0;
    int decimal = 0;
    while (isdigit((unsigned char)*p) || (ps->comma_number && thousands_comma(p, start))) {
        if (*p != ',' && n + 2 < sizeof buf) buf[n++] = *p;
        p++;
    }
    if (*p == '.' && isdigit((unsigned char)p[1])) {
        decimal = 1;
        buf[n++] = *p++;
        while (isdigit((unsigned char)*p)) {
            if (n + 2 < sizeof buf) buf[n++] = *p;
            p++;
        }
    }
    buf[n] = 0;
    ps->p = p;
    if (*p == '_') { /* 204_5: a number in a base, compared as a name */
        MathNode *v = node(ps, MN_VAR, NULL, NULL);
        const char *q = p + 1;
        if (*q == '{') {
            const char *e = strchr(q, '}');
            if (!e) return fail(ps);
            q = e + 1;
        } else if (*q) {
            q++;
        }
        size_t len = (size_t)(q - start);
        if (len >= sizeof v->name) return fail(ps);
        for (size_t i = 0, o = 0; i < len; i++)
            if (start[i] != '{' && start[i] != '}' && start[i] != ',') v->name[o++] = start[i];
        ps->p = q;
        return v;
    }
    MathNode *v = node(ps, MN_NUM, NULL, NULL);
    v->num = strtod(buf, NULL);
    v->decimal = decimal;
    return v;
}

/* {expr} or one character (\frac12, x^2, \sqrt3). */
static MathNode *parse_arg(Parser *ps) {
    skip_ws(ps);
    if (*ps->p == '{') {
        ps->p++;
        MathNode *e = parse_expr(ps);
        if (!eat(ps, "}")) return fail(ps);
        return e;
    }
    if (isdigit((unsigned char)*ps->p)) {
        MathNode *v = node(ps, MN_NUM, NULL, NULL);
        v->num = *ps->p++ - '0';
        return v;
    }
    if (isalpha((unsigned char)*ps->p)) {
        MathNode *v = node(ps, MN_VAR, NULL, NULL);
        v->name[0] = *ps->p++;
        if (!strcmp(v->name, "e")) v->kind = MN_E;
        return v;
    }
    return fail(ps);
}

static int is_int_lit(const MathNode *n) { return n && n->kind == MN_NUM && !n->decimal && n->num == floor(n->num); }

static const char *const FUNCS[][2] = {
    {"\\arcsin", "asin"}, {"\\arccos", "acos"}, {"\\arctan", "atan"}, {"\\sinh", "sinh"}, {"\\cosh", "cosh"},
    {"\\tanh", "tanh"}, {"\\sin", "sin"}, {"\\cos", "cos"}, {"\\tan", "tan"}, {"\\sec", "sec"}, {"\\csc", "csc"},
    {"\\cot", "cot"}, {"\\ln", "ln"}, {"\\log", "log"}, {"\\exp", "exp"}};

static const char *const GREEK[] = {"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta",
                                    "theta", "vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "rho",
                                    "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi", "omega", "Gamma",
                                    "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi", "Psi", "Omega"};

static MathNode *parse_power(Parser *ps);

/* A variable's optional subscript: x_1, x_{12}, a_n (appended to its name). */
static int parse_subscript(Parser *ps, MathNode *v) {
    if (*ps->p != '_') return 1;
    const char *q = ps->p + 1, *e;
    if (*q == '{') {
        e = strchr(q, '}');
        if (!e) return 0;
        q++;
    } else {
        if (!isalnum((unsigned char)*q)) return 0;
        e = q + 1;
    }
    size_t have = strlen(v->name), len = (size_t)(e - q);
    if (have + 1 + len >= sizeof v->name) return 0;
    v->name[have] = '_';
    memcpy(v->name + have + 1, q, len);
    ps->p = *e == '}' ? e + 1 : e;
    return 1;
}

/* After \sqrt: [index] {radicand}, read as radicand^(1/index). */
static MathNode *parse_sqrt(Parser *ps) {
    MathNode *index = NULL;
    if (eat(ps, "[")) {
        index = parse_expr(ps);
        if (!eat(ps, "]")) return fail(ps);
    }
    MathNode *a = parse_arg(ps);
    if (!a) return fail(ps);
    if (!index) {
        index = node(ps, MN_NUM, NULL, NULL);
        index->num = 2;
    }
    MathNode *one = node(ps, MN_NUM, NULL, NULL);
    one->num = 1;
    return node(ps, MN_POW, a, node(ps, MN_DIV, one, index));
}

/* After \text{: a word, one symbol named by it (parentheses and spaces around it dropped). */
static MathNode *parse_text(Parser *ps) {
    const char *e = strchr(ps->p, '}');
    if (!e) return fail(ps);
    const char *a = ps->p;
    while (a < e && (isspace((unsigned char)*a) || *a == '(')) a++;
    const char *b = e;
    while (b > a && (isspace((unsigned char)b[-1]) || b[-1] == ')')) b--;
    MathNode *r = node(ps, MN_VAR, NULL, NULL);
    if (b == a || (size_t)(b - a) >= sizeof r->name) return fail(ps);
    memcpy(r->name, a, (size_t)(b - a));
    ps->p = e + 1;
    return r;
}

/* A backslash command other than those parse_atom reads itself: a function (\sin, \log_b ...,
 * with an optional ^power) or a Greek letter; NULL (failed) for an unknown one. */
static MathNode *parse_command(Parser *ps) {
    MathNode *r = NULL;
    for (size_t k = 0; k < sizeof FUNCS / sizeof FUNCS[0] && !r; k++)
        if (eat(ps, FUNCS[k][0])) {
            MathNode *power = NULL;
            if (eat(ps, "^")) power = parse_arg(ps);
            if (eat(ps, "_")) { /* \log_2 x: log base b */
                MathNode *base = parse_arg(ps);
                MathNode *arg = base ? parse_power(ps) : NULL;
                if (!arg) return fail(ps);
                MathNode *ln_a = node(ps, MN_FUNC, arg, NULL), *ln_b = node(ps, MN_FUNC, base, NULL);
                strcpy(ln_a->name, "ln"), strcpy(ln_b->name, "ln");
                r = node(ps, MN_DIV, ln_a, ln_b);
            } else {
                MathNode *arg = parse_power(ps);
                if (!arg) return fail(ps);
                r = node(ps, MN_FUNC, arg, NULL);
                strcpy(r->name, FUNCS[k][1]);
            }
            if (power) r = node(ps, MN_POW, r, power);
        }
    for (size_t k = 0; k < sizeof GREEK / sizeof GREEK[0] && !r; k++) {
        char cmd[16] = "\\";
        strcat(cmd, GREEK[k]);
        if (eat(ps, cmd)) {
            r = node(ps, MN_VAR, NULL, NULL);
            strcpy(r->name, GREEK[k]);
            if (!parse_subscript(ps, r)) return fail(ps);
        }
    }
    if (!r) return fail(ps); /* an unknown command */
    return r;
}

static MathNode *parse_atom(Parser *ps) {
    if (++ps->depth > MAX_DEPTH) return fail(ps);
    skip_ws(ps);
    const char *p = ps->p;
    MathNode *r = NULL;
    if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
        r = parse_number(ps);
    } else if (*p == '(' || *p == '[' || *p == '{') {
        char close = *p == '(' ? ')' : *p == '[' ? ']' : '}';
        ps->p++;
        r = parse_expr(ps);
        if (!eat(ps, (char[]){close, 0})) r = fail(ps);
    } else if (*p == '|') {
        ps->p++;
        r = node(ps, MN_FUNC, parse_expr(ps), NULL);
        strcpy(r->name, "abs");
        if (!eat(ps, "|")) r = fail(ps);
    } else if (isalpha((unsigned char)*p)) {
        r = node(ps, MN_VAR, NULL, NULL);
        r->name[0] = *p;
        ps->p++;
        if (*p == 'e' && ps->p[0] != '_') r->kind = MN_E;
        else if (!parse_subscript(ps, r)) r = fail(ps);
    } else if (eat(ps, "\\frac")) {
        MathNode *a = parse_arg(ps), *b = a ? parse_arg(ps) : NULL;
        r = b ? node(ps, MN_DIV, a, b) : fail(ps);
        if (r) r->frac_lit = is_int_lit(a) && is_int_lit(b) && a->num >= 0 && b->num > 0;
    } else if (eat(ps, "\\binom")) {
        MathNode *a = parse_arg(ps), *b = a ? parse_arg(ps) : NULL;
        r = b ? node(ps, MN_BINOM, a, b) : fail(ps);
    } else if (eat(ps, "\\sqrt")) {
        r = parse_sqrt(ps);
    } else if (eat(ps, "\\pi")) {
        r = node(ps, MN_PI, NULL, NULL);
    } else if (eat(ps, "\\infty")) {
        r = node(ps, MN_INF, NULL, NULL);
    } else if (eat(ps, "\\text{")) { /* a word: one symbol named by it */
        r = parse_text(ps);
    } else if (*p == '\\') {
        r = parse_command(ps);
    } else {
        return fail(ps);
    }
    ps->depth--;
    if (!r) return fail(ps);
    for (;;) { /* postfix: n!, 50% */
        if (*ps->p == '!' && ps->p[1] != '=') ps->p++, r = node(ps, MN_FACT, r, NULL);
        else if (skip_ws(ps), *ps->p == '%') {
            ps->p++;
            MathNode *hundredth = node(ps, MN_NUM, NULL, NULL);
            hundredth->num = 0.01;
            r = node(ps, MN_MUL, r, hundredth);
            r->percent = 1;
        } else break;
    }
    return r;
}

/* atom [^ exponent] (right-associative) */
static MathNode *parse_power(Parser *ps) {
    MathNode *base = parse_atom(ps);
    if (!base) return NULL;
    skip_ws(ps);
    if (*ps->p != '^') return base;
    ps->p++;
    skip_ws(ps);
    MathNode *exponent;
    if (*ps->p == '{' || *ps->p == '(') exponent = parse_atom(ps);
    else if (*ps->p == '-') ps->p++, exponent = node(ps, MN_NEG, parse_arg(ps), NULL);
    else exponent = parse_arg(ps);
    if (!exponent || ps->failed) return fail(ps);
    return node(ps, MN_POW, base, exponent);
}

static MathNode *parse_unary(Parser *ps) {
    if (++ps->depth > MAX_DEPTH) return fail(ps);
    MathNode *r;
    if (eat(ps, "-")) r = node(ps, MN_NEG, parse_unary(ps), NULL);
    else if (eat(ps, "+")) r = parse_unary(ps);
    else r = parse_power(ps);
    ps->depth--;
    return ps->failed ? NULL : r;
}

/* Whether an atom starts at p (an implicit product continues). */
static int starts_atom(const char *p) {
    while (isspace((unsigned char)*p)) p++;
    if (isalnum((unsigned char)*p) || *p == '(' || *p == '{' || (*p == '.' && isdigit((unsigned char)p[1]))) return 1;
    if (*p != '\\') return 0;
    static const char *const cmds[] = {"\\frac", "\\sqrt", "\\pi", "\\infty", "\\text{", "\\binom", "\\sin", "\\cos",
                                       "\\tan", "\\sec", "\\csc", "\\cot", "\\ln", "\\log", "\\exp", "\\arc"};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++)
        if (!strncmp(p, cmds[k], strlen(cmds[k]))) return 1;
    for (size_t k = 0; k < sizeof GREEK / sizeof GREEK[0]; k++)
        if (!strncmp(p + 1, GREEK[k], strlen(GREEK[k])) && !isalpha((unsigned char)p[1 + strlen(GREEK[k])]))
            return 1;
    return 0;
}

static MathNode *parse_term(Parser *ps) {
    MathNode *r = parse_unary(ps);
    while (r && !ps->failed) {
        if (eat(ps, "*") || eat(ps, "\\cdot") || eat(ps, "\\times")) {
            r = node(ps, MN_MUL, r, parse_unary(ps));
        } else if (eat(ps, "/") || eat(ps, "\\div") || eat(ps, ":")) { /* 7:32 is a ratio */
            r = node(ps, MN_DIV, r, parse_unary(ps));
        } else if (starts_atom(ps->p)) {
            MathNode *next = parse_power(ps);
            if (!next) return fail(ps);
            if (is_int_lit(r) && next->kind == MN_DIV && next->frac_lit) r = node(ps, MN_ADD, r, next); /* 2\frac12 */
            else r = node(ps, MN_MUL, r, next);
        } else {
            break;
        }
        if (!r->b) return fail(ps);
    }
    return ps->failed ? NULL : r;
}

static MathNode *parse_expr(Parser *ps) {
    if (++ps->depth > MAX_DEPTH) return fail(ps);
    MathNode *r = parse_term(ps);
    while (r && !ps->failed) {
        MathNodeKind k;
        if (eat(ps, "+")) k = MN_ADD;
        else if (eat(ps, "-")) k = MN_SUB;
        else if (eat(ps, "\\pm")) k = MN_PM;
        else if (eat(ps, "\\mp")) k = MN_PM; /* the same two values */
        else break;
        r = node(ps, k, r, parse_term(ps));
        if (!r->b) return fail(ps);
    }
    ps->depth--;
    return ps->failed ? NULL : r;
}

/* ---- values -------------------------------------------------------------------- */

static MathValue *expr_value(Parser *ps, MathNode *e) {
    if (e->kind == MN_PM) { /* a \pm b: the two values, a list */
        MathValue *v = value(ps, MV_LIST);
        v->n = 2;
        v->items = arena_alloc(ps->arena, 2 * sizeof *v->items);
        v->items[0] = value(ps, MV_EXPR), v->items[0]->expr = node(ps, MN_ADD, e->a, e->b);
        v->items[1] = value(ps, MV_EXPR), v->items[1]->expr = node(ps, MN_SUB, e->a, e->b);
        return v;
    }
    MathValue *v = value(ps, MV_EXPR);
    v->expr = e;
    return v;
}

/* Whether the bracket at p holds a comma at its own depth (a tuple or an interval). */
static int bracket_has_comma(const char *p) {
    int depth = 0;
    for (; *p; p++) {
        if (*p == '(' || *p == '[' || *p == '{') depth++;
        else if (*p == ')' || *p == ']' || *p == '}') {
            if (--depth == 0) return 0;
        } else if ((*p == ',' || *p == ';') && depth == 1) return 1;
    }
    return 0;
}

static MathValue *parse_matrix(Parser *ps, const char *env) {
    char end[40];
    snprintf(end, sizeof end, "\\end{%s}", env);
    if (!strcmp(env, "array") && eat(ps, "{")) { /* column spec */
        const char *e = strchr(ps->p, '}');
        if (!e) return fail(ps);
        ps->p = e + 1;
    }
    MathValue *m = value(ps, MV_MATRIX);
    MathValue *cells[256];
    int n = 0, cols = 0, col = 0;
    for (;;) {
        if (eat(ps, end)) break;
        MathNode *e = parse_expr(ps);
        if (!e || n >= 256) return fail(ps);
        cells[n++] = expr_value(ps, e), col++;
        if (eat(ps, "&")) continue;
        if (eat(ps, "\\\\")) {
            if (cols && col != cols) return fail(ps);
            cols = col, col = 0;
            skip_ws(ps);
            if (!strncmp(ps->p, end, strlen(end))) {
                ps->p += strlen(end);
                break;
            }
            continue;
        }
        if (!eat(ps, end)) return fail(ps);
        if (cols && col != cols) return fail(ps);
        cols = col, col = 0;
        break;
    }
    if (col) cols = cols ? cols : col;
    if (!n || !cols || n % cols) return fail(ps);
    m->n = n, m->cols = cols, m->rows = n / cols;
    m->items = arena_alloc(ps->arena, (size_t)n * sizeof *m->items);
    memcpy(m->items, cells, (size_t)n * sizeof *cells);
    return m;
}

static MathValue *parse_set_atom_at(Parser *ps);

/* A set, a tuple or interval, a matrix, or an expression. */
static MathValue *parse_set_atom(Parser *ps) {
    if (++ps->depth > MAX_DEPTH) return fail(ps);
    MathValue *v = parse_set_atom_at(ps);
    ps->depth--;
    return ps->failed ? NULL : v;
}

static MathValue *parse_set_atom_at(Parser *ps) {
    skip_ws(ps);
    if (eat(ps, "\\{")) {
        MathValue *v = value(ps, MV_SET);
        if (eat(ps, "\\}")) return v;
        MathValue *inner = parse_list(ps);
        if (!inner || !eat(ps, "\\}")) return fail(ps);
        if (inner->kind == MV_LIST) v->n = inner->n, v->items = inner->items;
        else v->n = 1, v->items = arena_alloc(ps->arena, sizeof *v->items), v->items[0] = inner;
        return v;
    }
    if (eat(ps, "\\begin{")) {
        static const char *const envs[] = {"pmatrix", "bmatrix", "matrix", "vmatrix", "array"};
        for (size_t k = 0; k < sizeof envs / sizeof envs[0]; k++) {
            char open[32];
            snprintf(open, sizeof open, "%s}", envs[k]);
            if (!strncmp(ps->p, open, strlen(open))) {
                ps->p += strlen(open);
                return parse_matrix(ps, envs[k]);
            }
        }
        return fail(ps);
    }
    if ((*ps->p == '(' || *ps->p == '[') && !strncmp(ps->p + 1 + strspn(ps->p + 1, " "), "\\begin{", 7)) {
        char close = *ps->p == '(' ? ')' : ']';
        ps->p++;
        MathValue *m = parse_set_atom(ps);
        return m && eat(ps, (char[]){close, 0}) ? m : fail(ps);
    }
    if (*ps->p == '{' && bracket_has_comma(ps->p)) { /* {1,3}: braces group a list */
        ps->p++;
        MathValue *inner = parse_list(ps);
        return inner && eat(ps, "}") ? inner : fail(ps);
    }
    if ((*ps->p == '(' || *ps->p == '[') && bracket_has_comma(ps->p)) {
        char open = *ps->p++;
        MathValue *inner = parse_list(ps);
        skip_ws(ps);
        char close = *ps->p;
        if (!inner || inner->kind != MV_LIST || (close != ')' && close != ']')) return fail(ps);
        ps->p++;
        if (inner->n == 2) {
            MathValue *v = value(ps, MV_INTERVAL);
            v->n = 2, v->items = inner->items;
            v->left_open = open == '(', v->right_open = close == ')';
            return v;
        }
        if (open != '(' || close != ')') return fail(ps);
        inner->kind = MV_TUPLE;
        return inner;
    }
    MathNode *e = parse_expr(ps);
    return e ? expr_value(ps, e) : fail(ps);
}

static MathValue *parse_union(Parser *ps) {
    MathValue *first = parse_set_atom(ps);
    if (!first) return NULL;
    skip_ws(ps);
    if (strncmp(ps->p, "\\cup", 4)) return first;
    MathValue *parts[64];
    int n = 0;
    parts[n++] = first;
    while (eat(ps, "\\cup")) {
        if (n >= 64) return fail(ps);
        if (!(parts[n++] = parse_set_atom(ps))) return NULL;
    }
    MathValue *u = value(ps, MV_UNION);
    u->n = n;
    u->items = arena_alloc(ps->arena, (size_t)n * sizeof *u->items);
    memcpy(u->items, parts, (size_t)n * sizeof *parts);
    return u;
}

/* Whether a value is an expression of symbols only (x, xy, A/S, a+b, f(x) read
 * f*x): latex2sympy's is_expr_of_only_symbols, which makes "lhs = 3" an
 * assignment. */
static int only_symbols_node(const MathNode *e) {
    if (!e) return 0;
    if (e->kind == MN_VAR) return 1;
    if ((e->kind == MN_MUL && !e->percent) || e->kind == MN_DIV || e->kind == MN_ADD || e->kind == MN_SUB)
        return only_symbols_node(e->a) && only_symbols_node(e->b); /* AB, A/S, W(n) */
    if (e->kind == MN_FUNC) return only_symbols_node(e->a); /* |AB| */
    return 0;
}

int math_only_symbols(const MathValue *v);
int math_only_symbols(const MathValue *v) {
    if (v->kind == MV_EXPR) return only_symbols_node(v->expr);
    if (v->kind == MV_TUPLE || v->kind == MV_LIST || (v->kind == MV_INTERVAL && v->left_open && v->right_open)) {
        for (int i = 0; i < v->n; i++)
            if (!math_only_symbols(v->items[i])) return 0;
        return 1;
    }
    return 0;
}

/* operand (relation operand)*, with latex2sympy's readings of \approx and \in. */
static MathValue *parse_relation(Parser *ps) {
    MathValue *operands[32];
    MathRel ops[32];
    int n = 0;
    if (!(operands[n++] = parse_union(ps))) return NULL;
    for (;;) {
        MathRel op;
        int approx = 0, in = 0;
        if (eat(ps, "\\approx") || eat(ps, "\\sim")) approx = 1;
        else if (eat(ps, "\\in")) in = 1;
        else if (eat(ps, "<=") || eat(ps, "\\leq") || eat(ps, "\\le")) op = MR_LE;
        else if (eat(ps, ">=") || eat(ps, "\\geq") || eat(ps, "\\ge")) op = MR_GE;
        else if (eat(ps, "!=")) op = MR_NE;
        else if (eat(ps, "<") || eat(ps, "\\lt")) op = MR_LT;
        else if (eat(ps, ">") || eat(ps, "\\gt")) op = MR_GT;
        else if (eat(ps, "=") || eat(ps, "\\equiv")) op = MR_EQ;
        else break;
        MathValue *rhs = parse_union(ps);
        if (!rhs || n >= 32) return fail(ps);
        if (approx || in) { /* x \approx 3 is 3; 1/3 \approx 0.33 is 1/3; x \in S is S */
            MathValue *lhs = operands[n - 1];
            if (math_only_symbols(lhs)) operands[n - 1] = rhs;
            else if (in) return fail(ps);
            continue;
        }
        ops[n - 1] = op;
        operands[n++] = rhs;
    }
    if (n == 1) return operands[0];
    MathValue *r = value(ps, MV_REL);
    r->n = n;
    r->items = arena_alloc(ps->arena, (size_t)n * sizeof *r->items);
    r->ops = arena_alloc(ps->arena, (size_t)(n - 1) * sizeof *r->ops);
    memcpy(r->items, operands, (size_t)n * sizeof *operands);
    memcpy(r->ops, ops, (size_t)(n - 1) * sizeof *ops);
    return r;
}

/* item (, item)*: one item as it is, several as a list (\pm pairs flattened in). */
static MathValue *parse_list(Parser *ps) {
    MathValue *items[256];
    int n = 0;
    do {
        MathValue *v = parse_relation(ps);
        if (!v) return NULL;
        if (v->kind == MV_LIST) {
            for (int i = 0; i < v->n && n < 256; i++) items[n++] = v->items[i];
        } else if (n < 256) {
            items[n++] = v;
        }
    } while (eat(ps, ",") || eat(ps, ";"));
    if (n == 1) return items[0];
    MathValue *l = value(ps, MV_LIST);
    l->n = n;
    l->items = arena_alloc(ps->arena, (size_t)n * sizeof *l->items);
    memcpy(l->items, items, (size_t)n * sizeof *items);
    return l;
}

static const MathValue *parse_whole(MathArena *arena, const char *text) {
    Parser ps = {text, arena, 0, 0, is_comma_number(text), 0};
    MathValue *v = parse_list(&ps);
    skip_ws(&ps);
    return v && !ps.failed && !*ps.p ? v : NULL;
}

const MathValue *math_parse(MathArena *arena, const char *latex) {
    char *s = math_normalise(latex);
    const MathValue *v = *s ? parse_whole(arena, s) : NULL;
    if (!v && *s && !strchr(s, ',') && !strchr(s, ';')) {
        /* math_verify's fallback: of a chain a = b = c that does not parse, the last part */
        const char *last = NULL;
        int parts = 1;
        for (const char *p = s; *p; p++)
            if (*p == '=' && p > s && !strchr("\\<>!", p[-1])) parts++, last = p + 1;
        if (parts > 2) v = parse_whole(arena, last);
    }
    free(s);
    return v;
}
