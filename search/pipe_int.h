/* pipe_int.h: the pipeline search's own types and the calls between its
 * files (private to search/). pipeline.c runs the whole search;
 * pipe_combo.c one (S, M, schedule); pipe_stage.c a stage's optimum, its
 * memory and the bounds; pipe_models.c the micro-batch model, cut points,
 * stage sub-models and equal-stage hashing. Each calls only the files after
 * it in that list. Split from one file of 2,200 lines (issue 38). */
#ifndef SB_PIPE_INT_H
#define SB_PIPE_INT_H

#include <stdint.h>

#include "shardbench/memory.h"
#include "shardbench/pipesearch.h"

/* Bounds are sums in another order than the DP's: this factor keeps a
 * bound under the value it bounds despite rounding. */
#define BOUND_SLACK (1.0 - 1e-12)

/* The DP memo the stage DPs share: at most this many bytes (and a quarter
 * of --max-table-mb) of remembered tables and eliminations. */
#define SHARED_MEMO_BYTES 256e6

typedef struct {
    uint64_t key;
    int what;          /* ENTRY_STAGE: a stage's optimum; ENTRY_LEAST_MEM: t is its least memory */
    int i, j, d, M, k; /* the first stage with this structure: ops [i, j), k act copies (-1: no limit) */
    int rc, zero;      /* recomputes every recomputable op (0 or 1); the ZeRO stage */
    double t;          /* intra-op optimum per micro-batch; INFINITY: nothing fits or given up */
    double least;      /* nothing fits: the least memory of the stage */
    double gap;        /* Lagrangian relaxation: the relative gap of t to its dual bound (else 0) */
    double lb_taken;   /* taken by the search (pipe_stage): a lower bound on the stage's optimum in
                          the mode it chooses (INFINITY: not taken) */
    int *cfg;          /* (j - i) * SB_MAX_DIMS; ENTRY_DUAL: the bound's minimiser */
    double *cost;      /* (j - i) */
    int *cfg_b;        /* Lagrangian: the non-fitting end of the hull edge its walk ended on
                          ((j - i) * SB_MAX_DIMS), or NULL */
} stage_entry;

enum { ENTRY_STAGE = 0, ENTRY_LEAST_MEM = 1, ENTRY_DUAL = 2 };

typedef struct {
    double c;          /* least cost' over configs */
    double wg, a, s;   /* least (weights + grads + optimizer + act grads), activations, scratch */
} op_bound;

typedef struct {
    const sb_model *m;
    int p;
    sb_cost_params cp;
    const sb_pipe_opts *o;
    sb_search_opts dp;  /* o->dp, with the DP memo every stage DP shares (o->no_shared_memo:
                           none) */
    sb_error *err;
    uint64_t *hop;      /* nops: op_hash */
    int *rep;           /* nops: the first op equal to op i */
    int *last;          /* ntensors: last reader */
    int nseg;           /* segments between allowed cuts */
    int *seg;           /* nseg + 1 op positions */
    sb_model *mb;       /* per M (index: position in Ms) */
    int *Ms, nM;
    uint64_t *hseg;     /* (nseg + 1)^2: hash of segments [a, b), 0: not yet */
    stage_entry **tab;  /* open addressing; entries stay where they are */
    size_t cap, used;
    uint64_t serial;    /* brute: every stage its own key */
    sb_pipe_result *r;
    int brute;          /* sb_pipe_brute: every stage by enumeration */
    int rc_choose;      /* each stage chooses to recompute or not (under a limit, or brute) */
    int rc_fixed;       /* else: every stage recomputes (1) or none does (0) */
    double least_lb;    /* the least lower bound of a stage range's memory met (the bounds) */
    long canon;         /* the (S, M, schedule) being searched: its rank in the canonical order */
    long best_canon;    /* the rank of the one whose step is in X->r (LONG_MAX: none yet) */
    /* op_bounds' (d, M): per op equal to no earlier one (rep[v] == v), its
     * configs' memory terms cm[cm_off[v] .. cm_off[v + 1]) (3 doubles each:
     * weights + grads + optimizer + act grads, activations, scratch) */
    double *cm;
    int *cm_off;        /* nops + 1 */
    /* least_mem's work arrays */
    int *cnt;           /* nops: ops of the range equal to op u (u a rep) */
    double *cur;        /* nops */
    size_t cm_cap;
    int *cm_perm;       /* per rep u, its entries cm_off[u] .. cm_off[u + 1] by scratch
                           ascending, stably (op_bounds) */
    size_t perm_cap;
    struct mem_item *items;
    size_t items_cap;
    /* dual bounds: the multiplier of the latest Lagrangian stage solved per
     * (d, M, k, rc, zero), replaced in turn when full */
    struct lam_hint { int d, M, k, rc, zero; double lam; } hints[64];
    int nhints, hint_next;
    /* each op's configs and costs in the stage problems priced so far at
     * (pc_d, pc_M, pc_zero) (pipe_stage.c, stage_problem): per op of the
     * model, a list of the contexts it was priced in */
    int *wnin;          /* nops: op v's inputs (ranges_same, range_hash) */
    int *wprod;         /* nops * SB_MAX_IO: input k of op v's producer (-1: none) and its */
    int *wslot;         /* output slot: pipe_wire from these, without reading the model */
    struct op_price **pc;
    int pc_d, pc_M, pc_zero;
    size_t pc_bytes;
} pctx;

