/* perf/search.c: how fast the exact search is. For each model and device
 * count, a child process loads the model, builds the problem and runs the
 * PaSE DP (best of --repeat runs); the parent reads the child's figures
 * through a pipe and its peak RSS from wait4(). One table out, and every row
 * stored in the results database (search_runs, source 'bench'). --prune
 * drops dominated configs first (sb_search_opts.prune); the table then says
 * how many configs the largest op kept and how long pruning took. The
 * "shared" column: DP table entries copied from an equal row (dp.c);
 * "reused": eliminations copied from an earlier one with equal inputs.
 * "cpu_s": the CPU time of the search (all its threads; on a shared
 * machine the wall-clock "seconds" also count waiting for a core).
 *
 * --limit-s S and --limit-mb M (default 600 s, 8000 MB) stop a row that
 * would exceed them: the child is killed at S seconds (SIGALRM) and its
 * address space capped at M MB, and the row says so in one line; the
 * larger p of that model are then not run.
 *
 * --check runs the plain DP too (sb_search_opts.plain, in its own child,
 * under the same limits, or --check-limit-s) and says whether it gives the
 * same cost and configs, or that it did not finish. --scale: the paper's
 * Transformer (reference model) and llama3-70b and gpt3-175b on h200-sxm
 * at p = 64 .. 16384, one search each, checked against the plain DP where
 * it finishes within 120 s, then a table of seconds and peak memory by p.
 * --memory GIB: the full space instead (stages, micro-batches, schedule,
 * the ZeRO stage and each stage's recomputation chosen within GIB per
 * device, as `search --memory` searches it); --check then runs the same
 * search with its Lagrangian walks unseeded (sb_pipe_opts.no_lagrange_seeds)
 * and compares the step, S, M, ZeRO and every op's config.
 * A model may name its machine (MODEL@MACHINE; --machine: the default).
 *
 *   perf/search [--models a,b@h200-sxm] [-p 4,8,16,32,64] [--repeat N] [--prune]
 *                [--machine NAME|FILE] [--limit-s S] [--limit-mb M] [--check]
 *                [--check-limit-s S] [--scale] [--db FILE] */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shardbench/machine.h"
#include "shardbench/pipesearch.h"
#include "shardbench/results.h"
#include "shardbench/search.h"

typedef struct {
    int ok;
    int nops, max_configs, max_dep, max_kept;
    double seconds, cpu_seconds, cost, table_bytes, prune_seconds, shared, reused;
    int nchoice;         /* ints of the configs sent after the row */
    /* --memory: the full space's answer */
    int stages, microbatches, zero;
    long lagrange_stages, lagrange_dps, lagrange_seeded, stage_dps;
    double gap, peak_bytes, step_s;
    char err[1024];
} row;

static int g_prune, g_check;
static double g_memory_gib; /* --memory: the full space (stages, ZeRO, recomputation) within it */
static double g_limit_s = 600, g_limit_mb = 8000, g_check_limit_s = 0;
static const char *g_machine; /* of the row being measured: NULL, the reference model */

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Searches model at p (plain: the plain DP, once) and writes the row, then
 * when it succeeded the config of every op (nops ints), to fd. */
