/* shardbench/search.h: config enumeration, the reference (PaSE) cost model,
 * and the exact dynamic-programming search over a model graph.
 *
 * Costs are in FLOP, as in docs/cost-model.md. A `sb_problem`
 * holds every op's configs and per-config costs for one model and device
 * count; search functions pick one config per op (a strategy). */
#ifndef SHARDBENCH_SEARCH_H
#define SHARDBENCH_SEARCH_H

#include <stdio.h>

#include "shardbench/model.h"
#include "shardbench/pipeline.h"

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

typedef struct {
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
    int threads;          /* the table fill's threads at most (not plain): 0 the DP's
                             choice (up to two), 1 one; the same result */
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
typedef struct sb_dp_memo sb_dp_memo;
sb_dp_memo *sb_dp_memo_new(double cap_bytes);
void sb_dp_memo_free(sb_dp_memo *m);

typedef struct {
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

/* Strategy files (versioned text, see search/README.md). */
int sb_strategy_save(const char *path, const sb_problem *pb,
                     const sb_result *r, const char *algo, sb_error *err);
/* Reads a strategy file back against a problem: choice[i] gets the index of
 * the saved config of op i. Mismatched model or unknown config: error; a
 * file holding a pipeline, ZeRO stage or recomputation: error (those are
 * read by sb_strategy_file_load). */
int sb_strategy_load(const char *path, const sb_problem *pb, int *choice,
                     sb_error *err);
/* A strategy file as written: one config per op (split counts, op i's at
 * cfg + i * SB_MAX_DIMS), and, in version 2, a pipeline (pipeline.h), a
 * ZeRO stage and the recomputed ops. A file with none of them is written
 * as version 1, byte for byte as before. */
typedef struct {
    int p;
    char algo[64];
    double cost;
    int *cfg;                 /* nops * SB_MAX_DIMS */
    int *op_line;             /* nops: the line of each op (0: not read from a file) */
    sb_pipeline pipe;         /* sb_pipeline_none when the file has none */
    int zero;                 /* 0..3 */
    unsigned char *recompute; /* nops flags */
    int node_order;           /* sb_cost_params.node_order: 1 cyclic (a version-2 line) */
    int node_devices;         /* with node_order 1: the devices per node it was chosen for */
} sb_strategy_file;

/* Allocates an empty one (every config 0, no pipeline) for m on p devices:
 * 0, or -1 when out of memory. */
int sb_strategy_file_init(sb_strategy_file *sf, const sb_model *m, int p);
void sb_strategy_file_free(sb_strategy_file *sf);
/* Writes sf (through a temporary file and a rename). */
int sb_strategy_file_save(const char *path, const sb_model *m, const sb_strategy_file *sf,
                          sb_error *err);
/* Reads a version 1 or 2 file for m on p devices: each op's config must fit
 * its stage's devices (and its dims); errors name the file and line. On
 * success sf is allocated (free with sb_strategy_file_free). */
int sb_strategy_file_load(const char *path, const sb_model *m, int p, sb_strategy_file *sf,
                          sb_error *err);

/* The config index in pb of each op's config in sf (choice[nops]); an
 * error naming path:line when one is not a config of pb. */
int sb_strategy_file_choice(const char *path, const sb_strategy_file *sf, const sb_problem *pb,
                            int *choice, sb_error *err);
/* 1 when sf holds a pipeline (S > 1 or M > 1), a ZeRO stage or a
 * recomputed op: what a version-2 file adds. */
int sb_strategy_file_has_extras(const sb_model *m, const sb_strategy_file *sf);
/* The JSON of a strategy file with its extras, in the keys of `search
 * --space full --format json`: model, params, p, algo, total_cost (the
 * file's cost), stages (ops, devices, mesh), microbatches, schedule, zero,
 * recompute (op names) and ops (name, type, stage, dims, config); what
 * bench stores for a strategy that a plain problem cannot hold. Malloc'd,
 * NULL when out of memory. */
char *sb_strategy_file_json_str(const sb_model *m, const sb_strategy_file *sf, const char *algo);
/* Stage s of pipeline pl as the JSON object both strategy JSONs share
 * (jansson's json_t): {"ops": names, "devices": ranks, "mesh": [devices]}. */
struct json_t;
struct json_t *sb_stage_json(const sb_model *m, const sb_pipeline *pl, int s);

/* One value of a strategy-file line at s (blanks skipped): a bare word (up
 * to a blank or '#'), or a double-quoted one with \" \\ \n \t \r \xHH
 * escapes (how `model` is written when the name needs it). 0 with the value
 * in out and *end (if not NULL) after it; -1 when unterminated, badly
 * escaped or longer than n - 1. */
int sb_strategy_word(const char *s, char *out, size_t n, const char **end);

/* Data parallelism: every op splits its dim named "batch" as far as P and
 * its enumerated configs allow (the largest such divisor), nothing else. */
int sb_strategy_data_parallel(const sb_problem *pb, int *choice, sb_error *err);

/* JSON of a strategy: model, params, p, algo, cost-model parameters,
 * total_cost, search_seconds, table statistics, and ops (name, type, dims,
 * config, cost). The _str form returns malloc'd text (NULL on failure). */
void sb_strategy_json(FILE *f, const sb_problem *pb, const sb_result *r, const char *algo);
char *sb_strategy_json_str(const sb_problem *pb, const sb_result *r, const char *algo);

/* "batch=128,classes=1024" and "32,1,1,1" forms. */
void sb_params_str(const sb_model *m, char *buf, size_t n);
void sb_config_str(const int *c, int nd, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
