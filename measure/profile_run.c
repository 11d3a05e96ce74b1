/* profile_run.c: the measuring of `mpirun -np P shardbench profile -m MODEL`
 * (shardbench/profile_run.h): the predictive cost model's figures
 * (shardbench/profile.h, docs/cost-model.md "The predictive model") on P
 * ranks, through the backend table the runtime uses:
 *
 *   op configs  K strategies that together give every op each of its
 *               configs at P (at P > 1 data parallel first, then strategy
 *               k gives op i config perm_i[k mod n_i], perm_i a seeded
 *               shuffle), each trained for --steps timed steps as `run`
 *               trains (the same probe and barrier before each step): per
 *               op, the slowest rank's kernel seconds and the least waiting
 *               rank's own collectives (comm less the relayouts between
 *               ops), median over the steps, averaged over the ops and
 *               strategies that share a key (kind, local shape, config,
 *               signature);
 *   relayouts   the relayout seconds booked to each op against its edges'
 *               words (the reference model's relayout area), fitted by
 *               profile_fit.c;
 *   update      the backend's SGD update of 2^20 floats: seconds per
 *               element;
 *   fixed       per strategy, the step's median less its ops' compute and
 *               own collectives, the fitted relayouts and the update: the
 *               median over the strategies (profile_fit.c);
 *   collectives all-reduce, reduce-scatter, all-gather and all-to-all
 *               over the first q ranks (q = 2..P), and point-to-point
 *               between two ranks, at 4 sizes: alpha + beta * bytes.
 *
 * Every rank runs the same strategies (the same seeded choice); rank 0
 * gathers the figures. Moved out of cli/cmd_profile.c, which now parses
 * the options, stores and prints. */
#include "shardbench/profile_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/query.h"
#include "shardbench/strategy.h"

int sb_profile_agree(MPI_Comm comm, int rc, sb_error *err)
{
    int size, rank, me, first;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    me = rc ? rank : size;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == size)
        return 0;
    if (rank == first && !err->code)
        err->code = SB_EXIT_INTERNAL;
    MPI_Bcast(err, (int)sizeof *err, MPI_BYTE, first, comm);
    return -1;
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The sums of op key `key`, added at the end when new; NULL when out of
 * memory. */
static sb_prof_sum *sum_get(sb_prof_samples *t, const sb_prof_op *key)
{
    for (int i = 0; i < t->nsums; i++) {
        const sb_prof_op *e = &t->sums[i].e;
        if (!strcmp(e->kind, key->kind) && !strcmp(e->shape, key->shape)
            && !strcmp(e->config, key->config) && !strcmp(e->sig, key->sig))
            return &t->sums[i];
    }
    if (t->nsums == t->cap) {
        int cap = t->cap ? 2 * t->cap : 128;
        sb_prof_sum *n = realloc(t->sums, (size_t)cap * sizeof *n);
        if (!n)
            return NULL;
        t->sums = n;
        t->cap = cap;
    }
    sb_prof_sum *a = &t->sums[t->nsums++];
    memset(a, 0, sizeof *a);
    a->e = *key;
    return a;
}

/* ------------------------------------------------- the strategies -- */

/* The strategies' configs, the same on every rank: at P > 1 strategy 0 is
 * data parallel (its edges mostly move nothing: what tells a relayout's
 * per-message cost from the copy every edge makes), then the seeded ones,
 * then o->strategy's files. Sets l->K, kseeded, have_dp and s.choices.
 * Local; returns 0 or -1 with err set. */
