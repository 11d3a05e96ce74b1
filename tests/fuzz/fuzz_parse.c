/* fuzz_parse.c: libFuzzer target for the model-file parser.
 *
 * Each input is parsed as a model file (sb_model_parse). When it parses and
 * has fewer than 200 ops, the search problem is built for p = 4 and searched
 * with a 16 MB table limit (at 64 MB the ViT-B/16 seed took 12 s of the 30 s
 * timeout under the sanitizers; 3 s at 16 MB). Everything is freed, so
 * LeakSanitizer sees every leak. Besides crashes and sanitizer reports, it aborts on broken contracts:
 * a failure without an error message, a config index out of range, and a
 * search that is not exact: the breadth-first order must reach the same
 * cost as GenerateSeq, and on small problems both must equal brute force.
 * Run with scripts/fuzz.sh; not a unit test. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "shardbench/model.h"
#include "shardbench/search.h"

enum { FUZZ_P = 4, FUZZ_MAX_OPS = 200, FUZZ_MAX_BRUTE = 4096 };

static void check_error(const sb_error *err, const char *what)
{
    if (err->code == 0 || err->msg[0] == '\0') {
        fprintf(stderr, "fuzz_parse: %s failed without an error (code %d, msg '%s')\n", what,
                err->code, err->msg);
        abort();
    }
}

static void check_same(const char *what, double got, double want)
{
    if (!isfinite(got) || !isfinite(want))
        return;
    if (fabs(got - want) > 1e-9 * fmax(1.0, fabs(want))) {
        fprintf(stderr, "fuzz_parse: %s: cost %.17g, expected %.17g\n", what, got, want);
        abort();
    }
}

/* Runs one search; returns 0 and fills r, or -1 (error checked). */
static int search(const sb_problem *pb, sb_algo algo, sb_result *r)
{
    sb_search_opts so = {.algo = algo, .max_table_mb = 16, .progress = 0};
    sb_error err = {0};
    if (sb_search(pb, &so, r, &err)) {
        check_error(&err, "sb_search");
        return -1;
    }
    for (int i = 0; i < pb->m->nops; i++)
        if (r->choice[i] < 0 || r->choice[i] >= pb->cfg[i].n) {
            fprintf(stderr, "fuzz_parse: op %d: config index %d of %d\n", i, r->choice[i],
                    pb->cfg[i].n);
            abort();
        }
    return 0;
}

static void search_small(const sb_model *m)
{
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    sb_error err = {0};
    if (sb_problem_build(m, FUZZ_P, &cp, &pb, &err)) {
        check_error(&err, "sb_problem_build");
        return;
    }
    sb_result pase, bf, brute;
    if (search(&pb, SB_ALGO_PASE, &pase) == 0) {
        if (search(&pb, SB_ALGO_BF, &bf) == 0) {
            check_same("breadth-first order vs GenerateSeq", bf.total_cost, pase.total_cost);
            sb_result_free(&bf);
        }
        double combos = 1;
        for (int i = 0; i < m->nops; i++)
            combos *= pb.cfg[i].n;
        if (combos <= FUZZ_MAX_BRUTE) {
            if (sb_search_brute(&pb, &brute, &err) == 0) {
                check_same("GenerateSeq DP vs brute force", pase.total_cost, brute.total_cost);
                sb_result_free(&brute);
            } else {
                check_error(&err, "sb_search_brute");
            }
        }
        sb_result_free(&pase);
    }
    sb_problem_free(&pb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sb_model m;
    sb_error err = {0};
    if (sb_model_parse((const char *)data, size, "fuzz.model", NULL, 0, &m, &err)) {
        check_error(&err, "sb_model_parse");
        return 0;
    }
    if (m.nops < FUZZ_MAX_OPS)
        search_small(&m);
    sb_model_free(&m);
    return 0;
}
