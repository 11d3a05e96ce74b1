/* cmd_search.c: `shardbench search` and `shardbench paper`. Parses options,
 * loads the model, builds the problem, runs the DP, prints and records. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algos.h"
#include "cli.h"
#include "search_plot.h"
#include "shardbench/breakdown.h"
#include "shardbench/candidates.h"
#include "shardbench/strategy.h"
#include "shardbench/machine.h"
#include "shardbench/memory.h"
#include "shardbench/megatron.h"
#include "full_grid.h"
#include "shardbench/pipesearch.h"
#include "shardbench/precision.h"
#include "shardbench/results.h"

/* A strategy whose predicted peak memory is over the device: said on stderr
 * (the search's cost model ignores memory; prune drops such strategies). */
static void warn_memory(const sb_problem *pb, const sb_result *r, sb_optimizer opt, double gib)
{
    double mem = sb_strategy_memory_rc(pb, r->choice, r->recompute, opt, NULL);
    if (mem > gib * 1073741824.0)
        fprintf(stderr, "shardbench: warning: predicted peak memory %.2f GiB per device is over "
                        "--device-mem %g GiB\n", mem / 1073741824.0, gib);
}

/* ---- printing ---------------------------------------------------------------- */

static const int *cfg_of(const sb_problem *pb, const sb_result *r, int i)
{
    return pb->cfg[i].c + (size_t)r->choice[i] * (size_t)pb->m->ops[i].ndims;
}

static int same_row(const sb_problem *pb, const sb_result *r, int a, int b)
{
    const sb_op *x = &pb->m->ops[a], *y = &pb->m->ops[b];
    if (x->kind != y->kind || x->ndims != y->ndims)
        return 0;
    for (int d = 0; d < x->ndims; d++)
        if (strcmp(x->dims[d].name, y->dims[d].name))
            return 0;
    return !memcmp(cfg_of(pb, r, a), cfg_of(pb, r, b), (size_t)x->ndims * sizeof(int));
}

/* One line: where the strategy's split dims lie on the machine's nodes
 * (the JSON's mesh_to_nodes summed over the ops). */
static void print_mesh_to_nodes(FILE *f, const sb_problem *pb, const sb_result *r)
{
    int n[3] = {0, 0, 0}, inside = 0;
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        const int *c = cfg_of(pb, r, i);
        uint32_t all = op->ndims >= 32 ? ~0u : (1u << op->ndims) - 1u;
        inside += sb_coll_group_of(&pb->cp, c, op->ndims, all).nodes <= 1;
        for (int d = 0; d < op->ndims; d++) {
            if (c[d] <= 1)
                continue;
            const char *w = sb_coll_group_word(sb_coll_group_of(&pb->cp, c, op->ndims, 1u << d));
            n[!strcmp(w, "intra") ? 0 : !strcmp(w, "inter") ? 1 : 2]++;
        }
    }
    fprintf(f, "mesh to nodes (%d devices a node, ranks %s): split dims intra %d, inter %d, "
               "both %d; %d of %d ops inside one node\n",
            pb->cp.node_devices, pb->cp.node_order == 1 ? "cyclic" : "in blocks", n[0], n[1],
            n[2], inside, pb->m->nops);
}

/* "recompute (--recompute MODE): N of M ops: a, b, ..." (names up to a
 * line's worth, then a count); rec(i, ctx): 1 when op i is recomputed */
static void print_recompute_line(FILE *f, const sb_model *m, int mode,
                                 int (*rec)(int i, const void *ctx), const void *ctx)
{
    int n = 0, shown = 0;
    size_t width = 0;
    for (int i = 0; i < m->nops; i++)
        n += rec(i, ctx);
    fprintf(f, "recompute (--recompute %s): %d of %d ops%s", sb_recompute_mode_name(mode), n,
            m->nops, n ? ":" : "");
    for (int i = 0; i < m->nops; i++)
        if (rec(i, ctx) && width < 400) {
            width += strlen(m->ops[i].name) + 2;
            fprintf(f, "%s %s", shown++ ? "," : "", m->ops[i].name);
        }
    if (shown < n)
        fprintf(f, " and %d more", n - shown);
    fputc('\n', f);
}

typedef struct {
    const sb_problem *pb;
    const sb_result *r;
} plain_rec;

static int plain_recomputed(int i, const void *ctx)
{
    const plain_rec *x = ctx;
    return sb_result_recomputed(x->pb, x->r, i);
}

static void print_recomputed(FILE *f, const sb_problem *pb, const sb_result *r)
{
    plain_rec x = {pb, r};
    print_recompute_line(f, pb->m, pb->cp.recompute, plain_recomputed, &x);
}

/* a pipeline result's recomputed ops (sb_pipe_result.recompute, NULL: none) */
static int pipe_recomputed(int i, const void *ctx)
{
    const unsigned char *flags = ctx;
    return flags && flags[i];
}

void print_strategy_table(FILE *f, const sb_problem *pb, const sb_result *r, const char *algo)
{
    const sb_model *m = pb->m;
    char params[2048];
    sb_params_str(m, params, sizeof params);
    if (pb->cp.calibration[0])
        fprintf(f, "# %s  p=%d  algo=%s  (calibrated: %s: F=%g TFLOP/s, B=%g GB/s, %g-byte "
                   "words, elementwise x%g, latency %g us; cutoff %d)  %s\n",
                m->name, pb->p, algo, pb->cp.calibration, pb->cp.tflops, pb->cp.gbs,
                pb->cp.word_bytes, pb->cp.elem_ratio, pb->cp.latency_us, pb->cp.cutoff, params);
    else
        fprintf(f, "# %s  p=%d  algo=%s  (F=%g TFLOP/s, B=%g GB/s, cutoff %d)  %s\n", m->name,
                pb->p, algo, pb->cp.tflops, pb->cp.gbs, pb->cp.cutoff, params);
    fprintf(f, "%-36s %-12s %-44s %-22s %14s\n", "ops", "type", "iteration dims", "config",
            "cost (FLOP)");
    for (int i = 0; i < m->nops;) {
        int j = i + 1;
        double cost = pb->cfg[i].cost[r->choice[i]];
        while (j < m->nops && same_row(pb, r, i, j)) {
            cost += pb->cfg[j].cost[r->choice[j]];
            j++;
        }
        char name[256], dims[1024], cfg[256];
        if (j - i == 1)
            snprintf(name, sizeof name, "%s", m->ops[i].name);
        else
            snprintf(name, sizeof name, "%s .. %s (%d)", m->ops[i].name, m->ops[j - 1].name, j - i);
        sb_op_dims_str(&m->ops[i], dims, sizeof dims);
        sb_config_str(cfg_of(pb, r, i), m->ops[i].ndims, cfg, sizeof cfg);
        fprintf(f, "%-36s %-12s %-44s %-22s %14.6e\n", name, sb_op_kind_name(m->ops[i].kind), dims,
                cfg, cost);
        i = j;
    }
    fprintf(f, "total cost %.2f FLOP; search %.4f s; %d vertices; max configs per op %d; "
               "max dependent set %d; peak table memory %.2f MB\n",
            r->total_cost, r->seconds, m->nops, r->max_configs, r->max_dep_set,
            r->peak_table_bytes / 1e6);
    if (r->mem_limit_bytes > 0)
        fprintf(f, "predicted peak memory %.4g GiB per device, within --memory %.4g GiB\n",
                r->peak_bytes_per_device / 1073741824.0, r->mem_limit_bytes / 1073741824.0);
    if (pb->cp.zero) /* the reference model's output stays as it was without --zero */
        fprintf(f, "ZeRO stage %d in the memory and cost models (--zero)\n", pb->cp.zero);
    if (pb->cp.recompute) /* likewise without --recompute */
        print_recomputed(f, pb, r);
    if (pb->cp.calibration[0]) /* calibrated costs are multiply-adds at the measured rate */
        fprintf(f, "predicted step time %.4g s (calibrated: cost / (F x 1e12))\n",
                r->total_cost / (pb->cp.tflops * 1e12));
    else if (pb->cp.machine[0])
        fprintf(f, "predicted step time %.4g s (machine %s at %s: cost / (F x 1e12))\n",
                r->total_cost / (pb->cp.tflops * 1e12), pb->cp.machine,
                sb_precision_name(pb->cp.precision));
    if (pb->cp.node_devices > 0)
        print_mesh_to_nodes(f, pb, r);
}

