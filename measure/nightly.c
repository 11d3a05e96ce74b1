/* measure/nightly.c: `shardbench nightly`: the whole nightly regression check
 * in one call. Benches the current build (every strategy in several
 * launches, interleaved), holds it to the last good night (or a given run)
 * with the statistics of measure/regress.c, measures the suspects again,
 * writes OUT/report.md and one trend figure per strategy, and stores the
 * verdict (table nightly_verdicts): a night with no confirmed regression
 * becomes the next night's baseline. */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc.h"
#include "shardbench/measure.h"
#include "shardbench/plots.h"
#include "shardbench/query.h"
#include "shardbench/results.h"

void sb_nightly_opts_default(sb_nightly_opts *o)
{
    memset(o, 0, sizeof *o);
    sb_bench_opts_default(&o->bench);
    o->bench.algos = "none";
    o->bench.steps = 3;
    o->bench.warmup = 1;
    o->bench.top = 3;
    o->bench.within = 4;
    o->bench.timeout = 300;
    o->trials = 5;
    o->extra = 6;
    o->baseline_build = "auto";
    o->rule.threshold = 0.05;
    o->rule.history = 7;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int mkdir_p(const char *dir)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(buf, 0777) && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}

static int fail(const sb_error *err)
{
    fprintf(stderr, "shardbench: %s\n", err->msg);
    return 2;
}

/* One more launch of every strategy (or of `only`) into run `into` (0: a
 * new run, its id to *made), by `runner` (NULL: this build). */
static int one_round(const sb_nightly_opts *o, int64_t into, int64_t *made, const char *runner,
                     const char *only, const char *work, int argc, char **argv)
{
    sb_bench_opts a = o->bench;
    a.trials = 1;
    a.resume = into;
    a.again = into != 0;
    a.only = only;
    a.runner = runner;
    a.survivors = o->bench.survivors ? o->bench.survivors : work;
    a.workdir = NULL;
    a.run_id_out = made;
    int rc = sb_bench(&a, argc, argv);
    if (rc == 130 || rc == 2 || (!into && !*made)) {
        fprintf(stderr, "shardbench: nightly: the bench failed (exit %d)\n", rc);
        return -1;
    }
    return 0;
}

/* The A/B rounds after the first candidate launch: the baseline build's
 * run made, then rounds alternating which build goes first. */
static int ab_rounds(const sb_nightly_opts *o, int64_t run, int64_t *base, const char *work,
                     int argc, char **argv)
{
    if (one_round(o, 0, base, o->baseline_build, NULL, work, argc, argv))
        return -1;
    for (int t = 1; t < o->trials; t++) {
        int bfirst = t % 2;
        if (one_round(o, bfirst ? *base : run, NULL, bfirst ? o->baseline_build : NULL, NULL,
                      work, argc, argv) ||
            one_round(o, bfirst ? run : *base, NULL, bfirst ? NULL : o->baseline_build, NULL,
                      work, argc, argv))
            return -1;
    }
    return 0;
}

/* n more launches of every strategy (or of `only`) into run `run`, by this
 * build. */
static int more_rounds(const sb_nightly_opts *o, int64_t run, int n, const char *only,
                       const char *work, int argc, char **argv)
{
    sb_bench_opts a = o->bench;
    a.trials = n;
    a.only = only;
    a.resume = run;
    a.again = 1;
    a.survivors = o->bench.survivors ? o->bench.survivors : work;
    a.workdir = NULL;
    a.run_id_out = NULL;
    int rc = sb_bench(&a, argc, argv);
    if (rc == 130 || rc == 2) {
        fprintf(stderr, "shardbench: nightly: the bench failed (exit %d)\n", rc);
        return -1;
    }
    return 0;
}

/* The baseline: the given run (checked), or the last good night of this
 * machine and build options (0 when there is none). Returns 0 or an exit
 * status. */
