/* dp_estimate.c: the DP's table memory bounded before it runs
 * (sb_search_estimate, search.h), so that a search that cannot finish is
 * refused in a moment instead of failing at --max-table-mb minutes later.
 *
 * The DP (dp.c) eliminates the ops in its order; eliminating v builds a
 * table over v's dependent set S with one entry per assignment of the row
 * classes of S's ops, charges 10 bytes an entry (the least cost and the
 * argmin), keeps the argmins (2 bytes an entry) to the end and the table
 * (8 bytes) until its own ops are eliminated. Here the same order is run on
 * the tables' scopes alone, with each op's classes computed from structure:
 * two configs are in one class of a pair table when they lay out every
 * tensor of the pair's edges alike (as dp_factors.c's pair_classes does),
 * and in one class of a table over S when they are in one class of every
 * table they come from. The DP merges rows whose values are equal, which
 * configs in one structural class always have, so its classes are never
 * more: every table here is at least as large as the DP's, and the peak
 * here is at least the peak the DP charges (an upper bound; equal costs of
 * different layouts let the DP merge more, a few per cent on the LLMs).
 * Charged as the DP charges them: op tables (8 bytes a config) from the
 * start, a pair table when its first op is eliminated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "dp_reuse.h"
#include "shardbench/search.h"

typedef struct {
    int nv;
    int vars[DP_MAX_SCOPE];
    int *cls[DP_MAX_SCOPE]; /* per var: config -> class, NULL: the configs themselves */
    int ncls[DP_MAX_SCOPE];
    double size;            /* entries: the product of ncls */
    int alive, built;
} sfactor;

typedef struct {
    const sb_problem *pb;
    sfactor *f;
    int nf, cap;
    int **vf; /* per op: the factors over it */
    int *nvf, *capvf;
    double live, peak, limit;
    sb_table_estimate *out;
    sb_error *err;
} sim;

static int sim_add(sim *S, sfactor *src)
{
    if (S->nf == S->cap) {
        int nc = S->cap ? 2 * S->cap : 1024;
        sfactor *nf = sb_realloc(S->f, (size_t)nc * sizeof *nf, S->err);
        if (!nf)
            return -1;
        S->f = nf, S->cap = nc;
    }
    int id = S->nf++;
    S->f[id] = *src;
    S->f[id].alive = 1;
    for (int i = 0; i < src->nv; i++) {
        int v = src->vars[i];
        if (S->nvf[v] == S->capvf[v]) {
            int nc = S->capvf[v] ? 2 * S->capvf[v] : 8;
            int *nl = sb_realloc(S->vf[v], (size_t)nc * sizeof *nl, S->err);
            if (!nl)
                return -1;
            S->vf[v] = nl, S->capvf[v] = nc;
        }
        S->vf[v][S->nvf[v]++] = id;
    }
    return 0;
}

/* Charges bytes while eliminating v (dependent set k); the first vertex at
 * which the bound passes the limit is remembered. */
static void charge(sim *S, double bytes, int v, int k)
{
    S->live += bytes;
    if (S->live > S->peak) {
        S->peak = S->live;
        S->out->peak_vertex = v, S->out->peak_depset = k;
    }
    if (S->limit > 0 && S->live > S->limit && S->out->over_vertex < 0)
        S->out->over_vertex = v, S->out->over_depset = k;
}

/* An open-addressing map of 64-bit keys to dense ids (first seen, first
 * numbered). */
typedef struct {
    uint64_t *key;
    int *val;
    size_t mask;
    int n;
} idmap;

static int idmap_init(idmap *h, int n, sb_error *err)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)n)
        cap *= 2;
    h->key = sb_malloc(cap * sizeof *h->key, err);
    h->val = sb_malloc(cap * sizeof *h->val, err);
    if (!h->key || !h->val) {
        free(h->key), free(h->val);
        return -1;
    }
    for (size_t i = 0; i < cap; i++)
        h->val[i] = -1;
    h->mask = cap - 1, h->n = 0;
    return 0;
}

static int idmap_get(idmap *h, uint64_t k)
{
    size_t s = (size_t)((k * 0x9E3779B97F4A7C15ULL) >> 20) & h->mask;
    while (h->val[s] >= 0 && h->key[s] != k)
        s = (s + 1) & h->mask;
    if (h->val[s] < 0)
        h->key[s] = k, h->val[s] = h->n++;
    return h->val[s];
}

/* cls[a] := the class of (cls[a], other[a]) for a < n (other NULL: a
 * itself), cls having ncls classes; returns the number of classes, or -1. */
