/* cmd_report.c: `shardbench report`: options, then sb_report
 * (plots/report.c): the paper's tables for one run, Markdown or CSV. */
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

static void report_usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench report --run ID [--db FILE] [--format md|csv] [--p P] "
            "[--table NAME]\n"
            "\n"
            "Tables of one run, from the results database only.\n"
            "\n"
            "      --db FILE        results database (default %s)\n"
            "      --run ID         the run (shardbench bench prints it)\n"
            "      --format md|csv  Markdown (default) or CSV (one block per table)\n"
            "      --p P            device count of the strategy table (default: the largest)\n"
            "      --table NAME     only one of: search, strategies, speedup, fidelity, best,\n"
            "                       measurements\n"
            "  -h, --help\n",
            SB_DB_DEFAULT_PATH);
}

int cmd_report(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},    {"run", required_argument, 0, 'r'},
        {"format", required_argument, 0, 'f'}, {"p", required_argument, 0, 'p'},
        {"table", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    sb_report_opts ro = {.db = SB_DB_DEFAULT_PATH};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'd': ro.db = optarg; break;
        case 'r':
        case 'p': {
            errno = 0;
            long long v = strtoll(optarg, &end, 10);
            if (errno || end == optarg || !isdigit((unsigned char)optarg[0]) || *end || v < 1 || (c == 'p' && v > 65536)) {
                fprintf(stderr, "shardbench: --%s: '%s' is not a %s\n", c == 'r' ? "run" : "p",
                        optarg, c == 'r' ? "run id" : "device count");
                return 2;
            }
            if (c == 'r')
                ro.run = v;
            else
                ro.p = (int)v;
            break;
        }
        case 'f':
            if (strcmp(optarg, "md") && strcmp(optarg, "csv")) {
                fprintf(stderr, "shardbench: --format: '%s' is not md or csv\n", optarg);
                return 2;
            }
            ro.csv = !strcmp(optarg, "csv");
            break;
        case 't':
            if (strcmp(optarg, "search") && strcmp(optarg, "strategies") &&
                strcmp(optarg, "speedup") && strcmp(optarg, "fidelity") &&
                strcmp(optarg, "best") && strcmp(optarg, "measurements")) {
                fprintf(stderr, "shardbench: --table: '%s' is not search, strategies, speedup, "
                                "fidelity, best or measurements\n", optarg);
                return 2;
            }
            ro.only = optarg;
            break;
        case 'h': report_usage(stdout); return 0;
        default:
            fprintf(stderr, "shardbench: report: unknown or incomplete option '%s'\n\n",
                    argv[optind - 1]);
            report_usage(stderr);
            return 2;
        }
    }
    if (optind < argc || !ro.run) {
        fprintf(stderr, "shardbench: report: --run ID is required\n");
        return 2;
    }
    sb_error err = {0};
    return sb_report(&ro, &err) ? cli_fail(&err) : 0;
}
