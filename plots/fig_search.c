/* plots/fig_search.c: the figures of one search's JSON, full-space or
 * megatron (`shardbench plot --search FILE.json`, `search --plot DIR`;
 * search_json.c reads it), for a planner: the memory per device of each
 * pipeline stage, stacked, against the device's; where a step's time goes
 * (by cause, then per stage); the pipeline schedule of the first and last
 * stages over one step (fig_schedule.c); each op's config as a layers x
 * dims heat map (repeated layers once, layers.c; megatron's layouts,
 * fig_megatron.c). Each reads only the JSON; a figure whose field is
 * missing fails naming it, never draws an empty or guessed figure. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_json.h"
#include "shardbench/plots.h"

static const char *const mem_keys[5] = {"weights", "gradients", "optimizer", "activations",
                                        "buffers"};
static const char *const mem_titles[5] = {"weights", "gradients", "optimizer state",
                                          "activations", "buffers"};
/* issue 36's whole-step breakdown, when the JSON has it */
static const char *const time_keys[6] = {"compute", "tp_comm", "dp_comm", "pp_comm", "bubble",
                                         "optimizer"};
static const char *const time_titles[6] = {"compute", "tensor-parallel comm (exposed)",
                                           "data-parallel comm (exposed)",
                                           "pipeline comm (exposed)", "bubble", "optimizer"};

/* ---- (a) memory per device per stage --------------------------------------------------- */

/* one bar's five parts: stage st's memory_bytes; st < 0: a Megatron JSON
 * without stage_details, its memory_bytes_per_device (the fullest stage's,
 * as its pricer gives it; the first stage's in a JSON before 2026-12-07) */
static int mem_parts(const search_json *s, int st, double v[5], sb_error *err)
{
    for (int k = 0; k < 5; k++) {
        if (st >= 0) {
            if (sb_sj_stage_num(s, "memory", st, "memory_bytes", mem_keys[k], &v[k], err))
                return -1;
            continue;
        }
        const sb_json *x = sb_sj_num(sb_json_get(s->j, "memory_bytes_per_device"), mem_keys[k]);
        if (!x) {
            char f[64];
            snprintf(f, sizeof f, "memory_bytes_per_device.%s", mem_keys[k]);
            return sb_sj_missing(s, "memory", f, err);
        }
        v[k] = x->num;
    }
    return 0;
}

