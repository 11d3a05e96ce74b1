/* test_profile.c: the predictive cost model's arithmetic and storage
 * (shardbench/profile.h, profile_run.h, results/profiles.c):
 * - sb_fit_nonneg recovers known coefficients and drops a negative one;
 * - sb_profile_fit (measure/profile_fit.c) on made-up launch samples: the
 *   relayout fit, op means, fixed part, total and probe by hand;
 * - keys: shape and config strings, signatures that tell ops apart;
 * - sb_profile_apply: a measured config costs its seconds (plus update and,
 *   on the first op, the fixed part) in FLOP-equivalents at F, an unmeasured
 *   one is estimated from its kind's nearest entry by the reference ratio,
 *   a kind never measured keeps the analytic cost; edges are priced by the
 *   relayout fit;
 * - the database: a profile stored and read back, and of three launches of
 *   the same strategies the fastest one's figures chosen. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardbench/profile.h"
#include "shardbench/profile_run.h"
#include "shardbench/query.h"
#include "shardbench/results.h"

static const char *tiny =
    "model tiny\n"
    "cutoff 1\n"
    "param batch = 8\n"
    "input x[batch=batch, feat=16]\n"
    "h = dense(x, units=32, dim=units)\n"
    "a = act(h, fn=relu)\n"
    "y = dense(a, units=10, dim=out)\n"
    "l = softmax_xent(y)\n";

static void load_tiny(sb_model *m)
{
    sb_error err = {0};
    int rc = sb_model_parse(tiny, strlen(tiny), "tiny.model", NULL, 0, m, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
}

static void test_fit(void **state)
{
    (void)state;
    /* y = 2 + 3 a + 0.5 b exactly */
    double x[6 * 3], y[6], b[3];
    for (int i = 0; i < 6; i++) {
        x[i * 3] = 1;
        x[i * 3 + 1] = i;
        x[i * 3 + 2] = (i * 7) % 5;
        y[i] = 2 + 3 * i + 0.5 * ((i * 7) % 5);
    }
    assert_int_equal(sb_fit_nonneg(x, y, 6, 3, b), 0);
    assert_true(fabs(b[0] - 2) < 1e-9 && fabs(b[1] - 3) < 1e-9 && fabs(b[2] - 0.5) < 1e-9);
    /* y = 5 - a: the slope would be negative, so it is dropped: the mean */
    double x2[4 * 2], y2[4];
    for (int i = 0; i < 4; i++) {
        x2[i * 2] = 1;
        x2[i * 2 + 1] = i;
        y2[i] = 5 - i;
    }
    assert_int_equal(sb_fit_nonneg(x2, y2, 4, 2, b), 0);
    assert_true(b[1] == 0.0);
    assert_true(fabs(b[0] - 3.5) < 1e-9);
}

/* collectives priced by measured alpha-beta where the profile has them */
static void test_coll_measured(void **state)
{
    (void)state;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.tflops = 0.5;
    sb_coll_group g2 = {2, 2, 1}, g4 = {4, 4, 1};
    double ana2 = sb_coll_allreduce(&cp, 1000, g2), ana4 = sb_coll_allreduce(&cp, 1000, g4);
    cp.coll_mode = SB_COLL_MEASURED;
    cp.coll_alpha_s[SB_PCOLL_ALLREDUCE][2] = 1e-5;
    cp.coll_beta_s[SB_PCOLL_ALLREDUCE][2] = 2e-9;
    double S = cp.tflops * 1e12;
    assert_true(fabs(sb_coll_allreduce(&cp, 1000, g2) / S - (1e-5 + 4000 * 2e-9)) < 1e-15);
    assert_true(sb_coll_allreduce(&cp, 0, g2) == 0.0);
    assert_true(sb_coll_allreduce(&cp, 1000, g4) == ana4); /* not measured at 4: the link */
    assert_true(sb_coll_allgather(&cp, 1000, g2) == sb_coll_reduce_scatter(&cp, 1000, g2));
    cp.coll_mode = SB_COLL_FREE;
    assert_true(sb_coll_allreduce(&cp, 1000, g4) == 0.0 && sb_coll_p2p(&cp, 1000, 0) == 0.0);
    assert_true(ana2 > 0);
}

