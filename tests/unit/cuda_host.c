/* tests/unit/cuda_host.c: the cuda backend's host-side logic (runtime/cuda/
 * cuda_host.c), on any machine, GPU or not: precision and comm-mode
 * parsing, the device-memory pool's arithmetic (against a shadow model
 * under random traffic), the cuDNN algorithm cache, the conv window
 * mapping onto cuDNN's symmetric padding (a cuDNN-style naive conv on the
 * mapped input against the CPU kernels), the box-copy / permute /
 * reduce-mean plans the kernels walk and the broadcasts of mul and expand
 * over the reduce plan (against the CPU kernels), rank ->
 * GPU mapping and the communicator cache with MPI attribute eviction; the
 * map of bf16 weight copies (hand cases, then random traffic against a
 * byte-owner model), the timing events' count, and the estimate of NCCL's
 * buffers with the pool's reserve for them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/kernels/moe_route.h"
#include "cuda_host.h"
#include "shardbench/kernels.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static int rint_in(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float frand(void) { return (float)(rnd() >> 8) / 8388608.0f - 1.0f; }

static float *frandv(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > m)
            m = fabsf(a[i] - b[i]);
    return m;
}

/* ---- parsing ---- */

static void test_precision(void **state)
{
    (void)state;
    sbc_precision p;
    char msg[128] = "";
    assert_int_equal(sbc_precision_parse(NULL, &p, msg, sizeof msg), 0);
    assert_int_equal(p, SBC_FP32);
    assert_int_equal(sbc_precision_parse("", &p, msg, sizeof msg), 0);
    assert_int_equal(p, SBC_FP32);
    assert_int_equal(sbc_precision_parse("tf32", &p, msg, sizeof msg), 0);
    assert_int_equal(p, SBC_TF32);
    assert_int_equal(sbc_precision_parse("BF16", &p, msg, sizeof msg), 0);
    assert_int_equal(p, SBC_BF16);
    assert_int_equal(sbc_precision_parse("fp32", &p, msg, sizeof msg), 0);
    assert_int_equal(p, SBC_FP32);
    assert_int_equal(sbc_precision_parse("fp16", &p, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "'fp16'"));
    assert_non_null(strstr(msg, "fp32, tf32, bf16"));
    assert_string_equal(sbc_precision_name(SBC_TF32), "tf32");
    assert_string_equal(sbc_precision_name(SBC_BF16), "bf16");
}

static void test_comm_mode(void **state)
{
    (void)state;
    sbc_comm_mode m;
    char msg[256] = "";
    assert_int_equal(sbc_comm_mode_parse(NULL, &m, msg, sizeof msg), 0);
    assert_int_equal(m, SBC_COMM_AUTO);
    assert_int_equal(sbc_comm_mode_parse("MPI", &m, msg, sizeof msg), 0);
    assert_int_equal(m, SBC_COMM_MPI);
    assert_int_equal(sbc_comm_mode_parse("nccl", &m, msg, sizeof msg), 0);
    assert_int_equal(m, SBC_COMM_NCCL);
    assert_int_equal(sbc_comm_mode_parse("gloo", &m, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "'gloo'"));
    assert_int_equal(sbc_comm_choose(SBC_COMM_AUTO, 1, 4, msg, sizeof msg), 1);
    assert_int_equal(sbc_comm_choose(SBC_COMM_AUTO, 0, 4, msg, sizeof msg), 0);
    assert_int_equal(sbc_comm_choose(SBC_COMM_MPI, 1, 4, msg, sizeof msg), 0);
    assert_int_equal(sbc_comm_choose(SBC_COMM_NCCL, 1, 4, msg, sizeof msg), 1);
    msg[0] = 0;
    assert_int_equal(sbc_comm_choose(SBC_COMM_NCCL, 0, 4, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "share a GPU"));
}

/* ---- pool ---- */

static void test_pool_basics(void **state)
{
    (void)state;
    sbc_pool p;
    assert_int_equal(sbc_pool_init(&p, 1000, 3), -1); /* not a power of two */
    assert_int_equal(sbc_pool_init(&p, 4096 + 100, 256), 0);
    assert_int_equal(p.capacity, 4096);
    assert_int_equal(sbc_pool_rounded(&p, 0), 256);
    assert_int_equal(sbc_pool_rounded(&p, 1), 256);
    assert_int_equal(sbc_pool_rounded(&p, 256), 256);
    assert_int_equal(sbc_pool_rounded(&p, 257), 512);
    size_t a, b, c, d;
    assert_int_equal(sbc_pool_alloc(&p, 1000, &a), 0); /* 1024 */
    assert_int_equal(sbc_pool_alloc(&p, 10, &b), 0);   /* 256 */
    assert_int_equal(sbc_pool_alloc(&p, 2048, &c), 0); /* 2048 */
    assert_int_equal(a, 0);
    assert_int_equal(b, 1024);
    assert_int_equal(c, 1280);
    assert_int_equal(p.in_use, 3328);
    assert_int_equal(sbc_pool_largest_free(&p), 768);
    assert_int_equal(sbc_pool_alloc(&p, 1024, &d), -1); /* does not fit */
    assert_int_equal(p.nfail, 1);
    /* free the middle, then the first: they merge */
    assert_int_equal(sbc_pool_free(&p, b), 0);
    assert_int_equal(sbc_pool_free(&p, b), -1); /* double free */
    assert_int_equal(sbc_pool_free(&p, 17), -1); /* not a block */
    assert_int_equal(sbc_pool_free(&p, a), 0);
    assert_int_equal(sbc_pool_largest_free(&p), 1280);
    /* best fit: a 700-byte request takes the 768 tail, not the 1280 hole */
    assert_int_equal(sbc_pool_alloc(&p, 700, &d), 0);
    assert_int_equal(d, 3328);
    assert_int_equal(p.peak, 3328);
    assert_int_equal(sbc_pool_free(&p, c), 0);
    assert_int_equal(sbc_pool_free(&p, d), 0);
    assert_int_equal(p.in_use, 0);
    assert_int_equal(p.n, 1); /* everything merged back into one block */
    assert_int_equal(sbc_pool_largest_free(&p), 4096);
    sbc_pool_fini(&p);
    /* pool sizing */
    assert_int_equal(sbc_pool_size_for(1000 << 20, 0.5, 1, 0, 256), 500 << 20);
    assert_int_equal(sbc_pool_size_for(1000 << 20, 0.5, 4, 0, 256), 125 << 20);
    assert_int_equal(sbc_pool_size_for(1000 << 20, 0.5, 1, 64 << 20, 256), 64 << 20);
    assert_int_equal(sbc_pool_size_for(1000, 1.0, 0, 0, 256), 768);
}

/* random traffic against a shadow list of live blocks */
static void test_pool_random(void **state)
{
    (void)state;
    enum { CAP = 1 << 20, LIVE = 200 };
    sbc_pool p;
    assert_int_equal(sbc_pool_init(&p, CAP, 64), 0);
    size_t off[LIVE], len[LIVE];
    int live = 0;
    size_t sum = 0, peak = 0;
    for (int it = 0; it < 20000; it++) {
        if (live < LIVE && (live == 0 || rnd() % 3)) {
            size_t want = 1 + rnd() % 20000, o;
            if (sbc_pool_alloc(&p, want, &o) == 0) {
                size_t r = sbc_pool_rounded(&p, want);
                assert_int_equal(o % 64, 0);
                assert_true(o + r <= CAP);
                for (int i = 0; i < live; i++) /* no overlap */
                    assert_true(o + r <= off[i] || off[i] + len[i] <= o);
                off[live] = o;
                len[live++] = r;
                sum += r;
                if (sum > peak)
                    peak = sum;
            } else {
                assert_true(sbc_pool_largest_free(&p) < sbc_pool_rounded(&p, want));
            }
        } else {
            int i = (int)(rnd() % (uint32_t)live);
            assert_int_equal(sbc_pool_free(&p, off[i]), 0);
            sum -= len[i];
            off[i] = off[live - 1];
            len[i] = len[--live];
        }
        assert_int_equal(p.in_use, sum);
        /* blocks tile the capacity, free neighbours are always merged */
        size_t at = 0;
        for (int b = 0; b < p.n; b++) {
            assert_int_equal(p.b[b].off, at);
            at += p.b[b].size;
            if (b > 0)
                assert_false(!p.b[b].used && !p.b[b - 1].used);
        }
        assert_int_equal(at, CAP);
    }
    assert_int_equal(p.peak, peak);
    while (live > 0)
        assert_int_equal(sbc_pool_free(&p, off[--live]), 0);
    assert_int_equal(p.n, 1);
    sbc_pool_fini(&p);
}

