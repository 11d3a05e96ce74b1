/* results/queries.c: the named reads of the bench stage (query.h): every
 * SQL statement that `bench`, `report`, `plot` and `regress` run, each
 * behind a function that returns plain rows, bound through the binder of
 * query.c (sb_dbq_bindv). */
#define _GNU_SOURCE
#include "dbq_int.h"
#include "shardbench/query.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

/* count(*) of a statement (bound by types): 1 when > 0, 0, or -1. */
static int exists(sb_dbq *q, const char *sql, const char *doing, sb_error *err,
                  const char *types, ...)
{
    sqlite3_stmt *st;
    va_list ap;
    va_start(ap, types);
    int rc = sb_dbq_queryv(q, sql, &st, doing, err, types, ap);
    va_end(ap);
    if (rc)
        return -1;
    if (sb_dbq_step(q, st, doing, err) < 0)
        return -1;
    int n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n > 0;
}

int sb_dbq_run_has_measurement(sb_dbq *q, int64_t run_id, const char *model, const char *params,
                               int p, const char *kind, const char *configs_json, sb_error *err)
{
    return exists(q,
                  "SELECT count(*) FROM measurements x "
                  "JOIN strategies s ON s.id = x.strategy_id "
                  "JOIN models m ON m.id = s.model_id WHERE x.run_id = ?1 AND "
                  "m.name = ?2 AND m.params = ?3 AND s.p = ?4 AND s.kind = ?5 AND "
                  "s.configs_json = ?6",
                  "looking up what the resumed run measured", err, "Ittitt", run_id, model,
                  params, p, kind, configs_json);
}

int sb_dbq_run_has_search(sb_dbq *q, int64_t run_id, const char *model, const char *params, int p,
                          const char *algo, sb_error *err)
{
    return exists(q,
                  "SELECT count(*) FROM search_runs r JOIN models m ON m.id = r.model_id "
                  "WHERE r.run_id = ?1 AND m.name = ?2 AND m.params = ?3 AND r.p = ?4 AND "
                  "r.algo = ?5",
                  "looking up the resumed run's searches", err, "Ittit", run_id, model, params, p,
                  algo);
}

/* Grows *v (of *cap items of size sz) to hold one more than n. */
static void *grow(void *v, int n, int *cap, size_t sz, sb_error *err)
{
    if (n < *cap)
        return v;
    *cap = *cap ? 2 * *cap : 16;
    void *nv = realloc(v, (size_t)*cap * sz);
    if (!nv)
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    return nv;
}

/* Steps st to the end, calling row(st, item) on a zeroed new item for
 * each row; *out malloc'd (NULL when no rows). */
static int collect(sb_dbq *q, sqlite3_stmt *st, const char *doing, size_t sz,
                   void (*row)(sqlite3_stmt *, void *), void **out, int *n, sb_error *err)
{
    void *v = NULL;
    int cap = 0, r;
    *n = 0;
    while ((r = sb_dbq_step(q, st, doing, err)) == 1) {
        void *nv = grow(v, *n, &cap, sz, err);
        if (!nv) {
            sqlite3_finalize(st);
            free(v);
            return -1;
        }
        v = nv;
        void *item = (char *)v + (size_t)*n * sz;
        memset(item, 0, sz);
        row(st, item);
        (*n)++;
    }
    if (r < 0) {
        free(v);
        *n = 0;
        return -1;
    }
    sqlite3_finalize(st);
    *out = v;
    return 0;
}

static void search_time_row(sqlite3_stmt *st, void *item)
{
    sb_qsearch_time *t = item;
    snprintf(t->algo, sizeof t->algo, "%s", sb_dbq_text(st, 0));
    t->p = sqlite3_column_int(st, 1);
    t->seconds = sqlite3_column_double(st, 2);
}

