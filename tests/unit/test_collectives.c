/* tests/unit/test_collectives.c: cmocka tests of the collectives priced by the
 * links their group spans (cost/terms.c, sb_coll_*): the placement of a
 * group of an op's grid on nodes (by hand, against a rank-by-rank count of
 * every group, and for grids that do not line up with the node size), each
 * pricing function by hand-computed figures, and the reference model's
 * terms unchanged without a machine. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/search.h"

static void close_to(double got, double want, const char *what)
{
    if (!(fabs(got - want) <= 1e-12 * fabs(want) + 1e-9))
        fail_msg("%s: got %.17g, want %.17g", what, got, want);
}

/* 1 TFLOP/s, 4-byte words; intra 4 GB/s (1000 FLOP a word), 1 us (1e6
 * FLOP a step); inter 1 GB/s (4000 FLOP a word), 2 us (2e6 FLOP a step);
 * 8 devices a node. */
static sb_cost_params two_links(void)
{
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.tflops = 1.0;
    cp.word_bytes = 4.0;
    cp.gbs = 4.0;
    cp.latency_us = 1.0;
    cp.gbs_inter = 1.0;
    cp.latency_inter_us = 2.0;
    cp.node_devices = 8;
    return cp;
}

static void expect_group(const sb_cost_params *cp, const int *c, int nd, uint32_t dims, double q,
                         double per_node, double nodes, const char *word)
{
    sb_coll_group g = sb_coll_group_of(cp, c, nd, dims);
    if (g.q != q || g.per_node != per_node || g.nodes != nodes)
        fail_msg("grid of %d dims, dims 0x%x: got q %g, %g a node, %g nodes; want %g, %g, %g", nd,
                 dims, g.q, g.per_node, g.nodes, q, per_node, nodes);
    assert_string_equal(sb_coll_group_word(g), word);
}

/* Placements worked out by hand (ranks row-major, last dim fastest; 8 a node). */
static void test_group_by_hand(void **state)
{
    (void)state;
    sb_cost_params cp = two_links();
    int c16[1] = {16};
    expect_group(&cp, c16, 1, 1u, 16, 8, 2, "both");
    int c2x8[2] = {2, 8}; /* dim 0: stride 8, one rank a node; dim 1 inside */
    expect_group(&cp, c2x8, 2, 1u, 2, 1, 2, "inter");
    expect_group(&cp, c2x8, 2, 2u, 8, 8, 1, "intra");
    expect_group(&cp, c2x8, 2, 3u, 16, 8, 2, "both");
    int c8x2[2] = {8, 2}; /* dim 0: ranks 0 2 4 6 | 8 10 12 14 */
    expect_group(&cp, c8x2, 2, 1u, 8, 4, 2, "both");
    expect_group(&cp, c8x2, 2, 2u, 2, 2, 1, "intra");
    int c444[3] = {4, 4, 4};
    expect_group(&cp, c444, 3, 4u, 4, 4, 1, "intra");
    expect_group(&cp, c444, 3, 2u, 4, 2, 2, "both");
    expect_group(&cp, c444, 3, 1u, 4, 1, 4, "inter");
    expect_group(&cp, c444, 3, 6u, 16, 8, 2, "both");
    expect_group(&cp, c444, 3, 0u, 1, 1, 1, "intra");
    int c23[2] = {2, 3}; /* 6 ranks: all on node 0 */
    expect_group(&cp, c23, 2, 3u, 6, 6, 1, "intra");
    /* 3 x 4 = 12 ranks: dim 0 (stride 4) is ranks 0 4 8, two on node 0 and
     * one on node 1: counted rank by rank */
    int c34[2] = {3, 4};
    expect_group(&cp, c34, 2, 1u, 3, 2, 2, "both");
    expect_group(&cp, c34, 2, 2u, 4, 4, 1, "intra");
    /* no machine: one node */
    sb_cost_params ref;
    sb_cost_params_default(&ref);
    expect_group(&ref, c16, 1, 1u, 16, 16, 1, "intra");
    /* the first q ranks */
    sb_coll_group f = sb_coll_group_first(&cp, 16);
    assert_true(f.q == 16 && f.per_node == 8 && f.nodes == 2);
    f = sb_coll_group_first(&cp, 8);
    assert_true(f.q == 8 && f.per_node == 8 && f.nodes == 1);
}

