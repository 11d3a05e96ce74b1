/* plots/fig_validate.c: `shardbench plot --validate FILE.json` (and
 * `validate --plot DIR`): the cost model against published training runs
 * (`validate --format json`, docs/megatron.md). One point per run: its
 * predicted step seconds (x) against the published ones (y), on log-log
 * axes with one range fitted to the points, the y = x line and the band of
 * the largest error validate allows (target_max_percent; 10% without it); each point labelled by its run id, one colour per source (the
 * paper the run is from); MAPE and the largest error, as validate computed
 * them, in the title. A field the figure needs that the JSON lacks fails
 * with exit 2 naming it ("runs[3].published_step_seconds"); no run, no
 * figure.
 * A second, validate-error: each run's signed error in percent, a bar per
 * run, the band at target_max_percent (over LABEL_MAX runs the first
 * figure's points go unlabelled: this one names them).
 * A third, validate-gemm: the large-GEMM rate each run's published
 * step implies (`implied_gemm_tflops`, docs/validation.md), a point per run
 * in the file's order, one colour per machine and precision, a dashed line
 * at that machine file's own rate (`gemm_tflops`). A JSON of a validate
 * older than those fields draws the first figure alone and says so. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figs.h"
#include "shardbench/plots.h"

#define VALIDATE_MAX_BYTES (64u << 20)
#define LABEL_GAP 1.15 /* least ratio between two labels of a source (~ a line of text) */
#define LABEL_MAX 20    /* more runs than this: the scatter's points unlabelled (validate-error names them) */

typedef struct {
    char id[64], source[64]; /* safe names */
    double pred, pub;        /* seconds */
    double err;              /* (pred - pub) / pub, percent */
    char series[64];         /* "machine_precision" (safe), "" without the GEMM fields */
    double gemm, implied;    /* TFLOP/s: the file's, the run's (0: none meets it) */
} vpoint;

/* a positive finite number at o.key, or -1 naming "where.key" */
static int need_num(const sb_json *o, const char *key, const char *where, const char *path,
                    double *v, sb_error *err)
{
    const sb_json *x = sb_json_get(o, key);
    if (!x || x->type != SB_JSON_NUM || !isfinite(x->num) || x->num < 0)
        return sb_fail(err, SB_EXIT_INPUT, "%s: %s%s%s %s: the validate figure needs it "
                       "(`validate --format json`)", path, where, *where ? "." : "", key,
                       x ? "is not a number >= 0" : "missing");
    *v = x->num;
    return 0;
}

static int need_str(const sb_json *o, const char *key, const char *where, const char *path,
                    char *out, size_t n, sb_error *err)
{
    const char *s = sb_json_str(sb_json_get(o, key));
    if (!s || !*s)
        return sb_fail(err, SB_EXIT_INPUT, "%s: %s.%s missing: the validate figure needs it "
                       "(`validate --format json`)", path, where, key);
    sb_plot_safe_name(s, out, n);
    return 0;
}

/* The percent target at j.key, in (0, 100); 0 where missing or outside. */
static double target(const sb_json *j, const char *key)
{
    const sb_json *x = sb_json_get(j, key);
    return x && x->type == SB_JSON_NUM && x->num > 0 && x->num < 100 ? x->num : 0.0;
}

/* Closes the data file *f (NULL after); nonzero naming path when the write failed. */
static int close_data(FILE **f, const char *path, sb_error *err)
{
    int bad = fclose(*f);
    *f = NULL;
    return bad ? sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path) : 0;
}

/* The optional GEMM fields of run r (validate since 2026-12-07): the file's
 * rate and the implied one (a number, or null where none meets the step),
 * the machine and precision naming the series; series stays "" when any is
 * missing or malformed. */
