/* inputs.c: the model's inputs and labels (services.h). Synthetic values
 * come from a counter-based hash of (seed, tensor name, global index), so
 * every rank draws exactly its shard of the same global tensor whatever
 * the strategy; real data comes from an sb_data_source, each rank reading
 * the rows of its boxes. */
#include "services.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/dtensor.h"

/* ---- deterministic data --------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t exec_name_tag(const char *s)
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
void exec_gen_box(float *h, const sb_box *box, const int64_t *shape, uint64_t seed, uint64_t tag,
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

int exec_setup_data(sb_executor *ex, const sb_exec_opts *opts, sb_error *err)
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


/* Micro-batches (exec.h): a box of tensor `tensor` (or, tensor -1, of
 * op `op`'s iteration space) in the micro-batch model, moved along its
 * batch dim to where the running micro-batch lies in the caller's model. */
static void to_full(const sb_executor *ex, int tensor, int op, int64_t *lo, int64_t *hi)
{
    if (ex->nmb <= 1)
        return;
    int d = -1;
    int64_t size = 0;
    if (tensor >= 0) {
        d = ex->mb_dim[tensor];
        size = d >= 0 ? ex->m->tensors[tensor].dims[d].size : 0;
    } else {
        const sb_op *o = &ex->m->ops[op];
        for (int i = 0; i < o->ndims && d < 0; i++)
            if (!strcmp(o->dims[i].name, "batch"))
                d = i;
        size = d >= 0 ? o->dims[d].size : 0;
    }
    if (d >= 0) {
        lo[d] += ex->cur_mb * size;
        hi[d] += ex->cur_mb * size;
    }
}

/* Keeps this rank's first dataset fault of the step (exec.h). */
static void data_fault(sb_executor *ex, const sb_error *err)
{
    if (!ex->data_failed) {
        ex->data_failed = 1;
        ex->data_err = *err;
    }
}

int exec_gen_input(sb_executor *ex, opx *o, int slot, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    const sb_tensor *t = &ex->full->tensors[op->in[slot].tensor];
    tbuf *b = &o->in[slot];
    if (!b->n)
        return 0;
    sb_box box = b->box; /* where it lies in the global batch */
    if (box.nd)
        to_full(ex, op->in[slot].tensor, -1, box.lo, box.hi);
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
        if (data_box(ex, &box, h, err)) {
            /* go on with zeros: every rank learns of it after the forward */
            data_fault(ex, err);
            memset(h, 0, (size_t)b->n * sizeof(float));
        }
    } else {
        exec_gen_box(h, &box, shape, ex->seed + (uint64_t)ex->step, exec_name_tag(t->name), tokens,
                     1.0, 0.0, vocab);
    }
    if (staged)
        exec_upload(ex, b, h);
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
        if (!o->ids.p && exec_tb_alloc_n(ex, &o->ids, b->n, err)) {
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
    const sb_op *op = &ex->full->ops[o->idx]; /* global indices */
    int nd = op->ndims;
    int64_t rows = 1, olo[SB_MAX_DIMS], ohi[SB_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        olo[d] = o->lo[d];
        ohi[d] = o->hi[d];
    }
    to_full(ex, -1, o->idx, olo, ohi);
    for (int d = 0; d < nd - 1; d++)
        rows *= ohi[d] - olo[d];
    int32_t *lab = malloc((size_t)(rows ? rows : 1) * sizeof *lab);
    if (!lab)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int64_t idx[SB_MAX_DIMS];
    for (int d = 0; d < nd - 1; d++)
        idx[d] = olo[d];
    int64_t classes = op->dims[nd - 1].size;
    for (int64_t k = 0; k < rows; k++) {
        int64_t lin = 0;
        for (int d = 0; d < nd - 1; d++)
            lin = lin * op->dims[d].size + idx[d];
        if (ex->data) {
            /* the loss is over (batch, classes): row lin is batch row lin */
            float *x = malloc((size_t)ex->sample_floats * sizeof *x);
            int64_t smp = data_sample(ex, lin);
            if (!x) {
                free(lab);
                return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            }
            /* a bad record or label: label 0, and every rank learns of it
             * after the forward (the other ranks are in collectives) */
            if (sb_data_read(ex->data, smp, x, &lab[k], err)) {
                data_fault(ex, err);
                lab[k] = 0;
            } else if (lab[k] < 0 || lab[k] >= classes) {
                sb_error e = {0};
                sb_fail(&e, SB_EXIT_INPUT, "--data: sample %lld has label %d, not below the %lld "
                        "classes of '%s'", (long long)smp, lab[k], (long long)classes, op->name);
                data_fault(ex, &e);
                lab[k] = 0;
            }
            free(x);
        } else {
            lab[k] = (int32_t)floor(u01(ex->seed + (uint64_t)ex->step, exec_name_tag(op->name) ^ 0x1abe1ULL, lin)
                                    * (double)classes);
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < ohi[d])
                break;
            idx[d] = olo[d];
        }
    }
    if (!o->ids.p && exec_tb_alloc_n(ex, &o->ids, rows, err)) {
        free(lab);
        return -1;
    }
    ex->be->from_host(o->ids.p, (const float *)lab, (size_t)rows);
    free(lab);
    return 0;
}