void print_strategy_tsv(FILE *f, const sb_problem *pb, const sb_result *r)
{
    const sb_model *m = pb->m;
    fprintf(f, "op\ttype\tdims\tconfig\tcost\n");
    for (int i = 0; i < m->nops; i++) {
        char dims[1024], cfg[256];
        sb_op_dims_str(&m->ops[i], dims, sizeof dims);
        sb_config_str(cfg_of(pb, r, i), m->ops[i].ndims, cfg, sizeof cfg);
        fprintf(f, "%s\t%s\t%s\t%s\t%.17g\n", m->ops[i].name, sb_op_kind_name(m->ops[i].kind), dims,
                cfg, pb->cfg[i].cost[r->choice[i]]);
    }
    fprintf(f, "#total\t\t\t\t%.17g\n", r->total_cost);
}

/* s inside a Graphviz double-quoted string: '"' and '\\' escaped. */
static void dot_str(FILE *f, const char *s)
{
    for (; *s; s++)
        fprintf(f, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
}

static int write_dot(const char *path, const sb_problem *pb, const sb_result *r, sb_error *err)
{
    char tmp[4200];
    FILE *f = sb_out_open(path, "Graphviz file", tmp, sizeof tmp, err);
    if (!f)
        return -1;
    const sb_model *m = pb->m;
    fprintf(f, "digraph \"");
    dot_str(f, m->name);
    fprintf(f, "\" {\n  node [shape=box, fontname=monospace];\n");
    for (int i = 0; i < m->nops; i++) {
        char cfg[256];
        sb_config_str(cfg_of(pb, r, i), m->ops[i].ndims, cfg, sizeof cfg);
        fprintf(f, "  n%d [label=\"%s\\n%s [%s]\"];\n", i, m->ops[i].name,
                sb_op_kind_name(m->ops[i].kind), cfg);
    }
    for (int k = 0; k < pb->nedges; k++)
        fprintf(f, "  n%d -> n%d [label=\"%s\"];\n", pb->edges[k].src, pb->edges[k].dst,
                m->tensors[pb->edges[k].tensor].name);
    fprintf(f, "}\n");
    return sb_out_commit(f, tmp, path, "Graphviz file", err);
}

static int record(const char *db_path, int adopt, const char *source, const sb_problem *pb,
                  const sb_result *r, const char *algo, sb_error *err)
{
    if (!db_path || !strcmp(db_path, "none"))
        return 0;
    sb_db *db;
    if (sb_db_open_flags(db_path, 0, adopt ? SB_DB_ADOPT : 0, &db, err))
        return -1;
    char params[4096];
    sb_params_str(pb->m, params, sizeof params);
    char *json = sb_result_json_str(pb, r, algo);
    sb_search_record rec = {
        .source = source, .model = pb->m->name, .model_path = pb->m->path, .params = params,
        .p = pb->p, .algo = algo, .tflops = pb->cp.tflops, .gbs = pb->cp.gbs,
        .cutoff = pb->cp.cutoff, .total_cost = r->total_cost, .seconds = r->seconds,
        .nops = pb->m->nops, .max_configs = r->max_configs, .max_dep_set = r->max_dep_set,
        .peak_table_bytes = r->peak_table_bytes, .peak_rss_bytes = (double)sb_peak_rss(),
        .strategy_json = json ? json : "{}",
    };
    int rc = sb_db_record_search(db, &rec, NULL, err);
    free(json);
    sb_db_close(db);
    return rc;
}

/* ---- the full space: pipeline strategies ------------------------------------------ */

static const int *pcfg(const sb_pipe_result *r, int i) { return r->cfg + (size_t)i * SB_MAX_DIMS; }

static double pipe_seconds(const sb_cost_params *cp, double cost)
{
    return cost / (cp->tflops * 1e12);
}

static void choose_rank_order(const sb_model *m, sb_problem *pb, const char *algo,
                              algo_opts *ao, sb_result *r);

static int has_time(const sb_cost_params *cp) { return cp->calibration[0] || cp->machine[0]; }

/* Where stage s's sub-mesh (its ranks, one axis) lies on the nodes: its
 * ranks first .. first + d - 1 as placed, "intra" (one node), "inter" (one
 * rank a node) or "both". */
static const char *stage_mesh_word(const sb_cost_params *cp, const sb_pipeline *pl, int s)
{
    int n = cp->node_devices, r0 = sb_pipeline_first_rank(pl, s), d = pl->devices[s];
    if (n <= 0 || d <= 1)
        return "intra";
    int first = r0 / n, last = (r0 + d - 1) / n, most = 0;
    for (int k = first; k <= last; k++) { /* ranks of the stage on node k */
        int lo = k * n > r0 ? k * n : r0, hi = (k + 1) * n < r0 + d ? (k + 1) * n : r0 + d;
        if (hi - lo > most)
            most = hi - lo;
    }
    sb_coll_group g = {(double)d, (double)most, (double)(last - first + 1)};
    return sb_coll_group_word(g);
}

/* Op i's split dims on the nodes, as the cost model prices its stage:
 * the stage's ranks counted from its first (the same placement as the
 * ranks themselves when the stage size divides the node size or the node
 * size divides it, as for every power of two); counts into n[0..2]
 * (intra, inter, both), and into *inside when the op's grid is on one node.
 * Object {dim: word}. */
static json_t *pipe_op_mesh(const sb_model *m, const sb_cost_params *cp, const sb_pipe_result *r,
                            int i, int *n, int *inside)
{
    const sb_op *op = &m->ops[i];
    const int *c = r->cfg + (size_t)i * SB_MAX_DIMS;
    json_t *o = json_object();
    uint32_t all = op->ndims >= 32 ? ~0u : (1u << op->ndims) - 1u;
    *inside += sb_coll_group_of(cp, c, op->ndims, all).nodes <= 1;
    for (int d = 0; d < op->ndims; d++) {
        if (c[d] <= 1)
            continue;
        const char *w = sb_coll_group_word(sb_coll_group_of(cp, c, op->ndims, 1u << d));
        n[!strcmp(w, "intra") ? 0 : !strcmp(w, "inter") ? 1 : 2]++;
        json_object_set_new(o, op->dims[d].name, json_string(w));
    }
    return o;
}

/* the search chose recomputation per stage, or the ZeRO stage (sb_pipe_search: only under a
 * limit) */
static int chooses_rc(const sb_pipe_opts *po, const sb_cost_params *cp)
{
    return po->choose_recompute || cp->recompute == SB_RECOMPUTE_AUTO;
}

static int chosen(const sb_pipe_opts *po, const sb_cost_params *cp)
{
    return po->mem_limit > 0 && (po->choose_zero || chooses_rc(po, cp));
}

static void print_pipe_table(FILE *f, const sb_model *m, int p, const sb_cost_params *cp,
                             const sb_pipe_opts *po, const sb_pipe_result *r, const char *algo)
{
    char params[2048];
    sb_params_str(m, params, sizeof params);
    const sb_pipeline *pl = &r->pipe;
    int S = pl->nstages, M = pl->microbatches;
    fprintf(f, "# %s  p=%d  algo=%s  space=full  (F=%g TFLOP/s, B=%g GB/s, cutoff %d)  %s\n",
            m->name, p, algo, cp->tflops, cp->gbs, cp->cutoff > 0 ? cp->cutoff : m->cutoff, params);
    fprintf(f, "pipeline: %d stage%s of %d devices, %d micro-batch%s of batch/%d, schedule %s; "
               "cut points: %d (where %d tensor%s cross)\n",
            S, S == 1 ? "" : "s", pl->devices[0], M, M == 1 ? "" : "es", M,
            sb_schedule_name(pl->schedule), r->cuts, r->crossing, r->crossing == 1 ? "" : "s");
    fprintf(f, "%-5s %-11s %-44s %5s %14s %12s %9s %12s\n", "stage", "ranks", "ops", "count",
            "t (FLOP/mb)", "p2p (FLOP)", "in flight", "peak GiB");
    for (int s = 0; s < S; s++) {
        int i = pl->first_op[s], j = pl->first_op[s + 1] - 1, r0 = sb_pipeline_first_rank(pl, s);
        char ranks[32], ops[256];
        snprintf(ranks, sizeof ranks, "%d-%d", r0, r0 + pl->devices[s] - 1);
        snprintf(ops, sizeof ops, "%s .. %s", m->ops[i].name, m->ops[j].name);
        fprintf(f, "%-5d %-11s %-44s %5d %14.6e %12.4e %9d %12.4f\n", s, ranks, ops, j - i + 1,
                r->stage_time[s], r->stage_p2p[s], r->inflight[s], r->stage_mem[s] / 1073741824.0);
    }
    fprintf(f, "%-5s %-36s %-12s %-44s %-22s %14s\n", "stage", "ops", "type", "iteration dims",
            "config", "cost (FLOP/mb)");
    for (int i = 0; i < m->nops;) {
        int st = sb_pipeline_stage_of(pl, i), j = i + 1;
        double cost = r->op_cost[i];
        while (j < m->nops && sb_pipeline_stage_of(pl, j) == st && m->ops[j].kind == m->ops[i].kind
               && m->ops[j].ndims == m->ops[i].ndims
               && !memcmp(pcfg(r, i), pcfg(r, j), (size_t)m->ops[i].ndims * sizeof(int))) {
            int same = 1;
            for (int d = 0; d < m->ops[i].ndims; d++)
                same = same && !strcmp(m->ops[i].dims[d].name, m->ops[j].dims[d].name);
            if (!same)
                break;
            cost += r->op_cost[j++];
        }
        char name[256], dims[1024], cfg[256];
        if (j - i == 1)
            snprintf(name, sizeof name, "%s", m->ops[i].name);
        else
            snprintf(name, sizeof name, "%s .. %s (%d)", m->ops[i].name, m->ops[j - 1].name, j - i);
        sb_op_dims_str(&m->ops[i], dims, sizeof dims);
        sb_config_str(pcfg(r, i), m->ops[i].ndims, cfg, sizeof cfg);
        fprintf(f, "%-5d %-36s %-12s %-44s %-22s %14.6e\n", st, name, sb_op_kind_name(m->ops[i].kind),
                dims, cfg, cost);
        i = j;
    }
    double sum = 0.0, mx = 0.0;
    for (int s = 0; s < S; s++)
        sum += r->stage_time[s], mx = fmax(mx, r->stage_time[s]);
    fprintf(f, "step cost %.6e FLOP = sum_s t_s %.6e + (M-1) x max_s t_s %.6e (bubble %.1f%% of "
               "the step)\n", r->step_cost, sum, (M - 1) * mx,
            r->step_cost > 0 ? 100.0 * (r->step_cost - M * sum / S) / r->step_cost : 0.0);
    fprintf(f, "search %.4f s; %ld (S, M, schedule) tried, %ld skipped by the cost bound; %ld stage "
               "DPs, %ld stage costs from the cache, %ld stage ranges bounded out%s\n",
            r->seconds, r->combos, r->combos_skipped, r->subproblems, r->cache_hits,
            r->ranges_bounded, r->ranges_over_tables ? " (some stage DPs not run: tables over "
                                                       "--max-table-mb)"
                               : r->ranges_given_up ? " (some stage DPs over their label budget)"
                                                    : "");
    if (po->mem_limit > 0)
        fprintf(f, "predicted peak memory %.4g GiB per device, within --memory %.4g GiB\n",
                r->peak_bytes / 1073741824.0, po->mem_limit / 1073741824.0);
    else
        fprintf(f, "predicted peak memory %.4g GiB per device\n", r->peak_bytes / 1073741824.0);
    if (r->copies_reused || r->lazy_rounds)
        fprintf(f, "stage optima taken from fewer micro-batches in flight: %ld; partitions over "
                   "bounds solved: %ld\n", r->copies_reused, r->lazy_rounds);
    if (r->lagrange_stages)
        fprintf(f, "approximate: %ld stage DPs under the limit by Lagrangian relaxation (too large "
                   "for the exact Pareto search): this strategy's stages within %.4g%% of their "
                   "optimum; the least step at most %.4g%% below this one (the largest gap to "
                   "its dual bound of the stages that could lie in a better partition)\n",
                r->lagrange_stages, 100.0 * r->lagrange_stage_gap, 100.0 * r->lagrange_gap);
    if (r->lagrange_stages && (r->ranges_given_up || r->ranges_over_tables))
        fprintf(f, "  (over the stages solved: %ld stage DPs given up or not run are in neither "
                   "bound)\n", r->ranges_given_up + r->ranges_over_tables);
    int nrec = 0, nst = 0;
    for (int i = 0; r->recompute && i < m->nops; i++)
        nrec += r->recompute[i] != 0;
    for (int s = 0; s < S; s++)
        nst += r->stage_recompute[s] != 0;
    fprintf(f, "ZeRO stage %d; optimizer %s; recomputed ops: %d\n", r->zero,
            sb_optimizer_name(po->opt), nrec);
    if (cp->recompute || nrec) /* every stage's, as the stage DPs priced them */
        print_recompute_line(f, m, chooses_rc(po, cp) ? SB_RECOMPUTE_AUTO : cp->recompute,
                             pipe_recomputed, r->recompute);
    if (chosen(po, cp)) { /* said only where the search chose (under a limit) */
        fprintf(f, "chosen within --memory:");
        if (po->choose_zero)
            fprintf(f, " ZeRO stage %d (of 0-3; searched %d: 0 and 1 cost what 2 costs and need no "
                       "less memory)%s", r->zero, r->zero_searched,
                    chooses_rc(po, cp) ? ";" : "");
        if (chooses_rc(po, cp)) {
            fprintf(f, " recomputing stages %d of %d", nst, S);
            for (int s = 0, k = 0; s < S; s++)
                if (r->stage_recompute[s])
                    fprintf(f, "%s%d", k++ ? "," : " (", s);
            fprintf(f, "%s; %ld stage DPs recomputing, %ld not needed (kept at most its least "
                       "cost)", nst ? ")" : "", r->rc_solved, r->rc_dominated);
        }
        fputc('\n', f);
    }
    if (has_time(cp))
        fprintf(f, "predicted step time %.4g s (%s%s%s: cost / (F x 1e12))\n",
                pipe_seconds(cp, r->step_cost), cp->machine[0] ? cp->machine : cp->calibration,
                cp->machine[0] ? " at " : "", cp->machine[0] ? sb_precision_name(cp->precision) : "");
    if (cp->node_devices > 0) { /* the JSON's mesh_to_nodes summed */
        int n[3] = {0, 0, 0}, inside = 0, sw[3] = {0, 0, 0};
        for (int i = 0; i < m->nops; i++)
            json_decref(pipe_op_mesh(m, cp, r, i, n, &inside));
        for (int s = 0; s < S; s++) {
            const char *w = stage_mesh_word(cp, pl, s);
            sw[!strcmp(w, "intra") ? 0 : !strcmp(w, "inter") ? 1 : 2]++;
        }
        fprintf(f, "mesh to nodes (%d devices a node): stages intra %d, inter %d, both %d; split "
                   "dims intra %d, inter %d, both %d; %d of %d ops inside one node\n",
                cp->node_devices, sw[0], sw[1], sw[2], n[0], n[1], n[2], inside, m->nops);
    }
}

static json_t *pipe_json(const sb_model *m, int p, const sb_cost_params *cp,
                         const sb_pipe_opts *po, const sb_pipe_result *r, const char *algo)
{
    const sb_pipeline *pl = &r->pipe;
    json_t *params = json_object(), *ops = json_array(), *stages = json_array();
    for (int i = 0; i < m->nparams; i++)
        json_object_set_new(params, m->params[i].name, json_integer(m->params[i].value));
    json_t *j = json_pack("{s:s, s:o, s:i, s:s, s:s, s:o, s:o, s:i}", "model", m->name, "params",
                          params, "p", p, "algo", algo, "space", "full", "flops_tflops",
                          cli_jreal(cp->tflops), "bw_gbs", cli_jreal(cp->gbs), "cutoff",
                          cp->cutoff > 0 ? cp->cutoff : m->cutoff);
    if (!j) {
        json_decref(ops), json_decref(stages);
        return NULL;
    }
    json_object_set_new(j, "total_cost", cli_jreal(r->step_cost));
    {   /* every weight, tied ones once; and what one token uses (MoE) */
        int64_t active, total = sb_model_param_count(m, &active);
        json_object_set_new(j, "parameter_count", json_integer((json_int_t)total));
        json_object_set_new(j, "active_parameter_count", json_integer((json_int_t)active));
    }
    if (has_time(cp)) {
        json_object_set_new(j, "machine", json_string(cp->machine));
        json_object_set_new(j, "predicted_step_seconds", cli_jreal(pipe_seconds(cp, r->step_cost)));
        if (cp->machine[0])
            json_object_set_new(j, "precision", json_string(sb_precision_name(cp->precision)));
        if (cp->gpu_sms > 0) /* how many attentions were priced as one fused kernel */
            json_object_set_new(j, "fused_attentions", json_integer(sb_model_fused_attentions(m)));
        double tps, tfl, mfu;
        if (cp->machine[0] && sb_mt_throughput(m, p, pipe_seconds(cp, r->step_cost),
                                               cp->gpu_peak_tflops, &tps, &tfl, &mfu)) {
            json_object_set_new(j, "predicted_tokens_per_second", cli_jreal(tps));
            json_object_set_new(j, "predicted_tflops_per_device", cli_jreal(tfl));
            json_object_set_new(j, "predicted_mfu", cli_jreal(mfu));
        }
        double parts[SB_BD_PARTS];
        sb_error e2 = {0};
        if (cp->machine[0]) { /* the step in --algo megatron's parts (breakdown.h) */
            if (sb_pipe_breakdown(m, cp, r, parts, &e2)) {
                fprintf(stderr, "shardbench: %s\n", e2.msg);
                json_decref(j), json_decref(ops), json_decref(stages);
                return NULL;
            }
            json_t *bd = json_object();
            for (int k = 0; k < SB_BD_PARTS; k++)
                json_object_set_new(bd, sb_breakdown_names[k], cli_jreal(pipe_seconds(cp, parts[k])));
            json_object_set_new(j, "time_breakdown_seconds", bd);
        }
    }
    for (int s = 0; s < pl->nstages; s++) {
        char *sj = sb_stage_json_str(m, pl, s);
        json_t *st = sj ? json_loads(sj, 0, NULL) : NULL;
        free(sj);
        if (st) {
            json_object_set_new(st, "time_per_microbatch", cli_jreal(r->stage_time[s]));
            json_object_set_new(st, "p2p_cost", cli_jreal(r->stage_p2p[s]));
            json_object_set_new(st, "in_flight", json_integer(r->inflight[s]));
            json_object_set_new(st, "peak_bytes", cli_jreal(r->stage_mem[s]));
            json_object_set_new(st, "recompute", json_boolean(r->stage_recompute[s]));
        }
        if (st && cp->node_devices > 0) { /* the stage's one mesh axis on the nodes */
            json_t *axes = json_array();
            json_array_append_new(axes, json_string(stage_mesh_word(cp, pl, s)));
            json_object_set_new(st, "mesh_to_nodes", axes);
        }
        json_array_append_new(stages, st);
    }
    json_object_set_new(j, "stages", stages);
    json_object_set_new(j, "microbatches", json_integer(pl->microbatches));
    json_object_set_new(j, "schedule", json_string(sb_schedule_name(pl->schedule)));
    json_object_set_new(j, "zero", json_integer(r->zero));
    if (chosen(po, cp)) { /* what the search chose rather than was given */
        json_object_set_new(j, "zero_searched", json_boolean(po->choose_zero));
        json_object_set_new(j, "recompute_searched", json_boolean(chooses_rc(po, cp)));
    }
    json_object_set_new(j, "optimizer", json_string(sb_optimizer_name(po->opt)));
    json_t *rec = json_array();
    for (int i = 0; r->recompute && i < m->nops; i++)
        if (r->recompute[i])
            json_array_append_new(rec, json_string(m->ops[i].name));
    json_object_set_new(j, "recompute", rec);
    json_object_set_new(j, "peak_bytes_per_device", cli_jreal(r->peak_bytes));
    if (po->mem_limit > 0)
        json_object_set_new(j, "memory_limit_bytes", cli_jreal(po->mem_limit));
    if (r->stage_cap_fallback) { /* only this S searched: no S had P/S within the cap */
        json_object_set_new(j, "stage_cap_fallback", json_integer(r->stage_cap_fallback));
        json_object_set_new(j, "max_stage_devices", json_integer(po->max_stage_devices));
    }
    if (r->ranges_over_tables) { /* stage DPs left out: the result is the best of the rest */
        json_object_set_new(j, "stage_dps_over_table_limit", json_integer(r->ranges_over_tables));
        json_object_set_new(j, "stage_table_bound_bytes", cli_jreal(r->table_bound_bytes));
    }
    if (r->lagrange_stages) { /* approximate: the step's gap to the optimum at most this */
        json_object_set_new(j, "lagrange_stages", json_integer(r->lagrange_stages));
        json_object_set_new(j, "lagrange_gap", cli_jreal(r->lagrange_gap));
        json_object_set_new(j, "lagrange_stage_gap", cli_jreal(r->lagrange_stage_gap));
    }
    int placed[3] = {0, 0, 0}, inside = 0;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        json_t *dims = json_array(), *config = json_array();
        for (int d = 0; d < op->ndims; d++) {
            json_array_append_new(dims, json_pack("{s:s, s:I}", "name", op->dims[d].name, "size",
                                                  (json_int_t)op->dims[d].size));
            json_array_append_new(config, json_integer(pcfg(r, i)[d]));
        }
        json_t *o = json_pack("{s:s, s:s, s:i, s:o, s:o, s:o}", "name", op->name, "type",
                              sb_op_kind_name(op->kind), "stage", sb_pipeline_stage_of(pl, i),
                              "dims", dims, "config", config, "cost", cli_jreal(r->op_cost[i]));
        if (o && cp->node_devices > 0) /* as the plain JSON: with a machine file */
            json_object_set_new(o, "mesh_to_nodes", pipe_op_mesh(m, cp, r, i, placed, &inside));
        json_array_append_new(ops, o);
    }
    if (cp->node_devices > 0)
        json_object_set_new(j, "mesh_to_nodes",
                            json_pack("{s:i, s:i, s:i, s:i, s:i, s:i}", "devices_per_node",
                                      cp->node_devices, "intra", placed[0], "inter", placed[1],
                                      "both", placed[2], "ops_inside_one_node", inside,
                                      "ops_across_nodes", m->nops - inside));
    json_object_set_new(j, "ops", ops);
    return j;
}

