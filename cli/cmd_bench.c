/* cmd_bench.c: `shardbench bench`: options, then sb_bench (measure/bench.c):
 * for each model and device count, prune to survivors, train each for a
 * few steps on P MPI ranks, and record everything under one run id. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardbench/precision.h"
#include "shardbench/machine.h"
#include "shardbench/measure.h"
#include "shardbench/results.h"

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench bench -m MODELS -p LIST [options]\n"
            "\n"
            "For each model and device count P: prune to survivors (shardbench prune), train\n"
            "each survivor for a few steps on P MPI ranks (LAUNCHER -np P shardbench run),\n"
            "record every measurement (failures too) under one run id, and print Spearman's\n"
            "rho of predicted cost against measured median step time.\n"
            "\n"
            "  -m, --models LIST      comma-separated model names or files\n"
            "  -p, --procs LIST       device counts: 1,2,4 or 1..8\n"
            "      --set [MODEL:]K=V  override a model parameter (repeatable); MODEL: limits\n"
            "                         it to one model of the list\n"
            "      --backend B        cpu (default) or cuda, passed to run\n"
            "      --steps N          timed steps per strategy (default 5)\n"
            "      --warmup W         untimed steps first (default 1)\n"
            "      --trials N         launches per strategy, each stored as its own measurement,\n"
            "                         trial t of every strategy before trial t+1 (default 1);\n"
            "                         one launch trains every strategy of a trial round in turn\n"
            "                         (run --strategy A --strategy B ...), and one that fails\n"
            "                         there is launched alone for its own status, as are the\n"
            "                         ones after it; the round's time limit is --timeout for\n"
            "                         each strategy in it\n"
            "      --within X         prune: keep strategies within X times the best (default 2)\n"
            "      --calibration FILE predict (and prune) with the calibrated cost model of\n"
            "                         `shardbench calibrate` instead of the reference one\n"
            "      --machine NAME|FILE predict (and prune) with a machine file's cost model\n"
            "      --precision P      with --machine: fp32|tf32|fp16|bf16|fp8, the recipe it prices\n"
            "                         (default: the machine file's; as search)\n"
            "                         (docs/machines.md); not with --calibration\n"
            "      --top K            prune: keep at most K (default 8)\n"
            "      --profile N        with --machine: N launches of `shardbench profile` of\n"
            "                         each model at each P (the predictive model's figures of\n"
            "                         the machine as it is now; docs/cost-model.md): the first\n"
            "                         before the pair is priced, with --trials T launch k\n"
            "                         before trial round k, then every strategy priced again\n"
            "      --retries N        a launch beside other processes' work (over --other-cores\n"
            "                         busy cores that are not the bench's, from /proc/stat):\n"
            "                         a profile launch runs again, and the strategies none of\n"
            "                         whose trials ran free of it get another round, up to N\n"
            "                         times each (default 0: never; it changes how many\n"
            "                         launches a strategy gets)\n"
            "      --other-cores X    that threshold (default 0.25)\n"
            "      --yield-when-idle  the launches' waiting ranks give their core up between\n"
            "                         polls (OMPI_MCA_mpi_yield_when_idle=1 unless the\n"
            "                         environment sets it): for a machine shared with other\n"
            "                         work; costs data parallel ~20%% at P = 2 on a quiet one\n"
            "                         (default: OpenMPI's choice, yielding only when the\n"
            "                         ranks outnumber the cores)\n"
            "      --random N         also measure N random valid strategies per (model, P > 1),\n"
            "                         kinds rand1..randN (the same ones every run)\n"
            "      --paper            also measure the paper's Table II strategy (kind paper,\n"
            "                         docs/paper-table2.md) of alexnet, inception3, rnnlm and\n"
            "                         transformer, mapped onto the sizes and P benched\n"
            "      --survivors DIR    use DIR/MODEL-pP/index.tsv instead of running prune\n"
            "      --workdir DIR      where prune writes survivors (default: a temporary\n"
            "                         folder, removed at the end)\n"
            "      --search-algos L   search algorithms timed per (model, P) and stored for\n"
            "                         report Table I (default pase,bf; 'none')\n"
            "      --db FILE          results database (default %s)\n"
            "      --adopt-db         record into an SQLite file that holds another\n"
            "                         program's tables (refused otherwise)\n"
            "      --resume RUN       continue run RUN: skip what it already measured\n"
            "      --launcher CMD     MPI launcher (default 'mpirun --oversubscribe --bind-to\n"
            "                         none', plus --allow-run-as-root as root: each rank\n"
            "                         runs its share of the cores); '-np P' is appended\n"
            "                         unless CMD holds {P}, e.g. 'srun -n {P} --mpi=pmix'\n"
            "      --timeout S        seconds per strategy before it is killed (default 600)\n"
            "  -h, --help\n",
            SB_DB_DEFAULT_PATH);
}

static int parse_num(const char *s, const char *what, double lo, double hi, double *out,
                     sb_error *err)
{
    const char *end;
    double v = 0;
    if (sb_parse_number(s, &v, &end) || *end || !(v >= lo && v <= hi))
        return sb_fail(err, SB_EXIT_INPUT, "%s: '%s' is not a number in %g..%g", what, s, lo, hi);
    *out = v;
    return 0;
}

/* A whole number in lo..hi (lo >= 0): digits only (not 1e3, 0x10 or 1.0). */
static int parse_whole(const char *s, const char *what, int lo, int hi, int *out, sb_error *err)
{
    uint64_t v = 0;
    if (sb_parse_count(s, (uint64_t)hi, &v) || v < (uint64_t)lo)
        return sb_fail(err, SB_EXIT_INPUT, "%s: '%s' is not a whole number in %d..%d", what, s,
                       lo, hi);
    *out = (int)v;
    return 0;
}

