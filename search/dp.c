/* dp.c: the exact dynamic program over a vertex order (PaSE, IPDPS 2021).
 *
 * Vertices are processed in an order (GenerateSeq, or breadth-first for the
 * baseline). Processing v builds, for every config assignment of its
 * dependent set D(v) (the unprocessed vertices connected to v or to the
 * processed subgraph it joins), the least cost of the processed part, and
 * the config of v that reaches it. This is the DP over connected subsets of
 * the paper, written as min-sum variable elimination: a table ("factor")
 * over D(v) replaces every table that mentioned v. Backtracking over the
 * stored argmins gives the whole strategy. Exact: equals brute force.
 *
 * Shortcuts that change how much is computed, never a value or which
 * config wins (search/README.md, "Exact shortcuts"; off with
 * sb_search_opts.plain): edge tables built when first used, in the order
 * they are read; equal-row classes of the dependent set (config_classes);
 * equal columns of the eliminated op (compact_eliminated); the bounded and
 * threshold scans for each minimum; pair tables and eliminations whose keys
 * were met before taken from the earlier ones (content ids, dp_reuse.c);
 * the table fill split over threads (scan_rows: the CPUs the process may use). With them the order
 * is block-first (order.c: repeated layers' interiors first), so that
 * equal layers give equal eliminations. Optional and separate: dominated
 * configs dropped first (dp_prune.c, sb_search_opts.prune). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "dp.h"
#include "msort.h"
#include "dp_reuse.h"

#include <math.h>
#include <stdio.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>

#define MAX_SCOPE DP_MAX_SCOPE
#define DP_MAX_THREADS 256 /* the most threads one elimination starts (par_run's array) */
#define HASH_SEED0 1469598103934665603ULL
#define VEC_BLOCK 8 /* prefixes per block of the vector scan */
#define VEC_SAMPLE 64 /* entries of the other scans sampled before choosing */
#ifndef VEC_STEP_COST
#define VEC_STEP_COST 16 /* a sampled step against a config read by the vector scan */
#endif
#ifndef VEC_MAX_NV
#define VEC_MAX_NV 1024 /* the vector scan for at most this many configs of v */
#endif

typedef struct {
    int nv;
    int vars[MAX_SCOPE]; /* table order: last var fastest */
    int64_t size;
    double *t;     /* NULL until built (edge tables: when first used) */
    int alive;
    int pend, npend; /* edge tables: its edges, pairs[3 * pend ..] of the engine */
    uint64_t id;     /* content id (dp_reuse.h); 0: none yet (plain: always) */
    int dim[MAX_SCOPE]; /* extent of each var's axis: its configs, or its classes */
    int *cm[MAX_SCOPE]; /* per var: config -> class (dp_buf), NULL: configs themselves */
} factor;

typedef struct {
    const sb_problem *pb;
    int n;
    factor *f;
    int nf, capf;
    int **vf;     /* per var: factor ids */
    int *nvf, *capvf;
    double live_bytes, peak_bytes, limit_bytes;
    long long entries_copied, configs_merged, rows_bounded, rows_threshold, rows_vector,
        rows_colclass, rows_entwise; /* shortcuts (sb_result) */
    int threads_used; /* the most threads an elimination's scan ran on (sb_result) */
    int *pairs; /* edges by (lower op, higher op, edge index), sorted */
    dp_memo *memo; /* content ids, recent pair tables and eliminations (dp_reuse.h): own_memo
                      or the one shared by the caller (sb_search_opts.memo) */
    dp_memo own_memo;
    long long hits0; /* memo->hits at the start */
    int plain; /* sb_search_opts.plain: take none */
    int trace; /* SB_DP_TRACE set: one line per elimination on stderr */
    int scan;  /* sb_search_opts.scan */
    int threads; /* sb_search_opts.threads: the scan's threads at most (0: sb_dp_default_threads) */
    int colclass; /* sb_search_opts.colclass */
    int entwise; /* sb_search_opts.entwise */
    sb_error *err;
} engine;

static int dom(const engine *E, int v) { return E->pb->cfg[v].n; }

/* The process's CPU time (all threads; SB_DP_TRACE). */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Appends src to the factor list and to each of its vars' lists. Every
 * allocation comes first: on failure (-1) nothing refers to src, so the
 * caller still owns (and frees) its table. */
static int add_factor(engine *E, factor *src)
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

static int charge(engine *E, double bytes, int v, int depset)
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

/* ---- initial factors: one per vertex, one per adjacent pair ------------- */

/* One edge seen through layouts: each op's distinct layouts of the tensor
 * and the layout id of each of its configs. */
typedef struct {
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
    edge_layouts *els = calloc((size_t)n, sizeof *els);
    int got = 0;
    if (!els)
        return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
    for (; got < n; got++)
        if (edge_layouts_get(pb, &pb->edges[E->pairs[3 * (f->pend + got) + 2]], &els[got], E->err))
            goto out;
    for (int side = 0; side < 2; side++) {
        int op = f->vars[side], nc = dom(E, op), ncls = 0, nh = 16;
        while (nh < 2 * nc)
            nh *= 2;
        int *cm = dp_buf_alloc((size_t)nc * sizeof *cm), *slot = calloc((size_t)nh, sizeof *slot);
        const int *ids[DP_MAX_SCOPE * 4];
        for (int i = 0; i < n; i++)
            ids[i] = op == pb->edges[E->pairs[3 * (f->pend + i) + 2]].src ? els[i].ids_s
                                                                           : els[i].ids_d;
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
    for (int i = 0; i < got; i++)
        edge_layouts_free(&els[i]);
    free(els);
    return rc;
}

static int init_factors(engine *E)
{
    const sb_problem *pb = E->pb;
    for (int v = 0; v < E->n; v++) {
        factor f = {.nv = 1, .vars = {v}, .size = dom(E, v), .dim = {dom(E, v)}};
        f.t = dp_buf_alloc((size_t)f.size * sizeof(double));
        if (!f.t)
            return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
        memcpy(f.t, pb->cfg[v].cost, (size_t)f.size * sizeof(double));
        if (charge(E, (double)f.size * 8, v, 1) || add_factor(E, &f)) {
            dp_buf_free(f.t);
            return -1;
        }
    }
    /* group edges by unordered pair (lo, hi, edge index); a pair's table is
     * built when it is first used (build_pending): only the tables of the
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
        if (add_factor(E, &f)) {
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
static void pair_key(const sb_cost_params *cp, const edge_layouts *els, const int *src_rows, int n,
                     dp_key *key)
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
        const edge_layouts *el = &els[i];
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
static int pair_table(engine *E, factor *f, int rows_op, double *t)
{
    const sb_problem *pb = E->pb;
    int n = f->npend, rc = -1, got = 0, have = 0;
    edge_layouts *els = calloc((size_t)n, sizeof *els);
    int *src_rows = calloc((size_t)n, sizeof *src_rows);
    dp_key key = {0};
    if (!els || !src_rows) {
        sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (; got < n; got++) {
        const sb_edge *e = &pb->edges[E->pairs[3 * (f->pend + got) + 2]];
        src_rows[got] = rows_op == e->src;
        if (edge_layouts_get(pb, e, &els[got], E->err))
            goto out;
    }
    if (!E->plain) {
        pair_key(&pb->cp, els, src_rows, n, &key);
        f->id = dp_memo_pair(E->memo, &key, t, f->size, &have);
    }
    for (int i = 0; t && !have && i < n; i++)
        if (f->cm[0] || f->cm[1] ? edge_layouts_add_classes(E, f, rows_op, &els[i], t, src_rows[i])
                                 : edge_layouts_add(pb, &els[i], t, src_rows[i], E->err))
            goto out;
    if (t && !have && !E->plain)
        dp_memo_pair_put(E->memo, f->id, t, f->size);
    rc = 0;
out:
    for (int i = 0; i < got && els; i++)
        edge_layouts_free(&els[i]);
    free(els);
    free(src_rows);
    dp_key_free(&key);
    return rc;
}

/* Builds a pending edge table (the summed costs of its edges), rows the
 * configs of rows_op (then its order is (rows_op, the other)). */
static int build_pending(engine *E, factor *f, int rows_op)
{
    if (f->t)
        return 0;
    if (charge(E, (double)f->size * 8, f->vars[0], 2))
        return -1;
    f->t = dp_buf_alloc((size_t)f->size * sizeof(double));
    if (!f->t)
        return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
    memset(f->t, 0, (size_t)f->size * sizeof(double));
    return pair_table(E, f, rows_op, f->t);
}

/* ---- elimination ------------------------------------------------------------ */

typedef struct {
    int nv;            /* dependent set size */
    int vars[MAX_SCOPE];
    uint16_t *arg;     /* argmin of v for every assignment of vars (by their classes) */
    int dim[MAX_SCOPE];
    int *cm[MAX_SCOPE]; /* per var: config -> class (dp_buf), NULL: none */
} step;

/* Copies factor f into a table whose scope order is `order` (a permutation
 * of f's vars). */
static double *transpose(engine *E, const factor *f, const int *order)
{
    double *out = dp_buf_alloc((size_t)f->size * sizeof *out);
    if (!out) {
        sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
        return NULL;
    }
    int64_t sstride[MAX_SCOPE], nstride[MAX_SCOPE], size[MAX_SCOPE];
    int64_t st = 1;
    for (int i = f->nv - 1; i >= 0; i--) {
        sstride[i] = st;
        st *= f->dim[i];
    }
    for (int j = 0; j < f->nv; j++)
        for (int i = 0; i < f->nv; i++)
            if (f->vars[i] == order[j]) {
                nstride[j] = sstride[i];
                size[j] = f->dim[i];
            }
    /* the innermost axis of out in one loop, an odometer over the others */
    int64_t idx[MAX_SCOPE] = {0}, off = 0, n = f->nv ? size[f->nv - 1] : 1;
    int64_t ns = f->nv ? nstride[f->nv - 1] : 1;
    for (int64_t k = 0; k < f->size; k += n) {
        for (int64_t i = 0; i < n; i++)
            out[k + i] = f->t[off + i * ns];
        int j = f->nv - 2;
        while (j >= 0) {
            idx[j]++;
            off += nstride[j];
            if (idx[j] < size[j])
                break;
            off -= nstride[j] * size[j];
            idx[j] = 0;
            j--;
        }
    }
    return out;
}

/* A table an elimination of v reads, over v and part of its dependent set
 * (dp_reuse.h). */
typedef dp_inflow inflow;

/* ---- classes of equal slices (equal rows, equal columns) ---------------------
 *
 * Configs are grouped by a hash of their slices in the inflow tables
 * (sorted by hash, then index), and every merge is then checked element by
 * element, so a hash collision only loses a merge. */
typedef struct {
    uint64_t h;
    int i;
} hashed;

#define HASH_SEED 1469598103934665603ULL
#define HASH_PRIME 1099511628211ULL

static int cmp_hashed(const void *x, const void *y)
{
    const hashed *a = x, *b = y;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    return a->i - b->i;
}

/* hs[i] = (seed, i) for i < n. */
static void hashed_init(hashed *hs, int n)
{
    for (int i = 0; i < n; i++)
        hs[i] = (hashed){.h = HASH_SEED, .i = i};
}

/* hs (n, sorted by hash): rep[i] = the lowest config of i's run of equal
 * hashes. */
static void first_of_runs(const hashed *hs, int n, int *rep)
{
    for (int a = 0; a < n;) {
        int b = a;
        while (b < n && hs[b].h == hs[a].h)
            rep[hs[b++].i] = hs[a].i;
        a = b;
    }
}

/* Mixes each column x of table t (rows x nv) into hs[x].h (hs in config
 * order, not yet sorted). */
static void hash_columns(hashed *hs, const double *t, int64_t rows, int nv)
{
    for (int64_t r = 0; r < rows; r++, t += nv)
        for (int x = 0; x < nv; x++) {
            uint64_t bits;
            memcpy(&bits, t + x, sizeof bits);
            uint64_t h = (hs[x].h ^ bits) * HASH_PRIME;
            hs[x].h = h ^ (h >> 29);
        }
}

/* Undoes each merge x -> rep[x] whose columns differ somewhere in t
 * (rows x nv). */
static void unmerge_columns(int *rep, const double *t, int64_t rows, int nv)
{
    for (int64_t r = 0; r < rows; r++, t += nv)
        for (int x = 0; x < nv; x++)
            if (rep[x] != x && memcmp(t + x, t + rep[x], sizeof *t))
                rep[x] = x;
}

/* Blocks of one axis of an inflow table: outer x n x inner, with the axis
 * in the middle. */
static void axis_blocks(const engine *E, const inflow *fl, int j, int nvv, int64_t *outer,
                        int64_t *inner)
{
    (void)E;
    int64_t total = nvv;
    for (int a = 0; a < fl->nv; a++)
        total *= fl->dim[a];
    *inner = fl->stride[j];
    *outer = total / (fl->stride[j] * fl->dim[j]);
}

/* h with the n doubles at b mixed in: four interleaved chains (their
 * multiplies overlap; one chain was bound by its latency), then folded.
 * A function of h and the bits alone, so equal slices mix equally. */
static uint64_t hash_slice(uint64_t h, const double *b, int64_t n)
{
    uint64_t l[4] = {h, h ^ 0x9e3779b97f4a7c15ULL, h ^ 0xc2b2ae3d27d4eb4fULL,
                     h ^ 0x165667b19e3779f9ULL};
    int64_t e = 0;
    for (; e + 4 <= n; e += 4)
        for (int j = 0; j < 4; j++) {
            uint64_t bits;
            memcpy(&bits, b + e + j, sizeof bits);
            l[j] = (l[j] ^ bits) * HASH_PRIME;
            l[j] ^= l[j] >> 29;
        }
    for (; e < n; e++) {
        uint64_t bits;
        memcpy(&bits, b + e, sizeof bits);
        l[0] = (l[0] ^ bits) * HASH_PRIME;
        l[0] ^= l[0] >> 29;
    }
    for (int j = 1; j < 4; j++) {
        l[0] = (l[0] ^ l[j]) * HASH_PRIME;
        l[0] ^= l[0] >> 29;
    }
    return l[0];
}

/* Mixes the slices of fl's axis j (n configs; nvv: v's configs) into
 * hs[i].h (hs in config order). */
static int hash_slices(const engine *E, const inflow *fl, int j, int nvv, hashed *hs, int n)
{
    int64_t outer, inner;
    axis_blocks(E, fl, j, nvv, &outer, &inner);
    const int *cm = fl->cm[j];
    int64_t d = fl->dim[j];
    if (!cm) {
        for (int64_t o = 0; o < outer; o++)
            for (int i = 0; i < n; i++)
                hs[i].h = hash_slice(hs[i].h, fl->t + (o * d + i) * inner, inner);
        return 0;
    }
    /* along classes: each class's slice hashed once, then mixed into its
     * configs' hashes (equal slices, equal hashes still) */
    uint64_t *hc = malloc((size_t)d * sizeof *hc);
    if (!hc)
        return -1;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t c = 0; c < d; c++)
            hc[c] = hash_slice(HASH_SEED, fl->t + (o * d + c) * inner, inner);
        for (int i = 0; i < n; i++) {
            uint64_t h = (hs[i].h ^ hc[cm[i]]) * HASH_PRIME;
            hs[i].h = h ^ (h >> 29);
        }
    }
    free(hc);
    return 0;
}

