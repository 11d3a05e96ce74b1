/* results/profiles.c: the predictive cost model's tables (schema version 7:
 * profiles, op_profiles, coll_profiles): a profile stored whole in one
 * transaction, and read back as the newest figure of every key for one
 * backend, machine and rank count (shardbench/profile.h, query.h). */
#define _GNU_SOURCE
#include "dbq_int.h"
#include "shardbench/query.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "shardbench/profile.h"

static int exec_sql(sb_dbq *q, const char *sql, const char *doing, sb_error *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(sb_dbq_handle(q), sql, NULL, NULL, &msg);
    sqlite3_free(msg);
    return rc == SQLITE_OK ? 0 : sb_dbq_fail(q, rc, doing, err);
}

static int step_done(sb_dbq *q, sqlite3_stmt *st, const char *doing, sb_error *err)
{
    if (sb_dbq_step(q, st, doing, err) < 0)
        return -1;
    sqlite3_finalize(st);
    return 0;
}

int sb_dbq_record_profile(sb_dbq *q, const sb_profile *pf, const char *model, const char *params,
                          int strategies, int steps, const char *command_line, int64_t *id,
                          sb_error *err)
{
    const char *doing = "recording a profile";
    if (sb_dbq_version(q) < 9)
        return sb_fail(err, SB_EXIT_INPUT, "%s: schema version %d is older than profiles need "
                       "(9; open it with a current shardbench first)", sb_dbq_path(q),
                       sb_dbq_version(q));
    if (exec_sql(q, "BEGIN IMMEDIATE", doing, err))
        return -1;
    sqlite3_stmt *st;
    if (sb_dbq_query(q,
                     "INSERT INTO profiles (backend, machine, ranks, precision, model, params, "
                     "strategies, steps, relay_msg_s, relay_word_s, fixed_s, update_s_per_elem, "
                     "command_line, seed, total_s, relay_local_s, probe_s) VALUES (?1, ?2, ?3, "
                     "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                     &st, doing, err, "ttitttiiddddtIddD", pf->backend, pf->machine, pf->ranks,
                     pf->precision, model, params, strategies, steps, pf->relay_msg_s,
                     pf->relay_word_s, pf->fixed_s, pf->update_s_per_elem, command_line,
                     (int64_t)pf->seed, pf->total_s, pf->relay_local_s,
                     pf->probe_s > 0 ? pf->probe_s : NAN)
        || step_done(q, st, doing, err))
        goto fail;
    int64_t pid = sqlite3_last_insert_rowid(sb_dbq_handle(q));
    for (int i = 0; i < pf->nops; i++) {
        const sb_prof_op *e = &pf->ops[i];
        if (sb_dbq_query(q,
                         "INSERT INTO op_profiles (profile_id, kind, shape, config, sig, "
                         "compute_s, coll_s, ref_cost, samples, ref_compute) VALUES (?1, ?2, ?3, "
                         "?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                         &st, doing, err, "Ittttdddid", pid, e->kind, e->shape, e->config,
                         e->sig, e->compute_s, e->coll_s, e->ref_cost, e->samples, e->ref_compute)
            || step_done(q, st, doing, err))
            goto fail;
    }
    for (int i = 0; i < pf->ncoll; i++) {
        const sb_prof_coll *c = &pf->coll[i];
        if (sb_dbq_query(q,
                         "INSERT INTO coll_profiles (profile_id, kind, grp, alpha_s, "
                         "beta_s_per_byte, points) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                         &st, doing, err, "Itiddi", pid, sb_pcoll_name(c->kind), c->group,
                         c->alpha_s, c->beta_s_per_byte, c->points)
            || step_done(q, st, doing, err))
            goto fail;
    }
    if (exec_sql(q, "COMMIT", doing, err))
        goto fail;
    if (id)
        *id = pid;
    return 0;
fail:
    sqlite3_exec(sb_dbq_handle(q), "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

static int cmp_op(const void *a, const void *b)
{
    const sb_prof_op *x = a, *y = b;
    int c = strcmp(x->kind, y->kind);
    if (!c)
        c = strcmp(x->shape, y->shape);
    if (!c)
        c = strcmp(x->config, y->config);
    if (!c)
        c = strcmp(x->sig, y->sig);
    return c;
}

static void copy_text(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src); }

static int grow(void **p, int *cap, int n, size_t size) { return sb_grow(p, cap, n, size, 64); }

/* A profile launch of (machine, ranks): its id, group (model, params,
 * strategies' seed) and speed: its total over its group's median total
 * (1: typical; below 1: a fast launch). */
typedef struct {
    int64_t id;
    char model[128], params[512];
    int64_t seed;
    double total, speed;
    double fits[4], relay_local; /* relay_local: 0 before schema 8 */
    double probe;                /* NaN before schema 9 */
    char precision[8];
} launch;

static const launch *find_launch(const launch *l, int n, int64_t id)
{
    for (int i = 0; i < n; i++)
        if (l[i].id == id)
            return &l[i];
    return NULL;
}

/* Every launch of (backend, machine, ranks), newest first, into *L (*nl;
 * malloc'd), each with its speed: its total against the median total of
 * the newest SB_PROFILE_KEEP launches of its (model, params, seed). */
static int load_launches(sb_dbq *q, const char *backend, const char *machine, int ranks,
                         launch **out, int *nl_out, sb_error *err)
{
    const char *doing = "reading the profiles";
    sqlite3_stmt *st;
    /* schema 7 had no relay_local_s (0, as those launches were fitted) nor
     * probe_s */
    int v8 = sb_dbq_version(q) >= 8, v9 = sb_dbq_version(q) >= 9;
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT id, model, params, seed, total_s, relay_msg_s, relay_word_s, fixed_s, "
             "update_s_per_elem, precision, %s, %s FROM profiles WHERE (backend = ?1 OR ?1 = '') "
             "AND machine = ?2 AND ranks = ?3 ORDER BY id DESC",
             v8 ? "relay_local_s" : "0.0", v9 ? "probe_s" : "NULL");
    if (sb_dbq_query(q, sql, &st, doing, err, "tti", backend, machine, ranks))
        return -1;
    launch *L = NULL;
    int nl = 0, capl = 0, rc;
    while ((rc = sb_dbq_step(q, st, doing, err)) > 0) {
        if (grow((void **)&L, &capl, nl, sizeof *L)) {
            sqlite3_finalize(st);
            free(L);
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory reading the profiles");
        }
        launch *l = &L[nl++];
        memset(l, 0, sizeof *l);
        l->id = sqlite3_column_int64(st, 0);
        copy_text(l->model, sizeof l->model, sb_dbq_text(st, 1));
        copy_text(l->params, sizeof l->params, sb_dbq_text(st, 2));
        l->seed = sqlite3_column_int64(st, 3);
        l->total = sb_dbq_real(st, 4);
        for (int j = 0; j < 4; j++)
            l->fits[j] = sb_dbq_real(st, 5 + j);
        copy_text(l->precision, sizeof l->precision, sb_dbq_text(st, 9));
        l->relay_local = sb_dbq_real(st, 10);
        l->probe = sb_dbq_real(st, 11);
    }
    if (rc < 0) {
        free(L);
        return -1;
    }
    sqlite3_finalize(st);
    for (int i = 0; i < nl; i++) {
        double t[SB_PROFILE_KEEP];
        int k = 0;
        for (int j = 0; j < nl && k < SB_PROFILE_KEEP; j++)
            if (!strcmp(L[j].model, L[i].model) && !strcmp(L[j].params, L[i].params)
                && L[j].seed == L[i].seed)
                t[k++] = L[j].total;
        double m = k ? sb_median(t, k) : L[i].total;
        L[i].speed = m > 0 ? L[i].total / m : 1.0;
    }
    *out = L;
    *nl_out = nl;
    return 0;
}

