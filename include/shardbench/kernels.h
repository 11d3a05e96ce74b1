/* shardbench/kernels.h: the CPU backend's compute kernels (runtime/kernels/k_*.c).
 *
 * What it is: llm.c-style layers, each a pair of plain functions
 * X_forward / X_backward on raw fp32 pointers and sizes, with the shapes in a
 * one-line comment. No hidden state: a kernel touches only its arguments,
 * never allocates, never fails. What it is not: the SPMD executor, the
 * collectives, or the GPU backend; those call these.
 *
 * Conventions (every function below follows them):
 * - Tensors are dense and row-major; images are NCHW. Shapes are written
 *   (A,B,...) in the comments.
 * - A kernel sees a rank's LOCAL box (its shard): every size is the box's
 *   size, never the global one, except where a `*_total` / `count` argument
 *   names the global extent of a sharded reduction.
 * - Forward functions overwrite their outputs. Backward functions ACCUMULATE
 *   (+=) into every gradient they produce, so the caller zeroes gradients
 *   once and several consumers can add into the same buffer. A NULL gradient
 *   pointer means "not wanted".
 * - Fused relu: a forward with `relu != 0` applies max(0, .) last (a model's
 *   pw count > 0 maps to one relu: relu is idempotent). Its backward takes
 *   the forward's relu OUTPUT `out` and masks the gradient where out <= 0;
 *   out == NULL means no relu was applied.
 * - Scratch memory is the caller's: a kernel that needs it takes `work` and
 *   has a *_work_floats() size function.
 * - Split ("sharded") versions expose partial statistics so the caller can
 *   all-reduce them when the reduced axis is sharded: `*_stats` / `*_partial*`
 *   compute this box's partial sums, the caller sums (or maxes) them over the
 *   shards, then `*_apply` finishes with the global values. The unsharded
 *   function is exactly these steps with no communication in between.
 *
 * Spatial sharding of conv/pool: the input box may be a sub-box of the
 * global input that already includes halo rows/cols. The window geometry is
 * then given in LOCAL coordinates: pad_top/pad_left are the global padding
 * reduced by the halo supplied (negative when the box starts before the
 * first row the outputs need), and an input position outside the box counts
 * as padding. sb_window_input_range() computes the box and the local padding
 * for an output sub-box.
 *
 * Libraries: GEMMs (dense, conv via im2col, LSTM, batched GEMM) go through
 * OpenBLAS cblas_sgemm; everything else is plain C loops. */
#ifndef SHARDBENCH_KERNELS_H
#define SHARDBENCH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SB_MAX_DIMS 8 /* most dimensions a box/reduce/permute kernel takes */

/* ---- GEMM (OpenBLAS, row-major) ----------------------------------------- */

/* C (M,N) = alpha * op(A) op(B) + beta * C; op(A) is (M,K), op(B) is (K,N).
 * op(X) = X when trans_x == 0, X^T otherwise; lda/ldb/ldc are row strides of
 * A, B, C as stored (A stored (M,K) or (K,M) when transposed). */
/* Threads of the CPU kernels: n > 0 sets OpenBLAS's count and the OpenMP
 * loops' count (runtime/kernels/par.h) to n; returns the count in force.
 * sb_cpu_threads_sync() makes the OpenMP loops follow OpenBLAS's count
 * (OPENBLAS_NUM_THREADS, else the cores) unless OMP_NUM_THREADS is set;
 * the executor calls it for the CPU backend. sb_cpu_openmp(): 1 when the
 * kernels were built with OpenMP. */
int sb_cpu_threads(int n);
int sb_cpu_threads_sync(void);
int sb_cpu_openmp(void);

/* For a program's main(), first thing, before MPI_Init: when the kernels
 * have OpenMP and OMP_WAIT_POLICY is unset, sets it to PASSIVE and
 * re-executes the program (same argv; libgomp reads the policy only when
 * it starts). With the default, active policy idle OpenMP threads spin
 * after each loop and take the cores OpenBLAS's threads need next (a
 * 2-thread AlexNet step: about 2.0 s spinning, 1.4-1.6 s passive). Returns
 * only when nothing was to be done or the exec failed. */
void sb_cpu_passive_wait(char **argv);

void sb_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
             const float *A, int lda, const float *B, int ldb, float beta,
             float *C, int ldc);

