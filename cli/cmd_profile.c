/* cmd_profile.c: `mpirun -np P shardbench profile -m MODEL`: measures the
 * predictive cost model's figures (shardbench/profile.h, docs/cost-model.md
 * "The predictive model") on P ranks, through the backend table the
 * runtime uses, and stores them in the results database under (backend,
 * machine, P):
 *
 *   op configs  K strategies that together give every op each of its
 *               configs at P (at P > 1 data parallel first, then strategy
 *               k gives op i config perm_i[k mod n_i], perm_i a seeded
 *               shuffle), each trained for --steps
 *               timed steps as `run` trains (the same probe and barrier
 *               before each step): per op, the slowest rank's kernel
 *               seconds and the least waiting rank's own collectives (comm
 *               less the relayouts between ops), median over the steps,
 *               averaged over the ops and
 *               strategies that share a key (kind, local shape, config,
 *               signature);
 *   relayouts   the relayout seconds booked to each op against its edges'
 *               words (the reference model's relayout area): a non-negative
 *               least-squares fit of seconds per edge, per edge that moves
 *               data and per word;
 *   update      the backend's SGD update of 2^20 floats: seconds per
 *               element;
 *   fixed       per strategy, the step's median less its ops' compute and
 *               own collectives, the fitted relayouts and the update: the
 *               median over the strategies (the loss, the update calls,
 *               the step's bookkeeping, and the relayouts' constant part,
 *               the same for every strategy: an edge whose layouts agree
 *               still copies);
 *   collectives all-reduce, reduce-scatter, all-gather and all-to-all
 *               over the first q ranks (q = 2..P), and point-to-point
 *               between two ranks, at 4 sizes: alpha + beta * bytes.
 *
 * Every rank runs the same strategies (the same seeded choice); rank 0
 * writes the database. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "algos.h"
#include "cli.h"
#include "probe.h"
#include "threads.h"
#include "shardbench/profile.h"
#include "shardbench/strategy.h"
#include "shardbench/query.h"
#include "shardbench/results.h"
#include "shardbench/runtime.h"

typedef struct {
    const char *model, *machine, *db, *backend;
    sb_setting set[64];
    const char *strategy[16]; /* --strategy FILE: profiled after the seeded ones */
    int nset, nstrategy, steps, warmup, max_strategies, quiet, keep_binding, no_coll;
    uint64_t seed;
} prof_args;

static void profile_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P shardbench profile -m MODEL [options]\n"
            "\n"
            "Measures the predictive cost model's figures on the P ranks: every op config\n"
            "of MODEL at P (its kernels' and its own collectives' seconds at its local\n"
            "shard shape), the relayouts between ops, the update, the step's fixed part,\n"
            "and alpha-beta figures of the collectives; stores them in the results\n"
            "database for (backend, --machine, P). search, prune, candidates and bench\n"
            "with --machine NAME then predict step times from them (docs/cost-model.md).\n"
            "\n"
            "  -m, --model M       model name or file\n"
            "  -s, --set K=V       override a model parameter (repeatable)\n"
            "      --machine NAME  the machine the figures are for (default cpu-here, the\n"
            "                      machine file `calibrate` writes)\n"
            "      --db FILE       results database (default results/shardbench.db)\n"
            "      --backend B     cpu (default) or cuda\n"
            "      --steps N       timed steps per strategy (default 5)\n"
            "      --warmup W      untimed steps first (default 1)\n"
            "      --strategies K  at most K strategies (default: the most configs of an\n"
            "                      op, at least 4 when P > 1, at most 64)\n"
            "      --seed N        the configs' order (default 1)\n"
            "      --strategy FILE also profile this strategy file (repeatable, up to 16;\n"
            "                      plain configs only), after the seeded ones\n"
            "      --no-collectives  skip the collectives' alpha-beta figures\n"
            "      --quiet         no table, just the database rows\n"
            "      --keep-binding  keep the launcher's default binding (as run's)\n");
}

