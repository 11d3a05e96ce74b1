/* full_grid.h: the Megatron-LM grid inside `search --space full`
 * (cli/search_megatron.c). With a GPU machine file the full space is the
 * op-level pipeline space (search/pipeline.c) and Megatron's grid
 * (search/megatron.c: interleaved 1F1B, bucketed data-parallel overlap,
 * context and expert parallelism) together: both are searched and the
 * faster answer printed, so the full space is never predicted slower than
 * `--algo megatron` under the same options (docs/megatron.md). */
#ifndef CLI_FULL_GRID_H
#define CLI_FULL_GRID_H

#include "algos.h"
#include "shardbench/megatron.h"
#include "shardbench/pipesearch.h"

typedef struct {
    int searched;    /* the grid applies to the problem and was searched */
    int found;       /* searched, and a configuration fits */
    char why[1024];  /* found 0: why (not searched, or nothing fits) */
    sb_machine mc;
    sb_gpu g;
    sb_mt_model mm;
    sb_mt_config best;
    sb_mt_result r;
    long priced;
    double secs;
    double limit;    /* bytes per device (0: none) */
} cli_grid;

/* The grid under the full space's options: --stages is --pp, --zero 0|1 the
 * distributed optimizer, --recompute none|all none|full, --attention,
 * --dp-overlap, --precision, --grad-reduce-dtype and --memory as given;
 * --save keeps to what a strategy file holds (sb_mt_config.file_layout: VPP
 * 1, EP within DP), which CLI_GRID_SAVE_NOTE says where the answer is given.
 * Not searched (found 0, why set) when off names why (--megatron-grid
 * off, --format tsv), without a GPU machine file, with an
 * optimizer other than Adam, --microbatches, --schedule gpipe, --zero 2|3,
 * or a model that is not a decoder-only transformer (sb_mt_model_from). */
#define CLI_GRID_SAVE_NOTE                                                                         \
    "shardbench: --save: Megatron-LM's grid searched only what a strategy file holds (VPP 1, EP " \
    "dividing DP; an MoE model at TP, EP and CP 1 in one micro-batch, as its router runs)\n"
#define CLI_GRID_ONE_STAGE_NOTE                                                                    \
    "shardbench: --save: the model's runs of ops 'PREFIX/...' are not its layers (an encoder and "  \
    "a decoder, a block before them): Megatron-LM's grid kept to one pipeline stage\n"
void cli_grid_search(const shared_opts *so, const sb_pipe_opts *po, int save, const char *off,
                     const sb_model *m, cli_grid *g);

/* The grid's configuration as the full space's answer: the table (after a
 * line naming the op-level search's best, op_s seconds, or its error when
 * op_err is given) or the JSON (--algo megatron's, with the search's "algo"
 * (pase|bf), "space": "full", "answer": "megatron_grid" and "op_level"); drawn into plot, saved into
 * save (a strategy file). The JSON text (malloc'd) into *json when json is
 * not NULL. 0, or -1 with err set. */
int cli_grid_answer(const cli_grid *g, const sb_model *m, int P, const char *algo, const char *format,
                    const char *plot, const char *save, const sb_pipe_result *op, double op_s,
                    const char *op_err, char **json, sb_error *err);

/* What the grid found, for an op-level answer's JSON ("megatron_grid":
 * its step, degrees and memory, or {"not_searched"/"none_fits": why}). */
struct json_t *cli_grid_json(const cli_grid *g);

/* One line under an op-level answer's table: the grid's step and degrees,
 * or why it was not searched. */
void cli_grid_print_line(FILE *f, const cli_grid *g);

#endif
