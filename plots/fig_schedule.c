/* plots/fig_schedule.c: the pipeline schedule of the first and last stages
 * over one step as a Gantt chart (`plot --search`, search_json.h): each
 * micro-batch's forward and backward where it runs (every chunk of the
 * rank's, Megatron's interleaving included), idle grey behind them, each
 * row's idle share in its label; simulated (schedule_sim.c) from the
 * stages' (chunks') forward and backward seconds per micro-batch. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_json.h"
#include "shardbench/plots.h"

/* Above SCHED_MAX_BARS ops a row the Gantt chart's bars would be narrower
 * than a pixel and hide the idle time between them: the step is then cut
 * into (M VPP) / 4 columns (60 to SCHED_BINS; each holds about four
 * micro-batches' forward and backward, so the columns do not beat against
 * the schedule's period), each as tall as the share of it spent in
 * forwards (below) and backwards (above them). */
#define SCHED_MAX_BARS 240
#define SCHED_BINS 400

/* each virtual stage's forward and backward seconds per micro-batch: the
 * stage's own, or (VPP > 1) its chunks' (stage_details[r].chunks[k]) */
static int read_times(const search_json *s, double *fw, double *bw, sb_error *err)
{
    const char *fig = "schedule";
    for (int r = 0; r < s->S; r++) {
        if (s->vpp == 1) {
            if (sb_sj_stage_num(s, fig, r, NULL, "forward_seconds", &fw[r], err) ||
                sb_sj_stage_num(s, fig, r, NULL, "backward_seconds", &bw[r], err))
                return -1;
            continue;
        }
        const sb_json *ch = sb_json_get(sb_json_at(s->stages, r), "chunks");
        for (int k = 0; k < s->vpp; k++) {
            const sb_json *c = ch && ch->type == SB_JSON_ARR ? sb_json_at(ch, k) : NULL;
            const sb_json *f = sb_sj_num(c, "forward_seconds"), *b = sb_sj_num(c, "backward_seconds");
            if (!f || !b) {
                char field[96];
                snprintf(field, sizeof field, "stage_details[%d].chunks[%d].%s", r, k,
                         f ? "backward_seconds" : "forward_seconds");
                return sb_sj_missing(s, fig, field, err);
            }
            fw[k * s->S + r] = f->num, bw[k * s->S + r] = b->num;
        }
    }
    return 0;
}

/* the bars of rank r's ops of one kind (0 forwards, 1 backwards) at height y:
 * one a op, or binned (nb columns of the step) */
static void write_row(FILE *f, const search_json *s, int r, int kind, double y, int nb,
                      double end, const double *fw, const double *bw, const double *tf,
                      const double *tb)
{
    int S = s->S, M = s->M;
    if (!nb) {
        for (int k = 0; k < s->vpp; k++) {
            int v = k * S + r;
            const double *t = (kind ? tb : tf) + (size_t)v * M, d = kind ? bw[v] : fw[v];
            for (int m = 0; m < M; m++)
                fprintf(f, "%.9g\t%.9g\t%.9g\t%.9g\n", t[m], t[m] + d, y - 0.3, y + 0.3);
        }
        return;
    }
    /* the share of each column spent in this kind of op; the backwards stacked on the
     * forwards */
    double share[SCHED_BINS] = {0}, below[SCHED_BINS] = {0}, w = end / nb;
    for (int op = 0; op <= kind; op++)
        for (int k = 0; k < s->vpp; k++) {
            int v = k * S + r;
            const double *t = (op ? tb : tf) + (size_t)v * M, d = op ? bw[v] : fw[v];
            for (int m = 0; m < M; m++)
                for (int b = (int)(t[m] / w); b < nb && b * w < t[m] + d; b++) {
                    double over = fmin(t[m] + d, (b + 1) * w) - fmax(t[m], b * w);
                    if (over > 0)
                        (op == kind ? share : below)[b] += over / w;
                }
        }
    for (int b = 0; b < nb; b++) {
        double y0 = y - 0.3 + 0.6 * (kind ? fmin(below[b], 1.0) : 0.0);
        double y1 = fmin(y0 + 0.6 * share[b], y + 0.3);
        if (y1 > y0)
            fprintf(f, "%.9g\t%.9g\t%.9g\t%.9g\n", b * w, (b + 1) * w, y0, y1);
    }
}

/* the title: the schedule, the simulated step beside the cost model's;
 * Megatron's step adds the data-parallel reduction and the optimizer
 * (time_breakdown_seconds) after the pipeline's end */
static void schedule_title(const search_json *s, double end, char *title, size_t n, char *step,
                           size_t sn)
{
    const char *name = !s->sched_1f1b ? "GPipe" : s->vpp > 1 ? "interleaved 1F1B" : "1F1B";
    char chunks[48] = "";
    if (s->vpp > 1)
        snprintf(chunks, sizeof chunks, " x %d chunks", s->vpp);
    snprintf(title, n, "%.60s p=%d: %s, %d stages%s x %d micro-batches", s->model, s->p, name,
             s->S, chunks, s->M);
    const sb_json *tb = sb_json_get(s->j, "time_breakdown_seconds");
    const sb_json *dp = sb_sj_num(tb, "dp_comm"), *opt = sb_sj_num(tb, "optimizer");
    if (s->mt && dp && opt)
        snprintf(step, sn, "pipeline %.4g s as scheduled + DP reduction and optimizer %.4g s = "
                 "%.4g s (priced %.4g s)", end, dp->num + opt->num, end + dp->num + opt->num,
                 s->step_s);
    else
        snprintf(step, sn, "one step %.4g s as scheduled (cost model %.4g s%s)", end, s->step_s,
                 s->step_from_cost ? " at F" : "");
}

