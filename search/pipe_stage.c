/* pipe_stage.c: one pipeline stage (pipe_int.h): its intra-op optimum per
 * micro-batch (the DP, the Pareto search or the Lagrangian walk within a
 * memory limit), kept by structure so equal stages are solved once, and the
 * lower bounds on a range of ops' cost and memory that prune the search. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "lagrange.h"
#include "msort.h"
#include "pipe_int.h"

/* ---- the search's state --------------------------------------------------------- */


/* The recompute modes the bounds cover: the fixed one, or both when each
 * stage chooses (lo..hi, 0 none, 1 every recomputable op; a recomputed op's
 * vertex cost has sb_recompute_cost through the stage problem's cp). */

/* Whether configs cfg of ops [i, j) fit the limit with k act copies,
 * recomputed when rc: 1 yes, 0 no, -1 error (X->err). */
static int fits_at(pctx *X, const sb_model *mb, int i, int j, const int *cfg, int k, int rc)
{
    double m = INFINITY;
    if (pipe_stage_memory(mb, i, j, cfg, X->o->opt, X->cp.zero, X->cp.precision, k, rc, &m, X->err))
        return -1;
    return m <= X->o->mem_limit;
}

sb_model *pipe_micro(pctx *X, int M)
{
    for (int q = 0; q < X->nM; q++)
        if (X->Ms[q] == M)
            return &X->mb[q];
    return NULL;
}

/* pipe_wire(m, i, v, k) from the producers kept in X (every micro-batch
 * model has the model's producers). */
static inline int64_t wire(const pctx *X, int i, int v, int k)
{
    size_t q = (size_t)v * SB_MAX_IO + (size_t)k;
    int p = X->wprod[q];
    if (p < i || p >= v)
        return -1;
    return (int64_t)(p - i) * 64 + X->wslot[q];
}

static uint64_t range_hash(const pctx *X, int i, int j)
{
    uint64_t h = pipe_mix(0, (uint64_t)(j - i));
    for (int v = i; v < j; v++) {
        h = pipe_mix(h, X->hop[v]);
        for (int k = 0; k < X->wnin[v]; k++)
            h = pipe_mix(h, (uint64_t)wire(X, i, v, k));
    }
    return h;
}

static int ranges_same(const pctx *X, int i, int j, int i2, int j2)
{
    if (j - i != j2 - i2)
        return 0;
    if (i == i2) /* the same range */
        return 1;
    for (int v = i, w = i2; v < j; v++, w++) {
        if (X->rep[v] != X->rep[w] && !pipe_ops_same(X->m, &X->m->ops[v], &X->m->ops[w]))
            return 0;
        for (int k = 0; k < X->wnin[v]; k++)
            if (wire(X, i, v, k) != wire(X, i2, w, k))
                return 0;
    }
    return 1;
}

static int tab_grow(pctx *X)
{
    size_t ncap = X->cap ? X->cap * 2 : 1024;
    stage_entry **nt = sb_calloc(ncap, sizeof *nt, X->err);
    if (!nt)
        return -1;
    for (size_t q = 0; q < X->cap; q++)
        if (X->tab[q]) {
            size_t h = X->tab[q]->key & (ncap - 1);
            while (nt[h])
                h = (h + 1) & (ncap - 1);
            nt[h] = X->tab[q];
        }
    free(X->tab);
    X->tab = nt;
    X->cap = ncap;
    return 0;
}

/* Stores a new entry (a copy of e) in a free slot. */
static stage_entry *tab_put(pctx *X, const stage_entry *e)
{
    if ((X->used + 1) * 2 >= X->cap && tab_grow(X))
        return NULL;
    stage_entry *ne = sb_malloc(sizeof *ne, X->err);
    if (!ne)
        return NULL;
    *ne = *e;
    size_t h = e->key & (X->cap - 1);
    while (X->tab[h])
        h = (h + 1) & (X->cap - 1);
    X->tab[h] = ne;
    X->used++;
    return ne;
}

static long configs_total(const sb_problem *pb)
{
    long n = 0;
    for (int v = 0; v < pb->m->nops; v++)
        n += pb->cfg[v].n;
    return n;
}

/* Exhaustive intra-op search of a stage problem (sb_pipe_brute): the least
 * cost whose memory fits, every config combination. */
static int brute_stage(const sb_problem *pb, double limit, sb_optimizer opt, int *best,
                       double *bestc, sb_error *err)
{
    int n = pb->m->nops;
    int *x = sb_calloc((size_t)n, sizeof *x, err);
    if (!x)
        return -1;
    *bestc = INFINITY;
    for (;;) {
        double c = sb_strategy_cost(pb, x);
        if (c < *bestc && (!(limit > 0) || sb_strategy_memory(pb, x, opt, NULL) <= limit)) {
            *bestc = c;
            memcpy(best, x, (size_t)n * sizeof *x);
        }
        int v = 0;
        while (v < n && ++x[v] == pb->cfg[v].n)
            x[v++] = 0;
        if (v == n)
            break;
    }
    free(x);
    return 0;
}

/* Stage problems with more configs than this (over all their ops) are
 * solved under a memory limit by Lagrangian relaxation, not by the exact
 * Pareto search (sb_search_within), whose labels take minutes there (one
 * GPT-3 stage of 24 ops on 16 devices: over a minute). */
#define EXACT_MEM_CONFIGS 512



/* The multiplier of a Lagrangian stage like e (its d, M, k, rc, ZeRO
 * stage) kept for dual bounds of others. */
static void hint_put(pctx *X, const stage_entry *e, double lam)
{
    struct lam_hint h = {e->d, e->M, e->k, e->rc, e->zero, lam};
    for (int q = 0; q < X->nhints; q++)
        if (X->hints[q].d == h.d && X->hints[q].M == h.M && X->hints[q].k == h.k
            && X->hints[q].rc == h.rc && X->hints[q].zero == h.zero) {
            X->hints[q] = h;
            return;
        }
    int n = (int)(sizeof X->hints / sizeof X->hints[0]);
    X->hints[X->nhints < n ? X->nhints++ : X->hint_next++ % n] = h;
}

/* A multiplier for a stage at (d, M, k, rc): the one kept for the same
 * copies k, else for the nearest k; -1 when none (only a guess: any
 * multiplier >= 0 gives a valid bound). */
static double hint_get(const pctx *X, int d, int M, int k, int rc)
{
    double lam = -1.0;
    int dk = -1;
    for (int q = 0; q < X->nhints; q++) {
        const struct lam_hint *h = &X->hints[q];
        if (h->d != d || h->M != M || h->rc != rc || h->zero != X->cp.zero)
            continue;
        int dist = abs(h->k - k);
        if (dk < 0 || dist < dk)
            dk = dist, lam = h->lam;
    }
    return lam;
}

static uint64_t entry_key(pctx *X, int what, int i, int j, int d, int M, int k, int rc);
static stage_entry *entry_find(pctx *X, int what, uint64_t key, int i, int j, int d, int M, int k,
                               int rc);

