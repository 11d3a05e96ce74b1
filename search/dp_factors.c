/* dp_factors.c: the DP's initial tables (dp_engine.h): one per vertex, one
 * per adjacent pair, the pair tables built when first read, over the
 * layouts both ends give their tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dp_engine.h"

/* ---- initial factors: one per vertex, one per adjacent pair ------------- */

/* Appends src to the factor list and to each of its vars' lists. Every
 * allocation comes first: on failure (-1) nothing refers to src, so the
 * caller still owns (and frees) its table. */
int dp_add_factor(engine *E, factor *src)
{
    for (int i = 0; i < src->nv; i++) {
        int v = src->vars[i];
        if (E->nvf[v] == E->capvf[v]) {
            int nc = E->capvf[v] ? E->capvf[v] * 2 : 8;
            int *nl = sb_realloc(E->vf[v], (size_t)nc * sizeof *nl, E->err);
            if (!nl)
                return -1;
            E->vf[v] = nl;
            E->capvf[v] = nc;
        }
    }
    if (E->nf == E->capf) {
        int nc = E->capf ? E->capf * 2 : 256;
        factor *nf = sb_realloc(E->f, (size_t)nc * sizeof *nf, E->err);
        if (!nf)
            return -1;
        E->f = nf;
        E->capf = nc;
    }
    int id = E->nf++;
    E->f[id] = *src;
    E->f[id].alive = 1;
    for (int i = 0; i < src->nv; i++) {
        int v = src->vars[i];
        E->vf[v][E->nvf[v]++] = id;
    }
    return 0;
}

int dp_charge(engine *E, double bytes, int v, int depset)
{
    if (E->live_bytes + bytes > E->limit_bytes)
        return sb_fail(E->err, SB_EXIT_INTERNAL,
                       "search table limit exceeded at vertex '%s' (dependent set of %d vertices): "
                       "tables would need %.1f MB, over the limit of %.0f MB (--max-table-mb)",
                       E->pb->m->ops[v].name, depset, (E->live_bytes + bytes) / 1e6,
                       E->limit_bytes / 1e6);
    E->live_bytes += bytes;
    if (E->live_bytes > E->peak_bytes)
        E->peak_bytes = E->live_bytes;
    return 0;
}


/* One edge seen through layouts: each op's distinct layouts of the tensor
 * and the layout id of each of its configs. */
typedef struct edge_layouts_s {
    const sb_tensor *ten;
    int ns, nd, nls, nld;
    int *ids_s, *ids_d, *Ls, *Ld;
} edge_layouts;

static void edge_layouts_free(edge_layouts *el)
{
    free(el->ids_s);
    free(el->ids_d);
    free(el->Ls);
    free(el->Ld);
}

static int edge_layouts_get(const sb_problem *pb, const sb_edge *e, edge_layouts *el,
                            sb_error *err)
{
    const sb_model *m = pb->m;
    *el = (edge_layouts){.ten = &m->tensors[e->tensor], .ns = pb->cfg[e->src].n,
                         .nd = pb->cfg[e->dst].n};
    el->ids_s = sb_malloc((size_t)el->ns * sizeof *el->ids_s, err);
    el->ids_d = sb_malloc((size_t)el->nd * sizeof *el->ids_d, err);
    if (!el->ids_s || !el->ids_d
        || sb_layout_ids(pb, e->src, &m->ops[e->src].out[e->src_slot], el->ten->ndims, el->ids_s,
                         &el->Ls, &el->nls, err)
        || sb_layout_ids(pb, e->dst, &m->ops[e->dst].in[e->dst_slot], el->ten->ndims, el->ids_d,
                         &el->Ld, &el->nld, err)) {
        edge_layouts_free(el);
        return -1;
    }
    return 0;
}

/* The layouts of edge k of E's problem (edge_layouts_get), computed once
 * per DP: pair_classes, the pair table's key and its entries read the same
 * ones (they depend only on the problem's configs and the edge). NULL on
 * error (E->err). */
