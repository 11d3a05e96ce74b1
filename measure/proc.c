/* measure/proc.c: the bench's subprocesses (proc.h): run with captured
 * output and a time limit in their own process group, the launcher's
 * words, the failure line of a child's stderr, a baseline build's commit,
 * and the work folders killed benches and nights left behind. */
#define _GNU_SOURCE
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


void sb_proc_result_free(proc_result *r)
{
    free(r->out);
    free(r->errs);
    memset(r, 0, sizeof *r);
}

static int append(char **buf, size_t *len, const char *data, size_t n)
{
    if (*len >= BENCH_OUT_CAP)
        return 0;
    if (n > BENCH_OUT_CAP - *len)
        n = BENCH_OUT_CAP - *len;
    char *b = realloc(*buf, *len + n + 1);
    if (!b)
        return -1;
    memcpy(b + *len, data, n);
    *len += n;
    b[*len] = '\0';
    *buf = b;
    return 0;
}

/* Ends the child's process group: TERM, then KILL after 3 s. */
static void kill_group(pid_t pid, int *status)
{
    kill(-pid, SIGTERM);
    for (int i = 0; i < 300; i++) {
        if (waitpid(pid, status, WNOHANG) == pid) {
            kill(-pid, SIGKILL); /* ranks the launcher left behind */
            return;
        }
        usleep(10000);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, status, 0);
}

/* Runs argv (PATH searched) in its own process group with stdin from
 * /dev/null, capturing stdout and stderr, for at most timeout seconds. */