/* The index of config cfg (ndims split counts) among op v's configs in
 * pb, or -1. */
static int config_index(const sb_problem *pb, int v, const int *cfg)
{
    const sb_configs *cf = &pb->cfg[v];
    for (int x = 0; x < cf->n; x++)
        if (!memcmp(cf->c + (size_t)x * (size_t)cf->ndims, cfg, (size_t)cf->ndims * sizeof *cfg))
            return x;
    return -1;
}

/* An upper bound of the exact stage e (k copies, under limit) for its DP
 * (sb_search_within_ub): the least cost in pb of the optima of the same
 * stage at nearby other copies k2 (cached: the same structure, d, M, rc
 * and ZeRO stage) whose configs fit pb under the limit, with a margin for
 * the sums' order; INFINITY when none (or o->no_stage_ub). choice: pb's
 * ops, scratch. */
static double stage_ub(pctx *X, const stage_entry *e, const sb_problem *pb, double limit,
                       int *choice)
{
    double ub = INFINITY;
    if (X->o->no_stage_ub || X->brute || X->o->no_shortcuts || e->k < 1)
        return ub;
    int n = e->j - e->i;
    for (int k2 = e->k - 8; k2 <= e->k + 8; k2++) {
        if (k2 < 1 || k2 == e->k)
            continue;
        stage_entry *w = entry_find(X, ENTRY_STAGE, entry_key(X, ENTRY_STAGE, e->i, e->j, e->d,
                                                                e->M, k2, e->rc),
                                    e->i, e->j, e->d, e->M, k2, e->rc);
        if (!w || !w->cfg)
            continue;
        int v = 0;
        for (; v < n; v++)
            if ((choice[v] = config_index(pb, v, w->cfg + (size_t)v * SB_MAX_DIMS)) < 0)
                break;
        if (v < n || !(sb_strategy_memory(pb, choice, X->o->opt, NULL) <= limit * (1.0 - 1e-9)))
            continue;
        ub = fmin(ub, sb_strategy_cost(pb, choice));
    }
    if (isfinite(ub))
        X->r->stage_ubs++;
    return ub;
}

/* Strategies of the same stage met before, as starts for e's Lagrangian
 * walk (sb_lagrange_search_seeded), each mapped to pb's config indices
 * (malloc'd; *nseeds of them): the minimiser of its dual bound at the
 * same copies, and both ends of the hull edge of the nearest two searches
 * of the same structure at other copies (up to SEED_DIST away). None when
 * o->no_lagrange_seeds. */
#define LAGRANGE_SEEDS 5
#define SEED_DIST 128
static int lagrange_seeds(pctx *X, const stage_entry *e, const sb_problem *pb, int **seeds,
                          int *nseeds)
{
    *nseeds = 0;
    if (X->o->no_lagrange_seeds || X->o->no_shortcuts || X->brute || e->k < 1)
        return 0;
    int n = e->j - e->i;
    const int *from[LAGRANGE_SEEDS];
    int nf = 0;
    stage_entry *du = entry_find(X, ENTRY_DUAL, entry_key(X, ENTRY_DUAL, e->i, e->j, e->d, e->M,
                                                          e->k, e->rc),
                                 e->i, e->j, e->d, e->M, e->k, e->rc);
    if (du && du->cfg)
        from[nf++] = du->cfg;
    for (int dist = 1; dist <= SEED_DIST && nf + 2 <= LAGRANGE_SEEDS; dist++)
        for (int sgn = -1; sgn <= 1 && nf + 2 <= LAGRANGE_SEEDS; sgn += 2) {
            int k2 = e->k + sgn * dist;
            if (k2 < 1)
                continue;
            stage_entry *w = entry_find(X, ENTRY_STAGE, entry_key(X, ENTRY_STAGE, e->i, e->j,
                                                                  e->d, e->M, k2, e->rc),
                                        e->i, e->j, e->d, e->M, k2, e->rc);
            if (!w || !w->cfg || !w->cfg_b)
                continue;
            from[nf++] = w->cfg;
            from[nf++] = w->cfg_b;
        }
    for (int q = 0; q < nf; q++) {
        int *x = sb_malloc((size_t)n * sizeof *x, X->err);
        if (!x)
            return -1;
        int v = 0;
        for (; v < n; v++)
            if ((x[v] = config_index(pb, v, from[q] + (size_t)v * SB_MAX_DIMS)) < 0)
                break;
        if (v < n)
            free(x);
        else
            seeds[(*nseeds)++] = x;
    }
    return 0;
}

/* Whether the DP's tables over pb (a stage's problem, ops [i, j)) may pass
 * --max-table-mb: sb_search_estimate runs the DP's order on the tables'
 * scopes alone, in milliseconds, and its peak is at least what the DP
 * charges. Such a stage DP is not run: it would stop at the limit after
 * minutes and end the whole search (DeepSeek-V3's attention at p = 1024
 * did, after 168 s). The range is given up instead (t = INFINITY, counted
 * in ranges_over_tables; its bound kept in table_bound_bytes): the search
 * stays exact over every other range and says how many it left out. 1:
 * over, 0: not, -1: error (X->err). */
static int tables_over(pctx *X, const sb_problem *pb, int i, int j, int d, int M, int k)
{
    if (X->brute)
        return 0;
    double limit = (X->dp.max_table_mb > 0 ? X->dp.max_table_mb : 4096) * 1e6;
    sb_table_estimate te;
    if (sb_search_estimate(pb, &X->dp, limit, &te, X->err))
        return -1;
    if (!(te.peak_bytes > limit) && te.too_wide < 0)
        return 0;
    X->r->ranges_over_tables++;
    if (te.peak_bytes > X->r->table_bound_bytes)
        X->r->table_bound_bytes = te.peak_bytes;
    if (getenv("SB_PIPE_TRACE"))
        fprintf(stderr, "stage ops %d..%d d=%d M=%d k=%d zero=%d: tables up to %.1f MB (op '%s', "
                "dependent set %d), over %.0f MB: not solved (%.3f s)\n", i, j, d, M, k,
                X->cp.zero, te.peak_bytes / 1e6,
                te.peak_vertex >= 0 ? pb->m->ops[te.peak_vertex].name : "-", te.peak_depset,
                limit / 1e6, te.seconds);
    return 1;
}

/* ---- op prices kept between stage problems ------------------------------------- */

/* An op's configs and vertex costs in a stage problem depend on the stage
 * only through the op's copy (its fp8 marks, cut_fp8_marks) and which of
 * its inputs the stage produces (one produced before the stage is an input
 * of the sub-model: no producer, kind input), given the devices,
 * micro-batches, ZeRO stage and recompute mode; the cost model reads of
 * the model only the op and its operands' tensors (their kind, dims, a
 * tied table's identity, sb_tensor_tied) and a routed einsum's producer's
 * kind. So op v priced in one stage is priced the same in any other with
 * the same context, and so is an op equal to it (pipe_ops_same: every
 * field the cost and memory models read) with the same context: kept per
 * op and context, copied instead of priced again (every value the one
 * pricing gives; sb_pipe_opts.price_check prices every op anyway and fails
 * on a difference). */