/* ---- algorithm cache ---- */

/* workspace fallback: the first candidate, in the search's order, that fits */
static void test_conv_fit(void **state)
{
    (void)state;
    sbc_conv_algo a, run;
    /* the search's order: 7 (1 MiB), 1 (64 KiB), 6 (4 MiB), 0 (none) */
    sbc_conv_algo_add(&a, 0, 7, SBC_MATH_TENSOR_OP, 1 << 20);
    sbc_conv_algo_add(&a, 1, 1, SBC_MATH_TENSOR_OP, 64 << 10);
    sbc_conv_algo_add(&a, 2, 6, SBC_MATH_DEFAULT, 4 << 20);
    sbc_conv_algo_add(&a, 3, 0, SBC_MATH_FMA, 0);
    assert_int_equal(a.algo, 7);
    assert_int_equal(a.nalt, 3);
    /* room for the choice: the choice */
    assert_int_equal(sbc_conv_algo_fit(&a, 1 << 20, &run), 0);
    assert_int_equal(run.algo, 7);
    assert_int_equal(run.workspace, 1 << 20);
    assert_int_equal(run.nalt, 0);
    /* less: the next that fits in order, not the smallest */
    assert_int_equal(sbc_conv_algo_fit(&a, (1 << 20) - 1, &run), 1);
    assert_int_equal(run.algo, 1);
    assert_int_equal(run.math, SBC_MATH_TENSOR_OP);
    assert_int_equal(run.workspace, 64 << 10);
    /* nothing free: the one without workspace */
    assert_int_equal(sbc_conv_algo_fit(&a, 0, &run), 3);
    assert_int_equal(run.algo, 0);
    assert_int_equal(run.math, SBC_MATH_FMA);
    /* no candidate fits */
    sbc_conv_algo b;
    sbc_conv_algo_add(&b, 0, 2, SBC_MATH_FMA, 4096);
    assert_int_equal(sbc_conv_algo_fit(&b, 4095, &run), -1);
    /* beyond SBC_CONV_ALTS alternatives: dropped */
    for (int i = 1; i < SBC_CONV_ALTS + 4; i++)
        sbc_conv_algo_add(&b, i, 100 + i, SBC_MATH_FMA, 8192);
    assert_int_equal(b.nalt, SBC_CONV_ALTS);
    assert_int_equal(b.alt_algo[SBC_CONV_ALTS - 1], 100 + SBC_CONV_ALTS);
}

static void test_algo_cache(void **state)
{
    (void)state;
    sbc_algo_cache c = {0};
    sbc_conv_algo v, got;
    sbc_conv_key k =
        sbc_conv_key_make(SBC_CONV_FWD, 8, 64, 56, 56, 128, 3, 3, 1, 1, 1, 1, 56, 56, 1, 1, 1, 0);
    assert_int_equal(sbc_algo_cache_get(&c, &k, &got), 0);
    v = (sbc_conv_algo){.algo = 6, .math = 1, .workspace = 12345};
    assert_int_equal(sbc_algo_cache_put(&c, &k, &v), 0);
    assert_int_equal(sbc_algo_cache_get(&c, &k, &got), 1);
    assert_int_equal(got.algo, 6);
    assert_int_equal(got.workspace, 12345);
    /* same sizes, other pass or precision: other keys */
    sbc_conv_key kb = sbc_conv_key_make(SBC_CONV_BWD_DATA, 8, 64, 56, 56, 128, 3, 3, 1, 1, 1, 1, 56,
                                        56, 1, 1, 1, 0);
    sbc_conv_key kp =
        sbc_conv_key_make(SBC_CONV_FWD, 8, 64, 56, 56, 128, 3, 3, 1, 1, 1, 1, 56, 56, 1, 1, 1, 1);
    assert_int_equal(sbc_algo_cache_get(&c, &kb, &got), 0);
    assert_int_equal(sbc_algo_cache_get(&c, &kp, &got), 0);
    /* same sizes, other dilation or groups: other keys (another cuDNN problem) */
    sbc_conv_key kd = sbc_conv_key_make(SBC_CONV_FWD, 8, 64, 56, 56, 128, 3, 3, 1, 1, 1, 1, 56, 56,
                                        2, 1, 1, 0);
    sbc_conv_key kg = sbc_conv_key_make(SBC_CONV_FWD, 8, 64, 56, 56, 128, 3, 3, 1, 1, 1, 1, 56, 56,
                                        1, 1, 32, 0);
    assert_int_equal(sbc_algo_cache_get(&c, &kd, &got), 0);
    assert_int_equal(sbc_algo_cache_get(&c, &kg, &got), 0);
    /* many shapes: growth keeps every entry */
    for (int i = 0; i < 3000; i++) {
        sbc_conv_key ki = sbc_conv_key_make(i % 3, i, 3, 32, 32, 16, 3, 3, 1, 1, 1, 1, 32, 32, 1, 1,
                                            1, i % 2);
        sbc_conv_algo vi = {.algo = i % 7, .math = i % 3, .workspace = (size_t)i * 10};
        assert_int_equal(sbc_algo_cache_put(&c, &ki, &vi), 0);
    }
    assert_int_equal(c.n, 3001);
    for (int i = 0; i < 3000; i++) {
        sbc_conv_key ki = sbc_conv_key_make(i % 3, i, 3, 32, 32, 16, 3, 3, 1, 1, 1, 1, 32, 32, 1, 1,
                                            1, i % 2);
        assert_int_equal(sbc_algo_cache_get(&c, &ki, &got), 1);
        assert_int_equal(got.algo, i % 7);
        assert_int_equal(got.workspace, (size_t)i * 10);
    }
    /* replace */
    v.algo = 2;
    assert_int_equal(sbc_algo_cache_put(&c, &k, &v), 0);
    assert_int_equal(c.n, 3001);
    assert_int_equal(sbc_algo_cache_get(&c, &k, &got), 1);
    assert_int_equal(got.algo, 2);
    assert_int_equal(c.hits, 3002);
    assert_int_equal(c.misses, 5);
    sbc_algo_cache_free(&c);
}

/* ---- conv window ---- */

/* cuDNN's semantics: x (B,C,xh,xw) with symmetric pads (ph,pw), output size
 * derived from them; cross-correlation with taps dh, dw apart and G groups
 * (filter (N, C/G, R, S), output channel n reads input channels of group
 * n / (N/G)), as cudnnSetConvolution2dDescriptor and
 * cudnnSetConvolutionGroupCount set it. */
typedef struct {
    int B, C, xh, xw, N, R, S, sh, sw, ph, pw, Ho, Wo, dh, dw, G;
} cudnn_geom;

static void naive_cudnn(const cudnn_geom *k, const float *x, const float *w, float *y,
                        const float *dy, float *dx)
{
    int Cg = k->C / k->G, Ng = k->N / k->G;
    if (dx)
        memset(dx, 0, (size_t)k->B * k->C * k->xh * k->xw * sizeof *dx);
    for (int b = 0; b < k->B; b++)
        for (int n = 0; n < k->N; n++)
            for (int oy = 0; oy < k->Ho; oy++)
                for (int ox = 0; ox < k->Wo; ox++) {
                    size_t oi = ((size_t)(b * k->N + n) * k->Ho + oy) * k->Wo + ox;
                    double s = 0;
                    for (int c = 0; c < Cg; c++)
                        for (int r = 0; r < k->R; r++)
                            for (int q = 0; q < k->S; q++) {
                                int iy = oy * k->sh - k->ph + r * k->dh;
                                int ix = ox * k->sw - k->pw + q * k->dw;
                                if (iy < 0 || iy >= k->xh || ix < 0 || ix >= k->xw)
                                    continue;
                                int ci = n / Ng * Cg + c;
                                size_t xi = ((size_t)(b * k->C + ci) * k->xh + iy) * k->xw + ix;
                                size_t wi = ((size_t)(n * Cg + c) * k->R + r) * k->S + q;
                                if (y)
                                    s += (double)x[xi] * w[wi];
                                if (dx)
                                    dx[xi] += dy[oi] * w[wi];
                            }
                    if (y)
                        y[oi] = (float)s;
                }
}

