/* cmd_export.c: `shardbench export STRATEGY --to dtensor|torch|jax|mtf`:
 * reads a strategy file (its model, params and p), checks it against the
 * model, and prints the layouts (strategy/export.c). Not a converter back. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos.h"
#include "cli.h"
#include "shardbench/precision.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: shardbench export STRATEGY --to dtensor|torch|jax|mtf [--format text|py|json]\n"
               "       [-o FILE]\n"
               "\n"
               "Per op its mesh and the layout of each tensor in the target's form; per edge\n"
               "whose layouts differ, the relayout.\n"
               "\n"
               "  --to FORMAT        dtensor (TF DTensor strings), torch (DeviceMesh +\n"
               "                     placements), jax (Mesh + PartitionSpec), mtf (Mesh-TF rules)\n"
               "  --format FORM      text (default); py or json (jax, torch): a Python module or\n"
               "                     its JSON that a JAX / PyTorch DTensor program imports\n"
               "                     (docs/export.md)\n"
               "  -o, --out FILE     write there through a temporary file and a rename\n"
               "                     (default and '-': stdout)\n"
               "  -m, --model MODEL  the model file (default: the strategy's model name)\n"
               "  --cutoff N         the cutoff the strategy was searched with\n");
}

/* The strategy file's `model`, `params` and `p` lines. */
static int read_header(const char *path, char *model, size_t nm, sb_setting *set, int *nset, int *p,
                       sb_error *err)
{
    char *text;
    size_t len;
    /* a regular file of bounded size only (a FIFO or /dev/zero is refused) */
    if (sb_read_file(path, "strategy file", (size_t)64 << 20, &text, &len, err))
        return -1;
    char line[8192];
    int lineno = 0, rc = 0;
    model[0] = '\0';
    *p = 0;
    *nset = 0;
    for (const char *at = text; !rc && *at;) {
        size_t n = strcspn(at, "\n");
        if (n >= sizeof line) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: line longer than %zu bytes", path, lineno + 1,
                         sizeof line - 1);
            break;
        }
        memcpy(line, at, n);
        line[n] = '\0';
        at += n + (at[n] == '\n');
        lineno++;
        if (!strncmp(line, "model \"", 7)) { /* quoted: may hold '#' and blanks */
            if (sb_strategy_word(line + 6, model, nm, NULL))
                rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: model name too long or badly quoted",
                             path, lineno);
            continue;
        }
        line[strcspn(line, "\r\n#")] = '\0';
        if (!strncmp(line, "op ", 3))
            break;
        if (!strncmp(line, "model ", 6)) {
            size_t l = strlen(line + 6);
            if (l >= nm)
                rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: model name too long", path, lineno);
            else
                memcpy(model, line + 6, l + 1);
        } else if (!strncmp(line, "p ", 2)) {
            char *end;
            long v = strtol(line + 2, &end, 10);
            if (end == line + 2 || v < 1 || v > 65536)
                rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: bad device count '%s'", path, lineno, line + 2);
            *p = (int)v;
        } else if (!strncmp(line, "params ", 7)) {
            char *save = NULL;
            for (char *kv = strtok_r(line + 7, ",", &save); kv && !rc; kv = strtok_r(NULL, ",", &save))
                if (*nset == 64)
                    rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: more than 64 params", path, lineno);
                else if (sb_setting_parse(kv, &set[(*nset)++], err))
                    rc = -1;
        }
    }
    free(text);
    if (!rc && (!model[0] || !*p))
        rc = sb_fail(err, SB_EXIT_INPUT, "%s: no 'model' or 'p' line before the ops", path);
    return rc;
}

/* What the target framework's own API can and cannot say of a pipeline,
 * ZeRO and recomputation (docs/export.md). */
static const char *const framework_notes[4][3] = {
    [SB_EXPORT_DTENSOR] = {
        "TF DTensor has no pipeline schedule: each stage's layouts hold on a mesh of its own "
        "ranks (dtensor.create_mesh over those devices); the micro-batch loop and the sends "
        "between stages are the program's own",
        "ZeRO: give the optimizer's slot variables a layout sharded over the batch mesh dims "
        "(stage 1); sharded gradients and weights between steps (stages 2, 3) are not a "
        "layout: not expressible",
        "recomputation: tf.recompute_grad around the listed ops"},
    [SB_EXPORT_TORCH] = {
        "torch.distributed.pipelining expresses it: one PipelineStage per stage on its ranks, "
        "ScheduleGPipe or Schedule1F1B with n_microbatches = M",
        "ZeRO: stage 1 is torch.distributed.optim.ZeroRedundancyOptimizer; stages 2 and 3 are "
        "FSDP2 fully_shard over the data-parallel mesh dim (reshard_after_forward=False "
        "keeps weights gathered: stage 2; True: stage 3)",
        "recomputation: torch.utils.checkpoint.checkpoint around the listed ops"},
    [SB_EXPORT_JAX] = {
        "jax.sharding has no pipeline schedule: one Mesh per stage over its devices; the "
        "micro-batch loop and the transfers between stages are written by hand (e.g. "
        "jax.device_put between the stage meshes, or shard_map over a stage axis)",
        "ZeRO: shardings of state: optimizer moments (1), gradients (2) and weights (3) with a "
        "NamedSharding over the data-parallel axis; XLA inserts the gathers",
        "recomputation: jax.checkpoint (jax.remat) around the listed ops"},
    [SB_EXPORT_MTF] = {
        "Mesh-TensorFlow has no pipeline: each stage is a mesh of its own ranks, the schedule "
        "is the program's",
        "ZeRO: not expressible in layout rules",
        "recomputation: mtf.recompute_grad around the listed ops"},
};

