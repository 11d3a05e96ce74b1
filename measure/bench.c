/* measure/bench.c: the bench (`shardbench bench`): for each model and device count, prune to
 * survivors (`shardbench prune` as a subprocess), train each survivor for a
 * few steps (`LAUNCHER -np P shardbench run ... --format json`), and record
 * everything under one run id: one measurement per strategy, each its own
 * transaction, failures and timeouts included; then Spearman's rho of
 * predicted cost against measured step time per (model, P). Not a runner:
 * the training is `shardbench run`'s, the pruning `prune`'s. */
#define _GNU_SOURCE
#include <cblas.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shardbench/precision.h"
#include "shardbench/machine.h"
#include "shardbench/megatron.h"
#include "shardbench/measure.h"
#include "shardbench/profile.h"
#include "shardbench/paper.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"
#include "shardbench/query.h"
#include "shardbench/results.h"

#include "proc.h"
#include "survivors.h"

#define BENCH_MAX_SET SB_BENCH_MAX_SET
#define ROUND_MAX 64 /* strategies in one launch of a trial round: run's limit */
#define RUN_TAIL_MAX (14 + 2 * ROUND_MAX) /* words after the launcher's (run_tail, profile) */

typedef sb_bench_set bench_set;
typedef sb_bench_opts bench_args;


static volatile sig_atomic_t interrupted;

/* Redraws the progress line (elapsed time) while a child runs; set by the bench. */
static void (*tick)(void);

static void on_signal(int sig) { interrupted = sig; }

/* --------------------------------------------------------- survivors ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* ------------------------------------------------------------- metadata -- */

static void cpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c += 1 + strspn(c + 1, " \t");
                c[strcspn(c, "\n")] = '\0';
                snprintf(buf, n, "%s", c);
            }
            break;
        }
    fclose(f);
}

/* First line of a command's output, "" if it fails. */
static void first_line(const char *cmd, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = popen(cmd, "r");
    if (!f)
        return;
    if (!fgets(buf, (int)n, f))
        buf[0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    pclose(f);
}

static void run_meta_text(const bench_args *a, char *devices, size_t nd, char *versions,
                          size_t nv)
{
    int pmax = 1;
    for (int i = 0; i < a->np; i++)
        if (a->ps[i] > pmax)
            pmax = a->ps[i];
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi, &len);
    mpi[strcspn(mpi, ",\n")] = '\0';
    if (!strcmp(a->backend, "cuda")) {
        char gpu[256], drv[128];
        first_line("nvidia-smi --query-gpu=count,name,memory.total --format=csv,noheader "
                   "2>/dev/null",
                   gpu, sizeof gpu);
        first_line("nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null", drv,
                   sizeof drv);
        snprintf(devices, nd, "up to %d x cuda device (%s)", pmax, gpu[0] ? gpu : "nvidia-smi "
                 "gave nothing");
        snprintf(versions, nv, "driver=%s mpi=%s sqlite=%s", drv[0] ? drv : "unknown", mpi,
                 sqlite3_libversion());
    } else {
        char cpu[256];
        cpu_name(cpu, sizeof cpu);
        snprintf(devices, nd, "up to %d x %s rank on %s (%ld cores)", pmax, a->backend, cpu,
                 sysconf(_SC_NPROCESSORS_ONLN));
        snprintf(versions, nv, "mpi=%s openblas=%s sqlite=%s", mpi, openblas_get_config(),
                 sqlite3_libversion());
    }
}

static void join_argv(int argc, char **argv, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "shardbench");
    for (int i = 0; i < argc && used < n; i++) {
        int quote = strpbrk(argv[i], " \t'\"") != NULL || !argv[i][0];
        used += (size_t)snprintf(buf + used, n - used, quote ? " '%s'" : " %s", argv[i]);
    }
}

/* ------------------------------------------------------------ the bench -- */

typedef struct {
    const bench_args *a;
    sb_db *db;
    sb_dbq *q;
    int64_t run_id;
    launcher launch;
    char self[PATH_MAX];
    int tty;
    double t0;
    int measured, ok, failed, skipped, group_failures;
    double other; /* the other cores busy during the last launch (sb_bench_other_cores) */
} bench;

