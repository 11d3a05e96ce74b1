/* perf/gpu.c: the cuda backend's speed on one GPU, against cuBLAS and
 * cuDNN alone on the same shapes, and full training steps with the
 * executor's overhead (target: at most 10% of the step; perf/README.md).
 *
 *   mpirun -np 1 perf/gpu [-n steps (10)] [-w warm-ups (3)] [-r kernel reps (20)]
 *                          [--models alexnet,transformer] [--quick] [--db FILE|none]
 *
 * Precision: SHARDBENCH_PRECISION=fp32|tf32|bf16 (the backend's; default
 * fp32); the cuBLAS/cuDNN baselines use the same math (bf16: operands
 * already in bf16, fp32 accumulation and output; conv keeps fp32 data).
 *
 * 1. kernels: GEMM (square 4096, 8192; batched 64 x 512x512x512) and conv
 *    (3x3 128->128 on 32x56x56; AlexNet's 5x5 96->256 on 128x27x27),
 *    forward / backward-data / backward-filter, through the backend table
 *    and through cuBLAS/cuDNN directly, each the mean of r calls timed by
 *    CUDA events after one warm-up call (cuDNN's algorithm search). Prints
 *    TFLOP/s of both and the ratio table / library.
 * 2. steps: AlexNet batch 128 and the Transformer batch 64 (other
 *    parameters as in the model files) at p = 1 (the all-ones strategy),
 *    median step time of n steps after w warm-ups; executor overhead =
 *    mean step time - mean per-step sum of the per-op times
 *    (sb_executor_op_times); achieved TFLOP/s = GEMM + conv FLOP of a step
 *    (counted at the backend table) / median step time; MFU = that / the
 *    device's peak for the precision (table below, keyed by device name).
 *
 * Results database: one run (backend "cuda"); each figure is a measurement
 * whose predicted_cost is its FLOP and step_median_s its seconds (kinds
 * "table-gemm", "cublas", "table-conv-fwd|bwd-data|bwd-filter",
 * "cudnn-fwd|...", "bench-gpu" for a step, "bench-gpu-ops" for the per-op
 * sum of a step; in bf16 "bench-gpu-bf16-convert": a step's conversions of
 * GEMM operands that are not weights, re-timed alone, predicted_cost their
 * fp32 bytes). Without a GPU: "no GPU" and exit 77. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/results.h"
#include "shardbench/runtime.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

#ifdef SB_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "cuda_backend.h"

#define CUDACHECK(x) check_cuda((x), #x, __FILE__, __LINE__)
#define BLASCHECK(x) check_int((int)(x), "cuBLAS", #x, __FILE__, __LINE__)
#define DNNCHECK(x) check_dnn((x), #x, __FILE__, __LINE__)

static void check_cuda(cudaError_t e, const char *what, const char *file, int line)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "perf/gpu: %s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
        exit(1);
    }
}
static void check_int(int s, const char *lib, const char *what, const char *file, int line)
{
    if (s) {
        fprintf(stderr, "perf/gpu: %s:%d: %s: %s status %d\n", file, line, what, lib, s);
        exit(1);
    }
}
static void check_dnn(cudnnStatus_t s, const char *what, const char *file, int line)
{
    if (s != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "perf/gpu: %s:%d: %s: %s\n", file, line, what, cudnnGetErrorString(s));
        exit(1);
    }
}

/* ---- device peaks ---- */

/* Dense peaks in TFLOP/s (vendor figures, without sparsity), keyed by a
 * substring of cudaDeviceProp.name; first match wins. */
static const struct {
    const char *key;
    double fp32, tf32, bf16;
} peaks[] = {
    {"H200", 67.0, 494.7, 989.4},
    {"H100 80GB HBM3", 67.0, 494.7, 989.4}, /* H100 SXM */
};

static double device_peak(const char *dev, const char *prec)
{
    for (size_t i = 0; i < sizeof peaks / sizeof *peaks; i++)
        if (strstr(dev, peaks[i].key))
            return !strcmp(prec, "tf32") ? peaks[i].tf32
                   : !strcmp(prec, "bf16") ? peaks[i].bf16
                                           : peaks[i].fp32;
    return NAN;
}

/* ---- options ---- */

