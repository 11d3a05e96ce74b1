/* pipeline.c: the pipeline layer of the search (shardbench/pipesearch.h).
 *
 * A strategy in the full space is S stages of consecutive ops, each on
 * d = p / S devices, M micro-batches and a schedule; each stage's ops take
 * the least-cost intra-op configs of the exact DP run on the stage alone
 * (a sub-model of its ops whose inputs from earlier stages are model
 * inputs) at the micro-batch size, on d devices.
 *
 * Cost of a step (FLOP, as the rest of the model): stage s takes t_s per
 * micro-batch (its intra-op optimum, with each op's weight-gradient
 * all-reduce counted once per step, i.e. 1/M of it per micro-batch, plus
 * the point-to-point send of the activations crossing to stage s + 1 and
 * of their gradients back); the step is
 *     T = sum_s t_s + (M - 1) max_s t_s,
 * the schedule's makespan when every micro-batch takes t_s on stage s
 * (the first micro-batch crosses every stage, the other M - 1 follow at
 * the pace of the slowest): S = 1 gives M t, and S = M = 1 the plain
 * cost exactly. GPipe and 1F1B take the same time in this model; they
 * differ in memory: stage s holds the activations of M micro-batches
 * (GPipe) or of min(M, S - s) (1F1B), and the activation gradients,
 * weights, gradients and optimizer state of its ops once.
 *
 * Search, exact over its space: for each (S, M, schedule) the cut points
 * minimise T. T is non-decreasing in each t_s, so each stage takes its
 * own least t_s (under the memory limit: sb_search_within on the stage);
 * over cut points, for each candidate cap tau on max t_s (the stage costs
 * in increasing order) a DP over cut points gives the least sum with every
 * t_s <= tau, and T = min over tau of sum + (M - 1) tau. Shortcuts, none of
 * which changes the optimum:
 *   - cut points only where fewest tensors cross (a Transformer: between
 *     layers, where only the residual stream crosses);
 *   - stage costs cached by the stage's structure (op kinds, sizes and
 *     wiring relative to the stage), so equal stages of repeated layers
 *     are solved once;
 *   - lower bounds: an op's least cost over its configs, summed, bounds a
 *     stage's cost, and its least memory bounds the stage's; a stage range
 *     whose bound cannot beat the best step found, and an (S, M) whose
 *     bound cannot, are never solved.
 *
 * Recomputation (cp->recompute all): each stage problem is built with it
 * (vertex costs with sb_recompute_cost, memory by sb_op_memory_rc on the
 * stage's sub-model, whose inputs from earlier stages are marked
 * stage_input: the runtime keeps those per micro-batch in flight for the
 * recomputed forward). Chosen (o->choose_recompute, or auto): each stage
 * recomputes all its ops or none, the better (pipe_stage()); the ZeRO stage
 * chosen (o->choose_zero): 2 and 3 searched in turn, 0 and 1 dominated by
 * 2 (run(); search/README.md gives both arguments). */
#define _GNU_SOURCE
#include "shardbench/pipesearch.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/memory.h"
#include "lagrange.h"
#include "msort.h"
#include "pipe_int.h"

void sb_pipe_opts_default(sb_pipe_opts *o)
{
    memset(o, 0, sizeof *o);
    o->schedule = -1;
    o->max_stage_devices = 0;
    o->opt = SB_OPTIM_SGD;
    o->dp = (sb_search_opts){.algo = SB_ALGO_PASE, .max_table_mb = 4096};
}

void sb_pipe_result_free(sb_pipe_result *r)
{
    if (!r)
        return;
    free(r->cfg);
    free(r->op_cost);
    free(r->recompute);
    r->cfg = NULL;
    r->op_cost = NULL;
    r->recompute = NULL;
}

/* ---- the whole search ------------------------------------------------------------ */

