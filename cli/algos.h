/* algos.h: one entry point for every search algorithm of `shardbench
 * search`, `candidates` and `prune` (pase, bf, dp, expert, mcmc,
 * candidates), each returning an sb_result so they print and record alike.
 * CLI glue only; the algorithms are in search/. */
#ifndef SB_CLI_ALGOS_H
#define SB_CLI_ALGOS_H

#include "shardbench/candidates.h"
#include "shardbench/memory.h"

typedef struct {
    sb_search_opts dp;      /* pase, bf */
    sb_mcmc_opts mcmc;      /* mcmc */
    sb_optimizer opt;       /* memory model */
    long max_rule_sets;     /* candidates */
    double mem_limit;       /* candidates: bytes per device; the best that fits wins */
    char *note;             /* out: lines to print after the table (malloc'd, may be NULL) */
} algo_opts;

void algo_opts_default(algo_opts *ao);

/* 1 if name is pase, bf, dp, expert, mcmc or candidates. */
int algo_known(const char *name);

/* Runs one algorithm; r->choice and r->total_cost are set (the cost re-summed
 * with sb_strategy_cost), r->seconds is its time. */
int run_algo(const sb_problem *pb, const char *algo, algo_opts *ao, sb_result *r, sb_error *err);

/* Option parsing shared by search, candidates, prune and export
 * (cmd_search.c); each fails with SB_EXIT_INPUT naming the option and value. */
int parse_pos_double(const char *s, const char *what, double *out, sb_error *err);
int parse_int_opt(const char *s, const char *what, int lo, int hi, int *out, sb_error *err);
int parse_long_opt(const char *s, const char *what, long *out, sb_error *err);
int parse_seed(const char *s, uint64_t *out, sb_error *err);

/* --calibration FILE after the options: the calibrated cost model replaces
 * the reference one (sb_calibration_load); with --flops or --bw as well it
 * is an error (path NULL: nothing to do). */
int cli_apply_calibration(const char *path, int flops_or_bw_given, sb_cost_params *cp,
                          sb_error *err);

#endif
