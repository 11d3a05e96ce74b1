/* plots/fig_search.c: the figures of one full-space search's JSON
 * (`shardbench plot --search FILE.json`, `search --plot DIR`), for a
 * planner: the memory per device of each pipeline stage, stacked, against
 * the device's; where a step's time goes; the pipeline schedule of the
 * first and last stages over one step (a Gantt chart); each op's config as
 * a layers x dims heat map (repeated layers once, layers.c). Each reads
 * only the JSON; a figure whose field is missing fails naming it, never
 * draws an empty or guessed figure. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figs.h"
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

typedef struct {
    const char *src;        /* file name for messages */
    const sb_json *j;
    char model[64], name[128]; /* name: MODEL-pP */
    int p, S, M, sched_1f1b;
    double step_s;          /* predicted_step_seconds, else total_cost at F */
    int step_from_cost;     /* 1: the reference model's seconds at F */
    const sb_json *stages;  /* stage_details, or NULL */
} search_json;

static int missing(const search_json *s, const char *figure, const char *field, sb_error *err)
{
    return sb_fail(err, SB_EXIT_INPUT, "%s: no \"%s\": the %s figure needs it (`shardbench "
                   "search --space full --format json` writes it)", s->src, field, figure);
}

static const sb_json *num_field(const sb_json *o, const char *key)
{
    const sb_json *x = sb_json_get(o, key);
    return x && x->type == SB_JSON_NUM && isfinite(x->num) ? x : NULL;
}

/* stage s's number `key` (inside `sub` when not NULL), or -1 with err set */
static int stage_num(const search_json *s, const char *figure, int st, const char *sub,
                     const char *key, double *v, sb_error *err)
{
    const sb_json *o = sb_json_at(s->stages, st);
    if (sub)
        o = sb_json_get(o, sub);
    const sb_json *x = num_field(o, key);
    if (!x) {
        char f[96];
        snprintf(f, sizeof f, "stage_details[%d].%s%s%s", st, sub ? sub : "", sub ? "." : "", key);
        return missing(s, figure, f, err);
    }
    *v = x->num;
    return 0;
}

static int read_search(const sb_json *j, const char *src, search_json *s, sb_error *err)
{
    memset(s, 0, sizeof *s);
    s->src = src;
    s->j = j;
    const char *model = sb_json_str(sb_json_get(j, "model"));
    const sb_json *p = num_field(j, "p");
    if (!model || !p)
        return sb_fail(err, SB_EXIT_INPUT, "%s: not a search's JSON (no \"model\" or \"p\")",
                       src);
    snprintf(s->model, sizeof s->model, "%s", model);
    s->p = (int)p->num;
    char safe[64];
    sb_plot_safe_name(model, safe, sizeof safe);
    snprintf(s->name, sizeof s->name, "%s-p%d", safe, s->p);
    const sb_json *st = sb_json_get(j, "stage_details"), *mb = num_field(j, "microbatches");
    if (st && st->type == SB_JSON_ARR && st->n > 0)
        s->stages = st;
    s->S = s->stages ? s->stages->n : 0;
    s->M = mb ? (int)mb->num : 0;
    const char *sched = sb_json_str(sb_json_get(j, "schedule"));
    s->sched_1f1b = sched && !strcmp(sched, "1f1b");
    const sb_json *ps = num_field(j, "predicted_step_seconds"), *tc = num_field(j, "total_cost"),
                  *f = num_field(j, "flops_tflops");
    if (ps)
        s->step_s = ps->num;
    else if (tc && f && f->num > 0) {
        s->step_s = tc->num / (f->num * 1e12);
        s->step_from_cost = 1;
    }
    return 0;
}

static int need_pipeline(const search_json *s, const char *figure, sb_error *err)
{
    if (!s->stages)
        return missing(s, figure, "stage_details", err);
    if (s->M < 1)
        return missing(s, figure, "microbatches", err);
    if (!(s->step_s > 0))
        return missing(s, figure, "predicted_step_seconds", err);
    return 0;
}

/* ---- (a) memory per device per stage --------------------------------------------------- */

