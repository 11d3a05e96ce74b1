/* kinds.h: the runtime of each op kind, one entry per kind (ops/<family>.c),
 * gathered by kind in sb_op_runtime_table (table.c). The executor calls an
 * op only through its entry; an entry calls only the executor's services
 * (executor/services.h) and the backend's kernels. Internal to runtime/. */
#ifndef SB_RUNTIME_OPS_KINDS_H
#define SB_RUNTIME_OPS_KINDS_H

#include "../executor/exec.h"

typedef struct {
    /* At set-up, on every rank, ops in model order (collective): the op's
     * sub-communicators (kcomm for split reduction dims, acomm for
     * statistics over a split axis) and any state it keeps. NULL: the kind
     * needs no group and no state. */
    int (*setup_groups)(sb_executor *ex, opx *o, sb_error *err);
    /* One direction on this rank's boxes: inputs (forward) or output
     * gradients (backward) are in place; forward overwrites o->out, backward
     * adds into o->din and the weight gradients. */
    int (*forward)(sb_executor *ex, opx *o, sb_error *err);
    int (*backward)(sb_executor *ex, opx *o, sb_error *err);
    /* Frees what setup_groups kept (NULL: nothing). */
    void (*release)(sb_executor *ex, opx *o);
    /* 0: forward and backward run only on the ranks of the op's grid and
     * the executor books their time; 1: they run on every rank (collective
     * across the op's groups) and book their own times. */
    int every_rank;
    /* The backend's kernel families forward and backward call (SB_FAM
     * bits, backend.h): an executor on a backend without one of them is
     * refused at creation (sb_ops_check_backend). */
    unsigned families;
} sb_op_runtime;

/* Indexed by sb_op_kind; every entry has forward and backward. */
extern const sb_op_runtime *const sb_op_runtime_table[];

/* The kernel families the executor's step itself calls, whatever the ops:
 * move (relayouts in backend memory, ZeRO's slices), sum (a tensor's
 * gradients from several consumers) and optim (the update). */
#define SB_EXEC_FAMILIES (SB_FAM(MOVE) | SB_FAM(SUM) | SB_FAM(OPTIM))

/* 0 when be has every kernel family the executor's step and each op of m
 * call; else -1 with err naming the family and the first op (or the part
 * of the step) that needs it. */
int sb_ops_check_backend(const sb_backend *be, const sb_model *m, sb_error *err);

/* The kinds' entries: sb_op_runtime_conv, sb_op_runtime_dense, ... */
#define SB_OP_RUNTIME_DECL_(K, id) extern const sb_op_runtime sb_op_runtime_##id;
SB_OP_KINDS(SB_OP_RUNTIME_DECL_)
#undef SB_OP_RUNTIME_DECL_

#endif
