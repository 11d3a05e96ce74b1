/* shardbench/pipeline.h: the pipeline and recomputation parts of a strategy,
 * shared by the search (which chooses them), strategy files (which carry
 * them) and the runtime (which runs them).
 *
 * A pipeline cuts the model's ops, in model order (a topological order),
 * into S consecutive stages; stage s holds ops [first_op[s], first_op[s+1])
 * and runs on its own `devices[s]` ranks, the ranks after those of the
 * stages before it (stage 0: ranks 0 .. devices[0]-1). Each op's config is
 * a config for its stage's devices (its product <= devices[s]). The global
 * batch is cut into M equal micro-batches along every op's dim named
 * "batch"; gradients are summed over the micro-batches and the weights
 * updated once per step. S = 1, M = 1 is no pipeline (every older strategy).
 *
 * Recomputation: recompute[i] != 0 drops op i's activations after its
 * forward and computes them again (one more forward of op i) before its
 * backward. */
#ifndef SHARDBENCH_PIPELINE_H
#define SHARDBENCH_PIPELINE_H

#include "shardbench/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_MAX_STAGES 128

typedef enum { SB_SCHEDULE_GPIPE = 0, SB_SCHEDULE_1F1B = 1 } sb_schedule;

typedef struct {
    int nstages;                      /* S >= 1 */
    int first_op[SB_MAX_STAGES + 1];  /* stage s: ops [first_op[s], first_op[s+1]); first_op[S] = nops */
    int devices[SB_MAX_STAGES];       /* ranks of stage s (their sum is P) */
    int microbatches;                 /* M >= 1 */
    sb_schedule schedule;
} sb_pipeline;

/* No pipeline: one stage of every op on all p devices, one micro-batch. */
void sb_pipeline_none(sb_pipeline *pl, int nops, int p);
/* S stages of (as near as possible) equal op counts and p/S devices each
 * (p % S must be 0), M micro-batches. -1 with a message naming the value
 * when S or M does not fit the model or p. */
int sb_pipeline_even(sb_pipeline *pl, const sb_model *m, int p, int S, int M,
                     sb_schedule sched, sb_error *err);
/* 0 when pl is a valid pipeline for m on p devices: stages non-empty and
 * in order, devices >= 1 summing to p, M >= 1 dividing every op's "batch"
 * dim. Errors name the value. */
int sb_pipeline_check(const sb_pipeline *pl, const sb_model *m, int p, sb_error *err);
/* Stage of op i, and the first rank of stage s. */
int sb_pipeline_stage_of(const sb_pipeline *pl, int op);
int sb_pipeline_first_rank(const sb_pipeline *pl, int s);
/* 1 for S = 1 and M = 1 (what a plain strategy is). */
int sb_pipeline_is_none(const sb_pipeline *pl);

/* Recomputation: 1 when op can be recomputed (every kind but the loss,
 * softmax_xent, whose backward follows its forward at once, and the LSTM,
 * which keeps its own per-step state); recompute flags of other ops are
 * ignored by the runtime and the memory and cost models. */
int sb_op_recomputable(const sb_op *op);
/* Recompute flags (m->nops) from "none", "all" (every recomputable op) or
 * a comma-separated list of op names (each must be recomputable). 0, or -1
 * with a message naming the unknown or unrecomputable op. */
int sb_recompute_parse(const sb_model *m, const char *spec, unsigned char *flags, sb_error *err);

const char *sb_schedule_name(sb_schedule s);     /* "gpipe", "1f1b" */
int sb_schedule_parse(const char *s, sb_schedule *out); /* 0, or -1 if unknown */

#ifdef __cplusplus
}
#endif
#endif
