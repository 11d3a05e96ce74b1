/* tests/unit/test_bench_other.c: cmocka tests of the bench's view of other work
 * on the machine (measure/bench.c, plots.h): the busy seconds of a
 * /proc/stat line, the other cores of a launch, which strategies get
 * another trial round, the yield-when-idle environment the launches
 * inherit, and the binding of the default launcher. No timing: fixed
 * numbers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/measure.h"

static void test_proc_stat_busy(void **state)
{
    (void)state;
    double s = -1;
    /* user nice system idle iowait irq softirq steal guest guest_nice */
    assert_int_equal(sb_proc_stat_busy("cpu  100 20 30 5000 40 5 6 7 0 0\n", 100, &s), 0);
    /* 100 + 20 + 30 + 5 + 6 + 7 = 168 ticks, idle and iowait left out */
    assert_true(fabs(s - 1.68) < 1e-12);
    assert_int_equal(sb_proc_stat_busy("cpu  100 20 30 5000 40 5 6 7", 250, &s), 0);
    assert_true(fabs(s - 168.0 / 250) < 1e-12);
    /* a CPU's own line, too few fields, no line, no rate */
    assert_int_equal(sb_proc_stat_busy("cpu0 100 20 30 5000 40 5 6 7\n", 100, &s), -1);
    assert_int_equal(sb_proc_stat_busy("cpu  100 20 30 5000\n", 100, &s), -1);
    assert_int_equal(sb_proc_stat_busy(NULL, 100, &s), -1);
    assert_int_equal(sb_proc_stat_busy("cpu  1 2 3 4 5 6 7 8\n", 0, &s), -1);
}

static void test_other_cores(void **state)
{
    (void)state;
    /* 2 s: the machine busy 3.8 core-seconds, the launch's own 1.8: 1 core of other work */
    assert_true(fabs(sb_bench_other_cores(10.0, 13.8, 1.8, 2.0) - 1.0) < 1e-12);
    /* the launch alone: nothing other */
    assert_true(fabs(sb_bench_other_cores(10.0, 11.8, 1.8, 1.0)) < 1e-12);
    /* the ticks of /proc/stat round below the launch's own time: 0, not negative */
    assert_true(sb_bench_other_cores(10.0, 11.78, 1.8, 1.0) == 0);
    assert_true(isnan(sb_bench_other_cores(10.0, 11.0, 0.5, 0)));
    assert_true(isnan(sb_bench_other_cores(NAN, 11.0, 0.5, 1.0)));
    assert_true(isnan(sb_bench_other_cores(10.0, 11.0, NAN, 1.0)));
}

static void test_retry_pick(void **state)
{
    (void)state;
    /* 0: a clean trial; 1: only trials beside other work; 2: skipped; 3: no
     * trial ok (failed: its own status, not run again); 4: like 1 */
    int skip[5] = {0, 0, 1, 0, 0}, ok[5] = {3, 3, 3, 0, 1}, clean[5] = {1, 0, 0, 0, 0}, pick[5];
    assert_int_equal(sb_bench_retry_pick(5, skip, ok, clean, pick), 2);
    int want[5] = {0, 1, 0, 0, 1};
    for (int i = 0; i < 5; i++)
        assert_int_equal(pick[i], want[i]);
    /* no skip list: every strategy counts */
    assert_int_equal(sb_bench_retry_pick(5, NULL, ok, clean, pick), 3);
    assert_int_equal(pick[2], 1);
    /* all clean: none */
    int all[5] = {1, 1, 1, 1, 1};
    assert_int_equal(sb_bench_retry_pick(5, NULL, ok, all, pick), 0);
}

static void test_idle_env(void **state)
{
    (void)state;
    unsetenv("OMPI_MCA_mpi_yield_when_idle");
    assert_int_equal(sb_bench_idle_env(0), 0); /* by default: left alone */
    assert_null(getenv("OMPI_MCA_mpi_yield_when_idle"));
    assert_int_equal(sb_bench_idle_env(1), 1); /* --yield-when-idle */
    assert_string_equal(getenv("OMPI_MCA_mpi_yield_when_idle"), "1");
    /* the user's word wins */
    setenv("OMPI_MCA_mpi_yield_when_idle", "0", 1);
    assert_int_equal(sb_bench_idle_env(1), 0);
    assert_string_equal(getenv("OMPI_MCA_mpi_yield_when_idle"), "0");
    unsetenv("OMPI_MCA_mpi_yield_when_idle");
}

static void test_binding(void **state)
{
    (void)state;
    const char *w[4] = {0};
    /* as many ranks as CPUs or fewer: unbound */
    assert_int_equal(sb_bench_binding(2, 2, w), 2);
    assert_string_equal(w[0], "--bind-to");
    assert_string_equal(w[1], "none");
    assert_int_equal(sb_bench_binding(1, 2, w), 2);
    assert_string_equal(w[1], "none");
    /* more: rank r held on core r mod cores */
    assert_int_equal(sb_bench_binding(4, 2, w), 4);
    assert_string_equal(w[0], "--map-by");
    assert_string_equal(w[1], "core");
    assert_string_equal(w[2], "--bind-to");
    assert_string_equal(w[3], "core:overload-allowed");
    assert_int_equal(sb_bench_binding(3, 2, w), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proc_stat_busy),
        cmocka_unit_test(test_other_cores),
        cmocka_unit_test(test_retry_pick),
        cmocka_unit_test(test_idle_env),
        cmocka_unit_test(test_binding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