/* Undoes each merge i -> rep[i] whose slices of fl's axis j differ. */
static void unmerge_slices(const engine *E, const inflow *fl, int j, int nvv, int *rep, int n)
{
    int64_t outer, inner;
    axis_blocks(E, fl, j, nvv, &outer, &inner);
    const int *cm = fl->cm[j];
    int64_t d = fl->dim[j];
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
            if (rep[i] == i || (cm && cm[i] == cm[rep[i]])) /* one slice: equal */
                continue;
            const double *a = fl->t + (o * d + (cm ? cm[i] : i)) * inner;
            const double *b = fl->t + (o * d + (cm ? cm[rep[i]] : rep[i])) * inner;
            if (memcmp(a, b, (size_t)inner * sizeof *a))
                rep[i] = i;
        }
}

/* Classes of the configs of S[q] (q-th var of the dependent set, var; nvv:
 * v's configs): configs whose slices are bitwise equal in every inflow
 * table give equal rows of the new table, so only the class's first config
 * (its representative) is computed and the others are copied. rep[i]: the
 * representative of config i (rep[i] <= i; rep[i] == i for
 * representatives). */
static int config_classes(engine *E, const inflow *in, int nin, int q, int var, int nvv, int *rep)
{
    int n = dom(E, var);
    hashed *hs = malloc((size_t)n * sizeof *hs);
    if (!hs)
        return -1;
    hashed_init(hs, n);
    for (int f = 0; f < nin; f++)
        for (int j = 0; j < in[f].nv; j++)
            if (in[f].pos[j] == q && hash_slices(E, &in[f], j, nvv, hs, n)) {
                free(hs);
                return -1;
            }
    qsort(hs, (size_t)n, sizeof *hs, cmp_hashed);
    first_of_runs(hs, n, rep);
    free(hs);
    for (int f = 0; f < nin; f++)
        for (int j = 0; j < in[f].nv; j++)
            if (in[f].pos[j] == q)
                unmerge_slices(E, &in[f], j, nvv, rep, n);
    return 0;
}

/* hs (nv, sorted by hash): rep[x] = the config of least base in x's run of
 * equal hashes, lowest index on ties. */
static void cheapest_of_runs(const hashed *hs, int nv, const double *base, int *rep)
{
    for (int a = 0; a < nv;) {
        int b = a, best = hs[a].i;
        while (b < nv && hs[b].h == hs[a].h) {
            int x = hs[b++].i;
            if (base[x] < base[best] || (base[x] == base[best] && x < best))
                best = x;
        }
        for (int c = a; c < b; c++)
            rep[hs[c].i] = best;
        a = b;
    }
}

/* Cuts the inflow tables (rows x nv, in place) and base down to the n
 * columns xmap[0..n). */
static void keep_columns(inflow *in, int nin, double *base, int nv, const int *xmap, int n)
{
    for (int f = 0; f < nin; f++) {
        for (int64_t r = 0; r < in[f].rows; r++) {
            const double *src = in[f].t + r * nv;
            double *dst = in[f].t + r * n;
            for (int i = 0; i < n; i++)
                dst[i] = src[xmap[i]]; /* dst <= src: in place */
        }
        for (int j = 0; j < in[f].nv; j++)
            in[f].stride[j] = in[f].stride[j] / nv * n;
    }
    for (int i = 0; i < n; i++)
        base[i] = base[xmap[i]];
}

/* Configs of the eliminated op v whose columns are bitwise equal in every
 * inflow table differ only in their own cost (base): of each such class
 * only the cheapest (lowest index among equals) can be a row's argmin, so
 * the tables are cut down to those columns. xmap[0..*nx): the kept configs
 * in increasing order. */
static int compact_eliminated(inflow *in, int nin, double *base, int nv, int *xmap, int *nx)
{
    hashed *hs = malloc((size_t)nv * sizeof *hs);
    int *rep = malloc((size_t)nv * sizeof *rep);
    if (!hs || !rep) {
        free(hs);
        free(rep);
        return -1;
    }
    hashed_init(hs, nv);
    for (int f = 0; f < nin; f++)
        hash_columns(hs, in[f].t, in[f].rows, nv);
    qsort(hs, (size_t)nv, sizeof *hs, cmp_hashed);
    cheapest_of_runs(hs, nv, base, rep);
    free(hs);
    for (int f = 0; f < nin; f++)
        unmerge_columns(rep, in[f].t, in[f].rows, nv);
    int n = 0;
    for (int x = 0; x < nv; x++)
        if (rep[x] == x)
            xmap[n++] = x;
    free(rep);
    *nx = n;
    if (n < nv)
        keep_columns(in, nin, base, nv, xmap, n);
    return 0;
}

/* The classes of rep (rep[x] <= x) as lists: cmem the configs class by
 * class, each class in increasing order; cstart[c] its first, cstart[n] =
 * nv. Classes are numbered by their lowest config (known before the
 * class's other members); a counting sort into cmem. rep is overwritten. */
static void class_lists(int *rep, int *cid, int nv, int *cmem, int *cstart, int *ncls)
{
    int n = 0;
    for (int x = 0; x < nv; x++)
        cid[x] = rep[x] == x ? n++ : cid[rep[x]];
    for (int c = 0; c <= n; c++)
        cstart[c] = 0;
    for (int x = 0; x < nv; x++)
        cstart[cid[x] + 1]++;
    for (int c = 0; c < n; c++)
        cstart[c + 1] += cstart[c];
    for (int c = 0; c < n; c++)
        rep[c] = cstart[c]; /* rep reused: next free slot of each class */
    for (int x = 0; x < nv; x++)
        cmem[rep[cid[x]]++] = x;
    *ncls = n;
}

/* Column classes of the last-level tables (the tables that vary with the
 * last var of the dependent set): configs x of v whose columns are bitwise
 * equal in all of them, as lists (class_lists: cmem, cstart, ncls). */
static int last_level_classes(const inflow *in, int nin, int level, int nv, int *cmem,
                              int *cstart, int *ncls)
{
    hashed *hs = malloc((size_t)nv * sizeof *hs);
    int *rep = malloc((size_t)nv * sizeof *rep), *cid = malloc((size_t)nv * sizeof *cid);
    if (!hs || !rep || !cid) {
        free(hs);
        free(rep);
        free(cid);
        return -1;
    }
    hashed_init(hs, nv);
    for (int f = 0; f < nin; f++)
        if (in[f].level == level)
            hash_columns(hs, in[f].t, in[f].rows, nv);
    qsort(hs, (size_t)nv, sizeof *hs, cmp_hashed);
    first_of_runs(hs, nv, rep);
    free(hs);
    for (int f = 0; f < nin; f++)
        if (in[f].level == level)
            unmerge_columns(rep, in[f].t, in[f].rows, nv);
    class_lists(rep, cid, nv, cmem, cstart, ncls);
    free(rep);
    free(cid);
    return 0;
}

/* Configs of the eliminated op by their accumulated cost, for the bounded
 * minimum below. */
typedef struct {
    double k;
    int x;
} keyed;

/* Sorts a[0..n) by k, stably (tmp: n entries). */
#define KEYED_LESS(ctx, x, y) ((x).k < (y).k)
SB_DEFINE_MSORT(msort_keyed, keyed, KEYED_LESS)

/* k's bits as an unsigned key in the order of k (-0 as +0, which compare
 * equal): the sign bit flipped for k >= 0, every bit for k < 0. */
static inline uint64_t keyed_bits(double k)
{
    uint64_t u;
    k = k == 0.0 ? 0.0 : k;
    memcpy(&u, &k, sizeof u);
    return u >> 63 ? ~u : u | (UINT64_C(1) << 63);
}

/* The same order as msort_keyed: a least-significant-digit radix sort on
 * keyed_bits, a byte a pass, which keeps equal keys in their order (stable)
 * and orders unequal ones as < does, so the result is the one every stable
 * sort by k gives. Passes whose byte is the same in every key are skipped
 * (the exponent's, mostly). The threshold scan sorts a config list per
 * prefix: the merge sort's compares were a tenth of the CPU time of
 * gpt3-175b at p = 16384. Short lists, and any with a NaN (which < does not
 * order), go to the merge sort. */
static void sort_keyed(keyed *a, keyed *tmp, int n)
{
    if (n < 64) {
        msort_keyed(a, tmp, (size_t)n, NULL);
        return;
    }
    uint32_t cnt[8][256];
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < n; i++) {
        if (a[i].k != a[i].k) {
            msort_keyed(a, tmp, (size_t)n, NULL);
            return;
        }
        uint64_t u = keyed_bits(a[i].k);
        for (int d = 0; d < 8; d++)
            cnt[d][(u >> (8 * d)) & 255]++;
    }
    keyed *src = a, *dst = tmp;
    for (int d = 0; d < 8; d++) {
        uint32_t *c = cnt[d];
        if (c[(keyed_bits(a[0].k) >> (8 * d)) & 255] == (uint32_t)n)
            continue; /* one byte value throughout: the order stays */
        uint32_t at = 0;
        for (int b = 0; b < 256; b++) {
            uint32_t m = c[b];
            c[b] = at;
            at += m;
        }
        for (int i = 0; i < n; i++)
            dst[c[(keyed_bits(src[i].k) >> (8 * d)) & 255]++] = src[i];
        keyed *sw = src;
        src = dst;
        dst = sw;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
}

int sb_dp_sort_order(const double *k, int n, int *order)
{
    keyed *a = malloc(2 * (size_t)(n > 0 ? n : 1) * sizeof *a);
    if (!a)
        return -1;
    for (int i = 0; i < n; i++)
        a[i] = (keyed){.k = k[i], .x = i};
    sort_keyed(a, a + n, n);
    for (int i = 0; i < n; i++)
        order[i] = a[i].x;
    free(a);
    return 0;
}

/* ---- one elimination ---------------------------------------------------------
 *
 * eliminate(v) gathers v's live factors and its dependent set S, loads the
 * factors as inflow tables, computes the new table g over S (copied from an
 * earlier elimination when the inputs are equal, else row by row through
 * the shortcuts), then retires v's factors and adds g in their place. */

typedef int (*vec_scan_fn)(const double *, const double *const *, int, int, double *);
static vec_scan_fn vec_scan_pick(int forced);

/* The state of one elimination of v. */
typedef struct {
    engine *E;
    int v;
    int nv;                  /* configs of v in play: all, then those compact_eliminated keeps */
    double full;             /* entries of a table over every config of S */
    int k, S[MAX_SCOPE];     /* the dependent set, by increasing id */
    int nin;                 /* v's live factors */
    double size;             /* entries of g (as the charge counts them) */
    int64_t gsize;
    double *g;               /* gsize: the new table over S, last var fastest */
    uint16_t *arg;           /* gsize: v's (original) config reaching each entry */
    inflow *in;              /* nfl of the nin factors: those with vars besides v */
    int nfl;
    double *P;               /* (k + 1) x nv: P[0] v's own costs (base), P[l + 1] plus the
                              * inflows of levels 0..l at the current assignment */
    double *val;             /* nv: the sums of one entry (plain scan) */
    int *xmap;               /* nv: kept config -> v's original config */
    uint64_t id;             /* content id of g (dp_reuse.h) */
    /* equal rows: per position q of S, rep[q][i] (config_classes) and the
     * representatives reps[q][0..nrep[q]) in increasing order */
    int *repbuf;
    int *rep[MAX_SCOPE], *reps[MAX_SCOPE], nrep[MAX_SCOPE], all_reps;
    int64_t gstride[MAX_SCOPE];      /* g is over the representatives: nrep[q] along q */
    int *gcm[MAX_SCOPE];             /* g's classes along q (dp_buf; NULL: all reps) */
    int idx[MAX_SCOPE], r[MAX_SCOPE]; /* current assignment of S; its rank among the reps */
    int nlast_in, last_in;   /* inflows at the last level: how many, the last of them */
    /* bounded minima */
    int bounded, threshold;
    keyed *ks;               /* 2 nv: v's configs (threshold) or the classes (bounded) by prev */
    double *rmbuf, **rowmin; /* rowmin[q][row]: least entry of each row of last-level inflow q */
    int *cbuf, ncls;         /* last-level column classes: members (nv), starts (ncls + 1), ties */
    int *rowsort;            /* threshold: rows x nv, each row's configs by value */
    char *rowdone;           /* threshold: which rows are sorted */
    keyed *rks;              /* 2 nv: a row being sorted */
    int *tie;                /* nv: tied classes (bounded scan) */
    vec_scan_fn vscan;       /* the vector scan (min_vec) when not NULL */
    vec_scan_fn vlater;      /* the vector scan, if a sample of the other scans is slower */
    long long steps;         /* configs (threshold) or classes (bounded) the scans met */
    double *Pblk;            /* VEC_BLOCK x nv: the prefixes of a block (vector scan) */
    /* the column-class scan (class_scan_setup): the vector scan over the
     * ncc classes of v's configs with equal last-level columns */
    int cscan, ncc;
    int *cc;                 /* members class by class (nv), starts (ncc + 1), each config's
                              * class (nv), the classes whose lowest config is below x (nv) */
    double **ct;             /* nfl: a last-level inflow's rows over the classes (rows x ncc) */
    double *Cm, *Ce;         /* VEC_BLOCK x ncc: per prefix of a block, each class's least
                              * prev, and the least prev of its members below Ca's */
    int *Ca;                 /* VEC_BLOCK x ncc: the first member reaching the least prev */
    /* the entry-wise scan (entwise_setup): ENT_W entries at once */
    int (*ekern)(const double *, const double *const *, int, int, int64_t, double *, int *);
    int64_t eld;             /* entries per row of et (the last var's reps, padded) */
    double **et;             /* nfl: a last-level inflow as nv rows over the last var's reps */
} elim;

