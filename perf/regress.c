/* perf/regress.c: false-alarm and detection rates of the nightly regression
 * check (`shardbench nightly`, measure/regress.c), from launches stored in a
 * results database (perf/README.md).
 *
 * Input: runs of one build (--same, each a `bench --trials N` of the same
 * configuration, taken at different times) and runs of builds slowed on
 * purpose (--slowed F:RUNS, built with SHARDBENCH_TEST_SLOWDOWN=all:F).
 * Each simulated night picks a baseline run and a candidate run at random
 * and draws nightly-sized samples (--trials launches per strategy, without
 * replacement: distinct launches) from their stored launches; the history
 * is the other --same runs (a night median of --trials launches each), the
 * suspects get --extra of the candidate run's other launches, and the
 * verdict is that of
 * the nightly (sb_stat_compare). False alarms: candidate of the same build
 * (another run); detection: candidate of a slowed build. Also the old rule
 * (one launch a side; the candidate's fastest step slower than the
 * baseline's median by more than 5%) for comparison. Rates with 95% Wilson
 * intervals; stored as one run (model `nightly-check`, kind per row: rate
 * in step_median_s, interval in step_min_s/step_max_s, comparisons in
 * steps). */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/measure.h"
#include "shardbench/query.h"
#include "shardbench/results.h"

#define MAXRUNS 64
#define MAXS 64

typedef struct {
    int64_t run;
    double factor;           /* 0: the build itself */
    int64_t sid[MAXS];       /* strategies, launches of each */
    double *med[MAXS], *min[MAXS], *probe[MAXS]; /* per launch; probe NaN: none */
    int n[MAXS];
    int ns;
} run_data;

static run_data runs[MAXRUNS];
static int nruns;

/* A/B pairs (nightly --baseline-build): candidate and baseline runs measured
 * launch for launch; factor 0: the build against itself. */
typedef struct {
    double factor;
    int cand, base; /* indexes in runs[] */
} ab_pair;
static ab_pair pairs[32];
static int npairs;

static int load(sb_dbq *q, int64_t id, double factor, sb_error *err)
{
    if (nruns == MAXRUNS)
        return sb_fail(err, SB_EXIT_INPUT, "too many runs");
    run_data *r = &runs[nruns];
    memset(r, 0, sizeof *r);
    r->run = id;
    r->factor = factor;
    sb_qmeas *rows;
    int n;
    if (sb_dbq_check_run(q, id, err) || sb_dbq_run_measurements(q, id, &rows, &n, err))
        return -1;
    for (int i = 0; i < n; i++) {
        if (strcmp(rows[i].status, "ok") || !isfinite(rows[i].median))
            continue;
        int s = 0;
        while (s < r->ns && r->sid[s] != rows[i].strategy_id)
            s++;
        if (s == r->ns) {
            if (r->ns == MAXS)
                continue;
            r->sid[r->ns] = rows[i].strategy_id;
            r->med[s] = calloc((size_t)n, sizeof(double));
            r->min[s] = calloc((size_t)n, sizeof(double));
            r->probe[s] = calloc((size_t)n, sizeof(double));
            r->ns++;
        }
        r->probe[s][r->n[s]] = rows[i].probe_s;
        r->med[s][r->n[s]] = rows[i].median;
        r->min[s][r->n[s]++] = isfinite(rows[i].min) ? rows[i].min : rows[i].median;
    }
    free(rows);
    if (!r->ns)
        return sb_fail(err, SB_EXIT_INPUT, "run %lld has no ok launches", (long long)id);
    nruns++;
    return 0;
}

static int find_s(const run_data *r, int64_t sid)
{
    for (int s = 0; s < r->ns; s++)
        if (r->sid[s] == sid)
            return s;
    return -1;
}

/* Launches drawn without replacement (a night's launches are distinct
 * processes): a random order of the launches of v of one parity (par 1:
 * even, 2: odd, 0: all) into idx; returns their count. */
static int order(uint64_t *rng, int n, int par, int *idx)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!par || i % 2 == par - 1)
            idx[k++] = i;
    for (int i = k - 1; i > 0; i--) {
        int j = sb_stat_randint(rng, i + 1), t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    return k;
}