/* The parts of a version-2 strategy file beyond one config per op, as
 * comment lines before the layouts. */
static void extras_text(FILE *f, const sb_model *m, const sb_strategy *sf,
                        sb_export_format fmt)
{
    const sb_pipeline *pl = &sf->pipe;
    fprintf(f, "# this strategy is more than one config per op on all %d devices:\n", sf->p);
    if (!sb_pipeline_is_none(pl)) {
        fprintf(f, "# pipeline: %d stages, %d micro-batches, schedule %s\n", pl->nstages,
                pl->microbatches, sb_schedule_name(pl->schedule));
        for (int s = 0; s < pl->nstages; s++) {
            int r0 = sb_pipeline_first_rank(pl, s);
            fprintf(f, "#   stage %d: ops %s .. %s (%d ops) on ranks %d..%d; an op's mesh "
                    "device i is rank %d + i\n", s, m->ops[pl->first_op[s]].name,
                    m->ops[pl->first_op[s + 1] - 1].name, pl->first_op[s + 1] - pl->first_op[s],
                    r0, r0 + pl->devices[s] - 1, r0);
        }
        fprintf(f, "#   %s\n", framework_notes[fmt][0]);
    }
    if (sf->zero)
        fprintf(f, "# ZeRO stage %d over each weight's data-parallel replicas\n#   %s\n", sf->zero,
                framework_notes[fmt][1]);
    int nrc = 0;
    for (int i = 0; i < m->nops; i++)
        if (sf->recompute[i])
            fprintf(f, "%s%s", nrc++ ? ", " : "# recomputed ops: ", m->ops[i].name);
    if (nrc)
        fprintf(f, "\n#   %s\n", framework_notes[fmt][2]);
    if (sf->precision) /* the layouts are the same in every recipe */
        fprintf(f, "# precision: %s, the recipe it was priced in (docs/cost-training.md)\n",
                sb_precision_name(sf->precision));
    fprintf(f, "#\n");
}

/* The same as a JSON object (added to the export's JSON as "strategy_extras"). */
static json_t *extras_json(const sb_model *m, const sb_strategy *sf, sb_export_format fmt)
{
    const sb_pipeline *pl = &sf->pipe;
    json_t *stages = json_array(), *rc = json_array();
    for (int s = 0; s < pl->nstages; s++) {
        json_t *ops = json_array(), *ranks = json_array();
        for (int i = pl->first_op[s]; i < pl->first_op[s + 1]; i++)
            json_array_append_new(ops, json_string(m->ops[i].name));
        int r0 = sb_pipeline_first_rank(pl, s);
        for (int r = 0; r < pl->devices[s]; r++)
            json_array_append_new(ranks, json_integer(r0 + r));
        json_array_append_new(stages, json_pack("{s:o, s:o}", "ops", ops, "devices", ranks));
    }
    for (int i = 0; i < m->nops; i++)
        if (sf->recompute[i])
            json_array_append_new(rc, json_string(m->ops[i].name));
    return json_pack("{s:o, s:i, s:s, s:i, s:o, s:s, s:{s:s, s:s, s:s}}", "stages", stages,
                     "microbatches", pl->microbatches, "schedule", sb_schedule_name(pl->schedule),
                     "zero", sf->zero, "recompute", rc, "precision",
                     sb_precision_name(sf->precision), "framework", "pipeline",
                     framework_notes[fmt][0], "zero", framework_notes[fmt][1], "recompute",
                     framework_notes[fmt][2]);
}

/* The export's JSON (text in buf) with "strategy_extras" added, to f. */
static int json_with_extras(FILE *f, const char *buf, json_t *extras, sb_error *err)
{
    json_error_t je;
    json_t *j = json_loads(buf, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        json_decref(extras);
        return sb_fail(err, SB_EXIT_INTERNAL, "export JSON unreadable: %s", je.text);
    }
    json_object_set_new(j, "strategy_extras", extras);
    char *s = json_dumps(j, JSON_INDENT(1));
    json_decref(j);
    if (!s)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    fprintf(f, "%s\n", s);
    free(s);
    return 0;
}

