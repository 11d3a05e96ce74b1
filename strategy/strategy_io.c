/* strategy_io.c: strategies as files (versioned text, read back by the
 * runtime and bench) and as JSON (CLI output, results database).
 *
 * Text format, version 1 (one line each, '#' comments):
 *   shardbench-strategy 1
 *   model NAME                 (or "NAME" with \" \\ \n \t \r \xHH escapes when the
 *                               name is empty or holds a blank, '#', '"' or '\\')
 *   params k=v,k=v,...
 *   p P
 *   algo ALGO
 *   cost TOTAL_FLOP
 *   op NAME KIND c1,c2,...     (one per op, in model order)
 */
#define _GNU_SOURCE
#include "shardbench/megatron.h"
#include "shardbench/precision.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"
#include "shardbench/pipeline.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest strategy file read: one line per op, so far above any model's. */
#define SB_STRATEGY_MAX_BYTES ((size_t)64 << 20)

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

/* NAME as written on a `model` line: bare when it is a plain word (what
 * every older reader expects), else in double quotes with C escapes. */
static void quote_word(FILE *f, const char *s)
{
    if (*s && !strpbrk(s, " \t#\"\\\r\n\v\f") && s[0] != '"') {
        int plain = 1;
        for (const char *c = s; *c; c++)
            plain &= (unsigned char)*c >= 0x20 && *c != 0x7f;
        if (plain) {
            fputs(s, f);
            return;
        }
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int hexdig(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int sb_strategy_word(const char *s, char *out, size_t n, const char **end)
{
    s += strspn(s, " \t");
    size_t k = 0;
    if (*s != '"') { /* bare: up to a blank or a comment */
        size_t len = strcspn(s, " \t\r\n#");
        if (len >= n)
            return -1;
        memcpy(out, s, len);
        out[len] = '\0';
        if (end)
            *end = s + len;
        return 0;
    }
    for (s++; *s != '"'; s++) {
        int c = (unsigned char)*s;
        if (!c || c == '\n')
            return -1; /* unterminated */
        if (c == '\\') {
            c = (unsigned char)*++s;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'r')
                c = '\r';
            else if (c == 'x' && hexdig(s[1]) >= 0 && hexdig(s[2]) >= 0) {
                c = hexdig(s[1]) * 16 + hexdig(s[2]);
                s += 2;
            } else if (c != '"' && c != '\\')
                return -1;
        }
        if (k + 1 >= n)
            return -1;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    if (end)
        *end = s + 1;
    return 0;
}

/* The '#' that starts the comment of a line, or NULL: one outside a quoted
 * word (a '"' that starts a word opens it). */
static char *comment_start(char *line)
{
    int quoted = 0;
    for (char *c = line; *c; c++) {
        if (quoted) {
            if (*c == '\\' && c[1])
                c++;
            else if (*c == '"')
                quoted = 0;
        } else if (*c == '"' && (c == line || c[-1] == ' ' || c[-1] == '\t')) {
            quoted = 1;
        } else if (*c == '#') {
            return c;
        }
    }
    return NULL;
}

/* ---- writing ------------------------------------------------------------------ */

int sb_strategy_save(const char *path, const sb_model *m, const sb_strategy *sf,
                          sb_error *err)
{
    char tmp[4200];
    FILE *f = sb_out_open(path, "strategy file", tmp, sizeof tmp, err);
    if (!f)
        return -1;
    char params[4096];
    sb_params_str(m, params, sizeof params);
    int v2 = sb_strategy_has_extras(m, sf) || sf->precision;
    fprintf(f, "shardbench-strategy %d\n", v2 ? 2 : 1);
    fprintf(f, "# written by shardbench %s; one config (split count per iteration dim) per op\n",
            sb_version());
    fputs("model ", f);
    quote_word(f, m->name);
    fprintf(f, "\nparams %s\np %d\nalgo %s\ncost %.17g\n", params, sf->p, sf->algo, sf->cost);
    if (v2) {
        const sb_pipeline *pl = &sf->pipe;
        if (pl->nstages && !sb_pipeline_is_none(pl)) {
            fprintf(f, "pipeline %d %d %s  # stages, micro-batches, schedule\n", pl->nstages,
                    pl->microbatches, sb_schedule_name(pl->schedule));
            for (int s = 0; s < pl->nstages; s++)
                fprintf(f, "stage %d %d %s %s  # devices, first op, last op\n", s, pl->devices[s],
                        m->ops[pl->first_op[s]].name, m->ops[pl->first_op[s + 1] - 1].name);
        }
        if (sf->zero)
            fprintf(f, "zero %d\n", sf->zero);
        if (sf->precision)
            fprintf(f, "precision %s  # the recipe it was priced in\n",
                    sb_precision_name(sf->precision));
        if (sf->node_order)
            fprintf(f, "ranks cyclic %d  # rank r on node r mod (p / %d)\n", sf->node_devices,
                    sf->node_devices);
        for (int i = 0; sf->recompute && i < m->nops; i++)
            if (sf->recompute[i] && sb_op_recomputable(&m->ops[i])) /* as the reader takes */
                fprintf(f, "recompute %s\n", m->ops[i].name);
    }
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        char cfg[256], dims[1024];
        sb_config_str(sb_strategy_config(sf, i), op->ndims, cfg, sizeof cfg);
        sb_op_dims_str(op, dims, sizeof dims);
        fprintf(f, "op %s %s %s  # %s\n", op->name, sb_op_kind_name(op->kind), cfg, dims);
    }
    return sb_out_commit(f, tmp, path, "strategy file", err);
}

int sb_result_save(const char *path, const sb_problem *pb, const sb_result *r, const char *algo,
                   sb_error *err)
{
    sb_strategy st;
    if (sb_strategy_from_result(&st, pb, r, algo, err))
        return -1;
    int rc = sb_strategy_save(path, pb->m, &st, err);
    sb_strategy_free(&st);
    return rc;
}

/* ---- reading ------------------------------------------------------------------ */

/* The op named `name`, or -1. */
static int op_index(const sb_model *m, const char *name)
{
    for (int i = 0; i < m->nops; i++)
        if (!strcmp(m->ops[i].name, name))
            return i;
    return -1;
}

/* A whole number in [lo, hi] from word w, or -1 with *ok = 0. */
static long whole(const char *w, long lo, long hi, int *ok)
{
    char *end;
    errno = 0;
    long v = strtol(w, &end, 10);
    int digit = (w[0] >= '0' && w[0] <= '9') || (w[0] == '-' && w[1] >= '0' && w[1] <= '9');
    if (!digit || end == w || *end || errno || v < lo || v > hi) { /* not " 2", "+2" */
        *ok = 0;
        return -1;
    }
    return v;
}

/* The pipeline, ranks, zero and recompute lines of a version-2 file. 1 when the
 * line was one of them, 0 when not, -1 on an error. */
static int read_extra(const char *path, int lineno, const char *line, const sb_model *m,
                      sb_strategy *sf, int *nstage_lines, int *rc_line, sb_error *err)
{
    char key[64], w[4][SB_NAME_MAX * 2];
    int n = sscanf(line, "%63s %191s %191s %191s %191s", key, w[0], w[1], w[2], w[3]);
    int ok = 1;
    sb_pipeline *pl = &sf->pipe;
    if (!strcmp(key, "pipeline")) {
        if (sf->node_order)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: a pipeline after 'ranks cyclic': a "
                           "pipeline's stages are consecutive ranks", path, lineno);
        if (n != 4)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'pipeline STAGES MICROBATCHES "
                           "SCHEDULE'", path, lineno);
        pl->nstages = (int)whole(w[0], 1, SB_MAX_STAGES, &ok);
        pl->microbatches = (int)whole(w[1], 1, 1 << 20, &ok);
        if (!ok)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: stages '%s' (1 .. %d) or micro-batches "
                           "'%s' (>= 1) is not a valid count", path, lineno, w[0], SB_MAX_STAGES,
                           w[1]);
        if (sb_schedule_parse(w[2], &pl->schedule))
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: schedule '%s' unknown (gpipe or 1f1b)",
                           path, lineno, w[2]);
        return 1;
    }
    if (!strcmp(key, "stage")) {
        if (n != 5)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'stage K DEVICES FIRST_OP "
                           "LAST_OP'", path, lineno);
        int k = (int)whole(w[0], 0, SB_MAX_STAGES - 1, &ok);
        int dev = (int)whole(w[1], 1, 1 << 20, &ok);
        if (!ok || k != *nstage_lines || k >= pl->nstages)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: stage '%s' with %s devices: stages are "
                           "numbered 0 .. STAGES-1 in order after the pipeline line", path,
                           lineno, w[0], w[1]);
        int first = op_index(m, w[2]), last = op_index(m, w[3]);
        if (first < 0 || last < 0)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: stage %d: op '%s' is not in model '%s'",
                           path, lineno, k, first < 0 ? w[2] : w[3], m->name);
        if (k > 0 && first != pl->first_op[k])
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: stage %d must start at op '%s', after "
                           "the last op of stage %d", path, lineno, k,
                           pl->first_op[k] < m->nops ? m->ops[pl->first_op[k]].name : "(none)",
                           k - 1);
        if (k == 0 && first != 0)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: stage 0 must start at the first op '%s'",
                           path, lineno, m->ops[0].name);
        if (last < first)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: stage %d: op '%s' comes before '%s'",
                           path, lineno, k, w[3], w[2]);
        pl->first_op[k] = first;
        pl->first_op[k + 1] = last + 1;
        pl->devices[k] = dev;
        (*nstage_lines)++;
        return 1;
    }
    if (!strcmp(key, "ranks")) {
        int nd = n == 3 && !strcmp(w[0], "cyclic") ? (int)whole(w[1], 1, 1 << 20, &ok) : 0;
        if (!ok || nd < 1 || sf->p <= nd || sf->p % nd)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'ranks cyclic DEVICES_PER_NODE' "
                           "with more than one node of p = %d devices", path, lineno, sf->p);
        if (sf->node_order)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: a second 'ranks' line", path, lineno);
        if (pl->nstages > 1)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: 'ranks cyclic' with a pipeline: a "
                           "pipeline's stages are consecutive ranks", path, lineno);
        sf->node_order = 1;
        sf->node_devices = nd;
        return 1;
    }
    if (!strcmp(key, "zero")) {
        sf->zero = (int)whole(n >= 2 ? w[0] : "", 0, 3, &ok);
        if (!ok || n != 2)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'zero 0..3'", path, lineno);
        return 1;
    }
    if (!strcmp(key, "precision")) {
        sb_error perr;
        if (n != 2 || sb_precision_parse(w[0], "precision", &sf->precision, &perr))
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'precision fp32|tf32|fp16|bf16|"
                           "fp8'%s%s", path, lineno, n >= 2 ? ", not " : "", n >= 2 ? w[0] : "");
        return 1;
    }
    if (!strcmp(key, "recompute")) {
        int i = n == 2 ? op_index(m, w[0]) : -1;
        if (i < 0)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'recompute OP' with an op of "
                           "model '%s'%s%s", path, lineno, m->name, n >= 2 ? ", not " : "",
                           n >= 2 ? w[0] : "");
        if (!sb_op_recomputable(&m->ops[i])) /* as --recompute refuses it */
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: op '%s' (%s) cannot be recomputed (the "
                           "loss and the LSTM are not)", path, lineno, w[0],
                           sb_op_kind_name(m->ops[i].kind));
        if (rc_line[i])
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: 'recompute %s' given twice (first on line "
                           "%d)", path, lineno, w[0], rc_line[i]);
        rc_line[i] = lineno;
        sf->recompute[i] = 1;
        return 1;
    }
    return 0;
}