/* Up to k values of v at idx[from..]; the count taken. */
static int take(const double *v, const int *idx, int nidx, int from, int k, double *out)
{
    int t = 0;
    for (int i = from; i < nidx && t < k; i++)
        out[t++] = v[idx[i]];
    return t;
}

typedef struct {
    int trials, extra, use_band, remeasure;
    int family; /* 1: the first look's alpha over the strategies (sb_stat_family, as the
                   nightly); 0: each strategy at alpha */
    int probe;  /* 1: launches over the probe cut set aside (sb_stat_probe_cut, as the
                   nightly without --raw) */
    int pooled; /* 1: the build as a whole judged too (sb_stat_pooled), as the nightly */
    sb_stat_rule rule;
} variant;

/* A night's sample of one strategy: launch indexes drawn (distinct) and the
 * values, the probe cut applied afterwards. */
typedef struct {
    int idx[512], nidx;
    double v[256], probe[256];
    int n;
} draw;

static void draw_from(uint64_t *rng, const run_data *R, int s, int par, int from, int k, draw *d)
{
    if (from == 0)
        d->nidx = order(rng, R->n[s] < 512 ? R->n[s] : 512, par, d->idx);
    d->n = 0;
    for (int i = from; i < d->nidx && d->n < k; i++) {
        d->v[d->n] = R->med[s][d->idx[i]];
        d->probe[d->n++] = R->probe[s][d->idx[i]];
    }
}

/* Drops the launches of d whose probe is over cut (cut 0: none). */
static void apply_cut(draw *d, double cut)
{
    int k = 0;
    for (int i = 0; i < d->n; i++)
        if (!(cut > 0) || !isfinite(d->probe[i]) || d->probe[i] <= cut) {
            d->v[k] = d->v[i];
            d->probe[k++] = d->probe[i];
        }
    d->n = k;
}

/* One simulated night of candidate run c against baseline run b, by the
 * nightly's rule (measure/regress.c: sb_stat_compare per strategy,
 * sb_stat_family over them, the suspects' re-measures judged one by one):
 * 1 when some strategy is confirmed slower; flagged_s and total_s count
 * strategies. */
