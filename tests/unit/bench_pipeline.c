/* tests/unit/bench_pipeline.c: cmocka tests of results/query.c, the reading side
 * of the results database used by bench, report, plot and regress.
 *
 * The JSON reader (values, escapes, nan from printf, every kind of bad
 * input), Spearman's rho (exact, reversed, ties, undefined), the median,
 * and the database: a version-1 file (made from the first block of
 * results/schema.sql) migrated to version 2 with its rows kept; a version-1
 * file read as it is (rho computed, not stored); correlations stored and
 * replaced; a locked file (busy timeout, then a clear error); query handles
 * refusing missing, foreign and newer files without touching them. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "shardbench/query.h"
#include "shardbench/results.h"
#include "../../results/dbq_int.h"

static char g_dir[PATH_MAX];

static void path_in(char *buf, size_t n, const char *name)
{
    int len = snprintf(buf, n, "%s/%s", g_dir, name);
    assert_true(len > 0 && (size_t)len < n);
}

/* A new database (dir/name into path) with one run begun (*run). */
static sb_db *new_run(char *path, size_t n, const char *name, int64_t *run)
{
    path_in(path, n, name);
    sb_error err = {0};
    sb_db *db;
    if (sb_db_open(path, 0, &db, &err))
        fail_msg("%s", err.msg);
    sb_run_meta meta = {.backend = "cpu"};
    assert_int_equal(sb_db_begin_run(db, &meta, run, &err), 0);
    return db;
}

static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : "?");
    sqlite3_close(h);
}

static long long raw_int(const char *path, const char *sql)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* The first version block of results/schema.sql, as released. */
static char *schema_block1(void)
{
    FILE *f = fopen(SB_SOURCE_DIR "/results/schema.sql", "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *end = strstr(buf, "PRAGMA user_version = 1;");
    assert_non_null(end);
    end[strlen("PRAGMA user_version = 1;")] = '\0';
    return buf;
}

/* ------------------------------------------------------------------ JSON -- */

static void test_json_values(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_json *j = sb_json_parse(
        " {\"a\": [1, -2.5e3, true, false, null, \"x\\\"\\u00e9\\n\"], \"b\": {}, "
        "\"losses\": [nan, inf, -inf], \"e\": []} ", &err);
    assert_non_null(j);
    const sb_json *a = sb_json_get(j, "a");
    assert_non_null(a);
    assert_int_equal(a->n, 6);
    assert_true(sb_json_num(sb_json_at(a, 0), 0) == 1);
    assert_true(sb_json_num(sb_json_at(a, 1), 0) == -2500);
    assert_int_equal(sb_json_at(a, 2)->type, SB_JSON_BOOL);
    assert_int_equal(sb_json_at(a, 4)->type, SB_JSON_NULL);
    assert_string_equal(sb_json_str(sb_json_at(a, 5)), "x\"\xc3\xa9\n");
    assert_null(sb_json_at(a, 6));
    assert_int_equal(sb_json_get(j, "b")->n, 0);
    const sb_json *l = sb_json_get(j, "losses");
    assert_true(isnan(sb_json_num(sb_json_at(l, 0), 0)));
    assert_true(isinf(sb_json_num(sb_json_at(l, 1), 0)) && sb_json_num(sb_json_at(l, 1), 0) > 0);
    assert_true(sb_json_num(sb_json_at(l, 2), 0) < 0);
    assert_null(sb_json_get(j, "missing"));
    assert_null(sb_json_str(sb_json_at(a, 0)));
    assert_true(sb_json_num(NULL, 7) == 7);
    sb_json_free(j);
}

static void test_json_bad(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "", "{", "[1,", "[1 2]", "{\"a\" 1}", "{a:1}", "\"abc", "\"\\x\"", "\"\\u12g4\"",
        "tru", "[1] x", "-", "{\"a\":}", "\"a\nb\"", "[nanx]",
        /* a repeated key (issue 39: JSON_REJECT_DUPLICATES), at any depth */
        "{\"a\":1,\"a\":2}", "{\"x\":[{\"b\":1,\"c\":0,\"b\":1}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sb_error err = {0};
        sb_json *j = sb_json_parse(bad[i], &err);
        if (j)
            fail_msg("accepted bad JSON '%s'", bad[i]);
        assert_int_equal(err.code, SB_EXIT_INPUT);
        assert_non_null(strstr(err.msg, "bad JSON at offset"));
    }
    /* deep nesting is refused, not a stack overflow */
    char deep[2000];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = '\0';
    sb_error err = {0};
    assert_null(sb_json_parse(deep, &err));
    assert_non_null(strstr(err.msg, "nested too deeply"));
}

