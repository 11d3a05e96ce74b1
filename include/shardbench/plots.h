/* shardbench/plots.h: what is made from the results database after a
 * measurement: figures (plot) and tables (report). The measuring itself
 * (bench, nightly, regress, statistics) is shardbench/measure.h.
 *
 * Plain functions over plain option structs; the `shardbench` command only
 * parses options into these and prints the errors. Each reads the database
 * through query.h and returns 0 or -1 with err set (exit status err->code).
 */
#ifndef SHARDBENCH_PLOTS_H
#define SHARDBENCH_PLOTS_H

#include <stdint.h>
#include <stdio.h>

#include "shardbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* The figures of one full-space or megatron search (`plot --search
 * FILE.json`, `search --plot DIR`; plots/fig_search.c, plots/README.md):
 * OUT/memory-, steptime-, schedule- and configs-MODEL-pP.{png,svg}. A
 * figure whose field the JSON lacks fails (SB_EXIT_INPUT) naming the field. */
typedef struct {
    const char *json;    /* the search's JSON text */
    const char *source;  /* its file (messages) */
    const char *out;     /* folder of the figures (created) */
    const char *scripts; /* folder of the .gp scripts, or NULL: looked up */
    FILE *log;           /* where the files written are named; NULL: stdout */
} sb_plot_search_opts;

int sb_plot_search(const sb_plot_search_opts *o, int *figures, int *files, sb_error *err);

/* Predicted tokens per second (and MFU where the JSONs have it) against
 * devices over several searches of one model, one line per algorithm
 * (`plot --scaling FILE.json...`): OUT/scaling-MODEL.{png,svg}. */
int sb_plot_scaling(const char *const *paths, int n, const char *out, const char *scripts,
                    int *figures, int *files, sb_error *err);

/* The cost model against published runs (`validate --format json` in
 * path): predicted against published step seconds per run, log-log, y = x
 * and +-10%, MAPE and max error in the title (`plot --validate FILE.json`,
 * `validate --plot DIR`): OUT/validate.{png,svg}, each file named on log
 * (NULL: stdout). A field it needs missing: exit 2 naming it. */
int sb_plot_validate(const char *path, const char *out, const char *scripts, FILE *log,
                     int *figures, int *files, sb_error *err);

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

/* Runs plots/SCRIPT on a data file holding `data` (gnuplot variables in
 * vars, `datafile` set), into OUT/BASE.png and .svg (plots/plot.c). */
/* The folder of the gnuplot scripts into dir: `given`, else
 * $SHARDBENCH_PLOTS, else beside the binary (../plots,
 * ../share/shardbench/plots), else ./plots. -1 (SB_EXIT_INPUT) naming where
 * it looked when none holds them. */
int sb_plot_find_scripts(const char *given, char *dir, size_t n, sb_error *err);
int sb_plot_script(const char *scripts, const char *out, const char *script, const char *base,
                   const char *data, const char *vars, sb_error *err);
/* s as a gnuplot string literal. */
void sb_plot_gp_str(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif
#endif
