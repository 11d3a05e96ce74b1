/* tests/unit/test_megatron.c: cmocka tests of the GPU op model (cost/gpu_op.c)
 * and Megatron-LM configurations (search/megatron.c), figures by hand: a
 * GEMM's tile and wave quantization over the SMs, a memory-bound kernel,
 * the collectives at bus bandwidth; a configuration's breakdown adds up to
 * its step, interleaving divides the bubble by VPP exactly, the recipe's
 * bytes per parameter, the refusals of bad degrees, and the search never
 * slower than a configuration of its grid. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "shardbench/megatron.h"
#include "shardbench/precision.h"
#include "../search/mt_int.h"

static sb_gpu toy(void)
{
    sb_gpu g = {.peak_tflops = 100, .gemm_eff = 0.8, .hbm_gbs = 1000, .hbm_eff = 0.5, .sms = 10,
                .tile_m = 128, .tile_n = 256, .kernel_us = 0, .intra_busbw = 100,
                .inter_busbw = 10, .intra_lat_us = 0, .inter_lat_us = 0, .node_devices = 8,
                .mem_bytes = 80e9};
    return g;
}

static void close_to(double got, double want)
{
    if (!(fabs(got - want) <= 1e-9 * fabs(want)))
        fail_msg("%.12g, want %.12g", got, want);
}

static void test_gemm_by_hand(void **state)
{
    (void)state;
    sb_gpu g = toy();
    /* 1280 x 2560 x 2048: 10 x 10 tiles = 100 = 10 full waves of 10 SMs, K at its reference */
    double flops = 2.0 * 1280 * 2560 * 2048;
    close_to(sb_gpu_gemm_s(&g, 1, 1280, 2560, 2048, 2), flops / (100e12 * 0.8));
    /* 1408 x 2560: 11 x 10 = 110 tiles = 11 waves, full tiles: the same efficiency */
    close_to(sb_gpu_gemm_s(&g, 1, 1408, 2560, 2048, 2), 2.0 * 1408 * 2560 * 2048 / (100e12 * 0.8));
    /* 1290 rows: 11 x 10 tiles, the 11th row of tiles 10/128 full: tile efficiency
     * 1290 / 1408; 110 tiles, 11 waves */
    close_to(sb_gpu_gemm_s(&g, 1, 1290, 2560, 2048, 2),
             2.0 * 1290 * 2560 * 2048 / (100e12 * 0.8 * (1290.0 / 1408.0)));
    /* 1280 x 2816: 10 x 11 = 110 tiles in 11 waves; 2816 = 11 x 256 full tiles */
    /* 12 x 10 = 120 tiles: 12 waves; 130 tiles: 13 waves; 105 tiles (21 x 5): 11 waves, 105/110 */
    close_to(sb_gpu_gemm_s(&g, 1, 21 * 128, 5 * 256, 2048, 2),
             2.0 * 21 * 128 * 5 * 256 * 2048 / (100e12 * 0.8 * (105.0 / 110.0)));
    /* K = 128: (128/256) / (2048/2176) of the reference */
    double keff = (128.0 / 256.0) / (2048.0 / 2176.0);
    close_to(sb_gpu_gemm_s(&g, 1, 1280, 2560, 128, 2), 2.0 * 1280 * 2560 * 128 / (100e12 * 0.8 * keff));
    /* a skinny GEMM is memory-bound: 16 x 1M x 16384 in 2-byte words */
    double bytes = (16.0 * 16384 + 16384.0 * 1048576 + 16.0 * 1048576) * 2;
    close_to(sb_gpu_gemm_s(&g, 1, 16, 1048576, 16384, 2), bytes / (1000e9 * 0.5));
    g.kernel_us = 4;
    close_to(sb_gpu_mem_s(&g, 1e9), 1e9 / 500e9 + 4e-6);
    close_to(sb_gpu_allreduce_s(&g, 1e9, 8, 0), 2.0 * 7 / 8 * 1e9 / 100e9);
    close_to(sb_gpu_gather_s(&g, 1e9, 4, 1), 0.75 * 1e9 / 10e9);
    assert_true(sb_gpu_allreduce_s(&g, 1e9, 1, 0) == 0.0);
}

/* fp8: a linear layer's GEMM at gemm_eff_large_fp8 of the fp8 peak where the file gives
 * it, the attention core (bf16 under the fp8 recipe) at gemm_eff_large of bf16's */
static void test_fp8_gemm_eff(void **state)
{
    (void)state;
    sb_machine mc = {.tflops_bf16 = 100, .tflops_fp8 = 200, .gemm_eff_large = 0.8,
                     .gemm_eff_large_fp8 = 0.7, .precision = SB_PREC_BF16};
    close_to(sb_machine_gemm_eff(&mc, SB_PREC_FP8, 0), 0.7);
    close_to(sb_machine_gemm_eff(&mc, SB_PREC_FP8, 1), 0.8);
    close_to(sb_machine_gemm_eff(&mc, SB_PREC_BF16, 0), 0.8);
    close_to(sb_machine_gemm_eff(&mc, -1, 0), 0.8); /* the file's precision, bf16 */
    mc.gemm_eff_large_fp8 = 0; /* not given: the bf16 microbenchmark's */
    close_to(sb_machine_gemm_eff(&mc, SB_PREC_FP8, 0), 0.8);
    /* the attention core at its own peak and fraction: 1280 x 2560 x 2048, full waves */
    sb_gpu g = toy();
    g.peak_tflops = 200, g.gemm_eff = 0.7, g.attn_peak_tflops = 100, g.attn_gemm_eff = 0.8;
    double flops = 2.0 * 1280 * 2560 * 2048;
    close_to(sb_gpu_gemm_s(&g, 1, 1280, 2560, 2048, 2), flops / (200e12 * 0.7));
    close_to(sb_gpu_attn_s(&g, 1, 1280, 2560, 2048, 2, 0), flops / (100e12 * 0.8));
    close_to(sb_gpu_attn_s(&g, 1, 1280, 2560, 2048, 2, 1), flops / (100e12 * 0.8));
    /* a measured kernel: its rate at M queries (log2-linear between points), the
     * backward's own; head dim 64 pays 64/192 over 128/256; over 128 no gain */
    g.attn_fwd = (sb_curve){.n = 2, .x = {1024, 4096}, .y = {300, 500}};
    g.attn_bwd = (sb_curve){.n = 1, .x = {4096}, .y = {250}};
    g.hbm_gbs = 1e6; /* the math, not the operands' bytes, bounds these */
    /* waves: 8 x 2048/128 = 128 tiles on 10 SMs fill 128/130 of 13 waves; the
     * measurement's 2048 tiles 2048/2050 */
    double f2 = 2.0 * 8 * 2048 * 1024 * 128, w = (128.0 / 130) / (2048.0 / 2050);
    close_to(sb_gpu_attn_s(&g, 8, 2048, 1024, 128, 2, 0), f2 / (400e12 * w));
    close_to(sb_gpu_attn_s(&g, 8, 2048, 1024, 128, 2, 1), f2 / (250e12 * w));
    close_to(sb_gpu_attn_s(&g, 8, 2048, 2048, 64, 2, 0), f2 / (400e12 * (64.0 / 192) / 0.5 * w));
    close_to(sb_gpu_attn_s(&g, 8, 2048, 512, 256, 2, 0), f2 / (400e12 * w));
    /* 3 sequences of 640 queries: 3 x 5 tiles, one wave of 15 of 20 on 20 SMs */
    g.sms = 20;
    double f3 = 2.0 * 3 * 640 * 640 * 128, w3 = (15.0 / 20) / (2048.0 / 2060);
    close_to(sb_gpu_attn_s(&g, 3, 640, 640, 128, 2, 0), f3 / (300e12 * w3));
}

static sb_mt_model gpt(void)
{
    sb_mt_model m = {.layers = 48, .hidden = 8192, .heads = 64, .kv_heads = 64, .ffn = 32768,
                     .vocab = 51200, .seq = 2048, .global_batch = 1536};
    return m;
}

static sb_mt_config cfg(int tp, int pp, int dp, int vpp, int mbs)
{
    sb_mt_config c = {.tp = tp, .pp = pp, .dp = dp, .cp = 1, .ep = 1, .vpp = vpp, .mbs = mbs,
                      .recompute = SB_MT_RC_FULL, .precision = SB_PREC_FP16, .fused_attention = 0};
    return c;
}

/* compute by kind: the GEMMs (the layers' from their shape table, the logits'), the
 * attention core (2 forward and 5 backward products), the memory-bound rest; they add
 * up to compute_s; a selective recomputation repeats the attention's forward, a full
 * one the GEMMs' too */
