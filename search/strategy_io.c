/* strategy_io.c: strategies as files (versioned text, read back by the
 * runtime and bench) and as JSON (CLI output, results database).
 *
 * Text format, version 1 (one line each, '#' comments):
 *   shardbench-strategy 1
 *   model NAME
 *   params k=v,k=v,...
 *   p P
 *   algo ALGO
 *   cost TOTAL_FLOP
 *   op NAME KIND c1,c2,...     (one per op, in model order)
 */
#define _GNU_SOURCE
#include "shardbench/search.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_params_str(const sb_model *m, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < m->nparams && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s=%lld", i ? "," : "",
                                 m->params[i].name, (long long)m->params[i].value);
}

void sb_config_str(const int *c, int nd, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < nd && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", i ? "," : "", c[i]);
}

int sb_strategy_save(const char *path, const sb_problem *pb, const sb_result *r, const char *algo,
                     sb_error *err)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot write strategy: %s", path, strerror(errno));
    const sb_model *m = pb->m;
    char params[4096];
    sb_params_str(m, params, sizeof params);
    fprintf(f, "shardbench-strategy 1\n");
    fprintf(f, "# written by shardbench %s; one config (split count per iteration dim) per op\n",
            sb_version());
    fprintf(f, "model %s\nparams %s\np %d\nalgo %s\ncost %.17g\n", m->name, params, pb->p, algo,
            r->total_cost);
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        char cfg[256], dims[1024];
        sb_config_str(pb->cfg[i].c + (size_t)r->choice[i] * (size_t)op->ndims, op->ndims, cfg,
                      sizeof cfg);
        sb_op_dims_str(op, dims, sizeof dims);
        fprintf(f, "op %s %s %s  # %s\n", op->name, sb_op_kind_name(op->kind), cfg, dims);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        remove(tmp);
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot rename into place: %s", path,
                       strerror(errno));
    }
    return 0;
}

