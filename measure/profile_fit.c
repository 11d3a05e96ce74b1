/* profile_fit.c: what a launch of `shardbench profile` measured turned into
 * the predictive model's figures (shardbench/profile_run.h, sb_profile_fit).
 * Apart from profile_run.c, which measures on the ranks: these are the
 * arithmetic on rank 0 alone, no MPI, and can be checked on made-up
 * samples. The fitting primitives (sb_fit_nonneg, sb_prof_relay_scale)
 * are the model's own, in cost/profile.c. */
#include "shardbench/profile_run.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>

#include "shardbench/query.h"

void sb_prof_samples_free(sb_prof_samples *s)
{
    free(s->choices);
    free(s->strat);
    free(s->sums);
    free(s->rx);
    free(s->ry);
    free(s->probes);
    *s = (sb_prof_samples){0};
}

/* The fitted relayout seconds of a strategy's summed edge features, less
 * the per-edge constant (the same for every strategy: in fixed_s), as
 * sb_edge_cost prices them. */
static double relay_fit(const sb_profile *pf, const double *feat)
{
    return feat[1] * pf->relay_msg_s + feat[2] * pf->relay_word_s + feat[3] * pf->relay_local_s;
}

int sb_profile_fit(sb_prof_samples *s, const sb_problem *pb, sb_profile *pf, sb_error *err)
{
    const sb_model *m = pb->m;
    const int K = s->K, nops = s->nops;
    double beta[SB_PROF_EDGE_FEATURES] = {0};
    sb_fit_nonneg(s->rx, s->ry, s->nrows, SB_PROF_EDGE_FEATURES, beta);
    pf->relay_edge_s = beta[0]; /* part of the fixed part below, printed */
    pf->relay_msg_s = beta[1];
    pf->relay_word_s = beta[2];
    pf->relay_local_s = beta[3];
    pf->nops = s->nsums;
    pf->ops = calloc((size_t)(s->nsums ? s->nsums : 1), sizeof *pf->ops);
    /* the fixed part: each strategy's step less its ops (as averaged),
     * relayouts and update; the median over the strategies */
    double *res = calloc((size_t)K, sizeof *res), *sx = calloc((size_t)K, sizeof *sx);
    if (!pf->ops || !res || !sx) {
        free(res);
        free(sx);
        return sb_fail(err, SB_EXIT_INTERNAL, "profile: out of memory");
    }
    for (int i = 0; i < s->nsums; i++) {
        pf->ops[i] = s->sums[i].e;
        pf->ops[i].compute_s = s->sums[i].sum_compute / s->sums[i].e.samples;
        pf->ops[i].coll_s = s->sums[i].sum_coll / s->sums[i].e.samples;
    }
    for (int k = 0; k < K; k++) {
        double wel = 0.0;
        for (int i = 0; i < nops; i++) {
            int cidx = s->choices[(size_t)k * nops + i];
            wel += sb_prof_weight_elems(m, &m->ops[i],
                                        pb->cfg[i].c + (size_t)cidx * (size_t)m->ops[i].ndims);
        }
        /* what the relayouts leave: the step less its ops and update */
        res[k] = s->strat[k].step_s - s->strat[k].ops_s - wel * pf->update_s_per_elem;
        sx[k] = relay_fit(pf, s->strat[k].feat); /* its fitted relayouts */
    }
    /* the per-op relayouts are the least waiting rank's; the steps pay
     * those on their critical path (sb_prof_relay_scale) */
    double g = sb_prof_relay_scale(res, sx, K);
    pf->relay_scale = g;
    pf->relay_msg_s *= g;
    pf->relay_word_s *= g;
    pf->relay_local_s *= g;
    /* less the fitted relayouts, not the measured ones: what a prediction
     * adds back (sb_edge_cost) is the fit, and the relayouts' constant
     * part (a per-edge cost) belongs here, the same for every strategy */
    for (int k = 0; k < K; k++) {
        s->strat[k].relay_fit_s = relay_fit(pf, s->strat[k].feat);
        res[k] -= s->strat[k].relay_fit_s;
        s->strat[k].rest_s = res[k];
    }
    /* at least 0: a step spends that much outside its ops; a negative median is
     * its ops measured slower alone than in the step (a loaded machine), and it
     * priced a strategy of fewer ops below zero */
    pf->fixed_s = fmax(0.0, sb_median(res, K));
    free(sx);
    free(res);
    pf->total_s = 0.0;
    for (int k = 0; k < K; k++)
        pf->total_s += s->strat[k].step_s;
    /* the machine's speed during this launch: a prediction from its
     * figures can be scaled to a trial's own probe (results/query.c) */
    pf->probe_s = sb_median(s->probes, s->nprobes);
    return 0;
}