static int choose(const sb_problem *pb, int P, const sb_profile_run_opts *o, sb_profile_launch *l,
                  sb_error *err)
{
    int nops = pb->m->nops, kmax = 1;
    for (int i = 0; i < nops; i++)
        if (pb->cfg[i].n > kmax)
            kmax = pb->cfg[i].n;
    int *dpc = calloc((size_t)nops, sizeof *dpc);
    sb_error dperr = {0};
    int have_dp = P > 1 && dpc && !sb_strategy_data_parallel(pb, dpc, &dperr);
    int K = kmax + have_dp;
    if (P > 1 && K < 4)
        K = 4;
    if (K > 64)
        K = 64;
    if (o->max_strategies && K > o->max_strategies)
        K = o->max_strategies;
    l->kseeded = K;
    l->have_dp = have_dp;
    l->K = K += o->nstrategy;
    /* perm[i]: op i's configs in a seeded order */
    int **perm = calloc((size_t)nops, sizeof *perm), rc = 0;
    int *choices = l->s.choices = calloc((size_t)K * nops, sizeof *choices); /* [k][i] */
    if (!perm || !choices)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "profile: out of memory");
    uint64_t rs = o->seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int i = 0; i < nops && !rc; i++) {
        int n = pb->cfg[i].n;
        if (!(perm[i] = malloc((size_t)n * sizeof *perm[i]))) {
            rc = sb_fail(err, SB_EXIT_INTERNAL, "profile: out of memory");
            break;
        }
        for (int k = 0; k < n; k++)
            perm[i][k] = k;
        for (int k = n - 1; k > 0; k--) {
            int j = (int)(next_rand(&rs) % (uint64_t)(k + 1)), t = perm[i][k];
            perm[i][k] = perm[i][j];
            perm[i][j] = t;
        }
    }
    for (int k = 0; k < l->kseeded && !rc; k++)
        for (int i = 0; i < nops; i++)
            choices[(size_t)k * nops + i] = have_dp ? (k == 0 ? dpc[i] : perm[i][(k - 1) % pb->cfg[i].n])
                                                    : perm[i][k % pb->cfg[i].n];
    for (int f = 0; f < o->nstrategy && !rc; f++)
        rc = sb_strategy_load_choice(o->strategy[f], pb, choices + (size_t)(l->kseeded + f) * nops, err);
    for (int i = 0; perm && i < nops; i++)
        free(perm[i]);
    free(perm);
    free(dpc);
    return rc;
}

/* One strategy's working figures, every rank's. */
typedef struct {
    int nops, steps;
    double *sendv, *recvv; /* 4 x nops: the ops' figures, reduced over the ranks */
    double *corev;         /* nops: each op's CPU seconds on a core */
    /* 4 x nops: each op's phase entries and exits (sb_executor_op_phase_times)
     * of the ranks that took part, the latest over them */
    double *phs, *phr;
    double *cm;            /* nops x 3 x steps: per op and timed step, its kernels,
                              own collectives and relayouts */
    double *step;          /* steps: each timed step, the slowest rank's */
} step_bufs;

static int bufs_alloc(step_bufs *b, int nops, int steps)
{
    *b = (step_bufs){.nops = nops, .steps = steps};
    b->sendv = calloc((size_t)nops * 4, sizeof *b->sendv);
    b->recvv = calloc((size_t)nops * 4, sizeof *b->recvv);
    b->corev = calloc((size_t)nops, sizeof *b->corev);
    b->phs = calloc((size_t)nops * 4, sizeof *b->phs);
    b->phr = calloc((size_t)nops * 4, sizeof *b->phr);
    b->cm = calloc((size_t)nops * 3 * (size_t)steps, sizeof *b->cm);
    b->step = calloc((size_t)steps, sizeof *b->step);
    return b->sendv && b->recvv && b->corev && b->phs && b->phr && b->cm && b->step ? 0 : -1;
}

static void bufs_free(step_bufs *b)
{
    free(b->sendv);
    free(b->recvv);
    free(b->corev);
    free(b->phs);
    free(b->phr);
    free(b->cm);
    free(b->step);
}

/* Timed step si's figures of every op, into b->cm. Per op: the slowest
 * rank's kernels, and the collectives and relayouts of the rank that
 * waited least among those that took part (its time is the transfer, not
 * a wait for a slower rank, which depends on the neighbours' configs); and
 * the least time any of them spent in the op outside the relayouts: the
 * rank that entered last, whose time is the op's own when its ranks wait
 * on one another inside it (an LSTM whose layers are split hands each
 * step on), which the first two miss; and the op's critical path over its
 * ranks (sb_prof_own_s). With shared cores, the kernels are at least the
 * CPU seconds of the op's ranks on its busiest core (sb_prof_core_s).
 * Collective over comm. */
