/* text.c: text that reaches a terminal or a shell (control characters
 * escaped, words quoted for pasting) and strict numbers from the command
 * line (no blanks, no hex, no inf or nan: what strtod alone lets through). */
#define _GNU_SOURCE
#include "shardbench/common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* c as \xHH (or \n, \t, \r) into out[*k..n): control bytes and DEL. */
static void put_escaped(unsigned char c, char *out, size_t n, size_t *k)
{
    char e[8];
    if (c == '\n')
        snprintf(e, sizeof e, "\\n");
    else if (c == '\t')
        snprintf(e, sizeof e, "\\t");
    else if (c == '\r')
        snprintf(e, sizeof e, "\\r");
    else
        snprintf(e, sizeof e, "\\x%02x", c);
    size_t l = strlen(e);
    if (*k + l < n) {
        memcpy(out + *k, e, l);
        *k += l;
    }
}

static int is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

void sb_escape_controls(const char *s, char *out, size_t n, int keep_lines)
{
    size_t k = 0;
    if (!n)
        return;
    for (; *s && k + 1 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (is_control(c) && !(keep_lines && (c == '\n' || c == '\t')))
            put_escaped(c, out, n, &k);
        else
            out[k++] = (char)c;
    }
    out[k] = '\0';
}

int sb_has_controls(const char *s)
{
    for (; *s; s++)
        if (is_control((unsigned char)*s))
            return 1;
    return 0;
}

/* Bytes a POSIX shell takes literally in a bare word. */
static int shell_plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || (c && strchr("_-./+=:,@%", c)) || c >= 0x80;
}

void sb_shell_quote(const char *s, char *out, size_t n)
{
    size_t k = 0;
    int plain = *s != '\0', ctl = 0;
    for (const char *c = s; *c; c++) {
        plain &= shell_plain((unsigned char)*c);
        ctl |= is_control((unsigned char)*c);
    }
    if (!n)
        return;
    if (plain) {
        snprintf(out, n, "%s", s);
        return;
    }
    /* 'WORD' with ' as '\''; with a control byte $'WORD' (bash, zsh, ksh),
     * the bytes as \xHH, so that none reaches the terminal */
    const char *open = ctl ? "$'" : "'";
    for (const char *o = open; *o && k + 1 < n; o++)
        out[k++] = *o;
    for (; *s && k + 6 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (ctl && (c == '\'' || c == '\\')) {
            out[k++] = '\\';
            out[k++] = (char)c;
        } else if (ctl && is_control(c)) {
            put_escaped(c, out, n, &k);
        } else if (c == '\'') {
            memcpy(out + k, "'\\''", 4);
            k += 4;
        } else {
            out[k++] = (char)c;
        }
    }
    if (k + 1 < n)
        out[k++] = '\'';
    out[k] = '\0';
}

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
