/* dp_fill.c: the fill of one elimination's table (dp_engine.h): the scan
 * over its entries in prefix order, split into tasks over threads (the
 * CPUs the process may use, sb_search_opts.threads). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dp_engine.h"

/* The next assignment of S less its last var, over the representatives
 * (an odometer, the deepest position fastest): the lowest position that
 * changed, -1 after the last. */
static int next_prefix(elim *el)
{
    int l = el->k - 2;
    while (l >= 0) {
        if (++el->r[l] < el->nrep[l]) {
            el->idx[l] = el->reps[l][el->r[l]];
            break;
        }
        el->r[l] = 0;
        el->idx[l] = el->reps[l][0];
        l--;
    }
    return l;
}

/* g and arg at the assignments of representatives whose prefix (S less its
 * last var, numbered in odometer order) is in [plo, phi) and whose last
 * var is the jlo-th to the (jhi - 1)-th representative: for each prefix
 * the sums through level k - 2 (P), then each entry of the last var by the
 * scan that applies. */
static void scan_part(elim *el, int64_t plo, int64_t phi, int jlo, int jhi)
{
    int k = el->k, lvl = 0; /* lvl: recompute P from this level */
    int64_t rest = plo;
    for (int q = k - 2; q >= 0; q--) {
        el->r[q] = (int)(rest % el->nrep[q]);
        rest /= el->nrep[q];
        el->idx[q] = el->reps[q][el->r[q]];
    }
    if (el->vscan) {
        /* VEC_BLOCK prefixes at a time, so that each last-level row is read
         * from memory once per block, not once per prefix */
        int nv = el->nv, ix[VEC_BLOCK][MAX_SCOPE];
        int64_t row[VEC_BLOCK];
        const int *reps = el->reps[k - 1];
        for (int64_t pi = plo; pi < phi;) {
            int nb = 0;
            for (; nb < VEC_BLOCK && pi < phi; nb++, pi++) {
                dp_fill_prefix(el, lvl);
                memcpy(el->Pblk + (size_t)nb * nv, el->P + (size_t)(k - 1) * nv,
                       (size_t)nv * sizeof *el->P);
                memcpy(ix[nb], el->idx, (size_t)k * sizeof *el->idx);
                if (el->cscan)
                    dp_class_stats(el, nb);
                row[nb] = 0;
                for (int q = 0; q < k - 1; q++)
                    row[nb] += el->r[q] * el->gstride[q];
                lvl = next_prefix(el);
            }
            /* entry-wise: a block of ENT_W entries for every prefix of the
             * block in turn, so that its et columns (w x ENT_W) are read
             * from L2 once per prefix block, not each prefix from memory */
            for (int jb = jlo; el->et && jb < jhi; jb += ENT_W)
                for (int b = 0; b < nb; b++)
                    dp_min_entwise(el, b, row[b], jb, jb + ENT_W < jhi ? jb + ENT_W : jhi);
            for (int jr = jlo; !el->et && jr < jhi; jr++)
                for (int b = 0; b < nb; b++) {
                    ix[b][k - 1] = reps[jr];
                    if (el->cscan)
                        dp_min_class(el, b, ix[b], row[b] + jr);
                    else
                        dp_min_vec(el, el->Pblk + (size_t)b * nv, ix[b], row[b] + jr);
                }
        }
        return;
    }
    for (int64_t pi = plo; pi < phi; pi++) {
        dp_fill_prefix(el, lvl);
        const double *prev = el->P + (size_t)(k - 1) * el->nv;
        int64_t row = 0;
        for (int q = 0; q < k - 1; q++)
            row += el->r[q] * el->gstride[q];
        dp_order_by_prev(el, prev);
        const int *reps = el->reps[k - 1];
        for (int jr = jlo; jr < jhi; jr++) {
            el->idx[k - 1] = reps[jr];
            if (el->threshold)
                dp_min_threshold(el, prev, row + jr);
            else if (el->bounded)
                dp_min_bounded(el, prev, row + jr);
            else if (el->nlast_in == 1)
                dp_min_one_table(el, prev, row + jr);
            else
                dp_min_plain(el, prev, row + jr);
        }
        lvl = next_prefix(el);
    }
}

/* The CPUs this process may run on (its affinity mask): the DP's threads
 * when sb_search_opts.threads is 0. At least 1, at most DP_MAX_THREADS. */
int sb_dp_default_threads(void)
{
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return n < 1 ? 1 : n > DP_MAX_THREADS ? DP_MAX_THREADS : n;
}

