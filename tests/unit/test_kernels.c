/* tests/unit/test_kernels.c: the CPU kernels of include/shardbench/kernels.h.
 *
 * Forward kernels against naive loops; every backward against central finite
 * differences of its forward (a random linear loss sum(r*out) accumulated in
 * double); the split (sharded) forms against the unsharded ones when partial
 * results from 2-4 simulated shards are combined as the executor will
 * (all-reduce = sum or max over shards); conv/pool on spatial sub-boxes with
 * halos against the matching part of the full computation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/kernels.h"
#include "shardbench/model.h"

/* ---- helpers ---------------------------------------------------------- */

static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint32_t rng_u32(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

// uniform in [-1, 1)
static float frand(void) { return (float)(rng_u32() >> 8) / 8388608.0f - 1.0f; }

// Buffers of one test, freed by the teardown.
static void *arena[512];
static int n_arena;

static float *fzeros(size_t n)
{
    assert_true(n_arena < (int)(sizeof arena / sizeof arena[0]));
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    arena[n_arena++] = p;
    return p;
}

static float *frandn(size_t n, float scale)
{
    float *p = fzeros(n);
    for (size_t i = 0; i < n; i++)
        p[i] = scale * frand();
    return p;
}

static float *fcopy(const float *src, size_t n)
{
    float *p = fzeros(n);
    memcpy(p, src, n * sizeof(float));
    return p;
}

static int32_t *izeros(size_t n)
{
    assert_true(n_arena < (int)(sizeof arena / sizeof arena[0]));
    int32_t *p = calloc(n ? n : 1, sizeof(int32_t));
    assert_non_null(p);
    arena[n_arena++] = p;
    return p;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < n_arena; i++)
        free(arena[i]);
    n_arena = 0;
    return 0;
}

static void expect_close(const char *what, const float *got, const float *want,
                         size_t n, double atol, double rtol)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= atol + rtol * fabs((double)want[i])))
            fail_msg("%s[%zu]: got %.8g, want %.8g", what, i, got[i], want[i]);
    }
}

static double dotd(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* Central finite differences of loss() with respect to x (n), compared to
 * the analytic gradient g. Up to ~60 entries are checked. piecewise: the
 * function has kinks (relu, max); entries whose perturbation crosses one
 * (seen as a second difference beyond rounding) are skipped, at most a
 * quarter of them (or one). */
typedef double (*loss_fn)(void *ctx);

static void check_grad(const char *what, loss_fn loss, void *ctx, float *x,
                       const float *g, size_t n, int piecewise)
{
    // smooth: a step large against fp32 rounding; kinks: a small one, so
    // few perturbations cross a kink
    const float h = piecewise ? 1e-3f : 1e-2f;
    const double atol = 3e-3, rtol = 1e-2;
    double l0 = loss(ctx);
    size_t step = n > 60 ? n / 60 : 1;
    size_t start = step > 1 ? rng_u32() % step : 0;
    int checked = 0, skipped = 0;
    for (size_t i = start; i < n; i += step) {
        float x0 = x[i], xp = x0 + h, xm = x0 - h;
        x[i] = xp;
        double lp = loss(ctx);
        x[i] = xm;
        double lm = loss(ctx);
        x[i] = x0;
        double span = (double)xp - (double)xm;
        double fd = (lp - lm) / span;
        if (piecewise && fabs(lp + lm - 2.0 * l0) / span > 1e-3) {
            skipped++;
            continue;
        }
        checked++;
        if (!(fabs(fd - g[i]) <= atol + rtol * fabs(fd)))
            fail_msg("%s[%zu]: analytic %.7g, finite difference %.7g", what, i,
                     g[i], fd);
    }
    if (skipped > 1 && skipped * 4 > checked + skipped)
        fail_msg("%s: %d of %d checks skipped at kinks", what, skipped,
                 checked + skipped);
}

/* ---- GEMM --------------------------------------------------------------- */

// C (M,N) = alpha op(A) op(B) + beta C, in double
static void gemm_naive(int ta, int tb, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb,
                       float beta, float *C, int ldc)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0.0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k];
                double b = tb ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n];
                s += a * b;
            }
            C[(size_t)m * ldc + n] =
                (float)(alpha * s + beta * C[(size_t)m * ldc + n]);
        }
}

static void test_gemm(void **state)
{
    (void)state;
    const int M = 5, N = 7, K = 4, batch = 3;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
            size_t sa = (size_t)(ta ? K : M) * lda + 5;
            size_t sb = (size_t)(tb ? N : K) * ldb + 2;
            size_t sc = (size_t)M * ldc + 1;
            float *A = frandn(sa * batch, 1.0f), *B = frandn(sb * batch, 1.0f);
            float *C = frandn(sc * batch, 1.0f);
            float *want = fcopy(C, sc * batch), *got = fcopy(C, sc * batch);
            gemm_naive(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.3f, want, ldc);
            sb_gemm(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.3f, got, ldc);
            expect_close("gemm", got, want, sc, 1e-5, 1e-5);
            for (int i = 0; i < batch; i++)
                gemm_naive(ta, tb, M, N, K, 0.7f, A + i * sa, lda, B + i * sb,
                           ldb, 0.3f, want + i * sc, ldc);
            memcpy(got, C, sc * batch * sizeof(float));
            sb_gemm_batched(ta, tb, M, N, K, 0.7f, A, lda, (ptrdiff_t)sa, B,
                            ldb, (ptrdiff_t)sb, 0.3f, got, ldc, (ptrdiff_t)sc,
                            batch);
            // the first matrix was computed twice into `want`: recompute it
            memcpy(want, C, sc * sizeof(float));
            gemm_naive(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.3f, want, ldc);
            expect_close("gemm_batched", got, want, sc * batch, 1e-5, 1e-5);
        }
    // K == 0: C = beta C
    float C[4] = {1, 2, 3, 4};
    sb_gemm(0, 0, 2, 2, 0, 1.0f, NULL, 1, NULL, 2, 0.5f, C, 2);
    float want[4] = {0.5f, 1, 1.5f, 2};
    expect_close("gemm K=0", C, want, 4, 0, 0);
}

/* ---- conv2d ------------------------------------------------------------- */

typedef struct {
    int B, C, H, W, N, R, S, sh, sw, pt, pl, Ho, Wo, relu;
} conv_geom;

static size_t conv_in(const conv_geom *g) { return (size_t)g->B * g->C * g->H * g->W; }
static size_t conv_out(const conv_geom *g) { return (size_t)g->B * g->N * g->Ho * g->Wo; }
static size_t conv_w(const conv_geom *g) { return (size_t)g->N * g->C * g->R * g->S; }

static void conv_naive(float *out, const float *inp, const float *w,
                       const float *bias, const conv_geom *g)
{
    for (int b = 0; b < g->B; b++)
        for (int n = 0; n < g->N; n++)
            for (int y = 0; y < g->Ho; y++)
                for (int x = 0; x < g->Wo; x++) {
                    double s = bias ? bias[n] : 0.0;
                    for (int c = 0; c < g->C; c++)
                        for (int r = 0; r < g->R; r++)
                            for (int q = 0; q < g->S; q++) {
                                int iy = y * g->sh - g->pt + r;
                                int ix = x * g->sw - g->pl + q;
                                if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W)
                                    continue;
                                s += (double)inp[((size_t)(b * g->C + c) * g->H + iy) * g->W + ix] *
                                     w[((size_t)(n * g->C + c) * g->R + r) * g->S + q];
                            }
                    if (g->relu && s < 0)
                        s = 0;
                    out[((size_t)(b * g->N + n) * g->Ho + y) * g->Wo + x] = (float)s;
                }
}

static void conv_fwd(float *out, const float *inp, const float *w,
                     const float *bias, float *work, const conv_geom *g)
{
    sb_conv2d_forward(out, inp, w, bias, work, g->B, g->C, g->H, g->W, g->N,
                      g->R, g->S, g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo, 1, 1, 1,
                      g->relu);
}

static float *conv_work(const conv_geom *g)
{
    return fzeros(sb_conv2d_work_floats(g->C, g->R, g->S, g->N, g->Ho, g->Wo));
}

static void test_conv_forward_naive(void **state)
{
    (void)state;
    const conv_geom geoms[] = {
        {2, 3, 8, 7, 4, 3, 2, 2, 1, 1, 0, 4, 6, 1},  // stride, pad, relu
        {2, 5, 4, 3, 6, 1, 1, 1, 1, 0, 0, 4, 3, 0},  // 1x1: the direct path
        {1, 2, 9, 6, 3, 5, 3, 1, 2, -1, 1, 4, 3, 1}, // negative pad_top (halo)
        {1, 3, 11, 11, 2, 11, 11, 4, 4, 0, 0, 1, 1, 0}, // alexnet-like window
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
        const conv_geom *g = &geoms[k];
        float *inp = frandn(conv_in(g), 1.0f), *w = frandn(conv_w(g), 0.5f);
        float *bias = frandn((size_t)g->N, 0.5f);
        float *want = fzeros(conv_out(g)), *got = fzeros(conv_out(g));
        conv_naive(want, inp, w, bias, g);
        conv_fwd(got, inp, w, bias, conv_work(g), g);
        expect_close("conv2d_forward", got, want, conv_out(g), 1e-5, 1e-5);
    }
}

/* The oneDNN path (k_conv_dnnl.c) against the im2col kernels: forward
 * overwrites (relu fused), backward data and filter accumulate into
 * pre-filled buffers; geometries oneDNN cannot take (negative padding of a
 * halo box) are declined, never computed wrong. Skipped without oneDNN. */
static void test_conv_dnnl(void **state)
{
    (void)state;
    if (!sb_dnnl_available()) {
        print_message("[  SKIP    ] built without oneDNN\n");
        skip();
    }
    const conv_geom geoms[] = {
        {2, 3, 8, 7, 4, 3, 2, 2, 1, 1, 0, 4, 6, 1},      // stride, pad, relu
        {2, 5, 4, 3, 6, 1, 1, 1, 1, 0, 0, 4, 3, 0},      // 1x1
        {2, 3, 23, 23, 8, 11, 11, 4, 4, 0, 0, 4, 4, 1},  // alexnet conv1 shape, smaller
        {3, 16, 13, 13, 24, 3, 3, 1, 1, 1, 1, 13, 13, 1}, // 3x3 same
        {2, 8, 12, 10, 8, 5, 5, 1, 1, 2, 2, 12, 10, 0},  // 5x5 same
        {2, 4, 9, 9, 6, 3, 3, 2, 2, 1, 1, 4, 4, 0},      // stride 2, right padding 0
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
        const conv_geom *g = &geoms[k];
        float *inp = frandn(conv_in(g), 1.0f), *w = frandn(conv_w(g), 0.5f);
        float *want = fzeros(conv_out(g)), *got = fzeros(conv_out(g));
        conv_fwd(want, inp, w, NULL, conv_work(g), g);
        for (size_t i = 0; i < conv_out(g); i++)
            got[i] = 777.0f; /* overwritten */
        assert_int_equal(sb_dnnl_conv2d_forward(got, inp, w, g->B, g->C, g->H, g->W, g->N, g->R,
                                                g->S, g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo, 1,
                                                1, 1, g->relu),
                         0);
        expect_close("dnnl conv2d_forward", got, want, conv_out(g), 1e-4, 1e-4);
        /* backward: dout (masked by the caller), accumulate into prefilled buffers */
        float *dout = frandn(conv_out(g), 1.0f);
        float *di_want = frandn(conv_in(g), 1.0f), *di_got = fcopy(di_want, conv_in(g));
        float *dw_want = frandn(conv_w(g), 1.0f), *dw_got = fcopy(dw_want, conv_w(g));
        sb_conv2d_backward_data(di_want, conv_work(g), dout, NULL, w, g->B, g->C, g->H, g->W,
                                g->N, g->R, g->S, g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo, 1, 1,
                                1);
        sb_conv2d_backward_filter(dw_want, NULL, conv_work(g), dout, NULL, inp, g->B, g->C, g->H,
                                  g->W, g->N, g->R, g->S, g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo,
                                  1, 1, 1);
        assert_int_equal(sb_dnnl_conv2d_backward_data(di_got, dout, w, g->B, g->C, g->H, g->W,
                                                      g->N, g->R, g->S, g->sh, g->sw, g->pt,
                                                      g->pl, g->Ho, g->Wo, 1, 1, 1),
                         0);
        assert_int_equal(sb_dnnl_conv2d_backward_filter(dw_got, dout, inp, g->B, g->C, g->H,
                                                        g->W, g->N, g->R, g->S, g->sh, g->sw,
                                                        g->pt, g->pl, g->Ho, g->Wo, 1, 1, 1),
                         0);
        expect_close("dnnl conv2d_backward_data (accumulated)", di_got, di_want, conv_in(g), 1e-4,
                     1e-4);
        expect_close("dnnl conv2d_backward_filter (accumulated)", dw_got, dw_want, conv_w(g),
                     1e-3, 1e-4);
    }
    /* a halo box (negative local padding): declined, nothing written */
    const conv_geom h = {1, 2, 9, 6, 3, 5, 3, 1, 2, -1, 1, 4, 3, 1};
    float *inp = frandn(conv_in(&h), 1.0f), *w = frandn(conv_w(&h), 0.5f);
    float *out = fzeros(conv_out(&h));
    assert_int_equal(sb_dnnl_conv2d_forward(out, inp, w, h.B, h.C, h.H, h.W, h.N, h.R, h.S, h.sh,
                                            h.sw, h.pt, h.pl, h.Ho, h.Wo, 1, 1, 1, h.relu),
                     -1);
    for (size_t i = 0; i < conv_out(&h); i++)
        assert_true(out[i] == 0.0f);
}

/* ---- grouped, depthwise, dilated conv and patch embedding ---------------- */

