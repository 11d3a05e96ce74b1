/* cmd_validate.c: `shardbench validate` (docs/validation.md):
 * prices each published Megatron-LM run of a TSV file exactly as it ran
 * (every degree fixed) and holds the prediction to the published step
 * time; then searches Megatron's grid for the same model, devices and batch
 * within the machine's memory. Exits 1 when the MAPE or the largest error
 * is over the target. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "search_plot.h"
#include "shardbench/hf.h"
#include "shardbench/megatron.h"
#include "shardbench/plots.h"
#include "shardbench/precision.h"
#include "shardbench/query.h"

#ifndef SB_VALIDATE_DATA
#define SB_VALIDATE_DATA "tests/data/published-runs.tsv"
#endif

enum { MAXCOL = 40, MAXROW = 256 };

static const char *const columns[] = {
    "id", "source", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq",
    "global_batch", "gpus", "machine", "precision", "tp", "pp", "dp", "cp", "ep", "vpp",
    "micro_batch_size", "recompute", "sequence_parallel", "distributed_optimizer", "dp_overlap",
    "attention", "published", "published_unit", "published_step_seconds", "derivation",
    /* optional: a header without them means the default below */
    "mlp", "tp_comm_overlap", "grad_reduce_dtype", "model", "param_gather_overlap",
    "cross_entropy_fusion", "untie_embeddings_and_output_weights",
    "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers", NULL};
enum { C_ID, C_SOURCE, C_LAYERS, C_HIDDEN, C_HEADS, C_KV, C_FFN, C_VOCAB, C_SEQ, C_BATCH, C_GPUS,
       C_MACHINE, C_PREC, C_TP, C_PP, C_DP, C_CP, C_EP, C_VPP, C_MBS, C_RC, C_SP, C_DOPT, C_DPOV,
       C_ATTN, C_PUB, C_UNIT, C_STEP, C_DERIV, NREQ, C_MLP = NREQ, C_TPOV, C_GRAD, C_MODEL,
       C_PGOV, C_CEF, C_UNTIE, C_FIRST, C_LAST, NCOLS };
/* the optional columns' defaults: a GELU MLP with LayerNorm, TP collectives exposed, the
 * gradient reduced in the precision recipe's word, the sizes from the row alone, the
 * parameter all-gather overlapped as the gradients' reduction is (dp_overlap), Megatron-LM's
 * unfused cross-entropy, the output layer tied to the embedding as Megatron-LM's default
 * is (or as the model column's config says), even pipeline stages (0: not given) */
static const char *const col_default[NCOLS - NREQ] = {"gelu", "0", "recipe", "-", "-",
                                                      "0",    "-", "0",      "0"};

typedef struct {
    char id[64], source[64], machine[128], deriv[64];
    int line, gpus;
    sb_mt_model mm;
    sb_mt_config c;
    double published, step_s;
    int sc21_unit;
    /* results */
    sb_mt_result pred, best_r;
    sb_mt_config best;
    long searched;
    double err_pct;
    /* the large-GEMM rate the machine file gives, and the one at which the
     * prediction meets the published step (0: no rate does) */
    double gemm_tflops, implied_gemm_tflops;
} vrow;

static int num(const char *s, const char *path, int line, const char *col, double lo, double hi,
               int whole, double *out, sb_error *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || v < lo || v > hi || (whole && v != floor(v)))
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s '%s' is not a%s number in %g..%g", path,
                       line, col, s, whole ? " whole" : "", lo, hi);
    *out = v;
    return 0;
}

