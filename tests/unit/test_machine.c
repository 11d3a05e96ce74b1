/* tests/unit/test_machine.c: cmocka tests of machine files (cost/machine.c)
 * and of the two links in the cost model's shared terms (cost/terms.c):
 * a good file, every error class naming file:line, the key and the value,
 * the shipped files loading by name, one all-reduce term computed by hand,
 * and a problem of p <= devices_per_node using only the intra-node link. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "shardbench/candidates.h"
#include "shardbench/machine.h"
#include "shardbench/model.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

static const char good[] = "# a test machine\n"
                           "devices_per_node 8\n"
                           "nodes 2\n"
                           "tflops_fp32 60   # fp32\n"
                           "tflops_tf32 400\n"
                           "tflops_bf16 800\n"
                           "mem_gib 100\n"
                           "mem_gbs 4000\n"
                           "\n"
                           "intra_gbs 400\n"
                           "intra_latency_us 10\n"
                           "inter_gbs 50\n"
                           "inter_latency_us 20\n"
                           "eff_conv 0.5\n";

static void test_good(void **state)
{
    (void)state;
    sb_machine mc;
    sb_error err = {0};
    assert_int_equal(sb_machine_parse(good, "t.machine", &mc, &err), 0);
    assert_int_equal(mc.devices_per_node, 8);
    assert_int_equal(mc.nodes, 2);
    assert_true(mc.tflops_fp32 == 60 && mc.tflops_bf16 == 800 && mc.inter_latency_us == 20);
    assert_true(mc.eff_gemm == 1 && mc.eff_conv == 0.5 && mc.eff_elementwise == 1);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.cutoff = 3;
    sb_machine_cost_params(&mc, &cp);
    assert_true(cp.tflops == 60 && cp.gbs == 400 && cp.latency_us == 10 && cp.word_bytes == 4);
    assert_true(cp.gbs_inter == 50 && cp.latency_inter_us == 20 && cp.node_devices == 8);
    assert_true(cp.conv_ratio == 2 && cp.elem_ratio == 1 && cp.cutoff == 3);
}

/* good with line `line` (1-based) replaced by `with`. */
static void refused(int line, const char *with, const char *want1, const char *want2)
{
    char text[2048] = "";
    const char *p = good;
    for (int l = 1; *p; l++) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p) + 1;
        if (l == line) {
            strcat(text, with);
            strcat(text, "\n");
        } else {
            strncat(text, p, n);
        }
        p += n;
    }
    sb_machine mc;
    sb_error err = {0};
    assert_int_equal(sb_machine_parse(text, "t.machine", &mc, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, want1) || (want2 && !strstr(err.msg, want2)))
        fail_msg("line %d '%s': got '%s', want '%s' and '%s'", line, with, err.msg, want1,
                 want2 ? want2 : "");
}