static void gemm_fields(const sb_json *r, vpoint *p)
{
    const sb_json *g = sb_json_get(r, "gemm_tflops"), *im = sb_json_get(r, "implied_gemm_tflops");
    const char *mach = sb_json_str(sb_json_get(r, "machine"));
    const char *prec = sb_json_str(sb_json_get(r, "precision"));
    if (!g || g->type != SB_JSON_NUM || !(g->num > 0) || !isfinite(g->num) || !im ||
        (im->type != SB_JSON_NULL && (im->type != SB_JSON_NUM || !(im->num > 0) || !isfinite(im->num))) ||
        !mach || !*mach || !prec || !*prec)
        return;
    char name[128];
    snprintf(name, sizeof name, "%s %s", mach, prec);
    sb_plot_safe_name(name, p->series, sizeof p->series);
    p->gemm = g->num;
    p->implied = im->type == SB_JSON_NUM ? im->num : 0.0;
}

/* the runs of j into *pts (malloc'd), their sources into s */
static int read_runs(const sb_json *j, const char *path, vpoint **pts, int *n, sb_series *s,
                     sb_error *err)
{
    const sb_json *runs = sb_json_get(j, "runs");
    if (!runs || runs->type != SB_JSON_ARR)
        return sb_fail(err, SB_EXIT_INPUT, "%s: \"runs\" %s: the validate figure needs it "
                       "(`validate --format json`)", path, runs ? "is not an array" : "missing");
    int k = 0;
    for (const sb_json *r = runs->child; r; r = r->next)
        k++;
    if (!k)
        return sb_fail(err, SB_EXIT_INPUT, "%s: \"runs\" is empty: no point to draw", path);
    *pts = calloc((size_t)k, sizeof **pts);
    if (!*pts)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    *n = 0;
    for (const sb_json *r = runs->child; r; r = r->next) {
        vpoint *p = &(*pts)[*n];
        char where[32];
        snprintf(where, sizeof where, "runs[%d]", *n);
        if (need_str(r, "id", where, path, p->id, sizeof p->id, err) ||
            need_str(r, "source", where, path, p->source, sizeof p->source, err) ||
            need_num(r, "predicted_step_seconds", where, path, &p->pred, err) ||
            need_num(r, "published_step_seconds", where, path, &p->pub, err))
            return -1;
        if (p->pred <= 0 || p->pub <= 0)
            return sb_fail(err, SB_EXIT_INPUT, "%s: %s (%s) has a step of 0 s: not on log axes",
                           path, where, p->id);
        if (sb_series_add(s, p->source, err))
            return -1;
        p->err = 100.0 * (p->pred - p->pub) / p->pub;
        gemm_fields(r, p);
        (*n)++;
    }
    return 0;
}

/* validate-gemm: a block per series (machine and precision), every run of it:
 * its index in the file, its implied rate (NaN where none meets its step: no
 * point, its tic kept), its id; then a block per series of the machine file's
 * rate from its first run to its last (the dashed line, whatever the points).
 * Drawn only when every run has the fields; says why not. */
