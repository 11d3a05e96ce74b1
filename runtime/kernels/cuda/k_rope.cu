/* k_rope.cu: the cuda kernels of the k_rope.c family: Llama's rotary
 * position embedding ("rotate half") and its inverse rotation for the
 * backward. Angles in double, like the CPU kernels. */
#include <math.h>

#include "launch.cuh"
#include "../rope_math.h"

/* one thread per element e of the first half of the head dim and its
 * partner e + D/2 * d_stride; sign +1 forward (overwrite), -1 backward
 * (accumulate) */
__global__ static void rope_k(float *out, const float *inp, int64_t n, int D, int64_t d_stride,
                              int S, int64_t s_stride, int64_t pos0, double theta, int sign)
{
    GRID_STRIDE(e, n)
    {
        sb_rope_pair(out, inp, e, D, d_stride, S, s_stride, pos0, theta, sign);
    }
}

void sbk_rope_forward(float *out, const float *inp, int64_t n, int D, int64_t d_stride, int S,
                      int64_t s_stride, int64_t pos0, double theta)
{
    LAUNCH(rope_k, n, out, inp, n, D, d_stride, S, s_stride, pos0, theta, 1);
}

void sbk_rope_backward(float *dinp, const float *dout, int64_t n, int D, int64_t d_stride, int S,
                       int64_t s_stride, int64_t pos0, double theta)
{
    LAUNCH(rope_k, n, dinp, dout, n, D, d_stride, S, s_stride, pos0, theta, -1);
}
