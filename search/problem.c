/* problem.c: a search problem = a model, a device count, every op's configs
 * with their vertex costs, and the edge list. Also the cost F(G, phi) of a
 * whole strategy, computed straight from the cost model (the check every
 * search result is held to). */
#include "shardbench/search.h"
#include "dp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sb_problem_free(sb_problem *pb)
{
    if (!pb)
        return;
    if (pb->cfg)
        for (int i = 0; i < pb->m->nops; i++) {
            free(pb->cfg[i].c);
            free(pb->cfg[i].cost);
        }
    free(pb->cfg);
    free(pb->edges);
    pb->cfg = NULL;
    pb->edges = NULL;
}

/* sb_problem_build, each op's cost less wg_scale times the weight-gradient
 * reduction it holds when wg_scale > 0 (the GPU op model only: both from
 * one sb_op_cost_split, the values sb_op_cost and sb_op_wgrad_cost give
 * apart, at half the pricing; dp.h) */
int sb_problem_build_wg(const sb_model *m, int p, const sb_cost_params *cp, double wg_scale,
                        sb_problem *out, sb_error *err)
{
    return sb_problem_build_memo(m, p, cp, wg_scale, NULL, out, err);
}

int sb_problem_build_memo(const sb_model *m, int p, const sb_cost_params *cp, double wg_scale,
                          const sb_price_memo *memo, sb_problem *out, sb_error *err)
{
    memset(out, 0, sizeof *out);
    out->m = m;
    out->p = p;
    out->cp = *cp;
    out->cp.devices = p;
    if (p < 1 || p > SB_MAX_DEVICES)
        return sb_fail(err, SB_EXIT_INPUT, "device count p=%d out of range (1..%d)", p,
                       SB_MAX_DEVICES);
    if (!(cp->tflops > 0) || !(cp->gbs > 0))
        return sb_fail(err, SB_EXIT_INPUT, "--flops and --bw must be positive (got %g, %g)",
                       cp->tflops, cp->gbs);
    if (!(cp->word_bytes > 0) || !(cp->elem_ratio > 0) || !(cp->latency_us >= 0)
        || !(cp->conv_ratio > 0))
        return sb_fail(err, SB_EXIT_INPUT,
                       "cost parameters: word_bytes %g, elem_ratio %g and conv_ratio %g must be "
                       "positive and latency_us %g not negative (sb_cost_params_default sets the "
                       "reference)", cp->word_bytes, cp->elem_ratio, cp->conv_ratio, cp->latency_us);
    int cutoff = cp->cutoff > 0 ? cp->cutoff : m->cutoff;
    out->cp.cutoff = cutoff;
    out->cfg = sb_calloc((size_t)m->nops, sizeof *out->cfg, err);
    if (!out->cfg)
        return -1;
    for (int i = 0; i < m->nops; i++) {
        sb_configs *cf = &out->cfg[i];
        if (memo) {
            int got = memo->get(memo->ctx, i, cf, err);
            if (got < 0)
                goto fail;
            if (got)
                continue;
        }
        if (sb_enumerate_configs(&m->ops[i], p, cutoff, cf, err))
            goto fail;
        cf->cost = sb_malloc((size_t)cf->n * sizeof *cf->cost, err);
        if (!cf->cost)
            goto fail;
        for (int k = 0; k < cf->n; k++) {
            const int *c = cf->c + (size_t)k * (size_t)cf->ndims;
            double wg = 0.0;
            cf->cost[k] = wg_scale > 0 ? sb_op_cost_split(m, &m->ops[i], c, &out->cp, &wg)
                                       : sb_op_cost(m, &m->ops[i], c, &out->cp);
            if (!isfinite(cf->cost[k])) {
                sb_fail(err, SB_EXIT_INPUT, "%s: the cost of op '%s' under config %d is not a "
                        "finite number: the cost parameters (%s) are out of range for this model",
                        m->name, m->ops[i].name, k,
                        cp->calibration[0] ? cp->calibration : "--flops, --bw");
                goto fail;
            }
            if (wg_scale > 0)
                cf->cost[k] -= wg_scale * wg; /* pipe_stage_problem: 1/M of it a micro-batch */
        }
        if (memo && memo->priced(memo->ctx, i, cf, &out->cp, err))
            goto fail;
    }
    if (sb_model_edges(m, &out->edges, &out->nedges, err))
        goto fail;
    return 0;
fail:
    sb_problem_free(out);
    return -1;
}

int sb_problem_build(const sb_model *m, int p, const sb_cost_params *cp, sb_problem *out,
                     sb_error *err)
{
    return sb_problem_build_wg(m, p, cp, 0.0, out, err);
}

/* Layout of the tensor on edge e under producer config a and consumer config b. */
static void edge_layouts(const sb_problem *pb, const sb_edge *e, int a, int b, int *ls, int *ld)
{
    const sb_model *m = pb->m;
    const sb_op *src = &m->ops[e->src], *dst = &m->ops[e->dst];
    const sb_tensor *t = &m->tensors[e->tensor];
    sb_operand_layout(src, &src->out[e->src_slot], t->ndims,
                      pb->cfg[e->src].c + (size_t)a * (size_t)src->ndims, ls);
    sb_operand_layout(dst, &dst->in[e->dst_slot], t->ndims,
                      pb->cfg[e->dst].c + (size_t)b * (size_t)dst->ndims, ld);
}

double sb_strategy_cost(const sb_problem *pb, const int *choice)
{
    double total = 0.0;
    for (int i = 0; i < pb->m->nops; i++)
        total += pb->cfg[i].cost[choice[i]];
    for (int k = 0; k < pb->nedges; k++) {
        const sb_edge *e = &pb->edges[k];
        int ls[SB_MAX_DIMS], ld[SB_MAX_DIMS];
        edge_layouts(pb, e, choice[e->src], choice[e->dst], ls, ld);
        total += sb_edge_cost(&pb->cp, &pb->m->tensors[e->tensor], ls, ld);
    }
    return total;
}