/* batch independent GEMMs: matrix i of A, B, C starts at i * stride_{a,b,c}
 * (in floats). Same semantics as sb_gemm per matrix. */
void sb_gemm_batched(int trans_a, int trans_b, int M, int N, int K,
                     float alpha, const float *A, int lda, ptrdiff_t stride_a,
                     const float *B, int ldb, ptrdiff_t stride_b, float beta,
                     float *C, int ldc, ptrdiff_t stride_c, int batch);

/* ---- window geometry (conv, pool) --------------------------------------- */

/* For output rows [out_lo, out_hi) of a window op over one spatial axis
 * (window size `window`, `stride`, global padding `pad`, global input extent
 * in_full): the input rows they read, clamped to the input,
 * [*in_lo, *in_hi), and the pad_top (or pad_left) to pass to the kernel for
 * an input box that starts at *in_lo. */
void sb_window_input_range(int out_lo, int out_hi, int window, int stride,
                           int pad, int in_full, int *in_lo, int *in_hi,
                           int *pad_local);

/* ---- conv2d through oneDNN (the CPU backend's fast path) ----------------
 * The same semantics as the sb_conv2d_* kernels below (forward overwrites,
 * relu fused; backward data and filter accumulate), no bias; backward takes
 * dout already masked by the relu. Each returns 0, or -1 when it cannot
 * run the geometry (negative local padding of a halo box, no oneDNN in
 * this build): then the caller runs sb_conv2d_*. k_conv_dnnl.c. */
int sb_dnnl_conv2d_forward(float *out, const float *inp, const float *w, int B, int C, int H_in,
                           int W_in, int N, int R, int S, int sh, int sw, int pt, int pl,
                           int H_out, int W_out, int dil_h, int dil_w, int groups, int relu);
int sb_dnnl_conv2d_backward_data(float *dinp, const float *dout, const float *w, int B, int C,
                                 int H_in, int W_in, int N, int R, int S, int sh, int sw, int pt,
                                 int pl, int H_out, int W_out, int dil_h, int dil_w, int groups);
int sb_dnnl_conv2d_backward_filter(float *dw, const float *dout, const float *inp, int B, int C,
                                   int H_in, int W_in, int N, int R, int S, int sh, int sw, int pt,
                                   int pl, int H_out, int W_out, int dil_h, int dil_w,
                                   int groups);
int sb_dnnl_available(void);   /* built with oneDNN and its CPU engine starts */
void sb_dnnl_release(void);    /* drops the cached primitives */

/* ---- conv2d (im2col + OpenBLAS sgemm) ----------------------------------- */

/* Floats of `work` the three conv2d functions need (C, N: all channels,
 * whatever the groups; the kernels' geometry otherwise). */
size_t sb_conv2d_work_floats(int C, int R, int S, int N, int H_out, int W_out);

/* out (B,N,H_out,W_out) = conv(inp (B,C,H_in,W_in), w (N,C/G,R,S))
 *   + bias (N, or NULL), then relu if relu. G = groups divides C and N;
 * output channel n belongs to group q = n / (N/G) and reads input channels
 * q*(C/G) + c, c < C/G (depthwise: G = C); kernel taps are dil_h, dil_w apart:
 * out[b,n,y,x] = sum_{c,r,s} inp[b, q*(C/G) + c, y*stride_h - pad_top + r*dil_h,
 *                                      x*stride_w - pad_left + s*dil_w] w[n,c,r,s],
 * input positions outside (H_in,W_in) reading as 0. groups = dil = 1 is
 * the plain convolution. */
void sb_conv2d_forward(float *out, const float *inp, const float *w,
                       const float *bias, float *work, int B, int C, int H_in,
                       int W_in, int N, int R, int S, int stride_h,
                       int stride_w, int pad_top, int pad_left, int H_out,
                       int W_out, int dil_h, int dil_w, int groups, int relu);

/* dinp (B,C,H_in,W_in) += d(out)/d(inp)^T dout (B,N,H_out,W_out); halo
 * positions of dinp receive their gradient too (the caller returns it to
 * the owner). out: the forward's relu output, or NULL. */
void sb_conv2d_backward_data(float *dinp, float *work, const float *dout,
                             const float *out, const float *w, int B, int C,
                             int H_in, int W_in, int N, int R, int S,
                             int stride_h, int stride_w, int pad_top,
                             int pad_left, int H_out, int W_out, int dil_h,
                             int dil_w, int groups);

