/* algos.c: runs any of the search algorithms by name and wraps its
 * strategy in an sb_result (see algos.h). Not the algorithms themselves. */
#define _GNU_SOURCE
#include "algos.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"pase", "bf", "dp", "expert", "mcmc", "candidates"};

int algo_known(const char *name)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i]))
            return 1;
    return 0;
}

void algo_opts_default(algo_opts *ao)
{
    memset(ao, 0, sizeof *ao);
    ao->dp = (sb_search_opts){.algo = SB_ALGO_PASE, .max_table_mb = 4096, .progress = 1};
    sb_mcmc_opts_default(&ao->mcmc);
    ao->mcmc.progress = 1;
    ao->opt = SB_OPTIM_SGD;
    ao->mem_limit = SB_DEVICE_MEM_DEFAULT_GIB * 1073741824.0;
}

static void note_add(algo_opts *ao, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_add(algo_opts *ao, const char *fmt, ...)
{
    char *line = NULL, *joined = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (asprintf(&joined, "%s%s\n", ao->note ? ao->note : "", line) >= 0) {
        free(ao->note);
        ao->note = joined;
    }
    free(line);
}

static int max_configs(const sb_problem *pb)
{
    int mx = 0;
    for (int i = 0; i < pb->m->nops; i++)
        if (pb->cfg[i].n > mx)
            mx = pb->cfg[i].n;
    return mx;
}

static int run_mcmc(const sb_problem *pb, algo_opts *ao, int *choice, sb_error *err)
{
    sb_mcmc_result mr;
    if (sb_search_mcmc(pb, &ao->mcmc, &mr, err))
        return -1;
    memcpy(choice, mr.choice, (size_t)pb->m->nops * sizeof *choice);
    note_add(ao, "# mcmc: %ld iterations (budget %ld%s), %.3f s, seed %llu, temperature %g, "
                 "%ld accepted; start (cheaper of expert and dp) %.6e, best %.6e",
             mr.iterations, ao->mcmc.budget, mr.stopped_by_time ? ", stopped by --time-limit" : "",
             mr.seconds, (unsigned long long)ao->mcmc.seed, ao->mcmc.temperature, mr.accepted,
             mr.start_cost, mr.cost);
    note_add(ao, "# mcmc best cost over time (iteration, seconds, cost):");
    for (int k = 0; k < mr.ntrace; k++)
        if (k < 12 || k >= mr.ntrace - 12 || k % ((mr.ntrace / 24) + 1) == 0)
            note_add(ao, "#   %ld %.4f %.6e", mr.trace[k].iteration, mr.trace[k].seconds,
                     mr.trace[k].cost);
    sb_mcmc_result_free(&mr);
    return 0;
}

static int run_candidates(const sb_problem *pb, algo_opts *ao, int *choice, sb_error *err)
{
    sb_candidate_set cs;
    if (sb_candidates_enumerate(pb, ao->opt, ao->max_rule_sets, ao->dp.progress, &cs, err))
        return -1;
    if (cs.ncand == 0) {
        sb_candidate_set_free(&cs);
        return sb_fail(err, SB_EXIT_INTERNAL, "no candidates for model '%s' at p=%d", pb->m->name, pb->p);
    }
    int best = 0;
    while (best < cs.ncand && cs.cand[best].mem > ao->mem_limit)
        best++;
    if (best == cs.ncand) {
        sb_candidate_set_free(&cs);
        return sb_fail(err, SB_EXIT_INPUT, "no candidate of '%s' at p=%d fits --device-mem %.3g GiB",
                       pb->m->name, pb->p, ao->mem_limit / 1073741824.0);
    }
    int fb = sb_candidate_strategy(pb, &cs, &cs.cand[best], choice);
    char mesh[64], rules[1024];
    sb_cand_mesh_str(&cs.cand[best].mesh, mesh, sizeof mesh);
    sb_candidate_rules_str(&cs, &cs.cand[best], rules, sizeof rules);
    note_add(ao, "# candidates: rank %d of %d distinct strategies (the best that fits "
                 "--device-mem) from %ld rule sets over %d mesh shapes%s; mesh %s, rules %s, "
                 "%d ops fell back to the nearest valid config",
             best + 1, cs.ncand, cs.rule_sets, cs.nmeshes,
             cs.truncated ? " (TRUNCATED at the rule-set limit)" : "", mesh,
             rules[0] ? rules : "(none)", fb);
    sb_candidate_set_free(&cs);
    return fb < 0 ? sb_fail(err, SB_EXIT_INTERNAL, "out of memory") : 0;
}

int run_algo(const sb_problem *pb, const char *algo, algo_opts *ao, sb_result *r, sb_error *err)
{
    memset(r, 0, sizeof *r);
    if (!strcmp(algo, "pase") || !strcmp(algo, "bf")) {
        ao->dp.algo = !strcmp(algo, "bf") ? SB_ALGO_BF : SB_ALGO_PASE;
        return sb_search(pb, &ao->dp, r, err);
    }
    if (!algo_known(algo))
        return sb_fail(err, SB_EXIT_INPUT, "--algo: '%s' is not pase, bf, dp, expert, mcmc or candidates",
                       algo);
    r->choice = sb_malloc((size_t)pb->m->nops * sizeof *r->choice, err);
    if (!r->choice)
        return -1;
    double t0 = sb_now();
    int rc;
    if (!strcmp(algo, "dp")) {
        rc = sb_strategy_data_parallel(pb, r->choice, err);
    } else if (!strcmp(algo, "expert")) {
        const char *style = "";
        rc = sb_strategy_expert(pb, r->choice, &style, err);
        if (!rc)
            note_add(ao, "# expert: %s", style);
    } else if (!strcmp(algo, "mcmc")) {
        rc = run_mcmc(pb, ao, r->choice, err);
    } else {
        rc = run_candidates(pb, ao, r->choice, err);
    }
    if (rc) {
        sb_result_free(r);
        return -1;
    }
    r->seconds = sb_now() - t0;
    r->total_cost = sb_strategy_cost(pb, r->choice);
    r->max_configs = max_configs(pb);
    return 0;
}
