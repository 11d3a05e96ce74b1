/* runtime/kernels/k_norm.c: layer norm, RMS norm, batch norm, softmax
 * (with its causal mask) and softmax cross-entropy, each split into partial-statistics and apply steps so the
 * caller can all-reduce the statistics when the normalized axis is sharded.
 * Not here: the all-reduces themselves, running averages for inference. */
#include "shardbench/kernels.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "par.h"

/* ---- exp for softmax: one algorithm, scalar and 4-wide ----
 * exp(x) = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 in
 * [-ln2/2, ln2/2], e^r by Cephes' polynomial (about 1 ulp);
 * 0 below -87.3 (where float exp is denormal or 0), inputs above 88.7 are
 * clamped (softmax feeds x - max <= 0). The 4-wide form uses GCC/Clang
 * vector extensions (SSE2 on plain x86-64, NEON on arm64), so the long
 * contiguous rows of softmax and the loss run vectorized; the
 * scalar form serves strided fibers with the same results. */
#define EXP_LO (-87.33654f)
#define EXP_HI 88.72283f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO (-2.12194440e-4f)
#define EXP_MAGIC 12582912.0f /* 1.5 * 2^23: adding it rounds to an integer */
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

static inline float exp_fast(float x)
{
    if (!(x >= EXP_LO))
        return x != x ? x : 0.0f; // NaN stays NaN
    if (x > EXP_HI)
        x = EXP_HI;
    float t = x * EXP_LOG2E + EXP_MAGIC;
    float n = t - EXP_MAGIC;
    float r = x - n * EXP_LN2_HI - n * EXP_LN2_LO;
    float p = ((((EXP_P0 * r + EXP_P1) * r + EXP_P2) * r + EXP_P3) * r + EXP_P4) * r + EXP_P5;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f v4_load(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void v4_store(float *p, v4f v) { memcpy(p, &v, sizeof v); }

static inline v4f v4_splat(float x) { return (v4f){x, x, x, x}; }

static inline v4f v4_select(v4i mask, v4f a, v4f b) // mask ? a : b
{
    return (v4f)(((v4i)a & mask) | ((v4i)b & ~mask));
}

static inline v4f exp4_fast(v4f x)
{
    v4i zero = x < v4_splat(EXP_LO); // also false for NaN: NaN flows through
    x = v4_select(x > v4_splat(EXP_HI), v4_splat(EXP_HI), x);
    v4f t = x * EXP_LOG2E + EXP_MAGIC;
    v4f n = t - EXP_MAGIC;
    v4f r = x - n * EXP_LN2_HI - n * EXP_LN2_LO;
    v4f p = ((((EXP_P0 * r + EXP_P1) * r + EXP_P2) * r + EXP_P3) * r + EXP_P4) * r + EXP_P5;
    p = p * r * r + r + 1.0f;
    v4i bits = (__builtin_convertvector(n, v4i) + 127) << 23;
    v4f y = p * (v4f)bits;
    return (v4f)((v4i)y & ~zero);
}

static inline float v4_hsum(v4f v)
{
    return (v[0] + v[1]) + (v[2] + v[3]);
}

// max of x (n contiguous), starting from m
static float max_contig(const float *x, int n, float m)
{
    int a = 0;
    if (n >= 4) {
        v4f vm = v4_splat(m);
        for (; a + 4 <= n; a += 4) {
            v4f v = v4_load(x + a);
            vm = v4_select(v > vm, v, vm);
        }
        for (int i = 0; i < 4; i++)
            if (vm[i] > m)
                m = vm[i];
    }
    for (; a < n; a++)
        if (x[a] > m)
            m = x[a];
    return m;
}

// sum of exp(x[a] - m) over x (n contiguous): float lanes in blocks of 512
// elements, blocks summed in double
static double sumexp_contig(const float *x, int n, float m)
{
    double s = 0.0;
    int a = 0;
    v4f vm = v4_splat(m);
    while (a + 4 <= n) {
        v4f acc = v4_splat(0.0f);
        int end = a + 512 < n ? a + 512 : n;
        for (; a + 4 <= end; a += 4)
            acc += exp4_fast(v4_load(x + a) - vm);
        s += (double)v4_hsum(acc);
    }
    for (; a < n; a++)
        s += exp_fast(x[a] - m);
    return s;
}

// y[a] = exp(x[a] - m) * scale over n contiguous elements
static void expscale_contig(float *y, const float *x, int n, float m, float scale)
{
    int a = 0;
    v4f vm = v4_splat(m), vs = v4_splat(scale);
    for (; a + 4 <= n; a += 4)
        v4_store(y + a, exp4_fast(v4_load(x + a) - vm) * vs);
    for (; a < n; a++)
        y[a] = exp_fast(x[a] - m) * scale;
}

void sb_norm_finish_stats(float *mean, float *rstd, const float *sum,
                          const float *sumsq, int n, long count, float eps)
{
    for (int i = 0; i < n; i++) {
        double m = (double)sum[i] / (double)count;
        double var = (double)sumsq[i] / (double)count - m * m;
        if (var < 0.0)
            var = 0.0;
        mean[i] = (float)m;
        rstd[i] = (float)(1.0 / sqrt(var + (double)eps));
    }
}

/* ---- layer norm ---- */

void sb_layernorm_stats(float *sum, float *sumsq, const float *inp, int M,
                        int D)
{
    SB_PAR(if ((size_t)M * D > SB_PAR_MIN))
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * D;
        double s = 0.0, q = 0.0;
        for (int d = 0; d < D; d++) {
            s += x[d];
            q += (double)x[d] * x[d];
        }
        sum[m] = (float)s;
        sumsq[m] = (float)q;
    }
}

void sb_layernorm_apply(float *out, const float *inp, const float *mean,
                        const float *rstd, const float *gamma,
                        const float *beta, int M, int D)
{
    SB_PAR(if ((size_t)M * D > SB_PAR_MIN))
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * D;
        float *o = out + (size_t)m * D;
        float mu = mean[m], rs = rstd[m];
        for (int d = 0; d < D; d++) {
            float v = (x[d] - mu) * rs;
            o[d] = v * (gamma ? gamma[d] : 1.0f) + (beta ? beta[d] : 0.0f);
        }
    }
}

