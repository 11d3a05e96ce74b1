/* shardbench/common.h: error reporting shared by every stage.
 *
 * One error path: a function that can fail takes an `sb_error *` and returns
 * non-zero; the error carries an exit status (SB_EXIT_INPUT for bad input or
 * usage, SB_EXIT_INTERNAL for everything else) and a message that names the
 * file, line or value at fault. Not a logging facility. */
#ifndef SHARDBENCH_COMMON_H
#define SHARDBENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SB_EXIT_OK = 0,
    SB_EXIT_INTERNAL = 1, /* internal failure: out of memory, I/O, limits */
    SB_EXIT_INPUT = 2,    /* bad usage or bad input */
};

typedef struct sb_error {
    int code;        /* SB_EXIT_*; 0 while no error is set */
    char msg[1024];
} sb_error;

/* Sets err (if not NULL) and returns -1, so callers can `return sb_fail(...)`. */
int sb_fail(sb_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Allocation that reports to err instead of crashing. */
void *sb_malloc(size_t n, sb_error *err);
void *sb_calloc(size_t n, size_t size, sb_error *err);
void *sb_realloc(void *p, size_t n, sb_error *err);
/* Room for item n of the array *p of *cap items of `size` bytes: when n has
 * reached *cap, *cap doubles (from `first`) and *p is reallocated. Returns
 * -1, with *p and *cap as they were, when out of memory. */
int sb_grow(void **p, int *cap, int n, size_t size, int first);

/* Reads a whole file into a malloc'd buffer (NUL-terminated; *size without
 * the NUL). `what` names the file's kind in messages ("model file"); files
 * over max_bytes are refused, and so is anything that is not a regular file
 * (a directory, a FIFO, a device: without blocking on it). Errors name the
 * path (SB_EXIT_INPUT). */
int sb_read_file(const char *path, const char *what, size_t max_bytes, char **data,
                 size_t *size, sb_error *err);

/* Opens a file the project reads, once: without blocking (a FIFO with no
 * writer), its kind checked on the descriptor before any read (a directory,
 * FIFO, device or socket refused by name, SB_EXIT_INPUT); the descriptor is
 * then blocking. Returns it (*size: the file's bytes, if size is not NULL),
 * or -1 with err set. Every reader goes through this or sb_read_file. */
int sb_open_input(const char *path, const char *what, int64_t *size, sb_error *err);

/* Text for a terminal: s with control bytes (and DEL) as \n, \t, \r or
 * \xHH (keep_lines: newlines and tabs kept as they are), cut to fit n.
 * sb_fail does this to every message, keeping lines. */
void sb_escape_controls(const char *s, char *out, size_t n, int keep_lines);
/* 1 when s holds a control byte or DEL. */
int sb_has_controls(const char *s);
/* s as one shell word safe to paste: bare when it holds only letters,
 * digits and _-./+=:,@%; else in single quotes ('\'' for a quote), or as
 * $'...' with \xHH escapes when it holds a control byte. Cut to fit n. */
void sb_shell_quote(const char *s, char *out, size_t n);
/* A decimal number at the start of s, strictly: an optional sign, digits
 * with an optional fraction and exponent; no blanks, hex, inf or nan (what
 * strtod alone takes). *end: the first byte after it. -1 when s does not
 * start with one or it is out of range. */
int sb_parse_number(const char *s, double *v, const char **end);
/* A count: decimal digits only (no sign, blank or hex) of at most hi, into
 * *v. -1 when s is anything else or above hi. */
int sb_parse_count(const char *s, uint64_t hi, uint64_t *v);
/* A memory size: a positive decimal number (sb_parse_number) and a unit
 * (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; none: default_unit, or refused
 * when that is NULL) into bytes. Refused naming `what` and the value. */
int sb_parse_size(const char *s, const char *what, const char *default_unit, double *bytes,
                  sb_error *err);

/* A shipped data file by name (models, machines): `name` itself when it
 * holds a '/' or names a regular file, else DIR/NAME.EXT in the first of
 * the ndirs folders (NULL or "" skipped) that holds it. Returns 1 with the
 * path in out, or 0. */
int sb_find_shipped(const char *name, const char *ext, const char *const *dirs, int ndirs,
                    char *out, size_t n);
/* "a, b, c" from a NULL-terminated list of names (cut to fit n). */
void sb_join_names(const char *const *names, char *out, size_t n);
/* The shipped names of a kind: NAME for every regular file NAME.EXT in the
 * ndirs folders (NULL, "" or missing ones skipped), each once, sorted. A
 * NULL-terminated malloc'd array (sb_names_free), NULL when out of memory.
 * What is shipped is what the folders hold: no list to keep in step. */
char **sb_shipped_names(const char *ext, const char *const *dirs, int ndirs);
void sb_names_free(char **names);

/* Writing a file whole or not at all: sb_out_open creates a temporary file
 * PATH.tmp-XXXXXX in the same folder (its name into tmp[n]) and opens it;
 * sb_out_commit flushes, syncs and closes it, then renames it over path.
 * On any failure (a full disk, say) the temporary file is removed and the
 * old file at path is left as it was. sb_out_abort drops the temporary
 * file. `what` names the file's kind in messages ("strategy file"). */
FILE *sb_out_open(const char *path, const char *what, char *tmp, size_t n, sb_error *err);
int sb_out_commit(FILE *f, const char *tmp, const char *path, const char *what, sb_error *err);
void sb_out_abort(FILE *f, const char *tmp);
/* text as the whole of path, through sb_out_open and sb_out_commit. */
int sb_write_text(const char *path, const char *what, const char *text, sb_error *err);

/* Version and build facts. */
const char *sb_version(void);
const char *sb_git_commit(void);

/* Seconds from a monotonic clock. */
double sb_now(void);

/* Peak resident set size of this process in bytes (0 if unknown). */
int64_t sb_peak_rss(void);

#ifdef __cplusplus
}
#endif
#endif
