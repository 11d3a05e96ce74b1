/* terms.c: the terms of the reference cost and memory models that every op
 * kind shares (search/kinds.h): words as FLOP, latencies, exchanges,
 * all-reduces, GEMMs, per-device extents, operand layouts and the operand
 * part of an op's memory. It calls nothing else in search/: the kinds'
 * entries (search/ops/) call it, and cost.c and memory.c call the kinds
 * through their table, so the files depend one way. */
#include "kinds.h"

#include <math.h>
#include <string.h>

/* The link a collective over q devices (or an exchange, q = 0: the
 * problem's p) uses: the inter-node one when a machine file gave two and
 * the group does not fit one node (docs/machines.md), else the only one. */
static int inter_node(const sb_cost_params *cp, double q)
{
    if (cp->node_devices <= 0)
        return 0;
    if (q <= 0)
        q = cp->devices;
    return q > cp->node_devices;
}

/* FLOP per word moved: peak (GFLOP/s) over bandwidth (GWords/s). */
static double flops_per_word(const sb_cost_params *cp, double gbs)
{
    return (cp->tflops * 1000.0) / (gbs / cp->word_bytes);
}

double sb_words_to_flops(const sb_cost_params *cp, double words)
{
    return flops_per_word(cp, cp->gbs) * words;
}

/* FLOP that `steps` message latencies cost (0 in the reference model). */
static double latency_flops(const sb_cost_params *cp, double lat_us, double steps)
{
    return lat_us > 0 ? steps * lat_us * cp->tflops * 1e6 : 0.0;
}

double sb_exchange_cost(const sb_cost_params *cp, double words)
{
    int x = inter_node(cp, 0);
    double c = flops_per_word(cp, x ? cp->gbs_inter : cp->gbs) * words;
    return words > 0 ? c + latency_flops(cp, x ? cp->latency_inter_us : cp->latency_us, 1.0) : c;
}

double sb_allreduce_cost(const sb_cost_params *cp, double words, double q)
{
    int x = inter_node(cp, q);
    double chunks = words / q;
    double steps = 2.0 * (q - 1.0);
    double c = flops_per_word(cp, x ? cp->gbs_inter : cp->gbs) * (chunks * steps);
    return steps > 0 ? c + latency_flops(cp, x ? cp->latency_inter_us : cp->latency_us, steps) : c;
}

/* ---- GEMMs and extents ------------------------------------------------------ */

double sb_gemm_cost(const sb_cost_params *cp, double batch, double m, double n, double k,
                    double cm, double cn, double ck, int pw, double mac_ratio)
{
    double comp = m * n * k * 3.0 * mac_ratio;
    if (pw > 0)
        comp += (3.0 * pw) * (m * n) * cp->elem_ratio;
    double comm = sb_allreduce_cost(cp, m * n, ck);
    comm += sb_allreduce_cost(cp, m * k, cn);
    comm += sb_allreduce_cost(cp, n * k, cm);
    return batch * (comp + comm);
}

double sb_per_dev(const sb_op *op, const int *c, int d) { return (double)op->dims[d].size / c[d]; }

double sb_per_device_elems(const sb_op *op, const int *c)
{
    double e = 1.0;
    for (int i = 0; i < op->ndims; i++)
        e *= (double)op->dims[i].size / c[i];
    return e;
}

double sb_area_needed(const double *src, const double *tgt, int n, double qs, double qt)
{
    double area = 1.0, inter = 1.0;
    for (int i = 0; i < n; i++)
        area *= tgt[i];
    if (qt > qs)
        inter = 0.0;
    else
        for (int i = 0; i < n; i++)
            inter *= fmin(tgt[i], src[i]);
    double w = area - inter;
    return w > 0 ? w : 0.0;
}

/* ---- operands ---------------------------------------------------------------- */

