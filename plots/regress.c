/* plots/regress.c: compares the step times of two runs (`shardbench regress`)
 * of the results database, strategy by strategy, and says which changes are
 * beyond the noise. Markdown on stdout; exit 1 on a confirmed regression.
 *
 * The rule (noise taken into account): per strategy, a run's "typical" time
 * is its median step time and its "best" the fastest step (min); with
 * several measurements of a strategy in one run, the median of their
 * medians and the min of their mins. A regression is confirmed when the
 * candidate's best is slower than the baseline's typical by more than the
 * threshold: even the candidate's luckiest step lost. An improvement is
 * confirmed the other way round (candidate typical faster than baseline
 * best by more than the threshold). Everything between is noise. A strategy
 * that ran ok in the baseline and fails in the candidate is a regression
 * too. A strategy is the same in both runs when its model (name and
 * parameters), P and per-op configs are: its kind label and the cost
 * model's numbers may differ. Reads only; never writes the database. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/plots.h"
#include "shardbench/query.h"
#include "shardbench/results.h"


typedef struct {
    int64_t strategy_id;     /* the first strategies row of this key met */
    const char *key;         /* what is compared: model, p and per-op configs */
    const sb_qmeas *any;     /* a row of it, for names */
    double med[2], min[2];   /* baseline, candidate; NaN if no ok measurement */
    int tried[2], failed[2]; /* measurements, of which not ok */
    const char *why[2];      /* message of a failure */
    const char *verdict;
    double change;           /* candidate median / baseline median - 1 */
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

/* Keys of every row (keys[i] for rows[i]), fetched once per strategies row. */
static int row_keys(sb_dbq *q, const sb_qmeas *rows, int n, char **keys, sb_error *err)
{
    for (int i = 0; i < n; i++) {
        keys[i] = NULL;
        for (int j = 0; j < i && !keys[i]; j++)
            if (rows[j].strategy_id == rows[i].strategy_id)
                keys[i] = strdup(keys[j]);
        if (!keys[i] && !(keys[i] = strategy_key(q, rows[i].strategy_id, err)))
            return -1;
    }
    return 0;
}

static void fill(cmp_row *c, const sb_qmeas *rows, char **keys, int n, int side)
{
    double *meds = malloc(sizeof(double) * (size_t)(n + 1));
    int k = 0;
    c->med[side] = c->min[side] = NAN;
    for (int i = 0; i < n; i++) {
        if (strcmp(keys[i], c->key))
            continue;
        c->tried[side]++;
        if (strcmp(rows[i].status, "ok") || !isfinite(rows[i].median)) {
            c->failed[side]++;
            c->why[side] = rows[i].message[0] ? rows[i].message : rows[i].status;
            continue;
        }
        if (meds)
            meds[k++] = rows[i].median;
        double lo = isfinite(rows[i].min) ? rows[i].min : rows[i].median;
        if (!(lo >= c->min[side]))
            c->min[side] = lo;
    }
    if (k)
        c->med[side] = sb_median(meds, k);
    free(meds);
}

static void fmt_time(double med, double min, char *buf, size_t n)
{
    if (isfinite(med))
        snprintf(buf, n, "%.4f (%.4f)", med, min);
    else
        snprintf(buf, n, "-");
}

/* What judge() makes of a row. */
enum { SLOWER, BROKE, FASTER, NOISE, OTHER, NCLASS };

/* Sets r->change and r->verdict (the rule at the top of this file);
 * returns its class. */
static int judge(cmp_row *r, double thr)
{
    r->change = r->med[1] / r->med[0] - 1;
    int okb = isfinite(r->med[0]), okc = isfinite(r->med[1]);
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
    if (r->min[1] > r->med[0] * (1 + thr))
        return r->verdict = "**REGRESSION**", SLOWER;
    if (r->med[1] < r->min[0] * (1 - thr))
        return r->verdict = "improvement", FASTER;
    return r->verdict = "within noise", NOISE;
}