/* dw (N,C/G,R,S) += gradient of w; dbias (N, or NULL) += sum_{b,y,x} dout';
 * inp (B,C,H_in,W_in); dout (B,N,H_out,W_out); out: relu output or NULL. */
void sb_conv2d_backward_filter(float *dw, float *dbias, float *work,
                               const float *dout, const float *out,
                               const float *inp, int B, int C, int H_in,
                               int W_in, int N, int R, int S, int stride_h,
                               int stride_w, int pad_top, int pad_left,
                               int H_out, int W_out, int dil_h, int dil_w,
                               int groups);

/* ---- pooling ------------------------------------------------------------ */

/* out (B,C,H_out,W_out) = max over the R×S window of inp (B,C,H_in,W_in);
 * padding never wins (a window with no input position gives 0). */
void sb_maxpool2d_forward(float *out, const float *inp, int B, int C,
                          int H_in, int W_in, int R, int S, int stride_h,
                          int stride_w, int pad_top, int pad_left, int H_out,
                          int W_out);
/* dinp (B,C,H_in,W_in) += dout routed to each window's first maximum,
 * found again from inp (no saved indices). */
void sb_maxpool2d_backward(float *dinp, const float *dout, const float *inp,
                           int B, int C, int H_in, int W_in, int R, int S,
                           int stride_h, int stride_w, int pad_top,
                           int pad_left, int H_out, int W_out);

/* out (B,C,H_out,W_out) = mean over the window of inp (B,C,H_in,W_in).
 * count_pad != 0: divide by R*S (padding counts as zeros); count_pad == 0:
 * divide by the number of input positions in the window. */
void sb_avgpool2d_forward(float *out, const float *inp, int B, int C,
                          int H_in, int W_in, int R, int S, int stride_h,
                          int stride_w, int pad_top, int pad_left, int H_out,
                          int W_out, int count_pad);
/* dinp (B,C,H_in,W_in) += dout (B,C,H_out,W_out) spread over each window. */
void sb_avgpool2d_backward(float *dinp, const float *dout, int B, int C,
                           int H_in, int W_in, int R, int S, int stride_h,
                           int stride_w, int pad_top, int pad_left, int H_out,
                           int W_out, int count_pad);

/* ---- dense -------------------------------------------------------------- */

/* out (M,N) = inp (M,K) w (K,N) + bias (N, or NULL), then relu if relu. */
void sb_dense_forward(float *out, const float *inp, const float *w,
                      const float *bias, int M, int K, int N, int relu);
/* dinp (M,K) += dout' w^T; dw (K,N) += inp^T dout'; dbias (N) += colsum
 * dout'; dout' = dout masked by out > 0 when out != NULL (relu), in which
 * case work holds M*N floats (else work may be NULL). */
void sb_dense_backward(float *dinp, float *dw, float *dbias, float *work,
                       const float *dout, const float *out, const float *inp,
                       const float *w, int M, int K, int N);

/* ---- embedding (vocab-sharded) ------------------------------------------ */

/* out (N,D) row n = table row idx[n] - v0 when v0 <= idx[n] < v1, else 0;
 * table (v1-v0, D) holds this shard's vocab rows (summing the shards'
 * outputs gives the full gather). */
void sb_embedding_forward(float *out, const int32_t *idx, const float *table,
                          int N, int D, int v0, int v1);
/* dtable (v1-v0, D) row idx[n]-v0 += dout (N,D) row n, for idx in range. */
void sb_embedding_backward(float *dtable, const float *dout,
                           const int32_t *idx, int N, int D, int v0, int v1);

/* ---- LSTM --------------------------------------------------------------- */

/* Gate order everywhere: i, f, g, o, each H wide; preact and gates are
 * (B,4H) = [i | f | g | o] per row. i,f,o = sigmoid, g = tanh,
 * c = f*c_prev + i*g, h = o*tanh(c). */

/* Pointwise half of a cell: gates (B,4H) = activations of preact (B,4H)
 * (gates may alias preact); c, h (B,H); c_prev (B,H) or NULL (= 0). */
void sb_lstm_pointwise_forward(float *h, float *c, float *gates,
                               const float *preact, const float *c_prev,
                               int B, int H);
