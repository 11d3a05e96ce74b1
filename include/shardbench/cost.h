/* shardbench/cost.h: the cost model: machine and calibration parameters,
 * config enumeration, the cost of an op under a config and of an edge
 * between two layouts, and the collectives priced by the links their group
 * spans (cost/). Costs are in FLOP, as in docs/cost-model.md, or in seconds
 * under a calibrated or machine model. */
#ifndef SHARDBENCH_COST_H
#define SHARDBENCH_COST_H

#include <stdint.h>
#include <stdio.h>

#include "shardbench/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective kinds and the largest group whose measured alpha-beta a
 * cost model keeps (sb_cost_params.coll_*; shardbench profile measures
 * groups of 2..P ranks). */
#define SB_COLL_KINDS 5
#define SB_COLL_MAXQ 64

/* The most devices a problem may have (-p): today's largest clusters hold
 * 100,000-200,000 GPUs. */
#define SB_MAX_DEVICES 262144

/* A measured curve y(x) of at most SB_CURVE_MAX points, x increasing (a
 * machine file's `x:y,x:y,...` value): the fused attention kernel's TFLOP/s
 * by its sequence length. n 0: none. */
#define SB_CURVE_MAX 12
typedef struct {
    int n;
    double x[SB_CURVE_MAX], y[SB_CURVE_MAX];
} sb_curve;
/* y at x, linear in log2 x between the points, the end points' y outside
 * them; 0 when c has no point. */
double sb_curve_at(const sb_curve *c, double x);

