/* pipe_combo.c: one (S, M, schedule) of the pipeline search (pipe_int.h):
 * stage ranges bounded, the best partition into S stages, the incumbent
 * kept, the result filled. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lagrange.h"
#include "msort.h"
#include "pipe_int.h"

/* ---- one (S, M, schedule) ------------------------------------------------------- */

typedef struct {
    int a, b;     /* segments [a, b) */
    int unc;      /* t is the unconstrained optimum + p2p (1), then the dual bound (2) */
    double t;     /* t_s: intra-op optimum + p2p */
    stage_entry *e;
} srange;

static int inflight(const sb_pipe_opts *o, int S, int M, int sched, int s)
{
    (void)o;
    if (sched == SB_SCHEDULE_GPIPE)
        return M;
    return M < S - s ? M : S - s;
}

/* The least sum over partitions into S stages using, for stage s, the
 * ranges in R[s] with t <= cap; parent (if not NULL) gets the argmins. */
static double min_sum(const pctx *X, int S, srange *const *R, const int *nR, double cap,
                      double *f, double *g, int *parent)
{
    int n = X->nseg;
    for (int a = 0; a <= n; a++)
        f[a] = a ? INFINITY : 0.0;
    for (int s = 0; s < S; s++) {
        for (int b = 0; b <= n; b++)
            g[b] = INFINITY;
        for (int q = 0; q < nR[s]; q++) {
            const srange *x = &R[s][q];
            if (x->t > cap || !isfinite(f[x->a]))
                continue;
            double v = f[x->a] + x->t;
            if (v < g[x->b]) {
                g[x->b] = v;
                if (parent)
                    parent[s * (n + 1) + x->b] = q;
            }
        }
        memcpy(f, g, (size_t)(n + 1) * sizeof *f);
    }
    return f[n];
}

/* The least max_s t_s over partitions into S stages (INFINITY: none). */
static double min_max(const pctx *X, int S, srange *const *R, const int *nR, double *f, double *g)
{
    int n = X->nseg;
    for (int a = 0; a <= n; a++)
        f[a] = a ? INFINITY : 0.0;
    for (int s = 0; s < S; s++) {
        for (int b = 0; b <= n; b++)
            g[b] = INFINITY;
        for (int q = 0; q < nR[s]; q++) {
            const srange *x = &R[s][q];
            double v = fmax(f[x->a], x->t);
            if (v < g[x->b])
                g[x->b] = v;
        }
        memcpy(f, g, (size_t)(n + 1) * sizeof *f);
    }
    return f[n];
}

/* Sorts v[0, n) ascending (no NaN); tmp: n doubles. */
#define DOUBLE_LESS(ctx, x, y) ((x) < (y))
SB_DEFINE_MSORT(msort_doubles, double, DOUBLE_LESS)
static void sort_doubles(double *v, double *tmp, size_t n) { msort_doubles(v, tmp, n, NULL); }

/* A lower bound of the stage of ops [i, j) with k act copies (-1: no
 * limit) as pipe_stage() would find it, from its unconstrained optima only
 * (cheap beside a DP under the limit, and cached): at least the kept one
 * (a limit only raises an optimum, recomputing only adds cost), and the
 * recomputed one when no kept strategy fits (kept_over). INFINITY when
 * the kept unconstrained DP gave up; -1 on error. */
static int stage_lower(pctx *X, int i, int j, int d, int M, int k, double *lb)
{
    stage_entry *u = pipe_stage(X, i, j, d, M, -1);
    if (!u)
        return -1;
    *lb = u->t;
    if (k < 0 || !isfinite(u->t))
        return 0;
    int over = pipe_kept_over(X, i, j, d, M, k);
    if (over < 0)
        return -1;
    if (over) {
        stage_entry *ua = pipe_stage_rc(X, i, j, d, M, -1, 1);
        if (!ua)
            return -1;
        if (isfinite(ua->t))
            *lb = fmax(*lb, ua->t);
    }
    return 0;
}

/* The first partition's cuts: where the bound's prefix sums pass s / S of
 * the total (each stage at least one segment); cut[s] is the segment stage
 * s starts at, cut[S] = nseg. */
