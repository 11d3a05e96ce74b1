/* tied.c: tied weights (`tie W = E`, models/lang.c; params.h). W [embed,
 * vocab] is the token table (vocab, embed) of the embedding op that made
 * E, transposed. One trained tensor, the table (the owner param): its
 * values, optimizer state, ZeRO slices and update are the embedding's.
 * W's reader (the output head) holds a working copy of W in its own
 * layout, a param with `owner` set and no state of its own:
 *
 *   step start  pull: the copy's box of W from the owner's shards, by a
 *               relayout over the table's dims (the copy's box transposed),
 *               then transposed into W's order; under ZeRO stage 3 the
 *               owner's shard is gathered for it once and dropped.
 *   backward    the head adds its gradient into the copy's dw like any
 *               weight's, all-reduced over the copy's replicas after its
 *               last micro-batch (exec_zero_grad_end); under ZeRO 2 and 3
 *               reduce-scattered instead, each replica keeping whole rows
 *               of W's box (params.c; copy_rows here), dw freed.
 *   step end    push, before the update: the copy's summed gradient,
 *               transposed, sent from ONE replica of each of its groups
 *               (coordinate 0 along the dims it was all-reduced over;
 *               under ZeRO 2 and 3 each replica its rows) to every rank
 *               holding an owner shard (an accumulating relayout: each
 *               element from exactly one sender), added into the owner's
 *               summed gradient (its ZeRO slice at stage 2 and 3); the
 *               copy's gradient zeroed.
 *
 * Both relayouts run on every rank at points every rank reaches, so the
 * owner and the copy may sit on different pipeline stages. */
#include "params.h"

#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "services.h"

/* Tensor's index in m->tied (a tied weight), or -1. */
static int tied_index(const sb_model *m, int tensor)
{
    for (int i = 0; i < m->ntied && i < 4; i++)
        if (m->tied[i] == tensor)
            return i;
    return -1;
}

/* Reorders ex->params: weights of their own first (in their order), the
 * tied copies after; every op's indices follow. */