struct op_price {
    struct op_price *next;
    int w;           /* the op priced (of the model) */
    int rc, fp8_in, fp8_out;
    uint32_t inside; /* bit k: input k produced in the stage */
    uint32_t tied;   /* bit k: operand k (inputs, then outputs) a tied table */
    int pkind[SB_MAX_IO]; /* input k produced in the stage: its producer's kind, else -1 */
    sb_configs cf;
};

/* At most this many bytes of kept prices (then no more are kept). */
#define PRICE_MEMO_BYTES 128e6

struct price_ctx {
    pctx *X;
    const sb_model *mb, *sub;
    int i, j, rc, check;
};

void pipe_prices_free(pctx *X)
{
    if (!X->pc)
        return;
    for (int v = 0; v < X->m->nops; v++)
        for (struct op_price *q = X->pc[v], *n; q; q = n) {
            n = q->next;
            free(q->cf.c), free(q->cf.cost), free(q);
        }
    free(X->pc);
    X->pc = NULL;
    X->pc_bytes = 0;
}

/* The context of op idx of the stage (op v of mb) into q (bar cf, next);
 * 0 when it has more operands than the masks hold (never kept). */
static int price_context(const struct price_ctx *P, int idx, struct op_price *q)
{
    int v = P->i + idx;
    const sb_op *op = &P->mb->ops[v];
    if (op->nin > SB_MAX_IO || op->nin + op->nout > 32)
        return 0;
    q->w = v, q->rc = P->rc;
    q->fp8_in = P->sub->ops[idx].fp8_in, q->fp8_out = P->sub->ops[idx].fp8_out;
    q->inside = q->tied = 0;
    for (int k = 0; k < SB_MAX_IO; k++)
        q->pkind[k] = -1;
    for (int k = 0; k < op->nin + op->nout; k++) {
        int t = k < op->nin ? op->in[k].tensor : op->out[k - op->nin].tensor;
        for (int x = 0; x < P->mb->ntied && x < 4; x++)
            if (P->mb->tied[x] == t) /* sb_tensor_tied */
                q->tied |= 1u << k;
        int pr = P->mb->tensors[t].producer;
        if (k < op->nin && pr >= P->i && pr < P->j) {
            q->inside |= 1u << k;
            q->pkind[k] = (int)P->mb->ops[pr].kind;
        }
    }
    return 1;
}

static struct op_price *price_find(const struct price_ctx *P, int idx)
{
    struct op_price c;
    int v = P->i + idx;
    if (!price_context(P, idx, &c))
        return NULL;
    for (struct op_price *q = P->X->pc[P->X->rep[v]]; q; q = q->next)
        if (q->rc == c.rc && q->fp8_in == c.fp8_in && q->fp8_out == c.fp8_out
            && q->inside == c.inside && q->tied == c.tied
            && !memcmp(q->pkind, c.pkind, sizeof c.pkind)
            && (q->w == v || pipe_ops_same(P->mb, &P->mb->ops[q->w], &P->mb->ops[v])))
            return q;
    return NULL;
}

static int price_get(void *ctx, int idx, sb_configs *cf, sb_error *err)
{
    const struct price_ctx *P = ctx;
    struct op_price *q = P->check ? NULL : price_find(P, idx);
    if (!q)
        return 0;
    size_t rows = (size_t)q->cf.n * (size_t)q->cf.ndims;
    cf->n = q->cf.n, cf->ndims = q->cf.ndims;
    cf->c = sb_malloc((rows ? rows : 1) * sizeof *cf->c, err);
    cf->cost = sb_malloc((size_t)(q->cf.n ? q->cf.n : 1) * sizeof *cf->cost, err);
    if (!cf->c || !cf->cost)
        return -1; /* sb_problem_free frees what came */
    memcpy(cf->c, q->cf.c, rows * sizeof *cf->c);
    memcpy(cf->cost, q->cf.cost, (size_t)q->cf.n * sizeof *cf->cost);
    P->X->r->prices_reused++;
    return 1;
}

static int price_put(void *ctx, int idx, sb_configs *cf, const sb_cost_params *cp, sb_error *err)
{
    (void)cp;
    const struct price_ctx *P = ctx;
    pctx *X = P->X;
    /* the check: priced again, the same to the bit (else price_get found none) */
    struct op_price *old = P->check ? price_find(P, idx) : NULL;
    if (old) {
        if (old->cf.n != cf->n || old->cf.ndims != cf->ndims
            || memcmp(old->cf.c, cf->c, (size_t)cf->n * (size_t)cf->ndims * sizeof *cf->c)
            || memcmp(old->cf.cost, cf->cost, (size_t)cf->n * sizeof *cf->cost))
            return sb_fail(err, SB_EXIT_INTERNAL, "price check: op '%s' in stage ops "
                           "%d..%d priced otherwise than op '%s' before",
                           P->sub->ops[idx].name, P->i, P->j, P->mb->ops[old->w].name);
        X->r->prices_reused++; /* held, and found the same */
        return 0;
    }
    size_t rows = (size_t)cf->n * (size_t)cf->ndims * sizeof *cf->c,
           bytes = sizeof(struct op_price) + rows + (size_t)cf->n * sizeof *cf->cost;
    if (X->pc_bytes + bytes > PRICE_MEMO_BYTES)
        return 0;
    struct op_price *q = sb_calloc(1, sizeof *q, err);
    if (!q)
        return -1;
    if (!price_context(P, idx, q)) {
        free(q);
        return 0;
    }
    q->cf.c = sb_malloc(rows ? rows : 1, err);
    q->cf.cost = sb_malloc((size_t)(cf->n ? cf->n : 1) * sizeof *q->cf.cost, err);
    if (!q->cf.c || !q->cf.cost) {
        free(q->cf.c), free(q->cf.cost), free(q);
        return -1;
    }
    memcpy(q->cf.c, cf->c, rows);
    memcpy(q->cf.cost, cf->cost, (size_t)cf->n * sizeof *cf->cost);
    q->cf.n = cf->n, q->cf.ndims = cf->ndims;
    int u = X->rep[P->i + idx];
    q->next = X->pc[u];
    X->pc[u] = q;
    X->pc_bytes += bytes;
    return 0;
}

/* The problem of stage e (its sub-model sub of ops [e->i, e->j) of mb, at
 * k copies, cost parameters c2) as pipe_stage_problem builds it, each op's
 * configs and costs from an equal op priced before in the same context
 * (kept for one (d, M, ZeRO stage) at a time). */