/* ------------------------------------------------------------ statistics -- */

static void test_spearman(void **state)
{
    (void)state;
    double x[] = {1, 2, 3, 4, 5}, up[] = {10, 20, 30, 40, 1000}, down[] = {5, 4, 3, 2, 1};
    double rho;
    assert_int_equal(sb_spearman(x, up, 5, &rho), 0);
    assert_true(fabs(rho - 1) < 1e-12);
    assert_int_equal(sb_spearman(x, down, 5, &rho), 0);
    assert_true(fabs(rho + 1) < 1e-12);
    /* ties get mean ranks: x ranks 1.5 1.5 3 4, y ranks 1 2 3 4 */
    double tx[] = {7, 7, 8, 9}, ty[] = {1, 2, 3, 4};
    assert_int_equal(sb_spearman(tx, ty, 4, &rho), 0);
    double want = 4.5 / sqrt(4.5 * 5.0); /* sum dx*dy / sqrt(sxx*syy) */
    assert_true(fabs(rho - want) < 1e-12);
    /* a known value: d = (0, 1, -1, 0, 0) -> 1 - 6*2/(5*24) = 0.9 */
    double a[] = {1, 2, 3, 4, 5}, b[] = {1, 3, 2, 4, 5};
    assert_int_equal(sb_spearman(a, b, 5, &rho), 0);
    assert_true(fabs(rho - 0.9) < 1e-12);
    /* undefined: too few, no spread, not finite */
    assert_int_equal(sb_spearman(x, up, 1, &rho), -1);
    double flat[] = {3, 3, 3};
    assert_int_equal(sb_spearman(x, flat, 3, &rho), -1);
    double withnan[] = {1, NAN, 3};
    assert_int_equal(sb_spearman(x, withnan, 3, &rho), -1);
}

static void test_median(void **state)
{
    (void)state;
    double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2};
    assert_true(sb_median(odd, 3) == 3);
    assert_true(sb_median(even, 4) == 2.5);
    assert_true(isnan(sb_median(odd, 0)));
    assert_true(odd[0] == 5); /* input left as it was */
}

/* -------------------------------------------------------------- database -- */

static void record(sb_db *db, int64_t run, const char *kind, const char *json, double cost,
                   double med)
{
    sb_error err = {0};
    sb_measurement_record r = {
        .run_id = run, .model = "tiny", .params = "batch=4", .nops = 3, .p = 2, .kind = kind,
        .predicted_cost = cost, .configs_json = json, .step_median_s = med,
        .step_min_s = med * 0.9, .step_max_s = med * 1.1, .steps = 3, .status = "ok",
    };
    if (sb_db_record_measurement(db, &r, NULL, &err))
        fail_msg("%s", err.msg);
}

