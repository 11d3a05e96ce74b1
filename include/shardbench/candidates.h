/* shardbench/candidates.h: strategies beside the exact search, all costed
 * by the same model: the expert baselines, FlexFlow-style MCMC, the global
 * mesh-shape x layout-rule candidates (Mesh-TensorFlow style), and export of
 * a strategy to DTensor / PyTorch / JAX / Mesh-TensorFlow layouts. See
 * search/README.md. Data parallelism is sb_strategy_data_parallel
 * (search.h). */
#ifndef SHARDBENCH_CANDIDATES_H
#define SHARDBENCH_CANDIDATES_H

#include <stdio.h>

#include "shardbench/memory.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Index of the config of op `op` equal to want[] (one split count per
 * iteration dim); if want is not a valid config, the nearest valid one
 * (least sum of |log2 c_i - log2 want_i|, then the most devices, then the
 * lowest index) and *exact = 0. */
int sb_config_nearest(const sb_problem *pb, int op, const int *want, int *exact);

/* The expert strategy for the model, chosen by its ops and dim names:
 * "owt" (a conv op: data parallel everywhere but dense layers and the loss,
 * which split their output features), "gnmt" (an lstm op: its layers on
 * different devices, batch over the rest; data parallel elsewhere),
 * "mesh-tf" (a dim named heads, ff or vocab: batch over one mesh axis,
 * heads/ff/vocab (and units/hidden/classes) over the other, the best 2-axis
 * mesh shape), else "dp". *style (if not NULL) gets the name. */
int sb_strategy_expert(const sb_problem *pb, int *choice, const char **style, sb_error *err);

/* ---- MCMC ---------------------------------------------------------------- */

typedef struct {
    long budget;         /* iterations (proposals); > 0 */
    double time_limit;   /* seconds; <= 0: none */
    uint64_t seed;
    double temperature;  /* accept a worse move with exp(-delta / (T * current)) */
    const int *start;    /* initial strategy; NULL: the cheaper of expert and dp */
    int progress;        /* progress on stderr (TTY only) */
} sb_mcmc_opts;

void sb_mcmc_opts_default(sb_mcmc_opts *o);

typedef struct {
    long iteration;
    double seconds, cost;
} sb_mcmc_point;

typedef struct {
    int *choice;            /* best strategy found */
    double cost, start_cost;
    long iterations, accepted;
    double seconds;
    int stopped_by_time;    /* 1: the time limit ended it before the budget */
    int ntrace;             /* best cost over time: one point per improvement */
    sb_mcmc_point *trace;
} sb_mcmc_result;

int sb_search_mcmc(const sb_problem *pb, const sb_mcmc_opts *o, sb_mcmc_result *out,
                   sb_error *err);
void sb_mcmc_result_free(sb_mcmc_result *r);

/* ---- mesh-shape x layout-rule candidates ------------------------------------ */

#define SB_CAND_MAX_NAMES 32
#define SB_CAND_MAX_AXES 3

typedef struct {
    int naxes;                    /* 0: one device, nothing split */
    int size[SB_CAND_MAX_AXES];   /* axes x, y, z; sizes >= 2, non-increasing */
} sb_cand_mesh;

typedef struct {
    sb_cand_mesh mesh;
    signed char axis[SB_CAND_MAX_NAMES]; /* per mappable dim name: mesh axis or -1 */
    double cost;                  /* predicted FLOP */
    double mem;                   /* predicted peak bytes per device */
    int fallbacks;                /* ops whose induced config was not valid */
} sb_candidate;

typedef struct {
    int nnames;                             /* mappable dim names of the model */
    char names[SB_CAND_MAX_NAMES][SB_NAME_MAX];
    int ncand;
    sb_candidate *cand;                     /* distinct strategies, by cost */
    long rule_sets;                         /* rule sets enumerated (before dedup) */
    int nmeshes;
    int truncated;                          /* 1: stopped at max_rule_sets */
    double seconds;
} sb_candidate_set;

/* Enumerates mesh shapes (every divisor of P as 0..3 axes) x layout rule
 * sets over the model's dim names, one strategy per distinct induced
 * strategy, sorted by cost. Stops (truncated = 1, and says so in its
 * printout) after max_rule_sets rule sets (<= 0: 2,000,000). */
int sb_candidates_enumerate(const sb_problem *pb, sb_optimizer opt, long max_rule_sets,
                            int progress, sb_candidate_set *out, sb_error *err);
void sb_candidate_set_free(sb_candidate_set *cs);

/* The strategy a candidate induces; returns the number of fallbacks. */
int sb_candidate_strategy(const sb_problem *pb, const sb_candidate_set *cs,
                          const sb_candidate *c, int *choice);

/* "x=4,y=2" ("1" for no axes) and Mesh-TF rules "batch:x;heads:y" ("" for none). */
void sb_cand_mesh_str(const sb_cand_mesh *m, char *buf, size_t n);
void sb_candidate_rules_str(const sb_candidate_set *cs, const sb_candidate *c, char *buf,
                            size_t n);

/* ---- export ------------------------------------------------------------------- */

typedef enum {
    SB_EXPORT_DTENSOR = 0,  /* TF DTensor layout strings */
    SB_EXPORT_TORCH,        /* PyTorch DeviceMesh + placements */
    SB_EXPORT_JAX,          /* jax.sharding.Mesh + PartitionSpec */
    SB_EXPORT_MTF,          /* Mesh-TensorFlow mesh_shape + layout rules per op */
} sb_export_format;

/* "dtensor", "torch", "jax", "mtf"; else an input error naming the value. */
int sb_export_format_parse(const char *s, sb_export_format *out, sb_error *err);

/* Writes, per op, its mesh (the op's grid: one axis x, y, z, ... per split
 * iteration dim, over devices 0..q-1) and the layout of every operand, then
 * one `relayout` line per edge whose producer and consumer layouts differ.
 * Format: search/README.md "Export". */
int sb_strategy_export(FILE *f, const sb_problem *pb, const int *choice, sb_export_format fmt,
                       sb_error *err);

/* What export writes: the text above (default), or a program for
 * --to jax|torch: a Python module or its JSON (docs/export.md). */
typedef enum { SB_EXPORT_TEXT = 0, SB_EXPORT_PY, SB_EXPORT_JSON } sb_export_form;

/* "text", "py", "json"; else an input error naming the value. */
int sb_export_form_parse(const char *s, sb_export_form *out, sb_error *err);

/* sb_strategy_export for SB_EXPORT_TEXT; else the JSON or Python program
 * (JAX or PyTorch only: an input error for the others). */
int sb_strategy_export_as(FILE *f, const sb_problem *pb, const int *choice, sb_export_format fmt,
                          sb_export_form form, sb_error *err);

/* A DTensor layout string "sharding_specs:x,unsharded, mesh:|x=4,y=2|..." read
 * back: per tensor dim the split count (1 for unsharded; "(x*y)" is the
 * product). Returns the rank, or -1 with err set. */
int sb_dtensor_layout_parse(const char *s, int *splits, int max, sb_error *err);

/* Mesh-TF layout rules "batch:x;heads:y" against a mesh shape "x:4;y:2":
 * names[i] gets each rule's dim name and splits[i] its axis size. Returns
 * the number of rules, or -1 with err set. */
int sb_mtf_rules_parse(const char *rules, const char *mesh, char (*names)[SB_NAME_MAX],
                       int *splits, int max, sb_error *err);

#ifdef __cplusplus
}
#endif
#endif
