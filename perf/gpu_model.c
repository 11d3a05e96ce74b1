/* perf/gpu_model.c: the GPU op model (cost/gpu_op.c) held to this GPU.
 *
 *   perf/gpu_model [--machine NAME|FILE] [--seconds S (1)] [--soak S (20)]
 *                  [--plan] [--fragment FILE] [--db FILE|none]
 *
 * The GEMMs `validate` prices for the published H100 runs' layers and
 * heads (sb_mt_layer_gemms: QKV, projection, MLP up and down;
 * sb_mt_head_gemms: the logits; forward, dgrad and wgrad of each, at the
 * runs' TP, CP and micro-batch), each predicted by sb_gpu_gemm_s under the
 * machine file and measured with cuBLAS (bf16 operands of random values,
 * fp32 accumulation, bf16 output; the forward's weight operand transposed
 * and the wgrad's activation, as a framework stores W as [out, in]): the
 * median of timed batches over S seconds a shape. First one large GEMM is
 * kept busy for --soak seconds (TFLOP/s each second: a power-capped GPU's
 * clock settles below its boost), so that every shape is then measured at
 * the settled clock a training sees; last the HBM copy bandwidth
 * (cudaMemcpy device to device, bytes read + written) and the time a
 * kernel of back-to-back tiny GEMMs. Where the machine file has an fp8
 * peak, the linear layers' GEMMs again as the fp8 recipe runs them (e4m3
 * operands through cuBLASLt, whose one fp8 layout is TN; bf16 output),
 * priced with tflops_fp8 and gemm_eff_large_fp8. The attention core
 * (cuDNN's fused attention) is perf/gpu_attention's.
 *
 * What it prints answers the open question of docs/validation.md: whether
 * the machine file's gemm_eff_large (a single-GPU microbenchmark's best
 * shape) prices the runs' own shapes as this GPU runs them. The last lines
 * are a machine-file fragment with the measured figures and where they
 * came from: each large-GEMM fraction the file's times the model's summed
 * time over the measured sum, over the runs' GEMMs of that precision (each
 * shape once, less each side's per-call overhead), so that the model prices them
 * as measured; a fraction over 1 is refused (no fragment, exit 1). --fragment
 * FILE writes it, through a temporary file and a rename; nothing is
 * written into machines/.
 *
 * --plan: the shapes and the model's predictions only, no GPU needed (a
 * build without CUDA does only this; otherwise exit 77, "no GPU").
 * Results database: one run (backend "cuda"), a measurement per shape of
 * kind "gemm-bf16" or "gemm-fp8" (predicted_cost its FLOP, predicted_s the model's
 * seconds, step_median_s the measured median, min and max the batches';
 * configs_json the shape and layout), "gemm-soak" (the last second),
 * "hbm-copy" (predicted_cost: bytes moved) and "kernel-overhead". A figure
 * that fails to be measured, or a GEMM measured above 1.05 x its peak (one
 * that did no work), fails the run (exit 1, no fragment). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardbench/common.h"
#include "shardbench/machine.h"
#include "shardbench/measure.h"
#include "shardbench/megatron.h"
#include "shardbench/precision.h"
#include "shardbench/results.h"

/* The published runs' layers (tests/data/published-runs-h100-dgxc.tsv:
 * NVIDIA's DGX Cloud Benchmarking recipes), as validate prices them. */
typedef struct {
    const char *name;
    sb_mt_model mm;
    int tp, cp, mbs;
} run_layer;

static const run_layer layers[] = {
#define MT(l, h, a, kv, f, V, s, glu, B, un)                                                     \
    {.layers = l, .hidden = h, .heads = a, .kv_heads = kv, .ffn = f, .vocab = V, .seq = s,         \
     .swiglu = glu, .global_batch = B, .untie = un}
    {"llama3.1-8b tp1 cp2", MT(32, 4096, 32, 8, 14336, 128256, 8192, 1, 128, 1), 1, 2, 1},
    {"llama3.1-70b tp4 cp2", MT(80, 8192, 64, 8, 28672, 128256, 8192, 1, 128, 1), 4, 2, 1},
    {"llama3.1-405b tp8 cp2", MT(126, 16384, 128, 8, 53248, 128256, 8192, 1, 64, 1), 8, 2, 1},
    {"gpt3-175b tp4", MT(96, 12288, 96, 96, 49152, 51200, 2048, 0, 256, 0), 4, 1, 1},
#undef MT
};
#define NLAYERS ((int)(sizeof layers / sizeof *layers))
#define MAX_SHAPES (NLAYERS * (2 * SB_MT_LAYER_GEMMS + SB_MT_HEAD_GEMMS))