typedef struct {
    int steps, warmup, reps, quick;
    const char *db;
    char models[256];
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: mpirun -np 1 perf/gpu [-n steps (10)] [-w warm-ups (3)] [-r reps (20)]\n"
               "                              [--models alexnet,transformer] [--quick] [--db FILE|none]\n"
               "SHARDBENCH_PRECISION=fp32|tf32|bf16 chooses the precision (default fp32).\n");
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.steps = 10, .warmup = 3, .reps = 20, .db = SB_DB_DEFAULT_PATH};
    snprintf(o->models, sizeof o->models, "alexnet,transformer");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (v && (!strcmp(a, "-n") || !strcmp(a, "-w") || !strcmp(a, "-r"))) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < (a[1] == 'w' ? 0 : 1) || x > 10000) {
                fprintf(stderr, "perf/gpu: %s: bad count '%s'\n", a, v);
                return 2;
            }
            *(a[1] == 'n' ? &o->steps : a[1] == 'w' ? &o->warmup : &o->reps) = (int)x;
            i++;
        } else if (v && !strcmp(a, "--models")) {
            snprintf(o->models, sizeof o->models, "%s", v);
            i++;
        } else if (v && !strcmp(a, "--db")) {
            o->db = v;
            i++;
        } else {
            fprintf(stderr, "perf/gpu: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

/* ---- shared state ---- */

static const sb_backend *gpu;
static const char *prec = "fp32";
static char devname[256];
static cudaStream_t stream;
static cudaEvent_t ev0, ev1;
static cublasHandle_t blas;
static cudnnHandle_t dnn;
static sb_db *db;
static int64_t run_id;
static int failed;

static void record(const char *model, const char *params, const char *kind, double flop,
                   double seconds, int steps, const char *configs, int nops)
{
    if (!db)
        return;
    sb_error err = {0};
    sb_measurement_record rec = {
        .run_id = run_id, .model = model, .model_path = "perf/gpu", .params = params,
        .nops = nops, .p = 1, .kind = kind, .predicted_cost = flop, .configs_json = configs,
        .step_median_s = seconds, .step_min_s = seconds, .step_max_s = seconds, .steps = steps,
        .status = isfinite(seconds) ? "ok" : "error",
        .message = isfinite(seconds) ? NULL : "failed"};
    if (sb_db_record_measurement(db, &rec, NULL, &err))
        fprintf(stderr, "perf/gpu: %s (figure not stored)\n", err.msg);
}

static float *dev_random(size_t n, uint64_t seed)
{
    float *h = malloc(n * sizeof *h), *d = gpu->alloc(n * sizeof *d);
    if (!h || !d) {
        fprintf(stderr, "perf/gpu: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = (float)((seed >> 40) & 0xffff) / 32768.0f - 1.0f;
    }
    gpu->from_host(d, h, n);
    gpu->sync();
    free(h);
    return d;
}

/* A plain cudaMalloc copy of n floats from the pool (the baseline's own
 * memory), as fp32 or bf16 (truncated). */
static void *dev_copy(const float *src, size_t n, int bf16)
{
    float *h = malloc(n * sizeof *h);
    void *d;
    if (!h) {
        fprintf(stderr, "perf/gpu: out of memory\n");
        exit(1);
    }
    gpu->to_host(h, src, n);
    if (bf16) {
        uint16_t *b = (uint16_t *)h;
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &h[i], 4);
            b[i] = (uint16_t)(u >> 16);
        }
    }
    CUDACHECK(cudaMalloc(&d, n * (bf16 ? 2 : 4)));
    CUDACHECK(cudaMemcpy(d, h, n * (bf16 ? 2 : 4), cudaMemcpyHostToDevice));
    free(h);
    return d;
}

typedef void (*job)(void *);

/* Mean ms of reps calls through the table (its stream, CUDA events). */
static double table_ms(job fn, void *arg, int reps)
{
    fn(arg);
    gpu->sync();
    sb_cuda_timer_start();
    for (int r = 0; r < reps; r++)
        fn(arg);
    return sb_cuda_timer_stop_ms() / reps;
}

/* Mean ms of reps calls of a library on the baseline stream. */
static double lib_ms(job fn, void *arg, int reps)
{
    fn(arg);
    CUDACHECK(cudaStreamSynchronize(stream));
    CUDACHECK(cudaEventRecord(ev0, stream));
    for (int r = 0; r < reps; r++)
        fn(arg);
    CUDACHECK(cudaEventRecord(ev1, stream));
    CUDACHECK(cudaEventSynchronize(ev1));
    float ms;
    CUDACHECK(cudaEventElapsedTime(&ms, ev0, ev1));
    return ms / reps;
}

static void row(const char *what, double flop, double t_ms, double l_ms, const char *lib,
                const char *kind_t, const char *kind_l, const char *params)
{
    double tt = flop / (t_ms * 1e9), lt = flop / (l_ms * 1e9);
    printf("%-44s %9.3f %9.3f %8.1f %8.1f %6.3f  (%s)\n", what, t_ms, l_ms, tt, lt, tt / lt, lib);
    record("kernel", params, kind_t, flop, t_ms / 1e3, 1, "{}", 1);
    record("kernel", params, kind_l, flop, l_ms / 1e3, 1, "{}", 1);
}

/* ---- GEMM ---- */

typedef struct {
    int M, N, K, batch;
    float *a, *b, *c;       /* pool memory: the table's */
    void *la, *lb, *lc;     /* cudaMalloc: the library's */
} gemm_case;

static void gemm_table(void *p)
{
    gemm_case *g = p;
    /* row-major C (M x N) = A (M x K) B (K x N), batches back to back */
    gpu->gemm->gemm_batched(0, 0, g->M, g->N, g->K, 1.0f, g->a, g->K, (ptrdiff_t)g->M * g->K, g->b,
                            g->N, (ptrdiff_t)g->K * g->N, 0.0f, g->c, g->N, (ptrdiff_t)g->M * g->N,
                            g->batch);
}

static void gemm_lib(void *p)
{
    gemm_case *g = p;
    float alpha = 1.0f, beta = 0.0f;
    int bf = !strcmp(prec, "bf16");
    cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_32F;
    cublasComputeType_t ct = !strcmp(prec, "tf32") ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    /* column-major: C^T (N x M) = B^T A^T, as the backend does */
    BLASCHECK(cublasGemmStridedBatchedEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, g->N, g->M, g->K, &alpha,
                                         g->lb, t, g->N, (long long)g->K * g->N, g->la, t, g->K,
                                         (long long)g->M * g->K, &beta, g->lc, CUDA_R_32F, g->N,
                                         (long long)g->M * g->N, g->batch, ct,
                                         CUBLAS_GEMM_DEFAULT));
}