/* the relayout fits' scale to whole steps: rest = c + g relay */
static void test_relay_scale(void **state)
{
    (void)state;
    double relay[6] = {0.002, 0.003, 0.006, 0.0055, 0.005, 0.0025}, rest[6];
    for (int k = 0; k < 6; k++)
        rest[k] = 0.0004 + 1.4 * relay[k] + (k % 2 ? 1e-5 : -1e-5);
    double g = sb_prof_relay_scale(rest, relay, 6);
    assert_true(fabs(g - 1.4) < 0.02);
    /* too few strategies, or relayouts that do not differ: 1 */
    assert_true(sb_prof_relay_scale(rest, relay, 2) == 1.0);
    double same[4] = {0.003, 0.003, 0.00301, 0.003};
    assert_true(sb_prof_relay_scale(rest, same, 4) == 1.0);
    /* steps that fall as the relayouts grow: no negative scale, 1 */
    double fall[4] = {0.01, 0.008, 0.006, 0.004}, r4[4] = {0.001, 0.002, 0.003, 0.004};
    assert_true(sb_prof_relay_scale(fall, r4, 4) == 1.0);
    /* steps that grow by less than their relayouts (a slope of 0.1): 1 */
    double flat[4];
    for (int k = 0; k < 4; k++)
        flat[k] = 0.01 + 0.1 * r4[k];
    assert_true(sb_prof_relay_scale(flat, r4, 4) == 1.0);
}

static void test_keys(void **state)
{
    (void)state;
    sb_model m;
    load_tiny(&m);
    const sb_op *h = &m.ops[0], *y = &m.ops[2];
    int c[SB_MAX_DIMS] = {2, 1, 2};
    char shape[160], cfg[64], s1[20], s2[20];
    sb_prof_shape(h, c, shape, sizeof shape);
    sb_prof_config(h, c, cfg, sizeof cfg);
    assert_string_equal(shape, "4x32x8"); /* batch, units, in over 2, 1, 2 */
    assert_string_equal(cfg, "2,1,2");
    sb_prof_sig(&m, h, s1, sizeof s1);
    sb_prof_sig(&m, y, s2, sizeof s2);
    assert_string_not_equal(s1, s2); /* other dims, another op */
    assert_int_equal(strlen(s1), 16);
    char name[64];
    sb_machine_name("machines/cpu-here.machine", name, sizeof name);
    assert_string_equal(name, "cpu-here");
    sb_machine_name("h200-sxm", name, sizeof name);
    assert_string_equal(name, "h200-sxm");
    sb_model_free(&m);
}

/* A profile of tiny at 2 ranks: dense h's configs measured except one;
 * act measured at one config; dense y only at config 0; softmax_xent never. */
