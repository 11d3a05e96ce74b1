/* parse.c: model-file interpreter. Reads the format of models/README.md and
 * builds the graph IR of shardbench/model.h: ops with named iteration
 * spaces, tensors with named dims, and how each operand follows the op's
 * iteration dims. Every fault names path:line:col. Not the cost model. */
#define _GNU_SOURCE
#include "shardbench/model.h"

#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lex.h"

#define MAX_OPS 100000
#define MAX_TENSORS 400000
#define MAX_CALL_DEPTH 64
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
    int expr_depth;
    sb_error *err;
} parser;

static int perr(parser *P, const token *tk, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int perr(parser *P, const token *tk, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sb_fail(P->err, SB_EXIT_INPUT, "%s:%d:%d: %s", P->path, tk->line, tk->col, msg);
}

static int tok_is(const token *tk, const char *word)
{
    return tk->kind == TK_IDENT && (int)strlen(word) == tk->len
           && memcmp(tk->s, word, (size_t)tk->len) == 0;
}

static int tok_punct(const token *tk, char c)
{
    return tk->kind == TK_PUNCT && tk->punct == c;
}

static void tok_str(const token *tk, char *buf, size_t n)
{
    int l = tk->len < (int)n - 1 ? tk->len : (int)n - 1;
    memcpy(buf, tk->s, (size_t)l);
    buf[l] = '\0';
}

static const char *tok_desc(const token *tk, char *buf, size_t n)
{
    switch (tk->kind) {
    case TK_EOF: return "end of file";
    case TK_NL: return "end of line";
    case TK_INT: snprintf(buf, n, "'%lld'", (long long)tk->ival); return buf;
    case TK_PUNCT: snprintf(buf, n, "'%c'", tk->punct); return buf;
    case TK_STRING: snprintf(buf, n, "\"%.*s\"", tk->len > 40 ? 40 : tk->len, tk->s); return buf;
    default: snprintf(buf, n, "'%.*s'", tk->len > 60 ? 60 : tk->len, tk->s); return buf;
    }
}

static int expect_punct(parser *P, int *pos, char c)
{
    char d[96];
    if (!tok_punct(&P->t[*pos], c))
        return perr(P, &P->t[*pos], "expected '%c', found %s", c, tok_desc(&P->t[*pos], d, sizeof d));
    (*pos)++;
    return 0;
}

static int expect_nl(parser *P, int *pos)
{
    char d[96];
    if (P->t[*pos].kind != TK_NL)
        return perr(P, &P->t[*pos], "expected end of line, found %s", tok_desc(&P->t[*pos], d, sizeof d));
    (*pos)++;
    return 0;
}

/* ---- name registry (op and tensor names are unique) --------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Slot of s in the map: where it is, or the empty slot where it goes. */
static size_t strmap_slot(const strmap *m, const char *s)
{
    size_t i = hash_str(s) & (m->cap - 1);
    while (m->key[i] && strcmp(m->key[i], s) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* The value of s, or NULL when s is not in the map. */
static int *strmap_get(strmap *m, const char *s)
{
    if (!m->cap)
        return NULL;
    size_t i = strmap_slot(m, s);
    return m->key[i] ? &m->val[i] : NULL;
}

/* Adds s (not in the map yet) with value v. */
static int strmap_put(parser *P, strmap *m, const char *s, int v)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 16;
        strmap g = {.cap = nc, .n = m->n};
        g.key = sb_calloc(nc, sizeof *g.key, P->err);
        g.val = g.key ? sb_calloc(nc, sizeof *g.val, P->err) : NULL;
        if (!g.val) {
            free(g.key);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                size_t j = strmap_slot(&g, m->key[i]);
                g.key[j] = m->key[i];
                g.val[j] = m->val[i];
            }
        free(m->key);
        free(m->val);
        *m = g;
    }
    size_t j = strmap_slot(m, s);
    m->key[j] = strdup(s);
    if (!m->key[j])
        return sb_fail(P->err, SB_EXIT_INTERNAL, "out of memory");
    m->val[j] = v;
    m->n++;
    return 0;
}

static void strmap_free(strmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->key[i]);
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

/* Makes prefix+base unique among op and tensor names ("x", "x.1", ...): the
 * first of x, x.1, x.2, ... not taken. Names are never released, so the
 * suffixes below the one last given to x stay taken, and the search for
 * the next x starts there (one step per name instead of one per earlier x). */
static int unique_name(parser *P, const token *at, const char *prefix, const char *base,
                       char *out)
{
    char stem[SB_NAME_MAX + 32], cand[SB_NAME_MAX + 48];
    snprintf(stem, sizeof stem, "%s%s", prefix, base);
    snprintf(cand, sizeof cand, "%s", stem);
    if (strmap_get(&P->names, cand)) {
        int *next = strmap_get(&P->suffix, stem);
        int k = next ? *next : 1;
        do
            snprintf(cand, sizeof cand, "%s.%d", stem, k++);
        while (strmap_get(&P->names, cand));
        if (strlen(cand) < SB_NAME_MAX) {
            if (next)
                *next = k;
            else if (strmap_put(P, &P->suffix, stem, k))
                return -1;
        }
    }
    if (strlen(cand) >= SB_NAME_MAX)
        return perr(P, at, "name '%s' too long (nested blocks too deep?)", cand);
    strcpy(out, cand);
    return strmap_put(P, &P->names, cand, 0);
}

/* ---- scopes -------------------------------------------------------------- */

static binding *scope_find(scope *s, const char *name)
{
    int *i = strmap_get(&s->idx, name);
    return i ? &s->b[*i] : NULL;
}

static int scope_bind(parser *P, scope *s, const char *name, int is_tensor, int64_t v)
{
    binding *b = scope_find(s, name);
    if (!b) {
        if (s->n == s->cap) {
            int nc = s->cap ? s->cap * 2 : 32;
            binding *nb = sb_realloc(s->b, (size_t)nc * sizeof *nb, P->err);
            if (!nb)
                return -1;
            s->b = nb;
            s->cap = nc;
        }
        b = &s->b[s->n];
        snprintf(b->name, sizeof b->name, "%s", name);
        if (strmap_put(P, &s->idx, b->name, s->n))
            return -1;
        s->n++;
    }
    b->is_tensor = is_tensor;
    b->v = v;
    b->nlist = 0;
    return 0;
}

static void scope_free(scope *s)
{
    free(s->b);
    strmap_free(&s->idx);
}

static sb_param *find_param(sb_model *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (strcmp(m->params[i].name, name) == 0)
            return &m->params[i];
    return NULL;
}

/* ---- integer expressions ------------------------------------------------- */

static int parse_expr(parser *P, scope *s, int *pos, int64_t *v);

static int parse_primary_(parser *P, scope *s, int *pos, int64_t *v);

/* nesting depth guard: deeply nested input is an error, not a stack overflow */
static int parse_primary(parser *P, scope *s, int *pos, int64_t *v)
{
    if (P->expr_depth >= 200)
        return perr(P, &P->t[*pos], "expression nested too deeply (more than 200 levels)");
    P->expr_depth++;
    int rc = parse_primary_(P, s, pos, v);
    P->expr_depth--;
    return rc;
}

static int parse_primary_(parser *P, scope *s, int *pos, int64_t *v)
{
    token *tk = &P->t[*pos];
    char d[96];
    if (tk->kind == TK_INT) {
        *v = tk->ival;
        (*pos)++;
        return 0;
    }
    if (tok_punct(tk, '(')) {
        (*pos)++;
        if (parse_expr(P, s, pos, v))
            return -1;
        return expect_punct(P, pos, ')');
    }
    if (tok_punct(tk, '-')) {
        (*pos)++;
        if (parse_primary(P, s, pos, v))
            return -1;
        if (*v == INT64_MIN)
            return perr(P, tk, "integer overflow");
        *v = -*v;
        return 0;
    }
    if (tk->kind == TK_IDENT) {
        char name[SB_NAME_MAX];
        tok_str(tk, name, sizeof name);
        binding *b = s ? scope_find(s, name) : NULL;
        if (b && b->is_tensor)
            return perr(P, tk, "'%s' is a tensor, expected an integer", name);
        if (b) {
            *v = b->v;
        } else {
            sb_param *pr = find_param(P->m, name);
            if (!pr)
                return perr(P, tk, "unknown parameter '%s'", name);
            *v = pr->value;
        }
        (*pos)++;
        return 0;
    }
    return perr(P, tk, "expected an integer expression, found %s", tok_desc(tk, d, sizeof d));
}

static int parse_term(parser *P, scope *s, int *pos, int64_t *v)
{
    if (parse_primary(P, s, pos, v))
        return -1;
    for (;;) {
        token *op = &P->t[*pos];
        if (!(tok_punct(op, '*') || tok_punct(op, '/') || tok_punct(op, '%')))
            return 0;
        (*pos)++;
        int64_t r;
        if (parse_primary(P, s, pos, &r))
            return -1;
        if (op->punct == '*') {
            if (__builtin_mul_overflow(*v, r, v))
                return perr(P, op, "integer overflow");
        } else {
            if (r == 0)
                return perr(P, op, "division by zero");
            if (*v == INT64_MIN && r == -1)
                return perr(P, op, "integer overflow");
            if (op->punct == '/' && *v % r != 0)
                return perr(P, op, "%lld is not divisible by %lld", (long long)*v, (long long)r);
            *v = op->punct == '/' ? *v / r : *v % r;
        }
    }
}

static int parse_expr(parser *P, scope *s, int *pos, int64_t *v)
{
    if (parse_term(P, s, pos, v))
        return -1;
    for (;;) {
        token *op = &P->t[*pos];
        if (!(tok_punct(op, '+') || tok_punct(op, '-')))
            return 0;
        (*pos)++;
        int64_t r;
        if (parse_term(P, s, pos, &r))
            return -1;
        if (op->punct == '+' ? __builtin_add_overflow(*v, r, v) : __builtin_sub_overflow(*v, r, v))
            return perr(P, op, "integer overflow");
    }
}

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

/* An item: `name = expr`, an integer expression, or a bare identifier that
 * is not bound to an integer (a dim name or a keyword like `avg`). */
static int parse_item(parser *P, scope *s, int *pos, item *it)
{
    token *tk = &P->t[*pos];
    memset(it, 0, sizeof *it);
    if (tk->kind == TK_IDENT && tok_punct(&P->t[*pos + 1], '=')) {
        it->name = tk;
        it->has_int = 1;
        *pos += 2;
        return parse_expr(P, s, pos, &it->i);
    }
    if (tk->kind == TK_IDENT) {
        token *nx = &P->t[*pos + 1];
        int alone = tok_punct(nx, ',') || tok_punct(nx, ')') || tok_punct(nx, ']') || nx->kind == TK_NL;
        if (alone) {
            char name[SB_NAME_MAX];
            tok_str(tk, name, sizeof name);
            binding *b = scope_find(s, name);
            sb_param *pr = find_param(P->m, name);
            it->ident = tk;
            if (b && !b->is_tensor) {
                it->has_int = 1;
                it->i = b->v;
            } else if (!b && pr) {
                it->has_int = 1;
                it->i = pr->value;
            }
            (*pos)++;
            return 0;
        }
    }
    it->has_int = 1;
    return parse_expr(P, s, pos, &it->i);
}

static int parse_kwvalue(parser *P, scope *s, int *pos, kwarg *kw)
{
    token *tk = &P->t[*pos];
    kw->at = tk;
    if (tk->kind == TK_STRING) {
        kw->str = tk;
        (*pos)++;
        return 0;
    }
    if (tok_punct(tk, '[')) {
        kw->is_list = 1;
        (*pos)++;
        while (!tok_punct(&P->t[*pos], ']')) {
            if (kw->nitems == MAX_ITEMS)
                return perr(P, &P->t[*pos], "too many list items (at most %d)", MAX_ITEMS);
            if (parse_item(P, s, pos, &kw->items[kw->nitems++]))
                return -1;
            if (tok_punct(&P->t[*pos], ','))
                (*pos)++;
            else if (!tok_punct(&P->t[*pos], ']'))
                return expect_punct(P, pos, ']');
        }
        (*pos)++;
        return 0;
    }
    kw->nitems = 1;
    if (parse_item(P, s, pos, &kw->items[0]))
        return -1;
    if (kw->items[0].ident) { /* a block argument bound to a list */
        char name[SB_NAME_MAX];
        tok_str(kw->items[0].ident, name, sizeof name);
        binding *b = scope_find(s, name);
        if (b && b->nlist > 0) {
            kw->is_list = 1;
            kw->nitems = b->nlist;
            for (int i = 0; i < b->nlist; i++)
                kw->items[i] = (item){.has_int = 1, .i = b->list[i]};
        }
    }
    return 0;
}

static int parse_call(parser *P, scope *s, int *pos, call *c)
{
    memset(c, 0, sizeof *c);
    c->callee = &P->t[*pos];
    (*pos)++;
    if (expect_punct(P, pos, '('))
        return -1;
    while (!tok_punct(&P->t[*pos], ')')) {
        token *tk = &P->t[*pos];
        if (tk->kind == TK_IDENT && tok_punct(&P->t[*pos + 1], '=')) {
            if (c->nkw == MAX_KW)
                return perr(P, tk, "too many arguments");
            kwarg *kw = &c->kw[c->nkw++];
            memset(kw, 0, sizeof *kw);
            kw->key = tk;
            *pos += 2;
            if (parse_kwvalue(P, s, pos, kw))
                return -1;
        } else if (tk->kind == TK_STRING) {
            if (c->str)
                return perr(P, tk, "only one string argument is allowed");
            c->str = tk;
            (*pos)++;
        } else {
            char name[SB_NAME_MAX];
            binding *b = NULL;
            if (tk->kind == TK_IDENT) {
                tok_str(tk, name, sizeof name);
                b = scope_find(s, name);
            }
            if (c->npos == MAX_KW + SB_MAX_IO)
                return perr(P, tk, "too many arguments");
            if (b && b->is_tensor) {
                if (c->ntens == SB_MAX_IO)
                    return perr(P, tk, "too many tensor arguments (at most %d)", SB_MAX_IO);
                c->tens_at[c->ntens] = tk;
                c->tens[c->ntens++] = (int)b->v;
                c->pos_is_tensor[c->npos] = 1;
                c->pos_v[c->npos] = b->v;
                c->pos_at[c->npos++] = tk;
                (*pos)++;
            } else {
                token *nx = &P->t[*pos + 1];
                if (tk->kind == TK_IDENT && !b && !find_param(P->m, name)
                    && (tok_punct(nx, ',') || tok_punct(nx, ')')))
                    return perr(P, tk, "unknown tensor '%s'", name);
                int64_t v;
                if (parse_expr(P, s, pos, &v))
                    return -1;
                if (c->nint == MAX_KW)
                    return perr(P, tk, "too many arguments");
                c->int_at[c->nint] = tk;
                c->ints[c->nint++] = v;
                c->pos_is_tensor[c->npos] = 0;
                c->pos_v[c->npos] = v;
                c->pos_at[c->npos++] = tk;
            }
        }
        if (tok_punct(&P->t[*pos], ','))
            (*pos)++;
        else if (!tok_punct(&P->t[*pos], ')'))
            return expect_punct(P, pos, ')');
    }
    (*pos)++;
    return 0;
}

static kwarg *kw_get(call *c, const char *key)
{
    for (int i = 0; i < c->nkw; i++)
        if (tok_is(c->kw[i].key, key))
            return &c->kw[i];
    return NULL;
}

/* Checks that every keyword is in `allowed` (space separated, each word
 * followed by a space) and that no keyword repeats. */
static int kw_check(parser *P, call *c, const char *op, const char *allowed)
{
    for (int i = 0; i < c->nkw; i++) {
        char k[SB_NAME_MAX + 2];
        tok_str(c->kw[i].key, k, SB_NAME_MAX);
        for (int j = 0; j < i; j++)
            if (tok_is(c->kw[j].key, k))
                return perr(P, c->kw[i].key, "%s: argument '%s' given twice", op, k);
        strcat(k, " ");
        char all[256];
        snprintf(all, sizeof all, "%s ", allowed);
        char *hit = strstr(all, k);
        if (!hit || (hit != all && hit[-1] != ' '))
            return perr(P, c->kw[i].key, "%s: unknown argument '%.*s' (expected one of: %s)", op,
                        c->kw[i].key->len, c->kw[i].key->s, allowed[0] ? allowed : "none");
    }
    return 0;
}

/* Integer keyword (or default). */
static int kw_int(parser *P, call *c, const char *key, int64_t def, int64_t lo, int64_t *out)
{
    kwarg *kw = kw_get(c, key);
    if (!kw) {
        *out = def;
        return 0;
    }
    if (kw->is_list || kw->str || kw->nitems != 1 || !kw->items[0].has_int || kw->items[0].name)
        return perr(P, kw->at, "'%s' must be an integer", key);
    if (kw->items[0].i < lo)
        return perr(P, kw->at, "'%s' must be at least %lld, got %lld", key, (long long)lo,
                    (long long)kw->items[0].i);
    *out = kw->items[0].i;
    return 0;
}

/* Integer or pair [a, b] (kernel, stride, pad). */
static int kw_pair(parser *P, call *c, const char *key, int64_t def, int64_t lo, int out[2])
{
    kwarg *kw = kw_get(c, key);
    if (!kw) {
        out[0] = out[1] = (int)def;
        return 0;
    }
    int n = kw->nitems;
    if (kw->str || (kw->is_list && n != 2) || n < 1)
        return perr(P, kw->at, "'%s' must be an integer or a pair [a, b]", key);
    for (int i = 0; i < n; i++) {
        if (!kw->items[i].has_int || kw->items[i].name)
            return perr(P, kw->at, "'%s' must be an integer or a pair [a, b]", key);
        if (kw->items[i].i < lo || kw->items[i].i > (1 << 20))
            return perr(P, kw->at, "'%s' out of range: %lld", key, (long long)kw->items[i].i);
        out[i] = (int)kw->items[i].i;
    }
    if (n == 1)
        out[1] = out[0];
    return 0;
}

/* A dim name keyword (`dim=units`), or def. */
static int kw_name(parser *P, call *c, const char *key, const char *def, char *out)
{
    kwarg *kw = kw_get(c, key);
    if (!kw) {
        snprintf(out, SB_NAME_MAX, "%s", def);
        return 0;
    }
    if (kw->is_list || kw->str || !kw->items[0].ident)
        return perr(P, kw->at, "'%s' must be a name", key);
    tok_str(kw->items[0].ident, out, SB_NAME_MAX);
    return 0;
}

/* ---- building the model ----------------------------------------------------- */

static int add_tensor(parser *P, const token *at, const char *name, sb_tensor_kind kind,
                      int ndims, const sb_dim *dims, int producer, int slot)
{
    sb_model *m = P->m;
    if (m->ntensors >= MAX_TENSORS)
        return perr(P, at, "too many tensors (at most %d)", MAX_TENSORS);
    if (m->ntensors == P->cap_tensors) {
        int nc = P->cap_tensors ? P->cap_tensors * 2 : 64;
        sb_tensor *nt = sb_realloc(m->tensors, (size_t)nc * sizeof *nt, P->err);
        if (!nt)
            return -1;
        m->tensors = nt;
        P->cap_tensors = nc;
    }
    int64_t prod = 1;
    for (int i = 0; i < ndims; i++) {
        if (dims[i].size <= 0)
            return perr(P, at, "tensor '%s': dim '%s' has non-positive size %lld", name,
                        dims[i].name, (long long)dims[i].size);
        if (dims[i].size > MAX_DIM_SIZE || __builtin_mul_overflow(prod, dims[i].size, &prod)
            || prod > ((int64_t)1 << 50))
            return perr(P, at, "tensor '%s': size too large", name);
        for (int j = 0; j < i; j++)
            if (strcmp(dims[i].name, dims[j].name) == 0)
                return perr(P, at, "tensor '%s': dim name '%s' used twice", name, dims[i].name);
    }
    sb_tensor *t = &m->tensors[m->ntensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->ndims = ndims;
    memcpy(t->dims, dims, (size_t)ndims * sizeof *dims);
    t->producer = producer;
    t->producer_slot = slot;
    return m->ntensors++;
}

static sb_op *new_op(parser *P, const token *at, sb_op_kind kind, const char *name)
{
    sb_model *m = P->m;
    if (m->nops >= MAX_OPS) {
        perr(P, at, "too many ops (at most %d)", MAX_OPS);
        return NULL;
    }
    if (m->nops == P->cap_ops) {
        int nc = P->cap_ops ? P->cap_ops * 2 : 64;
        sb_op *no = sb_realloc(m->ops, (size_t)nc * sizeof *no, P->err);
        if (!no)
            return NULL;
        m->ops = no;
        P->cap_ops = nc;
    }
    sb_op *op = &m->ops[m->nops];
    memset(op, 0, sizeof *op);
    snprintf(op->name, sizeof op->name, "%s", name);
    op->kind = kind;
    op->line = at->line;
    for (int i = 0; i < SB_MAX_DIMS; i++)
        op->perm[i] = i;
    return op;
}

/* Adds iteration dim (name must be unique within the op). */
static int op_dim(parser *P, const token *at, sb_op *op, const char *name, int64_t size, int role)
{
    if (op->ndims == SB_MAX_DIMS)
        return perr(P, at, "%s: iteration space has more than %d dims", op->name, SB_MAX_DIMS);
    for (int i = 0; i < op->ndims; i++)
        if (strcmp(op->dims[i].name, name) == 0)
            return perr(P, at, "%s: dim name '%s' appears twice in its iteration space", op->name,
                        name);
    if (size <= 0)
        return perr(P, at, "%s: dim '%s' has non-positive size %lld", op->name, name,
                    (long long)size);
    if (size > MAX_DIM_SIZE)
        return perr(P, at, "%s: dim '%s' too large", op->name, name);
    snprintf(op->dims[op->ndims].name, SB_NAME_MAX, "%s", name);
    op->dims[op->ndims].size = size;
    op->role[op->ndims] = role;
    return op->ndims++;
}

static void set_operand(sb_operand *o, int tensor, int ndims, const int *map)
{
    o->tensor = tensor;
    for (int i = 0; i < SB_MAX_DIMS; i++)
        o->map[i] = i < ndims ? map[i] : SB_MAP_ONE;
}

static void identity_map(int *map, int n)
{
    for (int i = 0; i < n; i++)
        map[i] = i;
}

/* Finishes an op: registers its outputs as tensors named by the LHS names. */
typedef struct {
    int nlhs;
    const token *lhs[SB_MAX_IO];
    scope *s;
} target;

/* Adds an implicit weight to op: dims follow iteration dims `map` (or, for
 * SB_MAP_ONE, take the size from `fixed`). */
static void add_weight(sb_op *op, const char *suffix, int nd, const int *map, const int64_t *fixed,
                       double scale, double offset)
{
    sb_weight *w = &op->weights[op->nweights++];
    memset(w, 0, sizeof *w);
    snprintf(w->suffix, sizeof w->suffix, "%s", suffix);
    w->ndims = nd;
    for (int j = 0; j < nd; j++) {
        w->map[j] = map[j];
        w->size[j] = map[j] >= 0 ? op->dims[map[j]].size : fixed[j];
    }
    w->init_scale = scale;
    w->init_offset = offset;
}

/* The op's own weights and its reduced dims, from its kind and dims. Weights
 * start uniform in +-1/sqrt(fan-in), fan-in the product of the K dims. */
static void op_weights_and_stats(sb_op *op)
{
    int nd = op->ndims;
    double fan = 1;
    for (int i = 0; i < nd; i++)
        if (op->role[i] == SB_ROLE_K)
            fan *= (double)op->dims[i].size;
    double sc = 1.0 / sqrt(fan > 0 ? fan : 1);
    const int64_t none[SB_MAX_DIMS] = {0}; /* no fixed-size dims */
    op->nweights = 0;
    op->stat_dims = 0;
    switch (op->kind) {
    case SB_OP_CONV: {
        int map[4] = {6, 1, 4, 5}; /* filter (channels, channels_in, kh, kw) */
        add_weight(op, ".w", 4, map, none, sc, 0);
        break;
    }
    case SB_OP_DENSE: {
        int map[2] = {nd - 1, nd - 2}; /* (k, n) */
        add_weight(op, ".w", 2, map, none, sc, 0);
        break;
    }
    case SB_OP_EMBEDDING: {
        int map[2] = {nd - 1, nd - 2}; /* (vocab, embed) */
        add_weight(op, ".table", 2, map, none, 1.0, 0);
        break;
    }
    case SB_OP_NORM: {
        int a = op->batchnorm ? 1 : op->axis;
        int map[1] = {a};
        add_weight(op, ".gamma", 1, map, none, 0.1, 1.0);
        add_weight(op, ".beta", 1, map, none, 0.1, 0.0);
        op->stat_dims = op->batchnorm ? ((1u << nd) - 1) & ~(1u << 1) : 1u << op->axis;
        break;
    }
    case SB_OP_LSTM: {
        /* (layers, 2, units_in, 4, units): [x; h] -> 4 gates of each unit */
        int map[5] = {0, SB_MAP_ONE, 4, SB_MAP_ONE, 3};
        int64_t fixed[5] = {0, 2, 0, 4, 0};
        add_weight(op, ".w", 5, map, fixed, 1.0 / sqrt((double)op->dims[3].size), 0);
        break;
    }
    case SB_OP_SOFTMAX: op->stat_dims = 1u << op->axis; break;
    case SB_OP_SOFTMAX_XENT: op->stat_dims = 1u << (nd - 1); break;
    case SB_OP_REDUCE_MEAN: op->stat_dims = op->axes; break;
    default: break;
    }
}

static int finish_op(parser *P, sb_op *op, target *tg, int nout, const int *ndims,
                     sb_dim dims[][SB_MAX_DIMS], int maps[][SB_MAX_DIMS])
{
    sb_model *m = P->m;
    int opi = (int)(op - m->ops);
    const token *at = tg->lhs[0];
    if (tg->nlhs != nout && !(tg->nlhs == 0))
        return perr(P, at, "%s gives %d output%s, but %d name%s on the left", sb_op_kind_name(op->kind),
                    nout, nout == 1 ? "" : "s", tg->nlhs, tg->nlhs == 1 ? " is" : "s are");
    if (nout > SB_MAX_IO)
        return perr(P, at, "too many outputs (at most %d)", SB_MAX_IO);
    m->nops++; /* op becomes visible; its tensors follow */
    op = &m->ops[opi];
    op_weights_and_stats(op);
    op->nout = nout;
    for (int k = 0; k < nout; k++) {
        char tname[SB_NAME_MAX], base[SB_NAME_MAX];
        if (nout == 1) {
            snprintf(tname, sizeof tname, "%s", op->name);
        } else {
            tok_str(tg->lhs[k], base, sizeof base);
            if (unique_name(P, tg->lhs[k], tg->s->prefix, base, tname))
                return -1;
        }
        int t = add_tensor(P, tg->lhs[k], tname, SB_TENSOR_ACTIVATION, ndims[k], dims[k], opi, k);
        if (t < 0)
            return -1;
        op = &m->ops[opi];
        set_operand(&op->out[k], t, ndims[k], maps[k]);
        char lname[SB_NAME_MAX];
        tok_str(tg->lhs[k], lname, sizeof lname);
        if (scope_bind(P, tg->s, lname, 1, t))
            return -1;
    }
    return 0;
}

static const sb_tensor *T(parser *P, int i) { return &P->m->tensors[i]; }

/* Resolves an axis keyword (integer, negative from the end, or dim name). */
static int kw_axis(parser *P, call *c, const char *key, const sb_tensor *t, int def, int *out)
{
    kwarg *kw = kw_get(c, key);
    if (!kw) {
        *out = def < 0 ? t->ndims + def : def;
        if (*out < 0 || *out >= t->ndims)
            return perr(P, c->callee, "tensor '%s' has no axis %d", t->name, def);
        return 0;
    }
    if (kw->is_list || kw->str || kw->nitems != 1)
        return perr(P, kw->at, "'%s' must be an axis number or a dim name", key);
    item *it = &kw->items[0];
    if (it->ident) {
        for (int i = 0; i < t->ndims; i++)
            if (tok_is(it->ident, t->dims[i].name)) {
                *out = i;
                return 0;
            }
        if (!it->has_int)
            return perr(P, kw->at, "tensor '%s' has no dim named '%.*s'", t->name, it->ident->len,
                        it->ident->s);
    }
    int64_t a = it->i < 0 ? t->ndims + it->i : it->i;
    if (a < 0 || a >= t->ndims)
        return perr(P, kw->at, "axis %lld out of range for tensor '%s' of rank %d",
                    (long long)it->i, t->name, t->ndims);
    *out = (int)a;
    return 0;
}

static int want_tensors(parser *P, call *c, const char *op, int lo, int hi)
{
    if (c->ntens < lo || c->ntens > hi) {
        if (lo == hi)
            return perr(P, c->callee, "%s takes %d input tensor%s, got %d", op, lo, lo == 1 ? "" : "s",
                        c->ntens);
        return perr(P, c->callee, "%s takes %d to %d input tensors, got %d", op, lo, hi, c->ntens);
    }
    if (c->nint)
        return perr(P, c->int_at[0], "%s: unexpected positional integer argument", op);
    if (c->str && strcmp(op, "einsum") != 0)
        return perr(P, c->str, "%s: unexpected string argument", op);
    return 0;
}

static int want_rank(parser *P, call *c, int k, const char *op, int rank)
{
    const sb_tensor *t = T(P, c->tens[k]);
    if (t->ndims != rank)
        return perr(P, c->tens_at[k], "%s needs a rank-%d input, '%s' has rank %d", op, rank,
                    t->name, t->ndims);
    return 0;
}

/* in-channel names collide with out-channel names: suffix the reduction one */
static void k_name(char *out, const char *in, const char *other)
{
    if (strcmp(in, other) == 0)
        snprintf(out, SB_NAME_MAX, "%.*s_in", SB_NAME_MAX - 4, in);
    else
        snprintf(out, SB_NAME_MAX, "%s", in);
}

typedef struct {
    int nout;
    int ndims[SB_MAX_IO];
    sb_dim dims[SB_MAX_IO][SB_MAX_DIMS];
    int maps[SB_MAX_IO][SB_MAX_DIMS];
} outs;

static int build_conv(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "conv";
    if (want_tensors(P, c, nm, 1, 1) || want_rank(P, c, 0, nm, 4)
        || kw_check(P, c, nm, "out kernel stride pad pw dim"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t nout, pw;
    char oname[SB_NAME_MAX], cname[SB_NAME_MAX];
    if (!kw_get(c, "out"))
        return perr(P, c->callee, "conv: missing argument 'out' (output channels)");
    if (kw_int(P, c, "out", 0, 1, &nout) || kw_int(P, c, "pw", 0, 0, &pw)
        || kw_pair(P, c, "kernel", 1, 1, op->kernel) || kw_pair(P, c, "stride", 1, 1, op->stride)
        || kw_pair(P, c, "pad", 0, 0, op->pad) || kw_name(P, c, "dim", x->dims[1].name, oname))
        return -1;
    op->pw = (int)pw;
    int64_t ho = 0, wo = 0;
    int64_t hin = x->dims[2].size + 2 * op->pad[0] - op->kernel[0];
    int64_t win = x->dims[3].size + 2 * op->pad[1] - op->kernel[1];
    if (hin < 0 || win < 0)
        return perr(P, c->callee, "conv: kernel %dx%d larger than padded input %lldx%lld of '%s'",
                    op->kernel[0], op->kernel[1], (long long)(x->dims[2].size + 2 * op->pad[0]),
                    (long long)(x->dims[3].size + 2 * op->pad[1]), x->name);
    ho = hin / op->stride[0] + 1;
    wo = win / op->stride[1] + 1;
    k_name(cname, x->dims[1].name, oname);
    if (op_dim(P, c->callee, op, x->dims[0].name, x->dims[0].size, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, cname, x->dims[1].size, SB_ROLE_K) < 0
        || op_dim(P, c->callee, op, x->dims[2].name, ho, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, x->dims[3].name, wo, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, "kh", op->kernel[0], SB_ROLE_K) < 0
        || op_dim(P, c->callee, op, "kw", op->kernel[1], SB_ROLE_K) < 0
        || op_dim(P, c->callee, op, oname, nout, SB_ROLE_N) < 0)
        return -1;
    op->nosplit = (1u << 2) | (1u << 3);
    op->nin = 1;
    int imap[4] = {0, 1, 2, 3};
    set_operand(&op->in[0], c->tens[0], 4, imap);
    o->nout = 1;
    o->ndims[0] = 4;
    o->dims[0][0] = x->dims[0];
    snprintf(o->dims[0][1].name, SB_NAME_MAX, "%s", oname);
    o->dims[0][1].size = nout;
    o->dims[0][2] = x->dims[2];
    o->dims[0][2].size = ho;
    o->dims[0][3] = x->dims[3];
    o->dims[0][3].size = wo;
    int omap[4] = {0, 6, 2, 3};
    memcpy(o->maps[0], omap, sizeof omap);
    return 0;
}

static int build_pool(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "pool";
    if (want_tensors(P, c, nm, 1, 1) || want_rank(P, c, 0, nm, 4)
        || kw_check(P, c, nm, "kernel stride pad type"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    char type[SB_NAME_MAX];
    if (!kw_get(c, "kernel"))
        return perr(P, c->callee, "pool: missing argument 'kernel'");
    if (kw_pair(P, c, "kernel", 1, 1, op->kernel) || kw_pair(P, c, "stride", 1, 1, op->stride)
        || kw_pair(P, c, "pad", 0, 0, op->pad) || kw_name(P, c, "type", "max", type))
        return -1;
    if (strcmp(type, "max") && strcmp(type, "avg"))
        return perr(P, kw_get(c, "type")->at, "pool: type must be max or avg, got '%s'", type);
    op->pool_avg = strcmp(type, "avg") == 0;
    int64_t hin = x->dims[2].size + 2 * op->pad[0] - op->kernel[0];
    int64_t win = x->dims[3].size + 2 * op->pad[1] - op->kernel[1];
    if (hin < 0 || win < 0)
        return perr(P, c->callee, "pool: window %dx%d larger than padded input of '%s'",
                    op->kernel[0], op->kernel[1], x->name);
    int64_t sz[4] = {x->dims[0].size, x->dims[1].size, hin / op->stride[0] + 1,
                     win / op->stride[1] + 1};
    o->nout = 1;
    o->ndims[0] = 4;
    for (int i = 0; i < 4; i++) {
        if (op_dim(P, c->callee, op, x->dims[i].name, sz[i], SB_ROLE_NONE) < 0)
            return -1;
        o->dims[0][i] = x->dims[i];
        o->dims[0][i].size = sz[i];
        o->maps[0][i] = i;
    }
    op->nin = 1;
    int imap[4] = {0, 1, 2, 3};
    set_operand(&op->in[0], c->tens[0], 4, imap);
    return 0;
}

static int build_dense(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "dense";
    if (want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "units pw dim"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (x->ndims < 2 || x->ndims > SB_MAX_DIMS - 1)
        return perr(P, c->tens_at[0], "dense needs an input of rank 2 to %d, '%s' has rank %d",
                    SB_MAX_DIMS - 1, x->name, x->ndims);
    int64_t units, pw;
    char uname[SB_NAME_MAX], kname[SB_NAME_MAX];
    if (!kw_get(c, "units"))
        return perr(P, c->callee, "dense: missing argument 'units'");
    if (kw_int(P, c, "units", 0, 1, &units) || kw_int(P, c, "pw", 0, 0, &pw)
        || kw_name(P, c, "dim", "units", uname))
        return -1;
    op->pw = (int)pw;
    int r = x->ndims;
    for (int i = 0; i < r - 1; i++)
        if (op_dim(P, c->callee, op, x->dims[i].name, x->dims[i].size, SB_ROLE_M) < 0)
            return -1;
    k_name(kname, x->dims[r - 1].name, uname);
    if (op_dim(P, c->callee, op, uname, units, SB_ROLE_N) < 0
        || op_dim(P, c->callee, op, kname, x->dims[r - 1].size, SB_ROLE_K) < 0)
        return -1;
    int imap[SB_MAX_DIMS], omap[SB_MAX_DIMS];
    identity_map(imap, r);
    imap[r - 1] = r; /* the k dim sits after units */
    identity_map(omap, r);
    op->nin = 1;
    set_operand(&op->in[0], c->tens[0], r, imap);
    o->nout = 1;
    o->ndims[0] = r;
    memcpy(o->dims[0], x->dims, sizeof x->dims);
    snprintf(o->dims[0][r - 1].name, SB_NAME_MAX, "%s", uname);
    o->dims[0][r - 1].size = units;
    memcpy(o->maps[0], omap, sizeof omap);
    return 0;
}

/* Parses "a b c, d e -> a d" (names separated by spaces). */
typedef struct {
    int n[3];
    char name[3][SB_MAX_DIMS][SB_NAME_MAX];
} eqn;

static int parse_eqn(parser *P, const token *at, eqn *e)
{
    memset(e, 0, sizeof *e);
    int part = 0;
    int i = 0;
    const char *s = at->s;
    int len = at->len;
    while (i < len) {
        char ch = s[i];
        if (ch == ' ' || ch == '\t') {
            i++;
        } else if (ch == ',') {
            if (part != 0)
                return perr(P, at, "einsum: equation needs exactly two inputs ('a b, b c -> a c')");
            part = 1;
            i++;
        } else if (ch == '-' && i + 1 < len && s[i + 1] == '>') {
            if (part != 1)
                return perr(P, at, "einsum: equation needs two inputs before '->'");
            part = 2;
            i += 2;
        } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
            int j = i;
            while (j < len && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z')
                               || (s[j] >= '0' && s[j] <= '9') || s[j] == '_'))
                j++;
            if (e->n[part] == SB_MAX_DIMS)
                return perr(P, at, "einsum: more than %d dims in one operand", SB_MAX_DIMS);
            if (j - i >= SB_NAME_MAX)
                return perr(P, at, "einsum: dim name too long");
            memcpy(e->name[part][e->n[part]], s + i, (size_t)(j - i));
            e->name[part][e->n[part]][j - i] = '\0';
            for (int k = 0; k < e->n[part]; k++)
                if (strcmp(e->name[part][k], e->name[part][e->n[part]]) == 0)
                    return perr(P, at, "einsum: dim '%s' repeated in one operand",
                                e->name[part][k]);
            e->n[part]++;
            i = j;
        } else {
            return perr(P, at, "einsum: unexpected character '%c' in equation", ch);
        }
    }
    if (part != 2 || !e->n[0] || !e->n[1] || !e->n[2])
        return perr(P, at, "einsum: equation must look like 'b s e, e f -> b s f'");
    return 0;
}

static int eqn_find(const eqn *e, int part, const char *name)
{
    for (int i = 0; i < e->n[part]; i++)
        if (strcmp(e->name[part][i], name) == 0)
            return i;
    return -1;
}

static int build_einsum(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "einsum";
    if (want_tensors(P, c, nm, 2, 2) || kw_check(P, c, nm, "pw"))
        return -1;
    if (!c->str)
        return perr(P, c->callee, "einsum: missing the equation string, e.g. \"b s e, e f -> b s f\"");
    int64_t pw;
    if (kw_int(P, c, "pw", 0, 0, &pw))
        return -1;
    op->pw = (int)pw;
    eqn e;
    if (parse_eqn(P, c->str, &e))
        return -1;
    const sb_tensor *in[2] = {T(P, c->tens[0]), T(P, c->tens[1])};
    for (int k = 0; k < 2; k++)
        if (in[k]->ndims != e.n[k])
            return perr(P, c->tens_at[k], "einsum: operand %d '%s' has rank %d, the equation says %d",
                        k + 1, in[k]->name, in[k]->ndims, e.n[k]);
    /* sizes must agree */
    for (int i = 0; i < e.n[0]; i++) {
        int j = eqn_find(&e, 1, e.name[0][i]);
        if (j >= 0 && in[0]->dims[i].size != in[1]->dims[j].size)
            return perr(P, c->str, "einsum: dim '%s' is %lld in '%s' but %lld in '%s'", e.name[0][i],
                        (long long)in[0]->dims[i].size, in[0]->name, (long long)in[1]->dims[j].size,
                        in[1]->name);
    }
    /* output dims first, then reduction dims */
    int nm_ = 0, nn = 0;
    for (int i = 0; i < e.n[2]; i++) {
        const char *d = e.name[2][i];
        int a = eqn_find(&e, 0, d), b = eqn_find(&e, 1, d);
        if (a < 0 && b < 0)
            return perr(P, c->str, "einsum: output dim '%s' is in neither input", d);
        int role = a >= 0 && b >= 0 ? SB_ROLE_BATCH : a >= 0 ? SB_ROLE_M : SB_ROLE_N;
        nm_ += role == SB_ROLE_M;
        nn += role == SB_ROLE_N;
        int64_t size = a >= 0 ? in[0]->dims[a].size : in[1]->dims[b].size;
        if (op_dim(P, c->str, op, d, size, role) < 0)
            return -1;
        for (int k = 0; k < i; k++)
            if (strcmp(e.name[2][k], d) == 0)
                return perr(P, c->str, "einsum: output dim '%s' repeated", d);
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < e.n[k]; i++) {
            const char *d = e.name[k][i];
            if (eqn_find(&e, 2, d) >= 0)
                continue;
            if (eqn_find(&e, 1 - k, d) < 0)
                return perr(P, c->str, "einsum: dim '%s' appears in one input only and not in the output (not supported)", d);
            if (k == 1)
                continue; /* added from the first input already */
            if (op_dim(P, c->str, op, d, in[0]->dims[i].size, SB_ROLE_K) < 0)
                return -1;
        }
    if (nm_ < 1 || nn < 1)
        return perr(P, c->str, "einsum: needs at least one output dim only in the first input and one only in the second (got %d and %d)",
                    nm_, nn);
    op->nin = 2;
    for (int k = 0; k < 2; k++) {
        int map[SB_MAX_DIMS];
        for (int i = 0; i < e.n[k]; i++)
            for (int j = 0; j < op->ndims; j++)
                if (strcmp(op->dims[j].name, e.name[k][i]) == 0)
                    map[i] = j;
        set_operand(&op->in[k], c->tens[k], e.n[k], map);
    }
    o->nout = 1;
    o->ndims[0] = e.n[2];
    for (int i = 0; i < e.n[2]; i++) {
        o->dims[0][i] = op->dims[i];
        o->maps[0][i] = i;
    }
    return 0;
}

static int build_embedding(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "embedding";
    if (want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "vocab size dim vocab_dim"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (x->ndims < 1 || x->ndims > SB_MAX_DIMS - 2)
        return perr(P, c->tens_at[0], "embedding: input '%s' has rank %d", x->name, x->ndims);
    int64_t vocab, size;
    char ename[SB_NAME_MAX], vname[SB_NAME_MAX];
    if (!kw_get(c, "vocab") || !kw_get(c, "size"))
        return perr(P, c->callee, "embedding: needs 'vocab' and 'size' (embedding width)");
    if (kw_int(P, c, "vocab", 0, 1, &vocab) || kw_int(P, c, "size", 0, 1, &size)
        || kw_name(P, c, "dim", "embed", ename) || kw_name(P, c, "vocab_dim", "vocab", vname))
        return -1;
    int r = x->ndims;
    for (int i = 0; i < r; i++)
        if (op_dim(P, c->callee, op, x->dims[i].name, x->dims[i].size, SB_ROLE_M) < 0)
            return -1;
    if (op_dim(P, c->callee, op, ename, size, SB_ROLE_N) < 0
        || op_dim(P, c->callee, op, vname, vocab, SB_ROLE_K) < 0)
        return -1;
    int map[SB_MAX_DIMS];
    identity_map(map, r);
    op->nin = 1;
    set_operand(&op->in[0], c->tens[0], r, map);
    o->nout = 1;
    o->ndims[0] = r + 1;
    for (int i = 0; i <= r; i++) {
        o->dims[0][i] = op->dims[i];
        o->maps[0][i] = i;
    }
    return 0;
}

static int build_lstm(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "lstm";
    if (want_tensors(P, c, nm, 1, 1) || want_rank(P, c, 0, nm, 3) || kw_check(P, c, nm, "layers"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t layers;
    if (kw_int(P, c, "layers", 1, 1, &layers))
        return -1;
    op->layers = (int)layers;
    char kname[SB_NAME_MAX];
    k_name(kname, x->dims[2].name, x->dims[2].name);
    /* (layers, seq, batch, n = units, k = units) */
    if (op_dim(P, c->callee, op, "layers", layers, SB_ROLE_BATCH) < 0
        || op_dim(P, c->callee, op, x->dims[1].name, x->dims[1].size, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, x->dims[0].name, x->dims[0].size, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, x->dims[2].name, x->dims[2].size, SB_ROLE_N) < 0
        || op_dim(P, c->callee, op, kname, x->dims[2].size, SB_ROLE_K) < 0)
        return -1;
    op->nosplit = 1u << 1;
    int imap[3] = {2, 1, 4}, omap[3] = {2, 1, 3};
    op->nin = 1;
    set_operand(&op->in[0], c->tens[0], 3, imap);
    o->nout = 1;
    o->ndims[0] = 3;
    memcpy(o->dims[0], x->dims, 3 * sizeof(sb_dim));
    memcpy(o->maps[0], omap, sizeof omap);
    return 0;
}

/* Ops whose iteration space is the input's shape (and so is the output). */
static void same_shape_space(parser *P, sb_op *op, call *c, outs *o, int nin)
{
    const sb_tensor *x = T(P, c->tens[0]);
    op->ndims = x->ndims;
    memcpy(op->dims, x->dims, sizeof x->dims);
    op->nin = nin;
    int map[SB_MAX_DIMS];
    identity_map(map, x->ndims);
    for (int k = 0; k < nin; k++)
        set_operand(&op->in[k], c->tens[k], x->ndims, map);
    o->nout = 1;
    o->ndims[0] = x->ndims;
    memcpy(o->dims[0], x->dims, sizeof x->dims);
    memcpy(o->maps[0], map, sizeof map);
}

static int build_norm(parser *P, sb_op *op, call *c, outs *o, int batch)
{
    const char *nm = batch ? "batchnorm" : "norm";
    if (want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, batch ? "" : "axis"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (x->ndims < 2)
        return perr(P, c->tens_at[0], "%s needs an input of rank >= 2, '%s' has rank %d", nm,
                    x->name, x->ndims);
    if (batch) {
        op->axis = 0;
        op->batchnorm = 1;
    }
    else if (kw_axis(P, c, "axis", x, -1, &op->axis))
        return -1;
    same_shape_space(P, op, c, o, 1);
    return 0;
}

static int build_softmax(parser *P, sb_op *op, call *c, outs *o, int xent)
{
    const char *nm = xent ? "softmax_xent" : "softmax";
    if (want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, xent ? "" : "axis"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (xent && x->ndims < 2)
        return perr(P, c->tens_at[0], "softmax_xent needs (batch..., classes), '%s' has rank %d",
                    x->name, x->ndims);
    if (kw_axis(P, c, "axis", x, xent ? -1 : 1 < x->ndims ? 1 : 0, &op->axis))
        return -1;
    same_shape_space(P, op, c, o, 1);
    return 0;
}

static int same_shapes(parser *P, call *c, const char *nm, int except_axis)
{
    const sb_tensor *a = T(P, c->tens[0]);
    for (int k = 1; k < c->ntens; k++) {
        const sb_tensor *b = T(P, c->tens[k]);
        if (b->ndims != a->ndims)
            return perr(P, c->tens_at[k], "%s: '%s' has rank %d but '%s' has rank %d", nm, b->name,
                        b->ndims, a->name, a->ndims);
        for (int i = 0; i < a->ndims; i++)
            if (i != except_axis && a->dims[i].size != b->dims[i].size)
                return perr(P, c->tens_at[k], "%s: shape mismatch in dim %d: '%s' has %lld, '%s' has %lld",
                            nm, i, b->name, (long long)b->dims[i].size, a->name,
                            (long long)a->dims[i].size);
    }
    return 0;
}

static int build_elementwise(parser *P, sb_op *op, call *c, outs *o, const char *nm)
{
    if (want_tensors(P, c, nm, strcmp(nm, "add") == 0 ? 2 : 1, SB_MAX_IO)
        || kw_check(P, c, nm, "pw") || same_shapes(P, c, nm, -1))
        return -1;
    int64_t pw;
    if (kw_int(P, c, "pw", 0, 0, &pw))
        return -1;
    op->pw = (int)pw;
    same_shape_space(P, op, c, o, c->ntens);
    return 0;
}

static int build_reduce_mean(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "reduce_mean";
    if (want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "axes keepdims"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t keep;
    if (kw_int(P, c, "keepdims", 0, 0, &keep))
        return -1;
    kwarg *kw = kw_get(c, "axes");
    uint32_t mask = 0;
    if (!kw) {
        mask = (1u << x->ndims) - 1;
    } else {
        for (int i = 0; i < kw->nitems; i++) {
            item *it = &kw->items[i];
            int a = -1;
            if (it->name || kw->str)
                return perr(P, kw->at, "reduce_mean: axes must be numbers or dim names");
            if (it->ident) {
                for (int j = 0; j < x->ndims; j++)
                    if (tok_is(it->ident, x->dims[j].name))
                        a = j;
                if (a < 0 && !it->has_int)
                    return perr(P, kw->at, "reduce_mean: '%s' has no dim '%.*s'", x->name,
                                it->ident->len, it->ident->s);
            }
            if (a < 0) {
                int64_t v = it->i < 0 ? it->i + x->ndims : it->i;
                if (v < 0 || v >= x->ndims)
                    return perr(P, kw->at, "reduce_mean: axis %lld out of range", (long long)it->i);
                a = (int)v;
            }
            if (mask & (1u << a))
                return perr(P, kw->at, "reduce_mean: axis %d given twice", a);
            mask |= 1u << a;
        }
    }
    op->axes = mask;
    same_shape_space(P, op, c, o, 1);
    int n = 0;
    for (int i = 0; i < x->ndims; i++) {
        if (!(mask & (1u << i))) {
            o->dims[0][n] = x->dims[i];
            o->maps[0][n++] = i;
        } else if (keep) {
            o->dims[0][n] = x->dims[i];
            o->dims[0][n].size = 1;
            o->maps[0][n++] = SB_MAP_ONE;
        }
    }
    if (n == 0) {
        snprintf(o->dims[0][0].name, SB_NAME_MAX, "scalar");
        o->dims[0][0].size = 1;
        o->maps[0][0] = SB_MAP_ONE;
        n = 1;
    }
    o->ndims[0] = n;
    return 0;
}

static int build_concat(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "concat";
    if (want_tensors(P, c, nm, 2, SB_MAX_IO) || kw_check(P, c, nm, "axis"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (kw_axis(P, c, "axis", x, 1 < x->ndims ? 1 : 0, &op->axis) || same_shapes(P, c, nm, op->axis))
        return -1;
    same_shape_space(P, op, c, o, c->ntens);
    int64_t total = 0;
    for (int k = 0; k < c->ntens; k++)
        total += T(P, c->tens[k])->dims[op->axis].size;
    op->dims[op->axis].size = total;
    o->dims[0][op->axis].size = total;
    op->nosplit = 1u << op->axis;
    return 0;
}

static int build_split(parser *P, sb_op *op, call *c, outs *o, int ntarget)
{
    const char *nm = "split";
    if (want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "n axis"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t n;
    if (kw_int(P, c, "n", ntarget ? ntarget : 2, 1, &n) || kw_axis(P, c, "axis", x, -1, &op->axis))
        return -1;
    if (n > SB_MAX_IO)
        return perr(P, c->callee, "split: at most %d parts", SB_MAX_IO);
    if (x->dims[op->axis].size % n)
        return perr(P, c->callee, "split: dim '%s' of size %lld is not divisible by %lld",
                    x->dims[op->axis].name, (long long)x->dims[op->axis].size, (long long)n);
    same_shape_space(P, op, c, o, 1);
    op->nosplit = 1u << op->axis;
    o->nout = (int)n;
    for (int k = 0; k < n; k++) {
        o->ndims[k] = x->ndims;
        memcpy(o->dims[k], x->dims, sizeof x->dims);
        o->dims[k][op->axis].size = x->dims[op->axis].size / n;
        identity_map(o->maps[k], x->ndims);
    }
    return 0;
}

static int build_stack(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "stack";
    if (want_tensors(P, c, nm, 1, SB_MAX_IO) || kw_check(P, c, nm, "axis dim")
        || same_shapes(P, c, nm, -1))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t axis;
    char dname[SB_NAME_MAX];
    if (kw_int(P, c, "axis", 0, -(x->ndims + 1), &axis) || kw_name(P, c, "dim", "stack", dname))
        return -1;
    if (axis < 0)
        axis += x->ndims + 1;
    if (axis > x->ndims)
        return perr(P, c->callee, "stack: axis %lld out of range", (long long)axis);
    if (x->ndims + 1 > SB_MAX_DIMS)
        return perr(P, c->callee, "stack: result has more than %d dims", SB_MAX_DIMS);
    op->axis = (int)axis;
    sb_dim d[SB_MAX_DIMS];
    int n = 0;
    for (int i = 0; i <= x->ndims; i++) {
        if (i == axis) {
            snprintf(d[n].name, SB_NAME_MAX, "%s", dname);
            d[n++].size = c->ntens;
        }
        if (i < x->ndims)
            d[n++] = x->dims[i];
    }
    for (int i = 0; i < n; i++)
        if (op_dim(P, c->callee, op, d[i].name, d[i].size, SB_ROLE_NONE) < 0)
            return -1;
    op->nosplit = 1u << axis;
    op->nin = c->ntens;
    int imap[SB_MAX_DIMS];
    for (int i = 0; i < x->ndims; i++)
        imap[i] = i < axis ? i : i + 1;
    for (int k = 0; k < c->ntens; k++)
        set_operand(&op->in[k], c->tens[k], x->ndims, imap);
    o->nout = 1;
    o->ndims[0] = n;
    memcpy(o->dims[0], d, sizeof d);
    identity_map(o->maps[0], n);
    return 0;
}

static int build_unstack(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "unstack";
    if (want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "axis"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (kw_axis(P, c, "axis", x, 0, &op->axis))
        return -1;
    if (x->ndims < 2)
        return perr(P, c->tens_at[0], "unstack needs rank >= 2");
    int64_t num = x->dims[op->axis].size;
    if (num > SB_MAX_IO)
        return perr(P, c->callee, "unstack: %lld parts, at most %d", (long long)num, SB_MAX_IO);
    same_shape_space(P, op, c, o, 1);
    op->nosplit = 1u << op->axis;
    o->nout = (int)num;
    for (int k = 0; k < num; k++) {
        int n = 0;
        for (int i = 0; i < x->ndims; i++)
            if (i != op->axis) {
                o->dims[k][n] = x->dims[i];
                o->maps[k][n++] = i;
            }
        o->ndims[k] = n;
    }
    return 0;
}

static int build_flatten(parser *P, sb_op *op, call *c, outs *o, const char *dname)
{
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t prod = 1;
    same_shape_space(P, op, c, o, 1);
    for (int i = 0; i < x->ndims; i++)
        prod *= x->dims[i].size;
    op->kind = SB_OP_FLATTEN;
    o->ndims[0] = 1;
    snprintf(o->dims[0][0].name, SB_NAME_MAX, "%s", dname);
    o->dims[0][0].size = prod;
    o->maps[0][0] = SB_MAP_ALL;
    return 0;
}

static int parse_shape(parser *P, kwarg *kw, const char *nm, int *n, sb_dim *d)
{
    if (!kw->is_list || kw->nitems < 1 || kw->nitems > SB_MAX_DIMS)
        return perr(P, kw->at, "%s: shape must be a list [name=size, ...] of 1 to %d dims", nm,
                    SB_MAX_DIMS);
    for (int i = 0; i < kw->nitems; i++) {
        if (!kw->items[i].name)
            return perr(P, kw->at, "%s: each dim of the shape needs a name: [name=size, ...]", nm);
        tok_str(kw->items[i].name, d[i].name, SB_NAME_MAX);
        d[i].size = kw->items[i].i;
        if (d[i].size == -1)
            continue; /* inferred from the input's element count */
        if (d[i].size <= 0)
            return perr(P, kw->at, "%s: dim '%s' has non-positive size %lld", nm, d[i].name,
                        (long long)d[i].size);
    }
    *n = kw->nitems;
    return 0;
}

static int build_unflatten(parser *P, sb_op *op, call *c, outs *o, int nd, const sb_dim *d)
{
    const sb_tensor *x = T(P, c->tens[0]);
    sb_dim dd[SB_MAX_DIMS];
    memcpy(dd, d, (size_t)nd * sizeof *d);
    d = dd;
    int64_t prod = 1;
    int infer = -1;
    for (int i = 0; i < nd; i++) {
        if (dd[i].size == -1) {
            if (infer >= 0)
                return perr(P, c->callee, "reshape: at most one dim may be -1 (inferred)");
            infer = i;
            continue;
        }
        if (__builtin_mul_overflow(prod, d[i].size, &prod))
            return perr(P, c->callee, "reshape: shape too large");
    }
    if (infer >= 0 && x->ndims == 1) {
        if (x->dims[0].size % prod)
            return perr(P, c->callee, "reshape: %lld elements of '%s' do not divide into the shape",
                        (long long)x->dims[0].size, x->name);
        dd[infer].size = x->dims[0].size / prod;
        prod = x->dims[0].size;
    }
    if (x->ndims != 1 || x->dims[0].size != prod)
        return perr(P, c->callee, "reshape: '%s' has %lld elements but the shape has %lld", x->name,
                    (long long)x->dims[0].size, (long long)prod);
    op->kind = SB_OP_UNFLATTEN;
    for (int i = 0; i < nd; i++)
        if (op_dim(P, c->callee, op, d[i].name, d[i].size, SB_ROLE_NONE) < 0)
            return -1;
    op->nin = 1;
    int imap[1] = {SB_MAP_ALL};
    set_operand(&op->in[0], c->tens[0], 1, imap);
    o->nout = 1;
    o->ndims[0] = nd;
    memcpy(o->dims[0], d, (size_t)nd * sizeof *d);
    identity_map(o->maps[0], nd);
    return 0;
}

static int build_transpose(parser *P, sb_op *op, call *c, outs *o)
{
    const char *nm = "transpose";
    if (want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "perm"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    kwarg *kw = kw_get(c, "perm");
    if (!kw || !kw->is_list || kw->nitems != x->ndims)
        return perr(P, kw ? kw->at : c->callee, "transpose: needs perm=[...] with %d entries", x->ndims);
    uint32_t seen = 0;
    for (int j = 0; j < x->ndims; j++) {
        item *it = &kw->items[j];
        int a = -1;
        if (it->ident) {
            for (int i = 0; i < x->ndims; i++)
                if (tok_is(it->ident, x->dims[i].name))
                    a = i;
        }
        if (a < 0 && it->has_int && !it->name && it->i >= 0 && it->i < x->ndims) {
            a = (int)it->i;
        }
        if (a < 0 || (seen & (1u << a)))
            return perr(P, kw->at, "transpose: perm must be a permutation of 0..%d (or dim names)",
                        x->ndims - 1);
        seen |= 1u << a;
        op->perm[j] = a;
    }
    same_shape_space(P, op, c, o, 1);
    for (int j = 0; j < x->ndims; j++) {
        o->dims[0][j] = x->dims[op->perm[j]];
        o->maps[0][j] = op->perm[j];
    }
    return 0;
}

/* ---- statements ------------------------------------------------------------- */

static int exec_range(parser *P, scope *s, int start, int end, int *ret, int *nret, int *returned);

static int find_end(parser *P, int pos, int *endpos)
{
    /* pos: first token after the header line. Counts nested block/repeat. */
    int depth = 0, at_start = 1;
    const token *open = &P->t[pos - 1];
    for (int i = pos; i < P->n; i++) {
        token *tk = &P->t[i];
        if (tk->kind == TK_EOF)
            break;
        if (tk->kind == TK_NL) {
            at_start = 1;
            continue;
        }
        if (at_start) {
            if (tok_is(tk, "repeat") || tok_is(tk, "block"))
                depth++;
            else if (tok_is(tk, "end")) {
                if (depth == 0) {
                    *endpos = i;
                    return 0;
                }
                depth--;
            }
        }
        at_start = 0;
    }
    return perr(P, open, "missing 'end' for this block or repeat");
}

static blockdef *find_block(parser *P, const token *name)
{
    for (int i = 0; i < P->nblocks; i++)
        if (tok_is(name, P->blocks[i].name))
            return &P->blocks[i];
    return NULL;
}

static int call_block(parser *P, scope *caller, blockdef *bd, call *c, target *tg)
{
    int bi = (int)(bd - P->blocks);
    for (int i = 0; i < P->depth; i++)
        if (P->stack[i] == bi)
            return perr(P, c->callee, "cycle: block '%s' calls itself", bd->name);
    if (P->depth == MAX_CALL_DEPTH)
        return perr(P, c->callee, "blocks nested too deeply (more than %d)", MAX_CALL_DEPTH);
    scope s = {0};
    char lhs[SB_NAME_MAX], uname[SB_NAME_MAX];
    tok_str(tg->lhs[0], lhs, sizeof lhs);
    if (unique_name(P, tg->lhs[0], caller->prefix, lhs, uname))
        return -1;
    snprintf(s.prefix, sizeof s.prefix, "%.*s/", SB_NAME_MAX - 2, uname);
    int rc = -1;
    if (c->npos > bd->nformals) {
        perr(P, c->callee, "block '%s' takes %d arguments, got %d", bd->name, bd->nformals, c->npos);
        goto out;
    }
    if (c->str) {
        perr(P, c->str, "block '%s': unexpected string argument", bd->name);
        goto out;
    }
    for (int f = 0; f < bd->nformals; f++) {
        char fname[SB_NAME_MAX];
        tok_str(bd->formal[f], fname, sizeof fname);
        kwarg *kw = kw_get(c, fname);
        if (f < c->npos) {
            if (kw) {
                perr(P, kw->key, "block '%s': argument '%s' given twice", bd->name, fname);
                goto out;
            }
            if (scope_bind(P, &s, fname, c->pos_is_tensor[f], c->pos_v[f]))
                goto out;
        } else if (kw && kw->is_list) {
            if (scope_bind(P, &s, fname, 0, 0))
                goto out;
            binding *b = scope_find(&s, fname);
            for (int i = 0; i < kw->nitems; i++) {
                if (!kw->items[i].has_int || kw->items[i].name) {
                    perr(P, kw->at, "block '%s': list argument '%s' must hold integers", bd->name, fname);
                    goto out;
                }
                b->list[i] = kw->items[i].i;
            }
            b->nlist = kw->nitems;
        } else if (kw) {
            if (kw->str || kw->items[0].name) {
                perr(P, kw->at, "block '%s': argument '%s' must be a tensor or an integer", bd->name, fname);
                goto out;
            }
            if (kw->items[0].ident && !kw->items[0].has_int) {
                char tn[SB_NAME_MAX];
                tok_str(kw->items[0].ident, tn, sizeof tn);
                binding *b = scope_find(caller, tn);
                if (!b || !b->is_tensor) {
                    perr(P, kw->at, "unknown tensor '%s'", tn);
                    goto out;
                }
                if (scope_bind(P, &s, fname, 1, b->v))
                    goto out;
            } else if (scope_bind(P, &s, fname, 0, kw->items[0].i)) {
                goto out;
            }
        } else if (bd->def_start[f] >= 0) {
            int pos = bd->def_start[f];
            int64_t v;
            if (parse_expr(P, &s, &pos, &v) || scope_bind(P, &s, fname, 0, v))
                goto out;
        } else {
            perr(P, c->callee, "block '%s': missing argument '%s'", bd->name, fname);
            goto out;
        }
    }
    for (int i = 0; i < c->nkw; i++) {
        int ok = 0;
        for (int f = 0; f < bd->nformals; f++)
            ok |= tok_is(c->kw[i].key, "") || (c->kw[i].key->len == bd->formal[f]->len
                  && memcmp(c->kw[i].key->s, bd->formal[f]->s, (size_t)bd->formal[f]->len) == 0);
        if (!ok) {
            perr(P, c->kw[i].key, "block '%s' has no argument '%.*s'", bd->name, c->kw[i].key->len,
                 c->kw[i].key->s);
            goto out;
        }
    }
    P->stack[P->depth++] = bi;
    int ret[SB_MAX_IO], nret = 0, returned = 0;
    rc = exec_range(P, &s, bd->body, bd->end, ret, &nret, &returned);
    P->depth--;
    if (rc)
        goto out;
    rc = -1;
    if (!returned) {
        perr(P, c->callee, "block '%s' has no 'return'", bd->name);
        goto out;
    }
    if (nret != tg->nlhs) {
        perr(P, tg->lhs[0], "block '%s' returns %d tensor%s, but %d name%s on the left", bd->name,
             nret, nret == 1 ? "" : "s", tg->nlhs, tg->nlhs == 1 ? " is" : "s are");
        goto out;
    }
    for (int k = 0; k < nret; k++) {
        char ln[SB_NAME_MAX];
        tok_str(tg->lhs[k], ln, sizeof ln);
        if (scope_bind(P, caller, ln, 1, ret[k]))
            goto out;
    }
    rc = 0;
out:
    scope_free(&s);
    return rc;
}

static int exec_op(parser *P, scope *s, call *c, target *tg)
{
    char name[SB_NAME_MAX], lhs[SB_NAME_MAX], callee[SB_NAME_MAX];
    tok_str(c->callee, callee, sizeof callee);
    tok_str(tg->lhs[0], lhs, sizeof lhs);
    static const struct { const char *word; sb_op_kind kind; } kinds[] = {
        {"conv", SB_OP_CONV}, {"pool", SB_OP_POOL}, {"dense", SB_OP_DENSE},
        {"einsum", SB_OP_EINSUM}, {"embedding", SB_OP_EMBEDDING}, {"lstm", SB_OP_LSTM},
        {"norm", SB_OP_NORM}, {"batchnorm", SB_OP_NORM}, {"softmax", SB_OP_SOFTMAX},
        {"softmax_xent", SB_OP_SOFTMAX_XENT}, {"add", SB_OP_ELEMENTWISE},
        {"elementwise", SB_OP_ELEMENTWISE}, {"reduce_mean", SB_OP_REDUCE_MEAN},
        {"concat", SB_OP_CONCAT}, {"split", SB_OP_SPLIT}, {"stack", SB_OP_STACK},
        {"unstack", SB_OP_UNSTACK}, {"flatten", SB_OP_FLATTEN}, {"reshape", SB_OP_UNFLATTEN},
        {"transpose", SB_OP_TRANSPOSE},
    };
    int ki = -1;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(callee, kinds[i].word) == 0)
            ki = (int)i;
    if (ki < 0)
        return perr(P, c->callee, "unknown op or block '%s' (ops: conv pool dense einsum embedding lstm norm batchnorm softmax softmax_xent add elementwise reduce_mean concat split stack unstack flatten reshape transpose)",
                    callee);
    if (c->ntens == 0)
        return perr(P, c->callee, "%s needs at least one input tensor", callee);
    /* reshape of a multi-dim tensor: flatten, then unflatten (two ops) */
    if (kinds[ki].kind == SB_OP_UNFLATTEN) {
        if (want_tensors(P, c, "reshape", 1, 1) || kw_check(P, c, "reshape", "shape"))
            return -1;
        kwarg *kw = kw_get(c, "shape");
        if (!kw)
            return perr(P, c->callee, "reshape: missing shape=[name=size, ...]");
        int nd = 0;
        sb_dim d[SB_MAX_DIMS];
        if (parse_shape(P, kw, "reshape", &nd, d))
            return -1;
        if (T(P, c->tens[0])->ndims > 1) {
            char fl[SB_NAME_MAX + 8];
            snprintf(fl, sizeof fl, "%s/flatten", lhs);
            if (unique_name(P, tg->lhs[0], s->prefix, fl, name))
                return -1;
            sb_op *op = new_op(P, c->callee, SB_OP_FLATTEN, name);
            outs o;
            memset(&o, 0, sizeof o);
            if (!op || build_flatten(P, op, c, &o, "flat"))
                return -1;
            target t1 = {.nlhs = 1, .s = s};
            t1.lhs[0] = tg->lhs[0];
            /* bind the flat tensor to a hidden name, then use it */
            scope tmp = {0};
            tmp.b = NULL;
            snprintf(tmp.prefix, sizeof tmp.prefix, "%s", s->prefix);
            t1.s = &tmp;
            int rc = finish_op(P, op, &t1, 1, o.ndims, o.dims, o.maps);
            int flat = rc ? -1 : (int)tmp.b[0].v;
            scope_free(&tmp);
            if (rc)
                return -1;
            c->tens[0] = flat;
        }
        if (unique_name(P, tg->lhs[0], s->prefix, lhs, name))
            return -1;
        sb_op *op = new_op(P, c->callee, SB_OP_UNFLATTEN, name);
        outs o;
        memset(&o, 0, sizeof o);
        if (!op || build_unflatten(P, op, c, &o, nd, d))
            return -1;
        return finish_op(P, op, tg, 1, o.ndims, o.dims, o.maps);
    }
    if (unique_name(P, tg->lhs[0], s->prefix, lhs, name))
        return -1;
    sb_op *op = new_op(P, c->callee, kinds[ki].kind, name);
    if (!op)
        return -1;
    outs o;
    memset(&o, 0, sizeof o);
    int rc;
    switch (kinds[ki].kind) {
    case SB_OP_CONV: rc = build_conv(P, op, c, &o); break;
    case SB_OP_POOL: rc = build_pool(P, op, c, &o); break;
    case SB_OP_DENSE: rc = build_dense(P, op, c, &o); break;
    case SB_OP_EINSUM: rc = build_einsum(P, op, c, &o); break;
    case SB_OP_EMBEDDING: rc = build_embedding(P, op, c, &o); break;
    case SB_OP_LSTM: rc = build_lstm(P, op, c, &o); break;
    case SB_OP_NORM: rc = build_norm(P, op, c, &o, strcmp(callee, "batchnorm") == 0); break;
    case SB_OP_SOFTMAX: rc = build_softmax(P, op, c, &o, 0); break;
    case SB_OP_SOFTMAX_XENT: rc = build_softmax(P, op, c, &o, 1); break;
    case SB_OP_ELEMENTWISE: rc = build_elementwise(P, op, c, &o, callee); break;
    case SB_OP_REDUCE_MEAN: rc = build_reduce_mean(P, op, c, &o); break;
    case SB_OP_CONCAT: rc = build_concat(P, op, c, &o); break;
    case SB_OP_SPLIT: rc = build_split(P, op, c, &o, tg->nlhs > 1 ? tg->nlhs : 0); break;
    case SB_OP_STACK: rc = build_stack(P, op, c, &o); break;
    case SB_OP_UNSTACK: rc = build_unstack(P, op, c, &o); break;
    case SB_OP_FLATTEN: {
        char dn[SB_NAME_MAX];
        rc = want_tensors(P, c, "flatten", 1, 1) || kw_check(P, c, "flatten", "dim")
             || kw_name(P, c, "dim", "flat", dn) || build_flatten(P, op, c, &o, dn);
        break;
    }
    case SB_OP_TRANSPOSE: rc = build_transpose(P, op, c, &o); break;
    default: rc = perr(P, c->callee, "internal: unhandled op"); break;
    }
    if (rc)
        return -1;
    return finish_op(P, op, tg, o.nout, o.ndims, o.dims, o.maps);
}

/* `input name[d=expr, ...]` or `weight name[...]` */
static int exec_decl(parser *P, scope *s, int *pos, sb_tensor_kind kind)
{
    const token *kwt = &P->t[*pos];
    (*pos)++;
    token *nt = &P->t[*pos];
    char d[96];
    if (nt->kind != TK_IDENT)
        return perr(P, nt, "expected a tensor name after '%.*s', found %s", kwt->len, kwt->s,
                    tok_desc(nt, d, sizeof d));
    (*pos)++;
    if (expect_punct(P, pos, '['))
        return -1;
    sb_dim dims[SB_MAX_DIMS];
    int nd = 0;
    while (!tok_punct(&P->t[*pos], ']')) {
        token *dn = &P->t[*pos];
        if (nd == SB_MAX_DIMS)
            return perr(P, dn, "more than %d dims", SB_MAX_DIMS);
        if (dn->kind != TK_IDENT || !(tok_punct(&P->t[*pos + 1], '=') || tok_punct(&P->t[*pos + 1], ':')))
            return perr(P, dn, "expected 'name=size' for a dim, found %s", tok_desc(dn, d, sizeof d));
        tok_str(dn, dims[nd].name, SB_NAME_MAX);
        *pos += 2;
        if (parse_expr(P, s, pos, &dims[nd].size))
            return -1;
        nd++;
        if (tok_punct(&P->t[*pos], ','))
            (*pos)++;
        else if (!tok_punct(&P->t[*pos], ']'))
            return expect_punct(P, pos, ']');
    }
    (*pos)++;
    if (nd == 0)
        return perr(P, nt, "tensor needs at least one dim");
    char lname[SB_NAME_MAX], uname[SB_NAME_MAX];
    tok_str(nt, lname, sizeof lname);
    if (unique_name(P, nt, s->prefix, lname, uname))
        return -1;
    int t = add_tensor(P, nt, uname, kind, nd, dims, -1, 0);
    if (t < 0 || scope_bind(P, s, lname, 1, t))
        return -1;
    return expect_nl(P, pos);
}

static int exec_range(parser *P, scope *s, int start, int end, int *ret, int *nret, int *returned)
{
    int pos = start;
    char d[96];
    while (pos < end) {
        token *tk = &P->t[pos];
        if (tk->kind == TK_NL) {
            pos++;
            continue;
        }
        if (tk->kind != TK_IDENT)
            return perr(P, tk, "expected a statement, found %s", tok_desc(tk, d, sizeof d));
        if (tok_is(tk, "model") || tok_is(tk, "param") || tok_is(tk, "cutoff")) {
            if (P->depth > 0 || s->prefix[0])
                return perr(P, tk, "'%.*s' is only allowed at top level", tk->len, tk->s);
            while (P->t[pos].kind != TK_NL)
                pos++;
            continue;
        }
        if (tok_is(tk, "block")) {
            if (P->depth > 0)
                return perr(P, tk, "blocks must be defined at top level");
            int e;
            if (find_end(P, pos + 1, &e))
                return -1;
            pos = e + 1;
            continue;
        }
        if (tok_is(tk, "end"))
            return perr(P, tk, "'end' without 'block' or 'repeat'");
        if (tok_is(tk, "input") || tok_is(tk, "weight")) {
            if (exec_decl(P, s, &pos, tok_is(tk, "input") ? SB_TENSOR_INPUT : SB_TENSOR_WEIGHT))
                return -1;
            continue;
        }
        if (tok_is(tk, "repeat")) {
            pos++;
            int64_t n;
            if (parse_expr(P, s, &pos, &n) || expect_nl(P, &pos))
                return -1;
            if (n < 0 || n > MAX_OPS)
                return perr(P, tk, "repeat count %lld out of range", (long long)n);
            int e;
            if (find_end(P, pos, &e))
                return -1;
            if (e > end)
                return perr(P, tk, "missing 'end' for this repeat");
            for (int64_t k = 0; k < n; k++) {
                if (exec_range(P, s, pos, e, ret, nret, returned))
                    return -1;
                if (*returned)
                    return perr(P, tk, "'return' inside 'repeat' is not allowed");
            }
            pos = e + 1;
            if (expect_nl(P, &pos))
                return -1;
            continue;
        }
        if (tok_is(tk, "return")) {
            if (P->depth == 0)
                return perr(P, tk, "'return' outside a block");
            pos++;
            *nret = 0;
            for (;;) {
                token *nt = &P->t[pos];
                char name[SB_NAME_MAX];
                if (nt->kind != TK_IDENT)
                    return perr(P, nt, "expected a tensor name after 'return', found %s", tok_desc(nt, d, sizeof d));
                tok_str(nt, name, sizeof name);
                binding *b = scope_find(s, name);
                if (!b || !b->is_tensor)
                    return perr(P, nt, "unknown tensor '%s'", name);
                if (*nret == SB_MAX_IO)
                    return perr(P, nt, "too many returned tensors");
                ret[(*nret)++] = (int)b->v;
                pos++;
                if (!tok_punct(&P->t[pos], ','))
                    break;
                pos++;
            }
            if (expect_nl(P, &pos))
                return -1;
            for (; pos < end; pos++)
                if (P->t[pos].kind != TK_NL)
                    return perr(P, &P->t[pos], "statement after 'return'");
            *returned = 1;
            return 0;
        }
        /* assignment: a, b = callee(args) */
        target tg = {.s = s};
        for (;;) {
            token *lt = &P->t[pos];
            if (lt->kind != TK_IDENT)
                return perr(P, lt, "expected a name, found %s", tok_desc(lt, d, sizeof d));
            if (tg.nlhs == SB_MAX_IO)
                return perr(P, lt, "too many names on the left");
            tg.lhs[tg.nlhs++] = lt;
            pos++;
            if (tok_punct(&P->t[pos], ',')) {
                pos++;
                continue;
            }
            break;
        }
        if (!tok_punct(&P->t[pos], '='))
            return perr(P, &P->t[pos], "expected '=' (statements look like 'y = op(x, ...)'), found %s",
                        tok_desc(&P->t[pos], d, sizeof d));
        pos++;
        if (P->t[pos].kind == TK_IDENT && P->t[pos + 1].kind == TK_NL && tg.nlhs == 1) {
            /* alias: `a = b` names an existing tensor */
            char from[SB_NAME_MAX], to[SB_NAME_MAX];
            tok_str(&P->t[pos], from, sizeof from);
            tok_str(tg.lhs[0], to, sizeof to);
            binding *b = scope_find(s, from);
            if (!b || !b->is_tensor)
                return perr(P, &P->t[pos], "unknown tensor '%s'", from);
            if (scope_bind(P, s, to, 1, b->v))
                return -1;
            pos += 2;
            continue;
        }
        if (P->t[pos].kind != TK_IDENT || !tok_punct(&P->t[pos + 1], '('))
            return perr(P, &P->t[pos], "expected an op call like 'conv(x, out=64)', found %s",
                        tok_desc(&P->t[pos], d, sizeof d));
        call c;
        if (parse_call(P, s, &pos, &c) || expect_nl(P, &pos))
            return -1;
        blockdef *bd = find_block(P, c.callee);
        if (bd) {
            if (call_block(P, s, bd, &c, &tg))
                return -1;
        } else if (exec_op(P, s, &c, &tg)) {
            return -1;
        }
    }
    return 0;
}

/* Pass 1: model name, params (in order, with settings applied), cutoff,
 * block definitions. */
static int pass1(parser *P, const sb_setting *settings, int nsettings, int *used)
{
    sb_model *m = P->m;
    int pos = 0, have_cutoff = 0;
    char d[96];
    while (P->t[pos].kind != TK_EOF) {
        token *tk = &P->t[pos];
        if (tk->kind == TK_NL) {
            pos++;
            continue;
        }
        if (tok_is(tk, "model")) {
            pos++;
            if (P->t[pos].kind != TK_IDENT)
                return perr(P, &P->t[pos], "expected a model name, found %s", tok_desc(&P->t[pos], d, sizeof d));
            tok_str(&P->t[pos], m->name, sizeof m->name);
            pos++;
            /* names like transformer-large: IDENT ('-' (IDENT|INT))* */
            while (tok_punct(&P->t[pos], '-')
                   && (P->t[pos + 1].kind == TK_IDENT || P->t[pos + 1].kind == TK_INT)
                   && strlen(m->name) + 2 + (size_t)(P->t[pos + 1].kind == TK_IDENT ? P->t[pos + 1].len : 20) < sizeof m->name) {
                char part[SB_NAME_MAX];
                if (P->t[pos + 1].kind == TK_IDENT)
                    tok_str(&P->t[pos + 1], part, sizeof part);
                else
                    snprintf(part, sizeof part, "%lld", (long long)P->t[pos + 1].ival);
                strcat(m->name, "-");
                strcat(m->name, part);
                pos += 2;
            }
            if (expect_nl(P, &pos))
                return -1;
        } else if (tok_is(tk, "param")) {
            pos++;
            token *nt = &P->t[pos];
            if (nt->kind != TK_IDENT)
                return perr(P, nt, "expected a parameter name, found %s", tok_desc(nt, d, sizeof d));
            char name[SB_NAME_MAX];
            tok_str(nt, name, sizeof name);
            if (find_param(m, name))
                return perr(P, nt, "parameter '%s' defined twice", name);
            pos++;
            if (expect_punct(P, &pos, '='))
                return -1;
            int64_t v;
            if (parse_expr(P, NULL, &pos, &v) || expect_nl(P, &pos))
                return -1;
            for (int i = 0; i < nsettings; i++)
                if (strcmp(settings[i].name, name) == 0) {
                    v = settings[i].value;
                    used[i] = 1;
                }
            if (m->nparams == P->cap_params) {
                int nc = P->cap_params ? P->cap_params * 2 : 16;
                sb_param *np = sb_realloc(m->params, (size_t)nc * sizeof *np, P->err);
                if (!np)
                    return -1;
                m->params = np;
                P->cap_params = nc;
            }
            snprintf(m->params[m->nparams].name, SB_NAME_MAX, "%s", name);
            m->params[m->nparams++].value = v;
        } else if (tok_is(tk, "cutoff")) {
            pos++;
            int64_t v;
            if (parse_expr(P, NULL, &pos, &v) || expect_nl(P, &pos))
                return -1;
            if (v < 1 || v > (1 << 30))
                return perr(P, tk, "cutoff must be a positive integer, got %lld", (long long)v);
            if (have_cutoff)
                return perr(P, tk, "cutoff given twice");
            have_cutoff = 1;
            m->cutoff = (int)v;
        } else if (tok_is(tk, "block")) {
            pos++;
            token *nt = &P->t[pos];
            if (nt->kind != TK_IDENT)
                return perr(P, nt, "expected a block name, found %s", tok_desc(nt, d, sizeof d));
            if (find_block(P, nt))
                return perr(P, nt, "block '%.*s' defined twice", nt->len, nt->s);
            blockdef *nb = sb_realloc(P->blocks, (size_t)(P->nblocks + 1) * sizeof *nb, P->err);
            if (!nb)
                return -1;
            P->blocks = nb;
            blockdef *bd = &P->blocks[P->nblocks++];
            memset(bd, 0, sizeof *bd);
            tok_str(nt, bd->name, sizeof bd->name);
            bd->header = pos;
            pos++;
            if (expect_punct(P, &pos, '('))
                return -1;
            while (!tok_punct(&P->t[pos], ')')) {
                token *ft = &P->t[pos];
                if (ft->kind != TK_IDENT)
                    return perr(P, ft, "expected an argument name, found %s", tok_desc(ft, d, sizeof d));
                if (bd->nformals == MAX_KW)
                    return perr(P, ft, "too many block arguments (at most %d)", MAX_KW);
                for (int f = 0; f < bd->nformals; f++)
                    if (bd->formal[f]->len == ft->len && !memcmp(bd->formal[f]->s, ft->s, (size_t)ft->len))
                        return perr(P, ft, "argument '%.*s' repeated", ft->len, ft->s);
                bd->formal[bd->nformals] = ft;
                bd->def_start[bd->nformals] = -1;
                pos++;
                if (tok_punct(&P->t[pos], '=')) {
                    pos++;
                    bd->def_start[bd->nformals] = pos;
                    int64_t dummy;
                    scope empty = {0};
                    /* defaults may use params and earlier arguments; checked at call */
                    while (!tok_punct(&P->t[pos], ',') && !tok_punct(&P->t[pos], ')')
                           && P->t[pos].kind != TK_EOF)
                        pos++;
                    (void)dummy;
                    (void)empty;
                }
                bd->nformals++;
                if (tok_punct(&P->t[pos], ','))
                    pos++;
                else if (!tok_punct(&P->t[pos], ')'))
                    return expect_punct(P, &pos, ')');
            }
            pos++;
            if (expect_nl(P, &pos))
                return -1;
            bd->body = pos;
            if (find_end(P, pos, &bd->end))
                return -1;
            pos = bd->end + 1;
            if (expect_nl(P, &pos))
                return -1;
        } else {
            /* skip other statements (and whole repeat bodies) in pass 1 */
            if (tok_is(tk, "repeat")) {
                while (P->t[pos].kind != TK_NL)
                    pos++;
                pos++;
                int e;
                if (find_end(P, pos, &e))
                    return -1;
                pos = e + 1;
            }
            while (P->t[pos].kind != TK_NL && P->t[pos].kind != TK_EOF)
                pos++;
        }
    }
    return 0;
}

int sb_model_parse(const char *text, size_t len, const char *path, const sb_setting *settings,
                   int nsettings, sb_model *out, sb_error *err)
{
    memset(out, 0, sizeof *out);
    parser P = {.path = path, .m = out, .err = err};
    token_list tl;
    if (sb_lex(text, len, path, &tl, err))
        return -1;
    P.t = tl.t;
    P.n = tl.n;
    snprintf(out->path, sizeof out->path, "%s", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out->name, sizeof out->name, "%.*s", (int)strcspn(base, "."), base);
    out->cutoff = 4;
    int *used = calloc((size_t)(nsettings > 0 ? nsettings : 1), sizeof *used);
    scope top = {0};
    int rc = -1;
    if (!used) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto done;
    }
    if (pass1(&P, settings, nsettings, used))
        goto done;
    for (int i = 0; i < nsettings; i++)
        if (!used[i]) {
            char known[512] = "";
            for (int j = 0; j < out->nparams; j++) {
                strncat(known, j ? ", " : "", sizeof known - strlen(known) - 1);
                strncat(known, out->params[j].name, sizeof known - strlen(known) - 1);
            }
            sb_fail(err, SB_EXIT_INPUT, "%s: unknown parameter '%s' in --set (parameters: %s)", path,
                    settings[i].name, known[0] ? known : "none");
            goto done;
        }
    int ret[SB_MAX_IO], nret = 0, returned = 0;
    if (exec_range(&P, &top, 0, P.n - 1, ret, &nret, &returned))
        goto done;
    if (out->nops == 0) {
        sb_fail(err, SB_EXIT_INPUT, "%s: the model has no ops", path);
        goto done;
    }
    rc = 0;
done:
    scope_free(&top);
    free(used);
    free(P.blocks);
    strmap_free(&P.names);
    strmap_free(&P.suffix);
    free(tl.t);
    if (rc)
        sb_model_free(out);
    return rc;
}
