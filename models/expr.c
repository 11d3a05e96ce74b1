/* expr.c: integer expressions (params, block arguments, + - * / %, unary -,
 * parentheses; overflow and inexact division are errors) and the arguments
 * of an op or block call (tensors, integers, keywords, lists, a string). */
#define _GNU_SOURCE
#include "lang.h"

#include <stdio.h>
#include <string.h>

/* ---- integer expressions ------------------------------------------------- */

static int parse_primary_(parser *P, scope *s, int *pos, int64_t *v);

/* nesting depth guard: deeply nested input is an error, not a stack overflow */
static int parse_primary(parser *P, scope *s, int *pos, int64_t *v)
{
    if (P->expr_depth >= 200)
        return lang_err(P, &P->t[*pos], "expression nested too deeply (more than 200 levels)");
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
        if (lang_expr(P, s, pos, v))
            return -1;
        return lang_expect_punct(P, pos, ')');
    }
    if (tok_punct(tk, '-')) {
        (*pos)++;
        if (parse_primary(P, s, pos, v))
            return -1;
        if (*v == INT64_MIN)
            return lang_err(P, tk, "integer overflow");
        *v = -*v;
        return 0;
    }
    if (tk->kind == TK_IDENT) {
        char name[SB_NAME_MAX];
        tok_str(tk, name, sizeof name);
        binding *b = s ? lang_find(s, name) : NULL;
        if (b && b->is_tensor)
            return lang_err(P, tk, "'%s' is a tensor, expected an integer", name);
        if (b) {
            *v = b->v;
        } else {
            sb_param *pr = lang_param(P, name);
            if (!pr)
                return lang_err(P, tk, "unknown parameter '%s'", name);
            *v = pr->value;
        }
        (*pos)++;
        return 0;
    }
    return lang_err(P, tk, "expected an integer expression, found %s", tok_desc(tk, d, sizeof d));
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
                return lang_err(P, op, "integer overflow");
        } else {
            if (r == 0)
                return lang_err(P, op, "division by zero");
            if (*v == INT64_MIN && r == -1)
                return lang_err(P, op, "integer overflow");
            if (op->punct == '/' && *v % r != 0)
                return lang_err(P, op, "%lld is not divisible by %lld", (long long)*v, (long long)r);
            *v = op->punct == '/' ? *v / r : *v % r;
        }
    }
}

int lang_expr(parser *P, scope *s, int *pos, int64_t *v)
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
            return lang_err(P, op, "integer overflow");
    }
}

/* ---- call arguments ------------------------------------------------------ */

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
        return lang_expr(P, s, pos, &it->i);
    }
    if (tk->kind == TK_IDENT) {
        token *nx = &P->t[*pos + 1];
        int alone = tok_punct(nx, ',') || tok_punct(nx, ')') || tok_punct(nx, ']') || nx->kind == TK_NL;
        if (alone) {
            char name[SB_NAME_MAX];
            tok_str(tk, name, sizeof name);
            binding *b = lang_find(s, name);
            sb_param *pr = lang_param(P, name);
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
    return lang_expr(P, s, pos, &it->i);
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
                return lang_err(P, &P->t[*pos], "too many list items (at most %d)", MAX_ITEMS);
            if (parse_item(P, s, pos, &kw->items[kw->nitems++]))
                return -1;
            if (tok_punct(&P->t[*pos], ','))
                (*pos)++;
            else if (!tok_punct(&P->t[*pos], ']'))
                return lang_expect_punct(P, pos, ']');
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
        binding *b = lang_find(s, name);
        if (b && b->nlist > 0) {
            kw->is_list = 1;
            kw->nitems = b->nlist;
            for (int i = 0; i < b->nlist; i++)
                kw->items[i] = (item){.has_int = 1, .i = b->list[i]};
        }
    }
    return 0;
}

int lang_call(parser *P, scope *s, int *pos, call *c)
{
    memset(c, 0, sizeof *c);
    c->callee = &P->t[*pos];
    (*pos)++;
    if (lang_expect_punct(P, pos, '('))
        return -1;
    while (!tok_punct(&P->t[*pos], ')')) {
        token *tk = &P->t[*pos];
        if (tk->kind == TK_IDENT && tok_punct(&P->t[*pos + 1], '=')) {
            if (c->nkw == MAX_KW)
                return lang_err(P, tk, "too many arguments");
            kwarg *kw = &c->kw[c->nkw++];
            memset(kw, 0, sizeof *kw);
            kw->key = tk;
            *pos += 2;
            if (parse_kwvalue(P, s, pos, kw))
                return -1;
        } else if (tk->kind == TK_STRING) {
            if (c->str)
                return lang_err(P, tk, "only one string argument is allowed");
            c->str = tk;
            (*pos)++;
        } else {
            char name[SB_NAME_MAX];
            binding *b = NULL;
            if (tk->kind == TK_IDENT) {
                tok_str(tk, name, sizeof name);
                b = lang_find(s, name);
            }
            if (c->npos == MAX_KW + SB_MAX_IO)
                return lang_err(P, tk, "too many arguments");
            if (b && b->is_tensor) {
                if (c->ntens == SB_MAX_IO)
                    return lang_err(P, tk, "too many tensor arguments (at most %d)", SB_MAX_IO);
                c->tens_at[c->ntens] = tk;
                c->tens[c->ntens++] = (int)b->v;
                c->pos_is_tensor[c->npos] = 1;
                c->pos_v[c->npos] = b->v;
                c->pos_at[c->npos++] = tk;
                (*pos)++;
            } else {
                token *nx = &P->t[*pos + 1];
                if (tk->kind == TK_IDENT && !b && !lang_param(P, name)
                    && (tok_punct(nx, ',') || tok_punct(nx, ')')))
                    return lang_err(P, tk, "unknown tensor '%s'", name);
                int64_t v;
                if (lang_expr(P, s, pos, &v))
                    return -1;
                if (c->nint == MAX_KW)
                    return lang_err(P, tk, "too many arguments");
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
            return lang_expect_punct(P, pos, ')');
    }
    (*pos)++;
    return 0;
}
