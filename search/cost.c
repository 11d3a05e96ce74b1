/* cost.c: config enumeration and the reference cost model of the PaSE paper
 * and prototype (docs/cost-model.md): the terms the kinds share, the vertex
 * cost through the per-kind table (search/kinds.h, search/ops/) and the edge
 * cost. Costs are FLOP in double precision, computed in the prototype's
 * order of operations so that totals agree to the last printed digit. Not
 * the search. */
#include "kinds.h"

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

double sb_exchange_cost(const sb_cost_params *cp, double words)
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
        const sb_kind_search *ks = sb_kind_search_table[st->op->kind];
        if (ks->config_ok && !ks->config_ok(st->op, st->c))
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

double sb_op_cost(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    return sb_kind_search_table[op->kind]->cost(m, op, c, cp);
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
    return sb_exchange_cost(cp, sb_area_needed(s, d, t->ndims, qs, qd) * 2.0);
}