typedef struct {
    int B, C, H, W, N, R, S, sh, sw, pt, pl, Ho, Wo, dh, dw, G;
    int dnnl; /* 1: oneDNN takes it (no halo padding) */
} gconv_geom;

static size_t gconv_in(const gconv_geom *g) { return (size_t)g->B * g->C * g->H * g->W; }
static size_t gconv_out(const gconv_geom *g) { return (size_t)g->B * g->N * g->Ho * g->Wo; }
static size_t gconv_w(const gconv_geom *g) { return (size_t)g->N * (g->C / g->G) * g->R * g->S; }

/* The definition, loop by loop: output channel n of group q = n / (N/G)
 * reads input channels q*(C/G) + c through filter w[n][c][r][s] (N, C/G, R, S)
 * at rows y*sh - pt + r*dh, columns x*sw - pl + s*dw. Forward into out
 * (when out), and the adjoint of dout into dinp and dw (when dout). */
static void gconv_naive(const gconv_geom *g, const float *inp, const float *w, float *out,
                        const float *dout, float *dinp, float *dw)
{
    int Cg = g->C / g->G, Ng = g->N / g->G;
    for (int b = 0; b < g->B; b++)
        for (int n = 0; n < g->N; n++)
            for (int y = 0; y < g->Ho; y++)
                for (int x = 0; x < g->Wo; x++) {
                    size_t oi = ((size_t)(b * g->N + n) * g->Ho + y) * g->Wo + x;
                    double s = 0.0;
                    for (int c = 0; c < Cg; c++)
                        for (int r = 0; r < g->R; r++)
                            for (int q = 0; q < g->S; q++) {
                                int iy = y * g->sh - g->pt + r * g->dh;
                                int ix = x * g->sw - g->pl + q * g->dw;
                                if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W)
                                    continue;
                                int ci = n / Ng * Cg + c;
                                size_t ii = ((size_t)(b * g->C + ci) * g->H + iy) * g->W + ix;
                                size_t wi = ((size_t)(n * Cg + c) * g->R + r) * g->S + q;
                                s += (double)inp[ii] * w[wi];
                                if (dout) {
                                    dinp[ii] += dout[oi] * w[wi];
                                    dw[wi] += dout[oi] * inp[ii];
                                }
                            }
                    if (out)
                        out[oi] = (float)s;
                }
}

/* The im2col kernels and oneDNN against the definition: grouped, depthwise
 * (G = C = N), dilated, both with a halo box (negative padding), and patch
 * embedding (kernel = stride, ViT's 16x16/16 at a small scale). Forward
 * overwrites; backward data and filter accumulate into prefilled buffers. */
static void test_conv_grouped_dilated(void **state)
{
    (void)state;
    const gconv_geom geoms[] = {
        {2, 8, 9, 9, 12, 3, 3, 1, 1, 2, 2, 9, 9, 2, 2, 4, 1},     // grouped, dilated 2, "same"
        {2, 6, 8, 8, 6, 3, 3, 2, 2, 1, 1, 4, 4, 1, 1, 6, 1},      // depthwise 3x3 / 2
        {1, 6, 7, 7, 12, 3, 3, 1, 1, 1, 1, 7, 7, 1, 1, 6, 1},     // depthwise, multiplier 2
        {2, 3, 10, 11, 4, 3, 2, 1, 2, 1, 0, 8, 4, 2, 3, 1, 1},    // dilated [2, 3], not grouped
        {2, 4, 9, 6, 4, 3, 3, 1, 1, -1, 1, 3, 6, 2, 1, 2, 0},     // grouped + dilated halo box
        {2, 3, 16, 16, 8, 4, 4, 4, 4, 0, 0, 4, 4, 1, 1, 1, 1},    // patch embedding 4x4/4
        {1, 3, 32, 32, 16, 16, 16, 16, 16, 0, 0, 2, 2, 1, 1, 1, 1}, // ViT's 16x16/16
        {3, 8, 5, 5, 8, 1, 1, 1, 1, 0, 0, 5, 5, 1, 1, 4, 1},      // grouped 1x1: the direct path
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
        const gconv_geom *g = &geoms[k];
        float *inp = frandn(gconv_in(g), 1.0f), *w = frandn(gconv_w(g), 0.5f);
        float *dout = frandn(gconv_out(g), 1.0f);
        float *want = fzeros(gconv_out(g)), *got = fzeros(gconv_out(g));
        float *di_want = frandn(gconv_in(g), 1.0f), *dw_want = frandn(gconv_w(g), 1.0f);
        float *di_got = fcopy(di_want, gconv_in(g)), *dw_got = fcopy(dw_want, gconv_w(g));
        float *di_dnnl = fcopy(di_want, gconv_in(g)), *dw_dnnl = fcopy(dw_want, gconv_w(g));
        gconv_naive(g, inp, w, want, dout, di_want, dw_want);
        float *work = fzeros(sb_conv2d_work_floats(g->C, g->R, g->S, g->N, g->Ho, g->Wo));
        for (size_t i = 0; i < gconv_out(g); i++)
            got[i] = 777.0f; /* overwritten */
        sb_conv2d_forward(got, inp, w, NULL, work, g->B, g->C, g->H, g->W, g->N, g->R, g->S,
                          g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo, g->dh, g->dw, g->G, 0);
        expect_close("grouped/dilated conv2d_forward", got, want, gconv_out(g), 1e-4, 1e-4);
        sb_conv2d_backward_data(di_got, work, dout, NULL, w, g->B, g->C, g->H, g->W, g->N, g->R,
                                g->S, g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo, g->dh, g->dw, g->G);
        sb_conv2d_backward_filter(dw_got, NULL, work, dout, NULL, inp, g->B, g->C, g->H, g->W,
                                  g->N, g->R, g->S, g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo, g->dh,
                                  g->dw, g->G);
        expect_close("grouped/dilated conv2d_backward_data", di_got, di_want, gconv_in(g), 1e-4,
                     1e-4);
        expect_close("grouped/dilated conv2d_backward_filter", dw_got, dw_want, gconv_w(g), 1e-3,
                     1e-4);
        if (!sb_dnnl_available())
            continue;
        int rc = sb_dnnl_conv2d_forward(got, inp, w, g->B, g->C, g->H, g->W, g->N, g->R, g->S,
                                        g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo, g->dh, g->dw,
                                        g->G, 0);
        assert_int_equal(rc, g->dnnl ? 0 : -1);
        if (!g->dnnl)
            continue;
        expect_close("dnnl grouped/dilated conv2d_forward", got, want, gconv_out(g), 1e-4, 1e-4);
        assert_int_equal(sb_dnnl_conv2d_backward_data(di_dnnl, dout, w, g->B, g->C, g->H, g->W,
                                                      g->N, g->R, g->S, g->sh, g->sw, g->pt,
                                                      g->pl, g->Ho, g->Wo, g->dh, g->dw, g->G),
                         0);
        assert_int_equal(sb_dnnl_conv2d_backward_filter(dw_dnnl, dout, inp, g->B, g->C, g->H,
                                                        g->W, g->N, g->R, g->S, g->sh, g->sw,
                                                        g->pt, g->pl, g->Ho, g->Wo, g->dh, g->dw,
                                                        g->G),
                         0);
        expect_close("dnnl grouped/dilated conv2d_backward_data", di_dnnl, di_want, gconv_in(g),
                     1e-4, 1e-4);
        expect_close("dnnl grouped/dilated conv2d_backward_filter", dw_dnnl, dw_want, gconv_w(g),
                     1e-3, 1e-4);
    }
}

typedef struct {
    const conv_geom *g;
    float *inp, *w, *bias, *out, *r, *work;
} conv_ctx;

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    conv_fwd(c->out, c->inp, c->w, c->bias, c->work, c->g);
    return dotd(c->r, c->out, conv_out(c->g));
}

static void test_conv_backward_fd(void **state)
{
    (void)state;
    const conv_geom geoms[] = {
        {2, 2, 6, 5, 3, 3, 3, 2, 1, 1, 1, 3, 5, 1},
        {2, 3, 3, 4, 2, 1, 1, 1, 1, 0, 0, 3, 4, 0}, // direct 1x1 path
        {1, 2, 5, 5, 2, 3, 3, 2, 2, 2, 0, 3, 2, 0}, // padding on one side only
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
        const conv_geom *g = &geoms[k];
        conv_ctx c = {g, frandn(conv_in(g), 1.0f), frandn(conv_w(g), 0.5f),
                      frandn((size_t)g->N, 0.5f), fzeros(conv_out(g)),
                      frandn(conv_out(g), 1.0f), conv_work(g)};
        float *out = fzeros(conv_out(g));
        conv_fwd(out, c.inp, c.w, c.bias, c.work, g);
        const float *mask = g->relu ? out : NULL;
        float *dinp = fzeros(conv_in(g)), *dw = fzeros(conv_w(g));
        float *db = fzeros((size_t)g->N);
        sb_conv2d_backward_data(dinp, c.work, c.r, mask, c.w, g->B, g->C, g->H,
                                g->W, g->N, g->R, g->S, g->sh, g->sw, g->pt,
                                g->pl, g->Ho, g->Wo, 1, 1, 1);
        sb_conv2d_backward_filter(dw, db, c.work, c.r, mask, c.inp, g->B, g->C,
                                  g->H, g->W, g->N, g->R, g->S, g->sh, g->sw,
                                  g->pt, g->pl, g->Ho, g->Wo, 1, 1, 1);
        check_grad("conv dinp", conv_loss, &c, c.inp, dinp, conv_in(g), g->relu);
        check_grad("conv dw", conv_loss, &c, c.w, dw, conv_w(g), g->relu);
        check_grad("conv dbias", conv_loss, &c, c.bias, db, (size_t)g->N, g->relu);
    }
}

// Rows [lo, lo+n) and cols [lo2, lo2+n2) of an NCHW tensor, as a box.
static void nchw_box(int *lo, int *size, int B, int C, int y0, int ny, int x0,
                     int nx)
{
    lo[0] = 0, lo[1] = 0, lo[2] = y0, lo[3] = x0;
    size[0] = B, size[1] = C, size[2] = ny, size[3] = nx;
}

/* A conv on an output sub-box, fed the input sub-box with halo: its output
 * equals that part of the full output, and its backward pieces sum (over
 * the tiles) to the full backward. One tile is given an extra input row, so
 * its local pad_top is negative. */
static void test_conv_halo(void **state)
{
    (void)state;
    const conv_geom geoms[] = {
        {2, 2, 11, 9, 3, 3, 3, 2, 2, 1, 1, 6, 5, 1},
        {1, 3, 8, 7, 2, 5, 5, 1, 1, 2, 2, 8, 7, 1},
        {1, 2, 9, 9, 2, 3, 3, 2, 2, 0, 0, 4, 4, 0},
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
        const conv_geom *g = &geoms[k];
        float *inp = frandn(conv_in(g), 1.0f), *w = frandn(conv_w(g), 0.5f);
        float *bias = frandn((size_t)g->N, 0.5f), *r = frandn(conv_out(g), 1.0f);
        float *out = fzeros(conv_out(g)), *work = conv_work(g);
        conv_fwd(out, inp, w, bias, work, g);
        const float *mask = g->relu ? out : NULL;
        float *dinp = fzeros(conv_in(g)), *dw = fzeros(conv_w(g));
        float *db = fzeros((size_t)g->N);
        sb_conv2d_backward_data(dinp, work, r, mask, w, g->B, g->C, g->H, g->W,
                                g->N, g->R, g->S, g->sh, g->sw, g->pt, g->pl,
                                g->Ho, g->Wo, 1, 1, 1);
        sb_conv2d_backward_filter(dw, db, work, r, mask, inp, g->B, g->C, g->H,
                                  g->W, g->N, g->R, g->S, g->sh, g->sw, g->pt,
                                  g->pl, g->Ho, g->Wo, 1, 1, 1);
        float *dinp_sum = fzeros(conv_in(g)), *dw_sum = fzeros(conv_w(g));
        float *db_sum = fzeros((size_t)g->N);
        int ycut[] = {0, g->Ho / 3, (2 * g->Ho) / 3 + 1, g->Ho};
        int xcut[] = {0, g->Wo / 2, g->Wo};
        int full_in[4] = {g->B, g->C, g->H, g->W};
        int full_out[4] = {g->B, g->N, g->Ho, g->Wo};
        for (int ty = 0; ty < 3; ty++)
            for (int tx = 0; tx < 2; tx++) {
                int oy0 = ycut[ty], oy1 = ycut[ty + 1];
                int ox0 = xcut[tx], ox1 = xcut[tx + 1];
                int iy0, iy1, px, ix0, ix1, py;
                sb_window_input_range(oy0, oy1, g->R, g->sh, g->pt, g->H, &iy0,
                                      &iy1, &py);
                sb_window_input_range(ox0, ox1, g->S, g->sw, g->pl, g->W, &ix0,
                                      &ix1, &px);
                if (ty == 2 && iy0 > 0) { // one more row than needed
                    iy0--;
                    py--;
                }
                conv_geom l = *g;
                l.H = iy1 - iy0, l.W = ix1 - ix0, l.pt = py, l.pl = px;
                l.Ho = oy1 - oy0, l.Wo = ox1 - ox0;
                int ilo[4], isz[4], olo[4], osz[4];
                nchw_box(ilo, isz, g->B, g->C, iy0, l.H, ix0, l.W);
                nchw_box(olo, osz, g->B, g->N, oy0, l.Ho, ox0, l.Wo);
                float *lin = fzeros(conv_in(&l)), *lout = fzeros(conv_out(&l));
                float *want = fzeros(conv_out(&l)), *lr = fzeros(conv_out(&l));
                float *lwork = conv_work(&l);
                sb_box_pack(lin, inp, 4, full_in, ilo, isz);
                sb_box_pack(want, out, 4, full_out, olo, osz);
                sb_box_pack(lr, r, 4, full_out, olo, osz);
                conv_fwd(lout, lin, w, bias, lwork, &l);
                expect_close("conv tile forward", lout, want, conv_out(&l),
                             1e-5, 1e-5);
                float *ldinp = fzeros(conv_in(&l));
                const float *lmask = g->relu ? lout : NULL;
                sb_conv2d_backward_data(ldinp, lwork, lr, lmask, w, l.B, l.C,
                                        l.H, l.W, l.N, l.R, l.S, l.sh, l.sw,
                                        l.pt, l.pl, l.Ho, l.Wo, 1, 1, 1);
                sb_conv2d_backward_filter(dw_sum, db_sum, lwork, lr, lmask,
                                          lin, l.B, l.C, l.H, l.W, l.N, l.R,
                                          l.S, l.sh, l.sw, l.pt, l.pl, l.Ho,
                                          l.Wo, 1, 1, 1);
                sb_box_unpack_add(dinp_sum, 4, full_in, ilo, isz, ldinp);
            }
        expect_close("conv tiles dinp", dinp_sum, dinp, conv_in(g), 1e-5, 1e-4);
        expect_close("conv tiles dw", dw_sum, dw, conv_w(g), 1e-4, 1e-4);
        expect_close("conv tiles dbias", db_sum, db, (size_t)g->N, 1e-4, 1e-4);
    }
}

