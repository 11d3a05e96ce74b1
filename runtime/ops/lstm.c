/* lstm.c: the multi-layer LSTM op under any config the cost model allows.
 *
 * Iteration space (layers L, seq S, batch B, units N, units_in K); S is
 * never split. The ranks of the op's grid form c_L layer groups; group g
 * runs layers [g·L/c_L, (g+1)·L/c_L) one after the other, and hands the
 * whole output sequence to the next group. Inside a group a rank owns a
 * (batch, units) block: per time step it multiplies its K-slice of
 * [x_t; h_{t-1}] by its (K-slice, 4 gates × N-slice) block of the weights,
 * the K group all-reduces the partial gates, the cell runs on the N-slice,
 * and h_t moves from the N-layout to the K-layout for the next step (the
 * relayout the cost model charges per layer and step). Backward runs the
 * same in reverse; partial input gradients (over the N-slices) are summed by
 * accumulating relayouts.
 *
 * Weight layout per rank: W (layers, 2, units_in, 4, units) restricted to
 * its box: for layer l, W[l][0] is Wx (K, 4N) and W[l][1] is Wh (K, 4N). */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static void lstm_release_step(sb_executor *ex, opx *o);

struct lstm_state {
    int member;             /* in the grid */
    int L, S, B, N, K;      /* local sizes (L: layers of my group) */
    int l0;                 /* first global layer of my group */
    sb_relayout *h_fwd, *h_bwd;   /* (B, U): N-layout <-> K-layout in my group */
    sb_relayout *y_fwd, *y_bwd;   /* (S, B, U) in my group */
    sb_relayout **x_fwd, **x_bwd; /* (S, B, U) between group g and g+1 (world) */
    int ngroups;
    /* per step */
    tbuf *xin, *gates, *cst, *hN, *hK; /* per local layer */
};

static void box_sbu(sb_box *b, int64_t S, int64_t b0, int64_t b1, int64_t u0, int64_t u1)
{
    b->nd = 3;
    b->lo[0] = 0;
    b->hi[0] = S;
    b->lo[1] = b0;
    b->hi[1] = b1;
    b->lo[2] = u0;
    b->hi[2] = u1;
}

/* (batch, units) boxes of rank r: N-layout if n, else K-layout */
static int rank_box(const sb_op *op, const int *c, int r, int n_layout, int with_seq, int *group,
                    sb_box *b)
{
    int g[SB_MAX_DIMS];
    int64_t lo[SB_MAX_DIMS], hi[SB_MAX_DIMS];
    b->nd = 0;
    if (!plan_coords(c, op->ndims, r, g))
        return 0;
    plan_iter_box(op, c, g, lo, hi);
    int d = n_layout ? 3 : 4;
    *group = g[0];
    if (with_seq) {
        box_sbu(b, op->dims[1].size, lo[2], hi[2], lo[d], hi[d]);
    } else {
        b->nd = 2;
        b->lo[0] = lo[2];
        b->hi[0] = hi[2];
        b->lo[1] = lo[d];
        b->hi[1] = hi[d];
    }
    return 1;
}

