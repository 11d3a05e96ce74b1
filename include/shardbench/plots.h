/* shardbench/plots.h: the last stage: measuring survivors under one run id
 * (bench), and what is made from the results database afterwards: figures
 * (plot), tables (report) and the comparison of two runs (regress).
 *
 * Plain functions over plain option structs; the `shardbench` command only
 * parses options into these and prints the errors. Each writes its output
 * (progress lines, tables, Markdown) to stdout as the command always has,
 * reads the database through query.h, and returns 0 or -1 with err set
 * (exit status err->code), except where said. */
#ifndef SHARDBENCH_PLOTS_H
#define SHARDBENCH_PLOTS_H

#include <stdint.h>
#include <stdio.h>

#include "shardbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- bench -- */

#define SB_BENCH_MAX_SET 64
#define SB_BENCH_MAX_P 32

/* One --set [MODEL:]NAME=VALUE. */
typedef struct {
    char model[128]; /* "" for every model, else the one it applies to */
    char arg[256];   /* NAME=VALUE */
} sb_bench_set;

typedef struct {
    const char *models;      /* "alexnet,rnnlm" (names or files) */
    const char *backend;     /* passed to run: "cpu", "cuda" */
    const char *db;          /* results database (required) */
    const char *launcher;    /* NULL: mpirun --oversubscribe --bind-to none [--allow-run-as-root] */
    const char *survivors;   /* DIR holding MODEL-pP/index.tsv, or NULL: run prune */
    const char *workdir;     /* where prune writes, or NULL: a temporary folder */
    const char *algos;       /* searches timed per (model, P): "pase,bf" or "none" */
    const char *calibration; /* cost-model file, or NULL: the reference model */
    const char *machine;     /* machine NAME|FILE (docs/machines.md), or NULL */
    sb_bench_set set[SB_BENCH_MAX_SET];
    int nset;
    int ps[SB_BENCH_MAX_P], np;
    int steps, warmup, top;
    double within, timeout;  /* prune's factor; seconds per strategy */
    int64_t resume;          /* run id to continue, or 0 */
    int adopt_db;            /* --adopt-db: take an SQLite file of another program */
    int trials;              /* launches per strategy, each its own measurement (default 1),
                                interleaved: trial t of every strategy before trial t+1 */
    int again;               /* with resume: measure again what the run holds (more trials) */
    const char *only;        /* NULL, or "MODEL/P/KIND,..." : measure only these survivors */
    int paper;               /* 1: add the paper's Table II strategy (kind "paper",
                                paper.h) for the models it has */
    int64_t *run_id_out;     /* NULL, or where the run id goes once the run is open */
    const char *runner;      /* NULL, or the shardbench binary that trains the strategies
                                (another build: nightly's A/B baseline); prune stays ours */
} sb_bench_opts;

/* Defaults of every field `shardbench bench` leaves unset. */
void sb_bench_opts_default(sb_bench_opts *o);

/* The bench: for each model and P, survivors (prune as a subprocess),
 * timed searches, each survivor trained (LAUNCHER -np P shardbench run) and
 * recorded, then Spearman's rho. argc/argv: the command line stored with
 * the run. Returns the exit status (0; 1 when a pair could not be benched
 * or on an internal error; 2 on bad input; 130 when interrupted), having
 * printed its errors ("shardbench: ..." on stderr). */
int sb_bench(const sb_bench_opts *o, int argc, char **argv);

/* -------------------------------------------------------------- plot -- */

typedef struct {
    const char *db;       /* results database */
    int64_t run;
    const char *out;      /* folder of the figures (created) */
    const char *scripts;  /* folder of the .gp scripts, or NULL: looked up */
} sb_plot_opts;

/* Every figure of the run as OUT/NAME.png and .svg (plots/README.md);
 * *figures and *files (may be NULL) get the counts. */
int sb_plot(const sb_plot_opts *o, int *figures, int *files, sb_error *err);

/* ------------------------------------------------------------ report -- */

typedef struct {
    const char *db;
    int64_t run;
    int p;             /* device count of the strategy table; 0: the largest */
    int csv;           /* CSV instead of Markdown */
    const char *only;  /* one table (search, strategies, speedup, fidelity,
                          measurements) or NULL: all */
} sb_report_opts;

int sb_report(const sb_report_opts *o, sb_error *err);

/* Text from the database (a model name, a kind, a message) written as
 * Markdown that stays one table cell or list item: '\\', '`', '|', '*',
 * '<' backslash-escaped, line breaks and tabs made blanks. */
void sb_md_text(FILE *f, const char *s);

/* -------------------------------------------------------- statistics -- */

/* How regress and nightly judge a strategy (plots/stats.c). Samples are one
 * number per launch (its median step time). With b the baseline's samples,
 * c the candidate's, ratio = median(c) / median(b), [lo, hi] its percentile
 * bootstrap interval at conf, p the one-sided Mann-Whitney U p-value (exact
 * without ties) and thr = max(threshold, band of the series' history):
 * regression when ratio > 1 + thr and lo > 1 and p(c slower) < alpha;
 * improvement when ratio < 1 / (1 + thr) and hi < 1 and p(c faster) < alpha;
 * not enough data when either side has fewer than min_n samples; else
 * within noise. */
