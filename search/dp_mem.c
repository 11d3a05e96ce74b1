/* dp_mem.c: the exact search under a per-device memory limit.
 *
 * The least-cost strategy whose predicted peak per device (memory.h: the
 * sum over ops of their resident bytes plus the largest scratch of any op)
 * is at most the limit. The limit is a constraint of the optimisation, not
 * a filter of the unconstrained optimum: a strategy that costs a little
 * more and fits is found even when the cheapest one does not fit.
 *
 * Method: the variable elimination of dp.c (same vertex order, same
 * tables over dependent sets), but each table entry holds a Pareto set of
 * labels (cost, resident, scratch) instead of one least cost: combining
 * two partial strategies adds cost and resident bytes and takes the larger
 * scratch, so a label dominated in all three (or already over the limit:
 * resident + scratch only grows) can never become the best one and is
 * dropped; nothing else is. "Over the limit" counts what the vertices
 * outside the label's table add at least: the sum of their least resident
 * bytes. Each label keeps the config of the eliminated vertex and, per
 * table it was combined from, the label it used, so the strategy is read
 * back by following them. Exact: equal to brute force
 * over the strategies that fit (tests/unit/test_dp.c).
 *
 * Recomputation (pb->cp.recompute auto): a recomputable op's leaf table
 * holds two labels per config, kept (x = 0) and recomputed (x = 1: cost
 * plus sb_recompute_cost, memory as sb_op_memory_rc), so the choice is a
 * second option per op carried through the same elimination; the read-back
 * finds it in the leaf's label.
 *
 * Fast path: when the unconstrained optimum (dp.c) fits, it is the answer.
 * Pareto sets grow with the graph: past a budget of labels the search
 * stops with an error that says so (nothing is guessed). */
#include "dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardbench/memory.h"

#define MAX_SCOPE 32
#define LABEL_BUDGET 20000000 /* labels alive at once, all tables together */
#define WORK_BUDGET 5e8       /* label pairs combined in all (minutes: the Transformer at p = 8
                                 within 9.9 GiB combines 5.7e7 in 7 s on 2 cores) */

typedef struct {
    double c, r, s;  /* cost; resident bytes (summed); scratch bytes (largest) */
    int x;           /* config of the eliminated vertex (-1: a leaf table) */
    int64_t parts;   /* index into the table's parts pool: one label per inflow table */
} label;

typedef struct {
    int nv;
    int vars[MAX_SCOPE];  /* ascending; the last varies fastest */
    int64_t size;
    int64_t *start;       /* size + 1 offsets into lab */
    label *lab;
    int64_t nlab;
    int nin;              /* inflow tables it was made from */
    int *in;              /* their ids */
    int32_t *parts;       /* nlab * nin label indices */
    int elim;             /* the vertex eliminated to make it, -1 for a leaf */
    int alive;
    double minr;          /* the least resident bytes of the vertices it covers */
    double minc;          /* the least cost of its labels (INFINITY: none) */
} ptable;

typedef struct {
    const sb_problem *pb;
    double limit;          /* bytes; INFINITY when minimising memory */
    double minr_all;       /* the least resident bytes of every vertex, summed */
    double rest;           /* of it, the vertices outside the table being made */
    int by_memory;         /* 1: minimise memory (cost ignored in dominance) */
    int plain_pareto;      /* 1: pareto() scans every kept label (opts->plain_pareto) */
    double cost_ub;        /* a fitting strategy's cost (INFINITY: none): labels that cannot
                              end at or under it are dropped */
    double crest;          /* the least cost of the live tables outside the one being made */
    double *cnext;         /* per inflow slot q of that one: the least cost of slots > q */
    ptable *t;
    int nt, capt;
    int64_t live_labels;
    double work;           /* label pairs combined so far */
    int progress;          /* print progress (a TTY only) */
    double t0, last;
    sb_error *err;
} pengine;

/* A growable list of labels under construction, each with nparts parts. */
typedef struct {
    label *l;
    int32_t *p;
    int64_t n, cap;
    int np;
} lbuf;