void sb_layernorm_forward(float *out, float *mean, float *rstd,
                          const float *inp, const float *gamma,
                          const float *beta, int M, int D, float eps)
{
    sb_layernorm_stats(mean, rstd, inp, M, D);
    sb_norm_finish_stats(mean, rstd, mean, rstd, M, D, eps);
    sb_layernorm_apply(out, inp, mean, rstd, gamma, beta, M, D);
}

void sb_layernorm_backward_stats(float *s1, float *s2, const float *dout,
                                 const float *inp, const float *mean,
                                 const float *rstd, const float *gamma, int M,
                                 int D)
{
    SB_PAR(if ((size_t)M * D > SB_PAR_MIN))
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * D, *dy = dout + (size_t)m * D;
        double a = 0.0, b = 0.0;
        for (int d = 0; d < D; d++) {
            float xhat = (x[d] - mean[m]) * rstd[m];
            float g = dy[d] * (gamma ? gamma[d] : 1.0f);
            a += g;
            b += (double)g * xhat;
        }
        s1[m] = (float)a;
        s2[m] = (float)b;
    }
}

void sb_layernorm_backward_apply(float *dinp, float *dgamma, float *dbeta,
                                 const float *dout, const float *inp,
                                 const float *mean, const float *rstd,
                                 const float *gamma, const float *s1,
                                 const float *s2, int M, int D, int D_total)
{
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * D, *dy = dout + (size_t)m * D;
        float mu = mean[m], rs = rstd[m];
        float a = s1[m] / (float)D_total, b = s2[m] / (float)D_total;
        for (int d = 0; d < D; d++) {
            float xhat = (x[d] - mu) * rs;
            if (dgamma)
                dgamma[d] += dy[d] * xhat;
            if (dbeta)
                dbeta[d] += dy[d];
            if (dinp) {
                float g = dy[d] * (gamma ? gamma[d] : 1.0f);
                dinp[(size_t)m * D + d] += rs * (g - a - xhat * b);
            }
        }
    }
}

void sb_layernorm_backward(float *dinp, float *dgamma, float *dbeta,
                           const float *dout, const float *inp,
                           const float *mean, const float *rstd,
                           const float *gamma, int M, int D)
{
    for (int m = 0; m < M; m++) {
        size_t off = (size_t)m * D;
        float s1, s2;
        sb_layernorm_backward_stats(&s1, &s2, dout + off, inp + off, mean + m,
                                    rstd + m, gamma, 1, D);
        sb_layernorm_backward_apply(dinp ? dinp + off : NULL, dgamma, dbeta,
                                    dout + off, inp + off, mean + m, rstd + m,
                                    gamma, &s1, &s2, 1, D, D);
    }
}