static void fmt_dur(double s, char *buf, size_t n)
{
    if (!(s >= 0) || s > 1e7)
        snprintf(buf, n, "?");
    else if (s < 3600)
        snprintf(buf, n, "%d:%02d", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
}

/* The progress line's state, redrawn by tick() while a strategy runs. */
static struct {
    bench *b;
    char model[64], kind[32];
    int p, i, n, done;
    double group_t0, started, last;
} prog;

static void draw_progress(void)
{
    bench *b = prog.b;
    if (!b || !b->tty)
        return;
    double now = sb_now();
    if (now - prog.last < 0.5 && prog.last > 0)
        return;
    prog.last = now;
    char el[32], eta[32];
    fmt_dur(now - b->t0, el, sizeof el);
    if (prog.done > 0) { /* mean time per strategy so far, times what is left */
        double per = (prog.started - prog.group_t0) / prog.done;
        double left = per * (prog.n - prog.done) - (now - prog.started);
        fmt_dur(left > 0 ? left : 0, eta, sizeof eta);
    } else
        snprintf(eta, sizeof eta, "?");
    fprintf(stderr, "\r\033[K%s p=%d  strategy %d of %d (%s)  elapsed %s  ETA %s", prog.model,
            prog.p, prog.i, prog.n, prog.kind, el, eta);
    fflush(stderr);
}

static void progress(bench *b, const char *model, int p, int i, int n, const char *kind,
                     double group_t0, int done_in_group)
{
    prog.b = b;
    snprintf(prog.model, sizeof prog.model, "%.60s", model);
    snprintf(prog.kind, sizeof prog.kind, "%.30s", kind);
    prog.p = p;
    prog.i = i;
    prog.n = n;
    prog.done = done_in_group;
    prog.group_t0 = group_t0;
    prog.started = sb_now();
    prog.last = 0;
    tick = draw_progress;
    draw_progress();
}

static void clear_progress(bench *b)
{
    if (b->tty) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

/* Whether a --set limited to `only` applies to the model given as `name`
 * (a shipped name, or a file whose base name without ".model" counts too). */
static int set_applies(const char *only, const char *name)
{
    if (!only[0] || !strcmp(only, name))
        return 1;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    size_t n = strlen(base);
    if (n > 6 && !strcmp(base + n - 6, ".model"))
        n -= 6;
    return strlen(only) == n && !strncmp(only, base, n);
}

/* The --set arguments that apply to model `name`, parsed and as argv words. */
static int model_settings(const bench_args *a, const char *name, sb_setting *set, char **argv_out,
                          int *nargv, sb_error *err)
{
    int n = 0;
    *nargv = 0;
    for (int i = 0; i < a->nset; i++) {
        const bench_set *s = &a->set[i];
        if (!set_applies(s->model, name))
            continue;
        if (sb_setting_parse(s->arg, &set[n], err))
            return -1;
        n++;
        argv_out[(*nargv)++] = "--set";
        argv_out[(*nargv)++] = (char *)s->arg;
    }
    return n;
}

/* Already measured in the run being resumed? */
static int measured_before(bench *b, const char *model, const char *params, int p,
                           const char *kind, const char *json, sb_error *err)
{
    if (!b->a->resume)
        return 0;
    return sb_dbq_run_has_measurement(b->q, b->run_id, model, params, p, kind, json, err);
}

static int searched_before(bench *b, const char *model, const char *params, int p,
                           const char *algo, sb_error *err)
{
    if (!b->a->resume)
        return 0;
    return sb_dbq_run_has_search(b->q, b->run_id, model, params, p, algo, err);
}

/* Times the search algorithms on pb and stores them (search_runs) under the run. */
static int time_searches(bench *b, const sb_problem *pb, const char *params, sb_error *err)
{
    if (!strcmp(b->a->algos, "none"))
        return 0;
    char list[256], *save = NULL;
    snprintf(list, sizeof list, "%s", b->a->algos);
    for (char *algo = strtok_r(list, ",", &save); algo; algo = strtok_r(NULL, ",", &save)) {
        sb_search_opts so = {.max_table_mb = 1024};
        if (!strcmp(algo, "pase"))
            so.algo = SB_ALGO_PASE;
        else if (!strcmp(algo, "bf"))
            so.algo = SB_ALGO_BF;
        else
            return sb_fail(err, SB_EXIT_INPUT, "--search-algos: '%s' is not pase or bf", algo);
        int before = searched_before(b, pb->m->name, params, pb->p, algo, err);
        if (before < 0)
            return -1;
        if (before)
            continue;
        sb_result r;
        sb_error serr = {0};
        if (sb_search(pb, &so, &r, &serr)) {
            printf("%s p=%d: search %s: %s (not stored)\n", pb->m->name, pb->p, algo, serr.msg);
            continue;
        }
        char *json = sb_result_json_str(pb, &r, algo);
        sb_search_record rec = {
            .source = "bench", .model = pb->m->name, .model_path = pb->m->path,
            .params = params, .p = pb->p, .algo = algo, .tflops = pb->cp.tflops,
            .gbs = pb->cp.gbs, .cutoff = pb->cp.cutoff, .total_cost = r.total_cost,
            .seconds = r.seconds, .nops = pb->m->nops, .max_configs = r.max_configs,
            .max_dep_set = r.max_dep_set, .peak_table_bytes = r.peak_table_bytes,
            .peak_rss_bytes = (double)sb_peak_rss(), .strategy_json = json ? json : "{}",
        };
        int64_t id;
        int rc = sb_db_record_search(b->db, &rec, &id, err) ||
                 sb_dbq_link_search(b->q, id, b->run_id, err);
        free(json);
        sb_result_free(&r);
        if (rc)
            return -1;
        printf("%s p=%d: search %s %.4f s, cost %.4g FLOP\n", pb->m->name, pb->p, algo,
               rec.seconds, rec.total_cost);
    }
    return 0;
}

/* Spearman's rho over this run's ok strategies of (model, params, p): stored, printed. */
static int correlate(bench *b, const char *model, const char *params, int p, sb_error *err)
{
    sb_qmeas *rows;
    int n;
    if (sb_dbq_run_measurements(b->q, b->run_id, &rows, &n, err))
        return -1;
    int64_t model_id = 0;
    for (int i = 0; i < n && !model_id; i++)
        if (!strcmp(rows[i].model, model) && !strcmp(rows[i].params, params) && rows[i].p == p)
            model_id = rows[i].model_id;
    double *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
    int *idx = calloc((size_t)n + 1, sizeof *idx);
    int rc = -1;
    if (!x || !y || !idx) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    int np = model_id ? sb_q_points(rows, n, model_id, p, x, y, idx) : 0;
    double rho = NAN;
    if (sb_spearman(x, y, np, &rho))
        rho = NAN;
    if (model_id && sb_dbq_record_correlation(b->q, b->run_id, model, params, p, np, rho, err))
        goto out;
    if (isfinite(rho))
        printf("%s p=%d: Spearman rho(predicted cost, measured median step) = %.3f over %d "
               "strategies\n", model, p, rho, np);
    else
        printf("%s p=%d: Spearman rho undefined (%d strateg%s measured ok, or no spread)\n",
               model, p, np, np == 1 ? "y" : "ies");
    rc = 0;
out:
    free(x);
    free(y);
    free(idx);
    free(rows);
    return rc;
}

/* Reads the run's JSON (last line of stdout that starts with '{'). */
/* One line of run's --format json (from '{' to the end of the line) into
 * rec; *strategy: the "strategy" it names (malloc'd; NULL if none). */
static int parse_run_line(const char *line, sb_measurement_record *rec, char **strategy,
                          sb_error *err)
{
    size_t len = strcspn(line, "\n");
    char *text = strndup(line, len);
    if (!text)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    sb_json *j = sb_json_parse(text, err);
    free(text);
    if (!j)
        return -1;
    if (strategy) {
        const sb_json *js = sb_json_get(j, "strategy");
        *strategy = js && js->type == SB_JSON_STR ? strdup(js->str) : NULL;
    }
    const sb_json *st = sb_json_get(j, "step_seconds"), *losses = sb_json_get(j, "losses");
    const sb_json *peaks = sb_json_get(j, "peak_bytes_per_rank");
    rec->step_median_s = sb_json_num(sb_json_get(st, "median"), NAN);
    rec->step_min_s = sb_json_num(sb_json_get(st, "min"), NAN);
    rec->step_max_s = sb_json_num(sb_json_get(st, "max"), NAN);
    int warm = (int)sb_json_num(sb_json_get(j, "warmup"), 0);
    rec->steps = losses && losses->type == SB_JSON_ARR ? losses->n - warm : 0;
    double peak = 0;
    for (int i = 0; peaks && i < peaks->n; i++)
        if (sb_json_num(sb_json_at(peaks, i), 0) > peak)
            peak = sb_json_num(sb_json_at(peaks, i), 0);
    rec->peak_mem_bytes = peak;
    rec->probe_s = sb_json_num(sb_json_get(j, "probe_seconds"), NAN);
    int bad = !isfinite(rec->step_median_s) || rec->steps < 1;
    sb_json_free(j);
    if (bad) {
        if (strategy) {
            free(*strategy);
            *strategy = NULL;
        }
        return sb_fail(err, SB_EXIT_INTERNAL, "run's JSON has no step times");
    }
    return 0;
}

/* run's report: its last JSON line. */
static int parse_run_json(const char *out, sb_measurement_record *rec, sb_error *err)
{
    const char *line = NULL;
    for (const char *s = out; *s;) {
        if (*s == '{')
            line = s;
        const char *e = strchr(s, '\n');
        if (!e)
            break;
        s = e + 1;
    }
    if (!line)
        return sb_fail(err, SB_EXIT_INTERNAL, "run printed no JSON");
    return parse_run_line(line, rec, NULL, err);
}

/* ------------------------------------------------- other work on the machine -- */

int sb_proc_stat_busy(const char *line, double hz, double *busy_s)
{
    unsigned long long v[8];
    if (!line || strncmp(line, "cpu ", 4) || !(hz > 0) ||
        sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) != 8)
        return -1;
    /* user nice system idle iowait irq softirq steal: all but idle and iowait */
    *busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
    return 0;
}

double sb_bench_other_cores(double busy0, double busy1, double own_cpu_s, double wall_s)
{
    if (!isfinite(busy0) || !isfinite(busy1) || !isfinite(own_cpu_s) || !isfinite(wall_s) ||
        wall_s <= 0)
        return NAN;
    double c = (busy1 - busy0 - own_cpu_s) / wall_s;
    return c > 0 ? c : 0;
}

int sb_bench_retry_pick(int n, const int *skip, const int *ok, const int *clean, int *pick)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        pick[i] = !(skip && skip[i]) && ok[i] > 0 && clean[i] == 0;
        k += pick[i];
    }
    return k;
}

