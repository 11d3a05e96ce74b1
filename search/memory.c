/* memory.c: the memory model (include/shardbench/memory.h). Bytes per
 * device of an op under a config (weights, their gradients, optimizer state,
 * activations kept for backward, activation gradients, transient buffers)
 * and the peak of a strategy. It follows what the runtime allocates
 * (runtime/executor.c: every activation and activation gradient of a step
 * stays allocated until the step ends). Not a measurement. */
#include "shardbench/memory.h"

#include <math.h>
#include <string.h>

#define FLOAT_BYTES 4.0

int sb_optimizer_parse(const char *s, sb_optimizer *out, sb_error *err)
{
    if (!strcmp(s, "sgd"))
        *out = SB_OPTIM_SGD;
    else if (!strcmp(s, "adam"))
        *out = SB_OPTIM_ADAM;
    else
        return sb_fail(err, SB_EXIT_INPUT, "--optimizer: '%s' is not sgd or adam", s);
    return 0;
}

const char *sb_optimizer_name(sb_optimizer o) { return o == SB_OPTIM_ADAM ? "adam" : "sgd"; }

double sb_mem_resident(const sb_mem *x)
{
    return x->weights + x->weight_grads + x->optimizer + x->activations + x->act_grads;
}

/* Elements per device of an operand's block under config c. */
static double operand_elems(const sb_model *m, const sb_op *op, const sb_operand *o, const int *c)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    int lay[SB_MAX_DIMS];
    sb_operand_layout(op, o, t->ndims, c, lay);
    double e = 1.0;
    for (int j = 0; j < t->ndims; j++)
        e *= (double)t->dims[j].size / lay[j];
    return e;
}

/* Input block of a pooling op with its halo: a split spatial dim reads
 * (rows - 1) * stride + kernel input rows, at most the whole dim. */
static double pool_input_elems(const sb_model *m, const sb_op *op, const int *c)
{
    const sb_tensor *t = &m->tensors[op->in[0].tensor];
    double e = (double)t->dims[0].size / c[0] * ((double)t->dims[1].size / c[1]);
    for (int a = 0; a < 2; a++) {
        double full = (double)t->dims[2 + a].size;
        double rows = full;
        if (c[2 + a] > 1) {
            rows = ((double)op->dims[2 + a].size / c[2 + a] - 1.0) * op->stride[a] + op->kernel[a];
            if (rows > full)
                rows = full;
        }
        e *= rows;
    }
    return e;
}

static double per_dev(const sb_op *op, const int *c, int d)
{
    return (double)op->dims[d].size / c[d];
}

/* Elements per device of the op's own weights (sb_op.weights); explicit
 * weight operands are counted by the caller. */
static double implicit_weight_elems(const sb_op *op, const int *c)
{
    double total = 0.0;
    for (int w = 0; w < op->nweights; w++) {
        const sb_weight *wt = &op->weights[w];
        double e = 1.0;
        for (int j = 0; j < wt->ndims; j++)
            e *= wt->map[j] >= 0 ? per_dev(op, c, wt->map[j]) : (double)wt->size[j];
        total += e;
    }
    return total;
}

/* Rows of the op's output other than the last (normalised) axis. */
static double rows_but(const sb_op *op, const int *c, int axis)
{
    double r = 1.0;
    for (int i = 0; i < op->ndims; i++)
        if (i != axis)
            r *= per_dev(op, c, i);
    return r;
}

/* Saved state of an op beyond its inputs and outputs. */
static double saved_elems(const sb_op *op, const int *c)
{
    switch (op->kind) {
    case SB_OP_NORM:
        return op->batchnorm ? 2.0 * per_dev(op, c, 1) : 2.0 * rows_but(op, c, op->axis);
    case SB_OP_SOFTMAX_XENT: return 3.0 * rows_but(op, c, op->ndims - 1); /* labels, max, sum */
    case SB_OP_LSTM: {
        /* per layer held: its input (S,B,K), gates (S,B,4N), cell and h in
         * the N layout (S,B,N each), h in the K layout (S,B,K) */
        double sb = per_dev(op, c, 1) * per_dev(op, c, 2);
        return per_dev(op, c, 0) * sb * (2.0 * per_dev(op, c, 4) + 6.0 * per_dev(op, c, 3));
    }
    default: return 0.0;
    }
}

