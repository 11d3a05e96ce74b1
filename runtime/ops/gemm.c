/* gemm.c: the GEMM-like kinds. Dense and einsum run one batched GEMM in
 * canonical (batch, m, n, k) order, permuting operands that are not in it;
 * a split K dim leaves partial sums, all-reduced over kcomm before the
 * fused relu. Embedding gathers the rows of its vocab shard (zeros
 * elsewhere, summed over kcomm). */
#include <stdlib.h>
#include <string.h>

#include "common.h"

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
    ops_box_dims(box, dims);
    if (exec_tb_alloc_n(ex, tmp, sb_box_volume(box), err))
        return -1;
    ex->be->move->permute(tmp->p, src, box->nd, dims, perm, 0);
    *out = tmp->p;
    return 0;
}

/* dst (operand order) (+)= canonical buffer. */
static void from_canonical(sb_executor *ex, float *dst, const float *canon_buf, const sb_box *box,
                           const int *map, const int *canon, int accumulate)
{
    int nd = box->nd, perm[SB_MAX_DIMS], cdims[SB_MAX_DIMS], dims[SB_MAX_DIMS];
    ops_box_dims(box, dims);
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
        ex->be->move->box_copy(dst, &n1, &z, canon_buf, &n1, &z, &n1, 1, 0);
        return;
    }
    ex->be->move->permute(dst, canon_buf, nd, cdims, perm, accumulate);
}

typedef struct {
    int batch, M, N, K;
    int ca[SB_MAX_DIMS], cb[SB_MAX_DIMS], cc[SB_MAX_DIMS];
} gemm_shape;

static void gemm_shape_of(const opx *o, const roles *r, gemm_shape *s)
{
    s->batch = s->M = s->N = s->K = 1;
    for (int i = 0; i < r->nb; i++)
        s->batch *= (int)ops_ext(o, r->b[i]);
    for (int i = 0; i < r->nm; i++)
        s->M *= (int)ops_ext(o, r->mm[i]);
    for (int i = 0; i < r->nn; i++)
        s->N *= (int)ops_ext(o, r->n[i]);
    for (int i = 0; i < r->nk; i++)
        s->K *= (int)ops_ext(o, r->k[i]);
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
    int t0 = exec_mark(ex);
    float *C = c_direct ? o->out[0].p : tc.p;
    ex->be->gemm->gemm_batched(0, 0, s.M, s.N, s.K, 1.0f, A, s.K, (ptrdiff_t)s.M * s.K, B, s.N,
                               (ptrdiff_t)s.K * s.N, 0.0f, C, s.N, (ptrdiff_t)s.M * s.N, s.batch);
    if (!c_direct)
        from_canonical(ex, o->out[0].p, tc.p, &o->out[0].box, op->out[0].map, s.cc, 0);
    exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
    if (exec_allreduce(ex, o, o->out[0].p, (size_t)o->out[0].n, MPI_SUM, o->kcomm, err))
        goto out;
    if (op->pw > 0)
        ops_relu_inplace(ex, o->out[0].p, o->out[0].n);
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
        ex->be->sum->add_backward(d, o->dout[0].p, o->out[0].p, 1, (size_t)masked.n);
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
    int t0 = exec_mark(ex);
    /* a gradient already in canonical order takes the GEMM's sum directly
     * (beta 1); otherwise a temporary, permuted and added */
    if (a.grad) {
        int direct = in_canonical_order(&a.box, a.map, s.ca);
        if (!direct && exec_tb_alloc_n(ex, &g, (int64_t)s.batch * s.M * s.K, err))
            goto out;
        ex->be->gemm->gemm_batched(0, 1, s.M, s.K, s.N, 1.0f, dc.p, s.N, (ptrdiff_t)s.M * s.N, B,
                                   s.N, (ptrdiff_t)s.K * s.N, direct ? 1.0f : 0.0f,
                                   direct ? a.grad : g.p, s.K, (ptrdiff_t)s.M * s.K, s.batch);
        if (!direct)
            from_canonical(ex, a.grad, g.p, &a.box, a.map, s.ca, 1);
        exec_tb_free(ex, &g);
    }
    if (b.grad) {
        int direct = in_canonical_order(&b.box, b.map, s.cb);
        if (!direct && exec_tb_alloc_n(ex, &g, (int64_t)s.batch * s.K * s.N, err))
            goto out;
        ex->be->gemm->gemm_batched(1, 0, s.K, s.N, s.M, 1.0f, A, s.K, (ptrdiff_t)s.M * s.K, dc.p,
                                   s.N, (ptrdiff_t)s.M * s.N, direct ? 1.0f : 0.0f,
                                   direct ? b.grad : g.p, s.N, (ptrdiff_t)s.K * s.N, s.batch);
        if (!direct)
            from_canonical(ex, b.grad, g.p, &b.box, b.map, s.cb, 1);
        exec_tb_free(ex, &g);
    }
    exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
    rc = 0;
out:
    exec_tb_free(ex, &ta);
    exec_tb_free(ex, &tb);
    if (dc.n >= 0)
        exec_tb_free(ex, &dc);
    exec_tb_free(ex, &g);
    return rc;
}

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
        M *= (int)ops_ext(o, i);
    param *pa = &ex->params[o->params[0]];
    int t0 = exec_mark(ex);
    ex->be->embed->embedding_forward(o->out[0].p, (const int32_t *)o->ids.p, pa->w.p, M,
                                     (int)ops_ext(o, nd - 2), (int)o->lo[nd - 1],
                                     (int)o->hi[nd - 1]);
    exec_book(ex, o->idx, EXEC_T_COMPUTE, t0);
    return exec_allreduce(ex, o, o->out[0].p, (size_t)o->out[0].n, MPI_SUM, o->kcomm, err);
}

static int embedding_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims, M = 1;
    for (int i = 0; i < nd - 2; i++)
        M *= (int)ops_ext(o, i);
    param *pa = &ex->params[o->params[0]];
    ex->be->embed->embedding_backward(pa->dw.p, o->dout[0].p, (const int32_t *)o->ids.p, M,
                                      (int)ops_ext(o, nd - 2), (int)o->lo[nd - 1],
                                      (int)o->hi[nd - 1]);
    return 0;
}

const sb_op_runtime sb_op_runtime_dense = {.setup_groups = ops_setup_kcomm,
                                           .forward = gemm_forward,
                                           .backward = gemm_backward,
                                           .families = SB_FAM(GEMM) | SB_FAM(MOVE) | SB_FAM(SUM)};
const sb_op_runtime sb_op_runtime_einsum = {.setup_groups = ops_setup_kcomm,
                                            .forward = gemm_forward,
                                            .backward = gemm_backward,
                                            .families = SB_FAM(GEMM) | SB_FAM(MOVE) | SB_FAM(SUM)};
const sb_op_runtime sb_op_runtime_embedding = {.setup_groups = ops_setup_kcomm,
                                               .forward = embedding_forward,
                                               .backward = embedding_backward,
                                               .families = SB_FAM(EMBED)};
