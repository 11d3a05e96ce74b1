/* lang.h: the model language's interpreter state, shared by lang.c
 * (statements, blocks, repeat), expr.c (expressions, call arguments),
 * names.c (names, scopes), err.c (faults at a token) and the op builders of
 * ops/ (internal to models/). Calls go one way: lang.c to the rule table
 * (ops/table.c), the rules, expr.c, names.c and err.c; the rules to the
 * builders' building blocks (ops/build.c), names.c and err.c; none of these
 * calls lang.c. */
#ifndef SB_MODELS_LANG_H
#define SB_MODELS_LANG_H

#include "shardbench/model.h"

#include "lex.h"

#define MAX_OPS 100000
#define MAX_TENSORS 400000
#define MAX_CALL_DEPTH 64
#define MAX_STEPS 10000000 /* statements run, each round of a repeat counted */
#define MAX_DIM_SIZE ((int64_t)1 << 40)
#define MAX_ITEMS 16
#define MAX_KW 16

/* ---- parser state ------------------------------------------------------ */

typedef struct {
    char name[SB_NAME_MAX];
    int is_tensor;
    int64_t v;           /* tensor index or integer */
    int nlist;           /* > 0: a list of integers (block argument [a, b]) */
    int64_t list[16];
} binding;

/* A set of strings with an int each (open addressing, power-of-2 size). */
typedef struct {
    char **key;
    int *val;
    size_t cap, n;
} strmap;

typedef struct {
    binding *b;
    int n, cap;
    strmap idx;          /* name -> index in b */
    char prefix[SB_NAME_MAX];
} scope;

typedef struct {
    char name[SB_NAME_MAX];
    int header;          /* token index of the block name */
    int body, end;       /* body tokens [body, end); t[end] is `end` */
    int nformals;
    const token *formal[MAX_KW];
    int def_start[MAX_KW]; /* token index of default expr, or -1 */
} blockdef;

typedef struct {
    const char *path;
    token *t;
    int n;
    sb_model *m;
    int cap_ops, cap_tensors, cap_params;
    blockdef *blocks;
    int nblocks;
    int stack[MAX_CALL_DEPTH];
    int depth;
    strmap names;        /* op and tensor names given, for uniqueness */
    strmap suffix;       /* per name x taken: the next suffix k to try for x.k */
    strmap param_idx;    /* param name -> index in m->params */
    strmap block_idx;    /* block name -> index in blocks */
    int cap_blocks;
    int expr_depth;
    int64_t steps;       /* statements run so far (MAX_STEPS) */
    sb_error *err;
} parser;

/* ---- call arguments ------------------------------------------------------ */

typedef struct {
    const token *name;  /* `name=` prefix inside a list, or NULL */
    const token *ident; /* a bare identifier (a dim name, keyword or integer name) */
    int has_int;        /* i holds a value (from an expression or a bound name) */
    int64_t i;
} item;

typedef struct {
    const token *key;
    const token *at;
    int is_list;
    int nitems;
    item items[MAX_ITEMS];
    const token *str; /* string value */
} kwarg;

typedef struct {
    const token *callee;
    int ntens;
    int tens[SB_MAX_IO];
    const token *tens_at[SB_MAX_IO];
    int nint;
    int64_t ints[MAX_KW];
    const token *int_at[MAX_KW];
    const token *str;
    int nkw;
    kwarg kw[MAX_KW];
    int npos;               /* positional args in order (blocks) */
    int pos_is_tensor[MAX_KW + SB_MAX_IO];
    int64_t pos_v[MAX_KW + SB_MAX_IO];
    const token *pos_at[MAX_KW + SB_MAX_IO];
} call;

/* The names on the left of a statement, and the scope they bind in. */
typedef struct {
    int nlhs;
    const token *lhs[SB_MAX_IO];
    scope *s;
} target;

/* An error at tk: "path:line:col: what" (SB_EXIT_INPUT). Returns -1 (err.c). */
int lang_err(parser *P, const token *tk, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Makes prefix+base unique among op and tensor names ("x", "x.1", ...),
 * registers it and writes it to out (SB_NAME_MAX). */
int lang_unique_name(parser *P, const token *at, const char *prefix, const char *base, char *out);

/* Binds name in scope s to a tensor (is_tensor) or an integer. */
int lang_bind(parser *P, scope *s, const char *name, int is_tensor, int64_t v);

void lang_scope_free(scope *s);

/* The binding of name in scope s, or NULL. */
binding *lang_find(scope *s, const char *name);

/* The param of that name, or NULL. */
sb_param *lang_param(parser *P, const char *name);

/* The value of s in the map, or NULL. */
int *lang_strmap_get(strmap *m, const char *s);
/* Adds s (not in the map yet) with value v. */
int lang_strmap_put(parser *P, strmap *m, const char *s, int v);
void lang_strmap_free(strmap *m);

/* Skips the punctuation c at *pos, or fails saying what is there instead
 * (err.c). */
int lang_expect_punct(parser *P, int *pos, char c);

/* An integer expression at *pos (names: s's integers, then the params; s
 * may be NULL). */
int lang_expr(parser *P, scope *s, int *pos, int64_t *v);

/* A call `callee(args)` at *pos, its arguments evaluated in scope s. */
int lang_call(parser *P, scope *s, int *pos, call *c);

#endif
