/* perf/gpu_attention.c: the fused attention kernel's rates (a machine file's
 * attn_fwd_tflops and attn_bwd_tflops, docs/gpu-op-model.md "Fused attention")
 * held to this GPU.
 *
 *   perf/gpu_attention [--machine NAME|FILE (h100-sxm)] [--seconds S (0.5)]
 *                      [--plan] [--fragment FILE] [--db FILE|none] [--python PY]
 *
 * The FlashAttention-3 paper's benchmark setup, which the shipped figures
 * come from: bf16, 16 heads of 128 (2,048 wide), 16,384 tokens a call
 * (batch = 16,384 / seq), sequence 512 to 16,384, with the causal mask
 * (what the published runs train with: the fragment's figures) and
 * without (the paper's backward figure is unmasked: the check of the
 * shipped one). FLOP as FlashAttention's benchmarks count them: the
 * forward 4 b s^2 h d, half of it under the mask, the backward 2.5 x.
 * Each point priced by the GPU op model under the machine file
 * (sb_gpu_attn_s: the forward's 2 products, the backward's 5) and
 * measured by perf/gpu_attention.py in a child process (PyTorch's
 * scaled_dot_product_attention held to cuDNN's backend, the kernel
 * Transformer Engine runs on Hopper; CUDA events, the median of ~50 ms
 * batches over S seconds, forward and backward apart).
 *
 * --plan: the points and the model's side only, nothing measured. Without a
 * GPU, PyTorch or its cuDNN attention: exit 77 and why. Results database:
 * one run (backend "cuda"), a measurement per point and direction, kind
 * "attn-fwd" or "attn-bwd" (predicted_cost its FLOP, predicted_s the
 * model's seconds, step_median_s the measured median, min and max the
 * batches'; configs_json the point). The last lines are a machine-file
 * fragment of the causal figures (--fragment FILE writes it, through a
 * temporary file and a rename); a point that fails, or one measured
 * above the bf16 peak (one that did no work), fails the run: exit 1, no
 * fragment. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <jansson.h>

#include "shardbench/common.h"
#include "shardbench/machine.h"
#include "shardbench/megatron.h"
#include "shardbench/precision.h"
#include "shardbench/results.h"

#ifndef SB_ATTN_PEER
#define SB_ATTN_PEER "perf/gpu_attention.py"
#endif

#define TOKENS 16384.0
#define HEADS 16
#define DIM 128
#define NSEQ 6
#define NPTS (2 * NSEQ)

typedef struct {
    int seq, batch, causal;
    double flop_f, flop_b;                /* FlashAttention's count */
    double model_f, model_b;              /* the op model's seconds */
    double meas_f, meas_b, min_f, max_f, min_b, max_b;
    int batches;                          /* the peer's timed batches (the fewer of the two) */
    const char *bad;                      /* why the measurement is refused, or NULL */
} point;