/* The CPU conv kernels' im2col workspace (runtime/k_conv.c): the columns of
 * a group of g images, g = ceil(1536 / (h_out w_out)) but at most 16 and at
 * most 8 Mi floats, each image (C' R' S' + N') h_out w_out floats. */
static double conv_workspace_elems(const sb_op *op, const int *c)
{
    double hw = per_dev(op, c, 2) * per_dev(op, c, 3);
    double crs = per_dev(op, c, 1) * per_dev(op, c, 4) * per_dev(op, c, 5);
    if (hw <= 0)
        return 0.0;
    double g = ceil(1536.0 / hw);
    if (g > 16)
        g = 16;
    while (g > 1 && g * crs * hw > 8388608.0)
        g--;
    return g * (crs + per_dev(op, c, 6)) * hw;
}

void sb_op_memory(const sb_model *m, const sb_op *op, const int *c, sb_optimizer opt, sb_mem *out)
{
    memset(out, 0, sizeof *out);
    double w = implicit_weight_elems(op, c), in = 0.0, outs = 0.0, wmax = 0.0;
    for (int k = 0; k < op->nin; k++) {
        const sb_tensor *t = &m->tensors[op->in[k].tensor];
        double e = (op->kind == SB_OP_POOL && k == 0) ? pool_input_elems(m, op, c)
                                                      : operand_elems(m, op, &op->in[k], c);
        if (t->kind == SB_TENSOR_WEIGHT) {
            w += e;
            if (e > wmax)
                wmax = e;
        } else {
            in += e;
            if (op->kind == SB_OP_EMBEDDING)
                in += e; /* the ids as int32 beside the float copy */
        }
    }
    if (op->kind != SB_OP_SOFTMAX_XENT) /* the loss keeps no output tensor */
        for (int k = 0; k < op->nout; k++)
            outs += operand_elems(m, op, &op->out[k], c);
    out->weights = w * FLOAT_BYTES;
    out->weight_grads = w * FLOAT_BYTES;
    out->optimizer = opt == SB_OPTIM_ADAM ? 2.0 * w * FLOAT_BYTES : 0.0;
    out->activations = (in + outs + saved_elems(op, c)) * FLOAT_BYTES;
    out->act_grads = (in + outs) * FLOAT_BYTES;
    /* transient: convolutions hold the im2col workspace; other GEMM-like
     * ops copy their operands into canonical order and build the product
     * before the all-reduce; every op sums each consumer's gradient through
     * one output-sized relayout buffer */
    double scratch = outs;
    if (op->kind == SB_OP_CONV)
        scratch = conv_workspace_elems(op, c) + outs;
    else if (op->kind == SB_OP_DENSE || op->kind == SB_OP_EINSUM || op->kind == SB_OP_EMBEDDING
             || op->kind == SB_OP_LSTM)
        scratch = in + (w > wmax ? w : wmax) + 2.0 * outs;
    out->scratch = scratch * FLOAT_BYTES;
}

double sb_strategy_memory(const sb_problem *pb, const int *choice, sb_optimizer opt, sb_mem *sum)
{
    sb_mem tot = {0};
    double resident = 0.0;
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        sb_mem x;
        sb_op_memory(pb->m, op, pb->cfg[i].c + (size_t)choice[i] * (size_t)op->ndims, opt, &x);
        tot.weights += x.weights;
        tot.weight_grads += x.weight_grads;
        tot.optimizer += x.optimizer;
        tot.activations += x.activations;
        tot.act_grads += x.act_grads;
        if (x.scratch > tot.scratch)
            tot.scratch = x.scratch;
        resident += sb_mem_resident(&x);
    }
    if (sum)
        *sum = tot;
    return resident + tot.scratch;
}
