/* common.c: the one error path, checked allocation, clocks, build facts. */
#define _GNU_SOURCE
#include "shardbench/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/resource.h>
#include <time.h>

#include "build_info.h"

int sb_fail(sb_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
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

void *sb_realloc(void *p, size_t n, sb_error *err)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory allocating %zu bytes", n);
    return q;
}

int sb_read_file(const char *path, const char *what, size_t max_bytes, char **data,
                 size_t *size, sb_error *err)
{
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot open %s: %s", path, what, strerror(errno));
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
