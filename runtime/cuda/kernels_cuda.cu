/* runtime/cuda/kernels_cuda.cu: the cuda backend's own kernels, where no
 * library serves the kernels.h semantics: pooling (local, possibly
 * negative padding and the reference's first-maximum rule), embedding
 * gather / scatter-add, the LSTM cell's pointwise half, the split norm and
 * softmax statistics, softmax cross-entropy, elementwise add/relu,
 * reduce-mean, box copy, permute, SGD, and the conv helpers (staging,
 * bias, relu mask). Each has its host reference in runtime/k_*.c, and
 * tests/cuda_check.c holds one to the other. Sums accumulate in double,
 * like the references. Everything runs on the backend's one stream. */
#include <cuda_bf16.h>
#include <float.h>
#include <math.h>

#include "cuda_internal.h"

#define TPB 256

static unsigned grid_for(int64_t n)
{
    int64_t b = (n + TPB - 1) / TPB;
    if (b > 65535LL * 16)
        b = 65535LL * 16; /* grid-stride loops cover the rest */
    return (unsigned)(b < 1 ? 1 : b);
}

#define GRID_STRIDE(i, n)                                                                 \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n);  \
         i += (int64_t)gridDim.x * blockDim.x)

#define LAUNCH(kernel, n, ...)                                                           \
    do {                                                                                 \
        if ((int64_t)(n) > 0) {                                                          \
            kernel<<<grid_for((int64_t)(n)), TPB, 0, sbc_stream()>>>(__VA_ARGS__);       \
            SBC_LAUNCHED();                                                              \
        }                                                                                \
    } while (0)

/* ---- block and warp reductions ---- */

__device__ static double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ static float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

/* sum over the block (blockDim.x a multiple of 32, <= 1024); valid in thread 0 */
__device__ static double block_sum(double v)
{
    __shared__ double part[32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        part[wid] = v;
    __syncthreads();
    v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0;
    if (wid == 0)
        v = warp_sum(v);
    return v;
}

/* ---- small helpers ---- */

__global__ static void fill_k(float *p, int64_t n, float v)
{
    GRID_STRIDE(i, n) p[i] = v;
}

void sbk_fill(float *p, size_t n, float v) { LAUNCH(fill_k, n, p, (int64_t)n, v); }

__global__ static void scale_matrix_k(float *C, int M, int N, int ldc, ptrdiff_t sc, int batch,
                                      float beta)
{
    int64_t total = (int64_t)batch * M * N;
    GRID_STRIDE(i, total)
    {
        int64_t b = i / ((int64_t)M * N), r = (i / N) % M, c = i % N;
        float *p = C + b * sc + r * ldc + c;
        *p = beta == 0.0f ? 0.0f : beta * *p;
    }
}

void sbk_scale_matrix(float *C, int M, int N, int ldc, ptrdiff_t stride_c, int batch, float beta)
{
    LAUNCH(scale_matrix_k, (int64_t)batch * M * N, C, M, N, ldc, stride_c, batch, beta);
}

__global__ static void to_bf16_k(__nv_bfloat16 *d, const float *s, int64_t n)
{
    GRID_STRIDE(i, n) d[i] = __float2bfloat16(s[i]);
}

void sbk_to_bf16(void *dst, const float *src, size_t n)
{
    LAUNCH(to_bf16_k, n, (__nv_bfloat16 *)dst, src, (int64_t)n);
}

__global__ static void relu_mask_k(float *d, const float *g, const float *o, int64_t n)
{
    GRID_STRIDE(i, n) d[i] = o[i] > 0.0f ? g[i] : 0.0f;
}

void sbk_relu_mask(float *dst, const float *dout, const float *out, size_t n)
{
    LAUNCH(relu_mask_k, n, dst, dout, out, (int64_t)n);
}

__global__ static void bias_relu_k(float *out, const float *bias, int N, int HW, int64_t n,
                                   int relu)
{
    GRID_STRIDE(i, n)
    {
        float v = out[i] + (bias ? bias[(i / HW) % N] : 0.0f);
        out[i] = (relu && v < 0.0f) ? 0.0f : v;
    }
}

void sbk_bias_relu(float *out, const float *bias, int B, int N, int HW, int relu)
{
    LAUNCH(bias_relu_k, (int64_t)B * N * HW, out, bias, N, HW, (int64_t)B * N * HW, relu);
}

/* one block per channel n: dbias[n] += sum_{b,i} dy[b,n,i] */
__global__ static void bias_grad_k(float *dbias, const float *dy, int B, int N, int HW)
{
    int n = blockIdx.x;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < (int64_t)B * HW; j += blockDim.x) {
        int64_t b = j / HW, i = j % HW;
        s += dy[(b * N + n) * HW + i];
    }
    s = block_sum(s);
    if (threadIdx.x == 0)
        dbias[n] += (float)s;
}

void sbk_bias_grad(float *dbias, const float *dy, int B, int N, int HW)
{
    if (N <= 0)
        return;
    bias_grad_k<<<N, TPB, 0, sbc_stream()>>>(dbias, dy, B, N, HW);
    SBC_LAUNCHED();
}