static int stage_problem(pctx *X, const sb_model *mb, const sb_model *sub, const stage_entry *e,
                         const sb_cost_params *c2, int k, sb_problem *pb)
{
    if (X->brute || X->o->no_shortcuts || X->o->no_price_memo || !X->rep)
        return pipe_stage_problem(sub, e->d, e->M, c2, k, NULL, pb, X->err);
    if (X->pc && (X->pc_d != e->d || X->pc_M != e->M || X->pc_zero != c2->zero))
        pipe_prices_free(X);
    if (!X->pc) {
        if (!(X->pc = sb_calloc((size_t)X->m->nops, sizeof *X->pc, X->err)))
            return -1;
        X->pc_d = e->d, X->pc_M = e->M, X->pc_zero = c2->zero;
    }
    struct price_ctx P = {X, mb, sub, e->i, e->j, e->rc, X->o->price_check};
    sb_price_memo memo = {price_get, price_put, &P};
    return pipe_stage_problem(sub, e->d, e->M, c2, k, &memo, pb, X->err);
}

/* Runs the DP of one stage into e. */
static int solve_stage(pctx *X, const sb_model *mb, stage_entry *e)
{
    double ts = sb_now();
    sb_model sub;
    sb_problem pb;
    if (pipe_sub_model(mb, e->i, e->j, &sub, X->err))
        return -1;
    int k = e->k < 0 ? 0 : e->k;
    sb_cost_params c2 = X->cp;
    c2.recompute = e->rc ? SB_RECOMPUTE_ALL : SB_RECOMPUTE_NONE;
    if (stage_problem(X, mb, &sub, e, &c2, k, &pb)) {
        free(sub.ops), free(sub.tensors);
        return -1;
    }
    int n = e->j - e->i, rc = 0;
    e->cfg = sb_calloc((size_t)n * SB_MAX_DIMS, sizeof *e->cfg, X->err);
    e->cost = sb_calloc((size_t)n, sizeof *e->cost, X->err);
    int *choice = sb_calloc((size_t)n, sizeof *choice, X->err);
    if (!e->cfg || !e->cost || !choice) {
        rc = -1;
        goto out;
    }
    double limit = e->k >= 0 ? X->o->mem_limit : 0.0;
    long exact_max = X->o->lagrange_above > 0 ? X->o->lagrange_above : EXACT_MEM_CONFIGS;
    long nconf = configs_total(&pb);
    if (!X->brute && !(limit > 0 && nconf <= exact_max)) {
        int over = tables_over(X, &pb, e->i, e->j, e->d, e->M, e->k);
        if (over) { /* given up, as a stage DP over its budget */
            e->t = e->least = INFINITY;
            X->r->ranges_given_up += over > 0;
            rc = over < 0 ? -1 : 0;
            goto out;
        }
    }
    X->r->subproblems++;
    X->r->rc_solved += X->rc_choose && e->rc;
    if (X->brute) {
        if (brute_stage(&pb, limit, X->o->opt, choice, &e->t, X->err)) {
            rc = -1;
            goto out;
        }
    } else if (limit > 0 && nconf > exact_max) {
        sb_lagrange_result lr;
        int nseeds = 0, *seeds[LAGRANGE_SEEDS], *bch = sb_calloc((size_t)n, sizeof *bch, X->err);
        if (!bch || lagrange_seeds(X, e, &pb, seeds, &nseeds)
            || sb_lagrange_search_seeded(&pb, &X->dp, limit, X->o->opt,
                                         (const int *const *)seeds, nseeds, choice, bch, &lr,
                                         X->err)) {
            for (int q = 0; q < nseeds; q++)
                free(seeds[q]);
            free(bch);
            rc = -1;
            goto out;
        }
        for (int q = 0; q < nseeds; q++)
            free(seeds[q]);
        X->r->lagrange_seeded += nseeds > 0;
        if (lr.lam_edge >= 0 && isfinite(lr.t)) {
            e->cfg_b = sb_calloc((size_t)n * SB_MAX_DIMS, sizeof *e->cfg_b, X->err);
            if (!e->cfg_b) {
                free(bch);
                rc = -1;
                goto out;
            }
            for (int v = 0; v < n; v++)
                memcpy(e->cfg_b + (size_t)v * SB_MAX_DIMS,
                       pb.cfg[v].c + (size_t)bch[v] * (size_t)pb.cfg[v].ndims,
                       (size_t)pb.cfg[v].ndims * sizeof(int));
        }
        free(bch);
        e->t = lr.t;
        e->least = lr.least;
        if (lr.lam > 0)
            hint_put(X, e, lr.lam);
        X->r->lagrange_stages++;
        X->r->lagrange_dps += lr.dps;
        if (isfinite(e->t))
            e->gap = lr.gap; /* r->lagrange_gap: over the stages taken (pipe_stage) */
    } else {
        sb_result res;
        sb_error e2 = {0};
        double least = NAN;
        double ub = limit > 0 ? stage_ub(X, e, &pb, limit, choice) : INFINITY;
        int src = limit > 0 ? sb_search_within_ub(&pb, &X->dp, limit, X->o->opt, ub, &res, &least,
                                                  &e2)
                            : sb_search(&pb, &X->dp, &res, &e2);
        if (src) {
            e->t = INFINITY;
            e->least = isfinite(least) ? least : INFINITY;
            if (!isfinite(least))
                X->r->ranges_given_up++; /* a budget, not "nothing fits" */
            goto out;
        }
        e->t = res.total_cost;
        memcpy(choice, res.choice, (size_t)n * sizeof *choice);
        sb_result_free(&res);
    }
    if (isfinite(e->t))
        for (int v = 0; v < n; v++) {
            memcpy(e->cfg + (size_t)v * SB_MAX_DIMS,
                   pb.cfg[v].c + (size_t)choice[v] * (size_t)pb.cfg[v].ndims,
                   (size_t)pb.cfg[v].ndims * sizeof(int));
            e->cost[v] = pb.cfg[v].cost[choice[v]];
        }
out:
    if (getenv("SB_PIPE_TRACE"))
        fprintf(stderr, "stage ops %d..%d d=%d M=%d k=%d zero=%d rc=%d: t=%.6e least=%.4g GiB, "
                "%.3f s\n", e->i, e->j, e->d, e->M, e->k, e->zero, e->rc, e->t,
                e->least / 1073741824.0, sb_now() - ts);
    if (!isfinite(e->t) && e->cfg) {
        free(e->cfg), free(e->cost), free(e->cfg_b);
        e->cfg = NULL, e->cost = NULL, e->cfg_b = NULL;
    }
    free(choice);
    sb_problem_free(&pb);
    free(sub.ops), free(sub.tensors);
    return rc;
}

/* The cache key of ops [i, j) on d devices at M micro-batches with k act
 * copies, recompute mode rc (ENTRY_LEAST_MEM: the modes the bounds cover)
 * at the current ZeRO stage, for an entry of kind `what`. */
static uint64_t entry_key(pctx *X, int what, int i, int j, int d, int M, int k, int rc)
{
    if (X->brute)
        return ++X->serial;
    int a = 0, b = 0; /* stages start and end at segment bounds */
    while (X->seg[a] < i)
        a++;
    while (X->seg[b] < j)
        b++;
    uint64_t *slot = &X->hseg[(size_t)a * (size_t)(X->nseg + 1) + (size_t)b];
    if (!*slot)
        *slot = range_hash(X, i, j) | 1;
    uint64_t key = pipe_mix(pipe_mix(pipe_mix(*slot, (uint64_t)d), (uint64_t)M), (uint64_t)(int64_t)k);
    key = pipe_mix(pipe_mix(key, (uint64_t)rc), (uint64_t)X->cp.zero);
    return what == ENTRY_STAGE ? key : pipe_mix(key, 0x6c65617374ull + (uint64_t)what);
}

