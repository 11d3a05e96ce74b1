/* cmd_candidates.c: `shardbench candidates`: the mesh-shape x layout-rule
 * candidates of a model at P devices, ranked by predicted cost, with their
 * predicted memory per device. Printing only; enumeration is in
 * search/candidates.c. */
#define _GNU_SOURCE
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: shardbench candidates -m MODEL -p P [--top K] [--format table|json]\n"
               "\n"
               "Mesh shapes (every divisor of P as 1-3 axes) x layout rules over the model's\n"
               "dim names (Mesh-TensorFlow style), ranked by predicted cost.\n"
               "\n"
               "  -m, --model MODEL      shipped model name or model file\n"
               "  -p, --procs P          device count\n"
               "      --set NAME=VALUE   override a model parameter (repeatable)\n"
               "      --top K            print the best K (default 20; 0 for all)\n"
               "      --format table|json\n"
               "      --memory LIMIT     device memory (80GiB, 141GB, 512MiB; bare number: GiB)\n"
               "      --device-mem GIB   device memory (default 80): over it is marked\n"
               "      --optimizer sgd|adam   optimizer state in the memory model\n"
               "      --zero 0|1|2|3     ZeRO stage in the memory and cost models (as search)\n"
               "      --max-rule-sets N  stop enumerating after N rule sets (default 2000000)\n"
               "      --flops F, --bw B, --cutoff N   cost model (as search)\n"
               "      --calibration FILE   the calibrated cost model (shardbench calibrate)\n"
               "      --machine NAME|FILE  cost model and --device-mem of a machine file (as search)\n"
               "      --profiles DB|none   the predictive model's profiles (as search)\n"
               CLI_PRECISION_HELP CLI_ATTENTION_HELP);
}

