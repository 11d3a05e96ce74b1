/* ops.c: forward and backward of every op kind on a rank's local boxes,
 * with the collectives a split dimension needs. Kernels come from the
 * backend table (kernels.h semantics: forward overwrites, backward adds).
 * Called by executor.c, which does the relayouts and weight-gradient sums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../executor/exec.h"
#include "lstm.h"
#include "../executor/plan.h"

#define EPS 1e-5f

static int64_t ext(const opx *o, int i) { return o->hi[i] - o->lo[i]; }

static void box_dims(const sb_box *b, int *d)
{
    for (int i = 0; i < b->nd; i++)
        d[i] = (int)(b->hi[i] - b->lo[i]);
}

static uint32_t role_mask(const sb_op *op, int role)
{
    uint32_t m = 0;
    for (int i = 0; i < op->ndims; i++)
        if (op->role[i] == role)
            m |= 1u << i;
    return m;
}

int exec_setup_groups(sb_executor *ex, sb_error *err)
{
    for (int i = 0; i < ex->m->nops; i++) {
        opx *o = &ex->ops[i];
        const sb_op *op = &ex->m->ops[i];
        int nd = op->ndims, rc = 0;
        switch (op->kind) {
        case SB_OP_DENSE:
        case SB_OP_EINSUM:
        case SB_OP_CONV:
        case SB_OP_EMBEDDING:
            rc = exec_make_group(ex, o->c, nd, role_mask(op, SB_ROLE_K), &o->kcomm, err);
            break;
        case SB_OP_NORM:
            rc = exec_make_group(ex, o->c, nd, op->batchnorm ? ((1u << nd) - 1) & ~2u : 1u << op->axis,
                                 &o->acomm, err);
            break;
        case SB_OP_SOFTMAX:
            rc = exec_make_group(ex, o->c, nd, 1u << op->axis, &o->acomm, err);
            break;
        case SB_OP_SOFTMAX_XENT:
            rc = exec_make_group(ex, o->c, nd, 1u << (nd - 1), &o->acomm, err);
            break;
        case SB_OP_REDUCE_MEAN:
            rc = exec_make_group(ex, o->c, nd, op->axes, &o->acomm, err);
            break;
        case SB_OP_LSTM:
            rc = lstm_setup(ex, o, err);
            break;
        default: break;
        }
        if (rc)
            return -1;
    }
    return 0;
}

/* ---- GEMM-like ops (dense, einsum): batched GEMM in canonical order ---------- */

typedef struct {
    int nb, nm, nn, nk;
    int b[SB_MAX_DIMS], mm[SB_MAX_DIMS], n[SB_MAX_DIMS], k[SB_MAX_DIMS];
} roles;

static void get_roles(const sb_op *op, roles *r)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < op->ndims; i++)
        switch (op->role[i]) {
        case SB_ROLE_BATCH: r->b[r->nb++] = i; break;
        case SB_ROLE_M: r->mm[r->nm++] = i; break;
        case SB_ROLE_N: r->n[r->nn++] = i; break;
        case SB_ROLE_K: r->k[r->nk++] = i; break;
        default: break;
        }
}

/* canonical dim list: concatenation of role lists */
static int canon_list(const roles *r, const char *which, int *out)
{
    int n = 0;
    for (const char *w = which; *w; w++) {
        const int *src = *w == 'b' ? r->b : *w == 'm' ? r->mm : *w == 'n' ? r->n : r->k;
        int cnt = *w == 'b' ? r->nb : *w == 'm' ? r->nm : *w == 'n' ? r->nn : r->nk;
        for (int i = 0; i < cnt; i++)
            out[n++] = src[i];
    }
    return n;
}

/* An operand of a GEMM-like op: its data, map and box. */
typedef struct {
    float *p;
    float *grad; /* where its gradient goes, or NULL */
    const int *map;
    sb_box box;
} gemm_operand;

static void operand_of(sb_executor *ex, opx *o, int slot, gemm_operand *g)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int pi = o->param_of_slot[slot];
    if (pi >= 0) {
        g->p = ex->params[pi].w.p;
        g->grad = ex->params[pi].dw.p;
        g->box = ex->params[pi].w.box;
    } else {
        g->p = o->in[slot].p;
        g->grad = ex->m->tensors[op->in[slot].tensor].kind == SB_TENSOR_INPUT ? NULL : o->din[slot].p;
        g->box = o->in[slot].box;
    }
    g->map = op->in[slot].map;
}

/* Permutation taking an operand (tensor dim order) to a canonical list, and
 * whether it is the identity. perm[i] = operand dim whose map is canon[i]. */
static int to_canon_perm(const int *map, int nd, const int *canon, int *perm)
{
    int ident = 1;
    for (int i = 0; i < nd; i++) {
        for (int j = 0; j < nd; j++)
            if (map[j] == canon[i])
                perm[i] = j;
        ident &= perm[i] == i;
    }
    return ident;
}

/* Whether an operand (map over box->nd dims) is already in canonical order. */
static int in_canonical_order(const sb_box *box, const int *map, const int *canon)
{
    int perm[SB_MAX_DIMS];
    return to_canon_perm(map, box->nd, canon, perm);
}

