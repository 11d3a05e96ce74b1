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
 *                          [--backend cpu|cuda] [--flops F] [--bw B] [--adam EPS]
 *                          [--zero N] [--want-split KIND:DIM,...] [--split OP=DIM ...]
 *                          [--best-splits OP=DIM ...] [--paper] [--recompute all|OP,OP,...]
 * --paper adds the PaSE paper's Table II strategy mapped onto this model,
 * sizes and P (paper.h, docs/paper-table2.md).
 * --best-splits fails the test unless the search's best strategy splits
 * op OP along DIM (what the model is there to test).
 * --split adds a strategy: the search's best with op OP's config replaced by
 * the one that splits its iteration dim DIM the most (an unknown op or dim,
 * or a dim no config splits, fails the test), so a split the best and the
 * random strategies may miss (a dim a broadcast operand lacks) always runs.
 * OP `*` forces every op that has the dim DIM (the mixture of experts'
 * `expert`, a grouped conv's `group`: expert or group parallelism is tested
 * whatever the search prefers), and fails when no op can split it.
 * --backend runs the strategies on that backend (the one-device reference
 * stays on the CPU); a backend other than cpu is held to 1e-3. P must be at
 * least 2 (one rank cannot split anything: it would compare a run with
 * itself). --adam EPS trains every run (the reference too) with Adam
 * (epsilon EPS; the learning rate is --lr) instead of SGD. --zero N runs
 * the strategies (not the one-rank reference) with ZeRO stage N, and fails
 * unless some strategy replicates a weight (data parallelism does), so that
 * something was sliced. The search's
 * best strategy must split at least one op, or the
 * test fails: --flops and --bw (the cost model's TFLOP/s and GB/s) set
 * where splitting pays at the test's small sizes. --want-split fails the
 * test unless, for each KIND:DIM, some strategy run split dim DIM of an op
 * of kind KIND (softmax:mem: a split softmax axis), so the cases a model
 * is there for cannot silently drop out of the random sample. --recompute
 * runs the strategies (not the reference) with those ops' activations
 * dropped after their forward and recomputed before their backward, and
 * also runs data parallel and the best strategy without it: the test
 * fails unless recomputation lowers the peak tensor bytes (the largest over
 * the ranks) of both, and unless some op is recomputed; with --stages S > 1
 * also unless some recomputed op reads an input from an earlier stage (the
 * input the stage keeps for the recomputed forward). --ref-microbatches
 * runs the one-rank reference as M micro-batches too (S = 1: the same
 * micro-batch accumulation, on one rank), instead of the whole batch. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/candidates.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"
#include "shardbench/paper.h"
#include "threads.h"

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
    int64_t peak; /* peak tensor bytes, the largest over the ranks */
} outcome;

/* Largest relative change of any weight over the training (the test is
 * only meaningful if training moves the weights). */
static double moved;
static float lr = 0.2f;
static const sb_backend *run_be = &sb_backend_cpu; /* the strategies' backend */
static double tol = TOL;
static sb_update_rule update = SB_UPDATE_SGD; /* --adam EPS: Adam with that epsilon */
static float adam_eps;
static int zero;       /* --zero N: the strategies' ZeRO stage (the reference has one rank) */
static int paper;      /* --paper: add the paper's Table II strategy (paper.h) at this P */
/* --stages S --microbatches M --schedule X: the strategies run as a pipeline
 * (S even stages of P/S ranks, configs for a stage's ranks); the reference
 * stays one rank on the whole batch */
static sb_pipeline pipe;
static int use_pipe;
static sb_pipeline ref_pipe; /* --ref-microbatches: 1 stage, M micro-batches, one rank */
static int ref_micro;
static long replicated; /* weights the strategies run held on 2 ranks or more alike */
static const char *recompute_spec; /* --recompute: the strategies' recomputed ops */
static int recompute_on = 1;       /* 0: this run without them (the peak comparison) */

