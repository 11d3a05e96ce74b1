/* cmd_run.c: `mpirun -np P shardbench run`: trains a model under a strategy
 * on P ranks (one per device), prints per-step loss and time, the summary,
 * and stores the measurement (rank 0). Every rank reaches the same verdict
 * on bad input, so errors end every rank with the same status, no hang. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "probe.h"
#include "threads.h"
#include "shardbench/precision.h"
#include "shardbench/dtensor.h"
#include "shardbench/memory.h"
#include "shardbench/results.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"
#ifdef SB_HAVE_CUDA
#include "../runtime/cuda/cuda_backend.h"
#endif

/* --strategy given more than once: trained one after another in this one
 * launch (bench's trial rounds: one launch a round, not one a strategy) */
#define RUN_MAX_STRATEGIES 64

typedef struct {
    const char *model, *strategy, *db, *format, *backend;
    const char *strategies[RUN_MAX_STRATEGIES]; /* every --strategy, in order */
    int nstrategies;
    const char *precision, *comm;     /* cuda backend: --precision, --comm */
    const char *checkpoint, *restore; /* checkpoint folders */
    int restore_partial;              /* --restore-partial */
    const char *data;                 /* record file (--data), or NULL */
    unsigned long long data_seed;
    sb_setting set[64];
    int nset, steps, warmup;
    int keep_binding; /* --keep-binding */
    int adopt_db;     /* --adopt-db */
    int save_every, keep;
    double lr;
    int lr_given;
    sb_optimizer optimizer;           /* --optimizer sgd|adam */
    int zero;                         /* --zero 0..3 */
    int zero_given;
    int stages, microbatches;         /* --stages, --microbatches (0: not given) */
    const char *schedule;             /* --schedule gpipe|1f1b, or NULL */
    const char *recompute;            /* --recompute none|all|OP,... (NULL: the file's lines) */
    double beta1, beta2, eps;         /* Adam's */
    unsigned long long seed;
} run_args;

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P shardbench run -m MODEL --strategy FILE|dp|best [options]\n"
            "\n"
            "Trains MODEL on P MPI ranks (one per device) under a strategy: real steps\n"
            "(forward, softmax cross-entropy, backward, SGD), timed after warm-up.\n"
            "\n"
            "  -m, --model MODEL      shipped model name or model file\n"
            "      --set NAME=VALUE   override a model parameter (repeatable)\n"
            "  -s, --strategy S       a strategy file (from search --save), 'dp' (data\n"
            "                         parallel) or 'best' (PaSE search in-process); given\n"
            "                         more than once, each is trained in turn in this one\n"
            "                         launch, with a report (a JSON line) each; the first\n"
            "                         failure ends the launch\n"
            "      --steps N          timed steps (default 5)\n"
            "      --warmup W         untimed steps first (default 1)\n"
            "      --backend B        cpu (default) or cuda\n"
            "      --gemm-precision P fp32 (default); tf32 or bf16 (GEMM operands rounded,\n"
            "                         fp32 accumulation, fp32 tensors): cuda backend only\n"
            "      --precision P      the training recipe, as search's: the runtime trains\n"
            "                         fp32 tensors, so only fp32 (the mixed recipes bf16,\n"
            "                         fp16, fp8 are priced by search, not run here)\n"
            "      --comm C           cuda backend: auto (default: NCCL when every rank has\n"
            "                         its own GPU), nccl, or mpi (host-staged; ranks may\n"
            "                         share a GPU)\n"
            "      --optimizer sgd|adam  the update (default sgd; adam keeps two fp32 moments\n"
            "                         per weight, as `search --optimizer adam` counts them)\n"
            "      --zero 0|1|2|3     ZeRO over each weight's data-parallel replicas (default\n"
            "                         0, or the strategy file's): 1 shards the optimizer\n"
            "                         state, 2 also the gradients, 3 also the weights\n"
            "                         (gathered around each op's use)\n"
            "      --stages S         pipeline: the ops cut into S stages of equal op counts,\n"
            "                         each on P/S consecutive ranks (dp and best choose each\n"
            "                         op's config for P/S devices; a strategy file holds its\n"
            "                         own stages)\n"
            "      --microbatches M   the batch cut into M micro-batches, gradients summed\n"
            "                         over them, one update per step (default 1)\n"
            "      --schedule gpipe|1f1b  pipeline schedule (default gpipe; 1f1b keeps fewer\n"
            "                         micro-batches' activations)\n"
            "      --recompute R      none, all, or OP,OP,...: those ops' activations are\n"
            "                         dropped after the forward and computed again before\n"
            "                         the backward (default: a strategy file's recompute\n"
            "                         lines, else none); with --stages, in the backward of\n"
            "                         the same micro-batch, from the inputs the stage kept\n"
            "      --lr X             learning rate (default 0.01 for sgd, 0.001 for adam;\n"
            "                         1e-37 to 3e38); a loss that becomes NaN or infinite\n"
            "                         stops the run: recorded as diverged, exit status 1\n"
            "      --beta1 B, --beta2 B  Adam's moment decays (default 0.9, 0.999; in [0, 1))\n"
            "      --eps E            Adam's epsilon (default 1e-8; 1e-30 to 1)\n"
            "      --seed N           weights, inputs and labels (default 1)\n"
            "      --data FILE        train on a record file (runtime/README.md) instead of\n"
            "                         synthetic inputs and labels\n"
            "      --data-seed N      shuffle of the record file per epoch (default 1; 0: in order)\n"
            "      --format table|json  rank 0's report (default table)\n"
            "      --checkpoint DIR   save sharded checkpoints to DIR/step-NNNNNN/\n"
            "      --save-every N     every N steps (default 0: after the last step)\n"
            "      --keep K           keep the last K checkpoints (default 0: all)\n"
            "      --restore DIR      start from a checkpoint (DIR: a checkpoint folder or\n"
            "                         prefix, or a --checkpoint DIR: its newest one)\n"
            "      --restore-partial  restore only the weights the checkpoint and the model\n"
            "                         both hold with the same shape, and say what was\n"
            "                         skipped (default: refuse a checkpoint that differs)\n"
            "      --db FILE          results database (default %s; 'none' to skip)\n"
            "      --adopt-db         record into an SQLite file that holds another\n"
            "                         program's tables (refused otherwise)\n"
            "      --keep-binding     keep the launcher's default binding (else a rank it\n"
            "                         bound to fewer cores than the rank's share of the\n"
            "                         node's cores widens its affinity to that share)\n",
            SB_DB_DEFAULT_PATH);
}

