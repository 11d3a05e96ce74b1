/* k_pointwise.cu: the cuda kernels of the k_pointwise.c family (act, mul,
 * expand). The act formulas are act_math.h's, shared with the CPU kernels.
 * A broadcast operand walks the reduce plan of cuda/cuda_host.c (its kept
 * dims are the operand's, its reduced dims the ones it lacks): element
 * (o, r) of the full array is at kept_offset(o) + red_offset(r) and reads
 * the operand at o. Gradient sums of a broadcast operand run one thread per
 * operand element, over r in order, as the CPU kernels sum. */
#include "../act_math.h"
#include "launch.cuh"

__global__ static void act_fwd_k(float *out, const float *inp, int64_t n, int fn)
{
    GRID_STRIDE(i, n) out[i] = sb_act_value(fn, inp[i]);
}

void sbk_act_forward(float *out, const float *inp, size_t n, int fn)
{
    LAUNCH(act_fwd_k, n, out, inp, (int64_t)n, fn);
}

__global__ static void act_bwd_k(float *dinp, const float *dout, const float *inp, int64_t n, int fn)
{
    GRID_STRIDE(i, n) dinp[i] += dout[i] * sb_act_grad(fn, inp[i]);
}

void sbk_act_backward(float *dinp, const float *dout, const float *inp, size_t n, int fn)
{
    LAUNCH(act_bwd_k, n, dinp, dout, inp, (int64_t)n, fn);
}

__device__ static int64_t pw_kept_offset(const sbc_reduce_plan &p, int64_t o)
{
    int64_t off = 0;
    for (int d = p.nk - 1; d >= 0; d--) {
        off += (o % p.kdims[d]) * p.kstride[d];
        o /= p.kdims[d];
    }
    return off;
}

__device__ static int64_t pw_red_offset(const sbc_reduce_plan &p, int64_t r)
{
    int64_t off = 0;
    for (int d = p.nr - 1; d >= 0; d--) {
        off += (r % p.rdims[d]) * p.rstride[d];
        r /= p.rdims[d];
    }
    return off;
}

/* the plan of a broadcast operand holding the dims of mask `has` */
static void bcast_plan(sbc_reduce_plan *p, int nd, const int *dims, unsigned has)
{
    unsigned all = nd >= 32 ? ~0u : ((1u << nd) - 1u);
    sbc_reduce_plan_make(p, nd, dims, all & ~has, 1);
}

__global__ static void mul_fwd_k(float *out, const float *a, const float *b, sbc_reduce_plan p)
{
    GRID_STRIDE(i, p.n_out * p.n_red)
    {
        int64_t o = i / p.n_red, off = pw_kept_offset(p, o) + pw_red_offset(p, i % p.n_red);
        out[off] = a[off] * b[o];
    }
}

void sbk_mul_forward(float *out, const float *a, const float *b, int nd, const int *dims,
                     unsigned bdims)
{
    sbc_reduce_plan p;
    bcast_plan(&p, nd, dims, bdims);
    if (p.n_in > 0)
        LAUNCH(mul_fwd_k, p.n_out * p.n_red, out, a, b, p);
}

__global__ static void mul_bwd_a_k(float *da, const float *dout, const float *b, sbc_reduce_plan p)
{
    GRID_STRIDE(i, p.n_out * p.n_red)
    {
        int64_t o = i / p.n_red, off = pw_kept_offset(p, o) + pw_red_offset(p, i % p.n_red);
        da[off] += dout[off] * b[o];
    }
}

/* db[o] += sum over r of dout * a (a NULL: of dout alone, expand's backward) */
__global__ static void bcast_sum_k(float *db, const float *dout, const float *a, sbc_reduce_plan p)
{
    GRID_STRIDE(o, p.n_out)
    {
        int64_t base = pw_kept_offset(p, o);
        float s = 0.0f;
        for (int64_t r = 0; r < p.n_red; r++) {
            int64_t off = base + pw_red_offset(p, r);
            s += a ? dout[off] * a[off] : dout[off];
        }
        db[o] += s;
    }
}

void sbk_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                      int nd, const int *dims, unsigned bdims)
{
    sbc_reduce_plan p;
    bcast_plan(&p, nd, dims, bdims);
    if (p.n_in <= 0)
        return;
    if (da)
        LAUNCH(mul_bwd_a_k, p.n_out * p.n_red, da, dout, b, p);
    if (db)
        LAUNCH(bcast_sum_k, p.n_out, db, dout, a, p);
}

__global__ static void expand_fwd_k(float *out, const float *inp, sbc_reduce_plan p)
{
    GRID_STRIDE(i, p.n_out * p.n_red)
    {
        int64_t o = i / p.n_red;
        out[pw_kept_offset(p, o) + pw_red_offset(p, i % p.n_red)] = inp[o];
    }
}

void sbk_expand_forward(float *out, const float *inp, int nd, const int *dims, unsigned xdims)
{
    sbc_reduce_plan p;
    bcast_plan(&p, nd, dims, xdims);
    if (p.n_in > 0)
        LAUNCH(expand_fwd_k, p.n_out * p.n_red, out, inp, p);
}

void sbk_expand_backward(float *dinp, const float *dout, int nd, const int *dims, unsigned xdims)
{
    sbc_reduce_plan p;
    bcast_plan(&p, nd, dims, xdims);
    if (p.n_in > 0)
        LAUNCH(bcast_sum_k, p.n_out, dinp, dout, (const float *)NULL, p);
}