/* SC21 Eq. 3: FLOPs of a step with full recomputation */
static double sc21_flops(const sb_mt_model *mm)
{
    double B = (double)mm->global_batch, s = (double)mm->seq, l = (double)mm->layers;
    double h = (double)mm->hidden, V = (double)mm->vocab;
    return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

/* s as a CSV field (csv: RFC 4180, quoted with its quotes doubled when it
 * holds a comma or a quote) or as it is, into out (n >= 2 strlen(s) + 3). */
static void csv_field(const char *s, int csv, char *out, size_t n)
{
    size_t k = 0;
    int quote = csv && strpbrk(s, ",\"") != NULL;
    if (quote)
        out[k++] = '"';
    for (; *s && k + 3 < n; s++) {
        if (quote && *s == '"')
            out[k++] = '"';
        out[k++] = *s;
    }
    if (quote)
        out[k++] = '"';
    out[k] = '\0';
}

/* The optional model column: "hf:PATH" (relative to the data file's folder unless
 * absolute), a config the grid prices (sb_mt_model_from), loaded at the row's seq and
 * global_batch. Its sizes fill the size columns given as "-" and must equal those given,
 * as its head's tie must; its MLP is SwiGLU; *out its sb_mt_model (the experts, head_dim,
 * QK norms and QKV biases no column gives). "-": the row's columns alone, *out untouched. */
static int row_model(char **f, const char *path, int line, char buf[][32], sb_mt_model *out,
                     sb_error *err)
{
    static const int size_col[] = {C_LAYERS, C_HIDDEN, C_HEADS, C_KV, C_FFN, C_VOCAB};
    if (!strcmp(f[C_MODEL], "-"))
        return 0;
    if (!sb_hf_is_path(f[C_MODEL]))
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: model '%s' is not hf:PATH or -", path, line,
                       f[C_MODEL]);
    double seq, batch;
    if (num(f[C_SEQ], path, line, "seq", 1, 1e8, 1, &seq, err) ||
        num(f[C_BATCH], path, line, "global_batch", 1, 1e9, 1, &batch, err))
        return -1;
    const char *rel = f[C_MODEL] + 3, *slash = strrchr(path, '/');
    char name[1200];
    if (rel[0] == '/' || !slash)
        snprintf(name, sizeof name, "hf:%s", rel);
    else
        snprintf(name, sizeof name, "hf:%.*s/%s", (int)(slash - path), path, rel);
    sb_setting set[2] = {{"seq", (int64_t)seq}, {"batch", (int64_t)batch}};
    sb_model m;
    sb_mt_model mm;
    sb_error e2 = {0};
    if (sb_model_load(name, set, 2, &m, &e2))
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: model: %s", path, line, e2.msg);
    int rc = sb_mt_model_from(&m, &mm, &e2);
    sb_model_free(&m);
    if (rc)
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: model: %s", path, line, e2.msg);
    const long have[] = {mm.layers, mm.hidden, mm.heads, mm.kv_heads, mm.ffn, mm.vocab};
    for (int k = 0; k < 6; k++) {
        int c = size_col[k];
        double v;
        if (!strcmp(f[c], "-")) {
            snprintf(buf[k], 32, "%ld", have[k]);
            f[c] = buf[k];
        } else if (num(f[c], path, line, columns[c], 1, 1e9, 1, &v, err)) {
            return -1;
        } else if ((long)v != have[k]) {
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s %s, but %s has %ld", path, line,
                           columns[c], f[c], f[C_MODEL], have[k]);
        }
    }
    const char *untie = mm.untie ? "1" : "0";
    if (strcmp(f[C_UNTIE], "-") && strcmp(f[C_UNTIE], untie))
        return sb_fail(err, SB_EXIT_INPUT,
                       "%s:%d: untie_embeddings_and_output_weights %s, but %s's head is %s", path,
                       line, f[C_UNTIE], f[C_MODEL], mm.untie ? "untied (1)" : "tied (0)");
    f[C_UNTIE] = (char *)untie;
    f[C_MLP] = (char *)"swiglu";
    *out = mm; /* what no column gives: its experts, head_dim, QK norms, QKV biases */
    return 0;
}

/* An optional 0 | 1 | - column: *v 0 or 1, -1 for "-" (dash: what it means). */
static int flag_or_dash(char **f, int col, const char *dash, const char *path, int line, int *v,
                        sb_error *err)
{
    const char *s = f[col];
    *v = !strcmp(s, "-") ? -1 : !strcmp(s, "0") ? 0 : !strcmp(s, "1") ? 1 : -2;
    if (*v == -2)
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s '%s' is not 0, 1 or - (%s)", path, line,
                       columns[col], s, dash);
    return 0;
}

