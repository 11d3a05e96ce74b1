/* backend_cpu.c: the CPU backend: host memory, the kernels of kernels.h
 * (OpenBLAS GEMMs, plain C elsewhere) and MPI collectives. */
#include <stdlib.h>
#include <string.h>

#include "shardbench/backend.h"
#include "shardbench/kernels.h"

#include "../kernels/par.h"

static void *cpu_alloc(size_t bytes)
{
    void *p = NULL;
    size_t n = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, n ? n : 64))
        return NULL;
    return p;
}

static void cpu_release(void *p) { free(p); }
static void cpu_zero(float *p, size_t n) { memset(p, 0, n * sizeof *p); }
static void cpu_copy(float *dst, const float *src, size_t n) { memcpy(dst, src, n * sizeof *dst); }

/* ---- convolutions: oneDNN where it takes the geometry, else im2col ---- */

/* dout masked by the relu output (out > 0), in a buffer kept between calls */
static const float *relu_masked(const float *dout, const float *out, size_t n)
{
    static float *buf;
    static size_t cap;
    if (!out)
        return dout;
    if (cap < n) {
        float *p = realloc(buf, n * sizeof *p);
        if (!p)
            return NULL;
        buf = p;
        cap = n;
    }
    SB_PAR(if (n > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++)
        buf[i] = out[i] > 0.0f ? dout[i] : 0.0f;
    return buf;
}

static void cpu_conv2d_forward(float *out, const float *inp, const float *w, const float *bias,
                               float *work, int B, int C, int H_in, int W_in, int N, int R, int S,
                               int sh, int sw, int pt, int pl, int H_out, int W_out, int dil_h,
                               int dil_w, int groups, int relu)
{
    if (!bias && !sb_dnnl_conv2d_forward(out, inp, w, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl,
                                         H_out, W_out, dil_h, dil_w, groups, relu))
        return;
    sb_conv2d_forward(out, inp, w, bias, work, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl, H_out,
                      W_out, dil_h, dil_w, groups, relu);
}

static void cpu_conv2d_backward_data(float *dinp, float *work, const float *dout, const float *out,
                                     const float *w, int B, int C, int H_in, int W_in, int N, int R,
                                     int S, int sh, int sw, int pt, int pl, int H_out, int W_out,
                                     int dil_h, int dil_w, int groups)
{
    const float *dy = relu_masked(dout, out, (size_t)B * N * H_out * W_out);
    if (dy && !sb_dnnl_conv2d_backward_data(dinp, dy, w, B, C, H_in, W_in, N, R, S, sh, sw, pt,
                                            pl, H_out, W_out, dil_h, dil_w, groups))
        return;
    sb_conv2d_backward_data(dinp, work, dout, out, w, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl,
                            H_out, W_out, dil_h, dil_w, groups);
}

static void cpu_conv2d_backward_filter(float *dw, float *dbias, float *work, const float *dout,
                                       const float *out, const float *inp, int B, int C, int H_in,
                                       int W_in, int N, int R, int S, int sh, int sw, int pt,
                                       int pl, int H_out, int W_out, int dil_h, int dil_w,
                                       int groups)
{
    if (!dbias && dw) {
        const float *dy = relu_masked(dout, out, (size_t)B * N * H_out * W_out);
        if (dy && !sb_dnnl_conv2d_backward_filter(dw, dy, inp, B, C, H_in, W_in, N, R, S, sh, sw,
                                                  pt, pl, H_out, W_out, dil_h, dil_w, groups))
            return;
    }
    sb_conv2d_backward_filter(dw, dbias, work, dout, out, inp, B, C, H_in, W_in, N, R, S, sh, sw,
                              pt, pl, H_out, W_out, dil_h, dil_w, groups);
}

static int cpu_allreduce(float *p, size_t n, MPI_Op op, MPI_Comm comm)
{
    while (n > 0) {
        int chunk = n > (size_t)(1 << 30) ? 1 << 30 : (int)n;
        int rc = MPI_Allreduce(MPI_IN_PLACE, p, chunk, MPI_FLOAT, op, comm);
        if (rc != MPI_SUCCESS)
            return rc;
        p += chunk;
        n -= (size_t)chunk;
    }
    return 0;
}

/* ZeRO's collectives (runtime.h): the slices are contiguous in rank order,
 * as MPI_Reduce_scatter and MPI_Allgatherv lay out their blocks. */
static int cpu_reduce_scatter(const float *send, float *recv, const int *count, const int *displ,
                              MPI_Comm comm)
{
    (void)displ;
    static float dummy; /* for NULL buffers, whose counts are 0 */
    return MPI_Reduce_scatter(send ? send : &dummy, recv ? recv : &dummy, count, MPI_FLOAT,
                              MPI_SUM, comm);
}

static int cpu_allgather(float *p, const int *count, const int *displ, MPI_Comm comm)
{
    static float dummy;
    return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p ? p : &dummy, count, displ,
                          MPI_FLOAT, comm);
}