/* dpreact (B,4H) = gradient of preact (overwritten); dc_prev (B,H, or NULL)
 * += gradient of c_prev; dh, dc (B,H) are the total gradients reaching h and
 * c (dc may be NULL = 0); gates, c from the forward. */
void sb_lstm_pointwise_backward(float *dpreact, float *dc_prev,
                                const float *dh, const float *dc,
                                const float *gates, const float *c,
                                const float *c_prev, int B, int H);

/* One time step: preact = x (B,X) Wx (X,4H) + h_prev (B,Kh) Wh (Kh,4H)
 * + b (4H, or NULL); then the pointwise half. h, c (B,H); gates (B,4H) is
 * saved for the backward. h_prev, c_prev may be NULL (= 0). Kh is the
 * width of h_prev (H unless the units are sharded). */
void sb_lstm_cell_forward(float *h, float *c, float *gates, const float *x,
                          const float *h_prev, const float *c_prev,
                          const float *Wx, const float *Wh, const float *b,
                          int B, int X, int Kh, int H);
/* Backward of one step: dx (B,X), dh_prev (B,Kh), dc_prev (B,H), dWx (X,4H),
 * dWh (Kh,4H), db (4H) all accumulate (any may be NULL); dpreact (B,4H) is
 * scratch and holds the preact gradient on return; dh, dc (B,H) are the
 * total gradients reaching h and c (dc may be NULL). */
void sb_lstm_cell_backward(float *dx, float *dh_prev, float *dc_prev,
                           float *dWx, float *dWh, float *db, float *dpreact,
                           const float *dh, const float *dc,
                           const float *gates, const float *c,
                           const float *x, const float *h_prev,
                           const float *c_prev, const float *Wx,
                           const float *Wh, int B, int X, int Kh, int H);

/* Multi-layer, multi-step LSTM. params packs, per layer l:
 * Wx_l (X_l,4H), Wh_l (H,4H), b_l (4H), with X_0 = X and X_l = H for l > 0.
 * acts keeps, per layer, gates (T,B,4H), c (T,B,H), h (T,B,H) (time-major)
 * for the backward. */
size_t sb_lstm_params_floats(int L, int X, int H);
size_t sb_lstm_acts_floats(int L, int T, int B, int H);
size_t sb_lstm_work_floats(int T, int B, int H);

/* y (B,T,H) = top layer's h over x (B,T,X); h0, c0 (L,B,H) initial
 * states, or NULL (= 0). */
void sb_lstm_forward(float *y, float *acts, const float *x,
                     const float *params, const float *h0, const float *c0,
                     int L, int T, int B, int X, int H);
/* dx (B,T,X) and dparams (as params) accumulate (either may be NULL);
 * dy (B,T,H); x, params, h0, c0 and acts as given to / left by the forward;
 * work holds sb_lstm_work_floats() floats. No gradient for h0, c0. */
void sb_lstm_backward(float *dx, float *dparams, float *work, const float *dy,
                      const float *acts, const float *x, const float *params,
                      const float *h0, const float *c0, int L, int T, int B,
                      int X, int H);

/* ---- normalization ------------------------------------------------------ */

/* mean, rstd (n) from global sums over count elements each:
 * mean = sum/count, rstd = 1/sqrt(max(sumsq/count - mean^2, 0) + eps).
 * May run in place (mean == sum, rstd == sumsq). */
void sb_norm_finish_stats(float *mean, float *rstd, const float *sum,
                          const float *sumsq, int n, long count, float eps);

/* Layer norm over the last axis of inp (M,D); D may be a shard of D_total
 * columns; gamma, beta (D) are this shard's (NULL: 1 and 0). */

/* sum, sumsq (M): this box's partial sums of x and x^2 per row. */
void sb_layernorm_stats(float *sum, float *sumsq, const float *inp, int M,
                        int D);
/* out (M,D) = (inp - mean) * rstd * gamma + beta; mean, rstd (M) global. */
void sb_layernorm_apply(float *out, const float *inp, const float *mean,
                        const float *rstd, const float *gamma,
                        const float *beta, int M, int D);
/* Unsharded: stats, finish, apply; mean, rstd (M) saved for the backward. */
void sb_layernorm_forward(float *out, float *mean, float *rstd,
                          const float *inp, const float *gamma,
                          const float *beta, int M, int D, float eps);