/* X' (BC, xh, xw): X'[y][x] = inp[y + oh][x + ow], 0 outside inp */
__global__ static void stage_k(float *dst, const float *inp, int H, int W, int xh, int xw, int oh,
                               int ow, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t p = i / ((int64_t)xh * xw);
        int y = (int)((i / xw) % xh) + oh, x = (int)(i % xw) + ow;
        dst[i] = (y >= 0 && y < H && x >= 0 && x < W) ? inp[(p * H + y) * W + x] : 0.0f;
    }
}

void sbk_stage_window(float *dst, const float *inp, int BC, int H_in, int W_in, int xh, int xw,
                      int oh, int ow)
{
    int64_t n = (int64_t)BC * xh * xw;
    LAUNCH(stage_k, n, dst, inp, H_in, W_in, xh, xw, oh, ow, n);
}

/* dinp[y][x] += X'[y - oh][x - ow] where inside X' */
__global__ static void unstage_add_k(float *dinp, const float *src, int H, int W, int xh, int xw,
                                     int oh, int ow, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t p = i / ((int64_t)H * W);
        int y = (int)((i / W) % H) - oh, x = (int)(i % W) - ow;
        if (y >= 0 && y < xh && x >= 0 && x < xw)
            dinp[i] += src[(p * xh + y) * xw + x];
    }
}

void sbk_unstage_add(float *dinp, const float *src, int BC, int H_in, int W_in, int xh, int xw,
                     int oh, int ow)
{
    int64_t n = (int64_t)BC * H_in * W_in;
    LAUNCH(unstage_add_k, n, dinp, src, H_in, W_in, xh, xw, oh, ow, n);
}

/* ---- pooling ---- */

/* first maximum of the window at (y0, x0) of one plane; -1 if empty */
__device__ static int64_t window_argmax(const float *plane, int H, int W, int R, int S, int y0,
                                        int x0)
{
    int64_t arg = -1;
    float best = -FLT_MAX;
    for (int r = 0; r < R; r++) {
        int iy = y0 + r;
        if (iy < 0 || iy >= H)
            continue;
        for (int s = 0; s < S; s++) {
            int ix = x0 + s;
            if (ix < 0 || ix >= W)
                continue;
            int64_t at = (int64_t)iy * W + ix;
            if (arg < 0 || plane[at] > best) {
                best = plane[at];
                arg = at;
            }
        }
    }
    return arg;
}

__global__ static void maxpool_fwd_k(float *out, const float *inp, int H, int W, int R, int S,
                                     int sh, int sw, int pt, int pl, int Ho, int Wo, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t p = i / ((int64_t)Ho * Wo);
        int y = (int)((i / Wo) % Ho), x = (int)(i % Wo);
        const float *ip = inp + p * H * W;
        int64_t a = window_argmax(ip, H, W, R, S, y * sh - pt, x * sw - pl);
        out[i] = a < 0 ? 0.0f : ip[a];
    }
}

void sbk_maxpool2d_forward(float *out, const float *inp, int B, int C, int H_in, int W_in, int R,
                           int S, int sh, int sw, int pt, int pl, int H_out, int W_out)
{
    int64_t n = (int64_t)B * C * H_out * W_out;
    LAUNCH(maxpool_fwd_k, n, out, inp, H_in, W_in, R, S, sh, sw, pt, pl, H_out, W_out, n);
}

__global__ static void maxpool_bwd_k(float *dinp, const float *dout, const float *inp, int H,
                                     int W, int R, int S, int sh, int sw, int pt, int pl, int Ho,
                                     int Wo, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t p = i / ((int64_t)Ho * Wo);
        int y = (int)((i / Wo) % Ho), x = (int)(i % Wo);
        int64_t a = window_argmax(inp + p * H * W, H, W, R, S, y * sh - pt, x * sw - pl);
        if (a >= 0)
            atomicAdd(dinp + p * H * W + a, dout[i]);
    }
}

void sbk_maxpool2d_backward(float *dinp, const float *dout, const float *inp, int B, int C,
                            int H_in, int W_in, int R, int S, int sh, int sw, int pt, int pl,
                            int H_out, int W_out)
{
    int64_t n = (int64_t)B * C * H_out * W_out;
    LAUNCH(maxpool_bwd_k, n, dinp, dout, inp, H_in, W_in, R, S, sh, sw, pt, pl, H_out, W_out, n);
}

__device__ static void clamp_window(int y0, int R, int H, int *lo, int *hi)
{
    *lo = y0 < 0 ? 0 : y0;
    *hi = y0 + R > H ? H : y0 + R;
    if (*hi < *lo)
        *hi = *lo;
}

__global__ static void avgpool_fwd_k(float *out, const float *inp, int H, int W, int R, int S,
                                     int sh, int sw, int pt, int pl, int Ho, int Wo, int cp,
                                     int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t p = i / ((int64_t)Ho * Wo);
        int y = (int)((i / Wo) % Ho), x = (int)(i % Wo);
        const float *ip = inp + p * H * W;
        int ylo, yhi, xlo, xhi;
        clamp_window(y * sh - pt, R, H, &ylo, &yhi);
        clamp_window(x * sw - pl, S, W, &xlo, &xhi);
        float acc = 0.0f;
        for (int iy = ylo; iy < yhi; iy++)
            for (int ix = xlo; ix < xhi; ix++)
                acc += ip[(int64_t)iy * W + ix];
        int cnt = cp ? R * S : (yhi - ylo) * (xhi - xlo);
        out[i] = cnt > 0 ? acc / (float)cnt : 0.0f;
    }
}