static int pipe_save(const char *path, const sb_model *m, int p, const sb_cost_params *cp,
                     const sb_pipe_result *r, const char *algo, sb_error *err)
{
    sb_strategy st;
    if (sb_strategy_from_pipe(&st, m, p, r, algo, cp->machine[0] ? cp->precision : 0, err))
        return -1;
    int rc = sb_strategy_save(path, m, &st, err);
    sb_strategy_free(&st);
    return rc;
}

static int pipe_record(const char *db_path, int adopt, const sb_model *m, int p,
                       const sb_cost_params *cp, const char *algo, const sb_pipe_result *r,
                       const char *json, sb_error *err)
{
    if (!db_path || !strcmp(db_path, "none"))
        return 0;
    sb_db *db;
    if (sb_db_open_flags(db_path, 0, adopt ? SB_DB_ADOPT : 0, &db, err))
        return -1;
    char params[4096];
    sb_params_str(m, params, sizeof params);
    sb_search_record rec = {
        .source = "cli", .model = m->name, .model_path = m->path, .params = params, .p = p,
        .algo = algo, .tflops = cp->tflops, .gbs = cp->gbs,
        .cutoff = cp->cutoff > 0 ? cp->cutoff : m->cutoff, .total_cost = r->step_cost,
        .seconds = r->seconds, .nops = m->nops, .peak_rss_bytes = (double)sb_peak_rss(),
        .strategy_json = json ? json : "{}",
    };
    int rc = sb_db_record_search(db, &rec, NULL, err);
    sb_db_close(db);
    return rc;
}