static int find_baseline(const char *db, int64_t run, int64_t *baseline)
{
    sb_error err = {0};
    sb_dbq *q = NULL;
    if (sb_dbq_open(db, 1, 0, &q, &err))
        return fail(&err);
    int rc = *baseline ? sb_dbq_check_run(q, *baseline, &err)
                       : sb_dbq_last_good_nightly(q, run, baseline, &err) < 0;
    sb_dbq_close(q);
    return rc ? fail(&err) : 0;
}

/* The baseline run's ok measurements: none (a baseline build that printed
 * no JSON, failed or timed out every launch) is no baseline, and the night
 * ends with exit 2 and no verdict. Returns 0 or an exit status. */
static int baseline_measured(const char *db, int64_t baseline, const char *build)
{
    sb_error err = {0};
    sb_dbq *q = NULL;
    sb_qmeas *rows = NULL;
    int nr = 0, ok = 0;
    if (sb_dbq_open(db, 0, 0, &q, &err) || sb_dbq_run_measurements(q, baseline, &rows, &nr, &err)) {
        sb_dbq_close(q);
        return fail(&err);
    }
    sb_dbq_close(q);
    for (int i = 0; i < nr; i++)
        ok += !strcmp(rows[i].status, "ok");
    char why[256] = "";
    if (!ok && nr)
        snprintf(why, sizeof why, "; the first: %s: %.150s", rows[0].status, rows[0].message);
    free(rows);
    if (ok)
        return 0;
    char shown[PATH_MAX];
    sb_escape_controls(build ? build : "(stored launches)", shown, sizeof shown, 0);
    fprintf(stderr, "shardbench: nightly: the baseline (run %lld, build %s) produced no "
            "measurement in %d launch%s%s: no verdict stored\n", (long long)baseline, shown,
            nr, nr == 1 ? "" : "es", why);
    return 2;
}

/* The first night: nothing to compare with; a report saying so, and the
 * verdict stored so that this run is the next night's baseline. */
static int first_night(const char *db, int64_t run, const char *report, const char *kept)
{
    sb_error err = {0};
    char tmp[PATH_MAX + 32];
    FILE *f = sb_out_open(report, "report", tmp, sizeof tmp, &err);
    if (!f)
        return fail(&err);
    fprintf(f, "# Nightly regression check\n\nRun %lld: no earlier good night of this "
               "machine and build options in %s; nothing to compare with. This run is "
               "the next night's baseline.\n\nno regression\n",
            (long long)run, db);
    if (sb_out_commit(f, tmp, report, "report", &err))
        return fail(&err);
    printf("nightly: run %lld is the first night (no baseline); report %s\n", (long long)run,
           report);
    sb_dbq *q = NULL;
    int rc = sb_dbq_open(db, 1, 0, &q, &err) || sb_dbq_record_nightly(q, run, 0, 0, 0, kept, &err);
    sb_dbq_close(q);
    return rc ? fail(&err) : 0;
}

/* The first look: r->first_last set to the last measurement of the first
 * launches, the statistics run quietly, the suspects in *sum. Returns 0 or
 * an exit status. */
static int first_look(sb_regress_opts *r, sb_regress_summary *sum)
{
    sb_error err = {0};
    sb_dbq *q = NULL;
    sb_qmeas *rows = NULL;
    int nr = 0;
    if (sb_dbq_open(r->db, 0, 0, &q, &err) || sb_dbq_run_measurements(q, r->candidate, &rows, &nr, &err)) {
        sb_dbq_close(q);
        return fail(&err);
    }
    for (int i = 0; i < nr; i++)
        if (rows[i].measurement_id > r->first_last)
            r->first_last = rows[i].measurement_id;
    free(rows);
    sb_dbq_close(q);
    r->sum = sum;
    r->figures = NULL;
    FILE *devnull = fopen("/dev/null", "w");
    r->out = devnull;
    int rc = sb_regress(r, &err);
    if (devnull)
        fclose(devnull);
    return rc < 0 ? fail(&err) : 0;
}

