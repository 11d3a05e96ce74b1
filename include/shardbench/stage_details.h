/* shardbench/stage_details.h: per pipeline stage of a `search --space full`
 * result, what its figures need and the rest of its JSON does not say:
 * the seconds of one micro-batch's forward and backward, and the memory
 * per device split into weights, gradients, optimizer state, activations
 * and buffers (search/stage_details.c; the JSON key `stage_details`). */
#ifndef SHARDBENCH_STAGE_DETAILS_H
#define SHARDBENCH_STAGE_DETAILS_H

#include "shardbench/pipesearch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int stage, devices;
    int first_op, last_op;      /* ops [first_op, last_op] of the model */
    double forward_seconds;     /* one micro-batch, cost / (F x 1e12) */
    double backward_seconds;
    /* bytes per device (sb_mem of the stage's ops, as the search's
     * stage_mem): weights; gradients (of the weights); optimizer (state);
     * activations (kept for backward, times the micro-batches in flight,
     * and their gradients); buffers (the largest transient of one op) */
    double weights, gradients, optimizer, activations, buffers;
} sb_stage_detail;

/* The details of every stage of r (the result of sb_pipe_search on m, p,
 * cp, o), into out[0 .. r->pipe.nstages). The split of t_s (the stage's
 * cost per micro-batch, r->stage_time): each op's vertex cost less its
 * share of the weight-gradient all-reduce and its recomputation is one
 * third forward, two thirds backward (the reference model's three equal
 * passes); the all-reduce share and the recomputation are backward; the
 * relayouts between ops and the send to the next stage half each. So
 * forward + backward = t_s. The memory's five parts sum to
 * r->stage_mem[s] (checked: an internal error otherwise). */
int sb_stage_details(const sb_model *m, const sb_cost_params *cp, const sb_pipe_opts *o,
                     const sb_pipe_result *r, sb_stage_detail *out, sb_error *err);

/* The same as the JSON array (text) of `search --space full --format
 * json`'s `stage_details`: per stage {stage, devices, first_op, last_op
 * (names), forward_seconds, backward_seconds, memory_bytes: {weights,
 * gradients, optimizer, activations, buffers}}. Malloc'd; NULL with err
 * set. */
char *sb_stage_details_json_str(const sb_model *m, const sb_cost_params *cp,
                                const sb_pipe_opts *o, const sb_pipe_result *r, sb_error *err);

#ifdef __cplusplus
}
#endif
#endif