static void test_errors(void **state)
{
    (void)state;
    refused(2, "devices_per_nod 8", "t.machine:2:", "unknown key 'devices_per_nod'");
    refused(3, "devices_per_node 8", "t.machine:3:", "'devices_per_node' given twice (first on line 2)");
    refused(4, "tflops_fp32 fast", "t.machine:4:", "tflops_fp32 'fast'");
    refused(4, "tflops_fp32 nan", "t.machine:4:", "not a number");
    refused(4, "tflops_fp32 1e9", "t.machine:4: tflops_fp32 1e9 is out of range", NULL);
    refused(7, "mem_gib 0", "t.machine:7: mem_gib 0 is out of range", NULL);
    refused(11, "intra_latency_us -1", "t.machine:11: intra_latency_us -1 is out of range", NULL);
    refused(3, "nodes 2.5", "t.machine:3: nodes '2.5' is not a whole number", NULL);
    refused(14, "eff_conv 2", "t.machine:14: eff_conv 2 is out of range", NULL);
    refused(5, "tflops_tf32 400 500", "t.machine:5: expected 'key value'", NULL);
    /* issue 39: decimal numbers only (strtod took hex and "infinity" shapes) */
    refused(4, "tflops_fp32 0x10", "t.machine:4:", "tflops_fp32 '0x10' is not a number");
    refused(4, "tflops_fp32 0x1p4", "t.machine:4:", "is not a number");
    refused(4, "tflops_fp32 infinity", "t.machine:4:", "is not a number");
    refused(12, "", "t.machine: no 'inter_gbs' line", NULL);
    refused(3, "nodes 65536", "over 65536", NULL);
    /* the fused attention's curves: seq:tflops points, both or none */
    const char *fwd = "attn_fwd_tflops 512:300,2048:500";
    refused(14, fwd, "t.machine: attn_fwd_tflops without attn_bwd_tflops", NULL);
    refused(14, "attn_bwd_tflops 512:300", "t.machine: attn_bwd_tflops without attn_fwd_tflops", NULL);
    refused(14, "attn_fwd_tflops 512", "t.machine:14: attn_fwd_tflops point '512' is not seq:tflops", NULL);
    refused(14, "attn_fwd_tflops 512:fast", "t.machine:14: attn_fwd_tflops at 512: 'fast'", NULL);
    refused(14, "attn_fwd_tflops 512:0", "t.machine:14: attn_fwd_tflops at 512: '0' is not a number in", NULL);
    refused(14, "attn_fwd_tflops 51.5:300", "t.machine:14:", "sequence length '51.5' is not a whole");
    refused(14, "attn_fwd_tflops 0:300", "t.machine:14:", "sequence length '0'");
    refused(14, "attn_fwd_tflops 2048:300,512:400", "t.machine:14:", "must increase (512 after 2048)");
    refused(14, "attn_fwd_tflops 512:300,,1024:400", "t.machine:14:", "expected seq:tflops points");
    refused(14, "attn_fwd_tflops 512:300,", "t.machine:14:", "ends with a comma");
    refused(14, "attn_fwd_tflops 1:1,2:1,3:1,4:1,5:1,6:1,7:1,8:1,9:1,10:1,11:1,12:1,13:1",
            "t.machine:14: attn_fwd_tflops has over 12 points", NULL);
    char longline[1100];
    memset(longline, 'x', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    refused(1, longline, "t.machine:1: line too long", NULL);
    /* a fraction of an SM; a recipe whose peak the file lacks, named where it stands */
    refused(14, "sms 1.5", "t.machine:14: sms 1.5 is not a whole number", NULL);
    refused(14, "precision fp8", "t.machine:14: precision fp8 without a tflops_fp8 line", NULL);
}

/* sb_shipped_names: the regular files NAME.EXT of the folders, each name
 * once, sorted; not hidden files, other extensions, folders or a bare
 * ".ext"; missing folders skipped. */
static void test_shipped_names(void **state)
{
    (void)state;
    char d1[] = "/tmp/sb-names-XXXXXX", d2[] = "/tmp/sb-names-XXXXXX";
    assert_non_null(mkdtemp(d1));
    assert_non_null(mkdtemp(d2));
    const char *files[][2] = {{d1, "b.machine"}, {d1, "a.machine"}, {d1, ".hidden.machine"},
                              {d1, "c.model"},   {d1, ".machine"},  {d2, "a.machine"},
                              {d2, "z.machine"}, {d2, "y.machinex"}};
    char path[512];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", files[i][0], files[i][1]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/dir.machine", d1);
    assert_int_equal(mkdir(path, 0700), 0);
    const char *dirs[4] = {d1, NULL, "/nonexistent-sb-dir", d2};
    char **names = sb_shipped_names("machine", dirs, 4);
    assert_non_null(names);
    char list[256];
    sb_join_names((const char *const *)names, list, sizeof list);
    assert_string_equal(list, "a, b, z");
    sb_names_free(names);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", d1, d2);
    assert_int_equal(system(cmd), 0);
}

static void test_shipped(void **state)
{
    (void)state;
    setenv("SHARDBENCH_MACHINES", SB_SOURCE_DIR "/machines", 1);
    char **names = sb_shipped_machines();
    assert_non_null(names);
    int gpu = 0;
    for (int i = 0; names[i]; i++) {
        size_t len = strlen(names[i]);
        if (len > 5 && !strcmp(names[i] + len - 5, "-here"))
            continue; /* what calibrate wrote here: a CPU, not a shipped node */
        sb_machine mc;
        sb_error err = {0};
        if (sb_machine_load(names[i], &mc, &err))
            fail_msg("%s: %s", names[i], err.msg);
        assert_int_equal(mc.devices_per_node, 8);
        assert_true(mc.inter_gbs < mc.intra_gbs);
        gpu += !strcmp(names[i], "h200-sxm") || !strcmp(names[i], "h100-sxm")
               || !strcmp(names[i], "a100-sxm-80g");
    }
    sb_names_free(names);
    assert_int_equal(gpu, 3); /* found by scanning machines/, not from a list */
    sb_machine mc;
    sb_error err = {0};
    assert_int_equal(sb_machine_load("no-such-gpu", &mc, &err), -1);
    assert_non_null(strstr(err.msg, "unknown machine 'no-such-gpu'"));
    assert_int_equal(sb_machine_load(SB_SOURCE_DIR "/machines", &mc, &err), -1);
}

