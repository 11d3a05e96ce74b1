/* common.c: the one error path, checked allocation, clocks, build facts. */
#define _GNU_SOURCE
#include "shardbench/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "build_info.h"

int sb_fail(sb_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        char raw[sizeof err->msg];
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        /* control bytes came from a name or a path (the formats hold none):
         * none reaches a terminal raw; a newline or tab is kept, as some
         * messages list their items one a line */
        sb_escape_controls(raw, err->msg, sizeof err->msg, 1);
        err->code = code ? code : SB_EXIT_INTERNAL;
    }
    return -1;
}

void *sb_malloc(size_t n, sb_error *err)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory allocating %zu bytes", n);
    return p;
}

void *sb_calloc(size_t n, size_t size, sb_error *err)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory allocating %zu x %zu bytes",
                n, size);
    return p;
}

int sb_grow(void **p, int *cap, int n, size_t size, int first)
{
    if (n < *cap)
        return 0;
    int c = *cap ? 2 * *cap : first;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

void *sb_realloc(void *p, size_t n, sb_error *err)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory allocating %zu bytes", n);
    return q;
}

int sb_open_input(const char *path, const char *what, int64_t *size, sb_error *err)
{
    /* O_NONBLOCK: opening a FIFO with no writer must not wait; the file
     * type is checked on the open descriptor, so nothing can swap it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot open %s: %s", path, what, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot open %s: %s", path, what, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sb_fail(err, SB_EXIT_INPUT, "%s: %s, not a regular file, so not a %s", path,
                       S_ISDIR(st.st_mode)    ? "is a directory"
                       : S_ISFIFO(st.st_mode) ? "is a pipe (FIFO)"
                       : S_ISCHR(st.st_mode)  ? "is a character device"
                       : S_ISBLK(st.st_mode)  ? "is a block device"
                       : S_ISSOCK(st.st_mode) ? "is a socket"
                                              : "is a special file",
                       what);
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (size)
        *size = (int64_t)st.st_size;
    return fd;
}

int sb_read_file(const char *path, const char *what, size_t max_bytes, char **data,
                 size_t *size, sb_error *err)
{
    *data = NULL;
    *size = 0;
    int64_t bytes = 0;
    int fd = sb_open_input(path, what, &bytes, err);
    if (fd < 0)
        return -1;
    if ((uint64_t)bytes > (uint64_t)max_bytes) {
        close(fd);
        return sb_fail(err, SB_EXIT_INPUT, "%s: %s larger than %zu MiB", path, what,
                       max_bytes >> 20);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot read %s: %s", path, what, strerror(e));
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = sb_malloc(cap + 1, err);
    int rc = buf ? 0 : -1;
    while (!rc) {
        if (n == cap) {
            if (cap >= max_bytes) {
                rc = sb_fail(err, SB_EXIT_INPUT, "%s: %s larger than %zu MiB", path, what,
                             max_bytes >> 20);
                break;
            }
            char *nb = sb_realloc(buf, cap * 2 + 1, err);
            if (!nb) {
                rc = -1;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f))
                rc = sb_fail(err, SB_EXIT_INPUT, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return 0;
}

FILE *sb_out_open(const char *path, const char *what, char *tmp, size_t n, sb_error *err)
{
    if (!path || !*path || snprintf(tmp, n, "%s.tmp-XXXXXX", path) >= (int)n) {
        sb_fail(err, SB_EXIT_INPUT, "%s: cannot write %s: path too long", path ? path : "",
                what);
        return NULL;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        sb_fail(err, e == ENOSPC || e == EIO ? SB_EXIT_INTERNAL : SB_EXIT_INPUT,
                "%s: cannot write %s: %s%s", path, what, strerror(e),
                e == EACCES || e == EROFS ? " (its folder is not writable)" : "");
        tmp[0] = '\0';
        return NULL;
    }
    /* mkstemp makes the file 0600: a file replaced keeps its mode, a new
     * one gets the usual mode */
    struct stat old;
    if (stat(path, &old) == 0 && S_ISREG(old.st_mode)) {
        (void)fchmod(fd, old.st_mode & 07777);
    } else {
        mode_t mask = umask(0);
        umask(mask);
        (void)fchmod(fd, 0666 & ~mask);
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        tmp[0] = '\0';
        sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot write %s: %s", path, what, strerror(e));
    }
    return f;
}

