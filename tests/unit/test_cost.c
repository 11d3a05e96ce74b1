/* tests/unit/test_cost.c: cmocka tests of config enumeration and the reference
 * cost model (cost/cost.c, search/problem.c) against docs/cost-model.md.
 *
 * Every expected cost is worked out by hand in the test from the formulas
 * of cost-model.md at the default machine (F = 10 TFLOP/s, B = 16 GB/s, so
 * words_to_flops(w) = w * 10*1000 / (16/8) = 5000 w FLOP), never by calling
 * the library's own helpers. Then the published prototype checks: config
 * counts per op and optimal total costs of the PaSE prototype, read from
 * tests/data/ (a missing file fails the test). Not the DP itself
 * (test_dp.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardbench/model.h"
#include "shardbench/search.h"

/* The reference figures of the PaSE prototype (provenance in each file's header). */
#define DATA_DIR SB_SOURCE_DIR "/tests/data/"

/* FLOP per word at the defaults: 10 TFLOP/s * 1000 / (16 GB/s / 8) */
#define W 5000.0

/* ------------------------------------------------------------ helpers -- */

static void parse_ok(const char *text, sb_model *m)
{
    sb_error err = {0};
    if (sb_model_parse(text, strlen(text), "t.model", NULL, 0, m, &err) != 0)
        fail_msg("model does not parse: %s", err.msg);
}

static void defaults(sb_cost_params *cp)
{
    sb_cost_params_default(cp);
}

static void assert_close(double got, double want, const char *what)
{
    double tol = 1e-12 * fmax(1.0, fabs(want));
    if (!(fabs(got - want) <= tol))
        fail_msg("%s: got %.17g, expected %.17g (by hand from cost-model.md)", what, got, want);
}

/* Vertex cost of op `i` of m under config c, compared with `want`. */
static void check_cost(const sb_model *m, int i, const int *c, double want, const char *what)
{
    sb_cost_params cp;
    defaults(&cp);
    assert_close(sb_op_cost(m, &m->ops[i], c, &cp), want, what);
}

static void check_dims(const sb_op *op, int n, const int64_t *sizes)
{
    assert_int_equal(op->ndims, n);
    for (int i = 0; i < n; i++)
        if (op->dims[i].size != sizes[i])
            fail_msg("op '%s' dim %d ('%s') has size %lld, expected %lld", op->name, i,
                     op->dims[i].name, (long long)op->dims[i].size, (long long)sizes[i]);
}

static int find_cfg(const sb_configs *cf, const int *c)
{
    for (int k = 0; k < cf->n; k++)
        if (memcmp(cf->c + (size_t)k * (size_t)cf->ndims, c, (size_t)cf->ndims * sizeof(int)) == 0)
            return k;
    return -1;
}

/* ------------------------------------------------------------- basics -- */

static void test_units(void **state)
{
    (void)state;
    sb_cost_params cp;
    defaults(&cp);
    assert_true(cp.tflops == 10.0 && cp.gbs == 16.0);
    /* 10 TFLOP/s = 10000 GFLOP/s over 16/8 = 2 GWord/s: 5000 FLOP per word */
    assert_close(sb_words_to_flops(&cp, 1.0), 5000.0, "words_to_flops(1)");
    assert_close(sb_words_to_flops(&cp, 12.5), 62500.0, "words_to_flops(12.5)");
    /* AR(w, q) = words_to_flops(2 (q-1) w / q) */
    assert_close(sb_allreduce_cost(&cp, 100.0, 1.0), 0.0, "AR(100, 1)");
    assert_close(sb_allreduce_cost(&cp, 100.0, 2.0), 5000.0 * 2 * 1 * 100 / 2, "AR(100, 2)");
    assert_close(sb_allreduce_cost(&cp, 100.0, 4.0), 5000.0 * 2 * 3 * 100 / 4, "AR(100, 4)");
    assert_close(sb_allreduce_cost(&cp, 7.0, 8.0), 5000.0 * 2 * 7 * 7 / 8, "AR(7, 8)");
    /* another machine: 20 TFLOP/s, 8 GB/s -> 20000 / 1 = 20000 FLOP per word */
    cp.tflops = 20.0;
    cp.gbs = 8.0;
    assert_close(sb_words_to_flops(&cp, 3.0), 60000.0, "words_to_flops at 20 TFLOP/s, 8 GB/s");
}

/* ---------------------------------------------------------- GEMM-like -- */

static void test_cost_dense(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=16, f=32]\n"
             "y = dense(x, units=64, pw=1)\n",
             &m);
    /* iteration space (b, units, f) = (16, 64, 32): m = b, n = units, k = f */
    check_dims(&m.ops[0], 3, (int64_t[]){16, 64, 32});
    /* c = (2, 2, 2): m' = 8, n' = 32, k' = 16
     *   compute = 3*8*32*16 + 3*pw*8*32 = 12288 + 768 = 13056
     *   comm = AR(m'n' = 256, c_k = 2) + AR(m'k' = 128, c_n = 2) + AR(n'k' = 512, c_m = 2)
     *        = 5000*256 + 5000*128 + 5000*512 = 4480000   (AR(w, 2) = 5000 w) */
    check_cost(&m, 0, (int[]){2, 2, 2}, (3.0 * 8 * 32 * 16 + 3.0 * 1 * 8 * 32) + W * (256 + 128 + 512),
               "dense (2,2,2)");
    assert_close(13056.0 + 4480000.0, 4493056.0, "arithmetic");
    /* c = (8, 1, 1): m' = 2, n' = 64, k' = 32
     *   compute = 3*2*64*32 + 3*2*64 = 12288 + 384 = 12672
     *   comm = AR(n'k' = 2048, c_m = 8) = 5000 * 2*7*2048/8 = 17920000 */
    check_cost(&m, 0, (int[]){8, 1, 1}, 12672.0 + 17920000.0, "dense (8,1,1)");
    /* c = (1, 1, 1): 3*16*64*32 + 3*16*64 = 98304 + 3072, no communication */
    check_cost(&m, 0, (int[]){1, 1, 1}, 98304.0 + 3072.0, "dense (1,1,1)");
    /* c = (1, 1, 4): m' = 16, n' = 64, k' = 8
     *   compute = 3*16*64*8 + 3*16*64 = 24576 + 3072 = 27648
     *   comm = AR(m'n' = 1024, 4) = 5000 * 2*3*1024/4 = 7680000 */
    check_cost(&m, 0, (int[]){1, 1, 4}, 27648.0 + 7680000.0, "dense (1,1,4)");
    /* layouts: input (b, f) follows (c_b, c_f); output (b, units) follows (c_b, c_units) */
    int lay[2];
    sb_operand_layout(&m.ops[0], &m.ops[0].in[0], 2, (int[]){2, 4, 8}, lay);
    assert_int_equal(lay[0], 2);
    assert_int_equal(lay[1], 8);
    sb_operand_layout(&m.ops[0], &m.ops[0].out[0], 2, (int[]){2, 4, 8}, lay);
    assert_int_equal(lay[0], 2);
    assert_int_equal(lay[1], 4);
    sb_model_free(&m);

    /* rank-3 input: m = product of the leading dims */
    parse_ok("input x[b=4, s=8, f=16]\n"
             "y = dense(x, units=8)\n",
             &m);
    check_dims(&m.ops[0], 4, (int64_t[]){4, 8, 8, 16});
    /* c = (2, 2, 1, 2): m' = 2*4 = 8 with c_m = 4, n' = 8, k' = 8
     *   compute = 3*8*8*8 = 1536
     *   comm = AR(64, 2) + AR(64, 1) + AR(64, 4) = 5000*64 + 0 + 5000*2*3*64/4 = 320000 + 480000 */
    check_cost(&m, 0, (int[]){2, 2, 1, 2}, 1536.0 + 320000.0 + 480000.0, "dense rank 3");
    sb_model_free(&m);
}

/* ZeRO (cp.zero, docs/cost-model.md): stages 1 and 2 cost what stage 0
 * costs (reduce-scatter + all-gather move what the all-reduce moves);
 * stage 3 adds one all-gather of each weight over its replicas, half an
 * all-reduce: 0.5 AR(shard, q), q the product of the splits of the dims
 * the weight does not follow. The op's own weight (dense) and a weight
 * operand (einsum) alike. */
