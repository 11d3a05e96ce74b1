/* dp_min.c: the DP's scalar minima of one table entry over the eliminated
 * op's configs (dp_engine.h): the plain sum, the bounded scan over
 * classes and the threshold scan over sorted rows. Below the vector scans
 * (dp_scan.c) and the fill (dp_fill.c), which fall back to them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dp_engine.h"

/* Offset in fl's table of the row (over v) at the current assignment. */
int64_t dp_row_offset(const inflow *fl, const int *idx)
{
    int64_t off = 0;
    for (int j = 0; j < fl->nv; j++) {
        int i = idx[fl->pos[j]];
        off += (fl->cm[j] ? fl->cm[j][i] : i) * fl->stride[j];
    }
    return off;
}

/* P[l + 1] = P[l] + the inflows of level l at the current assignment, for
 * the levels from lvl up to k - 2. */
void dp_fill_prefix(elim *el, int lvl)
{
    int nv = el->nv;
    for (int l = lvl; l < el->k - 1; l++) {
        double *prev = el->P + (size_t)l * nv, *cur = el->P + (size_t)(l + 1) * nv;
        memcpy(cur, prev, (size_t)nv * sizeof *cur);
        for (int q = 0; q < el->nfl; q++) {
            if (el->in[q].level != l)
                continue;
            const double *ft = el->in[q].t + dp_row_offset(&el->in[q], el->idx);
            for (int x = 0; x < nv; x++)
                cur[x] += ft[x];
        }
    }
}

/* ks for the current prefix: v's configs by prev (threshold scan), or the
 * last-level column classes by their least prev (bounded scan). */
void dp_order_by_prev(elim *el, const double *prev)
{
    int nv = el->nv;
    keyed *ks = el->ks;
    if (el->threshold) {
        for (int x = 0; x < nv; x++)
            ks[x] = (keyed){.k = prev[x], .x = x};
        dp_sort_keyed(ks, ks + nv, nv);
    } else if (el->bounded) {
        const int *cmem = el->cbuf, *cstart = el->cbuf + nv;
        for (int c = 0; c < el->ncls; c++) {
            double mn = prev[cmem[cstart[c]]];
            for (int i = cstart[c] + 1; i < cstart[c + 1]; i++)
                mn = prev[cmem[i]] < mn ? prev[cmem[i]] : mn;
            ks[c] = (keyed){.k = mn, .x = c};
        }
        dp_sort_keyed(ks, ks + el->ncls, el->ncls);
    }
}

/* The threshold scan's order of the row at off of the last-level inflow:
 * its configs by value (sorted when first used). */
static const int *sorted_row(elim *el, const double *ft, int64_t off)
{
    int nv = el->nv;
    int *ob = el->rowsort + off;
    if (!el->rowdone[off / nv]) {
        for (int x = 0; x < nv; x++)
            el->rks[x] = (keyed){.k = ft[x], .x = x};
        dp_sort_keyed(el->rks, el->rks + nv, nv);
        for (int x = 0; x < nv; x++)
            ob[x] = el->rks[x].x;
        el->rowdone[off / nv] = 1;
    }
    return ob;
}

/* Fagin's threshold scan over two sorted lists, configs of v by prev (ks)
 * and by the one last-level row's value: take the next of each in turn; a
 * config not yet met in either has a sum of at least the two next values'
 * (rounded sums are monotone), so the scan stops once that exceeds the
 * best sum. Every config reaching the best sum has been met: the lowest of
 * them wins, as in the plain scan. */
void dp_min_threshold(elim *el, const double *prev, int64_t at)
{
    int nv = el->nv;
    const keyed *ks = el->ks;
    int64_t off = dp_row_offset(&el->in[el->last_in], el->idx);
    const double *ft = el->in[el->last_in].t + off;
    const int *ob = sorted_row(el, ft, off);
    int best = nv, i = 0;
    double bv = INFINITY;
    for (; i < nv; i++) {
        int x = ks[i].x;
        double sx = prev[x] + ft[x];
        if (sx < bv || (sx == bv && x < best)) {
            bv = sx;
            best = x;
        }
        x = ob[i];
        sx = prev[x] + ft[x];
        if (sx < bv || (sx == bv && x < best)) {
            bv = sx;
            best = x;
        }
        if (i + 1 < nv && ks[i + 1].k + ft[ob[i + 1]] > bv)
            break;
    }
    el->steps += 2 * (i < nv ? i + 1 : nv);
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[best];
}

