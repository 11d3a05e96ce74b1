/* bench/search.c: how fast the exact search is. For each model and device
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
 * under the same limits) and says whether it gives the same cost and
 * configs. --scale: the large models at p = 64 .. 16384, one search each.
 *
 *   bench/search [--models a,b] [-p 4,8,16,32,64] [--repeat N] [--prune]
 *                [--limit-s S] [--limit-mb M] [--check] [--scale] [--db FILE] */
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

#include "shardbench/results.h"
#include "shardbench/search.h"

typedef struct {
    int ok;
    int nops, max_configs, max_dep, max_kept;
    double seconds, cpu_seconds, cost, table_bytes, prune_seconds, shared, reused;
    char err[1024];
} row;

static int g_prune, g_check;
static double g_limit_s = 600, g_limit_mb = 8000;

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
    setrlimit(RLIMIT_AS, &rl);
    alarm((unsigned)(g_limit_s > 1 ? g_limit_s : 1));
    sb_model m;
    sb_problem pb;
    if (sb_model_load(model, NULL, 0, &m, &err) == 0) {
        sb_cost_params cp;
        sb_cost_params_default(&cp);
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
    size_t cb = (size_t)r.nops * sizeof *choice;
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
    if (got == sizeof *r && r->ok && r->nops > 0) {
        *choice = malloc((size_t)r->nops * sizeof **choice);
        size_t cb = (size_t)r->nops * sizeof **choice;
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
            snprintf(r->err, sizeof r->err, "stopped: over the time limit of %.0f s (--limit-s)",
                     g_limit_s);
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
static int check_plain(const char *model, int p, const row *r, const int *choice)
{
    row pr;
    double rss = 0;
    int *pc = NULL, rc = 0;
    if (measure(model, p, 1, 1, &pr, &rss, &pc) || !pr.ok || !pc || !choice) {
        printf("%-18s %5d  check: the plain DP %s\n", model, p,
               pr.ok ? "could not be compared" : pr.err);
        free(pc);
        return 0;
    }
    int diff = 0;
    for (int v = 0; v < r->nops; v++)
        diff += pc[v] != choice[v];
    if (pr.cost == r->cost && diff == 0)
        printf("%-18s %5d  check: the plain DP gives the same cost and every op's config "
               "(%.1f s, %.0f MB)\n",
               model, p, pr.seconds, rss / 1e6);
    else {
        printf("%-18s %5d  check: DIFFERS from the plain DP: cost %.17g, plain %.17g; %d ops "
               "with another config\n",
               model, p, r->cost, pr.cost, diff);
        rc = 1;
    }
    free(pc);
    return rc;
}

int main(int argc, char **argv)
{
    const char *models = "alexnet,inception3,resnet101,rnnlm,transformer,transformer-large";
    const char *plist = "4,8,16,32,64", *db_path = SB_DB_DEFAULT_PATH;
    int repeat = 3;
    static const struct option opts[] = {
        {"models", required_argument, 0, 'M'}, {"procs", required_argument, 0, 'p'},
        {"repeat", required_argument, 0, 'r'}, {"db", required_argument, 0, 'd'},
        {"prune", no_argument, 0, 'P'},        {"help", no_argument, 0, 'h'},
        {"limit-s", required_argument, 0, 'L'}, {"limit-mb", required_argument, 0, 'm'},
        {"check", no_argument, 0, 'C'},         {"scale", no_argument, 0, 'S'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
        switch (c) {
        case 'M': models = optarg; break;
        case 'p': plist = optarg; break;
        case 'r': repeat = atoi(optarg) > 0 ? atoi(optarg) : 1; break;
        case 'd': db_path = optarg; break;
        case 'P': g_prune = 1; break;
        case 'C': g_check = 1; break;
        case 'S':
            models = "transformer,llama3-70b,mixtral-8x7b,gpt3-175b";
            plist = "64,128,256,512,1024,2048,4096,8192,16384";
            repeat = 1;
            break;
        case 'L': g_limit_s = atof(optarg) > 0 ? atof(optarg) : 600; break;
        case 'm': g_limit_mb = atof(optarg) > 0 ? atof(optarg) : 8000; break;
        case 'h':
            printf("usage: bench/search [--models LIST] [-p LIST] [--repeat N] [--prune] "
                   "[--limit-s S] [--limit-mb MB] [--check] [--scale] [--db FILE|none]\n");
            return 0;
        default: return 2;
        }
    }
    sb_error err = {0};
    sb_db *db = NULL;
    if (strcmp(db_path, "none") && sb_db_open(db_path, 0, &db, &err)) {
        fprintf(stderr, "bench/search: %s (figures are printed but not stored)\n", err.msg);
        db = NULL;
    }
    printf("%-18s %5s %5s %11s %6s %8s %12s %9s %9s %12s %7s %12s %12s %22s\n", "model", "p",
           "ops", "max_configs", "kept", "max_dep", "seconds", "cpu_s", "prune_s", "shared",
           "reused", "peak_rss_MB", "table_MB", "cost_flop");
    char mlist[512];
    snprintf(mlist, sizeof mlist, "%s", models);
    int status = 0;
    char *s1;
    for (char *model = strtok_r(mlist, ",", &s1); model; model = strtok_r(NULL, ",", &s1)) {
        char pl[256];
        snprintf(pl, sizeof pl, "%s", plist);
        char *s2;
        int stopped = 0;
        for (char *ps = strtok_r(pl, ",", &s2); ps; ps = strtok_r(NULL, ",", &s2)) {
            int p = atoi(ps);
            row r;
            double rss = 0;
            int *choice = NULL;
            if (stopped && p >= 1) {
                printf("%-18s %5d  not run: a smaller p was already stopped\n", model, p);
                continue;
            }
            if (p < 1 || measure(model, p, repeat, 0, &r, &rss, &choice)) {
                fprintf(stderr, "bench/search: cannot run %s at p=%s\n", model, ps);
                status = 1;
                continue;
            }
            if (!r.ok) {
                /* over a limit (this bench's, or the search's table limit) is a
                 * clean stop; anything else a failure */
                stopped = !strncmp(r.err, "stopped", 7) || strstr(r.err, "limit exceeded");
                printf("%-18s %5d  %s%s\n", model, p, stopped ? "" : "failed: ", r.err);
                status |= !stopped;
                free(choice);
                continue;
            }
            printf("%-18s %5d %5d %11d %6d %8d %12.6f %9.3f %9.3f %12.0f %7.0f %12.1f %12.2f "
                   "%22.2f\n",
                   model, p, r.nops, r.max_configs, r.max_kept, r.max_dep, r.seconds,
                   r.cpu_seconds, r.prune_seconds, r.shared, r.reused, rss / 1e6,
                   r.table_bytes / 1e6, r.cost);
            fflush(stdout);
            if (g_check)
                status |= check_plain(model, p, &r, choice);
            free(choice);
            if (db) {
                sb_search_record rec = {
                    .source = "bench", .model = model, .model_path = model, .params = "",
                    .p = p, .algo = "pase", .tflops = 10, .gbs = 16, .cutoff = 0,
                    .total_cost = r.cost, .seconds = r.seconds, .nops = r.nops,
                    .max_configs = r.max_configs, .max_dep_set = r.max_dep,
                    .peak_table_bytes = r.table_bytes, .peak_rss_bytes = rss,
                    .strategy_json = "{}",
                };
                if (sb_db_record_search(db, &rec, NULL, &err)) {
                    fprintf(stderr, "bench/search: %s\n", err.msg);
                    status = 1;
                }
            }
        }
    }
    if (db)
        sb_db_close(db);
    return status;
}
