/* micro.c: the model one micro-batch sees (services.h). With M
 * micro-batches every op's dim named "batch" is cut M ways, and so is every
 * tensor dim that follows it; micro-batch j is then this smaller model with
 * its batch rows at j*B/M of the caller's (inputs.c moves the boxes of
 * inputs and labels there, so the data are the global batch's). Grids,
 * boxes, groups and relayout plans are the micro-batch model's, the same
 * for every micro-batch. Local, no MPI. */
#include "services.h"

#include <stdlib.h>
#include <string.h>

static int batch_dim(const sb_op *op)
{
    for (int d = 0; d < op->ndims; d++)
        if (!strcmp(op->dims[d].name, "batch"))
            return d;
    return -1;
}

/* What a micro-batch cannot compute as a part of the global batch. */
static int refuse(const sb_op *op, int bd, int M, sb_error *err)
{
    const char *why = NULL;
    if (op->kind == SB_OP_NORM && op->batchnorm)
        why = "batch norm's statistics would be a micro-batch's, not the batch's";
    else if (op->kind == SB_OP_MOE_GATE)
        why = "the router's load-balancing loss is a mean over the whole batch";
    else if (op->kind == SB_OP_REDUCE_MEAN && (op->axes & (1u << bd)))
        why = "it averages over the batch";
    else if (op->kind == SB_OP_LSTM)
        why = "the LSTM keeps its steps' state inside the op";
    if (why)
        return sb_fail(err, SB_EXIT_INPUT, "microbatches %d: op '%s' (%s) cannot run in "
                       "micro-batches: %s", M, op->name, sb_op_kind_name(op->kind), why);
    for (int w = 0; w < op->nweights; w++)
        for (int j = 0; j < op->weights[w].ndims; j++)
            if (op->weights[w].map[j] == bd)
                return sb_fail(err, SB_EXIT_INPUT, "microbatches %d: weight '%s%s' follows the "
                               "batch dim", M, op->name, op->weights[w].suffix);
    return 0;
}

/* Marks the tensor dims that follow an op's batch dim (or a flat side that
 * holds it); -1 with err where a tensor would be cut two ways. */
static int mark(const sb_model *m, const sb_op *op, const sb_operand *od, int bd, int *mbd,
                sb_error *err)
{
    const sb_tensor *t = &m->tensors[od->tensor];
    for (int j = 0; j < t->ndims; j++) {
        int cut = od->map[j] == bd || od->map[j] == SB_MAP_ALL;
        if (!cut)
            continue;
        if (od->map[j] == SB_MAP_ALL && bd != 0)
            return sb_fail(err, SB_EXIT_INPUT, "microbatches: op '%s' flattens a batch dim that "
                           "is not its outermost", op->name);
        if (mbd[od->tensor] >= 0 && mbd[od->tensor] != j)
            return sb_fail(err, SB_EXIT_INPUT, "microbatches: tensor '%s' follows the batch "
                           "along dims %d and %d", t->name, mbd[od->tensor], j);
        mbd[od->tensor] = j;
    }
    return 0;
}

/* Every operand dim that follows batch must lie on its tensor's cut dim,
 * and no other may. */
static int consistent(const sb_model *m, const sb_op *op, const sb_operand *od, int bd,
                      const int *mbd, sb_error *err)
{
    const sb_tensor *t = &m->tensors[od->tensor];
    for (int j = 0; j < t->ndims; j++) {
        int cut = od->map[j] == bd || od->map[j] == SB_MAP_ALL;
        if (cut != (mbd[od->tensor] == j))
            return sb_fail(err, SB_EXIT_INPUT, "microbatches: op '%s' reads dim %d of tensor '%s' "
                           "%s the batch, another op %s", op->name, j, t->name,
                           cut ? "as" : "not as", cut ? "does not" : "does");
    }
    return 0;
}

int exec_micro_model(sb_executor *ex, const sb_model *m, int M, sb_error *err)
{
    sb_model *u = &ex->micro;
    memset(u, 0, sizeof *u);
    int *mbd = malloc((size_t)(m->ntensors ? m->ntensors : 1) * sizeof *mbd);
    if (!mbd)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    ex->mb_dim = mbd;
    for (int t = 0; t < m->ntensors; t++)
        mbd[t] = -1;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        int bd = batch_dim(op);
        if (bd < 0) /* sb_pipeline_check says so first */
            return sb_fail(err, SB_EXIT_INPUT, "microbatches %d: op '%s' has no dim named batch",
                           M, op->name);
        if (refuse(op, bd, M, err))
            return -1;
        for (int k = 0; k < op->nin; k++)
            if (mark(m, op, &op->in[k], bd, mbd, err))
                return -1;
        for (int k = 0; k < op->nout; k++)
            if (mark(m, op, &op->out[k], bd, mbd, err))
                return -1;
    }
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        int bd = batch_dim(op);
        for (int k = 0; k < op->nin; k++)
            if (consistent(m, op, &op->in[k], bd, mbd, err))
                return -1;
        for (int k = 0; k < op->nout; k++)
            if (consistent(m, op, &op->out[k], bd, mbd, err))
                return -1;
    }
    *u = *m;
    u->params = malloc((size_t)(m->nparams ? m->nparams : 1) * sizeof *u->params);
    u->ops = malloc((size_t)m->nops * sizeof *u->ops);
    u->tensors = malloc((size_t)(m->ntensors ? m->ntensors : 1) * sizeof *u->tensors);
    if (!u->params || !u->ops || !u->tensors)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    memcpy(u->params, m->params, (size_t)m->nparams * sizeof *u->params);
    memcpy(u->ops, m->ops, (size_t)m->nops * sizeof *u->ops);
    memcpy(u->tensors, m->tensors, (size_t)m->ntensors * sizeof *u->tensors);
    for (int i = 0; i < u->nops; i++)
        u->ops[i].dims[batch_dim(&u->ops[i])].size /= M; /* M divides it (sb_pipeline_check) */
    for (int t = 0; t < u->ntensors; t++) {
        sb_dim *d = mbd[t] >= 0 ? &u->tensors[t].dims[mbd[t]] : NULL;
        if (d && d->size % M)
            return sb_fail(err, SB_EXIT_INPUT, "microbatches %d: does not divide dim %d (%lld) of "
                           "tensor '%s'", M, mbd[t], (long long)d->size, u->tensors[t].name);
        if (d)
            d->size /= M;
    }
    return 0;
}
