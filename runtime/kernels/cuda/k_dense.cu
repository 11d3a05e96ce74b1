/* k_dense.cu: the cuda kernels of the k_dense.c family: embedding gather
 * and scatter-add (vocab range), the LSTM cell's pointwise half. */
#include <math.h>

#include "launch.cuh"

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
