/* cmd_plot.c: `shardbench plot`: options, then sb_plot (plots/plot.c):
 * the figures of one run from the results database, drawn by gnuplot. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "shardbench/plots.h"
#include "shardbench/results.h"

static void plot_usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench plot --run ID --out DIR [--db FILE] [--scripts DIR]\n"
            "\n"
            "Figures of one run (PNG and SVG, gnuplot), from the results database only:\n"
            "  speedup-MODEL       speedup over data parallel vs P, one line per kind\n"
            "  fidelity-MODEL-pP   predicted cost vs measured step time (log-log), rho\n"
            "  search-MODEL        search time vs P per algorithm (log)\n"
            "  trend-MODEL-pP      best step time per kind across runs up to ID\n"
            "\n"
            "      --db FILE        results database (default %s)\n"
            "      --run ID         the run\n"
            "      --out DIR        where the figures go (created)\n"
            "      --scripts DIR    the gnuplot scripts (default: $SHARDBENCH_PLOTS, else\n"
            "                       plots/ of the source tree next to the binary)\n"
            "  -h, --help\n",
            SB_DB_DEFAULT_PATH);
}

int cmd_plot(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},      {"run", required_argument, 0, 'r'},
        {"out", required_argument, 0, 'o'},     {"scripts", required_argument, 0, 's'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
    };
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
        case 'h': plot_usage(stdout); return 0;
        default:
            fprintf(stderr, "shardbench: plot: unknown or incomplete option '%s'\n\n",
                    argv[optind - 1]);
            plot_usage(stderr);
            return 2;
        }
    }
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
