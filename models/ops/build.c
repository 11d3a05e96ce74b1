/* ops/build.c: what every op builder uses (keyword arguments, iteration
 * dims, new ops and their output tensors, implicit weights). The rules
 * themselves: one file per family of ops (conv.c, dense.c, einsum.c,
 * lstm.c, norm.c, elementwise.c, join.c, reshape.c); their table and
 * op_exec: table.c. This file calls neither (op_finish is handed the rule
 * of its op), so the rules build on it one way. */
#define _GNU_SOURCE
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- keyword arguments ---------------------------------------------------- */

kwarg *kw_get(call *c, const char *key)
{
    for (int i = 0; i < c->nkw; i++)
        if (tok_is(c->kw[i].key, key))
            return &c->kw[i];
    return NULL;
}

int kw_check(parser *P, call *c, const char *op, const char *allowed)
{
    for (int i = 0; i < c->nkw; i++) {
        char k[SB_NAME_MAX + 2];
        tok_str(c->kw[i].key, k, SB_NAME_MAX);
        for (int j = 0; j < i; j++)
            if (tok_is(c->kw[j].key, k))
                return lang_err(P, c->kw[i].key, "%s: argument '%s' given twice", op, k);
        strcat(k, " ");
        char all[256];
        snprintf(all, sizeof all, "%s ", allowed);
        char *hit = strstr(all, k);
        if (!hit || (hit != all && hit[-1] != ' '))
            return lang_err(P, c->kw[i].key, "%s: unknown argument '%.*s' (expected one of: %s)", op,
                        c->kw[i].key->len, c->kw[i].key->s, allowed[0] ? allowed : "none");
    }
    return 0;
}

int kw_int(parser *P, call *c, const char *key, int64_t def, int64_t lo, int64_t *out)
{
    kwarg *kw = kw_get(c, key);
    if (!kw) {
        *out = def;
        return 0;
    }
    if (kw->is_list || kw->str || kw->nitems != 1 || !kw->items[0].has_int || kw->items[0].name)
        return lang_err(P, kw->at, "'%s' must be an integer", key);
    if (kw->items[0].i < lo)
        return lang_err(P, kw->at, "'%s' must be at least %lld, got %lld", key, (long long)lo,
                    (long long)kw->items[0].i);
    *out = kw->items[0].i;
    return 0;
}

int kw_pair(parser *P, call *c, const char *key, int64_t def, int64_t lo, int out[2])
{
    kwarg *kw = kw_get(c, key);
    if (!kw) {
        out[0] = out[1] = (int)def;
        return 0;
    }
    int n = kw->nitems;
    if (kw->str || (kw->is_list && n != 2) || n < 1)
        return lang_err(P, kw->at, "'%s' must be an integer or a pair [a, b]", key);
    for (int i = 0; i < n; i++) {
        if (!kw->items[i].has_int || kw->items[i].name)
            return lang_err(P, kw->at, "'%s' must be an integer or a pair [a, b]", key);
        if (kw->items[i].i < lo || kw->items[i].i > (1 << 20))
            return lang_err(P, kw->at, "'%s' out of range: %lld", key, (long long)kw->items[i].i);
        out[i] = (int)kw->items[i].i;
    }
    if (n == 1)
        out[1] = out[0];
    return 0;
}

int kw_name(parser *P, call *c, const char *key, const char *def, char *out)
{
    kwarg *kw = kw_get(c, key);
    if (!kw) {
        snprintf(out, SB_NAME_MAX, "%s", def);
        return 0;
    }
    if (kw->is_list || kw->str || !kw->items[0].ident)
        return lang_err(P, kw->at, "'%s' must be a name", key);
    tok_str(kw->items[0].ident, out, SB_NAME_MAX);
    return 0;
}

