/* perf/step.c: single-rank training-step time of shardbench against
 * PyTorch on the same model at the same sizes and thread count, side by
 * side in one invocation.
 *
 * shardbench runs in-process: MPI with one rank, the executor under the
 * all-ones strategy (config 0 of every op: nothing split), OpenBLAS with T
 * threads. PyTorch runs in a child process, perf/step_torch.py (Debian's
 * python3-torch, torch.set_num_threads(T), OPENBLAS_NUM_THREADS=T), which
 * builds the same network and trains one step each time it is asked. The
 * two alternate step by step (after warm-up steps of each), the order
 * flipping every step, so that both see the same machine load (with a
 * 0.25 s untimed pause between turns, so that one side's idle threads have
 * stopped spinning when the other starts); each figure is the median of
 * the timed steps. A step is forward, softmax
 * cross-entropy, backward and the SGD update, with a fresh synthetic batch.
 *
 *   mpirun -np 1 perf/step [--models alexnet,transformer,llama3-8b] [--threads 2,1]
 *                           [-n steps (5)] [-w warm-ups (1)] [--set NAME=VALUE]
 *                           [--python PATH] [--peer FILE] [--no-torch] [--db FILE]
 *
 * The cases: alexnet at batch 16 (image 227, classes 1024), the
 * transformer with layers=2, seq=64 (other parameters as in the file), and
 * a 2-layer Llama (llama3-8b with layers=2, seq=256, batch=4, embed=256,
 * heads=8, kv_heads=4, ff=688, vocab=8192: GQA, rotary, causal, SwiGLU).
 * Every (model, threads) pair prints one row: shardbench s/step, torch
 * s/step, ratio = shardbench / torch (<= 1.0: shardbench no slower). One
 * run row per thread count goes to the results database, with one
 * measurement per model and framework (kind "bench-step": shardbench,
 * kind "torch": PyTorch); a failure is stored with status 'error'.
 * Not here: more than one rank (that is `shardbench run`), GPUs. */
#define _GNU_SOURCE
#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shardbench/cpuset.h"
#include "shardbench/results.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

extern char **environ;

#ifndef SB_STEP_PEER
#define SB_STEP_PEER "perf/step_torch.py"
#endif

#define MAX_CASES 8
#define MAX_THREADS 8
#define MAX_SETS 32
#define PEER_TIMEOUT_MS (15 * 60 * 1000) /* one step or start-up of the peer */
/* Pause between the two frameworks' steps (untimed): idle OpenBLAS threads
 * spin (sched_yield) for about 0.1 s before they sleep, OpenMP threads for a
 * few ms; without it each side's spinning threads slow the other's start. */
#define SETTLE_NS 250000000L

/* ---- options --------------------------------------------------------------- */

typedef struct {
    const char *name;
    sb_setting set[MAX_SETS];
    int nset;
} bench_case;

typedef struct {
    bench_case cases[MAX_CASES];
    int ncases;
    int threads[MAX_THREADS], nthreads;
    int steps, warmup, torch, keep_binding;
    const char *python, *peer, *db;
    sb_setting extra[MAX_SETS];
    int nextra;
} bench_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np 1 perf/step [options]\n"
            "\n"
            "Step time of shardbench (in-process, all-ones strategy) against PyTorch\n"
            "(perf/step_torch.py in a child process) on the same model, sizes and\n"
            "thread count, alternating step by step; prints one row per model and\n"
            "thread count with the ratio shardbench / torch.\n"
            "\n"
            "  --models LIST      alexnet,transformer,llama3-8b (default: all three)\n"
            "  --threads LIST     BLAS / torch threads, e.g. 2,1 (default 2,1)\n"
            "  -n, --steps N      timed steps of each (default 5)\n"
            "  -w, --warmup W     untimed steps of each first (default 1)\n"
            "  --set NAME=VALUE   override a model parameter in every model that has it\n"
            "  --python PATH      interpreter with torch (default /usr/bin/python3)\n"
            "  --peer FILE        the PyTorch peer (default %s)\n"
            "  --no-torch         time shardbench only\n"
            "  --db FILE          results database (default %s; 'none' to skip)\n"
            "  --keep-binding     keep mpirun's default binding (one core for -np 1);\n"
            "                     else the rank and the peer run on all the node's cores\n",
            SB_STEP_PEER, SB_DB_DEFAULT_PATH);
}

