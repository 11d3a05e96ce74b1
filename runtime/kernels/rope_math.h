/* runtime/kernels/rope_math.h: one rotary pair, shared by the CPU kernel
 * (k_rope.c) and the CUDA kernel (cuda/k_rope.cu) so both compute one
 * formula. Internal. */
#ifndef SB_RUNTIME_KERNELS_ROPE_MATH_H
#define SB_RUNTIME_KERNELS_ROPE_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SB_ROPE_HD __host__ __device__
#else
#define SB_ROPE_HD
#endif

/* Element e of a dense box, head dim of size D at stride d_stride, seq dim
 * of size S at stride s_stride, global positions from pos0: if e is in the
 * first half of the head dim (i < D/2), turns the pair (e, e + D/2 ·
 * d_stride) by sign · pos · theta^(-2i/D) (angles in double) into out,
 * overwriting (sign +1, forward) or adding (sign -1, backward). */
static SB_ROPE_HD inline void sb_rope_pair(float *out, const float *inp, int64_t e, int D,
                                           int64_t d_stride, int S, int64_t s_stride,
                                           int64_t pos0, double theta, int sign)
{
    int half = D / 2;
    int i = (int)((e / d_stride) % D);
    if (i >= half)
        return;
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

#endif