static void test_conv_window(void **state)
{
    (void)state;
    sbc_window g;
    /* 3x3 pad 1 stride 1 same: direct */
    assert_int_equal(sbc_conv_window(8, 8, 3, 3, 1, 1, 1, 1, 8, 8, &g), 0);
    assert_true(g.direct);
    assert_int_equal(g.ph, 1);
    /* AlexNet conv1: 11x11 stride 4 pad 2 on 227 -> 56 */
    assert_int_equal(sbc_conv_window(227, 227, 11, 11, 4, 4, 2, 2, 56, 56, &g), 0);
    assert_true(g.direct);
    /* a halo box: negative local padding -> staged */
    assert_int_equal(sbc_conv_window(6, 8, 3, 3, 1, 1, -1, 1, 4, 8, &g), 0);
    assert_false(g.direct);
    assert_int_equal(g.xh, 6);
    assert_int_equal(g.oh, 1);
    /* padding as large as the window -> staged */
    assert_int_equal(sbc_conv_window(8, 8, 1, 1, 1, 1, 1, 1, 10, 10, &g), 0);
    assert_false(g.direct);
    /* fewer outputs than cuDNN would derive -> staged */
    assert_int_equal(sbc_conv_window(10, 10, 3, 3, 1, 1, 1, 1, 5, 10, &g), 0);
    assert_false(g.direct);
    assert_int_equal(sbc_conv_window(0, 10, 3, 3, 1, 1, 1, 1, 5, 10, &g), -1);
    /* a dilated window is passed by its extent: 3 taps 2 apart span 5 */
    assert_int_equal(sbc_conv_window(9, 9, 5, 5, 1, 1, 2, 2, 9, 9, &g), 0);
    assert_true(g.direct);
    /* random geometry (dilated, grouped too): cuDNN semantics on the mapped
     * input = the CPU kernels */
    int direct = 0, staged = 0;
    for (int it = 0; it < 300; it++) {
        int G = rint_in(1, 3), dh = rint_in(1, 2), dw = rint_in(1, 2);
        int B = rint_in(1, 2), C = G * rint_in(1, 2), N = G * rint_in(1, 2);
        int R = rint_in(1, 4), S = rint_in(1, 4), sh = rint_in(1, 3), sw = rint_in(1, 3);
        int Hin = rint_in(1, 9), Win = rint_in(1, 9);
        int pt = rint_in(-3, 3), pl = rint_in(-3, 3), Ho = rint_in(1, 6), Wo = rint_in(1, 6);
        if (it % 3 == 0) { /* the sizes cuDNN itself derives: must go direct */
            pt = rint_in(0, 2), pl = rint_in(0, 2);
            R = (rint_in(1, Hin + 2 * pt) - 1) / dh + 1;
            S = (rint_in(1, Win + 2 * pl) - 1) / dw + 1;
        }
        int RE = dh * (R - 1) + 1, SE = dw * (S - 1) + 1; /* the window's extent */
        if (it % 3 == 0)
            Ho = (Hin + 2 * pt - RE) / sh + 1, Wo = (Win + 2 * pl - SE) / sw + 1;
        assert_int_equal(sbc_conv_window(Hin, Win, RE, SE, sh, sw, pt, pl, Ho, Wo, &g), 0);
        if (it % 3 == 0 && pt < RE && pl < SE)
            assert_true(g.direct);
        direct += g.direct;
        staged += !g.direct;
        size_t nin = (size_t)B * C * Hin * Win, nout = (size_t)B * N * Ho * Wo;
        size_t nx = (size_t)B * C * g.xh * g.xw;
        float *inp = frandv(nin), *w = frandv((size_t)N * (C / G) * R * S);
        float *x = malloc(nx * sizeof *x);
        float *ref = calloc(nout, sizeof *ref), *got = calloc(nout, sizeof *got);
        float *work = malloc(sb_conv2d_work_floats(C, R, S, N, Ho, Wo) * sizeof(float) + 4);
        /* the staging the kernel does (direct: inp itself) */
        for (int p = 0; p < B * C; p++)
            for (int y = 0; y < g.xh; y++)
                for (int xx = 0; xx < g.xw; xx++) {
                    int iy = g.direct ? y : y + g.oh, ix = g.direct ? xx : xx + g.ow;
                    x[((size_t)p * g.xh + y) * g.xw + xx] =
                        (iy >= 0 && iy < Hin && ix >= 0 && ix < Win)
                            ? inp[((size_t)p * Hin + iy) * Win + ix] : 0.0f;
                }
        /* cuDNN's derived output size equals the wanted one */
        int oh = (g.xh + 2 * g.ph - RE) < 0 ? 0 : (g.xh + 2 * g.ph - RE) / sh + 1;
        int ow = (g.xw + 2 * g.pw - SE) < 0 ? 0 : (g.xw + 2 * g.pw - SE) / sw + 1;
        assert_int_equal(oh, Ho);
        assert_int_equal(ow, Wo);
        assert_true(g.ph >= 0 && g.pw >= 0);
        cudnn_geom k = {B, C, g.xh, g.xw, N, R, S, sh, sw, g.ph, g.pw, Ho, Wo, dh, dw, G};
        naive_cudnn(&k, x, w, got, NULL, NULL);
        sb_conv2d_forward(ref, inp, w, NULL, work, B, C, Hin, Win, N, R, S, sh, sw, pt, pl, Ho, Wo,
                          dh, dw, G, 0);
        assert_true(max_abs_diff(ref, got, nout) < 1e-4f);
        /* backward data: cuDNN into X', then the unstaging add */
        float *dy = frandv(nout), *dx = malloc(nx * sizeof *dx);
        float *dref = calloc(nin, sizeof *dref), *dgot = calloc(nin, sizeof *dgot);
        naive_cudnn(&k, NULL, w, NULL, dy, dx);
        for (int p = 0; p < B * C; p++)
            for (int y = 0; y < Hin; y++)
                for (int xx = 0; xx < Win; xx++) {
                    int sy = g.direct ? y : y - g.oh, sx = g.direct ? xx : xx - g.ow;
                    if (sy >= 0 && sy < g.xh && sx >= 0 && sx < g.xw)
                        dgot[((size_t)p * Hin + y) * Win + xx] += dx[((size_t)p * g.xh + sy) * g.xw + sx];
                }
        sb_conv2d_backward_data(dref, work, dy, NULL, w, B, C, Hin, Win, N, R, S, sh, sw, pt, pl,
                                Ho, Wo, dh, dw, G);
        assert_true(max_abs_diff(dref, dgot, nin) < 1e-4f);
        free(inp), free(w), free(x), free(ref), free(got), free(work), free(dy), free(dx);
        free(dref), free(dgot);
    }
    assert_true(direct > 10 && staged > 10);
}

/* ---- box copy, permute, reduce plans ---- */

static void apply_box_plan(float *dst, const float *src, const sbc_box_plan *p, int acc)
{
    for (int64_t i = 0; i < p->count; i++) {
        int64_t r = i, d = p->d0, s = p->s0;
        for (int k = p->nd - 1; k >= 0; k--) {
            int64_t c = r % p->size[k];
            r /= p->size[k];
            d += c * p->ds[k];
            s += c * p->ss[k];
        }
        dst[d] = acc ? dst[d] + src[s] : src[s];
    }
}

static void test_box_plan(void **state)
{
    (void)state;
    sbc_box_plan p;
    int dims[3] = {4, 5, 6}, lo[3] = {0, 0, 0};
    sbc_box_plan_make(&p, dims, lo, dims, lo, dims, 3);
    assert_int_equal(p.nd, 1); /* whole arrays: one run */
    assert_true(p.contiguous);
    assert_int_equal(p.count, 120);
    int sz0[3] = {4, 0, 6};
    sbc_box_plan_make(&p, dims, lo, dims, lo, sz0, 3);
    assert_int_equal(p.count, 0);
    for (int it = 0; it < 400; it++) {
        int nd = rint_in(1, 5), dd[SB_MAX_DIMS], sd[SB_MAX_DIMS], dl[SB_MAX_DIMS], sl[SB_MAX_DIMS],
            sz[SB_MAX_DIMS];
        size_t nds = 1, nss = 1;
        for (int d = 0; d < nd; d++) {
            sz[d] = rint_in(1, 4);
            dd[d] = sz[d] + (rnd() % 2 ? rint_in(0, 2) : 0);
            sd[d] = sz[d] + (rnd() % 2 ? rint_in(0, 2) : 0);
            dl[d] = rint_in(0, dd[d] - sz[d]);
            sl[d] = rint_in(0, sd[d] - sz[d]);
            nds *= (size_t)dd[d];
            nss *= (size_t)sd[d];
        }
        int acc = (int)(rnd() % 2);
        float *src = frandv(nss), *ref = frandv(nds), *got = malloc(nds * sizeof *got);
        memcpy(got, ref, nds * sizeof *got);
        sb_strided_box_copy(ref, dd, dl, src, sd, sl, sz, nd, acc);
        sbc_box_plan_make(&p, dd, dl, sd, sl, sz, nd);
        assert_true(p.nd >= 1 && p.nd <= nd);
        apply_box_plan(got, src, &p, acc);
        assert_true(max_abs_diff(ref, got, nds) == 0.0f);
        free(src), free(ref), free(got);
    }
}