/* pf's fits: those of the fastest of the newest SB_PROFILE_KEEP launches of
 * this model and sizes, else of the newest launch of this model, else of
 * any (L[0], the newest). */
static void pick_fits(const launch *L, int nl, const char *model, const char *params,
                      sb_profile *pf)
{
    const launch *fit = NULL;
    int kept = 0;
    for (int i = 0; i < nl && kept < SB_PROFILE_KEEP; i++)
        if (model && params && !strcmp(L[i].model, model) && !strcmp(L[i].params, params)) {
            kept++;
            if (!fit || L[i].speed < fit->speed)
                fit = &L[i];
        }
    pf->fits_same_model = fit != NULL;
    pf->fits_launches = kept ? kept : 1;
    for (int i = 0; i < nl && !fit && model; i++) /* the newest of this model at other sizes */
        if (!strcmp(L[i].model, model)) {
            fit = &L[i];
            pf->fits_other_sizes = 1;
        }
    if (!fit)
        fit = &L[0];
    pf->profile_id = fit->id;
    snprintf(pf->fits_model, sizeof pf->fits_model, "%s (%s)", fit->model, fit->params);
    copy_text(pf->precision, sizeof pf->precision, fit->precision);
    pf->relay_msg_s = fit->fits[0];
    pf->relay_word_s = fit->fits[1];
    pf->fixed_s = fit->fits[2];
    pf->update_s_per_elem = fit->fits[3];
    pf->relay_local_s = fit->relay_local;
    pf->probe_s = fit->probe;
}