/* s1, s2 (M): partial sum_d dout*gamma and sum_d dout*gamma*xhat per row. */
void sb_layernorm_backward_stats(float *s1, float *s2, const float *dout,
                                 const float *inp, const float *mean,
                                 const float *rstd, const float *gamma, int M,
                                 int D);
/* dinp (M,D) += rstd * (dout*gamma - (s1 + xhat*s2) / D_total) with global
 * s1, s2 (M); dgamma (D) += sum_m dout*xhat; dbeta (D) += sum_m dout. */
void sb_layernorm_backward_apply(float *dinp, float *dgamma, float *dbeta,
                                 const float *dout, const float *inp,
                                 const float *mean, const float *rstd,
                                 const float *gamma, const float *s1,
                                 const float *s2, int M, int D, int D_total);
/* Unsharded: backward_stats then backward_apply, row by row. */
void sb_layernorm_backward(float *dinp, float *dgamma, float *dbeta,
                           const float *dout, const float *inp,
                           const float *mean, const float *rstd,
                           const float *gamma, int M, int D);

/* Batch norm per channel over (B,H,W) of inp (B,C,HW) with HW = H*W; the
 * batch and spatial axes may be shards of `count` = B_total*H_total*W_total
 * elements per channel. gamma, beta (C) (NULL: 1 and 0). Optional fused
 * relu as everywhere. Training statistics only (no running averages). */

/* sum, sumsq (C): this box's partial sums per channel. */
void sb_batchnorm_stats(float *sum, float *sumsq, const float *inp, int B,
                        int C, int HW);
/* out (B,C,HW) = (inp - mean) * rstd * gamma + beta, relu if relu. */
void sb_batchnorm_apply(float *out, const float *inp, const float *mean,
                        const float *rstd, const float *gamma,
                        const float *beta, int B, int C, int HW, int relu);
/* Unsharded: stats, finish (count = B*HW), apply; mean, rstd (C) saved. */
void sb_batchnorm_forward(float *out, float *mean, float *rstd,
                          const float *inp, const float *gamma,
                          const float *beta, int B, int C, int HW, float eps,
                          int relu);
/* sum_dy, sum_dy_xhat (C): partial sums of dout' and dout'*xhat per channel,
 * dout' = dout masked by out > 0 when out != NULL. These partials are
 * exactly this box's dbeta and dgamma contributions. */
void sb_batchnorm_backward_stats(float *sum_dy, float *sum_dy_xhat,
                                 const float *dout, const float *out,
                                 const float *inp, const float *mean,
                                 const float *rstd, int B, int C, int HW);
/* dinp (B,C,HW) += gamma*rstd*(dout' - (sum_dy + xhat*sum_dy_xhat)/count)
 * with the global sums (C). */
void sb_batchnorm_backward_apply(float *dinp, const float *dout,
                                 const float *out, const float *inp,
                                 const float *mean, const float *rstd,
                                 const float *gamma, const float *sum_dy,
                                 const float *sum_dy_xhat, int B, int C,
                                 int HW, long count);
/* Unsharded: dinp += ..., dgamma (C) += sum_dy_xhat, dbeta (C) += sum_dy. */
void sb_batchnorm_backward(float *dinp, float *dgamma, float *dbeta,
                           const float *dout, const float *out,
                           const float *inp, const float *mean,
                           const float *rstd, const float *gamma, int B,
                           int C, int HW);

/* Two-pass statistics, the executor's path (exact when the mean is large
 * against the spread): mean (n) = sum / count; then sq (per row of a layer
 * norm, per channel of a batch norm) = this box's sum of (x - mean)^2 with
 * the global mean; then rstd (n) = 1 / sqrt(global sq / count + eps). */
void sb_norm_mean(float *mean, const float *sum, int n, long count);
void sb_norm_rstd(float *rstd, const float *sq, int n, long count, float eps);
void sb_layernorm_centered(float *sq, const float *inp, const float *mean, int M, int D);
void sb_batchnorm_centered(float *sq, const float *inp, const float *mean, int B, int C, int HW);
/* RMS norm (Llama) over the last axis of inp (M,D); D may be a shard of
 * D_total columns; gamma (D) this shard's (NULL: 1). rstd (M) =
 * 1 / sqrt(sumsq / D_total + eps) from the global sumsq, by sb_norm_rstd. */

