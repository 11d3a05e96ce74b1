/* gpu_op.c: the GPU op model (shardbench/megatron.h, docs/gpu-op-model.md):
 *   time = max(FLOP / (peak x eff(shape)), bytes / (HBM x hbm_eff)) + overhead
 * with eff(shape) = the large-GEMM fraction of a microbenchmark x tile
 * quantization x wave quantization over the SMs x a small-K penalty; and
 * the collectives at the NCCL bus bandwidth the machine file names. */
#include "shardbench/megatron.h"
#include "shardbench/precision.h"

#include <math.h>

/* the K at which the large-GEMM fraction was measured (the best shapes of the
 * microbenchmark have K of 1.5-2.8 Ki): K below it pays K / (K + 128) of
 * that K's figure, the share of a tile's time spent filling its pipeline */
#define K_REF 2048.0
#define K_FILL 128.0

/* The share of `tiles` blocks' waves over `sms` SMs that holds blocks. */
static double waves_eff(double tiles, double sms) { return tiles / (ceil(tiles / sms) * sms); }

/* The math of `batch` (M x K)(K x N) products: their FLOP over the peak at
 * the shape's efficiency. */
static double gemm_math_s(const sb_gpu *g, double batch, double M, double N, double K)
{
    double flops = 2.0 * batch * M * N * K;
    double tm = ceil(M / g->tile_m), tn = ceil(N / g->tile_n);
    double tile_eff = (M * N) / (tm * g->tile_m * tn * g->tile_n);
    double wave_eff = waves_eff(tm * tn * batch, g->sms);
    double k_eff = (K / (K + K_FILL)) / (K_REF / (K_REF + K_FILL));
    if (k_eff > 1.0)
        k_eff = 1.0;
    double eff = g->gemm_eff * tile_eff * wave_eff * k_eff;
    return flops / (g->peak_tflops * 1e12 * eff);
}

double sb_gpu_gemm_s(const sb_gpu *g, double batch, double M, double N, double K, double bytes)
{
    if (batch <= 0 || M <= 0 || N <= 0 || K <= 0)
        return 0.0;
    double t_math = gemm_math_s(g, batch, M, N, K);
    double t_mem = batch * (M * K + K * N + M * N) * bytes / (g->hbm_gbs * 1e9 * g->hbm_eff);
    return (t_math > t_mem ? t_math : t_mem) + g->kernel_us * 1e-6;
}

/* The setup a machine file's attention figures are measured at (the
 * FlashAttention-3 benchmark's): head dim 128, 16 heads, 16,384 tokens a
 * call, tiles of 128 queries: 2,048 tiles over the SMs. */
#define ATTN_K_REF 128.0
#define ATTN_TILE_M 128.0
#define ATTN_REF_TILES 2048.0


double sb_curve_at(const sb_curve *c, double x)
{
    if (c->n <= 0)
        return 0.0;
    if (x <= c->x[0])
        return c->y[0];
    for (int i = 1; i < c->n; i++)
        if (x <= c->x[i]) {
            double f = log2(x / c->x[i - 1]) / log2(c->x[i] / c->x[i - 1]);
            return c->y[i - 1] + f * (c->y[i] - c->y[i - 1]);
        }
    return c->y[c->n - 1];
}

double sb_gpu_attn_s(const sb_gpu *g, double batch, double M, double N, double K, double bytes,
                     int bwd)
{
    if (batch <= 0 || M <= 0 || N <= 0 || K <= 0)
        return 0.0;
    const sb_curve *cv = bwd ? &g->attn_bwd : &g->attn_fwd;
    double t_math;
    if (cv->n > 0) { /* the kernel's measured rate at M queries, its head dim's K fill,
                        its tiles' waves over the SMs against the measurement's */
        double k_eff = (K / (K + K_FILL)) / (ATTN_K_REF / (ATTN_K_REF + K_FILL));
        double w = waves_eff(batch * ceil(M / ATTN_TILE_M), g->sms) / waves_eff(ATTN_REF_TILES, g->sms);
        t_math = 2.0 * batch * M * N * K / (sb_curve_at(cv, M) * 1e12 * fmin(k_eff, 1.0) * w);
    } else {
        sb_gpu a = *g;
        if (g->attn_peak_tflops > 0)
            a.peak_tflops = g->attn_peak_tflops;
        if (g->attn_gemm_eff > 0)
            a.gemm_eff = g->attn_gemm_eff;
        t_math = gemm_math_s(&a, batch, M, N, K);
    }
    double t_mem = batch * (2.0 * M * K + N * K) * bytes / (g->hbm_gbs * 1e9 * g->hbm_eff);
    return (t_math > t_mem ? t_math : t_mem) + g->kernel_us * 1e-6;
}

double sb_gpu_cast_s(const sb_gpu *g, double elems)
{
    /* read the 2-byte value, write its fp8 copy and the fp8 transpose */
    return g->fp8 ? sb_gpu_mem_s(g, elems * 4.0) : 0.0;
}

double sb_gpu_fp8_transpose_s(const sb_gpu *g, double elems)
{
    /* read the fp8 copy, write its transpose */
    return g->fp8 ? sb_gpu_mem_s(g, elems * 2.0) : 0.0;
}