int sb_proc_run(char *const argv[], double timeout, const volatile sig_atomic_t *stop,
             void (*tick)(void), proc_result *r, sb_error *err)
{
    memset(r, 0, sizeof *r);
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC))
        return sb_fail(err, SB_EXIT_INTERNAL, "pipe: %s", strerror(errno));
    if (pipe2(pe, O_CLOEXEC)) {
        close(po[0]);
        close(po[1]);
        return sb_fail(err, SB_EXIT_INTERNAL, "pipe: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
        return sb_fail(err, SB_EXIT_INTERNAL, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* dies with the bench, even by SIGKILL (no cleanup runs then): the
         * launcher cannot outlive it, reparented and with no time limit;
         * its ranks lose their launcher and end with it. The signal
         * survives exec; a bench already gone before the prctl: exit. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0)
            dup2(in, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        execvp(argv[0], argv);
        dprintf(2, "shardbench: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(po[1]);
    close(pe[1]);
    double deadline = sb_now() + timeout;
    struct pollfd fds[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    int open_fds = 2, status = 0, reaped = 0, rc = 0;
    char buf[65536];
    while (open_fds > 0) {
        double left = deadline - sb_now();
        if (*stop || left <= 0) {
            r->stopped = *stop != 0;
            r->timed_out = !*stop;
            kill_group(pid, &status);
            reaped = 1;
            break;
        }
        int ms = left > 0.2 ? 200 : (int)(left * 1000) + 1;
        int n = poll(fds, 2, ms);
        if (n == 0 && tick)
            tick();
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = sb_fail(err, SB_EXIT_INTERNAL, "poll: %s", strerror(errno));
            kill_group(pid, &status);
            reaped = 1;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
                continue;
            }
            if (i == 0 ? append(&r->out, &r->nout, buf, (size_t)got)
                       : append(&r->errs, &r->nerr, buf, (size_t)got))
                rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory reading a child's output");
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    /* the pipes closed: the launcher is exiting; wait for it within the limit */
    while (!reaped) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (*stop || sb_now() > deadline) {
            r->stopped = *stop != 0;
            r->timed_out = !*stop;
            kill_group(pid, &status);
            break;
        }
        usleep(10000);
    }
    if (WIFEXITED(status)) {
        r->code = WEXITSTATUS(status);
    } else {
        r->code = -1;
        r->sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    if (!r->out)
        append(&r->out, &r->nout, "", 0);
    if (!r->errs)
        append(&r->errs, &r->nerr, "", 0);
    if (rc)
        sb_proc_result_free(r);
    return rc;
}

static int has_alnum(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
            (s[i] >= '0' && s[i] <= '9'))
            return 1;
    return 0;
}

/* One line that says why a child failed, from its stderr: our own
 * "shardbench: ..." line, else the first line that says error, else the
 * last line with words in it (not a banner of dashes). */
void sb_failure_line(const char *errs, char *out, size_t n)
{
    const char *own = NULL, *error = NULL, *last = NULL;
    for (const char *s = errs; s && *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (has_alnum(s, len)) {
            last = s;
            if (!own && !strncmp(s, "shardbench", 10))
                own = s;
            if (!error && (memmem(s, len, "rror", 4) || memmem(s, len, "ERROR", 5)))
                error = s;
        }
        s = e ? e + 1 : s + len;
    }
    const char *s = own ? own : error ? error : last;
    if (!s) {
        snprintf(out, n, "(no message)");
        return;
    }
    size_t len = strcspn(s, "\n");
    snprintf(out, n, "%.*s", (int)(len < 400 ? len : 400), s);
}

/* ------------------------------------------------------------- launcher -- */


int sb_launcher_parse(const char *cmd, launcher *l, sb_error *err)
{
    memset(l, 0, sizeof *l);
    char def[128];
    if (!cmd) {
        /* the binding per launch (sb_bench_binding, bench.c) */
        snprintf(def, sizeof def, "mpirun --oversubscribe%s",
                 geteuid() == 0 ? " --allow-run-as-root" : "");
        cmd = def;
        l->is_default = 1;
    }
    char *copy = strdup(cmd), *save = NULL;
    if (!copy)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (l->n == SB_LAUNCHER_MAX_WORDS - 1) {
            free(copy);
            sb_launcher_free(l);
            return sb_fail(err, SB_EXIT_INPUT, "--launcher: too many words (at most %d)",
                           SB_LAUNCHER_MAX_WORDS - 1);
        }
        if (!(l->words[l->n] = strdup(w))) {
            free(copy);
            sb_launcher_free(l);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        }
        l->has_p |= strstr(w, "{P}") != NULL;
        l->n++;
    }
    free(copy);
    if (!l->n)
        return sb_fail(err, SB_EXIT_INPUT, "--launcher: empty command");
    return 0;
}

void sb_launcher_free(launcher *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->words[i]);
    l->n = 0;
}

/* A word of the launcher with {P} replaced by p (malloc'd). */
char *sb_launcher_subst(const char *w, int p)
{
    char num[16], *out = malloc(strlen(w) * 2 + 32), *o = out;
    if (!out)
        return NULL;
    snprintf(num, sizeof num, "%d", p);
    while (*w) {
        if (!strncmp(w, "{P}", 3)) {
            o = stpcpy(o, num);
            w += 3;
        } else {
            *o++ = *w++;
        }
    }
    *o = '\0';
    return out;
}

/* The commit of the build `runner` (a baseline build): what its --version
 * says ("shardbench V (commit C, ...)"), or "unknown (RUNNER)" when it says
 * nothing of the kind within 30 s. */
void sb_runner_commit(const char *runner, char *out, size_t n)
{
    static volatile sig_atomic_t never;
    char *argv[] = {(char *)runner, "--version", NULL};
    proc_result pr = {0};
    sb_error e = {0};
    const char *c = NULL;
    if (!sb_proc_run(argv, 30.0, &never, NULL, &pr, &e) && pr.code == 0 && pr.out)
        c = strstr(pr.out, "(commit ");
    size_t len = c ? strspn(c + 8, "0123456789abcdef") : 0;
    if (len >= 7 && len < 64)
        snprintf(out, n, "%.*s", (int)len, c + 8);
    else
        snprintf(out, n, "unknown (%.100s)", runner);
    sb_proc_result_free(&pr);
}

/* A process killed but not yet reaped (its parent killed too, and PID 1 in
 * a container slow to reap) still answers kill(pid, 0): state Z. */
static int is_zombie(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the name may hold blanks and ')' */
    return rp && rp[1] == ' ' && rp[2] == 'Z';
}

static int rm_path(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

void sb_clean_stale_workdirs(const char *tmp, const char *prefix, const char *who)
{
    DIR *d = opendir(tmp);
    if (!d)
        return;
    size_t pl = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, pl))
            continue;
        char *end;
        const char *num = e->d_name + pl;
        errno = 0;
        long pid = strtol(num, &end, 10);
        if (errno || end == num || *end != '-' || strlen(end) != 7 || pid <= 0 ||
            pid == (long)getpid())
            continue;
        int alive = kill((pid_t)pid, 0) == 0 ? !is_zombie(pid) : errno != ESRCH;
        if (alive)
            continue; /* alive, or not ours to ask about (EPERM) */
        char path[PATH_MAX];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", tmp, e->d_name) >= (int)sizeof path ||
            lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
            continue;
        if (nftw(path, rm_path, 16, FTW_DEPTH | FTW_PHYS) == 0)
            fprintf(stderr, "shardbench: %s: removed %s, left by %s process %ld that "
                            "is gone\n", who, path, who, pid);
    }
    closedir(d);
}
