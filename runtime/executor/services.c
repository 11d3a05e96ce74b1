/* services.c: the executor's services on its state (services.h): the
 * buffer pool, timing, rank groups, all-reduce and the relayout wrapper. */
#include "services.h"

#include <math.h>
#include <time.h>

#include <stdlib.h>

#include "plan.h"

/* ---- memory --------------------------------------------------------------- */

/* The buffer pool: every step allocates the same buffers in the same order,
 * so a freed buffer is kept and handed out again to the next request of
 * exactly its size (newest first). Steps after the first allocate nothing
 * from the backend and touch no fresh pages; the pool never holds more than
 * one step's peak. Released with the executor. */
static float *pool_take(sb_executor *ex, int64_t n)
{
    for (int i = ex->npool - 1; i >= 0; i--)
        if (ex->pool[i].n == n) {
            float *p = ex->pool[i].p;
            ex->pool[i] = ex->pool[--ex->npool];
            return p;
        }
    return NULL;
}

static void pool_put(sb_executor *ex, float *p, int64_t n)
{
    if (ex->npool == ex->cap_pool) {
        int cap = ex->cap_pool ? 2 * ex->cap_pool : 256;
        void *q = realloc(ex->pool, (size_t)cap * sizeof *ex->pool);
        if (!q) {
            ex->be->release(p); /* no room to keep it: give it back */
            return;
        }
        ex->pool = q;
        ex->cap_pool = cap;
    }
    ex->pool[ex->npool].p = p;
    ex->pool[ex->npool++].n = n;
}

void exec_pool_drain(sb_executor *ex)
{
    for (int i = 0; i < ex->npool; i++)
        ex->be->release(ex->pool[i].p);
    free(ex->pool);
    ex->pool = NULL;
    ex->npool = ex->cap_pool = 0;
}

int exec_tb_alloc(sb_executor *ex, tbuf *b, const sb_box *box, sb_error *err)
{
    b->box = *box;
    b->n = sb_box_volume(box);
    b->p = NULL;
    if (b->n <= 0)
        return 0;
    b->p = pool_take(ex, b->n);
    if (!b->p)
        b->p = ex->be->alloc((size_t)b->n * sizeof(float));
    if (!b->p) {
        exec_pool_drain(ex); /* memory kept for reuse may be what is missing */
        b->p = ex->be->alloc((size_t)b->n * sizeof(float));
    }
    if (!b->p)
        return sb_fail(err, SB_EXIT_INTERNAL, "rank %d: out of memory allocating %lld floats",
                       ex->rank, (long long)b->n);
    ex->live_bytes += b->n * (int64_t)sizeof(float);
    if (ex->live_bytes > ex->peak_bytes)
        ex->peak_bytes = ex->live_bytes;
    return 0;
}

int exec_tb_alloc_n(sb_executor *ex, tbuf *b, int64_t n, sb_error *err)
{
    sb_box box = {.nd = n > 0 ? 1 : 0, .lo = {0}, .hi = {n}};
    return exec_tb_alloc(ex, b, &box, err);
}

void exec_tb_free(sb_executor *ex, tbuf *b)
{
    if (b->p) {
        pool_put(ex, b->p, b->n);
        ex->live_bytes -= b->n * (int64_t)sizeof(float);
    }
    b->p = NULL;
    b->n = 0;
}

int exec_tb_zeros(sb_executor *ex, tbuf *b, const sb_box *box, sb_error *err)
{
    if (exec_tb_alloc(ex, b, box, err))
        return -1;
    if (b->n)
        ex->be->zero(b->p, (size_t)b->n);
    return 0;
}

int exec_upload(sb_executor *ex, tbuf *b, const float *host)
{
    if (b->n)
        ex->be->from_host(b->p, host, (size_t)b->n);
    return 0;
}

/* ---- timing -------------------------------------------------------------- */

