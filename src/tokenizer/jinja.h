/* tokenizer/jinja.h — the Jinja subset that chat templates are written in.
 * Internal to the tokenizer: jinja_parse.c builds the tree, jinja_eval.c runs
 * it, chat.c is the public entry (tok_chat_render).
 *
 * Whitespace follows transformers' environment: trim_blocks and lstrip_blocks
 * on, plus the explicit {%- -%} markers. Everything is allocated from one
 * arena per render and freed at once. */
#ifndef GRPO_TOKENIZER_JINJA_H
#define GRPO_TOKENIZER_JINJA_H

#include <stddef.h>

#include "core/check.h"

/* Limits that keep a hostile template (it comes with whoever published the
 * model) from crashing or exhausting the process; each is a one-line error. */
#define JINJA_MAX_DEPTH 200                 /* nesting: parser, evaluator, values */
#define JINJA_MAX_STEPS 20000000LL          /* expression evaluations per render */
#define JINJA_MAX_BYTES ((size_t)256 << 20) /* memory a render may use, output included */
#define JINJA_MAX_RANGE 100000              /* items from range(), as Jinja2's sandbox */

typedef struct JArena JArena;
void *jar_alloc(JArena *a, size_t n);
JArena *jar_new(void);
void jar_free(JArena *a);
size_t jar_bytes(const JArena *a); /* bytes allocated from a so far */

typedef struct {
    const char *p;
    size_t n;
} JStr;

/* ---- expressions ---- */
typedef enum {
    JE_STR, JE_INT, JE_FLOAT, JE_TRUE, JE_FALSE, JE_NONE, JE_NAME, JE_LIST, JE_DICT,
    JE_ATTR, JE_ITEM, JE_SLICE, JE_CALL, JE_FILTER, JE_TEST, JE_NOT, JE_NEG, JE_BIN, JE_COND
} JExprKind;

typedef struct JExpr JExpr;
struct JExpr {
    JExprKind kind;
    int line;
    JStr s;          /* literal string, name, attribute, filter/test name, binary op */
    long long i;
    double f;
    JExpr *a, *b, *c; /* operands: object/left, index/right, slice step / cond */
    JExpr **args;     /* call/filter/test arguments, list/dict items (dict: key, value pairs) */
    JStr *kw;         /* keyword names for args (NULL entries for positional) */
    int n_args;
    int negate;       /* `is not` */
};

/* ---- statements ---- */
typedef enum { JS_TEXT, JS_OUT, JS_IF, JS_FOR, JS_SET } JStmtKind;
typedef struct JStmt JStmt;
struct JStmt {
    JStmtKind kind;
    int line;
    JStr text;             /* JS_TEXT */
    JExpr *expr;           /* JS_OUT value, JS_IF cond, JS_FOR iterable, JS_SET value */
    JExpr *filter;         /* JS_FOR ... if filter */
    JStr var, var2, attr;  /* JS_FOR targets (var2 for `a, b`); JS_SET name (.attr) */
    JStmt **body, **orelse;
    int n_body, n_orelse;
};

typedef struct {
    JStmt **stmts;
    int n;
} JTemplate;

/* Parses src; on error fills err with "line N: what" and returns -1. */
int jinja_parse(JArena *ar, const char *src, JTemplate *out, GrpoErr *err);

/* ---- values ---- */
typedef enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS,
               JV_FUNC } JValKind;
typedef struct JVal JVal;
typedef struct JList JList;
typedef struct JDict JDict;
struct JVal {
    JValKind k;
    union {
        int b;
        long long i;
        double f;
        JStr s;
        JList *l;
        JDict *d; /* JV_DICT, JV_NS */
        int fn;
    } u;
};
struct JList {
    JVal *v;
    int n, cap;
};
struct JDict {
    JStr *keys;
    JVal *vals;
    int n, cap;
};

JVal jv_str(JStr s);
JVal jv_cstr(const char *s);
void jlist_push(JArena *ar, JList *l, JVal v);
void jdict_set(JArena *ar, JDict *d, JStr key, JVal v);
JVal *jdict_get(const JDict *d, JStr key);

/* Renders t with the variables in ctx (a dict) into out. */

int jinja_render(JArena *ar, const JTemplate *t, JDict *ctx, char **out, size_t *out_len,
                 GrpoErr *err);

#endif