static int fig_memory(plotter *pl, const search_json *s, sb_error *err)
{
    const char *fig = "memory";
    int one = !s->stages && s->mt; /* the fullest stage only, as the JSON gives it */
    if (!s->stages && !one)
        return sb_sj_missing(s, fig, "stage_details", err);
    const sb_json *dm = sb_sj_num(s->j, "device_memory_bytes");
    if (!dm)
        dm = sb_sj_num(s->j, "memory_limit_bytes");
    if (!dm)
        return sb_sj_missing(s, fig, "device_memory_bytes", err);
    char path[PATH_MAX];
    FILE *f = sb_plot_data_file(pl, "memory", path, sizeof path, err);
    if (!f)
        return -1;
    double peak = 0.0, G = 1073741824.0;
    int peak_stage = 0, rc = 0, nbars = one ? 1 : s->S;
    for (int st = 0; st < nbars && !rc; st++) {
        double v[5], sum = 0.0;
        if ((rc = mem_parts(s, one ? -1 : st, v, err)))
            break;
        fprintf(f, "%d", st);
        for (int k = 0; k < 5; k++) {
            fprintf(f, "\t%.9g", v[k] / G);
            sum += v[k];
        }
        fprintf(f, "\t%.9g\n", sum / G); /* the bar's total, written above it */
        if (sum > peak)
            peak = sum, peak_stage = st;
    }
    if (fclose(f) && !rc)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
    if (rc)
        return -1;
    char *vars = NULL, title[400], sub[300] = "", base[160];
    size_t vl = 0;
    FILE *v = open_memstream(&vars, &vl);
    if (!v)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    const sb_json *priced = sb_sj_num(s->j, "peak_bytes_per_device");
    if (one) {
        snprintf(title, sizeof title, "%.60s p=%d: memory per device of the fullest of %d "
                 "stages, %.1f GiB of %.1f GiB", s->model, s->p, s->S, peak / G, dm->num / G);
        snprintf(sub, sizeof sub, "no stage_details in the JSON: the fullest stage's "
                 "memory_bytes_per_device only");
    } else {
        snprintf(title, sizeof title, "%.60s p=%d: memory per device of each of %d stages; peak "
                 "%.1f GiB (stage %d) of %.1f GiB", s->model, s->p, s->S, peak / G, peak_stage,
                 dm->num / G);
        if (s->mt && priced) /* Megatron's pricer sizes the fullest stage; said beside */
            snprintf(sub, sizeof sub, "megatron's priced memory per device (the fullest stage's, "
                     "peak_bytes_per_device): %.1f GiB", priced->num / G);
    }
    fprintf(v, "datafile=");
    sb_plot_gp_str(v, path);
    fprintf(v, "; ttl=");
    sb_plot_gp_str(v, title);
    fprintf(v, "; sub=");
    sb_plot_gp_str(v, sub);
    sb_sj_gp_list(v, "cats", mem_titles, 5);
    fprintf(v, "; colors='1 2 3 4 5'; ylab='GiB per device'; xlab='pipeline stage'; "
               "hline=%.9g; hlinettl='device memory'; ncols=5; nrows=%d; ymax=%.9g; totals=1",
            dm->num / G, nbars, 1.08 * fmax(peak, dm->num) / G);
    snprintf(base, sizeof base, "memory-%s", s->name);
    return sb_sj_draw(pl, "stacked.gp", base, v, &vars, err);
}

/* ---- (b) where a step's time goes ------------------------------------------------------ */

/* time_breakdown_seconds's six causes into whole (and *has 1), or *has 0 when
 * the JSON lacks the object; -1 naming a cause missing from it */
static int read_breakdown(const search_json *s, double whole[6], int *has, sb_error *err)
{
    const sb_json *tb = sb_json_get(s->j, "time_breakdown_seconds");
    *has = tb && tb->type == SB_JSON_OBJ;
    for (int k = 0; *has && k < 6; k++) {
        const sb_json *x = sb_sj_num(tb, time_keys[k]);
        if (!x) {
            char f[64];
            snprintf(f, sizeof f, "time_breakdown_seconds.%s", time_keys[k]);
            return sb_sj_missing(s, "step-time", f, err);
        }
        whole[k] = x->num;
    }
    return 0;
}