static int copies_last(sb_executor *ex, sb_error *err)
{
    int n = ex->nparams;
    param *old = malloc((size_t)n * sizeof *old);
    int *to = malloc((size_t)n * sizeof *to);
    if (!old || !to) {
        free(old);
        free(to);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    memcpy(old, ex->params, (size_t)n * sizeof *old);
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if ((old[i].owner >= 0) == pass) {
                to[i] = k;
                ex->params[k++] = old[i];
            }
    for (int i = 0; i < n; i++)
        if (ex->params[i].owner >= 0)
            ex->params[i].owner = to[ex->params[i].owner];
    for (int i = 0; i < ex->m->nops; i++) {
        opx *o = &ex->ops[i];
        for (int q = 0; q < o->nparams; q++)
            o->params[q] = to[o->params[q]];
        for (int s = 0; s < SB_MAX_IO; s++)
            if (o->param_of_slot[s] >= 0)
                o->param_of_slot[s] = to[o->param_of_slot[s]];
    }
    free(old);
    free(to);
    return 0;
}

int exec_tied_declare(sb_executor *ex, sb_error *err)
{
    const sb_model *m = ex->m;
    ex->nshadow = 0;
    for (int pi = 0; pi < ex->nparams; pi++) {
        param *pa = &ex->params[pi];
        int ti = pa->slot >= 0 ? tied_index(m, pa->tensor) : -1;
        if (ti < 0)
            continue;
        const opx *e = &ex->ops[m->tied_to[ti]];
        const sb_op *eop = &m->ops[m->tied_to[ti]];
        if (eop->kind != SB_OP_EMBEDDING || e->nparams < 1)
            return sb_fail(err, SB_EXIT_INPUT, "tied weight '%s': op '%s' is not an embedding "
                           "with a table", pa->name, eop->name);
        const param *tab = &ex->params[e->params[0]];
        if (pa->nd != 2 || tab->nd != 2 || pa->shape[0] != tab->shape[1]
            || pa->shape[1] != tab->shape[0])
            return sb_fail(err, SB_EXIT_INPUT, "tied weight '%s' is not the table '%s' transposed",
                           pa->name, tab->name);
        pa->owner = e->params[0];
        ex->nshadow++;
    }
    return ex->nshadow ? copies_last(ex, err) : 0;
}

/* Rank r's box of param pa (nd 0: none), transposed when `swap`. */
static void box_of_rank(const sb_executor *ex, const param *pa, int r, int swap, sb_box *b)
{
    const opx *o = &ex->ops[pa->op];
    int g[SB_MAX_DIMS];
    b->nd = 0;
    if (!exec_coords(ex, o, r, g))
        return;
    exec_param_box(ex, pa, o->c, g, b);
    if (swap) {
        sb_box t = *b;
        b->lo[0] = t.lo[1];
        b->hi[0] = t.hi[1];
        b->lo[1] = t.lo[0];
        b->hi[1] = t.hi[0];
    }
}

/* Whether rank coords g lie at 0 along every dim of `dims`. */
static int first_replica(const opx *o, const int *g, uint32_t dims, int nd)
{
    for (int d = 0; d < nd; d++)
        if ((dims & (1u << d)) && g[d] != 0)
            return 0;
    (void)o;
    return 1;
}

/* Under ZeRO 2 and 3, the rows [lo, hi) of its copy's box (of `rows`)
 * whose summed gradient rank r keeps: zero_slices' cut (params.c) in
 * whole rows, rank r the gr-th of the q ranks of its gradient group in
 * rank order (the order MPI_Comm_split gives the group). Local. */
static void copy_rows(const sb_executor *ex, const param *pa, int r, int64_t rows, int64_t *lo,
                      int64_t *hi)
{
    const opx *o = &ex->ops[pa->op];
    int nd = ex->m->ops[pa->op].ndims, q = 0, gr = 0, g[SB_MAX_DIMS];
    int color = plan_group_color(o->c, nd, r - o->r0, pa->grad_free);
    for (int s = 0; s < ex->size; s++)
        if (exec_coords(ex, o, s, g) && plan_group_color(o->c, nd, s - o->r0, pa->grad_free) == color) {
            gr += s < r;
            q++;
        }
    int64_t chunk = q > 1 ? (rows + q - 1) / q : rows;
    *lo = gr * chunk < rows ? gr * chunk : rows;
    *hi = (gr + 1) * chunk < rows ? (gr + 1) * chunk : rows;
}

/* The box (table order) rank r sends in the push: under ZeRO 2 and 3
 * its rows of the copy's box cpy (W's rows are the table's dim 1); else
 * the whole box from the first replica of its group, none from others. */
static int lead_box(const sb_executor *ex, const param *pa, int r, const sb_box *cpy, sb_box *lead,
                    sb_error *err)
{
    const opx *o = &ex->ops[pa->op];
    int g[SB_MAX_DIMS];
    *lead = *cpy;
    if (!cpy->nd || !exec_coords(ex, o, r, g))
        return 0;
    if (ex->zero < 2) {
        if (!first_replica(o, g, pa->grad_free, ex->m->ops[pa->op].ndims))
            lead->nd = 0;
        return 0;
    }
    int64_t lo, hi, unit = cpy->hi[0] - cpy->lo[0];
    copy_rows(ex, pa, r, cpy->hi[1] - cpy->lo[1], &lo, &hi);
    if (r == ex->rank && (lo * unit != pa->zlo || hi * unit != pa->zhi))
        return sb_fail(err, SB_EXIT_INTERNAL, "rank %d: tied copy '%s': rows %lld-%lld are not its "
                       "gradient slice %lld-%lld", r, pa->name, (long long)lo, (long long)hi,
                       (long long)pa->zlo, (long long)pa->zhi);
    lead->lo[1] = cpy->lo[1] + lo;
    lead->hi[1] = cpy->lo[1] + hi;
    if (lo == hi)
        lead->nd = 0;
    return 0;
}

int exec_tied_plans(sb_executor *ex, sb_error *err)
{
    int n = ex->size, rc = 0;
    sb_box *own = calloc((size_t)n, sizeof *own), *cpy = calloc((size_t)n, sizeof *cpy);
    sb_box *lead = calloc((size_t)n, sizeof *lead);
    if (!own || !cpy || !lead)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int pi = ex->nparams - ex->nshadow; pi < ex->nparams && !rc; pi++) {
        param *pa = &ex->params[pi];
        const param *tab = &ex->params[pa->owner];
        for (int r = 0; r < n && !rc; r++) {
            box_of_rank(ex, tab, r, 0, &own[r]);
            box_of_rank(ex, pa, r, 1, &cpy[r]);
            rc = lead_box(ex, pa, r, &cpy[r], &lead[r], err);
        }
        if (rc)
            break;
        rc = sb_relayout_plan(ex->comm, 2, tab->shape, own, cpy, SB_RELAYOUT_COPY, &pa->pull, err);
        if (!rc)
            rc = sb_relayout_plan(ex->comm, 2, tab->shape, lead, own, SB_RELAYOUT_ACCUM, &pa->push,
                                  err);
    }
    free(own);
    free(cpy);
    free(lead);
    return rc;
}

/* A buffer of box w (W's order) transposed (the table's dim order); n 0
 * when w is empty. */
