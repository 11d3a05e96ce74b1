/* paper.c: the PaSE paper's Table II strategies on our models
 * (shardbench/paper.h). The table maps each of the paper's rows onto our
 * ops (shell patterns) and dims (one name list per letter); ops no row
 * covers take the configs the exact DP picks with the covered ones fixed. */
#define _GNU_SOURCE
#include "shardbench/paper.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/candidates.h"

#ifndef SB_STRATEGIES_BUILD_DIR
#define SB_STRATEGIES_BUILD_DIR ""
#endif
#ifndef SB_STRATEGIES_INSTALL_DIR
#define SB_STRATEGIES_INSTALL_DIR ""
#endif

#define PAPER_MAX_BYTES ((size_t)1 << 20)

/* Splits s at tabs into at most n fields (in place): the count. */
static int tab_fields(char *s, char **f, int n)
{
    int k = 0;
    while (k < n) {
        f[k++] = s;
        char *t = strchr(s, '\t');
        if (!t)
            break;
        *t = '\0';
        s = t + 1;
    }
    return k;
}

/* One row from its six fields; errors name path:line. */
static int parse_row(const char *path, int line, char **f, sb_paper_row *r, sb_error *err)
{
    memset(r, 0, sizeof *r);
    r->line = line;
    const char *names[4] = {"model", "layers", "dims", "config"};
    char *dst[4] = {r->model, r->layers, r->dims, r->config};
    size_t cap[4] = {sizeof r->model, sizeof r->layers, sizeof r->dims, sizeof r->config};
    for (int k = 0; k < 4; k++) {
        if (!*f[k] || strlen(f[k]) >= cap[k])
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s '%s' is empty or too long", path, line,
                           names[k], f[k]);
        strcpy(dst[k], f[k]);
    }
    r->nletters = (int)strlen(r->dims);
    if (r->nletters > 16)
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: dims '%s': at most 16 letters", path, line,
                       r->dims);
    const char *s = r->config;
    for (int k = 0; k < r->nletters; k++) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20 || (k + 1 < r->nletters ? *end != ',' : *end))
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: config '%s' needs %d split counts >= 1 "
                           "(one per letter of '%s')", path, line, r->config, r->nletters, r->dims);
        r->split[k] = (int)v;
        s = end + 1;
    }
    if (!*f[4] || strlen(f[4]) >= sizeof r->ops)
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: ops '%s' is empty or too long", path, line, f[4]);
    strcpy(r->ops, f[4]);
    /* map: letter=dim|dim ... for every letter of dims */
    char *save = NULL, *w = strtok_r(f[5], " ", &save);
    for (; w; w = strtok_r(NULL, " ", &save)) {
        const char *at = strchr(r->dims, w[0]);
        if (!w[0] || w[1] != '=' || !at || !w[2] || strlen(w + 2) >= sizeof r->map[0])
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: map entry '%s': expected LETTER=DIM with a "
                           "letter of '%s'", path, line, w, r->dims);
        strcpy(r->map[at - r->dims], w + 2);
    }
    for (int k = 0; k < r->nletters; k++)
        if (!r->map[k][0])
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: map names no dim for letter '%c'", path,
                           line, r->dims[k]);
    return 0;
}

int sb_paper_table_load(const char *path, sb_paper_table *t, sb_error *err)
{
    memset(t, 0, sizeof *t);
    if (!path) {
        const char *dirs[3] = {getenv("SHARDBENCH_STRATEGIES"), SB_STRATEGIES_BUILD_DIR,
                               SB_STRATEGIES_INSTALL_DIR};
        if (!sb_find_shipped("paper-table2", "tsv", dirs, 3, t->path, sizeof t->path))
            return sb_fail(err, SB_EXIT_INPUT, "the shipped paper-table2.tsv was not found "
                           "(set SHARDBENCH_STRATEGIES to the strategies/ folder)");
    } else {
        snprintf(t->path, sizeof t->path, "%s", path);
    }
    char *text;
    size_t len;
    if (sb_read_file(t->path, "paper table", PAPER_MAX_BYTES, &text, &len, err))
        return -1;
    int lineno = 0, rc = 0, header = 0;
    if (strlen(text) != len) {
        for (const char *c = text; c < text + strlen(text); c++)
            lineno += *c == '\n';
        rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: a NUL byte in the line", t->path, lineno + 1);
        free(text);
        return rc;
    }
    for (char *line = text, *next; line && !rc; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        if (!*line || *line == '#')
            continue;
        if (!header) { /* the column names */
            header = 1;
            if (strcmp(line, "model\tlayers\tdims\tconfig\tops\tmap")) /* no other column */
                rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected the header line "
                             "'model<TAB>layers<TAB>dims<TAB>config<TAB>ops<TAB>map'", t->path,
                             lineno);
            continue;
        }
        char *f[6];
        if (tab_fields(line, f, 6) != 6) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: expected 6 tab-separated fields", t->path,
                         lineno);
            break;
        }
        sb_paper_row *rows = realloc(t->rows, (size_t)(t->n + 1) * sizeof *rows);
        if (!rows) {
            rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            break;
        }
        t->rows = rows;
        rc = parse_row(t->path, lineno, f, &t->rows[t->n], err);
        for (int i = 0; !rc && i < t->n; i++) /* one row per (model, layers) */
            if (!strcmp(t->rows[i].model, t->rows[t->n].model)
                && !strcmp(t->rows[i].layers, t->rows[t->n].layers))
                rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: model %s, layers %s given twice (first "
                             "on line %d)", t->path, lineno, t->rows[i].model, t->rows[i].layers,
                             t->rows[i].line);
        if (!rc)
            t->n++;
    }
    free(text);
    if (!rc && !t->n)
        rc = sb_fail(err, SB_EXIT_INPUT, "%s: no rows", t->path);
    if (rc)
        sb_paper_table_free(t);
    return rc;
}

