/* results/db.c: the SQLite results database (see results/README.md).
 *
 * Opens or creates the file, checks it, switches it to WAL, and migrates its
 * schema forward with the version blocks of results/schema.sql (compiled in
 * as sb_schema_sql[]). Records searches, runs and measurements, one
 * transaction each. Every error names the database file and what went
 * wrong. It never deletes, truncates or rewrites a file that is not a
 * shardbench database. Not a query layer: reports and plots read the file
 * with SQL of their own. */
#include "shardbench/results.h"
#include "dbq_int.h"
#include "shardbench/query.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "schema_sql.h"

#define SB_DB_DEFAULT_BUSY_MS 5000

struct sb_db {
    sqlite3 *h;
    char *path;   /* as given by the caller; every message starts with it */
    int busy_ms;  /* busy timeout in effect */
};

/* ------------------------------------------------------------- errors -- */

/* sqlite's own words for the last error, plus the OS error if there is one. */
static void error_detail(const sb_db *db, int rc, char *buf, size_t n)
{
    const char *msg = db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc);
    int sys = db->h ? sqlite3_system_errno(db->h) : 0;
    if (sys)
        snprintf(buf, n, "%s: %s", msg, strerror(sys));
    else
        snprintf(buf, n, "%s", msg);
}

/* The folder that holds path (".", when it has no '/') into buf. */
static void parent_dir(const char *path, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, n, ".");
    else if (slash == path)
        snprintf(buf, n, "/");
    else
        snprintf(buf, n, "%.*s", (int)(slash - path), path);
}

/* SQLite cannot open or create the file: says why in the OS's words, and
 * names the folder when it is the folder that refuses (a new file in a
 * read-only folder). */
static int cantopen(const sb_db *db, const char *detail, const char *doing,
                    sb_error *err)
{
    char dir[4096];
    struct stat st;
    parent_dir(db->path, dir, sizeof dir);
    if (stat(db->path, &st) != 0 && errno == ENOENT && access(dir, W_OK) != 0 &&
        (errno == EACCES || errno == EROFS || errno == EPERM))
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot create the database: "
                       "permission denied: folder %s is not writable%s",
                       db->path, dir, errno == EROFS ? " (read-only file "
                       "system)" : "");
    if (access(db->path, F_OK) == 0 && access(db->path, R_OK | W_OK) != 0 &&
        errno == EACCES)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot open the file: "
                       "permission denied while %s", db->path, doing);
    return sb_fail(err, SB_EXIT_INPUT, "%s: cannot open the file (%s) "
                   "while %s", db->path, detail, doing);
}

/* Fails with a message for sqlite result rc, met while `doing`. */
static int db_fail(const sb_db *db, int rc, const char *doing, sb_error *err)
{
    char d[300];
    const char *p = db->path;
    error_detail(db, rc, d, sizeof d);
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return sb_fail(err, SB_EXIT_INTERNAL,
                       "%s: database is locked (another process holds it; "
                       "waited %d ms) while %s", p, db->busy_ms, doing);
    case SQLITE_NOTADB:
        return sb_fail(err, SB_EXIT_INPUT,
                       "%s: file is not a database (damaged or not SQLite) "
                       "while %s", p, doing);
    case SQLITE_CORRUPT:
        return sb_fail(err, SB_EXIT_INPUT,
                       "%s: database is damaged (%s) while %s", p, d, doing);
    case SQLITE_CANTOPEN:
        return cantopen(db, d, doing, err);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot write (%s) while %s",
                       p, d, doing);
    case SQLITE_CONSTRAINT:
        return sb_fail(err, SB_EXIT_INPUT,
                       "%s: rejected by the schema (%s) while %s", p, d, doing);
    case SQLITE_FULL:
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: disk full (%s) while %s",
                       p, d, doing);
    case SQLITE_IOERR:
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: I/O error (%s) while %s",
                       p, d, doing);
    case SQLITE_NOMEM:
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: out of memory while %s",
                       p, doing);
    default:
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: %s while %s", p, d, doing);
    }
}

