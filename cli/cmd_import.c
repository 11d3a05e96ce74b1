/* cmd_import.c: `shardbench import FILE.onnx [-o FILE.model]`. Converts an
 * ONNX model to a model file (include/shardbench/onnx.h), checks that the
 * text parses, writes it, and prints a summary: ops by type, params, dims
 * and how each was named. Not the conversion (models/onnx/). */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardbench/hf.h"
#include "shardbench/onnx.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: shardbench import FILE.onnx [options]\n"
               "       shardbench import --from hf PATH -o FILE.model [--set KEY=VALUE]\n\n"
               "Converts an ONNX model into a shardbench model file (models/README.md) and\n"
               "prints a summary. `-m FILE.onnx` imports on the fly wherever -m is accepted.\n\n"
               "options:\n"
               "      --from hf          PATH is a Hugging Face config.json or a folder holding\n"
               "                         one (`-m hf:PATH` reads it on the fly); --set takes its\n"
               "                         keys (hidden_size, ...), seq and batch\n"
               "  -o, --output FILE      write the model file here (default: FILE with .model;\n"
               "                         '-' for stdout, no summary)\n"
               "      --set NAME=VALUE   default of an imported param (batch, other symbolic\n"
               "                         dims; repeatable)\n"
               "      --dim NAME=N       fix the dynamic axis NAME (its ONNX name or the param\n"
               "                         made of it: batch, seq) at N, as if exported static\n"
               "                         (repeatable; needed where the import reads the axis\n"
               "                         as a number)\n"
               "      --rename OLD=NEW   rename a dim of the import (repeatable)\n"
               "      --no-loss          do not end the graph with softmax_xent\n"
               "  -q, --quiet            no summary\n"
               "  -h, --help             this help\n");
}

static int parse_rename(const char *arg, sb_rename *r, sb_error *err)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return sb_fail(err, SB_EXIT_INPUT, "--rename '%s': expected OLD=NEW", arg);
    size_t a = (size_t)(eq - arg), b = strlen(eq + 1);
    if (a >= SB_NAME_MAX || b >= SB_NAME_MAX - 4)
        return sb_fail(err, SB_EXIT_INPUT, "--rename '%s': name too long", arg);
    const char *p = eq + 1;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
        return sb_fail(err, SB_EXIT_INPUT, "--rename '%s': '%s' is not a name", arg, eq + 1);
    for (; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return sb_fail(err, SB_EXIT_INPUT, "--rename '%s': '%s' is not a name", arg, eq + 1);
    memcpy(r->from, arg, a);
    r->from[a] = '\0';
    memcpy(r->to, eq + 1, b + 1);
    return 0;
}

/* Writes text to outpath (stdout for "-") through a temporary file and a
 * rename. */
static int write_text(const char *outpath, const char *text, size_t len, sb_error *err)
{
    int to_stdout = strcmp(outpath, "-") == 0;
    char tmp[4200] = "";
    FILE *f = to_stdout ? stdout : sb_out_open(outpath, "model file", tmp, sizeof tmp, err);
    if (!f)
        return -1;
    int werr = fwrite(text, 1, len, f) != len;
    if (to_stdout)
        return werr || fflush(stdout) != 0
                   ? sb_fail(err, SB_EXIT_INTERNAL, "standard output: write failed") : 0;
    /* a short write leaves the stream's error set: sb_out_commit fails and
     * removes the temporary, the old file stays whole */
    return sb_out_commit(f, tmp, outpath, "model file", err);
}

/* import --from hf: the config's model text, parsed with the settings
 * before it is written; the reader's notes and a summary printed. */
static int import_hf(const char *in, const char *outpath, const sb_setting *set, int nset,
                     int quiet)
{
    sb_error err = {0};
    char *text;
    size_t len;
    sb_hf_info info;
    if (sb_hf_to_text(in, set, nset, &text, &len, &info, &err))
        return cli_fail(&err);
    sb_model m;
    if (sb_hf_parse_text(text, len, &info, set, nset, &m, &err)) {
        free(text);
        return cli_fail(&err);
    }
    int rc = write_text(outpath, text, len, &err);
    free(text);
    if (rc) {
        sb_model_free(&m);
        return cli_fail(&err);
    }
    if (!quiet && strcmp(outpath, "-") != 0) {
        int64_t active, total = sb_model_param_count(&m, &active);
        printf("%s -> %s: model %s (%s), %d ops, %lld parameters (%lld active)\n", info.config,
               outpath, m.name, info.arch, m.nops, (long long)total, (long long)active);
        printf("  defaults: %s\n", info.defaults);
        if (info.approx[0])
            printf("  approximated: %s\n", info.approx);
        if (info.ignored[0])
            printf("  ignored keys: %s\n", info.ignored);
    }
    sb_model_free(&m);
    return 0;
}

