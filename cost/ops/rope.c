/* ops/rope.c: the search stage's facts of the rotary position embedding:
 * elementwise on pairs of the head dim (never split), no communication. */
#include "../kinds.h"

/* 4 FLOP per element forward (two products, a sum, the angle's share) and
 * 4 backward (the inverse rotation). */
static double cost_rope(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    return sb_elem_cost(cp, sb_per_device_elems(op, c), 2 * 4.0, 2.0, 2.0); /* GPU: in, out */
}

/* Input and output blocks only. */
static void memory_rope(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
}

const sb_kind_search sb_search_rope = {.cost = cost_rope, .memory = memory_rope};
