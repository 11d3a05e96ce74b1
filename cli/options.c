/* options.c: what every command's options share: the exit status of an
 * error (cli_fail), JSON numbers (cli_jreal), strict option values (counts,
 * P lists, reals, sizes, seeds) and applying a calibration or machine file
 * to the cost parameters. Its own file (was in cmd_search.c) so that the
 * commands call down into it and never into one another. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos.h"
#include "cli.h"
#include "shardbench/machine.h"
#include "shardbench/precision.h"

int cli_fail(const sb_error *err)
{
    fprintf(stderr, "shardbench: %s\n", err->msg);
    return err->code ? err->code : 1;
}

json_t *cli_jreal(double v)
{
    if (!isfinite(v))
        return json_null();
    if (v == floor(v) && fabs(v) < 9007199254740992.0) /* 3, as %g writes it, not 3.0 */
        return json_integer((json_int_t)v);
    return json_real(v);
}

static int parse_int(const char *s, const char *what, int lo, int hi, int *out, sb_error *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    /* digits from the first byte: strtol alone skips blanks and takes '+' */
    if (!(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1])))
        || errno || end == s || *end || v < lo || v > hi)
        return sb_fail(err, SB_EXIT_INPUT, "%s: '%s' is not an integer in %d..%d", what, s, lo, hi);
    *out = (int)v;
    return 0;
}

static int parse_double(const char *s, const char *what, double *out, sb_error *err)
{
    const char *end;
    double v = 0;
    if (sb_parse_number(s, &v, &end) || *end || !(v > 0) || v > 1e12)
        return sb_fail(err, SB_EXIT_INPUT, "%s: '%s' is not a positive number", what, s);
    *out = v;
    return 0;
}

int parse_p_list(const char *s, int *out, int max, sb_error *err)
{
    int n = 0;
    const char *dots = strstr(s, "..");
    if (dots) {
        char lo_s[32];
        snprintf(lo_s, sizeof lo_s, "%.*s", (int)(dots - s), s);
        int lo, hi;
        if (parse_int(lo_s, "-p", 1, 65536, &lo, err) || parse_int(dots + 2, "-p", 1, 65536, &hi, err))
            return -1;
        for (int p = lo; p <= hi && n < max; p *= 2)
            out[n++] = p;
        return n;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ","))
        if (parse_int(tok, "-p", 1, 65536, &out[n++], err))
            return -1;
    if (n == 0)
        return sb_fail(err, SB_EXIT_INPUT, "-p: empty device count list");
    return n;
}

int parse_pos_double(const char *s, const char *what, double *out, sb_error *err)
{
    return parse_double(s, what, out, err);
}

int parse_int_opt(const char *s, const char *what, int lo, int hi, int *out, sb_error *err)
{
    return parse_int(s, what, lo, hi, out, err);
}

int parse_long_opt(const char *s, const char *what, long *out, sb_error *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || errno || end == s || *end || v < 1)
        return sb_fail(err, SB_EXIT_INPUT, "%s: '%s' is not a positive integer", what, s);
    *out = v;
    return 0;
}

int cli_apply_calibration(const char *path, int flops_or_bw_given, sb_cost_params *cp,
                          sb_error *err)
{
    if (!path)
        return 0;
    if (flops_or_bw_given)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--calibration %s sets F and B: give it or --flops/--bw, not both", path);
    return sb_calibration_load(path, cp, err);
}

int cli_is_machine_file(const char *path)
{
    char *text;
    size_t len;
    sb_error err = {0};
    if (sb_read_file(path, "calibration file", 1 << 20, &text, &len, &err))
        return 0; /* the calibration reader says what is wrong */
    int found = 0;
    for (const char *p = text; *p && !found;) {
        while (*p == ' ' || *p == '\t')
            p++;
        found = !strncmp(p, "devices_per_node", 16) && (p[16] == ' ' || p[16] == '\t');
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : p + strlen(p);
    }
    free(text);
    return found;
}

int cli_apply_machine(const char *name, int flops_or_bw_given, const char *calibration,
                      int mem_given, double *device_gib, sb_cost_params *cp, sb_error *err)
{
    if (!name)
        return 0;
    if (flops_or_bw_given)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--machine %s sets F and B: give it or --flops/--bw, not both", name);
    if (calibration)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--machine %s sets the cost model: give it or --calibration %s, not both",
                       name, calibration);
    sb_machine mc;
    if (sb_machine_load(name, &mc, err))
        return -1;
    sb_machine_cost_params(&mc, cp);
    if (!mem_given && device_gib)
        *device_gib = mc.mem_gib;
    return 0;
}

int cli_apply_machine_at(const char *name, int flops_or_bw_given, const char *calibration,
                         int mem_given, double *device_gib, int prec, double grad_bytes,
                         sb_cost_params *cp, sb_error *err)
{
    if (!name) {
        if (prec > 0)
            return sb_fail(err, SB_EXIT_INPUT,
                           "--precision %s needs --machine: the reference model and a "
                           "calibration price fp32",
                           sb_precision_name(prec));
        if (grad_bytes > 0)
            return sb_fail(err, SB_EXIT_INPUT,
                           "--grad-reduce-dtype needs --machine: the reference model and a "
                           "calibration move one word");
        return 0;
    }
    int cutoff = cp->cutoff, zero = cp->zero, recompute = cp->recompute;
    if (cli_apply_machine(name, flops_or_bw_given, calibration, mem_given, device_gib, cp, err))
        return -1;
    sb_machine mc;
    if (sb_machine_load(name, &mc, err))
        return -1;
    if (sb_machine_cost_params_at(&mc, prec, grad_bytes, cp, err))
        return -1;
    cp->cutoff = cutoff, cp->zero = zero, cp->recompute = recompute;
    return 0;
}

int parse_mem_size(const char *s, const char *what, double *gib, sb_error *err)
{
    double bytes;
    if (sb_parse_size(s, what, "GiB", &bytes, err))
        return -1;
    *gib = bytes / 1073741824.0;
    return 0;
}

int parse_seed(const char *s, uint64_t *out, sb_error *err)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || errno || end == s || *end) /* not " -1": 2^64 - 1 */
        return sb_fail(err, SB_EXIT_INPUT, "--seed: '%s' is not a non-negative integer", s);
    *out = (uint64_t)v;
    return 0;
}

