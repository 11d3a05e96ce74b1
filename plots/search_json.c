/* plots/search_json.c: a search's JSON read for the figures of
 * `plot --search` (search_json.h): what it is, its fields, and the errors
 * naming the one a figure lacks. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search_json.h"
#include "shardbench/plots.h"

int sb_sj_missing(const search_json *s, const char *figure, const char *field, sb_error *err)
{
    return sb_fail(err, SB_EXIT_INPUT, "%s: no \"%s\": the %s figure needs it (`shardbench "
                   "search --space full --format json` or `search --algo megatron --format "
                   "json` writes it)", s->src, field, figure);
}

const sb_json *sb_sj_num(const sb_json *o, const char *key)
{
    const sb_json *x = sb_json_get(o, key);
    return x && x->type == SB_JSON_NUM && isfinite(x->num) ? x : NULL;
}

int sb_sj_stage_num(const search_json *s, const char *figure, int st, const char *sub,
                    const char *key, double *v, sb_error *err)
{
    const sb_json *o = sb_json_at(s->stages, st);
    if (sub)
        o = sb_json_get(o, sub);
    const sb_json *x = sb_sj_num(o, key);
    if (!x) {
        char f[96];
        snprintf(f, sizeof f, "stage_details[%d].%s%s%s", st, sub ? sub : "", sub ? "." : "", key);
        return sb_sj_missing(s, figure, f, err);
    }
    *v = x->num;
    return 0;
}

int sb_sj_read(const sb_json *j, const char *src, search_json *s, sb_error *err)
{
    memset(s, 0, sizeof *s);
    s->src = src;
    s->j = j;
    const char *model = sb_json_str(sb_json_get(j, "model"));
    const sb_json *p = sb_sj_num(j, "p");
    if (!model || !p)
        return sb_fail(err, SB_EXIT_INPUT, "%s: not a search's JSON (no \"model\" or \"p\")",
                       src);
    snprintf(s->model, sizeof s->model, "%s", model);
    s->p = (int)p->num;
    char safe[64];
    sb_plot_safe_name(model, safe, sizeof safe);
    snprintf(s->name, sizeof s->name, "%s-p%d", safe, s->p);
    const sb_json *st = sb_json_get(j, "stage_details"), *mb = sb_sj_num(j, "microbatches");
    if (st && st->type == SB_JSON_ARR && st->n > 0)
        s->stages = st;
    s->S = s->stages ? s->stages->n : 0;
    s->M = mb ? (int)mb->num : 0;
    s->vpp = 1;
    const sb_json *mt = sb_json_get(j, "megatron");
    const char *algo = sb_json_str(sb_json_get(j, "algo"));
    const char *answer = sb_json_str(sb_json_get(j, "answer")); /* the full space's grid half */
    if (mt && mt->type == SB_JSON_OBJ &&
        ((algo && !strncmp(algo, "megatron", 8)) || (answer && !strcmp(answer, "megatron_grid")))) {
        s->mt = mt;
        const sb_json *v = sb_sj_num(mt, "vpp"), *pp = sb_sj_num(mt, "pp"),
                      *m2 = sb_sj_num(mt, "microbatches");
        if (!v || !pp || v->num < 1 || pp->num < 1)
            return sb_fail(err, SB_EXIT_INPUT, "%s: \"megatron\" lacks a positive \"pp\" or "
                           "\"vpp\"", src);
        s->vpp = (int)v->num;
        if (s->stages && s->S != (int)pp->num)
            return sb_fail(err, SB_EXIT_INPUT, "%s: %d stage_details for megatron.pp = %d",
                           src, s->S, (int)pp->num);
        if (!s->S)
            s->S = (int)pp->num; /* an older JSON: the degrees only */
        if (!mb && m2)
            s->M = (int)m2->num;
    }
    const char *sched = sb_json_str(sb_json_get(j, "schedule"));
    s->sched_1f1b = s->mt || (sched && (!strcmp(sched, "1f1b") || !strcmp(sched, "interleaved-1f1b")));
    const sb_json *ps = sb_sj_num(j, "predicted_step_seconds"), *tc = sb_sj_num(j, "total_cost"),
                  *f = sb_sj_num(j, "flops_tflops");
    if (ps)
        s->step_s = ps->num;
    else if (tc && f && f->num > 0) {
        s->step_s = tc->num / (f->num * 1e12);
        s->step_from_cost = 1;
    }
    return 0;
}

int sb_sj_need_pipeline(const search_json *s, const char *figure, sb_error *err)
{
    if (!s->stages)
        return sb_sj_missing(s, figure, "stage_details", err);
    if (s->M < 1)
        return sb_sj_missing(s, figure, "microbatches", err);
    if (!(s->step_s > 0))
        return sb_sj_missing(s, figure, "predicted_step_seconds", err);
    return 0;
}

void sb_sj_gp_list(FILE *v, const char *key, const char *const *words, int n)
{
    fprintf(v, "; %s='", key);
    for (int i = 0; i < n; i++)
        fprintf(v, "%s%s", i ? "|" : "", words[i]);
    fputc('\'', v);
}

int sb_sj_draw(plotter *pl, const char *script, const char *base, FILE *v, char **vars,
               sb_error *err)
{
    if (fclose(v)) {
        free(*vars);
        *vars = NULL;
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    int rc = sb_plot_gnuplot(pl, script, base, *vars, err);
    free(*vars);
    *vars = NULL;
    return rc;
}
