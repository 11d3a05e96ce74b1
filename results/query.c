/* results/query.c: reading the results database back (query.h).
 *
 * A second way into the file, beside db.c: it opens an existing database
 * without creating or migrating it, gives the commands (`bench`, `report`,
 * `plot`, `regress`) checked prepare/step with clear errors and the one
 * binder of every statement (sb_dbq_bind, also db.c's), loads a run's
 * measurements, and writes the two things a bench adds (correlations, the
 * run of its searches). Also Spearman's rho (the JSON reader is json.c). Not
 * the recording API (db.c) and not the report layouts (cli/). */
#define _GNU_SOURCE
#include "dbq_int.h"
#include "shardbench/query.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "shardbench/results.h"

/* ========================================================== statistics == */

typedef struct {
    double v;
    int i;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    double x = ((const ranked *)a)->v, y = ((const ranked *)b)->v;
    return (x > y) - (x < y);
}

/* Ranks 1..n of v, ties sharing their mean rank. */
static int ranks(const double *v, int n, double *r)
{
    ranked *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return -1;
    for (int i = 0; i < n; i++)
        t[i] = (ranked){v[i], i};
    qsort(t, (size_t)n, sizeof *t, cmp_ranked);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && t[j + 1].v == t[i].v)
            j++;
        double mean = (i + j) / 2.0 + 1;
        for (int k = i; k <= j; k++)
            r[t[k].i] = mean;
        i = j + 1;
    }
    free(t);
    return 0;
}

int sb_spearman(const double *x, const double *y, int n, double *rho)
{
    if (n < 2)
        return -1;
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i]) || !isfinite(y[i]))
            return -1;
    double *rx = malloc((size_t)n * sizeof *rx), *ry = malloc((size_t)n * sizeof *ry);
    int rc = -1;
    if (rx && ry && !ranks(x, n, rx) && !ranks(y, n, ry)) {
        double mean = (n + 1) / 2.0, sxy = 0, sxx = 0, syy = 0;
        for (int i = 0; i < n; i++) {
            double a = rx[i] - mean, b = ry[i] - mean;
            sxy += a * b;
            sxx += a * a;
            syy += b * b;
        }
        if (sxx > 0 && syy > 0) {
            double r = sxy / sqrt(sxx * syy);
            *rho = r > 1 ? 1 : r < -1 ? -1 : r;
            rc = 0;
        }
    }
    free(rx);
    free(ry);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sb_median(const double *v, int n)
{
    if (n <= 0)
        return NAN;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return NAN;
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    free(t);
    return m;
}

/* ======================================================== query handle == */

struct sb_dbq {
    sqlite3 *h;
    char *path;
    int busy_ms;
    int version;
};

sqlite3 *sb_dbq_handle(sb_dbq *q) { return q->h; }
const char *sb_dbq_path(const sb_dbq *q) { return q->path; }
int sb_dbq_version(const sb_dbq *q) { return q->version; }

int sb_dbq_fail(sb_dbq *q, int rc, const char *doing, sb_error *err)
{
    const char *p = q->path;
    const char *msg = q->h ? sqlite3_errmsg(q->h) : sqlite3_errstr(rc);
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return sb_fail(err, SB_EXIT_INTERNAL,
                       "%s: database is locked (another process holds it; waited %d ms) while %s",
                       p, q->busy_ms, doing);
    case SQLITE_NOTADB:
        return sb_fail(err, SB_EXIT_INPUT,
                       "%s: file is not a database (damaged or not SQLite) while %s", p, doing);
    case SQLITE_CORRUPT:
        return sb_fail(err, SB_EXIT_INPUT, "%s: database is damaged (%s) while %s", p, msg,
                       doing);
    case SQLITE_CANTOPEN:
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot open the file (%s) while %s", p, msg,
                       doing);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot write (%s) while %s", p, msg, doing);
    case SQLITE_FULL:
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: disk full while %s", p, doing);
    case SQLITE_IOERR:
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: I/O error (%s) while %s", p, msg, doing);
    default:
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: %s while %s", p, msg, doing);
    }
}