static void bench_gemm(int reps, int quick)
{
    static const int shapes[][4] = {{4096, 4096, 4096, 1}, {8192, 8192, 8192, 1}, {512, 512, 512, 64}};
    int bf = !strcmp(prec, "bf16");
    for (int s = 0; s < (quick ? 1 : 3); s++) {
        gemm_case g = {shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], 0, 0, 0, 0, 0, 0};
        size_t na = (size_t)g.M * g.K * g.batch, nb = (size_t)g.K * g.N * g.batch,
               nc = (size_t)g.M * g.N * g.batch;
        g.a = dev_random(na, 1), g.b = dev_random(nb, 2), g.c = gpu->alloc(nc * 4);
        g.la = dev_copy(g.a, na, bf), g.lb = dev_copy(g.b, nb, bf);
        CUDACHECK(cudaMalloc(&g.lc, nc * 4));
        double flop = 2.0 * g.M * g.N * (double)g.K * g.batch;
        char what[96], params[160];
        snprintf(what, sizeof what, "gemm %dx%dx%d batch %d", g.M, g.N, g.K, g.batch);
        snprintf(params, sizeof params, "op=gemm,M=%d,N=%d,K=%d,batch=%d,precision=%s", g.M, g.N,
                 g.K, g.batch, prec);
        row(what, flop, table_ms(gemm_table, &g, reps), lib_ms(gemm_lib, &g, reps), "cuBLAS",
            "table-gemm", "cublas", params);
        gpu->release(g.a), gpu->release(g.b), gpu->release(g.c);
        CUDACHECK(cudaFree(g.la)), CUDACHECK(cudaFree(g.lb)), CUDACHECK(cudaFree(g.lc));
    }
}

/* ---- convolution ---- */

typedef struct {
    int B, C, H, N, R, pad, Ho, pass;
    float *x, *w, *y, *dx, *dw;       /* pool */
    float *lx, *lw, *ly, *ldx, *ldw;  /* cudaMalloc */
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t fa;
    cudnnConvolutionBwdDataAlgo_t da;
    cudnnConvolutionBwdFilterAlgo_t fba;
    cudnnMathType_t fm, dm, fbm;
    void *ws;
    size_t ws_bytes;
} conv_case;

static void conv_table(void *p)
{
    conv_case *k = p;
    if (k->pass == 0)
        gpu->conv->conv2d_forward(k->y, k->x, k->w, NULL, NULL, k->B, k->C, k->H, k->H, k->N, k->R,
                                  k->R, 1, 1, k->pad, k->pad, k->Ho, k->Ho, 1, 1, 1, 0);
    else if (k->pass == 1)
        gpu->conv->conv2d_backward_data(k->dx, NULL, k->y, NULL, k->w, k->B, k->C, k->H, k->H, k->N,
                                        k->R, k->R, 1, 1, k->pad, k->pad, k->Ho, k->Ho, 1, 1, 1);
    else
        gpu->conv->conv2d_backward_filter(k->dw, NULL, NULL, k->y, NULL, k->x, k->B, k->C, k->H,
                                          k->H, k->N, k->R, k->R, 1, 1, k->pad, k->pad, k->Ho,
                                          k->Ho, 1, 1, 1);
}