/* Every group of the grid counted rank by rank (nodes of n ranks): the
 * largest count on a node and the number of nodes, over all groups (the
 * same for every group when the grid lines up with n). */
static void count_groups(const int *c, int nd, uint32_t dims, int n, int ncyc, double *per_node,
                         double *nodes, int *uniform)
{
    int total = 1;
    for (int d = 0; d < nd; d++)
        total *= c[d];
    int nnodes = ncyc ? ncyc : (total + n - 1) / n; /* ncyc: rank r on node r mod ncyc */
    /* group key: the coords outside dims, row-major */
    int *cnt = calloc((size_t)total * (size_t)nnodes, sizeof *cnt);
    assert_non_null(cnt);
    for (int r = 0; r < total; r++) {
        int key = 0, x = r, g[8];
        for (int d = nd - 1; d >= 0; d--) {
            g[d] = x % c[d];
            x /= c[d];
        }
        for (int d = 0; d < nd; d++)
            if (!(dims & (1u << d)))
                key = key * c[d] + g[d];
        cnt[(size_t)key * (size_t)nnodes + (size_t)(ncyc ? r % ncyc : r / n)]++;
    }
    double k0 = -1, m0 = -1;
    *uniform = 1;
    for (int key = 0; key < total; key++) {
        double most = 0, met = 0, any = 0;
        for (int j = 0; j < nnodes; j++) {
            int v = cnt[(size_t)key * (size_t)nnodes + (size_t)j];
            any += v;
            met += v > 0;
            most = v > most ? v : most;
        }
        if (!any)
            continue;
        if (k0 < 0) {
            k0 = most;
            m0 = met;
        } else if (most != k0 || met != m0) {
            *uniform = 0;
        }
    }
    free(cnt);
    *per_node = k0;
    *nodes = m0;
}

/* Ranks cyclic on the nodes (cp.node_order 1: rank r on node r mod
 * (devices / 8)), worked out by hand at 16 devices, two nodes, beside block. */
static void test_group_cyclic_by_hand(void **state)
{
    (void)state;
    sb_cost_params cp = two_links();
    cp.devices = 16;
    int c8x2[2] = {8, 2}; /* dim 0: ranks 0, 2, ..., 14; dim 1: ranks 0, 1 */
    expect_group(&cp, c8x2, 2, 1u, 8, 4, 2, "both");  /* block: 4 on each node */
    expect_group(&cp, c8x2, 2, 2u, 2, 2, 1, "intra"); /* block: ranks 0, 1 on node 0 */
    cp.node_order = 1;
    expect_group(&cp, c8x2, 2, 1u, 8, 8, 1, "intra"); /* even ranks: all on node 0 */
    expect_group(&cp, c8x2, 2, 2u, 2, 1, 2, "inter"); /* ranks 0, 1: nodes 0, 1 */
    int c16[1] = {16};
    expect_group(&cp, c16, 1, 1u, 16, 8, 2, "both");
    int c4[1] = {4}; /* a grid of 4 of the 16 ranks: 0..3 over both nodes */
    expect_group(&cp, c4, 1, 1u, 4, 2, 2, "both");
    sb_coll_group f = sb_coll_group_first(&cp, 4);
    assert_true(f.q == 4 && f.per_node == 2 && f.nodes == 2);
    f = sb_coll_group_first(&cp, 1);
    assert_true(f.per_node == 1 && f.nodes == 1);
    assert_int_equal(sb_node_of(&cp, 13), 1);
    assert_int_equal(sb_node_of(&cp, 14), 0);
    cp.devices = 12; /* not a multiple of the node: block */
    assert_false(sb_node_order_possible(&cp));
    expect_group(&cp, c8x2, 2, 2u, 2, 2, 1, "intra");
    assert_int_equal(sb_node_of(&cp, 9), 1);
}