/* One all-reduce by hand on h200-sxm: 67 TFLOP/s fp32, 4-byte words;
 * intra 450 GB/s and 10 us, inter 50 GB/s and 20 us. */
static void test_allreduce_by_hand(void **state)
{
    (void)state;
    sb_machine mc;
    sb_error err = {0};
    assert_int_equal(sb_machine_load(SB_SOURCE_DIR "/machines/h200-sxm.machine", &mc, &err), 0);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_machine_cost_params(&mc, &cp);
    double w = 1 << 20;
    /* q = 8: words/q * 2(q-1) words at 67e3 GFLOP/s over 450/4 GWords/s,
     * plus 14 steps of 10 us at 67e12 FLOP/s */
    double want8 = (w / 8 * 14) * (67e3 / (450.0 / 4)) + 14 * 10e-6 * 67e12;
    assert_true(fabs(sb_allreduce_cost(&cp, w, 8) - want8) <= 1e-9 * want8);
    /* q = 16, ranks 0..15 on two nodes: the flat ring over InfiniBand (30
     * steps of w/16) costs more than the hierarchical all-reduce: a
     * reduce-scatter and an all-gather inside each node (7 steps of w/8
     * each) and an all-reduce of w/8 between the two nodes (2 steps of
     * w/16) */
    double flat16 = (w / 16 * 30) * (67e3 / (50.0 / 4)) + 30 * 20e-6 * 67e12;
    double want16 = 2 * ((w / 8 * 7) * (67e3 / (450.0 / 4)) + 7 * 10e-6 * 67e12)
                    + (w / 16 * 2) * (67e3 / (50.0 / 4)) + 2 * 20e-6 * 67e12;
    assert_true(want16 < flat16);
    assert_true(fabs(sb_allreduce_cost(&cp, w, 16) - want16) <= 1e-9 * want16);
    assert_true(sb_allreduce_cost(&cp, w, 1) == 0);
}

static double dp_cost(const sb_model *m, int p, const sb_cost_params *cp)
{
    sb_problem pb;
    sb_error err = {0};
    assert_int_equal(sb_problem_build(m, p, cp, &pb, &err), 0);
    int *choice = calloc((size_t)m->nops, sizeof *choice);
    assert_non_null(choice);
    assert_int_equal(sb_strategy_data_parallel(&pb, choice, &err), 0);
    double c = sb_strategy_cost(&pb, choice);
    free(choice);
    sb_problem_free(&pb);
    return c;
}

/* At p <= devices_per_node the inter-node figures change nothing; at p = 16
 * they do; without a machine the reference model is unchanged. */
static void test_intra_only(void **state)
{
    (void)state;
    sb_model m;
    sb_error err = {0};
    sb_setting set[1];
    assert_int_equal(sb_setting_parse("layers=2", &set[0], &err), 0);
    assert_int_equal(sb_model_load("transformer", set, 1, &m, &err), 0);
    sb_machine mc;
    assert_int_equal(sb_machine_load(SB_SOURCE_DIR "/machines/h200-sxm.machine", &mc, &err), 0);
    sb_cost_params a, b, ref;
    sb_cost_params_default(&a);
    sb_cost_params_default(&ref);
    sb_machine_cost_params(&mc, &a);
    b = a;
    b.gbs_inter = 1e-3;
    b.latency_inter_us = 1e5;
    for (int p = 1; p <= 8; p *= 2) {
        double ca = dp_cost(&m, p, &a), cb = dp_cost(&m, p, &b);
        assert_true(isfinite(ca));
        assert_true(ca == cb);
        if (p > 1)
            assert_true(ca != dp_cost(&m, p, &ref));
    }
    assert_true(dp_cost(&m, 16, &a) != dp_cost(&m, 16, &b));
    sb_model_free(&m);
}

/* The attention curves: read, interpolated in log2 of the sequence length
 * (the end points' values outside), written back by sb_machine_save. */
