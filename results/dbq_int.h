/* results/dbq_int.h: the results stage's SQL statement helpers over
 * SQLite's own types (private to results/ and its unit tests): every
 * statement of the project is prepared, bound and stepped here, so no
 * public header names an SQLite type (query.h keeps the opaque sb_dbq). */
#ifndef SB_RESULTS_DBQ_INT_H
#define SB_RESULTS_DBQ_INT_H

#include <sqlite3.h>
#include <stdarg.h>

#include "shardbench/query.h"

sqlite3 *sb_dbq_handle(sb_dbq *q);

/* prepare, failing with a clear error. */
int sb_dbq_prepare(sb_dbq *q, const char *sql, sqlite3_stmt **st, const char *doing,
                   sb_error *err);
/* One step: 1 for a row, 0 when done, -1 (err set, st finalized) on error. */
int sb_dbq_step(sb_dbq *q, sqlite3_stmt *st, const char *doing, sb_error *err);
/* Column i as text, "" when NULL; as a double, NaN when NULL. */
const char *sb_dbq_text(sqlite3_stmt *st, int i);
double sb_dbq_real(sqlite3_stmt *st, int i);

/* Binds ?1, ?2, ... of st from the arguments, one letter each in types:
 * 'i' int, 'I' int64_t, 'd' double, 'D' double or NULL when not finite,
 * 'b' a byte count as a double (an integer; NULL when negative or not
 * finite), 'B' the same and NULL for 0 too (not measured), 't' const char *
 * (copied; NULL binds NULL). Returns the first SQLite error code, or
 * SQLITE_OK (0); an unknown letter is SQLITE_MISUSE. Every statement of
 * results/ binds through it. */
int sb_dbq_bind(sqlite3_stmt *st, const char *types, ...);
int sb_dbq_bindv(sqlite3_stmt *st, const char *types, va_list ap);
/* sb_dbq_prepare, then sb_dbq_bind with the arguments after types. */
int sb_dbq_query(sb_dbq *q, const char *sql, sqlite3_stmt **st, const char *doing, sb_error *err,
                 const char *types, ...);
int sb_dbq_queryv(sb_dbq *q, const char *sql, sqlite3_stmt **st, const char *doing, sb_error *err,
                  const char *types, va_list ap);

#endif
