/* profile.c: the predictive cost model's arithmetic (shardbench/profile.h):
 * the keys of a measured op config, the lookup and estimate of a config's
 * seconds, the fitting primitives, and the problem's costs rewritten in
 * seconds. The measuring is `shardbench profile` (measure/profile_run.c),
 * the fits of a launch measure/profile_fit.c; the storage is
 * results/profiles.c. */
#include "shardbench/profile.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"

static const char *const pcoll_names[SB_PCOLL_COUNT] = {"allreduce", "reduce_scatter",
                                                         "allgather", "alltoall", "p2p"};

const char *sb_pcoll_name(int kind)
{
    return kind >= 0 && kind < SB_PCOLL_COUNT ? pcoll_names[kind] : NULL;
}

void sb_profile_free(sb_profile *pf)
{
    if (!pf)
        return;
    free(pf->ops);
    free(pf->coll);
    pf->ops = NULL;
    pf->coll = NULL;
    pf->nops = pf->ncoll = 0;
}

void sb_prof_shape(const sb_op *op, const int *c, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < op->ndims && k < n; i++) {
        long long d = (long long)(op->dims[i].size / (c[i] > 0 ? c[i] : 1));
        int w = snprintf(buf + k, n - k, "%s%lld", i ? "x" : "", d);
        if (w < 0)
            break;
        k += (size_t)w;
    }
}

void sb_prof_config(const sb_op *op, const int *c, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < op->ndims && k < n; i++) {
        int w = snprintf(buf + k, n - k, "%s%d", i ? "," : "", c[i]);
        if (w < 0)
            break;
        k += (size_t)w;
    }
}

/* FNV-1a, 64 bits */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}
#define FNV_INT(h, v)                                                                              \
    do {                                                                                           \
        int64_t v_ = (int64_t)(v);                                                                 \
        (h) = fnv((h), &v_, sizeof v_);                                                            \
    } while (0)

static uint64_t operand_hash(uint64_t h, const sb_model *m, const sb_operand *o)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    FNV_INT(h, t->kind == SB_TENSOR_WEIGHT);
    FNV_INT(h, t->ndims);
    for (int j = 0; j < t->ndims; j++) {
        FNV_INT(h, t->dims[j].size);
        FNV_INT(h, o->map[j]);
    }
    return h;
}

void sb_prof_sig(const sb_model *m, const sb_op *op, char *buf, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    FNV_INT(h, op->kind);
    FNV_INT(h, op->ndims);
    for (int i = 0; i < op->ndims; i++) {
        FNV_INT(h, op->dims[i].size);
        FNV_INT(h, op->role[i]);
    }
    FNV_INT(h, op->nosplit);
    FNV_INT(h, op->stat_dims);
    const int64_t attrs[] = {op->pw, op->axis, op->causal, op->pos_axis, op->axes,
                             op->kernel[0], op->kernel[1], op->stride[0], op->stride[1],
                             op->pad[0], op->pad[1], op->dilation[0], op->dilation[1],
                             op->groups, op->pool_avg, op->batchnorm, op->layers, op->fn,
                             op->topk};
    h = fnv(h, attrs, sizeof attrs);
    h = fnv(h, op->perm, sizeof op->perm);
    h = fnv(h, &op->theta, sizeof op->theta);
    h = fnv(h, &op->moe_aux, sizeof op->moe_aux);
    FNV_INT(h, op->nin);
    for (int k = 0; k < op->nin; k++)
        h = operand_hash(h, m, &op->in[k]);
    FNV_INT(h, op->nout);
    for (int k = 0; k < op->nout; k++)
        h = operand_hash(h, m, &op->out[k]);
    FNV_INT(h, op->nweights);
    for (int w = 0; w < op->nweights; w++) {
        FNV_INT(h, op->weights[w].ndims);
        for (int j = 0; j < op->weights[w].ndims; j++) {
            FNV_INT(h, op->weights[w].map[j]);
            FNV_INT(h, op->weights[w].size[j]);
        }
    }
    snprintf(buf, n, "%016llx", (unsigned long long)h);
}