int sb_dbq_search_times(sb_dbq *q, int64_t run_id, int64_t model_id, sb_qsearch_time **out,
                        int *n, sb_error *err)
{
    const char *doing = "reading the search times";
    sqlite3_stmt *st;
    *out = NULL;
    if (sb_dbq_query(q,
                     "WITH ps AS (SELECT DISTINCT s.p FROM measurements x JOIN strategies s "
                     "  ON s.id = x.strategy_id WHERE x.run_id = ?1 AND s.model_id = ?2 "
                     "  UNION SELECT p FROM search_runs WHERE run_id = ?1 AND model_id = ?2), "
                     "c AS (SELECT r.*, (r.run_id IS ?1) AS mine FROM search_runs r WHERE "
                     "  r.model_id = ?2 AND r.p IN ps AND r.seconds IS NOT NULL) "
                     "SELECT algo, p, seconds FROM c WHERE id = (SELECT c2.id FROM c c2 WHERE "
                     "c2.p = c.p AND c2.algo = c.algo ORDER BY c2.mine DESC, c2.id DESC "
                     "LIMIT 1) ORDER BY algo, p",
                     &st, doing, err, "II", run_id, model_id))
        return -1;
    return collect(q, st, doing, sizeof **out, search_time_row, (void **)out, n, err);
}

static void trend_row(sqlite3_stmt *st, void *item)
{
    sb_qtrend *t = item;
    t->run = sqlite3_column_int64(st, 0);
    snprintf(t->commit, sizeof t->commit, "%s", sb_dbq_text(st, 1));
    snprintf(t->kind, sizeof t->kind, "%s", sb_dbq_text(st, 2));
    t->median = sqlite3_column_double(st, 3);
}

int sb_dbq_trend(sb_dbq *q, int64_t model_id, int p, int64_t upto_run, sb_qtrend **out, int *n,
                 sb_error *err)
{
    const char *doing = "reading the step times across runs";
    sqlite3_stmt *st;
    *out = NULL;
    if (sb_dbq_query(q,
                     "SELECT x.run_id, substr(r.git_commit, 1, 8), s.kind, "
                     "min(x.step_median_s) FROM measurements x "
                     "JOIN strategies s ON s.id = x.strategy_id JOIN runs r ON r.id = x.run_id "
                     "WHERE s.model_id = ?1 AND s.p = ?2 AND x.status = 'ok' AND "
                     "x.step_median_s IS NOT NULL AND x.run_id <= ?3 "
                     "GROUP BY x.run_id, s.kind ORDER BY s.kind, x.run_id",
                     &st, doing, err, "IiI", model_id, p, upto_run))
        return -1;
    return collect(q, st, doing, sizeof **out, trend_row, (void **)out, n, err);
}

int sb_dbq_run_info(sb_dbq *q, int64_t run_id, sb_qrun *out, sb_error *err)
{
    const char *doing = "reading the run";
    sqlite3_stmt *st;
    if (sb_dbq_query(q,
                     "SELECT started_at, ifnull(ended_at, 'not ended (died, or still "
                     "running)'), host, git_commit, ifnull(compiler, ''), backend, "
                     "ifnull(devices, ''), ifnull(versions, ''), ifnull(command_line, '') "
                     "FROM runs WHERE id = ?1",
                     &st, doing, err, "I", run_id))
        return -1;
    int r = sb_dbq_step(q, st, doing, err);
    if (r == 0)
        sqlite3_finalize(st);
    if (r <= 0)
        return r < 0 ? -1 : sb_fail(err, SB_EXIT_INPUT, "%s: no run with id %lld",
                                   sb_dbq_path(q), (long long)run_id);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 9; i++) {
        free(out->field[i]);
        out->field[i] = strdup(sb_dbq_text(st, i));
        if (!out->field[i]) {
            sqlite3_finalize(st);
            sb_qrun_free(out);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        }
    }
    sqlite3_finalize(st);
    return 0;
}

void sb_qrun_free(sb_qrun *r)
{
    for (int i = 0; i < 9; i++) {
        free(r->field[i]);
        r->field[i] = NULL;
    }
}

static void search_row(sqlite3_stmt *st, void *item)
{
    sb_qsearch *s = item;
    snprintf(s->model, sizeof s->model, "%s", sb_dbq_text(st, 0));
    snprintf(s->params, sizeof s->params, "%s", sb_dbq_text(st, 1));
    s->p = sqlite3_column_int(st, 2);
    snprintf(s->algo, sizeof s->algo, "%s", sb_dbq_text(st, 3));
    s->seconds = sb_dbq_real(st, 4);
    s->total_cost = sb_dbq_real(st, 5);
    s->mine = sqlite3_column_int(st, 6);
    s->max_dep_set = sqlite3_column_int(st, 7);
    s->peak_table_bytes = sb_dbq_real(st, 8);
}

