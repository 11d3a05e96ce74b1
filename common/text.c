/* text.c: strict numbers from the command line and the files (no blanks,
 * no hex, no inf or nan: what strtod alone lets through). Text that reaches
 * a terminal or a shell is escape.c's. */
#define _GNU_SOURCE
#include "shardbench/common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sb_parse_number(const char *s, double *v, const char **end)
{
    /* [-]digits[.digits][(e|E)[+|-]digits], or [-].digits...: decimal only */
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    size_t di = strspn(p, "0123456789");
    p += di;
    size_t df = 0;
    if (*p == '.') {
        df = strspn(p + 1, "0123456789");
        p += 1 + df;
    }
    if (!di && !df)
        return -1;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '-' || *q == '+')
            q++;
        size_t de = strspn(q, "0123456789");
        if (de)
            p = q + de;
    }
    char buf[128];
    if ((size_t)(p - s) >= sizeof buf)
        return -1;
    memcpy(buf, s, (size_t)(p - s));
    buf[p - s] = '\0';
    errno = 0;
    char *e;
    double x = strtod(buf, &e);
    if (*e || errno == ERANGE || !isfinite(x))
        return -1;
    *v = x;
    if (end)
        *end = p;
    return 0;
}

int sb_parse_size(const char *s, const char *what, const char *default_unit, double *bytes,
                  sb_error *err)
{
    static const struct {
        const char *unit;
        double bytes;
    } units[] = {{"B", 1.0},          {"KB", 1e3},        {"MB", 1e6},
                 {"GB", 1e9},         {"TB", 1e12},       {"KiB", 1024.0},
                 {"MiB", 1048576.0},  {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    double v;
    const char *end;
    if (!sb_parse_number(s, &v, &end) && v > 0) {
        const char *unit = *end ? end : default_unit;
        for (size_t i = 0; unit && i < sizeof units / sizeof units[0]; i++)
            if (!strcmp(unit, units[i].unit) && v * units[i].bytes >= 1.0
                && isfinite(v * units[i].bytes)) {
                *bytes = v * units[i].bytes;
                return 0;
            }
    }
    char shown[256];
    sb_escape_controls(s, shown, sizeof shown, 0);
    return sb_fail(err, SB_EXIT_INPUT,
                   "%s: '%s' is not a memory size (a positive decimal number and B, KB, MB, GB, "
                   "TB, KiB, MiB, GiB or TiB%s%s)", what, shown, default_unit ? "; no unit: " : "",
                   default_unit ? default_unit : "");
}

int sb_parse_count(const char *s, uint64_t hi, uint64_t *v)
{
    /* digits only: strtoull alone skips blanks, takes '+', and wraps "-1" */
    size_t n = strspn(s, "0123456789");
    if (!n || s[n] || n > 20)
        return -1;
    errno = 0;
    char *e;
    unsigned long long x = strtoull(s, &e, 10);
    if (errno || *e || x > hi)
        return -1;
    *v = (uint64_t)x;
    return 0;
}