static void test_cost_zero(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=16, f=32]\n"
             "y = dense(x, units=64, pw=1)\n",
             &m);
    sb_cost_params cp;
    defaults(&cp);
    const int c8[3] = {8, 1, 1}, c2[3] = {2, 2, 2}, c1[3] = {1, 1, 1};
    double base8 = sb_op_cost(&m, &m.ops[0], c8, &cp), base2 = sb_op_cost(&m, &m.ops[0], c2, &cp);
    for (int z = 1; z <= 2; z++) {
        cp.zero = z;
        assert_close(sb_op_cost(&m, &m.ops[0], c8, &cp), base8, "dense (8,1,1) zero 1-2");
    }
    cp.zero = 3;
    /* (8,1,1): w is f x units = 32 x 64 = 2048 per device on 8 replicas:
     *   0.5 * AR(2048, 8) = 0.5 * 5000 * 2*7*2048/8 = 8960000 */
    assert_close(sb_op_cost(&m, &m.ops[0], c8, &cp), base8 + 8960000.0, "dense (8,1,1) zero 3");
    /* (2,2,2): w shard 16 x 32 = 512, 2 replicas (b): 0.5 * 5000 * 512 = 1280000 */
    assert_close(sb_op_cost(&m, &m.ops[0], c2, &cp), base2 + 1280000.0, "dense (2,2,2) zero 3");
    /* unsplit: one replica, nothing to gather */
    cp.zero = 0;
    double base1 = sb_op_cost(&m, &m.ops[0], c1, &cp);
    cp.zero = 3;
    assert_close(sb_op_cost(&m, &m.ops[0], c1, &cp), base1, "dense (1,1,1) zero 3");
    sb_model_free(&m);

    parse_ok("input a[b=4, i=8, k=16]\n"
             "weight w[k=16, j=8]\n"
             "y = einsum(a, w, \"b i k, k j -> b i j\")\n",
             &m);
    /* dims (b, i, j, k); c = (2, 2, 1, 2): w (k, j) shard 8 x 8 = 64, its
     * replicas the splits of b and i: 4. 0.5 * AR(64, 4) = 0.5*5000*2*3*64/4 */
    const int ce[4] = {2, 2, 1, 2};
    cp.zero = 0;
    double basee = sb_op_cost(&m, &m.ops[0], ce, &cp);
    cp.zero = 3;
    assert_close(sb_op_cost(&m, &m.ops[0], ce, &cp), basee + 0.5 * W * 2 * 3 * 64 / 4,
                 "einsum weight operand zero 3");
    sb_model_free(&m);
}

static void test_cost_einsum(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input a[b=4, i=8, k=16]\n"
             "input w[b=4, k=16, j=8]\n"
             "y = einsum(a, w, \"b i k, b k j -> b i j\")\n",
             &m);
    /* output dims then reduction dims: (b, i, j, k), b is a batch dim */
    check_dims(&m.ops[0], 4, (int64_t[]){4, 8, 8, 16});
    assert_int_equal(m.ops[0].role[0], SB_ROLE_BATCH);
    assert_int_equal(m.ops[0].role[1], SB_ROLE_M);
    assert_int_equal(m.ops[0].role[2], SB_ROLE_N);
    assert_int_equal(m.ops[0].role[3], SB_ROLE_K);
    /* c = (2, 2, 1, 2): beta' = 2, m' = 4, n' = 8, k' = 8; c_m = 2, c_n = 1, c_k = 2
     *   per batch: compute = 3*4*8*8 = 768
     *              comm = AR(m'n' = 32, 2) + AR(m'k' = 32, 1) + AR(n'k' = 64, 2)
     *                   = 5000*32 + 0 + 5000*64 = 480000
     *   cost = 2 * (768 + 480000) = 961536 */
    check_cost(&m, 0, (int[]){2, 2, 1, 2}, 2.0 * (768.0 + W * 32 + W * 64), "einsum (2,2,1,2)");
    /* c = (4, 1, 2, 1): beta' = 1, m' = 8, n' = 4, k' = 16; c_n = 2
     *   compute = 3*8*4*16 = 1536; comm = AR(m'k' = 128, 2) = 640000 */
    check_cost(&m, 0, (int[]){4, 1, 2, 1}, 1536.0 + W * 128, "einsum (4,1,2,1)");
    /* operand layouts: a (b, i, k) -> (c_b, c_i, c_k); w (b, k, j) -> (c_b, c_k, c_j) */
    int lay[3];
    sb_operand_layout(&m.ops[0], &m.ops[0].in[1], 3, (int[]){2, 3, 5, 7}, lay);
    assert_int_equal(lay[0], 2);
    assert_int_equal(lay[1], 7);
    assert_int_equal(lay[2], 5);
    sb_model_free(&m);

    /* the order of the reduction dims changes no cost */
    sb_model m2;
    parse_ok("input a[i=8, k=4, l=4]\n"
             "input w[l=4, k=4, j=8]\n"
             "y = einsum(a, w, \"i k l, l k j -> i j\")\n",
             &m2);
    check_dims(&m2.ops[0], 4, (int64_t[]){8, 8, 4, 4});
    /* c = (2, 1, 2, 2): m' = 4, n' = 8, k' = 2*2 = 4 with c_k = 4
     *   compute = 3*4*8*4 = 384; comm = AR(m'n' = 32, 4) + AR(m'k' = 16, 1) + AR(n'k' = 32, 2)
     *          = 5000*2*3*32/4 + 0 + 5000*32 = 240000 + 160000 */
    check_cost(&m2, 0, (int[]){2, 1, 2, 2}, 384.0 + 240000.0 + 160000.0, "einsum two k dims");
    check_cost(&m2, 0, (int[]){2, 1, 1, 4}, 384.0 + 240000.0 + 160000.0,
               "einsum two k dims, other split");
    sb_model_free(&m2);
}

static void test_cost_embedding(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input tok[b=8, s=4]\n"
             "e = embedding(tok, vocab=64, size=16)\n",
             &m);
    /* b s v, v e -> b s e: iteration space (b, s, e, v) */
    check_dims(&m.ops[0], 4, (int64_t[]){8, 4, 16, 64});
    /* vocab split c = (1, 1, 1, 4): m' = 32, n' = 16, k' = 16, c_k = 4
     *   compute = 3*32*16*16 = 24576
     *   comm = AR(m'n' = 512, 4) = 5000 * 2*3*512/4 = 3840000 */
    check_cost(&m, 0, (int[]){1, 1, 1, 4}, 24576.0 + 3840000.0, "embedding vocab split");
    /* c = (2, 1, 2, 1): m' = 16, n' = 8, k' = 64, c_m = 2, c_n = 2
     *   compute = 3*16*8*64 = 24576
     *   comm = AR(m'k' = 1024, 2) + AR(n'k' = 512, 2) = 5000*1024 + 5000*512 = 7680000 */
    check_cost(&m, 0, (int[]){2, 1, 2, 1}, 24576.0 + 7680000.0, "embedding (2,1,2,1)");
    sb_model_free(&m);
}

static void test_cost_conv(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=8, c=4, h=8, w=8]\n"
             "y = conv(x, out=16, kernel=3, pad=1, pw=1)\n",
             &m);
    /* (b, c, h_out, w_out, r, s, n); h_out = (8 + 2 - 3)/1 + 1 = 8 */
    check_dims(&m.ops[0], 7, (int64_t[]){8, 4, 8, 8, 3, 3, 16});
    assert_true(m.ops[0].nosplit & (1u << 2));
    assert_true(m.ops[0].nosplit & (1u << 3));
    /* c = (2, 1, 1, 1, 1, 1, 4): m = b*h*w: m' = 8*8*8/2 = 256; n' = 16/4 = 4;
     * k = c*r*s: k' = 4*3*3 = 36; c_m = 2, c_n = 4, c_k = 1
     *   compute = 3*256*4*36 + 3*1*256*4 = 110592 + 3072 = 113664
     *   comm = AR(1024, 1) + AR(m'k' = 9216, 4) + AR(n'k' = 144, 2)
     *        = 0 + 5000*2*3*9216/4 + 5000*144 = 69120000 + 720000 */
    check_cost(&m, 0, (int[]){2, 1, 1, 1, 1, 1, 4}, 113664.0 + 69120000.0 + 720000.0,
               "conv (2,1,1,1,1,1,4)");
    /* c = (1, 2, 1, 1, 1, 1, 1): channel (reduction) split; m' = 512, n' = 16, k' = 18
     *   compute = 3*512*16*18 + 3*512*16 = 442368 + 24576 = 466944
     *   comm = AR(m'n' = 8192, 2) = 5000*8192 = 40960000 */
    check_cost(&m, 0, (int[]){1, 2, 1, 1, 1, 1, 1}, 466944.0 + 40960000.0, "conv channel split");
    /* layouts: input (b, c, h, w) <- dims 0-3; output (b, n, h, w) <- dims 0, 6, 2, 3 */
    int c[7] = {2, 3, 1, 1, 1, 1, 5}, lay[4];
    sb_operand_layout(&m.ops[0], &m.ops[0].in[0], 4, c, lay);
    assert_int_equal(lay[0], 2);
    assert_int_equal(lay[1], 3);
    assert_int_equal(lay[2], 1);
    sb_operand_layout(&m.ops[0], &m.ops[0].out[0], 4, c, lay);
    assert_int_equal(lay[0], 2);
    assert_int_equal(lay[1], 5);
    assert_int_equal(lay[3], 1);
    sb_model_free(&m);
}

/* groups=4, dilation=2: four convs of 2 to 4 channels over a group dim,
 * split like a batch; the channel dims of x and y follow the group. */