typedef struct {
    double tflops;  /* peak F per device, TFLOP/s (default 10) */
    double gbs;     /* link bandwidth B, GB/s (default 16) */
    int cutoff;     /* minimum shard size; <= 0: the model's own */
    /* The calibrated model's terms (search/README.md); the defaults are the
     * reference model, exactly: */
    double word_bytes; /* bytes per word moved (reference 8: B/8 words/s) */
    double elem_ratio; /* cost of one element of an elementwise, norm,
                          softmax or pooling op, and of a fused pointwise op,
                          in GEMM multiply-adds (reference 1) */
    double latency_us; /* per message step: each of an all-reduce's 2(q-1)
                          steps, each edge or halo exchange (reference 0) */
    double conv_ratio; /* a convolution's multiply-add in GEMM multiply-adds
                          (its kernels are not a plain GEMM; reference 1) */
    char calibration[256]; /* the calibration file these came from, or "" */
    /* Two links (a machine file, --machine; docs/machines.md): a collective
     * whose group of ranks lies in one node uses gbs and latency_us, one
     * spanning nodes gbs_inter and latency_inter_us (sb_coll_*, below).
     * node_devices 0 (the default): one link, gbs and latency_us,
     * everywhere. */
    int node_devices;        /* devices per node, or 0 */
    /* Where the ranks lie on the nodes (with node_devices > 0 and devices a
     * multiple of it; sb_node_of): 0, block (the default), rank r on node
     * r / node_devices, so an op's fastest-varying split dims (the last,
     * ranks laid out row-major) lie inside a node; 1, cyclic, rank r on
     * node r mod (devices / node_devices), so its slowest-varying ones do.
     * The two orders of the 2-D mesh (nodes x devices per node) that the
     * plain search chooses between (docs/machines.md, "Ranks on nodes"). */
    int node_order;
    int devices;             /* the problem's p (set by sb_problem_build) */
    double gbs_inter;        /* inter-node bandwidth per device, GB/s */
    double latency_inter_us; /* inter-node latency per message step, us */
    char machine[256];       /* the machine file these came from, or "" */
    /* ZeRO stage 0..3 (search --zero; the runtime's sb_exec_opts.zero): the
     * memory model slices each weight's optimizer state (1), gradients (2)
     * and weights (3) over its replicas; stage 3 adds one all-gather of the
     * weight to the op's cost (search/README.md). 0 (the default): the
     * reference model. */
    int zero;
    /* Activation recomputation (search --recompute; sb_recompute_mode):
     * none (the default: the reference model), all (every recomputable op,
     * sb_op_recomputable: its vertex cost gains sb_recompute_cost, its
     * memory keeps only its outputs and input gradients), or auto (the
     * memory-limited search, sb_search_within, chooses per op). */
    int recompute;
    /* Pipeline stages (search/pipeline.c): the memory model counts each op's
     * activations this many times (the micro-batches a stage holds in
     * flight); 0 or 1: once (every plain strategy). */
    int act_copies;
    /* The predictive model (shardbench/profile.h, sb_profile_apply): 1 when
     * the vertex costs are a profile's measured seconds; sb_coll_relayout
     * then prices an edge's relayout by the fitted seconds per edge that
     * moves data (relay_msg_s), per word it moves (relay_word_s) and per
     * word of the two local shards it copies (relay_local_s,
     * sb_edge_local_words). 0 (the default): the analytic terms. */
    int profiled;
    double relay_msg_s, relay_word_s, relay_local_s;
    /* the probe seconds of the profile launch the figures came from
     * (sb_profile.probe_s): a prediction times a measurement's own probe
     * over this is scaled to the machine's speed at the measurement. 0:
     * not profiled, or a launch without one */
    double profile_probe_s;
    /* How the collectives are priced (sb_coll_*): SB_COLL_ANALYTIC (0, the
     * default: the links above), SB_COLL_MEASURED (a profile's alpha +
     * beta * bytes per kind and group size where coll_beta_s[kind][q] > 0
     * or coll_alpha_s[kind][q] > 0, the links elsewhere; kinds as
     * sb_pcoll_kind in profile.h) or SB_COLL_FREE (0: an op's compute
     * alone, sb_profile_apply's split of an estimate). */
    int coll_mode;
    double coll_alpha_s[SB_COLL_KINDS][SB_COLL_MAXQ + 1];
    double coll_beta_s[SB_COLL_KINDS][SB_COLL_MAXQ + 1]; /* per byte */
    /* The training's precision (shardbench/precision.h, --precision): 0,
     * fp32 (the reference). A machine file prices it at its peak and moves
     * its activation words (word_bytes); the memory model takes its bytes. */
    int precision;
    /* Bytes of the word a weight gradient's reduction moves
     * (--grad-reduce-dtype); 0: word_bytes (the reference). */
    double grad_word_bytes;
    /* The GPU op model's figures for GEMM-like ops (a machine file with `sms`;
     * docs/megatron.md): gpu_sms 0 (the default) keeps the 3 m'n'k' term. */
    double gpu_sms, gpu_peak_tflops, gpu_gemm_eff, gpu_hbm_gbs, gpu_hbm_eff, gpu_kernel_us;
    /* The peak of products between two activations (attention): bf16's
     * under the fp8 recipe, which casts only the linear layers' operands
     * (Transformer Engine: fp8_dpa off), else gpu_peak_tflops. */
    double gpu_attn_peak_tflops;
    double gpu_attn_gemm_eff; /* the attention core's large-GEMM fraction (bf16's under fp8) */
    /* The fused attention kernel's measured TFLOP/s by sequence length, forward
     * and backward (the machine file's attn_fwd_tflops, attn_bwd_tflops); none:
     * priced as its GEMMs at gpu_attn_gemm_eff. */
    sb_curve gpu_attn_fwd, gpu_attn_bwd;
    /* The data-parallel weight-gradient reduction overlapped with the
     * backward (a GPU machine file, search --dp-overlap on, the default
     * there, as Megatron-LM's bucketed overlap; docs/megatron.md): an op's
     * reduction is exposed only where it passes the op's own backward
     * compute (2/3 of its compute), sb_op_cost. 0: all of it (the reference). */
    int dp_overlap;
    /* 1: an op's cost without its weight-gradient reductions and ZeRO-3
     * gathers (the kinds leave them out): sb_op_wgrad_cost and the time
     * breakdown price the difference. 0 (the default): with them. */
    int wgrad_free;
} sb_cost_params;
enum { SB_COLL_ANALYTIC = 0, SB_COLL_MEASURED = 1, SB_COLL_FREE = 2 };