/* The number of threads for the scan: 1 when the work is small or the DP
 * is plain, else sb_search_opts.threads (0: sb_dp_default_threads). */
static int scan_threads(const elim *el, int64_t nprefix)
{
    double work = (double)nprefix * el->nrep[el->k - 1] * el->nv;
    if (work < 1e6 || el->E->plain)
        return 1;
    int t = el->E->threads > 0 ? el->E->threads : sb_dp_default_threads();
    return t > DP_MAX_THREADS ? DP_MAX_THREADS : t;
}

/* A thread's copy of el: the same tables, its own scan buffers (P, val,
 * ks, rks, tie); -1 when out of memory. */
static int worker_open(const elim *el, elim *w)
{
    int nv = el->nv;
    *w = *el;
    w->P = malloc((size_t)(el->k + 1) * (size_t)nv * sizeof *w->P);
    w->val = malloc((size_t)nv * sizeof *w->val);
    w->ks = malloc(2 * (size_t)nv * sizeof *w->ks);
    w->rks = malloc(2 * (size_t)nv * sizeof *w->rks);
    w->tie = malloc((size_t)nv * sizeof *w->tie);
    w->Pblk = el->vscan ? malloc((size_t)VEC_BLOCK * (size_t)nv * sizeof *w->Pblk) : NULL;
    w->Cm = w->Ce = NULL;
    w->Ca = NULL;
    if (!w->P || !w->val || !w->ks || !w->rks || !w->tie || (el->vscan && !w->Pblk)
        || (el->cscan && dp_class_buffers(w)))
        return -1;
    memcpy(w->P, el->P, (size_t)nv * sizeof *w->P); /* base */
    return 0;
}

static void worker_close(elim *w)
{
    free(w->Cm);
    free(w->Ce);
    free(w->Ca);
    free(w->Pblk);
    free(w->P);
    free(w->val);
    free(w->ks);
    free(w->rks);
    free(w->tie);
}

/* ---- the fill's threads -----------------------------------------------------
 *
 * A parallel part of an elimination runs on nt threads: the caller and
 * nt - 1 started for it (pthreads), each taking the next task from one
 * atomic counter until none is left, then joined. No thread outlives the
 * part, so none spins between parts (OpenMP's idle workers did: a sixth of
 * the CPU time at p = 256, and more wall time than they saved on a loaded
 * machine). */

typedef struct par_job par_job;
struct par_job {
    void (*run)(par_job *j, void *ctx); /* one thread's share: takes tasks until none left */
    void *(*open)(par_job *j);          /* a thread's context (NULL: out of memory) */
    void (*close)(void *ctx);
    elim *el;
    int64_t ntask;
    atomic_llong next;
    atomic_int failed;
    int64_t nchunk, per; /* dp_scan_rows: chunks per prefix or in all, prefixes or entries */
    int by_prefix, nlast;
};

/* The next task of j, -1 after the last. */
static int64_t par_next(par_job *j)
{
    int64_t t = atomic_fetch_add(&j->next, 1);
    return t < j->ntask ? t : -1;
}

static void *par_thread(void *arg)
{
    par_job *j = arg;
    void *ctx = j->open(j);
    if (!ctx)
        atomic_store(&j->failed, 1);
    else
        j->run(j, ctx);
    j->close(ctx);
    return NULL;
}

/* Runs j on nt threads (fewer when a thread cannot be started: the others
 * take its tasks); -1 when a thread ran out of memory. */
static int par_run(par_job *j, int nt)
{
    pthread_t th[DP_MAX_THREADS];
    int started = 0;
    for (int i = 1; i < nt && i < DP_MAX_THREADS; i++)
        if (!pthread_create(&th[started], NULL, par_thread, j))
            started++;
    par_thread(j);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return atomic_load(&j->failed) ? -1 : 0;
}

/* presort_rows' thread context: a row being sorted. */
static void *presort_open(par_job *j)
{
    return malloc(2 * (size_t)j->el->nv * sizeof(keyed));
}

static void presort_close(void *ctx) { free(ctx); }

/* Sorts the threshold scan's rows r0 (tasks) at representative
 * assignments. */