int sb_bench_binding(int p, int cpus, const char **words)
{
    if (p <= cpus) {
        words[0] = "--bind-to";
        words[1] = "none";
        return 2;
    }
    words[0] = "--map-by";
    words[1] = "core";
    words[2] = "--bind-to";
    words[3] = "core:overload-allowed";
    return 4;
}

int sb_bench_idle_env(int yield_idle)
{
    if (!yield_idle || getenv("OMPI_MCA_mpi_yield_when_idle"))
        return 0;
    return setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0) == 0;
}

/* The machine's busy seconds now (/proc/stat); *s stays NaN without it. */
static void machine_busy(double *s)
{
    char line[512];
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return;
    if (fgets(line, sizeof line, f) && sb_proc_stat_busy(line, (double)sysconf(_SC_CLK_TCK), s))
        *s = NAN;
    fclose(f);
}

static double rusage_s(const struct rusage *r)
{
    return (double)r->ru_utime.tv_sec + 1e-6 * (double)r->ru_utime.tv_usec +
           (double)r->ru_stime.tv_sec + 1e-6 * (double)r->ru_stime.tv_usec;
}

/* A launch that ran beside other processes' work: over --other-cores. */
static int beside_other(const bench *b, double other)
{
    return isfinite(other) && other > b->a->other_cores;
}

/* Whether the machine is free of other work now: its busy cores over 0.4 s
 * while the bench runs nothing (its children are done) under
 * --other-cores; *other gets them. A retry is worth a launch only then:
 * other work here lasts seconds to minutes, and a launch beside it would
 * only take the same figures again. */
static int quiet_now(const bench *b, double *other)
{
    double b0 = NAN, b1 = NAN, w0 = sb_now();
    machine_busy(&b0);
    struct timespec ts = {0, 400 * 1000 * 1000};
    while (nanosleep(&ts, &ts) && errno == EINTR && !interrupted)
        ;
    machine_busy(&b1);
    *other = sb_bench_other_cores(b0, b1, 0, sb_now() - w0);
    return !beside_other(b, *other);
}

/* Runs `LAUNCHER -np P TAIL... SET...` (the launcher's words, with {P}
 * substituted where it has it) under the bench's time limit: the one way a
 * bench starts ranks (run_survivor, run_profiles). Returns sb_proc_run's
 * status; *pr holds the outcome. */
static int launch(bench *b, int p, char *const *tail, int ntail, char **set_argv, int nset_argv,
                  double timeout, proc_result *pr, sb_error *err)
{
    enum { MAX_TAIL = RUN_TAIL_MAX };
    if (b->launch.n > SB_LAUNCHER_MAX_WORDS || nset_argv > 2 * BENCH_MAX_SET || ntail > MAX_TAIL)
        return sb_fail(err, SB_EXIT_INPUT, "too many launcher words or --set options");
    char *argv[SB_LAUNCHER_MAX_WORDS + 6 + MAX_TAIL + 2 * BENCH_MAX_SET + 1], pbuf[16];
    char *subst[SB_LAUNCHER_MAX_WORDS] = {0};
    int k = 0;
    for (int i = 0; i < b->launch.n; i++)
        argv[k++] = b->launch.has_p ? (subst[i] = sb_launcher_subst(b->launch.words[i], p))
                                    : b->launch.words[i];
    if (b->launch.is_default) {
        const char *bind[4];
        int nb = sb_bench_binding(p, (int)sysconf(_SC_NPROCESSORS_ONLN), bind);
        for (int i = 0; i < nb; i++)
            argv[k++] = (char *)bind[i];
    }
    snprintf(pbuf, sizeof pbuf, "%d", p);
    if (!b->launch.has_p) {
        argv[k++] = "-np";
        argv[k++] = pbuf;
    }
    for (int i = 0; i < ntail; i++)
        argv[k++] = tail[i];
    for (int i = 0; i < nset_argv; i++)
        argv[k++] = set_argv[i];
    argv[k] = NULL;
    double busy0 = NAN, busy1 = NAN, w0 = sb_now();
    struct rusage r0, r1;
    machine_busy(&busy0);
    getrusage(RUSAGE_CHILDREN, &r0);
    int rc = sb_proc_run(argv, timeout, &interrupted, tick, pr, err);
    getrusage(RUSAGE_CHILDREN, &r1);
    machine_busy(&busy1);
    b->other = sb_bench_other_cores(busy0, busy1, rusage_s(&r1) - rusage_s(&r0), sb_now() - w0);
    for (int i = 0; i < b->launch.n; i++)
        free(subst[i]);
    return rc;
}

/* The words after the launcher's of `shardbench run` training the k
 * strategy files in turn (tail: room for RUN_TAIL_MAX words; steps and
 * warm: 16 chars each, the numbers' text). Returns the number of words. */
static int run_tail(bench *b, const char *model_arg, char *const *files, int k,
                    char **tail, char *steps, char *warm)
{
    const bench_args *a = b->a;
    int nt = 0;
    tail[nt++] = a->runner ? (char *)a->runner : b->self;
    tail[nt++] = "run";
    tail[nt++] = "-m";
    tail[nt++] = (char *)model_arg;
    for (int j = 0; j < k; j++) {
        tail[nt++] = "--strategy";
        tail[nt++] = files[j];
    }
    snprintf(steps, 16, "%d", a->steps);
    snprintf(warm, 16, "%d", a->warmup);
    char *rest[] = {"--steps", steps, "--warmup", warm, "--backend", (char *)a->backend,
                    "--format", "json", "--db", "none"};
    for (size_t j = 0; j < sizeof rest / sizeof rest[0]; j++)
        tail[nt++] = rest[j];
    return nt;
}

/* Trains one loaded survivor (LAUNCHER -np P shardbench run ... --format
 * json) and fills rec's status and step times, msg the reason of a
 * failure. -1 only when the child could not be run; *stop on interruption. */
