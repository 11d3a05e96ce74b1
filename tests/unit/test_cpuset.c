/* tests/unit/test_cpuset.c: cmocka tests of the pure parts of common/cpuset.c:
 * a rank's share of its node's CPUs, CPU lists, and the launcher's binding
 * read from an environment (the variables OpenMPI 4.1's mpirun exports
 * with and without --bind-to, --map-by, --cpu-set). The widening itself
 * runs under mpirun in tests/cpuset_cli.sh. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "shardbench/cpuset.h"

static void test_share(void **state)
{
    (void)state;
    int f, c;
    sb_cpuset_share(2, 0, 1, &f, &c); /* one rank: every CPU */
    assert_int_equal(f, 0);
    assert_int_equal(c, 2);
    sb_cpuset_share(2, 1, 2, &f, &c); /* two ranks: one each, disjoint */
    assert_int_equal(f, 1);
    assert_int_equal(c, 1);
    /* 10 CPUs over 4 ranks: 3, 3, 2, 2, in order, covering 0..9 once */
    int want_f[] = {0, 3, 6, 8}, want_c[] = {3, 3, 2, 2};
    for (int r = 0; r < 4; r++) {
        sb_cpuset_share(10, r, 4, &f, &c);
        assert_int_equal(f, want_f[r]);
        assert_int_equal(c, want_c[r]);
    }
    sb_cpuset_share(2, 4, 5, &f, &c); /* more ranks than CPUs: one, round robin */
    assert_int_equal(f, 0);
    assert_int_equal(c, 1);
    sb_cpuset_share(0, 0, 0, &f, &c); /* nonsense in: one CPU out */
    assert_int_equal(c, 1);
}

static void test_cpulist(void **state)
{
    (void)state;
    unsigned char bits[128];
    char buf[64];
    assert_int_equal(sb_cpulist_parse("0-3,8,10-11\n", bits, 1024), 7);
    sb_cpulist_format(bits, 1024, buf, sizeof buf);
    assert_string_equal(buf, "0-3,8,10-11");
    assert_int_equal(sb_cpulist_parse("5", bits, 1024), 1);
    sb_cpulist_format(bits, 1024, buf, sizeof buf);
    assert_string_equal(buf, "5");
    assert_int_equal(sb_cpulist_parse("1,1,0-1", bits, 1024), 2); /* repeats count once */
    assert_int_equal(sb_cpulist_parse("3-1", bits, 1024), -1);
    assert_int_equal(sb_cpulist_parse("x", bits, 1024), -1);
    assert_int_equal(sb_cpulist_parse("0,", bits, 1024), 1);
    assert_int_equal(sb_cpulist_parse("2000", bits, 1024), -1);
    assert_int_equal(sb_cpulist_parse(NULL, bits, 1024), -1);
    /* a list longer than the buffer is cut with "...", still a string */
    sb_cpulist_parse("0,2,4,6,8,10,12,14,16,18,20", bits, 1024);
    char small[10];
    sb_cpulist_format(bits, 1024, small, sizeof small);
    assert_true(strlen(small) < sizeof small);
    assert_non_null(strstr(small, "..."));
}

