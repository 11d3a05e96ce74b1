/* breakdown.c: an op-level result's step in the parts of --algo megatron's
 * time_breakdown_seconds (shardbench/breakdown.h). Each op's cost is
 * priced again three ways: as the search priced it (an), without its
 * weight-gradient reductions (nowg: cp.wgrad_free) and without any
 * collective (free: cp.wgrad_free and SB_COLL_FREE): dp_comm = an - nowg,
 * tp_comm = nowg - free, compute what the search's own cost leaves. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/breakdown.h"

const char *const sb_breakdown_names[SB_BD_PARTS] = {"compute", "tp_comm", "dp_comm",
                                                     "pp_comm", "bubble",  "optimizer"};

/* op's cost without its weight-gradient reductions, and without any
 * collective */
static void op_parts(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp,
                     double *nowg, double *free_)
{
    sb_cost_params q = *cp;
    q.wgrad_free = 1;
    *nowg = sb_op_cost(m, op, c, &q);
    q.coll_mode = SB_COLL_FREE;
    *free_ = sb_op_cost(m, op, c, &q);
}

void sb_plain_breakdown(const sb_problem *pb, const sb_result *r, double parts[SB_BD_PARTS])
{
    const sb_model *m = pb->m;
    double vert = 0.0;
    memset(parts, 0, SB_BD_PARTS * sizeof *parts);
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        const int *c = pb->cfg[i].c + (size_t)r->choice[i] * (size_t)op->ndims;
        double a = pb->cfg[i].cost[r->choice[i]], nowg, fr;
        op_parts(m, op, c, &pb->cp, &nowg, &fr);
        double an = sb_op_cost(m, op, c, &pb->cp);
        parts[SB_BD_DP] += fmax(an - nowg, 0.0);
        parts[SB_BD_TP] += fmax(nowg - fr, 0.0);
        vert += a;
    }
    /* the relayouts between ops: the strategy's cost less its vertices */
    parts[SB_BD_TP] += fmax(sb_strategy_cost(pb, r->choice) - vert, 0.0);
    /* compute: what is left (the ops' passes; a recomputed op's forward again) */
    parts[SB_BD_COMPUTE] = r->total_cost - parts[SB_BD_TP] - parts[SB_BD_DP];
}

int sb_pipe_breakdown(const sb_model *m, const sb_cost_params *cp, const sb_pipe_result *r,
                      double parts[SB_BD_PARTS], sb_error *err)
{
    const sb_pipeline *pl = &r->pipe;
    int S = pl->nstages, M = pl->microbatches, b = 0;
    memset(parts, 0, SB_BD_PARTS * sizeof *parts);
    for (int s = 1; s < S; s++)
        if (r->stage_time[s] > r->stage_time[b])
            b = s;
    sb_model mb, sub; /* stage b as its DP priced it (a module the cut divides undone) */
    if (sb_model_microbatch(m, M, &mb, err))
        return -1;
    if (sb_pipe_stage_model(&mb, pl->first_op[b], pl->first_op[b + 1], &sub, err)) {
        sb_model_free(&mb);
        return -1;
    }
    sb_cost_params q = *cp; /* stage b's DP priced its ops so (search/pipe_models.c) */
    q.devices = pl->devices[b];
    q.zero = r->zero;
    q.recompute = r->stage_recompute[b] ? SB_RECOMPUTE_ALL : SB_RECOMPUTE_NONE;
    double vert = 0.0, mbp[SB_BD_PARTS] = {0};
    for (int v = pl->first_op[b]; v < pl->first_op[b + 1]; v++) {
        const sb_op *op = &sub.ops[v - pl->first_op[b]];
        const int *c = r->cfg + (size_t)v * SB_MAX_DIMS;
        double nowg, fr;
        op_parts(&sub, op, c, &q, &nowg, &fr);
        /* op_cost holds 1/M of the step's weight-gradient reduction */
        mbp[SB_BD_DP] += fmax(r->op_cost[v] - nowg, 0.0);
        mbp[SB_BD_TP] += fmax(nowg - fr, 0.0);
        vert += r->op_cost[v];
    }
    free(sub.ops), free(sub.tensors);
    sb_model_free(&mb);
    mbp[SB_BD_PP] = r->stage_p2p[b];
    mbp[SB_BD_TP] += fmax(r->stage_time[b] - vert - r->stage_p2p[b], 0.0); /* relayouts */
    mbp[SB_BD_COMPUTE] = r->stage_time[b] - mbp[SB_BD_TP] - mbp[SB_BD_DP] - mbp[SB_BD_PP];
    for (int k = 0; k < SB_BD_PARTS; k++)
        parts[k] = M * mbp[k];
    /* the slowest stage idle: the other stages' t_s (the fill and the drain) */
    parts[SB_BD_BUBBLE] = r->step_cost - M * r->stage_time[b];
    return 0;
}