typedef struct {
    const char *machine, *fragment, *db, *python;
    double seconds;
    int plan;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: perf/gpu_attention [--machine NAME|FILE (h100-sxm)] [--seconds S (0.5)]\n"
               "                          [--plan] [--fragment FILE] [--db FILE|none] [--python PY]\n");
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.machine = "h100-sxm", .seconds = 0.5, .db = SB_DB_DEFAULT_PATH, .python = "python3"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--plan")) {
            o->plan = 1;
        } else if (v && !strcmp(a, "--machine")) {
            o->machine = v, i++;
        } else if (v && !strcmp(a, "--fragment")) {
            o->fragment = v, i++;
        } else if (v && !strcmp(a, "--db")) {
            o->db = v, i++;
        } else if (v && !strcmp(a, "--python")) {
            o->python = v, i++;
        } else if (v && !strcmp(a, "--seconds")) {
            const char *end = "";
            if (sb_parse_number(v, &o->seconds, &end) || *end || !(o->seconds >= 0.05) ||
                o->seconds > 3600) {
                fprintf(stderr, "perf/gpu_attention: --seconds: '%s' is not a number of seconds in "
                                "[0.05, 3600]\n", v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "perf/gpu_attention: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

/* The points, each priced: causal first (the fragment's), then unmasked. */
static void build_points(const sb_gpu *g, point *p)
{
    for (int i = 0; i < NPTS; i++) {
        point *x = &p[i];
        memset(x, 0, sizeof *x);
        x->seq = 512 << (i % NSEQ);
        x->batch = (int)(TOKENS / x->seq);
        x->causal = i < NSEQ;
        double s = x->seq, bh = (double)x->batch * HEADS, keys = x->causal ? 0.5 * s : s;
        x->flop_f = 4.0 * bh * s * keys * DIM;
        x->flop_b = 2.5 * x->flop_f;
        x->model_f = 2.0 * sb_gpu_attn_s(g, bh, s, keys, DIM, 2.0, 0);
        x->model_b = 5.0 * sb_gpu_attn_s(g, bh, s, keys, DIM, 2.0, 1);
        x->meas_f = x->meas_b = x->min_f = x->max_f = x->min_b = x->max_b = NAN;
    }
}

static double tf(double flop, double s) { return flop / s / 1e12; }

static void print_table(const point *p, const char *machine)
{
    printf("# fused attention, bf16, %d heads of %d, %.0f tokens a call; TFLOP/s as FlashAttention\n"
           "# counts them; model: the op model under %s\n"
           "%-6s %5s %-6s %9s %9s %8s %8s %9s %9s %8s %8s\n",
           HEADS, DIM, TOKENS, machine, "seq", "batch", "mask", "fwd_model", "fwd_meas", "fwd_TFm",
           "fwd_TF", "bwd_model", "bwd_meas", "bwd_TFm", "bwd_TF");
    for (int i = 0; i < NPTS; i++) {
        const point *x = &p[i];
        char mf[16] = "-", mb[16] = "-", tff[16] = "-", tfb[16] = "-";
        if (isfinite(x->meas_f))
            snprintf(mf, sizeof mf, "%.4f", x->meas_f * 1e3), snprintf(tff, sizeof tff, "%.1f",
                                                                         tf(x->flop_f, x->meas_f));
        if (isfinite(x->meas_b))
            snprintf(mb, sizeof mb, "%.4f", x->meas_b * 1e3), snprintf(tfb, sizeof tfb, "%.1f",
                                                                         tf(x->flop_b, x->meas_b));
        printf("%-6d %5d %-6s %9.4f %9s %8.1f %8s %9.4f %9s %8.1f %8s\n", x->seq, x->batch,
               x->causal ? "causal" : "none", x->model_f * 1e3, mf, tf(x->flop_f, x->model_f), tff,
               x->model_b * 1e3, mb, tf(x->flop_b, x->model_b), tfb);
    }
    printf("# (ms a call; _TFm the model's rate, _TF the measured)\n");
}

/* One point line of the peer into p; 0 when it names none of them. */
static int take_point(json_t *j, point *p)
{
    int seq = (int)json_integer_value(json_object_get(j, "seq"));
    int batch = (int)json_integer_value(json_object_get(j, "batch"));
    int causal = (int)json_integer_value(json_object_get(j, "causal"));
    if (json_integer_value(json_object_get(j, "heads")) != HEADS ||
        json_integer_value(json_object_get(j, "dim")) != DIM)
        return 0;
    for (int i = 0; i < NPTS; i++) {
        point *x = &p[i];
        if (x->seq != seq || x->batch != batch || x->causal != causal || isfinite(x->meas_f))
            continue;
        x->meas_f = json_number_value(json_object_get(j, "fwd_s"));
        x->min_f = json_number_value(json_object_get(j, "fwd_min"));
        x->max_f = json_number_value(json_object_get(j, "fwd_max"));
        x->meas_b = json_number_value(json_object_get(j, "bwd_s"));
        x->min_b = json_number_value(json_object_get(j, "bwd_min"));
        x->max_b = json_number_value(json_object_get(j, "bwd_max"));
        x->batches = (int)json_integer_value(json_object_get(j, "batches"));
        return 1;
    }
    return 0;
}

/* Runs the peer over every point; 0, 77 (nothing can be measured here) or 1.
 * ready: its first line (device and versions), to free. */
static int run_peer(const opts *o, point *p, json_t **ready)
{
    char pts[512] = "", cmd[1024];
    for (int i = 0; i < NPTS; i++) {
        size_t n = strlen(pts);
        snprintf(pts + n, sizeof pts - n, "%s%dx%d%s", i ? "," : "", p[i].seq, p[i].batch,
                 p[i].causal ? "c" : "");
    }
    if (strchr(o->python, '\'') || strchr(SB_ATTN_PEER, '\'')) {
        fprintf(stderr, "perf/gpu_attention: a quote in the path of %s or %s\n", o->python,
                SB_ATTN_PEER);
        return 2;
    }
    if (snprintf(cmd, sizeof cmd, "'%s' '%s' --points %s --heads %d --dim %d --seconds %g",
                 o->python, SB_ATTN_PEER, pts, HEADS, DIM, o->seconds) >= (int)sizeof cmd) {
        fprintf(stderr, "perf/gpu_attention: --python '%s': the command is too long\n", o->python);
        return 2;
    }
    fflush(stdout);
    FILE *f = popen(cmd, "r");
    if (!f) {
        fprintf(stderr, "perf/gpu_attention: cannot start %s\n", cmd);
        return 1;
    }
    char *line = NULL, why[512] = "";
    size_t cap = 0;
    int got = 0, bad = 0, said = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je), *e = j ? json_object_get(j, "error") : NULL;
        if (!j || !json_is_object(j)) {
            snprintf(why, sizeof why, "a line that is not JSON: %.200s", line);
            bad = 1;
        } else if (e) {
            const char *t = json_string_value(e);
            snprintf(why, sizeof why, "%.400s", t ? t : "(an error that is not a string)");
            said = 1;
        } else if (json_object_get(j, "ready")) {
            if (!*ready)
                *ready = json_incref(j);
        } else if (take_point(j, p)) {
            got++;
        } else {
            snprintf(why, sizeof why, "a point it was not asked for: %.200s", line);
            bad = 1;
        }
        json_decref(j);
    }
    free(line);
    int st = pclose(f), code = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (code == 77) {
        fprintf(stderr, "perf/gpu_attention: nothing measured: %s\n", *why ? why : "(exit 77)");
        return 77;
    }
    if (code != 0 || bad || said || got != NPTS) { /* an error line fails the run whatever the exit */
        fprintf(stderr, "perf/gpu_attention: %s: %s (exit %d, %d of %d points)\n", SB_ATTN_PEER,
                *why ? why : "failed", code, got, NPTS);
        return 1;
    }
    return 0;
}

/* The fragment into path, whole or not at all (temporary file, rename). */
static int write_fragment(const char *path, const char *text)
{
    sb_error err = {0};
    if (sb_write_text(path, "machine fragment", text, &err)) {
        fprintf(stderr, "perf/gpu_attention: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* Every point into the database (none: db "none"). */
static void store(const opts *o, const point *p, const char *device, const char *versions)
{
    if (!strcmp(o->db, "none"))
        return;
    sb_db *db = NULL;
    sb_error err = {0};
    int64_t run = 0;
    sb_run_meta meta = {.backend = "cuda", .devices = device, .versions = versions,
                        .command_line = "perf/gpu_attention"};
    if (sb_db_open(o->db, 0, &db, &err) || sb_db_begin_run(db, &meta, &run, &err)) {
        fprintf(stderr, "perf/gpu_attention: %s (figures not stored)\n", err.msg);
        if (db)
            sb_db_close(db);
        return;
    }
    for (int i = 0; i < NPTS; i++)
        for (int d = 0; d < 2; d++) {
            const point *x = &p[i];
            if (!isfinite(x->meas_f) && !isfinite(x->meas_b))
                continue; /* not measured */
            char params[160];
            snprintf(params, sizeof params,
                     "{\"seq\":%d,\"batch\":%d,\"heads\":%d,\"dim\":%d,\"causal\":%d}", x->seq,
                     x->batch, HEADS, DIM, x->causal);
            double m = d ? x->meas_b : x->meas_f;
            sb_measurement_record rec = {
                .run_id = run, .model = "attention", .model_path = "perf/gpu_attention",
                .params = params, .p = 1, .kind = d ? "attn-bwd" : "attn-fwd",
                .predicted_cost = d ? x->flop_b : x->flop_f, .predicted_s = d ? x->model_b : x->model_f,
                .configs_json = params, .step_median_s = m, .step_min_s = d ? x->min_b : x->min_f,
                .step_max_s = d ? x->max_b : x->max_f, .steps = x->batches > 0 ? x->batches : 1,
                .status = x->bad || !isfinite(m) ? "error" : "ok",
                .message = x->bad ? x->bad : isfinite(m) ? NULL : "failed"};
            if (sb_db_record_measurement(db, &rec, NULL, &err))
                fprintf(stderr, "perf/gpu_attention: %s (figure not stored)\n", err.msg);
        }
    if (sb_db_end_run(db, run, &err))
        fprintf(stderr, "perf/gpu_attention: %s\n", err.msg);
    sb_db_close(db);
    printf("# figures stored in %s (run %lld)\n", o->db, (long long)run);
}

/* ",seq:tflops" onto buf (no comma first). */
static void append_pt(char *buf, size_t cap, int seq, double tflops)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s%d:%.0f", n ? "," : "", seq, tflops);
}

/* The fragment: the causal points' measured rates; the unmasked ones as a note. */
static void fragment(const point *p, const char *device, const char *versions, const char *machine,
                     double seconds, char *out, size_t cap)
{
    char fw[256] = "", bw[256] = "", uf[256] = "", ub[256] = "", day[32];
    for (int i = 0; i < NPTS; i++) {
        const point *x = &p[i];
        append_pt(x->causal ? fw : uf, sizeof fw, x->seq, tf(x->flop_f, x->meas_f));
        append_pt(x->causal ? bw : ub, sizeof bw, x->seq, tf(x->flop_b, x->meas_b));
    }
    time_t now = time(NULL);
    strftime(day, sizeof day, "%Y-%m-%d", gmtime(&now));
    snprintf(out, cap,
             "# Measured by perf/gpu_attention on %.120s (%.120s), %s, priced against %.300s:\n"
             "#   PyTorch's scaled_dot_product_attention on cuDNN's backend, bf16, %d heads of\n"
             "#   %d, %.0f tokens a call, the causal mask; median of ~50 ms batches over %.2f s.\n"
             "attn_fwd_tflops %s\n"
             "attn_bwd_tflops %s\n"
             "# without the mask: forward %s; backward %s\n",
             device, versions, day, machine, HEADS, DIM, TOKENS, seconds, fw, bw, uf, ub);
}

int main(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    sb_machine mc;
    sb_gpu g;
    sb_error err = {0};
    if (sb_machine_load(o.machine, &mc, &err) || sb_gpu_from_machine(&mc, SB_PREC_BF16, &g, &err)) {
        fprintf(stderr, "perf/gpu_attention: %s\n", err.msg);
        return 2;
    }
    point p[NPTS];
    build_points(&g, p);
    if (o.plan) {
        print_table(p, mc.path);
        return 0;
    }
    json_t *ready = NULL;
    int peer = run_peer(&o, p, &ready);
    if (peer == 77 || peer == 2) {
        json_decref(ready);
        return peer;
    }
    const char *dn = json_string_value(json_object_get(ready, "device")),
               *tv = json_string_value(json_object_get(ready, "torch"));
    char device[160], libs[128], versions[512];
    snprintf(device, sizeof device, "1 x %.120s", dn ? dn : "?");
    snprintf(libs, sizeof libs, "torch=%.60s cudnn=%lld", tv ? tv : "?",
             (long long)json_integer_value(json_object_get(ready, "cudnn")));
    snprintf(versions, sizeof versions, "%s machine=%.300s", libs, mc.path);
    json_decref(ready);
    print_table(p, mc.path); /* what was measured, also of a run that failed part way */
    int failed = peer != 0;
    double peak = g.attn_peak_tflops > 0 ? g.attn_peak_tflops : g.peak_tflops;
    for (int i = 0; i < NPTS; i++) { /* a point that did no work reads faster than the peak */
        point *x = &p[i];
        if (!isfinite(x->meas_f) && !isfinite(x->meas_b))
            continue; /* not measured: the peer's failure, said above */
        if (!(x->meas_f > 0) || !(x->meas_b > 0) || tf(x->flop_f, x->meas_f) > peak ||
            tf(x->flop_b, x->meas_b) > peak) {
            x->bad = "not a measurement: faster than the bf16 peak, or not a time";
            fprintf(stderr, "perf/gpu_attention: seq %d%s: %s (%g s, %g s)\n", x->seq,
                    x->causal ? " causal" : "", x->bad, x->meas_f, x->meas_b);
            failed = 1;
        }
    }
    store(&o, p, device, versions);
    if (failed) {
        fprintf(stderr, "perf/gpu_attention: not every point was measured (above): no fragment\n");
        return 1;
    }
    char frag[4096];
    fragment(p, device + 4, libs, mc.path, o.seconds, frag, sizeof frag);
    printf("\n%s", frag);
    return o.fragment && write_fragment(o.fragment, frag) ? 1 : 0;
}