/* rank r's row label: its idle share of the step and, under 1F1B, its
 * warm-up (Megatron-LM's num_warmup_microbatches: the forwards before its
 * first backward, less the steady state's first; all of them when no
 * backward comes between), which is also the most micro-batches (chunks)
 * whose activations it holds at once, less one. '%' written '%%'. */
static void row_label(const search_json *s, int r, double end, const double *fw,
                      const double *bw, const double *tf, const double *tb, char *out, size_t n)
{
    int S = s->S, M = s->M, before = 0;
    double busy = 0.0, first_b = INFINITY;
    for (int k = 0; k < s->vpp; k++) {
        int v = k * S + r;
        busy += M * (fw[v] + bw[v]);
        for (int m = 0; m < M; m++)
            first_b = fmin(first_b, tb[(size_t)v * M + m]);
    }
    for (int k = 0; k < s->vpp; k++)
        for (int m = 0; m < M; m++)
            before += tf[(size_t)(k * S + r) * M + m] < first_b;
    int len = snprintf(out, n, "stage %d: idle %.0f%%%%", r, 100 * (1 - busy / end));
    if (s->sched_1f1b && len > 0 && (size_t)len < n)
        snprintf(out + len, n - (size_t)len, ", warm-up %d",
                 before == M * s->vpp ? before : before - 1);
}

int sb_fig_schedule(plotter *pl, const search_json *s, sb_error *err)
{
    if (s->mt && !s->stages) { /* an older megatron JSON: no seconds per stage to schedule */
        fprintf(pl->log ? pl->log : stdout, "(schedule-%s: %s has no stage_details (megatron's "
                "seconds per micro-batch of each stage): skipped)\n", s->name, s->src);
        return 0;
    }
    if (sb_sj_need_pipeline(s, "schedule", err))
        return -1;
    int S = s->S, M = s->M, V = S * s->vpp, rc = -1;
    if (s->vpp > 1 && (!s->sched_1f1b || M % S))
        return sb_fail(err, SB_EXIT_INPUT, "%s: %d chunks per stage need the interleaved 1F1B "
                       "schedule with micro-batches (%d) a multiple of the stages (%d)", s->src,
                       s->vpp, M, S);
    size_t vm = (size_t)V * M;
    double *fw = calloc((size_t)V, sizeof *fw), *bw = calloc((size_t)V, sizeof *bw);
    double *tf = malloc(vm * sizeof *tf), *tb = malloc(vm * sizeof *tb);
    FILE *f = NULL;
    if (!fw || !bw || !tf || !tb) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory (%d stages x %d micro-batches)", S, M);
        goto out;
    }
    if (read_times(s, fw, bw, err))
        goto out;
    double end = sb_sched_simulate(S, s->vpp, M, s->sched_1f1b ? SB_SCHED_1F1B : SB_SCHED_GPIPE,
                                   fw, bw, tf, tb);
    if (!isfinite(end)) {
        sb_fail(err, SB_EXIT_INTERNAL, "%s: the %s schedule of %d stages x %d micro-batches did "
                "not finish", s->src, s->sched_1f1b ? "1f1b" : "gpipe", S, M);
        goto out;
    }
    char path[PATH_MAX];
    if (!(f = sb_plot_data_file(pl, "schedule", path, sizeof path, err)))
        goto out;
    /* blocks: 0 forwards, 1 backwards; rows: x0, x1, y0, y1 (first stage at y = 1) */
    int rows_of[2] = {0, S - 1}, nrows = S > 1 ? 2 : 1, ops = 2 * M * s->vpp;
    int nb = ops <= SCHED_MAX_BARS ? 0 : ops / 8 < 60 ? 60 : ops / 8 > SCHED_BINS ? SCHED_BINS : ops / 8;
    for (int kind = 0; kind < 2; kind++) {
        fprintf(f, "# %s\n", kind ? "backward" : "forward");
        for (int r = 0; r < nrows; r++)
            write_row(f, s, rows_of[r], kind, nrows - 1 - r, nb, end, fw, bw, tf, tb);
        fprintf(f, "\n\n");
    }
    if (fclose(f)) {
        f = NULL;
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    f = NULL;
    char *vars = NULL, title[300], step[300], base[160], ylabs[200], lab[2][96];
    for (int r = 0; r < nrows; r++)
        row_label(s, rows_of[r], end, fw, bw, tf, tb, lab[r], sizeof lab[r]);
    size_t vl = 0;
    FILE *v = open_memstream(&vars, &vl);
    if (!v) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    schedule_title(s, end, title, sizeof title, step, sizeof step);
    snprintf(ylabs, sizeof ylabs, "%s%s%s", lab[0], nrows > 1 ? "|" : "", nrows > 1 ? lab[1] : "");
    fprintf(v, "datafile=");
    sb_plot_gp_str(v, path);
    fprintf(v, "; ttl=");
    sb_plot_gp_str(v, title);
    fprintf(v, "; ylabs=");
    sb_plot_gp_str(v, ylabs);
    fprintf(v, "; step=");
    sb_plot_gp_str(v, step);
    fprintf(v, "; sub='%s'; nrows=%d; tend=%.9g; width=1100; height=%d",
            nb ? "bars: the share of each slice of the step in forwards (below) and backwards "
                 "(above)" : "", nrows, end, nrows > 1 ? 420 : 320);
    snprintf(base, sizeof base, "schedule-%s", s->name);
    rc = sb_sj_draw(pl, "schedule.gp", base, v, &vars, err);
out:
    if (f)
        fclose(f);
    free(fw), free(bw), free(tf), free(tb);
    return rc;
}