/* The order in which the nS searched stage counts (ascending in Ss) are
 * tried: the middle one first, then the larger ones ascending, then the
 * smaller ones descending (no_middle_first: the largest down). With every
 * stage solved exactly any order gives the same answer (every bound that
 * skips work is against a step already found, and ties go to the
 * canonical order, combo_wins); Lagrangian stages are seeded by what was
 * solved before, which can move their answer within their gap
 * (search/README.md). The order decides how soon a good step is known.
 * The largest S has a stage at almost every copy count in flight (1F1B:
 * S - s), each its own stage DP under the limit, and the smallest S the
 * largest stage DPs: both are slow to give a first step,
 * and the middle is where the optima of the shipped LLMs lie (gpt3-175b
 * at p = 1024 searches S = 16, 32, 64, 128 and takes 32: its first step
 * from S = 128 cost 2.5 s and was 48% over the optimum). */
static int s_order(int nS, int oi, int no_middle_first)
{
    if (no_middle_first)
        return nS - 1 - oi;
    int mid = (nS - 1) / 2;
    return oi < nS - mid ? mid + oi : nS - 1 - oi;
}

/* The order in which one (ZeRO stage, S)'s micro-batch counts are tried
 * (mq[0..*n): indices into X->Ms): those of this pass, by their first
 * bound ascending, the bound pipe_try_combo skips a combination by before
 * any DP (the sum over ops of their least cost, times 1 + (M - 1) / S),
 * ties in the canonical order (M descending); o->no_m_order, brute force
 * or no shortcuts: the canonical order. As for s_order, any order gives
 * the same answer where every stage is solved exactly (every skip is
 * against a step found, ties go to combo_wins); the M with the least
 * bound is where the step is likely least, and once it is known the
 * others' bounds often skip them at once (llama3.1-405b at p = 131072:
 * M = 2048, 1024 and 512, searched first, took 9 of its 25 s and are
 * skipped when M = 256 comes first). */
static int m_order(pctx *X, int S, int d, int pass, op_bound *ob, int *mq, int *n)
{
    const sb_pipe_opts *o = X->o;
    int by_bound = !o->no_m_order && !X->brute && !o->no_shortcuts;
    double key[64];
    *n = 0;
    for (int q = X->nM - 1; q >= 0; q--) {
        int M = X->Ms[q];
        if ((S > 1 && !o->microbatches && (M < S) != pass) || (pass && S == 1))
            continue;
        double lb = 0.0;
        if (by_bound) {
            if (pipe_op_bounds(X, &X->mb[q], d, M, ob))
                return -1;
            for (int v = 0; v < X->mb[q].nops; v++)
                lb += ob[v].c;
            lb *= 1.0 + (double)(M - 1) / S;
        }
        int at = (*n)++; /* insertion, stable: after every key <= lb */
        while (at > 0 && key[at - 1] > lb) {
            key[at] = key[at - 1], mq[at] = mq[at - 1];
            at--;
        }
        key[at] = lb, mq[at] = q;
    }
    for (int i = 1; i < *n; i++)
        if (mq[i] > mq[i - 1]) { /* not from the largest M down */
            X->r->m_reordered++;
            break;
        }
    return 0;
}

static int64_t batch_of(const sb_model *m)
{
    int64_t g = 0;
    for (int i = 0; i < m->nops; i++) {
        int d = pipe_batch_dim(&m->ops[i]);
        if (d < 0)
            return 0;
        int64_t a = g, b = m->ops[i].dims[d].size;
        while (b) {
            int64_t t = a % b;
            a = b;
            b = t;
        }
        g = a;
    }
    return g;
}

