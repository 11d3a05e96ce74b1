/* cmd_paper_table2.c: `shardbench paper --table2`: the PaSE paper's Table
 * II strategies (p = 32, strategies/paper-table2.tsv) beside the search's,
 * per row of the paper's table, with the total cost of each under the
 * reference model and under a machine file's model. */
#define _GNU_SOURCE
#include <getopt.h>
#include <jansson.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "shardbench/precision.h"
#include "shardbench/machine.h"
#include "shardbench/strategy.h"
#include "shardbench/paper.h"
#include "shardbench/profile.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench paper --table2 [-m MODEL[,MODEL...]] [--machine NAME|FILE]\n"
            "                        [--profiles|--db DB|none] [--table FILE] [--save-dir DIR]\n"
            "                        [--format text|json]\n"
            "The paper's Table II strategies (p = 32) beside this search's, row by row, and\n"
            "the total cost of each under the reference model and a machine file's.\n"
            "  -m, --models LIST  models (default: alexnet,inception3,rnnlm,transformer)\n"
            "  -p P               devices (default 32, the paper's)\n"
            "      --machine M    the second cost model (default h200-sxm): its profiles at\n"
            "                     P when the database has them (the predictive model,\n"
            "                     docs/cost-model.md), else its analytic terms\n"
            "      --profiles DB|none  where the machine's profiles are read (default\n"
            "                     results/shardbench.db; none: the analytic terms)\n"
            "      --precision P  the recipe the machine prices (fp32|tf32|fp16|bf16|fp8;\n"
            "                     default: the machine file's)\n"
            "      --db DB|none   the same (the results database, as `paper` takes it; read\n"
            "                     only: the table stores nothing)\n"
            "      --table FILE   the mapped table (default: the shipped paper-table2.tsv)\n"
            "      --save-dir DIR write MODEL-pP.strategy, the paper's strategy, for each model\n"
            "      --format F     text (default) or json\n");
}

/* The distinct configs of the ops a row covers, in its letters: "16,1,2,1,1
 * x12, 32,1,1,1,1 x4" (most frequent first). */
static void row_configs(const sb_problem *pb, const int *choice, const int *row_of, int r,
                        const sb_paper_row *row, int brief, char *out, size_t n)
{
    char seen[32][64];
    int count[32], ns = 0;
    for (int i = 0; i < pb->m->nops; i++) {
        if (row_of[i] != r)
            continue;
        char s[64];
        sb_paper_letters(&pb->m->ops[i], pb->cfg[i].c + (size_t)choice[i] * pb->m->ops[i].ndims,
                         row, s, sizeof s);
        int k = 0;
        while (k < ns && strcmp(seen[k], s))
            k++;
        if (k == ns && ns < 32) {
            strcpy(seen[ns], s);
            count[ns++] = 0;
        }
        if (k < ns)
            count[k]++;
    }
    size_t used = 0;
    out[0] = '\0';
    if (brief && ns > 0) { /* the most frequent, and how many ops differ from it */
        int best = 0, total = 0;
        for (int k = 0; k < ns; k++) {
            total += count[k];
            if (count[k] > count[best])
                best = k;
        }
        if (ns == 1)
            snprintf(out, n, "%s", seen[best]);
        else
            snprintf(out, n, "%s (%d of %d ops)", seen[best], count[best], total);
        return;
    }
    for (int done = 0; done < ns && used < n; done++) {
        int best = -1;
        for (int k = 0; k < ns; k++)
            if (count[k] > 0 && (best < 0 || count[k] > count[best]))
                best = k;
        used += (size_t)snprintf(out + used, n - used, "%s%s", done ? " " : "", seen[best]);
        if (ns > 1 && used < n)
            used += (size_t)snprintf(out + used, n - used, " x%d", count[best]);
        count[best] = -count[best] - 1;
    }
}

typedef struct {
    sb_problem pb;
    sb_result ours;
    int *paper, *row_of, *nearest;
    double paper_cost;
    char cost_model[1024]; /* which model priced it (profiles), or "" */
} side;

/* Builds the problem under cp (with a machine's profiles from db when it
 * has them), the search's best and the paper's strategy. */