static const edge_layouts *edge_layouts_of(engine *E, int k)
{
    const sb_problem *pb = E->pb;
    if (!E->elc) {
        size_t ne = (size_t)(pb->nedges ? pb->nedges : 1);
        E->elc = calloc(ne, sizeof *E->elc);
        E->elc_have = calloc(ne, 1);
        if (!E->elc || !E->elc_have) {
            free(E->elc), free(E->elc_have);
            E->elc = NULL, E->elc_have = NULL;
            sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
            return NULL;
        }
    }
    if (!E->elc_have[k]) {
        if (edge_layouts_get(pb, &pb->edges[k], &E->elc[k], E->err))
            return NULL;
        E->elc_have[k] = 1;
    }
    return &E->elc[k];
}

/* Edge k's layouts no longer needed (its pair table built). */
static void edge_layouts_drop(engine *E, int k)
{
    if (E->elc && E->elc_have[k] && !E->elc_ext) {
        edge_layouts_free(&E->elc[k]);
        E->elc_have[k] = 0;
    }
}

void dp_edge_layouts_free(engine *E)
{
    if (E->elc_ext) { /* kept for the next DP of the problem */
        E->elc_ext->elc = E->elc;
        E->elc_ext->have = E->elc_have;
    } else {
        for (int k = 0; E->elc && k < E->pb->nedges; k++)
            edge_layouts_drop(E, k);
        free(E->elc);
        free(E->elc_have);
    }
    E->elc = NULL;
    E->elc_have = NULL;
}

void dp_layout_cache_free(dp_layout_cache *lc)
{
    for (int k = 0; lc->elc && k < lc->pb->nedges; k++)
        if (lc->have[k])
            edge_layouts_free(&lc->elc[k]);
    free(lc->elc);
    free(lc->have);
    lc->elc = NULL;
    lc->have = NULL;
}

/* Adds the edge's costs into the pair table t, rows the source's configs
 * when src_rows, else the destination's. */
static int edge_layouts_add(const sb_problem *pb, const edge_layouts *el, double *t, int src_rows,
                            sb_error *err)
{
    int nls = el->nls, nld = el->nld, ns = el->ns, nd = el->nd, tnd = el->ten->ndims;
    double *M = sb_malloc((size_t)nls * (size_t)nld * sizeof *M, err);
    if (!M)
        return -1;
    for (int i = 0; i < nls; i++)
        for (int j = 0; j < nld; j++)
            M[(size_t)i * nld + j] = sb_edge_cost(&pb->cp, el->ten, el->Ls + (size_t)i * tnd,
                                                  el->Ld + (size_t)j * tnd);
    for (int a = 0; a < ns; a++)
        for (int b = 0; b < nd; b++) {
            double c = M[(size_t)el->ids_s[a] * nld + el->ids_d[b]];
            if (src_rows)
                t[(size_t)a * nd + b] += c;
            else
                t[(size_t)b * ns + a] += c;
        }
    free(M);
    return 0;
}

/* Adds the cost table of edge e into the pair table t, rows the configs of
 * op rows_op (one of its two ops). */
static int edge_table_add_rows(const sb_problem *pb, const sb_edge *e, double *t, int rows_op,
                               sb_error *err)
{
    edge_layouts el;
    if (edge_layouts_get(pb, e, &el, err))
        return -1;
    int rc = edge_layouts_add(pb, &el, t, rows_op == e->src, err);
    edge_layouts_free(&el);
    return rc;
}

/* Adds the cost table of edge e into the pair table t (rows: lower op id). */
int sb_edge_table_add(const sb_problem *pb, const sb_edge *e, double *t, sb_error *err)
{
    return edge_table_add_rows(pb, e, t, e->src < e->dst ? e->src : e->dst, err);
}

