/* test_search_baselines.c: cmocka tests of the baselines and candidates
 * (search/baselines.c, expert.c, mcmc.c, candidates.c): the exact DP's
 * optimum is at most every other algorithm's cost on the shipped models,
 * MCMC is reproducible for a seed and keeps to its budget, the candidate
 * enumeration of a small model gives the counts computed by hand, the
 * expert picks the documented style, and config lookup falls back to the
 * nearest valid config. Not the memory model (test_memory.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/candidates.h"
#include "shardbench/strategy.h"

static void load(const char *name, const char **kv, int nkv, sb_model *m)
{
    sb_setting set[16];
    sb_error err = {0};
    for (int i = 0; i < nkv; i++)
        assert_int_equal(sb_setting_parse(kv[i], &set[i], &err), 0);
    if (sb_model_load(name, set, nkv, m, &err))
        fail_msg("load %s: %s", name, err.msg);
}

static void build(const sb_model *m, int p, sb_problem *pb)
{
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_error err = {0};
    if (sb_problem_build(m, p, &cp, pb, &err))
        fail_msg("build: %s", err.msg);
}

/* pase-best <= dp, expert, mcmc and every candidate */
static void check_optimum(const char *name, const char **kv, int nkv, int p)
{
    sb_model m;
    sb_problem pb;
    sb_error err = {0};
    load(name, kv, nkv, &m);
    build(&m, p, &pb);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 1024, .progress = 0};
    sb_result r;
    assert_int_equal(sb_search(&pb, &so, &r, &err), 0);
    double best = r.total_cost, tol = 1e-9 * best;
    int *ch = calloc((size_t)m.nops, sizeof *ch);
    assert_int_equal(sb_strategy_data_parallel(&pb, ch, &err), 0);
    double dp = sb_strategy_cost(&pb, ch);
    assert_true(best <= dp + tol);
    const char *style;
    assert_int_equal(sb_strategy_expert(&pb, ch, &style, &err), 0);
    double ex = sb_strategy_cost(&pb, ch);
    assert_true(best <= ex + tol);
    sb_mcmc_opts mo;
    sb_mcmc_opts_default(&mo);
    mo.budget = 20000;
    mo.time_limit = 0;
    sb_mcmc_result mr;
    assert_int_equal(sb_search_mcmc(&pb, &mo, &mr, &err), 0);
    assert_true(best <= mr.cost + tol);
    assert_true(mr.cost <= ex + tol); /* starts from expert, keeps the best */
    assert_true(fabs(mr.cost - sb_strategy_cost(&pb, mr.choice)) <= tol);
    sb_candidate_set cs;
    assert_int_equal(sb_candidates_enumerate(&pb, SB_OPTIM_SGD, 0, 0, &cs, &err), 0);
    assert_true(cs.ncand > 0);
    for (int k = 0; k < cs.ncand; k++) {
        assert_true(best <= cs.cand[k].cost + tol);
        if (k)
            assert_true(cs.cand[k - 1].cost <= cs.cand[k].cost);
    }
    assert_true(sb_candidate_strategy(&pb, &cs, &cs.cand[0], ch) >= 0);
    assert_true(fabs(sb_strategy_cost(&pb, ch) - cs.cand[0].cost) <= tol);
    printf("%-12s p=%-2d pase %.6e dp %.6e expert(%s) %.6e mcmc %.6e cand %.6e (%d)\n", name, p,
           best, dp, style, ex, mr.cost, cs.cand[0].cost, cs.ncand);
    sb_candidate_set_free(&cs);
    sb_mcmc_result_free(&mr);
    free(ch);
    sb_result_free(&r);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

static void test_optimum_cnns(void **state)
{
    (void)state;
    const char *alex[] = {"batch=32", "image=67", "width_div=4"};
    const char *res[] = {"batch=16", "image=64", "width_div=8"};
    for (int p = 4; p <= 8; p *= 2) {
        check_optimum("alexnet", alex, 3, p);
        check_optimum("resnet101", res, 3, p);
    }
    const char *inc[] = {"batch=16", "image=107", "width_div=8"};
    check_optimum("inception3", inc, 3, 4);
}