void sbk_avgpool2d_forward(float *out, const float *inp, int B, int C, int H_in, int W_in, int R,
                           int S, int sh, int sw, int pt, int pl, int H_out, int W_out,
                           int count_pad)
{
    int64_t n = (int64_t)B * C * H_out * W_out;
    LAUNCH(avgpool_fwd_k, n, out, inp, H_in, W_in, R, S, sh, sw, pt, pl, H_out, W_out, count_pad,
           n);
}

__global__ static void avgpool_bwd_k(float *dinp, const float *dout, int H, int W, int R, int S,
                                     int sh, int sw, int pt, int pl, int Ho, int Wo, int cp,
                                     int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t p = i / ((int64_t)Ho * Wo);
        int y = (int)((i / Wo) % Ho), x = (int)(i % Wo);
        int ylo, yhi, xlo, xhi;
        clamp_window(y * sh - pt, R, H, &ylo, &yhi);
        clamp_window(x * sw - pl, S, W, &xlo, &xhi);
        int cnt = cp ? R * S : (yhi - ylo) * (xhi - xlo);
        if (cnt <= 0)
            continue;
        float g = dout[i] / (float)cnt;
        float *gp = dinp + p * H * W;
        for (int iy = ylo; iy < yhi; iy++)
            for (int ix = xlo; ix < xhi; ix++)
                atomicAdd(gp + (int64_t)iy * W + ix, g);
    }
}

void sbk_avgpool2d_backward(float *dinp, const float *dout, int B, int C, int H_in, int W_in,
                            int R, int S, int sh, int sw, int pt, int pl, int H_out, int W_out,
                            int count_pad)
{
    int64_t n = (int64_t)B * C * H_out * W_out;
    LAUNCH(avgpool_bwd_k, n, dinp, dout, H_in, W_in, R, S, sh, sw, pt, pl, H_out, W_out,
           count_pad, n);
}

/* ---- embedding ---- */

__global__ static void emb_fwd_k(float *out, const int32_t *idx, const float *table, int D, int v0,
                                 int v1, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t r = i / D, d = i % D;
        int32_t v = idx[r];
        out[i] = (v >= v0 && v < v1) ? table[(int64_t)(v - v0) * D + d] : 0.0f;
    }
}

void sbk_embedding_forward(float *out, const int32_t *idx, const float *table, int N, int D,
                           int v0, int v1)
{
    int64_t n = (int64_t)N * D;
    LAUNCH(emb_fwd_k, n, out, idx, table, D, v0, v1, n);
}

__global__ static void emb_bwd_k(float *dtable, const float *dout, const int32_t *idx, int D,
                                 int v0, int v1, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t r = i / D, d = i % D;
        int32_t v = idx[r];
        if (v >= v0 && v < v1)
            atomicAdd(dtable + (int64_t)(v - v0) * D + d, dout[i]);
    }
}

void sbk_embedding_backward(float *dtable, const float *dout, const int32_t *idx, int N, int D,
                            int v0, int v1)
{
    int64_t n = (int64_t)N * D;
    LAUNCH(emb_bwd_k, n, dtable, dout, idx, D, v0, v1, n);
}

/* ---- LSTM pointwise ---- */

__device__ static float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ static void lstm_fwd_k(float *h, float *c, float *gates, const float *preact,
                                  const float *c_prev, int H, int64_t n)
{
    GRID_STRIDE(k, n)
    {
        int64_t b = k / H, j = k % H;
        const float *p = preact + b * 4 * H;
        float *g4 = gates + b * 4 * H;
        float i = sigm(p[j]), f = sigm(p[H + j]), g = tanhf(p[2 * H + j]), o = sigm(p[3 * H + j]);
        float cp = c_prev ? c_prev[k] : 0.0f;
        float cn = f * cp + i * g;
        g4[j] = i;
        g4[H + j] = f;
        g4[2 * H + j] = g;
        g4[3 * H + j] = o;
        c[k] = cn;
        h[k] = o * tanhf(cn);
    }
}

void sbk_lstm_pointwise_forward(float *h, float *c, float *gates, const float *preact,
                                const float *c_prev, int B, int H)
{
    int64_t n = (int64_t)B * H;
    LAUNCH(lstm_fwd_k, n, h, c, gates, preact, c_prev, H, n);
}

__global__ static void lstm_bwd_k(float *dpreact, float *dc_prev, const float *dh, const float *dc,
                                  const float *gates, const float *c, const float *c_prev, int H,
                                  int64_t n)
{
    GRID_STRIDE(k, n)
    {
        int64_t b = k / H, j = k % H;
        const float *g4 = gates + b * 4 * H;
        float *dp = dpreact + b * 4 * H;
        float i = g4[j], f = g4[H + j], g = g4[2 * H + j], o = g4[3 * H + j];
        float tc = tanhf(c[k]);
        float cp = c_prev ? c_prev[k] : 0.0f;
        float dcell = (dc ? dc[k] : 0.0f) + dh[k] * o * (1.0f - tc * tc);
        dp[j] = dcell * g * i * (1.0f - i);
        dp[H + j] = dcell * cp * f * (1.0f - f);
        dp[2 * H + j] = dcell * i * (1.0f - g * g);
        dp[3 * H + j] = dh[k] * tc * o * (1.0f - o);
        if (dc_prev)
            dc_prev[k] += dcell * f;
    }
}