static int cmp_edge_pair(const void *x, const void *y)
{
    const int *a = x, *b = y;
    if (a[0] != b[0])
        return a[0] - b[0];
    return a[1] - b[1];
}

/* The classes of a pair table's two ops (not plain): configs of an op
 * whose operands have the same layout on every edge of the pair give equal
 * rows (columns) of the table, so it is stored over those classes (first
 * seen, first numbered), with a class map per op where there are fewer
 * classes than configs; f->dim and f->size follow. */
static int pair_classes(engine *E, factor *f)
{
    const sb_problem *pb = E->pb;
    int n = f->npend, rc = -1;
    const edge_layouts **els = calloc((size_t)n, sizeof *els);
    int got = 0;
    if (!els)
        return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
    for (; got < n; got++)
        if (!(els[got] = edge_layouts_of(E, E->pairs[3 * (f->pend + got) + 2])))
            goto out;
    for (int side = 0; side < 2; side++) {
        int op = f->vars[side], nc = dom(E, op), ncls = 0, nh = 16;
        while (nh < 2 * nc)
            nh *= 2;
        int *cm = dp_buf_alloc((size_t)nc * sizeof *cm), *slot = calloc((size_t)nh, sizeof *slot);
        const int *ids[DP_MAX_SCOPE * 4];
        for (int i = 0; i < n; i++)
            ids[i] = op == pb->edges[E->pairs[3 * (f->pend + i) + 2]].src ? els[i]->ids_s
                                                                           : els[i]->ids_d;
        if (!cm || !slot || n > DP_MAX_SCOPE * 4) {
            dp_buf_free(cm);
            free(slot);
            sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
            goto out;
        }
        int *first = slot; /* slot: first config of the class + 1 */
        for (int a = 0; a < nc; a++) {
            uint64_t h = HASH_SEED0;
            for (int i = 0; i < n; i++)
                h = (h ^ (uint64_t)(uint32_t)ids[i][a]) * 1099511628211ULL;
            int sl = (int)(h & (uint64_t)(nh - 1)), found = -1;
            while (first[sl] && found < 0) {
                int b = first[sl] - 1, same = 1;
                for (int i = 0; i < n && same; i++)
                    same = ids[i][a] == ids[i][b];
                if (same)
                    found = cm[b];
                else
                    sl = (sl + 1) & (nh - 1);
            }
            if (found < 0) {
                first[sl] = a + 1;
                found = ncls++;
            }
            cm[a] = found;
        }
        free(slot);
        f->dim[side] = ncls;
        if (ncls < nc)
            f->cm[side] = cm;
        else
            dp_buf_free(cm); /* first seen, first numbered: the identity */
    }
    f->size = (int64_t)f->dim[0] * f->dim[1];
    rc = 0;
out:
    free(els);
    return rc;
}

