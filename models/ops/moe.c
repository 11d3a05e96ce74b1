/* ops/moe.c: the router of a mixture of experts, moe_gate (GShard-style
 * dense dispatch: the experts themselves are einsums over an `expert` dim).
 *
 *   combine, dispatch = moe_gate(logits, axis=expert, k=2, capacity=C, dim=cap, aux=0)
 *
 * logits (group, seq, expert) -> combine, dispatch (group, seq, expert, cap):
 * per group, each token's top-k experts, their softmax weights renormalised
 * over the k, and a slot in [0, C) of each chosen expert (first choices of
 * all tokens in seq order, then second choices, ...; a choice whose expert
 * is full is dropped). aux = N adds N/1000 times the load-balancing loss
 * to the training loss. Only the group dim may be split: the slots of one
 * group are assigned in sequence and top-k needs every expert. */
#define _GNU_SOURCE
#include "ops.h"

static int build_moe_gate(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    const char *nm = "moe_gate";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "axis k capacity dim aux"))
        return -1;
    if (u->nlhs != 2)
        return lang_err(P, c->callee,
                        "moe_gate gives 2 outputs (combine, dispatch), but %d name%s on the left",
                        u->nlhs, u->nlhs == 1 ? " is" : "s are");
    const sb_tensor *x = T(P, c->tens[0]);
    if (x->ndims != 3)
        return lang_err(P, c->tens_at[0],
                        "moe_gate needs logits (group, seq, expert) of rank 3, '%s' has rank %d",
                        x->name, x->ndims);
    int axis;
    if (kw_axis(P, c, "axis", x, -1, &axis))
        return -1;
    if (axis != 2)
        return lang_err(P, kw_get(c, "axis") ? kw_get(c, "axis")->at : c->callee,
                        "moe_gate: the expert axis must be the last dim of '%s' (got dim %d, '%s')",
                        x->name, axis, x->dims[axis].name);
    int64_t k, cap, aux;
    if (kw_int(P, c, "k", 2, 1, &k))
        return -1;
    if (k > x->dims[2].size)
        return lang_err(P, kw_get(c, "k")->at, "moe_gate: k = %lld is more than the %lld experts of '%s'",
                        (long long)k, (long long)x->dims[2].size, x->name);
    if (!kw_get(c, "capacity"))
        return lang_err(P, c->callee, "moe_gate: missing 'capacity' (slots per expert and group)");
    if (kw_int(P, c, "capacity", 0, 1, &cap))
        return -1;
    if (kw_int(P, c, "aux", 0, 0, &aux))
        return -1;
    if (aux > 1000000)
        return lang_err(P, kw_get(c, "aux")->at,
                        "moe_gate: aux is the loss weight in thousandths, at most 1000000, got %lld",
                        (long long)aux);
    op->moe_aux = (double)aux / 1000.0;
    char cap_name[SB_NAME_MAX];
    if (kw_name(P, c, "dim", "cap", cap_name))
        return -1;
    op->topk = (int)k;
    op->axis = 2;
    for (int i = 0; i < 3; i++)
        if (op_dim(P, c->callee, op, x->dims[i].name, x->dims[i].size, SB_ROLE_NONE) < 0)
            return -1;
    if (op_dim(P, kw_get(c, "dim") ? kw_get(c, "dim")->at : c->callee, op, cap_name, cap,
               SB_ROLE_NONE) < 0)
        return -1;
    op->nosplit = (1u << 1) | (1u << 2) | (1u << 3); /* seq, expert, cap */
    op->nin = 1;
    int map[SB_MAX_DIMS];
    identity_map(map, 4);
    set_operand(&op->in[0], c->tens[0], 3, map);
    o->nout = 2;
    for (int k2 = 0; k2 < 2; k2++) {
        o->ndims[k2] = 4;
        for (int i = 0; i < 4; i++) {
            o->dims[k2][i] = op->dims[i];
            o->maps[k2][i] = i;
        }
    }
    return 0;
}

/* The softmax over the experts is its statistics. */
static void moe_gate_weights(sb_op *op)
{
    op->stat_dims = 1u << 2;
}

const op_rule op_rule_moe_gate = {.names = {"moe_gate"}, .build = build_moe_gate, .weights = moe_gate_weights};