static void test_compute_by_kind(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    sb_mt_model m = gpt();
    m.layers = 4, m.global_batch = 8;
    sb_mt_config c = cfg(2, 1, 1, 1, 2); /* TP 2, 4 micro-batches of 2 sequences */
    c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1;
    sb_mt_result r, rs, rf;
    sb_mt_price(&m, &c, &g, &r);
    close_to(r.compute_gemm_s + r.compute_attention_s + r.compute_memory_s, r.compute_s);
    assert_true(r.compute_memory_s > 0 && r.compute_memory_s < 0.2 * r.compute_s);
    sb_mt_gemm gm[SB_MT_LAYER_GEMMS], hg[SB_MT_HEAD_GEMMS];
    sb_mt_layer_gemms(&m, &c, gm);
    sb_mt_head_gemms(&m, &c, hg);
    double layer = 0, head = 0, fa = 0;
    for (int i = 0; i < SB_MT_LAYER_GEMMS; i++)
        layer += sb_gpu_gemm_s(&g, 1, gm[i].M, gm[i].N, gm[i].K, 2);
    for (int i = 0; i < SB_MT_HEAD_GEMMS; i++)
        head += sb_gpu_gemm_s(&g, 1, hg[i].M, hg[i].N, hg[i].K, 2);
    close_to(r.compute_gemm_s, 4 * (4 * layer + head));
    double hl = 64 / 2 * 2, s = 2048, dh = 128;
    fa = 2 * sb_gpu_attn_s(&g, hl, s, s / 2, dh, 2, 0);
    close_to(r.compute_attention_s, 4 * 4 * 3.5 * fa);
    c.recompute = SB_MT_RC_SELECTIVE;
    sb_mt_price(&m, &c, &g, &rs);
    close_to(rs.compute_attention_s - r.compute_attention_s, 4 * 4 * fa);
    close_to(rs.compute_gemm_s, r.compute_gemm_s);
    c.recompute = SB_MT_RC_FULL;
    sb_mt_price(&m, &c, &g, &rf);
    close_to(rf.compute_attention_s, rs.compute_attention_s);
    double fwd_gemm = 0;
    for (int i = 0; i < SB_MT_LAYER_GEMMS; i += 3)
        fwd_gemm += sb_gpu_gemm_s(&g, 1, gm[i].M, gm[i].N, gm[i].K, 2);
    close_to(rf.compute_gemm_s - r.compute_gemm_s, 4 * 4 * fwd_gemm);
    close_to(rf.compute_gemm_s + rf.compute_attention_s + rf.compute_memory_s, rf.compute_s);
    /* materialized attention: its products are the attention, its softmax and dropout
     * passes over the scores memory-bound */
    sb_mt_result rm;
    c.recompute = SB_MT_RC_NONE, c.fused_attention = 0;
    sb_mt_price(&m, &c, &g, &rm);
    double sc = hl * s * s, prod = sb_gpu_gemm_s(&g, hl, s, s, dh, 2) + sb_gpu_gemm_s(&g, hl, s, dh, s, 2);
    close_to(rm.compute_attention_s, 4 * 4 * 3 * prod);
    close_to(rm.compute_memory_s - r.compute_memory_s,
             4 * 4 * (sb_gpu_mem_s(&g, sc * 4) + sb_gpu_mem_s(&g, sc * 6) + 2 * sb_gpu_mem_s(&g, sc * 5)));
    close_to(rm.compute_gemm_s, r.compute_gemm_s);
    /* fp8: the GEMMs at the fp8 figures, the casts memory-bound */
    sb_mt_result r8, r16;
    c.fused_attention = 1, c.precision = SB_PREC_FP8;
    sb_gpu g8 = g;
    g8.peak_tflops = 1979, g8.attn_peak_tflops = 989, g8.fp8 = 1;
    g8.gemm_eff = 0.7, g8.attn_gemm_eff = 0.8; /* fp8's fraction and bf16's, apart */
    sb_mt_price(&m, &c, &g8, &r8);
    g8.fp8 = 0; /* the same pricing without the cast kernels */
    sb_mt_price(&m, &c, &g8, &r16);
    g8.fp8 = 1;
    /* the inputs of proj and fc2 cast-transposed, those of QKV and fc1 written in fp8
     * by their fused norm (1 byte an element less, T x h each) and transposed in the
     * backward; every output gradient cast-transposed (no sequence parallelism) */
    double casts = 0;
    for (int i = 0; i < SB_MT_LAYER_GEMMS; i += 3) {
        double in = gm[i].M * gm[i].K;
        casts += (i == 0 || i == 6 ? sb_gpu_fp8_transpose_s(&g8, in) : sb_gpu_cast_s(&g8, in)) +
                 sb_gpu_cast_s(&g8, gm[i].M * gm[i].N);
    }
    casts -= 2 * 4096.0 * 8192 / (3350e9 * 0.9);
    assert_true(casts > 0);
    /* the logits' GEMMs (Megatron-LM's own linear, not Transformer Engine's) stay bf16 */
    sb_gpu gb = g8;
    gb.peak_tflops = 989, gb.gemm_eff = 0.8;
    double head8 = 0, head16 = 0;
    for (int i = 0; i < SB_MT_HEAD_GEMMS; i++) {
        head8 += sb_gpu_gemm_s(&gb, 1, hg[i].M, hg[i].N, hg[i].K, 2);
        head16 += sb_gpu_gemm_s(&g8, 1, hg[i].M, hg[i].N, hg[i].K, 2);
    }
    assert_true(head8 > head16);
    close_to(r8.compute_gemm_s, r16.compute_gemm_s + 4 * (head8 - head16));
    close_to(r8.compute_memory_s - r16.compute_memory_s, 4 * 4 * casts);
    /* TP overlap: what it adds to the compute is the GEMMs' */
    sb_mt_result ro, rn;
    c = cfg(8, 1, 1, 1, 2);
    c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1, c.sp = 1;
    g.intra_busbw = 370, g.intra_lat_us = 10;
    sb_mt_price(&m, &c, &g, &rn);
    c.tp_overlap = 1;
    sb_mt_price(&m, &c, &g, &ro);
    assert_true(ro.compute_s > rn.compute_s);
    close_to(ro.compute_gemm_s - rn.compute_gemm_s, ro.compute_s - rn.compute_s);
    close_to(ro.compute_attention_s, rn.compute_attention_s);
}

/* The head's and the embedding's memory-bound passes, by hand from a change of the
 * vocabulary: per logit (T x V/t a micro-batch) Megatron-LM's vocab-parallel
 * cross-entropy moves 2 + 36 bytes forward (bf16 logits cast to fp32, max, subtract,
 * exp, sum, divide; fused, 2 + 20) and 12 + 2 backward (multiply, cast back); the
 * embedding's dense gradient 2 x 2 + 8 bytes per element of its V/t x h table
 * (zeroed, added into the fp32 main gradient) */
static void test_head_passes(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    sb_mt_model m = gpt(), m2;
    m.layers = 2, m.global_batch = 8;
    m2 = m, m2.vocab = 2 * m.vocab;
    sb_mt_config c = cfg(2, 1, 1, 1, 2); /* TP 2, 4 micro-batches of 2 sequences */
    c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1;
    sb_mt_result r, r2;
    sb_mt_price(&m, &c, &g, &r);
    sb_mt_price(&m2, &c, &g, &r2);
    double T = 2 * 2048.0, dV = (double)m.vocab / 2, h = 8192, bw = 3350e9 * 0.9;
    close_to(r2.compute_memory_s - r.compute_memory_s, 4 * (T * dV * (38 + 14) + dV * h * 12) / bw);
    /* the fused cross-entropy (--cross-entropy-fusion): 2 + 4 + 16 bytes forward */
    c.ce_fusion = 1;
    sb_mt_price(&m, &c, &g, &r);
    sb_mt_price(&m2, &c, &g, &r2);
    close_to(r2.compute_memory_s - r.compute_memory_s, 4 * (T * dV * (22 + 14) + dV * h * 12) / bw);
    c.ce_fusion = 0;
    /* bf16 gradients (--grad-reduce-dtype bf16): the main gradient's word is 2 */
    c.grad_bytes = 2;
    sb_mt_price(&m, &c, &g, &r);
    sb_mt_price(&m2, &c, &g, &r2);
    close_to(r2.compute_memory_s - r.compute_memory_s, 4 * (T * dV * (38 + 14) + dV * h * 8) / bw);
    /* fp32 logits: no cast either way (32 + 8 bytes), fp32 gradients */
    c.grad_bytes = 0, c.precision = SB_PREC_FP32;
    sb_mt_price(&m, &c, &g, &r);
    sb_mt_price(&m2, &c, &g, &r2);
    close_to(r2.compute_memory_s - r.compute_memory_s, 4 * (T * dV * (32 + 8) + dV * h * 16) / bw);
}

/* The step's micro-batch is its slowest stage's, stage by stage (sb_mt_stage_of):
 * even stages (the last, with the head), one extra layer on the first stage
 * (--first-stage-layers 5 of 33: stage 0 holds it, with the embedding: slower than
 * the last here, whose head is small against a layer), one on each end (the last) */
static void test_slowest_stage(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    g.intra_busbw = 370, g.inter_busbw = 42.5, g.intra_lat_us = 10, g.inter_lat_us = 20;
    const long layers[3] = {32, 33, 34};
    for (int i = 0; i < 3; i++) {
        sb_mt_model m = gpt();
        m.layers = layers[i], m.global_batch = 16, m.vocab = 2048;
        sb_mt_config c = cfg(8, 8, 1, 1, 1);
        c.first_layers = i ? 5 : 0, c.last_layers = i == 2 ? 5 : 0;
        sb_error ce = {0};
        if (sb_mt_check(&m, &c, 64, &ce))
            fail_msg("case %d: %s", i, ce.msg);
        c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1, c.sp = 1;
        sb_mt_result r;
        sb_mt_price(&m, &c, &g, &r);
        double slowest = 0;
        int at = -1;
        for (int st = 0; st < 8; st++) {
            sb_mt_stage o;
            sb_mt_stage_of(&m, &c, &g, st, &o);
            if (o.fwd_s + o.bwd_s > slowest)
                slowest = o.fwd_s + o.bwd_s, at = st;
        }
        close_to((r.compute_s + r.tp_comm_s + r.pp_comm_s) / 16.0, slowest);
        assert_int_equal(at, i == 1 ? 0 : 7);
        close_to(r.compute_gemm_s + r.compute_attention_s + r.compute_memory_s, r.compute_s);
    }
}

/* --algo megatron's fused attention: 2 forward products at the forward kernel's
 * rate, 5 backward at the backward's (a layer of GPT at TP 1, no pipeline: the
 * compute of two pricings that differ in the backward rate alone differs by
 * layers x micro-batches x 5 products) */