static int run_survivor(bench *b, const char *model_arg, char **set_argv, int nset_argv,
                        const sb_problem *pb, const survivor *sv, sb_measurement_record *rec,
                        char *msg, size_t nmsg, int *stop, sb_error *err)
{
    const bench_args *a = b->a;
    proc_result pr = {0};
    char *tail[RUN_TAIL_MAX], steps[16], warm[16], *file = (char *)sv->file;
    int nt = run_tail(b, model_arg, &file, 1, tail, steps, warm);
    if (sv->got) { /* trained by this round's launch (run_round) */
        rec->step_median_s = sv->res.step_median_s;
        rec->step_min_s = sv->res.step_min_s;
        rec->step_max_s = sv->res.step_max_s;
        rec->steps = sv->res.steps;
        rec->peak_mem_bytes = sv->res.peak_mem_bytes;
        rec->probe_s = sv->res.probe_s;
        rec->status = "ok";
        return 0;
    }
    int rc = launch(b, pb->p, tail, nt, set_argv, nset_argv, a->timeout, &pr, err);
    if (rc)
        return -1;
    if (pr.stopped) {
        sb_proc_result_free(&pr);
        *stop = 1;
        return 0;
    }
    sb_error perr = {0};
    if (pr.timed_out) {
        rec->status = "timeout";
        snprintf(msg, nmsg, "killed after the --timeout of %g s", a->timeout);
    } else if (pr.code != 0) {
        char why[512];
        sb_failure_line(pr.errs, why, sizeof why);
        rec->status = strstr(pr.errs, "training diverged")  ? "diverged" /* run's words */
                      : strcasestr(pr.errs, "out of memory") ? "oom"
                                                              : "error";
        if (pr.sig)
            snprintf(msg, nmsg, "%s (killed by signal %d)", why, pr.sig);
        else
            snprintf(msg, nmsg, "%s (exit %d)", why, pr.code);
    } else if (parse_run_json(pr.out, rec, &perr)) {
        rec->status = "error";
        snprintf(msg, nmsg, "%s", perr.msg);
    } else {
        rec->status = "ok";
    }
    sb_proc_result_free(&pr);
    return 0;
}

/* Trial round t's strategies (those not skipped) trained in turn by one
 * launch of `run --strategy A --strategy B ...` (ROUND_MAX a launch): the
 * launcher's start-up, a second or more, once a round instead of once a
 * strategy. Each JSON line it prints (in order, naming its strategy) goes
 * to sv[i].res with sv[i].got set; a strategy without one (the launch
 * failed or timed out at it, and so stopped) is run alone by measure
 * (run_survivor), which gives it its own status, and so is every one after
 * it. The launch's time limit: --timeout for each strategy in it. Round t
 * of T starts its order t/T of the way through the strategies (a rotation),
 * so that no strategy always runs first in its launch or at the same point
 * of it: a phase of the machine or of the process tied to a position in the
 * launch spreads over the strategies. Returns -1 only when the child could
 * not be run. */
static int run_round(bench *b, const char *model_arg, char **set_argv, int nset_argv,
                     const sb_problem *pb, survivor *sv, int n, const int *skip, int round,
                     int rounds, int *stop, sb_error *err)
{
    const bench_args *a = b->a;
    int *order = sb_calloc((size_t)n + 1, sizeof *order, err), no = 0;
    if (!order)
        return -1;
    for (int i = 0; i < n; i++) {
        sv[i].got = 0;
        if (!skip[i])
            order[no++] = i;
    }
    int off = rounds > 0 ? (int)((long)round * no / rounds) : 0;
    for (int i0 = 0; i0 < no && !*stop;) {
        int idx[ROUND_MAX], k = 0;
        for (; i0 < no && k < ROUND_MAX; i0++)
            idx[k++] = order[(i0 + off) % no];
        if (k < 2)
            continue; /* one alone: measure launches it as before */
        char *tail[RUN_TAIL_MAX], steps[16], warm[16], *files[ROUND_MAX];
        for (int j = 0; j < k; j++)
            files[j] = sv[idx[j]].file;
        int nt = run_tail(b, model_arg, files, k, tail, steps, warm);
        proc_result pr = {0};
        if (launch(b, pb->p, tail, nt, set_argv, nset_argv, a->timeout * k, &pr, err)) {
            free(order);
            return -1;
        }
        if (pr.stopped)
            *stop = 1;
        /* its JSON lines, in order; the first that is missing or names
         * another strategy ends the match */
        int j = 0;
        for (const char *l = pr.out; l && *l && j < k && !pr.stopped;) {
            if (*l == '{') {
                sb_error perr = {0};
                char *name = NULL;
                survivor *v = &sv[idx[j]];
                memset(&v->res, 0, sizeof v->res);
                if (parse_run_line(l, &v->res, &name, &perr) || !name || strcmp(name, v->file)) {
                    free(name);
                    break;
                }
                free(name);
                v->got = 1;
                v->other = b->other;
                j++;
            }
            const char *e = strchr(l, '\n');
            l = e ? e + 1 : NULL;
        }
        sb_proc_result_free(&pr);
    }
    free(order);
    return 0;
}

/* bench --profile N: launches first..last (1-based, of N) of `shardbench
 * profile` of this model at P (the bench's launcher, the bench's database,
 * seed 1: every launch runs the same strategies, so that the fastest launch
 * can be told, profile.h). Launch 1 runs right before the pair is priced and
 * pruned; with --trials T > 1 launch k runs right before trial round k (the
 * rest before the last), so that the profiles and the trials sample the
 * same phases of the machine, and the strategies are priced again after the
 * last (reprice). Returns -1 only on interruption or a failed launch (err
 * says which). */
static int run_profiles(bench *b, const char *model_arg, char **set_argv, int nset_argv, int p,
                        const char *machine_name, int first, int last, int *stop, sb_error *err)
{
    const bench_args *a = b->a;
    int again = 0; /* launches run again: they ran beside other work */
    for (int rep = first; rep <= last; rep++) {
        char steps[16];
        snprintf(steps, sizeof steps, "%d", a->steps);
        char *tail[] = {b->self, "profile", "-m", (char *)model_arg, "--machine",
                        (char *)machine_name, "--db", (char *)a->db, "--backend",
                        (char *)a->backend, "--seed", "1", "--steps", steps, "--warmup", "1",
                        "--strategies", "16", "--quiet"};
        enum { NTAIL = sizeof tail / sizeof tail[0] };
        proc_result pr = {0};
        int rc = launch(b, p, tail, NTAIL, set_argv, nset_argv, a->timeout, &pr, err);
        if (rc)
            return -1;
        if (pr.stopped) {
            sb_proc_result_free(&pr);
            *stop = 1;
            return -1;
        }
        if (pr.code != 0 || pr.timed_out) {
            char why[512];
            sb_failure_line(pr.errs, why, sizeof why);
            sb_proc_result_free(&pr);
            return sb_fail(err, SB_EXIT_INTERNAL, "bench: `shardbench profile -m %s` on %d ranks "
                           "failed: %s", model_arg, p, pr.timed_out ? "timed out" : why);
        }
        sb_proc_result_free(&pr);
        double now;
        if (beside_other(b, b->other) && again < a->retries) {
            /* stored as it is (the loader takes the fastest of the newest
             * launches, profile.h); one more of the same once the machine
             * is free of the other work */
            int quiet = quiet_now(b, &now);
            clear_progress(b);
            printf("%s p=%d: profile launch %d ran beside other work (%.2f cores not its "
                   "own); %s (%.2f cores busy now)\n", model_arg, p, rep, b->other,
                   quiet ? "launched again" : "kept: the other work goes on", now);
            if (quiet) {
                again++;
                rep--;
            } else {
                again = a->retries; /* the rest of this pair's launches as they come */
            }
        }
    }
    if (first <= last) {
        clear_progress(b);
        if (first == last)
            printf("%s p=%d: profiled (launch %d of %d of shardbench profile, machine %s)\n",
                   model_arg, p, first, a->profile, machine_name);
        else
            printf("%s p=%d: profiled (launches %d-%d of %d of shardbench profile, machine %s)\n",
                   model_arg, p, first, last, a->profile, machine_name);
    }
    return 0;
}