static void incumbent_cuts(const pctx *X, int S, const double *pc, int *cut)
{
    int n = X->nseg, a = 0;
    cut[0] = 0;
    for (int s = 0; s < S; s++) {
        int b = s == S - 1 ? n : a + 1;
        while (s < S - 1 && b < n - (S - 1 - s) && pc[b] < pc[n] * (s + 1) / S)
            b++;
        cut[s + 1] = b;
        a = b;
    }
}

/* Whether the first partition cannot beat *best (exact): its step over
 * lower bounds of its stages (the segment bounds, then stage_lower, in
 * turn until one proves it) is already over *best, so solving its stages
 * under the limit could not lower *best. 1 yes, 0 no, -1 error. Off with
 * o->no_incumbent_bound, brute force or no best yet. */
static int incumbent_beaten(pctx *X, int S, int M, int sched, int d, const double *pc,
                            const double *p2p, const int *cut, double best)
{
    if (X->o->no_incumbent_bound || X->o->no_shortcuts || X->brute || !isfinite(best))
        return 0;
    double lb[SB_MAX_STAGES];
    for (int s = 0; s < S; s++)
        lb[s] = (pc[cut[s + 1]] - pc[cut[s]]) * BOUND_SLACK + p2p[cut[s + 1]];
    for (int s = -1; s < S; s++) {
        if (s >= 0) {
            int k = X->o->mem_limit > 0 ? inflight(X->o, S, M, sched, s) : -1;
            double t = 0.0;
            if (stage_lower(X, X->seg[cut[s]], X->seg[cut[s + 1]], d, M, k, &t))
                return -1;
            if (!isfinite(t))
                return 0; /* a DP given up: no bound, the partition solved as before */
            lb[s] = fmax(lb[s], t * BOUND_SLACK + p2p[cut[s + 1]]);
        }
        double sum = 0.0, mx = 0.0;
        for (int q = 0; q < S; q++)
            sum += lb[q], mx = fmax(mx, lb[q]);
        if ((sum + (double)(M - 1) * mx) * BOUND_SLACK > best)
            return 1;
    }
    return 0;
}

/* A first partition, so that the bounds have a step to beat (cuts by
 * incumbent_cuts). Lowers *best to its step when it fits; not solved when
 * its bound shows it cannot (incumbent_beaten). */
static int incumbent(pctx *X, int S, int M, int sched, int d, const double *pc,
                     const double *p2p, double *best)
{
    int cut[SB_MAX_STAGES + 1];
    incumbent_cuts(X, S, pc, cut);
    int beaten = incumbent_beaten(X, S, M, sched, d, pc, p2p, cut, *best);
    if (beaten < 0)
        return -1;
    if (beaten) {
        X->r->incumbents_skipped++;
        return 0;
    }
    /* a stage whose least memory (pipe_least_mem, a lower bound) is over
     * the limit: the partition fits nothing and its stages' DPs (minutes
     * on DeepSeek-V3's attention) would only find that */
    for (int s = 0; X->o->mem_limit > 0 && !X->brute && !X->o->no_shortcuts && s < S; s++) {
        double lm = 0.0;
        if (pipe_least_mem(X, X->seg[cut[s]], X->seg[cut[s + 1]], d, M,
                           inflight(X->o, S, M, sched, s), &lm))
            return -1;
        if (lm * BOUND_SLACK > X->o->mem_limit)
            return 0;
    }
    double sum = 0.0, mx = 0.0;
    for (int s = 0; s < S; s++) {
        int a = cut[s], b = cut[s + 1];
        int k = X->o->mem_limit > 0 ? inflight(X->o, S, M, sched, s) : -1;
        stage_entry *e = pipe_stage(X, X->seg[a], X->seg[b], d, M, k);
        if (!e)
            return -1;
        if (!isfinite(e->t))
            return 0;
        sum += e->t + p2p[b];
        mx = fmax(mx, e->t + p2p[b]);
    }
    double T = sum + (double)(M - 1) * mx;
    if (T < *best)
        *best = T * (1.0 + 1e-12); /* the search itself finds and reports it (ties kept) */
    return 0;
}

/* sb_pipe_brute: every partition into S stages, one range per stage from
 * R[s] starting where the last ended; the first least T wins. */
