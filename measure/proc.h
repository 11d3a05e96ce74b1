/* measure/proc.h: the subprocesses of the bench (internal to plots/): a
 * child run with its output captured under a time limit, the MPI launcher
 * command, and the one line that says why a child failed. */
#ifndef SB_PLOTS_PROC_H
#define SB_PLOTS_PROC_H

#include <signal.h>
#include <stddef.h>

#include "shardbench/common.h"

#define BENCH_OUT_CAP (64u << 20) /* most bytes kept of a child's stdout or stderr */

typedef struct {
    char *out, *errs;       /* NUL-terminated (capped at BENCH_OUT_CAP) */
    size_t nout, nerr;
    int code;               /* exit code; -1 if killed by a signal */
    int sig;                /* the signal, or 0 */
    int timed_out, stopped; /* over the time limit; *stop by us */
} proc_result;

void sb_proc_result_free(proc_result *r);

/* Runs argv (PATH searched) in its own process group with stdin from
 * /dev/null, capturing stdout and stderr, for at most timeout seconds;
 * stopped early (r->stopped) when *stop becomes nonzero; tick (may be
 * NULL) is called while the child is quiet. */
int sb_proc_run(char *const argv[], double timeout, const volatile sig_atomic_t *stop,
             void (*tick)(void), proc_result *r, sb_error *err);

/* One line that says why a child failed, from its stderr. */
void sb_failure_line(const char *errs, char *out, size_t n);

#define SB_LAUNCHER_MAX_WORDS 64
typedef struct {
    char *words[SB_LAUNCHER_MAX_WORDS];
    int n;
    int has_p;      /* a word holds {P} */
    int is_default; /* the bench's own: each launch adds sb_bench_binding's words */
} launcher;

/* The launcher's words (NULL: mpirun --oversubscribe, plus
 * --allow-run-as-root as root, and per launch the binding of
 * sb_bench_binding). */
int sb_launcher_parse(const char *cmd, launcher *l, sb_error *err);
void sb_launcher_free(launcher *l);
/* A word of the launcher with {P} replaced by p (malloc'd). */
char *sb_launcher_subst(const char *w, int p);

/* The commit of the build `runner` (a baseline build): what its --version
 * says ("shardbench V (commit C, ...)"), or "unknown (RUNNER)". */
void sb_runner_commit(const char *runner, char *out, size_t n);
/* Removes the work folders TMP/PREFIX-PID-XXXXXX ("shardbench-bench-",
 * "shardbench-nightly-") that a bench or nightly killed before its cleanup
 * left behind: ours (same owner), and only when process PID is gone; each
 * said on stderr as "WHO: removed ...". */
void sb_clean_stale_workdirs(const char *tmp, const char *prefix, const char *who);

#endif