int exec_mark(sb_executor *ex)
{
    int k = exec_ledger_mark(&ex->ledger);
    if (k < 0)
        return -1;
    if (ex->be->mark) {
        ex->be->mark(k);
        return k;
    }
    if (ex->be->sync)
        ex->be->sync();
    ex->ledger.t[k] = MPI_Wtime();
    if (ex->ledger.cpu) {
        struct timespec ts;
        if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
            ex->ledger.c[k] = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    return k;
}

void exec_book_span(sb_executor *ex, int op, unsigned field, int m0, int m1)
{
    exec_booking b = {.op = op, .field = field, .m0 = m0, .m1 = m1};
    exec_ledger_book(&ex->ledger, &b); /* out of memory: this span goes unbooked */
}

int exec_book(sb_executor *ex, int op, unsigned field, int m0)
{
    int m1 = exec_mark(ex);
    exec_book_span(ex, op, field, m0, m1);
    return m1;
}

int exec_nbooked(const sb_executor *ex) { return ex->ledger.nb; }

int exec_book_rest(sb_executor *ex, int op, unsigned field, int m0, int n0, unsigned net,
                   int clamp)
{
    int to = ex->ledger.nb, m1 = exec_mark(ex);
    exec_booking b = {.op = op, .field = field, .m0 = m0, .m1 = m1, .from = n0, .to = to,
                      .net = net, .clamp = clamp};
    exec_ledger_book(&ex->ledger, &b);
    return m1;
}

int exec_booked_since(const sb_executor *ex, int n0, int op, unsigned field)
{
    return exec_ledger_booked(&ex->ledger, n0, op, field);
}

/* the marks' times from the backend (host marks are set when taken) */
static int read_marks(sb_executor *ex)
{
    exec_ledger *l = &ex->ledger;
    if (!ex->be->marks_read || !l->nmarks)
        return 0;
    return ex->be->marks_read(l->nmarks, l->t);
}

double exec_rest_now(sb_executor *ex, int op, int m0, int n0, unsigned net)
{
    int m1 = exec_mark(ex);
    if (m0 < 0 || m1 < 0 || read_marks(ex))
        return 0;
    return exec_ledger_net(&ex->ledger, m0, m1, n0, ex->ledger.nb, op, net);
}

void exec_times_settle(sb_executor *ex)
{
    int read = !read_marks(ex), s0 = ex->step_mark;
    int ok = read && s0 >= 0 && s0 < ex->ledger.nmarks;
    /* the ops' phase entries and exits as seconds since the step began,
     * before the marks go */
    for (int k = 0; k < 4 * ex->m->nops; k++) {
        int mk = ex->phase_marks[k];
        ex->phase_t[k] =
            ok && mk >= 0 && mk < ex->ledger.nmarks ? ex->ledger.t[mk] - ex->ledger.t[s0] : NAN;
        ex->phase_marks[k] = -1;
    }
    ex->step_mark = -1;
    if (!read)
        exec_ledger_clear(&ex->ledger); /* no times this step */
    else
        exec_ledger_settle(&ex->ledger, ex->times);
}

/* ---- groups ---------------------------------------------------------------- */

int exec_coords(const sb_executor *ex, const opx *o, int r, int *g)
{
    if (r < o->r0 || r >= o->r0 + o->nr)
        return 0;
    return plan_coords(o->c, ex->m->ops[o->idx].ndims, r - o->r0, g);
}

int exec_make_group(sb_executor *ex, const opx *o, uint32_t free_mask, MPI_Comm *out,
                    sb_error *err)
{
    *out = MPI_COMM_NULL;
    int nd = ex->m->ops[o->idx].ndims;
    if (plan_group_size(o->c, nd, free_mask) <= 1)
        return 0;
    int *color = malloc((size_t)ex->size * sizeof *color);
    if (!color)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int r = 0; r < ex->size; r++) {
        int g[SB_MAX_DIMS];
        color[r] = exec_coords(ex, o, r, g) ? plan_group_color(o->c, nd, r - o->r0, free_mask)
                                            : -1;
    }
    int rc = sb_group_get(ex->groups, color, out, err);
    free(color);
    return rc;
}

