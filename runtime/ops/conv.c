/* conv.c: the window kinds, conv and pool, on NCHW boxes whose input may
 * carry halo rows and columns (local padding from the box offsets). A
 * split input-channel or filter-window dim of a conv leaves partial sums,
 * all-reduced over kcomm before the relu. A grouped conv's box holds whole
 * groups (dim 7): its channels are the box's groups times a group's
 * channels, and a split group needs no communication. */
#include "common.h"

typedef struct {
    int B, C, Hin, Win, N, R, S, sh, sw, pt, pl, Hout, Wout;
    int dh, dw, G; /* conv: taps' spacing, the box's groups */
} window;

static void window_of(const sb_executor *ex, const opx *o, window *w)
{
    const sb_op *op = &ex->m->ops[o->idx];
    const sb_box *ib = &o->in[0].box;
    int conv = op->kind == SB_OP_CONV;
    /* a grouped conv's box: G whole groups of dims 1 and 6 channels each */
    w->G = conv && op->ndims > 7 ? (int)ops_ext(o, 7) : 1;
    w->dh = conv ? op->dilation[0] : 1;
    w->dw = conv ? op->dilation[1] : 1;
    w->B = (int)ops_ext(o, 0);
    w->C = (int)ops_ext(o, 1) * w->G;
    w->Hin = (int)(ib->hi[2] - ib->lo[2]);
    w->Win = (int)(ib->hi[3] - ib->lo[3]);
    w->Hout = (int)ops_ext(o, 2);
    w->Wout = (int)ops_ext(o, 3);
    w->R = conv ? (int)ops_ext(o, 4) : op->kernel[0];
    w->S = conv ? (int)ops_ext(o, 5) : op->kernel[1];
    w->N = conv ? (int)ops_ext(o, 6) * w->G : w->C;
    w->sh = op->stride[0];
    w->sw = op->stride[1];
    int64_t r0 = conv ? o->lo[4] : 0, s0 = conv ? o->lo[5] : 0;
    w->pt = (int)(ib->lo[2] - o->lo[2] * op->stride[0] + op->pad[0] - r0 * w->dh);
    w->pl = (int)(ib->lo[3] - o->lo[3] * op->stride[1] + op->pad[1] - s0 * w->dw);
}

static int conv_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    window w;
    window_of(ex, o, &w);
    tbuf work = {0};
    const float *wt = ex->params[o->params[0]].w.p;
    if (exec_tb_alloc_n(
            ex, &work,
            (int64_t)ex->be->conv->conv2d_work_floats(w.C, w.R, w.S, w.N, w.Hout, w.Wout), err))
        return -1;
    /* the relu follows the partial-sum all-reduce; with none, the kernel fuses it */
    int fuse_relu = op->pw > 0 && o->kcomm == MPI_COMM_NULL;
    int t0 = exec_mark(ex);
    ex->be->conv->conv2d_forward(o->out[0].p, o->in[0].p, wt, NULL, work.p, w.B, w.C, w.Hin, w.Win,
                                 w.N, w.R, w.S, w.sh, w.sw, w.pt, w.pl, w.Hout, w.Wout, w.dh, w.dw,
                                 w.G, fuse_relu);
    exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
    exec_tb_free(ex, &work);
    if (exec_allreduce(ex, o, o->out[0].p, (size_t)o->out[0].n, MPI_SUM, o->kcomm, err))
        return -1;
    if (op->pw > 0 && !fuse_relu)
        ops_relu_inplace(ex, o->out[0].p, o->out[0].n);
    return 0;
}

static int conv_backward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    window w;
    window_of(ex, o, &w);
    param *pa = &ex->params[o->params[0]];
    const float *relu_out = op->pw > 0 ? o->out[0].p : NULL;
    tbuf work = {0};
    if (exec_tb_alloc_n(
            ex, &work,
            (int64_t)ex->be->conv->conv2d_work_floats(w.C, w.R, w.S, w.N, w.Hout, w.Wout), err))
        return -1;
    int t0 = exec_mark(ex);
    if (ex->m->tensors[op->in[0].tensor].kind != SB_TENSOR_INPUT)
        ex->be->conv->conv2d_backward_data(o->din[0].p, work.p, o->dout[0].p, relu_out, pa->w.p,
                                           w.B, w.C, w.Hin, w.Win, w.N, w.R, w.S, w.sh, w.sw, w.pt,
                                           w.pl, w.Hout, w.Wout, w.dh, w.dw, w.G);
    ex->be->conv->conv2d_backward_filter(pa->dw.p, NULL, work.p, o->dout[0].p, relu_out, o->in[0].p,
                                         w.B, w.C, w.Hin, w.Win, w.N, w.R, w.S, w.sh, w.sw, w.pt,
                                         w.pl, w.Hout, w.Wout, w.dh, w.dw, w.G);
    exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
    exec_tb_free(ex, &work);
    return 0;
}

static int pool_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    window w;
    window_of(ex, o, &w);
    int t0 = exec_mark(ex);
    if (op->pool_avg)
        ex->be->conv->avgpool2d_forward(o->out[0].p, o->in[0].p, w.B, w.C, w.Hin, w.Win, w.R, w.S,
                                        w.sh, w.sw, w.pt, w.pl, w.Hout, w.Wout, 1);
    else
        ex->be->conv->maxpool2d_forward(o->out[0].p, o->in[0].p, w.B, w.C, w.Hin, w.Win, w.R, w.S,
                                        w.sh, w.sw, w.pt, w.pl, w.Hout, w.Wout);
    exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
    return 0;
}

static int pool_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    window w;
    window_of(ex, o, &w);
    if (ex->m->tensors[op->in[0].tensor].kind == SB_TENSOR_INPUT)
        return 0;
    int t0 = exec_mark(ex);
    if (op->pool_avg)
        ex->be->conv->avgpool2d_backward(o->din[0].p, o->dout[0].p, w.B, w.C, w.Hin, w.Win, w.R,
                                         w.S, w.sh, w.sw, w.pt, w.pl, w.Hout, w.Wout, 1);
    else
        ex->be->conv->maxpool2d_backward(o->din[0].p, o->dout[0].p, o->in[0].p, w.B, w.C, w.Hin,
                                         w.Win, w.R, w.S, w.sh, w.sw, w.pt, w.pl, w.Hout, w.Wout);
    exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
    return 0;
}

const sb_op_runtime sb_op_runtime_conv = {.setup_groups = ops_setup_kcomm,
                                          .forward = conv_forward,
                                          .backward = conv_backward,
                                          .families = SB_FAM(CONV) | SB_FAM(SUM)};
const sb_op_runtime sb_op_runtime_pool = {
    .forward = pool_forward, .backward = pool_backward, .families = SB_FAM(CONV)};
