/* runtime/kernels/k_dense.c: dense (fully connected) layers, vocab-sharded
 * embedding gather/scatter-add, and the LSTM (one cell, and a multi-layer,
 * multi-step network built from the cell's pointwise half and sgemm).
 * Not here: attention einsums (the executor maps them to sb_gemm_batched). */
#include "shardbench/kernels.h"

#include <math.h>
#include <string.h>

/* ---- dense ---- */

void sb_dense_forward(float *out, const float *inp, const float *w,
                      const float *bias, int M, int K, int N, int relu)
{
    if (bias) {
        for (int m = 0; m < M; m++)
            memcpy(out + (size_t)m * N, bias, sizeof(float) * (size_t)N);
    }
    sb_gemm(0, 0, M, N, K, 1.0f, inp, K, w, N, bias ? 1.0f : 0.0f, out, N);
    if (relu)
        sb_relu_forward(out, out, (size_t)M * N);
}

void sb_dense_backward(float *dinp, float *dw, float *dbias, float *work,
                       const float *dout, const float *out, const float *inp,
                       const float *w, int M, int K, int N)
{
    const float *dy = dout;
    if (out) {
        size_t n = (size_t)M * N;
        for (size_t i = 0; i < n; i++)
            work[i] = out[i] > 0.0f ? dout[i] : 0.0f;
        dy = work;
    }
    if (dinp) // dinp (M,K) += dy (M,N) w^T (N,K)
        sb_gemm(0, 1, M, K, N, 1.0f, dy, N, w, N, 1.0f, dinp, K);
    if (dw) // dw (K,N) += inp^T (K,M) dy (M,N)
        sb_gemm(1, 0, K, N, M, 1.0f, inp, K, dy, N, 1.0f, dw, N);
    if (dbias)
        for (int m = 0; m < M; m++) {
            const float *row = dy + (size_t)m * N;
            for (int n = 0; n < N; n++)
                dbias[n] += row[n];
        }
}

/* ---- embedding ---- */

void sb_embedding_forward(float *out, const int32_t *idx, const float *table,
                          int N, int D, int v0, int v1)
{
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * D;
        int32_t v = idx[n];
        if (v >= v0 && v < v1)
            memcpy(o, table + (size_t)(v - v0) * D, sizeof(float) * (size_t)D);
        else
            memset(o, 0, sizeof(float) * (size_t)D);
    }
}

void sb_embedding_backward(float *dtable, const float *dout,
                           const int32_t *idx, int N, int D, int v0, int v1)
{
    for (int n = 0; n < N; n++) {
        int32_t v = idx[n];
        if (v < v0 || v >= v1)
            continue;
        float *t = dtable + (size_t)(v - v0) * D;
        const float *g = dout + (size_t)n * D;
        for (int d = 0; d < D; d++)
            t[d] += g[d];
    }
}

/* ---- LSTM ---- */

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void sb_lstm_pointwise_forward(float *h, float *c, float *gates,
                               const float *preact, const float *c_prev,
                               int B, int H)
{
    for (int b = 0; b < B; b++) {
        const float *p = preact + (size_t)b * 4 * H;
        float *g4 = gates + (size_t)b * 4 * H;
        for (int j = 0; j < H; j++) {
            float i = sigmoidf(p[j]);
            float f = sigmoidf(p[H + j]);
            float g = tanhf(p[2 * H + j]);
            float o = sigmoidf(p[3 * H + j]);
            float cp = c_prev ? c_prev[(size_t)b * H + j] : 0.0f;
            float cn = f * cp + i * g;
            g4[j] = i;
            g4[H + j] = f;
            g4[2 * H + j] = g;
            g4[3 * H + j] = o;
            c[(size_t)b * H + j] = cn;
            h[(size_t)b * H + j] = o * tanhf(cn);
        }
    }
}