/* run's training options (--optimizer, --beta1/2, --eps, --recompute,
 * --zero, --stages, --microbatches, --schedule, --save-every, --keep) into
 * *a: 0, or -1 with err naming the value. */
static int parse_train_opt(int c, const char *arg, run_args *a, sb_error *err)
{
    switch (c) {
    case 1001:
        if (sb_optimizer_parse(arg, &a->optimizer, err))
            return -1;
        break;
    case 1002:
    case 1003:
    case 1004: {
        double v = 0;
        const char *vend = "";
        int ok = !sb_parse_number(arg, &v, &vend) && !*vend
                 && (c == 1004 ? v >= 1e-30 && v <= 1.0 : v >= 0.0 && v < 1.0);
        const char *nm = c == 1002 ? "beta1" : c == 1003 ? "beta2" : "eps";
        if (!ok)
            return sb_fail(err, SB_EXIT_INPUT, "--%s: '%s' is not a number %s", nm, arg,
                           c == 1004 ? "from 1e-30 to 1" : "in [0, 1)");
        *(c == 1002 ? &a->beta1 : c == 1003 ? &a->beta2 : &a->eps) = v;
        break;
    }
    case 1009: a->recompute = arg; break;
    case 1005: {
        uint64_t v = 0;
        if (sb_parse_count(arg, 3, &v) || (int64_t)v < 0)
            return sb_fail(err, SB_EXIT_INPUT, "--zero: '%s' is not a ZeRO stage 0, 1, 2 or 3",
                           arg);
        a->zero = (int)v;
        a->zero_given = 1;
        break;
    }
    case 1006:
    case 1007: {
        uint64_t v = 0;
        if (sb_parse_count(arg, c == 1006 ? SB_MAX_STAGES : 1000000, &v) || (int64_t)v < 1)
            return sb_fail(err, SB_EXIT_INPUT, "--%s: '%s' is not a count from 1 to %d",
                           c == 1006 ? "stages" : "microbatches", arg,
                           c == 1006 ? SB_MAX_STAGES : 1000000);
        *(c == 1006 ? &a->stages : &a->microbatches) = (int)v;
        break;
    }
    case 1008: {
        sb_schedule sc;
        if (sb_schedule_parse(arg, &sc))
            return sb_fail(err, SB_EXIT_INPUT, "--schedule: '%s' is not gpipe or 1f1b", arg);
        a->schedule = arg;
        break;
    }
    case 'E':
    case 'K': {
        uint64_t v = 0;
        if (sb_parse_count(arg, 1000000, &v) || (int64_t)v < 0)
            return sb_fail(err, SB_EXIT_INPUT, "--%s: '%s' is not a count",
                           c == 'E' ? "save-every" : "keep", arg);
        if (c == 'E')
            a->save_every = (int)v;
        else
            a->keep = (int)v;
        break;
    }
    }
    return 0;
}

/* run's options checked together once all are read, the cuda backend's
 * told through its environment: 0, or -1 with err. */
static int check_run_args(run_args *a, sb_error *err)
{
    if (!a->model || !a->strategy)
        return sb_fail(err, SB_EXIT_INPUT, "run: -m MODEL and --strategy are required");
    if (a->nstrategies > 1 && (a->checkpoint || a->restore))
        return sb_fail(err, SB_EXIT_INPUT,
                       "--checkpoint and --restore take one --strategy (%d given)",
                       a->nstrategies);
    if (a->steps < 1)
        return sb_fail(err, SB_EXIT_INPUT, "--steps must be at least 1");
    if ((a->save_every || a->keep) && !a->checkpoint)
        return sb_fail(err, SB_EXIT_INPUT, "--save-every and --keep need --checkpoint DIR");
    if (a->restore_partial && !a->restore)
        return sb_fail(err, SB_EXIT_INPUT, "--restore-partial needs --restore DIR");
    if (a->optimizer == SB_OPTIM_ADAM && !a->lr_given)
        a->lr = 0.001;
    if (strcmp(a->backend, "cuda")) {
        if (a->precision && strcmp(a->precision, "fp32"))
            return sb_fail(err, SB_EXIT_INPUT,
                           "--gemm-precision %s: the %s backend computes in fp32 only (tf32 and "
                           "bf16 are the cuda backend's)", a->precision, a->backend);
        if (a->comm)
            return sb_fail(err, SB_EXIT_INPUT,
                           "--comm %s: only the cuda backend has a choice of communication "
                           "(the %s backend uses MPI)", a->comm, a->backend);
    } else {
        /* read once, when the cuda backend starts (runtime/cuda/backend_cuda.cu);
         * the options win over the environment */
        if (a->precision)
            setenv("SHARDBENCH_PRECISION", a->precision, 1);
        if (a->comm)
            setenv("SHARDBENCH_COMM", a->comm, 1);
    }
    if (!a->precision) {
        const char *env = strcmp(a->backend, "cuda") ? NULL : getenv("SHARDBENCH_PRECISION");
        a->precision = env && *env ? env : "fp32";
    }
    return 0;
}