static void test_cost_conv_grouped(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=8, c=8, h=8, w=8]\n"
             "y = conv(x, out=16, kernel=3, pad=1, dilation=2, groups=4)\n",
             &m);
    /* (b, c/G, h_out, w_out, r, s, n/G, group); h_out = (8 + 2 - 5)/1 + 1 = 6 */
    check_dims(&m.ops[0], 8, (int64_t[]){8, 2, 6, 6, 3, 3, 4, 4});
    assert_string_equal(m.ops[0].dims[7].name, "group");
    assert_int_equal(m.ops[0].role[7], SB_ROLE_BATCH);
    /* h, w and a group's channels are never split */
    assert_int_equal(m.ops[0].nosplit, (1u << 1) | (1u << 2) | (1u << 3) | (1u << 6));
    /* the filter (group, n/G, c/G, r, s) */
    assert_int_equal(m.ops[0].nweights, 1);
    assert_int_equal(m.ops[0].weights[0].ndims, 5);
    const int64_t wsize[5] = {4, 4, 2, 3, 3};
    for (int d = 0; d < 5; d++)
        assert_int_equal(m.ops[0].weights[0].size[d], wsize[d]);
    /* c = (2, 1, 1, 1, 1, 1, 1, 2): β' = G/2 = 2; m' = 8*6*6/2 = 144, n' = 4,
     * k' = 2*3*3 = 18; c_m = 2, c_n = c_k = 1
     *   per group: compute = 3*144*4*18 = 31104, comm = AR(n'k' = 72, 2) = 5000*72
     *   cost = 2 * (31104 + 360000) */
    check_cost(&m, 0, (int[]){2, 1, 1, 1, 1, 1, 1, 2}, 2.0 * (31104.0 + 360000.0),
               "grouped conv (2,1,1,1,1,1,1,2)");
    /* the group split alone: no communication, a quarter of the work per device */
    check_cost(&m, 0, (int[]){1, 1, 1, 1, 1, 1, 1, 4}, 1.0 * 3 * 288 * 4 * 18,
               "grouped conv group split");
    /* dilation costs nothing: the same taps (dilation 1 gives h_out 8, not 6) */
    sb_model m1;
    parse_ok("input x[b=8, c=8, h=6, w=6]\n"
             "y = conv(x, out=16, kernel=3, pad=1, groups=4)\n",
             &m1);
    check_cost(&m1, 0, (int[]){1, 1, 1, 1, 1, 1, 1, 4}, 1.0 * 3 * 288 * 4 * 18,
               "grouped conv without dilation, same output size");
    sb_model_free(&m1);
    /* layouts: x (b, c, h, w) <- dims 0, group, 2, 3; y (b, n, h, w) the same */
    int c[8] = {2, 1, 1, 1, 1, 1, 1, 4}, lay[4];
    sb_operand_layout(&m.ops[0], &m.ops[0].in[0], 4, c, lay);
    assert_int_equal(lay[0], 2);
    assert_int_equal(lay[1], 4);
    sb_operand_layout(&m.ops[0], &m.ops[0].out[0], 4, c, lay);
    assert_int_equal(lay[1], 4);
    sb_model_free(&m);
}

static void test_cost_lstm(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=4, s=8, u=16]\n"
             "y = lstm(x, layers=2)\n",
             &m);
    /* (layers, seq, batch, n = units, k = units) */
    check_dims(&m.ops[0], 5, (int64_t[]){2, 8, 4, 16, 16});
    assert_true(m.ops[0].nosplit & (1u << 1));
    /* c = (c_l, c_s, c_b, c_n, c_k) = (2, 1, 2, 2, 1):
     * GEMM with batch L/c_l = 1, m = S*B/(c_s c_b) = 32/2 = 16, n = 4*16/2 = 32,
     * k = 2*16/1 = 32, c_m = 2, c_n = 2, c_k = 1, pw = 3
     *   compute = 3*16*32*32 + 3*3*16*32 = 49152 + 4608 = 53760
     *   comm = AR(512, 1) + AR(m'k' = 512, 2) + AR(n'k' = 1024, 2) = 0 + 2560000 + 5120000
     * plus L*S*words_to_flops(w): source block (B/c_b, N/c_n) = (2, 8) on c_b c_n = 4
     * devices, target (B/c_b, K/c_k) = (2, 16) on c_b c_k = 2 devices; 2 <= 4, so
     * overlap = min(2,2)*min(8,16) = 16, area 2*16 = 32, w = 32 - 16 = 16
     *   edge term = 2*8*5000*16 = 1280000 */
    check_cost(&m, 0, (int[]){2, 1, 2, 2, 1}, 53760.0 + 2560000.0 + 5120000.0 + 2 * 8 * W * 16,
               "lstm (2,1,2,2,1)");
    /* c = (1, 1, 1, 1, 2): batch 2, m' = 32, n' = 64, k' = 16, c_k = 2
     *   compute = 3*32*64*16 + 9*32*64 = 98304 + 18432 = 116736
     *   comm = AR(m'n' = 2048, 2) = 10240000; times batch 2: 2*(116736 + 10240000)
     * edge term: source (4, 16) on 1 device, target (4, 8) on 2 devices: q_dst > q_src,
     * no overlap, w = 32: 2*8*5000*32 = 2560000 */
    check_cost(&m, 0, (int[]){1, 1, 1, 1, 2}, 2.0 * (116736.0 + 10240000.0) + 2 * 8 * W * 32,
               "lstm (1,1,1,1,2)");
    /* (1,1,1,1,1): 2*(3*32*64*32 + 9*32*64) = 2*(196608 + 18432), no communication,
     * and equal blocks: no edge term */
    check_cost(&m, 0, (int[]){1, 1, 1, 1, 1}, 2.0 * (196608.0 + 18432.0), "lstm unsplit");
    /* layouts: input (batch, seq, units) -> (c_b, c_s, c_k); output -> (c_b, c_s, c_n) */
    int c[5] = {1, 1, 2, 4, 8}, lay[3];
    sb_operand_layout(&m.ops[0], &m.ops[0].in[0], 3, c, lay);
    assert_int_equal(lay[0], 2);
    assert_int_equal(lay[1], 1);
    assert_int_equal(lay[2], 8);
    sb_operand_layout(&m.ops[0], &m.ops[0].out[0], 3, c, lay);
    assert_int_equal(lay[2], 4);
    sb_model_free(&m);
}

/* ------------------------------------------------------- other ops -- */

static void test_cost_pool(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=8, c=4, h=16, w=16]\n"
             "y = pool(x, kernel=2, stride=2)\n"
             "z = pool(x, kernel=3, stride=2, pad=1)\n",
             &m);
    /* output h = (16 - 2)/2 + 1 = 8 */
    check_dims(&m.ops[0], 4, (int64_t[]){8, 4, 8, 8});
    /* c = (1, 1, 2, 2): output per device 8*4*4*4 = 512; input block
     * b' = 8, c' = 4, h' = 16/2 = 8, w' = 8; both spatial dims split:
     * ghost = ((8+2)*(8+2) - 8*8) * 8 * 4 = 36 * 32 = 1152 words -> 5760000 */
    check_cost(&m, 0, (int[]){1, 1, 2, 2}, 512.0 + W * 1152, "pool halo (1,1,2,2)");
    /* c = (2, 2, 1, 1): no spatial split, no halo: 4*2*8*8 = 512 */
    check_cost(&m, 0, (int[]){2, 2, 1, 1}, 512.0, "pool no halo");
    /* c = (1, 1, 1, 4): only w split: ghost = (16*(4+2) - 16*4) * 8 * 4 = 32*32 = 1024
     * output 8*4*8*2 = 512 */
    check_cost(&m, 0, (int[]){1, 1, 1, 4}, 512.0 + W * 1024, "pool halo w only");
    /* the 3x3 window: output (16 + 2 - 3)/2 + 1 = 8 */
    check_dims(&m.ops[1], 4, (int64_t[]){8, 4, 8, 8});
    /* c = (1, 2, 4, 1): output 8*2*2*8 = 256; input block b' 8, c' 2, h' 4, w' 16
     * ghost = ((4+3)*16 - 4*16) * 8 * 2 = 48 * 16 = 768 */
    check_cost(&m, 1, (int[]){1, 2, 4, 1}, 256.0 + W * 768, "pool 3x3 halo");
    /* layouts are the config itself */
    int lay[4];
    sb_operand_layout(&m.ops[0], &m.ops[0].in[0], 4, (int[]){1, 2, 4, 8}, lay);
    assert_int_equal(lay[3], 8);
    assert_int_equal(lay[1], 2);
    sb_model_free(&m);
}

