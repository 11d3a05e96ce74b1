/* params.c: an executor's trained weights (params.h) and the public
 * accessors of runtime.h that read and write them. */
#include "params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "services.h"

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
        if (exec_make_group(ex, o->c, op->ndims, pa->grad_free, &pa->gcomm, err))
            return -1;
    }
    /* ... then this rank's shards, with no collective between them: a rank
     * that runs out of memory here returns, and the caller agrees on it */
    for (int pi = 0; pi < ex->nparams; pi++) {
        param *pa = &ex->params[pi];
        opx *o = &ex->ops[pa->op];
        if (!o->in_grid)
            continue;
        sb_box box;
        exec_param_box(ex, pa, o->c, o->g, &box);
        if (exec_tb_alloc(ex, &pa->w, &box, err) || exec_tb_zeros(ex, &pa->dw, &box, err))
            return -1;
        if (ex->update == SB_UPDATE_ADAM
            && (exec_tb_zeros(ex, &pa->m, &box, err) || exec_tb_zeros(ex, &pa->v, &box, err)))
            return -1;
        float *h = malloc((size_t)(pa->w.n ? pa->w.n : 1) * sizeof(float));
        if (!h)
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        exec_gen_box(h, &box, pa->shape, ex->seed, exec_name_tag(pa->name), 0, pa->scale, pa->offset, 0);
        exec_upload(ex, &pa->w, h);
        free(h);
    }
    return 0;
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
            exec_param_box(ex, pa, o->c, g, &src[r]);
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
            exec_param_box(ex, pa, o->c, g, &boxes[r]);
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