/* The lines of each format version: a line of no key here, or of a later
 * version than the file's header, is refused; a key given once is refused
 * a second time, naming the first line. */
static const struct {
    const char *key;
    int version, once;
} line_keys[] = {
    {"model", 1, 1},    {"params", 1, 1}, {"p", 1, 1},     {"algo", 1, 1},
    {"cost", 1, 1},     {"op", 1, 0},     {"pipeline", 2, 1}, {"stage", 2, 0},
    {"zero", 2, 1},     {"ranks", 2, 1},  {"recompute", 2, 0}, {"precision", 2, 1},
};
enum { NLINE_KEYS = sizeof line_keys / sizeof line_keys[0] };

/* Checks line `lineno` of key `key` against the file's version and the
 * keys seen (first[k]: the line of key k, 0 if none yet). 0 or -1. */
static int check_key(const char *path, int lineno, const char *key, int version, int *first,
                     sb_error *err)
{
    int k = 0;
    while (k < NLINE_KEYS && strcmp(line_keys[k].key, key))
        k++;
    if (k == NLINE_KEYS || line_keys[k].version > version) {
        char shown[80];
        sb_escape_controls(key, shown, sizeof shown, 0);
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: '%s' is not a line of strategy format version "
                       "%d (%s)", path, lineno, shown, version,
                       version == 1 ? "model, params, p, algo, cost, op; pipeline, stage, zero, "
                                      "ranks, recompute and precision need 'shardbench-strategy 2'"
                                    : "model, params, p, algo, cost, pipeline, stage, zero, "
                                      "ranks, recompute, precision, op");
    }
    if (line_keys[k].once && first[k])
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: '%s' given twice (first on line %d)", path,
                       lineno, key, first[k]);
    if (!first[k])
        first[k] = lineno;
    return 0;
}