/* The full space's answer when Megatron-LM's grid wins: printed, saved,
 * drawn and recorded (its step in the op-level search's FLOP units, the
 * search's algo, its JSON). op_err: the op-level search's error, or NULL. */
static int grid_answer(const shared_opts *so, const cli_grid *g, const sb_model *m,
                       const sb_pipe_result *op, const char *op_err, double op_secs,
                       const char *algo, const char *format,
                       const char *save, const char *db, int adopt_db, const char *plot)
{
    sb_error err = {0};
    char *js = NULL;
    if (save)
        fputs(CLI_GRID_SAVE_NOTE, stderr);
    if (cli_grid_answer(g, m, so->p, algo, format, plot, save, op,
                        op_err ? 0.0 : pipe_seconds(&so->cp, op->step_cost), op_err, &js, &err)) {
        free(js);
        return cli_fail(&err);
    }
    fflush(stdout);
    int status = 0;
    if (db && strcmp(db, "none")) {
        sb_db *d;
        char params[4096];
        sb_params_str(m, params, sizeof params);
        sb_search_record rec = {
            .source = "cli", .model = m->name, .model_path = m->path, .params = params,
            .p = so->p, .algo = g->best.vpp == 1 ? algo : "megatron", .tflops = so->cp.tflops, .gbs = so->cp.gbs,
            .cutoff = so->cp.cutoff > 0 ? so->cp.cutoff : m->cutoff,
            .total_cost = g->r.step_s * so->cp.tflops * 1e12, .seconds = g->secs + op_secs,
            .nops = m->nops, .peak_rss_bytes = (double)sb_peak_rss(), .strategy_json = js,
        };
        if (sb_db_open_flags(db, 0, adopt_db ? SB_DB_ADOPT : 0, &d, &err)) {
            status = cli_fail(&err);
        } else {
            if (sb_db_record_search(d, &rec, NULL, &err))
                status = cli_fail(&err);
            sb_db_close(d);
        }
    }
    free(js);
    return status;
}

/* The full space without --memory is held to no limit (ZeRO 0 and nothing
 * recomputed are optimal then): an answer over the device says so. */
