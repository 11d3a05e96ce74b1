/* plots/fig_megatron.c: a Megatron configuration's layouts as the configs
 * figure's layers x dims heat map (`plot --search` of `search --algo
 * megatron`; configs.gp). Megatron-LM has one layout per op kind, the same
 * in every layer, fixed by its degrees (Shoeybi et al. 2019, "Megatron-LM",
 * Sec. 3; Korthikanti et al. 2022, sequence parallelism; Narayanan et al.
 * 2021, the pipeline over layers): the batch over DP, the sequence over CP,
 * the layers over PP; the QKV and MLP-up GEMMs column-parallel (their
 * output, heads or ff, over TP), the projection and MLP-down GEMMs
 * row-parallel (their input over TP), attention by head, the embedding and
 * the logits vocab-parallel; under sequence parallelism the norms and
 * dropouts split the sequence over TP too; MoE experts over EP. So one row
 * per op kind stands for all the layers (repeated layers once). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_json.h"
#include "shardbench/plots.h"

enum { D_BATCH, D_SEQ, D_LAYERS, D_EMBED, D_HEADS, D_FF, D_VOCAB, D_EXPERTS, ND };
static const char *const dim_names[ND] = {"batch", "seq", "layers", "embed", "heads",
                                          "ff", "vocab", "experts"};

/* one op kind: its name, whether it is inside every layer, the split of
 * each dim it has (0: it has no such dim) */
typedef struct {
    const char *name;
    int in_layer;
    int split[ND];
} mt_row;

static int degree(const search_json *s, const char *key, int *v, sb_error *err)
{
    const sb_json *x = sb_sj_num(s->mt, key);
    if (!x || x->num < 1) {
        char f[48];
        snprintf(f, sizeof f, "megatron.%s", key);
        return sb_sj_missing(s, "configs", f, err);
    }
    *v = (int)x->num;
    return 0;
}

int sb_fig_mt_layouts(plotter *pl, const search_json *s, sb_error *err)
{
    int tp, pp, dp, cp, ep, vpp;
    if (degree(s, "tp", &tp, err) || degree(s, "pp", &pp, err) || degree(s, "dp", &dp, err) ||
        degree(s, "cp", &cp, err) || degree(s, "ep", &ep, err) || degree(s, "vpp", &vpp, err))
        return -1;
    const sb_json *spj = sb_json_get(s->mt, "sequence_parallel");
    if (!spj || spj->type != SB_JSON_BOOL)
        return sb_sj_missing(s, "configs", "megatron.sequence_parallel", err);
    int sp = spj->num != 0 ? tp : 1;
    const sb_json *params = sb_json_get(s->j, "params");
    int layers = (int)sb_json_num(sb_json_get(params, "layers"), 0);
    int moe = sb_json_num(sb_json_get(params, "experts"), 0) > 0 ? ep : 0;
    const mt_row rows[] = {
        {"embedding (vocab-parallel)", 0, {dp, cp, 0, 1, 0, 0, tp, 0}},
        {"norms, dropouts%s", 1, {dp, cp * sp, pp, 1, 0, 0, 0, 0}},
        {"qkv (column-parallel)", 1, {dp, cp, pp, 1, tp, 0, 0, 0}},
        {"attention (by head)", 1, {dp, cp, pp, 0, tp, 0, 0, 0}},
        {"proj (row-parallel)", 1, {dp, cp, pp, 1, tp, 0, 0, 0}},
        {"mlp up (column-parallel)", 1, {dp, cp, pp, 1, 0, tp, 0, moe}},
        {"mlp down (row-parallel)", 1, {dp, cp, pp, 1, 0, tp, 0, moe}},
        {"logits, loss (vocab-parallel)", 0, {dp, cp, 0, 1, 0, 0, tp, 0}},
    };
    const int nr = (int)(sizeof rows / sizeof rows[0]);
    char path[PATH_MAX];
    FILE *f = sb_plot_data_file(pl, "configs", path, sizeof path, err);
    if (!f)
        return -1;
    int maxc = 1, nd = moe ? ND : ND - 1; /* experts only in a mixture of experts */
    for (int r = 0; r < nr; r++)
        for (int d = 0; d < nd; d++) {
            int split = rows[r].split[d];
            if (!split)
                continue;
            maxc = split > maxc ? split : maxc;
            fprintf(f, "%d\t%d\t%.6g\t%d\n", d, nr - 1 - r, log2(split), split);
        }
    if (fclose(f))
        return sb_fail(err, SB_EXIT_INTERNAL, "%s: write failed", path);
    char *vars = NULL, title[400], base[160], *yl = NULL;
    size_t vl = 0, yn = 0;
    FILE *v = open_memstream(&vars, &vl), *y = open_memstream(&yl, &yn);
    if (!v || !y) {
        if (v)
            fclose(v), free(vars);
        if (y)
            fclose(y), free(yl);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    for (int r = 0; r < nr; r++) { /* row labels, top first, '|'-separated */
        char name[80];
        snprintf(name, sizeof name, rows[r].name, sp > 1 ? " (sequence-parallel)" : "");
        if (rows[r].in_layer && layers > 1)
            fprintf(y, "%slayers 1 … %d / %s", r ? "|" : "", layers, name);
        else
            fprintf(y, "%s%s", r ? "|" : "", name);
    }
    if (fclose(y)) {
        fclose(v), free(vars), free(yl);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    snprintf(title, sizeof title, "%.60s p=%d: Megatron's layouts (tp %d pp %d dp %d cp %d ep %d "
             "vpp %d, SP %s), every layer alike", s->model, s->p, tp, pp, dp, cp, ep, vpp,
             sp > 1 ? "on" : "off");
    fprintf(v, "datafile=");
    sb_plot_gp_str(v, path);
    fprintf(v, "; ttl=");
    sb_plot_gp_str(v, title);
    fprintf(v, "; ylabs=");
    sb_plot_gp_str(v, yl);
    free(yl);
    sb_sj_gp_list(v, "xlabs", dim_names, nd);
    fprintf(v, "; nrows=%d; ncols=%d; cmax=%.6g; width=%d; height=%d", nr, nd,
            log2(maxc > 1 ? maxc : 2), 640 + 60 * nd, 200 + 22 * nr);
    snprintf(base, sizeof base, "configs-%s", s->name);
    return sb_sj_draw(pl, "configs.gp", base, v, &vars, err);
}
