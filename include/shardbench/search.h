/* shardbench/search.h: the exact dynamic-programming search over a model
 * graph. The cost model it prices with is shardbench/cost.h; strategy files
 * are shardbench/strategy.h.
 *
 * Costs are in FLOP, as in docs/cost-model.md. A `sb_problem`
 * holds every op's configs and per-config costs for one model and device
 * count; search functions pick one config per op (a strategy). */
#ifndef SHARDBENCH_SEARCH_H
#define SHARDBENCH_SEARCH_H

#include <stdio.h>

#include "shardbench/cost.h"
#include "shardbench/model.h"
#include "shardbench/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sb_problem {
    const sb_model *m;
    int p;
    sb_cost_params cp;
    sb_configs *cfg;    /* one per op */
    int nedges;
    sb_edge *edges;
} sb_problem;

int sb_problem_build(const sb_model *m, int p, const sb_cost_params *cp,
                     sb_problem *out, sb_error *err);
void sb_problem_free(sb_problem *pb);

/* Total cost F(G, phi) of a strategy (choice[i] = config index of op i). */
double sb_strategy_cost(const sb_problem *pb, const int *choice);

typedef enum { SB_ALGO_PASE = 0, SB_ALGO_BF = 1 } sb_algo;

typedef struct {
    sb_algo algo;
    double max_table_mb;  /* fail cleanly beyond this (default 4096) */
    int progress;         /* print progress to stderr (TTY only) */
    int prune;            /* 1: drop dominated configs first (dp_prune.c; the same
                             optimum; pays only where many configs are dominated) */
    int plain;            /* 1: none of the DP's shortcuts (equal-row classes,
                             equal columns, bounded scan, reuse of repeated
                             work, two threads) and GenerateSeq's own order
                             (not block-first): the reference computation
                             the tests hold them to */
    int scan;             /* the minimum of each entry (not plain): 0 the DP's
                             choice (the vector scan for at most 1024 configs
                             of the eliminated op, else the bounded and
                             threshold scans), 1 never the vector scan, 2
                             always; the same result (tests hold each to the
                             plain DP) */
    int threads;          /* the table fill's threads at most (not plain): 0 the CPUs
                             this process may use (sb_dp_default_threads), 1 one;
                             the same result for any count */
    int colclass;         /* the column-class scan (not plain: the vector scan over the
                             classes of the eliminated op's configs with equal
                             last-level columns, dp.c): 0 the DP's choice (large
                             tables, at most half as many classes as configs), 1
                             never, 2 wherever the vector scan runs and there are
                             fewer classes than configs (tests); the same result */
    int entwise;          /* the entry-wise scan (not plain: where every last-level
                             table is over the last var and the eliminated op,
                             the vector scan over eight entries at once, one a
                             lane, dp.c): 0 the DP's choice (large tables), 1
                             never, 2 wherever it applies (tests); the same result */
    struct sb_dp_memo *memo; /* not plain: the DP's remembered tables and eliminations
                             (content ids, search/dp_reuse.h) shared by every search given
                             it, so equal eliminations of different problems are computed
                             once (sb_dp_memo_new); NULL: each search its own. The
                             searches sharing one keep the DP's pool of large buffers
                             (per thread) between them; sb_dp_memo_free empties the
                             calling thread's: share a memo within one thread */
    int plain_pareto;     /* 1: the memory-limited search (sb_search_within) checks each
                             label against every label kept (the reference); 0 (not
                             plain): against the front of their (resident, scratch) by a
                             binary search; the same labels kept (tests compare) */
} sb_search_opts;

/* A DP memo shared between searches (sb_search_opts.memo): remembered
 * pair tables and eliminations up to cap_bytes, least recently used
 * dropped first. NULL when out of memory. */
/* The CPUs this process may use (its affinity mask), at least 1: the DP's
 * threads when sb_search_opts.threads is 0. */
int sb_dp_default_threads(void);

typedef struct sb_dp_memo sb_dp_memo;
sb_dp_memo *sb_dp_memo_new(double cap_bytes);
void sb_dp_memo_free(sb_dp_memo *m);

typedef struct sb_result {
    int *choice;          /* nops config indices */
    double total_cost;
    double seconds;
    int max_configs;      /* largest config count of any op */
    int max_dep_set;      /* largest dependent set met by the DP */
    int max_configs_kept; /* largest config count of any op after pruning */
    long configs_total, configs_kept; /* configs over all ops, before and after */
    double prune_seconds; /* of seconds, the time spent pruning (prune = 1) */
    /* the DP's shortcuts (dp.c): table entries copied from an equal row
     * instead of computed, configs of eliminated ops left out of the
     * minimum because an equal column with a lower own cost was there, and
     * last-level configs given to the bounded scan and, of those, to the
     * threshold scan (once per elimination), or to the vector scan;
     * entries_copied counts the entries of equal rows a table over every
     * config would hold, which the DP stores once (class maps, dp.c) */
    long long entries_copied, configs_merged, rows_bounded, rows_threshold, rows_vector;
    long long rows_colclass; /* of rows_vector, those the column-class scan took */
    long long rows_entwise;  /* of rows_vector, those the entry-wise scan took */
    long long eliminations_reused; /* tables copied from an earlier elimination
                                      with equal inputs (repeated layers) */
    int threads_used;     /* the most threads one elimination's scan ran on (1: none
                             large enough to share; sb_search_opts.threads caps it) */
    double peak_bytes_per_device; /* the memory model's peak (memory.h), when the caller
                                     sets it (0: not computed) */
    double mem_limit_bytes;       /* the limit it was searched within (0: none) */
    /* the peak's parts (weights, gradients, optimizer state, activations and
     * their gradients, the largest transient buffer), when the caller sets
     * peak_bytes_per_device; printed with a machine file */
    double mem_parts[5];
    double peak_table_bytes;
    int *order;           /* vertex order used (nops) */
    /* ops the search chose to recompute (--recompute auto: nops flags,
     * malloc'd, freed by sb_result_free), or NULL: as cp.recompute says
     * (sb_result_recomputed) */
    unsigned char *recompute;
} sb_result;

/* 1 when op i is recomputed in r: r->recompute's flag, else every
 * recomputable op under cp.recompute all. */
int sb_result_recomputed(const sb_problem *pb, const sb_result *r, int i);

int sb_search(const sb_problem *pb, const sb_search_opts *opts,
              sb_result *out, sb_error *err);
void sb_result_free(sb_result *r);

/* Exhaustive search (tests only: product of config counts must be small). */
int sb_search_brute(const sb_problem *pb, sb_result *out, sb_error *err);

/* PaSE's GenerateSeq ordering (greedy least dependent set) and the
 * breadth-first ordering, written into order[nops]. */
void sb_order_pase(const sb_problem *pb, int *order);
void sb_order_bf(const sb_problem *pb, int *order);

/* Repeated blocks (`repeat N` layers, ops named "NAME.I/..."): interior[v]
 * = 1 for ops of an instance whose outputs are read only inside it; returns
 * how many. sb_order_blocks: GenerateSeq over those ops first, then over
 * the rest, so that every instance's interior is eliminated before the
 * tables that carry the other layers' costs reach it (equal instances give
 * equal eliminations, computed once: search/README.md). */
int sb_block_interior(const sb_problem *pb, char *interior);
void sb_order_blocks(const sb_problem *pb, int *order);

/* "batch=128,classes=1024" and "32,1,1,1" forms. */
void sb_params_str(const sb_model *m, char *buf, size_t n);
void sb_config_str(const int *c, int nd, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
