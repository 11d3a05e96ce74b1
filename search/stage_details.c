/* search/stage_details.c: per pipeline stage of a full-space search result,
 * the forward and backward seconds of one micro-batch and the memory per
 * device in five parts (shardbench/stage_details.h), from the same model
 * and formulas the search priced the stage with (search/pipeline.c: the
 * micro-batch model, the stage's ops as a model of their own, sb_op_memory_prec
 * with the micro-batches in flight). The figures of `plot --search` read
 * them (plots/fig_search.c). */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/stage_details.h"

/* Stage s's memory parts per device in the precision's bytes (as
 * stage_memory in pipeline.c); sub: the stage (sb_pipe_stage_model). */
static int stage_mem_parts(const sb_model *sub, const sb_pipe_result *r, const sb_pipe_opts *o,
                           int prec, int s, sb_stage_detail *d, sb_error *err)
{
    int i = r->pipe.first_op[s], j = r->pipe.first_op[s + 1], k = r->inflight[s];
    for (int v = 0; v < j - i; v++) {
        sb_mem x;
        sb_op_memory_prec(sub, &sub->ops[v], r->cfg + (size_t)(i + v) * SB_MAX_DIMS, o->opt,
                          r->zero, r->stage_recompute[s], prec, &x);
        d->weights += x.weights;
        d->gradients += x.weight_grads;
        d->optimizer += x.optimizer;
        d->activations += x.activations * (k > 1 ? k : 1) + x.act_grads;
        d->buffers = fmax(d->buffers, x.scratch);
    }
    double sum = d->weights + d->gradients + d->optimizer + d->activations + d->buffers;
    if (fabs(sum - r->stage_mem[s]) > 1e-9 * fmax(1.0, r->stage_mem[s]))
        return sb_fail(err, SB_EXIT_INTERNAL, "stage %d: memory parts sum to %.17g bytes, the "
                       "search's stage memory is %.17g", s, sum, r->stage_mem[s]);
    return 0;
}

/* Stage s's t_s split into forward and backward cost (FLOP) of one
 * micro-batch (the header says how); sub: the stage as its DP priced it
 * (sb_pipe_stage_model). */
static void stage_split(const sb_model *sub, const sb_cost_params *cp, const sb_pipe_result *r,
                        int s, double *fwd, double *bwd)
{
    int i = r->pipe.first_op[s], j = r->pipe.first_op[s + 1], M = r->pipe.microbatches;
    double vert = 0.0, f = 0.0;
    for (int v = i; v < j; v++) {
        const sb_op *op = &sub->ops[v - i];
        const int *c = r->cfg + (size_t)v * SB_MAX_DIMS;
        double wg = sb_weight_grad_cost(sub, op, c, cp) / M;
        double rc = r->stage_recompute[s] ? sb_recompute_cost(sub, op, c, cp) : 0.0;
        double passes = r->op_cost[v] - wg - rc;
        f += passes > 0 ? passes / 3.0 : 0.0;
        vert += r->op_cost[v];
    }
    double between = r->stage_time[s] - vert; /* relayouts and the send onwards */
    f += between > 0 ? between / 2.0 : 0.0;
    *fwd = fmin(f, r->stage_time[s]);
    *bwd = r->stage_time[s] - *fwd;
}

int sb_stage_details(const sb_model *m, const sb_cost_params *cp, const sb_pipe_opts *o,
                     const sb_pipe_result *r, sb_stage_detail *out, sb_error *err)
{
    const sb_pipeline *pl = &r->pipe;
    sb_model mb;
    if (sb_model_microbatch(m, pl->microbatches, &mb, err))
        return -1;
    int rc = 0;
    for (int s = 0; s < pl->nstages && !rc; s++) {
        sb_stage_detail *d = &out[s];
        memset(d, 0, sizeof *d);
        d->stage = s;
        d->devices = pl->devices[s];
        d->first_op = pl->first_op[s];
        d->last_op = pl->first_op[s + 1] - 1;
        double f, b;
        sb_model sub;
        if ((rc = sb_pipe_stage_model(&mb, d->first_op, pl->first_op[s + 1], &sub, err)))
            break;
        stage_split(&sub, cp, r, s, &f, &b);
        d->forward_seconds = f / (cp->tflops * 1e12);
        d->backward_seconds = b / (cp->tflops * 1e12);
        rc = stage_mem_parts(&sub, r, o, cp->precision, s, d, err);
        free(sub.ops), free(sub.tensors);
    }
    sb_model_free(&mb);
    return rc;
}

static json_t *details_json(const sb_model *m, const sb_cost_params *cp, const sb_pipe_opts *o,
                            const sb_pipe_result *r, sb_error *err)
{
    int S = r->pipe.nstages;
    sb_stage_detail *d = calloc((size_t)S, sizeof *d);
    json_t *a = json_array();
    if (!d || !a) {
        free(d), json_decref(a);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        return NULL;
    }
    if (sb_stage_details(m, cp, o, r, d, err)) {
        free(d), json_decref(a);
        return NULL;
    }
    for (int s = 0; s < S; s++) {
        json_t *mem = json_pack("{s:f, s:f, s:f, s:f, s:f}", "weights", d[s].weights, "gradients",
                                d[s].gradients, "optimizer", d[s].optimizer, "activations",
                                d[s].activations, "buffers", d[s].buffers);
        json_t *x = json_pack("{s:i, s:i, s:s, s:s, s:f, s:f, s:o}", "stage", s, "devices",
                              d[s].devices, "first_op", m->ops[d[s].first_op].name, "last_op",
                              m->ops[d[s].last_op].name, "forward_seconds", d[s].forward_seconds,
                              "backward_seconds", d[s].backward_seconds, "memory_bytes", mem);
        if (!x || json_array_append_new(a, x)) {
            free(d), json_decref(a);
            sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            return NULL;
        }
    }
    free(d);
    return a;
}

char *sb_stage_details_json_str(const sb_model *m, const sb_cost_params *cp,
                                const sb_pipe_opts *o, const sb_pipe_result *r, sb_error *err)
{
    json_t *a = details_json(m, cp, o, r, err);
    char *out = a ? json_dumps(a, JSON_COMPACT) : NULL;
    if (a && !out)
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    json_decref(a);
    return out;
}
