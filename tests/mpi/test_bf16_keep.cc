/* tests/mpi/test_bf16_keep.cc: the cuda backend's kept bf16 conversions of
 * GEMM operands (sbc_act_cache, sbc_act_operand in runtime/cuda/cuda_host.c)
 * and its wrapper of the table entries that may write device memory
 * (runtime/cuda/writes.hpp), checked on the CPU against the executor's
 * real sequence of backend calls.
 *
 * "cpu-bf16" is the cpu-devmem backend (backend.h: the CPU kernels behind a
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
 * First, eight writes through wrapped entries (zero, from_host, act_forward
 * in place, add_backward through float *const *, a GEMM's output,
 * sgd_update, allreduce; a write to another block as the control), each
 * followed by a GEMM that reads what it may have changed: the products
 * equal those with keeping off, and exactly the conversions that should
 * be read again are. Then, for each model (test sizes; two also with Adam
 * and ZeRO) and strategy (data parallel, the search's best, a random one)
 * on the ranks it is launched with: training with keeping on (no limit; a
 * 1 KiB limit that evicts all the time; the conversions' "pool" capped at
 * 2 KiB, so that it makes room from the unpinned ones, as pool_get does) and
 * off gives bit-identical losses and weights (a conversion read after its
 * source changed would differ), keeping reads some conversions again, and
 * all stay near fp32 (the cpu-devmem table). The double converts both
 * operands before widening either, so a pinned conversion freed to make
 * room for the other operand is a use after free under ASan. Prints the
 * conversions a step with and without keeping.
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
#include "shardbench/measure.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"
#include "writes.hpp"

enum { STEPS = 3 };

static struct {
    sbc_act_cache acts;
    sbc_shadow_map weights; /* spans from weight_set (no copies attached) */
    sbc_shadow_map blocks;  /* the allocations: what a written pointer's block is */
    int keep;
    size_t get_cap, got; /* get() fails past get_cap bytes outstanding (0: never) */
    long conversions, reuses, weight_conversions, drop_all, refused;
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

static void put(void *p);

/* the double's "pool": blocks with their size in front. Past get_cap bytes
 * outstanding it makes room from the unpinned kept conversions, as the
 * cuda backend's pool_get does when full (counted in `refused`); where the
 * backend would then end the job, the double goes on past the cap. */
