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
 * A backend is a table of kernels with the signatures of kernels.h, on
 * memory it owns (host memory for the CPU backend, device memory for CUDA)
 * plus copies to and from the host. The executor never touches tensor data
 * except through the table. */
#ifndef SHARDBENCH_RUNTIME_H
#define SHARDBENCH_RUNTIME_H

#include <mpi.h>

#include "shardbench/kernels.h"
#include "shardbench/model.h"
#include "shardbench/pipeline.h"
#include "shardbench/relayout.h"
#include "shardbench/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sb_backend {
    const char *name;           /* "cpu", "cuda" */
    int host_memory;            /* 1: buffers are host memory (no staging) */
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*zero)(float *p, size_t n);
    void (*to_host)(float *host, const float *dev, size_t n);
    void (*from_host)(float *dev, const float *host, size_t n);
    void (*sync)(void);         /* wait for queued work */
    /* Optional step timing on the backend's queue of work, without waiting
     * (NULL: the executor reads the host clock, after sync when there is
     * one). mark(k) records mark k when the work queued before it is done
     * (within a step k = 0, 1, ..., the executor's count; a mark number is
     * recorded again in later steps); marks_read(n, t) waits once for the
     * queued work and sets t[k], k < n, to mark k's seconds on one clock
     * (any origin). 0, or -1 with t unset (the step's times are then
     * dropped). The executor reads its marks once per step. */
    void (*mark)(int k);
    int (*marks_read)(int n, double *t);
    /* Optional: w (n floats of backend memory) is a weight's buffer and now
     * holds its current values (after its upload, update, gather or a
     * checkpoint's write); n == 0: w stops being a weight buffer (about to
     * be released or reused). A backend that keeps the weights in another
     * form as well (the cuda backend's bf16 copies for its GEMMs) refreshes
     * it here. The executor calls it after every change of a weight. */
    void (*weight_set)(const float *w, size_t n);
    /* Optional: releases backend state (NCCL communicators) of MPI
     * communicators freed since; the executor calls it after freeing its
     * rank groups, outside MPI's attribute callbacks. */
    void (*comm_release)(void);
    /* Optional: the executor's rank groups were split (collective over
     * parent; sb_group_cache_set_split_hook): the backend derives child's
     * communicator state from parent's (ncclCommSplit). */
    void (*comm_split)(MPI_Comm parent, int color, int key, MPI_Comm child);
    /* Optional: tears down what the backend holds on MPI communicators
     * (the cuda backend's NCCL communicators) before MPI_Finalize, outside
     * MPI's attribute callbacks; the backend stays usable. Call it through
     * sb_backend_finalize. */
    void (*finalize)(void);
    /* allreduce in place over a communicator: op is MPI_SUM or MPI_MAX */
    int (*allreduce)(float *p, size_t n, MPI_Op op, MPI_Comm comm);
    /* Optional (NULL: relayouts of backend memory are staged whole through
     * host memory): the packed-overlap exchange of a relayout on backend
     * buffers, as MPI_Alltoallv (counts in floats); relayouts then pack and
     * unpack with box_copy in backend memory (sb_relayout_run_mem). */
    int (*alltoallv)(const float *sbuf, const int *scount, const int *sdispl, float *rbuf,
                     const int *rcount, const int *rdispl, MPI_Comm comm);
    /* ZeRO's collectives over comm (q ranks) on an n-float buffer cut into
     * q contiguous slices in rank order: rank r's slice is count[r] floats
     * at displ[r] (displ[r + 1] = displ[r] + count[r], counts may be 0).
     * reduce_scatter: recv (count[me] floats) = the sum over the ranks of
     * their send's slice me (send: n floats). allgather, in place: every
     * slice of p from its owner. 0, or an MPI error code. */
    int (*reduce_scatter)(const float *send, float *recv, const int *count, const int *displ,
                          MPI_Comm comm);
    int (*allgather)(float *p, const int *count, const int *displ, MPI_Comm comm);

    /* kernels, with the semantics of kernels.h */
    void (*gemm_batched)(int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, ptrdiff_t stride_a, const float *B, int ldb,
                         ptrdiff_t stride_b, float beta, float *C, int ldc, ptrdiff_t stride_c,
                         int batch);
    size_t (*conv2d_work_floats)(int C, int R, int S, int N, int H_out, int W_out);
    void (*conv2d_forward)(float *out, const float *inp, const float *w, const float *bias,
                           float *work, int B, int C, int H_in, int W_in, int N, int R, int S,
                           int sh, int sw, int pt, int pl, int H_out, int W_out, int dil_h,
                           int dil_w, int groups, int relu);
    void (*conv2d_backward_data)(float *dinp, float *work, const float *dout, const float *out,
                                 const float *w, int B, int C, int H_in, int W_in, int N, int R,
                                 int S, int sh, int sw, int pt, int pl, int H_out, int W_out,
                                 int dil_h, int dil_w, int groups);
    void (*conv2d_backward_filter)(float *dw, float *dbias, float *work, const float *dout,
                                   const float *out, const float *inp, int B, int C, int H_in,
                                   int W_in, int N, int R, int S, int sh, int sw, int pt, int pl,
                                   int H_out, int W_out, int dil_h, int dil_w, int groups);
    void (*maxpool2d_forward)(float *out, const float *inp, int B, int C, int H_in, int W_in,
                              int R, int S, int sh, int sw, int pt, int pl, int H_out, int W_out);
    void (*maxpool2d_backward)(float *dinp, const float *dout, const float *inp, int B, int C,
                               int H_in, int W_in, int R, int S, int sh, int sw, int pt, int pl,
                               int H_out, int W_out);
    void (*avgpool2d_forward)(float *out, const float *inp, int B, int C, int H_in, int W_in,
                              int R, int S, int sh, int sw, int pt, int pl, int H_out, int W_out,
                              int count_pad);
    void (*avgpool2d_backward)(float *dinp, const float *dout, int B, int C, int H_in, int W_in,
                               int R, int S, int sh, int sw, int pt, int pl, int H_out,
                               int W_out, int count_pad);
    void (*embedding_forward)(float *out, const int32_t *idx, const float *table, int N, int D,
                              int v0, int v1);
    void (*embedding_backward)(float *dtable, const float *dout, const int32_t *idx, int N,
                               int D, int v0, int v1);
    void (*lstm_pointwise_forward)(float *h, float *c, float *gates, const float *preact,
                                   const float *c_prev, int B, int H);
    void (*lstm_pointwise_backward)(float *dpreact, float *dc_prev, const float *dh,
                                    const float *dc, const float *gates, const float *c,
                                    const float *c_prev, int B, int H);
    void (*norm_finish_stats)(float *mean, float *rstd, const float *sum, const float *sumsq,
                              int n, long count, float eps);
    void (*norm_mean)(float *mean, const float *sum, int n, long count);
    void (*norm_rstd)(float *rstd, const float *sq, int n, long count, float eps);
    void (*layernorm_centered)(float *sq, const float *inp, const float *mean, int M, int D);
    void (*batchnorm_centered)(float *sq, const float *inp, const float *mean, int B, int C,
                               int HW);
    void (*layernorm_stats)(float *sum, float *sumsq, const float *inp, int M, int D);
    void (*layernorm_apply)(float *out, const float *inp, const float *mean, const float *rstd,
                            const float *gamma, const float *beta, int M, int D);
    void (*layernorm_backward_stats)(float *s1, float *s2, const float *dout, const float *inp,
                                     const float *mean, const float *rstd, const float *gamma,
                                     int M, int D);
    void (*layernorm_backward_apply)(float *dinp, float *dgamma, float *dbeta, const float *dout,
                                     const float *inp, const float *mean, const float *rstd,
                                     const float *gamma, const float *s1, const float *s2, int M,
                                     int D, int D_total);
    void (*rmsnorm_stats)(float *sumsq, const float *inp, int M, int D);
    void (*rmsnorm_apply)(float *out, const float *inp, const float *rstd, const float *gamma,
                          int M, int D);
    void (*rmsnorm_backward_stats)(float *s, const float *dout, const float *inp,
                                   const float *gamma, int M, int D);
    void (*rmsnorm_backward_apply)(float *dinp, float *dgamma, const float *dout,
                                   const float *inp, const float *rstd, const float *gamma,
                                   const float *s, int M, int D, int D_total);
    void (*batchnorm_stats)(float *sum, float *sumsq, const float *inp, int B, int C, int HW);
    void (*batchnorm_apply)(float *out, const float *inp, const float *mean, const float *rstd,
                            const float *gamma, const float *beta, int B, int C, int HW,
                            int relu);
    void (*batchnorm_backward_stats)(float *sum_dy, float *sum_dy_xhat, const float *dout,
                                     const float *out, const float *inp, const float *mean,
                                     const float *rstd, int B, int C, int HW);
    void (*batchnorm_backward_apply)(float *dinp, const float *dout, const float *out,
                                     const float *inp, const float *mean, const float *rstd,
                                     const float *gamma, const float *sum_dy,
                                     const float *sum_dy_xhat, int B, int C, int HW, long count);
    void (*softmax_partial_max)(float *mx, const float *inp, int outer, int A, int inner);
    void (*softmax_partial_sumexp)(float *se, const float *inp, const float *mx, int outer,
                                   int A, int inner);
    void (*softmax_apply)(float *out, const float *inp, const float *mx, const float *se,
                          int outer, int A, int inner);
    void (*softmax_backward_dot)(float *dot, const float *dout, const float *out, int outer,
                                 int A, int inner);
    void (*softmax_backward_apply)(float *dinp, const float *dout, const float *out,
                                   const float *dot, int outer, int A, int inner);
    void (*causal_mask)(float *out, const float *inp, int64_t n, int64_t key_stride, int key_ext,
                        int64_t key_lo, int64_t query_stride, int query_ext, int64_t query_lo,
                        int64_t window);
    void (*rope_forward)(float *out, const float *inp, int64_t n, int D, int64_t d_stride, int S,
                         int64_t s_stride, int64_t pos0, double theta);
    void (*rope_backward)(float *dinp, const float *dout, int64_t n, int D, int64_t d_stride,
                          int S, int64_t s_stride, int64_t pos0, double theta);
    void (*xent_partial_picked)(float *picked, const float *logits, const int32_t *labels, int M,
                                int V, int v0);
    void (*xent_loss)(float *loss, const float *mx, const float *se, const float *picked,
                      const int32_t *labels, int M);
    void (*softmax_xent_backward)(float *dlogits, const float *dloss, const float *logits,
                                  const float *mx, const float *se, const int32_t *labels, int M,
                                  int V, int v0);
    size_t (*moe_gate_work_floats)(int G, int S, int E, int k);
    void (*moe_gate_forward)(float *combine, float *dispatch, float *aux, float *work,
                             const float *logits, int G, int S, int E, int C, int k);
    void (*moe_gate_backward)(float *dlogits, float *work, const float *dcombine,
                              const float *logits, float aux_weight, int G, int S, int E, int C,
                              int k);
    void (*add_forward)(float *out, const float *const *inps, int k, size_t n, int relu);
    void (*add_backward)(float *const *dinps, const float *dout, const float *out, int k,
                         size_t n);
    void (*reduce_mean_forward)(float *out, const float *inp, int nd, const int *dims,
                                unsigned axes, long count);
    void (*reduce_mean_backward)(float *dinp, const float *dout, int nd, const int *dims,
                                 unsigned axes, long count);
    void (*act_forward)(float *out, const float *inp, size_t n, int fn);
    void (*act_backward)(float *dinp, const float *dout, const float *inp, size_t n, int fn);
    void (*mul_forward)(float *out, const float *a, const float *b, int nd, const int *dims,
                        unsigned bdims);
    void (*mul_backward)(float *da, float *db, const float *dout, const float *a, const float *b,
                         int nd, const int *dims, unsigned bdims);
    void (*expand_forward)(float *out, const float *inp, int nd, const int *dims, unsigned xdims);
    void (*expand_backward)(float *dinp, const float *dout, int nd, const int *dims,
                            unsigned xdims);
    void (*box_copy)(float *dst, const int *dst_dims, const int *dst_lo, const float *src,
                     const int *src_dims, const int *src_lo, const int *size, int nd,
                     int accumulate);
    void (*permute)(float *out, const float *inp, int nd, const int *dims, const int *perm,
                    int accumulate);
    void (*sgd_update)(float *w, float *g, size_t n, float lr); /* also zeroes g */
    /* Adam step t (1, 2, ...) on w with moments m, v; also zeroes g */
    void (*adam_update)(float *w, float *g, float *m, float *v, size_t n, float lr, float beta1,
                        float beta2, float eps, int t);
} sb_backend;

/* The CPU backend (OpenBLAS + plain C, MPI collectives). */
extern const sb_backend sb_backend_cpu;
/* The same kernels posing as a backend with its own memory, to test the
 * executor's device-memory paths (staging, sb_relayout_run_mem) on a host:
 * sb_backend_get("cpu-devmem"), or this. */
const sb_backend *sb_backend_cpu_devmem(void);

/* The CUDA backend when compiled in and a GPU is present; else NULL with
 * err saying why ("not compiled in", "no GPU"). */
const sb_backend *sb_backend_cuda_get(sb_error *err);

/* Looks a backend up by name ("cpu", "cuda"); NULL with err set if it is
 * not compiled in or cannot run here. */
const sb_backend *sb_backend_get(const char *name, sb_error *err);

/* be->finalize when be has one (be may be NULL): every command that used a
 * backend calls it right before MPI_Finalize. */
void sb_backend_finalize(const sb_backend *be);

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