/* The cached entry of kind `what` equal in structure to ops [i, j) (d, M,
 * k, rc, the current ZeRO stage), or NULL. */
static stage_entry *entry_find(pctx *X, int what, uint64_t key, int i, int j, int d, int M, int k,
                               int rc)
{
    if (X->brute || !X->cap)
        return NULL;
    for (size_t h = key & (X->cap - 1); X->tab[h]; h = (h + 1) & (X->cap - 1)) {
        stage_entry *e = X->tab[h];
        if (e->key == key && e->what == what && e->d == d && e->M == M && e->k == k
            && e->rc == rc && e->zero == X->cp.zero && ranges_same(X, i, j, e->i, e->j))
            return e;
    }
    return NULL;
}

/* The unconstrained optimum of ops [i, j) on d devices at M micro-batches
 * (kept, or every stage's fixed mode: as pipe_stage at k = -1) at ZeRO
 * stage zero, from the cache, or NULL when it is not there: nothing is
 * solved. */
stage_entry *pipe_stage_cached(pctx *X, int i, int j, int d, int M, int zero)
{
    int rc = X->rc_choose ? 0 : X->rc_fixed, z = X->cp.zero;
    X->cp.zero = zero;
    stage_entry *e = entry_find(X, ENTRY_STAGE, entry_key(X, ENTRY_STAGE, i, j, d, M, -1, rc), i, j,
                                d, M, -1, rc);
    X->cp.zero = z;
    return e;
}

/* A new entry for ops [i, j) that takes the configs and costs of u. */
static stage_entry *entry_copy(pctx *X, stage_entry *ne, const stage_entry *u)
{
    int n = ne->j - ne->i;
    ne->t = u->t;
    ne->gap = u->gap;
    ne->cfg = sb_malloc((size_t)n * SB_MAX_DIMS * sizeof *ne->cfg, X->err);
    ne->cost = sb_malloc((size_t)n * sizeof *ne->cost, X->err);
    if (!ne->cfg || !ne->cost) {
        free(ne->cfg), free(ne->cost);
        return NULL;
    }
    memcpy(ne->cfg, u->cfg, (size_t)n * SB_MAX_DIMS * sizeof *ne->cfg);
    memcpy(ne->cost, u->cost, (size_t)n * sizeof *ne->cost);
    stage_entry *e = tab_put(X, ne);
    if (!e)
        free(ne->cfg), free(ne->cost);
    return e;
}

/* The stage of ops [i, j) on d devices at M micro-batches with k act
 * copies (-1: no memory limit): from the cache, or solved. NULL on error.
 * Under a limit, before any DP (each exact): the unconstrained optimum,
 * when it fits at k; the optimum at fewer copies k' < k, when it fits at k
 * (its memory only grows with the copies, so t(k) >= t(k'): it is optimal at
 * k, within the same gap to the same bound when Lagrangian); at k > 1 the
 * optimum at k' = 1 is solved first for that test, and when nothing fits
 * at 1 copy nothing fits at k. */
stage_entry *pipe_stage_rc(pctx *X, int i, int j, int d, int M, int k, int rc)
{
    sb_model *mb = pipe_micro(X, M);
    uint64_t key = entry_key(X, ENTRY_STAGE, i, j, d, M, k, rc);
    if (!X->cap && tab_grow(X))
        return NULL;
    stage_entry *hit = entry_find(X, ENTRY_STAGE, key, i, j, d, M, k, rc);
    if (hit) {
        X->r->cache_hits++;
        return hit;
    }
    stage_entry ne = {.key = key, .what = ENTRY_STAGE, .lb_taken = INFINITY, .i = i, .j = j,
                      .d = d, .M = M, .k = k, .rc = rc, .zero = X->cp.zero};
    if (k >= 0 && !X->brute) {
        stage_entry *u = pipe_stage_rc(X, i, j, d, M, -1, rc);
        if (!u)
            return NULL;
        int f = u->cfg ? fits_at(X, mb, i, j, u->cfg, k, rc) : 0;
        if (f < 0)
            return NULL;
        if (f)
            return entry_copy(X, &ne, u);
        for (int kk = X->o->no_shortcuts ? 0 : k - 1; kk >= 1; kk--) {
            stage_entry *w = entry_find(X, ENTRY_STAGE,
                                        entry_key(X, ENTRY_STAGE, i, j, d, M, kk, rc), i, j, d, M,
                                        kk, rc);
            f = w && w->cfg ? fits_at(X, mb, i, j, w->cfg, k, rc) : 0;
            if (f < 0)
                return NULL;
            if (f) {
                X->r->copies_reused++;
                return entry_copy(X, &ne, w);
            }
        }
        if (k > 1 && !X->o->no_shortcuts) {
            stage_entry *w = pipe_stage_rc(X, i, j, d, M, 1, rc);
            if (!w)
                return NULL;
            f = w->cfg ? fits_at(X, mb, i, j, w->cfg, k, rc) : 0;
            if (f < 0)
                return NULL;
            if (f) {
                X->r->copies_reused++;
                return entry_copy(X, &ne, w);
            }
            if (!isfinite(w->t) && isfinite(w->least)) { /* nothing fits at 1 copy */
                ne.t = INFINITY;
                ne.least = w->least;
                X->r->copies_reused++;
                return tab_put(X, &ne);
            }
        }
    }
    if (solve_stage(X, mb, &ne))
        return NULL;
    stage_entry *e = tab_put(X, &ne);
    if (!e)
        free(ne.cfg), free(ne.cost);
    return e;
}

/* A lower bound on the optimum of entry e's stage in e's mode: its cost,
 * less its Lagrangian gap (0 when solved exactly); infinite when nothing
 * fits. */
static double entry_lb(const stage_entry *e)
{
    return isfinite(e->t) ? e->t * (1.0 - e->gap) : e->t;
}

/* Stage e taken by the search, its optimum in the mode it chooses at least
 * lb (pipe_lagrange_gap). */
static stage_entry *taken(stage_entry *e, double lb)
{
    e->lb_taken = fmin(e->lb_taken, fmax(lb, 0.0));
    return e;
}

/* The step T = sum_s (t_s + p2p_s) + (M - 1) max_s (t_s + p2p_s) (per
 * micro-batch stage costs t_s) is at least (1 - g) of itself with every
 * t_s at its bound when each t_s is within g of it, and at least M lb_s
 * for each stage s. So the least step is at least (1 - g) of the step
 * found, g the largest gap to its bound of the stages taken whose M lb_s
 * is under the step found: a partition with any other stage cannot beat
 * it, and the best partition is either found or skipped by a bound no
 * greater than its cost. The bound of a stage is the lesser of its two
 * modes' when it chose between recomputing or not: each mode's own gap
 * would be far looser (Llama 3 8B at p = 64, --memory 60GiB: the whole
 * model as one stage, recomputed, 99.8% over its bound, 10 times the
 * step found; the stages that matter within 8%). */
