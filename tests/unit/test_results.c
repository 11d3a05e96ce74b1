/* tests/unit/test_results.c: cmocka tests of the results database (results/db.c).
 *
 * Mostly the failures: garbage and damaged files (left byte-for-byte as they
 * were), a database locked by another connection, a newer schema, a foreign
 * file that cannot be migrated (rolled back); runs and measurements, with
 * strategies rows reused, and records that fail leaving no row behind. Every
 * test works in its own files under one mkdtemp directory, removed at the
 * end. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "shardbench/results.h"
#include "../../results/dbq_int.h"

static char g_dir[PATH_MAX];

/* ------------------------------------------------------------ helpers -- */

static void path_in(char *buf, size_t n, const char *name)
{
    int len = snprintf(buf, n, "%s/%s", g_dir, name);
    assert_true(len > 0 && (size_t)len < n);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Whole file, malloc'd; *n gets its size. */
static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size >= 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return buf;
}

/* Pseudo-random bytes that are no database. */
static void fill_garbage(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (unsigned char)(seed >> 16);
    }
}

/* Fails unless err names `path` and says `what`. */
static void expect_error(const sb_error *err, const char *path,
                         const char *what)
{
    if (err->code != SB_EXIT_INPUT && err->code != SB_EXIT_INTERNAL)
        fail_msg("bad error code %d (%s)", err->code, err->msg);
    if (!strstr(err->msg, path))
        fail_msg("message does not name %s: %s", path, err->msg);
    if (what && !strstr(err->msg, what))
        fail_msg("message does not say \"%s\": %s", what, err->msg);
}

static sqlite3 *raw_open(const char *path)
{
    sqlite3 *h = NULL;
    int rc = sqlite3_open_v2(path, &h,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    assert_int_equal(rc, SQLITE_OK);
    return h;
}

static void raw_exec(sqlite3 *h, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : "?");
}