static void op_figures(MPI_Comm comm, MPI_Comm core, int shared, const sb_executor *ex,
                       step_bufs *b, int si)
{
    int nops = b->nops, steps = b->steps;
    double *sendv = b->sendv, *recvv = b->recvv, *corev = b->corev;
    const sb_op_time *ot = sb_executor_op_times(ex);
    for (int i = 0; i < nops; i++) {
        int took_part = ot[i].compute_s > 0 || ot[i].comm_s > 0;
        double coll = ot[i].comm_s - ot[i].relayout_s;
        coll = coll > 0 ? coll : 0.0;
        sendv[i] = ot[i].compute_s + ot[i].other_s; /* the executor's work around it too */
        sendv[nops + i] = took_part ? coll : INFINITY;
        sendv[2 * nops + i] = took_part ? ot[i].relayout_s : INFINITY;
        sendv[3 * nops + i] = took_part ? sendv[i] + coll : INFINITY;
    }
    MPI_Allreduce(sendv, recvv, nops, MPI_DOUBLE, MPI_MAX, comm);
    if (shared) { /* each op's CPU seconds on its busiest core */
        for (int i = 0; i < nops; i++)
            corev[i] = ot[i].compute_cpu_s + ot[i].other_cpu_s;
        if (core != MPI_COMM_NULL)
            MPI_Allreduce(MPI_IN_PLACE, corev, nops, MPI_DOUBLE, MPI_SUM, core);
        MPI_Allreduce(MPI_IN_PLACE, corev, nops, MPI_DOUBLE, MPI_MAX, comm);
        for (int i = 0; i < nops; i++)
            recvv[i] = sb_prof_core_s(recvv[i], corev[i]);
    }
    MPI_Allreduce(sendv + nops, recvv + nops, 3 * nops, MPI_DOUBLE, MPI_MIN, comm);
    const double *ph = sb_executor_op_phase_times(ex);
    for (int i = 0; i < 4 * nops; i++)
        b->phs[i] = isfinite(sendv[nops + i / 4]) && isfinite(ph[i]) ? ph[i] : -INFINITY;
    MPI_Allreduce(b->phs, b->phr, 4 * nops, MPI_DOUBLE, MPI_MAX, comm);
    for (int i = 0; i < nops; i++) {
        double *v = b->cm + ((size_t)i * 3) * (size_t)steps;
        const double *q = b->phr + 4 * i; /* latest entries and exits */
        double span = (q[1] - q[0]) + (q[3] - q[2]);
        v[si] = recvv[i];
        v[steps + si] = sb_prof_own_s(recvv[nops + i], recvv[3 * nops + i], recvv[i], span,
                                      recvv[2 * nops + i]);
        v[2 * steps + si] = isfinite(recvv[2 * nops + i]) ? recvv[2 * nops + i] : 0.0;
    }
}

/* Trains ex for o->warmup + o->steps steps, each after the probe and a
 * barrier as `run` takes them: the timed steps into b (b->step, the ops'
 * figures) and their probes (the slowest rank's) into probes[steps]. A
 * step that fails ends the job. Collective over comm. */
static void time_steps(MPI_Comm comm, const sb_profile_run_opts *o, int shared, sb_executor *ex,
                       step_bufs *b, double *probes)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    for (int s = 0; s < o->warmup + o->steps; s++) {
        double pt = o->probe(), ptmax;
        MPI_Allreduce(&pt, &ptmax, 1, MPI_DOUBLE, MPI_MAX, comm);
        MPI_Barrier(comm);
        sb_executor_reset_times(ex);
        sb_error err = {0};
        double t0 = MPI_Wtime(), loss;
        if (sb_executor_step(ex, &loss, &err)) {
            fprintf(stderr, "shardbench: profile: rank %d: %s\n", rank, err.msg);
            MPI_Abort(comm, err.code ? err.code : 1);
        }
        double t = MPI_Wtime() - t0, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (s < o->warmup)
            continue;
        int si = s - o->warmup;
        b->step[si] = tmax;
        probes[si] = ptmax; /* as `run` reports it */
        op_figures(comm, o->core, shared, ex, b, si);
    }
}

/* Rank 0: strategy k's figures into the samples: its step's median, each
 * op's medians summed under its key, one relayout row per op, and each
 * edge's relayout features booked half to its consumer (forward) and half
 * to its producer (the gradient). */