static void test_attention_rates(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    g.attn_fwd = (sb_curve){.n = 2, .x = {1024, 4096}, .y = {300, 500}};
    g.attn_bwd = (sb_curve){.n = 1, .x = {2048}, .y = {400}};
    sb_mt_model m = gpt();
    m.layers = 4, m.global_batch = 8;
    sb_mt_config c = cfg(1, 1, 1, 1, 2); /* 4 micro-batches of 2 sequences */
    c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1;
    sb_mt_result a, b, f;
    sb_mt_price(&m, &c, &g, &a);
    sb_gpu g2 = g;
    g2.attn_bwd.y[0] = 200;
    sb_mt_price(&m, &c, &g2, &b);
    double hl = 64 * 2, s = 2048, dh = 128;
    double want = 4 * 4 * 5 * (sb_gpu_attn_s(&g2, hl, s, s / 2, dh, 2, 1) - sb_gpu_attn_s(&g, hl, s, s / 2, dh, 2, 1));
    assert_true(want > 0);
    close_to(b.compute_s - a.compute_s, want);
    /* and the forward's 2 at its own rate */
    g2 = g;
    g2.attn_fwd.y[0] = g2.attn_fwd.y[1] = 250;
    sb_mt_price(&m, &c, &g2, &f);
    want = 4 * 4 * 2 * (sb_gpu_attn_s(&g2, hl, s, s / 2, dh, 2, 0) - sb_gpu_attn_s(&g, hl, s, s / 2, dh, 2, 0));
    close_to(f.compute_s - a.compute_s, want);
}

/* Context parallelism's merge passes (Transformer Engine's ring, causal, sbhd; bytes
 * per element read + written, at 2-byte words), by hand for cp 2 from the code's
 * steps. Forward, rank 0: K and V into the ring's buffer 2K x 4, the output zeroed
 * Q x 2, its step outputs added Q x 6 (both query chunks) + Q/2 x 6 (the second):
 * 8K + 11Q; rank 1 both steps whole: 8K + 14Q. Backward, rank 0: the buffer 8K;
 * step 0 (the second query half against all K/V): dK,dV concatenated 2K x 4, dQ's
 * half copied Q/2 x 4, dKV copied 2K x 4; step 1 (its own chunks): concatenated
 * 2K x 4, dQ half copied half added Q/2 x (4 + 6), dKV K x (4 + 6): 42K + 7Q;
 * rank 1: 8K; step 0 (all Q against the first K/V half) K x 4, Q x 4, K x 4; step 1
 * 2K x 4, Q x 6, 2K x 6: 36K + 10Q. Each direction the slower rank's. */
static void test_cp_passes(void **state)
{
    (void)state;
    sb_gpu g = toy(); /* 500 GB/s, no launch cost */
    double f, b, Q = 1e6, bw = 500e9;
    sb_mt_cp_passes(&g, 1, Q, Q, 0, 2, &f, &b);
    assert_true(f == 0.0 && b == 0.0);
    sb_mt_cp_passes(&g, 2, Q, Q, 0, 2, &f, &b); /* MHA: K = Q */
    close_to(f, 22 * Q / bw);
    close_to(b, 49 * Q / bw);
    sb_mt_cp_passes(&g, 2, Q, Q / 4, 0, 2, &f, &b); /* GQA, 4 query heads a K/V head */
    close_to(f, (2 + 14) * Q / bw);
    close_to(b, fmax(42.0 / 4 + 7, 36.0 / 4 + 10) * Q / bw);
    /* cp 4, forward: the last rank meets both query chunks on every step */
    sb_mt_cp_passes(&g, 4, Q, Q, 0, 2, &f, &b);
    close_to(f, (8 + 2 + 4 * 6) * Q / bw);
    /* the log-sum-exp rows (fp32, merged in fp64): forward a clone 8 bytes a row, the
     * casts to fp64 and back 12 + 12 and, rank 1, step 1's merge 20; backward its second
     * half made contiguous 8 bytes a row of half */
    sb_mt_cp_passes(&g, 2, 0, 0, Q, 2, &f, &b);
    close_to(f, 52 * Q / bw);
    close_to(b, 4 * Q / bw);
    /* cp 3 by hand, rank by rank. Backward (MHA, K = Q): rank 0, the buffer 8K;
     * steps 0 and 1 its second query half against whole K/V chunks, concatenated
     * 2K x 4 each, dQ's half copied 2Q then added 3Q, dKV copied 8K then added 12K;
     * step 2 its own, 8K, dQ 2Q + 3Q, dKV 4K + 6K: 62K + 10Q. Rank 1: 8K; step 0 as
     * rank 0's (8K, 2Q, 8K); step 1 all its queries against a first K/V half, 4K,
     * dQ 2Q + 3Q, dKV added 6K; step 2 8K, 6Q, 12K: 54K + 13Q. Rank 2: 8K; steps 0
     * and 1 against first halves, 4K each, dQ copied 4Q then added 6Q, dKV copied
     * 4K then added 6K; step 2 8K, 6Q, 12K: 46K + 16Q. MHA: rank 0's 72Q; GQA 4:1
     * rank 2's 27.5Q */
    sb_mt_cp_passes(&g, 3, Q, Q, 0, 2, &f, &b);
    close_to(b, 72 * Q / bw);
    sb_mt_cp_passes(&g, 3, Q, Q / 4, 0, 2, &f, &b);
    close_to(b, 27.5 * Q / bw);
    /* forward with rows = Q = K: rank 2, 8K + 2Q + 3 x 6Q + 32 + 2 x 20 rows (both of
     * its merges whole): 100; rank 0, 10 + 6 + 3 + 3 + 32 + 2 x 10 = 74 */
    sb_mt_cp_passes(&g, 3, Q, Q, Q, 2, &f, &b);
    close_to(f, 100 * Q / bw);
    /* kernels: forward 8 a rank; backward rank 0's 2 + 3 + 5 */
    g.kernel_us = 4;
    sb_mt_cp_passes(&g, 2, 1e-30, 1e-30, 1e-30, 2, &f, &b);
    close_to(f, 8 * 4e-6);
    close_to(b, 10 * 4e-6);
    /* priced with the attention: a selective recomputation repeats the forward's, and
     * they count as memory-bound */
    g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    sb_mt_model m = gpt();
    m.layers = 4, m.global_batch = 8, m.kv_heads = 8;
    sb_mt_config c = cfg(2, 1, 1, 1, 2);
    c.cp = 2, c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1;
    sb_mt_result rn, rs;
    sb_mt_price(&m, &c, &g, &rn);
    c.recompute = SB_MT_RC_SELECTIVE;
    sb_mt_price(&m, &c, &g, &rs);
    double s = 1024, hl = 64 / 2 * 2, dh = 128;
    sb_mt_cp_passes(&g, 2, hl * s * dh, 2 * s * 8 * dh / 2, hl * s, 2, &f, &b);
    assert_true(f > 0 && b > 0);
    close_to(rs.compute_memory_s - rn.compute_memory_s, 4 * 4 * f);
    double fa = 2 * sb_gpu_attn_s(&g, hl, s, 1024, dh, 2, 0); /* the forward's kernels */
    close_to(rs.compute_attention_s - rn.compute_attention_s, 4 * 4 * fa);
    /* the K/V ring over a slow link: what the forward's kernels (not its merge passes,
     * which run before or after the ring) leave exposed, once more for the selective
     * recomputation of the core attention */
    g.intra_busbw = 5;
    c.recompute = SB_MT_RC_NONE;
    sb_mt_price(&m, &c, &g, &rn);
    c.recompute = SB_MT_RC_SELECTIVE;
    sb_mt_price(&m, &c, &g, &rs);
    double ring = sb_gpu_gather_s(&g, 2 * 2048 * 2 * 8 * dh / 2 * 2, 2, 0);
    assert_true(ring > fa + f);
    close_to(rs.tp_comm_s - rn.tp_comm_s, 4 * 4 * (ring - fa));
}

/* Activations per layer (Korthikanti et al. 2022, tensor by tensor): GPT-3 gives
 * s b h (10 + 24/t) without sequence parallelism and s b h 34/t with it (fused
 * attention: no s^2 term); a GQA SwiGLU model without dropout s b h (8 + (4 + 4 g
 * + 6 f/h)/t), g = kv_heads / heads. One stage, so the first stage's activations
 * are the layers' plus the head's fp32 logits and their gradient (T V / t 8). */
static double acts_per_layer(const sb_mt_model *m, const sb_mt_config *c, const sb_gpu *g)
{
    sb_mt_result r;
    sb_mt_price(m, c, g, &r);
    double T = (double)c->mbs * m->seq;
    return (r.mem_activations - T * (double)m->vocab / c->tp * 8.0) / (double)m->layers;
}