static void test_cost_norm(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=8, f=16]\n"
             "y = norm(x)\n"
             "input i[b=8, c=4, h=4, w=4]\n"
             "z = batchnorm(i)\n",
             &m);
    assert_int_equal(m.ops[0].axis, 1);
    /* layer norm, c = (2, 4): e = 4*4 = 16, D'_a = 16/4 = 4, c_a = 4, others = 2
     *   16 e = 256; 4 AR(e/D'_a = 4, 4) = 4 * 5000*2*3*4/4 = 120000;
     *   4 AR(D'_a = 4, 2) = 4 * 5000*4 = 80000 */
    check_cost(&m, 0, (int[]){2, 4}, 256.0 + 120000.0 + 80000.0, "norm (2,4)");
    /* c = (8, 1): e = 16, D'_a = 16, c_a = 1: 256 + 0 + 4 AR(16, 8) = 4 * 5000*2*7*16/8 */
    check_cost(&m, 0, (int[]){8, 1}, 256.0 + 4 * (W * 2 * 7 * 16 / 8), "norm (8,1)");
    /* batch norm is axis 0; c = (2, 2, 1, 1): e = 4*2*4*4 = 128, D'_a = 4, others = 2
     *   16*128 = 2048; 4 AR(128/4 = 32, 2) = 4*160000 = 640000; 4 AR(4, 2) = 80000 */
    assert_int_equal(m.ops[1].axis, 0);
    check_cost(&m, 1, (int[]){2, 2, 1, 1}, 2048.0 + 640000.0 + 80000.0, "batchnorm (2,2,1,1)");
    /* c = (1, 1, 1, 1): 16 * 512 only */
    check_cost(&m, 1, (int[]){1, 1, 1, 1}, 16.0 * 512, "batchnorm unsplit");
    sb_model_free(&m);
}

/* rmsnorm, rope, and the causal softmax (priced as the plain one). */
static void test_cost_llama_ops(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=8, f=16]\n"
             "y = rmsnorm(x, axis=f)\n"
             "input q[b=8, s=4, d=4]\n"
             "r = rope(q, seq=s, dim=d)\n"
             "input l[b=2, s=8, m=8]\n"
             "w = softmax(l, axis=m, causal=s)\n"
             "v = softmax(l, axis=m)\n",
             &m);
    /* rmsnorm, c = (2, 4): e = 16, D'_a = 4, c_a = 4, others = 2
     *   12 e = 192; 2 AR(e/D'_a = 4, 4) = 2 * 5000*2*3*4/4 = 60000;
     *   AR(D'_a = 4, 2) = 5000*2*1*4/2 = 20000 */
    check_cost(&m, 0, (int[]){2, 4}, 192.0 + 60000.0 + 20000.0, "rmsnorm (2,4)");
    /* c = (8, 1): 12*16 + AR(16, 8) = 192 + 5000*2*7*16/8 */
    check_cost(&m, 0, (int[]){8, 1}, 192.0 + W * 2 * 7 * 16 / 8, "rmsnorm (8,1)");
    /* rope, c = (2, 2, 1): e = 4*2*4 = 32: 8 e, no communication */
    check_cost(&m, 1, (int[]){2, 2, 1}, 256.0, "rope (2,2,1)");
    /* the head dim d is never split */
    sb_configs cf;
    sb_error err = {0};
    assert_int_equal(sb_enumerate_configs(&m.ops[1], 4, 1, &cf, &err), 0);
    assert_true(cf.n > 1);
    for (int k = 0; k < cf.n; k++)
        assert_int_equal(cf.c[k * 3 + 2], 1);
    free(cf.c);
    free(cf.cost);
    /* causal and plain softmax cost the same (the masked half is computed) */
    int c[3] = {1, 2, 4};
    sb_cost_params cp;
    defaults(&cp);
    assert_close(sb_op_cost(&m, &m.ops[2], c, &cp), sb_op_cost(&m, &m.ops[3], c, &cp),
                 "causal softmax");
    sb_model_free(&m);
}

static void test_cost_softmax(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=8, f=16]\n"
             "y = softmax(x)\n"
             "z = softmax_xent(x)\n",
             &m);
    assert_int_equal(m.ops[0].axis, 1);
    /* softmax over f, c = (2, 4): e = 16, D_a = 16, D'_a = 4, e/D'_a = 4
     *   4e + e D_a = 64 + 256
     *   AR(4, 4) + AR(4*16 = 64, 4) + AR(4, 4) = 30000 + 480000 + 30000 */
    check_cost(&m, 0, (int[]){2, 4}, 64.0 + 256.0 + 30000.0 + 480000.0 + 30000.0, "softmax (2,4)");
    /* c = (8, 1): e = 16, no all-reduce: 64 + 256 */
    check_cost(&m, 0, (int[]){8, 1}, 64.0 + 256.0, "softmax (8,1)");
    /* cross-entropy, class dim split, c = (2, 4): e = 16, beta' = 4
     *   4e + 2 beta' + words_to_flops(2 beta') = 64 + 8 + 40000 */
    check_cost(&m, 1, (int[]){2, 4}, 64.0 + 8.0 + W * 8, "softmax_xent class split");
    /* not split, c = (8, 1): e = 16, beta' = 1: 64 + 2 */
    check_cost(&m, 1, (int[]){8, 1}, 66.0, "softmax_xent batch split");
    sb_model_free(&m);

    /* rank 3: beta' is the product of all but the last dim */
    parse_ok("input x[b=4, s=6, v=32]\n"
             "z = softmax_xent(x)\n",
             &m);
    /* c = (2, 3, 2): e = 2*2*16 = 64, beta' = 2*2 = 4: 256 + 8 + 5000*8 */
    check_cost(&m, 0, (int[]){2, 3, 2}, 256.0 + 8.0 + W * 8, "softmax_xent rank 3");
    sb_model_free(&m);
}

static void test_cost_elementwise_reduce(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input a[b=8, f=16]\n"
             "input b2[b=8, f=16]\n"
             "y = add(a, b2, pw=2)\n"
             "z = elementwise(a, pw=1)\n"
             "w2 = add(a, b2)\n"
             "input x[b=8, c=4, h=4, w=4]\n"
             "r = reduce_mean(x, axes=[h, w])\n",
             &m);
    /* (1 + pw) e: c = (2, 2): e = 4*8 = 32 -> 3*32 = 96 */
    check_cost(&m, 0, (int[]){2, 2}, 96.0, "add pw=2");
    check_cost(&m, 1, (int[]){1, 8}, 2.0 * 16, "elementwise pw=1");
    check_cost(&m, 2, (int[]){1, 1}, 128.0, "add unsplit");
    /* reduce_mean over h, w: AR(e, c_h c_w); c = (2, 1, 2, 2): e = 4*4*2*2 = 64,
     * q = 4: 5000*2*3*64/4 = 480000 */
    assert_int_equal(m.ops[3].axes, (1u << 2) | (1u << 3));
    check_cost(&m, 3, (int[]){2, 1, 2, 2}, W * 2 * 3 * 64 / 4, "reduce_mean (2,1,2,2)");
    /* reduced dims not split: no all-reduce */
    check_cost(&m, 3, (int[]){2, 4, 1, 1}, 0.0, "reduce_mean reduced dims unsplit");
    /* c = (1, 1, 1, 2): e = 8*4*4*2 = 256, q = 2: 5000*256 */
    check_cost(&m, 3, (int[]){1, 1, 1, 2}, W * 256, "reduce_mean (1,1,1,2)");
    sb_model_free(&m);
}

/* act: act_units(fn) e (1 for relu, relu6; 2 for the others); mul: 2e plus
 * the all-reduce of b's gradient over the splits of the dims b lacks;
 * expand: e plus the same for x over the new dims */
static void test_cost_pointwise(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input a[b=8, f=16]\n"
             "r = act(a, fn=relu)\n"
             "g = act(a, fn=gelu)\n"
             "input a2[b=8, f=16]\n"
             "y = mul(a, a2)\n"
             "input x[b=8, c=4, h=4, w=4]\n"
             "input s[b=8, c=4]\n"
             "se = mul(x, s)\n"
             "weight sc[f=16]\n"
             "ws = mul(a, sc)\n"
             "weight cls[seq=1, e=8]\n"
             "t = expand(cls, shape=[b=4, seq=1, e=8])\n",
             &m);
    /* c = (2, 2): e = 4*8 = 32 */
    check_cost(&m, 0, (int[]){2, 2}, 32.0, "act relu");
    check_cost(&m, 1, (int[]){2, 2}, 64.0, "act gelu");
    check_cost(&m, 2, (int[]){2, 2}, 64.0, "mul same shape");
    check_cost(&m, 2, (int[]){8, 2}, 2.0 * 8, "mul same shape (8, 2)");
    /* se, c = (2, 1, 2, 2): e = 4*4*2*2 = 64 -> 128; s's block 4*4 = 16
     * summed over c_h c_w = 4 ranks: 5000*2*3*16/4 */
    check_cost(&m, 3, (int[]){2, 1, 2, 2}, 128.0 + W * 2 * 3 * 16 / 4, "mul broadcast over split h, w");
    /* only dims s has are split: no all-reduce */
    check_cost(&m, 3, (int[]){2, 4, 1, 1}, 2.0 * 4 * 1 * 4 * 4, "mul broadcast, h, w unsplit");
    /* a weight b: c = (4, 2): e = 16 -> 32; sc's block 8 over c_b = 4: 5000*2*3*8/4 */
    check_cost(&m, 4, (int[]){4, 2}, 32.0 + W * 2 * 3 * 8 / 4, "mul by a weight");
    /* expand, c = (2, 1, 2): e = 2*1*4 = 8; cls's block 4 over c_b = 2: 5000*2*1*4/2 */
    check_cost(&m, 5, (int[]){2, 1, 2}, 8.0 + W * 2 * 1 * 4 / 2, "expand over split batch");
    check_cost(&m, 5, (int[]){1, 1, 8}, 4.0, "expand, new dims unsplit");
    sb_model_free(&m);
}