static int parse_row(char **f, const char *path, int line, vrow *r, sb_error *err)
{
    char sizes[6][32];
    sb_mt_model hf = {0};
    if (row_model(f, path, line, sizes, &hf, err))
        return -1;
    memset(r, 0, sizeof *r);
    r->line = line;
    /* id and source are printed in the table, CSV and figures: short, no controls */
    const char *txt[2] = {f[C_ID], f[C_SOURCE]}, *what[2] = {"id", "source"};
    const size_t cap[2] = {sizeof r->id, sizeof r->source};
    for (int k = 0; k < 2; k++) {
        if (strlen(txt[k]) >= cap[k])
            return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s '%.40s...' longer than %zu characters",
                           path, line, what[k], txt[k], cap[k] - 1);
        for (const unsigned char *c = (const unsigned char *)txt[k]; *c; c++)
            if (*c < 0x20 || *c == 0x7f)
                return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s holds a control character (0x%02x)",
                               path, line, what[k], *c);
    }
    snprintf(r->id, sizeof r->id, "%s", f[C_ID]);
    snprintf(r->source, sizeof r->source, "%s", f[C_SOURCE]);
    if ((size_t)snprintf(r->machine, sizeof r->machine, "%s", f[C_MACHINE]) >= sizeof r->machine)
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: machine '%.40s...' longer than %zu characters",
                       path, line, f[C_MACHINE], sizeof r->machine - 1);
    snprintf(r->deriv, sizeof r->deriv, "%s", f[C_DERIV]);
    struct {
        int col;
        double lo, hi;
        double v;
    } n[] = {{C_LAYERS, 1, 1e4, 0}, {C_HIDDEN, 1, 1e6, 0}, {C_HEADS, 1, 1e5, 0},
             {C_KV, 1, 1e5, 0},     {C_FFN, 1, 1e7, 0},    {C_VOCAB, 1, 1e8, 0},
             {C_SEQ, 1, 1e8, 0},    {C_BATCH, 1, 1e9, 0},  {C_GPUS, 1, 262144, 0},
             {C_TP, 1, 1e5, 0},     {C_PP, 1, 1e5, 0},     {C_DP, 1, 1e6, 0},
             {C_CP, 1, 1e5, 0},     {C_EP, 1, 1e5, 0},     {C_VPP, 1, 1e3, 0},
             {C_MBS, 1, 1e6, 0},    {C_SP, 0, 1, 0},       {C_DOPT, 0, 1, 0},
             {C_DPOV, 0, 1, 0},     {C_TPOV, 0, 1, 0},     {C_CEF, 0, 1, 0},
             {C_FIRST, 0, 1e4, 0},  {C_LAST, 0, 1e4, 0}};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        if (num(f[n[i].col], path, line, columns[n[i].col], n[i].lo, n[i].hi, 1, &n[i].v, err))
            return -1;
    sb_mt_model *mm = &r->mm;
    mm->layers = (long)n[0].v, mm->hidden = (long)n[1].v, mm->heads = (long)n[2].v;
    mm->kv_heads = (long)n[3].v, mm->ffn = (long)n[4].v, mm->vocab = (long)n[5].v;
    mm->seq = (long)n[6].v, mm->global_batch = (long)n[7].v;
    mm->experts = hf.experts, mm->topk = hf.topk, mm->moe_ffn = hf.moe_ffn;
    mm->head_dim = hf.head_dim, mm->qk_norm = hf.qk_norm, mm->qkv_bias = hf.qkv_bias;
    r->gpus = (int)n[8].v;
    sb_mt_config *c = &r->c;
    c->tp = (int)n[9].v, c->pp = (int)n[10].v, c->dp = (int)n[11].v, c->cp = (int)n[12].v;
    c->ep = (int)n[13].v, c->vpp = (int)n[14].v, c->mbs = (int)n[15].v;
    c->sp = (int)n[16].v, c->dist_opt = (int)n[17].v, c->dp_overlap = (int)n[18].v;
    c->tp_overlap = (int)n[19].v, c->ce_fusion = (int)n[20].v;
    c->first_layers = (int)n[21].v, c->last_layers = (int)n[22].v;
    if (!strcmp(f[C_MLP], "swiglu"))
        mm->swiglu = 1;
    else if (strcmp(f[C_MLP], "gelu"))
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: mlp '%s' is not gelu or swiglu", path, line,
                       f[C_MLP]);
    int untie, pg;
    if (flag_or_dash(f, C_UNTIE, "tied, Megatron-LM's default", path, line, &untie, err) ||
        flag_or_dash(f, C_PGOV, "as dp_overlap", path, line, &pg, err))
        return -1;
    mm->untie = untie == 1;
    if (pg >= 0)
        c->param_gather = pg ? SB_MT_PG_ON : SB_MT_PG_OFF;
    if (!strcmp(f[C_GRAD], "fp32") || !strcmp(f[C_GRAD], "bf16"))
        c->grad_bytes = f[C_GRAD][0] == 'f' ? 4.0 : 2.0;
    else if (strcmp(f[C_GRAD], "recipe"))
        return sb_fail(err, SB_EXIT_INPUT,
                       "%s:%d: grad_reduce_dtype '%s' is not fp32, bf16 or recipe", path, line,
                       f[C_GRAD]);
    if (mm->kv_heads > mm->heads || mm->heads % mm->kv_heads)
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: kv_heads %ld does not divide heads %ld", path,
                       line, mm->kv_heads, mm->heads);
    if (mm->hidden % mm->heads && !mm->head_dim) /* (a model's head_dim: its own width) */
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: hidden %ld is not a multiple of heads %ld",
                       path, line, mm->hidden, mm->heads);
    sb_error e2 = {0};
    if (sb_precision_parse(f[C_PREC], "precision", &c->precision, &e2) ||
        sb_mt_recompute_parse(f[C_RC], &c->recompute, &e2))
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s", path, line, e2.msg);
    if (!strcmp(f[C_ATTN], "fused"))
        c->fused_attention = 1;
    else if (strcmp(f[C_ATTN], "materialized"))
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: attention '%s' is not fused or materialized",
                       path, line, f[C_ATTN]);
    if (num(f[C_PUB], path, line, "published", 1e-9, 1e12, 0, &r->published, err) ||
        num(f[C_STEP], path, line, "published_step_seconds", 1e-9, 1e9, 0, &r->step_s, err))
        return -1;
    double derived;
    if (!strcmp(f[C_UNIT], "tflops_per_gpu_sc21")) {
        derived = sc21_flops(mm) / (r->published * 1e12 * r->gpus);
        r->sc21_unit = 1;
    } else if (!strcmp(f[C_UNIT], "tflops_per_gpu_model")) /* NeMo's model TFLOP/s */
        derived = sb_mt_model_flops(mm) / (r->published * 1e12 * r->gpus);
    else if (!strcmp(f[C_UNIT], "tokens_per_s_per_gpu"))
        derived = (double)mm->global_batch * mm->seq / (r->published * r->gpus);
    else if (!strcmp(f[C_UNIT], "seconds"))
        derived = r->published;
    else
        return sb_fail(err, SB_EXIT_INPUT,
                       "%s:%d: published_unit '%s' is not tflops_per_gpu_sc21, "
                       "tflops_per_gpu_model, tokens_per_s_per_gpu or seconds",
                       path, line, f[C_UNIT]);
    if (fabs(derived - r->step_s) > 1e-3 * derived)
        return sb_fail(err, SB_EXIT_INPUT,
                       "%s:%d: published_step_seconds %g disagrees with %g derived from %s %s",
                       path, line, r->step_s, derived, f[C_PUB], f[C_UNIT]);
    if (sb_mt_check(mm, c, r->gpus, &e2))
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d: %s", path, line, e2.msg);
    return 0;
}