/* First column of the first row of sql, run on its own connection. */
static int64_t raw_int(const char *path, const char *sql)
{
    sqlite3 *h = raw_open(path);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* An SQLite file made by sqlite3 itself: no tables, user_version `version`,
 * rollback journal. */
static void make_plain_sqlite(const char *path, int version)
{
    char sql[128];
    sqlite3 *h = raw_open(path);
    snprintf(sql, sizeof sql, "CREATE TABLE t(x); DROP TABLE t; "
             "PRAGMA user_version = %d;", version);
    raw_exec(h, sql);
    sqlite3_close(h);
}

static sb_search_record sample(const char *model, const char *params)
{
    sb_search_record r = {
        .source = "bench", .model = model, .model_path = "models/x.model",
        .params = params, .p = 8, .algo = "pase", .tflops = 10, .gbs = 16,
        .cutoff = 4, .total_cost = 1.5e12, .seconds = 0.25, .nops = 42,
        .max_configs = 30, .max_dep_set = 3, .peak_table_bytes = 4096,
        .peak_rss_bytes = 0, .strategy_json = "{\"ops\":[]}",
    };
    return r;
}

static sb_db *open_ok(const char *path, int busy_ms)
{
    sb_db *db = NULL;
    sb_error err = {0};
    if (sb_db_open(path, busy_ms, &db, &err) != 0)
        fail_msg("open %s: %s", path, err.msg);
    assert_non_null(db);
    return db;
}

static void record_ok(sb_db *db, const sb_search_record *r, int64_t *id)
{
    sb_error err = {0};
    if (sb_db_record_search(db, r, id, &err) != 0)
        fail_msg("record: %s", err.msg);
}

static int64_t count(sb_db *db)
{
    int64_t n = -1;
    sb_error err = {0};
    if (sb_db_count_searches(db, &n, &err) != 0)
        fail_msg("count: %s", err.msg);
    return n;
}

/* First column of the first row of sql as text (NULL stays NULL), run on
 * its own connection; malloc'd. */
static char *raw_text(const char *path, const char *sql)
{
    sqlite3 *h = raw_open(path);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    const char *t = (const char *)sqlite3_column_text(st, 0);
    char *v = t ? strdup(t) : NULL;
    assert_true(!t || v);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* Rows in each table a measurement touches. */
typedef struct {
    int64_t runs, models, strategies, measurements;
} row_counts;

static row_counts counts_of(const char *path)
{
    row_counts c = {
        raw_int(path, "SELECT count(*) FROM runs"),
        raw_int(path, "SELECT count(*) FROM models"),
        raw_int(path, "SELECT count(*) FROM strategies"),
        raw_int(path, "SELECT count(*) FROM measurements"),
    };
    return c;
}

static void expect_counts(const row_counts *a, const row_counts *b)
{
    assert_int_equal(a->runs, b->runs);
    assert_int_equal(a->models, b->models);
    assert_int_equal(a->strategies, b->strategies);
    assert_int_equal(a->measurements, b->measurements);
}

static int64_t begin_ok(sb_db *db, const char *host)
{
    sb_run_meta m = {
        .host = host, .backend = "cpu", .devices = "4 x CPU (2 cores)",
        .versions = "openblas=0.3.21", .command_line = "shardbench run x",
    };
    int64_t id = 0;
    sb_error err = {0};
    if (sb_db_begin_run(db, &m, &id, &err) != 0)
        fail_msg("begin run: %s", err.msg);
    assert_true(id > 0);
    return id;
}

static sb_measurement_record measurement(int64_t run_id, const char *kind)
{
    sb_measurement_record r = {
        .run_id = run_id, .model = "mlp", .model_path = "models/mlp.model",
        .params = "batch=128", .nops = 12, .p = 4, .kind = kind,
        .predicted_cost = 2.5e9, .predicted_mem_bytes = 0,
        .configs_json = "{\"fc1\":[1,4]}", .mesh_layout = "1x4",
        .step_median_s = 0.5, .step_min_s = 0.25, .step_max_s = 1.0,
        .steps = 10, .status = "ok", .message = NULL,
        .peak_mem_bytes = 1048576,
    };
    return r;
}

static int64_t measure_ok(sb_db *db, const sb_measurement_record *r)
{
    int64_t id = 0;
    sb_error err = {0};
    if (sb_db_record_measurement(db, r, &id, &err) != 0)
        fail_msg("record measurement: %s", err.msg);
    assert_true(id > 0);
    return id;
}

/* Opening `path` must fail, say `what`, and leave the file as it was. */
static void expect_open_fails_untouched(const char *path, const char *what)
{
    size_t n0, n1;
    unsigned char *before = read_file(path, &n0);
    sb_db *db = NULL;
    sb_error err = {0};
    assert_int_equal(sb_db_open(path, 100, &db, &err), -1);
    assert_null(db);
    expect_error(&err, path, what);
    unsigned char *after = read_file(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
}

/* -------------------------------------------------------------- tests -- */

static void test_create_and_reopen(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "new/sub/dir/a.db");  /* dirs made on open */
    sb_db *db = open_ok(path, 0);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    sb_search_record r = sample("mlp", "batch=128");
    record_ok(db, &r, NULL);
    sb_db_close(db);

    assert_int_equal(raw_int(path, "PRAGMA user_version"),
                     SB_DB_SCHEMA_VERSION);
    db = open_ok(path, 0);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    assert_int_equal(count(db), 1);
    sb_db_close(db);

    sqlite3 *h = raw_open(path);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st,
                                        NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(h);
}

static void test_record_three_and_count(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "three.db");
    sb_db *db = open_ok(path, 0);
    assert_int_equal(count(db), 0);
    sb_search_record a = sample("mlp", "batch=128");
    sb_search_record b = sample("mlp", "batch=256");
    sb_search_record c = sample("mlp", "batch=128");
    c.algo = "bf";
    c.peak_rss_bytes = 1e8;
    int64_t ids[3];
    record_ok(db, &a, &ids[0]);
    record_ok(db, &b, &ids[1]);
    record_ok(db, &c, &ids[2]);
    assert_true(ids[0] < ids[1] && ids[1] < ids[2]);
    assert_int_equal(count(db), 3);
    sb_db_close(db);

    /* one models row per (name, params); values as given */
    assert_int_equal(raw_int(path, "SELECT count(*) FROM models"), 2);
    assert_int_equal(raw_int(path, "SELECT count(DISTINCT model_id) FROM "
                             "search_runs"), 2);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM search_runs WHERE "
                             "peak_rss_bytes IS NULL"), 2);
    assert_int_equal(raw_int(path, "SELECT peak_rss_bytes FROM search_runs "
                             "WHERE algo = 'bf'"), 100000000);
    assert_int_equal(raw_int(path, "SELECT sum(p) + sum(nops) FROM "
                             "search_runs"), 3 * (8 + 42));
    assert_int_equal(raw_int(path, "SELECT total_cost = 1.5e12 AND "
                             "created_at LIKE '20%Z' FROM search_runs "
                             "LIMIT 1"), 1);
}

