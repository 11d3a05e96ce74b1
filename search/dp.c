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
 * they are read; equal-row classes of the dependent set (dp_config_classes);
 * equal columns of the eliminated op (dp_compact_eliminated); the bounded and
 * threshold scans for each minimum; pair tables and eliminations whose keys
 * were met before taken from the earlier ones (content ids, dp_reuse.c);
 * the table fill split over threads (dp_fill.c: the CPUs the process may
 * use). With them the order is block-first (order.c: repeated layers'
 * interiors first), so that
 * equal layers give equal eliminations. Optional and separate: dominated
 * configs dropped first (dp_prune.c, sb_search_opts.prune). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dp_engine.h"

/* The process's CPU time (all threads; SB_DP_TRACE). */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- elimination ------------------------------------------------------------ */


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


/* ---- one elimination ---------------------------------------------------------
 *
 * eliminate(v) gathers v's live factors and its dependent set S, loads the
 * factors as inflow tables, computes the new table g over S (copied from an
 * earlier elimination when the inputs are equal, else row by row through
 * the shortcuts), then retires v's factors and adds g in their place. */



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
    if (dp_charge(E, el->size * (8.0 + 2.0), el->v, el->k))
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
        if (dp_build_pending(E, f, order[0]))
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
        if (!f->t && !f->id && dp_pair_table(E, f, pending_rows_op(el, f), NULL))
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

/* Equal columns of v (dp_compact_eliminated): from here nv counts the kept
 * configs and xmap maps them back. */
static int keep_distinct_columns(elim *el)
{
    int nx = el->nv;
    for (int x = 0; x < el->nv; x++)
        el->xmap[x] = x;
    if (!el->E->plain && dp_compact_eliminated(el->in, el->nfl, el->P, el->nv, el->xmap, &nx))
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
        if (!E->plain && dp_config_classes(el->E, el->in, el->nfl, q, el->S[q], el->nv, el->rep[q]))
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
        el->vscan = dp_vec_scan_pick(E->scan == 2);
    if (el->vscan) {
        el->E->rows_vector += el->nrep[k - 1];
        return 0;
    }
    if (!E->plain && E->scan != 1)
        el->vlater = dp_vec_scan_pick(0); /* dp_scan_rows samples the others first */
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
            && dp_last_level_classes(el->in, el->nfl, k - 1, nv, el->cbuf, el->cbuf + nv, &el->ncls)))
        return elim_oom(el);
    el->E->rows_threshold += el->threshold ? (long long)el->nrep[k - 1] : 0;
    fill_rowmin(el);
    return 0;
}

/* A reused elimination does not build v's pending pair tables; they are
 * charged as if built, so that the peak table memory (and --max-table-mb)
 * does not depend on what was reused. */
static int charge_unbuilt(elim *el)
{
    engine *E = el->E;
    for (int i = 0; i < E->nvf[el->v]; i++) {
        const factor *f = &E->f[E->vf[el->v][i]];
        if (f->alive && !f->t && dp_charge(E, (double)f->size * 8, f->vars[0], 2))
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
            return dp_charge(E, el->size * (8.0 + 2.0), el->v, el->k) || charge_unbuilt(el) ? -1 : 0;
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
        if (dp_scan_rows(el))
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
    if (dp_charge(E, el->size * 8.0, el->v, el->k))
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
    if (dp_add_factor(E, &g))
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
    dp_edge_layouts_free(E);
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
    return sb_search_lc(pb, opts, NULL, out, err);
}

int sb_search_lc(const sb_problem *pb, const sb_search_opts *opts, dp_layout_cache *lc,
                 sb_result *out, sb_error *err)
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
    if (lc && lc->pb == sp) /* the layouts of sp's edges from its DPs before */
        E.elc = lc->elc, E.elc_have = lc->have, E.elc_ext = lc;
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
    if (dp_init_factors(&E) || eliminate_all(&E, show, t0, steps, out))
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

