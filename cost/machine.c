/* machine.c: machine description files (shardbench/machine.h,
 * docs/machines.md). Text, one `key value` per line, `#` starts a comment.
 * Every key but the efficiency factors (default 1) is required once; an
 * unknown or repeated key, a value that is not a number or lies outside its
 * key's range is an error naming the file, line, key and value. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shardbench/machine.h"
#include "shardbench/megatron.h"
#include "shardbench/precision.h"

#ifndef SB_MACHINES_BUILD_DIR
#define SB_MACHINES_BUILD_DIR ""
#endif
#ifndef SB_MACHINES_INSTALL_DIR
#define SB_MACHINES_INSTALL_DIR ""
#endif

/* The folders shipped machine files are looked up in, in order. */
static int machine_dirs(const char *dirs[3])
{
    dirs[0] = getenv("SHARDBENCH_MACHINES");
    dirs[1] = SB_MACHINES_BUILD_DIR;
    dirs[2] = SB_MACHINES_INSTALL_DIR;
    return 3;
}

char **sb_shipped_machines(void)
{
    const char *dirs[3];
    return sb_shipped_names("machine", dirs, machine_dirs(dirs));
}

typedef struct {
    const char *key;
    size_t off;
    int is_int, optional; /* is_int 2: a precision name (sb_precision); 3: a curve
                             `x:y,...` (sb_curve: lo..hi bound y, x a sequence length) */
    double lo, hi;
    const char *unit;
} mkey;

#define D(f) offsetof(sb_machine, f)
static const mkey keys[] = {
    {"devices_per_node", D(devices_per_node), 1, 0, 1, 1024, "devices"},
    {"nodes", D(nodes), 1, 0, 1, 65536, "nodes"},
    {"tflops_fp32", D(tflops_fp32), 0, 0, 1e-6, 1e5, "TFLOP/s per device"},
    {"tflops_tf32", D(tflops_tf32), 0, 0, 1e-6, 1e5, "TFLOP/s per device"},
    {"tflops_bf16", D(tflops_bf16), 0, 0, 1e-6, 1e5, "TFLOP/s per device"},
    {"mem_gib", D(mem_gib), 0, 0, 1e-3, 1e5, "GiB per device"},
    {"mem_gbs", D(mem_gbs), 0, 0, 1e-6, 1e6, "GB/s per device"},
    {"intra_gbs", D(intra_gbs), 0, 0, 1e-6, 1e5, "GB/s per device"},
    {"intra_latency_us", D(intra_latency_us), 0, 0, 0, 1e7, "microseconds"},
    {"inter_gbs", D(inter_gbs), 0, 0, 1e-6, 1e5, "GB/s per device"},
    {"inter_latency_us", D(inter_latency_us), 0, 0, 0, 1e7, "microseconds"},
    {"eff_gemm", D(eff_gemm), 0, 1, 1e-6, 1, "of peak"},
    {"eff_conv", D(eff_conv), 0, 1, 1e-6, 1, "of peak"},
    {"eff_elementwise", D(eff_elementwise), 0, 1, 1e-6, 1, "of peak"},
    {"tflops_fp8", D(tflops_fp8), 0, 1, 1e-6, 1e5, "TFLOP/s per device"},
    {"precision", D(precision), 2, 1, 0, SB_PREC_COUNT - 1, "recipe"},
    {"sms", D(sms), 0, 1, 1, 1e5, "streaming multiprocessors"},
    {"gemm_eff_large", D(gemm_eff_large), 0, 1, 1e-6, 1, "of peak"},
    {"gemm_eff_large_fp8", D(gemm_eff_large_fp8), 0, 1, 1e-6, 1, "of the fp8 peak"},
    {"hbm_eff", D(hbm_eff), 0, 1, 1e-6, 1, "of mem_gbs"},
    {"kernel_us", D(kernel_us), 0, 1, 0, 1e6, "microseconds per kernel"},
    {"intra_busbw", D(intra_busbw), 0, 1, 1e-6, 1e5, "GB/s per device"},
    {"inter_busbw", D(inter_busbw), 0, 1, 1e-6, 1e5, "GB/s per device"},
    {"attn_fwd_tflops", D(attn_fwd_tflops), 3, 1, 1e-6, 1e5, "TFLOP/s by sequence length"},
    {"attn_bwd_tflops", D(attn_bwd_tflops), 3, 1, 1e-6, 1e5, "TFLOP/s by sequence length"},
};
#undef D
enum { NKEYS = sizeof keys / sizeof keys[0] };