int dp_init_factors(engine *E)
{
    const sb_problem *pb = E->pb;
    for (int v = 0; v < E->n; v++) {
        factor f = {.nv = 1, .vars = {v}, .size = dom(E, v), .dim = {dom(E, v)}};
        f.t = dp_buf_alloc((size_t)f.size * sizeof(double));
        if (!f.t)
            return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
        memcpy(f.t, pb->cfg[v].cost, (size_t)f.size * sizeof(double));
        if (dp_charge(E, (double)f.size * 8, v, 1) || dp_add_factor(E, &f)) {
            dp_buf_free(f.t);
            return -1;
        }
    }
    /* group edges by unordered pair (lo, hi, edge index); a pair's table is
     * built when it is first used (dp_build_pending): only the tables of the
     * vertex being eliminated and the tables it leaves are live at once */
    int ne = pb->nedges;
    int *pairs = sb_malloc((size_t)(ne ? ne : 1) * 3 * sizeof *pairs, E->err);
    if (!pairs)
        return -1;
    E->pairs = pairs;
    for (int k = 0; k < ne; k++) {
        int a = pb->edges[k].src, b = pb->edges[k].dst;
        pairs[3 * k] = a < b ? a : b;
        pairs[3 * k + 1] = a < b ? b : a;
        pairs[3 * k + 2] = k;
    }
    qsort(pairs, (size_t)ne, 3 * sizeof *pairs, cmp_edge_pair);
    for (int k = 0; k < ne;) {
        int lo = pairs[3 * k], hi = pairs[3 * k + 1];
        if (lo == hi)
            return sb_fail(E->err, SB_EXIT_INPUT, "op '%s' consumes its own output",
                           pb->m->ops[lo].name);
        factor f = {.nv = 2, .vars = {lo, hi}, .size = (int64_t)dom(E, lo) * dom(E, hi),
                    .pend = k, .dim = {dom(E, lo), dom(E, hi)}};
        for (; k < ne && pairs[3 * k] == lo && pairs[3 * k + 1] == hi; k++)
            f.npend++;
        if (!E->plain && pair_classes(E, &f))
            return -1;
        if (dp_add_factor(E, &f)) {
            dp_buf_free(f.cm[0]);
            dp_buf_free(f.cm[1]);
            return -1;
        }
    }
    return 0;
}

/* The key of a pair table (dp_reuse.h): per edge, the orientation, the
 * tensor's sizes, both operands' distinct layouts and each config's layout
 * id: everything its entries are computed from. */
static void pair_key(const sb_cost_params *cp, const edge_layouts *const *els, const int *src_rows,
                     int n, dp_key *key)
{
    /* the cost parameters an edge's price reads (sb_edge_cost): one
     * problem has one set, but a memo shared between searches
     * (sb_search_opts.memo) sees problems on other devices and links */
    double pd[] = {cp->tflops, cp->gbs, cp->word_bytes, cp->elem_ratio, cp->latency_us,
                   cp->conv_ratio, cp->gbs_inter, cp->latency_inter_us, cp->relay_msg_s,
                   cp->relay_word_s, cp->relay_local_s};
    int pi[] = {cp->cutoff, cp->node_devices, cp->devices, cp->profiled, cp->coll_mode,
                cp->node_order};
    dp_key_add(key, pd, sizeof pd);
    dp_key_add(key, pi, sizeof pi);
    if (cp->coll_mode) {
        dp_key_add(key, cp->coll_alpha_s, sizeof cp->coll_alpha_s);
        dp_key_add(key, cp->coll_beta_s, sizeof cp->coll_beta_s);
    }
    for (int i = 0; i < n; i++) {
        const edge_layouts *el = els[i];
        int tnd = el->ten->ndims;
        int hdr[6] = {src_rows[i], tnd, el->ns, el->nd, el->nls, el->nld};
        int64_t sizes[SB_MAX_DIMS];
        for (int d = 0; d < tnd; d++)
            sizes[d] = el->ten->dims[d].size;
        dp_key_add(key, hdr, sizeof hdr);
        dp_key_add(key, sizes, (size_t)tnd * sizeof *sizes);
        dp_key_add(key, el->Ls, (size_t)el->nls * (size_t)tnd * sizeof *el->Ls);
        dp_key_add(key, el->Ld, (size_t)el->nld * (size_t)tnd * sizeof *el->Ld);
        dp_key_add(key, el->ids_s, (size_t)el->ns * sizeof *el->ids_s);
        dp_key_add(key, el->ids_d, (size_t)el->nd * sizeof *el->ids_d);
    }
}

/* edge_layouts_add into a pair table stored over classes (pair_classes):
 * rows the classes of rows_op, each entry the edge's cost at the first
 * config of each class (every config of a class has the same layouts). */
