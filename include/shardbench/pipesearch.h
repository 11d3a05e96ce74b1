/* shardbench/pipesearch.h: the pipeline layer of the search (`search
 * --space full`): stage count S, micro-batch count M, schedule and stage
 * boundaries, each stage's ops given their least-cost intra-op configs by
 * the exact DP (sb_search, or sb_search_within under a memory limit) on
 * P/S devices at the micro-batch size. Cost and memory of a pipeline step:
 * search/README.md, "Pipeline search", and docs/cost-model.md. */
#ifndef SHARDBENCH_PIPESEARCH_H
#define SHARDBENCH_PIPESEARCH_H

#include "shardbench/memory.h"
#include "shardbench/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int stages;            /* forced S, or 0: searched over the divisors of p */
    int microbatches;      /* forced M, or 0: searched over the divisors of the batch (>= S) */
    int schedule;          /* forced sb_schedule, or -1: both */
    int max_stage_devices; /* searched S only: p / S at most this (0: no bound); no S within it:
                              the largest S possible alone (r->stage_cap_fallback) */
    double mem_limit;      /* bytes per device, or 0: none */
    int no_shortcuts;      /* 1: none of the exact shortcuts of the lazy partition search (segment
                              bounds, exact least memory, optima reused from fewer copies,
                              partitions over bounds): every range the plain bounds allow solved
                              (tests hold the search to it) */
    int no_skips;          /* 1: none of the memory skips (a range's kept DP not run when its
                              exact least memory kept is over the limit; its bound raised to the
                              recomputed unconstrained optimum then): tests compare */
    int no_incumbent_bound; /* 1: the first partition of each (S, M, schedule) solved even when
                              a step is known and its bound (its stages' unconstrained optima)
                              shows it cannot beat it: tests compare */
    int no_middle_first;   /* 1: the stage counts S tried from the largest down, not from the
                              middle one out (search/pipeline.c, s_order); the same result:
                              tests compare */
    int no_m_order;        /* 1: each S's micro-batch counts M tried from the largest down,
                              not by their first bound ascending (search/pipeline.c,
                              m_order); the same result: tests compare */
    int no_zero_bound;     /* 1: a ZeRO-3 combination's segments solved before its bounds are
                              taken, not first bounded by their ZeRO-2 optima (search/
                              pipe_combo.c, zero_bounded); the same result: tests compare */
    int dual_bound;        /* 1: a picked range under the limit with no Lagrangian search of
                              its structure at other copies to start from first gets a
                              one-DP dual bound at a multiplier borrowed from a Lagrangian
                              stage like it, and is solved only if the best partition still
                              picks it (off by default: search/README.md) */
    int no_shared_memo;    /* 1: each stage DP its own DP memo, none shared between them
                              (sb_search_opts.memo): tests compare */
    int no_stage_ub;       /* 1: an exact stage DP under the limit not given the cost of the
                              same stage's optimum at other copies that fits here as an upper
                              bound (sb_search_within_ub): tests compare */
    int no_lagrange_seeds; /* 1: every Lagrangian stage walk started cold (the unconstrained
                              optimum and the least resident strategy), not from strategies
                              of the same stage met before: tests compare */
    int no_price_memo;     /* 1: every stage problem prices each of its ops, none copied from
                              an equal op priced in the same context in an earlier stage
                              problem (search/pipe_stage.c, stage_problem): tests compare */
    int price_check;       /* 1: each op priced anyway and the search failed (SB_EXIT_INTERNAL)
                              when an op the memo holds is priced otherwise: tests set it */
    int lagrange_above;    /* a stage under the limit with more configs over its ops than this
                              is solved by Lagrangian relaxation (0: 512); tests set 1 to hold
                              the reported gaps to brute force on small models */
    int choose_zero;       /* 1: the ZeRO stage (0..3) searched, cp->zero ignored: under a
                              limit 2 and 3 (0 and 1 cost what 2 costs and need no less
                              memory), the strategy then reported at the least stage it
                              fits; without a limit 0 (3 only adds cost) */
    int choose_recompute;  /* 1: each stage recomputes none or all of its recomputable ops,
                              searched per stage (cp->recompute ignored; also what
                              cp->recompute auto means here); without a limit none */
    int progress;          /* 1: the (ZeRO, S, M, schedule) being solved and the best step so
                              far, one line rewritten on stderr (the CLI: when it is a terminal) */
    int threads;           /* each stage DP's threads at most (dp.threads), or 0: dp.threads as
                              set (the DP's choice by default); the same result */
    sb_optimizer opt;
    sb_search_opts dp;     /* the intra-op DP of each stage */
} sb_pipe_opts;

