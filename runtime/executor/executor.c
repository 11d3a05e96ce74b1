/* executor.c: the SPMD executor. Every rank builds the same plan from the
 * model and the strategy (plan.c), holds only its boxes, and runs real
 * training steps: forward through every op (relayout of each input from its
 * producer, local kernels, all-reduce of partial sums), softmax cross-entropy
 * loss, backward in reverse (gradients flow back to producers by an
 * accumulating relayout, so halos, replicas and fan-out all sum), all-reduce
 * of weight gradients over data-parallel replicas, SGD.
 *
 * Backward note: the cost model all-reduces input gradients over the ranks
 * that differ only in dims absent from the input; here those partial sums
 * are summed by the accumulating relayout that returns them to the producer
 * (a reduce instead of an all-reduce: the same numbers, fewer bytes). */
#define _GNU_SOURCE
#include "shardbench/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "../ops/lstm.h"
#include "shardbench/dtensor.h"
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

static void pool_drain(sb_executor *ex)
{
    for (int i = 0; i < ex->npool; i++)
        ex->be->release(ex->pool[i].p);
    free(ex->pool);
    ex->pool = NULL;
    ex->npool = ex->cap_pool = 0;
}

static int tb_alloc(sb_executor *ex, tbuf *b, const sb_box *box, sb_error *err)
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
        pool_drain(ex); /* memory kept for reuse may be what is missing */
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

static int tb_alloc_n(sb_executor *ex, tbuf *b, int64_t n, sb_error *err)
{
    sb_box box = {.nd = n > 0 ? 1 : 0, .lo = {0}, .hi = {n}};
    return tb_alloc(ex, b, &box, err);
}

static void tb_free(sb_executor *ex, tbuf *b)
{
    if (b->p) {
        pool_put(ex, b->p, b->n);
        ex->live_bytes -= b->n * (int64_t)sizeof(float);
    }
    b->p = NULL;
    b->n = 0;
}

static int tb_zeros(sb_executor *ex, tbuf *b, const sb_box *box, sb_error *err)
{
    if (tb_alloc(ex, b, box, err))
        return -1;
    if (b->n)
        ex->be->zero(b->p, (size_t)b->n);
    return 0;
}

/* ---- deterministic data --------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t name_tag(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* uniform in [0, 1) from (seed, tag, index): a per-stream key (seed, tag)
 * hashed once, then one mix per element (a counter-based generator: any
 * rank draws any element of any tensor without drawing the others) */
static uint64_t stream_key(uint64_t seed, uint64_t tag) { return mix64(seed ^ mix64(tag)); }

static double u01_key(uint64_t key, int64_t i)
{
    uint64_t x = mix64(key ^ ((uint64_t)i * 0xd6e8feb86659fd93ULL));
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

static double u01(uint64_t seed, uint64_t tag, int64_t i) { return u01_key(stream_key(seed, tag), i); }

/* Fills host buffer h with f(global linear index) over the box of a tensor
 * of the given shape. kind 0: offset + scale * U(-1, 1); kind 1: integers
 * floor(U(0,1) * range). */
static void gen_box(float *h, const sb_box *box, const int64_t *shape, uint64_t seed, uint64_t tag,
                    int kind, double scale, double offset, int64_t range)
{
    int nd = box->nd;
    int64_t idx[SB_BOX_MAX_DIMS], n = sb_box_volume(box);
    if (n <= 0)
        return;
    uint64_t key = stream_key(seed, tag);
    for (int d = 0; d < nd; d++)
        idx[d] = box->lo[d];
    /* row by row along the last dim: its global indices are consecutive */
    int64_t row = box->hi[nd - 1] - box->lo[nd - 1];
    for (int64_t k = 0; k < n; k += row) {
        int64_t lin = 0;
        for (int d = 0; d < nd; d++)
            lin = lin * shape[d] + idx[d];
        for (int64_t e = 0; e < row; e++) {
            double u = u01_key(key, lin + e);
            h[k + e] = kind ? (float)floor(u * (double)range)
                            : (float)(offset + scale * (2.0 * u - 1.0));
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < box->hi[d])
                break;
            idx[d] = box->lo[d];
        }
    }
}

