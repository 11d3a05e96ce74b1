/* cmd_regress.c: `shardbench regress`: options, then sb_regress
 * (measure/regress.c): the step times of two runs compared per strategy;
 * exit 1 on a confirmed regression. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "shardbench/measure.h"
#include "shardbench/results.h"

/* Exit statuses: 0 no confirmed regression, 1 confirmed regression, 2 the
 * comparison could not be made (bad option, unknown run, database error). */
enum { REGRESS_OK = 0, REGRESS_FOUND = 1, REGRESS_CANNOT = 2 };

static void regress_usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench regress --baseline RUN --candidate RUN [--db FILE] "
            "[--threshold X]\n"
            "       [--conf C] [--alpha A] [--min-launches N] [--history N] [--figures DIR] [--whole] [--raw]\n"
            "\n"
            "Compares the step times of two runs per (model, P, strategy), one sample per\n"
            "launch (bench --trials N stores each launch): ratio of medians with a bootstrap\n"
            "interval, one-sided Mann-Whitney U, a threshold widened to the band of the\n"
            "strategy's history (earlier runs of the host without a confirmed regression).\n"
            "Regression: ratio > 1 + threshold, interval above 1, p < alpha (or a strategy\n"
            "that ran now fails); fewer launches than --min-launches: not enough data. Prints\n"
            "a Markdown summary; exit status 1 on a confirmed regression, 0 if none, 2 if the\n"
            "runs cannot be compared.\n"
            "\n"
            "      --db FILE          results database (default %s)\n"
            "      --baseline RUN     run id of the reference (e.g. last night's)\n"
            "      --candidate RUN    run id to judge\n"
            "      --threshold X      relative slowdown that counts (default 0.05 = 5%%)\n"
            "      --conf C           bootstrap interval's confidence (default 0.95)\n"
            "      --alpha A          Mann-Whitney level, one-sided (default 0.05)\n"
            "      --min-launches N   least launches per side (default 3)\n"
            "      --history N        earlier runs read for the band (default 7; 0: none)\n"
            "      --figures DIR      one trend figure per strategy (PNG, SVG) into DIR\n"
            "      --whole            judge the build as a whole too (exp of the median of the\n"
            "                         strategies' log ratios, with a bootstrap interval), for\n"
            "                         runs measured launch for launch (nightly --baseline-build)\n"
            "      --raw              keep every launch (default: a launch whose probe, the fixed work\n"
            "                         `run` times beside each step, took over 1.5 x the median\n"
            "                         probe ran on a busier machine and is set aside, when all\n"
            "                         launches have one)\n"
            "  -h, --help\n",
            SB_DB_DEFAULT_PATH);
}

static int parse_run(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || !isdigit((unsigned char)s[0]) || *end || v < 1)
        return -1;
    *out = v;
    return 0;
}

int cmd_regress(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},        {"baseline", required_argument, 0, 'b'},
        {"candidate", required_argument, 0, 'c'}, {"threshold", required_argument, 0, 't'},
        {"conf", required_argument, 0, 'C'},      {"alpha", required_argument, 0, 'a'},
        {"min-launches", required_argument, 0, 'n'}, {"history", required_argument, 0, 'H'},
        {"figures", required_argument, 0, 'F'},  {"raw", no_argument, 0, 'R'},
        {"whole", no_argument, 0, 'W'},
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0},
    };
    sb_regress_opts ro = {.db = SB_DB_DEFAULT_PATH, .threshold = 0.05, .history = 7};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        const char *cend = "";
        switch (c) {
        case 'd': ro.db = optarg; break;
        case 'b':
        case 'c':
            if (parse_run(optarg, c == 'b' ? &ro.baseline : &ro.candidate)) {
                fprintf(stderr, "shardbench: --%s: '%s' is not a run id\n",
                        c == 'b' ? "baseline" : "candidate", optarg);
                return REGRESS_CANNOT;
            }
            break;
        case 't':
            if (sb_parse_number(optarg, &ro.threshold, &cend) || *cend
                || !(ro.threshold >= 0 && ro.threshold < 100)) {
                fprintf(stderr, "shardbench: --threshold: '%s' is not a fraction like 0.05\n",
                        optarg);
                return REGRESS_CANNOT;
            }
            break;
        case 'C':
        case 'a':
        case 'n':
        case 'H': {
            double v = 0;
            int whole = c == 'n' || c == 'H';
            if (sb_parse_number(optarg, &v, &cend) || *cend || (whole && v != (int)v) ||
                !(whole ? v >= (c == 'n' ? 1 : 0) && v <= 1000 : v > 0 && v < 1)) {
                fprintf(stderr, "shardbench: %s: '%s' is out of range\n", argv[optind - 1],
                        optarg);
                return REGRESS_CANNOT;
            }
            if (c == 'C')
                ro.conf = v;
            else if (c == 'a')
                ro.alpha = v;
            else if (c == 'n')
                ro.min_n = (int)v;
            else
                ro.history = (int)v;
            break;
        }
        case 'F': ro.figures = optarg; break;
        case 'R': ro.raw = 1; break;
        case 'W': ro.whole = 1; break;
        case 'h': regress_usage(stdout); return 0;
        default:
            fprintf(stderr, "shardbench: regress: unknown or incomplete option '%s'\n\n",
                    argv[optind - 1]);
            regress_usage(stderr);
            return REGRESS_CANNOT;
        }
    }
    if (optind < argc || !ro.baseline || !ro.candidate) {
        fprintf(stderr, "shardbench: regress: --baseline RUN and --candidate RUN are required\n");
        return REGRESS_CANNOT;
    }
    sb_error err = {0};
    int r = sb_regress(&ro, &err);
    if (r < 0) {
        fprintf(stderr, "shardbench: %s\n", err.msg);
        return REGRESS_CANNOT;
    }
    return r ? REGRESS_FOUND : REGRESS_OK;
}
