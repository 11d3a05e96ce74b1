/* memory.c: the memory model (include/shardbench/memory.h). Bytes per
 * device of an op under a config (weights, their gradients, optimizer state,
 * activations kept for backward, activation gradients, transient buffers)
 * and the peak of a strategy. It follows what the runtime allocates
 * (runtime/executor/executor.c: every activation and activation gradient of a step
 * stays allocated until the step ends). Not a measurement. */
#include "kinds.h"
#include "shardbench/precision.h"

#include <math.h>
#include <string.h>


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

/* Every category in bytes from the kind's element counts: activations are
 * what backward reads (inputs, outputs, saved state), activation gradients
 * one per input and output, weight gradients as weights, Adam two moments. */
void sb_op_memory(const sb_model *m, const sb_op *op, const int *c, sb_optimizer opt, sb_mem *out)
{
    sb_op_memory_zero(m, op, c, opt, 0, out);
}

/* ZeRO (as the runtime slices): of the W weight elements, each weight's
 * shard (e elements, q replicas) keeps e / q where its stage slices it:
 * the optimizer state from stage 1, the gradient from 2 (its whole buffer
 * lives during the op's backward: scratch), the weight at 3 (gathered
 * whole for the op's forward and backward: scratch). */
void sb_op_memory_zero(const sb_model *m, const sb_op *op, const int *c, sb_optimizer opt,
                       int zero, sb_mem *out)
{
    sb_op_memory_rc(m, op, c, opt, zero, 0, out);
}

/* Recomputed (runtime/executor/recompute.c): the outputs stay from the
 * forward to the op's backward, the input gradients until the producers'
 * backward; the input copies, saved state and output gradients are
 * allocated again by the recomputed forward and the backward, and freed
 * after it. In a pipeline stage (sub-models of search/pipeline.c) the
 * inputs received from an earlier stage (sb_tensor.stage_input) stay too:
 * activations, counted once per micro-batch in flight. */
void sb_op_memory_rc(const sb_model *m, const sb_op *op, const int *c, sb_optimizer opt,
                     int zero, int recompute, sb_mem *out)
{
    sb_op_memory_prec(m, op, c, opt, zero, recompute, SB_PREC_FP32, out);
}

/* The same in the bytes of precision recipe `prec` (docs/cost-model.md,
 * "Precision"): fp32 is 4 bytes everywhere and Adam's two moments. */
void sb_op_memory_prec(const sb_model *m, const sb_op *op, const int *c, sb_optimizer opt,
                       int zero, int recompute, int prec, sb_mem *out)
{
    sb_prec_bytes b = sb_precision_bytes(prec);
    const double WB = b.weight, GB = b.grad, OB = opt == SB_OPTIM_ADAM ? b.adam : b.sgd;
    const double AB = b.act; /* activations, their gradients, buffers */
    /* under fp8 a norm fused into its linears (fp8_out) keeps its output as
     * the one fp8 copy it writes, 1 byte an element */
    const double OUTB = prec == SB_PREC_FP8 && op->fp8_out ? 1.0 : AB;
    sb_mem_elems e = {0};
    sb_kind_search_table[op->kind]->memory(m, op, c, &e);
    memset(out, 0, sizeof *out);
    /* sliced: the weights with ZeRO's cut; gsliced: their gradients, a
     * tied copy's too (its weight stays whole, pulled each step; its
     * gradient is reduce-scattered in rows, runtime/executor/tied.c) */
    double whole = e.weights, sliced = e.weights, gsliced = e.weights;
    if (zero > 0) {
        double el[SB_MAX_OP_WEIGHTS + SB_MAX_IO], q[SB_MAX_OP_WEIGHTS + SB_MAX_IO];
        int n = sb_weight_replicas(m, op, c, el, q, SB_MAX_OP_WEIGHTS + SB_MAX_IO);
        for (int w = 0; w < n; w++) {
            gsliced -= el[w] - el[w] / q[w];
            if (!sb_weight_replica_tied(m, op, w))
                sliced -= el[w] - el[w] / q[w];
        }
    }
    out->weights = (zero >= 3 ? sliced : whole) * WB;
    out->weight_grads = (zero >= 2 ? gsliced : whole) * GB;
    /* a tied copy has no optimizer state: its table's is the embedding's */
    out->optimizer = OB > 0 ? ((zero >= 1 ? sliced : whole) - e.tied) * OB : 0.0;
    out->activations = (e.in + e.outs + e.saved) * AB;
    out->act_grads = (e.in + e.outs) * AB;
    out->scratch = e.scratch * AB;
    if (zero >= 3 && sliced < whole) /* the whole weight, gathered for the op */
        out->scratch += whole * WB;
    if (recompute && sb_op_recomputable(op)) {
        /* a pipeline stage's received inputs stay per micro-batch in flight
         * (the recomputed forward reads them, nobody sends them again) */
        double kept = 0.0;
        for (int k = 0; k < op->nin; k++) {
            const sb_tensor *t = &m->tensors[op->in[k].tensor];
            if (t->stage_input && t->kind != SB_TENSOR_WEIGHT)
                kept += sb_operand_elems(m, op, &op->in[k], c);
        }
        out->activations = e.outs * OUTB + kept * AB;
        out->act_grads = e.in * AB;
        out->scratch += (e.in - kept + e.saved + e.outs) * AB;
    }
    if (op->gpu_run) { /* autograd: a tensor once, at its producer (a model or stage input at
                          its readers); a gradient lives from its consumer's backward to its
                          producer's: transient */
        int rc = recompute && sb_op_recomputable(op);
        if (!rc) {
            double ext = 0.0;
            for (int k = 0; k < op->nin; k++) {
                const sb_tensor *t = &m->tensors[op->in[k].tensor];
                if (t->producer < 0 && t->kind != SB_TENSOR_WEIGHT)
                    ext += sb_operand_elems(m, op, &op->in[k], c);
            }
            out->activations = e.outs * OUTB + (e.saved + ext) * AB;
        }
        out->scratch += rc ? out->act_grads : (e.in + e.outs) * AB;
        out->act_grads = 0.0;
    }
}

void sb_problem_op_memory_rc(const sb_problem *pb, int v, int k, sb_optimizer opt, int rc,
                             sb_mem *out)
{
    const sb_op *op = &pb->m->ops[v];
    sb_op_memory_prec(pb->m, op, pb->cfg[v].c + (size_t)k * (size_t)op->ndims, opt, pb->cp.zero,
                      rc, pb->cp.precision, out);
    if (pb->cp.act_copies > 1) /* a pipeline stage: activations of that many micro-batches */
        out->activations *= pb->cp.act_copies;
}

void sb_problem_op_memory(const sb_problem *pb, int v, int k, sb_optimizer opt, sb_mem *out)
{
    sb_problem_op_memory_rc(pb, v, k, opt, pb->cp.recompute == SB_RECOMPUTE_ALL, out);
}

double sb_strategy_memory(const sb_problem *pb, const int *choice, sb_optimizer opt, sb_mem *sum)
{
    return sb_strategy_memory_rc(pb, choice, NULL, opt, sum);
}

double sb_strategy_memory_rc(const sb_problem *pb, const int *choice,
                             const unsigned char *recompute, sb_optimizer opt, sb_mem *sum)
{
    sb_mem tot = {0};
    double resident = 0.0;
    for (int i = 0; i < pb->m->nops; i++) {
        sb_mem x;
        int rc = recompute ? recompute[i] != 0 : pb->cp.recompute == SB_RECOMPUTE_ALL;
        sb_problem_op_memory_rc(pb, i, choice[i], opt, rc, &x);
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
