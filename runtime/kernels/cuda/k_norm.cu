/* k_norm.cu: the cuda kernels of the k_norm.c family: split norm
 * statistics, layer, RMS and batch norm, softmax over any axis and its
 * causal mask, softmax cross-entropy. Sums accumulate in double, like the references. */
#include <float.h>
#include <math.h>

#include "launch.cuh"

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
            kernel<<<(unsigned)(rows), TPB, 0, sbk_stream()>>>(__VA_ARGS__);            \
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
        ln_bwd_dgb_k<<<(unsigned)((D + 31) / 32), dim3(32, 8), 0, sbk_stream()>>>(
            dgamma, dbeta, dout, inp, mean, rstd, M, D);
        SBC_LAUNCHED();
    }
}

/* RMS norm: one block per row m for the statistics */
__global__ static void rms_stats_k(float *sumsq, const float *inp, int D)
{
    const float *x = inp + (int64_t)blockIdx.x * D;
    double q = 0.0;
    for (int d = threadIdx.x; d < D; d += blockDim.x)
        q += (double)x[d] * x[d];
    q = block_sum(q);
    if (threadIdx.x == 0)
        sumsq[blockIdx.x] = (float)q;
}

void sbk_rmsnorm_stats(float *sumsq, const float *inp, int M, int D)
{
    ROWS_LAUNCH(rms_stats_k, M, sumsq, inp, D);
}

__global__ static void rms_apply_k(float *out, const float *inp, const float *rstd,
                                   const float *gamma, int D, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t m = i / D, d = i % D;
        out[i] = inp[i] * rstd[m] * (gamma ? gamma[d] : 1.0f);
    }
}

void sbk_rmsnorm_apply(float *out, const float *inp, const float *rstd, const float *gamma, int M,
                       int D)
{
    int64_t n = (int64_t)M * D;
    LAUNCH(rms_apply_k, n, out, inp, rstd, gamma, D, n);
}

__global__ static void rms_bwd_stats_k(float *s, const float *dout, const float *inp,
                                       const float *gamma, int D)
{
    int64_t m = blockIdx.x;
    const float *x = inp + m * D, *dy = dout + m * D;
    double a = 0.0;
    for (int d = threadIdx.x; d < D; d += blockDim.x)
        a += (double)dy[d] * (gamma ? gamma[d] : 1.0f) * x[d];
    a = block_sum(a);
    if (threadIdx.x == 0)
        s[m] = (float)a;
}

void sbk_rmsnorm_backward_stats(float *s, const float *dout, const float *inp, const float *gamma,
                                int M, int D)
{
    ROWS_LAUNCH(rms_bwd_stats_k, M, s, dout, inp, gamma, D);
}

__global__ static void rms_bwd_dx_k(float *dinp, const float *dout, const float *inp,
                                    const float *rstd, const float *gamma, const float *s, int D,
                                    int D_total, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t m = i / D, d = i % D;
        float r = rstd[m], c = r * r * s[m] / (float)D_total;
        dinp[i] += r * (dout[i] * (gamma ? gamma[d] : 1.0f) - inp[i] * c);
    }
}

/* dgamma[d] += sum_m dout*inp*rstd: one thread per column */
__global__ static void rms_bwd_dg_k(float *dgamma, const float *dout, const float *inp,
                                    const float *rstd, int M, int D)
{
    GRID_STRIDE(d, D)
    {
        double g = 0.0;
        for (int64_t m = 0; m < M; m++)
            g += (double)dout[m * D + d] * inp[m * D + d] * rstd[m];
        dgamma[d] += (float)g;
    }
}

void sbk_rmsnorm_backward_apply(float *dinp, float *dgamma, const float *dout, const float *inp,
                                const float *rstd, const float *gamma, const float *s, int M,
                                int D, int D_total)
{
    int64_t n = (int64_t)M * D;
    if (dinp)
        LAUNCH(rms_bwd_dx_k, n, dinp, dout, inp, rstd, gamma, s, D, D_total, n);
    if (dgamma && M > 0)
        LAUNCH(rms_bwd_dg_k, D, dgamma, dout, inp, rstd, M, D);
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
            kernel<<<nb_, TPB, 0, sbk_stream()>>>(__VA_ARGS__);                          \
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

__global__ static void causal_mask_k(float *out, const float *inp, int64_t n, int64_t key_stride,
                                     int key_ext, int64_t key_lo, int64_t query_stride,
                                     int query_ext, int64_t query_lo, int64_t window)
{
    GRID_STRIDE(e, n)
    {
        int64_t key = key_lo + (e / key_stride) % key_ext;
        int64_t query = query_lo + (e / query_stride) % query_ext;
        out[e] = key > query || (window > 0 && query - key >= window) ? -FLT_MAX : inp[e];
    }
}

void sbk_causal_mask(float *out, const float *inp, int64_t n, int64_t key_stride, int key_ext,
                     int64_t key_lo, int64_t query_stride, int query_ext, int64_t query_lo,
                     int64_t window)
{
    LAUNCH(causal_mask_k, n, out, inp, n, key_stride, key_ext, key_lo, query_stride, query_ext,
           query_lo, window);
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
