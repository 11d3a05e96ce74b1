/* runtime/kernels/rope_math.h: the rotary angle and one pair's rotation,
 * shared by the CPU kernel (k_rope.c) and the CUDA kernel (cuda/k_rope.cu)
 * so both compute one formula. Internal. */
#ifndef SB_RUNTIME_KERNELS_ROPE_MATH_H
#define SB_RUNTIME_KERNELS_ROPE_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SB_ROPE_HD __host__ __device__
#else
#define SB_ROPE_HD
#endif

/* The angle of head-dim pair i (< D/2) at global position pos:
 * pos · theta^(-2i/D), in double. */
static SB_ROPE_HD inline double sb_rope_angle(int64_t pos, int i, int D, double theta)
{
    return (double)pos * pow(theta, -2.0 * i / D);
}

/* Turns the pair (inp[e], inp[e2]) by the angle of cosine c and sine s
 * (s already carries the sign: +angle forward, -angle backward) into out,
 * overwriting (acc 0, forward) or adding (acc 1, backward). */
static SB_ROPE_HD inline void sb_rope_rotate(float *out, const float *inp, int64_t e, int64_t e2,
                                             float c, float s, int acc)
{
    float a = inp[e], b = inp[e2];
    if (!acc) {
        out[e] = a * c - b * s;
        out[e2] = b * c + a * s;
    } else {
        out[e] += a * c - b * s;
        out[e2] += b * c + a * s;
    }
}

/* Element e of a dense box, head dim of size D at stride d_stride, seq dim
 * of size S at stride s_stride, global positions from pos0: if e is in the
 * first half of the head dim (i < D/2), turns the pair (e, e + D/2 ·
 * d_stride) by sign · angle into out, overwriting (sign +1, forward) or
 * adding (sign -1, backward). */
static SB_ROPE_HD inline void sb_rope_pair(float *out, const float *inp, int64_t e, int D,
                                           int64_t d_stride, int S, int64_t s_stride,
                                           int64_t pos0, double theta, int sign)
{
    int i = (int)((e / d_stride) % D);
    if (i >= D / 2)
        return;
    double ang = sb_rope_angle(pos0 + (e / s_stride) % S, i, D, theta);
    sb_rope_rotate(out, inp, e, e + (int64_t)(D / 2) * d_stride, (float)cos(ang),
                   (float)(sign * sin(ang)), sign < 0);
}

#endif