static void add_case(bench_opts *o, const char *name)
{
    bench_case *c = &o->cases[o->ncases++];
    memset(c, 0, sizeof *c);
    c->name = name;
    sb_error err = {0};
    if (!strcmp(name, "alexnet")) {
        sb_setting_parse("batch=16", &c->set[c->nset++], &err);
        sb_setting_parse("image=227", &c->set[c->nset++], &err);
        sb_setting_parse("classes=1024", &c->set[c->nset++], &err);
    } else if (!strcmp(name, "transformer")) {
        sb_setting_parse("layers=2", &c->set[c->nset++], &err);
        sb_setting_parse("seq=64", &c->set[c->nset++], &err);
    } else if (!strcmp(name, "llama3-8b")) {
        static const char *const llama[] = {"layers=2", "seq=256",  "batch=4",
                                            "embed=256", "heads=8", "kv_heads=4",
                                            "ff=688",   "vocab=8192"};
        for (size_t i = 0; i < sizeof llama / sizeof llama[0]; i++)
            sb_setting_parse(llama[i], &c->set[c->nset++], &err);
    }
}

static int parse_list_int(const char *s, int *out, int max)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    if (!copy)
        return -1;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || end == t || v < 1 || v > 256 || n == max) {
            free(copy);
            return -1;
        }
        out[n++] = (int)v;
    }
    free(copy);
    return n;
}

static int parse_opts(int argc, char **argv, bench_opts *o)
{
    static const struct option lo[] = {
        {"models", required_argument, 0, 'M'}, {"threads", required_argument, 0, 'T'},
        {"steps", required_argument, 0, 'n'},  {"warmup", required_argument, 0, 'w'},
        {"set", required_argument, 0, 'S'},    {"python", required_argument, 0, 'P'},
        {"peer", required_argument, 0, 'E'},   {"no-torch", no_argument, 0, 'N'},
        {"db", required_argument, 0, 'd'},     {"help", no_argument, 0, 'h'},
        {"keep-binding", no_argument, 0, 'K'}, {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->steps = 5;
    o->warmup = 1;
    o->torch = 1;
    o->python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    o->peer = SB_STEP_PEER;
    o->db = SB_DB_DEFAULT_PATH;
    const char *models = "alexnet,transformer,llama3-8b";
    const char *threads = "2,1";
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "n:w:h", lo, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'M': models = optarg; break;
        case 'T': threads = optarg; break;
        case 'n':
        case 'w': {
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < (c == 'n') || v > 100000) {
                fprintf(stderr, "perf/step: --%s: '%s' is not a valid count\n",
                        c == 'n' ? "steps" : "warmup", optarg);
                return 2;
            }
            *(c == 'n' ? &o->steps : &o->warmup) = (int)v;
            break;
        }
        case 'S': {
            sb_error err = {0};
            if (o->nextra == MAX_SETS || sb_setting_parse(optarg, &o->extra[o->nextra], &err)) {
                fprintf(stderr, "perf/step: --set %s: %s\n", optarg,
                        err.code ? err.msg : "too many --set options");
                return 2;
            }
            o->nextra++;
            break;
        }
        case 'P': o->python = optarg; break;
        case 'E': o->peer = optarg; break;
        case 'N': o->torch = 0; break;
        case 'd': o->db = optarg; break;
        case 'K': o->keep_binding = 1; break;
        case 'h': usage(stdout); return 1;
        default:
            fprintf(stderr, "perf/step: unknown or incomplete option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "perf/step: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    char *copy = strdup(models), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const char *name = strcmp(t, "alexnet") == 0       ? "alexnet"
                           : strcmp(t, "transformer") == 0 ? "transformer"
                           : strcmp(t, "llama3-8b") == 0   ? "llama3-8b"
                                                           : NULL;
        if (!name || o->ncases == MAX_CASES) {
            fprintf(stderr, "perf/step: --models: '%s' is not alexnet, transformer or llama3-8b\n",
                    t);
            free(copy);
            return 2;
        }
        add_case(o, name);
    }
    free(copy);
    o->nthreads = parse_list_int(threads, o->threads, MAX_THREADS);
    if (o->nthreads <= 0 || o->ncases == 0) {
        fprintf(stderr, "perf/step: --threads '%s' or --models '%s' is empty or invalid\n",
                threads, models);
        return 2;
    }
    return 0;
}

/* ---- the PyTorch peer ------------------------------------------------------------ */

typedef struct {
    pid_t pid;
    int to, from;          /* its stdin, its stdout */
    char buf[65536];
    size_t have;
    char ready[8192];      /* its "ready" line */
    char err[1024];        /* what went wrong, if anything */
} peer;

/* Reads one line (without the newline) into line; -1 on EOF, error or
 * timeout, with p->err set. */
static int peer_line(peer *p, char *line, size_t n)
{
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->have);
        if (nl) {
            size_t len = (size_t)(nl - p->buf);
            snprintf(line, n, "%.*s", (int)len, p->buf);
            memmove(p->buf, nl + 1, p->have - len - 1);
            p->have -= len + 1;
            return 0;
        }
        if (p->have == sizeof p->buf - 1) {
            snprintf(p->err, sizeof p->err, "peer line too long");
            return -1;
        }
        struct pollfd pf = {.fd = p->from, .events = POLLIN};
        int r = poll(&pf, 1, PEER_TIMEOUT_MS);
        if (r == 0) {
            snprintf(p->err, sizeof p->err, "peer sent nothing for %d s", PEER_TIMEOUT_MS / 1000);
            return -1;
        }
        if (r < 0 && errno == EINTR)
            continue;
        ssize_t got = r < 0 ? -1 : read(p->from, p->buf + p->have, sizeof p->buf - 1 - p->have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (!p->err[0])
                snprintf(p->err, sizeof p->err, "peer exited without an answer");
            return -1;
        }
        p->have += (size_t)got;
    }
}

