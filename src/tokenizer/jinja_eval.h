/* tokenizer/jinja_eval.h — the evaluator's state and helpers, shared by
 * jinja_eval.c (expressions, statements, values) and jinja_builtins.c (the
 * methods, functions, filters and tests templates call). Internal to the
 * tokenizer's Jinja engine. */
#ifndef GRPO_TOKENIZER_JINJA_EVAL_H
#define GRPO_TOKENIZER_JINJA_EVAL_H

#include <string.h>

#include "tokenizer/jinja.h"
#include "tokenizer/tok_internal.h"

typedef struct JEval {
    JArena *ar;
    GrpoErr *err;
    JDict **frames;
    int n_frames, cap_frames;
    TokBuf out;
    int failed;
    int line;        /* of the expression or statement being run, for messages */
    int depth;       /* jx_eval() calls on the stack */
    long long steps; /* jx_eval() calls so far */
} JEval;

static const JVal UNDEF = {.k = JV_UNDEF};

static inline JVal jv_int(long long i) { JVal v = {.k = JV_INT}; v.u.i = i; return v; }
static inline JVal jv_bool(int b) { JVal v = {.k = JV_BOOL}; v.u.b = !!b; return v; }
static inline JVal jv_list(JList *l) { JVal v = {.k = JV_LIST}; v.u.l = l; return v; }
static inline JVal jv_float(double f) { JVal v = {.k = JV_FLOAT}; v.u.f = f; return v; }
static inline int jstr_eq(JStr a, JStr b) { return a.n == b.n && !memcmp(a.p, b.p, a.n); }

/* The first failure: "line N: " + fmt with (an, a) for its %.*s; later ones
 * are dropped. Returns UNDEF, so `return jx_fail(...)` reads naturally. */
JVal jx_fail(JEval *e, int line, const char *fmt, const char *a, size_t an);

JVal jx_eval(JEval *e, const JExpr *x);
int jx_truthy(JVal v);
int jx_equal(JEval *e, JVal a, JVal b, int depth);
JStr jx_strdup(JEval *e, const char *p, size_t n);
/* Python's str() (json 0) or json.dumps (json 1) of v, appended to b. */
void jx_to_text(JEval *e, TokBuf *b, JVal v, int json, int depth);
JStr jx_stringify(JEval *e, JVal v, int json);
int jx_is_space(char c);
/* s without leading (left) / trailing (right) characters of chars, or whitespace when chars is NULL. */
JStr jx_strip(JStr s, const JStr *chars, int left, int right);

/* jinja_builtins.c */
JVal jx_call(JEval *e, const JExpr *x);
JVal jx_filter(JEval *e, const JExpr *x);
JVal jx_test(JEval *e, const JExpr *x);

#endif
