/* ops/lstm.c: the search stage's facts of the LSTM (a stack of layers run
 * over the sequence). dims: 0 layers, 1 seq, 2 batch, 3 n = units, 4 k =
 * units (the input side). */
#include "../kinds.h"

/* Per layer and step, a GEMM of [x; h] (2K) by the four gates (4N), and the
 * exchange of h from the N layout to the K layout of the next step. */
static double cost_lstm(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    double L = (double)op->dims[0].size, S = (double)op->dims[1].size;
    double B = (double)op->dims[2].size, N = (double)op->dims[3].size, K = (double)op->dims[4].size;
    /* m: seq and batch (dims 1, 2), n: the gates (3), k: the input (4) */
    sb_coll_group g[3] = {sb_op_group(cp, op, c, 3u << 1), sb_op_group(cp, op, c, 1u << 3),
                          sb_op_group(cp, op, c, 1u << 4)};
    if (cp->wgrad_free) /* g[0] reduces the gate matrices' gradient */
        g[0] = (sb_coll_group){1.0, 1.0, 1.0};
    double cost = sb_gemm_cost(cp, L / c[0], (S * B) / ((double)c[1] * c[2]), (4.0 * N) / c[3],
                               (2.0 * K) / c[4], g, 3, 1.0);
    double src[2] = {B / c[2], N / c[3]}, tgt[2] = {B / c[2], K / c[4]};
    double words = sb_area_needed(src, tgt, 2, (double)c[2] * c[3], (double)c[2] * c[4]);
    /* h moves among the ranks that differ in dims 3 and 4: an all-to-all */
    return cost + (L * S) * sb_coll_alltoall(cp, words, sb_op_group(cp, op, c, 3u << 3));
}

/* Per layer held: its input (S,B,K), gates (S,B,4N), cell and h in the N
 * layout (S,B,N each), h in the K layout (S,B,K). */
static void memory_lstm(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    double sb = sb_per_dev(op, c, 1) * sb_per_dev(op, c, 2);
    e->saved = sb_per_dev(op, c, 0) * sb * (2.0 * sb_per_dev(op, c, 4) + 6.0 * sb_per_dev(op, c, 3));
    e->scratch = e->in + (e->weights > e->wmax ? e->weights : e->wmax) + 2.0 * e->outs;
}

const sb_kind_search sb_search_lstm = {.cost = cost_lstm, .memory = memory_lstm};
