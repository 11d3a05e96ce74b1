/* shardbench/backend.h: the backend interface: a small core (memory, the
 * queue of work and its timing marks, collectives) plus one table of
 * kernels per family (GEMM, convolution, norms, ...).
 *
 * A backend owns tensor memory (host memory for the CPU backend, device
 * memory for CUDA) and runs kernels with the signatures and semantics of
 * kernels.h on it. The executor touches tensor data only through these
 * tables. A new backend starts with the core and adds families one at a
 * time: a family it leaves NULL fails the executor's creation, naming the
 * family and the op that needs it (sb_backend_require), never a crash.
 * A family table fills every entry.
 *
 * The CPU backend is runtime/backend/backend_cpu.c, the CUDA backend
 * runtime/cuda/backend_cuda.cu; runtime/backend/registry.c finds them by
 * name. */
#ifndef SHARDBENCH_BACKEND_H
#define SHARDBENCH_BACKEND_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "shardbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- kernel families (kernels.h has each kernel's shapes) ---------------- */

/* runtime/kernels/k_gemm.c: strided batched GEMM */
typedef struct sb_gemm_kernels {
    void (*gemm_batched)(int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, ptrdiff_t stride_a, const float *B, int ldb,
                         ptrdiff_t stride_b, float beta, float *C, int ldc, ptrdiff_t stride_c,
                         int batch);
} sb_gemm_kernels;

/* runtime/kernels/k_conv.c: conv2d and pooling on boxes with halos */
typedef struct sb_conv_kernels {
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
} sb_conv_kernels;

/* runtime/kernels/k_dense.c: the vocab-sharded embedding */
typedef struct sb_embed_kernels {
    void (*embedding_forward)(float *out, const int32_t *idx, const float *table, int N, int D,
                              int v0, int v1);
    void (*embedding_backward)(float *dtable, const float *dout, const int32_t *idx, int N,
                               int D, int v0, int v1);
} sb_embed_kernels;

/* runtime/kernels/k_dense.c: the LSTM cell's gates */
typedef struct sb_lstm_kernels {
    void (*lstm_pointwise_forward)(float *h, float *c, float *gates, const float *preact,
                                   const float *c_prev, int B, int H);
    void (*lstm_pointwise_backward)(float *dpreact, float *dc_prev, const float *dh,
                                    const float *dc, const float *gates, const float *c,
                                    const float *c_prev, int B, int H);
} sb_lstm_kernels;

/* runtime/kernels/k_norm.c: layer, RMS and batch norm in split steps */
typedef struct sb_norm_kernels {
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
} sb_norm_kernels;

/* runtime/kernels/k_norm.c: softmax in split steps, the causal mask, and
 * the loss (softmax cross-entropy over a vocab-sharded axis) */
typedef struct sb_softmax_kernels {
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
    void (*xent_partial_picked)(float *picked, const float *logits, const int32_t *labels, int M,
                                int V, int v0);
    void (*xent_loss)(float *loss, const float *mx, const float *se, const float *picked,
                      const int32_t *labels, int M);
    void (*softmax_xent_backward)(float *dlogits, const float *dloss, const float *logits,
                                  const float *mx, const float *se, const int32_t *labels, int M,
                                  int V, int v0);
} sb_softmax_kernels;

/* runtime/kernels/k_rope.c: rotary position embedding */
typedef struct sb_rope_kernels {
    void (*rope_forward)(float *out, const float *inp, int64_t n, int D, int64_t d_stride, int S,
                         int64_t s_stride, int64_t pos0, double theta);
    void (*rope_backward)(float *dinp, const float *dout, int64_t n, int D, int64_t d_stride,
                          int S, int64_t s_stride, int64_t pos0, double theta);
} sb_rope_kernels;

/* runtime/kernels/k_pointwise.c: act, mul (broadcast), expand;
 * k_softcap.c: softcap */
typedef struct sb_pointwise_kernels {
    void (*act_forward)(float *out, const float *inp, size_t n, int fn);
    void (*act_backward)(float *dinp, const float *dout, const float *inp, size_t n, int fn);
    void (*mul_forward)(float *out, const float *a, const float *b, int nd, const int *dims,
                        unsigned bdims);
    void (*mul_backward)(float *da, float *db, const float *dout, const float *a, const float *b,
                         int nd, const int *dims, unsigned bdims);
    void (*expand_forward)(float *out, const float *inp, int nd, const int *dims, unsigned xdims);
    void (*expand_backward)(float *dinp, const float *dout, int nd, const int *dims,
                            unsigned xdims);
    void (*softcap_forward)(float *out, const float *inp, size_t n, float cap);
    void (*softcap_backward)(float *dinp, const float *dout, const float *inp, size_t n,
                             float cap);
} sb_pointwise_kernels;

/* runtime/kernels/k_tensor.c: sums: add (k inputs, relu fused) and
 * reduce_mean */
typedef struct sb_sum_kernels {
    void (*add_forward)(float *out, const float *const *inps, int k, size_t n, int relu);
    void (*add_backward)(float *const *dinps, const float *dout, const float *out, int k,
                         size_t n);
    void (*reduce_mean_forward)(float *out, const float *inp, int nd, const int *dims,
                                unsigned axes, long count);
    void (*reduce_mean_backward)(float *dinp, const float *dout, int nd, const int *dims,
                                 unsigned axes, long count);
} sb_sum_kernels;