/* Ranks cyclic on 12 devices in nodes of 4 (3 nodes): grids whose strides
 * do not line up with the node count, every subset of dims, against the
 * rank-by-rank count (the group of rank 0). */
static void test_group_cyclic_uneven(void **state)
{
    (void)state;
    sb_cost_params cp = two_links();
    cp.node_devices = 4;
    cp.devices = 12;
    cp.node_order = 1;
    static const int grids[][2] = {{3, 4}, {4, 3}, {6, 2}, {2, 6}, {12, 1}, {2, 3}, {3, 2}};
    int checked = 0;
    for (size_t k = 0; k < sizeof grids / sizeof *grids; k++)
        for (uint32_t dims = 1; dims < 4; dims++) {
            double per, nodes;
            int uniform;
            count_groups(grids[k], 2, dims, 4, 3, &per, &nodes, &uniform);
            sb_coll_group g = sb_coll_group_of(&cp, grids[k], 2, dims);
            if (g.per_node != per || g.nodes != nodes)
                fail_msg("grid %d x %d, dims 0x%x: got %g a node, %g nodes; counted %g, %g",
                         grids[k][0], grids[k][1], dims, g.per_node, g.nodes, per, nodes);
            checked++;
        }
    assert_int_equal(checked, 21);
}

/* Power-of-two grids of 2..4 dims up to 256 ranks, nodes of 1 .. 16, every
 * subset of dims, ranks in blocks and cyclic (on 256 devices): the
 * placement equals the count of every group. */
static void test_group_against_count(void **state)
{
    (void)state;
    sb_cost_params cp = two_links();
    int checked = 0;
    for (int cyc = 0; cyc < 2; cyc++)
    for (int n = 1; n <= 16; n *= 2) {
        cp.node_devices = n;
        cp.node_order = cyc; /* cyclic: ranks r mod (256 / n) on 256 devices */
        cp.devices = 256;
        for (int code = 0; code < 4 * 4 * 4 * 4; code++) {
            int c[4], nd = 0, total = 1;
            for (int x = code; nd < 4; x /= 4)
                c[nd++] = 1 << (x % 4);
            for (int used = 2; used <= 4; used++) {
                total = 1;
                for (int d = 0; d < used; d++)
                    total *= c[d];
                if (total > 256)
                    continue;
                for (uint32_t dims = 0; dims < (1u << used); dims++) {
                    double k, m;
                    int uniform;
                    count_groups(c, used, dims, n, cyc ? 256 / n : 0, &k, &m, &uniform);
                    assert_true(uniform);
                    sb_coll_group g = sb_coll_group_of(&cp, c, used, dims);
                    if (g.per_node != k || g.nodes != m)
                        fail_msg("n %d%s, grid %d %d %d %d (%d dims), dims 0x%x: got %g a node, "
                                 "%g nodes; counted %g, %g", n, cyc ? " cyclic" : "", c[0], c[1],
                                 c[2], c[3], used, dims, g.per_node, g.nodes, k, m);
                    checked++;
                }
            }
        }
    }
    assert_true(checked > 2000);
}