void sb_pipe_opts_default(sb_pipe_opts *o);

typedef struct sb_pipe_result {
    sb_pipeline pipe;
    int *cfg;                         /* nops * SB_MAX_DIMS: op i's config (its stage's devices) */
    double *op_cost;                  /* nops: op i's vertex cost per micro-batch (weight-gradient
                                         all-reduce spread over the M micro-batches) */
    double step_cost;                 /* FLOP: sum_s t_s + (M - 1) max_s t_s */
    double stage_time[SB_MAX_STAGES]; /* t_s: per micro-batch, intra-op optimum + p2p */
    double stage_p2p[SB_MAX_STAGES];  /* of t_s, the send to stage s + 1 (forward + backward) */
    double stage_mem[SB_MAX_STAGES];  /* predicted peak bytes per device of stage s */
    int inflight[SB_MAX_STAGES];      /* micro-batches whose activations stage s holds */
    double peak_bytes;                /* max_s stage_mem */
    double seconds;
    int cuts;                         /* allowed cut positions (between ops) */
    int crossing;                     /* tensors crossing each allowed cut */
    long combos, combos_skipped;      /* (S, M, schedule) tried; of those, skipped by bounds */
    long subproblems, cache_hits;     /* stage DPs run; stage costs found in the cache */
    long ranges_bounded;              /* stage ranges left out by the cost or memory bound */
    long ranges_given_up;             /* stage DPs that failed (label budget) or were not run
                                         (tables over --max-table-mb): not used */
    long ranges_over_tables;          /* of those, stage DPs not run: their tables' bound
                                         (sb_search_estimate) over dp.max_table_mb */
    double table_bound_bytes;         /* the largest such bound (0: none) */
    long dual_bounds;                 /* one-DP Lagrangian dual bounds of picked ranges */
    long incumbents_skipped;          /* first partitions not solved: their bound cannot win */
    long m_reordered;                 /* (ZeRO stage, S) whose micro-batch counts m_order
                                         tried in another order than the largest first */
    long zero_bounded;                /* ZeRO-3 (S, M, schedule) skipped by their segments'
                                         ZeRO-2 optima, before any DP (zero_bounded) */
    long copies_reused;               /* stage optima under the limit taken from the same stage at
                                         fewer micro-batches in flight (fits there: optimal) */
    long lazy_rounds;                 /* partitions over bounds whose stages were then solved */
    long prices_reused;               /* ops of stage problems whose configs and costs were
                                         copied from an equal op priced before (no_price_memo;
                                         under price_check: priced again, found the same) */
    long stage_ubs;                   /* exact stage DPs under the limit given an upper bound
                                         (the optimum at other copies that fits) */
    long lagrange_stages;             /* stages solved under the limit by Lagrangian relaxation
                                         (too large for the exact Pareto search) */
    long lagrange_dps;                /* the DPs those took (search/lagrange.c) */
    long lagrange_seeded;             /* of those stages, the ones started from strategies of
                                         the same stage met before */
    double lagrange_gap;              /* how far below step_cost the least step can lie, relative:
                                         the largest gap to its dual bound of the stages taken
                                         that could lie in a partition beating it (0: none) */
    double lagrange_stage_gap;        /* the largest of the result's own stages' gaps to their
                                         optimum (0: each proven optimal) */
    double least_bytes;               /* when nothing fits: the least peak found (else 0) */
    int none_found;                   /* the search ran and found nothing (nothing fits, or
                                         every stage DP given up): the error says why */
    unsigned char *recompute;         /* nops: op i recomputed (its stage recomputes: every
                                         recomputable op of the stage), or NULL: none */
    unsigned char stage_recompute[SB_MAX_STAGES]; /* stage s recomputes its ops */
    int zero;                         /* the ZeRO stage of the strategy (forced or chosen) */
    int zero_searched;                /* ZeRO stages searched (1 when forced) */
    long rc_solved;                   /* choose_recompute: stage DPs with recomputation run */
    long rc_dominated;                /* choose_recompute: stages where recomputing was not
                                         solved, the kept optimum at most its least cost */
    int stage_cap_fallback;           /* S searched (not forced) and no S with p / S <= max_stage_
                                         devices: the largest S possible, searched alone (its
                                         stages over the cap); else 0 */
} sb_pipe_result;

