/* ops/elementwise.c: the search stage's facts of elementwise ops (add and
 * the like, with `pw` fused pointwise ops) and of reduce_mean. */
#include "../kinds.h"

static double cost_elementwise(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    if (op->attn && cp->gpu_sms > 0) /* the sum of two scores inside a fused attention kernel
                                        (models/gpu_run.c): on chip */
        return 0.0;
    /* GPU: read two, write one forward; the gradient read, two written (one aliased) */
    return sb_elem_cost(cp, sb_per_device_elems(op, c), 1.0 + op->pw, 3.0, 2.0);
}

/* An all-reduce of the per-device block over the splits of the reduced
 * dims. */
static double cost_reduce_mean(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    return sb_coll_allreduce(cp, sb_per_device_elems(op, c), sb_op_group(cp, op, c, op->axes));
}

/* Inputs and outputs; one output-sized buffer sums the consumers' gradients. */
static void memory_elementwise(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    e->scratch = e->outs;
    if (op->attn) /* fused: no S x S tensor */
        e->in = e->outs = e->scratch = 0.0;
}

const sb_kind_search sb_search_elementwise = {.cost = cost_elementwise, .memory = memory_elementwise};
const sb_kind_search sb_search_reduce_mean = {.cost = cost_reduce_mean, .memory = memory_elementwise};