int sb_strategy_load(const char *path, const sb_problem *pb, int *choice, sb_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return sb_fail(err, SB_EXIT_INPUT, "%s: cannot open strategy: %s", path, strerror(errno));
    const sb_model *m = pb->m;
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, version = 0, nop = 0, rc = -1, p = -1;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char key[64], a[SB_NAME_MAX * 2], b[64], c[512];
        int n = sscanf(line, "%63s %191s %63s %511s", key, a, b, c);
        if (n <= 0)
            continue;
        if (!version) {
            if (strcmp(key, "shardbench-strategy") != 0 || n < 2) {
                sb_fail(err, SB_EXIT_INPUT, "%s:%d: not a shardbench strategy file", path, lineno);
                goto out;
            }
            version = atoi(a);
            if (version != 1) {
                sb_fail(err, SB_EXIT_INPUT, "%s:%d: strategy format version %s not supported (this build reads 1)",
                        path, lineno, a);
                goto out;
            }
            continue;
        }
        if (strcmp(key, "model") == 0 && n >= 2 && strcmp(a, m->name) != 0) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: strategy is for model '%s', not '%s'", path, lineno,
                    a, m->name);
            goto out;
        }
        if (strcmp(key, "params") == 0) {
            char want[4096], *have = line + strspn(line, " \t") + 6;
            have += strspn(have, " \t");
            have[strcspn(have, " \t\r\n")] = '\0';
            sb_params_str(m, want, sizeof want);
            if (strcmp(have, want) != 0) {
                sb_fail(err, SB_EXIT_INPUT, "%s:%d: strategy is for sizes %s, the model has %s",
                        path, lineno, have, want);
                goto out;
            }
        }
        if (strcmp(key, "p") == 0 && n >= 2) {
            p = atoi(a);
            if (p != pb->p) {
                sb_fail(err, SB_EXIT_INPUT, "%s:%d: strategy is for p=%d, running with p=%d", path,
                        lineno, p, pb->p);
                goto out;
            }
        }
        if (strcmp(key, "op") != 0)
            continue;
        if (n < 4) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'op NAME KIND CONFIG'", path, lineno);
            goto out;
        }
        if (nop >= m->nops || strcmp(m->ops[nop].name, a) != 0) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: op '%s' does not match the model (expected '%s')",
                    path, lineno, a, nop < m->nops ? m->ops[nop].name : "no more ops");
            goto out;
        }
        const sb_op *op = &m->ops[nop];
        int cfg[SB_MAX_DIMS], nd = 0;
        char *s = c;
        while (*s && nd < SB_MAX_DIMS) {
            char *end;
            long v = strtol(s, &end, 10);
            if (end == s || v < 1 || v > 1 << 20)
                break;
            cfg[nd++] = (int)v;
            s = end;
            if (*s == ',')
                s++;
        }
        if (nd != op->ndims || *s) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: op '%s': config '%s' needs %d split counts", path,
                    lineno, a, c, op->ndims);
            goto out;
        }
        int found = -1;
        for (int k = 0; k < pb->cfg[nop].n && found < 0; k++)
            if (!memcmp(pb->cfg[nop].c + (size_t)k * (size_t)op->ndims, cfg, (size_t)nd * sizeof(int)))
                found = k;
        if (found < 0) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: op '%s': config %s is not a valid config at p=%d",
                    path, lineno, a, c, pb->p);
            goto out;
        }
        choice[nop++] = found;
    }
    if (!version) {
        sb_fail(err, SB_EXIT_INPUT, "%s: empty or not a strategy file", path);
        goto out;
    }
    if (nop != m->nops) {
        sb_fail(err, SB_EXIT_INPUT, "%s: has %d ops, the model has %d", path, nop, m->nops);
        goto out;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

void sb_strategy_json(FILE *f, const sb_problem *pb, const sb_result *r, const char *algo)
{
    const sb_model *m = pb->m;
    fprintf(f, "{\"model\":");
    json_str(f, m->name);
    fprintf(f, ",\"params\":{");
    for (int i = 0; i < m->nparams; i++) {
        fprintf(f, "%s", i ? "," : "");
        json_str(f, m->params[i].name);
        fprintf(f, ":%lld", (long long)m->params[i].value);
    }
    fprintf(f, "},\"p\":%d,\"algo\":", pb->p);
    json_str(f, algo);
    fprintf(f, ",\"flops_tflops\":%.17g,\"bw_gbs\":%.17g,\"cutoff\":%d", pb->cp.tflops, pb->cp.gbs,
            pb->cp.cutoff);
    if (pb->cp.calibration[0]) {
        fprintf(f, ",\"calibration\":");
        json_str(f, pb->cp.calibration);
        fprintf(f, ",\"word_bytes\":%.17g,\"elem_ratio\":%.17g,\"latency_us\":%.17g",
                pb->cp.word_bytes, pb->cp.elem_ratio, pb->cp.latency_us);
    }
    fprintf(f, ",\"total_cost\":%.17g,\"search_seconds\":%.9f,\"vertices\":%d,\"max_configs\":%d,"
               "\"max_dep_set\":%d,\"peak_table_bytes\":%.0f,\"ops\":[",
            r->total_cost, r->seconds, m->nops, r->max_configs, r->max_dep_set, r->peak_table_bytes);
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        const int *c = pb->cfg[i].c + (size_t)r->choice[i] * (size_t)op->ndims;
        fprintf(f, "%s{\"name\":", i ? "," : "");
        json_str(f, op->name);
        fprintf(f, ",\"type\":");
        json_str(f, sb_op_kind_name(op->kind));
        fprintf(f, ",\"dims\":[");
        for (int d = 0; d < op->ndims; d++) {
            fprintf(f, "%s{\"name\":", d ? "," : "");
            json_str(f, op->dims[d].name);
            fprintf(f, ",\"size\":%lld}", (long long)op->dims[d].size);
        }
        fprintf(f, "],\"config\":[");
        for (int d = 0; d < op->ndims; d++)
            fprintf(f, "%s%d", d ? "," : "", c[d]);
        fprintf(f, "],\"cost\":%.17g}", pb->cfg[i].cost[r->choice[i]]);
    }
    fprintf(f, "]}");
}

char *sb_strategy_json_str(const sb_problem *pb, const sb_result *r, const char *algo)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    sb_strategy_json(f, pb, r, algo);
    fclose(f);
    return buf;
}