static void warn_full_memory(const shared_opts *so, const sb_pipe_opts *po, double peak)
{
    if (po->mem_limit > 0 || !(so->device_gib > 0) || !(peak > so->device_gib * 1073741824.0))
        return;
    fprintf(stderr, "shardbench: warning: predicted peak memory %.2f GiB per device is over the "
                    "device's %g GiB: without --memory the search is not held to it (--memory "
                    "%gGiB is)\n", peak / 1073741824.0, so->device_gib, so->device_gib);
}

/* search --space full: the pipeline search (search/pipeline.c) and its output. */
static int search_full(const shared_opts *so, const sb_pipe_opts *po, const char *algo,
                       const char *format, const char *save, const char *db, int adopt_db,
                       const char *plot, int use_grid /* 0 off, 1 on, 2 on as asked */)
{
    sb_error err = {0};
    sb_model m;
    if (sb_model_load(so->model, so->set, so->nset, &m, &err))
        return cli_fail(&err);
    if (shared_opts_fuse(so, &m, &err)) {
        sb_model_free(&m);
        return cli_fail(&err);
    }
    static cli_grid grid; /* Megatron-LM's grid, the other half of the space (full_grid.h) */
    cli_grid_search(so, po, save != NULL, !use_grid ? "--megatron-grid off"
                                          : !strcmp(format, "tsv") ? "--format tsv (the op-level "
                                            "search's per-op configs)" : NULL, &m, &grid);
    if (use_grid == 2 && !grid.searched) { /* --megatron-grid on, and it cannot be */
        sb_fail(&err, SB_EXIT_INPUT, "--megatron-grid on: the grid cannot be searched here: %s",
                grid.why);
        sb_model_free(&m);
        return cli_fail(&err);
    }
    sb_pipe_result r;
    int status = 0;
    int prc = sb_pipe_search(&m, so->p, &so->cp, po, &r, &err);
    if (grid.found && (prc ? r.none_found : grid.r.step_s < pipe_seconds(&so->cp, r.step_cost))) {
        status = grid_answer(so, &grid, &m, &r, prc ? err.msg : NULL, prc ? 0.0 : r.seconds, algo,
                             format, save, db,
                             adopt_db, plot);
        if (!status)
            warn_full_memory(so, po, grid.r.mem_total);
        if (!prc)
            sb_pipe_result_free(&r);
        sb_model_free(&m);
        return status;
    }
    if (prc) {
        status = cli_fail(&err);
        if (grid.found)
            fprintf(stderr, "shardbench: megatron grid: %.4g s found, not compared: the op-level "
                            "search failed\n", grid.r.step_s);
        else if (grid.searched)
            fprintf(stderr, "shardbench: megatron grid: %s\n", grid.why);
        sb_model_free(&m);
        return status;
    }
    if (r.ranges_over_tables)
        fprintf(stderr, "shardbench: %ld stage DPs not run: their tables bounded at up to %.0f MB, "
                        "over --max-table-mb %.4g; the strategy is the best of the other stage "
                        "shapes (--max-table-mb %.0f searches them all)\n", r.ranges_over_tables,
                r.table_bound_bytes / 1e6, po->dp.max_table_mb > 0 ? po->dp.max_table_mb : 4096.0,
                ceil(r.table_bound_bytes / 1e6));
    if (r.stage_cap_fallback)
        fprintf(stderr, "shardbench: no stage count S has P/S <= --max-stage-devices %d (%d cut "
                        "segments, at most %d stages): searched S = %d alone, stages of %d devices\n",
                po->max_stage_devices, r.cuts + 1, SB_MAX_STAGES, r.stage_cap_fallback,
                so->p / r.stage_cap_fallback);
    if (so->cp.gpu_sms > 0 && !strcmp(format, "tsv"))
        fprintf(stderr, "shardbench: megatron grid: not searched: %s\n", grid.why);
    json_t *j = pipe_json(&m, so->p, &so->cp, po, &r, algo);
    if (j && so->cp.gpu_sms > 0) { /* the op-level strategy is the answer */
        json_object_set_new(j, "answer", json_string("op_level"));
        json_object_set_new(j, "megatron_grid", cli_grid_json(&grid));
    }
    if (j && cli_search_details(j, &m, &so->cp, po, &r, so->device_gib, &err)) {
        status = cli_fail(&err);
        json_decref(j);
        sb_pipe_result_free(&r);
        sb_model_free(&m);
        return status;
    }
    char *js = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (!strcmp(format, "json")) {
        if (js)
            fputs(js, stdout);
        fputc('\n', stdout);
    } else if (!strcmp(format, "tsv")) {
        printf("op\ttype\tdims\tconfig\tcost\tstage\n");
        for (int i = 0; i < m.nops; i++) {
            char dims[1024], cfg[256];
            sb_op_dims_str(&m.ops[i], dims, sizeof dims);
            sb_config_str(pcfg(&r, i), m.ops[i].ndims, cfg, sizeof cfg);
            printf("%s\t%s\t%s\t%s\t%.17g\t%d\n", m.ops[i].name, sb_op_kind_name(m.ops[i].kind),
                   dims, cfg, r.op_cost[i], sb_pipeline_stage_of(&r.pipe, i));
        }
        printf("#total\t\t\t\t%.17g\n", r.step_cost);
    } else {
        print_pipe_table(stdout, &m, so->p, &so->cp, po, &r, algo);
        if (so->cp.gpu_sms > 0)
            cli_grid_print_line(stdout, &grid);
    }
    fflush(stdout);
    if (save && pipe_save(save, &m, so->p, &so->cp, &r, algo, &err))
        status = cli_fail(&err);
    if (!status && plot && !js) {
        sb_fail(&err, SB_EXIT_INTERNAL, "out of memory");
        status = cli_fail(&err);
    } else if (!status && plot && cli_search_plot(plot, js, &err)) {
        status = cli_fail(&err);
    }
    if (pipe_record(db, adopt_db, &m, so->p, &so->cp, algo, &r, js, &err)) {
        int s2 = cli_fail(&err);
        if (!status)
            status = s2;
    }
    if (!status)
        warn_full_memory(so, po, r.peak_bytes);
    free(js);
    json_decref(j);
    sb_pipe_result_free(&r);
    sb_model_free(&m);
    return status;
}

/* ---- search ------------------------------------------------------------------ */

/* The shipped models (sb_shipped_models: the model files found), wrapped
 * after a 25-column indent. */
static void print_shipped(FILE *f)
{
    int col = 25;
    char **names = sb_shipped_models();
    fprintf(f, "%25s", "");
    for (int i = 0; names && names[i]; i++) {
        int w = (int)strlen(names[i]) + (names[i + 1] ? 2 : 0);
        if (col + w > 92 && col > 25) {
            fprintf(f, "\n%25s", "");
            col = 25;
        }
        fprintf(f, "%s%s", names[i], names[i + 1] ? ", " : "");
        col += w;
    }
    sb_names_free(names);
    fputc('\n', f);
}