static int join(int *cls, int ncls, const int *other, int n, sb_error *err)
{
    if (ncls <= 1) { /* one class so far: other's (renumbered first seen, first numbered) */
        if (!other) {
            for (int a = 0; a < n; a++)
                cls[a] = a;
            return n;
        }
        memcpy(cls, other, (size_t)n * sizeof *cls);
        int mx = -1;
        for (int a = 0; a < n; a++)
            mx = cls[a] > mx ? cls[a] : mx;
        if (mx + 1 == n)
            return n;
        int *seen = sb_malloc((size_t)(mx + 1) * sizeof *seen, err), k = 0;
        if (!seen)
            return -1;
        for (int i = 0; i <= mx; i++)
            seen[i] = -1;
        for (int a = 0; a < n; a++) {
            if (seen[cls[a]] < 0)
                seen[cls[a]] = k++;
            cls[a] = seen[cls[a]];
        }
        free(seen);
        return k;
    }
    idmap h;
    if (idmap_init(&h, n, err))
        return -1;
    for (int a = 0; a < n; a++)
        cls[a] = idmap_get(&h, ((uint64_t)(uint32_t)cls[a] << 32) | (uint32_t)(other ? other[a] : a));
    free(h.key), free(h.val);
    return h.n;
}

/* Layout ids of an operand, computed once per distinct (configs, operand
 * map): the repeated layers of an LLM have the same ops, configs and maps
 * (most of the bound's time was here before). */
typedef struct {
    uint64_t h;
    int op, tnd, nl;
    int map[SB_MAX_DIMS];
    int *ids, *L; /* per config its layout; the nl layouts (nl x tnd) */
} ids_entry;

typedef struct {
    ids_entry *e;
    int n, cap;
    uint64_t *oph; /* per op: a hash of its configs (0: not yet) */
} ids_cache;

static uint64_t cfg_hash(const sb_configs *cf)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)cf->n ^ ((uint64_t)cf->ndims << 32);
    for (size_t i = 0; i < (size_t)cf->n * (size_t)cf->ndims; i++)
        h = (h ^ (uint64_t)(uint32_t)cf->c[i]) * 1099511628211ULL;
    return h | 1u;
}

/* ids of operand o of op (tnd tensor dims): the cache's (not to be freed) */
static const ids_entry *layout_ids_cached(const sb_problem *pb, ids_cache *C, int op,
                                          const sb_operand *o, int tnd, sb_error *err)
{
    const sb_configs *cf = &pb->cfg[op];
    if (!C->oph[op])
        C->oph[op] = cfg_hash(cf);
    for (int i = 0; i < C->n; i++) {
        const ids_entry *x = &C->e[i];
        const sb_configs *xc = &pb->cfg[x->op];
        if (x->h == C->oph[op] && x->tnd == tnd && xc->n == cf->n && xc->ndims == cf->ndims
            && !memcmp(x->map, o->map, (size_t)tnd * sizeof(int))
            && (xc->c == cf->c
                || !memcmp(xc->c, cf->c, (size_t)cf->n * (size_t)cf->ndims * sizeof(int))))
            return x;
    }
    if (C->n == C->cap) {
        int nc = C->cap ? 2 * C->cap : 64;
        ids_entry *ne = sb_realloc(C->e, (size_t)nc * sizeof *ne, err);
        if (!ne)
            return NULL;
        C->e = ne, C->cap = nc;
    }
    ids_entry *x = &C->e[C->n];
    *x = (ids_entry){.h = C->oph[op], .op = op, .tnd = tnd};
    memcpy(x->map, o->map, (size_t)tnd * sizeof(int));
    x->ids = sb_malloc((size_t)(cf->n ? cf->n : 1) * sizeof *x->ids, err);
    if (!x->ids || sb_layout_ids(pb, op, o, tnd, x->ids, &x->L, &x->nl, err)) {
        free(x->ids);
        return NULL;
    }
    C->n++;
    return x;
}

/* The pair tables: edges grouped by their two ops, each op's classes those
 * of its layouts of the pair's tensors. */