static void test_perm_plan(void **state)
{
    (void)state;
    for (int it = 0; it < 300; it++) {
        int nd = rint_in(1, 5), dims[SB_MAX_DIMS], perm[SB_MAX_DIMS];
        size_t n = 1;
        for (int d = 0; d < nd; d++) {
            dims[d] = rint_in(1, 4);
            perm[d] = d;
            n *= (size_t)dims[d];
        }
        for (int d = nd - 1; d > 0; d--) {
            int j = rint_in(0, d), t = perm[d];
            perm[d] = perm[j];
            perm[j] = t;
        }
        int acc = (int)(rnd() % 2);
        float *inp = frandv(n), *ref = frandv(n), *got = malloc(n * sizeof *got);
        memcpy(got, ref, n * sizeof *got);
        sb_permute(ref, inp, nd, dims, perm, acc);
        sbc_perm_plan p;
        sbc_perm_plan_make(&p, nd, dims, perm);
        assert_int_equal(p.count, (int64_t)n);
        for (int64_t i = 0; i < p.count; i++) {
            int64_t r = i, s = 0;
            for (int k = p.nd - 1; k >= 0; k--) {
                s += (r % p.odims[k]) * p.istride[k];
                r /= p.odims[k];
            }
            got[i] = acc ? got[i] + inp[s] : inp[s];
        }
        assert_true(max_abs_diff(ref, got, n) == 0.0f);
        free(inp), free(ref), free(got);
    }
}

/* moe_gate as the cuda kernels (kernels/cuda/k_moe.cu) run it: top-k for
 * every token of every group (one launch), then the slots of each group
 * (one thread a group), then the outputs or the gradient per token, on
 * the work layout of k_moe.c, in stale scratch (the backend's pool does
 * not zero it); against the CPU kernels, which route group by group in
 * zeroed scratch. */
static void test_moe_plan(void **state)
{
    (void)state;
    const int shapes[][5] = {{3, 7, 5, 2, 2}, {2, 9, 4, 3, 3}, {1, 4, 8, 1, 1}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int G = shapes[t][0], S = shapes[t][1], E = shapes[t][2], C = shapes[t][3],
            k = shapes[t][4];
        int64_t T = (int64_t)G * S, n = T * E * C, nk = T * k;
        float *logits = frandv((size_t)(T * E)), *dcomb = frandv((size_t)n);
        size_t nw = sb_moe_gate_work_floats(G, S, E, k);
        assert_int_equal(nw, (size_t)(3 * nk + 2 * (int64_t)G * E));
        float *work = calloc(nw, sizeof *work), *w2 = calloc(nw, sizeof *w2);
        float *comb = calloc((size_t)n, sizeof *comb), *disp = calloc((size_t)n, sizeof *disp);
        float *gc = calloc((size_t)n, sizeof *gc), *gd = calloc((size_t)n, sizeof *gd);
        float *dl = calloc((size_t)(T * E), sizeof *dl), *gdl = calloc((size_t)(T * E), sizeof *dl);
        memset(w2, 0x5a, nw * sizeof *w2); /* scratch from the pool: stale */
        int32_t *idx = (int32_t *)(void *)w2, *slot = (int32_t *)(void *)(w2 + nk);
        float *wt = w2 + 2 * nk;
        int32_t *count = (int32_t *)(void *)(w2 + 3 * nk);
        float *dens = w2 + 3 * nk + (int64_t)G * E, aw = t == 1 ? 0.0f : 0.75f;
        float *aux = calloc((size_t)G, sizeof *aux), *gaux = calloc((size_t)G, sizeof *gaux);
        for (int64_t i = 0; i < T; i++)
            sb_moe_topk_at(i, logits, E, k, idx, wt);
        for (int64_t g = 0; g < G; g++)
            sb_moe_assign_at(g, idx, slot, count, S, E, C, k);
        for (int64_t i = 0; i < T; i++)
            sb_moe_scatter_at(i, comb, disp, idx, slot, wt, E, C, k);
        for (int64_t g = 0; g < G; g++) {
            sb_moe_density_at(g, idx, dens, S, E, k);
            aux[g] = sb_moe_aux_at(g, logits, dens, S, E);
        }
        for (int64_t i = 0; i < T; i++)
            sb_moe_grad_at(i, dl, dcomb, idx, slot, wt, E, C, k);
        if (aw != 0.0f)
            for (int64_t i = 0; i < T; i++)
                sb_moe_aux_grad_at(i, dl, logits, dens, aw, S, E);
        sb_moe_gate_forward(gc, gd, gaux, work, logits, G, S, E, C, k);
        sb_moe_gate_backward(gdl, work, dcomb, logits, aw, G, S, E, C, k);
        assert_true(max_abs_diff(aux, gaux, (size_t)G) == 0);
        assert_true(max_abs_diff(comb, gc, (size_t)n) == 0);
        assert_true(max_abs_diff(disp, gd, (size_t)n) == 0);
        assert_true(max_abs_diff(dl, gdl, (size_t)(T * E)) == 0);
        /* every token holds at most k kept choices, each in a distinct slot */
        for (int64_t g = 0; g < G; g++)
            for (int e = 0; e < E; e++)
                for (int c = 0; c < C; c++) {
                    float taken = 0;
                    for (int s2 = 0; s2 < S; s2++)
                        taken += gd[(((g * S) + s2) * E + e) * C + c];
                    assert_true(taken <= 1.0f);
                }
        free(logits), free(dcomb), free(work), free(w2), free(comb), free(disp), free(gc), free(gd);
        free(dl), free(gdl), free(aux), free(gaux);
    }
}

static void test_reduce_plan(void **state)
{
    (void)state;
    for (int it = 0; it < 300; it++) {
        int nd = rint_in(1, 5), dims[SB_MAX_DIMS];
        size_t n = 1;
        for (int d = 0; d < nd; d++) {
            dims[d] = rint_in(1, 4);
            n *= (size_t)dims[d];
        }
        unsigned axes = rnd() & ((1u << nd) - 1);
        long count = rnd() % 2 ? 0 : rint_in(1, 50);
        sbc_reduce_plan p;
        sbc_reduce_plan_make(&p, nd, dims, axes, count);
        float *inp = frandv(n), *ref = malloc((size_t)p.n_out * sizeof *ref),
              *got = malloc((size_t)p.n_out * sizeof *got);
        sb_reduce_mean_forward(ref, inp, nd, dims, axes, count);
        for (int64_t o = 0; o < p.n_out; o++) {
            int64_t base = 0, t = o;
            for (int d = p.nk - 1; d >= 0; d--) {
                base += (t % p.kdims[d]) * p.kstride[d];
                t /= p.kdims[d];
            }
            double s = 0;
            for (int64_t r = 0; r < p.n_red; r++) {
                int64_t off = 0, u = r;
                for (int d = p.nr - 1; d >= 0; d--) {
                    off += (u % p.rdims[d]) * p.rstride[d];
                    u /= p.rdims[d];
                }
                s += inp[base + off];
            }
            got[o] = (float)s * p.scale;
        }
        assert_true(max_abs_diff(ref, got, (size_t)p.n_out) < 1e-5f);
        /* backward through the same plan */
        float *dref = calloc(n, sizeof *dref), *dgot = calloc(n, sizeof *dgot);
        sb_reduce_mean_backward(dref, ref, nd, dims, axes, count);
        for (int64_t i = 0; i < p.n_out * p.n_red; i++) {
            int64_t o = i / p.n_red, r = i % p.n_red, off = 0, t = o;
            for (int d = p.nk - 1; d >= 0; d--) {
                off += (t % p.kdims[d]) * p.kstride[d];
                t /= p.kdims[d];
            }
            for (int d = p.nr - 1; d >= 0; d--) {
                off += (r % p.rdims[d]) * p.rstride[d];
                r /= p.rdims[d];
            }
            dgot[off] += ref[o] * p.scale;
        }
        assert_true(max_abs_diff(dref, dgot, n) < 1e-5f);
        free(inp), free(ref), free(got), free(dref), free(dgot);
    }
}