void sb_paper_table_free(sb_paper_table *t)
{
    free(t->rows);
    t->rows = NULL;
    t->n = 0;
}

int sb_paper_has_model(const sb_paper_table *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->rows[i].model, name))
            return 1;
    return 0;
}

/* Does op name match one of the row's patterns? */
static int row_covers(const sb_paper_row *r, const char *name)
{
    char ops[sizeof r->ops], *save = NULL;
    strcpy(ops, r->ops);
    for (char *w = strtok_r(ops, " ", &save); w; w = strtok_r(NULL, " ", &save))
        if (!fnmatch(w, name, 0))
            return 1;
    return 0;
}

/* The dim of op each letter of r names (-1: none): the first name of the
 * letter's list the op has and no earlier letter took. */
static void letter_dims(const sb_op *op, const sb_paper_row *r, int *dim)
{
    int taken[SB_MAX_DIMS] = {0};
    for (int k = 0; k < r->nletters; k++) {
        dim[k] = -1;
        char list[128], *save = NULL;
        strcpy(list, r->map[k]);
        for (char *w = strtok_r(list, "|", &save); w && dim[k] < 0; w = strtok_r(NULL, "|", &save))
            for (int d = 0; d < op->ndims; d++)
                if (!taken[d] && !strcmp(op->dims[d].name, w)) {
                    dim[k] = d;
                    taken[d] = 1;
                    break;
                }
    }
}

void sb_paper_letters(const sb_op *op, const int *c, const sb_paper_row *row, char *buf, size_t n)
{
    int dim[16];
    letter_dims(op, row, dim);
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < row->nletters && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", k ? "," : "",
                                 dim[k] >= 0 ? c[dim[k]] : 1);
}

int sb_paper_strategy(const sb_problem *pb, const sb_paper_table *t, int *choice, int *row_of,
                      int *nearest, sb_error *err)
{
    const sb_model *m = pb->m;
    int rows = 0;
    for (int r = 0; r < t->n; r++) {
        if (strcmp(t->rows[r].model, m->name))
            continue;
        rows++;
        int any = 0;
        for (int i = 0; i < m->nops; i++)
            any |= row_covers(&t->rows[r], m->ops[i].name);
        if (!any)
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: ops '%s' match no op of model '%s'",
                           t->path, t->rows[r].line, t->rows[r].ops, m->name);
    }
    if (!rows)
        return sb_fail(err, SB_EXIT_INPUT, "%s: no rows for model '%s' (the paper's Table II has "
                       "alexnet, inception3, rnnlm and transformer)", t->path, m->name);
    /* the covered ops fixed to one config each, the others free */
    sb_problem fixed = *pb;
    fixed.cfg = calloc((size_t)m->nops, sizeof *fixed.cfg);
    if (!fixed.cfg)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int rc = 0;
    for (int i = 0; i < m->nops && !rc; i++) {
        const sb_op *op = &m->ops[i];
        fixed.cfg[i] = pb->cfg[i];
        row_of[i] = -1;
        nearest[i] = 0;
        for (int r = 0; r < t->n && row_of[i] < 0; r++)
            if (!strcmp(t->rows[r].model, m->name) && row_covers(&t->rows[r], op->name))
                row_of[i] = r;
        if (row_of[i] < 0)
            continue;
        const sb_paper_row *row = &t->rows[row_of[i]];
        int dim[16], want[SB_MAX_DIMS], exact = 0;
        letter_dims(op, row, dim);
        for (int d = 0; d < op->ndims; d++)
            want[d] = 1;
        for (int k = 0; k < row->nletters; k++)
            if (dim[k] >= 0)
                want[dim[k]] = row->split[k];
        int k = sb_config_nearest(pb, i, want, &exact);
        if (k < 0) {
            rc = sb_fail(err, SB_EXIT_INTERNAL, "op '%s' has no config", op->name);
            break;
        }
        nearest[i] = !exact;
        fixed.cfg[i].n = 1; /* the one config, in place of the list */
        fixed.cfg[i].c = pb->cfg[i].c + (size_t)k * (size_t)op->ndims;
        fixed.cfg[i].cost = pb->cfg[i].cost + k;
        choice[i] = k;
    }
    sb_result r = {0};
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 4096};
    if (!rc)
        rc = sb_search(&fixed, &so, &r, err);
    for (int i = 0; i < m->nops && !rc; i++)
        if (row_of[i] < 0)
            choice[i] = r.choice[i];
    if (!rc)
        sb_result_free(&r);
    free(fixed.cfg);
    return rc;
}