static int night(uint64_t *rng, const variant *v, int b, int c, int *flagged_s, int *total_s)
{
    static draw db[MAXS], dc[MAXS], dr[MAXS];
    static sb_stat_cmp st[MAXS];
    static double hist[MAXS][MAXRUNS];
    double nights[MAXRUNS], band[MAXS], tmp[256];
    int sidx[MAXS], m = 0;
    const run_data *B = &runs[b], *C = &runs[c];
    for (int s = 0; s < B->ns; s++) {
        int k = find_s(C, B->sid[s]);
        if (k < 0)
            continue;
        sidx[m] = s;
        draw_from(rng, B, s, b == c ? 1 : 0, 0, v->trials, &db[m]);
        draw_from(rng, C, k, b == c ? 2 : 0, 0, v->trials, &dc[m]);
        dr[m].n = 0;
        if (v->remeasure) { /* the candidate's other launches; too few: its launches again */
            dr[m].nidx = dc[m].nidx;
            memcpy(dr[m].idx, dc[m].idx, sizeof dr[m].idx);
            draw_from(rng, C, k, 0, dc[m].n, v->extra, &dr[m]);
            if (dr[m].n < v->rule.min_n)
                draw_from(rng, C, k, b == c ? 2 : 0, 0, v->extra, &dr[m]);
        }
        m++;
    }
    double cut = 0;
    if (v->probe) { /* over every launch of the night, as regress does */
        static double pr[MAXS * 3 * 256];
        int np = 0;
        for (int i = 0; i < m; i++) {
            const draw *d3[3] = {&db[i], &dc[i], &dr[i]};
            for (int j = 0; j < 3; j++)
                for (int l = 0; l < d3[j]->n; l++)
                    pr[np++] = d3[j]->probe[l];
        }
        cut = sb_stat_probe_cut(pr, np);
    }
    for (int i = 0; i < m; i++) {
        apply_cut(&db[i], cut);
        apply_cut(&dc[i], cut);
        apply_cut(&dr[i], cut);
        int s = sidx[i], nn = 0;
        for (int h = 0; h < nruns; h++)
            hist[i][h] = NAN;
        for (int h = 0; v->use_band && h < nruns; h++) { /* the history: other runs of the build */
            if (h == c || runs[h].factor != 0)
                continue;
            int hs = find_s(&runs[h], B->sid[s]);
            if (hs < 0)
                continue;
            if (h == b) {
                hist[i][h] = nights[nn++] = sb_stat_median(db[i].v, db[i].n);
                continue;
            }
            int ih[512];
            int nih = order(rng, runs[h].n[hs] < 512 ? runs[h].n[hs] : 512, 0, ih);
            int nt = take(runs[h].med[hs], ih, nih, 0, v->trials, tmp);
            hist[i][h] = nights[nn++] = sb_stat_median(tmp, nt);
        }
        band[i] = sb_stat_band(nights, nn);
        sb_stat_compare(&v->rule, db[i].v, db[i].n, dc[i].v, dc[i].n, band[i], &st[i]);
    }
    if (v->family)
        sb_stat_family(&v->rule, st, m);
    int any = 0;
    if (v->pooled) { /* the build as a whole, its suspects' re-measures to confirm it */
        const double *pb[MAXS], *pc[MAXS], *ph[MAXS];
        int nb[MAXS], nc[MAXS], k = 0;
        for (int i = 0; i < m; i++) {
            pb[i] = db[i].v, nb[i] = db[i].n, pc[i] = dc[i].v, nc[i] = dc[i].n, ph[i] = hist[i];
        }
        double pband = v->use_band ? sb_stat_pooled_band(m, ph, nruns) : NAN;
        sb_stat_cmp whole;
        if (sb_stat_pooled(&v->rule, m, pb, nb, pc, nc, pband, &whole) == SB_VERDICT_REGRESSION) {
            for (int i = 0; i < m; i++) /* re-measured: the strategies that looked slower */
                if (st[i].ratio > 1 && dr[i].n >= v->rule.min_n) {
                    pb[k] = db[i].v, nb[k] = db[i].n, pc[k] = dr[i].v, nc[k++] = dr[i].n;
                }
            if (!v->remeasure ||
                sb_stat_pooled(&v->rule, k, pb, nb, pc, nc, pband, &whole) == SB_VERDICT_REGRESSION)
                any = 1;
        }
    }
    for (int i = 0; i < m; i++) {
        int verdict = st[i].verdict;
        if (verdict == SB_VERDICT_REGRESSION && v->remeasure) {
            sb_stat_cmp fresh;
            verdict = sb_stat_compare(&v->rule, db[i].v, db[i].n, dr[i].v, dr[i].n, band[i], &fresh);
        }
        (*total_s)++;
        if (verdict == SB_VERDICT_REGRESSION) {
            (*flagged_s)++;
            any = 1;
        }
    }
    return any;
}

/* The old rule: one launch a side, candidate min > baseline median x 1.05. */
static int night_old(uint64_t *rng, int b, int c, int *flagged_s, int *total_s)
{
    const run_data *B = &runs[b], *C = &runs[c];
    int any = 0;
    for (int s = 0; s < B->ns; s++) {
        int k = find_s(C, B->sid[s]);
        if (k < 0)
            continue;
        double bmed = B->med[s][sb_stat_randint(rng, B->n[s])];
        double cmin = C->min[k][sb_stat_randint(rng, C->n[k])];
        (*total_s)++;
        if (cmin > bmed * 1.05) {
            (*flagged_s)++;
            any = 1;
        }
    }
    return any;
}

static void wilson(int k, int n, double *lo, double *hi)
{
    double z = 1.959964, p = n ? (double)k / n : 0, d = 1 + z * z / n;
    double mid = (p + z * z / (2.0 * n)) / d;
    double half = z * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n)) / d;
    *lo = n ? fmax(0, mid - half) : NAN;
    *hi = n ? fmin(1, mid + half) : NAN;
}

typedef struct {
    char kind[64];
    int k, n, ks, ns;
    double rate, lo, hi, slow;
} row;

static row rows_out[64];
static int nrows;

static void add_row(const char *kind, int k, int n, int ks, int ns, double slow)
{
    row *r = &rows_out[nrows++];
    snprintf(r->kind, sizeof r->kind, "%s", kind);
    r->k = k;
    r->n = n;
    r->ks = ks;
    r->ns = ns;
    r->rate = n ? (double)k / n : NAN;
    r->slow = slow;
    wilson(k, n, &r->lo, &r->hi);
}