/* Copies operand data into canonical order (a new buffer when needed). */
static int canonical(sb_executor *ex, const float *src, const sb_box *box, const int *map,
                     const int *canon, tbuf *tmp, const float **out, sb_error *err)
{
    int perm[SB_MAX_DIMS], dims[SB_MAX_DIMS];
    if (to_canon_perm(map, box->nd, canon, perm)) {
        *out = src;
        return 0;
    }
    box_dims(box, dims);
    if (exec_tb_alloc_n(ex, tmp, sb_box_volume(box), err))
        return -1;
    ex->be->permute(tmp->p, src, box->nd, dims, perm, 0);
    *out = tmp->p;
    return 0;
}

/* dst (operand order) (+)= canonical buffer. */
static void from_canonical(sb_executor *ex, float *dst, const float *canon_buf, const sb_box *box,
                           const int *map, const int *canon, int accumulate)
{
    int nd = box->nd, perm[SB_MAX_DIMS], cdims[SB_MAX_DIMS], dims[SB_MAX_DIMS];
    box_dims(box, dims);
    int ident = 1;
    for (int j = 0; j < nd; j++) {
        for (int i = 0; i < nd; i++)
            if (canon[i] == map[j])
                perm[j] = i;
        ident &= perm[j] == j;
    }
    for (int i = 0; i < nd; i++)
        cdims[perm[i]] = dims[i];
    if (ident && !accumulate) {
        sb_box flat = {.nd = 1, .lo = {0}, .hi = {sb_box_volume(box)}};
        int n1 = (int)flat.hi[0], z = 0;
        ex->be->box_copy(dst, &n1, &z, canon_buf, &n1, &z, &n1, 1, 0);
        return;
    }
    ex->be->permute(dst, canon_buf, nd, cdims, perm, accumulate);
}

typedef struct {
    int batch, M, N, K;
    int ca[SB_MAX_DIMS], cb[SB_MAX_DIMS], cc[SB_MAX_DIMS];
} gemm_shape;

static void gemm_shape_of(const opx *o, const roles *r, gemm_shape *s)
{
    s->batch = s->M = s->N = s->K = 1;
    for (int i = 0; i < r->nb; i++)
        s->batch *= (int)ext(o, r->b[i]);
    for (int i = 0; i < r->nm; i++)
        s->M *= (int)ext(o, r->mm[i]);
    for (int i = 0; i < r->nn; i++)
        s->N *= (int)ext(o, r->n[i]);
    for (int i = 0; i < r->nk; i++)
        s->K *= (int)ext(o, r->k[i]);
    canon_list(r, "bmk", s->ca);
    canon_list(r, "bkn", s->cb);
    canon_list(r, "bmn", s->cc);
}

static void gemm_operands(sb_executor *ex, opx *o, gemm_operand *a, gemm_operand *b)
{
    const sb_op *op = &ex->m->ops[o->idx];
    operand_of(ex, o, 0, a);
    if (op->kind == SB_OP_DENSE) {
        param *pa = &ex->params[o->params[0]];
        b->p = pa->w.p;
        b->grad = pa->dw.p;
        b->box = pa->w.box;
        b->map = pa->map;
    } else {
        operand_of(ex, o, 1, b);
    }
}

static int relu_inplace(sb_executor *ex, float *p, int64_t n)
{
    const float *ins[1] = {p};
    if (n)
        ex->be->add_forward(p, ins, 1, (size_t)n, 1);
    return 0;
}

static int gemm_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    roles r;
    gemm_shape s;
    get_roles(op, &r);
    gemm_shape_of(o, &r, &s);
    gemm_operand a, b;
    gemm_operands(ex, o, &a, &b);
    tbuf ta = {0}, tb = {0}, tc = {0};
    const float *A, *B;
    int rc = -1;
    /* output already in canonical (b, m, n) order: no temporary, no copy */
    int c_direct = in_canonical_order(&o->out[0].box, op->out[0].map, s.cc);
    if (canonical(ex, a.p, &a.box, a.map, s.ca, &ta, &A, err)
        || canonical(ex, b.p, &b.box, b.map, s.cb, &tb, &B, err)
        || (!c_direct && exec_tb_alloc_n(ex, &tc, (int64_t)s.batch * s.M * s.N, err)))
        goto out;
    double t0 = exec_tick(ex);
    float *C = c_direct ? o->out[0].p : tc.p;
    ex->be->gemm_batched(0, 0, s.M, s.N, s.K, 1.0f, A, s.K, (ptrdiff_t)s.M * s.K, B, s.N,
                         (ptrdiff_t)s.K * s.N, 0.0f, C, s.N, (ptrdiff_t)s.M * s.N, s.batch);
    if (!c_direct)
        from_canonical(ex, o->out[0].p, tc.p, &o->out[0].box, op->out[0].map, s.cc, 0);
    ex->times[o->idx].compute_s += exec_tick(ex) - t0;
    if (exec_allreduce(ex, o, o->out[0].p, (size_t)o->out[0].n, MPI_SUM, o->kcomm, err))
        goto out;
    if (op->pw > 0)
        relu_inplace(ex, o->out[0].p, o->out[0].n);
    rc = 0;