void sbk_lstm_pointwise_backward(float *dpreact, float *dc_prev, const float *dh,
                                 const float *dc, const float *gates, const float *c,
                                 const float *c_prev, int B, int H)
{
    int64_t n = (int64_t)B * H;
    LAUNCH(lstm_bwd_k, n, dpreact, dc_prev, dh, dc, gates, c, c_prev, H, n);
}

/* ---- norm statistics ---- */

__global__ static void finish_stats_k(float *mean, float *rstd, const float *sum,
                                      const float *sumsq, int n, long count, float eps)
{
    GRID_STRIDE(i, n)
    {
        double m = (double)sum[i] / (double)count;
        double var = (double)sumsq[i] / (double)count - m * m;
        if (var < 0.0)
            var = 0.0;
        mean[i] = (float)m;
        rstd[i] = (float)(1.0 / sqrt(var + (double)eps));
    }
}

void sbk_norm_finish_stats(float *mean, float *rstd, const float *sum, const float *sumsq, int n,
                           long count, float eps)
{
    LAUNCH(finish_stats_k, n, mean, rstd, sum, sumsq, n, count, eps);
}

__global__ static void norm_mean_k(float *mean, const float *sum, int n, long count)
{
    GRID_STRIDE(i, n) mean[i] = (float)((double)sum[i] / (double)count);
}

void sbk_norm_mean(float *mean, const float *sum, int n, long count)
{
    LAUNCH(norm_mean_k, n, mean, sum, n, count);
}

__global__ static void norm_rstd_k(float *rstd, const float *sq, int n, long count, float eps)
{
    GRID_STRIDE(i, n) rstd[i] = (float)(1.0 / sqrt((double)sq[i] / (double)count + (double)eps));
}

void sbk_norm_rstd(float *rstd, const float *sq, int n, long count, float eps)
{
    LAUNCH(norm_rstd_k, n, rstd, sq, n, count, eps);
}

/* layer norm: one block per row m */
__global__ static void ln_stats_k(float *sum, float *sumsq, const float *inp, int D)
{
    const float *x = inp + (int64_t)blockIdx.x * D;
    double s = 0.0, q = 0.0;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        s += x[d];
        q += (double)x[d] * x[d];
    }
    s = block_sum(s);
    q = block_sum(q);
    if (threadIdx.x == 0) {
        sum[blockIdx.x] = (float)s;
        sumsq[blockIdx.x] = (float)q;
    }
}

#define ROWS_LAUNCH(kernel, rows, ...)                                                  \
    do {                                                                                \
        if ((rows) > 0) {                                                               \
            kernel<<<(unsigned)(rows), TPB, 0, sbc_stream()>>>(__VA_ARGS__);            \
            SBC_LAUNCHED();                                                             \
        }                                                                               \
    } while (0)

void sbk_layernorm_stats(float *sum, float *sumsq, const float *inp, int M, int D)
{
    ROWS_LAUNCH(ln_stats_k, M, sum, sumsq, inp, D);
}

__global__ static void ln_centered_k(float *sq, const float *inp, const float *mean, int D)
{
    const float *x = inp + (int64_t)blockIdx.x * D;
    double mu = mean[blockIdx.x], q = 0.0;
    for (int d = threadIdx.x; d < D; d += blockDim.x)
        q += (x[d] - mu) * (x[d] - mu);
    q = block_sum(q);
    if (threadIdx.x == 0)
        sq[blockIdx.x] = (float)q;
}

void sbk_layernorm_centered(float *sq, const float *inp, const float *mean, int M, int D)
{
    ROWS_LAUNCH(ln_centered_k, M, sq, inp, mean, D);
}

__global__ static void ln_apply_k(float *out, const float *inp, const float *mean,
                                  const float *rstd, const float *gamma, const float *beta, int D,
                                  int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t m = i / D, d = i % D;
        float v = (inp[i] - mean[m]) * rstd[m];
        out[i] = v * (gamma ? gamma[d] : 1.0f) + (beta ? beta[d] : 0.0f);
    }
}

void sbk_layernorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
                         const float *gamma, const float *beta, int M, int D)
{
    int64_t n = (int64_t)M * D;
    LAUNCH(ln_apply_k, n, out, inp, mean, rstd, gamma, beta, D, n);
}

__global__ static void ln_bwd_stats_k(float *s1, float *s2, const float *dout, const float *inp,
                                      const float *mean, const float *rstd, const float *gamma,
                                      int D)
{
    int64_t m = blockIdx.x;
    const float *x = inp + m * D, *dy = dout + m * D;
    double a = 0.0, b = 0.0;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float xhat = (x[d] - mean[m]) * rstd[m];
        float g = dy[d] * (gamma ? gamma[d] : 1.0f);
        a += g;
        b += (double)g * xhat;
    }
    a = block_sum(a);
    b = block_sum(b);
    if (threadIdx.x == 0) {
        s1[m] = (float)a;
        s2[m] = (float)b;
    }
}

void sbk_layernorm_backward_stats(float *s1, float *s2, const float *dout, const float *inp,
                                  const float *mean, const float *rstd, const float *gamma, int M,
                                  int D)
{
    ROWS_LAUNCH(ln_bwd_stats_k, M, s1, s2, dout, inp, mean, rstd, gamma, D);
}

