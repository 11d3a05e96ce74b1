/* candidates.c: global mesh-shape x layout-rule candidates, Mesh-TensorFlow
 * style. A candidate is a mesh (0..3 named axes x, y, z whose product
 * divides P) and a layout rule set (each of the model's dim names on one
 * mesh axis or unsharded; two names that meet in one op's iteration space
 * never share an axis); it induces one config per op. Also the lookup of a
 * config (exact or nearest valid) that every baseline uses. Not the cost
 * model (cost.c) and not the exact search (dp.c). */
#include "shardbench/candidates.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- config lookup -------------------------------------------------------------- */

static int cmp_cfg(const int *a, const int *b, int nd)
{
    for (int i = 0; i < nd; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* Configs are enumerated in lexicographic order (first dim slowest, split
 * counts ascending): binary search. */
static int find_exact(const sb_configs *cf, const int *want)
{
    int lo = 0, hi = cf->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = cmp_cfg(cf->c + (size_t)mid * (size_t)cf->ndims, want, cf->ndims);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int sb_config_nearest(const sb_problem *pb, int op, const int *want, int *exact)
{
    const sb_configs *cf = &pb->cfg[op];
    int k = find_exact(cf, want);
    if (exact)
        *exact = k >= 0;
    if (k >= 0)
        return k;
    int best = 0, best_q = 0;
    double best_d = INFINITY;
    for (int j = 0; j < cf->n; j++) {
        const int *c = cf->c + (size_t)j * (size_t)cf->ndims;
        double d = 0;
        int q = 1;
        for (int i = 0; i < cf->ndims; i++) {
            d += fabs(log2((double)c[i]) - log2((double)want[i]));
            q *= c[i];
        }
        if (d < best_d - 1e-12 || (fabs(d - best_d) <= 1e-12 && q > best_q)) {
            best = j;
            best_d = d;
            best_q = q;
        }
    }
    return best;
}

/* ---- names ------------------------------------------------------------------------ */

static int name_index(const sb_candidate_set *cs, const char *name)
{
    for (int i = 0; i < cs->nnames; i++)
        if (!strcmp(cs->names[i], name))
            return i;
    return -1;
}

/* split count e is a choice of dim d of op (divides, >= cutoff, <= P) */
static int split_ok(const sb_problem *pb, const sb_op *op, int d, int e)
{
    int64_t D = op->dims[d].size;
    if (op->nosplit & (1u << d))
        return e == 1;
    return e <= pb->p && D % e == 0 && D / e >= pb->cp.cutoff;
}

/* Mappable names: dims that some op may split 2 or more ways. */
static int collect_names(const sb_problem *pb, sb_candidate_set *cs, sb_error *err)
{
    cs->nnames = 0;
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        for (int d = 0; d < op->ndims; d++) {
            int any = 0;
            for (int e = 2; e <= pb->p && !any; e++)
                any = split_ok(pb, op, d, e);
            if (!any || name_index(cs, op->dims[d].name) >= 0)
                continue;
            if (cs->nnames == SB_CAND_MAX_NAMES)
                return sb_fail(err, SB_EXIT_INPUT,
                               "model '%s' has more than %d splittable dim names (candidates "
                               "enumerate at most %d)",
                               pb->m->name, SB_CAND_MAX_NAMES, SB_CAND_MAX_NAMES);
            snprintf(cs->names[cs->nnames++], SB_NAME_MAX, "%s", op->dims[d].name);
        }
    }
    return 0;
}

/* ---- induced strategy ------------------------------------------------------------- */

typedef struct {
    const sb_problem *pb;
    const sb_candidate_set *cs;
    int (*dim_name)[SB_MAX_DIMS];  /* per op and dim: name index or -1 */
    uint32_t *conflict;            /* per name: names met in one op */
} cand_ctx;

static int induce(const cand_ctx *cx, const sb_cand_mesh *mesh, const signed char *axis, int *choice)
{
    int fallbacks = 0;
    for (int i = 0; i < cx->pb->m->nops; i++) {
        const sb_op *op = &cx->pb->m->ops[i];
        int want[SB_MAX_DIMS], exact;
        for (int d = 0; d < op->ndims; d++) {
            int nm = cx->dim_name[i][d];
            want[d] = nm >= 0 && axis[nm] >= 0 ? mesh->size[(int)axis[nm]] : 1;
        }
        choice[i] = sb_config_nearest(cx->pb, i, want, &exact);
        fallbacks += !exact;
    }
    return fallbacks;
}

static int build_ctx(const sb_problem *pb, sb_candidate_set *cs, cand_ctx *cx, sb_error *err)
{
    cx->pb = pb;
    cx->cs = cs;
    cx->dim_name = sb_calloc((size_t)pb->m->nops, sizeof *cx->dim_name, err);
    cx->conflict = sb_calloc(SB_CAND_MAX_NAMES, sizeof *cx->conflict, err);
    if (!cx->dim_name || !cx->conflict)
        return -1;
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        uint32_t here = 0;
        for (int d = 0; d < op->ndims; d++) {
            cx->dim_name[i][d] = name_index(cs, op->dims[d].name);
            if (cx->dim_name[i][d] >= 0)
                here |= 1u << cx->dim_name[i][d];
        }
        for (int d = 0; d < op->ndims; d++)
            if (cx->dim_name[i][d] >= 0)
                cx->conflict[cx->dim_name[i][d]] |= here & ~(1u << cx->dim_name[i][d]);
    }
    return 0;
}

static void free_ctx(cand_ctx *cx)
{
    free(cx->dim_name);
    free(cx->conflict);
}

int sb_candidate_strategy(const sb_problem *pb, const sb_candidate_set *cs, const sb_candidate *c,
                          int *choice)
{
    cand_ctx cx;
    sb_error err = {0};
    if (build_ctx(pb, (sb_candidate_set *)cs, &cx, &err)) {
        free_ctx(&cx);
        return -1;
    }
    int fb = induce(&cx, &c->mesh, c->axis, choice);
    free_ctx(&cx);
    return fb;
}

/* ---- meshes ----------------------------------------------------------------------- */

/* Non-increasing factorizations of d into 1..3 factors >= 2. */
static int factorize(int d, int naxes, int maxf, int *cur, int depth, sb_cand_mesh *out, int n, int cap)
{
    if (d == 1) {
        if (depth > 0 && n < cap) {
            out[n].naxes = depth;
            memcpy(out[n].size, cur, sizeof(int) * SB_CAND_MAX_AXES);
            n++;
        }
        return n;
    }
    if (depth == naxes)
        return n;
    for (int f = d < maxf ? d : maxf; f >= 2; f--)
        if (d % f == 0) {
            cur[depth] = f;
            n = factorize(d / f, naxes, f, cur, depth + 1, out, n, cap);
            cur[depth] = 0;
        }
    return n;
}

static int mesh_shapes(int p, sb_cand_mesh *out, int cap)
{
    int n = 0;
    out[n++] = (sb_cand_mesh){0};
    for (int d = 2; d <= p; d++)
        if (p % d == 0) {
            int cur[SB_CAND_MAX_AXES] = {0};
            n = factorize(d, SB_CAND_MAX_AXES, d, cur, 0, out, n, cap);
        }
    return n;
}

/* ---- enumeration ------------------------------------------------------------------ */

typedef struct {
    uint64_t h1, h2;
} key128;

typedef struct {
    cand_ctx cx;
    sb_optimizer opt;
    const sb_cand_mesh *mesh;
    uint32_t allowed[SB_CAND_MAX_AXES]; /* names that may take each axis */
    signed char axis[SB_CAND_MAX_NAMES];
    uint32_t on_axis[SB_CAND_MAX_AXES];
    int *choice;
    long rule_sets, max_rule_sets;
    int truncated, progress;
    double t0, last_print;
    /* distinct strategies */
    key128 *keys;
    size_t nkeys, cap_keys;
    sb_candidate *cand;
    int ncand, cap_cand;
    sb_error *err;
} enum_state;

static key128 hash_choice(const int *c, int n)
{
    key128 k = {1469598103934665603ULL, 0x9e3779b97f4a7c15ULL};
    for (int i = 0; i < n; i++) {
        k.h1 = (k.h1 ^ (uint64_t)(unsigned)c[i]) * 1099511628211ULL;
        k.h2 = (k.h2 + (uint64_t)(unsigned)c[i] + 0x632be59bd9b4e019ULL) * 0xff51afd7ed558ccdULL;
        k.h2 ^= k.h2 >> 29;
    }
    if (!k.h1 && !k.h2)
        k.h1 = 1;
    return k;
}

/* Inserts k; returns 1 if new, 0 if present, -1 on allocation failure. */
static int key_insert(enum_state *st, key128 k)
{
    if (2 * (st->nkeys + 1) > st->cap_keys) {
        size_t nc = st->cap_keys ? 2 * st->cap_keys : 4096;
        key128 *nk = sb_calloc(nc, sizeof *nk, st->err);
        if (!nk)
            return -1;
        for (size_t i = 0; i < st->cap_keys; i++)
            if (st->keys[i].h1 || st->keys[i].h2) {
                size_t j = st->keys[i].h1 & (nc - 1);
                while (nk[j].h1 || nk[j].h2)
                    j = (j + 1) & (nc - 1);
                nk[j] = st->keys[i];
            }
        free(st->keys);
        st->keys = nk;
        st->cap_keys = nc;
    }
    size_t j = k.h1 & (st->cap_keys - 1);
    while (st->keys[j].h1 || st->keys[j].h2) {
        if (st->keys[j].h1 == k.h1 && st->keys[j].h2 == k.h2)
            return 0;
        j = (j + 1) & (st->cap_keys - 1);
    }
    st->keys[j] = k;
    st->nkeys++;
    return 1;
}

static void show_progress(enum_state *st)
{
    double now = sb_now();
    if (!st->progress || now - st->last_print < 0.5)
        return;
    st->last_print = now;
    fprintf(stderr, "\rcandidates: %ld rule sets, %d distinct strategies, %.1f s", st->rule_sets,
            st->ncand, now - st->t0);
}

static int leaf(enum_state *st)
{
    for (int a = 0; a < st->mesh->naxes; a++)
        if (!st->on_axis[a])
            return 0; /* an unused axis: the same as a smaller mesh */
    if (st->rule_sets >= st->max_rule_sets) {
        st->truncated = 1;
        return 1;
    }
    st->rule_sets++;
    if ((st->rule_sets & 1023) == 0)
        show_progress(st);
    const sb_problem *pb = st->cx.pb;
    int fb = induce(&st->cx, st->mesh, st->axis, st->choice);
    int fresh = key_insert(st, hash_choice(st->choice, pb->m->nops));
    if (fresh < 0)
        return -1;
    if (!fresh)
        return 0;
    if (st->ncand == st->cap_cand) {
        st->cap_cand = st->cap_cand ? 2 * st->cap_cand : 256;
        sb_candidate *nc = sb_realloc(st->cand, (size_t)st->cap_cand * sizeof *nc, st->err);
        if (!nc)
            return -1;
        st->cand = nc;
    }
    sb_candidate *c = &st->cand[st->ncand++];
    memset(c, 0, sizeof *c);
    c->mesh = *st->mesh;
    memcpy(c->axis, st->axis, sizeof c->axis);
    c->fallbacks = fb;
    c->cost = sb_strategy_cost(pb, st->choice);
    c->mem = sb_strategy_memory(pb, st->choice, st->opt, NULL);
    return 0;
}

/* Assigns name i and onward; returns -1 on error, 1 when truncated. */
static int assign(enum_state *st, int i)
{
    if (i == st->cx.cs->nnames)
        return leaf(st);
    st->axis[i] = -1;
    int rc = assign(st, i + 1);
    if (rc)
        return rc;
    for (int a = 0; a < st->mesh->naxes; a++) {
        if (!(st->allowed[a] & (1u << i)) || (st->on_axis[a] & st->cx.conflict[i]))
            continue;
        st->axis[i] = (signed char)a;
        st->on_axis[a] |= 1u << i;
        rc = assign(st, i + 1);
        st->on_axis[a] &= ~(1u << i);
        st->axis[i] = -1;
        if (rc)
            return rc;
    }
    return 0;
}

/* names that some op may split exactly `e` ways */
static uint32_t names_splittable(const enum_state *st, int e)
{
    const sb_problem *pb = st->cx.pb;
    uint32_t mask = 0;
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        for (int d = 0; d < op->ndims; d++) {
            int nm = st->cx.dim_name[i][d];
            if (nm >= 0 && split_ok(pb, op, d, e))
                mask |= 1u << nm;
        }
    }
    return mask;
}

