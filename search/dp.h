/* dp.h: what the two exact searches share (dp.c: least cost; dp_mem.c:
 * least cost within a memory limit). Internal to search/. */
#ifndef SB_SEARCH_DP_H
#define SB_SEARCH_DP_H

#include "shardbench/search.h"

/* Adds the communication cost of edge e between its two ops into the pair
 * table t: t[a * n_hi + b] with a the config of the op with the lower index
 * (rows) and b of the other. */
int sb_edge_table_add(const sb_problem *pb, const sb_edge *e, double *t, sb_error *err);

/* Distinct layouts of operand o (tensor of tnd dims) over op's configs:
 * ids[config] = layout index; *layouts (malloc'd, nlayouts x tnd) the
 * layouts in first-seen order. */
int sb_layout_ids(const sb_problem *pb, int op, const sb_operand *o, int tnd, int *ids,
                  int **layouts, int *nlayouts, sb_error *err);

/* dp_prune.c: red gets pb's graph with only the configs of each op that no
 * other config dominates (exact: the optimum stays); keep[v] (n slots of
 * pb->cfg[v].n, malloc'd) the original indices of red->cfg[v]'s configs, in
 * increasing order. Free with sb_prune_free (also after a failure). */
/* problem.c: sb_problem_build with each op's cost less wg_scale times its
 * weight-gradient reduction (GPU op model; wg_scale 0: sb_problem_build) */
int sb_problem_build_wg(const sb_model *m, int p, const sb_cost_params *cp, double wg_scale,
                        sb_problem *out, sb_error *err);
/* sb_problem_build_wg with a memo of each op's configs and costs (NULL:
 * none): get fills op i's cfg (malloc'd rows and costs, what an earlier
 * build priced) and returns 1, or returns 0 (-1: error); an op it does not
 * have is enumerated and priced as sb_problem_build_wg does, then given to
 * priced, which may adjust its costs and keep them (the pipeline search:
 * search/pipe_stage.c, stage_problem). */
typedef struct {
    int (*get)(void *ctx, int i, sb_configs *cf, sb_error *err);
    int (*priced)(void *ctx, int i, sb_configs *cf, const sb_cost_params *cp, sb_error *err);
    void *ctx;
} sb_price_memo;
int sb_problem_build_memo(const sb_model *m, int p, const sb_cost_params *cp, double wg_scale,
                          const sb_price_memo *memo, sb_problem *out, sb_error *err);
/* dp.c: the edges' layouts of one problem kept from one sb_search of it
 * to the next (the Lagrangian walk: DPs of one problem whose configs stay,
 * only their costs change; lagrange.c). Zeroed to start, pb set; freed by
 * dp_layout_cache_free. */
typedef struct dp_layout_cache {
    const sb_problem *pb;
    struct edge_layouts_s *elc;
    unsigned char *have;
} dp_layout_cache;
void dp_layout_cache_free(dp_layout_cache *lc);
/* sb_search reading and keeping the layouts of pb's edges in lc (NULL:
 * sb_search): the same result. */
int sb_search_lc(const sb_problem *pb, const sb_search_opts *opts, dp_layout_cache *lc,
                 sb_result *out, sb_error *err);
int sb_prune_dominated(const sb_problem *pb, sb_problem *red, int **keep, sb_error *err);
void sb_prune_free(sb_problem *red, int **keep);

/* dp.c: the vector scan of one entry: the lowest x of the least
 * prev[x] + fts[0][x] + ... + fts[nq - 1][x] (added in that order), its sum
 * into *bv; the kernel for this CPU, or the one SB_DP_ISA (avx2, generic)
 * names (tests hold it to the plain scan). */
int sb_dp_vec_scan(const double *prev, const double *const *fts, int nq, int nv, double *bv);
/* The same entry by the column-class scan (configs with equal values in
 * every fts row form one class; entwise: through the entry-wise kernel);
 * -1 when out of memory. */
int sb_dp_class_scan(const double *prev, const double *const *fts, int nq, int nv, int entwise,
                     double *bv);
/* dp.c: the order the DP's sort of a config list by cost gives (the
 * threshold and bounded scans' sort_keyed): order[i] the index in k of the
 * i-th; it must be the stable sort by <. -1 when out of memory. */
int sb_dp_sort_order(const double *k, int n, int *order);

#endif
