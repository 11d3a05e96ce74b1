/* search_megatron.c: `shardbench search --algo megatron` (docs/megatron.md):
 * Megatron-LM's configurations of a decoder-only transformer model file,
 * priced on a GPU machine file by the GPU op model (search/megatron.c).
 * Every degree given (--tp --pp --dp --cp --ep --vpp --micro-batch-size) with
 * --recompute, --sequence-parallel and --zero: that configuration priced;
 * otherwise the least predicted step of the grid within --memory. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos.h"
#include "cli.h"
#include "full_grid.h"
#include "search_plot.h"
#include "shardbench/megatron.h"
#include "shardbench/precision.h"
#include "shardbench/strategy.h"

int search_is_megatron(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--algo=megatron"))
            return 1;
        if (!strcmp(argv[i], "--algo") && i + 1 < argc && !strcmp(argv[i + 1], "megatron"))
            return 1;
    }
    return 0;
}

static void mt_usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench search --algo megatron -m MODEL -p P --machine NAME [options]\n"
            "\n"
            "Megatron-LM configurations of a decoder-only transformer, priced by the GPU op\n"
            "model (docs/megatron.md). Every degree given, with --recompute,\n"
            "--sequence-parallel and --zero: that configuration priced; else the least\n"
            "predicted step of the grid (TP inside a node unless given) within --memory.\n"
            "\n"
            "  -m, -p, --set, --machine, --memory, --device-mem   as search (-p up to 262144)\n"
            "      --tp N --dp N --cp N --ep N   tensor, data, context, expert parallel degrees\n"
            "      --pp N, --stages N  pipeline stages (the same option)\n"
            "      --vpp N            virtual stages per rank (interleaved 1F1B)\n"
            "      --first-stage-layers N, --last-stage-layers N   layers of the first and\n"
            "                         the last pipeline stage (Megatron-Core's --decoder-first/\n"
            "                         last-pipeline-num-layers), the rest even over the others;\n"
            "                         not given: even, and the grid also tries uneven ends\n"
            "      --micro-batch-size N  sequences per micro-batch; --microbatches M (a count:\n"
            "                         batch / (DP x M)) is refused when it disagrees\n"
            "      --recompute none|selective|full   (all = full; auto: searched)\n"
            "      --zero 0|1         1: the distributed optimizer (ZeRO 1 over DP x CP)\n"
            "      --sequence-parallel on|off\n"
            "      --dp-overlap on|off   grad reduce-scatter in buckets during the backward\n"
            "                         (default on, as Megatron-LM's --overlap-grad-reduce)\n"
            "      --overlap-param-gather on|off   the distributed optimizer's parameter\n"
            "                         all-gather during the next step's first forward (default:\n"
            "                         as --dp-overlap; on needs --zero 1 and --dp-overlap on)\n"
            "      --tp-comm-overlap  TP collectives hidden under the GEMMs\n"
            "      --attention fused|materialized   (default fused: FlashAttention-style)\n"
            "      --cross-entropy-fusion on|off   Megatron's fused cross-entropy (default\n"
            "                         off, Megatron-LM's; NeMo 2 and Megatron-Bridge set it)\n"
            "      --format table|json\n"
            "      --plot DIR         the figures of `plot --search` (memory per stage, step\n"
            "                         by cause, 1F1B schedule, Megatron's layouts) into DIR\n"
            "      --save FILE        the chosen configuration as a strategy file (per-op\n"
            "                         configs by dim name, stages of whole layers, 1F1B, ZeRO\n"
            "                         1 for the distributed optimizer) that run, export and\n"
            "                         bench take; refused with --vpp > 1\n"
            CLI_PRECISION_HELP);
}

static int onoff(const char *s, const char *what, int *out, sb_error *err)
{
    if (!strcmp(s, "on"))
        *out = 1;
    else if (!strcmp(s, "off"))
        *out = 0;
    else
        return sb_fail(err, SB_EXIT_INPUT, "%s: '%s' is not on or off", what, s);
    return 0;
}

const char *cli_mt_stages(const sb_mt_model *mm, const sb_mt_config *c, char *buf, size_t n)
{
    int f = sb_mt_stage_count(mm, c, 0), l = sb_mt_stage_count(mm, c, c->pp - 1);
    if (c->pp <= 2)
        snprintf(buf, n, c->pp == 2 ? "%d + %d" : "%d", f, l);
    else
        snprintf(buf, n, "%d + %d x %d + %d", f, c->pp - 2, sb_mt_stage_count(mm, c, 1), l);
    return buf;
}

static void print_table(const sb_mt_model *mm, const sb_mt_config *c, const sb_mt_result *r,
                        const sb_machine *mc, long priced, double secs, double limit)
{
    long M = mm->global_batch / ((long)c->dp * c->mbs);
    if (priced > 1)
        printf("megatron: best of %ld configurations priced (%.3f s)\n", priced, secs);
    else
        printf("megatron: the configuration given, priced\n");
    printf("  tp %d  pp %d  dp %d  cp %d  ep %d  vpp %d  micro-batch %d sequences (%ld "
           "micro-batches)\n  recompute %s  sequence parallel %s  distributed optimizer %s  "
           "dp overlap %s%s  tp overlap %s  attention %s  cross-entropy %s\n",
           c->tp, c->pp, c->dp, c->cp, c->ep, c->vpp, c->mbs, M, sb_mt_recompute_name(c->recompute),
           c->sp ? "on" : "off", c->dist_opt ? "on" : "off", c->dp_overlap ? "on" : "off",
           c->dist_opt ? (sb_mt_param_overlap(c) ? "  param gather overlap on"
                                                 : "  param gather overlap off") : "",
           c->tp_overlap ? "on" : "off", c->fused_attention ? "fused" : "materialized",
           c->ce_fusion ? "fused" : "unfused");
    if (c->first_layers || c->last_layers) {
        char st[96];
        printf("  layers a stage: %s (Megatron-Core's --decoder-first/last-pipeline-num-layers "
               "%d, %d)\n", cli_mt_stages(mm, c, st, sizeof st), sb_mt_stage_count(mm, c, 0),
               sb_mt_stage_count(mm, c, c->pp - 1));
    }
    printf("predicted step %.4g s at %s on %s: %.4g tokens/s, %.4g TFLOP/s per device, MFU "
           "%.1f%%\n",
           r->step_s, sb_precision_name(c->precision), mc->path, r->tokens_per_s,
           r->tflops_per_device, 100.0 * r->mfu);
    printf("time breakdown (s): compute %.4g, tp_comm %.4g, dp_comm %.4g, pp_comm %.4g, bubble "
           "%.4g, optimizer %.4g\n",
           r->compute_s, r->tp_comm_s, r->dp_comm_s, r->pp_comm_s, r->bubble_s, r->optimizer_s);
    printf("compute by kind (s): GEMMs %.4g, attention %.4g, memory-bound %.4g\n", r->compute_gemm_s,
           r->compute_attention_s, r->compute_memory_s);
    const double G = 1073741824.0;
    char lim[64] = "no limit";
    if (limit > 0)
        snprintf(lim, sizeof lim, "limit %.2f", limit / G);
    printf("memory per device (GiB): weights %.2f, gradients %.2f, optimizer %.2f, activations "
           "%.2f, buffers %.2f = %.2f (%s)\n",
           r->mem_weights / G, r->mem_grads / G, r->mem_optimizer / G, r->mem_activations / G,
           r->mem_buffers / G, r->mem_total / G, lim);
}

/* A configuration's degrees and switches, as the JSON's "megatron" holds them. */
static json_t *degrees_json(const sb_mt_model *mm, const sb_mt_config *c)
{
    long M = mm->global_batch / ((long)c->dp * c->mbs);
    return json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:I,s:s,s:b,s:b,s:b,s:b,s:b,s:s,s:b}",
                     "tp", c->tp, "pp", c->pp, "dp", c->dp, "cp", c->cp, "ep", c->ep, "vpp",
                     c->vpp, "first_stage_layers", sb_mt_stage_count(mm, c, 0),
                     "last_stage_layers", sb_mt_stage_count(mm, c, c->pp - 1),
                     "micro_batch_size", c->mbs, "microbatches", (json_int_t)M, "recompute",
                     sb_mt_recompute_name(c->recompute), "sequence_parallel", c->sp,
                     "distributed_optimizer", c->dist_opt, "dp_overlap", c->dp_overlap,
                     "param_gather_overlap", c->dist_opt && sb_mt_param_overlap(c),
                     "tp_comm_overlap", c->tp_overlap, "attention",
                     c->fused_attention ? "fused" : "materialized", "cross_entropy_fusion",
                     c->ce_fusion);
}