static int gather(const sb_problem *pb, const step_bufs *b, int k, sb_prof_samples *s,
                  sb_error *err)
{
    const sb_model *m = pb->m;
    const int nops = m->nops, steps = b->steps, NF = SB_PROF_EDGE_FEATURES;
    const int *choice = s->choices + (size_t)k * nops;
    sb_prof_strategy *sm = &s->strat[k];
    sb_cost_params ref_free; /* the reference costs without collectives */
    sb_cost_params_default(&ref_free);
    ref_free.coll_mode = SB_COLL_FREE;
    sm->step_s = sb_median(b->step, steps);
    for (int i = 0; i < nops; i++) {
        const sb_op *op = &m->ops[i];
        const int *cfg = pb->cfg[i].c + (size_t)choice[i] * (size_t)op->ndims;
        const double *v = b->cm + ((size_t)i * 3) * (size_t)steps;
        double comp = sb_median(v, steps), coll = sb_median(v + steps, steps),
               relay = sb_median(v + 2 * steps, steps);
        sb_prof_op key = {0};
        snprintf(key.kind, sizeof key.kind, "%s", sb_op_kind_name(op->kind));
        sb_prof_shape(op, cfg, key.shape, sizeof key.shape);
        sb_prof_config(op, cfg, key.config, sizeof key.config);
        sb_prof_sig(m, op, key.sig, sizeof key.sig);
        key.ref_cost = pb->cfg[i].cost[choice[i]];
        key.ref_compute = sb_op_cost(m, op, cfg, &ref_free);
        sb_prof_sum *ao = sum_get(s, &key);
        if (!ao)
            return sb_fail(err, SB_EXIT_INTERNAL, "profile: out of memory");
        ao->sum_compute += comp;
        ao->sum_coll += coll;
        ao->e.samples++;
        sm->ops_s += comp + coll;
        s->ry[s->nrows] = relay;
        sm->relay_s += relay;
        for (int j = 0; j < NF; j++)
            s->rx[s->nrows * NF + j] = 0.0;
        s->nrows++;
    }
    int row0 = s->nrows - nops;
    for (int e = 0; e < pb->nedges; e++) {
        double f[SB_PROF_EDGE_FEATURES];
        sb_prof_edge_features(pb, e, choice, f);
        for (int j = 0; j < NF; j++) {
            s->rx[(row0 + pb->edges[e].dst) * NF + j] += 0.5 * f[j];
            s->rx[(row0 + pb->edges[e].src) * NF + j] += 0.5 * f[j];
            sm->feat[j] += f[j];
        }
    }
    return 0;
}

/* Every strategy of l trained and timed, its figures gathered on rank 0.
 * Collective; 0, or -1 on every rank. */
static int train_all(MPI_Comm comm, const sb_problem *pb, const sb_backend *be,
                     const sb_profile_run_opts *o, sb_profile_launch *l, sb_error *err)
{
    const sb_model *m = pb->m;
    int rank, nops = m->nops, K = l->K;
    MPI_Comm_rank(comm, &rank);
    sb_prof_samples *s = &l->s;
    step_bufs b;
    s->K = K;
    s->nops = nops;
    s->strat = calloc((size_t)K, sizeof *s->strat);
    s->rx = calloc((size_t)K * nops * SB_PROF_EDGE_FEATURES, sizeof *s->rx);
    s->ry = calloc((size_t)K * nops, sizeof *s->ry);
    s->nprobes = K * o->steps;
    s->probes = calloc((size_t)s->nprobes, sizeof *s->probes);
    int rc = bufs_alloc(&b, nops, o->steps) || !s->strat || !s->rx || !s->ry || !s->probes
                 ? sb_fail(err, SB_EXIT_INTERNAL, "profile: out of memory")
                 : 0;
    rc = sb_profile_agree(comm, rc, err);
    double t_start = MPI_Wtime();
    for (int k = 0; k < K && !rc; k++) {
        const int *choice = s->choices + (size_t)k * nops;
        sb_exec_opts eo = {.lr = 0.001f, .seed = 1, .update = SB_UPDATE_SGD,
                           .cpu_times = l->shared};
        sb_executor *ex = NULL;
        sb_strategy st;
        int crc = sb_strategy_from_choice(&st, pb, choice, err);
        crc = crc ? crc : sb_executor_create(comm, m, &st, be, &eo, &ex, err);
        sb_strategy_free(&st); /* the executor keeps a copy */
        if ((rc = sb_profile_agree(comm, crc, err)))
            break;
        /* a backend that records its marks on a queue has no CPU seconds:
         * the wall figures alone (the same on every rank: one backend) */
        l->shared = l->shared && sb_executor_cpu_times(ex);
        time_steps(comm, o, l->shared, ex, &b, s->probes + (size_t)k * (size_t)o->steps);
        sb_executor_free(ex);
        if (rank == 0)
            rc = gather(pb, &b, k, s, err);
        rc = sb_profile_agree(comm, rc, err);
        if (o->progress && rank == 0)
            fprintf(stderr, "\rprofile: strategy %d/%d (%.0f s)", k + 1, K, MPI_Wtime() - t_start);
    }
    if (o->progress && rank == 0)
        fprintf(stderr, "\r%60s\r", "");
    bufs_free(&b);
    return rc;
}