static int lstm_setup(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims;
    struct lstm_state *st = calloc(1, sizeof *st);
    if (!st)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    o->lstm = st;
    if (exec_make_group(ex, o, 1u << 4, &o->kcomm, err))
        return -1;
    /* layer group: all ranks with my layer coordinate (a group even of one) */
    int *color = malloc((size_t)ex->size * sizeof *color);
    if (!color)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int r = 0; r < ex->size; r++)
        color[r] = plan_group_color(o->c, nd, r, 0x1eu);
    int rc = sb_group_get(ex->groups, color, &o->lcomm, err);
    free(color);
    if (rc)
        return -1;
    st->ngroups = o->c[0];
    st->member = o->in_grid;
    if (st->member) {
        st->L = (int)(o->hi[0] - o->lo[0]);
        st->l0 = (int)o->lo[0];
        st->S = (int)op->dims[1].size;
        st->B = (int)(o->hi[2] - o->lo[2]);
        st->N = (int)(o->hi[3] - o->lo[3]);
        st->K = (int)(o->hi[4] - o->lo[4]);
    }
    int64_t U = op->dims[3].size, Bt = op->dims[2].size, S = op->dims[1].size;
    int64_t shape2[2] = {Bt, U}, shape3[3] = {S, Bt, U};
    /* plans inside my layer group (members in world-rank order) */
    if (st->member) {
        int n = 0, *members = malloc((size_t)ex->size * sizeof *members);
        if (!members)
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        for (int r = 0; r < ex->size; r++) {
            int g[SB_MAX_DIMS];
            if (plan_coords(o->c, nd, r, g) && g[0] == o->g[0])
                members[n++] = r;
        }
        sb_box *bn2 = calloc((size_t)n, sizeof(sb_box)), *bk2 = calloc((size_t)n, sizeof(sb_box));
        sb_box *bn3 = calloc((size_t)n, sizeof(sb_box)), *bk3 = calloc((size_t)n, sizeof(sb_box));
        rc = !bn2 || !bk2 || !bn3 || !bk3 ? sb_fail(err, SB_EXIT_INTERNAL, "out of memory") : 0;
        for (int i = 0; i < n && !rc; i++) {
            int gl;
            rank_box(op, o->c, members[i], 1, 0, &gl, &bn2[i]);
            rank_box(op, o->c, members[i], 0, 0, &gl, &bk2[i]);
            rank_box(op, o->c, members[i], 1, 1, &gl, &bn3[i]);
            rank_box(op, o->c, members[i], 0, 1, &gl, &bk3[i]);
        }
        MPI_Comm lc = o->lcomm;
        if (!rc)
            rc = sb_relayout_plan(lc, 2, shape2, bn2, bk2, SB_RELAYOUT_COPY, &st->h_fwd, err)
                 || sb_relayout_plan(lc, 2, shape2, bk2, bn2, SB_RELAYOUT_ACCUM, &st->h_bwd, err)
                 || sb_relayout_plan(lc, 3, shape3, bn3, bk3, SB_RELAYOUT_COPY, &st->y_fwd, err)
                 || sb_relayout_plan(lc, 3, shape3, bk3, bn3, SB_RELAYOUT_ACCUM, &st->y_bwd, err);
        free(members);
        free(bn2);
        free(bk2);
        free(bn3);
        free(bk3);
        if (rc)
            return -1;
    }
    /* plans between consecutive layer groups, over the whole communicator */
    st->x_fwd = calloc((size_t)st->ngroups, sizeof *st->x_fwd);
    st->x_bwd = calloc((size_t)st->ngroups, sizeof *st->x_bwd);
    sb_box *src = calloc((size_t)ex->size, sizeof *src), *dst = calloc((size_t)ex->size, sizeof *dst);
    rc = !st->x_fwd || !st->x_bwd || !src || !dst ? sb_fail(err, SB_EXIT_INTERNAL, "out of memory") : 0;
    for (int gl = 0; gl + 1 < st->ngroups && !rc; gl++) {
        for (int r = 0; r < ex->size; r++) {
            sb_box bn, bk;
            int grp = -1;
            src[r].nd = dst[r].nd = 0;
            if (rank_box(op, o->c, r, 1, 1, &grp, &bn) && grp == gl)
                src[r] = bn;
            if (rank_box(op, o->c, r, 0, 1, &grp, &bk) && grp == gl + 1)
                dst[r] = bk;
        }
        rc = sb_relayout_plan(ex->comm, 3, shape3, src, dst, SB_RELAYOUT_COPY, &st->x_fwd[gl], err)
             || sb_relayout_plan(ex->comm, 3, shape3, dst, src, SB_RELAYOUT_ACCUM, &st->x_bwd[gl], err);
    }
    free(src);
    free(dst);
    return rc ? -1 : 0;
}

static void lstm_free(sb_executor *ex, opx *o)
{
    struct lstm_state *st = o->lstm;
    if (!st)
        return;
    lstm_release_step(ex, o);
    sb_relayout_free(st->h_fwd);
    sb_relayout_free(st->h_bwd);
    sb_relayout_free(st->y_fwd);
    sb_relayout_free(st->y_bwd);
    for (int g = 0; g < st->ngroups; g++) {
        if (st->x_fwd)
            sb_relayout_free(st->x_fwd[g]);
        if (st->x_bwd)
            sb_relayout_free(st->x_bwd[g]);
    }
    free(st->x_fwd);
    free(st->x_bwd);
    free(st);
    o->lstm = NULL;
}