static int side_build(sb_model *m, int p, const sb_cost_params *cp, const char *db,
                      const sb_paper_table *t, side *s, sb_error *err)
{
    memset(s, 0, sizeof *s);
    if (sb_problem_build(m, p, cp, &s->pb, err))
        return -1;
    if (db && cp->machine[0] && strcmp(db, "none")
        && sb_profile_use(&s->pb, db, s->cost_model, sizeof s->cost_model, err) < 0)
        return -1;
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 4096, .progress = 1};
    size_t n = (size_t)m->nops;
    s->paper = calloc(n, sizeof(int));
    s->row_of = calloc(n, sizeof(int));
    s->nearest = calloc(n, sizeof(int));
    if (!s->paper || !s->row_of || !s->nearest)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    if (sb_search(&s->pb, &so, &s->ours, err) ||
        sb_paper_strategy(&s->pb, t, s->paper, s->row_of, s->nearest, err))
        return -1;
    s->paper_cost = sb_strategy_cost(&s->pb, s->paper);
    return 0;
}

static void side_free(side *s)
{
    if (s->ours.choice)
        sb_result_free(&s->ours);
    free(s->paper);
    free(s->row_of);
    free(s->nearest);
    if (s->pb.cfg)
        sb_problem_free(&s->pb);
}

static int save_paper(const char *dir, const side *s, sb_error *err)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s-p%d.strategy", dir, s->pb.m->name, s->pb.p);
    sb_result r = {.choice = s->paper, .total_cost = s->paper_cost};
    return sb_result_save(path, &s->pb, &r, "paper", err);
}

/* One model: the table rows and the totals (text), or a JSON object. */
static int one_model(const char *name, int p, const sb_paper_table *t, const sb_cost_params *mcp,
                     const char *mname, const char *db, const char *save_dir, json_t *jout,
                     sb_error *err)
{
    sb_model m;
    if (sb_model_load(name, NULL, 0, &m, err))
        return -1;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    side ref, mach;
    int rc = side_build(&m, p, &cp, NULL, t, &ref, err);
    if (!rc)
        rc = side_build(&m, p, mcp, db, t, &mach, err);
    else
        memset(&mach, 0, sizeof mach);
    if (!rc && save_dir)
        rc = save_paper(save_dir, &ref, err);
    if (rc)
        goto out;
    double ref_s = 1.0 / (cp.tflops * 1e12), mach_s = 1.0 / (mcp->tflops * 1e12);
    json_t *jrows = json_array();
    if (!jout) {
        char params[1024];
        sb_params_str(&m, params, sizeof params);
        printf("# %s  p=%d  %s\n", m.name, p, params);
        if (mach.cost_model[0])
            printf("machine file column: %s\n", mach.cost_model);
        printf("%-22s %-8s %-18s %-30s %s\n", "layers (paper)", "dims", "paper", "ours (reference)",
               "ours (machine file)");
    }
    for (int r = 0; r < t->n; r++) {
        const sb_paper_row *row = &t->rows[r];
        if (strcmp(row->model, m.name))
            continue;
        char ours[512], ours_m[512], applied[512];
        row_configs(&ref.pb, ref.ours.choice, ref.row_of, r, row, !jout, ours, sizeof ours);
        row_configs(&mach.pb, mach.ours.choice, ref.row_of, r, row, !jout, ours_m, sizeof ours_m);
        row_configs(&ref.pb, ref.paper, ref.row_of, r, row, !jout, applied, sizeof applied);
        int near = 0;
        for (int i = 0; i < m.nops; i++)
            near |= ref.row_of[i] == r && ref.nearest[i];
        if (jout)
            json_array_append_new(jrows, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b}", "layers",
                                                   row->layers, "dims", row->dims, "paper",
                                                   row->config, "paper_applied", applied, "ours",
                                                   ours, "ours_machine", ours_m, "nearest", near));
        else
            printf("%-22s %-8s %-18s %-30s %s\n", row->layers, row->dims, row->config, ours,
                   ours_m);
        if (!jout && near)
            printf("%-22s   the paper's config is not one of ours for some ops: applied as %s\n",
                   "", applied);
    }
    int uncovered = 0;
    for (int i = 0; i < m.nops; i++)
        uncovered += ref.row_of[i] < 0;
    if (jout) {
        json_object_set_new(jout, m.name, json_pack(
            "{s:i, s:o, s:i, s:{s:o, s:o}, s:{s:s, s:o, s:o}}", "p", p, "rows", jrows,
            "ops_completed_by_search", uncovered, "reference_flop", "paper",
            cli_jreal(ref.paper_cost), "ours", cli_jreal(ref.ours.total_cost), "machine",
            "machine", mname, "paper_seconds", cli_jreal(mach.paper_cost * mach_s),
            "ours_seconds", cli_jreal(mach.ours.total_cost * mach_s)));
        json_object_set_new(json_object_get(json_object_get(jout, m.name), "machine"),
                            "predictive", json_boolean(mach.pb.cp.profiled));
    } else {
        json_decref(jrows);
        printf("%d of %d ops are in no row of the paper's table (pools, reshapes, adds outside a "
               "module): their configs are the search's, given the paper's\n", uncovered, m.nops);
        printf("total, reference model: paper %.4g FLOP (%.4g s at F), ours %.4g FLOP (%.4g s): "
               "paper / ours = %.3f\n", ref.paper_cost, ref.paper_cost * ref_s,
               ref.ours.total_cost, ref.ours.total_cost * ref_s,
               ref.paper_cost / ref.ours.total_cost);
        printf("total, machine %s: paper %.4g s, ours %.4g s (searched under it): paper / ours = "
               "%.3f\n\n", mname, mach.paper_cost * mach_s, mach.ours.total_cost * mach_s,
               mach.paper_cost / mach.ours.total_cost);
    }
