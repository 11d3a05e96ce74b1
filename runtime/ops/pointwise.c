/* pointwise.c: the pointwise family: act (a unary activation), mul (an
 * elementwise product whose b may broadcast over dims it lacks) and expand
 * (a broadcast to a larger shape), on this rank's box of the iteration
 * space (the output's shape). No communication of their own: the partial
 * gradient of a broadcast operand over split dims it lacks is summed across
 * ranks by the executor (the accumulating relayout back to its producer, or
 * the all-reduce of a weight's gradient over its replicas). */
#include "common.h"

/* An operand's data and where its gradient goes (NULL: a model input), a
 * weight's from its param. */
static void pw_operand(sb_executor *ex, opx *o, int slot, float **p, float **grad)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int pi = o->param_of_slot[slot];
    if (pi >= 0) {
        *p = ex->params[pi].w.p;
        *grad = ex->params[pi].dw.p;
        return;
    }
    *p = o->in[slot].p;
    *grad = ops_is_model_input(ex, op, slot) ? NULL : o->din[slot].p;
}

/* The local box's extents (iteration dims) and the mask of the iteration
 * dims operand `slot` has. */
static unsigned pw_geometry(const sb_executor *ex, const opx *o, int slot, int *dims)
{
    const sb_op *op = &ex->m->ops[o->idx];
    const sb_tensor *t = &ex->m->tensors[op->in[slot].tensor];
    for (int i = 0; i < op->ndims; i++)
        dims[i] = (int)ops_ext(o, i);
    unsigned has = 0;
    for (int j = 0; j < t->ndims; j++)
        if (op->in[slot].map[j] >= 0) /* always, as the rules of models/ops/pointwise.c map */
            has |= 1u << op->in[slot].map[j];
    return has;
}

static int act_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    float *x, *dx;
    pw_operand(ex, o, 0, &x, &dx);
    if (o->out[0].n)
        ex->be->pointwise->act_forward(o->out[0].p, x, (size_t)o->out[0].n, op->fn);
    return 0;
}

static int act_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    float *x, *dx;
    pw_operand(ex, o, 0, &x, &dx);
    if (o->out[0].n && dx)
        ex->be->pointwise->act_backward(dx, o->dout[0].p, x, (size_t)o->out[0].n, op->fn);
    return 0;
}

/* What mul and expand read: operand x (slot 0) and, for mul, b (slot 1),
 * their gradients, the box's extents and the dims of the smaller operand
 * (mul's b, expand's x). */
typedef struct {
    float *x, *dx, *b, *db;
    int dims[SB_MAX_DIMS];
    unsigned has;
} pw_args;

static void pw_args_get(sb_executor *ex, opx *o, int two, pw_args *g)
{
    pw_operand(ex, o, 0, &g->x, &g->dx);
    g->b = g->db = NULL;
    if (two)
        pw_operand(ex, o, 1, &g->b, &g->db);
    g->has = pw_geometry(ex, o, two ? 1 : 0, g->dims);
}

static int mul_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    pw_args g;
    pw_args_get(ex, o, 1, &g);
    if (o->out[0].n)
        ex->be->pointwise->mul_forward(o->out[0].p, g.x, g.b, op->ndims, g.dims, g.has);
    return 0;
}

/* da = dy·b; db = the sum of dy·a over the local box of the dims b lacks */
static int mul_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    pw_args g;
    pw_args_get(ex, o, 1, &g);
    if (o->out[0].n && (g.dx || g.db))
        ex->be->pointwise->mul_backward(g.dx, g.db, o->dout[0].p, g.x, g.b, op->ndims, g.dims,
                                        g.has);
    return 0;
}

static int expand_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    pw_args g;
    pw_args_get(ex, o, 0, &g);
    if (o->out[0].n)
        ex->be->pointwise->expand_forward(o->out[0].p, g.x, op->ndims, g.dims, g.has);
    return 0;
}

/* dx = the sum of dy over the local box of the new dims */
static int expand_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    pw_args g;
    pw_args_get(ex, o, 0, &g);
    if (o->out[0].n && g.dx)
        ex->be->pointwise->expand_backward(g.dx, o->dout[0].p, op->ndims, g.dims, g.has);
    return 0;
}

const sb_op_runtime sb_op_runtime_act = {
    .forward = act_forward, .backward = act_backward, .families = SB_FAM(POINTWISE)};
const sb_op_runtime sb_op_runtime_mul = {
    .forward = mul_forward, .backward = mul_backward, .families = SB_FAM(POINTWISE)};
const sb_op_runtime sb_op_runtime_expand = {
    .forward = expand_forward, .backward = expand_backward, .families = SB_FAM(POINTWISE)};