/* A header line's value checked against m and p, or kept (algo, cost):
 * 0, or -1 with err naming path:line. */
static int read_head_key(const char *path, int lineno, const char *line, const char *key,
                         const char *a, int n, const sb_model *m, int p, sb_strategy *sf,
                         sb_error *err)
{
    if (strcmp(key, "model") == 0 && n >= 2) {
        char name[SB_NAME_MAX * 2];
        const char *rest;
        if (sb_strategy_word(line + strspn(line, " \t") + 5, name, sizeof name, &rest) ||
            rest[strspn(rest, " \t\r\n")]) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: bad model name (a word, or one in double "
                    "quotes)", path, lineno);
            return -1;
        }
        if (strcmp(name, m->name) != 0) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: strategy is for model '%s', not '%s'", path,
                    lineno, name, m->name);
            return -1;
        }
    }
    if (strcmp(key, "params") == 0) {
        char want[4096], have[4096];
        const char *h = line + strspn(line, " \t") + 6;
        h += strspn(h, " \t");
        snprintf(have, sizeof have, "%.*s", (int)strcspn(h, " \t\r\n"), h);
        sb_params_str(m, want, sizeof want);
        if (strcmp(have, want) != 0) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: strategy is for sizes %s, the model has %s",
                    path, lineno, have, want);
            return -1;
        }
    }
    if (strcmp(key, "p") == 0) {
        int pok = n == 2;
        int fp = (int)whole(n >= 2 ? a : "", 1, 1 << 20, &pok);
        if (!pok) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'p DEVICES'", path, lineno);
            return -1;
        }
        if (fp != p) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: strategy is for p=%d, running with p=%d", path,
                    lineno, fp, p);
            return -1;
        }
    }
    if (strcmp(key, "algo") == 0 && n >= 2)
        snprintf(sf->algo, sizeof sf->algo, "%.63s", a);
    if (strcmp(key, "cost") == 0) {
        const char *cend = "";
        if (n != 2 || sb_parse_number(a, &sf->cost, &cend) || *cend) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'cost NUMBER'", path, lineno);
            return -1;
        }
    }
    return 0;
}