void sb_operand_layout(const sb_op *op, const sb_operand *o, int tensor_ndims, const int *c,
                       int *layout)
{
    for (int j = 0; j < tensor_ndims; j++) {
        int mp = o->map[j];
        if (mp >= 0) {
            layout[j] = c[mp];
        } else if (mp == SB_MAP_ALL) {
            int q = 1;
            for (int i = 0; i < op->ndims; i++)
                q *= c[i];
            layout[j] = q;
        } else {
            layout[j] = 1;
        }
    }
}

double sb_operand_elems(const sb_model *m, const sb_op *op, const sb_operand *o, const int *c)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    int lay[SB_MAX_DIMS];
    sb_operand_layout(op, o, t->ndims, c, lay);
    double e = 1.0;
    for (int j = 0; j < t->ndims; j++)
        e *= (double)t->dims[j].size / lay[j];
    return e;
}

void sb_mem_operands(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    memset(e, 0, sizeof *e);
    for (int w = 0; w < op->nweights; w++) {
        const sb_weight *wt = &op->weights[w];
        double n = 1.0;
        for (int j = 0; j < wt->ndims; j++)
            n *= wt->map[j] >= 0 ? sb_per_dev(op, c, wt->map[j]) : (double)wt->size[j];
        e->weights += n;
    }
    for (int k = 0; k < op->nin; k++) {
        double n = sb_operand_elems(m, op, &op->in[k], c);
        if (m->tensors[op->in[k].tensor].kind == SB_TENSOR_WEIGHT) {
            e->weights += n;
            if (n > e->wmax)
                e->wmax = n;
        } else {
            e->in += n;
        }
    }
    for (int k = 0; k < op->nout; k++)
        e->outs += sb_operand_elems(m, op, &op->out[k], c);
}


/* ---- ZeRO: weights and their replicas --------------------------------------------- */

/* The product of c over the dims of op not in `mapped` (a bit per dim). */
static double replicas(const sb_op *op, const int *c, uint32_t mapped)
{
    double q = 1.0;
    for (int i = 0; i < op->ndims; i++)
        if (!(mapped & (1u << i)))
            q *= c[i];
    return q;
}

int sb_weight_replicas(const sb_model *m, const sb_op *op, const int *c, double *elems,
                       double *q, int max)
{
    int n = 0;
    int bn = op->kind == SB_OP_NORM && op->batchnorm; /* no gradient sum (runtime) */
    for (int w = 0; w < op->nweights && n < max; w++, n++) {
        const sb_weight *wt = &op->weights[w];
        uint32_t mapped = 0;
        elems[n] = 1.0;
        for (int j = 0; j < wt->ndims; j++) {
            elems[n] *= wt->map[j] >= 0 ? sb_per_dev(op, c, wt->map[j]) : (double)wt->size[j];
            if (wt->map[j] >= 0)
                mapped |= 1u << wt->map[j];
        }
        q[n] = bn ? 1.0 : replicas(op, c, mapped);
    }
    for (int k = 0; k < op->nin && n < max; k++) {
        const sb_operand *o = &op->in[k];
        const sb_tensor *t = &m->tensors[o->tensor];
        if (t->kind != SB_TENSOR_WEIGHT)
            continue;
        uint32_t mapped = 0;
        for (int j = 0; j < t->ndims; j++)
            mapped |= o->map[j] >= 0 ? 1u << o->map[j] : o->map[j] == SB_MAP_ALL ? ~0u : 0u;
        elems[n] = sb_operand_elems(m, op, o, c);
        q[n] = bn ? 1.0 : replicas(op, c, mapped);
        n++;
    }
    return n;
}

double sb_zero_cost(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    if (cp->zero < 3)
        return 0.0;
    double e[SB_MAX_OP_WEIGHTS + SB_MAX_IO], q[SB_MAX_OP_WEIGHTS + SB_MAX_IO];
    int n = sb_weight_replicas(m, op, c, e, q, SB_MAX_OP_WEIGHTS + SB_MAX_IO);
    double cost = 0.0;
    for (int w = 0; w < n; w++)
        cost += 0.5 * sb_allreduce_cost(cp, e[w], q[w]);
    return cost;
}
