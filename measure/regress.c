/* measure/regress.c: compares the step times of two runs (`shardbench regress`,
 * and `shardbench nightly` through it) of the results database, strategy by
 * strategy, and says which changes are beyond the noise. Markdown out; exit
 * 1 on a confirmed regression.
 *
 * Samples are launches, not steps: a strategy's sample in a run is the list
 * of the median step times of its launches (`bench --trials N` stores each
 * launch as its own measurement); the steps of one process are not
 * independent of each other. Per strategy the candidate's launches are
 * judged against the baseline's with the rule of measure/stats.c (ratio of
 * medians with a bootstrap interval, one-sided Mann-Whitney U, a threshold
 * widened to the band of the series' own history: the spread of its
 * medians over the earlier runs of the same host that no nightly found a
 * regression in). With o->first > 0 (the nightly) a strategy that looks
 * slower on the first launches is a suspect; it is confirmed only when the
 * launches measured again afterwards show the regression on their own too.
 * A strategy that ran ok in the baseline and fails in every launch of the
 * candidate is a regression too. A strategy is the same in both runs when
 * its model (name and parameters), P and per-op configs are: its kind label
 * and the cost model's numbers may differ. Reads only; never writes the
 * database. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/measure.h"
#include "shardbench/plots.h"
#include "shardbench/query.h"
#include "shardbench/results.h"

#define MAX_HISTORY 64

/* Launches measured while the machine was loaded are set aside: `run`
 * times a fixed amount of work (its probe) beside every step, and a launch
 * whose probe took more than PROBE_CUT times the median probe of the
 * launches compared ran on a busier machine than the others. Measured on
 * this 2-core machine under load (three benches of one build, 12 launches
 * per strategy): the probe does not predict how much slower a step is
 * (dividing by it doubled the spread), but leaving out the launches with a
 * slow probe halved it (robust CV 0.148 -> 0.076). probe_cut 0: no cut
 * (--raw, or a launch without a probe). */
#define PROBE_CUT SB_STAT_PROBE_CUT
static double probe_cut;

static double sample(const sb_qmeas *r) { return r->median; }

/* Whether a row can be a sample: ok, timed, and not measured under load
 * (a history row from before probes is kept). */
static int usable(const sb_qmeas *r)
{
    return !strcmp(r->status, "ok") && isfinite(r->median) &&
           (probe_cut <= 0 || !isfinite(r->probe_s) || r->probe_s <= probe_cut);
}

/* probe_cut for the comparison of rb with rc: sb_stat_probe_cut over the
 * probes of their ok launches. */
static double probe_reference(const sb_qmeas *rb, int nb, const sb_qmeas *rc, int nc)
{
    double *v = malloc(sizeof *v * (size_t)(nb + nc + 1));
    int k = 0;
    if (!v)
        return 0;
    for (int side = 0; side < 2; side++)
        for (int i = 0; i < (side ? nc : nb); i++) {
            const sb_qmeas *r = side ? &rc[i] : &rb[i];
            if (!strcmp(r->status, "ok") && isfinite(r->median))
                v[k++] = r->probe_s;
        }
    double p = sb_stat_probe_cut(v, k);
    free(v);
    return p;
}

typedef struct {
    int64_t strategy_id;     /* the first strategies row of this key met */
    const char *key;         /* what is compared: model, p and per-op configs */
    const sb_qmeas *any;     /* a row of it, for names */
    double *s[2];            /* launch medians: baseline, candidate */
    int n[2];
    double *re;              /* the candidate's re-measures (measurement id > first_last) */
    int nre;
    int tried[2], failed[2]; /* measurements, of which not ok */
    int loaded[2];           /* ok launches set aside: measured under load (probe) */
    const char *why[2];      /* message of a failure */
    double night[MAX_HISTORY]; /* history: medians per earlier run, newest first */
    int64_t night_run[MAX_HISTORY];
    int nnights;
    double *hist;            /* history launches: (ordinal from newest, seconds) pairs */
    int nhist, caphist;
    sb_stat_cmp st, fresh;
    int has_fresh;
    const char *verdict;
    int cls;
} cmp_row;

/* Started-at and commit of a run, for the title. */
static void run_label(sb_dbq *q, int64_t id, char *buf, size_t n)
{
    sb_qrun r;
    sb_error e = {0};
    snprintf(buf, n, "run %lld", (long long)id);
    if (sb_dbq_run_info(q, id, &r, &e) == 0) { /* started, commit, host, backend */
        snprintf(buf, n, "run %lld (%s, commit %s, %s, %s)", (long long)id, r.field[0],
                 r.field[3], r.field[2], r.field[5]);
        sb_qrun_free(&r);
    }
}