static int swapped_buf(sb_executor *ex, const sb_box *w, tbuf *b, sb_error *err)
{
    sb_box box = {0};
    if (w->nd && sb_box_volume(w)) {
        box = *w;
        box.lo[0] = w->lo[1];
        box.hi[0] = w->hi[1];
        box.lo[1] = w->lo[0];
        box.hi[1] = w->hi[0];
    }
    return exec_tb_alloc(ex, b, &box, err);
}

/* dst = src (a box of dims d0 x d1) transposed. */
static void transpose(sb_executor *ex, float *dst, const float *src, int64_t d0, int64_t d1)
{
    int dims[2] = {(int)d0, (int)d1}, perm[2] = {1, 0};
    if (d0 && d1)
        ex->be->move->permute(dst, src, 2, dims, perm, 0);
}

int exec_tied_pull(sb_executor *ex, sb_error *err)
{
    for (int pi = ex->nparams - ex->nshadow; pi < ex->nparams; pi++) {
        param *pa = &ex->params[pi];
        param *tab = &ex->params[pa->owner];
        /* stage 3: the owner's shard whole for the while */
        int whole = ex->zero == 3 && zero_on(ex, tab) && !tab->w.p;
        if (whole && exec_zero_whole(ex, tab, err))
            return -1;
        tbuf t = {0};
        sb_box none = {0};
        int rc = swapped_buf(ex, pa->n ? &pa->box : &none, &t, err);
        if (!rc)
            rc = exec_run_relayout(ex, &ex->ops[pa->op], pa->pull, &tab->w, &t, err);
        if (whole)
            exec_zero_unwhole(ex, tab);
        if (!rc) /* (vocab, embed) -> W's (embed, vocab) */
            transpose(ex, pa->w.p, t.p, pa->box.hi[1] - pa->box.lo[1], pa->box.hi[0] - pa->box.lo[0]);
        exec_tb_free(ex, &t);
        if (rc)
            return -1;
        if (ex->be->weight_set && pa->w.n)
            ex->be->weight_set(pa->w.p, (size_t)pa->w.n);
    }
    return 0;
}

int exec_tied_push(sb_executor *ex, sb_error *err)
{
    for (int pi = ex->nparams - ex->nshadow; pi < ex->nparams; pi++) {
        param *pa = &ex->params[pi];
        param *tab = &ex->params[pa->owner];
        tbuf t = {0}, g = {0};
        /* what this rank sends (W's order): under ZeRO 2 and 3 its rows
         * (zlo, zhi: whole rows of the box), else the box */
        int zs = ex->zero >= 2 && zero_on(ex, pa);
        sb_box b = {0};
        if (pa->n) {
            int64_t row = pa->box.hi[1] - pa->box.lo[1];
            b = pa->box;
            if (zs) {
                b.lo[0] = pa->box.lo[0] + pa->zlo / row;
                b.hi[0] = pa->box.lo[0] + pa->zhi / row;
            }
        }
        int rc = swapped_buf(ex, &b, &t, err) || exec_tb_alloc(ex, &g, &tab->box, err);
        if (!rc && t.n) /* W's (embed, vocab) -> (vocab, embed) */
            transpose(ex, t.p, zs ? pa->dws.p : pa->dw.p, b.hi[0] - b.lo[0], b.hi[1] - b.lo[1]);
        if (!rc)
            rc = exec_run_relayout(ex, &ex->ops[pa->op], pa->push, &t, &g, err);
        if (!rc && g.n) {
            /* into the owner's summed gradient: the whole shard (stage 0,
             * 1) or this rank's slice of it (2, 3) */
            int sliced = ex->zero >= 2 && zero_on(ex, tab);
            float *dst = sliced ? tab->dws.p : tab->dw.p;
            const float *add = sliced ? g.p + tab->zlo : g.p;
            size_t k = (size_t)(sliced ? tab->zhi - tab->zlo : tab->n);
            if (k) {
                const float *ins[2] = {dst, add};
                ex->be->sum->add_forward(dst, ins, 2, k, 0);
            }
        }
        if (zs && pa->dws.n)
            ex->be->zero(pa->dws.p, (size_t)pa->dws.n);
        else if (!zs && pa->dw.n)
            ex->be->zero(pa->dw.p, (size_t)pa->dw.n);
        exec_tb_free(ex, &t);
        exec_tb_free(ex, &g);
        if (rc)
            return -1;
    }
    return 0;
}

void exec_tied_free(sb_executor *ex)
{
    for (int pi = ex->nparams - ex->nshadow; pi < ex->nparams; pi++) {
        sb_relayout_free(ex->params[pi].pull);
        sb_relayout_free(ex->params[pi].push);
        ex->params[pi].pull = ex->params[pi].push = NULL;
    }
}
