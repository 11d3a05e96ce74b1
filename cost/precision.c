/* precision.c: the precision recipes (shardbench/precision.h). The bytes
 * are the usual mixed-precision accounting (ZeRO, Rajbhandari et al. 2020;
 * Megatron-LM's distributed-optimizer table): docs/cost-model.md,
 * "Precision". */
#include "shardbench/precision.h"

#include <string.h>

static const char *const names[SB_PREC_COUNT] = {"fp32", "tf32", "fp16", "bf16", "fp8"};

int sb_precision_parse(const char *s, const char *what, int *out, sb_error *err)
{
    for (int i = 0; i < SB_PREC_COUNT; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    return sb_fail(err, SB_EXIT_INPUT, "%s: '%s' is not fp32, tf32, fp16, bf16 or fp8", what, s);
}

const char *sb_precision_name(int prec)
{
    return prec >= 0 && prec < SB_PREC_COUNT ? names[prec] : "?";
}

sb_prec_bytes sb_precision_bytes(int prec)
{
    switch (prec) {
    case SB_PREC_FP16: /* fp16 weights and gradients; fp32 master, fp32 gradient copy, 2 moments */
        return (sb_prec_bytes){.weight = 2, .grad = 2, .adam = 16, .sgd = 8, .act = 2, .grad_word = 2};
    case SB_PREC_BF16: /* bf16 weights; fp32 main gradients; fp32 master and 2 moments */
    case SB_PREC_FP8:  /* the same storage: fp8 copies are transient, per GEMM */
        return (sb_prec_bytes){.weight = 2, .grad = 4, .adam = 12, .sgd = 4, .act = 2, .grad_word = 4};
    default: /* fp32, tf32: one fp32 copy, fp32 gradients, 2 fp32 moments */
        return (sb_prec_bytes){.weight = 4, .grad = 4, .adam = 8, .sgd = 0, .act = 4, .grad_word = 4};
    }
}

int sb_grad_dtype_parse(const char *s, double *bytes, sb_error *err)
{
    if (!strcmp(s, "fp32"))
        *bytes = 4.0;
    else if (!strcmp(s, "bf16") || !strcmp(s, "fp16"))
        *bytes = 2.0;
    else
        return sb_fail(err, SB_EXIT_INPUT, "--grad-reduce-dtype: '%s' is not fp32, bf16 or fp16", s);
    return 0;
}