static void test_bad_record(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "bad_record.db");
    sb_db *db = open_ok(path, 0);
    sb_search_record r = sample(NULL, "");
    sb_error err = {0};
    assert_int_equal(sb_db_record_search(db, &r, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    expect_error(&err, path, "no model name");
    r = sample("mlp", "");
    r.p = 0;
    assert_int_equal(sb_db_record_search(db, &r, NULL, &err), -1);
    expect_error(&err, path, "p below 1");
    assert_int_equal(count(db), 0);
    sb_db_close(db);
}

static void test_garbage_file(void **state)
{
    (void)state;
    char path[PATH_MAX + 64], side[PATH_MAX + 80];
    unsigned char junk[4096];
    path_in(path, sizeof path, "garbage.db");
    fill_garbage(junk, sizeof junk, 7);
    write_file(path, junk, sizeof junk);
    expect_open_fails_untouched(path, "not a database");
    snprintf(side, sizeof side, "%s-wal", path);
    assert_false(exists(side));
    snprintf(side, sizeof side, "%s-shm", path);
    assert_false(exists(side));

    /* a short text file */
    path_in(path, sizeof path, "notes.txt");
    write_file(path, "hello\n", 6);
    expect_open_fails_untouched(path, "not a database");
}

/* An SQLite header over garbage: SQLite itself must say no. */
static void test_garbage_after_header(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    unsigned char junk[8192];
    path_in(path, sizeof path, "header_then_garbage.db");
    fill_garbage(junk, sizeof junk, 11);
    memcpy(junk, "SQLite format 3", 16);
    write_file(path, junk, sizeof junk);
    expect_open_fails_untouched(path, NULL);
}

/* A real database whose schema page is overwritten. */
static void test_damaged_database(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "damaged.db");
    sb_db *db = open_ok(path, 0);
    sb_search_record r = sample("mlp", "");
    record_ok(db, &r, NULL);
    sb_db_close(db);

    size_t n;
    unsigned char *buf = read_file(path, &n);
    assert_true(n > 4096);
    fill_garbage(buf + 100, 4096 - 100, 3);
    write_file(path, buf, n);
    free(buf);
    expect_open_fails_untouched(path, NULL);
}

static void test_locked_database(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "locked.db");
    sb_db *db = open_ok(path, 100);
    sqlite3 *other = raw_open(path);
    raw_exec(other, "BEGIN EXCLUSIVE");

    sb_search_record r = sample("mlp", "");
    sb_error err = {0};
    assert_int_equal(sb_db_record_search(db, &r, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INTERNAL);  /* cli/README: exit 1 */
    expect_error(&err, path, "database is locked");
    expect_error(&err, path, "waited 100 ms");
    assert_int_equal(count(db), 0);  /* WAL: reading still works */

    raw_exec(other, "ROLLBACK");
    sqlite3_close(other);
    int64_t id = 0;
    record_ok(db, &r, &id);
    assert_true(id > 0);
    assert_int_equal(count(db), 1);
    sb_db_close(db);
}

/* A file that another connection holds exclusively (rollback journal, so
 * even reading waits) cannot be opened; once released, it can. */
