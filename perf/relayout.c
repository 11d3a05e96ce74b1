/* perf/relayout.c: how close sb_relayout_run comes to the raw exchange it
 * is built on. For typical layout transitions of a dense layer's input
 * (batch 64, features 4096) and a conv activation (32, 256, 56, 56) on P
 * ranks, it times sb_relayout_run (packing, MPI_Alltoallv, local copy,
 * unpacking) against a bare MPI_Alltoallv of exactly the same per-peer
 * float counts on buffers packed beforehand. The two alternate, iteration
 * by iteration (MPI_Barrier before each), so that both see the same load;
 * each figure is the median over the timed iterations of the slowest rank's
 * time. The relayout's result is checked against the expected values after
 * its first run (#wrong, summed over ranks: must be 0).
 *
 *   mpirun -np 4 perf/relayout [-n iters (20)] [-w warm-ups (3)] [--p2p]
 *
 * --p2p times sb_relayout_run_p2p (point-to-point sends and receives with
 * only the peers that share data, as a pipeline's stages run them; the
 * sends waited for before the clock stops) instead of sb_relayout_run.
 *
 * Bytes are what the busiest rank sends to other ranks per run (its local
 * copy excluded); GB/s = those bytes / time; ratio = raw time / relayout
 * time (1.0: relayout costs nothing over the exchange). */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/relayout.h"
#include "shardbench/results.h"

/* one table row, kept by rank 0 for the results database */
typedef struct {
    char tensor[32], from[32], to[32];
    int64_t bytes;
    double rel_med, rel_min, rel_max, raw_med, raw_min, raw_max; /* seconds; raw NaN: none */
} fig;
static fig figs[16];
static int nfigs;

static int P, me;
static int p2p; /* --p2p */

