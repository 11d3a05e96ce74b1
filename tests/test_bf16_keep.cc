/* tests/test_bf16_keep.cc: the cuda backend's kept bf16 conversions of
 * GEMM operands (sbc_act_cache, sbc_act_operand in runtime/cuda/cuda_host.c)
 * and its wrapper of the table entries that may write device memory
 * (runtime/cuda/writes.hpp), checked on the CPU against the executor's
 * real sequence of backend calls.
 *
 * "cpu-bf16" is the cpu-devmem table (runtime.h: the CPU kernels behind a
 * device-memory interface, staging and relayouts as on the cuda backend)
 * with the cuda backend's bf16 GEMM policy: a weight operand (spans
 * entered by weight_set) is converted at every GEMM (the cuda backend
 * reads the same bf16 values from its copies); any other operand goes
 * through sbc_act_operand (kept, read again until its source's allocation
 * is written or freed) or, with keeping off, is converted at every GEMM.
 * Conversions round to nearest even, as the GPU's; the GEMM then runs the
 * CPU kernel on the bf16 values widened back to fp32. The table's writing
 * entries are wrapped by writes.hpp, whose hook drops the kept conversions
 * in the allocations an entry may write (recorded at alloc, as the cuda
 * backend's pool blocks), as in the cuda backend.
 *
 * For each model (test sizes) and strategy (data parallel; the search's
 * best, which must split some op) on the ranks it is launched with:
 * training with keeping on (no limit, and a 1 KiB limit that evicts all
 * the time) and off gives bit-identical losses and weights (a conversion
 * read after its source changed would differ), keeping reads some
 * conversions again, and all stay near fp32 (the cpu-devmem table).
 * Prints the conversions a step with and without keeping.
 *
 *   mpirun -np 2 test_bf16_keep */
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_host.h"
#include "shardbench/model.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"
#include "writes.hpp"

enum { STEPS = 3 };

static struct {
    sbc_act_cache acts;
    sbc_shadow_map weights; /* spans from weight_set (no copies attached) */
    sbc_shadow_map blocks;  /* the allocations: what a written pointer's block is */
    int keep;
    long conversions, reuses, weight_conversions, drop_all;
} d;

/* ---- the double ---- */

static uint16_t to_bf16_one(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) /* NaN: stays one */
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static void to_bf16(void *dst, const float *src, size_t n)
{
    uint16_t *o = (uint16_t *)dst;
    for (size_t i = 0; i < n; i++)
        o[i] = to_bf16_one(src[i]);
}

