/* params.c: an executor's trained weights (params.h) and the public
 * accessors of runtime.h that read and write them. */
#include "params.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "services.h"

/* ---- params ------------------------------------------------------------------- */

static int zeros_n(sb_executor *ex, tbuf *b, int64_t n, sb_error *err);
static int zero_slices(sb_executor *ex, param *pa, int64_t unit, sb_error *err);

/* The backend told that pa's whole shard (w) holds new values
 * (sb_backend.weight_set: the cuda backend's bf16 copy is refreshed). */
static void weight_changed(sb_executor *ex, const param *pa)
{
    if (ex->be->weight_set && pa->w.p && pa->w.n)
        ex->be->weight_set(pa->w.p, (size_t)pa->w.n);
}

/* pa's whole shard back to the pool, the backend told first. */
static void weight_free(sb_executor *ex, param *pa)
{
    if (ex->be->weight_set && pa->w.p)
        ex->be->weight_set(pa->w.p, 0);
    exec_tb_free(ex, &pa->w);
}

static int add_param(sb_executor *ex, opx *o, const char *suffix, int nd, const int64_t *shape,
                     const int *map, double scale, double offset, int slot)
{
    if (ex->nparams == SB_EXEC_MAX_PARAMS_TOTAL)
        return -1;
    param *pa = &ex->params[ex->nparams];
    memset(pa, 0, sizeof *pa);
    pa->op = o->idx;
    pa->slot = slot;
    snprintf(pa->name, sizeof pa->name, "%s%s", ex->m->ops[o->idx].name, suffix);
    pa->nd = nd;
    for (int i = 0; i < nd; i++) {
        pa->shape[i] = shape[i];
        pa->map[i] = map[i];
    }
    pa->scale = scale;
    pa->offset = offset;
    pa->gcomm = MPI_COMM_NULL;
    pa->owner = -1;
    o->params[o->nparams++] = ex->nparams;
    return ex->nparams++;
}

void exec_param_box(const sb_executor *ex, const param *pa, const int *c, const int *g, sb_box *b)
{
    const sb_op *op = &ex->m->ops[pa->op];
    int64_t lo[SB_MAX_DIMS], hi[SB_MAX_DIMS];
    plan_iter_box(op, c, g, lo, hi);
    b->nd = pa->nd;
    for (int j = 0; j < pa->nd; j++) {
        if (pa->map[j] >= 0) {
            b->lo[j] = lo[pa->map[j]];
            b->hi[j] = hi[pa->map[j]];
        } else {
            b->lo[j] = 0;
            b->hi[j] = pa->shape[j];
        }
    }
}

/* Whether tensor t is a tied weight (`tie`; tied.c makes its param a copy). */
static int tied_tensor(const sb_model *m, int t)
{
    for (int i = 0; i < m->ntied && i < 4; i++)
        if (m->tied[i] == t)
            return 1;
    return 0;
}

int exec_declare_params(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims;
    for (int k = 0; k < SB_MAX_IO; k++)
        o->param_of_slot[k] = -1;
    double fan = 1;
    for (int i = 0; i < nd; i++)
        if (op->role[i] == SB_ROLE_K)
            fan *= (double)op->dims[i].size;
    double sc = 1.0 / sqrt(fan > 0 ? fan : 1);
    for (int w = 0; w < op->nweights; w++) {
        const sb_weight *wt = &op->weights[w];
        if (add_param(ex, o, wt->suffix, wt->ndims, wt->size, wt->map, wt->init_scale, wt->init_offset, -1) < 0)
            return sb_fail(err, SB_EXIT_INPUT, "too many weights");
    }
    for (int k = 0; k < op->nin; k++) {
        const sb_tensor *t = &ex->m->tensors[op->in[k].tensor];
        if (t->kind != SB_TENSOR_WEIGHT)
            continue;
        for (int q = 0; q < ex->nparams; q++)
            if (ex->params[q].slot >= 0 && ex->params[q].tensor == op->in[k].tensor)
                return sb_fail(err, SB_EXIT_INPUT,
                               "weight '%s'%s is used by ops '%s' and '%s' (shared weights are not "
                               "supported%s)", t->name, tied_tensor(ex->m, op->in[k].tensor)
                               ? " (tied to an embedding's table)" : "",
                               ex->m->ops[ex->params[q].op].name, op->name,
                               tied_tensor(ex->m, op->in[k].tensor)
                               ? ": a tied weight is read by one op besides its embedding" : "");
        int64_t sh[SB_MAX_DIMS];
        for (int j = 0; j < t->ndims; j++)
            sh[j] = t->dims[j].size;
        int pi = add_param(ex, o, "", t->ndims, sh, op->in[k].map, sc, 0, k);
        if (pi < 0)
            return sb_fail(err, SB_EXIT_INPUT, "too many weights");
        snprintf(ex->params[pi].name, sizeof ex->params[pi].name, "%s", t->name);
        ex->params[pi].tensor = op->in[k].tensor;
        o->param_of_slot[k] = pi;
    }
    return 0;
}