/* Exit status for a failed system call: the environment's fault or ours. */
static int errno_code(int e)
{
    return (e == ENOSPC || e == EIO || e == ENOMEM) ? SB_EXIT_INTERNAL
                                                    : SB_EXIT_INPUT;
}

/* ------------------------------------------------- the file on disk ---- */

/* Sets *existed; refuses anything that exists and is not an SQLite file
 * (checked by its header, before SQLite ever opens it). An empty file is an
 * empty database, as SQLite itself treats it. */
static int inspect_file(const char *path, int *existed, sb_error *err)
{
    struct stat st;

    *existed = 0;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        return sb_fail(err, errno_code(errno), "%s: cannot inspect the file: "
                       "%s", path, strerror(errno));
    }
    *existed = 1;
    if (S_ISDIR(st.st_mode))
        return sb_fail(err, SB_EXIT_INPUT, "%s: is a directory, not a "
                       "database file", path);
    if (!S_ISREG(st.st_mode))
        return sb_fail(err, SB_EXIT_INPUT, "%s: not a regular file, so not a "
                       "database", path);
    /* The header is not read here: an open()/close() of the file would drop
     * every POSIX lock this process's SQLite connections hold on it (fcntl
     * locks belong to the process, and any close of the file releases
     * them), and another process could then reset the WAL under them and
     * damage the file. SQLite itself refuses a file that is not a database
     * (SQLITE_NOTADB, db_fail) at the first read, without writing to it. */
    return 0;
}