typedef struct {
    double threshold; /* least relative change that counts (0.05) */
    double conf;      /* bootstrap interval's confidence (0.95) */
    double alpha;     /* Mann-Whitney level, one-sided (0.05) */
    int min_n;        /* least launches per side (3) */
    int boot;         /* bootstrap resamples (2000) */
    uint64_t seed;    /* of the resampling: verdicts are reproducible */
} sb_stat_rule;

enum { SB_VERDICT_NOT_ENOUGH, SB_VERDICT_NOISE, SB_VERDICT_REGRESSION, SB_VERDICT_IMPROVEMENT };

typedef struct {
    int nb, nc;
    double ratio, lo, hi;        /* NaN when not computed */
    double p_slower, p_faster;
    double band;                 /* history's relative band, NaN when too short */
    double thr;                  /* the threshold applied */
    int verdict;                 /* SB_VERDICT_* */
} sb_stat_cmp;

void sb_stat_rule_default(sb_stat_rule *r);
const char *sb_stat_verdict_name(int v);
/* Judges c against b as said above; returns and stores the verdict. */
int sb_stat_compare(const sb_stat_rule *r, const double *b, int nb, const double *c, int nc,
                    double band, sb_stat_cmp *out);
double sb_stat_median(const double *x, int n);
/* One-sided Mann-Whitney U: the p-value of "y tends to be greater than x". */
double sb_stat_mwu_greater(const double *x, int nx, const double *y, int ny);
/* Percentile bootstrap interval of median(c) / median(b). */
int sb_stat_boot_ratio(const double *b, int nb, const double *c, int nc, double conf, int reps,
                       uint64_t seed, double *lo, double *hi);
/* Relative noise band of a series from its nights' medians: 2 x 1.4826 x
 * the median absolute relative deviation (about two standard deviations);
 * NaN with fewer than 3 nights. */
double sb_stat_band(const double *nights, int n);
/* splitmix64 and a draw in [0, n). */
uint64_t sb_stat_rand(uint64_t *s);
int sb_stat_randint(uint64_t *s, int n);

/* ----------------------------------------------------------- regress -- */

/* What a comparison found (regress, nightly). */
typedef struct {
    int regressions;       /* confirmed: slower, or now failing */
    int improvements, noise, not_enough, other;
    int suspects;          /* looked slower at first, to be measured again */
    char suspect_list[4096]; /* "MODEL/P/KIND,..." of the suspects (bench's `only`) */
} sb_regress_summary;

typedef struct {
    const char *db;
    int64_t baseline, candidate;
    double threshold;  /* relative slowdown that counts (0.05) */
    double conf, alpha; /* 0: the defaults of sb_stat_rule_default */
    int min_n;         /* 0: the default (3) */
    int history;       /* earlier runs read for each series' band (0: none) */
    int remeasure;     /* 1: a regression is a suspect until launches measured again
                          (the candidate's measurements with an id above first_last) show
                          it on their own too; 0: every launch at once, no re-measure step */
    int64_t first_last; /* the last measurement id of the first look */
    FILE *out;         /* the Markdown (NULL: stdout) */
    const char *figures; /* NULL, or a folder for one trend figure per strategy */
    const char *scripts; /* gnuplot scripts folder, or NULL: looked up */
    sb_regress_summary *sum; /* NULL, or filled */
    int raw;           /* 1: plain step times; 0 (default): each launch's median divided
                          by its probe (`run`'s fixed work, measurements.probe_s) times
                          the baseline's median probe, when every launch compared has one */
} sb_regress_opts;

/* Prints the Markdown comparison (every strategy: launches per side, ratio
 * of medians with its interval, p-value, band, verdict); returns 1 on a
 * confirmed regression, 0 when none, -1 (err set) when the runs cannot be
 * compared. */
int sb_regress(const sb_regress_opts *o, sb_error *err);

/* ----------------------------------------------------------- nightly -- */

typedef struct {
    sb_bench_opts bench;   /* what is benched (db, models, ps, sets, steps, ...) */
    int64_t baseline;      /* a run id, or 0: the last good night (auto) */
    const char *baseline_build; /* NULL, or a shardbench binary of the baseline: measured
                                   now, launch for launch with this build (A/B/A/B) */
    int trials;            /* launches per strategy (default 5) */
    int extra;             /* launches more for each suspect (default 6) */
    const char *out;       /* report folder, or NULL: results/nightly-RUN */
    sb_regress_opts rule;  /* threshold, conf, alpha, history (db, runs: set here) */
} sb_nightly_opts;

void sb_nightly_opts_default(sb_nightly_opts *o);
/* Benches, compares with the baseline, re-measures suspects, writes
 * OUT/report.md and the figures, stores the verdict. Returns the exit
 * status: 0 no confirmed regression, 1 confirmed regression, 2 cannot
 * (printed on stderr). argc/argv: stored as the run's command line. */
int sb_nightly(const sb_nightly_opts *o, int argc, char **argv);

/* Runs plots/SCRIPT on a data file holding `data` (gnuplot variables in
 * vars, `datafile` set), into OUT/BASE.png and .svg (plots/plot.c). */
int sb_plot_script(const char *scripts, const char *out, const char *script, const char *base,
                   const char *data, const char *vars, sb_error *err);
/* s as a gnuplot string literal. */
void sb_plot_gp_str(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif
#endif