void sb_lstm_pointwise_backward(float *dpreact, float *dc_prev,
                                const float *dh, const float *dc,
                                const float *gates, const float *c,
                                const float *c_prev, int B, int H)
{
    for (int b = 0; b < B; b++) {
        const float *g4 = gates + (size_t)b * 4 * H;
        float *dp = dpreact + (size_t)b * 4 * H;
        for (int j = 0; j < H; j++) {
            size_t bj = (size_t)b * H + j;
            float i = g4[j], f = g4[H + j], g = g4[2 * H + j],
                  o = g4[3 * H + j];
            float tc = tanhf(c[bj]);
            float cp = c_prev ? c_prev[bj] : 0.0f;
            float dcell = (dc ? dc[bj] : 0.0f) + dh[bj] * o * (1.0f - tc * tc);
            dp[j] = dcell * g * i * (1.0f - i);
            dp[H + j] = dcell * cp * f * (1.0f - f);
            dp[2 * H + j] = dcell * i * (1.0f - g * g);
            dp[3 * H + j] = dh[bj] * tc * o * (1.0f - o);
            if (dc_prev)
                dc_prev[bj] += dcell * f;
        }
    }
}

// rows (B,4H) = b (4H) broadcast, or 0
static void fill_bias(float *rows, const float *b, int B, int H)
{
    size_t n4 = (size_t)4 * H;
    for (int r = 0; r < B; r++) {
        if (b)
            memcpy(rows + r * n4, b, sizeof(float) * n4);
        else
            memset(rows + r * n4, 0, sizeof(float) * n4);
    }
}

// db (4H) += column sums of d (rows,4H)
static void add_colsum(float *db, const float *d, size_t rows, int H)
{
    size_t n4 = (size_t)4 * H;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < n4; j++)
            db[j] += d[r * n4 + j];
}

void sb_lstm_cell_forward(float *h, float *c, float *gates, const float *x,
                          const float *h_prev, const float *c_prev,
                          const float *Wx, const float *Wh, const float *b,
                          int B, int X, int Kh, int H)
{
    int n4 = 4 * H;
    fill_bias(gates, b, B, H); // gates holds preact until the pointwise half
    sb_gemm(0, 0, B, n4, X, 1.0f, x, X, Wx, n4, 1.0f, gates, n4);
    if (h_prev)
        sb_gemm(0, 0, B, n4, Kh, 1.0f, h_prev, Kh, Wh, n4, 1.0f, gates, n4);
    sb_lstm_pointwise_forward(h, c, gates, gates, c_prev, B, H);
}

void sb_lstm_cell_backward(float *dx, float *dh_prev, float *dc_prev,
                           float *dWx, float *dWh, float *db, float *dpreact,
                           const float *dh, const float *dc,
                           const float *gates, const float *c,
                           const float *x, const float *h_prev,
                           const float *c_prev, const float *Wx,
                           const float *Wh, int B, int X, int Kh, int H)
{
    int n4 = 4 * H;
    sb_lstm_pointwise_backward(dpreact, dc_prev, dh, dc, gates, c, c_prev, B,
                               H);
    if (dx) // dx (B,X) += dpre (B,4H) Wx^T
        sb_gemm(0, 1, B, X, n4, 1.0f, dpreact, n4, Wx, n4, 1.0f, dx, X);
    if (dh_prev)
        sb_gemm(0, 1, B, Kh, n4, 1.0f, dpreact, n4, Wh, n4, 1.0f, dh_prev,
                Kh);
    if (dWx) // dWx (X,4H) += x^T dpre
        sb_gemm(1, 0, X, n4, B, 1.0f, x, X, dpreact, n4, 1.0f, dWx, n4);
    if (dWh && h_prev)
        sb_gemm(1, 0, Kh, n4, B, 1.0f, h_prev, Kh, dpreact, n4, 1.0f, dWh,
                n4);
    if (db)
        add_colsum(db, dpreact, (size_t)B, H);
}

