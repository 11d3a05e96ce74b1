/* shardbench/results.h: the SQLite results database (results/schema.sql).
 *
 * One file, WAL mode, busy timeout; the schema is versioned with
 * PRAGMA user_version and migrated forward on open. Every record is its own
 * transaction, so a crash loses nothing that was committed. A locked or
 * damaged file gives a clear error naming the file. */
#ifndef SHARDBENCH_RESULTS_H
#define SHARDBENCH_RESULTS_H

#include "shardbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_DB_DEFAULT_PATH "results/shardbench.db"
#define SB_DB_SCHEMA_VERSION 9

typedef struct sb_db sb_db;

/* Opens (creating if needed) and migrates the database at path.
 * busy_timeout_ms <= 0 means the default (5000). */
int sb_db_open(const char *path, int busy_timeout_ms, sb_db **out,
               sb_error *err);
/* sb_db_open with flags: SB_DB_ADOPT takes a version-0 SQLite file that
 * holds another program's tables (shardbench's are added beside them);
 * without it such a file is refused, left as it was. */
#define SB_DB_ADOPT 1
int sb_db_open_flags(const char *path, int busy_timeout_ms, int flags,
                     sb_db **out, sb_error *err);
void sb_db_close(sb_db *db);

/* Schema version of an open database. */
int sb_db_schema_version(sb_db *db);

/* One search (from `shardbench search` or perf/search). */
typedef struct {
    const char *source;        /* "cli" or "bench" */
    const char *model;         /* model name */
    const char *model_path;    /* file it came from */
    const char *params;        /* "batch=128,classes=1024,..." */
    int p;
    const char *algo;          /* "pase", "bf", ... */
    double tflops, gbs;        /* cost-model parameters */
    int cutoff;
    double total_cost;         /* FLOP */
    double seconds;            /* search time */
    int nops;
    int max_configs;
    int max_dep_set;
    double peak_table_bytes;
    double peak_rss_bytes;     /* 0 if not measured */
    const char *strategy_json; /* the full strategy (per-op configs) */
} sb_search_record;

/* Inserts one search run; *id (if not NULL) gets its row id. */
int sb_db_record_search(sb_db *db, const sb_search_record *rec, int64_t *id,
                        sb_error *err);

/* A run: one `shardbench run` or `bench` invocation (runs table). The git
 * commit and compiler are filled in from the build; NULL fields are stored
 * as NULL (host: gethostname() when NULL). */
typedef struct {
    const char *host;
    const char *backend;       /* "cpu", "cuda" */
    const char *devices;       /* "4 x CPU (2 cores)", "8 x NVIDIA H200" */
    const char *versions;      /* "openblas=0.3.21 mpi=4.1.4 ..." */
    const char *command_line;
    const char *git_commit;    /* NULL: this build's; else the build that ran (a baseline) */
} sb_run_meta;

int sb_db_begin_run(sb_db *db, const sb_run_meta *meta, int64_t *run_id, sb_error *err);
/* Sets ended_at of a run to now. */
int sb_db_end_run(sb_db *db, int64_t run_id, sb_error *err);

/* One measured strategy: a strategies row (reused when an identical one
 * exists for the model, p, kind and configs) and a measurements row, in one
 * transaction. */
typedef struct {
    int64_t run_id;
    const char *model, *model_path, *params;
    int nops;
    int p;
    const char *kind;              /* "pase", "dp", "file", "expert", ... */
    double predicted_cost;         /* FLOP; NaN if unknown */
    double predicted_mem_bytes;    /* <= 0 if unknown */
    const char *configs_json;      /* per-op configs */
    const char *mesh_layout;       /* NULL if none */
    double step_median_s, step_min_s, step_max_s;
    int steps;
    const char *status;            /* ok, oom, error, timeout, diverged */
    const char *message;           /* NULL when ok */
    double peak_mem_bytes;         /* largest over ranks; <= 0 if unknown */
    double probe_s;                /* run's probe (JSON probe_seconds); <= 0 if unknown */
    double predicted_s;            /* predicted step seconds; NaN under the reference model */
    double profile_probe_s;        /* the pricing profile launch's probe; <= 0 if none */
} sb_measurement_record;

int sb_db_record_measurement(sb_db *db, const sb_measurement_record *rec, int64_t *id,
                             sb_error *err);

/* Number of rows in search_runs (tests, reports). */
int sb_db_count_searches(sb_db *db, int64_t *count, sb_error *err);

#ifdef __cplusplus
}
#endif
#endif
