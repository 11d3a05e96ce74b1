/* plots/plot.c: the figures of one run (`shardbench plot`), from the results
 * database only. For each figure it writes the numbers it reads from the
 * database to a temporary TSV file and runs a gnuplot script of plots/
 * (PNG with pngcairo, and SVG) on it; the temporary files are removed.
 * Figures: speedup over data parallel against P per model (Fig. 6 form),
 * predicted against measured step seconds per (model, P) with Spearman's
 * rho and MAPE, search time against P per algorithm, step time across runs.
 * Each kind keeps one place in the legends and one colour over the run's
 * figures (style.c; the palette: terminal.gp). */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "figs.h"
#include "shardbench/plots.h"
#include "shardbench/query.h"
#include "shardbench/results.h"

/* Folder of the .gp scripts: --scripts, $SHARDBENCH_PLOTS, then relative to
 * the executable (a build tree inside the source tree: ../plots; installed:
 * ../share/shardbench/plots), then ./plots. */
int sb_plot_find_scripts(const char *given, char *dir, size_t n, sb_error *err)
{
    char cands[4][PATH_MAX];
    int nc = 0;
    const char *env = getenv("SHARDBENCH_PLOTS");
    if (given)
        snprintf(cands[nc++], PATH_MAX, "%s", given);
    else {
        if (env && *env)
            snprintf(cands[nc++], PATH_MAX, "%s", env);
        char exe[PATH_MAX];
        ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (l > 0) {
            exe[l] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash)
                *slash = '\0';
            snprintf(cands[nc++], PATH_MAX, "%.3000s/../plots", exe);
            snprintf(cands[nc++], PATH_MAX, "%.3000s/../share/shardbench/plots", exe);
        }
        snprintf(cands[nc++], PATH_MAX, "plots");
    }
    for (int i = 0; i < nc; i++) {
        char probe[PATH_MAX + 32];
        if (snprintf(probe, sizeof probe, "%s/speedup.gp", cands[i]) >= (int)sizeof probe)
            continue;
        if (access(probe, R_OK) == 0) {
            if (snprintf(dir, n, "%s", cands[i]) >= (int)n)
                continue;
            return 0;
        }
    }
    return sb_fail(err, SB_EXIT_INPUT,
                   "cannot find the gnuplot scripts (speedup.gp) in %.300s%s; give --scripts DIR "
                   "or set SHARDBENCH_PLOTS", nc ? cands[0] : "", nc > 1 ? " or next to the binary" : "");
}

/* Runs gnuplot on script with the variables in `vars` (gnuplot statements),
 * once for PNG and once for SVG, into OUT/base.{png,svg}. */
int sb_plot_gnuplot(plotter *pl, const char *script, const char *base, const char *vars,
                    sb_error *err)
{
    static const char *const terms[] = {"png", "svg"};
    for (int t = 0; t < 2; t++) {
        char outfile[PATH_MAX + 64], scriptpath[PATH_MAX + 64], partial[PATH_MAX + 96];
        snprintf(outfile, sizeof outfile, "%s/%s.%s", pl->out, base, terms[t]);
        /* gnuplot writes beside it, renamed over it once whole: a failed
         * or cut-short figure never replaces the previous one */
        snprintf(partial, sizeof partial, "%s.tmp-%ld", outfile, (long)getpid());
        snprintf(scriptpath, sizeof scriptpath, "%s/%s", pl->scripts, script);
        char *e = NULL;
        size_t elen = 0;
        FILE *f = open_memstream(&e, &elen);
        if (!f)
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        fprintf(f, "plotdir=");
        sb_plot_gp_str(f, pl->scripts);
        fprintf(f, "; term='%s'; outfile=", terms[t]);
        sb_plot_gp_str(f, partial);
        fprintf(f, "; %s", vars);
        fclose(f);
        char errfile[PATH_MAX + 32];
        snprintf(errfile, sizeof errfile, "%s/gnuplot.err", pl->tmp);
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            free(e);
            return sb_fail(err, SB_EXIT_INTERNAL, "fork: %s", strerror(errno));
        }
        if (pid == 0) {
            FILE *ef = freopen(errfile, "w", stderr);
            (void)ef;
            execlp("gnuplot", "gnuplot", "-e", e, scriptpath, (char *)NULL);
            fprintf(stderr, "cannot run gnuplot: %s (install gnuplot-nox)\n", strerror(errno));
            _exit(127);
        }
        free(e);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        struct stat sb;
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && stat(partial, &sb) == 0 && sb.st_size > 0;
        if (ok && rename(partial, outfile) != 0) {
            int e = errno;
            unlink(partial);
            return sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot rename %s into place: %s", outfile,
                           partial, strerror(e));
        }
        if (!ok) {
            unlink(partial);
            char why[512] = "";
            FILE *ef = fopen(errfile, "r");
            if (ef) {
                char line[512];
                while (fgets(line, sizeof line, ef))
                    if (line[0] != '\n' && !strstr(line, "arning"))
                        snprintf(why, sizeof why, "%s", line);
                fclose(ef);
            }
            why[strcspn(why, "\n")] = '\0';
            return sb_fail(err, SB_EXIT_INTERNAL, "gnuplot %s for %s failed: %s", script, outfile,
                           why[0] ? why : "no output file");
        }
        fprintf(pl->log ? pl->log : stdout, "%s\n", outfile);
        pl->files++;
    }
    pl->figures++;
    return 0;
}

