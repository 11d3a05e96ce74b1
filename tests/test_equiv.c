/* test_equiv.c: every strategy computes what one device computes.
 *
 * Run under mpirun -np P: for one model at reduced sizes, rank 0 first
 * trains the model alone (MPI_COMM_SELF, every op unsplit) for STEPS steps;
 * then all P ranks train it under data parallelism, the search's best
 * strategy, and random valid strategies (sampled from the configs the
 * enumerator gives at cutoff 1, so small dims split too: split reduction
 * dims, h/w halos, vocab, LSTM layers and units, idle ranks). After every
 * step the loss must match, and after the last step every weight, gathered
 * to rank 0: max |a - b| <= 1e-4 * max |b| per tensor, and, stricter,
 * max |a - b| <= 1e-1 * max |b - b0| (b0: the initial weights) wherever the
 * update is more than noise: a missing or doubled gradient piece fails.
 *
 *   mpirun -np P test_equiv MODEL [--set k=v ...] [--random N] [--seed S] [--lr X]
 *                          [--backend cpu|cuda] [--flops F] [--bw B] [--split DIM]
 * --split DIM adds a strategy that splits the iteration dim named DIM of
 * every op that has one as far as P allows (data parallel elsewhere); the
 * test fails if no op splits it (a grouped conv's `group`, say).
 * --backend runs the strategies on that backend (the one-device reference
 * stays on the CPU); a backend other than cpu is held to 1e-3. P must be at
 * least 2 (one rank cannot split anything: it would compare a run with
 * itself). The search's best strategy must split at least one op, or the
 * test fails: --flops and --bw (the cost model's TFLOP/s and GB/s) set
 * where splitting pays at the test's small sizes. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/candidates.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"

#define STEPS 3
#define TOL 1e-4
#define UPD_TOL 1e-1 /* of each weight's own update, where it is not noise (relu
                        * kinks flipped by rounding move single terms) */

static int rank, size;

