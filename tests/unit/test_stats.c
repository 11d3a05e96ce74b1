/* tests/unit/test_stats.c: cmocka tests of measure/stats.c, the statistics of
 * `regress` and `nightly`, on fixed synthetic samples: the exact one-sided
 * Mann-Whitney p-values, the bootstrap interval, the history band, and the
 * verdicts (equal distributions: within noise; 20% slower with low noise:
 * regression; 20% faster: improvement; too few launches: not enough data; a
 * shift inside the history's band: within noise), the family rule
 * (Benjamini-Hochberg over the strategies of a night), the build as a
 * whole (the pooled ratio and its band) and the probe cut. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>

#include "shardbench/measure.h"

static const double base[8] = {0.100, 0.102, 0.099, 0.101, 0.103, 0.098, 0.100, 0.101};
/* the same distribution, other draws */
static const double same[8] = {0.101, 0.099, 0.102, 0.100, 0.098, 0.103, 0.100, 0.1005};

static void scaled(const double *x, int n, double f, double *out)
{
    for (int i = 0; i < n; i++)
        out[i] = x[i] * f;
}

static void test_mwu_exact(void **state)
{
    (void)state;
    double x[5] = {1, 2, 3, 4, 5}, y[5] = {6, 7, 8, 9, 10};
    /* every y above every x: 1 ordering of C(10, 5) = 252 */
    assert_true(fabs(sb_stat_mwu_greater(x, 5, y, 5) - 1.0 / 252) < 1e-12);
    assert_true(fabs(sb_stat_mwu_greater(y, 5, x, 5) - 1.0) < 1e-12);
    /* 2 vs 2, y = {3, 4} over x = {1, 2}: 1/6; one swap: U = 3: P(U >= 3) = 2/6 */
    double a[2] = {1, 2}, b[2] = {3, 4}, c[2] = {1.5, 3};
    assert_true(fabs(sb_stat_mwu_greater(a, 2, b, 2) - 1.0 / 6) < 1e-12);
    assert_true(fabs(sb_stat_mwu_greater(a, 2, c, 2) - 2.0 / 6) < 1e-12);
    /* ties: the normal approximation, p = 0.5 + continuity for identical samples */
    double t[3] = {1, 1, 1};
    double p = sb_stat_mwu_greater(t, 3, t, 3);
    assert_true(p > 0.5 && p <= 1);
}

static void test_bootstrap_and_band(void **state)
{
    (void)state;
    double c[8], lo, hi;
    scaled(base, 8, 1.2, c);
    assert_int_equal(sb_stat_boot_ratio(base, 8, c, 8, 0.95, 2000, 7, &lo, &hi), 0);
    assert_true(lo <= 1.2 && hi >= 1.2);
    assert_true(lo > 1.1 && hi < 1.3);
    /* same seed, same interval */
    double lo2, hi2;
    sb_stat_boot_ratio(base, 8, c, 8, 0.95, 2000, 7, &lo2, &hi2);
    assert_true(lo == lo2 && hi == hi2);
    double nights[5] = {1.0, 1.1, 0.9, 1.0, 1.05};
    double band = sb_stat_band(nights, 5);
    /* MAD of |x/1 - 1| = 0.05: band 2 x 1.4826 x 0.05 */
    assert_true(fabs(band - 2 * 1.4826 * 0.05) < 1e-9);
    assert_true(isnan(sb_stat_band(nights, 2)));
}