/* ---- RMS norm ---- */

void sb_rmsnorm_stats(float *sumsq, const float *inp, int M, int D)
{
    SB_PAR(if ((size_t)M * D > SB_PAR_MIN))
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * D;
        double q = 0.0;
        for (int d = 0; d < D; d++)
            q += (double)x[d] * x[d];
        sumsq[m] = (float)q;
    }
}

void sb_rmsnorm_apply(float *out, const float *inp, const float *rstd,
                      const float *gamma, int M, int D)
{
    SB_PAR(if ((size_t)M * D > SB_PAR_MIN))
    for (int m = 0; m < M; m++) {
        size_t off = (size_t)m * D;
        for (int d = 0; d < D; d++)
            out[off + d] = inp[off + d] * rstd[m] * (gamma ? gamma[d] : 1.0f);
    }
}

void sb_rmsnorm_backward_stats(float *s, const float *dout, const float *inp,
                               const float *gamma, int M, int D)
{
    SB_PAR(if ((size_t)M * D > SB_PAR_MIN))
    for (int m = 0; m < M; m++) {
        size_t off = (size_t)m * D;
        double a = 0.0;
        for (int d = 0; d < D; d++)
            a += (double)dout[off + d] * (gamma ? gamma[d] : 1.0f) * inp[off + d];
        s[m] = (float)a;
    }
}

void sb_rmsnorm_backward_apply(float *dinp, float *dgamma, const float *dout,
                               const float *inp, const float *rstd,
                               const float *gamma, const float *s, int M,
                               int D, int D_total)
{
    if (dinp) {
        SB_PAR(if ((size_t)M * D > SB_PAR_MIN))
        for (int m = 0; m < M; m++) {
            size_t off = (size_t)m * D;
            float r = rstd[m], c = r * r * s[m] / (float)D_total;
            for (int d = 0; d < D; d++)
                dinp[off + d] += r * (dout[off + d] * (gamma ? gamma[d] : 1.0f) - inp[off + d] * c);
        }
    }
    if (dgamma)
        for (int d = 0; d < D; d++) {
            double g = 0.0;
            for (int m = 0; m < M; m++)
                g += (double)dout[(size_t)m * D + d] * inp[(size_t)m * D + d] * rstd[m];
            dgamma[d] += (float)g;
        }
}

/* ---- batch norm ---- */

// The masked gradient dout' at i: dout where out > 0 (relu) or dout.
static inline float masked(const float *dout, const float *out, size_t i)
{
    return (out && !(out[i] > 0.0f)) ? 0.0f : dout[i];
}

void sb_batchnorm_stats(float *sum, float *sumsq, const float *inp, int B,
                        int C, int HW)
{
    for (int c = 0; c < C; c++) {
        double s = 0.0, q = 0.0;
        for (int b = 0; b < B; b++) {
            const float *x = inp + ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                s += x[i];
                q += (double)x[i] * x[i];
            }
        }
        sum[c] = (float)s;
        sumsq[c] = (float)q;
    }
}

void sb_batchnorm_apply(float *out, const float *inp, const float *mean,
                        const float *rstd, const float *gamma,
                        const float *beta, int B, int C, int HW, int relu)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            size_t off = ((size_t)b * C + c) * HW;
            float scale = rstd[c] * (gamma ? gamma[c] : 1.0f);
            float shift = (beta ? beta[c] : 0.0f) - mean[c] * scale;
            for (int i = 0; i < HW; i++) {
                float v = inp[off + i] * scale + shift;
                out[off + i] = (relu && v < 0.0f) ? 0.0f : v;
            }
        }
}

void sb_batchnorm_forward(float *out, float *mean, float *rstd,
                          const float *inp, const float *gamma,
                          const float *beta, int B, int C, int HW, float eps,
                          int relu)
{
    sb_batchnorm_stats(mean, rstd, inp, B, C, HW);
    sb_norm_finish_stats(mean, rstd, mean, rstd, C, (long)B * HW, eps);
    sb_batchnorm_apply(out, inp, mean, rstd, gamma, beta, B, C, HW, relu);
}