static int upload(sb_executor *ex, tbuf *b, const float *host)
{
    if (b->n)
        ex->be->from_host(b->p, host, (size_t)b->n);
    return 0;
}

/* ---- timing -------------------------------------------------------------- */

static double tick(sb_executor *ex)
{
    if (ex->be->sync)
        ex->be->sync();
    return MPI_Wtime();
}

/* ---- groups ---------------------------------------------------------------- */

/* Sub-communicator of the ranks of op's grid that differ only in the dims of
 * free_mask; MPI_COMM_NULL when that group has one member. Collective. */
static int make_group(sb_executor *ex, const int *c, int nd, uint32_t free_mask, MPI_Comm *out,
                      sb_error *err)
{
    *out = MPI_COMM_NULL;
    if (plan_group_size(c, nd, free_mask) <= 1)
        return 0;
    int *color = malloc((size_t)ex->size * sizeof *color);
    if (!color)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int r = 0; r < ex->size; r++)
        color[r] = plan_group_color(c, nd, r, free_mask);
    int rc = sb_group_get(ex->groups, color, out, err);
    free(color);
    return rc;
}

static int allreduce(sb_executor *ex, opx *o, float *p, size_t n, MPI_Op op, MPI_Comm comm,
                     sb_error *err)
{
    if (comm == MPI_COMM_NULL || n == 0)
        return 0;
    double t0 = tick(ex);
    int rc = ex->be->allreduce(p, n, op, comm);
    if (o)
        ex->times[o->idx].comm_s += tick(ex) - t0;
    if (rc)
        return sb_fail(err, SB_EXIT_INTERNAL, "rank %d: all-reduce failed (MPI error %d)",
                       ex->rank, rc);
    return 0;
}

/* ---- relayout with host staging --------------------------------------------- */

static int run_relayout(sb_executor *ex, opx *o, sb_relayout *r, const tbuf *src, tbuf *dst,
                        sb_error *err)
{
    double t0 = tick(ex);
    int rc;
    if (ex->be->host_memory) {
        rc = sb_relayout_run(r, src->p, dst->p, err);
    } else if (ex->be->alltoallv) {
        /* in backend memory: pack, exchange, unpack there */
        const sb_relayout_mem mem = {ex->be->box_copy, ex->be->zero, ex->be->alloc,
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
        ex->times[o->idx].comm_s += tick(ex) - t0;
    return rc;
}

/* ---- params ------------------------------------------------------------------- */

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
    o->params[o->nparams++] = ex->nparams;
    return ex->nparams++;
}

/* Box of a param for rank coords g of its op. */
static void param_box(const sb_executor *ex, const param *pa, const int *c, const int *g, sb_box *b)
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

/* The op's own weights (sb_op.weights, filled by the parser) and its
 * explicit weight operands. */
static int declare_params(sb_executor *ex, opx *o, sb_error *err)
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
                               "weight '%s' is used by ops '%s' and '%s' (shared weights are not supported)",
                               t->name, ex->m->ops[ex->params[q].op].name, op->name);
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

/* ---- plan --------------------------------------------------------------------- */

static int operand_box_of_rank(const sb_executor *ex, int opi, int r, int is_input, int slot,
                               sb_box *b)
{
    const opx *o = &ex->ops[opi];
    const sb_op *op = &ex->m->ops[opi];
    int g[SB_MAX_DIMS];
    if (!plan_coords(o->c, op->ndims, r, g)) {
        b->nd = 0;
        return 0;
    }
    plan_operand_box(ex->m, op, is_input ? &op->in[slot] : &op->out[slot], o->c, g, is_input, b);
    return 0;
}

