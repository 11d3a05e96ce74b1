/* recompute.h: activation recomputation in the executor's step
 * (recompute.c). Internal to runtime/executor/. */
#ifndef SB_RUNTIME_EXECUTOR_RECOMPUTE_H
#define SB_RUNTIME_EXECUTOR_RECOMPUTE_H

#include "exec.h"

/* The forward of op i as the step runs it (executor.c): its inputs
 * relayouted from their producers' outputs or generated, its outputs, its
 * kind's forward. */
typedef int (*exec_forward_fn)(sb_executor *ex, int i, sb_error *err);

/* Keeps st->recompute (flags of recomputable ops only, sb_op_recomputable)
 * in ex->recompute; NULL when none is set. Local. */
int exec_recompute_setup(sb_executor *ex, const sb_model *m, const sb_strategy *st,
                         sb_error *err);
/* 1 when input k of op i is kept for its recomputed forward instead of
 * relayouted again: op i is recomputed and the input comes from an op of
 * another (earlier) pipeline stage, whose ranks send it only once per
 * micro-batch. */
int exec_recompute_kept_input(const sb_executor *ex, int i, int k);
/* After op i's forward: a recomputed op drops what only its backward reads
 * (its input copies, token ids and saved statistics; not the inputs
 * received from an earlier stage, exec_recompute_kept_input); its outputs
 * stay (the next ops read them). */
void exec_recompute_drop(sb_executor *ex, int i);
/* Before op i's backward: a recomputed op's forward again (the same
 * inputs, so the same values: relayouted again, or the kept received
 * ones), its stage-3 weights kept gathered for the backward. */
int exec_recompute_forward(sb_executor *ex, int i, exec_forward_fn fwd, sb_error *err);
/* After op i's backward: a recomputed op hands back its inputs, outputs,
 * output gradients and statistics (its input gradients stay for its
 * producers). */
void exec_recompute_release(sb_executor *ex, int i);

#endif