int cmd_import(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'}, {"set", required_argument, 0, 'S'},
        {"rename", required_argument, 0, 'r'}, {"no-loss", no_argument, 0, 'L'},
        {"quiet", no_argument, 0, 'q'},        {"help", no_argument, 0, 'h'},
        {"from", required_argument, 0, 'F'},   {"dim", required_argument, 0, 'D'},
        {0, 0, 0, 0},
    };
    sb_error err = {0};
    sb_setting set[64], dims[16];
    sb_rename ren[64];
    int nset = 0, nren = 0, ndim = 0, quiet = 0, no_loss = 0, c;
    const char *outpath = NULL, *from = "onnx";
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:qh", longopts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'o': outpath = optarg; break;
        case 'S':
            rc = nset == 64 ? sb_fail(&err, SB_EXIT_INPUT, "too many --set options")
                            : sb_setting_parse(optarg, &set[nset++], &err);
            break;
        case 'r':
            rc = nren == 64 ? sb_fail(&err, SB_EXIT_INPUT, "too many --rename options")
                            : parse_rename(optarg, &ren[nren++], &err);
            break;
        case 'L': no_loss = 1; break;
        case 'D':
            rc = ndim == 16 ? sb_fail(&err, SB_EXIT_INPUT, "too many --dim options")
                            : sb_setting_parse(optarg, &dims[ndim++], &err);
            break;
        case 'F':
            from = optarg;
            if (strcmp(from, "hf") && strcmp(from, "onnx"))
                rc = sb_fail(&err, SB_EXIT_INPUT, "--from '%s': expected hf or onnx", from);
            break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (rc)
            return cli_fail(&err);
    }
    if (optind != argc - 1) {
        fprintf(stderr, "shardbench import: one %s is required\n\n",
                strcmp(from, "hf") ? "ONNX file" : "config.json or folder");
        usage(stderr);
        return 2;
    }
    const char *in = argv[optind];
    if (strcmp(from, "hf") == 0) {
        if (!outpath) {
            fprintf(stderr, "shardbench import --from hf: -o FILE.model is required\n");
            return 2;
        }
        if (nren || no_loss || ndim) {
            fprintf(stderr, "shardbench import --from hf: --rename, --dim and --no-loss are ONNX options\n");
            return 2;
        }
        return import_hf(in, outpath, set, nset, quiet);
    }
    char defout[1024];
    if (!outpath) {
        const char *base = strrchr(in, '/');
        base = base ? base + 1 : in;
        size_t n = strlen(base);
        if (sb_onnx_is_path(base))
            n -= 5;
        snprintf(defout, sizeof defout, "%.*s.model", (int)n, base);
        outpath = defout;
    }
    sb_onnx_opts opts = {.renames = ren, .nrenames = nren, .settings = set, .nsettings = nset,
                         .no_loss = no_loss, .dims = dims, .ndims = ndim};
    char *data = NULL, *text = NULL;
    size_t size, len;
    sb_onnx_info info;
    double t0 = sb_now();
    if (sb_onnx_read_file(in, &data, &size, &err))
        return cli_fail(&err);
    int rc = sb_onnx_to_text(data, size, in, &opts, &text, &len, &info, &err);
    free(data);
    if (rc)
        return cli_fail(&err);
    /* the text must parse, with the same settings, before it is written */
    sb_model m;
    if (sb_model_parse(text, len, outpath, set, nset, &m, &err)) {
        free(text);
        return cli_fail(&err);
    }
    double secs = sb_now() - t0;
    int to_stdout = strcmp(outpath, "-") == 0;
    /* through a temporary file and a rename: a failed write (a full disk)
     * leaves the old file whole */
    char tmp[4200] = "";
    FILE *f = to_stdout ? stdout : sb_out_open(outpath, "model file", tmp, sizeof tmp, &err);
    if (!f) {
        free(text);
        sb_model_free(&m);
        return cli_fail(&err);
    }
    int werr = fwrite(text, 1, len, f) != len;
    free(text);
    if (to_stdout && (werr || fflush(stdout) != 0))
        werr = sb_fail(&err, SB_EXIT_INTERNAL, "standard output: write failed");
    else if (!to_stdout)
        werr = sb_out_commit(f, tmp, outpath, "model file", &err);
    if (werr) {
        sb_model_free(&m);
        return cli_fail(&err);
    }
    if (!quiet && !to_stdout) {
        printf("%s -> %s: model %s, %d ops from %d ONNX nodes (opset %lld, %s) in %.3f s\n", in,
               outpath, m.name, m.nops, info.nnodes, (long long)info.opset,
               info.producer[0] ? info.producer : "unknown producer", secs);
        printf("  nodes: %d folded to constants, %d fused into a producer, %d views (no op)\n",
               info.nfolded, info.nfused, info.nviews);
        int count[SB_OP_KIND_COUNT] = {0}, pw = 0;
        for (int i = 0; i < m.nops; i++) {
            count[m.ops[i].kind]++;
            pw += m.ops[i].pw;
        }
        printf("  ops:");
        for (int k = 0; k < SB_OP_KIND_COUNT; k++)
            if (count[k])
                printf(" %s %d", sb_op_kind_name((sb_op_kind)k), count[k]);
        printf(" (pointwise fused: %d)\n", pw);
        printf("  params:");
        for (int i = 0; i < m.nparams; i++)
            printf(" %s=%lld", m.params[i].name, (long long)m.params[i].value);
        printf("%s\n", m.nparams ? "" : " none");
        static const char *const how[] = {"recognised", "generated", "renamed"};
        for (int h = 0; h < 3; h++) {
            int any = 0;
            for (int i = 0; i < info.ndims; i++)
                if (info.dims[i].how == h) {
                    printf("%s%s", any ? ", " : "  dims ", info.dims[i].name);
                    if (!any)
                        any = 1;
                }
            if (any)
                printf(" (%s)\n", how[h]);
        }
    }
    sb_model_free(&m);
    return 0;
}