/* The key of a strategies row: model row, p and the per-op configs of its
 * JSON (names and split counts only), so the same strategy matches across
 * runs even when its kind label (a candidate's rank) or the cost model's
 * numbers in the JSON changed. Falls back to the row id. malloc'd. */
static char *strategy_key(sb_dbq *q, int64_t sid, sb_error *err)
{
    int64_t model_id = 0;
    int p = 0;
    char *json;
    int r = sb_dbq_strategy(q, sid, "reading a strategy", &model_id, &p, &json, err);
    if (r <= 0) {
        if (r == 0)
            sb_fail(err, SB_EXIT_INPUT, "%s: no strategy %lld", sb_dbq_path(q), (long long)sid);
        return NULL;
    }
    char *key = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&key, &len);
    if (!f) {
        free(json);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        return NULL;
    }
    fprintf(f, "%lld|%d|", (long long)model_id, p);
    sb_error jerr = {0};
    sb_json *j = sb_json_parse(json, &jerr);
    const sb_json *ops = sb_json_get(j, "ops");
    if (ops && ops->type == SB_JSON_ARR && ops->n > 0) {
        for (const sb_json *op = ops->child; op; op = op->next) {
            const char *name = sb_json_str(sb_json_get(op, "name"));
            const sb_json *cfg = sb_json_get(op, "config");
            fprintf(f, "%s:", name ? name : "?");
            for (int k = 0; cfg && k < cfg->n; k++)
                fprintf(f, "%s%g", k ? "," : "", sb_json_num(sb_json_at(cfg, k), 0));
            fputc(';', f);
        }
    } else {
        fprintf(f, "strategy %lld", (long long)sid);
    }
    sb_json_free(j);
    free(json);
    if (fclose(f) || !key) {
        free(key);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        return NULL;
    }
    return key;
}

/* Strategy keys of the strategies rows met so far (history runs share them). */
typedef struct {
    int64_t *id;
    char **key;
    int n, cap;
} key_cache;

static const char *cached_key(sb_dbq *q, key_cache *c, int64_t sid, sb_error *err)
{
    for (int i = 0; i < c->n; i++)
        if (c->id[i] == sid)
            return c->key[i];
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        int64_t *id = realloc(c->id, sizeof *id * (size_t)cap);
        if (id)
            c->id = id;
        char **key = realloc(c->key, sizeof *key * (size_t)cap);
        if (key)
            c->key = key;
        if (!id || !key) {
            sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            return NULL;
        }
        c->cap = cap;
    }
    char *k = strategy_key(q, sid, err);
    if (!k)
        return NULL;
    c->id[c->n] = sid;
    c->key[c->n] = k;
    return c->key[c->n++];
}

static void key_cache_free(key_cache *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->key[i]);
    free(c->id);
    free(c->key);
}

static int fill(cmp_row *c, const sb_qmeas *rows, const char **keys, int n, int side,
                int64_t first_last, sb_error *err)
{
    c->s[side] = malloc(sizeof(double) * (size_t)(n + 1));
    if (side && !c->re)
        c->re = malloc(sizeof(double) * (size_t)(n + 1));
    if (!c->s[side] || (side && !c->re))
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < n; i++) {
        if (strcmp(keys[i], c->key))
            continue;
        c->tried[side]++;
        if (strcmp(rows[i].status, "ok") || !isfinite(rows[i].median)) {
            c->failed[side]++;
            c->why[side] = rows[i].message[0] ? rows[i].message : rows[i].status;
            continue;
        }
        if (!usable(&rows[i])) {
            c->loaded[side]++;
            continue;
        }
        c->s[side][c->n[side]++] = sample(&rows[i]);
        if (side && first_last > 0 && rows[i].measurement_id > first_last)
            c->re[c->nre++] = sample(&rows[i]);
    }
    return 0;
}

/* Each row's history: per earlier run (newest first, at most o->history,
 * the candidate excluded), the median of its launches of that strategy. */