/* Reads the TSV: a header naming every column of `columns` (any order, others
 * ignored), then one run a line; '#' lines and blank lines skipped. */
static int read_rows(const char *path, vrow *rows, int *nrows, sb_error *err)
{
    char *text;
    size_t len;
    if (sb_read_file(path, "published-runs file", 1 << 22, &text, &len, err))
        return -1;
    if (strlen(text) != len) {
        free(text);
        return sb_fail(err, SB_EXIT_INPUT, "%s: published-runs file holds a NUL byte", path);
    }
    int map[NCOLS], have_header = 0, line = 0, n = 0, rc = 0, hcols = 0;
    for (char *ln = text, *next; ln && *ln && !rc; ln = next) {
        line++;
        char *nl = strchr(ln, '\n');
        next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        size_t l = strlen(ln);
        if (l && ln[l - 1] == '\r')
            ln[--l] = '\0';
        if (!l || ln[0] == '#')
            continue;
        char *f[MAXCOL];
        int nf = 0;
        for (char *p = ln;;) {
            if (nf == MAXCOL) {
                rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: more than %d columns", path, line, MAXCOL);
                break;
            }
            f[nf++] = p;
            char *tab = strchr(p, '\t');
            if (!tab)
                break;
            *tab = '\0';
            p = tab + 1;
        }
        if (rc)
            break;
        if (!have_header) {
            for (int j = 0; j < nf && !rc; j++)
                for (int i = 0; i < j && !rc; i++)
                    if (!strcmp(f[i], f[j]))
                        rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: column '%s' given twice", path,
                                     line, f[j]);
            hcols = nf;
            for (int k = 0; k < NCOLS && !rc; k++) {
                map[k] = -1;
                for (int j = 0; j < nf; j++)
                    if (!strcmp(f[j], columns[k]))
                        map[k] = j;
                if (map[k] < 0 && k < NREQ)
                    rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: the header has no column '%s'", path,
                                 line, columns[k]);
            }
            have_header = 1;
            continue;
        }
        if (nf > hcols) {
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: %d columns, the header has %d", path, line,
                         nf, hcols);
            break;
        }
        char *g[NCOLS];
        for (int k = 0; k < NCOLS && !rc; k++) {
            if (map[k] < 0)
                g[k] = (char *)col_default[k - NREQ];
            else if (map[k] >= nf)
                rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: %d columns, the header has more", path,
                             line, nf);
            else
                g[k] = f[map[k]];
        }
        if (!rc && n == MAXROW)
            rc = sb_fail(err, SB_EXIT_INPUT, "%s:%d: more than %d runs", path, line, MAXROW);
        if (!rc)
            rc = parse_row(g, path, line, &rows[n++], err);
    }
    free(text);
    if (!rc && !n)
        rc = sb_fail(err, SB_EXIT_INPUT, "%s: no runs (a header line and one run a line)", path);
    *nrows = n;
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench validate [--data FILE] [--format table|json|csv] [--plot DIR]\n"
            "\n"
            "Prices each published Megatron-LM run of FILE (default tests/data/published-runs.tsv)\n"
            "exactly as it ran (--algo megatron, every degree fixed) on its machine file, prints\n"
            "predicted against published step seconds, the error, MAPE and the largest error;\n"
            "then the best configuration of Megatron's grid for the same model, devices and\n"
            "batch within the machine's memory, and its predicted step over the published\n"
            "configuration's; last, each run's GEMMs column: the large-GEMM rate (TFLOP/s) at\n"
            "which its prediction meets its published step, every other figure unchanged, and\n"
            "per machine and precision the file's rate beside their median (docs/validation.md),\n"
            "after that group's errors where the table has several groups.\n"
            "Exits 1 when MAPE or the largest error is over the target.\n"
            "\n"
            "      --data FILE        the runs (docs/validation.md: the columns);\n"
            "                         tests/data/published-runs-h100.tsv: NeMo's DGX H100 runs\n"
            "      --format table|json|csv\n"
            "      --target-mape PCT  (default 7)\n"
            "      --target-max PCT   (default 15)\n"
            "      --plot DIR         also the figures DIR/validate, DIR/validate-error and\n"
            "                         DIR/validate-gemm, each .png and .svg (plot --validate)\n"
            "  -h, --help\n");
}

