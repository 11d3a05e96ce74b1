/* ops/join.c: the ops that join or part tensors along an axis: concat,
 * split, stack, unstack. The axis is never split. */
#define _GNU_SOURCE
#include "ops.h"

static int build_concat(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "concat";
    if (op_want_tensors(P, c, nm, 2, SB_MAX_IO) || kw_check(P, c, nm, "axis"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (kw_axis(P, c, "axis", x, 1 < x->ndims ? 1 : 0, &op->axis) || op_same_shapes(P, c, nm, op->axis))
        return -1;
    op_same_shape_space(P, op, c, o, c->ntens);
    int64_t total = 0;
    for (int k = 0; k < c->ntens; k++)
        total += T(P, c->tens[k])->dims[op->axis].size;
    op->dims[op->axis].size = total;
    o->dims[0][op->axis].size = total;
    op->nosplit = 1u << op->axis;
    return 0;
}

const op_rule op_rule_concat = {.names = {"concat"}, .build = build_concat};

/* split(x, n=2, axis=-1) into n equal parts, or split(x, sizes=[a, b, ...],
 * axis=-1) into parts of the given sizes (they must add up to the axis) */
static int build_split(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    int ntarget = u->nlhs > 1 ? u->nlhs : 0;
    const char *nm = "split";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "n sizes axis"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t n, size[SB_MAX_IO];
    if (kw_int(P, c, "n", ntarget ? ntarget : 2, 1, &n) || kw_axis(P, c, "axis", x, -1, &op->axis))
        return -1;
    const sb_dim *ax = &x->dims[op->axis];
    kwarg *sz = kw_get(c, "sizes");
    if (sz) {
        if (kw_get(c, "n"))
            return lang_err(P, sz->at, "split: give 'n' or 'sizes', not both");
        int64_t sum = 0;
        if (!sz->is_list || sz->str || sz->nitems < 1 || sz->nitems > SB_MAX_IO)
            return lang_err(P, sz->at, "split: 'sizes' must be a list of 1 to %d positive integers",
                            SB_MAX_IO);
        for (int k = 0; k < sz->nitems; k++) {
            if (!sz->items[k].has_int || sz->items[k].name || sz->items[k].i < 1)
                return lang_err(P, sz->at, "split: 'sizes' must be a list of positive integers");
            size[k] = sz->items[k].i;
            sum += size[k];
        }
        if (sum != ax->size)
            return lang_err(P, sz->at, "split: sizes add up to %lld, dim '%s' has size %lld",
                            (long long)sum, ax->name, (long long)ax->size);
        n = sz->nitems;
    } else {
        if (n > SB_MAX_IO)
            return lang_err(P, c->callee, "split: at most %d parts", SB_MAX_IO);
        if (ax->size % n)
            return lang_err(P, c->callee, "split: dim '%s' of size %lld is not divisible by %lld",
                            ax->name, (long long)ax->size, (long long)n);
        for (int k = 0; k < n; k++)
            size[k] = ax->size / n;
    }
    op_same_shape_space(P, op, c, o, 1);
    op->nosplit = 1u << op->axis;
    o->nout = (int)n;
    for (int k = 0; k < n; k++) {
        o->ndims[k] = x->ndims;
        memcpy(o->dims[k], x->dims, sizeof x->dims);
        o->dims[k][op->axis].size = size[k];
        identity_map(o->maps[k], x->ndims);
    }
    return 0;
}

const op_rule op_rule_split = {.names = {"split"}, .build = build_split};

static int build_stack(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "stack";
    if (op_want_tensors(P, c, nm, 1, SB_MAX_IO) || kw_check(P, c, nm, "axis dim")
        || op_same_shapes(P, c, nm, -1))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t axis;
    char dname[SB_NAME_MAX];
    if (kw_int(P, c, "axis", 0, -(x->ndims + 1), &axis) || kw_name(P, c, "dim", "stack", dname))
        return -1;
    if (axis < 0)
        axis += x->ndims + 1;
    if (axis > x->ndims)
        return lang_err(P, c->callee, "stack: axis %lld out of range", (long long)axis);
    if (x->ndims + 1 > SB_MAX_DIMS)
        return lang_err(P, c->callee, "stack: result has more than %d dims", SB_MAX_DIMS);
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

const op_rule op_rule_stack = {.names = {"stack"}, .build = build_stack};

static int build_unstack(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "unstack";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "axis"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (kw_axis(P, c, "axis", x, 0, &op->axis))
        return -1;
    if (x->ndims < 2)
        return lang_err(P, c->tens_at[0], "unstack needs rank >= 2");
    int64_t num = x->dims[op->axis].size;
    if (num > SB_MAX_IO)
        return lang_err(P, c->callee, "unstack: %lld parts, at most %d", (long long)num, SB_MAX_IO);
    op_same_shape_space(P, op, c, o, 1);
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

const op_rule op_rule_unstack = {.names = {"unstack"}, .build = build_unstack};