int exec_init_params(sb_executor *ex, sb_error *err)
{
    /* the gradient groups first, on every rank (collective) ... */
    for (int pi = 0; pi < ex->nparams; pi++) {
        param *pa = &ex->params[pi];
        opx *o = &ex->ops[pa->op];
        const sb_op *op = &ex->m->ops[pa->op];
        uint32_t mapped = 0;
        for (int j = 0; j < pa->nd; j++)
            if (pa->map[j] >= 0)
                mapped |= 1u << pa->map[j];
        pa->grad_free = ((1u << op->ndims) - 1) & ~mapped;
        /* batch norm statistics are already global: no gradient all-reduce */
        if (op->kind == SB_OP_NORM && op->batchnorm)
            pa->grad_free = 0;
        if (exec_make_group(ex, o, pa->grad_free, &pa->gcomm, err))
            return -1;
    }
    /* ... then this rank's shards, with no collective between them: a rank
     * that runs out of memory here returns, and the caller agrees on it */
    for (int pi = 0; pi < ex->nparams; pi++) {
        param *pa = &ex->params[pi];
        opx *o = &ex->ops[pa->op];
        pa->zq = 1;
        if (!o->in_grid)
            continue;
        exec_param_box(ex, pa, o->c, o->g, &pa->box);
        pa->n = sb_box_volume(&pa->box);
        /* a tied copy (tied.c): its weight whole (pulled each step), its
         * gradient sliced in whole rows of its box under ZeRO 2 and 3 */
        int copy = pa->owner >= 0;
        if (copy && ex->zero < 2) {
            pa->zlo = 0;
            pa->zhi = pa->n;
        } else if (zero_slices(ex, pa, copy && pa->n ? pa->box.hi[1] - pa->box.lo[1] : 1, err)) {
            return -1;
        }
        int z = zero_on(ex, pa) ? ex->zero : 0, zw = copy ? 0 : z; /* zw: the weight's */
        int64_t k = pa->zhi - pa->zlo; /* the slice (the shard without ZeRO) */
        if (zw < 3 ? exec_tb_alloc(ex, &pa->w, &pa->box, err) : exec_tb_alloc_n(ex, &pa->ws, k, err))
            return -1;
        if (z < 2 ? exec_tb_zeros(ex, &pa->dw, &pa->box, err) : zeros_n(ex, &pa->dws, k, err))
            return -1;
        if (ex->update == SB_UPDATE_ADAM && pa->owner < 0
            && (zeros_n(ex, &pa->m, k, err) || zeros_n(ex, &pa->v, k, err)))
            return -1;
        float *h = malloc((size_t)(pa->n ? pa->n : 1) * sizeof(float));
        if (!h)
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        exec_gen_box(h, &pa->box, pa->shape, ex->seed, exec_name_tag(pa->name), 0, pa->scale, pa->offset, 0);
        if (zw < 3) {
            exec_upload(ex, &pa->w, h);
            weight_changed(ex, pa);
        } else
            exec_upload(ex, &pa->ws, h + pa->zlo);
        free(h);
    }
    return 0;
}

/* ---- ZeRO ------------------------------------------------------------------------ */