size_t sb_lstm_params_floats(int L, int X, int H)
{
    if (L <= 0)
        return 0;
    size_t n4 = (size_t)4 * H;
    size_t first = (size_t)X * n4 + (size_t)H * n4 + n4;
    size_t rest = (size_t)H * n4 * 2 + n4;
    return first + (size_t)(L - 1) * rest;
}

size_t sb_lstm_acts_floats(int L, int T, int B, int H)
{
    return (size_t)L * T * B * 6 * H;
}

size_t sb_lstm_work_floats(int T, int B, int H)
{
    return (size_t)T * B * 5 * H + (size_t)3 * B * H;
}

// Pointers into the packed parameters (or their gradients) of layer l.
typedef struct {
    size_t wx, wh, b; // offsets of Wx_l (X_l,4H), Wh_l (H,4H), b_l (4H)
    int x;            // X_l
} lstm_layer;

static lstm_layer lstm_layer_at(int l, int X, int H)
{
    lstm_layer ly;
    size_t off = sb_lstm_params_floats(l, X, H);
    ly.x = l == 0 ? X : H;
    ly.wx = off;
    ly.wh = off + (size_t)ly.x * 4 * H;
    ly.b = ly.wh + (size_t)H * 4 * H;
    return ly;
}

// Per-layer activations: gates (T,B,4H), c (T,B,H), h (T,B,H).
static float *acts_gates(const float *acts, int l, int T, int B, int H)
{
    return (float *)acts + (size_t)l * T * B * 6 * H;
}
static float *acts_c(const float *acts, int l, int T, int B, int H)
{
    return acts_gates(acts, l, T, B, H) + (size_t)T * B * 4 * H;
}
static float *acts_h(const float *acts, int l, int T, int B, int H)
{
    return acts_c(acts, l, T, B, H) + (size_t)T * B * H;
}

void sb_lstm_forward(float *y, float *acts, const float *x,
                     const float *params, const float *h0, const float *c0,
                     int L, int T, int B, int X, int H)
{
    int n4 = 4 * H;
    size_t bh = (size_t)B * H, b4 = (size_t)B * n4;
    for (int l = 0; l < L; l++) {
        lstm_layer ly = lstm_layer_at(l, X, H);
        float *gates = acts_gates(acts, l, T, B, H);
        float *cs = acts_c(acts, l, T, B, H), *hs = acts_h(acts, l, T, B, H);
        // input projection of every step: gates (T,B,4H) = b + in Wx
        fill_bias(gates, params + ly.b, T * B, H);
        if (l == 0) {
            for (int t = 0; t < T; t++) // x row (b,t) has stride T*X
                sb_gemm(0, 0, B, n4, X, 1.0f, x + (size_t)t * X, T * X,
                        params + ly.wx, n4, 1.0f, gates + t * b4, n4);
        } else {
            const float *in = acts_h(acts, l - 1, T, B, H);
            sb_gemm(0, 0, T * B, n4, H, 1.0f, in, H, params + ly.wx, n4,
                    1.0f, gates, n4);
        }
        const float *hl0 = h0 ? h0 + l * bh : NULL;
        const float *cl0 = c0 ? c0 + l * bh : NULL;
        for (int t = 0; t < T; t++) {
            const float *hp = t ? hs + (t - 1) * bh : hl0;
            const float *cp = t ? cs + (t - 1) * bh : cl0;
            float *gt = gates + t * b4;
            if (hp)
                sb_gemm(0, 0, B, n4, H, 1.0f, hp, H, params + ly.wh, n4,
                        1.0f, gt, n4);
            sb_lstm_pointwise_forward(hs + t * bh, cs + t * bh, gt, gt, cp, B,
                                      H);
        }
    }
    // y (B,T,H) from the top layer's h (T,B,H)
    const float *top = acts_h(acts, L - 1, T, B, H);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++)
            memcpy(y + ((size_t)b * T + t) * H, top + (t * (size_t)B + b) * H,
                   sizeof(float) * (size_t)H);
}

