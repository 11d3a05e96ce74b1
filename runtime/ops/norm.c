/* norm.c: layer norm (over `axis`, moved last when it is not), RMS norm
 * (the same, one pass: the sum of squares) and batch norm (per channel over
 * N, H, W). Layer and batch norm take two passes, the mean, then the
 * centered sum of squares, each all-reduced over acomm, the ranks that
 * split the normalized dims. */
#include "common.h"

#define EPS 1e-5f

static int norm_setup_groups(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims;
    return exec_make_group(ex, o, op->batchnorm ? ((1u << nd) - 1) & ~2u : 1u << op->axis,
                           &o->acomm, err);
}

/* layer norm: permutation putting the axis last */
static int axis_last_perm(int nd, int a, int *perm, int *inv)
{
    int n = 0;
    for (int i = 0; i < nd; i++)
        if (i != a)
            perm[n++] = i;
    perm[n] = a;
    for (int i = 0; i < nd; i++)
        inv[perm[i]] = i;
    return a == nd - 1;
}

static int norm_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims;
    float *gamma = ex->params[o->params[0]].w.p, *beta = ex->params[o->params[1]].w.p;
    tbuf st = {0};
    if (op->batchnorm) {
        int B = (int)ops_ext(o, 0), C = (int)ops_ext(o, 1), HW = nd == 4 ? (int)(ops_ext(o, 2) * ops_ext(o, 3)) : 1;
        long count = (long)op->dims[0].size * (nd == 4 ? (long)(op->dims[2].size * op->dims[3].size) : 1);
        if (exec_tb_alloc_n(ex, &st, 2 * C, err) || exec_tb_alloc_n(ex, &o->save[0], 2 * C, err))
            return -1;
        /* two passes: the mean, then the centered sum of squares */
        ex->be->norm->batchnorm_stats(st.p, st.p + C, o->in[0].p, B, C, HW);
        if (exec_allreduce(ex, o, st.p, (size_t)C, MPI_SUM, o->acomm, err))
            return -1;
        ex->be->norm->norm_mean(o->save[0].p, st.p, C, count);
        ex->be->norm->batchnorm_centered(st.p + C, o->in[0].p, o->save[0].p, B, C, HW);
        if (exec_allreduce(ex, o, st.p + C, (size_t)C, MPI_SUM, o->acomm, err))
            return -1;
        ex->be->norm->norm_rstd(o->save[0].p + C, st.p + C, C, count, EPS);
        ex->be->norm->batchnorm_apply(o->out[0].p, o->in[0].p, o->save[0].p, o->save[0].p + C,
                                      gamma, beta, B, C, HW, 0);
        exec_tb_free(ex, &st);
        return 0;
    }
    int a = op->axis, perm[SB_MAX_DIMS], inv[SB_MAX_DIMS], dims[SB_MAX_DIMS], pd[SB_MAX_DIMS];
    int last = axis_last_perm(nd, a, perm, inv);
    ops_box_dims(&o->in[0].box, dims);
    for (int i = 0; i < nd; i++)
        pd[i] = dims[perm[i]];
    int D = dims[a];
    int M = (int)(o->in[0].n / (D ? D : 1));
    tbuf xp = {0}, yp = {0};
    const float *x = o->in[0].p;
    float *y = o->out[0].p;
    if (!last) {
        if (exec_tb_alloc_n(ex, &xp, o->in[0].n, err) || exec_tb_alloc_n(ex, &yp, o->in[0].n, err))
            return -1;
        ex->be->move->permute(xp.p, x, nd, dims, perm, 0);
        x = xp.p;
        y = yp.p;
    }
    if (exec_tb_alloc_n(ex, &st, 2 * (int64_t)M, err) || exec_tb_alloc_n(ex, &o->save[0], 2 * (int64_t)M, err))
        return -1;
    long count = (long)op->dims[a].size;
    ex->be->norm->layernorm_stats(st.p, st.p + M, x, M, D);
    if (exec_allreduce(ex, o, st.p, (size_t)M, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->norm->norm_mean(o->save[0].p, st.p, M, count);
    ex->be->norm->layernorm_centered(st.p + M, x, o->save[0].p, M, D);
    if (exec_allreduce(ex, o, st.p + M, (size_t)M, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->norm->norm_rstd(o->save[0].p + M, st.p + M, M, count, EPS);
    ex->be->norm->layernorm_apply(y, x, o->save[0].p, o->save[0].p + M, gamma, beta, M, D);
    if (!last)
        ex->be->move->permute(o->out[0].p, y, nd, pd, inv, 0);
    exec_tb_free(ex, &st);
    exec_tb_free(ex, &xp);
    exec_tb_free(ex, &yp);
    return 0;
}

static int norm_backward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims;
    param *pg = &ex->params[o->params[0]], *pb = &ex->params[o->params[1]];
    tbuf st = {0};
    int want_dx = ex->m->tensors[op->in[0].tensor].kind != SB_TENSOR_INPUT;
    if (op->batchnorm) {
        int B = (int)ops_ext(o, 0), C = (int)ops_ext(o, 1), HW = nd == 4 ? (int)(ops_ext(o, 2) * ops_ext(o, 3)) : 1;
        long count = (long)op->dims[0].size * (nd == 4 ? (long)(op->dims[2].size * op->dims[3].size) : 1);
        if (exec_tb_alloc_n(ex, &st, 2 * C, err))
            return -1;
        ex->be->norm->batchnorm_backward_stats(st.p, st.p + C, o->dout[0].p, NULL, o->in[0].p,
                                               o->save[0].p, o->save[0].p + C, B, C, HW);
        if (exec_allreduce(ex, o, st.p, (size_t)(2 * C), MPI_SUM, o->acomm, err))
            return -1;
        if (want_dx)
            ex->be->norm->batchnorm_backward_apply(o->din[0].p, o->dout[0].p, NULL, o->in[0].p,
                                                   o->save[0].p, o->save[0].p + C, pg->w.p, st.p,
                                                   st.p + C, B, C, HW, count);
        const float *g1[2] = {pg->dw.p, st.p + C}, *g2[2] = {pb->dw.p, st.p};
        ex->be->sum->add_forward(pg->dw.p, g1, 2, (size_t)C, 0);
        ex->be->sum->add_forward(pb->dw.p, g2, 2, (size_t)C, 0);
        exec_tb_free(ex, &st);
        return 0;
    }
    int a = op->axis, perm[SB_MAX_DIMS], inv[SB_MAX_DIMS], dims[SB_MAX_DIMS], pd[SB_MAX_DIMS];
    int last = axis_last_perm(nd, a, perm, inv);
    ops_box_dims(&o->in[0].box, dims);
    for (int i = 0; i < nd; i++)
        pd[i] = dims[perm[i]];
    int D = dims[a];
    int M = (int)(o->in[0].n / (D ? D : 1));
    tbuf xp = {0}, dyp = {0}, dxp = {0};
    const float *x = o->in[0].p, *dy = o->dout[0].p;
    float *dx = o->din[0].p;
    if (!last) {
        if (exec_tb_alloc_n(ex, &xp, o->in[0].n, err) || exec_tb_alloc_n(ex, &dyp, o->in[0].n, err)
            || exec_tb_alloc_n(ex, &dxp, o->in[0].n, err))
            return -1;
        ex->be->move->permute(xp.p, x, nd, dims, perm, 0);
        ex->be->move->permute(dyp.p, dy, nd, dims, perm, 0);
        ex->be->zero(dxp.p, (size_t)dxp.n);
        x = xp.p;
        dy = dyp.p;
        dx = dxp.p;
    }
    if (exec_tb_alloc_n(ex, &st, 2 * (int64_t)M, err))
        return -1;
    ex->be->norm->layernorm_backward_stats(st.p, st.p + M, dy, x, o->save[0].p, o->save[0].p + M,
                                           pg->w.p, M, D);
    if (exec_allreduce(ex, o, st.p, (size_t)(2 * M), MPI_SUM, o->acomm, err))
        return -1;
    ex->be->norm->layernorm_backward_apply(want_dx ? dx : NULL, pg->dw.p, pb->dw.p, dy, x,
                                           o->save[0].p, o->save[0].p + M, pg->w.p, st.p, st.p + M,
                                           M, D, (int)op->dims[a].size);
    if (!last && want_dx)
        ex->be->move->permute(o->din[0].p, dx, nd, pd, inv, 1);
    exec_tb_free(ex, &st);
    exec_tb_free(ex, &xp);
    exec_tb_free(ex, &dyp);
    exec_tb_free(ex, &dxp);
    return 0;
}

const sb_op_runtime sb_op_runtime_norm = {.setup_groups = norm_setup_groups,
                                          .forward = norm_forward,
                                          .backward = norm_backward,
                                          .families = SB_FAM(NORM) | SB_FAM(MOVE) | SB_FAM(SUM)};

/* ---- RMS norm: x * rstd * gamma, rstd = 1 / sqrt(mean of x^2 + EPS) ---- */

static int rmsnorm_setup_groups(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    return exec_make_group(ex, o, 1u << op->axis, &o->acomm, err);
}

/* Moves the axis last: x (and dy) into permuted copies when it is not.
 * dims: the box's extents; pd: the permuted extents. */
typedef struct {
    int nd, last, perm[SB_MAX_DIMS], inv[SB_MAX_DIMS], dims[SB_MAX_DIMS], pd[SB_MAX_DIMS];
    int M, D;
} axis_view;

static void axis_view_of(const sb_op *op, const opx *o, axis_view *v)
{
    v->nd = op->ndims;
    v->last = axis_last_perm(v->nd, op->axis, v->perm, v->inv);
    ops_box_dims(&o->in[0].box, v->dims);
    for (int i = 0; i < v->nd; i++)
        v->pd[i] = v->dims[v->perm[i]];
    v->D = v->dims[op->axis];
    v->M = (int)(o->in[0].n / (v->D ? v->D : 1));
}

/* src as (M, D) rows: src itself, or its permuted copy in buf */
static int rows_of(sb_executor *ex, const axis_view *v, const float *src, int64_t n, tbuf *buf,
                   const float **rows, sb_error *err)
{
    *rows = src;
    if (v->last)
        return 0;
    if (exec_tb_alloc_n(ex, buf, n, err))
        return -1;
    ex->be->move->permute(buf->p, src, v->nd, v->dims, v->perm, 0);
    *rows = buf->p;
    return 0;
}

static int rmsnorm_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    const float *gamma = ex->params[o->params[0]].w.p;
    axis_view v;
    axis_view_of(op, o, &v);
    tbuf xp = {0}, yp = {0}, st = {0};
    const float *x;
    float *y = o->out[0].p;
    if (rows_of(ex, &v, o->in[0].p, o->in[0].n, &xp, &x, err))
        return -1;
    if (!v.last) {
        if (exec_tb_alloc_n(ex, &yp, o->in[0].n, err))
            return -1;
        y = yp.p;
    }
    /* save[0]: rstd (M) */
    if (exec_tb_alloc_n(ex, &st, v.M, err) || exec_tb_alloc_n(ex, &o->save[0], v.M, err))
        return -1;
    ex->be->norm->rmsnorm_stats(st.p, x, v.M, v.D);
    if (exec_allreduce(ex, o, st.p, (size_t)v.M, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->norm->norm_rstd(o->save[0].p, st.p, v.M, (long)op->dims[op->axis].size, EPS);
    ex->be->norm->rmsnorm_apply(y, x, o->save[0].p, gamma, v.M, v.D);
    if (!v.last)
        ex->be->move->permute(o->out[0].p, y, v.nd, v.pd, v.inv, 0);
    exec_tb_free(ex, &st);
    exec_tb_free(ex, &xp);
    exec_tb_free(ex, &yp);
    return 0;
}

static int rmsnorm_backward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    param *pg = &ex->params[o->params[0]];
    int want_dx = !ops_is_model_input(ex, op, 0);
    axis_view v;
    axis_view_of(op, o, &v);
    tbuf xp = {0}, dyp = {0}, dxp = {0}, st = {0};
    const float *x, *dy;
    float *dx = o->din[0].p;
    if (rows_of(ex, &v, o->in[0].p, o->in[0].n, &xp, &x, err)
        || rows_of(ex, &v, o->dout[0].p, o->in[0].n, &dyp, &dy, err))
        return -1;
    if (!v.last && want_dx) {
        if (exec_tb_alloc_n(ex, &dxp, o->in[0].n, err))
            return -1;
        ex->be->zero(dxp.p, (size_t)dxp.n);
        dx = dxp.p;
    }
    if (exec_tb_alloc_n(ex, &st, v.M, err))
        return -1;
    ex->be->norm->rmsnorm_backward_stats(st.p, dy, x, pg->w.p, v.M, v.D);
    if (exec_allreduce(ex, o, st.p, (size_t)v.M, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->norm->rmsnorm_backward_apply(want_dx ? dx : NULL, pg->dw.p, dy, x, o->save[0].p,
                                         pg->w.p, st.p, v.M, v.D, (int)op->dims[op->axis].size);
    if (!v.last && want_dx)
        ex->be->move->permute(o->din[0].p, dx, v.nd, v.pd, v.inv, 1);
    exec_tb_free(ex, &st);
    exec_tb_free(ex, &xp);
    exec_tb_free(ex, &dyp);
    exec_tb_free(ex, &dxp);
    return 0;
}

const sb_op_runtime sb_op_runtime_rmsnorm = {.setup_groups = rmsnorm_setup_groups,
                                             .forward = rmsnorm_forward,
                                             .backward = rmsnorm_backward,
                                             .families = SB_FAM(NORM) | SB_FAM(MOVE)};