int zero_on(const sb_executor *ex, const param *pa) { return ex->zero >= 1 && pa->zq > 1; }

/* n zeroed floats (none: p NULL) */
static int zeros_n(sb_executor *ex, tbuf *b, int64_t n, sb_error *err)
{
    if (exec_tb_alloc_n(ex, b, n, err))
        return -1;
    if (b->n)
        ex->be->zero(b->p, (size_t)b->n);
    return 0;
}

/* The slices of pa's shard over its gradient group (zq = 1, the whole
 * shard, without ZeRO or group): rank r of q owns
 * [r*c, min(n, (r+1)*c)), c = ceil(n/unit/q)*unit (whole rows of `unit`
 * floats: a tied copy's, tied.c). Local. */
static int zero_slices(sb_executor *ex, param *pa, int64_t unit, sb_error *err)
{
    pa->zq = 1;
    pa->zlo = 0;
    pa->zhi = pa->n;
    if (ex->zero < 1 || pa->gcomm == MPI_COMM_NULL)
        return 0;
    int q, me;
    MPI_Comm_size(pa->gcomm, &q);
    MPI_Comm_rank(pa->gcomm, &me);
    if (q < 2)
        return 0;
    if (pa->n > INT_MAX)
        return sb_fail(err, SB_EXIT_INPUT,
                       "ZeRO: the shard of weight '%s' has %lld floats, more than a collective's "
                       "int count (%d)", pa->name, (long long)pa->n, INT_MAX);
    pa->zcount = malloc((size_t)q * sizeof *pa->zcount);
    pa->zdispl = malloc((size_t)q * sizeof *pa->zdispl);
    if (!pa->zcount || !pa->zdispl)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int64_t rows = pa->n / unit, chunk = (rows + q - 1) / q * unit;
    for (int r = 0; r < q; r++) {
        int64_t lo = r * chunk < pa->n ? r * chunk : pa->n;
        int64_t hi = (r + 1) * chunk < pa->n ? (r + 1) * chunk : pa->n;
        pa->zdispl[r] = (int)lo;
        pa->zcount[r] = (int)(hi - lo);
    }
    pa->zq = q;
    pa->zlo = pa->zdispl[me];
    pa->zhi = pa->zlo + pa->zcount[me];
    return 0;
}

/* Books a ZeRO collective's time to op o and turns its MPI code into err. */
static int zero_done(sb_executor *ex, int op, int t0, int rc, const char *what, const param *pa,
                     sb_error *err)
{
    exec_book(ex, op, EXEC_T_COMM, t0);
    if (rc)
        return sb_fail(err, SB_EXIT_INTERNAL, "rank %d: ZeRO %s of weight '%s' failed (MPI error %d)",
                       ex->rank, what, pa->name, rc);
    return 0;
}

/* Stage 3: w (the whole shard) from every rank's slice. */
static int zero_gather_into(sb_executor *ex, param *pa, sb_error *err)
{
    if (exec_tb_alloc(ex, &pa->w, &pa->box, err))
        return -1;
    int64_t k = pa->zhi - pa->zlo;
    if (k) {
        int dd[1] = {(int)pa->n}, dl[1] = {(int)pa->zlo}, sd[1] = {(int)k}, sl[1] = {0};
        ex->be->move->box_copy(pa->w.p, dd, dl, pa->ws.p, sd, sl, sd, 1, 0);
    }
    int t0 = exec_mark(ex);
    int rc = ex->be->allgather(pa->w.p, pa->zcount, pa->zdispl, pa->gcomm);
    if (!rc)
        weight_changed(ex, pa);
    return zero_done(ex, pa->op, t0, rc, "all-gather", pa, err);
}

int exec_zero_whole(sb_executor *ex, param *pa, sb_error *err)
{
    return zero_gather_into(ex, pa, err);
}

void exec_zero_unwhole(sb_executor *ex, param *pa) { weight_free(ex, pa); }