static void test_locked_on_open(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "locked_on_open.db");
    make_plain_sqlite(path, 0);
    sqlite3 *other = raw_open(path);
    raw_exec(other, "BEGIN EXCLUSIVE");

    sb_db *db = NULL;
    sb_error err = {0};
    assert_int_equal(sb_db_open(path, 100, &db, &err), -1);
    assert_null(db);
    expect_error(&err, path, "database is locked");
    assert_int_equal(err.code, SB_EXIT_INTERNAL);

    raw_exec(other, "COMMIT");
    sqlite3_close(other);
    db = open_ok(path, 100);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    sb_db_close(db);
}

static void test_newer_version(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "newer.db");
    make_plain_sqlite(path, 99);
    expect_open_fails_untouched(path, "schema version 99");
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 99);
}

static void test_migrate_empty_sqlite_file(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "empty_v0.db");
    make_plain_sqlite(path, 0);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 0);

    sb_db *db = open_ok(path, 0);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    sb_search_record r = sample("mlp", "");
    record_ok(db, &r, NULL);
    assert_int_equal(count(db), 1);
    sb_db_close(db);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM sqlite_master "
                             "WHERE type = 'table' AND name IN ('runs', "
                             "'models', 'search_runs', 'strategies', "
                             "'measurements')"), 5);
}

static void test_migrate_zero_byte_file(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "zero.db");
    write_file(path, "", 0);
    sb_db *db = open_ok(path, 0);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    sb_db_close(db);
}

/* A version-0 file that already has a `runs` table is not ours: even
 * adopted, the migration fails and leaves nothing of itself behind. */
static void test_failed_migration_rolls_back(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "foreign.db");
    sqlite3 *h = raw_open(path);
    raw_exec(h, "CREATE TABLE runs (x); INSERT INTO runs VALUES (1);");
    sqlite3_close(h);

    sb_db *db = NULL;
    sb_error err = {0};
    assert_int_equal(sb_db_open(path, 100, &db, &err), -1);
    expect_error(&err, path, "not a shardbench database");
    assert_int_equal(sb_db_open_flags(path, 100, SB_DB_ADOPT, &db, &err), -1);
    assert_null(db);
    expect_error(&err, path, "cannot migrate to schema version 1");
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 0);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM sqlite_master"), 1);
    assert_int_equal(raw_int(path, "SELECT x FROM runs"), 1);
}

/* Another program's SQLite file (tables, user_version 0) is refused,
 * named, and left byte-for-byte as it was; adopted on request, its tables
 * stay beside shardbench's. */
static void test_foreign_database_refused(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "their_app.db");
    sqlite3 *h = raw_open(path);
    raw_exec(h, "CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL);"
             "INSERT INTO invoices (total) VALUES (12.5);"
             "CREATE TABLE customers (name TEXT);");
    sqlite3_close(h);
    size_t n0, n1;
    unsigned char *before = read_file(path, &n0);

    sb_db *db = NULL;
    sb_error err = {0};
    assert_int_equal(sb_db_open(path, 100, &db, &err), -1);
    assert_null(db);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    expect_error(&err, path, "not a shardbench database");
    expect_error(&err, path, "customers, invoices");
    expect_error(&err, path, "--adopt-db");
    unsigned char *after = read_file(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);

    /* a file at one of our versions without our tables is not ours either */
    char other[PATH_MAX + 64];
    path_in(other, sizeof other, "their_versioned.db");
    h = raw_open(other);
    raw_exec(h, "CREATE TABLE t (x); PRAGMA user_version = 1;");
    sqlite3_close(h);
    assert_int_equal(sb_db_open_flags(other, 100, SB_DB_ADOPT, &db, &err), -1);
    expect_error(&err, other, "not a shardbench database");

    if (sb_db_open_flags(path, 100, SB_DB_ADOPT, &db, &err) != 0)
        fail_msg("adopt %s: %s", path, err.msg);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    sb_search_record r = sample("mlp", "");
    record_ok(db, &r, NULL);
    sb_db_close(db);
    assert_int_equal(raw_int(path, "SELECT total * 2 FROM invoices"), 25);
    db = open_ok(path, 100);  /* ours from now on, no flag needed */
    sb_db_close(db);
}

/* A new database in a folder that refuses writes: the error says
 * permission denied and names the folder (not "No such file"). As root,
 * only a read-only mount refuses; without one the test checks nothing. */
