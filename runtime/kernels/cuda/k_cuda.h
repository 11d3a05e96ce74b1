/* k_cuda.h: the cuda kernels (kernels/cuda/k_*.cu) with the semantics of
 * kernels.h, for the cuda backend (cuda/backend_cuda.cu), and the context
 * the backend hands them: its stream and its scratch memory. The kernels
 * call nothing in the backend. Not a public header. */
#ifndef SB_RUNTIME_KERNELS_CUDA_K_CUDA_H
#define SB_RUNTIME_KERNELS_CUDA_K_CUDA_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "../../cuda/cuda_host.h"

#define SBC_CUDA(call)                                                                  \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess)                                                          \
            sbc_die(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_));       \
    } while (0)

/* after a kernel launch */
#define SBC_LAUNCHED() SBC_CUDA(cudaGetLastError())

/* ---- context (k_context.cu): set by the backend once it has a stream ---- */

/* The stream every kernel runs on, and scratch memory ordered on it (a
 * failure to get scratch ends the job, as the backend's scratch does). */
void sbk_context_set(cudaStream_t stream, void *(*scratch)(size_t bytes, const char *what),
                     void (*scratch_free)(void *p));
cudaStream_t sbk_stream(void);
void *sbk_scratch(size_t bytes, const char *what);
void sbk_scratch_free(void *p);

/* ---- the kernels ---- */

void sbk_fill(float *p, size_t n, float v);
void sbk_scale_matrix(float *C, int M, int N, int ldc, ptrdiff_t stride_c, int batch, float beta);
void sbk_to_bf16(void *dst, const float *src, size_t n);
void sbk_relu_mask(float *dst, const float *dout, const float *out, size_t n);
void sbk_bias_relu(float *out, const float *bias, int B, int N, int HW, int relu);
void sbk_bias_grad(float *dbias, const float *dy, int B, int N, int HW);
void sbk_stage_window(float *dst, const float *inp, int BC, int H_in, int W_in, int xh, int xw,
                      int oh, int ow);
void sbk_unstage_add(float *dinp, const float *dst, int BC, int H_in, int W_in, int xh, int xw,
                     int oh, int ow);

void sbk_maxpool2d_forward(float *out, const float *inp, int B, int C, int H_in, int W_in, int R,
                           int S, int sh, int sw, int pt, int pl, int H_out, int W_out);
void sbk_maxpool2d_backward(float *dinp, const float *dout, const float *inp, int B, int C,
                            int H_in, int W_in, int R, int S, int sh, int sw, int pt, int pl,
                            int H_out, int W_out);
void sbk_avgpool2d_forward(float *out, const float *inp, int B, int C, int H_in, int W_in, int R,
                           int S, int sh, int sw, int pt, int pl, int H_out, int W_out,
                           int count_pad);
void sbk_avgpool2d_backward(float *dinp, const float *dout, int B, int C, int H_in, int W_in,
                            int R, int S, int sh, int sw, int pt, int pl, int H_out, int W_out,
                            int count_pad);
void sbk_embedding_forward(float *out, const int32_t *idx, const float *table, int N, int D,
                           int v0, int v1);
void sbk_embedding_backward(float *dtable, const float *dout, const int32_t *idx, int N, int D,
                            int v0, int v1);
void sbk_lstm_pointwise_forward(float *h, float *c, float *gates, const float *preact,
                                const float *c_prev, int B, int H);
void sbk_lstm_pointwise_backward(float *dpreact, float *dc_prev, const float *dh,
                                 const float *dc, const float *gates, const float *c,
                                 const float *c_prev, int B, int H);
void sbk_norm_finish_stats(float *mean, float *rstd, const float *sum, const float *sumsq, int n,
                           long count, float eps);
void sbk_norm_mean(float *mean, const float *sum, int n, long count);
void sbk_norm_rstd(float *rstd, const float *sq, int n, long count, float eps);
void sbk_layernorm_centered(float *sq, const float *inp, const float *mean, int M, int D);
void sbk_batchnorm_centered(float *sq, const float *inp, const float *mean, int B, int C, int HW);
void sbk_layernorm_stats(float *sum, float *sumsq, const float *inp, int M, int D);
void sbk_layernorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
                         const float *gamma, const float *beta, int M, int D);
void sbk_layernorm_backward_stats(float *s1, float *s2, const float *dout, const float *inp,
                                  const float *mean, const float *rstd, const float *gamma, int M,
                                  int D);
void sbk_layernorm_backward_apply(float *dinp, float *dgamma, float *dbeta, const float *dout,
                                  const float *inp, const float *mean, const float *rstd,
                                  const float *gamma, const float *s1, const float *s2, int M,
                                  int D, int D_total);
