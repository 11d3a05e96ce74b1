/* plots/report.c: the paper's tables for one run (`shardbench report`), from
 * the results database only: search time per model, P and algorithm
 * (Table I), the best strategy per layer group at one P (Table II), speedups
 * over data parallel (Fig. 6 as a table), cost-model fidelity (Spearman's
 * rho), and every measurement. Markdown or CSV on stdout. Reads only. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figs.h"
#include "shardbench/plots.h"
#include "shardbench/query.h"
#include "shardbench/results.h"

/* ---- one output table: Markdown or CSV -------------------------------------- */

typedef struct {
    int csv;
    const char *only; /* NULL: every table */
    int on;           /* the current table is printed */
} out_fmt;

static int table_begin(out_fmt *o, const char *name, const char *title, const char *note,
                       int ncols, const char *const *cols, const char *align)
{
    o->on = !o->only || !strcmp(o->only, name);
    if (!o->on)
        return 0;
    if (o->csv) {
        if (!o->only)
            printf("# %s\n", name);
        for (int i = 0; i < ncols; i++) {
            printf("%s%s", i ? "," : "", cols[i]);
        }
        printf("\n");
        return 1;
    }
    printf("## %s\n\n", title);
    if (note)
        printf("%s\n\n", note);
    for (int i = 0; i < ncols; i++)
        printf("| %s ", cols[i]);
    printf("|\n");
    for (int i = 0; i < ncols; i++)
        printf("|%s", align[i] == 'r' ? "---:" : "---");
    printf("|\n");
    return 1;
}

static void table_end(out_fmt *o)
{
    if (o->on)
        printf("\n");
}

static void csv_cell(const char *s)
{
    char shown[1024];
    sb_escape_controls(s, shown, sizeof shown, 1); /* a line break stays, quoted */
    s = shown;
    if (!strpbrk(s, ",\"\n")) {
        printf("%s", s);
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"')
            putchar('"');
        putchar(*s);
    }
    putchar('"');
}

void sb_md_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (strchr("\\`|*<", *s))
            fprintf(f, "\\%c", *s);
        else if (*s == '\n' || *s == '\r' || *s == '\t')
            putc(' ', f);
        else if ((unsigned char)*s < 0x20 || *s == 0x7f) /* no control byte reaches a terminal */
            fprintf(f, "\\x%02x", (unsigned char)*s);
        else
            putc(*s, f);
    }
}

/* s as a Markdown code span: fenced by one backtick more than its longest
 * run of them, padded when it starts or ends with one; line breaks made
 * blanks. */