/* softcap: 2e on the reference machine (tanh forward, 1 - t² backward, as
 * act's tanh); on a GPU machine memory-bound: (2 + 3) words per element at
 * the HBM bandwidth it reaches plus two kernels' overhead, as FLOP at F */
static void test_cost_softcap(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input a[b=8, s=4, v=16]\ny = softcap(a, cap=30)\n", &m);
    assert_int_equal(m.ops[0].kind, SB_OP_SOFTCAP);
    /* c = (2, 1, 4): e = 4*4*4 = 64 */
    check_cost(&m, 0, (int[]){2, 1, 4}, 128.0, "softcap (2,1,4)");
    check_cost(&m, 0, (int[]){1, 1, 1}, 2.0 * 512, "softcap unsplit");
    sb_cost_params cp;
    defaults(&cp);
    cp.gpu_sms = 132, cp.gpu_hbm_gbs = 3350, cp.gpu_hbm_eff = 0.8, cp.gpu_kernel_us = 4;
    cp.word_bytes = 2, cp.tflops = 989;
    double s = 64.0 * 5 * 2 / (3350e9 * 0.8) + 2 * 4e-6;
    assert_close(sb_op_cost(&m, &m.ops[0], (int[]){2, 1, 4}, &cp), s * 989e12, "softcap on a GPU");
    sb_model_free(&m);
}

/* GShard's dispatch einsum (one input the moe_gate's one-hot) on a GPU
 * machine: a gather, memory-bound: the tokens (x) and the slots (out) read
 * and written once each way, plus two kernels' overhead, as FLOP at F */
static void test_cost_moe_dispatch_gpu(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[batch=2, seq=8, embed=16]\n"
             "weight wr[embed=16, expert=4]\n"
             "r = einsum(\"batch seq embed, embed expert -> batch seq expert\", x, wr)\n"
             "combine, dispatch = moe_gate(r, axis=expert, k=2, capacity=4)\n"
             "xe = einsum(\"batch seq expert cap, batch seq embed -> expert batch cap embed\","
             " dispatch, x)\n",
             &m);
    int xe = m.nops - 1;
    sb_cost_params cp;
    defaults(&cp);
    cp.gpu_sms = 132, cp.gpu_hbm_gbs = 3350, cp.gpu_hbm_eff = 0.8, cp.gpu_kernel_us = 4;
    cp.gpu_peak_tflops = 989, cp.gpu_gemm_eff = 0.8, cp.word_bytes = 2, cp.tflops = 989;
    int one[SB_MAX_DIMS];
    for (int d = 0; d < SB_MAX_DIMS; d++)
        one[d] = 1;
    double words = 2.0 * 8 * 16 + 4.0 * 2 * 4 * 16; /* x, then [expert batch cap embed] */
    double s = words * 2 * 2 / (3350e9 * 0.8) + 2 * 4e-6;
    assert_close(sb_op_cost(&m, &m.ops[xe], one, &cp), s * 989e12, "dispatch on a GPU");
    sb_model_free(&m);
}

static void test_cost_free_ops(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=8, c=4, h=4, w=4]\n"
             "c2 = concat(x, x, axis=c)\n"
             "f = reshape(c2, shape=[b=8, g=-1])\n"
             "t = transpose(f, perm=[1, 0])\n"
             "p, q = split(t, axis=0)\n"
             "s = stack(p, q)\n"
             "u1, u2 = unstack(s, axis=0)\n"
             "fl = flatten(u1)\n",
             &m);
    assert_int_equal(m.nops, 8); /* reshape is flatten + unflatten */
    static const sb_op_kind kinds[] = {SB_OP_CONCAT, SB_OP_FLATTEN, SB_OP_UNFLATTEN,
                                       SB_OP_TRANSPOSE, SB_OP_SPLIT, SB_OP_STACK,
                                       SB_OP_UNSTACK, SB_OP_FLATTEN};
    for (int i = 0; i < m.nops; i++) {
        assert_int_equal(m.ops[i].kind, kinds[i]);
        int c[SB_MAX_DIMS];
        for (int d = 0; d < SB_MAX_DIMS; d++)
            c[d] = 1;
        check_cost(&m, i, c, 0.0, "free op unsplit");
        c[0] = 2;
        check_cost(&m, i, c, 0.0, "free op split");
    }
    /* transpose: out dim j follows in dim perm[j] */
    int lay[2];
    sb_operand_layout(&m.ops[3], &m.ops[3].out[0], 2, (int[]){2, 4}, lay);
    assert_int_equal(lay[0], 4);
    assert_int_equal(lay[1], 2);
    /* flatten: the flat side is the product of the config */
    int fl[1];
    sb_operand_layout(&m.ops[1], &m.ops[1].out[0], 1, (int[]){8, 2, 1, 1}, fl);
    assert_int_equal(fl[0], 16);
    sb_operand_layout(&m.ops[2], &m.ops[2].in[0], 1, (int[]){8, 2}, fl);
    assert_int_equal(fl[0], 16);
    sb_model_free(&m);
}

/* -------------------------------------------------------------- edges -- */

/* Expert parallelism: the dispatch einsum split on batch, the expert
 * einsums on expert, the combine einsum on batch again. The edges between
 * them are relayouts (expert, batch/P) -> (expert/P, batch) and back, and
 * the edge cost prices each as one exchange of what a device receives,
 * N/P · (1 - 1/P) words forward and as much backward (N: the tensor's
 * elements): the per-device volume of an all-to-all. */
static void test_cost_moe_all_to_all(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[batch=8, seq=6, embed=4]\n"
             "weight wr[embed=4, expert=4]\n"
             "weight w1[expert=4, embed=4, ff=8]\n"
             "l = einsum(\"batch seq embed, embed expert -> batch seq expert\", x, wr)\n"
             "c, d = moe_gate(l, k=2, capacity=3)\n"
             "xe = einsum(\"batch seq expert cap, batch seq embed -> expert batch cap embed\", d, x)\n"
             "h = einsum(\"expert batch cap embed, expert embed ff -> expert batch cap ff\", xe, w1)\n"
             "y = einsum(\"batch seq expert cap, expert batch cap ff -> batch seq ff\", c, h)\n",
             &m);
    sb_cost_params cp;
    defaults(&cp);
    const sb_op *xe = &m.ops[2], *h = &m.ops[3], *y = &m.ops[4];
    assert_string_equal(xe->name, "xe");
    for (int P = 2; P <= 4; P *= 2) {
        /* xe (expert, batch, cap, embed, seq) on batch; h (expert, batch,
         * cap, ff, embed) on expert; y (batch, seq, ff, expert, cap) on batch */
        int cxe[5] = {1, P, 1, 1, 1}, ch[5] = {P, 1, 1, 1, 1}, cy[5] = {P, 1, 1, 1, 1};
        int ls[SB_MAX_DIMS], ld[SB_MAX_DIMS];
        const sb_tensor *t = &m.tensors[xe->out[0].tensor];
        double n = 4.0 * 8 * 3 * 4, want = W * 2.0 * n / P * (1.0 - 1.0 / P);
        sb_operand_layout(xe, &xe->out[0], t->ndims, cxe, ls);
        sb_operand_layout(h, &h->in[0], t->ndims, ch, ld);
        assert_close(sb_edge_cost(&cp, t, ls, ld), want, "dispatch -> experts");
        t = &m.tensors[h->out[0].tensor];
        n = 4.0 * 8 * 3 * 8;
        want = W * 2.0 * n / P * (1.0 - 1.0 / P);
        sb_operand_layout(h, &h->out[0], t->ndims, ch, ls);
        sb_operand_layout(y, &y->in[1], t->ndims, cy, ld);
        assert_close(sb_edge_cost(&cp, t, ls, ld), want, "experts -> combine");
    }
    sb_model_free(&m);
}

