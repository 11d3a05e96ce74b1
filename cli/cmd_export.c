/* cmd_export.c: `shardbench export STRATEGY --to dtensor|torch|jax|mtf`:
 * reads a strategy file (its model, params and p), checks it against the
 * model, and prints the layouts (search/export.c). Not a converter back. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos.h"
#include "cli.h"

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
    if (!choice || sb_strategy_load(path, &pb, choice, &err)) {
        status = cli_fail(&err);
        goto done;
    }
    f = out ? sb_out_open(out, "export", tmp, sizeof tmp, &err) : stdout;
    if (!f) {
        status = cli_fail(&err);
        goto done;
    }
    if (sb_strategy_export_as(f, &pb, choice, fmt, form, &err)) {
        status = cli_fail(&err);
        if (out)
            sb_out_abort(f, tmp);
    } else if (out && sb_out_commit(f, tmp, out, "export", &err)) {
        status = cli_fail(&err);
    }
done:
    free(choice);
    sb_problem_free(&pb);
    sb_model_free(&m);
    return status;
}