out:
    exec_tb_free(ex, &ta);
    exec_tb_free(ex, &tb);
    exec_tb_free(ex, &tc);
    return rc;
}

/* dout masked by the fused relu, into a new buffer (canonical C order) */
static int masked_dout_canon(sb_executor *ex, opx *o, const gemm_shape *s, tbuf *dc, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    tbuf masked = {0};
    const float *src = o->dout[0].p;
    if (op->pw > 0) {
        if (exec_tb_alloc_n(ex, &masked, o->dout[0].n, err))
            return -1;
        ex->be->zero(masked.p, (size_t)masked.n);
        float *d[1] = {masked.p};
        ex->be->add_backward(d, o->dout[0].p, o->out[0].p, 1, (size_t)masked.n);
        src = masked.p;
    }
    const float *C;
    int rc = canonical(ex, src, &o->out[0].box, op->out[0].map, s->cc, dc, &C, err);
    if (!rc && C == src) {
        /* identity order: still need our own copy if src is the masked temp */
        if (src == masked.p) {
            *dc = masked;
            masked.p = NULL;
            masked.n = 0;
        } else {
            dc->p = (float *)src; /* borrowed: caller must not free */
            dc->n = -1;
        }
    }
    exec_tb_free(ex, &masked);
    return rc;
}

static int gemm_backward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    roles r;
    gemm_shape s;
    get_roles(op, &r);
    gemm_shape_of(o, &r, &s);
    gemm_operand a, b;
    gemm_operands(ex, o, &a, &b);
    tbuf ta = {0}, tb = {0}, dc = {0}, g = {0};
    const float *A, *B;
    int rc = -1;
    if (masked_dout_canon(ex, o, &s, &dc, err)
        || canonical(ex, a.p, &a.box, a.map, s.ca, &ta, &A, err)
        || canonical(ex, b.p, &b.box, b.map, s.cb, &tb, &B, err))
        goto out;
    double t0 = exec_tick(ex);
    /* a gradient already in canonical order takes the GEMM's sum directly
     * (beta 1); otherwise a temporary, permuted and added */
    if (a.grad) {
        int direct = in_canonical_order(&a.box, a.map, s.ca);
        if (!direct && exec_tb_alloc_n(ex, &g, (int64_t)s.batch * s.M * s.K, err))
            goto out;
        ex->be->gemm_batched(0, 1, s.M, s.K, s.N, 1.0f, dc.p, s.N, (ptrdiff_t)s.M * s.N, B, s.N,
                             (ptrdiff_t)s.K * s.N, direct ? 1.0f : 0.0f, direct ? a.grad : g.p,
                             s.K, (ptrdiff_t)s.M * s.K, s.batch);
        if (!direct)
            from_canonical(ex, a.grad, g.p, &a.box, a.map, s.ca, 1);
        exec_tb_free(ex, &g);
    }
    if (b.grad) {
        int direct = in_canonical_order(&b.box, b.map, s.cb);
        if (!direct && exec_tb_alloc_n(ex, &g, (int64_t)s.batch * s.K * s.N, err))
            goto out;
        ex->be->gemm_batched(1, 0, s.K, s.N, s.M, 1.0f, A, s.K, (ptrdiff_t)s.M * s.K, dc.p, s.N,
                             (ptrdiff_t)s.M * s.N, direct ? 1.0f : 0.0f, direct ? b.grad : g.p,
                             s.N, (ptrdiff_t)s.K * s.N, s.batch);
        if (!direct)
            from_canonical(ex, b.grad, g.p, &b.box, b.map, s.cb, 1);
        exec_tb_free(ex, &g);
    }
    ex->times[o->idx].compute_s += exec_tick(ex) - t0;
    rc = 0;
out:
    exec_tb_free(ex, &ta);
    exec_tb_free(ex, &tb);
    if (dc.n >= 0)
        exec_tb_free(ex, &dc);
    exec_tb_free(ex, &g);
    return rc;
}

/* ---- conv and pool ------------------------------------------------------------ */

typedef struct {
    int B, C, Hin, Win, N, R, S, sh, sw, pt, pl, Hout, Wout;
} window;

static void window_of(const sb_executor *ex, const opx *o, window *w)
{
    const sb_op *op = &ex->m->ops[o->idx];
    const sb_box *ib = &o->in[0].box;
    int conv = op->kind == SB_OP_CONV;
    w->B = (int)ext(o, 0);
    w->C = (int)ext(o, 1);
    w->Hin = (int)(ib->hi[2] - ib->lo[2]);
    w->Win = (int)(ib->hi[3] - ib->lo[3]);
    w->Hout = (int)ext(o, 2);
    w->Wout = (int)ext(o, 3);
    w->R = conv ? (int)ext(o, 4) : op->kernel[0];
    w->S = conv ? (int)ext(o, 5) : op->kernel[1];
    w->N = conv ? (int)ext(o, 6) : w->C;
    w->sh = op->stride[0];
    w->sw = op->stride[1];
    int64_t r0 = conv ? o->lo[4] : 0, s0 = conv ? o->lo[5] : 0;
    w->pt = (int)(ib->lo[2] - o->lo[2] * op->stride[0] + op->pad[0] - r0);
    w->pl = (int)(ib->lo[3] - o->lo[3] * op->stride[1] + op->pad[1] - s0);
}