static void die(const char *what, const sb_error *err)
{
    fprintf(stderr, "test_equiv: rank %d: %s: %s\n", rank, what, err->msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

typedef struct {
    double loss[STEPS];
    int nw;
    float **w;
    int64_t *n;
    char (*names)[SB_NAME_MAX];
    float **w0;   /* initial weights (rank 0) */
} outcome;

/* Largest relative change of any weight over the training (the test is
 * only meaningful if training moves the weights). */
static double moved;
static float lr = 0.2f;
static const sb_backend *run_be = &sb_backend_cpu; /* the strategies' backend */
static double tol = TOL;

static void train(MPI_Comm comm, const sb_problem *pb, const int *choice, outcome *o, int gather)
{
    sb_error err = {0};
    sb_executor *ex;
    sb_exec_opts eo = {.lr = lr, .seed = 7};
    const int *cfg[pb->m->nops]; /* op i's chosen config */
    for (int i = 0; i < pb->m->nops; i++)
        cfg[i] = pb->cfg[i].c + (size_t)choice[i] * (size_t)pb->m->ops[i].ndims;
    sb_plan_strategy st = {pb->m, cfg};
    if (sb_executor_create(comm, &st, comm == MPI_COMM_SELF ? &sb_backend_cpu : run_be, &eo, &ex,
                           &err))
        die("create", &err);
    int me;
    MPI_Comm_rank(comm, &me);
    int nw0 = sb_executor_nweights(ex);
    float **w0 = calloc((size_t)nw0, sizeof *w0);
    for (int w = 0; w < nw0 && gather; w++) {
        int64_t n;
        sb_executor_weight_name(ex, w, &n);
        if (me == 0)
            w0[w] = malloc((size_t)n * sizeof(float));
        if (sb_executor_gather_weight(ex, w, 0, w0[w], &err))
            die("gather", &err);
    }
    for (int s = 0; s < STEPS; s++)
        if (sb_executor_step(ex, &o->loss[s], &err))
            die("step", &err);
    o->nw = sb_executor_nweights(ex);
    if (gather) {
        int me;
        MPI_Comm_rank(comm, &me);
        o->w = calloc((size_t)o->nw, sizeof *o->w);
        o->n = calloc((size_t)o->nw, sizeof *o->n);
        o->names = calloc((size_t)o->nw, sizeof *o->names);
        for (int w = 0; w < o->nw; w++) {
            snprintf(o->names[w], SB_NAME_MAX, "%s", sb_executor_weight_name(ex, w, &o->n[w]));
            if (me == 0)
                o->w[w] = malloc((size_t)o->n[w] * sizeof(float));
            if (sb_executor_gather_weight(ex, w, 0, o->w[w], &err))
                die("gather", &err);
            if (me == 0) {
                double md = 0, mb = 0;
                for (int64_t e = 0; e < o->n[w]; e++) {
                    md = fmax(md, fabs((double)o->w[w][e] - w0[w][e]));
                    mb = fmax(mb, fabs((double)w0[w][e]));
                }
                moved = fmax(moved, md / fmax(mb, 1e-30));
            }
        }
    }
    o->w0 = w0;
    sb_executor_free(ex);
}

static void free_outcome(outcome *o)
{
    if (o->w)
        for (int w = 0; w < o->nw; w++)
            free(o->w[w]);
    free(o->w);
    if (o->w0)
        for (int w = 0; w < o->nw; w++)
            free(o->w0[w]);
    free(o->w0);
    free(o->n);
    free(o->names);
    o->w = NULL;
    o->n = NULL;
    o->names = NULL;
}

/* deterministic xorshift, identical on every rank */
static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Data parallel, then every op with a dim named `dim` splits it p ways (the
 * nearest valid config); returns how many ops split it. */
static int split_named(const sb_problem *pb, const char *dim, int *choice)
{
    sb_error err = {0};
    if (sb_strategy_data_parallel(pb, choice, &err))
        die("data parallel", &err);
    int nsplit = 0;
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        int want[SB_MAX_DIMS], d = -1;
        for (int j = 0; j < op->ndims; j++) {
            want[j] = 1;
            if (!strcmp(op->dims[j].name, dim))
                d = j;
        }
        if (d < 0)
            continue;
        want[d] = pb->p;
        choice[i] = sb_config_nearest(pb, i, want, NULL);
        nsplit += pb->cfg[i].c[(size_t)choice[i] * (size_t)op->ndims + (size_t)d] > 1;
    }
    return nsplit;
}

static void describe(const sb_problem *pb, const int *choice, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < pb->m->nops && used + 64 < n; i++) {
        const int *c = pb->cfg[i].c + (size_t)choice[i] * (size_t)pb->cfg[i].ndims;
        int q = 1;
        for (int d = 0; d < pb->cfg[i].ndims; d++)
            q *= c[d];
        if (q == 1)
            continue;
        char cfg[128];
        sb_config_str(c, pb->cfg[i].ndims, cfg, sizeof cfg);
        used += (size_t)snprintf(buf + used, n - used, " %s[%s]", pb->m->ops[i].name, cfg);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: test_equiv MODEL [--set k=v ...] [--random N] [--seed S] "
                            "[--flops F] [--bw B]\n");
        MPI_Finalize();
        return 2;
    }
    if (size < 2) {
        fprintf(stderr, "test_equiv: run it on at least 2 ranks: one rank splits nothing and "
                        "would compare a run with itself\n");
        MPI_Finalize();
        return 2;
    }
    double flops = 0, bw = 0;
    sb_setting set[32];
    int nset = 0, nrandom = 8;
    const char *split_dim = NULL;
    for (int i = 2; i < argc; i++) {
        sb_error err = {0};
        if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            if (sb_setting_parse(argv[++i], &set[nset++], &err))
                die("--set", &err);
        } else if (!strcmp(argv[i], "--lr") && i + 1 < argc) {
            lr = (float)atof(argv[++i]);
        } else if (!strcmp(argv[i], "--flops") && i + 1 < argc) {
            flops = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--bw") && i + 1 < argc) {
            bw = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--random") && i + 1 < argc) {
            nrandom = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            if (!(run_be = sb_backend_get(argv[++i], &err)))
                die("--backend", &err);
            /* the same kernels are held to the same tolerance */
            tol = run_be == &sb_backend_cpu || run_be == sb_backend_cpu_devmem() ? TOL : 1e-3;
        } else if (!strcmp(argv[i], "--split") && i + 1 < argc) {
            split_dim = argv[++i];
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            rng = strtoull(argv[++i], NULL, 10) * 2654435761ULL + 1;
        }
    }
    sb_error err = {0};
    sb_model m;
    if (sb_model_load(argv[1], set, nset, &m, &err))
        die("model", &err);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    /* reference: one rank, every op unsplit (config 0 is all ones) */
    outcome ref = {0};
    if (rank == 0) {
        sb_problem p1;
        if (sb_problem_build(&m, 1, &cp, &p1, &err))
            die("problem p=1", &err);
        int *ones = calloc((size_t)m.nops, sizeof *ones);
        train(MPI_COMM_SELF, &p1, ones, &ref, 1);
        free(ones);
        sb_problem_free(&p1);
    }
    MPI_Bcast(ref.loss, STEPS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("reference %s: losses %.9f %.9f %.9f; weights moved by up to %.3g (relative)\n",
               m.name, ref.loss[0], ref.loss[1], ref.loss[2], moved);
        if (moved < 1e-3) {
            printf("FAIL: training does not move the weights; the comparison would prove nothing\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    /* strategies on all ranks: configs enumerated at cutoff 1 */
    sb_problem pb;
    cp.cutoff = 1;
    if (flops > 0)
        cp.tflops = flops;
    if (bw > 0)
        cp.gbs = bw;
    if (sb_problem_build(&m, size, &cp, &pb, &err))
        die("problem", &err);
    int nstrat = 2 + nrandom + (split_dim != NULL), failures = 0;
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    for (int k = 0; k < nstrat; k++) {
        const char *kind;
        if (k == 0) {
            kind = "dp";
            sb_strategy_data_parallel(&pb, choice, &err);
        } else if (k == 1) {
            kind = "best";
            sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 1024};
            sb_result r;
            if (sb_search(&pb, &so, &r, &err))
                die("search", &err);
            memcpy(choice, r.choice, (size_t)m.nops * sizeof *choice);
            sb_result_free(&r);
            char desc[4096];
            describe(&pb, choice, desc, sizeof desc);
            if (!desc[0]) {
                if (rank == 0)
                    printf("FAIL: best %s p=%d splits no op: it would compare unsplit runs (choose "
                           "sizes or --flops/--bw where splitting pays)\n", m.name, size);
                failures++;
            }
        } else if (k == 2 && split_dim) {
            kind = "split";
            int n = split_named(&pb, split_dim, choice);
            if (rank == 0)
                printf("split: %d ops split '%s'\n", n, split_dim);
            if (n == 0) {
                if (rank == 0)
                    printf("FAIL: no op of %s p=%d splits a dim named '%s'\n", m.name, size,
                           split_dim);
                failures++;
            }
        } else {
            kind = "random";
            /* bias towards configs using many ranks, so splits are common */
            for (int i = 0; i < m.nops; i++) {
                int n = pb.cfg[i].n, a = (int)(next() % (uint64_t)n), b = (int)(next() % (uint64_t)n);
                int qa = 1, qb = 1;
                for (int d = 0; d < pb.cfg[i].ndims; d++) {
                    qa *= pb.cfg[i].c[(size_t)a * (size_t)pb.cfg[i].ndims + (size_t)d];
                    qb *= pb.cfg[i].c[(size_t)b * (size_t)pb.cfg[i].ndims + (size_t)d];
                }
                choice[i] = qa >= qb ? a : b;
            }
        }
        outcome o = {0};
        double t0 = MPI_Wtime();
        train(MPI_COMM_WORLD, &pb, choice, &o, 1);
        double worst_loss = 0, worst_w = 0, worst_upd = 0;
        const char *worst_name = "";
        for (int s = 0; s < STEPS; s++) {
            double d = fabs(o.loss[s] - ref.loss[s]) / fmax(fabs(ref.loss[s]), 1e-30);
            worst_loss = fmax(worst_loss, d);
        }
        if (rank == 0) {
            for (int w = 0; w < o.nw; w++) {
                double md = 0, mb = 0;
                for (int64_t e = 0; e < o.n[w]; e++) {
                    md = fmax(md, fabs((double)o.w[w][e] - ref.w[w][e]));
                    mb = fmax(mb, fabs((double)ref.w[w][e]));
                }
                double rel = md / fmax(mb, 1e-30);
                double du = 0;
                for (int64_t e = 0; e < o.n[w]; e++)
                    du = fmax(du, fabs((double)ref.w[w][e] - ref.w0[w][e]));
                /* the update check counts where the update is more than noise */
                if (du > 1e-5 * mb && md / du > worst_upd) {
                    worst_upd = md / fmax(du, 1e-30);
                    if (getenv("SB_EQUIV_VERBOSE"))
                        printf("    %s: diff %.3g, update %.3g\n", o.names[w], md, du);
                }
                if (rel > worst_w) {
                    worst_w = rel;
                    worst_name = o.names[w];
                }
            }
            int bad = worst_loss > tol || worst_w > tol || worst_upd > UPD_TOL;
            char desc[4096];
            describe(&pb, choice, desc, sizeof desc);
            printf("%-6s %s p=%d: loss rel err %.2e, worst weight rel err %.2e (%s; %.2e of the update), %.2fs %s\n",
                   kind, m.name, size, worst_loss, worst_w, worst_name ? worst_name : "-", worst_upd,
                   MPI_Wtime() - t0, bad ? "FAIL" : "ok");
            printf("  losses %.9f %.9f %.9f\n", o.loss[0], o.loss[1], o.loss[2]);
            printf("  splits:%s\n", desc[0] ? desc : " none");
            if (bad)
                failures++;
            fflush(stdout);
        }
        free_outcome(&o);
    }
    MPI_Bcast(&failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s p=%d: %d of %d strategies differ from one device\n", m.name, size, failures, nstrat);
    free(choice);
    free_outcome(&ref);
    sb_problem_free(&pb);
    sb_model_free(&m);
    MPI_Finalize();
    return failures ? 1 : 0;
}