/* sumsq (M): this box's partial sum of x^2 per row. */
void sb_rmsnorm_stats(float *sumsq, const float *inp, int M, int D);
/* out (M,D) = inp * rstd * gamma with the global rstd (M). */
void sb_rmsnorm_apply(float *out, const float *inp, const float *rstd,
                      const float *gamma, int M, int D);
/* s (M): partial sum_d dout*gamma*inp per row. */
void sb_rmsnorm_backward_stats(float *s, const float *dout, const float *inp,
                               const float *gamma, int M, int D);
/* dinp (M,D) += rstd * (dout*gamma - inp * rstd^2 * s / D_total) with the
 * global s (M); dgamma (D) += sum_m dout*inp*rstd. */
void sb_rmsnorm_backward_apply(float *dinp, float *dgamma, const float *dout,
                               const float *inp, const float *rstd,
                               const float *gamma, const float *s, int M,
                               int D, int D_total);

/* ---- softmax ------------------------------------------------------------ */

/* Softmax over the middle axis of (outer,A,inner): for the last axis use
 * inner = 1. When A is sharded: partial_max, all-reduce MAX;
 * partial_sumexp, all-reduce SUM; apply. */

/* out (outer,A,inner) = softmax of inp over A. */
void sb_softmax_forward(float *out, const float *inp, int outer, int A,
                        int inner);
/* dinp += out * (dout - sum_a dout*out). */
void sb_softmax_backward(float *dinp, const float *dout, const float *out,
                         int outer, int A, int inner);
/* mx (outer,inner) = max over this box's A. */
void sb_softmax_partial_max(float *mx, const float *inp, int outer, int A,
                            int inner);
/* se (outer,inner) = sum over this box's A of exp(inp - mx), mx global. */
void sb_softmax_partial_sumexp(float *se, const float *inp, const float *mx,
                               int outer, int A, int inner);
/* out (outer,A,inner) = exp(inp - mx) / se with global mx, se. */
void sb_softmax_apply(float *out, const float *inp, const float *mx,
                      const float *se, int outer, int A, int inner);
/* dot (outer,inner) = partial sum over this box's A of dout*out. */
void sb_softmax_backward_dot(float *dot, const float *dout, const float *out,
                             int outer, int A, int inner);
/* dinp (outer,A,inner) += out * (dout - dot) with the global dot. */
void sb_softmax_backward_apply(float *dinp, const float *dout,
                               const float *out, const float *dot, int outer,
                               int A, int inner);

/* Causal mask of a softmax, in front of the partial statistics: out (n)
 * = inp, except -FLT_MAX (probability 0 after the softmax) where the key
 * index exceeds the query index. The box of n elements is dense; key index
 * of element e = key_lo + (e / key_stride) % key_ext, query index =
 * query_lo + (e / query_stride) % query_ext (global indices: lo is the
 * box's offset along the dim). window > 0: a key `window` or more before
 * its query (query - key >= window) is masked too (sliding window). */
void sb_causal_mask(float *out, const float *inp, int64_t n, int64_t key_stride,
                    int key_ext, int64_t key_lo, int64_t query_stride,
                    int query_ext, int64_t query_lo, int64_t window);

/* Softmax cross-entropy over the last axis of logits (M,V), which hold
 * classes [v0, v0+V) of the full class axis; labels (M) are global class
 * ids, a negative label marks a row to ignore (loss 0, no gradient).
 * Sharded classes: mx via sb_softmax_partial_max (inner = 1), all-reduce
 * MAX; se via sb_softmax_partial_sumexp, all-reduce SUM; picked via
 * sb_xent_partial_picked, all-reduce SUM; then sb_xent_loss and
 * sb_softmax_xent_backward per shard. */

/* picked (M) = logits[m, labels[m]-v0] when this shard holds the label,
 * else 0. */
void sb_xent_partial_picked(float *picked, const float *logits,
                            const int32_t *labels, int M, int V, int v0);
/* loss (M) = log(se) + mx - picked (0 for ignored rows). */
void sb_xent_loss(float *loss, const float *mx, const float *se,
                  const float *picked, const int32_t *labels, int M);