/* Each collective by hand on two_links(). */
static void test_pricing_by_hand(void **state)
{
    (void)state;
    sb_cost_params cp = two_links();
    sb_coll_group in4 = {4, 4, 1}, x16 = {16, 8, 2}, one = {1, 1, 1};
    /* all-reduce inside a node: 6 steps of 100 words, 6 intra latencies */
    close_to(sb_coll_allreduce(&cp, 400, in4), 1000.0 * 600 + 6e6, "AR(400) in 4");
    /* across 2 nodes of 8: flat 30 steps of 100 words over inter = 7.2e7;
     * hierarchical 2 x (7 steps of 200 intra) + 2 steps of 100 inter */
    double flat = 4000.0 * 3000 + 30 * 2e6;
    double hier = 2 * (1000.0 * 1400 + 7e6) + (4000.0 * 200 + 2 * 2e6);
    assert_true(hier < flat);
    close_to(sb_coll_allreduce(&cp, 1600, x16), hier, "AR(1600) over 2 x 8");
    close_to(sb_coll_allreduce(&cp, 1600, one), 0.0, "AR over one rank");
    /* the flat ring wins when the intra-node latency is the larger */
    sb_cost_params slow = cp;
    slow.gbs_inter = 4.0;
    slow.latency_us = 10.0;
    slow.latency_inter_us = 1.0;
    sb_coll_group x4 = {4, 2, 2};
    close_to(sb_coll_allreduce(&slow, 400, x4), 1000.0 * 600 + 6 * 1e6, "AR: flat ring wins");
    /* reduce-scatter and all-gather: one pass */
    close_to(sb_coll_reduce_scatter(&cp, 400, in4), 1000.0 * 300 + 3e6, "RS(400) in 4");
    double rs = (1000.0 * 1400 + 7e6) + (4000.0 * 100 + 2e6);
    assert_true(rs < 4000.0 * 1500 + 15 * 2e6);
    close_to(sb_coll_reduce_scatter(&cp, 1600, x16), rs, "RS(1600) over 2 x 8");
    close_to(sb_coll_allgather(&cp, 400, in4), 1000.0 * 300 + 3e6, "AG(400) in 4");
    close_to(sb_coll_allgather(&cp, 1600, x16), rs, "AG(1600) over 2 x 8");
    /* all-to-all of 150 received words over 2 x 8: 70 over intra, 80 over
     * inter at once, one inter latency; inside a node: all intra */
    close_to(sb_coll_alltoall(&cp, 150, x16), 4000.0 * 80 + 2e6, "A2A(150) over 2 x 8");
    close_to(sb_coll_alltoall(&cp, 150, in4), 1000.0 * 150 + 1e6, "A2A(150) in 4");
    close_to(sb_coll_alltoall(&cp, 0, x16), 0.0, "A2A of nothing");
    /* point-to-point and relayout */
    close_to(sb_coll_p2p(&cp, 100, 0), 1000.0 * 100 + 1e6, "p2p intra");
    close_to(sb_coll_p2p(&cp, 100, 1), 4000.0 * 100 + 2e6, "p2p inter");
    close_to(sb_coll_p2p(&cp, 0, 1), 0.0, "p2p of nothing");
    close_to(sb_coll_relayout(&cp, 150, 16, 0), 4000.0 * 80 + 2e6, "relayout over 16");
    close_to(sb_coll_relayout(&cp, 150, 8, 0), 1000.0 * 150 + 1e6, "relayout over 8");
    sb_cost_params one_link = cp;
    one_link.node_devices = 0;
    close_to(sb_coll_p2p(&one_link, 100, 1), 1000.0 * 100 + 1e6, "p2p inter without nodes");
}

/* Without a machine every collective is the reference model's term, to the
 * last bit: 2(q-1) steps of words/q at B, and halves of it. */
static void test_reference_terms(void **state)
{
    (void)state;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.latency_us = 1.5;
    int c[3] = {3, 5, 7};
    for (uint32_t dims = 0; dims < 8; dims++) {
        sb_coll_group g = sb_coll_group_of(&cp, c, 3, dims);
        double q = g.q, w = 12345.678;
        double fpw = (cp.tflops * 1000.0) / (cp.gbs / cp.word_bytes);
        double steps = 2.0 * (q - 1.0);
        double ar = fpw * ((w / q) * steps) + (steps > 0 ? steps * 1.5 * cp.tflops * 1e6 : 0.0);
        assert_true(sb_coll_allreduce(&cp, w, g) == ar);
        assert_true(sb_allreduce_cost(&cp, w, q) == ar);
        assert_true(sb_coll_allgather(&cp, w, g) == 0.5 * ar);
        assert_true(sb_coll_reduce_scatter(&cp, w, g) == 0.5 * ar);
        assert_true(sb_coll_alltoall(&cp, w, g) == fpw * w + 1.5 * cp.tflops * 1e6);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_by_hand),
        cmocka_unit_test(test_group_cyclic_by_hand),
        cmocka_unit_test(test_group_cyclic_uneven),
        cmocka_unit_test(test_group_against_count),
        cmocka_unit_test(test_pricing_by_hand),
        cmocka_unit_test(test_reference_terms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