static void ctx_free(pctx *X)
{
    sb_dp_memo_free(X->dp.memo);
    pipe_prices_free(X);
    X->dp.memo = NULL;
    for (size_t q = 0; q < X->cap; q++)
        if (X->tab[q]) {
            free(X->tab[q]->cfg);
            free(X->tab[q]->cost);
            free(X->tab[q]->cfg_b);
            free(X->tab[q]);
        }
    free(X->tab);
    for (int q = 0; q < X->nM; q++)
        sb_model_free(&X->mb[q]);
    free(X->mb), free(X->Ms), free(X->hop), free(X->rep), free(X->last), free(X->seg);
    free(X->hseg), free(X->cm), free(X->cm_off), free(X->cnt), free(X->cur), free(X->items);
    free(X->cm_perm);
    free(X->wnin), free(X->wprod), free(X->wslot);
}

/* On a terminal (o->progress): what is being solved and the best step so far, one line
 * rewritten on stderr; zero < 0 clears it. */
static void progress(const sb_pipe_opts *o, const sb_cost_params *cp, int zero, int S, int M,
                     int sched, long dps, double t0, double best)
{
    if (!o->progress)
        return;
    if (zero < 0)
        fprintf(stderr, "\r%100s\r", "");
    else
        fprintf(stderr, "\rfull space: ZeRO %d, %d stages, %d micro-batches, %s; %ld stage DPs, "
                "%.0f s; best step %.4g s      ", zero, S, M, sb_schedule_name((sb_schedule)sched),
                dps, sb_now() - t0, best / (cp->tflops * 1e12));
}

/* A first partition's step priced, and no strategy then taken at it: the
 * search's equal ops or stages were not equal to the cost model. */
static int not_taken(const sb_model *m, int p, double best, sb_error *err)
{
    return sb_fail(err, SB_EXIT_INTERNAL, "internal error: the pipeline search of '%s' at p=%d "
                   "priced a step of %.6g FLOP and then found no strategy that takes it", m->name, p, best);
}

/* Nothing found: why, with what was tried (the least memory met under a
 * limit; else the stage and micro-batch counts): the exit status's -1. */
static int nothing_found(const pctx *X, const sb_model *m, int p, const sb_pipe_opts *o,
                         sb_pipe_result *r, const int *Ss, int nS, double least, sb_error *err)
{
    int rc;
    r->least_bytes = least;
    r->none_found = 1;
    if (r->ranges_over_tables > 0) /* stage DPs left out: say which limit to change */
        rc = sb_fail(err, SB_EXIT_INPUT,
                     "no pipeline strategy of '%s' at p=%d found: %ld stage DPs were not run, "
                     "their tables bounded at up to %.4g MB (sb_search_estimate), over the "
                     "table limit of %.4g MB (--max-table-mb); the rest %s. Give --max-table-mb "
                     "%.0f where the memory is there, or more stages of fewer devices (--stages)",
                     m->name, p, r->ranges_over_tables, r->table_bound_bytes / 1e6,
                     o->dp.max_table_mb > 0 ? o->dp.max_table_mb : 4096.0,
                     o->mem_limit > 0 && isfinite(least) ? "do not fit --memory"
                                                         : "give no strategy",
                     ceil(r->table_bound_bytes / 1e6));
    else if (o->mem_limit > 0 && !isfinite(least))
        rc = sb_fail(err, SB_EXIT_INPUT,
                     "no pipeline strategy of '%s' at p=%d fits %.4g GiB per device: the "
                     "least memory of a stage is at least %.4g GiB (by the bounds: weights, "
                     "activations and scratch at their least over the configs; none solved)",
                     m->name, p, o->mem_limit / 1073741824.0, X->least_lb / 1073741824.0);
    else if (o->mem_limit > 0)
        rc = sb_fail(err, SB_EXIT_INPUT,
                     "no pipeline strategy of '%s' at p=%d fits %.4g GiB per device: the "
                     "least memory of a stage found is %.4g GiB", m->name, p,
                     o->mem_limit / 1073741824.0, least / 1073741824.0);
    else {
        char ms[256] = "";
        for (int q = 0, k = 0; q < X->nM && k < (int)sizeof ms - 1; q++)
            k += snprintf(ms + k, sizeof ms - (size_t)k, "%s%d", q ? ", " : "", X->Ms[q]);
        rc = sb_fail(err, SB_EXIT_INPUT, "no pipeline strategy of '%s' at p=%d: %d stage "
                     "count%s tried (%d .. %d), micro-batch counts %s%s; %ld stage DPs given "
                     "up%s", m->name, p, nS, nS == 1 ? "" : "s", Ss[0], Ss[nS - 1], ms,
                     o->microbatches ? " (--microbatches)" : " (the divisors of the batch)",
                     r->ranges_given_up,
                     r->ranges_given_up ? " (over the stage DP's label budget)"
                                        : ": no stage cut and config fits these counts");
    }
    return rc;
}