/* Unsharded: loss (M) per row; mx, se (M) saved for the backward. */
void sb_softmax_xent_forward(float *loss, float *mx, float *se,
                             const float *logits, const int32_t *labels, int M,
                             int V);
/* dlogits (M,V) += dloss[m] * (softmax - onehot(label)) for this shard's
 * classes; dloss (M) is the gradient of each row's loss. */
void sb_softmax_xent_backward(float *dlogits, const float *dloss,
                              const float *logits, const float *mx,
                              const float *se, const int32_t *labels, int M,
                              int V, int v0);

/* ---- rotary position embedding (runtime/kernels/k_rope.c) ---------------- */

/* Llama's "rotate half" over a head dim of size D (whole, even) and
 * element stride d_stride in a dense box of n elements: element i < D/2
 * pairs with i + D/2, both turn by the angle pos * theta^(-2i/D), pos =
 * pos0 + (e / s_stride) % S the global seq index of element e.
 * forward: out[i] = x[i] cos - x[i+D/2] sin, out[i+D/2] = x[i+D/2] cos +
 * x[i] sin. backward: the inverse rotation of dout added into dinp. */
void sb_rope_forward(float *out, const float *inp, int64_t n, int D,
                     int64_t d_stride, int S, int64_t s_stride, int64_t pos0,
                     double theta);
void sb_rope_backward(float *dinp, const float *dout, int64_t n, int D,
                      int64_t d_stride, int S, int64_t s_stride, int64_t pos0,
                      double theta);

/* ---- mixture of experts: the router (moe_gate) ------------------------- */

/* logits (G,S,E): G groups of S tokens over E experts. Per token: p =
 * softmax over the E experts; its top-k experts (largest first, a tie to
 * the lower index) with weights p_e / (sum of p over the k), i.e. the
 * softmax of the k chosen logits. Per group, slots in [0, C) of each
 * expert in order of choice rank, then token: all first choices in seq
 * order, then all second ones, ...; a choice whose expert is full is
 * dropped. combine (G,S,E,C) = the weight at (token, expert, slot) of each
 * kept choice, dispatch (G,S,E,C) = 1 there; both 0 elsewhere. aux (G) =
 * each group's load-balancing loss, E · sum_e f_e · P_e, f_e the share of
 * its tokens whose first choice is e (before drops), P_e the mean of p_e
 * over its tokens. work holds sb_moe_gate_work_floats(G, S, E, k) floats
 * (the routing). */
size_t sb_moe_gate_work_floats(int G, int S, int E, int k);
void sb_moe_gate_forward(float *combine, float *dispatch, float *aux, float *work,
                         const float *logits, int G, int S, int E, int C, int k);
/* dlogits (G,S,E) += the gradient of the combine weights: the routing is
 * redone from logits and held constant; per token, chosen experts i get
 * w_i (g_i - sum_j w_j g_j), g_j the combine gradient at choice j's slot
 * (0 for a dropped choice, whose logit still takes gradient through the
 * normaliser); the other experts get none. dispatch has no gradient.
 * aux_weight != 0 adds the gradient of aux_weight times every group's aux
 * (f constant): aux_weight·E/S · p_e (f_e - sum_e' p_e' f_e'). */
void sb_moe_gate_backward(float *dlogits, float *work, const float *dcombine,
                          const float *logits, float aux_weight, int G, int S, int E, int C,
                          int k);

/* ---- elementwise -------------------------------------------------------- */

/* out (n) = sum of the k inputs inps[i] (n), then relu if relu. out may
 * alias an input. */
void sb_add_forward(float *out, const float *const *inps, int k, size_t n,
                    int relu);
/* dinps[i] (n) += dout', dout' = dout masked by out > 0 when out != NULL;
 * NULL entries of dinps are skipped. */
void sb_add_backward(float *const *dinps, const float *dout, const float *out,
                     int k, size_t n);
/* out (n) = max(inp, 0); may run in place. */
void sb_relu_forward(float *out, const float *inp, size_t n);
/* dinp (n) += dout where out > 0. */
void sb_relu_backward(float *dinp, const float *dout, const float *out,
                      size_t n);

/* ---- reduce-mean -------------------------------------------------------- */

/* inp has nd dims `dims`; bit d of `axes` marks axis d as reduced; out has
 * the same dims with the reduced ones set to 1. out = sum over the reduced
 * axes / count; count <= 0 means the local number of reduced elements
 * (pass the global count when a reduced axis is sharded, then all-reduce
 * SUM the outputs). */