static void test_activations(void **state)
{
    (void)state;
    sb_gpu g = toy();
    sb_mt_model m = gpt();
    sb_mt_config c = cfg(2, 1, 768, 1, 2);
    c.recompute = SB_MT_RC_NONE, c.fused_attention = 1;
    double sbh = 2.0 * 2048 * 8192; /* s b h, micro-batch 2 */
    close_to(acts_per_layer(&m, &c, &g), sbh * (10.0 + 24.0 / 2));
    c.sp = 1;
    close_to(acts_per_layer(&m, &c, &g), sbh * 34.0 / 2);
    /* materialized: + 5 a s^2 b / t */
    c.sp = 0, c.fused_attention = 0;
    close_to(acts_per_layer(&m, &c, &g), sbh * (10.0 + 24.0 / 2) + 5.0 * 64 * 2048.0 * 2048 * 2 / 2);
    /* Llama 3 8B-like: 8 kv heads of 32, f = 3.5 h, SwiGLU, no dropout */
    sb_mt_model l = {.layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8, .ffn = 14336,
                     .vocab = 128256, .seq = 8192, .global_batch = 512, .swiglu = 1};
    sb_mt_config d = cfg(8, 1, 64, 1, 1);
    d.recompute = SB_MT_RC_NONE, d.fused_attention = 1;
    double lsbh = 8192.0 * 4096;
    close_to(acts_per_layer(&l, &d, &g), lsbh * (8.0 + (4.0 + 4.0 * 8 / 32 + 6.0 * 3.5) / 8));
    d.fused_attention = 0; /* no dropout: the softmax output alone, 2 a s^2 b / t */
    close_to(acts_per_layer(&l, &d, &g),
             lsbh * (8.0 + (4.0 + 4.0 * 8 / 32 + 6.0 * 3.5) / 8) + 2.0 * 32 * 8192.0 * 8192 / 8);
    /* fp8 (TE keeps a linear's input as an fp8 copy): GPT-3 with sequence parallelism,
     * norm inputs 4, QKV and MLP inputs 1 + 1, masks 2; Q 2, the attention output 2 and
     * its copy 1, K and V 4, fc1's output 2 and gelu's output 1 a 4h: 29 / t; recomputing
     * the core (selective) keeps the copy alone: 27 / t */
    sb_gpu g8 = g;
    g8.fp8 = 1;
    c.sp = 1, c.fused_attention = 1, c.precision = SB_PREC_FP8;
    close_to(acts_per_layer(&m, &c, &g8), sbh * 29.0 / 2);
    c.recompute = SB_MT_RC_SELECTIVE;
    close_to(acts_per_layer(&m, &c, &g8), sbh * 27.0 / 2);
    /* MoE (top 2): the router's input bf16 2, each routed copy's expert input 1 (TE's
     * GroupedLinear keeps fp8 copies as Linear does), fc1's output 2 and gelu's 1 a 4h
     * per copy: (4 + 1 + 2 + 2) + (2 + 3 + 4 + 2 x 3 x 4) = 42 / t; the experts' input
     * is the token dispatcher's TP all-gather of the routed copies (top-k x T tokens
     * on each rank): 2 x 1 whole */
    sb_mt_model moe = m;
    moe.experts = 8, moe.topk = 2;
    c.recompute = SB_MT_RC_NONE;
    close_to(acts_per_layer(&moe, &c, &g8), sbh * (42.0 / 2 + 2.0));
    /* without sequence parallelism the unsplit terms stay whole: 8 + 21 / t */
    c.sp = 0;
    close_to(acts_per_layer(&m, &c, &g8), sbh * (8.0 + 21.0 / 2));
    /* materialized attention (no dropout mask kept apart from the MLP's terms): the
     * attention output's copy alone, 8 + 19 / t, plus the scores' 5 a s / h / t */
    c.fused_attention = 0;
    close_to(acts_per_layer(&m, &c, &g8), sbh * (8.0 + 19.0 / 2) + 5.0 * 64 * 2048.0 * 2048 * 2 / 2);
    /* SwiGLU (Llama 3 8B-like, TP 8, SP): norm inputs 4, QKV and MLP inputs 1 + 1; Q 2,
     * the attention output 2 + 1, K and V 4 x 8 / 32, gate and up 4 and their product 1
     * a 3.5 h: (6 + 5 + 1 + 17.5) / 8 */
    d.fused_attention = 1, d.sp = 1, d.precision = SB_PREC_FP8;
    close_to(acts_per_layer(&l, &d, &g8), lsbh * (6.0 + 5.0 + 1.0 + 5.0 * 3.5) / 8);
}

static void test_price(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 312, g.sms = 108, g.hbm_gbs = 2039, g.hbm_eff = 0.9, g.kernel_us = 4;
    sb_mt_model m = gpt();
    sb_error err = {0};
    sb_mt_config c = cfg(8, 2, 32, 1, 4);
    assert_int_equal(sb_mt_check(&m, &c, 512, &err), 0);
    sb_mt_result r, r2;
    sb_mt_price(&m, &c, &g, &r);
    close_to(r.compute_s + r.tp_comm_s + r.dp_comm_s + r.pp_comm_s + r.bubble_s + r.optimizer_s,
             r.step_s);
    assert_true(r.compute_s > 0 && r.tp_comm_s > 0 && r.dp_comm_s > 0 && r.pp_comm_s > 0 &&
                r.bubble_s > 0 && r.optimizer_s > 0);
    /* interleaving 2 virtual stages halves the bubble (the same micro-batch time: the
     * chunks' boundaries move twice the pipeline sends, priced in pp_comm) */
    sb_mt_config c2 = cfg(8, 2, 32, 2, 4);
    sb_mt_price(&m, &c2, &g, &r2);
    double mb = r.compute_s / 12.0 + r.tp_comm_s / 12.0; /* M = 1536 / (32 x 4) = 12 */
    close_to(r.bubble_s, (2 - 1.0) / 1 * (mb + r.pp_comm_s / 12.0));
    close_to(r2.bubble_s, (2 - 1.0) / 2 * (mb + r2.pp_comm_s / 12.0));
    close_to(r2.pp_comm_s, 2.0 * r.pp_comm_s);
    /* bytes per parameter: fp16 mixed 2 + 2 + 16 (no distributed optimizer) */
    close_to(r.mem_grads, r.mem_weights);
    close_to(r.mem_optimizer, 8.0 * r.mem_weights);
    sb_mt_config c3 = c;
    c3.dist_opt = 1;
    sb_mt_price(&m, &c3, &g, &r2);
    close_to(r2.mem_optimizer, r.mem_optimizer / 32.0);
    /* model FLOPs: SC21's 72 B s l h^2 (1 + s/6h + V/12lh) for a GPT */
    double B = 1536, s = 2048, l = 48, h = 8192, V = 51200;
    close_to(r.model_flops, 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)));
    close_to(r.mfu, r.model_flops / r.step_s / 512 / 1e12 / 312);
}

/* TP overlap (--tp-comm-overlap; search/megatron_tpov.c) priced by hand on one
 * stage of GPT at TP 8 with sequence parallelism, micro-batches of 2, no
 * recomputation: the
 * row-parallel forwards (proj, fc2) on the SMs their reduce-scatter leaves
 * (24, 16), the last of 4 chunks' reduce-scatter exposed and what the others take
 * beyond the next chunk's GEMM, 3 more launches; the
 * backward's bulk overlaps (qkv dgrad 4, wgrad 24, fc1 dgrad 2, wgrad 4 SMs)
 * slow their GEMM by the collective's share of SMs while it runs; the ring
 * exchanges expose what a chunk's send takes beyond its GEMM; the head's
 * all-gather stays exposed. At TP 1 the overlap changes nothing. */
static double gemm_left(const sb_gpu *g, double n, const sb_mt_gemm *m)
{
    sb_gpu r = *g;
    r.sms = g->sms - n, r.peak_tflops = g->peak_tflops * r.sms / g->sms;
    return sb_gpu_gemm_s(&r, 1, m->M, m->N, m->K, 2) - sb_gpu_gemm_s(g, 1, m->M, m->N, m->K, 2);
}

/* a pipelined reduce-scatter's exposed time: the last of 4 chunks', and what each
 * other chunk's takes beyond the next chunk's GEMM (on the SMs left) */
static double pipe_exposed(const sb_gpu *g, double n, const sb_mt_gemm *m, double tok, double t)
{
    double rs = sb_gpu_gather_s(g, tok / 4, t, 0);
    double Gn = gemm_left(g, n, m) + sb_gpu_gemm_s(g, 1, m->M, m->N, m->K, 2);
    return rs + 3 * fmax(0.0, rs - Gn / 4);
}