/* The predicted step of row r with the machine's large-GEMM fraction for the
 * row's precision times f: gemm_eff (gemm_eff_large_fp8 under fp8, whose
 * attention core and output layer keep bf16's figure; else gemm_eff_large,
 * which also prices those and an attention core without measured rates). */
static double step_at(const vrow *r, const sb_gpu *g, double f)
{
    sb_gpu h = *g;
    const double attn0 = g->attn_gemm_eff > 0 ? g->attn_gemm_eff : g->gemm_eff;
    h.gemm_eff = g->gemm_eff * f;
    h.attn_gemm_eff = g->fp8 ? attn0 : attn0 * f;
    sb_mt_result res;
    sb_mt_price(&r->mm, &r->c, &h, &res);
    return res.step_s;
}

/* The large-GEMM rate (TFLOP/s at the row's precision) at which the published
 * configuration's predicted step equals the published one, every other figure
 * of the machine unchanged (step_at's fraction): what the residual means if it
 * is all the GEMMs' (docs/validation.md, "The GEMM rate a run implies"). 0
 * when no fraction from 2% of the file's up to the peak (a fraction of 1, as
 * a machine file may give) meets it: the run is faster than the model could
 * price it with any GEMM, or slower with GEMMs at 2%. The step falls as the
 * fraction rises: a bisection on its log. */
static double implied_gemm_tflops(const vrow *r, const sb_gpu *g)
{
    /* up to the factor that reaches the peak (outside fp8 a machine file gives the
     * attention core the same fraction: sb_gpu_from_machine) */
    double lo = log(0.02), hi = log(1.0 / g->gemm_eff);
    if (step_at(r, g, exp(hi)) > r->step_s || step_at(r, g, exp(lo)) < r->step_s)
        return 0.0;
    for (int i = 0; i < 50; i++) {
        double mid = 0.5 * (lo + hi);
        if (step_at(r, g, exp(mid)) > r->step_s)
            lo = mid;
        else
            hi = mid;
    }
    return g->peak_tflops * g->gemm_eff * exp(0.5 * (lo + hi));
}