/* The profile launches that run before trial round t (0-based) of T; launch
 * k (1-based, of N) runs before round min(k - 1, T - 1). *first > *last:
 * none. */
static void profile_launches(int n, int trials, int t, int *first, int *last)
{
    if (trials <= 1) {
        *first = t == 0 ? 1 : n + 1;
        *last = n;
        return;
    }
    *first = t + 1;
    *last = t < trials - 1 ? t + 1 : n;
    if (*last > n)
        *last = n;
}

/* The cost model of (m, p) as bench_pair prices it: the machine file or
 * calibration, then the machine's profiles in the bench's database (cmodel
 * says which); 1 when it cannot be built or its profiles not read (perr
 * says why). */
/* The machine's cost parameters at --precision (the file's own without it). */
static int bench_machine_params(const bench_args *a, const sb_machine *mc, sb_cost_params *cp,
                                sb_error *perr)
{
    int prec = -1;
    if (a->precision && sb_precision_parse(a->precision, "--precision", &prec, perr))
        return -1;
    return sb_machine_cost_params_at(mc, prec, 0.0, cp, perr);
}

/* With a GPU machine file the model is priced as a GPU framework runs it
 * (models/gpu_run.c: fused attention, autograd's memory), as search and
 * prune price it; the CPU runtime that measures it ignores the marks. */
static int bench_gpu_run(const bench_args *a, sb_model *m, sb_error *err)
{
    sb_machine mc;
    if (!a->machine)
        return 0;
    if (sb_machine_load(a->machine, &mc, err))
        return -1;
    if (!sb_machine_has_gpu_model(&mc))
        return 0;
    return sb_model_gpu_run(m, 1, err);
}

static int price_problem(bench *b, const sb_model *m, int p, sb_problem *pb, char *cmodel,
                         size_t ncmodel, sb_error *perr)
{
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_machine mc;
    cmodel[0] = 0;
    if (b->a->machine && !sb_machine_load(b->a->machine, &mc, perr))
        (void)bench_machine_params(b->a, &mc, &cp, perr);
    if (perr->code || (b->a->calibration && sb_calibration_load(b->a->calibration, &cp, perr))
        || sb_problem_build(m, p, &cp, pb, perr))
        return 1;
    if (sb_profile_use_q(pb, b->q, cmodel, ncmodel, perr) < 0) {
        sb_problem_free(pb);
        return 1;
    }
    return 0;
}

/* After the last profile launch: every plain strategy measured in this pair
 * priced by the profiles as they are now, its rows updated (sb_dbq_reprice),
 * one line with the largest change. */
static int reprice(bench *b, const sb_model *m, int p, survivor *sv, int n, sb_error *err)
{
    sb_problem pb;
    sb_error perr = {0};
    char cmodel[1024];
    if (price_problem(b, m, p, &pb, cmodel, sizeof cmodel, &perr)) {
        fprintf(stderr, "shardbench: %s p=%d: pricing again: %s\n", m->name, p, perr.msg);
        return 0; /* the first prices stay */
    }
    int *choice = sb_calloc((size_t)m->nops, sizeof *choice, err);
    if (!choice) {
        sb_problem_free(&pb);
        return -1;
    }
    int count = 0;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        if (!sv[i].meas_id || sb_strategy_load_choice(sv[i].file, &pb, choice, &perr))
            continue;
        double cost = sb_strategy_cost(&pb, choice);
        double sec = pb.cp.calibration[0] || pb.cp.machine[0] ? cost / (pb.cp.tflops * 1e12)
                                                             : NAN;
        if (sb_dbq_reprice(b->q, b->run_id, sv[i].meas_id, cost, sec, pb.cp.profile_probe_s,
                           err)) {
            free(choice);
            sb_problem_free(&pb);
            return -1;
        }
        double ch = isfinite(sv[i].cost) && sv[i].cost > 0 ? fabs(cost / sv[i].cost - 1) : 0;
        worst = ch > worst ? ch : worst;
        sv[i].cost = cost;
        count++;
    }
    free(choice);
    sb_problem_free(&pb);
    clear_progress(b);
    printf("%s p=%d: %d strateg%s priced again after the last profile launch; the largest "
           "change %.1f%%\n", m->name, p, count, count == 1 ? "y" : "ies", 100.0 * worst);
    return 0;
}

/* Measures one survivor and records it. Returns -1 only on a database error
 * (or interruption: *stop set), never for the strategy's own failure. */
