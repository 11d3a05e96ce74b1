/* plots/search_json.h: a search's JSON as the figures of `plot --search`
 * read it (internal to plots/: fig_search.c, fig_schedule.c,
 * fig_megatron.c; search_json.c). Two kinds: the full-space search's
 * (`search --space full`: stage_details per pipeline stage, ops) and
 * Megatron's (`search --algo megatron`: its degrees, time_breakdown_seconds,
 * memory_bytes_per_device and, since issue 41, stage_details with VPP
 * chunks per stage). */
#ifndef SB_PLOTS_SEARCH_JSON_H
#define SB_PLOTS_SEARCH_JSON_H

#include <stdio.h>

#include "figs.h"

typedef struct {
    const char *src;           /* file name for messages */
    const sb_json *j;
    char model[64], name[128]; /* name: MODEL-pP */
    int p, S, M, sched_1f1b;
    int vpp;                   /* chunks per stage (Megatron's interleaving; else 1) */
    double step_s;             /* predicted_step_seconds, else total_cost at F */
    int step_from_cost;        /* 1: the reference model's seconds at F */
    const sb_json *stages;     /* stage_details, or NULL */
    const sb_json *mt;         /* Megatron's degrees ("megatron"), or NULL: the op-level search */
} search_json;

/* j (the JSON of file src) into s; SB_EXIT_INPUT when it is not a search's. */
int sb_sj_read(const sb_json *j, const char *src, search_json *s, sb_error *err);
/* SB_EXIT_INPUT naming field as missing for figure. */
int sb_sj_missing(const search_json *s, const char *figure, const char *field, sb_error *err);
/* o's finite number `key`, or NULL. */
const sb_json *sb_sj_num(const sb_json *o, const char *key);
/* stage st's number `key` (inside `sub` when not NULL) into *v; -1 with err
 * naming stage_details[st].sub.key when missing. */
int sb_sj_stage_num(const search_json *s, const char *figure, int st, const char *sub,
                    const char *key, double *v, sb_error *err);
/* stage_details, microbatches and a step of seconds, else -1 naming the first missing. */
int sb_sj_need_pipeline(const search_json *s, const char *figure, sb_error *err);
/* "; KEY='w1|w2|...'" onto v. */
void sb_sj_gp_list(FILE *v, const char *key, const char *const *words, int n);
/* Runs SCRIPT with the variables `vars` (a memstream's text, fclose'd here)
 * into OUT/BASE: 0, or -1 with err set. */
int sb_sj_draw(plotter *pl, const char *script, const char *base, FILE *v, char **vars,
               sb_error *err);

/* the figures (fig_search.c draws all four; fig_schedule.c, fig_megatron.c) */
int sb_fig_schedule(plotter *pl, const search_json *s, sb_error *err);
/* Megatron's layouts as a layers x dims heat map (its configs figure). */
int sb_fig_mt_layouts(plotter *pl, const search_json *s, sb_error *err);

#endif