static int conv_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    window w;
    window_of(ex, o, &w);
    tbuf work = {0};
    const float *wt = ex->params[o->params[0]].w.p;
    if (exec_tb_alloc_n(ex, &work,
                        (int64_t)ex->be->conv2d_work_floats(w.C, w.R, w.S, w.N, w.Hout, w.Wout), err))
        return -1;
    /* the relu follows the partial-sum all-reduce; with none, the kernel fuses it */
    int fuse_relu = op->pw > 0 && o->kcomm == MPI_COMM_NULL;
    double t0 = exec_tick(ex);
    ex->be->conv2d_forward(o->out[0].p, o->in[0].p, wt, NULL, work.p, w.B, w.C, w.Hin, w.Win, w.N,
                           w.R, w.S, w.sh, w.sw, w.pt, w.pl, w.Hout, w.Wout, fuse_relu);
    ex->times[o->idx].compute_s += exec_tick(ex) - t0;
    exec_tb_free(ex, &work);
    if (exec_allreduce(ex, o, o->out[0].p, (size_t)o->out[0].n, MPI_SUM, o->kcomm, err))
        return -1;
    if (op->pw > 0 && !fuse_relu)
        relu_inplace(ex, o->out[0].p, o->out[0].n);
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
    if (exec_tb_alloc_n(ex, &work,
                        (int64_t)ex->be->conv2d_work_floats(w.C, w.R, w.S, w.N, w.Hout, w.Wout), err))
        return -1;
    double t0 = exec_tick(ex);
    if (ex->m->tensors[op->in[0].tensor].kind != SB_TENSOR_INPUT)
        ex->be->conv2d_backward_data(o->din[0].p, work.p, o->dout[0].p, relu_out, pa->w.p, w.B, w.C,
                                     w.Hin, w.Win, w.N, w.R, w.S, w.sh, w.sw, w.pt, w.pl, w.Hout,
                                     w.Wout);
    ex->be->conv2d_backward_filter(pa->dw.p, NULL, work.p, o->dout[0].p, relu_out, o->in[0].p, w.B,
                                   w.C, w.Hin, w.Win, w.N, w.R, w.S, w.sh, w.sw, w.pt, w.pl, w.Hout,
                                   w.Wout);
    ex->times[o->idx].compute_s += exec_tick(ex) - t0;
    exec_tb_free(ex, &work);
    return 0;
}

static int pool_forward(sb_executor *ex, opx *o)
{
    const sb_op *op = &ex->m->ops[o->idx];
    window w;
    window_of(ex, o, &w);
    double t0 = exec_tick(ex);
    if (op->pool_avg)
        ex->be->avgpool2d_forward(o->out[0].p, o->in[0].p, w.B, w.C, w.Hin, w.Win, w.R, w.S, w.sh,
                                  w.sw, w.pt, w.pl, w.Hout, w.Wout, 1);
    else
        ex->be->maxpool2d_forward(o->out[0].p, o->in[0].p, w.B, w.C, w.Hin, w.Win, w.R, w.S, w.sh,
                                  w.sw, w.pt, w.pl, w.Hout, w.Wout);
    ex->times[o->idx].compute_s += exec_tick(ex) - t0;
    return 0;
}

static int pool_backward(sb_executor *ex, opx *o)
{
    const sb_op *op = &ex->m->ops[o->idx];
    window w;
    window_of(ex, o, &w);
    if (ex->m->tensors[op->in[0].tensor].kind == SB_TENSOR_INPUT)
        return 0;
    double t0 = exec_tick(ex);
    if (op->pool_avg)
        ex->be->avgpool2d_backward(o->din[0].p, o->dout[0].p, w.B, w.C, w.Hin, w.Win, w.R, w.S,
                                   w.sh, w.sw, w.pt, w.pl, w.Hout, w.Wout, 1);
    else
        ex->be->maxpool2d_backward(o->din[0].p, o->dout[0].p, o->in[0].p, w.B, w.C, w.Hin, w.Win,
                                   w.R, w.S, w.sh, w.sw, w.pt, w.pl, w.Hout, w.Wout);
    ex->times[o->idx].compute_s += exec_tick(ex) - t0;
    return 0;
}

/* ---- embedding --------------------------------------------------------------- */

