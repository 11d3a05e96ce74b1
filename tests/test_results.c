/* tests/test_results.c: cmocka tests of the results database (results/db.c).
 *
 * Mostly the failures: garbage and damaged files (left byte-for-byte as they
 * were), a database locked by another connection, a newer schema, a foreign
 * file that cannot be migrated (rolled back). Every test works in its own
 * files under one mkdtemp directory, removed at the end. */
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
    assert_int_equal(err.code, SB_EXIT_INPUT);
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

/* A version-0 file that already has a `runs` table is not ours: the
 * migration fails and leaves nothing of itself behind. */
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
    assert_null(db);
    expect_error(&err, path, "cannot migrate to schema version 1");
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_int_equal(raw_int(path, "PRAGMA user_version"), 0);
    assert_int_equal(raw_int(path, "SELECT count(*) FROM sqlite_master"), 1);
    assert_int_equal(raw_int(path, "SELECT x FROM runs"), 1);
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
        cmocka_unit_test(test_bad_paths),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