void pipe_lagrange_gap(pctx *X)
{
    sb_pipe_result *r = X->r;
    r->lagrange_gap = 0.0;
    for (size_t q = 0; q < X->cap; q++) {
        const stage_entry *e = X->tab[q];
        if (!e || e->what != ENTRY_STAGE || !isfinite(e->t) || !(e->t > 0.0)
            || !(e->lb_taken < e->t) || (double)e->M * e->lb_taken * BOUND_SLACK >= r->step_cost)
            continue;
        r->lagrange_gap = fmax(r->lagrange_gap, 1.0 - e->lb_taken / e->t);
    }
}

/* Memory skip (exact): 1 when each stage chooses its recomputation and the
 * exact least memory of ops [i, j) kept (every config choice, k copies) is
 * over the limit, so no kept strategy fits and its DP need not run; 0 else
 * (also with o->no_skips or brute force: the DP decides); -1 on error. */
static int least_mem_mode(pctx *X, int i, int j, int d, int M, int k, int mode, double *out);

int pipe_kept_over(pctx *X, int i, int j, int d, int M, int k)
{
    double lm = 0.0;
    if (!X->rc_choose || k < 0 || X->brute || X->o->no_shortcuts || X->o->no_skips)
        return 0;
    if (least_mem_mode(X, i, j, d, M, k, 0, &lm))
        return -1;
    return lm * BOUND_SLACK > X->o->mem_limit;
}

/* The stage of ops [i, j) (d, M, k as stage_rc) in its recompute mode:
 * the fixed one, or, when each stage chooses, the better of none and all
 * (ties: none). Exact shortcut: recomputing adds sb_recompute_cost >= 0 to
 * every config's vertex cost and leaves the edges as they are, so every
 * strategy costs at least as much recomputed as kept, and the recomputing
 * optimum under the limit is at least the kept unconstrained optimum, and
 * at least the recomputing unconstrained one; when the kept optimum under
 * the limit is at most either, recomputing cannot win and is not solved
 * (r->rc_dominated). */
stage_entry *pipe_stage(pctx *X, int i, int j, int d, int M, int k)
{
    if (!X->rc_choose || k < 0) { /* no limit: kept (recomputing costs no less) */
        stage_entry *e = pipe_stage_rc(X, i, j, d, M, k, X->rc_choose ? 0 : X->rc_fixed);
        return e ? taken(e, entry_lb(e)) : NULL;
    }
    int over = pipe_kept_over(X, i, j, d, M, k);
    if (over < 0)
        return NULL;
    if (over) { /* kept fits no config choice: recomputed, unless that fails too (then as
                   below, which reports the lesser least memory) */
        stage_entry *ea = pipe_stage_rc(X, i, j, d, M, k, 1);
        if (!ea || isfinite(ea->t))
            return ea ? taken(ea, entry_lb(ea)) : NULL;
    }
    stage_entry *en = pipe_stage_rc(X, i, j, d, M, k, 0);
    if (!en)
        return NULL;
    /* dominated: recomputing costs at least un->t or ua->t >= en->t, which
     * is at least en's own bound */
    if (!X->o->no_shortcuts && isfinite(en->t)) {
        stage_entry *un = pipe_stage_rc(X, i, j, d, M, -1, 0);
        if (!un)
            return NULL;
        if (en->t <= un->t) {
            X->r->rc_dominated++;
            return taken(en, entry_lb(en));
        }
        stage_entry *ua = pipe_stage_rc(X, i, j, d, M, -1, 1);
        if (!ua)
            return NULL;
        if (en->t <= ua->t) {
            X->r->rc_dominated++;
            return taken(en, entry_lb(en));
        }
    }
    stage_entry *ea = pipe_stage_rc(X, i, j, d, M, k, 1);
    if (!ea)
        return NULL;
    double lb = fmin(entry_lb(en), entry_lb(ea)); /* the stage's optimum, either mode */
    if (ea->t < en->t)
        return taken(ea, lb);
    if (!isfinite(en->t) && !isfinite(ea->t) && ea->least < en->least)
        return ea; /* nothing fits either way: the lesser least memory */
    return taken(en, lb);
}

/* The Lagrangian dual bound of ops [i, j) with k copies in mode rc at
 * multiplier lam >= 0, by one DP: every strategy stage_rc can return fits
 * (resident bytes plus its largest scratch, at least the least scratch
 * s_lb, within the limit), so it costs at least min over strategies of
 * (cost + lam resident) - lam (limit - s_lb). Cached by structure; its
 * minimiser kept as a start for the range's Lagrangian walk. */
static int dual_bound(pctx *X, int i, int j, int d, int M, int k, int rc, double lam, double *lb)
{
    uint64_t key = entry_key(X, ENTRY_DUAL, i, j, d, M, k, rc);
    stage_entry *hit = entry_find(X, ENTRY_DUAL, key, i, j, d, M, k, rc);
    if (hit) {
        *lb = hit->t;
        return 0;
    }
    double ts = sb_now(), limit = X->o->mem_limit;
    sb_model sub;
    sb_problem pb;
    if (pipe_sub_model(pipe_micro(X, M), i, j, &sub, X->err))
        return -1;
    sb_cost_params c2 = X->cp;
    c2.recompute = rc ? SB_RECOMPUTE_ALL : SB_RECOMPUTE_NONE;
    if (pipe_stage_problem(&sub, d, M, &c2, k, NULL, &pb, X->err)) {
        free(sub.ops), free(sub.tensors);
        return -1;
    }
    double s_lb = 0.0;
    for (int v = 0; v < pb.m->nops; v++) {
        double smin = INFINITY;
        for (int x = 0; x < pb.cfg[v].n; x++) {
            sb_mem mm;
            sb_problem_op_memory(&pb, v, x, X->o->opt, &mm);
            pb.cfg[v].cost[x] += lam * sb_mem_resident(&mm);
            smin = fmin(smin, mm.scratch);
        }
        s_lb = fmax(s_lb, smin);
    }
    sb_result r;
    int n = j - i, *cfg = NULL;
    int rc2 = tables_over(X, &pb, i, j, d, M, k);
    if (rc2 > 0) { /* no DP: the bound is none */
        *lb = -INFINITY;
        rc2 = 0;
    } else if (!rc2 && !(rc2 = sb_search(&pb, &X->dp, &r, X->err))) {
        /* the DP's sums and the strategies' costs are added in other
         * orders: slack on both terms keeps the bound under */
        *lb = r.total_cost * BOUND_SLACK - lam * (limit - s_lb) / BOUND_SLACK;
        /* its minimiser: a start for the range's Lagrangian walk */
        cfg = sb_calloc((size_t)n * SB_MAX_DIMS, sizeof *cfg, X->err);
        for (int v = 0; cfg && v < n; v++)
            memcpy(cfg + (size_t)v * SB_MAX_DIMS,
                   pb.cfg[v].c + (size_t)r.choice[v] * (size_t)pb.cfg[v].ndims,
                   (size_t)pb.cfg[v].ndims * sizeof(int));
        sb_result_free(&r);
        rc2 = cfg ? 0 : -1;
    }
    sb_problem_free(&pb);
    free(sub.ops), free(sub.tensors);
    if (rc2)
        return -1;
    X->r->dual_bounds++;
    if (getenv("SB_PIPE_TRACE"))
        fprintf(stderr, "dual ops %d..%d d=%d M=%d k=%d zero=%d rc=%d lambda %.4g: %.6e, %.3f s\n",
                i, j, d, M, k, X->cp.zero, rc, lam, *lb, sb_now() - ts);
    stage_entry ne = {.key = key, .what = ENTRY_DUAL, .lb_taken = INFINITY, .i = i, .j = j,
                      .d = d, .M = M, .k = k, .rc = rc, .zero = X->cp.zero, .t = *lb,
                      .cfg = cfg};
    if (tab_put(X, &ne))
        return 0;
    free(cfg);
    return -1;
}