static void child(const char *model, int p, int repeat, int plain, int fd)
{
    int *choice = NULL;
    row r = {0};
    sb_error err = {0};
    struct rlimit rl = {.rlim_cur = (rlim_t)(g_limit_mb * 1e6), .rlim_max = (rlim_t)(g_limit_mb * 1e6)};
    if (g_limit_mb > 0) /* 0: none (AddressSanitizer reserves terabytes of address space) */
        setrlimit(RLIMIT_AS, &rl);
    double lim = plain && g_check_limit_s > 0 ? g_check_limit_s : g_limit_s;
    alarm((unsigned)(lim > 1 ? lim : 1));
    sb_model m;
    sb_problem pb;
    sb_machine mc;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    int ok = !g_machine || sb_machine_load(g_machine, &mc, &err) == 0;
    if (ok && g_machine)
        sb_machine_cost_params(&mc, &cp);
    if (ok && g_memory_gib > 0 && sb_model_load(model, NULL, 0, &m, &err) == 0) {
        /* the full space as `search --memory` searches it (cli/cmd_search.c);
         * plain: the Lagrangian stages' walks unseeded, the check */
        r.ok = 1;
        r.seconds = 1e30;
        for (int i = 0; i < (plain ? 1 : repeat) && r.ok; i++) {
            sb_pipe_opts po;
            sb_pipe_opts_default(&po);
            po.max_stage_devices = 64;
            po.threads = 0; /* as search: the DP's choice */
            po.mem_limit = g_memory_gib * 1073741824.0;
            po.choose_zero = 1;
            po.choose_recompute = 1;
            po.no_lagrange_seeds = plain;
            sb_pipe_result pr;
            double t0 = sb_now(), c0 = cpu_now();
            if (sb_pipe_search(&m, p, &cp, &po, &pr, &err)) {
                r.ok = 0;
                break;
            }
            double t = sb_now() - t0;
            if (t < r.seconds) {
                r.seconds = t;
                r.cpu_seconds = cpu_now() - c0;
            }
            r.cost = pr.step_cost;
            r.stages = pr.pipe.nstages;
            r.microbatches = pr.pipe.microbatches;
            r.zero = pr.zero;
            r.lagrange_stages = pr.lagrange_stages;
            r.lagrange_dps = pr.lagrange_dps;
            r.lagrange_seeded = pr.lagrange_seeded;
            r.stage_dps = pr.subproblems;
            r.gap = pr.lagrange_gap;
            r.peak_bytes = pr.peak_bytes;
            r.step_s = pr.step_cost / (cp.tflops * 1e12);
            r.nchoice = m.nops * SB_MAX_DIMS;
            free(choice);
            choice = pr.cfg; /* taken over */
            pr.cfg = NULL;
            sb_pipe_result_free(&pr);
        }
        r.nops = m.nops;
        sb_model_free(&m);
    } else if (ok && sb_model_load(model, NULL, 0, &m, &err) == 0) {
        if (sb_problem_build(&m, p, &cp, &pb, &err) == 0) {
            r.ok = 1;
            r.seconds = 1e30;
            for (int i = 0; i < repeat && r.ok; i++) {
                sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 4096,
                                     .prune = g_prune && !plain, .plain = plain};
                sb_result res;
                double t0 = sb_now(), c0 = cpu_now();
                if (sb_search(&pb, &so, &res, &err)) {
                    r.ok = 0;
                    break;
                }
                double t = sb_now() - t0;
                if (t < r.seconds) {
                    r.seconds = t;
                    r.cpu_seconds = cpu_now() - c0;
                }
                r.cost = res.total_cost;
                r.max_configs = res.max_configs;
                r.max_dep = res.max_dep_set;
                r.table_bytes = res.peak_table_bytes;
                r.max_kept = res.max_configs_kept;
                r.prune_seconds = res.prune_seconds;
                r.shared = (double)res.entries_copied;
                r.reused = (double)res.eliminations_reused;
                free(choice);
                choice = res.choice; /* taken over */
                res.choice = NULL;
                sb_result_free(&res);
            }
            r.nops = m.nops;
            r.nchoice = m.nops;
            if (plain)
                repeat = 1;
            sb_problem_free(&pb);
        }
        sb_model_free(&m);
    }
    if (!r.ok)
        snprintf(r.err, sizeof r.err, "%s", err.msg);
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
        _exit(3);
    size_t cb = (size_t)r.nchoice * sizeof *choice;
    if (r.ok && choice && write(fd, choice, cb) != (ssize_t)cb)
        _exit(3);
    _exit(0);
}

/* Reads n bytes (a pipe may return them in parts); the count read. */
static size_t read_all(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return got;
}

/* One row in a child process; *choice (malloc'd, nops) the configs when it
 * succeeded, else NULL. */
static int measure(const char *model, int p, int repeat, int plain, row *r, double *rss,
                   int **choice)
{
    *choice = NULL;
    int fds[2];
    if (pipe(fds))
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fds[0]);
        child(model, p, repeat, plain, fds[1]);
    }
    close(fds[1]);
    size_t got = read_all(fds[0], r, sizeof *r);
    if (got == sizeof *r && r->ok && r->nchoice > 0) {
        *choice = malloc((size_t)r->nchoice * sizeof **choice);
        size_t cb = (size_t)r->nchoice * sizeof **choice;
        if (*choice && read_all(fds[0], *choice, cb) != cb) {
            free(*choice);
            *choice = NULL;
        }
    }
    close(fds[0]);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0)
        return -1;
    *rss = (double)ru.ru_maxrss * 1024.0;
    if (got != sizeof *r) {
        memset(r, 0, sizeof *r);
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
            snprintf(r->err, sizeof r->err, "stopped: over the time limit of %.0f s (%s)",
                     plain && g_check_limit_s > 0 ? g_check_limit_s : g_limit_s,
                     plain && g_check_limit_s > 0 ? "--check-limit-s" : "--limit-s");
        else
            snprintf(r->err, sizeof r->err,
                     "stopped: the search died (status %d; over the memory limit of %.0f MB, "
                     "--limit-mb?)",
                     status, g_limit_mb);
    }
    return 0;
}

