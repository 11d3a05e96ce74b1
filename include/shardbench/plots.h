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
    sb_bench_set set[SB_BENCH_MAX_SET];
    int nset;
    int ps[SB_BENCH_MAX_P], np;
    int steps, warmup, top;
    double within, timeout;  /* prune's factor; seconds per strategy */
    int64_t resume;          /* run id to continue, or 0 */
    int adopt_db;            /* --adopt-db: take an SQLite file of another program */
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

/* ----------------------------------------------------------- regress -- */

typedef struct {
    const char *db;
    int64_t baseline, candidate;
    double threshold;  /* relative slowdown that counts (0.05) */
} sb_regress_opts;

/* Prints the Markdown comparison; returns 1 on a confirmed regression, 0
 * when none, -1 (err set) when the runs cannot be compared. */
int sb_regress(const sb_regress_opts *o, sb_error *err);

#ifdef __cplusplus
}
#endif
#endif
