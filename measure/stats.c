/* measure/stats.c: the statistics of `regress` and `nightly` (plots.h,
 * "statistics"): a one-sided Mann-Whitney U test, a percentile bootstrap
 * confidence interval of the ratio of medians, the noise band of a series'
 * history, and the verdict that combines them.
 *
 * Samples are one number per launch (a trial: the median step time of one
 * process), never single steps: steps of one process share its placement,
 * caches and the machine's load of that moment, so they are not independent.
 * Everything here is deterministic (a fixed-seed generator), so a verdict
 * can be recomputed from the database. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/measure.h"

void sb_stat_rule_default(sb_stat_rule *r)
{
    r->threshold = 0.05;
    r->conf = 0.95;
    r->alpha = 0.05;
    r->min_n = 3;
    r->boot = 2000;
    r->seed = 0x5eedb0075ULL;
}

const char *sb_stat_verdict_name(int v)
{
    switch (v) {
    case SB_VERDICT_REGRESSION: return "regression";
    case SB_VERDICT_IMPROVEMENT: return "improvement";
    case SB_VERDICT_NOISE: return "within noise";
    default: return "not enough data";
    }
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sb_stat_median(const double *x, int n)
{
    if (n < 1)
        return NAN;
    double *t = malloc(sizeof *t * (size_t)n);
    if (!t)
        return NAN;
    memcpy(t, x, sizeof *t * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, cmp_dbl);
    double m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

/* splitmix64: small, fast, good enough for resampling. */
uint64_t sb_stat_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int sb_stat_randint(uint64_t *s, int n) { return (int)(sb_stat_rand(s) % (uint64_t)n); }

/* P(U >= u) for U the Mann-Whitney count of pairs (x_i < y_j) under the
 * null (no ties), m = |x|, n = |y|: exact, by the recurrence
 * N(u; i, j) = N(u - j; i - 1, j) + N(u; i, j - 1) over the C(m+n, m)
 * orderings. */
static double mwu_exact_tail(int m, int n, int u)
{
    int top = m * n;
    if (u <= 0)
        return 1;
    if (u > top)
        return 0;
    /* f[j][v]: orderings of i x's and j y's with count v; rows i = 0..m */
    size_t w = (size_t)top + 1;
    double *f = calloc((size_t)(n + 1) * w, sizeof *f), *g = calloc((size_t)(n + 1) * w, sizeof *g);
    if (!f || !g) {
        free(f);
        free(g);
        return NAN;
    }
    for (int j = 0; j <= n; j++)
        f[(size_t)j * w] = 1; /* i = 0: one ordering, count 0 */
    for (int i = 1; i <= m; i++) {
        memset(g, 0, (size_t)(n + 1) * w * sizeof *g);
        g[0] = 1; /* j = 0 */
        for (int j = 1; j <= n; j++)
            for (int v = 0; v <= i * j; v++) {
                /* the last element is a y (greater than all i x's: +i) or an x */
                double a = v - i >= 0 ? g[(size_t)(j - 1) * w + (size_t)(v - i)] : 0;
                double b = f[(size_t)j * w + (size_t)v];
                g[(size_t)j * w + (size_t)v] = a + b;
            }
        double *t = f;
        f = g;
        g = t;
    }
    double tot = 0, tail = 0;
    for (int v = 0; v <= top; v++) {
        double c = f[(size_t)n * w + (size_t)v];
        tot += c;
        if (v >= u)
            tail += c;
    }
    free(f);
    free(g);
    return tail / tot;
}