static int build_relayouts(sb_executor *ex, sb_error *err)
{
    int n = ex->size;
    sb_box *src = calloc((size_t)n, sizeof *src), *dst = calloc((size_t)n, sizeof *dst);
    if (!src || !dst) {
        free(src);
        free(dst);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    int rc = 0;
    for (int i = 0; i < ex->m->nops && !rc; i++) {
        const sb_op *op = &ex->m->ops[i];
        for (int k = 0; k < op->nin && !rc; k++) {
            const sb_tensor *t = &ex->m->tensors[op->in[k].tensor];
            if (t->producer < 0)
                continue;
            int64_t shape[SB_MAX_DIMS];
            for (int d = 0; d < t->ndims; d++)
                shape[d] = t->dims[d].size;
            for (int r = 0; r < n; r++) {
                operand_box_of_rank(ex, t->producer, r, 0, t->producer_slot, &src[r]);
                operand_box_of_rank(ex, i, r, 1, k, &dst[r]);
            }
            rc = sb_relayout_plan(ex->comm, t->ndims, shape, src, dst, SB_RELAYOUT_COPY,
                                  &ex->ops[i].fwd[k], err);
            if (!rc)
                rc = sb_relayout_plan(ex->comm, t->ndims, shape, dst, src, SB_RELAYOUT_ACCUM,
                                      &ex->ops[i].bwd[k], err);
        }
    }
    free(src);
    free(dst);
    return rc;
}

/* Checks what the runtime can run, identically on every rank. */
static int check_model(const sb_model *m, sb_error *err)
{
    int nloss = 0;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        if (op->kind == SB_OP_SOFTMAX_XENT)
            nloss++;
        if (op->kind == SB_OP_NORM && op->batchnorm && op->ndims != 2 && op->ndims != 4)
            return sb_fail(err, SB_EXIT_INPUT, "op '%s': batchnorm needs a rank-2 or rank-4 input",
                           op->name);
        for (int k = 0; k < op->nin; k++) {
            const sb_tensor *t = &m->tensors[op->in[k].tensor];
            if (t->producer >= 0 && m->ops[t->producer].kind == SB_OP_SOFTMAX_XENT)
                return sb_fail(err, SB_EXIT_INPUT,
                               "op '%s' consumes the loss '%s' (softmax_xent ends the graph)",
                               op->name, t->name);
        }
    }
    if (nloss == 0)
        return sb_fail(err, SB_EXIT_INPUT, "model '%s' has no softmax_xent loss to train", m->name);
    return 0;
}

/* Checks that a dataset fits the model (identically on every rank). */
static int setup_data(sb_executor *ex, const sb_exec_opts *opts, sb_error *err)
{
    const sb_model *m = ex->m;
    int found = -1, n = 0;
    for (int t = 0; t < m->ntensors; t++)
        if (m->tensors[t].kind == SB_TENSOR_INPUT) {
            found = t;
            n++;
        }
    if (n != 1)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--data: model '%s' has %d input tensors; a dataset feeds exactly one", m->name, n);
    const sb_tensor *t = &m->tensors[found];
    int64_t dims[SB_MAX_DIMS];
    int nd = sb_data_dims(opts->data, dims);
    int same = nd == t->ndims - 1;
    for (int d = 0; same && d < nd; d++)
        same = dims[d] == t->dims[d + 1].size;
    if (!same) {
        char want[256] = "", have[256] = "";
        for (int d = 1; d < t->ndims; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d > 1 ? "x" : "",
                     (long long)t->dims[d].size);
        for (int d = 0; d < nd; d++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%lld", d ? "x" : "",
                     (long long)dims[d]);
        return sb_fail(err, SB_EXIT_INPUT,
                       "--data: samples are %s but input '%s' takes samples of %s (one per '%s' row)",
                       have, t->name, want, t->dims[0].name);
    }
    ex->data_batch = t->dims[0].size;
    for (int i = 0; i < m->nops; i++)
        if (m->ops[i].kind == SB_OP_SOFTMAX_XENT
            && (m->ops[i].ndims != 2 || m->ops[i].dims[0].size != ex->data_batch))
            return sb_fail(err, SB_EXIT_INPUT,
                           "--data: loss '%s' is not over (batch, classes); dataset labels are one per sample",
                           m->ops[i].name);
    ex->data_count = sb_data_count(opts->data);
    if (ex->data_count < ex->data_batch)
        return sb_fail(err, SB_EXIT_INPUT, "--data: %lld samples, fewer than one batch of %lld",
                       (long long)ex->data_count, (long long)ex->data_batch);
    ex->sample_floats = 1;
    for (int d = 0; d < nd; d++)
        ex->sample_floats *= dims[d];
    ex->perm = malloc((size_t)ex->data_count * sizeof *ex->perm);
    if (!ex->perm)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    ex->perm_epoch = -1;
    ex->data = opts->data;
    ex->data_seed = opts->data_seed;
    ex->data_tensor = found;
    return 0;
}