static void md_code(FILE *f, const char *s)
{
    int run = 0, longest = 0;
    for (const char *c = s; *c; c++) {
        run = *c == '`' ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    size_t n = strlen(s);
    int pad = n && (s[0] == '`' || s[n - 1] == '`');
    for (int i = 0; i <= longest; i++)
        putc('`', f);
    if (pad)
        putc(' ', f);
    for (const char *c = s; *c; c++)
        if (*c == '\n' || *c == '\r')
            putc(' ', f);
        else if ((unsigned char)*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\x%02x", (unsigned char)*c);
        else
            putc(*c, f);
    if (pad)
        putc(' ', f);
    for (int i = 0; i <= longest; i++)
        putc('`', f);
}

static void table_row(out_fmt *o, int ncols, char cells[][256])
{
    if (!o->on)
        return;
    for (int i = 0; i < ncols; i++) {
        if (o->csv) {
            if (i)
                putchar(',');
            csv_cell(cells[i]);
        } else {
            printf("| ");
            sb_md_text(stdout, cells[i]);
            putchar(' ');
        }
    }
    printf(o->csv ? "\n" : "|\n");
}

static void num(char *cell, double v, const char *fmt)
{
    if (isfinite(v))
        snprintf(cell, 256, fmt, v);
    else
        snprintf(cell, 256, "%s", "-");
}

/* ---- the tables -------------------------------------------------------------------- */

static int run_header(sb_dbq *q, int64_t run, out_fmt *o, sb_error *err)
{
    sb_qrun info;
    if (sb_dbq_run_info(q, run, &info, err))
        return -1;
    if (!o->csv && !o->only) {
        printf("# shardbench report: run %lld\n\n", (long long)run);
        static const char *const names[] = {"started", "ended", "host", "commit", "compiler",
                                            "backend", "devices", "versions", "command"};
        for (int i = 0; i < 9; i++) {
            printf("- %s: ", names[i]);
            if (i == 8)
                md_code(stdout, info.field[i] ? info.field[i] : "");
            else
                sb_md_text(stdout, info.field[i]);
            printf("\n");
        }
        printf("- database: ");
        sb_md_text(stdout, sb_dbq_path(q));
        printf("\n\n");
    }
    sb_qrun_free(&info);
    return 0;
}

/* Table I: search seconds per (model, p) and algorithm; this run's own
 * searches, else the latest recorded for that model and p. */
static int table_search(sb_dbq *q, int64_t run, out_fmt *o, sb_error *err)
{
    sb_qsearch *s;
    int ns;
    if (sb_dbq_run_searches(q, run, &s, &ns, err))
        return -1;
    static const char *const cols[] = {"model", "params", "p", "algo", "search s", "best cost (FLOP)",
                                       "max dep set", "peak table MB", "source"};
    table_begin(o, "search", "Search time per model, P and algorithm (Table I form)",
                "Seconds to find the best strategy with each DP vertex order (pase: GenerateSeq, "
                "bf: breadth-first); source `run` is this run's own search, `latest` the latest "
                "one recorded for that model and P.",
                9, cols, "llrlrrrrl");
    int rows = 0;
    for (int i = 0; i < ns; i++) {
        char c[9][256];
        snprintf(c[0], 256, "%s", s[i].model);
        snprintf(c[1], 256, "%.255s", s[i].params);
        snprintf(c[2], 256, "%d", s[i].p);
        snprintf(c[3], 256, "%s", s[i].algo);
        num(c[4], s[i].seconds, "%.3g");
        num(c[5], s[i].total_cost, "%.4g");
        snprintf(c[6], 256, "%d", s[i].max_dep_set);
        num(c[7], s[i].peak_table_bytes / 1e6, "%.2f");
        snprintf(c[8], 256, "%s", s[i].mine ? "run" : "latest");
        table_row(o, 9, c);
        rows++;
    }
    free(s);
    if (!rows && o->on && !o->csv)
        printf("(no searches recorded for this run's models)\n");
    table_end(o);
    return 0;
}

/* What a stored strategy has beyond one config per op on all P devices:
 * pipeline stages and micro-batches, the schedule, the ZeRO stage and the
 * recomputed ops (the keys of `search --space full --format json`, which
 * bench also stores for a version-2 strategy file; an older or plain JSON
 * has none of them: S = M = 1, ZeRO 0, nothing recomputed). */
typedef struct {
    int has, S, M, zero, nrec;
    char sched[16];
} strat_extras;

static strat_extras extras_of(const char *json)
{
    strat_extras x = {0, 1, 1, 0, 0, "-"};
    sb_error e = {0};
    sb_json *j = json ? sb_json_parse(json, &e) : NULL;
    const sb_json *st = sb_json_get(j, "stages"), *rc = sb_json_get(j, "recompute");
    if (st && st->type == SB_JSON_ARR && st->n > 0)
        x.S = st->n;
    x.M = (int)sb_json_num(sb_json_get(j, "microbatches"), 1);
    x.zero = (int)sb_json_num(sb_json_get(j, "zero"), 0);
    if (rc && rc->type == SB_JSON_ARR)
        x.nrec = rc->n;
    const char *sc = sb_json_str(sb_json_get(j, "schedule"));
    if (sc && (x.S > 1 || x.M > 1))
        snprintf(x.sched, sizeof x.sched, "%.15s", sc);
    x.has = x.S > 1 || x.M > 1 || x.zero > 0 || x.nrec > 0;
    sb_json_free(j);
    return x;
}

#define EXTRA_COLS 5 /* stages, micro-batches, schedule, zero, recompute */
static const char *const extra_cols[EXTRA_COLS] = {"stages", "micro-batches", "schedule", "zero",
                                                   "recomputed ops"};

static void extra_cells(const strat_extras *x, char c[][256])
{
    snprintf(c[0], 256, "%d", x->S);
    snprintf(c[1], 256, "%d", x->M);
    snprintf(c[2], 256, "%s", x->sched);
    snprintf(c[3], 256, "%d", x->zero);
    snprintf(c[4], 256, "%d", x->nrec);
}

/* cols, then the extra columns when extras (into buf, which holds both) */
static int with_extras(const char *const *cols, int n, int extras, const char **buf)
{
    for (int i = 0; i < n; i++)
        buf[i] = cols[i];
    for (int i = 0; extras && i < EXTRA_COLS; i++)
        buf[n + i] = extra_cols[i];
    return n + (extras ? EXTRA_COLS : 0);
}

/* The layer groups of a strategy JSON (layers.c, the paper's Table II
 * form): an op repeated over consecutive layers with one config is one row
 * ("x.1 … x.6 / a / qkv"), consecutive ops with the same type, dims and
 * config one row; with ex, the strategy's extras after them. */
static void strategy_rows(out_fmt *o, const char *model, int p, const char *kind, double median,
                          const char *json, const strat_extras *ex)
{
    int nc = 7 + (ex ? EXTRA_COLS : 0);
    sb_error e = {0};
    sb_json *j = sb_json_parse(json, &e);
    sb_layer_row *rows = NULL;
    int nr = 0;
    char row[7 + EXTRA_COLS][256];
    snprintf(row[0], 256, "%s", model);
    snprintf(row[1], 256, "%d", p);
    if (isfinite(median))
        snprintf(row[2], 256, "%s (%.4f s)", kind, median);
    else
        snprintf(row[2], 256, "%s (not measured)", kind);
    if (ex)
        extra_cells(ex, row + 7);
    if (!j || sb_layer_rows(sb_json_get(j, "ops"), &rows, &nr, &e)) {
        snprintf(row[2], 256, "%s", kind);
        snprintf(row[3], 256, "(strategy JSON unreadable: %.200s)", j ? "no ops" : e.msg);
        row[4][0] = row[5][0] = row[6][0] = '\0';
        table_row(o, nc, row);
        sb_json_free(j);
        return;
    }
    for (int r = 0; r < nr; r++) {
        snprintf(row[3], 256, "%s", rows[r].label);
        snprintf(row[4], 256, "%s", rows[r].type);
        snprintf(row[5], 256, "%s", rows[r].dims);
        snprintf(row[6], 256, "%s", rows[r].cfg);
        table_row(o, nc, row);
    }
    free(rows);
    sb_json_free(j);
}

/* Table II: per model at P, the strategy with the least measured median of
 * the run (the search's own strategy when none measured ok); the extra
 * columns (stages, micro-batches, schedule, zero, recomputed ops) when one
 * of them has a pipeline, ZeRO or recomputation. */
static int table_strategies(sb_dbq *q, int64_t run, int p, const sb_qmeas *rows, int n,
                            out_fmt *o, sb_error *err)
{
    static const char *const cols[] = {"model", "p", "strategy (median step)", "layers", "type",
                                       "iteration dims", "config"};
    struct pick {
        char *json;
        char kind[64];
        double median;
        const char *model;
    } *pk = calloc((size_t)(n ? n : 1), sizeof *pk);
    if (!pk)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int np = 0, extras = 0, rc = -1;
    for (int i = 0; i < n; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = rows[j].model_id != rows[i].model_id;
        if (!first)
            continue;
        int best = -1;
        for (int j = 0; j < n; j++)
            if (rows[j].model_id == rows[i].model_id && rows[j].p == p &&
                !strcmp(rows[j].status, "ok") && isfinite(rows[j].median) &&
                (best < 0 || rows[j].median < rows[best].median))
                best = j;
        struct pick *x = &pk[np];
        int r = best >= 0 ? sb_dbq_strategy(q, rows[best].strategy_id, "reading a strategy", NULL,
                                            NULL, &x->json, err)
                          : sb_dbq_search_strategy(q, rows[i].model_id, p, run, &x->json, x->kind,
                                                   sizeof x->kind, err);
        if (r < 0)
            goto out;
        if (!r) {
            free(x->json);
            x->json = NULL;
            continue;
        }
        if (best >= 0)
            snprintf(x->kind, sizeof x->kind, "%s", rows[best].kind);
        x->median = best >= 0 ? rows[best].median : NAN;
        x->model = rows[i].model;
        extras |= extras_of(x->json).has;
        np++;
    }
    char title[128];
    snprintf(title, sizeof title, "Best strategy per layer group at p = %d (Table II form)", p);
    const char *hdr[7 + EXTRA_COLS];
    int nc = with_extras(cols, 7, extras, hdr);
    table_begin(o, "strategies", title,
                extras ? "The fastest strategy measured in this run for each model (least median "
                         "step time), an op repeated over consecutive layers with one config as one "
                         "row (x.1 … x.6 / a / qkv), and consecutive ops with the same type, dims "
                         "and config as one row; config is the split count per iteration dim (per device of "
                         "the op's pipeline stage); stages, micro-batches, schedule, ZeRO stage "
                         "and the count of recomputed ops are the strategy's."
                       : "The fastest strategy measured in this run for each model (least median "
                         "step time), an op repeated over consecutive layers with one config as one "
                         "row (x.1 … x.6 / a / qkv), and consecutive ops with the same type, dims "
                         "and config as one row; config is the split count per iteration dim.",
                nc, hdr, extras ? "lrlllllrrlrr" : "lrlllll");
    for (int i = 0; i < np; i++) {
        strat_extras ex = extras_of(pk[i].json);
        strategy_rows(o, pk[i].model, p, pk[i].kind, pk[i].median, pk[i].json,
                      extras ? &ex : NULL);
    }
    table_end(o);
    rc = 0;
out:
    for (int i = 0; i <= np && i < (n ? n : 1); i++)
        free(pk[i].json);
    free(pk);
    return rc;
}

static void table_speedup(const sb_qkind *k, int nk, out_fmt *o)
{
    static const char *const cols[] = {"model", "params", "p", "kind", "strategies", "failed",
                                       "best median s", "best min s", "speedup over dp"};
    table_begin(o, "speedup", "Speedup over data parallel (Fig. 6 as a table)",
                "Per model, P and strategy kind: the fastest strategy of that kind (least median "
                "step time) against the fastest data-parallel one of the same model and P.",
                9, cols, "llrlrrrrr");
    for (int i = 0; i < nk; i++) {
        char c[9][256];
        snprintf(c[0], 256, "%s", k[i].model);
        snprintf(c[1], 256, "%.250s", k[i].params);
        snprintf(c[2], 256, "%d", k[i].p);
        snprintf(c[3], 256, "%s", k[i].kind);
        snprintf(c[4], 256, "%d", k[i].strategies);
        snprintf(c[5], 256, "%d", k[i].failed);
        num(c[6], k[i].best_median, "%.4f");
        num(c[7], k[i].best_min, "%.4f");
        num(c[8], k[i].speedup, o->csv ? "%.3f" : "%.2fx");
        table_row(o, 9, c);
    }
    table_end(o);
}

static void table_fidelity(const sb_qfidelity *f, int nf, out_fmt *o)
{
    static const char *const csv_cols[] = {"model", "params", "p", "strategies", "spearman",
                                           "mape", "max_error", "source"};
    static const char *const md_cols[] = {"model", "params", "p", "strategies ranked",
                                          "Spearman rho", "MAPE", "max error", "source"};
    table_begin(o, "fidelity", "Cost-model fidelity",
                "Spearman's rank correlation between the predicted cost and the measured "
                "median step time over the strategies of each model and P that ran ok (1: the "
                "cost model orders them exactly as measured; '-': fewer than 2, or no spread); "
                "where the cost model predicts times (a calibration or a machine file), the mean "
                "and the largest |predicted - measured| / measured step time over those "
                "strategies ('-': the reference model, whose FLOP are not seconds). A "
                "'probe-scaled' row below a predicted one: each prediction from profiles "
                "scaled by the probe of its measurement over the probe of the profile launch "
                "it came from (the machine's speed then and there: a diagnostic beside the "
                "raw figures, not instead of them).",
                8, o->csv ? csv_cols : md_cols, "llrrrrrl");
    for (int i = 0; i < nf; i++) {
        for (int scaled = 0; scaled < 2; scaled++) {
            if (scaled && !f[i].probed)
                break;
            char c[8][256];
            snprintf(c[0], 256, "%s", f[i].model);
            snprintf(c[1], 256, "%.250s", f[i].params);
            snprintf(c[2], 256, "%d", f[i].p);
            snprintf(c[3], 256, "%d", scaled ? f[i].probed : f[i].n);
            num(c[4], scaled ? f[i].rho_probe : f[i].rho, "%.3f");
            num(c[5], scaled ? f[i].mape_probe : f[i].mape, "%.3f");
            num(c[6], scaled ? f[i].max_error_probe : f[i].max_error, "%.3f");
            snprintf(c[7], 256, "%s", scaled     ? "probe-scaled"
                                      : f[i].stored ? "stored by bench"
                                                    : "computed now");
            table_row(o, 8, c);
        }
    }
    table_end(o);
}

/* Per (model, P): the predicted best (least predicted cost, ties taken
 * together) against the fastest measured. */
static void table_best(const sb_qfidelity *f, int nf, out_fmt *o)
{
    static const char *const csv_cols[] = {"model", "params", "p", "predicted_best", "tied",
                                           "best_median_s", "fastest", "fastest_median_s",
                                           "gap"};
    static const char *const md_cols[] = {"model", "params", "p", "predicted best", "tied",
                                          "its median s", "fastest", "fastest median s",
                                          "behind the fastest"};
    table_begin(o, "best", "Predicted best against the fastest",
                "Per model and P: the strategy the cost model predicts fastest (the least "
                "predicted cost; 'tied': how many share it, such as pase and dp when they are "
                "one strategy, whose least median is taken) against the fastest measured (least "
                "median step time over its launches), and how far behind the fastest it ran "
                "(0: it was the fastest).",
                9, o->csv ? csv_cols : md_cols, "llrlrrlrr");
    for (int i = 0; i < nf; i++) {
        if (!isfinite(f[i].best_median))
            continue;
        char c[9][256];
        snprintf(c[0], 256, "%s", f[i].model);
        snprintf(c[1], 256, "%.250s", f[i].params);
        snprintf(c[2], 256, "%d", f[i].p);
        snprintf(c[3], 256, "%s", f[i].best_kind);
        snprintf(c[4], 256, "%d", f[i].best_tied);
        num(c[5], f[i].best_median, "%.4f");
        snprintf(c[6], 256, "%s", f[i].fastest_kind);
        num(c[7], f[i].fastest_median, "%.4f");
        if (o->csv)
            num(c[8], f[i].best_gap, "%.4f");
        else
            num(c[8], 100 * f[i].best_gap, "%.1f%%");
        table_row(o, 9, c);
    }
    table_end(o);
}

/* Every measurement; the extra columns (stages, micro-batches, schedule,
 * zero, recomputed ops) when one of the run's strategies has them. */
static int table_measurements(sb_dbq *q, const sb_qmeas *m, int n, out_fmt *o, sb_error *err)
{
    static const char *const cols[] = {"model", "p", "kind", "strategy", "predicted FLOP",
                                       "status", "median s", "min s", "max s", "steps",
                                       "peak MB", "message"};
    strat_extras *ex = calloc((size_t)(n ? n : 1), sizeof *ex);
    if (!ex)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int extras = 0;
    for (int i = 0; i < n; i++) {
        char *json = NULL;
        if (sb_dbq_strategy(q, m[i].strategy_id, "reading a strategy", NULL, NULL, &json, err) < 0) {
            free(ex);
            return -1;
        }
        ex[i] = extras_of(json);
        extras |= ex[i].has;
        free(json);
    }
    const char *hdr[12 + EXTRA_COLS];
    int nc = with_extras(cols, 12, extras, hdr);
    table_begin(o, "measurements", "Every measurement of the run", NULL, nc, hdr,
                extras ? "lrlrrlrrrrrlrrlrr" : "lrlrrlrrrrrl");
    for (int i = 0; i < n; i++) {
        char c[12 + EXTRA_COLS][256];
        snprintf(c[0], 256, "%s", m[i].model);
        snprintf(c[1], 256, "%d", m[i].p);
        snprintf(c[2], 256, "%s", m[i].kind);
        snprintf(c[3], 256, "%lld", (long long)m[i].strategy_id);
        num(c[4], m[i].predicted_cost, "%.4g");
        snprintf(c[5], 256, "%s", m[i].status);
        num(c[6], m[i].median, "%.4f");
        num(c[7], m[i].min, "%.4f");
        num(c[8], m[i].max, "%.4f");
        snprintf(c[9], 256, "%d", m[i].steps);
        num(c[10], m[i].peak_mem_bytes / 1e6, "%.2f");
        snprintf(c[11], 256, "%.250s", m[i].message);
        if (extras)
            extra_cells(&ex[i], c + 12);
        table_row(o, nc, c);
    }
    table_end(o);
    free(ex);
    return 0;
}

int sb_report(const sb_report_opts *opts, sb_error *err)
{
    out_fmt o = {.csv = opts->csv, .only = opts->only};
    int64_t run = opts->run;
    int p = opts->p;
    sb_dbq *q = NULL;
    sb_qmeas *rows = NULL;
    sb_qkind *kinds = NULL;
    sb_qfidelity *fid = NULL;
    int n = 0, nk = 0, nf = 0, status = -1;
    if (sb_dbq_open(opts->db, 0, 0, &q, err) || run_header(q, run, &o, err) ||
        sb_dbq_run_measurements(q, run, &rows, &n, err) ||
        sb_q_kinds(rows, n, &kinds, &nk, err) || sb_q_fidelity(q, run, rows, n, &fid, &nf, err))
        goto out;
    if (!p)
        for (int i = 0; i < n; i++)
            if (rows[i].p > p)
                p = rows[i].p;
    if (!n && !o.csv)
        printf("(run %lld has no measurements)\n\n", (long long)run);
    if (table_search(q, run, &o, err) || (p && table_strategies(q, run, p, rows, n, &o, err)))
        goto out;
    table_speedup(kinds, nk, &o);
    table_fidelity(fid, nf, &o);
    table_best(fid, nf, &o);
    if (table_measurements(q, rows, n, &o, err))
        goto out;
    status = 0;
out:
    free(rows);
    free(kinds);
    free(fid);
    sb_dbq_close(q);
    return status;
}