static void test_tp_overlap(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    g.intra_busbw = 370, g.intra_lat_us = 10;
    sb_mt_model m = gpt();
    sb_mt_config c = cfg(8, 1, 1, 1, 2); /* 2 sequences: every bulk GEMM outlasts its collective */
    c.recompute = SB_MT_RC_NONE, c.sp = 1, c.precision = SB_PREC_BF16, c.fused_attention = 1;
    sb_mt_result off, on;
    sb_mt_price(&m, &c, &g, &off);
    c.tp_overlap = 1;
    sb_mt_price(&m, &c, &g, &on);
    sb_mt_gemm gm[SB_MT_LAYER_GEMMS];
    sb_mt_layer_gemms(&m, &c, gm);
    const double M = 768, L = 48, tok = 4096.0 * 8192 * 2, t = 8;
    double coll = sb_gpu_gather_s(&g, tok, t, 0), extra = 3 * 2 * 4e-6, exposed = 0;
    extra += gemm_left(&g, 24, &gm[3]) + gemm_left(&g, 16, &gm[9]); /* proj, fc2 fprop */
    exposed += pipe_exposed(&g, 24, &gm[3], tok, t) + pipe_exposed(&g, 16, &gm[9], tok, t);
    const int bulk[4] = {1, 2, 7, 8};
    const double bulk_sms[4] = {4, 24, 2, 4};
    for (int k = 0; k < 4; k++) {
        double G = sb_gpu_gemm_s(&g, 1, gm[bulk[k]].M, gm[bulk[k]].N, gm[bulk[k]].K, 2);
        assert_true(coll < G * 132 / (132 - bulk_sms[k])); /* the collective shorter here */
        extra += coll * bulk_sms[k] / 132;
    }
    const int ring[4] = {0, 4, 6, 10}; /* qkv, fc1 fprop; proj, fc2 dgrad */
    for (int k = 0; k < 4; k++) {
        double G = sb_gpu_gemm_s(&g, 1, gm[ring[k]].M, gm[ring[k]].N, gm[ring[k]].K, 2);
        exposed += (t - 1) * fmax(0.0, sb_gpu_p2p_s(&g, tok / t, 0) - G / t);
    }
    close_to(on.compute_s - off.compute_s, M * L * extra);
    close_to(on.tp_comm_s, M * (L * exposed + sb_gpu_gather_s(&g, tok, t, 0)));
    assert_true(on.compute_s > off.compute_s && on.tp_comm_s < off.tp_comm_s);
    /* full recomputation repeats the forward's price: telling the forward's terms
     * from the backward's (the recomputed forward's collectives are exposed again) */
    double fwd_extra = 3 * 4e-6 + gemm_left(&g, 24, &gm[3]) + 3 * 4e-6 + gemm_left(&g, 16, &gm[9]);
    double fwd_exposed = pipe_exposed(&g, 24, &gm[3], tok, t) + pipe_exposed(&g, 16, &gm[9], tok, t);
    for (int k = 0; k <= 6; k += 6) { /* qkv and fc1 fprop (0 and 6): ring exchanges */
        double G = sb_gpu_gemm_s(&g, 1, gm[k].M, gm[k].N, gm[k].K, 2);
        fwd_exposed += (t - 1) * fmax(0.0, sb_gpu_p2p_s(&g, tok / t, 0) - G / t);
    }
    sb_mt_result off_full, on_full;
    c.recompute = SB_MT_RC_FULL, c.tp_overlap = 0;
    sb_mt_price(&m, &c, &g, &off_full);
    c.tp_overlap = 1;
    sb_mt_price(&m, &c, &g, &on_full);
    close_to(on_full.compute_s - off_full.compute_s, M * L * (extra + fwd_extra));
    close_to(on_full.tp_comm_s, M * (L * (exposed + fwd_exposed) + sb_gpu_gather_s(&g, tok, t, 0)));
    /* the SMs kept for a collective scale with the machine's: a GPU of 20 SMs keeps 20/132
     * of NeMo's counts, the price stays finite and positive */
    sb_gpu small = g;
    small.sms = 20;
    c.recompute = SB_MT_RC_NONE;
    sb_mt_price(&m, &c, &small, &on);
    c.tp_overlap = 0;
    sb_mt_price(&m, &c, &small, &off);
    assert_true(isfinite(on.compute_s) && on.compute_s > off.compute_s);
    /* refused: the overlap without sequence parallelism (Megatron-LM's rule), and TP
     * across nodes (userbuffers run over NVLink) */
    sb_error err = {0};
    c.tp_overlap = 1, c.sp = 0;
    assert_int_equal(sb_mt_check(&m, &c, 8, &err), -1);
    assert_non_null(strstr(err.msg, "needs sequence parallelism"));
    c.sp = 1;
    assert_int_equal(sb_mt_check_gpu(&c, &g, &err), 0);
    sb_gpu four = g;
    four.node_devices = 4;
    assert_int_equal(sb_mt_check_gpu(&c, &four, &err), -1);
    assert_non_null(strstr(err.msg, "TP inside a node"));
    /* TP 1: nothing to overlap */
    sb_mt_config c1 = cfg(1, 1, 8, 1, 1);
    c1.recompute = SB_MT_RC_NONE, c1.precision = SB_PREC_BF16, c1.fused_attention = 1;
    sb_mt_price(&m, &c1, &g, &off);
    c1.tp_overlap = 1;
    sb_mt_price(&m, &c1, &g, &on);
    close_to(on.step_s, off.step_s);
}

/* fp8 as Transformer Engine runs it under sequence parallelism (TP 8, GPT): the
 * all-gathers move fp8 (the fused norms' outputs forward, proj's and fc2's output
 * gradients backward), the reduce-scatters bf16; proj's and fc2's inputs are cast (3
 * bytes) and transposed in the backward (2), their output gradients cast on their T/t
 * rows (3), the gathered fp8 copy transposed (2), the bias gradient summed over the
 * rows (2); an MoE layer's expert MLP keeps its cast-transposes and bf16 gathers; with TP overlap
 * every all-gather userbuffer is fp8 (qkv and fc1 fprop, proj and fc2 dgrad ring
 * exchanges; the bulk all-gathers of qkv and fc1 dgrad), and fp8's settings put proj
 * and fc2 fprop on ring exchanges (their reduce-scatters bf16). Priced against the
 * same machine with its fp8 flag off (no casts, 2-byte gathers). */
static void test_fp8_te(void **state)
{
    (void)state;
    sb_gpu g8 = toy();
    g8.peak_tflops = 1979, g8.attn_peak_tflops = 989, g8.gemm_eff = 0.7, g8.attn_gemm_eff = 0.8;
    g8.sms = 132, g8.hbm_gbs = 3350, g8.hbm_eff = 0.9, g8.kernel_us = 4, g8.fp8 = 1;
    g8.intra_busbw = 370, g8.intra_lat_us = 10;
    sb_gpu g0 = g8;
    g0.fp8 = 0;
    sb_mt_model m = gpt();
    sb_mt_config c = cfg(8, 1, 1, 1, 2);
    c.recompute = SB_MT_RC_NONE, c.sp = 1, c.precision = SB_PREC_FP8, c.fused_attention = 1;
    sb_mt_result r8, r0;
    sb_mt_price(&m, &c, &g8, &r8);
    sb_mt_price(&m, &c, &g0, &r0);
    const double M = 768, L = 48, T = 4096, h = 8192, tok = T * h * 2, t = 8;
    double ag = sb_gpu_gather_s(&g8, tok, t, 0), ag8 = sb_gpu_gather_s(&g8, tok / 2, t, 0);
    assert_true(ag8 < ag);
    close_to(r0.tp_comm_s - r8.tp_comm_s, M * L * 4 * (ag - ag8));
    sb_mt_gemm gm[SB_MT_LAYER_GEMMS];
    sb_mt_layer_gemms(&m, &c, gm);
    double mem = -2 * (T / t) * h / (3350e9 * 0.9); /* the fused norms' 1-byte writes */
    for (int i = 0; i < SB_MT_LAYER_GEMMS; i += 3) {
        double in = gm[i].M * gm[i].K, go = gm[i].M * gm[i].N;
        if (i == 3 || i == 9) /* proj, fc2 */
            mem += sb_gpu_mem_s(&g8, in * 3) + sb_gpu_fp8_transpose_s(&g8, in) + sb_gpu_mem_s(&g8, go / t * 3) +
                   sb_gpu_fp8_transpose_s(&g8, go) + sb_gpu_mem_s(&g8, go / t * 2);
        else /* QKV, fc1: the fused norm's copy transposed; the output gradient cast-transposed */
            mem += sb_gpu_fp8_transpose_s(&g8, in) + sb_gpu_cast_s(&g8, go);
    }
    close_to(r8.compute_memory_s - r0.compute_memory_s, M * L * mem);
    /* MoE (8 experts, top 2): QKV's norm fused, proj as above; the experts' fc1 and fc2
     * cast-transposed both ways; the gathers in fp8 only QKV's input and proj's output
     * gradient */
    sb_mt_model moe = m;
    moe.experts = 8, moe.topk = 2;
    sb_mt_result q8, q0;
    c.tp_overlap = 0;
    sb_mt_price(&moe, &c, &g8, &q8);
    sb_mt_price(&moe, &c, &g0, &q0);
    close_to(q0.tp_comm_s - q8.tp_comm_s, M * L * 2 * (ag - ag8));
    sb_mt_gemm qm[SB_MT_LAYER_GEMMS];
    sb_mt_layer_gemms(&moe, &c, qm);
    double qmem = -(T / t) * h / (3350e9 * 0.9);
    for (int i = 0; i < SB_MT_LAYER_GEMMS; i += 3) {
        double in = qm[i].M * qm[i].K, go = qm[i].M * qm[i].N;
        if (i == 0)
            qmem += sb_gpu_fp8_transpose_s(&g8, in) + sb_gpu_cast_s(&g8, go);
        else if (i == 3)
            qmem += sb_gpu_mem_s(&g8, in * 3) + sb_gpu_fp8_transpose_s(&g8, in) + sb_gpu_mem_s(&g8, go / t * 3) +
                    sb_gpu_fp8_transpose_s(&g8, go) + sb_gpu_mem_s(&g8, go / t * 2);
        else
            qmem += sb_gpu_cast_s(&g8, in) + sb_gpu_cast_s(&g8, go);
    }
    close_to(q8.compute_memory_s - q0.compute_memory_s, M * L * qmem);
    /* TP overlap: the ring exchanges' exposed sends (all-gathers at 1 byte), the bulk
     * collectives' SMs taken from the GEMMs (all-gathers at 1 byte) */
    sb_mt_result on8;
    c.tp_overlap = 1;
    sb_mt_price(&m, &c, &g8, &on8);
    double exposed = 0, extra = 0;
    const int ring[6] = {0, 4, 6, 10, 3, 9}; /* the first four all-gathers */
    for (int k = 0; k < 6; k++) {
        double G = sb_gpu_gemm_s(&g8, 1, gm[ring[k]].M, gm[ring[k]].N, gm[ring[k]].K, 2);
        exposed += (t - 1) * fmax(0.0, sb_gpu_p2p_s(&g8, (k < 4 ? tok / 2 : tok) / t, 0) - G / t);
    }
    const int bulk[4] = {1, 2, 7, 8};
    const double bulk_sms[4] = {4, 24, 2, 4};
    for (int k = 0; k < 4; k++) {
        double coll = k % 2 ? ag : ag8, G = sb_gpu_gemm_s(&g8, 1, gm[bulk[k]].M, gm[bulk[k]].N, gm[bulk[k]].K, 2);
        /* the GEMM on the SMs left, or the collective where it is the longer */
        extra += coll < G * 132 / (132 - bulk_sms[k]) ? coll * bulk_sms[k] / 132 : coll - G;
    }
    close_to(on8.tp_comm_s, M * (L * exposed + ag)); /* + the head's, bf16 */
    close_to(on8.compute_s - r8.compute_s, M * L * extra);
}

/* The distributed optimizer's data-parallel traffic with --dp-overlap (Megatron's
 * --overlap-grad-reduce and --overlap-param-gather): the gradients' reduce-scatter
 * hides behind the last micro-batch's backward, the parameters' all-gather behind
 * the next step's first forward, each at least its first or last 40 M-parameter
 * bucket. GPT at TP 1 over 64 GPUs (8 nodes): the layers' forward and backward of
 * a micro-batch are the stage's chunk less the embedding and the head. */
