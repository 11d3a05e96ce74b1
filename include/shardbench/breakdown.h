/* shardbench/breakdown.h: an op-level search result's predicted step split
 * the way `search --algo megatron` splits its own (time_breakdown_seconds:
 * compute, tp_comm, dp_comm, pp_comm, bubble, optimizer; docs/megatron.md),
 * from the priced op costs: compute the ops' costs with every collective
 * left out, dp_comm the weight-gradient reductions (exposed only, with
 * cp.dp_overlap) and ZeRO-3 gathers, tp_comm the rest of the ops'
 * collectives and the relayouts between ops, pp_comm the stage-to-stage
 * sends, bubble the pipeline's idle time, optimizer 0 (the op-level cost
 * model prices no optimizer update). The parts sum to the step (cost units:
 * FLOP at F, seconds after / (F x 1e12)). search/breakdown.c. */
#ifndef SHARDBENCH_BREAKDOWN_H
#define SHARDBENCH_BREAKDOWN_H

#include "shardbench/pipesearch.h"
#include "shardbench/search.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { SB_BD_COMPUTE, SB_BD_TP, SB_BD_DP, SB_BD_PP, SB_BD_BUBBLE, SB_BD_OPTIMIZER, SB_BD_PARTS };
/* the JSON names, in that order: "compute", "tp_comm", ... */
extern const char *const sb_breakdown_names[SB_BD_PARTS];

/* A plain strategy (one config per op on all devices): no pipeline, so
 * pp_comm and bubble are 0; parts summing to r->total_cost. */
void sb_plain_breakdown(const sb_problem *pb, const sb_result *r, double parts[SB_BD_PARTS]);

/* A full-space result: T = sum_s t_s + (M - 1) max_s t_s = M t_b + the
 * other stages' t_s, with b the slowest stage: its M micro-batches split
 * into their parts, the rest the bubble (the slowest stage idle while the
 * pipeline fills and drains); parts summing to r->step_cost. */
int sb_pipe_breakdown(const sb_model *m, const sb_cost_params *cp, const sb_pipe_result *r,
                      double parts[SB_BD_PARTS], sb_error *err);

#ifdef __cplusplus
}
#endif
#endif