static void enumerate(int S, int M, srange *const *R, const int *nR, int s, int a, double sum,
                      double mx, int *cur, int *pick, double *best, int n)
{
    if (s == S) {
        double T = sum + (double)(M - 1) * mx;
        if (a == n && T < *best) {
            *best = T;
            memcpy(pick, cur, (size_t)S * sizeof *pick);
        }
        return;
    }
    for (int q = 0; q < nR[s]; q++)
        if (R[s][q].a == a) {
            cur[s] = q;
            enumerate(S, M, R, nR, s + 1, R[s][q].b, sum + R[s][q].t, fmax(mx, R[s][q].t), cur,
                      pick, best, n);
        }
}

/* The least T over partitions into S stages, one range per stage from
 * R[s] (t INFINITY: left out), by the cap DP: for each cap tau (the values
 * ascending) the least sum with every t_s <= tau. *T_out INFINITY when
 * no partition; else pick[s] the range of stage s. */
static int best_partition(pctx *X, int S, int M, srange *const *R, const int *nR, double *f,
                          double *g, double *T_out, int *pick)
{
    int n = X->nseg;
    *T_out = INFINITY;
    double free_sum = min_sum(X, S, R, nR, INFINITY, f, g, NULL);
    if (!isfinite(free_sum))
        return 0;
    size_t nvals = 0;
    for (int s = 0; s < S; s++)
        nvals += (size_t)nR[s];
    double *vals = malloc((nvals ? 2 * nvals : 1) * sizeof *vals); /* and sort's scratch */
    int *parent = malloc((size_t)S * (size_t)(n + 1) * sizeof *parent);
    if (!vals || !parent) {
        free(vals), free(parent);
        return sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
    }
    nvals = 0;
    for (int s = 0; s < S; s++)
        for (int q = 0; q < nR[s]; q++)
            if (isfinite(R[s][q].t))
                vals[nvals++] = R[s][q].t;
    sort_doubles(vals, vals + nvals, nvals);
    /* no cap under the least max of any partition gives one */
    double tmin = min_max(X, S, R, nR, f, g), best_here = INFINITY, best_cap = 0.0;
    size_t q0 = 0;
    while (q0 < nvals && vals[q0] < tmin)
        q0++;
    for (size_t q = q0; q < nvals; q++) {
        if (q && vals[q] == vals[q - 1])
            continue;
        if ((double)(M - 1) * vals[q] + free_sum >= best_here)
            break;
        double sum = min_sum(X, S, R, nR, vals[q], f, g, NULL);
        if (isfinite(sum) && sum + (double)(M - 1) * vals[q] < best_here) {
            best_here = sum + (double)(M - 1) * vals[q];
            best_cap = vals[q];
        }
    }
    if (isfinite(best_here)) {
        min_sum(X, S, R, nR, best_cap, f, g, parent);
        for (int s = S - 1, b = n; s >= 0; s--) {
            pick[s] = parent[s * (n + 1) + b];
            b = R[s][pick[s]].a;
        }
    }
    *T_out = best_here;
    free(vals), free(parent);
    return 0;
}


/* Whether a step T of the (S, M, schedule) being searched replaces the
 * best one: lower, or equal and earlier in the canonical order (ZeRO
 * stages as given, S descending, M descending, 1F1B before GPipe), so that
 * the answer is the one a search in that order gives (the first least T),
 * whatever order the combinations are searched in (s_order). */
static int combo_wins(const pctx *X, double T, double best)
{
    return T < best || (T == best && isfinite(T) && X->canon < X->best_canon);
}

/* One (S, M, schedule)'s working state, shared by the steps of
 * pipe_try_combo below (each its own function: the bounds over segments,
 * the ranges that survive them, the lazy refinement of the best partition,
 * the result). */
typedef struct {
    int S, M, sched;
    int d, n;             /* devices per stage; segments */
    int limited, lazy;    /* under a memory limit; stages solved lazily */
    double lbsum;         /* a lower bound of the combination's sum of stages */
    /* prefix sums over segments of the ops' bounds: cost, weights,
     * activations; ps[a] segment a's largest scratch */
    double *pc, *pw, *pa, *ps;
    double *p2p;          /* [b]: the p2p of a cut before segment b, both ways */
    srange **R;           /* R[s]: stage s's ranges, nR[s] of them */
    int *nR, *capR;
    double *f, *g;        /* the partition DPs' rows */
} combo;