static int lbuf_push(pengine *E, lbuf *b, const label *l, const int32_t *parts)
{
    if (b->n == b->cap) {
        int64_t nc = b->cap ? 2 * b->cap : 16;
        label *nl = sb_realloc(b->l, (size_t)nc * sizeof *nl, E->err);
        if (!nl)
            return -1;
        b->l = nl;
        int32_t *np = sb_realloc(b->p, (size_t)(nc * (b->np ? b->np : 1)) * sizeof *np, E->err);
        if (!np)
            return -1;
        b->p = np;
        b->cap = nc;
    }
    b->l[b->n] = *l;
    if (b->np)
        memcpy(b->p + b->n * b->np, parts, (size_t)b->np * sizeof *parts);
    b->n++;
    return 0;
}

static int dominates(const pengine *E, const label *a, const label *b)
{
    return (E->by_memory || a->c <= b->c) && a->r <= b->r && a->s <= b->s;
}

typedef struct {
    double k0, k1, k2; /* sort key: (cost, resident, scratch), or (0, resident, scratch) */
    int64_t at;        /* position in the buffer */
} lkey;

/* lkey order: (k0, k1, k2), then the position (a total order). */
static inline int lkey_less(const lkey *a, const lkey *b)
{
    if (a->k0 != b->k0)
        return a->k0 < b->k0;
    if (a->k1 != b->k1)
        return a->k1 < b->k1;
    if (a->k2 != b->k2)
        return a->k2 < b->k2;
    return a->at < b->at;
}

static int cmp_lkey(const void *x, const void *y)
{
    const lkey *a = x, *b = y;
    return lkey_less(a, b) ? -1 : lkey_less(b, a);
}

/* Merges the sorted runs a[0, na) and b[0, nb) into out. */
static void merge_runs(const lkey *a, int64_t na, const lkey *b, int64_t nb, lkey *out)
{
    int64_t i = 0, j = 0, o = 0;
    while (i < na && j < nb)
        out[o++] = lkey_less(&b[j], &a[i]) ? b[j++] : a[i++];
    while (i < na)
        out[o++] = a[i++];
    while (j < nb)
        out[o++] = b[j++];
}

/* Sorts key[0, n) in lkey order (tmp: n more keys) by merging its
 * ascending runs pairwise: the buffers pareto() sorts are concatenations
 * or products of sorted sets, a few long runs. run: n + 1 run starts of
 * scratch. The order is total, so the result is qsort's. */
static void sort_keys(lkey *key, lkey *tmp, int64_t *run, int64_t n)
{
    int64_t nr = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || lkey_less(&key[i], &key[i - 1]))
            run[nr++] = i;
    run[nr] = n;
    lkey *src = key, *dst = tmp;
    while (nr > 1) {
        int64_t w = 0;
        for (int64_t q = 0; q < nr; q += 2) {
            int64_t a = run[q], m = run[q + 1], b = q + 2 <= nr ? run[q + 2] : m;
            if (q + 1 < nr)
                merge_runs(src + a, m - a, src + m, b - m, dst + a);
            else
                memcpy(dst + a, src + a, (size_t)(m - a) * sizeof *dst);
            run[w++] = a;
        }
        run[w] = n;
        nr = w;
        lkey *sw = src;
        src = dst;
        dst = sw;
    }
    if (src != key)
        memcpy(key, src, (size_t)n * sizeof *key);
}

/* The (resident, scratch) front of the labels kept so far by pareto():
 * n points by resident ascending, scratch strictly descending, each
 * dominated in those two by none of the kept labels. */
typedef struct {
    double *r, *s;
    int64_t n, cap;
} stair;

