/* strategy_json.c: strategies and plain search answers as JSON (CLI
 * output, results database); split from strategy_io.c, which reads and
 * writes the text files, because JSON is the only part that needs jansson
 * and the cost model's words. */
#include "shardbench/megatron.h"
#include "shardbench/precision.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"
#include "shardbench/pipeline.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A number as printf's %.17g wrote it before jansson: an integer when it
 * is one (10, not 10.0), else a real; null for NaN and infinities (JSON
 * has no such numbers). */
static json_t *jreal(double v)
{
    if (!isfinite(v))
        return json_null();
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        return json_integer((json_int_t)v);
    return json_real(v);
}

/* Per split iteration dim of op under config c, where the group of ranks
 * along it lies: "intra", "inter" or "both" (sb_coll_group_word); counts
 * them in n[0..2] in that order. */
static json_t *mesh_to_nodes_json(const sb_problem *pb, const sb_op *op, const int *c, int *n)
{
    json_t *o = json_object();
    for (int d = 0; d < op->ndims; d++) {
        if (c[d] <= 1)
            continue;
        const char *w = sb_coll_group_word(sb_coll_group_of(&pb->cp, c, op->ndims, 1u << d));
        n[!strcmp(w, "intra") ? 0 : !strcmp(w, "inter") ? 1 : 2]++;
        json_object_set_new(o, op->dims[d].name, json_string(w));
    }
    return o;
}