static void test_verdicts(void **state)
{
    (void)state;
    sb_stat_rule r;
    sb_stat_rule_default(&r);
    sb_stat_cmp st;
    assert_int_equal(sb_stat_compare(&r, base, 8, same, 8, NAN, &st), SB_VERDICT_NOISE);
    assert_true(st.ratio > 0.98 && st.ratio < 1.02);
    double slow[8], fast[8];
    scaled(same, 8, 1.2, slow);
    assert_int_equal(sb_stat_compare(&r, base, 8, slow, 8, NAN, &st), SB_VERDICT_REGRESSION);
    assert_true(st.lo > 1 && st.p_slower < 0.01);
    scaled(same, 8, 0.8, fast);
    assert_int_equal(sb_stat_compare(&r, base, 8, fast, 8, NAN, &st), SB_VERDICT_IMPROVEMENT);
    /* 3% slower and significant: below the 5% threshold, noise */
    double bit[8];
    scaled(same, 8, 1.03, bit);
    assert_int_equal(sb_stat_compare(&r, base, 8, bit, 8, NAN, &st), SB_VERDICT_NOISE);
    /* too few launches on a side */
    assert_int_equal(sb_stat_compare(&r, base, 2, slow, 8, NAN, &st), SB_VERDICT_NOT_ENOUGH);
    assert_int_equal(sb_stat_compare(&r, base, 8, slow, 1, NAN, &st), SB_VERDICT_NOT_ENOUGH);
    assert_int_equal(sb_stat_compare(&r, base, 0, slow, 0, NAN, &st), SB_VERDICT_NOT_ENOUGH);
    /* a history whose nights move by 30%: a 20% shift is within its band */
    assert_int_equal(sb_stat_compare(&r, base, 8, slow, 8, 0.30, &st), SB_VERDICT_NOISE);
    assert_true(fabs(st.thr - 0.30) < 1e-12);
    /* wide noise: 20% shift of medians but overlapping launches, not significant */
    double wb[5] = {0.10, 0.20, 0.12, 0.18, 0.15}, wc[5] = {0.12, 0.22, 0.14, 0.21, 0.18};
    assert_int_equal(sb_stat_compare(&r, wb, 5, wc, 5, NAN, &st), SB_VERDICT_NOISE);
    assert_string_equal(sb_stat_verdict_name(SB_VERDICT_REGRESSION), "regression");
}

/* Five launches a side, 23 strategies (the nightly's count): each one's
 * least p is 1/252, over Bonferroni's 0.05/23; the family rule calls a
 * shift that every strategy shows, and not one that one strategy shows. */
static void test_family(void **state)
{
    (void)state;
    sb_stat_rule r;
    sb_stat_rule_default(&r);
    enum { M = 23 };
    sb_stat_cmp all[M], one[M];
    double slow[8];
    scaled(same, 8, 1.2, slow);
    for (int i = 0; i < M; i++) {
        sb_stat_compare(&r, base, 5, slow, 5, NAN, &all[i]);
        assert_true(fabs(all[i].p_slower - 1.0 / 252) < 1e-12);
        sb_stat_compare(&r, base, 5, i ? same : slow, 5, NAN, &one[i]);
    }
    assert_int_equal(sb_stat_family(&r, all, M), M);
    for (int i = 0; i < M; i++)
        assert_int_equal(all[i].verdict, SB_VERDICT_REGRESSION);
    assert_int_equal(sb_stat_family(&r, one, M), 0);
    assert_int_equal(one[0].verdict, SB_VERDICT_NOISE);
    /* BH step-up: 3 of 23 at p = 1/252 pass (3 x 0.05 / 23 = 0.0065); one
     * faster strategy among them is an improvement, not a regression */
    sb_stat_cmp few[M];
    double fast[8];
    scaled(same, 8, 0.8, fast);
    for (int i = 0; i < M; i++)
        sb_stat_compare(&r, base, 5, i < 3 ? slow : i == 3 ? fast : same, 5, NAN, &few[i]);
    assert_int_equal(sb_stat_family(&r, few, M), 3);
    assert_int_equal(few[3].verdict, SB_VERDICT_NOISE); /* alone at 1/252 > 0.05 / 23 */
    for (int i = 4; i < M; i++)
        assert_int_equal(few[i].verdict, SB_VERDICT_NOISE);
    /* not enough data stays so, and is not counted in the family */
    sb_stat_cmp two[2];
    sb_stat_compare(&r, base, 2, slow, 5, NAN, &two[0]);
    sb_stat_compare(&r, base, 5, slow, 5, NAN, &two[1]);
    assert_int_equal(sb_stat_family(&r, two, 2), 1);
    assert_int_equal(two[0].verdict, SB_VERDICT_NOT_ENOUGH);
    /* a shift under the threshold is noise however small p is */
    double bit[8];
    scaled(same, 8, 1.03, bit);
    for (int i = 0; i < M; i++)
        sb_stat_compare(&r, base, 5, bit, 5, NAN, &all[i]);
    assert_int_equal(sb_stat_family(&r, all, M), 0);
}