int cmd_candidates(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},     {"procs", required_argument, 0, 'p'},
        {"set", required_argument, 0, 's'},       {"top", required_argument, 0, 'k'},
        {"format", required_argument, 0, 'f'},    {"device-mem", required_argument, 0, 'G'}, {"memory", required_argument, 0, 'L'},
        {"zero", required_argument, 0, 'Z'}, {"optimizer", required_argument, 0, 'o'}, {"max-rule-sets", required_argument, 0, 'R'},
        {"flops", required_argument, 0, 'F'},     {"bw", required_argument, 0, 'B'},
        {"cutoff", required_argument, 0, 'c'},    {"help", no_argument, 0, 'h'},
        {"calibration", required_argument, 0, 'K'}, {"machine", required_argument, 0, 'H'}, {"profiles", required_argument, 0, 'Q'},
        CLI_PRECISION_OPTS, CLI_ATTENTION_OPT,
        {0, 0, 0, 0},
    };
    sb_error err = {0};
    shared_opts so;
    shared_opts_default(&so);
    const char *format = "table";
    int top = 20;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:p:h", opts, NULL)) != -1) {
        int rc = shared_opt(&so, c, optarg, &err);
        if (rc == 0) /* not a shared option */
            switch (c) {
            case 'k': rc = parse_int_opt(optarg, "--top", 0, 1 << 30, &top, &err); break;
            case 'f':
                format = optarg;
                if (strcmp(format, "table") && strcmp(format, "json"))
                    rc = sb_fail(&err, SB_EXIT_INPUT, "--format: '%s' is not table or json",
                                 optarg);
                break;
            case 'h': usage(stdout); return 0;
            default: usage(stderr); return 2;
            }
        if (rc < 0)
            return cli_fail(&err);
    }
    if (optind < argc || !so.model || !so.p) {
        fprintf(stderr, "shardbench candidates: -m MODEL and -p P are required\n\n");
        usage(stderr);
        return 2;
    }
    if (shared_opts_calibrate(&so, &err))
        return cli_fail(&err);
    sb_model m;
    sb_problem pb;
    if (shared_opts_problem(&so, &m, &pb, &err))
        return cli_fail(&err);
    int p = so.p;
    double gib = so.device_gib;
    sb_candidate_set cs;
    int status = 0;
    if (sb_candidates_enumerate(&pb, so.ao.opt, so.ao.max_rule_sets, 1, &cs, &err)) {
        status = cli_fail(&err);
        goto out;
    }
    int n = top > 0 && top < cs.ncand ? top : cs.ncand;
    double limit = gib * 1073741824.0;
    int json = !strcmp(format, "json");
    json_t *jc = json ? json_array() : NULL;
    /* a calibrated, machine or profiled cost is FLOP-equivalents at F: a time */
    int timed = pb.cp.calibration[0] || pb.cp.machine[0];
    double F = pb.cp.tflops * 1e12;
    if (!json) {
        if (so.cost_model[0])
            printf("# %s\n", so.cost_model);
        printf("# %s  p=%d  %d distinct strategies from %ld rule sets over %d mesh shapes in "
               "%.3f s%s\n%-5s %-16s %-60s %16s %12s %9s %s%s\n",
               m.name, p, cs.ncand, cs.rule_sets, cs.nmeshes, cs.seconds,
               cs.truncated ? "  (TRUNCATED at --max-rule-sets)" : "", "rank", "mesh", "rules",
               "cost (FLOP)", "mem (GiB)", "fallbacks", "fits", timed ? "  predicted s" : "");
    }
    for (int i = 0; i < n; i++) {
        const sb_candidate *k = &cs.cand[i];
        char mesh[64], rules[2048];
        sb_cand_mesh_str(&k->mesh, mesh, sizeof mesh);
        sb_candidate_rules_str(&cs, k, rules, sizeof rules);
        if (json) {
            /* bytes as a double: past 2^63 no integer holds them (a real then) */
            json_t *o = json_pack("{s:i, s:s, s:s, s:o, s:o, s:i, s:b}", "rank", i + 1, "mesh",
                                  mesh, "rules", rules, "cost", cli_jreal(k->cost), "mem_bytes",
                                  cli_jreal(k->mem), "fallbacks", k->fallbacks, "fits",
                                  k->mem <= limit);
            if (o && timed)
                json_object_set_new(o, "predicted_step_seconds", cli_jreal(k->cost / F));
            json_array_append_new(jc, o);
        } else if (timed) {
            printf("%-5d %-16s %-60s %16.6e %12.3f %9d %-4s %12.4g\n", i + 1, mesh,
                   rules[0] ? rules : "(none)", k->cost, k->mem / 1073741824.0, k->fallbacks,
                   k->mem <= limit ? "yes" : "no", k->cost / F);
        } else {
            printf("%-5d %-16s %-60s %16.6e %12.3f %9d %s\n", i + 1, mesh,
                   rules[0] ? rules : "(none)", k->cost, k->mem / 1073741824.0, k->fallbacks,
                   k->mem <= limit ? "yes" : "no");
        }
    }
    if (json) { /* every string escaped by jansson: a model named a"b stays JSON */
        json_t *j = json_pack("{s:s, s:i, s:I, s:i, s:i, s:b, s:o, s:I, s:o}", "model", m.name,
                              "p", p, "rule_sets", (json_int_t)cs.rule_sets, "mesh_shapes",
                              cs.nmeshes, "distinct", cs.ncand, "truncated", cs.truncated,
                              "seconds", cli_jreal(cs.seconds), "device_mem_bytes",
                              (json_int_t)limit, "candidates", jc);
        if (j) { /* every weight, tied ones once; and what one token uses (MoE) */
            int64_t active, total = sb_model_param_count(&m, &active);
            json_object_set_new(j, "parameter_count", json_integer((json_int_t)total));
            json_object_set_new(j, "active_parameter_count", json_integer((json_int_t)active));
        }
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(j);
    }
    sb_candidate_set_free(&cs);
out:
    sb_problem_free(&pb);
    sb_model_free(&m);
    return status;
}