/* The lowest config of the tied classes tie[0..ntie) whose sum is bv. */
static int lowest_reaching(const elim *el, const double *prev, const double *const *fts, int nq,
                           const int *tie, int ntie, double bv)
{
    const int *cmem = el->cbuf, *cstart = el->cbuf + el->nv;
    int best = el->nv;
    for (int t = 0; t < ntie; t++)
        for (int i = cstart[tie[t]]; i < cstart[tie[t] + 1] && cmem[i] < best; i++) {
            int x = cmem[i];
            double sx = prev[x];
            for (int q = 0; q < nq; q++)
                sx += fts[q][x];
            if (sx == bv) {
                best = x;
                break;
            }
        }
    return best;
}

/* The bounded scan: classes of v's configs (equal last-level columns) by
 * increasing least prev (ks): that least prev plus the least of each
 * last-level row is a lower bound of every member's sum (a rounded sum is
 * monotone in each term), so the scan stops once it exceeds the best sum;
 * a class's least sum is its least prev's. Then, as in the plain scan, the
 * lowest config whose sum is the least, from the classes that reach it. */
void dp_min_bounded(elim *el, const double *prev, int64_t at)
{
    const int *cmem = el->cbuf, *cstart = el->cbuf + el->nv;
    int *tie = el->tie;
    const double *fts[MAX_SCOPE + 1];
    double mins[MAX_SCOPE + 1];
    int nq = 0;
    for (int q = 0; q < el->nfl; q++) {
        if (el->in[q].level != el->k - 1)
            continue;
        int64_t off = dp_row_offset(&el->in[q], el->idx);
        fts[nq] = el->in[q].t + off;
        mins[nq++] = el->rowmin[q][off / el->nv];
    }
    const keyed *ks = el->ks; /* locals: the stores to tie[] may alias el's fields */
    int ntie = 0, ncls = el->ncls;
    double bv = INFINITY;
    for (int i = 0; i < ncls; i++) {
        double lb = ks[i].k;
        for (int q = 0; q < nq; q++)
            lb += mins[q];
        if (lb > bv)
            break;
        int x0 = cmem[cstart[ks[i].x]];
        double sx = ks[i].k;
        for (int q = 0; q < nq; q++)
            sx += fts[q][x0];
        if (sx < bv) {
            bv = sx;
            ntie = 0;
        }
        if (sx == bv)
            tie[ntie++] = ks[i].x;
        el->steps++;
    }
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[lowest_reaching(el, prev, fts, nq, tie, ntie, bv)];
}

/* One inflow at the last level: add and take the least in one pass (the
 * same sums as dp_min_plain). */
void dp_min_one_table(elim *el, const double *prev, int64_t at)
{
    const inflow *fq = &el->in[el->last_in];
    const double *ft = fq->t + dp_row_offset(fq, el->idx);
    int best = 0;
    double bv = prev[0] + ft[0];
    for (int x = 1; x < el->nv; x++) {
        double sx = prev[x] + ft[x];
        if (sx < bv) {
            bv = sx;
            best = x;
        }
    }
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[best];
}

/* The plain scan: prev plus every last-level row, then the least (lowest
 * config on ties). */
void dp_min_plain(elim *el, const double *prev, int64_t at)
{
    int nv = el->nv;
    double *val = el->val;
    memcpy(val, prev, (size_t)nv * sizeof *val);
    for (int q = 0; q < el->nfl; q++) {
        if (el->in[q].level != el->k - 1)
            continue;
        const double *ft = el->in[q].t + dp_row_offset(&el->in[q], el->idx);
        for (int x = 0; x < nv; x++)
            val[x] += ft[x];
    }
    int best = 0;
    double bv = val[0];
    for (int x = 1; x < nv; x++)
        if (val[x] < bv) {
            bv = val[x];
            best = x;
        }
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[best];
}