static int parse_run_args(int argc, char **argv, run_args *a, sb_error *err)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},    {"set", required_argument, 0, 'S'},
        {"strategy", required_argument, 0, 's'}, {"steps", required_argument, 0, 'n'},
        {"warmup", required_argument, 0, 'w'},   {"db", required_argument, 0, 'd'},
        {"format", required_argument, 0, 'f'},   {"backend", required_argument, 0, 'b'},
        {"lr", required_argument, 0, 'l'},       {"seed", required_argument, 0, 'r'},
        {"checkpoint", required_argument, 0, 'C'}, {"save-every", required_argument, 0, 'E'},
        {"keep", required_argument, 0, 'K'},     {"restore", required_argument, 0, 'R'},
        {"data", required_argument, 0, 'D'},     {"data-seed", required_argument, 0, 'Q'},
        {"precision", required_argument, 0, 'P'}, {"gemm-precision", required_argument, 0, 'g'}, {"comm", required_argument, 0, 'G'},
        {"keep-binding", no_argument, 0, 'k'},  {"adopt-db", no_argument, 0, 'A'},
        {"restore-partial", no_argument, 0, 1000}, {"optimizer", required_argument, 0, 1001},
        {"beta1", required_argument, 0, 1002},   {"beta2", required_argument, 0, 1003},
        {"eps", required_argument, 0, 1004},     {"zero", required_argument, 0, 1005},
        {"stages", required_argument, 0, 1006},  {"microbatches", required_argument, 0, 1007},
        {"schedule", required_argument, 0, 1008},
        {"recompute", required_argument, 0, 1009},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
    };
    memset(a, 0, sizeof *a);
    a->db = SB_DB_DEFAULT_PATH;
    a->format = "table";
    a->backend = "cpu";
    a->steps = 5;
    a->warmup = 1;
    a->lr = 0.01;
    a->beta1 = 0.9;
    a->beta2 = 0.999;
    a->eps = 1e-8;
    a->seed = 1;
    a->data_seed = 1;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "m:s:h", opts, NULL)) != -1) {
        const char *cend = "";
        uint64_t u64 = 0;
        switch (c) {
        case 'm': a->model = optarg; break;
        case 's':
            if (a->nstrategies == RUN_MAX_STRATEGIES)
                return sb_fail(err, SB_EXIT_INPUT, "more than %d --strategy options",
                               RUN_MAX_STRATEGIES);
            a->strategies[a->nstrategies++] = optarg;
            a->strategy = a->strategies[0];
            break;
        case 'S':
            if (a->nset == 64)
                return sb_fail(err, SB_EXIT_INPUT, "too many --set options");
            if (sb_setting_parse(optarg, &a->set[a->nset++], err))
                return -1;
            break;
        case 'n':
        case 'w': {
            uint64_t v = 0;
            if (sb_parse_count(optarg, 1000000, &v) || (int64_t)v < 0)
                return sb_fail(err, SB_EXIT_INPUT, "--%s: '%s' is not a count",
                               c == 'n' ? "steps" : "warmup", optarg);
            if (c == 'n')
                a->steps = (int)v;
            else
                a->warmup = (int)v;
            break;
        }
        case 'C': a->checkpoint = optarg; break;
        case 'R': a->restore = optarg; break;
        case 1000: a->restore_partial = 1; break;
        case 1001: case 1002: case 1003: case 1004: case 1005: case 1006: case 1007:
        case 1008: case 1009: case 'E': case 'K':
            if (parse_train_opt(c, optarg, a, err))
                return -1;
            break;
        case 'd': a->db = optarg; break;
        case 'f':
            if (strcmp(optarg, "table") && strcmp(optarg, "json"))
                return sb_fail(err, SB_EXIT_INPUT, "--format: '%s' is not table or json", optarg);
            a->format = optarg;
            break;
        case 'b': a->backend = optarg; break;
        case 'g': /* --gemm-precision: the cuda backend's GEMM operands */
            if (strcmp(optarg, "fp32") && strcmp(optarg, "tf32") && strcmp(optarg, "bf16"))
                return sb_fail(err, SB_EXIT_INPUT,
                               "--gemm-precision: '%s' is not fp32, tf32 or bf16", optarg);
            a->precision = optarg;
            break;
        case 'P': { /* --precision: the recipe (search's meaning); the runtime trains fp32 */
            int prec;
            if (sb_precision_parse(optarg, "--precision", &prec, err))
                return -1;
            if (prec != SB_PREC_FP32)
                return sb_fail(err, SB_EXIT_INPUT,
                               "--precision %s: run trains fp32 tensors (fp32 only); rounding the "
                               "GEMM operands is --gemm-precision tf32|bf16 (cuda backend)",
                               optarg);
            break;
        }
        case 'G':
            if (strcmp(optarg, "auto") && strcmp(optarg, "nccl") && strcmp(optarg, "mpi"))
                return sb_fail(err, SB_EXIT_INPUT, "--comm: '%s' is not auto, nccl or mpi", optarg);
            a->comm = optarg;
            break;
        case 'l':
            /* the executor takes a float: in range, so never inf or 0 there */
            if (sb_parse_number(optarg, &a->lr, &cend) || *cend || !(a->lr >= 1e-37)
                || a->lr > 3e38)
                return sb_fail(err, SB_EXIT_INPUT,
                               "--lr: '%s' is not a number from 1e-37 to 3e38 (a float)", optarg);
            a->lr_given = 1;
            break;
        case 'r':
            if (sb_parse_count(optarg, UINT64_MAX, &u64))
                return sb_fail(err, SB_EXIT_INPUT, "--seed: '%s' is not a number", optarg);
            a->seed = u64;
            break;
        case 'D': a->data = optarg; break;
        case 'Q':
            if (sb_parse_count(optarg, UINT64_MAX, &u64))
                return sb_fail(err, SB_EXIT_INPUT, "--data-seed: '%s' is not a number", optarg);
            a->data_seed = u64;
            break;
        case 'k': a->keep_binding = 1; break;
        case 'A': a->adopt_db = 1; break;
        case 'h': return 1;
        default:
            return sb_fail(err, SB_EXIT_INPUT, "run: unknown or incomplete option '%s'",
                           argv[optind - 1]);
        }
    }
    if (optind < argc)
        return sb_fail(err, SB_EXIT_INPUT, "run: unexpected argument '%s'", argv[optind]);
    return check_run_args(a, err);
}

/* The options every rank must share, one a line (the model and its --set
 * values are compared as the loaded model, the strategy as configs, by the
 * runtime: sb_agree_model, sb_agree_plan). Ranks started with different
 * arguments would otherwise run different numbers of steps or collectives. */