/* A ZeRO 2 strategy found under a limit costs the same at stage 0 or 1: r
 * reported at the least stage where every stage of it fits. 0, or -1. */
static int least_zero(pctx *X, const sb_pipe_opts *o, sb_pipe_result *r, sb_error *err)
{
    const sb_model *mb = pipe_micro(X, r->pipe.microbatches);
    for (int z = 0; z < 2; z++) {
        double mem[SB_MAX_STAGES], peak = 0.0;
        int fit = 1;
        for (int s = 0; s < r->pipe.nstages && fit; s++) {
            int i = r->pipe.first_op[s], j = r->pipe.first_op[s + 1];
            if (pipe_stage_memory(mb, i, j, r->cfg + (size_t)i * SB_MAX_DIMS, o->opt, z,
                             X->cp.precision, r->inflight[s], r->stage_recompute[s], &mem[s], err))
                return -1;
            fit = mem[s] <= o->mem_limit;
            peak = fmax(peak, mem[s]);
        }
        if (fit) {
            r->zero = z;
            r->peak_bytes = peak;
            memcpy(r->stage_mem, mem, (size_t)r->pipe.nstages * sizeof *mem);
            break;
        }
    }
    return 0;
}

/* The search's state for m: the result's arrays, each op's hash and first
 * equal op, the cut segments, the micro-batch counts (--microbatches, or
 * the divisors of the batch) and their models; *cuts and *ob allocated for
 * the caller. 0, or -1 with err. */