static void test_readonly_folder(void **state)
{
    (void)state;
    char dir[PATH_MAX + 64], path[PATH_MAX + 80];
    path_in(dir, sizeof dir, "ro_folder");
    assert_int_equal(mkdir(dir, 0777), 0);
    int mounted = 0;
    if (geteuid() == 0) {
        char cmd[PATH_MAX + 128];
        snprintf(cmd, sizeof cmd, "mount -t tmpfs -o ro,size=64k tmpfs '%s' "
                 "2>/dev/null", dir);
        mounted = system(cmd) == 0;
        if (!mounted) {
            rmdir(dir);
            skip();
        }
    } else {
        assert_int_equal(chmod(dir, 0555), 0);
    }
    snprintf(path, sizeof path, "%s/new.db", dir);
    sb_db *db = NULL;
    sb_error err = {0};
    int rc = sb_db_open(path, 100, &db, &err);
    if (mounted) {
        char cmd[PATH_MAX + 128];
        snprintf(cmd, sizeof cmd, "umount '%s'", dir);
        assert_int_equal(system(cmd), 0);
    } else {
        chmod(dir, 0755);
    }
    assert_int_equal(rc, -1);
    assert_null(db);
    expect_error(&err, path, "permission denied");
    expect_error(&err, path, dir);
    if (strstr(err.msg, "No such file"))
        fail_msg("says no such file: %s", err.msg);
    assert_false(exists(path));
}

/* A new file at path made by schema.sql's blocks up to version v (as a
 * shardbench of that version made it), open raw. */
static sqlite3 *open_at_version(const char *path, int v)
{
    size_t n;
    char *schema = (char *)read_file(SB_SOURCE_DIR "/results/schema.sql", &n), key[64];
    schema[n] = '\0';
    snprintf(key, sizeof key, "PRAGMA user_version = %d;", v);
    char *end = strstr(schema, key);
    assert_non_null(end);
    end[strlen(key)] = '\0';
    sqlite3 *h = raw_open(path);
    raw_exec(h, schema);
    free(schema);
    return h;
}

/* A version-2 file (made by the released blocks of schema.sql) migrates
 * to 3 and on: its measurements kept, 'diverged' accepted afterwards. */
static void test_migrate_2_to_3_diverged(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "v2.db");
    sqlite3 *h = open_at_version(path, 2);
    raw_exec(h, "INSERT INTO runs (id, started_at, host, git_commit, backend) VALUES "
             "(1, '2026-01-01T00:00:00Z', 'h', 'abc', 'cpu');"
             "INSERT INTO models (id, name, params, nops) VALUES (1, 'm', '', 1);"
             "INSERT INTO strategies (id, model_id, p, kind, configs_json) "
             "VALUES (1, 1, 2, 'dp', '{}');"
             "INSERT INTO measurements (run_id, strategy_id, steps, status) "
             "VALUES (1, 1, 3, 'ok');");
    sqlite3_close(h);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 2);

    sb_db *db = open_ok(path, 0);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM measurements WHERE "
                             "run_id = 1 AND steps = 3 AND status = 'ok'"), 1);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE "
                             "type = 'index' AND name IN "
                             "('measurements_by_run', "
                             "'measurements_by_strategy')"), 2);
    sb_measurement_record r = measurement(1, "dp");
    r.status = "diverged";
    r.message = "loss is nan at step 4";
    measure_ok(db, &r);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM measurements WHERE "
                             "status = 'diverged'"), 1);
    sb_db_close(db);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
}

/* A version-8 file with a profile launch and a priced measurement
 * migrates to 9: both kept, their new probe columns NULL. */
