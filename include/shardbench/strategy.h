/* shardbench/strategy.h: the strategy, one type for every search's answer
 * (strategy/): per-op configs, pipeline stages, micro-batches and schedule,
 * the ZeRO stage, recomputed ops, the rank order and the precision recipe
 * it was priced in. Every search gives one (sb_strategy_from_result,
 * sb_strategy_from_pipe), strategy files hold one (versioned text), and
 * run, export and bench take one. Also: the search result's JSON, and data
 * parallelism as a strategy. */
#ifndef SHARDBENCH_STRATEGY_H
#define SHARDBENCH_STRATEGY_H

#include <stdio.h>

#include "shardbench/common.h"
#include "shardbench/model.h"
#include "shardbench/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sb_problem;     /* search.h */
struct sb_result;      /* search.h */
struct sb_pipe_result; /* pipesearch.h */

/* One strategy of model m on p devices. A plain one (what PaSE's space
 * holds) has no pipeline (sb_pipeline_none), ZeRO 0, nothing recomputed
 * and block rank order; a file holding nothing more is written as version
 * 1, byte for byte as before. */
typedef struct sb_strategy {
    int p;
    char algo[64];            /* the search (or file) that chose it */
    double cost;              /* its predicted cost: FLOP-equivalents, or seconds with a machine */
    int *cfg;                 /* nops * SB_MAX_DIMS: op i's split counts at cfg + i * SB_MAX_DIMS,
                                 for its stage's devices */
    int *op_line;             /* nops: the line of each op (0: not read from a file) */
    sb_pipeline pipe;         /* sb_pipeline_none when there is none */
    int zero;                 /* ZeRO stage 0..3 over each weight's replicas */
    unsigned char *recompute; /* nops flags: op i's activations computed again in the backward */
    int node_order;           /* sb_cost_params.node_order: 1 cyclic (a version-2 line) */
    int node_devices;         /* with node_order 1: the devices per node it was chosen for */
    int precision;            /* sb_precision (precision.h) it was priced in; 0 = fp32, as the
                                 CPU runtime trains */
} sb_strategy;

/* Op i's config (m->ops[i].ndims split counts). */
const int *sb_strategy_config(const sb_strategy *st, int i);

/* A strategy from a search's answer. from_result: a plain problem's
 * (its chosen configs, recomputed ops, rank order, precision); from_pipe:
 * the full space's (configs for each stage's devices, pipeline, ZeRO,
 * recomputation; precision as priced). from_choice: choice[i] indexes op
 * i's configs in pb, nothing else (algo "given"). from_configs: configs[i] is op i's
 * config on p devices, pipe NULL (none) or a pipeline, recompute NULL
 * (none) or nops flags (tests, benchmarks). Each allocates st (free with
 * sb_strategy_free): 0, or -1 with err (out of memory). */
int sb_strategy_from_result(sb_strategy *st, const struct sb_problem *pb,
                            const struct sb_result *r, const char *algo, sb_error *err);
int sb_strategy_from_choice(sb_strategy *st, const struct sb_problem *pb, const int *choice,
                            sb_error *err);
int sb_strategy_from_pipe(sb_strategy *st, const sb_model *m, int p,
                          const struct sb_pipe_result *r, const char *algo, int precision,
                          sb_error *err);
int sb_strategy_from_configs(sb_strategy *st, const sb_model *m, int p,
                             const int *const *configs, const sb_pipeline *pipe,
                             const unsigned char *recompute, sb_error *err);

/* An empty one (every config 0, no pipeline, fp32) for m on p devices: 0,
 * or -1 when out of memory. */
int sb_strategy_init(sb_strategy *st, const sb_model *m, int p);
void sb_strategy_free(sb_strategy *st);
/* 1 when st holds what a plain problem's choice cannot: a pipeline (S > 1
 * or M > 1), a ZeRO stage, a recomputed op or cyclic rank order. The
 * precision is not one (it changes no config): a file with only a
 * precision line is version 2 but plain. */
int sb_strategy_has_extras(const sb_model *m, const sb_strategy *st);

/* ---- strategy files (strategy_io.c; docs/strategy-files.md) ---- */
/* Writes st (through a temporary file and a rename). */
int sb_strategy_save(const char *path, const sb_model *m, const sb_strategy *st, sb_error *err);
/* Reads a version 1 or 2 file for m on p devices: each op's config must fit
 * its stage's devices (and its dims); errors name the file and line. On
 * success st is allocated (free with sb_strategy_free). */
int sb_strategy_load(const char *path, const sb_model *m, int p, sb_strategy *st, sb_error *err);
/* The config index in pb of each op's config in st (choice[nops]); an
 * error naming path:line when one is not a config of pb. */
int sb_strategy_choice(const char *path, const sb_strategy *st, const struct sb_problem *pb,
                       int *choice, sb_error *err);
/* A file read against a plain problem: choice[i] gets the index of op i's
 * saved config. Mismatched model or unknown config: error; a file with
 * extras (a pipeline, ZeRO stage, recomputation, rank order): error. */
int sb_strategy_load_choice(const char *path, const struct sb_problem *pb, int *choice,
                            sb_error *err);
/* A search's answer written as a strategy file (from_result, then save). */
int sb_result_save(const char *path, const struct sb_problem *pb, const struct sb_result *r,
                   const char *algo, sb_error *err);
/* One value of a strategy-file line at s (blanks skipped): a bare word (up
 * to a blank or '#'), or a double-quoted one with \" \\ \n \t \r \xHH
 * escapes (how `model` is written when the name needs it). 0 with the value
 * in out and *end (if not NULL) after it; -1 when unterminated, badly
 * escaped or longer than n - 1. */
int sb_strategy_word(const char *s, char *out, size_t n, const char **end);

/* ---- JSON (strategy_json.c) ---- */
/* The JSON of a strategy with its extras, in the keys of `search --space
 * full --format json`: model, params, p, algo, total_cost (the strategy's
 * cost), stages (ops, devices, mesh), microbatches, schedule, zero,
 * recompute (op names), precision when not fp32, and ops (name, type,
 * stage, dims, config); what bench stores for a strategy that a plain
 * problem cannot hold. Malloc'd, NULL when out of memory. */
char *sb_strategy_json_str(const sb_model *m, const sb_strategy *st, const char *algo);
/* A plain search's answer as JSON: model, params, p, algo, cost-model
 * parameters, total_cost, search_seconds, table statistics, and ops (name,
 * type, dims, config, cost). The _str form returns malloc'd text (NULL on
 * failure). */
void sb_result_json(FILE *f, const struct sb_problem *pb, const struct sb_result *r,
                    const char *algo);
char *sb_result_json_str(const struct sb_problem *pb, const struct sb_result *r,
                         const char *algo);
/* Stage s of pipeline pl as the JSON text both strategy JSONs share:
 * {"ops": names, "devices": ranks, "mesh": [devices]}. Malloc'd, NULL when
 * out of memory. */
char *sb_stage_json_str(const sb_model *m, const sb_pipeline *pl, int s);

/* Data parallelism: every op splits its dim named "batch" as far as P and
 * its enumerated configs allow (the largest such divisor), nothing else. */
int sb_strategy_data_parallel(const struct sb_problem *pb, int *choice, sb_error *err);

#ifdef __cplusplus
}
#endif
#endif