/* The least-cost pipeline strategy of m on p devices (exact over the space
 * of search/README.md: S, M, schedule, cut points at the positions where
 * fewest tensors cross, per-stage intra-op configs; with o->choose_zero the
 * ZeRO stage, with o->choose_recompute or cp->recompute auto each stage's
 * recomputation, none or all). Nothing fits the memory limit: SB_EXIT_INPUT
 * naming the least memory found (also in r->least_bytes). cp->recompute
 * all (not chosen): every stage's ops recomputed (the stage DPs' costs and
 * memory with it). Free with sb_pipe_result_free. */
int sb_pipe_search(const sb_model *m, int p, const sb_cost_params *cp, const sb_pipe_opts *o,
                   sb_pipe_result *r, sb_error *err);
/* The same space by brute force (tests: every cut and every config of
 * every stage, with choose_zero every ZeRO stage 0..3, with
 * choose_recompute both choices of every stage, with and without a limit;
 * only for tiny models). */
int sb_pipe_brute(const sb_model *m, int p, const sb_cost_params *cp, const sb_pipe_opts *o,
                  sb_pipe_result *r, sb_error *err);
void sb_pipe_result_free(sb_pipe_result *r);

/* The allowed cut positions of m: positions k (a cut before op k, 0 < k <
 * nops) where the number of activation tensors produced before k and read
 * at or after k is least. Writes up to max of them to pos; returns their
 * count, and the crossing count in *crossing. */
int sb_pipe_cuts(const sb_model *m, int *pos, int max, int *crossing);

/* The micro-batch model: a copy of m with every op's dim named "batch"
 * (and every tensor dim following one) divided by M. -1 when M does not
 * divide one. Free with sb_model_free. */
int sb_model_microbatch(const sb_model *m, int M, sb_model *out, sb_error *err);

/* Ops [i, j) of mb as a model of their own, as the search prices a stage
 * (tensors from earlier stages become inputs marked stage_input). Free
 * out->ops and out->tensors (not sb_model_free). */
int sb_pipe_stage_model(const sb_model *mb, int i, int j, sb_model *out, sb_error *err);

/* The weight-gradient all-reduce of op under config c as the cost model
 * prices it: each trained tensor's shard over its replicas; with a GPU
 * machine (cp->gpu_sms) exactly what the op's cost holds of it
 * (sb_op_wgrad_cost: its groups, the gradient word, exposed only under
 * cp->dp_overlap). */
double sb_weight_grad_cost(const sb_model *m, const sb_op *op, const int *c,
                           const sb_cost_params *cp);

/* A point-to-point send of `words` words between two stages; inter: over
 * the inter-node link. */
double sb_pipe_p2p_cost(const sb_cost_params *cp, double words, int inter);

#ifdef __cplusplus
}
#endif
#endif