static int read_history(sb_dbq *q, const sb_regress_opts *o, key_cache *kc, cmp_row *cmp,
                        int ncmp, sb_error *err)
{
    int64_t ids[MAX_HISTORY];
    int nids = 0, max = o->history < MAX_HISTORY ? o->history : MAX_HISTORY;
    if (max <= 0)
        return 0;
    if (sb_dbq_history_runs(q, o->candidate, ids, max, &nids, err))
        return -1;
    for (int h = 0; h < nids; h++) {
        sb_qmeas *rows = NULL;
        int n = 0;
        if (sb_dbq_run_measurements(q, ids[h], &rows, &n, err))
            return -1;
        double *v = malloc(sizeof *v * (size_t)(n + 1));
        if (!v) {
            free(rows);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        }
        for (int r = 0; r < ncmp; r++) {
            cmp_row *c = &cmp[r];
            int k = 0;
            for (int i = 0; i < n; i++) {
                if (!usable(&rows[i])) /* history without a probe: not in a normalised band */
                    continue;
                const char *key = cached_key(q, kc, rows[i].strategy_id, err);
                if (!key) {
                    free(v);
                    free(rows);
                    return -1;
                }
                if (strcmp(key, c->key))
                    continue;
                v[k++] = sample(&rows[i]);
                if (c->nhist + 2 > c->caphist) {
                    int cap = c->caphist ? 2 * c->caphist : 64;
                    double *nh = realloc(c->hist, sizeof *nh * (size_t)cap);
                    if (!nh) {
                        free(v);
                        free(rows);
                        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
                    }
                    c->hist = nh;
                    c->caphist = cap;
                }
                c->hist[c->nhist++] = c->nnights;
                c->hist[c->nhist++] = sample(&rows[i]);
            }
            if (k) {
                c->night_run[c->nnights] = ids[h];
                c->night[c->nnights++] = sb_stat_median(v, k);
            }
        }
        free(v);
        free(rows);
    }
    return 0;
}

/* What judge() makes of a row. */
enum { SLOWER, BROKE, FASTER, NOISE, SUSPECT, FEW, OTHER, NCLASS };

static void add_suspect(sb_regress_summary *sum, const cmp_row *r)
{
    if (!sum)
        return;
    size_t l = strlen(sum->suspect_list);
    snprintf(sum->suspect_list + l, sizeof sum->suspect_list - l, "%s%s/%d/%s", l ? "," : "",
             r->any->model, r->any->p, r->any->kind);
}

/* Sets r->verdict for what needs no statistics and returns its class, or
 * returns -1 with r->st computed (its verdict set again over the family by
 * sb_stat_family, then finished by judge_stats). */
static int judge_plain(cmp_row *r, const sb_stat_rule *rule)
{
    /* ok: ran ok at least once (a launch set aside under load ran ok) */
    int okb = r->n[0] + r->loaded[0] > 0, okc = r->n[1] + r->loaded[1] > 0;
    r->st.ratio = r->st.lo = r->st.hi = r->st.p_slower = NAN;
    r->st.band = sb_stat_band(r->night, r->nnights);
    if (!r->tried[0])
        return r->verdict = "new (candidate only)", OTHER;
    if (!r->tried[1])
        return r->verdict = "not measured by the candidate", OTHER;
    if (okb && !okc)
        return r->verdict = "**REGRESSION: now fails**", BROKE;
    if (!okb && okc)
        return r->verdict = "fixed (failed in the baseline)", OTHER;
    if (!okb && !okc)
        return r->verdict = "fails in both", OTHER;
    if (!r->n[0] || !r->n[1])
        return r->verdict = "not enough data (launches under load set aside)", FEW;
    if (sb_stat_compare(rule, r->s[0], r->n[0], r->s[1], r->n[1], r->st.band, &r->st) ==
        SB_VERDICT_NOT_ENOUGH)
        return r->verdict = "not enough data", FEW;
    return -1;
}

/* The rest of the rule for a row whose first look (r->st.verdict, over the
 * family) is known: a slower one is a suspect until its re-measures alone
 * show the regression too (at alpha, the suspects judged one by one). */