/* A peer's line that is {"error": "..."}: its message into p->err. */
static int peer_error_line(peer *p, const char *line)
{
    const char *e = strstr(line, "\"error\"");
    if (!e)
        return 0;
    e = strchr(e + 7, '"');
    const char *end = e ? strrchr(e + 1, '"') : NULL;
    if (e && end && end > e)
        snprintf(p->err, sizeof p->err, "%.*s", (int)(end - e - 1), e + 1);
    else
        snprintf(p->err, sizeof p->err, "%s", line);
    return 1;
}

static void peer_stop(peer *p)
{
    if (p->to >= 0) {
        if (write(p->to, "quit\n", 5) < 0) {
            /* already gone */
        }
        close(p->to);
    }
    if (p->from >= 0)
        close(p->from);
    if (p->pid > 0) {
        int st;
        waitpid(p->pid, &st, 0);
    }
    p->pid = 0;
    p->to = p->from = -1;
}

/* Starts the peer for model m (its parameters passed as --set) with T threads
 * and waits for its ready line. */
static int peer_start(peer *p, const bench_opts *o, const sb_model *m, int threads)
{
    memset(p, 0, sizeof *p);
    p->to = p->from = -1;
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
        snprintf(p->err, sizeof p->err, "pipe: %s", strerror(errno));
        return -1;
    }
    char tbuf[16];
    snprintf(tbuf, sizeof tbuf, "%d", threads);
    /* argv: python peer --model NAME --threads T --set k=v ... */
    int nargs = 6 + 2 * m->nparams + 1;
    char **args = calloc((size_t)nargs, sizeof *args);
    char (*sets)[160] = calloc((size_t)m->nparams + 1, sizeof *sets);
    if (!args || !sets) {
        free(args);
        free(sets);
        snprintf(p->err, sizeof p->err, "out of memory");
        return -1;
    }
    int a = 0;
    args[a++] = (char *)o->python;
    args[a++] = (char *)o->peer;
    args[a++] = "--model";
    args[a++] = (char *)m->name;
    args[a++] = "--threads";
    args[a++] = tbuf;
    for (int i = 0; i < m->nparams; i++) {
        snprintf(sets[i], sizeof sets[i], "%s=%lld", m->params[i].name,
                 (long long)m->params[i].value);
        args[a++] = "--set";
        args[a++] = sets[i];
    }
    args[a] = NULL;
    setenv("OPENBLAS_NUM_THREADS", tbuf, 1);
    setenv("OMP_NUM_THREADS", tbuf, 1);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    int rc = posix_spawn(&p->pid, o->python, &fa, NULL, args, environ);
    if (rc == ENOENT && !strchr(o->python, '/'))
        rc = posix_spawnp(&p->pid, o->python, &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    free(args);
    free(sets);
    p->to = in[1];
    p->from = out[0];
    if (rc) {
        p->pid = 0;
        snprintf(p->err, sizeof p->err, "cannot start %s: %s", o->python, strerror(rc));
        peer_stop(p);
        return -1;
    }
    if (peer_line(p, p->ready, sizeof p->ready) || peer_error_line(p, p->ready)
        || !strstr(p->ready, "\"ready\"")) {
        if (!p->err[0])
            snprintf(p->err, sizeof p->err, "unexpected first line from the peer: %.900s", p->ready);
        peer_stop(p);
        return -1;
    }
    return 0;
}