/* The suspects measured again, `extra` launches each: with a baseline build
 * both builds launch for launch, else this build into its own run.
 * Returns 0 or -1 (said). */
static int remeasure(const sb_nightly_opts *o, int64_t run, int64_t baseline,
                     const sb_regress_summary *sum, const char *work, int argc, char **argv)
{
    printf("== nightly: %d suspect%s measured again (%d launches each): %s\n", sum->suspects,
           sum->suspects == 1 ? "" : "s", o->extra, sum->suspect_list);
    fflush(stdout);
    if (o->baseline_build) {
        for (int t = 0; t < o->extra; t++)
            if (one_round(o, t % 2 ? baseline : run, NULL, t % 2 ? o->baseline_build : NULL,
                          sum->suspect_list, work, argc, argv) ||
                one_round(o, t % 2 ? run : baseline, NULL, t % 2 ? NULL : o->baseline_build,
                          sum->suspect_list, work, argc, argv))
                return -1;
        return 0;
    }
    return more_rounds(o, run, o->extra, sum->suspect_list, work, argc, argv);
}

/* The verdict: the report (written whole or not at all) with its figures in
 * `out`, the verdict stored, the report on stdout. Returns 0 or an exit
 * status. */
static int verdict(sb_regress_opts *r, int64_t run, const char *out, const char *report,
                   sb_regress_summary *sum, const char *kept)
{
    sb_error err = {0};
    char tmp[PATH_MAX + 32];
    FILE *f = sb_out_open(report, "report", tmp, sizeof tmp, &err);
    if (!f)
        return fail(&err);
    fprintf(f, "# Nightly regression check: run %lld\n\n", (long long)run);
    r->out = f;
    r->figures = out;
    if (sb_regress(r, &err) < 0) {
        sb_out_abort(f, tmp);
        return fail(&err);
    }
    if (sb_out_commit(f, tmp, report, "report", &err))
        return fail(&err);
    sb_dbq *q = NULL;
    int rc = sb_dbq_open(r->db, 1, 0, &q, &err) ||
             sb_dbq_record_nightly(q, run, r->baseline, sum->regressions, sum->improvements,
                                   kept, &err);
    sb_dbq_close(q);
    if (rc)
        return fail(&err);
    char *text = NULL; /* read back as every file is: one open, its kind checked */
    size_t len = 0;
    if (sb_read_file(report, "report", (size_t)64 << 20, &text, &len, &err) == 0)
        fwrite(text, 1, len, stdout);
    free(text);
    return 0;
}

/* A copy of this binary (/proc/self/exe) at DIR/DB-run-RUN/shardbench (DB:
 * the database file's name without .db, so that the nights of two databases
 * in one folder keep apart; DIR NULL: nightly-builds beside the database),
 * written whole or not at all, so that a later night can measure this build
 * beside its own (A/B). Fills path; returns 0, or -1 with the reason
 * printed (the night's verdict stands; the next night then compares with
 * the stored launches). */
