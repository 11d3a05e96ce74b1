/* shardbench/query.h: reading the results database back (and the two small
 * writes a bench adds to it), for `bench`, `report`, `plot` and `regress`.
 *
 * Not the recording API (that is results.h: runs, searches, measurements).
 * A query handle opens an EXISTING database file, checks it the way
 * sb_db_open does (SQLite header, quick_check, schema version not newer
 * than this build's), and never creates, migrates or repairs anything: a
 * missing, damaged, foreign or newer file is refused with a message naming
 * it. Also here: a small JSON reader (strategy JSON, `run --format json`)
 * and Spearman's rank correlation. */
#ifndef SHARDBENCH_QUERY_H
#define SHARDBENCH_QUERY_H

#include <stdarg.h>

#include "shardbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- JSON -- */

typedef enum {
    SB_JSON_NULL, SB_JSON_BOOL, SB_JSON_NUM, SB_JSON_STR, SB_JSON_ARR, SB_JSON_OBJ
} sb_json_type;

/* One JSON value. Arrays and objects hold their items as a list (child,
 * then next); an object member carries its name in key. NaN and Infinity
 * (`nan`, `inf`, `-inf`, as printf writes them) are read as numbers. */
typedef struct sb_json {
    sb_json_type type;
    double num;            /* NUM; BOOL: 0 or 1 */
    char *str;             /* STR */
    char *key;             /* member name inside an object */
    int n;                 /* ARR/OBJ: number of items */
    struct sb_json *child, *next;
} sb_json;

/* Parses text (the whole of it, up to NUL); NULL with err set on bad JSON. */
sb_json *sb_json_parse(const char *text, sb_error *err);
void sb_json_free(sb_json *j);
/* Member `key` of an object, item i of an array; NULL if absent. */
const sb_json *sb_json_get(const sb_json *obj, const char *key);
const sb_json *sb_json_at(const sb_json *arr, int i);
/* The number or string of j, or def / NULL when j is not one. */
double sb_json_num(const sb_json *j, double def);
const char *sb_json_str(const sb_json *j);

/* ------------------------------------------------------ statistics -- */

/* Spearman's rank correlation of x and y (n pairs; tied values get their
 * mean rank; rho is the Pearson correlation of the ranks). Returns 0 and
 * sets *rho, or -1 when it is undefined: n < 2, or x or y has no spread. */
int sb_spearman(const double *x, const double *y, int n, double *rho);

/* Median of n values (sorted copy; mean of the middle two when n is even). */
double sb_median(const double *v, int n);

/* ----------------------------------------------------- query handle -- */

typedef struct sb_dbq sb_dbq;

/* Opens an existing database. writable = 0: read only (SQLITE_OPEN_READONLY);
 * 1: for the writes below, and the file must already be at
 * SB_DB_SCHEMA_VERSION (open it with sb_db_open first, which migrates).
 * busy_timeout_ms <= 0: 5000. */
int sb_dbq_open(const char *path, int writable, int busy_timeout_ms, sb_dbq **out,
                sb_error *err);
void sb_dbq_close(sb_dbq *q);

const char *sb_dbq_path(const sb_dbq *q);
int sb_dbq_version(const sb_dbq *q);   /* schema version of the file */

/* Error for sqlite result rc met while `doing` ("file: database is locked
 * (...) while reading run 3"); always returns -1. */
int sb_dbq_fail(sb_dbq *q, int rc, const char *doing, sb_error *err);

/* 0 if run_id is a row of runs; -1 with "FILE: no run with id N" otherwise. */
int sb_dbq_check_run(sb_dbq *q, int64_t run_id, sb_error *err);

/* ------------------------------------------------- a run's results -- */

/* One measurement of a run, with its strategy and model. */
typedef struct {
    int64_t measurement_id, strategy_id, model_id;
    char model[64];
    char params[512];
    int p;
    char kind[32];
    double predicted_cost;          /* NaN if unknown */
    char status[8];                 /* ok, oom, error, timeout */
    double median, min, max;        /* seconds; NaN unless ok */
    int steps;
    double peak_mem_bytes;          /* NaN if unknown */
    char message[256];              /* "" if none */
    double probe_s;                 /* the launch's probe seconds; NaN if unknown */
    double predicted_s;             /* predicted step seconds; NaN if unknown */
    double profile_probe_s;         /* the pricing profile launch's probe; NaN if unknown */
} sb_qmeas;

/* Every measurement of run_id, ordered by model name, params, p, kind,
 * strategy, measurement. *rows is malloc'd (free it); *n may be 0. */
int sb_dbq_run_measurements(sb_dbq *q, int64_t run_id, sb_qmeas **rows, int *n,
                            sb_error *err);