static const char key_list[] = "devices_per_node, nodes, tflops_fp32, tflops_tf32, tflops_bf16, "
                               "mem_gib, mem_gbs, intra_gbs, intra_latency_us, inter_gbs, "
                               "inter_latency_us, eff_gemm, eff_conv, eff_elementwise, tflops_fp8, "
                               "precision, sms, gemm_eff_large, gemm_eff_large_fp8, hbm_eff, "
                               "kernel_us, intra_busbw, inter_busbw, attn_fwd_tflops, "
                               "attn_bwd_tflops";

/* A curve value: `x:y` points separated by commas, x whole and increasing
 * (1..2^24), y within the key's range. */
static int parse_curve(const char *val, const char *path, int line, const mkey *k, sb_curve *c,
                       sb_error *err)
{
    memset(c, 0, sizeof *c);
    const char *p = val;
    while (*p) {
        if (c->n == SB_CURVE_MAX)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s has over %d points", path, line,
                           k->key, SB_CURVE_MAX);
        char pt[64];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof pt)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s '%s': expected seq:tflops points "
                           "separated by commas", path, line, k->key, val);
        memcpy(pt, p, len);
        pt[len] = '\0';
        p += len + (p[len] == ',');
        char *colon = strchr(pt, ':');
        const char *e1 = "", *e2 = "";
        double x = 0, y = 0;
        if (!colon)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s point '%s' is not seq:tflops", path,
                           line, k->key, pt);
        *colon = '\0';
        if (sb_parse_number(pt, &x, &e1) || *e1 || x != floor(x) || x < 1 || x > 16777216)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s: sequence length '%s' is not a whole "
                           "number in 1..16777216", path, line, k->key, pt);
        if (sb_parse_number(colon + 1, &y, &e2) || *e2 || y < k->lo || y > k->hi)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s at %s: '%s' is not a number in "
                           "%g..%g %s", path, line, k->key, pt, colon + 1, k->lo, k->hi, k->unit);
        if (c->n > 0 && x <= c->x[c->n - 1])
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s: sequence lengths must increase "
                           "(%s after %g)", path, line, k->key, pt, c->x[c->n - 1]);
        c->x[c->n] = x, c->y[c->n] = y, c->n++;
        if (!*p && p[-1] == ',')
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s '%s' ends with a comma", path, line,
                           k->key, val);
    }
    return 0;
}

/* The line key was read on (seen: per key, its line or 0). */
static int line_of(const int *seen, const char *key)
{
    int k = 0;
    while (k < NKEYS && strcmp(keys[k].key, key))
        k++;
    return k < NKEYS ? seen[k] : 0;
}

int sb_machine_parse(const char *text, const char *path, sb_machine *mc, sb_error *err)
{
    sb_machine m;
    memset(&m, 0, sizeof m);
    m.eff_gemm = m.eff_conv = m.eff_elementwise = 1.0;
    int seen[NKEYS] = {0}, line = 0;
    const char *p = text;
    while (*p) {
        line++;
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= 1024)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: line too long", path, line);
        char buf[1024];
        memcpy(buf, p, len);
        buf[len] = '\0';
        p = nl ? nl + 1 : p + len;
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char key[64], val[256], extra[8];
        int n = sscanf(buf, "%63s %255s %7s", key, val, extra);
        if (n <= 0)
            continue;
        if (n != 2)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'key value', got '%.60s'", path,
                           line, buf);
        int k = 0;
        while (k < NKEYS && strcmp(keys[k].key, key))
            k++;
        if (k == NKEYS)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: unknown key '%s' (%s)", path, line, key,
                           key_list);
        if (seen[k])
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: '%s' given twice (first on line %d)", path,
                           line, key, seen[k]);
        if (keys[k].is_int == 3) { /* a curve */
            if (parse_curve(val, path, line, &keys[k], (sb_curve *)((char *)&m + keys[k].off), err))
                return -1;
            seen[k] = line;
            continue;
        }
        if (keys[k].is_int == 2) { /* a precision name */
            sb_error perr = {0};
            if (sb_precision_parse(val, key, (int *)((char *)&m + keys[k].off), &perr))
                return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s", path, line, perr.msg);
            seen[k] = line;
            continue;
        }
        const char *end = "";
        double v = 0;
        if (sb_parse_number(val, &v, &end) || *end) /* decimal only: no hex, inf or nan */
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s '%s' is not a number", path, line, key,
                           val);
        if (keys[k].is_int && v != floor(v))
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s '%s' is not a whole number", path, line,
                           key, val);
        if (v < keys[k].lo || v > keys[k].hi)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s %s is out of range: %g..%g %s", path,
                           line, key, val, keys[k].lo, keys[k].hi, keys[k].unit);
        if (keys[k].is_int)
            *(int *)((char *)&m + keys[k].off) = (int)v;
        else
            *(double *)((char *)&m + keys[k].off) = v;
        seen[k] = line;
    }
    for (int k = 0; k < NKEYS; k++)
        if (!seen[k] && !keys[k].optional)
            return sb_fail(err, SB_EXIT_INPUT, "%s: no '%s' line (a machine file has %s)", path,
                           keys[k].key, key_list);
    if ((m.attn_fwd_tflops.n > 0) != (m.attn_bwd_tflops.n > 0))
        return sb_fail(err, SB_EXIT_INPUT, "%s: %s without %s (the fused attention's forward and "
                       "backward rates go together)", path,
                       m.attn_fwd_tflops.n ? "attn_fwd_tflops" : "attn_bwd_tflops",
                       m.attn_fwd_tflops.n ? "attn_bwd_tflops" : "attn_fwd_tflops");
    if ((double)m.devices_per_node * m.nodes > 65536)
        return sb_fail(err, SB_EXIT_INPUT, "%s: devices_per_node %d times nodes %d is over 65536",
                       path, m.devices_per_node, m.nodes);
    if (m.sms != floor(m.sms)) /* (absent: 0) */
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: sms %g is not a whole number", path,
                       line_of(seen, "sms"), m.sms);
    if (m.precision == SB_PREC_FP8 && !(m.tflops_fp8 > 0)) /* (absent: fp32) */
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: precision fp8 without a tflops_fp8 line (the "
                       "peak it is priced at)", path, line_of(seen, "precision"));
    snprintf(m.path, sizeof m.path, "%s", path);
    *mc = m;
    return 0;
}

