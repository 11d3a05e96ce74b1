/* expert.c: the expert baseline, chosen by the model's ops and dim names
 * (include/shardbench/candidates.h, search/README.md "Baselines"): one
 * weird trick for CNNs, GNMT-style for LSTMs, Mesh-TensorFlow's layout for
 * Transformers. Each op's wanted config goes through sb_config_nearest, so
 * an op that cannot take it gets the nearest valid one. Not the search. */
#include "shardbench/candidates.h"
#include "shardbench/strategy.h"

#include <stdlib.h>
#include <string.h>

static int dim_named(const sb_op *op, const char *name)
{
    for (int d = 0; d < op->ndims; d++)
        if (!strcmp(op->dims[d].name, name))
            return d;
    return -1;
}

static int model_has_kind(const sb_model *m, sb_op_kind k)
{
    for (int i = 0; i < m->nops; i++)
        if (m->ops[i].kind == k)
            return 1;
    return 0;
}

static int model_has_dim(const sb_model *m, const char *name)
{
    for (int i = 0; i < m->nops; i++)
        if (dim_named(&m->ops[i], name) >= 0)
            return 1;
    return 0;
}

/* want: dim `d` split p ways (the nearest valid config decides how far), the rest 1 */
static void want_one(const sb_op *op, int d, int p, int *want)
{
    for (int i = 0; i < op->ndims; i++)
        want[i] = 1;
    if (d >= 0)
        want[d] = p;
}

/* One weird trick (Krizhevsky 2014): data parallel convolutions, pools,
 * norms and the rest; dense layers split their output features (units)
 * and the loss its classes, model parallel. */
static void owt(const sb_problem *pb, int *choice)
{
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        int want[SB_MAX_DIMS];
        if (op->kind == SB_OP_DENSE)
            want_one(op, op->ndims - 2, pb->p, want);
        else if (op->kind == SB_OP_SOFTMAX_XENT)
            want_one(op, op->ndims - 1, pb->p, want);
        else
            want_one(op, dim_named(op, "batch"), pb->p, want);
        choice[i] = sb_config_nearest(pb, i, want, NULL);
    }
}

/* GNMT (Wu et al. 2016): each LSTM layer on its own devices (layers split
 * as far as P allows), batch over the devices left; data parallel
 * elsewhere. */
static void gnmt(const sb_problem *pb, int *choice)
{
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        int want[SB_MAX_DIMS];
        want_one(op, dim_named(op, "batch"), pb->p, want);
        if (op->kind == SB_OP_LSTM) {
            int L = (int)op->dims[0].size;
            int cl = 1;
            for (int e = 1; e <= L && e <= pb->p; e++)
                if (L % e == 0 && pb->p % e == 0)
                    cl = e;
            want[0] = cl;
            want[2] = pb->p / cl;
        }
        choice[i] = sb_config_nearest(pb, i, want, NULL);
    }
}

/* Mesh-TensorFlow (Shazeer et al. 2018): a 2-axis mesh x*y = P; batch over
 * x, the model dims over y (y >= 2; with P = 1 nothing is split). Every
 * shape is tried; the cheapest is kept. */
static const char *const model_dims[] = {"heads", "ff", "vocab", "units", "hidden", "classes"};

static int is_model_dim(const char *name)
{
    for (size_t k = 0; k < sizeof model_dims / sizeof model_dims[0]; k++)
        if (!strcmp(name, model_dims[k]))
            return 1;
    return 0;
}

static int mesh_tf(const sb_problem *pb, int *choice, sb_error *err)
{
    int n = pb->m->nops;
    int *cur = sb_malloc((size_t)n * sizeof *cur, err);
    if (!cur)
        return -1;
    double best = -1;
    for (int i = 0; i < n; i++)
        choice[i] = 0; /* P = 1: the all-ones config */
    for (int x = 1; x <= pb->p / 2; x++) {
        if (pb->p % x)
            continue; /* y = P/x >= 2: a model axis exists (y = 1 is data parallel) */
        int y = pb->p / x;
        for (int i = 0; i < n; i++) {
            const sb_op *op = &pb->m->ops[i];
            int want[SB_MAX_DIMS];
            for (int d = 0; d < op->ndims; d++)
                want[d] = !strcmp(op->dims[d].name, "batch") ? x
                          : is_model_dim(op->dims[d].name) ? y : 1;
            cur[i] = sb_config_nearest(pb, i, want, NULL);
        }
        double c = sb_strategy_cost(pb, cur);
        if (best < 0 || c < best) {
            best = c;
            memcpy(choice, cur, (size_t)n * sizeof *cur);
        }
    }
    free(cur);
    return 0;
}

int sb_strategy_expert(const sb_problem *pb, int *choice, const char **style, sb_error *err)
{
    const sb_model *m = pb->m;
    const char *s;
    if (model_has_kind(m, SB_OP_CONV)) {
        s = "owt";
        owt(pb, choice);
    } else if (model_has_kind(m, SB_OP_LSTM)) {
        s = "gnmt";
        gnmt(pb, choice);
    } else if (model_has_dim(m, "heads") || model_has_dim(m, "ff") || model_has_dim(m, "vocab")) {
        s = "mesh-tf";
        if (mesh_tf(pb, choice, err))
            return -1;
    } else {
        s = "dp";
        if (sb_strategy_data_parallel(pb, choice, err))
            return -1;
    }
    if (style)
        *style = s;
    return 0;
}