static void run_options_text(const run_args *a, char *buf, size_t cap)
{
    const char *comm = a->comm ? a->comm : getenv("SHARDBENCH_COMM");
    size_t u = 0;
    for (int k = 1; k < a->nstrategies && u < cap; k++) /* the first: in the line below */
        u += (size_t)snprintf(buf + u, cap - u, "strategy %d=%s\n", k + 1, a->strategies[k]);
    if (u >= cap)
        u = cap - 1;
    buf += u, cap -= u;
    snprintf(buf, cap,
             "strategy=%s\nsteps=%d\nwarmup=%d\nbackend=%s\nprecision=%s\ncomm=%s\nlr=%.17g\n"
             "optimizer=%s beta1=%.17g beta2=%.17g eps=%.17g zero=%d recompute=%s\n"
             "seed=%llu\ndata=%s\ndata-seed=%llu\nformat=%s\ncheckpoint=%s\nsave-every=%d\n"
             "keep=%d\nrestore=%s\nrestore-partial=%d\ndb=%s\nkeep-binding=%d\n"
             "stages=%d microbatches=%d schedule=%s\n",
             a->strategy, a->steps, a->warmup, a->backend, a->precision,
             strcmp(a->backend, "cuda") ? "mpi" : comm && *comm ? comm : "auto", a->lr,
             sb_optimizer_name(a->optimizer), a->beta1, a->beta2, a->eps, a->zero,
             a->recompute ? a->recompute : "(file)", a->seed,
             a->data ? a->data : "none", a->data_seed, a->format,
             a->checkpoint ? a->checkpoint : "none", a->save_every, a->keep,
             a->restore ? a->restore : "none", a->restore_partial, a->db, a->keep_binding,
             a->stages, a->microbatches, a->schedule ? a->schedule : "none");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rank 0's `--format json` report: one line, every string escaped
 * (jansson); a number that is not finite (a diverged loss) is null. */
static void print_run_json(const sb_model *m, int size, const char *backend, const char *strategy,
                           const sb_pipeline *pl, int zero, const double *losses, int total,
                           int warmup, double med, double lo, double hi, double samples_per_s,
                           const long long *peaks, const double *maxs, double probe)
{
    json_t *jl = json_array(), *jp = json_array(), *jo = json_array();
    for (int s = 0; s < total; s++)
        json_array_append_new(jl, cli_jreal(losses[s]));
    for (int r = 0; r < size; r++)
        json_array_append_new(jp, json_integer(peaks[r]));
    for (int i = 0; i < m->nops; i++)
        json_array_append_new(jo, json_pack("{s:s, s:s, s:o, s:o, s:o}", "name", m->ops[i].name,
                                            "type", sb_op_kind_name(m->ops[i].kind),
                                            "compute_seconds", cli_jreal(maxs[3 * i]),
                                            "comm_seconds", cli_jreal(maxs[3 * i + 1]),
                                            "other_seconds", cli_jreal(maxs[3 * i + 2])));
    json_t *j = json_pack("{s:s, s:i, s:s, s:s, s:o, s:i, s:{s:o, s:o, s:o}, s:o, s:o, s:o}",
                          "model", m->name, "p", size, "backend", backend, "strategy", strategy,
                          "losses", jl, "warmup", warmup, "step_seconds", "median", cli_jreal(med),
                          "min", cli_jreal(lo), "max", cli_jreal(hi), "samples_per_second",
                          cli_jreal(samples_per_s), "peak_bytes_per_rank", jp, "ops", jo);
    if (j) {
        json_object_set_new(j, "stages", json_integer(pl->nstages));
        json_object_set_new(j, "microbatches", json_integer(pl->microbatches));
        json_object_set_new(j, "schedule", json_string(sb_schedule_name(pl->schedule)));
        json_object_set_new(j, "zero", json_integer(zero));
    }
    if (j && probe > 0) /* the median probe over the timed steps (probe.c) */
        json_object_set_new(j, "probe_seconds", cli_jreal(probe));
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(j);
}

/* All ranks agree on failure: returns the largest error code of any rank;
 * rank 0 prints the first failing rank's message. */
static int agree(MPI_Comm comm, int rank, int rc, sb_error *err)
{
    int first = 0;
    if (!sb_agree(comm, rc, err, &first))
        return 0;
    if (rank == 0)
        fprintf(stderr, "shardbench: %s%s\n", err->msg, first ? " (reported by another rank)" : "");
    return err->code;
}

/* Saves the executor's weights to DIR/step-NNNNNN/ (rank 0 makes the
 * folder and prunes old ones). Every rank gets the same verdict. */
static int save_checkpoint(sb_executor *ex, const run_args *a, MPI_Comm comm, int rank,
                           sb_error *err)
{
    char prefix[4096] = "";
    int step = sb_executor_steps_done(ex);
    int rc = 0;
    if (rank == 0)
        rc = sb_checkpoint_step_dir(a->checkpoint, step, prefix, sizeof prefix, err);
    if ((rc = agree(comm, rank, rc, err)))
        return rc;
    MPI_Bcast(prefix, (int)sizeof prefix, MPI_CHAR, 0, comm);
    if (sb_checkpoint_save_executor(ex, prefix, err)) {
        if (rank == 0)
            fprintf(stderr, "shardbench: %s\n", err->msg);
        return err->code ? err->code : 1;
    }
    rc = rank == 0 ? sb_checkpoint_prune(a->checkpoint, a->keep, err) : 0;
    if (!rc && rank == 0 && !strcmp(a->format, "table"))
        printf("# checkpoint: step %d saved to %s\n", step, prefix);
    return agree(comm, rank, rc, err);
}

/* Restores the weights and the step counter from --restore. */
static int restore_checkpoint(sb_executor *ex, const run_args *a, MPI_Comm comm, int rank,
                              sb_error *err)
{
    char prefix[4096] = "";
    int rc = rank == 0 ? sb_checkpoint_find(a->restore, prefix, sizeof prefix, err) : 0;
    if ((rc = agree(comm, rank, rc, err)))
        return rc;
    MPI_Bcast(prefix, (int)sizeof prefix, MPI_CHAR, 0, comm);
    char skipped[1024];
    if (sb_checkpoint_restore_executor_ex(ex, prefix, a->restore_partial, skipped, sizeof skipped,
                                          err)) {
        if (rank == 0)
            fprintf(stderr, "shardbench: %s\n", err->msg);
        return err->code ? err->code : 1;
    }
    if (rank == 0 && skipped[0])
        fprintf(stderr, "shardbench: --restore-partial: skipped %s\n", skipped);
    if (rank == 0 && !strcmp(a->format, "table"))
        printf("# restored step %d from %s\n", sb_executor_steps_done(ex), prefix);
    return 0;
}

static int64_t model_param(const sb_model *m, const char *name, int64_t def)
{
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name))
            return m->params[i].value;
    return def;
}

/* Stores the measurement; returns 0, or the exit status of a failure to
 * store it (said on stderr). */
