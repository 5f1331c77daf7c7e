/* reward/math_value.c — two MathValues compared as math_verify's verify does.
 *
 * The order of checks follows math_verify's grader.sympy_expr_eq: assignments
 * ("x = 3") reduced to their right side against a plain answer; a relation
 * against a set read as that set; relations compared as relations; sets,
 * lists, tuples and intervals element by element (sets in any order, tuples
 * in order, interval ends open or closed alike); single symbols by name;
 * everything else by value. Where math_verify asks sympy to simplify, this
 * file evaluates: constants in double precision, expressions with variables
 * at fixed points (the method, and where it differs, are in docs/rewards.md).
 * It is not a computer algebra system. */
#include <ctype.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "reward/math_expr.h"

int math_only_symbols(const MathValue *v); /* math_parse.c */

/* ---- evaluation ---------------------------------------------------------------- */

enum { MAX_VARS = 32, N_POINTS = 6 };

typedef struct {
    const char *names[MAX_VARS];
    int n;
    double values[MAX_VARS];
} Vars;

static void collect_vars(const MathNode *e, Vars *vars) {
    if (!e) return;
    if (e->kind == MN_VAR) {
        for (int i = 0; i < vars->n; i++)
            if (!strcmp(vars->names[i], e->name)) return;
        if (vars->n < MAX_VARS) vars->names[vars->n++] = e->name;
        return;
    }
    collect_vars(e->a, vars);
    collect_vars(e->b, vars);
}

/* Variable j's value at point k: spread over [0.5, 2.5], irrational steps so no
 * two variables or points coincide, positive so roots and logs are defined. */
static double point_value(int j, int k) {
    double t = fmod(0.6180339887498949 * (j + 1) * (k + 2) + 0.41421356237309515 * k + 0.1 * j, 1.0);
    return 0.5 + 2.0 * t;
}

static double eval(const MathNode *e, const Vars *vars) {
    if (!e) return NAN;
    double a = e->a ? eval(e->a, vars) : 0, b = e->b ? eval(e->b, vars) : 0;
    switch (e->kind) {
    case MN_NUM: return e->num;
    case MN_VAR:
        for (int i = 0; i < vars->n; i++)
            if (!strcmp(vars->names[i], e->name)) return vars->values[i];
        return NAN;
    case MN_PI: return M_PI;
    case MN_E: return M_E;
    case MN_INF: return INFINITY;
    case MN_ADD: return a + b;
    case MN_SUB: return a - b;
    case MN_MUL: return e->percent ? a / 100.0 : a * b;
    case MN_DIV: return a / b;
    case MN_POW: return pow(a, b);
    case MN_NEG: return -a;
    case MN_FACT: return a >= 0 && a == floor(a) && a < 171 ? tgamma(a + 1) : NAN;
    case MN_BINOM:
        return a >= 0 && b >= 0 && a == floor(a) && b == floor(b) && b <= a && a < 171
                   ? round(tgamma(a + 1) / (tgamma(b + 1) * tgamma(a - b + 1)))
                   : NAN;
    case MN_PM: return NAN;
    case MN_FUNC: break;
    }
    static const struct {
        const char *name;
        double (*f)(double);
    } funcs[] = {{"sin", sin},   {"cos", cos},   {"tan", tan},   {"asin", asin}, {"acos", acos},
                 {"atan", atan}, {"sinh", sinh}, {"cosh", cosh}, {"tanh", tanh}, {"ln", log},
                 {"log", log},   {"exp", exp},   {"abs", fabs}};
    for (size_t k = 0; k < sizeof funcs / sizeof funcs[0]; k++)
        if (!strcmp(e->name, funcs[k].name)) return funcs[k].f(a);
    if (!strcmp(e->name, "sec")) return 1 / cos(a);
    if (!strcmp(e->name, "csc")) return 1 / sin(a);
    if (!strcmp(e->name, "cot")) return 1 / tan(a);
    return NAN;
}

/* ---- expressions --------------------------------------------------------------- */

