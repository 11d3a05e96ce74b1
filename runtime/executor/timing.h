/* timing.h: the executor's per-step timing ledger, plain C with no MPI or
 * backend in it (tests/test_exec_timing.c checks it on its own). During a
 * step the executor takes marks (numbered 0, 1, ... in the order taken:
 * host clock readings, or points recorded on a backend's stream, see
 * sb_backend.mark) and books spans between marks to an op's sb_op_time
 * fields; no booking is evaluated then. Once per step the marks' times
 * are known (read once from the backend) and exec_ledger_settle adds every
 * booking to the op times. A booking may be "what is left" of a span:
 * its seconds less what the same op had booked to some fields between two
 * points of the ledger (an op's compute less its communication; the
 * executor's own work less both), optionally only when positive. Internal
 * to runtime/. */
#ifndef SB_RUNTIME_EXECUTOR_TIMING_H
#define SB_RUNTIME_EXECUTOR_TIMING_H

#include "shardbench/runtime.h"

/* sb_op_time's fields, as bits (a booking has one; `net` masks many) */
enum { EXEC_T_COMPUTE = 1, EXEC_T_COMM = 2, EXEC_T_RELAYOUT = 4, EXEC_T_OTHER = 8 };

typedef struct {
    int op;
    unsigned field;     /* one EXEC_T_* */
    int m0, m1;         /* the span: marks m0 to m1 */
    /* net != 0: the seconds the same op booked to fields in `net` by the
     * bookings [from, to) are taken off the span */
    int from, to;
    unsigned net;
    int clamp;          /* 1: nothing is booked when the result is <= 0 */
} exec_booking;

typedef struct {
    double *t;          /* t[k]: seconds of mark k (any origin), known once read */
    /* c[k]: the process's CPU seconds at mark k (exec_mark with the
     * executor's cpu_times on host marks), NaN where not read; compute and
     * other bookings are also evaluated on them (sb_op_time.compute_cpu_s,
     * other_cpu_s) */
    double *c;
    int cpu;            /* 1: the caller reads c[] at its host marks */
    int nmarks, cap_marks, cap_c;
    exec_booking *b;
    int nb, cap_b;
} exec_ledger;

/* A new mark's number, its time unset (the caller writes t[k] or has the
 * backend record it) and its CPU time NaN (the caller may write c[k]); -1
 * out of memory (bookings that name it are dropped). */
int exec_ledger_mark(exec_ledger *l);
/* Appends a booking; 0, or -1 out of memory (nothing booked). Bookings
 * naming a mark < 0 are dropped (returns 0). */
int exec_ledger_book(exec_ledger *l, const exec_booking *b);
/* 1 when a booking in [from, nb) books `field` of op. */
int exec_ledger_booked(const exec_ledger *l, int from, int op, unsigned field);
/* Seconds of booking i as it will be booked, from the marks' times (set
 * for every mark it and the bookings it nets out name). */
double exec_ledger_value(const exec_ledger *l, int i);
/* The span m0..m1 less what op booked to `net` fields in [from, to). */
double exec_ledger_net(const exec_ledger *l, int m0, int m1, int from, int to, int op,
                       unsigned net);
/* Booking i evaluated on the marks' CPU times c[] instead (NaN where a
 * mark it names has none). */
double exec_ledger_cpu_value(const exec_ledger *l, int i);
/* Adds every booking to times[op] (the marks' times set), and with l->cpu
 * each compute and other booking's CPU seconds, where its marks have them,
 * to times[op].compute_cpu_s and other_cpu_s; then empties the ledger (its
 * memory kept for the next step). */
void exec_ledger_settle(exec_ledger *l, sb_op_time *times);
void exec_ledger_clear(exec_ledger *l);
void exec_ledger_free(exec_ledger *l);

#endif