static void lstm_release_step(sb_executor *ex, opx *o)
{
    struct lstm_state *st = o->lstm;
    if (!st || !st->xin)
        return;
    for (int l = 0; l < st->L; l++) {
        exec_tb_free(ex, &st->xin[l]);
        exec_tb_free(ex, &st->gates[l]);
        exec_tb_free(ex, &st->cst[l]);
        exec_tb_free(ex, &st->hN[l]);
        exec_tb_free(ex, &st->hK[l]);
    }
    free(st->xin);
    free(st->gates);
    free(st->cst);
    free(st->hN);
    free(st->hK);
    st->xin = st->gates = st->cst = st->hN = st->hK = NULL;
}

/* (B, S, U) <-> (S, B, U) */
static void swap01(sb_executor *ex, float *dst, const float *src, int d0, int d1, int d2, int acc)
{
    int dims[3] = {d0, d1, d2}, perm[3] = {1, 0, 2};
    ex->be->move->permute(dst, src, 3, dims, perm, acc);
}

static const float *wx(sb_executor *ex, opx *o, const struct lstm_state *st, int l, int which)
{
    return ex->params[o->params[0]].w.p + ((size_t)l * 2 + (size_t)which) * (size_t)st->K * 4 * (size_t)st->N;
}

static float *dwx(sb_executor *ex, opx *o, const struct lstm_state *st, int l, int which)
{
    return ex->params[o->params[0]].dw.p + ((size_t)l * 2 + (size_t)which) * (size_t)st->K * 4 * (size_t)st->N;
}

/* one layer forward: xin (S,B,K) -> hN (S,B,N) */
static int layer_forward(sb_executor *ex, opx *o, struct lstm_state *st, int l, sb_error *err)
{
    int S = st->S, B = st->B, N = st->N, K = st->K;
    tbuf pre = {0};
    if (exec_tb_alloc_n(ex, &st->gates[l], (int64_t)S * B * 4 * N, err)
        || exec_tb_alloc_n(ex, &st->cst[l], (int64_t)S * B * N, err)
        || exec_tb_alloc_n(ex, &st->hN[l], (int64_t)S * B * N, err)
        || exec_tb_alloc_n(ex, &st->hK[l], (int64_t)S * B * K, err)
        || exec_tb_alloc_n(ex, &pre, (int64_t)B * 4 * N, err))
        return -1;
    float *G = st->gates[l].p;
    /* x part of every step at once: (S*B, K) x (K, 4N) */
    int t0 = exec_mark(ex);
    ex->be->gemm->gemm_batched(0, 0, S * B, 4 * N, K, 1.0f, st->xin[l].p, K, 0, wx(ex, o, st, l, 0),
                               4 * N, 0, 0.0f, G, 4 * N, 0, 1);
    exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
    for (int t = 0; t < S; t++) {
        float *gt = G + (size_t)t * B * 4 * N;
        t0 = exec_mark(ex);
        if (t > 0)
            ex->be->gemm->gemm_batched(0, 0, B, 4 * N, K, 1.0f,
                                       st->hK[l].p + (size_t)(t - 1) * B * K, K, 0,
                                       wx(ex, o, st, l, 1), 4 * N, 0, 1.0f, gt, 4 * N, 0, 1);
        exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
        if (exec_allreduce(ex, o, gt, (size_t)B * 4 * N, MPI_SUM, o->kcomm, err))
            return -1;
        t0 = exec_mark(ex);
        ex->be->lstm->lstm_pointwise_forward(
            st->hN[l].p + (size_t)t * B * N, st->cst[l].p + (size_t)t * B * N, gt, gt,
            t > 0 ? st->cst[l].p + (size_t)(t - 1) * B * N : NULL, B, N);
        exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
        tbuf hs = {.p = st->hN[l].p + (size_t)t * B * N, .n = (int64_t)B * N};
        tbuf hd = {.p = st->hK[l].p + (size_t)t * B * K, .n = (int64_t)B * K};
        if (exec_run_relayout(ex, o, st->h_fwd, &hs, &hd, err))
            return -1;
    }
    exec_tb_free(ex, &pre);
    return 0;
}