/* The dataset sample of global batch row `row` at the current step. */
static int64_t data_sample(sb_executor *ex, int64_t row)
{
    int64_t per_epoch = ex->data_count / ex->data_batch;
    int64_t epoch = ex->step / per_epoch, j = ex->step % per_epoch;
    if (epoch != ex->perm_epoch) {
        sb_dataset_permutation(ex->data_seed, epoch, ex->data_count, ex->perm);
        ex->perm_epoch = epoch;
    }
    return ex->perm[j * ex->data_batch + row];
}

/* Fills the box of the data input from the dataset (rows = samples). */
static int data_box(sb_executor *ex, const sb_box *box, float *h, sb_error *err)
{
    const sb_tensor *t = &ex->m->tensors[ex->data_tensor];
    float *x = malloc((size_t)ex->sample_floats * sizeof *x);
    if (!x)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int64_t k = 0;
    for (int64_t r = box->lo[0]; r < box->hi[0]; r++) {
        int32_t label;
        if (sb_data_read(ex->data, data_sample(ex, r), x, &label, err)) {
            free(x);
            return -1;
        }
        int64_t idx[SB_MAX_DIMS];
        for (int d = 1; d < box->nd; d++)
            idx[d] = box->lo[d];
        int64_t inner = 1;
        for (int d = 1; d < box->nd; d++)
            inner *= box->hi[d] - box->lo[d];
        for (int64_t e = 0; e < inner; e++) {
            int64_t lin = 0;
            for (int d = 1; d < box->nd; d++)
                lin = lin * t->dims[d].size + idx[d];
            h[k++] = x[lin];
            for (int d = box->nd - 1; d >= 1; d--) {
                if (++idx[d] < box->hi[d])
                    break;
                idx[d] = box->lo[d];
            }
        }
    }
    free(x);
    return 0;
}

int sb_executor_create(MPI_Comm comm, const sb_plan_strategy *st, const sb_backend *be,
                       const sb_exec_opts *opts, sb_executor **out, sb_error *err)
{
    const sb_model *m = st->m;
    *out = NULL;
    if (check_model(m, err))
        return -1;
    sb_executor *ex = calloc(1, sizeof *ex);
    if (!ex)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    ex->comm = comm;
    ex->m = m;
    ex->be = be;
    ex->lr = opts && opts->lr > 0 ? opts->lr : 0.01f;
    ex->seed = opts && opts->seed ? opts->seed : 1;
    MPI_Comm_rank(comm, &ex->rank);
    MPI_Comm_size(comm, &ex->size);
    if (be == &sb_backend_cpu || be == sb_backend_cpu_devmem())
        sb_cpu_threads_sync(); /* the kernels' OpenMP loops use OpenBLAS's thread count */
    ex->ops = calloc((size_t)m->nops, sizeof *ex->ops);
    ex->times = calloc((size_t)m->nops, sizeof *ex->times);
    ex->params = calloc(SB_EXEC_MAX_PARAMS_TOTAL, sizeof *ex->params);
    if (!ex->ops || !ex->times || !ex->params) {
        sb_executor_free(ex);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        opx *o = &ex->ops[i];
        o->idx = i;
        memcpy(o->c, st->configs[i], (size_t)op->ndims * sizeof(int));
        o->q = plan_grid_size(o->c, op->ndims);
        if (o->q > ex->size) {
            sb_executor_free(ex);
            return sb_fail(err, SB_EXIT_INPUT,
                           "op '%s' needs %d ranks under its config but only %d are running",
                           op->name, o->q, ex->size);
        }
        o->in_grid = plan_coords(o->c, op->ndims, ex->rank, o->g);
        if (o->in_grid)
            plan_iter_box(op, o->c, o->g, o->lo, o->hi);
        o->kcomm = o->acomm = MPI_COMM_NULL;
        if (declare_params(ex, o, err)) {
            sb_executor_free(ex);
            return -1;
        }
    }
    if (opts && opts->data && setup_data(ex, opts, err)) {
        sb_executor_free(ex);
        return -1;
    }
    if (sb_group_cache_new(comm, &ex->groups, err) || build_relayouts(ex, err)
        || exec_setup_groups(ex, err) || exec_init_params(ex, err)) {
        sb_executor_free(ex);
        return -1;
    }
    *out = ex;
    return 0;
}