/* --check: the plain DP (no shortcuts, GenerateSeq order) in its own
 * child, under the same limits; one line: the same cost and configs, or
 * where they differ (status 1), or that it was stopped. */
static int check_plain(const char *model, int p, const row *r, const int *choice,
                       const char **verdict, double *plain_s, int *plain_stopped)
{
    row pr;
    double rss = 0;
    int *pc = NULL, rc = 0;
    *verdict = "plain DP did not finish";
    *plain_s = -1;
    if (*plain_stopped) {
        printf("%-24s %5d  check: not run (the plain DP was stopped at a smaller p)\n", model, p);
        return 0;
    }
    if (measure(model, p, 1, 1, &pr, &rss, &pc) || !pr.ok || !pc || !choice) {
        printf("%-24s %5d  check: the plain DP %s\n", model, p,
               pr.ok ? "could not be compared" : pr.err);
        *plain_stopped = !pr.ok;
        free(pc);
        return 0;
    }
    *plain_s = pr.cpu_seconds;
    int diff = 0, w = r->nchoice / (r->nops > 0 ? r->nops : 1);
    for (int v = 0; v < r->nops; v++)
        diff += memcmp(pc + (size_t)v * w, choice + (size_t)v * w, (size_t)w * sizeof *pc) != 0;
    const char *what = g_memory_gib > 0 ? "the search with its Lagrangian walks unseeded"
                                        : "the plain DP";
    diff += g_memory_gib > 0 && (pr.stages != r->stages || pr.microbatches != r->microbatches
                                 || pr.zero != r->zero);
    if (pr.cost == r->cost && diff == 0) {
        printf("%-24s %5d  check: %s gives the same cost and every op's config "
               "(%.1f s, %.1f s CPU, %.0f MB)\n",
               model, p, what, pr.seconds, pr.cpu_seconds, rss / 1e6);
        *verdict = "same as the plain DP";
    } else {
        *verdict = "DIFFERS from the plain DP";
        printf("%-24s %5d  check: DIFFERS from %s: cost %.17g, there %.17g; %d ops "
               "with another config (or S, M, ZeRO)\n",
               model, p, what, r->cost, pr.cost, diff);
        rc = 1;
    }
    free(pc);
    return rc;
}

/* The summary table: one row per model, one column per p. */
#define MAX_MODELS 16
#define MAX_PS 24
typedef struct {
    char name[128];
    int np, p[MAX_PS];
    char cell[MAX_PS][48];
} summary;

static void summary_print(const summary *sm, int nm)
{
    if (nm == 0)
        return;
    if (g_memory_gib > 0)
        printf("\nseconds (wall / CPU) and peak RSS of each search of the full space within "
               "%g GiB; =: same step, S, M, ZeRO and configs as with its Lagrangian walks "
               "unseeded, ~: that search not finished or not run\n", g_memory_gib);
    else
        printf("\nseconds (wall / CPU, both threads) and peak RSS of each search; "
               "=: same cost and configs as the plain DP, ~: plain DP not finished or not run\n");
    for (int i = 0; i < nm; i++) {
        printf("%-24s", sm[i].name);
        for (int j = 0; j < sm[i].np; j++)
            printf(" | p=%-5d %-22s", sm[i].p[j], sm[i].cell[j]);
        printf("\n");
    }
}

/* One row into the results database (a search record, source "bench"):
 * 0, or -1 with the error printed. */
static int record_row(sb_db *db, const char *model, int p, const row *r, double rss,
                      const char *verdict, double plain_cpu)
{
    sb_error err = {0};
    char params[300], js[800];
    snprintf(params, sizeof params, "%s%s%s", g_machine ? "machine=" : "",
             g_machine ? g_machine : "", g_memory_gib > 0 ? " space=full" : "");
    snprintf(js, sizeof js,
             "{\"bench\":\"search\",\"cpu_seconds\":%.6f,\"machine\":\"%s\","
             "\"check\":\"%s\",\"plain_cpu_seconds\":%.6f,\"memory_gib\":%g,"
             "\"stages\":%d,\"microbatches\":%d,\"zero\":%d,"
             "\"lagrange_stages\":%ld,\"lagrange_dps\":%ld,\"lagrange_gap\":%.6g}",
             r->cpu_seconds, g_machine ? g_machine : "", verdict, plain_cpu, g_memory_gib,
             r->stages, r->microbatches, r->zero, r->lagrange_stages, r->lagrange_dps, r->gap);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_machine mc;
    if (g_machine && sb_machine_load(g_machine, &mc, &err) == 0)
        sb_machine_cost_params(&mc, &cp);
    sb_search_record rec = {
        .source = "bench", .model = model, .model_path = model, .params = params,
        .p = p, .algo = "pase", .tflops = cp.tflops, .gbs = cp.gbs, .cutoff = 0,
        .total_cost = r->cost, .seconds = r->seconds, .nops = r->nops,
        .max_configs = r->max_configs, .max_dep_set = r->max_dep,
        .peak_table_bytes = r->table_bytes, .peak_rss_bytes = rss,
        .strategy_json = js,
    };
    if (sb_db_record_search(db, &rec, NULL, &err)) {
        fprintf(stderr, "perf/search: %s\n", err.msg);
        return -1;
    }
    return 0;
}