int sb_dbq_prepare(sb_dbq *q, const char *sql, sqlite3_stmt **st, const char *doing,
                   sb_error *err)
{
    int rc = sqlite3_prepare_v2(q->h, sql, -1, st, NULL);
    if (rc == SQLITE_OK)
        return 0;
    *st = NULL;
    return sb_dbq_fail(q, rc, doing, err);
}

int sb_dbq_step(sb_dbq *q, sqlite3_stmt *st, const char *doing, sb_error *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    sb_dbq_fail(q, rc, doing, err);
    sqlite3_finalize(st);
    return -1;
}

int sb_dbq_bindv(sqlite3_stmt *st, const char *types, va_list ap)
{
    int rc = SQLITE_OK;
    for (int i = 0; types[i] && rc == SQLITE_OK; i++) {
        int k = i + 1;
        switch (types[i]) {
        case 'i': rc = sqlite3_bind_int(st, k, va_arg(ap, int)); break;
        case 'I': rc = sqlite3_bind_int64(st, k, va_arg(ap, int64_t)); break;
        case 'd': rc = sqlite3_bind_double(st, k, va_arg(ap, double)); break;
        case 'D': {
            double v = va_arg(ap, double);
            rc = isfinite(v) ? sqlite3_bind_double(st, k, v) : sqlite3_bind_null(st, k);
            break;
        }
        case 'b':
        case 'B': { /* a byte count: NULL when unknown (and for B when 0) */
            double v = va_arg(ap, double);
            if (!isfinite(v) || v < 0 || (types[i] == 'B' && v == 0))
                rc = sqlite3_bind_null(st, k);
            else if (v >= 9.0e18)
                rc = sqlite3_bind_double(st, k, v);
            else
                rc = sqlite3_bind_int64(st, k, (int64_t)llround(v));
            break;
        }
        case 't': {
            const char *s = va_arg(ap, const char *);
            rc = s ? sqlite3_bind_text(st, k, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, k);
            break;
        }
        default: rc = SQLITE_MISUSE;
        }
    }
    return rc;
}

int sb_dbq_bind(sqlite3_stmt *st, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    int rc = sb_dbq_bindv(st, types, ap);
    va_end(ap);
    return rc;
}

int sb_dbq_queryv(sb_dbq *q, const char *sql, sqlite3_stmt **st, const char *doing, sb_error *err,
                  const char *types, va_list ap)
{
    if (sb_dbq_prepare(q, sql, st, doing, err))
        return -1;
    int rc = sb_dbq_bindv(*st, types, ap);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(*st);
        *st = NULL;
        return sb_dbq_fail(q, rc, doing, err);
    }
    return 0;
}

int sb_dbq_query(sb_dbq *q, const char *sql, sqlite3_stmt **st, const char *doing, sb_error *err,
                 const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    int rc = sb_dbq_queryv(q, sql, st, doing, err, types, ap);
    va_end(ap);
    return rc;
}

const char *sb_dbq_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

double sb_dbq_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

/* The file must exist and start with the SQLite header (an empty file is not
 * a database we can read results from). */
static int check_file(const char *path, sb_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot open the results database: %s", path,
                       strerror(errno));
    if (!S_ISREG(st.st_mode))
        return sb_fail(err, SB_EXIT_INPUT, "%s: not a regular file, so not a database", path);
    /* not its header: open()/close() here would drop this process's POSIX
     * locks on the file (see db.c, inspect_file); SQLite says SQLITE_NOTADB
     * at the first read instead (sb_dbq_fail) */
    if (access(path, R_OK) != 0)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot read the file: %s", path,
                       strerror(errno));
    return 0;
}

static int one_int(sb_dbq *q, const char *sql, int64_t *v, const char *doing, sb_error *err)
{
    sqlite3_stmt *st;
    if (sb_dbq_prepare(q, sql, &st, doing, err))
        return -1;
    int r = sb_dbq_step(q, st, doing, err);
    if (r < 0)
        return -1;
    *v = r ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return 0;
}