static void search_usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench search -m MODEL -p P [options]\n"
            "\n"
            "Finds the least-cost strategy (one config per op) with PaSE's exact DP.\n"
            "\n"
            "  -m, --model MODEL      a model file path or a shipped model name:\n");
    print_shipped(f);
    fprintf(f,
            "  -p, --procs P          device count\n"
            "      --set NAME=VALUE   override a model parameter (repeatable)\n"
            "      --algo ALGO        pase (DP in GenerateSeq order, repeated layers'\n"
            "                         interiors first; default), bf (DP in\n"
            "                         breadth-first order), dp (data parallel), expert,\n"
            "                         mcmc (FlexFlow-style), candidates (best mesh x layout),\n"
            "                         megatron (Megatron-LM's TP x PP x DP x CP x EP grid on a\n"
            "                         GPU machine: search --algo megatron --help)\n"
            "      --budget N         mcmc: iterations (default 200000)\n"
            "      --time-limit S     mcmc: seconds at most (default 60)\n"
            "      --seed N           mcmc: random seed (default 1)\n"
            "      --temperature T    mcmc: relative temperature (default 0.005)\n"
            "      --memory LIMIT     device memory (80GiB, 141GB, 512MiB; a bare number is\n"
            "                         GiB): pase and bf find the least-cost strategy whose\n"
            "                         predicted peak fits, or say that none does and the\n"
            "                         least memory of any\n"
            "      --device-mem GIB   device memory; a strategy over it is only reported\n"
            "                         (default 80, or the machine file's)\n"
            "      --optimizer sgd|adam   optimizer state in the memory model (default sgd;\n"
            "                         adam with a GPU machine file, as --algo megatron)\n"
            "      --recompute none|auto|all  (--algo megatron: none|selective|full, full = all)\n"
            "                         activation recomputation in the memory and\n"
            "                         cost models (default none): all recomputes every op\n"
            "                         but the loss and LSTMs (one more forward each, a third\n"
            "                         of its cost; only outputs and input gradients kept);\n"
            "                         auto lets the search within --memory (default 80GiB)\n"
            "                         choose per op (plain space only); with --space full\n"
            "                         all recomputes every op of every stage, each stage\n"
            "                         keeping the inputs it received, none recomputes\n"
            "                         nothing, and auto (or no --recompute) lets the search\n"
            "                         choose none or all per stage within --memory\n"
            "      --zero 0|1|2|3     ZeRO stage (as run --zero) in the memory model, and\n"
            "                         stage 3's weight all-gather in the cost (default 0;\n"
            "                         --space full with --memory: searched when not given)\n"
            "      --format table|json|tsv   output (default table)\n"
            "      --save FILE        write the strategy file (read by run and bench)\n"
            "      --dot FILE         write the graph with chosen configs (Graphviz)\n"
            "      --plot DIR         full: the figures of `plot --search` (memory per stage,\n"
            "                         step time, schedule, configs; PNG and SVG) into DIR\n"
            "      --db FILE          results database (default %s; 'none' to skip)\n"
            "      --adopt-db         record into an SQLite file that holds another\n"
            "                         program's tables (refused otherwise)\n"
            "      --flops F          peak TFLOP/s per device (default 10)\n"
            "      --bw B             link GB/s (default 16)\n"
            "      --calibration FILE the calibrated cost model: F, B, word size, elementwise\n"
            "                         cost and latency measured by `shardbench calibrate`\n"
            "      --machine NAME|FILE  a machine file (h200-sxm, h100-sxm, a100-sxm-80g, or a\n"
            "                         path): the peak of --precision, intra- and inter-node links, and the\n"
            "                         default --device-mem (docs/machines.md); with profiles\n"
            "                         of it in the database (shardbench profile), the\n"
            "                         predictive model: measured seconds per op config\n"
            CLI_PRECISION_HELP
            "      --profiles DB|none where --machine's profiles are read (default\n"
            "                         results/shardbench.db; none: the analytic terms)\n"
            "      --cutoff N         minimum shard size (default: the model's)\n"
            "      --max-table-mb MB  DP table memory limit (default 4096; a search whose\n"
            "                         tables are bounded over it is refused at once)\n"
            "      --megatron-grid on|off  full, a GPU machine: also search Megatron-LM's grid\n"
            "                         (--algo megatron: interleaved 1F1B, bucketed overlap,\n"
            "                         CP, EP) and answer with the faster (default on)\n"
            "      --dp-overlap on|off  a GPU machine: the weight-gradient reduction\n"
            "                         overlapped with the backward, exposed only past the\n"
            "                         op's backward compute (default on, as --algo megatron)\n"
            "      --attention fused|materialized  a GPU machine: a softmax between two\n"
            "                         einsums priced as one FlashAttention-style kernel, no\n"
            "                         S x S tensor kept (default fused, as --algo megatron)\n"
            "      --prune            pase, bf: drop dominated configs first (the same\n"
            "                         optimum; search/README.md says when it pays)\n"
            "      --space plain|full plain: one config per op on all P devices (PaSE's space);\n"
            "                         full: also pipeline stages, micro-batches and schedule\n"
            "                         (implied by --stages, --microbatches, --schedule, --zero\n"
            "                         and --memory)\n"
            "      --stages S         full: force S pipeline stages of P/S devices (--algo\n"
            "                         megatron: the same as --pp; --zero 1 there is the\n"
            "                         distributed optimizer)\n"
            "      --microbatches M   full: force M micro-batches (M divides the batch)\n"
            "      --schedule gpipe|1f1b   full: force the schedule\n"
            "      --max-stage-devices N   full: searched S only with P/S <= N (default 64:\n"
            "                         the intra-op DP of larger stages takes minutes;\n"
            "                         no S within it: the largest S possible, said so)\n"
            "      --ranks auto|block|cyclic  plain, pase and bf with a machine file of more\n"
            "                         than one node: where the ranks lie (block: rank r on node\n"
            "                         r / devices-per-node; cyclic: on node r mod nodes; auto,\n"
            "                         the default: the search takes the cheaper, block on a tie)\n"
            "      --threads N        the DP's threads at most (default 0: the CPUs this\n"
            "                         process may use, also the cap; 1: less CPU time on a\n"
            "                         shared machine); the same strategy for any N\n"
            "      --stage-threads N   full: each stage DP's threads at most (default 0: as\n"
            "                         --threads)\n"
            "  -h, --help\n",
            SB_DB_DEFAULT_PATH);
}

/* search's options (the plain and full spaces; --algo megatron has its own). */
typedef struct {
    shared_opts so;
    sb_pipe_opts po;
    const char *format, *save, *dot, *plot, *db, *algo;
    int adopt_db;
    int space;               /* -1 as implied, 0 plain, 1 full */
    int zero_given, rc_opt_given;
    int rank_order;          /* --ranks: -1 auto (chosen), 0 block, 1 cyclic */
    int dp_overlap;          /* --dp-overlap: -1 the default (on with a GPU machine), 0, 1 */
    int grid;                /* --megatron-grid: -1 the default (on with a GPU machine), 0, 1 */
    int opt_given;           /* --optimizer given (else Adam with a GPU machine, as megatron) */
} search_args;

/* More threads than the CPUs this process may use only share those CPUs
 * (the fill is CPU-bound: 8 threads on 2 cores ran 6% slower than 2): the
 * count is capped there, and stderr says so. The library takes any count
 * (sb_search_opts.threads; test_dp runs 3 and 8 on any machine). */
static void cap_threads(const char *what, int *threads)
{
    int cpus = sb_dp_default_threads();
    if (*threads > cpus) {
        fprintf(stderr, "shardbench search: %s %d: this process may use %d CPU%s; %d thread%s\n",
                what, *threads, cpus, cpus == 1 ? "" : "s", cpus, cpus == 1 ? "" : "s");
        *threads = cpus;
    }
}

/* The options into *a: -1 to go on, else the exit status (0 after --help,
 * 2 with the reason on stderr). */
/* on|off into *out (1|0); else -1 with err naming the option. */
static int on_off(const char *opt, const char *v, int *out, sb_error *err)
{
    if (strcmp(v, "on") && strcmp(v, "off"))
        return sb_fail(err, SB_EXIT_INPUT, "%s: '%s' is not on or off", opt, v);
    *out = !strcmp(v, "on");
    return 0;
}