/* The first point of st whose resident is >= r (strict: > r). */
static int64_t stair_find(const stair *st, double r, int strict)
{
    int64_t lo = 0, hi = st->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (strict ? st->r[mid] <= r : st->r[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* 1 when a point of st has resident <= r and scratch <= s: among the
 * points with resident <= r the last has the least scratch. */
static int stair_covers(const stair *st, double r, double s)
{
    int64_t q = stair_find(st, r, 1);
    return q > 0 && st->s[q - 1] <= s;
}

/* Adds (r, s), not covered by st, dropping the points it covers. */
static int stair_add(pengine *E, stair *st, double r, double s)
{
    int64_t lo = stair_find(st, r, 0), hi = lo;
    while (hi < st->n && st->s[hi] >= s)
        hi++; /* resident >= r, scratch >= s: covered by the new point */
    if (hi == lo && st->n == st->cap) {
        int64_t nc = st->cap ? 2 * st->cap : 64;
        double *nr = sb_realloc(st->r, (size_t)nc * sizeof *nr, E->err);
        if (!nr)
            return -1;
        st->r = nr;
        double *ns = sb_realloc(st->s, (size_t)nc * sizeof *ns, E->err);
        if (!ns)
            return -1;
        st->s = ns;
        st->cap = nc;
    }
    if (hi != lo + 1) { /* shift the tail to close the gap or open one slot */
        memmove(st->r + lo + 1, st->r + hi, (size_t)(st->n - hi) * sizeof *st->r);
        memmove(st->s + lo + 1, st->s + hi, (size_t)(st->n - hi) * sizeof *st->s);
        st->n += lo + 1 - hi;
    }
    st->r[lo] = r;
    st->s[lo] = s;
    return 0;
}

/* Keeps the Pareto set of b. In key order a label can only be dominated by
 * one before it (or an equal one), so each is checked against those kept:
 * every kept label costs no more than the candidate (key order), so it is
 * dominated exactly when a kept label has resident and scratch no larger,
 * which the front of the kept (resident, scratch) answers by one binary
 * search (stair); with E->plain_pareto, by a scan of every kept label (the
 * reference: the same labels kept, in the same order). */
static int pareto(pengine *E, lbuf *b)
{
    if (b->n < 2)
        return 0;
    int64_t n = b->n;
    lkey *key = sb_malloc((size_t)n * 2 * sizeof *key, E->err);
    int64_t *run = E->plain_pareto ? NULL : sb_malloc((size_t)(n + 1) * sizeof *run, E->err);
    lbuf o = {.np = b->np};
    stair st = {0};
    int rc = key && (run || E->plain_pareto) ? 0 : -1;
    for (int64_t i = 0; i < n && !rc; i++)
        key[i] = (lkey){E->by_memory ? 0.0 : b->l[i].c, b->l[i].r, b->l[i].s, i};
    if (!rc && E->plain_pareto)
        qsort(key, (size_t)n, sizeof *key, cmp_lkey);
    else if (!rc)
        sort_keys(key, key + n, run, n);
    free(run);
    for (int64_t i = 0; i < n && !rc; i++) {
        const label *cand = &b->l[key[i].at];
        int dom = 0;
        if (E->plain_pareto)
            for (int64_t j = 0; j < o.n && !dom; j++)
                dom = dominates(E, &o.l[j], cand);
        else
            dom = stair_covers(&st, cand->r, cand->s);
        if (dom)
            continue;
        rc = lbuf_push(E, &o, cand, b->p + key[i].at * b->np);
        if (!rc && !E->plain_pareto)
            rc = stair_add(E, &st, cand->r, cand->s);
    }
    free(key);
    free(st.r);
    free(st.s);
    if (rc) {
        free(o.l);
        free(o.p);
        return -1;
    }
    free(b->l);
    free(b->p);
    b->l = o.l;
    b->p = o.p;
    b->n = o.n;
    b->cap = o.cap;
    return 0;
}

/* Appends a table (E owns it then, also when the label budget is passed:
 * -1 with err set). -1 without adding it when out of memory. */
static int add_table(pengine *E, ptable *src, int *added)
{
    *added = 0;
    if (E->nt == E->capt) {
        int nc = E->capt ? 2 * E->capt : 256;
        ptable *nt = sb_realloc(E->t, (size_t)nc * sizeof *nt, E->err);
        if (!nt)
            return -1;
        E->t = nt;
        E->capt = nc;
    }
    src->alive = 1;
    src->minc = INFINITY;
    for (int64_t i = 0; i < src->nlab; i++)
        src->minc = fmin(src->minc, src->lab[i].c);
    E->t[E->nt++] = *src;
    *added = 1;
    E->live_labels += src->nlab;
    if (E->live_labels > LABEL_BUDGET)
        return sb_fail(E->err, SB_EXIT_INPUT,
                       "memory-limited search of '%s' at p=%d: more than %d (cost, memory) "
                       "labels alive at once; too large for the exact search under a limit",
                       E->pb->m->name, E->pb->p, LABEL_BUDGET);
    return 0;
}

static void table_free(ptable *t)
{
    free(t->start);
    free(t->lab);
    free(t->in);
    free(t->parts);
    memset(t, 0, sizeof *t);
}

/* Vertex v's leaf table: per config k, the label kept (x = 0) and, under
 * --recompute auto for a recomputable op, the label recomputed (x = 1). */
static int vertex_leaf(pengine *E, int v, sb_optimizer opt)
{
    const sb_problem *pb = E->pb;
    const sb_op *op = &pb->m->ops[v];
    int n = pb->cfg[v].n;
    int two = pb->cp.recompute == SB_RECOMPUTE_AUTO && sb_op_recomputable(op);
    ptable t = {.nv = 1, .elim = -1, .size = n};
    t.vars[0] = v;
    t.start = sb_malloc((size_t)(n + 1) * sizeof *t.start, E->err);
    t.lab = sb_malloc((size_t)n * (size_t)(two ? 2 : 1) * sizeof *t.lab, E->err);
    if (!t.start || !t.lab) {
        table_free(&t);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        const int *c = pb->cfg[v].c + (size_t)k * (size_t)pb->cfg[v].ndims;
        t.start[k] = t.nlab;
        for (int x = 0; x <= two; x++) {
            sb_mem m;
            sb_problem_op_memory_rc(pb, v, k, opt, x || pb->cp.recompute == SB_RECOMPUTE_ALL, &m);
            double cost = pb->cfg[v].cost[k] + (x ? sb_recompute_cost(pb->m, op, c, &pb->cp) : 0);
            t.lab[t.nlab++] = (label){.c = cost, .r = sb_mem_resident(&m), .s = m.scratch, .x = x};
        }
    }
    t.start[n] = t.nlab;
    t.minr = INFINITY;
    for (int64_t i = 0; i < t.nlab; i++)
        t.minr = t.lab[i].r < t.minr ? t.lab[i].r : t.minr;
    E->minr_all += t.minr;
    int added;
    if (add_table(E, &t, &added)) {
        if (!added)
            table_free(&t);
        return -1;
    }
    return 0;
}

/* A leaf table over vars (1 or 2) with one label per entry. */
static int leaf(pengine *E, int nv, const int *vars, const double *c, const double *r,
                const double *s)
{
    ptable t = {.nv = nv, .elim = -1};
    t.size = 1;
    for (int i = 0; i < nv; i++) {
        t.vars[i] = vars[i];
        t.size *= E->pb->cfg[vars[i]].n;
    }
    t.start = sb_malloc((size_t)(t.size + 1) * sizeof *t.start, E->err);
    t.lab = sb_malloc((size_t)t.size * sizeof *t.lab, E->err);
    if (!t.start || !t.lab) {
        table_free(&t);
        return -1;
    }
    for (int64_t k = 0; k < t.size; k++) {
        t.start[k] = k;
        t.lab[k] = (label){.c = c[k], .r = r ? r[k] : 0, .s = s ? s[k] : 0, .x = -1};
    }
    t.start[t.size] = t.nlab = t.size;
    int added;
    if (add_table(E, &t, &added)) {
        if (!added)
            table_free(&t);
        return -1;
    }
    return 0;
}

static int init_tables(pengine *E, sb_optimizer opt)
{
    const sb_problem *pb = E->pb;
    const sb_model *m = pb->m;
    for (int v = 0; v < m->nops; v++)
        if (vertex_leaf(E, v, opt))
            return -1;
    /* one table per pair of ops joined by edges */
    for (int k = 0; k < pb->nedges; k++) {
        int a = pb->edges[k].src, b = pb->edges[k].dst;
        int lo = a < b ? a : b, hi = a < b ? b : a, seen = 0;
        for (int j = 0; j < k && !seen; j++) {
            int a2 = pb->edges[j].src, b2 = pb->edges[j].dst;
            seen = (a2 < b2 ? a2 : b2) == lo && (a2 < b2 ? b2 : a2) == hi;
        }
        if (seen)
            continue;
        if (lo == hi)
            return sb_fail(E->err, SB_EXIT_INPUT, "op '%s' consumes its own output", m->ops[lo].name);
        size_t n = (size_t)pb->cfg[lo].n * (size_t)pb->cfg[hi].n;
        double *c = sb_calloc(n, sizeof *c, E->err);
        if (!c)
            return -1;
        int rc = 0;
        for (int j = k; j < pb->nedges && !rc; j++) {
            int a2 = pb->edges[j].src, b2 = pb->edges[j].dst;
            if ((a2 < b2 ? a2 : b2) == lo && (a2 < b2 ? b2 : a2) == hi)
                rc = sb_edge_table_add(pb, &pb->edges[j], c, E->err);
        }
        int vars[2] = {lo, hi};
        rc = rc || leaf(E, 2, vars, c, NULL, NULL);
        free(c);
        if (rc)
            return -1;
    }
    return 0;
}

/* entry of table t for the assignment val[] (indexed by vertex) */
static int64_t entry_of(const pengine *E, const ptable *t, const int *val)
{
    int64_t e = 0;
    for (int i = 0; i < t->nv; i++)
        e = e * E->pb->cfg[t->vars[i]].n + val[t->vars[i]];
    return e;
}

/* The live tables that mention v (every live table when v < 0) into *F
 * (malloc'd, *nF of them), and the other vertices they mention, ascending,
 * into S (*k of them). */
static int gather(pengine *E, int v, int **F, int *nF, int *S, int *k)
{
    int cap = 16;
    *nF = *k = 0;
    if (!(*F = malloc((size_t)cap * sizeof **F)))
        return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < E->nt; i++) {
        const ptable *t = &E->t[i];
        int has = v < 0;
        for (int j = 0; j < t->nv && !has; j++)
            has = t->vars[j] == v;
        if (!t->alive || !has)
            continue;
        if (*nF == cap) {
            int *nf = realloc(*F, (size_t)(cap *= 2) * sizeof **F);
            if (!nf)
                return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
            *F = nf;
        }
        (*F)[(*nF)++] = i;
        for (int j = 0; j < t->nv; j++) {
            int u = t->vars[j], seen = u == v;
            for (int q = 0; q < *k && !seen; q++)
                seen = S[q] == u;
            if (seen)
                continue;
            if (*k == MAX_SCOPE)
                return sb_fail(E->err, SB_EXIT_INTERNAL, "dependent set of '%s' exceeds %d vertices",
                               E->pb->m->ops[v].name, MAX_SCOPE);
            S[(*k)++] = u;
        }
    }
    for (int i = 1; i < *k; i++)
        for (int j = i; j > 0 && S[j - 1] > S[j]; j--) {
            int tt = S[j];
            S[j] = S[j - 1];
            S[j - 1] = tt;
        }
    return 0;
}

/* Work buffers of one elimination: labels of the partial combination (cur,
 * nxt), of every config of the eliminated vertex (all), of the new table
 * (out), and one parts vector (pp). */
typedef struct {
    lbuf out, cur, nxt, all;
    int32_t *pp;
} ework;

/* Whether a partial strategy whose cost with everything still to come is
 * at least c cannot end at or under E->cost_ub: c over it by more than a
 * relative 1e-9 (the sums are added in other orders). */
static int over_ub(const pengine *E, double c)
{
    return c - E->cost_ub > 1e-9 * (fabs(c) + fabs(E->cost_ub));
}

/* E->crest and E->cnext for the new table of tables F: the least costs of
 * the live tables outside F, and per slot q of F those plus the slots
 * after q (what a label combined up to slot q still adds at least). */
static void cost_rest(pengine *E, const int *F, int nF)
{
    E->crest = 0.0;
    for (int i = 0; i < E->nt; i++) {
        int in = 0;
        for (int q = 0; q < nF && !in; q++)
            in = F[q] == i;
        if (E->t[i].alive && !in)
            E->crest += E->t[i].minc;
    }
    double acc = E->crest;
    for (int q = nF - 1; q >= 0; q--) {
        E->cnext[q] = acc;
        acc += E->t[F[q]].minc;
    }
}

/* cur := the Pareto set of cur combined with every label of table t at its
 * entry for val (slot q of the parts); labels over the limit dropped. */
static int combine(pengine *E, ework *w, const ptable *t, int q, int nF, const int *val, int v)
{
    int64_t e = entry_of(E, t, val), lo = t->start[e], hi = t->start[e + 1];
    E->work += (double)w->cur.n * (double)(hi - lo);
    if (E->work > WORK_BUDGET)
        return sb_fail(E->err, SB_EXIT_INPUT,
                       "memory-limited search of '%s' at p=%d: over %.0e label combinations at op "
                       "'%s'; too large for the exact search under a limit (search without "
                       "--memory, or a smaller model or P)",
                       E->pb->m->name, E->pb->p, WORK_BUDGET,
                       v >= 0 ? E->pb->m->ops[v].name : "(root)");
    w->nxt.n = 0;
    for (int64_t i = 0; i < w->cur.n; i++)
        for (int64_t j = lo; j < hi; j++) {
            const label *l2 = &t->lab[j];
            label l = w->cur.l[i];
            l.c += l2->c;
            l.r += l2->r;
            l.s = l.s > l2->s ? l.s : l2->s;
            if (l.r + l.s + E->rest > E->limit) /* the other vertices add at least rest */
                continue;
            if (over_ub(E, l.c + E->cnext[q]))
                continue;
            memcpy(w->pp, w->cur.p + i * nF, (size_t)nF * sizeof *w->pp);
            w->pp[q] = (int32_t)(j - lo);
            if (lbuf_push(E, &w->nxt, &l, w->pp))
                return -1;
        }
    if (pareto(E, &w->nxt))
        return -1;
    lbuf sw = w->cur;
    w->cur = w->nxt;
    w->nxt = sw;
    return 0;
}

/* The labels of one entry of the new table (its vertices set in val): for
 * every config x of v, the tables F combined, then the Pareto set over x,
 * appended to w->out. */
static int entry_labels(pengine *E, ework *w, int v, const int *F, int nF, int *val)
{
    int nx = v < 0 ? 1 : E->pb->cfg[v].n;
    w->all.n = 0;
    for (int x = 0; x < nx; x++) {
        if (v >= 0)
            val[v] = x;
        w->cur.n = 0;
        memset(w->pp, 0, (size_t)(nF ? nF : 1) * sizeof *w->pp);
        label zero = {.x = x};
        if (lbuf_push(E, &w->cur, &zero, w->pp))
            return -1;
        for (int q = 0; q < nF; q++)
            if (combine(E, w, &E->t[F[q]], q, nF, val, v))
                return -1;
        for (int64_t i = 0; i < w->cur.n; i++)
            if (lbuf_push(E, &w->all, &w->cur.l[i], w->cur.p + i * nF))
                return -1;
    }
    if (pareto(E, &w->all))
        return -1;
    for (int64_t i = 0; i < w->all.n; i++)
        if (lbuf_push(E, &w->out, &w->all.l[i], w->all.p + i * nF))
            return -1;
    return 0;
}

/* Eliminates v (v < 0: combines every table left into one over no vertex):
 * a new table over the other vertices of v's tables, whose entry for each
 * of their assignments holds the Pareto labels over v's configs; v's tables
 * leave play (they stay for the read-back). */
static int eliminate(pengine *E, int v, int *val, int *out_table)
{
    const sb_problem *pb = E->pb;
    int nF, k, S[MAX_SCOPE], *F = NULL;
    if (gather(E, v, &F, &nF, S, &k)) {
        free(F);
        return -1;
    }
    ptable g = {.nv = k, .elim = v, .nin = nF, .in = F, .size = 1};
    for (int q = 0; q < nF; q++)
        g.minr += E->t[F[q]].minr;
    E->rest = E->minr_all - g.minr - 1e-9 * E->minr_all; /* less a margin for rounding */
    if (E->rest < 0)
        E->rest = 0;
    memcpy(g.vars, S, (size_t)k * sizeof *S);
    for (int i = 0; i < k; i++)
        g.size *= pb->cfg[S[i]].n;
    g.start = sb_malloc((size_t)(g.size + 1) * sizeof *g.start, E->err);
    ework w = {.out = {.np = nF}, .cur = {.np = nF}, .nxt = {.np = nF}, .all = {.np = nF}};
    w.pp = malloc((size_t)(nF ? nF : 1) * sizeof *w.pp);
    E->cnext = malloc((size_t)(nF ? nF : 1) * sizeof *E->cnext);
    int rc = g.start && w.pp && E->cnext ? 0 : sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
    if (!rc && isfinite(E->cost_ub))
        cost_rest(E, F, nF);
    else if (!rc)
        for (int q = 0; q < nF; q++)
            E->cnext[q] = 0.0; /* no bound: over_ub never holds */
    for (int i = 0; i < k; i++)
        val[S[i]] = 0;
    for (int64_t a = 0; a < g.size && !rc; a++) {
        g.start[a] = w.out.n;
        rc = entry_labels(E, &w, v, F, nF, val);
        for (int i = k - 1; i >= 0; i--) { /* next assignment of S, last fastest */
            if (++val[S[i]] < pb->cfg[S[i]].n)
                break;
            val[S[i]] = 0;
        }
    }
    if (!rc) {
        g.start[g.size] = g.nlab = w.out.n;
        g.lab = w.out.l;
        g.parts = w.out.p;
        for (int64_t i = 0; i < g.nlab; i++)
            g.lab[i].parts = i * nF;
        w.out.l = NULL;
        w.out.p = NULL;
        for (int q = 0; q < nF; q++) {
            E->t[F[q]].alive = 0;
            E->live_labels -= E->t[F[q]].nlab;
        }
        int added;
        rc = add_table(E, &g, &added); /* g (and F) belong to E once added */
        if (rc && !added)
            table_free(&g);
        if (!rc)
            *out_table = E->nt - 1;
    } else {
        free(g.start);
        free(F);
    }
    free(w.out.l), free(w.out.p), free(w.cur.l), free(w.cur.p), free(w.nxt.l), free(w.nxt.p);
    free(w.all.l), free(w.all.p), free(w.pp);
    free(E->cnext);
    E->cnext = NULL;
    return rc;
}

/* Sets the configs of table ti's label li and of everything it came from
 * (the table's own vertices are already set in choice), and the recomputed
 * ops (a vertex leaf's label x) in rec. */
static void read_back(const pengine *E, int ti, int64_t li, int *choice, unsigned char *rec)
{
    const ptable *t = &E->t[ti];
    if (t->elim < 0 && t->nin == 0) { /* a leaf */
        if (t->nv == 1 && t->lab[li].x > 0)
            rec[t->vars[0]] = 1;
        return;
    }
    const label *l = &t->lab[li];
    if (t->elim >= 0)
        choice[t->elim] = l->x;
    for (int q = 0; q < t->nin; q++) {
        const ptable *u = &E->t[t->in[q]];
        int64_t e = entry_of(E, u, choice);
        read_back(E, t->in[q], u->start[e] + t->parts[l->parts + q], choice, rec);
    }
}

/* The whole elimination under E's limit; on success the root table (over no
 * vertex) is E->t[*root]. */
static int run(pengine *E, sb_optimizer opt, const int *order, int *root)
{
    int n = E->pb->m->nops;
    int *val = calloc((size_t)n, sizeof *val);
    if (!val)
        return sb_fail(E->err, SB_EXIT_INTERNAL, "out of memory");
    int rc = init_tables(E, opt);
    for (int i = 0; i < n && !rc; i++) {
        rc = eliminate(E, order[i], val, root);
        if (E->progress && sb_now() - E->last > 0.25) {
            fprintf(stderr, "\r[search --memory] vertex %d/%d  %.3g label pairs  %.1fs", i + 1, n,
                    E->work, sb_now() - E->t0);
            fflush(stderr);
            E->last = sb_now();
        }
    }
    if (E->progress && E->last > E->t0)
        fputc('\n', stderr);
    rc = rc || eliminate(E, -1, val, root);
    free(val);
    return rc;
}

static void engine_free(pengine *E)
{
    for (int i = 0; i < E->nt; i++)
        table_free(&E->t[i]);
    free(E->t);
    E->t = NULL;
    E->nt = E->capt = 0;
}

int sb_search_within(const sb_problem *pb, const sb_search_opts *opts, double limit_bytes,
                     sb_optimizer opt, sb_result *out, double *least_bytes, sb_error *err)
{
    return sb_search_within_ub(pb, opts, limit_bytes, opt, INFINITY, out, least_bytes, err);
}

int sb_search_within_ub(const sb_problem *pb, const sb_search_opts *opts, double limit_bytes,
                        sb_optimizer opt, double cost_ub, sb_result *out, double *least_bytes,
                        sb_error *err)
{
    double t0 = sb_now();
    if (least_bytes)
        *least_bytes = NAN;
    if (sb_search(pb, opts, out, err))
        return -1;
    if (sb_strategy_memory(pb, out->choice, opt, NULL) <= limit_bytes)
        return 0; /* the least-cost strategy fits: nothing cheaper can */
    int n = pb->m->nops;
    int plain_pareto = opts->plain || opts->plain_pareto;
    pengine E = {.pb = pb, .limit = limit_bytes, .err = err, .t0 = t0, .last = t0,
                 .plain_pareto = plain_pareto, .cost_ub = isnan(cost_ub) ? INFINITY : cost_ub,
                 .progress = opts->progress && isatty(2)};
    int root = -1, rc = run(&E, opt, out->order, &root);
    if (!rc) {
        const ptable *t = &E.t[root];
        int64_t best = -1;
        for (int64_t i = 0; i < t->nlab; i++)
            if (best < 0 || t->lab[i].c < t->lab[best].c)
                best = i;
        unsigned char *rec = best >= 0 ? calloc((size_t)n, 1) : NULL;
        if (best >= 0 && !rec) {
            engine_free(&E);
            sb_result_free(out);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        }
        if (best >= 0) {
            for (int i = 0; i < n; i++)
                out->choice[i] = 0;
            read_back(&E, root, best, out->choice, rec);
            out->total_cost = sb_strategy_cost(pb, out->choice);
            for (int i = 0; i < n; i++)
                if (rec[i])
                    out->total_cost += sb_recompute_cost(pb->m, &pb->m->ops[i],
                                                         pb->cfg[i].c + (size_t)out->choice[i]
                                                                            * (size_t)pb->cfg[i].ndims,
                                                         &pb->cp);
            if (pb->cp.recompute == SB_RECOMPUTE_AUTO)
                out->recompute = rec;
            else
                free(rec);
            out->seconds = sb_now() - t0;
            engine_free(&E);
            return 0;
        }
        if (isfinite(E.cost_ub)) { /* cost_ub fit by another account (rounding): no bound */
            engine_free(&E);
            sb_result_free(out);
            return sb_search_within_ub(pb, opts, limit_bytes, opt, INFINITY, out, least_bytes,
                                       err);
        }
        /* nothing fits: the least memory of any strategy, exactly */
        engine_free(&E);
        E = (pengine){.pb = pb, .limit = INFINITY, .by_memory = 1, .err = err, .t0 = t0,
                      .plain_pareto = plain_pareto, .cost_ub = INFINITY,
                      .last = t0, .progress = opts->progress && isatty(2)};
        rc = run(&E, opt, out->order, &root);
        if (!rc) {
            t = &E.t[root];
            double least = INFINITY;
            for (int64_t i = 0; i < t->nlab; i++)
                if (t->lab[i].r + t->lab[i].s < least)
                    least = t->lab[i].r + t->lab[i].s;
            if (least_bytes)
                *least_bytes = least;
            rc = sb_fail(err, SB_EXIT_INPUT,
                         "no strategy of '%s' at p=%d fits %.4g GiB per device: the least "
                         "memory of any strategy is %.4g GiB",
                         pb->m->name, pb->p, limit_bytes / 1073741824.0, least / 1073741824.0);
        }
    }
    engine_free(&E);
    sb_result_free(out);
    return rc;
}
