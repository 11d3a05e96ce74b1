/* tests/unit/cuda_check.c: every kernel of the cuda backend's table against the
 * CPU table (the references of include/shardbench/kernels.h) on random
 * inputs and geometries (halo boxes with negative local padding, sharded
 * vocab ranges, ignored labels, NULL optional arguments, aliasing where
 * kernels.h allows it). Outputs start from random values on both sides,
 * so "forward overwrites, backward accumulates" is checked too. Also the
 * memory calls and the all-reduce on one rank. Exits 77 (ctest: skipped)
 * with "no GPU" when the backend cannot start for want of a GPU.
 *
 *   cuda_check [iterations per kernel, default 20] [--self] [--bench]
 * --bench also times (CUDA events) a square GEMM and a 3x3 convolution
 * through the table and prints TFLOP/s in the chosen precision.
 * --self checks the harness itself without a GPU: the CPU table on both
 * sides (every comparison must be exact; ASan sees every geometry).
 * SHARDBENCH_PRECISION=tf32|bf16 loosens the GEMM and conv tolerances. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "shardbench/runtime.h"

static const sb_backend *gpu, *cpu = &sb_backend_cpu;
static int iters = 20, failures, checks;
static double tol_mm = 1e-4; /* GEMM and conv, relative to the largest |ref| */