void sb_reduce_mean_forward(float *out, const float *inp, int nd,
                            const int *dims, unsigned axes, long count);
/* dinp (dims) += dout (reduced dims) / count, broadcast. */
void sb_reduce_mean_backward(float *dinp, const float *dout, int nd,
                             const int *dims, unsigned axes, long count);

/* ---- pointwise: act, mul, expand (k_pointwise.c) ------------------------ */

/* out (n) = f(inp) for the act function fn (sb_act_fn of model.h: relu,
 * relu6, silu, gelu with erf, gelu_tanh, sigmoid, tanh). out may alias inp. */
void sb_act_forward(float *out, const float *inp, size_t n, int fn);
/* dinp (n) += dout * f'(inp); relu and relu6 take 0 at their kinks. */
void sb_act_backward(float *dinp, const float *dout, const float *inp, size_t n, int fn);
/* out (dims) = a (dims) * b, where b holds only the dims of the bit mask
 * bdims (in order, row-major) and broadcasts over the others; bdims with
 * every bit of the nd dims set is a plain elementwise product. */
void sb_mul_forward(float *out, const float *a, const float *b, int nd, const int *dims,
                    unsigned bdims);
/* da (dims) += dout * b; db (bdims) += sum over the dims b lacks of
 * dout * a. NULL da or db: not wanted. */
void sb_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                     int nd, const int *dims, unsigned bdims);
/* out (dims) = inp broadcast, inp holding the dims of the mask xdims (in
 * order, row-major). */
void sb_expand_forward(float *out, const float *inp, int nd, const int *dims, unsigned xdims);
/* dinp (xdims) += sum over the dims inp lacks of dout (dims). */
void sb_expand_backward(float *dinp, const float *dout, int nd, const int *dims, unsigned xdims);

/* ---- softcap: Gemma 2's logit soft-capping (k_softcap.c) ---------------- */

/* out (n) = cap * tanh(inp / cap), cap > 0. out may alias inp. */
void sb_softcap_forward(float *out, const float *inp, size_t n, float cap);
/* dinp (n) += dout * (1 - tanh^2(inp / cap)). */
void sb_softcap_backward(float *dinp, const float *dout, const float *inp, size_t n, float cap);

/* ---- box copies (concat, split, stack, unstack, transpose, relayout) ---- */

/* The box [dst_lo, dst_lo+size) of dst (dst_dims) = (accumulate: +=) the box
 * [src_lo, src_lo+size) of src (src_dims); all arrays nd long. */
void sb_strided_box_copy(float *dst, const int *dst_dims, const int *dst_lo,
                 const float *src, const int *src_dims, const int *src_lo,
                 const int *size, int nd, int accumulate);
/* dst (size) = the box [lo, lo+size) of src (src_dims), packed. */
void sb_box_pack(float *dst, const float *src, int nd, const int *src_dims,
                 const int *lo, const int *size);
/* The box [lo, lo+size) of dst (dst_dims) = src (size), packed. */
void sb_box_unpack(float *dst, int nd, const int *dst_dims, const int *lo,
                   const int *size, const float *src);
/* The box [lo, lo+size) of dst (dst_dims) += src (size). */
void sb_box_unpack_add(float *dst, int nd, const int *dst_dims,
                       const int *lo, const int *size, const float *src);
/* out = inp (dims) with axes permuted: out axis i is inp axis perm[i], so
 * out has dims dims[perm[0]], ..., dims[perm[nd-1]]; accumulate: +=.
 * Its backward is the inverse permutation with accumulate = 1. */
void sb_permute(float *out, const float *inp, int nd, const int *dims,
                const int *perm, int accumulate);

/* ---- optimizer ---------------------------------------------------------- */

/* w (n) -= lr * g (n), then g = 0 (ready for the next step's gradient
 * accumulation): one pass over both. */
void sb_sgd_update(float *w, float *g, size_t n, float lr);

/* Adam (Kingma & Ba 2015) step t >= 1, with bias correction:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * then g = 0. All n long. */
void sb_adam_update(float *w, float *g, float *m, float *v, size_t n, float lr, float beta1,
                    float beta2, float eps, int t);

#ifdef __cplusplus
}
#endif
#endif
