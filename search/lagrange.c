/* lagrange.c: a stage's least cost within a memory limit by Lagrangian
 * relaxation (lagrange.h).
 *
 * Resident bytes are additive over ops, so the exact DP minimises
 * cost + lambda x resident for any lambda >= 0 (each vertex cost plus lambda
 * times its config's resident bytes). Every minimiser is a vertex of the
 * lower convex hull of the strategies' (resident, cost) points, and the
 * best a Lagrangian search can return is the cheapest hull vertex that
 * fits. The search walks the hull (the Eisner-Severance scheme for a
 * parametric optimum):
 *
 *   1. lambda = 0: the unconstrained optimum B. If it fits it is the exact
 *      optimum (gap 0).
 *   2. The least memory strategy A, exactly and without a DP (each op its
 *      least resident config under each scratch level, walk_least_mem):
 *      if it does not fit, nothing fits (found before step 1's DP, which
 *      is then not run). It need not be on the hull (nor need seeds, which
 *      replace it when they fit and cost less).
 *   3. While A (fits) and B (does not) are not proven adjacent: lambda =
 *      the slope between them, (cost A - cost B) / (res B - res A), where
 *      both lie on one line cost + lambda res = l. The DP's minimum at that
 *      lambda is at most l; if it is l (to rounding), no strategy lies
 *      under the line and A, B are adjacent hull vertices: stop. Else its
 *      minimiser x is a new hull vertex between them (res A < res x < res
 *      B, cost A > cost x > cost B; after the first step A may not be
 *      on the hull, and x then only costs less than A) and replaces A if
 *      it fits, else B.
 *
 * Each DP either finds a new hull vertex or ends the walk, so it ends on
 * the hull edge where fitting stops (when fitting is monotone in resident
 * bytes along the hull: the largest scratch varies little), with the
 * cheapest fitting hull vertex as A. A bisection on lambda spends most of
 * its DPs narrowing an interval whose ends already have these two
 * minimisers (10-25 DPs a stage against 3-6 here), and stops at a ratio,
 * so it can step over a vertex whose interval is narrower.
 *
 * Every lambda >= 0 gives a dual bound: a strategy x that fits has
 * resident(x) <= limit - s (s: the least possible largest scratch, the
 * largest over ops of their least scratch), so
 *     cost(x) >= min_y (cost(y) + lambda res(y)) - lambda (limit - s);
 * the best over the lambdas met (lambda = 0 included: the unconstrained
 * optimum) gives the gap. */
#define _GNU_SOURCE
#include "lagrange.h"
#include "dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* At most this many DPs a search (the walk ends long before on every
 * model measured). */
#define MAX_DPS 32

/* A DP minimum within this fraction of the line's value proves the edge:
 * the two sums differ only in the order of their terms. */
#define EDGE_TOL 1e-12

/* A strategy met: its cost (the given vertex costs and edges), resident
 * bytes, memory (resident + largest scratch) and configs. */
typedef struct {
    double c, r, m;
    int *x;
} point;

typedef struct {
    sb_problem *pb;
    const sb_search_opts *so;
    double **orig, **res, **scr; /* [op][config] */
    int n;
    sb_error *err;
    dp_layout_cache lc; /* the edges' layouts, from one DP of pb to the next */
} walk;

/* Prices strategy p->x: cost, resident bytes, memory. */
static void walk_price(walk *W, point *p)
{
    double sres = 0.0, smax = 0.0;
    for (int v = 0; v < W->n; v++) {
        sres += W->res[v][p->x[v]];
        smax = fmax(smax, W->scr[v][p->x[v]]);
    }
    p->c = sb_strategy_cost(W->pb, p->x);
    p->r = sres;
    p->m = sres + smax;
}

typedef struct {
    double s;
    int v, x;
} scr_item;

