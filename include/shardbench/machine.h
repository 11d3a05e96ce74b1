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

/* Names of the shipped machines, NULL-terminated. */
extern const char *const sb_shipped_machines[];

#ifdef __cplusplus
}
#endif

#endif
