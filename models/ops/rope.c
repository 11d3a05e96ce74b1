/* ops/rope.c: the rotary position embedding of Llama, `y = rope(x,
 * seq=DIM, dim=DIM, theta=N)`: for head-dim size D, element i of the head
 * dim pairs with i + D/2 ("rotate half") and both turn by the angle
 * pos * theta^(-2i/D), pos the global index along seq. The iteration space
 * is x's shape; the head dim is never split (a rotation needs both halves). */
#define _GNU_SOURCE
#include "ops.h"

static int build_rope(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    if (op_want_tensors(P, c, "rope", 1, 1) || kw_check(P, c, "rope", "seq dim theta"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (x->ndims < 2)
        return lang_err(P, c->tens_at[0], "rope needs an input with a seq and a head dim, '%s' has rank %d",
                        x->name, x->ndims);
    if (!kw_get(c, "seq"))
        return lang_err(P, c->callee, "rope needs seq=DIM, the dim of the positions");
    int seq, dim;
    int64_t theta;
    if (kw_axis(P, c, "seq", x, 0, &seq) || kw_axis(P, c, "dim", x, -1, &dim)
        || kw_int(P, c, "theta", 10000, 2, &theta))
        return -1;
    const token *at = kw_get(c, "dim") ? kw_get(c, "dim")->at : c->callee;
    if (seq == dim)
        return lang_err(P, at, "rope: seq and dim are the same dim '%s'", x->dims[dim].name);
    if (x->dims[dim].size % 2)
        return lang_err(P, at, "rope: the head dim '%s' of '%s' has odd size %lld (pairs i, i+D/2 "
                        "need an even size)", x->dims[dim].name, x->name,
                        (long long)x->dims[dim].size);
    op->axis = dim;
    op->pos_axis = seq;
    op->theta = (double)theta;
    op_same_shape_space(P, op, c, o, 1);
    op->nosplit |= 1u << dim;
    return 0;
}

const op_rule op_rule_rope = {.names = {"rope"}, .build = build_rope};