static void presort_run(par_job *j, void *ctx)
{
    elim *el = j->el;
    const inflow *fl = &el->in[el->last_in];
    int nv = el->nv;
    keyed *rks = ctx;
    for (int64_t r0; (r0 = par_next(j)) >= 0;) {
        int ok = 1;
        for (int jj = 0; jj < fl->nv && ok; jj++) {
            int i = (int)(r0 * nv / fl->stride[jj] % fl->dim[jj]);
            ok = fl->cm[jj] || el->rep[fl->pos[jj]][i] == i; /* classes: every row */
        }
        if (!ok)
            continue;
        const double *ft = fl->t + r0 * nv;
        for (int x = 0; x < nv; x++)
            rks[x] = (keyed){.k = ft[x], .x = x};
        dp_sort_keyed(rks, rks + nv, nv);
        for (int x = 0; x < nv; x++)
            el->rowsort[r0 * nv + x] = rks[x].x;
        el->rowdone[r0] = 1;
    }
}

/* The threshold scan's rows at representative assignments, sorted before
 * the threads start (they then only read rowsort); -1 when out of memory. */
static int presort_rows(elim *el, int nt)
{
    par_job j = {.run = presort_run, .open = presort_open, .close = presort_close, .el = el,
                 .ntask = el->in[el->last_in].rows};
    return par_run(&j, nt);
}

/* dp_scan_rows' thread context: a copy of el with its own scan buffers. */
static void *fill_open(par_job *j)
{
    elim *w = malloc(sizeof *w);
    if (w && worker_open(j->el, w)) {
        worker_close(w);
        free(w);
        return NULL;
    }
    return w;
}

static void fill_close(void *ctx)
{
    if (ctx)
        worker_close(ctx);
    free(ctx);
}

/* dp_scan_rows' tasks: chunk c of the prefixes (by_prefix), or of one
 * prefix's last-var entries. */
static void fill_run(par_job *j, void *ctx)
{
    elim *w = ctx;
    int64_t per = j->per, nchunk = j->nchunk;
    for (int64_t t; (t = par_next(j)) >= 0;) {
        int64_t c = t % nchunk, pi = t / nchunk;
        if (j->by_prefix)
            scan_part(w, per * c / nchunk, per * (c + 1) / nchunk, 0, j->nlast);
        else
            scan_part(w, pi, pi + 1, (int)(per * c / nchunk), (int)(per * (c + 1) / nchunk));
    }
}

/* g and arg at every assignment of representatives (scan_part), split
 * over threads in chunks handed out as the threads free up (the scans'
 * lengths differ from row to row, so equal halves left one thread idle
 * for much of an elimination): chunks of prefixes, or when there are few
 * prefixes, chunks of the last var's entries of each prefix. Each entry
 * is computed by one thread exactly as with one. */
int dp_scan_rows(elim *el)
{
    int k = el->k;
    int64_t nprefix = 1;
    for (int q = 0; q < k - 1; q++)
        nprefix *= el->nrep[q];
    int nt = scan_threads(el, nprefix), nlast = el->nrep[k - 1];
    if (el->vlater) {
        /* a sample of the bounded or threshold scan: when the configs (or
         * classes) it meets per entry cost more than reading all of them
         * four at a time, the vector scan does the whole table (the sampled
         * entries again: the same values) */
        int ns = nlast < VEC_SAMPLE ? nlast : VEC_SAMPLE;
        el->steps = 0;
        scan_part(el, 0, 1, 0, ns);
        if ((double)el->steps * VEC_STEP_COST > (double)ns * el->nv) {
            el->vscan = el->vlater;
            el->E->rows_vector += nlast;
        }
    }
    if (el->vscan && !el->Pblk) {
        el->Pblk = malloc((size_t)VEC_BLOCK * (size_t)el->nv * sizeof *el->Pblk);
        if (!el->Pblk)
            return elim_oom(el);
    }
    if (dp_class_scan_setup(el, nprefix) || dp_entwise_setup(el, nprefix))
        return -1;
    if (nt <= 1) {
        scan_part(el, 0, nprefix, 0, nlast);
        return 0;
    }
    if (nt > el->E->threads_used)
        el->E->threads_used = nt;
    if (el->threshold && !el->vscan && presort_rows(el, nt))
        return elim_oom(el);
    int by_prefix = nprefix >= 4 * nt;
    /* chunks: of prefixes (by_prefix), else of each prefix's last entries */
    int64_t per = by_prefix ? nprefix : nlast, nchunk = per < 16 * nt ? per : 16 * nt;
    par_job j = {.run = fill_run, .open = fill_open, .close = fill_close, .el = el,
                 .ntask = by_prefix ? nchunk : nprefix * nchunk, .nchunk = nchunk,
                 .per = per, .by_prefix = by_prefix, .nlast = nlast};
    return par_run(&j, nt) ? elim_oom(el) : 0;
}