/* One PyTorch step; its own time and loss. */
static int peer_step(peer *p, double *seconds, double *loss)
{
    char line[1024];
    if (write(p->to, "step\n", 5) != 5) {
        snprintf(p->err, sizeof p->err, "peer is gone (%s)", strerror(errno));
        return -1;
    }
    if (peer_line(p, line, sizeof line))
        return -1;
    if (peer_error_line(p, line))
        return -1;
    if (sscanf(line, "step %lf %lf", seconds, loss) != 2) {
        snprintf(p->err, sizeof p->err, "unexpected answer from the peer: %.900s", line);
        return -1;
    }
    return 0;
}

/* Copies the value of key in a JSON line into out: a string as it is, a
 * number or anything else as JSON text ("" when absent or not JSON). */
static void json_value(const char *line, const char *key, char *out, size_t n)
{
    out[0] = 0;
    json_t *j = json_loads(line, JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, NULL);
    const json_t *v = json_object_get(j, key);
    if (json_is_string(v)) {
        snprintf(out, n, "%s", json_string_value(v));
    } else if (v) {
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(out, n, "%s", text ? text : "");
        free(text);
    }
    json_decref(j);
}

/* ---- measurement -------------------------------------------------------------- */

typedef struct {
    double med, lo, hi, first_loss, last_loss;
    int64_t peak;
    int ok;
    char err[1024];
} figure;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void summarize(figure *f, double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    f->med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    f->lo = t[0];
    f->hi = t[n - 1];
}

typedef struct {
    sb_db *db;
    int64_t run_id;
} db_run;

static void record(db_run *r, const sb_problem *pb, const int *choice, const char *kind,
                   const figure *f, int steps)
{
    if (!r->db)
        return;
    sb_error err = {0};
    char params[2048];
    sb_params_str(pb->m, params, sizeof params);
    sb_result res = {.choice = (int *)choice, .total_cost = sb_strategy_cost(pb, choice)};
    char *json = sb_result_json_str(pb, &res, kind);
    sb_measurement_record rec = {
        .run_id = r->run_id, .model = pb->m->name, .model_path = pb->m->path, .params = params,
        .nops = pb->m->nops, .p = 1, .kind = kind, .predicted_cost = res.total_cost,
        .configs_json = json ? json : "{}", .step_median_s = f->ok ? f->med : NAN,
        .step_min_s = f->ok ? f->lo : NAN, .step_max_s = f->ok ? f->hi : NAN,
        .steps = f->ok ? steps : 0, .status = f->ok ? "ok" : "error",
        .message = f->ok ? NULL : f->err, .peak_mem_bytes = f->ok ? (double)f->peak : 0,
    };
    if (sb_db_record_measurement(r->db, &rec, NULL, &err))
        fprintf(stderr, "perf/step: %s (measurement not stored)\n", err.msg);
    free(json);
}

/* The loaded model of one case: the file's parameters with the case's and
 * the user's overrides (those the model has). */