static void print_row(const row *r)
{
    printf("| %-26s | %5.2f | %5d | %5d | %.3f [%.3f, %.3f] | %d/%d |\n", r->kind, r->slow, r->n,
           r->k, r->rate, r->lo, r->hi, r->ks, r->ns);
}

/* The measured slowdown of factor f: median over strategies of (median of
 * its launches in the slowed runs / median in the build's runs). */
static double measured_slowdown(double f)
{
    double ratios[MAXS];
    int nr = 0;
    const run_data *ref = NULL;
    for (int i = 0; i < nruns && !ref; i++)
        if (runs[i].factor == 0)
            ref = &runs[i];
    for (int s = 0; ref && s < ref->ns && nr < MAXS; s++) {
        double a[4096], b[4096];
        int na = 0, nb = 0;
        for (int i = 0; i < nruns; i++) {
            int k = find_s(&runs[i], ref->sid[s]);
            if (k < 0 || (runs[i].factor != 0 && runs[i].factor != f))
                continue;
            for (int j = 0; j < runs[i].n[k]; j++) {
                if (runs[i].factor == 0 && na < 4096)
                    a[na++] = runs[i].med[k][j];
                else if (runs[i].factor == f && nb < 4096)
                    b[nb++] = runs[i].med[k][j];
            }
        }
        if (na && nb)
            ratios[nr++] = sb_stat_median(b, nb) / sb_stat_median(a, na);
    }
    return nr ? sb_stat_median(ratios, nr) - 1 : NAN;
}

static void store(const char *dbpath, const variant *v, int argc, char **argv)
{
    sb_db *db;
    sb_error err = {0};
    if (sb_db_open(dbpath, 0, &db, &err)) {
        fprintf(stderr, "perf/regress: %s (figures not stored)\n", err.msg);
        return;
    }
    char cmd[2048] = "", params[256];
    for (int i = 0; i < argc; i++)
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%s", i ? " " : "", argv[i]);
    snprintf(params, sizeof params, "trials=%d,extra=%d,threshold=%g,conf=%g,alpha=%g",
             v->trials, v->extra, v->rule.threshold, v->rule.conf, v->rule.alpha);
    sb_run_meta meta = {.backend = "cpu", .devices = "resampled launches", .command_line = cmd};
    int64_t run;
    if (sb_db_begin_run(db, &meta, &run, &err)) {
        fprintf(stderr, "perf/regress: %s (figures not stored)\n", err.msg);
        sb_db_close(db);
        return;
    }
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows_out[i];
        char json[160];
        snprintf(json, sizeof json,
                 "{\"flagged\": %d, \"comparisons\": %d, \"slowdown\": %.4f, "
                 "\"strategies_flagged\": %d, \"strategies\": %d}",
                 r->k, r->n, isfinite(r->slow) ? r->slow : -1, r->ks, r->ns);
        sb_measurement_record rec = {
            .run_id = run, .model = "nightly-check", .params = params, .nops = 1, .p = 1,
            .kind = r->kind, .predicted_cost = NAN, .configs_json = json,
            .step_median_s = r->rate, .step_min_s = r->lo, .step_max_s = r->hi, .steps = r->n,
            .status = "ok",
        };
        if (sb_db_record_measurement(db, &rec, NULL, &err))
            fprintf(stderr, "perf/regress: %s (row not stored)\n", err.msg);
    }
    if (sb_db_end_run(db, run, &err))
        fprintf(stderr, "perf/regress: %s\n", err.msg);
    else
        printf("# stored as run %lld in %s\n", (long long)run, dbpath);
    sb_db_close(db);
}

static int parse_runs(sb_dbq *q, const char *list, double factor, sb_error *err)
{
    char *dup = strdup(list), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        long long id = strtoll(t, &end, 10);
        if (end == t || *end || id < 1) {
            free(dup);
            return sb_fail(err, SB_EXIT_INPUT, "'%s' is not a run id", t);
        }
        if (load(q, id, factor, err)) {
            free(dup);
            return -1;
        }
    }
    free(dup);
    return 0;
}