static int plot_gemm(plotter *pl, const vpoint *pts, int n, sb_error *err)
{
    sb_series *g = calloc(1, sizeof *g);
    char data[PATH_MAX], title[256], *vars = NULL;
    FILE *f = NULL;
    int rc = -1, none = 0;
    if (!g)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < n; i++) {
        if (!pts[i].series[0]) {
            fprintf(pl->log ? pl->log : stdout, "validate-gemm: not drawn: runs[%d] (%s) has no "
                    "gemm_tflops, implied_gemm_tflops, machine or precision (a validate older than "
                    "them)\n", i, pts[i].id);
            rc = 0;
            goto out;
        }
        if (sb_series_add(g, pts[i].series, err))
            goto out;
        none += !(pts[i].implied > 0);
    }
    if (!(f = sb_plot_data_file(pl, "validate-gemm", data, sizeof data, err)))
        goto out;
    for (int w = 0; w < g->n; w++) {
        fprintf(f, "# %s\n", g->name[w]);
        for (int i = 0; i < n; i++)
            if (!strcmp(pts[i].series, g->name[w])) {
                if (pts[i].implied > 0)
                    fprintf(f, "%d\t%.9g\t%s\n", i + 1, pts[i].implied, pts[i].id);
                else
                    fprintf(f, "%d\tNaN\t%s\n", i + 1, pts[i].id);
            }
        fprintf(f, "\n\n");
    }
    for (int w = 0; w < g->n; w++) {
        int first = -1, last = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(pts[i].series, g->name[w]))
                last = i, first = first < 0 ? i : first;
        fprintf(f, "# %s: the machine file's rate\n%.9g\t%.9g\n%.9g\t%.9g\n\n\n", g->name[w],
                first + 1 - 0.4, pts[first].gemm, last + 1 + 0.4, pts[first].gemm);
    }
    if (close_data(&f, data, err))
        goto out;
    if (none)
        snprintf(title, sizeof title, "the large-GEMM rate each published step implies "
                 "(n = %d; %d met by no rate)", n - none, none);
    else
        snprintf(title, sizeof title, "the large-GEMM rate each published step implies (n = %d)", n);
    char extra[64];
    snprintf(extra, sizeof extra, "; nruns=%d", n);
    if (!(vars = sb_series_vars(data, "series", g, title, extra, err)))
        goto out;
    rc = sb_plot_gnuplot(pl, "validate-gemm.gp", "validate-gemm", vars, err);
out:
    if (f)
        fclose(f);
    free(vars);
    free(g);
    return rc;
}

/* validate-error: each run's signed error, (predicted - published) / published
 * in percent, a bar per run in the file's order (its id on the x axis), a
 * colour per source; a band at +- the largest error validate allows
 * (target_max_percent) and the count within it in the title. Drawn only when
 * the JSON gives its targets (a validate older than them: says why not). */
static int plot_error(plotter *pl, double tmape, double tmax, const vpoint *pts, int n,
                      const sb_series *s, double mape, double worst, sb_error *err)
{
    if (!(tmape > 0) || !(tmax > 0)) {
        fprintf(pl->log ? pl->log : stdout, "validate-error: not drawn: no target_mape_percent or "
                "target_max_percent > 0 (a validate older than them)\n");
        return 0;
    }
    char data[PATH_MAX], title[256], extra[128], *vars = NULL;
    FILE *f = sb_plot_data_file(pl, "validate-error", data, sizeof data, err);
    if (!f)
        return -1;
    double span = tmax;
    int within = 0;
    for (int w = 0; w < s->n; w++) { /* every run is in one source's block */
        fprintf(f, "# source %s\n", s->name[w]);
        for (int i = 0; i < n; i++)
            if (!strcmp(pts[i].source, s->name[w])) {
                span = fmax(span, fabs(pts[i].err));
                within += fabs(pts[i].err) <= tmax;
                fprintf(f, "%d\t%.9g\t%s\n", i + 1, pts[i].err, pts[i].id);
            }
        fprintf(f, "\n\n");
    }
    if (close_data(&f, data, err))
        return -1;
    snprintf(title, sizeof title, "prediction error per run: MAPE %.1f%%, max %.1f%% (targets %g%%, "
             "%g%%); %d of %d within ±%g%%", mape, worst, tmape, tmax, within, n, tmax);
    snprintf(extra, sizeof extra, "; nruns=%d; tmax=%.9g; span=%.9g", n, tmax, span * 1.15);
    if (!(vars = sb_series_vars(data, "sources", s, title, extra, err)))
        return -1;
    int rc = sb_plot_gnuplot(pl, "validate-error.gp", "validate-error", vars, err);
    free(vars);
    return rc;
}

