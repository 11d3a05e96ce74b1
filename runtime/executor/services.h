/* services.h: what the executor and the op kinds (ops/) use on the
 * executor's state (exec.h): buffers from the pool, timing, rank groups,
 * all-reduces and relayouts that book their time to an op, and the model's
 * inputs and labels. They call nothing in executor.c or ops/. Internal to
 * runtime/. */
#ifndef SB_RUNTIME_EXECUTOR_SERVICES_H
#define SB_RUNTIME_EXECUTOR_SERVICES_H

#include "exec.h"

/* ---- buffers (services.c) ---- */

/* A buffer for one box (or n floats) of backend memory: from the pool when
 * a freed buffer of exactly that size is there, else from the backend.
 * Counts live and peak bytes. Empty boxes get p = NULL. */
int exec_tb_alloc(sb_executor *ex, tbuf *b, const sb_box *box, sb_error *err);
int exec_tb_alloc_n(sb_executor *ex, tbuf *b, int64_t n, sb_error *err);
/* exec_tb_alloc, then zeroed */
int exec_tb_zeros(sb_executor *ex, tbuf *b, const sb_box *box, sb_error *err);
/* Hands the buffer back to the pool (b->p NULL: nothing). */
void exec_tb_free(sb_executor *ex, tbuf *b);
/* Gives every pooled buffer back to the backend. */
void exec_pool_drain(sb_executor *ex);
/* Copies b->n host floats into the buffer. */
int exec_upload(sb_executor *ex, tbuf *b, const float *host);

/* ---- time and communication (services.c) ---- */

/* Timing (timing.h): a mark now, its number (-1: out of memory, what
 * names it is dropped): the host clock (MPI_Wtime, after the backend's
 * sync when it has one, as for the CPU backend), or a point on the
 * backend's queue (be->mark) read at exec_times_settle. */
int exec_mark(sb_executor *ex);
/* Books to `field` (EXEC_T_*) of op the seconds from mark m0 to a mark
 * taken now, and returns that mark. */
int exec_book(sb_executor *ex, int op, unsigned field, int m0);
/* Books the span m0..m1 to `field` of op. */
void exec_book_span(sb_executor *ex, int op, unsigned field, int m0, int m1);
/* The ledger's count of bookings, to name a point for exec_book_rest. */
int exec_nbooked(const sb_executor *ex);
/* Books to `field` of op the seconds from m0 to a mark taken now less what
 * op booked to `net` fields since point n0; clamp: only when positive. */
int exec_book_rest(sb_executor *ex, int op, unsigned field, int m0, int n0, unsigned net,
                   int clamp); /* returns the mark taken now */
/* 1 when op booked `field` since point n0. */
int exec_booked_since(const sb_executor *ex, int n0, int op, unsigned field);
/* The seconds exec_book_rest would book now (reads the marks first: with
 * a backend's marks that waits for its queue; for test hooks only). */
double exec_rest_now(sb_executor *ex, int op, int m0, int n0, unsigned net);
/* Once per step: the marks' times (be->marks_read, one wait), every
 * booking added to ex->times, the ledger emptied. */
void exec_times_settle(sb_executor *ex);
/* Grid coordinates g of global rank r under op o's config, whose grid
 * lies on the ranks of the op's stage ([o->r0, o->r0 + o->nr), local rank
 * r - o->r0); 0 when r is outside the grid. */
int exec_coords(const sb_executor *ex, const opx *o, int r, int *g);
/* Sub-communicator of the ranks of op o's grid that differ only in the
 * dims of free_mask; MPI_COMM_NULL when that group has one member.
 * Collective over the executor's communicator. */
int exec_make_group(sb_executor *ex, const opx *o, uint32_t free_mask, MPI_Comm *out,
                    sb_error *err);
/* In-place all-reduce over comm (nothing for MPI_COMM_NULL), its time
 * booked as op o's communication (o may be NULL). */
int exec_allreduce(sb_executor *ex, opx *o, float *p, size_t n, MPI_Op op, MPI_Comm comm,
                   sb_error *err);
/* Runs a relayout plan from src to dst in backend memory (staged through
 * the host when the backend has no alltoallv), its time booked to o. */
int exec_run_relayout(sb_executor *ex, opx *o, sb_relayout *r, const tbuf *src, tbuf *dst,
                      sb_error *err);
/* The same for the executor's edges: with ex->p2p (a pipeline) this rank's
 * part alone, point to point under `tag` (sb_relayout_run_p2p; staged
 * through the host when the backend's memory is not), else
 * exec_run_relayout. */
int exec_move(sb_executor *ex, opx *o, sb_relayout *r, int tag, const tbuf *src, tbuf *dst,
              sb_error *err);

/* ---- inputs and labels (inputs.c) ---- */

/* 64-bit tag of a name: the stream of a tensor's generated values. */
uint64_t exec_name_tag(const char *s);
/* Fills host buffer h with f(global linear index) over the box of a tensor
 * of the given shape. kind 0: offset + scale * U(-1, 1); kind 1: integers
 * floor(U(0,1) * range). */
void exec_gen_box(float *h, const sb_box *box, const int64_t *shape, uint64_t seed, uint64_t tag,
                  int kind, double scale, double offset, int64_t range);
/* Checks that a dataset fits the model (identically on every rank) and
 * keeps it for the inputs and labels. */
int exec_setup_data(sb_executor *ex, const sb_exec_opts *opts, sb_error *err);
/* Fills input operand `slot` of op o for the current step (synthetic, or
 * the dataset's rows); token inputs also get their int32 ids. */
int exec_gen_input(sb_executor *ex, opx *o, int slot, sb_error *err);
/* Labels of a loss op's local rows for the current step, into o->ids. */
int exec_gen_labels(sb_executor *ex, opx *o, sb_error *err);

/* ---- micro-batches (micro.c) ---- */

/* ex->micro: model m with every op's "batch" dim and every tensor dim
 * that follows it cut M ways; ex->mb_dim[t]: tensor t's cut dim, or -1.
 * -1 with err naming the op where a micro-batch would not compute a part
 * of the global batch (batch norm, the router's loss, a mean over the
 * batch, the LSTM) or a tensor is cut inconsistently. */
int exec_micro_model(sb_executor *ex, const sb_model *m, int M, sb_error *err);

#endif