static int scr_cmp(const void *a, const void *b)
{
    const scr_item *x = a, *y = b;
    if (x->s != y->s)
        return x->s < y->s ? -1 : 1;
    if (x->v != y->v)
        return x->v - y->v;
    return x->x - y->x;
}

/* The least memory strategy into p, exactly and without a DP: memory is
 * the resident bytes, a sum over ops, plus the largest scratch, so for
 * each scratch level s every op takes its least resident config among
 * those with scratch <= s (the cheapest among equals), and the least over
 * s of s + that sum is the least memory of any strategy. */
static int walk_least_mem(walk *W, point *p)
{
    sb_problem *pb = W->pb;
    int n = W->n;
    size_t tot = 0;
    for (int v = 0; v < n; v++)
        tot += (size_t)pb->cfg[v].n;
    scr_item *it = sb_malloc(tot * sizeof *it, W->err);
    double *bres = sb_malloc((size_t)n * sizeof *bres, W->err);
    if (!it || !bres) {
        free(it), free(bres);
        return -1;
    }
    size_t q = 0;
    for (int v = 0; v < n; v++)
        for (int x = 0; x < pb->cfg[v].n; x++)
            it[q++] = (scr_item){W->scr[v][x], v, x};
    qsort(it, tot, sizeof *it, scr_cmp);
    for (int v = 0; v < n; v++)
        bres[v] = INFINITY;
    int have = 0;
    double sum = 0.0, best = INFINITY, best_s = 0.0;
    for (q = 0; q < tot; q++) {
        int v = it[q].v;
        double r = W->res[v][it[q].x];
        if (r < bres[v]) {
            if (isinf(bres[v]))
                have++;
            else
                sum -= bres[v];
            bres[v] = r;
            sum += r;
        }
        /* the level's last item: every op's least at scratch <= it[q].s */
        if (have == n && (q + 1 == tot || it[q + 1].s != it[q].s) && sum + it[q].s < best)
            best = sum + it[q].s, best_s = it[q].s;
    }
    for (int v = 0; v < n; v++) {
        int bx = -1;
        for (int x = 0; x < pb->cfg[v].n; x++)
            if (W->scr[v][x] <= best_s
                && (bx < 0 || W->res[v][x] < W->res[v][bx]
                    || (W->res[v][x] == W->res[v][bx] && W->orig[v][x] < W->orig[v][bx])))
                bx = x;
        p->x[v] = bx < 0 ? 0 : bx;
    }
    free(it), free(bres);
    walk_price(W, p);
    return 0;
}

/* DP at lambda >= 0 into p; *f the DP's minimum. pb's costs are restored after. */
static int walk_dp(walk *W, double lam, point *p, double *f)
{
    sb_problem *pb = W->pb;
    int n = W->n;
    for (int v = 0; v < n; v++)
        for (int x = 0; x < pb->cfg[v].n; x++)
            pb->cfg[v].cost[x] = W->orig[v][x] + lam * W->res[v][x];
    sb_result r;
    int rc = sb_search_lc(pb, W->so, &W->lc, &r, W->err);
    for (int v = 0; v < n; v++)
        memcpy(pb->cfg[v].cost, W->orig[v], (size_t)pb->cfg[v].n * sizeof **W->orig);
    if (rc)
        return -1;
    memcpy(p->x, r.choice, (size_t)n * sizeof *p->x);
    walk_price(W, p);
    *f = r.total_cost;
    sb_result_free(&r);
    return 0;
}

static void point_copy(point *d, const point *s, int n)
{
    d->c = s->c, d->r = s->r, d->m = s->m;
    memcpy(d->x, s->x, (size_t)n * sizeof *d->x);
}

int sb_lagrange_search(sb_problem *pb, const sb_search_opts *so, double limit, sb_optimizer opt,
                       int *choice, sb_lagrange_result *out, sb_error *err)
{
    return sb_lagrange_search_seeded(pb, so, limit, opt, NULL, 0, choice, NULL, out, err);
}