static void price_row(vrow *r, sb_error *err, int *bad)
{
    sb_machine mc;
    sb_gpu g;
    if (sb_machine_load(r->machine, &mc, err) || sb_gpu_from_machine(&mc, r->c.precision, &g, err) ||
        sb_mt_check_gpu(&r->c, &g, err)) {
        *bad = 1;
        return;
    }
    sb_mt_price(&r->mm, &r->c, &g, &r->pred);
    r->err_pct = 100.0 * (r->pred.step_s - r->step_s) / r->step_s;
    r->gemm_tflops = g.peak_tflops * g.gemm_eff;
    r->implied_gemm_tflops = implied_gemm_tflops(r, &g);
    /* the search: the same software (overlap, attention, precision), every degree,
     * micro-batch, recomputation, sequence parallelism and optimizer sharding free */
    sb_mt_config fixed = r->c;
    fixed.tp = fixed.pp = fixed.dp = fixed.cp = fixed.ep = fixed.vpp = fixed.mbs = 0;
    fixed.first_layers = fixed.last_layers = 0;
    fixed.recompute = fixed.sp = fixed.dist_opt = -1;
    r->searched = sb_mt_search(&r->mm, &fixed, r->gpus, &g, g.mem_bytes, &r->best, &r->best_r, err);
    if (r->searched <= 0)
        *bad = 1;
}

static void cfg_str(const sb_mt_config *c, char *out, size_t n)
{
    char cp[16] = "", ep[16] = "", ends[32] = "";
    if (c->first_layers || c->last_layers) /* the layers of the first and last stages */
        snprintf(ends, sizeof ends, " ends%d/%d", c->first_layers, c->last_layers);
    if (c->cp > 1)
        snprintf(cp, sizeof cp, " cp%d", c->cp);
    if (c->ep > 1)
        snprintf(ep, sizeof ep, " ep%d", c->ep);
    snprintf(out, n, "%dx%dx%d%s%s v%d%s mb%d %s%s%s", c->tp, c->pp, c->dp, cp, ep, c->vpp, ends,
             c->mbs, sb_mt_recompute_name(c->recompute), c->sp ? " sp" : "", c->dist_opt ? " do" : "");
}

/* validate --format json's document (and --plot's input) */
static json_t *report_json(vrow *rows, int n, const char *data, double mape, double worst,
                           double tmape, double tmax, int slower, double secs)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        vrow *r = &rows[i];
        char cs[128];
        cfg_str(&r->best, cs, sizeof cs);
        json_t *run = json_pack("{s:s,s:s,s:i,s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:o,s:o,s:o,s:o,s:s,s:o,s:o,s:I}",
            "id", r->id, "source", r->source, "gpus", r->gpus, "machine", r->machine,
            "precision", sb_precision_name(r->c.precision), "tp", r->c.tp, "pp", r->c.pp,
            "dp", r->c.dp, "vpp", r->c.vpp, "micro_batch_size", r->c.mbs,
            "published_step_seconds", cli_jreal(r->step_s),
            "predicted_step_seconds", cli_jreal(r->pred.step_s),
            "error_percent", cli_jreal(r->err_pct),
            "predicted_mfu", cli_jreal(r->pred.mfu),
            "search_best", cs, "search_best_step_seconds", cli_jreal(r->best_r.step_s),
            "search_best_ratio", cli_jreal(r->best_r.step_s / r->pred.step_s),
            "search_configs", (json_int_t)r->searched);
        /* the prediction by cause (docs/megatron.md, "One configuration") and its
         * compute by kind, set on the run before it joins the array */
        json_object_set_new(run, "predicted_breakdown_seconds",
                            json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "compute", cli_jreal(r->pred.compute_s),
                                      "tp_comm", cli_jreal(r->pred.tp_comm_s), "dp_comm", cli_jreal(r->pred.dp_comm_s),
                                      "pp_comm", cli_jreal(r->pred.pp_comm_s), "bubble", cli_jreal(r->pred.bubble_s),
                                      "optimizer", cli_jreal(r->pred.optimizer_s)));
        json_object_set_new(run, "predicted_compute_breakdown_seconds", cli_mt_compute_json(&r->pred));
        json_object_set_new(run, "gemm_tflops", cli_jreal(r->gemm_tflops));
        json_object_set_new(run, "implied_gemm_tflops",
                            r->implied_gemm_tflops > 0 ? cli_jreal(r->implied_gemm_tflops) : json_null());
        json_array_append_new(arr, run);
    }
    json_t *root = json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:i,s:o}", "data", data, "runs", arr,
                             "mape_percent", cli_jreal(mape), "max_error_percent", cli_jreal(worst),
                             "target_mape_percent", cli_jreal(tmape),
                             "target_max_percent", cli_jreal(tmax),
                             "search_slower_than_published", slower, "seconds", cli_jreal(secs));
    return root;
}