static void test_migrate_8_to_9_probes(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "v8.db");
    sqlite3 *h = open_at_version(path, 8);
    raw_exec(h, "INSERT INTO runs (id, started_at, host, git_commit, backend) VALUES "
             "(1, '2026-01-01T00:00:00Z', 'h', 'abc', 'cpu');"
             "INSERT INTO models (id, name, params, nops) VALUES (1, 'm', '', 1);"
             "INSERT INTO strategies (id, model_id, p, kind, configs_json) "
             "VALUES (1, 1, 2, 'dp', '{}');"
             "INSERT INTO measurements (run_id, strategy_id, steps, status, predicted_s) "
             "VALUES (1, 1, 3, 'ok', 0.5);"
             "INSERT INTO profiles (backend, machine, ranks, precision, model, params, "
             "strategies, steps, seed, total_s, relay_msg_s, relay_word_s, fixed_s, "
             "update_s_per_elem) VALUES ('cpu', 'box', 2, 'fp32', 'm', '', 4, 3, 1, 0.2, 0, "
             "0, 0, 0);");
    sqlite3_close(h);
    sb_db *db = open_ok(path, 0);
    assert_int_equal(sb_db_schema_version(db), SB_DB_SCHEMA_VERSION);
    sb_db_close(db);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM profiles WHERE total_s = 0.2 AND "
                             "probe_s IS NULL"), 1);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM measurements WHERE predicted_s = 0.5 "
                             "AND profile_probe_s IS NULL"), 1);
}

