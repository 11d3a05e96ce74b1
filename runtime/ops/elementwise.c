/* elementwise.c: the elementwise kind (a sum of its inputs, `pw` the fused
 * relu), on identical boxes of every operand: no communication. */
#include "common.h"

static int elementwise_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    const float *ins[SB_MAX_IO];
    for (int k = 0; k < op->nin; k++)
        ins[k] = o->in[k].p;
    if (o->out[0].n)
        ex->be->sum->add_forward(o->out[0].p, ins, op->nin, (size_t)o->out[0].n, op->pw > 0);
    return 0;
}

static int elementwise_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    float *d[SB_MAX_IO];
    for (int k = 0; k < op->nin; k++)
        d[k] = ops_is_model_input(ex, op, k) ? NULL : o->din[k].p;
    if (o->out[0].n)
        ex->be->sum->add_backward(d, o->dout[0].p, op->pw > 0 ? o->out[0].p : NULL, op->nin,
                                  (size_t)o->out[0].n);
    return 0;
}

const sb_op_runtime sb_op_runtime_elementwise = {
    .forward = elementwise_forward, .backward = elementwise_backward, .families = SB_FAM(SUM)};