int sb_dbq_open(const char *path, int writable, int busy_timeout_ms, sb_dbq **out,
                sb_error *err)
{
    *out = NULL;
    if (!path || !*path)
        return sb_fail(err, SB_EXIT_INPUT, "no results database path given");
    if (check_file(path, err))
        return -1;
    sb_dbq *q = calloc(1, sizeof *q);
    if (!q || !(q->path = strdup(path))) {
        free(q);
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: out of memory", path);
    }
    q->busy_ms = busy_timeout_ms > 0 ? busy_timeout_ms : 5000;
    int rc = sqlite3_open_v2(path, &q->h,
                             writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK) {
        sb_dbq_fail(q, rc, "opening", err);
        sb_dbq_close(q);
        return -1;
    }
    sqlite3_extended_result_codes(q->h, 1);
    sqlite3_busy_timeout(q->h, q->busy_ms);
    int64_t v = 0;
    sqlite3_stmt *st;
    const char *doing = "checking the file (quick_check)";
    if (sb_dbq_prepare(q, "PRAGMA quick_check", &st, doing, err))
        goto fail;
    int r = sb_dbq_step(q, st, doing, err);
    if (r < 0)
        goto fail;
    if (r == 0 || strcmp(sb_dbq_text(st, 0), "ok")) {
        char what[200];
        snprintf(what, sizeof what, "%s", r ? sb_dbq_text(st, 0) : "no answer");
        for (char *c = what; *c; c++)
            if (*c == '\n')
                *c = ' ';
        sqlite3_finalize(st);
        sb_fail(err, SB_EXIT_INPUT, "%s: database is damaged (quick_check: %s)", path, what);
        goto fail;
    }
    sqlite3_finalize(st);
    if (one_int(q, "PRAGMA user_version", &v, "reading the schema version", err))
        goto fail;
    q->version = (int)v;
    if (v < 1) {
        sb_fail(err, SB_EXIT_INPUT, "%s: not a shardbench results database (schema version %d)",
                path, (int)v);
        goto fail;
    }
    if (v > SB_DB_SCHEMA_VERSION) {
        sb_fail(err, SB_EXIT_INPUT,
                "%s: schema version %d is newer than this shardbench's (%d); use a newer "
                "shardbench",
                path, (int)v, SB_DB_SCHEMA_VERSION);
        goto fail;
    }
    if (writable && v != SB_DB_SCHEMA_VERSION) {
        sb_fail(err, SB_EXIT_INTERNAL, "%s: schema version %d, not %d: open it with sb_db_open "
                "first", path, (int)v, SB_DB_SCHEMA_VERSION);
        goto fail;
    }
    if (writable && sqlite3_exec(q->h, "PRAGMA foreign_keys = ON", NULL, NULL, NULL) != SQLITE_OK) {
        sb_dbq_fail(q, sqlite3_errcode(q->h), "enabling foreign keys", err);
        goto fail;
    }
    *out = q;
    return 0;
fail:
    sb_dbq_close(q);
    return -1;
}

void sb_dbq_close(sb_dbq *q)
{
    if (!q)
        return;
    sqlite3_close_v2(q->h);
    free(q->path);
    free(q);
}

int sb_dbq_check_run(sb_dbq *q, int64_t run_id, sb_error *err)
{
    char doing[64];
    snprintf(doing, sizeof doing, "looking up run %lld", (long long)run_id);
    sqlite3_stmt *st;
    if (sb_dbq_query(q, "SELECT 1 FROM runs WHERE id = ?1", &st, doing, err, "I", run_id))
        return -1;
    int r = sb_dbq_step(q, st, doing, err);
    if (r < 0)
        return -1;
    sqlite3_finalize(st);
    if (!r)
        return sb_fail(err, SB_EXIT_INPUT, "%s: no run with id %lld", q->path, (long long)run_id);
    return 0;
}

/* ========================================================= a run's rows == */

static void copy_text(char *dst, size_t n, sqlite3_stmt *st, int i)
{
    snprintf(dst, n, "%s", sb_dbq_text(st, i));
}