static int keep_build(const char *dir, const char *db, int64_t run, char *path, size_t n)
{
    char sub[PATH_MAX], tmp[PATH_MAX + 32], home[PATH_MAX], stem[256];
    sb_error err = {0};
    path[0] = '\0';
    const char *slash = strrchr(db, '/');
    snprintf(stem, sizeof stem, "%s", slash ? slash + 1 : db);
    size_t sl = strlen(stem);
    if (sl > 3 && !strcmp(stem + sl - 3, ".db"))
        stem[sl - 3] = '\0';
    if (!dir) {
        int dl = slash ? (int)(slash - db) : 1;
        snprintf(home, sizeof home, "%.*s/nightly-builds", dl, slash ? db : ".");
        dir = home;
    }
    if (snprintf(sub, sizeof sub, "%s/%s-run-%lld", dir, stem, (long long)run) >= (int)sizeof sub ||
        snprintf(path, n, "%s/shardbench", sub) >= (int)n) {
        fprintf(stderr, "shardbench: nightly: cannot keep this build: %s: path too long\n", dir);
        path[0] = '\0';
        return -1;
    }
    if (mkdir_p(sub)) {
        fprintf(stderr, "shardbench: nightly: cannot keep this build: %s: %s\n", sub,
                strerror(errno));
        path[0] = '\0';
        return -1;
    }
    FILE *in = fopen("/proc/self/exe", "rb");
    FILE *out = in ? sb_out_open(path, "kept build", tmp, sizeof tmp, &err) : NULL;
    if (!in || !out) {
        fprintf(stderr, "shardbench: nightly: cannot keep this build: %s\n",
                in ? err.msg : strerror(errno));
        if (in)
            fclose(in);
        path[0] = '\0';
        return -1;
    }
    char buf[1 << 16];
    size_t k;
    int bad = 0;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0)
        bad |= fwrite(buf, 1, k, out) != k;
    bad |= ferror(in);
    fclose(in);
    if (bad || chmod(tmp, 0755)) {
        fprintf(stderr, "shardbench: nightly: cannot keep this build: %s: write failed\n", path);
        sb_out_abort(out, tmp);
        path[0] = '\0';
        return -1;
    }
    if (sb_out_commit(out, tmp, path, "kept build", &err)) {
        fprintf(stderr, "shardbench: nightly: cannot keep this build: %s\n", err.msg);
        path[0] = '\0';
        return -1;
    }
    return 0;
}

/* --baseline-build auto: the kept build of the baseline night `baseline`
 * (0: none), when it kept one that is still there and runs. Returns a
 * malloc'd path or NULL, and says which on stdout. */
static char *auto_build(const char *db, int64_t baseline)
{
    if (!baseline) {
        printf("== nightly: no earlier good night: nothing to measure beside this build\n");
        return NULL;
    }
    sb_error err = {0};
    sb_dbq *q = NULL;
    char *path = NULL;
    if (sb_dbq_open(db, 0, 0, &q, &err) || sb_dbq_nightly_build(q, baseline, &path, &err)) {
        fprintf(stderr, "shardbench: nightly: %s\n", err.msg);
        path = NULL;
    }
    sb_dbq_close(q);
    if (path && access(path, X_OK) == 0) {
        printf("== nightly: A/B with the last good night's build (run %lld: %s), launch for "
               "launch\n", (long long)baseline, path);
        return path;
    }
    printf("== nightly: the last good night (run %lld) %s: compared with its stored launches "
           "and the history band\n", (long long)baseline,
           path ? "kept a build that is gone" : "kept no build");
    free(path);
    return NULL;
}