void sb_batchnorm_backward_stats(float *sum_dy, float *sum_dy_xhat,
                                 const float *dout, const float *out,
                                 const float *inp, const float *mean,
                                 const float *rstd, int B, int C, int HW)
{
    for (int c = 0; c < C; c++) {
        double a = 0.0, q = 0.0;
        for (int b = 0; b < B; b++) {
            size_t off = ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                float g = masked(dout, out, off + i);
                a += g;
                q += (double)g * ((inp[off + i] - mean[c]) * rstd[c]);
            }
        }
        sum_dy[c] = (float)a;
        sum_dy_xhat[c] = (float)q;
    }
}

void sb_batchnorm_backward_apply(float *dinp, const float *dout,
                                 const float *out, const float *inp,
                                 const float *mean, const float *rstd,
                                 const float *gamma, const float *sum_dy,
                                 const float *sum_dy_xhat, int B, int C,
                                 int HW, long count)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            size_t off = ((size_t)b * C + c) * HW;
            float k = rstd[c] * (gamma ? gamma[c] : 1.0f);
            float a = sum_dy[c] / (float)count;
            float q = sum_dy_xhat[c] / (float)count;
            for (int i = 0; i < HW; i++) {
                float xhat = (inp[off + i] - mean[c]) * rstd[c];
                dinp[off + i] += k * (masked(dout, out, off + i) - a - xhat * q);
            }
        }
}

void sb_batchnorm_backward(float *dinp, float *dgamma, float *dbeta,
                           const float *dout, const float *out,
                           const float *inp, const float *mean,
                           const float *rstd, const float *gamma, int B,
                           int C, int HW)
{
    // one channel at a time, so no scratch for the per-channel sums
    size_t plane_stride = (size_t)C * HW;
    for (int c = 0; c < C; c++) {
        double a = 0.0, q = 0.0;
        for (int b = 0; b < B; b++) {
            size_t off = b * plane_stride + (size_t)c * HW;
            for (int i = 0; i < HW; i++) {
                float g = masked(dout, out, off + i);
                a += g;
                q += (double)g * ((inp[off + i] - mean[c]) * rstd[c]);
            }
        }
        if (dbeta)
            dbeta[c] += (float)a;
        if (dgamma)
            dgamma[c] += (float)q;
        if (!dinp)
            continue;
        float k = rstd[c] * (gamma ? gamma[c] : 1.0f);
        float am = (float)(a / ((double)B * HW));
        float qm = (float)(q / ((double)B * HW));
        for (int b = 0; b < B; b++) {
            size_t off = b * plane_stride + (size_t)c * HW;
            for (int i = 0; i < HW; i++) {
                float xhat = (inp[off + i] - mean[c]) * rstd[c];
                dinp[off + i] += k * (masked(dout, out, off + i) - am - xhat * qm);
            }
        }
    }
}

/* ---- softmax over the middle axis of (outer, A, inner) ---- */

// Runs body for every fiber [o, :, i]: element a sits at base + a * step,
// the fiber's statistic at stat.
#define FIBERS(outer, A, inner, body)                                        \
    SB_PAR(collapse(2) if ((size_t)(outer) * (A) * (inner) > SB_PAR_MIN))   \
    for (int o_ = 0; o_ < (outer); o_++)                                     \
        for (int i_ = 0; i_ < (inner); i_++) {                               \
            size_t base = (size_t)o_ * (A) * (inner) + i_;                   \
            size_t stat = (size_t)o_ * (inner) + i_;                         \
            size_t step = (size_t)(inner);                                   \
            (void)stat;                                                      \
            body                                                             \
        }

void sb_softmax_partial_max(float *mx, const float *inp, int outer, int A,
                            int inner)
{
    if (inner == 1) {
        SB_PAR(if ((size_t)outer * A > SB_PAR_MIN))
        for (int o = 0; o < outer; o++)
            mx[o] = max_contig(inp + (size_t)o * A, A, -FLT_MAX);
        return;
    }
    FIBERS(outer, A, inner, {
        float m = -FLT_MAX;
        for (int a = 0; a < A; a++)
            if (inp[base + a * step] > m)
                m = inp[base + a * step];
        mx[stat] = m;
    })
}

