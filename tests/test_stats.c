/* tests/test_stats.c: cmocka tests of plots/stats.c, the statistics of
 * `regress` and `nightly`, on fixed synthetic samples: the exact one-sided
 * Mann-Whitney p-values, the bootstrap interval, the history band, and the
 * verdicts (equal distributions: within noise; 20% slower with low noise:
 * regression; 20% faster: improvement; too few launches: not enough data; a
 * shift inside the history's band: within noise). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>

#include "shardbench/plots.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mwu_exact),
        cmocka_unit_test(test_bootstrap_and_band),
        cmocka_unit_test(test_verdicts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