static int combo_alloc(combo *c)
{
    size_t n = (size_t)c->n, S = (size_t)c->S;
    c->pc = calloc(n + 1, sizeof *c->pc), c->pw = calloc(n + 1, sizeof *c->pw);
    c->pa = calloc(n + 1, sizeof *c->pa), c->ps = calloc(n, sizeof *c->ps);
    c->p2p = calloc(n + 1, sizeof *c->p2p);
    c->R = calloc(S, sizeof *c->R);
    c->nR = calloc(S, sizeof *c->nR), c->capR = calloc(S, sizeof *c->capR);
    c->f = calloc(n + 1, sizeof *c->f), c->g = calloc(n + 1, sizeof *c->g);
    return c->pc && c->pw && c->pa && c->ps && c->p2p && c->R && c->nR && c->capR && c->f && c->g
               ? 0
               : -1;
}

static void combo_free(combo *c)
{
    for (int s = 0; c->R && s < c->S; s++)
        free(c->R[s]);
    free(c->pc), free(c->pw), free(c->pa), free(c->ps), free(c->p2p);
    free(c->R), free(c->nR), free(c->capR), free(c->f), free(c->g);
}

/* The prefix sums of the ops' bounds over segments (lazily, each
 * segment's cost bound raised to its own unconstrained optimum). Apart
 * from the ranges: every range's bounds are differences of these. With
 * zero >= 0 (zero_bounded) each segment's optimum at that ZeRO stage
 * from the cache instead, none solved: 1 when one is not there. */
static int segment_bounds(pctx *X, combo *c, const op_bound *ob, int zero)
{
    int n = c->n, d = c->d;
    for (int a = 0; a < n; a++) {
        double cc = 0, w = 0, ac = 0, sc = 0;
        for (int v = X->seg[a]; v < X->seg[a + 1]; v++)
            cc += ob[v].c, w += ob[v].wg, ac += ob[v].a, sc = fmax(sc, ob[v].s);
        /* a segment whose ends divide an fp8 module costs more alone than
           inside a stage that holds the module whole: its ops' bounds only */
        int whole = !pipe_cut_divides(X->m, X->seg[a], X->seg[a + 1]);
        if (c->lazy && zero >= 0 && whole) {
            stage_entry *e = pipe_stage_cached(X, X->seg[a], X->seg[a + 1], d, c->M, zero);
            if (!e || !isfinite(e->t))
                return 1;
            cc = fmax(cc, e->t * BOUND_SLACK);
        } else if (c->lazy && whole) { /* the segment's own optimum bounds it better */
            stage_entry *e = pipe_stage(X, X->seg[a], X->seg[a + 1], d, c->M, -1);
            if (!e)
                return -1;
            if (isfinite(e->t))
                cc = fmax(cc, e->t * BOUND_SLACK);
        }
        c->pc[a + 1] = c->pc[a] + cc, c->pw[a + 1] = c->pw[a] + w;
        c->pa[a + 1] = c->pa[a] + ac, c->ps[a] = sc;
    }
    return 0;
}

/* The p2p of each cut between segments, both ways (once the combination
 * is not skipped by its bounds). */
static void cut_p2p(const pctx *X, combo *c, const sb_model *mb)
{
    for (int b = 1; b < c->n; b++) {
        /* the stage before the cut sends on its own node or across nodes */
        int inter = X->cp.node_devices > 0 && c->d >= X->cp.node_devices;
        c->p2p[b] = 2.0 * sb_pipe_p2p_cost(&X->cp, pipe_crossing_words(mb, X->last, X->seg[b], c->d),
                                           inter);
    }
}

static int add_range(pctx *X, combo *c, int s, srange x)
{
    if (c->nR[s] == c->capR[s]) {
        srange *nr = realloc(c->R[s], (size_t)(c->capR[s] = c->capR[s] * 2 + 16) * sizeof *nr);
        if (!nr)
            return sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
        c->R[s] = nr;
    }
    c->R[s][c->nR[s]++] = x;
    return 0;
}

/* Stage s's ranges [a, b) of segments that the bounds allow (their time
 * bound against best, their memory bound and, lazily under a limit, their
 * exact least memory against the limit), each with its value: lazily its
 * cost bound, else its stage solved (brute force with the recomputation
 * choice: once per mode). Updates *least and X->least_lb with the memory
 * of what the limit left out. Apart from the partition search: this is
 * where a range is bounded out or kept. */