/* --plot DIR: the JSON through a temporary file into sb_plot_validate */
static int plot_report(json_t *root, const char *dir, sb_error *err)
{
    const char *tmpdir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/shardbench-validate-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: cannot create: %s", path, strerror(errno));
    FILE *f = fdopen(fd, "w");
    int bad = !f || json_dumpf(root, f, JSON_REAL_PRECISION(10));
    if (f ? fclose(f) : close(fd))
        bad = 1;
    int figures = 0, files = 0, rc = bad ? sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path)
                                         : sb_plot_validate(path, dir, NULL, stderr, &figures, &files, err);
    unlink(path);
    if (!rc)
        fprintf(stderr, "%d figures (%d files) in %s\n", figures, files, dir);
    return rc;
}

/* The table's last lines: per machine and precision, where the table has more
 * than one, its runs' errors (MAPE, the largest, how many within tmax); then
 * the GEMM rate the file gives beside the ones the published steps imply
 * (their median and range). */
static void print_groups(const vrow *rows, int n, double tmax)
{
    static double v[MAXROW];
    char done[MAXROW] = {0};
    int several = 0; /* more than one machine and precision */
    for (int i = 1; i < n; i++)
        several |= strcmp(rows[i].machine, rows[0].machine) || rows[i].c.precision != rows[0].c.precision;
    for (int i = 0; i < n; i++) {
        if (done[i])
            continue;
        int k = 0, none = 0, m = 0, within = 0;
        double lo = INFINITY, hi = 0.0, sum = 0.0, worst = 0.0;
        for (int j = i; j < n; j++)
            if (!strcmp(rows[j].machine, rows[i].machine) && rows[j].c.precision == rows[i].c.precision) {
                double x = rows[j].implied_gemm_tflops, e = fabs(rows[j].err_pct);
                done[j] = 1;
                m++, sum += e, worst = fmax(worst, e), within += e <= tmax;
                if (x > 0)
                    v[k++] = x, lo = fmin(lo, x), hi = fmax(hi, x);
                else
                    none++;
            }
        if (several)
            printf("errors, %s %s: %d runs, MAPE %.2f%%, largest %.2f%%, %d within %.3g%%\n", rows[i].machine,
                   sb_precision_name(rows[i].c.precision), m, sum / m, worst, within, tmax);
        printf("GEMMs, %s %s: the file's %.0f TFLOP/s", rows[i].machine,
               sb_precision_name(rows[i].c.precision), rows[i].gemm_tflops);
        if (k)
            printf("; the published steps imply %.0f (median of %d, %.0f-%.0f)", sb_median(v, k), k, lo, hi);
        if (none)
            printf("; %d run%s no rate up to the peak meets", none, none > 1 ? "s" : "");
        printf("\n");
    }
}