static int measure(bench *b, const char *model_arg, char **set_argv, int nset_argv,
                   const sb_problem *pb, const char *params, survivor *sv, int trial,
                   int *skip, int *stop, sb_error *err)
{
    int nops = pb->m->nops;
    int *choice = sb_calloc((size_t)nops, sizeof *choice, err);
    if (!choice)
        return -1;
    sb_measurement_record rec = {
        .run_id = b->run_id, .model = pb->m->name, .model_path = pb->m->path, .params = params,
        .nops = nops, .p = pb->p, .kind = sv->kind, .predicted_cost = sv->cost,
        .predicted_mem_bytes = sv->mem, .step_median_s = NAN, .step_min_s = NAN,
        .step_max_s = NAN, .predicted_s = NAN, .profile_probe_s = pb->cp.profile_probe_s,
    };
    char *json = NULL, msg[1024] = "";
    sb_error lerr = {0};
    /* a pipeline, ZeRO stage or recomputation (a version-2 file, which run
     * takes): stored with them (sb_strategy_json_str), priced at the
     * cost the file gives when the index has none */
    sb_strategy sf;
    int extras = 0;
    char desc[128] = ""; /* " S=2 M=4 1f1b zero 1 recompute 38" for the lines below */
    if (!sb_strategy_load(sv->file, pb->m, pb->p, &sf, &lerr)) {
        extras = sb_strategy_has_extras(pb->m, &sf);
        if (extras) {
            int nrec = 0;
            for (int i = 0; sf.recompute && i < nops; i++)
                nrec += sf.recompute[i] && sb_op_recomputable(&pb->m->ops[i]);
            snprintf(desc, sizeof desc, "  S=%d M=%d %s zero %d recompute %d", sf.pipe.nstages,
                     sf.pipe.microbatches, sb_schedule_name(sf.pipe.schedule), sf.zero, nrec);
            json = sb_strategy_json_str(pb->m, &sf, sv->kind);
            if (!isfinite(rec.predicted_cost) && isfinite(sf.cost) && sf.cost > 0)
                rec.predicted_cost = sf.cost;
            if (isfinite(rec.predicted_cost) && (pb->cp.calibration[0] || pb->cp.machine[0]))
                rec.predicted_s = rec.predicted_cost / (pb->cp.tflops * 1e12);
        }
        sb_strategy_free(&sf);
    }
    int loaded = extras || !sb_strategy_load_choice(sv->file, pb, choice, &lerr);
    if (extras) {
        if (!json) {
            free(choice);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        }
    } else if (loaded) {
        sb_result r = {.choice = choice, .total_cost = sb_strategy_cost(pb, choice)};
        if (!isfinite(rec.predicted_cost))
            rec.predicted_cost = r.total_cost;
        /* a calibrated or machine cost is FLOP-equivalents at F: a time */
        if (pb->cp.calibration[0] || pb->cp.machine[0])
            rec.predicted_s = rec.predicted_cost / (pb->cp.tflops * 1e12);
        json = sb_result_json_str(pb, &r, sv->kind);
    } else {
        const char *base = strrchr(sv->file, '/');
        json_t *j = json_pack("{s:s}", "unloadable_strategy_file", base ? base + 1 : sv->file);
        json = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
    }
    free(choice);
    if (!json)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    rec.configs_json = json;
    int before = trial || b->a->again
                     ? 0 : measured_before(b, pb->m->name, params, pb->p, sv->kind, json, err);
    if (before) {
        free(json);
        if (before > 0) {
            *skip = 1; /* and its later trials */
            b->skipped++;
            clear_progress(b);
            printf("%s p=%d  %-8s %s: measured in run %lld already, skipped\n", pb->m->name,
                   pb->p, sv->kind, sv->file, (long long)b->run_id);
        }
        return before < 0 ? -1 : 0;
    }
    int solo = !sv->got; /* run_survivor launches it alone: b->other is that launch's */
    if (!loaded) {
        rec.status = "error";
        snprintf(msg, sizeof msg, "strategy file: %.1000s", lerr.msg);
    } else if (run_survivor(b, model_arg, set_argv, nset_argv, pb, sv, &rec, msg, sizeof msg, stop,
                            err) || *stop) {
        free(json);
        return *stop ? 0 : -1;
    }
    if (strcmp(rec.status, "ok")) {
        rec.steps = 0;
        rec.message = msg;
        rec.peak_mem_bytes = 0;
    }
    int64_t meas_id = 0;
    int rc = sb_db_record_measurement(b->db, &rec, &meas_id, err);
    free(json);
    if (rc)
        return -1;
    if (loaded && !extras)
        sv->meas_id = meas_id;
    b->measured++;
    clear_progress(b);
    double other = solo ? b->other : sv->other;
    int trials = b->a->trials > 1 ? b->a->trials : 1;
    if (trial >= trials)
        printf("[retry %d/%d] ", trial - trials + 1, b->a->retries);
    else if (trials > 1)
        printf("[trial %d/%d] ", trial + 1, trials);
    if (!strcmp(rec.status, "ok")) {
        b->ok++;
        sv->n_ok++;
        sv->n_clean += !beside_other(b, other);
        char oc[48] = "";
        if (isfinite(other))
            snprintf(oc, sizeof oc, "  other %.2f cores%s", other,
                     beside_other(b, other) ? " (beside other work)" : "");
        printf("%s p=%d  %-8s ok       median %.4f s  min %.4f s  max %.4f s  predicted %.4g "
               "FLOP%s  %s%s\n", pb->m->name, pb->p, sv->kind, rec.step_median_s,
               rec.step_min_s, rec.step_max_s, rec.predicted_cost, oc, sv->file, desc);
    } else {
        b->failed++;
        printf("%s p=%d  %-8s %-8s %s  %s%s\n", pb->m->name, pb->p, sv->kind, rec.status, msg,
               sv->file, desc);
    }
    fflush(stdout);
    return 0;
}

/* Survivors of (model, p): from --survivors, or from `shardbench prune`. */
static int get_survivors(bench *b, const char *model_arg, const char *name, char **set_argv,
                         int nset_argv, int p, const char *workdir, char *dir, size_t ndir,
                         survivor **sv, int *n, sb_error *err)
{
    const bench_args *a = b->a;
    if (snprintf(dir, ndir, "%s/%s-p%d", a->survivors ? a->survivors : workdir, name, p) >=
        (int)ndir)
        return sb_fail(err, SB_EXIT_INPUT, "%s: path too long", dir);
    if (a->survivors)
        return survivors_read_index(dir, sv, n, err);
    char pbuf[16], within[32], top[16];
    snprintf(pbuf, sizeof pbuf, "%d", p);
    snprintf(within, sizeof within, "%g", a->within);
    snprintf(top, sizeof top, "%d", a->top);
    char *argv[160] = {b->self, "prune", "-m", (char *)model_arg, "-p", pbuf, "--within", within,
                       "--top", top, "--out", dir};
    int k = 12;
    if (a->calibration) {
        argv[k++] = "--calibration";
        argv[k++] = (char *)a->calibration;
    }
    if (a->machine) {
        argv[k++] = "--machine";
        argv[k++] = (char *)a->machine;
        argv[k++] = "--profiles"; /* the predictive model's profiles, where it has them */
        argv[k++] = (char *)a->db;
        if (a->precision) {
            argv[k++] = "--precision";
            argv[k++] = (char *)a->precision;
        }
    }
    for (int i = 0; i < nset_argv; i++)
        argv[k++] = set_argv[i];
    argv[k] = NULL;
    proc_result pr;
    if (sb_proc_run(argv, a->timeout, &interrupted, tick, &pr, err))
        return -1;
    if (pr.stopped) {
        sb_proc_result_free(&pr);
        return sb_fail(err, SB_EXIT_INTERNAL, "interrupted");
    }
    if (pr.code != 0 || pr.timed_out) {
        char why[512];
        sb_failure_line(pr.errs, why, sizeof why);
        int unknown = strstr(pr.errs, "unknown command") != NULL, timed_out = pr.timed_out;
        sb_proc_result_free(&pr);
        return sb_fail(err, SB_EXIT_INTERNAL,
                       "bench: `shardbench prune -m %s -p %d` failed: %s%s", model_arg, p,
                       timed_out ? "timed out" : why,
                       unknown ? " (this shardbench has no prune command yet; give the "
                                 "survivors with --survivors DIR, holding "
                                 "MODEL-pP/index.tsv)"
                               : "");
    }
    sb_proc_result_free(&pr);
    return survivors_read_index(dir, sv, n, err);
}

/* A strategy none of whose trials ran free of other processes' work gets
 * another round (all such in one launch), up to --retries, while the
 * machine is quiet: 0, or -1 with err. */
