/* softmax.c: softmax over any axis (causal: masked first, from the
 * box's global offsets along the axis and the query dim), and the loss
 * (softmax cross-entropy over the last axis, labels from inputs.c). Max,
 * sum of exponentials and the picked logit are all-reduced over acomm,
 * the ranks that split the axis; the loss is the mean over all rows. */
#include <stdlib.h>

#include "common.h"

static int softmax_setup_groups(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    return exec_make_group(ex, o, 1u << op->axis, &o->acomm, err);
}

static int xent_setup_groups(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    return exec_make_group(ex, o, 1u << (op->ndims - 1), &o->acomm, err);
}

static void outer_inner(const opx *o, int nd, int a, int *outer, int *A, int *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < a; i++)
        *outer *= (int)ops_ext(o, i);
    for (int i = a + 1; i < nd; i++)
        *inner *= (int)ops_ext(o, i);
    *A = (int)ops_ext(o, a);
}

/* The causal mask into buf: the key index is the axis's, the query index
 * the causal dim's, both global (the box's lo plus the local index); with
 * a window, keys `window` or more before the query too. */
static int masked_logits(sb_executor *ex, opx *o, const sb_op *op, tbuf *buf, sb_error *err)
{
    int nd = op->ndims, a = op->axis, q = op->causal;
    if (exec_tb_alloc_n(ex, buf, o->in[0].n, err))
        return -1;
    ex->be->softmax->causal_mask(buf->p, o->in[0].p, o->in[0].n, ops_stride(o, nd, a),
                                 (int)ops_ext(o, a), o->lo[a], ops_stride(o, nd, q),
                                 (int)ops_ext(o, q), o->lo[q], op->window);
    return 0;
}

static int softmax_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int outer, A, inner;
    outer_inner(o, op->ndims, op->axis, &outer, &A, &inner);
    tbuf mx = {0}, se = {0}, xm = {0};
    const float *x = o->in[0].p;
    int64_t rows = (int64_t)outer * inner;
    if (op->causal >= 0 && o->in[0].n) {
        if (masked_logits(ex, o, op, &xm, err))
            return -1;
        x = xm.p;
    }
    if (exec_tb_alloc_n(ex, &mx, rows, err) || exec_tb_alloc_n(ex, &se, rows, err))
        return -1;
    ex->be->softmax->softmax_partial_max(mx.p, x, outer, A, inner);
    if (exec_allreduce(ex, o, mx.p, (size_t)rows, MPI_MAX, o->acomm, err))
        return -1;
    ex->be->softmax->softmax_partial_sumexp(se.p, x, mx.p, outer, A, inner);
    if (exec_allreduce(ex, o, se.p, (size_t)rows, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->softmax->softmax_apply(o->out[0].p, x, mx.p, se.p, outer, A, inner);
    exec_tb_free(ex, &mx);
    exec_tb_free(ex, &se);
    exec_tb_free(ex, &xm);
    return 0;
}

static int softmax_backward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int outer, A, inner;
    outer_inner(o, op->ndims, op->axis, &outer, &A, &inner);
    tbuf dot = {0};
    int64_t rows = (int64_t)outer * inner;
    if (exec_tb_alloc_n(ex, &dot, rows, err))
        return -1;
    ex->be->softmax->softmax_backward_dot(dot.p, o->dout[0].p, o->out[0].p, outer, A, inner);
    if (exec_allreduce(ex, o, dot.p, (size_t)rows, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->softmax->softmax_backward_apply(o->din[0].p, o->dout[0].p, o->out[0].p, dot.p, outer, A,
                                            inner);
    exec_tb_free(ex, &dot);
    return 0;
}

static int xent_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->full->ops[o->idx]; /* the global batch's rows (micro-batches) */
    int nd = op->ndims, M = 1, V = (int)ops_ext(o, nd - 1), v0 = (int)o->lo[nd - 1];
    double total_rows = 1;
    for (int i = 0; i < nd - 1; i++) {
        M *= (int)ops_ext(o, i);
        total_rows *= (double)op->dims[i].size;
    }
    o->loss_rows = total_rows;
    if (exec_gen_labels(ex, o, err))
        return -1;
    const int32_t *lab = (const int32_t *)o->ids.p;
    tbuf pk = {0}, loss = {0};
    /* save[0] = mx, save[1] = se */
    if (exec_tb_alloc_n(ex, &o->save[0], M, err) || exec_tb_alloc_n(ex, &o->save[1], M, err)
        || exec_tb_alloc_n(ex, &pk, M, err) || exec_tb_alloc_n(ex, &loss, M, err))
        return -1;
    float *mx = o->save[0].p, *se = o->save[1].p;
    ex->be->softmax->softmax_partial_max(mx, o->in[0].p, M, V, 1);
    if (exec_allreduce(ex, o, mx, (size_t)M, MPI_MAX, o->acomm, err))
        return -1;
    ex->be->softmax->softmax_partial_sumexp(se, o->in[0].p, mx, M, V, 1);
    ex->be->softmax->xent_partial_picked(pk.p, o->in[0].p, lab, M, V, v0);
    if (exec_allreduce(ex, o, se, (size_t)M, MPI_SUM, o->acomm, err)
        || exec_allreduce(ex, o, pk.p, (size_t)M, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->softmax->xent_loss(loss.p, mx, se, pk.p, lab, M);
    if (o->g[nd - 1] == 0 && M > 0) {
        float *h = malloc((size_t)M * sizeof *h);
        if (!h)
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        ex->be->to_host(h, loss.p, (size_t)M);
        double s = 0;
        for (int i = 0; i < M; i++)
            s += h[i];
        ex->loss_sum += s / total_rows;
        free(h);
    }
    exec_tb_free(ex, &pk);
    exec_tb_free(ex, &loss);
    return 0;
}

static int xent_backward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims, M = 1, V = (int)ops_ext(o, nd - 1), v0 = (int)o->lo[nd - 1];
    for (int i = 0; i < nd - 1; i++)
        M *= (int)ops_ext(o, i);
    tbuf dl = {0};
    if (exec_tb_alloc_n(ex, &dl, M, err))
        return -1;
    float *h = malloc((size_t)(M ? M : 1) * sizeof *h);
    if (!h)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < M; i++)
        h[i] = (float)(1.0 / o->loss_rows);
    if (M)
        ex->be->from_host(dl.p, h, (size_t)M);
    free(h);
    ex->be->softmax->softmax_xent_backward(o->din[0].p, dl.p, o->in[0].p, o->save[0].p,
                                           o->save[1].p, (const int32_t *)o->ids.p, M, V, v0);
    exec_tb_free(ex, &dl);
    return 0;
}

const sb_op_runtime sb_op_runtime_softmax = {.setup_groups = softmax_setup_groups,
                                             .forward = softmax_forward,
                                             .backward = softmax_backward,
                                             .families = SB_FAM(SOFTMAX)};
const sb_op_runtime sb_op_runtime_softmax_xent = {.setup_groups = xent_setup_groups,
                                                  .forward = xent_forward,
                                                  .backward = xent_backward,
                                                  .families = SB_FAM(SOFTMAX)};
