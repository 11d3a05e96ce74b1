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
/* Box of a param for rank coords g of its op under config c. */
void exec_param_box(const sb_executor *ex, const param *pa, const int *c, const int *g, sb_box *b);

#endif