int sb_dbq_run_searches(sb_dbq *q, int64_t run_id, sb_qsearch **out, int *n, sb_error *err)
{
    const char *doing = "reading the search times";
    sqlite3_stmt *st;
    *out = NULL;
    if (sb_dbq_query(q,
                     "WITH pairs AS (SELECT DISTINCT s.model_id, s.p FROM measurements x "
                     "  JOIN strategies s ON s.id = x.strategy_id WHERE x.run_id = ?1 "
                     "  UNION SELECT model_id, p FROM search_runs WHERE run_id = ?1), "
                     "cand AS (SELECT r.*, (r.run_id IS ?1) AS mine FROM search_runs r "
                     "  JOIN pairs ON pairs.model_id = r.model_id AND pairs.p = r.p) "
                     "SELECT m.name, m.params, c.p, c.algo, c.seconds, c.total_cost, c.mine, "
                     "c.max_dep_set, c.peak_table_bytes FROM cand c JOIN models m ON "
                     "m.id = c.model_id WHERE c.id = (SELECT c2.id FROM cand c2 WHERE "
                     "c2.model_id = c.model_id AND c2.p = c.p AND c2.algo = c.algo "
                     "ORDER BY c2.mine DESC, c2.id DESC LIMIT 1) "
                     "ORDER BY m.name, m.params, c.p, c.algo",
                     &st, doing, err, "I", run_id))
        return -1;
    return collect(q, st, doing, sizeof **out, search_row, (void **)out, n, err);
}

/* One row of st: its text columns 0 (malloc'd into *json) and 1 (into
 * buf); 1 found, 0 none, -1 error. */
static int one_json(sb_dbq *q, sqlite3_stmt *st, const char *doing, char **json, char *buf,
                    size_t nbuf, sb_error *err)
{
    *json = NULL;
    int r = sb_dbq_step(q, st, doing, err);
    if (r == 0)
        sqlite3_finalize(st);
    if (r <= 0)
        return r;
    if (buf)
        snprintf(buf, nbuf, "%s", sb_dbq_text(st, 1));
    *json = strdup(sb_dbq_text(st, 0));
    sqlite3_finalize(st);
    if (!*json)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    return 1;
}

int sb_dbq_strategy(sb_dbq *q, int64_t strategy_id, const char *doing, int64_t *model_id, int *p,
                    char **configs_json, sb_error *err)
{
    sqlite3_stmt *st;
    *configs_json = NULL;
    if (sb_dbq_query(q, "SELECT configs_json, model_id, p FROM strategies WHERE id = ?1", &st,
                     doing, err, "I", strategy_id))
        return -1;
    int r = sb_dbq_step(q, st, doing, err);
    if (r == 0)
        sqlite3_finalize(st);
    if (r <= 0)
        return r;
    if (model_id)
        *model_id = sqlite3_column_int64(st, 1);
    if (p)
        *p = sqlite3_column_int(st, 2);
    *configs_json = strdup(sb_dbq_text(st, 0));
    sqlite3_finalize(st);
    if (!*configs_json)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    return 1;
}

int sb_dbq_search_strategy(sb_dbq *q, int64_t model_id, int p, int64_t prefer_run, char **json,
                           char *algo, size_t nalgo, sb_error *err)
{
    const char *doing = "reading a strategy";
    sqlite3_stmt *st;
    *json = NULL;
    if (sb_dbq_query(q,
                     "SELECT strategy_json, algo FROM search_runs WHERE "
                     "model_id = ?1 AND p = ?2 ORDER BY (run_id IS ?3) DESC, "
                     "(algo = 'pase') DESC, id DESC LIMIT 1",
                     &st, doing, err, "IiI", model_id, p, prefer_run))
        return -1;
    return one_json(q, st, doing, json, algo, nalgo, err);
}

/* ------------------------------------------------------------ nightly -- */