static void test_migrate_v1_to_v2(void **state)
{
    (void)state;
    char path[PATH_MAX];
    path_in(path, sizeof path, "v1.db");
    raw_exec(path, schema_block1());
    raw_exec(path, "INSERT INTO runs (host, git_commit, backend) VALUES ('old', 'abc', 'cpu');"
                   "INSERT INTO models (name, params) VALUES ('tiny', 'batch=4');"
                   "INSERT INTO strategies (model_id, p, kind, predicted_cost, configs_json) "
                   "VALUES (1, 2, 'dp', 100, '{}'), (1, 2, 'pase', 50, '{\"x\":1}');"
                   "INSERT INTO measurements (run_id, strategy_id, step_median_s, step_min_s, "
                   "steps, status) VALUES (1, 1, 0.2, 0.19, 3, 'ok'), (1, 2, 0.1, 0.09, 3, 'ok');");
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 1);

    /* read as version 1: no correlations table, rho computed from the rows */
    sb_error err = {0};
    sb_dbq *q;
    if (sb_dbq_open(path, 0, 0, &q, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sb_dbq_version(q), 1);
    sb_qmeas *rows;
    int n;
    assert_int_equal(sb_dbq_run_measurements(q, 1, &rows, &n, &err), 0);
    assert_int_equal(n, 2);
    sb_qfidelity *f;
    int nf;
    assert_int_equal(sb_q_fidelity(q, 1, rows, n, &f, &nf, &err), 0);
    assert_int_equal(nf, 1);
    assert_int_equal(f[0].n, 2);
    assert_int_equal(f[0].stored, 0);
    assert_true(fabs(f[0].rho - 1) < 1e-12);
    sb_qkind *k;
    int nk;
    assert_int_equal(sb_q_kinds(rows, n, &k, &nk, &err), 0);
    assert_int_equal(nk, 2);
    assert_string_equal(k[0].kind, "dp");
    assert_true(fabs(k[1].speedup - 2) < 1e-12); /* pase 0.1 s against dp 0.2 s */
    free(k);
    free(f);
    free(rows);
    /* a write handle wants the current schema */
    sb_dbq *w;
    assert_int_equal(sb_dbq_open(path, 1, 0, &w, &err), -1);
    sb_dbq_close(q);

    /* sb_db_open migrates: version 2 and on, old rows kept, correlations usable */
    sb_db *db;
    if (sb_db_open(path, 0, &db, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    assert_true(SB_DB_SCHEMA_VERSION >= 2);
    sb_db_close(db);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), SB_DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM measurements"), 2);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM runs WHERE host = 'old'"), 1);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM correlations"), 0);
    if (sb_dbq_open(path, 1, 0, &w, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(sb_dbq_record_correlation(w, 1, "tiny", "batch=4", 2, 2, 0.5, &err), 0);
    assert_int_equal(sb_dbq_record_correlation(w, 1, "tiny", "batch=4", 2, 3, NAN, &err), 0);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM correlations"), 1);
    assert_int_equal(raw_int(path, "SELECT n * (rho IS NULL) FROM correlations"), 3);
    /* unknown model, unknown run: nothing written */
    assert_int_equal(sb_dbq_record_correlation(w, 1, "nope", "", 2, 2, 0.5, &err), -1);
    assert_non_null(strstr(err.msg, "no model nope"));
    memset(&err, 0, sizeof err);
    assert_int_equal(sb_dbq_record_correlation(w, 42, "tiny", "batch=4", 2, 2, 0.5, &err), -1);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM correlations"), 1);
    assert_int_equal(sb_dbq_check_run(w, 1, &err), 0);
    assert_int_equal(sb_dbq_check_run(w, 42, &err), -1);
    assert_non_null(strstr(err.msg, "no run with id 42"));
    sb_dbq_close(w);
}

static void test_stored_rho_and_kinds(void **state)
{
    (void)state;
    char path[PATH_MAX];
    sb_error err = {0};
    int64_t run;
    sb_db *db = new_run(path, sizeof path, "new.db", &run);
    record(db, run, "dp", "{\"a\":1}", 300, 0.30);
    record(db, run, "pase", "{\"a\":2}", 100, 0.10);
    record(db, run, "cand", "{\"a\":3}", 200, 0.40);
    record(db, run, "cand", "{\"a\":4}", 250, 0.20);
    sb_measurement_record bad = {
        .run_id = run, .model = "tiny", .params = "batch=4", .p = 2, .kind = "cand",
        .predicted_cost = 1, .configs_json = "{\"a\":5}", .status = "timeout",
        .message = "killed", .step_median_s = NAN,
    };
    assert_int_equal(sb_db_record_measurement(db, &bad, NULL, &err), 0);
    sb_db_close(db);

    sb_dbq *q;
    if (sb_dbq_open(path, 1, 0, &q, &err))
        fail_msg("%s", err.msg);
    sb_qmeas *rows;
    int n;
    assert_int_equal(sb_dbq_run_measurements(q, run, &rows, &n, &err), 0);
    assert_int_equal(n, 5);
    double x[5], y[5];
    int idx[5];
    int np = sb_q_points(rows, n, rows[0].model_id, 2, x, y, idx);
    assert_int_equal(np, 4); /* the timeout is not a point */
    sb_qkind *k;
    int nk;
    assert_int_equal(sb_q_kinds(rows, n, &k, &nk, &err), 0);
    assert_int_equal(nk, 3);
    /* ordered by kind: cand, dp, pase */
    assert_string_equal(k[0].kind, "cand");
    assert_int_equal(k[0].strategies, 3);
    assert_int_equal(k[0].failed, 1);
    assert_true(fabs(k[0].best_median - 0.20) < 1e-12);
    assert_true(fabs(k[0].speedup - 1.5) < 1e-12);
    assert_true(fabs(k[2].speedup - 3) < 1e-12);
    free(k);
    /* computed rho: costs 200 250 300 100 vs 0.4 0.2 0.3 0.1 -> ranks (2,3,4,1) vs (4,2,3,1) */
    sb_qfidelity *f;
    int nf;
    assert_int_equal(sb_q_fidelity(q, run, rows, n, &f, &nf, &err), 0);
    assert_int_equal(f[0].stored, 0);
    assert_true(fabs(f[0].rho - 0.4) < 1e-12);
    free(f);
    /* a stored value wins */
    assert_int_equal(sb_dbq_record_correlation(q, run, "tiny", "batch=4", 2, 4, 0.4, &err), 0);
    assert_int_equal(sb_q_fidelity(q, run, rows, n, &f, &nf, &err), 0);
    assert_int_equal(f[0].stored, 1);
    assert_int_equal(f[0].n, 4);
    free(f);
    free(rows);
    sb_dbq_close(q);
}

/* The binder (every type letter, an infinite D as NULL, a bad letter refused) and the
 * named reads of queries.c on a small run. */
static void test_bind_and_named_reads(void **state)
{
    (void)state;
    char path[PATH_MAX];
    path_in(path, sizeof path, "named.db");
    sb_error err = {0};
    sb_db *db;
    if (sb_db_open(path, 0, &db, &err))
        fail_msg("%s", err.msg);
    sb_run_meta meta = {.backend = "cpu", .command_line = "shardbench bench"};
    int64_t run;
    assert_int_equal(sb_db_begin_run(db, &meta, &run, &err), 0);
    record(db, run, "dp", "{\"ops\":[{\"name\":\"a\",\"config\":[2,1]}]}", 300, 0.30);
    sb_db_close(db);

    sb_dbq *q;
    if (sb_dbq_open(path, 0, 0, &q, &err))
        fail_msg("%s", err.msg);
    sqlite3_stmt *st;
    assert_int_equal(sb_dbq_query(q, "SELECT ?1 + 1, ?2 + 1, ?3 * 2, ?4 IS NULL, ?5 || '!', "
                                  "?6 IS NULL, ?7 * 2, ?8 IS NULL, typeof(?9) || ?9, "
                                  "?10 IS NULL, ?11", &st, "testing", &err, "iIdDttDBbbB",
                                  41, (int64_t)1 << 40, 1.25, INFINITY, "x", (const char *)NULL,
                                  2.5, 0.0, 12.6, -1.0, 7.0),
                     0);
    assert_int_equal(sb_dbq_step(q, st, "testing", &err), 1);
    assert_int_equal(sqlite3_column_int(st, 0), 42);
    assert_true(sqlite3_column_int64(st, 1) == ((int64_t)1 << 40) + 1);
    assert_true(sqlite3_column_double(st, 2) == 2.5);
    assert_int_equal(sqlite3_column_int(st, 3), 1);
    assert_string_equal(sb_dbq_text(st, 4), "x!");
    assert_int_equal(sqlite3_column_int(st, 5), 1);
    assert_true(sqlite3_column_double(st, 6) == 5);
    assert_int_equal(sqlite3_column_int(st, 7), 1);   /* B: 0 is not measured */
    assert_string_equal(sb_dbq_text(st, 8), "integer13"); /* b: a whole byte count */
    assert_int_equal(sqlite3_column_int(st, 9), 1);   /* b: negative is unknown */
    assert_int_equal(sqlite3_column_int(st, 10), 7);
    sqlite3_finalize(st);
    assert_int_equal(sb_dbq_query(q, "SELECT ?1", &st, "testing", &err, "?", 1), -1);
    assert_non_null(strstr(err.msg, "while testing"));

    assert_int_equal(sb_dbq_run_has_measurement(q, run, "tiny", "batch=4", 2, "dp",
                                                "{\"ops\":[{\"name\":\"a\",\"config\":[2,1]}]}",
                                                &err), 1);
    assert_int_equal(sb_dbq_run_has_measurement(q, run, "tiny", "batch=4", 2, "dp", "{}", &err),
                     0);
    assert_int_equal(sb_dbq_run_has_search(q, run, "tiny", "batch=4", 2, "pase", &err), 0);
    sb_qrun info;
    assert_int_equal(sb_dbq_run_info(q, run, &info, &err), 0);
    assert_string_equal(info.field[5], "cpu");
    assert_string_equal(info.field[8], "shardbench bench");
    assert_string_equal(info.field[1], "not ended (died, or still running)");
    sb_qrun_free(&info);
    assert_int_equal(sb_dbq_run_info(q, run + 1, &info, &err), -1);
    assert_non_null(strstr(err.msg, "no run with id"));
    sb_qmeas *rows;
    int n;
    assert_int_equal(sb_dbq_run_measurements(q, run, &rows, &n, &err), 0);
    assert_int_equal(n, 1);
    char *json;
    int64_t model_id = 0;
    int p = 0;
    assert_int_equal(sb_dbq_strategy(q, rows[0].strategy_id, "testing", &model_id, &p, &json,
                                     &err), 1);
    assert_true(model_id == rows[0].model_id);
    assert_int_equal(p, 2);
    assert_non_null(strstr(json, "\"config\":[2,1]"));
    free(json);
    assert_int_equal(sb_dbq_strategy(q, rows[0].strategy_id + 100, "testing", NULL, NULL, &json,
                                     &err), 0);
    assert_null(json);
    sb_qtrend *t;
    int nt;
    assert_int_equal(sb_dbq_trend(q, rows[0].model_id, 2, run, &t, &nt, &err), 0);
    assert_int_equal(nt, 1);
    assert_string_equal(t[0].kind, "dp");
    assert_true(fabs(t[0].median - 0.30) < 1e-12);
    free(t);
    sb_qsearch *srch;
    assert_int_equal(sb_dbq_run_searches(q, run, &srch, &nt, &err), 0);
    assert_int_equal(nt, 0);
    free(srch);
    free(rows);
    sb_dbq_close(q);
}

/* MAPE and max error of the fidelity table: over the strategies with a
 * predicted time, at each one's least median; none (the reference model):
 * NaN. Predicted 0.1 and 0.2 s against 0.125 and 0.16 s measured: errors
 * 0.2 and 0.25. */
static void test_mape(void **state)
{
    (void)state;
    char path[PATH_MAX];
    path_in(path, sizeof path, "mape.db");
    sb_error err = {0};
    sb_db *db;
    if (sb_db_open(path, 0, &db, &err))
        fail_msg("%s", err.msg);
    sb_run_meta meta = {.backend = "cpu"};
    int64_t run, ref;
    assert_int_equal(sb_db_begin_run(db, &meta, &run, &err), 0);
    const double pred[3] = {0.1, 0.2, 0.2}, med[3] = {0.125, 0.2, 0.16};
    const char *cfg[3] = {"{\"a\":1}", "{\"a\":2}", "{\"a\":2}"}; /* the second twice */
    for (int i = 0; i < 3; i++) {
        sb_measurement_record r = {
            .run_id = run, .model = "tiny", .params = "batch=4", .nops = 3, .p = 2,
            .kind = "pase", .predicted_cost = pred[i] * 1e13, .configs_json = cfg[i],
            .step_median_s = med[i], .step_min_s = med[i], .step_max_s = med[i], .steps = 3,
            .status = "ok", .predicted_s = pred[i],
        };
        assert_int_equal(sb_db_record_measurement(db, &r, NULL, &err), 0);
    }
    assert_int_equal(sb_db_begin_run(db, &meta, &ref, &err), 0);
    record(db, ref, "dp", "{\"a\":1}", 300, 0.30);
    record(db, ref, "pase", "{\"a\":2}", 100, 0.10);
    sb_db_close(db);
    sb_dbq *q;
    if (sb_dbq_open(path, 1, 0, &q, &err))
        fail_msg("%s", err.msg);
    for (int k = 0; k < 2; k++) {
        sb_qmeas *rows;
        int n, nf;
        sb_qfidelity *f;
        assert_int_equal(sb_dbq_run_measurements(q, k ? ref : run, &rows, &n, &err), 0);
        assert_int_equal(sb_q_fidelity(q, k ? ref : run, rows, n, &f, &nf, &err), 0);
        assert_int_equal(nf, 1);
        if (k) {
            assert_true(isnan(f[0].mape) && isnan(f[0].max_error));
            assert_int_equal(f[0].timed, 0);
        } else {
            assert_int_equal(f[0].timed, 2);
            assert_true(fabs(f[0].mape - 0.225) < 1e-12);
            assert_true(fabs(f[0].max_error - 0.25) < 1e-12);
        }
        free(f);
        free(rows);
    }
    sb_dbq_close(q);
}

/* The probe-scaled figures: each prediction times its measurement's probe
 * over its profile launch's. Three strategies measured on probes 1.25, 0.8
 * and 0.3 times their profile launch's are predicted exactly once scaled
 * (and in the measured order); a fourth and a fifth have no profile probe
 * and count in the raw figures only. The fourth and fifth tie for the
 * least predicted cost: the predicted best is the faster of the two, 0.2 s,
 * 0.2 / 0.12 - 1 behind the fastest (the third). */
static void test_probe_scaled(void **state)
{
    (void)state;
    char path[PATH_MAX];
    sb_error err = {0};
    int64_t run;
    sb_db *db = new_run(path, sizeof path, "probe.db", &run);
    const double pred[5] = {0.1, 0.2, 0.4, 0.05, 0.05}, med[5] = {0.125, 0.16, 0.12, 0.5, 0.2};
    const double probe[5] = {0.0025, 0.0016, 0.0006, 0.002, 0.002};
    const double pprobe[5] = {0.002, 0.002, 0.002, 0, 0};
    const char *cfg[5] = {"{\"a\":1}", "{\"a\":2}", "{\"a\":3}", "{\"a\":4}", "{\"a\":5}"};
    const char *kind[5] = {"pase", "mcmc", "expert", "dp", "rand1"}; /* dp read first */
    for (int i = 0; i < 5; i++) {
        sb_measurement_record r = {
            .run_id = run, .model = "tiny", .params = "batch=4", .nops = 3, .p = 2,
            .kind = kind[i], .predicted_cost = pred[i] * 1e13, .configs_json = cfg[i],
            .step_median_s = med[i], .step_min_s = med[i], .step_max_s = med[i], .steps = 3,
            .status = "ok", .predicted_s = pred[i], .probe_s = probe[i],
            .profile_probe_s = pprobe[i],
        };
        assert_int_equal(sb_db_record_measurement(db, &r, NULL, &err), 0);
    }
    sb_db_close(db);
    sb_dbq *q;
    if (sb_dbq_open(path, 1, 0, &q, &err))
        fail_msg("%s", err.msg);
    sb_qmeas *rows;
    int n, nf;
    sb_qfidelity *f;
    assert_int_equal(sb_dbq_run_measurements(q, run, &rows, &n, &err), 0);
    assert_int_equal(sb_q_fidelity(q, run, rows, n, &f, &nf, &err), 0);
    assert_int_equal(nf, 1);
    /* raw: predicted 0.05, 0.05 < 0.1 < 0.2 < 0.4 against measured 0.5,
     * 0.2, 0.125, 0.16, 0.12: errors 0.9, 0.75, 0.2, 0.25, 2.333 */
    assert_int_equal(f[0].timed, 5);
    assert_true(fabs(f[0].mape - (0.9 + 0.75 + 0.2 + 0.25 + 0.4 / 0.12 - 1) / 5) < 1e-12);
    assert_int_equal(f[0].best_tied, 2);
    assert_string_equal(f[0].best_kind, "rand1");
    assert_string_equal(f[0].fastest_kind, "expert");
    assert_true(fabs(f[0].best_median - 0.2) < 1e-12 && fabs(f[0].fastest_median - 0.12) < 1e-12);
    assert_true(fabs(f[0].best_gap - (0.2 / 0.12 - 1)) < 1e-12);
    /* scaled: 0.125, 0.16, 0.12 against 0.125, 0.16, 0.12: exact, in order */
    assert_int_equal(f[0].probed, 3);
    assert_true(fabs(f[0].mape_probe) < 1e-12 && fabs(f[0].max_error_probe) < 1e-12);
    assert_true(fabs(f[0].rho_probe - 1.0) < 1e-12);
    free(f);
    free(rows);
    sb_dbq_close(q);
}

static void test_locked(void **state)
{
    (void)state;
    char path[PATH_MAX];
    sb_error err = {0};
    int64_t run;
    sb_db *db = new_run(path, sizeof path, "locked.db", &run);
    record(db, run, "dp", "{}", 1, 0.1);
    sb_db_close(db);
    /* another writer holds the file */
    sqlite3 *other;
    assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    sb_dbq *q;
    double t0 = sb_now();
    int rc = sb_dbq_open(path, 1, 200, &q, &err);
    if (rc == 0) { /* opening may not need the lock; writing does */
        rc = sb_dbq_record_correlation(q, run, "tiny", "batch=4", 2, 1, NAN, &err);
        sb_dbq_close(q);
    }
    assert_int_equal(rc, -1);
    assert_true(sb_now() - t0 >= 0.15);
    assert_non_null(strstr(err.msg, "database is locked"));
    assert_int_equal(err.code, SB_EXIT_INTERNAL); /* README: a locked database exits 1 */
    assert_non_null(strstr(err.msg, "locked.db"));
    sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(other);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM correlations"), 0);
}

static void test_refused_files(void **state)
{
    (void)state;
    char path[PATH_MAX];
    sb_error err = {0};
    sb_dbq *q;
    path_in(path, sizeof path, "missing.db");
    assert_int_equal(sb_dbq_open(path, 0, 0, &q, &err), -1);
    assert_non_null(strstr(err.msg, "missing.db: cannot open"));
    assert_int_equal(access(path, F_OK), -1); /* not created */

    path_in(path, sizeof path, "text.db");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("hello, this is not SQLite at all, but long enough\n", f);
    fclose(f);
    assert_int_equal(sb_dbq_open(path, 0, 0, &q, &err), -1);
    assert_non_null(strstr(err.msg, "not a database"));

    path_in(path, sizeof path, "newer.db");
    raw_exec(path, "PRAGMA user_version = 99; CREATE TABLE t (a);");
    assert_int_equal(sb_dbq_open(path, 0, 0, &q, &err), -1);
    assert_non_null(strstr(err.msg, "schema version 99 is newer"));
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 99);

    path_in(path, sizeof path, "foreign.db");
    raw_exec(path, "CREATE TABLE t (a);");
    assert_int_equal(sb_dbq_open(path, 0, 0, &q, &err), -1);
    assert_non_null(strstr(err.msg, "not a shardbench results database"));
}

static int rm_entry(const char *p, const struct stat *s, int flag, struct FTW *ftw)
{
    (void)s, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/sb-query-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_values),      cmocka_unit_test(test_json_bad),
        cmocka_unit_test(test_spearman),         cmocka_unit_test(test_median),
        cmocka_unit_test(test_migrate_v1_to_v2), cmocka_unit_test(test_stored_rho_and_kinds),
        cmocka_unit_test(test_locked),           cmocka_unit_test(test_refused_files),
        cmocka_unit_test(test_bind_and_named_reads), cmocka_unit_test(test_mape),
        cmocka_unit_test(test_probe_scaled),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nftw(g_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return rc;
}
