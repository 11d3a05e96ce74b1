/* tests/unit/test_nightly_db.c: the nightly's reads and writes of the results
 * database (results/queries.c): a version-3 file (made by the released
 * blocks of schema.sql) read as it is (history: every earlier ended run of
 * the host; no last good night), then migrated to the current version with its rows
 * kept; verdicts stored and replaced; the last good night skips a night
 * with a confirmed regression and other hosts; the history leaves out runs
 * with a confirmed regression; regress sets aside the launches whose probe
 * says the machine was loaded (unless --raw). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "shardbench/measure.h"
#include "shardbench/query.h"
#include "shardbench/results.h"

static char dir[PATH_MAX];

static void raw(const char *path, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : "?");
    sqlite3_close(h);
}

/* A version-3 file with runs 1..4 (host h; run 4 on host other) each with
 * one measurement of strategy 1. */
static void make_v3(const char *path)
{
    FILE *f = fopen(SB_SOURCE_DIR "/results/schema.sql", "r");
    assert_non_null(f);
    static char schema[1 << 16];
    size_t n = fread(schema, 1, sizeof schema - 1, f);
    fclose(f);
    schema[n] = '\0';
    char *end = strstr(schema, "PRAGMA user_version = 3;");
    assert_non_null(end);
    end[strlen("PRAGMA user_version = 3;")] = '\0';
    unlink(path);
    raw(path, schema);
    raw(path, "INSERT INTO runs (id, started_at, ended_at, host, compiler, backend, devices, git_commit) VALUES "
              "(1, 't', 't', 'h', 'gcc', 'cpu', 'd', 'c'), (2, 't', 't', 'h', 'gcc', 'cpu', 'd', 'c'), "
              "(3, 't', 't', 'h', 'gcc', 'cpu', 'd', 'c'), (4, 't', 't', 'other', 'gcc', 'cpu', 'd', 'c'), "
              "(5, 't', NULL, 'h', 'gcc', 'cpu', 'd', 'c');"
              "INSERT INTO models (id, name, params, nops) VALUES (1, 'm', '', 1);"
              "INSERT INTO strategies (id, model_id, p, kind, configs_json) "
              "VALUES (1, 1, 1, 'dp', '{}');"
              "INSERT INTO measurements (run_id, strategy_id, step_median_s, steps, status) "
              "VALUES (1, 1, 0.1, 3, 'ok'), (2, 1, 0.1, 3, 'ok'), (3, 1, 0.1, 3, 'ok'), "
              "(4, 1, 0.1, 3, 'ok'), (5, 1, 0.1, 3, 'ok');");
}

static void test_version_3_read_as_is(void **state)
{
    (void)state;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/v3.db", dir);
    make_v3(path);
    sb_dbq *q;
    sb_error err = {0};
    assert_int_equal(sb_dbq_open(path, 0, 0, &q, &err), 0);
    assert_int_equal(sb_dbq_version(q), 3);
    int64_t ids[8], id = 7;
    int n = 0;
    assert_int_equal(sb_dbq_history_runs(q, 5, ids, 8, &n, &err), 0);
    assert_int_equal(n, 3); /* 3, 2, 1: host h, ended, before 5 */
    assert_true(ids[0] == 3 && ids[1] == 2 && ids[2] == 1);
    assert_int_equal(sb_dbq_last_good_nightly(q, 5, &id, &err), 0);
    assert_int_equal(id, 0);
    sb_dbq_close(q);
}

static void test_migrate_and_verdicts(void **state)
{
    (void)state;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/v4.db", dir);
    make_v3(path);
    sb_db *db;
    sb_error err = {0};
    assert_int_equal(sb_db_open(path, 0, &db, &err), 0);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    sb_db_close(db);
    sb_dbq *q;
    assert_int_equal(sb_dbq_open(path, 1, 0, &q, &err), 0);
    /* run 1 good, run 2 a confirmed regression (first 0, then replaced), run 4 another host */
    assert_int_equal(sb_dbq_record_nightly(q, 1, 0, 0, 0, NULL, &err), 0);
    assert_int_equal(sb_dbq_record_nightly(q, 2, 1, 0, 0, NULL, &err), 0);
    assert_int_equal(sb_dbq_record_nightly(q, 2, 1, 2, 1, NULL, &err), 0);
    assert_int_equal(sb_dbq_record_nightly(q, 4, 0, 0, 0, NULL, &err), 0);
    int64_t id = 0, ids[8];
    int n = 0;
    assert_int_equal(sb_dbq_last_good_nightly(q, 5, &id, &err), 1);
    assert_int_equal(id, 1); /* not 2 (regressed), not 3 (no verdict), not 4 (other host) */
    assert_int_equal(sb_dbq_last_good_nightly(q, 1, &id, &err), 0);
    assert_int_equal(sb_dbq_history_runs(q, 5, ids, 8, &n, &err), 0);
    assert_int_equal(n, 2); /* 3 and 1: 2 had a confirmed regression */
    assert_true(ids[0] == 3 && ids[1] == 1);
    /* a kept build is stored with the verdict and read back; none: NULL */
    assert_int_equal(sb_dbq_record_nightly(q, 1, 0, 0, 0, "/k/run-1/shardbench", &err), 0);
    char *kept = NULL;
    assert_int_equal(sb_dbq_nightly_build(q, 1, &kept, &err), 0);
    assert_non_null(kept);
    assert_string_equal(kept, "/k/run-1/shardbench");
    free(kept);
    assert_int_equal(sb_dbq_nightly_build(q, 4, &kept, &err), 0);
    assert_null(kept);
    assert_int_equal(sb_dbq_nightly_build(q, 3, &kept, &err), 0); /* no verdict */
    assert_null(kept);
    /* a verdict of an unknown run is refused (foreign key) */
    assert_int_not_equal(sb_dbq_record_nightly(q, 99, 0, 0, 0, NULL, &err), 0);
    sb_dbq_close(q);
}

