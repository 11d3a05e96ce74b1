/* calibration.c: the calibration file of the calibrated cost model: the
 * reference model's F and B replaced by what `shardbench calibrate`
 * measured on a machine, plus the bytes per word, the relative cost of
 * elementwise work and a per-message latency (search.h, search/README.md).
 *
 * The file is text, one `key value` per line, `#` starts a comment:
 *   tflops 0.041      GEMM multiply-adds per second per device / 1e12
 *   gbs 2.3           link bandwidth, GB/s (all-reduce bus bandwidth)
 *   word_bytes 4      bytes per word moved
 *   elem_ratio 21.5   one elementwise element, in GEMM multiply-adds
 *   latency_us 31.0   per message step
 *   conv_ratio 0.6    a convolution's multiply-add, in GEMM multiply-adds
 * Every key but conv_ratio (default 1) is required once; anything else is
 * an error naming the line. Each value must lie in its key's range (the
 * table below: wide enough for any machine from a phone core to a rack of
 * GPUs, narrow enough that no cost of any model and device count overflows
 * a double); a value outside it is an error naming the file, line, key and
 * value. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/search.h"

typedef struct {
    const char *key;
    size_t off;
    int zero_ok; /* 0 allowed (latency) */
    int optional;
    double lo, hi; /* the accepted range (lo > 0 unless zero_ok; 0 itself then) */
    const char *unit;
} cal_key;

static const cal_key keys[] = {
    {"tflops", offsetof(sb_cost_params, tflops), 0, 0, 1e-6, 1e6, "TFLOP/s per device"},
    {"gbs", offsetof(sb_cost_params, gbs), 0, 0, 1e-6, 1e6, "GB/s"},
    {"word_bytes", offsetof(sb_cost_params, word_bytes), 0, 0, 0.5, 64, "bytes"},
    {"elem_ratio", offsetof(sb_cost_params, elem_ratio), 0, 0, 1e-6, 1e6, "GEMM multiply-adds"},
    {"latency_us", offsetof(sb_cost_params, latency_us), 1, 0, 1e-6, 1e7, "microseconds"},
    {"conv_ratio", offsetof(sb_cost_params, conv_ratio), 0, 1, 1e-6, 1e6, "GEMM multiply-adds"},
};
enum { NKEYS = sizeof keys / sizeof keys[0] };

int sb_calibration_load(const char *path, sb_cost_params *cp, sb_error *err)
{
    char *text;
    size_t len;
    if (sb_read_file(path, "calibration file", 1 << 20, &text, &len, err))
        return -1;
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int at = 1;
        for (const char *c = text; c < nul; c++)
            at += *c == '\n';
        free(text);
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: a NUL byte in the line", path, at);
    }
    FILE *f = fmemopen(text, len ? len : 1, "r");
    if (!f) {
        free(text);
        return sb_fail(err, SB_EXIT_INTERNAL, "calibration file '%s': %s", path, strerror(errno));
    }
    sb_cost_params c = *cp;
    int seen[NKEYS] = {0}, line = 0, rc = 0;
    char buf[1024];
    while (!rc && fgets(buf, sizeof buf, f)) {
        line++;
        if (!strchr(buf, '\n') && !feof(f)) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: line too long", path, line);
            break;
        }
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char key[64], val[256], extra[8];
        int n = sscanf(buf, "%63s %255s %7s", key, val, extra);
        if (n <= 0)
            continue; /* blank or comment */
        if (n != 2) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'key value', got '%.60s'", path,
                         line, buf);
            break;
        }
        int k = 0;
        while (k < NKEYS && strcmp(keys[k].key, key))
            k++;
        if (k == NKEYS) {
            rc = sb_fail(err, SB_EXIT_INPUT,
                         "%s:%d: unknown key '%s' (tflops, gbs, word_bytes, elem_ratio, latency_us, "
                         "conv_ratio)",
                         path, line, key);
            break;
        }
        if (seen[k]) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: '%s' given twice (first on line %d)", path,
                         line, key, seen[k]);
            break;
        }
        const char *end = "";
        double v = 0;
        if (sb_parse_number(val, &v, &end) || *end || v < 0 || (v == 0 && !keys[k].zero_ok)) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s '%s' is not a %s number", path, line, key,
                         val, keys[k].zero_ok ? "non-negative" : "positive");
            break;
        }
        if ((v < keys[k].lo || v > keys[k].hi) && !(v == 0 && keys[k].zero_ok)) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s %s is out of range: %g..%g %s%s", path,
                         line, key, val, keys[k].lo, keys[k].hi, keys[k].unit,
                         keys[k].zero_ok ? ", or 0" : "");
            break;
        }
        *(double *)((char *)&c + keys[k].off) = v;
        seen[k] = line;
    }
    if (!rc && ferror(f))
        rc = sb_fail(err, SB_EXIT_INPUT, "calibration file '%s': read error", path);
    fclose(f);
    free(text);
    if (!rc && !seen[NKEYS - 1])
        c.conv_ratio = 1.0; /* files from before it was measured */
    for (int k = 0; !rc && k < NKEYS; k++)
        if (!seen[k] && !keys[k].optional)
            rc = sb_fail(err, SB_EXIT_INPUT, "%s: no '%s' line (a calibration file has tflops, gbs, "
                         "word_bytes, elem_ratio and latency_us)", path, keys[k].key);
    if (rc)
        return rc;
    snprintf(c.calibration, sizeof c.calibration, "%s", path);
    *cp = c;
    return 0;
}

int sb_calibration_save(const char *path, const sb_cost_params *cp, const char *comment,
                        sb_error *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return sb_fail(err, SB_EXIT_INPUT, "calibration file name too long: '%s'", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return sb_fail(err, SB_EXIT_INPUT, "cannot write '%s': %s", tmp, strerror(errno));
    if (comment)
        fprintf(f, "# %s\n", comment);
    fprintf(f, "tflops %.6g      # GEMM multiply-adds per second per device / 1e12\n"
               "gbs %.6g         # link bandwidth, GB/s\n"
               "word_bytes %.6g  # bytes per word moved\n"
               "elem_ratio %.6g  # one elementwise element, in GEMM multiply-adds\n"
               "latency_us %.6g  # per message step, microseconds\n"
               "conv_ratio %.6g  # one convolution multiply-add, in GEMM multiply-adds\n",
            cp->tflops, cp->gbs, cp->word_bytes, cp->elem_ratio, cp->latency_us, cp->conv_ratio);
    int bad = ferror(f);
    if (fclose(f) || bad) {
        remove(tmp);
        return sb_fail(err, SB_EXIT_INPUT, "cannot write '%s'", tmp);
    }
    if (rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        return sb_fail(err, SB_EXIT_INPUT, "cannot rename '%s' to '%s': %s", tmp, path, strerror(e));
    }
    return 0;
}