static void test_dp_overlap(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    g.intra_busbw = 370, g.inter_busbw = 42.5, g.inter_lat_us = 20;
    sb_mt_model m = gpt();
    sb_mt_config c = cfg(1, 1, 64, 1, 1);
    c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1, c.dist_opt = 1;
    sb_mt_result off, on;
    sb_mt_price(&m, &c, &g, &off);
    c.dp_overlap = 1;
    sb_mt_price(&m, &c, &g, &on);
    const double params = off.mem_weights / 2.0; /* bf16 weights */
    const double rs = sb_gpu_gather_s(&g, params * 4.0, 64, 1), ag = sb_gpu_gather_s(&g, params * 2.0, 64, 1);
    close_to(off.dp_comm_s, rs + ag);
    const double T = 2048, h = 8192, V = 51200;
    int first, n;
    double f, b;
    sb_mt_chunk_of(&m, &c, &g, 0, 0, &first, &n, &f, &b);
    assert_int_equal(n, 48);
    /* the chunk's ends (test_head_passes): the embedding's gather, its dense gradient
     * into the fp32 main gradient, the cross-entropy's passes (38 bytes a logit forward,
     * 14 backward: Megatron-LM's, where one read and one fp32 write each way were priced
     * until 2026-12-07) */
    f -= sb_gpu_mem_s(&g, T * h * 4.0) + sb_gpu_gemm_s(&g, 1, T, V, h, 2) + sb_gpu_mem_s(&g, T * V * 38.0);
    b -= sb_gpu_mem_s(&g, T * h * 4.0 + V * h * 12.0) + sb_gpu_gemm_s(&g, 1, T, h, V, 2) +
         sb_gpu_gemm_s(&g, 1, h, V, T, 2) + sb_gpu_mem_s(&g, T * V * 14.0);
    const double share = 4e7 / params;
    close_to(on.dp_comm_s, fmax(rs - b, rs * share) + fmax(ag - f, ag * share));
    assert_true(rs - b > rs * share && ag - f > ag * share); /* both hides partial here */
    /* --overlap-param-gather off: the gradients' reduction hidden, the gather exposed; on:
     * as the default (Megatron's recipes set both) */
    sb_mt_result pg;
    c.param_gather = SB_MT_PG_OFF;
    sb_mt_price(&m, &c, &g, &pg);
    close_to(pg.dp_comm_s, fmax(rs - b, rs * share) + ag);
    c.param_gather = SB_MT_PG_ON;
    sb_mt_price(&m, &c, &g, &pg);
    close_to(pg.dp_comm_s, on.dp_comm_s);
}

static void refused(const sb_mt_config *c, int P, const char *text)
{
    sb_mt_model m = gpt();
    sb_error err = {0};
    assert_int_equal(sb_mt_check(&m, c, P, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, text))
        fail_msg("'%s' does not say '%s'", err.msg, text);
}

/* Mixture of experts with expert parallelism as Megatron-Core runs it (alltoall token
 * dispatcher, expert TP = TP): the dense parts do not change with EP; the experts'
 * gradients are reduced, and the distributed optimizer shards their state, over the
 * expert-data-parallel group of DP x CP / EP ranks (none at EP = DP x CP), so the
 * optimizer's bytes a device do not change with EP either; the dispatch and combine
 * all-to-alls carry the routed copies of a rank's T/t tokens (sequence parallel), the
 * EP ranks in the node over NVLink beside the rest over the network, and a full
 * recomputation repeats the forward's two; the expert MLP's TP all-gather and
 * reduce-scatter carry the top-k routed copies. */
static void test_moe_ep(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    sb_mt_model m = {.layers = 4, .hidden = 4096, .heads = 32, .kv_heads = 8, .ffn = 14336,
                     .vocab = 32000, .seq = 4096, .global_batch = 64, .experts = 8, .topk = 2,
                     .swiglu = 1, .untie = 1};
    const double t = 2, T = 4096, h = 4096, L = 4, M = 8, q = 8;
    sb_mt_result r[4], rf[4];
    const int eps[4] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        sb_mt_config c = cfg(2, 1, 8, 1, 1);
        c.ep = eps[k], c.sp = 1, c.dist_opt = 1, c.dp_overlap = 0;
        c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1;
        sb_error err = {0};
        if (sb_mt_check(&m, &c, 16, &err))
            fail_msg("%s", err.msg);
        sb_mt_price(&m, &c, &g, &r[k]);
        c.recompute = SB_MT_RC_FULL;
        sb_mt_price(&m, &c, &g, &rf[k]);
        close_to(r[k].compute_s, r[0].compute_s);
        close_to(r[k].mem_activations, r[0].mem_activations);
        close_to(r[k].mem_optimizer, r[0].mem_optimizer); /* E/EP experts over q/EP ranks */
        if (eps[k] == 8) { /* the experts' gradients stay on their rank: the dense ones alone */
            sb_mt_layer_cost lc;
            c.recompute = SB_MT_RC_NONE;
            sb_mt_layer(&m, &c, &g, &lc);
            double dense = L * (lc.params - lc.expert_params) + 2.0 * 32000 * h / t;
            close_to(r[k].dp_comm_s, sb_gpu_gather_s(&g, dense * 4, q, 1) + sb_gpu_gather_s(&g, dense * 2, q, 1));
        }
        /* the all-to-alls: 4 ranks of the EP group in a node (TP 2 on 8 GPUs) */
        double peer = T / t * 2 * h * 2 / eps[k], one = 0;
        if (eps[k] > 1)
            one = eps[k] <= 4 ? sb_gpu_p2p_s(&g, peer * (eps[k] - 1), 0)
                              : fmax(sb_gpu_p2p_s(&g, peer * 3, 0), sb_gpu_p2p_s(&g, peer * (eps[k] - 4), 1));
        close_to(r[k].tp_comm_s - r[0].tp_comm_s, M * L * 4 * one);
        close_to(rf[k].tp_comm_s - rf[0].tp_comm_s, M * L * 6 * one);
    }
    /* TP at EP 1: attention's reduce-scatter and all-gather of T x h, the experts' of
     * 2 T x h, each way; the head's two all-reduces */
    double tok = T * h * 2;
    double layer = 2 * sb_gpu_gather_s(&g, tok, t, 0) + 2 * sb_gpu_gather_s(&g, 2 * tok, t, 0);
    close_to(r[0].tp_comm_s, M * (L * 2 * layer + 2 * sb_gpu_allreduce_s(&g, tok, t, 0)));
    /* the router (Tn x E x h, a GEMM; two in the backward) and the permutation into the
     * routed copies and back (Tn x h read, k of them written, and the reverse), beside
     * the dense model's layer: the expert MLP's GEMMs and activation over k T tokens */
    {
        sb_mt_config c1 = cfg(2, 1, 8, 1, 1);
        c1.ep = 1, c1.sp = 1, c1.recompute = SB_MT_RC_NONE, c1.precision = SB_PREC_BF16;
        c1.fused_attention = 1;
        sb_mt_model d = m;
        d.experts = 0, d.topk = 0;
        sb_mt_layer_cost lm, ld;
        sb_mt_layer(&m, &c1, &g, &lm);
        sb_mt_layer(&d, &c1, &g, &ld);
        sb_mt_gemm gm[SB_MT_LAYER_GEMMS];
        sb_mt_layer_gemms(&m, &c1, gm);
        double Tn = T / t, fwd = 0;
        for (int i = 0; i < SB_MT_LAYER_GEMMS; i += 3)
            fwd += sb_gpu_gemm_s(&g, 1, gm[i].M, gm[i].N, gm[i].K, 2);
        close_to(lm.gemm_fwd_s, fwd + sb_gpu_gemm_s(&g, 1, Tn, 8, h, 2));
        double mem_m = lm.fwd_s - lm.gemm_fwd_s - lm.attn_fwd_s;
        double mem_d = ld.fwd_s - ld.gemm_fwd_s - ld.attn_fwd_s;
        double ff = 14336 / t * T;
        close_to(mem_m - mem_d, sb_gpu_mem_s(&g, ff * 2 * 3 * 2) - sb_gpu_mem_s(&g, ff * 3 * 2) +
                                    2 * sb_gpu_mem_s(&g, Tn * h * 2 * 3));
    }
    /* Megatron-LM asserts sequence parallelism for MoE with TP */
    sb_mt_config c = cfg(2, 1, 8, 1, 1);
    c.ep = 2;
    sb_error err = {0};
    assert_true(sb_mt_check(&m, &c, 16, &err) != 0 && err.code == SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "needs sequence parallelism"));
    c.sp = 1, c.ep = 16; /* not dividing the experts */
    assert_true(sb_mt_check(&m, &c, 16, &err) != 0 && err.code == SB_EXIT_INPUT);
    c.dp = 2, c.cp = 4, c.ep = 8; /* EP inside DP x CP = 8 */
    assert_int_equal(sb_mt_check(&m, &c, 16, &err), 0);
    c.cp = 1, c.dp = 4, c.pp = 2; /* DP x CP = 4 */
    assert_true(sb_mt_check(&m, &c, 16, &err) != 0 && err.code == SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "DP x CP = 4"));
}

