/* ops/softmax.c: the search stage's facts of softmax over `axis` and of the
 * loss softmax_xent (softmax and cross-entropy over the last dim, the
 * classes). */
#include "../kinds.h"

/* Rows of the op other than `axis`, per device. */
static double rows_but(const sb_op *op, const int *c, int axis)
{
    double r = 1.0;
    for (int i = 0; i < op->ndims; i++)
        if (i != axis)
            r *= sb_per_dev(op, c, i);
    return r;
}

/* A causal softmax costs the same: the masked elements (about half) are
 * still computed, masked first and exponentiated to 0. */
static double cost_softmax(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    int a = op->axis;
    double e = sb_per_device_elems(op, c);
    double rows = 1.0;
    for (int i = 0; i < op->ndims; i++)
        if (i != a)
            rows *= (double)op->dims[i].size / c[i];
    double cost = 0.0;
    if (op->attn && cp->gpu_sms > 0) {
        /* inside a fused attention kernel (priced at its einsums): only the
         * collectives of a split key axis, below */
    } else if (cp->gpu_sms > 0) { /* GPU: memory-bound, x read, y written; y and dy read, dx written */
        cost += sb_elem_cost(cp, e, 0.0, 2.0, 3.0);
    } else {
        cost += (3.0 + 1) * e * cp->elem_ratio;
        cost += e * (double)op->dims[a].size * cp->elem_ratio;
    }
    sb_coll_group g = sb_op_group(cp, op, c, 1u << a);
    cost += sb_coll_allreduce(cp, rows, g);
    cost += sb_coll_allreduce(cp, rows * (double)op->dims[a].size, g);
    cost += sb_coll_allreduce(cp, rows, g);
    return cost;
}

static double cost_softmax_xent(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    int last = op->ndims - 1;
    double e = sb_per_device_elems(op, c);
    double batch = 1.0;
    for (int i = 0; i < last; i++)
        batch *= (double)op->dims[i].size / c[i];
    double cost;
    if (cp->gpu_sms > 0) { /* GPU: Megatron-LM's vocab-parallel cross-entropy's passes, as
                              --algo megatron prices them (search/megatron.c, sb_mt_ends_of):
                              32 bytes forward, 8 backward, and a cast to fp32 and back
                              (the word and 4 bytes each way) below 4-byte words */
        double wb = cp->word_bytes, cast = wb < 4.0 ? (wb + 4.0) / wb : 0.0;
        cost = sb_elem_cost(cp, e, 0.0, 32.0 / wb + cast, 8.0 / wb + cast);
    } else
        cost = (3.0 + 1) * e * cp->elem_ratio + batch * cp->elem_ratio + batch * cp->elem_ratio;
    if (c[last] > 1)
        cost += sb_op_exchange(cp, op, c, 1u << last, 2.0 * batch);
    return cost;
}

/* Scratch: an output's worth, and under a causal mask the masked copy of
 * the input. */
static void memory_softmax(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    e->scratch = e->outs + (op->causal >= 0 ? e->outs : 0.0);
    if (op->attn) { /* fused (models/attention.c): no S x S tensor, a row's log-sum-exp kept */
        e->in = e->outs = e->scratch = 0.0;
        e->saved = rows_but(op, c, op->axis);
    }
}

/* The loss keeps no output tensor; it saves labels, row max and row sum. */
static void memory_softmax_xent(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    e->outs = 0.0;
    e->saved = 3.0 * rows_but(op, c, op->ndims - 1);
    e->scratch = e->outs;
}

const sb_kind_search sb_search_softmax = {.cost = cost_softmax, .memory = memory_softmax};
const sb_kind_search sb_search_softmax_xent = {.cost = cost_softmax_xent, .memory = memory_softmax_xent};
