/* shardbench/profile.h: the predictive cost model (docs/cost-model.md,
 * "The predictive model"): per-op profiles measured by `shardbench
 * profile` through the backend table, at the local shard shapes of each op
 * config, and measured alpha-beta figures of the collectives and of the
 * relayouts between ops, kept in the results database and turned into a
 * problem's costs in seconds.
 *
 * A profile belongs to (backend, machine, ranks): the same op config costs
 * another time on 4 ranks sharing 2 cores than on 2. Costs stay in the
 * problem's unit, FLOP-equivalents at the problem's F (seconds times
 * tflops * 1e12), so that every caller's cost / (F * 1e12) is the
 * predicted step time. */
#ifndef SHARDBENCH_PROFILE_H
#define SHARDBENCH_PROFILE_H

#include "shardbench/search.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Figures are read back from the newest SB_PROFILE_KEEP launches of
 * `profile` that measured them: a launch is a random effect on this kind of
 * machine (the same strategy's step moves +-15% from one process to the
 * next), and a bench's measured step of a strategy is its fastest launch's
 * (report and plot's fidelity). So an op config's seconds and the fits come
 * from the fastest of those launches (the least total over its group's
 * median: launches of one model, sizes and seed ran the same strategies);
 * the collectives' figures are their median. */
#define SB_PROFILE_KEEP 3

/* The collectives measured (coll_profiles.kind). */
typedef enum {
    SB_PCOLL_ALLREDUCE = 0, SB_PCOLL_REDUCE_SCATTER, SB_PCOLL_ALLGATHER, SB_PCOLL_ALLTOALL,
    SB_PCOLL_P2P, SB_PCOLL_COUNT
} sb_pcoll_kind;
const char *sb_pcoll_name(int kind); /* "allreduce", ...; NULL out of range */

/* One op config measured: the op kind, its local shard shape (the
 * iteration dims' sizes over the config's splits), the config, and a hash
 * of everything else the op's kernels depend on (global dims, attributes,
 * operand maps, weights: sb_prof_sig); per step: the op's compute (its
 * forward and backward kernels) and its own collectives (partial sums,
 * statistics, weight gradients; not the relayouts between ops). */
typedef struct {
    char kind[24], shape[160], config[64], sig[20];
    double compute_s, coll_s;
    double ref_cost; /* the reference model's vertex cost of it, FLOP */
    double ref_compute; /* the same without its collectives (0: not stored) */
    int samples;     /* launches x ops that measured it */
} sb_prof_op;

/* alpha + beta * bytes, fitted over message sizes, for one collective
 * kind over the first `group` ranks. */
typedef struct {
    int kind, group;
    double alpha_s, beta_s_per_byte;
    int points;
} sb_prof_coll;

typedef struct sb_profile_s {
    char backend[16], machine[128], precision[8];
    int ranks;
    /* the fits' source: the newest SB_PROFILE_KEEP profiles of the same
     * model and sizes (fits_same_model 1), or the newest of the same model
     * at other sizes, else of any (0), and
     * how many launches it was the fastest of */
    char fits_model[700];
    int fits_launches, fits_same_model, fits_other_sizes; /* other sizes: same model */
    /* relayouts between ops: seconds per edge, per edge that moves data,
     * per word moved (the reference model's relayout words of the edge),
     * and per word of the local shards the edge copies on a rank (its
     * source's and its destination's boxes: an edge whose layouts agree
     * still copies its shard, and a replicated shard is P times a split
     * one) */
    double relay_edge_s, relay_msg_s, relay_word_s, relay_local_s;
    double relay_scale; /* written: the per-op fits' scale to the steps
                           (measure/profile_fit.c) */
    double fixed_s;          /* per step outside the ops: loss, update calls, ... (>= 0) */
    double update_s_per_elem; /* SGD update per weight element of the rank */
    int nops;
    sb_prof_op *ops;         /* sorted by (kind, shape, config, sig) */
    int ncoll;
    sb_prof_coll *coll;
    int64_t profile_id;      /* the launch the fits came from */
    uint64_t seed;           /* written: the strategies' seed of the launch */
    double total_s;          /* written: the sum of its strategies' median steps */
    /* the launch's probe (cli/probe.c: fixed GEMMs timed beside each step,
     * the slowest rank's, median over its timed steps); read: the fits'
     * launch's. NaN: not measured (a launch before schema 9) */
    double probe_s;
} sb_profile;

void sb_profile_free(sb_profile *pf);

/* The local shard shape "8x16x128" (each iteration dim's size over its
 * split), the config "1,2,1" and the signature hash of op under config c. */
void sb_prof_shape(const sb_op *op, const int *c, char *buf, size_t n);
void sb_prof_config(const sb_op *op, const int *c, char *buf, size_t n);
void sb_prof_sig(const sb_model *m, const sb_op *op, char *buf, size_t n);

/* The weight elements a rank of op's config c updates: the op's own
 * weights and the weights the file declares as its inputs, each over its
 * split. */
double sb_prof_weight_elems(const sb_model *m, const sb_op *op, const int *c);

/* The measured entry of op under config c, or NULL. */
const sb_prof_op *sb_profile_find(const sb_profile *pf, const sb_model *m, const sb_op *op,
                                  const int *c);

/* What sb_profile_apply did. */
typedef struct {
    int configs;    /* op configs priced */
    int measured;   /* of which measured (exact key) */
    int estimated;  /* of which estimated from the kind's other entries */
    int analytic;   /* of which left to the analytic model (kind never measured) */
} sb_profile_stats;

/* cp priced with the profile's collectives (SB_COLL_MEASURED: each
 * kind and group size it measured by alpha + beta * bytes; the rest by
 * cp's links). */
void sb_profile_coll_params(const sb_profile *pf, sb_cost_params *cp);

/* Replaces pb's vertex costs by the profile's seconds (compute + own
 * collectives + the SGD update of the op's weight shard; the step's fixed
 * part on the first op, so every strategy's total gains it once) and makes
 * pb's relayout pricing (sb_coll_relayout) the fitted one, all in
 * FLOP-equivalents at pb->cp.tflops. A config that was not measured is
 * estimated from the measured entries of the same kind: the nearest one in
 * reference cost, its kernels scaled by the reference costs' ratio without
 * collectives, its collectives priced by the profile's alpha-beta
 * (sb_profile_coll_params; st->estimated);
 * an op kind with no entry at all keeps the analytic cost (st->analytic).
 * pb->cp.profiled is set. */
int sb_profile_apply(sb_problem *pb, const sb_profile *pf, sb_profile_stats *st, sb_error *err);

/* The name profiles know a machine file by: its file name without the
 * folder and ".machine" ("machines/cpu-here.machine" -> "cpu-here"). */
void sb_machine_name(const char *path, char *buf, size_t n);

/* The predictive model for pb when pb's cost parameters come from a
 * machine file (pb->cp.machine) and the results database at db_path holds
 * a profile of that machine (its file name without .machine) at pb->p
 * ranks, any backend: applied (sb_profile_apply), returns 1. 0 when there
 * is none (pb unchanged), -1 on a database error. msg says which model
 * prices pb and from what, in one line. */
int sb_profile_use(sb_problem *pb, const char *db_path, char *msg, size_t n, sb_error *err);
/* The same over an open database handle (query.h). */
struct sb_dbq;
int sb_profile_use_q(sb_problem *pb, struct sb_dbq *q, char *msg, size_t n, sb_error *err);

/* Least-squares fit of y ~ x * beta over n rows of k features (k <= 4),
 * each coefficient kept >= 0 (a feature whose coefficient would be negative
 * is dropped and the rest refitted). Returns 0; beta[k]. */
int sb_fit_nonneg(const double *x, const double *y, int n, int k, double *beta);

/* The scale of the per-op relayout fit to whole steps. The per-op fit is
 * of the relayouts of the rank that waited least, op by op; a step pays
 * those on its critical path. Over K strategies, rest[k] (the step less
 * its ops and update) is fitted as c + g * relay[k] (relay[k]: its fitted
 * relayouts); returns g >= 1 (a step waits at least the least waiting
 * rank's relayouts: a fitted slope under 1 gives 1), or 1 when the
 * relayouts do not differ enough to tell (fewer than 3 strategies, or a
 * spread under 10% of the largest: every strategy at P = 1). */
double sb_prof_relay_scale(const double *rest, const double *relay, int K);

/* An op's own collectives' seconds in one profiled step (what the model
 * adds to its kernels), from the figures of the ranks that took part
 * (measure/profile_run.c; NaN: none took part): the largest of
 *  - coll: the collectives (comm less relayouts) of the rank that waited
 *    least;
 *  - in_op - kernels: the least time a rank spent in the op outside its
 *    relayouts (the rank that entered last) less the slowest kernels;
 *  - span - relay - kernels: the op's critical path, from the latest entry
 *    to the latest exit over its ranks, forward plus backward
 *    (sb_executor_op_phase_times), less the least relayouts in it and the
 *    slowest kernels. Where the op's ranks run one after another (an LSTM
 *    whose layers are split: one rank's layer waits for the other's), a
 *    rank's time in the op ends before the op does, and without this the
 *    wait would land in a neighbour's relayout, which is priced as data
 *    moved;
 * and 0 when all are undefined or negative. */
double sb_prof_own_s(double coll, double in_op, double kernels, double span, double relay);

/* An op's kernels' seconds in one profiled step where ranks share cores
 * (ranks bound one to a core, more ranks than cores): the larger of
 *  - wall: the slowest rank's seconds in them (what is used alone when no
 *    core is shared), and
 *  - core: the CPU seconds of the op's ranks on its busiest core (their
 *    kernels and the executor's work around them on the process CPU
 *    clock, sb_op_time.compute_cpu_s + other_cpu_s, summed over the ranks
 *    bound to one core, the most over the cores).
 * Two ranks of a 4-way op on one core either run side by side, each
 * rank's wall time twice its CPU time (wall says so), or one after the
 * other, each rank's wall time its CPU time alone while the core's is the
 * sum (core says so; the other rank's turn otherwise lands in the next
 * relayout, whose fit is per word moved). A non-finite core gives wall. */
double sb_prof_core_s(double wall, double core);

/* The relayout features of edge e of pb under a choice of configs: 1, [words > 0],
 * words (the reference model's relayout words, both directions), and the
 * words of the local shards it copies (sb_edge_local_words). */
#define SB_PROF_EDGE_FEATURES 4
void sb_prof_edge_features(const sb_problem *pb, int e, const int *choice, double *f);

#ifdef __cplusplus
}
#endif

#endif