int cmd_validate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data", required_argument, 0, 'd'},        {"format", required_argument, 0, 'f'},
        {"target-mape", required_argument, 0, 'M'}, {"target-max", required_argument, 0, 'X'},
        {"plot", required_argument, 0, 'P'},        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *data = SB_VALIDATE_DATA, *format = "table", *plot = NULL;
    double tmape = 7.0, tmax = 15.0;
    sb_error err = {0};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': data = optarg; break;
        case 'f': format = optarg; break;
        case 'P': plot = optarg; break;
        case 'M':
        case 'X': {
            char *end;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || !(v > 0)) {
                fprintf(stderr, "shardbench: --target-%s '%s' is not a positive number\n",
                        c == 'M' ? "mape" : "max", optarg);
                return 2;
            }
            *(c == 'M' ? &tmape : &tmax) = v;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || (strcmp(format, "table") && strcmp(format, "json") && strcmp(format, "csv"))) {
        fprintf(stderr, "shardbench validate: %s\n\n",
                optind < argc ? "unexpected argument" : "--format is table, json or csv");
        usage(stderr);
        return 2;
    }
    static vrow rows[MAXROW];
    int n = 0;
    if (read_rows(data, rows, &n, &err)) {
        fprintf(stderr, "shardbench: %s\n", err.msg);
        return err.code ? err.code : 2;
    }
    double t0 = sb_now(), sum = 0.0, worst = 0.0;
    int bad = 0, slower = 0;
    for (int i = 0; i < n && !bad; i++) {
        price_row(&rows[i], &err, &bad);
        sum += fabs(rows[i].err_pct);
        if (fabs(rows[i].err_pct) > worst)
            worst = fabs(rows[i].err_pct);
        if (!bad && rows[i].best_r.step_s > rows[i].pred.step_s * (1 + 1e-12))
            slower++;
    }
    if (bad) {
        fprintf(stderr, "shardbench: %s\n", err.msg);
        return err.code ? err.code : 2;
    }
    double mape = sum / n, secs = sb_now() - t0;
    int over = mape > tmape || worst > tmax;
    if (!strcmp(format, "json")) {
        json_t *root = report_json(rows, n, data, mape, worst, tmape, tmax, slower, secs);
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        putchar('\n');
        json_decref(root);
    } else {
        int csv = !strcmp(format, "csv");
        const char *fmt = csv ? "%s,%s,%d,%s,%d,%d,%d,%d,%d,%s,%.4f,%.4f,%.2f,%.3f,%s,%.4f,%.3f,%s\n"
                              : "%-22s %-12s %5d %-4s %2dx%-3dx%-3d v%d mb%-2d %-9s %9.3f %9.3f %+6.1f%% %5.1f%%  %-28s %9.3f %5.3f %6s\n";
        if (csv)
            puts("id,source,gpus,precision,tp,pp,dp,vpp,mbs,recompute,published_s,predicted_s,"
                 "error_pct,predicted_mfu,search_best,search_best_s,search_ratio,implied_gemm_tflops");
        else
            printf("%-22s %-12s %5s %-4s %-10s %-3s %-4s %-9s %9s %9s %7s %6s  %-28s %9s %5s %6s\n", "run",
                   "source", "gpus", "prec", "tp x pp x dp", "", "", "recompute", "published",
                   "predicted", "error", "MFU", "search's best (tp x pp x dp)", "its step", "ratio",
                   "GEMMs");
        for (int i = 0; i < n; i++) {
            vrow *r = &rows[i];
            char cs[128], id[2 * sizeof r->id + 2], src[2 * sizeof r->source + 2];
            cfg_str(&r->best, cs, sizeof cs);
            csv_field(r->id, csv, id, sizeof id);
            csv_field(r->source, csv, src, sizeof src);
            char imp[16] = "-"; /* the GEMM rate the published step implies */
            if (r->implied_gemm_tflops > 0)
                snprintf(imp, sizeof imp, "%.0f", r->implied_gemm_tflops);
            printf(fmt, id, src, r->gpus, sb_precision_name(r->c.precision), r->c.tp,
                   r->c.pp, r->c.dp, r->c.vpp, r->c.mbs, sb_mt_recompute_name(r->c.recompute)[0] == 's' && r->c.sp ? "sp+sel" : sb_mt_recompute_name(r->c.recompute),
                   r->step_s, r->pred.step_s, r->err_pct, 100.0 * r->pred.mfu, cs, r->best_r.step_s,
                   r->best_r.step_s / r->pred.step_s, csv && !strcmp(imp, "-") ? "" : imp);
        }
        if (!csv)
            printf("%d runs: MAPE %.2f%% (target %.3g%%), largest error %.2f%% (target %.3g%%); "
                   "the search's best slower than the published configuration on %d; %.2f s\n",
                   n, mape, tmape, worst, tmax, slower, secs);
        if (!csv)
            print_groups(rows, n, tmax);
    }
    if (plot) {
        json_t *root = report_json(rows, n, data, mape, worst, tmape, tmax, slower, secs);
        int rc = root ? plot_report(root, plot, &err) : sb_fail(&err, SB_EXIT_INTERNAL, "out of memory");
        json_decref(root);
        if (rc)
            return cli_fail(&err);
    }
    if (over)
        fprintf(stderr, "shardbench validate: over the target: MAPE %.2f%% (at most %.3g%%), "
                        "largest error %.2f%% (at most %.3g%%)\n", mape, tmape, worst, tmax);
    return over || slower ? 1 : 0;
}