static int elim_oom(const elim *el)
{
    return sb_fail(el->E->err, SB_EXIT_INTERNAL, "out of memory at vertex '%s'",
                   el->E->pb->m->ops[el->v].name);
}

/* The number of v's live tables over more vars than v that read u. */
static int tables_with(const elim *el, int u)
{
    const engine *E = el->E;
    int n = 0;
    for (int i = 0; i < E->nvf[el->v]; i++) {
        const factor *f = &E->f[E->vf[el->v][i]];
        for (int j = 0; f->alive && f->nv > 1 && j < f->nv; j++)
            n += f->vars[j] == u;
    }
    return n;
}

/* When more than one table reads the last var of S and exactly one reads
 * another, that one (the highest id of them) moves last, so that the
 * threshold scan applies (bounded_setup). The rest stay by id. Only the
 * order in which an entry's tables are added changes (not plain). */
static void last_in_one_table(elim *el)
{
    int k = el->k, *S = el->S;
    if (k < 2 || tables_with(el, S[k - 1]) <= 1)
        return;
    for (int q = k - 2; q >= 0; q--)
        if (tables_with(el, S[q]) == 1) {
            int u = S[q];
            memmove(S + q, S + q + 1, (size_t)(k - 1 - q) * sizeof *S);
            S[k - 1] = u;
            return;
        }
}

/* S: the vars other than v of v's live factors, sorted by id (but
 * last_in_one_table); nin: the number of those factors. */
static int gather_depset(elim *el)
{
    const engine *E = el->E;
    int v = el->v;
    for (int i = 0; i < E->nvf[v]; i++) {
        const factor *f = &E->f[E->vf[v][i]];
        if (!f->alive)
            continue;
        el->nin++;
        for (int j = 0; j < f->nv; j++) {
            int u = f->vars[j], seen = u == v;
            for (int q = 0; q < el->k && !seen; q++)
                seen = el->S[q] == u;
            if (seen)
                continue;
            if (el->k == MAX_SCOPE)
                return sb_fail(E->err, SB_EXIT_INTERNAL, "dependent set of '%s' exceeds %d vertices",
                               E->pb->m->ops[v].name, MAX_SCOPE);
            el->S[el->k++] = u;
        }
    }
    int *S = el->S;
    for (int i = 1; i < el->k; i++)
        for (int j = i; j > 0 && S[j - 1] > S[j]; j--) {
            int t = S[j];
            S[j] = S[j - 1];
            S[j - 1] = t;
        }
    if (!E->plain)
        last_in_one_table(el);
    return 0;
}

/* Allocates the elimination's buffers (g and its argmins come with the
 * size of g: result_alloc). */
static int elim_alloc(elim *el)
{
    int nv = el->nv;
    el->in = calloc((size_t)(el->nin ? el->nin : 1), sizeof *el->in);
    el->P = malloc((size_t)(el->k + 1) * (size_t)nv * sizeof *el->P);
    el->val = malloc((size_t)nv * sizeof *el->val);
    el->xmap = malloc((size_t)nv * sizeof *el->xmap);
    if (!el->in || !el->P || !el->val || !el->xmap)
        return elim_oom(el);
    return 0;
}

/* Charges g and its argmins (10 bytes an entry, gsize entries) and
 * allocates them. */
static int result_alloc(elim *el, int64_t gsize)
{
    engine *E = el->E;
    el->gsize = gsize;
    el->size = (double)gsize;
    if (charge(E, el->size * (8.0 + 2.0), el->v, el->k))
        return -1;
    el->g = dp_buf_alloc((size_t)el->gsize * sizeof(double));
    el->arg = dp_buf_alloc((size_t)el->gsize * sizeof(uint16_t));
    if (!el->g || !el->arg)
        return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory at vertex '%s' (table of %.0f entries)",
                       E->pb->m->ops[el->v].name, el->size);
    return 0;
}

/* Factor f (over v and part of S) as inflow fl: its vars in S's order, v
 * innermost. A pending edge table is built so, a table already so is taken
 * over (its space is still counted as f's until f is retired), others are
 * transposed. */
static int load_inflow(elim *el, factor *f, inflow *fl)
{
    engine *E = el->E;
    int order[MAX_SCOPE], no = 0, nv = el->nv;
    const int *cmv = NULL; /* f's classes of v: expanded to v's configs below */
    int dimv = nv;
    fl->level = -1;
    for (int q = 0; q < el->k; q++)
        for (int j = 0; j < f->nv; j++)
            if (f->vars[j] == el->S[q]) {
                order[no] = el->S[q];
                fl->v[no] = el->S[q];
                fl->dim[no] = f->dim[j];
                fl->cm[no] = f->cm[j] ? dp_buf_ref(f->cm[j]) : NULL;
                fl->pos[no++] = q;
                fl->level = q;
            }
    for (int j = 0; j < f->nv; j++)
        if (f->vars[j] == el->v) {
            cmv = f->cm[j];
            dimv = f->dim[j];
        }
    order[no] = el->v;
    fl->nv = no;
    int64_t st = nv;
    for (int j = no - 1; j >= 0; j--) {
        fl->stride[j] = st;
        st *= fl->dim[j];
    }
    fl->rows = st / nv;
    double *t;
    if (!f->t) {
        if (build_pending(E, f, order[0]))
            return -1;
        t = f->t;
        f->t = NULL;
    } else if (memcmp(order, f->vars, (size_t)f->nv * sizeof *order) == 0
               && !dp_buf_shared(f->t)) {
        t = f->t;
        f->t = NULL;
    } else {
        t = transpose(E, f, order);
        if (!t)
            return -1;
    }
    if (!cmv) {
        fl->t = t;
        return 0;
    }
    /* v's axis by classes: one column per config of v (v innermost) */
    fl->t = dp_buf_alloc((size_t)fl->rows * (size_t)nv * sizeof *fl->t);
    if (!fl->t) {
        dp_buf_free(t);
        return elim_oom(el);
    }
    for (int64_t r = 0; r < fl->rows; r++)
        for (int x = 0; x < nv; x++)
            fl->t[r * nv + x] = t[r * dimv + cmv[x]];
    dp_buf_free(t);
    return 0;
}

/* P[0] (base, nv): the sum of v's one-var factors. */
static void load_base(elim *el)
{
    const engine *E = el->E;
    double *base = el->P;
    for (int x = 0; x < el->nv; x++)
        base[x] = 0.0;
    for (int i = 0; i < E->nvf[el->v]; i++) {
        const factor *f = &E->f[E->vf[el->v][i]];
        if (f->alive && f->nv == 1)
            for (int x = 0; x < el->nv; x++)
                base[x] += f->t[f->cm[0] ? f->cm[0][x] : x];
    }
}

/* v's live factors over more vars than v become the inflows in[0..nfl). */
static int load_inflows(elim *el)
{
    const engine *E = el->E;
    for (int i = 0; i < E->nvf[el->v]; i++) {
        factor *f = &E->f[E->vf[el->v][i]];
        if (f->alive && f->nv > 1 && load_inflow(el, f, &el->in[el->nfl++]))
            return -1;
    }
    return 0;
}

/* The rows op of a pending pair table read by v's elimination: its other
 * op (load_inflow puts it first). */
static int pending_rows_op(const elim *el, const factor *f)
{
    return f->vars[0] == el->v ? f->vars[1] : f->vars[0];
}

/* The elimination's key (dp_reuse.h): v's config count and own costs, the
 * dependent set's sizes, and per table v reads (in the order it reads
 * them) its content id and the position in S of each of its vars (-1: v).
 * Pending pair tables get their ids here. */
static int elim_key(elim *el, dp_key *key)
{
    engine *E = el->E;
    int hdr[2] = {el->nv, el->k};
    dp_key_add(key, hdr, sizeof hdr);
    for (int q = 0; q < el->k; q++) {
        int d = dom(E, el->S[q]);
        dp_key_add(key, &d, sizeof d);
    }
    dp_key_add(key, el->P, (size_t)el->nv * sizeof *el->P);
    for (int i = 0; i < E->nvf[el->v]; i++) {
        factor *f = &E->f[E->vf[el->v][i]];
        if (!f->alive || f->nv == 1)
            continue;
        if (!f->t && !f->id && pair_table(E, f, pending_rows_op(el, f), NULL))
            return -1;
        int pos[MAX_SCOPE];
        for (int j = 0; j < f->nv; j++) {
            pos[j] = -1;
            for (int q = 0; q < el->k; q++)
                if (el->S[q] == f->vars[j])
                    pos[j] = q;
        }
        dp_key_add(key, &f->id, sizeof f->id);
        dp_key_add(key, &f->nv, sizeof f->nv);
        dp_key_add(key, pos, (size_t)f->nv * sizeof *pos);
    }
    return 0;
}

/* Equal columns of v (compact_eliminated): from here nv counts the kept
 * configs and xmap maps them back. */
static int keep_distinct_columns(elim *el)
{
    int nx = el->nv;
    for (int x = 0; x < el->nv; x++)
        el->xmap[x] = x;
    if (!el->E->plain && compact_eliminated(el->in, el->nfl, el->P, el->nv, el->xmap, &nx))
        return elim_oom(el);
    el->E->configs_merged += el->nv - nx;
    el->nv = nx;
    return 0;
}

/* An empty dependent set: g is the single least base (lowest config on
 * ties). */
static void min_over_v(elim *el)
{
    const double *base = el->P;
    int best = 0;
    for (int x = 1; x < el->nv; x++)
        if (base[x] < base[best])
            best = x;
    el->g[0] = base[best];
    el->arg[0] = (uint16_t)el->xmap[best];
}

/* rep, reps, nrep and all_reps of every position of S (plain: every config
 * its own representative); gstride: g's strides; the last-level inflows. */
static int row_classes(elim *el)
{
    const engine *E = el->E;
    int k = el->k;
    int64_t nbuf = 0;
    for (int q = 0; q < k; q++)
        nbuf += 2 * (int64_t)dom(E, el->S[q]);
    el->repbuf = malloc((size_t)nbuf * sizeof *el->repbuf);
    if (!el->repbuf)
        return elim_oom(el);
    int *bp = el->repbuf;
    el->all_reps = 1;
    for (int q = 0; q < k; q++) {
        int n = dom(E, el->S[q]);
        el->rep[q] = bp;
        el->reps[q] = bp + n;
        bp += 2 * n;
        for (int i = 0; E->plain && i < n; i++)
            el->rep[q][i] = i;
        if (!E->plain && config_classes(el->E, el->in, el->nfl, q, el->S[q], el->nv, el->rep[q]))
            return elim_oom(el);
        el->nrep[q] = 0;
        for (int i = 0; i < n; i++)
            if (el->rep[q][i] == i)
                el->reps[q][el->nrep[q]++] = i;
        el->all_reps &= el->nrep[q] == n;
    }
    /* g holds one entry per assignment of representatives; along each q
     * with fewer representatives than configs, gcm[q] maps a config to its
     * representative's rank (equal rows, never copied) */
    int64_t gsize = 1;
    for (int q = 0; q < k; q++)
        gsize *= el->nrep[q];
    el->gstride[k - 1] = 1;
    for (int q = k - 2; q >= 0; q--)
        el->gstride[q] = el->gstride[q + 1] * el->nrep[q + 1];
    for (int q = 0; q < k; q++) {
        int n = dom(E, el->S[q]);
        if (el->nrep[q] == n)
            continue;
        el->gcm[q] = dp_buf_alloc((size_t)n * sizeof(int));
        if (!el->gcm[q])
            return elim_oom(el);
        int *rank = el->gcm[q];
        for (int r = 0; r < el->nrep[q]; r++)
            rank[el->reps[q][r]] = r;
        for (int i = 0; i < n; i++)
            rank[i] = rank[el->rep[q][i]]; /* rep[i] <= i: its rank is set */
    }
    el->E->entries_copied += (long long)(el->full - (double)gsize);
    if (result_alloc(el, gsize))
        return -1;
    el->nlast_in = 0;
    el->last_in = -1;
    for (int q = 0; q < el->nfl; q++)
        if (el->in[q].level == k - 1) {
            el->nlast_in++;
            el->last_in = q;
        }
    return 0;
}

/* rowmin: the least entry of each row of every last-level inflow. */
static void fill_rowmin(elim *el)
{
    int nv = el->nv;
    double *rp = el->rmbuf;
    for (int q = 0; q < el->nfl; q++) {
        if (el->in[q].level != el->k - 1)
            continue;
        el->rowmin[q] = rp;
        for (int64_t r0 = 0; r0 < el->in[q].rows; r0++) {
            const double *t = el->in[q].t + r0 * nv;
            double mn = t[0];
            for (int x = 1; x < nv; x++)
                mn = t[x] < mn ? t[x] : mn;
            *rp++ = mn;
        }
    }
}

/* Chooses the bounded scan when there are enough rows to pay for sorting,
 * the threshold scan when one last-level inflow of moderate size (its rows
 * sorted when first used), and allocates their buffers. */
