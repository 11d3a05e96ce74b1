/* shardbench/measure.h: the measurement stage: measuring survivors under
 * one run id (bench), the nightly A/B check (nightly), the comparison of two
 * runs (regress) and the statistics they share (measure/stats.c).
 *
 * Plain functions over plain option structs; the `shardbench` command only
 * parses options into these and prints the errors. Each writes its output
 * (progress lines, tables, Markdown) to stdout, reads the database through
 * query.h, and returns 0 or -1 with err set (exit status err->code), except
 * where said. */
#ifndef SHARDBENCH_MEASURE_H
#define SHARDBENCH_MEASURE_H

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
    const char *precision;   /* --precision NAME, or NULL: the machine file's */
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
    int random;              /* random valid strategies added per (model, P > 1), kinds
                                rand1.. (--random N; seeded by random_seed) */
    uint64_t random_seed;
    int profile;             /* with machine: launches of `shardbench profile` per (model,
                                P) before its bench (--profile N; 0: none) */
    int64_t *run_id_out;     /* NULL, or where the run id goes once the run is open */
    const char *runner;      /* NULL, or the shardbench binary that trains the strategies
                                (another build: nightly's A/B baseline); prune stays ours */
    int retries;             /* a launch beside other processes' work (over other_cores
                                busy cores not its own): profile launches run again, and
                                strategies with no trial free of it get another round, up to
                                this many times (--retries N, default 0: never; the
                                main job: 2) */
    double other_cores;      /* the threshold of that (--other-cores X, default 0.25) */
    int yield_idle;          /* 1: the launches get OMPI_MCA_mpi_yield_when_idle=1 unless
                                the environment sets it (--yield-when-idle,
                                sb_bench_idle_env); 0: OpenMPI's own choice (a waiting rank
                                yields only with more ranks than cores) */
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

/* The bench's view of the machine around each launch (plots/bench.c).
 *
 * sb_proc_stat_busy: the busy seconds in the first line of /proc/stat
 * ("cpu  user nice system idle iowait irq softirq steal ..." in ticks of hz
 * per second): user + nice + system + irq + softirq + steal (every CPU's
 * time not idle, not waiting on I/O; steal: a VM's CPU taken by the host).
 * 0, or -1 when the line is not such a line.
 *
 * sb_bench_other_cores: the cores that processes outside a launch kept busy
 * during it: the machine's busy seconds over the launch (busy1 - busy0) less
 * the CPU seconds of the launch's own processes (own_cpu_s: the launcher and
 * its ranks, getrusage of the children), over the launch's wall seconds;
 * never below 0; NaN when wall_s <= 0 or an input is not finite.
 *
 * sb_bench_retry_pick: of n strategies, those that get another trial round:
 * not skipped, at least one trial ok, and none of those ok trials free of
 * other work (clean[i] == 0). pick[i] = 1 for them; returns their count.
 *
 * sb_bench_idle_env: when yield_idle, sets OMPI_MCA_mpi_yield_when_idle=1
 * in the environment (the bench's launches inherit it) when the
 * environment does not set it already; returns 1 when it set it. An MPI
 * rank waiting on another then gives its core up between polls instead of
 * spinning on it: OpenMPI does so by itself only with more ranks than
 * cores, and a rank that spins on a core that another process shares takes
 * the core from it (docs/cost-measured.md, "Launches beside other work"). */
int sb_proc_stat_busy(const char *line, double hz, double *busy_s);
double sb_bench_other_cores(double busy0, double busy1, double own_cpu_s, double wall_s);
int sb_bench_retry_pick(int n, const int *skip, const int *ok, const int *clean, int *pick);
int sb_bench_idle_env(int yield_idle);

/* The binding the bench's default launcher gives a launch of p ranks on a
 * node of cpus CPUs (its words into words[0..4), returns their count):
 * p <= cpus: "--bind-to none" (unbound ranks: each runs its share of the
 * cores in threads, shardbench/cpuset.h); p > cpus: "--map-by core
 * --bind-to core:overload-allowed" (rank r on core r mod cores, held
 * there). Unbound ranks that outnumber the cores pair up on them as the
 * scheduler places them, launch by launch: an op split over 2 of 4 ranks
 * on 2 cores ran at full speed when its ranks had a core each and at half
 * when they shared one, so a strategy's step moved by up to 2x from one
 * launch to the next, and the profile's figures with it
 * (docs/cost-measured.md, "Ranks that outnumber the cores"). */