int exec_allreduce(sb_executor *ex, opx *o, float *p, size_t n, MPI_Op op, MPI_Comm comm,
                     sb_error *err)
{
    if (comm == MPI_COMM_NULL || n == 0)
        return 0;
    int t0 = o ? exec_mark(ex) : -1;
    int rc = ex->be->allreduce(p, n, op, comm);
    if (o)
        exec_book(ex, o->idx, EXEC_T_COMM, t0);
    if (rc)
        return sb_fail(err, SB_EXIT_INTERNAL, "rank %d: all-reduce failed (MPI error %d)",
                       ex->rank, rc);
    return 0;
}

/* ---- relayout with host staging --------------------------------------------- */

int exec_run_relayout(sb_executor *ex, opx *o, sb_relayout *r, const tbuf *src, tbuf *dst,
                        sb_error *err)
{
    int t0 = o ? exec_mark(ex) : -1;
    int rc;
    if (ex->be->host_memory) {
        rc = sb_relayout_run(r, src->p, dst->p, err);
    } else if (ex->be->alltoallv) {
        /* in backend memory: pack, exchange, unpack there */
        const sb_relayout_mem mem = {ex->be->move->box_copy, ex->be->zero, ex->be->alloc,
                                     ex->be->release, ex->be->alltoallv};
        rc = sb_relayout_run_mem(r, src->p, dst->p, &mem, err);
    } else {
        float *hs = src->n ? malloc((size_t)src->n * sizeof(float)) : NULL;
        float *hd = dst->n ? malloc((size_t)dst->n * sizeof(float)) : NULL;
        if ((src->n && !hs) || (dst->n && !hd)) {
            free(hs);
            free(hd);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory staging a relayout");
        }
        if (src->n)
            ex->be->to_host(hs, src->p, (size_t)src->n);
        rc = sb_relayout_run(r, hs, hd, err);
        if (!rc && dst->n)
            ex->be->from_host(dst->p, hd, (size_t)dst->n);
        free(hs);
        free(hd);
    }
    if (o)
        exec_book(ex, o->idx, EXEC_T_COMM, t0);
    return rc;
}


int exec_move(sb_executor *ex, opx *o, sb_relayout *r, int tag, const tbuf *src, tbuf *dst,
              sb_error *err)
{
    int t0 = o ? exec_mark(ex) : -1;
    if (!ex->p2p) {
        int rc1 = exec_run_relayout(ex, o, r, src, dst, err);
        if (o)
            exec_book(ex, o->idx, EXEC_T_RELAYOUT, t0);
        return rc1;
    }
    int rc;
    if (ex->be->host_memory) {
        rc = sb_relayout_run_p2p(r, src->p, dst->p, tag, ex->pending, err);
    } else {
        float *hs = src->n ? malloc((size_t)src->n * sizeof(float)) : NULL;
        float *hd = dst->n ? malloc((size_t)dst->n * sizeof(float)) : NULL;
        if ((src->n && !hs) || (dst->n && !hd)) {
            free(hs);
            free(hd);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory staging a relayout");
        }
        if (src->n)
            ex->be->to_host(hs, src->p, (size_t)src->n);
        rc = sb_relayout_run_p2p(r, hs, hd, tag, ex->pending, err);
        if (!rc && dst->n)
            ex->be->from_host(dst->p, hd, (size_t)dst->n);
        free(hs);
        free(hd);
    }
    if (o) {
        int t1 = exec_book(ex, o->idx, EXEC_T_COMM, t0);
        exec_book_span(ex, o->idx, EXEC_T_RELAYOUT, t0, t1);
    }
    return rc;
}