static int load_case(const bench_case *c, const bench_opts *o, sb_model *m, sb_error *err)
{
    sb_model plain;
    if (sb_model_load(c->name, NULL, 0, &plain, err))
        return -1;
    sb_setting set[2 * MAX_SETS];
    int n = 0;
    for (int i = 0; i < c->nset; i++)
        set[n++] = c->set[i];
    for (int i = 0; i < o->nextra; i++)
        for (int k = 0; k < plain.nparams; k++)
            if (!strcmp(plain.params[k].name, o->extra[i].name))
                set[n++] = o->extra[i];
    sb_model_free(&plain);
    return sb_model_load(c->name, set, n, m, err);
}

typedef struct {
    const char *model;
    int threads;
    figure sb, th;
} row;

/* Runs one (model, threads) case: both frameworks, alternating. */
static void run_case(const bench_opts *o, const bench_case *c, int threads, db_run *dbr, row *rw,
                     char *torch_facts, size_t nfacts)
{
    sb_error err = {0};
    sb_model m = {0};
    sb_problem pb = {0};
    int *choice = NULL, have_m = 0, have_pb = 0;
    sb_executor *ex = NULL;
    peer pr = {.to = -1, .from = -1};
    int have_peer = 0, n = o->warmup + o->steps;
    double *ts = calloc((size_t)n, sizeof *ts), *tt = calloc((size_t)n, sizeof *tt);
    rw->model = c->name;
    rw->threads = threads;
    rw->sb.ok = rw->th.ok = 0;
    snprintf(rw->th.err, sizeof rw->th.err, "%s", o->torch ? "not run" : "--no-torch");
    snprintf(rw->sb.err, sizeof rw->sb.err, "not run");
    if (!ts || !tt) {
        snprintf(rw->sb.err, sizeof rw->sb.err, "out of memory");
        goto out;
    }
    if (load_case(c, o, &m, &err)) {
        snprintf(rw->sb.err, sizeof rw->sb.err, "%s", err.msg);
        goto out;
    }
    have_m = 1;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    if (sb_problem_build(&m, 1, &cp, &pb, &err)) {
        snprintf(rw->sb.err, sizeof rw->sb.err, "%s", err.msg);
        goto out;
    }
    have_pb = 1;
    /* the all-ones strategy: config 0 of every op, checked to split nothing */
    choice = calloc((size_t)m.nops, sizeof *choice);
    if (!choice) {
        snprintf(rw->sb.err, sizeof rw->sb.err, "out of memory");
        goto out;
    }
    for (int i = 0; i < m.nops; i++)
        for (int d = 0; d < pb.cfg[i].ndims; d++)
            if (pb.cfg[i].c[d] != 1) {
                snprintf(rw->sb.err, sizeof rw->sb.err,
                         "op '%s': config 0 is not all ones", m.ops[i].name);
                goto out;
            }
    sb_cpu_threads(threads); /* OpenBLAS and the OpenMP kernel loops */
    sb_exec_opts eo = {.lr = 0.01f, .seed = 1};
    int created;
    {
        sb_strategy st;
        created = !sb_strategy_from_choice(&st, &pb, choice, &err);
        if (created) {
            created = !sb_executor_create(MPI_COMM_WORLD, pb.m, &st, &sb_backend_cpu, &eo, &ex,
                                          &err);
            sb_strategy_free(&st);
        }
    }
    if (!created) {
        snprintf(rw->sb.err, sizeof rw->sb.err, "%s", err.msg);
        goto out;
    }
    if (o->torch) {
        if (peer_start(&pr, o, &m, threads)) {
            snprintf(rw->th.err, sizeof rw->th.err, "%s", pr.err);
        } else {
            have_peer = 1;
            char ver[64], blas[2048], w[32];
            json_value(pr.ready, "torch", ver, sizeof ver);
            json_value(pr.ready, "blas_libraries", blas, sizeof blas);
            json_value(pr.ready, "weights", w, sizeof w);
            snprintf(torch_facts, nfacts, "torch %s, libraries %s", ver, blas);
            /* the same network: the same number of trainable weights */
            int64_t total = 0;
            for (int i = 0; i < sb_executor_nweights(ex); i++) {
                int64_t k;
                sb_executor_weight_name(ex, i, &k);
                total += k;
            }
            if (strtoll(w, NULL, 10) != total) {
                snprintf(rw->th.err, sizeof rw->th.err,
                         "the torch model has %s weights, shardbench's %lld: not the same network",
                         w, (long long)total);
                have_peer = 0;
                peer_stop(&pr);
            }
        }
    }
    int sb_ok = 1;
    for (int s = 0; s < n; s++) {
        /* alternate who goes first, so neither always follows the other */
        for (int turn = 0; turn < 2; turn++) {
            int who = (s + turn) % 2; /* 0: shardbench, 1: torch */
            if (have_peer && sb_ok)
                nanosleep(&(struct timespec){.tv_nsec = SETTLE_NS}, NULL);
            if (who == 0 && sb_ok) {
                double loss, t0 = MPI_Wtime();
                if (sb_executor_step(ex, &loss, &err)) {
                    snprintf(rw->sb.err, sizeof rw->sb.err, "step %d: %.900s", s, err.msg);
                    sb_ok = 0;
                    continue;
                }
                ts[s] = MPI_Wtime() - t0;
                if (s == 0)
                    rw->sb.first_loss = loss;
                rw->sb.last_loss = loss;
            } else if (who == 1 && have_peer) {
                double loss;
                if (peer_step(&pr, &tt[s], &loss)) {
                    snprintf(rw->th.err, sizeof rw->th.err, "step %d: %.900s", s, pr.err);
                    have_peer = 0;
                    peer_stop(&pr);
                    continue;
                }
                if (s == 0)
                    rw->th.first_loss = loss;
                rw->th.last_loss = loss;
            }
        }
        fprintf(stderr, "perf/step: %s, %d thread%s, step %d%s: shardbench %.4f s, torch %.4f s\n",
                c->name, threads, threads == 1 ? "" : "s", s, s < o->warmup ? " (warm-up)" : "",
                ts[s], tt[s]);
    }
    if (sb_ok) {
        rw->sb.ok = 1;
        rw->sb.peak = sb_executor_peak_bytes(ex);
        summarize(&rw->sb, ts + o->warmup, o->steps);
    }
    if (have_peer) {
        rw->th.ok = 1;
        rw->th.peak = 0; /* not comparable: the peer's RSS includes Python */
        summarize(&rw->th, tt + o->warmup, o->steps);
    }
    record(dbr, &pb, choice, "bench-step", &rw->sb, o->steps);
    if (o->torch)
        record(dbr, &pb, choice, "torch", &rw->th, o->steps);
out:
    if (have_peer)
        peer_stop(&pr);
    sb_executor_free(ex);
    free(choice);
    free(ts);
    free(tt);
    if (have_pb)
        sb_problem_free(&pb);
    if (have_m)
        sb_model_free(&m);
}

