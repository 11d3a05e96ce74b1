/* runtime/kernels/softcap_math.h: softcap y = cap·tanh(x/cap) and its
 * derivative 1 - tanh²(x/cap), one scalar at a time, shared by the CPU
 * kernels (k_softcap.c) and the CUDA kernels (cuda/k_softcap.cu) so both
 * compute one formula. Internal. */
#ifndef SB_RUNTIME_KERNELS_SOFTCAP_MATH_H
#define SB_RUNTIME_KERNELS_SOFTCAP_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define SB_SC_HD __host__ __device__
#else
#define SB_SC_HD
#endif

static SB_SC_HD inline float sb_softcap_value(float x, float cap)
{
    return cap * tanhf(x / cap);
}

static SB_SC_HD inline float sb_softcap_grad(float x, float cap)
{
    float t = tanhf(x / cap);
    return 1.0f - t * t;
}

#endif