static int stage_ranges(pctx *X, combo *c, int s, double best, double *least)
{
    int S = c->S, M = c->M, n = c->n, d = c->d, limited = c->limited, lazy = c->lazy;
    int k = limited ? inflight(X->o, S, M, c->sched, s) : -1;
    for (int a = s; a <= n - (S - s); a++) {
        double smax = 0.0;
        for (int b = a + 1; b <= n - (S - 1 - s); b++) {
            if (s == 0 && a > 0)
                break;
            if (s == S - 1 && b < n)
                continue;
            smax = fmax(smax, c->ps[b - 1]);
            double lbt = c->pc[b] - c->pc[a] + c->p2p[b];
            double lbm = c->pw[b] - c->pw[a] + (k > 1 ? k : 1) * (c->pa[b] - c->pa[a]) + smax;
            if (limited && lbm > X->o->mem_limit)
                X->least_lb = fmin(X->least_lb, lbm);
            if (!X->brute && ((limited && lbm > X->o->mem_limit)
                              || ((double)(M - 1) * lbt + c->lbsum) * BOUND_SLACK > best)) {
                X->r->ranges_bounded++;
                continue;
            }
            if (lazy && limited) { /* the exact least memory, non-decreasing in b */
                double lm = 0.0;
                if (pipe_least_mem(X, X->seg[a], X->seg[b], d, M, k, &lm))
                    return -1;
                if (lm * BOUND_SLACK > X->o->mem_limit) {
                    *least = fmin(*least, lm);
                    X->least_lb = fmin(X->least_lb, lm);
                    X->r->ranges_bounded++;
                    break;
                }
            }
            /* brute force with the choice: the range once per mode,
             * partitions then enumerate every stage's choice */
            int nmodes = X->brute && X->rc_choose ? 2 : 1;
            for (int md = 0; md < nmodes; md++) {
                stage_entry *e = NULL;
                double t = lbt * BOUND_SLACK;
                if (!lazy) {
                    e = nmodes == 2 ? pipe_stage_rc(X, X->seg[a], X->seg[b], d, M, k, md)
                                    : pipe_stage(X, X->seg[a], X->seg[b], d, M, k);
                    if (!e)
                        return -1;
                    if (!isfinite(e->t)) {
                        if (e->least < *least)
                            *least = e->least;
                        continue;
                    }
                    t = e->t + c->p2p[b];
                }
                if (add_range(X, c, s, (srange){.a = a, .b = b, .t = t, .e = e}))
                    return -1;
            }
        }
    }
    return 0;
}

/* Raises the value of range x of stage s, not yet solved, one step: first
 * its unconstrained optimum (and the recomputed one when only recomputed
 * strategies fit), then its dual bound, then its stage solved under the
 * limit, each only while the best partition still picks it. Apart from
 * lazy_partition: the order of the bounds, one range at a time. */
static int refine_range(pctx *X, const combo *c, srange *x, int s, double *least)
{
    int M = c->M, d = c->d, i = X->seg[x->a], j = X->seg[x->b];
    int k = c->limited ? inflight(X->o, c->S, M, c->sched, s) : -1;
    double p2p = c->p2p[x->b];
    if (c->limited && !x->unc) {
        /* first the range's unconstrained optimum (a plain DP, cheap beside
         * one under the limit, and kept in the cache): the stage under the
         * limit costs at least that, so it is the range's value until the
         * best partition still picks it */
        x->unc = 1;
        stage_entry *u = pipe_stage(X, i, j, d, M, -1);
        if (!u)
            return -1;
        if (isfinite(u->t)) {
            x->t = fmax(x->t, u->t + p2p);
            /* only recomputed strategies fit: they cost at least the
             * recomputed unconstrained optimum (recomputing adds cost per
             * config), a higher bound */
            int over = pipe_kept_over(X, i, j, d, M, k);
            stage_entry *ua = over > 0 ? pipe_stage_rc(X, i, j, d, M, -1, 1) : u;
            if (over < 0 || !ua)
                return -1;
            if (isfinite(ua->t))
                x->t = fmax(x->t, ua->t + p2p);
            return 0;
        }
    }
    if (c->limited && x->unc == 1 && X->o->dual_bound && !pipe_seeds_near(X, i, j, d, M, k)) {
        /* then its dual bound (one DP): solved only when the best partition
         * still picks it */
        x->unc = 2;
        double lb = -INFINITY;
        if (pipe_stage_dual_lower(X, i, j, d, M, k, &lb))
            return -1;
        if (lb + p2p > x->t) {
            x->t = lb + p2p;
            return 0;
        }
    }
    stage_entry *e = pipe_stage(X, i, j, d, M, k);
    if (!e)
        return -1;
    x->e = e;
    x->t = isfinite(e->t) ? e->t + p2p : INFINITY;
    if (!isfinite(e->t) && e->least < *least)
        *least = e->least;
    return 0;
}