static int bounded_setup(elim *el)
{
    int nv = el->nv, k = el->k;
    const engine *E = el->E;
    if (!E->plain && E->scan != 1 && (E->scan == 2 || nv <= VEC_MAX_NV))
        el->vscan = vec_scan_pick(E->scan == 2);
    if (el->vscan) {
        el->E->rows_vector += el->nrep[k - 1];
        return 0;
    }
    if (!E->plain && E->scan != 1)
        el->vlater = vec_scan_pick(0); /* scan_rows samples the others first */
    el->bounded = !el->E->plain && el->nrep[k - 1] >= 8 && nv >= 8;
    el->E->rows_bounded += el->bounded ? (long long)el->nrep[k - 1] : 0;
    if (!el->bounded)
        return 0;
    int64_t nmin = 0;
    for (int q = 0; q < el->nfl; q++)
        if (el->in[q].level == k - 1)
            nmin += el->in[q].rows;
    el->ks = malloc(2 * (size_t)nv * sizeof *el->ks);
    el->rmbuf = malloc((size_t)(nmin ? nmin : 1) * sizeof *el->rmbuf);
    el->rowmin = calloc((size_t)el->nfl, sizeof *el->rowmin);
    el->cbuf = malloc((2 * (size_t)nv + 1) * sizeof *el->cbuf);
    el->tie = malloc((size_t)nv * sizeof *el->tie);
    el->threshold = el->nlast_in == 1 && el->in[el->last_in].rows * nv <= (1 << 24);
    if (el->threshold) {
        el->rowsort = dp_buf_alloc((size_t)(el->in[el->last_in].rows * nv) * sizeof *el->rowsort);
        el->rks = malloc(2 * (size_t)nv * sizeof *el->rks);
        el->rowdone = calloc((size_t)el->in[el->last_in].rows, 1);
    }
    if (!el->ks || !el->rmbuf || !el->rowmin || !el->cbuf || !el->tie
        || (el->threshold && (!el->rowsort || !el->rowdone || !el->rks))
        || (!el->threshold
            && last_level_classes(el->in, el->nfl, k - 1, nv, el->cbuf, el->cbuf + nv, &el->ncls)))
        return elim_oom(el);
    el->E->rows_threshold += el->threshold ? (long long)el->nrep[k - 1] : 0;
    fill_rowmin(el);
    return 0;
}

/* Offset in fl's table of the row (over v) at the current assignment. */
static int64_t row_offset(const inflow *fl, const int *idx)
{
    int64_t off = 0;
    for (int j = 0; j < fl->nv; j++) {
        int i = idx[fl->pos[j]];
        off += (fl->cm[j] ? fl->cm[j][i] : i) * fl->stride[j];
    }
    return off;
}

/* P[l + 1] = P[l] + the inflows of level l at the current assignment, for
 * the levels from lvl up to k - 2. */
static void fill_prefix(elim *el, int lvl)
{
    int nv = el->nv;
    for (int l = lvl; l < el->k - 1; l++) {
        double *prev = el->P + (size_t)l * nv, *cur = el->P + (size_t)(l + 1) * nv;
        memcpy(cur, prev, (size_t)nv * sizeof *cur);
        for (int q = 0; q < el->nfl; q++) {
            if (el->in[q].level != l)
                continue;
            const double *ft = el->in[q].t + row_offset(&el->in[q], el->idx);
            for (int x = 0; x < nv; x++)
                cur[x] += ft[x];
        }
    }
}

/* ks for the current prefix: v's configs by prev (threshold scan), or the
 * last-level column classes by their least prev (bounded scan). */
static void order_by_prev(elim *el, const double *prev)
{
    int nv = el->nv;
    keyed *ks = el->ks;
    if (el->threshold) {
        for (int x = 0; x < nv; x++)
            ks[x] = (keyed){.k = prev[x], .x = x};
        sort_keyed(ks, ks + nv, nv);
    } else if (el->bounded) {
        const int *cmem = el->cbuf, *cstart = el->cbuf + nv;
        for (int c = 0; c < el->ncls; c++) {
            double mn = prev[cmem[cstart[c]]];
            for (int i = cstart[c] + 1; i < cstart[c + 1]; i++)
                mn = prev[cmem[i]] < mn ? prev[cmem[i]] : mn;
            ks[c] = (keyed){.k = mn, .x = c};
        }
        sort_keyed(ks, ks + el->ncls, el->ncls);
    }
}

/* The threshold scan's order of the row at off of the last-level inflow:
 * its configs by value (sorted when first used). */
static const int *sorted_row(elim *el, const double *ft, int64_t off)
{
    int nv = el->nv;
    int *ob = el->rowsort + off;
    if (!el->rowdone[off / nv]) {
        for (int x = 0; x < nv; x++)
            el->rks[x] = (keyed){.k = ft[x], .x = x};
        sort_keyed(el->rks, el->rks + nv, nv);
        for (int x = 0; x < nv; x++)
            ob[x] = el->rks[x].x;
        el->rowdone[off / nv] = 1;
    }
    return ob;
}

/* Fagin's threshold scan over two sorted lists, configs of v by prev (ks)
 * and by the one last-level row's value: take the next of each in turn; a
 * config not yet met in either has a sum of at least the two next values'
 * (rounded sums are monotone), so the scan stops once that exceeds the
 * best sum. Every config reaching the best sum has been met: the lowest of
 * them wins, as in the plain scan. */
static void min_threshold(elim *el, const double *prev, int64_t at)
{
    int nv = el->nv;
    const keyed *ks = el->ks;
    int64_t off = row_offset(&el->in[el->last_in], el->idx);
    const double *ft = el->in[el->last_in].t + off;
    const int *ob = sorted_row(el, ft, off);
    int best = nv, i = 0;
    double bv = INFINITY;
    for (; i < nv; i++) {
        int x = ks[i].x;
        double sx = prev[x] + ft[x];
        if (sx < bv || (sx == bv && x < best)) {
            bv = sx;
            best = x;
        }
        x = ob[i];
        sx = prev[x] + ft[x];
        if (sx < bv || (sx == bv && x < best)) {
            bv = sx;
            best = x;
        }
        if (i + 1 < nv && ks[i + 1].k + ft[ob[i + 1]] > bv)
            break;
    }
    el->steps += 2 * (i < nv ? i + 1 : nv);
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[best];
}

/* The lowest config of the tied classes tie[0..ntie) whose sum is bv. */
static int lowest_reaching(const elim *el, const double *prev, const double *const *fts, int nq,
                           const int *tie, int ntie, double bv)
{
    const int *cmem = el->cbuf, *cstart = el->cbuf + el->nv;
    int best = el->nv;
    for (int t = 0; t < ntie; t++)
        for (int i = cstart[tie[t]]; i < cstart[tie[t] + 1] && cmem[i] < best; i++) {
            int x = cmem[i];
            double sx = prev[x];
            for (int q = 0; q < nq; q++)
                sx += fts[q][x];
            if (sx == bv) {
                best = x;
                break;
            }
        }
    return best;
}

/* The bounded scan: classes of v's configs (equal last-level columns) by
 * increasing least prev (ks): that least prev plus the least of each
 * last-level row is a lower bound of every member's sum (a rounded sum is
 * monotone in each term), so the scan stops once it exceeds the best sum;
 * a class's least sum is its least prev's. Then, as in the plain scan, the
 * lowest config whose sum is the least, from the classes that reach it. */
static void min_bounded(elim *el, const double *prev, int64_t at)
{
    const int *cmem = el->cbuf, *cstart = el->cbuf + el->nv;
    int *tie = el->tie;
    const double *fts[MAX_SCOPE + 1];
    double mins[MAX_SCOPE + 1];
    int nq = 0;
    for (int q = 0; q < el->nfl; q++) {
        if (el->in[q].level != el->k - 1)
            continue;
        int64_t off = row_offset(&el->in[q], el->idx);
        fts[nq] = el->in[q].t + off;
        mins[nq++] = el->rowmin[q][off / el->nv];
    }
    const keyed *ks = el->ks; /* locals: the stores to tie[] may alias el's fields */
    int ntie = 0, ncls = el->ncls;
    double bv = INFINITY;
    for (int i = 0; i < ncls; i++) {
        double lb = ks[i].k;
        for (int q = 0; q < nq; q++)
            lb += mins[q];
        if (lb > bv)
            break;
        int x0 = cmem[cstart[ks[i].x]];
        double sx = ks[i].k;
        for (int q = 0; q < nq; q++)
            sx += fts[q][x0];
        if (sx < bv) {
            bv = sx;
            ntie = 0;
        }
        if (sx == bv)
            tie[ntie++] = ks[i].x;
        el->steps++;
    }
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[lowest_reaching(el, prev, fts, nq, tie, ntie, bv)];
}

/* One inflow at the last level: add and take the least in one pass (the
 * same sums as min_plain). */
static void min_one_table(elim *el, const double *prev, int64_t at)
{
    const inflow *fq = &el->in[el->last_in];
    const double *ft = fq->t + row_offset(fq, el->idx);
    int best = 0;
    double bv = prev[0] + ft[0];
    for (int x = 1; x < el->nv; x++) {
        double sx = prev[x] + ft[x];
        if (sx < bv) {
            bv = sx;
            best = x;
        }
    }
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[best];
}

/* The plain scan: prev plus every last-level row, then the least (lowest
 * config on ties). */
static void min_plain(elim *el, const double *prev, int64_t at)
{
    int nv = el->nv;
    double *val = el->val;
    memcpy(val, prev, (size_t)nv * sizeof *val);
    for (int q = 0; q < el->nfl; q++) {
        if (el->in[q].level != el->k - 1)
            continue;
        const double *ft = el->in[q].t + row_offset(&el->in[q], el->idx);
        for (int x = 0; x < nv; x++)
            val[x] += ft[x];
    }
    int best = 0;
    double bv = val[0];
    for (int x = 1; x < nv; x++)
        if (val[x] < bv) {
            bv = val[x];
            best = x;
        }
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[best];
}

/* ---- the vector scan -------------------------------------------------------
 *
 * The plain scan's sums, four configs at a time: lane l keeps the least
 * sum over the configs x = l mod 4 met so far and the first x reaching it
 * (a later x replaces it only when strictly less), so the lowest x of the
 * least sum is the lowest among the lanes holding it. Each sum is added in
 * the plain scan's order (prev, then the last-level rows in inflow order),
 * so every value and argmin is min_plain's. With few configs of v this
 * beats the bounded and threshold scans (their sorting and random access
 * cost more than reading every config): the transformer's decoder chain. */
typedef double vd4 __attribute__((vector_size(32)));
typedef long long vl4 __attribute__((vector_size(32)));

#define VEC_SCAN_BODY                                                                      \
    {                                                                                      \
        vd4 m = {INFINITY, INFINITY, INFINITY, INFINITY};                                  \
        vl4 mi = {0, 0, 0, 0}, xi = {0, 1, 2, 3}, four = {4, 4, 4, 4};                     \
        int x = 0;                                                                         \
        for (; x + 4 <= nv; x += 4, xi += four) {                                          \
            vd4 sv;                                                                        \
            memcpy(&sv, prev + x, sizeof sv);                                              \
            for (int q = 0; q < nq; q++) {                                                 \
                vd4 f;                                                                     \
                memcpy(&f, fts[q] + x, sizeof f);                                          \
                sv += f;                                                                   \
            }                                                                              \
            vl4 lt = sv < m;                                                               \
            m = (vd4)(((vl4)sv & lt) | ((vl4)m & ~lt));                                    \
            mi = (xi & lt) | (mi & ~lt);                                                   \
        }                                                                                  \
        double bv = INFINITY;                                                              \
        int best = nv;                                                                     \
        for (int l = 0; l < 4; l++)                                                        \
            if (m[l] < bv || (m[l] == bv && (int)mi[l] < best)) {                          \
                bv = m[l];                                                                 \
                best = (int)mi[l];                                                         \
            }                                                                              \
        for (; x < nv; x++) {                                                              \
            double sx = prev[x];                                                           \
            for (int q = 0; q < nq; q++)                                                   \
                sx += fts[q][x];                                                           \
            if (sx < bv) {                                                                 \
                bv = sx;                                                                   \
                best = x;                                                                  \
            }                                                                              \
        }                                                                                  \
        if (best == nv) { /* every sum infinite (or NaN): the plain scan's x = 0 */        \
            best = 0;                                                                      \
            bv = prev[0];                                                                  \
            for (int q = 0; q < nq; q++)                                                   \
                bv += fts[q][0];                                                           \
        }                                                                                  \
        *bvp = bv;                                                                         \
        return best;                                                                       \
    }

static int vec_scan_generic(const double *prev, const double *const *fts, int nq, int nv,
                            double *bvp)
    VEC_SCAN_BODY

#if defined(__x86_64__) && defined(__GNUC__)
/* With the x86 vector units: two passes, the least sum (vminpd), then the
 * first config whose sum (added again, in the same order: the same bits)
 * equals it. W doubles a vector; LOAD, ADD, MIN, EQ (a lane mask as bits)
 * the unit's operations. */
#define VEC_TWO_PASS(W, VT, LOAD, ADD, MIN, EQ, SET1, HMIN)                                  \
    {                                                                                      \
        /* two running minima (even and odd vectors): the least of a set  \
         * does not depend on the order it is taken in, and the two chains \
         * of vminpd overlap */                                            \
        VT m = SET1(INFINITY), m1 = SET1(INFINITY);                                        \
        int x = 0;                                                                         \
        if (nq == 1) {                                                                     \
            const double *f0 = fts[0];                                                     \
            for (; x + 2 * W <= nv; x += 2 * W) {                                          \
                m = MIN(m, ADD(LOAD(prev + x), LOAD(f0 + x)));                             \
                m1 = MIN(m1, ADD(LOAD(prev + x + W), LOAD(f0 + x + W)));                   \
            }                                                                              \
            for (; x + W <= nv; x += W)                                                    \
                m = MIN(m, ADD(LOAD(prev + x), LOAD(f0 + x)));                             \
        } else {                                                                           \
            for (; x + W <= nv; x += W) {                                                  \
                VT sv = LOAD(prev + x);                                                    \
                for (int q = 0; q < nq; q++)                                               \
                    sv = ADD(sv, LOAD(fts[q] + x));                                        \
                m = MIN(m, sv);                                                            \
            }                                                                              \
        }                                                                                  \
        double bv = HMIN(MIN(m, m1));                                                      \
        for (int y = x; y < nv; y++) {                                                     \
            double sx = prev[y];                                                           \
            for (int q = 0; q < nq; q++)                                                   \
                sx += fts[q][y];                                                           \
            bv = sx < bv ? sx : bv;                                                        \
        }                                                                                  \
        VT b = SET1(bv);                                                                   \
        for (x = 0; x + W <= nv; x += W) {                                                 \
            VT sv = LOAD(prev + x);                                                        \
            for (int q = 0; q < nq; q++)                                                   \
                sv = ADD(sv, LOAD(fts[q] + x));                                            \
            unsigned eq = EQ(sv, b);                                                       \
            if (eq) {                                                                      \
                *bvp = bv;                                                                 \
                return x + __builtin_ctz(eq);                                              \
            }                                                                              \
        }                                                                                  \
        for (; x < nv; x++) {                                                              \
            double sx = prev[x];                                                           \
            for (int q = 0; q < nq; q++)                                                   \
                sx += fts[q][x];                                                           \
            if (sx == bv) {                                                                \
                *bvp = bv;                                                                 \
                return x;                                                                  \
            }                                                                              \
        }                                                                                  \
        /* no sum equals the least (a NaN): the plain scan's rule */                       \
        return vec_scan_generic(prev, fts, nq, nv, bvp);                                   \
    }