typedef struct {
    const char *models, *plist, *db_path, *machine;
    int repeat;
} bench_opts;

/* The options into o and the globals (g_*): -1 to go on, else the exit
 * status (0 after --help, 2 for a bad option, said on stderr). */
static int parse_opts(int argc, char **argv, bench_opts *o)
{
    o->models = "alexnet,inception3,resnet101,rnnlm,transformer,transformer-large";
    o->plist = "4,8,16,32,64";
    o->db_path = SB_DB_DEFAULT_PATH;
    o->machine = NULL;
    o->repeat = 3;
    int limit_given = 0, check_limit_given = 0, scale = 0;
    static const struct option opts[] = {
        {"models", required_argument, 0, 'M'}, {"procs", required_argument, 0, 'p'},
        {"repeat", required_argument, 0, 'r'}, {"db", required_argument, 0, 'd'},
        {"prune", no_argument, 0, 'P'},        {"help", no_argument, 0, 'h'},
        {"limit-s", required_argument, 0, 'L'}, {"limit-mb", required_argument, 0, 'm'},
        {"check", no_argument, 0, 'C'},         {"scale", no_argument, 0, 'S'},
        {"machine", required_argument, 0, 'H'}, {"check-limit-s", required_argument, 0, 'K'},
        {"memory", required_argument, 0, 'G'},  {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
        switch (c) {
        case 'M': o->models = optarg; break;
        case 'p': o->plist = optarg; break;
        case 'r': o->repeat = atoi(optarg) > 0 ? atoi(optarg) : 1; break;
        case 'd': o->db_path = optarg; break;
        case 'P': g_prune = 1; break;
        case 'C': g_check = 1; break;
        case 'H': o->machine = optarg; break;
        case 'G': {
            char *end;
            g_memory_gib = strtod(optarg, &end);
            if (end == optarg || *end || !(g_memory_gib > 0) || g_memory_gib > 1e6) {
                fprintf(stderr, "perf/search: --memory %s: not a size in GiB (e.g. 80)\n", optarg);
                return 2;
            }
            break;
        }
        case 'S':
            o->models = "transformer,llama3-70b@h200-sxm,gpt3-175b@h200-sxm";
            o->plist = "64,128,256,512,1024,2048,4096,8192,16384";
            o->repeat = 1;
            scale = 1;
            g_check = 1;
            break;
        case 'L':
            g_limit_s = atof(optarg) > 0 ? atof(optarg) : 600;
            limit_given = 1;
            break;
        case 'K':
            g_check_limit_s = atof(optarg) > 0 ? atof(optarg) : 0;
            check_limit_given = 1;
            break;
        case 'm': {
            char *end;
            g_limit_mb = strtod(optarg, &end);
            if (end == optarg || *end || !(g_limit_mb >= 0)) {
                fprintf(stderr, "perf/search: --limit-mb %s: not a size in MB (0: none)\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'h':
            printf("usage: perf/search [--models LIST] [-p LIST] [--repeat N] [--prune] "
                   "[--machine NAME|FILE] [--limit-s S] [--limit-mb MB] [--check] "
                   "[--check-limit-s S] [--scale] [--memory GIB] [--db FILE|none]\n"
                   "  a model may name its machine: llama3-70b@h200-sxm\n");
            return 0;
        default: return 2;
        }
    }
    if (scale && !limit_given)
        g_limit_s = 120; /* a row over 2 minutes is far from the 10 s */
    if (scale && !check_limit_given)
        g_check_limit_s = 120;
    return -1;
}

int main(int argc, char **argv)
{
    bench_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    const char *models = o.models, *plist = o.plist, *db_path = o.db_path, *machine = o.machine;
    int repeat = o.repeat;
    sb_error err = {0};
    sb_db *db = NULL;
    if (strcmp(db_path, "none") && sb_db_open(db_path, 0, &db, &err)) {
        fprintf(stderr, "perf/search: %s (figures are printed but not stored)\n", err.msg);
        db = NULL;
    }
    printf("%-24s %5s %5s %11s %6s %8s %12s %9s %9s %12s %7s %12s %12s %22s\n", "model", "p",
           "ops", "max_configs", "kept", "max_dep", "seconds", "cpu_s", "prune_s", "shared",
           "reused", "peak_rss_MB", "table_MB", "cost_flop");
    char mlist[512];
    snprintf(mlist, sizeof mlist, "%s", models);
    int status = 0, nm = 0;
    static summary sm[MAX_MODELS];
    char *s1;
    for (char *spec = strtok_r(mlist, ",", &s1); spec; spec = strtok_r(NULL, ",", &s1)) {
        char model[256];
        snprintf(model, sizeof model, "%s", spec);
        char *at = strchr(model, '@');
        g_machine = machine;
        if (at) {
            *at = 0;
            g_machine = at + 1;
        }
        summary *sr = nm < MAX_MODELS ? &sm[nm++] : NULL;
        if (sr) {
            snprintf(sr->name, sizeof sr->name, "%s", spec);
            sr->np = 0;
        }
        char pl[256];
        snprintf(pl, sizeof pl, "%s", plist);
        char *s2;
        int stopped = 0, plain_stopped = 0;
        for (char *ps = strtok_r(pl, ",", &s2); ps; ps = strtok_r(NULL, ",", &s2)) {
            int p = atoi(ps);
            row r;
            double rss = 0;
            int *choice = NULL;
            char *cell = NULL;
            if (sr && sr->np < MAX_PS) {
                sr->p[sr->np] = p;
                cell = sr->cell[sr->np++];
                snprintf(cell, sizeof sr->cell[0], "not run");
            }
            if (stopped && p >= 1) {
                printf("%-24s %5d  not run: a smaller p was already stopped\n", spec, p);
                continue;
            }
            if (p < 1 || measure(model, p, repeat, 0, &r, &rss, &choice)) {
                fprintf(stderr, "perf/search: cannot run %s at p=%s\n", model, ps);
                status = 1;
                continue;
            }
            if (!r.ok) {
                /* over a limit (this bench's, or the search's table limit) is a
                 * clean stop; anything else a failure */
                stopped = !strncmp(r.err, "stopped", 7) || strstr(r.err, "limit exceeded");
                printf("%-24s %5d  %s%s\n", spec, p, stopped ? "" : "failed: ", r.err);
                if (cell)
                    snprintf(cell, sizeof sr->cell[0], "%s", stopped ? "stopped" : "failed");
                status |= !stopped;
                free(choice);
                continue;
            }
            printf("%-24s %5d %5d %11d %6d %8d %12.6f %9.3f %9.3f %12.0f %7.0f %12.1f %12.2f "
                   "%22.2f\n",
                   spec, p, r.nops, r.max_configs, r.max_kept, r.max_dep, r.seconds,
                   r.cpu_seconds, r.prune_seconds, r.shared, r.reused, rss / 1e6,
                   r.table_bytes / 1e6, r.cost);
            if (g_memory_gib > 0)
                printf("%-24s %5d  within %g GiB: %d stages, %d micro-batches, ZeRO %d, "
                       "predicted step %.4g s, peak %.4g GiB; %ld stage DPs, %ld Lagrangian "
                       "(%ld DPs, %ld seeded, gap up to %.3g%%)\n",
                       spec, p, g_memory_gib, r.stages, r.microbatches, r.zero, r.step_s,
                       r.peak_bytes / 1073741824.0, r.stage_dps, r.lagrange_stages,
                       r.lagrange_dps, r.lagrange_seeded, 100.0 * r.gap);
            fflush(stdout);
            const char *verdict = "not checked";
            double plain_cpu = -1;
            if (g_check)
                status |= check_plain(model, p, &r, choice, &verdict, &plain_cpu, &plain_stopped);
            if (cell)
                snprintf(cell, sizeof sr->cell[0], "%.2f/%.2f s %.0f MB %s", r.seconds,
                         r.cpu_seconds, rss / 1e6,
                         !strcmp(verdict, "same as the plain DP") ? "="
                         : !strncmp(verdict, "DIFFERS", 7)         ? "DIFFERS"
                                                                   : "~");
            free(choice);
            if (db && record_row(db, model, p, &r, rss, verdict, plain_cpu))
                status = 1;
        }
    }
    summary_print(sm, nm);
    if (db)
        sb_db_close(db);
    return status;
}
