/* shardbench/runtime.h: the SPMD executor and the backend interface.
 *
 * One MPI rank per device. Every rank derives the whole plan from the model
 * and the strategy (one config per op): each op runs on the first q ranks of
 * the communicator as a grid; each rank computes its box of the iteration
 * space with the backend's kernels; partial sums of split reduction dims are
 * all-reduced in the group of ranks that differ only in those dims; tensors
 * move between ops by box intersection (relayout.h). Training steps are
 * real: forward, softmax cross-entropy loss, backward, SGD update.
 *
 * A backend (backend.h) is a core of memory, queue and collectives plus
 * one table of kernels per family, on memory it owns (host memory for the
 * CPU backend, device memory for CUDA). The executor never touches tensor
 * data except through it. */
#ifndef SHARDBENCH_RUNTIME_H
#define SHARDBENCH_RUNTIME_H

#include <mpi.h>

#include "shardbench/backend.h"
#include "shardbench/kernels.h"
#include "shardbench/model.h"
#include "shardbench/pipeline.h"
#include "shardbench/relayout.h"
#include "shardbench/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sb_data_source sb_data_source; /* dtensor.h: a dataset's samples */

/* The update rule of the executor's step (the memory model's sb_optimizer,
 * memory.h, counts the same state: none for sgd, two fp32 moments for adam). */
typedef enum { SB_UPDATE_SGD = 0, SB_UPDATE_ADAM = 1 } sb_update_rule;

typedef struct {
    float lr;          /* learning rate (default 0.01) */
    sb_update_rule update; /* plain SGD (default) or Adam */
    float beta1, beta2, eps; /* Adam's (defaults 0.9, 0.999, 1e-8) */
    uint64_t seed;     /* weights, inputs and labels (default 1) */
    /* Real data instead of the synthetic inputs and labels (NULL: synthetic).
     * The model must have exactly one input tensor, (batch, sample dims...),
     * the sample dims equal to the source's, and losses over (batch,
     * classes). Step s reads global batch s of the epoch order (shuffled by
     * data_seed, 0: in file order; the remainder of an epoch is dropped);
     * every rank reads just the rows of its boxes. */
    const sb_data_source *data;
    uint64_t data_seed;
    /* More that every rank must share (a caller's run options: steps,
     * checkpoint folders, ...), as "name=value" lines, or NULL; compared
     * across ranks with the executor's own options at creation. */
    const char *agree;
    /* 1: also read the process's CPU clock at every host timing mark, for
     * sb_op_time.compute_cpu_s and other_cpu_s (a syscall a mark: `profile`
     * asks for it only where ranks share a core). Not compared across
     * ranks. */
    int cpu_times;
} sb_exec_opts;

typedef struct sb_executor sb_executor;

/* Builds the plan of strategy st for model m on comm (its size is the
 * device count P; the strategy's configs must have products <= P, or with a
 * pipeline <= their stage's devices, and split every dim of a micro-batch
 * evenly; its pipeline runs on consecutive ranks, its recompute flags drop
 * and recompute activations, and its ZeRO stage shards over each weight's
 * replica group, q ranks: 1 the optimizer state (each rank updates 1/q of
 * the weight after the gradient's all-reduce, then the weight is
 * all-gathered); 2 also the gradient (reduce-scattered instead of
 * all-reduced); 3 also the weight (only the slice persists; gathered for
 * the op's forward and backward); rank r of a group owns [r*ceil(n/q),
 * min(n, (r+1)*ceil(n/q))) of the flattened shard of n floats. Its rank
 * order and precision are the caller's: the executor trains fp32 on ranks
 * as given). Collective over comm. First checks
 * that every rank holds the same model, strategy and options
 * (sb_agree_plan), then that every rank reaches the same verdict before
 * any communication that could hang. The
 * strategy is copied: it need not outlive the call; the model must outlive
 * the executor. */
int sb_executor_create(MPI_Comm comm, const sb_model *m, const sb_strategy *st,
                       const sb_backend *be, const sb_exec_opts *opts, sb_executor **out,
                       sb_error *err);

/* What every rank must share, one fact a line ("name=value"; malloc'ed,
 * NULL when out of memory): the model (name, parameters, tensors, ops with
 * dims, attributes, operands and weights) and the strategy (each op's
 * config). */
char *sb_model_text(const sb_model *m);
char *sb_strategy_text(const sb_model *m, const sb_strategy *st);
/* Collective over comm: 0 when every rank holds the same model (and, for
 * sb_agree_plan, the same strategy, backend and options: lr, seed, data
 * source and seed, opts->agree); else -1 on every rank, with err naming
 * the first difference: "ranks disagree on the model: rank 0 has
 * batch=16, rank 2 has batch=8" (sb_agree_text, dtensor.h). */
int sb_agree_model(MPI_Comm comm, const sb_model *m, sb_error *err);
int sb_agree_plan(MPI_Comm comm, const sb_model *m, const sb_strategy *st,
                  const sb_backend *be, const sb_exec_opts *opts, sb_error *err);