out:
    side_free(&ref);
    side_free(&mach);
    sb_model_free(&m);
    return rc;
}

int cmd_paper_table2(int argc, char **argv)
{
    static const struct option opts[] = {
        {"table2", no_argument, 0, '2'},      {"models", required_argument, 0, 'm'},
        {"machine", required_argument, 0, 'H'}, {"table", required_argument, 0, 'T'},
        {"save-dir", required_argument, 0, 'S'}, {"format", required_argument, 0, 'f'},
        {"profiles", required_argument, 0, 'Q'}, {"precision", required_argument, 0, 'P'},
        {"db", required_argument, 0, 'D'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
    };
    const char *models = "alexnet,inception3,rnnlm,transformer", *machine = "h200-sxm";
    const char *table = NULL, *save_dir = NULL, *format = "text", *db = "results/shardbench.db";
    const char *db_opt = NULL;
    int p = 32, c, prec = -1; /* --precision: the machine file's without it */
    sb_error err = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:p:h", opts, NULL)) != -1) {
        switch (c) {
        case '2': break;
        case 'm': models = optarg; break;
        case 'p': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || !isdigit((unsigned char)optarg[0]) || *end || v < 1 || v > 65536) {
                fprintf(stderr, "shardbench: -p '%s': expected a device count 1..65536\n", optarg);
                return 2;
            }
            p = (int)v;
            break;
        }
        case 'H': machine = optarg; break;
        case 'T': table = optarg; break;
        case 'S': save_dir = optarg; break;
        case 'f': format = optarg; break;
        case 'Q':
        case 'D': /* --db as `paper` takes it: the results database, here read only */
            if (db_opt && strcmp(db_opt, optarg)) {
                fprintf(stderr, "shardbench: paper --table2: --db and --profiles name one "
                        "database (the one the profiles are read from); '%s' and '%s' differ\n",
                        db_opt, optarg);
                return 2;
            }
            db = db_opt = optarg;
            break;
        case 'P':
            if (sb_precision_parse(optarg, "--precision", &prec, &err))
                return cli_fail(&err);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "shardbench: paper --table2: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (strcmp(format, "text") && strcmp(format, "json")) {
        fprintf(stderr, "shardbench: --format '%s': text or json\n", format);
        return 2;
    }
    struct stat st;
    if (save_dir && (stat(save_dir, &st) || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "shardbench: --save-dir '%s' is not a folder\n", save_dir);
        return 2;
    }
    sb_paper_table t;
    if (sb_paper_table_load(table, &t, &err))
        return cli_fail(&err);
    sb_cost_params mcp;
    sb_cost_params_default(&mcp);
    sb_machine mc;
    if (sb_machine_load(machine, &mc, &err)) {
        sb_paper_table_free(&t);
        return cli_fail(&err);
    }
    if (sb_machine_cost_params_at(&mc, prec, 0.0, &mcp, &err)) {
        sb_paper_table_free(&t);
        return cli_fail(&err);
    }
    json_t *jout = strcmp(format, "json") ? NULL : json_object();
    char list[1024];
    snprintf(list, sizeof list, "%s", models);
    int rc = 0;
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name && !rc; name = strtok_r(NULL, ",", &save))
        rc = one_model(name, p, &t, &mcp, machine, db, save_dir, jout, &err);
    if (!rc && jout) {
        char *s = json_dumps(jout, JSON_COMPACT);
        printf("%s\n", s ? s : "{}");
        free(s);
    }
    json_decref(jout);
    sb_paper_table_free(&t);
    return rc ? cli_fail(&err) : 0;
}