FILE *sb_plot_data_file(plotter *pl, const char *name, char *path, size_t n, sb_error *err)
{
    if (snprintf(path, n, "%s/%s.tsv", pl->tmp, name) >= (int)n) {
        sb_fail(err, SB_EXIT_INTERNAL, "%s: path too long", pl->tmp);
        return NULL;
    }
    FILE *f = fopen(path, "w");
    if (!f)
        sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot write: %s", path, strerror(errno));
    return f;
}

/* The kinds of the run in the fixed order (the palette numbers of every
 * figure of the run). */
static int run_kinds(const sb_qmeas *rows, int n, sb_series *all, sb_error *err)
{
    all->n = 0;
    for (int i = 0; i < n; i++)
        if (sb_series_add(all, rows[i].kind, err))
            return -1;
    sb_series_sort(all);
    return 0;
}

/* Writes the figure's vars and runs gnuplot; frees nothing of the caller's. */
static int draw(plotter *pl, const char *script, const char *base, const char *path,
                const char *key, const sb_series *s, const char *title, const char *extra,
                sb_error *err)
{
    char *vars = sb_series_vars(path, key, s, title, extra, err);
    if (!vars)
        return -1;
    int rc = sb_plot_gnuplot(pl, script, base, vars, err);
    free(vars);
    return rc;
}

/* ---- speedup over data parallel, per model ------------------------------------------ */