static void test_refusals(void **state)
{
    (void)state;
    sb_mt_config c = cfg(8, 2, 32, 1, 4);
    refused(&c, 256, "not the 256 devices");
    c = cfg(3, 1, 1, 1, 4);
    refused(&c, 3, "heads");
    c = cfg(8, 2, 32, 1, 4);
    c.cp = 3;
    c.dp = 32;
    refused(&c, 8 * 2 * 32 * 3, "--cp 3");
    c = cfg(8, 2, 32, 1, 4);
    c.ep = 2;
    refused(&c, 512, "no experts");
    c = cfg(1, 64, 8, 1, 4); /* 64 stages of 48 layers */
    refused(&c, 64 * 8, "more stages than");
    c = cfg(8, 5, 32, 2, 4); /* interleaved chunks of 48 / 10 layers */
    refused(&c, 8 * 5 * 32, "layers");
    c = cfg(8, 2, 32, 1, 5);
    refused(&c, 512, "micro-batches");
    c = cfg(8, 2, 32, 5, 4); /* 48 / (2 x 5) */
    refused(&c, 512, "layers");
    c = cfg(1, 2, 256, 1, 2);
    c.sp = 1;
    refused(&c, 512, "sequence parallelism");
    c = cfg(8, 2, 32, 1, 4); /* the parameter gather's overlap: Megatron asserts both */
    c.param_gather = SB_MT_PG_ON, c.dp_overlap = 1, c.dist_opt = 0;
    refused(&c, 512, "--overlap-param-gather on needs the distributed optimizer");
    c.dist_opt = 1, c.dp_overlap = 0;
    refused(&c, 512, "--dp-overlap on");
    c.dp_overlap = 1;
    sb_error err = {0};
    sb_mt_model m = gpt();
    assert_int_equal(sb_mt_check(&m, &c, 512, &err), 0);
}

/* Megatron-Core's uneven stages (--decoder-first/last-pipeline-num-layers): the
 * ends as given, the rest even over the other stages; with VPP each stage's
 * layers in VPP equal chunks, the virtual stages k PP + s covering every layer
 * once, in order; and what Megatron-LM refuses */
static void test_stage_layouts(void **state)
{
    (void)state;
    sb_mt_model m = gpt();
    m.layers = 126; /* Llama 3.1 405B on 16 stages, 7 + 14 x 8 + 7 (Meta's) */
    sb_mt_config c = cfg(8, 16, 8, 1, 1);
    c.first_layers = c.last_layers = 7;
    sb_error err = {0};
    if (sb_mt_check(&m, &c, 8 * 16 * 8, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sb_mt_stage_count(&m, &c, 0), 7);
    assert_int_equal(sb_mt_stage_count(&m, &c, 5), 8);
    assert_int_equal(sb_mt_stage_count(&m, &c, 15), 7);
    c.last_layers = 0; /* the last a middle one: 126 - 7 = 119 = 15 x 7.93: refused */
    assert_int_equal(sb_mt_check(&m, &c, 8 * 16 * 8, &err), -1);
    assert_non_null(strstr(err.msg, "do not split evenly"));
    /* 80 layers on 4 ranks x 2 chunks, ends of 18: chunks of 9, 11, 11, 9 */
    m.layers = 80;
    c = cfg(8, 4, 8, 2, 1);
    c.first_layers = c.last_layers = 18;
    if (sb_mt_check(&m, &c, 8 * 4 * 8, &err))
        fail_msg("%s", err.msg);
    int next = 1;
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < 4; s++) {
            int n, first;
            sb_mt_chunk_layers(&m, &c, s, k, &n, &first);
            assert_int_equal(n, s == 0 || s == 3 ? 9 : 11);
            assert_int_equal(first, next);
            next += n;
        }
    assert_int_equal(next, 81);
    /* refusals, each naming what is wrong */
    m = gpt(); /* 48 layers */
    c = cfg(8, 5, 8, 1, 1);
    assert_int_equal(sb_mt_check(&m, &c, 320, &err), -1);
    assert_non_null(strstr(err.msg, "--pp 5 does not divide the 48 layers"));
    c.first_layers = 8; /* 40 over 4 stages: fine */
    assert_int_equal(sb_mt_check(&m, &c, 320, &err), 0);
    c.last_layers = 9; /* 31 over 3: not */
    refused(&c, 320, "do not split evenly");
    c = cfg(8, 2, 8, 1, 1);
    c.first_layers = 20, c.last_layers = 20;
    refused(&c, 128, "is not the 48 layers");
    c = cfg(8, 4, 8, 2, 1);
    c.first_layers = 7, c.last_layers = 9; /* 32 over 2 stages of 16 */
    refused(&c, 256, "--vpp 2 does not divide stage 0's 7");
    c = cfg(8, 1, 8, 1, 1);
    c.first_layers = 8;
    refused(&c, 64, "need --pp of at least 2");
}

/* The grid balances the ends: a vocabulary large against a layer makes the last
 * stage (the output layer and the loss) the slowest of even stages; the grid, the
 * degrees fixed, finds uneven stages faster than the even ones, with fewer layers
 * on the last stage than on the middle ones; its answer is what sb_mt_price gives
 * that configuration; and a middle stage can be the fullest (stage 1: the most
 * in flight of stages of many layers beside two short ends) */
static void test_balanced_ends(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    sb_mt_model m = gpt();
    m.layers = 32, m.hidden = 4096, m.heads = 32, m.kv_heads = 8, m.ffn = 14336;
    m.vocab = 256000, m.seq = 4096, m.global_batch = 64, m.swiglu = 1, m.untie = 1;
    sb_mt_config c = cfg(2, 4, 4, 1, 1);
    c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1, c.sp = 1;
    c.dist_opt = 1, c.dp_overlap = 1;
    sb_mt_result even, rb, again;
    sb_mt_price(&m, &c, &g, &even);
    sb_mt_config best;
    sb_error err = {0};
    long n = sb_mt_search(&m, &c, 32, &g, 1e30, &best, &rb, &err);
    if (n <= 1)
        fail_msg("%ld priced: %s", n, err.msg);
    assert_true(rb.step_s < 0.99 * even.step_s);
    assert_true(best.last_layers > 0 && best.last_layers < sb_mt_stage_count(&m, &best, 1));
    sb_mt_price(&m, &best, &g, &again);
    close_to(again.step_s, rb.step_s);
    /* a vocabulary of 2 M against 64 layers (the head some 60 layers' worth) at PP 3:
     * the grid's best is the least over every valid layout given by hand */
    sb_mt_model big = m;
    big.layers = 64, big.vocab = 2000000, big.global_batch = 96;
    sb_mt_config c3 = cfg(2, 3, 4, 1, 1);
    c3.recompute = SB_MT_RC_NONE, c3.precision = SB_PREC_BF16, c3.fused_attention = 1;
    c3.sp = 1, c3.dist_opt = 1, c3.dp_overlap = 1;
    if (sb_mt_search(&big, &c3, 24, &g, 1e30, &best, &rb, &err) <= 0)
        fail_msg("%s", err.msg);
    double least = INFINITY;
    for (int F = 1; F < 64; F++)
        for (int Lst = 1; F + Lst < 64; Lst++) {
            c3.first_layers = F, c3.last_layers = Lst;
            if (sb_mt_check(&big, &c3, 24, &err))
                continue;
            sb_mt_price(&big, &c3, &g, &again);
            least = fmin(least, again.step_s);
        }
    close_to(rb.step_s, least);
    /* 2 + 14 + 14 + 2: stage 1 holds 14 layers x 3 in flight, stage 0 2 x 4 */
    c.first_layers = c.last_layers = 2;
    m.vocab = 32000;
    if (sb_mt_check(&m, &c, 32, &err))
        fail_msg("%s", err.msg);
    sb_mt_result r;
    sb_mt_price(&m, &c, &g, &r);
    double mx = 0.0;
    int at = -1;
    for (int st = 0; st < 4; st++) {
        sb_mt_stage o;
        sb_mt_stage_of(&m, &c, &g, st, &o);
        if (o.mem_total > mx)
            mx = o.mem_total, at = st;
    }
    assert_int_equal(at, 1);
    close_to(r.mem_total, mx);
}

/* Today's attention and MoE variants as Megatron-Core prices them: a head_dim that
 * is not hidden / heads (--kv-channels) widens Q, K, V and the projection's input;
 * given as hidden / heads it prices exactly as not given; QK norms (--qk-layernorm)
 * add their weights and a norm pass over q and k each way; QKV biases (--add-qkv-bias)
 * their weights alone (their add and gradient ride in the GEMMs' epilogues); an
 * expert's MLP width (--moe-ffn-hidden-size) sizes the expert GEMMs */