int main(int argc, char **argv)
{
    /* before MPI_Init: `mpirun -np 1` binds this rank (and so the PyTorch
     * peer it starts) to one core by default; widen that to the node's
     * cores, then one re-execution for the affinity and the passive wait
     * policy (shardbench/cpuset.h, kernels.h) */
    int widened = sb_cpuset_widen(argc, argv);
    sb_cpu_passive_wait(argv);
    if (widened)
        sb_cpuset_reexec(argv);
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bench_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc || size != 1) {
        if (!rc)
            fprintf(stderr, "perf/step: runs on one rank (got %d)\n", size);
        MPI_Finalize();
        return rc == 1 ? 0 : 2;
    }
    signal(SIGPIPE, SIG_IGN);
    sb_cpuset cs;
    sb_cpuset_get(&cs, 0, 1, o.keep_binding);
    for (int t = 0; t < o.nthreads; t++)
        if (o.threads[t] > cs.cpus)
            fprintf(stderr, "perf/step: %d threads on %d cpu%s (%s): both frameworks' threads "
                    "share them%s\n", o.threads[t], cs.cpus, cs.cpus == 1 ? "" : "s", cs.list,
                    cs.binding == SB_BIND_DEFAULT ? " (--keep-binding)" : "");
    char cmd[2048] = "";
    for (int i = 0; i < argc; i++) {
        strncat(cmd, i ? " " : "", sizeof cmd - strlen(cmd) - 1);
        strncat(cmd, argv[i], sizeof cmd - strlen(cmd) - 1);
    }
    sb_db *db = NULL;
    if (strcmp(o.db, "none")) {
        sb_error err = {0};
        if (sb_db_open(o.db, 0, &db, &err)) {
            fprintf(stderr, "perf/step: %s\n", err.msg);
            MPI_Finalize();
            return err.code ? err.code : 1;
        }
    }
    row rows[MAX_CASES * MAX_THREADS];
    int nrows = 0, failed = 0;
    char torch_facts[2304] = "torch not run";
    for (int t = 0; t < o.nthreads; t++) {
        db_run dbr = {.db = db};
        if (db) {
            char devices[128], versions[512];
            sb_error err = {0};
            snprintf(devices, sizeof devices, "1 x cpu rank, %d thread%s", o.threads[t],
                     o.threads[t] == 1 ? "" : "s");
            snprintf(versions, sizeof versions, "openblas=%s", openblas_get_config());
            sb_run_meta meta = {.backend = "cpu", .devices = devices, .versions = versions,
                                .command_line = cmd};
            if (sb_db_begin_run(db, &meta, &dbr.run_id, &err)) {
                fprintf(stderr, "perf/step: %s (figures not stored)\n", err.msg);
                dbr.db = NULL;
            }
        }
        for (int c = 0; c < o.ncases; c++) {
            row *rw = &rows[nrows++];
            run_case(&o, &o.cases[c], o.threads[t], &dbr, rw, torch_facts, sizeof torch_facts);
            failed |= !rw->sb.ok || (o.torch && !rw->th.ok);
        }
        if (dbr.db) {
            sb_error err = {0};
            if (sb_db_end_run(db, dbr.run_id, &err))
                fprintf(stderr, "perf/step: %s\n", err.msg);
        }
    }
    printf("# perf/step: one rank, all-ones strategy; shardbench with OpenBLAS %s\n",
           openblas_get_config());
    printf("# PyTorch peer (%s %s): %s\n", o.python, o.peer, torch_facts);
    printf("# cpus %s (%d of %d%s%s%s)\n", cs.list, cs.cpus, cs.node_cpus,
           cs.widened ? "; widened from " : "", cs.widened ? cs.start_list : "",
           cs.widened ? ", mpirun's default binding" : "");
    printf("# median of %d timed steps after %d warm-up, alternating; ratio = shardbench / torch\n",
           o.steps, o.warmup);
    printf("%-12s %7s %14s %14s %7s %11s %11s\n", "model", "threads", "shardbench_s", "torch_s",
           "ratio", "sb_loss0", "torch_loss0");
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        char sb[32] = "failed", th[32] = "failed", ratio[16] = "-", l0[16] = "-", l1[16] = "-";
        if (r->sb.ok) {
            snprintf(sb, sizeof sb, "%.4f", r->sb.med);
            snprintf(l0, sizeof l0, "%.4f", r->sb.first_loss);
        }
        if (r->th.ok) {
            snprintf(th, sizeof th, "%.4f", r->th.med);
            snprintf(l1, sizeof l1, "%.4f", r->th.first_loss);
        } else if (!o.torch) {
            snprintf(th, sizeof th, "-");
        }
        if (r->sb.ok && r->th.ok)
            snprintf(ratio, sizeof ratio, "%.3f", r->sb.med / r->th.med);
        printf("%-12s %7d %14s %14s %7s %11s %11s\n", r->model, r->threads, sb, th, ratio, l0, l1);
    }
    for (int i = 0; i < nrows; i++) {
        const char *plural = rows[i].threads == 1 ? "" : "s";
        if (!rows[i].sb.ok)
            printf("# %s, %d thread%s: shardbench failed: %s\n", rows[i].model, rows[i].threads,
                   plural, rows[i].sb.err);
        if (o.torch && !rows[i].th.ok)
            printf("# %s, %d thread%s: torch failed: %s\n", rows[i].model, rows[i].threads,
                   plural, rows[i].th.err);
    }
    sb_db_close(db);
    MPI_Finalize();
    return failed ? 1 : 0;
}