/* One mkdir of `dir`, an existing directory being fine. */
static int make_dir(const char *path, const char *dir, sb_error *err)
{
    struct stat st;
    if (mkdir(dir, 0777) == 0)
        return 0;
    int e = errno;
    if (e == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    if (e == EEXIST)
        e = ENOTDIR;
    return sb_fail(err, errno_code(e), "%s: cannot create directory %s: %s",
                   path, dir, strerror(e));
}

/* mkdir -p of the directory that holds path. */
static int make_parent_dirs(const char *path, sb_error *err)
{
    char *dir = strdup(path);
    if (!dir)
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: out of memory", path);
    char *slash = strrchr(dir, '/');
    int rc = 0;
    if (slash && slash != dir) {
        *slash = '\0';
        for (char *s = dir + 1; rc == 0; s++) {
            if (*s != '/' && *s != '\0')
                continue;
            char c = *s;
            *s = '\0';
            rc = make_dir(path, dir, err);
            *s = c;
            if (c == '\0')
                break;
        }
    }
    free(dir);
    return rc;
}

/* ------------------------------------------------------ sqlite helpers -- */

static int db_exec(sb_db *db, const char *sql, const char *doing,
                   sb_error *err)
{
    int rc = sqlite3_exec(db->h, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : db_fail(db, rc, doing, err);
}

static int db_prepare(sb_db *db, const char *sql, sqlite3_stmt **st,
                      const char *doing, sb_error *err)
{
    int rc = sqlite3_prepare_v2(db->h, sql, -1, st, NULL);
    return rc == SQLITE_OK ? 0 : db_fail(db, rc, doing, err);
}

/* db_prepare, then the arguments bound by sb_dbq_bindv's type letters
 * (query.h); a bind that fails finalizes st and fails. */
static int db_query(sb_db *db, const char *sql, sqlite3_stmt **st, const char *doing,
                    sb_error *err, const char *types, ...)
{
    if (db_prepare(db, sql, st, doing, err))
        return -1;
    va_list ap;
    va_start(ap, types);
    int bad = sb_dbq_bindv(*st, types, ap);
    va_end(ap);
    if (bad) {
        db_fail(db, sqlite3_errcode(db->h), doing, err);
        sqlite3_finalize(*st);
        return -1;
    }
    return 0;
}

/* Steps st once expecting `want` (SQLITE_ROW or SQLITE_DONE); on anything
 * else, fails and finalizes st. */
static int db_step(sb_db *db, sqlite3_stmt *st, int want, const char *doing,
                   sb_error *err)
{
    int rc = sqlite3_step(st);
    if (rc == want)
        return 0;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        rc = SQLITE_INTERNAL;
    db_fail(db, rc, doing, err);
    sqlite3_finalize(st);
    return -1;
}

/* Undoes the open transaction, if any; the first error is already set. */
static void db_rollback(sb_db *db)
{
    if (!sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

/* Runs a one-row, one-column query into *v. */
static int db_query_int64(sb_db *db, const char *sql, int64_t *v,
                          const char *doing, sb_error *err)
{
    sqlite3_stmt *st;
    if (db_prepare(db, sql, &st, doing, err) ||
        db_step(db, st, SQLITE_ROW, doing, err))
        return -1;
    *v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

static int read_version(sb_db *db, int *version, sb_error *err)
{
    int64_t v;
    if (db_query_int64(db, "PRAGMA user_version", &v,
                       "reading the schema version", err))
        return -1;
    *version = (int)v;
    return 0;
}

static int check_not_newer(const sb_db *db, int version, sb_error *err)
{
    if (version < 0)
        return sb_fail(err, SB_EXIT_INPUT, "%s: schema version %d is not a "
                       "shardbench one", db->path, version);
    if (version > SB_DB_SCHEMA_VERSION)
        return sb_fail(err, SB_EXIT_INPUT, "%s: schema version %d is newer "
                       "than this shardbench's (%d); use a newer shardbench "
                       "or another file", db->path, version,
                       SB_DB_SCHEMA_VERSION);
    return 0;
}

/* ------------------------------------------------------- checks on open -- */

/* A file with tables is shardbench's when its user_version is one of ours
 * and it has the version-1 tables; one at version 0 with tables of its own
 * is another program's, taken only when the caller adopts it (its tables
 * stay, shardbench's are added beside them). Names what it found. */
static int check_ours(sb_db *db, int version, int adopt, sb_error *err)
{
    const char *doing = "listing the tables of the file";
    sqlite3_stmt *st;
    if (db_prepare(db, "SELECT name FROM sqlite_master WHERE type IN "
                   "('table', 'view') AND name NOT LIKE 'sqlite\\_%' "
                   "ESCAPE '\\' ORDER BY name", &st, doing, err))
        return -1;
    static const char *const ours[] = {"measurements", "models", "runs",
                                       "search_runs", "strategies"};
    char found[512] = "";
    int ntables = 0, nours = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        ntables++;
        for (size_t i = 0; name && i < sizeof ours / sizeof ours[0]; i++)
            nours += strcmp(name, ours[i]) == 0;
        size_t l = strlen(found);
        if (ntables <= 8 && name)
            snprintf(found + l, sizeof found - l, "%s%.40s", l ? ", " : "",
                     name);
        else if (ntables == 9)
            snprintf(found + l, sizeof found - l, ", ...");
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_fail(db, rc, doing, err);
    if (ntables == 0 && version == 0)
        return 0;  /* an empty SQLite file: an empty database */
    if (version >= 1 && nours == 5)
        return 0;
    if (version == 0 && adopt)
        return 0;
    if (version == 0)
        return sb_fail(err, SB_EXIT_INPUT, "%s: not a shardbench database: it "
                       "holds %d table%s of another program (%s) and no "
                       "shardbench schema; left untouched (use another file, "
                       "or --adopt-db to add shardbench's tables to it)",
                       db->path, ntables, ntables == 1 ? "" : "s", found);
    return sb_fail(err, SB_EXIT_INPUT, "%s: not a shardbench database: schema "
                   "version %d but %d of shardbench's 5 tables (tables: %s); "
                   "left untouched", db->path, version, nours,
                   ntables ? found : "none");
}

/* PRAGMA quick_check must answer a single "ok". */
static int quick_check(sb_db *db, sb_error *err)
{
    const char *doing = "checking the file (quick_check)";
    sqlite3_stmt *st;
    if (db_prepare(db, "PRAGMA quick_check", &st, doing, err) ||
        db_step(db, st, SQLITE_ROW, doing, err))
        return -1;
    const char *r = (const char *)sqlite3_column_text(st, 0);
    char what[300];
    int rc = 0;
    if (!r || strcmp(r, "ok") != 0) {
        snprintf(what, sizeof what, "%s", r ? r : "no answer");
        for (char *c = what; *c; c++)  /* one line */
            if (*c == '\n')
                *c = ' ';
        rc = sb_fail(err, SB_EXIT_INPUT, "%s: database is damaged "
                     "(quick_check: %s)", db->path, what);
    }
    sqlite3_finalize(st);
    return rc;
}

static int check_writable(const sb_db *db, sb_error *err)
{
    if (sqlite3_db_readonly(db->h, "main") != 1)
        return 0;
    return sb_fail(err, SB_EXIT_INPUT, "%s: cannot write (the file or its "
                   "directory is read-only)", db->path);
}

/* Switches to WAL; an in-memory database can only be "memory". */
static int set_wal(sb_db *db, sb_error *err)
{
    const char *doing = "switching to WAL journal mode";
    sqlite3_stmt *st;
    if (db_prepare(db, "PRAGMA journal_mode = WAL", &st, doing, err) ||
        db_step(db, st, SQLITE_ROW, doing, err))
        return -1;
    const char *mode = (const char *)sqlite3_column_text(st, 0);
    int ok = mode && (strcasecmp(mode, "wal") == 0 ||
                      (strcasecmp(mode, "memory") == 0 &&
                       strcmp(db->path, ":memory:") == 0));
    int rc = 0;
    if (!ok)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot switch to WAL journal "
                     "mode (still %s)", db->path, mode ? mode : "unknown");
    sqlite3_finalize(st);
    return rc;
}

/* ------------------------------------------------------------ migration -- */

/* One version block of schema.sql: its text, through the line
 * `PRAGMA user_version = N;` that ends it. */
typedef struct {
    const char *sql;
    size_t len;
    int version;  /* N; -1 if the PRAGMA line does not parse */
} schema_block;

/* N of a line that starts (after blanks) with PRAGMA user_version; 0 if the
 * line is something else, -1 if it is that PRAGMA but malformed. */
static int pragma_version(const char *line)
{
    static const char key[] = "PRAGMA user_version";
    line += strspn(line, " \t");
    if (strncasecmp(line, key, sizeof key - 1) != 0)
        return 0;
    line += sizeof key - 1;
    line += strspn(line, " \t");
    if (*line != '=')
        return -1;
    char *end;
    long n = strtol(line + 1, &end, 10);
    return (end == line + 1 || n < 1 || n > 1000000) ? -1 : (int)n;
}

/* Takes the next block from *pos; returns 0 when no block is left. Text
 * after the last PRAGMA user_version line is ignored. */
static int next_block(const char **pos, schema_block *b)
{
    const char *start = *pos;
    for (const char *line = start; *line;) {
        const char *eol = strchr(line, '\n');
        const char *next = eol ? eol + 1 : line + strlen(line);
        int v = pragma_version(line);
        if (v != 0) {
            b->sql = start;
            b->len = (size_t)(next - start);
            b->version = v;
            *pos = next;
            return 1;
        }
        line = next;
    }
    return 0;
}

static int apply_block(sb_db *db, const schema_block *b, sb_error *err)
{
    char doing[64];
    snprintf(doing, sizeof doing, "applying schema version %d", b->version);
    char *sql = malloc(b->len + 1);
    if (!sql)
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: out of memory while %s",
                       db->path, doing);
    memcpy(sql, b->sql, b->len);
    sql[b->len] = '\0';
    int rc = sqlite3_exec(db->h, sql, NULL, NULL, NULL);
    free(sql);
    if (rc == SQLITE_OK)
        return 0;
    if ((rc & 0xff) != SQLITE_ERROR)
        return db_fail(db, rc, doing, err);
    /* An SQL error here means the file holds tables we did not make. */
    return sb_fail(err, SB_EXIT_INPUT, "%s: cannot migrate to schema version "
                   "%d (%s); is it another program's database?", db->path,
                   b->version, sqlite3_errmsg(db->h));
}

/* Applies every block above version `from`. The blocks must count 1, 2, ...
 * up to SB_DB_SCHEMA_VERSION; anything else is a build mistake. */
static int apply_blocks(sb_db *db, int from, sb_error *err)
{
    const char *pos = sb_schema_sql;
    schema_block b;
    int last = 0;
    while (next_block(&pos, &b)) {
        if (b.version != last + 1)
            return sb_fail(err, SB_EXIT_INTERNAL, "%s: built-in schema.sql is "
                           "malformed: version block %d follows %d", db->path,
                           b.version, last);
        last = b.version;
        if (b.version > from && apply_block(db, &b, err))
            return -1;
    }
    if (last != SB_DB_SCHEMA_VERSION)
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: built-in schema.sql ends at "
                       "version %d but SB_DB_SCHEMA_VERSION is %d", db->path,
                       last, SB_DB_SCHEMA_VERSION);
    return 0;
}

/* Brings the schema to SB_DB_SCHEMA_VERSION in one write transaction; the
 * version is read again inside it, since another process may have migrated
 * the file meanwhile. */
static int migrate(sb_db *db, sb_error *err)
{
    const char *doing = "migrating the schema";
    int v;
    if (db_exec(db, "BEGIN IMMEDIATE", doing, err))
        return -1;
    if (read_version(db, &v, err) || check_not_newer(db, v, err) ||
        (v < SB_DB_SCHEMA_VERSION && apply_blocks(db, v, err)) ||
        read_version(db, &v, err))
        goto fail;
    if (v != SB_DB_SCHEMA_VERSION) {
        sb_fail(err, SB_EXIT_INTERNAL, "%s: schema version is %d after "
                "migrating, not %d", db->path, v, SB_DB_SCHEMA_VERSION);
        goto fail;
    }
    if (db_exec(db, "COMMIT", doing, err))
        goto fail;
    return 0;
fail:
    db_rollback(db);
    return -1;
}

/* ----------------------------------------------------------- open/close -- */

/* Opens the handle and brings the file to the current schema. Reads come
 * before any write, so a damaged, foreign or newer file is left as it was. */
static int db_connect(sb_db *db, int existed, int flags, sb_error *err)
{
    int rc = sqlite3_open_v2(db->path, &db->h,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK)
        return db_fail(db, rc, "opening", err);
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_busy_timeout(db->h, db->busy_ms);
    int v;
    if ((existed && quick_check(db, err)) || read_version(db, &v, err) ||
        check_not_newer(db, v, err) ||
        check_ours(db, v, (flags & SB_DB_ADOPT) != 0, err) ||
        check_writable(db, err) ||
        set_wal(db, err) ||
        db_exec(db, "PRAGMA foreign_keys = ON", "enabling foreign keys", err))
        return -1;
    if (v < SB_DB_SCHEMA_VERSION)
        return migrate(db, err);
    return 0;
}

int sb_db_open(const char *path, int busy_timeout_ms, sb_db **out,
               sb_error *err)
{
    return sb_db_open_flags(path, busy_timeout_ms, 0, out, err);
}

int sb_db_open_flags(const char *path, int busy_timeout_ms, int flags,
                     sb_db **out, sb_error *err)
{
    int existed;
    if (!out)
        return sb_fail(err, SB_EXIT_INTERNAL, "sb_db_open: no output pointer");
    *out = NULL;
    if (!path || !*path)
        return sb_fail(err, SB_EXIT_INPUT, "no results database path given");
    if (inspect_file(path, &existed, err) ||
        (!existed && make_parent_dirs(path, err)))
        return -1;
    sb_db *db = sb_calloc(1, sizeof *db, err);
    if (!db)
        return -1;
    db->path = strdup(path);
    db->busy_ms = busy_timeout_ms > 0 ? busy_timeout_ms : SB_DB_DEFAULT_BUSY_MS;
    if (!db->path) {
        free(db);
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: out of memory", path);
    }
    if (db_connect(db, existed, flags, err)) {
        sb_db_close(db);
        return -1;
    }
    *out = db;
    return 0;
}

void sb_db_close(sb_db *db)
{
    if (!db)
        return;
    sqlite3_close_v2(db->h);
    free(db->path);
    free(db);
}

int sb_db_schema_version(sb_db *db)
{
    int v;
    if (!db || read_version(db, &v, NULL))
        return -1;
    return v;
}

/* ------------------------------------------------------------- searches -- */

static int check_record(const sb_db *db, const sb_search_record *r,
                        sb_error *err)
{
    const char *bad = NULL;
    if (!r)
        bad = "no record";
    else if (!r->source || !*r->source)
        bad = "no source";
    else if (!r->model || !*r->model)
        bad = "no model name";
    else if (!r->algo || !*r->algo)
        bad = "no algorithm";
    else if (r->p < 1)
        bad = "device count p below 1";
    if (!bad)
        return 0;
    return sb_fail(err, SB_EXIT_INPUT, "%s: cannot record a search: %s",
                   db->path, bad);
}

/* The models row for (name, params), inserted if new; *id gets its id. An
 * existing row is kept as it is (its path and nops are the first ones). */
static int upsert_model(sb_db *db, const char *name, const char *path,
                        const char *params, int nops, const char *doing,
                        int64_t *id, sb_error *err)
{
    sqlite3_stmt *st;
    if (!params)
        params = "";
    if (db_query(db, "INSERT INTO models (name, path, params, nops) "
                 "VALUES (?1, ?2, ?3, ?4) "
                 "ON CONFLICT (name, params) DO NOTHING", &st, doing, err, "ttti", name, path,
                 params, nops))
        return -1;
    if (db_step(db, st, SQLITE_DONE, doing, err))
        return -1;
    sqlite3_finalize(st);

    if (db_query(db, "SELECT id FROM models WHERE name = ?1 AND params = ?2", &st, doing, err,
                 "tt", name, params))
        return -1;
    if (db_step(db, st, SQLITE_ROW, doing, err))
        return -1;
    *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

static int insert_search(sb_db *db, const sb_search_record *r,
                         int64_t model_id, int64_t *id, sb_error *err)
{
    const char *doing = "recording a search";
    sqlite3_stmt *st;
    /* byte counts: NULL when unknown; the RSS also when 0 (not measured) */
    if (db_query(db, "INSERT INTO search_runs (source, model_id, p, algo, "
                 "tflops, gbs, cutoff, total_cost, seconds, nops, "
                 "max_configs, max_dep_set, peak_table_bytes, "
                 "peak_rss_bytes, strategy_json) VALUES (?1, ?2, ?3, ?4, "
                 "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                 &st, doing, err, "tIitDDiDDiiibBt", r->source, model_id, r->p, r->algo,
                 r->tflops, r->gbs, r->cutoff, r->total_cost, r->seconds, r->nops,
                 r->max_configs, r->max_dep_set, r->peak_table_bytes, r->peak_rss_bytes,
                 r->strategy_json))
        return -1;
    if (db_step(db, st, SQLITE_DONE, doing, err))
        return -1;
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

int sb_db_record_search(sb_db *db, const sb_search_record *rec, int64_t *id,
                        sb_error *err)
{
    int64_t model_id, row;
    if (!db)
        return sb_fail(err, SB_EXIT_INTERNAL, "sb_db_record_search: no "
                       "database open");
    if (check_record(db, rec, err) ||
        db_exec(db, "BEGIN IMMEDIATE", "recording a search", err))
        return -1;
    if (upsert_model(db, rec->model, rec->model_path, rec->params, rec->nops,
                     "recording a search (models row)", &model_id, err) ||
        insert_search(db, rec, model_id, &row, err) ||
        db_exec(db, "COMMIT", "recording a search (commit)", err)) {
        db_rollback(db);
        return -1;
    }
    if (id)
        *id = row;
    return 0;
}

int sb_db_count_searches(sb_db *db, int64_t *count, sb_error *err)
{
    if (!db || !count)
        return sb_fail(err, SB_EXIT_INTERNAL, "sb_db_count_searches: no "
                       "database or no output");
    return db_query_int64(db, "SELECT count(*) FROM search_runs", count,
                          "counting searches", err);
}

/* ----------------------------------------------------------------- runs -- */

#define SB_STR_(x) #x
#define SB_STR(x) SB_STR_(x)

/* The compiler that built this file, as "GNU 12.2.0" or "Clang 16.0.6". */
static const char *build_compiler(void)
{
#if defined(__clang__)
    return "Clang " SB_STR(__clang_major__) "." SB_STR(__clang_minor__) "."
           SB_STR(__clang_patchlevel__);
#elif defined(__GNUC__)
    return "GNU " SB_STR(__GNUC__) "." SB_STR(__GNUC_MINOR__) "."
           SB_STR(__GNUC_PATCHLEVEL__);
#elif defined(__VERSION__)
    return __VERSION__;
#else
    return "unknown";
#endif
}

/* This machine's name into buf; "unknown" if the system will not say. */
static void host_name(char *buf, size_t n)
{
    if (gethostname(buf, n) != 0 || !buf[0])
        snprintf(buf, n, "unknown");
    buf[n - 1] = '\0';  /* POSIX leaves a truncated name unterminated */
}

int sb_db_begin_run(sb_db *db, const sb_run_meta *meta, int64_t *run_id,
                    sb_error *err)
{
    const char *doing = "starting a run (runs row)";
    char host[256];
    sqlite3_stmt *st;
    if (!db)
        return sb_fail(err, SB_EXIT_INTERNAL, "sb_db_begin_run: no database "
                       "open");
    if (!meta || !meta->backend || !*meta->backend)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot start a run: %s",
                       db->path, meta ? "no backend" : "no run metadata");
    if (meta->host && *meta->host)
        snprintf(host, sizeof host, "%s", meta->host);
    else
        host_name(host, sizeof host);
    if (db_query(db, "INSERT INTO runs (host, git_commit, compiler, "
                 "backend, devices, versions, command_line) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", &st, doing, err, "ttttttt", host,
                 meta->git_commit ? meta->git_commit : sb_git_commit(),
                 meta->git_commit ? NULL : build_compiler(), meta->backend, meta->devices,
                 meta->versions, meta->command_line))
        return -1;
    if (db_step(db, st, SQLITE_DONE, doing, err))
        return -1;
    sqlite3_finalize(st);
    if (run_id)
        *run_id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

int sb_db_end_run(sb_db *db, int64_t run_id, sb_error *err)
{
    char doing[64];
    sqlite3_stmt *st;
    if (!db)
        return sb_fail(err, SB_EXIT_INTERNAL, "sb_db_end_run: no database "
                       "open");
    snprintf(doing, sizeof doing, "ending run %lld", (long long)run_id);
    if (db_query(db, "UPDATE runs SET ended_at = "
                 "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
                 &st, doing, err, "I", run_id))
        return -1;
    if (db_step(db, st, SQLITE_DONE, doing, err))
        return -1;
    sqlite3_finalize(st);
    if (sqlite3_changes(db->h) != 1)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot end run %lld: no such "
                       "run", db->path, (long long)run_id);
    return 0;
}

/* --------------------------------------------------------- measurements -- */

static int valid_status(const char *s)
{
    static const char *const ok[] = {"ok", "oom", "error", "timeout",
                                      "diverged"};
    for (size_t i = 0; s && i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(s, ok[i]) == 0)
            return 1;
    return 0;
}

static int check_measurement(const sb_db *db, const sb_measurement_record *r,
                             sb_error *err)
{
    char bad[128];
    bad[0] = '\0';
    if (!r)
        snprintf(bad, sizeof bad, "no record");
    else if (!r->model || !*r->model)
        snprintf(bad, sizeof bad, "no model name");
    else if (!r->kind || !*r->kind)
        snprintf(bad, sizeof bad, "no strategy kind");
    else if (!r->configs_json)
        snprintf(bad, sizeof bad, "no strategy configs");
    else if (r->p < 1)
        snprintf(bad, sizeof bad, "device count p below 1");
    else if (r->steps < 0)
        snprintf(bad, sizeof bad, "step count below 0");
    else if (!valid_status(r->status))
        snprintf(bad, sizeof bad, "status \"%.40s\" is not ok, oom, error, "
                 "timeout or diverged", r->status ? r->status : "(none)");
    if (!bad[0])
        return 0;
    return sb_fail(err, SB_EXIT_INPUT, "%s: cannot record a measurement: %s",
                   db->path, bad);
}

/* The run must exist: a measurement of no run is the caller's mistake. */
static int check_run_exists(sb_db *db, int64_t run_id, sb_error *err)
{
    const char *doing = "recording a measurement (looking up its run)";
    sqlite3_stmt *st;
    if (db_query(db, "SELECT count(*) FROM runs WHERE id = ?1", &st, doing, err, "I", run_id))
        return -1;
    if (db_step(db, st, SQLITE_ROW, doing, err))
        return -1;
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (n != 1)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot record a measurement: "
                       "no run with id %lld (start one with sb_db_begin_run)",
                       db->path, (long long)run_id);
    return 0;
}

/* The strategies row identical in (model, p, kind, configs), if any, else a
 * new one; *id gets its id. */
static int find_or_insert_strategy(sb_db *db, const sb_measurement_record *r,
                                   int64_t model_id, int64_t *id,
                                   sb_error *err)
{
    const char *doing = "recording a measurement (strategies row)";
    sqlite3_stmt *st;
    if (db_query(db, "SELECT id FROM strategies WHERE model_id = ?1 AND "
                 "p = ?2 AND kind = ?3 AND configs_json = ?4 "
                 "ORDER BY id LIMIT 1", &st, doing, err, "Iitt", model_id, r->p, r->kind,
                 r->configs_json))
        return -1;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return 0;
    }
    if (rc != SQLITE_DONE) {
        db_fail(db, rc, doing, err);
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);

    if (db_query(db, "INSERT INTO strategies (model_id, p, kind, "
                 "predicted_cost, predicted_mem_bytes, configs_json, "
                 "mesh_layout) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                 &st, doing, err, "IitDBtt", model_id, r->p, r->kind, r->predicted_cost,
                 r->predicted_mem_bytes, r->configs_json, r->mesh_layout))
        return -1;
    if (db_step(db, st, SQLITE_DONE, doing, err))
        return -1;
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

/* A step time, NaN (stored as NULL) when no step was timed or it is not
 * a time. */
static double step_time(double x, int steps)
{
    return steps > 0 && isfinite(x) && x >= 0 ? x : NAN;
}

static int insert_measurement(sb_db *db, const sb_measurement_record *r,
                              int64_t strategy_id, int64_t *id, sb_error *err)
{
    const char *doing = "recording a measurement (measurements row)";
    sqlite3_stmt *st;
    if (db_query(db, "INSERT INTO measurements (run_id, strategy_id, "
                 "step_median_s, step_min_s, step_max_s, steps, status, "
                 "message, peak_mem_bytes, probe_s, predicted_s, profile_probe_s) VALUES (?1, "
                 "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)", &st, doing, err,
                 "IIDDDittBDDD", r->run_id,
                 strategy_id,
                 step_time(r->step_median_s, r->steps), step_time(r->step_min_s, r->steps),
                 step_time(r->step_max_s, r->steps), r->steps, r->status, r->message,
                 r->peak_mem_bytes, r->probe_s > 0 && isfinite(r->probe_s) ? r->probe_s : NAN,
                 r->predicted_s > 0 && isfinite(r->predicted_s) ? r->predicted_s : NAN,
                 r->profile_probe_s > 0 && isfinite(r->profile_probe_s) ? r->profile_probe_s : NAN))
        return -1;
    if (db_step(db, st, SQLITE_DONE, doing, err))
        return -1;
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

int sb_db_record_measurement(sb_db *db, const sb_measurement_record *rec,
                             int64_t *id, sb_error *err)
{
    int64_t model_id, strategy_id, row;
    if (!db)
        return sb_fail(err, SB_EXIT_INTERNAL, "sb_db_record_measurement: no "
                       "database open");
    if (check_measurement(db, rec, err) ||
        db_exec(db, "BEGIN IMMEDIATE", "recording a measurement", err))
        return -1;
    if (check_run_exists(db, rec->run_id, err) ||
        upsert_model(db, rec->model, rec->model_path, rec->params, rec->nops,
                     "recording a measurement (models row)", &model_id,
                     err) ||
        find_or_insert_strategy(db, rec, model_id, &strategy_id, err) ||
        insert_measurement(db, rec, strategy_id, &row, err) ||
        db_exec(db, "COMMIT", "recording a measurement (commit)", err)) {
        db_rollback(db);
        return -1;
    }
    if (id)
        *id = row;
    return 0;
}
