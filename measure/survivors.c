/* survivors.c: the survivor list of one (model, P) (survivors.h): prune's
 * index read and checked, and the strategies the bench adds itself. Apart
 * from bench.c, which launches and records them. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/candidates.h"
#include "shardbench/paper.h"
#include "shardbench/query.h"
#include "shardbench/strategy.h"
#include "survivors.h"

static double tsv_num(const char *s, double def)
{
    char *end;
    if (!s || !*s)
        return def;
    double v = strtod(s, &end); /* a cost or size that is no finite number is unknown */
    return end != s && (*end == '\0' || *end == '\r') && isfinite(v) && v >= 0 ? v : def;
}

/* Reads DIR/index.tsv (header file, kind, predicted_cost, predicted_mem_bytes). */
int survivors_read_index(const char *dir, survivor **out, int *n, sb_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/index.tsv", dir);
    *out = NULL;
    *n = 0;
    char *text, *next, *line;
    size_t len;
    if (sb_read_file(path, "survivors index", (size_t)16 << 20, &text, &len, err))
        return -1;
    int lineno = 0, rc = 0, nalloc = 0, *line_of = NULL;
    survivor *v = NULL;
    for (next = text; next < text + len;) { /* each line in place */
        line = next;
        char *eol = memchr(line, '\n', (size_t)(text + len - line));
        next = eol ? eol + 1 : text + len;
        if (eol)
            *eol = '\0';
        lineno++;
        if (strlen(line) != (size_t)(next - line) - (eol != NULL)) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: a NUL byte in the line", path, lineno);
            break;
        }
        line[strcspn(line, "\r\n")] = '\0';
        if (lineno == 1) {
            if (strncmp(line, "file\tkind\tpredicted_cost", 24)) {
                rc = sb_fail(err, SB_EXIT_INPUT,
                             "%s:1: header is not 'file<TAB>kind<TAB>predicted_cost<TAB>"
                             "predicted_mem_bytes'", path);
                break;
            }
            continue;
        }
        if (!line[0] || line[0] == '#')
            continue;
        char *cols[4] = {0}, *save = NULL, *s = line;
        for (int i = 0; i < 4; i++) {
            cols[i] = strsep(&s, "\t");
            if (!cols[i])
                break;
        }
        (void)save;
        if (!cols[0] || !*cols[0] || !cols[1] || !*cols[1]) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: needs a file and a kind", path, lineno);
            break;
        }
        if (*n == nalloc) {
            nalloc = nalloc ? 2 * nalloc : 16;
            survivor *nv = sb_realloc(v, (size_t)nalloc * sizeof *v, err);
            int *nl = nv ? sb_realloc(line_of, (size_t)nalloc * sizeof *nl, err) : NULL;
            if (nv)
                v = nv;
            if (!nl) {
                rc = -1;
                break;
            }
            line_of = nl;
        }
        survivor *sv = &v[*n];
        memset(sv, 0, sizeof *sv);
        if (cols[0][0] == '/')
            snprintf(sv->file, sizeof sv->file, "%s", cols[0]);
        else
            snprintf(sv->file, sizeof sv->file, "%s/%s", dir, cols[0]);
        for (int i = 0; !rc && i < *n; i++) /* one line per (strategy file, kind) */
            if (!strcmp(v[i].file, sv->file) && !strcmp(v[i].kind, cols[1]))
                rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: file '%s' of kind '%s' given twice "
                             "(first on line %d)", path, lineno, cols[0], cols[1], line_of[i]);
        if (rc)
            break;
        line_of[(*n)++] = lineno;
        snprintf(sv->kind, sizeof sv->kind, "%s", cols[1]);
        sv->cost = tsv_num(cols[2], NAN);
        sv->mem = tsv_num(cols[3], 0);
    }
    free(text);
    free(line_of);
    if (!rc && *n == 0)
        rc = sb_fail(err, SB_EXIT_INPUT, "%s: no survivors listed", path);
    if (rc) {
        free(v);
        *n = 0;
        return -1;
    }
    *out = v;
    return 0;
}