double sb_gpu_mem_s(const sb_gpu *g, double bytes)
{
    if (bytes <= 0)
        return 0.0;
    return bytes / (g->hbm_gbs * 1e9 * g->hbm_eff) + g->kernel_us * 1e-6;
}

static double busbw(const sb_gpu *g, int inter) { return (inter ? g->inter_busbw : g->intra_busbw) * 1e9; }
static double lat(const sb_gpu *g, int inter) { return (inter ? g->inter_lat_us : g->intra_lat_us) * 1e-6; }

double sb_gpu_allreduce_s(const sb_gpu *g, double bytes, double q, int inter)
{
    if (q <= 1 || bytes <= 0)
        return 0.0;
    return 2.0 * (q - 1) / q * bytes / busbw(g, inter) + 2.0 * (q - 1) * lat(g, inter);
}

double sb_gpu_gather_s(const sb_gpu *g, double bytes, double q, int inter)
{
    if (q <= 1 || bytes <= 0)
        return 0.0;
    return (q - 1) / q * bytes / busbw(g, inter) + (q - 1) * lat(g, inter);
}

double sb_gpu_p2p_s(const sb_gpu *g, double bytes, int inter)
{
    if (bytes <= 0)
        return 0.0;
    return bytes / busbw(g, inter) + lat(g, inter);
}

double sb_machine_peak(const sb_machine *mc, int prec, int attn)
{
    if (prec < 0)
        prec = mc->precision;
    if (attn && prec == SB_PREC_FP8 && mc->tflops_bf16 > 0)
        return mc->tflops_bf16;
    return prec == SB_PREC_FP32   ? mc->tflops_fp32
           : prec == SB_PREC_TF32 ? mc->tflops_tf32
           : prec == SB_PREC_FP8  ? mc->tflops_fp8
                                  : mc->tflops_bf16;
}

/* The large-GEMM fraction of the peak sb_machine_peak gives: under fp8 a linear
 * layer's GEMM reaches gemm_eff_large_fp8 of tflops_fp8 where the file gives it
 * (an fp8 microbenchmark), the attention core (bf16) gemm_eff_large. */
double sb_machine_gemm_eff(const sb_machine *mc, int prec, int attn)
{
    if (prec < 0)
        prec = mc->precision;
    if (!attn && prec == SB_PREC_FP8 && mc->gemm_eff_large_fp8 > 0)
        return mc->gemm_eff_large_fp8;
    return mc->gemm_eff_large;
}

int sb_attn_curves_apply(int prec)
{
    return prec == SB_PREC_BF16 || prec == SB_PREC_FP16 || prec == SB_PREC_FP8;
}

int sb_machine_has_gpu_model(const sb_machine *mc)
{
    return mc->sms > 0 && mc->gemm_eff_large > 0 && mc->hbm_eff > 0;
}

int sb_gpu_from_machine(const sb_machine *mc, int prec, sb_gpu *g, sb_error *err)
{
    if (prec < 0)
        prec = mc->precision;
    double peak = sb_machine_peak(mc, prec, 0);
    if (!(peak > 0))
        return sb_fail(err, SB_EXIT_INPUT, "--precision %s: machine %s has no %s peak (no tflops_%s line)",
                       sb_precision_name(prec), mc->path, sb_precision_name(prec),
                       sb_precision_name(prec));
    if (!sb_machine_has_gpu_model(mc) || !(mc->intra_busbw > 0) || !(mc->inter_busbw > 0))
        return sb_fail(err, SB_EXIT_INPUT,
                       "machine %s has no GPU op model figures (sms, gemm_eff_large, hbm_eff, "
                       "intra_busbw, inter_busbw lines; docs/machines.md)",
                       mc->path);
    g->peak_tflops = peak;
    g->fp8 = prec == SB_PREC_FP8;
    g->attn_peak_tflops = sb_machine_peak(mc, prec, 1);
    g->gemm_eff = sb_machine_gemm_eff(mc, prec, 0);
    g->attn_gemm_eff = sb_machine_gemm_eff(mc, prec, 1);
    if (sb_attn_curves_apply(prec)) /* measured in bf16: the 16-bit recipes' attention */
        g->attn_fwd = mc->attn_fwd_tflops, g->attn_bwd = mc->attn_bwd_tflops;
    g->hbm_gbs = mc->mem_gbs;
    g->hbm_eff = mc->hbm_eff;
    g->sms = mc->sms;
    g->tile_m = 128.0; /* the 128 x 256 threadblock tile of cuBLAS/CUTLASS half-precision GEMMs */
    g->tile_n = 256.0;
    g->kernel_us = mc->kernel_us;
    g->intra_busbw = mc->intra_busbw;
    g->inter_busbw = mc->inter_busbw;
    g->intra_lat_us = mc->intra_latency_us;
    g->inter_lat_us = mc->inter_latency_us;
    g->node_devices = mc->devices_per_node;
    g->mem_bytes = mc->mem_gib * 1073741824.0;
    return 0;
}