/* Allocates and fills the weights (each rank exactly its shard of the same
 * global tensor) and the weight-gradient groups. Collective. */
int exec_init_params(sb_executor *ex, sb_error *err)
{
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
        if (make_group(ex, o->c, op->ndims, pa->grad_free, &pa->gcomm, err))
            return -1;
        if (!o->in_grid)
            continue;
        sb_box box;
        param_box(ex, pa, o->c, o->g, &box);
        if (tb_alloc(ex, &pa->w, &box, err) || tb_zeros(ex, &pa->dw, &box, err))
            return -1;
        float *h = malloc((size_t)(pa->w.n ? pa->w.n : 1) * sizeof(float));
        if (!h)
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        gen_box(h, &box, pa->shape, ex->seed, name_tag(pa->name), 0, pa->scale, pa->offset, 0);
        upload(ex, &pa->w, h);
        free(h);
    }
    return 0;
}

/* Fills an input operand box with the model's (synthetic) data. */
int exec_gen_input(sb_executor *ex, opx *o, int slot, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    const sb_tensor *t = &ex->m->tensors[op->in[slot].tensor];
    tbuf *b = &o->in[slot];
    if (!b->n)
        return 0;
    int64_t shape[SB_MAX_DIMS];
    for (int d = 0; d < t->ndims; d++)
        shape[d] = t->dims[d].size;
    /* host memory: generate in place; else stage */
    int staged = !ex->be->host_memory;
    float *h = staged ? malloc((size_t)b->n * sizeof(float)) : b->p;
    if (!h)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int tokens = op->kind == SB_OP_EMBEDDING;
    int64_t vocab = tokens ? op->dims[op->ndims - 1].size : 0;
    if (ex->data && op->in[slot].tensor == ex->data_tensor) {
        if (data_box(ex, &b->box, h, err)) {
            if (staged)
                free(h);
            return -1;
        }
    } else {
        gen_box(h, &b->box, shape, ex->seed + (uint64_t)ex->step, name_tag(t->name), tokens, 1.0,
                0.0, vocab);
    }
    if (staged)
        upload(ex, b, h);
    if (tokens) {
        /* the embedding kernel reads int32 ids */
        int32_t *ids = malloc((size_t)b->n * sizeof *ids);
        if (!ids) {
            if (staged)
                free(h);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        }
        for (int64_t k = 0; k < b->n; k++)
            ids[k] = (int32_t)h[k];
        if (!o->ids.p && tb_alloc_n(ex, &o->ids, b->n, err)) {
            if (staged)
                free(h);
            free(ids);
            return -1;
        }
        ex->be->from_host(o->ids.p, (const float *)ids, (size_t)b->n);
        free(ids);
    }
    if (staged)
        free(h);
    return 0;
}

