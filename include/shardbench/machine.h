/* shardbench/machine.h: machine description files (docs/machines.md): the
 * devices of a cluster, their peaks, memory and links, as the cost model's
 * parameters. Shipped ones live in machines/NAME.machine. */
#ifndef SHARDBENCH_MACHINE_H
#define SHARDBENCH_MACHINE_H

#include "shardbench/search.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int devices_per_node, nodes;
    double tflops_fp32, tflops_tf32, tflops_bf16; /* dense peak per device */
    double mem_gib, mem_gbs;                      /* device memory, its bandwidth */
    double intra_gbs, intra_latency_us;           /* per device, inside a node */
    double inter_gbs, inter_latency_us;           /* per device, between nodes */
    double eff_gemm, eff_conv, eff_elementwise;   /* fractions of peak (default 1) */
    double tflops_fp8;                            /* dense fp8 peak; 0: none (optional) */
    /* the GPU op model's figures (optional; shardbench/megatron.h) */
    double sms;                                   /* streaming multiprocessors */
    double gemm_eff_large;                        /* large-GEMM fraction of peak */
    double gemm_eff_large_fp8; /* fp8 large-GEMM fraction of tflops_fp8; 0: gemm_eff_large */
    double hbm_eff;                               /* fraction of mem_gbs a copy reaches */
    double kernel_us;                             /* per-kernel overhead, us */
    double intra_busbw, inter_busbw;              /* NCCL bus bandwidth per GPU, GB/s */
    /* the fused (flash) attention kernel's TFLOP/s by sequence length, forward
     * and backward, head dim 128, a microbenchmark's (optional, both or none) */
    sb_curve attn_fwd_tflops, attn_bwd_tflops;
    int precision;                                /* the recipe a search assumes without
                                                     --precision (sb_precision; default fp32) */
    char path[256];                               /* the file it came from */
} sb_machine;

/* Parses a machine file's text; `path` names it in errors (file:line, the
 * key and the value; SB_EXIT_INPUT). */
int sb_machine_parse(const char *text, const char *path, sb_machine *mc, sb_error *err);
/* Loads a machine by shipped name ("h200-sxm": NAME.machine in
 * $SHARDBENCH_MACHINES, the source tree's machines/, the installed data
 * folder) or by file path. */
int sb_machine_load(const char *name, sb_machine *mc, sb_error *err);
/* The cost parameters of a machine at fp32 (the cutoff of cp is kept). */
void sb_machine_cost_params(const sb_machine *mc, sb_cost_params *cp);
/* The same at precision `prec` (sb_precision; < 0: the file's `precision`):
 * F the peak of that precision (fp16 and bf16 share the bf16 peak), words of
 * its activation bytes, the gradient reduction in grad_word_bytes (<= 0:
 * the recipe's own). A precision the file has no peak for (fp8 without
 * tflops_fp8) is an input error naming it and the file. */
int sb_machine_cost_params_at(const sb_machine *mc, int prec, double grad_word_bytes,
                              sb_cost_params *cp, sb_error *err);

/* A machine of one node of `devices` devices whose cost parameters are cp
 * (a calibration: sb_machine_cost_params of it gives cp's tflops, gbs,
 * latency_us, elem_ratio and conv_ratio back; the inter-node link is the
 * intra-node one), with mem_gib and mem_gbs as given. The peak is cp's
 * rate over eff_gemm = min(1, elem_ratio, conv_ratio), so that every
 * efficiency factor lies in its range. -1 (SB_EXIT_INPUT) when one does not
 * even so (an elementwise element over 10^6 GEMM multiply-adds). */
int sb_machine_from_cost_params(const sb_cost_params *cp, int devices, double mem_gib,
                                double mem_gbs, sb_machine *mc, sb_error *err);
/* Writes mc as a machine file (whole or not at all); `comment` (may be
 * NULL) goes on its first line. */
int sb_machine_save(const char *path, const sb_machine *mc, const char *comment, sb_error *err);

/* Names of the shipped machines: the *.machine files of $SHARDBENCH_MACHINES,
 * the source tree's machines/ and the installed folder (sb_shipped_names;
 * free with sb_names_free). */
char **sb_shipped_machines(void);

#ifdef __cplusplus
}
#endif

#endif