static int nodes_same(const MathNode *a, const MathNode *b) {
    if (!a || !b) return a == b;
    if (a->kind != b->kind || a->percent != b->percent) return 0;
    if (a->kind == MN_NUM && a->num != b->num) return 0;
    if ((a->kind == MN_VAR || a->kind == MN_FUNC) && strcmp(a->name, b->name)) return 0;
    return nodes_same(a->a, b->a) && nodes_same(a->b, b->b);
}

/* A number as sympy holds one: a literal, its negation, or a literal percent. */
static int atomic_number(const MathNode *e, int *decimal) {
    if (e->kind == MN_NEG) e = e->a;
    if (e->kind == MN_MUL && e->percent) e = e->a;
    if (e->kind != MN_NUM) return 0;
    if (decimal) *decimal = e->decimal;
    return 1;
}

static int close_rel(double a, double b, double rel) {
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= rel * fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* math_verify's float_rounding = 6: both rounded to 6 decimals. */
static int rounded_equal(double a, double b) {
    if (a == b) return 1;
    if (!isfinite(a) || !isfinite(b)) return 0;
    if (fabs(a) >= 1e12 || fabs(b) >= 1e12) return close_rel(a, b, 1e-15);
    return llround(a * 1e6) == llround(b * 1e6);
}

/* A word written as letters (a symbol, or a product of symbols, e.g. "yes" read y*e*s) into buf. */
static int word_of(const MathNode *e, char *buf, size_t size) {
    if (e->kind == MN_VAR || e->kind == MN_E) {
        const char *name = e->kind == MN_E ? "e" : e->name;
        if (strlen(buf) + strlen(name) + 1 > size) return 0;
        strcat(buf, name);
        return 1;
    }
    if (e->kind == MN_MUL && !e->percent) return word_of(e->a, buf, size) && word_of(e->b, buf, size);
    return 0;
}

/* math_verify's compare_symbols: a symbol against a symbol or a product of
 * symbols compares their names (case-blind when longer than a letter). -1 when
 * neither side is a single symbol. */
static int symbols_equal(const MathNode *g, const MathNode *p) {
    if (g->kind != MN_VAR && p->kind != MN_VAR) return -1;
    char gw[256] = "", pw[256] = "";
    if (!word_of(g, gw, sizeof gw) || !word_of(p, pw, sizeof pw)) return -1;
    if (strlen(gw) > 1 || strlen(pw) > 1) return !strcasecmp(gw, pw);
    return !strcmp(gw, pw) || (!strcasecmp(gw, "e") && !strcasecmp(pw, "e"));
}

/* At every fixed point where both are finite, f(point) equals c * g(point) for
 * one c (c = 1 when ratio is 0; c > 0 when positive); 0 if no point is usable. */
static int agree_at_points(const MathNode *f, const MathNode *g, int ratio, int positive) {
    Vars vars = {{0}, 0, {0}};
    collect_vars(f, &vars);
    collect_vars(g, &vars);
    int usable = 0;
    double c = NAN;
    int points = vars.n ? N_POINTS : 1;
    for (int k = 0; k < points; k++) {
        for (int j = 0; j < vars.n; j++) vars.values[j] = point_value(j, k);
        double a = eval(f, &vars), b = eval(g, &vars);
        if (isnan(a) || isnan(b)) continue;
        if (!ratio) {
            if (!close_rel(a, b, 1e-9)) return 0;
        } else {
            double tiny = 1e-12 * fmax(1.0, fmax(fabs(a), fabs(b)));
            if (fabs(a) <= tiny || fabs(b) <= tiny) {
                if (fabs(a) > tiny || fabs(b) > tiny) return 0;
            } else if (isnan(c)) {
                c = a / b;
                if (positive && c <= 0) return 0;
            } else if (!close_rel(a / b, c, 1e-9)) {
                return 0;
            }
        }
        usable++;
    }
    return usable > 0;
}

static int exprs_equal(const MathNode *g, const MathNode *p) {
    if (nodes_same(g, p)) return 1;
    int s = symbols_equal(g, p);
    if (s >= 0) return s;
    int g_dec = 0, p_dec = 0;
    int g_atomic = atomic_number(g, &g_dec), p_atomic = atomic_number(p, &p_dec);
    Vars none = {{0}, 0, {0}};
    collect_vars(g, &none);
    collect_vars(p, &none);
    if (none.n == 0 && (g_atomic || p_atomic)) {
        double a = eval(g, &none), b = eval(p, &none);
        if (isnan(a) || isnan(b)) return 0;
        if ((g_atomic && g_dec) || (p_atomic && p_dec)) return rounded_equal(a, b);
        return close_rel(a, b, 1e-12);
    }
    return agree_at_points(g, p, 0, 0);
}

/* ---- relations ----------------------------------------------------------------- */

static int is_equation(const MathValue *v) {
    if (v->kind != MV_REL) return 0;
    for (int i = 0; i + 1 < v->n; i++)
        if (v->ops[i] != MR_EQ) return 0;
    return 1;
}

static int is_assignment(const MathValue *v) { return is_equation(v) && math_only_symbols(v->items[0]); }

/* lhs op rhs as f op' 0 with op' one of = != < <= (> and >= turned around). */
static int relations_same(const MathValue *gl, MathRel gop, const MathValue *gr, const MathValue *pl, MathRel pop,
                          const MathValue *pr) {
    if (gl->kind != MV_EXPR || gr->kind != MV_EXPR || pl->kind != MV_EXPR || pr->kind != MV_EXPR) return 0;
    const MathNode *g0 = gl->expr, *g1 = gr->expr, *p0 = pl->expr, *p1 = pr->expr, *t;
    if (gop == MR_GT || gop == MR_GE) t = g0, g0 = g1, g1 = t, gop = gop == MR_GT ? MR_LT : MR_LE;
    if (pop == MR_GT || pop == MR_GE) t = p0, p0 = p1, p1 = t, pop = pop == MR_GT ? MR_LT : MR_LE;
    if (gop != pop) return 0;
    MathNode fg = {.kind = MN_SUB, .a = (MathNode *)g0, .b = (MathNode *)g1};
    MathNode fp = {.kind = MN_SUB, .a = (MathNode *)p0, .b = (MathNode *)p1};
    /* an equation scaled by any c != 0 is the same equation; an inequality by c > 0 */
    return agree_at_points(&fg, &fp, 1, gop == MR_LT || gop == MR_LE);
}

static int relations_equal(const MathValue *g, const MathValue *p) {
    if (g->n != p->n) return 0;
    for (int i = 0; i + 1 < g->n; i++)
        if (!relations_same(g->items[i], g->ops[i], g->items[i + 1], p->items[i], p->ops[i], p->items[i + 1]))
            return 0;
    return 1;
}

/* Storage for a relation read as a set (x < 3 is (-inf, 3)). */
typedef struct {
    MathValue v, ends[2];
    MathValue *items[2];
    MathNode inf[2];
} RelSet;

static int constant_expr(const MathValue *v) {
    if (v->kind != MV_EXPR) return 0;
    Vars vars = {{0}, 0, {0}};
    collect_vars(v->expr, &vars);
    return vars.n == 0;
}

/* The unknown of a relation read as a set: a symbol, or symbols only (f(x) reads f*x, math_verify's f_x). */
static int single_var(const MathValue *v) { return v->kind == MV_EXPR && math_only_symbols(v); }

/* A relation in one variable as an interval or a one-element set; NULL when it is not one. */
static const MathValue *relation_as_set(const MathValue *r, RelSet *s) {
    memset(s, 0, sizeof *s);
    s->inf[0] = (MathNode){.kind = MN_NEG, .a = &s->inf[1]};
    s->inf[1] = (MathNode){.kind = MN_INF};
    s->v.items = s->items, s->v.n = 2;
    s->items[0] = &s->ends[0], s->items[1] = &s->ends[1];
    s->ends[0].kind = s->ends[1].kind = MV_EXPR;
    if (r->n == 2) {
        const MathValue *x = r->items[0], *c = r->items[1];
        MathRel op = r->ops[0];
        if (!single_var(x)) { /* 3 > x: turn around */
            const MathValue *t = x;
            x = c, c = t;
            op = op == MR_LT ? MR_GT : op == MR_LE ? MR_GE : op == MR_GT ? MR_LT : op == MR_GE ? MR_LE : op;
        }
        if (!single_var(x) || !constant_expr(c) || op == MR_NE) return NULL;
        if (op == MR_EQ) {
            s->v.kind = MV_SET, s->v.n = 1, s->items[0] = (MathValue *)c;
            return &s->v;
        }
        s->v.kind = MV_INTERVAL;
        if (op == MR_LT || op == MR_LE) {
            s->ends[0].expr = &s->inf[0], s->items[1] = (MathValue *)c;
            s->v.left_open = 1, s->v.right_open = op == MR_LT;
        } else {
            s->items[0] = (MathValue *)c, s->ends[1].expr = &s->inf[1];
            s->v.left_open = op == MR_GT, s->v.right_open = 1;
        }
        return &s->v;
    }
    if (r->n == 3 && single_var(r->items[1]) && constant_expr(r->items[0]) && constant_expr(r->items[2])) {
        MathRel a = r->ops[0], b = r->ops[1];
        int up = (a == MR_LT || a == MR_LE) && (b == MR_LT || b == MR_LE);
        int down = (a == MR_GT || a == MR_GE) && (b == MR_GT || b == MR_GE);
        if (!up && !down) return NULL;
        s->v.kind = MV_INTERVAL;
        s->items[0] = (MathValue *)r->items[up ? 0 : 2], s->items[1] = (MathValue *)r->items[up ? 2 : 0];
        s->v.left_open = (up ? a : b) == (up ? MR_LT : MR_GT);
        s->v.right_open = (up ? b : a) == (up ? MR_LT : MR_GT);
        return &s->v;
    }
    return NULL;
}

/* ---- containers ---------------------------------------------------------------- */

static int is_finite_set(const MathValue *v) { return v->kind == MV_LIST || v->kind == MV_SET || v->kind == MV_TUPLE; }

static int items_equal(const MathValue *const *g, const MathValue *const *p, int n, int ordered) {
    if (ordered) {
        for (int i = 0; i < n; i++)
            if (!math_values_equal(g[i], p[i])) return 0;
        return 1;
    }
    unsigned char used[256] = {0};
    if (n > 256) return 0;
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int j = 0; j < n && !found; j++)
            if (!used[j] && math_values_equal(g[i], p[j])) used[j] = 1, found = 1;
        if (!found) return 0;
    }
    return 1;
}