static int record_run(const run_args *a, const sb_problem *pb, const int *choice, const char *kind,
                      const double *times, int nt, double peak, const char *status,
                      const char *message, int argc, char **argv)
{
    if (!strcmp(a->db, "none"))
        return 0;
    sb_error err = {0};
    sb_db *db;
    if (sb_db_open_flags(a->db, 0, a->adopt_db ? SB_DB_ADOPT : 0, &db, &err)) {
        fprintf(stderr, "shardbench: %s (measurement not stored)\n", err.msg);
        return err.code ? err.code : SB_EXIT_INTERNAL;
    }
    char cmd[2048] = "", params[2048], devices[128];
    for (int i = 0; i < argc; i++) {
        strncat(cmd, i ? " " : "", sizeof cmd - strlen(cmd) - 1);
        strncat(cmd, argv[i], sizeof cmd - strlen(cmd) - 1);
    }
    sb_params_str(pb->m, params, sizeof params);
    snprintf(devices, sizeof devices, "%d x %s rank, %s", pb->p, a->backend, a->precision);
    int vmaj = 0, vmin = 0;
    MPI_Get_version(&vmaj, &vmin);
    char versions[128];
    snprintf(versions, sizeof versions, "mpi-standard=%d.%d", vmaj, vmin);
    sb_run_meta meta = {.backend = a->backend, .devices = devices, .versions = versions,
                        .command_line = cmd};
    int64_t run_id;
    sb_result r = {.choice = (int *)choice, .total_cost = sb_strategy_cost(pb, choice)};
    char *json = sb_result_json_str(pb, &r, kind);
    double med = 0, lo = 0, hi = 0;
    if (nt > 0) {
        med = times[nt / 2];
        lo = times[0];
        hi = times[nt - 1];
    }
    sb_measurement_record rec = {
        .model = pb->m->name, .model_path = pb->m->path, .params = params, .nops = pb->m->nops,
        .p = pb->p, .kind = kind, .predicted_cost = r.total_cost, .predicted_mem_bytes = 0,
        .configs_json = json ? json : "{}", .step_median_s = med, .step_min_s = lo,
        .step_max_s = hi, .steps = nt, .status = status, .message = message, .peak_mem_bytes = peak,
    };
    if (sb_db_begin_run(db, &meta, &run_id, &err) == 0) {
        rec.run_id = run_id;
        if (sb_db_record_measurement(db, &rec, NULL, &err) == 0)
            sb_db_end_run(db, run_id, &err);
    }
    if (err.code)
        fprintf(stderr, "shardbench: %s (measurement not stored)\n", err.msg);
    free(json);
    sb_db_close(db);
    return err.code;
}

/* What one `run` holds from start-up to exit. */
typedef struct {
    MPI_Comm comm;
    MPI_Comm world;  /* the launch's communicator; comm is a reordering of it for a strategy
                        whose ranks lie cyclically on the nodes (ranks_cyclic) */
    int rank, size;
    int argc;
    char **argv;
    run_args a;
    sb_model m;
    sb_problem pb;
    int have_model, have_pb;
    int *choice;         /* config index per op */
    sb_pipeline pipe;    /* --stages/--microbatches/--schedule, or the strategy file's */
    sb_strategy sf; /* a strategy file with a pipeline, ZeRO stage or recomputation */
    int have_sf;
    unsigned char *recompute; /* recomputed ops (--recompute, or the file's lines) */
    const char *kind;    /* "file", "dp" or "pase": how the strategy was chosen */
    const sb_backend *be;
    sb_data_source *data;
    sb_executor *ex;
    double *losses, *times; /* per step, warm-up included */
    double *probes;         /* per step: the probe's seconds (probe.c), slowest rank */
    int total, start, json;
    const sb_cpuset *cpus; /* printed after the first strategy's header, then NULL */
} run_ctx;

/* The index of config c among op i's enumerated configs, or 0 (the
 * record's predicted cost only) when the enumeration lacks it. */
static int config_index(const sb_problem *pb, int i, const int *c)
{
    int nd = pb->cfg[i].ndims;
    for (int k = 0; k < pb->cfg[i].n; k++)
        if (!memcmp(pb->cfg[i].c + (size_t)k * (size_t)nd, c, (size_t)nd * sizeof *c))
            return k;
    return 0;
}

/* A strategy whose ranks lie cyclically on nodes of n devices (a strategy
 * file's `ranks cyclic n`, search --ranks): the strategy's rank r runs on
 * node r mod N (N = P / n), slot r / N, where the launcher put ranks in
 * blocks (launch rank q on node q / n, slot q mod n). So the run's
 * communicator becomes the launch's reordered, launch rank q taking rank
 * (q mod n) N + q / n in it; every rank below (the executor's groups,
 * relayouts, checkpoints) is a strategy rank. Returns an exit status. */
static int ranks_cyclic(run_ctx *R, sb_error *err)
{
    int n = R->sf.node_devices, q = R->rank;
    /* the same placement on every rank before any of them splits (a stale
     * copy of the file on one node would leave the others in the split) */
    int mine[4] = {R->sf.node_order, n, -R->sf.node_order, -n}, hi[4]; /* max, and -min */
    MPI_Allreduce(mine, hi, 4, MPI_INT, MPI_MAX, R->comm);
    if (hi[0] != -hi[2] || hi[1] != -hi[3])
        return agree(R->comm, R->rank, sb_fail(err, SB_EXIT_INPUT, "%s: the ranks read different "
                                               "'ranks' lines (nodes of %d to %d devices)",
                                               R->a.strategy, -hi[3], hi[1]), err);
    if (n < 1 || R->size <= n || R->size % n)
        return agree(R->comm, R->rank, sb_fail(err, SB_EXIT_INPUT, "%s: 'ranks cyclic %d' needs "
                                               "P a multiple of %d with more than one node, "
                                               "not P = %d", R->a.strategy, n, n, R->size), err);
    int key = (q % n) * (R->size / n) + q / n;
    MPI_Comm c;
    if (MPI_Comm_split(R->comm, 0, key, &c) != MPI_SUCCESS)
        return agree(R->comm, R->rank, sb_fail(err, SB_EXIT_INTERNAL, "MPI_Comm_split failed"),
                     err);
    R->comm = c;
    MPI_Comm_rank(R->comm, &R->rank);
    /* where each strategy rank runs, said once; and whether the launch's
     * nodes hold the file's n ranks (the placement assumes a launcher that
     * fills each node in turn with n ranks) */
    MPI_Comm local;
    int on_node = 0;
    if (MPI_Comm_split_type(R->world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local)
        == MPI_SUCCESS) {
        MPI_Comm_size(local, &on_node);
        MPI_Comm_free(&local);
    }
    int *launch = malloc((size_t)R->size * sizeof *launch);
    int status = agree(R->comm, R->rank, launch ? 0 : sb_fail(err, SB_EXIT_INTERNAL, "out of "
                                                                "memory"), err);
    if (status) {
        free(launch);
        return status;
    }
    MPI_Gather(&q, 1, MPI_INT, launch, 1, MPI_INT, 0, R->comm);
    if (R->rank == 0) {
        fprintf(stderr, "shardbench run: ranks cyclic on nodes of %d: strategy rank r on launch "
                "rank", n);
        for (int r = 0; r < R->size; r++)
            fprintf(stderr, " %d", launch[r]);
        fputc('\n', stderr);
        if (on_node != n)
            fprintf(stderr, "shardbench run: warning: %d launch ranks share this node, the "
                    "strategy's nodes hold %d: its ranks do not lie on the nodes it was "
                    "priced for\n", on_node, n);
    }
    free(launch);
    return 0;
}