/* ---- the tables: one per kernel family, then the backend ---- */
static const sb_gemm_kernels cpu_gemm = {
    .gemm_batched = sb_gemm_batched,
};

static const sb_conv_kernels cpu_conv = {
    .conv2d_work_floats = sb_conv2d_work_floats,
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward_data = cpu_conv2d_backward_data,
    .conv2d_backward_filter = cpu_conv2d_backward_filter,
    .maxpool2d_forward = sb_maxpool2d_forward,
    .maxpool2d_backward = sb_maxpool2d_backward,
    .avgpool2d_forward = sb_avgpool2d_forward,
    .avgpool2d_backward = sb_avgpool2d_backward,
};

static const sb_embed_kernels cpu_embed = {
    .embedding_forward = sb_embedding_forward,
    .embedding_backward = sb_embedding_backward,
};

static const sb_lstm_kernels cpu_lstm = {
    .lstm_pointwise_forward = sb_lstm_pointwise_forward,
    .lstm_pointwise_backward = sb_lstm_pointwise_backward,
};

static const sb_norm_kernels cpu_norm = {
    .norm_finish_stats = sb_norm_finish_stats,
    .norm_mean = sb_norm_mean,
    .norm_rstd = sb_norm_rstd,
    .layernorm_centered = sb_layernorm_centered,
    .batchnorm_centered = sb_batchnorm_centered,
    .layernorm_stats = sb_layernorm_stats,
    .layernorm_apply = sb_layernorm_apply,
    .layernorm_backward_stats = sb_layernorm_backward_stats,
    .layernorm_backward_apply = sb_layernorm_backward_apply,
    .rmsnorm_stats = sb_rmsnorm_stats,
    .rmsnorm_apply = sb_rmsnorm_apply,
    .rmsnorm_backward_stats = sb_rmsnorm_backward_stats,
    .rmsnorm_backward_apply = sb_rmsnorm_backward_apply,
    .batchnorm_stats = sb_batchnorm_stats,
    .batchnorm_apply = sb_batchnorm_apply,
    .batchnorm_backward_stats = sb_batchnorm_backward_stats,
    .batchnorm_backward_apply = sb_batchnorm_backward_apply,
};

static const sb_softmax_kernels cpu_softmax = {
    .softmax_partial_max = sb_softmax_partial_max,
    .softmax_partial_sumexp = sb_softmax_partial_sumexp,
    .softmax_apply = sb_softmax_apply,
    .softmax_backward_dot = sb_softmax_backward_dot,
    .softmax_backward_apply = sb_softmax_backward_apply,
    .causal_mask = sb_causal_mask,
    .xent_partial_picked = sb_xent_partial_picked,
    .xent_loss = sb_xent_loss,
    .softmax_xent_backward = sb_softmax_xent_backward,
};

static const sb_rope_kernels cpu_rope = {
    .rope_forward = sb_rope_forward,
    .rope_backward = sb_rope_backward,
};

static const sb_pointwise_kernels cpu_pointwise = {
    .act_forward = sb_act_forward,
    .act_backward = sb_act_backward,
    .mul_forward = sb_mul_forward,
    .mul_backward = sb_mul_backward,
    .expand_forward = sb_expand_forward,
    .expand_backward = sb_expand_backward,
    .softcap_forward = sb_softcap_forward,
    .softcap_backward = sb_softcap_backward,
};

