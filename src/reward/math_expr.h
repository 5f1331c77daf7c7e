/* reward/math_expr.h — math answers read from LaTeX into values and compared
 * the way math_verify (TRL's and open-r1's accuracy reward) compares them.
 *
 * math_parse.c turns an answer ("\frac{1}{3}", "x \in [0,1)", "\{1,2\}",
 * "2x+4y-3=0") into a MathValue: an expression tree, a set, a list, a tuple,
 * an interval, a union, a matrix or a chain of relations. math_value.c
 * compares two values: expressions by evaluating them (at fixed points when
 * they have variables), the containers element by element. No symbolic
 * algebra: see docs/rewards.md for where this differs from math_verify.
 *
 * Everything a parse makes lives in one MathArena, freed at once. */
#ifndef GRPO_MATH_EXPR_H
#define GRPO_MATH_EXPR_H

typedef enum {
    MN_NUM,  /* num; decimal: written with a point (sympy's Float) */
    MN_VAR,  /* name: a letter, x_1, \alpha, \text{word} */
    MN_PI,
    MN_E,    /* Euler's number (a bare e) */
    MN_INF,  /* \infty */
    MN_ADD,
    MN_SUB,
    MN_MUL,  /* percent: a * (1/100), written "a\%" */
    MN_DIV,
    MN_POW,
    MN_NEG,
    MN_FUNC, /* name(a): sin cos tan sec csc cot asin acos atan sinh cosh tanh ln log exp abs */
    MN_FACT, /* a! */
    MN_BINOM,
    MN_PM,   /* a \pm b: two values, expanded by the value parser */
} MathNodeKind;

typedef struct MathNode {
    MathNodeKind kind;
    double num;
    int decimal;   /* MN_NUM written with a decimal point */
    int percent;   /* MN_MUL made by a trailing % */
    int frac_lit;  /* \frac of two integers (a mixed number's fraction) */
    char name[32];
    struct MathNode *a, *b;
} MathNode;

typedef enum { MV_EXPR, MV_LIST, MV_SET, MV_TUPLE, MV_INTERVAL, MV_UNION, MV_MATRIX, MV_REL } MathValueKind;
typedef enum { MR_EQ, MR_NE, MR_LT, MR_LE, MR_GT, MR_GE } MathRel;

typedef struct MathValue {
    MathValueKind kind;
    MathNode *expr;               /* MV_EXPR */
    int n;                        /* items: elements, parts, interval ends (2), cells, relation operands */
    struct MathValue **items;
    MathRel *ops;                 /* MV_REL: n - 1 relations between consecutive operands */
    int left_open, right_open;    /* MV_INTERVAL */
    int rows, cols;               /* MV_MATRIX, items row-major */
} MathValue;

typedef struct MathArena MathArena;

MathArena *math_arena_new(void);
void math_arena_free(MathArena *arena);

/* The answer text normalised as math_verify's LaTeX normalisation does it
 * (\left/\right, spacing, $, \dfrac, "and"/"or" as commas, percent words,
 * trailing units and \text{} units, ^\circ, {,}); malloc'd. */
char *math_normalise(const char *latex);

/* The value of a LaTeX answer (normalised first), or NULL when it does not
 * read as one (unknown commands, unbalanced brackets, words in prose). Lives
 * in arena. */
const MathValue *math_parse(MathArena *arena, const char *latex);

/* 1 if pred equals gold as math_verify's verify(gold, pred) decides it
 * (float_rounding 6, strict variables, no set-relation comparison unless the
 * prediction is the set), else 0. Not symmetric, as verify is not. */
int math_values_equal(const MathValue *gold, const MathValue *pred);

#endif