int parse_bench_args(int argc, char **argv, sb_bench_opts *a, sb_error *err)
{
    static const struct option opts[] = {
        {"models", required_argument, 0, 'm'},   {"model", required_argument, 0, 'm'},
        {"procs", required_argument, 0, 'p'},    {"set", required_argument, 0, 'S'},
        {"backend", required_argument, 0, 'b'},  {"steps", required_argument, 0, 'n'},
        {"warmup", required_argument, 0, 'w'},   {"within", required_argument, 0, 'W'},
        {"top", required_argument, 0, 'k'},      {"survivors", required_argument, 0, 'V'},
        {"workdir", required_argument, 0, 'D'},  {"search-algos", required_argument, 0, 'A'},
        {"db", required_argument, 0, 'd'},       {"resume", required_argument, 0, 'r'},
        {"launcher", required_argument, 0, 'L'}, {"timeout", required_argument, 0, 't'},
        {"calibration", required_argument, 0, 'K'}, {"adopt-db", no_argument, 0, 'O'},
        {"trials", required_argument, 0, 'T'},   {"machine", required_argument, 0, 'H'}, {"precision", required_argument, 0, 1101},
        {"paper", no_argument, 0, 'P'},          {"random", required_argument, 0, 'X'},
        {"profile", required_argument, 0, 'Y'},  {"retries", required_argument, 0, 'R'},
        {"other-cores", required_argument, 0, 'o'}, {"yield-when-idle", no_argument, 0, 'B'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
    };
    sb_bench_opts_default(a);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "m:p:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a->models = optarg; break;
        case 'P': a->paper = 1; break;
        case 'p':
            if ((a->np = parse_p_list(optarg, a->ps, SB_BENCH_MAX_P, err)) < 0)
                return -1;
            break;
        case 'S': {
            if (a->nset == SB_BENCH_MAX_SET)
                return sb_fail(err, SB_EXIT_INPUT, "too many --set options");
            sb_bench_set *s = &a->set[a->nset++];
            const char *colon = strchr(optarg, ':'), *eq = strchr(optarg, '=');
            if (colon && (!eq || colon < eq)) {
                snprintf(s->model, sizeof s->model, "%.*s", (int)(colon - optarg), optarg);
                snprintf(s->arg, sizeof s->arg, "%s", colon + 1);
            } else {
                snprintf(s->arg, sizeof s->arg, "%s", optarg);
            }
            sb_setting tmp;
            if (sb_setting_parse(s->arg, &tmp, err))
                return -1;
            break;
        }
        case 'b': a->backend = optarg; break;
        case 'n':
        case 'w':
        case 'k':
            if (parse_whole(optarg, c == 'n' ? "--steps" : c == 'w' ? "--warmup" : "--top",
                            c == 'w' ? 0 : 1, 1000000,
                            c == 'n' ? &a->steps : c == 'w' ? &a->warmup : &a->top, err))
                return -1;
            break;
        case 'Y':
            if (parse_whole(optarg, "--profile", 0, 100, &a->profile, err))
                return -1;
            break;
        case 'X':
            if (parse_whole(optarg, "--random", 0, 1000, &a->random, err))
                return -1;
            break;
        case 'T':
            if (parse_whole(optarg, "--trials", 1, 1000, &a->trials, err))
                return -1;
            break;
        case 'R':
            if (parse_whole(optarg, "--retries", 0, 100, &a->retries, err))
                return -1;
            break;
        case 'o':
            if (parse_num(optarg, "--other-cores", 0, 1e6, &a->other_cores, err))
                return -1;
            break;
        case 'B': a->yield_idle = 1; break;
        case 'W':
            if (parse_num(optarg, "--within", 1, 1e12, &a->within, err))
                return -1;
            break;
        case 't':
            if (parse_num(optarg, "--timeout", 0.001, 1e7, &a->timeout, err))
                return -1;
            break;
        case 'V': a->survivors = optarg; break;
        case 'D': a->workdir = optarg; break;
        case 'A': a->algos = optarg; break;
        case 'd': a->db = optarg; break;
        case 'O': a->adopt_db = 1; break;
        case 'r': {
            char *end;
            errno = 0;
            long long r = strtoll(optarg, &end, 10);
            if (errno || end == optarg || !isdigit((unsigned char)optarg[0]) || *end || r < 1)
                return sb_fail(err, SB_EXIT_INPUT, "--resume: '%s' is not a run id", optarg);
            a->resume = r;
            break;
        }
        case 'L': a->launcher = optarg; break;
        case 'K': {
            sb_cost_params cp;
            sb_cost_params_default(&cp);
            if (sb_calibration_load(optarg, &cp, err)) /* fail now, not per model */
                return -1;
            a->calibration = optarg;
            break;
        }
        case 'H': {
            sb_machine mc;
            if (sb_machine_load(optarg, &mc, err)) /* fail now, not per model */
                return -1;
            a->machine = optarg;
            break;
        }
        case 1101: {
            int prec;
            if (sb_precision_parse(optarg, "--precision", &prec, err))
                return -1;
            a->precision = optarg;
            break;
        }
        case 'h': return 1;
        default:
            return sb_fail(err, SB_EXIT_INPUT, "bench: unknown or incomplete option '%s'",
                           argv[optind - 1]);
        }
    }
    if (optind < argc)
        return sb_fail(err, SB_EXIT_INPUT, "bench: unexpected argument '%s'", argv[optind]);
    if (a->precision && !a->machine)
        return sb_fail(err, SB_EXIT_INPUT,
                       "bench: --precision %s needs --machine (the reference model prices fp32)",
                       a->precision);
    if (a->machine && a->calibration)
        return sb_fail(err, SB_EXIT_INPUT, "bench: --machine %s sets the cost model: give it or "
                       "--calibration %s, not both", a->machine, a->calibration);
    if (!a->models || !a->np)
        return sb_fail(err, SB_EXIT_INPUT, "bench: -m MODELS and -p LIST are required");
    if (a->profile && !a->machine)
        return sb_fail(err, SB_EXIT_INPUT, "bench: --profile %d: profiles belong to a machine: "
                       "give --machine NAME|FILE", a->profile);
    if (!strcmp(a->db, "none"))
        return sb_fail(err, SB_EXIT_INPUT, "bench: --db none: a bench needs a database");
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    sb_bench_opts a;
    sb_error err = {0};
    int rc = parse_bench_args(argc, argv, &a, &err);
    if (rc == 1) {
        bench_usage(stdout);
        return 0;
    }
    if (rc)
        return cli_fail(&err);
    return sb_bench(&a, argc, argv);
}
