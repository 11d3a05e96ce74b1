/* tests/test_executor_timing.c: the executor's per-step timing ledger
 * (runtime/executor/timing.c), which books per-op seconds from marks read
 * once per step instead of reading the clock (and waiting for the device)
 * at every booking: hand cases, then random nested timing (the executor's
 * patterns: an op's kernels and collectives inside run_op inside
 * timed_op) booked both as the executor did before, from the clock at
 * once, and through the ledger settled afterwards: the same seconds. Then
 * one executor step of alexnet (test size) on one rank with the "cpu"
 * backend (host marks) and "cpu-devmem" (marks recorded by the backend,
 * read once per step): every op's times are >= 0, some compute is booked,
 * and the booked seconds fit in the step's wall time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/executor/timing.h"
#include "shardbench/model.h"
#include "shardbench/runtime.h"

/* ---- hand cases ---- */

static int mark_at(exec_ledger *l, double t)
{
    int k = exec_ledger_mark(l);
    assert_true(k >= 0);
    l->t[k] = t;
    return k;
}

static void book(exec_ledger *l, int op, unsigned f, int m0, int m1, int from, int to,
                 unsigned net, int clamp)
{
    exec_booking b = {.op = op, .field = f, .m0 = m0, .m1 = m1, .from = from, .to = to,
                      .net = net, .clamp = clamp};
    assert_int_equal(exec_ledger_book(l, &b), 0);
}

static void test_hand(void **state)
{
    (void)state;
    exec_ledger l = {0};
    sb_op_time t[2] = {{0}};
    /* timed_op(op 0) { run_op { comm 1..2 (op 0), comm 2..3 (op 1) } } */
    int a = mark_at(&l, 10.0), b = mark_at(&l, 10.5), c = mark_at(&l, 11.0), d = mark_at(&l, 11.5);
    int n0 = l.nb;
    book(&l, 0, EXEC_T_COMM, b, c, 0, 0, 0, 0);
    book(&l, 1, EXEC_T_COMM, c, d, 0, 0, 0, 0); /* another op's: not netted out of op 0 */
    assert_false(exec_ledger_booked(&l, n0, 0, EXEC_T_COMPUTE));
    assert_true(exec_ledger_booked(&l, n0, 0, EXEC_T_COMM));
    int e = mark_at(&l, 12.0);
    book(&l, 0, EXEC_T_COMPUTE, a, e, n0, l.nb, EXEC_T_COMM, 0); /* 2.0 - 0.5 */
    assert_true(exec_ledger_booked(&l, n0, 0, EXEC_T_COMPUTE));
    int f = mark_at(&l, 12.25);
    book(&l, 0, EXEC_T_OTHER, a, f, n0, l.nb, EXEC_T_COMPUTE | EXEC_T_COMM, 1); /* 2.25 - 2.0 */
    /* a span that the netting turns negative is not booked when clamped */
    book(&l, 1, EXEC_T_OTHER, c, c, 0, l.nb, EXEC_T_COMM, 1); /* 0 - 0.5 */
    /* a dropped mark drops the booking */
    book(&l, 1, EXEC_T_RELAYOUT, -1, d, 0, 0, 0, 0);
    assert_int_equal(l.nb, 5);
    assert_true(fabs(exec_ledger_value(&l, 2) - 1.5) < 1e-12);
    exec_ledger_settle(&l, t);
    assert_true(fabs(t[0].comm_s - 0.5) < 1e-12);
    assert_true(fabs(t[0].compute_s - 1.5) < 1e-12);
    assert_true(fabs(t[0].other_s - 0.25) < 1e-12);
    assert_true(fabs(t[1].comm_s - 0.5) < 1e-12);
    assert_true(t[1].other_s == 0 && t[1].relayout_s == 0);
    assert_int_equal(l.nb, 0);
    assert_int_equal(l.nmarks, 0);
    exec_ledger_free(&l);
}

/* the CPU clock: a compute booking is evaluated on the marks' CPU times
 * too, net of the same op's communication there (a rank that waits on a
 * shared core spends little CPU), and only with l.cpu */
