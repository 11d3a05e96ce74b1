/* ops/move.c: the search stage's facts of the ops that only move data:
 * concat, split, stack, unstack, flatten, unflatten (reshape), transpose.
 * Their vertex cost is 0 in the reference model: what they move is priced
 * on the edges, as relayouts between their operands' layouts. */
#include "../kinds.h"

static double cost_move(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m, (void)op, (void)c, (void)cp;
    return 0.0;
}

/* Inputs and outputs; one output-sized buffer sums the consumers' gradients. */
static void memory_move(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    e->scratch = e->outs;
}

/* Flatten and reshape split a prefix of their dims only: leading dims fully
 * split, then at most one partly split dim, then unsplit ones. */
static int contiguous(const sb_op *op, const int *c)
{
    int i = 0;
    while (i < op->ndims && op->dims[i].size == c[i])
        i++;
    for (i++; i < op->ndims; i++)
        if (c[i] != 1)
            return 0;
    return 1;
}

const sb_kind_search sb_search_concat = {.cost = cost_move, .memory = memory_move};
const sb_kind_search sb_search_split = {.cost = cost_move, .memory = memory_move};
const sb_kind_search sb_search_stack = {.cost = cost_move, .memory = memory_move};
const sb_kind_search sb_search_unstack = {.cost = cost_move, .memory = memory_move};
const sb_kind_search sb_search_flatten = {.cost = cost_move, .memory = memory_move, .config_ok = contiguous};
const sb_kind_search sb_search_unflatten = {.cost = cost_move, .memory = memory_move, .config_ok = contiguous};
const sb_kind_search sb_search_transpose = {.cost = cost_move, .memory = memory_move};
