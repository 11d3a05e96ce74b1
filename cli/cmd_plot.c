/* cmd_plot.c: `shardbench plot`: options, then sb_plot (plots/plot.c):
 * the figures of one run from the results database, drawn by gnuplot; or
 * with --search, sb_plot_search (plots/fig_search.c): the figures of one
 * search's JSON; or with --scaling, sb_plot_scaling (plots/fig_scaling.c). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardbench/plots.h"
#include "shardbench/results.h"

static void plot_usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench plot --run ID --out DIR [--db FILE] [--scripts DIR]\n"
            "       shardbench plot --search FILE.json --out DIR [--scripts DIR]\n"
            "       shardbench plot --scaling --out DIR [--scripts DIR] FILE.json...\n"
            "       shardbench plot --validate FILE.json --out DIR [--scripts DIR]\n"
            "\n"
            "Figures of one run (PNG and SVG, gnuplot), from the results database only:\n"
            "  speedup-MODEL       speedup over data parallel vs P, one line per kind\n"
            "  fidelity-MODEL-pP   predicted cost vs measured step time (log-log), rho\n"
            "  search-MODEL        search time vs P per algorithm (log)\n"
            "  trend-MODEL-pP      best step time per kind across runs up to ID\n"
            "Figures of one `search --space full` or `--algo megatron` JSON (--search):\n"
            "  memory-MODEL-pP     memory per device per stage, stacked, against the device's\n"
            "  steptime-MODEL-pP   the step by cause; each stage's forward, backward, idle\n"
            "  schedule-MODEL-pP   the first and last stages over one step (Gantt chart)\n"
            "  configs-MODEL-pP    layers x dims heat map of each op's config (megatron: its\n"
            "                      layouts)\n"
            "Over several searches of one model (--scaling FILE.json...):\n"
            "  scaling-MODEL       predicted tokens/s (and MFU) vs devices per algorithm\n"
            "Of one `validate --format json` (--validate FILE.json):\n"
            "  validate            predicted vs published step time per run (log-log)\n"
            "  validate-error      each run's signed error, the band validate allows\n"
            "  validate-gemm       the large-GEMM rate each run's published step implies\n"
            "\n"
            "      --db FILE        results database (default %s)\n"
            "      --run ID         the run\n"
            "      --out DIR        where the figures go (created)\n"
            "      --search FILE    the figures of one search's JSON\n"
            "      --scaling        the scaling figure of the JSON files given after the options\n"
            "      --validate FILE  the figure of `validate --format json`'s output\n"
            "      --scripts DIR    the gnuplot scripts (default: $SHARDBENCH_PLOTS, else\n"
            "                       plots/ of the source tree next to the binary)\n"
            "  -h, --help\n",
            SB_DB_DEFAULT_PATH);
}

static char *read_all(const char *path, sb_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        sb_fail(err, SB_EXIT_INPUT, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[65536];
    size_t k;
    while (m && (k = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, k, m);
    int bad = ferror(f);
    fclose(f);
    if (!m || fclose(m) || bad) {
        free(buf);
        sb_fail(err, bad ? SB_EXIT_INPUT : SB_EXIT_INTERNAL, "%s: %s", path,
                bad ? "read error" : "out of memory");
        return NULL;
    }
    return buf;
}

/* plot --search FILE, plot --scaling FILE... */
static int plot_json(const char *search, int scaling, const char *out, const char *scripts,
                     int64_t run, int nfiles, const char *const *files)
{
    if ((search && scaling) || run || !out || (search && nfiles) || (scaling && !nfiles)) {
        fprintf(stderr, "shardbench: plot: --search FILE --out DIR, or --scaling --out DIR "
                        "FILE.json... (not with --run, nor both)\n");
        return 2;
    }
    sb_error err = {0};
    int figures = 0, written = 0;
    if (search) {
        char *json = read_all(search, &err);
        sb_plot_search_opts so = {.json = json, .source = search, .out = out,
                                  .scripts = scripts};
        int rc = json ? sb_plot_search(&so, &figures, &written, &err) : -1;
        free(json);
        if (rc)
            return cli_fail(&err);
    } else if (sb_plot_scaling(files, nfiles, out, scripts, &figures, &written, &err)) {
        return cli_fail(&err);
    }
    printf("%d figures (%d files) in %s\n", figures, written, out);
    return 0;
}

/* plot --validate FILE --out DIR (alone) */
static int plot_validate(const char *path, int other, const char *out, const char *scripts)
{
    if (other || !out) {
        fprintf(stderr, "shardbench: plot: --validate FILE.json --out DIR (not with --run, "
                        "--search, --scaling or other files)\n");
        return 2;
    }
    sb_error err = {0};
    int figures = 0, written = 0;
    if (sb_plot_validate(path, out, scripts, NULL, &figures, &written, &err))
        return cli_fail(&err);
    printf("%d figures (%d files) in %s\n", figures, written, out);
    return 0;
}

int cmd_plot(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},      {"run", required_argument, 0, 'r'},
        {"out", required_argument, 0, 'o'},     {"scripts", required_argument, 0, 's'},
        {"search", required_argument, 0, 'S'},  {"scaling", no_argument, 0, 'C'},
        {"validate", required_argument, 0, 'V'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *search = NULL, *validate = NULL;
    int scaling = 0;
    sb_plot_opts o = {.db = SB_DB_DEFAULT_PATH};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'd': o.db = optarg; break;
        case 'r': {
            errno = 0;
            long long v = strtoll(optarg, &end, 10);
            if (errno || end == optarg || !isdigit((unsigned char)optarg[0]) || *end || v < 1) {
                fprintf(stderr, "shardbench: --run: '%s' is not a run id\n", optarg);
                return 2;
            }
            o.run = v;
            break;
        }
        case 'o': o.out = optarg; break;
        case 's': o.scripts = optarg; break;
        case 'S': search = optarg; break;
        case 'C': scaling = 1; break;
        case 'V': validate = optarg; break;
        case 'h': plot_usage(stdout); return 0;
        default:
            fprintf(stderr, "shardbench: plot: unknown or incomplete option '%s'\n\n",
                    argv[optind - 1]);
            plot_usage(stderr);
            return 2;
        }
    }
    if (validate)
        return plot_validate(validate, search || scaling || o.run || optind < argc, o.out,
                             o.scripts);
    if (search || scaling)
        return plot_json(search, scaling, o.out, o.scripts, o.run, argc - optind,
                         (const char *const *)argv + optind);
    if (optind < argc || !o.run || !o.out) {
        fprintf(stderr, "shardbench: plot: --run ID and --out DIR are required\n");
        return 2;
    }
    sb_error err = {0};
    int figures = 0, files = 0;
    if (sb_plot(&o, &figures, &files, &err))
        return cli_fail(&err);
    printf("%d figures (%d files) in %s from run %lld of %s\n", figures, files, o.out,
           (long long)o.run, o.db);
    return 0;
}
