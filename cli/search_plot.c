/* cli/search_plot.c: `search --space full`'s stage_details and device
 * memory in its JSON, and `search --plot DIR`: the figures of
 * `plot --search` (plots/fig_search.c) drawn from that JSON. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "search_plot.h"
#include "shardbench/plots.h"
#include "shardbench/search.h"
#include "shardbench/stage_details.h"
#include "shardbench/strategy.h"

int cli_search_details(json_t *j, const sb_model *m, const sb_cost_params *cp,
                       const sb_pipe_opts *po, const sb_pipe_result *r, double device_gib,
                       sb_error *err)
{
    char *text = sb_stage_details_json_str(m, cp, po, r, err);
    json_t *d = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!d)
        return err->code ? -1 : sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    if (json_object_set_new(j, "stage_details", d) ||
        json_object_set_new(j, "device_memory_bytes", json_real(device_gib * 1073741824.0)))
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    return 0;
}

int cli_search_plot(const char *dir, const char *json, sb_error *err)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sb_plot_search_opts o = {.json = json, .source = "the search's JSON", .out = dir,
                             .log = stderr};
    int figures = 0, files = 0;
    if (sb_plot_search(&o, &figures, &files, err))
        return -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "%d figures (%d files) in %s, %.2f s\n", figures, files, dir,
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return 0;
}

char *cli_plain_json(const sb_problem *pb, const sb_result *r, const char *algo,
                     double device_gib, sb_error *err)
{
    char *text = sb_result_json_str(pb, r, algo);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!j) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        return NULL;
    }
    const sb_model *m = pb->m;
    double step = r->total_cost / (pb->cp.tflops * 1e12);
    json_t *mem = json_pack("{s:f, s:f, s:f, s:f, s:f}", "weights", r->mem_parts[0], "gradients",
                            r->mem_parts[1], "optimizer", r->mem_parts[2], "activations",
                            r->mem_parts[3], "buffers", r->mem_parts[4]);
    json_t *st = json_pack("[{s:i, s:i, s:s, s:s, s:f, s:f, s:o}]", "stage", 0, "devices", pb->p,
                           "first_op", m->ops[0].name, "last_op", m->ops[m->nops - 1].name,
                           "forward_seconds", step / 3.0, "backward_seconds", step * 2.0 / 3.0,
                           "memory_bytes", mem);
    char *out = NULL;
    if (st && !json_object_set_new(j, "stage_details", st) &&
        !json_object_set_new(j, "microbatches", json_integer(1)) &&
        !json_object_set_new(j, "schedule", json_string("1f1b")) &&
        !json_object_set_new(j, "device_memory_bytes", json_real(device_gib * 1073741824.0)))
        out = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!out)
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    return out;
}