static int plot_speedup(plotter *pl, const sb_series *all, const sb_qkind *k, int nk,
                        int64_t model_id, const char *fname, sb_error *err)
{
    sb_series s = {.n = 0};
    char path[PATH_MAX], title[512] = "";
    const char *params = "";
    int pmin = 1 << 30, pmax = 0, points = 0;
    for (int i = 0; i < nk; i++)
        if (k[i].model_id == model_id && isfinite(k[i].speedup)) {
            if (sb_series_add(&s, k[i].kind, err))
                return -1;
            pmin = k[i].p < pmin ? k[i].p : pmin;
            pmax = k[i].p > pmax ? k[i].p : pmax;
            points++;
            snprintf(title, sizeof title, "%.60s: speedup over data parallel, run %lld",
                     k[i].model, (long long)pl->run);
            params = k[i].params;
        }
    if (!points) {
        printf("(speedup-%s: no data-parallel measurement to compare with; skipped)\n", fname);
        return 0;
    }
    sb_series_within(&s, all);
    FILE *f = sb_plot_data_file(pl, "speedup", path, sizeof path, err);
    if (!f)
        return -1;
    for (int w = 0; w < s.n; w++) {
        fprintf(f, "# kind %s\n", s.name[w]);
        for (int i = 0; i < nk; i++) {
            char safe[64];
            sb_plot_safe_name(k[i].kind, safe, sizeof safe);
            if (k[i].model_id == model_id && isfinite(k[i].speedup) && !strcmp(safe, s.name[w]))
                fprintf(f, "%d\t%.6g\t%.6g\t%.6g\n", k[i].p, k[i].speedup, k[i].best_median,
                        k[i].dp_median);
        }
        fprintf(f, "\n\n");
    }
    if (fclose(f))
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
    char base[256], *extra = NULL;
    size_t el = 0;
    FILE *e = open_memstream(&extra, &el);
    if (!e)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    fprintf(e, "; pmin=%d; pmax=%d; sub=", pmin, pmax); /* the parameters: a second line */
    sb_plot_gp_str(e, params);
    if (fclose(e)) {
        free(extra);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    snprintf(base, sizeof base, "speedup-%s", fname);
    int rc = draw(pl, "speedup.gp", base, path, "kinds", &s, title, extra, err);
    free(extra);
    return rc;
}

/* ---- predicted vs measured seconds, per (model, p) ------------------------------------ */

/* One point per strategy that ran ok and has predicted seconds (the model
 * that priced the bench: a machine file or a calibration): predicted step
 * seconds against its least median, as report's MAPE takes them. The
 * reference model predicts FLOP, not seconds: said, no figure. */
static int plot_fidelity(plotter *pl, const sb_series *all, const sb_qmeas *rows, int n,
                         const sb_qfidelity *fd, const char *fname, sb_error *err)
{
    double *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
    int *idx = calloc((size_t)n + 1, sizeof *idx), rc = -1, timed = 0;
    char path[PATH_MAX], title[600];
    sb_series s = {.n = 0};
    double lo = INFINITY, hi = 0.0;
    FILE *f = NULL;
    if (!x || !y || !idx) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    int np = sb_q_points(rows, n, fd->model_id, fd->p, x, y, idx);
    for (int i = 0; i < np; i++) {
        double pred = rows[idx[i]].predicted_s;
        if (!isfinite(pred) || !(pred > 0))
            continue;
        if (sb_series_add(&s, rows[idx[i]].kind, err))
            goto out;
        lo = fmin(lo, fmin(pred, y[i]));
        hi = fmax(hi, fmax(pred, y[i]));
        timed++;
    }
    if (!timed) {
        printf("(fidelity-%s-p%d: %s; skipped)\n", fname, fd->p,
               np ? "no strategy has predicted seconds (the reference model priced the bench: "
                    "bench --machine or --calibration predicts seconds)"
                  : "no strategy ran ok");
        rc = 0;
        goto out;
    }
    sb_series_within(&s, all);
    if (!(f = sb_plot_data_file(pl, "fidelity", path, sizeof path, err)))
        goto out;
    for (int w = 0; w < s.n; w++) {
        fprintf(f, "# kind %s family %d\n", s.name[w], sb_kind_family(s.name[w]));
        for (int i = 0; i < np; i++) {
            char safe[64];
            double pred = rows[idx[i]].predicted_s;
            sb_plot_safe_name(rows[idx[i]].kind, safe, sizeof safe);
            if (!strcmp(safe, s.name[w]) && isfinite(pred) && pred > 0)
                fprintf(f, "%.9g\t%.9g\n", pred, y[i]);
        }
        fprintf(f, "\n\n");
    }
    if (fclose(f)) {
        f = NULL;
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    f = NULL;
    char rho[32] = "undefined", mape[32] = "-";
    if (isfinite(fd->rho))
        snprintf(rho, sizeof rho, "%.3f", fd->rho);
    if (isfinite(fd->mape))
        snprintf(mape, sizeof mape, "%.1f%%", 100 * fd->mape);
    snprintf(title, sizeof title, "%.60s p=%d: Spearman ρ = %s, MAPE = %s (n = %d), run %lld",
             fd->model, fd->p, rho, mape, timed, (long long)pl->run);
    /* families in the series order (one marker each) */
    char fams[SB_SERIES_MAX * 2 + 1] = "", extra[SB_SERIES_MAX * 2 + 96];
    for (int w = 0; w < s.n; w++) { /* "1 2 2 3" */
        fams[2 * w] = (char)('0' + sb_kind_family(s.name[w]));
        fams[2 * w + 1] = w + 1 < s.n ? ' ' : '\0';
    }
    /* both axes one range, fitted to the points with 8% margins: y = x the diagonal */
    double pad = 0.08 * (hi - lo > 0 ? hi - lo : hi);
    snprintf(extra, sizeof extra, "; families='%s'; lo=%.9g; hi=%.9g", fams,
             fmax(0.0, lo - pad), hi + pad);
    char base[256];
    snprintf(base, sizeof base, "fidelity-%s-p%d", fname, fd->p);
    rc = draw(pl, "fidelity.gp", base, path, "kinds", &s, title, extra, err);
out:
    if (f)
        fclose(f);
    free(x);
    free(y);
    free(idx);
    return rc;
}

/* ---- search time per algorithm, per model -------------------------------------------- */

static int plot_search(plotter *pl, int64_t model_id, const char *model, const char *fname,
                       sb_error *err)
{
    /* per (p, algo) of this model at the run's device counts: the run's own
     * search, else the latest recorded */
    sb_qsearch_time *t;
    int nt, rc = -1;
    if (sb_dbq_search_times(pl->q, pl->run, model_id, &t, &nt, err))
        return -1;
    char path[PATH_MAX];
    sb_series s = {.n = 0};
    FILE *f = NULL;
    int pmin = 1 << 30, pmax = 0;
    for (int i = 0; i < nt; i++) {
        if (sb_series_add(&s, t[i].algo, err))
            goto out;
        pmin = t[i].p < pmin ? t[i].p : pmin;
        pmax = t[i].p > pmax ? t[i].p : pmax;
    }
    if (!nt) {
        printf("(search-%s: no searches recorded; skipped)\n", fname);
        rc = 0;
        goto out;
    }
    sb_series_sort(&s);
    if (!(f = sb_plot_data_file(pl, "search", path, sizeof path, err)))
        goto out;
    for (int w = 0; w < s.n; w++) {
        fprintf(f, "# algo %s\n", s.name[w]);
        for (int i = 0; i < nt; i++) {
            char safe[64];
            sb_plot_safe_name(t[i].algo, safe, sizeof safe);
            if (!strcmp(safe, s.name[w])) /* log scale: no zeros */
                fprintf(f, "%d\t%.9g\n", t[i].p, t[i].seconds > 1e-7 ? t[i].seconds : 1e-7);
        }
        fprintf(f, "\n\n");
    }
    if (fclose(f)) {
        f = NULL;
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    f = NULL;
    char title[256], base[256], extra[64];
    snprintf(title, sizeof title, "%.60s: search time per algorithm, run %lld", model,
             (long long)pl->run);
    snprintf(extra, sizeof extra, "; pmin=%d; pmax=%d", pmin, pmax);
    snprintf(base, sizeof base, "search-%s", fname);
    rc = draw(pl, "search.gp", base, path, "algos", &s, title, extra, err);
out:
    if (f)
        fclose(f);
    free(t);
    return rc;
}

/* ---- step time across runs, per (model, p) ------------------------------------------ */

static int plot_trend(plotter *pl, const sb_series *all, int64_t model_id, const char *model,
                      int p, const char *fname, sb_error *err)
{
    /* rows first: the ordinal of a run is its place among all runs seen */
    sb_qtrend *t;
    int n;
    if (sb_dbq_trend(pl->q, model_id, p, pl->run, &t, &n, err))
        return -1;
    int64_t *runs = calloc((size_t)n + 1, sizeof *runs);
    int nruns = 0, rc = -1;
    char path[PATH_MAX];
    sb_series s = {.n = 0};
    FILE *f = NULL;
    if (!runs) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < nruns && runs[j] != t[i].run)
            j++;
        if (j == nruns)
            runs[nruns++] = t[i].run;
        if (sb_series_add(&s, t[i].kind, err))
            goto out;
    }
    for (int i = 1; i < nruns; i++) /* insertion sort: few runs */
        for (int j = i; j > 0 && runs[j - 1] > runs[j]; j--) {
            int64_t x = runs[j];
            runs[j] = runs[j - 1];
            runs[j - 1] = x;
        }
    if (!n) {
        printf("(trend-%s-p%d: no ok measurement; skipped)\n", fname, p);
        rc = 0;
        goto out;
    }
    sb_series_within(&s, all);
    if (!(f = sb_plot_data_file(pl, "trend", path, sizeof path, err)))
        goto out;
    for (int w = 0; w < s.n; w++) {
        fprintf(f, "# kind %s\n", s.name[w]);
        for (int i = 0; i < n; i++) {
            char safe[64];
            sb_plot_safe_name(t[i].kind, safe, sizeof safe);
            if (strcmp(safe, s.name[w]))
                continue;
            int ord = 0;
            while (runs[ord] != t[i].run)
                ord++;
            fprintf(f, "%d\t%.9g\t\"#%lld %s\"\n", ord, t[i].median, (long long)t[i].run,
                    t[i].commit);
        }
        fprintf(f, "\n\n");
    }
    if (fclose(f)) {
        f = NULL;
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    f = NULL;
    char title[256], base[256], extra[32];
    snprintf(title, sizeof title, "%.60s p=%d: best median step time per kind across runs", model,
             p);
    snprintf(extra, sizeof extra, "; nruns=%d", nruns);
    snprintf(base, sizeof base, "trend-%s-p%d", fname, p);
    rc = draw(pl, "trend.gp", base, path, "kinds", &s, title, extra, err);
out:
    if (f)
        fclose(f);
    free(runs);
    free(t);
    return rc;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int sb_plotter_open(plotter *pl, const char *scripts, const char *out, sb_error *err)
{
    pl->tmp[0] = '\0';
    pl->out = out;
    if (sb_plot_find_scripts(scripts, pl->scripts, sizeof pl->scripts, err))
        return -1;
    if (mkdir(out, 0777) && errno != EEXIST)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot create: %s", out, strerror(errno));
    const char *tmp = getenv("TMPDIR");
    snprintf(pl->tmp, sizeof pl->tmp, "%s/shardbench-plot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(pl->tmp)) {
        int e = errno;
        pl->tmp[0] = '\0';
        return sb_fail(err, SB_EXIT_INTERNAL, "%s/shardbench-plot-XXXXXX: cannot create: %s",
                       tmp && *tmp ? tmp : "/tmp", strerror(e));
    }
    return 0;
}

void sb_plotter_close(plotter *pl)
{
    if (pl->tmp[0])
        nftw(pl->tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    pl->tmp[0] = '\0';
}

/* File-name part of a model: its name, plus its id when another model of
 * the run has the same name (other parameters). */
static void model_fname(const sb_qmeas *rows, int n, int i, char *out, size_t len)
{
    char safe[64];
    sb_plot_safe_name(rows[i].model, safe, sizeof safe);
    int dup = 0;
    for (int j = 0; j < n && !dup; j++)
        dup = rows[j].model_id != rows[i].model_id && !strcmp(rows[j].model, rows[i].model);
    if (dup)
        snprintf(out, len, "%s-m%lld", safe, (long long)rows[i].model_id);
    else
        snprintf(out, len, "%s", safe);
}

int sb_plot(const sb_plot_opts *o, int *figures, int *files, sb_error *err)
{
    plotter pl = {.run = o->run, .out = o->out};
    const char *db = o->db;
    sb_qmeas *rows = NULL;
    sb_qkind *kinds = NULL;
    sb_qfidelity *fid = NULL;
    sb_series *all = calloc(1, sizeof *all);
    int n = 0, nk = 0, nf = 0, status = 0;
    if (!all) {
        status = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if (sb_dbq_open(db, 0, 0, &pl.q, err) || sb_dbq_check_run(pl.q, pl.run, err) ||
        sb_dbq_run_measurements(pl.q, pl.run, &rows, &n, err) ||
        sb_q_kinds(rows, n, &kinds, &nk, err) ||
        sb_q_fidelity(pl.q, pl.run, rows, n, &fid, &nf, err) || run_kinds(rows, n, all, err)) {
        status = -1;
        goto out;
    }
    if (!n) {
        status = sb_fail(err, SB_EXIT_INPUT, "plot: run %lld has no measurements in %s",
                         (long long)pl.run, db);
        goto out;
    }
    if (sb_plotter_open(&pl, o->scripts, o->out, err)) {
        status = -1;
        goto out;
    }
    for (int i = 0; i < n && !status; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = rows[j].model_id != rows[i].model_id;
        if (!first)
            continue;
        char fname[128];
        model_fname(rows, n, i, fname, sizeof fname);
        if (plot_speedup(&pl, all, kinds, nk, rows[i].model_id, fname, err) ||
            plot_search(&pl, rows[i].model_id, rows[i].model, fname, err))
            status = -1;
        for (int k = 0; k < nf && !status; k++)
            if (fid[k].model_id == rows[i].model_id &&
                (plot_fidelity(&pl, all, rows, n, &fid[k], fname, err) ||
                 plot_trend(&pl, all, rows[i].model_id, rows[i].model, fid[k].p, fname, err)))
                status = -1;
    }
    if (figures)
        *figures = pl.figures;
    if (files)
        *files = pl.files;
out:
    sb_plotter_close(&pl);
    free(all);
    free(rows);
    free(kinds);
    free(fid);
    sb_dbq_close(pl.q);
    return status;
}

int sb_plot_script(const char *scripts, const char *out, const char *script, const char *base,
                   const char *data, const char *vars, sb_error *err)
{
    plotter pl = {.out = out};
    char path[PATH_MAX];
    int rc = -1;
    char *all = NULL;
    if (sb_plotter_open(&pl, scripts, out, err))
        goto out;
    FILE *f = sb_plot_data_file(&pl, "data", path, sizeof path, err);
    if (!f)
        goto out;
    fputs(data, f);
    if (fclose(f)) {
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    size_t len = 0;
    FILE *v = open_memstream(&all, &len);
    if (!v) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    fprintf(v, "datafile=");
    sb_plot_gp_str(v, path);
    fprintf(v, "; %s", vars);
    fclose(v);
    rc = sb_plot_gnuplot(&pl, script, base, all, err);
out:
    free(all);
    sb_plotter_close(&pl);
    return rc;
}