int sb_dbq_run_measurements(sb_dbq *q, int64_t run_id, sb_qmeas **rows, int *n, sb_error *err)
{
    char doing[64];
    snprintf(doing, sizeof doing, "reading the measurements of run %lld", (long long)run_id);
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st;
    /* probe_s from schema version 5 on (a file read as it is may be older) */
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT x.id, s.id, m.id, m.name, m.params, s.p, s.kind, s.predicted_cost, "
             "x.status, x.step_median_s, x.step_min_s, x.step_max_s, x.steps, "
             "x.peak_mem_bytes, x.message, %s "
             "FROM measurements x JOIN strategies s ON s.id = x.strategy_id "
             "JOIN models m ON m.id = s.model_id WHERE x.run_id = ?1 "
             "ORDER BY m.name, m.params, s.p, s.kind, s.id, x.id",
             q->version >= 9   ? "x.probe_s, x.predicted_s, x.profile_probe_s"
             : q->version >= 5 ? "x.probe_s, x.predicted_s, NULL"
                               : "NULL, NULL, NULL");
    if (sb_dbq_query(q, sql, &st, doing, err, "I", run_id))
        return -1;
    int cap = 0, r;
    sb_qmeas *v = NULL;
    while ((r = sb_dbq_step(q, st, doing, err)) == 1) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 32;
            sb_qmeas *nv = sb_realloc(v, (size_t)cap * sizeof *v, err);
            if (!nv) {
                sqlite3_finalize(st);
                free(v);
                return -1;
            }
            v = nv;
        }
        sb_qmeas *m = &v[(*n)++];
        memset(m, 0, sizeof *m);
        m->measurement_id = sqlite3_column_int64(st, 0);
        m->strategy_id = sqlite3_column_int64(st, 1);
        m->model_id = sqlite3_column_int64(st, 2);
        copy_text(m->model, sizeof m->model, st, 3);
        copy_text(m->params, sizeof m->params, st, 4);
        m->p = sqlite3_column_int(st, 5);
        copy_text(m->kind, sizeof m->kind, st, 6);
        m->predicted_cost = sb_dbq_real(st, 7);
        copy_text(m->status, sizeof m->status, st, 8);
        m->median = sb_dbq_real(st, 9);
        m->min = sb_dbq_real(st, 10);
        m->max = sb_dbq_real(st, 11);
        m->steps = sqlite3_column_int(st, 12);
        m->peak_mem_bytes = sb_dbq_real(st, 13);
        copy_text(m->message, sizeof m->message, st, 14);
        m->probe_s = sb_dbq_real(st, 15);
        m->predicted_s = sb_dbq_real(st, 16);
        m->profile_probe_s = sb_dbq_real(st, 17);
    }
    if (r < 0) {
        free(v);
        *n = 0;
        return -1;
    }
    sqlite3_finalize(st);
    *rows = v;
    return 0;
}

int sb_kind_is_data_parallel(const char *k)
{
    return !strcmp(k, "dp") || !strcmp(k, "data") || !strcmp(k, "data-parallel") ||
           !strcmp(k, "data_parallel");
}

static int ok_time(const sb_qmeas *m)
{
    return !strcmp(m->status, "ok") && isfinite(m->median);
}

int sb_q_kinds(const sb_qmeas *rows, int n, sb_qkind **out, int *nout, sb_error *err)
{
    *out = NULL;
    *nout = 0;
    sb_qkind *k = sb_calloc((size_t)(n ? n : 1), sizeof *k, err);
    if (!k)
        return -1;
    int nk = 0;
    for (int i = 0; i < n; i++) {
        const sb_qmeas *m = &rows[i];
        sb_qkind *g = NULL;
        for (int j = 0; j < nk && !g; j++)
            if (k[j].model_id == m->model_id && k[j].p == m->p && !strcmp(k[j].kind, m->kind))
                g = &k[j];
        if (!g) {
            g = &k[nk++];
            g->model_id = m->model_id;
            snprintf(g->model, sizeof g->model, "%s", m->model);
            snprintf(g->params, sizeof g->params, "%s", m->params);
            g->p = m->p;
            snprintf(g->kind, sizeof g->kind, "%s", m->kind);
            g->best_median = g->best_min = g->dp_median = g->speedup = NAN;
        }
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = rows[j].strategy_id == m->strategy_id;
        g->strategies += !seen;
        if (!ok_time(m)) {
            g->failed++;
            continue;
        }
        if (!(m->median >= g->best_median)) {
            g->best_median = m->median;
            g->best_min = m->min;
            g->best_strategy_id = m->strategy_id;
        }
    }
    for (int i = 0; i < nk; i++) {
        for (int j = 0; j < nk; j++)
            if (k[j].model_id == k[i].model_id && k[j].p == k[i].p &&
                sb_kind_is_data_parallel(k[j].kind) && !(k[j].best_median >= k[i].dp_median))
                k[i].dp_median = k[j].best_median;
        k[i].speedup = k[i].dp_median / k[i].best_median;
    }
    *out = k;
    *nout = nk;
    return 0;
}