static void conv_lib(void *p)
{
    conv_case *k = p;
    float one = 1.0f, zero = 0.0f;
    if (k->pass == 0) {
        DNNCHECK(cudnnSetConvolutionMathType(k->cd, k->fm));
        DNNCHECK(cudnnConvolutionForward(dnn, &one, k->xd, k->lx, k->wd, k->lw, k->cd, k->fa, k->ws,
                                         k->ws_bytes, &zero, k->yd, k->ly));
    } else if (k->pass == 1) {
        DNNCHECK(cudnnSetConvolutionMathType(k->cd, k->dm));
        /* the table accumulates into dx: beta 1 */
        DNNCHECK(cudnnConvolutionBackwardData(dnn, &one, k->wd, k->lw, k->yd, k->ly, k->cd, k->da,
                                              k->ws, k->ws_bytes, &one, k->xd, k->ldx));
    } else {
        DNNCHECK(cudnnSetConvolutionMathType(k->cd, k->fbm));
        DNNCHECK(cudnnConvolutionBackwardFilter(dnn, &one, k->xd, k->lx, k->yd, k->ly, k->cd, k->fba,
                                                k->ws, k->ws_bytes, &one, k->wd, k->ldw));
    }
}

/* cuDNN's own search (like the backend's), fastest successful result. */
static void conv_find(conv_case *k)
{
    int n = 0;
    cudnnConvolutionFwdAlgoPerf_t f[16];
    cudnnConvolutionBwdDataAlgoPerf_t d[16];
    cudnnConvolutionBwdFilterAlgoPerf_t b[16];
    DNNCHECK(cudnnFindConvolutionForwardAlgorithm(dnn, k->xd, k->wd, k->cd, k->yd, 16, &n, f));
    for (int i = 0; i < n; i++)
        if (f[i].status == CUDNN_STATUS_SUCCESS) {
            k->fa = f[i].algo, k->fm = f[i].mathType;
            k->ws_bytes = f[i].memory > k->ws_bytes ? f[i].memory : k->ws_bytes;
            break;
        }
    DNNCHECK(cudnnFindConvolutionBackwardDataAlgorithm(dnn, k->wd, k->yd, k->cd, k->xd, 16, &n, d));
    for (int i = 0; i < n; i++)
        if (d[i].status == CUDNN_STATUS_SUCCESS) {
            k->da = d[i].algo, k->dm = d[i].mathType;
            k->ws_bytes = d[i].memory > k->ws_bytes ? d[i].memory : k->ws_bytes;
            break;
        }
    DNNCHECK(cudnnFindConvolutionBackwardFilterAlgorithm(dnn, k->xd, k->yd, k->cd, k->wd, 16, &n, b));
    for (int i = 0; i < n; i++)
        if (b[i].status == CUDNN_STATUS_SUCCESS) {
            k->fba = b[i].algo, k->fbm = b[i].mathType;
            k->ws_bytes = b[i].memory > k->ws_bytes ? b[i].memory : k->ws_bytes;
            break;
        }
    if (k->ws_bytes)
        CUDACHECK(cudaMalloc(&k->ws, k->ws_bytes));
}

