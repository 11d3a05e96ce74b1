/* cost.c: config enumeration and the reference cost model of the PaSE paper
 * and prototype, exactly as ../shared/docs/cost-model.md states it. Costs are
 * FLOP in double precision, computed in the prototype's order of operations
 * so that totals agree to the last printed digit. Not the search. */
#include "shardbench/search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sb_cost_params_default(sb_cost_params *cp)
{
    memset(cp, 0, sizeof *cp);
    cp->tflops = 10.0;
    cp->gbs = 16.0;
    cp->cutoff = 0;
    cp->word_bytes = 8.0;
    cp->elem_ratio = 1.0;
    cp->latency_us = 0.0;
    cp->conv_ratio = 1.0;
}

/* FLOP per word moved: peak (GFLOP/s) over bandwidth (GWords/s). */
static double flops_per_word(const sb_cost_params *cp)
{
    return (cp->tflops * 1000.0) / (cp->gbs / cp->word_bytes);
}

double sb_words_to_flops(const sb_cost_params *cp, double words)
{
    return flops_per_word(cp) * words;
}

/* FLOP that `steps` message latencies cost (0 in the reference model). */
static double latency_flops(const sb_cost_params *cp, double steps)
{
    return cp->latency_us > 0 ? steps * cp->latency_us * cp->tflops * 1e6 : 0.0;
}

/* A point-to-point exchange of `words`: bandwidth, plus one latency when
 * anything moves. */
static double exchange_cost(const sb_cost_params *cp, double words)
{
    double c = sb_words_to_flops(cp, words);
    return words > 0 ? c + latency_flops(cp, 1.0) : c;
}

double sb_allreduce_cost(const sb_cost_params *cp, double words, double q)
{
    double chunks = words / q;
    double steps = 2.0 * (q - 1.0);
    double c = sb_words_to_flops(cp, chunks * steps);
    return steps > 0 ? c + latency_flops(cp, steps) : c;
}

/* ---- configs --------------------------------------------------------------- */

enum { MAXC = 1024 };
static _Thread_local int choice[SB_MAX_DIMS][MAXC];

/* Split counts allowed for one dim: divisors e of d with d/e >= cutoff. */
static int dim_choices(int64_t d, int cutoff, int p, int *out, int max)
{
    int n = 0;
    for (int64_t e = 1; e <= d && e <= p; e++)
        if (d % e == 0 && d / e >= cutoff) {
            if (n == max)
                return -1;
            out[n++] = (int)e;
        }
    if (n == 0)
        out[n++] = 1;
    return n;
}

static int is_contiguous(const sb_op *op, const int *c)
{
    int i = 0;
    while (i < op->ndims && op->dims[i].size == c[i])
        i++;
    for (i++; i < op->ndims; i++)
        if (c[i] != 1)
            return 0;
    return 1;
}

typedef struct {
    const sb_op *op;
    int p, nd;
    const int *nch;
    int c[SB_MAX_DIMS];
    int *rows;
    int n, cap;
    sb_error *err;
} enum_state;

/* Depth-first over dims (first dim slowest); choices ascend, so a product
 * over p ends the level. */
static int enum_rec(enum_state *st, int level, int64_t prod)
{
    if (level == st->nd) {
        if ((st->op->kind == SB_OP_FLATTEN || st->op->kind == SB_OP_UNFLATTEN)
            && !is_contiguous(st->op, st->c))
            return 0;
        if (st->n > 65535)
            return sb_fail(st->err, SB_EXIT_INPUT, "op '%s' has more than 65535 configs at p=%d",
                           st->op->name, st->p);
        if (st->n == st->cap) {
            st->cap = st->cap ? st->cap * 2 : 64;
            int *nr = sb_realloc(st->rows, (size_t)st->cap * (size_t)(st->nd ? st->nd : 1) * sizeof *nr, st->err);
            if (!nr)
                return -1;
            st->rows = nr;
        }
        memcpy(st->rows + (size_t)st->n * (size_t)st->nd, st->c, (size_t)st->nd * sizeof(int));
        st->n++;
        return 0;
    }
    for (int k = 0; k < st->nch[level]; k++) {
        int e = choice[level][k];
        if (prod * e > st->p)
            break;
        st->c[level] = e;
        if (enum_rec(st, level + 1, prod * e))
            return -1;
    }
    return 0;
}

