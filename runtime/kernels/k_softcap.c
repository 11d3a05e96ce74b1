/* k_softcap.c: the CPU kernels of softcap (kernels.h), Gemma 2's logit
 * soft-capping y = cap·tanh(x/cap); the formulas are softcap_math.h's,
 * shared with cuda/k_softcap.cu. Elementwise, in parallel over n. */
#include "par.h"
#include "shardbench/kernels.h"
#include "softcap_math.h"

void sb_softcap_forward(float *out, const float *inp, size_t n, float cap)
{
    SB_PAR(if (n > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++)
        out[i] = sb_softcap_value(inp[i], cap);
}

void sb_softcap_backward(float *dinp, const float *dout, const float *inp, size_t n, float cap)
{
    SB_PAR(if (n > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * sb_softcap_grad(inp[i], cap);
}