/* pf->ops: every key, of its newest SB_PROFILE_KEEP measurements the one of
 * the fastest launch (L's speeds), sorted by key. */
static int load_ops(sb_dbq *q, const char *backend, const char *machine, int ranks,
                    const launch *L, int nl, sb_profile *pf, sb_error *err)
{
    const char *doing = "reading the profiles";
    sqlite3_stmt *st;
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT o.kind, o.shape, o.config, o.sig, o.compute_s, o.coll_s, o.ref_cost, "
             "o.samples, o.profile_id, %s FROM op_profiles o JOIN profiles p ON p.id = "
             "o.profile_id WHERE (p.backend = ?1 OR ?1 = '') AND p.machine = ?2 AND "
             "p.ranks = ?3 ORDER BY o.kind, o.shape, o.config, o.sig, o.profile_id DESC",
             sb_dbq_version(q) >= 8 ? "o.ref_compute" : "0.0");
    if (sb_dbq_query(q, sql, &st, doing, err, "tti", backend, machine, ranks))
        return -1;
    int cap = 0, kept = 0, rc;
    double best_speed = 0;
    sb_prof_op cur;
    memset(&cur, 0, sizeof cur);
    for (;;) {
        if ((rc = sb_dbq_step(q, st, doing, err)) < 0)
            return -1;
        sb_prof_op e;
        memset(&e, 0, sizeof e);
        if (rc > 0) {
            copy_text(e.kind, sizeof e.kind, sb_dbq_text(st, 0));
            copy_text(e.shape, sizeof e.shape, sb_dbq_text(st, 1));
            copy_text(e.config, sizeof e.config, sb_dbq_text(st, 2));
            copy_text(e.sig, sizeof e.sig, sb_dbq_text(st, 3));
        }
        int same_key = rc > 0 && kept && !strcmp(e.kind, cur.kind) && !strcmp(e.shape, cur.shape)
                       && !strcmp(e.config, cur.config) && !strcmp(e.sig, cur.sig);
        if (!same_key && kept) { /* the previous key is complete */
            if (grow((void **)&pf->ops, &cap, pf->nops, sizeof *pf->ops)) {
                sqlite3_finalize(st);
                return sb_fail(err, SB_EXIT_INTERNAL, "out of memory reading the profiles");
            }
            pf->ops[pf->nops++] = cur;
            kept = 0;
        }
        if (rc == 0)
            break;
        if (same_key && kept == SB_PROFILE_KEEP)
            continue;
        const launch *l = find_launch(L, nl, sqlite3_column_int64(st, 8));
        double speed = l ? l->speed : 1.0;
        if (!kept || speed < best_speed) {
            int samples = kept ? cur.samples : 0;
            cur = e;
            cur.compute_s = sb_dbq_real(st, 4);
            cur.coll_s = sb_dbq_real(st, 5);
            cur.ref_cost = sb_dbq_real(st, 6);
            cur.ref_compute = sb_dbq_real(st, 9);
            cur.samples = samples;
            best_speed = speed;
        }
        cur.samples += sqlite3_column_int(st, 7);
        kept++;
    }
    sqlite3_finalize(st);
    if (pf->nops)
        qsort(pf->ops, (size_t)pf->nops, sizeof *pf->ops, cmp_op);
    return 0;
}

/* pf->coll: per (kind, group), the median alpha and beta of the newest
 * SB_PROFILE_KEEP launches. */
static int load_colls(sb_dbq *q, const char *backend, const char *machine, int ranks,
                      sb_profile *pf, sb_error *err)
{
    const char *doing = "reading the profiles";
    sqlite3_stmt *st;
    if (sb_dbq_query(q,
                     "SELECT c.kind, c.grp, c.alpha_s, c.beta_s_per_byte, c.points FROM "
                     "coll_profiles c JOIN profiles p ON p.id = c.profile_id WHERE (p.backend = "
                     "?1 OR ?1 = '') AND p.machine = ?2 AND p.ranks = ?3 ORDER BY c.kind, c.grp, "
                     "c.profile_id DESC",
                     &st, doing, err, "tti", backend, machine, ranks))
        return -1;
    int cap = 0, rc;
    double al[SB_PROFILE_KEEP], be[SB_PROFILE_KEEP];
    int ck = -1, cg = -1, cn = 0, cpts = 0;
    for (;;) {
        if ((rc = sb_dbq_step(q, st, doing, err)) < 0)
            return -1;
        int kind = -1, grp = -1;
        if (rc > 0) {
            for (int k = 0; k < SB_PCOLL_COUNT; k++)
                if (!strcmp(sb_dbq_text(st, 0), sb_pcoll_name(k)))
                    kind = k;
            grp = sqlite3_column_int(st, 1);
        }
        if (cn && (rc == 0 || kind != ck || grp != cg)) {
            if (grow((void **)&pf->coll, &cap, pf->ncoll, sizeof *pf->coll)) {
                sqlite3_finalize(st);
                return sb_fail(err, SB_EXIT_INTERNAL, "out of memory reading the profiles");
            }
            pf->coll[pf->ncoll++] = (sb_prof_coll){.kind = ck, .group = cg, .alpha_s = sb_median(al, cn),
                                                   .beta_s_per_byte = sb_median(be, cn), .points = cpts};
            cn = cpts = 0;
        }
        if (rc == 0)
            break;
        if (kind < 0 || cn == SB_PROFILE_KEEP)
            continue;
        ck = kind;
        cg = grp;
        al[cn] = sb_dbq_real(st, 2);
        be[cn] = sb_dbq_real(st, 3);
        cpts += sqlite3_column_int(st, 4);
        cn++;
    }
    sqlite3_finalize(st);
    return 0;
}

