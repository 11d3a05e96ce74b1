/* plots/fig_scaling.c: `shardbench plot --scaling FILE.json...`: several
 * searches of one model (`search --format json`, any p), predicted tokens
 * per second against devices, one line per algorithm, and the MFU on the
 * right axis where the JSONs have it (predicted_mfu). Tokens per second:
 * predicted_tokens_per_second where present, else the batch x seq tokens
 * of one step (the model's parameters in the JSON) over
 * predicted_step_seconds; a JSON with neither fails naming the fields. A
 * point whose peak_bytes_per_device is over the device's memory (any
 * file's device_memory_bytes or memory_limit_bytes: a plain search, say dp,
 * is not held to it) is marked "over memory" and said on stdout. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figs.h"
#include "shardbench/plots.h"

typedef struct {
    char algo[64];
    int p;
    double tps, mfu; /* mfu NaN when absent */
    double peak, dev; /* peak_bytes_per_device; the device's memory (NaN: not in the JSON) */
    int derived;     /* tokens/s from batch x seq / step seconds */
    const char *path;
} point;

static char *slurp(const char *path, sb_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        sb_fail(err, SB_EXIT_INPUT, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            char *b = realloc(buf, cap = 2 * cap + 65536 + 1);
            if (!b) {
                free(buf), fclose(f);
                sb_fail(err, SB_EXIT_INTERNAL, "out of memory reading %s", path);
                return NULL;
            }
            buf = b;
        }
        size_t k = fread(buf + n, 1, 65536, f);
        n += k;
        if (k < 65536)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        sb_fail(err, SB_EXIT_INPUT, "%s: read error", path);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static const sb_json *num(const sb_json *o, const char *k)
{
    const sb_json *x = sb_json_get(o, k);
    return x && x->type == SB_JSON_NUM && isfinite(x->num) ? x : NULL;
}

/* one JSON's point; model/params of the first file in *model (checked after) */
static int read_point(const char *path, char *model, size_t mlen, char *params, size_t plen,
                      point *pt, sb_error *err)
{
    char *text = slurp(path, err);
    if (!text)
        return -1;
    sb_json *j = sb_json_parse(text, err);
    free(text);
    if (!j) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        return sb_fail(err, SB_EXIT_INPUT, "%s: %s", path, m);
    }
    int rc = -1;
    const char *name = sb_json_str(sb_json_get(j, "model")), *algo = sb_json_str(sb_json_get(j, "algo"));
    const char *space = sb_json_str(sb_json_get(j, "space"));
    const sb_json *p = num(j, "p"), *pr = sb_json_get(j, "params");
    if (!name || !algo || !p) {
        sb_fail(err, SB_EXIT_INPUT, "%s: not a search's JSON (no \"model\", \"algo\" or \"p\")", path);
        goto out;
    }
    /* the model's parameters without batch (a planner may vary it) as one string */
    char ps[1024] = "";
    size_t u = 0;
    for (const sb_json *x = pr ? pr->child : NULL; x && u < sizeof ps; x = x->next)
        if (x->key && strcmp(x->key, "batch"))
            u += (size_t)snprintf(ps + u, sizeof ps - u, "%s%s=%g", u ? "," : "", x->key,
                                  sb_json_num(x, NAN));
    if (!model[0]) {
        snprintf(model, mlen, "%s", name);
        snprintf(params, plen, "%s", ps);
    } else if (strcmp(model, name) || strcmp(params, ps)) {
        sb_fail(err, SB_EXIT_INPUT, "%s: model %s (%s), not %s (%s) as the first file: the "
                "scaling figure is of one model", path, name, ps, model, params);
        goto out;
    }
    pt->path = path;
    pt->p = (int)p->num;
    snprintf(pt->algo, sizeof pt->algo, "%s%s", algo, space && !strcmp(space, "full") ? "-full" : "");
    const sb_json *mt = sb_json_get(j, "megatron"); /* search --algo megatron: its degrees */
    if (mt && mt->type == SB_JSON_OBJ)
        printf("(scaling-%s: %s at p = %d: tp %g pp %g dp %g cp %g ep %g vpp %g)\n", name,
               pt->algo, pt->p, sb_json_num(sb_json_get(mt, "tp"), NAN),
               sb_json_num(sb_json_get(mt, "pp"), NAN), sb_json_num(sb_json_get(mt, "dp"), NAN),
               sb_json_num(sb_json_get(mt, "cp"), NAN), sb_json_num(sb_json_get(mt, "ep"), NAN),
               sb_json_num(sb_json_get(mt, "vpp"), NAN));
    const sb_json *tps = num(j, "predicted_tokens_per_second"), *mfu = num(j, "predicted_mfu");
    const sb_json *step = num(j, "predicted_step_seconds");
    const sb_json *b = num(pr, "batch"), *seq = num(pr, "seq");
    pt->mfu = mfu ? mfu->num : NAN;
    const sb_json *pk = num(j, "peak_bytes_per_device"), *dv = num(j, "device_memory_bytes");
    if (!dv)
        dv = num(j, "memory_limit_bytes");
    pt->peak = pk ? pk->num : NAN;
    pt->dev = dv ? dv->num : NAN;
    if (tps) {
        pt->tps = tps->num;
    } else if (step && b && seq && step->num > 0) {
        pt->tps = b->num * seq->num / step->num;
        pt->derived = 1;
    } else {
        sb_fail(err, SB_EXIT_INPUT, "%s: no \"predicted_tokens_per_second\", nor "
                "\"predicted_step_seconds\" with params batch and seq: the scaling figure needs "
                "them (search with --machine or --calibration)", path);
        goto out;
    }
    rc = 0;
out:
    sb_json_free(j);
    return rc;
}

