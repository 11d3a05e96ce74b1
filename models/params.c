/* params.c: the model's trained values counted as a framework counts its
 * parameters (sb_model_param_count): the ops' own weights (conv filters,
 * dense matrices, tables, norm scales and shifts) and the declared weights,
 * a tied weight (`tie`) once; and the values one token uses in a mixture
 * of experts. */
#include "shardbench/model.h"

#include <stdlib.h>
#include <string.h>

static int64_t tensor_elems(const sb_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndims; d++)
        n *= t->dims[d].size;
    return n;
}

static int is_tied(const sb_model *m, int t)
{
    for (int i = 0; i < m->ntied && i < 4; i++)
        if (m->tied[i] == t)
            return 1;
    return 0;
}

/* The share of weight t one token uses: k/E when it has the expert dim
 * (name and size) of a moe_gate and is not read by a router (the op whose
 * output a gate takes), else 1 (as num/den). */
static void token_share(const sb_model *m, int t, const char *router, int64_t *num, int64_t *den)
{
    *num = *den = 1;
    if (router[t])
        return;
    const sb_tensor *w = &m->tensors[t];
    for (int g = 0; g < m->nops; g++) {
        const sb_op *op = &m->ops[g];
        if (op->kind != SB_OP_MOE_GATE || op->nin < 1)
            continue;
        const sb_tensor *lg = &m->tensors[op->in[0].tensor];
        const sb_dim *ex = &lg->dims[lg->ndims - 1];
        for (int d = 0; d < w->ndims; d++)
            if (strcmp(w->dims[d].name, ex->name) == 0 && w->dims[d].size == ex->size) {
                *num = op->topk;
                *den = ex->size;
                return;
            }
    }
}

int sb_op_trains_weight(const sb_model *m, const sb_op *op)
{
    for (int k = 0; k < op->nin; k++)
        if (m->tensors[op->in[k].tensor].kind == SB_TENSOR_WEIGHT)
            return 1;
    return op->nweights > 0;
}

int64_t sb_model_param_count(const sb_model *m, int64_t *active)
{
    int64_t total = 0, act = 0;
    for (int i = 0; i < m->nops; i++)
        for (int w = 0; w < m->ops[i].nweights; w++) {
            int64_t n = 1;
            for (int d = 0; d < m->ops[i].weights[w].ndims; d++)
                n *= m->ops[i].weights[w].size[d];
            total += n;
        }
    act = total;
    /* routers: the weights read by an op whose output a moe_gate takes */
    char *router = calloc((size_t)m->ntensors + 1, 1);
    if (!router)
        return -1;
    for (int g = 0; g < m->nops; g++) {
        if (m->ops[g].kind != SB_OP_MOE_GATE || m->ops[g].nin < 1)
            continue;
        int p = m->tensors[m->ops[g].in[0].tensor].producer;
        for (int s = 0; p >= 0 && s < m->ops[p].nin; s++)
            router[m->ops[p].in[s].tensor] = 1;
    }
    for (int t = 0; t < m->ntensors; t++) {
        if (m->tensors[t].kind != SB_TENSOR_WEIGHT || is_tied(m, t))
            continue;
        int64_t n = tensor_elems(&m->tensors[t]), num, den;
        total += n;
        token_share(m, t, router, &num, &den);
        act += n / den * num;
    }
    free(router);
    if (active)
        *active = act;
    return total;
}