double sb_stat_mwu_greater(const double *x, int nx, const double *y, int ny)
{
    if (nx < 1 || ny < 1)
        return NAN;
    double u = 0; /* pairs where y is the greater; ties count one half */
    int ties = 0;
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++) {
            if (y[j] > x[i])
                u += 1;
            else if (y[j] == x[i]) {
                u += 0.5;
                ties++;
            }
        }
    if (!ties && nx <= 60 && ny <= 60)
        return mwu_exact_tail(nx, ny, (int)ceil(u - 1e-9));
    /* normal approximation with continuity and tie corrections */
    int N = nx + ny;
    double *all = malloc(sizeof *all * (size_t)N);
    if (!all)
        return NAN;
    memcpy(all, x, sizeof *all * (size_t)nx);
    memcpy(all + nx, y, sizeof *all * (size_t)ny);
    qsort(all, (size_t)N, sizeof *all, cmp_dbl);
    double tcorr = 0;
    for (int i = 0; i < N;) {
        int k = i;
        while (k < N && all[k] == all[i])
            k++;
        double t = k - i;
        tcorr += t * t * t - t;
        i = k;
    }
    free(all);
    double mu = 0.5 * nx * ny;
    double var = nx * ny / 12.0 * ((N + 1) - tcorr / ((double)N * (N - 1)));
    if (!(var > 0))
        return 1;
    double z = (u - mu - 0.5) / sqrt(var);
    return 0.5 * erfc(z / sqrt(2));
}

int sb_stat_boot_ratio(const double *b, int nb, const double *c, int nc, double conf, int reps,
                       uint64_t seed, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (nb < 1 || nc < 1 || reps < 10)
        return -1;
    double *r = malloc(sizeof *r * (size_t)reps);
    double *tb = malloc(sizeof *tb * (size_t)nb), *tc = malloc(sizeof *tc * (size_t)nc);
    if (!r || !tb || !tc) {
        free(r);
        free(tb);
        free(tc);
        return -1;
    }
    uint64_t s = seed;
    for (int k = 0; k < reps; k++) {
        for (int i = 0; i < nb; i++)
            tb[i] = b[sb_stat_randint(&s, nb)];
        for (int i = 0; i < nc; i++)
            tc[i] = c[sb_stat_randint(&s, nc)];
        r[k] = sb_stat_median(tc, nc) / sb_stat_median(tb, nb);
    }
    qsort(r, (size_t)reps, sizeof *r, cmp_dbl);
    double a = (1 - conf) / 2;
    int il = (int)floor(a * (reps - 1)), ih = (int)ceil((1 - a) * (reps - 1));
    *lo = r[il];
    *hi = r[ih];
    free(r);
    free(tb);
    free(tc);
    return 0;
}

double sb_stat_band(const double *nights, int n)
{
    if (n < 3)
        return NAN;
    double med = sb_stat_median(nights, n);
    double *d = malloc(sizeof *d * (size_t)n);
    if (!d || !(med > 0)) {
        free(d);
        return NAN;
    }
    for (int i = 0; i < n; i++)
        d[i] = fabs(nights[i] / med - 1);
    double mad = sb_stat_median(d, n);
    free(d);
    return 2 * 1.4826 * mad; /* about two standard deviations of a night's median */
}

int sb_stat_compare(const sb_stat_rule *r, const double *b, int nb, const double *c, int nc,
                    double band, sb_stat_cmp *out)
{
    memset(out, 0, sizeof *out);
    out->nb = nb;
    out->nc = nc;
    out->ratio = out->lo = out->hi = out->p_slower = out->p_faster = NAN;
    out->band = band;
    out->thr = r->threshold;
    if (isfinite(band) && band > out->thr)
        out->thr = band;
    if (nb < 1 || nc < 1)
        return out->verdict = SB_VERDICT_NOT_ENOUGH;
    out->ratio = sb_stat_median(c, nc) / sb_stat_median(b, nb);
    if (nb < r->min_n || nc < r->min_n)
        return out->verdict = SB_VERDICT_NOT_ENOUGH;
    sb_stat_boot_ratio(b, nb, c, nc, r->conf, r->boot, r->seed, &out->lo, &out->hi);
    out->p_slower = sb_stat_mwu_greater(b, nb, c, nc);
    out->p_faster = sb_stat_mwu_greater(c, nc, b, nb);
    if (out->ratio > 1 + out->thr && out->lo > 1 && out->p_slower < r->alpha)
        return out->verdict = SB_VERDICT_REGRESSION;
    if (out->ratio < 1 / (1 + out->thr) && out->hi < 1 && out->p_faster < r->alpha)
        return out->verdict = SB_VERDICT_IMPROVEMENT;
    return out->verdict = SB_VERDICT_NOISE;
}