int sb_q_points(const sb_qmeas *rows, int n, int64_t model_id, int p, double *x, double *y,
                int *idx)
{
    int np = 0;
    for (int i = 0; i < n; i++) {
        const sb_qmeas *m = &rows[i];
        if (m->model_id != model_id || m->p != p || !ok_time(m) || !isfinite(m->predicted_cost))
            continue;
        int j = 0;
        while (j < np && rows[idx[j]].strategy_id != m->strategy_id)
            j++;
        if (j < np) {
            if (m->median < y[j]) {
                y[j] = m->median;
                idx[j] = i;
            }
            continue;
        }
        x[np] = m->predicted_cost;
        y[np] = m->median;
        idx[np++] = i;
    }
    return np;
}

/* The stored rho of (run, model, p): returns 1 with rho and n set, 0 if none. */
static int stored_rho(sb_dbq *q, int64_t run_id, int64_t model_id, int p, double *rho, int *n,
                      sb_error *err)
{
    if (q->version < 2)
        return 0;
    const char *doing = "reading the correlations";
    sqlite3_stmt *st;
    if (sb_dbq_query(q, "SELECT rho, n FROM correlations WHERE run_id = ?1 AND "
                     "model_id = ?2 AND p = ?3", &st, doing, err, "IIi", run_id, model_id, p))
        return -1;
    int r = sb_dbq_step(q, st, doing, err);
    if (r < 0)
        return -1;
    if (r) {
        *rho = sb_dbq_real(st, 0);
        *n = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    return r;
}

/* g's probe-scaled figures over the np points of sb_q_points (idx: each
 * strategy's least-median row, y: that median): each prediction times that
 * row's probe over its pricing profile launch's; x is overwritten. */
static void probe_scaled(const sb_qmeas *rows, const int *idx, double *y, int np, double *x,
                         sb_qfidelity *g)
{
    double sum = 0, worst = 0;
    int k2 = 0;
    for (int k = 0; k < np; k++) {
        const sb_qmeas *r = &rows[idx[k]];
        double s = r->predicted_s * r->probe_s / r->profile_probe_s;
        if (!isfinite(s) || !(s > 0) || !(y[k] > 0))
            continue;
        double e = fabs(s - y[k]) / y[k];
        sum += e;
        worst = e > worst ? e : worst;
        x[k2] = s;
        y[k2++] = y[k]; /* k2 <= k: the points still to read are untouched */
    }
    g->probed = k2;
    g->mape_probe = k2 ? sum / k2 : NAN;
    g->max_error_probe = k2 ? worst : NAN;
    /* no rank where the raw predictions have none (equal, or too few) */
    if (!isfinite(g->rho) || sb_spearman(x, y, k2, &g->rho_probe))
        g->rho_probe = NAN;
}

/* g's predicted best against its fastest over the np points of sb_q_points
 * (x: predicted cost, y: least median, idx: its row). */
static void best_vs_fastest(const sb_qmeas *rows, const int *idx, const double *x,
                            const double *y, int np, sb_qfidelity *g)
{
    g->best_median = g->fastest_median = g->best_gap = NAN;
    g->best_tied = 0;
    int lo = -1, fa = -1;
    for (int k = 0; k < np; k++) {
        if (lo < 0 || x[k] < x[lo])
            lo = k;
        if (fa < 0 || y[k] < y[fa])
            fa = k;
    }
    if (lo < 0)
        return;
    int bk = lo;
    for (int k = 0; k < np; k++)
        if (x[k] <= x[lo] * (1 + 1e-12)) { /* tied in cost: one strategy under two kinds */
            g->best_tied++;
            if (y[k] < y[bk])
                bk = k;
        }
    g->best_median = y[bk];
    g->fastest_median = y[fa];
    g->best_gap = y[bk] / y[fa] - 1;
    snprintf(g->best_kind, sizeof g->best_kind, "%s", rows[idx[bk]].kind);
    snprintf(g->fastest_kind, sizeof g->fastest_kind, "%s", rows[idx[fa]].kind);
}

int sb_q_fidelity(sb_dbq *q, int64_t run_id, const sb_qmeas *rows, int n, sb_qfidelity **out,
                  int *nout, sb_error *err)
{
    *out = NULL;
    *nout = 0;
    sb_qfidelity *f = sb_calloc((size_t)(n ? n : 1), sizeof *f, err);
    double *x = sb_calloc((size_t)(n ? n : 1), sizeof *x, err);
    double *y = sb_calloc((size_t)(n ? n : 1), sizeof *y, err);
    int *idx = sb_calloc((size_t)(n ? n : 1), sizeof *idx, err);
    int nf = 0, rc = -1;
    if (!f || !x || !y || !idx)
        goto out;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < nf && !seen; j++)
            seen = f[j].model_id == rows[i].model_id && f[j].p == rows[i].p;
        if (seen)
            continue;
        sb_qfidelity *g = &f[nf++];
        g->model_id = rows[i].model_id;
        snprintf(g->model, sizeof g->model, "%s", rows[i].model);
        snprintf(g->params, sizeof g->params, "%s", rows[i].params);
        g->p = rows[i].p;
        g->rho = NAN;
        int s = stored_rho(q, run_id, g->model_id, g->p, &g->rho, &g->n, err);
        if (s < 0)
            goto out;
        g->stored = s;
        if (!s) {
            g->n = sb_q_points(rows, n, g->model_id, g->p, x, y, idx);
            if (sb_spearman(x, y, g->n, &g->rho))
                g->rho = NAN;
        }
        /* prediction error in seconds, at each strategy's least median */
        int np = sb_q_points(rows, n, g->model_id, g->p, x, y, idx);
        best_vs_fastest(rows, idx, x, y, np, g);
        double sum = 0, worst = 0;
        g->timed = 0;
        for (int k = 0; k < np; k++) {
            double pred = rows[idx[k]].predicted_s;
            if (!isfinite(pred) || !(y[k] > 0))
                continue;
            double e = fabs(pred - y[k]) / y[k];
            sum += e;
            worst = e > worst ? e : worst;
            g->timed++;
        }
        g->mape = g->timed ? sum / g->timed : NAN;
        g->max_error = g->timed ? worst : NAN;
        probe_scaled(rows, idx, y, np, x, g);
    }
    rc = 0;