static void test_layer_variants(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    sb_mt_model m = gpt();
    m.layers = 4, m.global_batch = 8, m.swiglu = 1, m.kv_heads = 8;
    sb_mt_config c = cfg(2, 1, 1, 1, 1); /* 8 micro-batches */
    c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1, c.sp = 1;
    sb_mt_result base, r;
    sb_mt_price(&m, &c, &g, &base);
    sb_mt_model v = m;
    v.head_dim = m.hidden / m.heads; /* 128, as not given */
    sb_mt_price(&v, &c, &g, &r);
    assert_true(r.step_s == base.step_s && r.mem_total == base.mem_total);
    /* head_dim 256: Q 64 x 256 wide, K and V 8 x 256 */
    v.head_dim = 256;
    sb_mt_gemm gm[SB_MT_LAYER_GEMMS];
    sb_mt_layer_gemms(&v, &c, gm);
    close_to(gm[0].N, (64.0 * 256 + 2.0 * 8 * 256) / 2);
    close_to(gm[3].K, 64.0 * 256 / 2);
    sb_mt_price(&v, &c, &g, &r);
    const double h = 8192, qw = 64.0 * 256, kvh = 8.0 * 256, B = 2.0;
    /* weights: the layers' QKV and projection grow, 2 bytes a parameter at TP 2 */
    close_to(r.mem_weights - base.mem_weights,
             4.0 * B * (h * (qw + 2 * kvh) + qw * h - (h * (h + 2 * 1024.0) + h * h)) / 2);
    /* a fused kernel takes heads of at most 256 dims, a multiple of 8 */
    v.head_dim = 512;
    sb_error ferr = {0};
    assert_int_equal(sb_mt_check(&v, &c, 2, &ferr), -1);
    assert_non_null(strstr(ferr.msg, "--attention materialized"));
    sb_mt_config cm = c;
    cm.fused_attention = 0;
    assert_int_equal(sb_mt_check(&v, &cm, 2, &ferr), 0);
    v.head_dim = 100;
    assert_int_equal(sb_mt_check(&v, &c, 2, &ferr), -1);
    /* QK norms: 2 x head_dim weights a layer; a pass over q and k, read and written (2
     * words), backward 4 words, each micro-batch and layer */
    v = m, v.qk_norm = 1;
    sb_mt_price(&v, &c, &g, &r);
    close_to(r.mem_weights - base.mem_weights, 4.0 * B * 2 * 128);
    const double T = 2048, X = T * (h + 1024.0) / 2; /* q and k elements on a rank */
    close_to(r.compute_s - base.compute_s,
             8.0 * 4 * (sb_gpu_mem_s(&g, X * 2 * B) + sb_gpu_mem_s(&g, X * 4 * B)));
    /* QKV biases: their weights, no time */
    v = m, v.qkv_bias = 1;
    sb_mt_price(&v, &c, &g, &r);
    close_to(r.mem_weights - base.mem_weights, 4.0 * B * (h + 2 * 1024.0) / 2);
    assert_true(r.compute_s == base.compute_s);
    /* an expert's width: the MLP GEMMs of 8 experts, top-2, 2048 wide (not ff) */
    v = m, v.experts = 8, v.topk = 2, v.moe_ffn = 2048;
    sb_mt_layer_gemms(&v, &c, gm);
    close_to(gm[6].N, 2.0 * 2048 / 2);
    close_to(gm[9].K, 2048.0 / 2);
    close_to(gm[6].M, 2.0 * T);
    v.moe_ffn = 2004; /* TP 2 divides it; TP 8 does not */
    sb_error err = {0};
    assert_int_equal(sb_mt_check(&v, &c, 2, &err), 0);
    sb_mt_config c8 = cfg(8, 1, 1, 1, 1);
    c8.sp = 1;
    assert_int_equal(sb_mt_check(&v, &c8, 8, &err), -1);
    assert_non_null(strstr(err.msg, "ff 2004"));
}

static void test_search_superset(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 312, g.sms = 108, g.hbm_gbs = 2039, g.hbm_eff = 0.9, g.kernel_us = 4;
    g.mem_bytes = 80e9;
    sb_mt_model m = gpt();
    sb_mt_config c = cfg(8, 2, 32, 1, 4), fixed = c, best;
    sb_mt_result r, rb;
    sb_mt_price(&m, &c, &g, &r);
    fixed.tp = fixed.pp = fixed.dp = fixed.cp = fixed.ep = fixed.vpp = fixed.mbs = 0;
    fixed.recompute = fixed.sp = fixed.dist_opt = -1;
    sb_error err = {0};
    long n = sb_mt_search(&m, &fixed, 512, &g, 1e30, &best, &rb, &err);
    assert_true(n > 100);
    assert_true(rb.step_s <= r.step_s);
    /* every degree and the stages' layers fixed (24 + 24: the even layout given):
     * that configuration exactly */
    c.first_layers = c.last_layers = 24;
    n = sb_mt_search(&m, &c, 512, &g, 1e30, &best, &rb, &err);
    assert_int_equal(n, 1);
    close_to(rb.step_s, r.step_s);
    /* the layers not given: the even layout and uneven ones tried, none slower */
    c.first_layers = c.last_layers = 0;
    n = sb_mt_search(&m, &c, 512, &g, 1e30, &best, &rb, &err);
    assert_true(n > 1 && rb.step_s <= r.step_s);
    /* a fixed TP that does not divide the devices */
    fixed.tp = 7;
    assert_true(sb_mt_search(&m, &fixed, 512, &g, 1e30, &best, &rb, &err) < 0);
    assert_non_null(strstr(err.msg, "--tp 7"));
}

/* The memory per device is the fullest stage's, stage by stage (sb_mt_stage_of):
 * the last (its fp32 logits) or the first (the most in flight), over pipelines
 * with and without interleaving, uneven layers, fewer micro-batches than stages
 * and the gradient reduced in bf16; and the grid under a limit between the two
 * takes a configuration every stage of which fits (before, it held stage 0 alone
 * to the limit). */
static void test_fullest_stage(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    sb_mt_model m = gpt();
    m.layers = 16, m.global_batch = 32, m.vocab = 128000;
    /* M = 16, 8, 4 (< PP with 1F1B), 4 (= PP, interleaved: fewer than the warm-up's
     * chunks), 16, 8 (uneven), 2 (< PP with 1F1B, 2 layers a stage: the last, with
     * its logits, the fullest) */
    const int pp[] = {1, 2, 8, 4, 8, 3, 8}, vpp[] = {1, 1, 1, 2, 2, 1, 1},
              mbs[] = {1, 2, 4, 4, 1, 2, 8};
    int last = 0, first = 0;
    for (int i = 0; i < 7; i++)
        for (int gb = 0; gb < 2; gb++) {
            m.layers = pp[i] == 3 ? 17 : 16; /* 17: stage 0 and the last hold 6, stage 1 five */
            sb_mt_config c = cfg(2, pp[i], 2, vpp[i], mbs[i]);
            c.first_layers = c.last_layers = pp[i] == 3 ? 6 : 0;
            c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1;
            sb_error ce = {0};
            if (sb_mt_check(&m, &c, 4 * pp[i], &ce))
                fail_msg("case %d: %s", i, ce.msg);
            c.dist_opt = 1, c.grad_bytes = gb ? 2.0 : 0.0;
            sb_mt_result r;
            sb_mt_price(&m, &c, &g, &r);
            double mx = 0.0;
            int at = -1;
            for (int st = 0; st < c.pp; st++) {
                sb_mt_stage o;
                sb_mt_stage_of(&m, &c, &g, st, &o);
                if (o.mem_total > mx)
                    mx = o.mem_total, at = st;
            }
            close_to(r.mem_total, mx);
            last += at == c.pp - 1 && c.pp > 1, first += at == 0 && c.pp > 1;
        }
    assert_true(last > 0 && first > 0);
    /* the grid at a limit under the unconstrained answer's fullest stage */
    m.layers = 16;
    sb_mt_config fixed, best;
    sb_mt_config_free(&fixed);
    sb_mt_result r;
    sb_error err = {0};
    g.node_devices = 8;
    assert_true(sb_mt_search(&m, &fixed, 16, &g, 0.0, &best, &r, &err) > 0);
    double lim = 0.8 * r.mem_total;
    if (sb_mt_search(&m, &fixed, 16, &g, lim, &best, &r, &err) <= 0)
        fail_msg("%s", err.msg);
    assert_true(r.mem_total <= lim);
    for (int st = 0; st < best.pp; st++) {
        sb_mt_stage o;
        sb_mt_stage_of(&m, &best, &g, st, &o);
        assert_true(o.mem_total <= lim);
    }
}

/* An untied head: its own vocab matrix beside the embedding's on the one stage of
 * PP 1 (weights, gradients, optimizer, the gradients' reduction), the same memory at
 * PP > 1 (the last stage keeps a tied head's copy), where a tied head's two copies
 * have their gradients all-reduced between the first and last stage instead */
static void test_untied_head(void **state)
{
    (void)state;
    sb_gpu g = toy();
    g.peak_tflops = 989, g.sms = 132, g.hbm_gbs = 3350, g.hbm_eff = 0.9, g.kernel_us = 4;
    sb_mt_model m = gpt(), u;
    m.layers = 8, m.global_batch = 64, m.vocab = 128000;
    u = m, u.untie = 1;
    const double vh = 128000.0 * 8192 / 2; /* one vocab matrix's shard at TP 2 */
    for (int pp = 1; pp <= 2; pp++) {
        sb_mt_config c = cfg(2, pp, 4, 1, 1);
        c.recompute = SB_MT_RC_NONE, c.precision = SB_PREC_BF16, c.fused_attention = 1;
        sb_error ce = {0};
        if (sb_mt_check(&u, &c, 8 * pp, &ce))
            fail_msg("%s", ce.msg);
        sb_mt_result rt, ru;
        sb_mt_price(&m, &c, &g, &rt);
        sb_mt_price(&u, &c, &g, &ru);
        close_to(ru.compute_s, rt.compute_s);
        if (pp == 1) { /* bf16 weights, fp32 gradients, 12 bytes of Adam a value */
            close_to(ru.mem_weights - rt.mem_weights, 2.0 * vh);
            close_to(ru.mem_grads - rt.mem_grads, 4.0 * vh);
            close_to(ru.mem_optimizer - rt.mem_optimizer, 12.0 * vh);
            assert_true(ru.dp_comm_s > rt.dp_comm_s && ru.optimizer_s > rt.optimizer_s);
        } else { /* 16 ranks on 8-GPU nodes: the two stages in different nodes */
            close_to(ru.mem_total, rt.mem_total);
            close_to(rt.dp_comm_s - ru.dp_comm_s, sb_gpu_allreduce_s(&g, 4.0 * vh, 2, 1));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_by_hand),
        cmocka_unit_test(test_fp8_gemm_eff),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_attention_rates),
        cmocka_unit_test(test_cp_passes),
        cmocka_unit_test(test_compute_by_kind),
        cmocka_unit_test(test_head_passes),
        cmocka_unit_test(test_slowest_stage),
        cmocka_unit_test(test_price),
        cmocka_unit_test(test_tp_overlap),
        cmocka_unit_test(test_fp8_te),
        cmocka_unit_test(test_dp_overlap),
        cmocka_unit_test(test_moe_ep),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_search_superset),
        cmocka_unit_test(test_fullest_stage),
        cmocka_unit_test(test_untied_head),
        cmocka_unit_test(test_stage_layouts),
        cmocka_unit_test(test_balanced_ends),
        cmocka_unit_test(test_layer_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
