/* ops/pointwise.c: the search stage's facts of the pointwise family: act,
 * mul and expand (docs/cost-model.md, "Pointwise ops"). Every config is
 * allowed (no config_ok). */
#include "../kinds.h"

/* Elementwise units of an act element, forward and backward together: 1
 * for the piecewise-linear relu and relu6, 2 for the functions that call
 * exp, erf or tanh. */
static double act_units(int fn)
{
    return fn == SB_ACT_RELU || fn == SB_ACT_RELU6 ? 1.0 : 2.0;
}

/* act: e elements per device, act_units(fn) each; no communication. */
static double cost_act(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    /* GPU: x read, y written; x and dy read, dx written */
    return sb_elem_cost(cp, sb_per_device_elems(op, c), act_units(op->fn), 2.0, 3.0);
}

/* The iteration dims that operand o lacks: its partial gradients are
 * summed over the ranks that differ in them. */
static uint32_t missing_dims(const sb_op *op, const sb_operand *o, int ndims)
{
    uint32_t has = 0;
    for (int j = 0; j < ndims; j++)
        if (o->map[j] >= 0)
            has |= 1u << o->map[j];
    uint32_t all = op->ndims >= 32 ? ~0u : (1u << op->ndims) - 1u;
    return all & ~has;
}

/* The all-reduce of a broadcast operand's gradient (slot k) over the ranks
 * that split the dims it lacks; 0 when none does. */
static double broadcast_grad_cost(const sb_model *m, const sb_op *op, int k, const int *c,
                                  const sb_cost_params *cp)
{
    const sb_operand *o = &op->in[k];
    if (cp->wgrad_free && m->tensors[o->tensor].kind == SB_TENSOR_WEIGHT)
        return 0.0; /* a trained bias's gradient reduction */
    sb_coll_group g = sb_op_group(cp, op, c, missing_dims(op, o, m->tensors[o->tensor].ndims));
    return g.q > 1.0 ? sb_coll_allreduce(cp, sb_operand_elems(m, op, o, c), g) : 0.0;
}

/* mul: forward y = a·b and backward da = dy·b, db = Σ dy·a: 2 units per
 * element, plus b's gradient all-reduce when b broadcasts over split dims. */
static double cost_mul(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    /* GPU: a, b read, y written; dy, a, b read, da, db written */
    return sb_elem_cost(cp, sb_per_device_elems(op, c), 2.0, 3.0, 5.0)
           + broadcast_grad_cost(m, op, 1, c, cp);
}

/* expand: forward copy and backward sum, 1 unit per output element, plus
 * x's gradient all-reduce over the ranks that split the new dims. */
static double cost_expand(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    return sb_elem_cost(cp, sb_per_device_elems(op, c), 1.0, 2.0, 2.0)
           + broadcast_grad_cost(m, op, 0, c, cp);
}

/* Inputs (kept for backward: act's x, mul's a and b) and outputs; one
 * output-sized buffer sums the consumers' gradients. */
static void memory_pointwise(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    e->scratch = e->outs;
}

const sb_kind_search sb_search_act = {.cost = cost_act, .memory = memory_pointwise};
const sb_kind_search sb_search_mul = {.cost = cost_mul, .memory = memory_pointwise};
const sb_kind_search sb_search_expand = {.cost = cost_expand, .memory = memory_pointwise};
