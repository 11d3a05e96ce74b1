/* k_conv.cu: the cuda kernels of the k_conv.c family: the conv helpers
 * around cuDNN (bias, relu, staging of halo windows) and pooling (local,
 * possibly negative padding, the reference's first-maximum rule). */
#include <float.h>

#include "launch.cuh"

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
    bias_grad_k<<<N, TPB, 0, sbk_stream()>>>(dbias, dy, B, N, HW);
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