static int edge_layouts_add_classes(engine *E, const factor *f, int rows_op, const edge_layouts *el,
                                    double *t, int src_rows)
{
    const sb_problem *pb = E->pb;
    int r = f->vars[0] == rows_op ? 0 : 1, c = 1 - r;
    int nr = f->dim[r], ncl = f->dim[c], tnd = el->ten->ndims;
    int *rrep = malloc((size_t)nr * sizeof *rrep), *crep = malloc((size_t)ncl * sizeof *crep);
    double *M = malloc((size_t)el->nls * (size_t)el->nld * sizeof *M);
    if (!rrep || !crep || !M) {
        free(rrep);
        free(crep);
        free(M);
        return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
    }
    for (int side = 0; side < 2; side++) {
        int *rp = side == r ? rrep : crep, nd = f->dim[side];
        for (int i = 0; i < nd; i++)
            rp[i] = -1;
        for (int a = dom(E, f->vars[side]) - 1; a >= 0; a--)
            rp[f->cm[side] ? f->cm[side][a] : a] = a; /* the lowest config of each class */
    }
    for (int i = 0; i < el->nls; i++)
        for (int j = 0; j < el->nld; j++)
            M[(size_t)i * el->nld + j] = sb_edge_cost(&pb->cp, el->ten, el->Ls + (size_t)i * tnd,
                                                     el->Ld + (size_t)j * tnd);
    for (int a = 0; a < nr; a++)
        for (int b = 0; b < ncl; b++) {
            int xs = src_rows ? rrep[a] : crep[b], xd = src_rows ? crep[b] : rrep[a];
            t[(size_t)a * ncl + b] += M[(size_t)el->ids_s[xs] * el->nld + el->ids_d[xd]];
        }
    free(rrep);
    free(crep);
    free(M);
    return 0;
}

/* A pending pair table with rows the configs of rows_op: f->id from its key
 * (not in plain mode), and with t (zeroed, f->size entries) its entries:
 * copied when remembered, else computed (and remembered). */
int dp_pair_table(engine *E, factor *f, int rows_op, double *t)
{
    const sb_problem *pb = E->pb;
    int n = f->npend, rc = -1, got = 0, have = 0;
    const edge_layouts **els = calloc((size_t)n, sizeof *els);
    int *src_rows = calloc((size_t)n, sizeof *src_rows);
    dp_key key = {0};
    if (!els || !src_rows) {
        sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (; got < n; got++) {
        int k = E->pairs[3 * (f->pend + got) + 2];
        src_rows[got] = rows_op == pb->edges[k].src;
        if (!(els[got] = edge_layouts_of(E, k)))
            goto out;
    }
    if (!E->plain) {
        pair_key(&pb->cp, els, src_rows, n, &key);
        f->id = dp_memo_pair(E->memo, &key, t, f->size, &have);
    }
    for (int i = 0; t && !have && i < n; i++)
        if (f->cm[0] || f->cm[1] ? edge_layouts_add_classes(E, f, rows_op, els[i], t, src_rows[i])
                                 : edge_layouts_add(pb, els[i], t, src_rows[i], E->err))
            goto out;
    if (t && !have && !E->plain)
        dp_memo_pair_put(E->memo, f->id, t, f->size);
    if (t) /* the table is built: its edges' layouts are read no more */
        for (int i = 0; i < n; i++)
            edge_layouts_drop(E, E->pairs[3 * (f->pend + i) + 2]);
    rc = 0;
out:
    free(els);
    free(src_rows);
    dp_key_free(&key);
    return rc;
}

/* Builds a pending edge table (the summed costs of its edges), rows the
 * configs of rows_op (then its order is (rows_op, the other)). */
int dp_build_pending(engine *E, factor *f, int rows_op)
{
    if (f->t)
        return 0;
    if (dp_charge(E, (double)f->size * 8, f->vars[0], 2))
        return -1;
    f->t = dp_buf_alloc((size_t)f->size * sizeof(double));
    if (!f->t)
        return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
    memset(f->t, 0, (size_t)f->size * sizeof(double));
    return dp_pair_table(E, f, rows_op, f->t);
}