static json_t *strategy_json(const sb_problem *pb, const sb_result *r, const char *algo)
{
    const sb_model *m = pb->m;
    json_t *params = json_object(), *ops = json_array();
    for (int i = 0; i < m->nparams; i++)
        json_object_set_new(params, m->params[i].name, json_integer(m->params[i].value));
    json_t *j = json_pack("{s:s, s:o, s:i, s:s, s:o, s:o, s:i}", "model", m->name, "params",
                          params, "p", pb->p, "algo", algo, "flops_tflops", jreal(pb->cp.tflops),
                          "bw_gbs", jreal(pb->cp.gbs), "cutoff", pb->cp.cutoff);
    if (!j) {
        json_decref(ops);
        return NULL;
    }
    if (pb->cp.calibration[0]) {
        json_object_set_new(j, "calibration", json_string(pb->cp.calibration));
        json_object_set_new(j, "word_bytes", jreal(pb->cp.word_bytes));
        json_object_set_new(j, "elem_ratio", jreal(pb->cp.elem_ratio));
        json_object_set_new(j, "latency_us", jreal(pb->cp.latency_us));
    }
    json_object_set_new(j, "total_cost", jreal(r->total_cost));
    {   /* every weight, tied ones once; and what one token uses (MoE) */
        int64_t active, total = sb_model_param_count(m, &active);
        json_object_set_new(j, "parameter_count", json_integer((json_int_t)total));
        json_object_set_new(j, "active_parameter_count", json_integer((json_int_t)active));
    }
    /* a calibrated or machine cost is FLOP-equivalents at F: a time */
    if (pb->cp.calibration[0] || pb->cp.machine[0]) {
        json_object_set_new(j, "machine", json_string(pb->cp.machine));
        json_object_set_new(j, "predicted_step_seconds", jreal(r->total_cost / (pb->cp.tflops * 1e12)));
        if (pb->cp.machine[0])
            json_object_set_new(j, "precision", json_string(sb_precision_name(pb->cp.precision)));
        if (pb->cp.gpu_sms > 0) /* how many attentions were priced as one fused kernel */
            json_object_set_new(j, "fused_attentions",
                                json_integer(sb_model_fused_attentions(pb->m)));
        double tps, tfl, mfu, peak = pb->cp.gpu_peak_tflops > 0 ? pb->cp.gpu_peak_tflops : 0.0;
        if (pb->cp.machine[0] &&
            sb_mt_throughput(pb->m, pb->cp.devices, r->total_cost / (pb->cp.tflops * 1e12), peak,
                             &tps, &tfl, &mfu)) {
            json_object_set_new(j, "predicted_tokens_per_second", jreal(tps));
            json_object_set_new(j, "predicted_tflops_per_device", jreal(tfl));
            json_object_set_new(j, "predicted_mfu", jreal(mfu));
        }
        static const char *const part[6] = {"compute", "tp_comm", "dp_comm", "pp_comm",
                                            "bubble", "optimizer"}; /* as breakdown.h */
        json_t *bd = r->has_time_parts && pb->cp.machine[0] ? json_object() : NULL;
        for (int k = 0; bd && k < 6; k++)
            json_object_set_new(bd, part[k], jreal(r->time_parts[k] / (pb->cp.tflops * 1e12)));
        if (bd)
            json_object_set_new(j, "time_breakdown_seconds", bd);
    }
    json_object_set_new(j, "search_seconds", jreal(r->seconds));
    json_object_set_new(j, "vertices", json_integer(m->nops));
    json_object_set_new(j, "max_configs", json_integer(r->max_configs));
    json_object_set_new(j, "max_dep_set", json_integer(r->max_dep_set));
    json_object_set_new(j, "peak_table_bytes", jreal(r->peak_table_bytes));
    if (r->peak_bytes_per_device > 0)
        json_object_set_new(j, "peak_bytes_per_device",
                            jreal(r->peak_bytes_per_device));
    if (r->peak_bytes_per_device > 0 && pb->cp.machine[0]) /* reals: may pass 2^63 */
        json_object_set_new(j, "memory_bytes_per_device",
                            json_pack("{s:o,s:o,s:o,s:o,s:o}", "weights", jreal(r->mem_parts[0]),
                                      "gradients", jreal(r->mem_parts[1]), "optimizer",
                                      jreal(r->mem_parts[2]), "activations",
                                      jreal(r->mem_parts[3]), "buffers", jreal(r->mem_parts[4])));
    int nodes = pb->cp.node_devices > 0; /* mesh_to_nodes with a machine file only */
    int placed[3] = {0, 0, 0}, inside = 0;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        const int *c = pb->cfg[i].c + (size_t)r->choice[i] * (size_t)op->ndims;
        json_t *dims = json_array(), *config = json_array();
        for (int d = 0; d < op->ndims; d++) {
            json_array_append_new(dims, json_pack("{s:s, s:I}", "name", op->dims[d].name, "size",
                                                  (json_int_t)op->dims[d].size));
            json_array_append_new(config, json_integer(c[d]));
        }
        json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:o}", "name", op->name, "type",
                              sb_op_kind_name(op->kind), "dims", dims, "config", config, "cost",
                              jreal(pb->cfg[i].cost[r->choice[i]]));
        if (o && nodes) {
            uint32_t all = op->ndims >= 32 ? ~0u : (1u << op->ndims) - 1u;
            inside += sb_coll_group_of(&pb->cp, c, op->ndims, all).nodes <= 1;
            json_object_set_new(o, "mesh_to_nodes", mesh_to_nodes_json(pb, op, c, placed));
        }
        json_array_append_new(ops, o);
    }
    if (nodes)
        json_object_set_new(j, "mesh_to_nodes",
                            json_pack("{s:i, s:s, s:i, s:i, s:i, s:i, s:i}", "devices_per_node",
                                      pb->cp.node_devices, "rank_order",
                                      pb->cp.node_order == 1 ? "cyclic" : "block", "intra",
                                      placed[0], "inter", placed[1], "both", placed[2],
                                      "ops_inside_one_node", inside, "ops_across_nodes",
                                      m->nops - inside));
    json_object_set_new(j, "ops", ops);
    if (pb->cp.recompute) { /* plain searches' JSON stays as it was */
        json_t *rec = json_array();
        for (int i = 0; i < m->nops; i++)
            if (sb_result_recomputed(pb, r, i))
                json_array_append_new(rec, json_string(m->ops[i].name));
        json_object_set_new(j, "recompute", rec);
    }
    return j;
}