static int ensure_ids(sb_executor *ex, opx *o, sb_error *err)
{
    if (o->ids.p || !o->in[0].n)
        return 0;
    /* token ids produced by another op: convert */
    int64_t n = o->in[0].n;
    float *h = malloc((size_t)n * sizeof *h);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!h || !ids || exec_tb_alloc_n(ex, &o->ids, n, err)) {
        free(h);
        free(ids);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    ex->be->to_host(h, o->in[0].p, (size_t)n);
    for (int64_t k = 0; k < n; k++)
        ids[k] = (int32_t)h[k];
    ex->be->from_host(o->ids.p, (const float *)ids, (size_t)n);
    free(h);
    free(ids);
    return 0;
}

static int embedding_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims;
    if (ensure_ids(ex, o, err))
        return -1;
    int M = 1;
    for (int i = 0; i < nd - 2; i++)
        M *= (int)ext(o, i);
    param *pa = &ex->params[o->params[0]];
    double t0 = exec_tick(ex);
    ex->be->embedding_forward(o->out[0].p, (const int32_t *)o->ids.p, pa->w.p, M, (int)ext(o, nd - 2),
                              (int)o->lo[nd - 1], (int)o->hi[nd - 1]);
    ex->times[o->idx].compute_s += exec_tick(ex) - t0;
    return exec_allreduce(ex, o, o->out[0].p, (size_t)o->out[0].n, MPI_SUM, o->kcomm, err);
}

static int embedding_backward(sb_executor *ex, opx *o)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims, M = 1;
    for (int i = 0; i < nd - 2; i++)
        M *= (int)ext(o, i);
    param *pa = &ex->params[o->params[0]];
    ex->be->embedding_backward(pa->dw.p, o->dout[0].p, (const int32_t *)o->ids.p, M,
                               (int)ext(o, nd - 2), (int)o->lo[nd - 1], (int)o->hi[nd - 1]);
    return 0;
}

/* ---- norms ------------------------------------------------------------------------ */

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
        int B = (int)ext(o, 0), C = (int)ext(o, 1), HW = nd == 4 ? (int)(ext(o, 2) * ext(o, 3)) : 1;
        long count = (long)op->dims[0].size * (nd == 4 ? (long)(op->dims[2].size * op->dims[3].size) : 1);
        if (exec_tb_alloc_n(ex, &st, 2 * C, err) || exec_tb_alloc_n(ex, &o->save[0], 2 * C, err))
            return -1;
        /* two passes: the mean, then the centered sum of squares */
        ex->be->batchnorm_stats(st.p, st.p + C, o->in[0].p, B, C, HW);
        if (exec_allreduce(ex, o, st.p, (size_t)C, MPI_SUM, o->acomm, err))
            return -1;
        ex->be->norm_mean(o->save[0].p, st.p, C, count);
        ex->be->batchnorm_centered(st.p + C, o->in[0].p, o->save[0].p, B, C, HW);
        if (exec_allreduce(ex, o, st.p + C, (size_t)C, MPI_SUM, o->acomm, err))
            return -1;
        ex->be->norm_rstd(o->save[0].p + C, st.p + C, C, count, EPS);
        ex->be->batchnorm_apply(o->out[0].p, o->in[0].p, o->save[0].p, o->save[0].p + C, gamma, beta,
                                B, C, HW, 0);
        exec_tb_free(ex, &st);
        return 0;
    }
    int a = op->axis, perm[SB_MAX_DIMS], inv[SB_MAX_DIMS], dims[SB_MAX_DIMS], pd[SB_MAX_DIMS];
    int last = axis_last_perm(nd, a, perm, inv);
    box_dims(&o->in[0].box, dims);
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
        ex->be->permute(xp.p, x, nd, dims, perm, 0);
        x = xp.p;
        y = yp.p;
    }
    if (exec_tb_alloc_n(ex, &st, 2 * (int64_t)M, err) || exec_tb_alloc_n(ex, &o->save[0], 2 * (int64_t)M, err))
        return -1;
    long count = (long)op->dims[a].size;
    ex->be->layernorm_stats(st.p, st.p + M, x, M, D);
    if (exec_allreduce(ex, o, st.p, (size_t)M, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->norm_mean(o->save[0].p, st.p, M, count);
    ex->be->layernorm_centered(st.p + M, x, o->save[0].p, M, D);
    if (exec_allreduce(ex, o, st.p + M, (size_t)M, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->norm_rstd(o->save[0].p + M, st.p + M, M, count, EPS);
    ex->be->layernorm_apply(y, x, o->save[0].p, o->save[0].p + M, gamma, beta, M, D);
    if (!last)
        ex->be->permute(o->out[0].p, y, nd, pd, inv, 0);
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
        int B = (int)ext(o, 0), C = (int)ext(o, 1), HW = nd == 4 ? (int)(ext(o, 2) * ext(o, 3)) : 1;
        long count = (long)op->dims[0].size * (nd == 4 ? (long)(op->dims[2].size * op->dims[3].size) : 1);
        if (exec_tb_alloc_n(ex, &st, 2 * C, err))
            return -1;
        ex->be->batchnorm_backward_stats(st.p, st.p + C, o->dout[0].p, NULL, o->in[0].p, o->save[0].p,
                                         o->save[0].p + C, B, C, HW);
        if (exec_allreduce(ex, o, st.p, (size_t)(2 * C), MPI_SUM, o->acomm, err))
            return -1;
        if (want_dx)
            ex->be->batchnorm_backward_apply(o->din[0].p, o->dout[0].p, NULL, o->in[0].p,
                                             o->save[0].p, o->save[0].p + C, pg->w.p, st.p,
                                             st.p + C, B, C, HW, count);
        const float *g1[2] = {pg->dw.p, st.p + C}, *g2[2] = {pb->dw.p, st.p};
        ex->be->add_forward(pg->dw.p, g1, 2, (size_t)C, 0);
        ex->be->add_forward(pb->dw.p, g2, 2, (size_t)C, 0);
        exec_tb_free(ex, &st);
        return 0;
    }
    int a = op->axis, perm[SB_MAX_DIMS], inv[SB_MAX_DIMS], dims[SB_MAX_DIMS], pd[SB_MAX_DIMS];
    int last = axis_last_perm(nd, a, perm, inv);
    box_dims(&o->in[0].box, dims);
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
        ex->be->permute(xp.p, x, nd, dims, perm, 0);
        ex->be->permute(dyp.p, dy, nd, dims, perm, 0);
        ex->be->zero(dxp.p, (size_t)dxp.n);
        x = xp.p;
        dy = dyp.p;
        dx = dxp.p;
    }
    if (exec_tb_alloc_n(ex, &st, 2 * (int64_t)M, err))
        return -1;
    ex->be->layernorm_backward_stats(st.p, st.p + M, dy, x, o->save[0].p, o->save[0].p + M, pg->w.p,
                                     M, D);
    if (exec_allreduce(ex, o, st.p, (size_t)(2 * M), MPI_SUM, o->acomm, err))
        return -1;
    ex->be->layernorm_backward_apply(want_dx ? dx : NULL, pg->dw.p, pb->dw.p, dy, x, o->save[0].p,
                                     o->save[0].p + M, pg->w.p, st.p, st.p + M, M, D,
                                     (int)op->dims[a].size);
    if (!last && want_dx)
        ex->be->permute(o->din[0].p, dx, nd, pd, inv, 1);
    exec_tb_free(ex, &st);
    exec_tb_free(ex, &xp);
    exec_tb_free(ex, &dyp);
    exec_tb_free(ex, &dxp);
    return 0;
}

/* ---- softmax and the loss -------------------------------------------------------- */

static void outer_inner(const opx *o, int nd, int a, int *outer, int *A, int *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < a; i++)
        *outer *= (int)ext(o, i);
    for (int i = a + 1; i < nd; i++)
        *inner *= (int)ext(o, i);
    *A = (int)ext(o, a);
}