/* A strategy file: a plain one (one config per op on P devices) as before;
 * one with a pipeline, a ZeRO stage or recomputation (version 2) whole,
 * its pipeline and ZeRO stage checked against the command line's. */
static int load_strategy_file(run_ctx *R, const sb_pipeline *cli_pipe, sb_error *err)
{
    run_args *a = &R->a;
    sb_strategy sf;
    if (sb_strategy_load(a->strategy, &R->m, R->size, &sf, err))
        return sb_strategy_load_choice(a->strategy, &R->pb, R->choice, err); /* its message, as before */
    if (sf.precision && R->rank == 0) /* priced for a GPU recipe; the runtime trains fp32 */
        fprintf(stderr, "shardbench run: note: %s was priced in %s; this run trains in fp32 "
                "(--gemm-precision bf16 rounds the GEMMs' operands)\n", a->strategy,
                sb_precision_name(sf.precision));
    int plain = sb_pipeline_is_none(&sf.pipe) && !sf.zero && !sf.node_order;
    for (int i = 0; i < R->m.nops && plain; i++)
        plain = !sf.recompute || !sf.recompute[i];
    if (plain) {
        sb_strategy_free(&sf);
        if (cli_pipe->nstages > 1)
            return sb_fail(err, SB_EXIT_INPUT, "--stages %d: strategy file '%s' holds one config "
                           "per op for %d devices and no stages (search --stages S --save FILE "
                           "writes a pipeline)", cli_pipe->nstages, a->strategy, R->size);
        R->pipe = *cli_pipe;
        return sb_strategy_load_choice(a->strategy, &R->pb, R->choice, err);
    }
    R->sf = sf;
    R->have_sf = 1;
    for (int i = 0; i < R->m.nops; i++) /* the file's recompute lines (--recompute overrides) */
        R->recompute[i] = (unsigned char)(sf.recompute[i] && sb_op_recomputable(&R->m.ops[i]));
    const sb_pipeline *fp = &sf.pipe;
    if (a->stages && a->stages != fp->nstages)
        return sb_fail(err, SB_EXIT_INPUT, "--stages %d: strategy file '%s' has %d", a->stages,
                       a->strategy, fp->nstages);
    if (a->microbatches && a->microbatches != fp->microbatches)
        return sb_fail(err, SB_EXIT_INPUT, "--microbatches %d: strategy file '%s' has %d",
                       a->microbatches, a->strategy, fp->microbatches);
    if (a->schedule && strcmp(a->schedule, sb_schedule_name(fp->schedule)))
        return sb_fail(err, SB_EXIT_INPUT, "--schedule %s: strategy file '%s' has %s", a->schedule,
                       a->strategy, sb_schedule_name(fp->schedule));
    if (a->zero_given && a->zero != sf.zero)
        return sb_fail(err, SB_EXIT_INPUT, "--zero %d: strategy file '%s' has zero %d", a->zero,
                       a->strategy, sf.zero);
    a->zero = sf.zero;
    R->pipe = *fp;
    for (int i = 0; i < R->m.nops; i++)
        R->choice[i] = config_index(&R->pb, i, sf.cfg + (size_t)i * SB_MAX_DIMS);
    return 0;
}

/* The model, its problem on `size` devices (a stage's, with --stages) and
 * the strategy's configs, the same on every rank. Returns an exit status
 * (0: go on). */
static int choose_strategy(run_ctx *R, sb_error *err)
{
    run_args *a = &R->a;
    int rc = sb_model_load(a->model, a->set, a->nset, &R->m, err);
    R->have_model = !rc;
    if (!rc && R->rank == 0 && R->m.approx_ops)
        fprintf(stderr,
                "shardbench: warning: %s: %d ONNX nodes (biases, constant scales, learned "
                "positions) are fused pointwise ops here, which the cost model prices and the "
                "runtime computes as a ReLU: this run trains that graph, not the export's exact "
                "function (models/README.md, ONNX import)\n",
                a->model, R->m.approx_ops);
    int file = strcmp(a->strategy, "dp") && strcmp(a->strategy, "best");
    sb_pipeline cli_pipe;
    sb_schedule sched = SB_SCHEDULE_GPIPE;
    if (a->schedule)
        sb_schedule_parse(a->schedule, &sched);
    if (!rc)
        rc = sb_pipeline_even(&cli_pipe, &R->m, R->size, a->stages ? a->stages : 1,
                              a->microbatches ? a->microbatches : 1, sched, err);
    if (!rc) {
        R->pipe = cli_pipe;
        sb_cost_params cp;
        sb_cost_params_default(&cp);
        /* dp and best choose configs for a stage's devices */
        rc = sb_problem_build(&R->m, file ? R->size : cli_pipe.devices[0], &cp, &R->pb, err);
        R->have_pb = !rc;
    }
    if (!rc && (!(R->choice = calloc((size_t)R->m.nops, sizeof *R->choice))
                || !(R->recompute = calloc((size_t)R->m.nops, 1))))
        rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    if (!rc) {
        if (!strcmp(a->strategy, "dp")) {
            R->kind = "dp";
            rc = sb_strategy_data_parallel(&R->pb, R->choice, err);
        } else if (!strcmp(a->strategy, "best")) {
            R->kind = "pase";
            sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 4096};
            sb_result r;
            rc = R->rank == 0 ? sb_search(&R->pb, &so, &r, err) : 0;
            if (!rc && R->rank == 0) {
                memcpy(R->choice, r.choice, (size_t)R->m.nops * sizeof *R->choice);
                sb_result_free(&r);
            }
        } else {
            rc = load_strategy_file(R, &cli_pipe, err);
        }
    }
    if (!rc && a->recompute)
        rc = sb_recompute_parse(&R->m, a->recompute, R->recompute, err);
    int status;
    if ((status = agree(R->comm, R->rank, rc, err)))
        return status;
    /* the same model everywhere before its op count sizes a broadcast */
    if ((status = agree(R->comm, R->rank, sb_agree_model(R->comm, &R->m, err), err)))
        return status;
    if (!strcmp(a->strategy, "best")) /* a file or dp: compared by the executor */
        MPI_Bcast(R->choice, R->m.nops, MPI_INT, 0, R->comm);
    if (R->have_sf && R->sf.node_order) /* the same file everywhere (the executor compares) */
        return ranks_cyclic(R, err);
    return 0;
}