__attribute__((target("avx2"))) static double hmin_avx2(__m256d m)
{
    __m128d lo = _mm256_castpd256_pd128(m), hi = _mm256_extractf128_pd(m, 1);
    lo = _mm_min_pd(lo, hi);
    return _mm_cvtsd_f64(_mm_min_sd(lo, _mm_unpackhi_pd(lo, lo)));
}
#define EQ_AVX2(a, b) ((unsigned)_mm256_movemask_pd(_mm256_cmp_pd(a, b, _CMP_EQ_OQ)))

__attribute__((target("avx2"))) static int vec_scan_avx2(const double *prev,
                                                          const double *const *fts, int nq,
                                                          int nv, double *bvp)
    VEC_TWO_PASS(4, __m256d, _mm256_loadu_pd, _mm256_add_pd, _mm256_min_pd, EQ_AVX2,
                 _mm256_set1_pd, hmin_avx2)

/* One pass with AVX2: lane l keeps the least sum over the configs
 * x = l mod 4 met so far and the first x reaching it (replaced only when
 * strictly less: vcmppd LT, vblendvpd; the config numbers as doubles,
 * exact below 2^53), then the lowest x among the lanes holding the least,
 * the tail, and the plain scan's x = 0 when no sum is finite: the generic
 * kernel's rule, one read of the rows instead of the two passes' up to
 * two. Each sum is added in the plain scan's order. */
__attribute__((target("avx2"))) static int vec_scan_avx2_1p(const double *prev,
                                                             const double *const *fts, int nq,
                                                             int nv, double *bvp)
{
    __m256d m = _mm256_set1_pd(INFINITY), mi = _mm256_setzero_pd();
    __m256d m1 = m, mi1 = mi; /* odd blocks of 4 (one table): two chains overlap */
    __m256d xi = _mm256_setr_pd(0, 1, 2, 3), four = _mm256_set1_pd(4);
    int x = 0;
    if (nq == 1) {
        const double *f0 = fts[0];
        __m256d xi1 = _mm256_add_pd(xi, four), eight = _mm256_set1_pd(8);
        for (; x + 8 <= nv; x += 8) {
            __m256d sv = _mm256_add_pd(_mm256_loadu_pd(prev + x), _mm256_loadu_pd(f0 + x));
            __m256d sv1 =
                _mm256_add_pd(_mm256_loadu_pd(prev + x + 4), _mm256_loadu_pd(f0 + x + 4));
            __m256d lt = _mm256_cmp_pd(sv, m, _CMP_LT_OQ);
            __m256d lt1 = _mm256_cmp_pd(sv1, m1, _CMP_LT_OQ);
            m = _mm256_blendv_pd(m, sv, lt);
            mi = _mm256_blendv_pd(mi, xi, lt);
            m1 = _mm256_blendv_pd(m1, sv1, lt1);
            mi1 = _mm256_blendv_pd(mi1, xi1, lt1);
            xi = _mm256_add_pd(xi, eight);
            xi1 = _mm256_add_pd(xi1, eight);
        }
        for (; x + 4 <= nv; x += 4, xi = _mm256_add_pd(xi, four)) {
            __m256d sv = _mm256_add_pd(_mm256_loadu_pd(prev + x), _mm256_loadu_pd(f0 + x));
            __m256d lt = _mm256_cmp_pd(sv, m, _CMP_LT_OQ);
            m = _mm256_blendv_pd(m, sv, lt);
            mi = _mm256_blendv_pd(mi, xi, lt);
        }
    } else {
        for (; x + 4 <= nv; x += 4, xi = _mm256_add_pd(xi, four)) {
            __m256d sv = _mm256_loadu_pd(prev + x);
            for (int q = 0; q < nq; q++)
                sv = _mm256_add_pd(sv, _mm256_loadu_pd(fts[q] + x));
            __m256d lt = _mm256_cmp_pd(sv, m, _CMP_LT_OQ);
            m = _mm256_blendv_pd(m, sv, lt);
            mi = _mm256_blendv_pd(mi, xi, lt);
        }
    }
    double mv[8], iv[8], bv = INFINITY;
    _mm256_storeu_pd(mv, m);
    _mm256_storeu_pd(iv, mi);
    _mm256_storeu_pd(mv + 4, m1);
    _mm256_storeu_pd(iv + 4, mi1);
    int best = nv;
    for (int l = 0; l < 8; l++) /* the least, the lowest config among the lanes holding it */
        if (mv[l] < bv || (mv[l] == bv && (int)iv[l] < best)) {
            bv = mv[l];
            best = (int)iv[l];
        }
    for (; x < nv; x++) {
        double sx = prev[x];
        for (int q = 0; q < nq; q++)
            sx += fts[q][x];
        if (sx < bv) {
            bv = sx;
            best = x;
        }
    }
    if (best == nv) { /* every sum infinite (or NaN): the plain scan's x = 0 */
        best = 0;
        bv = prev[0];
        for (int q = 0; q < nq; q++)
            bv += fts[q][0];
    }
    *bvp = bv;
    return best;
}

#define EQ_AVX512(a, b) ((unsigned)_mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ))
__attribute__((target("avx512f"))) static int vec_scan_avx512(const double *prev,
                                                              const double *const *fts,
                                                              int nq, int nv, double *bvp)
    VEC_TWO_PASS(8, __m512d, _mm512_loadu_pd, _mm512_add_pd, _mm512_min_pd, EQ_AVX512,
                 _mm512_set1_pd, _mm512_reduce_min_pd)
#endif

/* The vector scan for this CPU: AVX-512, AVX2, or (forced: 1; else NULL,
 * where the bounded and threshold scans are faster) the generic one.
 * SB_DP_ISA=avx2 (one pass), avx2-2pass (the two passes) or generic picks
 * a narrower one (tests, bench). */
static vec_scan_fn vec_scan_pick(int forced)
{
    (void)forced;
#if defined(__x86_64__) && defined(__GNUC__)
    const char *isa = getenv("SB_DP_ISA");
    if (__builtin_cpu_supports("avx512f") &&
        !(isa && (!strncmp(isa, "avx2", 4) || !strcmp(isa, "generic"))))
        return vec_scan_avx512;
    if (__builtin_cpu_supports("avx2") && !(isa && !strcmp(isa, "generic")))
        return isa && !strcmp(isa, "avx2-2pass") ? vec_scan_avx2 : vec_scan_avx2_1p;
#endif
    return forced ? vec_scan_generic : NULL;
}

int sb_dp_vec_scan(const double *prev, const double *const *fts, int nq, int nv, double *bv)
{
    return vec_scan_pick(1)(prev, fts, nq, nv, bv);
}

/* The vector scan of one entry (the assignment idx): g and arg at `at`. */
static void min_vec(elim *el, const double *prev, const int *idx, int64_t at)
{
    const double *fts[MAX_SCOPE + 1];
    int nq = 0;
    for (int q = 0; q < el->nfl; q++)
        if (el->in[q].level == el->k - 1)
            fts[nq++] = el->in[q].t + row_offset(&el->in[q], idx);
    double bv;
    int best = el->vscan(prev, fts, nq, el->nv, &bv);
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[best];
}

/* ---- the column-class scan ------------------------------------------------
 *
 * Configs x of v whose columns are bitwise equal in every last-level table
 * (last_level_classes) differ, within one entry, only in prev(x). A sum
 * prev(x) + t_1 + ... + t_n, rounded at each step, is monotone in prev(x),
 * so a class's least sum is the sum at its least prev (m_c, first reached
 * at config a_c): the vector scan runs over the classes' (m_c, columns)
 * instead of every config. The plain scan's argmin is the lowest config
 * whose sum is the least, bv: in a class reaching bv it is a_c unless a
 * member below a_c also reaches bv, which needs the least prev of those
 * members (e_c) to reach it; and only classes whose lowest config is below
 * the best config so far can hold a lower one (classes are numbered by
 * their lowest config). */

/* The column-class scan for an elimination of at least this many sums,
 * with at most nv / CLASS_GAIN classes. */
#define CLASS_MIN_SUMS 1e5
#define CLASS_GAIN 2

/* cc's parts (class_scan_setup). */
static const int *cc_members(const elim *el) { return el->cc; }
static const int *cc_starts(const elim *el) { return el->cc + el->nv; }
static const int *cc_class(const elim *el) { return el->cc + 2 * el->nv + 1; }
static const int *cc_below(const elim *el) { return el->cc + 3 * el->nv + 1; }

/* Each config's class and, per config x, the classes whose lowest config
 * is below x (cc's last two parts, from the lists). */
static void class_index(elim *el)
{
    int nv = el->nv, ncc = el->ncc;
    const int *cmem = cc_members(el), *cst = cc_starts(el);
    int *cid = el->cc + 2 * nv + 1, *below = el->cc + 3 * nv + 1;
    for (int c = 0; c < ncc; c++)
        for (int i = cst[c]; i < cst[c + 1]; i++)
            cid[cmem[i]] = c;
    for (int x = 0, nb = 0; x < nv; x++) {
        while (nb < ncc && cmem[cst[nb]] < x)
            nb++;
        below[x] = nb;
    }
}

/* ct[q]: last-level inflow q's rows over the classes (rows x ncc), each
 * class's column taken at its lowest config (all members' are equal). */
static int class_tables(elim *el)
{
    int nv = el->nv, ncc = el->ncc;
    const int *cmem = cc_members(el), *cst = cc_starts(el);
    el->ct = calloc((size_t)el->nfl, sizeof *el->ct);
    if (!el->ct)
        return -1;
    for (int q = 0; q < el->nfl; q++) {
        const inflow *fl = &el->in[q];
        if (fl->level != el->k - 1)
            continue;
        el->ct[q] = malloc((size_t)fl->rows * (size_t)ncc * sizeof **el->ct);
        if (!el->ct[q])
            return -1;
        for (int64_t r = 0; r < fl->rows; r++)
            for (int c = 0; c < ncc; c++)
                el->ct[q][r * ncc + c] = fl->t[r * nv + cmem[cst[c]]];
    }
    return 0;
}

/* The block buffers of the class scan (one set per thread). */
static int class_buffers(elim *el)
{
    size_t n = (size_t)VEC_BLOCK * (size_t)el->ncc;
    el->Cm = malloc(n * sizeof *el->Cm);
    el->Ce = malloc(n * sizeof *el->Ce);
    el->Ca = malloc(n * sizeof *el->Ca);
    return el->Cm && el->Ce && el->Ca ? 0 : -1;
}

/* Takes the column-class scan for a vector-scanned elimination of enough
 * sums whose last-level columns fall into few classes (sb_search_opts
 * colclass 0; 2: any with fewer classes than configs, 1: none). */
static int class_scan_setup(elim *el, int64_t nprefix)
{
    int nv = el->nv, k = el->k;
    const engine *E = el->E;
    double sums = (double)nprefix * el->nrep[k - 1] * nv;
    int always = E->colclass == 2;
    if (!el->vscan || E->plain || E->colclass == 1 || (!always && sums < CLASS_MIN_SUMS))
        return 0;
    el->cc = malloc((4 * (size_t)nv + 1) * sizeof *el->cc);
    if (!el->cc
        || last_level_classes(el->in, el->nfl, k - 1, nv, el->cc, el->cc + nv, &el->ncc))
        return elim_oom(el);
    if (always ? el->ncc == nv : (int64_t)el->ncc * CLASS_GAIN > nv)
        return 0;
    class_index(el);
    if (class_tables(el) || class_buffers(el))
        return elim_oom(el);
    el->cscan = 1;
    el->E->rows_colclass += el->nrep[k - 1];
    return 0;
}

/* The b-th prefix of a block (prev: its sums through level k - 2): per
 * class c, m_c = its members' least prev, a_c the first member reaching it
 * (the lowest member when all are infinite), e_c the least prev of the
 * members below a_c (infinite when none). */
static void class_stats(elim *el, int b)
{
    int nv = el->nv, ncc = el->ncc;
    const double *prev = el->Pblk + (size_t)b * nv;
    double *m = el->Cm + (size_t)b * ncc, *e = el->Ce + (size_t)b * ncc;
    int *a = el->Ca + (size_t)b * ncc;
    const int *cid = cc_class(el), *cmem = cc_members(el), *cst = cc_starts(el);
    for (int c = 0; c < ncc; c++) {
        m[c] = INFINITY;
        e[c] = INFINITY;
        a[c] = cmem[cst[c]];
    }
    for (int x = 0; x < nv; x++) {
        int c = cid[x];
        if (prev[x] < m[c]) {
            e[c] = m[c]; /* the least over the members before x */
            m[c] = prev[x];
            a[c] = x;
        }
    }
}

/* The lowest member of class c whose sum is bv (it reaches bv at a_c or
 * not at all; fts: the rows over the classes). */
static int class_lowest(const elim *el, int b, const double *const *fts, int nq, int c,
                        double bv)
{
    int nv = el->nv, ncc = el->ncc;
    size_t o = (size_t)b * ncc + (size_t)c;
    int a = el->Ca[o];
    double se = el->Ce[o];
    for (int q = 0; q < nq; q++)
        se += fts[q][c];
    if (se > bv) /* no member below a_c reaches bv (monotone sums) */
        return a;
    const double *prev = el->Pblk + (size_t)b * nv;
    const int *cmem = cc_members(el), *cst = cc_starts(el);
    for (int i = cst[c]; i < cst[c + 1] && cmem[i] < a; i++) {
        double sx = prev[cmem[i]];
        for (int q = 0; q < nq; q++)
            sx += fts[q][c];
        if (sx == bv)
            return cmem[i];
    }
    return a;
}