static void die(const char *what)
{
    fprintf(stderr, "perf/relayout: rank %d: %s\n", me, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory");
    return p;
}

/* A layout: a grid (split count per dim, product P) or every rank holding
 * the whole tensor. */
typedef struct {
    const char *name;
    int replicated;
    int split[SB_BOX_MAX_DIMS];
} layout;

static sb_box box_of(const layout *l, int nd, const int64_t *shape, int r)
{
    sb_box b = {.nd = nd};
    for (int i = nd - 1; i >= 0; i--) {
        int s = l->replicated ? 1 : l->split[i];
        int c = r % s;
        r /= s;
        b.lo[i] = c * shape[i] / s;
        b.hi[i] = (c + 1) * shape[i] / s;
    }
    return b;
}

static float fval(int64_t lin) { return (float)(lin % 1021); }

/* Fills (or, with check, counts mismatches in) a buffer laid out as box b. */
static int64_t visit(float *buf, const sb_box *b, int nd, const int64_t *shape, int check)
{
    int64_t vol = sb_box_volume(b), wrong = 0, idx[SB_BOX_MAX_DIMS];
    if (vol == 0)
        return 0;
    memcpy(idx, b->lo, sizeof idx);
    /* innermost dim in runs */
    int64_t run = b->hi[nd - 1] - b->lo[nd - 1];
    for (int64_t k = 0; k < vol; k += run) {
        int64_t lin = 0;
        for (int i = 0; i < nd; i++)
            lin = lin * shape[i] + idx[i];
        for (int64_t j = 0; j < run; j++) {
            if (check)
                wrong += buf[k + j] != fval(lin + j);
            else
                buf[k + j] = fval(lin + j);
        }
        for (int i = nd - 2; i >= 0; i--) {
            if (++idx[i] < b->hi[i])
                break;
            idx[i] = b->lo[i];
        }
    }
    return wrong;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over iterations of the slowest rank's time. */
static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static double slowest(double t)
{
    double m;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static void row(const char *tensor, int nd, const int64_t *shape, const layout *from,
                const layout *to, int iters, int warm)
{
    char label[96];
    snprintf(label, sizeof label, "%s %s -> %s", tensor, from->name, to->name);
    sb_box *S = xmalloc(sizeof *S * (size_t)P), *D = xmalloc(sizeof *D * (size_t)P);
    for (int r = 0; r < P; r++) {
        S[r] = box_of(from, nd, shape, r);
        D[r] = box_of(to, nd, shape, r);
    }
    sb_relayout *rl;
    sb_relayout_pending *pend = NULL;
    sb_error err = {0};
    if (sb_relayout_pending_new(&pend, &err))
        die(err.msg);
    if (sb_relayout_plan(MPI_COMM_WORLD, nd, shape, S, D, SB_RELAYOUT_COPY, &rl, &err))
        die(err.msg);
    float *src = xmalloc(sizeof(float) * (size_t)sb_box_volume(&S[me]));
    float *dst = xmalloc(sizeof(float) * (size_t)sb_box_volume(&D[me]));
    visit(src, &S[me], nd, shape, 0);

    /* The same exchange, bare: same per-peer counts, buffers packed once. */
    int64_t *sc64 = xmalloc(sizeof *sc64 * (size_t)P), *rc64 = xmalloc(sizeof *rc64 * (size_t)P);
    int *sc = xmalloc(sizeof *sc * (size_t)P), *sd = xmalloc(sizeof *sd * (size_t)P);
    int *rc = xmalloc(sizeof *rc * (size_t)P), *rd = xmalloc(sizeof *rd * (size_t)P);
    sb_relayout_peer_counts(rl, sc64, rc64);
    int64_t ts = 0, tr = 0;
    for (int p = 0; p < P; p++) {
        sc[p] = (int)sc64[p];
        rc[p] = (int)rc64[p];
        sd[p] = (int)ts;
        rd[p] = (int)tr;
        ts += sc64[p];
        tr += rc64[p];
    }
    float *sbuf = xmalloc(sizeof(float) * (size_t)ts), *rbuf = xmalloc(sizeof(float) * (size_t)tr);
    for (int64_t i = 0; i < ts; i++)
        sbuf[i] = (float)i;
    memset(rbuf, 0, sizeof(float) * (size_t)tr);

    /* Relayout and raw exchange alternate, so that both see the same load
     * on the machine. */
    double *t = xmalloc(sizeof *t * (size_t)iters), *u = xmalloc(sizeof *u * (size_t)iters);
    int64_t wrong = 0, wrong_all;
    for (int i = 0; i < warm + iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (p2p ? sb_relayout_run_p2p(rl, src, dst, 0, pend, &err)
                      || sb_relayout_pending_wait(pend, &err)
                : sb_relayout_run(rl, src, dst, &err))
            die(err.msg);
        double dt = slowest(MPI_Wtime() - t0);
        if (i == 0)
            wrong = visit(dst, &D[me], nd, shape, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_Alltoallv(sbuf, sc, sd, MPI_FLOAT, rbuf, rc, rd, MPI_FLOAT, MPI_COMM_WORLD);
        double du = slowest(MPI_Wtime() - t0);
        if (i >= warm) {
            t[i - warm] = dt;
            u[i - warm] = du;
        }
    }
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    double t_relayout = median(t, iters), t_raw = median(u, iters);
    if (me == 0 && nfigs < (int)(sizeof figs / sizeof figs[0])) {
        fig *f = &figs[nfigs++];
        snprintf(f->tensor, sizeof f->tensor, "%s", tensor);
        snprintf(f->from, sizeof f->from, "%s", from->name);
        snprintf(f->to, sizeof f->to, "%s", to->name);
        f->rel_med = t_relayout, f->rel_min = t[0], f->rel_max = t[iters - 1];
        f->raw_med = t_raw, f->raw_min = u[0], f->raw_max = u[iters - 1]; /* sorted by median() */
    }

    int64_t bytes = sb_relayout_bytes_sent(rl), bytes_max;
    MPI_Allreduce(&bytes, &bytes_max, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0 && nfigs && bytes_max == 0) /* a local copy only: no raw exchange to compare */
        figs[nfigs - 1].raw_med = NAN;
    if (me == 0 && nfigs)
        figs[nfigs - 1].bytes = bytes_max;
    if (me == 0) {
        if (bytes_max > 0)
            printf("%-38s %12lld %11.3f %9.2f %11.3f %9.2f %6.2f %7lld\n", label,
                   (long long)bytes_max, 1e3 * t_relayout, (double)bytes_max / t_relayout / 1e9,
                   1e3 * t_raw, (double)bytes_max / t_raw / 1e9, t_raw / t_relayout,
                   (long long)wrong_all);
        else /* a local copy only */
            printf("%-38s %12lld %11.3f %9s %11s %9s %6s %7lld\n", label, 0LL,
                   1e3 * t_relayout, "-", "-", "-", "-", (long long)wrong_all);
        fflush(stdout);
    }
    free(sc64);
    free(rc64);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(sbuf);
    free(rbuf);
    free(t);
    free(u);
    free(src);
    free(dst);
    free(S);
    free(D);
    sb_relayout_free(rl);
    sb_relayout_pending_free(pend);
}

/* Rows of the table as measurements of one run: kind `relayout` and
 * `raw-alltoallv` per transition (median/min/max seconds; the slowest
 * rank's time per repetition). */
static void store(const char *dbpath, const char *lib, int iters, int argc, char **argv)
{
    sb_db *db;
    sb_error err = {0};
    if (sb_db_open(dbpath, 0, &db, &err)) {
        fprintf(stderr, "perf/relayout: %s (figures not stored)\n", err.msg);
        return;
    }
    char devices[64], versions[512], cmd[1024] = "";
    snprintf(devices, sizeof devices, "%d x cpu rank", P);
    snprintf(versions, sizeof versions, "mpi=%s", lib);
    for (int i = 0; i < argc; i++)
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%s", i ? " " : "", argv[i]);
    sb_run_meta meta = {.backend = "cpu", .devices = devices, .versions = versions,
                        .command_line = cmd};
    int64_t run;
    if (sb_db_begin_run(db, &meta, &run, &err)) {
        fprintf(stderr, "perf/relayout: %s (figures not stored)\n", err.msg);
        sb_db_close(db);
        return;
    }
    for (int i = 0; i < nfigs; i++) {
        const fig *f = &figs[i];
        char params[160], json[128];
        snprintf(params, sizeof params, "tensor=%.31s,from=%.31s,to=%.31s", f->tensor, f->from,
                 f->to);
        snprintf(json, sizeof json, "{\"bytes_per_rank\": %lld}", (long long)f->bytes);
        for (int k = 0; k < 2; k++) {
            if (k == 1 && isnan(f->raw_med))
                continue;
            sb_measurement_record rec = {
                .run_id = run, .model = "relayout-synthetic", .params = params, .nops = 1,
                .p = P, .kind = k ? "raw-alltoallv" : p2p ? "relayout-p2p" : "relayout", .predicted_cost = NAN,
                .configs_json = json, .step_median_s = k ? f->raw_med : f->rel_med,
                .step_min_s = k ? f->raw_min : f->rel_min, .step_max_s = k ? f->raw_max : f->rel_max,
                .steps = iters, .status = "ok",
            };
            if (sb_db_record_measurement(db, &rec, NULL, &err))
                fprintf(stderr, "perf/relayout: %s (measurement not stored)\n", err.msg);
        }
    }
    if (sb_db_end_run(db, run, &err))
        fprintf(stderr, "perf/relayout: %s\n", err.msg);
    else
        printf("# stored as run %lld in %s\n", (long long)run, dbpath);
    sb_db_close(db);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int iters = 20, warm = 3, c;
    const char *dbpath = SB_DB_DEFAULT_PATH;
    static const struct option lopts[] = {{"db", required_argument, 0, 'd'},
                                          {"p2p", no_argument, 0, 'p'},
                                          {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    while ((c = getopt_long(argc, argv, "n:w:h", lopts, NULL)) != -1) {
        if (c == 'n')
            iters = atoi(optarg);
        else if (c == 'w')
            warm = atoi(optarg);
        else if (c == 'd')
            dbpath = optarg;
        else if (c == 'p')
            p2p = 1;
        else {
            if (me == 0)
                fprintf(stderr, "usage: mpirun -np P %s [-n iters] [-w warm-ups] [--p2p] [--db FILE|none]\n",
                        argv[0]);
            MPI_Finalize();
            return c == 'h' ? 0 : 2;
        }
    }
    if (iters < 1 || warm < 0) {
        if (me == 0)
            fprintf(stderr, "perf/relayout: -n must be >= 1 and -w >= 0\n");
        MPI_Finalize();
        return 2;
    }

    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, ',');
    if (nl)
        *nl = 0;
    if (me == 0) {
        printf("# relayout%s vs raw MPI_Alltoallv: %d ranks, median of %d after %d warm-ups, %s\n",
               p2p ? " (point to point)" : "", P, iters, warm, lib);
        printf("%-38s %12s %11s %9s %11s %9s %6s %7s\n", "transition", "bytes/rank",
               "relayout ms", "GB/s", "raw ms", "GB/s", "ratio", "#wrong");
    }

    char pn[32], hn[32], pn4[32], hn4[32];
    snprintf(pn, sizeof pn, "(%d,1)", P);
    snprintf(hn, sizeof hn, "(%d,2)", P / 2);
    snprintf(pn4, sizeof pn4, "(%d,1,1,1)", P);
    snprintf(hn4, sizeof hn4, "(%d,2,1,1)", P / 2);
    char mn[32], mn4[32];
    snprintf(mn, sizeof mn, "(1,%d)", P);
    snprintf(mn4, sizeof mn4, "(1,%d,1,1)", P);
    layout batch = {pn, 0, {P, 1}}, model = {mn, 0, {1, P}}, half = {hn, 0, {P / 2, 2}};
    layout batch4 = {pn4, 0, {P, 1, 1, 1}}, chan4 = {mn4, 0, {1, P, 1, 1}};
    layout half4 = {hn4, 0, {P / 2, 2, 1, 1}}, repl = {"replicated", 1, {0}};

    const int64_t dense[2] = {64, 4096}, act[4] = {32, 256, 56, 56};
    row("x(64,4096)", 2, dense, &batch, &model, iters, warm);
    if (P % 2 == 0)
        row("x(64,4096)", 2, dense, &batch, &half, iters, warm);
    row("x(64,4096)", 2, dense, &repl, &batch, iters, warm);
    row("x(64,4096)", 2, dense, &batch, &repl, iters, warm);
    row("act(32,256,56,56)", 4, act, &batch4, &chan4, iters, warm);
    if (P % 2 == 0)
        row("act(32,256,56,56)", 4, act, &batch4, &half4, iters, warm);
    row("act(32,256,56,56)", 4, act, &repl, &batch4, iters, warm);
    row("act(32,256,56,56)", 4, act, &batch4, &repl, iters, warm);
    if (me == 0 && strcmp(dbpath, "none"))
        store(dbpath, lib, iters, argc, argv);
    MPI_Finalize();
    return 0;
}