static void test_window_input_range(void **state)
{
    (void)state;
    int lo, hi, pad;
    // AlexNet conv2-like: window 5, stride 1, pad 2, 27 rows
    sb_window_input_range(0, 9, 5, 1, 2, 27, &lo, &hi, &pad);
    assert_int_equal(lo, 0), assert_int_equal(hi, 11), assert_int_equal(pad, 2);
    sb_window_input_range(9, 18, 5, 1, 2, 27, &lo, &hi, &pad);
    assert_int_equal(lo, 7), assert_int_equal(hi, 20), assert_int_equal(pad, 0);
    sb_window_input_range(18, 27, 5, 1, 2, 27, &lo, &hi, &pad);
    assert_int_equal(lo, 16), assert_int_equal(hi, 27), assert_int_equal(pad, 0);
    // pool 3, stride 2, no pad: 55 -> 27
    sb_window_input_range(13, 27, 3, 2, 0, 55, &lo, &hi, &pad);
    assert_int_equal(lo, 26), assert_int_equal(hi, 55), assert_int_equal(pad, 0);
    sb_window_input_range(3, 3, 3, 2, 0, 55, &lo, &hi, &pad);
    assert_int_equal(lo, hi);
}

/* ---- pooling ------------------------------------------------------------ */

typedef struct {
    int B, C, H, W, R, S, sh, sw, pt, pl, Ho, Wo;
} pool_geom;

static size_t pool_in(const pool_geom *g) { return (size_t)g->B * g->C * g->H * g->W; }
static size_t pool_out(const pool_geom *g) { return (size_t)g->B * g->C * g->Ho * g->Wo; }

// kind 0: max; 1: avg counting padding; 2: avg over input positions only
static void pool_fwd(float *out, const float *inp, const pool_geom *g, int kind)
{
    if (kind == 0)
        sb_maxpool2d_forward(out, inp, g->B, g->C, g->H, g->W, g->R, g->S,
                             g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo);
    else
        sb_avgpool2d_forward(out, inp, g->B, g->C, g->H, g->W, g->R, g->S,
                             g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo,
                             kind == 1);
}

static void pool_bwd(float *dinp, const float *dout, const float *inp,
                     const pool_geom *g, int kind)
{
    if (kind == 0)
        sb_maxpool2d_backward(dinp, dout, inp, g->B, g->C, g->H, g->W, g->R,
                              g->S, g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo);
    else
        sb_avgpool2d_backward(dinp, dout, g->B, g->C, g->H, g->W, g->R, g->S,
                              g->sh, g->sw, g->pt, g->pl, g->Ho, g->Wo,
                              kind == 1);
}

static void pool_naive(float *out, const float *inp, const pool_geom *g,
                       int kind)
{
    for (int p = 0; p < g->B * g->C; p++)
        for (int y = 0; y < g->Ho; y++)
            for (int x = 0; x < g->Wo; x++) {
                double best = -INFINITY, sum = 0.0;
                int cnt = 0;
                for (int r = 0; r < g->R; r++)
                    for (int s = 0; s < g->S; s++) {
                        int iy = y * g->sh - g->pt + r, ix = x * g->sw - g->pl + s;
                        if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W)
                            continue;
                        double v = inp[((size_t)p * g->H + iy) * g->W + ix];
                        best = v > best ? v : best;
                        sum += v;
                        cnt++;
                    }
                double o = kind == 0 ? best
                           : kind == 1 ? sum / (g->R * g->S)
                                       : sum / cnt;
                out[((size_t)p * g->Ho + y) * g->Wo + x] = (float)o;
            }
}

typedef struct {
    const pool_geom *g;
    int kind;
    float *inp, *out, *r;
} pool_ctx;

static double pool_loss(void *p)
{
    pool_ctx *c = p;
    pool_fwd(c->out, c->inp, c->g, c->kind);
    return dotd(c->r, c->out, pool_out(c->g));
}

static void test_pool(void **state)
{
    (void)state;
    const pool_geom geoms[] = {
        {2, 2, 7, 6, 3, 3, 2, 2, 1, 1, 4, 3},
        {1, 3, 9, 9, 3, 3, 2, 2, 0, 0, 4, 4},
        {1, 2, 5, 5, 3, 3, 1, 1, 1, 1, 5, 5}, // inception's avg pool
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++)
        for (int kind = 0; kind < 3; kind++) {
            const pool_geom *g = &geoms[k];
            pool_ctx c = {g, kind, frandn(pool_in(g), 1.0f),
                          fzeros(pool_out(g)), frandn(pool_out(g), 1.0f)};
            float *want = fzeros(pool_out(g));
            pool_naive(want, c.inp, g, kind);
            pool_fwd(c.out, c.inp, g, kind);
            expect_close("pool forward", c.out, want, pool_out(g), 1e-6, 1e-6);
            float *dinp = fzeros(pool_in(g));
            pool_bwd(dinp, c.r, c.inp, g, kind);
            check_grad("pool dinp", pool_loss, &c, c.inp, dinp, pool_in(g),
                       kind == 0);
        }
}

static void test_pool_halo(void **state)
{
    (void)state;
    const pool_geom geoms[] = {
        {2, 2, 13, 11, 3, 3, 2, 2, 1, 1, 7, 6},
        {1, 2, 10, 9, 3, 3, 1, 1, 1, 1, 10, 9},
        {1, 1, 15, 15, 3, 3, 2, 2, 0, 0, 7, 7},
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++)
        for (int kind = 0; kind < 3; kind++) {
            const pool_geom *g = &geoms[k];
            float *inp = frandn(pool_in(g), 1.0f), *r = frandn(pool_out(g), 1.0f);
            float *out = fzeros(pool_out(g)), *dinp = fzeros(pool_in(g));
            pool_fwd(out, inp, g, kind);
            pool_bwd(dinp, r, inp, g, kind);
            float *dinp_sum = fzeros(pool_in(g));
            int full_in[4] = {g->B, g->C, g->H, g->W};
            int full_out[4] = {g->B, g->C, g->Ho, g->Wo};
            int ycut[] = {0, 2, g->Ho / 2 + 1, g->Ho}, xcut[] = {0, g->Wo / 2, g->Wo};
            for (int ty = 0; ty < 3; ty++)
                for (int tx = 0; tx < 2; tx++) {
                    pool_geom l = *g;
                    int oy0 = ycut[ty], ox0 = xcut[tx], iy0, iy1, ix0, ix1;
                    l.Ho = ycut[ty + 1] - oy0, l.Wo = xcut[tx + 1] - ox0;
                    sb_window_input_range(oy0, oy0 + l.Ho, g->R, g->sh, g->pt,
                                          g->H, &iy0, &iy1, &l.pt);
                    sb_window_input_range(ox0, ox0 + l.Wo, g->S, g->sw, g->pl,
                                          g->W, &ix0, &ix1, &l.pl);
                    l.H = iy1 - iy0, l.W = ix1 - ix0;
                    int ilo[4], isz[4], olo[4], osz[4];
                    nchw_box(ilo, isz, g->B, g->C, iy0, l.H, ix0, l.W);
                    nchw_box(olo, osz, g->B, g->C, oy0, l.Ho, ox0, l.Wo);
                    float *lin = fzeros(pool_in(&l)), *lout = fzeros(pool_out(&l));
                    float *want = fzeros(pool_out(&l)), *lr = fzeros(pool_out(&l));
                    float *ldinp = fzeros(pool_in(&l));
                    sb_box_pack(lin, inp, 4, full_in, ilo, isz);
                    sb_box_pack(want, out, 4, full_out, olo, osz);
                    sb_box_pack(lr, r, 4, full_out, olo, osz);
                    pool_fwd(lout, lin, &l, kind);
                    expect_close("pool tile forward", lout, want, pool_out(&l),
                                 1e-6, 1e-6);
                    pool_bwd(ldinp, lr, lin, &l, kind);
                    sb_box_unpack_add(dinp_sum, 4, full_in, ilo, isz, ldinp);
                }
            expect_close("pool tiles dinp", dinp_sum, dinp, pool_in(g), 1e-6,
                         1e-5);
        }
}

/* ---- dense -------------------------------------------------------------- */

typedef struct {
    int M, K, N, relu;
    float *inp, *w, *bias, *out, *r;
} dense_ctx;

static double dense_loss(void *p)
{
    dense_ctx *c = p;
    sb_dense_forward(c->out, c->inp, c->w, c->bias, c->M, c->K, c->N, c->relu);
    return dotd(c->r, c->out, (size_t)c->M * c->N);
}

static void test_dense(void **state)
{
    (void)state;
    for (int relu = 0; relu < 2; relu++) {
        dense_ctx c = {6, 5, 4, relu, NULL, NULL, NULL, NULL, NULL};
        size_t mk = (size_t)c.M * c.K, kn = (size_t)c.K * c.N, mn = (size_t)c.M * c.N;
        c.inp = frandn(mk, 1.0f), c.w = frandn(kn, 1.0f);
        c.bias = frandn((size_t)c.N, 1.0f);
        c.out = fzeros(mn), c.r = frandn(mn, 1.0f);
        // forward against naive
        float *want = fzeros(mn);
        for (int m = 0; m < c.M; m++)
            memcpy(want + (size_t)m * c.N, c.bias, sizeof(float) * c.N);
        gemm_naive(0, 0, c.M, c.N, c.K, 1.0f, c.inp, c.K, c.w, c.N, 1.0f, want, c.N);
        if (relu)
            sb_relu_forward(want, want, mn);
        float *out = fzeros(mn);
        sb_dense_forward(out, c.inp, c.w, c.bias, c.M, c.K, c.N, relu);
        expect_close("dense forward", out, want, mn, 1e-5, 1e-5);
        // backward accumulates: start from ones
        float *dinp = fzeros(mk), *dw = fzeros(kn), *db = fzeros((size_t)c.N);
        for (size_t i = 0; i < mk; i++)
            dinp[i] = 1.0f;
        sb_dense_backward(dinp, dw, db, fzeros(mn), c.r, relu ? out : NULL,
                          c.inp, c.w, c.M, c.K, c.N);
        for (size_t i = 0; i < mk; i++)
            dinp[i] -= 1.0f;
        check_grad("dense dinp", dense_loss, &c, c.inp, dinp, mk, relu);
        check_grad("dense dw", dense_loss, &c, c.w, dw, kn, relu);
        check_grad("dense dbias", dense_loss, &c, c.bias, db, (size_t)c.N, relu);
    }
}

/* ---- embedding ---------------------------------------------------------- */

typedef struct {
    int N, D, V;
    const int32_t *idx;
    float *table, *out, *r;
} emb_ctx;

static double emb_loss(void *p)
{
    emb_ctx *c = p;
    sb_embedding_forward(c->out, c->idx, c->table, c->N, c->D, 0, c->V);
    return dotd(c->r, c->out, (size_t)c->N * c->D);
}

static void test_embedding(void **state)
{
    (void)state;
    const int N = 9, D = 3, V = 10;
    int32_t *idx = izeros((size_t)N);
    int32_t ids[] = {3, 0, 9, 3, 7, 5, 2, 8, 3};
    memcpy(idx, ids, sizeof ids);
    emb_ctx c = {N, D, V, idx, frandn((size_t)V * D, 1.0f),
                 fzeros((size_t)N * D), frandn((size_t)N * D, 1.0f)};
    float *dtable = fzeros((size_t)V * D);
    sb_embedding_backward(dtable, c.r, idx, N, D, 0, V);
    check_grad("embedding dtable", emb_loss, &c, c.table, dtable,
               (size_t)V * D, 0);
    sb_embedding_forward(c.out, idx, c.table, N, D, 0, V);
    for (int n = 0; n < N; n++)
        expect_close("embedding forward", c.out + n * D, c.table + ids[n] * D,
                     (size_t)D, 0, 0);
    // vocab shards [0,3) [3,5) [5,8) [8,10): outputs sum to the full gather
    // (the all-reduce), gradients are the full one's rows
    int cut[] = {0, 3, 5, 8, 10};
    float *sum = fzeros((size_t)N * D);
    for (int s = 0; s < 4; s++) {
        int v0 = cut[s], v1 = cut[s + 1];
        float *out = fzeros((size_t)N * D), *dt = fzeros((size_t)(v1 - v0) * D);
        sb_embedding_forward(out, idx, c.table + (size_t)v0 * D, N, D, v0, v1);
        for (size_t i = 0; i < (size_t)N * D; i++)
            sum[i] += out[i];
        sb_embedding_backward(dt, c.r, idx, N, D, v0, v1);
        expect_close("embedding shard dtable", dt, dtable + (size_t)v0 * D,
                     (size_t)(v1 - v0) * D, 0, 0);
    }
    expect_close("embedding shards forward", sum, c.out, (size_t)N * D, 0, 0);
}