/* The Markdown: title, the rule, one row per strategy, the counts. */
static void print_md(sb_dbq *q, const sb_regress_opts *o, const cmp_row *cmp, int n,
                     const int *count)
{
    int64_t base = o->baseline, cand = o->candidate;
    const char *db = o->db;
    double thr = o->threshold;
    int regressions = count[SLOWER], broke = count[BROKE], improved = count[FASTER],
        noise = count[NOISE], other = count[OTHER];
    char lb[512], lc[512];
    run_label(q, base, lb, sizeof lb);
    run_label(q, cand, lc, sizeof lc);
    printf("# Step-time regression check\n\n");
    printf("- baseline: ");
    sb_md_text(stdout, lb);
    printf("\n- candidate: ");
    sb_md_text(stdout, lc);
    printf("\n- database: ");
    sb_md_text(stdout, db);
    printf("\n");
    printf("- threshold: %.3g%%. Confirmed regression: the candidate's fastest step is slower "
           "than the baseline's median step by more than the threshold; confirmed "
           "improvement: the candidate's median is faster than the baseline's fastest step by "
           "more than the threshold; anything between is noise.\n\n",
           thr * 100);
    printf("| model | params | p | kind | strategy | baseline median (min) s | candidate median "
           "(min) s | change | verdict |\n");
    printf("|---|---|---:|---|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < n; i++) {
        const cmp_row *r = &cmp[i];
        char tb[64], tc[64], ch[32];
        fmt_time(r->med[0], r->min[0], tb, sizeof tb);
        fmt_time(r->med[1], r->min[1], tc, sizeof tc);
        if (isfinite(r->change))
            snprintf(ch, sizeof ch, "%+.1f%%", r->change * 100);
        else
            snprintf(ch, sizeof ch, "-");
        /* names and messages come from the database: escaped to stay cells */
        printf("| ");
        sb_md_text(stdout, r->any->model);
        printf(" | ");
        sb_md_text(stdout, r->any->params);
        printf(" | %d | ", r->any->p);
        sb_md_text(stdout, r->any->kind);
        printf(" | %lld | %s | %s | %s | %s", (long long)r->strategy_id, tb, tc, ch, r->verdict);
        if (r->failed[1] && r->why[1]) {
            char why[128];
            snprintf(why, sizeof why, "%.120s", r->why[1]);
            printf(" (");
            sb_md_text(stdout, why);
            printf(")");
        }
        printf(" |\n");
    }
    printf("\n**%d confirmed regression%s** (%d slower, %d now failing), %d improvement%s, %d "
           "within noise, %d not comparable.\n",
           regressions + broke, regressions + broke == 1 ? "" : "s", regressions, broke, improved,
           improved == 1 ? "" : "s", noise, other);
}

int sb_regress(const sb_regress_opts *o, sb_error *err)
{
    const char *db = o->db;
    int64_t base = o->baseline, cand = o->candidate;
    double thr = o->threshold;
    sb_dbq *q = NULL;
    sb_qmeas *rb = NULL, *rc = NULL;
    int nb = 0, nc = 0, status = -1;
    cmp_row *cmp = NULL;
    char **kb = NULL, **kc = NULL;
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
    cmp = calloc((size_t)(nb + nc), sizeof *cmp);
    if (!cmp) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    int n = 0;
    kb = calloc((size_t)nb, sizeof *kb);
    kc = calloc((size_t)nc, sizeof *kc);
    if (!kb || !kc) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if (row_keys(q, rb, nb, kb, err) || row_keys(q, rc, nc, kc, err)) {
        goto out;
    }
    for (int side = 0; side < 2; side++) {
        const sb_qmeas *rows = side ? rc : rb;
        char **keys = side ? kc : kb;
        int nr = side ? nc : nb;
        for (int i = 0; i < nr; i++) {
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
    int count[NCLASS] = {0};
    for (int i = 0; i < n; i++) {
        cmp_row *r = &cmp[i];
        fill(r, rb, kb, nb, 0);
        fill(r, rc, kc, nc, 1);
        count[judge(r, thr)]++;
    }
    print_md(q, o, cmp, n, count);
    status = count[SLOWER] + count[BROKE] ? 1 : 0;
out:
    for (int i = 0; kb && i < nb; i++)
        free(kb[i]);
    for (int i = 0; kc && i < nc; i++)
        free(kc[i]);
    free(kb);
    free(kc);
    free(cmp);
    free(rb);
    free(rc);
    sb_dbq_close(q);
    return status;
}