static void train(MPI_Comm comm, const sb_problem *pb, const int *choice, outcome *o, int gather)
{
    sb_error err = {0};
    sb_executor *ex;
    sb_exec_opts eo = {.lr = lr, .seed = 7, .update = update, .eps = adam_eps};
    const int *cfg[pb->m->nops]; /* op i's chosen config */
    for (int i = 0; i < pb->m->nops; i++)
        cfg[i] = pb->cfg[i].c + (size_t)choice[i] * (size_t)pb->m->ops[i].ndims;
    unsigned char rec[pb->m->nops];
    if (recompute_spec && recompute_on && comm != MPI_COMM_SELF
        && sb_recompute_parse(pb->m, recompute_spec, rec, &err))
        die("--recompute", &err);
    int nranks;
    MPI_Comm_size(comm, &nranks);
    sb_strategy st;
    if (sb_strategy_from_configs(&st, pb->m, nranks, cfg,
                                 comm != MPI_COMM_SELF ? (use_pipe ? &pipe : NULL)
                                                       : (ref_micro ? &ref_pipe : NULL),
                                 recompute_spec && recompute_on && comm != MPI_COMM_SELF ? rec
                                                                                         : NULL,
                                 &err))
        die("strategy", &err);
    st.zero = comm == MPI_COMM_SELF ? 0 : zero;
    if (sb_executor_create(comm, pb->m, &st, comm == MPI_COMM_SELF ? &sb_backend_cpu : run_be, &eo,
                           &ex, &err))
        die("create", &err);
    sb_strategy_free(&st);
    int me, np;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &np);
    int nw0 = sb_executor_nweights(ex);
    float **w0 = calloc((size_t)nw0, sizeof *w0);
    /* weights whose shard two ranks hold alike: what ZeRO slices */
    sb_box *boxes = calloc((size_t)np, sizeof *boxes);
    for (int w = 0; w < nw0; w++) {
        sb_executor_weight_boxes(ex, w, boxes);
        int rep = 0;
        for (int a = 0; a < np && !rep; a++)
            for (int b = a + 1; b < np && !rep; b++)
                rep = boxes[a].nd && sb_box_volume(&boxes[a]) && sb_box_equal(&boxes[a], &boxes[b]);
        replicated += rep;
    }
    free(boxes);
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
    int64_t peak = sb_executor_peak_bytes(ex);
    MPI_Allreduce(&peak, &o->peak, 1, MPI_INT64_T, MPI_MAX, comm);
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

/* --want-split: kind and dim names, and whether a strategy split them */
#define MAX_WANT 16
static struct {
    char kind[SB_NAME_MAX], dim[SB_NAME_MAX];
    int seen;
} want[MAX_WANT];
static int nwant;

static void parse_want(const char *arg)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon || colon == tok || !colon[1] || nwant == MAX_WANT) {
            fprintf(stderr, "test_equiv: --want-split takes KIND:DIM,... (at most %d), got '%s'\n",
                    MAX_WANT, tok);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        *colon = '\0';
        snprintf(want[nwant].kind, SB_NAME_MAX, "%s", tok);
        snprintf(want[nwant].dim, SB_NAME_MAX, "%s", colon + 1);
        nwant++;
    }
}

static void note_splits(const sb_problem *pb, const int *choice)
{
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        const int *c = pb->cfg[i].c + (size_t)choice[i] * (size_t)pb->cfg[i].ndims;
        for (int w = 0; w < nwant; w++)
            for (int d = 0; d < op->ndims; d++)
                if (c[d] > 1 && !strcmp(op->dims[d].name, want[w].dim)
                    && !strcmp(sb_op_kind_name(op->kind), want[w].kind))
                    want[w].seen = 1;
    }
}

/* The split of iteration dim `dim` of the op named `op` under choice; 0
 * (with a message on rank 0) when there is no such op or dim. */
static int split_of(const sb_problem *pb, const int *choice, const char *op, const char *dim)
{
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *o = &pb->m->ops[i];
        if (strcmp(o->name, op) != 0)
            continue;
        for (int d = 0; d < o->ndims; d++)
            if (!strcmp(o->dims[d].name, dim))
                return pb->cfg[i].c[(size_t)choice[i] * (size_t)pb->cfg[i].ndims + (size_t)d];
        break;
    }
    if (rank == 0)
        printf("FAIL: no op '%s' with a dim '%s'\n", op, dim);
    return 0;
}