/* The least T of the combination, exact, lazily: the best partition over
 * the ranges' values, its stages not yet solved raised (refine_range,
 * their values only rise), and again, until the best partition has only
 * solved stages or cannot win against best. */
static int lazy_partition(pctx *X, combo *c, double best, double *least, double *best_here,
                          int *pick)
{
    for (;;) {
        int rc = best_partition(X, c->S, c->M, c->R, c->nR, c->f, c->g, best_here, pick);
        if (rc)
            return rc;
        if (!combo_wins(X, *best_here, best))
            return 0; /* the bounds say this combination cannot win */
        int solved = 0;
        for (int s = 0; s < c->S; s++) {
            srange *x = &c->R[s][pick[s]];
            if (x->e)
                continue;
            if (refine_range(X, c, x, s, least))
                return -1;
            solved++;
        }
        if (!solved)
            return 0; /* every stage of the best partition solved: the least T */
        X->r->lazy_rounds++;
    }
}

/* The combination's best partition pick, whose step T beats *best, into
 * X->r (stages, their configs, costs and memory) and *best. */
static int take_result(pctx *X, const combo *c, const sb_model *mb, const int *pick, double T,
                       double *best)
{
    int S = c->S, M = c->M, sched = c->sched;
    sb_pipe_result *r = X->r;
    *best = T;
    X->best_canon = X->canon;
    r->step_cost = T;
    memset(&r->pipe, 0, sizeof r->pipe);
    r->pipe.nstages = S;
    r->pipe.microbatches = M;
    r->pipe.schedule = (sb_schedule)sched;
    r->zero = X->cp.zero;
    r->peak_bytes = 0.0;
    r->lagrange_stage_gap = 0.0;
    for (int s = 0; s < S; s++) {
        const srange *x = &c->R[s][pick[s]];
        if (x->e->lb_taken < x->e->t) /* its stage's optimum, either mode, at least lb_taken */
            r->lagrange_stage_gap = fmax(r->lagrange_stage_gap, 1.0 - x->e->lb_taken / x->e->t);
        int i = X->seg[x->a], j = X->seg[x->b];
        r->pipe.first_op[s] = i;
        r->pipe.first_op[s + 1] = j;
        r->pipe.devices[s] = c->d;
        r->stage_time[s] = x->t;
        r->stage_p2p[s] = c->p2p[x->b];
        r->inflight[s] = inflight(X->o, S, M, sched, s);
        r->stage_recompute[s] = (unsigned char)x->e->rc;
        memcpy(r->cfg + (size_t)i * SB_MAX_DIMS, x->e->cfg, (size_t)(j - i) * SB_MAX_DIMS * sizeof(int));
        memcpy(r->op_cost + i, x->e->cost, (size_t)(j - i) * sizeof(double));
        if (pipe_stage_memory(mb, i, j, x->e->cfg, X->o->opt, X->cp.zero, X->cp.precision,
                              r->inflight[s], x->e->rc, &r->stage_mem[s], X->err))
            return -1;
        r->peak_bytes = fmax(r->peak_bytes, r->stage_mem[s]);
    }
    return 0;
}

/* ZeRO 3 bounded by ZeRO 2 (exact; o->no_zero_bound turns it off). At
 * stage 3 each config of each op costs at least what it costs at 2:
 * sb_zero_cost adds an all-gather >= 0 to the vertex cost (with
 * --dp-overlap, to the reduction of which only the part over the backward
 * is exposed, non-decreasing in it), and no edge reads the stage. So a
 * segment's unconstrained optimum at 2, cached by the ZeRO-2 pass, bounds
 * it at 3 from below. Before the segments of a ZeRO-3 combination are
 * solved (each an intra-op DP over P/S devices: seconds at P = 131072),
 * its bounds are taken over those: the skip by the sum, then the best
 * partition over every allowed range's bound (stage_ranges), each as
 * pipe_try_combo takes them. When that cannot win, no partition can, and
 * no DP is run. 1 skip, 0 go on as before (nothing kept), -1 error. */