static void *get(size_t bytes) { return malloc(bytes ? bytes : 1); }
static void put(void *p) { free(p); }
static void *get_or_die(size_t bytes, const char *what)
{
    void *p = get(bytes);
    if (!p) {
        fprintf(stderr, "test_bf16_keep: out of memory for %s\n", what);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void forget(void)
{
    if (d.acts.n)
        sbc_act_drop(&d.acts, 0, 0, 0, put);
}

/* as the cuda backend's acts_block_written: the allocation holding p */
static void block_written(const void *p)
{
    if (!d.acts.n || !p)
        return;
    sbc_shadow *b = sbc_shadow_find(&d.blocks, (uintptr_t)p, 0);
    if (!b) {
        d.drop_all++;
        forget();
        return;
    }
    sbc_act_drop(&d.acts, b->base, b->bytes, 0, put);
}

/* writes.hpp's hook */
static void written(void *const *outs, int n, int all)
{
    if (!d.acts.n)
        return;
    if (all) {
        d.drop_all++;
        forget();
        return;
    }
    for (int i = 0; i < n; i++)
        block_written(outs[i]);
}

static void *(*inner_alloc)(size_t);
static void (*inner_release)(void *);

static void *dbl_alloc(size_t bytes)
{
    void *p = inner_alloc(bytes);
    if (p && sbc_shadow_add(&d.blocks, (uintptr_t)p, bytes ? bytes : 1, NULL)) {
        fprintf(stderr, "test_bf16_keep: allocation %p (%zu bytes) overlaps another\n", p, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void dbl_release(void *p)
{
    block_written(p);
    if (p)
        sbc_shadow_remove(&d.blocks, (uintptr_t)p);
    inner_release(p);
}

static void weight_set(const float *w, size_t n)
{
    sbc_shadow *e = sbc_shadow_at(&d.weights, (uintptr_t)w);
    if (e && (n == 0 || e->bytes != n * sizeof(float))) {
        sbc_shadow_remove(&d.weights, (uintptr_t)w);
        e = NULL;
    }
    if (n && !e)
        sbc_shadow_add(&d.weights, (uintptr_t)w, n * sizeof(float), NULL);
}

/* the operand's n floats at p as fp32 holding its bf16 values (to free) */
static float *operand(const float *p, size_t n)
{
    static const sbc_act_mem mem = {get, put, get_or_die, to_bf16};
    void *tmp = NULL;
    const void *b16;
    if (!sbc_shadow_find(&d.weights, (uintptr_t)p, n * sizeof(float)) && d.keep) {
        int reused = 0;
        b16 = sbc_act_operand(&d.acts, &mem, p, n, &tmp, &reused, "bf16 operand");
        (reused ? d.reuses : d.conversions)++;
    } else {
        if (sbc_shadow_find(&d.weights, (uintptr_t)p, n * sizeof(float)))
            d.weight_conversions++;
        else
            d.conversions++;
        b16 = tmp = get_or_die(n * 2, "bf16 operand");
        to_bf16(tmp, p, n);
    }
    float *f = (float *)get_or_die(n * sizeof(float), "widened operand");
    const uint16_t *h = (const uint16_t *)b16;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&f[i], &u, 4);
    }
    free(tmp);
    return f;
}

static void gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                 ptrdiff_t sa, const float *B, int ldb, ptrdiff_t sb, float beta, float *C,
                 int ldc, ptrdiff_t sc, int batch)
{
    if (M <= 0 || N <= 0 || batch <= 0)
        return;
    if (d.acts.n) /* as the cuda backend: C is written */
        sbc_act_drop(&d.acts, (uintptr_t)C, sbc_span_floats(M, N, ldc, sc, batch) * sizeof(float),
                     0, put);
    if (K <= 0) {
        sb_backend_cpu.gemm_batched(ta, tb, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc,
                                    sc, batch);
        return;
    }
    size_t na = sbc_span_floats(ta ? K : M, ta ? M : K, lda, sa, batch),
           nb = sbc_span_floats(tb ? N : K, tb ? K : N, ldb, sb, batch);
    float *fa = operand(A, na), *fb = operand(B, nb);
    sbc_act_unpin(&d.acts);
    sb_backend_cpu.gemm_batched(ta, tb, M, N, K, alpha, fa, lda, sa, fb, ldb, sb, beta, C, ldc,
                                sc, batch);
    free(fa);
    free(fb);
}

struct bf16_tag;
static sb_backend cpu_bf16;

static void make_table(void)
{
    sb_backend raw = *sb_backend_cpu_devmem();
    raw.name = "cpu-bf16";
    inner_alloc = raw.alloc;
    inner_release = raw.release;
    raw.alloc = dbl_alloc;
    raw.release = dbl_release;
    raw.weight_set = weight_set;
    raw.gemm_batched = gemm;
    sbc_writes<bf16_tag>::table(&raw, &cpu_bf16, written);
}

/* ---- training ---- */

static int rank, nfail;

static void die(const char *what, const sb_error *err)
{
    fprintf(stderr, "test_bf16_keep: %s: %s\n", what, err->msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void check(int ok, const char *fmt, const char *model, const char *kind, double x)
{
    if (ok || rank)
        return;
    printf("FAIL %s %s: ", model, kind);
    printf(fmt, x);
    printf("\n");
    nfail++;
}

typedef struct {
    double loss[STEPS];
    int nw;
    float **w; /* gathered on rank 0 */
    int64_t *n;
    long conversions, reuses, weight_conversions, drop_all; /* this rank's, a step */
} outcome;

/* keep: 0 off, else the most bf16 bytes the kept conversions hold */
static void train(const sb_problem *pb, const int *choice, const sb_backend *be, size_t keep,
                  outcome *o)
{
    sb_error err = {};
    const sb_model *m = pb->m;
    const int **cfg = (const int **)calloc((size_t)m->nops, sizeof *cfg);
    for (int i = 0; i < m->nops; i++)
        cfg[i] = pb->cfg[i].c + (size_t)choice[i] * (size_t)m->ops[i].ndims;
    sb_plan_strategy st = {};
    st.m = m;
    st.configs = cfg;
    sb_exec_opts eo = {};
    eo.lr = 0.01f;
    eo.seed = 7;
    d.keep = keep > 0;
    d.acts.max_bytes = keep;
    d.conversions = d.reuses = d.weight_conversions = d.drop_all = 0;
    sb_executor *ex = NULL;
    if (sb_executor_create(MPI_COMM_WORLD, &st, be, &eo, &ex, &err))
        die("create", &err);
    for (int s = 0; s < STEPS; s++)
        if (sb_executor_step(ex, &o->loss[s], &err))
            die("step", &err);
    o->conversions = d.conversions / STEPS;
    o->reuses = d.reuses / STEPS;
    o->weight_conversions = d.weight_conversions / STEPS;
    o->drop_all = d.drop_all / STEPS;
    o->nw = sb_executor_nweights(ex);
    o->w = (float **)calloc((size_t)o->nw, sizeof *o->w);
    o->n = (int64_t *)calloc((size_t)o->nw, sizeof *o->n);
    for (int w = 0; w < o->nw; w++) {
        sb_executor_weight_name(ex, w, &o->n[w]);
        if (rank == 0)
            o->w[w] = (float *)malloc((size_t)o->n[w] * sizeof(float));
        if (sb_executor_gather_weight(ex, w, 0, o->w[w], &err))
            die("gather", &err);
    }
    sb_executor_free(ex);
    forget();
    check(d.blocks.n == 0, "%g allocations left after the executor", m->name, "", d.blocks.n);
    free(cfg);
}

static void outcome_free(outcome *o)
{
    for (int w = 0; w < o->nw; w++)
        free(o->w[w]);
    free(o->w);
    free(o->n);
}

static void one(const char *name, const char *const *kv, int nkv)
{
    sb_error err = {};
    sb_setting set[16];
    for (int i = 0; i < nkv; i++)
        if (sb_setting_parse(kv[i], &set[i], &err))
            die(kv[i], &err);
    sb_model m;
    if (sb_model_load(name, set, nkv, &m, &err))
        die(name, &err);
    int np;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.cutoff = 1;
    cp.tflops = 0.01; /* as test_equiv in ctest: the best splits ops, not only the batch */
    sb_problem pb;
    if (sb_problem_build(&m, np, &cp, &pb, &err))
        die("problem", &err);
    int *choice = (int *)calloc((size_t)m.nops, sizeof *choice);
    int *dp = (int *)calloc((size_t)m.nops, sizeof *dp);
    for (int k = 0; k < 2; k++) {
        const char *kind = k ? "best" : "dp";
        if (k == 0 && sb_strategy_data_parallel(&pb, choice, &err))
            die("dp", &err);
        if (k == 0)
            memcpy(dp, choice, (size_t)m.nops * sizeof *dp);
        if (k == 1) {
            sb_search_opts so = {};
            so.algo = SB_ALGO_PASE;
            so.max_table_mb = 1024;
            sb_result r = {};
            if (sb_search(&pb, &so, &r, &err))
                die("search", &err);
            memcpy(choice, r.choice, (size_t)m.nops * sizeof *choice);
            sb_result_free(&r);
        }
        int split = 0, other = 0; /* ops split by this strategy; ops not as data parallel's */
        for (int i = 0; i < m.nops; i++) {
            const int *c = pb.cfg[i].c + (size_t)choice[i] * (size_t)m.ops[i].ndims;
            int any = 0;
            for (int a = 0; a < m.ops[i].ndims; a++)
                any |= c[a] > 1;
            split += any;
            other += choice[i] != dp[i];
        }
        check(np == 1 || split > 0, "the strategy splits no op (%g)", name, kind, 0);
        /* kept without limit, kept in 1 KiB (evicting all the time), not kept */
        outcome on = {}, tight = {}, off = {}, f32 = {};
        train(&pb, choice, &cpu_bf16, (size_t)1 << 40, &on);
        train(&pb, choice, &cpu_bf16, (size_t)1 << 10, &tight);
        train(&pb, choice, &cpu_bf16, 0, &off);
        train(&pb, choice, sb_backend_cpu_devmem(), 0, &f32);
        double worst_f32 = 0;
        for (int s = 0; s < STEPS; s++) {
            check(on.loss[s] == off.loss[s], "losses differ with keeping on and off (step %g)",
                  name, kind, s);
            check(tight.loss[s] == off.loss[s],
                  "losses differ with keeping in 1 KiB and off (step %g)", name, kind, s);
            worst_f32 = fmax(worst_f32, fabs(off.loss[s] - f32.loss[s]) / fabs(f32.loss[s]));
        }
        check(worst_f32 < 2e-2, "bf16 losses are %.3g (relative) from fp32's", name, kind,
              worst_f32);
        long differ = 0;
        for (int w = 0; rank == 0 && w < on.nw; w++)
            differ += memcmp(on.w[w], off.w[w], (size_t)on.n[w] * sizeof(float)) != 0
                      || memcmp(tight.w[w], off.w[w], (size_t)on.n[w] * sizeof(float)) != 0;
        check(differ == 0, "%g weights differ with keeping on and off", name, kind, (double)differ);
        long sums[6] = {on.conversions,        on.reuses,       off.conversions,
                        on.weight_conversions, tight.conversions, on.drop_all},
             tot[6];
        MPI_Reduce(sums, tot, 6, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        check(tot[1] > 0, "no conversion was read again (%g)", name, kind, 0);
        check(tot[0] + tot[1] == tot[2], "conversions kept + read again != without keeping (%g)",
              name, kind, (double)(tot[0] + tot[1] - tot[2]));
        if (rank == 0)
            printf("%-12s %-4s p=%d (%d/%d ops split, %d unlike dp)  activation conversions a "
                   "step: %4ld without keeping, %4ld with (%4.1f%% fewer), %4ld in 1 KiB; weight "
                   "operands %ld; drops of all %ld; losses %.6f %.6f %.6f (fp32 %.6f, rel. %.2g)\n",
                   name, kind, np, split, m.nops, other, tot[2], tot[0],
                   100.0 * (double)tot[1] / (double)tot[2], tot[4], tot[3], tot[5], on.loss[0],
                   on.loss[1], on.loss[2], f32.loss[2], worst_f32);
        outcome_free(&on);
        outcome_free(&tight);
        outcome_free(&off);
        outcome_free(&f32);
    }
    free(choice);
    free(dp);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    make_table();
    static const char *const alexnet[] = {"batch=4", "image=67", "classes=16", "width_div=16"};
    static const char *const rnnlm[] = {"batch=4", "vocab=24", "units=8", "seq=4", "layers=2"};
    static const char *const transformer[] = {"batch=2", "vocab=16", "seq=4", "embed=8",
                                              "heads=2", "dk=4", "ff=16", "layers=1"};
    static const char *const llama[] = {"layers=2", "embed=16", "heads=4", "kv_heads=2",
                                        "ff=24", "vocab=32", "seq=8", "batch=2"};
    static const char *const mixtral[] = {"layers=2", "embed=16", "heads=4", "kv_heads=2",
                                          "ff=24", "vocab=32", "seq=8", "batch=2", "experts=4"};
    one("alexnet", alexnet, 4);
    one("rnnlm", rnnlm, 5);
    one("transformer", transformer, 8);
    one("llama3-8b", llama, 8);
    one("mixtral-8x7b", mixtral, 9);
    sbc_act_free(&d.acts, put);
    sbc_shadow_map_free(&d.weights);
    sbc_shadow_map_free(&d.blocks);
    if (rank == 0)
        printf("%s: %d failure(s)\n", nfail ? "FAIL" : "PASS", nfail);
    MPI_Bcast(&nfail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return nfail ? 1 : 0;
}