/* The false-alarm rows: the build against itself, one row per rule. */
static void false_alarms(const variant *vp, int nsame, int ncmp, uint64_t *rngp)
{
    variant v = *vp;
    uint64_t rng = *rngp;
    static const struct {
        const char *name;
        int band, remeasure, old, ab, family, probe, pooled;
    } rules[] = {{"old (min vs median, 1 launch)", 0, 0, 1, 0, 0, 0, 0},
                 {"launches, no re-measure", 0, 0, 0, 0, 0, 0, 0},
                 {"launches + re-measure", 0, 1, 0, 0, 0, 0, 0},
                 {"+ band, BH over strategies", 1, 1, 0, 0, 1, 0, 0},
                 {"nightly: + probe cut", 1, 1, 0, 0, 1, 1, 0},
                 {"+ whole build (A/B only)", 1, 1, 0, 0, 1, 1, 1}};
    for (size_t ri = 0; ri < sizeof rules / sizeof rules[0]; ri++) {
        variant w = v;
        w.use_band = rules[ri].band;
        w.remeasure = rules[ri].remeasure;
        w.family = rules[ri].family;
        w.probe = rules[ri].probe;
        w.pooled = rules[ri].pooled;
        int k = 0, ks = 0, ns = 0;
        for (int t = 0; t < ncmp; t++) {
            int b = sb_stat_randint(&rng, nsame), cc = sb_stat_randint(&rng, nsame - 1);
            if (cc >= b)
                cc++;
            if (rules[ri].ab) /* even launches against odd launches of one run */
                cc = b;
            w.rule.seed = sb_stat_rand(&rng);
            k += rules[ri].old ? night_old(&rng, b, cc, &ks, &ns) : night(&rng, &w, b, cc, &ks, &ns);
        }
        char kind[64];
        snprintf(kind, sizeof kind, "false-alarm %s", rules[ri].name);
        add_row(kind, k, ncmp, ks, ns, 0);
        print_row(&rows_out[nrows - 1]);
    }
    *rngp = rng;
}

/* The detection rows: the build against each slowed build; returns the
 * smallest measured slowdown flagged in 95% of the comparisons (NaN: none). */
static double detections(const variant *vp, int nsame, int ncmp, uint64_t *rngp,
                         const double *factors, int nslowed)
{
    variant v = *vp;
    uint64_t rng = *rngp;
    double smallest = NAN;
    if (nslowed) {
        printf("\n## Detection: the build against a slowed build (SHARDBENCH_TEST_SLOWDOWN=all:F)"
               "\n\n| %-26s | slow  |  n    | flag  | rate [95%% CI]          | strategies flagged |"
               "\n|---|---:|---:|---:|---|---:|\n", "F (measured step slowdown)");
    }
    for (int i = 0; i < nslowed; i++) {
        int idx[MAXRUNS], ni = 0;
        for (int r = 0; r < nruns; r++)
            if (runs[r].factor == factors[i])
                idx[ni++] = r;
        if (!ni)
            continue;
        int k = 0, ks = 0, ns = 0;
        for (int t = 0; t < ncmp; t++) {
            int b = sb_stat_randint(&rng, nsame), cc = idx[sb_stat_randint(&rng, ni)];
            variant w = v;
            w.pooled = 0; /* across nights the whole build is not judged (nightly.c) */
            w.rule.seed = sb_stat_rand(&rng);
            k += night(&rng, &w, b, cc, &ks, &ns);
        }
        char kind[64];
        double slow = measured_slowdown(factors[i]);
        snprintf(kind, sizeof kind, "detect all:%g (%+.1f%%)", factors[i], slow * 100);
        add_row(kind, k, ncmp, ks, ns, slow);
        print_row(&rows_out[nrows - 1]);
        if ((double)k / ncmp >= 0.95 && !(slow >= smallest))
            smallest = slow;
    }
    *rngp = rng;
    return smallest;
}

/* The A/B rows (nightly --baseline-build): per slowdown factor, candidate
 * nights against their baselines; *smallest_ab the smallest measured
 * slowdown flagged in 95%, *ab_fa the A/B false-alarm rate. */
