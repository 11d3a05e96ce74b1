/* cost/kinds.h: what the search stage knows of each op kind (private to
 * search/). One sb_kind_search entry per kind, written in cost/ops/ beside
 * the kind's family, gathered by kind in cost/kinds.c. cost.c and memory.c
 * dispatch through the table and never fall back to a default. */
#ifndef SB_SEARCH_KINDS_H
#define SB_SEARCH_KINDS_H

#include "shardbench/memory.h"
#include "shardbench/search.h"

/* Elements per device of an op under a config, in the memory model's
 * categories (cost/memory.c fills the operand terms, the kind the rest). */
typedef struct {
    double weights;  /* the op's own weights and its weight operands */
    double wmax;     /* the largest weight operand */
    double in;       /* inputs (with halos, and embedding's int32 ids) */
    double outs;     /* outputs kept for backward */
    double saved;    /* state beyond inputs and outputs (statistics, LSTM states) */
    double scratch;  /* transient inside the op */
    double tied;     /* of weights, tied copies (`tie`): no optimizer state, not sliced */
} sb_mem_elems;

typedef struct {
    /* FLOP of the op under config c: forward, backward and the op's own
     * communication (relayouts between ops are edge costs). */
    double (*cost)(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp);
    /* Elements per device under config c (every field). */
    void (*memory)(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e);
    /* Optional: 0 for a config the kind cannot take (flatten and reshape
     * split a prefix of their dims only); NULL when every config is fine. */
    int (*config_ok)(const sb_op *op, const int *c);
} sb_kind_search;

/* Indexed by sb_op_kind; every entry non-NULL with cost and memory set
 * (tests/unit/test_op_kinds.c checks). */
extern const sb_kind_search *const sb_kind_search_table[SB_OP_KIND_COUNT];

/* ---- terms the kinds share (cost/terms.c) ---------------------------------------------- */

/* A point-to-point exchange of `words` whose ranks are not known: over the
 * inter-node link when the problem's p spans nodes (sb_coll_p2p; kept for
 * callers that have no group; the op kinds use sb_op_exchange). */
double sb_exchange_cost(const sb_cost_params *cp, double words);
/* The group of op's ranks under config c that differ in the dims of `dims`
 * (sb_coll_group_of over the op's grid). */
sb_coll_group sb_op_group(const sb_cost_params *cp, const sb_op *op, const int *c, uint32_t dims);
/* An exchange of `words` between neighbours along the dims of `dims`: a
 * point-to-point message over the inter-node link when that group spans
 * nodes. */
double sb_op_exchange(const sb_cost_params *cp, const sb_op *op, const int *c, uint32_t dims,
                      double words);
/* Words a device must receive to turn a block `src` (on qs devices) into a
 * block `tgt` (on qt devices), both of rank n. */
double sb_area_needed(const double *src, const double *tgt, int n, double qs, double qt);
/* GEMM of (m x k)(k x n) per batch element, m, n and k split over the
 * groups g[0], g[1], g[2] of ranks (their q: cm, cn, ck): compute
 * 3mnk·mac_ratio (+3·pw·mn elementwise) and the three all-reduces (of mn
 * over g[2], mk over g[1], nk over g[0]). */
/* Seconds of `batch` GEMMs' forward and two backward products by the GPU op
 * model (cp->gpu_sms > 0). */
double sb_gemm_gpu_seconds(const sb_cost_params *cp, double batch, double m, double n, double k);
double sb_gemm_cost(const sb_cost_params *cp, double batch, double m, double n, double k,
                    const sb_coll_group *g, int pw, double mac_ratio);
/* The three all-reduces of sb_gemm_cost alone (no compute). */
double sb_gemm_comm_cost(const sb_cost_params *cp, double batch, double m, double n, double k,
                         const sb_coll_group *g);
/* Seconds of one pass of `batch` (m x k)(k x n) products of a fused
 * attention kernel by the GPU op model (sb_gpu_attn_s: the m x n scores
 * stay on chip). */
double sb_attn_gpu_seconds(const sb_cost_params *cp, double batch, double m, double n, double k,
                           int bwd);
/* Elements of an op's iteration space per device, in dim order. */
double sb_per_device_elems(const sb_op *op, const int *c);
/* dims[d] / c[d] */
double sb_per_dev(const sb_op *op, const int *c, int d);

/* A memory-bound op's compute over `elems` elements per device: the
 * reference's `units` per element at elem_ratio, or with a GPU machine
 * (cp->gpu_sms) its forward and backward kernels moving fwd_words and
 * bwd_words words (cp->word_bytes each) per element over the HBM
 * bandwidth, plus a kernel's overhead each (docs/gpu-op-model.md). */
double sb_elem_cost(const sb_cost_params *cp, double elems, double units, double fwd_words,
                    double bwd_words);

/* The operand terms of sb_mem_elems (weights, wmax, in, outs) as most kinds
 * hold them: every input and output block, the op's own weights; saved and
 * scratch are 0 (the kind sets them). */
void sb_mem_operands(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e);
/* ZeRO stage 3's extra communication of op under config c: one more
 * all-gather of each weight over its replicas (the backward's; the
 * forward's all-gather and the reduce-scatter cost what the gradient
 * all-reduce costs): sb_coll_allgather over the group of its replicas.
 * 0 below stage 3. */
double sb_zero_cost(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp);
/* Tied weights (`tie`, runtime/executor/tied.c): whether tensor t is one;
 * whether entry w of sb_weight_replicas is one (sb_tied_cost: cost.h). */
int sb_tensor_tied(const sb_model *m, int t);
int sb_weight_replica_tied(const sb_model *m, const sb_op *op, int w);
/* Elements per device of operand o's block under config c. */
double sb_operand_elems(const sb_model *m, const sb_op *op, const sb_operand *o, const int *c);

/* The kinds' entries (cost/ops/): sb_search_conv, sb_search_dense, ... */
#define SB_KIND_DECL_(K, id) extern const sb_kind_search sb_search_##id;
SB_OP_KINDS(SB_KIND_DECL_)
#undef SB_KIND_DECL_

#endif