static int add_pairs(sim *S, ids_cache *C)
{
    const sb_problem *pb = S->pb;
    for (int k = 0; k < pb->nedges; k++) {
        const sb_edge *e = &pb->edges[k];
        int lo = e->src < e->dst ? e->src : e->dst, hi = e->src ^ e->dst ^ lo, f = -1;
        if (lo == hi)
            continue; /* the DP refuses it, naming the op */
        for (int i = 0; i < S->nvf[lo] && f < 0; i++) {
            const sfactor *g = &S->f[S->vf[lo][i]];
            if (g->nv == 2 && g->vars[0] == lo && g->vars[1] == hi)
                f = S->vf[lo][i];
        }
        if (f < 0) {
            sfactor n = {.nv = 2, .vars = {lo, hi}};
            for (int s = 0; s < 2; s++) {
                n.cls[s] = sb_calloc((size_t)pb->cfg[n.vars[s]].n, sizeof(int), S->err);
                if (!n.cls[s])
                    return -1;
            }
            if (sim_add(S, &n))
                return -1;
            f = S->nf - 1;
        }
        sfactor *g = &S->f[f];
        int tnd = pb->m->tensors[e->tensor].ndims;
        /* the ids arrays stay where they are when the cache grows; its entries move */
        const ids_entry *x = layout_ids_cached(pb, C, e->src, &pb->m->ops[e->src].out[e->src_slot],
                                               tnd, S->err);
        const int *ids_s = x ? x->ids : NULL;
        x = x ? layout_ids_cached(pb, C, e->dst, &pb->m->ops[e->dst].in[e->dst_slot], tnd, S->err)
              : NULL;
        if (!x)
            return -1;
        for (int s = 0; s < 2; s++) {
            int op = g->vars[s], n = pb->cfg[op].n;
            const int *v = op == e->src ? ids_s : x->ids;
            g->ncls[s] = join(g->cls[s], g->ncls[s], v, n, S->err);
            if (g->ncls[s] < 0)
                return -1;
        }
    }
    for (int i = 0; i < S->nf; i++)
        S->f[i].size = (double)S->f[i].ncls[0] * S->f[i].ncls[1];
    return 0;
}

static void factor_free(sfactor *f)
{
    for (int i = 0; i < f->nv; i++)
        free(f->cls[i]);
    f->nv = 0;
}

/* Eliminates v on the scopes: the charges, then its factors retired and
 * the table over its dependent set added. */
static int sim_eliminate(sim *S, int v)
{
    const sb_problem *pb = S->pb;
    sfactor g = {0};
    for (int i = 0; i < S->nvf[v]; i++) {
        sfactor *f = &S->f[S->vf[v][i]];
        for (int j = 0; f->alive && j < f->nv; j++) {
            int u = f->vars[j], seen = u == v;
            for (int q = 0; q < g.nv && !seen; q++)
                seen = g.vars[q] == u;
            if (seen)
                continue;
            if (g.nv == DP_MAX_SCOPE) {
                S->out->too_wide = v;
                return 1;
            }
            g.vars[g.nv++] = u;
        }
    }
    if (g.nv > S->out->max_depset)
        S->out->max_depset = g.nv;
    for (int i = 0; i < S->nvf[v]; i++) { /* pair tables built now */
        sfactor *f = &S->f[S->vf[v][i]];
        if (f->alive && !f->built) {
            f->built = 1;
            charge(S, f->size * 8.0, v, g.nv);
        }
    }
    g.size = 1.0;
    for (int q = 0; q < g.nv; q++) {
        int u = g.vars[q], n = pb->cfg[u].n;
        g.cls[q] = sb_calloc((size_t)n, sizeof(int), S->err);
        if (!g.cls[q]) {
            factor_free(&g);
            return -1;
        }
        g.ncls[q] = 1;
        for (int i = 0; i < S->nvf[v]; i++) {
            const sfactor *f = &S->f[S->vf[v][i]];
            for (int j = 0; f->alive && j < f->nv; j++)
                if (f->vars[j] == u
                    && (g.ncls[q] = join(g.cls[q], g.ncls[q], f->cls[j], n, S->err)) < 0) {
                    factor_free(&g);
                    return -1;
                }
        }
        g.size *= g.ncls[q];
    }
    if (g.size > S->out->largest_table)
        S->out->largest_table = g.size;
    charge(S, g.size * 10.0, v, g.nv); /* the table and its argmins */
    for (int i = 0; i < S->nvf[v]; i++) {
        sfactor *f = &S->f[S->vf[v][i]];
        if (!f->alive)
            continue;
        f->alive = 0;
        S->live -= f->size * 8.0;
        factor_free(f);
    }
    g.built = 1;
    if (g.nv == 0) {
        S->live -= g.size * 8.0; /* the last table, one entry */
        return 0;
    }
    return sim_add(S, &g);
}

