/* ops/pool.c: the search stage's facts of pooling (max or average over a
 * kernel window). dims: 0 batch, 1 channels, 2 h, 3 w (of the output). */
#include "../kinds.h"

/* One pass over the output, plus the halo rows and columns a split h or w
 * needs from its neighbours. */
static double cost_pool(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    double cost = sb_per_device_elems(op, c) * cp->elem_ratio;
    const sb_tensor *in = &m->tensors[op->in[0].tensor];
    double b = (double)in->dims[0].size / c[0], ch = (double)in->dims[1].size / c[1];
    double h = (double)in->dims[2].size / c[2], w = (double)in->dims[3].size / c[3];
    double hg = h + (c[2] > 1 ? op->kernel[0] : 0), wg = w + (c[3] > 1 ? op->kernel[1] : 0);
    double ghost = hg * wg - h * w;
    ghost *= b;
    ghost *= ch;
    return cost + sb_op_exchange(cp, op, c, 3u << 2, ghost); /* neighbours along h, w */
}

/* Input block with its halo: a split spatial dim reads (rows - 1) * stride
 * + kernel input rows, at most the whole dim. */
static double pool_input_elems(const sb_model *m, const sb_op *op, const int *c)
{
    const sb_tensor *t = &m->tensors[op->in[0].tensor];
    double e = (double)t->dims[0].size / c[0] * ((double)t->dims[1].size / c[1]);
    for (int a = 0; a < 2; a++) {
        double full = (double)t->dims[2 + a].size;
        double rows = full;
        if (c[2 + a] > 1) {
            rows = ((double)op->dims[2 + a].size / c[2 + a] - 1.0) * op->stride[a] + op->kernel[a];
            if (rows > full)
                rows = full;
        }
        e *= rows;
    }
    return e;
}

static void memory_pool(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    e->in = 0.0 + pool_input_elems(m, op, c); /* pool has one input */
    e->scratch = e->outs;
}

const sb_kind_search sb_search_pool = {.cost = cost_pool, .memory = memory_pool};