__global__ static void ln_bwd_dx_k(float *dinp, const float *dout, const float *inp,
                                   const float *mean, const float *rstd, const float *gamma,
                                   const float *s1, const float *s2, int D, int D_total, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t m = i / D, d = i % D;
        float rs = rstd[m];
        float a = s1[m] / (float)D_total, b = s2[m] / (float)D_total;
        float xhat = (inp[i] - mean[m]) * rs;
        float g = dout[i] * (gamma ? gamma[d] : 1.0f);
        dinp[i] += rs * (g - a - xhat * b);
    }
}

/* dgamma[d] += sum_m dout*xhat, dbeta[d] += sum_m dout: a block holds 32
 * columns (coalesced reads along a row) and 8 row lanes, summed in shared
 * memory at the end */
__global__ static void ln_bwd_dgb_k(float *dgamma, float *dbeta, const float *dout,
                                    const float *inp, const float *mean, const float *rstd, int M,
                                    int D)
{
    __shared__ double sg[8][33], sb[8][33];
    int64_t d = (int64_t)blockIdx.x * 32 + threadIdx.x;
    double gg = 0.0, gb = 0.0;
    if (d < D)
        for (int64_t m = threadIdx.y; m < M; m += 8) {
            int64_t i = m * D + d;
            float xhat = (inp[i] - mean[m]) * rstd[m];
            gg += dout[i] * xhat;
            gb += dout[i];
        }
    sg[threadIdx.y][threadIdx.x] = gg;
    sb[threadIdx.y][threadIdx.x] = gb;
    __syncthreads();
    if (threadIdx.y == 0 && d < D) {
        for (int r = 1; r < 8; r++) {
            gg += sg[r][threadIdx.x];
            gb += sb[r][threadIdx.x];
        }
        if (dgamma)
            dgamma[d] += (float)gg;
        if (dbeta)
            dbeta[d] += (float)gb;
    }
}

void sbk_layernorm_backward_apply(float *dinp, float *dgamma, float *dbeta, const float *dout,
                                  const float *inp, const float *mean, const float *rstd,
                                  const float *gamma, const float *s1, const float *s2, int M,
                                  int D, int D_total)
{
    int64_t n = (int64_t)M * D;
    if (dinp)
        LAUNCH(ln_bwd_dx_k, n, dinp, dout, inp, mean, rstd, gamma, s1, s2, D, D_total, n);
    if ((dgamma || dbeta) && M > 0 && D > 0) {
        ln_bwd_dgb_k<<<(unsigned)((D + 31) / 32), dim3(32, 8), 0, sbc_stream()>>>(
            dgamma, dbeta, dout, inp, mean, rstd, M, D);
        SBC_LAUNCHED();
    }
}

/* batch norm: one block per channel c over (B, HW) */
__global__ static void bn_stats_k(float *sum, float *sumsq, const float *inp, int B, int C, int HW)
{
    int c = blockIdx.x;
    double s = 0.0, q = 0.0;
    for (int64_t j = threadIdx.x; j < (int64_t)B * HW; j += blockDim.x) {
        float x = inp[((j / HW) * C + c) * HW + j % HW];
        s += x;
        q += (double)x * x;
    }
    s = block_sum(s);
    q = block_sum(q);
    if (threadIdx.x == 0) {
        sum[c] = (float)s;
        sumsq[c] = (float)q;
    }
}

void sbk_batchnorm_stats(float *sum, float *sumsq, const float *inp, int B, int C, int HW)
{
    ROWS_LAUNCH(bn_stats_k, C, sum, sumsq, inp, B, C, HW);
}

__global__ static void bn_centered_k(float *sq, const float *inp, const float *mean, int B, int C,
                                     int HW)
{
    int c = blockIdx.x;
    double mu = mean[c], q = 0.0;
    for (int64_t j = threadIdx.x; j < (int64_t)B * HW; j += blockDim.x) {
        float x = inp[((j / HW) * C + c) * HW + j % HW];
        q += (x - mu) * (x - mu);
    }
    q = block_sum(q);
    if (threadIdx.x == 0)
        sq[c] = (float)q;
}

void sbk_batchnorm_centered(float *sq, const float *inp, const float *mean, int B, int C, int HW)
{
    ROWS_LAUNCH(bn_centered_k, C, sq, inp, mean, B, C, HW);
}

__global__ static void bn_apply_k(float *out, const float *inp, const float *mean,
                                  const float *rstd, const float *gamma, const float *beta, int C,
                                  int HW, int relu, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int c = (int)((i / HW) % C);
        float scale = rstd[c] * (gamma ? gamma[c] : 1.0f);
        float shift = (beta ? beta[c] : 0.0f) - mean[c] * scale;
        float v = inp[i] * scale + shift;
        out[i] = (relu && v < 0.0f) ? 0.0f : v;
    }
}

void sbk_batchnorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
                         const float *gamma, const float *beta, int B, int C, int HW, int relu)
{
    int64_t n = (int64_t)B * C * HW;
    LAUNCH(bn_apply_k, n, out, inp, mean, rstd, gamma, beta, C, HW, relu, n);
}

