/* k_softcap.cu: the cuda kernels of k_softcap.c, softcap y = cap·tanh(x/cap)
 * and its backward; the formulas are softcap_math.h's, shared with the CPU
 * kernels. One thread per element (grid-stride). */
#include "../softcap_math.h"
#include "launch.cuh"

__global__ static void softcap_fwd_k(float *out, const float *inp, int64_t n, float cap)
{
    GRID_STRIDE(i, n) out[i] = sb_softcap_value(inp[i], cap);
}

void sbk_softcap_forward(float *out, const float *inp, size_t n, float cap)
{
    LAUNCH(softcap_fwd_k, n, out, inp, (int64_t)n, cap);
}

__global__ static void softcap_bwd_k(float *dinp, const float *dout, const float *inp, int64_t n,
                                     float cap)
{
    GRID_STRIDE(i, n) dinp[i] += dout[i] * sb_softcap_grad(inp[i], cap);
}

void sbk_softcap_backward(float *dinp, const float *dout, const float *inp, size_t n, float cap)
{
    LAUNCH(softcap_bwd_k, n, dinp, dout, inp, (int64_t)n, cap);
}
