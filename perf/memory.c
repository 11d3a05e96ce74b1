/* perf/memory.c: predicted against measured peak memory per rank, with
 * ZeRO stages 0-3 and activation recomputation off and on.
 *
 * For each model, each ZeRO stage and recomputation none / all, on the P
 * ranks it runs on: the memory model's peak bytes per device for the
 * strategy (sb_strategy_memory_rc, the problem built with that ZeRO stage
 * and recomputation: what `search --zero Z --recompute R` prints as its
 * peak) and the executor's measured peak tensor bytes (the largest over
 * the ranks, sb_executor_peak_bytes, after --steps training steps: the
 * pool holds one step's buffers, so the first step is the peak), and their
 * ratio measured / predicted. The strategy is the same for every row of a
 * model: data parallel (--strategy dp, the default: every weight
 * replicated, so ZeRO slices all of them) or the search's best at the
 * reference cost model (--strategy best).
 *
 *   mpirun -np P perf/memory [--models transformer,llama-tiny] [--optimizer adam|sgd]
 *                             [--strategy dp|best] [--steps N (2)] [--db FILE]
 *
 * Models (sizes fixed here, so that figures compare across runs):
 * transformer: layers 2, batch 8, seq 32, vocab 8000 (embed 512, ff 2048);
 * llama-tiny (tests/data/models/llama-tiny.model): layers 2, batch 8, seq
 * 64, vocab 2048, embed 256, kvh 4, rep 2, dk 32, ff 512.
 * Rows go to the results database as measurements (kind
 * "dp/zero=Z/recompute=R", predicted_mem_bytes, peak_mem_bytes). */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/candidates.h"
#include "shardbench/memory.h"
#include "shardbench/results.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

static int P, me;

static void die(const char *what, const sb_error *err)
{
    fprintf(stderr, "perf/memory: rank %d: %s: %s\n", me, what, err ? err->msg : "");
    MPI_Abort(MPI_COMM_WORLD, 1);
}

typedef struct {
    const char *name, *path, *sets;
} bench_model;

static const bench_model MODELS[] = {
    {"transformer", "transformer", "layers=2,batch=8,seq=32,vocab=8000"},
    {"llama-tiny", SB_SOURCE_DIR "/tests/data/models/llama-tiny.model",
     "layers=2,batch=8,seq=64,vocab=2048,embed=256,kvh=4,rep=2,dk=32,ff=512"},
};

typedef struct {
    const char *model;
    int zero, recompute;
    double predicted, measured;
    char params[256];
    int nops;
} row;