/* Whether a Lagrangian search of ops [i, j)'s structure at copies within
 * k +- 8 (either mode) ended on a hull edge: its walk at k then starts
 * from that edge (lagrange_seeds) and takes about one DP, what a dual
 * bound takes, so the range is solved rather than bounded. */
int pipe_seeds_near(pctx *X, int i, int j, int d, int M, int k)
{
    if (X->o->no_lagrange_seeds || X->o->no_shortcuts || X->brute)
        return 0;
    for (int rc = rc_lo(X); rc <= rc_hi(X); rc++)
        for (int k2 = k - SEED_DIST; k2 <= k + SEED_DIST; k2++) {
            if (k2 < 1 || k2 == k)
                continue;
            stage_entry *w = entry_find(X, ENTRY_STAGE,
                                        entry_key(X, ENTRY_STAGE, i, j, d, M, k2, rc), i, j, d,
                                        M, k2, rc);
            if (w && w->cfg_b)
                return 1;
        }
    return 0;
}

/* A lower bound of the stage of ops [i, j) under the limit with k copies
 * as pipe_stage() gives it (either mode when each stage chooses: the lesser of
 * the two bounds, only the recomputed one when no kept strategy fits),
 * each mode's bound the larger of its unconstrained optimum and its dual
 * bound at the multiplier of a Lagrangian stage like it (hint_get; none:
 * the unconstrained optimum alone). -1 on error. */
int pipe_stage_dual_lower(pctx *X, int i, int j, int d, int M, int k, double *lb)
{
    int over = 0;
    if (X->rc_choose && (over = pipe_kept_over(X, i, j, d, M, k)) < 0)
        return -1;
    double lbm[2] = {INFINITY, INFINITY};
    for (int rc = rc_lo(X); rc <= rc_hi(X); rc++) {
        if (rc == 0 && over)
            continue;
        if (rc == 1 && X->rc_choose && lbm[0] < INFINITY) {
            /* the recomputed mode costs at least its unconstrained optimum,
             * which is at least the kept one: no DP when that already says it */
            stage_entry *ua = pipe_stage_rc(X, i, j, d, M, -1, 1);
            if (!ua)
                return -1;
            if (ua->t * BOUND_SLACK >= lbm[0])
                break;
        }
        stage_entry *u = pipe_stage_rc(X, i, j, d, M, -1, rc);
        if (!u)
            return -1;
        lbm[rc] = isfinite(u->t) ? u->t * BOUND_SLACK : -INFINITY;
        double lam = hint_get(X, d, M, k, rc), du = -INFINITY;
        if (lam > 0 && dual_bound(X, i, j, d, M, k, rc, lam, &du))
            return -1;
        lbm[rc] = fmax(lbm[rc], du);
    }
    *lb = fmin(lbm[0], lbm[1]);
    return 0;
}

/* ---- bounds ------------------------------------------------------------------------ */

/* Entry indices by their scratch (cm[3 i + 2]; ctx: cm), stably. */
#define SCRATCH_LESS(ctx, x, y) \
    (((const double *)(ctx))[3 * (size_t)(x) + 2] < ((const double *)(ctx))[3 * (size_t)(y) + 2])
SB_DEFINE_MSORT(msort_by_scratch, int, SCRATCH_LESS)

/* X->cm_perm for op_bounds' entries: each rep's entries by scratch,
 * stably. */
static int sort_reps(pctx *X, int nops)
{
    size_t n = (size_t)X->cm_off[nops];
    if (2 * n > X->perm_cap) { /* the permutation and the merge's scratch */
        int *q = realloc(X->cm_perm, (2 * n + 1) * sizeof *q);
        if (!q)
            return sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
        X->cm_perm = q, X->perm_cap = 2 * n + 1;
    }
    int *tmp = X->cm_perm + n;
    for (int u = 0; u < nops; u++) {
        int o = X->cm_off[u], e = X->cm_off[u + 1];
        if (X->rep[u] != u || e <= o)
            continue;
        int *idx = X->cm_perm + o;
        size_t len = (size_t)(e - o);
        for (size_t x = 0; x < len; x++)
            idx[x] = o + (int)x;
        msort_by_scratch(idx, tmp + o, len, X->cm);
    }
    return 0;
}

/* Per op of the micro model at d devices: least cost' and least memory
 * terms over its configs (equal ops computed once). */