static int judge_stats(cmp_row *r, const sb_stat_rule *rule, const sb_regress_opts *o)
{
    int v = r->st.verdict;
    if (v == SB_VERDICT_IMPROVEMENT)
        return r->verdict = "improvement", FASTER;
    if (v != SB_VERDICT_REGRESSION)
        return r->verdict = "within noise", NOISE;
    if (!o->remeasure)
        return r->verdict = "**REGRESSION**", SLOWER;
    if (!r->nre)
        return r->verdict = "suspect (slower at first; to be measured again)", SUSPECT;
    r->has_fresh = 1;
    int f = sb_stat_compare(rule, r->s[0], r->n[0], r->re, r->nre, r->st.band, &r->fresh);
    if (f == SB_VERDICT_REGRESSION)
        return r->verdict = "**REGRESSION** (confirmed by the re-measures)", SLOWER;
    return r->verdict = "within noise (slower at first, not confirmed by the re-measures)", NOISE;
}

/* The build as a whole (o->whole): its first look, the suspects it adds
 * (every strategy that looked slower and is not one already) and, once
 * they were measured again, its confirmation. */
typedef struct {
    sb_stat_cmp first, fresh; /* first look; pooled re-measures (fresh.nb 0: none) */
    int verdict;              /* 1 confirmed slower, 0 not, -1 not judged */
    int suspects;             /* strategies it made suspects */
    const char *what;         /* the verdict in words */
} whole_t;