/* Whether DP is this kind: "dp", "data", "data-parallel", "data_parallel". */
int sb_kind_is_data_parallel(const char *kind);

/* Per (model, p, kind) of a run: the best (least median) ok strategy, and
 * the speedup of that over the best data-parallel strategy of the same
 * (model, p) (NaN when either is missing). */
typedef struct {
    int64_t model_id;
    char model[64];
    char params[512];
    int p;
    char kind[32];
    int strategies, failed;         /* distinct strategies tried; attempts not ok */
    int64_t best_strategy_id;       /* 0 if none ok */
    double best_median, best_min;   /* NaN if none ok */
    double dp_median;               /* best data-parallel median, NaN if none */
    double speedup;                 /* dp_median / best_median */
} sb_qkind;

/* Groups rows (as sb_dbq_run_measurements gives them) by (model, p, kind). */
int sb_q_kinds(const sb_qmeas *rows, int n, sb_qkind **out, int *nout, sb_error *err);

/* Cost-model fidelity of one (model, p) of a run. */
typedef struct {
    int64_t model_id;
    char model[64];
    char params[512];
    int p;
    int n;            /* strategies ranked */
    double rho;       /* NaN when undefined */
    int stored;       /* 1: read from the correlations table; 0: computed now */
    /* |predicted - measured| / measured seconds over the strategies with a
     * predicted time (a calibrated or machine cost model): the mean (MAPE)
     * and the largest; NaN when none has one (the reference model). */
    double mape, max_error;
    int timed;        /* strategies with a predicted time */
    /* the same with each prediction scaled to the machine's speed at its
     * measurement: predicted_s x probe_s / profile_probe_s (schema 9), over
     * the strategies that have both probes (probed; 0: NaN here), rho
     * computed now */
    double rho_probe, mape_probe, max_error_probe;
    int probed;
    /* the predicted best against the fastest: of the strategies with the
     * least predicted cost (best_tied of them: equal costs, such as pase
     * and dp when they are one strategy), the least median (best_median,
     * best_kind); the least median of all (fastest_median, fastest_kind);
     * best_gap = best_median / fastest_median - 1 (0: measured fastest;
     * NaN: no point) */
    char best_kind[32], fastest_kind[32];
    double best_median, fastest_median, best_gap;
    int best_tied;
} sb_qfidelity;

/* Spearman's rho of predicted cost against measured median over the ok
 * strategies of each (model, p) of rows (one point per strategy: its least
 * median). Fills x/y of one group: see sb_q_points. */
int sb_q_fidelity(sb_dbq *q, int64_t run_id, const sb_qmeas *rows, int n,
                  sb_qfidelity **out, int *nout, sb_error *err);

/* The points of one (model_id, p) of rows: predicted cost, least median and
 * the row index of the strategy, one per distinct ok strategy with a known
 * predicted cost. x, y, idx must hold n entries; returns the count. */
int sb_q_points(const sb_qmeas *rows, int n, int64_t model_id, int p, double *x, double *y,
                int *idx);

/* ------------------------------------------ binding, named reads -- */


/* Whether run_id already holds a measurement of this strategy (model name
 * and params, p, kind, configs JSON) or a search of (model, params, p,
 * algo): 1 yes, 0 no, -1 error. What `bench --resume` skips. */
int sb_dbq_run_has_measurement(sb_dbq *q, int64_t run_id, const char *model, const char *params,
                               int p, const char *kind, const char *configs_json, sb_error *err);
/* Nightly: ended runs before run `before` on its host that no nightly
 * found a confirmed regression in, newest first (at most max): a series'
 * history. */
int sb_dbq_history_runs(sb_dbq *q, int64_t before, int64_t *ids, int max, int *n, sb_error *err);
/* The latest nightly run before cand with no confirmed regression, of the
 * same host, compiler, backend and devices: 1 (*id set), 0 none, -1. */
int sb_dbq_last_good_nightly(sb_dbq *q, int64_t cand, int64_t *id, sb_error *err);
/* Stores (or replaces) a nightly's verdict, with the path of the copy of
 * its binary (NULL: none kept); needs a writable handle. */
int sb_dbq_record_nightly(sb_dbq *q, int64_t run_id, int64_t baseline, int regressions,
                          int improvements, const char *build_path, sb_error *err);
/* The kept binary of nightly run `run` (malloc'd into *path, NULL when none
 * was kept or the schema predates kept builds): 0, or -1 (err set). */
int sb_dbq_nightly_build(sb_dbq *q, int64_t run, char **path, sb_error *err);
struct sb_profile_s; /* shardbench/profile.h */
/* The predictive cost model's profiles (shardbench/profile.h; schema 7).
 * Stores pf whole (one transaction; a writable handle): its fits, every op
 * entry and collective figure, under a new profiles row (*id). */
