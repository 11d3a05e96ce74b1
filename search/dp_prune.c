/* dp_prune.c: exact removal of dominated configs before the DP (dp.c).
 *
 * Config y of op v dominates config x of v when, for every config of every
 * neighbour, a strategy with y costs no more than the same strategy with x:
 *
 *   cost_v(y) + sum over edges e of v of  max_n (E_e(y, n) - E_e(x, n))  <= cost_v(x)
 *
 * where n runs over the layouts the neighbour's configs give the edge's
 * tensor and E_e is the edge cost (per edge, so an upper bound of the true
 * difference when several edges join the same pair: still sound). A
 * dominated config can be replaced by its dominator in any strategy
 * without raising the cost, so dropping it keeps the optimum exactly.
 *
 * The check is greedy over configs in (cost, index) order against the
 * configs kept so far; every dropped config has a kept dominator, and the
 * relation is transitive, so what stays still contains an optimum. Two
 * cases:
 *   - same layouts on every edge (every max is exactly 0): dropped when
 *     cost_v(y) <= cost_v(x). The DP breaks ties by the lowest index, and so
 *     does this order, so the DP picks the same config as without pruning;
 *   - otherwise only a strict win by a relative margin of 1e-12 (so that
 *     rounding never turns a tie into a drop).
 * Kept configs stay in their original order (the DP's tie-break). Edges whose
 * max table would be large (over MAX_TRIPLES layout triples) use the bound
 * max_n E(a, n) - min_n E(b, n) instead (sound, weaker). */
#include "dp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MARGIN 1e-12

/* One edge of v seen from v: layout id of v's operand per config of v, and
 * md[a * nl + b] = max over the neighbour's layouts of E(a, n) - E(b, n). */
/* pair bounds md only where nl * nl * (neighbour's layouts) is at most this;
 * beyond, the cheaper hi - lo bound (measured: the full table costs more than
 * it saves on the transformer at p = 64) */
#define MAX_TRIPLES 1e6

typedef struct {
    int *ids; /* per config of v */
    int nl;
    double *md; /* nl * nl, or NULL: the bound hi[a] - lo[b] instead */
    double *hi, *lo; /* nl: max and min over the neighbour's layouts of E(a, n) */
} edge_view;

static int build_view(const sb_problem *pb, int v, const sb_edge *e, edge_view *ev, sb_error *err)
{
    const sb_model *m = pb->m;
    const sb_tensor *ten = &m->tensors[e->tensor];
    int nd = ten->ndims, u = e->src == v ? e->dst : e->src, v_src = e->src == v;
    const sb_operand *ov = v_src ? &m->ops[v].out[e->src_slot] : &m->ops[v].in[e->dst_slot];
    const sb_operand *ou = v_src ? &m->ops[u].in[e->dst_slot] : &m->ops[u].out[e->src_slot];
    int *ids_u = sb_malloc((size_t)pb->cfg[u].n * sizeof *ids_u, err);
    int *Lv = NULL, *Lu = NULL, nlu = 0, rc = -1;
    double *M = NULL;
    ev->ids = sb_malloc((size_t)pb->cfg[v].n * sizeof *ev->ids, err);
    ev->md = NULL;
    if (!ids_u || !ev->ids || sb_layout_ids(pb, v, ov, nd, ev->ids, &Lv, &ev->nl, err)
        || sb_layout_ids(pb, u, ou, nd, ids_u, &Lu, &nlu, err))
        goto out;
    int nl = ev->nl;
    /* M: nl x nlu edge costs, v's layout in rows */
    M = sb_malloc((size_t)nl * (size_t)nlu * sizeof *M, err);
    ev->hi = sb_malloc((size_t)nl * sizeof *ev->hi, err);
    ev->lo = sb_malloc((size_t)nl * sizeof *ev->lo, err);
    if (!M || !ev->hi || !ev->lo)
        goto out;
    for (int a = 0; a < nl; a++) {
        ev->hi[a] = -INFINITY;
        ev->lo[a] = INFINITY;
        for (int j = 0; j < nlu; j++) {
            const int *la = Lv + (size_t)a * nd, *lj = Lu + (size_t)j * nd;
            double c = v_src ? sb_edge_cost(&pb->cp, ten, la, lj) : sb_edge_cost(&pb->cp, ten, lj, la);
            M[(size_t)a * nlu + j] = c;
            ev->hi[a] = fmax(ev->hi[a], c);
            ev->lo[a] = fmin(ev->lo[a], c);
        }
    }
    if ((double)nl * nl * nlu > MAX_TRIPLES) {
        rc = 0;
        goto out;
    }
    ev->md = sb_malloc((size_t)nl * (size_t)nl * sizeof *ev->md, err);
    if (!ev->md)
        goto out;
    for (int a = 0; a < nl; a++)
        for (int b = 0; b < nl; b++) {
            const double *ra = M + (size_t)a * nlu, *rb = M + (size_t)b * nlu;
            double mx = -INFINITY;
            for (int j = 0; j < nlu; j++)
                if (ra[j] - rb[j] > mx)
                    mx = ra[j] - rb[j];
            ev->md[(size_t)a * nl + b] = a == b ? 0.0 : mx;
        }
    rc = 0;
out:
    free(ids_u);
    free(Lv);
    free(Lu);
    free(M);
    return rc;
}