static void fill_profile(const sb_problem *pb, sb_profile *pf, int skip_h)
{
    memset(pf, 0, sizeof *pf);
    pf->ops = calloc(64, sizeof *pf->ops);
    assert_non_null(pf->ops);
    sb_cost_params ref;
    sb_cost_params_default(&ref);
    ref.cutoff = pb->cp.cutoff;
    for (int i = 0; i < 3; i++) {
        const sb_op *op = &pb->m->ops[i];
        for (int k = 0; k < pb->cfg[i].n; k++) {
            if ((i == 0 && k == skip_h) || (i == 1 && k > 0) || (i == 2 && k > 0))
                continue;
            const int *c = pb->cfg[i].c + (size_t)k * (size_t)op->ndims;
            sb_prof_op *e = &pf->ops[pf->nops++];
            snprintf(e->kind, sizeof e->kind, "%s", sb_op_kind_name(op->kind));
            sb_prof_shape(op, c, e->shape, sizeof e->shape);
            sb_prof_config(op, c, e->config, sizeof e->config);
            sb_prof_sig(pb->m, op, e->sig, sizeof e->sig);
            e->compute_s = 0.001 * (i + 1) * (k + 1);
            e->coll_s = 0.0001 * k;
            e->ref_cost = sb_op_cost(pb->m, op, c, &ref);
            sb_cost_params ref_free = ref;
            ref_free.coll_mode = SB_COLL_FREE;
            e->ref_compute = sb_op_cost(pb->m, op, c, &ref_free);
            e->samples = 1;
        }
    }
    /* an all-reduce over 2 ranks measured: 50 us + 1 ns a byte */
    pf->coll = calloc(1, sizeof *pf->coll);
    assert_non_null(pf->coll);
    pf->coll[0] = (sb_prof_coll){.kind = SB_PCOLL_ALLREDUCE, .group = 2, .alpha_s = 5e-5,
                                 .beta_s_per_byte = 1e-9, .points = 4};
    pf->ncoll = 1;
    /* sorted as the loader sorts */
    for (int a = 0; a < pf->nops; a++)
        for (int b = a + 1; b < pf->nops; b++) {
            sb_prof_op *x = &pf->ops[a], *y = &pf->ops[b];
            char kx[400], ky[400];
            snprintf(kx, sizeof kx, "%s|%s|%s|%s", x->kind, x->shape, x->config, x->sig);
            snprintf(ky, sizeof ky, "%s|%s|%s|%s", y->kind, y->shape, y->config, y->sig);
            int cmp = strcmp(x->kind, y->kind);
            if (!cmp)
                cmp = strcmp(x->shape, y->shape);
            if (!cmp)
                cmp = strcmp(x->config, y->config);
            if (!cmp)
                cmp = strcmp(x->sig, y->sig);
            if (cmp > 0) {
                sb_prof_op t = *x;
                *x = *y;
                *y = t;
            }
        }
    pf->relay_msg_s = 0.002;
    pf->relay_word_s = 1e-6;
    pf->relay_local_s = 3e-7;
    pf->fixed_s = 0.01;
    pf->update_s_per_elem = 1e-7;
}