/* The build as a whole: 23 strategies each 8% slower, each one's launches
 * overlapping the baseline's (no single strategy can be called), is a
 * regression pooled; the same launches are within noise; a 3% shift is
 * under the threshold; two strategies are not enough; a band from the
 * history widens the threshold. */
static void test_pooled(void **state)
{
    (void)state;
    sb_stat_rule r;
    sb_stat_rule_default(&r);
    enum { M = 23 };
    static const double wide[5] = {0.100, 0.112, 0.095, 0.106, 0.090};
    double slow[M][5], bit[M][5], same5[M][5];
    const double *b[M], *c[M], *cs[M];
    int n[M];
    for (int i = 0; i < M; i++) {
        double f = 1 + 0.01 * (i % 5); /* strategies of different speeds */
        for (int j = 0; j < 5; j++) {
            same5[i][j] = wide[(j + i) % 5] * f;
            slow[i][j] = wide[(j + 2 * i + 1) % 5] * f * 1.08;
            bit[i][j] = wide[(j + 3) % 5] * f * 1.03;
        }
        b[i] = same5[i], c[i] = slow[i], cs[i] = bit[i], n[i] = 5;
    }
    sb_stat_cmp one, w;
    sb_stat_compare(&r, b[0], 5, c[0], 5, NAN, &one);
    assert_int_not_equal(one.verdict, SB_VERDICT_REGRESSION); /* one strategy alone: noise */
    assert_int_equal(sb_stat_pooled(&r, M, b, n, c, n, NAN, &w), SB_VERDICT_REGRESSION);
    assert_true(fabs(w.ratio - 1.08) < 0.03 && w.lo > 1 && w.nb == M);
    assert_int_equal(sb_stat_pooled(&r, M, b, n, b, n, NAN, &w), SB_VERDICT_NOISE);
    assert_true(fabs(w.ratio - 1) < 1e-12);
    assert_int_equal(sb_stat_pooled(&r, M, b, n, cs, n, NAN, &w), SB_VERDICT_NOISE);
    assert_int_equal(sb_stat_pooled(&r, 2, b, n, c, n, NAN, &w), SB_VERDICT_NOT_ENOUGH);
    assert_int_equal(sb_stat_pooled(&r, M, b, n, c, n, 0.12, &w), SB_VERDICT_NOISE);
    assert_true(fabs(w.thr - 0.12) < 1e-12);
    /* the pooled band: nights where every strategy moved together by +-10% */
    double nt[3][4] = {{1.0, 1.1, 0.9, 1.0}, {2.0, 2.2, 1.8, 2.0}, {3.0, 3.3, 2.7, 3.0}};
    const double *ph[3] = {nt[0], nt[1], nt[2]};
    double band = sb_stat_pooled_band(3, ph, 4);
    assert_true(fabs(band - 2 * 1.4826 * 0.05) < 1e-9); /* MAD of 0, .1, .1, 0 around 1 */
    assert_true(isnan(sb_stat_pooled_band(3, ph, 2)));
}

static void test_probe_cut(void **state)
{
    (void)state;
    double p[5] = {1.0, 1.2, 0.9, 1.1, 3.0};
    assert_true(fabs(sb_stat_probe_cut(p, 5) - 1.5 * 1.1) < 1e-12);
    double q[3] = {1.0, NAN, 1.0};
    assert_true(sb_stat_probe_cut(q, 3) == 0); /* a launch without a probe: no cut */
    assert_true(sb_stat_probe_cut(p, 0) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mwu_exact),
        cmocka_unit_test(test_bootstrap_and_band),
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_family),
        cmocka_unit_test(test_pooled),
        cmocka_unit_test(test_probe_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
