/* ops/reshape.c: the ops that change a tensor's layout: flatten, reshape
 * (flatten then unflatten, or unflatten of a 1-D tensor), transpose. */
#define _GNU_SOURCE
#include "ops.h"

static int build_flatten(parser *P, sb_op *op, call *c, outs *o, const char *dname)
{
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t prod = 1;
    op_same_shape_space(P, op, c, o, 1);
    for (int i = 0; i < x->ndims; i++)
        prod *= x->dims[i].size;
    op->kind = SB_OP_FLATTEN;
    o->ndims[0] = 1;
    snprintf(o->dims[0][0].name, SB_NAME_MAX, "%s", dname);
    o->dims[0][0].size = prod;
    o->maps[0][0] = SB_MAP_ALL;
    return 0;
}

static int build_flatten_op(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    char dn[SB_NAME_MAX];
    return op_want_tensors(P, c, "flatten", 1, 1) || kw_check(P, c, "flatten", "dim")
                   || kw_name(P, c, "dim", "flat", dn) || build_flatten(P, op, c, o, dn)
               ? -1
               : 0;
}

const op_rule op_rule_flatten = {.names = {"flatten"}, .build = build_flatten_op};

static int parse_shape(parser *P, kwarg *kw, const char *nm, int *n, sb_dim *d)
{
    if (!kw->is_list || kw->nitems < 1 || kw->nitems > SB_MAX_DIMS)
        return lang_err(P, kw->at, "%s: shape must be a list [name=size, ...] of 1 to %d dims", nm,
                    SB_MAX_DIMS);
    for (int i = 0; i < kw->nitems; i++) {
        if (!kw->items[i].name)
            return lang_err(P, kw->at, "%s: each dim of the shape needs a name: [name=size, ...]", nm);
        tok_str(kw->items[i].name, d[i].name, SB_NAME_MAX);
        d[i].size = kw->items[i].i;
        if (d[i].size == -1)
            continue; /* inferred from the input's element count */
        if (d[i].size <= 0)
            return lang_err(P, kw->at, "%s: dim '%s' has non-positive size %lld", nm, d[i].name,
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
                return lang_err(P, c->callee, "reshape: at most one dim may be -1 (inferred)");
            infer = i;
            continue;
        }
        if (__builtin_mul_overflow(prod, d[i].size, &prod))
            return lang_err(P, c->callee, "reshape: shape too large");
    }
    if (infer >= 0 && x->ndims == 1) {
        if (x->dims[0].size % prod)
            return lang_err(P, c->callee, "reshape: %lld elements of '%s' do not divide into the shape",
                        (long long)x->dims[0].size, x->name);
        dd[infer].size = x->dims[0].size / prod;
        prod = x->dims[0].size;
    }
    if (x->ndims != 1 || x->dims[0].size != prod)
        return lang_err(P, c->callee, "reshape: '%s' has %lld elements but the shape has %lld", x->name,
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

/* The unflatten of `reshape`, its shape checked by exec_reshape. */
static int build_reshape(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    int nd = 0;
    sb_dim d[SB_MAX_DIMS];
    if (parse_shape(P, kw_get(c, "shape"), "reshape", &nd, d))
        return -1;
    return build_unflatten(P, op, c, o, nd, d);
}

/* reshape of a multi-dim tensor: flatten, then unflatten (two ops) */
static int exec_reshape(parser *P, scope *s, call *c, target *tg)
{
    char name[SB_NAME_MAX], lhs[SB_NAME_MAX];
    tok_str(tg->lhs[0], lhs, sizeof lhs);
    if (op_want_tensors(P, c, "reshape", 1, 1) || kw_check(P, c, "reshape", "shape"))
        return -1;
    kwarg *kw = kw_get(c, "shape");
    if (!kw)
        return lang_err(P, c->callee, "reshape: missing shape=[name=size, ...]");
    int nd = 0;
    sb_dim d[SB_MAX_DIMS];
    if (parse_shape(P, kw, "reshape", &nd, d))
        return -1;
    if (T(P, c->tens[0])->ndims > 1) {
        char fl[SB_NAME_MAX + 8];
        snprintf(fl, sizeof fl, "%s/flatten", lhs);
        if (lang_unique_name(P, tg->lhs[0], s->prefix, fl, name))
            return -1;
        sb_op *op = op_new(P, c->callee, SB_OP_FLATTEN, name);
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
        int rc = op_finish(P, op, &op_rule_flatten, &t1, 1, o.ndims, o.dims, o.maps);
        int flat = rc ? -1 : (int)tmp.b[0].v;
        lang_scope_free(&tmp);
        if (rc)
            return -1;
        c->tens[0] = flat;
    }
    if (lang_unique_name(P, tg->lhs[0], s->prefix, lhs, name))
        return -1;
    sb_op *op = op_new(P, c->callee, SB_OP_UNFLATTEN, name);
    outs o;
    memset(&o, 0, sizeof o);
    op_use u = {.word = "reshape", .nlhs = tg->nlhs};
    if (!op || build_reshape(P, op, c, &o, &u))
        return -1;
    return op_finish(P, op, &op_rule_unflatten, tg, 1, o.ndims, o.dims, o.maps);
}

const op_rule op_rule_unflatten = {.names = {"reshape"}, .build = build_reshape, .exec = exec_reshape};

static int build_transpose(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "transpose";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "perm"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    kwarg *kw = kw_get(c, "perm");
    if (!kw || !kw->is_list || kw->nitems != x->ndims)
        return lang_err(P, kw ? kw->at : c->callee, "transpose: needs perm=[...] with %d entries", x->ndims);
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
            return lang_err(P, kw->at, "transpose: perm must be a permutation of 0..%d (or dim names)",
                        x->ndims - 1);
        seen |= 1u << a;
        op->perm[j] = a;
    }
    op_same_shape_space(P, op, c, o, 1);
    for (int j = 0; j < x->ndims; j++) {
        o->dims[0][j] = x->dims[op->perm[j]];
        o->maps[0][j] = op->perm[j];
    }
    return 0;
}

const op_rule op_rule_transpose = {.names = {"transpose"}, .build = build_transpose};