/* An `op NAME KIND CONFIG` line: the config of op *nop into sf, checked
 * against the model's op of that index: 0, or -1 with err naming
 * path:line. */
static int read_op_line(const char *path, int lineno, const char *a, const char *c, int n,
                        const sb_model *m, int *nop, sb_strategy *sf, sb_error *err)
{
    if (n < 4) {
        sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 'op NAME KIND CONFIG'", path, lineno);
        return -1;
    }
    if ((*nop) >= m->nops || strcmp(m->ops[*nop].name, a) != 0) {
        sb_fail(err, SB_EXIT_INPUT, "%s:%d: op '%s' does not match the model (expected '%s')",
                path, lineno, a, (*nop) < m->nops ? m->ops[*nop].name : "no more ops");
        return -1;
    }
    const sb_op *op = &m->ops[*nop];
    int *cfg = sf->cfg + (size_t)(*nop) * SB_MAX_DIMS, nd = 0;
    const char *s = c;
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
        return -1;
    }
    sf->op_line[(*nop)++] = lineno;
    return 0;
}

/* After the last line: every op read, the pipeline whole, each op's
 * config within its dims and its stage's devices: 0, or -1 with err. */
static int check_loaded(const char *path, const sb_model *m, int p, int nop, int nstage_lines,
                        sb_strategy *sf, sb_error *err)
{
    if (nop != m->nops) {
        sb_fail(err, SB_EXIT_INPUT, "%s: has %d ops, the model has %d", path, nop, m->nops);
        return -1;
    }
    if (!sf->pipe.nstages) {
        sb_pipeline_none(&sf->pipe, m->nops, p);
    } else {
        if (nstage_lines != sf->pipe.nstages) {
            sb_fail(err, SB_EXIT_INPUT, "%s: pipeline of %d stages has %d stage lines", path,
                    sf->pipe.nstages, nstage_lines);
            return -1;
        }
        sb_error e2;
        if (sb_pipeline_check(&sf->pipe, m, p, &e2)) {
            sb_fail(err, SB_EXIT_INPUT, "%s: %s", path, e2.msg);
            return -1;
        }
    }
    /* each op's config fits its stage's devices */
    for (int i = 0; i < m->nops; i++) {
        int s = sb_pipeline_stage_of(&sf->pipe, i), prod = 1;
        const int *cf = sf->cfg + (size_t)i * SB_MAX_DIMS;
        for (int d = 0; d < m->ops[i].ndims; d++) {
            if (cf[d] > m->ops[i].dims[d].size) {
                sb_fail(err, SB_EXIT_INPUT, "%s:%d: op '%s': splits dim %s (size %lld) %d ways",
                        path, sf->op_line[i], m->ops[i].name, m->ops[i].dims[d].name,
                        (long long)m->ops[i].dims[d].size, cf[d]);
                return -1;
            }
            prod *= cf[d];
            if (prod > sf->pipe.devices[s]) {
                sb_fail(err, SB_EXIT_INPUT, "%s:%d: op '%s': config needs more than the %d "
                        "devices of its stage %d", path, sf->op_line[i], m->ops[i].name, sf->pipe.devices[s], s);
                return -1;
            }
        }
    }
    return 0;
}