__global__ static void bn_bwd_stats_k(float *sum_dy, float *sum_dy_xhat, const float *dout,
                                      const float *out, const float *inp, const float *mean,
                                      const float *rstd, int B, int C, int HW)
{
    int c = blockIdx.x;
    double a = 0.0, q = 0.0;
    for (int64_t j = threadIdx.x; j < (int64_t)B * HW; j += blockDim.x) {
        int64_t i = ((j / HW) * C + c) * HW + j % HW;
        float g = (out && !(out[i] > 0.0f)) ? 0.0f : dout[i];
        a += g;
        q += (double)g * ((inp[i] - mean[c]) * rstd[c]);
    }
    a = block_sum(a);
    q = block_sum(q);
    if (threadIdx.x == 0) {
        sum_dy[c] = (float)a;
        sum_dy_xhat[c] = (float)q;
    }
}

void sbk_batchnorm_backward_stats(float *sum_dy, float *sum_dy_xhat, const float *dout,
                                  const float *out, const float *inp, const float *mean,
                                  const float *rstd, int B, int C, int HW)
{
    ROWS_LAUNCH(bn_bwd_stats_k, C, sum_dy, sum_dy_xhat, dout, out, inp, mean, rstd, B, C, HW);
}

__global__ static void bn_bwd_apply_k(float *dinp, const float *dout, const float *out,
                                      const float *inp, const float *mean, const float *rstd,
                                      const float *gamma, const float *sum_dy,
                                      const float *sum_dy_xhat, int C, int HW, long count,
                                      int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int c = (int)((i / HW) % C);
        float k = rstd[c] * (gamma ? gamma[c] : 1.0f);
        float a = sum_dy[c] / (float)count, q = sum_dy_xhat[c] / (float)count;
        float xhat = (inp[i] - mean[c]) * rstd[c];
        float g = (out && !(out[i] > 0.0f)) ? 0.0f : dout[i];
        dinp[i] += k * (g - a - xhat * q);
    }
}

void sbk_batchnorm_backward_apply(float *dinp, const float *dout, const float *out,
                                  const float *inp, const float *mean, const float *rstd,
                                  const float *gamma, const float *sum_dy,
                                  const float *sum_dy_xhat, int B, int C, int HW, long count)
{
    int64_t n = (int64_t)B * C * HW;
    LAUNCH(bn_bwd_apply_k, n, dinp, dout, out, inp, mean, rstd, gamma, sum_dy, sum_dy_xhat, C, HW,
           count, n);
}

/* ---- softmax over the middle axis of (outer, A, inner): one warp per fiber ---- */

#define FIBER_WARPS (TPB / 32)

#define FIBER_BEGIN(outer, inner)                                                        \
    int64_t fiber = (int64_t)blockIdx.x * FIBER_WARPS + (threadIdx.x >> 5);              \
    int lane = threadIdx.x & 31;                                                         \
    if (fiber >= (int64_t)(outer) * (inner))                                             \
        return;                                                                          \
    int64_t base = (fiber / (inner)) * (int64_t)A * (inner) + fiber % (inner);           \
    int64_t step = (inner);

static void fiber_launch_dims(int64_t fibers, unsigned *blocks)
{
    *blocks = (unsigned)((fibers + FIBER_WARPS - 1) / FIBER_WARPS);
}

#define FIBER_LAUNCH(kernel, outer, inner, ...)                                          \
    do {                                                                                 \
        int64_t nf_ = (int64_t)(outer) * (inner);                                        \
        if (nf_ > 0) {                                                                   \
            unsigned nb_;                                                                \
            fiber_launch_dims(nf_, &nb_);                                                \
            kernel<<<nb_, TPB, 0, sbc_stream()>>>(__VA_ARGS__);                          \
            SBC_LAUNCHED();                                                              \
        }                                                                                \
    } while (0)

__global__ static void sm_max_k(float *mx, const float *inp, int outer, int A, int inner)
{
    FIBER_BEGIN(outer, inner)
    float m = -FLT_MAX;
    for (int a = lane; a < A; a += 32)
        m = fmaxf(m, inp[base + a * step]);
    m = warp_max(m);
    if (lane == 0)
        mx[fiber] = m;
}

void sbk_softmax_partial_max(float *mx, const float *inp, int outer, int A, int inner)
{
    FIBER_LAUNCH(sm_max_k, outer, inner, mx, inp, outer, A, inner);
}

__global__ static void sm_sumexp_k(float *se, const float *inp, const float *mx, int outer, int A,
                                   int inner)
{
    FIBER_BEGIN(outer, inner)
    double s = 0.0;
    float m = mx[fiber];
    for (int a = lane; a < A; a += 32)
        s += expf(inp[base + a * step] - m);
    s = warp_sum(s);
    if (lane == 0)
        se[fiber] = (float)s;
}

void sbk_softmax_partial_sumexp(float *se, const float *inp, const float *mx, int outer, int A,
                                int inner)
{
    FIBER_LAUNCH(sm_sumexp_k, outer, inner, se, inp, mx, outer, A, inner);
}

__global__ static void sm_apply_k(float *out, const float *inp, const float *mx, const float *se,
                                  int A, int inner, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t stat = (i / ((int64_t)A * inner)) * inner + i % inner;
        float inv = 1.0f / se[stat];
        out[i] = expf(inp[i] - mx[stat]) * inv;
    }
}

