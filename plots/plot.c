/* plots/plot.c: the figures of one run (`shardbench plot`), from the results
 * database only. For each figure it writes the numbers it reads from the
 * database to a temporary TSV file and runs a gnuplot script of plots/
 * (PNG with pngcairo, and SVG) on it; the temporary files are removed.
 * Figures: speedup over data parallel against P per model (Fig. 6 form),
 * predicted cost against measured step time per (model, P) with Spearman's
 * rho, search time against P per algorithm, step time across runs. */
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

#include "shardbench/plots.h"
#include "shardbench/query.h"
#include "shardbench/results.h"

typedef struct {
    sb_dbq *q;
    int64_t run;
    const char *out;
    char scripts[PATH_MAX];
    char tmp[PATH_MAX];
    int figures, files;
} plotter;

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

/* A gnuplot string literal: single quotes, '' for a quote. */
static void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        if (*s != '\n')
            fputc(*s, f);
    }
    fputc('\'', f);
}

/* The gnuplot variables of a figure: "datafile='PATH'; KEY='LIST';
 * ttl='TITLE'" and then `extra` ("; pmin=4; pmax=64", or ""). malloc'd;
 * NULL (err set) when out of memory. */
static char *gp_vars(const char *path, const char *key, const char *list, const char *title,
                     const char *extra, sb_error *err)
{
    char *vars = NULL;
    size_t vl = 0;
    FILE *v = open_memstream(&vars, &vl);
    if (!v) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        return NULL;
    }
    fprintf(v, "datafile=");
    gp_str(v, path);
    fprintf(v, "; %s=", key);
    gp_str(v, list);
    fprintf(v, "; ttl=");
    gp_str(v, title);
    fputs(extra, v);
    if (fclose(v)) {
        free(vars);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        return NULL;
    }
    return vars;
}