static void test_bad_paths(void **state)
{
    (void)state;
    char file[PATH_MAX + 64], path[PATH_MAX + 80];
    sb_db *db = NULL;
    sb_error err = {0};

    path_in(file, sizeof file, "plain_file");
    write_file(file, "data", 4);
    snprintf(path, sizeof path, "%s/x.db", file);  /* parent is a file */
    assert_int_equal(sb_db_open(path, 100, &db, &err), -1);
    expect_error(&err, path, NULL);
    assert_null(db);
    expect_open_fails_untouched(file, "not a database");

    path_in(path, sizeof path, "a_directory.db");
    assert_int_equal(mkdir(path, 0777), 0);
    assert_int_equal(sb_db_open(path, 100, &db, &err), -1);
    expect_error(&err, path, "is a directory");

    assert_int_equal(sb_db_open("", 100, &db, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
}

static void test_begin_end_run(void **state)
{
    (void)state;
    char path[PATH_MAX + 64], sql[512], host[256];
    path_in(path, sizeof path, "runs.db");
    sb_db *db = open_ok(path, 0);
    int64_t a = begin_ok(db, NULL);  /* host from gethostname() */
    int64_t b = begin_ok(db, "node7");
    assert_true(a < b);

    snprintf(sql, sizeof sql, "SELECT ended_at FROM runs WHERE id = %lld",
             (long long)a);
    assert_null(raw_text(path, sql));
    sb_error err = {0};
    if (sb_db_end_run(db, a, &err) != 0)
        fail_msg("end run: %s", err.msg);
    snprintf(sql, sizeof sql, "SELECT ended_at LIKE '20%%Z' AND ended_at >= "
             "started_at FROM runs WHERE id = %lld", (long long)a);
    assert_int_equal(raw_int(path, sql), 1);
    snprintf(sql, sizeof sql, "SELECT ended_at IS NULL FROM runs WHERE "
             "id = %lld", (long long)b);
    assert_int_equal(raw_int(path, sql), 1);  /* the other run still runs */

    /* facts from the build and the machine */
    assert_int_equal(gethostname(host, sizeof host), 0);
    host[sizeof host - 1] = '\0';
    snprintf(sql, sizeof sql, "SELECT host FROM runs WHERE id = %lld",
             (long long)a);
    char *t = raw_text(path, sql);
    assert_string_equal(t, host);
    free(t);
    snprintf(sql, sizeof sql, "SELECT host FROM runs WHERE id = %lld",
             (long long)b);
    t = raw_text(path, sql);
    assert_string_equal(t, "node7");
    free(t);
    t = raw_text(path, "SELECT git_commit FROM runs LIMIT 1");
    assert_string_equal(t, sb_git_commit());
    free(t);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM runs WHERE "
                             "compiler GLOB 'GNU [0-9]*.[0-9]*.[0-9]*' OR "
                             "compiler GLOB 'Clang [0-9]*.[0-9]*.[0-9]*'"), 2);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM runs WHERE "
                             "backend = 'cpu' AND devices = '4 x CPU (2 "
                             "cores)' AND versions = 'openblas=0.3.21' AND "
                             "command_line = 'shardbench run x' AND "
                             "started_at LIKE '20%Z'"), 2);

    /* NULL fields stay NULL; no backend or no run is an error */
    sb_run_meta m = {.backend = "cuda"};
    int64_t c = 0;
    assert_int_equal(sb_db_begin_run(db, &m, &c, &err), 0);
    snprintf(sql, sizeof sql, "SELECT devices IS NULL AND versions IS NULL "
             "AND command_line IS NULL FROM runs WHERE id = %lld",
             (long long)c);
    assert_int_equal(raw_int(path, sql), 1);
    m.backend = NULL;
    assert_int_equal(sb_db_begin_run(db, &m, &c, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    expect_error(&err, path, "no backend");
    assert_int_equal(sb_db_end_run(db, 9999, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    expect_error(&err, path, "cannot end run 9999: no such run");
    assert_int_equal(raw_int(path, "SELECT count(*) FROM runs"), 3);
    sb_db_close(db);
}

static void test_measurements_share_strategy(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "measure.db");
    sb_db *db = open_ok(path, 0);
    int64_t run = begin_ok(db, "node1");

    sb_measurement_record r1 = measurement(run, "pase");
    sb_measurement_record r2 = measurement(run, "pase");
    r2.step_median_s = 0.75;
    r2.predicted_cost = 9e9;  /* same strategy: the first row is kept */
    int64_t m1 = measure_ok(db, &r1);
    int64_t m2 = measure_ok(db, &r2);
    assert_true(m1 < m2);
    row_counts c = counts_of(path);
    assert_int_equal(c.models, 1);
    assert_int_equal(c.strategies, 1);
    assert_int_equal(c.measurements, 2);
    assert_int_equal(raw_int(path, "SELECT count(DISTINCT strategy_id) FROM "
                             "measurements"), 1);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM strategies WHERE "
                             "p = 4 AND kind = 'pase' AND predicted_cost = "
                             "2.5e9 AND predicted_mem_bytes IS NULL AND "
                             "mesh_layout = '1x4'"), 1);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM measurements WHERE "
                             "status = 'ok' AND message IS NULL AND steps = "
                             "10 AND step_min_s = 0.25 AND step_max_s = 1.0 "
                             "AND peak_mem_bytes = 1048576"), 2);
    assert_int_equal(raw_int(path, "SELECT sum(step_median_s) * 4 FROM "
                             "measurements"), 5);

    /* another kind, other configs or another p: a new strategies row */
    sb_measurement_record r3 = measurement(run, "dp");
    measure_ok(db, &r3);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM strategies"), 2);
    r3.configs_json = "{\"fc1\":[4,1]}";
    measure_ok(db, &r3);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM strategies"), 3);
    r3.p = 8;
    measure_ok(db, &r3);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM strategies"), 4);

    /* a failed attempt: no step times, the message kept */
    sb_measurement_record r4 = measurement(run, "pase");
    r4.status = "oom";
    r4.steps = 0;
    r4.message = "out of memory on rank 2";
    r4.peak_mem_bytes = -1;
    int64_t m4 = measure_ok(db, &r4);
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT step_median_s IS NULL AND step_min_s "
             "IS NULL AND step_max_s IS NULL AND peak_mem_bytes IS NULL AND "
             "status = 'oom' AND message = 'out of memory on rank 2' AND "
             "strategy_id = (SELECT strategy_id FROM measurements WHERE id = "
             "%lld) FROM measurements WHERE id = %lld", (long long)m1,
             (long long)m4);
    assert_int_equal(raw_int(path, sql), 1);
    c = counts_of(path);
    assert_int_equal(c.runs, 1);
    assert_int_equal(c.models, 1);
    assert_int_equal(c.strategies, 4);
    assert_int_equal(c.measurements, 6);
    sb_db_close(db);
}