int sb_plot_scaling(const char *const *paths, int n, const char *out, const char *scripts,
                    int *figures, int *files, sb_error *err)
{
    plotter pl = {.out = out};
    point *pts = calloc((size_t)(n ? n : 1), sizeof *pts);
    sb_series *s = calloc(1, sizeof *s);
    char model[64] = "", params[1024] = "", path[PATH_MAX];
    int rc = -1, derived = 0, with_mfu = 0, pmin = 1 << 30, pmax = 0;
    FILE *f = NULL;
    if (!pts || !s) {
        sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if (n < 1) {
        sb_fail(err, SB_EXIT_INPUT, "plot --scaling: give the searches' JSON files");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        if (read_point(paths[i], model, sizeof model, params, sizeof params, &pts[i], err) ||
            sb_series_add(s, pts[i].algo, err))
            goto out;
        for (int k = 0; k < i; k++)
            if (pts[k].p == pts[i].p && !strcmp(pts[k].algo, pts[i].algo)) {
                sb_fail(err, SB_EXIT_INPUT, "%s and %s: both %s at p = %d (one point each)",
                        pts[k].path, paths[i], pts[i].algo, pts[i].p);
                goto out;
            }
        derived |= pts[i].derived;
        with_mfu |= isfinite(pts[i].mfu);
        pmin = pts[i].p < pmin ? pts[i].p : pmin;
        pmax = pts[i].p > pmax ? pts[i].p : pmax;
    }
    sb_series_sort(s);
    /* the device's memory: any file's (a full-space search says it; a plain one does not) */
    double dev = NAN;
    for (int i = 0; i < n; i++)
        if (isfinite(pts[i].dev)) {
            if (isfinite(dev) && dev != pts[i].dev) {
                sb_fail(err, SB_EXIT_INPUT, "%s: device memory %.4g GiB, another file %.4g GiB: "
                        "the scaling figure is of one machine", paths[i],
                        pts[i].dev / 1073741824.0, dev / 1073741824.0);
                goto out;
            }
            dev = pts[i].dev;
        }
    int over = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(dev) && pts[i].peak > dev) {
            printf("(scaling-%s: %s at p = %d needs %.4g GiB per device, over the %.4g GiB of the "
                   "device: marked)\n", model, pts[i].algo, pts[i].p, pts[i].peak / 1073741824.0,
                   dev / 1073741824.0);
            over++;
        }
    if (sb_plotter_open(&pl, scripts, out, err) ||
        !(f = sb_plot_data_file(&pl, "scaling", path, sizeof path, err)))
        goto out;
    for (int w = 0; w < s->n; w++) { /* per algorithm, by p */
        fprintf(f, "# algo %s\n", s->name[w]);
        for (int last = 0;;) {
            int best = -1;
            for (int i = 0; i < n; i++) {
                char safe[64];
                sb_plot_safe_name(pts[i].algo, safe, sizeof safe);
                if (!strcmp(safe, s->name[w]) && pts[i].p > last && (best < 0 || pts[i].p < pts[best].p))
                    best = i;
            }
            if (best < 0)
                break;
            fprintf(f, "%d\t%.9g\t%.9g\t%d\n", pts[best].p, pts[best].tps,
                    isfinite(pts[best].mfu) ? 100 * pts[best].mfu : NAN,
                    isfinite(dev) && pts[best].peak > dev);
            last = pts[best].p;
        }
        fprintf(f, "\n\n");
    }
    if (fclose(f)) {
        f = NULL;
        sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
        goto out;
    }
    f = NULL;
    if (!with_mfu)
        printf("(scaling-%s: no predicted_mfu in these searches: tokens per second only)\n", model);
    char title[400], extra[200], base[128], safe[64];
    snprintf(title, sizeof title, "%.60s: predicted throughput against devices%s", model,
             with_mfu ? ", MFU dashed (right axis)" : "");
    snprintf(extra, sizeof extra, "; pmin=%d; pmax=%d; mfu=%d; over=%d; ylab='%s'", pmin, pmax,
             with_mfu, over,
             derived ? "tokens per second (batch x seq / predicted step seconds)"
                     : "predicted tokens per second");
    sb_plot_safe_name(model, safe, sizeof safe);
    snprintf(base, sizeof base, "scaling-%s", safe);
    char *vars = sb_series_vars(path, "algos", s, title, extra, err);
    if (!vars)
        goto out;
    rc = sb_plot_gnuplot(&pl, "scaling.gp", base, vars, err);
    free(vars);
out:
    if (f)
        fclose(f);
    if (figures)
        *figures = pl.figures;
    if (files)
        *files = pl.files;
    sb_plotter_close(&pl);
    free(pts);
    free(s);
    return rc;
}