/* offset in the full array of element (o, r) of a reduce plan */
static int64_t plan_offset(const sbc_reduce_plan *p, int64_t o, int64_t r)
{
    int64_t off = 0;
    for (int d = p->nk - 1; d >= 0; d--) {
        off += (o % p->kdims[d]) * p->kstride[d];
        o /= p->kdims[d];
    }
    for (int d = p->nr - 1; d >= 0; d--) {
        off += (r % p->rdims[d]) * p->rstride[d];
        r /= p->rdims[d];
    }
    return off;
}

/* The broadcasts of mul and expand as kernels/cuda/k_pointwise.cu walks
 * them (the reduce plan of the dims the small operand lacks, count 1:
 * element (o, r) reads the operand at o; its gradient sums over r in
 * order) against the CPU kernels. */
static void test_bcast_plan(void **state)
{
    (void)state;
    for (int it = 0; it < 300; it++) {
        int nd = rint_in(1, 5), dims[SB_MAX_DIMS];
        size_t n = 1;
        for (int d = 0; d < nd; d++) {
            dims[d] = rint_in(1, 4);
            n *= (size_t)dims[d];
        }
        unsigned has = rnd() & ((1u << nd) - 1);
        sbc_reduce_plan p;
        sbc_reduce_plan_make(&p, nd, dims, ((1u << nd) - 1) & ~has, 1);
        size_t nb = (size_t)p.n_out;
        float *a = frandv(n), *b = frandv(nb), *dy = frandv(n);
        float *ref = calloc(n, sizeof *ref), *got = calloc(n, sizeof *got);
        float *da_ref = calloc(n, sizeof *ref), *da_got = calloc(n, sizeof *ref);
        float *db_ref = calloc(nb, sizeof *ref), *db_got = calloc(nb, sizeof *ref);
        float *dx_ref = calloc(nb, sizeof *ref), *dx_got = calloc(nb, sizeof *ref);
        float *ex_ref = calloc(n, sizeof *ref), *ex_got = calloc(n, sizeof *ref);
        sb_mul_forward(ref, a, b, nd, dims, has);
        sb_mul_backward(da_ref, db_ref, dy, a, b, nd, dims, has);
        sb_expand_forward(ex_ref, b, nd, dims, has);
        sb_expand_backward(dx_ref, dy, nd, dims, has);
        for (int64_t i = 0; i < p.n_out * p.n_red; i++) {
            int64_t o = i / p.n_red, off = plan_offset(&p, o, i % p.n_red);
            got[off] = a[off] * b[o];
            da_got[off] += dy[off] * b[o];
            ex_got[off] = b[o];
        }
        for (int64_t o = 0; o < p.n_out; o++) {
            float s = 0.0f, t = 0.0f;
            for (int64_t r = 0; r < p.n_red; r++) {
                int64_t off = plan_offset(&p, o, r);
                s += dy[off] * a[off];
                t += dy[off];
            }
            db_got[o] += s;
            dx_got[o] += t;
        }
        assert_true(max_abs_diff(ref, got, n) == 0.0f);
        assert_true(max_abs_diff(da_ref, da_got, n) == 0.0f);
        assert_true(max_abs_diff(ex_ref, ex_got, n) == 0.0f);
        assert_true(max_abs_diff(db_ref, db_got, nb) < 1e-5f);
        assert_true(max_abs_diff(dx_ref, dx_got, nb) < 1e-5f);
        free(a), free(b), free(dy), free(ref), free(got), free(da_ref), free(da_got);
        free(db_ref), free(db_got), free(dx_ref), free(dx_got), free(ex_ref), free(ex_got);
    }
}

/* ---- ranks and GPUs ---- */

static const char *const *fake_env;

static const char *fake_get(const char *k)
{
    for (int i = 0; fake_env[i]; i += 2)
        if (!strcmp(fake_env[i], k))
            return fake_env[i + 1];
    return NULL;
}

static void test_local_rank(void **state)
{
    (void)state;
    int lr = -1, ls = -1;
    static const char *const none[] = {"PATH", "/bin", NULL};
    fake_env = none;
    assert_int_equal(sbc_local_rank_env(fake_get, &lr, &ls), -1);
    static const char *const ompi[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "3",
                                       "OMPI_COMM_WORLD_LOCAL_SIZE", "8", NULL};
    fake_env = ompi;
    assert_int_equal(sbc_local_rank_env(fake_get, &lr, &ls), 0);
    assert_int_equal(lr, 3);
    assert_int_equal(ls, 8);
    static const char *const mpich[] = {"MPI_LOCALRANKID", "1", "MPI_LOCALNRANKS", "2", NULL};
    fake_env = mpich;
    assert_int_equal(sbc_local_rank_env(fake_get, &lr, &ls), 0);
    assert_int_equal(lr, 1);
    assert_int_equal(ls, 2);
    static const char *const bad[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "x", "SLURM_LOCALID", "2", NULL};
    fake_env = bad;
    assert_int_equal(sbc_local_rank_env(fake_get, &lr, &ls), 0);
    assert_int_equal(lr, 2);
    assert_int_equal(ls, 3); /* no size given: at least rank + 1 */
    assert_int_equal(sbc_device_for(5, 4), 1);
    assert_int_equal(sbc_device_for(0, 0), -1);
    /* 4 ranks on 1 GPU share it; 8 ranks on 4 GPUs: 2 each; 3 on 2: 2 and 1 */
    assert_int_equal(sbc_ranks_on_device(4, 1, 0), 4);
    assert_int_equal(sbc_ranks_on_device(8, 4, 3), 2);
    assert_int_equal(sbc_ranks_on_device(3, 2, 0), 2);
    assert_int_equal(sbc_ranks_on_device(3, 2, 1), 1);
    assert_int_equal(sbc_ranks_on_device(3, 2, 2), 0);
    sbc_gpu_id ids[4] = {{1, 10}, {1, 11}, {2, 10}, {2, 11}};
    assert_true(sbc_gpus_distinct(ids, 4));
    ids[3].gpu = 10;
    assert_false(sbc_gpus_distinct(ids, 4));
    assert_true(sbc_gpus_distinct(ids, 1));
    assert_true(sbc_hash_bytes("a", 1) != sbc_hash_bytes("b", 1));
}

/* Slurm's SLURM_TASKS_PER_NODE forms, and the local size taken from them */
static void test_slurm_tasks(void **state)
{
    (void)state;
    assert_int_equal(sbc_slurm_tasks_on_node("4", 0), 4);
    assert_int_equal(sbc_slurm_tasks_on_node("4", 1), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("4(x2)", 0), 4);
    assert_int_equal(sbc_slurm_tasks_on_node("4(x2)", 1), 4);
    assert_int_equal(sbc_slurm_tasks_on_node("4(x2)", 2), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("4(x2),3", 2), 3);
    assert_int_equal(sbc_slurm_tasks_on_node("2,1(x3),8", 0), 2);
    assert_int_equal(sbc_slurm_tasks_on_node("2,1(x3),8", 3), 1);
    assert_int_equal(sbc_slurm_tasks_on_node("2,1(x3),8", 4), 8);
    assert_int_equal(sbc_slurm_tasks_on_node("16(x100)", 99), 16);
    assert_int_equal(sbc_slurm_tasks_on_node("", 0), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("4(x)", 0), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("x", 0), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("4(2)", 0), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("4(x0)", 0), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("4(x2", 0), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("4;3", 0), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("-1", 0), -1);
    assert_int_equal(sbc_slurm_tasks_on_node(NULL, 0), -1);
    assert_int_equal(sbc_slurm_tasks_on_node("4", -1), -1);
    /* this node's entry malformed */
    assert_int_equal(sbc_slurm_tasks_on_node("4,3x", 1), -1);

    int lr = -1, ls = -1;
    /* srun -N 3 -n 11: "4(x2),3"; node 2 runs 3, SLURM_NTASKS_PER_NODE unset */
    static const char *const slurm[] = {"SLURM_LOCALID", "1", "SLURM_NODEID", "2",
                                        "SLURM_TASKS_PER_NODE", "4(x2),3", NULL};
    fake_env = slurm;
    assert_int_equal(sbc_local_rank_env(fake_get, &lr, &ls), 0);
    assert_int_equal(lr, 1);
    assert_int_equal(ls, 3);
    static const char *const slurm0[] = {"SLURM_LOCALID", "0", "SLURM_NODEID", "0",
                                         "SLURM_TASKS_PER_NODE", "4(x2),3",
                                         "SLURM_NTASKS_PER_NODE", "4", NULL};
    fake_env = slurm0;
    assert_int_equal(sbc_local_rank_env(fake_get, &lr, &ls), 0);
    assert_int_equal(ls, 4);
    /* a malformed list falls back to rank + 1 */
    static const char *const slurmbad[] = {"SLURM_LOCALID", "2", "SLURM_NODEID", "0",
                                           "SLURM_TASKS_PER_NODE", "four", NULL};
    fake_env = slurmbad;
    assert_int_equal(sbc_local_rank_env(fake_get, &lr, &ls), 0);
    assert_int_equal(ls, 3);
    /* ranks per GPU: the same devices seen by all, or devices per task */
    assert_int_equal(sbc_sharing_for(4, 1, 0, 0), 4);
    assert_int_equal(sbc_sharing_for(8, 4, 1, 0), 2);
    assert_int_equal(sbc_sharing_for(4, 1, 0, 1), 1);
    assert_int_equal(sbc_sharing_for(4, 1, 1, 1), 0);
}