/* ------------------------------ the update and the collectives -- */

/* Times one collective kind over comm at `nf` floats per rank: the median
 * over reps of the slowest rank. */
static double time_coll(const sb_backend *be, int kind, MPI_Comm comm, float *buf, float *buf2,
                        int nf, int reps)
{
    int q, r;
    MPI_Comm_size(comm, &q);
    MPI_Comm_rank(comm, &r);
    int cnt[64], dsp[64];
    int per = nf / q;
    for (int i = 0; i < q; i++) {
        cnt[i] = per;
        dsp[i] = i * per;
    }
    double t[16];
    for (int k = -1; k < reps; k++) {
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        switch (kind) {
        case SB_PCOLL_ALLREDUCE: be->allreduce(buf, (size_t)nf, MPI_SUM, comm); break;
        case SB_PCOLL_REDUCE_SCATTER: be->reduce_scatter(buf, buf2, cnt, dsp, comm); break;
        case SB_PCOLL_ALLGATHER: be->allgather(buf, cnt, dsp, comm); break;
        case SB_PCOLL_ALLTOALL: be->alltoallv(buf, cnt, dsp, buf2, cnt, dsp, comm); break;
        case SB_PCOLL_P2P:
            MPI_Sendrecv(buf, nf, MPI_FLOAT, 1 - r, 7, buf2, nf, MPI_FLOAT, 1 - r, 7, comm,
                         MPI_STATUS_IGNORE);
            break;
        }
        double dt = MPI_Wtime() - t0, mx;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (k >= 0)
            t[k] = mx;
    }
    return sb_median(t, reps);
}

/* The collectives' alpha-beta figures over the first q ranks, q = 2..P
 * (every q up to 8, then powers of 2 and P). Collective over comm. */