static const sb_sum_kernels cpu_sum = {
    .add_forward = sb_add_forward,
    .add_backward = sb_add_backward,
    .reduce_mean_forward = sb_reduce_mean_forward,
    .reduce_mean_backward = sb_reduce_mean_backward,
};

static const sb_moe_kernels cpu_moe = {
    .moe_gate_work_floats = sb_moe_gate_work_floats,
    .moe_gate_forward = sb_moe_gate_forward,
    .moe_gate_backward = sb_moe_gate_backward,
};

static const sb_move_kernels cpu_move = {
    .box_copy = sb_strided_box_copy,
    .permute = sb_permute,
};

static const sb_optim_kernels cpu_optim = {
    .sgd_update = sb_sgd_update,
    .adam_update = sb_adam_update,
};

const sb_backend sb_backend_cpu = {
    .name = "cpu",
    .host_memory = 1,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .to_host = cpu_copy,
    .from_host = cpu_copy,
    .sync = NULL,
    .allreduce = cpu_allreduce,
    .reduce_scatter = cpu_reduce_scatter,
    .allgather = cpu_allgather,
    .gemm = &cpu_gemm,
    .conv = &cpu_conv,
    .embed = &cpu_embed,
    .lstm = &cpu_lstm,
    .norm = &cpu_norm,
    .softmax = &cpu_softmax,
    .rope = &cpu_rope,
    .pointwise = &cpu_pointwise,
    .sum = &cpu_sum,
    .moe = &cpu_moe,
    .move = &cpu_move,
    .optim = &cpu_optim,
};

/* "cpu-devmem": the CPU kernels behind the interface of a backend with its
 * own memory (host_memory = 0, an alltoallv): the executor then stages
 * inputs and weights through to_host/from_host and runs relayouts with
 * sb_relayout_run_mem, as it does for the cuda backend. It exists to test
 * those paths on machines without a GPU (tests/tests.cmake); it is slower
 * than "cpu" and gives the same numbers. */
static int cpu_alltoallv(const float *sbuf, const int *scount, const int *sdispl, float *rbuf,
                         const int *rcount, const int *rdispl, MPI_Comm comm)
{
    static float dummy; /* for NULL buffers, whose counts are all 0 */
    return MPI_Alltoallv(sbuf ? sbuf : &dummy, scount, sdispl, MPI_FLOAT, rbuf ? rbuf : &dummy,
                         rcount, rdispl, MPI_FLOAT, comm);
}

/* cpu-devmem's step timing takes the executor's path for a backend that
 * records marks on its own queue (sb_backend.mark, read once per step),
 * the marks being host clock readings kept here: the same numbers as
 * "cpu". A mark that finds no memory fails the step's read (its times
 * are dropped). */
static struct {
    double *t;
    int cap, lost;
} devmem_marks;

static void devmem_mark(int k)
{
    if (k >= devmem_marks.cap) {
        int cap = devmem_marks.cap ? devmem_marks.cap : 256;
        while (cap <= k)
            cap *= 2;
        double *t = realloc(devmem_marks.t, (size_t)cap * sizeof *t);
        if (!t) {
            devmem_marks.lost = 1;
            return;
        }
        devmem_marks.t = t;
        devmem_marks.cap = cap;
    }
    devmem_marks.t[k] = MPI_Wtime();
}

static int devmem_marks_read(int n, double *t)
{
    int lost = devmem_marks.lost || n > devmem_marks.cap;
    devmem_marks.lost = 0;
    if (lost)
        return -1;
    memcpy(t, devmem_marks.t, (size_t)n * sizeof *t);
    return 0;
}

const sb_backend *sb_backend_cpu_devmem(void)
{
    static sb_backend t;
    if (!t.name) { /* the CPU table, posing as a backend with its own memory */
        t = sb_backend_cpu;
        t.name = "cpu-devmem";
        t.host_memory = 0;
        t.alltoallv = cpu_alltoallv;
        t.mark = devmem_mark;
        t.marks_read = devmem_marks_read;
    }
    return &t;
}
