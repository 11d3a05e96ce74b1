/* cmd_prune.c: `shardbench prune`: the union of pase-best, data parallel,
 * expert, mcmc-best, the top-K mesh x layout candidates and, with a GPU
 * machine file and a transformer, Megatron-LM's best configuration (as a
 * pipeline strategy: search/megatron_layout.c), keeping the
 * distinct strategies within a factor of the best predicted cost and under
 * the device memory; writes DIR/NN-KIND.strategy per survivor and
 * DIR/index.tsv (read by `shardbench bench`). Not a search of its own. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "algos.h"
#include "cli.h"
#include "shardbench/machine.h"
#include "shardbench/megatron.h"

typedef struct {
    char kind[32];
    int *choice;     /* config indices of a plain strategy, or NULL: */
    sb_strategy *st; /* a strategy a plain problem cannot hold (megatron's) */
    double cost, mem;
} entry;

static void usage(FILE *f)
{
    fprintf(f, "usage: shardbench prune -m MODEL -p P [--within 1.5] [--top K] [--out DIR]\n"
               "\n"
               "Survivors: pase-best, dp, expert, mcmc-best, the top-K candidates and, with a\n"
               "GPU --machine and a transformer, megatron (search --algo megatron --vpp 1: its\n"
               "step and memory as that pricer gives them) whose predicted cost is within the\n"
               "factor of the best and whose predicted memory fits.\n"
               "\n"
               "  -m, --model MODEL      shipped model name or model file\n"
               "  -p, --procs P          device count\n"
               "      --set NAME=VALUE   override a model parameter (repeatable)\n"
               "      --within F         keep cost <= F x best (default 1.5)\n"
               "      --top K            candidates taken (default 5)\n"
               "      --out DIR          output folder (default prune-MODEL-pP)\n"
               "      --memory LIMIT     device memory (80GiB, 141GB, 512MiB; bare number: GiB)\n"
               "      --device-mem GIB   device memory (default 80)\n"
               "      --optimizer sgd|adam   optimizer state in the memory model\n"
               "      --zero 0|1|2|3     ZeRO stage in the memory and cost models (as search)\n"
               "      --budget N, --time-limit S, --seed N   mcmc (as search)\n"
               "      --flops F, --bw B, --cutoff N, --max-table-mb MB   as search\n"
               "      --calibration FILE   the calibrated cost model (shardbench calibrate)\n"
               "      --machine NAME|FILE  cost model and --device-mem of a machine file (as search)\n"
               "      --profiles DB|none   the predictive model's profiles (as search)\n"
               CLI_PRECISION_HELP CLI_ATTENTION_HELP);
}

static int add_entry(entry *e, int *n, const sb_problem *pb, const char *kind, const int *choice,
                     sb_optimizer opt, sb_error *err)
{
    int nops = pb->m->nops;
    for (int i = 0; i < *n; i++)
        if (e[i].choice && !memcmp(e[i].choice, choice, (size_t)nops * sizeof *choice))
            return 0; /* the same strategy under an earlier kind */
    e[*n].choice = sb_malloc((size_t)nops * sizeof *choice, err);
    if (!e[*n].choice)
        return -1;
    memcpy(e[*n].choice, choice, (size_t)nops * sizeof *choice);
    snprintf(e[*n].kind, sizeof e[*n].kind, "%s", kind);
    e[*n].cost = sb_strategy_cost(pb, choice);
    e[*n].mem = sb_strategy_memory(pb, choice, opt, NULL);
    (*n)++;
    return 0;
}

/* Megatron-LM's best configuration on a GPU machine file (the grid of
 * search --algo megatron with one chunk per stage, which a strategy file
 * holds), priced by its own model: the step in FLOP-equivalents at the
 * machine's F, its peak memory. Nothing without --machine; a line saying
 * why when the machine or the model is not one it prices. */
