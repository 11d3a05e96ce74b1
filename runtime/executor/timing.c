/* timing.c: the executor's per-step timing ledger (timing.h). */
#include "timing.h"

#include "shardbench/common.h"

#include <math.h>
#include <stdlib.h>

int exec_ledger_mark(exec_ledger *l)
{
    if (sb_grow((void **)&l->t, &l->cap_marks, l->nmarks, sizeof *l->t, 256)
        || sb_grow((void **)&l->c, &l->cap_c, l->nmarks, sizeof *l->c, 256))
        return -1;
    l->t[l->nmarks] = 0;
    l->c[l->nmarks] = NAN;
    return l->nmarks++;
}

int exec_ledger_book(exec_ledger *l, const exec_booking *b)
{
    if (b->m0 < 0 || b->m1 < 0)
        return 0;
    if (sb_grow((void **)&l->b, &l->cap_b, l->nb, sizeof *l->b, 256))
        return -1;
    l->b[l->nb++] = *b;
    return 0;
}

int exec_ledger_booked(const exec_ledger *l, int from, int op, unsigned field)
{
    for (int j = from < 0 ? 0 : from; j < l->nb; j++)
        if (l->b[j].op == op && l->b[j].field == field)
            return 1;
    return 0;
}

static double value_on(const exec_ledger *l, const double *t, int i, int cpu);

/* The span m0..m1 on clock t (the marks' times, or their CPU times) less
 * what op booked to `net` fields in [from, to), on the same clock. */
static double net_on(const exec_ledger *l, const double *t, int m0, int m1, int from, int to,
                     int op, unsigned net, int cpu)
{
    double v = t[m1] - t[m0];
    if (to > l->nb)
        to = l->nb;
    for (int j = from < 0 ? 0 : from; net && j < to; j++)
        if (l->b[j].op == op && (l->b[j].field & net))
            v -= value_on(l, t, j, cpu);
    return v;
}

/* A booking nets out only bookings before it, so the recursion ends. On
 * the CPU clock (cpu) a clamped booking without CPU times stays NaN; on the
 * marks' times a clamped NaN books 0. */
static double value_on(const exec_ledger *l, const double *t, int i, int cpu)
{
    const exec_booking *b = &l->b[i];
    int to = b->to < i ? b->to : i;
    double v = net_on(l, t, b->m0, b->m1, b->from, to, b->op, b->net, cpu);
    if (!b->clamp)
        return v;
    return cpu ? (v <= 0 ? 0 : v) : (v > 0 ? v : 0);
}

double exec_ledger_net(const exec_ledger *l, int m0, int m1, int from, int to, int op,
                       unsigned net)
{
    return net_on(l, l->t, m0, m1, from, to, op, net, 0);
}

double exec_ledger_value(const exec_ledger *l, int i) { return value_on(l, l->t, i, 0); }

double exec_ledger_cpu_value(const exec_ledger *l, int i) { return value_on(l, l->c, i, 1); }

static double *field_of(sb_op_time *t, unsigned f)
{
    switch (f) {
    case EXEC_T_COMPUTE: return &t->compute_s;
    case EXEC_T_COMM: return &t->comm_s;
    case EXEC_T_RELAYOUT: return &t->relayout_s;
    default: return &t->other_s;
    }
}

void exec_ledger_settle(exec_ledger *l, sb_op_time *times)
{
    for (int i = 0; i < l->nb; i++) {
        const exec_booking *b = &l->b[i];
        double v = exec_ledger_value(l, i);
        if (!b->clamp || v > 0)
            *field_of(&times[b->op], b->field) += v;
        int on_cpu = l->cpu && (b->field == EXEC_T_COMPUTE || b->field == EXEC_T_OTHER);
        double c = on_cpu ? exec_ledger_cpu_value(l, i) : NAN;
        if (isfinite(c))
            *(b->field == EXEC_T_COMPUTE ? &times[b->op].compute_cpu_s
                                         : &times[b->op].other_cpu_s) += c;
    }
    exec_ledger_clear(l);
}

void exec_ledger_clear(exec_ledger *l)
{
    l->nmarks = 0;
    l->nb = 0;
}

void exec_ledger_free(exec_ledger *l)
{
    free(l->t);
    free(l->c);
    free(l->b);
    *l = (exec_ledger){0};
}