static void test_edge_cost(void **state)
{
    (void)state;
    sb_cost_params cp;
    defaults(&cp);
    sb_tensor t = {.name = "t", .ndims = 2, .producer = 0};
    t.dims[0].size = 8;
    t.dims[1].size = 16;
    /* same layout: nothing moves */
    assert_close(sb_edge_cost(&cp, &t, (int[]){2, 4}, (int[]){2, 4}), 0.0, "same layout");
    assert_close(sb_edge_cost(&cp, &t, (int[]){1, 1}, (int[]){1, 1}), 0.0, "both replicated");
    /* q_dst = 8 > q_src = 1: no overlap; t = (4, 4): 5000 * 2 * 16 */
    assert_close(sb_edge_cost(&cp, &t, (int[]){1, 1}, (int[]){2, 4}), W * 2 * 16,
                 "q_dst > q_src");
    /* q_dst = 4 > q_src = 2, although the blocks overlap in shape: still no overlap;
     * t = (2, 16): 5000 * 2 * 32 */
    assert_close(sb_edge_cost(&cp, &t, (int[]){2, 1}, (int[]){4, 1}), W * 2 * 32,
                 "q_dst > q_src, nested blocks");
    /* partial overlap: s = (4, 16), t = (8, 8), q 2 and 2:
     * overlap = min(4,8)*min(16,8) = 32, area 64: 5000 * 2 * (64 - 32) */
    assert_close(sb_edge_cost(&cp, &t, (int[]){2, 1}, (int[]){1, 2}), W * 2 * 32,
                 "partial overlap");
    /* to a coarser layout: s = (4, 4) on 8, t = (8, 16) on 1: overlap 16, area 128 */
    assert_close(sb_edge_cost(&cp, &t, (int[]){2, 4}, (int[]){1, 1}), W * 2 * (128 - 16),
                 "gather");
    /* s = (2, 16) on 4, t = (4, 16) on 2: overlap 32, area 64 */
    assert_close(sb_edge_cost(&cp, &t, (int[]){4, 1}, (int[]){2, 1}), W * 2 * 32, "coarsen");
    /* overlap never exceeds the area: s = t under the product rule: 0 */
    assert_close(sb_edge_cost(&cp, &t, (int[]){1, 8}, (int[]){1, 8}), 0.0, "same split");
    /* a rank-1 tensor (a flat side) */
    sb_tensor f = {.name = "f", .ndims = 1, .producer = 0};
    f.dims[0].size = 64;
    assert_close(sb_edge_cost(&cp, &f, (int[]){8}, (int[]){2}), W * 2 * (32 - 8), "flat");
}

/* A two-op model, whole strategy cost by hand: layouts come from the ops'
 * configs, edges from the tensors. */
static void test_strategy_cost_by_hand(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=8, f=16]\n"
             "h = dense(x, units=16)\n"
             "y = softmax(h)\n",
             &m);
    sb_cost_params cp;
    defaults(&cp);
    cp.cutoff = 1;
    sb_problem pb;
    sb_error err = {0};
    assert_int_equal(sb_problem_build(&m, 4, &cp, &pb, &err), 0);
    assert_int_equal(pb.nedges, 1); /* x is an input: no edge */
    int ch[2];
    ch[0] = find_cfg(&pb.cfg[0], (int[]){2, 2, 1});
    ch[1] = find_cfg(&pb.cfg[1], (int[]){4, 1});
    assert_true(ch[0] >= 0 && ch[1] >= 0);
    /* dense (2,2,1): m' = 4, n' = 8, k' = 16: 3*4*8*16 = 1536
     *   + AR(m'k' = 64, c_n = 2) + AR(n'k' = 128, c_m = 2) = 320000 + 640000
     * softmax (4,1): e = 2*16 = 32: 4*32 + 32*16 = 640
     * edge h (8,16): producer layout (2,2): s = (4,8), q = 4; consumer (4,1): t = (2,16),
     *   q = 4 <= 4: overlap = min(4,2)*min(8,16) = 16, area 32: 5000*2*16 = 160000 */
    double want = (1536.0 + 320000.0 + 640000.0) + 640.0 + 160000.0;
    assert_close(pb.cfg[0].cost[ch[0]], 1536.0 + 320000.0 + 640000.0, "dense in the problem");
    assert_close(sb_strategy_cost(&pb, ch), want, "strategy cost");
    /* replicated consumer: t = (8,16) on 1 device: overlap 4*8 = 32, area 128 */
    ch[1] = find_cfg(&pb.cfg[1], (int[]){1, 1});
    want = (1536.0 + 320000.0 + 640000.0) + (4.0 * 128 + 128.0 * 16) + W * 2 * (128 - 32);
    assert_close(sb_strategy_cost(&pb, ch), want, "strategy cost, gather");
    sb_problem_free(&pb);
    sb_model_free(&m);
}

/* ------------------------------------------------- config enumeration -- */

/* Independent reference: every tuple with c_i a divisor of D_i with
 * D_i/c_i >= cutoff (or 1 alone if none), never-split dims at 1, product
 * <= p, and reshape contiguity. Counts them. */
static int ref_count(const sb_op *op, int p, int cutoff)
{
    int nd = op->ndims, c[SB_MAX_DIMS], n = 0;
    int allowed[SB_MAX_DIMS][64], na[SB_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        na[i] = 0;
        if (!(op->nosplit & (1u << i)))
            for (int e = 1; e <= p && e <= op->dims[i].size; e++)
                if (op->dims[i].size % e == 0 && op->dims[i].size / e >= cutoff)
                    allowed[i][na[i]++] = e;
        if (na[i] == 0)
            allowed[i][na[i]++] = 1;
    }
    int idx[SB_MAX_DIMS] = {0};
    for (;;) {
        int64_t prod = 1;
        for (int i = 0; i < nd; i++) {
            c[i] = allowed[i][idx[i]];
            prod *= c[i];
        }
        int ok = prod <= p;
        if (ok && (op->kind == SB_OP_FLATTEN || op->kind == SB_OP_UNFLATTEN)) {
            /* leading dims fully split, then at most one partly split, then 1s */
            int i = 0;
            while (i < nd && c[i] == op->dims[i].size)
                i++;
            if (i < nd && c[i] != 1)
                i++;
            for (; i < nd; i++)
                ok &= c[i] == 1;
        }
        n += ok;
        int i = nd - 1;
        while (i >= 0 && ++idx[i] == na[i])
            idx[i--] = 0;
        if (i < 0)
            break;
    }
    return n;
}

static void check_configs(const sb_op *op, int p, int cutoff, int want)
{
    sb_configs cf;
    sb_error err = {0};
    if (sb_enumerate_configs(op, p, cutoff, &cf, &err) != 0)
        fail_msg("enumerate '%s': %s", op->name, err.msg);
    if (cf.n != want)
        fail_msg("op '%s' at p=%d cutoff=%d: %d configs, expected %d", op->name, p, cutoff, cf.n,
                 want);
    assert_int_equal(cf.ndims, op->ndims);
    assert_int_equal(ref_count(op, p, cutoff), want);
    for (int k = 0; k < cf.n; k++) {
        const int *c = cf.c + (size_t)k * (size_t)cf.ndims;
        int64_t prod = 1;
        for (int i = 0; i < cf.ndims; i++) {
            assert_true(c[i] >= 1);
            assert_int_equal(op->dims[i].size % c[i], 0);
            if (c[i] > 1)
                assert_true(op->dims[i].size / c[i] >= cutoff);
            if (op->nosplit & (1u << i))
                assert_int_equal(c[i], 1);
            prod *= c[i];
        }
        assert_true(prod <= p);
        for (int j = 0; j < k; j++)
            assert_true(memcmp(c, cf.c + (size_t)j * (size_t)cf.ndims,
                               (size_t)cf.ndims * sizeof(int)) != 0);
    }
    free(cf.c);
    free(cf.cost);
}