int kw_axis(parser *P, call *c, const char *key, const sb_tensor *t, int def, int *out)
{
    kwarg *kw = kw_get(c, key);
    if (!kw) {
        *out = def < 0 ? t->ndims + def : def;
        if (*out < 0 || *out >= t->ndims)
            return lang_err(P, c->callee, "tensor '%s' has no axis %d", t->name, def);
        return 0;
    }
    if (kw->is_list || kw->str || kw->nitems != 1)
        return lang_err(P, kw->at, "'%s' must be an axis number or a dim name", key);
    item *it = &kw->items[0];
    if (it->ident) {
        for (int i = 0; i < t->ndims; i++)
            if (tok_is(it->ident, t->dims[i].name)) {
                *out = i;
                return 0;
            }
        if (!it->has_int)
            return lang_err(P, kw->at, "tensor '%s' has no dim named '%.*s'", t->name, it->ident->len,
                        it->ident->s);
    }
    int64_t a = it->i < 0 ? t->ndims + it->i : it->i;
    if (a < 0 || a >= t->ndims)
        return lang_err(P, kw->at, "axis %lld out of range for tensor '%s' of rank %d",
                    (long long)it->i, t->name, t->ndims);
    *out = (int)a;
    return 0;
}

int op_want_tensors(parser *P, call *c, const char *op, int lo, int hi)
{
    if (c->ntens < lo || c->ntens > hi) {
        if (lo == hi)
            return lang_err(P, c->callee, "%s takes %d input tensor%s, got %d", op, lo, lo == 1 ? "" : "s",
                        c->ntens);
        return lang_err(P, c->callee, "%s takes %d to %d input tensors, got %d", op, lo, hi, c->ntens);
    }
    if (c->nint)
        return lang_err(P, c->int_at[0], "%s: unexpected positional integer argument", op);
    if (c->str && strcmp(op, "einsum") != 0)
        return lang_err(P, c->str, "%s: unexpected string argument", op);
    return 0;
}

int op_want_rank(parser *P, call *c, int k, const char *op, int rank)
{
    const sb_tensor *t = T(P, c->tens[k]);
    if (t->ndims != rank)
        return lang_err(P, c->tens_at[k], "%s needs a rank-%d input, '%s' has rank %d", op, rank,
                    t->name, t->ndims);
    return 0;
}

/* ---- ops and tensors --------------------------------------------------------- */