/* ---- LSTM --------------------------------------------------------------- */

typedef struct {
    int B, X, Kh, H;
    float *x, *h_prev, *c_prev, *Wx, *Wh, *b;
    float *h, *c, *gates, *rh, *rc;
} cell_ctx;

static double cell_loss(void *p)
{
    cell_ctx *k = p;
    sb_lstm_cell_forward(k->h, k->c, k->gates, k->x, k->h_prev, k->c_prev,
                         k->Wx, k->Wh, k->b, k->B, k->X, k->Kh, k->H);
    size_t bh = (size_t)k->B * k->H;
    return dotd(k->rh, k->h, bh) + dotd(k->rc, k->c, bh);
}

static void test_lstm_cell(void **state)
{
    (void)state;
    const int shapes[][4] = {{2, 3, 4, 4}, {3, 2, 5, 3}}; // B, X, Kh, H
    for (int s = 0; s < 2; s++) {
        int B = shapes[s][0], X = shapes[s][1], Kh = shapes[s][2], H = shapes[s][3];
        size_t bh = (size_t)B * H, b4 = bh * 4;
        cell_ctx k = {B, X, Kh, H,
                      frandn((size_t)B * X, 1.0f), frandn((size_t)B * Kh, 1.0f),
                      frandn(bh, 1.0f), frandn((size_t)X * 4 * H, 0.7f),
                      frandn((size_t)Kh * 4 * H, 0.7f), frandn((size_t)4 * H, 0.5f),
                      fzeros(bh), fzeros(bh), fzeros(b4), frandn(bh, 1.0f),
                      frandn(bh, 1.0f)};
        cell_loss(&k);
        float *dx = fzeros((size_t)B * X), *dhp = fzeros((size_t)B * Kh);
        float *dcp = fzeros(bh), *dWx = fzeros((size_t)X * 4 * H);
        float *dWh = fzeros((size_t)Kh * 4 * H), *db = fzeros((size_t)4 * H);
        sb_lstm_cell_backward(dx, dhp, dcp, dWx, dWh, db, fzeros(b4), k.rh,
                              k.rc, k.gates, k.c, k.x, k.h_prev, k.c_prev,
                              k.Wx, k.Wh, B, X, Kh, H);
        check_grad("cell dx", cell_loss, &k, k.x, dx, (size_t)B * X, 0);
        check_grad("cell dh_prev", cell_loss, &k, k.h_prev, dhp, (size_t)B * Kh, 0);
        check_grad("cell dc_prev", cell_loss, &k, k.c_prev, dcp, bh, 0);
        check_grad("cell dWx", cell_loss, &k, k.Wx, dWx, (size_t)X * 4 * H, 0);
        check_grad("cell dWh", cell_loss, &k, k.Wh, dWh, (size_t)Kh * 4 * H, 0);
        check_grad("cell db", cell_loss, &k, k.b, db, (size_t)4 * H, 0);
    }
}

typedef struct {
    int L, T, B, X, H;
    float *x, *params, *h0, *c0, *y, *acts, *r;
} lstm_ctx;

static double lstm_loss(void *p)
{
    lstm_ctx *k = p;
    sb_lstm_forward(k->y, k->acts, k->x, k->params, k->h0, k->c0, k->L, k->T,
                    k->B, k->X, k->H);
    return dotd(k->r, k->y, (size_t)k->B * k->T * k->H);
}

static void test_lstm(void **state)
{
    (void)state;
    const int L = 2, T = 3, B = 2, X = 3, H = 4;
    size_t np = sb_lstm_params_floats(L, X, H), bh = (size_t)B * H;
    size_t nx = (size_t)B * T * X, ny = (size_t)B * T * H;
    for (int with_state = 0; with_state < 2; with_state++) {
        lstm_ctx k = {L, T, B, X, H, frandn(nx, 1.0f), frandn(np, 0.6f),
                      with_state ? frandn(L * bh, 1.0f) : NULL,
                      with_state ? frandn(L * bh, 1.0f) : NULL, fzeros(ny),
                      fzeros(sb_lstm_acts_floats(L, T, B, H)), frandn(ny, 1.0f)};
        lstm_loss(&k);
        // the same network, one sb_lstm_cell_forward per layer and step
        float *in = fzeros((size_t)T * B * X), *hs = fzeros((size_t)T * bh);
        float *cs = fzeros((size_t)T * bh), *g = fzeros(bh * 4);
        for (int t = 0; t < T; t++)
            for (int b = 0; b < B; b++)
                memcpy(in + ((size_t)t * B + b) * X, k.x + ((size_t)b * T + t) * X,
                       sizeof(float) * X);
        size_t off = 0;
        for (int l = 0; l < L; l++) {
            int Xl = l ? H : X;
            const float *Wx = k.params + off, *Wh = Wx + (size_t)Xl * 4 * H;
            const float *bb = Wh + (size_t)H * 4 * H;
            off += (size_t)Xl * 4 * H + (size_t)H * 4 * H + 4 * H;
            float *nh = fzeros((size_t)T * bh), *nc = fzeros((size_t)T * bh);
            for (int t = 0; t < T; t++)
                sb_lstm_cell_forward(
                    nh + t * bh, nc + t * bh, g, in + (size_t)t * B * Xl,
                    t ? nh + (t - 1) * bh : (k.h0 ? k.h0 + l * bh : NULL),
                    t ? nc + (t - 1) * bh : (k.c0 ? k.c0 + l * bh : NULL), Wx,
                    Wh, bb, B, Xl, H, H);
            in = nh, hs = nh, cs = nc;
        }
        (void)cs;
        assert_int_equal(off, np);
        for (int t = 0; t < T; t++)
            for (int b = 0; b < B; b++)
                expect_close("lstm forward vs cells", k.y + ((size_t)b * T + t) * H,
                             hs + ((size_t)t * B + b) * H, (size_t)H, 1e-6, 1e-5);
        float *dx = fzeros(nx), *dp = fzeros(np);
        sb_lstm_backward(dx, dp, fzeros(sb_lstm_work_floats(T, B, H)), k.r,
                         k.acts, k.x, k.params, k.h0, k.c0, L, T, B, X, H);
        check_grad("lstm dx", lstm_loss, &k, k.x, dx, nx, 0);
        // every parameter: sample through all of them in chunks
        for (size_t c0 = 0; c0 < np; c0 += 60)
            check_grad("lstm dparams", lstm_loss, &k, k.params + c0, dp + c0,
                       np - c0 < 60 ? np - c0 : 60, 0);
    }
}

/* ---- layer norm --------------------------------------------------------- */

typedef struct {
    int M, D;
    float *inp, *gamma, *beta, *out, *mean, *rstd, *r;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    sb_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->gamma, c->beta,
                         c->M, c->D, 1e-5f);
    return dotd(c->r, c->out, (size_t)c->M * c->D);
}

static void test_layernorm(void **state)
{
    (void)state;
    const int M = 3, D = 7;
    size_t n = (size_t)M * D;
    ln_ctx c = {M, D, frandn(n, 1.0f), frandn((size_t)D, 1.0f),
                frandn((size_t)D, 1.0f), fzeros(n), fzeros((size_t)M),
                fzeros((size_t)M), frandn(n, 1.0f)};
    ln_loss(&c);
    // forward against a two-pass double computation
    for (int m = 0; m < M; m++) {
        double mu = 0, var = 0;
        for (int d = 0; d < D; d++)
            mu += c.inp[m * D + d];
        mu /= D;
        for (int d = 0; d < D; d++)
            var += (c.inp[m * D + d] - mu) * (c.inp[m * D + d] - mu);
        var /= D;
        for (int d = 0; d < D; d++) {
            float want = (float)((c.inp[m * D + d] - mu) / sqrt(var + 1e-5) *
                                     c.gamma[d] + c.beta[d]);
            expect_close("layernorm forward", &c.out[m * D + d], &want, 1, 1e-5, 1e-5);
        }
    }
    float *dinp = fzeros(n), *dg = fzeros((size_t)D), *dbt = fzeros((size_t)D);
    sb_layernorm_backward(dinp, dg, dbt, c.r, c.inp, c.mean, c.rstd, c.gamma, M, D);
    check_grad("layernorm dinp", ln_loss, &c, c.inp, dinp, n, 0);
    check_grad("layernorm dgamma", ln_loss, &c, c.gamma, dg, (size_t)D, 0);
    check_grad("layernorm dbeta", ln_loss, &c, c.beta, dbt, (size_t)D, 0);
}

// Normalized axis D split into 4 uneven column shards; the caller's
// all-reduce is a sum over shards.
static void test_layernorm_sharded(void **state)
{
    (void)state;
    const int M = 4, D = 12, cut[] = {0, 2, 7, 9, 12};
    size_t n = (size_t)M * D;
    float *inp = frandn(n, 2.0f), *gamma = frandn((size_t)D, 1.0f);
    float *beta = frandn((size_t)D, 1.0f), *dout = frandn(n, 1.0f);
    for (size_t i = 0; i < n; i++)
        inp[i] += 0.5f; // a non-zero mean
    float *out = fzeros(n), *mean = fzeros((size_t)M), *rstd = fzeros((size_t)M);
    float *dinp = fzeros(n), *dg = fzeros((size_t)D), *dbt = fzeros((size_t)D);
    sb_layernorm_forward(out, mean, rstd, inp, gamma, beta, M, D, 1e-5f);
    sb_layernorm_backward(dinp, dg, dbt, dout, inp, mean, rstd, gamma, M, D);

    int dims[2] = {M, D};
    float *sum = fzeros((size_t)M), *sq = fzeros((size_t)M);
    float *s1 = fzeros((size_t)M), *s2 = fzeros((size_t)M);
    float *lin[4], *ldout[4];
    for (int s = 0; s < 4; s++) {
        int lo[2] = {0, cut[s]}, sz[2] = {M, cut[s + 1] - cut[s]};
        lin[s] = fzeros((size_t)M * sz[1]);
        ldout[s] = fzeros((size_t)M * sz[1]);
        sb_box_pack(lin[s], inp, 2, dims, lo, sz);
        sb_box_pack(ldout[s], dout, 2, dims, lo, sz);
        float *ps = fzeros((size_t)M), *pq = fzeros((size_t)M);
        sb_layernorm_stats(ps, pq, lin[s], M, sz[1]);
        for (int m = 0; m < M; m++)
            sum[m] += ps[m], sq[m] += pq[m];
    }
    float *gmean = fzeros((size_t)M), *grstd = fzeros((size_t)M);
    sb_norm_finish_stats(gmean, grstd, sum, sq, M, D, 1e-5f);
    expect_close("layernorm shards mean", gmean, mean, (size_t)M, 1e-6, 1e-5);
    expect_close("layernorm shards rstd", grstd, rstd, (size_t)M, 1e-6, 1e-4);
    for (int s = 0; s < 4; s++) {
        int w = cut[s + 1] - cut[s];
        float *p1 = fzeros((size_t)M), *p2 = fzeros((size_t)M);
        sb_layernorm_backward_stats(p1, p2, ldout[s], lin[s], gmean, grstd,
                                    gamma + cut[s], M, w);
        for (int m = 0; m < M; m++)
            s1[m] += p1[m], s2[m] += p2[m];
    }
    float *out_sh = fzeros(n), *dinp_sh = fzeros(n);
    float *dg_sh = fzeros((size_t)D), *db_sh = fzeros((size_t)D);
    for (int s = 0; s < 4; s++) {
        int lo[2] = {0, cut[s]}, sz[2] = {M, cut[s + 1] - cut[s]};
        float *lout = fzeros((size_t)M * sz[1]), *ldin = fzeros((size_t)M * sz[1]);
        sb_layernorm_apply(lout, lin[s], gmean, grstd, gamma + cut[s],
                           beta + cut[s], M, sz[1]);
        sb_layernorm_backward_apply(ldin, dg_sh + cut[s], db_sh + cut[s],
                                    ldout[s], lin[s], gmean, grstd,
                                    gamma + cut[s], s1, s2, M, sz[1], D);
        sb_box_unpack(out_sh, 2, dims, lo, sz, lout);
        sb_box_unpack(dinp_sh, 2, dims, lo, sz, ldin);
    }
    expect_close("layernorm shards forward", out_sh, out, n, 1e-5, 1e-4);
    expect_close("layernorm shards dinp", dinp_sh, dinp, n, 1e-5, 1e-4);
    expect_close("layernorm shards dgamma", dg_sh, dg, (size_t)D, 1e-5, 1e-4);
    expect_close("layernorm shards dbeta", db_sh, dbt, (size_t)D, 1e-5, 1e-4);
}

/* ---- RMS norm ----------------------------------------------------------- */

typedef struct {
    int M, D;
    float *inp, *gamma, *out, *rstd, *r;
} rms_ctx;