static json_t *stage_json(const sb_model *m, const sb_pipeline *pl, int s)
{
    json_t *names = json_array(), *ranks = json_array(), *mesh = json_array();
    for (int i = pl->first_op[s]; i < pl->first_op[s + 1]; i++)
        json_array_append_new(names, json_string(m->ops[i].name));
    for (int q = 0, r0 = sb_pipeline_first_rank(pl, s); q < pl->devices[s]; q++)
        json_array_append_new(ranks, json_integer(r0 + q));
    json_array_append_new(mesh, json_integer(pl->devices[s]));
    return json_pack("{s:o, s:o, s:o}", "ops", names, "devices", ranks, "mesh", mesh);
}

char *sb_strategy_json_str(const sb_model *m, const sb_strategy *st, const char *algo)
{
    json_t *params = json_object(), *ops = json_array(), *stages = json_array(), *rec = json_array();
    for (int i = 0; i < m->nparams; i++)
        json_object_set_new(params, m->params[i].name, json_integer(m->params[i].value));
    json_t *j = json_pack("{s:s, s:o, s:i, s:s, s:o}", "model", m->name, "params", params, "p",
                          st->p, "algo", algo, "total_cost", jreal(st->cost));
    const sb_pipeline *pl = &st->pipe;
    int S = pl->nstages > 0 ? pl->nstages : 1;
    for (int s = 0; j && pl->nstages > 0 && s < S; s++)
        json_array_append_new(stages, stage_json(m, pl, s));
    for (int i = 0; j && i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        const int *c = st->cfg + (size_t)i * SB_MAX_DIMS;
        json_t *dims = json_array(), *config = json_array();
        for (int d = 0; d < op->ndims; d++) {
            json_array_append_new(dims, json_pack("{s:s, s:I}", "name", op->dims[d].name, "size",
                                                  (json_int_t)op->dims[d].size));
            json_array_append_new(config, json_integer(c[d]));
        }
        json_array_append_new(ops, json_pack("{s:s, s:s, s:i, s:o, s:o}", "name", op->name, "type",
                                             sb_op_kind_name(op->kind), "stage",
                                             pl->nstages > 0 ? sb_pipeline_stage_of(pl, i) : 0,
                                             "dims", dims, "config", config));
        if (st->recompute && st->recompute[i] && sb_op_recomputable(op))
            json_array_append_new(rec, json_string(op->name));
    }
    char *out = NULL;
    if (j) {
        json_object_set_new(j, "stages", stages);
        json_object_set_new(j, "microbatches", json_integer(pl->microbatches > 0 ? pl->microbatches : 1));
        json_object_set_new(j, "schedule", json_string(sb_schedule_name(pl->schedule)));
        json_object_set_new(j, "zero", json_integer(st->zero));
        json_object_set_new(j, "recompute", rec);
        if (st->precision) /* fp32 strategies' JSON stays as it was */
            json_object_set_new(j, "precision", json_string(sb_precision_name(st->precision)));
        if (st->node_order) /* two strategies with the same configs apart */
            json_object_set_new(j, "ranks", json_pack("{s:s, s:i}", "order", "cyclic",
                                                      "devices_per_node", st->node_devices));
        json_object_set_new(j, "ops", ops);
        out = json_dumps(j, JSON_COMPACT);
    } else {
        json_decref(stages), json_decref(rec), json_decref(ops);
    }
    json_decref(j);
    return out;
}

char *sb_stage_json_str(const sb_model *m, const sb_pipeline *pl, int s)
{
    json_t *j = stage_json(m, pl, s);
    char *out = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return out;
}

char *sb_result_json_str(const sb_problem *pb, const sb_result *r, const char *algo)
{
    json_t *j = strategy_json(pb, r, algo);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return s;
}

void sb_result_json(FILE *f, const sb_problem *pb, const sb_result *r, const char *algo)
{
    char *s = sb_result_json_str(pb, r, algo);
    if (s)
        fputs(s, f);
    free(s);
}