static int parse_search_args(int argc, char **argv, search_args *a)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},  {"procs", required_argument, 0, 'p'},
        {"set", required_argument, 0, 's'},    {"algo", required_argument, 0, 'a'},
        {"format", required_argument, 0, 'f'}, {"save", required_argument, 0, 'S'},
        {"dot", required_argument, 0, 'D'},    {"db", required_argument, 0, 'd'},
        {"flops", required_argument, 0, 'F'},  {"bw", required_argument, 0, 'B'},
        {"cutoff", required_argument, 0, 'c'}, {"max-table-mb", required_argument, 0, 'M'},
        {"budget", required_argument, 0, 'n'}, {"time-limit", required_argument, 0, 't'},
        {"seed", required_argument, 0, 'e'},   {"temperature", required_argument, 0, 'T'},
        {"device-mem", required_argument, 0, 'G'}, {"zero", required_argument, 0, 'Z'},
        {"optimizer", required_argument, 0, 'o'}, {"memory", required_argument, 0, 'L'},
        {"recompute", required_argument, 0, SB_OPT_RECOMPUTE},
        {"prune", no_argument, 0, 'U'},
        {"space", required_argument, 0, 1001}, {"stages", required_argument, 0, 1002},
        {"microbatches", required_argument, 0, 1003}, {"schedule", required_argument, 0, 1004},
        {"max-stage-devices", required_argument, 0, 1005},
        {"stage-threads", required_argument, 0, 1006}, {"threads", required_argument, 0, 1008},
        {"ranks", required_argument, 0, 1007}, {"plot", required_argument, 0, 1009},
        {"dp-overlap", required_argument, 0, 1010}, {"megatron-grid", required_argument, 0, 1011},
        {"calibration", required_argument, 0, 'K'}, {"machine", required_argument, 0, 'H'}, {"profiles", required_argument, 0, 'Q'},
        CLI_PRECISION_OPTS, CLI_ATTENTION_OPT, {"adopt-db", no_argument, 0, 'O'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0},
    };
    sb_error err = {0};
    memset(a, 0, sizeof *a);
    shared_opts_default(&a->so);
    a->format = "table";
    a->db = SB_DB_DEFAULT_PATH;
    a->algo = "pase";
    a->space = -1;
    a->rank_order = -1;
    a->dp_overlap = -1;
    a->grid = -1;
    sb_pipe_opts_default(&a->po);
    a->po.max_stage_devices = 64;
    a->po.threads = 0; /* as --threads: the CPUs this process may use */
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:p:h", opts, NULL)) != -1) {
        int rc = shared_opt(&a->so, c, optarg, &err);
        if (c == 'Z')
            a->zero_given = 1;
        if (c == SB_OPT_RECOMPUTE)
            a->rc_opt_given = 1;
        if (c == 'o')
            a->opt_given = 1;
        if (rc == 0) /* not a shared option */
            switch (c) {
            case 'a':
                a->algo = optarg;
                if (!algo_known(optarg))
                    rc = sb_fail(&err, SB_EXIT_INPUT,
                                 "--algo: '%s' is not pase, bf, dp, expert, mcmc, candidates or megatron",
                                 optarg);
                break;
            case 'f':
                a->format = optarg;
                if (strcmp(a->format, "table") && strcmp(a->format, "json") && strcmp(a->format, "tsv"))
                    rc = sb_fail(&err, SB_EXIT_INPUT, "--format: '%s' is not table, json or tsv",
                                 optarg);
                break;
            case 'S': a->save = optarg; break;
            case 1009: a->plot = optarg; break;
            case 1010: rc = on_off("--dp-overlap", optarg, &a->dp_overlap, &err); break;
            case 1011: rc = on_off("--megatron-grid", optarg, &a->grid, &err); break;
            case 'D': a->dot = optarg; break;
            case 'd': a->db = optarg; break;
            case 'O': a->adopt_db = 1; break;
            case 1001:
                if (strcmp(optarg, "plain") && strcmp(optarg, "full"))
                    rc = sb_fail(&err, SB_EXIT_INPUT, "--space: '%s' is not plain or full", optarg);
                a->space = !strcmp(optarg, "full");
                break;
            case 1002: rc = parse_int_opt(optarg, "--stages", 1, SB_MAX_STAGES, &a->po.stages, &err); break;
            case 1003:
                rc = parse_int_opt(optarg, "--microbatches", 1, 1 << 20, &a->po.microbatches, &err);
                break;
            case 1004: {
                sb_schedule sc;
                if (sb_schedule_parse(optarg, &sc))
                    rc = sb_fail(&err, SB_EXIT_INPUT, "--schedule: '%s' is not gpipe or 1f1b", optarg);
                a->po.schedule = (int)sc;
                break;
            }
            case 1005:
                rc = parse_int_opt(optarg, "--max-stage-devices", 1, 65536, &a->po.max_stage_devices, &err);
                break;
            case 1006:
                rc = parse_int_opt(optarg, "--stage-threads", 0, 256, &a->po.threads, &err);
                cap_threads("--stage-threads", &a->po.threads);
                break;
            case 1008:
                rc = parse_int_opt(optarg, "--threads", 0, 256, &a->so.ao.dp.threads, &err);
                cap_threads("--threads", &a->so.ao.dp.threads);
                break;
            case 1007:
                if (!strcmp(optarg, "auto"))
                    a->rank_order = -1;
                else if (!strcmp(optarg, "block"))
                    a->rank_order = 0;
                else if (!strcmp(optarg, "cyclic"))
                    a->rank_order = 1;
                else
                    rc = sb_fail(&err, SB_EXIT_INPUT, "--ranks: '%s' is not auto, block or "
                                 "cyclic", optarg);
                break;
            case 'h': search_usage(stdout); return 0;
            default: search_usage(stderr); return 2;
            }
        if (rc < 0)
            return cli_fail(&err);
    }
    if (optind < argc) {
        fprintf(stderr, "shardbench search: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (shared_opts_calibrate(&a->so, &err))
        return cli_fail(&err);
    /* the weight-gradient reduction overlapped with the backward: a GPU machine's
     * default (as Megatron-LM runs it); never in the reference model */
    if (a->dp_overlap >= 0 && !(a->so.cp.gpu_sms > 0)) {
        sb_fail(&err, SB_EXIT_INPUT, "--dp-overlap: needs a GPU machine file (--machine with "
                "the GPU op model's figures, docs/machines.md)");
        return cli_fail(&err);
    }
    a->so.cp.dp_overlap = a->so.cp.gpu_sms > 0 && a->dp_overlap != 0;
    if (a->grid == 1 && !(a->so.cp.gpu_sms > 0)) {
        sb_fail(&err, SB_EXIT_INPUT, "--megatron-grid on: needs a GPU machine file (the grid "
                "is priced by the GPU op model, docs/machines.md)");
        return cli_fail(&err);
    }
    /* a GPU machine trains with Adam unless told (the memory model's optimizer
     * state; --algo megatron prices Adam too) */
    if (a->so.cp.gpu_sms > 0 && !a->opt_given)
        a->so.ao.opt = SB_OPTIM_ADAM;
    if (!a->so.model || !a->so.p) {
        fprintf(stderr, "shardbench search: -m MODEL and -p P are required\n\n");
        search_usage(stderr);
        return 2;
    }
    return -1;
}

/* The plain space: one search by --algo, printed, saved and recorded. */
static int search_plain(search_args *a)
{
    sb_error err = {0};
    sb_model m;
    sb_problem pb;
    a->so.cp.node_order = a->rank_order == 1;
    if (!strcmp(a->algo, "pase") || !strcmp(a->algo, "bf")) { /* the exact DP: bounded first */
        a->so.refuse_tables = 1;
        a->so.ao.dp.algo = !strcmp(a->algo, "bf") ? SB_ALGO_BF : SB_ALGO_PASE;
    }
    if (shared_opts_problem(&a->so, &m, &pb, &err))
        return cli_fail(&err);
    sb_result r;
    int status = 0;
    if (a->rank_order == 1 && !sb_node_order_possible(&pb.cp)) {
        sb_fail(&err, SB_EXIT_INPUT, "--ranks cyclic: needs a machine file whose nodes p = %d "
                "fills, more than one (devices per node: %d)", pb.p, pb.cp.node_devices);
        status = cli_fail(&err);
        goto out;
    }
    algo_opts ao = a->so.ao;
    double device_gib = a->so.device_gib;
    ao.mem_limit = device_gib * 1073741824.0;
    ao.mem_bound = a->so.mem_bound || pb.cp.recompute == SB_RECOMPUTE_AUTO;
    if (pb.cp.recompute == SB_RECOMPUTE_AUTO && strcmp(a->algo, "pase") && strcmp(a->algo, "bf")) {
        sb_fail(&err, SB_EXIT_INPUT, "--recompute auto: --algo %s does not choose what to "
                "recompute (pase and bf do; --recompute all works with every algorithm)", a->algo);
        status = cli_fail(&err);
        goto out;
    }
    if (a->so.mem_bound && strcmp(a->algo, "pase") && strcmp(a->algo, "bf") && strcmp(a->algo, "candidates")) {
        sb_fail(&err, SB_EXIT_INPUT,
                "--memory: --algo %s does not search within a memory limit (pase, bf and "
                "candidates do; --device-mem reports one)", a->algo);
        status = cli_fail(&err);
        goto out;
    }
    if (run_algo(&pb, a->algo, &ao, &r, &err)) {
        status = cli_fail(&err);
        goto out;
    }
    if ((!strcmp(a->algo, "pase") || !strcmp(a->algo, "bf")) && sb_node_order_possible(&pb.cp)
        && !pb.cp.profiled && a->rank_order < 0)
        choose_rank_order(&m, &pb, a->algo, &ao, &r);
    {
        sb_mem parts;
        r.peak_bytes_per_device = sb_strategy_memory_rc(&pb, r.choice, r.recompute, ao.opt, &parts);
        double mp[5] = {parts.weights, parts.weight_grads, parts.optimizer,
                        parts.activations + parts.act_grads, parts.scratch};
        memcpy(r.mem_parts, mp, sizeof mp);
        if (pb.cp.machine[0]) { /* the step in --algo megatron's parts */
            sb_plain_breakdown(&pb, &r, r.time_parts);
            r.has_time_parts = 1;
        }
    }
    char *pj = NULL; /* with a machine: the JSON with one stage, for the figures */
    if (pb.cp.machine[0] && (a->plot || !strcmp(a->format, "json")) &&
        !(pj = cli_plain_json(&pb, &r, a->algo, device_gib, &err))) {
        status = cli_fail(&err);
        sb_result_free(&r);
        goto out;
    }
    if (!strcmp(a->format, "json")) {
        if (pj)
            fputs(pj, stdout);
        else
            sb_result_json(stdout, &pb, &r, a->algo);
        fputc('\n', stdout);
    } else if (!strcmp(a->format, "tsv")) {
        print_strategy_tsv(stdout, &pb, &r);
    } else {
        print_strategy_table(stdout, &pb, &r, a->algo);
        if (ao.note)
            fputs(ao.note, stdout);
    }
    fflush(stdout);
    if (pj && a->plot && cli_search_plot(a->plot, pj, &err))
        status = cli_fail(&err);
    free(pj);
    warn_memory(&pb, &r, ao.opt, device_gib);
    if (a->save && sb_result_save(a->save, &pb, &r, a->algo, &err))
        status = cli_fail(&err);
    if (!status && a->dot && write_dot(a->dot, &pb, &r, &err))
        status = cli_fail(&err);
    if (record(a->db, a->adopt_db, "cli", &pb, &r, a->algo, &err)) {
        int s2 = cli_fail(&err);
        if (!status)
            status = s2;
    }
    sb_result_free(&r);
out:
    free(ao.note);
    sb_problem_free(&pb);
    sb_model_free(&m);
    return status;
}

int cmd_search(int argc, char **argv)
{
    if (search_is_megatron(argc, argv)) /* its own options and output (search_megatron.c) */
        return cmd_search_megatron(argc, argv);
    static search_args args;
    search_args *a = &args;
    int rc = parse_search_args(argc, argv, a);
    if (rc >= 0)
        return rc;
    int pipe_given = a->po.stages || a->po.microbatches || a->po.schedule >= 0;
    /* --memory with --recompute stays plain (where auto chooses per op);
     * the full space takes --recompute all (every stage recomputes every
     * op) and refuses auto (sb_pipe_search says why) */
    int rc_given = a->so.cp.recompute != SB_RECOMPUTE_NONE;
    if (a->space < 0)
        a->space = pipe_given || a->zero_given || (a->so.mem_bound && !rc_given);
    if (!a->space && a->plot && !a->so.machine) {
        fprintf(stderr, "shardbench search: --plot of a plain strategy needs --machine (its "
                        "memory and step by cause), or give --space full\n");
        return 2;
    }
    if (!a->space && a->grid >= 0) {
        fprintf(stderr, "shardbench search: --megatron-grid: the full space only (give --space "
                        "full, or --memory)\n");
        return 2;
    }
    if (!a->space && pipe_given) {
        fprintf(stderr, "shardbench search: --stages, --microbatches and --schedule need --space "
                        "full\n");
        return 2;
    }
    if (a->space) {
        if (strcmp(a->algo, "pase") && strcmp(a->algo, "bf")) {
            fprintf(stderr, "shardbench search: --space full searches with pase or bf, not "
                            "--algo %s (give --space plain)\n", a->algo);
            return 2;
        }
        if (a->dot) {
            fprintf(stderr, "shardbench search: --dot draws a plain strategy (give --space "
                            "plain)\n");
            return 2;
        }
        a->po.dp = a->so.ao.dp;
        a->po.dp.algo = !strcmp(a->algo, "bf") ? SB_ALGO_BF : SB_ALGO_PASE;
        a->po.dp.progress = 0;
        a->po.progress = isatty(STDERR_FILENO); /* long searches: what is being solved */
        a->po.opt = a->so.ao.opt;
        a->po.mem_limit = a->so.mem_bound ? a->so.device_gib * 1073741824.0 : 0.0;
        /* not forced: chosen (under a limit; without one ZeRO 0 and nothing
         * recomputed are optimal and what the search returns) */
        a->po.choose_zero = !a->zero_given;
        a->po.choose_recompute = !a->rc_opt_given || a->so.cp.recompute == SB_RECOMPUTE_AUTO;
        if (a->rank_order >= 0) {
            fprintf(stderr, "shardbench search: --ranks: the plain space only (--space full, "
                            "implied by --memory, --zero and the pipeline options, keeps each "
                            "stage's ranks consecutive, in blocks)\n");
            return 2;
        }
        return search_full(&a->so, &a->po, a->algo, a->format, a->save, a->db, a->adopt_db, a->plot,
                           a->grid == 1 ? 2 : a->grid != 0);
    }
    return search_plain(a);
}

/* The plain search over nodes: the rank order of the 2-D mesh (nodes x
 * devices per node) chosen too. *pb and *r hold the optimum with ranks in
 * block order; the same search with ranks cyclic (sb_cost_params
 * .node_order) replaces them when its optimum is lower (ties: block); when
 * it fails (out of memory, a table limit), block stands and stderr says so. */
static void choose_rank_order(const sb_model *m, sb_problem *pb, const char *algo,
                              algo_opts *ao, sb_result *r)
{
    sb_cost_params cp = pb->cp;
    cp.node_order = 1;
    sb_problem pc;
    sb_result rc;
    sb_error e2 = {0};
    int built = !sb_problem_build(m, pb->p, &cp, &pc, &e2);
    if (!built || run_algo(&pc, algo, ao, &rc, &e2)) {
        /* the block optimum stands, and the output says the other was not searched */
        fprintf(stderr, "shardbench search: ranks cyclic not searched (%s): ranks in blocks\n",
                e2.msg);
        if (built)
            sb_problem_free(&pc);
        return;
    }
    if (rc.total_cost < r->total_cost) {
        sb_problem_free(pb);
        sb_result_free(r);
        *pb = pc;
        *r = rc;
    } else {
        sb_problem_free(&pc);
        sb_result_free(&rc);
    }
}

/* ---- paper: the default main job ---------------------------------------------- */

static void paper_usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench paper [-p LIST] [--models LIST] [--db FILE]\n"
            "\n"
            "Searches the paper's models at each device count and prints each best\n"
            "strategy (grouped like the paper's Table II) and a summary table.\n"
            "\n"
            "  -p, --procs LIST   device counts, e.g. 4,8,16 or 4..64 (default 4..64)\n"
            "      --models LIST  comma-separated (default alexnet,inception3,resnet101,rnnlm,transformer)\n"
            "      --db FILE      results database (default %s; 'none' to skip)\n"
            "      --adopt-db     record into an SQLite file of another program\n"
            "      --quiet        summary table only\n",
            SB_DB_DEFAULT_PATH);
}

