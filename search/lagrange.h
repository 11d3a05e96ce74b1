/* lagrange.h: a stage's least cost within a memory limit by Lagrangian
 * relaxation of its resident bytes (lagrange.c). Internal to search/: the
 * pipeline layer uses it for stages too large for the exact Pareto search
 * (sb_search_within). */
#ifndef SB_SEARCH_LAGRANGE_H
#define SB_SEARCH_LAGRANGE_H

#include "shardbench/memory.h"
#include "shardbench/search.h"

typedef struct {
    double t;      /* least cost met that fits; INFINITY when none fits */
    double least;  /* least memory (resident + largest scratch) met */
    double gap;    /* (t - lb) / t, lb the best dual bound: 0 proven optimal */
    double lb;     /* the best dual bound: no strategy that fits costs less */
    double lam;    /* the multiplier of that bound, FLOP per byte; -1 none > 0 */
    int dps;       /* DPs run (sb_search calls) */
    /* The hull edge the walk ended on (lagrange.c): strategies a (fits) and
     * b (does not) are adjacent on the lower hull of (resident, cost), none
     * below the line through them; lam_edge its slope, -1 when the walk
     * did not end on an edge (the unconstrained optimum fits, nothing fits,
     * or the DP budget ran out). */
    double a_cost, a_res, b_cost, b_res, lam_edge;
} sb_lagrange_result;

/* The least-cost strategy of pb (every op's vertex costs as given) whose
 * memory, sb_problem_op_memory's resident bytes summed plus the largest
 * scratch, fits `limit`, over the minimisers of cost + lambda x resident
 * (lambda >= 0). choice (pb's ops) gets it when r->t is finite. pb's
 * vertex costs are changed while it runs and restored. */
int sb_lagrange_search(sb_problem *pb, const sb_search_opts *so, double limit, sb_optimizer opt,
                       int *choice, sb_lagrange_result *r, sb_error *err);

/* The same walk started from known strategies (seeds[q]: pb's ops' config
 * indices; e.g. the ends of the edge a search of the same stage at other
 * copies ended on, or a dual bound's minimiser), priced without a DP: the
 * cheapest seed that fits replaces the least resident DP as A, and the
 * seed that does not fit with the least resident bytes between A and the
 * unconstrained optimum as B. The walk ends on a proven hull edge either
 * way: where fitting is monotone in resident bytes along the hull there is
 * one edge with a fitting and a non-fitting end, and the result is the
 * unseeded one's (search/README.md). b_choice (NULL: not wanted) gets the
 * edge's non-fitting end when r->lam_edge >= 0. */
int sb_lagrange_search_seeded(sb_problem *pb, const sb_search_opts *so, double limit,
                              sb_optimizer opt, const int *const *seeds, int nseeds, int *choice,
                              int *b_choice, sb_lagrange_result *r, sb_error *err);

#endif