static void test_attention_curves(void **state)
{
    (void)state;
    char text[2048];
    snprintf(text, sizeof text, "%sattn_fwd_tflops 512:300,2048:500,8192:600\n"
             "attn_bwd_tflops 1024:200,4096:400\n", good);
    sb_machine mc, back;
    sb_error err = {0};
    if (sb_machine_parse(text, "t.machine", &mc, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(mc.attn_fwd_tflops.n, 3);
    assert_int_equal(mc.attn_bwd_tflops.n, 2);
    const sb_curve *f = &mc.attn_fwd_tflops;
    assert_true(sb_curve_at(f, 100) == 300 && sb_curve_at(f, 512) == 300);
    assert_true(fabs(sb_curve_at(f, 1024) - 400) < 1e-9); /* half way in log2 */
    assert_true(fabs(sb_curve_at(f, 4096) - 550) < 1e-9);
    assert_true(sb_curve_at(f, 8192) == 600 && sb_curve_at(f, 1e6) == 600);
    sb_curve none = {0};
    assert_true(sb_curve_at(&none, 4096) == 0);
    char dir[] = "/tmp/test_machine.XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/c.machine", dir);
    assert_int_equal(sb_machine_save(path, &mc, NULL, &err), 0);
    if (sb_machine_load(path, &back, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(back.attn_fwd_tflops.n, 3);
    for (int i = 0; i < 3; i++)
        assert_true(back.attn_fwd_tflops.x[i] == f->x[i] && back.attn_fwd_tflops.y[i] == f->y[i]);
    assert_true(back.attn_bwd_tflops.n == 2 && back.attn_bwd_tflops.y[1] == 400);
    unlink(path);
    rmdir(dir);
}

/* A calibration as a machine file (what `calibrate --machine-out` writes):
 * saved, loaded back, the same cost parameters; an elementwise ratio below
 * 1 moves into eff_gemm, a link under 1 MB/s is kept; one no efficiency
 * can express is refused. */
static void test_from_calibration(void **state)
{
    (void)state;
    sb_cost_params cal;
    sb_cost_params_default(&cal);
    cal.tflops = 0.0412;
    cal.gbs = 2.31;
    cal.word_bytes = 4;
    cal.elem_ratio = 21.5;
    cal.latency_us = 31.2;
    cal.conv_ratio = 0.61;
    char dir[] = "/tmp/test_machine.XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/here.machine", dir);
    for (int round = 0; round < 2; round++) {
        if (round) {
            cal.elem_ratio = 0.25; /* cheaper than a multiply-add */
            cal.gbs = 6e-4;        /* a tiny all-reduce on a loaded machine */
        }
        sb_machine mc, back;
        sb_error err = {0};
        assert_int_equal(sb_machine_from_cost_params(&cal, 2, 7.5, 20, &mc, &err), 0);
        assert_true(mc.eff_gemm <= 1 && mc.eff_conv <= 1 && mc.eff_elementwise <= 1);
        assert_int_equal(sb_machine_save(path, &mc, "a test", &err), 0);
        if (sb_machine_load(path, &back, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(back.devices_per_node, 2);
        assert_int_equal(back.nodes, 1);
        assert_true(back.mem_gib == 7.5 && back.mem_gbs == 20);
        sb_cost_params cp;
        sb_cost_params_default(&cp);
        sb_machine_cost_params(&back, &cp);
        double fig[5][2] = {{cal.tflops, cp.tflops}, {cal.gbs, cp.gbs}, {cal.latency_us, cp.latency_us},
                            {cal.elem_ratio, cp.elem_ratio}, {cal.conv_ratio, cp.conv_ratio}};
        for (int k = 0; k < 5; k++)
            if (fabs(fig[k][0] - fig[k][1]) > 1e-8 * fig[k][0])
                fail_msg("round %d figure %d: %.17g back as %.17g", round, k, fig[k][0], fig[k][1]);
        assert_true(cp.gbs_inter == cp.gbs && cp.latency_inter_us == cp.latency_us);
    }
    cal.elem_ratio = 1e7;
    sb_machine mc;
    sb_error err = {0};
    assert_int_equal(sb_machine_from_cost_params(&cal, 2, 7.5, 20, &mc, &err), -1);
    assert_non_null(strstr(err.msg, "eff_elementwise"));
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_shipped_names),
        cmocka_unit_test(test_shipped),
        cmocka_unit_test(test_allreduce_by_hand),
        cmocka_unit_test(test_intra_only),
        cmocka_unit_test(test_attention_curves),
        cmocka_unit_test(test_from_calibration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