int op_add_tensor(parser *P, const token *at, const char *name, sb_tensor_kind kind,
                      int ndims, const sb_dim *dims, int producer, int slot)
{
    sb_model *m = P->m;
    if (m->ntensors >= MAX_TENSORS)
        return lang_err(P, at, "too many tensors (at most %d)", MAX_TENSORS);
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
            return lang_err(P, at, "tensor '%s': dim '%s' has non-positive size %lld", name,
                        dims[i].name, (long long)dims[i].size);
        if (dims[i].size > MAX_DIM_SIZE || __builtin_mul_overflow(prod, dims[i].size, &prod)
            || prod > ((int64_t)1 << 50))
            return lang_err(P, at, "tensor '%s': size too large", name);
        for (int j = 0; j < i; j++)
            if (strcmp(dims[i].name, dims[j].name) == 0)
                return lang_err(P, at, "tensor '%s': dim name '%s' used twice", name, dims[i].name);
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

sb_op *op_new(parser *P, const token *at, sb_op_kind kind, const char *name)
{
    sb_model *m = P->m;
    if (m->nops >= MAX_OPS) {
        lang_err(P, at, "too many ops (at most %d)", MAX_OPS);
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
    op->causal = -1;
    op->pos_axis = -1;
    return op;
}

int op_dim(parser *P, const token *at, sb_op *op, const char *name, int64_t size, int role)
{
    if (op->ndims == SB_MAX_DIMS)
        return lang_err(P, at, "%s: iteration space has more than %d dims", op->name, SB_MAX_DIMS);
    for (int i = 0; i < op->ndims; i++)
        if (strcmp(op->dims[i].name, name) == 0)
            return lang_err(P, at, "%s: dim name '%s' appears twice in its iteration space", op->name,
                        name);
    if (size <= 0)
        return lang_err(P, at, "%s: dim '%s' has non-positive size %lld", op->name, name,
                    (long long)size);
    if (size > MAX_DIM_SIZE)
        return lang_err(P, at, "%s: dim '%s' too large", op->name, name);
    snprintf(op->dims[op->ndims].name, SB_NAME_MAX, "%s", name);
    op->dims[op->ndims].size = size;
    op->role[op->ndims] = role;
    return op->ndims++;
}

void op_add_weight(sb_op *op, const char *suffix, int nd, const int *map, const int64_t *fixed,
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

double op_fan_in_scale(const sb_op *op)
{
    double fan = 1;
    for (int i = 0; i < op->ndims; i++)
        if (op->role[i] == SB_ROLE_K)
            fan *= (double)op->dims[i].size;
    return 1.0 / sqrt(fan > 0 ? fan : 1);
}

int op_finish(parser *P, sb_op *op, const op_rule *r, target *tg, int nout, const int *ndims,
              sb_dim dims[][SB_MAX_DIMS], int maps[][SB_MAX_DIMS])
{
    sb_model *m = P->m;
    int opi = (int)(op - m->ops);
    const token *at = tg->lhs[0];
    if (tg->nlhs != nout && !(tg->nlhs == 0))
        return lang_err(P, at, "%s gives %d output%s, but %d name%s on the left", r->names[0],
                    nout, nout == 1 ? "" : "s", tg->nlhs, tg->nlhs == 1 ? " is" : "s are");
    if (nout > SB_MAX_IO)
        return lang_err(P, at, "too many outputs (at most %d)", SB_MAX_IO);
    m->nops++; /* op becomes visible; its tensors follow */
    op = &m->ops[opi];
    op->nweights = 0;
    op->stat_dims = 0;
    if (r->weights)
        r->weights(op);
    op->nout = nout;
    for (int k = 0; k < nout; k++) {
        char tname[SB_NAME_MAX], base[SB_NAME_MAX];
        if (nout == 1) {
            snprintf(tname, sizeof tname, "%s", op->name);
        } else {
            tok_str(tg->lhs[k], base, sizeof base);
            if (lang_unique_name(P, tg->lhs[k], tg->s->prefix, base, tname))
                return -1;
        }
        int t = op_add_tensor(P, tg->lhs[k], tname, SB_TENSOR_ACTIVATION, ndims[k], dims[k], opi, k);
        if (t < 0)
            return -1;
        op = &m->ops[opi];
        set_operand(&op->out[k], t, ndims[k], maps[k]);
        char lname[SB_NAME_MAX];
        tok_str(tg->lhs[k], lname, sizeof lname);
        if (lang_bind(P, tg->s, lname, 1, t))
            return -1;
    }
    return 0;
}

void op_same_shape_space(parser *P, sb_op *op, call *c, outs *o, int nin)
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

int op_same_shapes(parser *P, call *c, const char *nm, int except_axis)
{
    const sb_tensor *a = T(P, c->tens[0]);
    for (int k = 1; k < c->ntens; k++) {
        const sb_tensor *b = T(P, c->tens[k]);
        if (b->ndims != a->ndims)
            return lang_err(P, c->tens_at[k], "%s: '%s' has rank %d but '%s' has rank %d", nm, b->name,
                        b->ndims, a->name, a->ndims);
        for (int i = 0; i < a->ndims; i++)
            if (i != except_axis && a->dims[i].size != b->dims[i].size)
                return lang_err(P, c->tens_at[k], "%s: shape mismatch in dim %d: '%s' has %lld, '%s' has %lld",
                            nm, i, b->name, (long long)b->dims[i].size, a->name,
                            (long long)a->dims[i].size);
    }
    return 0;
}
