/* runtime/kernels/act_math.h: the act functions (sb_act_fn of
 * shardbench/model.h) and their derivatives, one scalar at a time, shared
 * by the CPU kernels (k_pointwise.c) and the CUDA kernels
 * (cuda/k_pointwise.cu) so both compute one formula. Internal. */
#ifndef SB_RUNTIME_KERNELS_ACT_MATH_H
#define SB_RUNTIME_KERNELS_ACT_MATH_H

#include <math.h>

#include "shardbench/model.h"

#ifdef __CUDACC__
#define SB_HD __host__ __device__
#else
#define SB_HD
#endif

#define SB_INV_SQRT2 0.70710678118654752f
#define SB_INV_SQRT_2PI 0.39894228040143268f
#define SB_SQRT_2_OVER_PI 0.79788456080286536f
#define SB_GELU_TANH_C 0.044715f

static SB_HD inline float sb_act_sigmoid(float x)
{
    return x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
}

/* f(x) */
static SB_HD inline float sb_act_value(int fn, float x)
{
    switch (fn) {
    case SB_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case SB_ACT_RELU6: return x > 0.0f ? (x < 6.0f ? x : 6.0f) : 0.0f;
    case SB_ACT_SILU: return x * sb_act_sigmoid(x);
    case SB_ACT_GELU: return 0.5f * x * (1.0f + erff(x * SB_INV_SQRT2));
    case SB_ACT_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(SB_SQRT_2_OVER_PI * (x + SB_GELU_TANH_C * x * x * x)));
    case SB_ACT_SIGMOID: return sb_act_sigmoid(x);
    case SB_ACT_TANH: return tanhf(x);
    default: return NAN; /* unreachable: the parser admits only sb_act_fn */
    }
}

/* f'(x); relu and relu6 take 0 at their kinks */
static SB_HD inline float sb_act_grad(int fn, float x)
{
    switch (fn) {
    case SB_ACT_RELU: return x > 0.0f ? 1.0f : 0.0f;
    case SB_ACT_RELU6: return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
    case SB_ACT_SILU: {
        float s = sb_act_sigmoid(x);
        return s * (1.0f + x * (1.0f - s));
    }
    case SB_ACT_GELU:
        return 0.5f * (1.0f + erff(x * SB_INV_SQRT2)) + x * SB_INV_SQRT_2PI * expf(-0.5f * x * x);
    case SB_ACT_GELU_TANH: {
        float t = tanhf(SB_SQRT_2_OVER_PI * (x + SB_GELU_TANH_C * x * x * x));
        return 0.5f * (1.0f + t)
               + 0.5f * x * (1.0f - t * t) * SB_SQRT_2_OVER_PI * (1.0f + 3.0f * SB_GELU_TANH_C * x * x);
    }
    case SB_ACT_SIGMOID: {
        float s = sb_act_sigmoid(x);
        return s * (1.0f - s);
    }
    case SB_ACT_TANH: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    default: return NAN;
    }
}

#endif