static int ctx_open(pctx *X, const sb_model *m, const sb_pipe_opts *o, sb_pipe_result *r,
                    int **cuts, op_bound **ob, sb_error *err)
{
    r->cfg = sb_calloc((size_t)m->nops * SB_MAX_DIMS, sizeof *r->cfg, err);
    r->op_cost = sb_calloc((size_t)m->nops, sizeof *r->op_cost, err);
    X->hop = sb_malloc((size_t)m->nops * sizeof *X->hop, err);
    X->rep = sb_malloc((size_t)m->nops * sizeof *X->rep, err);
    X->last = pipe_last_use(m, err);
    *cuts = sb_malloc((size_t)m->nops * sizeof **cuts, err);
    X->seg = sb_malloc(((size_t)m->nops + 1) * sizeof *X->seg, err);
    *ob = sb_malloc((size_t)m->nops * sizeof **ob, err);
    X->cm_off = sb_malloc(((size_t)m->nops + 1) * sizeof *X->cm_off, err);
    X->cnt = sb_calloc((size_t)m->nops, sizeof *X->cnt, err);
    X->cur = sb_malloc((size_t)m->nops * sizeof *X->cur, err);
    if (!r->cfg || !r->op_cost || !X->hop || !X->rep || !X->last || !*cuts || !X->seg || !*ob
        || !X->cm_off || !X->cnt || !X->cur)
        return -1;
    X->wnin = sb_malloc((size_t)m->nops * sizeof *X->wnin, err);
    X->wprod = sb_malloc((size_t)m->nops * SB_MAX_IO * sizeof *X->wprod, err);
    X->wslot = sb_malloc((size_t)m->nops * SB_MAX_IO * sizeof *X->wslot, err);
    if (!X->wnin || !X->wprod || !X->wslot)
        return -1;
    for (int v = 0; v < m->nops; v++) {
        X->wnin[v] = m->ops[v].nin;
        for (int k = 0; k < m->ops[v].nin; k++) {
            const sb_tensor *t = &m->tensors[m->ops[v].in[k].tensor];
            X->wprod[(size_t)v * SB_MAX_IO + (size_t)k] = t->producer;
            X->wslot[(size_t)v * SB_MAX_IO + (size_t)k] = t->producer_slot;
        }
    }
    for (int v = 0; v < m->nops; v++) {
        X->hop[v] = pipe_op_hash(m, &m->ops[v]);
        X->rep[v] = v;
        for (int w = 0; w < v; w++)
            if (X->rep[w] == w && X->hop[w] == X->hop[v] && pipe_ops_same(m, &m->ops[w], &m->ops[v])) {
                X->rep[v] = w;
                break;
            }
    }
    int ncut = sb_pipe_cuts(m, *cuts, m->nops, &r->crossing);
    r->cuts = ncut;
    X->nseg = ncut + 1;
    X->seg[0] = 0;
    for (int q = 0; q < ncut; q++)
        X->seg[q + 1] = (*cuts)[q];
    X->seg[X->nseg] = m->nops;
    X->hseg = sb_calloc((size_t)(X->nseg + 1) * (size_t)(X->nseg + 1), sizeof *X->hseg, err);
    if (!X->hseg)
        return -1;
    /* the micro-batch counts: divisors of the batch (all ops' batch dims) */
    int64_t B = batch_of(m);
    X->Ms = sb_malloc(64 * sizeof *X->Ms, err);
    X->mb = sb_calloc(64, sizeof *X->mb, err);
    if (!X->Ms || !X->mb)
        return -1;
    if (o->microbatches) {
        X->Ms[X->nM] = o->microbatches;
        if (sb_model_microbatch(m, o->microbatches, &X->mb[X->nM], err))
            return -1;
        X->nM++;
    } else {
        for (int64_t M = 1; M <= (B > 0 ? B : 1) && X->nM < 64; M++)
            if (M == 1 || (B % M) == 0) {
                X->Ms[X->nM] = (int)M;
                if (sb_model_microbatch(m, (int)M, &X->mb[X->nM], err))
                    return -1;
                X->nM++;
            }
    }
    return 0;
}