static void test_hand_cpu(void **state)
{
    (void)state;
    for (int on = 0; on <= 1; on++) {
        exec_ledger l = {0};
        l.cpu = on;
        sb_op_time t[2] = {{0}};
        /* wall: 0 .. 1 .. 3 .. 4; CPU: 0 .. 1 .. 1.25 .. 2 (the comm waited 2 s
         * on the wall clock, 0.25 s on the CPU) */
        int a = mark_at(&l, 0.0), b = mark_at(&l, 1.0), c = mark_at(&l, 3.0), d = mark_at(&l, 4.0);
        l.c[a] = 0.0, l.c[b] = 1.0, l.c[c] = 1.25, l.c[d] = 2.0;
        int n0 = l.nb;
        book(&l, 0, EXEC_T_COMM, b, c, 0, 0, 0, 0);
        book(&l, 0, EXEC_T_COMPUTE, a, d, n0, l.nb, EXEC_T_COMM, 0); /* wall 2, CPU 1.75 */
        /* the executor's own work around op 0, net of its compute and comm,
         * clamped: wall 0.5, CPU 0.25 */
        int f = mark_at(&l, 4.5);
        l.c[f] = 2.25;
        book(&l, 0, EXEC_T_OTHER, a, f, n0, l.nb, EXEC_T_COMPUTE | EXEC_T_COMM, 1);
        /* op 1: one mark without a CPU reading (a device queue's): no CPU */
        int e = mark_at(&l, 5.0);
        book(&l, 1, EXEC_T_COMPUTE, f, e, 0, 0, 0, 0);
        assert_true(fabs(exec_ledger_cpu_value(&l, 1) - 1.75) < 1e-12);
        assert_true(fabs(exec_ledger_cpu_value(&l, 2) - 0.25) < 1e-12);
        assert_true(isnan(exec_ledger_cpu_value(&l, 3)));
        exec_ledger_settle(&l, t);
        assert_true(fabs(t[0].compute_s - 2.0) < 1e-12 && fabs(t[1].compute_s - 0.5) < 1e-12);
        assert_true(fabs(t[0].compute_cpu_s - (on ? 1.75 : 0.0)) < 1e-12);
        assert_true(fabs(t[0].other_s - 0.5) < 1e-12);
        assert_true(fabs(t[0].other_cpu_s - (on ? 0.25 : 0.0)) < 1e-12);
        assert_true(t[1].compute_cpu_s == 0.0);
        exec_ledger_free(&l);
    }
}

/* ---- random nesting: the clock read at once (the executor before) vs the ledger ---- */

static uint64_t rs = 0x243F6A8885A308D3ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}

typedef struct {
    double now;           /* the simulated clock */
    sb_op_time *old;      /* booked at once, as exec_tick did */
    exec_ledger l;        /* booked through marks */
} sim;

static double tick(sim *s) /* time passes, then the clock is read */
{
    s->now += (double)(rnd() % 1000) * 1e-4;
    return s->now;
}

static int mark(sim *s) { return mark_at(&s->l, s->now); }

/* one collective or kernel of op o: old style and ledger style */
static void inner(sim *s, int o, int nops, int self_timed)
{
    int kind = (int)(rnd() % 3), who = rnd() % 5 ? o : (int)(rnd() % (unsigned)nops);
    double t0 = tick(s);
    int m0 = mark(s);
    double t1 = tick(s);
    int m1 = mark(s);
    if (kind == 0 || !self_timed) { /* a collective of op `who` */
        s->old[who].comm_s += t1 - t0;
        book(&s->l, who, EXEC_T_COMM, m0, m1, 0, 0, 0, 0);
        if (kind == 2) { /* a relayout: comm and relayout */
            s->old[who].relayout_s += t1 - t0;
            book(&s->l, who, EXEC_T_RELAYOUT, m0, m1, 0, 0, 0, 0);
        }
    } else { /* a timed kernel */
        s->old[o].compute_s += t1 - t0;
        book(&s->l, o, EXEC_T_COMPUTE, m0, m1, 0, 0, 0, 0);
    }
}

static void test_random_nesting(void **state)
{
    (void)state;
    enum { NOPS = 7 };
    for (int rep = 0; rep < 200; rep++) {
        sb_op_time old[NOPS] = {{0}}, led[NOPS] = {{0}};
        sim s = {.now = 1000.0 * rep, .old = old};
        for (int step = 0; step < 3; step++) {
            for (int ev = 0; ev < 12; ev++) {
                int o = (int)(rnd() % NOPS), self_timed = (int)(rnd() % 2);
                /* timed_op */
                sb_op_time *t = &old[o];
                double T0 = tick(&s), in0 = t->compute_s + t->comm_s;
                int M0 = mark(&s), N0 = s.l.nb;
                tick(&s); /* buffers, inputs */
                /* run_op */
                double r0 = tick(&s), c0 = t->comm_s, k0 = t->compute_s;
                int R0 = mark(&s), RN0 = s.l.nb;
                int n = (int)(rnd() % 5);
                for (int k = 0; k < n; k++)
                    inner(&s, o, NOPS, self_timed);
                double r1 = tick(&s);
                if (t->compute_s == k0)
                    t->compute_s += (r1 - r0) - (t->comm_s - c0);
                if (!exec_ledger_booked(&s.l, RN0, o, EXEC_T_COMPUTE)) {
                    int R1 = mark(&s);
                    book(&s.l, o, EXEC_T_COMPUTE, R0, R1, RN0, s.l.nb, EXEC_T_COMM, 0);
                }
                if (rnd() % 4 == 0) /* gradients summed after the op's kernels */
                    inner(&s, o, NOPS, 0);
                double T1 = tick(&s);
                double other = (T1 - T0) - (t->compute_s + t->comm_s - in0);
                if (other > 0)
                    t->other_s += other;
                int M1 = mark(&s);
                book(&s.l, o, EXEC_T_OTHER, M0, M1, N0, s.l.nb, EXEC_T_COMPUTE | EXEC_T_COMM, 1);
            }
            exec_ledger_settle(&s.l, led); /* once per step */
        }
        for (int i = 0; i < NOPS; i++) {
            assert_true(fabs(old[i].compute_s - led[i].compute_s) < 1e-9);
            assert_true(fabs(old[i].comm_s - led[i].comm_s) < 1e-9);
            assert_true(fabs(old[i].relayout_s - led[i].relayout_s) < 1e-9);
            assert_true(fabs(old[i].other_s - led[i].other_s) < 1e-9);
        }
        exec_ledger_free(&s.l);
    }
}