static int add_megatron(const sb_problem *pb, const shared_opts *so, double limit, entry *e,
                        int *n, sb_error *err)
{
    if (!so->machine)
        return 0;
    sb_machine mc;
    sb_gpu g;
    sb_mt_model mm;
    sb_error why = {0};
    if (sb_machine_load(so->machine, &mc, err))
        return -1;
    int prec = so->precision >= 0 ? so->precision : mc.precision;
    sb_mt_config fx;
    sb_mt_config_free(&fx);
    fx.file_layout = 1; /* what a strategy file holds: VPP 1, EP within DP (sb_mt_strategy) */
    fx.precision = prec;
    fx.grad_bytes = so->grad_word_bytes;
    sb_mt_config best;
    sb_mt_result r;
    e[*n].st = sb_malloc(sizeof *e[*n].st, err);
    if (!e[*n].st)
        return -1;
    if (sb_gpu_from_machine(&mc, prec, &g, &why) || sb_mt_model_from(pb->m, &mm, &why) ||
        (sb_mt_file_layout(pb->m, &mm, &fx), 0) || /* its layers' runs: PP 1 where not */
        sb_mt_search(&mm, &fx, pb->p, &g, limit, &best, &r, &why) <= 0 ||
        sb_mt_strategy(pb->m, &best, &mm, pb->p, e[*n].st, &why)) {
        printf("# megatron: not a survivor: %s\n", why.msg);
        free(e[*n].st);
        e[*n].st = NULL;
        return 0;
    }
    e[*n].st->cost = e[*n].cost = r.step_s * pb->cp.tflops * 1e12;
    e[*n].mem = r.mem_total;
    snprintf(e[*n].kind, sizeof e[*n].kind, "megatron");
    (*n)++;
    return 0;
}

static int by_cost(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return x->cost < y->cost ? -1 : x->cost > y->cost;
}

static int gather(const sb_problem *pb, algo_opts *ao, int top, entry *e, int *n, sb_error *err)
{
    static const char *const algos[] = {"pase", "dp", "expert", "mcmc"};
    for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
        sb_result r;
        if (run_algo(pb, algos[a], ao, &r, err))
            return -1;
        int rc = add_entry(e, n, pb, algos[a], r.choice, ao->opt, err);
        sb_result_free(&r);
        if (rc)
            return -1;
    }
    if (top <= 0)
        return 0;
    sb_candidate_set cs;
    if (sb_candidates_enumerate(pb, ao->opt, ao->max_rule_sets, 1, &cs, err))
        return -1;
    int *choice = sb_malloc((size_t)pb->m->nops * sizeof *choice, err);
    int rc = choice ? 0 : -1;
    for (int k = 0; k < cs.ncand && k < top && !rc; k++) {
        char kind[32];
        snprintf(kind, sizeof kind, "cand%d", k + 1);
        if (sb_candidate_strategy(pb, &cs, &cs.cand[k], choice) < 0)
            rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        else
            rc = add_entry(e, n, pb, kind, choice, ao->opt, err);
    }
    free(choice);
    sb_candidate_set_free(&cs);
    return rc;
}

static int write_out(const char *dir, const sb_problem *pb, entry *e, int n, double best,
                     double within, double limit, sb_error *err)
{
    if (mkdir(dir, 0777) && errno != EEXIST)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot create: %s", dir, strerror(errno));
    char path[4096], index[4096], tmp[4200];
    snprintf(index, sizeof index, "%s/index.tsv", dir);
    FILE *idx = sb_out_open(index, "survivor index", tmp, sizeof tmp, err);
    if (!idx)
        return -1;
    fprintf(idx, "file\tkind\tpredicted_cost\tpredicted_mem_bytes\n");
    /* a calibrated, machine or profiled cost is FLOP-equivalents at F: a time */
    double F = pb->cp.calibration[0] || pb->cp.machine[0] ? pb->cp.tflops * 1e12 : 0.0;
    printf("%-4s %-8s %18s %8s %12s %s%s\n", "rank", "kind", "cost (FLOP)", "x best", "mem (GiB)",
           F > 0 ? "predicted s  " : "", "verdict");
    int kept = 0, rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const char *verdict = "kept";
        if (e[i].cost > within * best)
            verdict = "dropped: cost over --within";
        else if (e[i].mem > limit)
            verdict = "dropped: over --device-mem";
        if (F > 0)
            printf("%-4d %-8s %18.6e %8.3f %12.3f %11.4g  %s\n", i + 1, e[i].kind, e[i].cost,
                   e[i].cost / best, e[i].mem / 1073741824.0, e[i].cost / F, verdict);
        else
            printf("%-4d %-8s %18.6e %8.3f %12.3f %s\n", i + 1, e[i].kind, e[i].cost,
                   e[i].cost / best, e[i].mem / 1073741824.0, verdict);
        if (strcmp(verdict, "kept"))
            continue;
        kept++;
        char file[64];
        snprintf(file, sizeof file, "%02d-%s.strategy", kept, e[i].kind);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        sb_result r = {.choice = e[i].choice, .total_cost = e[i].cost};
        rc = e[i].st ? sb_strategy_save(path, pb->m, e[i].st, err)
                     : sb_result_save(path, pb, &r, e[i].kind, err);
        fprintf(idx, "%s\t%s\t%.17g\t%.0f\n", file, e[i].kind, e[i].cost, e[i].mem);
    }
    if (rc)
        sb_out_abort(idx, tmp);
    else
        rc = sb_out_commit(idx, tmp, index, "survivor index", err);
    if (!rc)
        printf("%d survivors written to %s/ (index.tsv)\n", kept, dir);
    if (!rc && kept == 0)
        rc = sb_fail(err, SB_EXIT_INPUT, "no strategy fits --device-mem %.3g GiB",
                     limit / 1073741824.0);
    return rc;
}