// unsharded: stats, rstd, apply (the executor's steps without all-reduce)
static double rms_loss(void *p)
{
    rms_ctx *c = p;
    float sq[16];
    assert_true(c->M <= 16);
    sb_rmsnorm_stats(sq, c->inp, c->M, c->D);
    sb_norm_rstd(c->rstd, sq, c->M, c->D, 1e-5f);
    sb_rmsnorm_apply(c->out, c->inp, c->rstd, c->gamma, c->M, c->D);
    return dotd(c->r, c->out, (size_t)c->M * c->D);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    const int M = 3, D = 8;
    size_t n = (size_t)M * D;
    rms_ctx c = {M, D, frandn(n, 1.5f), frandn((size_t)D, 1.0f), fzeros(n),
                 fzeros((size_t)M), frandn(n, 1.0f)};
    rms_loss(&c);
    // forward against the formula x / sqrt(mean x^2 + eps) * gamma, in double
    for (int m = 0; m < M; m++) {
        double ms = 0;
        for (int d = 0; d < D; d++)
            ms += (double)c.inp[m * D + d] * c.inp[m * D + d];
        ms /= D;
        for (int d = 0; d < D; d++) {
            float want = (float)(c.inp[m * D + d] / sqrt(ms + 1e-5) * c.gamma[d]);
            expect_close("rmsnorm forward", &c.out[m * D + d], &want, 1, 1e-6, 1e-5);
        }
    }
    float *s = fzeros((size_t)M), *dinp = fzeros(n), *dg = fzeros((size_t)D);
    sb_rmsnorm_backward_stats(s, c.r, c.inp, c.gamma, M, D);
    sb_rmsnorm_backward_apply(dinp, dg, c.r, c.inp, c.rstd, c.gamma, s, M, D, D);
    check_grad("rmsnorm dinp", rms_loss, &c, c.inp, dinp, n, 0);
    check_grad("rmsnorm dgamma", rms_loss, &c, c.gamma, dg, (size_t)D, 0);
    rms_loss(&c); // out and rstd of the unperturbed input again

    // D split into 3 uneven column shards, statistics summed over them
    const int cut[] = {0, 3, 4, 8};
    int dims[2] = {M, D};
    float *sq = fzeros((size_t)M), *s_sh = fzeros((size_t)M), *rstd = fzeros((size_t)M);
    float *lin[3], *lr[3];
    for (int k = 0; k < 3; k++) {
        int lo[2] = {0, cut[k]}, sz[2] = {M, cut[k + 1] - cut[k]};
        lin[k] = fzeros((size_t)M * sz[1]);
        lr[k] = fzeros((size_t)M * sz[1]);
        sb_box_pack(lin[k], c.inp, 2, dims, lo, sz);
        sb_box_pack(lr[k], c.r, 2, dims, lo, sz);
        float *pq = fzeros((size_t)M), *ps = fzeros((size_t)M);
        sb_rmsnorm_stats(pq, lin[k], M, sz[1]);
        sb_rmsnorm_backward_stats(ps, lr[k], lin[k], c.gamma + cut[k], M, sz[1]);
        for (int m = 0; m < M; m++)
            sq[m] += pq[m], s_sh[m] += ps[m];
    }
    sb_norm_rstd(rstd, sq, M, D, 1e-5f);
    expect_close("rmsnorm shards rstd", rstd, c.rstd, (size_t)M, 1e-6, 1e-5);
    float *out_sh = fzeros(n), *dinp_sh = fzeros(n), *dg_sh = fzeros((size_t)D);
    for (int k = 0; k < 3; k++) {
        int lo[2] = {0, cut[k]}, sz[2] = {M, cut[k + 1] - cut[k]};
        float *lout = fzeros((size_t)M * sz[1]), *ldin = fzeros((size_t)M * sz[1]);
        sb_rmsnorm_apply(lout, lin[k], rstd, c.gamma + cut[k], M, sz[1]);
        sb_rmsnorm_backward_apply(ldin, dg_sh + cut[k], lr[k], lin[k], rstd, c.gamma + cut[k],
                                  s_sh, M, sz[1], D);
        sb_box_unpack(out_sh, 2, dims, lo, sz, lout);
        sb_box_unpack(dinp_sh, 2, dims, lo, sz, ldin);
    }
    expect_close("rmsnorm shards forward", out_sh, c.out, n, 1e-6, 1e-5);
    expect_close("rmsnorm shards dinp", dinp_sh, dinp, n, 1e-6, 1e-4);
    expect_close("rmsnorm shards dgamma", dg_sh, dg, (size_t)D, 1e-6, 1e-4);
}

/* ---- batch norm --------------------------------------------------------- */

typedef struct {
    int B, C, HW, relu;
    float *inp, *gamma, *beta, *out, *mean, *rstd, *r;
} bn_ctx;

static double bn_loss(void *p)
{
    bn_ctx *c = p;
    sb_batchnorm_forward(c->out, c->mean, c->rstd, c->inp, c->gamma, c->beta,
                         c->B, c->C, c->HW, 1e-5f, c->relu);
    return dotd(c->r, c->out, (size_t)c->B * c->C * c->HW);
}

static void test_batchnorm(void **state)
{
    (void)state;
    for (int relu = 0; relu < 2; relu++) {
        const int B = 3, C = 2, HW = 4;
        size_t n = (size_t)B * C * HW;
        bn_ctx c = {B, C, HW, relu, frandn(n, 1.0f), frandn((size_t)C, 1.0f),
                    frandn((size_t)C, 1.0f), fzeros(n), fzeros((size_t)C),
                    fzeros((size_t)C), frandn(n, 1.0f)};
        bn_loss(&c);
        float *dinp = fzeros(n), *dg = fzeros((size_t)C), *dbt = fzeros((size_t)C);
        float *out = fcopy(c.out, n);
        sb_batchnorm_backward(dinp, dg, dbt, c.r, relu ? out : NULL, c.inp,
                              c.mean, c.rstd, c.gamma, B, C, HW);
        check_grad("batchnorm dinp", bn_loss, &c, c.inp, dinp, n, relu);
        check_grad("batchnorm dgamma", bn_loss, &c, c.gamma, dg, (size_t)C, relu);
        check_grad("batchnorm dbeta", bn_loss, &c, c.beta, dbt, (size_t)C, relu);
    }
}

// (B,C,H,W) split 2 ways in batch and 2 ways in H: 4 shards.
static void test_batchnorm_sharded(void **state)
{
    (void)state;
    const int B = 4, C = 3, H = 4, W = 3, relu = 1;
    size_t n = (size_t)B * C * H * W;
    float *inp = frandn(n, 1.5f), *gamma = frandn((size_t)C, 1.0f);
    float *beta = frandn((size_t)C, 1.0f), *dout = frandn(n, 1.0f);
    float *out = fzeros(n), *mean = fzeros((size_t)C), *rstd = fzeros((size_t)C);
    float *dinp = fzeros(n), *dg = fzeros((size_t)C), *dbt = fzeros((size_t)C);
    sb_batchnorm_forward(out, mean, rstd, inp, gamma, beta, B, C, H * W, 1e-5f, relu);
    sb_batchnorm_backward(dinp, dg, dbt, dout, out, inp, mean, rstd, gamma, B,
                          C, H * W);

    int dims[4] = {B, C, H, W}, sz[4] = {B / 2, C, H / 2, W};
    size_t ln = (size_t)sz[0] * C * sz[2] * W;
    int lhw = sz[2] * W;
    float *lin[4], *ldout[4], *lout[4];
    float *sum = fzeros((size_t)C), *sq = fzeros((size_t)C);
    for (int s = 0; s < 4; s++) {
        int lo[4] = {(s / 2) * sz[0], 0, (s % 2) * sz[2], 0};
        lin[s] = fzeros(ln), ldout[s] = fzeros(ln), lout[s] = fzeros(ln);
        sb_box_pack(lin[s], inp, 4, dims, lo, sz);
        sb_box_pack(ldout[s], dout, 4, dims, lo, sz);
        float *ps = fzeros((size_t)C), *pq = fzeros((size_t)C);
        sb_batchnorm_stats(ps, pq, lin[s], sz[0], C, lhw);
        for (int c = 0; c < C; c++)
            sum[c] += ps[c], sq[c] += pq[c];
    }
    float *gm = fzeros((size_t)C), *gr = fzeros((size_t)C);
    sb_norm_finish_stats(gm, gr, sum, sq, C, (long)B * H * W, 1e-5f);
    float *s1 = fzeros((size_t)C), *s2 = fzeros((size_t)C);
    float *dg_sh = fzeros((size_t)C), *db_sh = fzeros((size_t)C);
    float *out_sh = fzeros(n), *dinp_sh = fzeros(n);
    for (int s = 0; s < 4; s++) {
        sb_batchnorm_apply(lout[s], lin[s], gm, gr, gamma, beta, sz[0], C, lhw, relu);
        float *p1 = fzeros((size_t)C), *p2 = fzeros((size_t)C);
        sb_batchnorm_backward_stats(p1, p2, ldout[s], lout[s], lin[s], gm, gr,
                                    sz[0], C, lhw);
        for (int c = 0; c < C; c++) { // weight grads and the stat all-reduce
            s1[c] += p1[c], s2[c] += p2[c];
            db_sh[c] += p1[c], dg_sh[c] += p2[c];
        }
    }
    for (int s = 0; s < 4; s++) {
        int lo[4] = {(s / 2) * sz[0], 0, (s % 2) * sz[2], 0};
        float *ldin = fzeros(ln);
        sb_batchnorm_backward_apply(ldin, ldout[s], lout[s], lin[s], gm, gr,
                                    gamma, s1, s2, sz[0], C, lhw,
                                    (long)B * H * W);
        sb_box_unpack(out_sh, 4, dims, lo, sz, lout[s]);
        sb_box_unpack(dinp_sh, 4, dims, lo, sz, ldin);
    }
    expect_close("batchnorm shards forward", out_sh, out, n, 1e-5, 1e-4);
    expect_close("batchnorm shards dinp", dinp_sh, dinp, n, 1e-5, 1e-4);
    expect_close("batchnorm shards dgamma", dg_sh, dg, (size_t)C, 1e-5, 1e-4);
    expect_close("batchnorm shards dbeta", db_sh, dbt, (size_t)C, 1e-5, 1e-4);
}

/* ---- softmax ------------------------------------------------------------ */

typedef struct {
    int outer, A, inner;
    float *inp, *out, *r;
} sm_ctx;

static double sm_loss(void *p)
{
    sm_ctx *c = p;
    sb_softmax_forward(c->out, c->inp, c->outer, c->A, c->inner);
    return dotd(c->r, c->out, (size_t)c->outer * c->A * c->inner);
}

static void test_softmax(void **state)
{
    (void)state;
    const int outer = 2, A = 5, inner = 3;
    size_t n = (size_t)outer * A * inner, ns = (size_t)outer * inner;
    sm_ctx c = {outer, A, inner, frandn(n, 3.0f), fzeros(n), frandn(n, 1.0f)};
    sm_loss(&c);
    for (int o = 0; o < outer; o++)
        for (int i = 0; i < inner; i++) {
            double z = 0;
            for (int a = 0; a < A; a++)
                z += exp(c.inp[(o * A + a) * inner + i]);
            for (int a = 0; a < A; a++) {
                float want = (float)(exp(c.inp[(o * A + a) * inner + i]) / z);
                expect_close("softmax forward", &c.out[(o * A + a) * inner + i],
                             &want, 1, 1e-6, 1e-5);
            }
        }
    float *out = fcopy(c.out, n), *dinp = fzeros(n);
    sb_softmax_backward(dinp, c.r, out, outer, A, inner);
    check_grad("softmax dinp", sm_loss, &c, c.inp, dinp, n, 0);

    // A split [0,2) [2,5): all-reduce MAX of mx, then SUM of se and dot
    int dims[3] = {outer, A, inner}, cut[] = {0, 2, 5};
    float *mx = fzeros(ns), *se = fzeros(ns), *dot = fzeros(ns);
    float *lin[2], *lr[2], *lout[2];
    for (size_t i = 0; i < ns; i++)
        mx[i] = -INFINITY;
    for (int s = 0; s < 2; s++) {
        int lo[3] = {0, cut[s], 0}, sz[3] = {outer, cut[s + 1] - cut[s], inner};
        size_t ln = (size_t)outer * sz[1] * inner;
        lin[s] = fzeros(ln), lr[s] = fzeros(ln), lout[s] = fzeros(ln);
        sb_box_pack(lin[s], c.inp, 3, dims, lo, sz);
        sb_box_pack(lr[s], c.r, 3, dims, lo, sz);
        float *pm = fzeros(ns);
        sb_softmax_partial_max(pm, lin[s], outer, sz[1], inner);
        for (size_t i = 0; i < ns; i++)
            mx[i] = pm[i] > mx[i] ? pm[i] : mx[i];
    }
    for (int s = 0; s < 2; s++) {
        float *ps = fzeros(ns);
        sb_softmax_partial_sumexp(ps, lin[s], mx, outer, cut[s + 1] - cut[s], inner);
        for (size_t i = 0; i < ns; i++)
            se[i] += ps[i];
    }
    for (int s = 0; s < 2; s++) {
        int w = cut[s + 1] - cut[s];
        float *pd = fzeros(ns);
        sb_softmax_apply(lout[s], lin[s], mx, se, outer, w, inner);
        sb_softmax_backward_dot(pd, lr[s], lout[s], outer, w, inner);
        for (size_t i = 0; i < ns; i++)
            dot[i] += pd[i];
    }
    float *out_sh = fzeros(n), *dinp_sh = fzeros(n);
    for (int s = 0; s < 2; s++) {
        int lo[3] = {0, cut[s], 0}, sz[3] = {outer, cut[s + 1] - cut[s], inner};
        float *ld = fzeros((size_t)outer * sz[1] * inner);
        sb_softmax_backward_apply(ld, lr[s], lout[s], dot, outer, sz[1], inner);
        sb_box_unpack(out_sh, 3, dims, lo, sz, lout[s]);
        sb_box_unpack(dinp_sh, 3, dims, lo, sz, ld);
    }
    expect_close("softmax shards forward", out_sh, out, n, 1e-6, 1e-5);
    expect_close("softmax shards dinp", dinp_sh, dinp, n, 1e-6, 1e-4);
}

/* Causal softmax over the key dim k of logits (q=Q, k=K) (query dim 0,
 * key dim 1, inner = 1) or (k=K, q=Q) (key dim 0, inner = Q), the box at
 * global offsets qlo, klo: against exp over the unmasked keys, then with
 * the key dim split in two boxes (the second's klo moved). */