out:
    free(x);
    free(y);
    free(idx);
    if (rc)
        free(f);
    else {
        *out = f;
        *nout = nf;
    }
    return rc;
}

/* ============================================================== writes == */

static int exec(sb_dbq *q, const char *sql, const char *doing, sb_error *err)
{
    int rc = sqlite3_exec(q->h, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sb_dbq_fail(q, rc, doing, err);
}

static void rollback(sb_dbq *q)
{
    if (!sqlite3_get_autocommit(q->h))
        sqlite3_exec(q->h, "ROLLBACK", NULL, NULL, NULL);
}

int sb_dbq_record_correlation(sb_dbq *q, int64_t run_id, const char *model, const char *params,
                              int p, int n, double rho, sb_error *err)
{
    const char *doing = "recording a correlation";
    sqlite3_stmt *st;
    if (exec(q, "BEGIN IMMEDIATE", doing, err))
        return -1;
    if (sb_dbq_query(q,
                     "INSERT INTO correlations (run_id, model_id, p, n, rho) "
                     "SELECT ?1, id, ?4, ?5, ?6 FROM models WHERE name = ?2 AND params = ?3 "
                     "ON CONFLICT (run_id, model_id, p) DO UPDATE SET n = excluded.n, "
                     "rho = excluded.rho, created_at = excluded.created_at",
                     &st, doing, err, "IttiiD", run_id, model, params ? params : "", p, n, rho))
        goto fail;
    if (sb_dbq_step(q, st, doing, err) < 0)
        goto fail;
    sqlite3_finalize(st);
    if (sqlite3_changes(q->h) != 1) {
        sb_fail(err, SB_EXIT_INPUT, "%s: cannot record a correlation: no model %s (%s)", q->path,
                model, params ? params : "");
        goto fail;
    }
    if (exec(q, "COMMIT", doing, err))
        goto fail;
    return 0;
fail:
    rollback(q);
    return -1;
}

/* One statement with no rows, or the first column of its one row into *v. */
static int step_one(sb_dbq *q, sqlite3_stmt *st, const char *doing, int64_t *v, sb_error *err)
{
    int r = sb_dbq_step(q, st, doing, err);
    if (r > 0 && v)
        *v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return r;
}

int sb_dbq_reprice(sb_dbq *q, int64_t run_id, int64_t meas_id, double cost, double seconds,
                   double profile_probe_s, sb_error *err)
{
    const char *doing = "pricing a measured strategy again";
    sqlite3_stmt *st;
    int64_t sid = 0, shared = 0;
    if (exec(q, "BEGIN IMMEDIATE", doing, err))
        return -1;
    if (sb_dbq_query(q, "SELECT strategy_id FROM measurements WHERE id = ?1 AND run_id = ?2",
                     &st, doing, err, "II", meas_id, run_id))
        goto fail;
    int r = step_one(q, st, doing, &sid, err);
    if (r < 0)
        goto fail;
    if (r == 0) {
        sb_fail(err, SB_EXIT_INTERNAL, "%s: %s: no measurement %lld in run %lld", q->path, doing,
                (long long)meas_id, (long long)run_id);
        goto fail;
    }
    if (sb_dbq_query(q, "SELECT EXISTS (SELECT 1 FROM measurements WHERE strategy_id = ?1 AND "
                     "run_id != ?2)", &st, doing, err, "II", sid, run_id) ||
        step_one(q, st, doing, &shared, err) < 0)
        goto fail;
    if (shared) { /* this run's own copy of the row */
        if (sb_dbq_query(q, "INSERT INTO strategies (model_id, p, kind, predicted_cost, "
                         "predicted_mem_bytes, configs_json, mesh_layout) SELECT model_id, p, "
                         "kind, predicted_cost, predicted_mem_bytes, configs_json, mesh_layout "
                         "FROM strategies WHERE id = ?1", &st, doing, err, "I", sid) ||
            step_one(q, st, doing, NULL, err) < 0)
            goto fail;
        int64_t copy = sqlite3_last_insert_rowid(q->h);
        if (sb_dbq_query(q, "UPDATE measurements SET strategy_id = ?1 WHERE strategy_id = ?2 AND "
                         "run_id = ?3", &st, doing, err, "III", copy, sid, run_id) ||
            step_one(q, st, doing, NULL, err) < 0)
            goto fail;
        sid = copy;
    }
    if (sb_dbq_query(q, "UPDATE strategies SET predicted_cost = ?2, configs_json = CASE WHEN "
                     "json_valid(configs_json) THEN json_replace(configs_json, '$.total_cost', "
                     "?2, '$.predicted_step_seconds', ?3) ELSE configs_json END WHERE id = ?1",
                     &st, doing, err, "IDD", sid, cost, seconds) ||
        step_one(q, st, doing, NULL, err) < 0 ||
        sb_dbq_query(q, "UPDATE measurements SET predicted_s = ?1, profile_probe_s = ?4 WHERE "
                     "strategy_id = ?2 AND run_id = ?3", &st, doing, err, "DIID", seconds, sid,
                     run_id, profile_probe_s > 0 ? profile_probe_s : NAN) ||
        step_one(q, st, doing, NULL, err) < 0 || exec(q, "COMMIT", doing, err))
        goto fail;
    return 0;
fail:
    rollback(q);
    return -1;
}

int sb_dbq_link_search(sb_dbq *q, int64_t search_id, int64_t run_id, sb_error *err)
{
    const char *doing = "linking a search to its run";
    sqlite3_stmt *st;
    if (sb_dbq_query(q, "UPDATE search_runs SET run_id = ?2 WHERE id = ?1", &st, doing, err,
                     "II", search_id, run_id))
        return -1;
    if (sb_dbq_step(q, st, doing, err) < 0)
        return -1;
    sqlite3_finalize(st);
    return 0;
}