void sb_lstm_backward(float *dx, float *dparams, float *work, const float *dy,
                      const float *acts, const float *x, const float *params,
                      const float *h0, const float *c0, int L, int T, int B,
                      int X, int H)
{
    int n4 = 4 * H;
    size_t bh = (size_t)B * H, b4 = (size_t)B * n4;
    float *dpre = work;                         // (T,B,4H)
    float *dhs = dpre + (size_t)T * b4;         // (T,B,H): grad of layer out
    float *dh_next = dhs + (size_t)T * bh;      // (B,H)
    float *dc_a = dh_next + bh, *dc_b = dc_a + bh; // (B,H) each
    // dhs = dy (B,T,H) in time-major order
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++)
            memcpy(dhs + (t * (size_t)B + b) * H, dy + ((size_t)b * T + t) * H,
                   sizeof(float) * (size_t)H);
    for (int l = L - 1; l >= 0; l--) {
        lstm_layer ly = lstm_layer_at(l, X, H);
        const float *gates = acts_gates(acts, l, T, B, H);
        const float *cs = acts_c(acts, l, T, B, H);
        const float *hs = acts_h(acts, l, T, B, H);
        const float *hl0 = h0 ? h0 + l * bh : NULL;
        const float *cl0 = c0 ? c0 + l * bh : NULL;
        memset(dh_next, 0, sizeof(float) * bh);
        memset(dc_a, 0, sizeof(float) * bh);
        for (int t = T - 1; t >= 0; t--) {
            float *dh = dhs + t * bh;
            for (size_t i = 0; i < bh; i++)
                dh[i] += dh_next[i];
            memset(dc_b, 0, sizeof(float) * bh);
            const float *cp = t ? cs + (t - 1) * bh : cl0;
            sb_lstm_pointwise_backward(dpre + t * b4, dc_b, dh, dc_a,
                                       gates + t * b4, cs + t * bh, cp, B, H);
            // dh_next (B,H) = dpre_t (B,4H) Wh^T
            sb_gemm(0, 1, B, H, n4, 1.0f, dpre + t * b4, n4, params + ly.wh,
                    n4, 0.0f, dh_next, H);
            float *tmp = dc_a;
            dc_a = dc_b;
            dc_b = tmp;
        }
        if (dparams) {
            // dWh += h_{t-1}^T dpre_t: steps 1..T-1 in one GEMM, step 0 from h0
            if (T > 1)
                sb_gemm(1, 0, H, n4, (T - 1) * B, 1.0f, hs, H, dpre + b4, n4,
                        1.0f, dparams + ly.wh, n4);
            if (hl0)
                sb_gemm(1, 0, H, n4, B, 1.0f, hl0, H, dpre, n4, 1.0f,
                        dparams + ly.wh, n4);
            add_colsum(dparams + ly.b, dpre, (size_t)T * B, H);
            if (l == 0) {
                for (int t = 0; t < T; t++)
                    sb_gemm(1, 0, X, n4, B, 1.0f, x + (size_t)t * X, T * X,
                            dpre + t * b4, n4, 1.0f, dparams + ly.wx, n4);
            } else {
                sb_gemm(1, 0, H, n4, T * B, 1.0f, acts_h(acts, l - 1, T, B, H),
                        H, dpre, n4, 1.0f, dparams + ly.wx, n4);
            }
        }
        if (l > 0) { // gradient of the layer below's h: dhs = dpre Wx^T
            sb_gemm(0, 1, T * B, H, n4, 1.0f, dpre, n4, params + ly.wx, n4,
                    0.0f, dhs, H);
        } else if (dx) {
            for (int t = 0; t < T; t++) // dx row (b,t) has stride T*X
                sb_gemm(0, 1, B, X, n4, 1.0f, dpre + t * b4, n4,
                        params + ly.wx, n4, 1.0f, dx + (size_t)t * X, T * X);
        }
    }
}