/* One run of 8 launches of one strategy: medians med * (1 + small
 * spread); the first `loaded` of them measured under load: 40% slower, with
 * a probe twice as slow. probe 0: launches from before probes. */
static int64_t launches(sb_db *db, double med, double probe, int loaded)
{
    sb_error err = {0};
    sb_run_meta meta = {.host = "h", .backend = "cpu"};
    int64_t run;
    if (sb_db_begin_run(db, &meta, &run, &err))
        fail_msg("%s", err.msg);
    static const double jitter[8] = {1.00, 1.01, 0.99, 1.02, 0.98, 1.005, 0.995, 1.015};
    for (int i = 0; i < 8; i++) {
        double m = med * jitter[i] * (i < loaded ? 1.4 : 1.0);
        sb_measurement_record r = {
            .run_id = run, .model = "tiny", .params = "batch=4", .nops = 3, .p = 2,
            .kind = "dp", .predicted_cost = 1, .configs_json = "{\"c\":1}",
            .step_median_s = m, .step_min_s = m, .step_max_s = m, .steps = 3, .status = "ok",
            .probe_s = probe > 0 ? probe * jitter[i] * (i < loaded ? 2.0 : 1.0) : 0,
        };
        if (sb_db_record_measurement(db, &r, NULL, &err))
            fail_msg("%s", err.msg);
    }
    if (sb_db_end_run(db, run, &err))
        fail_msg("%s", err.msg);
    return run;
}

/* regress on (base, cand): its status, the report in buf. */
static int judge_runs(const char *path, int64_t base, int64_t cand, int raw_times, char *buf,
                      size_t n)
{
    sb_error err = {0};
    FILE *f = fmemopen(buf, n, "w");
    assert_non_null(f);
    sb_regress_opts o = {.db = path, .baseline = base, .candidate = cand, .threshold = 0.05,
                         .out = f, .raw = raw_times};
    int rc = sb_regress(&o, &err);
    fclose(f);
    if (rc < 0)
        fail_msg("%s", err.msg);
    return rc;
}

/* Launches under load set aside: a candidate 5 of whose 8 launches ran on
 * a loaded machine (slower steps, slow probes) is no regression; --raw
 * keeps them and calls it one; a candidate 40% slower in every launch with
 * normal probes is a regression either way; a baseline without probes
 * keeps every launch and says so. */
static void test_probe_load(void **state)
{
    (void)state;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/probe.db", dir);
    sb_db *db;
    sb_error err = {0};
    assert_int_equal(sb_db_open(path, 0, &db, &err), 0);
    int64_t base = launches(db, 0.100, 0.004, 0);
    int64_t loaded = launches(db, 0.100, 0.004, 6);
    int64_t slower = launches(db, 0.140, 0.004, 0);
    int64_t old = launches(db, 0.100, 0, 0);
    sb_db_close(db);
    char buf[65536];
    assert_int_equal(judge_runs(path, base, loaded, 0, buf, sizeof buf), 0);
    if (!strstr(buf, "under load set aside: 6"))
        fail_msg("%s", buf);
    if (judge_runs(path, base, loaded, 1, buf, sizeof buf) != 1)
        fail_msg("%s", buf);
    assert_non_null(strstr(buf, "every launch kept (--raw)"));
    assert_int_equal(judge_runs(path, base, slower, 0, buf, sizeof buf), 1);
    assert_int_equal(judge_runs(path, base, slower, 1, buf, sizeof buf), 1);
    assert_int_equal(judge_runs(path, old, loaded, 0, buf, sizeof buf), 1);
    assert_non_null(strstr(buf, "has no probe"));
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/sb-nightly-db-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_3_read_as_is),
        cmocka_unit_test(test_migrate_and_verdicts),
        cmocka_unit_test(test_probe_load),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd))
        rc = rc ? rc : 1;
    return rc;
}