void sb_out_abort(FILE *f, const char *tmp)
{
    if (f)
        fclose(f);
    if (tmp && *tmp)
        unlink(tmp);
}

int sb_out_commit(FILE *f, const char *tmp, const char *path, const char *what, sb_error *err)
{
    int bad = ferror(f) || fflush(f) != 0;
    int e = bad ? errno : 0;
    if (!bad && fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS) {
        bad = 1;
        e = errno;
    }
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot write %s: %s; the old file, if any, "
                       "is left as it was", path, what, e ? strerror(e) : "write error");
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return sb_fail(err, e == ENOSPC || e == EIO ? SB_EXIT_INTERNAL : SB_EXIT_INPUT,
                       "%s: cannot write %s: cannot rename %s into place: %s", path, what, tmp,
                       strerror(e));
    }
    return 0;
}

int sb_write_text(const char *path, const char *what, const char *text, sb_error *err)
{
    char tmp[4096];
    FILE *f = sb_out_open(path, what, tmp, sizeof tmp, err);
    if (!f)
        return -1;
    fputs(text, f); /* a failed write leaves ferror set: sb_out_commit reports it */
    return sb_out_commit(f, tmp, path, what, err);
}

static int is_regular(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int sb_find_shipped(const char *name, const char *ext, const char *const *dirs, int ndirs,
                    char *out, size_t n)
{
    if (strchr(name, '/') || is_regular(name)) {
        snprintf(out, n, "%s", name);
        return 1;
    }
    for (int i = 0; i < ndirs; i++) {
        if (!dirs[i] || !dirs[i][0])
            continue;
        if (snprintf(out, n, "%s/%s.%s", dirs[i], name, ext) < (int)n && is_regular(out))
            return 1;
    }
    return 0;
}

void sb_join_names(const char *const *names, char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; names[i] && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", names[i]);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **sb_shipped_names(const char *ext, const char *const *dirs, int ndirs)
{
    size_t n = 0, cap = 16, el = strlen(ext);
    char **names = malloc(cap * sizeof *names);
    if (!names)
        return NULL;
    for (int d = 0; d < ndirs; d++) {
        DIR *dir = dirs[d] && dirs[d][0] ? opendir(dirs[d]) : NULL;
        for (struct dirent *e; dir && (e = readdir(dir));) {
            size_t len = strlen(e->d_name);
            if (len <= el + 1 || e->d_name[0] == '.' || e->d_name[len - el - 1] != '.'
                || strcmp(e->d_name + len - el, ext))
                continue;
            char path[4096];
            if (snprintf(path, sizeof path, "%s/%s", dirs[d], e->d_name) >= (int)sizeof path
                || !is_regular(path))
                continue;
            if (n + 1 >= cap) {
                char **nn = realloc(names, 2 * cap * sizeof *names);
                if (!nn)
                    goto oom;
                names = nn;
                cap *= 2;
            }
            if (!(names[n] = strndup(e->d_name, len - el - 1)))
                goto oom;
            n++;
            continue;
        oom:
            closedir(dir);
            names[n] = NULL;
            sb_names_free(names);
            return NULL;
        }
        if (dir)
            closedir(dir);
    }
    qsort(names, n, sizeof *names, cmp_name);
    size_t k = 0; /* each once: the first folder's file wins, the name is the same */
    for (size_t i = 0; i < n; i++) {
        if (k && !strcmp(names[k - 1], names[i]))
            free(names[i]);
        else
            names[k++] = names[i];
    }
    names[k] = NULL;
    return names;
}

void sb_names_free(char **names)
{
    for (size_t i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

const char *sb_version(void) { return SB_VERSION; }
const char *sb_git_commit(void) { return SB_GIT_COMMIT; }

double sb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t sb_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (int64_t)ru.ru_maxrss * 1024; /* Linux: kilobytes */
}
