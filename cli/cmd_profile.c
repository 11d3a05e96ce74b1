/* cmd_profile.c: `mpirun -np P shardbench profile -m MODEL`: the options,
 * then the measuring and fitting of the predictive cost model's figures
 * (sb_profile_measure, shardbench/profile_run.h: measure/profile_run.c and
 * profile_fit.c; what is measured and how: docs/cost-measured.md), then
 * rank 0 stores them in the results database under (backend, machine, P)
 * and prints the fits and how well they explain each strategy. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "algos.h"
#include "cli.h"
#include "probe.h"
#include "threads.h"
#include "shardbench/profile_run.h"
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

/* The failure every rank agreed on (sb_profile_agree): rank 0 prints it;
 * the exit status. */
static int agreed_fail(int rank, const sb_error *err)
{
    if (rank == 0)
        return cli_fail(err);
    return err->code ? err->code : SB_EXIT_INTERNAL;
}

/* The command line as the database keeps it. */
static void join_args(int argc, char **argv, char *buf, size_t n)
{
    size_t cl = 0;
    buf[0] = '\0';
    for (int i = 0; i < argc && cl < n - 1; i++) {
        int w = snprintf(buf + cl, n - cl, "%s%s", i ? " " : "", argv[i]);
        if (w < 0)
            break;
        cl += (size_t)w;
    }
}

/* Rank 0: the fits, and how well they explain each strategy profiled:
 * what is left beyond the median is what a prediction gets wrong. */
static void print_profile(const prof_args *a, const sb_profile *pf, const sb_profile_launch *l,
                          int64_t pid, const char *model, int per_core, double secs)
{
    printf("profile %lld: %s on %d ranks, machine %s, backend %s: %d strategies x %d "
           "steps, %d op configs, in %.1f s\n", (long long)pid, model, pf->ranks, a->machine,
           pf->backend, l->K, a->steps, pf->nops, secs);
    if (l->shared)
        printf("shared cores: up to %d ranks a core: each op priced at no less than the "
               "CPU seconds of its ranks on its busiest core\n", per_core);
    printf("%-14s %12s  %s\n", "fit", "value", "meaning");
    printf("%-14s %12.4g  s per relayout that moves data\n", "relay_msg_s", pf->relay_msg_s);
    printf("%-14s %12.4g  s per word a relayout moves\n", "relay_word_s", pf->relay_word_s);
    printf("%-14s %12.4g  s per word of the local shards a relayout copies\n",
           "relay_local_s", pf->relay_local_s);
    printf("%-14s %12.4g  s per edge (in fixed_s)\n", "relay_edge_s", pf->relay_edge_s);
    printf("%-14s %12.4g  the relayout fits' scale to the steps (in the three above)\n",
           "relay_scale", pf->relay_scale);
    printf("%-14s %12.4g  s per step outside the ops (median over strategies)\n",
           "fixed_s", pf->fixed_s);
    printf("%-14s %12.4g  s per weight element (SGD update)\n", "update_s",
           pf->update_s_per_elem);
    printf("%-14s %12.4g  s of the probe's fixed work beside each step (median)\n",
           "probe_s", pf->probe_s);
    printf("%-24s %10s %10s %10s %10s %10s\n", "strategy", "step s", "ops s",
           "relay s", "relay fit", "rest s");
    for (int k = 0; k < l->K; k++) {
        const sb_prof_strategy *sm = &l->s.strat[k];
        char name[32];
        if (k >= l->kseeded) {
            const char *f = a->strategy[k - l->kseeded], *sl = strrchr(f, '/');
            snprintf(name, sizeof name, "%.24s", sl ? sl + 1 : f);
        }
        else if (l->have_dp && k == 0)
            snprintf(name, sizeof name, "dp");
        else
            snprintf(name, sizeof name, "seeded %d", k);
        printf("%-24s %10.5f %10.5f %10.5f %10.5f %10.5f\n", name, sm->step_s, sm->ops_s,
               sm->relay_s, sm->relay_fit_s, sm->rest_s);
    }
    for (int i = 0; i < pf->ncoll; i++)
        printf("%-14s %12.4g  s + %.4g s/byte over %d ranks\n", sb_pcoll_name(pf->coll[i].kind),
               pf->coll[i].alpha_s, pf->coll[i].beta_s_per_byte, pf->coll[i].group);
    char qdb[4200], qm[600];
    sb_shell_quote(a->db, qdb, sizeof qdb); /* pasted into a shell */
    sb_shell_quote(a->machine, qm, sizeof qm);
    printf("stored in %s (search --machine %s with -p %d uses it)\n", qdb, qm, pf->ranks);
}

/* Rank 0: the profile stored (and printed unless --quiet); the exit status. */
static int store(const prof_args *a, int argc, char **argv, const sb_model *m,
                 const sb_profile *pf, const sb_profile_launch *l, int per_core, double t_start)
{
    sb_error err = {0};
    char params[512];
    sb_params_str(m, params, sizeof params);
    char cmdline[2048];
    join_args(argc, argv, cmdline, sizeof cmdline);
    sb_db *db = NULL;
    sb_dbq *q = NULL;
    int64_t pid = 0;
    int status = 0;
    if (sb_db_open(a->db, 0, &db, &err) || (sb_db_close(db), 0)
        || sb_dbq_open(a->db, 1, 0, &q, &err)
        || sb_dbq_record_profile(q, pf, m->name, params, l->K, a->steps, cmdline, &pid, &err))
        status = cli_fail(&err);
    else if (!a->quiet)
        print_profile(a, pf, l, pid, m->name, per_core, MPI_Wtime() - t_start);
    sb_dbq_close(q);
    return status;
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
    sb_cost_params ref; /* the reference costs: the profile's keys (sb_prof_op.ref_cost) */
    sb_cost_params_default(&ref);
    if (!prc && sb_problem_build(&m, P, &ref, &pb, &err))
        prc = -1;
    if (!prc && !(be = sb_backend_get(a.backend, &err)))
        prc = -1;
    if (sb_profile_agree(comm, prc, &err)) {
        status = agreed_fail(rank, &err);
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
    int per_core = cli_core_comm(comm, &corecomm);
    sb_profile_run_opts o = {
        .machine = a.machine, .steps = a.steps, .warmup = a.warmup,
        .max_strategies = a.max_strategies, .seed = a.seed, .strategy = a.strategy,
        .nstrategy = a.nstrategy, .no_coll = a.no_coll,
        .progress = rank == 0 && !a.quiet && isatty(2), .probe = cli_probe_seconds,
        .core = corecomm, .per_core = per_core,
    };
    sb_profile pf;
    sb_profile_launch launch;
    double t_start = MPI_Wtime();
    if (sb_profile_measure(comm, &pb, be, &o, &pf, &launch, &err))
        status = agreed_fail(rank, &err);
    else if (rank == 0)
        status = store(&a, argc, argv, &m, &pf, &launch, per_core, t_start);
    MPI_Bcast(&status, 1, MPI_INT, 0, comm);
    if (corecomm != MPI_COMM_NULL)
        MPI_Comm_free(&corecomm);
    sb_prof_samples_free(&launch.s);
    sb_profile_free(&pf);
    sb_problem_free(&pb);
    sb_model_free(&m);
    sb_backend_finalize(be); /* NCCL communicators, before MPI_Finalize */
    MPI_Finalize();
    return status;
}