static int judge_whole(cmp_row *cmp, const int *rows, int m, const sb_stat_rule *rule,
                       const sb_regress_opts *o, whole_t *w, sb_error *err)
{
    const double **b = calloc((size_t)m + 1, sizeof *b), **c = calloc((size_t)m + 1, sizeof *c);
    int *nb = calloc((size_t)m + 1, sizeof *nb), *nc = calloc((size_t)m + 1, sizeof *nc);
    if (!b || !c || !nb || !nc) {
        free(b), free(c), free(nb), free(nc);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    for (int k = 0; k < m; k++) {
        const cmp_row *r = &cmp[rows[k]];
        b[k] = r->s[0], nb[k] = r->n[0], c[k] = r->s[1], nc[k] = r->n[1];
    }
    int v = sb_stat_pooled(rule, m, b, nb, c, nc, NAN, &w->first);
    w->verdict = 0;
    w->what = v == SB_VERDICT_NOT_ENOUGH ? "not enough data (fewer than 3 strategies judged)"
              : v == SB_VERDICT_IMPROVEMENT ? "improvement"
                                            : "within noise";
    if (v == SB_VERDICT_REGRESSION && !o->remeasure) {
        w->verdict = 1;
        w->what = "**REGRESSION**";
    } else if (v == SB_VERDICT_REGRESSION) {
        int k = 0, any_re = 0;
        for (int j = 0; j < m; j++) {
            cmp_row *r = &cmp[rows[j]];
            any_re |= r->nre > 0;
            if (r->st.ratio > 1 && r->nre >= rule->min_n) {
                b[k] = r->s[0], nb[k] = r->n[0], c[k] = r->re, nc[k++] = r->nre;
            }
        }
        if (!any_re) { /* the first look: what looked slower is measured again */
            for (int j = 0; j < m; j++) {
                cmp_row *r = &cmp[rows[j]];
                if (r->st.ratio > 1 && r->cls != SUSPECT) {
                    add_suspect(o->sum, r);
                    w->suspects++;
                }
            }
            w->what = "suspect (slower at first; what looked slower to be measured again)";
        } else if (sb_stat_pooled(rule, k, b, nb, c, nc, NAN, &w->fresh) ==
                   SB_VERDICT_REGRESSION) {
            w->verdict = 1;
            w->what = "**REGRESSION** (confirmed by the re-measures)";
        } else {
            w->what = "within noise (slower at first, not confirmed by the re-measures)";
        }
    }
    free(b), free(c), free(nb), free(nc);
    return 0;
}

static void cell_num(FILE *f, const char *fmt, double v)
{
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fprintf(f, "-");
}

/* The Markdown: title, the rule, one row per strategy, the counts. */
static void print_md(FILE *out, sb_dbq *q, const sb_regress_opts *o, const sb_stat_rule *rule,
                     int judged, const cmp_row *cmp, int n, const int *count,
                     const whole_t *w)
{
    char lb[512], lc[512];
    run_label(q, o->baseline, lb, sizeof lb);
    run_label(q, o->candidate, lc, sizeof lc);
    fprintf(out, "# Step-time regression check\n\n- baseline: ");
    sb_md_text(out, lb);
    fprintf(out, "\n- candidate: ");
    sb_md_text(out, lc);
    fprintf(out, "\n- database: ");
    sb_md_text(out, o->db);
    fprintf(out,
            "\n- rule: one sample per launch (its median step time). Ratio = candidate median / "
            "baseline median, with its %.0f%% bootstrap interval (%d resamples); p = one-sided "
            "Mann-Whitney U (candidate slower). Regression: ratio > 1 + t, interval above 1 and "
            "p passing Benjamini-Hochberg at alpha %.3g over the %d strategies judged (the "
            "chance of any false call in a night when nothing changed stays at most alpha), "
            "where t = max(threshold "
            "%.3g%%, the band of the strategy's history: 2 x 1.4826 x MAD of its earlier "
            "nights' medians, from %d earlier runs at most); improvement the other way round; "
            "fewer than %d launches on a side: not enough data.%s\n\n",
            rule->conf * 100, rule->boot, rule->alpha, judged, rule->threshold * 100,
            o->history, rule->min_n,
            o->remeasure ? " A strategy slower at first is measured again; the regression is "
                           "confirmed only when the new launches alone show it too (at alpha)."
                         : "");
    if (probe_cut > 0) {
        int aside = 0;
        for (int i = 0; i < n; i++)
            aside += cmp[i].loaded[0] + cmp[i].loaded[1];
        fprintf(out, "- launches measured under load set aside: %d (their probe, a fixed 134 "
                "MFLOP of GEMMs timed beside every step, took over %.1f x the median probe, "
                "%.3f ms; `--raw`: keep every launch)\n\n", aside, PROBE_CUT,
                probe_cut / PROBE_CUT * 1e3);
    } else {
        fprintf(out, "- every launch kept (%s)\n\n",
                o->raw ? "--raw" : "a launch compared has no probe: measured before probes");
    }
    fprintf(out, "| model | params | p | kind | strategy | baseline n, median s | candidate n, "
                 "median s | ratio [interval] | p | band (nights) | verdict |\n");
    fprintf(out, "|---|---|---:|---|---:|---:|---:|---|---:|---:|---|\n");
    for (int i = 0; i < n; i++) {
        const cmp_row *r = &cmp[i];
        fprintf(out, "| ");
        sb_md_text(out, r->any->model);
        fprintf(out, " | ");
        sb_md_text(out, r->any->params);
        fprintf(out, " | %d | ", r->any->p);
        sb_md_text(out, r->any->kind);
        fprintf(out, " | %lld | %d, ", (long long)r->strategy_id, r->n[0]);
        cell_num(out, "%.4f", r->n[0] ? sb_stat_median(r->s[0], r->n[0]) : NAN);
        fprintf(out, " | %d, ", r->n[1]);
        cell_num(out, "%.4f", r->n[1] ? sb_stat_median(r->s[1], r->n[1]) : NAN);
        fprintf(out, " | ");
        cell_num(out, "%.3f", r->st.ratio);
        if (isfinite(r->st.lo))
            fprintf(out, " [%.3f, %.3f]", r->st.lo, r->st.hi);
        if (r->has_fresh && isfinite(r->fresh.ratio))
            fprintf(out, "; re-measures %.3f [%.3f, %.3f]", r->fresh.ratio, r->fresh.lo,
                    r->fresh.hi);
        fprintf(out, " | ");
        cell_num(out, "%.3g", r->st.p_slower);
        fprintf(out, " | ");
        cell_num(out, "%.1f%%", r->st.band * 100);
        fprintf(out, " (%d) | %s", r->nnights, r->verdict);
        if (r->failed[1] && r->why[1]) {
            char why[128];
            snprintf(why, sizeof why, "%.120s", r->why[1]);
            fprintf(out, " (%d of %d failed: ", r->failed[1], r->tried[1]);
            sb_md_text(out, why);
            fprintf(out, ")");
        }
        fprintf(out, " |\n");
    }
    if (w->verdict >= 0) {
        fprintf(out, "\n**The build as a whole** (%d strategies; ratio = exp(median of the "
                     "strategies' log ratios), %.0f%% bootstrap interval over their launches; "
                     "launch for launch, so no history band): ",
                w->first.nb, rule->conf * 100);
        cell_num(out, "%.3f", w->first.ratio);
        if (isfinite(w->first.lo))
            fprintf(out, " [%.3f, %.3f]", w->first.lo, w->first.hi);
        if (w->fresh.nb > 0 && isfinite(w->fresh.ratio))
            fprintf(out, "; re-measures (%d strategies) %.3f [%.3f, %.3f]", w->fresh.nb,
                    w->fresh.ratio, w->fresh.lo, w->fresh.hi);
        fprintf(out, ", threshold %.3g%%: %s\n", w->first.thr * 100, w->what);
    }
    int reg = count[SLOWER] + count[BROKE] + (w->verdict == 1);
    fprintf(out,
            "\n**%d confirmed regression%s** (%d slower, %d now failing, %d the whole build), "
            "%d improvement%s, %d "
            "within noise, %d suspect%s not measured again, %d with not enough data, %d not "
            "comparable.\n",
            reg, reg == 1 ? "" : "s", count[SLOWER], count[BROKE], w->verdict == 1, count[FASTER],
            count[FASTER] == 1 ? "" : "s", count[NOISE], count[SUSPECT],
            count[SUSPECT] == 1 ? "" : "s", count[FEW], count[OTHER]);
    if (!reg)
        fprintf(out, "\nno regression\n");
}

/* One trend figure per compared strategy: its nights, the band, tonight. */
static int figure(const sb_regress_opts *o, const cmp_row *r, sb_error *err)
{
    if (!r->n[1] && !r->nnights)
        return 0;
    char *data = NULL, *vars = NULL;
    size_t dl = 0, vl = 0;
    FILE *d = open_memstream(&data, &dl);
    if (!d)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int nn = r->nnights; /* ordinals: oldest night 0 ... newest nn - 1, candidate nn */
    double mid = nn ? sb_stat_median(r->night, nn) : sb_stat_median(r->s[0], r->n[0]);
    double thr = isfinite(r->st.thr) && r->st.thr > 0 ? r->st.thr : o->threshold;
    for (int k = nn - 1; k >= 0; k--)
        fprintf(d, "%d\t%.9g\t%.9g\t%.9g\t\"#%lld\"\n", nn - 1 - k, r->night[k],
                mid * (1 - thr), mid * (1 + thr), (long long)r->night_run[k]);
    fprintf(d, "%d\t%.9g\t%.9g\t%.9g\t\"#%lld (now)\"\n\n\n", nn,
            r->n[1] ? sb_stat_median(r->s[1], r->n[1]) : NAN, mid * (1 - thr), mid * (1 + thr),
            (long long)o->candidate);
    for (int k = 0; k + 1 < r->nhist; k += 2)
        fprintf(d, "%d\t%.9g\n", nn - 1 - (int)r->hist[k], r->hist[k + 1]);
    for (int k = 0; k < r->n[1]; k++)
        fprintf(d, "%d\t%.9g\n", nn, r->s[1][k]);
    fclose(d);
    FILE *v = open_memstream(&vars, &vl);
    if (!v) {
        free(data);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    char title[256], base[256], kind[64];
    snprintf(title, sizeof title, "%.40s p=%d %.30s (strategy %lld): %s", r->any->model,
             r->any->p, r->any->kind, (long long)r->strategy_id, r->verdict);
    fprintf(v, "ttl=");
    sb_plot_gp_str(v, title);
    fprintf(v, "; nruns=%d", nn + 1);
    fclose(v);
    size_t k = 0;
    for (const char *c = r->any->kind; *c && k + 1 < sizeof kind; c++)
        kind[k++] = (char)((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                                   (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'
                               ? *c
                               : '_');
    kind[k] = '\0';
    char model[64];
    k = 0;
    for (const char *c = r->any->model; *c && k + 1 < sizeof model; c++)
        model[k++] = (char)((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ? *c : '_');
    model[k] = '\0';
    snprintf(base, sizeof base, "trend-%s-p%d-%s-s%lld", model, r->any->p, kind,
             (long long)r->strategy_id);
    int rc = sb_plot_script(o->scripts, o->figures, "nightly.gp", base, data, vars, err);
    free(data);
    free(vars);
    return rc;
}

int sb_regress(const sb_regress_opts *o, sb_error *err)
{
    const char *db = o->db;
    int64_t base = o->baseline, cand = o->candidate;
    FILE *out = o->out ? o->out : stdout;
    sb_stat_rule rule;
    sb_stat_rule_default(&rule);
    rule.threshold = o->threshold;
    if (o->conf > 0)
        rule.conf = o->conf;
    if (o->alpha > 0)
        rule.alpha = o->alpha;
    if (o->min_n > 0)
        rule.min_n = o->min_n;
    sb_dbq *q = NULL;
    sb_qmeas *rb = NULL, *rc = NULL;
    int nb = 0, nc = 0, status = -1, n = 0;
    cmp_row *cmp = NULL;
    const char **kb = NULL, **kc = NULL;
    int *famrow = NULL;
    key_cache kcache = {0};
    if (o->sum)
        memset(o->sum, 0, sizeof *o->sum);
    if (sb_dbq_open(db, 0, 0, &q, err) || sb_dbq_check_run(q, base, err) ||
        sb_dbq_check_run(q, cand, err) || sb_dbq_run_measurements(q, base, &rb, &nb, err) ||
        sb_dbq_run_measurements(q, cand, &rc, &nc, err)) {
        goto out;
    }
    if (!nb || !nc) {
        sb_fail(err, SB_EXIT_INPUT, "regress: run %lld has no measurements in %s",
                (long long)(nb ? cand : base), db);
        goto out;
    }
    probe_cut = o->raw ? 0 : probe_reference(rb, nb, rc, nc);
    cmp = calloc((size_t)(nb + nc), sizeof *cmp);
    kb = calloc((size_t)nb, sizeof *kb);
    kc = calloc((size_t)nc, sizeof *kc);
    if (!cmp || !kb || !kc) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (int side = 0; side < 2; side++) {
        const sb_qmeas *rows = side ? rc : rb;
        const char **keys = side ? kc : kb;
        int nr = side ? nc : nb;
        for (int i = 0; i < nr; i++) {
            if (!(keys[i] = cached_key(q, &kcache, rows[i].strategy_id, err)))
                goto out;
            int j = 0;
            while (j < n && strcmp(cmp[j].key, keys[i]))
                j++;
            if (j == n) {
                cmp[n].key = keys[i];
                cmp[n].strategy_id = rows[i].strategy_id;
                cmp[n++].any = &rows[i];
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (fill(&cmp[i], rb, kb, nb, 0, 0, err) ||
            fill(&cmp[i], rc, kc, nc, 1, o->first_last, err))
            goto out;
    if (read_history(q, o, &kcache, cmp, n, err))
        goto out;
    /* the first look: every row's statistics, then alpha over the family
     * (sb_stat_family, Benjamini-Hochberg) */
    int count[NCLASS] = {0}, m = 0;
    sb_stat_cmp *fam = calloc((size_t)n + 1, sizeof *fam);
    famrow = calloc((size_t)n + 1, sizeof *famrow);
    if (!fam || !famrow) {
        free(fam);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        cmp[i].cls = judge_plain(&cmp[i], &rule);
        if (cmp[i].cls < 0) {
            famrow[m] = i;
            fam[m++] = cmp[i].st;
        }
    }
    sb_stat_family(&rule, fam, m);
    for (int k = 0; k < m; k++) {
        cmp[famrow[k]].st = fam[k];
        cmp[famrow[k]].cls = judge_stats(&cmp[famrow[k]], &rule, o);
    }
    free(fam);
    for (int i = 0; i < n; i++) {
        cmp_row *r = &cmp[i];
        count[r->cls]++;
        if (r->cls == SUSPECT)
            add_suspect(o->sum, r);
    }
    whole_t w = {.verdict = -1};
    if (o->whole && judge_whole(cmp, famrow, m, &rule, o, &w, err))
        goto out;
    if (w.suspects)
        count[SUSPECT] += w.suspects;
    print_md(out, q, o, &rule, m, cmp, n, count, &w);
    for (int i = 0; o->figures && i < n; i++)
        if (figure(o, &cmp[i], err))
            goto out;
    free(famrow);
    famrow = NULL;
    if (o->sum) {
        o->sum->whole = w.verdict;
        o->sum->regressions = count[SLOWER] + count[BROKE] + (w.verdict == 1);
        o->sum->improvements = count[FASTER];
        o->sum->noise = count[NOISE];
        o->sum->not_enough = count[FEW];
        o->sum->other = count[OTHER];
        o->sum->suspects = count[SUSPECT];
    }
    status = count[SLOWER] + count[BROKE] + (w.verdict == 1) ? 1 : 0;
out:
    free(famrow);
    for (int i = 0; cmp && i < n; i++) {
        free(cmp[i].s[0]);
        free(cmp[i].s[1]);
        free(cmp[i].hist);
        free(cmp[i].re);
    }
    key_cache_free(&kcache);
    free(kb);
    free(kc);
    free(cmp);
    free(rb);
    free(rc);
    sb_dbq_close(q);
    return status;
}