/* Benjamini-Hochberg over the finite p[i]: pass[i] for those that pass at
 * level alpha. */
static void bh_pass(const double *p, int m, double alpha, unsigned char *pass)
{
    int k = 0;
    double *v = malloc(sizeof *v * (size_t)(m + 1));
    memset(pass, 0, (size_t)m);
    if (!v)
        return;
    for (int i = 0; i < m; i++)
        if (isfinite(p[i]))
            v[k++] = p[i];
    qsort(v, (size_t)k, sizeof *v, cmp_dbl);
    double cut = -1; /* the largest p_(j) with p_(j) <= j alpha / k */
    for (int j = k; j >= 1; j--)
        if (v[j - 1] <= j * alpha / k) {
            cut = v[j - 1];
            break;
        }
    for (int i = 0; i < m; i++)
        pass[i] = isfinite(p[i]) && p[i] <= cut;
    free(v);
}

int sb_stat_family(const sb_stat_rule *r, sb_stat_cmp *c, int m)
{
    if (m < 1)
        return 0;
    double *ps = malloc(sizeof *ps * (size_t)m), *pf = malloc(sizeof *pf * (size_t)m);
    unsigned char *slow = malloc((size_t)m), *fast = malloc((size_t)m);
    int reg = 0;
    if (!ps || !pf || !slow || !fast) {
        free(ps);
        free(pf);
        free(slow);
        free(fast);
        return -1;
    }
    for (int i = 0; i < m; i++) {
        int judged = c[i].verdict != SB_VERDICT_NOT_ENOUGH;
        ps[i] = judged ? c[i].p_slower : NAN;
        pf[i] = judged ? c[i].p_faster : NAN;
    }
    bh_pass(ps, m, r->alpha, slow);
    bh_pass(pf, m, r->alpha, fast);
    for (int i = 0; i < m; i++) {
        sb_stat_cmp *x = &c[i];
        if (x->verdict == SB_VERDICT_NOT_ENOUGH)
            continue;
        if (x->ratio > 1 + x->thr && x->lo > 1 && slow[i])
            x->verdict = SB_VERDICT_REGRESSION, reg++;
        else if (x->ratio < 1 / (1 + x->thr) && x->hi < 1 && fast[i])
            x->verdict = SB_VERDICT_IMPROVEMENT;
        else
            x->verdict = SB_VERDICT_NOISE;
    }
    free(ps);
    free(pf);
    free(slow);
    free(fast);
    return reg;
}

double sb_stat_probe_cut(const double *probe, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(probe[i]) || !(probe[i] > 0))
            return 0;
    return n ? SB_STAT_PROBE_CUT * sb_stat_median(probe, n) : 0;
}

/* exp of the median over i of log(median(c[i]) / median(b[i])); tb/tc:
 * scratch of the largest sample's size, or NULL to use b and c as they are
 * (else one bootstrap draw of each). */
static double pooled_ratio(int m, const double *const *b, const int *nb, const double *const *c,
                           const int *nc, const unsigned char *use, double *tb, double *tc,
                           double *lr, uint64_t *seed)
{
    int k = 0;
    for (int i = 0; i < m; i++) {
        if (!use[i])
            continue;
        const double *x = b[i], *y = c[i];
        if (tb) {
            for (int j = 0; j < nb[i]; j++)
                tb[j] = b[i][sb_stat_randint(seed, nb[i])];
            for (int j = 0; j < nc[i]; j++)
                tc[j] = c[i][sb_stat_randint(seed, nc[i])];
            x = tb, y = tc;
        }
        lr[k++] = log(sb_stat_median(y, nc[i]) / sb_stat_median(x, nb[i]));
    }
    return exp(sb_stat_median(lr, k));
}