/* Labels of a loss op's local rows (global row index -> class). */
int exec_gen_labels(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = op->ndims;
    int64_t rows = 1;
    for (int d = 0; d < nd - 1; d++)
        rows *= o->hi[d] - o->lo[d];
    int32_t *lab = malloc((size_t)(rows ? rows : 1) * sizeof *lab);
    if (!lab)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int64_t idx[SB_MAX_DIMS];
    for (int d = 0; d < nd - 1; d++)
        idx[d] = o->lo[d];
    int64_t classes = op->dims[nd - 1].size;
    for (int64_t k = 0; k < rows; k++) {
        int64_t lin = 0;
        for (int d = 0; d < nd - 1; d++)
            lin = lin * op->dims[d].size + idx[d];
        if (ex->data) {
            /* the loss is over (batch, classes): row lin is batch row lin */
            float *x = malloc((size_t)ex->sample_floats * sizeof *x);
            int64_t smp = data_sample(ex, lin);
            if (!x || sb_data_read(ex->data, smp, x, &lab[k], err)) {
                free(x);
                free(lab);
                return x ? -1 : sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            }
            free(x);
            if (lab[k] < 0 || lab[k] >= classes) {
                int32_t bad = lab[k];
                free(lab);
                return sb_fail(err, SB_EXIT_INPUT, "--data: sample %lld has label %d, not below the %lld classes of '%s'",
                               (long long)smp, bad, (long long)classes, op->name);
            }
        } else {
            lab[k] = (int32_t)floor(u01(ex->seed + (uint64_t)ex->step, name_tag(op->name) ^ 0x1abe1ULL, lin)
                                    * (double)classes);
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < o->hi[d])
                break;
            idx[d] = o->lo[d];
        }
    }
    if (!o->ids.p && tb_alloc_n(ex, &o->ids, rows, err)) {
        free(lab);
        return -1;
    }
    ex->be->from_host(o->ids.p, (const float *)lab, (size_t)rows);
    free(lab);
    return 0;
}

/* ---- the step ------------------------------------------------------------------ */

