/* runtime/kernels/k_rope.c: the rotary position embedding of Llama
 * ("rotate half", kernels.h), forward and its inverse rotation for the
 * backward. Angles in double, like the CUDA kernels (cuda/k_rope.cu). */
#include "shardbench/kernels.h"

#include <math.h>

#include "par.h"
#include "rope_math.h"

/* One pair (e, e + D/2 * d_stride) per element e of the first half of the
 * head dim: sign +1 turns by +angle (forward), -1 by -angle (backward,
 * accumulating). */
static void rope(float *out, const float *inp, int64_t n, int D, int64_t d_stride, int S,
                 int64_t s_stride, int64_t pos0, double theta, int sign)
{
    SB_PAR(if ((size_t)n > SB_PAR_MIN))
    for (int64_t e = 0; e < n; e++)
        sb_rope_pair(out, inp, e, D, d_stride, S, s_stride, pos0, theta, sign);
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