static int measure_colls(const sb_backend *be, MPI_Comm comm, sb_profile *pf, sb_error *err)
{
    int P, rank;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &rank);
    static const int sizes[] = {1024, 16384, 131072, 1048576}; /* floats per rank */
    enum { NS = sizeof sizes / sizeof sizes[0] };
    int maxf = sizes[NS - 1];
    float *buf = be->host_memory ? malloc((size_t)maxf * sizeof *buf) : be->alloc((size_t)maxf * 4);
    float *buf2 = be->host_memory ? malloc((size_t)maxf * sizeof *buf2)
                                  : be->alloc((size_t)maxf * 4);
    int ok = buf && buf2, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        if (be->host_memory) {
            free(buf);
            free(buf2);
        }
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory for the collectives' buffers");
    }
    if (be->host_memory) {
        for (int i = 0; i < maxf; i++)
            buf[i] = buf2[i] = 1.0f / (float)(1 + i % 7);
    } else {
        be->zero(buf, (size_t)maxf);
        be->zero(buf2, (size_t)maxf);
    }
    pf->coll = calloc((size_t)SB_PCOLL_COUNT * 64, sizeof *pf->coll);
    if (!pf->coll)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int q = 2; q <= P && q <= 64; q++) {
        if (q > 8 && (q & (q - 1)) && q != P)
            continue;
        MPI_Comm sub;
        MPI_Comm_split(comm, rank < q ? 0 : MPI_UNDEFINED, rank, &sub);
        for (int kind = 0; kind < SB_PCOLL_COUNT; kind++) {
            if (kind == SB_PCOLL_P2P && (q != 2 || !be->host_memory))
                continue;
            if ((kind == SB_PCOLL_REDUCE_SCATTER && !be->reduce_scatter)
                || (kind == SB_PCOLL_ALLGATHER && !be->allgather)
                || (kind == SB_PCOLL_ALLTOALL && !be->alltoallv))
                continue;
            double x[2 * NS], y[NS];
            for (int s = 0; s < NS; s++) {
                int nf = sizes[s] / q * q;
                double secs = 0;
                if (sub != MPI_COMM_NULL)
                    secs = time_coll(be, kind, sub, buf, buf2, nf, 5);
                x[2 * s] = 1.0;
                x[2 * s + 1] = (double)nf * 4.0;
                y[s] = secs;
            }
            if (rank == 0) {
                double b[2];
                sb_fit_nonneg(x, y, NS, 2, b);
                pf->coll[pf->ncoll++] = (sb_prof_coll){.kind = kind, .group = q, .alpha_s = b[0],
                                                       .beta_s_per_byte = b[1], .points = NS};
            }
        }
        if (sub != MPI_COMM_NULL)
            MPI_Comm_free(&sub);
        MPI_Barrier(comm);
    }
    if (be->host_memory) {
        free(buf);
        free(buf2);
    } else {
        be->release(buf);
        be->release(buf2);
    }
    return 0;
}

/* Seconds per element of the backend's SGD update (2^20 floats, median of 7);
 * after the executors, whose creation refused a backend without optim. */
static double time_update(const sb_backend *be)
{
    size_t n = (size_t)1 << 20;
    float *w = be->alloc(n * sizeof *w), *g = be->alloc(n * sizeof *g);
    if (!w || !g)
        return 0.0;
    be->zero(w, n);
    be->zero(g, n);
    double t[7];
    for (int k = -1; k < 7; k++) {
        double t0 = MPI_Wtime();
        be->optim->sgd_update(w, g, n, 0.01f);
        if (be->sync)
            be->sync();
        if (k >= 0)
            t[k] = MPI_Wtime() - t0;
    }
    be->release(w);
    be->release(g);
    return sb_median(t, 7) / (double)n;
}

/* ------------------------------------------------------ the launch -- */

int sb_profile_measure(MPI_Comm comm, const sb_problem *pb, const sb_backend *be,
                       const sb_profile_run_opts *o, sb_profile *pf, sb_profile_launch *launch,
                       sb_error *err)
{
    int rank, P;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    *pf = (sb_profile){0};
    *launch = (sb_profile_launch){.shared = o->per_core > 1};
    if (o->steps < 1 || o->steps > 1000 || o->warmup < 0 || !o->probe)
        return sb_fail(err, SB_EXIT_INPUT, "profile: %d timed steps (1 to 1000), %d warm-up",
                       o->steps, o->warmup);
    int rc = sb_profile_agree(comm, choose(pb, P, o, launch, err), err);
    if (!rc) /* nothing measured yet: the same exit everywhere */
        rc = train_all(comm, pb, be, o, launch, err);
    if (rc)
        return -1;
    double upd = time_update(be), updmax;
    MPI_Allreduce(&upd, &updmax, 1, MPI_DOUBLE, MPI_MAX, comm);
    pf->update_s_per_elem = updmax;
    if (sb_profile_agree(comm, o->no_coll ? 0 : measure_colls(be, comm, pf, err), err))
        return -1;
    if (rank == 0) {
        snprintf(pf->backend, sizeof pf->backend, "%s", be->name);
        snprintf(pf->machine, sizeof pf->machine, "%s", o->machine);
        snprintf(pf->precision, sizeof pf->precision, "fp32");
        pf->ranks = P;
        pf->seed = o->seed;
        rc = sb_profile_fit(&launch->s, pb, pf, err);
    }
    return sb_profile_agree(comm, rc, err);
}