static void bench_conv(int reps, int quick)
{
    /* B, C, H, N, R, pad */
    static const int shapes[][6] = {{32, 128, 56, 128, 3, 1}, {128, 96, 27, 256, 5, 2}};
    static const char *const pass[] = {"fwd", "bwd-data", "bwd-filter"};
    for (int s = 0; s < (quick ? 1 : 2); s++) {
        conv_case k = {0};
        k.B = shapes[s][0], k.C = shapes[s][1], k.H = shapes[s][2], k.N = shapes[s][3];
        k.R = shapes[s][4], k.pad = shapes[s][5], k.Ho = k.H + 2 * k.pad - k.R + 1;
        size_t nx = (size_t)k.B * k.C * k.H * k.H, ny = (size_t)k.B * k.N * k.Ho * k.Ho,
               nw = (size_t)k.N * k.C * k.R * k.R;
        k.x = dev_random(nx, 3), k.w = dev_random(nw, 4), k.y = dev_random(ny, 5);
        k.dx = dev_random(nx, 6), k.dw = dev_random(nw, 7);
        k.lx = dev_copy(k.x, nx, 0), k.lw = dev_copy(k.w, nw, 0), k.ly = dev_copy(k.y, ny, 0);
        k.ldx = dev_copy(k.dx, nx, 0), k.ldw = dev_copy(k.dw, nw, 0);
        DNNCHECK(cudnnCreateTensorDescriptor(&k.xd));
        DNNCHECK(cudnnCreateTensorDescriptor(&k.yd));
        DNNCHECK(cudnnCreateFilterDescriptor(&k.wd));
        DNNCHECK(cudnnCreateConvolutionDescriptor(&k.cd));
        DNNCHECK(cudnnSetTensor4dDescriptor(k.xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, k.B, k.C,
                                            k.H, k.H));
        DNNCHECK(cudnnSetTensor4dDescriptor(k.yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, k.B, k.N,
                                            k.Ho, k.Ho));
        DNNCHECK(cudnnSetFilter4dDescriptor(k.wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k.N, k.C,
                                            k.R, k.R));
        DNNCHECK(cudnnSetConvolution2dDescriptor(k.cd, k.pad, k.pad, 1, 1, 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        /* the backend's math: FMA (no tensor cores) in fp32, default otherwise */
        DNNCHECK(cudnnSetConvolutionMathType(k.cd, !strcmp(prec, "fp32") ? CUDNN_FMA_MATH
                                                                         : CUDNN_DEFAULT_MATH));
        conv_find(&k);
        double flop = 2.0 * ny * k.C * k.R * k.R;
        for (k.pass = 0; k.pass < 3; k.pass++) {
            char what[96], params[192], kt[32], kl[32];
            snprintf(what, sizeof what, "conv %dx%d %d->%d on %dx%dx%d %s", k.R, k.R, k.C, k.N, k.B,
                     k.H, k.H, pass[k.pass]);
            snprintf(params, sizeof params,
                     "op=conv-%s,B=%d,C=%d,H=%d,W=%d,N=%d,R=%d,S=%d,pad=%d,precision=%s",
                     pass[k.pass], k.B, k.C, k.H, k.H, k.N, k.R, k.R, k.pad, prec);
            snprintf(kt, sizeof kt, "table-conv-%s", pass[k.pass]);
            snprintf(kl, sizeof kl, "cudnn-%s", pass[k.pass]);
            row(what, flop, table_ms(conv_table, &k, reps), lib_ms(conv_lib, &k, reps), "cuDNN",
                kt, kl, params);
        }
        cudnnDestroyTensorDescriptor(k.xd), cudnnDestroyTensorDescriptor(k.yd);
        cudnnDestroyFilterDescriptor(k.wd), cudnnDestroyConvolutionDescriptor(k.cd);
        if (k.ws)
            CUDACHECK(cudaFree(k.ws));
        gpu->release(k.x), gpu->release(k.w), gpu->release(k.y), gpu->release(k.dx),
            gpu->release(k.dw);
        CUDACHECK(cudaFree(k.lx)), CUDACHECK(cudaFree(k.lw)), CUDACHECK(cudaFree(k.ly));
        CUDACHECK(cudaFree(k.ldx)), CUDACHECK(cudaFree(k.ldw));
    }
}

/* ---- full steps ---- */

/* The cuda backend with GEMM and conv FLOP counted on the way through. */
static sb_backend counted;
static sb_gemm_kernels counted_gemm;
static sb_conv_kernels counted_conv;
static double step_flop;

static void c_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                   ptrdiff_t sa, const float *B, int ldb, ptrdiff_t sb, float beta, float *C,
                   int ldc, ptrdiff_t sc, int batch)
{
    step_flop += 2.0 * M * N * (double)K * batch;
    gpu->gemm->gemm_batched(ta, tb, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc,
                            batch);
}
static void c_conv_f(float *out, const float *inp, const float *w, const float *bias, float *work,
                     int B, int C, int H_in, int W_in, int N, int R, int S, int sh, int sw, int pt,
                     int pl, int H_out, int W_out, int dil_h, int dil_w, int groups, int relu)
{
    step_flop += 2.0 * B * N * H_out * (double)W_out * (C / groups) * R * S;
    gpu->conv->conv2d_forward(out, inp, w, bias, work, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl,
                              H_out, W_out, dil_h, dil_w, groups, relu);
}
static void c_conv_d(float *dinp, float *work, const float *dout, const float *out, const float *w,
                     int B, int C, int H_in, int W_in, int N, int R, int S, int sh, int sw, int pt,
                     int pl, int H_out, int W_out, int dil_h, int dil_w, int groups)
{
    step_flop += 2.0 * B * N * H_out * (double)W_out * (C / groups) * R * S;
    gpu->conv->conv2d_backward_data(dinp, work, dout, out, w, B, C, H_in, W_in, N, R, S, sh, sw, pt,
                                    pl, H_out, W_out, dil_h, dil_w, groups);
}
static void c_conv_w(float *dw, float *dbias, float *work, const float *dout, const float *out,
                     const float *inp, int B, int C, int H_in, int W_in, int N, int R, int S, int sh,
                     int sw, int pt, int pl, int H_out, int W_out, int dil_h, int dil_w,
                     int groups)
{
    step_flop += 2.0 * B * N * H_out * (double)W_out * (C / groups) * R * S;
    gpu->conv->conv2d_backward_filter(dw, dbias, work, dout, out, inp, B, C, H_in, W_in, N, R, S,
                                      sh, sw, pt, pl, H_out, W_out, dil_h, dil_w, groups);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bench_step(const char *name, int batch, const opts *o, double peak)
{
    sb_error err = {0};
    sb_model m = {0};
    sb_problem pb = {0};
    sb_executor *ex = NULL;
    int *choice = NULL, have_m = 0, have_pb = 0;
    double *t = calloc((size_t)o->steps, sizeof *t);
    sb_setting set = {.value = batch};
    snprintf(set.name, sizeof set.name, "batch");
    if (!t) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto fail;
    }
    if (sb_model_load(name, &set, 1, &m, &err))
        goto fail;
    have_m = 1;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    if (sb_problem_build(&m, 1, &cp, &pb, &err))
        goto fail;
    have_pb = 1;
    choice = calloc((size_t)m.nops, sizeof *choice); /* config 0: all ones at p = 1 */
    if (!choice) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto fail;
    }
    sb_exec_opts eo = {.lr = 0.01f, .seed = 1};
    int created;
    {
        sb_strategy st;
        created = !sb_strategy_from_choice(&st, &pb, choice, &err);
        if (created) {
            created = !sb_executor_create(MPI_COMM_WORLD, pb.m, &st, &counted, &eo, &ex, &err);
            sb_strategy_free(&st);
        }
    }
    if (!created)
        goto fail;
    double loss;
    for (int s = 0; s < o->warmup; s++)
        if (sb_executor_step(ex, &loss, &err))
            goto fail;
    sb_executor_reset_times(ex);
    step_flop = 0;
    sb_cuda_stats st0;
    int have_st0 = !sb_cuda_stats_get(&st0);
    double sum = 0;
    for (int s = 0; s < o->steps; s++) {
        gpu->sync();
        double t0 = MPI_Wtime();
        if (sb_executor_step(ex, &loss, &err))
            goto fail;
        gpu->sync();
        t[s] = MPI_Wtime() - t0;
        sum += t[s];
    }
    const sb_op_time *ot = sb_executor_op_times(ex);
    double ops = 0;
    for (int i = 0; i < m.nops; i++)
        ops += ot[i].compute_s + ot[i].comm_s;
    double mean = sum / o->steps, ops_step = ops / o->steps, flop = step_flop / o->steps;
    qsort(t, (size_t)o->steps, sizeof *t, cmp_double);
    double med = o->steps % 2 ? t[o->steps / 2] : 0.5 * (t[o->steps / 2 - 1] + t[o->steps / 2]);
    double over = mean - ops_step, tf = flop / med / 1e12;
    sb_cuda_stats st;
    double peak_mem = sb_cuda_stats_get(&st) ? 0 : (double)st.peak_bytes;
    char mfu[16] = "-";
    if (isfinite(peak))
        snprintf(mfu, sizeof mfu, "%.1f%%", 100 * tf / peak);
    printf("%-12s %5d %10.4f %10.4f %10.4f %9.4f %6.1f%% %8.1f %6s %9.2f %9.4f\n", name, batch, med,
           t[0], t[o->steps - 1], over, 100 * over / mean, tf, mfu, peak_mem / 1e9, loss);
    if (over > 0.1 * mean)
        printf("# %s: executor overhead %.1f%% of the step (target <= 10%%)\n", name,
               100 * over / mean);
    /* bf16: the GEMM operands that are not weights (activations, their
     * gradients) are converted at each GEMM; re-timed alone, that is what
     * keeping activations in bf16 between ops would save at the GEMMs */
    double conv_floats = 0, conv_ms = 0;
    long conv_calls = 0, conv_again = 0;
    if (have_st0 && !sb_cuda_stats_get(&st)) {
        conv_calls = (st.bf16_act_conversions - st0.bf16_act_conversions) / o->steps;
        conv_floats = (st.bf16_act_floats - st0.bf16_act_floats) / o->steps;
        conv_again = (st.bf16_act_reuses - st0.bf16_act_reuses) / o->steps;
    }
    if (conv_calls > 0) {
        char why[256];
        conv_ms = sb_cuda_convert_ms(conv_floats, conv_calls, why, sizeof why);
        if (conv_ms < 0)
            printf("# %s: bf16 conversions at the GEMMs: %ld a step (%.1f MiB of fp32; %ld more "
                   "operands read a kept one), not re-timed: %s\n",
                   name, conv_calls, conv_floats * 4 / 1048576.0, conv_again, why);
        else
            printf("# %s: bf16 conversions at the GEMMs: %ld a step (%.1f MiB of fp32; %ld more "
                   "operands read a kept one), %.3f ms re-timed alone = %.1f%% of the step (what "
                   "activations stored in bf16 would save at the GEMMs)\n",
                   name, conv_calls, conv_floats * 4 / 1048576.0, conv_again, conv_ms,
                   100 * conv_ms / 1e3 / med);
    }
    if (db) {
        char params[2048];
        sb_params_str(&m, params, sizeof params);
        sb_result res = {.choice = choice, .total_cost = sb_strategy_cost(&pb, choice)};
        char *json = sb_result_json_str(&pb, &res, "bench-gpu");
        sb_measurement_record rec = {
            .run_id = run_id, .model = m.name, .model_path = m.path, .params = params,
            .nops = m.nops, .p = 1, .kind = "bench-gpu", .predicted_cost = flop,
            .configs_json = json ? json : "{}", .step_median_s = med, .step_min_s = t[0],
            .step_max_s = t[o->steps - 1], .steps = o->steps, .status = "ok",
            .peak_mem_bytes = peak_mem};
        if (sb_db_record_measurement(db, &rec, NULL, &err))
            fprintf(stderr, "perf/gpu: %s (figure not stored)\n", err.msg);
        rec.kind = "bench-gpu-ops";
        rec.step_median_s = rec.step_min_s = rec.step_max_s = ops_step;
        if (sb_db_record_measurement(db, &rec, NULL, &err))
            fprintf(stderr, "perf/gpu: %s (figure not stored)\n", err.msg);
        if (conv_ms > 0) {
            rec.kind = "bench-gpu-bf16-convert";
            rec.predicted_cost = conv_floats * 4; /* bytes of fp32 read */
            rec.step_median_s = rec.step_min_s = rec.step_max_s = conv_ms / 1e3;
            if (sb_db_record_measurement(db, &rec, NULL, &err))
                fprintf(stderr, "perf/gpu: %s (figure not stored)\n", err.msg);
        }
        free(json);
    }
    goto out;
fail:
    printf("%-12s %5d failed: %s\n", name, batch, err.msg);
    failed = 1;
    if (db && have_m) {
        char params[2048];
        sb_params_str(&m, params, sizeof params);
        sb_measurement_record rec = {
            .run_id = run_id, .model = m.name, .model_path = m.path, .params = params,
            .nops = m.nops, .p = 1, .kind = "bench-gpu", .predicted_cost = NAN,
            .configs_json = "{}", .step_median_s = NAN, .step_min_s = NAN, .step_max_s = NAN,
            .status = "error", .message = err.msg};
        sb_error e2 = {0};
        if (sb_db_record_measurement(db, &rec, NULL, &e2))
            fprintf(stderr, "perf/gpu: %s (figure not stored)\n", e2.msg);
    }
out:
    sb_executor_free(ex);
    free(choice);
    free(t);
    if (have_pb)
        sb_problem_free(&pb);
    if (have_m)
        sb_model_free(&m);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc || size != 1) {
        if (!rc)
            fprintf(stderr, "perf/gpu: runs on one rank (got %d)\n", size);
        MPI_Finalize();
        return rc == 1 ? 0 : 2;
    }
    sb_error err = {0};
    gpu = sb_backend_cuda_get(&err);
    if (!gpu) {
        fprintf(stderr, "perf/gpu: %s%s\n", strncmp(err.msg, "no GPU", 6) ? "no GPU: " : "", err.msg);
        MPI_Finalize();
        return 77;
    }
    const char *pv = getenv("SHARDBENCH_PRECISION");
    prec = pv && *pv ? pv : "fp32";
    sb_cuda_stats st;
    int dev = sb_cuda_stats_get(&st) ? 0 : st.device;
    struct cudaDeviceProp prop;
    CUDACHECK(cudaGetDeviceProperties(&prop, dev));
    snprintf(devname, sizeof devname, "%s", prop.name);
    CUDACHECK(cudaSetDevice(dev));
    CUDACHECK(cudaStreamCreate(&stream));
    CUDACHECK(cudaEventCreate(&ev0));
    CUDACHECK(cudaEventCreate(&ev1));
    BLASCHECK(cublasCreate(&blas));
    BLASCHECK(cublasSetStream(blas, stream));
    DNNCHECK(cudnnCreate(&dnn));
    DNNCHECK(cudnnSetStream(dnn, stream));
    double peak = device_peak(devname, prec);

    if (strcmp(o.db, "none")) {
        if (sb_db_open(o.db, 0, &db, &err)) {
            fprintf(stderr, "perf/gpu: %s\n", err.msg);
            MPI_Finalize();
            return 1;
        }
        char cmd[2048] = "", devices[320], versions[256];
        for (int i = 0; i < argc; i++) {
            strncat(cmd, i ? " " : "", sizeof cmd - strlen(cmd) - 1);
            strncat(cmd, argv[i], sizeof cmd - strlen(cmd) - 1);
        }
        int rt = 0, drv = 0;
        cudaRuntimeGetVersion(&rt);
        cudaDriverGetVersion(&drv);
        snprintf(devices, sizeof devices, "1 x %s", devname);
        snprintf(versions, sizeof versions,
                 "cuda-runtime=%d driver=%d cudnn=%zu cublas=%d precision=%s peak_tflops=%g", rt,
                 drv, cudnnGetVersion(), CUBLAS_VERSION, prec, peak);
        sb_run_meta meta = {.backend = "cuda", .devices = devices, .versions = versions,
                            .command_line = cmd};
        if (sb_db_begin_run(db, &meta, &run_id, &err)) {
            fprintf(stderr, "perf/gpu: %s (figures not stored)\n", err.msg);
            sb_db_close(db);
            db = NULL;
        }
    }

    printf("# perf/gpu: %s, precision %s, peak %.1f TFLOP/s (dense, from perf/gpu.c's table)\n",
           devname, prec, peak);
    printf("# kernels: mean of %d calls after a warm-up, CUDA events; ratio = table / library\n",
           o.reps);
    printf("%-44s %9s %9s %8s %8s %6s\n", "kernel", "table_ms", "lib_ms", "table_TF", "lib_TF",
           "ratio");
    bench_gemm(o.reps, o.quick);
    bench_conv(o.reps, o.quick);

    counted = *gpu;
    counted_gemm.gemm_batched = c_gemm;
    counted.gemm = &counted_gemm;
    counted_conv = *gpu->conv;
    counted_conv.conv2d_forward = c_conv_f;
    counted_conv.conv2d_backward_data = c_conv_d;
    counted_conv.conv2d_backward_filter = c_conv_w;
    counted.conv = &counted_conv;
    printf("\n# steps at p = 1 (all-ones strategy): median of %d after %d warm-up; overhead = mean "
           "step - mean per-op sum\n",
           o.steps, o.warmup);
    printf("# TFLOP/s = GEMM + conv FLOP of a step / median step; MFU against %.1f TFLOP/s\n", peak);
    printf("%-12s %5s %10s %10s %10s %9s %7s %8s %6s %9s %9s\n", "model", "batch", "step_s",
           "min_s", "max_s", "overhd_s", "overhd", "TFLOP/s", "MFU", "peak_GB", "loss");
    char models[256];
    snprintf(models, sizeof models, "%s", o.models);
    for (char *sv, *name = strtok_r(models, ",", &sv); name; name = strtok_r(NULL, ",", &sv)) {
        int batch = !strcmp(name, "alexnet") ? 128 : !strcmp(name, "transformer") ? 64 : 0;
        if (!batch) {
            printf("%-12s failed: perf/gpu knows the paper batch of alexnet and transformer only\n",
                   name);
            failed = 1;
            continue;
        }
        bench_step(name, o.quick ? batch / 8 : batch, &o, peak);
    }

    if (db) {
        if (sb_db_end_run(db, run_id, &err))
            fprintf(stderr, "perf/gpu: %s\n", err.msg);
        sb_db_close(db);
        printf("# figures stored in %s (run %lld)\n", o.db, (long long)run_id);
    }
    cudnnDestroy(dnn);
    cublasDestroy(blas);
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
    cudaStreamDestroy(stream);
    sb_backend_finalize(gpu); /* NCCL communicators, before MPI_Finalize */
    MPI_Finalize();
    return failed ? 1 : 0;
}

#else /* no cuda backend in this build */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    fprintf(stderr, "perf/gpu: no GPU: this build has no cuda backend (SHARDBENCH_CUDA=OFF)\n");
    MPI_Finalize();
    return 77;
}

#endif