/* One training step: forward, loss, backward, SGD (with a pipeline: each
 * rank runs its stage's forwards and backwards of the M micro-batches in
 * the schedule's order, then one update on the summed gradients). *loss
 * (every rank) is the mean softmax cross-entropy of the step's whole
 * batch. Collective. Returns 0; -1 on
 * a failure of this rank alone (the others may wait in collectives: end
 * the job); -2 when every rank stopped together with the same err (a
 * dataset record that a rank could not read, or a label out of range: no
 * weight was updated, the step does not count, and the job can end
 * normally). */
int sb_executor_step(sb_executor *ex, double *loss, sb_error *err);

/* Per-op seconds of the last steps, summed since the last reset (this
 * rank): compute; communication (comm_s: everything the op waits on, its
 * own collectives and relayouts included); and relayout_s, the part of
 * comm_s spent in the relayouts between ops booked to it (its inputs'
 * forward relayouts, its outputs' gradient relayouts), which depend on the
 * neighbours' configs, not on its own alone (the predictive cost model,
 * shardbench/profile.h, prices them apart); and other_s, the executor's
 * own work around the op outside both (buffers taken and zeroed, inputs
 * generated, the gradients of an output's consumers summed). */
typedef struct {
    double compute_s, comm_s, relayout_s, other_s;
    /* compute_s and other_s on the process's CPU clock (all its threads):
     * the seconds the rank ran in them, not those it waited for a core
     * shared with other ranks. Only with sb_exec_opts.cpu_times on a
     * backend whose marks are host clock readings (sb_executor_cpu_times
     * says so); else 0. */
    double compute_cpu_s, other_cpu_s;
} sb_op_time;
const sb_op_time *sb_executor_op_times(const sb_executor *ex);
/* 1 when the op times carry CPU seconds (sb_exec_opts.cpu_times on a
 * backend whose marks are host clock readings), else 0. */
int sb_executor_cpu_times(const sb_executor *ex);
void sb_executor_reset_times(sb_executor *ex);
/* The last step's [4 i + k], k = 0..3: op i's first forward entry, last
 * forward exit, first backward entry and last backward exit on this rank,
 * in seconds since this rank began the step (on every backend's marks: the
 * host clock, or a backend's queue); NaN where the op did not run that
 * phase. Ranks that begin a step together (the profile's barrier before
 * each step) can compare them: the predictive model's profile takes each
 * op's critical-path span from them (measure/profile_run.c). */
const double *sb_executor_op_phase_times(const sb_executor *ex);

/* Peak bytes of tensor memory this rank held (backend allocations). */
int64_t sb_executor_peak_bytes(const sb_executor *ex);

/* Number of trainable weight tensors and, for weight w, its name and
 * global element count; gathers the global values to `root` (collective;
 * out is written on root only, n floats). */
int sb_executor_nweights(const sb_executor *ex);
const char *sb_executor_weight_name(const sb_executor *ex, int w, int64_t *n);
int sb_executor_gather_weight(sb_executor *ex, int w, int root, float *out, sb_error *err);

/* A weight's global shape and this rank's box of it (nd 0: the rank holds
 * none of it), and the rank's shard as host floats (row-major over the
 * box): read, or overwrite (checkpoint restore). Local, no communication. */
int sb_executor_weight_shape(const sb_executor *ex, int w, int64_t *shape);
void sb_executor_weight_box(const sb_executor *ex, int w, sb_box *box);
int sb_executor_weight_read(const sb_executor *ex, int w, float *host, sb_error *err);
int sb_executor_weight_write(sb_executor *ex, int w, const float *host, sb_error *err);
/* Every rank's box of weight w (boxes[nranks]); for planning relayouts. */
void sb_executor_weight_boxes(const sb_executor *ex, int w, sb_box *boxes);
/* Steps done so far; a restored checkpoint sets it, so inputs and labels
 * (drawn from seed + step) continue where the saved run stopped. */
int sb_executor_steps_done(const sb_executor *ex);
void sb_executor_set_steps_done(sb_executor *ex, int steps);
MPI_Comm sb_executor_comm(const sb_executor *ex);
/* Adam's moments of weight w (which: 1 the first, 2 the second), this
 * rank's shard, laid out as the weight's (sb_executor_weight_box): -1 with
 * err when the executor has no Adam moments or keeps them sliced (ZeRO
 * stage 1 or more). */
int sb_executor_moment_read(const sb_executor *ex, int w, int which, float *host, sb_error *err);
int sb_executor_moment_write(sb_executor *ex, int w, int which, const float *host, sb_error *err);
/* The state a checkpoint holds of weight w, as this rank's whole shard
 * (laid out as sb_executor_weight_box) under any ZeRO stage: part 0 the
 * weight, 1 and 2 Adam's moments. Read is collective over the weight's
 * replica group where ZeRO slices that part (the slices all-gathered into
 * host; every rank of the executor reads the same weights and parts in the
 * same order); write is local (each rank keeps its slice of host). -1 with
 * err for a part the executor does not have. */
int sb_executor_state_read(sb_executor *ex, int w, int part, float *host, sb_error *err);
int sb_executor_state_write(sb_executor *ex, int w, int part, const float *host, sb_error *err);
sb_update_rule sb_executor_update(const sb_executor *ex);
int sb_executor_zero(const sb_executor *ex); /* the ZeRO stage */
const sb_backend *sb_executor_backend(const sb_executor *ex);

void sb_executor_free(sb_executor *ex);

#ifdef __cplusplus
}
#endif
#endif