/* The config of op i splitting its iteration dim d the most (then using
 * the most ranks), or -1 when none splits it. */
static int most_split(const sb_problem *pb, int i, int d)
{
    int nd = pb->cfg[i].ndims, bestk = -1, bestc = 1, bestq = 0;
    for (int k = 0; k < pb->cfg[i].n; k++) {
        const int *c = pb->cfg[i].c + (size_t)k * (size_t)nd;
        int q = 1;
        for (int j = 0; j < nd; j++)
            q *= c[j];
        if (c[d] > bestc || (c[d] == bestc && bestk >= 0 && q > bestq)) {
            bestk = k;
            bestc = c[d];
            bestq = q;
        }
    }
    return bestk;
}

/* The index of op i's iteration dim named dim, or -1. */
static int dim_of(const sb_op *o, const char *dim)
{
    for (int d = 0; d < o->ndims; d++)
        if (!strcmp(o->dims[d].name, dim))
            return d;
    return -1;
}

/* choice[i] := most_split for the op named `op`, or, with op "*", for every
 * op that has a dim `dim` (expert or group parallelism everywhere); 0, or
 * -1 with a message on rank 0 when nothing could be split that way. */
static int force_split(const sb_problem *pb, int *choice, const char *op, const char *dim)
{
    int all = !strcmp(op, "*"), found = 0, split = 0;
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *o = &pb->m->ops[i];
        if (!all && strcmp(o->name, op) != 0)
            continue;
        found = 1;
        int d = dim_of(o, dim), k = d >= 0 ? most_split(pb, i, d) : -1;
        if (k >= 0) {
            choice[i] = k;
            split++;
        } else if (!all) {
            if (rank == 0)
                printf("FAIL: --split %s=%s: op '%s' %s '%s'\n", op, dim, op,
                       d < 0 ? "has no dim" : "has no config that splits", dim);
            return -1;
        }
    }
    if (!found || !split) {
        if (rank == 0)
            printf("FAIL: --split %s=%s: %s\n", op, dim,
                   !found ? "no such op" : "no op can split that dim on these ranks");
        return -1;
    }
    return 0;
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
    /* the kernels' threads: this rank's share of the node's CPUs, set as
     * `run` sets them (the launcher's binding kept, not widened), unless
     * OPENBLAS_NUM_THREADS / OMP_NUM_THREADS say, as ctest's do: 32 ranks
     * on 2 cores by hand with OpenBLAS's own count ran 50 times slower */
    sb_cpuset cpus;
    cli_cpu_setup(MPI_COMM_WORLD, 1, &cpus);
    if (argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: test_equiv MODEL [--set k=v ...] [--random N] [--seed S] "
                            "[--flops F] [--bw B] [--split OP=DIM ...] [--best-splits OP=DIM ...] "
                            "[--stages S] [--microbatches M] [--schedule gpipe|1f1b]\n");
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
    int nset = 0, nrandom = 8, nsplit = 0, nbest = 0, stages = 1, micro = 1;
    sb_schedule sched = SB_SCHEDULE_GPIPE;
    char split_op[16][SB_NAME_MAX], split_dim[16][SB_NAME_MAX];
    char best_op[16][SB_NAME_MAX], best_dim[16][SB_NAME_MAX];
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
        } else if (!strcmp(argv[i], "--want-split") && i + 1 < argc) {
            parse_want(argv[++i]);
        } else if (!strcmp(argv[i], "--random") && i + 1 < argc) {
            nrandom = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            if (!(run_be = sb_backend_get(argv[++i], &err)))
                die("--backend", &err);
            /* the same kernels are held to the same tolerance */
            tol = run_be == &sb_backend_cpu || run_be == sb_backend_cpu_devmem() ? TOL : 1e-3;
        } else if (!strcmp(argv[i], "--zero") && i + 1 < argc) {
            zero = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--recompute") && i + 1 < argc) {
            recompute_spec = argv[++i];
        } else if (!strcmp(argv[i], "--ref-microbatches")) {
            ref_micro = 1;
        } else if (!strcmp(argv[i], "--adam") && i + 1 < argc) {
            update = SB_UPDATE_ADAM;
            adam_eps = (float)atof(argv[++i]);
        } else if ((!strcmp(argv[i], "--split") || !strcmp(argv[i], "--best-splits")) && i + 1 < argc) {
            int best = argv[i][2] == 'b', *n = best ? &nbest : &nsplit;
            const char *eq = strchr(argv[++i], '=');
            if (!eq || eq == argv[i] || !eq[1] || *n == 16 || eq - argv[i] >= SB_NAME_MAX
                || strlen(eq + 1) >= SB_NAME_MAX) {
                if (rank == 0)
                    fprintf(stderr, "test_equiv: %s takes OP=DIM (at most 16), got '%s'\n",
                            argv[i - 1], argv[i]);
                MPI_Finalize();
                return 2;
            }
            snprintf((best ? best_op : split_op)[*n], SB_NAME_MAX, "%.*s", (int)(eq - argv[i]), argv[i]);
            snprintf((best ? best_dim : split_dim)[(*n)++], SB_NAME_MAX, "%s", eq + 1);
        } else if (!strcmp(argv[i], "--paper")) {
            paper = 1;
        } else if (!strcmp(argv[i], "--stages") && i + 1 < argc) {
            stages = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--microbatches") && i + 1 < argc) {
            micro = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--schedule") && i + 1 < argc) {
            if (sb_schedule_parse(argv[++i], &sched)) {
                if (rank == 0)
                    fprintf(stderr, "test_equiv: --schedule gpipe|1f1b, got '%s'\n", argv[i]);
                MPI_Finalize();
                return 2;
            }
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            rng = strtoull(argv[++i], NULL, 10) * 2654435761ULL + 1;
        }
    }
    sb_error err = {0};
    sb_model m;
    if (sb_model_load(argv[1], set, nset, &m, &err))
        die("model", &err);
    use_pipe = stages > 1 || micro > 1;
    if (use_pipe && sb_pipeline_even(&pipe, &m, size, stages, micro, sched, &err))
        die("pipeline", &err);
    if (ref_micro && (micro < 2 || sb_pipeline_even(&ref_pipe, &m, 1, 1, micro, sched, &err))) {
        if (rank == 0)
            printf("FAIL: --ref-microbatches needs --microbatches M > 1 that fits the model (%s)\n",
                   err.msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (recompute_spec) {
        /* the test means something only if ops are recomputed, and in a
         * pipeline only if one of them reads what an earlier stage sent */
        unsigned char *rec = calloc((size_t)m.nops, 1);
        if (sb_recompute_parse(&m, recompute_spec, rec, &err))
            die("--recompute", &err);
        int nrec = 0, nrecv = 0;
        for (int i = 0; i < m.nops; i++) {
            nrec += rec[i] != 0;
            int recv = 0;
            for (int k = 0; rec[i] && use_pipe && k < m.ops[i].nin; k++) {
                int pr = m.tensors[m.ops[i].in[k].tensor].producer;
                recv |= pr >= 0 && sb_pipeline_stage_of(&pipe, pr) != sb_pipeline_stage_of(&pipe, i);
            }
            nrecv += recv;
        }
        free(rec);
        if (rank == 0)
            printf("recompute %s: %d of %d ops, %d of them reading an input from an earlier "
                   "stage\n", recompute_spec, nrec, m.nops, nrecv);
        if (!nrec || (stages > 1 && !nrecv)) {
            if (rank == 0)
                printf("FAIL: --recompute %s recomputes %s\n", recompute_spec,
                       !nrec ? "no op" : "no op that reads a stage's received input");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    int dev = size / stages; /* the ranks of a stage: what each op's config is for */
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
        printf("reference %s%s: losses %.9f %.9f %.9f; weights moved by up to %.3g (relative)\n",
               m.name, ref_micro ? " (one rank, the same micro-batches)" : "", ref.loss[0],
               ref.loss[1], ref.loss[2], moved);
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
    if (sb_problem_build(&m, dev, &cp, &pb, &err))
        die("problem", &err);
    if (rank == 0 && use_pipe)
        printf("pipeline: %d stages of %d ranks, %d micro-batches, %s\n", stages, dev, micro,
               sb_schedule_name(sched));
    int nstrat = 2 + nsplit + nrandom + paper, failures = 0;
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    int *best = calloc((size_t)m.nops, sizeof *best);
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
            memcpy(best, r.choice, (size_t)m.nops * sizeof *best);
            sb_result_free(&r);
            char desc[4096];
            describe(&pb, choice, desc, sizeof desc);
            if (!desc[0] && dev > 1) {
                if (rank == 0)
                    printf("FAIL: best %s p=%d splits no op: it would compare unsplit runs (choose "
                           "sizes or --flops/--bw where splitting pays)\n", m.name, size);
                failures++;
            }
            for (int b = 0; b < nbest; b++)
                if (split_of(&pb, choice, best_op[b], best_dim[b]) < 2) {
                    if (rank == 0)
                        printf("FAIL: best %s p=%d does not split op '%s' along '%s'\n", m.name,
                               size, best_op[b], best_dim[b]);
                    failures++;
                }
        } else if (k < 2 + nsplit) {
            kind = "split";
            memcpy(choice, best, (size_t)m.nops * sizeof *choice);
            if (force_split(&pb, choice, split_op[k - 2], split_dim[k - 2])) {
                failures++;
                continue;
            }
        } else if (paper && k == nstrat - 1) {
            kind = "paper";
            sb_paper_table t;
            int *row_of = calloc((size_t)m.nops, sizeof *row_of);
            int *nearest = calloc((size_t)m.nops, sizeof *nearest);
            if (sb_paper_table_load(NULL, &t, &err) ||
                sb_paper_strategy(&pb, &t, choice, row_of, nearest, &err))
                die("paper strategy", &err);
            sb_paper_table_free(&t);
            free(row_of);
            free(nearest);
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
        note_splits(&pb, choice);
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
            char pdesc[64] = "";
            if (use_pipe)
                snprintf(pdesc, sizeof pdesc, " S=%d M=%d %s", stages, micro, sb_schedule_name(sched));
            printf("%-6s %s p=%d%s: loss rel err %.2e, worst weight rel err %.2e (%s; %.2e of the update), %.2fs %s\n",
                   kind, m.name, size, pdesc, worst_loss, worst_w, worst_name ? worst_name : "-", worst_upd,
                   MPI_Wtime() - t0, bad ? "FAIL" : "ok");
            printf("  losses %.9f %.9f %.9f\n", o.loss[0], o.loss[1], o.loss[2]);
            printf("  splits:%s\n", desc[0] ? desc : " none");
            if (bad)
                failures++;
            fflush(stdout);
        }
        if (recompute_spec && k < 2) {
            /* the same strategy without recomputation: its peak must be higher */
            outcome plain = {0};
            recompute_on = 0;
            train(MPI_COMM_WORLD, &pb, choice, &plain, 0);
            recompute_on = 1;
            int worse = !(o.peak < plain.peak);
            if (rank == 0)
                printf("  peak bytes per rank: %lld recomputing %s, %lld without (%+.1f%%) %s\n",
                       (long long)o.peak, recompute_spec, (long long)plain.peak,
                       100.0 * ((double)o.peak / (double)plain.peak - 1.0), worse ? "FAIL" : "ok");
            failures += worse && rank == 0;
            free_outcome(&plain);
        }
        free_outcome(&o);
    }
    for (int w = 0; w < nwant; w++)
        if (!want[w].seen) {
            if (rank == 0)
                printf("FAIL: no strategy split dim '%s' of a %s op (--want-split): the test "
                       "would not cover it (more --random, another --seed)\n", want[w].dim,
                       want[w].kind);
            failures++;
        }
    if (zero) {
        if (rank == 0)
            printf("ZeRO stage %d: %ld replicated weights over the strategies\n", zero, replicated);
        if (!replicated) {
            if (rank == 0)
                printf("FAIL: --zero %d but no strategy replicates a weight (nothing was sliced)\n",
                       zero);
            failures++;
        }
    }
    MPI_Bcast(&failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s p=%d: %d of %d strategies differ from one device\n", m.name, size, failures, nstrat);
    free(choice);
    free(best);
    free_outcome(&ref);
    sb_problem_free(&pb);
    sb_model_free(&m);
    MPI_Finalize();
    return failures ? 1 : 0;
}