int sb_enumerate_configs(const sb_op *op, int p, int cutoff, sb_configs *out, sb_error *err)
{
    int nch[SB_MAX_DIMS];
    int nd = op->ndims;
    memset(out, 0, sizeof *out);
    out->ndims = nd;
    for (int i = 0; i < nd; i++) {
        if (op->nosplit & (1u << i)) {
            choice[i][0] = 1;
            nch[i] = 1;
        } else {
            nch[i] = dim_choices(op->dims[i].size, cutoff, p, choice[i], MAXC);
            if (nch[i] < 0)
                return sb_fail(err, SB_EXIT_INPUT, "op '%s': dim '%s' has more than %d split choices at p=%d",
                               op->name, op->dims[i].name, MAXC, p);
        }
    }
    enum_state st = {.op = op, .p = p, .nd = nd, .nch = nch, .err = err};
    if (enum_rec(&st, 0, 1)) {
        free(st.rows);
        return -1;
    }
    int n = st.n;
    int *rows = st.rows;
    if (n > 65535) {
        free(rows);
        return sb_fail(err, SB_EXIT_INPUT, "op '%s' has %d configs at p=%d (at most 65535)",
                       op->name, n, p);
    }
    out->n = n;
    out->c = rows;
    out->cost = NULL;
    return 0;
}

/* ---- vertex costs ---------------------------------------------------------- */

