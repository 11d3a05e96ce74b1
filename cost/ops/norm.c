/* ops/norm.c: the search stage's facts of normalisation: layer norm over
 * `axis`, RMS norm over `axis`, and batch norm (the cost model treats it as norm over axis 0, as
 * the prototype does; memory follows the runtime's per-channel statistics). */
#include "../kinds.h"
#include "shardbench/precision.h"

/* The terms both norms share: `passes` passes over the per-device
 * elements e, `row_ars` all-reduces of the row statistics (e / D'_a values)
 * over the splits of the axis and `gamma_ars` of the scale (and shift)
 * gradients (D'_a values) over the other splits. */
static double norm_terms(const sb_op *op, const int *c, const sb_cost_params *cp, double passes,
                         double row_ars, double gamma_ars)
{
    int a = op->axis;
    double e = sb_per_device_elems(op, c);
    double da = (double)op->dims[a].size / c[a];
    uint32_t all = op->ndims >= 32 ? ~0u : (1u << op->ndims) - 1u;
    sb_coll_group rows = sb_op_group(cp, op, c, 1u << a);
    sb_coll_group others = sb_op_group(cp, op, c, all & ~(1u << a));
    if (cp->wgrad_free) /* the scale (and shift) gradients' reductions left out */
        gamma_ars = 0.0;
    /* GPU: x read, y written; x and dy read, dx written (docs/gpu-op-model.md);
     * under fp8 a norm fused into the linears that read it writes their fp8
     * copy of y, one byte, in place of y (sb_op.fp8_out) */
    double fwd = op->fp8_out && cp->precision == SB_PREC_FP8 ? 1.0 + 1.0 / cp->word_bytes : 2.0;
    return sb_elem_cost(cp, e, passes, fwd, 4.0) + row_ars * sb_coll_allreduce(cp, e / da, rows)
           + gamma_ars * sb_coll_allreduce(cp, da, others);
}

/* 16 passes over the elements, and the all-reduces of the statistics: over
 * the splits of the axis (the row statistics) and over the other splits
 * (the scale and shift gradients), forward and backward. */
static double cost_norm(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    return norm_terms(op, c, cp, 2 * 8.0, 4.0, 4.0);
}

/* Saved: mean and inverse deviation per row (layer norm) or per channel
 * (batch norm). */
static void memory_norm(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    if (op->batchnorm) {
        e->saved = 2.0 * sb_per_dev(op, c, 1);
    } else {
        double rows = 1.0;
        for (int i = 0; i < op->ndims; i++)
            if (i != op->axis)
                rows *= sb_per_dev(op, c, i);
        e->saved = 2.0 * rows;
    }
    e->scratch = e->outs;
}

const sb_kind_search sb_search_norm = {.cost = cost_norm, .memory = memory_norm};

/* 12 passes over the elements (forward: squares, scale; backward: the
 * row statistic, the input gradient, the gamma gradient), the all-reduces
 * of the row statistic (sum of squares forward, sum of dy*gamma*x backward)
 * over the splits of the axis, and of the gamma gradient over the other
 * splits. */
static double cost_rmsnorm(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    return norm_terms(op, c, cp, 2 * 6.0, 2.0, 1.0);
}

/* Saved: the inverse RMS per row; scratch: the axis-last copies (an
 * output's worth), as norm. */
static void memory_rmsnorm(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    double rows = 1.0;
    for (int i = 0; i < op->ndims; i++)
        if (i != op->axis)
            rows *= sb_per_dev(op, c, i);
    e->saved = rows;
    e->scratch = e->outs;
}

const sb_kind_search sb_search_rmsnorm = {.cost = cost_rmsnorm, .memory = memory_rmsnorm};
