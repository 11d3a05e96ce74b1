/* shardbench/precision.h: the training's precision recipe (docs/cost-model.md,
 * "Precision"): which tensor-core peak prices a GEMM, how many bytes a
 * parameter, its gradient, its optimizer state and an activation element
 * take, and which word the collectives move. fp32 is the reference (and the
 * CPU runtime's); the others are mixed-precision recipes as Megatron-LM
 * trains them. */
#ifndef SHARDBENCH_PRECISION_H
#define SHARDBENCH_PRECISION_H

#include "shardbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SB_PREC_FP32 = 0, /* fp32 everything (the reference; cpu-here) */
    SB_PREC_TF32 = 1, /* fp32 storage, GEMMs on tf32 tensor cores */
    SB_PREC_FP16 = 2, /* fp16 mixed: fp16 weights, activations, gradients; fp32 master + Adam */
    SB_PREC_BF16 = 3, /* bf16 mixed: bf16 weights, activations; fp32 main gradients, master, Adam */
    SB_PREC_FP8 = 4,  /* fp8 GEMMs (Transformer Engine) on the bf16 recipe's storage */
    SB_PREC_COUNT = 5
} sb_precision;

/* Bytes per element of each category of the memory model. */
typedef struct {
    double weight;     /* the model's copy of a parameter */
    double grad;       /* its gradient as kept for the update */
    double adam;       /* optimizer state per parameter with Adam (master copy and two moments) */
    double sgd;        /* optimizer state per parameter with SGD (a master copy when mixed) */
    double act;        /* an activation element (and its gradient) */
    double grad_word;  /* the word the gradient reduction moves by default */
} sb_prec_bytes;

/* "fp32", "tf32", "fp16", "bf16", "fp8"; anything else an input error naming
 * `what` and the value. */
int sb_precision_parse(const char *s, const char *what, int *out, sb_error *err);
const char *sb_precision_name(int prec);
/* The bytes of recipe `prec` (a valid sb_precision). */
sb_prec_bytes sb_precision_bytes(int prec);
/* --grad-reduce-dtype: "fp32" (4), "bf16" or "fp16" (2); the bytes, or an
 * input error naming the value. */
int sb_grad_dtype_parse(const char *s, double *bytes, sb_error *err);

#ifdef __cplusplus
}
#endif

#endif