void sbk_softmax_apply(float *out, const float *inp, const float *mx, const float *se, int outer,
                       int A, int inner)
{
    int64_t n = (int64_t)outer * A * inner;
    LAUNCH(sm_apply_k, n, out, inp, mx, se, A, inner, n);
}

__global__ static void sm_dot_k(float *dot, const float *dout, const float *out, int outer, int A,
                                int inner)
{
    FIBER_BEGIN(outer, inner)
    double s = 0.0;
    for (int a = lane; a < A; a += 32)
        s += (double)dout[base + a * step] * out[base + a * step];
    s = warp_sum(s);
    if (lane == 0)
        dot[fiber] = (float)s;
}

void sbk_softmax_backward_dot(float *dot, const float *dout, const float *out, int outer, int A,
                              int inner)
{
    FIBER_LAUNCH(sm_dot_k, outer, inner, dot, dout, out, outer, A, inner);
}

__global__ static void sm_bwd_apply_k(float *dinp, const float *dout, const float *out,
                                      const float *dot, int A, int inner, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t stat = (i / ((int64_t)A * inner)) * inner + i % inner;
        dinp[i] += out[i] * (dout[i] - dot[stat]);
    }
}

void sbk_softmax_backward_apply(float *dinp, const float *dout, const float *out,
                                const float *dot, int outer, int A, int inner)
{
    int64_t n = (int64_t)outer * A * inner;
    LAUNCH(sm_bwd_apply_k, n, dinp, dout, out, dot, A, inner, n);
}

/* ---- softmax cross-entropy ---- */

__global__ static void picked_k(float *picked, const float *logits, const int32_t *labels, int M,
                                int V, int v0)
{
    GRID_STRIDE(m, M)
    {
        int32_t y = labels[m];
        picked[m] = (y >= v0 && y < v0 + V) ? logits[m * V + (y - v0)] : 0.0f;
    }
}

void sbk_xent_partial_picked(float *picked, const float *logits, const int32_t *labels, int M,
                             int V, int v0)
{
    LAUNCH(picked_k, M, picked, logits, labels, M, V, v0);
}

__global__ static void xent_loss_k(float *loss, const float *mx, const float *se,
                                   const float *picked, const int32_t *labels, int M)
{
    GRID_STRIDE(m, M) loss[m] = labels[m] < 0 ? 0.0f : logf(se[m]) + mx[m] - picked[m];
}

void sbk_xent_loss(float *loss, const float *mx, const float *se, const float *picked,
                   const int32_t *labels, int M)
{
    LAUNCH(xent_loss_k, M, loss, mx, se, picked, labels, M);
}

__global__ static void xent_bwd_k(float *dlogits, const float *dloss, const float *logits,
                                  const float *mx, const float *se, const int32_t *labels, int V,
                                  int v0, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t m = i / V;
        int v = (int)(i % V);
        int32_t y = labels[m];
        if (y < 0)
            continue;
        float inv = 1.0f / se[m];
        float p = expf(logits[i] - mx[m]) * inv;
        dlogits[i] += dloss[m] * (p - (v0 + v == y ? 1.0f : 0.0f));
    }
}

void sbk_softmax_xent_backward(float *dlogits, const float *dloss, const float *logits,
                               const float *mx, const float *se, const int32_t *labels, int M,
                               int V, int v0)
{
    int64_t n = (int64_t)M * V;
    LAUNCH(xent_bwd_k, n, dlogits, dloss, logits, mx, se, labels, V, v0, n);
}

/* ---- elementwise ---- */

#define PTRS 16
typedef struct {
    const float *p[PTRS];
} ptrs_in;
typedef struct {
    float *p[PTRS];
} ptrs_out;

__global__ static void add_k(float *out, ptrs_in in, int k, int relu, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float s = 0.0f;
        for (int j = 0; j < k; j++)
            s += in.p[j][i];
        out[i] = (relu && s < 0.0f) ? 0.0f : s;
    }
}

void sbk_add_forward(float *out, const float *const *inps, int k, size_t n, int relu)
{
    if (n == 0)
        return;
    ptrs_in in;
    if (k <= PTRS) {
        for (int j = 0; j < k; j++)
            in.p[j] = inps[j];
        LAUNCH(add_k, n, out, in, k < 0 ? 0 : k, relu, (int64_t)n);
        return;
    }
    /* more inputs than one launch takes: sum into a scratch buffer, in the
     * reference's order (left to right), the last launch writes out */
    float *acc = (float *)sbc_scratch(n * sizeof(float), "add of many inputs");
    int done = 0;
    while (done < k) {
        int m = 0;
        if (done > 0)
            in.p[m++] = acc;
        while (m < PTRS && done < k)
            in.p[m++] = inps[done++];
        int last = done == k;
        LAUNCH(add_k, n, last ? out : acc, in, m, last ? relu : 0, (int64_t)n);
    }
    sbc_scratch_free(acc);
}

__global__ static void add_bwd_k(ptrs_out d, int k, const float *dout, const float *out, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        if (out && !(out[i] > 0.0f))
            continue;
        float g = dout[i];
        for (int j = 0; j < k; j++)
            d.p[j][i] += g;
    }
}