/* fp32 convolutions only in FMA math; versions as text */
static void test_math_versions(void **state)
{
    (void)state;
    assert_int_equal(sbc_conv_math_for(SBC_FP32), SBC_MATH_FMA);
    assert_int_equal(sbc_conv_math_for(SBC_TF32), SBC_MATH_TENSOR_OP);
    assert_int_equal(sbc_conv_math_for(SBC_BF16), SBC_MATH_TENSOR_OP);
    assert_true(sbc_conv_math_ok(SBC_FP32, SBC_MATH_FMA));
    assert_false(sbc_conv_math_ok(SBC_FP32, SBC_MATH_DEFAULT));
    assert_false(sbc_conv_math_ok(SBC_FP32, SBC_MATH_TENSOR_OP));
    assert_false(sbc_conv_math_ok(SBC_FP32, SBC_MATH_TENSOR_OP_CONVERSION));
    for (int p = SBC_TF32; p <= SBC_BF16; p++) {
        assert_true(sbc_conv_math_ok((sbc_precision)p, SBC_MATH_TENSOR_OP));
        assert_true(sbc_conv_math_ok((sbc_precision)p, SBC_MATH_FMA));
        assert_true(sbc_conv_math_ok((sbc_precision)p, SBC_MATH_DEFAULT));
        assert_false(sbc_conv_math_ok((sbc_precision)p, SBC_MATH_TENSOR_OP_CONVERSION));
    }
    char b[32];
    assert_string_equal(sbc_cuda_version_str(13000, b, sizeof b), "13.0");
    assert_string_equal(sbc_cuda_version_str(12080, b, sizeof b), "12.8");
    assert_string_equal(sbc_cuda_version_str(0, b, sizeof b), "none");
    assert_string_equal(sbc_cudnn_version_str(91002, b, sizeof b), "9.10.2");
    assert_string_equal(sbc_nccl_version_str(22809, b, sizeof b), "2.28.9");
    assert_string_equal(sbc_nccl_version_str(2804, b, sizeof b), "2.8.4");
    assert_string_equal(sbc_nccl_version_str(0, b, sizeof b), "none");
}

/* ---- communicator cache ---- */

static int destroyed[8], ndestroyed;

static void fake_destroy(void *h) { destroyed[ndestroyed++] = (int)(intptr_t)h; }

static void test_comm_cache(void **state)
{
    (void)state;
    ndestroyed = 0;
    sbc_comm_cache *c = sbc_comm_cache_new(fake_destroy);
    assert_non_null(c);
    MPI_Comm a, b, d;
    MPI_Comm_dup(MPI_COMM_SELF, &a);
    MPI_Comm_dup(MPI_COMM_SELF, &b);
    MPI_Comm_dup(MPI_COMM_SELF, &d);
    assert_null(sbc_comm_cache_find(c, a));
    assert_non_null(sbc_comm_cache_add(c, a, 1, (void *)(intptr_t)1));
    assert_non_null(sbc_comm_cache_add(c, b, 0, NULL));
    assert_non_null(sbc_comm_cache_add(c, d, 1, (void *)(intptr_t)3));
    assert_int_equal(sbc_comm_cache_size(c), 3);
    sbc_comm_entry *e = sbc_comm_cache_find(c, a);
    assert_non_null(e);
    assert_int_equal(e->use_nccl, 1);
    assert_int_equal(sbc_comm_cache_find(c, b)->use_nccl, 0);
    assert_ptr_equal(sbc_comm_cache_at(c, 0), e);
    /* ncclCommSplit's color: a group's color, or no-color outside every group */
    assert_int_equal(sbc_nccl_split_color(3), 3);
    assert_int_equal(sbc_nccl_split_color(0), 0);
    assert_int_equal(sbc_nccl_split_color(-1), SBC_SPLIT_NOCOLOR);
    assert_int_equal(sbc_nccl_split_color(-7), SBC_SPLIT_NOCOLOR);
    assert_null(sbc_comm_cache_at(c, 3));
    /* MPI frees a communicator: its entry goes, its NCCL handle waits for
     * the reap (not destroyed inside MPI's attribute callback) */
    MPI_Comm_free(&a);
    assert_int_equal(sbc_comm_cache_size(c), 2);
    assert_int_equal(ndestroyed, 0);
    assert_int_equal(sbc_comm_cache_pending(c), 1);
    assert_int_equal(sbc_comm_cache_reap(c), 1);
    assert_int_equal(ndestroyed, 1);
    assert_int_equal(destroyed[0], 1);
    assert_int_equal(sbc_comm_cache_reap(c), 0);
    MPI_Comm_free(&b); /* MPI path: nothing to destroy */
    assert_int_equal(sbc_comm_cache_size(c), 1);
    assert_int_equal(sbc_comm_cache_pending(c), 0);
    assert_int_equal(ndestroyed, 1);
    /* a new communicator (whatever handle MPI reuses) starts with no entry */
    MPI_Comm a2;
    MPI_Comm_dup(MPI_COMM_SELF, &a2);
    assert_null(sbc_comm_cache_find(c, a2));
    MPI_Comm_free(&a2);
    /* freeing the cache destroys what is left, and d can still be freed */
    sbc_comm_cache_free(c);
    assert_int_equal(ndestroyed, 2);
    assert_int_equal(destroyed[1], 3);
    MPI_Comm_free(&d);
    assert_int_equal(ndestroyed, 2);
}

/* ---- bf16 weight shadows ---- */

static void test_shadow_basics(void **state)
{
    (void)state;
    sbc_shadow_map m = {0};
    int s1, s2, s3;
    assert_int_equal(sbc_shadow_add(&m, 1000, 400, &s1), 0);
    assert_int_equal(sbc_shadow_add(&m, 2000, 100, &s2), 0);
    assert_int_equal(sbc_shadow_add(&m, 1400, 600, NULL), 0); /* exactly between, no copy yet */
    assert_int_equal(m.shadow_bytes, 250);
    assert_null(sbc_shadow_attach(&m, sbc_shadow_at(&m, 1400), &s3));
    assert_int_equal(m.shadow_bytes, 550);
    for (int i = 0; i < m.n; i++) {
        assert_false(m.e[i].fresh); /* entries start stale */
        m.e[i].fresh = 1;           /* as the backend after converting */
    }
    assert_int_equal(sbc_shadow_add(&m, 1000, 4, &s1), -1);  /* same base */
    assert_int_equal(sbc_shadow_add(&m, 1399, 1, &s1), -1);  /* inside the first */
    assert_int_equal(sbc_shadow_add(&m, 900, 101, &s1), -1); /* reaches into the first */
    assert_int_equal(sbc_shadow_add(&m, 900, 0, &s1), -1);   /* empty */
    assert_int_equal(m.n, 3);
    /* containment: the whole span inside one buffer */
    assert_ptr_equal(sbc_shadow_find(&m, 1000, 400)->shadow, &s1);
    assert_ptr_equal(sbc_shadow_find(&m, 1396, 4)->shadow, &s1);
    assert_null(sbc_shadow_find(&m, 1396, 8)); /* runs into the next buffer */
    assert_ptr_equal(sbc_shadow_find(&m, 1400, 0)->shadow, &s3);
    assert_null(sbc_shadow_find(&m, 999, 4));
    assert_null(sbc_shadow_find(&m, 2100, 4));
    assert_ptr_equal(sbc_shadow_at(&m, 2000)->shadow, &s2);
    assert_null(sbc_shadow_at(&m, 2004));
    /* writes make the buffers they touch stale */
    assert_int_equal(sbc_shadow_stale(&m, 1396, 8), 2);
    assert_false(sbc_shadow_at(&m, 1000)->fresh);
    assert_false(sbc_shadow_at(&m, 1400)->fresh);
    assert_true(sbc_shadow_at(&m, 2000)->fresh);
    assert_int_equal(sbc_shadow_stale(&m, 0, 1000), 0); /* ends where the first starts */
    assert_int_equal(sbc_shadow_stale(&m, 2100, 50), 0);
    assert_int_equal(sbc_shadow_stale(&m, 0, 5000), 1);
    assert_ptr_equal(sbc_shadow_remove(&m, 1400), &s3);
    assert_null(sbc_shadow_remove(&m, 1400));
    assert_int_equal(m.shadow_bytes, 250);
    assert_int_equal(sbc_shadow_add(&m, 1400, 600, &s3), 0); /* the gap again */
    sbc_shadow_map_free(&m);
    assert_int_equal(m.n, 0);
}