int sb_search_estimate(const sb_problem *pb, const sb_search_opts *opts, double limit_bytes,
                       sb_table_estimate *out, sb_error *err)
{
    int n = pb->m->nops, rc = -1;
    double t0 = sb_now();
    memset(out, 0, sizeof *out);
    out->over_vertex = out->peak_vertex = out->too_wide = -1;
    sim S = {.pb = pb, .limit = limit_bytes, .out = out, .err = err};
    ids_cache C = {.oph = sb_calloc((size_t)(n ? n : 1), sizeof(uint64_t), err)};
    int *order = sb_malloc((size_t)(n ? n : 1) * sizeof *order, err);
    S.vf = sb_calloc((size_t)(n ? n : 1), sizeof *S.vf, err);
    S.nvf = sb_calloc((size_t)(n ? n : 1), sizeof *S.nvf, err);
    S.capvf = sb_calloc((size_t)(n ? n : 1), sizeof *S.capvf, err);
    if (!order || !S.vf || !S.nvf || !S.capvf || !C.oph)
        goto done;
    if (opts->algo == SB_ALGO_BF)
        sb_order_bf(pb, order);
    else if (opts->plain)
        sb_order_pase(pb, order);
    else
        sb_order_blocks(pb, order);
    for (int v = 0; v < n; v++) { /* the op tables, charged from the start */
        sfactor f = {.nv = 1, .vars = {v}, .ncls = {pb->cfg[v].n}, .size = pb->cfg[v].n,
                     .built = 1};
        if (sim_add(&S, &f))
            goto done;
        charge(&S, f.size * 8.0, v, 1);
    }
    if (add_pairs(&S, &C))
        goto done;
    for (int i = 0; i < n; i++) {
        int r = sim_eliminate(&S, order[i]);
        if (r < 0)
            goto done;
        if (r > 0)
            break; /* a dependent set over the DP's scope: out->too_wide */
    }
    out->peak_bytes = S.peak;
    rc = 0;
done:
    for (int i = 0; i < S.nf; i++)
        factor_free(&S.f[i]);
    free(S.f);
    for (int v = 0; S.vf && v < n; v++)
        free(S.vf[v]);
    free(S.vf), free(S.nvf), free(S.capvf), free(order);
    for (int i = 0; i < C.n; i++)
        free(C.e[i].ids), free(C.e[i].L);

    free(C.e), free(C.oph);
    out->seconds = sb_now() - t0;
    return rc;
}

/* Op j's configs are op i's: the same kind (one whose configs no rule
 * restricts beyond the splits), dims and unsplit dims. */
static int same_configs(const sb_op *a, const sb_op *b)
{
    if (a->kind != b->kind || a->ndims != b->ndims || a->nosplit != b->nosplit
        || sb_configs_restricted(a))
        return 0;
    for (int d = 0; d < a->ndims; d++)
        if (a->dims[d].size != b->dims[d].size)
            return 0;
    return 1;
}

int sb_search_estimate_model(const sb_model *m, int p, const sb_cost_params *cp,
                             const sb_search_opts *opts, double limit_bytes,
                             sb_table_estimate *out, sb_error *err)
{
    double t0 = sb_now();
    int n = m->nops, rc = -1;
    sb_problem pb = {.m = m, .p = p, .cp = *cp};
    pb.cp.devices = p;
    pb.cp.cutoff = cp->cutoff > 0 ? cp->cutoff : m->cutoff;
    if (p < 1 || p > SB_MAX_DEVICES)
        return sb_fail(err, SB_EXIT_INPUT, "device count p=%d out of range (1..%d)", p,
                       SB_MAX_DEVICES);
    int *own = sb_malloc((size_t)(n ? n : 1) * sizeof *own, err); /* op whose arrays i uses */
    pb.cfg = sb_calloc((size_t)(n ? n : 1), sizeof *pb.cfg, err);
    if (!own || !pb.cfg)
        goto done;
    for (int i = 0; i < n; i++) {
        own[i] = i;
        for (int j = i - 1; j >= 0 && j >= i - 64 && own[i] == i; j--) /* a layer back at most */
            if (same_configs(&m->ops[own[j]], &m->ops[i]))
                own[i] = own[j];
        if (own[i] != i)
            pb.cfg[i] = pb.cfg[own[i]];
        else if (sb_enumerate_configs(&m->ops[i], p, pb.cp.cutoff, &pb.cfg[i], err))
            goto done;
    }
    if (sb_model_edges(m, &pb.edges, &pb.nedges, err))
        goto done;
    rc = sb_search_estimate(&pb, opts, limit_bytes, out, err);
    for (int i = 0; i < n; i++)
        out->max_configs = pb.cfg[i].n > out->max_configs ? pb.cfg[i].n : out->max_configs;
done:
    for (int i = 0; pb.cfg && i < n; i++)
        if (own[i] == i)
            free(pb.cfg[i].c);
    free(pb.cfg), free(pb.edges), free(own);
    out->seconds = sb_now() - t0;
    return rc;
}
