/* shardbench/strategy.h: strategies as files and JSON: the versioned
 * strategy file (per-op configs, and in version 2 a pipeline, a ZeRO stage,
 * recomputed ops and the rank order), its JSON, and data parallelism as a
 * strategy (strategy/). */
#ifndef SHARDBENCH_STRATEGY_H
#define SHARDBENCH_STRATEGY_H

#include <stdio.h>

#include "shardbench/search.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Strategy files (versioned text, see search/README.md). */
int sb_strategy_save(const char *path, const sb_problem *pb,
                     const sb_result *r, const char *algo, sb_error *err);
/* Reads a strategy file back against a problem: choice[i] gets the index of
 * the saved config of op i. Mismatched model or unknown config: error; a
 * file holding a pipeline, ZeRO stage or recomputation: error (those are
 * read by sb_strategy_file_load). */
int sb_strategy_load(const char *path, const sb_problem *pb, int *choice,
                     sb_error *err);
/* A strategy file as written: one config per op (split counts, op i's at
 * cfg + i * SB_MAX_DIMS), and, in version 2, a pipeline (pipeline.h), a
 * ZeRO stage and the recomputed ops. A file with none of them is written
 * as version 1, byte for byte as before. */
typedef struct {
    int p;
    char algo[64];
    double cost;
    int *cfg;                 /* nops * SB_MAX_DIMS */
    int *op_line;             /* nops: the line of each op (0: not read from a file) */
    sb_pipeline pipe;         /* sb_pipeline_none when the file has none */
    int zero;                 /* 0..3 */
    unsigned char *recompute; /* nops flags */
    int node_order;           /* sb_cost_params.node_order: 1 cyclic (a version-2 line) */
    int node_devices;         /* with node_order 1: the devices per node it was chosen for */
} sb_strategy_file;

/* Allocates an empty one (every config 0, no pipeline) for m on p devices:
 * 0, or -1 when out of memory. */
int sb_strategy_file_init(sb_strategy_file *sf, const sb_model *m, int p);
void sb_strategy_file_free(sb_strategy_file *sf);
/* Writes sf (through a temporary file and a rename). */
int sb_strategy_file_save(const char *path, const sb_model *m, const sb_strategy_file *sf,
                          sb_error *err);
/* Reads a version 1 or 2 file for m on p devices: each op's config must fit
 * its stage's devices (and its dims); errors name the file and line. On
 * success sf is allocated (free with sb_strategy_file_free). */
int sb_strategy_file_load(const char *path, const sb_model *m, int p, sb_strategy_file *sf,
                          sb_error *err);

/* The config index in pb of each op's config in sf (choice[nops]); an
 * error naming path:line when one is not a config of pb. */
int sb_strategy_file_choice(const char *path, const sb_strategy_file *sf, const sb_problem *pb,
                            int *choice, sb_error *err);
/* 1 when sf holds a pipeline (S > 1 or M > 1), a ZeRO stage or a
 * recomputed op: what a version-2 file adds. */
int sb_strategy_file_has_extras(const sb_model *m, const sb_strategy_file *sf);
/* The JSON of a strategy file with its extras, in the keys of `search
 * --space full --format json`: model, params, p, algo, total_cost (the
 * file's cost), stages (ops, devices, mesh), microbatches, schedule, zero,
 * recompute (op names) and ops (name, type, stage, dims, config); what
 * bench stores for a strategy that a plain problem cannot hold. Malloc'd,
 * NULL when out of memory. */
char *sb_strategy_file_json_str(const sb_model *m, const sb_strategy_file *sf, const char *algo);
/* Stage s of pipeline pl as the JSON object both strategy JSONs share
 * (jansson's json_t): {"ops": names, "devices": ranks, "mesh": [devices]}. */
struct json_t;
struct json_t *sb_stage_json(const sb_model *m, const sb_pipeline *pl, int s);

/* One value of a strategy-file line at s (blanks skipped): a bare word (up
 * to a blank or '#'), or a double-quoted one with \" \\ \n \t \r \xHH
 * escapes (how `model` is written when the name needs it). 0 with the value
 * in out and *end (if not NULL) after it; -1 when unterminated, badly
 * escaped or longer than n - 1. */
int sb_strategy_word(const char *s, char *out, size_t n, const char **end);

/* Data parallelism: every op splits its dim named "batch" as far as P and
 * its enumerated configs allow (the largest such divisor), nothing else. */
int sb_strategy_data_parallel(const sb_problem *pb, int *choice, sb_error *err);

/* JSON of a strategy: model, params, p, algo, cost-model parameters,
 * total_cost, search_seconds, table statistics, and ops (name, type, dims,
 * config, cost). The _str form returns malloc'd text (NULL on failure). */
void sb_strategy_json(FILE *f, const sb_problem *pb, const sb_result *r, const char *algo);
char *sb_strategy_json_str(const sb_problem *pb, const sb_result *r, const char *algo);

#ifdef __cplusplus
}
#endif
#endif