/* One config of one op in least_mem's sweep. */
struct mem_item {
    double s, val;      /* scratch; weights + grads + optimizer + act grads + k x activations */
    int u;              /* the op (a rep) */
};

static inline int rc_lo(const pctx *X) { return X->rc_choose ? 0 : X->rc_fixed; }
static inline int rc_hi(const pctx *X) { return X->rc_choose ? 1 : X->rc_fixed; }


/* pipe_combo.c */
int pipe_try_combo(pctx *X, int S, int M, int sched, const op_bound *ob, double *best,
                     double *least);

/* pipe_models.c */
int pipe_batch_dim(const sb_op *op);
double pipe_crossing_words(const sb_model *mb, const int *last, int b, int d);
int *pipe_last_use(const sb_model *m, sb_error *err);
uint64_t pipe_mix(uint64_t h, uint64_t v);
uint64_t pipe_op_hash(const sb_model *m, const sb_op *op);
int pipe_ops_same(const sb_model *m, const sb_op *a, const sb_op *b);
/* 1 when the stage [i, j) of mb divides an fp8 module (models/gpu_run.c): its
 * copy (pipe_sub_model) prices some ops dearer than a larger stage holding
 * them whole would, so its optimum bounds no such stage. */
int pipe_cut_divides(const sb_model *mb, int i, int j);
int pipe_stage_memory(const sb_model *mb, int i, int j, const int *cfg, sb_optimizer opt,
                        int zero, int prec, int k, int rc, double *bytes, sb_error *err);
/* memo: sb_price_memo (search/dp.h) or NULL */
int pipe_stage_problem(const sb_model *sub, int d, int M, const sb_cost_params *cp, int k,
                       const void *memo, sb_problem *pb, sb_error *err);
int pipe_sub_model(const sb_model *mb, int i, int j, sb_model *out, sb_error *err);
int64_t pipe_wire(const sb_model *m, int i, int v, int k);

/* pipe_stage.c */
void pipe_prices_free(pctx *X);
int pipe_kept_over(pctx *X, int i, int j, int d, int M, int k);
int pipe_least_mem(pctx *X, int i, int j, int d, int M, int k, double *out);
sb_model *pipe_micro(pctx *X, int M);
int pipe_op_bounds(pctx *X, const sb_model *mb, int d, int M, op_bound *b);
int pipe_seeds_near(pctx *X, int i, int j, int d, int M, int k);
stage_entry *pipe_stage(pctx *X, int i, int j, int d, int M, int k);

/* After the search: r->lagrange_gap over the stages taken that could lie in
 * a partition beating r->step_cost (pipe_stage.c). */
void pipe_lagrange_gap(pctx *X);
int pipe_stage_dual_lower(pctx *X, int i, int j, int d, int M, int k, double *lb);
stage_entry *pipe_stage_rc(pctx *X, int i, int j, int d, int M, int k, int rc);
stage_entry *pipe_stage_cached(pctx *X, int i, int j, int d, int M, int zero);

#endif
