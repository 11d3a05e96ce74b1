/* shardbench/paper.h: the PaSE paper's Table II strategies (p = 32) on our
 * models: the table as shipped in strategies/paper-table2.tsv (the paper's
 * rows mapped onto our op and dim names, docs/paper-table2.md), and the
 * strategy it gives for a problem. */
#ifndef SHARDBENCH_PAPER_H
#define SHARDBENCH_PAPER_H

#include "shardbench/search.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char model[64], layers[64], dims[16], config[64]; /* the paper's row */
    int nletters, split[16];   /* the row's config, one count per letter */
    char ops[1024];            /* our ops: shell patterns, blank-separated */
    char map[16][128];         /* per letter: our dim names, '|'-separated */
    int line;                  /* in the file */
} sb_paper_row;

typedef struct {
    char path[1024];
    int n;
    sb_paper_row *rows;
} sb_paper_table;

/* Reads the table: path, or NULL for the shipped one (found as the models
 * are: $SHARDBENCH_STRATEGIES, the source tree, the install). Errors name
 * the file and line. */
int sb_paper_table_load(const char *path, sb_paper_table *t, sb_error *err);
void sb_paper_table_free(sb_paper_table *t);

/* Does the table have rows for model `name`? */
int sb_paper_has_model(const sb_paper_table *t, const char *name);

/* The paper's strategy on pb: row_of[i] is the row covering op i (-1: none,
 * its config chosen by the exact DP given the covered ones); nearest[i] is
 * 1 when the paper's config is not one of op i's configs at pb->p (the
 * nearest one is taken, sb_config_nearest); choice[i] the config index.
 * Every row must cover at least one op. */
int sb_paper_strategy(const sb_problem *pb, const sb_paper_table *t, int *choice, int *row_of,
                      int *nearest, sb_error *err);

/* Config c of op (ndims counts) in the letters of row r: "16,1,2,1,1"
 * (a letter whose dim the op lacks: 1). */
void sb_paper_letters(const sb_op *op, const int *c, const sb_paper_row *row, char *buf,
                      size_t n);

#ifdef __cplusplus
}
#endif
#endif
