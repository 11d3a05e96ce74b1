/* k_rope.cu: the cuda kernels of the k_rope.c family: Llama's rotary
 * position embedding ("rotate half") and its inverse rotation for the
 * backward. Angles in double, like the CPU kernels. */
#include <math.h>

#include "launch.cuh"

/* one thread per element e of the first half of the head dim and its
 * partner e + D/2 * d_stride; sign +1 forward (overwrite), -1 backward
 * (accumulate) */
__global__ static void rope_k(float *out, const float *inp, int64_t n, int D, int64_t d_stride,
                              int S, int64_t s_stride, int64_t pos0, double theta, int sign)
{
    int half = D / 2;
    GRID_STRIDE(e, n)
    {
        int i = (int)((e / d_stride) % D);
        if (i >= half)
            continue;
        int64_t e2 = e + (int64_t)half * d_stride;
        double pos = (double)(pos0 + (e / s_stride) % S);
        double ang = pos * pow(theta, -2.0 * i / D);
        float c = (float)cos(ang), sn = (float)(sign * sin(ang));
        float a = inp[e], b = inp[e2];
        if (sign > 0) {
            out[e] = a * c - b * sn;
            out[e2] = b * c + a * sn;
        } else {
            out[e] += a * c - b * sn;
            out[e2] += b * c + a * sn;
        }
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