static void causal_case(int key_first, int64_t window)
{
    const int Q = 4, K = 6, qlo = 3, klo = 2;
    size_t n = (size_t)Q * K;
    float *x = frandn(n, 3.0f), *xm = fzeros(n), *out = fzeros(n);
    int64_t kstride = key_first ? Q : 1, qstride = key_first ? 1 : K;
    int outer = key_first ? 1 : Q, inner = key_first ? Q : 1;
    sb_causal_mask(xm, x, (int64_t)n, kstride, K, klo, qstride, Q, qlo, window);
    float *mx = fzeros((size_t)Q), *se = fzeros((size_t)Q);
    sb_softmax_partial_max(mx, xm, outer, K, inner);
    sb_softmax_partial_sumexp(se, xm, mx, outer, K, inner);
    sb_softmax_apply(out, xm, mx, se, outer, K, inner);
    for (int q = 0; q < Q; q++) {
        double z = 0;
        for (int k = 0; k < K; k++)
            if (klo + k <= qlo + q && (!window || qlo + q - (klo + k) < window))
                z += exp(x[k * kstride + q * qstride]);
        for (int k = 0; k < K; k++) {
            size_t e = (size_t)(k * kstride + q * qstride);
            int kept = klo + k <= qlo + q && (!window || qlo + q - (klo + k) < window);
            float want = kept ? (float)(exp(x[e]) / z) : 0.0f;
            expect_close(key_first ? "causal softmax (key first)" : "causal softmax", &out[e],
                         &want, 1, 1e-6, 1e-5);
        }
    }
    // key dim split [0,2) [2,6): the second box starts at key klo + 2
    int dims[2] = {key_first ? K : Q, key_first ? Q : K}, kd = key_first ? 0 : 1;
    float *gmx = fzeros((size_t)Q), *gse = fzeros((size_t)Q), *lm[2];
    int cut[] = {0, 2, 6};
    for (int i = 0; i < Q; i++)
        gmx[i] = -INFINITY;
    for (int b = 0; b < 2; b++) {
        int lo[2] = {0, 0}, sz[2] = {dims[0], dims[1]};
        lo[kd] = cut[b];
        sz[kd] = cut[b + 1] - cut[b];
        size_t ln = (size_t)sz[0] * sz[1];
        float *lx = fzeros(ln);
        lm[b] = fzeros(ln);
        sb_box_pack(lx, x, 2, dims, lo, sz);
        sb_causal_mask(lm[b], lx, (int64_t)ln, key_first ? Q : 1, sz[kd], klo + cut[b],
                       key_first ? 1 : sz[kd], Q, qlo, window);
        float *pm = fzeros((size_t)Q);
        sb_softmax_partial_max(pm, lm[b], outer, sz[kd], inner);
        for (int i = 0; i < Q; i++)
            gmx[i] = pm[i] > gmx[i] ? pm[i] : gmx[i];
    }
    float *out_sh = fzeros(n);
    for (int b = 0; b < 2; b++) {
        float *ps = fzeros((size_t)Q);
        sb_softmax_partial_sumexp(ps, lm[b], gmx, outer, cut[b + 1] - cut[b], inner);
        for (int i = 0; i < Q; i++)
            gse[i] += ps[i];
    }
    for (int b = 0; b < 2; b++) {
        int lo[2] = {0, 0}, sz[2] = {dims[0], dims[1]};
        lo[kd] = cut[b];
        sz[kd] = cut[b + 1] - cut[b];
        float *lo_out = fzeros((size_t)sz[0] * sz[1]);
        sb_softmax_apply(lo_out, lm[b], gmx, gse, outer, sz[kd], inner);
        sb_box_unpack(out_sh, 2, dims, lo, sz, lo_out);
    }
    expect_close("causal softmax shards", out_sh, out, n, 1e-6, 1e-5);
}

static void test_causal_softmax(void **state)
{
    (void)state;
    causal_case(0, 0);
    causal_case(1, 0);
    causal_case(0, 3); /* a sliding window: keys 3 or more before the query masked too */
    causal_case(1, 3);
    causal_case(0, 1);
}

typedef struct {
    int M, V;
    const int32_t *labels;
    float *logits, *loss, *mx, *se, *dloss;
} xent_ctx;

static double xent_total(void *p)
{
    xent_ctx *c = p;
    sb_softmax_xent_forward(c->loss, c->mx, c->se, c->logits, c->labels, c->M,
                            c->V);
    return dotd(c->dloss, c->loss, (size_t)c->M);
}

static void test_softmax_xent(void **state)
{
    (void)state;
    const int M = 5, V = 10, cut[] = {0, 3, 6, 8, 10};
    size_t n = (size_t)M * V;
    int32_t *labels = izeros((size_t)M);
    int32_t lab[] = {4, 0, -1, 9, 7};
    memcpy(labels, lab, sizeof lab);
    xent_ctx c = {M, V, labels, frandn(n, 4.0f), fzeros((size_t)M),
                  fzeros((size_t)M), fzeros((size_t)M), frandn((size_t)M, 1.0f)};
    xent_total(&c);
    for (int m = 0; m < M; m++) {
        double z = 0;
        for (int v = 0; v < V; v++)
            z += exp(c.logits[m * V + v]);
        float want = lab[m] < 0 ? 0.0f : (float)(log(z) - c.logits[m * V + lab[m]]);
        expect_close("xent loss", &c.loss[m], &want, 1, 1e-5, 1e-5);
    }
    float *loss = fcopy(c.loss, (size_t)M), *dlog = fzeros(n);
    sb_softmax_xent_backward(dlog, c.dloss, c.logits, c.mx, c.se, labels, M, V, 0);
    check_grad("xent dlogits", xent_total, &c, c.logits, dlog, n, 0);

    // classes in 4 uneven shards: all-reduce MAX mx, SUM se and picked
    int dims[2] = {M, V};
    float *mx = fzeros((size_t)M), *se = fzeros((size_t)M);
    float *picked = fzeros((size_t)M), *lg[4];
    for (int m = 0; m < M; m++)
        mx[m] = -INFINITY;
    for (int s = 0; s < 4; s++) {
        int lo[2] = {0, cut[s]}, sz[2] = {M, cut[s + 1] - cut[s]};
        lg[s] = fzeros((size_t)M * sz[1]);
        sb_box_pack(lg[s], c.logits, 2, dims, lo, sz);
        float *pm = fzeros((size_t)M), *pp = fzeros((size_t)M);
        sb_softmax_partial_max(pm, lg[s], M, sz[1], 1);
        sb_xent_partial_picked(pp, lg[s], labels, M, sz[1], cut[s]);
        for (int m = 0; m < M; m++) {
            mx[m] = pm[m] > mx[m] ? pm[m] : mx[m];
            picked[m] += pp[m];
        }
    }
    for (int s = 0; s < 4; s++) {
        float *ps = fzeros((size_t)M);
        sb_softmax_partial_sumexp(ps, lg[s], mx, M, cut[s + 1] - cut[s], 1);
        for (int m = 0; m < M; m++)
            se[m] += ps[m];
    }
    float *loss_sh = fzeros((size_t)M), *dlog_sh = fzeros(n);
    sb_xent_loss(loss_sh, mx, se, picked, labels, M);
    expect_close("xent shards loss", loss_sh, loss, (size_t)M, 1e-5, 1e-5);
    for (int s = 0; s < 4; s++) {
        int lo[2] = {0, cut[s]}, sz[2] = {M, cut[s + 1] - cut[s]};
        float *ld = fzeros((size_t)M * sz[1]);
        sb_softmax_xent_backward(ld, c.dloss, lg[s], mx, se, labels, M, sz[1],
                                 cut[s]);
        sb_box_unpack(dlog_sh, 2, dims, lo, sz, ld);
    }
    expect_close("xent shards dlogits", dlog_sh, dlog, n, 1e-6, 1e-5);
}

/* ---- mixture of experts: moe_gate --------------------------------------- */

typedef struct {
    int G, S, E, C, k;
    float *logits, *combine, *dispatch, *work, *r, *aux;
    float aw; /* weight of the groups' balance losses in the loss */
} moe_ctx;

/* sum of r · combine + aw · sum of the groups' balance losses */
static double moe_loss(void *p)
{
    moe_ctx *c = p;
    sb_moe_gate_forward(c->combine, c->dispatch, c->aux, c->work, c->logits, c->G, c->S, c->E,
                        c->C, c->k);
    double a = 0;
    for (int g = 0; g < c->G; g++)
        a += c->aux[g];
    return dotd(c->r, c->combine, (size_t)c->G * c->S * c->E * c->C) + c->aw * a;
}

static moe_ctx moe_new(int G, int S, int E, int C, int k, float scale)
{
    size_t n = (size_t)G * S * E * C;
    moe_ctx c = {G, S, E, C, k, frandn((size_t)G * S * E, scale), fzeros(n), fzeros(n),
                 fzeros(sb_moe_gate_work_floats(G, S, E, k)), frandn(n, 1.0f),
                 fzeros((size_t)G), 0.0f};
    return c;
}

/* The routing written plainly: probabilities, top-k by repeated arg max
 * (ties to the lower expert), weights p / (sum of the chosen p), slots
 * first choices of all tokens, then second ones. */
static void moe_naive(const moe_ctx *c, float *combine, float *dispatch, float *aux,
                      int *dropped)
{
    int S = c->S, E = c->E, C = c->C, k = c->k;
    memset(combine, 0, (size_t)c->G * S * E * C * sizeof *combine);
    memset(dispatch, 0, (size_t)c->G * S * E * C * sizeof *dispatch);
    int ch[64][8], cnt[16];
    double w[64][8];
    assert_true(S <= 64 && k <= 8 && E <= 16);
    *dropped = 0;
    for (int g = 0; g < c->G; g++) {
        double first[16] = {0}, mean_p[16] = {0};
        for (int s = 0; s < S; s++) {
            const float *l = c->logits + ((size_t)g * S + s) * E;
            double z = 0, p[16], sum = 0;
            for (int e = 0; e < E; e++)
                z += exp(l[e]);
            for (int e = 0; e < E; e++) {
                p[e] = exp(l[e]) / z;
                mean_p[e] += p[e] / S;
            }
            for (int j = 0; j < k; j++) {
                int b = -1;
                for (int e = 0; e < E; e++) {
                    int used = 0;
                    for (int i = 0; i < j; i++)
                        used |= ch[s][i] == e;
                    if (!used && (b < 0 || p[e] > p[b]))
                        b = e;
                }
                ch[s][j] = b;
                sum += p[b];
            }
            for (int j = 0; j < k; j++)
                w[s][j] = p[ch[s][j]] / sum;
            first[ch[s][0]] += 1.0 / S;
        }
        double a = 0;
        for (int e = 0; e < E; e++)
            a += first[e] * mean_p[e];
        aux[g] = (float)(E * a);
        memset(cnt, 0, sizeof cnt);
        for (int j = 0; j < k; j++)
            for (int s = 0; s < S; s++) {
                int e = ch[s][j];
                if (cnt[e] == C) {
                    (*dropped)++;
                    continue;
                }
                size_t o = (((size_t)g * S + s) * E + e) * C + cnt[e]++;
                combine[o] = (float)w[s][j];
                dispatch[o] = 1.0f;
            }
    }
}

static void test_moe_gate(void **state)
{
    (void)state;
    /* by hand: 2 groups of 4 tokens, 3 experts, top-2, 2 slots each */
    enum { G = 2, S = 4, E = 3, C = 2, K = 2 };
    moe_ctx c = moe_new(G, S, E, C, K, 1.0f);
    const float lg[G * S * E] = {
        2, 1, 0,  2, 0, 1,  3, 1, 1,  1, 1, 0,  /* group 0: ties in tokens 2 and 3 */
        0, 5, 4,  0, 4, 5,  5, 0, 4,  0, 5, 0}; /* group 1: slot order decides */
    memcpy(c.logits, lg, sizeof lg);
    moe_loss(&c);
    float *want = fzeros((size_t)G * S * E * C), *mask = fzeros((size_t)G * S * E * C);
    const double w1 = 1.0 / (1.0 + exp(-1.0)), w2 = 1.0 / (1.0 + exp(-2.0)),
                 w5 = 1.0 / (1.0 + exp(-5.0));
    /* (group, token, expert, slot, weight). Group 0: first choices e0 e0,
     * then e0 full (tokens 2 and 3, e0 by its tie with e1, dropped); second
     * choices e1 e2 e1 (token 2's tie e1/e2), then e1 full (token 3's
     * dropped). Group 1: first choices e1 e2 e0 e1; second choices e2 (slot
     * 1), e1 and e2 full (dropped), e0 (token 3's tie e0/e2). A token-major
     * order would give token 0 both slots 0 and drop token 1's first. */
    const struct { int g, s, e, c; double w; } hit[] = {
        {0, 0, 0, 0, w1}, {0, 1, 0, 1, w1}, {0, 0, 1, 0, 1 - w1}, {0, 1, 2, 0, 1 - w1},
        {0, 2, 1, 1, 1 - w2},
        {1, 0, 1, 0, w1}, {1, 1, 2, 0, w1}, {1, 2, 0, 0, w1}, {1, 3, 1, 1, w5},
        {1, 0, 2, 1, 1 - w1}, {1, 3, 0, 1, 1 - w5}};
    for (size_t i = 0; i < sizeof hit / sizeof hit[0]; i++) {
        size_t o = (((size_t)hit[i].g * S + hit[i].s) * E + hit[i].e) * C + hit[i].c;
        want[o] = (float)hit[i].w;
        mask[o] = 1.0f;
    }
    expect_close("moe combine (by hand)", c.combine, want, (size_t)G * S * E * C, 1e-6, 1e-6);
    expect_close("moe dispatch (by hand)", c.dispatch, mask, (size_t)G * S * E * C, 0, 0);
    /* balance: group 0 sends every first choice to e0, group 1 two to e1,
     * one each to e0 and e2: E · sum_e f_e · mean p_e */
    double mp[G][E] = {{0}};
    for (int g = 0; g < G; g++)
        for (int s = 0; s < S; s++) {
            const float *l = lg + (g * S + s) * E;
            double z = exp(l[0]) + exp(l[1]) + exp(l[2]);
            for (int e = 0; e < E; e++)
                mp[g][e] += exp(l[e]) / z / S;
        }
    const float aux_want[G] = {(float)(3 * mp[0][0]),
                               (float)(3 * (0.25 * mp[1][0] + 0.5 * mp[1][1] + 0.25 * mp[1][2]))};
    expect_close("moe balance loss (by hand)", c.aux, aux_want, G, 1e-6, 1e-6);

    /* random, against the plain routing, with drops, and the gradient by
     * finite differences (dropped choices take gradient as normalisers) */
    const int shapes[][5] = {{3, 6, 5, 2, 3}, {2, 8, 4, 3, 2}, {1, 5, 6, 5, 1}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const int *h = shapes[t];
        moe_ctx r = moe_new(h[0], h[1], h[2], h[3], h[4], 2.0f);
        size_t n = (size_t)r.G * r.S * r.E * r.C, nl = (size_t)r.G * r.S * r.E;
        float *nc = fzeros(n), *nd = fzeros(n), *na = fzeros((size_t)r.G);
        int dropped;
        moe_naive(&r, nc, nd, na, &dropped);
        moe_loss(&r);
        expect_close("moe combine", r.combine, nc, n, 1e-6, 1e-5);
        expect_close("moe dispatch", r.dispatch, nd, n, 0, 0);
        expect_close("moe balance loss", r.aux, na, (size_t)r.G, 1e-6, 1e-5);
        if (t < 2)
            assert_true(dropped > 0); /* the capacity binds */
        for (int with_aux = 0; with_aux < 2; with_aux++) {
            r.aw = with_aux ? 0.7f : 0.0f;
            float *dl = frandn(nl, 1.0f), *dl0 = fcopy(dl, nl);
            sb_moe_gate_backward(dl, r.work, r.r, r.logits, r.aw, r.G, r.S, r.E, r.C, r.k);
            for (size_t i = 0; i < nl; i++)
                dl[i] -= dl0[i]; /* it adds into dlogits */
            check_grad(with_aux ? "moe dlogits (with the balance loss)" : "moe dlogits", moe_loss,
                       &r, r.logits, dl, nl, 1);
        }
    }
}