int sb_strategy_load(const char *path, const sb_model *m, int p, sb_strategy *sf,
                          sb_error *err)
{
    if (sb_strategy_init(sf, m, p))
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    sf->pipe.nstages = 0; /* set by a pipeline line, or to none at the end */
    char *text;
    size_t len;
    if (sb_read_file(path, "strategy file", SB_STRATEGY_MAX_BYTES, &text, &len, err)) {
        sb_strategy_free(sf);
        return -1;
    }
    char *line, *next = text;
    int lineno = 0, version = 0, nop = 0, rc = -1, nstage_lines = 0, first[NLINE_KEYS] = {0};
    int *rc_line = sb_calloc((size_t)(m->nops ? m->nops : 1), sizeof *rc_line, err);
    if (!rc_line)
        goto out;
    while (next < text + len) { /* each line in place, its '\n' made a NUL */
        line = next;
        char *eol = memchr(line, '\n', (size_t)(text + len - line));
        if (eol) {
            *eol = '\0';
            next = eol + 1;
        } else {
            next = text + len;
        }
        lineno++;
        if (strlen(line) != (size_t)(next - line) - (eol != NULL)) {
            sb_fail(err, SB_EXIT_INPUT, "%s:%d: a NUL byte in the line", path, lineno);
            goto out;
        }
        char *hash = comment_start(line);
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
            int vok = 1;
            version = (int)whole(a, 1, 2, &vok);
            if (!vok || n > 2) {
                char shown[256];
                sb_escape_controls(a, shown, sizeof shown, 0);
                sb_fail(err, SB_EXIT_INPUT, "%s:%d: strategy format version '%s' not supported "
                        "(this build reads 1 and 2)", path, lineno, n > 2 ? line : shown);
                goto out;
            }
            continue;
        }
        if (check_key(path, lineno, key, version, first, err))
            goto out;
        if (read_head_key(path, lineno, line, key, a, n, m, p, sf, err))
            goto out;
        if (version >= 2) {
            int x = read_extra(path, lineno, line, m, sf, &nstage_lines, rc_line, err);
            if (x < 0)
                goto out;
            if (x)
                continue;
        }
        if (strcmp(key, "op") != 0)
            continue;
        if (read_op_line(path, lineno, a, c, n, m, &nop, sf, err))
            goto out;
    }
    if (!version) {
        sb_fail(err, SB_EXIT_INPUT, "%s: empty or not a strategy file", path);
        goto out;
    }
    if (check_loaded(path, m, p, nop, nstage_lines, sf, err))
        goto out;
    rc = 0;