static const double *g_sort_cost; /* qsort has no context argument */

static int cmp_by_cost(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    if (g_sort_cost[a] != g_sort_cost[b])
        return g_sort_cost[a] < g_sort_cost[b] ? -1 : 1;
    return a - b;
}

/* Does kept config y dominate x? */
static int dominates(const sb_configs *cf, const edge_view *ev, int ne, int y, int x)
{
    double s = cf->cost[y];
    int same = 1;
    for (int k = 0; k < ne; k++) {
        int a = ev[k].ids[y], b = ev[k].ids[x];
        if (a == b)
            continue;
        same = 0;
        s += ev[k].md ? ev[k].md[(size_t)a * ev[k].nl + b] : ev[k].hi[a] - ev[k].lo[b];
        if (s >= cf->cost[x])
            return 0;
    }
    if (same)
        return s <= cf->cost[x];
    return s < cf->cost[x] - MARGIN * fabs(cf->cost[x]);
}

/* Kept configs of op v, in index order, into keep (cfg[v].n slots). */
static int prune_op(const sb_problem *pb, int v, int *keep, int *nkeep, sb_error *err)
{
    const sb_configs *cf = &pb->cfg[v];
    int ne = 0, rc = -1;
    for (int k = 0; k < pb->nedges; k++)
        if ((pb->edges[k].src == v) != (pb->edges[k].dst == v))
            ne++;
    edge_view *ev = sb_calloc((size_t)(ne ? ne : 1), sizeof *ev, err);
    int *order = sb_malloc((size_t)cf->n * sizeof *order, err);
    char *kept = sb_calloc((size_t)cf->n, 1, err);
    int *klist = sb_malloc((size_t)cf->n * sizeof *klist, err);
    if (!ev || !order || !kept || !klist)
        goto out;
    ne = 0;
    for (int k = 0; k < pb->nedges; k++)
        if ((pb->edges[k].src == v) != (pb->edges[k].dst == v))
            if (build_view(pb, v, &pb->edges[k], &ev[ne++], err))
                goto out;
    for (int x = 0; x < cf->n; x++)
        order[x] = x;
    g_sort_cost = cf->cost;
    qsort(order, (size_t)cf->n, sizeof *order, cmp_by_cost);
    int nk = 0;
    for (int i = 0; i < cf->n; i++) {
        int x = order[i], dom = 0;
        for (int j = 0; j < nk && !dom; j++)
            dom = dominates(cf, ev, ne, klist[j], x);
        if (!dom) {
            klist[nk++] = x;
            kept[x] = 1;
        }
    }
    *nkeep = 0;
    for (int x = 0; x < cf->n; x++)
        if (kept[x])
            keep[(*nkeep)++] = x;
    rc = 0;
out:
    for (int k = 0; ev && k < ne; k++) {
        free(ev[k].ids);
        free(ev[k].md);
        free(ev[k].hi);
        free(ev[k].lo);
    }
    free(ev);
    free(order);
    free(kept);
    free(klist);
    return rc;
}

int sb_prune_dominated(const sb_problem *pb, sb_problem *red, int **keep, sb_error *err)
{
    int n = pb->m->nops;
    *red = *pb;
    red->cfg = sb_calloc((size_t)(n ? n : 1), sizeof *red->cfg, err);
    for (int v = 0; v < n; v++)
        keep[v] = NULL;
    if (!red->cfg)
        return -1;
    for (int v = 0; v < n; v++) {
        const sb_configs *cf = &pb->cfg[v];
        sb_configs *rc = &red->cfg[v];
        int nk = 0;
        keep[v] = sb_malloc((size_t)(cf->n ? cf->n : 1) * sizeof **keep, err);
        if (!keep[v] || prune_op(pb, v, keep[v], &nk, err))
            goto fail;
        rc->n = nk;
        rc->ndims = cf->ndims;
        rc->c = sb_malloc((size_t)(nk ? nk : 1) * (size_t)cf->ndims * sizeof *rc->c, err);
        rc->cost = sb_malloc((size_t)(nk ? nk : 1) * sizeof *rc->cost, err);
        if (!rc->c || !rc->cost)
            goto fail;
        for (int i = 0; i < nk; i++) {
            memcpy(rc->c + (size_t)i * cf->ndims, cf->c + (size_t)keep[v][i] * cf->ndims,
                   (size_t)cf->ndims * sizeof *rc->c);
            rc->cost[i] = cf->cost[keep[v][i]];
        }
    }
    return 0;
fail:
    sb_prune_free(red, keep);
    return -1;
}

void sb_prune_free(sb_problem *red, int **keep)
{
    int n = red->m ? red->m->nops : 0;
    for (int v = 0; v < n; v++) {
        if (red->cfg) {
            free(red->cfg[v].c);
            free(red->cfg[v].cost);
        }
        if (keep) {
            free(keep[v]);
            keep[v] = NULL;
        }
    }
    free(red->cfg);
    red->cfg = NULL;
}