void sb_softmax_partial_sumexp(float *se, const float *inp, const float *mx,
                               int outer, int A, int inner)
{
    if (inner == 1) {
        SB_PAR(if ((size_t)outer * A > SB_PAR_MIN))
        for (int o = 0; o < outer; o++)
            se[o] = (float)sumexp_contig(inp + (size_t)o * A, A, mx[o]);
        return;
    }
    FIBERS(outer, A, inner, {
        double s = 0.0;
        for (int a = 0; a < A; a++)
            s += exp_fast(inp[base + a * step] - mx[stat]);
        se[stat] = (float)s;
    })
}

void sb_softmax_apply(float *out, const float *inp, const float *mx,
                      const float *se, int outer, int A, int inner)
{
    if (inner == 1) {
        SB_PAR(if ((size_t)outer * A > SB_PAR_MIN))
        for (int o = 0; o < outer; o++)
            expscale_contig(out + (size_t)o * A, inp + (size_t)o * A, A, mx[o],
                            1.0f / se[o]);
        return;
    }
    FIBERS(outer, A, inner, {
        float inv = 1.0f / se[stat];
        for (int a = 0; a < A; a++)
            out[base + a * step] = exp_fast(inp[base + a * step] - mx[stat]) * inv;
    })
}

void sb_softmax_forward(float *out, const float *inp, int outer, int A,
                        int inner)
{
    if (inner == 1) {
        SB_PAR(if ((size_t)outer * A > SB_PAR_MIN))
        for (int o = 0; o < outer; o++) {
            const float *x = inp + (size_t)o * A;
            float m = max_contig(x, A, -FLT_MAX);
            expscale_contig(out + (size_t)o * A, x, A, m,
                            (float)(1.0 / sumexp_contig(x, A, m)));
        }
        return;
    }
    FIBERS(outer, A, inner, {
        float m = -FLT_MAX;
        for (int a = 0; a < A; a++)
            if (inp[base + a * step] > m)
                m = inp[base + a * step];
        double s = 0.0;
        for (int a = 0; a < A; a++)
            s += exp_fast(inp[base + a * step] - m);
        float inv = (float)(1.0 / s);
        for (int a = 0; a < A; a++)
            out[base + a * step] = exp_fast(inp[base + a * step] - m) * inv;
    })
}

void sb_softmax_backward_dot(float *dot, const float *dout, const float *out,
                             int outer, int A, int inner)
{
    FIBERS(outer, A, inner, {
        double s = 0.0;
        for (int a = 0; a < A; a++)
            s += (double)dout[base + a * step] * out[base + a * step];
        dot[stat] = (float)s;
    })
}

void sb_softmax_backward_apply(float *dinp, const float *dout,
                               const float *out, const float *dot, int outer,
                               int A, int inner)
{
    FIBERS(outer, A, inner, {
        for (int a = 0; a < A; a++) {
            size_t e = base + a * step;
            dinp[e] += out[e] * (dout[e] - dot[stat]);
        }
    })
}

void sb_softmax_backward(float *dinp, const float *dout, const float *out,
                         int outer, int A, int inner)
{
    FIBERS(outer, A, inner, {
        double s = 0.0;
        for (int a = 0; a < A; a++)
            s += (double)dout[base + a * step] * out[base + a * step];
        float d = (float)s;
        for (int a = 0; a < A; a++) {
            size_t e = base + a * step;
            dinp[e] += out[e] * (dout[e] - d);
        }
    })
}

void sb_causal_mask(float *out, const float *inp, int64_t n, int64_t key_stride,
                    int key_ext, int64_t key_lo, int64_t query_stride,
                    int query_ext, int64_t query_lo, int64_t window)
{
    if (key_stride == 1 && key_ext > 0 && query_stride % key_ext == 0) {
        /* keys innermost: rows of key_ext keys share one query; no divisions
         * per element (the general loop below spends most of its time in them) */
        int64_t rows = n / key_ext, qs = query_stride / key_ext;
        SB_PAR(if ((size_t)n > SB_PAR_MIN))
        for (int64_t r = 0; r < rows; r++) {
            int64_t query = query_lo + (r / qs) % query_ext;
            /* keys [first, keep) of the row are kept */
            int64_t keep = query - key_lo + 1, first = window > 0 ? query - window + 1 - key_lo : 0;
            keep = keep < 0 ? 0 : keep > key_ext ? key_ext : keep;
            first = first < 0 ? 0 : first > keep ? keep : first;
            const float *x = inp + r * key_ext;
            float *y = out + r * key_ext;
            for (int64_t k = 0; k < first; k++)
                y[k] = -FLT_MAX;
            for (int64_t k = first; k < keep; k++)
                y[k] = x[k];
            for (int64_t k = keep; k < key_ext; k++)
                y[k] = -FLT_MAX;
        }
        return;
    }
    SB_PAR(if ((size_t)n > SB_PAR_MIN))
    for (int64_t e = 0; e < n; e++) {
        int64_t key = key_lo + (e / key_stride) % key_ext;
        int64_t query = query_lo + (e / query_stride) % query_ext;
        out[e] = key > query || (window > 0 && query - key >= window) ? -FLT_MAX : inp[e];
    }
}