int cmd_prune(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},    {"procs", required_argument, 0, 'p'},
        {"set", required_argument, 0, 's'},      {"within", required_argument, 0, 'w'},
        {"top", required_argument, 0, 'k'},      {"out", required_argument, 0, 'O'},
        {"device-mem", required_argument, 0, 'G'}, {"memory", required_argument, 0, 'L'}, {"zero", required_argument, 0, 'Z'}, {"optimizer", required_argument, 0, 'o'},
        {"budget", required_argument, 0, 'n'},   {"time-limit", required_argument, 0, 't'},
        {"seed", required_argument, 0, 'e'},     {"flops", required_argument, 0, 'F'},
        {"bw", required_argument, 0, 'B'},       {"cutoff", required_argument, 0, 'c'},
        {"max-table-mb", required_argument, 0, 'M'}, {"help", no_argument, 0, 'h'},
        {"calibration", required_argument, 0, 'K'}, {"machine", required_argument, 0, 'H'}, {"profiles", required_argument, 0, 'Q'},
        CLI_PRECISION_OPTS, CLI_ATTENTION_OPT,
        {0, 0, 0, 0},
    };
    sb_error err = {0};
    shared_opts so;
    shared_opts_default(&so);
    const char *out = NULL;
    int top = 5;
    double within = 1.5;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:p:h", opts, NULL)) != -1) {
        int rc = shared_opt(&so, c, optarg, &err);
        if (rc == 0) /* not a shared option */
            switch (c) {
            case 'w': rc = parse_pos_double(optarg, "--within", &within, &err); break;
            case 'k': rc = parse_int_opt(optarg, "--top", 0, 1000, &top, &err); break;
            case 'O': out = optarg; break;
            case 'h': usage(stdout); return 0;
            default: usage(stderr); return 2;
            }
        if (rc < 0)
            return cli_fail(&err);
    }
    if (optind < argc || !so.model || !so.p) {
        fprintf(stderr, "shardbench prune: -m MODEL and -p P are required\n\n");
        usage(stderr);
        return 2;
    }
    if (shared_opts_calibrate(&so, &err))
        return cli_fail(&err);
    if (within < 1.0) {
        fprintf(stderr, "shardbench: --within: %g is below 1 (nothing could survive)\n", within);
        return 2;
    }
    sb_model m;
    sb_problem pb;
    if (shared_opts_problem(&so, &m, &pb, &err))
        return cli_fail(&err);
    int p = so.p;
    double gib = so.device_gib;
    algo_opts ao = so.ao;
    char dflt[600];
    snprintf(dflt, sizeof dflt, "prune-%s-p%d", m.name, p);
    entry *e = sb_calloc((size_t)top + 8, sizeof *e, &err);
    int n = 0, status = 0;
    if (!e || gather(&pb, &ao, top, e, &n, &err) ||
        add_megatron(&pb, &so, gib * 1073741824.0, e, &n, &err)) {
        status = cli_fail(&err);
        goto done;
    }
    qsort(e, (size_t)n, sizeof *e, by_cost);
    if (so.cost_model[0])
        printf("# %s\n", so.cost_model);
    printf("# %s  p=%d  within %g of the best, device memory %g GiB (%s)\n", m.name, p, within, gib,
           sb_optimizer_name(ao.opt));
    if (write_out(out ? out : dflt, &pb, e, n, e[0].cost, within, gib * 1073741824.0, &err))
        status = cli_fail(&err);
done:
    for (int i = 0; i < n; i++) {
        free(e[i].choice);
        if (e[i].st)
            sb_strategy_free(e[i].st);
        free(e[i].st);
    }
    free(e);
    free(ao.note);
    sb_problem_free(&pb);
    sb_model_free(&m);
    return status;
}