/* ---- one executor step per backend ---- */

static void step_times(const sb_backend *be, int cpu_times)
{
    sb_error err = {0};
    sb_setting set[4];
    const char *kv[] = {"batch=4", "image=67", "classes=16", "width_div=16"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(sb_setting_parse(kv[i], &set[i], &err), 0);
    sb_model m;
    if (sb_model_load("alexnet", set, 4, &m, &err))
        fail_msg("alexnet: %s", err.msg);
    int *ones = malloc((size_t)m.nops * SB_MAX_DIMS * sizeof *ones);
    const int **cfg = malloc((size_t)m.nops * sizeof *cfg);
    for (int i = 0; i < m.nops * SB_MAX_DIMS; i++)
        ones[i] = 1;
    for (int i = 0; i < m.nops; i++)
        cfg[i] = ones + (size_t)i * SB_MAX_DIMS;
    sb_strategy st;
    int np;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (sb_strategy_from_configs(&st, &m, np, cfg, NULL, NULL, &err))
        fail_msg("strategy: %s", err.msg);
    sb_exec_opts eo = {.lr = 0.01f, .seed = 3, .cpu_times = cpu_times};
    sb_executor *ex = NULL;
    if (sb_executor_create(MPI_COMM_WORLD, &m, &st, be, &eo, &ex, &err))
        fail_msg("%s: create: %s", be->name, err.msg);
    sb_strategy_free(&st);
    double loss = 0;
    for (int s = 0; s < 2; s++) {
        sb_executor_reset_times(ex);
        double w0 = MPI_Wtime();
        if (sb_executor_step(ex, &loss, &err))
            fail_msg("%s: step: %s", be->name, err.msg);
        double wall = MPI_Wtime() - w0, sum = 0, compute = 0, cpu = 0;
        const sb_op_time *t = sb_executor_op_times(ex);
        for (int i = 0; i < m.nops; i++) {
            assert_true(t[i].compute_s >= 0 && t[i].comm_s >= 0 && t[i].relayout_s >= 0 &&
                        t[i].other_s >= 0 && t[i].compute_cpu_s >= 0);
            sum += t[i].compute_s + t[i].comm_s + t[i].other_s;
            compute += t[i].compute_s;
            cpu += t[i].compute_cpu_s;
            assert_true(t[i].other_cpu_s >= 0);
        }
        /* the process's CPU seconds in the kernels: some, and no more than
         * their wall seconds on every CPU (a clock tick of slack); none
         * without cpu_times or where the marks are a queue's */
        assert_int_equal(sb_executor_cpu_times(ex), cpu_times && !be->mark);
        if (cpu_times && !be->mark) {
            assert_true(cpu > 0);
            assert_true(cpu <= compute * (double)sysconf(_SC_NPROCESSORS_ONLN) + 0.01);
        } else {
            assert_true(cpu == 0.0);
        }
        /* each op's phases: forward entry <= exit <= the backward's entry
         * <= exit, inside the step; forward in op order, backward in
         * reverse; an op's span at least its booked time */
        const double *ph = sb_executor_op_phase_times(ex);
        for (int i = 0; i < m.nops; i++) {
            const double *q = ph + 4 * i;
            for (int k = 0; k < 4; k++)
                assert_true(isfinite(q[k]) && q[k] >= 0 && q[k] <= wall);
            assert_true(q[0] <= q[1] && q[1] <= q[2] && q[2] <= q[3]);
            if (i)
                assert_true(ph[4 * (i - 1) + 1] <= q[0] && q[3] <= ph[4 * (i - 1) + 2]);
            assert_true((q[1] - q[0]) + (q[3] - q[2]) >=
                        (t[i].compute_s + t[i].comm_s + t[i].other_s) * (1 - 1e-9) - 1e-9);
        }
        printf("%s step %d: wall %.6f s, booked %.6f s (compute %.6f s, CPU %.6f s)\n", be->name,
               s, wall, sum, compute, cpu);
        assert_true(compute > 0);
        assert_true(sum <= wall * 1.001 + 1e-6);
    }
    sb_executor_free(ex);
    free(cfg);
    free(ones);
    sb_model_free(&m);
}

static void test_step_cpu(void **state)
{
    (void)state;
    step_times(&sb_backend_cpu, 0);
    step_times(&sb_backend_cpu, 1);
}

static void test_step_devmem(void **state)
{
    (void)state;
    const sb_backend *be = sb_backend_cpu_devmem();
    assert_non_null(be->mark);
    assert_non_null(be->marks_read);
    step_times(be, 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand),
        cmocka_unit_test(test_hand_cpu),
        cmocka_unit_test(test_random_nesting),
        cmocka_unit_test(test_step_cpu),
        cmocka_unit_test(test_step_devmem),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