static int softmax_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int outer, A, inner;
    outer_inner(o, op->ndims, op->axis, &outer, &A, &inner);
    tbuf mx = {0}, se = {0};
    int64_t rows = (int64_t)outer * inner;
    if (exec_tb_alloc_n(ex, &mx, rows, err) || exec_tb_alloc_n(ex, &se, rows, err))
        return -1;
    ex->be->softmax_partial_max(mx.p, o->in[0].p, outer, A, inner);
    if (exec_allreduce(ex, o, mx.p, (size_t)rows, MPI_MAX, o->acomm, err))
        return -1;
    ex->be->softmax_partial_sumexp(se.p, o->in[0].p, mx.p, outer, A, inner);
    if (exec_allreduce(ex, o, se.p, (size_t)rows, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->softmax_apply(o->out[0].p, o->in[0].p, mx.p, se.p, outer, A, inner);
    exec_tb_free(ex, &mx);
    exec_tb_free(ex, &se);
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
    ex->be->softmax_backward_dot(dot.p, o->dout[0].p, o->out[0].p, outer, A, inner);
    if (exec_allreduce(ex, o, dot.p, (size_t)rows, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->softmax_backward_apply(o->din[0].p, o->dout[0].p, o->out[0].p, dot.p, outer, A, inner);
    exec_tb_free(ex, &dot);
    return 0;
}

static int xent_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims, M = 1, V = (int)ext(o, nd - 1), v0 = (int)o->lo[nd - 1];
    double total_rows = 1;
    for (int i = 0; i < nd - 1; i++) {
        M *= (int)ext(o, i);
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
    ex->be->softmax_partial_max(mx, o->in[0].p, M, V, 1);
    if (exec_allreduce(ex, o, mx, (size_t)M, MPI_MAX, o->acomm, err))
        return -1;
    ex->be->softmax_partial_sumexp(se, o->in[0].p, mx, M, V, 1);
    ex->be->xent_partial_picked(pk.p, o->in[0].p, lab, M, V, v0);
    if (exec_allreduce(ex, o, se, (size_t)M, MPI_SUM, o->acomm, err)
        || exec_allreduce(ex, o, pk.p, (size_t)M, MPI_SUM, o->acomm, err))
        return -1;
    ex->be->xent_loss(loss.p, mx, se, pk.p, lab, M);
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
    int nd = op->ndims, M = 1, V = (int)ext(o, nd - 1), v0 = (int)o->lo[nd - 1];
    for (int i = 0; i < nd - 1; i++)
        M *= (int)ext(o, i);
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
    ex->be->softmax_xent_backward(o->din[0].p, dl.p, o->in[0].p, o->save[0].p, o->save[1].p,
                                  (const int32_t *)o->ids.p, M, V, v0);
    exec_tb_free(ex, &dl);
    return 0;
}

/* ---- data movement ops ----------------------------------------------------------- */

/* dst box region [lo, lo+size) of a buffer shaped dst_dims (+)= src shaped size */
static void put(sb_executor *ex, float *dst, const int *dst_dims, const int *lo, const float *src,
                const int *size, int nd, int acc)
{
    int zero[SB_MAX_DIMS] = {0};
    ex->be->box_copy(dst, dst_dims, lo, src, size, zero, size, nd, acc);
}

static void get(sb_executor *ex, float *dst, const int *size, const float *src, const int *src_dims,
                const int *lo, int nd, int acc)
{
    int zero[SB_MAX_DIMS] = {0};
    ex->be->box_copy(dst, size, zero, src, src_dims, lo, size, nd, acc);
}

/* concat/split/stack/unstack: the many-sided tensor (big) and its parts, all
 * boxes of rank nd where parts have size 1 on a stacked axis */
static int parts_move(sb_executor *ex, opx *o, int backward)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int many_in = op->kind == SB_OP_CONCAT || op->kind == SB_OP_STACK;
    const tbuf *big = many_in ? &o->out[0] : &o->in[0];
    float *bigd = many_in ? o->dout[0].p : o->din[0].p;
    int nd = big->box.nd, bdims[SB_MAX_DIMS];
    box_dims(&big->box, bdims);
    int nparts = many_in ? op->nin : op->nout;
    int stacked = op->kind == SB_OP_STACK || op->kind == SB_OP_UNSTACK;
    int a = op->axis, offset = 0;
    for (int k = 0; k < nparts; k++) {
        tbuf *part = many_in ? &o->in[k] : &o->out[k];
        float *partd = many_in ? o->din[k].p : o->dout[k].p;
        int pdims[SB_MAX_DIMS], lo[SB_MAX_DIMS] = {0};
        if (stacked) {
            int n = 0;
            for (int i = 0; i < nd; i++)
                pdims[i] = i == a ? 1 : (int)(part->box.hi[n] - part->box.lo[n]), n += i != a;
        } else {
            box_dims(&part->box, pdims);
        }
        lo[a] = offset;
        offset += pdims[a];
        if (!part->n)
            continue;
        if (!backward) {
            if (many_in)
                put(ex, big->p, bdims, lo, part->p, pdims, nd, 0);
            else
                get(ex, part->p, pdims, big->p, bdims, lo, nd, 0);
        } else {
            int input_part = many_in && ex->m->tensors[op->in[k].tensor].kind == SB_TENSOR_INPUT;
            if (many_in && !input_part)
                get(ex, partd, pdims, bigd, bdims, lo, nd, 1);
            else if (!many_in && ex->m->tensors[op->in[0].tensor].kind != SB_TENSOR_INPUT)
                put(ex, bigd, bdims, lo, partd, pdims, nd, 1);
        }
    }
    return 0;
}

static int copy_flat(sb_executor *ex, float *dst, const float *src, int64_t n, int acc)
{
    int d = (int)n, z = 0;
    if (n)
        ex->be->box_copy(dst, &d, &z, src, &d, &z, &d, 1, acc);
    return 0;
}

static int transpose_move(sb_executor *ex, opx *o, int backward)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = o->in[0].box.nd, dims[SB_MAX_DIMS], odims[SB_MAX_DIMS], inv[SB_MAX_DIMS];
    box_dims(&o->in[0].box, dims);
    box_dims(&o->out[0].box, odims);
    for (int j = 0; j < nd; j++)
        inv[op->perm[j]] = j;
    if (!o->in[0].n)
        return 0;
    if (!backward)
        ex->be->permute(o->out[0].p, o->in[0].p, nd, dims, op->perm, 0);
    else
        ex->be->permute(o->din[0].p, o->dout[0].p, nd, odims, inv, 1);
    return 0;
}

/* ---- dispatch --------------------------------------------------------------------- */

/* elements averaged by a reduce-mean: the global sizes of its reduced axes */
static long reduced_count(const sb_op *op)
{
    long count = 1;
    for (int i = 0; i < op->ndims; i++)
        if (op->axes & (1u << i))
            count *= (long)op->dims[i].size;
    return count;
}

static int forward_kind(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int rc = 0;
    switch (op->kind) {
    case SB_OP_DENSE:
    case SB_OP_EINSUM: rc = gemm_forward(ex, o, err); break;
    case SB_OP_CONV: rc = conv_forward(ex, o, err); break;
    case SB_OP_POOL: rc = pool_forward(ex, o); break;
    case SB_OP_EMBEDDING: rc = embedding_forward(ex, o, err); break;
    case SB_OP_NORM: rc = norm_forward(ex, o, err); break;
    case SB_OP_SOFTMAX: rc = softmax_forward(ex, o, err); break;
    case SB_OP_SOFTMAX_XENT: rc = xent_forward(ex, o, err); break;
    case SB_OP_ELEMENTWISE: {
        const float *ins[SB_MAX_IO];
        for (int k = 0; k < op->nin; k++)
            ins[k] = o->in[k].p;
        if (o->out[0].n)
            ex->be->add_forward(o->out[0].p, ins, op->nin, (size_t)o->out[0].n, op->pw > 0);
        break;
    }
    case SB_OP_REDUCE_MEAN: {
        int dims[SB_MAX_DIMS];
        box_dims(&o->in[0].box, dims);
        ex->be->reduce_mean_forward(o->out[0].p, o->in[0].p, op->ndims, dims, op->axes,
                                    reduced_count(op));
        rc = exec_allreduce(ex, o, o->out[0].p, (size_t)o->out[0].n, MPI_SUM, o->acomm, err);
        break;
    }
    case SB_OP_CONCAT:
    case SB_OP_SPLIT:
    case SB_OP_STACK:
    case SB_OP_UNSTACK: rc = parts_move(ex, o, 0); break;
    case SB_OP_FLATTEN:
    case SB_OP_UNFLATTEN: rc = copy_flat(ex, o->out[0].p, o->in[0].p, o->in[0].n, 0); break;
    case SB_OP_TRANSPOSE: rc = transpose_move(ex, o, 0); break;
    default: rc = sb_fail(err, SB_EXIT_INTERNAL, "op '%s': kind %s not handled", op->name,
                          sb_op_kind_name(op->kind));
    }
    return rc;
}

static int backward_kind(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int rc = 0;
    switch (op->kind) {
    case SB_OP_DENSE:
    case SB_OP_EINSUM: rc = gemm_backward(ex, o, err); break;
    case SB_OP_CONV: rc = conv_backward(ex, o, err); break;
    case SB_OP_POOL: rc = pool_backward(ex, o); break;
    case SB_OP_EMBEDDING: rc = embedding_backward(ex, o); break;
    case SB_OP_NORM: rc = norm_backward(ex, o, err); break;
    case SB_OP_SOFTMAX: rc = softmax_backward(ex, o, err); break;
    case SB_OP_SOFTMAX_XENT: rc = xent_backward(ex, o, err); break;
    case SB_OP_ELEMENTWISE: {
        float *d[SB_MAX_IO];
        for (int k = 0; k < op->nin; k++)
            d[k] = ex->m->tensors[op->in[k].tensor].kind == SB_TENSOR_INPUT ? NULL : o->din[k].p;
        if (o->out[0].n)
            ex->be->add_backward(d, o->dout[0].p, op->pw > 0 ? o->out[0].p : NULL, op->nin,
                                 (size_t)o->out[0].n);
        break;
    }
    case SB_OP_REDUCE_MEAN: {
        int dims[SB_MAX_DIMS];
        box_dims(&o->in[0].box, dims);
        ex->be->reduce_mean_backward(o->din[0].p, o->dout[0].p, op->ndims, dims, op->axes,
                                     reduced_count(op));
        break;
    }
    case SB_OP_CONCAT:
    case SB_OP_SPLIT:
    case SB_OP_STACK:
    case SB_OP_UNSTACK: rc = parts_move(ex, o, 1); break;
    case SB_OP_FLATTEN:
    case SB_OP_UNFLATTEN:
        if (ex->m->tensors[op->in[0].tensor].kind != SB_TENSOR_INPUT)
            rc = copy_flat(ex, o->din[0].p, o->dout[0].p, o->in[0].n, 1);
        break;
    case SB_OP_TRANSPOSE: rc = transpose_move(ex, o, 1); break;
    default: rc = sb_fail(err, SB_EXIT_INTERNAL, "op '%s': kind %s not handled", op->name,
                          sb_op_kind_name(op->kind));
    }
    return rc;
}

/* Runs one direction of an op on this rank's box and books its time: ops
 * that do not time their kernels themselves count all non-comm time as
 * compute. The LSTM runs on every rank (collective across layer groups). */
static int run_timed(sb_executor *ex, opx *o, int backward, sb_error *err)
{
    if (ex->m->ops[o->idx].kind == SB_OP_LSTM)
        return backward ? lstm_backward(ex, o, err) : lstm_forward(ex, o, err);
    if (!o->in_grid)
        return 0;
    sb_op_time *t = &ex->times[o->idx];
    double t0 = exec_tick(ex), c0 = t->comm_s, k0 = t->compute_s;
    int rc = backward ? backward_kind(ex, o, err) : forward_kind(ex, o, err);
    if (t->compute_s == k0)
        t->compute_s += (exec_tick(ex) - t0) - (t->comm_s - c0);
    return rc;
}

int exec_forward_op(sb_executor *ex, opx *o, sb_error *err) { return run_timed(ex, o, 0, err); }

int exec_backward_op(sb_executor *ex, opx *o, sb_error *err) { return run_timed(ex, o, 1, err); }