int sb_plot_validate(const char *path, const char *out, const char *scripts, FILE *log,
                     int *figures, int *files, sb_error *err)
{
    plotter pl = {.out = out, .log = log};
    sb_series *s = calloc(1, sizeof *s);
    vpoint *pts = NULL;
    char *text = NULL, *vars = NULL, data[PATH_MAX];
    sb_json *j = NULL;
    FILE *f = NULL;
    int rc = -1, n = 0;
    size_t len;
    double mape, worst;
    if (!s) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if (sb_read_file(path, "validate JSON", VALIDATE_MAX_BYTES, &text, &len, err))
        goto out;
    if (!(j = sb_json_parse(text, err))) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        sb_fail(err, SB_EXIT_INPUT, "%s: %s", path, m);
        goto out;
    }
    if (need_num(j, "mape_percent", "", path, &mape, err) ||
        need_num(j, "max_error_percent", "", path, &worst, err) ||
        read_runs(j, path, &pts, &n, s, err))
        goto out;
    sb_series_sort(s);
    /* validate's targets, 0 where the JSON lacks them; the band: the largest error
     * validate allows, else 10% */
    double tmape = target(j, "target_mape_percent"), tmax = target(j, "target_max_percent");
    double band = tmax > 0 ? tmax : 10.0;
    /* one range for both axes, a tenth of a decade beyond the points and the band */
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < n; i++) {
        lo = fmin(lo, fmin(pts[i].pred, pts[i].pub));
        hi = fmax(hi, fmax(pts[i].pred, pts[i].pub));
    }
    lo /= (1.0 + band / 100.0) * 1.25, hi *= (1.0 + band / 100.0) * 1.25;
    if (sb_plotter_open(&pl, scripts, out, err) ||
        !(f = sb_plot_data_file(&pl, "validate", data, sizeof data, err)))
        goto out;
    /* a block per source, by published seconds: pred, published, id, the
     * label's height (nudged up to LABEL_GAP above the source's previous
     * label, so that runs of nearly one step time keep readable labels; the
     * range then reaches the highest label, none clipped) */
    double top = 0;
    for (int w = 0; w < s->n; w++) {
        fprintf(f, "# source %s\n", s->name[w]);
        double last = 0, label = 0;
        for (int at = -1;;) { /* the next by (published, index) after (last, at) */
            int next = -1;
            for (int i = 0; i < n; i++)
                if (!strcmp(pts[i].source, s->name[w]) &&
                    (pts[i].pub > last || (pts[i].pub == last && i > at)) &&
                    (next < 0 || pts[i].pub < pts[next].pub))
                    next = i;
            if (next < 0)
                break;
            last = pts[next].pub, at = next;
            label = fmax(last, label * LABEL_GAP);
            if (n <= LABEL_MAX)
                top = fmax(top, label);
            fprintf(f, "%.9g\t%.9g\t%s\t%.9g\n", pts[next].pred, pts[next].pub, pts[next].id,
                    label);
        }
        fprintf(f, "\n\n");
    }
    if (close_data(&f, data, err))
        goto out;
    hi = fmax(hi, top * 1.1);
    char title[256], extra[128];
    snprintf(title, sizeof title, "cost model against published runs: MAPE = %.1f%%, "
             "max error = %.1f%% (n = %d)", mape, worst, n);
    snprintf(extra, sizeof extra, "; lo=%.9g; hi=%.9g; labels=%d; band=%.9g", lo, hi, n <= LABEL_MAX,
             band);
    if (!(vars = sb_series_vars(data, "sources", s, title, extra, err)))
        goto out;
    rc = sb_plot_gnuplot(&pl, "validate.gp", "validate", vars, err);
    if (!rc)
        rc = plot_error(&pl, tmape, tmax, pts, n, s, mape, worst, err);
    if (!rc)
        rc = plot_gemm(&pl, pts, n, err);
out:
    if (f)
        fclose(f);
    if (figures)
        *figures = pl.figures;
    if (files)
        *files = pl.files;
    sb_plotter_close(&pl);
    sb_json_free(j);
    free(vars);
    free(text);
    free(pts);
    free(s);
    return rc;
}