typedef enum { SB_RECOMPUTE_NONE = 0, SB_RECOMPUTE_ALL = 1, SB_RECOMPUTE_AUTO = 2 } sb_recompute_mode;
/* "none", "all", "auto"; anything else an input error naming the value. */
int sb_recompute_mode_parse(const char *s, int *out, sb_error *err);
const char *sb_recompute_mode_name(int mode);

void sb_cost_params_default(sb_cost_params *cp);

/* Reads a calibration file (written by `shardbench calibrate`) into cp:
 * tflops, gbs, word_bytes, elem_ratio, latency_us, and conv_ratio if given
 * (else 1); the cutoff is kept.
 * Errors name the file and line. */
int sb_calibration_load(const char *path, sb_cost_params *cp, sb_error *err);
/* Writes one; `comment` (may be NULL) goes on its first line. */
int sb_calibration_save(const char *path, const sb_cost_params *cp, const char *comment,
                        sb_error *err);

/* FLOP that moving `words` words costs. */
double sb_words_to_flops(const sb_cost_params *cp, double words);
/* All-reduce of `words` words per device over q devices: the group of q
 * consecutive ranks 0..q-1 (sb_coll_group_first). */
double sb_allreduce_cost(const sb_cost_params *cp, double words, double q);

/* ---- collectives priced by the links their group spans (search/terms.c) ----
 * Ranks lie on nodes in order (cp->node_order block, the default): with
 * N = cp->node_devices, ranks 0..N-1 on node 0, N..2N-1 on node 1, ...;
 * cyclic: rank r on node r mod (devices / N). An op's rank r holds the block at the
 * row-major coordinates of r in its config grid c (last dim fastest; the
 * runtime's plan_coords). A group is the set of ranks that differ only in
 * some dims of the grid. N = 0 (no machine file): one node, one link, and
 * every function below is the reference model's term exactly
 * (docs/machines.md). */
typedef struct {
    double q;        /* ranks in the group */
    double per_node; /* of them on one node (the most on any of its nodes) */
    double nodes;    /* nodes it spans (q = per_node x nodes when even) */
} sb_coll_group;

/* The group of the ranks of grid c (nd split counts) that differ only in the
 * dims of `dims` (bit d: dim d): q = the product of those splits. Exact when
 * the node size and the grid line up (every split dim lies inside a node,
 * across nodes, or one factor of it each; powers of two always do); else
 * the group of rank 0, counted rank by rank. */
sb_coll_group sb_coll_group_of(const sb_cost_params *cp, const int *c, int nd, uint32_t dims);
/* The group of the first q ranks (ranks 0..q-1). */
sb_coll_group sb_coll_group_first(const sb_cost_params *cp, double q);
/* The node of rank r under cp->node_order (block: r / node_devices;
 * cyclic: r mod (devices / node_devices)); 0 without nodes. */
long sb_node_of(const sb_cost_params *cp, long r);
/* Whether cp's ranks can be placed cyclically: nodes (node_devices > 0),
 * more than one of them, and devices a multiple of node_devices. */
int sb_node_order_possible(const sb_cost_params *cp);
/* "intra" (one node), "inter" (one rank per node) or "both". */
const char *sb_coll_group_word(sb_coll_group g);

/* FLOP of each collective over group g, alpha-beta with ring step counts:
 * a group on one node uses the intra-node link (gbs, latency_us); a group
 * over several nodes the cheaper of the flat ring over the inter-node link
 * (gbs_inter, latency_inter_us) and the hierarchical algorithm (inside each
 * node, then across nodes on 1/per_node of the data, then inside again).
 * `words` is the full buffer per device for all-reduce, reduce-scatter
 * (its input) and all-gather (its output); for all-to-all, the words a
 * device receives from the others. */