int sb_executor_step(sb_executor *ex, double *loss, sb_error *err)
{
    const sb_model *m = ex->m;
    ex->loss_sum = 0;
    /* forward */
    for (int i = 0; i < m->nops; i++) {
        opx *o = &ex->ops[i];
        const sb_op *op = &m->ops[i];
        for (int k = 0; k < op->nin; k++) {
            const sb_tensor *t = &m->tensors[op->in[k].tensor];
            if (t->kind == SB_TENSOR_WEIGHT)
                continue;
            sb_box box = {0};
            if (o->in_grid)
                plan_operand_box(m, op, &op->in[k], o->c, o->g, 1, &box);
            if (tb_alloc(ex, &o->in[k], &box, err))
                return -1;
            if (t->producer < 0) {
                if (exec_gen_input(ex, o, k, err))
                    return -1;
            } else {
                opx *pr = &ex->ops[t->producer];
                if (run_relayout(ex, o, o->fwd[k], &pr->out[t->producer_slot], &o->in[k], err))
                    return -1;
            }
        }
        for (int k = 0; k < op->nout; k++) {
            sb_box box = {0};
            if (o->in_grid && op->kind != SB_OP_SOFTMAX_XENT)
                plan_operand_box(m, op, &op->out[k], o->c, o->g, 0, &box);
            if (tb_alloc(ex, &o->out[k], &box, err))
                return -1;
        }
        if (exec_forward_op(ex, o, err))
            return -1;
    }
    double total = 0;
    MPI_Allreduce(&ex->loss_sum, &total, 1, MPI_DOUBLE, MPI_SUM, ex->comm);
    *loss = total;
    /* backward */
    for (int i = m->nops - 1; i >= 0; i--) {
        opx *o = &ex->ops[i];
        const sb_op *op = &m->ops[i];
        for (int k = 0; k < op->nout; k++) {
            /* every consumer's input gradient, summed into this output's box:
             * the first one straight into it (an accumulating relayout
             * overwrites its destination), the others through a buffer */
            int first = 1;
            for (int j = i + 1; j < m->nops; j++) {
                opx *cx = &ex->ops[j];
                const sb_op *cop = &m->ops[j];
                for (int s = 0; s < cop->nin; s++) {
                    if (cop->in[s].tensor != op->out[k].tensor)
                        continue;
                    if (first) {
                        first = 0;
                        if (tb_alloc(ex, &o->dout[k], &o->out[k].box, err)
                            || run_relayout(ex, o, cx->bwd[s], &cx->din[s], &o->dout[k], err))
                            return -1;
                        continue;
                    }
                    tbuf tmp = {0};
                    if (tb_alloc(ex, &tmp, &o->out[k].box, err))
                        return -1;
                    if (run_relayout(ex, o, cx->bwd[s], &cx->din[s], &tmp, err)) {
                        tb_free(ex, &tmp);
                        return -1;
                    }
                    if (tmp.n) {
                        const float *ins[2] = {o->dout[k].p, tmp.p};
                        ex->be->add_forward(o->dout[k].p, ins, 2, (size_t)tmp.n, 0);
                    }
                    tb_free(ex, &tmp);
                }
            }
            if (first && tb_zeros(ex, &o->dout[k], &o->out[k].box, err))
                return -1; /* an output nobody consumes */
        }
        for (int k = 0; k < op->nin; k++)
            if (tb_zeros(ex, &o->din[k], &o->in[k].box, err))
                return -1;
        if (exec_backward_op(ex, o, err))
            return -1;
        for (int q = 0; q < o->nparams; q++) {
            param *pa = &ex->params[o->params[q]];
            if (allreduce(ex, o, pa->dw.p, (size_t)pa->dw.n, MPI_SUM, pa->gcomm, err))
                return -1;
        }
    }
    /* update, then drop the step's activations and gradients */
    for (int pi = 0; pi < ex->nparams; pi++) {
        param *pa = &ex->params[pi];
        if (pa->w.n) {
            ex->be->sgd_update(pa->w.p, pa->dw.p, (size_t)pa->w.n, ex->lr); /* zeroes dw */
        }
    }
    for (int i = 0; i < m->nops; i++) {
        opx *o = &ex->ops[i];
        for (int k = 0; k < SB_MAX_IO; k++) {
            tb_free(ex, &o->in[k]);
            tb_free(ex, &o->din[k]);
            tb_free(ex, &o->out[k]);
            tb_free(ex, &o->dout[k]);
        }
        for (int k = 0; k < 4; k++)
            tb_free(ex, &o->save[k]);
        tb_free(ex, &o->ids);
    }
    ex->step++;
    return 0;
}

/* ---- accessors -------------------------------------------------------------------- */

const sb_op_time *sb_executor_op_times(const sb_executor *ex) { return ex->times; }

void sb_executor_reset_times(sb_executor *ex)
{
    memset(ex->times, 0, (size_t)ex->m->nops * sizeof *ex->times);
}

int64_t sb_executor_peak_bytes(const sb_executor *ex) { return ex->peak_bytes; }

int sb_executor_nweights(const sb_executor *ex) { return ex->nparams; }

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
    const sb_op *op = &ex->m->ops[pa->op];
    int n = ex->size;
    sb_box *src = calloc((size_t)n, sizeof *src), *dst = calloc((size_t)n, sizeof *dst);
    if (!src || !dst) {
        free(src);
        free(dst);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    for (int r = 0; r < n; r++) {
        int g[SB_MAX_DIMS];
        if (plan_coords(o->c, op->ndims, r, g))
            param_box(ex, pa, o->c, g, &src[r]);
        if (r == root) {
            dst[r].nd = pa->nd;
            for (int j = 0; j < pa->nd; j++) {
                dst[r].lo[j] = 0;
                dst[r].hi[j] = pa->shape[j];
            }
        }
    }
    sb_relayout *rl = NULL;
    int rc = sb_relayout_plan(ex->comm, pa->nd, pa->shape, src, dst, SB_RELAYOUT_COPY, &rl, err);
    if (!rc) {
        float *hs = pa->w.n ? malloc((size_t)pa->w.n * sizeof(float)) : NULL;
        if (pa->w.n)
            ex->be->to_host(hs, pa->w.p, (size_t)pa->w.n);
        rc = sb_relayout_run(rl, hs, ex->rank == root ? out : NULL, err);
        free(hs);
    }
    sb_relayout_free(rl);
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
    *box = ex->params[w].w.n ? ex->params[w].w.box : (sb_box){0};
}