int sb_stat_pooled(const sb_stat_rule *r, int m, const double *const *b, const int *nb,
                   const double *const *c, const int *nc, double band, sb_stat_cmp *out)
{
    memset(out, 0, sizeof *out);
    out->ratio = out->lo = out->hi = out->p_slower = out->p_faster = NAN;
    out->band = band;
    out->thr = r->threshold;
    if (isfinite(band) && band > out->thr)
        out->thr = band;
    unsigned char *use = calloc((size_t)m + 1, 1);
    int k = 0, most = 1;
    for (int i = 0; use && i < m; i++) {
        use[i] = nb[i] >= r->min_n && nc[i] >= r->min_n;
        k += use[i];
        if (use[i] && nb[i] > most)
            most = nb[i];
        if (use[i] && nc[i] > most)
            most = nc[i];
    }
    out->nb = out->nc = k;
    if (!use || k < 3) {
        free(use);
        return out->verdict = SB_VERDICT_NOT_ENOUGH;
    }
    double *tb = malloc(sizeof *tb * (size_t)most), *tc = malloc(sizeof *tc * (size_t)most);
    double *lr = malloc(sizeof *lr * (size_t)k), *rs = malloc(sizeof *rs * (size_t)r->boot);
    if (!tb || !tc || !lr || !rs || r->boot < 10) {
        free(use), free(tb), free(tc), free(lr), free(rs);
        return out->verdict = SB_VERDICT_NOT_ENOUGH;
    }
    uint64_t seed = r->seed ^ 0x9001ULL;
    out->ratio = pooled_ratio(m, b, nb, c, nc, use, NULL, NULL, lr, &seed);
    for (int t = 0; t < r->boot; t++)
        rs[t] = pooled_ratio(m, b, nb, c, nc, use, tb, tc, lr, &seed);
    qsort(rs, (size_t)r->boot, sizeof *rs, cmp_dbl);
    double a = (1 - r->conf) / 2;
    out->lo = rs[(int)floor(a * (r->boot - 1))];
    out->hi = rs[(int)ceil((1 - a) * (r->boot - 1))];
    free(use), free(tb), free(tc), free(lr), free(rs);
    if (out->ratio > 1 + out->thr && out->lo > 1)
        return out->verdict = SB_VERDICT_REGRESSION;
    if (out->ratio < 1 / (1 + out->thr) && out->hi < 1)
        return out->verdict = SB_VERDICT_IMPROVEMENT;
    return out->verdict = SB_VERDICT_NOISE;
}

double sb_stat_pooled_band(int m, const double *const *night, int nights)
{
    if (nights < 3 || m < 1)
        return NAN;
    double *idx = malloc(sizeof *idx * (size_t)nights), *v = malloc(sizeof *v * (size_t)nights);
    double *lr = malloc(sizeof *lr * (size_t)m), *mid = malloc(sizeof *mid * (size_t)m);
    double band = NAN;
    if (!idx || !v || !lr || !mid)
        goto out;
    for (int i = 0; i < m; i++) { /* each strategy's median night */
        int n = 0;
        for (int k = 0; k < nights; k++)
            if (isfinite(night[i][k]) && night[i][k] > 0)
                v[n++] = night[i][k];
        mid[i] = n ? sb_stat_median(v, n) : NAN;
    }
    int ni = 0;
    for (int k = 0; k < nights; k++) {
        int n = 0;
        for (int i = 0; i < m; i++)
            if (isfinite(mid[i]) && isfinite(night[i][k]) && night[i][k] > 0)
                lr[n++] = log(night[i][k] / mid[i]);
        if (n >= 3)
            idx[ni++] = exp(sb_stat_median(lr, n));
    }
    band = sb_stat_band(idx, ni);
out:
    free(idx), free(v), free(lr), free(mid);
    return band;
}