int sb_machine_load(const char *name, sb_machine *mc, sb_error *err)
{
    char path[1024];
    const char *dirs[3];
    if (!sb_find_shipped(name, "machine", dirs, machine_dirs(dirs), path, sizeof path)) {
        char list[512] = "none found";
        char **names = sb_shipped_names("machine", dirs, 3);
        if (names && names[0])
            sb_join_names((const char *const *)names, list, sizeof list);
        sb_names_free(names);
        return sb_fail(err, SB_EXIT_INPUT,
                       "unknown machine '%s': not a file, and not a shipped machine (%s)", name,
                       list);
    }
    char *text;
    size_t len;
    if (sb_read_file(path, "machine file", 1 << 20, &text, &len, err))
        return -1;
    if (strlen(text) != len) {
        free(text);
        return sb_fail(err, SB_EXIT_INPUT, "%s: machine file holds a NUL byte", path);
    }
    int rc = sb_machine_parse(text, path, mc, err);
    free(text);
    return rc;
}

void sb_machine_cost_params(const sb_machine *mc, sb_cost_params *cp)
{
    int cutoff = cp->cutoff;
    sb_cost_params_default(cp);
    cp->cutoff = cutoff;
    cp->tflops = mc->tflops_fp32 * mc->eff_gemm;
    cp->word_bytes = 4.0; /* fp32 */
    cp->elem_ratio = mc->eff_gemm / mc->eff_elementwise;
    cp->conv_ratio = mc->eff_gemm / mc->eff_conv;
    cp->gbs = mc->intra_gbs;
    cp->latency_us = mc->intra_latency_us;
    cp->node_devices = mc->devices_per_node;
    cp->gbs_inter = mc->inter_gbs;
    cp->latency_inter_us = mc->inter_latency_us;
    snprintf(cp->machine, sizeof cp->machine, "%s", mc->path);
}