/* Writes choice as DIR/bench-KIND-pP.strategy and appends it to the list. */
int survivors_add(const sb_problem *pb, const char *dir, const char *kind, const int *choice,
                  survivor **sv, int *n, sb_error *err)
{
    survivor *nv = sb_realloc(*sv, (size_t)(*n + 1) * sizeof **sv, err);
    if (!nv)
        return -1;
    *sv = nv;
    survivor *d = &nv[*n];
    memset(d, 0, sizeof *d);
    if (snprintf(d->file, sizeof d->file, "%s/bench-%s-p%d.strategy", dir, kind, pb->p) >=
        (int)sizeof d->file)
        return sb_fail(err, SB_EXIT_INPUT, "%s: path too long", dir);
    snprintf(d->kind, sizeof d->kind, "%s", kind);
    sb_result r = {.choice = (int *)choice, .total_cost = sb_strategy_cost(pb, choice)};
    d->cost = r.total_cost;
    if (sb_result_save(d->file, pb, &r, kind, err))
        return -1;
    (*n)++;
    return 0;
}

/* The data-parallel strategy, unless prune gave it already. */
int survivors_add_data_parallel(const sb_problem *pb, const char *dir, survivor **sv, int *n,
                                sb_error *err)
{
    for (int i = 0; i < *n; i++)
        if (sb_kind_is_data_parallel((*sv)[i].kind))
            return 0;
    int *choice = sb_calloc((size_t)pb->m->nops, sizeof *choice, err);
    if (!choice)
        return -1;
    int rc = sb_strategy_data_parallel(pb, choice, err);
    if (!rc)
        rc = survivors_add(pb, dir, "dp", choice, sv, n, err);
    free(choice);
    return rc;
}

/* --random N: N strategies whose every op takes a config drawn uniformly
 * (xorshift seeded by the seed, the model's name and P: the same strategies
 * in every run of the same bench), kinds rand1..randN; none at P = 1. */
int survivors_add_random(const sb_problem *pb, const char *dir, int count, uint64_t seed,
                         survivor **sv, int *n, sb_error *err)
{
    if (pb->p < 2 || count < 1)
        return 0;
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + (uint64_t)pb->p * 7919u + 1;
    for (const char *c = pb->m->name; *c; c++)
        s = s * 131 + (unsigned char)*c;
    int *choice = sb_calloc((size_t)pb->m->nops, sizeof *choice, err);
    if (!choice)
        return -1;
    int rc = 0;
    for (int k = 0; k < count && !rc; k++) {
        for (int i = 0; i < pb->m->nops; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            choice[i] = (int)(s % (uint64_t)pb->cfg[i].n);
        }
        char kind[16];
        snprintf(kind, sizeof kind, "rand%d", k + 1);
        rc = survivors_add(pb, dir, kind, choice, sv, n, err);
    }
    free(choice);
    return rc;
}

/* The paper's Table II strategy (paper.h) for this model, sizes and P, when
 * the table has the model (bench --paper); a note when it does not. */
int survivors_add_paper(const sb_problem *pb, const char *dir, survivor **sv, int *n, sb_error *err)
{
    sb_paper_table t;
    if (sb_paper_table_load(NULL, &t, err))
        return -1;
    if (!sb_paper_has_model(&t, pb->m->name)) {
        printf("%s p=%d: the paper's Table II has no row for this model: no paper strategy\n",
               pb->m->name, pb->p);
        sb_paper_table_free(&t);
        return 0;
    }
    size_t nops = (size_t)pb->m->nops;
    int *choice = sb_calloc(nops, sizeof *choice, err), *row_of = sb_calloc(nops, sizeof(int), err);
    int *nearest = sb_calloc(nops, sizeof(int), err);
    int rc = choice && row_of && nearest ? 0 : -1;
    if (!rc)
        rc = sb_paper_strategy(pb, &t, choice, row_of, nearest, err);
    int near = 0;
    for (size_t i = 0; !rc && i < nops; i++)
        near += nearest[i];
    if (!rc && near)
        printf("%s p=%d: paper strategy: %d op%s take the nearest of our configs to the paper's "
               "(docs/paper-table2.md)\n", pb->m->name, pb->p, near, near == 1 ? "" : "s");
    if (!rc)
        rc = survivors_add(pb, dir, "paper", choice, sv, n, err);
    free(choice);
    free(row_of);
    free(nearest);
    sb_paper_table_free(&t);
    return rc;
}