static void test_binding(void **state)
{
    (void)state;
    /* mpirun -np 1 (no binding option): bound at launch, no policy given */
    char *dflt[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=1", "OMPI_COMM_WORLD_LOCAL_RANK=0",
                    "OMPI_MCA_orte_bound_at_launch=1", "PATH=/bin", NULL};
    assert_int_equal(sb_cpuset_binding(dflt), SB_BIND_DEFAULT);
    /* --bind-to core / none / socket */
    char *core[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=1", "OMPI_MCA_orte_bound_at_launch=1",
                    "OMPI_MCA_hwloc_base_binding_policy=core", NULL};
    assert_int_equal(sb_cpuset_binding(core), SB_BIND_EXPLICIT);
    char *none[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=1", "OMPI_MCA_hwloc_base_binding_policy=none",
                    NULL};
    assert_int_equal(sb_cpuset_binding(none), SB_BIND_EXPLICIT);
    /* --map-by slot:PE=2, --cpu-set 0 */
    char *pe[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=1", "OMPI_MCA_orte_bound_at_launch=1",
                  "OMPI_MCA_rmaps_base_mapping_policy=slot:PE=2", NULL};
    assert_int_equal(sb_cpuset_binding(pe), SB_BIND_EXPLICIT);
    char *cpuset[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=1", "OMPI_MCA_orte_bound_at_launch=1",
                      "OMPI_MCA_hwloc_base_cpu_set=0", NULL};
    assert_int_equal(sb_cpuset_binding(cpuset), SB_BIND_EXPLICIT);
    /* -np 3 --oversubscribe: not bound */
    char *over[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=3", "OMPI_MCA_rmaps_base_oversubscribe=1", NULL};
    assert_int_equal(sb_cpuset_binding(over), SB_BIND_NONE);
    /* a name that only starts like the variable does not count */
    char *prefix[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=1", "OMPI_MCA_orte_bound_at_launch=1",
                      "OMPI_MCA_hwloc_base_binding_policyX=core", NULL};
    assert_int_equal(sb_cpuset_binding(prefix), SB_BIND_DEFAULT);
    /* no launcher; srun binding: never overridden */
    char *plain[] = {"HOME=/root", NULL};
    assert_int_equal(sb_cpuset_binding(plain), SB_BIND_NONE);
    char *srun[] = {"SLURM_CPU_BIND=quiet,mask_cpu:0x1", NULL};
    assert_int_equal(sb_cpuset_binding(srun), SB_BIND_EXPLICIT);
}

/* Threads: the share, capped by the affinity; the user's variables win. */
static void test_threads(void **state)
{
    (void)state;
    sb_cpuset cs;
    unsetenv("OPENBLAS_NUM_THREADS");
    unsetenv("OMP_NUM_THREADS");
    unsetenv(SB_CPUSET_FROM_ENV);
    sb_cpuset_get(&cs, 0, 1, 0);
    assert_true(cs.node_cpus >= 1 && cs.cpus >= 1 && cs.cpus <= cs.node_cpus);
    assert_string_equal(cs.threads_from, "share");
    assert_int_equal(cs.share, cs.node_cpus);
    assert_int_equal(cs.threads, cs.cpus < cs.share ? cs.cpus : cs.share);
    assert_int_equal(cs.widened, 0);
    /* as many ranks as CPUs: one thread each */
    sb_cpuset_get(&cs, 0, cs.node_cpus, 0);
    assert_int_equal(cs.share, 1);
    assert_int_equal(cs.threads, 1);
    setenv("OMP_NUM_THREADS", "3", 1);
    sb_cpuset_get(&cs, 0, 1, 0);
    assert_int_equal(cs.threads, 3);
    assert_string_equal(cs.threads_from, "OMP_NUM_THREADS");
    setenv("OPENBLAS_NUM_THREADS", "5", 1);
    sb_cpuset_get(&cs, 0, 1, 0);
    assert_int_equal(cs.threads, 5);
    assert_string_equal(cs.threads_from, "OPENBLAS_NUM_THREADS");
    unsetenv("OPENBLAS_NUM_THREADS");
    unsetenv("OMP_NUM_THREADS");
    /* what sb_cpuset_widen leaves for after the re-execution */
    setenv(SB_CPUSET_FROM_ENV, "0", 1);
    sb_cpuset_get(&cs, 0, 1, 0);
    assert_int_equal(cs.widened, 1);
    assert_string_equal(cs.start_list, "0");
    assert_null(getenv(SB_CPUSET_FROM_ENV)); /* not passed on */
    char line[512];
    sb_cpuset_describe(&cs, line, sizeof line);
    assert_non_null(strstr(line, "widened from 0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_cpulist),
        cmocka_unit_test(test_binding),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