/* The elements of a set or list with repeats dropped into out[256]: their count, -1 if too many. */
static int distinct(const MathValue *v, const MathValue **out) {
    int n = 0;
    if (v->n > 256) return -1;
    for (int i = 0; i < v->n; i++) {
        int seen = 0;
        for (int j = 0; j < n && !seen; j++) seen = math_values_equal(out[j], v->items[i]);
        if (!seen) out[n++] = v->items[i];
    }
    return n;
}

/* math_verify's sympy_compare_sets: a non-set is a one-element set. */
static int sets_equal(const MathValue *g, const MathValue *p) {
    const MathValue *g1 = g, *p1 = p;
    MathValue gs = {.kind = MV_SET, .n = 1, .items = (MathValue **)&g1};
    MathValue ps = {.kind = MV_SET, .n = 1, .items = (MathValue **)&p1};
    if (g->kind == MV_EXPR) g = &gs;
    if (p->kind == MV_EXPR) p = &ps;
    if (g->kind == MV_INTERVAL && p->kind == MV_INTERVAL)
        return g->left_open == p->left_open && g->right_open == p->right_open &&
               items_equal((const MathValue *const *)g->items, (const MathValue *const *)p->items, 2, 1);
    if (g->kind == MV_UNION && p->kind == MV_UNION)
        return g->n == p->n && items_equal((const MathValue *const *)g->items, (const MathValue *const *)p->items,
                                           g->n, 1);
    if (is_finite_set(g) && is_finite_set(p)) {
        if (g->kind == MV_TUPLE)
            return g->n == p->n && items_equal((const MathValue *const *)g->items,
                                               (const MathValue *const *)p->items, g->n, 1);
        if (g->n == p->n && items_equal((const MathValue *const *)g->items, (const MathValue *const *)p->items,
                                        g->n, 0))
            return 1;
        /* sets: a repeated element counts once, as in sympy's FiniteSet */
        const MathValue *gd[256], *pd[256];
        int ng = distinct(g, gd), np = distinct(p, pd);
        return ng >= 0 && ng == np && items_equal(gd, pd, ng, 0);
    }
    /* (1,2) reads as an open interval; against a pair it is the pair, in order */
    if (g->kind == MV_INTERVAL && g->left_open && g->right_open && is_finite_set(p) && p->n == 2)
        return items_equal((const MathValue *const *)g->items, (const MathValue *const *)p->items, 2, 1);
    if (p->kind == MV_INTERVAL && p->left_open && p->right_open && is_finite_set(g) && g->n == 2)
        return items_equal((const MathValue *const *)g->items, (const MathValue *const *)p->items, 2, 1);
    return 0;
}