/* A safe file-name piece: letters, digits, '-', '_', '.'; others become '_'. */
static void safe_name(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (; *s && k + 1 < n; s++)
        out[k++] = (char)((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
                                  (s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '_' ||
                                  s[0] == '.'
                              ? s[0]
                              : '_');
    out[k] = '\0';
}

/* Runs gnuplot on script with the variables in `vars` (gnuplot statements),
 * once for PNG and once for SVG, into OUT/base.{png,svg}. */
static int gnuplot(plotter *pl, const char *script, const char *base, const char *vars,
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
        gp_str(f, pl->scripts);
        fprintf(f, "; term='%s'; outfile=", terms[t]);
        gp_str(f, partial);
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
        printf("%s\n", outfile);
        pl->files++;
    }
    pl->figures++;
    return 0;
}

static FILE *data_file(plotter *pl, const char *name, char *path, size_t n, sb_error *err)
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

/* Kinds of (model, p-any) in first-seen order, space-separated (safe names). */
static void add_word(char *list, size_t n, const char *w)
{
    char safe[64], padded[80];
    safe_name(w, safe, sizeof safe);
    snprintf(padded, sizeof padded, " %s ", safe);
    char hay[4200];
    snprintf(hay, sizeof hay, " %s ", list);
    if (strstr(hay, padded))
        return;
    size_t l = strlen(list);
    snprintf(list + l, n - l, "%s%s", l ? " " : "", safe);
}

/* ---- speedup over data parallel, per model ------------------------------------------ */

static int plot_speedup(plotter *pl, const sb_qkind *k, int nk, int64_t model_id,
                        const char *fname, sb_error *err)
{
    char kinds[2048] = "", path[PATH_MAX], title[512] = "";
    int pmin = 1 << 30, pmax = 0, points = 0;
    for (int i = 0; i < nk; i++)
        if (k[i].model_id == model_id && isfinite(k[i].speedup)) {
            add_word(kinds, sizeof kinds, k[i].kind);
            pmin = k[i].p < pmin ? k[i].p : pmin;
            pmax = k[i].p > pmax ? k[i].p : pmax;
            points++;
            snprintf(title, sizeof title, "%.60s (%.300s): speedup over data parallel, run %lld",
                     k[i].model, k[i].params, (long long)pl->run);
        }
    if (!points) {
        printf("(speedup-%s: no data-parallel measurement to compare with; skipped)\n", fname);
        return 0;
    }
    FILE *f = data_file(pl, "speedup", path, sizeof path, err);
    if (!f)
        return -1;
    char list[2048];
    snprintf(list, sizeof list, "%s", kinds);
    char *save = NULL;
    for (char *w = strtok_r(list, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        fprintf(f, "# kind %s\n", w);
        for (int i = 0; i < nk; i++) {
            char safe[64];
            safe_name(k[i].kind, safe, sizeof safe);
            if (k[i].model_id == model_id && isfinite(k[i].speedup) && !strcmp(safe, w))
                fprintf(f, "%d\t%.6g\t%.6g\t%.6g\n", k[i].p, k[i].speedup, k[i].best_median,
                        k[i].dp_median);
        }
        fprintf(f, "\n\n");
    }
    if (fclose(f))
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
    char base[256], extra[64];
    snprintf(extra, sizeof extra, "; pmin=%d; pmax=%d", pmin, pmax);
    char *vars = gp_vars(path, "kinds", kinds, title, extra, err);
    if (!vars)
        return -1;
    snprintf(base, sizeof base, "speedup-%s", fname);
    int rc = gnuplot(pl, "speedup.gp", base, vars, err);
    free(vars);
    return rc;
}

/* ---- predicted vs measured, per (model, p) ------------------------------------------- */

static int plot_fidelity(plotter *pl, const sb_qmeas *rows, int n, const sb_qfidelity *fd,
                         const char *fname, sb_error *err)
{
    double *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
    int *idx = calloc((size_t)n + 1, sizeof *idx), rc = -1;
    char path[PATH_MAX], kinds[2048] = "", title[600], *vars = NULL;
    FILE *f = NULL;
    if (!x || !y || !idx) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    int np = sb_q_points(rows, n, fd->model_id, fd->p, x, y, idx);
    if (!np) {
        printf("(fidelity-%s-p%d: no strategy ran ok; skipped)\n", fname, fd->p);
        rc = 0;
        goto out;
    }
    for (int i = 0; i < np; i++)
        add_word(kinds, sizeof kinds, rows[idx[i]].kind);
    if (!(f = data_file(pl, "fidelity", path, sizeof path, err)))
        goto out;
    char list[2048], *save = NULL;
    snprintf(list, sizeof list, "%s", kinds);
    for (char *w = strtok_r(list, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        fprintf(f, "# kind %s\n", w);
        for (int i = 0; i < np; i++) {
            char safe[64];
            safe_name(rows[idx[i]].kind, safe, sizeof safe);
            if (!strcmp(safe, w))
                fprintf(f, "%.9g\t%.9g\n", x[i], y[i]);
        }
        fprintf(f, "\n\n");
    }
    if (fclose(f)) {
        f = NULL;
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    f = NULL;
    if (isfinite(fd->rho))
        snprintf(title, sizeof title, "%.60s p=%d: Spearman ρ = %.3f (n = %d), run %lld",
                 fd->model, fd->p, fd->rho, fd->n, (long long)pl->run);
    else
        snprintf(title, sizeof title, "%.60s p=%d: Spearman ρ undefined (n = %d), run %lld",
                 fd->model, fd->p, fd->n, (long long)pl->run);
    if (!(vars = gp_vars(path, "kinds", kinds, title, "", err)))
        goto out;
    char base[256];
    snprintf(base, sizeof base, "fidelity-%s-p%d", fname, fd->p);
    rc = gnuplot(pl, "fidelity.gp", base, vars, err);
out:
    if (f)
        fclose(f);
    free(vars);
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
    int nt;
    if (sb_dbq_search_times(pl->q, pl->run, model_id, &t, &nt, err))
        return -1;
    char path[PATH_MAX], algos[1024] = "", cur[64] = "";
    FILE *f = data_file(pl, "search", path, sizeof path, err);
    if (!f) {
        free(t);
        return -1;
    }
    int rows = 0, pmin = 1 << 30, pmax = 0;
    for (int i = 0; i < nt; i++) {
        char safe[64];
        safe_name(t[i].algo, safe, sizeof safe);
        if (strcmp(safe, cur)) {
            if (cur[0])
                fprintf(f, "\n\n");
            snprintf(cur, sizeof cur, "%s", safe);
            add_word(algos, sizeof algos, safe);
            fprintf(f, "# algo %s\n", safe);
        }
        int p = t[i].p;
        double s = t[i].seconds;
        fprintf(f, "%d\t%.9g\n", p, s > 1e-7 ? s : 1e-7); /* log scale: no zeros */
        pmin = p < pmin ? p : pmin;
        pmax = p > pmax ? p : pmax;
        rows++;
    }
    free(t);
    if (fclose(f))
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
    if (!rows) {
        printf("(search-%s: no searches recorded; skipped)\n", fname);
        return 0;
    }
    char title[256], base[256], extra[64];
    snprintf(title, sizeof title, "%.60s: search time per algorithm, run %lld", model,
             (long long)pl->run);
    snprintf(extra, sizeof extra, "; pmin=%d; pmax=%d", pmin, pmax);
    char *vars = gp_vars(path, "algos", algos, title, extra, err);
    if (!vars)
        return -1;
    snprintf(base, sizeof base, "search-%s", fname);
    int rc = gnuplot(pl, "search.gp", base, vars, err);
    free(vars);
    return rc;
}

/* ---- step time across runs, per (model, p) ------------------------------------------ */

static int plot_trend(plotter *pl, int64_t model_id, const char *model, int p, const char *fname,
                      sb_error *err)
{
    /* rows first: the ordinal of a run is its place among all runs seen */
    sb_qtrend *t;
    int n;
    if (sb_dbq_trend(pl->q, model_id, p, pl->run, &t, &n, err))
        return -1;
    for (int i = 0; i < n; i++) {
        char safe[64];
        safe_name(t[i].kind, safe, sizeof safe);
        snprintf(t[i].kind, sizeof t[i].kind, "%s", safe);
    }
    int64_t *runs = calloc((size_t)n + 1, sizeof *runs);
    int nruns = 0, rc = -1;
    char path[PATH_MAX], kinds[2048] = "", *vars = NULL;
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
        add_word(kinds, sizeof kinds, t[i].kind);
    }
    for (int i = 1; i < nruns; i++) /* insertion sort: few runs */
        for (int j = i; j > 0 && runs[j - 1] > runs[j]; j--) {
            int64_t s = runs[j];
            runs[j] = runs[j - 1];
            runs[j - 1] = s;
        }
    if (!n) {
        printf("(trend-%s-p%d: no ok measurement; skipped)\n", fname, p);
        rc = 0;
        goto out;
    }
    if (!(f = data_file(pl, "trend", path, sizeof path, err)))
        goto out;
    for (int i = 0; i < n; i++) {
        if (i == 0 || strcmp(t[i].kind, t[i - 1].kind))
            fprintf(f, "%s# kind %s\n", i ? "\n\n" : "", t[i].kind);
        int ord = 0;
        while (runs[ord] != t[i].run)
            ord++;
        fprintf(f, "%d\t%.9g\t\"#%lld %s\"\n", ord, t[i].median, (long long)t[i].run, t[i].commit);
    }
    if (fclose(f)) {
        f = NULL;
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    f = NULL;
    char title[256], base[256];
    snprintf(title, sizeof title, "%.60s p=%d: best median step time per kind across runs", model,
             p);
    char extra[32];
    snprintf(extra, sizeof extra, "; nruns=%d", nruns);
    if (!(vars = gp_vars(path, "kinds", kinds, title, extra, err)))
        goto out;
    snprintf(base, sizeof base, "trend-%s-p%d", fname, p);
    rc = gnuplot(pl, "trend.gp", base, vars, err);
out:
    if (f)
        fclose(f);
    free(vars);
    free(runs);
    free(t);
    return rc;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* File-name part of a model: its name, plus its id when another model of
 * the run has the same name (other parameters). */
static void model_fname(const sb_qmeas *rows, int n, int i, char *out, size_t len)
{
    char safe[64];
    safe_name(rows[i].model, safe, sizeof safe);
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
    const char *db = o->db, *scripts = o->scripts;
    sb_qmeas *rows = NULL;
    sb_qkind *kinds = NULL;
    sb_qfidelity *fid = NULL;
    int n = 0, nk = 0, nf = 0, status = 0;
    if (sb_plot_find_scripts(scripts, pl.scripts, sizeof pl.scripts, err) ||
        sb_dbq_open(db, 0, 0, &pl.q, err) || sb_dbq_check_run(pl.q, pl.run, err) ||
        sb_dbq_run_measurements(pl.q, pl.run, &rows, &n, err) ||
        sb_q_kinds(rows, n, &kinds, &nk, err) ||
        sb_q_fidelity(pl.q, pl.run, rows, n, &fid, &nf, err)) {
        status = -1;
        goto out;
    }
    if (!n) {
        status = sb_fail(err, SB_EXIT_INPUT, "plot: run %lld has no measurements in %s",
                         (long long)pl.run, db);
        goto out;
    }
    if (mkdir(pl.out, 0777) && errno != EEXIST) {
        status = sb_fail(err, SB_EXIT_INPUT, "%s: cannot create: %s", pl.out, strerror(errno));
        goto out;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(pl.tmp, sizeof pl.tmp, "%s/shardbench-plot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(pl.tmp)) {
        status = sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot create: %s", pl.tmp, strerror(errno));
        pl.tmp[0] = '\0';
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
        if (plot_speedup(&pl, kinds, nk, rows[i].model_id, fname, err) ||
            plot_search(&pl, rows[i].model_id, rows[i].model, fname, err))
            status = -1;
        for (int k = 0; k < nf && !status; k++)
            if (fid[k].model_id == rows[i].model_id &&
                (plot_fidelity(&pl, rows, n, &fid[k], fname, err) ||
                 plot_trend(&pl, rows[i].model_id, rows[i].model, fid[k].p, fname, err)))
                status = -1;
    }
    if (figures)
        *figures = pl.figures;
    if (files)
        *files = pl.files;
out:
    if (pl.tmp[0])
        nftw(pl.tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
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
    if (sb_plot_find_scripts(scripts, pl.scripts, sizeof pl.scripts, err))
        return -1;
    if (mkdir(out, 0777) && errno != EEXIST)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot create: %s", out, strerror(errno));
    const char *tmp = getenv("TMPDIR");
    snprintf(pl.tmp, sizeof pl.tmp, "%s/shardbench-plot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(pl.tmp))
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot create: %s", pl.tmp, strerror(errno));
    FILE *f = data_file(&pl, "data", path, sizeof path, err);
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
    gp_str(v, path);
    fprintf(v, "; %s", vars);
    fclose(v);
    rc = gnuplot(&pl, script, base, all, err);
out:
    free(all);
    nftw(pl.tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return rc;
}

void sb_plot_gp_str(FILE *f, const char *s) { gp_str(f, s); }