static void test_apply(void **state)
{
    (void)state;
    sb_model m;
    load_tiny(&m);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.tflops = 0.5;
    snprintf(cp.machine, sizeof cp.machine, "machines/cpu-here.machine");
    sb_problem pb, ana;
    sb_error err = {0};
    assert_int_equal(sb_problem_build(&m, 2, &cp, &pb, &err), 0);
    assert_int_equal(sb_problem_build(&m, 2, &cp, &ana, &err), 0);
    sb_profile pf;
    int skip = 1;
    fill_profile(&pb, &pf, skip);
    sb_profile_stats st;
    assert_int_equal(sb_profile_apply(&pb, &pf, &st, &err), 0);
    double S = cp.tflops * 1e12;
    int total = 0;
    for (int i = 0; i < m.nops; i++)
        total += pb.cfg[i].n;
    assert_int_equal(st.configs, total);
    assert_int_equal(st.analytic, pb.cfg[3].n); /* softmax_xent: never measured */
    assert_int_equal(st.measured + st.estimated + st.analytic, total);
    assert_true(st.estimated >= 1 + (pb.cfg[1].n - 1) + (pb.cfg[2].n - 1));
    assert_true(pb.cp.profiled);
    /* op h, config 0: measured 1 ms + 0 coll, its weight shard's update,
     * and the fixed part (the first op) */
    const sb_op *h = &m.ops[0];
    const int *c0 = pb.cfg[0].c;
    const sb_prof_op *e = sb_profile_find(&pf, &m, h, c0);
    assert_non_null(e);
    double want = e->compute_s + e->coll_s + sb_prof_weight_elems(&m, h, c0) * 1e-7 + 0.01;
    assert_true(fabs(pb.cfg[0].cost[0] / S - want) < 1e-12);
    /* the skipped config: the nearest measured entry scaled by the
     * reference costs' ratio (checked against its bounds) */
    const int *cs = pb.cfg[0].c + (size_t)skip * (size_t)h->ndims;
    assert_null(sb_profile_find(&pf, &m, h, cs));
    double est = pb.cfg[0].cost[skip] / S - sb_prof_weight_elems(&m, h, cs) * 1e-7 - 0.01;
    assert_true(est > 0 && isfinite(est));
    /* dense y, measured at config 0 only: every other config of it is that
     * entry's kernels scaled by the reference costs without collectives,
     * plus its collectives priced by the measured all-reduce */
    const sb_op *yo = &m.ops[2];
    const sb_prof_op *ey = sb_profile_find(&pf, &m, yo, pb.cfg[2].c);
    assert_non_null(ey);
    sb_cost_params ref_free, ab = ana.cp, fr = ana.cp;
    sb_cost_params_default(&ref_free);
    ref_free.cutoff = pb.cp.cutoff;
    ref_free.devices = pb.p;
    ref_free.coll_mode = SB_COLL_FREE;
    fr.coll_mode = SB_COLL_FREE;
    sb_profile_coll_params(&pf, &ab);
    int with_coll = 0;
    for (int k = 1; k < pb.cfg[2].n; k++) {
        const int *ck = pb.cfg[2].c + (size_t)k * (size_t)yo->ndims;
        double coll = (sb_op_cost(&m, yo, ck, &ab) - sb_op_cost(&m, yo, ck, &fr)) / S;
        double want_k = ey->compute_s * sb_op_cost(&m, yo, ck, &ref_free) / ey->ref_compute + coll
                        + sb_prof_weight_elems(&m, yo, ck) * 1e-7;
        assert_true(fabs(pb.cfg[2].cost[k] / S - want_k) < 1e-12 * (1 + want_k));
        with_coll += coll > 0;
    }
    assert_true(with_coll > 0); /* some config of y all-reduces its partial sums */
    /* softmax_xent keeps the analytic cost */
    for (int k = 0; k < pb.cfg[3].n; k++)
        assert_true(pb.cfg[3].cost[k] == ana.cfg[3].cost[k]);
    /* an edge's relayout: the fit; one that moves nothing still copies
     * its two local shards */
    const sb_tensor *t = &m.tensors[m.ops[1].in[0].tensor];
    int l1[SB_MAX_DIMS] = {1, 1, 1}, l2[SB_MAX_DIMS] = {2, 1, 1};
    double whole = 1.0;
    for (int d = 0; d < t->ndims; d++)
        whole *= (double)t->dims[d].size;
    assert_true(sb_edge_local_words(t, l1, l1) == 2 * whole);
    assert_true(sb_edge_local_words(t, l1, l2) == whole + whole / 2);
    assert_true(fabs(sb_edge_cost(&pb.cp, t, l1, l1) / S - 2 * whole * 3e-7) < 1e-12);
    double w = sb_edge_words(t, l1, l2);
    assert_true(w > 0);
    assert_true(fabs(sb_edge_cost(&pb.cp, t, l1, l2) / S
                     - (0.002 + w * 1e-6 + 1.5 * whole * 3e-7)) < 1e-12);
    /* the features the profile fits them with: 1, moves, words, local */
    for (int e = 0; e < pb.nedges; e++) {
        int choice[8] = {0};
        double f[SB_PROF_EDGE_FEATURES];
        sb_prof_edge_features(&pb, e, choice, f);
        assert_true(f[0] == 1.0 && f[1] == (f[2] > 0 ? 1.0 : 0.0) && f[3] > 0);
    }
    /* the analytic problem prices the same edge otherwise */
    assert_true(sb_edge_cost(&ana.cp, t, l1, l2) != sb_edge_cost(&pb.cp, t, l1, l2));
    sb_profile_free(&pf);
    sb_problem_free(&pb);
    sb_problem_free(&ana);
    sb_model_free(&m);
}