static int by_cost(const void *a, const void *b)
{
    const sb_candidate *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    if (x->mesh.naxes != y->mesh.naxes)
        return x->mesh.naxes - y->mesh.naxes;
    return 0;
}

int sb_candidates_enumerate(const sb_problem *pb, sb_optimizer opt, long max_rule_sets,
                            int progress, sb_candidate_set *out, sb_error *err)
{
    memset(out, 0, sizeof *out);
    double t0 = sb_now();
    if (collect_names(pb, out, err))
        return -1;
    enum_state st = {.opt = opt, .err = err, .t0 = t0, .progress = progress && isatty(2)};
    st.max_rule_sets = max_rule_sets > 0 ? max_rule_sets : 2000000;
    int rc = -1;
    if (build_ctx(pb, out, &st.cx, err))
        goto done;
    st.choice = sb_malloc((size_t)pb->m->nops * sizeof *st.choice, err);
    sb_cand_mesh meshes[512];
    int nm = mesh_shapes(pb->p, meshes, 512);
    if (!st.choice)
        goto done;
    out->nmeshes = nm;
    for (int k = 0; k < nm; k++) {
        st.mesh = &meshes[k];
        for (int a = 0; a < meshes[k].naxes; a++)
            st.allowed[a] = names_splittable(&st, meshes[k].size[a]);
        memset(st.axis, -1, sizeof st.axis);
        memset(st.on_axis, 0, sizeof st.on_axis);
        int r = assign(&st, 0);
        if (r < 0)
            goto done;
        if (r > 0)
            break;
    }
    if (st.progress)
        fprintf(stderr, "\r%60s\r", "");
    for (int i = 0; i < st.ncand; i++)
        if (!isfinite(st.cand[i].cost)) {
            sb_fail(err, SB_EXIT_INPUT, "%s at p=%d: a candidate's predicted cost is not a finite "
                    "number: the cost parameters (%s) are out of range for this model",
                    pb->m->name, pb->p,
                    pb->cp.calibration[0] ? pb->cp.calibration : "--flops, --bw");
            goto done;
        }
    qsort(st.cand, (size_t)st.ncand, sizeof *st.cand, by_cost);
    out->cand = st.cand;
    out->ncand = st.ncand;
    st.cand = NULL;
    out->rule_sets = st.rule_sets;
    out->truncated = st.truncated;
    out->seconds = sb_now() - t0;
    rc = 0;
done:
    free(st.cand);
    free(st.keys);
    free(st.choice);
    free_ctx(&st.cx);
    return rc;
}

void sb_candidate_set_free(sb_candidate_set *cs)
{
    if (!cs)
        return;
    free(cs->cand);
    cs->cand = NULL;
    cs->ncand = 0;
}

/* ---- text --------------------------------------------------------------------------- */

static const char axis_names[SB_CAND_MAX_AXES] = {'x', 'y', 'z'};

void sb_cand_mesh_str(const sb_cand_mesh *m, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    if (m->naxes == 0) {
        snprintf(buf, n, "1");
        return;
    }
    for (int a = 0; a < m->naxes && used < n; a++)
        used += (size_t)snprintf(buf + used, n - used, "%s%c=%d", a ? "," : "", axis_names[a],
                                 m->size[a]);
}

void sb_candidate_rules_str(const sb_candidate_set *cs, const sb_candidate *c, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int a = 0; a < c->mesh.naxes; a++)
        for (int i = 0; i < cs->nnames && used < n; i++)
            if (c->axis[i] == a)
                used += (size_t)snprintf(buf + used, n - used, "%s%s:%c", used ? ";" : "",
                                         cs->names[i], axis_names[a]);
}