/* ---- bf16 conversions kept between GEMMs ---- */

static void *act_put_seen[16];
static int act_puts;
static void act_put(void *b16) { act_put_seen[act_puts++ % 16] = b16; }

static void test_act_cache(void **state)
{
    (void)state;
    static char b[8][1024]; /* stand-ins for bf16 buffers */
    sbc_act_cache c = {0};
    c.max_bytes = 350; /* bf16 bytes: the first (200) and three of 50 */
    act_puts = 0;
    assert_null(sbc_act_find(&c, 1000, 4));
    assert_int_equal(sbc_act_keep(&c, 1000, 400, b[0], act_put), 0); /* fp32 [1000, 1400) */
    assert_int_equal(c.bytes, 200);
    assert_true(c.e[0].pinned);
    sbc_act_unpin(&c);
    assert_false(c.e[0].pinned);
    /* the whole span, a part (the bf16 at half the fp32 offset), not beyond */
    assert_ptr_equal(sbc_act_find(&c, 1000, 400), b[0]);
    assert_ptr_equal(sbc_act_find(&c, 1200, 100), b[0] + 100);
    assert_ptr_equal(sbc_act_find(&c, 1396, 4), b[0] + 198);
    assert_null(sbc_act_find(&c, 1396, 8));
    assert_null(sbc_act_find(&c, 996, 8));
    assert_null(sbc_act_find(&c, 1400, 4));
    assert_true(c.e[0].pinned); /* found: pinned until the GEMM is enqueued */
    sbc_act_unpin(&c);
    /* room for three more of 50; the next evicts the least recently used unpinned one */
    assert_int_equal(sbc_act_keep(&c, 2000, 100, b[1], act_put), 0);
    assert_int_equal(sbc_act_keep(&c, 3000, 100, b[2], act_put), 0);
    assert_int_equal(sbc_act_keep(&c, 4000, 100, b[3], act_put), 0);
    assert_int_equal(act_puts, 0);
    sbc_act_unpin(&c);
    assert_non_null(sbc_act_find(&c, 1000, 4)); /* b[0] used last now, and pinned */
    assert_int_equal(sbc_act_keep(&c, 5000, 100, b[4], act_put), 0);
    assert_int_equal(act_puts, 1);
    assert_ptr_equal(act_put_seen[0], b[1]);
    assert_null(sbc_act_find(&c, 2000, 4));
    assert_int_equal(c.bytes, 200 + 3 * 50);
    /* b[0] and b[4] pinned; b[2] then b[3] go */
    assert_int_equal(sbc_act_keep(&c, 6000, 100, b[5], act_put), 0);
    assert_int_equal(sbc_act_keep(&c, 7000, 100, b[6], act_put), 0);
    assert_ptr_equal(act_put_seen[1], b[2]);
    assert_ptr_equal(act_put_seen[2], b[3]);
    /* everything pinned: not kept (the caller frees it), nothing went */
    assert_int_equal(sbc_act_keep(&c, 8000, 100, b[7], act_put), -1);
    assert_int_equal(act_puts, 3);
    assert_int_equal(c.n, 4);
    /* larger than the limit: not kept, and nothing goes for it */
    sbc_act_unpin(&c);
    c.max_bytes = 1000;
    assert_int_equal(sbc_act_keep(&c, 9000, 2004, b[7], act_put), -1);
    assert_int_equal(c.n, 4);
    assert_int_equal(act_puts, 3);
    assert_int_equal(sbc_act_drop(&c, 0, 0, 0, act_put), 4);
    assert_int_equal(act_puts, 7);
    assert_int_equal(c.bytes, 0);
    /* many at once: one evicts several */
    for (int i = 0; i < 5; i++)
        assert_int_equal(sbc_act_keep(&c, 10000 + 1000 * (uintptr_t)i, 400, b[i], act_put), 0);
    sbc_act_unpin(&c);
    assert_int_equal(c.bytes, 1000);
    assert_int_equal(sbc_act_keep(&c, 20000, 1000, b[5], act_put), 0); /* 500: three go */
    assert_int_equal(act_puts, 10);
    assert_int_equal(c.bytes, 900);
    sbc_act_unpin(&c);
    assert_null(sbc_act_find(&c, 12000, 4));
    assert_non_null(sbc_act_find(&c, 13000, 4));
    /* writes over [13390, 13410) and [19990, 20010) reach b[3] (ends at
     * 13400; pinned: kept under pressure) and b[5] (starts at 20000) */
    assert_int_equal(sbc_act_drop(&c, 13390, 20, 1, act_put), 0);
    assert_int_equal(sbc_act_drop(&c, 13390, 20, 0, act_put), 1);
    assert_int_equal(sbc_act_drop(&c, 19990, 20, 1, act_put), 1);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.bytes, 200);
    /* touching only: [13800, 14000) and [14400, 14500) overlap nothing */
    assert_int_equal(sbc_act_drop(&c, 13800, 200, 0, act_put), 0);
    assert_int_equal(sbc_act_drop(&c, 14400, 100, 0, act_put), 0);
    assert_non_null(sbc_act_find(&c, 14000, 400));
    /* any write anywhere: all of them, pinned or not */
    assert_int_equal(sbc_act_drop(&c, 0, 0, 0, act_put), 1);
    assert_int_equal(act_puts, 13);
    assert_int_equal(c.n, 0);
    assert_int_equal(c.bytes, 0);
    assert_int_equal(sbc_act_keep(&c, 9000, 4, b[7], act_put), 0);
    sbc_act_free(&c, act_put);
    assert_int_equal(act_puts, 14);
    assert_null(c.e);
}

/* the block in use that holds an offset */
static void test_pool_block_at(void **state)
{
    (void)state;
    sbc_pool p;
    assert_int_equal(sbc_pool_init(&p, 4096, 256), 0);
    size_t a, b, c, st = 0, sz = 0;
    assert_int_equal(sbc_pool_alloc(&p, 300, &a), 0); /* 512 */
    assert_int_equal(sbc_pool_alloc(&p, 256, &b), 0);
    assert_int_equal(sbc_pool_alloc(&p, 1000, &c), 0); /* 1024 */
    assert_int_equal(sbc_pool_block_at(&p, a, &st, &sz), 0);
    assert_int_equal(st, a);
    assert_int_equal(sz, 512);
    assert_int_equal(sbc_pool_block_at(&p, b + 255, &st, &sz), 0);
    assert_int_equal(st, b);
    assert_int_equal(sz, 256);
    assert_int_equal(sbc_pool_block_at(&p, c + 1023, &st, &sz), 0);
    assert_int_equal(st, c);
    assert_int_equal(sbc_pool_free(&p, b), 0);
    assert_int_equal(sbc_pool_block_at(&p, b + 10, &st, &sz), -1); /* free now */
    assert_int_equal(sbc_pool_block_at(&p, 4000, &st, &sz), -1);   /* the free tail */
    assert_int_equal(sbc_pool_block_at(&p, 4096, &st, &sz), -1);   /* past the end */
    assert_int_equal(sbc_pool_block_at(&p, a + 511, &st, &sz), 0);
    assert_int_equal(st, a);
    sbc_pool_fini(&p);
}