int sb_bench_binding(int p, int cpus, const char **words);

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
/* The first look of a night at a family of m strategies (regress,
 * nightly, perf/regress: one rule, one place). Each c[i] comes from
 * sb_stat_compare; its verdict is set again with alpha controlled over the
 * family by the Benjamini-Hochberg step-up rule (each direction apart): the
 * i-th smallest of the k p-values compared passes when some j >= i has
 * p_(j) <= j alpha / k. When no strategy changed (a build against itself)
 * the chance that any is called changed stays at most alpha, as with
 * Bonferroni (alpha / k each), but a change that many strategies share,
 * the usual kind, is seen with far fewer launches: with 5 launches a side
 * the least one-sided Mann-Whitney p is 1 / 252 = 0.004, above Bonferroni's
 * 0.05 / 23 for the nightly's 23 strategies, so no strategy could ever be
 * a suspect. Returns the number of regressions. */
int sb_stat_family(const sb_stat_rule *r, sb_stat_cmp *c, int m);
/* The build as a whole (regress, nightly, perf/regress): over the m
 * strategies judged, b[i] and c[i] their baseline and candidate launches,
 * ratio = exp(median_i log(median(c[i]) / median(b[i]))), the typical
 * strategy's change, with a percentile bootstrap interval at r->conf (each
 * strategy's launches resampled on both sides, the strategies kept: they
 * are the family, not a sample of one). thr = max(r->threshold, band):
 * band the history's band of the same pooled ratio night by night
 * (sb_stat_pooled_band; NaN: none, as in A/B nights). Regression: ratio >
 * 1 + thr and interval above 1; improvement the other way; fewer than 3
 * strategies with min_n launches a side: not enough data. A slowdown that
 * every strategy shares (one kernel slower in every step) moves the pooled
 * ratio by as much as each strategy's but with the noise of 23 of them
 * averaged out. Sets out (nb, nc: strategies, launches are per strategy)
 * and returns its verdict. */
int sb_stat_pooled(const sb_stat_rule *r, int m, const double *const *b, const int *nb,
                   const double *const *c, const int *nc, double band, sb_stat_cmp *out);
/* The band of the pooled ratio over history nights: night[i][k] the median
 * of strategy i in history night k (NaN: not measured that night), k <
 * nights; each night's index is exp(median_i log(night[i][k] / median_k
 * night[i][k])), and the band is sb_stat_band of the indices. */
double sb_stat_pooled_band(int m, const double *const *night, int nights);
/* The probe cut of a comparison: PROBE_CUT (1.5) times the median of the
 * launches' probes (`run`'s fixed work timed beside every step) when every
 * one has a probe, else 0 (no cut). A launch whose probe is over the cut
 * ran on a busier machine than the others and is set aside. */
#define SB_STAT_PROBE_CUT 1.5
double sb_stat_probe_cut(const double *probe, int n);
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
    int regressions;       /* confirmed: slower, or now failing (the whole build: one) */
    int whole;             /* the whole build: 1 confirmed slower, 0 not, -1 not judged */
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
    int whole;         /* 1: the build as a whole judged too (sb_stat_pooled; for runs
                          measured launch for launch, A/B: nightly sets it there); with
                          remeasure, a whole-build slowdown makes every strategy that
                          looked slower a suspect, and it is confirmed only when their
                          re-measures, pooled, show it too */
    int raw;           /* 1: every launch kept; 0 (default): launches over the probe cut
                          (sb_stat_probe_cut) set aside */
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
    const char *baseline_build; /* a shardbench binary of the baseline: measured now,
                                   launch for launch with this build (A/B/A/B); "auto"
                                   (default): the last good night's kept build when it
                                   kept one, else its stored launches; NULL or "none":
                                   the stored launches */
    const char *keep_builds; /* folder for a copy of this binary (DIR/DB-run-N/shardbench,
                                DB the database's file name without .db), recorded with
                                the verdict; NULL: nightly-builds beside the database;
                                "none": not kept */
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

#ifdef __cplusplus
}
#endif
#endif