static int run(const sb_model *m, int p, const sb_cost_params *cp, const sb_pipe_opts *o,
               sb_pipe_result *r, int brute, sb_error *err)
{
    double t0 = sb_now();
    memset(r, 0, sizeof *r);
    pctx X = {.m = m, .p = p, .cp = *cp, .o = o, .err = err, .r = r, .brute = brute,
              .least_lb = INFINITY, .best_canon = LONG_MAX};
    X.cp.devices = p;
    X.dp = o->dp;
    int rc = -1;
    int *cuts = NULL;
    op_bound *ob = NULL;
    if (o->stages && (o->stages < 1 || o->stages > SB_MAX_STAGES || p % o->stages))
        return sb_fail(err, SB_EXIT_INPUT, "--stages %d: must divide p = %d (and be at most %d)",
                       o->stages, p, SB_MAX_STAGES);
    if (cp->recompute != SB_RECOMPUTE_NONE && cp->recompute != SB_RECOMPUTE_ALL
        && cp->recompute != SB_RECOMPUTE_AUTO)
        return sb_fail(err, SB_EXIT_INPUT, "recompute mode %d: not none, all or auto",
                       cp->recompute);
    if (!o->choose_zero && (cp->zero < 0 || cp->zero > 3))
        return sb_fail(err, SB_EXIT_INPUT, "--zero %d: not 0, 1, 2 or 3", cp->zero);
    /* recomputation chosen per pipe_stage (auto: the same); without a limit
     * keeping is optimal (recomputing only adds cost), but brute force
     * tries both anyway */
    int choose_rc = o->choose_recompute || cp->recompute == SB_RECOMPUTE_AUTO;
    X.rc_choose = choose_rc && (o->mem_limit > 0 || brute);
    X.rc_fixed = !choose_rc && cp->recompute == SB_RECOMPUTE_ALL;
    X.cp.recompute = X.rc_fixed ? SB_RECOMPUTE_ALL : SB_RECOMPUTE_NONE;
    /* the ZeRO stages searched: 0, 1 and 2 cost the same per config (only
     * stage 3 adds a term, sb_zero_cost) and 2 needs no more memory per op
     * than 1 or 0 (sliced gradients and optimizer state, the rest equal),
     * so under a limit 2 stands for all three (then reported at the least
     * stage its strategy fits), and without one 0 for all four (3 only
     * adds cost); brute force tries every stage */
    int zs[4], nz = 0;
    if (!o->choose_zero)
        zs[nz++] = cp->zero;
    else if (brute)
        zs[0] = 0, zs[1] = 1, zs[2] = 2, zs[3] = 3, nz = 4;
    else if (o->mem_limit > 0)
        zs[0] = 2, zs[1] = 3, nz = 2;
    else
        zs[nz++] = 0;
    r->zero_searched = nz;
    if (!o->no_shared_memo && !o->dp.plain && !brute) {
        /* the stage DPs' equal eliminations (repeated layers in stages of
         * other lengths and places, the same micro-batch and devices)
         * computed once: content-keyed, so every value and argmin is the one
         * a fresh DP computes (search/README.md) */
        double mb = o->dp.max_table_mb > 0 ? o->dp.max_table_mb : 4096;
        if (!(X.dp.memo = sb_dp_memo_new(fmin(mb * 1e6 / 4, SHARED_MEMO_BYTES)))) {
            rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            goto out;
        }
    }
    if (ctx_open(&X, m, o, r, &cuts, &ob, err))
        goto out;
    int ncut = r->cuts;
    double best = INFINITY, least = INFINITY;
    int Ss[64], nS = 0;
    for (int S = 1; S <= p && S <= SB_MAX_STAGES && nS < 64; S++) {
        if (p % S || S > X.nseg)
            continue;
        if (o->stages ? S != o->stages
                      : (o->max_stage_devices > 0 && p / S > o->max_stage_devices))
            continue;
        Ss[nS++] = S;
    }
    /* searched S, none with P/S within the cap (large P, few cut segments):
     * the largest S possible alone (its stages the smallest there are) */
    for (int S = 1; nS == 0 && !o->stages && o->max_stage_devices > 0 && S <= p
                    && S <= SB_MAX_STAGES && S <= X.nseg; S++)
        if (p % S == 0 && (S == 1 || o->microbatches || X.Ms[X.nM - 1] >= S))
            r->stage_cap_fallback = S; /* with an M >= S (one is needed; largest last) */
    if (r->stage_cap_fallback)
        Ss[nS++] = r->stage_cap_fallback;
    if (nS == 0) {
        rc = sb_fail(err, SB_EXIT_INPUT, "no stage count to search: %d stages need %d cut points "
                     "(model '%s' has %d where fewest tensors cross) and must divide p = %d",
                     o->stages ? o->stages : p, (o->stages ? o->stages : p) - 1, m->name, ncut, p);
        goto out;
    }
    /* S from the middle out (s_order), each S's M by its first bound
     * (m_order); each ZeRO stage in turn, the best step of the ones before
     * bounding the next. Pass 1 only when pass 0 found nothing: the M below
     * S (a stage idle most of the step), so that a pipeline is found
     * whenever one exists for some M (-p 5 --stages 5 at batch 4) */
    for (int pass = 0; pass < 2; pass++)
    for (int zi = 0; zi < nz; zi++) {
        if (pass && (o->microbatches || isfinite(best)))
            break;
        X.cp.zero = zs[zi];
        for (int oi = 0; oi < nS; oi++) {
            int si = s_order(nS, oi, o->no_middle_first), S = Ss[si], d = p / S;
            int mq[64], nq = 0;
            if (m_order(&X, S, d, pass, ob, mq, &nq))
                goto out;
            for (int qi = 0; qi < nq; qi++) {
                int q = mq[qi], M = X.Ms[q];
                if (pipe_op_bounds(&X, &X.mb[q], d, M, ob))
                    goto out;
                for (int sched = SB_SCHEDULE_1F1B; sched >= SB_SCHEDULE_GPIPE; sched--) {
                    if (o->schedule >= 0 && sched != o->schedule)
                        continue;
                    if (o->schedule < 0 && sched == SB_SCHEDULE_GPIPE && !(o->mem_limit > 0))
                        continue; /* the same cost and more memory than 1F1B without a limit */
                    r->combos++;
                    X.canon = (((long)zi * 64 + (nS - 1 - si)) * 64 + (X.nM - 1 - q)) * 2
                              + (SB_SCHEDULE_1F1B - sched);
                    double tc = sb_now();
                    long sp0 = r->subproblems, sk0 = r->combos_skipped;
                    progress(o, cp, X.cp.zero, S, M, sched, r->subproblems, t0, best);
                    if (pipe_try_combo(&X, S, M, sched, ob, &best, &least))
                        goto out;
                    if (getenv("SB_PIPE_TRACE"))
                        fprintf(stderr, "combo zero=%d S=%d M=%d %s: %s%ld stage DPs, %.3f s; best "
                                "%.6e\n", X.cp.zero, S, M, sb_schedule_name((sb_schedule)sched),
                                r->combos_skipped > sk0 ? "skipped, " : "", r->subproblems - sp0,
                                sb_now() - tc, best);
                }
            }
        }
    }
    if (!isfinite(best) || r->pipe.nstages == 0) {
        rc = isfinite(best) ? not_taken(m, p, best, err) : nothing_found(&X, m, p, o, r, Ss, nS, least, err);
        goto out;
    }
    pipe_lagrange_gap(&X);
    if (o->choose_zero && !brute && r->zero == 2 && o->mem_limit > 0
        && least_zero(&X, o, r, err))
        goto out;
    int any_rc = 0;
    for (int s = 0; s < r->pipe.nstages; s++)
        any_rc |= r->stage_recompute[s];
    if (X.rc_fixed || any_rc) {
        if (!(r->recompute = sb_calloc((size_t)m->nops, 1, err)))
            goto out;
        for (int i = 0; i < m->nops; i++)
            r->recompute[i] = (unsigned char)(sb_op_recomputable(&m->ops[i])
                                              && r->stage_recompute[sb_pipeline_stage_of(&r->pipe, i)]);
    }
    rc = 0;
out:
    progress(o, cp, -1, 0, 0, 0, 0, 0, 0); /* cleared */
    free(cuts);
    free(ob);
    ctx_free(&X);
    r->seconds = sb_now() - t0;
    if (rc)
        sb_pipe_result_free(r);
    return rc;
}

int sb_pipe_search(const sb_model *m, int p, const sb_cost_params *cp, const sb_pipe_opts *o,
                   sb_pipe_result *r, sb_error *err)
{
    sb_pipe_opts oo = *o;
    if (oo.threads > 0)
        oo.dp.threads = oo.threads; /* each stage DP's threads (sb_search, sb_search_within) */
    return run(m, p, cp, &oo, r, 0, err);
}

int sb_pipe_brute(const sb_model *m, int p, const sb_cost_params *cp, const sb_pipe_opts *o,
                  sb_pipe_result *r, sb_error *err)
{
    return run(m, p, cp, o, r, 1, err);
}

int sb_pipe_stage_model(const sb_model *mb, int i, int j, sb_model *out, sb_error *err)
{
    return pipe_sub_model(mb, i, j, out, err);
}

