/* k_tensor.cu: the cuda kernels of the k_tensor.c family: fill, scaling,
 * bf16 conversion and relu mask (helpers of the backend's library calls),
 * elementwise add/relu, SGD, reduce-mean, box copy and permute (their
 * geometry planned on the host by cuda/cuda_host.c). */
#include <cuda_bf16.h>

#include <math.h>

#include "launch.cuh"

/* ---- small helpers ---- */

__global__ static void fill_k(float *p, int64_t n, float v)
{
    GRID_STRIDE(i, n) p[i] = v;
}

void sbk_fill(float *p, size_t n, float v) { LAUNCH(fill_k, n, p, (int64_t)n, v); }

__global__ static void scale_matrix_k(float *C, int M, int N, int ldc, ptrdiff_t sc, int batch,
                                      float beta)
{
    int64_t total = (int64_t)batch * M * N;
    GRID_STRIDE(i, total)
    {
        int64_t b = i / ((int64_t)M * N), r = (i / N) % M, c = i % N;
        float *p = C + b * sc + r * ldc + c;
        *p = beta == 0.0f ? 0.0f : beta * *p;
    }
}

void sbk_scale_matrix(float *C, int M, int N, int ldc, ptrdiff_t stride_c, int batch, float beta)
{
    LAUNCH(scale_matrix_k, (int64_t)batch * M * N, C, M, N, ldc, stride_c, batch, beta);
}

__global__ static void to_bf16_k(__nv_bfloat16 *d, const float *s, int64_t n)
{
    GRID_STRIDE(i, n) d[i] = __float2bfloat16(s[i]);
}

void sbk_to_bf16(void *dst, const float *src, size_t n)
{
    LAUNCH(to_bf16_k, n, (__nv_bfloat16 *)dst, src, (int64_t)n);
}

__global__ static void relu_mask_k(float *d, const float *g, const float *o, int64_t n)
{
    GRID_STRIDE(i, n) d[i] = o[i] > 0.0f ? g[i] : 0.0f;
}

void sbk_relu_mask(float *dst, const float *dout, const float *out, size_t n)
{
    LAUNCH(relu_mask_k, n, dst, dout, out, (int64_t)n);
}

/* ---- elementwise ---- */

#define PTRS 16
typedef struct {
    const float *p[PTRS];
} ptrs_in;
typedef struct {
    float *p[PTRS];
} ptrs_out;

__global__ static void add_k(float *out, ptrs_in in, int k, int relu, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float s = 0.0f;
        for (int j = 0; j < k; j++)
            s += in.p[j][i];
        out[i] = (relu && s < 0.0f) ? 0.0f : s;
    }
}

void sbk_add_forward(float *out, const float *const *inps, int k, size_t n, int relu)
{
    if (n == 0)
        return;
    ptrs_in in;
    if (k <= PTRS) {
        for (int j = 0; j < k; j++)
            in.p[j] = inps[j];
        LAUNCH(add_k, n, out, in, k < 0 ? 0 : k, relu, (int64_t)n);
        return;
    }
    /* more inputs than one launch takes: sum into a scratch buffer, in the
     * reference's order (left to right), the last launch writes out */
    float *acc = (float *)sbk_scratch(n * sizeof(float), "add of many inputs");
    int done = 0;
    while (done < k) {
        int m = 0;
        if (done > 0)
            in.p[m++] = acc;
        while (m < PTRS && done < k)
            in.p[m++] = inps[done++];
        int last = done == k;
        LAUNCH(add_k, n, last ? out : acc, in, m, last ? relu : 0, (int64_t)n);
    }
    sbk_scratch_free(acc);
}

__global__ static void add_bwd_k(ptrs_out d, int k, const float *dout, const float *out, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        if (out && !(out[i] > 0.0f))
            continue;
        float g = dout[i];
        for (int j = 0; j < k; j++)
            d.p[j][i] += g;
    }
}

void sbk_add_backward(float *const *dinps, const float *dout, const float *out, int k, size_t n)
{
    ptrs_out d;
    int m = 0;
    for (int j = 0; j < k; j++) {
        if (!dinps[j])
            continue;
        d.p[m++] = dinps[j];
        if (m == PTRS) {
            LAUNCH(add_bwd_k, n, d, m, dout, out, (int64_t)n);
            m = 0;
        }
    }
    if (m)
        LAUNCH(add_bwd_k, n, d, m, dout, out, (int64_t)n);
}

__global__ static void sgd_k(float *w, float *g, int64_t n, float lr)
{
    GRID_STRIDE(i, n)
    {
        w[i] -= lr * g[i];
        g[i] = 0.0f;
    }
}

void sbk_sgd_update(float *w, float *g, size_t n, float lr)
{
    LAUNCH(sgd_k, n, w, g, (int64_t)n, lr);
}

/* Adam with bias correction (c1 = 1 - b1^t, c2 = 1 - b2^t from the host, in
 * double as the CPU reference sb_adam_update computes them); zeroes g */
__global__ static void adam_k(float *w, float *g, float *m, float *v, int64_t n, float lr,
                              float b1, float b2, float eps, float c1, float c2)
{
    GRID_STRIDE(i, n)
    {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] -= lr * (mi / c1) / (sqrtf(vi / c2) + eps);
        g[i] = 0.0f;
    }
}

