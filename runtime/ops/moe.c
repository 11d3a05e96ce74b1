/* moe.c: the runtime of moe_gate, the router of a mixture of experts. Its
 * box holds whole groups (only the group dim is split), so each rank routes
 * its groups alone: no communication, no groups. The backward redoes the
 * routing from the logits (kept as the op's input) rather than keeping it.
 * With a load-balancing loss (sb_op.moe_aux > 0) each rank adds its groups'
 * share, moe_aux times the mean over all groups, to the step's loss. */
#include <stdlib.h>

#include "common.h"

/* this rank's box: G groups of S tokens over E experts, C slots each */
static void moe_box(const opx *o, int *G, int *S, int *E, int *C)
{
    *G = (int)ops_ext(o, 0);
    *S = (int)ops_ext(o, 1);
    *E = (int)ops_ext(o, 2);
    *C = (int)ops_ext(o, 3);
}

static int moe_gate_forward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int G, S, E, C;
    moe_box(o, &G, &S, &E, &C);
    tbuf work = {0}, aux = {0};
    if (exec_tb_alloc_n(ex, &work, (int64_t)ex->be->moe->moe_gate_work_floats(G, S, E, op->topk),
                        err)
        || exec_tb_alloc_n(ex, &aux, G, err))
        return -1;
    ex->be->moe->moe_gate_forward(o->out[0].p, o->out[1].p, aux.p, work.p, o->in[0].p, G, S, E, C,
                                  op->topk);
    exec_tb_free(ex, &work);
    if (op->moe_aux > 0) {
        float *h = malloc((size_t)G * sizeof *h);
        if (!h)
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        ex->be->to_host(h, aux.p, (size_t)G);
        double sum = 0;
        for (int g = 0; g < G; g++)
            sum += h[g];
        ex->loss_sum += op->moe_aux * sum / (double)op->dims[0].size;
        free(h);
    }
    exec_tb_free(ex, &aux);
    return 0;
}

/* The combine gradient into the logits, and the load-balancing loss's;
 * dispatch (output 1) is a constant mask: its gradient is dropped. */
static int moe_gate_backward(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int G, S, E, C;
    moe_box(o, &G, &S, &E, &C);
    tbuf work = {0};
    if (exec_tb_alloc_n(ex, &work, (int64_t)ex->be->moe->moe_gate_work_floats(G, S, E, op->topk),
                        err))
        return -1;
    float aux_weight = (float)(op->moe_aux / (double)op->dims[0].size);
    ex->be->moe->moe_gate_backward(o->din[0].p, work.p, o->dout[0].p, o->in[0].p, aux_weight, G, S,
                                   E, C, op->topk);
    exec_tb_free(ex, &work);
    return 0;
}

const sb_op_runtime sb_op_runtime_moe_gate = {
    .forward = moe_gate_forward, .backward = moe_gate_backward, .families = SB_FAM(MOE)};
