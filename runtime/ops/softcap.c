/* softcap.c: Gemma 2's logit soft-capping y = cap·tanh(x/cap) on this
 * rank's box of the iteration space (x's shape). Elementwise: no
 * communication of its own under any split. */
#include "common.h"

/* x's data and where its gradient goes (NULL: a model input) */
static void softcap_operand(sb_executor *ex, opx *o, float **x, float **dx)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int pi = o->param_of_slot[0];
    if (pi >= 0) {
        *x = ex->params[pi].w.p;
        *dx = ex->params[pi].dw.p;
        return;
    }
    *x = o->in[0].p;
    *dx = ops_is_model_input(ex, op, 0) ? NULL : o->din[0].p;
}

static int softcap_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    float *x, *dx;
    softcap_operand(ex, o, &x, &dx);
    if (o->out[0].n)
        ex->be->pointwise->softcap_forward(o->out[0].p, x, (size_t)o->out[0].n, (float)op->cap);
    return 0;
}

/* dx += dy·(1 - tanh²(x/cap)) */
static int softcap_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    float *x, *dx;
    softcap_operand(ex, o, &x, &dx);
    if (o->out[0].n && dx)
        ex->be->pointwise->softcap_backward(dx, o->dout[0].p, x, (size_t)o->out[0].n,
                                            (float)op->cap);
    return 0;
}

const sb_op_runtime sb_op_runtime_softcap = {
    .forward = softcap_forward, .backward = softcap_backward, .families = SB_FAM(POINTWISE)};
