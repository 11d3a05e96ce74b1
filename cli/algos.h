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
    int mem_bound;          /* pase, bf: mem_limit is a constraint of the DP (--memory) */
    char *note;             /* out: lines to print after the table (malloc'd, may be NULL) */
} algo_opts;

void algo_opts_default(algo_opts *ao);

/* 1 if name is pase, bf, dp, expert, mcmc or candidates. */
int algo_known(const char *name);

/* Runs one algorithm; r->choice and r->total_cost are set (the cost re-summed
 * with sb_strategy_cost), r->seconds is its time. */
int run_algo(const sb_problem *pb, const char *algo, algo_opts *ao, sb_result *r, sb_error *err);

/* The options search, candidates and prune share, parsed in one place:
 * the model and its --set, P, the cost model (--flops, --bw, --cutoff,
 * --calibration), the memory model (--device-mem, --optimizer) and the
 * algorithms' knobs (--budget, --time-limit, --seed, --temperature,
 * --max-table-mb, --max-rule-sets). Each command lists in its own getopt
 * table which of them it takes, with these short codes. */
#define SHARED_OPT_CODES "mpsFBcKHGonteTMRLQ"
typedef struct {
    const char *model;           /* -m */
    int p;                       /* -p (0: not given) */
    sb_setting set[64];
    int nset;
    sb_cost_params cp;
    const char *calibration;     /* --calibration FILE, or NULL */
    int fb_given;                /* --flops or --bw given */
    const char *machine;         /* --machine NAME|FILE (code 'H'), or NULL */
    double device_gib;           /* --memory / --device-mem (default: the machine's memory) */
    int mem_given;               /* --memory or --device-mem given */
    int mem_bound;               /* --memory given: search within it (code 'L') */
    algo_opts ao;                /* dp, mcmc, opt, max_rule_sets */
    /* --profiles DB|none (code 'Q'): where the predictive cost model's
     * profiles are read with --machine (default results/shardbench.db) */
    const char *profiles;
    char cost_model[1024];       /* out: which cost model prices the problem, one line */
    int precision;               /* --precision (sb_precision), or -1: the machine's */
    double grad_word_bytes;      /* --grad-reduce-dtype's bytes, or 0: the recipe's */
    int attention;               /* --attention: 1 fused, 0 materialized, -1 not given
                                    (fused with a GPU machine file) */
    int refuse_tables;           /* shared_opts_problem: the exact DP's tables bounded first
                                    and a search over --max-table-mb refused (search, pase|bf) */
} shared_opts;

void shared_opts_default(shared_opts *so);
/* Option c of getopt_long (with its arg): 1 if it was one of the shared
 * options and is stored, 0 if it is not one of them, -1 (err) if its value
 * is bad. */
int shared_opt(shared_opts *so, int c, const char *arg, sb_error *err);
/* getopt_long code of --recompute none|auto|all (cp.recompute) */
#define SB_OPT_RECOMPUTE 1100
/* getopt_long codes of --precision fp32|tf32|fp16|bf16|fp8 and
 * --grad-reduce-dtype fp32|bf16|fp16 (with --machine) */
#define SB_OPT_PRECISION 1101
#define SB_OPT_GRAD_DTYPE 1102
/* getopt_long code of --attention fused|materialized (with a GPU machine) */
#define SB_OPT_ATTENTION 1103
#define CLI_ATTENTION_OPT {"attention", required_argument, 0, SB_OPT_ATTENTION}
/* On a GPU machine, the model priced as a GPU framework runs it
 * (sb_model_gpu_run), its attentions fused unless --attention
 * materialized; 0, or -1 (err). */
int shared_opts_fuse(const shared_opts *so, sb_model *m, sb_error *err);
/* After the options: --calibration applied (cli_apply_calibration), or
 * --machine (cli_apply_machine). */
int shared_opts_calibrate(shared_opts *so, sb_error *err);
/* The model loaded with its --set and the problem built at P; on failure
 * nothing is left to free. */
int shared_opts_problem(shared_opts *so, sb_model *m, sb_problem *pb, sb_error *err);

/* Option parsing shared by search, candidates, prune and export
 * (cmd_search.c); each fails with SB_EXIT_INPUT naming the option and value. */
int parse_pos_double(const char *s, const char *what, double *out, sb_error *err);
/* A memory size: a number and a unit (B, KB, MB, GB, TB: powers of 1000;
 * KiB, MiB, GiB, TiB: of 1024; no unit: GiB), into GiB. */
int parse_mem_size(const char *s, const char *what, double *gib, sb_error *err);
int parse_int_opt(const char *s, const char *what, int lo, int hi, int *out, sb_error *err);
int parse_long_opt(const char *s, const char *what, long *out, sb_error *err);
int parse_seed(const char *s, uint64_t *out, sb_error *err);

/* --calibration FILE after the options: the calibrated cost model replaces
 * the reference one (sb_calibration_load); with --flops or --bw as well it
 * is an error (path NULL: nothing to do). */
int cli_apply_calibration(const char *path, int flops_or_bw_given, sb_cost_params *cp,
                          sb_error *err);
/* 1 when the file at path reads as a machine file (a `devices_per_node`
 * line): --calibration FILE then means --machine FILE. */
int cli_is_machine_file(const char *path);
/* --machine NAME|FILE after the options: the machine's cost parameters
 * (sb_machine_cost_params) replace the reference ones; with --flops, --bw or
 * --calibration as well it is an error (name NULL: nothing to do). Its
 * memory goes to *device_gib unless mem_given. */
int cli_apply_machine(const char *name, int flops_or_bw_given, const char *calibration,
                      int mem_given, double *device_gib, sb_cost_params *cp, sb_error *err);
/* The same at precision `prec` (< 0: the machine file's) with the gradient
 * reduction's word of grad_bytes (0: the recipe's); name NULL with a
 * precision other than fp32 or a grad_bytes given is an input error (the
 * reference model and a calibration price fp32). */
int cli_apply_machine_at(const char *name, int flops_or_bw_given, const char *calibration,
                         int mem_given, double *device_gib, int prec, double grad_bytes,
                         sb_cost_params *cp, sb_error *err);
/* The usage lines of --precision and --grad-reduce-dtype. */
#define CLI_PRECISION_HELP                                                                      \
    "      --precision P      fp32|tf32|fp16|bf16|fp8: the training recipe a --machine prices\n" \
    "                         (peak, bytes per parameter and activation; default: the machine\n" \
    "                         file's, bf16 mixed on the shipped GPUs, fp32 on cpu-here)\n"       \
    "      --grad-reduce-dtype D  fp32|bf16|fp16: the word the gradient reduction moves\n"      \
    "                         (default: the recipe's; bf16 mixed reduces in fp32)\n"
#define CLI_ATTENTION_HELP                                                                      \
    "      --attention fused|materialized  a GPU --machine: attention priced as one\n"             \
    "                         FlashAttention-style kernel (default fused) or as its three ops\n"
#define CLI_PRECISION_OPTS                                                                      \
    {"precision", required_argument, 0, SB_OPT_PRECISION},                                      \
    {"grad-reduce-dtype", required_argument, 0, SB_OPT_GRAD_DTYPE}

#endif