static void ab_nights(const variant *vp, int ncmp, uint64_t *rngp, double *smallest_ab,
                      double *ab_fa)
{
    variant v = *vp;
    uint64_t rng = *rngp;
    printf("\n## A/B nights (nightly --baseline-build: both builds launch for launch in "
           "one night)\n\n| %-26s | slow  |  n    | flag  | rate [95%% CI]          | "
           "strategies flagged |\n|---|---:|---:|---:|---|---:|\n", "F (measured slowdown)");
    double fs[32];
    int nf = 0;
    for (int i = 0; i < npairs; i++) {
        int seen = 0;
        for (int j = 0; j < nf; j++)
            seen |= fs[j] == pairs[i].factor;
        if (!seen)
            fs[nf++] = pairs[i].factor;
    }
    for (int fi = 0; fi < nf; fi++) {
        int idx[32], ni = 0;
        for (int i = 0; i < npairs; i++)
            if (pairs[i].factor == fs[fi])
                idx[ni++] = i;
        variant w = v;
        w.use_band = 0;
        int k = 0, ks = 0, ns = 0;
        double ratio[MAXS];
        int nr = 0;
        const ab_pair *p0 = &pairs[idx[0]];
        for (int s = 0; s < runs[p0->base].ns && nr < MAXS; s++) {
            int cs = find_s(&runs[p0->cand], runs[p0->base].sid[s]);
            if (cs >= 0)
                ratio[nr++] = sb_stat_median(runs[p0->cand].med[cs], runs[p0->cand].n[cs]) /
                              sb_stat_median(runs[p0->base].med[s], runs[p0->base].n[s]);
        }
        double slow = nr ? sb_stat_median(ratio, nr) - 1 : NAN;
        for (int t = 0; t < ncmp; t++) {
            const ab_pair *pp = &pairs[idx[sb_stat_randint(&rng, ni)]];
            w.rule.seed = sb_stat_rand(&rng);
            k += night(&rng, &w, pp->base, pp->cand, &ks, &ns);
        }
        char kind[64];
        snprintf(kind, sizeof kind, "%s all:%g (%+.1f%%)", fs[fi] > 0 ? "A/B detect" :
                 "A/B false-alarm", fs[fi], slow * 100);
        add_row(kind, k, ncmp, ks, ns, slow);
        print_row(&rows_out[nrows - 1]);
        if (fs[fi] > 0 && (double)k / ncmp >= 0.95 && !(slow >= *smallest_ab))
            *smallest_ab = slow;
        if (fs[fi] == 0)
            *ab_fa = (double)k / ncmp;
    }
    *rngp = rng;
}