/* The lowest config whose sum is bv, the least sum, of the b-th prefix's
 * entry whose rows over the classes are fts, c0 the first class reaching
 * bv: from c0 and the tied classes whose lowest config is below the best
 * so far. */
static int class_resolve(const elim *el, int b, const double *const *fts, int nq, int c0,
                         double bv)
{
    const double *m = el->Cm + (size_t)b * el->ncc;
    const int *below = cc_below(el);
    int best = class_lowest(el, b, fts, nq, c0, bv);
    for (int c = c0 + 1; c < below[best]; c++) {
        double sc = m[c];
        for (int q = 0; q < nq; q++)
            sc += fts[q][c];
        if (sc == bv) {
            int x = class_lowest(el, b, fts, nq, c, bv);
            best = x < best ? x : best;
        }
    }
    return best;
}

/* The class scan of one entry (the assignment idx, the b-th prefix of its
 * block): the least sum over the classes (the vector scan over m_c and the
 * rows over the classes: the first class reaching it), then the lowest
 * config reaching it, from that class and the tied classes whose lowest
 * config is below the best so far. */
static void min_class(elim *el, int b, const int *idx, int64_t at)
{
    const double *fts[MAX_SCOPE + 1];
    int nq = 0, ncc = el->ncc;
    for (int q = 0; q < el->nfl; q++)
        if (el->in[q].level == el->k - 1)
            fts[nq++] = el->ct[q] + row_offset(&el->in[q], idx) / el->nv * ncc;
    double bv;
    int c0 = el->vscan(el->Cm + (size_t)b * ncc, fts, nq, ncc, &bv);
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[class_resolve(el, b, fts, nq, c0, bv)];
}

/* ---- the entry-wise scan ----------------------------------------------------
 *
 * When every last-level table is over (last var, v) alone, the entries of
 * one prefix differ only in the last var's row. The entry-wise scan takes
 * ENT_W of them at once, one vector lane an entry: for x = 0, 1, ... it
 * adds prev[x] (broadcast) and each table's entries at x (the tables
 * stored as nv rows over the last var, et) in the plain scan's order, and
 * a lane keeps its sum and x when strictly less than its least so far.
 * So each lane ends with its entry's least sum and the first (lowest) x
 * reaching it: the plain scan's, bit for bit (no sum finite: x = 0, as
 * the plain scan). No horizontal minimum, no second pass and no tail per
 * entry: the decoder chain's 161 to 261 configs paid for those as much
 * as for the sums. */

#define ENT_W 32 /* entries per kernel call: four vectors of eight */
#define ENT_MIN_SUMS 1e5
#define ENT_MAX_TABLE (1 << 24) /* et's entries at most (per table) */

typedef double vd8 __attribute__((vector_size(64)));
typedef long long vl8 __attribute__((vector_size(64)));

/* ENT_W entries: lane l of entry column l of the et rows (tt[q] at the
 * block's first entry, ld entries a row): its least sum into gm[l], the
 * first x reaching it into gi[l]. */
/* One vector of lanes (entries OFF .. OFF + 7 of the block) at config x. */
#define ENT_LANES(M, MI, OFF)                                                              \
    {                                                                                      \
        vd8 sv;                                                                            \
        memcpy(&sv, tt[0] + xo + (OFF), sizeof sv);                                        \
        sv = px + sv;                                                                      \
        for (int q = 1; q < nq; q++) {                                                     \
            vd8 t;                                                                         \
            memcpy(&t, tt[q] + xo + (OFF), sizeof t);                                      \
            sv += t;                                                                       \
        }                                                                                  \
        vl8 lt = sv < M;                                                                   \
        M = (vd8)(((vl8)sv & lt) | ((vl8)M & ~lt));                                        \
        MI = (xv & lt) | (MI & ~lt);                                                       \
    }

static inline __attribute__((always_inline)) int
ent_body(const double *prev, const double *const *tt, int nq, int nv, int64_t ld, double *gm,
         int *gi)
{
    const vd8 inf = {INFINITY, INFINITY, INFINITY, INFINITY,
                     INFINITY, INFINITY, INFINITY, INFINITY};
    const vl8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
    vd8 m0 = inf, m1 = inf, m2 = inf, m3 = inf; /* four chains in registers */
    vl8 i0 = zero, i1 = zero, i2 = zero, i3 = zero;
    for (int x = 0; x < nv; x++) {
        double p = prev[x];
        vd8 px = {p, p, p, p, p, p, p, p};
        vl8 xv = zero + x;
        int64_t xo = x * ld;
        ENT_LANES(m0, i0, 0)
        ENT_LANES(m1, i1, 8)
        ENT_LANES(m2, i2, 16)
        ENT_LANES(m3, i3, 24)
    }
    for (int j = 0; j < 8; j++) {
        gm[j] = m0[j], gm[8 + j] = m1[j], gm[16 + j] = m2[j], gm[24 + j] = m3[j];
        gi[j] = (int)i0[j], gi[8 + j] = (int)i1[j], gi[16 + j] = (int)i2[j];
        gi[24 + j] = (int)i3[j];
    }
    return 0;
}