static uint64_t rs = 0x5DEECE66Dull;
static uint32_t rnd(void)
{
    rs ^= rs >> 12;
    rs ^= rs << 25;
    rs ^= rs >> 27;
    return (uint32_t)((rs * 0x2545F4914F6CDD1Dull) >> 32);
}
static int ri(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float fr(void) { return (float)(rnd() >> 8) / 8388608.0f - 1.0f; }

/* ---- paired buffers: host reference and device copy ---- */

typedef struct {
    float *h;   /* CPU side (the reference works here) */
    float *d;   /* GPU side */
    size_t n;
} pair;

#define MAXP 64
static pair *live[MAXP];
static int nlive;

static void pair_new(pair *p, size_t n, int fill)
{
    p->n = n;
    p->h = malloc((n ? n : 1) * sizeof(float));
    p->d = gpu->alloc((n ? n : 1) * sizeof(float));
    if (!p->h || !p->d) {
        fprintf(stderr, "cuda_check: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p->h[i] = fill ? fr() : 0.0f;
    if (n)
        gpu->from_host(p->d, p->h, n);
    live[nlive++] = p;
}

/* ids or labels in [lo, hi] */
static void pair_ids(pair *p, size_t n, int lo, int hi)
{
    pair_new(p, n, 0);
    int32_t *ids = (int32_t *)p->h;
    for (size_t i = 0; i < n; i++)
        ids[i] = ri(lo, hi);
    if (n)
        gpu->from_host(p->d, p->h, n);
}

static void pairs_free(void)
{
    for (int i = 0; i < nlive; i++) {
        free(live[i]->h);
        gpu->release(live[i]->d);
        live[i]->h = live[i]->d = NULL;
    }
    nlive = 0;
}

/* compares the device copy with the reference: max |d - h| <= tol * max(1, max |h|) */
static void same(const char *kernel, const char *what, const pair *p, double tol)
{
    checks++;
    float *got = malloc((p->n ? p->n : 1) * sizeof *got);
    if (p->n)
        gpu->to_host(got, p->d, p->n);
    double scale = 1, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < p->n; i++)
        if (fabs(p->h[i]) > scale)
            scale = fabs(p->h[i]);
    for (size_t i = 0; i < p->n; i++) {
        double e = fabs((double)got[i] - p->h[i]);
        if (!(e <= worst)) { /* NaN counts */
            worst = isnan(e) ? INFINITY : e;
            at = i;
        }
    }
    if (worst > tol * scale) {
        failures++;
        printf("FAIL %-28s %-8s n=%zu: max error %.3g at %zu (gpu %.9g, cpu %.9g), allowed %.3g\n",
               kernel, what, p->n, worst, at, got[at], p->h[at], tol * scale);
    }
    free(got);
}

#define TOL 2e-5

/* ---- GEMM ---- */

static void check_gemm(void)
{
    for (int it = 0; it < iters; it++) {
        int ta = ri(0, 1), tb = ri(0, 1), M = ri(1, 70), N = ri(1, 70), K = it == 0 ? 0 : ri(1, 90);
        int batch = ri(1, 4);
        int lda = (ta ? M : K) + ri(0, 3), ldb = (tb ? K : N) + ri(0, 3), ldc = N + ri(0, 3);
        if (lda < 1)
            lda = 1;
        if (ldb < 1)
            ldb = 1;
        ptrdiff_t sa = (ptrdiff_t)(ta ? K : M) * lda, sb = (ptrdiff_t)(tb ? N : K) * ldb,
                  sc = (ptrdiff_t)M * ldc;
        if (ri(0, 3) == 0)
            sb = 0; /* one B for every batch */
        float alpha = ri(0, 1) ? 1.0f : fr(), beta = ri(0, 2) == 0 ? 0.0f : fr();
        pair A, B, C;
        pair_new(&A, (size_t)(batch - 1) * (size_t)sa + (size_t)(ta ? K : M) * lda + 1, 1);
        pair_new(&B, (size_t)(batch - 1) * (size_t)sb + (size_t)(tb ? N : K) * ldb + 1, 1);
        pair_new(&C, (size_t)batch * (size_t)sc, 1);
        cpu->gemm->gemm_batched(ta, tb, M, N, K, alpha, A.h, lda, sa, B.h, ldb, sb, beta, C.h, ldc,
                                sc, batch);
        gpu->gemm->gemm_batched(ta, tb, M, N, K, alpha, A.d, lda, sa, B.d, ldb, sb, beta, C.d, ldc,
                                sc, batch);
        same("gemm_batched", "C", &C, tol_mm * (K > 0 ? sqrt((double)K) : 1));
        pairs_free();
    }
}

/* ---- conv ---- */

static void conv_geometry(int *B, int *C, int *Hin, int *Win, int *N, int *R, int *S, int *sh,
                          int *sw, int *pt, int *pl, int *Ho, int *Wo)
{
    *B = ri(1, 3), *C = ri(1, 8), *N = ri(1, 8), *R = ri(1, 5), *S = ri(1, 5);
    *sh = ri(1, 3), *sw = ri(1, 3), *Hin = ri(1, 14), *Win = ri(1, 14);
    *pt = ri(-2, 3), *pl = ri(-2, 3), *Ho = ri(1, 8), *Wo = ri(1, 8);
}

static void check_conv(void)
{
    for (int it = 0; it < iters * 2; it++) {
        int B, C, Hin, Win, N, R, S, sh, sw, pt, pl, Ho, Wo;
        conv_geometry(&B, &C, &Hin, &Win, &N, &R, &S, &sh, &sw, &pt, &pl, &Ho, &Wo);
        /* groups dividing both channel counts, taps 1 or 2 apart */
        int G = ri(1, 3), dil_h = ri(1, 2), dil_w = ri(1, 2);
        C = G * ((C + G - 1) / G), N = G * ((N + G - 1) / G);
        if (it % 4 == 0) { /* a plain "same" conv: cuDNN reads the input directly */
            R = S = 3, sh = sw = 1, pt = pl = 1, Ho = Hin, Wo = Win, dil_h = dil_w = 1;
        }
        size_t nin = (size_t)B * C * Hin * Win, nout = (size_t)B * N * Ho * Wo,
               nw = (size_t)N * (C / G) * R * S;
        int relu = ri(0, 1), use_bias = ri(0, 1);
        double tol = tol_mm * sqrt((double)(C / G) * R * S);
        pair inp, w, bias, out, wh, wd, dout, dinp, dw, dbias;
        pair_new(&inp, nin, 1);
        pair_new(&w, nw, 1);
        pair_new(&bias, (size_t)N, 1);
        pair_new(&out, nout, 1);
        size_t nwork = cpu->conv->conv2d_work_floats(C, R, S, N, Ho, Wo),
               gwork = gpu->conv->conv2d_work_floats(C, R, S, N, Ho, Wo);
        pair_new(&wh, nwork, 0);
        pair_new(&wd, gwork, 0);
        cpu->conv->conv2d_forward(out.h, inp.h, w.h, use_bias ? bias.h : NULL, wh.h, B, C, Hin, Win,
                                  N, R, S, sh, sw, pt, pl, Ho, Wo, dil_h, dil_w, G, relu);
        gpu->conv->conv2d_forward(out.d, inp.d, w.d, use_bias ? bias.d : NULL, gwork ? wd.d : NULL,
                                  B, C, Hin, Win, N, R, S, sh, sw, pt, pl, Ho, Wo, dil_h, dil_w, G,
                                  relu);
        same("conv2d_forward", "out", &out, tol);
        /* backward from the same relu output on both sides */
        gpu->from_host(out.d, out.h, nout);
        pair_new(&dout, nout, 1);
        pair_new(&dinp, nin, 1);
        pair_new(&dw, nw, 1);
        pair_new(&dbias, (size_t)N, 1);
        const float *oh = relu ? out.h : NULL, *od = relu ? out.d : NULL;
        cpu->conv->conv2d_backward_data(dinp.h, wh.h, dout.h, oh, w.h, B, C, Hin, Win, N, R, S, sh,
                                        sw, pt, pl, Ho, Wo, dil_h, dil_w, G);
        gpu->conv->conv2d_backward_data(dinp.d, gwork ? wd.d : NULL, dout.d, od, w.d, B, C, Hin,
                                        Win, N, R, S, sh, sw, pt, pl, Ho, Wo, dil_h, dil_w, G);
        same("conv2d_backward_data", "dinp", &dinp, tol_mm * sqrt((double)N * R * S));
        int wb = ri(0, 1);
        cpu->conv->conv2d_backward_filter(dw.h, wb ? dbias.h : NULL, wh.h, dout.h, oh, inp.h, B, C,
                                          Hin, Win, N, R, S, sh, sw, pt, pl, Ho, Wo, dil_h, dil_w,
                                          G);
        gpu->conv->conv2d_backward_filter(dw.d, wb ? dbias.d : NULL, gwork ? wd.d : NULL, dout.d,
                                          od, inp.d, B, C, Hin, Win, N, R, S, sh, sw, pt, pl, Ho,
                                          Wo, dil_h, dil_w, G);
        same("conv2d_backward_filter", "dw", &dw, tol_mm * sqrt((double)B * Ho * Wo));
        same("conv2d_backward_filter", "dbias", &dbias, TOL * B * Ho * Wo);
        pairs_free();
    }
}

/* ---- pooling ---- */

static void check_pool(void)
{
    for (int it = 0; it < iters; it++) {
        int B = ri(1, 3), C = ri(1, 4), R = ri(1, 4), S = ri(1, 4), sh = ri(1, 3), sw = ri(1, 3);
        int Hin = ri(1, 12), Win = ri(1, 12), pt = ri(-2, 2), pl = ri(-2, 2), Ho = ri(1, 7),
            Wo = ri(1, 7), cp = ri(0, 1);
        size_t nin = (size_t)B * C * Hin * Win, nout = (size_t)B * C * Ho * Wo;
        pair inp, out, dout, dinp;
        pair_new(&inp, nin, 1);
        if (it % 3 == 0) /* ties, as after a relu: the first maximum must win */
            for (size_t i = 0; i < nin; i++)
                inp.h[i] = inp.h[i] < 0.3f ? 0.0f : inp.h[i];
        gpu->from_host(inp.d, inp.h, nin);
        pair_new(&out, nout, 1);
        pair_new(&dout, nout, 1);
        pair_new(&dinp, nin, 1);
        cpu->conv->maxpool2d_forward(out.h, inp.h, B, C, Hin, Win, R, S, sh, sw, pt, pl, Ho, Wo);
        gpu->conv->maxpool2d_forward(out.d, inp.d, B, C, Hin, Win, R, S, sh, sw, pt, pl, Ho, Wo);
        same("maxpool2d_forward", "out", &out, 0);
        cpu->conv->maxpool2d_backward(dinp.h, dout.h, inp.h, B, C, Hin, Win, R, S, sh, sw, pt, pl,
                                      Ho, Wo);
        gpu->conv->maxpool2d_backward(dinp.d, dout.d, inp.d, B, C, Hin, Win, R, S, sh, sw, pt, pl,
                                      Ho, Wo);
        same("maxpool2d_backward", "dinp", &dinp, TOL);
        cpu->conv->avgpool2d_forward(out.h, inp.h, B, C, Hin, Win, R, S, sh, sw, pt, pl, Ho, Wo,
                                     cp);
        gpu->conv->avgpool2d_forward(out.d, inp.d, B, C, Hin, Win, R, S, sh, sw, pt, pl, Ho, Wo,
                                     cp);
        same("avgpool2d_forward", "out", &out, TOL);
        cpu->conv->avgpool2d_backward(dinp.h, dout.h, B, C, Hin, Win, R, S, sh, sw, pt, pl, Ho, Wo,
                                      cp);
        gpu->conv->avgpool2d_backward(dinp.d, dout.d, B, C, Hin, Win, R, S, sh, sw, pt, pl, Ho, Wo,
                                      cp);
        same("avgpool2d_backward", "dinp", &dinp, TOL);
        pairs_free();
    }
}

/* ---- embedding, LSTM ---- */

static void check_embedding_lstm(void)
{
    for (int it = 0; it < iters; it++) {
        int N = ri(1, 50), D = ri(1, 40), V = ri(2, 30), v0 = ri(0, V - 1), v1 = ri(v0 + 1, V);
        pair idx, table, out, dtable;
        pair_ids(&idx, (size_t)N, 0, V - 1);
        pair_new(&table, (size_t)(v1 - v0) * D, 1);
        pair_new(&out, (size_t)N * D, 1);
        pair_new(&dtable, (size_t)(v1 - v0) * D, 1);
        cpu->embed->embedding_forward(out.h, (int32_t *)idx.h, table.h, N, D, v0, v1);
        gpu->embed->embedding_forward(out.d, (int32_t *)idx.d, table.d, N, D, v0, v1);
        same("embedding_forward", "out", &out, 0);
        cpu->embed->embedding_backward(dtable.h, out.h, (int32_t *)idx.h, N, D, v0, v1);
        gpu->embed->embedding_backward(dtable.d, out.d, (int32_t *)idx.d, N, D, v0, v1);
        same("embedding_backward", "dtable", &dtable, TOL);

        int B = ri(1, 9), H = ri(1, 33), inplace = ri(0, 1), has_cp = ri(0, 1), has_dc = ri(0, 1),
            has_dcp = ri(0, 1);
        size_t n = (size_t)B * H;
        pair h, c, gates, pre, cp, dpre, dcp, dh, dc;
        pair_new(&h, n, 1);
        pair_new(&c, n, 1);
        pair_new(&gates, 4 * n, 1);
        pair_new(&pre, 4 * n, 1);
        pair_new(&cp, n, 1);
        pair *g = inplace ? &pre : &gates;
        cpu->lstm->lstm_pointwise_forward(h.h, c.h, g->h, pre.h, has_cp ? cp.h : NULL, B, H);
        gpu->lstm->lstm_pointwise_forward(h.d, c.d, g->d, pre.d, has_cp ? cp.d : NULL, B, H);
        same("lstm_pointwise_forward", "h", &h, TOL);
        same("lstm_pointwise_forward", "c", &c, TOL);
        same("lstm_pointwise_forward", "gates", g, TOL);
        pair_new(&dpre, 4 * n, 1);
        pair_new(&dcp, n, 1);
        pair_new(&dh, n, 1);
        pair_new(&dc, n, 1);
        cpu->lstm->lstm_pointwise_backward(dpre.h, has_dcp ? dcp.h : NULL, dh.h,
                                           has_dc ? dc.h : NULL, g->h, c.h, has_cp ? cp.h : NULL, B,
                                           H);
        gpu->lstm->lstm_pointwise_backward(dpre.d, has_dcp ? dcp.d : NULL, dh.d,
                                           has_dc ? dc.d : NULL, g->d, c.d, has_cp ? cp.d : NULL, B,
                                           H);
        same("lstm_pointwise_backward", "dpreact", &dpre, TOL);
        same("lstm_pointwise_backward", "dc_prev", &dcp, TOL);
        pairs_free();
    }
}

/* ---- RMS norm, causal mask, rotary embedding ---- */

/* a dense box (d0, d1, d2) and one of its dims: stride and extent */
static void box_dim(const int *d, int k, int64_t *stride, int *ext)
{
    *stride = k == 0 ? (int64_t)d[1] * d[2] : k == 1 ? d[2] : 1;
    *ext = d[k];
}

static void check_llama(void)
{
    for (int it = 0; it < iters; it++) {
        int M = ri(1, 40), D = ri(1, 300), Dt = D + ri(0, 50), wg = ri(0, 1), wdx = ri(0, 3) != 0;
        size_t n = (size_t)M * D;
        pair x, sq, rstd, out, gam, dout, st, dinp, dg;
        pair_new(&x, n, 1);
        pair_new(&sq, (size_t)M, 1);
        pair_new(&rstd, (size_t)M, 1);
        cpu->norm->rmsnorm_stats(sq.h, x.h, M, D);
        gpu->norm->rmsnorm_stats(sq.d, x.d, M, D);
        same("rmsnorm_stats", "sumsq", &sq, TOL);
        cpu->norm->norm_rstd(rstd.h, sq.h, M, Dt, 1e-5f);
        gpu->norm->norm_rstd(rstd.d, sq.d, M, Dt, 1e-5f);
        pair_new(&out, n, 1);
        pair_new(&gam, (size_t)D, 1);
        cpu->norm->rmsnorm_apply(out.h, x.h, rstd.h, wg ? gam.h : NULL, M, D);
        gpu->norm->rmsnorm_apply(out.d, x.d, rstd.d, wg ? gam.d : NULL, M, D);
        same("rmsnorm_apply", "out", &out, TOL);
        pair_new(&dout, n, 1);
        pair_new(&st, (size_t)M, 1);
        cpu->norm->rmsnorm_backward_stats(st.h, dout.h, x.h, wg ? gam.h : NULL, M, D);
        gpu->norm->rmsnorm_backward_stats(st.d, dout.d, x.d, wg ? gam.d : NULL, M, D);
        same("rmsnorm_backward_stats", "s", &st, TOL);
        pair_new(&dinp, n, 1);
        pair_new(&dg, (size_t)D, 1);
        cpu->norm->rmsnorm_backward_apply(wdx ? dinp.h : NULL, dg.h, dout.h, x.h, rstd.h,
                                          wg ? gam.h : NULL, st.h, M, D, Dt);
        gpu->norm->rmsnorm_backward_apply(wdx ? dinp.d : NULL, dg.d, dout.d, x.d, rstd.d,
                                          wg ? gam.d : NULL, st.d, M, D, Dt);
        same("rmsnorm_backward_apply", "dinp", &dinp, TOL);
        same("rmsnorm_backward_apply", "dgamma", &dg, TOL);
        pairs_free();

        /* a box (d0, d1, d2) at random global offsets: the mask's key and
         * query dims, rope's head and seq dims, in either order */
        int d[3] = {ri(1, 9), ri(1, 9), ri(1, 9)};
        int a = ri(0, 2), b = (a + ri(1, 2)) % 3;
        int64_t sa, sb, lo_a = ri(0, 20), lo_b = ri(0, 20);
        int ea, eb;
        box_dim(d, a, &sa, &ea);
        box_dim(d, b, &sb, &eb);
        size_t nb = (size_t)d[0] * d[1] * d[2];
        pair mx, my;
        pair_new(&mx, nb, 1);
        pair_new(&my, nb, 1);
        int64_t win = ri(0, 1) ? ri(1, 12) : 0; /* a sliding window, or none */
        cpu->softmax->causal_mask(my.h, mx.h, (int64_t)nb, sa, ea, lo_a, sb, eb, lo_b, win);
        gpu->softmax->causal_mask(my.d, mx.d, (int64_t)nb, sa, ea, lo_a, sb, eb, lo_b, win);
        same("causal_mask", "out", &my, 0);
        d[a] = 2 * ri(1, 8); /* an even head dim */
        box_dim(d, a, &sa, &ea);
        box_dim(d, b, &sb, &eb);
        nb = (size_t)d[0] * d[1] * d[2];
        double theta = ri(0, 1) ? 10000.0 : 500000.0;
        pair rx, ry, rd;
        pair_new(&rx, nb, 1);
        pair_new(&ry, nb, 1);
        pair_new(&rd, nb, 1);
        cpu->rope->rope_forward(ry.h, rx.h, (int64_t)nb, ea, sa, eb, sb, lo_b, theta);
        gpu->rope->rope_forward(ry.d, rx.d, (int64_t)nb, ea, sa, eb, sb, lo_b, theta);
        same("rope_forward", "out", &ry, TOL);
        cpu->rope->rope_backward(rd.h, ry.h, (int64_t)nb, ea, sa, eb, sb, lo_b, theta);
        gpu->rope->rope_backward(rd.d, ry.d, (int64_t)nb, ea, sa, eb, sb, lo_b, theta);
        same("rope_backward", "dinp", &rd, TOL);
        pairs_free();
    }
}

/* ---- norms ---- */

static void check_norms(void)
{
    for (int it = 0; it < iters; it++) {
        int M = ri(1, 40), D = ri(1, 300), Dt = D + ri(0, 50), wg = ri(0, 1);
        size_t n = (size_t)M * D;
        long count = ri(1, 500);
        pair x, sum, sq, mean, rstd, out, gam, bet, dout, s1, s2, dinp, dg, db;
        pair_new(&x, n, 1);
        pair_new(&sum, (size_t)M, 1);
        pair_new(&sq, (size_t)M, 1);
        pair_new(&mean, (size_t)M, 1);
        pair_new(&rstd, (size_t)M, 1);
        cpu->norm->layernorm_stats(sum.h, sq.h, x.h, M, D);
        gpu->norm->layernorm_stats(sum.d, sq.d, x.d, M, D);
        same("layernorm_stats", "sum", &sum, TOL);
        same("layernorm_stats", "sumsq", &sq, TOL);
        for (size_t i = 0; i < (size_t)M; i++) /* positive sums of squares for finish/rstd */
            sq.h[i] = fabsf(sq.h[i]) * 10 + (float)count;
        gpu->from_host(sq.d, sq.h, (size_t)M);
        cpu->norm->norm_finish_stats(mean.h, rstd.h, sum.h, sq.h, M, count, 1e-5f);
        gpu->norm->norm_finish_stats(mean.d, rstd.d, sum.d, sq.d, M, count, 1e-5f);
        same("norm_finish_stats", "mean", &mean, TOL);
        same("norm_finish_stats", "rstd", &rstd, TOL);
        cpu->norm->norm_mean(mean.h, sum.h, M, count);
        gpu->norm->norm_mean(mean.d, sum.d, M, count);
        same("norm_mean", "mean", &mean, TOL);
        cpu->norm->layernorm_centered(sq.h, x.h, mean.h, M, D);
        gpu->norm->layernorm_centered(sq.d, x.d, mean.d, M, D);
        same("layernorm_centered", "sq", &sq, TOL);
        cpu->norm->norm_rstd(rstd.h, sq.h, M, D, 1e-5f);
        gpu->norm->norm_rstd(rstd.d, sq.d, M, D, 1e-5f);
        same("norm_rstd", "rstd", &rstd, TOL);
        pair_new(&out, n, 1);
        pair_new(&gam, (size_t)D, 1);
        pair_new(&bet, (size_t)D, 1);
        cpu->norm->layernorm_apply(out.h, x.h, mean.h, rstd.h, wg ? gam.h : NULL, wg ? bet.h : NULL,
                                   M, D);
        gpu->norm->layernorm_apply(out.d, x.d, mean.d, rstd.d, wg ? gam.d : NULL, wg ? bet.d : NULL,
                                   M, D);
        same("layernorm_apply", "out", &out, TOL);
        pair_new(&dout, n, 1);
        pair_new(&s1, (size_t)M, 1);
        pair_new(&s2, (size_t)M, 1);
        cpu->norm->layernorm_backward_stats(s1.h, s2.h, dout.h, x.h, mean.h, rstd.h,
                                            wg ? gam.h : NULL, M, D);
        gpu->norm->layernorm_backward_stats(s1.d, s2.d, dout.d, x.d, mean.d, rstd.d,
                                            wg ? gam.d : NULL, M, D);
        same("layernorm_backward_stats", "s1", &s1, TOL);
        same("layernorm_backward_stats", "s2", &s2, TOL);
        pair_new(&dinp, n, 1);
        pair_new(&dg, (size_t)D, 1);
        pair_new(&db, (size_t)D, 1);
        int wdx = ri(0, 3) != 0;
        cpu->norm->layernorm_backward_apply(wdx ? dinp.h : NULL, dg.h, db.h, dout.h, x.h, mean.h,
                                            rstd.h, wg ? gam.h : NULL, s1.h, s2.h, M, D, Dt);
        gpu->norm->layernorm_backward_apply(wdx ? dinp.d : NULL, dg.d, db.d, dout.d, x.d, mean.d,
                                            rstd.d, wg ? gam.d : NULL, s1.d, s2.d, M, D, Dt);
        same("layernorm_backward_apply", "dinp", &dinp, TOL);
        same("layernorm_backward_apply", "dgamma", &dg, TOL);
        same("layernorm_backward_apply", "dbeta", &db, TOL);
        pairs_free();

        /* batch norm over (B, C, HW) */
        int B = ri(1, 6), C = ri(1, 12), HW = ri(1, 50), relu = ri(0, 1);
        size_t nb = (size_t)B * C * HW;
        long cnt = (long)B * HW + ri(0, 20);
        pair bx, bs, bq, bm, br, bo, bg, bb, bd, sdy, sdx, bdi;
        pair_new(&bx, nb, 1);
        pair_new(&bs, (size_t)C, 1);
        pair_new(&bq, (size_t)C, 1);
        pair_new(&bm, (size_t)C, 1);
        pair_new(&br, (size_t)C, 1);
        cpu->norm->batchnorm_stats(bs.h, bq.h, bx.h, B, C, HW);
        gpu->norm->batchnorm_stats(bs.d, bq.d, bx.d, B, C, HW);
        same("batchnorm_stats", "sum", &bs, TOL);
        same("batchnorm_stats", "sumsq", &bq, TOL);
        cpu->norm->norm_mean(bm.h, bs.h, C, cnt);
        gpu->norm->norm_mean(bm.d, bs.d, C, cnt);
        cpu->norm->batchnorm_centered(bq.h, bx.h, bm.h, B, C, HW);
        gpu->norm->batchnorm_centered(bq.d, bx.d, bm.d, B, C, HW);
        same("batchnorm_centered", "sq", &bq, TOL);
        cpu->norm->norm_rstd(br.h, bq.h, C, cnt, 1e-5f);
        gpu->norm->norm_rstd(br.d, bq.d, C, cnt, 1e-5f);
        pair_new(&bo, nb, 1);
        pair_new(&bg, (size_t)C, 1);
        pair_new(&bb, (size_t)C, 1);
        cpu->norm->batchnorm_apply(bo.h, bx.h, bm.h, br.h, wg ? bg.h : NULL, wg ? bb.h : NULL, B, C,
                                   HW, relu);
        gpu->norm->batchnorm_apply(bo.d, bx.d, bm.d, br.d, wg ? bg.d : NULL, wg ? bb.d : NULL, B, C,
                                   HW, relu);
        same("batchnorm_apply", "out", &bo, TOL);
        gpu->from_host(bo.d, bo.h, nb);
        pair_new(&bd, nb, 1);
        pair_new(&sdy, (size_t)C, 1);
        pair_new(&sdx, (size_t)C, 1);
        cpu->norm->batchnorm_backward_stats(sdy.h, sdx.h, bd.h, relu ? bo.h : NULL, bx.h, bm.h,
                                            br.h, B, C, HW);
        gpu->norm->batchnorm_backward_stats(sdy.d, sdx.d, bd.d, relu ? bo.d : NULL, bx.d, bm.d,
                                            br.d, B, C, HW);
        same("batchnorm_backward_stats", "sum_dy", &sdy, TOL);
        same("batchnorm_backward_stats", "sum_dy_xhat", &sdx, TOL);
        pair_new(&bdi, nb, 1);
        cpu->norm->batchnorm_backward_apply(bdi.h, bd.h, relu ? bo.h : NULL, bx.h, bm.h, br.h,
                                            wg ? bg.h : NULL, sdy.h, sdx.h, B, C, HW, cnt);
        gpu->norm->batchnorm_backward_apply(bdi.d, bd.d, relu ? bo.d : NULL, bx.d, bm.d, br.d,
                                            wg ? bg.d : NULL, sdy.d, sdx.d, B, C, HW, cnt);
        same("batchnorm_backward_apply", "dinp", &bdi, TOL);
        pairs_free();
    }
}

/* ---- softmax, cross-entropy ---- */

static void check_softmax(void)
{
    for (int it = 0; it < iters; it++) {
        int outer = ri(1, 20), A = it == 0 ? 3000 : ri(1, 70), inner = ri(1, 9);
        size_t n = (size_t)outer * A * inner, r = (size_t)outer * inner;
        pair x, mx, se, out, dout, dot, dinp;
        pair_new(&x, n, 1);
        for (size_t i = 0; i < n; i++)
            x.h[i] *= 8;
        gpu->from_host(x.d, x.h, n);
        pair_new(&mx, r, 1);
        pair_new(&se, r, 1);
        pair_new(&out, n, 1);
        cpu->softmax->softmax_partial_max(mx.h, x.h, outer, A, inner);
        gpu->softmax->softmax_partial_max(mx.d, x.d, outer, A, inner);
        same("softmax_partial_max", "mx", &mx, 0);
        cpu->softmax->softmax_partial_sumexp(se.h, x.h, mx.h, outer, A, inner);
        gpu->softmax->softmax_partial_sumexp(se.d, x.d, mx.d, outer, A, inner);
        same("softmax_partial_sumexp", "se", &se, TOL);
        cpu->softmax->softmax_apply(out.h, x.h, mx.h, se.h, outer, A, inner);
        gpu->softmax->softmax_apply(out.d, x.d, mx.d, se.d, outer, A, inner);
        same("softmax_apply", "out", &out, TOL);
        pair_new(&dout, n, 1);
        pair_new(&dot, r, 1);
        pair_new(&dinp, n, 1);
        cpu->softmax->softmax_backward_dot(dot.h, dout.h, out.h, outer, A, inner);
        gpu->softmax->softmax_backward_dot(dot.d, dout.d, out.d, outer, A, inner);
        same("softmax_backward_dot", "dot", &dot, TOL);
        cpu->softmax->softmax_backward_apply(dinp.h, dout.h, out.h, dot.h, outer, A, inner);
        gpu->softmax->softmax_backward_apply(dinp.d, dout.d, out.d, dot.d, outer, A, inner);
        same("softmax_backward_apply", "dinp", &dinp, TOL);
        pairs_free();

        int M = ri(1, 40), V = it == 1 ? 5000 : ri(1, 60), v0 = ri(0, 20);
        pair lg, lab, pk, loss, dl, dlg, m2, s2;
        pair_new(&lg, (size_t)M * V, 1);
        pair_ids(&lab, (size_t)M, -1, v0 + V + 5); /* -1: ignored; some outside the shard */
        pair_new(&pk, (size_t)M, 1);
        pair_new(&loss, (size_t)M, 1);
        pair_new(&m2, (size_t)M, 1);
        pair_new(&s2, (size_t)M, 1);
        cpu->softmax->softmax_partial_max(m2.h, lg.h, M, V, 1);
        gpu->softmax->softmax_partial_max(m2.d, lg.d, M, V, 1);
        cpu->softmax->softmax_partial_sumexp(s2.h, lg.h, m2.h, M, V, 1);
        gpu->softmax->softmax_partial_sumexp(s2.d, lg.d, m2.d, M, V, 1);
        gpu->from_host(s2.d, s2.h, (size_t)M); /* same statistics on both sides */
        cpu->softmax->xent_partial_picked(pk.h, lg.h, (int32_t *)lab.h, M, V, v0);
        gpu->softmax->xent_partial_picked(pk.d, lg.d, (int32_t *)lab.d, M, V, v0);
        same("xent_partial_picked", "picked", &pk, 0);
        cpu->softmax->xent_loss(loss.h, m2.h, s2.h, pk.h, (int32_t *)lab.h, M);
        gpu->softmax->xent_loss(loss.d, m2.d, s2.d, pk.d, (int32_t *)lab.d, M);
        same("xent_loss", "loss", &loss, TOL);
        pair_new(&dl, (size_t)M, 1);
        pair_new(&dlg, (size_t)M * V, 1);
        cpu->softmax->softmax_xent_backward(dlg.h, dl.h, lg.h, m2.h, s2.h, (int32_t *)lab.h, M, V,
                                            v0);
        gpu->softmax->softmax_xent_backward(dlg.d, dl.d, lg.d, m2.d, s2.d, (int32_t *)lab.d, M, V,
                                            v0);
        same("softmax_xent_backward", "dlogits", &dlg, TOL);
        pairs_free();
    }
}

/* ---- mixture of experts: moe_gate ---- */

static void check_moe(void)
{
    for (int it = 0; it < iters; it++) {
        int G = ri(1, 6), S = it == 0 ? 512 : ri(1, 40), E = ri(1, 16), k = ri(1, E < 4 ? E : 4);
        int C = ri(1, S * k / E + 2);
        size_t nl = (size_t)G * S * E, n = nl * C;
        size_t nw = cpu->moe->moe_gate_work_floats(G, S, E, k);
        float aw = it % 2 ? 0.0f : 0.5f * (float)ri(1, 4); /* the balance loss's weight */
        pair lg, comb, disp, aux, work, dcomb, dl;
        pair_new(&lg, nl, 1);
        for (size_t i = 0; i < nl; i++)
            lg.h[i] *= 4;
        gpu->from_host(lg.d, lg.h, nl);
        pair_new(&comb, n, 1);
        pair_new(&disp, n, 1);
        pair_new(&aux, (size_t)G, 1);
        pair_new(&work, nw, 0);
        cpu->moe->moe_gate_forward(comb.h, disp.h, aux.h, work.h, lg.h, G, S, E, C, k);
        gpu->moe->moe_gate_forward(comb.d, disp.d, aux.d, work.d, lg.d, G, S, E, C, k);
        same("moe_gate_forward", "aux", &aux, TOL);
        same("moe_gate_forward", "dispatch", &disp, 0);
        same("moe_gate_forward", "combine", &comb, TOL);
        pair_new(&dcomb, n, 1);
        pair_new(&dl, nl, 1);
        cpu->moe->moe_gate_backward(dl.h, work.h, dcomb.h, lg.h, aw, G, S, E, C, k);
        gpu->moe->moe_gate_backward(dl.d, work.d, dcomb.d, lg.d, aw, G, S, E, C, k);
        same("moe_gate_backward", "dlogits", &dl, TOL);
        pairs_free();
    }
}

/* ---- elementwise, reduce, copies, SGD ---- */

static void check_tensor(void)
{
    for (int it = 0; it < iters; it++) {
        size_t n = (size_t)ri(1, 5000);
        int k = it == 0 ? 20 : ri(1, 5), relu = ri(0, 1), alias = ri(0, 1);
        pair in[20], out, dout;
        const float *ih[20], *id[20];
        for (int j = 0; j < k; j++) {
            pair_new(&in[j], n, 1);
            ih[j] = in[j].h;
            id[j] = in[j].d;
        }
        pair_new(&out, n, 1);
        pair *o = alias ? &in[k - 1] : &out; /* out may alias an input */
        cpu->sum->add_forward(o->h, ih, k, n, relu);
        gpu->sum->add_forward(o->d, id, k, n, relu);
        same("add_forward", alias ? "aliased" : "out", o, TOL);
        gpu->from_host(o->d, o->h, n);
        pair_new(&dout, n, 1);
        float *dh[20], *dd[20];
        for (int j = 0; j < k; j++) {
            int skip = ri(0, 3) == 0 || (alias && j == k - 1); /* keep the mask unchanged */
            dh[j] = skip ? NULL : in[j].h;
            dd[j] = skip ? NULL : in[j].d;
        }
        cpu->sum->add_backward(dh, dout.h, relu ? o->h : NULL, k, n);
        gpu->sum->add_backward(dd, dout.d, relu ? o->d : NULL, k, n);
        for (int j = 0; j < k; j++)
            same("add_backward", "dinp", &in[j], TOL);
        cpu->optim->sgd_update(out.h, dout.h, n, 0.1f);
        gpu->optim->sgd_update(out.d, dout.d, n, 0.1f);
        same("sgd_update", "w", &out, TOL);
        same("sgd_update", "g (zeroed)", &dout, TOL);
        /* two Adam steps (bias correction of steps 1 and 2) from zero moments */
        pair am, av;
        pair_new(&am, n, 0);
        pair_new(&av, n, 0);
        for (int t = 1; t <= 2; t++) {
            for (size_t i = 0; i < n; i++)
                dout.h[i] = fr();
            gpu->from_host(dout.d, dout.h, n);
            cpu->optim->adam_update(out.h, dout.h, am.h, av.h, n, 0.01f, 0.9f, 0.999f, 1e-8f, t);
            gpu->optim->adam_update(out.d, dout.d, am.d, av.d, n, 0.01f, 0.9f, 0.999f, 1e-8f, t);
            same("adam_update", "w", &out, TOL);
            same("adam_update", "m", &am, TOL);
            same("adam_update", "v", &av, TOL);
            same("adam_update", "g (zeroed)", &dout, TOL);
        }
        pairs_free();

        /* reduce-mean, permute, box copy in 1-6 dims */
        int nd = ri(1, 6), dims[SB_MAX_DIMS], perm[SB_MAX_DIMS];
        size_t tot = 1;
        for (int d = 0; d < nd; d++) {
            dims[d] = ri(1, 5);
            perm[d] = d;
            tot *= (size_t)dims[d];
        }
        for (int d = nd - 1; d > 0; d--) {
            int j = ri(0, d), t = perm[d];
            perm[d] = perm[j];
            perm[j] = t;
        }
        unsigned axes = rnd() & ((1u << nd) - 1);
        size_t nout = 1;
        for (int d = 0; d < nd; d++)
            nout *= (axes >> d) & 1 ? 1 : (size_t)dims[d];
        long count = ri(0, 1) ? 0 : ri(1, 100);
        pair x, r, dx, px;
        pair_new(&x, tot, 1);
        pair_new(&r, nout, 1);
        pair_new(&dx, tot, 1);
        pair_new(&px, tot, 1);
        cpu->sum->reduce_mean_forward(r.h, x.h, nd, dims, axes, count);
        gpu->sum->reduce_mean_forward(r.d, x.d, nd, dims, axes, count);
        same("reduce_mean_forward", "out", &r, TOL);
        cpu->sum->reduce_mean_backward(dx.h, r.h, nd, dims, axes, count);
        gpu->sum->reduce_mean_backward(dx.d, r.d, nd, dims, axes, count);
        same("reduce_mean_backward", "dinp", &dx, TOL);
        int acc = ri(0, 1);
        cpu->move->permute(px.h, x.h, nd, dims, perm, acc);
        gpu->move->permute(px.d, x.d, nd, dims, perm, acc);
        same("permute", acc ? "+=" : "=", &px, TOL);
        int dd2[SB_MAX_DIMS], dl[SB_MAX_DIMS], sl[SB_MAX_DIMS], sz[SB_MAX_DIMS];
        size_t ndst = 1;
        for (int d = 0; d < nd; d++) {
            sz[d] = ri(1, dims[d]);
            sl[d] = ri(0, dims[d] - sz[d]);
            dd2[d] = sz[d] + (ri(0, 1) ? ri(0, 3) : 0);
            dl[d] = ri(0, dd2[d] - sz[d]);
            ndst *= (size_t)dd2[d];
        }
        pair bd;
        pair_new(&bd, ndst, 1);
        cpu->move->box_copy(bd.h, dd2, dl, x.h, dims, sl, sz, nd, acc);
        gpu->move->box_copy(bd.d, dd2, dl, x.d, dims, sl, sz, nd, acc);
        same("box_copy", acc ? "+=" : "=", &bd, TOL);
        pairs_free();
    }
}

/* ---- pointwise: act, softcap, mul, expand ---- */

static void check_pointwise(void)
{
    for (int it = 0; it < iters; it++) {
        size_t n = (size_t)ri(1, 5000);
        pair x, y, dy, dx;
        pair_new(&x, n, 1);
        for (size_t i = 0; i < n; i++) /* beyond [-1, 1): relu6's kink, saturation */
            x.h[i] *= 8.0f;
        gpu->from_host(x.d, x.h, n);
        pair_new(&y, n, 0);
        pair_new(&dy, n, 1);
        pair_new(&dx, n, 1);
        for (int fn = 0; fn < SB_ACT_FN_COUNT; fn++) {
            cpu->pointwise->act_forward(y.h, x.h, n, fn);
            gpu->pointwise->act_forward(y.d, x.d, n, fn);
            same("act_forward", sb_act_fn_name(fn), &y, TOL);
            cpu->pointwise->act_backward(dx.h, dy.h, x.h, n, fn);
            gpu->pointwise->act_backward(dx.d, dy.d, x.d, n, fn);
            same("act_backward", sb_act_fn_name(fn), &dx, TOL);
        }
        /* softcap (Gemma 2's logit soft-capping) at caps that saturate some
         * of x's [-8, 8) (1, 3) and at Gemma 2's 30 and 50 */
        const float caps[] = {1.0f, 3.0f, 30.0f, 50.0f};
        for (int ci = 0; ci < 4; ci++) {
            char what[32];
            snprintf(what, sizeof what, "cap %g", caps[ci]);
            cpu->pointwise->softcap_forward(y.h, x.h, n, caps[ci]);
            gpu->pointwise->softcap_forward(y.d, x.d, n, caps[ci]);
            same("softcap_forward", what, &y, TOL);
            cpu->pointwise->softcap_backward(dx.h, dy.h, x.h, n, caps[ci]);
            gpu->pointwise->softcap_backward(dx.d, dy.d, x.d, n, caps[ci]);
            same("softcap_backward", what, &dx, TOL);
        }
        pairs_free();

        /* b (expand's x) on a random subset of 1-6 dims */
        int nd = ri(1, 6), dims[SB_MAX_DIMS];
        size_t tot = 1, nb = 1;
        unsigned has = rnd() & ((1u << nd) - 1);
        for (int d = 0; d < nd; d++) {
            dims[d] = ri(1, 5);
            tot *= (size_t)dims[d];
            nb *= (has >> d) & 1 ? (size_t)dims[d] : 1;
        }
        pair a, b, out, g, da, db;
        pair_new(&a, tot, 1);
        pair_new(&b, nb, 1);
        pair_new(&out, tot, 0);
        pair_new(&g, tot, 1);
        pair_new(&da, tot, 1);
        pair_new(&db, nb, 1);
        cpu->pointwise->mul_forward(out.h, a.h, b.h, nd, dims, has);
        gpu->pointwise->mul_forward(out.d, a.d, b.d, nd, dims, has);
        same("mul_forward", "out", &out, TOL);
        cpu->pointwise->mul_backward(da.h, db.h, g.h, a.h, b.h, nd, dims, has);
        gpu->pointwise->mul_backward(da.d, db.d, g.d, a.d, b.d, nd, dims, has);
        same("mul_backward", "da", &da, TOL);
        same("mul_backward", "db", &db, TOL);
        cpu->pointwise->expand_forward(out.h, b.h, nd, dims, has);
        gpu->pointwise->expand_forward(out.d, b.d, nd, dims, has);
        same("expand_forward", "out", &out, TOL);
        cpu->pointwise->expand_backward(db.h, g.h, nd, dims, has);
        gpu->pointwise->expand_backward(db.d, g.d, nd, dims, has);
        same("expand_backward", "dinp", &db, TOL);
        pairs_free();
    }
}

/* ---- memory, all-reduce ---- */

static void check_memory(void)
{
    pair a;
    pair_new(&a, 12345, 1);
    same("from_host/to_host", "roundtrip", &a, 0);
    gpu->zero(a.d, a.n);
    memset(a.h, 0, a.n * sizeof(float));
    same("zero", "p", &a, 0);
    for (size_t i = 0; i < a.n; i++)
        a.h[i] = (float)i;
    gpu->from_host(a.d, a.h, a.n);
    if (gpu->allreduce(a.d, a.n, MPI_SUM, MPI_COMM_SELF) != 0) {
        failures++;
        printf("FAIL allreduce on MPI_COMM_SELF returned an error\n");
    }
    if (gpu->sync)
        gpu->sync();
    same("allreduce", "one rank", &a, 0);
    /* ZeRO's collectives on one rank: the reduce-scatter copies the whole
     * buffer into the slice, the all-gather leaves it as it is */
    int cnt[1] = {(int)a.n}, dsp[1] = {0};
    float *slice = gpu->alloc(a.n * sizeof(float));
    gpu->zero(slice, a.n);
    if (gpu->reduce_scatter(a.d, slice, cnt, dsp, MPI_COMM_SELF) != 0
        || gpu->allgather(a.d, cnt, dsp, MPI_COMM_SELF) != 0) {
        failures++;
        printf("FAIL reduce_scatter/allgather on MPI_COMM_SELF returned an error\n");
    }
    if (gpu->sync)
        gpu->sync();
    same("allgather", "one rank", &a, 0);
    gpu->to_host(a.h, slice, a.n);
    gpu->release(slice);
    same("reduce_scatter", "one rank", &a, 0);
    pairs_free();
}

/* ---- figures (--bench) ---- */

static double timed_ms(void (*fn)(void *), void *arg, int reps)
{
    fn(arg); /* warm-up: cuDNN's algorithm search, cuBLAS's heuristics */
    sb_cuda_timer_start();
    for (int r = 0; r < reps; r++)
        fn(arg);
    return sb_cuda_timer_stop_ms() / reps;
}

typedef struct {
    int n;
    float *a, *b, *c;
} gemm_arg;

static void run_gemm(void *p)
{
    gemm_arg *g = p;
    gpu->gemm->gemm_batched(0, 0, g->n, g->n, g->n, 1.0f, g->a, g->n, 0, g->b, g->n, 0, 0.0f, g->c,
                            g->n, 0, 1);
}

typedef struct {
    int B, C, H, N, pass;
    float *x, *w, *y, *dx, *dw;
} conv_arg;

static void run_conv(void *p)
{
    conv_arg *k = p;
    if (k->pass == 0)
        gpu->conv->conv2d_forward(k->y, k->x, k->w, NULL, NULL, k->B, k->C, k->H, k->H, k->N, 3, 3,
                                  1, 1, 1, 1, k->H, k->H, 1, 1, 1, 0);
    else if (k->pass == 1)
        gpu->conv->conv2d_backward_data(k->dx, NULL, k->y, NULL, k->w, k->B, k->C, k->H, k->H, k->N,
                                        3, 3, 1, 1, 1, 1, k->H, k->H, 1, 1, 1);
    else
        gpu->conv->conv2d_backward_filter(k->dw, NULL, NULL, k->y, NULL, k->x, k->B, k->C, k->H,
                                          k->H, k->N, 3, 3, 1, 1, 1, 1, k->H, k->H, 1, 1, 1);
}

static void bench(void)
{
    const char *prec = getenv("SHARDBENCH_PRECISION");
    prec = prec && *prec ? prec : "fp32";
    int sizes[] = {1024, 4096, 8192};
    for (int i = 0; i < 3; i++) {
        int n = sizes[i];
        size_t e = (size_t)n * n * sizeof(float);
        gemm_arg g = {n, gpu->alloc(e), gpu->alloc(e), gpu->alloc(e)};
        gpu->zero(g.a, (size_t)n * n);
        gpu->zero(g.b, (size_t)n * n);
        double ms = timed_ms(run_gemm, &g, 10);
        printf("bench %s gemm %dx%dx%d: %.3f ms, %.1f TFLOP/s\n", prec, n, n, n, ms,
               2.0 * n * n * (double)n / (ms * 1e9));
        gpu->release(g.a), gpu->release(g.b), gpu->release(g.c);
    }
    static const char *const pass[] = {"forward", "backward-data", "backward-filter"};
    conv_arg k = {32, 128, 56, 128, 0, NULL, NULL, NULL, NULL, NULL};
    size_t nx = (size_t)k.B * k.C * k.H * k.H, ny = (size_t)k.B * k.N * k.H * k.H,
           nw = (size_t)k.N * k.C * 9;
    k.x = gpu->alloc(nx * 4), k.dx = gpu->alloc(nx * 4), k.y = gpu->alloc(ny * 4);
    k.w = gpu->alloc(nw * 4), k.dw = gpu->alloc(nw * 4);
    gpu->zero(k.x, nx), gpu->zero(k.dx, nx), gpu->zero(k.y, ny), gpu->zero(k.w, nw), gpu->zero(k.dw, nw);
    for (k.pass = 0; k.pass < 3; k.pass++) {
        double ms = timed_ms(run_conv, &k, 10);
        printf("bench %s conv 3x3 %d->%d on %dx%dx%d %s: %.3f ms, %.1f TFLOP/s\n", prec, k.C, k.N,
               k.B, k.H, k.H, pass[k.pass], ms, 2.0 * ny * k.C * 9 / (ms * 1e9));
    }
    gpu->release(k.x), gpu->release(k.dx), gpu->release(k.y), gpu->release(k.w), gpu->release(k.dw);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int self = 0, do_bench = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--self"))
            self = 1;
        else if (!strcmp(argv[i], "--bench"))
            do_bench = 1;
        else if (atoi(argv[i]) > 0)
            iters = atoi(argv[i]);
    }
    sb_error err = {0};
    gpu = self ? cpu : sb_backend_cuda_get(&err);
    if (!gpu) {
        int skip = strstr(err.msg, "no GPU") != NULL;
        printf("cuda_check: %s: %s\n", skip ? "skipped" : "FAILED", err.msg);
        MPI_Finalize();
        return skip ? 77 : 1;
    }
    const char *prec = getenv("SHARDBENCH_PRECISION");
    if (prec && !strcmp(prec, "tf32"))
        tol_mm = 3e-3;
    else if (prec && !strcmp(prec, "bf16"))
        tol_mm = 2e-2;
    if (self)
        tol_mm = 0;
    else
        sb_cuda_timer_start();
    check_memory();
    check_gemm();
    check_conv();
    check_pool();
    check_embedding_lstm();
    check_norms();
    check_llama();
    check_softmax();
    check_moe();
    check_tensor();
    check_pointwise();
    double ms = self ? 0 : sb_cuda_timer_stop_ms();
    if (!self) { /* NCCL for real at P = 1 */
        char nmsg[256];
        checks++;
        if (sb_cuda_nccl_selftest(nmsg, sizeof nmsg)) {
            failures++;
            printf("cuda_check: NCCL self-test FAILED: %s\n", nmsg);
        } else
            printf("cuda_check: NCCL self-test (1-rank all-reduce, grouped send/recv to itself): ok\n");
    }
    sb_cuda_stats st;
    if (!self && !sb_cuda_stats_get(&st))
        printf("cuda_check: device %d, %s, pool %zu MiB, peak %.1f MiB, cuDNN algo cache %ld hits "
               "/ %ld searches, %.1f ms of device time\n",
               st.device, st.precision, st.pool_bytes >> 20, (double)st.peak_bytes / 1048576.0,
               st.algo_hits, st.algo_misses, ms);
    printf("cuda_check: %d comparisons, %d failed\n", checks, failures);
    if (do_bench && !self && !failures)
        bench();
    MPI_Finalize();
    return failures ? 1 : 0;
}
