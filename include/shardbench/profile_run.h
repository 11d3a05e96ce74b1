/* shardbench/profile_run.h: the launch of `mpirun -np P shardbench profile`
 * in the measurement stage: strategies trained on the P ranks through the
 * backend table and timed (measure/profile_run.c), and the fits that turn
 * what they measured into the predictive model's figures, an sb_profile
 * (measure/profile_fit.c). The model those figures feed, their keys and
 * their use in a search: shardbench/profile.h; their storage: query.h. */
#ifndef SHARDBENCH_PROFILE_RUN_H
#define SHARDBENCH_PROFILE_RUN_H

#include <stdint.h>

#include <mpi.h>

#include "shardbench/profile.h"
#include "shardbench/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One strategy the launch trained (rank 0). */
typedef struct {
    double step_s;  /* its step's median over the timed steps (the slowest rank's) */
    double ops_s;   /* its ops' compute and own collectives, summed */
    double feat[SB_PROF_EDGE_FEATURES]; /* its edges' relayout features, summed */
    double relay_s; /* its relayouts as measured (the ops' figures summed) */
    /* written by sb_profile_fit: its relayouts as fitted (scaled, less the
     * per-edge constant), and what is left of its step beyond the model */
    double relay_fit_s, rest_s;
} sb_prof_strategy;

/* An op key's measurements summed over the strategies that share it. */
typedef struct {
    sb_prof_op e;   /* key, reference costs, samples; its seconds unset */
    double sum_compute, sum_coll;
} sb_prof_sum;

/* What a launch measured, gathered on rank 0: the fits' input. */
typedef struct {
    int K, nops;            /* strategies; the model's ops */
    int *choices;           /* K x nops: [k * nops + i] op i's config index */
    sb_prof_strategy *strat; /* K */
    sb_prof_sum *sums;      /* one per op key, in the order first measured */
    int nsums, cap;
    /* one row per (strategy, op): the relayout features booked to the op
     * (half of each edge's to its consumer, half to its producer),
     * SB_PROF_EDGE_FEATURES each, and the op's measured relayout seconds */
    double *rx, *ry;
    int nrows;
    double *probes;         /* every timed step's probe, the slowest rank's */
    int nprobes;
} sb_prof_samples;

/* How to measure. */
typedef struct {
    const char *machine;    /* the name the figures are stored under */
    int steps, warmup;      /* timed steps per strategy (1..1000), untimed first */
    int max_strategies;     /* at most this many seeded strategies; 0: no cap */
    uint64_t seed;          /* the configs' order */
    const char *const *strategy; /* strategy files profiled after the seeded ones */
    int nstrategy;
    int no_coll;            /* 1: no collectives' figures */
    int progress;           /* 1: rank 0 keeps a progress line on stderr */
    double (*probe)(void);  /* the fixed work timed beside each step, this rank's
                               seconds (`run` times the same: cli/probe.c) */
    MPI_Comm core;          /* the ranks bound to this rank's one CPU, or
                               MPI_COMM_NULL (cli/threads.h, cli_core_comm) */
    int per_core;           /* the most ranks a CPU holds: over 1, each op is
                               priced at its ranks' CPU seconds on its busiest
                               one (sb_prof_core_s) */
} sb_profile_run_opts;

/* What the launch did besides its figures. */
typedef struct {
    int K, kseeded;         /* strategies: kseeded seeded ones, then the files */
    int have_dp;            /* 1: strategy 0 is data parallel */
    int shared;             /* 1: ops priced at their busiest CPU's seconds */
    sb_prof_samples s;      /* rank 0's; free with sb_prof_samples_free */
} sb_profile_launch;

/* Collective over comm: the same verdict on every rank. rc is this rank's
 * status: 0 when every rank's is, else -1 on every rank with *err the
 * first failing rank's (its code at least SB_EXIT_INTERNAL). */
int sb_profile_agree(MPI_Comm comm, int rc, sb_error *err);

/* Collective over comm (P = its size): trains every strategy of pb's model
 * on the P ranks through be, op configs chosen so that together they give
 * every op each of its configs at P (data parallel first at P > 1, then
 * strategy k gives op i config perm_i[k mod n_i], perm_i a seeded shuffle;
 * K = the most configs of an op (+1 with data parallel), at least 4 at
 * P > 1, at most 64 and o->max_strategies; then o->strategy's files), each
 * for o->warmup + o->steps steps timed as `run` times them; then the
 * backend's SGD update and the collectives (unless o->no_coll). On rank 0,
 * *pf holds the fits (sb_profile_fit) and the measured update and
 * collectives, and launch->s what the fits came from. Returns 0, or -1 on
 * every rank with err the first failing rank's (a strategy file that does
 * not fit the model, a plan the executor refuses, out of memory). A step
 * that fails on one rank ends the job (MPI_Abort): the others wait in its
 * collectives. Free pf (sb_profile_free) and launch->s either way. */
int sb_profile_measure(MPI_Comm comm, const sb_problem *pb, const sb_backend *be,
                       const sb_profile_run_opts *o, sb_profile *pf, sb_profile_launch *launch,
                       sb_error *err);

/* The fits of what a launch measured (rank 0): each op key's seconds the
 * mean over its samples; the relayouts' seconds per edge, per edge that
 * moves data, per word moved and per word copied, a non-negative least
 * squares fit of the rows (sb_fit_nonneg), scaled to the steps
 * (sb_prof_relay_scale); the step's fixed part, the median over the
 * strategies of each step less its ops, SGD update and fitted relayouts;
 * the total of the steps, and the probes' median. pf->update_s_per_elem
 * must hold the measured update. Writes s->strat[k].relay_fit_s and
 * rest_s. Returns 0, or -1 (out of memory) with err set. */
int sb_profile_fit(sb_prof_samples *s, const sb_problem *pb, sb_profile *pf, sb_error *err);

void sb_prof_samples_free(sb_prof_samples *s);

#ifdef __cplusplus
}
#endif

#endif