static int ent_generic(const double *prev, const double *const *tt, int nq, int nv, int64_t ld,
                       double *gm, int *gi)
{
    return ent_body(prev, tt, nq, nv, ld, gm, gi);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static int ent_avx2(const double *prev,
                                                     const double *const *tt, int nq, int nv,
                                                     int64_t ld, double *gm, int *gi)
{
    return ent_body(prev, tt, nq, nv, ld, gm, gi);
}

__attribute__((target("avx512f"))) static int ent_avx512(const double *prev,
                                                          const double *const *tt, int nq,
                                                          int nv, int64_t ld, double *gm,
                                                          int *gi)
{
    return ent_body(prev, tt, nq, nv, ld, gm, gi);
}
#endif

/* The entry-wise kernel of the vector scan's unit (vscan). */
static void ent_pick(elim *el)
{
    el->ekern = ent_generic;
#if defined(__x86_64__) && defined(__GNUC__)
    if (el->vscan == vec_scan_avx512)
        el->ekern = ent_avx512;
    else if (el->vscan == vec_scan_avx2 || el->vscan == vec_scan_avx2_1p)
        el->ekern = ent_avx2;
#endif
}

/* et[q]: last-level inflow q as nv rows (ncc over classes: its ct) over
 * the last var's reps (eld a row, the padding 0). */
static int ent_tables(elim *el)
{
    int nv = el->nv, k = el->k, nlast = el->nrep[k - 1];
    const int *reps = el->reps[k - 1];
    el->et = calloc((size_t)el->nfl, sizeof *el->et);
    if (!el->et)
        return -1;
    int w = el->cscan ? el->ncc : nv; /* columns: configs, or classes (ct) */
    for (int q = 0; q < el->nfl; q++) {
        const inflow *fl = &el->in[q];
        if (fl->level != k - 1)
            continue;
        /* ENT_W more: a block may start at any entry (threads' chunks).
         * From the DP's buffer pool (a table of 10-20 MB per elimination,
         * fresh pages from calloc each time, was a twentieth of the CPU
         * time of gpt3-175b at p = 16384 in page faults); every entry is
         * written below, the padding with 0 */
        size_t n = (size_t)w * (size_t)el->eld + ENT_W;
        double *et = el->et[q] = dp_buf_alloc(n * sizeof **el->et);
        if (!et)
            return -1;
        const double *src = el->cscan ? el->ct[q] : fl->t;
        for (int jr = 0; jr < nlast; jr++) {
            int i = reps[jr];
            const double *row = src + (int64_t)(fl->cm[0] ? fl->cm[0][i] : i) * w;
            for (int x = 0; x < w; x++)
                et[x * el->eld + jr] = row[x];
        }
        for (int x = 0; nlast < el->eld && x < w; x++)
            memset(et + (size_t)x * el->eld + nlast, 0, (size_t)(el->eld - nlast) * sizeof *et);
        memset(et + (size_t)w * el->eld, 0, ENT_W * sizeof *et);
    }
    return 0;
}

/* Takes the entry-wise scan for a vector-scanned elimination (over
 * configs or column classes) of enough sums whose last-level tables are
 * all over (last var, v) (sb_search_opts entwise 0; 2: any such, 1:
 * none). */
static int entwise_setup(elim *el, int64_t nprefix)
{
    int nv = el->nv, k = el->k, nlast = el->nrep[k - 1];
    const engine *E = el->E;
    double sums = (double)nprefix * nlast * nv;
    if (!el->vscan || E->plain || E->entwise == 1
        || (E->entwise != 2 && sums < ENT_MIN_SUMS))
        return 0;
    for (int q = 0; q < el->nfl; q++)
        if (el->in[q].level == k - 1 && el->in[q].nv != 1)
            return 0;
    el->eld = (nlast + ENT_W - 1) / ENT_W * ENT_W;
    if ((double)(el->cscan ? el->ncc : nv) * el->eld > ENT_MAX_TABLE)
        return 0;
    if (ent_tables(el))
        return elim_oom(el);
    ent_pick(el);
    el->E->rows_entwise += nlast;
    return 0;
}

/* The entries jlo .. jhi - 1 (ranks of the last var's reps) of the b-th
 * prefix of a block, at row of g: ENT_W at a time. Over configs each
 * lane's first x is the argmin; over classes it is the first class
 * reaching the least, and class_resolve finds the lowest config (the
 * class scan's rule, min_class). */
static void min_entwise(elim *el, int b, int64_t row, int jlo, int jhi)
{
    const double *tt[MAX_SCOPE + 1], *prev = el->cscan ? el->Cm + (size_t)b * el->ncc
                                                       : el->Pblk + (size_t)b * el->nv;
    double gm[ENT_W];
    int gi[ENT_W], nq = 0, w = el->cscan ? el->ncc : el->nv;
    for (int jb = jlo; jb < jhi; jb += ENT_W) {
        nq = 0;
        for (int q = 0; q < el->nfl; q++)
            if (el->in[q].level == el->k - 1)
                tt[nq++] = el->et[q] + jb;
        el->ekern(prev, tt, nq, w, el->eld, gm, gi);
        int n = jhi - jb < ENT_W ? jhi - jb : ENT_W;
        for (int l = 0; l < n; l++) {
            int x = gi[l];
            if (el->cscan) {
                const double *fts[MAX_SCOPE + 1];
                int i = el->reps[el->k - 1][jb + l], nf = 0;
                for (int q = 0; q < el->nfl; q++) {
                    const inflow *fl = &el->in[q];
                    if (fl->level == el->k - 1)
                        fts[nf++] = el->ct[q] + (int64_t)(fl->cm[0] ? fl->cm[0][i] : i) * w;
                }
                x = class_resolve(el, b, fts, nf, x, gm[l]);
            }
            el->g[row + jb + l] = gm[l];
            el->arg[row + jb + l] = (uint16_t)el->xmap[x];
        }
    }
}

/* One entry by the column-class scan (tests): v's nv configs with sums
 * prev + fts[0] + ... + fts[nq - 1], as one-row last-level tables over
 * (u, v) for a one-config u; entwise: through the entry-wise kernel. The
 * least sum in *bv, the lowest config reaching it returned; -1 when out
 * of memory. */
int sb_dp_class_scan(const double *prev, const double *const *fts, int nq, int nv, int entwise,
                     double *bv)
{
    inflow in[MAX_SCOPE + 1] = {0};
    double g = 0;
    uint16_t arg = 0;
    int *xmap = malloc((size_t)nv * sizeof *xmap), rc = -1, idx[1] = {0}, rep0[1] = {0};
    elim el = {.nv = nv, .k = 1, .nfl = nq, .in = in, .xmap = xmap, .g = &g, .arg = &arg,
               .vscan = vec_scan_pick(1), .cscan = 1, .eld = ENT_W};
    el.reps[0] = rep0;
    el.nrep[0] = 1;
    for (int q = 0; q < nq && q <= MAX_SCOPE; q++)
        in[q] = (inflow){.t = (double *)fts[q], .rows = 1, .level = 0, .nv = 1,
                         .stride = {nv}, .dim = {1}};
    el.cc = malloc((4 * (size_t)nv + 1) * sizeof *el.cc);
    el.Pblk = malloc((size_t)nv * sizeof *el.Pblk);
    if (nq <= MAX_SCOPE && xmap && el.cc && el.Pblk
        && !last_level_classes(in, nq, 0, nv, el.cc, el.cc + nv, &el.ncc)
        && !class_tables(&el) && !class_buffers(&el) && !(entwise && ent_tables(&el))) {
        for (int x = 0; x < nv; x++)
            xmap[x] = x;
        memcpy(el.Pblk, prev, (size_t)nv * sizeof *prev);
        class_index(&el);
        class_stats(&el, 0);
        if (entwise) {
            ent_pick(&el);
            min_entwise(&el, 0, 0, 0, 1);
        } else {
            min_class(&el, 0, idx, 0);
        }
        *bv = g;
        rc = arg;
    }
    for (int q = 0; q < nq && q <= MAX_SCOPE; q++) {
        free(el.ct ? el.ct[q] : NULL);
        dp_buf_free(el.et ? el.et[q] : NULL);
    }
    free(el.ct);
    free(el.et);
    free(el.cc);
    free(el.Pblk);
    free(el.Cm);
    free(el.Ce);
    free(el.Ca);
    free(xmap);
    return rc;
}

/* The next assignment of S less its last var, over the representatives
 * (an odometer, the deepest position fastest): the lowest position that
 * changed, -1 after the last. */
static int next_prefix(elim *el)
{
    int l = el->k - 2;
    while (l >= 0) {
        if (++el->r[l] < el->nrep[l]) {
            el->idx[l] = el->reps[l][el->r[l]];
            break;
        }
        el->r[l] = 0;
        el->idx[l] = el->reps[l][0];
        l--;
    }
    return l;
}

/* g and arg at the assignments of representatives whose prefix (S less its
 * last var, numbered in odometer order) is in [plo, phi) and whose last
 * var is the jlo-th to the (jhi - 1)-th representative: for each prefix
 * the sums through level k - 2 (P), then each entry of the last var by the
 * scan that applies. */
static void scan_part(elim *el, int64_t plo, int64_t phi, int jlo, int jhi)
{
    int k = el->k, lvl = 0; /* lvl: recompute P from this level */
    int64_t rest = plo;
    for (int q = k - 2; q >= 0; q--) {
        el->r[q] = (int)(rest % el->nrep[q]);
        rest /= el->nrep[q];
        el->idx[q] = el->reps[q][el->r[q]];
    }
    if (el->vscan) {
        /* VEC_BLOCK prefixes at a time, so that each last-level row is read
         * from memory once per block, not once per prefix */
        int nv = el->nv, ix[VEC_BLOCK][MAX_SCOPE];
        int64_t row[VEC_BLOCK];
        const int *reps = el->reps[k - 1];
        for (int64_t pi = plo; pi < phi;) {
            int nb = 0;
            for (; nb < VEC_BLOCK && pi < phi; nb++, pi++) {
                fill_prefix(el, lvl);
                memcpy(el->Pblk + (size_t)nb * nv, el->P + (size_t)(k - 1) * nv,
                       (size_t)nv * sizeof *el->P);
                memcpy(ix[nb], el->idx, (size_t)k * sizeof *el->idx);
                if (el->cscan)
                    class_stats(el, nb);
                row[nb] = 0;
                for (int q = 0; q < k - 1; q++)
                    row[nb] += el->r[q] * el->gstride[q];
                lvl = next_prefix(el);
            }
            /* entry-wise: a block of ENT_W entries for every prefix of the
             * block in turn, so that its et columns (w x ENT_W) are read
             * from L2 once per prefix block, not each prefix from memory */
            for (int jb = jlo; el->et && jb < jhi; jb += ENT_W)
                for (int b = 0; b < nb; b++)
                    min_entwise(el, b, row[b], jb, jb + ENT_W < jhi ? jb + ENT_W : jhi);
            for (int jr = jlo; !el->et && jr < jhi; jr++)
                for (int b = 0; b < nb; b++) {
                    ix[b][k - 1] = reps[jr];
                    if (el->cscan)
                        min_class(el, b, ix[b], row[b] + jr);
                    else
                        min_vec(el, el->Pblk + (size_t)b * nv, ix[b], row[b] + jr);
                }
        }
        return;
    }
    for (int64_t pi = plo; pi < phi; pi++) {
        fill_prefix(el, lvl);
        const double *prev = el->P + (size_t)(k - 1) * el->nv;
        int64_t row = 0;
        for (int q = 0; q < k - 1; q++)
            row += el->r[q] * el->gstride[q];
        order_by_prev(el, prev);
        const int *reps = el->reps[k - 1];
        for (int jr = jlo; jr < jhi; jr++) {
            el->idx[k - 1] = reps[jr];
            if (el->threshold)
                min_threshold(el, prev, row + jr);
            else if (el->bounded)
                min_bounded(el, prev, row + jr);
            else if (el->nlast_in == 1)
                min_one_table(el, prev, row + jr);
            else
                min_plain(el, prev, row + jr);
        }
        lvl = next_prefix(el);
    }
}

/* The CPUs this process may run on (its affinity mask): the DP's threads
 * when sb_search_opts.threads is 0. At least 1, at most DP_MAX_THREADS. */
int sb_dp_default_threads(void)
{
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    return n < 1 ? 1 : n > DP_MAX_THREADS ? DP_MAX_THREADS : n;
}

/* The number of threads for the scan: 1 when the work is small or the DP
 * is plain, else sb_search_opts.threads (0: sb_dp_default_threads). */
static int scan_threads(const elim *el, int64_t nprefix)
{
    double work = (double)nprefix * el->nrep[el->k - 1] * el->nv;
    if (work < 1e6 || el->E->plain)
        return 1;
    int t = el->E->threads > 0 ? el->E->threads : sb_dp_default_threads();
    return t > DP_MAX_THREADS ? DP_MAX_THREADS : t;
}

/* A thread's copy of el: the same tables, its own scan buffers (P, val,
 * ks, rks, tie); -1 when out of memory. */
static int worker_open(const elim *el, elim *w)
{
    int nv = el->nv;
    *w = *el;
    w->P = malloc((size_t)(el->k + 1) * (size_t)nv * sizeof *w->P);
    w->val = malloc((size_t)nv * sizeof *w->val);
    w->ks = malloc(2 * (size_t)nv * sizeof *w->ks);
    w->rks = malloc(2 * (size_t)nv * sizeof *w->rks);
    w->tie = malloc((size_t)nv * sizeof *w->tie);
    w->Pblk = el->vscan ? malloc((size_t)VEC_BLOCK * (size_t)nv * sizeof *w->Pblk) : NULL;
    w->Cm = w->Ce = NULL;
    w->Ca = NULL;
    if (!w->P || !w->val || !w->ks || !w->rks || !w->tie || (el->vscan && !w->Pblk)
        || (el->cscan && class_buffers(w)))
        return -1;
    memcpy(w->P, el->P, (size_t)nv * sizeof *w->P); /* base */
    return 0;
}

static void worker_close(elim *w)
{
    free(w->Cm);
    free(w->Ce);
    free(w->Ca);
    free(w->Pblk);
    free(w->P);
    free(w->val);
    free(w->ks);
    free(w->rks);
    free(w->tie);
}

/* ---- the fill's threads -----------------------------------------------------
 *
 * A parallel part of an elimination runs on nt threads: the caller and
 * nt - 1 started for it (pthreads), each taking the next task from one
 * atomic counter until none is left, then joined. No thread outlives the
 * part, so none spins between parts (OpenMP's idle workers did: a sixth of
 * the CPU time at p = 256, and more wall time than they saved on a loaded
 * machine). */

typedef struct par_job par_job;
struct par_job {
    void (*run)(par_job *j, void *ctx); /* one thread's share: takes tasks until none left */
    void *(*open)(par_job *j);          /* a thread's context (NULL: out of memory) */
    void (*close)(void *ctx);
    elim *el;
    int64_t ntask;
    atomic_llong next;
    atomic_int failed;
    int64_t nchunk, per; /* scan_rows: chunks per prefix or in all, prefixes or entries */
    int by_prefix, nlast;
};

/* The next task of j, -1 after the last. */
static int64_t par_next(par_job *j)
{
    int64_t t = atomic_fetch_add(&j->next, 1);
    return t < j->ntask ? t : -1;
}

static void *par_thread(void *arg)
{
    par_job *j = arg;
    void *ctx = j->open(j);
    if (!ctx)
        atomic_store(&j->failed, 1);
    else
        j->run(j, ctx);
    j->close(ctx);
    return NULL;
}

/* Runs j on nt threads (fewer when a thread cannot be started: the others
 * take its tasks); -1 when a thread ran out of memory. */
static int par_run(par_job *j, int nt)
{
    pthread_t th[DP_MAX_THREADS];
    int started = 0;
    for (int i = 1; i < nt && i < DP_MAX_THREADS; i++)
        if (!pthread_create(&th[started], NULL, par_thread, j))
            started++;
    par_thread(j);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return atomic_load(&j->failed) ? -1 : 0;
}

/* presort_rows' thread context: a row being sorted. */
static void *presort_open(par_job *j)
{
    return malloc(2 * (size_t)j->el->nv * sizeof(keyed));
}

static void presort_close(void *ctx) { free(ctx); }

/* Sorts the threshold scan's rows r0 (tasks) at representative
 * assignments. */
static void presort_run(par_job *j, void *ctx)
{
    elim *el = j->el;
    const inflow *fl = &el->in[el->last_in];
    int nv = el->nv;
    keyed *rks = ctx;
    for (int64_t r0; (r0 = par_next(j)) >= 0;) {
        int ok = 1;
        for (int jj = 0; jj < fl->nv && ok; jj++) {
            int i = (int)(r0 * nv / fl->stride[jj] % fl->dim[jj]);
            ok = fl->cm[jj] || el->rep[fl->pos[jj]][i] == i; /* classes: every row */
        }
        if (!ok)
            continue;
        const double *ft = fl->t + r0 * nv;
        for (int x = 0; x < nv; x++)
            rks[x] = (keyed){.k = ft[x], .x = x};
        sort_keyed(rks, rks + nv, nv);
        for (int x = 0; x < nv; x++)
            el->rowsort[r0 * nv + x] = rks[x].x;
        el->rowdone[r0] = 1;
    }
}

/* The threshold scan's rows at representative assignments, sorted before
 * the threads start (they then only read rowsort); -1 when out of memory. */
static int presort_rows(elim *el, int nt)
{
    par_job j = {.run = presort_run, .open = presort_open, .close = presort_close, .el = el,
                 .ntask = el->in[el->last_in].rows};
    return par_run(&j, nt);
}

/* scan_rows' thread context: a copy of el with its own scan buffers. */
static void *fill_open(par_job *j)
{
    elim *w = malloc(sizeof *w);
    if (w && worker_open(j->el, w)) {
        worker_close(w);
        free(w);
        return NULL;
    }
    return w;
}

static void fill_close(void *ctx)
{
    if (ctx)
        worker_close(ctx);
    free(ctx);
}

/* scan_rows' tasks: chunk c of the prefixes (by_prefix), or of one
 * prefix's last-var entries. */
static void fill_run(par_job *j, void *ctx)
{
    elim *w = ctx;
    int64_t per = j->per, nchunk = j->nchunk;
    for (int64_t t; (t = par_next(j)) >= 0;) {
        int64_t c = t % nchunk, pi = t / nchunk;
        if (j->by_prefix)
            scan_part(w, per * c / nchunk, per * (c + 1) / nchunk, 0, j->nlast);
        else
            scan_part(w, pi, pi + 1, (int)(per * c / nchunk), (int)(per * (c + 1) / nchunk));
    }
}

/* g and arg at every assignment of representatives (scan_part), split
 * over threads in chunks handed out as the threads free up (the scans'
 * lengths differ from row to row, so equal halves left one thread idle
 * for much of an elimination): chunks of prefixes, or when there are few
 * prefixes, chunks of the last var's entries of each prefix. Each entry
 * is computed by one thread exactly as with one. */
static int scan_rows(elim *el)
{
    int k = el->k;
    int64_t nprefix = 1;
    for (int q = 0; q < k - 1; q++)
        nprefix *= el->nrep[q];
    int nt = scan_threads(el, nprefix), nlast = el->nrep[k - 1];
    if (el->vlater) {
        /* a sample of the bounded or threshold scan: when the configs (or
         * classes) it meets per entry cost more than reading all of them
         * four at a time, the vector scan does the whole table (the sampled
         * entries again: the same values) */
        int ns = nlast < VEC_SAMPLE ? nlast : VEC_SAMPLE;
        el->steps = 0;
        scan_part(el, 0, 1, 0, ns);
        if ((double)el->steps * VEC_STEP_COST > (double)ns * el->nv) {
            el->vscan = el->vlater;
            el->E->rows_vector += nlast;
        }
    }
    if (el->vscan && !el->Pblk) {
        el->Pblk = malloc((size_t)VEC_BLOCK * (size_t)el->nv * sizeof *el->Pblk);
        if (!el->Pblk)
            return elim_oom(el);
    }
    if (class_scan_setup(el, nprefix) || entwise_setup(el, nprefix))
        return -1;
    if (nt <= 1) {
        scan_part(el, 0, nprefix, 0, nlast);
        return 0;
    }
    if (nt > el->E->threads_used)
        el->E->threads_used = nt;
    if (el->threshold && !el->vscan && presort_rows(el, nt))
        return elim_oom(el);
    int by_prefix = nprefix >= 4 * nt;
    /* chunks: of prefixes (by_prefix), else of each prefix's last entries */
    int64_t per = by_prefix ? nprefix : nlast, nchunk = per < 16 * nt ? per : 16 * nt;
    par_job j = {.run = fill_run, .open = fill_open, .close = fill_close, .el = el,
                 .ntask = by_prefix ? nchunk : nprefix * nchunk, .nchunk = nchunk,
                 .per = per, .by_prefix = by_prefix, .nlast = nlast};
    return par_run(&j, nt) ? elim_oom(el) : 0;
}

/* A reused elimination does not build v's pending pair tables; they are
 * charged as if built, so that the peak table memory (and --max-table-mb)
 * does not depend on what was reused. */
static int charge_unbuilt(elim *el)
{
    engine *E = el->E;
    for (int i = 0; i < E->nvf[el->v]; i++) {
        const factor *f = &E->f[E->vf[el->v][i]];
        if (f->alive && !f->t && charge(E, (double)f->size * 8, f->vars[0], 2))
            return -1;
    }
    return 0;
}

/* g and arg: copied from an earlier elimination with the same key
 * (dp_reuse.h; not in plain mode), or computed from the inflows (and then
 * remembered); el->id the result's content id. */
static int compute_table(elim *el)
{
    engine *E = el->E;
    dp_key key = {0};
    load_base(el);
    if (!E->plain) {
        if (elim_key(el, &key)) {
            dp_key_free(&key);
            return -1;
        }
        dp_result got = {0};
        if (dp_memo_take(E->memo, &key, &got, &el->id)) {
            dp_key_free(&key);
            el->g = got.g;
            el->arg = got.arg;
            for (int q = 0; q < el->k; q++)
                el->gcm[q] = got.cm[q];
            el->E->entries_copied += (long long)(el->full - (double)got.size);
            el->gsize = got.size;
            el->size = (double)got.size;
            return charge(E, el->size * (8.0 + 2.0), el->v, el->k) || charge_unbuilt(el) ? -1 : 0;
        }
    }
    int rc = -1;
    if (load_inflows(el) || keep_distinct_columns(el))
        goto out;
    if (el->k == 0) {
        if (result_alloc(el, 1))
            goto out;
        min_over_v(el);
    } else {
        if (row_classes(el) || bounded_setup(el))
            goto out;
        if (scan_rows(el))
            goto out;
    }
    if (!E->plain) {
        dp_result res = {.g = el->g, .arg = el->arg, .size = el->gsize, .ncm = el->k};
        memcpy(res.cm, el->gcm, sizeof res.cm);
        el->id = dp_memo_put(E->memo, &key, &res);
    }
    rc = 0;
out:
    dp_key_free(&key);
    return rc;
}

/* Retires v's factors, adds g in their place (charged as a live table) and
 * hands the argmins to out. */
static int replace_factors(elim *el, step *out)
{
    engine *E = el->E;
    for (int i = 0; i < E->nvf[el->v]; i++) {
        factor *f = &E->f[E->vf[el->v][i]];
        if (!f->alive)
            continue;
        f->alive = 0;
        E->live_bytes -= (double)f->size * 8;
        dp_buf_free(f->t);
        f->t = NULL;
        for (int j = 0; j < f->nv; j++) {
            dp_buf_free(f->cm[j]);
            f->cm[j] = NULL;
        }
    }
    E->live_bytes -= el->size * 8.0; /* g is re-charged below as a live table */
    if (charge(E, el->size * 8.0, el->v, el->k))
        return -1;
    factor g = {.nv = el->k, .size = el->gsize, .t = el->g, .id = el->id};
    memcpy(g.vars, el->S, (size_t)el->k * sizeof *el->S);
    for (int q = 0; q < el->k; q++) {
        g.dim[q] = el->gcm[q] ? 0 : dom(E, el->S[q]);
        g.cm[q] = el->gcm[q];
    }
    /* the extents along classes: the largest class + 1 */
    for (int q = 0; q < el->k; q++)
        for (int i = 0; g.cm[q] && i < dom(E, el->S[q]); i++)
            g.dim[q] = g.cm[q][i] + 1 > g.dim[q] ? g.cm[q][i] + 1 : g.dim[q];
    if (add_factor(E, &g))
        return -1;
    el->g = NULL;
    out->nv = el->k;
    memcpy(out->vars, el->S, (size_t)el->k * sizeof *el->S);
    memcpy(out->dim, g.dim, sizeof out->dim);
    for (int q = 0; q < el->k; q++) {
        out->cm[q] = g.cm[q] ? dp_buf_ref(g.cm[q]) : NULL;
        el->gcm[q] = NULL; /* the factor's now */
    }
    out->arg = el->arg;
    el->arg = NULL;
    return 0;
}

static void elim_free(elim *el)
{
    for (int q = 0; q < el->nfl; q++) {
        dp_buf_free(el->in[q].t);
        for (int j = 0; j < el->in[q].nv; j++)
            dp_buf_free(el->in[q].cm[j]);
    }
    for (int q = 0; q < el->k; q++)
        dp_buf_free(el->gcm[q]);
    free(el->in);
    free(el->P);
    free(el->val);
    free(el->repbuf);
    free(el->xmap);
    free(el->ks);
    free(el->rmbuf);
    free(el->rowmin);
    free(el->cbuf);
    dp_buf_free(el->rowsort);
    free(el->rowdone);
    free(el->rks);
    free(el->tie);
    free(el->Pblk);
    free(el->cc);
    for (int q = 0; el->ct && q < el->nfl; q++)
        free(el->ct[q]);
    free(el->ct);
    free(el->Cm);
    free(el->Ce);
    free(el->Ca);
    for (int q = 0; el->et && q < el->nfl; q++)
        dp_buf_free(el->et[q]);
    free(el->et);
    dp_buf_free(el->g);
    dp_buf_free(el->arg);
}

/* Eliminates v: out gets its dependent set and argmins; *max_dep the
 * largest dependent set so far. */
static int eliminate(engine *E, int v, step *out, int *max_dep)
{
    elim el = {.E = E, .v = v, .nv = dom(E, v), .full = 1};
    double t0 = E->trace ? sb_now() : 0, c0 = E->trace ? cpu_seconds() : 0;
    long long hits = E->memo->hits;
    if (gather_depset(&el))
        return -1;
    for (int q = 0; q < el.k; q++)
        el.full *= dom(E, el.S[q]);
    if (el.k > *max_dep)
        *max_dep = el.k;
    int rc = elim_alloc(&el) || compute_table(&el) || replace_factors(&el, out)
                 ? -1
                 : 0;
    if (E->trace) {
        fprintf(stderr, "[dp] %-32s configs %5d kept %5d dep", E->pb->m->ops[v].name, dom(E, v),
                el.nv);
        for (int q = 0; q < el.k; q++)
            fprintf(stderr, " %s:%d/%d", E->pb->m->ops[el.S[q]].name, el.nrep[q],
                    dom(E, el.S[q]));
        fprintf(stderr, " entries %lld %s cpu %.4f s %.4f s\n", (long long)el.gsize,
                E->memo->hits > hits ? "reused"
                : el.cscan && el.et ? "classes/entrywise"
                : el.cscan      ? "classes"
                : el.et         ? "entrywise"
                : el.vscan      ? "vector"
                : el.threshold  ? "threshold"
                : el.bounded    ? "bounded"
                                : "plain",
                cpu_seconds() - c0, sb_now() - t0);
        if (el.cscan)
            fprintf(stderr, "[dp]   %d column classes of %d configs\n", el.ncc, el.nv);
    }
    elim_free(&el);
    return rc;
}

static void progress(int done, int n, double t0)
{
    fprintf(stderr, "\r[search] vertex %d/%d  %.1fs", done, n, sb_now() - t0);
    if (done == n)
        fputc('\n', stderr);
    fflush(stderr);
}

struct sb_dp_memo {
    dp_memo m;
};

sb_dp_memo *sb_dp_memo_new(double cap_bytes)
{
    sb_dp_memo *m = calloc(1, sizeof *m);
    if (m) {
        m->m.cap = cap_bytes;
        m->m.next_id = 1;
    }
    return m;
}

void sb_dp_memo_free(sb_dp_memo *m)
{
    if (!m)
        return;
    dp_memo_free(&m->m);
    free(m);
    /* the buffer pool the DPs sharing the memo kept between them */
    dp_buf_pool_drain();
    dp_buf_pool_limit(0);
}

/* The engine over problem sp: the table limit, the memo's capacity (128 MB,
 * or room for a few tables over two of the largest ops at large p; at most
 * a quarter of the table limit) and the per-var factor lists (NULL when
 * memory is short: the caller checks). */
static void engine_open(engine *E, const sb_problem *sp, const sb_search_opts *opts, int n,
                        sb_error *err)
{
    *E = (engine){.pb = sp, .n = n, .err = err, .plain = opts->plain, .scan = opts->scan,
                  .threads = opts->threads, .colclass = opts->colclass,
                  .entwise = opts->entwise};
    const char *tr = getenv("SB_DP_TRACE");
    E->trace = tr && *tr && strcmp(tr, "0");
    E->limit_bytes = (opts->max_table_mb > 0 ? opts->max_table_mb : 4096) * 1e6;
    double maxc = 0;
    for (int i = 0; i < n; i++)
        maxc = sp->cfg[i].n > maxc ? sp->cfg[i].n : maxc;
    E->own_memo.cap = fmin(E->limit_bytes / 4, fmax(128e6, 64 * maxc * maxc));
    E->own_memo.next_id = 1;
    E->memo = opts->memo ? &opts->memo->m : &E->own_memo;
    E->hits0 = E->memo->hits;
    dp_buf_pool_limit((size_t)fmin(512e6, E->limit_bytes / 8));
    E->vf = calloc((size_t)n, sizeof *E->vf);
    E->nvf = calloc((size_t)n, sizeof *E->nvf);
    E->capvf = calloc((size_t)n, sizeof *E->capvf);
}

static void engine_close(engine *E)
{
    for (int i = 0; i < E->nf; i++) {
        dp_buf_free(E->f[i].t);
        for (int j = 0; j < E->f[i].nv; j++)
            dp_buf_free(E->f[i].cm[j]);
    }
    free(E->f);
    free(E->pairs);
    dp_memo_free(&E->own_memo);
    if (E->memo == &E->own_memo) {
        /* a DP of its own leaves nothing behind; DPs sharing a memo (the
         * stage DPs of a pipeline search, thousands of them) keep the pool
         * of large buffers from one to the next, so that their tables
         * reuse pages instead of faulting fresh ones in (sb_dp_memo_free
         * empties it) */
        dp_buf_pool_drain();
        dp_buf_pool_limit(0);
    }
    for (int i = 0; i < E->n && E->vf; i++)
        free(E->vf[i]);
    free(E->vf);
    free(E->nvf);
    free(E->capvf);
}

/* Config counts of the problem (pb) and of what the DP searches (sp). */
static void count_configs(const sb_problem *pb, const sb_problem *sp, sb_result *out)
{
    for (int i = 0; i < pb->m->nops; i++) {
        if (pb->cfg[i].n > out->max_configs)
            out->max_configs = pb->cfg[i].n;
        if (sp->cfg[i].n > out->max_configs_kept)
            out->max_configs_kept = sp->cfg[i].n;
        out->configs_total += pb->cfg[i].n;
        out->configs_kept += sp->cfg[i].n;
    }
}

/* Eliminates the ops in out->order, steps[i] for the i-th; progress on a
 * terminal. */
static int eliminate_all(engine *E, int show, double t0, step *steps, sb_result *out)
{
    double last = sb_now();
    for (int i = 0; i < E->n; i++) {
        if (eliminate(E, out->order[i], &steps[i], &out->max_dep_set))
            return -1;
        if (show && sb_now() - last > 0.25) {
            progress(i + 1, E->n, t0);
            last = sb_now();
        }
    }
    if (show && sb_now() - t0 > 0.25)
        progress(E->n, E->n, t0);
    return 0;
}

/* out->choice from the argmins: later-eliminated vertices are fixed first. */
static void backtrack(const engine *E, const step *steps, sb_result *out)
{
    for (int i = E->n - 1; i >= 0; i--) {
        const step *s = &steps[i];
        int64_t lin = 0;
        for (int j = 0; j < s->nv; j++) {
            int c = out->choice[s->vars[j]];
            lin = lin * s->dim[j] + (s->cm[j] ? s->cm[j][c] : c);
        }
        out->choice[out->order[i]] = s->arg[lin];
    }
}

/* The shortcuts' counters and the peak table memory into out. */
static void report_counters(const engine *E, sb_result *out)
{
    out->peak_table_bytes = E->peak_bytes;
    out->entries_copied = E->entries_copied;
    out->configs_merged = E->configs_merged;
    out->rows_bounded = E->rows_bounded;
    out->rows_threshold = E->rows_threshold;
    out->rows_vector = E->rows_vector;
    out->rows_colclass = E->rows_colclass;
    out->rows_entwise = E->rows_entwise;
    out->eliminations_reused = E->memo->hits - E->hits0;
    out->threads_used = E->threads_used > 0 ? E->threads_used : 1;
}

/* With opts->prune, red gets pb less its dominated configs and *keep their
 * original indices (sb_prune_dominated); prune_seconds since t0. */
static int prune_first(const sb_problem *pb, sb_problem *red, int ***keep, double t0,
                       sb_result *out, sb_error *err)
{
    int n = pb->m->nops;
    *keep = sb_calloc((size_t)(n ? n : 1), sizeof **keep, err);
    if (!*keep)
        return -1;
    if (sb_prune_dominated(pb, red, *keep, err)) {
        free(*keep);
        *keep = NULL;
        return -1;
    }
    out->prune_seconds = sb_now() - t0;
    return 0;
}

int sb_search(const sb_problem *pb, const sb_search_opts *opts, sb_result *out, sb_error *err)
{
    int n = pb->m->nops;
    memset(out, 0, sizeof *out);
    double t0 = sb_now();
    /* the DP runs on sp: pb itself, or pb less its dominated configs */
    sb_problem red = {0};
    int **keep = NULL;
    if (opts->prune && prune_first(pb, &red, &keep, t0, out, err))
        return -1;
    const sb_problem *sp = keep ? &red : pb;
    engine E;
    engine_open(&E, sp, opts, n, err);
    step *steps = calloc((size_t)n, sizeof *steps);
    out->choice = calloc((size_t)n, sizeof *out->choice);
    out->order = calloc((size_t)n, sizeof *out->order);
    int rc = -1, show = opts->progress && isatty(2);
    if (!E.vf || !E.nvf || !E.capvf || !steps || !out->choice || !out->order) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto done;
    }
    count_configs(pb, sp, out);
    if (opts->algo == SB_ALGO_BF)
        sb_order_bf(pb, out->order);
    else if (opts->plain)
        sb_order_pase(pb, out->order);
    else
        sb_order_blocks(pb, out->order);
    if (init_factors(&E) || eliminate_all(&E, show, t0, steps, out))
        goto done;
    backtrack(&E, steps, out);
    if (keep) /* back to pb's config indices */
        for (int v = 0; v < n; v++)
            out->choice[v] = keep[v][out->choice[v]];
    out->total_cost = sb_strategy_cost(pb, out->choice);
    report_counters(&E, out);
    rc = 0;
done:
    out->seconds = sb_now() - t0;
    engine_close(&E);
    for (int i = 0; i < n && steps; i++) {
        dp_buf_free(steps[i].arg);
        for (int j = 0; j < steps[i].nv; j++)
            dp_buf_free(steps[i].cm[j]);
    }
    free(steps);
    if (keep) {
        sb_prune_free(&red, keep);
        free(keep);
    }
    if (rc)
        sb_result_free(out);
    return rc;
}