/* ---- elementwise -------------------------------------------------------- */

typedef struct {
    int relu;
    size_t n;
    float *a, *b, *c, *out, *r;
} add_ctx;

static double add_loss(void *p)
{
    add_ctx *k = p;
    const float *in[3] = {k->a, k->b, k->c};
    sb_add_forward(k->out, in, 3, k->n, k->relu);
    return dotd(k->r, k->out, k->n);
}

static void test_add(void **state)
{
    (void)state;
    const size_t n = 40;
    for (int relu = 0; relu < 2; relu++) {
        add_ctx k = {relu, n, frandn(n, 1.0f), frandn(n, 1.0f), frandn(n, 1.0f),
                     fzeros(n), frandn(n, 1.0f)};
        add_loss(&k);
        for (size_t i = 0; i < n; i++) {
            float s = k.a[i] + k.b[i] + k.c[i];
            float want = relu && s < 0 ? 0.0f : s;
            expect_close("add forward", &k.out[i], &want, 1, 1e-6, 1e-6);
        }
        float *out = fcopy(k.out, n);
        float *da = fzeros(n), *dc = fzeros(n);
        float *d[3] = {da, NULL, dc};
        sb_add_backward(d, k.r, relu ? out : NULL, 3, n);
        check_grad("add da", add_loss, &k, k.a, da, n, relu);
        check_grad("add dc", add_loss, &k, k.c, dc, n, relu);
    }
}

/* ---- pointwise: act, mul, expand --------------------------------------- */

/* the act functions in double, written out from their definitions */
static double act_ref(int fn, double x)
{
    switch (fn) {
    case SB_ACT_RELU: return x > 0 ? x : 0;
    case SB_ACT_RELU6: return x < 0 ? 0 : x > 6 ? 6 : x;
    case SB_ACT_SILU: return x / (1.0 + exp(-x));
    case SB_ACT_GELU: return x * 0.5 * erfc(-x / sqrt(2.0));
    case SB_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case SB_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case SB_ACT_TANH: return tanh(x);
    default: fail_msg("act fn %d", fn); return 0;
    }
}

typedef struct {
    int fn;
    size_t n;
    float *x, *out, *r;
} act_ctx;

static double act_loss(void *p)
{
    act_ctx *k = p;
    sb_act_forward(k->out, k->x, k->n, k->fn);
    return dotd(k->r, k->out, k->n);
}

static void test_act(void **state)
{
    (void)state;
    const size_t n = 64;
    for (int fn = 0; fn < SB_ACT_FN_COUNT; fn++) {
        /* inputs over [-8, 8) (relu6's upper kink, sigmoid's and tanh's
         * saturation) plus the extremes where exp overflows in float */
        act_ctx k = {fn, n, frandn(n, 8.0f), fzeros(n), frandn(n, 1.0f)};
        k.x[0] = -100.0f;
        k.x[1] = 100.0f;
        k.x[2] = 0.5f;
        act_loss(&k);
        for (size_t i = 0; i < n; i++) {
            float want = (float)act_ref(fn, k.x[i]);
            if (!isfinite(k.out[i]))
                fail_msg("act %s(%g) is %g", sb_act_fn_name(fn), k.x[i], k.out[i]);
            expect_close(sb_act_fn_name(fn), &k.out[i], &want, 1, 1e-6, 1e-5);
        }
        /* backward accumulates: start from 1 and take it off again */
        float *dx = fzeros(n);
        for (size_t i = 0; i < n; i++)
            dx[i] = 1.0f;
        sb_act_backward(dx, k.r, k.x, n, fn);
        for (size_t i = 0; i < n; i++) {
            dx[i] -= 1.0f;
            if (!isfinite(dx[i]))
                fail_msg("act %s'(%g) is %g", sb_act_fn_name(fn), k.x[i], dx[i]);
        }
        char what[64];
        snprintf(what, sizeof what, "act %s dx", sb_act_fn_name(fn));
        check_grad(what, act_loss, &k, k.x + 3, dx + 3, n - 3, fn == SB_ACT_RELU || fn == SB_ACT_RELU6);
        /* the closed form of the derivative at x = 0.5 */
        double x = 0.5, h = 1e-6;
        float want = (float)((act_ref(fn, x + h) - act_ref(fn, x - h)) / (2 * h) * k.r[2]);
        expect_close(what, &dx[2], &want, 1, 1e-5, 1e-4);
    }
}

/* ---- softcap: y = cap·tanh(x/cap) ---------------------------------------- */

typedef struct {
    float cap;
    size_t n;
    float *x, *out, *r;
} softcap_ctx;

static double softcap_loss(void *p)
{
    softcap_ctx *k = p;
    sb_softcap_forward(k->out, k->x, k->n, k->cap);
    return dotd(k->r, k->out, k->n);
}

/* forward against tanh in double, backward against finite differences and
 * the closed form 1 - tanh²(x/cap), accumulating; caps 1, 5 and 50 over
 * inputs of [-20, 20) and ±1e4 (saturated: y = ±cap, dy/dx = 0) */
static void test_softcap(void **state)
{
    (void)state;
    const size_t n = 64;
    const float caps[] = {1.0f, 5.0f, 50.0f};
    for (int ci = 0; ci < 3; ci++) {
        softcap_ctx k = {caps[ci], n, frandn(n, 20.0f), fzeros(n), frandn(n, 1.0f)};
        k.x[0] = -1e4f;
        k.x[1] = 1e4f;
        k.x[2] = 0.75f * k.cap;
        softcap_loss(&k);
        for (size_t i = 0; i < n; i++) {
            float want = (float)(k.cap * tanh((double)k.x[i] / k.cap));
            expect_close("softcap", &k.out[i], &want, 1, 1e-6, 1e-5);
            if (fabsf(k.out[i]) > k.cap)
                fail_msg("softcap(%g, cap %g) is %g, beyond the cap", k.x[i], k.cap, k.out[i]);
        }
        float *dx = fzeros(n);
        for (size_t i = 0; i < n; i++)
            dx[i] = 1.0f;
        sb_softcap_backward(dx, k.r, k.x, n, k.cap);
        for (size_t i = 0; i < n; i++)
            dx[i] -= 1.0f;
        for (size_t i = 0; i < 3; i++) {
            double t = tanh((double)k.x[i] / k.cap);
            float want = (float)(k.r[i] * (1.0 - t * t));
            expect_close("softcap dx (closed form)", &dx[i], &want, 1, 1e-6, 1e-5);
        }
        check_grad("softcap dx", softcap_loss, &k, k.x + 3, dx + 3, n - 3, 0);
    }
}

/* offset in an operand holding the dims of mask `has` (row-major over
 * them) of element ix of a 4-d array */
static size_t bcast_off(const int *dims, unsigned has, const int *ix)
{
    size_t o = 0;
    for (int d = 0; d < 4; d++)
        if (has & (1u << d))
            o = o * (size_t)dims[d] + (size_t)ix[d];
    return o;
}

static size_t bcast_n(const int *dims, unsigned has)
{
    size_t n = 1;
    for (int d = 0; d < 4; d++)
        if (has & (1u << d))
            n *= (size_t)dims[d];
    return n;
}

typedef struct {
    const int *dims;
    unsigned has;
    size_t n;
    float *a, *b, *out, *r;
} mul_ctx;

static double mul_loss(void *p)
{
    mul_ctx *k = p;
    if (k->a)
        sb_mul_forward(k->out, k->a, k->b, 4, k->dims, k->has);
    else
        sb_expand_forward(k->out, k->b, 4, k->dims, k->has);
    return dotd(k->r, k->out, k->n);
}

/* mul and expand with b (expand's x) on every subset of the dims of a 4-d
 * array: forward against index loops, backward against finite differences,
 * both accumulating */
static void test_mul_expand(void **state)
{
    (void)state;
    const int dims[4] = {2, 3, 4, 5};
    const size_t n = 120;
    for (unsigned has = 0; has < 16; has++) {
        size_t nb = bcast_n(dims, has);
        mul_ctx k = {dims, has, n, frandn(n, 1.0f), frandn(nb, 1.0f), fzeros(n), frandn(n, 1.0f)};
        mul_loss(&k);
        float *ex = fzeros(n);
        sb_expand_forward(ex, k.b, 4, dims, has);
        size_t i = 0;
        for (int p = 0; p < dims[0]; p++)
            for (int q = 0; q < dims[1]; q++)
                for (int s = 0; s < dims[2]; s++)
                    for (int t = 0; t < dims[3]; t++, i++) {
                        const int ix[4] = {p, q, s, t};
                        float bv = k.b[bcast_off(dims, has, ix)], want = k.a[i] * bv;
                        expect_close("mul forward", &k.out[i], &want, 1, 0, 0);
                        expect_close("expand forward", &ex[i], &bv, 1, 0, 0);
                    }
        float *da = fzeros(n), *db = fzeros(nb), *dx = fzeros(nb);
        for (size_t j = 0; j < nb; j++)
            db[j] = dx[j] = 2.0f;
        sb_mul_backward(da, db, k.r, k.a, k.b, 4, dims, has);
        sb_expand_backward(dx, k.r, 4, dims, has);
        for (size_t j = 0; j < nb; j++) {
            db[j] -= 2.0f;
            dx[j] -= 2.0f;
        }
        check_grad("mul da", mul_loss, &k, k.a, da, n, 0);
        check_grad("mul db", mul_loss, &k, k.b, db, nb, 0);
        float *a = k.a;
        k.a = NULL; /* expand */
        check_grad("expand dx", mul_loss, &k, k.b, dx, nb, 0);
        k.a = a;
        /* NULL gradients are skipped */
        float *da2 = fzeros(n);
        sb_mul_backward(da2, NULL, k.r, k.a, k.b, 4, dims, has);
        expect_close("mul da alone", da2, da, n, 0, 0);
    }
}

/* ---- reduce-mean -------------------------------------------------------- */

static void reduce_naive(float *out, const float *inp, const int *dims,
                         unsigned axes, double count)
{
    int od[4];
    size_t no = 1;
    for (int d = 0; d < 4; d++) {
        od[d] = (axes >> d) & 1u ? 1 : dims[d];
        no *= (size_t)od[d];
    }
    double *acc = calloc(no, sizeof(double));
    assert_non_null(acc);
    size_t i = 0;
    for (int a = 0; a < dims[0]; a++)
        for (int b = 0; b < dims[1]; b++)
            for (int c = 0; c < dims[2]; c++)
                for (int e = 0; e < dims[3]; e++, i++) {
                    int ix[4] = {a, b, c, e};
                    size_t o = 0;
                    for (int d = 0; d < 4; d++)
                        o = o * od[d] + ((axes >> d) & 1u ? 0 : ix[d]);
                    acc[o] += inp[i];
                }
    for (size_t o = 0; o < no; o++)
        out[o] = (float)(acc[o] / count);
    free(acc);
}

typedef struct {
    const int *dims;
    unsigned axes;
    float *inp, *out, *r;
    size_t n_out;
} rm_ctx;

static double rm_loss(void *p)
{
    rm_ctx *c = p;
    sb_reduce_mean_forward(c->out, c->inp, 4, c->dims, c->axes, 0);
    return dotd(c->r, c->out, c->n_out);
}