void sbk_rmsnorm_stats(float *sumsq, const float *inp, int M, int D);
void sbk_rmsnorm_apply(float *out, const float *inp, const float *rstd, const float *gamma, int M,
                       int D);
void sbk_rmsnorm_backward_stats(float *s, const float *dout, const float *inp, const float *gamma,
                                int M, int D);
void sbk_rmsnorm_backward_apply(float *dinp, float *dgamma, const float *dout, const float *inp,
                                const float *rstd, const float *gamma, const float *s, int M,
                                int D, int D_total);
void sbk_batchnorm_stats(float *sum, float *sumsq, const float *inp, int B, int C, int HW);
void sbk_batchnorm_apply(float *out, const float *inp, const float *mean, const float *rstd,
                         const float *gamma, const float *beta, int B, int C, int HW, int relu);
void sbk_batchnorm_backward_stats(float *sum_dy, float *sum_dy_xhat, const float *dout,
                                  const float *out, const float *inp, const float *mean,
                                  const float *rstd, int B, int C, int HW);
void sbk_batchnorm_backward_apply(float *dinp, const float *dout, const float *out,
                                  const float *inp, const float *mean, const float *rstd,
                                  const float *gamma, const float *sum_dy,
                                  const float *sum_dy_xhat, int B, int C, int HW, long count);
void sbk_softmax_partial_max(float *mx, const float *inp, int outer, int A, int inner);
void sbk_softmax_partial_sumexp(float *se, const float *inp, const float *mx, int outer, int A,
                                int inner);
void sbk_softmax_apply(float *out, const float *inp, const float *mx, const float *se, int outer,
                       int A, int inner);
void sbk_softmax_backward_dot(float *dot, const float *dout, const float *out, int outer, int A,
                              int inner);
void sbk_softmax_backward_apply(float *dinp, const float *dout, const float *out,
                                const float *dot, int outer, int A, int inner);
void sbk_causal_mask(float *out, const float *inp, int64_t n, int64_t key_stride, int key_ext,
                     int64_t key_lo, int64_t query_stride, int query_ext, int64_t query_lo, int64_t window);
void sbk_rope_forward(float *out, const float *inp, int64_t n, int D, int64_t d_stride, int S,
                      int64_t s_stride, int64_t pos0, double theta);
void sbk_rope_backward(float *dinp, const float *dout, int64_t n, int D, int64_t d_stride, int S,
                       int64_t s_stride, int64_t pos0, double theta);
void sbk_xent_partial_picked(float *picked, const float *logits, const int32_t *labels, int M,
                             int V, int v0);
void sbk_xent_loss(float *loss, const float *mx, const float *se, const float *picked,
                   const int32_t *labels, int M);
void sbk_softmax_xent_backward(float *dlogits, const float *dloss, const float *logits,
                               const float *mx, const float *se, const int32_t *labels, int M,
                               int V, int v0);
void sbk_moe_gate_forward(float *combine, float *dispatch, float *aux, float *work,
                          const float *logits, int G, int S, int E, int C, int k);
void sbk_moe_gate_backward(float *dlogits, float *work, const float *dcombine,
                           const float *logits, float aux_weight, int G, int S, int E, int C,
                           int k);
void sbk_add_forward(float *out, const float *const *inps, int k, size_t n, int relu);
void sbk_add_backward(float *const *dinps, const float *dout, const float *out, int k, size_t n);
void sbk_act_forward(float *out, const float *inp, size_t n, int fn);
void sbk_act_backward(float *dinp, const float *dout, const float *inp, size_t n, int fn);
void sbk_softcap_forward(float *out, const float *inp, size_t n, float cap);
void sbk_softcap_backward(float *dinp, const float *dout, const float *inp, size_t n, float cap);
void sbk_mul_forward(float *out, const float *a, const float *b, int nd, const int *dims,
                     unsigned bdims);
void sbk_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                      int nd, const int *dims, unsigned bdims);
void sbk_expand_forward(float *out, const float *inp, int nd, const int *dims, unsigned xdims);
void sbk_expand_backward(float *dinp, const float *dout, int nd, const int *dims, unsigned xdims);
void sbk_reduce_mean_forward(float *out, const float *inp, int nd, const int *dims,
                             unsigned axes, long count);
void sbk_reduce_mean_backward(float *dinp, const float *dout, int nd, const int *dims,
                              unsigned axes, long count);
void sbk_box_copy(float *dst, const int *dst_dims, const int *dst_lo, const float *src,
                  const int *src_dims, const int *src_lo, const int *size, int nd,
                  int accumulate);
void sbk_permute(float *out, const float *inp, int nd, const int *dims, const int *perm,
                 int accumulate);
void sbk_sgd_update(float *w, float *g, size_t n, float lr);
void sbk_adam_update(float *w, float *g, float *m, float *v, size_t n, float lr, float beta1,
                     float beta2, float eps, int t);

#endif
