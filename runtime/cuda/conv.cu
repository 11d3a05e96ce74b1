/* runtime/cuda/conv.cu: the cuda backend's convolutions (cuDNN 9 legacy
 * API): the descriptors of one problem, cuDNN's own algorithm search once
 * per shape (cached, fastest first, with fallbacks when the pool cannot
 * spare a workspace at run time), forward, data and filter gradients, and
 * the conv family's table (pooling from runtime/kernels/cuda/). Split from
 * backend_cuda.cu, which keeps start-up, the pool, GEMM and the
 * collectives: cuDNN's handle, descriptors and algorithm cache are used
 * here alone. */
#include <cudnn.h>

#include <stdio.h>
#include <string.h>

#include "cuda_host.h"
#include "cuda_internal.h"

#define FIND_WS_MAX ((size_t)1 << 30)

#define SBC_DNN(call)                                                                   \
    do {                                                                                \
        cudnnStatus_t s_ = (call);                                                      \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                 \
            sbc_die(__FILE__, __LINE__, "%s: %s", #call, cudnnGetErrorString(s_));      \
    } while (0)

static struct {
    sbc_conv_host host; /* what backend_cuda.cu lends (no call back into it: no file loop) */
    cudnnHandle_t dnn;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    sbc_algo_cache algos;
    long fallbacks; /* convolutions run with a fallback algorithm (workspace did not fit) */
} cv;

int sbc_conv_init(cudaStream_t stream, const sbc_conv_host *host, char *msg, size_t n)
{
    cv.host = *host;
    cudnnStatus_t ds = cudnnCreate(&cv.dnn);
    if (ds != CUDNN_STATUS_SUCCESS) {
        snprintf(msg, n, "cudnnCreate: %s", cudnnGetErrorString(ds));
        return -1;
    }
    SBC_DNN(cudnnSetStream(cv.dnn, stream));
    SBC_DNN(cudnnCreateTensorDescriptor(&cv.xd));
    SBC_DNN(cudnnCreateTensorDescriptor(&cv.yd));
    SBC_DNN(cudnnCreateFilterDescriptor(&cv.wd));
    SBC_DNN(cudnnCreateConvolutionDescriptor(&cv.cd));
    return 0;
}

void sbc_conv_stats(long *hits, long *misses, long *fallbacks)
{
    *hits = cv.algos.hits;
    *misses = cv.algos.misses;
    *fallbacks = cv.fallbacks;
}

/* ---- convolution (cuDNN legacy API) ------------------------------------------------------ */

typedef struct {
    int B, C, N, R, S, sh, sw, Ho, Wo;
    int dh, dw, G; /* the taps' spacing, filter groups (the filter is (N, C/G, R, S)) */
    sbc_window w;
} conv_shape;

static_assert(SBC_MATH_DEFAULT == (int)CUDNN_DEFAULT_MATH && SBC_MATH_TENSOR_OP == (int)CUDNN_TENSOR_OP_MATH &&
                  SBC_MATH_TENSOR_OP_CONVERSION == (int)CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
                  SBC_MATH_FMA == (int)CUDNN_FMA_MATH,
              "cuda_host.h's math types are cuDNN's");

/* FMA in fp32 (never tensor-op math), cuDNN's default otherwise */
static cudnnMathType_t conv_math(void) { return (cudnnMathType_t)sbc_conv_math_for(cv.host.precision()); }

/* Sets the four descriptors for a problem; x is (B, C, w.xh, w.xw). */
static void conv_descs(const conv_shape *s, cudnnMathType_t math)
{
    SBC_DNN(cudnnSetTensor4dDescriptor(cv.xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->B, s->C,
                                       s->w.xh, s->w.xw));
    SBC_DNN(cudnnSetTensor4dDescriptor(cv.yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->B, s->N,
                                       s->Ho, s->Wo));
    SBC_DNN(cudnnSetFilter4dDescriptor(cv.wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->N,
                                       s->C / s->G, s->R, s->S));
    SBC_DNN(cudnnSetConvolution2dDescriptor(cv.cd, s->w.ph, s->w.pw, s->sh, s->sw, s->dh, s->dw,
                                            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SBC_DNN(cudnnSetConvolutionGroupCount(cv.cd, s->G));
    SBC_DNN(cudnnSetConvolutionMathType(cv.cd, math));
    int n, c, h, w;
    SBC_DNN(cudnnGetConvolution2dForwardOutputDim(cv.cd, cv.xd, cv.wd, &n, &c, &h, &w));
    if (n != s->B || c != s->N || h != s->Ho || w != s->Wo)
        sbc_die(__FILE__, __LINE__,
                "conv geometry: cuDNN derives output %dx%dx%dx%d, the kernel wants %dx%dx%dx%d",
                n, c, h, w, s->B, s->N, s->Ho, s->Wo);
}

static sbc_conv_key conv_key(int kind, const conv_shape *s)
{
    return sbc_conv_key_make(kind, s->B, s->C, s->w.xh, s->w.xw, s->N, s->R, s->S, s->w.ph,
                             s->w.pw, s->sh, s->sw, s->Ho, s->Wo, s->dh, s->dw, s->G,
                             (int)cv.host.precision());
}

/* Workspace the search may use: what the pool can spare, at most 1 GiB. */
static size_t find_ws_bytes(void)
{
    size_t f = cv.host.pool_largest(1) / 2;
    return f > FIND_WS_MAX ? FIND_WS_MAX : f & ~(size_t)(POOL_ALIGN - 1);
}

/* cuDNN's own search (timed runs on scratch outputs) once per shape; the
 * algorithms that succeeded, fit the search's workspace and run in a math
 * type the precision allows (fp32: FMA only, sbc_conv_math_ok) are cached,
 * fastest first: the first becomes the choice, the next SBC_CONV_ALTS its
 * fallbacks when the pool cannot spare its workspace at run time. */
template <typename Perf>
static sbc_conv_algo pick(const Perf *perf, int n, size_t ws_max, const char *what)
{
    sbc_conv_algo a = {};
    int k = 0;
    for (int i = 0; i < n; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_max &&
            sbc_conv_math_ok(cv.host.precision(), (int)perf[i].mathType))
            sbc_conv_algo_add(&a, k++, (int)perf[i].algo, (int)perf[i].mathType, perf[i].memory);
    if (k)
        return a;
    sbc_die(__FILE__, __LINE__, "cuDNN found no %s algorithm for this shape within %zu MiB in %s math",
            what, ws_max >> 20, cv.host.precision() == SBC_FP32 ? "FMA (fp32)" : "non-converting");
}

/* What runs now: the cached choice, or the first fallback whose workspace
 * the pool can spare (sbc_conv_algo_fit); ends the job when none fits. */
static sbc_conv_algo conv_fit(const sbc_conv_algo *cached, const char *what)
{
    sbc_conv_algo run;
    size_t avail = cv.host.pool_largest(0);
    int i = sbc_conv_algo_fit(cached, avail, &run);
    if (i < 0)
        sbc_die(__FILE__, __LINE__,
                "cuDNN %s: none of the %d cached algorithms' workspaces fits the pool (%zu KiB free)",
                what, cached->nalt + 1, avail >> 10);
    if (i > 0)
        cv.fallbacks++;
    return run;
}

static sbc_conv_algo conv_algo(int kind, const conv_shape *s, const float *x, const float *w,
                               const float *dy)
{
    sbc_conv_key k = conv_key(kind, s);
    sbc_conv_algo a;
    if (sbc_algo_cache_get(&cv.algos, &k, &a))
        return a;
    size_t ws_max = find_ws_bytes();
    void *ws = ws_max ? sbk_scratch(ws_max, "cuDNN algorithm search") : NULL;
    int got = 0;
    if (kind == SBC_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        float *y = (float *)sbk_scratch((size_t)s->B * s->N * s->Ho * s->Wo * sizeof(float), "cuDNN search output");
        SBC_DNN(cudnnFindConvolutionForwardAlgorithmEx(cv.dnn, cv.xd, x, cv.wd, w, cv.cd, cv.yd, y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                                                       perf, ws, ws_max));
        sbk_scratch_free(y);
        a = pick(perf, got, ws_max, "forward");
    } else if (kind == SBC_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        float *dx = (float *)sbk_scratch((size_t)s->B * s->C * s->w.xh * s->w.xw * sizeof(float), "cuDNN search output");
        SBC_DNN(cudnnFindConvolutionBackwardDataAlgorithmEx(
            cv.dnn, cv.wd, w, cv.yd, dy, cv.cd, cv.xd, dx, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
            perf, ws, ws_max));
        sbk_scratch_free(dx);
        a = pick(perf, got, ws_max, "backward-data");
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        float *dw = (float *)sbk_scratch((size_t)s->N * (s->C / s->G) * s->R * s->S * sizeof(float),
                                         "cuDNN search output");
        SBC_DNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            cv.dnn, cv.xd, x, cv.yd, dy, cv.cd, cv.wd, dw, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
            &got, perf, ws, ws_max));
        sbk_scratch_free(dw);
        a = pick(perf, got, ws_max, "backward-filter");
    }
    if (ws)
        sbk_scratch_free(ws);
    if (sbc_algo_cache_put(&cv.algos, &k, &a))
        sbc_die(__FILE__, __LINE__, "out of host memory");
    return a;
}

static int conv_shape_of(conv_shape *s, int B, int C, int H_in, int W_in, int N, int R, int S,
                         int sh, int sw, int pt, int pl, int H_out, int W_out, int dh, int dw,
                         int G)
{
    *s = (conv_shape){B, C, N, R, S, sh, sw, H_out, W_out, dh, dw, G, {}};
    if (B <= 0 || C <= 0 || N <= 0)
        return -1;
    if (dh < 1 || dw < 1 || G < 1 || C % G || N % G)
        sbc_die(__FILE__, __LINE__,
                "conv geometry: dilation %dx%d, %d groups of %d and %d channels", dh, dw, G, C, N);
    /* the window's extent: dilated taps span dil * (R - 1) + 1 rows */
    return sbc_conv_window(H_in, W_in, dh * (R - 1) + 1, dw * (S - 1) + 1, sh, sw, pt, pl, H_out,
                           W_out, &s->w);
}

/* the input cuDNN reads: inp itself, or its staged window copy */
static const float *conv_input(const conv_shape *s, const float *inp, int H_in, int W_in,
                               float **staged)
{
    *staged = NULL;
    if (s->w.direct)
        return inp;
    *staged = (float *)sbk_scratch((size_t)s->B * s->C * s->w.xh * s->w.xw * sizeof(float),
                                   "staged conv input");
    sbk_stage_window(*staged, inp, s->B * s->C, H_in, W_in, s->w.xh, s->w.xw, s->w.oh, s->w.ow);
    return *staged;
}

static size_t cuda_conv2d_work_floats(int C, int R, int S, int N, int H_out, int W_out)
{
    (void)C, (void)R, (void)S, (void)N, (void)H_out, (void)W_out;
    return 0; /* cuDNN's workspace and staging come from the pool, sized per algorithm */
}

static void cuda_conv2d_forward(float *out, const float *inp, const float *w, const float *bias,
                                float *work, int B, int C, int H_in, int W_in, int N, int R,
                                int S, int sh, int sw, int pt, int pl, int H_out, int W_out,
                                int dil_h, int dil_w, int groups, int relu)
{
    (void)work;
    if (B <= 0 || N <= 0 || H_out <= 0 || W_out <= 0)
        return;
    conv_shape s;
    if (conv_shape_of(&s, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl, H_out, W_out, dil_h, dil_w,
                      groups)) {
        /* no input (C, H_in or W_in empty): the sum is empty */
        cv.host.zero(out, (size_t)B * N * H_out * W_out);
    } else {
        float *staged;
        const float *x = conv_input(&s, inp, H_in, W_in, &staged);
        conv_descs(&s, conv_math());
        sbc_conv_algo c = conv_algo(SBC_CONV_FWD, &s, x, w, NULL), a = conv_fit(&c, "forward");
        SBC_DNN(cudnnSetConvolutionMathType(cv.cd, (cudnnMathType_t)a.math));
        void *ws = a.workspace ? sbk_scratch(a.workspace, "cuDNN workspace") : NULL;
        float one = 1.0f, zero = 0.0f;
        SBC_DNN(cudnnConvolutionForward(cv.dnn, &one, cv.xd, x, cv.wd, w, cv.cd,
                                        (cudnnConvolutionFwdAlgo_t)a.algo, ws, a.workspace, &zero,
                                        cv.yd, out));
        if (ws)
            sbk_scratch_free(ws);
        if (staged)
            sbk_scratch_free(staged);
    }
    if (bias || relu)
        sbk_bias_relu(out, bias, B, N, H_out * W_out, relu);
}

/* dout masked by the fused relu (a pool buffer), or dout itself */
static const float *masked_dout(const float *dout, const float *out, size_t n, float **tmp)
{
    *tmp = NULL;
    if (!out)
        return dout;
    *tmp = (float *)sbk_scratch(n * sizeof(float), "relu-masked gradient");
    sbk_relu_mask(*tmp, dout, out, n);
    return *tmp;
}

static void cuda_conv2d_backward_data(float *dinp, float *work, const float *dout,
                                      const float *out, const float *w, int B, int C, int H_in,
                                      int W_in, int N, int R, int S, int sh, int sw, int pt,
                                      int pl, int H_out, int W_out, int dil_h, int dil_w,
                                      int groups)
{
    (void)work;
    conv_shape s;
    if (!dinp || B <= 0 || N <= 0 || H_out <= 0 || W_out <= 0
        || conv_shape_of(&s, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl, H_out, W_out, dil_h, dil_w,
                         groups))
        return;
    float *mask;
    const float *dy = masked_dout(dout, out, (size_t)B * N * H_out * W_out, &mask);
    conv_descs(&s, conv_math());
    sbc_conv_algo c = conv_algo(SBC_CONV_BWD_DATA, &s, NULL, w, dy), a = conv_fit(&c, "backward-data");
    SBC_DNN(cudnnSetConvolutionMathType(cv.cd, (cudnnMathType_t)a.math));
    void *ws = a.workspace ? sbk_scratch(a.workspace, "cuDNN workspace") : NULL;
    float one = 1.0f, zero = 0.0f;
    if (s.w.direct) {
        SBC_DNN(cudnnConvolutionBackwardData(cv.dnn, &one, cv.wd, w, cv.yd, dy, cv.cd,
                                             (cudnnConvolutionBwdDataAlgo_t)a.algo, ws,
                                             a.workspace, &one, cv.xd, dinp));
    } else {
        float *dx = (float *)sbk_scratch((size_t)B * C * s.w.xh * s.w.xw * sizeof(float),
                                         "staged conv input gradient");
        SBC_DNN(cudnnConvolutionBackwardData(cv.dnn, &one, cv.wd, w, cv.yd, dy, cv.cd,
                                             (cudnnConvolutionBwdDataAlgo_t)a.algo, ws,
                                             a.workspace, &zero, cv.xd, dx));
        sbk_unstage_add(dinp, dx, B * C, H_in, W_in, s.w.xh, s.w.xw, s.w.oh, s.w.ow);
        sbk_scratch_free(dx);
    }
    if (ws)
        sbk_scratch_free(ws);
    if (mask)
        sbk_scratch_free(mask);
}

static void cuda_conv2d_backward_filter(float *dw, float *dbias, float *work, const float *dout,
                                        const float *out, const float *inp, int B, int C,
                                        int H_in, int W_in, int N, int R, int S, int sh, int sw,
                                        int pt, int pl, int H_out, int W_out, int dil_h,
                                        int dil_w, int groups)
{
    (void)work;
    if (B <= 0 || N <= 0 || H_out <= 0 || W_out <= 0)
        return;
    float *mask;
    const float *dy = masked_dout(dout, out, (size_t)B * N * H_out * W_out, &mask);
    conv_shape s;
    if (dw && !conv_shape_of(&s, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl, H_out, W_out, dil_h,
                             dil_w, groups)) {
        float *staged;
        const float *x = conv_input(&s, inp, H_in, W_in, &staged);
        conv_descs(&s, conv_math());
        sbc_conv_algo c = conv_algo(SBC_CONV_BWD_FILTER, &s, x, NULL, dy),
                      a = conv_fit(&c, "backward-filter");
        SBC_DNN(cudnnSetConvolutionMathType(cv.cd, (cudnnMathType_t)a.math));
        void *ws = a.workspace ? sbk_scratch(a.workspace, "cuDNN workspace") : NULL;
        float one = 1.0f;
        SBC_DNN(cudnnConvolutionBackwardFilter(cv.dnn, &one, cv.xd, x, cv.yd, dy, cv.cd,
                                               (cudnnConvolutionBwdFilterAlgo_t)a.algo, ws,
                                               a.workspace, &one, cv.wd, dw));
        if (ws)
            sbk_scratch_free(ws);
        if (staged)
            sbk_scratch_free(staged);
    }
    if (dbias)
        sbk_bias_grad(dbias, dy, B, N, H_out * W_out);
    if (mask)
        sbk_scratch_free(mask);
}

const sb_conv_kernels sbc_conv = {
    .conv2d_work_floats = cuda_conv2d_work_floats,
    .conv2d_forward = cuda_conv2d_forward,
    .conv2d_backward_data = cuda_conv2d_backward_data,
    .conv2d_backward_filter = cuda_conv2d_backward_filter,
    .maxpool2d_forward = sbk_maxpool2d_forward,
    .maxpool2d_backward = sbk_maxpool2d_backward,
    .avgpool2d_forward = sbk_avgpool2d_forward,
    .avgpool2d_backward = sbk_avgpool2d_backward,
};