/* ---- softmax cross-entropy over the last axis ---- */

void sb_xent_partial_picked(float *picked, const float *logits,
                            const int32_t *labels, int M, int V, int v0)
{
    for (int m = 0; m < M; m++) {
        int32_t y = labels[m];
        picked[m] = (y >= v0 && y < v0 + V) ? logits[(size_t)m * V + (y - v0)]
                                            : 0.0f;
    }
}

void sb_xent_loss(float *loss, const float *mx, const float *se,
                  const float *picked, const int32_t *labels, int M)
{
    for (int m = 0; m < M; m++)
        loss[m] = labels[m] < 0 ? 0.0f : logf(se[m]) + mx[m] - picked[m];
}

void sb_softmax_xent_forward(float *loss, float *mx, float *se,
                             const float *logits, const int32_t *labels, int M,
                             int V)
{
    sb_softmax_partial_max(mx, logits, M, V, 1);
    sb_softmax_partial_sumexp(se, logits, mx, M, V, 1);
    sb_xent_partial_picked(loss, logits, labels, M, V, 0); // loss = picked
    sb_xent_loss(loss, mx, se, loss, labels, M);
}

void sb_softmax_xent_backward(float *dlogits, const float *dloss,
                              const float *logits, const float *mx,
                              const float *se, const int32_t *labels, int M,
                              int V, int v0)
{
    for (int m = 0; m < M; m++) {
        int32_t y = labels[m];
        if (y < 0)
            continue;
        const float *z = logits + (size_t)m * V;
        float *dz = dlogits + (size_t)m * V;
        float g = dloss[m], inv = 1.0f / se[m];
        // dz += g * softmax, then the one-hot term at the label
        int v = 0;
        v4f vmx = v4_splat(mx[m]), vgi = v4_splat(g * inv);
        for (; v + 4 <= V; v += 4)
            v4_store(dz + v, v4_load(dz + v) + exp4_fast(v4_load(z + v) - vmx) * vgi);
        for (; v < V; v++)
            dz[v] += g * (exp_fast(z[v] - mx[m]) * inv);
        if (y >= v0 && y < v0 + V)
            dz[y - v0] -= g;
    }
}

/* ---- two-pass statistics (robust when the mean dwarfs the spread) ---- */

void sb_norm_mean(float *mean, const float *sum, int n, long count)
{
    for (int i = 0; i < n; i++)
        mean[i] = (float)((double)sum[i] / (double)count);
}

void sb_norm_rstd(float *rstd, const float *sq, int n, long count, float eps)
{
    for (int i = 0; i < n; i++)
        rstd[i] = (float)(1.0 / sqrt((double)sq[i] / (double)count + (double)eps));
}

void sb_layernorm_centered(float *sq, const float *inp, const float *mean, int M, int D)
{
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * D;
        double q = 0.0, mu = mean[m];
        for (int d = 0; d < D; d++)
            q += (x[d] - mu) * (x[d] - mu);
        sq[m] = (float)q;
    }
}

void sb_batchnorm_centered(float *sq, const float *inp, const float *mean, int B, int C, int HW)
{
    for (int c = 0; c < C; c++) {
        double q = 0.0, mu = mean[c];
        for (int b = 0; b < B; b++) {
            const float *x = inp + ((size_t)b * C + c) * HW;
            for (int i = 0; i < HW; i++)
                q += (x[i] - mu) * (x[i] - mu);
        }
        sq[c] = (float)q;
    }
}