static void *get(size_t bytes, const char *what)
{
    if (d.get_cap && d.got + bytes > d.get_cap) {
        d.refused++;
        if (d.acts.n)
            sbc_act_drop(&d.acts, 0, 0, 1, put);
    }
    size_t *h = (size_t *)malloc(sizeof(size_t) * 2 + (bytes ? bytes : 1));
    if (!h) {
        fprintf(stderr, "test_bf16_keep: out of memory for %s\n", what);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    h[0] = bytes;
    d.got += bytes;
    return h + 2;
}
static void put(void *p)
{
    if (!p)
        return;
    size_t *h = (size_t *)p - 2;
    d.got -= h[0];
    free(h);
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

/* The bf16 of a GEMM operand, n floats at p, as the cuda backend's
 * bf16_operand (a weight's converted per GEMM here: its copy holds the
 * same values); *tmp: to put after the GEMM. */
static const void *bf16_of(const float *p, size_t n, void **tmp)
{
    static const sbc_act_mem mem = {get, put, to_bf16};
    *tmp = NULL;
    int weight = sbc_shadow_find(&d.weights, (uintptr_t)p, n * sizeof(float)) != NULL;
    if (!weight && d.keep) {
        int reused = 0;
        const void *b16 = sbc_act_operand(&d.acts, &mem, p, n, tmp, &reused, "bf16 operand");
        (reused ? d.reuses : d.conversions)++;
        return b16;
    }
    (weight ? d.weight_conversions : d.conversions)++;
    *tmp = get(n * 2, "bf16 operand");
    to_bf16(*tmp, p, n);
    return *tmp;
}

/* n bf16 values widened to fp32 (to free) */
static float *widen(const void *b16, size_t n)
{
    float *f = (float *)malloc(n * sizeof(float));
    if (!f) {
        fprintf(stderr, "test_bf16_keep: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const uint16_t *h = (const uint16_t *)b16;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&f[i], &u, 4);
    }
    return f;
}

/* as the cuda backend's bf16 GEMM: both operands' bf16 (the first pinned
 * while the second is converted: ASan sees a pinned one freed), the
 * product from them, then the conversions of what C overlaps dropped */
static void gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                 ptrdiff_t sa, const float *B, int ldb, ptrdiff_t sb, float beta, float *C,
                 int ldc, ptrdiff_t sc, int batch)
{
    if (M <= 0 || N <= 0 || batch <= 0)
        return;
    size_t cbytes = sbc_span_floats(M, N, ldc, sc, batch) * sizeof(float);
    if (K <= 0) {
        sb_backend_cpu.gemm->gemm_batched(ta, tb, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C,
                                          ldc, sc, batch);
        if (d.acts.n)
            sbc_act_drop(&d.acts, (uintptr_t)C, cbytes, 0, put);
        return;
    }
    size_t na = sbc_span_floats(ta ? K : M, ta ? M : K, lda, sa, batch),
           nb = sbc_span_floats(tb ? N : K, tb ? K : N, ldb, sb, batch);
    void *ta16, *tb16;
    const void *a16 = bf16_of(A, na, &ta16), *b16 = bf16_of(B, nb, &tb16);
    float *fa = widen(a16, na), *fb = widen(b16, nb);
    sb_backend_cpu.gemm->gemm_batched(ta, tb, M, N, K, alpha, fa, lda, sa, fb, ldb, sb, beta, C,
                                      ldc, sc, batch);
    sbc_act_unpin(&d.acts);
    if (d.acts.n)
        sbc_act_drop(&d.acts, (uintptr_t)C, cbytes, 0, put);
    put(ta16);
    put(tb16);
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
    static const sb_gemm_kernels gemm16 = {gemm};
    raw.gemm = &gemm16;
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
    long refused; /* the double's "pool" refused a conversion (all steps) */
} outcome;

/* how a run keeps conversions, and its training options */
typedef struct {
    size_t keep;    /* 0 off, else the most bf16 bytes the kept conversions hold */
    size_t get_cap; /* the double's "pool" for conversions (0: no limit) */
    int adam, zero; /* Adam instead of SGD; the ZeRO stage */
} mode;

static void train(const sb_problem *pb, const int *choice, const sb_backend *be, const mode *md,
                  outcome *o)
{
    sb_error err = {};
    const sb_model *m = pb->m;
    sb_strategy st;
    if (sb_strategy_from_choice(&st, pb, choice, &err))
        die("strategy", &err);
    st.zero = md->zero;
    sb_exec_opts eo = {};
    eo.lr = md->adam ? 0.001f : 0.01f;
    eo.seed = 7;
    eo.update = md->adam ? SB_UPDATE_ADAM : SB_UPDATE_SGD;
    eo.eps = 1e-8f;
    d.keep = md->keep > 0;
    d.acts.max_bytes = md->keep;
    d.get_cap = md->get_cap;
    d.conversions = d.reuses = d.weight_conversions = d.drop_all = d.refused = 0;
    sb_executor *ex = NULL;
    if (sb_executor_create(MPI_COMM_WORLD, m, &st, be, &eo, &ex, &err))
        die("create", &err);
    sb_strategy_free(&st);
    for (int s = 0; s < STEPS; s++)
        if (sb_executor_step(ex, &o->loss[s], &err))
            die("step", &err);
    o->conversions = d.conversions / STEPS;
    o->reuses = d.reuses / STEPS;
    o->weight_conversions = d.weight_conversions / STEPS;
    o->drop_all = d.drop_all / STEPS;
    o->refused = d.refused;
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
    check(d.got == 0, "%g bytes of conversions not given back", m->name, "", (double)d.got);
}

static void outcome_free(outcome *o)
{
    for (int w = 0; w < o->nw; w++)
        free(o->w[w]);
    free(o->w);
    free(o->n);
}

static long refused_all; /* conversions the 2 KiB "pool" refused, in all runs */
static uint64_t rng = 7; /* the library's splitmix64: the same draws on every rank */

/* A model (test sizes) under data parallel, the search's best and a
 * random strategy, each trained with keeping on (no limit), in 1 KiB, with
 * the conversions' "pool" capped at 2 KiB, and off, in bf16, and in fp32:
 * SGD, or Adam with ZeRO stage `zero`. */
static void one(const char *name, const char *const *kv, int nkv, int adam, int zero)
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
    char label[64];
    snprintf(label, sizeof label, "%s%s", name, adam ? (zero ? "/adam+zero" : "/adam") : "");
    for (int k = 0; k < 3; k++) {
        const char *kind = k == 0 ? "dp" : k == 1 ? "best" : "rand";
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
        if (k == 2) /* any config of each op (the same on every rank: one seed) */
            for (int i = 0; i < m.nops; i++)
                choice[i] = sb_stat_randint(&rng, pb.cfg[i].n);
        int other = 0; /* ops not configured as data parallel's */
        for (int i = 0; i < m.nops; i++)
            other += choice[i] != dp[i];
        check(np == 1 || k != 2 || other > 0, "the random strategy is data parallel (%g)", label,
              kind, 0);
        mode on_m = {(size_t)1 << 40, 0, adam, zero}, tight_m = {(size_t)1 << 10, 0, adam, zero},
             cap_m = {(size_t)1 << 40, (size_t)2 << 10, adam, zero}, off_m = {0, 0, adam, zero};
        outcome on = {}, tight = {}, capped = {}, off = {}, f32 = {};
        train(&pb, choice, &cpu_bf16, &on_m, &on);
        train(&pb, choice, &cpu_bf16, &tight_m, &tight);
        train(&pb, choice, &cpu_bf16, &cap_m, &capped);
        train(&pb, choice, &cpu_bf16, &off_m, &off);
        train(&pb, choice, sb_backend_cpu_devmem(), &off_m, &f32);
        const outcome *kept[3] = {&on, &tight, &capped};
        static const char *const kept_name[3] = {"on", "in 1 KiB", "with a 2 KiB pool"};
        double worst_f32 = 0;
        for (int s = 0; s < STEPS; s++) {
            for (int q = 0; q < 3; q++)
                if (kept[q]->loss[s] != off.loss[s] && !rank) {
                    printf("FAIL %s %s: losses differ with keeping %s and off (step %d)\n",
                           label, kind, kept_name[q], s);
                    nfail++;
                }
            worst_f32 = fmax(worst_f32, fabs(off.loss[s] - f32.loss[s]) / fabs(f32.loss[s]));
        }
        check(worst_f32 < 2e-2, "bf16 losses are %.3g (relative) from fp32's", label, kind,
              worst_f32);
        long differ = 0;
        for (int w = 0; rank == 0 && w < on.nw; w++)
            for (int q = 0; q < 3; q++)
                differ += memcmp(kept[q]->w[w], off.w[w], (size_t)on.n[w] * sizeof(float)) != 0;
        check(differ == 0, "%g weights differ with keeping and without", label, kind,
              (double)differ);
        long sums[7] = {on.conversions, on.reuses,       off.conversions, on.weight_conversions,
                        tight.conversions, on.drop_all, capped.refused},
             tot[7];
        MPI_Reduce(sums, tot, 7, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        check(tot[1] > 0, "no conversion was read again (%g)", label, kind, 0);
        check(tot[0] + tot[1] == tot[2], "conversions kept + read again != without keeping (%g)",
              label, kind, (double)(tot[0] + tot[1] - tot[2]));
        refused_all += tot[6];
        if (rank == 0)
            printf("%-24s %-4s p=%d (%2d/%2d ops unlike dp)  activation conversions a step: %4ld "
                   "without keeping, %4ld with (%4.1f%% fewer), %4ld in 1 KiB; weight operands "
                   "%ld; drops of all %ld; 2 KiB pool refused %ld; losses %.6f %.6f %.6f (fp32 "
                   "%.6f, rel. %.2g)\n",
                   label, kind, np, other, m.nops, tot[2], tot[0],
                   100.0 * (double)tot[1] / (double)tot[2], tot[4], tot[3], tot[5], tot[6],
                   on.loss[0], on.loss[1], on.loss[2], f32.loss[2], worst_f32);
        outcome_free(&on);
        outcome_free(&tight);
        outcome_free(&capped);
        outcome_free(&off);
        outcome_free(&f32);
    }
    free(choice);
    free(dp);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

/* ---- one entry's write, then a GEMM reading what it may have changed ---- */

static float *dev(const float *host, size_t n)
{
    float *p = (float *)cpu_bf16.alloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "test_bf16_keep: no memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    cpu_bf16.from_host(p, host, n);
    return p;
}

/* X (64 floats) holds A = X[16, 48) (4 x 8), Y (8 x 4) is B, Z another
 * block. C = A B, then write(X, Y, Z), then C = A B again: the second
 * product with keeping on must equal it with keeping off (bit for bit).
 * `want`: the kept conversions the second product reads: 1 (B's: Y is
 * never written) after a write to A's block, 0 after an entry that may
 * write anything, 2 after a write elsewhere (the control that keeping
 * works at all). */
static void direct(const char *what, void (*write)(float *X, float *Z), int want)
{
    float h[2][16];
    long reused[2] = {0, 0};
    for (int keep = 1; keep >= 0; keep--) {
        float hx[64], hy[32], hz[64];
        for (int i = 0; i < 64; i++)
            hx[i] = 0.37f * (float)((i * 7) % 23) - 3.1f + 0.001f * (float)i;
        for (int i = 0; i < 32; i++)
            hy[i] = 0.21f * (float)((i * 5) % 17) - 1.7f;
        for (int i = 0; i < 64; i++)
            hz[i] = 0.5f + 0.01f * (float)i;
        d.keep = keep;
        d.acts.max_bytes = keep ? (size_t)1 << 20 : 0;
        d.get_cap = 0;
        float *X = dev(hx, 64), *Y = dev(hy, 32), *Z = dev(hz, 64), *C = dev(hz, 16);
        cpu_bf16.gemm->gemm_batched(0, 0, 4, 4, 8, 1.0f, X + 16, 8, 0, Y, 4, 0, 0.0f, C, 4, 0, 1);
        write(X, Z);
        long r0 = d.reuses;
        cpu_bf16.gemm->gemm_batched(0, 0, 4, 4, 8, 1.0f, X + 16, 8, 0, Y, 4, 0, 0.0f, C, 4, 0, 1);
        reused[keep] = d.reuses - r0;
        cpu_bf16.to_host(h[keep], C, 16);
        cpu_bf16.release(X);
        cpu_bf16.release(Y);
        cpu_bf16.release(Z);
        cpu_bf16.release(C);
        forget();
    }
    check(!memcmp(h[0], h[1], sizeof h[0]), "the GEMM after it read a stale conversion (%g)",
          "direct", what, 0);
    check(reused[1] == want, "the GEMM after it read %g kept conversions", "direct",
          what, (double)reused[1]);
    check(reused[0] == 0, "%g conversions read again with keeping off", "direct", what,
          (double)reused[0]);
}

static void w_zero(float *X, float *Z) { (void)Z, cpu_bf16.zero(X + 8, 16); } /* [8, 24) */
static void w_from_host(float *X, float *Z)
{
    float v[4] = {9, -8, 7, -6};
    (void)Z;
    cpu_bf16.from_host(X + 44, v, 4);
}
static void w_act(float *X, float *Z)
{
    (void)Z, cpu_bf16.pointwise->act_forward(X + 20, X + 20, 8, SB_ACT_SIGMOID);
}
static void w_add_backward(float *X, float *Z) /* through an array of pointers */
{
    float *const dst[1] = {X + 30};
    cpu_bf16.sum->add_backward(dst, Z, Z, 1, 4);
}
static void w_gemm(float *X, float *Z) /* a GEMM's output over [0, 20) */
{
    cpu_bf16.gemm->gemm_batched(0, 0, 5, 4, 4, 1.0f, Z, 4, 0, Z + 32, 4, 0, 0.0f, X, 4, 0, 1);
}
static void w_sgd(float *X, float *Z) { cpu_bf16.optim->sgd_update(X + 24, Z, 8, 0.5f); }
static void w_allreduce(float *X, float *Z)
{
    (void)Z;
    cpu_bf16.allreduce(X + 32, 8, MPI_SUM, MPI_COMM_WORLD);
}
static void w_other_block(float *X, float *Z) { (void)X, cpu_bf16.zero(Z, 64); }

static void direct_cases(void)
{
    direct("zero over the span's start", w_zero, 1);
    direct("from_host inside the span", w_from_host, 1);
    direct("act_forward in place", w_act, 1);
    direct("add_backward through float *const *", w_add_backward, 0);
    direct("a GEMM writing over the span", w_gemm, 1);
    direct("sgd_update of the span", w_sgd, 1);
    direct("allreduce of the span", w_allreduce, 1);
    direct("zero of another block", w_other_block, 2);
    if (rank == 0)
        printf("direct: 8 writes then a GEMM, keeping on and off: %s\n",
               nfail ? "see the failures above" : "the same products");
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
    direct_cases();
    one("alexnet", alexnet, 4, 0, 0);
    one("rnnlm", rnnlm, 5, 0, 0);
    one("transformer", transformer, 8, 0, 0);
    one("transformer", transformer, 8, 1, 2);
    one("llama3-8b", llama, 8, 0, 0);
    one("llama3-8b", llama, 8, 1, 1);
    one("mixtral-8x7b", mixtral, 9, 0, 0);
    check(refused_all > 0, "the 2 KiB pool never refused a conversion (%g)", "all", "models", 0);
    sbc_act_free(&d.acts, put);
    sbc_shadow_map_free(&d.weights);
    sbc_shadow_map_free(&d.blocks);
    if (rank == 0)
        printf("%s: %d failure(s)\n", nfail ? "FAIL" : "PASS", nfail);
    MPI_Bcast(&nfail, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return nfail ? 1 : 0;
}