void sbk_add_backward(float *const *dinps, const float *dout, const float *out, int k, size_t n)
{
    ptrs_out d;
    int m = 0;
    for (int j = 0; j < k; j++) {
        if (!dinps[j])
            continue;
        d.p[m++] = dinps[j];
        if (m == PTRS) {
            LAUNCH(add_bwd_k, n, d, m, dout, out, (int64_t)n);
            m = 0;
        }
    }
    if (m)
        LAUNCH(add_bwd_k, n, d, m, dout, out, (int64_t)n);
}

__global__ static void sgd_k(float *w, float *g, int64_t n, float lr)
{
    GRID_STRIDE(i, n)
    {
        w[i] -= lr * g[i];
        g[i] = 0.0f;
    }
}

void sbk_sgd_update(float *w, float *g, size_t n, float lr)
{
    LAUNCH(sgd_k, n, w, g, (int64_t)n, lr);
}

/* ---- reduce-mean ---- */

/* input offset of kept index o (row-major over kept dims) */
__device__ static int64_t kept_offset(const sbc_reduce_plan &p, int64_t o)
{
    int64_t off = 0;
    for (int d = p.nk - 1; d >= 0; d--) {
        off += (o % p.kdims[d]) * p.kstride[d];
        o /= p.kdims[d];
    }
    return off;
}

__device__ static int64_t red_offset(const sbc_reduce_plan &p, int64_t r)
{
    int64_t off = 0;
    for (int d = p.nr - 1; d >= 0; d--) {
        off += (r % p.rdims[d]) * p.rstride[d];
        r /= p.rdims[d];
    }
    return off;
}

__global__ static void rmean_fwd_k(float *out, const float *inp, sbc_reduce_plan p)
{
    GRID_STRIDE(o, p.n_out)
    {
        int64_t base = kept_offset(p, o);
        double s = 0.0;
        for (int64_t r = 0; r < p.n_red; r++)
            s += inp[base + red_offset(p, r)];
        out[o] = (float)s * p.scale;
    }
}

void sbk_reduce_mean_forward(float *out, const float *inp, int nd, const int *dims, unsigned axes,
                             long count)
{
    sbc_reduce_plan p;
    sbc_reduce_plan_make(&p, nd, dims, axes, count);
    if (p.n_in <= 0) { /* empty input: the mean of nothing is 0 */
        sbk_fill(out, (size_t)p.n_out, 0.0f);
        return;
    }
    LAUNCH(rmean_fwd_k, p.n_out, out, inp, p);
}

__global__ static void rmean_bwd_k(float *dinp, const float *dout, sbc_reduce_plan p)
{
    GRID_STRIDE(i, p.n_out * p.n_red)
    {
        int64_t o = i / p.n_red, r = i % p.n_red;
        dinp[kept_offset(p, o) + red_offset(p, r)] += dout[o] * p.scale;
    }
}

void sbk_reduce_mean_backward(float *dinp, const float *dout, int nd, const int *dims,
                              unsigned axes, long count)
{
    sbc_reduce_plan p;
    sbc_reduce_plan_make(&p, nd, dims, axes, count);
    if (p.n_in <= 0)
        return;
    LAUNCH(rmean_bwd_k, p.n_out * p.n_red, dinp, dout, p);
}

/* ---- box copy, permute ---- */

__global__ static void box_copy_k(float *dst, const float *src, sbc_box_plan p, int acc)
{
    GRID_STRIDE(i, p.count)
    {
        int64_t r = i, d = p.d0, s = p.s0;
        for (int k = p.nd - 1; k >= 0; k--) {
            int64_t c = r % p.size[k];
            r /= p.size[k];
            d += c * p.ds[k];
            s += c * p.ss[k];
        }
        if (acc)
            dst[d] += src[s];
        else
            dst[d] = src[s];
    }
}

void sbk_box_copy(float *dst, const int *dst_dims, const int *dst_lo, const float *src,
                  const int *src_dims, const int *src_lo, const int *size, int nd,
                  int accumulate)
{
    sbc_box_plan p;
    sbc_box_plan_make(&p, dst_dims, dst_lo, src_dims, src_lo, size, nd);
    if (p.count <= 0)
        return;
    if (p.contiguous && !accumulate) {
        SBC_CUDA(cudaMemcpyAsync(dst + p.d0, src + p.s0, (size_t)p.count * sizeof(float),
                                 cudaMemcpyDeviceToDevice, sbc_stream()));
        return;
    }
    LAUNCH(box_copy_k, p.count, dst, src, p, accumulate);
}

__global__ static void permute_k(float *out, const float *inp, sbc_perm_plan p, int acc)
{
    GRID_STRIDE(i, p.count)
    {
        int64_t r = i, s = 0;
        for (int k = p.nd - 1; k >= 0; k--) {
            s += (r % p.odims[k]) * p.istride[k];
            r /= p.odims[k];
        }
        if (acc)
            out[i] += inp[s];
        else
            out[i] = inp[s];
    }
}

void sbk_permute(float *out, const float *inp, int nd, const int *dims, const int *perm,
                 int accumulate)
{
    sbc_perm_plan p;
    sbc_perm_plan_make(&p, nd, dims, perm);
    if (p.count <= 0)
        return;
    if (p.identity && !accumulate) {
        SBC_CUDA(cudaMemcpyAsync(out, inp, (size_t)p.count * sizeof(float),
                                 cudaMemcpyDeviceToDevice, sbc_stream()));
        return;
    }
    LAUNCH(permute_k, p.count, out, inp, p, accumulate);
}