out:
    free(text);
    free(rc_line);
    if (rc)
        sb_strategy_free(sf);
    return rc;
}

int sb_strategy_choice(const char *path, const sb_strategy *sf, const sb_problem *pb,
                            int *choice, sb_error *err)
{
    const sb_model *m = pb->m;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        const int *cf = sf->cfg + (size_t)i * SB_MAX_DIMS;
        int found = -1;
        for (int k = 0; k < pb->cfg[i].n && found < 0; k++)
            if (!memcmp(pb->cfg[i].c + (size_t)k * (size_t)op->ndims, cf,
                        (size_t)op->ndims * sizeof(int)))
                found = k;
        if (found < 0) {
            char cs[256];
            sb_config_str(cf, op->ndims, cs, sizeof cs);
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: op '%s': config %s is not a valid config "
                           "at p=%d", path, sf->op_line[i], op->name, cs, pb->p);
        }
        choice[i] = found;
    }
    return 0;
}

int sb_strategy_load_choice(const char *path, const sb_problem *pb, int *choice, sb_error *err)
{
    const sb_model *m = pb->m;
    sb_strategy sf;
    if (sb_strategy_load(path, m, pb->p, &sf, err))
        return -1;
    int rc = 0;
    if (sb_strategy_has_extras(m, &sf))
        rc = sb_fail(err, SB_EXIT_INPUT, "%s: holds a pipeline, ZeRO stage, recomputation or "
                     "cyclic rank order, "
                     "which this command does not take (shardbench run does)", path);
    if (!rc)
        rc = sb_strategy_choice(path, &sf, pb, choice, err);
    sb_strategy_free(&sf);
    return rc;
}