static void db_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/test_profile-%d-%s", SB_BINARY_DIR, (int)getpid(), name);
    char side[600];
    unlink(buf);
    snprintf(side, sizeof side, "%s-wal", buf);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", buf);
    unlink(side);
}

static void store(const char *path, sb_profile *pf, double total, double compute)
{
    pf->probe_s = total / 100; /* each launch its own probe */
    sb_error err = {0};
    sb_db *db = NULL;
    assert_int_equal(sb_db_open(path, 0, &db, &err), 0);
    sb_db_close(db);
    sb_dbq *q = NULL;
    assert_int_equal(sb_dbq_open(path, 1, 0, &q, &err), 0);
    pf->total_s = total;
    for (int i = 0; i < pf->nops; i++)
        pf->ops[i].compute_s = compute;
    int64_t id = 0;
    int rc = sb_dbq_record_profile(q, pf, "tiny", "batch=8", 4, 3, "test", &id, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_true(id > 0);
    sb_dbq_close(q);
}

static void test_db(void **state)
{
    (void)state;
    sb_model m;
    load_tiny(&m);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    sb_error err = {0};
    assert_int_equal(sb_problem_build(&m, 2, &cp, &pb, &err), 0);
    sb_profile pf;
    fill_profile(&pb, &pf, -1);
    snprintf(pf.backend, sizeof pf.backend, "cpu");
    snprintf(pf.machine, sizeof pf.machine, "box");
    snprintf(pf.precision, sizeof pf.precision, "fp32");
    pf.ranks = 2;
    pf.seed = 1;
    pf.coll[0] = (sb_prof_coll){.kind = SB_PCOLL_ALLREDUCE, .group = 2, .alpha_s = 1e-5,
                                .beta_s_per_byte = 2e-10, .points = 4};
    pf.ncoll = 1;
    char path[512];
    db_path(path, sizeof path, "p.db");
    /* three launches of the same strategies: the second is the fastest */
    store(path, &pf, 0.30, 0.003);
    store(path, &pf, 0.20, 0.002);
    store(path, &pf, 0.35, 0.004);
    sb_dbq *q = NULL;
    assert_int_equal(sb_dbq_open(path, 0, 0, &q, &err), 0);
    sb_profile got;
    int found = 0;
    assert_int_equal(sb_dbq_load_profile(q, "", "box", 2, "tiny", "batch=8", &got, &found, &err),
                     0);
    assert_int_equal(found, 1);
    assert_int_equal(got.nops, pf.nops);
    assert_int_equal(got.profile_id, 2);
    assert_int_equal(got.fits_launches, 3);
    assert_int_equal(got.fits_same_model, 1);
    for (int i = 0; i < got.nops; i++) {
        assert_true(got.ops[i].compute_s == 0.002); /* the fastest launch's */
        assert_int_equal(got.ops[i].samples, 3);
        assert_true(got.ops[i].ref_compute == pf.ops[i].ref_compute && got.ops[i].ref_compute > 0);
    }
    assert_true(got.relay_msg_s == pf.relay_msg_s && got.fixed_s == pf.fixed_s);
    assert_true(got.relay_local_s == pf.relay_local_s && got.relay_local_s > 0);
    assert_true(got.probe_s == 0.20 / 100); /* the fits' launch's probe */
    assert_int_equal(got.ncoll, 1);
    assert_true(got.coll[0].alpha_s == 1e-5 && got.coll[0].group == 2);
    sb_profile_free(&got);
    /* another machine or rank count: none */
    assert_int_equal(sb_dbq_load_profile(q, "", "box", 4, "tiny", "batch=8", &got, &found, &err),
                     0);
    assert_int_equal(found, 0);
    assert_int_equal(sb_dbq_load_profile(q, "", "other", 2, "tiny", "batch=8", &got, &found, &err),
                     0);
    assert_int_equal(found, 0);
    /* another model: the fits of the newest launch, said so */
    assert_int_equal(sb_dbq_load_profile(q, "", "box", 2, "big", "batch=1", &got, &found, &err), 0);
    assert_int_equal(found, 1);
    assert_int_equal(got.fits_same_model, 0);
    assert_int_equal(got.profile_id, 3);
    sb_profile_free(&got);
    sb_dbq_close(q);
    /* sb_profile_use names the model it used */
    snprintf(pb.cp.machine, sizeof pb.cp.machine, "/x/box.machine");
    char msg[1024];
    assert_int_equal(sb_profile_use(&pb, path, msg, sizeof msg, &err), 1);
    assert_non_null(strstr(msg, "predictive"));
    assert_non_null(strstr(msg, "profiles of box at 2 ranks"));
    assert_true(pb.cp.profile_probe_s == 0.20 / 100); /* what bench stores beside predicted_s */
    db_path(path, sizeof path, "p.db"); /* removes it */
    sb_profile_free(&pf);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

/* sb_prof_core_s: the larger of the slowest rank's wall seconds and the
 * busiest core's CPU seconds; a core figure that is not finite leaves wall */
static void test_core_s(void **state)
{
    (void)state;
    assert_true(sb_prof_core_s(0.0016, 0.0030) == 0.0030); /* two ranks took turns */
    assert_true(sb_prof_core_s(0.0030, 0.0028) == 0.0030); /* side by side */
    assert_true(sb_prof_core_s(0.0016, NAN) == 0.0016);
    assert_true(sb_prof_core_s(0.0016, INFINITY) == 0.0016);
}

/* sb_prof_own_s: the largest of the three, never negative. An LSTM of two
 * layers on two ranks, one after the other: kernels 18 ms on the slowest
 * rank, 8 ms waited inside it by the least waiting, 26 ms in the op by the
 * rank that entered last, but 36 ms from the latest entry to the latest
 * exit (0.5 ms of relayouts): 17.5 ms its own. */
static void test_own(void **state)
{
    (void)state;
    assert_true(fabs(sb_prof_own_s(0.008, 0.026, 0.018, 0.036, 0.0005) - 0.0175) < 1e-12);
    /* a balanced op: its collectives */
    assert_true(fabs(sb_prof_own_s(0.002, 0.011, 0.010, 0.0115, 0.0) - 0.002) < 1e-12);
    /* the rank that entered last */
    assert_true(fabs(sb_prof_own_s(0.001, 0.015, 0.010, 0.0152, 0.001) - 0.005) < 1e-12);
    /* nothing took part, or every figure below the kernels */
    assert_true(sb_prof_own_s(NAN, NAN, NAN, NAN, NAN) == 0.0);
    assert_true(sb_prof_own_s(-1, 0.005, 0.010, 0.009, 0.0) == 0.0);
    assert_true(fabs(sb_prof_own_s(0.001, NAN, 0.010, 0.013, NAN) - 0.001) < 1e-12);
}

/* sb_profile_fit on made-up launch samples: the relayout fit recovers
 * exact coefficients, each op key's seconds are its samples' mean, and the
 * fixed part, total and probe follow from them by hand (two strategies:
 * no scale, sb_prof_relay_scale needs three). */
static void test_launch_fit(void **state)
{
    (void)state;
    sb_model m;
    load_tiny(&m);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    sb_error err = {0};
    assert_int_equal(sb_problem_build(&m, 2, &cp, &pb, &err), 0);
    enum { K = 2, NR = 6 };
    int nops = m.nops;
    sb_prof_samples s = {.K = K, .nops = nops, .nrows = NR, .nprobes = 3};
    s.choices = calloc((size_t)K * nops, sizeof *s.choices);
    s.strat = calloc(K, sizeof *s.strat);
    s.rx = calloc(NR * SB_PROF_EDGE_FEATURES, sizeof *s.rx);
    s.ry = calloc(NR, sizeof *s.ry);
    s.probes = calloc(3, sizeof *s.probes);
    s.sums = calloc(2, sizeof *s.sums);
    assert_true(s.choices && s.strat && s.rx && s.ry && s.probes && s.sums);
    for (int i = 0; i < nops; i++)
        s.choices[nops + i] = pb.cfg[i].n - 1; /* strategy 1: each op's last config */
    static const double rows[NR][4] = {{1, 1, 10, 5}, {2, 1, 30, 7}, {1, 0, 0, 9},
                                       {3, 2, 50, 1}, {2, 2, 5, 20}, {4, 1, 80, 3}};
    const double c[4] = {1e-3, 2e-3, 1e-6, 4e-7}; /* per edge, message, word, local word */
    for (int r = 0; r < NR; r++) {
        for (int j = 0; j < 4; j++) {
            s.rx[r * 4 + j] = rows[r][j];
            s.ry[r] += c[j] * rows[r][j];
        }
    }
    s.strat[0] = (sb_prof_strategy){.step_s = 0.10, .ops_s = 0.05, .feat = {3, 1, 100, 50}};
    s.strat[1] = (sb_prof_strategy){.step_s = 0.20, .ops_s = 0.08, .feat = {3, 2, 400, 80}};
    s.probes[0] = 0.3, s.probes[1] = 0.1, s.probes[2] = 0.2;
    snprintf(s.sums[0].e.kind, sizeof s.sums[0].e.kind, "dense");
    s.sums[0].e.samples = 2, s.sums[0].sum_compute = 0.004, s.sums[0].sum_coll = 0.001;
    snprintf(s.sums[1].e.kind, sizeof s.sums[1].e.kind, "act");
    s.sums[1].e.samples = 4, s.sums[1].sum_compute = 0.002, s.sums[1].sum_coll = 0.0;
    s.nsums = s.cap = 2;
    sb_profile pf = {.update_s_per_elem = 1e-9};
    assert_int_equal(sb_profile_fit(&s, &pb, &pf, &err), 0);
    assert_true(fabs(pf.relay_edge_s - c[0]) < 1e-12 && fabs(pf.relay_msg_s - c[1]) < 1e-12);
    assert_true(fabs(pf.relay_word_s - c[2]) < 1e-14 && fabs(pf.relay_local_s - c[3]) < 1e-14);
    assert_true(pf.relay_scale == 1.0);
    assert_int_equal(pf.nops, 2);
    assert_string_equal(pf.ops[0].kind, "dense");
    assert_true(fabs(pf.ops[0].compute_s - 0.002) < 1e-15 && fabs(pf.ops[0].coll_s - 0.0005) < 1e-15);
    assert_true(fabs(pf.ops[1].compute_s - 0.0005) < 1e-15 && pf.ops[1].coll_s == 0.0);
    double rest[K];
    for (int k = 0; k < K; k++) {
        double wel = 0.0;
        for (int i = 0; i < nops; i++)
            wel += sb_prof_weight_elems(&m, &m.ops[i],
                                        pb.cfg[i].c + (size_t)s.choices[k * nops + i] * m.ops[i].ndims);
        const double *f = s.strat[k].feat;
        double fit = f[1] * c[1] + f[2] * c[2] + f[3] * c[3];
        rest[k] = s.strat[k].step_s - s.strat[k].ops_s - wel * 1e-9 - fit;
        assert_true(fabs(s.strat[k].relay_fit_s - fit) < 1e-12);
        assert_true(fabs(s.strat[k].rest_s - rest[k]) < 1e-12);
    }
    assert_true(fabs(pf.fixed_s - (rest[0] + rest[1]) / 2) < 1e-12);
    assert_true(fabs(pf.total_s - 0.30) < 1e-15);
    assert_true(pf.probe_s == 0.2);
    sb_profile_free(&pf);
    sb_prof_samples_free(&s);
    assert_null(s.sums);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fit),
        cmocka_unit_test(test_relay_scale),
        cmocka_unit_test(test_launch_fit),
        cmocka_unit_test(test_core_s),
        cmocka_unit_test(test_own),
        cmocka_unit_test(test_coll_measured),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_db),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