/* The backend, the data source and the executor of the chosen strategy,
 * restored from a checkpoint when asked. Returns an exit status. */
static int setup_executor(run_ctx *R, const char *opts_text, sb_error *err)
{
    run_args *a = &R->a;
    int status;
    R->be = sb_backend_get(a->backend, err);
    if ((status = agree(R->comm, R->rank, R->be ? 0 : -1, err)))
        return status;
    sb_exec_opts eo = {.lr = (float)a->lr, .seed = a->seed, .data_seed = a->data_seed,
                       .agree = opts_text,
                       .update = a->optimizer == SB_OPTIM_ADAM ? SB_UPDATE_ADAM : SB_UPDATE_SGD,
                       .beta1 = (float)a->beta1, .beta2 = (float)a->beta2, .eps = (float)a->eps};
    if (a->data) {
        int rc = sb_data_open_records(a->data, &R->data, err);
        if ((status = agree(R->comm, R->rank, rc, err)))
            return status;
        eo.data = R->data;
    }
    const int *cfg[R->m.nops]; /* op i's chosen config */
    for (int i = 0; i < R->m.nops; i++)
        cfg[i] = R->have_sf ? R->sf.cfg + (size_t)i * SB_MAX_DIMS
                            : R->pb.cfg[i].c + (size_t)R->choice[i] * (size_t)R->m.ops[i].ndims;
    sb_strategy st;
    int rc = sb_strategy_from_configs(&st, &R->m, R->size, cfg, &R->pipe, R->recompute, err);
    if (!rc) {
        st.zero = a->zero;
        rc = sb_executor_create(R->comm, &R->m, &st, R->be, &eo, &R->ex, err);
        sb_strategy_free(&st);
    }
    if ((status = agree(R->comm, R->rank, rc, err)))
        return status;
    if (a->restore && (status = restore_checkpoint(R->ex, a, R->comm, R->rank, err)))
        return status;
    return 0;
}

/* Warm-up and timed steps, checkpoints as asked. Returns an exit status;
 * *diverged: the first step whose loss is not finite on some rank, or -1. */
static int train(run_ctx *R, int *diverged, sb_error *err)
{
    run_args *a = &R->a;
    *diverged = -1;
    for (int s = 0; s < R->total; s++) {
        if (s == a->warmup)
            sb_executor_reset_times(R->ex);
        double pt = cli_probe_seconds(); /* outside the step's time */
        MPI_Allreduce(&pt, &R->probes[s], 1, MPI_DOUBLE, MPI_MAX, R->comm);
        MPI_Barrier(R->comm);
        double t0 = MPI_Wtime();
        int rc = sb_executor_step(R->ex, &R->losses[s], err);
        if (rc == -2) { /* every rank stopped together (a dataset record) */
            if (R->rank == 0)
                fprintf(stderr, "shardbench: %s\n", err->msg);
            return err->code ? err->code : SB_EXIT_INTERNAL;
        }
        if (rc) {
            /* a failure in the middle of collectives cannot be agreed on safely */
            fprintf(stderr, "shardbench: rank %d: %s\n", R->rank, err->msg);
            MPI_Abort(R->comm, err->code ? err->code : 1);
        }
        double t = MPI_Wtime() - t0, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, R->comm);
        R->times[s] = tmax;
        if (R->rank == 0 && !R->json) {
            printf("step %3d  loss %.6f  %.4f s%s\n", R->start + s, R->losses[s], tmax,
                   s < a->warmup ? "  (warm-up)" : "");
            fflush(stdout);
        }
        int bad = !isfinite(R->losses[s]), anybad = 0;
        MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, R->comm);
        if (anybad) {
            *diverged = s;
            return 0;
        }
        int last = s == R->total - 1, done_steps = sb_executor_steps_done(R->ex), status;
        if (a->checkpoint && (a->save_every ? done_steps % a->save_every == 0 : last)
            && (status = save_checkpoint(R->ex, a, R->comm, R->rank, err)))
            return status;
    }
    return 0;
}

/* A run whose loss became non-finite at step `diverged`: no summary and no
 * checkpoint of weights that are not numbers; recorded as diverged. */
static int report_diverged(run_ctx *R, int diverged)
{
    if (R->rank == 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "training diverged: the loss is %s at step %d "
                 "(--lr %g); stopped", isnan(R->losses[diverged]) ? "not a number" :
                 "not finite", R->start + diverged, R->a.lr);
        fprintf(stderr, "shardbench: %s\n", msg);
        int nt = diverged > R->a.warmup ? diverged - R->a.warmup : 0;
        double *tt = R->times + R->a.warmup;
        if (nt > 0)
            qsort(tt, (size_t)nt, sizeof *tt, cmp_double);
        long long peak = (long long)sb_executor_peak_bytes(R->ex);
        record_run(&R->a, &R->pb, R->choice, R->kind, tt, nt, (double)peak, "diverged", msg,
                   R->argc, R->argv);
    }
    return SB_EXIT_INTERNAL;
}

/* The summary (step times, throughput, peak memory per rank, per-op times
 * as the maximum over ranks) and the record. Returns rank 0's status of the
 * record, on every rank. */