/* Exports (pb, choice) to f, with the version-2 parts of sf when it has
 * them: comment lines before the text form, "strategy_extras" in the JSON
 * form; the Python form runs one mesh and refuses them. */
static int export_with_extras(FILE *f, const char *path, const sb_problem *pb, const int *choice,
                              const sb_strategy *sf, sb_export_format fmt,
                              sb_export_form form, sb_error *err)
{
    /* the precision changes no layout: shown beside the text and JSON forms */
    if ((!sb_strategy_has_extras(pb->m, sf) && !sf->precision) ||
        (form == SB_EXPORT_PY && !sb_strategy_has_extras(pb->m, sf)))
        return sb_strategy_export_as(f, pb, choice, fmt, form, err);
    if (form == SB_EXPORT_PY)
        return sb_fail(err, SB_EXIT_INPUT, "%s holds a pipeline, ZeRO stage or recomputation: "
                       "the generated program runs one mesh; export it with --format text or "
                       "json (docs/export.md)", path);
    if (form == SB_EXPORT_TEXT) {
        extras_text(f, pb->m, sf, fmt);
        return sb_strategy_export_as(f, pb, choice, fmt, form, err);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int rc = sb_strategy_export_as(mem, pb, choice, fmt, form, err);
    fclose(mem);
    if (!rc)
        rc = json_with_extras(f, buf, extras_json(pb->m, sf, fmt), err);
    free(buf);
    return rc;
}

int cmd_export(int argc, char **argv)
{
    static const struct option opts[] = {
        {"to", required_argument, 0, 't'},    {"out", required_argument, 0, 'o'},
        {"model", required_argument, 0, 'm'}, {"cutoff", required_argument, 0, 'c'},
        {"help", no_argument, 0, 'h'},        {"format", required_argument, 0, 'F'},
        {0, 0, 0, 0},
    };
    sb_error err = {0};
    const char *to = NULL, *out = NULL, *model_arg = NULL;
    sb_export_format fmt = SB_EXPORT_DTENSOR;
    sb_export_form form = SB_EXPORT_TEXT;
    char tmp[4096] = "";
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:m:h", opts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 't': to = optarg; rc = sb_export_format_parse(optarg, &fmt, &err); break;
        case 'o': out = strcmp(optarg, "-") ? optarg : NULL; break;
        case 'F': rc = sb_export_form_parse(optarg, &form, &err); break;
        case 'm': model_arg = optarg; break;
        case 'c': rc = parse_int_opt(optarg, "--cutoff", 1, 1 << 30, &cp.cutoff, &err); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (rc)
            return cli_fail(&err);
    }
    if (optind != argc - 1 || !to) {
        fprintf(stderr, "shardbench export: one STRATEGY file and --to are required\n\n");
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    char model[512];
    sb_setting set[64];
    int nset = 0, p = 0;
    if (read_header(path, model, sizeof model, set, &nset, &p, &err))
        return cli_fail(&err);
    sb_model m;
    if (sb_model_load(model_arg ? model_arg : model, set, nset, &m, &err))
        return cli_fail(&err);
    sb_problem pb;
    int status = 0;
    int *choice = NULL;
    FILE *f = NULL;
    if (sb_problem_build(&m, p, &cp, &pb, &err)) {
        sb_model_free(&m);
        return cli_fail(&err);
    }
    choice = sb_malloc((size_t)m.nops * sizeof *choice, &err);
    sb_strategy sf = {0};
    if (!choice || sb_strategy_load(path, &m, p, &sf, &err)) {
        status = cli_fail(&err);
        goto done;
    }
    if (sf.node_order) { /* the exported meshes list the devices in block order */
        sb_fail(&err, SB_EXIT_INPUT, "%s: its ranks lie cyclically on nodes of %d ('ranks "
                "cyclic'); export writes meshes over devices in launch order and does not take "
                "a cyclic order yet (search --ranks block gives one it does)", path,
                sf.node_devices);
        status = cli_fail(&err);
        goto done;
    }
    if (sb_strategy_choice(path, &sf, &pb, choice, &err)) {
        status = cli_fail(&err);
        goto done;
    }
    f = out ? sb_out_open(out, "export", tmp, sizeof tmp, &err) : stdout;
    if (!f) {
        status = cli_fail(&err);
        goto done;
    }
    if (export_with_extras(f, path, &pb, choice, &sf, fmt, form, &err)) {
        status = cli_fail(&err);
        if (out)
            sb_out_abort(f, tmp);
    } else if (out && sb_out_commit(f, tmp, out, "export", &err)) {
        status = cli_fail(&err);
    }
done:
    sb_strategy_free(&sf);
    free(choice);
    sb_problem_free(&pb);
    sb_model_free(&m);
    return status;
}