typedef struct {
    char what[96];  /* the run layer and the GEMM */
    double M, N, K; /* row-major (M x K)(K x N) */
    int ta, tb;     /* A stored K x M (wgrad), B stored N x K (fprop) */
    int fp8;        /* 1: e4m3 operands through cuBLASLt (its one layout, TN), bf16 out */
    int fast;       /* fp8 fprop: fast accumulation, as Transformer Engine runs it */
    double model_s; /* sb_gpu_gemm_s, kernel overhead included */
    double meas_s;  /* measured median seconds a call; NAN until measured */
    double min_s, max_s;
} shape;

typedef struct {
    const char *machine, *fragment, *db;
    double seconds, soak;
    int plan;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: perf/gpu_model [--machine NAME|FILE (by the device's name)] [--seconds S (1)]\n"
               "                      [--soak S (20)] [--plan] [--fragment FILE] [--db FILE|none]\n");
}

static int seconds_arg(const char *opt, const char *v, double lo, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (*end || !(x >= lo) || x > 3600) {
        fprintf(stderr, "perf/gpu_model: %s: '%s' is not a number of seconds in [%g, 3600]\n", opt, v, lo);
        return 2;
    }
    *out = x;
    return 0;
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.seconds = 1.0, .soak = 20.0, .db = SB_DB_DEFAULT_PATH};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--plan")) {
            o->plan = 1;
        } else if (v && !strcmp(a, "--machine")) {
            o->machine = v, i++;
        } else if (v && !strcmp(a, "--fragment")) {
            o->fragment = v, i++;
        } else if (v && !strcmp(a, "--db")) {
            o->db = v, i++;
        } else if (v && !strcmp(a, "--seconds")) {
            if (seconds_arg(a, v, 0.05, &o->seconds))
                return 2;
            i++;
        } else if (v && !strcmp(a, "--soak")) {
            if (seconds_arg(a, v, 0.0, &o->soak))
                return 2;
            i++;
        } else {
            fprintf(stderr, "perf/gpu_model: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

/* The runs' GEMMs, each shape once (the first run layer that has it names it);
 * with g8 (the machine's fp8 figures) the linear layers' again in fp8, as the
 * fp8 recipe runs them (the head stays bf16). */
static int build_shapes(const sb_gpu *g, const sb_gpu *g8, shape *out)
{
    int n = 0;
    for (int fp8 = 0; fp8 <= (g8 != NULL); fp8++)
    for (int r = 0; r < NLAYERS; r++) {
        const run_layer *L = &layers[r];
        sb_mt_config c = {.tp = L->tp, .pp = 1, .dp = 1, .cp = L->cp, .ep = 1, .vpp = 1,
                          .mbs = L->mbs, .fused_attention = 1, .precision = SB_PREC_BF16};
        sb_mt_gemm gm[SB_MT_LAYER_GEMMS + SB_MT_HEAD_GEMMS];
        sb_mt_layer_gemms(&L->mm, &c, gm);
        sb_mt_head_gemms(&L->mm, &c, gm + SB_MT_LAYER_GEMMS);
        for (int i = 0; i < (fp8 ? SB_MT_LAYER_GEMMS : SB_MT_LAYER_GEMMS + SB_MT_HEAD_GEMMS); i++) {
            int ta = !fp8 && !strcmp(gm[i].pass, "wgrad"), tb = !fp8 && !strcmp(gm[i].pass, "fprop");
            int fast = fp8 && !strcmp(gm[i].pass, "fprop"), dup = 0;
            for (int j = 0; j < n && !dup; j++)
                dup = out[j].M == gm[i].M && out[j].N == gm[i].N && out[j].K == gm[i].K &&
                      out[j].ta == ta && out[j].tb == tb && out[j].fp8 == fp8 && out[j].fast == fast;
            if (dup)
                continue;
            shape *s = &out[n++];
            snprintf(s->what, sizeof s->what, "%s %s %s", L->name, gm[i].linear, gm[i].pass);
            s->M = gm[i].M, s->N = gm[i].N, s->K = gm[i].K, s->ta = ta, s->tb = tb, s->fp8 = fp8;
            s->fast = fast;
            /* in words of sb_mt_layer's (the recipe's activation bytes) */
            s->model_s = sb_gpu_gemm_s(fp8 ? g8 : g, 1, s->M, s->N, s->K,
                                       sb_precision_bytes(fp8 ? SB_PREC_FP8 : SB_PREC_BF16).act);
            s->meas_s = s->min_s = s->max_s = NAN;
        }
    }
    return n;
}

static double tflops(const shape *s, double sec) { return 2.0 * s->M * s->N * s->K / sec / 1e12; }

static void print_plan(const shape *s, int n, const sb_gpu *g, const sb_gpu *g8, const char *machine)
{
    printf("# perf/gpu_model: the op model of %s (bf16 peak %.1f TFLOP/s, gemm_eff_large %.3f, "
           "%g SMs, kernel %g us",
           machine, g->peak_tflops, g->gemm_eff, g->sms, g->kernel_us);
    if (g8)
        printf("; fp8 peak %.1f, gemm_eff_large_fp8 %.3f", g8->peak_tflops, g8->gemm_eff);
    printf(")\n");
    printf("%-44s %4s %7s %7s %7s %10s %9s %10s %9s %7s\n", "gemm (run layer, linear, pass)", "prec",
           "M", "N", "K", "model_ms", "model_TF", "meas_ms", "meas_TF", "mod/meas");
    for (int i = 0; i < n; i++) {
        printf("%-44s %4s %7.0f %7.0f %7.0f %10.4f %9.1f", s[i].what, s[i].fp8 ? "fp8" : "bf16", s[i].M,
               s[i].N, s[i].K, s[i].model_s * 1e3, tflops(&s[i], s[i].model_s));
        if (isfinite(s[i].meas_s))
            printf(" %10.4f %9.1f %7.3f\n", s[i].meas_s * 1e3, tflops(&s[i], s[i].meas_s),
                   s[i].model_s / s[i].meas_s);
        else
            printf(" %10s %9s %7s\n", "-", "-", "-");
    }
}

#ifdef SB_HAVE_CUDA
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

static int cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 1;
    fprintf(stderr, "perf/gpu_model: %s: %s\n", what, cudaGetErrorString(e));
    return 0;
}

static int blas_ok(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 1;
    fprintf(stderr, "perf/gpu_model: %s: cuBLAS status %d\n", what, (int)s);
    return 0;
}

typedef struct {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cudaStream_t stream;
    cudaEvent_t e0, e1;
    void *a, *b, *c; /* bf16 buffers of `cap` elements each */
    void *a8, *b8;   /* e4m3 operands, `cap` bytes each (with an fp8 machine) */
    void *ws;        /* cuBLASLt's workspace */
    float *one;      /* 1.0f on the device: the fp8 operands' scales */
    /* the fp8 plan of the shape being measured (lt_plan) */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    size_t cap;
} gpu_ctx;

#define LT_WORKSPACE (32u << 20)

/* Fills n bf16 elements with values in [-1, 1) (random bits: zeros would
 * draw less power than a training's operands), or n e4m3 codes (any but
 * the two NaNs). */
static int fill_random(void *dev, size_t n, uint64_t seed, int fp8)
{
    enum { CHUNK = 1 << 24 };
    uint16_t *h = malloc(CHUNK * sizeof *h);
    if (!h)
        return 0;
    uint8_t *h8 = (uint8_t *)h;
    for (size_t i = 0; !fp8 && i < CHUNK; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        float f = (float)((seed >> 40) & 0xffff) / 32768.0f - 1.0f;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        h[i] = (uint16_t)(u >> 16);
    }
    for (size_t i = 0; fp8 && i < 2 * (size_t)CHUNK; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        h8[i] = (uint8_t)(seed >> 56);
        if ((h8[i] & 0x7f) == 0x7f) /* e4m3's NaN: S.1111.111 */
            h8[i] ^= 1;
    }
    size_t elem = fp8 ? 1 : 2, per = fp8 ? 2 * (size_t)CHUNK : CHUNK;
    int ok = 1;
    for (size_t at = 0; at < n && ok; at += per) {
        size_t k = n - at < per ? n - at : per;
        ok = cuda_ok(cudaMemcpy((uint8_t *)dev + at * elem, h, k * elem, cudaMemcpyHostToDevice),
                     "cudaMemcpy (operands)");
    }
    free(h);
    return ok;
}

static void lt_drop(gpu_ctx *x)
{
    if (x->op)
        cublasLtMatmulDescDestroy(x->op);
    if (x->la)
        cublasLtMatrixLayoutDestroy(x->la);
    if (x->lb)
        cublasLtMatrixLayoutDestroy(x->lb);
    if (x->lc)
        cublasLtMatrixLayoutDestroy(x->lc);
    x->op = NULL, x->la = x->lb = x->lc = NULL;
}

/* The fp8 GEMM's plan: cuBLASLt's only fp8 layout, "TN", the way round the
 * bf16 path and Transformer Engine run it: column-major D (N x M) = A^T B
 * with A the K x N operand (the weight) and B the K x M one, K contiguous
 * (row-major C (M x N)); e4m3 operands of scale 1 (the recipe's backward
 * takes e5m2 gradients: the same speed), fp32 accumulation, bf16 output;
 * fast accumulation for a forward, as TE sets it; the heuristic's first
 * algorithm. */
static int lt_plan(gpu_ctx *x, const shape *s)
{
    lt_drop(x);
    uint64_t M = (uint64_t)s->M, N = (uint64_t)s->N, K = (uint64_t)s->K;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    int8_t fast = (int8_t)s->fast;
    cublasLtMatmulPreference_t pref = NULL;
    size_t wsb = LT_WORKSPACE;
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    int ok = blas_ok(cublasLtMatmulDescCreate(&x->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate") &&
             blas_ok(cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA") &&
             blas_ok(cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB") &&
             blas_ok(cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast),
                     "FAST_ACCUM") &&
             blas_ok(cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &x->one,
                                                    sizeof x->one), "A_SCALE_POINTER") &&
             blas_ok(cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x->one,
                                                    sizeof x->one), "B_SCALE_POINTER") &&
             blas_ok(cublasLtMatrixLayoutCreate(&x->la, CUDA_R_8F_E4M3, K, N, (int64_t)K), "layout A") &&
             blas_ok(cublasLtMatrixLayoutCreate(&x->lb, CUDA_R_8F_E4M3, K, M, (int64_t)K), "layout B") &&
             blas_ok(cublasLtMatrixLayoutCreate(&x->lc, CUDA_R_16BF, N, M, (int64_t)N), "layout D") &&
             blas_ok(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate") &&
             blas_ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                          sizeof wsb), "MAX_WORKSPACE_BYTES") &&
             blas_ok(cublasLtMatmulAlgoGetHeuristic(x->lt, x->op, x->la, x->lb, x->lc, x->lc, pref, 1, &heur,
                                                    &found), "AlgoGetHeuristic");
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (ok && found < 1) {
        fprintf(stderr, "perf/gpu_model: cuBLASLt has no fp8 algorithm for %s\n", s->what);
        ok = 0;
    }
    if (ok)
        x->algo = heur.algo;
    return ok;
}

/* bf16: C (M x N) = op(A) op(B), row-major, A stored M x K (ta: K x M), B
 * stored K x N (tb: N x K): cuBLAS's column-major C^T = op(B)^T op(A)^T.
 * fp8: the plan lt_plan made for s. */
static int gemm(gpu_ctx *x, const shape *s)
{
    const float one = 1.0f, zero = 0.0f;
    if (s->fp8)
        return blas_ok(cublasLtMatmul(x->lt, x->op, &one, x->b8, x->la, x->a8, x->lb, &zero, x->c, x->lc,
                                      x->c, x->lc, &x->algo, x->ws, LT_WORKSPACE, x->stream),
                       "cublasLtMatmul");
    int M = (int)s->M, N = (int)s->N, K = (int)s->K;
    return blas_ok(cublasGemmEx(x->blas, s->tb ? CUBLAS_OP_T : CUBLAS_OP_N, s->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                N, M, K, &one, x->b, CUDA_R_16BF, s->tb ? K : N, x->a, CUDA_R_16BF,
                                s->ta ? M : K, &zero, x->c, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
}

/* Seconds of `reps` back-to-back calls, CUDA events; NAN on an error. */
static double timed(gpu_ctx *x, const shape *s, int reps)
{
    float ms = 0;
    if (!cuda_ok(cudaEventRecord(x->e0, x->stream), "cudaEventRecord"))
        return NAN;
    for (int r = 0; r < reps; r++)
        if (!gemm(x, s))
            return NAN;
    if (!cuda_ok(cudaEventRecord(x->e1, x->stream), "cudaEventRecord") ||
        !cuda_ok(cudaEventSynchronize(x->e1), "cudaEventSynchronize") ||
        !cuda_ok(cudaEventElapsedTime(&ms, x->e0, x->e1), "cudaEventElapsedTime"))
        return NAN;
    return ms * 1e-3;
}

/* The median seconds a call over batches of about 50 ms for `seconds` (and
 * the fastest and slowest batch's into s). */
static double measure(gpu_ctx *x, shape *s, double seconds)
{
    if (s->fp8 && !lt_plan(x, s))
        return NAN;
    double t1 = timed(x, s, 2); /* warm-up: cuBLAS picks its kernel */
    t1 = timed(x, s, 3) / 3.0;
    if (!isfinite(t1))
        return NAN;
    int reps = (int)fmax(1.0, fmin(10000.0, 0.05 / fmax(t1, 1e-7)));
    double per[512], spent = 0;
    int nb = 0;
    s->min_s = INFINITY, s->max_s = 0;
    while (spent < seconds && nb < 512) {
        double t = timed(x, s, reps);
        if (!isfinite(t))
            return NAN;
        per[nb++] = t / reps;
        s->min_s = fmin(s->min_s, t / reps), s->max_s = fmax(s->max_s, t / reps);
        spent += t;
    }
    return sb_stat_median(per, nb);
}

static void record(sb_db *db, int64_t run, const char *model, const char *params, const char *kind,
                   double amount, double pred_s, double meas_s, double min_s, double max_s)
{
    if (!db)
        return;
    sb_error err = {0};
    sb_measurement_record rec = {
        .run_id = run, .model = model, .model_path = "perf/gpu_model", .params = params, .p = 1,
        .kind = kind, .predicted_cost = amount, .predicted_s = pred_s, .configs_json = params,
        .step_median_s = meas_s, .step_min_s = min_s, .step_max_s = max_s, .steps = 1,
        .status = isfinite(meas_s) ? "ok" : "error", .message = isfinite(meas_s) ? NULL : "failed"};
    if (sb_db_record_measurement(db, &rec, NULL, &err))
        fprintf(stderr, "perf/gpu_model: %s (figure not stored)\n", err.msg);
}

/* The soak: a bf16 shape kept busy, TFLOP/s each second; returns the last
 * second's over the first second's (NAN on an error). */
static double soak(gpu_ctx *x, const shape *s, double seconds, double *first, double *last)
{
    *first = *last = NAN;
    double t1 = timed(x, s, 2) / 2.0;
    if (!isfinite(t1) || !(t1 > 0))
        return NAN;
    int reps = (int)fmax(1.0, 1.0 / t1);
    printf("# soak: %s (%.0fx%.0fx%.0f), TFLOP/s each second\n", s->what, s->M, s->N, s->K);
    double start = sb_now();
    for (double spent = 0; spent < seconds && sb_now() - start < seconds + 5.0;) {
        double t = timed(x, s, reps);
        if (!isfinite(t))
            return NAN;
        spent += t;
        double tf = 2.0 * s->M * s->N * s->K * reps / t / 1e12;
        if (!isfinite(*first))
            *first = tf;
        *last = tf;
        printf("soak %6.1f s %8.1f TFLOP/s\n", spent, tf);
        fflush(stdout);
    }
    return *last / *first;
}

static double hbm_copy_gbs(gpu_ctx *x)
{
    size_t bytes = x->cap * 2; /* a whole buffer */
    float ms = 0;
    if (!cuda_ok(cudaMemcpyAsync(x->c, x->a, bytes, cudaMemcpyDeviceToDevice, x->stream), "copy") ||
        !cuda_ok(cudaEventRecord(x->e0, x->stream), "cudaEventRecord"))
        return NAN;
    for (int r = 0; r < 10; r++)
        if (!cuda_ok(cudaMemcpyAsync(x->c, x->a, bytes, cudaMemcpyDeviceToDevice, x->stream), "copy"))
            return NAN;
    if (!cuda_ok(cudaEventRecord(x->e1, x->stream), "cudaEventRecord") ||
        !cuda_ok(cudaEventSynchronize(x->e1), "cudaEventSynchronize") ||
        !cuda_ok(cudaEventElapsedTime(&ms, x->e0, x->e1), "cudaEventElapsedTime"))
        return NAN;
    return 10.0 * 2.0 * (double)bytes / (ms * 1e-3) / 1e9; /* read + written */
}

/* The fragment into path, whole or not at all (temporary file, rename). */
static int write_fragment(const char *path, const char *text)
{
    sb_error err = {0};
    if (sb_write_text(path, "machine fragment", text, &err)) {
        fprintf(stderr, "perf/gpu_model: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* Streams, handles and operands for shapes s[0..n) (fp8 ones when any is). */
static int setup(gpu_ctx *x, const shape *s, int n)
{
    size_t cap = 0;
    int any8 = 0;
    for (int i = 0; i < n; i++) {
        double m = fmax(s[i].M * s[i].K, fmax(s[i].K * s[i].N, s[i].M * s[i].N));
        cap = m > (double)cap ? (size_t)m : cap;
        any8 |= s[i].fp8;
    }
    x->cap = cap;
    const float one = 1.0f;
    return cuda_ok(cudaStreamCreate(&x->stream), "cudaStreamCreate") &&
           cuda_ok(cudaEventCreate(&x->e0), "cudaEventCreate") &&
           cuda_ok(cudaEventCreate(&x->e1), "cudaEventCreate") &&
           blas_ok(cublasCreate(&x->blas), "cublasCreate") &&
           blas_ok(cublasSetStream(x->blas, x->stream), "cublasSetStream") &&
           cuda_ok(cudaMalloc(&x->a, cap * 2), "cudaMalloc") && cuda_ok(cudaMalloc(&x->b, cap * 2), "cudaMalloc") &&
           cuda_ok(cudaMalloc(&x->c, cap * 2), "cudaMalloc") && fill_random(x->a, cap, 1, 0) &&
           fill_random(x->b, cap, 2, 0) &&
           (!any8 || (blas_ok(cublasLtCreate(&x->lt), "cublasLtCreate") &&
                      cuda_ok(cudaMalloc(&x->a8, cap), "cudaMalloc") && cuda_ok(cudaMalloc(&x->b8, cap), "cudaMalloc") &&
                      cuda_ok(cudaMalloc(&x->ws, LT_WORKSPACE), "cudaMalloc") &&
                      cuda_ok(cudaMalloc((void **)&x->one, sizeof *x->one), "cudaMalloc") &&
                      cuda_ok(cudaMemcpy(x->one, &one, sizeof one, cudaMemcpyHostToDevice), "cudaMemcpy") &&
                      fill_random(x->a8, cap, 3, 1) && fill_random(x->b8, cap, 4, 1)));
}

static void teardown(gpu_ctx *x)
{
    lt_drop(x);
    cudaFree(x->a), cudaFree(x->b), cudaFree(x->c), cudaFree(x->a8), cudaFree(x->b8);
    cudaFree(x->ws), cudaFree(x->one);
    if (x->lt)
        cublasLtDestroy(x->lt);
    cublasDestroy(x->blas);
    cudaEventDestroy(x->e0), cudaEventDestroy(x->e1);
    cudaStreamDestroy(x->stream);
}

static sb_db *open_db(const opts *o, const struct cudaDeviceProp *prop, const sb_machine *mc, int64_t *run)
{
    sb_db *db = NULL;
    sb_error err = {0};
    if (!strcmp(o->db, "none"))
        return NULL;
    char devices[320], versions[512];
    snprintf(devices, sizeof devices, "1 x %s", prop->name);
    snprintf(versions, sizeof versions, "cublas=%d machine=%s", CUBLAS_VERSION, mc->path);
    sb_run_meta meta = {.backend = "cuda", .devices = devices, .versions = versions,
                        .command_line = "perf/gpu_model"};
    if (sb_db_open(o->db, 0, &db, &err) || sb_db_begin_run(db, &meta, run, &err)) {
        fprintf(stderr, "perf/gpu_model: %s (figures not stored)\n", err.msg);
        if (db)
            sb_db_close(db);
        return NULL;
    }
    return db;
}

/* what the shapes' measurements say, per precision (0 bf16, 1 fp8): the best
 * rate, the log-sum of model over measured, the two times summed */
typedef struct {
    double best[2], logsum[2], model_sum[2], meas_sum[2];
    int n[2];
} summary;

/* The GEMMs' own time of precision p over the model's, less a kernel's
 * overhead each: the model's (the file's kernel_us, model_k) and the
 * measured (back-to-back calls, meas_k); NaN when nothing is left. */
static double model_over_measured(const summary *sm, int p, double model_k, double meas_k)
{
    double model = sm->model_sum[p] - sm->n[p] * model_k, meas = sm->meas_sum[p] - sm->n[p] * meas_k;
    return model > 0 && meas > 0 ? model / meas : NAN;
}

/* Every shape measured and stored; 1 when one failed. */
static int measure_shapes(gpu_ctx *x, shape *s, int n, double seconds, sb_db *db, int64_t run,
                          double peak16, double peak8, summary *sm)
{
    int failed = 0;
    *sm = (summary){{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
    for (int i = 0; i < n; i++) {
        s[i].meas_s = measure(x, &s[i], seconds);
        char cfg[128];
        snprintf(cfg, sizeof cfg, "{\"M\":%.0f,\"N\":%.0f,\"K\":%.0f,\"layout\":\"%s\"%s}", s[i].M, s[i].N,
                 s[i].K, s[i].fp8 ? "TN" : s[i].ta ? (s[i].tb ? "TT" : "TN") : (s[i].tb ? "NT" : "NN"),
                 s[i].fast ? ",\"fast_accum\":1" : "");
        record(db, run, s[i].what, cfg, s[i].fp8 ? "gemm-fp8" : "gemm-bf16", 2.0 * s[i].M * s[i].N * s[i].K,
               s[i].model_s, s[i].meas_s, s[i].min_s, s[i].max_s);
        int p = s[i].fp8;
        double peak = p ? peak8 : peak16;
        if (isfinite(s[i].meas_s) && tflops(&s[i], s[i].meas_s) > 1.05 * peak) {
            fprintf(stderr, "perf/gpu_model: %s: %.1f TFLOP/s is above the %.1f peak: not a real GEMM\n",
                    s[i].what, tflops(&s[i], s[i].meas_s), peak);
            s[i].meas_s = NAN;
        }
        if (!isfinite(s[i].meas_s)) {
            failed = 1;
            continue;
        }
        sm->best[p] = fmax(sm->best[p], tflops(&s[i], s[i].meas_s));
        sm->logsum[p] += log(s[i].model_s / s[i].meas_s);
        sm->model_sum[p] += s[i].model_s;
        sm->meas_sum[p] += s[i].meas_s;
        sm->n[p]++;
    }
    lt_drop(x);
    return failed;
}

static int measure_all(const opts *o, const sb_gpu *g, const sb_gpu *g8, const sb_machine *mc, shape *s,
                       int n)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        fprintf(stderr, "perf/gpu_model: no GPU (cudaGetDeviceCount: none); --plan needs none\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    gpu_ctx x = {0};
    if (!cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties") || !setup(&x, s, n))
        return 1;
    int64_t run = 0;
    sb_db *db = open_db(o, &prop, mc, &run);
    printf("# %s, %d SMs, priced as %s; each shape: median of ~50 ms batches over %.2f s,\n"
           "# CUDA events\n", prop.name, prop.multiProcessorCount, mc->path, o->seconds);
    int big = 0, failed = 0;
    for (int i = 1; i < n; i++)
        if (!s[i].fp8 && s[i].M * s[i].N * s[i].K > s[big].M * s[big].N * s[big].K)
            big = i;
    /* the soak first: every shape after it runs at the settled clock */
    double first = NAN, last = NAN, drift = NAN;
    if (o->soak > 0) {
        drift = soak(&x, &s[big], o->soak, &first, &last);
        double f = 2.0 * s[big].M * s[big].N * s[big].K;
        failed |= !isfinite(drift);
        record(db, run, s[big].what, "{\"soak\":\"last second\"}", "gemm-soak", f, NAN,
               f / (last * 1e12), NAN, NAN);
    }
    summary sm;
    failed |= measure_shapes(&x, s, n, o->seconds, db, run, g->peak_tflops, g8 ? g8->peak_tflops : 0, &sm);
    print_plan(s, n, g, g8, mc->path);
    double gbs = hbm_copy_gbs(&x);
    failed |= !isfinite(gbs);
    record(db, run, "hbm", "{\"copy\":\"cudaMemcpy device to device\"}", "hbm-copy",
           (double)x.cap * 4, NAN, (double)x.cap * 4 / (gbs * 1e9), NAN, NAN);
    shape tiny = {.what = "tiny", .M = 64, .N = 64, .K = 64, .meas_s = NAN, .min_s = NAN, .max_s = NAN};
    timed(&x, &tiny, 20); /* warm-up: the kernel's choice and module load */
    double launch = timed(&x, &tiny, 2000) / 2000.0;
    failed |= !isfinite(launch);
    record(db, run, "kernel", "{\"gemm\":\"64x64x64 back to back\"}", "kernel-overhead",
           2.0 * 64 * 64 * 64, NAN, launch, NAN, NAN);
    /* each precision's fraction: the file's times the model's time over the measured
     * (a long GEMM weighs more than a short one); over 1 it is no machine-file figure:
     * the model's shape terms, not the peak, are then wrong for these GEMMs */
    double ratio[2] = {NAN, NAN}, eff[2] = {NAN, NAN};
    int unfit = 0;
    for (int p = 0; p < 2 && !failed; p++) {
        if (sm.n[p] == 0)
            continue;
        ratio[p] = model_over_measured(&sm, p, g->kernel_us * 1e-6, launch);
        eff[p] = (p ? g8->gemm_eff : g->gemm_eff) * ratio[p];
        if (!(eff[p] > 0 && eff[p] <= 1.0)) {
            fprintf(stderr, "perf/gpu_model: the %s GEMMs fit a large-GEMM fraction of %.3f, not in "
                    "0..1: no fragment (the table above)\n", p ? "fp8" : "bf16", eff[p]);
            unfit = 1;
        }
    }
    if (failed)
        fprintf(stderr, "perf/gpu_model: a figure could not be measured (above): no fragment\n");
    failed |= unfit;
    if (!failed) {
        char frag[3072], fp8line[512] = "", soakline[160] = "no soak (--soak 0)";
        if (o->soak > 0)
            snprintf(soakline, sizeof soakline,
                     "the soak's last second over its first: %.3f\n#   (%.1f -> %.1f TFLOP/s)", drift, first,
                     last);
        int ver = 0;
        cublasGetVersion(x.blas, &ver);
        time_t now = time(NULL);
        char day[32];
        strftime(day, sizeof day, "%Y-%m-%d", gmtime(&now));
        if (sm.n[1] > 0)
            snprintf(fp8line, sizeof fp8line,
                     "gemm_eff_large_fp8 %.3f   # the file's %.3f x %.3f over %d e4m3 GEMMs (cuBLASLt,\n"
                     "#   TN); geometric mean of model over measured %.3f; the best measured shape:\n"
                     "#   %.1f of %.1f TFLOP/s\n",
                     eff[1], g8->gemm_eff, ratio[1],
                     sm.n[1], exp(sm.logsum[1] / sm.n[1]), sm.best[1], g8->peak_tflops);
        snprintf(frag, sizeof frag,
                 "# Measured by perf/gpu_model on %s (%d SMs), cuBLAS %d, %s, against %s;\n"
                 "#   %s. Each large-GEMM fraction is the file's times the model's summed time\n"
                 "#   over the measured sum (the published runs' GEMMs, each shape once, less the\n"
                 "#   file's kernel_us and the measured call overhead): with it the model prices\n"
                 "#   them as this GPU ran them\n"
                 "gemm_eff_large %.3f   # the file's %.3f x %.3f over %d bf16 GEMMs; geometric\n"
                 "#   mean of model over measured %.3f; the best measured shape: %.1f of %.1f\n"
                 "#   TFLOP/s bf16\n"
                 "%s"
                 "hbm_eff %.3f          # device-to-device copy: %.0f of %.0f GB/s\n"
                 "# back-to-back cuBLAS calls: %.2f us a kernel (a floor for kernel_us, which\n"
                 "# also counts the framework's launch path)\n",
                 prop.name, prop.multiProcessorCount, ver, day, mc->path, soakline,
                 eff[0], g->gemm_eff, ratio[0], sm.n[0],
                 exp(sm.logsum[0] / sm.n[0]), sm.best[0], g->peak_tflops, fp8line, gbs / mc->mem_gbs, gbs, mc->mem_gbs, launch * 1e6);
        printf("\n%s", frag);
        if (o->fragment && write_fragment(o->fragment, frag))
            failed = 1;
    }
    if (db) {
        sb_error err = {0};
        if (sb_db_end_run(db, run, &err))
            fprintf(stderr, "perf/gpu_model: %s\n", err.msg);
        sb_db_close(db);
        printf("# figures stored in %s (run %lld)\n", o->db, (long long)run);
    }
    teardown(&x);
    return failed ? 1 : 0;
}
#endif

/* The machine file: --machine, else by the device's name (H100, H200, A100). */
static const char *machine_name(const opts *o)
{
    if (o->machine)
        return o->machine;
#ifdef SB_HAVE_CUDA
    struct cudaDeviceProp prop;
    int ndev = 0;
    if (!o->plan && cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0 &&
        cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        return strstr(prop.name, "H200") ? "h200-sxm" : strstr(prop.name, "A100") ? "a100-sxm-80g" : "h100-sxm";
#endif
    return "h100-sxm";
}

int main(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    sb_machine mc;
    sb_gpu g;
    sb_error err = {0};
    const char *name = machine_name(&o);
    if (sb_machine_load(name, &mc, &err) || sb_gpu_from_machine(&mc, SB_PREC_BF16, &g, &err)) {
        fprintf(stderr, "perf/gpu_model: %s\n", err.msg);
        return 2;
    }
    /* the fp8 recipe's GEMMs too where the machine file has an fp8 peak */
    sb_gpu g8;
    int has8 = sb_machine_peak(&mc, SB_PREC_FP8, 0) > 0 && !sb_gpu_from_machine(&mc, SB_PREC_FP8, &g8, &err);
    shape s[MAX_SHAPES];
    int n = build_shapes(&g, has8 ? &g8 : NULL, s);
    if (o.plan) {
        print_plan(s, n, &g, has8 ? &g8 : NULL, mc.path);
        return 0;
    }
#ifdef SB_HAVE_CUDA
    return measure_all(&o, &g, has8 ? &g8 : NULL, &mc, s, n);
#else
    fprintf(stderr, "perf/gpu_model: no GPU: this build has no cuda backend (SHARDBENCH_CUDA=OFF); "
                    "--plan prints the model's side\n");
    return 77;
#endif
}