static int zero_bounded(pctx *X, combo *c, const op_bound *ob, const sb_model *mb,
                        double lbsum, double best, double *least)
{
    if (X->cp.zero != 3 || !c->lazy || X->o->no_zero_bound || !isfinite(best))
        return 0;
    int miss = segment_bounds(X, c, ob, 2);
    if (miss)
        return miss < 0 ? -1 : 0;
    lbsum = fmax(lbsum, c->pc[c->n] * BOUND_SLACK);
    int skip = lbsum * BOUND_SLACK * (1.0 + (double)(c->M - 1) / c->S) > best;
    long bounded = X->r->ranges_bounded;
    if (!skip) {
        c->lbsum = lbsum;
        cut_p2p(X, c, mb);
        for (int s = 0; s < c->S; s++)
            if (stage_ranges(X, c, s, best, least))
                return -1;
        int pick[SB_MAX_STAGES];
        double T = INFINITY;
        if (best_partition(X, c->S, c->M, c->R, c->nR, c->f, c->g, &T, pick))
            return -1;
        skip = !combo_wins(X, T, best);
        for (int s = 0; s < c->S; s++)
            c->nR[s] = 0;
    }
    if (skip)
        X->r->zero_bounded++;
    else
        X->r->ranges_bounded = bounded; /* counted when pipe_try_combo bounds them */
    return skip;
}

/* The best partition of one (S, M, schedule) into X->r when it beats
 * *best. Brute force: every range's stage solved, every partition. Else
 * lazily, exact: every range that the bounds allow starts with its cost
 * bound (the sum over its segments of their unconstrained optima, each
 * segment solved alone: a stage's optimum restricted to a segment is one of
 * its strategies, edges cost >= 0, and the limit only raises it; a segment
 * that divides an fp8 module, dearer alone, its ops' bounds instead; plus
 * the p2p); the best partition over these values is found, its stages not yet
 * solved are solved (their values only rise), and again, until the best
 * partition has only solved stages: every other partition's T is at least
 * its value over bounds, so it is the least T. */
int pipe_try_combo(pctx *X, int S, int M, int sched, const op_bound *ob, double *best,
                     double *least)
{
    const sb_model *mb = pipe_micro(X, M);
    combo c = {.S = S, .M = M, .sched = sched, .d = X->p / S, .n = X->nseg,
               .limited = X->o->mem_limit > 0, .lazy = !X->brute && !X->o->no_shortcuts};
    double lbsum = 0.0;
    for (int v = 0; v < mb->nops; v++)
        lbsum += ob[v].c;
    /* bounds summed in another order than the step (BOUND_SLACK): a
     * combination whose step ties the best must reach combo_wins */
    if (!X->brute && lbsum * BOUND_SLACK * (1.0 + (double)(M - 1) / S) > *best) {
        X->r->combos_skipped++;
        return 0;
    }
    int rc = -1;
    if (combo_alloc(&c)) {
        sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    int zb = zero_bounded(X, &c, ob, mb, lbsum, *best, least);
    if (zb) {
        X->r->combos_skipped += zb > 0;
        rc = zb > 0 ? 0 : -1;
        goto out;
    }
    if (segment_bounds(X, &c, ob, -1))
        goto out;
    if (c.lazy)
        lbsum = fmax(lbsum, c.pc[c.n] * BOUND_SLACK);
    if (c.lazy && lbsum * BOUND_SLACK * (1.0 + (double)(M - 1) / S) > *best) {
        X->r->combos_skipped++;
        rc = 0;
        goto out;
    }
    c.lbsum = lbsum;
    cut_p2p(X, &c, mb);
    if (!X->brute && incumbent(X, S, M, sched, c.d, c.pc, c.p2p, best))
        goto out;
    for (int s = 0; s < S; s++)
        if (stage_ranges(X, &c, s, *best, least))
            goto out;
    int pick[SB_MAX_STAGES];
    double best_here = INFINITY;
    if (X->brute) {
        int cur[SB_MAX_STAGES];
        enumerate(S, M, c.R, c.nR, 0, 0, 0.0, 0.0, cur, pick, &best_here, c.n);
    } else if (lazy_partition(X, &c, *best, least, &best_here, pick)) {
        goto out;
    }
    rc = combo_wins(X, best_here, *best) ? take_result(X, &c, mb, pick, best_here, best) : 0;
out:
    combo_free(&c);
    return rc;
}