static int write_gp_list(FILE *v, const char *key, const char *const *words, int n)
{
    fprintf(v, "; %s='", key);
    for (int i = 0; i < n; i++)
        fprintf(v, "%s%s", i ? "|" : "", words[i]);
    fputc('\'', v);
    return 0;
}

static int fig_memory(plotter *pl, const search_json *s, sb_error *err)
{
    const char *fig = "memory";
    if (!s->stages)
        return missing(s, fig, "stage_details", err);
    const sb_json *dm = num_field(s->j, "device_memory_bytes");
    if (!dm)
        dm = num_field(s->j, "memory_limit_bytes");
    if (!dm)
        return missing(s, fig, "device_memory_bytes", err);
    char path[PATH_MAX];
    FILE *f = sb_plot_data_file(pl, "memory", path, sizeof path, err);
    if (!f)
        return -1;
    double peak = 0.0;
    int peak_stage = 0, rc = 0;
    for (int st = 0; st < s->S && !rc; st++) {
        double v[5], sum = 0.0;
        for (int k = 0; k < 5 && !rc; k++)
            rc = stage_num(s, fig, st, "memory_bytes", mem_keys[k], &v[k], err);
        if (rc)
            break;
        fprintf(f, "%d", st);
        for (int k = 0; k < 5; k++) {
            fprintf(f, "\t%.9g", v[k] / 1073741824.0);
            sum += v[k];
        }
        fprintf(f, "\t%.9g\n", sum / 1073741824.0); /* the bar's total, written above it */
        if (sum > peak)
            peak = sum, peak_stage = st;
    }
    if (fclose(f) && !rc)
        rc = sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
    if (rc)
        return -1;
    char *vars = NULL, title[400], base[160];
    size_t vl = 0;
    FILE *v = open_memstream(&vars, &vl);
    if (!v)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    snprintf(title, sizeof title, "%.60s p=%d: memory per device of each of %d stages; peak %.1f "
             "GiB (stage %d) of %.1f GiB", s->model, s->p, s->S, peak / 1073741824.0,
             peak_stage, dm->num / 1073741824.0);
    fprintf(v, "datafile=");
    sb_plot_gp_str(v, path);
    fprintf(v, "; ttl=");
    sb_plot_gp_str(v, title);
    write_gp_list(v, "cats", mem_titles, 5);
    fprintf(v, "; colors='1 2 3 4 5'; ylab='GiB per device'; xlab='pipeline stage'; "
               "hline=%.9g; hlinettl='device memory'; ncols=5; nrows=%d; ymax=%.9g; totals=1",
            dm->num / 1073741824.0, s->S, 1.08 * fmax(peak, dm->num) / 1073741824.0);
    if (fclose(v)) {
        free(vars);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    snprintf(base, sizeof base, "memory-%s", s->name);
    rc = sb_plot_gnuplot(pl, "stacked.gp", base, vars, err);
    free(vars);
    return rc;
}

/* ---- (b) where a step's time goes ------------------------------------------------------ */

static int fig_steptime(plotter *pl, const search_json *s, sb_error *err)
{
    const char *fig = "step-time";
    if (need_pipeline(s, fig, err))
        return -1;
    const sb_json *tb = sb_json_get(s->j, "time_breakdown_seconds");
    double whole[6], whole_sum = 0.0;
    int has_whole = tb && tb->type == SB_JSON_OBJ;
    for (int k = 0; has_whole && k < 6; k++) {
        const sb_json *x = num_field(tb, time_keys[k]);
        if (!x) {
            char f[64];
            snprintf(f, sizeof f, "time_breakdown_seconds.%s", time_keys[k]);
            return missing(s, fig, f, err);
        }
        whole[k] = x->num;
        whole_sum += x->num;
    }
    if (!has_whole)
        fprintf(pl->log ? pl->log : stdout,
                "(steptime-%s: %s has no time_breakdown_seconds: the stages' forward, backward "
                "and idle only)\n", s->name, s->src);
    char path[PATH_MAX];
    FILE *f = sb_plot_data_file(pl, "steptime", path, sizeof path, err);
    if (!f)
        return -1;
    int rc = 0, nrows = 0;
    if (has_whole) {
        fprintf(f, "step");
        for (int k = 0; k < 6; k++)
            fprintf(f, "\t%.9g", whole[k]);
        fprintf(f, "\t0\t0\t0\n");
        nrows++;
    }
    for (int st = 0; st < s->S && !rc; st++) {
        double fw, bw;
        if ((rc = stage_num(s, fig, st, NULL, "forward_seconds", &fw, err)) ||
            (rc = stage_num(s, fig, st, NULL, "backward_seconds", &bw, err)))
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
    cats[nc++] = "forward";
    cats[nc++] = "backward";
    cats[nc++] = "idle (bubble)";
    char *vars = NULL, title[400], base[160], colors[64] = "";
    size_t vl = 0;
    for (int k = 0; k < nc; k++) /* the stages' three after the step's six */
        snprintf(colors + strlen(colors), sizeof colors - strlen(colors), "%s%d", k ? " " : "",
                 k + 1 + (has_whole ? 0 : 6));
    FILE *v = open_memstream(&vars, &vl);
    if (!v)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    snprintf(title, sizeof title, "%.60s p=%d: step %.4g s%s, %d stages x %d micro-batches "
             "(%s)%s", s->model, s->p, s->step_s, s->step_from_cost ? " (at F)" : "", s->S, s->M,
             s->sched_1f1b ? "1F1B" : "GPipe", has_whole ? "; left: the step by cause" : "");
    fprintf(v, "datafile=");
    sb_plot_gp_str(v, path);
    fprintf(v, "; ttl=");
    sb_plot_gp_str(v, title);
    write_gp_list(v, "cats", cats, nc);
    fprintf(v, "; colors='%s'; ylab='seconds per step'; xlab='pipeline stage'; hline=%.9g; "
               "hlinettl='step'; ncols=%d; nrows=%d; ymax=%.9g", colors, s->step_s, nc, nrows,
            1.08 * fmax(s->step_s, whole_sum));
    if (fclose(v)) {
        free(vars);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    snprintf(base, sizeof base, "steptime-%s", s->name);
    rc = sb_plot_gnuplot(pl, "stacked.gp", base, vars, err);
    free(vars);
    return rc;
}

/* ---- (c) the schedule of the first and last stages -------------------------------------- */

/* Start times of every stage's forward and backward of every micro-batch
 * (S x M each, row-major), each stage running its ops in the schedule's
 * order, an op starting when its stage is free and its input is there:
 * forward m of stage s after forward m of s - 1, backward m of s after
 * backward m of s + 1 (and its own forward m). GPipe: F0..F(M-1), then
 * B(M-1)..B0. 1F1B: min(S - s - 1, M) forwards, then one forward and one
 * backward in turn, then the backwards left. Returns the step's end. */
static double simulate(int S, int M, int onef1b, const double *fw, const double *bw, double *tf,
                       double *tb, int *order)
{
    /* order[s][k]: op k of stage s, m for a forward, -(m + 1) for a backward */
    for (int s = 0; s < S; s++) {
        int *o = order + (size_t)s * 2 * M, k = 0;
        if (!onef1b) {
            for (int m = 0; m < M; m++)
                o[k++] = m;
            for (int m = M - 1; m >= 0; m--)
                o[k++] = -(m + 1);
        } else {
            int warm = S - s - 1 < M ? S - s - 1 : M, nf = 0, nb = 0;
            while (nf < warm)
                o[k++] = nf++;
            while (nf < M) {
                o[k++] = nf++;
                o[k++] = -(++nb);
            }
            while (nb < M)
                o[k++] = -(++nb);
        }
    }
    for (size_t i = 0; i < (size_t)S * M; i++)
        tf[i] = tb[i] = -1.0;
    int *next = calloc((size_t)S, sizeof *next);
    double *free_at = calloc((size_t)S, sizeof *free_at), end = 0.0;
    if (!next || !free_at) {
        free(next), free(free_at);
        return NAN;
    }
    for (int progress = 1; progress;) {
        progress = 0;
        for (int s = 0; s < S; s++)
            while (next[s] < 2 * M) {
                int op = order[(size_t)s * 2 * M + next[s]];
                double ready;
                if (op >= 0) {
                    if (s > 0 && tf[(size_t)(s - 1) * M + op] < 0)
                        break;
                    ready = s > 0 ? tf[(size_t)(s - 1) * M + op] + fw[s - 1] : 0.0;
                    tf[(size_t)s * M + op] = fmax(ready, free_at[s]);
                    free_at[s] = tf[(size_t)s * M + op] + fw[s];
                } else {
                    int m = -op - 1;
                    if (s + 1 < S && tb[(size_t)(s + 1) * M + m] < 0)
                        break;
                    ready = s + 1 < S ? tb[(size_t)(s + 1) * M + m] + bw[s + 1] : 0.0;
                    tb[(size_t)s * M + m] = fmax(ready, free_at[s]);
                    free_at[s] = tb[(size_t)s * M + m] + bw[s];
                }
                end = fmax(end, free_at[s]);
                next[s]++;
                progress = 1;
            }
    }
    int done = 1;
    for (int s = 0; s < S; s++)
        done = done && next[s] == 2 * M;
    free(next), free(free_at);
    return done ? end : NAN;
}

/* Above SCHED_MAX_BARS ops a row the Gantt chart's bars would be narrower
 * than a pixel and hide the idle time between them: the step is then cut
 * into M / 4 columns (60 to SCHED_BINS; each holds about four micro-batches'
 * forward and backward, so the columns do not beat against the schedule's
 * period), each as tall as the share of it spent in forwards (below) and
 * backwards (above them). */
#define SCHED_MAX_BARS 240
#define SCHED_BINS 400

static int fig_schedule(plotter *pl, const search_json *s, sb_error *err)
{
    const char *fig = "schedule";
    if (need_pipeline(s, fig, err))
        return -1;
    int S = s->S, M = s->M, rc = -1;
    size_t sm = (size_t)S * M;
    double *fw = calloc((size_t)S, sizeof *fw), *bw = calloc((size_t)S, sizeof *bw);
    double *tf = malloc(sm * sizeof *tf), *tb = malloc(sm * sizeof *tb);
    int *order = malloc(2 * sm * sizeof *order);
    FILE *f = NULL;
    if (!fw || !bw || !tf || !tb || !order) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory (%d stages x %d micro-batches)", S, M);
        goto out;
    }
    for (int st = 0; st < S; st++)
        if (stage_num(s, fig, st, NULL, "forward_seconds", &fw[st], err) ||
            stage_num(s, fig, st, NULL, "backward_seconds", &bw[st], err))
            goto out;
    double end = simulate(S, M, s->sched_1f1b, fw, bw, tf, tb, order);
    if (!isfinite(end)) {
        sb_fail(err, SB_EXIT_INTERNAL, "%s: the %s schedule of %d stages x %d micro-batches did "
                "not finish", s->src, s->sched_1f1b ? "1f1b" : "gpipe", S, M);
        goto out;
    }
    char path[PATH_MAX];
    if (!(f = sb_plot_data_file(pl, "schedule", path, sizeof path, err)))
        goto out;
    /* blocks: 0 forwards, 1 backwards; rows: x0, x1, y0, y1 (first stage at y = 1) */
    int rows_of[2] = {0, S - 1}, nrows = S > 1 ? 2 : 1, binned = 2 * M > SCHED_MAX_BARS;
    int nb = M / 4 < 60 ? 60 : M / 4 > SCHED_BINS ? SCHED_BINS : M / 4;
    for (int kind = 0; kind < 2; kind++) {
        fprintf(f, "# %s\n", kind ? "backward" : "forward");
        for (int r = 0; r < nrows; r++) {
            int st = rows_of[r];
            const double *t = (kind ? tb : tf) + (size_t)st * M, d = kind ? bw[st] : fw[st];
            double y = nrows - 1 - r;
            if (!binned) {
                for (int m = 0; m < M; m++)
                    fprintf(f, "%.9g\t%.9g\t%.9g\t%.9g\n", t[m], t[m] + d, y - 0.3, y + 0.3);
                continue;
            }
            /* the share of each of SCHED_BINS columns of the step spent in this kind of op;
             * the backwards stacked on the forwards */
            double share[SCHED_BINS] = {0}, below[SCHED_BINS] = {0}, w = end / nb;
            for (int k = 0; k < 2; k++) {
                const double *tk = (k ? tb : tf) + (size_t)st * M, dk = k ? bw[st] : fw[st];
                for (int m = 0; m < M; m++)
                    for (int b = (int)(tk[m] / w); b < nb && b * w < tk[m] + dk; b++) {
                        double over = fmin(tk[m] + dk, (b + 1) * w) - fmax(tk[m], b * w);
                        if (over > 0)
                            (k == kind ? share : below)[b] += over / w;
                    }
                if (k == 0 && kind == 0)
                    break; /* forwards sit at the bottom */
            }
            for (int b = 0; b < nb; b++) {
                double y0 = y - 0.3 + 0.6 * (kind ? fmin(below[b], 1.0) : 0.0);
                double y1 = fmin(y0 + 0.6 * share[b], y + 0.3);
                if (y1 > y0)
                    fprintf(f, "%.9g\t%.9g\t%.9g\t%.9g\n", b * w, (b + 1) * w, y0, y1);
            }
        }
        fprintf(f, "\n\n");
    }
    if (fclose(f)) {
        f = NULL;
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    f = NULL;
    double busy0 = M * (fw[0] + bw[0]), busyl = M * (fw[S - 1] + bw[S - 1]);
    char *vars = NULL, title[400], base[160], ylabs[200];
    size_t vl = 0;
    FILE *v = open_memstream(&vars, &vl);
    if (!v) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    snprintf(title, sizeof title, "%.60s p=%d: %s, %d stages x %d micro-batches; one step %.4g s "
             "as scheduled (cost model %.4g s%s)%s", s->model, s->p,
             s->sched_1f1b ? "1F1B" : "GPipe", S, M, end, s->step_s,
             s->step_from_cost ? " at F" : "", "");
    if (S > 1)
        snprintf(ylabs, sizeof ylabs, "stage 0: idle %.0f%%%%|stage %d: idle %.0f%%%%",
                 100 * (1 - busy0 / end), S - 1, 100 * (1 - busyl / end));
    else
        snprintf(ylabs, sizeof ylabs, "stage 0: idle %.0f%%%%", 100 * (1 - busy0 / end));
    fprintf(v, "datafile=");
    sb_plot_gp_str(v, path);
    fprintf(v, "; ttl=");
    sb_plot_gp_str(v, title);
    fprintf(v, "; ylabs=");
    sb_plot_gp_str(v, ylabs);
    fprintf(v, "; sub='%s'; nrows=%d; tend=%.9g; width=1100; height=%d",
            2 * M > SCHED_MAX_BARS ? "bars: the share of each slice of the step in forwards "
                                     "(below) and backwards (above)" : "",
            nrows, end, nrows > 1 ? 420 : 320);
    if (fclose(v)) {
        free(vars);
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    snprintf(base, sizeof base, "schedule-%s", s->name);
    rc = sb_plot_gnuplot(pl, "schedule.gp", base, vars, err);
    free(vars);
out:
    if (f)
        fclose(f);
    free(fw), free(bw), free(tf), free(tb), free(order);
    return rc;
}

/* ---- (d) layers x dims: each op's config ------------------------------------------------- */

static int fig_configs(plotter *pl, const search_json *s, sb_error *err)
{
    const sb_json *ops = sb_json_get(s->j, "ops");
    if (!ops || ops->type != SB_JSON_ARR || !ops->n)
        return missing(s, "configs", "ops", err);
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
    if (read_search(j, o->source, &s, err) || sb_plotter_open(&pl, o->scripts, o->out, err))
        goto out;
    /* each figure its own; the first that cannot be drawn stops (its field named) */
    if (fig_memory(&pl, &s, err) || fig_steptime(&pl, &s, err) || fig_schedule(&pl, &s, err) ||
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
