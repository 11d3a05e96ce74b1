/* plots/figs.h: what the figure code of plots/ shares (internal): the
 * gnuplot runner of plot.c, and the one order and palette numbering of
 * series (style.c). The palette itself (colours, markers) is in
 * plots/terminal.gp; a figure's series get their numbers here. */
#ifndef SB_PLOTS_FIGS_H
#define SB_PLOTS_FIGS_H

#include <limits.h>
#include <stdio.h>

#include "shardbench/common.h"
#include "shardbench/query.h"

typedef struct {
    sb_dbq *q;          /* NULL for figures from JSON */
    int64_t run;
    const char *out;
    char scripts[PATH_MAX];
    char tmp[PATH_MAX]; /* the temporary folder of the data files ("" before) */
    int figures, files;
    FILE *log;          /* where each file written is named; NULL: stdout */
} plotter;

/* The scripts folder (`given`, else $SHARDBENCH_PLOTS, ...: plots/README.md),
 * OUT created, a temporary folder made: 0, or -1 with err set. */
int sb_plotter_open(plotter *pl, const char *scripts, const char *out, sb_error *err);
/* Removes the temporary folder. */
void sb_plotter_close(plotter *pl);
/* TMP/NAME.tsv opened for writing (its path in path), or NULL with err set. */
FILE *sb_plot_data_file(plotter *pl, const char *name, char *path, size_t n, sb_error *err);
/* Runs gnuplot on SCRIPT with `vars` (gnuplot statements), for PNG and SVG,
 * into OUT/BASE.png and .svg (each through a temporary file renamed into
 * place); prints each file's path. */
int sb_plot_gnuplot(plotter *pl, const char *script, const char *base, const char *vars,
                    sb_error *err);
/* A safe file-name or key piece: letters, digits, '-', '_', '.'; others '_'. */
void sb_plot_safe_name(const char *s, char *out, size_t n);

/* ---- series: names in one fixed order, each with its palette number ---- */

#define SB_SERIES_MAX 256

typedef struct {
    char name[SB_SERIES_MAX][64]; /* safe names (sb_plot_safe_name) */
    int color[SB_SERIES_MAX];     /* palette number (1-based: sb_lc(i), sb_pt(i)) */
    int n;
} sb_series;

/* The family of a strategy kind: 1 baselines (data parallel, expert, mcmc,
 * paper, megatron), 2 candidates (pase, bf, candN: what the search and
 * prune put forward, and any other name), 3 random (randN). */
int sb_kind_family(const char *kind);
/* The fixed order of kinds and algorithms in every legend: data parallel,
 * expert, mcmc, paper, megatron, pase, bf, cand1, cand2, ..., other names,
 * rand1, rand2, ... (a trailing number compared as a number). strcmp-like. */
int sb_kind_cmp(const char *a, const char *b);
/* Adds name (made safe; once). -1 (err set) past SB_SERIES_MAX. */
int sb_series_add(sb_series *s, const char *name, sb_error *err);
/* Sorts by sb_kind_cmp and numbers them 1..n in that order. */
void sb_series_sort(sb_series *s);
/* The palette number of name (safe or not) in s, or 0 when absent. */
int sb_series_color(const sb_series *s, const char *name);
/* sub's names in s's order, each numbered as in s (every name of sub must be
 * in s: those absent get s->n + 1, ...). */
void sb_series_within(sb_series *sub, const sb_series *s);
/* "name1 name2 ..." and "c1 c2 ..." into malloc'd strings; -1 when out of
 * memory (err set). */
int sb_series_words(const sb_series *s, char **names, char **colors, sb_error *err);

/* gnuplot statements "datafile='PATH'; KEY='NAMES'; colors='C1 C2';
 * ttl='TITLE'" then extra; malloc'd, NULL with err set. */
char *sb_series_vars(const char *path, const char *key, const sb_series *s, const char *title,
                     const char *extra, sb_error *err);

/* ---- a strategy's ops grouped as the paper's Table II (layers.c) ---- */

/* One row: ops with the same type, iteration dims and config that are one
 * op repeated over consecutive layers (names PRE/B.N/REST with N = k, k+1,
 * ...: "x.1/a/qkv" .. "x.6/a/qkv" is "x.1 … x.6 / a / qkv"), or else
 * consecutive ops ("fc6 .. fc7 (2)"); a single op keeps its name. */
typedef struct {
    char label[192];
    char type[40];
    char dims[256];  /* "batch,seq,embed" */
    char cfg[256];   /* "4,1,1" */
    int first;       /* its first op (index into ops) */
    int count;       /* ops in the row */
    int layered;     /* 1: a layer group */
    int stage;       /* the stage of its first op (the op's "stage"; 0 without) */
} sb_layer_row;

/* The rows of a strategy JSON's "ops" array (each {name, type, dims:
 * [{name}], config: [..]}), in the order of their first op. *rows
 * malloc'd; -1 with err set when ops is not such an array. */
int sb_layer_rows(const sb_json *ops, sb_layer_row **rows, int *n, sb_error *err);

/* ---- a pipeline schedule simulated over one step (schedule_sim.c) ---- */

enum { SB_SCHED_GPIPE = 0, SB_SCHED_1F1B = 1 }; /* 1F1B with VPP > 1: interleaved */

/* Start times of every forward and backward of every micro-batch on each of
 * the PP VPP virtual stages (tf, tb: V x M, row-major; virtual stage v =
 * k PP + r is chunk k of rank r), given each virtual stage's forward and
 * backward seconds per micro-batch (fw, bw: V). Returns the step's end, NAN
 * when out of memory or the schedule deadlocks (GPipe needs VPP = 1; the
 * interleaved order needs M a multiple of PP). */
double sb_sched_simulate(int pp, int vpp, int M, int kind, const double *fw, const double *bw,
                         double *tf, double *tb);

#endif