int pipe_op_bounds(pctx *X, const sb_model *mb, int d, int M, op_bound *b)
{
    size_t ncm = 0;
    for (int v = 0; v < mb->nops; v++) {
        X->cm_off[v] = (int)(ncm / 3);
        if (X->rep[v] != v) {
            b[v] = b[X->rep[v]];
            continue;
        }
        const sb_op *op = &mb->ops[v];
        sb_configs cf;
        int cutoff = X->cp.cutoff > 0 ? X->cp.cutoff : X->m->cutoff;
        if (sb_enumerate_configs(op, d, cutoff, &cf, X->err))
            return -1;
        sb_cost_params c2 = X->cp;
        c2.devices = d;
        b[v] = (op_bound){INFINITY, INFINITY, INFINITY, INFINITY};
        size_t nmodes = (size_t)(rc_hi(X) - rc_lo(X) + 1);
        if (ncm + 3 * nmodes * (size_t)cf.n > X->cm_cap) {
            size_t nc = 2 * (ncm + 3 * nmodes * (size_t)cf.n);
            double *q = realloc(X->cm, nc * sizeof *q);
            if (!q) {
                free(cf.c), free(cf.cost);
                return sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
            }
            X->cm = q, X->cm_cap = nc;
        }
        for (int x = 0; x < cf.n; x++) {
            const int *c = cf.c + (size_t)x * (size_t)cf.ndims;
            double cost, wg = 0.0;
            if (c2.gpu_sms > 0) /* the GPU op model: the cost and its reduction at once */
                cost = sb_op_cost_split(mb, op, c, &c2, M > 1 ? &wg : NULL);
            else
                cost = sb_op_cost(mb, op, c, &c2), wg = M > 1 ? sb_weight_grad_cost(mb, op, c, &c2) : 0.0;
            if (M > 1)
                cost -= (double)(M - 1) / M * wg;
            b[v].c = fmin(b[v].c, cost); /* kept: recomputing only adds cost */
            for (int rc = rc_lo(X); rc <= rc_hi(X); rc++) {
                /* recomputed: the op's least memory without its stage's kept
                 * inputs, still a bound (they move scratch to activations held
                 * at least once); both modes when each stage chooses: the
                 * least over them bounds either */
                sb_mem mm;
                sb_op_memory_prec(mb, op, c, X->o->opt, X->cp.zero, rc, X->cp.precision, &mm);
                double wg = mm.weights + mm.weight_grads + mm.optimizer + mm.act_grads;
                b[v].wg = fmin(b[v].wg, wg);
                b[v].a = fmin(b[v].a, mm.activations);
                b[v].s = fmin(b[v].s, mm.scratch);
                X->cm[ncm++] = wg, X->cm[ncm++] = mm.activations, X->cm[ncm++] = mm.scratch;
            }
        }
        free(cf.c);
        free(cf.cost);
    }
    X->cm_off[mb->nops] = (int)(ncm / 3);
    return sort_reps(X, mb->nops);
}

/* Sorts it[0, n) by scratch, stably (equal scratch: the order listed, as
 * glibc's merge sort behind qsort did, so least_mem adds its sums in the
 * same order on any C library), by merging its ascending runs pairwise
 * (least_mem lists each rep's items as one run, op_bounds' cm_perm: a
 * stable sort of the runs is the stable sort of the items in config
 * order, as ties keep the rep's order and then the config's); tmp: n
 * items. */
static void sort_items(struct mem_item *it, struct mem_item *tmp, size_t n)
{
    struct mem_item *src = it, *dst = tmp;
    int again = n > 1;
    while (again) {
        again = 0;
        size_t a = 0, o = 0;
        while (a < n) {
            size_t m = a + 1, b;
            while (m < n && !(src[m].s < src[m - 1].s))
                m++;
            for (b = m < n ? m + 1 : m; b < n && !(src[b].s < src[b - 1].s); b++)
                ;
            again |= m < n;
            size_t i = a, j = m;
            while (i < m && j < b)
                dst[o++] = src[j].s < src[i].s ? src[j++] : src[i++];
            while (i < m)
                dst[o++] = src[i++];
            while (j < b)
                dst[o++] = src[j++];
            a = b;
        }
        struct mem_item *sw = src;
        src = dst;
        dst = sw;
    }
    if (src != it)
        memcpy(it, src, n * sizeof *it);
}

/* The least memory per device of ops [i, j) with k act copies over every
 * config choice (stage_memory's model: each op's resident bytes, plus the
 * largest scratch), exactly: memory is per op, so for each scratch level
 * sigma (the ops' scratch values, ascending) each op takes its least
 * resident bytes among configs with scratch <= sigma; the least over sigma
 * of sigma + their sum. Cached by structure; needs op_bounds of (d, M).
 * When each stage chooses its recomputation, op_bounds lists every config
 * in both modes, so each op takes its own mode here: a lower bound of the
 * stage's least memory in either mode (not always reached), still
 * non-decreasing as ops are added. */
int pipe_least_mem(pctx *X, int i, int j, int d, int M, int k, double *out)
{
    return least_mem_mode(X, i, j, d, M, k, -1, out);
}

/* least_mem of one recompute mode (0 kept, 1 recomputed) when each stage
 * chooses (op_bounds listed both, mode by mode per config: only that
 * mode's entries taken); mode -1: the modes op_bounds listed. */
static int least_mem_mode(pctx *X, int i, int j, int d, int M, int k, int mode, double *out)
{
    int both = X->rc_choose && mode >= 0;             /* entries x of mode: x % 2 == mode */
    int modes = both ? 3 + mode : X->rc_choose ? 2 : X->rc_fixed; /* the cache's key */
    uint64_t key = entry_key(X, ENTRY_LEAST_MEM, i, j, d, M, k, modes);
    stage_entry *hit = entry_find(X, ENTRY_LEAST_MEM, key, i, j, d, M, k, modes);
    if (hit) {
        *out = hit->t;
        return 0;
    }
    double kk = k > 1 ? k : 1;
    size_t n = 0;
    int nreps = 0;
    for (int v = i; v < j; v++)
        if (X->cnt[X->rep[v]]++ == 0) {
            int u = X->rep[v];
            nreps++;
            X->cur[u] = INFINITY;
            n += (size_t)(X->cm_off[u + 1] - X->cm_off[u]);
        }
    if (2 * n > X->items_cap) { /* the items and sort_items' scratch */
        struct mem_item *q = realloc(X->items, 4 * n * sizeof *q);
        if (!q) {
            for (int v = i; v < j; v++)
                X->cnt[X->rep[v]] = 0;
            return sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
        }
        X->items = q, X->items_cap = 4 * n;
    }
    n = 0;
    for (int v = i; v < j; v++) {
        int u = X->rep[v];
        if (X->cnt[u] < 0)
            continue;
        for (int xi = X->cm_off[u]; xi < X->cm_off[u + 1]; xi++) {
            int x = X->cm_perm[xi]; /* by scratch: each rep one sorted run */
            if (!both || (x - X->cm_off[u]) % 2 == mode)
                X->items[n++] = (struct mem_item){.s = X->cm[3 * (size_t)x + 2],
                                              .val = X->cm[3 * (size_t)x] + kk * X->cm[3 * (size_t)x + 1],
                                              .u = u};
        }
        X->cnt[u] = -X->cnt[u]; /* listed */
    }
    sort_items(X->items, X->items + n, n);
    double best = INFINITY, sum = 0.0;
    int open = nreps;
    for (size_t q = 0; q < n; q++) {
        const struct mem_item *it = &X->items[q];
        double c = -(double)X->cnt[it->u];
        if (it->val < X->cur[it->u]) {
            if (X->cur[it->u] == INFINITY)
                open--, sum += c * it->val;
            else
                sum += c * (it->val - X->cur[it->u]);
            X->cur[it->u] = it->val;
        }
        if (!open && (q + 1 == n || X->items[q + 1].s != it->s))
            best = fmin(best, sum + it->s);
    }
    for (int v = i; v < j; v++)
        X->cnt[X->rep[v]] = 0;
    stage_entry ne = {.key = key, .what = ENTRY_LEAST_MEM, .lb_taken = INFINITY, .i = i,
                      .j = j, .d = d, .M = M, .k = k, .rc = modes, .zero = X->cp.zero,
                      .t = best};
    if (!tab_put(X, &ne))
        return -1;
    *out = best;
    return 0;
}