static int parse_args(int argc, char **argv, prof_args *a, sb_error *err)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"set", required_argument, 0, 's'},
        {"machine", required_argument, 0, 'H'}, {"db", required_argument, 0, 'd'},
        {"backend", required_argument, 0, 'b'}, {"steps", required_argument, 0, 'n'},
        {"warmup", required_argument, 0, 'w'},  {"strategies", required_argument, 0, 'K'},
        {"seed", required_argument, 0, 'S'},    {"quiet", no_argument, 0, 'q'},
        {"keep-binding", no_argument, 0, 'k'},  {"no-collectives", no_argument, 0, 'C'},
        {"strategy", required_argument, 0, 'f'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
    };
    memset(a, 0, sizeof *a);
    a->machine = "cpu-here";
    a->db = "results/shardbench.db";
    a->backend = "cpu";
    a->steps = 5;
    a->warmup = 1;
    a->seed = 1;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "hm:s:", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a->model = optarg; break;
        case 's':
            if (a->nset == 64)
                return sb_fail(err, SB_EXIT_INPUT, "too many --set options (at most 64)");
            if (sb_setting_parse(optarg, &a->set[a->nset++], err))
                return -1;
            break;
        case 'H': a->machine = optarg; break;
        case 'd': a->db = optarg; break;
        case 'b': a->backend = optarg; break;
        case 'n':
            if (parse_int_opt(optarg, "--steps", 1, 1000, &a->steps, err))
                return -1;
            break;
        case 'w':
            if (parse_int_opt(optarg, "--warmup", 0, 1000, &a->warmup, err))
                return -1;
            break;
        case 'K':
            if (parse_int_opt(optarg, "--strategies", 1, 4096, &a->max_strategies, err))
                return -1;
            break;
        case 'S':
            if (parse_seed(optarg, &a->seed, err))
                return -1;
            break;
        case 'q': a->quiet = 1; break;
        case 'k': a->keep_binding = 1; break;
        case 'C': a->no_coll = 1; break;
        case 'f':
            if (a->nstrategy == (int)(sizeof a->strategy / sizeof a->strategy[0]))
                return sb_fail(err, SB_EXIT_INPUT, "profile: more than 16 --strategy files");
            a->strategy[a->nstrategy++] = optarg;
            break;
        case 'h': return 1;
        default:
            return sb_fail(err, SB_EXIT_INPUT, "profile: unknown option or missing value '%s' "
                           "(shardbench profile --help)", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return sb_fail(err, SB_EXIT_INPUT, "profile: unexpected argument '%s'", argv[optind]);
    if (!a->model)
        return sb_fail(err, SB_EXIT_INPUT, "profile: -m MODEL is required");
    /* a name stored, printed and matched by search --machine: no control byte */
    if (!a->machine[0] || strlen(a->machine) >= 128 || sb_has_controls(a->machine))
        return sb_fail(err, SB_EXIT_INPUT, "profile: --machine '%s' is not a machine name "
                       "(1 to 127 bytes, no control characters)", a->machine);
    return 0;
}

/* the same verdict on every rank: 0, or the first failing rank's status
 * (printed by it) */
static int agree_rc(MPI_Comm comm, int rank, int rc, const sb_error *err)
{
    int size, me, first;
    MPI_Comm_size(comm, &size);
    me = rc ? rank : size;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == size)
        return 0;
    int status = 0;
    if (rank == first)
        status = cli_fail(err);
    MPI_Bcast(&status, 1, MPI_INT, first, comm);
    return status ? status : SB_EXIT_INTERNAL;
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* An op key's measurements while they are gathered (rank 0). */
typedef struct {
    sb_prof_op e;
    double sum_compute, sum_coll;
} acc_op;

typedef struct {
    acc_op *v;
    int n, cap;
} acc_table;

static acc_op *acc_get(acc_table *t, const sb_prof_op *key)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].e.kind, key->kind) && !strcmp(t->v[i].e.shape, key->shape)
            && !strcmp(t->v[i].e.config, key->config) && !strcmp(t->v[i].e.sig, key->sig))
            return &t->v[i];
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 128;
        acc_op *n = realloc(t->v, (size_t)cap * sizeof *n);
        if (!n)
            return NULL;
        t->v = n;
        t->cap = cap;
    }
    acc_op *a = &t->v[t->n++];
    memset(a, 0, sizeof *a);
    a->e = *key;
    return a;
}

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