int sb_dbq_record_profile(sb_dbq *q, const struct sb_profile_s *pf, const char *model,
                          const char *params, int strategies, int steps, const char *command_line,
                          int64_t *id, sb_error *err);
/* Reads the profile of (backend, machine, ranks): the newest entry of every
 * op key and collective, the fits of the newest profile of `model` with
 * `params` if there is one, else of the newest. *found 0 (pf empty) when
 * there is none, or the schema predates profiles. */
int sb_dbq_load_profile(sb_dbq *q, const char *backend, const char *machine, int ranks,
                        const char *model, const char *params, struct sb_profile_s *pf,
                        int *found, sb_error *err);
int sb_dbq_run_has_search(sb_dbq *q, int64_t run_id, const char *model, const char *params, int p,
                          const char *algo, sb_error *err);

/* A runs row as text: started_at, ended_at (or "not ended (died, or still
 * running)"), host, git_commit, compiler, backend, devices, versions,
 * command_line ("" when NULL); malloc'd, free with sb_qrun_free. "FILE: no
 * run with id N" (exit 2) when there is none. */
typedef struct {
    char *field[9];
} sb_qrun;
int sb_dbq_run_info(sb_dbq *q, int64_t run_id, sb_qrun *out, sb_error *err);
void sb_qrun_free(sb_qrun *r);

/* Per (model, p) the run measured or searched, per algorithm: the run's own
 * search (mine = 1), else the latest recorded one. Ordered by model name,
 * params, p, algo; *out malloc'd. */
typedef struct {
    char model[64];
    char params[512];
    int p;
    char algo[64];
    double seconds, total_cost;   /* NaN if NULL */
    int mine, max_dep_set;
    double peak_table_bytes;      /* NaN if NULL */
} sb_qsearch;
int sb_dbq_run_searches(sb_dbq *q, int64_t run_id, sb_qsearch **out, int *n, sb_error *err);

/* The search time per (algo, p) of one model at the device counts the run
 * used: the run's own search, else the latest recorded. By algo, p. */
typedef struct {
    char algo[64];
    int p;
    double seconds;
} sb_qsearch_time;
int sb_dbq_search_times(sb_dbq *q, int64_t run_id, int64_t model_id, sb_qsearch_time **out,
                        int *n, sb_error *err);

/* Best ok median step time per (run, kind) of (model_id, p) over the runs
 * up to upto_run, by kind then run; commit is the first 8 characters. */
typedef struct {
    int64_t run;
    char commit[16];
    char kind[64];
    double median;
} sb_qtrend;
int sb_dbq_trend(sb_dbq *q, int64_t model_id, int p, int64_t upto_run, sb_qtrend **out, int *n,
                 sb_error *err);

/* A strategies row: its configs JSON (malloc'd), model_id and p (either
 * may be NULL). 1 found, 0 no such row, -1 error (doing names the read). */
int sb_dbq_strategy(sb_dbq *q, int64_t strategy_id, const char *doing, int64_t *model_id, int *p,
                    char **configs_json, sb_error *err);
/* The strategy JSON (malloc'd) and algo of the search of (model_id, p)
 * that a report shows when nothing was measured: one of prefer_run first,
 * then pase, then the latest. 1 found, 0 none, -1 error. */
int sb_dbq_search_strategy(sb_dbq *q, int64_t model_id, int p, int64_t prefer_run, char **json,
                           char *algo, size_t nalgo, sb_error *err);

/* ------------------------------------------------------------ writes -- */

/* Stores (or replaces) the correlation of (run, model, p); rho NaN = NULL.
 * One transaction. The model is named by its (name, params) row. */
int sb_dbq_record_correlation(sb_dbq *q, int64_t run_id, const char *model,
                              const char *params, int p, int n, double rho, sb_error *err);

/* Prices the strategy of measurement meas_id (of run_id) again: its
 * strategies row gets predicted_cost = cost (and the total_cost and
 * predicted_step_seconds of its configs JSON, where it has them), and every
 * measurement of that strategy in run_id predicted_s = seconds (NaN: NULL)
 * and profile_probe_s = profile_probe_s (the pricing profile launch's
 * probe; <= 0: NULL).
 * A strategies row that measurements of other runs share is copied first
 * and this run's measurements moved to the copy, so that the other runs'
 * predictions stay as they were. One transaction. */
int sb_dbq_reprice(sb_dbq *q, int64_t run_id, int64_t meas_id, double cost, double seconds,
                   double profile_probe_s, sb_error *err);

/* Sets search_runs.run_id of one search row (a bench's own searches). */
int sb_dbq_link_search(sb_dbq *q, int64_t search_id, int64_t run_id, sb_error *err);

#ifdef __cplusplus
}
#endif
#endif