int sb_machine_cost_params_at(const sb_machine *mc, int prec, double grad_word_bytes,
                              sb_cost_params *cp, sb_error *err)
{
    if (prec < 0)
        prec = mc->precision;
    double peak = sb_machine_peak(mc, prec, 0);
    if (!(peak > 0))
        return sb_fail(err, SB_EXIT_INPUT,
                       "--precision %s: machine %s has no %s peak (no tflops_%s line)",
                       sb_precision_name(prec), mc->path, sb_precision_name(prec),
                       sb_precision_name(prec));
    sb_machine_cost_params(mc, cp);
    sb_prec_bytes b = sb_precision_bytes(prec);
    cp->precision = prec;
    cp->tflops = peak * mc->eff_gemm;
    cp->word_bytes = b.act;
    double gw = grad_word_bytes > 0 ? grad_word_bytes : b.grad_word;
    cp->grad_word_bytes = gw == b.act ? 0.0 : gw; /* 0: the activations' word */
    /* collectives at the bus bandwidth NCCL reaches where the file gives it (the
     * all-reduce term's 2(q-1)/q words over B is nccl-tests' busbw definition) */
    if (mc->intra_busbw > 0)
        cp->gbs = mc->intra_busbw;
    if (mc->inter_busbw > 0)
        cp->gbs_inter = mc->inter_busbw;
    if (sb_machine_has_gpu_model(mc)) { /* the GPU op model */
        cp->gpu_sms = mc->sms;
        cp->gpu_peak_tflops = peak;
        cp->gpu_attn_peak_tflops = sb_machine_peak(mc, prec, 1);
        cp->gpu_gemm_eff = sb_machine_gemm_eff(mc, prec, 0);
        cp->gpu_attn_gemm_eff = sb_machine_gemm_eff(mc, prec, 1);
        if (sb_attn_curves_apply(prec))
            cp->gpu_attn_fwd = mc->attn_fwd_tflops, cp->gpu_attn_bwd = mc->attn_bwd_tflops;
        cp->gpu_hbm_gbs = mc->mem_gbs;
        cp->gpu_hbm_eff = mc->hbm_eff;
        cp->gpu_kernel_us = mc->kernel_us;
    }
    return 0;
}

int sb_machine_from_cost_params(const sb_cost_params *cp, int devices, double mem_gib,
                                double mem_gbs, sb_machine *mc, sb_error *err)
{
    sb_machine m;
    memset(&m, 0, sizeof m);
    double eff = 1.0;
    if (cp->elem_ratio < eff)
        eff = cp->elem_ratio;
    if (cp->conv_ratio < eff)
        eff = cp->conv_ratio;
    m.devices_per_node = devices;
    m.nodes = 1;
    m.eff_gemm = eff;
    m.eff_elementwise = eff / cp->elem_ratio;
    m.eff_conv = eff / cp->conv_ratio;
    m.tflops_fp32 = m.tflops_tf32 = m.tflops_bf16 = cp->tflops / eff;
    m.mem_gib = mem_gib;
    m.mem_gbs = mem_gbs;
    m.intra_gbs = m.inter_gbs = cp->gbs;
    m.intra_latency_us = m.inter_latency_us = cp->latency_us;
    /* every value within its key's range, as a load would check */
    for (int k = 0; k < NKEYS; k++) {
        const char *at = (const char *)&m + keys[k].off;
        if (keys[k].is_int == 3)
            continue; /* a curve: none */
        double v = keys[k].is_int ? *(const int *)at : *(const double *)at;
        if (keys[k].optional && keys[k].lo > 0 && v == 0)
            continue; /* tflops_fp8: none */
        if (!(v >= keys[k].lo && v <= keys[k].hi))
            return sb_fail(err, SB_EXIT_INPUT,
                           "machine from a calibration: %s %g is out of range: %g..%g %s",
                           keys[k].key, v, keys[k].lo, keys[k].hi, keys[k].unit);
    }
    *mc = m;
    return 0;
}

int sb_machine_save(const char *path, const sb_machine *mc, const char *comment, sb_error *err)
{
    char tmp[4096];
    FILE *f = sb_out_open(path, "machine file", tmp, sizeof tmp, err);
    if (!f)
        return -1;
    if (comment)
        fprintf(f, "# %s\n", comment);
    for (int k = 0; k < NKEYS; k++) {
        const char *at = (const char *)mc + keys[k].off;
        if (keys[k].is_int == 3) { /* a curve, where there is one */
            const sb_curve *c = (const sb_curve *)at;
            if (c->n > 0) {
                fprintf(f, "%-18s ", keys[k].key);
                for (int i = 0; i < c->n; i++)
                    fprintf(f, "%s%.9g:%.9g", i ? "," : "", c->x[i], c->y[i]);
                fprintf(f, "  # %s\n", keys[k].unit);
            }
        } else if (keys[k].is_int == 2)
            fprintf(f, "%-18s %s  # %s\n", keys[k].key, sb_precision_name(*(const int *)at),
                    keys[k].unit);
        else if (keys[k].optional && keys[k].lo > 0 && !(*(const double *)at > 0))
            continue; /* an optional figure not given (tflops_fp8 0) */
        else if (keys[k].is_int)
            fprintf(f, "%-18s %d  # %s\n", keys[k].key, *(const int *)at, keys[k].unit);
        else
            fprintf(f, "%-18s %.9g  # %s\n", keys[k].key, *(const double *)at, keys[k].unit);
    }
    return sb_out_commit(f, tmp, path, "machine file", err);
}