/* Comparisons left to the outermost math_values_equal of this thread: nested
 * sets compare element against element at every level, so a crafted answer
 * could ask for billions; past the budget the answer is "different". */
static _Thread_local long compare_budget;
static _Thread_local int compare_depth;
enum { COMPARE_BUDGET = 2000000 };

static int values_equal(const MathValue *gold, const MathValue *pred);

int math_values_equal(const MathValue *gold, const MathValue *pred) {
    if (compare_depth == 0) compare_budget = COMPARE_BUDGET;
    if (--compare_budget < 0) return 0;
    compare_depth++;
    int same = values_equal(gold, pred);
    compare_depth--;
    return same;
}

static int values_equal(const MathValue *gold, const MathValue *pred) {
    const MathValue *g = gold, *p = pred;
    const MathValue *g_ends[2], *p_ends[2];
    MathRel eq = MR_EQ;
    MathValue g_short, p_short;
    int g_eq = is_equation(g), p_eq = is_equation(p), g_assign = is_assignment(g);
    /* an assignment chain x = a = b is x = b */
    if (g_assign && g->n > 2) {
        g_ends[0] = g->items[0], g_ends[1] = g->items[g->n - 1];
        g_short = (MathValue){.kind = MV_REL, .n = 2, .items = (MathValue **)g_ends, .ops = &eq};
        g = &g_short;
    }
    if (is_assignment(p) && p->n > 2) {
        p_ends[0] = p->items[0], p_ends[1] = p->items[p->n - 1];
        p_short = (MathValue){.kind = MV_REL, .n = 2, .items = (MathValue **)p_ends, .ops = &eq};
        p = &p_short;
    }
    if (p_eq && !g_eq) p = p->items[p->n - 1];
    else if (g_assign && !p_eq) g = g->items[g->n - 1];
    RelSet rs;
    if (g->kind == MV_REL && (p->kind == MV_SET || p->kind == MV_LIST || p->kind == MV_INTERVAL || p->kind == MV_UNION)) {
        const MathValue *as_set = relation_as_set(g, &rs);
        if (as_set) g = as_set;
    }
    if (g->kind == MV_REL || p->kind == MV_REL)
        return g->kind == MV_REL && p->kind == MV_REL && relations_equal(g, p);
    if (g->kind == MV_MATRIX || p->kind == MV_MATRIX)
        return g->kind == p->kind && g->rows == p->rows && g->cols == p->cols &&
               items_equal((const MathValue *const *)g->items, (const MathValue *const *)p->items, g->n, 1);
    if (g->kind != MV_EXPR || p->kind != MV_EXPR) return sets_equal(g, p);
    return exprs_equal(g->expr, p->expr);
}
