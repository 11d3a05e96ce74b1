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

/* The best partition of one (S, M, schedule) into X->r when it beats
 * *best. Brute force: every range's stage solved, every partition. Else
 * lazily, exact: every range that the bounds allow starts with its cost
 * bound (the sum over its segments of their unconstrained optima, each
 * segment solved alone: a stage's optimum restricted to a segment is one of
 * its strategies, edges cost >= 0, and the limit only raises it; plus the
 * p2p); the best partition over these values is found, its stages not yet
 * solved are solved (their values only rise), and again, until the best
 * partition has only solved stages: every other partition's T is at least
 * its value over bounds, so it is the least T. */
int pipe_try_combo(pctx *X, int S, int M, int sched, const op_bound *ob, double *best,
                     double *least)
{
    const sb_model *mb = pipe_micro(X, M);
    int d = X->p / S, n = X->nseg, limited = X->o->mem_limit > 0;
    int lazy = !X->brute && !X->o->no_shortcuts;
    double lbsum = 0.0;
    for (int v = 0; v < mb->nops; v++)
        lbsum += ob[v].c;
    /* bounds summed in another order than the step (BOUND_SLACK): a
     * combination whose step ties the best must reach combo_wins */
    if (!X->brute && lbsum * BOUND_SLACK * (1.0 + (double)(M - 1) / S) > *best) {
        X->r->combos_skipped++;
        return 0;
    }
    /* prefix sums of the bounds over segments */
    double *pc = calloc((size_t)n + 1, sizeof *pc), *pw = calloc((size_t)n + 1, sizeof *pw);
    double *pa = calloc((size_t)n + 1, sizeof *pa), *ps = calloc((size_t)n, sizeof *ps);
    double *p2p = calloc((size_t)n + 1, sizeof *p2p);
    srange **R = calloc((size_t)S, sizeof *R);
    int *nR = calloc((size_t)S, sizeof *nR), *capR = calloc((size_t)S, sizeof *capR);
    double *f = calloc((size_t)n + 1, sizeof *f), *g = calloc((size_t)n + 1, sizeof *g);
    int rc = -1;
    if (!pc || !pw || !pa || !ps || !p2p || !R || !nR || !capR || !f || !g) {
        sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (int a = 0; a < n; a++) {
        double c = 0, w = 0, ac = 0, sc = 0;
        for (int v = X->seg[a]; v < X->seg[a + 1]; v++)
            c += ob[v].c, w += ob[v].wg, ac += ob[v].a, sc = fmax(sc, ob[v].s);
        if (lazy) { /* the segment's own optimum bounds it better */
            stage_entry *e = pipe_stage(X, X->seg[a], X->seg[a + 1], d, M, -1);
            if (!e)
                goto out;
            if (isfinite(e->t))
                c = fmax(c, e->t * BOUND_SLACK);
        }
        pc[a + 1] = pc[a] + c, pw[a + 1] = pw[a] + w, pa[a + 1] = pa[a] + ac, ps[a] = sc;
    }
    if (lazy)
        lbsum = fmax(lbsum, pc[n] * BOUND_SLACK);
    if (lazy && lbsum * BOUND_SLACK * (1.0 + (double)(M - 1) / S) > *best) {
        X->r->combos_skipped++;
        rc = 0;
        goto out;
    }
    for (int b = 1; b < n; b++) {
        /* the stage before the cut sends on its own node or across nodes */
        int inter = X->cp.node_devices > 0 && d >= X->cp.node_devices;
        p2p[b] = 2.0 * sb_pipe_p2p_cost(&X->cp, pipe_crossing_words(mb, X->last, X->seg[b], d), inter);
    }
    if (!X->brute && incumbent(X, S, M, sched, d, pc, p2p, best))
        goto out;
    for (int s = 0; s < S; s++) {
        int k = limited ? inflight(X->o, S, M, sched, s) : -1;
        for (int a = s; a <= n - (S - s); a++) {
            double smax = 0.0;
            for (int b = a + 1; b <= n - (S - 1 - s); b++) {
                if (s == 0 && a > 0)
                    break;
                if (s == S - 1 && b < n)
                    continue;
                smax = fmax(smax, ps[b - 1]);
                double lbt = pc[b] - pc[a] + p2p[b];
                double lbm = pw[b] - pw[a] + (k > 1 ? k : 1) * (pa[b] - pa[a]) + smax;
                if (limited && lbm > X->o->mem_limit)
                    X->least_lb = fmin(X->least_lb, lbm);
                if (!X->brute && ((limited && lbm > X->o->mem_limit)
                                  || ((double)(M - 1) * lbt + lbsum) * BOUND_SLACK > *best)) {
                    X->r->ranges_bounded++;
                    continue;
                }
                if (lazy && limited) { /* the exact least memory, non-decreasing in b */
                    double lm = 0.0;
                    if (pipe_least_mem(X, X->seg[a], X->seg[b], d, M, k, &lm))
                        goto out;
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
                            goto out;
                        if (!isfinite(e->t)) {
                            if (e->least < *least)
                                *least = e->least;
                            continue;
                        }
                        t = e->t + p2p[b];
                    }
                    if (nR[s] == capR[s]) {
                        srange *nr = realloc(R[s], (size_t)(capR[s] = capR[s] * 2 + 16) * sizeof *nr);
                        if (!nr) {
                            sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
                            goto out;
                        }
                        R[s] = nr;
                    }
                    R[s][nR[s]++] = (srange){.a = a, .b = b, .t = t, .e = e};
                }
            }
        }
    }
    rc = 0;
    int pick[SB_MAX_STAGES];
    double best_here = INFINITY;
    if (X->brute) {
        int cur[SB_MAX_STAGES];
        enumerate(S, M, R, nR, 0, 0, 0.0, 0.0, cur, pick, &best_here, n);
    } else {
        for (;;) {
            if ((rc = best_partition(X, S, M, R, nR, f, g, &best_here, pick)))
                goto out;
            if (!combo_wins(X, best_here, *best))
                break; /* the bounds say this combination cannot win */
            int solved = 0;
            for (int s = 0; s < S; s++) {
                srange *x = &R[s][pick[s]];
                if (x->e)
                    continue;
                int k = limited ? inflight(X->o, S, M, sched, s) : -1;
                if (limited && !x->unc) {
                    /* first the range's unconstrained optimum (a plain DP, cheap
                     * beside one under the limit, and kept in the cache): the
                     * stage under the limit costs at least that, so it is the
                     * range's value until the best partition still picks it */
                    x->unc = 1;
                    stage_entry *u = pipe_stage(X, X->seg[x->a], X->seg[x->b], d, M, -1);
                    if (!u) {
                        rc = -1;
                        goto out;
                    }
                    if (isfinite(u->t)) {
                        x->t = fmax(x->t, u->t + p2p[x->b]);
                        /* only recomputed strategies fit: they cost at least the
                         * recomputed unconstrained optimum (recomputing adds cost
                         * per config), a higher bound */
                        int over = pipe_kept_over(X, X->seg[x->a], X->seg[x->b], d, M, k);
                        stage_entry *ua = over > 0 ? pipe_stage_rc(X, X->seg[x->a], X->seg[x->b], d,
                                                              M, -1, 1)
                                                   : u;
                        if (over < 0 || !ua) {
                            rc = -1;
                            goto out;
                        }
                        if (isfinite(ua->t))
                            x->t = fmax(x->t, ua->t + p2p[x->b]);
                        solved++;
                        continue;
                    }
                }
                if (limited && x->unc == 1 && X->o->dual_bound
                    && !pipe_seeds_near(X, X->seg[x->a], X->seg[x->b], d, M, k)) {
                    /* then its dual bound (one DP): solved only when the best
                     * partition still picks it */
                    x->unc = 2;
                    double lb = -INFINITY;
                    if (pipe_stage_dual_lower(X, X->seg[x->a], X->seg[x->b], d, M, k, &lb)) {
                        rc = -1;
                        goto out;
                    }
                    if (lb + p2p[x->b] > x->t) {
                        x->t = lb + p2p[x->b];
                        solved++;
                        continue;
                    }
                }
                stage_entry *e = pipe_stage(X, X->seg[x->a], X->seg[x->b], d, M, k);
                if (!e) {
                    rc = -1;
                    goto out;
                }
                x->e = e;
                x->t = isfinite(e->t) ? e->t + p2p[x->b] : INFINITY;
                if (!isfinite(e->t) && e->least < *least)
                    *least = e->least;
                solved++;
            }
            if (!solved)
                break; /* every stage of the best partition solved: the least T */
            X->r->lazy_rounds++;
        }
    }
    if (!combo_wins(X, best_here, *best))
        goto out;
    sb_pipe_result *r = X->r;
    *best = best_here;
    X->best_canon = X->canon;
    r->step_cost = best_here;
    memset(&r->pipe, 0, sizeof r->pipe);
    r->pipe.nstages = S;
    r->pipe.microbatches = M;
    r->pipe.schedule = (sb_schedule)sched;
    r->zero = X->cp.zero;
    r->peak_bytes = 0.0;
    for (int s = 0; s < S; s++) {
        const srange *x = &R[s][pick[s]];
        int i = X->seg[x->a], j = X->seg[x->b];
        r->pipe.first_op[s] = i;
        r->pipe.first_op[s + 1] = j;
        r->pipe.devices[s] = d;
        r->stage_time[s] = x->t;
        r->stage_p2p[s] = p2p[x->b];
        r->inflight[s] = inflight(X->o, S, M, sched, s);
        r->stage_recompute[s] = (unsigned char)x->e->rc;
        memcpy(r->cfg + (size_t)i * SB_MAX_DIMS, x->e->cfg, (size_t)(j - i) * SB_MAX_DIMS * sizeof(int));
        memcpy(r->op_cost + i, x->e->cost, (size_t)(j - i) * sizeof(double));
        if (pipe_stage_memory(mb, i, j, x->e->cfg, X->o->opt, X->cp.zero, X->cp.precision,
                         r->inflight[s], x->e->rc,
                         &r->stage_mem[s], X->err)) {
            rc = -1;
            goto out;
        }
        r->peak_bytes = fmax(r->peak_bytes, r->stage_mem[s]);
    }
out:
    for (int s = 0; R && s < S; s++)
        free(R[s]);
    free(pc), free(pw), free(pa), free(ps), free(p2p), free(R), free(nR), free(capR), free(f), free(g);
    return rc;
}