/* Measured peak (largest over the ranks) of st trained for `steps` steps. */
static double measure(const sb_problem *pb, const int *choice, int zero, int recompute,
                      sb_update_rule upd, int steps)
{
    const sb_model *m = pb->m;
    sb_error err = {0};
    const int **cfg = malloc((size_t)m->nops * sizeof *cfg);
    unsigned char *rec = calloc((size_t)m->nops, 1);
    if (!cfg || !rec)
        die("out of memory", NULL);
    for (int i = 0; i < m->nops; i++) {
        cfg[i] = pb->cfg[i].c + (size_t)choice[i] * (size_t)m->ops[i].ndims;
        rec[i] = (unsigned char)(recompute && sb_op_recomputable(&m->ops[i]));
    }
    sb_strategy st;
    if (sb_strategy_from_configs(&st, m, pb->p, cfg, NULL, recompute ? rec : NULL, &err))
        die("strategy", &err);
    st.zero = zero;
    sb_exec_opts eo = {.lr = upd == SB_UPDATE_ADAM ? 0.001f : 0.01f, .update = upd};
    sb_executor *ex;
    if (sb_executor_create(MPI_COMM_WORLD, m, &st, &sb_backend_cpu, &eo, &ex, &err))
        die("create", &err);
    sb_strategy_free(&st);
    for (int s = 0; s < steps; s++) {
        double loss;
        if (sb_executor_step(ex, &loss, &err))
            die("step", &err);
    }
    int64_t peak = sb_executor_peak_bytes(ex), top = 0;
    MPI_Allreduce(&peak, &top, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    sb_executor_free(ex);
    free(cfg);
    free(rec);
    return (double)top;
}

static void store(const char *db_path, const row *rows, int n, const char *strategy,
                  sb_optimizer opt, int steps, const char *cmd)
{
    sb_db *db;
    sb_error err = {0};
    if (sb_db_open(db_path, 0, &db, &err)) {
        fprintf(stderr, "perf/memory: %s (figures not stored)\n", err.msg);
        return;
    }
    char devices[64];
    snprintf(devices, sizeof devices, "%d x cpu rank", P);
    sb_run_meta meta = {.backend = "cpu", .devices = devices, .versions = "", .command_line = cmd};
    int64_t run;
    if (sb_db_begin_run(db, &meta, &run, &err)) {
        fprintf(stderr, "perf/memory: %s (figures not stored)\n", err.msg);
        sb_db_close(db);
        return;
    }
    for (int i = 0; i < n; i++) {
        char kind[96], json[160];
        snprintf(kind, sizeof kind, "%s/zero=%d/recompute=%s", strategy, rows[i].zero,
                 rows[i].recompute ? "all" : "none");
        snprintf(json, sizeof json, "{\"optimizer\": \"%s\", \"zero\": %d, \"recompute\": \"%s\"}",
                 sb_optimizer_name(opt), rows[i].zero, rows[i].recompute ? "all" : "none");
        sb_measurement_record rec = {
            .run_id = run, .model = rows[i].model, .params = rows[i].params,
            .nops = rows[i].nops, .p = P, .kind = kind, .predicted_cost = NAN,
            .predicted_mem_bytes = rows[i].predicted, .configs_json = json,
            .step_median_s = NAN, .step_min_s = NAN, .step_max_s = NAN, .steps = steps,
            .status = "ok", .peak_mem_bytes = rows[i].measured,
        };
        if (sb_db_record_measurement(db, &rec, NULL, &err))
            fprintf(stderr, "perf/memory: %s (measurement not stored)\n", err.msg);
    }
    if (sb_db_end_run(db, run, &err))
        fprintf(stderr, "perf/memory: %s\n", err.msg);
    else
        printf("# stored as run %lld in %s\n", (long long)run, db_path);
    sb_db_close(db);
}

/* The model's --set list "a=1,b=2" as settings. */
static int parse_sets(const char *list, sb_setting *set, int max, sb_error *err)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max)
            return sb_fail(err, SB_EXIT_INPUT, "too many settings");
        if (sb_setting_parse(t, &set[n++], err))
            return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    const char *models = "transformer,llama-tiny", *db_path = SB_DB_DEFAULT_PATH;
    const char *strategy = "dp";
    sb_optimizer opt = SB_OPTIM_ADAM;
    int steps = 2;
    static const struct option lopts[] = {
        {"models", required_argument, 0, 'm'}, {"optimizer", required_argument, 0, 'o'},
        {"strategy", required_argument, 0, 's'}, {"steps", required_argument, 0, 'n'},
        {"db", required_argument, 0, 'd'}, {0, 0, 0, 0},
    };
    sb_error err = {0};
    int c;
    while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        switch (c) {
        case 'm': models = optarg; break;
        case 'o':
            if (sb_optimizer_parse(optarg, &opt, &err))
                die("--optimizer", &err);
            break;
        case 's':
            strategy = optarg;
            if (strcmp(strategy, "dp") && strcmp(strategy, "best")) {
                sb_fail(&err, SB_EXIT_INPUT, "'%s' is not dp or best", optarg);
                die("--strategy", &err);
            }
            break;
        case 'n': steps = atoi(optarg); break;
        case 'd': db_path = optarg; break;
        default:
            if (me == 0)
                fprintf(stderr, "usage: mpirun -np P perf/memory [--models LIST] [--optimizer "
                                "adam|sgd] [--strategy dp|best] [--steps N] [--db FILE]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (steps < 1)
        steps = 1;
    row rows[64];
    int nrows = 0;
    if (me == 0)
        printf("# perf/memory: P=%d, %s, strategy %s, %d steps; peak tensor bytes per rank "
               "(measured: the largest over the ranks)\n"
               "%-12s %2s %5s %-9s %14s %14s %7s\n",
               P, sb_optimizer_name(opt), strategy, steps, "model", "p", "zero", "recompute",
               "predicted_MB", "measured_MB", "ratio");
    for (size_t k = 0; k < sizeof MODELS / sizeof *MODELS; k++) {
        const bench_model *bm = &MODELS[k];
        char want[256];
        snprintf(want, sizeof want, ",%s,", models);
        char key[64];
        snprintf(key, sizeof key, ",%s,", bm->name);
        if (!strstr(want, key))
            continue;
        sb_setting set[16];
        int nset = parse_sets(bm->sets, set, 16, &err);
        sb_model m;
        if (nset < 0 || sb_model_load(bm->path, set, nset, &m, &err))
            die(bm->name, &err);
        sb_cost_params cp;
        sb_cost_params_default(&cp);
        sb_problem pb0;
        if (sb_problem_build(&m, P, &cp, &pb0, &err))
            die("problem", &err);
        int *choice = calloc((size_t)m.nops, sizeof *choice);
        if (!choice)
            die("out of memory", NULL);
        if (!strcmp(strategy, "dp")) {
            if (sb_strategy_data_parallel(&pb0, choice, &err))
                die("dp", &err);
        } else {
            sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 1024};
            sb_result r;
            if (sb_search(&pb0, &so, &r, &err))
                die("search", &err);
            memcpy(choice, r.choice, (size_t)m.nops * sizeof *choice);
            sb_result_free(&r);
        }
        for (int zero = 0; zero <= 3; zero++)
            for (int rc = 0; rc <= 1 && nrows < 64; rc++) {
                cp.zero = zero;
                cp.recompute = rc ? SB_RECOMPUTE_ALL : SB_RECOMPUTE_NONE;
                sb_problem pb;
                if (sb_problem_build(&m, P, &cp, &pb, &err))
                    die("problem", &err);
                row *w = &rows[nrows++];
                *w = (row){.model = bm->name, .zero = zero, .recompute = rc, .nops = m.nops};
                snprintf(w->params, sizeof w->params, "%s", bm->sets);
                w->predicted = sb_strategy_memory_rc(&pb, choice, NULL, opt, NULL);
                w->measured = measure(&pb, choice, zero, rc,
                                      opt == SB_OPTIM_ADAM ? SB_UPDATE_ADAM : SB_UPDATE_SGD, steps);
                if (me == 0) {
                    printf("%-12s %2d %5d %-9s %14.1f %14.1f %7.3f\n", bm->name, P, zero,
                           rc ? "all" : "none", w->predicted / 1e6, w->measured / 1e6,
                           w->measured / w->predicted);
                    fflush(stdout);
                }
                sb_problem_free(&pb);
            }
        free(choice);
        sb_problem_free(&pb0);
        sb_model_free(&m);
    }
    if (me == 0 && strcmp(db_path, "none")) {
        char cmd[1024] = "";
        size_t used = 0;
        for (int i = 0; i < argc && used < sizeof cmd; i++)
            used += (size_t)snprintf(cmd + used, sizeof cmd - used, "%s%s", i ? " " : "", argv[i]);
        store(db_path, rows, nrows, strategy, opt, steps, cmd);
    }
    MPI_Finalize();
    return 0;
}