static int fig_steptime(plotter *pl, const search_json *s, sb_error *err)
{
    const char *fig = "step-time";
    double whole[6], whole_sum = 0.0;
    int has_whole;
    if (read_breakdown(s, whole, &has_whole, err))
        return -1;
    /* a Megatron JSON without stage_details: the step by cause alone */
    int per_stage = !(s->mt && !s->stages && has_whole);
    if (per_stage && sb_sj_need_pipeline(s, fig, err))
        return -1;
    for (int k = 0; has_whole && k < 6; k++)
        whole_sum += whole[k];
    FILE *log = pl->log ? pl->log : stdout;
    if (!has_whole)
        fprintf(log, "(steptime-%s: %s has no time_breakdown_seconds: the stages' forward, "
                "backward and idle only)\n", s->name, s->src);
    if (!per_stage)
        fprintf(log, "(steptime-%s: %s has no stage_details: the step by cause only)\n",
                s->name, s->src);
    char path[PATH_MAX];
    FILE *f = sb_plot_data_file(pl, "steptime", path, sizeof path, err);
    if (!f)
        return -1;
    int rc = 0, nrows = 0;
    if (has_whole) {
        fprintf(f, "step");
        for (int k = 0; k < 6; k++)
            fprintf(f, "\t%.9g", whole[k]);
        fprintf(f, per_stage ? "\t0\t0\t0\n" : "\n");
        nrows++;
    }
    for (int st = 0; per_stage && st < s->S && !rc; st++) {
        double fw, bw;
        if ((rc = sb_sj_stage_num(s, fig, st, NULL, "forward_seconds", &fw, err)) ||
            (rc = sb_sj_stage_num(s, fig, st, NULL, "backward_seconds", &bw, err)))
            break;
        double busy = s->M * (fw + bw), idle = s->step_s - busy;
        fprintf(f, "%d", st);
        for (int k = 0; has_whole && k < 6; k++)
            fprintf(f, "\t0");
        fprintf(f, "\t%.9g\t%.9g\t%.9g\n", s->M * fw, s->M * bw, idle > 0 ? idle : 0.0);
        nrows++;
    }
    if (fclose(f) && !rc)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
    if (rc)
        return -1;
    const char *cats[9];
    int nc = 0;
    for (int k = 0; has_whole && k < 6; k++)
        cats[nc++] = time_titles[k];
    if (per_stage) {
        cats[nc++] = "forward";
        cats[nc++] = "backward";
        cats[nc++] = s->mt ? "idle (bubble, DP reduction, optimizer)" : "idle (bubble)";
    }
    char *vars = NULL, title[400], sub[300], base[160], colors[64] = "";
    size_t vl = 0;
    for (int k = 0; k < nc; k++) /* the stages' three after the step's six */
        snprintf(colors + strlen(colors), sizeof colors - strlen(colors), "%s%d", k ? " " : "",
                 k + 1 + (has_whole ? 0 : 6));
    FILE *v = open_memstream(&vars, &vl);
    if (!v)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    snprintf(title, sizeof title, "%.60s p=%d: step %.4g s%s, %d stages x %d micro-batches (%s)",
             s->model, s->p, s->step_s, s->step_from_cost ? " (at F)" : "", s->S, s->M,
             !s->sched_1f1b ? "GPipe" : s->vpp > 1 ? "interleaved 1F1B" : "1F1B");
    if (!has_whole)
        snprintf(sub, sizeof sub, "no time_breakdown_seconds in the JSON: not the step by "
                 "cause");
    else if (!per_stage)
        snprintf(sub, sizeof sub, "the step by cause; no stage_details in the JSON");
    else
        snprintf(sub, sizeof sub, "left: the step by cause; then each stage");
    fprintf(v, "datafile=");
    sb_plot_gp_str(v, path);
    fprintf(v, "; ttl=");
    sb_plot_gp_str(v, title);
    fprintf(v, "; sub=");
    sb_plot_gp_str(v, sub);
    sb_sj_gp_list(v, "cats", cats, nc);
    fprintf(v, "; colors='%s'; ylab='seconds per step'; xlab='pipeline stage'; hline=%.9g; "
               "hlinettl='step'; ncols=%d; nrows=%d; ymax=%.9g; width=%d", colors, s->step_s, nc,
            nrows, 1.08 * fmax(s->step_s, whole_sum), has_whole ? 1100 : 820);
    snprintf(base, sizeof base, "steptime-%s", s->name);
    return sb_sj_draw(pl, "stacked.gp", base, v, &vars, err);
}

/* ---- (d) layers x dims: each op's config ------------------------------------------------- */