int sb_lagrange_search_seeded(sb_problem *pb, const sb_search_opts *so, double limit,
                              sb_optimizer opt, const int *const *seeds, int nseeds, int *choice,
                              int *b_choice, sb_lagrange_result *out, sb_error *err)
{
    int n = pb->m->nops, rc = -1;
    *out = (sb_lagrange_result){.t = INFINITY, .least = INFINITY, .gap = INFINITY,
                                .lb = -INFINITY, .lam = -1.0, .lam_edge = -1.0};
    walk W = {pb, so, NULL, NULL, NULL, n, err, {.pb = pb}};
    point A = {0}, B = {0}, X = {0}, U = {0}; /* U: the unconstrained optimum */
    W.orig = sb_calloc((size_t)n, sizeof *W.orig, err);
    W.res = sb_calloc((size_t)n, sizeof *W.res, err);
    W.scr = sb_calloc((size_t)n, sizeof *W.scr, err);
    A.x = sb_calloc((size_t)n + 1, sizeof *A.x, err);
    B.x = sb_calloc((size_t)n + 1, sizeof *B.x, err);
    X.x = sb_calloc((size_t)n + 1, sizeof *X.x, err);
    U.x = sb_calloc((size_t)n + 1, sizeof *U.x, err);
    if (!W.orig || !W.res || !W.scr || !A.x || !B.x || !X.x || !U.x)
        goto out;
    double s_lb = 0.0;
    for (int v = 0; v < n; v++) {
        int nc = pb->cfg[v].n;
        W.orig[v] = sb_malloc((size_t)nc * sizeof **W.orig, err);
        W.res[v] = sb_malloc((size_t)nc * sizeof **W.res, err);
        W.scr[v] = sb_malloc((size_t)nc * sizeof **W.scr, err);
        if (!W.orig[v] || !W.res[v] || !W.scr[v])
            goto out;
        memcpy(W.orig[v], pb->cfg[v].cost, (size_t)nc * sizeof **W.orig);
        double smin = INFINITY;
        for (int x = 0; x < nc; x++) {
            sb_mem mm;
            sb_problem_op_memory(pb, v, x, opt, &mm);
            W.res[v][x] = sb_mem_resident(&mm);
            W.scr[v][x] = mm.scratch;
            smin = fmin(smin, mm.scratch);
        }
        s_lb = fmax(s_lb, smin);
    }
    int trace = getenv("SB_PIPE_TRACE") != NULL;
    double tl = sb_now(), f;
    /* one strategy met at lambda: the bound, the least memory, the best fit */
#define MET(P, LAM)                                                                              \
    do {                                                                                         \
        out->dps++;                                                                              \
        if ((LAM) >= 0 && f - (LAM) * (limit - s_lb) > out->lb) {                                \
            out->lb = f - (LAM) * (limit - s_lb);                                                \
            out->lam = (LAM);                                                                    \
        }                                                                                        \
        out->least = fmin(out->least, (P).m);                                                    \
        if ((P).m <= limit && (P).c < out->t) {                                                  \
            out->t = (P).c;                                                                      \
            memcpy(choice, (P).x, (size_t)n * sizeof *choice);                                   \
        }                                                                                        \
        if (trace)                                                                               \
            fprintf(stderr, "  lagrange it %d lambda %.4g: cost %.6e mem %.4g GiB%s, %.3f s\n", \
                    out->dps - 1, (double)(LAM), (P).c, (P).m / 1073741824.0,                    \
                    (P).m <= limit ? " fits" : "", sb_now() - tl);                               \
        tl = sb_now();                                                                           \
    } while (0)

    /* 0. the least memory strategy A of step 2 (no DP): when it does not
     * fit nothing does, and no DP is run (the optimum needs no less) */
    if (walk_least_mem(&W, &A))
        goto out;
    out->least = A.m;
    if (A.m > limit)
        goto done;
    /* 1. the unconstrained optimum */
    if (walk_dp(&W, 0.0, &U, &f))
        goto out;
    MET(U, 0.0);
    if (U.m <= limit)
        goto done;
    point_copy(&B, &U, n);
    /* 2. A (step 0's, which fits): the cheapest that fits with fewer
     * resident bytes than the unconstrained optimum (else the cheapest that
     * fits) of it, the least resident strategy and the seeds; B: the seed
     * that does not fit with the least resident bytes between A and the
     * unconstrained optimum */
    out->t = A.c; /* the first strategy met that fits (U does not) */
    memcpy(choice, A.x, (size_t)n * sizeof *choice);
    for (int q = -1; q < nseeds; q++) {
        if (q < 0) {
            for (int v = 0; v < n; v++) { /* the least resident, the cheapest among equals */
                int bx = 0;
                for (int x = 1; x < pb->cfg[v].n; x++)
                    if (W.res[v][x] < W.res[v][bx]
                        || (W.res[v][x] == W.res[v][bx] && W.orig[v][x] < W.orig[v][bx]))
                        bx = x;
                X.x[v] = bx;
            }
        } else {
            memcpy(X.x, seeds[q], (size_t)n * sizeof *X.x);
        }
        walk_price(&W, &X);
        out->least = fmin(out->least, X.m);
        if (X.m > limit)
            continue;
        if (X.c < out->t) {
            out->t = X.c;
            memcpy(choice, X.x, (size_t)n * sizeof *choice);
        }
        int xl = X.r < U.r, al = A.r < U.r;
        if (xl > al || (xl == al && X.c < A.c))
            point_copy(&A, &X, n);
    }
    for (int q = 0; q < nseeds; q++) {
        memcpy(X.x, seeds[q], (size_t)n * sizeof *X.x);
        walk_price(&W, &X);
        if (X.m > limit && X.c < A.c && X.r > A.r && X.r < B.r)
            point_copy(&B, &X, n);
    }
    /* 3. the walk along the hull between A (fits) and B (does not) */
    while (out->dps < MAX_DPS) {
        if (!(A.c > B.c) && B.c > U.c)
            point_copy(&B, &U, n); /* a seed B no cheaper than A: the optimum instead */
        if (!(A.c > B.c) || !(B.r > A.r))
            break; /* A is no dearer than the unconstrained optimum, or degenerate */
        double lam = (A.c - B.c) / (B.r - A.r);
        double line = fmin(A.c + lam * A.r, B.c + lam * B.r);
        if (walk_dp(&W, lam, &X, &f))
            goto out;
        MET(X, lam);
        int same = !memcmp(X.x, A.x, (size_t)n * sizeof *X.x)
                   || !memcmp(X.x, B.x, (size_t)n * sizeof *X.x);
        if (same || f >= line - EDGE_TOL * fabs(line)) {
            out->lam_edge = lam;
            out->a_cost = A.c, out->a_res = A.r, out->b_cost = B.c, out->b_res = B.r;
            if (b_choice)
                memcpy(b_choice, B.x, (size_t)n * sizeof *b_choice);
            break; /* no strategy under the line: A, B adjacent */
        }
        point_copy(X.m <= limit ? &A : &B, &X, n);
    }
#undef MET
done:
    out->gap = isfinite(out->t) ? fmax(0.0, out->t - out->lb) / fmax(out->t, 1e-300) : INFINITY;
    rc = 0;
out:
    for (int v = 0; v < n; v++) {
        if (W.orig && W.orig[v])
            memcpy(pb->cfg[v].cost, W.orig[v], (size_t)pb->cfg[v].n * sizeof **W.orig);
        if (W.orig)
            free(W.orig[v]);
        if (W.res)
            free(W.res[v]);
        if (W.scr)
            free(W.scr[v]);
    }
    free(W.orig), free(W.res), free(W.scr);
    free(A.x), free(B.x), free(X.x), free(U.x);
    dp_layout_cache_free(&W.lc);
    return rc;
}