int sb_nightly(const sb_nightly_opts *o, int argc, char **argv)
{
    int64_t run = 0, baseline = o->baseline;
    char work[PATH_MAX], out[PATH_MAX], report[PATH_MAX + 16];
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    /* the name carries our pid: a later night removes it if we are killed */
    sb_clean_stale_workdirs(tmp, "shardbench-nightly-", "nightly");
    snprintf(work, sizeof work, "%s/shardbench-nightly-%ld-XXXXXX", tmp, (long)getpid());
    if (!mkdtemp(work)) {
        fprintf(stderr, "shardbench: %s: cannot create: %s\n", work, strerror(errno));
        return 2;
    }
    double t0 = sb_now();
    int status = 2;
    /* the figures' scripts found before a night of measuring, not after */
    char gpdir[PATH_MAX];
    sb_error gerr = {0};
    if (sb_plot_find_scripts(o->rule.scripts, gpdir, sizeof gpdir, &gerr)) {
        fprintf(stderr, "shardbench: nightly: %s\n", gerr.msg);
        nftw(work, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        return 2;
    }
    /* the baseline build resolved: a binary, or NULL (stored launches) */
    sb_nightly_opts ab = *o;
    int is_auto = o->baseline_build && !strcmp(o->baseline_build, "auto");
    if (o->baseline_build && (is_auto || !strcmp(o->baseline_build, "none")))
        ab.baseline_build = NULL;
    char *autopath = NULL, kept[PATH_MAX] = "";
    int found = 0;

    /* 1. the bench: trials launches per strategy, interleaved; with a
     * baseline build, launch for launch with it (A/B/A/B, the order swapped
     * every round), into a run of its own; for auto, the first round tells
     * which (the last good night is of this run's host and build options) */
    sb_bench_opts b = o->bench;
    b.trials = ab.baseline_build || is_auto ? 1 : o->trials;
    b.run_id_out = &run;
    if (!b.survivors)
        b.workdir = work; /* kept: the re-measures read the same survivors */
    printf("== nightly: bench, %d launches per strategy%s\n", o->trials,
           ab.baseline_build ? ", A/B with the baseline build" : "");
    fflush(stdout);
    int brc = sb_bench(&b, argc, argv);
    if (!run || brc == 130 || brc == 2) {
        fprintf(stderr, "shardbench: nightly: the bench failed (exit %d)\n", brc);
        goto out;
    }
    if (is_auto) {
        if ((status = find_baseline(b.db, run, &baseline)))
            goto out;
        status = 2;
        found = 1;
        ab.baseline_build = autopath = auto_build(b.db, baseline);
        fflush(stdout);
        if (!ab.baseline_build && o->trials > 1 &&
            more_rounds(o, run, o->trials - 1, NULL, work, argc, argv))
            goto out;
    }
    if (ab.baseline_build && ab_rounds(&ab, run, &baseline, work, argc, argv))
        goto out;
    if (ab.baseline_build && (status = baseline_measured(b.db, baseline, ab.baseline_build)))
        goto out;
    status = 2;
    if (o->out)
        snprintf(out, sizeof out, "%s", o->out);
    else
        snprintf(out, sizeof out, "results/nightly-%lld", (long long)run);
    if (mkdir_p(out)) {
        fprintf(stderr, "shardbench: %s: cannot create: %s\n", out, strerror(errno));
        goto out;
    }
    snprintf(report, sizeof report, "%s/report.md", out);
    if (!o->keep_builds || strcmp(o->keep_builds, "none"))
        keep_build(o->keep_builds, b.db, run, kept, sizeof kept);

    /* 2. the baseline: given, or the last good night of this machine */
    if (!found && !ab.baseline_build && (status = find_baseline(b.db, run, &baseline)))
        goto out;
    if (!baseline) {
        status = first_night(b.db, run, report, kept[0] ? kept : NULL);
        goto out;
    }
    status = 2;
    printf("== nightly: run %lld against run %lld\n", (long long)run, (long long)baseline);

    /* 3. first look; the suspects measured again */
    sb_regress_summary sum;
    sb_regress_opts r = o->rule;
    if (ab.baseline_build) {
        r.history = 0; /* A/B: both builds saw the same load; no band from other nights */
        r.whole = 1;   /* and a slowdown every strategy shares is judged over them all */
    }
    r.db = b.db;
    r.baseline = baseline;
    r.candidate = run;
    r.remeasure = 1;
    if ((status = first_look(&r, &sum)))
        goto out;
    status = 2;
    int suspects = sum.suspects;
    if (sum.suspects && o->extra > 0 && remeasure(&ab, run, baseline, &sum, work, argc, argv))
        goto out;

    /* 4. the verdict, the report, the figures */
    if ((status = verdict(&r, run, out, report, &sum, kept[0] ? kept : NULL)))
        goto out;
    printf("\nnightly: run %lld against run %lld: %d confirmed regression%s, %d improvement%s, "
           "%d suspect%s measured again; %.0f s; report %s\n",
           (long long)run, (long long)baseline, sum.regressions, sum.regressions == 1 ? "" : "s",
           sum.improvements, sum.improvements == 1 ? "" : "s", suspects,
           suspects == 1 ? "" : "s", sb_now() - t0, report);
    status = sum.regressions ? 1 : 0;
out:
    free(autopath);
    nftw(work, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    fflush(stdout);
    return status;
}