void sbk_adam_update(float *w, float *g, float *m, float *v, size_t n, float lr, float beta1,
                     float beta2, float eps, int t)
{
    float c1 = (float)(1.0 - pow((double)beta1, t)), c2 = (float)(1.0 - pow((double)beta2, t));
    LAUNCH(adam_k, n, w, g, m, v, (int64_t)n, lr, beta1, beta2, eps, c1, c2);
}

/* ---- reduce-mean ---- */

/* input offset of kept index o (row-major over kept dims) */
__device__ static int64_t kept_offset(const sbc_reduce_plan &p, int64_t o)
{
    int64_t off = 0;
    for (int d = p.nk - 1; d >= 0; d--) {
        off += (o % p.kdims[d]) * p.kstride[d];
        o /= p.kdims[d];
    }
    return off;
}

__device__ static int64_t red_offset(const sbc_reduce_plan &p, int64_t r)
{
    int64_t off = 0;
    for (int d = p.nr - 1; d >= 0; d--) {
        off += (r % p.rdims[d]) * p.rstride[d];
        r /= p.rdims[d];
    }
    return off;
}

__global__ static void rmean_fwd_k(float *out, const float *inp, sbc_reduce_plan p)
{
    GRID_STRIDE(o, p.n_out)
    {
        int64_t base = kept_offset(p, o);
        double s = 0.0;
        for (int64_t r = 0; r < p.n_red; r++)
            s += inp[base + red_offset(p, r)];
        out[o] = (float)s * p.scale;
    }
}

void sbk_reduce_mean_forward(float *out, const float *inp, int nd, const int *dims, unsigned axes,
                             long count)
{
    sbc_reduce_plan p;
    sbc_reduce_plan_make(&p, nd, dims, axes, count);
    if (p.n_in <= 0) { /* empty input: the mean of nothing is 0 */
        sbk_fill(out, (size_t)p.n_out, 0.0f);
        return;
    }
    LAUNCH(rmean_fwd_k, p.n_out, out, inp, p);
}

__global__ static void rmean_bwd_k(float *dinp, const float *dout, sbc_reduce_plan p)
{
    GRID_STRIDE(i, p.n_out * p.n_red)
    {
        int64_t o = i / p.n_red, r = i % p.n_red;
        dinp[kept_offset(p, o) + red_offset(p, r)] += dout[o] * p.scale;
    }
}

void sbk_reduce_mean_backward(float *dinp, const float *dout, int nd, const int *dims,
                              unsigned axes, long count)
{
    sbc_reduce_plan p;
    sbc_reduce_plan_make(&p, nd, dims, axes, count);
    if (p.n_in <= 0)
        return;
    LAUNCH(rmean_bwd_k, p.n_out * p.n_red, dinp, dout, p);
}

/* ---- box copy, permute ---- */

__global__ static void box_copy_k(float *dst, const float *src, sbc_box_plan p, int acc)
{
    GRID_STRIDE(i, p.count)
    {
        int64_t r = i, d = p.d0, s = p.s0;
        for (int k = p.nd - 1; k >= 0; k--) {
            int64_t c = r % p.size[k];
            r /= p.size[k];
            d += c * p.ds[k];
            s += c * p.ss[k];
        }
        if (acc)
            dst[d] += src[s];
        else
            dst[d] = src[s];
    }
}

void sbk_box_copy(float *dst, const int *dst_dims, const int *dst_lo, const float *src,
                  const int *src_dims, const int *src_lo, const int *size, int nd,
                  int accumulate)
{
    sbc_box_plan p;
    sbc_box_plan_make(&p, dst_dims, dst_lo, src_dims, src_lo, size, nd);
    if (p.count <= 0)
        return;
    if (p.contiguous && !accumulate) {
        SBC_CUDA(cudaMemcpyAsync(dst + p.d0, src + p.s0, (size_t)p.count * sizeof(float),
                                 cudaMemcpyDeviceToDevice, sbk_stream()));
        return;
    }
    LAUNCH(box_copy_k, p.count, dst, src, p, accumulate);
}

__global__ static void permute_k(float *out, const float *inp, sbc_perm_plan p, int acc)
{
    GRID_STRIDE(i, p.count)
    {
        int64_t r = i, s = 0;
        for (int k = p.nd - 1; k >= 0; k--) {
            s += (r % p.odims[k]) * p.istride[k];
            r /= p.odims[k];
        }
        if (acc)
            out[i] += inp[s];
        else
            out[i] = inp[s];
    }
}

void sbk_permute(float *out, const float *inp, int nd, const int *dims, const int *perm,
                 int accumulate)
{
    sbc_perm_plan p;
    sbc_perm_plan_make(&p, nd, dims, perm);
    if (p.count <= 0)
        return;
    if (p.identity && !accumulate) {
        SBC_CUDA(cudaMemcpyAsync(out, inp, (size_t)p.count * sizeof(float),
                                 cudaMemcpyDeviceToDevice, sbk_stream()));
        return;
    }
    LAUNCH(permute_k, p.count, out, inp, p, accumulate);
}