static int cmp_entry(const sb_prof_op *a, const char *kind, const char *shape,
                     const char *config, const char *sig)
{
    int c = strcmp(a->kind, kind);
    if (!c)
        c = strcmp(a->shape, shape);
    if (!c)
        c = strcmp(a->config, config);
    if (!c)
        c = strcmp(a->sig, sig);
    return c;
}

const sb_prof_op *sb_profile_find(const sb_profile *pf, const sb_model *m, const sb_op *op,
                                  const int *c)
{
    char shape[160], config[64], sig[20];
    sb_prof_shape(op, c, shape, sizeof shape);
    sb_prof_config(op, c, config, sizeof config);
    sb_prof_sig(m, op, sig, sizeof sig);
    const char *kind = sb_op_kind_name(op->kind);
    int lo = 0, hi = pf->nops - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, r = cmp_entry(&pf->ops[mid], kind, shape, config, sig);
        if (!r)
            return &pf->ops[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

/* The elements of op's own weights and of the weights the file declares
 * as its inputs, on a rank of config c: what the rank's update touches. */
double sb_prof_weight_elems(const sb_model *m, const sb_op *op, const int *c)
{
    double n = 0.0;
    for (int w = 0; w < op->nweights; w++) {
        double e = 1.0;
        for (int j = 0; j < op->weights[w].ndims; j++) {
            int d = op->weights[w].map[j];
            e *= (double)op->weights[w].size[j] / (d >= 0 ? c[d] : 1);
        }
        n += e;
    }
    for (int k = 0; k < op->nin; k++) {
        const sb_tensor *t = &m->tensors[op->in[k].tensor];
        if (t->kind != SB_TENSOR_WEIGHT)
            continue;
        int lay[SB_MAX_DIMS];
        sb_operand_layout(op, &op->in[k], t->ndims, c, lay);
        double e = 1.0;
        for (int j = 0; j < t->ndims; j++)
            e *= (double)t->dims[j].size / lay[j];
        n += e;
    }
    return n;
}

/* The measured entry of the same kind nearest to `ref` in reference cost
 * (log distance), preferring one of the same signature; NULL if none. */
static const sb_prof_op *nearest(const sb_profile *pf, const char *kind, const char *sig,
                                 double ref)
{
    const sb_prof_op *best = NULL;
    double bd = INFINITY;
    for (int pass = 0; pass < 2 && !best; pass++)
        for (int i = 0; i < pf->nops; i++) {
            const sb_prof_op *e = &pf->ops[i];
            if (strcmp(e->kind, kind) || (pass == 0 && strcmp(e->sig, sig)) || !(e->ref_cost > 0))
                continue;
            double d = fabs(log(e->ref_cost) - log(ref > 0 ? ref : 1e-30));
            if (d < bd) {
                bd = d;
                best = e;
            }
        }
    return best;
}

void sb_profile_coll_params(const sb_profile *pf, sb_cost_params *cp)
{
    cp->coll_mode = SB_COLL_MEASURED;
    memset(cp->coll_alpha_s, 0, sizeof cp->coll_alpha_s);
    memset(cp->coll_beta_s, 0, sizeof cp->coll_beta_s);
    for (int i = 0; i < pf->ncoll; i++) {
        const sb_prof_coll *c = &pf->coll[i];
        if (c->kind < 0 || c->kind >= SB_COLL_KINDS || c->group < 2 || c->group > SB_COLL_MAXQ)
            continue;
        cp->coll_alpha_s[c->kind][c->group] = c->alpha_s > 0 ? c->alpha_s : 0.0;
        cp->coll_beta_s[c->kind][c->group] = c->beta_s_per_byte > 0 ? c->beta_s_per_byte : 0.0;
    }
}

int sb_profile_apply(sb_problem *pb, const sb_profile *pf, sb_profile_stats *st, sb_error *err)
{
    memset(st, 0, sizeof *st);
    if (!(pb->cp.tflops > 0))
        return sb_fail(err, SB_EXIT_INTERNAL, "sb_profile_apply: no F to express seconds in");
    const sb_model *m = pb->m;
    double S = pb->cp.tflops * 1e12; /* FLOP-equivalents per second */
    sb_cost_params ref;
    sb_cost_params_default(&ref);
    ref.cutoff = pb->cp.cutoff;
    ref.devices = pb->p;
    /* an estimate's parts: its kernels scaled from the nearest measured
     * entry by the reference costs without collectives, and its
     * collectives priced by the profile's alpha-beta (the machine's links
     * for a kind or group size it did not measure) */
    sb_cost_params ref_free = ref, ab = pb->cp, free_cp = pb->cp;
    ref_free.coll_mode = SB_COLL_FREE;
    free_cp.coll_mode = SB_COLL_FREE;
    sb_profile_coll_params(pf, &ab);
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        const char *kind = sb_op_kind_name(op->kind);
        char sig[20];
        sb_prof_sig(m, op, sig, sizeof sig);
        sb_configs *cf = &pb->cfg[i];
        for (int k = 0; k < cf->n; k++) {
            const int *c = cf->c + (size_t)k * (size_t)cf->ndims;
            const sb_prof_op *e = sb_profile_find(pf, m, op, c);
            double secs;
            st->configs++;
            if (e) {
                secs = e->compute_s + e->coll_s;
                st->measured++;
            } else {
                double r = sb_op_cost(m, op, c, &ref);
                const sb_prof_op *n = nearest(pf, kind, sig, r);
                if (n && n->ref_compute > 0) {
                    double rc = sb_op_cost(m, op, c, &ref_free);
                    double coll = (sb_op_cost(m, op, c, &ab) - sb_op_cost(m, op, c, &free_cp)) / S;
                    secs = n->compute_s * (rc / n->ref_compute) + (coll > 0 ? coll : 0.0);
                    st->estimated++;
                } else if (n) { /* a profile from before ref_compute: the whole ratio */
                    secs = (n->compute_s + n->coll_s) * (r > 0 ? r / n->ref_cost : 1.0);
                    st->estimated++;
                } else {
                    secs = cf->cost[k] / S; /* the analytic model's time */
                    st->analytic++;
                }
            }
            secs += sb_prof_weight_elems(m, op, c) * pf->update_s_per_elem;
            if (i == 0) /* (a profile stored before the fit held it at 0) */
                secs += pf->fixed_s > 0 ? pf->fixed_s : 0.0;
            cf->cost[k] = secs * S;
        }
    }
    pb->cp.profiled = 1;
    pb->cp.relay_msg_s = pf->relay_msg_s;
    pb->cp.relay_word_s = pf->relay_word_s;
    pb->cp.relay_local_s = pf->relay_local_s;
    pb->cp.profile_probe_s = pf->probe_s > 0 ? pf->probe_s : 0.0;
    return 0;
}

/* Solves the k x k system A b = r (Gaussian elimination with partial
 * pivoting); -1 when singular. */
static int solve(double *A, double *r, int k, double *b)
{
    for (int c = 0; c < k; c++) {
        int piv = c;
        for (int i = c + 1; i < k; i++)
            if (fabs(A[i * k + c]) > fabs(A[piv * k + c]))
                piv = i;
        if (!(fabs(A[piv * k + c]) > 1e-300))
            return -1;
        if (piv != c) {
            for (int j = 0; j < k; j++) {
                double t = A[c * k + j];
                A[c * k + j] = A[piv * k + j];
                A[piv * k + j] = t;
            }
            double t = r[c];
            r[c] = r[piv];
            r[piv] = t;
        }
        for (int i = c + 1; i < k; i++) {
            double f = A[i * k + c] / A[c * k + c];
            for (int j = c; j < k; j++)
                A[i * k + j] -= f * A[c * k + j];
            r[i] -= f * r[c];
        }
    }
    for (int c = k - 1; c >= 0; c--) {
        double s = r[c];
        for (int j = c + 1; j < k; j++)
            s -= A[c * k + j] * b[j];
        b[c] = s / A[c * k + c];
    }
    return 0;
}

int sb_fit_nonneg(const double *x, const double *y, int n, int k, double *beta)
{
    int on[4] = {1, 1, 1, 1};
    for (int j = 0; j < k; j++)
        beta[j] = 0.0;
    if (k < 1 || k > 4)
        return -1;
    for (int round = 0; round < k; round++) {
        int idx[4], m = 0;
        for (int j = 0; j < k; j++)
            if (on[j])
                idx[m++] = j;
        if (m == 0)
            return 0;
        double A[16] = {0}, r[4] = {0}, b[4] = {0};
        for (int i = 0; i < n; i++)
            for (int a = 0; a < m; a++) {
                r[a] += x[i * k + idx[a]] * y[i];
                for (int c = 0; c < m; c++)
                    A[a * m + c] += x[i * k + idx[a]] * x[i * k + idx[c]];
            }
        if (solve(A, r, m, b)) { /* a feature that never varies: drop the last one on */
            on[idx[m - 1]] = 0;
            continue;
        }
        int neg = -1;
        for (int a = 0; a < m; a++)
            if (b[a] < 0 && (neg < 0 || b[a] < b[neg]))
                neg = a;
        if (neg < 0) {
            for (int j = 0; j < k; j++)
                beta[j] = 0.0;
            for (int a = 0; a < m; a++)
                beta[idx[a]] = b[a];
            return 0;
        }
        on[idx[neg]] = 0;
    }
    return 0;
}

double sb_prof_own_s(double coll, double in_op, double kernels, double span, double relay)
{
    double own = isfinite(coll) && coll > 0 ? coll : 0.0;
    if (isfinite(in_op) && in_op - kernels > own)
        own = in_op - kernels;
    if (isfinite(span) && isfinite(relay) && span - relay - kernels > own)
        own = span - relay - kernels;
    return own;
}

double sb_prof_core_s(double wall, double core)
{
    return isfinite(core) && core > wall ? core : wall;
}

double sb_prof_relay_scale(const double *rest, const double *relay, int K)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < K; k++) {
        lo = relay[k] < lo ? relay[k] : lo;
        hi = relay[k] > hi ? relay[k] : hi;
    }
    if (K < 3 || !(hi > 0) || !(hi - lo > 0.1 * hi))
        return 1.0;
    double *x = malloc((size_t)K * 2 * sizeof *x), cg[2] = {0, 0};
    if (!x)
        return 1.0;
    for (int k = 0; k < K; k++) {
        x[2 * k] = 1.0;
        x[2 * k + 1] = relay[k];
    }
    sb_fit_nonneg(x, rest, K, 2, cg);
    free(x);
    /* at least 1: the fitted relayouts are the least waiting rank's, and a
     * step waits at least that long in them; a slope under 1 is the fit's
     * intercept taking them over (AlexNet at P = 4, 2x oversubscribed,
     * fitted 0.097 and priced the relayout-heavy pase-best at a third of
     * its measured relayouts) */
    return cg[1] > 1 && isfinite(cg[1]) ? cg[1] : 1.0;
}

