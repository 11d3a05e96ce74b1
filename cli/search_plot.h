/* cli/search_plot.h: what `search --space full` adds for its figures: the
 * JSON's stage_details and device_memory_bytes, and `search --plot DIR`
 * (cli/search_plot.c). */
#ifndef SB_CLI_SEARCH_PLOT_H
#define SB_CLI_SEARCH_PLOT_H

#include "shardbench/megatron.h"
#include "shardbench/pipesearch.h"

struct json_t;

/* Sets "stage_details" (shardbench/stage_details.h) and
 * "device_memory_bytes" (device_gib GiB) in j. 0, or -1 with err set. */
int cli_search_details(struct json_t *j, const sb_model *m, const sb_cost_params *cp,
                       const sb_pipe_opts *po, const sb_pipe_result *r, double device_gib,
                       sb_error *err);

/* `search --algo megatron`'s JSON for the figures (cli/search_megatron_plot.c):
 * "stage_details" (the configuration stage by stage), "microbatches", "schedule" (1f1b, interleaved-1f1b) and
 * "device_memory_bytes" set in j. 0, or -1 with err set. */
int cli_mt_details(struct json_t *j, const sb_mt_model *mm, const sb_mt_config *c,
                   const sb_gpu *g, double device_bytes, sb_error *err);
/* A priced configuration's compute by kind (sb_mt_result), as the JSON's
 * "compute_breakdown_seconds": gemm, attention, memory_bound (cli/search_megatron.c). */
struct json_t *cli_mt_compute_json(const sb_mt_result *r);
/* The layers each pipeline stage of c holds, "F + k x M + L" (cli/search_megatron.c). */
const char *cli_mt_stages(const sb_mt_model *mm, const sb_mt_config *c, char *buf, size_t n);

/* A plain strategy (one stage of every op on all P devices, one
 * micro-batch) as the figures read a pipeline's: the result's JSON (its
 * memory_bytes_per_device and time_breakdown_seconds, a machine file's)
 * with "stage_details" (one stage: its devices, first and last op,
 * forward a third of the step and backward the rest, as the cost model
 * splits an op's passes, and the memory parts), "microbatches" 1,
 * "schedule" and "device_memory_bytes". Malloc'd JSON text, or NULL with
 * err set. */
struct sb_problem;
struct sb_result;
char *cli_plain_json(const struct sb_problem *pb, const struct sb_result *r, const char *algo,
                     double device_gib, sb_error *err);

/* The figures of `plot --search` from the search's JSON text into dir
 * (the files named on stderr: stdout holds the search's own output), and
 * a line with their count and the seconds they took. 0, or -1. */
int cli_search_plot(const char *dir, const char *json, sb_error *err);

#endif