int cmd_paper(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--table2"))
            return cmd_paper_table2(argc, argv);
    static const struct option opts[] = {
        {"procs", required_argument, 0, 'p'}, {"models", required_argument, 0, 'M'},
        {"db", required_argument, 0, 'd'},    {"quiet", no_argument, 0, 'q'},
        {"adopt-db", no_argument, 0, 'O'},    {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    sb_error err = {0};
    int ps[32], np = 0, quiet = 0, adopt_db = 0;
    const char *models = "alexnet,inception3,resnet101,rnnlm,transformer";
    const char *db = SB_DB_DEFAULT_PATH;
    np = parse_p_list("4..64", ps, 32, &err);
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            np = parse_p_list(optarg, ps, 32, &err);
            if (np < 0)
                return cli_fail(&err);
            break;
        case 'M': models = optarg; break;
        case 'd': db = optarg; break;
        case 'O': adopt_db = 1; break;
        case 'q': quiet = 1; break;
        case 'h': paper_usage(stdout); return 0;
        default: paper_usage(stderr); return 2;
        }
    }
    char list[1024];
    snprintf(list, sizeof list, "%s", models);
    char summary[16384];
    size_t used = (size_t)snprintf(summary, sizeof summary, "%-18s %5s %5s %11s %9s %12s %22s\n",
                                   "model", "p", "ops", "max configs", "max dep", "seconds",
                                   "total cost (FLOP)");
    int status = 0;
    char *save;
    for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        sb_model m;
        if (sb_model_load(name, NULL, 0, &m, &err))
            return cli_fail(&err);
        for (int i = 0; i < np; i++) {
            sb_cost_params cp;
            sb_cost_params_default(&cp);
            sb_problem pb;
            sb_result r;
            sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 4096, .progress = 1};
            if (sb_problem_build(&m, ps[i], &cp, &pb, &err)) {
                status = cli_fail(&err);
                continue;
            }
            if (sb_search(&pb, &so, &r, &err)) {
                status = cli_fail(&err);
                sb_problem_free(&pb);
                continue;
            }
            if (!quiet) {
                print_strategy_table(stdout, &pb, &r, "pase");
                printf("\n");
                fflush(stdout);
            }
            if (used < sizeof summary)
                used += (size_t)snprintf(summary + used, sizeof summary - used,
                                         "%-18s %5d %5d %11d %9d %12.4f %22.2f\n", m.name, ps[i],
                                         m.nops, r.max_configs, r.max_dep_set, r.seconds,
                                         r.total_cost);
            if (record(db, adopt_db, "cli", &pb, &r, "pase", &err)) {
                status = cli_fail(&err);
                db = "none"; /* say it once */
            }
            sb_result_free(&r);
            sb_problem_free(&pb);
        }
        sb_model_free(&m);
    }
    printf("%s", summary);
    return status;
}