static void test_optimum_sequence_models(void **state)
{
    (void)state;
    check_optimum("rnnlm", NULL, 0, 8);
    const char *rn[] = {"vocab=1000", "units=64", "seq=16"};
    check_optimum("rnnlm", rn, 3, 4);
    const char *tr[] = {"layers=2", "vocab=1000", "seq=32"};
    check_optimum("transformer", tr, 3, 4);
    check_optimum("transformer", tr, 3, 8);
}

static void test_mcmc_reproducible(void **state)
{
    (void)state;
    sb_model m;
    sb_problem pb;
    sb_error err = {0};
    load("alexnet", NULL, 0, &m);
    build(&m, 8, &pb);
    sb_mcmc_opts mo;
    sb_mcmc_opts_default(&mo);
    mo.budget = 5000;
    mo.time_limit = 0;
    mo.seed = 42;
    sb_mcmc_result a, b, c;
    assert_int_equal(sb_search_mcmc(&pb, &mo, &a, &err), 0);
    assert_int_equal(sb_search_mcmc(&pb, &mo, &b, &err), 0);
    mo.seed = 43;
    assert_int_equal(sb_search_mcmc(&pb, &mo, &c, &err), 0);
    assert_int_equal(a.iterations, 5000);
    assert_int_equal(a.stopped_by_time, 0);
    assert_true(a.cost == b.cost);
    assert_int_equal(a.accepted, b.accepted);
    assert_memory_equal(a.choice, b.choice, (size_t)m.nops * sizeof(int));
    assert_int_equal(a.ntrace, b.ntrace);
    /* another seed takes another path */
    assert_true(a.accepted != c.accepted || a.ntrace != c.ntrace || a.cost != c.cost);
    /* the trace improves monotonically and ends at the best */
    for (int k = 1; k < a.ntrace; k++)
        assert_true(a.trace[k].cost < a.trace[k - 1].cost);
    assert_true(a.trace[a.ntrace - 1].cost == a.cost);
    mo.budget = 0;
    sb_mcmc_result_free(&b);
    assert_int_equal(sb_search_mcmc(&pb, &mo, &b, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    sb_mcmc_result_free(&a);
    sb_mcmc_result_free(&c);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

static const char *small_text = "model small\ncutoff 1\ninput x[batch=4, feat=4]\n"
                                "y = dense(x, units=4, dim=units)\nl = softmax_xent(y)\n";

/* Names batch, units, feat all meet in the dense op, so no two share an
 * axis. p=2: meshes (), (2): 1 + 3 rule sets, 4 distinct. p=4: meshes (),
 * (2), (4), (2,2): 1 + 3 + 3 + 3*2 rule sets = 13; the (2,2) pairs a:x,b:y
 * and b:x,a:y induce one strategy: 1 + 3 + 3 + 3 = 10 distinct. */
static void test_candidate_counts(void **state)
{
    (void)state;
    sb_model m;
    sb_error err = {0};
    assert_int_equal(sb_model_parse(small_text, strlen(small_text), "small.model", NULL, 0, &m, &err), 0);
    int want_rules[5] = {0, 1, 4, 0, 13}, want_distinct[5] = {0, 1, 4, 0, 10}, want_meshes[5] = {0, 1, 2, 0, 4};
    for (int p = 1; p <= 4; p *= 2) {
        sb_problem pb;
        build(&m, p, &pb);
        sb_candidate_set cs;
        assert_int_equal(sb_candidates_enumerate(&pb, SB_OPTIM_SGD, 0, 0, &cs, &err), 0);
        assert_int_equal(cs.nnames, p == 1 ? 0 : 3);
        assert_int_equal(cs.nmeshes, want_meshes[p]);
        assert_int_equal(cs.rule_sets, want_rules[p]);
        assert_int_equal(cs.ncand, want_distinct[p]);
        assert_int_equal(cs.truncated, 0);
        for (int k = 0; k < cs.ncand; k++)
            assert_int_equal(cs.cand[k].fallbacks, 0);
        sb_candidate_set_free(&cs);
        /* a limit truncates, and says so */
        if (p == 4) {
            assert_int_equal(sb_candidates_enumerate(&pb, SB_OPTIM_SGD, 5, 0, &cs, &err), 0);
            assert_int_equal(cs.truncated, 1);
            assert_int_equal(cs.rule_sets, 5);
            sb_candidate_set_free(&cs);
        }
        sb_problem_free(&pb);
    }
    sb_model_free(&m);
}

static void test_nearest_and_expert(void **state)
{
    (void)state;
    sb_model m;
    sb_problem pb;
    sb_error err = {0};
    assert_int_equal(sb_model_parse(small_text, strlen(small_text), "small.model", NULL, 0, &m, &err), 0);
    build(&m, 4, &pb);
    int exact;
    int w1[3] = {2, 2, 1};
    int k = sb_config_nearest(&pb, 0, w1, &exact);
    assert_int_equal(exact, 1);
    assert_memory_equal(pb.cfg[0].c + (size_t)k * 3, w1, sizeof w1);
    int w2[3] = {4, 4, 1}; /* 16 devices: not valid at p=4 */
    k = sb_config_nearest(&pb, 0, w2, &exact);
    assert_int_equal(exact, 0);
    const int *c = pb.cfg[0].c + (size_t)k * 3;
    assert_true(c[0] * c[1] * c[2] <= 4);
    assert_int_equal(c[2], 1);
    sb_problem_free(&pb);
    sb_model_free(&m);

    const char *style;
    int *ch;
    load("alexnet", NULL, 0, &m);
    build(&m, 8, &pb);
    ch = calloc((size_t)m.nops, sizeof *ch);
    assert_int_equal(sb_strategy_expert(&pb, ch, &style, &err), 0);
    assert_string_equal(style, "owt");
    for (int i = 0; i < m.nops; i++) {
        const int *ci = pb.cfg[i].c + (size_t)ch[i] * (size_t)m.ops[i].ndims;
        if (m.ops[i].kind == SB_OP_CONV)
            assert_int_equal(ci[0], 8); /* batch */
        if (m.ops[i].kind == SB_OP_DENSE) {
            assert_int_equal(ci[0], 1);
            assert_int_equal(ci[1], 8); /* units */
        }
    }
    free(ch);
    sb_problem_free(&pb);
    sb_model_free(&m);

    load("rnnlm", NULL, 0, &m);
    build(&m, 8, &pb);
    ch = calloc((size_t)m.nops, sizeof *ch);
    assert_int_equal(sb_strategy_expert(&pb, ch, &style, &err), 0);
    assert_string_equal(style, "gnmt");
    const int *cl = pb.cfg[1].c + (size_t)ch[1] * 5; /* layers, seq, batch, units, units_in */
    assert_int_equal(cl[0], 2);
    assert_int_equal(cl[2], 4);
    free(ch);
    sb_problem_free(&pb);
    sb_model_free(&m);

    const char *tr[] = {"layers=1"};
    load("transformer", tr, 1, &m);
    build(&m, 8, &pb);
    ch = calloc((size_t)m.nops, sizeof *ch);
    assert_int_equal(sb_strategy_expert(&pb, ch, &style, &err), 0);
    assert_string_equal(style, "mesh-tf");
    int heads_split = 0;
    for (int i = 0; i < m.nops; i++)
        for (int d = 0; d < m.ops[i].ndims; d++)
            if (!strcmp(m.ops[i].dims[d].name, "heads")
                && pb.cfg[i].c[(size_t)ch[i] * (size_t)m.ops[i].ndims + (size_t)d] > 1)
                heads_split = 1;
    int vocab_split = 0;
    for (int i = 0; i < m.nops; i++)
        for (int d = 0; d < m.ops[i].ndims; d++)
            if (!strcmp(m.ops[i].dims[d].name, "vocab")
                && pb.cfg[i].c[(size_t)ch[i] * (size_t)m.ops[i].ndims + (size_t)d] > 1)
                vocab_split = 1;
    assert_true(heads_split || vocab_split); /* a model axis of at least 2 */
    free(ch);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_candidate_counts),
        cmocka_unit_test(test_nearest_and_expert),
        cmocka_unit_test(test_mcmc_reproducible),
        cmocka_unit_test(test_optimum_cnns),
        cmocka_unit_test(test_optimum_sequence_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
