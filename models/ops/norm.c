/* ops/norm.c: the ops that reduce over some dims: norm and batchnorm,
 * rmsnorm, softmax (optionally causal), softmax_xent, reduce_mean. Each
 * says which dims its statistics cover (sb_op.stat_dims). */
#define _GNU_SOURCE
#include "ops.h"

static int build_norm(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    int batch = strcmp(u->word, "batchnorm") == 0;
    const char *nm = batch ? "batchnorm" : "norm";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, batch ? "" : "axis"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (x->ndims < 2)
        return lang_err(P, c->tens_at[0], "%s needs an input of rank >= 2, '%s' has rank %d", nm,
                    x->name, x->ndims);
    if (batch) {
        op->axis = 0;
        op->batchnorm = 1;
    }
    else if (kw_axis(P, c, "axis", x, -1, &op->axis))
        return -1;
    op_same_shape_space(P, op, c, o, 1);
    return 0;
}

/* Scale and shift along the normalized axis (channels for batchnorm). */
static void norm_weights(sb_op *op)
{
    const int64_t none[SB_MAX_DIMS] = {0};
    int nd = op->ndims;
    int a = op->batchnorm ? 1 : op->axis;
    int map[1] = {a};
    op_add_weight(op, ".gamma", 1, map, none, 0.1, 1.0);
    op_add_weight(op, ".beta", 1, map, none, 0.1, 0.0);
    op->stat_dims = op->batchnorm ? ((1u << nd) - 1) & ~(1u << 1) : 1u << op->axis;
}

const op_rule op_rule_norm = {.names = {"norm", "batchnorm"}, .build = build_norm, .weights = norm_weights};

/* y = rmsnorm(x, axis=DIM): x / sqrt(mean over axis of x^2 + 1e-5) * gamma. */
static int build_rmsnorm(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    if (op_want_tensors(P, c, "rmsnorm", 1, 1) || kw_check(P, c, "rmsnorm", "axis"))
        return -1;
    if (kw_axis(P, c, "axis", T(P, c->tens[0]), -1, &op->axis))
        return -1;
    op_same_shape_space(P, op, c, o, 1);
    return 0;
}

/* One scale along the axis, initialised to 1 (Llama's). */
static void rmsnorm_weights(sb_op *op)
{
    const int64_t none[SB_MAX_DIMS] = {0};
    int map[1] = {op->axis};
    op_add_weight(op, ".gamma", 1, map, none, 0.0, 1.0);
    op->stat_dims = 1u << op->axis;
}

const op_rule op_rule_rmsnorm = {.names = {"rmsnorm"}, .build = build_rmsnorm, .weights = rmsnorm_weights};

static int build_softmax(parser *P, sb_op *op, call *c, outs *o, int xent)
{
    const char *nm = xent ? "softmax_xent" : "softmax";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, xent ? "" : "axis causal window"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (xent && x->ndims < 2)
        return lang_err(P, c->tens_at[0], "softmax_xent needs (batch..., classes), '%s' has rank %d",
                    x->name, x->ndims);
    if (kw_axis(P, c, "axis", x, xent ? -1 : 1 < x->ndims ? 1 : 0, &op->axis))
        return -1;
    kwarg *ck = kw_get(c, "causal");
    if (ck) {
        if (kw_axis(P, c, "causal", x, 0, &op->causal))
            return -1;
        if (op->causal == op->axis)
            return lang_err(P, ck->at, "softmax: causal=%s is the softmax axis itself; it names "
                            "the query dim (seq) beside the axis (mem)", x->dims[op->axis].name);
    }
    kwarg *wk = xent ? NULL : kw_get(c, "window");
    if (wk && !ck)
        return lang_err(P, wk->at, "softmax: window= needs causal=");
    if (wk && kw_int(P, c, "window", 0, 0, &op->window))
        return -1;
    op_same_shape_space(P, op, c, o, 1);
    return 0;
}

static int build_softmax_op(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    return build_softmax(P, op, c, o, 0);
}

static void softmax_weights(sb_op *op)
{
    op->stat_dims = 1u << op->axis;
}

const op_rule op_rule_softmax = {.names = {"softmax"}, .build = build_softmax_op, .weights = softmax_weights};

static int build_softmax_xent(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    return build_softmax(P, op, c, o, 1);
}

/* The loss reduces over the classes, the last dim. */
static void softmax_xent_weights(sb_op *op)
{
    op->stat_dims = 1u << (op->ndims - 1);
}

const op_rule op_rule_softmax_xent = {.names = {"softmax_xent"}, .build = build_softmax_xent, .weights = softmax_xent_weights};

static int build_reduce_mean(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "reduce_mean";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "axes keepdims"))
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
                return lang_err(P, kw->at, "reduce_mean: axes must be numbers or dim names");
            if (it->ident) {
                for (int j = 0; j < x->ndims; j++)
                    if (tok_is(it->ident, x->dims[j].name))
                        a = j;
                if (a < 0 && !it->has_int)
                    return lang_err(P, kw->at, "reduce_mean: '%s' has no dim '%.*s'", x->name,
                                it->ident->len, it->ident->s);
            }
            if (a < 0) {
                int64_t v = it->i < 0 ? it->i + x->ndims : it->i;
                if (v < 0 || v >= x->ndims)
                    return lang_err(P, kw->at, "reduce_mean: axis %lld out of range", (long long)it->i);
                a = (int)v;
            }
            if (mask & (1u << a))
                return lang_err(P, kw->at, "reduce_mean: axis %d given twice", a);
            mask |= 1u << a;
        }
    }
    op->axes = mask;
    op_same_shape_space(P, op, c, o, 1);
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

static void reduce_mean_weights(sb_op *op)
{
    op->stat_dims = op->axes;
}

const op_rule op_rule_reduce_mean = {.names = {"reduce_mean"}, .build = build_reduce_mean, .weights = reduce_mean_weights};