static int summarize(run_ctx *R)
{
    run_args *a = &R->a;
    int nops = R->m.nops, status = 0;
    const sb_op_time *ot = sb_executor_op_times(R->ex);
    double *mine = calloc((size_t)nops * 3, sizeof *mine), *maxs = calloc((size_t)nops * 3, sizeof *maxs);
    long long *peaks = calloc((size_t)R->size, sizeof *peaks);
    if (!mine || !maxs || !peaks) {
        fprintf(stderr, "shardbench: out of memory\n");
        MPI_Abort(R->comm, 1);
    }
    for (int i = 0; i < nops; i++) {
        mine[3 * i] = ot[i].compute_s;
        mine[3 * i + 1] = ot[i].comm_s;
        mine[3 * i + 2] = ot[i].other_s;
    }
    MPI_Reduce(mine, maxs, 3 * nops, MPI_DOUBLE, MPI_MAX, 0, R->comm);
    long long peak = (long long)sb_executor_peak_bytes(R->ex);
    MPI_Gather(&peak, 1, MPI_LONG_LONG, peaks, 1, MPI_LONG_LONG, 0, R->comm);
    if (R->rank == 0) {
        double *tt = R->times + a->warmup;
        qsort(tt, (size_t)a->steps, sizeof *tt, cmp_double);
        double med = tt[a->steps / 2], lo = tt[0], hi = tt[a->steps - 1];
        double *pp = R->probes + a->warmup;
        qsort(pp, (size_t)a->steps, sizeof *pp, cmp_double);
        double probe = pp[a->steps / 2];
        int64_t batch = model_param(&R->m, "batch", 1);
        long long maxpeak = 0;
        for (int r = 0; r < R->size; r++)
            if (peaks[r] > maxpeak)
                maxpeak = peaks[r];
        if (R->json) {
            print_run_json(&R->m, R->size, R->be->name, a->strategy, &R->pipe, a->zero, R->losses,
                           R->total, a->warmup, med, lo, hi, (double)batch / med, peaks, maxs, probe);
        } else {
            printf("step time  median %.4f s  min %.4f s  max %.4f s  (%d steps after %d warm-up)\n",
                   med, lo, hi, a->steps, a->warmup);
            printf("throughput %.2f samples/s (batch %lld)\n", (double)batch / med, (long long)batch);
            printf("peak tensor memory per rank:");
            for (int r = 0; r < R->size; r++)
                printf(" %.1f MB", (double)peaks[r] / 1e6);
            printf("\n%-40s %-12s %12s %12s %12s\n", "op", "type", "compute s", "comm s", "other s");
            for (int i = 0; i < nops; i++)
                printf("%-40s %-12s %12.6f %12.6f %12.6f\n", R->m.ops[i].name,
                       sb_op_kind_name(R->m.ops[i].kind), maxs[3 * i], maxs[3 * i + 1],
                       maxs[3 * i + 2]);
        }
        status = record_run(a, &R->pb, R->choice, R->kind, tt, a->steps, (double)maxpeak, "ok", NULL,
                            R->argc, R->argv);
    }
    /* every rank exits with rank 0's verdict on the record */
    MPI_Bcast(&status, 1, MPI_INT, 0, R->comm);
    free(mine);
    free(maxs);
    free(peaks);
    return status;
}

/* One strategy of the launch: chosen, set up, trained and summarized.
 * Returns an exit status. */
static int run_one(run_ctx *R, const char *opts_text, sb_error *err)
{
    int status;
    if ((status = choose_strategy(R, err)) || (status = setup_executor(R, opts_text, err)))
        return status;
    R->start = sb_executor_steps_done(R->ex);
    R->total = R->a.warmup + R->a.steps;
    R->losses = calloc((size_t)R->total, sizeof *R->losses);
    R->times = calloc((size_t)R->total, sizeof *R->times);
    R->probes = calloc((size_t)R->total, sizeof *R->probes);
    if (!R->losses || !R->times || !R->probes) {
        fprintf(stderr, "shardbench: out of memory\n");
        MPI_Abort(R->comm, 1);
    }
    if (R->rank == 0 && !R->json)
        printf("# %s on %d rank%s (%s backend, %s), strategy %s, predicted cost %.4g FLOP\n",
               R->m.name, R->size, R->size == 1 ? "" : "s", R->be->name, R->a.precision,
               R->a.strategy, sb_strategy_cost(&R->pb, R->choice));
    if (R->rank == 0 && !R->json && !sb_pipeline_is_none(&R->pipe))
        printf("# pipeline: %d stages, %d micro-batches, %s schedule\n", R->pipe.nstages,
               R->pipe.microbatches, sb_schedule_name(R->pipe.schedule));
    if (!R->json && R->cpus)
        cli_cpu_report(R->comm, R->cpus, stdout);
    R->cpus = NULL;
    int diverged;
    if ((status = train(R, &diverged, err)))
        return status;
    return diverged >= 0 ? report_diverged(R, diverged) : summarize(R);
}

/* Frees what run_one made, ready for the next strategy. */
static void free_one(run_ctx *R)
{
    free(R->losses);
    free(R->times);
    free(R->probes);
    sb_executor_free(R->ex);
    sb_data_free(R->data);
    free(R->choice);
    if (R->have_sf)
        sb_strategy_free(&R->sf);
    free(R->recompute);
    if (R->have_pb)
        sb_problem_free(&R->pb);
    if (R->have_model)
        sb_model_free(&R->m);
    R->losses = R->times = R->probes = NULL;
    R->ex = NULL;
    R->data = NULL;
    R->choice = NULL;
    R->recompute = NULL;
    R->have_sf = R->have_pb = R->have_model = 0;
    if (R->comm != R->world) { /* ranks_cyclic's reordering */
        MPI_Comm_free(&R->comm);
        R->comm = R->world;
        MPI_Comm_rank(R->comm, &R->rank);
    }
    R->kind = "file";
    R->be = NULL;
}

int cmd_run(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    run_ctx R = {.comm = MPI_COMM_WORLD, .world = MPI_COMM_WORLD, .argc = argc, .argv = argv,
                 .kind = "file"};
    MPI_Comm_rank(R.comm, &R.rank);
    MPI_Comm_size(R.comm, &R.size);
    sb_error err = {0};
    int status = 0;
    int rc = parse_run_args(argc, argv, &R.a, &err);
    if (rc == 1) {
        if (R.rank == 0)
            run_usage(stdout);
        MPI_Finalize();
        return 0;
    }
    if ((status = agree(R.comm, R.rank, rc, &err)))
        goto done;
    static char opts_text[1 << 18]; /* before any collective that depends on the options */
    run_options_text(&R.a, opts_text, sizeof opts_text);
    if ((status = agree(R.comm, R.rank, sb_agree_text(R.comm, "options", opts_text, &err), &err)))
        goto done;
    sb_cpuset cpus; /* before the executor: it takes the kernels' thread count */
    cli_cpu_setup(R.comm, R.a.keep_binding, &cpus);
    R.json = !strcmp(R.a.format, "json");
    R.cpus = &cpus;
    /* each strategy in turn, from the same options (a strategy file may set
     * its own ZeRO stage and pipeline into them); the first failure ends
     * the launch with its status */
    run_args base = R.a;
    for (int k = 0; k < base.nstrategies && !status; k++) {
        R.a = base;
        R.a.strategy = base.strategies[k];
        status = run_one(&R, opts_text, &err);
        free_one(&R);
    }
done:
    free_one(&R);
#ifdef SB_HAVE_CUDA
    sb_cuda_finalize(); /* NCCL communicators, before MPI_Finalize and outside its callbacks */
#endif
    MPI_Finalize();
    return status;
}
