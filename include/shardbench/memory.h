/* shardbench/memory.h: the memory model. Bytes per device that an op holds
 * under a config, and the peak per device of a whole strategy, so that
 * strategies that cannot fit a device are pruned. Formulas:
 * search/README.md, "Memory model". Not a measurement (the runtime measures:
 * sb_executor_peak_bytes). */
#ifndef SHARDBENCH_MEMORY_H
#define SHARDBENCH_MEMORY_H

#include "shardbench/search.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_DEVICE_MEM_DEFAULT_GIB 80.0

typedef enum { SB_OPTIM_SGD = 0, SB_OPTIM_ADAM = 1 } sb_optimizer;

/* "sgd" or "adam"; anything else is an input error naming the value. */
int sb_optimizer_parse(const char *s, sb_optimizer *out, sb_error *err);
const char *sb_optimizer_name(sb_optimizer o);

/* Bytes per device (fp32) of one op under one config, on a device inside
 * the op's grid (devices outside it hold nothing for the op). */
typedef struct {
    double weights;      /* the op's trained tensors (its shard) */
    double weight_grads; /* their gradients: as weights */
    double optimizer;    /* SGD: 0; Adam: 2 x weights (first and second moments) */
    double activations;  /* inputs (with halos) and outputs kept for backward, and
                            saved statistics / LSTM states */
    double act_grads;    /* gradients of the inputs and outputs (backward) */
    double scratch;      /* transient inside the op: GEMM operand copies and
                            communication / relayout buffers */
} sb_mem;

/* Everything but the scratch: what stays allocated until the step ends. */
double sb_mem_resident(const sb_mem *x);

void sb_op_memory(const sb_model *m, const sb_op *op, const int *c, sb_optimizer opt,
                  sb_mem *out);
/* The same under ZeRO stage `zero` (0..3, sb_cost_params.zero): weights,
 * weight_grads and optimizer divided by each weight's replica count for
 * the stages that slice them; stage 2 and 3 add the op's whole gradient,
 * 3 also its whole weight, to scratch (search/README.md). */
void sb_op_memory_zero(const sb_model *m, const sb_op *op, const int *c, sb_optimizer opt,
                       int zero, sb_mem *out);
/* The same, the op recomputed when recompute != 0 and the op is
 * recomputable (sb_op_recomputable), as the runtime does it: only its
 * outputs (read by the next ops) and its input gradients (read by its
 * producers' backward) stay (activations: outputs; act_grads: inputs); its
 * inputs, saved state and output gradients live only from its recomputed
 * forward to the end of its backward (scratch), but for the inputs an
 * earlier pipeline stage sent (sb_tensor.stage_input), which stay
 * (activations). */
void sb_op_memory_rc(const sb_model *m, const sb_op *op, const int *c, sb_optimizer opt,
                     int zero, int recompute, sb_mem *out);
/* The same in the bytes of precision recipe `prec` (shardbench/precision.h:
 * weights, gradients, optimizer state per parameter, activations, their
 * gradients and buffers per element); sb_op_memory_rc is fp32. */
void sb_op_memory_prec(const sb_model *m, const sb_op *op, const int *c, sb_optimizer opt,
                       int zero, int recompute, int prec, sb_mem *out);

/* sb_op_memory_zero of op v under its config k in pb (pb->cp.zero), with
 * the activations counted pb->cp.act_copies times when that is above 1 (a
 * pipeline stage holding several micro-batches in flight). */
void sb_problem_op_memory(const sb_problem *pb, int v, int k, sb_optimizer opt, sb_mem *out);
/* The same with recomputation of op v on (rc = 1) or off, whatever the
 * problem's mode (the memory-limited search's per-op choice). */
void sb_problem_op_memory_rc(const sb_problem *pb, int v, int k, sb_optimizer opt, int rc,
                             sb_mem *out);

/* Peak bytes per device of a strategy (under pb->cp.zero and act_copies): the sum over ops of the resident
 * bytes plus the largest scratch of any op (device 0 is in every op's grid,
 * so the sum is its figure and the maximum over devices). If sum is not
 * NULL it gets the per-category sums (scratch: the largest). */
double sb_strategy_memory(const sb_problem *pb, const int *choice, sb_optimizer opt,
                          sb_mem *sum);
/* The same with the recomputed ops given (m->nops flags; NULL: as
 * pb->cp.recompute says, all or none; sb_strategy_memory is this with
 * NULL). */
double sb_strategy_memory_rc(const sb_problem *pb, const int *choice,
                             const unsigned char *recompute, sb_optimizer opt, sb_mem *sum);

/* The least-cost strategy whose sb_strategy_memory is at most limit_bytes
 * (exact: search/dp_mem.c). With pb->cp.recompute auto, each op may also be
 * recomputed (its sb_recompute_cost added, its memory as sb_op_memory_rc):
 * the least-cost (strategy, recomputed ops) pair that fits, the ops in
 * out->recompute (NULL when the least-cost strategy fits without any). When the unconstrained optimum fits it is the
 * answer. When nothing fits: SB_EXIT_INPUT, the message gives the least
 * memory of any strategy, also put in *least_bytes (if not NULL; NAN
 * otherwise). opts as for sb_search (the vertex order is its algo's). */
int sb_search_within(const sb_problem *pb, const sb_search_opts *opts, double limit_bytes,
                     sb_optimizer opt, sb_result *out, double *least_bytes, sb_error *err);

/* sb_search_within given cost_ub, the cost of a strategy known to fit
 * (INFINITY: none): partial strategies that cannot end at or under it
 * (their cost plus the least cost of every table not yet combined, over
 * it) are dropped early. The same result as sb_search_within: the optimum
 * costs at most cost_ub, and every label that leads to it, or ties it, is
 * kept in the same order (docs/dp-exactness.md). cost_ub must be the cost
 * of a strategy that fits, or the answer may be lost. */
int sb_search_within_ub(const sb_problem *pb, const sb_search_opts *opts, double limit_bytes,
                        sb_optimizer opt, double cost_ub, sb_result *out, double *least_bytes,
                        sb_error *err);

/* The trained tensors of op under config c (its own weights, then its
 * weight operands), at most max: elems[w], its shard's elements per device,
 * and q[w], its replica count (the devices of the op's grid holding the same
 * shard: the product of the splits of the iteration dims it does not
 * follow; 1 for batch-norm weights, whose gradients are not summed). Returns
 * how many. What ZeRO slices (the runtime's gradient groups). */
int sb_weight_replicas(const sb_model *m, const sb_op *op, const int *c, double *elems,
                       double *q, int max);

#ifdef __cplusplus
}
#endif
#endif