void sb_prof_edge_features(const sb_problem *pb, int e, const int *choice, double *f)
{
    const sb_model *m = pb->m;
    const sb_edge *ed = &pb->edges[e];
    const sb_op *src = &m->ops[ed->src], *dst = &m->ops[ed->dst];
    const sb_tensor *t = &m->tensors[ed->tensor];
    int ls[SB_MAX_DIMS], ld[SB_MAX_DIMS];
    sb_operand_layout(src, &src->out[ed->src_slot], t->ndims,
                      pb->cfg[ed->src].c + (size_t)choice[ed->src] * (size_t)src->ndims, ls);
    sb_operand_layout(dst, &dst->in[ed->dst_slot], t->ndims,
                      pb->cfg[ed->dst].c + (size_t)choice[ed->dst] * (size_t)dst->ndims, ld);
    double w = sb_edge_words(t, ls, ld);
    f[0] = 1.0;
    f[1] = w > 0 ? 1.0 : 0.0;
    f[2] = w;
    f[3] = sb_edge_local_words(t, ls, ld);
}

void sb_machine_name(const char *path, char *buf, size_t n)
{
    const char *base = strrchr(path, '/');
    snprintf(buf, n, "%s", base ? base + 1 : path);
    size_t len = strlen(buf);
    if (len > 8 && !strcmp(buf + len - 8, ".machine"))
        buf[len - 8] = '\0';
}