/* What one strategy's launch measured, for the fits (rank 0). */
typedef struct {
    double step_s, ops_s;            /* step median; its ops' compute and own collectives */
    double feat[SB_PROF_EDGE_FEATURES]; /* its edges' relayout features, summed */
    double relay_s, resid_s; /* its relayouts as measured; the step less the model */
} strat_meas;

/* The fitted relayout seconds of a strategy's summed edge features, less
 * the per-edge constant (the same for every strategy: in fixed_s), as
 * sb_edge_cost prices them. */
static double relay_fit(const sb_profile *pf, const double *feat)
{
    return feat[1] * pf->relay_msg_s + feat[2] * pf->relay_word_s + feat[3] * pf->relay_local_s;
}

int cmd_profile(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank, P, status = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    sb_error err = {0};
    prof_args a;
    int prc = parse_args(argc, argv, &a, &err);
    if (prc == 1) {
        if (rank == 0)
            profile_usage(stdout);
        MPI_Finalize();
        return 0;
    }
    sb_model m = {0};
    sb_problem pb = {0};
    const sb_backend *be = NULL;
    if (!prc && sb_model_load(a.model, a.set, a.nset, &m, &err))
        prc = -1;
    sb_cost_params ref;
    sb_cost_params_default(&ref);
    if (!prc && sb_problem_build(&m, P, &ref, &pb, &err))
        prc = -1;
    if (!prc && !(be = sb_backend_get(a.backend, &err)))
        prc = -1;
    if ((status = agree_rc(comm, rank, prc, &err))) {
        if (!prc) {
            sb_problem_free(&pb);
            sb_model_free(&m);
        }
        sb_backend_finalize(be); /* NCCL communicators, before MPI_Finalize */
        MPI_Finalize();
        return status;
    }
    sb_cpuset cpus;
    cli_cpu_setup(comm, a.keep_binding, &cpus);
    /* ranks bound to one core each, some cores holding more than one (P
     * over the cores, as bench binds them): an op's ranks on one core take
     * turns, so the op lasts at least the CPU seconds of its ranks there,
     * whether they ran side by side (each rank's wall time shows it) or one
     * after the other (each rank's does not: the wait lands in the next
     * relayout); see sb_prof_core_s */
    MPI_Comm corecomm = MPI_COMM_NULL;
    int per_core = cli_core_comm(comm, &corecomm), shared = per_core > 1;
    sb_cost_params ref_free = ref; /* the reference costs without collectives */
    ref_free.coll_mode = SB_COLL_FREE;
    int nops = m.nops, kmax = 1;
    for (int i = 0; i < nops; i++)
        if (pb.cfg[i].n > kmax)
            kmax = pb.cfg[i].n;
    /* at P > 1, strategy 0 is data parallel (its edges mostly move
     * nothing: what tells a relayout's per-message cost from the copy every
     * edge makes), then the seeded ones */
    int *dpc = calloc((size_t)nops, sizeof *dpc);
    sb_error dperr = {0};
    int have_dp = P > 1 && dpc && !sb_strategy_data_parallel(&pb, dpc, &dperr);
    int K = kmax + have_dp;
    if (P > 1 && K < 4)
        K = 4;
    if (K > 64)
        K = 64;
    if (a.max_strategies && K > a.max_strategies)
        K = a.max_strategies;
    int Kseeded = K;
    K += a.nstrategy;
    /* perm[i]: op i's configs in a seeded order (the same on every rank) */
    int **perm = calloc((size_t)nops, sizeof *perm);
    int *choices = calloc((size_t)K * nops, sizeof *choices); /* [k][i]: op i's config */
    double *cm = calloc((size_t)nops * 3 * (size_t)a.steps, sizeof *cm);
    strat_meas *sm = calloc((size_t)K, sizeof *sm);
    const int NF = SB_PROF_EDGE_FEATURES;
    double *rx = calloc((size_t)K * nops * NF, sizeof *rx), *ry = calloc((size_t)K * nops, sizeof *ry);
    acc_table acc = {0};
    double *sendv = calloc((size_t)nops * 4, sizeof *sendv);
    double *recvv = calloc((size_t)nops * 4, sizeof *recvv);
    double *corev = calloc((size_t)nops, sizeof *corev); /* per op: CPU seconds on a core */
    /* each op's phase entries and exits (sb_executor_op_phase_times) of the
     * ranks that took part, the latest over them */
    double *phs = calloc((size_t)nops * 4, sizeof *phs), *phr = calloc((size_t)nops * 4, sizeof *phr);
    /* every timed step's probe (the slowest rank's, cli/probe.c), K x steps */
    double *probes = calloc((size_t)K * (size_t)a.steps, sizeof *probes);
    int oom = !perm || !choices || !cm || !sm || !rx || !ry || !sendv || !recvv || !probes || !phs ||
              !phr || !corev;
    uint64_t rs = a.seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int i = 0; i < nops && !oom; i++) {
        int n = pb.cfg[i].n;
        if (!(perm[i] = malloc((size_t)n * sizeof *perm[i]))) {
            oom = 1;
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
    if (oom) {
        fprintf(stderr, "shardbench: profile: out of memory\n");
        MPI_Abort(comm, 1);
    }
    for (int k = 0; k < Kseeded; k++)
        for (int i = 0; i < nops; i++)
            choices[(size_t)k * nops + i] = have_dp ? (k == 0 ? dpc[i] : perm[i][(k - 1) % pb.cfg[i].n])
                                                    : perm[i][k % pb.cfg[i].n];
    int frc = 0;
    for (int f = 0; f < a.nstrategy && !frc; f++)
        frc = sb_strategy_load_choice(a.strategy[f], &pb, choices + (size_t)(Kseeded + f) * nops, &err);
    status = agree_rc(comm, rank, frc, &err); /* nothing measured yet: the same exit everywhere */
    int tty = rank == 0 && !a.quiet && isatty(2);
    double t_start = MPI_Wtime();
    int nrows = 0;
    for (int k = 0; k < K && !status; k++) {
        const int *choice = choices + (size_t)k * nops;
        sb_strategy st;
        sb_exec_opts eo = {.lr = 0.001f, .seed = 1, .update = SB_UPDATE_SGD, .cpu_times = shared};
        sb_executor *ex = NULL;
        int rc = sb_strategy_from_choice(&st, &pb, choice, &err);
        rc = rc ? rc : sb_executor_create(comm, &m, &st, be, &eo, &ex, &err);
        sb_strategy_free(&st); /* the executor keeps a copy */
        if ((status = agree_rc(comm, rank, rc, &err)))
            break;
        /* a backend that records its marks on a queue has no CPU seconds:
         * the wall figures alone (the same on every rank: one backend) */
        shared = shared && sb_executor_cpu_times(ex);
        double steps[1000];
        for (int s = 0; s < a.warmup + a.steps; s++) {
            double pt = cli_probe_seconds(), ptmax;
            MPI_Allreduce(&pt, &ptmax, 1, MPI_DOUBLE, MPI_MAX, comm);
            MPI_Barrier(comm);
            sb_executor_reset_times(ex);
            double t0 = MPI_Wtime(), loss;
            if (sb_executor_step(ex, &loss, &err)) {
                fprintf(stderr, "shardbench: profile: rank %d: %s\n", rank, err.msg);
                MPI_Abort(comm, err.code ? err.code : 1);
            }
            double t = MPI_Wtime() - t0, tmax;
            MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, comm);
            if (s < a.warmup)
                continue;
            int si = s - a.warmup;
            steps[si] = tmax;
            probes[(size_t)k * (size_t)a.steps + (size_t)si] = ptmax; /* as `run` reports it */
            /* per op: the slowest rank's kernels, and the collectives and
             * relayouts of the rank that waited least among those that took
             * part (its time is the transfer, not a wait for a slower rank,
             * which depends on the neighbours' configs); and the least time
             * any of them spent in the op outside the relayouts: the rank
             * that entered last, whose time is the op's own when its ranks
             * wait on one another inside it (an LSTM whose layers are
             * split hands each step on), which the first two miss; and
             * the op's critical path over its ranks (sb_prof_own_s) */
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
                if (corecomm != MPI_COMM_NULL)
                    MPI_Allreduce(MPI_IN_PLACE, corev, nops, MPI_DOUBLE, MPI_SUM, corecomm);
                MPI_Allreduce(MPI_IN_PLACE, corev, nops, MPI_DOUBLE, MPI_MAX, comm);
                for (int i = 0; i < nops; i++)
                    recvv[i] = sb_prof_core_s(recvv[i], corev[i]);
            }
            MPI_Allreduce(sendv + nops, recvv + nops, 3 * nops, MPI_DOUBLE, MPI_MIN, comm);
            const double *ph = sb_executor_op_phase_times(ex);
            for (int i = 0; i < 4 * nops; i++)
                phs[i] = isfinite(sendv[nops + i / 4]) && isfinite(ph[i]) ? ph[i] : -INFINITY;
            MPI_Allreduce(phs, phr, 4 * nops, MPI_DOUBLE, MPI_MAX, comm);
            for (int i = 0; i < nops; i++) {
                double *v = cm + ((size_t)i * 3) * (size_t)a.steps;
                const double *q = phr + 4 * i; /* latest entries and exits */
                double span = (q[1] - q[0]) + (q[3] - q[2]);
                v[si] = recvv[i];
                v[a.steps + si] = sb_prof_own_s(recvv[nops + i], recvv[3 * nops + i], recvv[i],
                                                span, recvv[2 * nops + i]);
                v[2 * a.steps + si] = isfinite(recvv[2 * nops + i]) ? recvv[2 * nops + i] : 0.0;
            }
        }
        sb_executor_free(ex);
        if (rank == 0) {
            sm[k].step_s = sb_median(steps, a.steps);
            for (int i = 0; i < nops; i++) {
                const sb_op *op = &m.ops[i];
                const int *c = pb.cfg[i].c + (size_t)choice[i] * (size_t)op->ndims;
                double *v = cm + ((size_t)i * 3) * (size_t)a.steps;
                double comp = sb_median(v, a.steps), coll = sb_median(v + a.steps, a.steps),
                       relay = sb_median(v + 2 * a.steps, a.steps);
                sb_prof_op key = {0};
                snprintf(key.kind, sizeof key.kind, "%s", sb_op_kind_name(op->kind));
                sb_prof_shape(op, c, key.shape, sizeof key.shape);
                sb_prof_config(op, c, key.config, sizeof key.config);
                sb_prof_sig(&m, op, key.sig, sizeof key.sig);
                key.ref_cost = pb.cfg[i].cost[choice[i]];
                key.ref_compute = sb_op_cost(&m, op, c, &ref_free);
                acc_op *ao = acc_get(&acc, &key);
                if (!ao) {
                    fprintf(stderr, "shardbench: profile: out of memory\n");
                    MPI_Abort(comm, 1);
                }
                ao->sum_compute += comp;
                ao->sum_coll += coll;
                ao->e.samples++;
                sm[k].ops_s += comp + coll;
                ry[nrows] = relay;
                sm[k].relay_s += relay;
                for (int j = 0; j < NF; j++)
                    rx[nrows * NF + j] = 0.0;
                nrows++;
            }
            /* each edge's relayouts: half booked to its consumer (forward),
             * half to its producer (the gradient) */
            int row0 = nrows - nops;
            for (int e = 0; e < pb.nedges; e++) {
                double f[SB_PROF_EDGE_FEATURES];
                sb_prof_edge_features(&pb, e, choice, f);
                for (int j = 0; j < NF; j++) {
                    rx[(row0 + pb.edges[e].dst) * NF + j] += 0.5 * f[j];
                    rx[(row0 + pb.edges[e].src) * NF + j] += 0.5 * f[j];
                    sm[k].feat[j] += f[j];
                }
            }
        }
        if (tty)
            fprintf(stderr, "\rprofile: strategy %d/%d (%.0f s)", k + 1, K, MPI_Wtime() - t_start);
    }
    if (tty)
        fprintf(stderr, "\r%60s\r", "");
    sb_profile pf = {0};
    if (!status) {
        double upd = time_update(be), updmax;
        MPI_Allreduce(&upd, &updmax, 1, MPI_DOUBLE, MPI_MAX, comm);
        pf.update_s_per_elem = updmax;
        int crc = a.no_coll ? 0 : measure_colls(be, comm, &pf, &err);
        status = agree_rc(comm, rank, crc, &err);
    }
    if (!status && rank == 0) {
        snprintf(pf.backend, sizeof pf.backend, "%s", be->name);
        snprintf(pf.machine, sizeof pf.machine, "%s", a.machine);
        snprintf(pf.precision, sizeof pf.precision, "fp32");
        pf.ranks = P;
        double beta[SB_PROF_EDGE_FEATURES] = {0};
        sb_fit_nonneg(rx, ry, nrows, NF, beta);
        pf.relay_edge_s = beta[0]; /* part of the fixed part below, printed */
        pf.relay_msg_s = beta[1];
        pf.relay_word_s = beta[2];
        pf.relay_local_s = beta[3];
        pf.nops = acc.n;
        pf.ops = calloc((size_t)(acc.n ? acc.n : 1), sizeof *pf.ops);
        if (!pf.ops) {
            fprintf(stderr, "shardbench: profile: out of memory\n");
            MPI_Abort(comm, 1);
        }
        for (int i = 0; i < acc.n; i++) {
            pf.ops[i] = acc.v[i].e;
            pf.ops[i].compute_s = acc.v[i].sum_compute / acc.v[i].e.samples;
            pf.ops[i].coll_s = acc.v[i].sum_coll / acc.v[i].e.samples;
        }
        /* the fixed part: each strategy's step less its ops (as averaged),
         * relayouts and update; the median over the strategies */
        double *res = calloc((size_t)K, sizeof *res), *sx = calloc((size_t)K, sizeof *sx);
        if (!res || !sx) {
            fprintf(stderr, "shardbench: profile: out of memory\n");
            MPI_Abort(comm, 1);
        }
        for (int k = 0; k < K; k++) {
            double wel = 0.0;
            for (int i = 0; i < nops; i++) {
                int cidx = choices[(size_t)k * nops + i];
                wel += sb_prof_weight_elems(&m, &m.ops[i],
                                            pb.cfg[i].c + (size_t)cidx * (size_t)m.ops[i].ndims);
            }
            /* what the relayouts leave: the step less its ops and update */
            res[k] = sm[k].step_s - sm[k].ops_s - wel * pf.update_s_per_elem;
            sx[k] = relay_fit(&pf, sm[k].feat); /* its fitted relayouts */
        }
        /* the per-op relayouts are the least waiting rank's; the steps
         * pay those on their critical path (sb_prof_relay_scale) */
        double g = sb_prof_relay_scale(res, sx, K);
        pf.relay_scale = g;
        pf.relay_msg_s *= g;
        pf.relay_word_s *= g;
        pf.relay_local_s *= g;
        /* less the fitted relayouts, not the measured ones: what a
         * prediction adds back (sb_edge_cost) is the fit, and the
         * relayouts' constant part (a per-edge cost) belongs here, the
         * same for every strategy */
        for (int k = 0; k < K; k++) {
            res[k] -= relay_fit(&pf, sm[k].feat);
            sm[k].resid_s = res[k];
        }
        pf.fixed_s = sb_median(res, K);
        free(sx);
        pf.seed = a.seed;
        for (int k = 0; k < K; k++)
            pf.total_s += sm[k].step_s;
        /* the machine's speed during this launch: a prediction from its
         * figures can be scaled to a trial's own probe (results/query.c) */
        pf.probe_s = sb_median(probes, K * a.steps);
        free(res);
        char params[512];
        sb_params_str(&m, params, sizeof params);
        char cmdline[2048] = "";
        size_t cl = 0;
        for (int i = 0; i < argc && cl < sizeof cmdline - 1; i++) {
            int w = snprintf(cmdline + cl, sizeof cmdline - cl, "%s%s", i ? " " : "", argv[i]);
            if (w < 0)
                break;
            cl += (size_t)w;
        }
        sb_db *db = NULL;
        sb_dbq *q = NULL;
        int64_t pid = 0;
        if (sb_db_open(a.db, 0, &db, &err) || (sb_db_close(db), 0)
            || sb_dbq_open(a.db, 1, 0, &q, &err)
            || sb_dbq_record_profile(q, &pf, m.name, params, K, a.steps, cmdline, &pid, &err)) {
            status = cli_fail(&err);
        } else if (!a.quiet) {
            printf("profile %lld: %s on %d ranks, machine %s, backend %s: %d strategies x %d "
                   "steps, %d op configs, in %.1f s\n", (long long)pid, m.name, P, a.machine,
                   be->name, K, a.steps, acc.n, MPI_Wtime() - t_start);
            if (shared)
                printf("shared cores: up to %d ranks a core: each op priced at no less than the "
                       "CPU seconds of its ranks on its busiest core\n", per_core);
            printf("%-14s %12s  %s\n", "fit", "value", "meaning");
            printf("%-14s %12.4g  s per relayout that moves data\n", "relay_msg_s",
                   pf.relay_msg_s);
            printf("%-14s %12.4g  s per word a relayout moves\n", "relay_word_s", pf.relay_word_s);
            printf("%-14s %12.4g  s per word of the local shards a relayout copies\n",
                   "relay_local_s", pf.relay_local_s);
            printf("%-14s %12.4g  s per edge (in fixed_s)\n", "relay_edge_s", pf.relay_edge_s);
            printf("%-14s %12.4g  the relayout fits' scale to the steps (in the three above)\n",
                   "relay_scale", pf.relay_scale);
            printf("%-14s %12.4g  s per step outside the ops (median over strategies)\n",
                   "fixed_s", pf.fixed_s);
            printf("%-14s %12.4g  s per weight element (SGD update)\n", "update_s",
                   pf.update_s_per_elem);
            printf("%-14s %12.4g  s of the probe's fixed work beside each step (median)\n",
                   "probe_s", pf.probe_s);
            /* how well the fits explain each strategy profiled: what is
             * left beyond the median is what a prediction gets wrong */
            printf("%-24s %10s %10s %10s %10s %10s\n", "strategy", "step s", "ops s",
                   "relay s", "relay fit", "rest s");
            for (int k = 0; k < K; k++) {
                char name[32];
                if (k >= Kseeded) {
                    const char *f = a.strategy[k - Kseeded], *sl = strrchr(f, '/');
                    snprintf(name, sizeof name, "%.24s", sl ? sl + 1 : f);
                }
                else if (have_dp && k == 0)
                    snprintf(name, sizeof name, "dp");
                else
                    snprintf(name, sizeof name, "seeded %d", k);
                printf("%-24s %10.5f %10.5f %10.5f %10.5f %10.5f\n", name, sm[k].step_s, sm[k].ops_s,
                       sm[k].relay_s,
                       relay_fit(&pf, sm[k].feat),
                       sm[k].resid_s);
            }
            for (int i = 0; i < pf.ncoll; i++)
                printf("%-14s %12.4g  s + %.4g s/byte over %d ranks\n",
                       sb_pcoll_name(pf.coll[i].kind), pf.coll[i].alpha_s,
                       pf.coll[i].beta_s_per_byte, pf.coll[i].group);
            char qdb[4200], qm[600];
            sb_shell_quote(a.db, qdb, sizeof qdb); /* pasted into a shell */
            sb_shell_quote(a.machine, qm, sizeof qm);
            printf("stored in %s (search --machine %s with -p %d uses it)\n", qdb, qm, P);
        }
        sb_dbq_close(q);
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, comm);
    for (int i = 0; i < nops; i++)
        free(perm[i]);
    free(perm);
    free(dpc);
    free(choices);
    free(cm);
    free(sendv);
    free(recvv);
    free(corev);
    if (corecomm != MPI_COMM_NULL)
        MPI_Comm_free(&corecomm);
    free(probes);
    free(phs);
    free(phr);
    free(sm);
    free(rx);
    free(ry);
    free(acc.v);
    sb_profile_free(&pf);
    sb_problem_free(&pb);
    sb_model_free(&m);
    sb_backend_finalize(be); /* NCCL communicators, before MPI_Finalize */
    MPI_Finalize();
    return status;
}