static int retry_busy(bench *b, const char *model_arg, char **set_argv, int nset_argv,
                      const sb_problem *pb, const char *params, survivor *sv, int n,
                      const int *skip, int trials, const char *name, int p, int *stop,
                      sb_error *err)
{
    /* a figure taken beside other work is not this machine's speed, and
     * the fastest of the others' trials is compared with it */
    int *pick = calloc((size_t)n + 1, sizeof *pick), *ok = calloc((size_t)n + 1, sizeof *ok),
        *clean = calloc((size_t)n + 1, sizeof *clean);
    int rc = 0;
    if (!pick || !ok || !clean)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int e = 0; !rc && e < b->a->retries && !*stop; e++) {
        for (int i = 0; i < n; i++) {
            ok[i] = sv[i].n_ok;
            clean[i] = sv[i].n_clean;
        }
        int k = sb_bench_retry_pick(n, skip, ok, clean, pick);
        if (!k)
            break;
        double now;
        int quiet = quiet_now(b, &now);
        clear_progress(b);
        printf("%s p=%d: %d strateg%s ran only beside other work (over %.2g cores not the "
               "bench's); %s (%.2f cores busy now)\n", name, p, k, k == 1 ? "y" : "ies",
               b->a->other_cores, quiet ? "another round" : "kept: the other work goes on",
               now);
        if (!quiet)
            break;
        for (int i = 0; i < n; i++)
            pick[i] = !pick[i]; /* run_round's skip: the others */
        int r0 = run_round(b, model_arg, set_argv, nset_argv, pb, sv, n, pick, e,
                           b->a->retries, stop, err);
        clear_progress(b);
        if (r0 || *stop) {
            rc = r0 ? -1 : 0;
            break;
        }
        for (int i = 0; i < n && !*stop; i++) {
            if (pick[i])
                continue;
            int r = measure(b, model_arg, set_argv, nset_argv, pb, params, &sv[i], trials + e,
                            &pick[i], stop, err);
            clear_progress(b);
            if (r) {
                rc = -1;
                break;
            }
            if (interrupted)
                *stop = 1;
        }
        if (rc)
            break;
    }
    free(pick);
    free(ok);
    free(clean);
    return rc;
}

/* One (model, P): survivors, searches, measurements, correlation. Returns -1
 * on a database error or interruption (stop), 1 when this pair could not be
 * benched (reported; the bench goes on), 0 otherwise. */
static int bench_pair(bench *b, const char *model_arg, const sb_model *m, char **set_argv,
                      int nset_argv, int p, const char *workdir, int *stop, sb_error *err)
{
    char params[2048], dir[PATH_MAX];
    sb_params_str(m, params, sizeof params);
    sb_problem pb;
    sb_error perr = {0};
    char cmodel[1024], mname[300] = "";
    /* a machine's profiles in the bench's database: the predictive model
     * (prune is given the same database); with --profile the first fresh
     * launches first (run_profiles) */
    int trials = b->a->trials > 1 ? b->a->trials : 1, first, last;
    int profiling = b->a->profile && b->a->machine;
    if (profiling) {
        sb_machine mc;
        if (sb_machine_load(b->a->machine, &mc, &perr)) {
            fprintf(stderr, "shardbench: %s p=%d: %s\n", m->name, p, perr.msg);
            return 1;
        }
        sb_cost_params mcp;
        sb_cost_params_default(&mcp);
        if (bench_machine_params(b->a, &mc, &mcp, &perr)) {
            fprintf(stderr, "shardbench: %s p=%d: %s\n", m->name, p, perr.msg);
            return 1;
        }
        sb_machine_name(mcp.machine, mname, sizeof mname);
        profile_launches(b->a->profile, trials, 0, &first, &last);
        if (run_profiles(b, model_arg, set_argv, nset_argv, p, mname, first, last, stop, &perr)) {
            fprintf(stderr, "shardbench: %s\n", perr.msg);
            return *stop ? -1 : 1;
        }
    }
    if (price_problem(b, m, p, &pb, cmodel, sizeof cmodel, &perr)) {
        fprintf(stderr, "shardbench: %s p=%d: %s\n", m->name, p, perr.msg);
        return 1;
    }
    if (cmodel[0])
        printf("%s p=%d: %s\n", m->name, p, cmodel);
    survivor *sv = NULL;
    int n = 0, rc = 0;
    if (get_survivors(b, model_arg, m->name, set_argv, nset_argv, p, workdir, dir, sizeof dir,
                      &sv, &n, &perr) ||
        survivors_add_data_parallel(&pb, dir, &sv, &n, &perr) ||
        survivors_add_random(&pb, dir, b->a->random, b->a->random_seed, &sv, &n, &perr) ||
        (b->a->paper && survivors_add_paper(&pb, dir, &sv, &n, &perr))) {
        fprintf(stderr, "shardbench: %s\n", perr.msg);
        rc = interrupted ? -1 : 1;
        if (interrupted)
            *stop = 1;
        goto out;
    }
    printf("%s p=%d: %d strateg%s to measure (%s)\n", m->name, p, n, n == 1 ? "y" : "ies", dir);
    if (time_searches(b, &pb, params, err)) {
        rc = -1;
        goto out;
    }
    double g0 = sb_now();
    int done = 0, later_profiles = 0;
    int *skip = calloc((size_t)n + 1, sizeof *skip);
    if (!skip) {
        rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) /* --only MODEL/P/KIND,...: the others are skipped */
        if (b->a->only) {
            char tok[256];
            snprintf(tok, sizeof tok, ",%s/%d/%s,", m->name, p, sv[i].kind);
            size_t lo = strlen(b->a->only) + 3;
            char *list = malloc(lo);
            if (list)
                snprintf(list, lo, ",%s,", b->a->only);
            skip[i] = !list || !strstr(list, tok);
            free(list);
        }
    /* trial t of every strategy before trial t + 1: slow phases of the
     * machine spread over all strategies instead of hitting one */
    for (int t = 0; t < trials && !*stop; t++) {
        if (profiling && t > 0) {
            profile_launches(b->a->profile, trials, t, &first, &last);
            later_profiles += last >= first;
            if (run_profiles(b, model_arg, set_argv, nset_argv, p, mname, first, last, stop,
                             &perr)) {
                fprintf(stderr, "shardbench: %s\n", perr.msg);
                free(skip);
                rc = *stop ? -1 : 1;
                goto out;
            }
        }
        progress(b, m->name, p, t * n + 1, n * trials, "round", g0, done);
        int r0 = run_round(b, model_arg, set_argv, nset_argv, &pb, sv, n, skip, t, trials, stop,
                           err);
        clear_progress(b);
        if (r0 || *stop) {
            free(skip);
            rc = r0 ? -1 : 0;
            goto out;
        }
        for (int i = 0; i < n && !*stop; i++) {
            if (skip[i])
                continue;
            progress(b, m->name, p, t * n + i + 1, n * trials, sv[i].kind, g0, done);
            int before = b->measured;
            int r = measure(b, model_arg, set_argv, nset_argv, &pb, params, &sv[i], t, &skip[i],
                            stop, err);
            clear_progress(b);
            if (r) {
                free(skip);
                rc = -1;
                goto out;
            }
            done += b->measured > before;
            if (interrupted)
                *stop = 1;
        }
    }
    rc = retry_busy(b, model_arg, set_argv, nset_argv, &pb, params, sv, n, skip, trials, m->name,
                    p, stop, err);
    free(skip);
    if (rc || *stop)
        goto out;
    if (!*stop && later_profiles && reprice(b, m, p, sv, n, err))
        rc = -1;
    else if (!*stop && correlate(b, m->name, params, p, err))
        rc = -1;
out:
    free(sv);
    sb_problem_free(&pb);
    return rc;
}

