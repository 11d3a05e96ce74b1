/* cmd_nightly.c: `shardbench nightly`: its own options, the rest read as
 * `bench` options (with the main job's sizes when no -m is given), then
 * sb_nightly (measure/nightly.c). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardbench/measure.h"
#include "shardbench/results.h"

static void nightly_usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench nightly [--db FILE] [--baseline RUN|auto]\n"
            "                          [--baseline-build BIN|auto|none] [--keep-builds DIR|none]\n"
            "                          [--out DIR]\n"
            "                          [--trials N] [--extra N] [--threshold X] [--conf C]\n"
            "                          [--alpha A] [--history N] [BENCH OPTIONS]\n"
            "\n"
            "Benches this build (every strategy in N launches, interleaved), compares each\n"
            "strategy with the baseline: the latest nightly run of this host, compiler, backend\n"
            "and devices with no confirmed regression (auto), or the given run. When that night\n"
            "kept its build (--keep-builds), the build is measured again now, launch for launch\n"
            "with this one (A/B/A/B), so the machine's slow and fast phases hit both; else the\n"
            "night's stored launches are the baseline, with a threshold widened to the band of\n"
            "each strategy's own history. One sample per launch; ratio of medians with a\n"
            "bootstrap interval, one-sided Mann-Whitney U, alpha over the strategies by\n"
            "Benjamini-Hochberg. Strategies that look slower are measured again (--extra\n"
            "launches); only a regression the new launches show on their own too is confirmed.\n"
            "Writes DIR/report.md and one trend figure per strategy (default DIR:\n"
            "results/nightly-RUN), stores the verdict and keeps a copy of this build.\n"
            "Exit status 1 on a confirmed regression, 0 if none, 2 if it could not run.\n"
            "\n"
            "      --db FILE          results database (default %s)\n"
            "      --baseline RUN     run to compare with, or auto (default)\n"
            "      --baseline-build SHARDBENCH|auto|none\n"
            "                         a shardbench binary of the baseline (e.g. the last good\n"
            "                         commit's build): measured now, launch for launch with\n"
            "                         this build (A/B/A/B), into a run of its own that is the\n"
            "                         baseline (no history band then: both builds saw tonight's\n"
            "                         load); auto (default): the baseline night's kept build if\n"
            "                         it kept one that is still there, else its stored launches;\n"
            "                         none: always the stored launches\n"
            "      --keep-builds DIR  where a copy of this binary goes (DIR/DB-run-N/shardbench,\n"
            "                         DB the database's name), recorded with the verdict, for\n"
            "                         later nights' A/B (default: nightly-builds beside the\n"
            "                         database; none: not kept)\n"
            "      --out DIR          report and figures folder\n"
            "      --raw              keep every launch (default: a launch whose probe, the fixed work\n"
            "                         `run` times beside each step, took over 1.5 x the median\n"
            "                         probe ran on a busier machine and is set aside)\n"
            "      --trials N         launches per strategy (default 5)\n"
            "      --extra N          launches more per suspect (default 6; 0: no re-measure)\n"
            "      --threshold X      least relative slowdown that counts (default 0.05)\n"
            "      --conf C           bootstrap interval's confidence (default 0.95)\n"
            "      --alpha A          Mann-Whitney level, one-sided (default 0.05)\n"
            "      --history N        earlier runs read for each strategy's band (default 7)\n"
            "  BENCH OPTIONS          as `shardbench bench` (-m, -p, --set, --steps, --warmup,\n"
            "                         --top, --within, --timeout, --launcher, --calibration,\n"
            "                         --survivors, --backend); without -m: the main job's\n"
            "                         AlexNet and Transformer at p = 1,2,4 (scripts/main.sh),\n"
            "                         --steps 3 --warmup 1 --top 3 --within 4\n"
            "  -h, --help\n",
            SB_DB_DEFAULT_PATH);
}

static int num(const char *opt, const char *s, double lo, double hi, double *v)
{
    const char *end;
    *v = 0;
    if (sb_parse_number(s, v, &end) || *end || !(*v >= lo && *v <= hi)) {
        fprintf(stderr, "shardbench: %s: '%s' is not a number in %g..%g\n", opt, s, lo, hi);
        return -1;
    }
    return 0;
}

int cmd_nightly(int argc, char **argv)
{
    sb_nightly_opts o;
    sb_nightly_opts_default(&o);
    /* nightly's own options out; the rest to bench's parser, after the
     * defaults (later options win; --set only when -m is not given) */
    char **bargv = calloc((size_t)argc + 64, sizeof *bargv);
    if (!bargv)
        return 2;
    int bn = 0, has_m = 0, has_p = 0;
    const char *db = SB_DB_DEFAULT_PATH;
    bargv[bn++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
#define NEEDV                                                                                   \
    if (!v) {                                                                                   \
        fprintf(stderr, "shardbench: nightly: %s needs a value\n", a);                          \
        free(bargv);                                                                            \
        return 2;                                                                               \
    }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            nightly_usage(stdout);
            free(bargv);
            return 0;
        } else if (!strcmp(a, "--baseline")) {
            NEEDV;
            char *end;
            long long r = strtoll(v, &end, 10);
            if (!strcmp(v, "auto"))
                o.baseline = 0;
            else if (end == v || !isdigit((unsigned char)v[0]) || *end || r < 1) {
                fprintf(stderr, "shardbench: --baseline: '%s' is not a run id or auto\n", v);
                free(bargv);
                return 2;
            } else
                o.baseline = r;
            i++;
        } else if (!strcmp(a, "--baseline-build")) {
            NEEDV;
            if (strcmp(v, "auto") && strcmp(v, "none") && access(v, X_OK)) {
                fprintf(stderr, "shardbench: --baseline-build: '%s' is not an executable "
                        "(a shardbench binary, auto or none)\n", v);
                free(bargv);
                return 2;
            }
            o.baseline_build = v;
            i++;
        } else if (!strcmp(a, "--keep-builds")) {
            NEEDV;
            o.keep_builds = v;
            i++;
        } else if (!strcmp(a, "--raw")) {
            o.rule.raw = 1;
        } else if (!strcmp(a, "--out")) {
            NEEDV;
            o.out = v;
            i++;
        } else if (!strcmp(a, "--trials") || !strcmp(a, "--extra") || !strcmp(a, "--history")) {
            NEEDV;
            if (num(a, v, !strcmp(a, "--trials") ? 1 : 0, 1000, &x) || x != (int)x) {
                free(bargv);
                return 2;
            }
            *(!strcmp(a, "--trials") ? &o.trials : !strcmp(a, "--extra") ? &o.extra
                                                                           : &o.rule.history) =
                (int)x;
            i++;
        } else if (!strcmp(a, "--threshold") || !strcmp(a, "--conf") || !strcmp(a, "--alpha")) {
            NEEDV;
            int t = !strcmp(a, "--threshold");
            if (num(a, v, t ? 0 : 1e-6, t ? 100 : 0.999999, &x)) {
                free(bargv);
                return 2;
            }
            *(t ? &o.rule.threshold : !strcmp(a, "--conf") ? &o.rule.conf : &o.rule.alpha) = x;
            i++;
        } else {
            if (!strcmp(a, "-m") || !strncmp(a, "--model", 7))
                has_m = 1;
            if (!strcmp(a, "-p") || !strncmp(a, "--procs", 7))
                has_p = 1;
            if (!strcmp(a, "--db") && v)
                db = v;
            bargv[bn++] = argv[i];
        }
    }
    /* defaults first: bench's parser lets the later (given) ones win */
    static char *defs[] = {"--search-algos", "none", "--steps", "3", "--warmup", "1", "--top",
                           "3", "--within", "4", "--timeout", "300"};
    static char *main_sizes[] = {
        "-m", "alexnet,transformer", "--set", "alexnet:batch=16", "--set", "alexnet:image=99",
        "--set", "alexnet:width_div=4", "--set", "transformer:batch=8", "--set",
        "transformer:seq=32", "--set", "transformer:vocab=2000", "--set", "transformer:embed=128",
        "--set", "transformer:heads=4", "--set", "transformer:dk=32", "--set",
        "transformer:ff=512", "--set", "transformer:layers=2"};
    int nd = (int)(sizeof defs / sizeof *defs), nm = (int)(sizeof main_sizes / sizeof *main_sizes);
    char **full = calloc((size_t)(bn + nd + nm + 4), sizeof *full);
    if (!full) {
        free(bargv);
        return 2;
    }
    int k = 0;
    full[k++] = bargv[0];
    for (int i = 0; i < nd; i++)
        full[k++] = defs[i];
    if (!has_m)
        for (int i = 0; i < nm; i++)
            full[k++] = main_sizes[i];
    if (!has_p) {
        full[k++] = "-p";
        full[k++] = "1,2,4";
    }
    if (!strcmp(db, SB_DB_DEFAULT_PATH)) {
        full[k++] = "--db";
        full[k++] = (char *)db;
    }
    for (int i = 1; i < bn; i++)
        full[k++] = bargv[i];
    sb_error err = {0};
    int rc = parse_bench_args(k, full, &o.bench, &err);
    if (rc == 1) {
        nightly_usage(stdout);
        rc = 0;
    } else if (rc) {
        fprintf(stderr, "shardbench: nightly: %s\n", err.msg);
        rc = 2;
    } else {
        rc = sb_nightly(&o, argc, argv);
    }
    free(full);
    free(bargv);
    return rc;
}