static void test_enumerate_configs(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=16, f=8]\n"
             "y = dense(x, units=12)\n"
             "input s[b=3, f=5]\n"
             "z = dense(s, units=7)\n"
             "input i[b=8, c=8, h=8, w=8]\n"
             "cv = conv(i, out=8)\n"
             "cc = concat(x, x, axis=f)\n"
             "input r[b=4, c=2, h=4]\n"
             "fl = flatten(r)\n"
             "input v[n=32]\n"
             "un = reshape(v, shape=[a=4, b=2, c=4])\n"
             "input q[b=4, s=8, u=16]\n"
             "ls = lstm(q)\n",
             &m);
    const sb_op *dense = &m.ops[0];
    /* (b, units, f) = (16, 12, 8), p = 8, cutoff 4:
     *   b in {1,2,4} (16/8 = 2 < 4), units in {1,2,3} (12/4 = 3 < 4), f in {1,2}
     *   product <= 8: b=1: 3*2 = 6; b=2: (1,1)(1,2)(2,1)(2,2)(3,1) = 5; b=4: (1,1)(1,2)(2,1) = 3 */
    check_configs(dense, 8, 4, 6 + 5 + 3);
    /* first dim slowest, ascending: first (1,1,1), second (1,1,2), last (4,2,1) */
    sb_configs cf;
    sb_error err;
    assert_int_equal(sb_enumerate_configs(dense, 8, 4, &cf, &err), 0);
    assert_int_equal(cf.c[0] * 100 + cf.c[1] * 10 + cf.c[2], 111);
    assert_int_equal(cf.c[3] * 100 + cf.c[4] * 10 + cf.c[5], 112);
    int last = (cf.n - 1) * 3;
    assert_int_equal(cf.c[last] * 100 + cf.c[last + 1] * 10 + cf.c[last + 2], 421);
    free(cf.c);
    free(cf.cost);
    /* cutoff 1: b in {1,2,4,8}, units in {1,2,3,4,6}, f in {1,2,4,8}
     *   b=1: u*f <= 8: 4+3+2+2+1 = 12; b=2: u*f <= 4: 3+2+1+1 = 7; b=4: 2+1 = 3; b=8: 1 */
    check_configs(dense, 8, 1, 12 + 7 + 3 + 1);
    /* one device: one config */
    check_configs(dense, 1, 1, 1);
    /* p = 2, cutoff 4: b in {1,2}, units {1,2}, f {1,2}: product <= 2: 1 + 3 */
    check_configs(dense, 2, 4, 4);
    /* no divisor qualifies: (3, 7, 5) at cutoff 4 -> just 1 each */
    check_configs(&m.ops[1], 8, 4, 1);
    /* cutoff 1: b {1,3}, units {1,7}, f {1,5}: (1,1,1) (1,1,5) (1,7,1) (3,1,1) */
    check_configs(&m.ops[1], 8, 1, 4);
    /* conv (b, c, h, w, r, s, n) = (8, 8, 8, 8, 1, 1, 8): h, w never split.
     * cutoff 4: b, c, n in {1,2}: 8 configs. cutoff 1: b, c, n in {1,2,4,8}
     * with product <= 8: exponents summing to <= 3: C(6,3) = 20 */
    check_configs(&m.ops[2], 8, 4, 8);
    check_configs(&m.ops[2], 8, 1, 20);
    /* concat (16, 16) along f: f never split; b in {1,2,4,8} at cutoff 1 */
    check_configs(&m.ops[3], 8, 1, 4);
    /* flatten (4, 2, 4), cutoff 1, p = 8: contiguous only:
     * (1,1,1) (2,1,1) (4,1,1) (4,2,1); not (1,2,1), (2,2,1), (1,1,2), ... */
    check_configs(&m.ops[4], 8, 1, 4);
    /* p = 16 adds (4,2,2) */
    check_configs(&m.ops[4], 16, 1, 5);
    /* the unflatten side of a rank-1 reshape: same space, same rule */
    assert_int_equal(m.ops[5].kind, SB_OP_UNFLATTEN);
    check_configs(&m.ops[5], 8, 1, 4);
    check_configs(&m.ops[5], 16, 1, 5);
    /* lstm (layers, seq, batch, n, k) = (1, 8, 4, 16, 16): seq never split;
     * cutoff 1, p = 2: (1,1,1,1,1), and 2 on batch, n or k: 4 */
    check_configs(&m.ops[6], 2, 1, 4);
    /* every op agrees with the reference at a few p and cutoffs */
    for (int i = 0; i < m.nops; i++)
        for (int p = 1; p <= 16; p++)
            for (int cut = 1; cut <= 4; cut++) {
                sb_configs c2;
                assert_int_equal(sb_enumerate_configs(&m.ops[i], p, cut, &c2, &err), 0);
                if (c2.n != ref_count(&m.ops[i], p, cut))
                    fail_msg("op '%s' p=%d cutoff=%d: %d configs, reference %d", m.ops[i].name,
                             p, cut, c2.n, ref_count(&m.ops[i], p, cut));
                free(c2.c);
                free(c2.cost);
            }
    sb_model_free(&m);
}

/* --------------------------------------------------- prototype checks -- */

static const char *proto_kind(sb_op_kind k)
{
    switch (k) {
    case SB_OP_CONV: return "Conv";
    case SB_OP_POOL: return "Pooling";
    case SB_OP_NORM: return "Norm";
    case SB_OP_DENSE: return "FC";
    case SB_OP_CONCAT: return "Concat";
    case SB_OP_REDUCE_MEAN: return "ReduceMean";
    case SB_OP_FLATTEN: return "Ravel";
    case SB_OP_UNFLATTEN: return "Unravel";
    case SB_OP_SOFTMAX_XENT: return "SoftmaxCrossEntropy";
    default: return "?";
    }
}

typedef struct {
    char model[64];
    sb_model m;
    sb_problem pb;
    int p, loaded;
} loaded_problem;

static void test_prototype_config_counts(void **state)
{
    (void)state;
    const char *path = DATA_DIR "prototype_config_counts.tsv";
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    char line[512];
    loaded_problem lp[4];
    int nlp = 0, rows = 0;
    sb_cost_params cp;
    defaults(&cp);
    sb_error err = {0};
    while (fgets(line, sizeof line, f)) {
        char model[64], type[64];
        int p, idx, n;
        if (line[0] == '#' || sscanf(line, "%63s %d %d %63s %d", model, &p, &idx, type, &n) != 5)
            continue;
        loaded_problem *L = NULL;
        for (int i = 0; i < nlp; i++)
            if (strcmp(lp[i].model, model) == 0 && lp[i].p == p)
                L = &lp[i];
        if (!L) {
            assert_true(nlp < 4);
            L = &lp[nlp++];
            snprintf(L->model, sizeof L->model, "%s", model);
            L->p = p;
            if (sb_model_load(model, NULL, 0, &L->m, &err) != 0)
                fail_msg("%s: %s", model, err.msg);
            if (sb_problem_build(&L->m, p, &cp, &L->pb, &err) != 0)
                fail_msg("%s p=%d: %s", model, p, err.msg);
        }
        if (idx >= L->m.nops)
            fail_msg("%s has %d ops; the reference has op %d", model, L->m.nops, idx);
        const sb_op *op = &L->m.ops[idx];
        if (strcmp(proto_kind(op->kind), type) != 0)
            fail_msg("%s op %d ('%s') is %s, the prototype's is %s", model, idx, op->name,
                     sb_op_kind_name(op->kind), type);
        if (L->pb.cfg[idx].n != n) {
            char dims[256];
            sb_op_dims_str(op, dims, sizeof dims);
            fail_msg("%s p=%d op %d ('%s' %s, %s): %d configs, the prototype has %d", model, p,
                     idx, op->name, type, dims, L->pb.cfg[idx].n, n);
        }
        rows++;
    }
    fclose(f);
    print_message("prototype config counts: %d rows checked\n", rows);
    assert_true(rows >= 14 + 219);
    for (int i = 0; i < nlp; i++) {
        /* every op of the model has a row */
        sb_problem_free(&lp[i].pb);
        sb_model_free(&lp[i].m);
    }
}

/* Every row of a (model, p, batch, total_cost, ops) file: the DP's optimum
 * equals the prototype's. */
static void check_prototype_costs(const char *path, int min_rows)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    char line[512];
    int rows = 0;
    sb_error err = {0};
    while (fgets(line, sizeof line, f)) {
        char model[64];
        int p, batch, nops;
        double want;
        if (line[0] == '#' || sscanf(line, "%63s %d %d %lf %d", model, &p, &batch, &want, &nops) != 5)
            continue;
        sb_setting set;
        snprintf(set.name, sizeof set.name, "batch");
        set.value = batch;
        sb_model m;
        if (sb_model_load(model, &set, 1, &m, &err) != 0)
            fail_msg("%s: %s", model, err.msg);
        assert_int_equal(m.nops, nops);
        sb_cost_params cp;
        defaults(&cp);
        sb_problem pb;
        if (sb_problem_build(&m, p, &cp, &pb, &err) != 0)
            fail_msg("%s p=%d: %s", model, p, err.msg);
        sb_search_opts so = {.algo = SB_ALGO_PASE};
        sb_result r;
        double t0 = sb_now();
        if (sb_search(&pb, &so, &r, &err) != 0)
            fail_msg("%s p=%d: search failed: %s", model, p, err.msg);
        double rel = fabs(r.total_cost - want) / want;
        print_message("prototype cost %s p=%d batch=%d: %.2f (reference %.2f, rel %.1e, %.2fs)\n",
                      model, p, batch, r.total_cost, want, rel, sb_now() - t0);
        if (!(rel <= 1e-9))
            fail_msg("%s p=%d batch=%d: DP total %.17g, the prototype's optimum is %.17g "
                     "(relative error %.3g)", model, p, batch, r.total_cost, want, rel);
        assert_close(sb_strategy_cost(&pb, r.choice), r.total_cost, "total = F(choice)");
        sb_result_free(&r);
        sb_problem_free(&pb);
        sb_model_free(&m);
        rows++;
    }
    fclose(f);
    if (rows < min_rows)
        fail_msg("%s: %d rows, expected at least %d", path, rows, min_rows);
}

static void test_prototype_costs(void **state)
{
    (void)state;
    check_prototype_costs(DATA_DIR "prototype_costs.tsv", 5);
}

/* The wider table we made by running the prototype (tests/data/): every
 * shipped paper model at p = 4..64 and other batch sizes. */