int exec_zero_gather(sb_executor *ex, opx *o, sb_error *err)
{
    for (int q = 0; q < o->nparams; q++) {
        param *pa = &ex->params[o->params[q]];
        /* w already whole: kept from a recomputed forward (recompute.c),
         * or a tied copy's (always whole) */
        if (ex->zero == 3 && zero_on(ex, pa) && !pa->w.p && zero_gather_into(ex, pa, err))
            return -1;
    }
    return 0;
}

void exec_zero_drop(sb_executor *ex, opx *o)
{
    if (ex->recomputing) /* a recomputed forward: the backward right after uses w */
        return;
    for (int q = 0; q < o->nparams; q++) {
        param *pa = &ex->params[o->params[q]];
        if (ex->zero == 3 && zero_on(ex, pa) && pa->owner < 0) /* a tied copy stays whole */
            weight_free(ex, pa);
    }
}

int exec_zero_grad_begin(sb_executor *ex, opx *o, sb_error *err)
{
    for (int q = 0; q < o->nparams; q++) {
        param *pa = &ex->params[o->params[q]];
        if (ex->zero >= 2 && zero_on(ex, pa) && exec_tb_zeros(ex, &pa->dw, &pa->box, err))
            return -1;
    }
    return 0;
}

int exec_zero_grad_end(sb_executor *ex, opx *o, sb_error *err)
{
    for (int q = 0; q < o->nparams; q++) {
        param *pa = &ex->params[o->params[q]];
        if (ex->zero < 2 || !zero_on(ex, pa)) {
            if (exec_allreduce(ex, o, pa->dw.p, (size_t)pa->dw.n, MPI_SUM, pa->gcomm, err))
                return -1;
            continue;
        }
        int t0 = exec_mark(ex);
        int rc = ex->be->reduce_scatter(pa->dw.p, pa->dws.p, pa->zcount, pa->zdispl, pa->gcomm);
        exec_tb_free(ex, &pa->dw);
        if (zero_done(ex, o->idx, t0, rc, "reduce-scatter", pa, err))
            return -1;
    }
    return 0;
}

int exec_zero_update(sb_executor *ex, param *pa, sb_error *err)
{
    int z = zero_on(ex, pa) ? ex->zero : 0;
    int64_t k = pa->zhi - pa->zlo;
    float *w = z == 3 ? pa->ws.p : pa->w.p ? pa->w.p + pa->zlo : NULL;
    float *g = z >= 2 ? pa->dws.p : pa->dw.p ? pa->dw.p + pa->zlo : NULL;
    if (k) {
        if (ex->update == SB_UPDATE_ADAM) /* step ex->step + 1 of Adam's bias correction */
            ex->be->optim->adam_update(w, g, pa->m.p, pa->v.p, (size_t)k, ex->lr, ex->beta1,
                                       ex->beta2, ex->eps, ex->step + 1);
        else
            ex->be->optim->sgd_update(w, g, (size_t)k, ex->lr); /* zeroes g */
    }
    if (z == 1 && pa->dw.n) /* the other slices' gradients */
        ex->be->zero(pa->dw.p, (size_t)pa->dw.n);
    if (z == 1 || z == 2) {
        int t0 = exec_mark(ex);
        int rc = ex->be->allgather(pa->w.p, pa->zcount, pa->zdispl, pa->gcomm);
        if (!rc)
            weight_changed(ex, pa);
        return zero_done(ex, pa->op, t0, rc, "all-gather", pa, err);
    }
    if (z < 3)
        weight_changed(ex, pa);
    return 0;
}

void exec_params_free(sb_executor *ex)
{
    for (int pi = 0; pi < ex->nparams; pi++) {
        param *pa = &ex->params[pi];
        weight_free(ex, pa);
        exec_tb_free(ex, &pa->dw);
        exec_tb_free(ex, &pa->m);
        exec_tb_free(ex, &pa->v);
        exec_tb_free(ex, &pa->ws);
        exec_tb_free(ex, &pa->dws);
        free(pa->zcount);
        free(pa->zdispl);
    }
}
const char *sb_executor_weight_name(const sb_executor *ex, int w, int64_t *n)
{
    const param *pa = &ex->params[w];
    int64_t v = 1;
    for (int i = 0; i < pa->nd; i++)
        v *= pa->shape[i];
    if (n)
        *n = v;
    return pa->name;
}