double sb_coll_allreduce(const sb_cost_params *cp, double words, sb_coll_group g);
double sb_coll_reduce_scatter(const sb_cost_params *cp, double words, sb_coll_group g);
double sb_coll_allgather(const sb_cost_params *cp, double words, sb_coll_group g);
double sb_coll_alltoall(const sb_cost_params *cp, double words, sb_coll_group g);
/* `words` sent between two ranks, over the inter-node link when inter is
 * non-zero (and a machine file gave one), else the intra-node one: one
 * latency plus the words at the link's bandwidth (0 when nothing moves). */
double sb_coll_p2p(const sb_cost_params *cp, double words, int inter);
/* A relayout in which each device receives `words` from the first q ranks
 * (an edge between two ops: q the larger of their device counts): an
 * all-to-all over sb_coll_group_first(q); under a profile (cp->profiled)
 * the fit, which also prices the `local` words of the shards it copies on
 * a rank (sb_edge_local_words; the analytic terms ignore them). */
double sb_coll_relayout(const sb_cost_params *cp, double words, double q, double local);

/* Configs of one op: n rows of ndims split counts, row-major. */
typedef struct {
    int n, ndims;
    int *c;        /* n * ndims */
    double *cost;  /* n: vertex cost of each config */
} sb_configs;

/* Enumerates the configs of an op for p devices and the given cutoff,
 * applying the op's restrictions (dims never split, reshape contiguity). */
int sb_enumerate_configs(const sb_op *op, int p, int cutoff, sb_configs *out,
                         sb_error *err);

/* What op's weight-gradient reductions (and ZeRO-3 gathers) add to its
 * cost under config c, as sb_op_cost prices them (exposed only, with
 * cp->dp_overlap): sb_op_cost less the same with cp->wgrad_free. */
double sb_op_wgrad_cost(const sb_model *m, const sb_op *op, const int *c,
                        const sb_cost_params *cp);
/* A tied weight's copy (`tie`, runtime/executor/tied.c): its pull from
 * the table and its gradient's push back, a step, under config c of its
 * reader op; 0 with cp->wgrad_free (priced with the weight gradients'
 * reductions, as sb_op_wgrad_cost). */
double sb_tied_cost(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp);
/* sb_op_cost, with what its weight-gradient reductions add (as
 * sb_op_wgrad_cost) into *wgrad (may be NULL): both at the price of one. */
double sb_op_cost_split(const sb_model *m, const sb_op *op, const int *c,
                        const sb_cost_params *cp, double *wgrad);

/* 1 when op's kind restricts its configs beyond the splits (reshape
 * contiguity): two ops of such a kind with equal dims may differ. */
int sb_configs_restricted(const sb_op *op);

/* Vertex cost of op under config c (ndims split counts); with
 * cp->recompute all, sb_recompute_cost added for a recomputable op. */
double sb_op_cost(const sb_model *m, const sb_op *op, const int *c,
                  const sb_cost_params *cp);
/* What recomputing op under config c adds: one more forward, priced as a
 * third of the kind's vertex cost (the reference prices forward and
 * backward as three equal passes: a GEMM's 3·m'n'k' is one forward and two
 * backward GEMMs), its communication included (the runtime runs the
 * forward's collectives again). 0 for an op that is not recomputable. */
double sb_recompute_cost(const sb_model *m, const sb_op *op, const int *c,
                         const sb_cost_params *cp);

/* Split counts of an operand's tensor dims under its op's config `c`. */
void sb_operand_layout(const sb_op *op, const sb_operand *o, int tensor_ndims,
                       const int *c, int *layout);

/* Words a relayout of tensor t from the producer's layout to the
 * consumer's moves per device, forward and backward (what sb_edge_cost
 * prices). */
double sb_edge_words(const sb_tensor *t, const int *src_layout, const int *dst_layout);

/* Words of tensor t's local shards a relayout copies on a rank whatever
 * it moves: the producer's box (the gradient, backward) plus the
 * consumer's (forward). */
double sb_edge_local_words(const sb_tensor *t, const int *src_layout, const int *dst_layout);

/* Edge cost between a tensor's producer layout and consumer layout. */
double sb_edge_cost(const sb_cost_params *cp, const sb_tensor *t,
                    const int *src_layout, const int *dst_layout);

#ifdef __cplusplus
}
#endif
#endif
