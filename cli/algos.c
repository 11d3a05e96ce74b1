/* algos.c: runs any of the search algorithms by name and wraps its
 * strategy in an sb_result (see algos.h). Not the algorithms themselves. */
#define _GNU_SOURCE
#include "algos.h"
#include "shardbench/precision.h"
#include "shardbench/profile.h"
#include "shardbench/strategy.h"

#include <math.h>
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

/* A total cost that is not finite is never printed or stored. */
static int finite_total(const sb_problem *pb, sb_result *r, sb_error *err)
{
    if (isfinite(r->total_cost))
        return 0;
    sb_fail(err, SB_EXIT_INPUT, "%s at p=%d: the total cost is not a finite number: the cost "
            "parameters (%s) are out of range for this model", pb->m->name, pb->p,
            pb->cp.calibration[0] ? pb->cp.calibration : "--flops, --bw");
    sb_result_free(r);
    return -1;
}

int run_algo(const sb_problem *pb, const char *algo, algo_opts *ao, sb_result *r, sb_error *err)
{
    memset(r, 0, sizeof *r);
    if (!strcmp(algo, "pase") || !strcmp(algo, "bf")) {
        ao->dp.algo = !strcmp(algo, "bf") ? SB_ALGO_BF : SB_ALGO_PASE;
        int rc = ao->mem_bound ? sb_search_within(pb, &ao->dp, ao->mem_limit, ao->opt, r, NULL, err)
                               : sb_search(pb, &ao->dp, r, err);
        if (!rc && ao->mem_bound)
            r->mem_limit_bytes = ao->mem_limit;
        return rc ? -1 : finite_total(pb, r, err);
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
    return finite_total(pb, r, err);
}

void shared_opts_default(shared_opts *so)
{
    memset(so, 0, sizeof *so);
    sb_cost_params_default(&so->cp);
    so->device_gib = SB_DEVICE_MEM_DEFAULT_GIB;
    so->precision = -1;
    so->attention = -1;
    algo_opts_default(&so->ao);
}

int shared_opt(shared_opts *so, int c, const char *arg, sb_error *err)
{
    algo_opts *ao = &so->ao;
    int rc = 0;
    switch (c) {
    case 'm': so->model = arg; break;
    case 'p': rc = parse_int_opt(arg, "-p", 1, SB_MAX_DEVICES, &so->p, err); break;
    case 's':
        rc = so->nset == 64 ? sb_fail(err, SB_EXIT_INPUT, "too many --set options")
                            : sb_setting_parse(arg, &so->set[so->nset++], err);
        break;
    case 'F': rc = parse_pos_double(arg, "--flops", &so->cp.tflops, err), so->fb_given = 1; break;
    case 'B': rc = parse_pos_double(arg, "--bw", &so->cp.gbs, err), so->fb_given = 1; break;
    case 'c': rc = parse_int_opt(arg, "--cutoff", 1, 1 << 30, &so->cp.cutoff, err); break;
    case 'K': so->calibration = arg; break;
    case 'H': so->machine = arg; break;
    case 'Q': so->profiles = arg; break;
    case 'G':
        rc = parse_pos_double(arg, "--device-mem", &so->device_gib, err), so->mem_given = 1;
        break;
    case 'L':
        rc = parse_mem_size(arg, "--memory", &so->device_gib, err);
        so->mem_given = so->mem_bound = 1;
        break;
    case 'o': rc = sb_optimizer_parse(arg, &ao->opt, err); break;
    case 'Z': rc = parse_int_opt(arg, "--zero", 0, 3, &so->cp.zero, err); break;
    case SB_OPT_RECOMPUTE: rc = sb_recompute_mode_parse(arg, &so->cp.recompute, err); break;
    case SB_OPT_PRECISION: rc = sb_precision_parse(arg, "--precision", &so->precision, err); break;
    case SB_OPT_GRAD_DTYPE: rc = sb_grad_dtype_parse(arg, &so->grad_word_bytes, err); break;
    case SB_OPT_ATTENTION:
        if (!strcmp(arg, "fused") || !strcmp(arg, "materialized"))
            so->attention = !strcmp(arg, "fused");
        else
            rc = sb_fail(err, SB_EXIT_INPUT, "--attention: '%s' is not fused or materialized", arg);
        break;
    case 'n': rc = parse_long_opt(arg, "--budget", &ao->mcmc.budget, err); break;
    case 't': rc = parse_pos_double(arg, "--time-limit", &ao->mcmc.time_limit, err); break;
    case 'e': rc = parse_seed(arg, &ao->mcmc.seed, err); break;
    case 'T': rc = parse_pos_double(arg, "--temperature", &ao->mcmc.temperature, err); break;
    case 'M': rc = parse_pos_double(arg, "--max-table-mb", &ao->dp.max_table_mb, err); break;
    case 'U': ao->dp.prune = 1; break;
    case 'R': rc = parse_long_opt(arg, "--max-rule-sets", &ao->max_rule_sets, err); break;
    default: return 0;
    }
    return rc ? -1 : 1;
}

static int calibrate(shared_opts *so, sb_error *err);

int shared_opts_calibrate(shared_opts *so, sb_error *err)
{
    if (calibrate(so, err))
        return -1;
    if (so->attention >= 0 && !(so->cp.gpu_sms > 0))
        return sb_fail(err, SB_EXIT_INPUT, "--attention: needs a GPU machine file (--machine "
                       "with the GPU op model's figures, docs/machines.md); the reference and "
                       "CPU models price attention as the runtime computes it (materialized)");
    return 0;
}

int shared_opts_fuse(const shared_opts *so, sb_model *m, sb_error *err)
{
    if (!(so->cp.gpu_sms > 0))
        return 0;
    return sb_model_gpu_run(m, so->attention != 0, err);
}

static int calibrate(shared_opts *so, sb_error *err)
{
    if (so->machine)
        return cli_apply_machine_at(so->machine, so->fb_given, so->calibration, so->mem_given,
                                    &so->device_gib, so->precision, so->grad_word_bytes,
                                    &so->cp, err);
    if (so->calibration && cli_is_machine_file(so->calibration)) /* an alias of --machine FILE */
        return cli_apply_machine_at(so->calibration, so->fb_given, NULL, so->mem_given,
                                    &so->device_gib, so->precision, so->grad_word_bytes,
                                    &so->cp, err);
    if (cli_apply_machine_at(NULL, 0, NULL, 0, NULL, so->precision, so->grad_word_bytes, &so->cp,
                             err))
        return -1;
    return cli_apply_calibration(so->calibration, so->fb_given, &so->cp, err);
}

/* The exact DP's tables bounded before the problem is priced
 * (sb_search_estimate_model): a bound over --max-table-mb is refused now,
 * with the figures and what to do, rather than minutes later at the limit.
 * The bound is at least what the DP charges, so a --max-table-mb at the
 * bound always lets the DP run to its end. */
static int refuse_unfinishable(const sb_model *m, const shared_opts *so, sb_error *err)
{
    double limit = (so->ao.dp.max_table_mb > 0 ? so->ao.dp.max_table_mb : 4096) * 1e6;
    sb_table_estimate te;
    if (sb_search_estimate_model(m, so->p, &so->cp, &so->ao.dp, limit, &te, err))
        return -1;
    double secs = te.seconds;
    int maxc = te.max_configs;
    const char *tr = getenv("SB_DP_TRACE");
    if (tr && *tr && strcmp(tr, "0"))
        fprintf(stderr, "[dp] table bound: peak %.4f MB at '%s' (dependent set %d), largest "
                        "table %.4g entries, largest dependent set %d; %.3f s (the bound %.3f s)\n",
                te.peak_bytes / 1e6, te.peak_vertex >= 0 ? m->ops[te.peak_vertex].name : "-",
                te.peak_depset, te.largest_table, te.max_depset, secs, te.seconds);
    if (te.too_wide >= 0)
        return sb_fail(err, SB_EXIT_INPUT,
                       "search of %s at p=%d refused before the DP: op '%s' has a dependent set "
                       "of more than 32 ops, more than the exact DP takes; search the full space "
                       "(--space full) or price Megatron-LM's grid (--algo megatron)",
                       m->name, so->p, m->ops[te.too_wide].name);
    if (!(te.peak_bytes > limit))
        return 0;
    return sb_fail(err, SB_EXIT_INPUT,
                   "search of %s at p=%d refused before the DP: its tables would need up to "
                   "%.0f MB at once (at op '%s', dependent set %d), over the table limit of "
                   "%.0f MB (--max-table-mb); the bound comes from the %d ops' config counts "
                   "(at most %d) and the DP's dependent sets, in %.2f s. The exact op-level DP "
                   "over all %d devices cannot finish within the limit: search the full space "
                   "(--space full --memory SIZE: each pipeline stage's DP is small), price "
                   "Megatron-LM's grid (--algo megatron), or give --max-table-mb %.0f (the "
                   "bound) where the memory is there",
                   m->name, so->p, te.peak_bytes / 1e6, m->ops[te.peak_vertex].name,
                   te.peak_depset, limit / 1e6, m->nops, maxc, secs, so->p,
                   ceil(te.peak_bytes / 1e6));
}

int shared_opts_problem(shared_opts *so, sb_model *m, sb_problem *pb, sb_error *err)
{
    if (sb_model_load(so->model, so->set, so->nset, m, err))
        return -1;
    if (shared_opts_fuse(so, m, err)) {
        sb_model_free(m);
        return -1;
    }
    if (so->refuse_tables && refuse_unfinishable(m, so, err)) {
        sb_model_free(m);
        return -1;
    }
    if (sb_problem_build(m, so->p, &so->cp, pb, err)) {
        sb_model_free(m);
        return -1;
    }
    /* with a machine file, its profiles when the database has them */
    const char *db = so->profiles ? so->profiles : "results/shardbench.db";
    if (so->cp.machine[0] && strcmp(db, "none")) {
        if (sb_profile_use(pb, db, so->cost_model, sizeof so->cost_model, err) < 0) {
            sb_problem_free(pb);
            sb_model_free(m);
            return -1;
        }
        note_add(&so->ao, "%s", so->cost_model);
    }
    return 0;
}
