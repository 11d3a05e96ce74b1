/* rope.c: the rotary position embedding on this rank's box: the head dim
 * is whole (never split), the positions are global (the box's offset along
 * the seq dim plus the local index). No communication. */
#include "common.h"

static int rope_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims, d = op->axis, s = op->pos_axis;
    if (o->in[0].n)
        ex->be->rope->rope_forward(o->out[0].p, o->in[0].p, o->in[0].n, (int)ops_ext(o, d),
                                   ops_stride(o, nd, d), (int)ops_ext(o, s), ops_stride(o, nd, s),
                                   o->lo[s], op->theta);
    return 0;
}

static int rope_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims, d = op->axis, s = op->pos_axis;
    if (o->in[0].n && !ops_is_model_input(ex, op, 0))
        ex->be->rope->rope_backward(o->din[0].p, o->dout[0].p, o->in[0].n, (int)ops_ext(o, d),
                                    ops_stride(o, nd, d), (int)ops_ext(o, s), ops_stride(o, nd, s),
                                    o->lo[s], op->theta);
    return 0;
}

const sb_op_runtime sb_op_runtime_rope = {
    .forward = rope_forward, .backward = rope_backward, .families = SB_FAM(ROPE)};
