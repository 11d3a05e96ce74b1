/* params.h: the trained weights of an executor (params.c). Internal to
 * runtime/executor/. */
#ifndef SB_RUNTIME_EXECUTOR_PARAMS_H
#define SB_RUNTIME_EXECUTOR_PARAMS_H

#include "exec.h"

/* The op's own weights (sb_op.weights, filled by the parser) and its
 * explicit weight operands, declared (no memory yet). */
int exec_declare_params(sb_executor *ex, opx *o, sb_error *err);
/* Allocates and fills the weights (each rank exactly its shard of the same
 * global tensor) and the weight-gradient groups. Collective. */
int exec_init_params(sb_executor *ex, sb_error *err);
/* ZeRO (sb_strategy.zero): 1 when pa is sharded over its gradient group
 * (stage >= 1 and a group of 2 ranks or more). */
int zero_on(const sb_executor *ex, const param *pa);
/* Stage 3, around op o's forward and backward: its weights gathered from
 * the slices into whole shards (w), and dropped again. Collective over
 * each weight's group. */
int exec_zero_gather(sb_executor *ex, opx *o, sb_error *err);
void exec_zero_drop(sb_executor *ex, opx *o);
/* Around op o's backward: stage 2 and 3 give each weight a zeroed gradient
 * buffer first; after, the gradients are summed over their groups:
 * all-reduced (stage 0, 1) or reduce-scattered into the slices (2, 3). */
int exec_zero_grad_begin(sb_executor *ex, opx *o, sb_error *err);
int exec_zero_grad_end(sb_executor *ex, opx *o, sb_error *err);
/* The update of pa (SGD or Adam) on this rank's slice (the whole shard
 * without ZeRO), then, stages 1 and 2, the all-gather of the weight.
 * Zeroes the gradient. */
int exec_zero_update(sb_executor *ex, param *pa, sb_error *err);
/* Every weight's buffers and slices, freed. */
void exec_params_free(sb_executor *ex);
/* Stage 3: pa's whole shard gathered from the slices, and dropped. */
int exec_zero_whole(sb_executor *ex, param *pa, sb_error *err);
void exec_zero_unwhole(sb_executor *ex, param *pa);

/* Tied weights (`tie W = E`, tied.c). After every op's params are
 * declared: each tied W's param becomes a copy of the embedding's table
 * (pa->owner), moved after the weights of their own (ex->nshadow). */
int exec_tied_declare(sb_executor *ex, sb_error *err);
/* After exec_init_params: the relayout plans between the owner's boxes
 * and the copy's (local, every rank the same). */
int exec_tied_plans(sb_executor *ex, sb_error *err);
/* Step start: each copy's w from its owner's shard. Collective. */
int exec_tied_pull(sb_executor *ex, sb_error *err);
/* Step end, before the update: each copy's gradient (all-reduced over its
 * replicas in its op's backward; under ZeRO 2 and 3 reduce-scattered, each
 * replica holding whole rows of W's box) added into its owner's summed
 * gradient, then zeroed. Collective. */
int exec_tied_push(sb_executor *ex, sb_error *err);
void exec_tied_free(sb_executor *ex);
/* Box of a param for rank coords g of its op under config c. */
void exec_param_box(const sb_executor *ex, const param *pa, const int *c, const int *g, sb_box *b);

#endif