void sb_executor_weight_boxes(const sb_executor *ex, int w, sb_box *boxes)
{
    const param *pa = &ex->params[w];
    const opx *o = &ex->ops[pa->op];
    const sb_op *op = &ex->m->ops[pa->op];
    for (int r = 0; r < ex->size; r++) {
        int g[SB_MAX_DIMS];
        boxes[r].nd = 0;
        if (plan_coords(o->c, op->ndims, r, g))
            param_box(ex, pa, o->c, g, &boxes[r]);
    }
}

int sb_executor_weight_read(const sb_executor *ex, int w, float *host, sb_error *err)
{
    (void)err;
    const param *pa = &ex->params[w];
    if (pa->w.n)
        ex->be->to_host(host, pa->w.p, (size_t)pa->w.n);
    return 0;
}

int sb_executor_weight_write(sb_executor *ex, int w, const float *host, sb_error *err)
{
    (void)err;
    param *pa = &ex->params[w];
    if (pa->w.n)
        ex->be->from_host(pa->w.p, host, (size_t)pa->w.n);
    return 0;
}

int sb_executor_steps_done(const sb_executor *ex) { return ex->step; }
void sb_executor_set_steps_done(sb_executor *ex, int steps) { ex->step = steps; }
MPI_Comm sb_executor_comm(const sb_executor *ex) { return ex->comm; }
const sb_backend *sb_executor_backend(const sb_executor *ex) { return ex->be; }

void sb_executor_free(sb_executor *ex)
{
    if (!ex)
        return;
    if (ex->ops)
        for (int i = 0; i < ex->m->nops; i++) {
            opx *o = &ex->ops[i];
            for (int k = 0; k < SB_MAX_IO; k++) {
                sb_relayout_free(o->fwd[k]);
                sb_relayout_free(o->bwd[k]);
                tb_free(ex, &o->in[k]);
                tb_free(ex, &o->din[k]);
                tb_free(ex, &o->out[k]);
                tb_free(ex, &o->dout[k]);
            }
            for (int k = 0; k < 4; k++)
                tb_free(ex, &o->save[k]);
            tb_free(ex, &o->ids);
            lstm_free(ex, o);
        }
    if (ex->params)
        for (int pi = 0; pi < ex->nparams; pi++) {
            tb_free(ex, &ex->params[pi].w);
            tb_free(ex, &ex->params[pi].dw);
        }
    pool_drain(ex);
    sb_group_cache_free(ex->groups);
    free(ex->perm);
    free(ex->ops);
    free(ex->times);
    free(ex->params);
    free(ex);
}

/* exported for ops.c */
int exec_tb_alloc(sb_executor *ex, tbuf *b, const sb_box *box, sb_error *err)
{
    return tb_alloc(ex, b, box, err);
}
int exec_tb_alloc_n(sb_executor *ex, tbuf *b, int64_t n, sb_error *err)
{
    return tb_alloc_n(ex, b, n, err);
}
void exec_tb_free(sb_executor *ex, tbuf *b) { tb_free(ex, b); }
int exec_allreduce(sb_executor *ex, opx *o, float *p, size_t n, MPI_Op op, MPI_Comm comm,
                   sb_error *err)
{
    return allreduce(ex, o, p, n, op, comm, err);
}
int exec_make_group(sb_executor *ex, const int *c, int nd, uint32_t free_mask, MPI_Comm *out,
                    sb_error *err)
{
    return make_group(ex, c, nd, free_mask, out, err);
}
double exec_tick(sb_executor *ex) { return tick(ex); }
int exec_run_relayout(sb_executor *ex, opx *o, sb_relayout *r, const tbuf *src, tbuf *dst,
                      sb_error *err)
{
    return run_relayout(ex, o, r, src, dst, err);
}