json_t *cli_mt_compute_json(const sb_mt_result *r)
{
    return json_pack("{s:o,s:o,s:o}", "gemm", cli_jreal(r->compute_gemm_s), "attention",
                     cli_jreal(r->compute_attention_s), "memory_bound", cli_jreal(r->compute_memory_s));
}

/* With the model's parameters after --set (as a full-space search's JSON
 * has them: plot --scaling checks that its files are of one model), and
 * the configuration stage by stage for plot --search (cli_mt_details).
 * NULL with err set. */
static json_t *mt_json(const sb_model *m, int P, const sb_mt_model *mm, const sb_mt_config *c,
                       const sb_mt_result *r, const sb_machine *mc, const sb_gpu *g,
                       double limit, long priced, double secs, sb_error *err)
{
    json_t *params = json_object();
    for (int i = 0; params && i < m->nparams; i++)
        json_object_set_new(params, m->params[i].name, json_integer(m->params[i].value));
    json_t *deg = degrees_json(mm, c);
    json_t *tb = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "compute", cli_jreal(r->compute_s),
                           "tp_comm", cli_jreal(r->tp_comm_s), "dp_comm", cli_jreal(r->dp_comm_s),
                           "pp_comm", cli_jreal(r->pp_comm_s), "bubble", cli_jreal(r->bubble_s),
                           "optimizer", cli_jreal(r->optimizer_s));
    json_t *mem = json_pack("{s:I,s:I,s:I,s:I,s:I}", "weights", (json_int_t)r->mem_weights,
                            "gradients", (json_int_t)r->mem_grads, "optimizer",
                            (json_int_t)r->mem_optimizer, "activations",
                            (json_int_t)r->mem_activations, "buffers", (json_int_t)r->mem_buffers);
    json_t *j = json_pack(
        "{s:s,s:o,s:i,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:o,s:I,s:o}", "model", m->name,
        "params", params, "p", P, "algo", "megatron", "machine", mc->path, "precision", sb_precision_name(c->precision),
        "megatron", deg, "predicted_step_seconds", cli_jreal(r->step_s),
        "predicted_tokens_per_second", cli_jreal(r->tokens_per_s), "predicted_tflops_per_device",
        cli_jreal(r->tflops_per_device), "predicted_mfu", cli_jreal(r->mfu),
        "time_breakdown_seconds", tb, "memory_bytes_per_device", mem, "peak_bytes_per_device",
        (json_int_t)r->mem_total, "model_flops_per_step", cli_jreal(r->model_flops),
        "configurations_priced", (json_int_t)priced, "search_seconds", cli_jreal(secs));
    if (!j || json_object_set_new(j, "compute_breakdown_seconds", cli_mt_compute_json(r))) {
        json_decref(j);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        return NULL;
    }
    if (cli_mt_details(j, mm, c, g, limit, err)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The JSON on stdout (format json) and the figures into plot_dir (when
 * given): 0, or -1 with err set. */
static int mt_output(json_t *j, int to_stdout, const char *plot_dir, sb_error *err)
{
    if (to_stdout) {
        json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        putchar('\n');
        fflush(stdout);
    }
    if (!plot_dir)
        return 0;
    char *text = json_dumps(j, JSON_REAL_PRECISION(17));
    if (!text)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int rc = cli_search_plot(plot_dir, text, err);
    free(text);
    return rc;
}

#define FAIL(...) (sb_fail(&err, SB_EXIT_INPUT, __VA_ARGS__), cli_fail(&err))

/* After the options: the machine, the model and the pricing or the search. */
/* Where the answer goes: printed as format, drawn into plot, saved as a
 * strategy file. */
typedef struct {
    const char *format, *plot, *save;
} mt_out;

static int mt_price(shared_opts *so, sb_mt_config *fx, int P, int micro, const mt_out *o,
                    const sb_model *m, const sb_machine *mc, const sb_gpu *g);

static int mt_run(shared_opts *so, sb_mt_config *fx, int P, int micro, const mt_out *o)
{
    sb_error err = {0};
    if (!so->model || !P || !so->machine) {
        fprintf(stderr, "shardbench search --algo megatron: -m MODEL, -p P and --machine are required\n\n");
        mt_usage(stderr);
        return 2;
    }
    sb_machine mc;
    sb_gpu g;
    sb_model m;
    if (sb_machine_load(so->machine, &mc, &err) || sb_gpu_from_machine(&mc, so->precision, &g, &err))
        return cli_fail(&err);
    fx->precision = so->precision >= 0 ? so->precision : mc.precision;
    fx->grad_bytes = so->grad_word_bytes;
    if (sb_model_load(so->model, so->set, so->nset, &m, &err))
        return cli_fail(&err);
    int rc = mt_price(so, fx, P, micro, o, &m, &mc, &g);
    sb_model_free(&m);
    return rc;
}

/* The model loaded: its configuration priced, or the grid searched; printed. */
/* The chosen configuration as a strategy file (sb_mt_strategy). */
static int mt_save(const char *path, const sb_model *m, const sb_mt_config *c,
                   const sb_mt_model *mm, const sb_mt_result *r, const sb_machine *mc, int P,
                   sb_error *err)
{
    sb_strategy st;
    sb_cost_params cp;
    if (sb_machine_cost_params_at(mc, c->precision, c->grad_bytes, &cp, err) ||
        sb_mt_strategy(m, c, mm, P, &st, err))
        return -1;
    /* the file's unit, as the op-level search writes it: seconds x F x 1e12, which a
     * reader (bench, export) divides by the same machine's F back into the step */
    st.cost = r->step_s * cp.tflops * 1e12;
    int rc = sb_strategy_save(path, m, &st, err);
    sb_strategy_free(&st);
    return rc;
}

static int mt_price(shared_opts *so, sb_mt_config *fx, int P, int micro, const mt_out *o,
                    const sb_model *m, const sb_machine *mc, const sb_gpu *g)
{
    const char *format = o->format, *plot = o->plot;
    sb_error err = {0};
    sb_mt_model mm;
    if (sb_mt_model_from(m, &mm, &err))
        return cli_fail(&err);
    if (micro) { /* a count: the micro-batch size it means over DP */
        if (!fx->dp)
            return FAIL("--microbatches %d with --algo megatron needs --dp (or give --micro-batch-size)", micro);
        long seqs = mm.global_batch / ((long)fx->dp * micro);
        if (seqs < 1 || seqs * fx->dp * micro != mm.global_batch)
            return FAIL("--microbatches %d does not divide the batch of %ld over --dp %d", micro, mm.global_batch, fx->dp);
        if (fx->mbs && fx->mbs != seqs)
            return FAIL("--microbatches %d (micro-batches of %ld sequences over --dp %d) and --micro-batch-size %d disagree", micro, seqs, fx->dp, fx->mbs);
        fx->mbs = (int)seqs;
    }
    double limit = so->device_gib * 1073741824.0;
    if (!so->mem_given)
        limit = g->mem_bytes;
    sb_mt_config best;
    sb_mt_result r;
    double t0 = sb_now();
    long priced;
    int all = fx->tp && fx->pp && fx->dp && fx->cp && fx->ep && fx->vpp && fx->mbs && fx->recompute >= 0 &&
              fx->sp >= 0 && fx->dist_opt >= 0;
    if (o->save && fx->vpp > 1) /* before any search: what sb_mt_strategy refuses */
        return FAIL("--save: the interleaved schedule (--vpp %d) is not one a strategy file holds "
                    "(1f1b, gpipe): give --vpp 1", fx->vpp);
    if (all) { /* a user's setup: exactly that, whatever its memory */
        if (sb_mt_check(&mm, fx, P, &err) || sb_mt_check_gpu(fx, g, &err))
            return cli_fail(&err);
        best = *fx;
        sb_mt_price(&mm, &best, g, &r);
        priced = 1;
    } else {
        if (o->save) { /* what a strategy file holds (sb_mt_strategy) */
            if (sb_mt_file_layout(m, &mm, fx))
                fputs(CLI_GRID_ONE_STAGE_NOTE, stderr);
            fputs(CLI_GRID_SAVE_NOTE, stderr);
        }
        if ((fx->tp && fx->pp && fx->dp && fx->cp && (long)fx->tp * fx->pp * fx->dp * fx->cp != P))
            return FAIL("--tp %d x --pp %d x --dp %d x --cp %d is not the %d devices (-p)", fx->tp, fx->pp, fx->dp, fx->cp, P);
        priced = sb_mt_search(&mm, fx, P, g, limit, &best, &r, &err);
        if (priced <= 0)
            return cli_fail(&err);
    }
    double secs = sb_now() - t0;
    int json = !strcmp(format, "json");
    if (!json)
        print_table(&mm, &best, &r, mc, priced, secs, limit);
    if (json || plot) {
        json_t *j = mt_json(m, P, &mm, &best, &r, mc, g, limit, priced, secs, &err);
        int rc = j ? mt_output(j, json, plot, &err) : -1;
        json_decref(j);
        if (rc)
            return cli_fail(&err);
    }
    if (o->save && mt_save(o->save, m, &best, &mm, &r, mc, P, &err))
        return cli_fail(&err);
    if (all && r.mem_total > limit)
        fprintf(stderr, "shardbench: warning: predicted memory %.2f GiB per device is over %.2f GiB\n",
                r.mem_total / 1073741824.0, limit / 1073741824.0);
    return 0;
}

enum { O_TP = 2001, O_PP, O_DP, O_CP, O_EP, O_VPP, O_MBS, O_MICRO, O_RC, O_ZERO, O_SP, O_DPOV,
       O_TPOV, O_ATTN, O_ALGO, O_FMT, O_SPACE, O_P, O_OPT, O_DB, O_PLOT, O_SAVE, O_PGOV, O_CEF,
       O_FIRST, O_LAST };

int cmd_search_megatron(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"procs", required_argument, 0, O_P},
        {"set", required_argument, 0, 's'}, {"machine", required_argument, 0, 'H'},
        {"memory", required_argument, 0, 'L'}, {"device-mem", required_argument, 0, 'G'},
        CLI_PRECISION_OPTS, {"tp", required_argument, 0, O_TP}, {"pp", required_argument, 0, O_PP},
        {"stages", required_argument, 0, O_PP}, {"dp", required_argument, 0, O_DP},
        {"cp", required_argument, 0, O_CP}, {"ep", required_argument, 0, O_EP},
        {"vpp", required_argument, 0, O_VPP}, {"micro-batch-size", required_argument, 0, O_MBS},
        {"first-stage-layers", required_argument, 0, O_FIRST},
        {"last-stage-layers", required_argument, 0, O_LAST},
        {"microbatches", required_argument, 0, O_MICRO},
        {"recompute", required_argument, 0, O_RC}, {"zero", required_argument, 0, O_ZERO},
        {"sequence-parallel", required_argument, 0, O_SP},
        {"dp-overlap", required_argument, 0, O_DPOV}, {"tp-comm-overlap", no_argument, 0, O_TPOV},
        {"overlap-param-gather", required_argument, 0, O_PGOV},
        {"cross-entropy-fusion", required_argument, 0, O_CEF},
        {"attention", required_argument, 0, O_ATTN}, {"algo", required_argument, 0, O_ALGO},
        {"format", required_argument, 0, O_FMT}, {"space", required_argument, 0, O_SPACE},
        {"optimizer", required_argument, 0, O_OPT}, {"db", required_argument, 0, O_DB},
        {"plot", required_argument, 0, O_PLOT}, {"save", required_argument, 0, O_SAVE},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    sb_error err = {0};
    shared_opts so;
    shared_opts_default(&so);
    sb_mt_config fx;
    sb_mt_config_free(&fx);
    int P = 0, micro = 0;
    mt_out out = {.format = "table"};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:p:s:h", opts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'p':
        case O_P: rc = parse_int_opt(optarg, "-p", 1, 262144, &P, &err); break;
        case O_TP: rc = parse_int_opt(optarg, "--tp", 1, 262144, &fx.tp, &err); break;
        case O_PP: rc = parse_int_opt(optarg, "--pp", 1, 262144, &fx.pp, &err); break;
        case O_DP: rc = parse_int_opt(optarg, "--dp", 1, 262144, &fx.dp, &err); break;
        case O_CP: rc = parse_int_opt(optarg, "--cp", 1, 262144, &fx.cp, &err); break;
        case O_EP: rc = parse_int_opt(optarg, "--ep", 1, 262144, &fx.ep, &err); break;
        case O_VPP: rc = parse_int_opt(optarg, "--vpp", 1, 1024, &fx.vpp, &err); break;
        case O_FIRST: rc = parse_int_opt(optarg, "--first-stage-layers", 1, 1 << 20, &fx.first_layers, &err); break;
        case O_LAST: rc = parse_int_opt(optarg, "--last-stage-layers", 1, 1 << 20, &fx.last_layers, &err); break;
        case O_MBS: rc = parse_int_opt(optarg, "--micro-batch-size", 1, 1 << 24, &fx.mbs, &err); break;
        case O_MICRO: rc = parse_int_opt(optarg, "--microbatches", 1, 1 << 24, &micro, &err); break;
        case O_RC:
            if (!strcmp(optarg, "auto"))
                fx.recompute = -1;
            else
                rc = sb_mt_recompute_parse(optarg, &fx.recompute, &err);
            break;
        case O_ZERO:
            rc = parse_int_opt(optarg, "--zero", 0, 3, &fx.dist_opt, &err);
            if (!rc && fx.dist_opt > 1)
                rc = sb_fail(&err, SB_EXIT_INPUT,
                             "--algo megatron: --zero %d: Megatron-LM's distributed optimizer is "
                             "ZeRO 1 (--zero 0 or 1)", fx.dist_opt);
            break;
        case O_SP: rc = onoff(optarg, "--sequence-parallel", &fx.sp, &err); break;
        case O_DPOV: rc = onoff(optarg, "--dp-overlap", &fx.dp_overlap, &err); break;
        case O_TPOV: fx.tp_overlap = 1; break;
        case O_PGOV: {
            int on = 0;
            rc = onoff(optarg, "--overlap-param-gather", &on, &err);
            fx.param_gather = on ? SB_MT_PG_ON : SB_MT_PG_OFF;
            break;
        }
        case O_CEF: rc = onoff(optarg, "--cross-entropy-fusion", &fx.ce_fusion, &err); break;
        case O_ATTN:
            if (!strcmp(optarg, "fused") || !strcmp(optarg, "materialized"))
                fx.fused_attention = !strcmp(optarg, "fused");
            else
                rc = sb_fail(&err, SB_EXIT_INPUT, "--attention: '%s' is not fused or materialized", optarg);
            break;
        case O_ALGO: break; /* megatron: how we got here */
        case O_FMT:
            out.format = optarg;
            if (strcmp(optarg, "table") && strcmp(optarg, "json"))
                rc = sb_fail(&err, SB_EXIT_INPUT, "--format: '%s' is not table or json (--algo megatron)", optarg);
            break;
        case O_SPACE:
            if (strcmp(optarg, "plain") && strcmp(optarg, "full"))
                rc = sb_fail(&err, SB_EXIT_INPUT, "--space: '%s' is not plain or full", optarg);
            break; /* the grid has its own space: pipelines are always in it */
        case O_OPT:
            if (strcmp(optarg, "adam"))
                rc = sb_fail(&err, SB_EXIT_INPUT, "--algo megatron trains with Adam (--optimizer adam), not '%s'", optarg);
            break;
        case O_DB: break; /* nothing is recorded for megatron configurations */
        case O_PLOT: out.plot = optarg; break;
        case O_SAVE: out.save = optarg; break;
        case 'h': mt_usage(stdout); return 0;
        default:
            rc = shared_opt(&so, c, optarg, &err);
            if (rc == 0) {
                mt_usage(stderr);
                return 2;
            }
            break;
        }
        if (rc < 0)
            return cli_fail(&err);
    }
    if (optind < argc) {
        fprintf(stderr, "shardbench search: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return mt_run(&so, &fx, P, micro, &out);
}

/* ---- the grid inside the full space (full_grid.h) ---------------------------------- */

static void grid_not(cli_grid *g, const char *why)
{
    g->searched = g->found = 0;
    snprintf(g->why, sizeof g->why, "%s", why);
}

void cli_grid_search(const shared_opts *so, const sb_pipe_opts *po, int save, const char *off,
                     const sb_model *m, cli_grid *g)
{
    memset(g, 0, sizeof *g);
    sb_error err = {0};
    char why[512];
    if (off)
        return grid_not(g, off);
    if (!so->machine || !(so->cp.gpu_sms > 0))
        return grid_not(g, "no GPU machine file (the grid is priced by the GPU op model)");
    if (so->ao.opt != SB_OPTIM_ADAM)
        return grid_not(g, "--optimizer sgd (Megatron-LM trains with Adam)");
    if (po->microbatches)
        return grid_not(g, "--microbatches given (the grid's micro-batches are the batch over "
                           "DP x the micro-batch size)");
    if (po->schedule == SB_SCHEDULE_GPIPE)
        return grid_not(g, "--schedule gpipe (Megatron-LM runs 1F1B)");
    if (!po->choose_zero && so->cp.zero > 1) {
        snprintf(why, sizeof why, "--zero %d (Megatron-LM's distributed optimizer is ZeRO 1)",
                 so->cp.zero);
        return grid_not(g, why);
    }
    if (sb_mt_model_from(m, &g->mm, &err))
        return grid_not(g, err.msg);
    if (sb_machine_load(so->machine, &g->mc, &err) ||
        sb_gpu_from_machine(&g->mc, so->precision, &g->g, &err))
        return grid_not(g, err.msg);
    sb_mt_config fx;
    sb_mt_config_free(&fx);
    fx.pp = po->stages;
    fx.precision = so->precision >= 0 ? so->precision : g->mc.precision;
    fx.grad_bytes = so->grad_word_bytes;
    fx.fused_attention = so->attention != 0;
    fx.dp_overlap = so->cp.dp_overlap;
    if (!po->choose_zero)
        fx.dist_opt = so->cp.zero >= 1;
    if (!po->choose_recompute)
        fx.recompute = so->cp.recompute == SB_RECOMPUTE_ALL ? SB_MT_RC_FULL : SB_MT_RC_NONE;
    if (po->schedule == SB_SCHEDULE_1F1B)
        fx.vpp = 1;
    /* what a strategy file holds: VPP 1, EP inside DP (said where the grid's answer is
     * taken: cmd_search.c, grid_answer); PP 1 where the ops' runs are not the layers */
    if (save && sb_mt_file_layout(m, &g->mm, &fx))
        fputs(CLI_GRID_ONE_STAGE_NOTE, stderr);
    g->limit = po->mem_limit;
    g->searched = 1;
    double t0 = sb_now();
    g->priced = sb_mt_search(&g->mm, &fx, so->p, &g->g, g->limit, &g->best, &g->r, &err);
    g->secs = sb_now() - t0;
    g->found = g->priced > 0;
    if (!g->found)
        snprintf(g->why, sizeof g->why, "%s", err.msg);
}

json_t *cli_grid_json(const cli_grid *g)
{
    if (!g->found)
        return json_pack("{s:s}", g->searched ? "none_fits" : "not_searched", g->why);
    return json_pack("{s:o,s:o,s:I,s:I}", "predicted_step_seconds", cli_jreal(g->r.step_s),
                     "megatron", degrees_json(&g->mm, &g->best), "peak_bytes_per_device",
                     (json_int_t)g->r.mem_total, "configurations_priced", (json_int_t)g->priced);
}

void cli_grid_print_line(FILE *f, const cli_grid *g)
{
    const sb_mt_config *c = &g->best;
    if (!g->found)
        fprintf(f, "megatron grid: %s: %s\n", g->searched ? "nothing fits" : "not searched",
                g->why);
    else {
        char st[96] = "";
        if (c->first_layers || c->last_layers) {
            char l[80];
            snprintf(st, sizeof st, ", layers a stage %s", cli_mt_stages(&g->mm, c, l, sizeof l));
        }
        fprintf(f, "megatron grid: %.4g s at best (tp %d pp %d dp %d cp %d ep %d vpp %d "
                   "micro-batch %d, recompute %s%s): the op-level strategy above is no slower\n",
                g->r.step_s, c->tp, c->pp, c->dp, c->cp, c->ep, c->vpp, c->mbs,
                sb_mt_recompute_name(c->recompute), st);
    }
}

int cli_grid_answer(const cli_grid *g, const sb_model *m, int P, const char *algo, const char *format,
                    const char *plot, const char *save, const sb_pipe_result *op, double op_s,
                    const char *op_err, char **json, sb_error *err)
{
    int is_json = !strcmp(format, "json");
    if (strcmp(format, "table") && !is_json)
        return sb_fail(err, SB_EXIT_INPUT, "--format %s: the full space's answer is Megatron-LM's "
                       "configuration, printed as a table or json", format);
    if (!is_json) {
        if (op_err)
            printf("full space: the op-level pipeline search found nothing (%s); Megatron-LM's "
                   "grid did\n", op_err);
        else
            printf("full space: Megatron-LM's grid is faster than the op-level pipeline search's "
                   "best (%.4g s: %d stages of %d devices, %d micro-batches)\n", op_s,
                   op->pipe.nstages, P / op->pipe.nstages, op->pipe.microbatches);
        print_table(&g->mm, &g->best, &g->r, &g->mc, g->priced, g->secs, g->limit);
    }
    json_t *j = mt_json(m, P, &g->mm, &g->best, &g->r, &g->mc, &g->g, g->limit, g->priced,
                        g->secs, err);
    if (!j)
        return -1;
    json_t *ol = op_err ? json_pack("{s:s}", "error", op_err)
                        : json_pack("{s:o,s:i,s:i,s:I}", "predicted_step_seconds", cli_jreal(op_s),
                                    "stages", op->pipe.nstages, "microbatches",
                                    op->pipe.microbatches, "peak_bytes_per_device",
                                    (json_int_t)op->peak_bytes);
    /* per-op configs as a strategy file holds them (VPP 1: a file has no interleaving) */
    sb_strategy st;
    sb_error e2 = {0};
    if (g->best.vpp == 1 && !sb_mt_strategy(m, &g->best, &g->mm, P, &st, &e2)) {
        char *sj = sb_strategy_json_str(m, &st, "megatron");
        json_t *sjj = sj ? json_loads(sj, 0, NULL) : NULL;
        if (sjj && json_object_get(sjj, "ops"))
            json_object_set(j, "ops", json_object_get(sjj, "ops"));
        json_decref(sjj);
        free(sj);
        sb_strategy_free(&st);
    } else { /* why the answer has no per-op configs */
        json_object_set_new(j, "ops_error", json_string(g->best.vpp > 1 ? "interleaved (--vpp > 1): "
                                                        "no per-op strategy" : e2.msg));
    }
    json_object_set_new(j, "algo", json_string(algo)); /* the search run: the series it is in */
    json_object_set_new(j, "space", json_string("full"));
    json_object_set_new(j, "answer", json_string("megatron_grid"));
    json_object_set_new(j, "op_level", ol);
    int rc = mt_output(j, is_json, plot, err);
    if (!rc && json && !(*json = json_dumps(j, JSON_COMPACT)))
        rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    json_decref(j);
    if (!rc && save)
        rc = mt_save(save, m, &g->best, &g->mm, &g->r, &g->mc, P, err);
    if (rc && json) {
        free(*json);
        *json = NULL;
    }
    return rc;
}
