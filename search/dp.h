/* dp.h: what the two exact searches share (dp.c: least cost; dp_mem.c:
 * least cost within a memory limit). Internal to search/. */
#ifndef SB_SEARCH_DP_H
#define SB_SEARCH_DP_H

#include "shardbench/search.h"

/* Adds the communication cost of edge e between its two ops into the pair
 * table t: t[a * n_hi + b] with a the config of the op with the lower index
 * (rows) and b of the other. */
int sb_edge_table_add(const sb_problem *pb, const sb_edge *e, double *t, sb_error *err);

#endif