void sb_result_free(sb_result *r)
{
    free(r->choice);
    free(r->order);
    free(r->recompute);
    r->choice = NULL;
    r->order = NULL;
    r->recompute = NULL;
}

int sb_search_brute(const sb_problem *pb, sb_result *out, sb_error *err)
{
    int n = pb->m->nops;
    memset(out, 0, sizeof *out);
    double combos = 1;
    for (int i = 0; i < n; i++)
        combos *= pb->cfg[i].n;
    if (combos > 5e7)
        return sb_fail(err, SB_EXIT_INPUT, "brute force over %.3g strategies refused", combos);
    double t0 = sb_now();
    int *cur = calloc((size_t)n, sizeof *cur);
    out->choice = calloc((size_t)n, sizeof *out->choice);
    out->order = calloc((size_t)n, sizeof *out->order);
    if (!cur || !out->choice || !out->order) {
        free(cur);
        sb_result_free(out);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    out->total_cost = INFINITY;
    for (;;) {
        double c = sb_strategy_cost(pb, cur);
        if (c < out->total_cost) {
            out->total_cost = c;
            memcpy(out->choice, cur, (size_t)n * sizeof *cur);
        }
        int i = n - 1;
        while (i >= 0 && ++cur[i] == pb->cfg[i].n)
            cur[i--] = 0;
        if (i < 0)
            break;
    }
    free(cur);
    for (int i = 0; i < n; i++) {
        out->order[i] = i;
        if (pb->cfg[i].n > out->max_configs)
            out->max_configs = pb->cfg[i].n;
    }
    out->seconds = sb_now() - t0;
    return 0;
}