/* random traffic against a byte-owner model */
static void test_shadow_random(void **state)
{
    (void)state;
    enum { SPACE = 4096 };
    static int owner[SPACE], fresh[SPACE]; /* entry id (base + 1) owning each byte, 0: none */
    memset(owner, 0, sizeof owner);
    sbc_shadow_map m = {0};
    for (int it = 0; it < 20000; it++) {
        int op = rint_in(0, 4);
        uintptr_t p = (uintptr_t)rint_in(0, SPACE - 1);
        size_t n = (size_t)rint_in(1, 128);
        if (p + n > SPACE)
            n = SPACE - p;
        int free_all = 1;
        for (size_t k = 0; k < n; k++)
            free_all &= owner[p + k] == 0;
        if (op == 0) {
            int rc = sbc_shadow_add(&m, p, n, (void *)(p + 1));
            assert_int_equal(rc, free_all ? 0 : -1);
            for (size_t k = 0; !rc && k < n; k++) {
                owner[p + k] = (int)p + 1;
                fresh[p + k] = 0;
            }
        } else if (op == 1) {
            int was = owner[p] == (int)p + 1 && (p == 0 || owner[p - 1] != (int)p + 1);
            void *s = sbc_shadow_remove(&m, p);
            assert_true(was ? s == (void *)(p + 1) : s == NULL);
            for (size_t k = p; was && k < SPACE && owner[k] == (int)p + 1; k++)
                owner[k] = 0;
        } else if (op == 2) {
            sbc_shadow *e = sbc_shadow_find(&m, p, n);
            int own = owner[p], whole = own != 0;
            for (size_t k = 0; k < n; k++)
                whole &= owner[p + k] == own;
            assert_true(whole ? e && e->base == (uintptr_t)own - 1 : e == NULL);
            if (e)
                assert_int_equal(e->fresh, fresh[p]);
        } else if (op == 4) { /* a GEMM made the copy of the buffer holding p */
            sbc_shadow *e = sbc_shadow_find(&m, p, 0);
            assert_true(owner[p] ? e && e->base == (uintptr_t)owner[p] - 1 : e == NULL);
            if (e) {
                e->fresh = 1;
                for (int j = owner[p] - 1; j < SPACE && owner[j] == owner[p]; j++)
                    fresh[j] = 1;
            }
        } else {
            int want = 0, last = 0;
            for (size_t k = 0; k < n; k++)
                if (owner[p + k] && owner[p + k] != last) {
                    last = owner[p + k];
                    want += fresh[p + k];
                }
            assert_int_equal(sbc_shadow_stale(&m, p, n), want);
            for (size_t k = 0; k < n; k++)
                if (owner[p + k])
                    for (int j = owner[p + k] - 1; j < SPACE && owner[j] == owner[p + k]; j++)
                        fresh[j] = 0;
        }
    }
    size_t held = 0;
    for (int i = 0; i < m.n; i++) {
        held += m.e[i].bytes / 2;
        assert_true(i == 0 || m.e[i - 1].base + m.e[i - 1].bytes <= m.e[i].base);
    }
    assert_int_equal(held, m.shadow_bytes);
    sbc_shadow_map_free(&m);
}

static void test_grow_count(void **state)
{
    (void)state;
    assert_int_equal(sbc_grow_count(0, 1, 256), 256);
    assert_int_equal(sbc_grow_count(256, 256, 256), 256);
    assert_int_equal(sbc_grow_count(256, 257, 256), 512);
    assert_int_equal(sbc_grow_count(0, 1000, 256), 1024);
    assert_int_equal(sbc_grow_count(300, 301, 256), 600);
    assert_int_equal(sbc_grow_count(0, 3, 0), 4);
}

/* ---- NCCL's own buffers ---- */

static const char *const *fake_env;
static const char *fake_getenv(const char *k)
{
    for (int i = 0; fake_env && fake_env[i]; i += 2)
        if (!strcmp(fake_env[i], k))
            return fake_env[i + 1];
    return NULL;
}

static void test_nccl_estimate(void **state)
{
    (void)state;
    static const char *const none[] = {NULL};
    fake_env = none;
    sbc_nccl_estimate e;
    assert_int_equal(sbc_nccl_comm_bytes(1, fake_getenv, &e), 0);
    assert_int_equal(e.channels, 0);
    /* NCCL's defaults: 4 MiB + 512 KiB + 4.6875 MiB a connection */
    size_t per = ((size_t)4 << 20) + 524288 + 4915200;
    size_t two = sbc_nccl_comm_bytes(2, fake_getenv, &e);
    assert_int_equal(e.per_conn, per);
    assert_int_equal(e.channels, SBC_NCCL_CHANNELS);
    assert_int_equal(e.conns, 1);
    assert_int_equal(e.p2p_bytes, (size_t)1 << 22); /* 1 peer x 512 KiB x 8 steps */
    assert_int_equal(two, SBC_NCCL_CHANNELS * per + ((size_t)1 << 22));
    size_t four = sbc_nccl_comm_bytes(4, fake_getenv, &e);
    assert_int_equal(e.conns, 2); /* ring and tree */
    assert_int_equal(four, 2 * SBC_NCCL_CHANNELS * per + 3 * ((size_t)1 << 22));
    /* NCCL's variables change it; bad values keep the defaults */
    static const char *const env[] = {"NCCL_BUFFSIZE", "1048576", "NCCL_LL_BUFFSIZE", "x",
                                      "NCCL_LL128_BUFFSIZE", "0", "NCCL_MAX_NCHANNELS", "4",
                                      "NCCL_P2P_NVL_CHUNKSIZE", "131072", NULL};
    fake_env = env;
    size_t b = sbc_nccl_comm_bytes(2, fake_getenv, &e);
    assert_int_equal(e.per_conn, 1048576 + 524288 + 4915200);
    assert_int_equal(e.channels, 4);
    assert_int_equal(b, 4 * e.per_conn + 131072 * 8);
    /* the reserve: only where NCCL may serve the rank */
    fake_env = none;
    assert_int_equal(sbc_nccl_reserve(1, 1, 1, fake_getenv), 0);
    assert_int_equal(sbc_nccl_reserve(4, 2, 1, fake_getenv), 0); /* ranks share the GPU */
    assert_int_equal(sbc_nccl_reserve(4, 1, 0, fake_getenv), 0); /* --comm mpi */
    assert_int_equal(sbc_nccl_reserve(4, 1, 1, fake_getenv), SBC_NCCL_RESERVE_COMMS * four);
    static const char *const mb[] = {"SHARDBENCH_CUDA_NCCL_MB", "300", NULL};
    fake_env = mb;
    assert_int_equal(sbc_nccl_reserve(4, 1, 1, fake_getenv), (size_t)300 << 20);
    fake_env = NULL;
    /* the pool leaves the reserve free */
    size_t G = (size_t)1 << 30;
    assert_int_equal(sbc_pool_size_reserving(10 * G, 0.85, 1, 0, G, 256),
                     sbc_pool_size_for(10 * G, 0.85, 1, 0, 256)); /* 15% > 1 GiB: as before */
    assert_int_equal(sbc_pool_size_reserving(10 * G, 0.85, 1, 0, 3 * G, 256), 7 * G);
    assert_int_equal(sbc_pool_size_reserving(10 * G, 0.85, 1, 9 * G, 3 * G, 256), 7 * G);
    assert_int_equal(sbc_pool_size_reserving(10 * G, 0.85, 1, 2 * G, 3 * G, 256), 2 * G);
    assert_int_equal(sbc_pool_size_reserving(G, 0.85, 1, 0, 2 * G, 256), 0);
    assert_int_equal(sbc_pool_size_reserving(G + 300, 0.85, 1, 0, 100, 256) % 256, 0);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precision),   cmocka_unit_test(test_comm_mode),
        cmocka_unit_test(test_pool_basics), cmocka_unit_test(test_pool_random),
        cmocka_unit_test(test_algo_cache), cmocka_unit_test(test_conv_fit),  cmocka_unit_test(test_conv_window),
        cmocka_unit_test(test_box_plan),    cmocka_unit_test(test_perm_plan),
        cmocka_unit_test(test_reduce_plan), cmocka_unit_test(test_bcast_plan), cmocka_unit_test(test_local_rank),
        cmocka_unit_test(test_comm_cache),  cmocka_unit_test(test_slurm_tasks),
        cmocka_unit_test(test_math_versions), cmocka_unit_test(test_moe_plan),
        cmocka_unit_test(test_shadow_basics), cmocka_unit_test(test_shadow_random),
        cmocka_unit_test(test_act_cache), cmocka_unit_test(test_pool_block_at),
        cmocka_unit_test(test_grow_count), cmocka_unit_test(test_nccl_estimate),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