static void test_prototype_costs_extended(void **state)
{
    (void)state;
    check_prototype_costs(DATA_DIR "prototype_costs_extended.tsv", 30);
}

/* ---------------------------------------------------- calibrated model -- */

/* The calibrated terms by hand: bytes per word, latency per message step,
 * the elementwise factor; GEMM multiply-adds unchanged. */
static void test_calibrated_terms(void **state)
{
    (void)state;
    sb_cost_params cp;
    defaults(&cp);
    assert_true(cp.word_bytes == 8.0 && cp.elem_ratio == 1.0 && cp.latency_us == 0.0
                && cp.conv_ratio == 1.0);
    cp.tflops = 0.5;   /* 5e11 multiply-adds/s */
    cp.gbs = 2.0;      /* 2e9 B/s */
    cp.word_bytes = 4; /* 5e8 words/s: 1000 multiply-adds per word */
    cp.elem_ratio = 20;
    cp.latency_us = 3; /* 3e-6 s = 1.5e6 multiply-adds per step */
    assert_close(sb_words_to_flops(&cp, 7.0), 7000.0, "words at 4 bytes");
    /* AR(100, 4): bandwidth 1000 * 2*3*100/4, plus 2*3 steps of latency */
    assert_close(sb_allreduce_cost(&cp, 100.0, 4.0), 1000.0 * 150 + 6 * 1.5e6, "AR + latency");
    assert_close(sb_allreduce_cost(&cp, 100.0, 1.0), 0.0, "AR over one device: nothing");
    sb_tensor t = {.name = "t", .ndims = 2, .producer = 0};
    t.dims[0].size = 8;
    t.dims[1].size = 16;
    assert_close(sb_edge_cost(&cp, &t, (int[]){2, 4}, (int[]){2, 4}), 0.0,
                 "same layout: no message, no latency");
    assert_close(sb_edge_cost(&cp, &t, (int[]){2, 1}, (int[]){1, 2}), 1000.0 * 2 * 32 + 1.5e6,
                 "partial overlap: words plus one latency");
    sb_model m;
    parse_ok("input a[b=8, f=16]\n"
             "input b2[b=8, f=16]\n"
             "y = add(a, b2, pw=2)\n"
             "h = dense(a, units=32)\n",
             &m);
    /* elementwise: 20 x the reference's (1 + pw) e */
    assert_close(sb_op_cost(&m, &m.ops[0], (int[]){2, 2}, &cp), 20.0 * 96, "add pw=2 calibrated");
    /* dense (b=8, units=32, in=16) unsplit: 3 m n k multiply-adds, no pw, no comm */
    assert_close(sb_op_cost(&m, &m.ops[1], (int[]){1, 1, 1}, &cp), 3.0 * 8 * 32 * 16,
                 "dense unsplit: GEMM multiply-adds as in the reference");
    /* split k in 2: + AR of the (8 x 32) output over 2: 1000 * 256 + 2 steps latency */
    assert_close(sb_op_cost(&m, &m.ops[1], (int[]){1, 1, 2}, &cp),
                 3.0 * 8 * 32 * 8 + 1000.0 * 256 + 2 * 1.5e6, "dense k split: AR + latency");
    sb_model_free(&m);
    /* a convolution's multiply-adds cost conv_ratio GEMM multiply-adds; dense's do not */
    parse_ok("input x[b=2, c=3, h=8, w=8]\n"
             "y = conv(x, out=4, kernel=3, pad=1)\n"
             "input a[b=8, f=16]\n"
             "h = dense(a, units=32)\n",
             &m);
    double conv1 = sb_op_cost(&m, &m.ops[0], (int[]){1, 1, 1, 1, 1, 1, 1}, &cp);
    double dense1 = sb_op_cost(&m, &m.ops[1], (int[]){1, 1, 1}, &cp);
    cp.conv_ratio = 2.5;
    assert_close(sb_op_cost(&m, &m.ops[0], (int[]){1, 1, 1, 1, 1, 1, 1}, &cp), 2.5 * conv1,
                 "conv scaled by conv_ratio");
    assert_close(sb_op_cost(&m, &m.ops[1], (int[]){1, 1, 1}, &cp), dense1, "dense unchanged");
    sb_model_free(&m);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_cal_error(const char *path, const char *text, const char *want)
{
    write_text(path, text);
    sb_cost_params cp;
    defaults(&cp);
    sb_cost_params before = cp;
    sb_error err = {0};
    if (sb_calibration_load(path, &cp, &err) == 0)
        fail_msg("calibration file accepted, expected an error with '%s':\n%s", want, text);
    if (!strstr(err.msg, want))
        fail_msg("error '%s' lacks '%s'", err.msg, want);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_memory_equal(&cp, &before, sizeof cp); /* untouched */
}

static void test_calibration_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb_cal_XXXXXX", path[256], path2[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/cal.txt", dir);
    snprintf(path2, sizeof path2, "%s/saved.txt", dir);
    write_text(path, "# a comment\n\ntflops 0.05   # trailing comment\ngbs 3.5\nword_bytes 4\n"
                     "elem_ratio 12.5\nlatency_us 0\n");
    sb_cost_params cp;
    defaults(&cp);
    cp.cutoff = 7;
    sb_error err = {0};
    if (sb_calibration_load(path, &cp, &err))
        fail_msg("%s", err.msg);
    assert_true(cp.tflops == 0.05 && cp.gbs == 3.5 && cp.word_bytes == 4 && cp.elem_ratio == 12.5
                && cp.latency_us == 0);
    assert_int_equal(cp.cutoff, 7); /* kept */
    assert_true(cp.conv_ratio == 1.0); /* optional: absent means 1 */
    assert_string_equal(cp.calibration, path);
    /* save + load round trip */
    cp.latency_us = 17.25;
    cp.conv_ratio = 0.75;
    if (sb_calibration_save(path2, &cp, "test", &err))
        fail_msg("%s", err.msg);
    sb_cost_params back;
    defaults(&back);
    if (sb_calibration_load(path2, &back, &err))
        fail_msg("%s", err.msg);
    assert_true(back.tflops == 0.05 && back.gbs == 3.5 && back.word_bytes == 4
                && back.elem_ratio == 12.5 && back.latency_us == 17.25 && back.conv_ratio == 0.75);
    /* errors name the file and line */
    char want[512];
    snprintf(want, sizeof want, "%s:3: unknown key 'flops'", path);
    expect_cal_error(path, "tflops 1\ngbs 2\nflops 3\n", want);
    snprintf(want, sizeof want, "%s:2: 'tflops' given twice (first on line 1)", path);
    expect_cal_error(path, "tflops 1\ntflops 2\n", want);
    snprintf(want, sizeof want, "%s:1: gbs 'fast' is not a positive number", path);
    expect_cal_error(path, "gbs fast\n", want);
    snprintf(want, sizeof want, "%s:1: tflops '0' is not a positive number", path);
    expect_cal_error(path, "tflops 0\n", want);
    snprintf(want, sizeof want, "%s:1: latency_us '-1' is not a non-negative number", path);
    expect_cal_error(path, "latency_us -1\n", want);
    snprintf(want, sizeof want, "%s:1: expected 'key value'", path);
    expect_cal_error(path, "tflops 1 2\n", want);
    snprintf(want, sizeof want, "%s: no 'latency_us' line", path);
    expect_cal_error(path, "tflops 1\ngbs 2\nword_bytes 4\nelem_ratio 3\n", want);
    defaults(&cp);
    assert_int_not_equal(sb_calibration_load("/nonexistent/cal.txt", &cp, &err), 0);
    assert_non_null(strstr(err.msg, "/nonexistent/cal.txt"));
    remove(path);
    remove(path2);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calibrated_terms),
        cmocka_unit_test(test_calibration_file),
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_cost_dense),
        cmocka_unit_test(test_cost_zero),
        cmocka_unit_test(test_cost_einsum),
        cmocka_unit_test(test_cost_embedding),
        cmocka_unit_test(test_cost_conv),
        cmocka_unit_test(test_cost_conv_grouped),
        cmocka_unit_test(test_cost_lstm),
        cmocka_unit_test(test_cost_pool),
        cmocka_unit_test(test_cost_norm),
        cmocka_unit_test(test_cost_softmax),
        cmocka_unit_test(test_cost_llama_ops),
        cmocka_unit_test(test_cost_elementwise_reduce),
        cmocka_unit_test(test_cost_pointwise),
        cmocka_unit_test(test_cost_softcap),
        cmocka_unit_test(test_cost_moe_dispatch_gpu),
        cmocka_unit_test(test_cost_free_ops),
        cmocka_unit_test(test_edge_cost),
        cmocka_unit_test(test_cost_moe_all_to_all),
        cmocka_unit_test(test_strategy_cost_by_hand),
        cmocka_unit_test(test_enumerate_configs),
        cmocka_unit_test(test_prototype_config_counts),
        cmocka_unit_test(test_prototype_costs),
        cmocka_unit_test(test_prototype_costs_extended),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
