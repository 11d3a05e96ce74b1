/* plots/nightly.c: `shardbench nightly`: the whole nightly regression check
 * in one call. Benches the current build (every strategy in several
 * launches, interleaved), holds it to the last good night (or a given run)
 * with the statistics of plots/regress.c, measures the suspects again,
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

/* The first night: nothing to compare with; a report saying so, and the
 * verdict stored so that this run is the next night's baseline. */
static int first_night(const char *db, int64_t run, const char *report)
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
    int rc = sb_dbq_open(db, 1, 0, &q, &err) || sb_dbq_record_nightly(q, run, 0, 0, 0, &err);
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
    sb_bench_opts again = o->bench;
    again.resume = run;
    again.again = 1;
    again.only = sum->suspect_list;
    again.trials = o->extra;
    again.survivors = o->bench.survivors ? o->bench.survivors : work;
    again.workdir = NULL;
    again.run_id_out = NULL;
    int arc = sb_bench(&again, argc, argv);
    if (arc == 130 || arc == 2) {
        fprintf(stderr, "shardbench: nightly: the re-measure failed (exit %d)\n", arc);
        return -1;
    }
    return 0;
}

/* The verdict: the report (written whole or not at all) with its figures in
 * `out`, the verdict stored, the report on stdout. Returns 0 or an exit
 * status. */
static int verdict(sb_regress_opts *r, int64_t run, const char *out, const char *report,
                   sb_regress_summary *sum)
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
             sb_dbq_record_nightly(q, run, r->baseline, sum->regressions, sum->improvements, &err);
    sb_dbq_close(q);
    if (rc)
        return fail(&err);
    FILE *rf = fopen(report, "r");
    if (rf) {
        char line[4096];
        while (fgets(line, sizeof line, rf))
            fputs(line, stdout);
        fclose(rf);
    }
    return 0;
}

int sb_nightly(const sb_nightly_opts *o, int argc, char **argv)
{
    int64_t run = 0, baseline = o->baseline;
    char work[PATH_MAX], out[PATH_MAX], report[PATH_MAX + 16];
    const char *tmp = getenv("TMPDIR");
    snprintf(work, sizeof work, "%s/shardbench-nightly-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(work)) {
        fprintf(stderr, "shardbench: %s: cannot create: %s\n", work, strerror(errno));
        return 2;
    }
    double t0 = sb_now();
    int status = 2;

    /* 1. the bench: trials launches per strategy, interleaved; with a
     * baseline build, launch for launch with it (A/B/A/B, the order swapped
     * every round), into a run of its own */
    sb_bench_opts b = o->bench;
    b.trials = o->baseline_build ? 1 : o->trials;
    b.run_id_out = &run;
    if (!b.survivors)
        b.workdir = work; /* kept: the re-measures read the same survivors */
    printf("== nightly: bench, %d launches per strategy%s\n", o->trials,
           o->baseline_build ? ", A/B with the baseline build" : "");
    fflush(stdout);
    int brc = sb_bench(&b, argc, argv);
    if (!run || brc == 130 || brc == 2) {
        fprintf(stderr, "shardbench: nightly: the bench failed (exit %d)\n", brc);
        goto out;
    }
    if (o->baseline_build && ab_rounds(o, run, &baseline, work, argc, argv))
        goto out;
    if (o->out)
        snprintf(out, sizeof out, "%s", o->out);
    else
        snprintf(out, sizeof out, "results/nightly-%lld", (long long)run);
    if (mkdir_p(out)) {
        fprintf(stderr, "shardbench: %s: cannot create: %s\n", out, strerror(errno));
        goto out;
    }
    snprintf(report, sizeof report, "%s/report.md", out);

    /* 2. the baseline: given, or the last good night of this machine */
    if ((status = find_baseline(b.db, run, &baseline)))
        goto out;
    if (!baseline) {
        status = first_night(b.db, run, report);
        goto out;
    }
    status = 2;
    printf("== nightly: run %lld against run %lld\n", (long long)run, (long long)baseline);

    /* 3. first look; the suspects measured again */
    sb_regress_summary sum;
    sb_regress_opts r = o->rule;
    if (o->baseline_build)
        r.history = 0; /* A/B: both builds saw the same load; no band from other nights */
    r.db = b.db;
    r.baseline = baseline;
    r.candidate = run;
    r.remeasure = 1;
    if ((status = first_look(&r, &sum)))
        goto out;
    status = 2;
    int suspects = sum.suspects;
    if (sum.suspects && o->extra > 0 && remeasure(o, run, baseline, &sum, work, argc, argv))
        goto out;

    /* 4. the verdict, the report, the figures */
    if ((status = verdict(&r, run, out, report, &sum)))
        goto out;
    printf("\nnightly: run %lld against run %lld: %d confirmed regression%s, %d improvement%s, "
           "%d suspect%s measured again; %.0f s; report %s\n",
           (long long)run, (long long)baseline, sum.regressions, sum.regressions == 1 ? "" : "s",
           sum.improvements, sum.improvements == 1 ? "" : "s", suspects,
           suspects == 1 ? "" : "s", sb_now() - t0, report);
    status = sum.regressions ? 1 : 0;
out:
    nftw(work, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    fflush(stdout);
    return status;
}