static double gemm_cost(const sb_cost_params *cp, double batch, double m, double n, double k,
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

/* Elements of an op's domain per device, in dim order. */
static double per_device_elems(const sb_op *op, const int *c)
{
    double e = 1.0;
    for (int i = 0; i < op->ndims; i++)
        e *= (double)op->dims[i].size / c[i];
    return e;
}

static double cost_gemm_like(const sb_op *op, const int *c, const sb_cost_params *cp)
{
    double batch = 1.0;
    double dm = 1, dn = 1, dk = 1, cm = 1, cn = 1, ck = 1;
    for (int i = 0; i < op->ndims; i++) {
        double d = (double)op->dims[i].size;
        switch (op->role[i]) {
        case SB_ROLE_BATCH: batch *= d / c[i]; break;
        case SB_ROLE_M: dm *= d; cm *= c[i]; break;
        case SB_ROLE_N: dn *= d; cn *= c[i]; break;
        case SB_ROLE_K: dk *= d; ck *= c[i]; break;
        default: break;
        }
    }
    return gemm_cost(cp, batch, dm / cm, dn / cn, dk / ck, cm, cn, ck, op->pw,
                     op->kind == SB_OP_CONV ? cp->conv_ratio : 1.0);
}

/* Words a device must receive to turn a block `src` (on qs devices) into a
 * block `tgt` (on qt devices), both of rank n. */
static double area_needed(const double *src, const double *tgt, int n, double qs, double qt)
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

static double cost_lstm(const sb_op *op, const int *c, const sb_cost_params *cp)
{
    /* dims: 0 layers, 1 seq, 2 batch, 3 n = units, 4 k = units */
    double L = (double)op->dims[0].size, S = (double)op->dims[1].size;
    double B = (double)op->dims[2].size, N = (double)op->dims[3].size, K = (double)op->dims[4].size;
    double cost = gemm_cost(cp, L / c[0], (S * B) / ((double)c[1] * c[2]), (4.0 * N) / c[3],
                            (2.0 * K) / c[4], (double)c[1] * c[2], c[3], c[4], 3, 1.0);
    double src[2] = {B / c[2], N / c[3]}, tgt[2] = {B / c[2], K / c[4]};
    double words = area_needed(src, tgt, 2, (double)c[2] * c[3], (double)c[2] * c[4]);
    return cost + (L * S) * exchange_cost(cp, words);
}

static double cost_pool(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    double cost = per_device_elems(op, c) * cp->elem_ratio;
    const sb_tensor *in = &m->tensors[op->in[0].tensor];
    double b = (double)in->dims[0].size / c[0], ch = (double)in->dims[1].size / c[1];
    double h = (double)in->dims[2].size / c[2], w = (double)in->dims[3].size / c[3];
    double hg = h + (c[2] > 1 ? op->kernel[0] : 0), wg = w + (c[3] > 1 ? op->kernel[1] : 0);
    double ghost = hg * wg - h * w;
    ghost *= b;
    ghost *= ch;
    return cost + exchange_cost(cp, ghost);
}

static double cost_norm(const sb_op *op, const int *c, const sb_cost_params *cp)
{
    int a = op->axis;
    double e = per_device_elems(op, c);
    double da = (double)op->dims[a].size / c[a];
    double others = 1.0;
    for (int i = 0; i < op->ndims; i++)
        if (i != a)
            others *= c[i];
    double cost = (2 * 8.0) * e * cp->elem_ratio;
    cost += 4.0 * sb_allreduce_cost(cp, e / da, c[a]);
    cost += 4.0 * sb_allreduce_cost(cp, da, others);
    return cost;
}

static double cost_softmax(const sb_op *op, const int *c, const sb_cost_params *cp)
{
    int a = op->axis;
    double e = per_device_elems(op, c);
    double rows = 1.0;
    for (int i = 0; i < op->ndims; i++)
        if (i != a)
            rows *= (double)op->dims[i].size / c[i];
    double cost = 0.0;
    cost += (3.0 + 1) * e * cp->elem_ratio;
    cost += e * (double)op->dims[a].size * cp->elem_ratio;
    cost += sb_allreduce_cost(cp, rows, c[a]);
    cost += sb_allreduce_cost(cp, rows * (double)op->dims[a].size, c[a]);
    cost += sb_allreduce_cost(cp, rows, c[a]);
    return cost;
}

static double cost_softmax_xent(const sb_op *op, const int *c, const sb_cost_params *cp)
{
    int last = op->ndims - 1;
    double e = per_device_elems(op, c);
    double batch = 1.0;
    for (int i = 0; i < last; i++)
        batch *= (double)op->dims[i].size / c[i];
    double cost = (3.0 + 1) * e * cp->elem_ratio;
    cost += batch * cp->elem_ratio;
    cost += batch * cp->elem_ratio;
    if (c[last] > 1)
        cost += exchange_cost(cp, 2.0 * batch);
    return cost;
}

static double cost_reduce_mean(const sb_op *op, const int *c, const sb_cost_params *cp)
{
    double q = 1.0;
    for (int i = 0; i < op->ndims; i++)
        if (op->axes & (1u << i))
            q *= c[i];
    return sb_allreduce_cost(cp, per_device_elems(op, c), q);
}

double sb_op_cost(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    switch (op->kind) {
    case SB_OP_CONV:
    case SB_OP_DENSE:
    case SB_OP_EINSUM:
    case SB_OP_EMBEDDING: return cost_gemm_like(op, c, cp);
    case SB_OP_LSTM: return cost_lstm(op, c, cp);
    case SB_OP_POOL: return cost_pool(m, op, c, cp);
    case SB_OP_NORM: return cost_norm(op, c, cp);
    case SB_OP_SOFTMAX: return cost_softmax(op, c, cp);
    case SB_OP_SOFTMAX_XENT: return cost_softmax_xent(op, c, cp);
    case SB_OP_ELEMENTWISE: return (1.0 + op->pw) * per_device_elems(op, c) * cp->elem_ratio;
    case SB_OP_REDUCE_MEAN: return cost_reduce_mean(op, c, cp);
    default: return 0.0; /* concat, split, stack, unstack, reshape, transpose */
    }
}

/* ---- edges ----------------------------------------------------------------- */

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

double sb_edge_cost(const sb_cost_params *cp, const sb_tensor *t, const int *src_layout,
                    const int *dst_layout)
{
    double s[SB_MAX_DIMS], d[SB_MAX_DIMS], qs = 1.0, qd = 1.0;
    for (int i = 0; i < t->ndims; i++) {
        s[i] = (double)t->dims[i].size / src_layout[i];
        d[i] = (double)t->dims[i].size / dst_layout[i];
        qs *= src_layout[i];
        qd *= dst_layout[i];
    }
    return exchange_cost(cp, area_needed(s, d, t->ndims, qs, qd) * 2.0);
}