static void test_reduce_mean(void **state)
{
    (void)state;
    const int dims[4] = {2, 3, 4, 5};
    const size_t n = 120;
    const unsigned cases[] = {0xC, 0x2, 0x9, 0xF, 0x0};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        unsigned axes = cases[k];
        size_t n_out = 1, n_red = 1;
        for (int d = 0; d < 4; d++)
            (axes >> d) & 1u ? (n_red *= dims[d]) : (n_out *= dims[d]);
        rm_ctx c = {dims, axes, frandn(n, 1.0f), fzeros(n_out),
                    frandn(n_out, 1.0f), n_out};
        float *want = fzeros(n_out);
        reduce_naive(want, c.inp, dims, axes, (double)n_red);
        rm_loss(&c);
        expect_close("reduce_mean forward", c.out, want, n_out, 1e-6, 1e-5);
        float *dinp = fzeros(n);
        sb_reduce_mean_backward(dinp, c.r, 4, dims, axes, 0);
        check_grad("reduce_mean dinp", rm_loss, &c, c.inp, dinp, n, 0);
    }
    // h (axis 2) sharded in two: partial means with the global count sum up
    float *inp = frandn(n, 1.0f), *full = fzeros(6), *sum = fzeros(6);
    sb_reduce_mean_forward(full, inp, 4, dims, 0xC, 0);
    int sz[4] = {2, 3, 2, 5};
    float *part = fzeros(60), *pout = fzeros(6);
    for (int s = 0; s < 2; s++) {
        int lo[4] = {0, 0, 2 * s, 0};
        sb_box_pack(part, inp, 4, dims, lo, sz);
        sb_reduce_mean_forward(pout, part, 4, sz, 0xC, 20);
        for (int i = 0; i < 6; i++)
            sum[i] += pout[i];
    }
    expect_close("reduce_mean shards", sum, full, 6, 1e-6, 1e-5);
}

/* ---- box copies and permute --------------------------------------------- */

/* ---- rotary position embedding ------------------------------------------ */

typedef struct {
    int64_t n;
    int D, S;
    int64_t ds, ss, pos0;
    float *inp, *out, *r;
} rope_ctx;

static double rope_loss(void *p)
{
    rope_ctx *c = p;
    sb_rope_forward(c->out, c->inp, c->n, c->D, c->ds, c->S, c->ss, c->pos0, 10000.0);
    return dotd(c->r, c->out, (size_t)c->n);
}

/* x (B=2, S=3, H=2, D=6), seq dim 1, head dim last, positions from pos0 =
 * 5 (a box of a split seq), against the formula; then the head dim before
 * the seq dim, (D=4, S=5); the backward by finite differences and as the
 * inverse rotation. */
static void test_rope(void **state)
{
    (void)state;
    {
        const int B = 2, S = 3, H = 2, D = 6;
        const int64_t pos0 = 5;
        int64_t n = (int64_t)B * S * H * D;
        rope_ctx c = {n, D, S, 1, (int64_t)H * D, pos0, frandn((size_t)n, 1.0f),
                      fzeros((size_t)n), frandn((size_t)n, 1.0f)};
        rope_loss(&c);
        for (int b = 0; b < B; b++)
            for (int s = 0; s < S; s++)
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < D; i++) {
                        size_t base = (((size_t)b * S + s) * H + h) * D;
                        int j = i % (D / 2);
                        double ang = (double)(pos0 + s) * pow(10000.0, -2.0 * j / D);
                        double x1 = c.inp[base + j], x2 = c.inp[base + j + D / 2];
                        // rotate half: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)
                        double want = i < D / 2 ? x1 * cos(ang) - x2 * sin(ang)
                                                : x2 * cos(ang) + x1 * sin(ang);
                        float w = (float)want;
                        expect_close("rope forward", &c.out[base + i], &w, 1, 1e-6, 1e-5);
                    }
        float *dinp = fzeros((size_t)n);
        sb_rope_backward(dinp, c.r, n, D, 1, S, (int64_t)H * D, pos0, 10000.0);
        check_grad("rope dinp", rope_loss, &c, c.inp, dinp, (size_t)n, 0);
        // the inverse rotation undoes the forward
        rope_loss(&c);
        float *back = fzeros((size_t)n);
        sb_rope_backward(back, c.out, n, D, 1, S, (int64_t)H * D, pos0, 10000.0);
        expect_close("rope inverse", back, c.inp, (size_t)n, 1e-5, 1e-5);
    }
    {
        const int D = 4, S = 5;
        const int64_t pos0 = 2;
        int64_t n = (int64_t)D * S;
        float *x = frandn((size_t)n, 1.0f), *y = fzeros((size_t)n);
        sb_rope_forward(y, x, n, D, S, S, 1, pos0, 500000.0);
        for (int s = 0; s < S; s++)
            for (int i = 0; i < D / 2; i++) {
                double ang = (double)(pos0 + s) * pow(500000.0, -2.0 * i / D);
                double x1 = x[i * S + s], x2 = x[(i + D / 2) * S + s];
                float w1 = (float)(x1 * cos(ang) - x2 * sin(ang));
                float w2 = (float)(x2 * cos(ang) + x1 * sin(ang));
                expect_close("rope forward (head dim first)", &y[i * S + s], &w1, 1, 1e-6, 1e-5);
                expect_close("rope forward (head dim first)", &y[(i + D / 2) * S + s], &w2, 1,
                             1e-6, 1e-5);
            }
    }
}

static void test_box_copy(void **state)
{
    (void)state;
    const int dims[4] = {3, 4, 5, 6};
    const size_t n = 360;
    float *src = frandn(n, 1.0f);
    const int boxes[][8] = { // lo[4], size[4]
        {1, 0, 2, 1, 2, 3, 2, 4},
        {0, 1, 0, 0, 3, 2, 5, 6}, // whole trailing axes: merged runs
        {2, 3, 4, 5, 1, 1, 1, 1},
        {0, 0, 0, 0, 3, 4, 5, 6},
    };
    for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++) {
        const int *lo = boxes[k], *sz = boxes[k] + 4;
        size_t nb = (size_t)sz[0] * sz[1] * sz[2] * sz[3];
        float *packed = fzeros(nb), *want = fzeros(nb);
        size_t i = 0;
        for (int a = 0; a < sz[0]; a++)
            for (int b = 0; b < sz[1]; b++)
                for (int c = 0; c < sz[2]; c++)
                    for (int e = 0; e < sz[3]; e++)
                        want[i++] = src[(((size_t)(lo[0] + a) * dims[1] + lo[1] + b) *
                                             dims[2] + lo[2] + c) * dims[3] + lo[3] + e];
        sb_box_pack(packed, src, 4, dims, lo, sz);
        expect_close("box_pack", packed, want, nb, 0, 0);
        // unpack into zeros, twice with add: 2x the box, zero elsewhere
        float *dst = fzeros(n), *dst2 = fzeros(n), *back = fzeros(nb);
        sb_box_unpack(dst, 4, dims, lo, sz, packed);
        sb_box_unpack_add(dst2, 4, dims, lo, sz, packed);
        sb_box_unpack_add(dst2, 4, dims, lo, sz, packed);
        sb_box_pack(back, dst, 4, dims, lo, sz);
        expect_close("box_unpack", back, want, nb, 0, 0);
        double tot = 0, tot2 = 0, totw = 0;
        for (size_t j = 0; j < n; j++)
            tot += fabs(dst[j]), tot2 += fabs(dst2[j]);
        for (size_t j = 0; j < nb; j++)
            totw += fabs(want[j]);
        assert_true(fabs(tot - totw) < 1e-4 && fabs(tot2 - 2 * totw) < 1e-4);
    }
    // concat along axis 1 of two arrays (3,2,5,6) and (3,2,5,6) via box_copy
    int half[4] = {3, 2, 5, 6}, z[4] = {0, 0, 0, 0}, at[4] = {0, 2, 0, 0};
    float *a = fzeros(180), *b = fzeros(180), *cat = fzeros(n);
    sb_box_pack(a, src, 4, dims, z, half);
    sb_box_pack(b, src, 4, dims, at, half);
    sb_strided_box_copy(cat, dims, z, a, half, z, half, 4, 0);
    sb_strided_box_copy(cat, dims, at, b, half, z, half, 4, 0);
    expect_close("concat by box_copy", cat, src, n, 0, 0);
    // box to box between differently shaped arrays
    int odims[4] = {2, 5, 3, 7}, olo[4] = {1, 2, 0, 3}, slo[4] = {2, 1, 2, 0},
        sz[4] = {1, 3, 3, 4};
    float *o = fzeros(210);
    sb_strided_box_copy(o, odims, olo, src, dims, slo, sz, 4, 0);
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++)
            for (int e = 0; e < 4; e++) {
                float got = o[((size_t)(1 * 5 + 2 + p) * 3 + q) * 7 + 3 + e];
                float want = src[((size_t)(2 * 4 + 1 + p) * 5 + 2 + q) * 6 + e];
                expect_close("box_copy", &got, &want, 1, 0, 0);
            }
}

static void test_permute(void **state)
{
    (void)state;
    const int dims[3] = {2, 3, 4}, perm[3] = {2, 0, 1}, inv[3] = {1, 2, 0};
    float *x = frandn(24, 1.0f), *y = fzeros(24), *back = fzeros(24);
    sb_permute(y, x, 3, dims, perm, 0);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++) // y is (4,2,3): y[c][a][b] = x[a][b][c]
                expect_close("permute", &y[(c * 2 + a) * 3 + b],
                             &x[(a * 3 + b) * 4 + c], 1, 0, 0);
    const int ydims[3] = {4, 2, 3};
    sb_permute(back, y, 3, ydims, inv, 1); // the backward: inverse, accumulate
    expect_close("permute inverse", back, x, 24, 0, 0);
}

static void test_sgd(void **state)
{
    (void)state;
    float w[3] = {1, 2, 3}, g[3] = {1, -2, 0.5f}, want[3] = {0.9f, 2.2f, 2.95f};
    const float zero[3] = {0, 0, 0};
    sb_sgd_update(w, g, 3, 0.1f);
    expect_close("sgd", w, want, 3, 1e-6, 1e-6);
    expect_close("sgd zeroes the gradient", g, zero, 3, 0, 0);
}

/* Two Adam steps against the formulas written out in double: step 1's bias
 * correction makes the update lr * g / (|g| + eps); step 2 mixes both
 * gradients with weights b1 (1 - b1) and (1 - b1) over 1 - b1^2. */
static void test_adam(void **state)
{
    (void)state;
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, lr = 0.01f;
    const double g1[3] = {1, -2, 0.5}, g2[3] = {0.25, 3, -1};
    float w[3] = {1, 2, 3}, g[3], m[3] = {0}, v[3] = {0}, want[3];
    const float zero[3] = {0, 0, 0};
    double wd[3] = {1, 2, 3};
    for (int i = 0; i < 3; i++) {
        g[i] = (float)g1[i];
        wd[i] -= lr * g1[i] / (fabs(g1[i]) + eps);
        want[i] = (float)wd[i];
    }
    sb_adam_update(w, g, m, v, 3, lr, b1, b2, eps, 1);
    expect_close("adam step 1", w, want, 3, 1e-6, 1e-6);
    expect_close("adam zeroes the gradient", g, zero, 3, 0, 0);
    for (int i = 0; i < 3; i++) {
        g[i] = (float)g2[i];
        double mm = (double)b1 * (1 - b1) * g1[i] + (1 - (double)b1) * g2[i];
        double vv = (double)b2 * (1 - b2) * g1[i] * g1[i] + (1 - (double)b2) * g2[i] * g2[i];
        double mh = mm / (1 - (double)b1 * b1), vh = vv / (1 - (double)b2 * b2);
        wd[i] -= lr * mh / (sqrt(vh) + eps);
        want[i] = (float)wd[i];
    }
    sb_adam_update(w, g, m, v, 3, lr, b1, b2, eps, 2);
    expect_close("adam step 2", w, want, 3, 1e-6, 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_gemm, teardown),
        cmocka_unit_test_teardown(test_conv_forward_naive, teardown),
        cmocka_unit_test_teardown(test_conv_dnnl, teardown),
        cmocka_unit_test_teardown(test_conv_grouped_dilated, teardown),
        cmocka_unit_test_teardown(test_conv_backward_fd, teardown),
        cmocka_unit_test_teardown(test_conv_halo, teardown),
        cmocka_unit_test_teardown(test_window_input_range, teardown),
        cmocka_unit_test_teardown(test_pool, teardown),
        cmocka_unit_test_teardown(test_pool_halo, teardown),
        cmocka_unit_test_teardown(test_dense, teardown),
        cmocka_unit_test_teardown(test_embedding, teardown),
        cmocka_unit_test_teardown(test_lstm_cell, teardown),
        cmocka_unit_test_teardown(test_lstm, teardown),
        cmocka_unit_test_teardown(test_layernorm, teardown),
        cmocka_unit_test_teardown(test_layernorm_sharded, teardown),
        cmocka_unit_test_teardown(test_rmsnorm, teardown),
        cmocka_unit_test_teardown(test_batchnorm, teardown),
        cmocka_unit_test_teardown(test_batchnorm_sharded, teardown),
        cmocka_unit_test_teardown(test_softmax, teardown),
        cmocka_unit_test_teardown(test_causal_softmax, teardown),
        cmocka_unit_test_teardown(test_softmax_xent, teardown),
        cmocka_unit_test_teardown(test_moe_gate, teardown),
        cmocka_unit_test_teardown(test_add, teardown),
        cmocka_unit_test_teardown(test_act, teardown),
        cmocka_unit_test_teardown(test_softcap, teardown),
        cmocka_unit_test_teardown(test_mul_expand, teardown),
        cmocka_unit_test_teardown(test_reduce_mean, teardown),
        cmocka_unit_test_teardown(test_rope, teardown),
        cmocka_unit_test_teardown(test_box_copy, teardown),
        cmocka_unit_test_teardown(test_permute, teardown),
        cmocka_unit_test_teardown(test_sgd, teardown),
        cmocka_unit_test_teardown(test_adam, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
