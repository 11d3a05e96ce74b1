/* ops/softcap.c: the search stage's facts of softcap, y = cap·tanh(x/cap)
 * (docs/cost-model.md, "Pointwise ops"). Every config is allowed (no
 * config_ok): each element is its own, so no split needs communication. */
#include "../kinds.h"

/* e elements per device at 2 units each (a tanh forward, 1 - t² backward,
 * as act's tanh); on a GPU machine memory-bound: x read and y written, then
 * x and dy read and dx written. */
static double cost_softcap(const sb_model *m, const sb_op *op, const int *c,
                           const sb_cost_params *cp)
{
    (void)m;
    if (op->attn && cp->gpu_sms > 0) /* inside a fused attention kernel (models/gpu_run.c): a
                                        tanh per score, on chip, priced with its einsums */
        return 0.0;
    return sb_elem_cost(cp, sb_per_device_elems(op, c), 2.0, 2.0, 3.0);
}

/* x (kept for backward) and y; one y-sized buffer sums the consumers'
 * gradients, as the runtime allocates them (runtime/ops/softcap.c). */
static void memory_softcap(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    e->scratch = e->outs;
    if (op->attn) /* fused: no S x S tensor */
        e->in = e->outs = e->scratch = 0.0;
}

const sb_kind_search sb_search_softcap = {.cost = cost_softcap, .memory = memory_softcap};