static int fig_configs(plotter *pl, const search_json *s, sb_error *err)
{
    if (s->mt) /* Megatron's layouts follow from its degrees (fig_megatron.c) */
        return sb_fig_mt_layouts(pl, s, err);
    const sb_json *ops = sb_json_get(s->j, "ops");
    if (!ops || ops->type != SB_JSON_ARR || !ops->n)
        return sb_sj_missing(s, "configs", "ops", err);
    sb_layer_row *rows = NULL;
    int nr = 0, rc = -1, nd = 0, maxc = 1;
    char (*dims)[48] = calloc(64, sizeof *dims);
    FILE *f = NULL;
    char path[PATH_MAX];
    if (!dims) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if (sb_layer_rows(ops, &rows, &nr, err))
        goto out;
    if (!(f = sb_plot_data_file(pl, "configs", path, sizeof path, err)))
        goto out;
    /* rows top to bottom: y = nr - 1 - r; columns: dims in first-seen order */
    for (int r = 0; r < nr; r++) {
        char dl[256], cl[256], *sd = NULL, *sc = NULL;
        snprintf(dl, sizeof dl, "%s", rows[r].dims);
        snprintf(cl, sizeof cl, "%s", rows[r].cfg);
        char *d = strtok_r(dl, ",", &sd), *c = strtok_r(cl, ",", &sc);
        for (; d && c; d = strtok_r(NULL, ",", &sd), c = strtok_r(NULL, ",", &sc)) {
            int x = 0;
            while (x < nd && strcmp(dims[x], d))
                x++;
            if (x == nd) {
                if (nd == 64) {
                    sb_fail(err, SB_EXIT_INPUT, "%s: more than 64 dim names", s->src);
                    goto out;
                }
                snprintf(dims[nd++], sizeof dims[0], "%s", d);
            }
            int split = atoi(c);
            maxc = split > maxc ? split : maxc;
            fprintf(f, "%d\t%d\t%.6g\t%d\n", x, nr - 1 - r, log2(split > 0 ? split : 1), split);
        }
    }
    if (fclose(f)) {
        f = NULL;
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    f = NULL;
    char *vars = NULL, title[300], base[160];
    size_t vl = 0;
    FILE *v = open_memstream(&vars, &vl);
    if (!v) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    snprintf(title, sizeof title, "%.60s p=%d: split count per iteration dim, %d ops in %d rows "
             "(repeated layers once)", s->model, s->p, ops->n, nr);
    fprintf(v, "datafile=");
    sb_plot_gp_str(v, path);
    fprintf(v, "; ttl=");
    sb_plot_gp_str(v, title);
    fprintf(v, "; ylabs=");
    { /* row labels, top first, '|'-separated */
        char *yl = NULL;
        size_t yn = 0;
        FILE *y = open_memstream(&yl, &yn);
        for (int r = 0; y && r < nr; r++)
            fprintf(y, "%s%s", r ? "|" : "", rows[r].label);
        if (!y || fclose(y)) {
            fclose(v);
            free(vars);
            sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            goto out;
        }
        sb_plot_gp_str(v, yl);
        free(yl);
    }
    fprintf(v, "; xlabs='");
    for (int x = 0; x < nd; x++)
        fprintf(v, "%s%s", x ? "|" : "", dims[x]);
    fprintf(v, "'; nrows=%d; ncols=%d; cmax=%.6g; width=%d; height=%d", nr, nd,
            log2(maxc > 1 ? maxc : 2), 520 + 60 * nd, 160 + 18 * nr);
    if (fclose(v)) {
        free(vars);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    snprintf(base, sizeof base, "configs-%s", s->name);
    rc = sb_plot_gnuplot(pl, "configs.gp", base, vars, err);
    free(vars);
out:
    if (f)
        fclose(f);
    free(rows);
    free(dims);
    return rc;
}

int sb_plot_search(const sb_plot_search_opts *o, int *figures, int *files, sb_error *err)
{
    plotter pl = {.out = o->out, .log = o->log};
    search_json s;
    int rc = -1;
    sb_json *j = sb_json_parse(o->json, err);
    if (!j) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        return sb_fail(err, SB_EXIT_INPUT, "%s: %s", o->source, m);
    }
    if (sb_sj_read(j, o->source, &s, err) || sb_plotter_open(&pl, o->scripts, o->out, err))
        goto out;
    /* each figure its own; the first that cannot be drawn stops (its field named) */
    if (fig_memory(&pl, &s, err) || fig_steptime(&pl, &s, err) || sb_fig_schedule(&pl, &s, err) ||
        fig_configs(&pl, &s, err))
        goto out;
    rc = 0;
out:
    if (figures)
        *figures = pl.figures;
    if (files)
        *files = pl.files;
    sb_plotter_close(&pl);
    sb_json_free(j);
    return rc;
}