static int bench_fail(const sb_error *err)
{
    fprintf(stderr, "shardbench: %s\n", err->msg);
    return err->code ? err->code : 1;
}

void sb_bench_opts_default(sb_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "cpu";
    o->db = SB_DB_DEFAULT_PATH;
    o->algos = "pase,bf";
    o->steps = 5;
    o->warmup = 1;
    o->top = 8;
    o->within = 2;
    o->timeout = 600;
    o->trials = 1;
    o->random_seed = 1;
    o->retries = 0;
    o->other_cores = 0.25;
}


/* The run: the resumed one (checked), or a new runs row; says which. */
static int open_run(bench *b, int argc, char **argv, sb_error *err)
{
    const bench_args *a = b->a;
    if (a->resume) {
        b->run_id = a->resume;
        if (sb_dbq_check_run(b->q, b->run_id, err))
            return -1;
        char shown[4 * PATH_MAX];
        sb_escape_controls(a->db, shown, sizeof shown, 0);
        printf("resuming run %lld in %s\n", (long long)b->run_id, shown);
        if (a->run_id_out)
            *a->run_id_out = b->run_id;
        return 0;
    }
    char devices[512], versions[512], cmdline[4096], commit[128], shown[4 * PATH_MAX];
    run_meta_text(a, devices, sizeof devices, versions, sizeof versions);
    join_argv(argc, argv, cmdline, sizeof cmdline);
    sb_run_meta meta = {.backend = a->backend, .devices = devices, .versions = versions,
                        .command_line = cmdline};
    if (a->runner) { /* a baseline build measures: its commit, not this build's */
        sb_runner_commit(a->runner, commit, sizeof commit);
        meta.git_commit = commit;
    }
    if (sb_db_begin_run(b->db, &meta, &b->run_id, err))
        return -1;
    sb_escape_controls(a->db, shown, sizeof shown, 0);
    printf("run %lld in %s\n", (long long)b->run_id, shown);
    if (a->run_id_out)
        *a->run_id_out = b->run_id;
    return 0;
}



/* Where the survivors are: --survivors, --workdir (created), or a new
 * temporary folder (*own set: removed at the end). */
static int make_workdir(const bench_args *a, char *workdir, size_t n, int *own, sb_error *err)
{
    if (a->survivors) {
        snprintf(workdir, n, "%s", a->survivors);
        return 0;
    }
    if (a->workdir) {
        snprintf(workdir, n, "%s", a->workdir);
        if (mkdir(workdir, 0777) && errno != EEXIST)
            return sb_fail(err, SB_EXIT_INPUT, "%s: cannot create: %s", workdir, strerror(errno));
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    sb_clean_stale_workdirs(tmp, "shardbench-bench-", "bench");
    /* the name carries our pid: a later bench removes it if we die */
    snprintf(workdir, n, "%s/shardbench-bench-%ld-XXXXXX", tmp, (long)getpid());
    if (!mkdtemp(workdir))
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot create: %s", workdir, strerror(errno));
    *own = 1;
    return 0;
}

int sb_bench(const sb_bench_opts *a, int argc, char **argv)
{
    sb_error err = {0};
    bench b = {.a = a, .tty = isatty(2), .t0 = sb_now()};
    ssize_t sl = readlink("/proc/self/exe", b.self, sizeof b.self - 1);
    if (sl <= 0)
        snprintf(b.self, sizeof b.self, "%s", "shardbench");
    else
        b.self[sl] = '\0';
    if (sb_launcher_parse(a->launcher, &b.launch, &err))
        return bench_fail(&err);
    sb_bench_idle_env(a->yield_idle); /* before any launch: they inherit it */
    int status = 0, stop = 0;
    char workdir[PATH_MAX] = "";
    int own_workdir = 0;
    if (sb_db_open_flags(a->db, 30000, a->adopt_db ? SB_DB_ADOPT : 0, &b.db, &err) ||
        sb_dbq_open(a->db, 1, 30000, &b.q, &err)) {
        status = bench_fail(&err);
        goto done;
    }
    if (open_run(&b, argc, argv, &err) ||
        make_workdir(a, workdir, sizeof workdir, &own_workdir, &err)) {
        status = bench_fail(&err);
        goto done;
    }
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term, old_hup;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);

    char list[2048], *save = NULL;
    snprintf(list, sizeof list, "%s", a->models);
    for (char *name = strtok_r(list, ",", &save); name && !stop;
         name = strtok_r(NULL, ",", &save)) {
        sb_setting set[BENCH_MAX_SET];
        char *set_argv[2 * BENCH_MAX_SET];
        int nset_argv;
        int nset = model_settings(a, name, set, set_argv, &nset_argv, &err);
        sb_model m;
        if (nset < 0 || sb_model_load(name, set, nset, &m, &err)) {
            fprintf(stderr, "shardbench: %s\n", err.msg);
            b.group_failures++;
            memset(&err, 0, sizeof err);
            continue;
        }
        if (bench_gpu_run(a, &m, &err)) { /* priced as prune and search price it */
            status = bench_fail(&err);
            sb_model_free(&m);
            break;
        }
        for (int i = 0; i < a->np && !stop; i++) {
            int r = bench_pair(&b, name, &m, set_argv, nset_argv, a->ps[i], workdir, &stop, &err);
            if (r < 0 && !stop) {
                status = bench_fail(&err);
                stop = 1;
            }
            b.group_failures += r > 0;
        }
        sb_model_free(&m);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    char el[32], qdb[4 * PATH_MAX + 8], sdb[4 * PATH_MAX];
    fmt_dur(sb_now() - b.t0, el, sizeof el);
    /* the hints are pasted into a shell: the path one word, no control byte */
    sb_shell_quote(a->db, qdb, sizeof qdb);
    sb_escape_controls(a->db, sdb, sizeof sdb, 0);
    if (interrupted) {
        printf("interrupted after %s: %d measured and stored; run %lld left open. Continue "
               "with: shardbench bench ... --db %s --resume %lld\n", el, b.measured,
               (long long)b.run_id, qdb, (long long)b.run_id);
        status = 130;
    } else if (!status) {
        if (sb_db_end_run(b.db, b.run_id, &err))
            status = bench_fail(&err);
        printf("run %lld: %d measured (%d ok, %d failed), %d skipped, in %s; database %s\n"
               "report: shardbench report --db %s --run %lld\n",
               (long long)b.run_id, b.measured, b.ok, b.failed, b.skipped, el, sdb, qdb,
               (long long)b.run_id);
        if (b.group_failures && !status) {
            fprintf(stderr, "shardbench: bench: %d model or (model, P) could not be benched "
                            "(see above)\n", b.group_failures);
            status = 1;
        }
    }
done:
    if (own_workdir)
        nftw(workdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    sb_launcher_free(&b.launch);
    sb_dbq_close(b.q);
    sb_db_close(b.db);
    return status;
}