static void test_bad_measurement_leaves_nothing(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "bad_measure.db");
    sb_db *db = open_ok(path, 0);
    int64_t run = begin_ok(db, "node1");
    sb_measurement_record ok = measurement(run, "pase");
    measure_ok(db, &ok);
    row_counts before = counts_of(path), after;
    sb_error err = {0};

    /* new model and kind, so a partial write would show in every count */
    sb_measurement_record r = measurement(run, "expert");
    r.model = "resnet50";
    r.status = "crashed";
    assert_int_equal(sb_db_record_measurement(db, &r, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    expect_error(&err, path, "status \"crashed\" is not ok, oom, error, "
                 "timeout or diverged");
    r.status = NULL;
    assert_int_equal(sb_db_record_measurement(db, &r, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    expect_error(&err, path, "status");
    after = counts_of(path);
    expect_counts(&before, &after);

    r.status = "ok";
    r.run_id = run + 1000;
    assert_int_equal(sb_db_record_measurement(db, &r, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    expect_error(&err, path, "no run with id 1001");
    after = counts_of(path);
    expect_counts(&before, &after);

    /* the measurements row fails after the models and strategies rows went
     * in: all of it is rolled back */
    sqlite3 *h = raw_open(path);
    raw_exec(h, "CREATE TRIGGER no_more BEFORE INSERT ON measurements "
             "BEGIN SELECT RAISE(ABORT, 'test says no'); END;");
    sqlite3_close(h);
    r.run_id = run;
    assert_int_equal(sb_db_record_measurement(db, &r, NULL, &err), -1);
    expect_error(&err, path, "recording a measurement (measurements row)");
    expect_error(&err, path, "test says no");
    after = counts_of(path);
    expect_counts(&before, &after);
    h = raw_open(path);
    raw_exec(h, "DROP TRIGGER no_more;");
    sqlite3_close(h);

    /* and the connection is fine afterwards */
    measure_ok(db, &r);
    after = counts_of(path);
    assert_int_equal(after.models, before.models + 1);
    assert_int_equal(after.strategies, before.strategies + 1);
    assert_int_equal(after.measurements, before.measurements + 1);
    sb_db_close(db);
}

static void test_locked_measurement(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    path_in(path, sizeof path, "locked_measure.db");
    sb_db *db = open_ok(path, 100);
    int64_t run = begin_ok(db, "node1");
    row_counts before = counts_of(path), after;
    sqlite3 *other = raw_open(path);
    raw_exec(other, "BEGIN EXCLUSIVE");

    sb_measurement_record r = measurement(run, "pase");
    sb_error err = {0};
    assert_int_equal(sb_db_record_measurement(db, &r, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INTERNAL);  /* cli/README: exit 1 */
    expect_error(&err, path, "database is locked");
    expect_error(&err, path, "waited 100 ms");
    expect_error(&err, path, "recording a measurement");
    after = counts_of(path);  /* WAL: reading still works */
    expect_counts(&before, &after);

    raw_exec(other, "ROLLBACK");
    sqlite3_close(other);
    measure_ok(db, &r);
    after = counts_of(path);
    assert_int_equal(after.models, before.models + 1);
    assert_int_equal(after.strategies, before.strategies + 1);
    assert_int_equal(after.measurements, before.measurements + 1);
    sb_db_close(db);
}

/* ---------------------------------------------------------------- main -- */

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup_dir(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/test_results.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    return nftw(g_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_and_reopen),
        cmocka_unit_test(test_record_three_and_count),
        cmocka_unit_test(test_bad_record),
        cmocka_unit_test(test_garbage_file),
        cmocka_unit_test(test_garbage_after_header),
        cmocka_unit_test(test_damaged_database),
        cmocka_unit_test(test_locked_database),
        cmocka_unit_test(test_locked_on_open),
        cmocka_unit_test(test_newer_version),
        cmocka_unit_test(test_migrate_empty_sqlite_file),
        cmocka_unit_test(test_migrate_zero_byte_file),
        cmocka_unit_test(test_failed_migration_rolls_back),
        cmocka_unit_test(test_foreign_database_refused),
        cmocka_unit_test(test_readonly_folder),
        cmocka_unit_test(test_migrate_2_to_3_diverged),
        cmocka_unit_test(test_migrate_8_to_9_probes),
        cmocka_unit_test(test_bad_paths),
        cmocka_unit_test(test_begin_end_run),
        cmocka_unit_test(test_measurements_share_strategy),
        cmocka_unit_test(test_bad_measurement_leaves_nothing),
        cmocka_unit_test(test_locked_measurement),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