int sb_dbq_load_profile(sb_dbq *q, const char *backend, const char *machine, int ranks,
                        const char *model, const char *params, sb_profile *pf, int *found,
                        sb_error *err)
{
    memset(pf, 0, sizeof *pf);
    if (!backend)
        backend = "";
    *found = 0;
    if (sb_dbq_version(q) < 7)
        return 0;
    launch *L = NULL;
    int nl = 0;
    if (load_launches(q, backend, machine, ranks, &L, &nl, err))
        return -1;
    if (nl == 0) {
        free(L);
        return 0; /* no profile of this machine and rank count */
    }
    pick_fits(L, nl, model, params, pf);
    copy_text(pf->backend, sizeof pf->backend, backend);
    copy_text(pf->machine, sizeof pf->machine, machine);
    pf->ranks = ranks;
    int rc = load_ops(q, backend, machine, ranks, L, nl, pf, err);
    free(L);
    if (rc || load_colls(q, backend, machine, ranks, pf, err)) {
        sb_profile_free(pf);
        return -1;
    }
    *found = 1;
    return 0;
}

int sb_profile_use_q(sb_problem *pb, sb_dbq *q, char *msg, size_t n, sb_error *err)
{
    msg[0] = '\0';
    if (!pb->cp.machine[0])
        return 0;
    char name[300];
    sb_machine_name(pb->cp.machine, name, sizeof name);
    const char *db_path = sb_dbq_path(q);
    sb_profile pf;
    int found = 0;
    char params[2048];
    sb_params_str(pb->m, params, sizeof params);
    if (sb_dbq_load_profile(q, "", name, pb->p, pb->m->name, params, &pf, &found, err))
        return -1;
    if (!found) {
        snprintf(msg, n, "cost model: %s's analytic terms (no profile of %s at %d ranks in %s: "
                 "mpirun -np %d shardbench profile -m %s --machine %s)", name, name, pb->p,
                 db_path, pb->p, pb->m->name, name);
        return 0;
    }
    sb_profile_stats st;
    int rc = sb_profile_apply(pb, &pf, &st, err);
    const char *other = pf.fits_same_model    ? ""
                        : pf.fits_other_sizes ? ", other sizes"
                                              : ", another model";
    if (!rc)
        snprintf(msg, n, "cost model: predictive, profiles of %s at %d ranks (%s, newest profile "
                 "%lld; fits and op configs: the fastest of %d launch%s of %s%s): %d of %d op configs measured, %d "
                 "estimated from their kind, %d analytic", name, pb->p, db_path,
                 (long long)pf.profile_id, pf.fits_launches, pf.fits_launches == 1 ? "" : "es",
                 pf.fits_model, other, st.measured,
                 st.configs, st.estimated, st.analytic);
    sb_profile_free(&pf);
    return rc ? -1 : 1;
}

int sb_profile_use(sb_problem *pb, const char *db_path, char *msg, size_t n, sb_error *err)
{
    msg[0] = '\0';
    if (!pb->cp.machine[0])
        return 0;
    if (access(db_path, F_OK)) {
        char name[300];
        sb_machine_name(pb->cp.machine, name, sizeof name);
        snprintf(msg, n, "cost model: %s's analytic terms (no results database %s to hold "
                 "profiles)", name, db_path);
        return 0;
    }
    sb_dbq *q = NULL;
    if (sb_dbq_open(db_path, 0, 0, &q, err))
        return -1;
    int rc = sb_profile_use_q(pb, q, msg, n, err);
    sb_dbq_close(q);
    return rc;
}
