/* runtime/kernels/k_rope.c: the rotary position embedding of Llama
 * ("rotate half", kernels.h), forward and its inverse rotation for the
 * backward. Angles in double, like the CUDA kernels (cuda/k_rope.cu). */
#include "shardbench/kernels.h"

#include <math.h>
#include <stdlib.h>

#include "par.h"
#include "rope_math.h"

/* One pair (e, e + D/2 * d_stride) per element e of the first half of the
 * head dim: sign +1 turns by +angle (forward), -1 by -angle (backward,
 * accumulating). The cosines and sines of the S x D/2 angles are computed
 * once per call (the transcendental functions per element cost more than
 * the rest of the kernel), then looked up. */
static void rope(float *out, const float *inp, int64_t n, int D, int64_t d_stride, int S,
                 int64_t s_stride, int64_t pos0, double theta, int sign)
{
    int half = D / 2;
    float *cs = malloc((size_t)S * (size_t)half * 2 * sizeof *cs);
    if (!cs) { /* per element instead: the same numbers, only slower */
        SB_PAR(if ((size_t)n > SB_PAR_MIN))
        for (int64_t e = 0; e < n; e++)
            sb_rope_pair(out, inp, e, D, d_stride, S, s_stride, pos0, theta, sign);
        return;
    }
    for (int s = 0; s < S; s++)
        for (int i = 0; i < half; i++) {
            double ang = sb_rope_angle(pos0 + s, i, D, theta);
            cs[2 * ((size_t)s * half + i)] = (float)cos(ang);
            cs[2 * ((size_t)s * half + i) + 1] = (float)(sign * sin(ang));
        }
    SB_PAR(if ((size_t)n > SB_PAR_MIN))
    for (int64_t e = 0; e < n; e++) {
        int i = (int)((e / d_stride) % D);
        if (i >= half)
            continue;
        const float *t = cs + 2 * ((size_t)((e / s_stride) % S) * half + i);
        sb_rope_rotate(out, inp, e, e + (int64_t)half * d_stride, t[0], t[1], sign < 0);
    }
    free(cs);
}

void sb_rope_forward(float *out, const float *inp, int64_t n, int D, int64_t d_stride, int S,
                     int64_t s_stride, int64_t pos0, double theta)
{
    rope(out, inp, n, D, d_stride, S, s_stride, pos0, theta, 1);
}

void sb_rope_backward(float *dinp, const float *dout, int64_t n, int D, int64_t d_stride, int S,
                      int64_t s_stride, int64_t pos0, double theta)
{
    rope(dinp, dout, n, D, d_stride, S, s_stride, pos0, theta, -1);
}