int main(int argc, char **argv)
{
    const char *data = NULL, *dbpath = SB_DB_DEFAULT_PATH, *same = NULL;
    const char *slowed[16], *abdata = NULL, *abspec[32];
    int nslowed = 0, ncmp = 200, nab = 0;
    variant v = {.trials = 5, .extra = 6, .use_band = 1, .remeasure = 1, .family = 1, .probe = 1,
                 .pooled = 1};
    sb_stat_rule_default(&v.rule);
    v.rule.boot = 1000;
    static const struct option lo[] = {
        {"data", required_argument, 0, 'D'},   {"db", required_argument, 0, 'd'},
        {"same", required_argument, 0, 's'},   {"slowed", required_argument, 0, 'S'},
        {"comparisons", required_argument, 0, 'n'}, {"trials", required_argument, 0, 't'},
        {"extra", required_argument, 0, 'e'},  {"threshold", required_argument, 0, 'T'},
        {"ab-data", required_argument, 0, 'A'}, {"ab", required_argument, 0, 'B'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'D': data = optarg; break;
        case 'd': dbpath = optarg; break;
        case 's': same = optarg; break;
        case 'S':
            if (nslowed < 16)
                slowed[nslowed++] = optarg;
            break;
        case 'A': abdata = optarg; break;
        case 'B':
            if (nab < 32)
                abspec[nab++] = optarg;
            break;
        case 'n': ncmp = atoi(optarg); break;
        case 't': v.trials = atoi(optarg); break;
        case 'e': v.extra = atoi(optarg); break;
        case 'T': v.rule.threshold = atof(optarg); break;
        default:
            fprintf(stderr,
                    "usage: %s --data DB --same RUN,RUN,... [--slowed F:RUN,...]... "
                    "[--ab-data DB --ab F:CAND_RUN:BASE_RUN]... [--comparisons N] "
                    "[--trials N] [--extra N] "
                    "[--threshold X] [--db FILE|none]\n",
                    argv[0]);
            return c == 'h' ? 0 : 2;
        }
    }
    if (!data || !same || ncmp < 1 || v.trials < 1 || v.trials > 256 || v.extra > 256) {
        fprintf(stderr, "perf/regress: --data DB and --same RUNS are required\n");
        return 2;
    }
    sb_error err = {0};
    sb_dbq *q;
    if (sb_dbq_open(data, 0, 0, &q, &err) || parse_runs(q, same, 0, &err)) {
        fprintf(stderr, "perf/regress: %s\n", err.msg);
        return 2;
    }
    int nsame = nruns;
    double factors[16];
    for (int i = 0; i < nslowed; i++) {
        const char *colon = strchr(slowed[i], ':');
        factors[i] = colon ? atof(slowed[i]) : 0;
        if (!colon || !(factors[i] > 0) || parse_runs(q, colon + 1, factors[i], &err)) {
            fprintf(stderr, "perf/regress: --slowed %s: %s\n", slowed[i],
                    err.msg[0] ? err.msg : "F:RUNS expected, F > 0");
            return 2;
        }
    }
    sb_dbq_close(q);
    if (nab) {
        if (!abdata || sb_dbq_open(abdata, 0, 0, &q, &err)) {
            fprintf(stderr, "perf/regress: --ab needs --ab-data DB: %s\n", err.msg);
            return 2;
        }
        for (int i = 0; i < nab; i++) {
            double f;
            long long cr, br;
            if (sscanf(abspec[i], "%lf:%lld:%lld", &f, &cr, &br) != 3 || f < 0 ||
                load(q, cr, -1, &err) || load(q, br, -1, &err)) {
                fprintf(stderr, "perf/regress: --ab %s: %s\n", abspec[i],
                        err.msg[0] ? err.msg : "F:CANDIDATE_RUN:BASELINE_RUN expected");
                return 2;
            }
            pairs[npairs++] = (ab_pair){f, nruns - 2, nruns - 1};
        }
        sb_dbq_close(q);
    }
    if (nsame < 2) {
        fprintf(stderr, "perf/regress: --same needs two runs at least\n");
        return 2;
    }
    printf("# perf/regress: %d comparisons per row; nightly-sized samples of %d launches per "
           "strategy (distinct launches) from stored launches, %d more for a suspect; "
           "threshold %.3g, %.0f%% bootstrap interval, one-sided Mann-Whitney alpha %.3g; "
           "history band from the other runs of the build\n",
           ncmp, v.trials, v.extra, v.rule.threshold, v.rule.conf * 100, v.rule.alpha);
    printf("# runs of the build:");
    for (int i = 0; i < nsame; i++)
        printf(" %lld", (long long)runs[i].run);
    printf("\n\n## False alarms: the build against itself (another run)\n\n");
    printf("| %-26s | slow  |  n    | flag  | rate [95%% CI]          | strategies flagged |\n",
           "rule");
    printf("|---|---:|---:|---:|---|---:|\n");
    uint64_t rng = 12345;
    false_alarms(&v, nsame, ncmp, &rng);
    double smallest = detections(&v, nsame, ncmp, &rng, factors, nslowed);
    double smallest_ab = NAN, ab_fa = NAN;
    if (npairs)
        ab_nights(&v, ncmp, &rng, &smallest_ab, &ab_fa);
    printf("\ntargets: false alarms (nightly) <= 1 in 20: %s; ",
           rows_out[4].rate <= 0.05 ? "met" : "MISSED");
    if (isfinite(smallest))
        printf("smallest measured step slowdown detected in >= 19 of 20 nights: %+.1f%%\n",
               smallest * 100);
    else
        printf("no slowdown given was detected in >= 19 of 20 nights\n");
    if (npairs) {
        printf("A/B: false alarms <= 1 in 20: %s (%.3f); ", ab_fa <= 0.05 ? "met" : "MISSED",
               ab_fa);
        if (isfinite(smallest_ab))
            printf("smallest measured slowdown detected in >= 19 of 20 A/B nights: %+.1f%%\n",
                   smallest_ab * 100);
        else
            printf("no slowdown given was detected in >= 19 of 20 A/B nights\n");
    }
    if (strcmp(dbpath, "none"))
        store(dbpath, &v, argc, argv);
    return 0;
}