static int lstm_forward(sb_executor *ex, opx *o, sb_error *err)
{
    struct lstm_state *st = o->lstm;
    const sb_op *op = &ex->m->ops[o->idx];
    int my = st->member ? o->g[0] : -1;
    tbuf carry = {0}; /* (S,B,K) input of my group's first layer */
    if (st->member) {
        st->xin = calloc((size_t)st->L, sizeof(tbuf));
        st->gates = calloc((size_t)st->L, sizeof(tbuf));
        st->cst = calloc((size_t)st->L, sizeof(tbuf));
        st->hN = calloc((size_t)st->L, sizeof(tbuf));
        st->hK = calloc((size_t)st->L, sizeof(tbuf));
        if (!st->xin || !st->gates || !st->cst || !st->hN || !st->hK)
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    for (int gl = 0; gl < st->ngroups; gl++) {
        if (gl == my) {
            int S = st->S, B = st->B, K = st->K, N = st->N;
            if (exec_tb_alloc_n(ex, &st->xin[0], (int64_t)S * B * K, err))
                return -1;
            if (gl == 0)
                swap01(ex, st->xin[0].p, o->in[0].p, B, S, K, 0);
            else
                ex->be->move->box_copy(st->xin[0].p, (int[]){S * B * K}, (int[]){0}, carry.p,
                                       (int[]){S * B * K}, (int[]){0}, (int[]){S * B * K}, 1, 0);
            exec_tb_free(ex, &carry);
            for (int l = 0; l < st->L; l++) {
                if (layer_forward(ex, o, st, l, err))
                    return -1;
                if (l + 1 < st->L) {
                    if (exec_tb_alloc_n(ex, &st->xin[l + 1], (int64_t)S * B * K, err)
                        || exec_run_relayout(ex, o, st->y_fwd, &st->hN[l], &st->xin[l + 1], err))
                        return -1;
                }
            }
            if (gl == st->ngroups - 1)
                swap01(ex, o->out[0].p, st->hN[st->L - 1].p, S, B, N, 0);
        }
        if (gl + 1 < st->ngroups) {
            /* hand the sequence to the next layer group */
            tbuf none = {0};
            const tbuf *src = gl == my ? &st->hN[st->L - 1] : &none;
            if (gl + 1 == my && exec_tb_alloc_n(ex, &carry, (int64_t)st->S * st->B * st->K, err))
                return -1;
            if (exec_run_relayout(ex, o, st->x_fwd[gl], src, gl + 1 == my ? &carry : &none, err))
                return -1;
        }
    }
    (void)op;
    return 0;
}

/* one layer backward: dY (S,B,N) complete -> dX (S,B,K) partial over N */
static int layer_backward(sb_executor *ex, opx *o, struct lstm_state *st, int l, const float *dY,
                          float *dX, sb_error *err)
{
    int S = st->S, B = st->B, N = st->N, K = st->K;
    tbuf dpre = {0}, dh = {0}, dc = {0}, dcp = {0}, dhK = {0}, dhN = {0};
    if (exec_tb_alloc_n(ex, &dpre, (int64_t)S * B * 4 * N, err) || exec_tb_alloc_n(ex, &dh, (int64_t)B * N, err)
        || exec_tb_alloc_n(ex, &dc, (int64_t)B * N, err) || exec_tb_alloc_n(ex, &dcp, (int64_t)B * N, err)
        || exec_tb_alloc_n(ex, &dhK, (int64_t)B * K, err) || exec_tb_alloc_n(ex, &dhN, (int64_t)B * N, err))
        return -1;
    ex->be->zero(dhN.p, (size_t)B * N);
    ex->be->zero(dc.p, (size_t)B * N);
    for (int t = S - 1; t >= 0; t--) {
        const float *ins[2] = {dY + (size_t)t * B * N, dhN.p};
        ex->be->sum->add_forward(dh.p, ins, 2, (size_t)B * N, 0);
        ex->be->zero(dcp.p, (size_t)B * N);
        float *dp = dpre.p + (size_t)t * B * 4 * N;
        int t0 = exec_mark(ex);
        ex->be->lstm->lstm_pointwise_backward(
            dp, t > 0 ? dcp.p : NULL, dh.p, dc.p, st->gates[l].p + (size_t)t * B * 4 * N,
            st->cst[l].p + (size_t)t * B * N, t > 0 ? st->cst[l].p + (size_t)(t - 1) * B * N : NULL,
            B, N);
        float *tmp = dc.p;
        dc.p = dcp.p;
        dcp.p = tmp;
        if (t > 0) {
            /* dWh += h_{t-1}^T dpre_t ; dh_{t-1} (partial) = dpre_t Wh^T */
            ex->be->gemm->gemm_batched(1, 0, K, 4 * N, B, 1.0f,
                                       st->hK[l].p + (size_t)(t - 1) * B * K, K, 0, dp, 4 * N, 0,
                                       1.0f, dwx(ex, o, st, l, 1), 4 * N, 0, 1);
            ex->be->gemm->gemm_batched(0, 1, B, K, 4 * N, 1.0f, dp, 4 * N, 0, wx(ex, o, st, l, 1),
                                       4 * N, 0, 0.0f, dhK.p, K, 0, 1);
        }
        exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
        if (t > 0 && exec_run_relayout(ex, o, st->h_bwd, &dhK, &dhN, err))
            return -1;
    }
    int t0 = exec_mark(ex);
    /* dX (S*B, K) = dpre (S*B, 4N) Wx^T ; dWx += X^T dpre */
    ex->be->gemm->gemm_batched(0, 1, S * B, K, 4 * N, 1.0f, dpre.p, 4 * N, 0, wx(ex, o, st, l, 0),
                               4 * N, 0, 0.0f, dX, K, 0, 1);
    ex->be->gemm->gemm_batched(1, 0, K, 4 * N, S * B, 1.0f, st->xin[l].p, K, 0, dpre.p, 4 * N, 0,
                               1.0f, dwx(ex, o, st, l, 0), 4 * N, 0, 1);
    exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
    exec_tb_free(ex, &dpre);
    exec_tb_free(ex, &dh);
    exec_tb_free(ex, &dc);
    exec_tb_free(ex, &dcp);
    exec_tb_free(ex, &dhK);
    exec_tb_free(ex, &dhN);
    return 0;
}

static int lstm_backward(sb_executor *ex, opx *o, sb_error *err)
{
    struct lstm_state *st = o->lstm;
    int my = st->member ? o->g[0] : -1;
    tbuf dy = {0}; /* (S,B,N) gradient reaching my group's top layer */
    int rc = 0;
    for (int gl = st->ngroups - 1; gl >= 0 && !rc; gl--) {
        if (gl == my) {
            int S = st->S, B = st->B, K = st->K, N = st->N;
            if (gl == st->ngroups - 1) {
                if (exec_tb_alloc_n(ex, &dy, (int64_t)S * B * N, err))
                    return -1;
                swap01(ex, dy.p, o->dout[0].p, B, S, N, 0);
            }
            tbuf dx = {0};
            for (int l = st->L - 1; l >= 0 && !rc; l--) {
                if (exec_tb_alloc_n(ex, &dx, (int64_t)S * B * K, err)
                    || layer_backward(ex, o, st, l, dy.p, dx.p, err))
                    return -1;
                exec_tb_free(ex, &dy);
                if (l > 0) {
                    if (exec_tb_alloc_n(ex, &dy, (int64_t)S * B * N, err)
                        || exec_run_relayout(ex, o, st->y_bwd, &dx, &dy, err))
                        return -1;
                    exec_tb_free(ex, &dx);
                }
            }
            if (gl == 0 && ex->m->tensors[ex->m->ops[o->idx].in[0].tensor].kind != SB_TENSOR_INPUT)
                swap01(ex, o->din[0].p, dx.p, S, B, K, 1);
            if (gl > 0) {
                tbuf none = {0};
                rc = exec_run_relayout(ex, o, st->x_bwd[gl - 1], &dx, &none, err);
            }
            exec_tb_free(ex, &dx);
        } else if (gl > 0) {
            tbuf none = {0};
            if (gl - 1 == my && exec_tb_alloc_n(ex, &dy, (int64_t)st->S * st->B * st->N, err))
                return -1;
            rc = exec_run_relayout(ex, o, st->x_bwd[gl - 1], &none, gl - 1 == my ? &dy : &none, err);
        }
    }
    exec_tb_free(ex, &dy);
    lstm_release_step(ex, o);
    return rc;
}

/* Runs on every rank: the layer groups hand the sequence on in turn. */
const sb_op_runtime sb_op_runtime_lstm = {.setup_groups = lstm_setup,
                                          .forward = lstm_forward,
                                          .backward = lstm_backward,
                                          .release = lstm_free,
                                          .every_rank = 1,
                                          .families = SB_FAM(GEMM) | SB_FAM(LSTM) | SB_FAM(MOVE)
                                                      | SB_FAM(SUM)};
