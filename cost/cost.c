/* cost.c: config enumeration and the reference cost model of the PaSE paper
 * and prototype (docs/cost-model.md): the vertex cost through the per-kind
 * table (cost/kinds.h, cost/ops/) and the edge cost; the terms the kinds
 * share are in terms.c. Costs are FLOP in double precision, computed in the prototype's
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

int sb_configs_restricted(const sb_op *op)
{
    return sb_kind_search_table[op->kind]->config_ok != NULL;
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

/* the kind's cost, plus what ZeRO stage 3 adds for every kind's weights
 * and a tied weight's copy its two relayouts a step */
static double op_cost_all(const sb_model *m, const sb_op *op, const int *c,
                          const sb_cost_params *cp)
{
    return sb_kind_search_table[op->kind]->cost(m, op, c, cp) + sb_zero_cost(m, op, c, cp)
           + sb_tied_cost(m, op, c, cp)
           + (cp->recompute == SB_RECOMPUTE_ALL ? sb_recompute_cost(m, op, c, cp) : 0.0);
}

double sb_op_cost_split(const sb_model *m, const sb_op *op, const int *c,
                        const sb_cost_params *cp, double *wgrad)
{
    double all = op_cost_all(m, op, c, cp);
    if (wgrad)
        *wgrad = 0.0;
    if (cp->wgrad_free || !sb_op_trains_weight(m, op))
        return all; /* an op without weights reduces no gradient */
    sb_cost_params q = *cp;
    q.wgrad_free = 1;
    if (!cp->dp_overlap && !wgrad)
        return all;
    double rest = op_cost_all(m, op, c, &q), wg = all - rest;
    if (!cp->dp_overlap || !(wg > 0)) {
        if (wgrad)
            *wgrad = wg;
        return all;
    }
    /* overlapped: the reduction exposed beyond the op's backward compute
     * (its forward, input- and weight-gradient passes: 2/3 of its compute,
     * the collectives left out) */
    q.coll_mode = SB_COLL_FREE;
    double bwd = op_cost_all(m, op, c, &q) * (2.0 / 3.0), exposed = wg > bwd ? wg - bwd : 0.0;
    if (wgrad)
        *wgrad = exposed;
    return rest + exposed;
}

double sb_op_cost(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    return sb_op_cost_split(m, op, c, cp, NULL);
}

double sb_op_wgrad_cost(const sb_model *m, const sb_op *op, const int *c,
                        const sb_cost_params *cp)
{
    double wg;
    sb_op_cost_split(m, op, c, cp, &wg);
    return wg;
}

double sb_recompute_cost(const sb_model *m, const sb_op *op, const int *c,
                         const sb_cost_params *cp)
{
    if (!sb_op_recomputable(op))
        return 0.0;
    return sb_kind_search_table[op->kind]->cost(m, op, c, cp) / 3.0;
}

int sb_recompute_mode_parse(const char *s, int *out, sb_error *err)
{
    if (!strcmp(s, "none"))
        *out = SB_RECOMPUTE_NONE;
    else if (!strcmp(s, "all"))
        *out = SB_RECOMPUTE_ALL;
    else if (!strcmp(s, "auto"))
        *out = SB_RECOMPUTE_AUTO;
    else
        return sb_fail(err, SB_EXIT_INPUT, "--recompute: '%s' is not none, auto or all", s);
    return 0;
}

const char *sb_recompute_mode_name(int mode)
{
    return mode == SB_RECOMPUTE_ALL ? "all" : mode == SB_RECOMPUTE_AUTO ? "auto" : "none";
}

int sb_result_recomputed(const sb_problem *pb, const sb_result *r, int i)
{
    if (r->recompute)
        return r->recompute[i] != 0;
    return pb->cp.recompute == SB_RECOMPUTE_ALL && sb_op_recomputable(&pb->m->ops[i]);
}

/* ---- edges ----------------------------------------------------------------- */

static double edge_words(const sb_tensor *t, const int *src_layout, const int *dst_layout,
                         double *q)
{
    double s[SB_MAX_DIMS], d[SB_MAX_DIMS], qs = 1.0, qd = 1.0;
    for (int i = 0; i < t->ndims; i++) {
        s[i] = (double)t->dims[i].size / src_layout[i];
        d[i] = (double)t->dims[i].size / dst_layout[i];
        qs *= src_layout[i];
        qd *= dst_layout[i];
    }
    *q = qs > qd ? qs : qd;
    return sb_area_needed(s, d, t->ndims, qs, qd) * 2.0;
}

double sb_edge_words(const sb_tensor *t, const int *src_layout, const int *dst_layout)
{
    double q;
    return edge_words(t, src_layout, dst_layout, &q);
}

double sb_edge_local_words(const sb_tensor *t, const int *src_layout, const int *dst_layout)
{
    double s = 1.0, d = 1.0;
    for (int i = 0; i < t->ndims; i++) {
        s *= (double)t->dims[i].size / src_layout[i];
        d *= (double)t->dims[i].size / dst_layout[i];
    }
    return s + d;
}

double sb_edge_cost(const sb_cost_params *cp, const sb_tensor *t, const int *src_layout,
                    const int *dst_layout)
{
    double q, w = edge_words(t, src_layout, dst_layout, &q);
    return sb_coll_relayout(cp, w, q, cp->profiled ? sb_edge_local_words(t, src_layout, dst_layout)
                                                   : 0.0);
}