/* Run ids of a statement's first column (bound by types), at most max. */
static int run_ids(sb_dbq *q, const char *sql, const char *doing, int64_t *ids, int max, int *n,
                   sb_error *err, const char *types, ...)
{
    sqlite3_stmt *st;
    *n = 0;
    va_list ap;
    va_start(ap, types);
    int rc = sb_dbq_queryv(q, sql, &st, doing, err, types, ap);
    va_end(ap);
    if (rc)
        return -1;
    int r;
    while ((r = sb_dbq_step(q, st, doing, err)) > 0)
        if (*n < max)
            ids[(*n)++] = sqlite3_column_int64(st, 0);
    if (r < 0)
        return -1; /* finalized by sb_dbq_step */
    sqlite3_finalize(st);
    return 0;
}

int sb_dbq_history_runs(sb_dbq *q, int64_t before, int64_t *ids, int max, int *n, sb_error *err)
{
    if (sb_dbq_version(q) < 4) /* no verdicts yet: every earlier run of the host */
        return run_ids(q,
                       "SELECT r.id FROM runs r JOIN runs c ON c.id = ?1 "
                       "WHERE r.id < ?1 AND r.ended_at IS NOT NULL AND r.host IS c.host "
                       "AND EXISTS (SELECT 1 FROM measurements x WHERE x.run_id = r.id) "
                       "ORDER BY r.id DESC",
                       "reading a series' history", ids, max, n, err, "I", before);
    return run_ids(q,
                   "SELECT r.id FROM runs r JOIN runs c ON c.id = ?1 "
                   "LEFT JOIN nightly_verdicts v ON v.run_id = r.id "
                   "WHERE r.id < ?1 AND r.ended_at IS NOT NULL AND r.host IS c.host AND "
                   "coalesce(v.regressions, 0) = 0 "
                   "AND EXISTS (SELECT 1 FROM measurements x WHERE x.run_id = r.id) "
                   "ORDER BY r.id DESC",
                   "reading a series' history", ids, max, n, err, "I", before);
}

int sb_dbq_last_good_nightly(sb_dbq *q, int64_t cand, int64_t *id, sb_error *err)
{
    int n = 0;
    *id = 0;
    if (sb_dbq_version(q) < 4)
        return 0;
    if (run_ids(q,
                "SELECT r.id FROM runs r JOIN runs c ON c.id = ?1 "
                "JOIN nightly_verdicts v ON v.run_id = r.id "
                "WHERE r.id < ?1 AND r.ended_at IS NOT NULL AND v.regressions = 0 AND "
                "r.host IS c.host AND r.compiler IS c.compiler AND r.backend IS c.backend AND "
                "r.devices IS c.devices "
                "ORDER BY r.id DESC LIMIT 1",
                "looking for the last good night", id, 1, &n, err, "I", cand))
        return -1;
    return n;
}

int sb_dbq_record_nightly(sb_dbq *q, int64_t run_id, int64_t baseline, int regressions,
                          int improvements, const char *build_path, sb_error *err)
{
    const char *doing = "recording the nightly's verdict";
    sqlite3_stmt *st;
    if (sb_dbq_query(q,
                     "INSERT INTO nightly_verdicts (run_id, baseline_run_id, regressions, "
                     "improvements, build_path) VALUES (?1, nullif(?2, 0), ?3, ?4, ?5) "
                     "ON CONFLICT (run_id) DO UPDATE SET baseline_run_id = excluded.baseline_run_id, "
                     "regressions = excluded.regressions, improvements = excluded.improvements, "
                     "build_path = excluded.build_path",
                     &st, doing, err, "IIiit", run_id, baseline, regressions, improvements,
                     build_path))
        return -1;
    if (sb_dbq_step(q, st, doing, err) < 0)
        return -1;
    sqlite3_finalize(st);
    return 0;
}

int sb_dbq_nightly_build(sb_dbq *q, int64_t run, char **path, sb_error *err)
{
    const char *doing = "reading a nightly's kept build";
    sqlite3_stmt *st;
    *path = NULL;
    if (sb_dbq_version(q) < 6)
        return 0;
    if (sb_dbq_query(q, "SELECT build_path FROM nightly_verdicts WHERE run_id = ?1", &st, doing,
                     err, "I", run))
        return -1;
    int rc = sb_dbq_step(q, st, doing, err);
    if (rc < 0)
        return -1;
    if (rc > 0 && sqlite3_column_type(st, 0) == SQLITE_TEXT) {
        *path = strdup((const char *)sqlite3_column_text(st, 0));
        if (!*path) {
            sqlite3_finalize(st);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        }
    }
    sqlite3_finalize(st);
    return 0;
}
