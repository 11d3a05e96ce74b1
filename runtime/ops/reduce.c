/* reduce.c: reduce-mean over any axes. Each rank sums its box and divides
 * by the global count; the partial means are all-reduced over acomm, the
 * ranks that split the reduced axes. */
#include "common.h"

/* elements averaged by a reduce-mean: the global sizes of its reduced axes */
static long reduced_count(const sb_op *op)
{
    long count = 1;
    for (int i = 0; i < op->ndims; i++)
        if (op->axes & (1u << i))
            count *= (long)op->dims[i].size;
    return count;
}

static int reduce_mean_setup_groups(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    return exec_make_group(ex, o, op->axes, &o->acomm, err);
}

static int reduce_mean_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int dims[SB_MAX_DIMS];
    ops_box_dims(&o->in[0].box, dims);
    ex->be->sum->reduce_mean_forward(o->out[0].p, o->in[0].p, op->ndims, dims, op->axes,
                                     reduced_count(op));
    return exec_allreduce(ex, o, o->out[0].p, (size_t)o->out[0].n, MPI_SUM, o->acomm, err);
}

static int reduce_mean_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    int dims[SB_MAX_DIMS];
    ops_box_dims(&o->in[0].box, dims);
    ex->be->sum->reduce_mean_backward(o->din[0].p, o->dout[0].p, op->ndims, dims, op->axes,
                                      reduced_count(op));
    return 0;
}

const sb_op_runtime sb_op_runtime_reduce_mean = {.setup_groups = reduce_mean_setup_groups,
                                                 .forward = reduce_mean_forward,
                                                 .backward = reduce_mean_backward,
                                                 .families = SB_FAM(SUM)};