int sb_executor_gather_weight(sb_executor *ex, int w, int root, float *out, sb_error *err)
{
    param *pa = &ex->params[w];
    opx *o = &ex->ops[pa->op];
    int n = ex->size;
    sb_box *src = calloc((size_t)n, sizeof *src), *dst = calloc((size_t)n, sizeof *dst);
    if (!src || !dst) {
        free(src);
        free(dst);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    for (int r = 0; r < n; r++) {
        int g[SB_MAX_DIMS];
        if (exec_coords(ex, o, r, g))
            exec_param_box(ex, pa, o->c, g, &src[r]);
        if (r == root) {
            dst[r].nd = pa->nd;
            for (int j = 0; j < pa->nd; j++) {
                dst[r].lo[j] = 0;
                dst[r].hi[j] = pa->shape[j];
            }
        }
    }
    /* ZeRO stage 3: the shard, gathered from the slices for the while */
    int gathered = ex->zero == 3 && zero_on(ex, pa) && !pa->w.p;
    int rc = gathered ? zero_gather_into(ex, pa, err) : 0;
    sb_relayout *rl = NULL;
    if (!rc)
        rc = sb_relayout_plan(ex->comm, pa->nd, pa->shape, src, dst, SB_RELAYOUT_COPY, &rl, err);
    if (!rc) {
        float *hs = pa->w.n ? malloc((size_t)pa->w.n * sizeof(float)) : NULL;
        if (pa->w.n)
            ex->be->to_host(hs, pa->w.p, (size_t)pa->w.n);
        rc = sb_relayout_run(rl, hs, ex->rank == root ? out : NULL, err);
        free(hs);
    }
    sb_relayout_free(rl);
    if (gathered)
        weight_free(ex, pa);
    free(src);
    free(dst);
    return rc;
}

int sb_executor_weight_shape(const sb_executor *ex, int w, int64_t *shape)
{
    const param *pa = &ex->params[w];
    for (int i = 0; i < pa->nd; i++)
        shape[i] = pa->shape[i];
    return pa->nd;
}

void sb_executor_weight_box(const sb_executor *ex, int w, sb_box *box)
{
    *box = ex->params[w].n ? ex->params[w].box : (sb_box){0};
}

void sb_executor_weight_boxes(const sb_executor *ex, int w, sb_box *boxes)
{
    const param *pa = &ex->params[w];
    const opx *o = &ex->ops[pa->op];
    for (int r = 0; r < ex->size; r++) {
        int g[SB_MAX_DIMS];
        boxes[r].nd = 0;
        if (exec_coords(ex, o, r, g))
            exec_param_box(ex, pa, o->c, g, &boxes[r]);
    }
}

/* Adam's moment `which` (1: m, 2: v) of weight w, when it covers the
 * weight's whole shard (no ZeRO slicing). */
static tbuf *moment_of(const sb_executor *ex, int w, int which, const char *what, sb_error *err)
{
    param *pa = &((sb_executor *)ex)->params[w];
    if (ex->update != SB_UPDATE_ADAM || (which != 1 && which != 2)) {
        sb_fail(err, SB_EXIT_INPUT, "cannot %s moment %d of weight '%s': the executor has no "
                "Adam moments", what, which, pa->name);
        return NULL;
    }
    tbuf *t = which == 1 ? &pa->m : &pa->v;
    if (t->n != pa->w.n) {
        sb_fail(err, SB_EXIT_INPUT, "cannot %s Adam's moments of weight '%s' whole: ZeRO keeps "
                "them sliced over its replicas (checkpoint Adam with --zero 0)", what, pa->name);
        return NULL;
    }
    return t;
}

int sb_executor_moment_read(const sb_executor *ex, int w, int which, float *host, sb_error *err)
{
    const tbuf *t = moment_of(ex, w, which, "read", err);
    if (!t)
        return -1;
    if (t->n)
        ex->be->to_host(host, t->p, (size_t)t->n);
    return 0;
}

int sb_executor_moment_write(sb_executor *ex, int w, int which, const float *host, sb_error *err)
{
    tbuf *t = moment_of(ex, w, which, "write", err);
    if (!t)
        return -1;
    if (t->n)
        ex->be->from_host(t->p, host, (size_t)t->n);
    return 0;
}

/* ZeRO stage 3 holds a slice of the shard between steps: refused. */
static int refuse_sliced(const sb_executor *ex, const param *pa, const char *what, sb_error *err)
{
    if (ex->zero == 3 && zero_on(ex, pa))
        return sb_fail(err, SB_EXIT_INPUT,
                       "cannot %s weight '%s' locally under ZeRO stage 3 (each rank keeps 1/%d of "
                       "its shard between steps; checkpoints need --zero 0, 1 or 2)",
                       what, pa->name, pa->zq);
    return 0;
}

int sb_executor_weight_read(const sb_executor *ex, int w, float *host, sb_error *err)
{
    const param *pa = &ex->params[w];
    if (refuse_sliced(ex, pa, "read", err))
        return -1;
    if (pa->w.n)
        ex->be->to_host(host, pa->w.p, (size_t)pa->w.n);
    return 0;
}

int sb_executor_weight_write(sb_executor *ex, int w, const float *host, sb_error *err)
{
    param *pa = &ex->params[w];
    if (refuse_sliced(ex, pa, "write", err))
        return -1;
    if (pa->w.n)
        ex->be->from_host(pa->w.p, host, (size_t)pa->w.n);
    weight_changed(ex, pa);
    return 0;
}


/* ---- checkpoint state, whole shards under any ZeRO stage --------------------------------- */

/* The buffer part (0: the weight, 1, 2: Adam's moments) of pa keeps between
 * steps, and whether it is pa's ZeRO slice (else the whole shard). */
static const tbuf *state_buf(const sb_executor *ex, const param *pa, int part, int *sliced)
{
    int on = zero_on(ex, pa);
    *sliced = part ? on : on && ex->zero == 3;
    return part == 0 ? (*sliced ? &pa->ws : &pa->w) : part == 1 ? &pa->m : &pa->v;
}

static int state_check(const sb_executor *ex, int w, int part, const char *what, sb_error *err)
{
    if (part == 0 || (ex->update == SB_UPDATE_ADAM && (part == 1 || part == 2)))
        return 0;
    return sb_fail(err, SB_EXIT_INPUT, "cannot %s part %d of weight '%s': the executor has no "
                   "such state (0: the weight; 1, 2: Adam's moments)", what, part,
                   ex->params[w].name);
}

int sb_executor_state_read(sb_executor *ex, int w, int part, float *host, sb_error *err)
{
    param *pa = &ex->params[w];
    int sliced;
    if (state_check(ex, w, part, "read", err))
        return -1;
    const tbuf *t = state_buf(ex, pa, part, &sliced);
    if (!sliced) {
        if (pa->n)
            ex->be->to_host(host, t->p, (size_t)pa->n);
        return 0;
    }
    if (t->n)
        ex->be->to_host(host + pa->zlo, t->p, (size_t)t->n);
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, host, pa->zcount, pa->zdispl,
                            MPI_FLOAT, pa->gcomm);
    if (rc != MPI_SUCCESS)
        return sb_fail(err, SB_EXIT_INTERNAL, "rank %d: gathering the ZeRO slices of weight '%s' "
                       "failed (MPI error %d)", ex->rank, pa->name, rc);
    return 0;
}

int sb_executor_state_write(sb_executor *ex, int w, int part, const float *host, sb_error *err)
{
    param *pa = &ex->params[w];
    int sliced;
    if (state_check(ex, w, part, "write", err))
        return -1;
    const tbuf *t = state_buf(ex, pa, part, &sliced);
    if (!sliced && pa->n)
        ex->be->from_host(t->p, host, (size_t)pa->n);
    else if (sliced && t->n)
        ex->be->from_host(t->p, host + pa->zlo, (size_t)t->n);
    if (part == 0)
        weight_changed(ex, pa);
    return 0;
}