/* runtime/kernels/k_moe.c: moe_gate's top-k routing */
typedef struct sb_moe_kernels {
    size_t (*moe_gate_work_floats)(int G, int S, int E, int k);
    void (*moe_gate_forward)(float *combine, float *dispatch, float *aux, float *work,
                             const float *logits, int G, int S, int E, int C, int k);
    void (*moe_gate_backward)(float *dlogits, float *work, const float *dcombine,
                              const float *logits, float aux_weight, int G, int S, int E, int C,
                              int k);
} sb_moe_kernels;

/* runtime/kernels/k_tensor.c: data movement: box copies and permutes */
typedef struct sb_move_kernels {
    void (*box_copy)(float *dst, const int *dst_dims, const int *dst_lo, const float *src,
                     const int *src_dims, const int *src_lo, const int *size, int nd,
                     int accumulate);
    void (*permute)(float *out, const float *inp, int nd, const int *dims, const int *perm,
                    int accumulate);
} sb_move_kernels;

/* runtime/kernels/k_tensor.c: the optimizer's update */
typedef struct sb_optim_kernels {
    void (*sgd_update)(float *w, float *g, size_t n, float lr); /* also zeroes g */
    /* Adam step t (1, 2, ...) on w with moments m, v; also zeroes g */
    void (*adam_update)(float *w, float *g, float *m, float *v, size_t n, float lr, float beta1,
                        float beta2, float eps, int t);
} sb_optim_kernels;

/* The families in one list, X(ENUM, member of sb_backend, table type):
 * sb_backend's family members in this order, the enum, the names the
 * errors print (the member's), runtime/cuda/writes.hpp's wrapper. */
#define SB_KERNEL_FAMILIES(X)                                                                      \
    X(GEMM, gemm, sb_gemm_kernels) X(CONV, conv, sb_conv_kernels)                                  \
    X(EMBED, embed, sb_embed_kernels) X(LSTM, lstm, sb_lstm_kernels)                               \
    X(NORM, norm, sb_norm_kernels) X(SOFTMAX, softmax, sb_softmax_kernels)                         \
    X(ROPE, rope, sb_rope_kernels) X(POINTWISE, pointwise, sb_pointwise_kernels)                   \
    X(SUM, sum, sb_sum_kernels) X(MOE, moe, sb_moe_kernels) X(MOVE, move, sb_move_kernels)         \
    X(OPTIM, optim, sb_optim_kernels)

typedef enum {
#define SB_FAMILY_ENUM_(E, m, T) SB_FAMILY_##E,
    SB_KERNEL_FAMILIES(SB_FAMILY_ENUM_)
#undef SB_FAMILY_ENUM_
    SB_FAMILY_COUNT
} sb_kernel_family;

/* a set of families, as sb_backend_require takes it: SB_FAM(NORM) | ... */
#define SB_FAM(E) (1u << SB_FAMILY_##E)

/* ---- the backend ------------------------------------------------------- */

typedef struct sb_backend {
    const char *name;           /* "cpu", "cuda" */
    int host_memory;            /* 1: buffers are host memory (no staging) */

    /* -- core: memory -- */
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*zero)(float *p, size_t n);
    void (*to_host)(float *host, const float *dev, size_t n);
    void (*from_host)(float *dev, const float *host, size_t n);
    /* Optional: w (n floats of backend memory) is a weight's buffer and now
     * holds its current values (after its upload, update, gather or a
     * checkpoint's write); n == 0: w stops being a weight buffer (about to
     * be released or reused). A backend that keeps the weights in another
     * form as well (the cuda backend's bf16 copies for its GEMMs) refreshes
     * it here. The executor calls it after every change of a weight. */
    void (*weight_set)(const float *w, size_t n);

    /* -- core: the queue of work and its timing -- */
    void (*sync)(void);         /* wait for queued work (NULL: none is queued) */
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

    /* -- core: communicators and collectives -- */
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
     * unpack with move->box_copy in backend memory (sb_relayout_run_mem). */
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

    /* -- kernel families, in SB_KERNEL_FAMILIES' order (NULL: none) -- */
    const sb_gemm_kernels *gemm;
    const sb_conv_kernels *conv;
    const sb_embed_kernels *embed;
    const sb_lstm_kernels *lstm;
    const sb_norm_kernels *norm;
    const sb_softmax_kernels *softmax;
    const sb_rope_kernels *rope;
    const sb_pointwise_kernels *pointwise;
    const sb_sum_kernels *sum;
    const sb_moe_kernels *moe;
    const sb_move_kernels *move;
    const sb_optim_kernels *optim;
} sb_backend;

/* A family's name as errors print it ("gemm", "norm"; "?" out of range). */
const char *sb_kernel_family_name(sb_kernel_family f);

/* 0 when be has every family of `families` (SB_FAM bits) with every entry
 * filled; else -1 with err (SB_EXIT_INPUT) naming the backend, the first
 * family missing (or its first empty entry) and `who`, what needs it:
 * "backend 'x' has no norm kernels (sb_backend.norm is NULL), needed by
 * op 'ln1' (norm)". */
int sb_backend_require(const sb_backend *be, unsigned families, const char *who, sb_error *err);

/* The CPU backend (OpenBLAS + plain C, MPI collectives), every family. */
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

#ifdef __cplusplus
}
#endif

#endif
