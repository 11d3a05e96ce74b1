/* recompute.c: activation recomputation (sb_plan_strategy.recompute).
 *
 * Without it every buffer of a step stays until the step ends. An op
 * flagged for recomputation instead:
 *   - after its forward, hands back the buffers only its backward reads:
 *     its copies of its activation inputs (o->in, relayouted from the
 *     producers), its token ids and its saved statistics (o->save); its
 *     outputs stay, since the ops after it read them (and its own backward
 *     may);
 *   - just before its backward, runs its forward again: the inputs
 *     relayouted again from the producers' outputs (which every op keeps)
 *     or generated again (model inputs: the same counter-based values), the
 *     kind's forward with its collectives (the all-reduce of split
 *     reduction dims, the statistics of a split axis) again: the same
 *     numbers as the first time, so the backward sees what it would have;
 *     under ZeRO stage 3 the weight gathered for this forward is kept for
 *     the backward (one all-gather, as without recomputation);
 *   - after its backward, hands back its inputs, outputs, output gradients
 *     and statistics; its input gradients stay until the producers'
 *     backward reads them.
 * Communication repeated: the input relayouts (the copies were dropped)
 * and the op's own forward collectives; nothing else. The loss and the LSTM
 * are never recomputed (sb_op_recomputable). */
#include "recompute.h"

#include <stdlib.h>

#include "services.h"

int exec_recompute_setup(sb_executor *ex, const sb_plan_strategy *st, sb_error *err)
{
    const sb_model *m = st->m;
    ex->recompute = NULL;
    int any = 0;
    for (int i = 0; st->recompute && i < m->nops; i++)
        any |= st->recompute[i] && sb_op_recomputable(&m->ops[i]);
    if (!any)
        return 0;
    ex->recompute = calloc((size_t)m->nops, 1);
    if (!ex->recompute)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < m->nops; i++)
        ex->recompute[i] = st->recompute[i] && sb_op_recomputable(&m->ops[i]);
    return 0;
}

static int flagged(const sb_executor *ex, int i) { return ex->recompute && ex->recompute[i]; }

/* the buffers a recomputed op drops after its forward */
static void drop_saved(sb_executor *ex, opx *o)
{
    const sb_op *op = &ex->m->ops[o->idx];
    for (int k = 0; k < op->nin; k++)
        if (ex->m->tensors[op->in[k].tensor].kind != SB_TENSOR_WEIGHT)
            exec_tb_free(ex, &o->in[k]);
    for (int k = 0; k < 4; k++)
        exec_tb_free(ex, &o->save[k]);
    exec_tb_free(ex, &o->ids);
}

void exec_recompute_drop(sb_executor *ex, int i)
{
    if (flagged(ex, i))
        drop_saved(ex, &ex->ops[i]);
}

int exec_recompute_forward(sb_executor *ex, int i, exec_forward_fn fwd, sb_error *err)
{
    if (!flagged(ex, i))
        return 0;
    opx *o = &ex->ops[i];
    /* the forward allocates its outputs and statistics afresh: the kept
     * outputs go back to the pool first (their values come back equal) */
    drop_saved(ex, o);
    for (int k = 0; k < ex->m->ops[i].nout; k++)
        exec_tb_free(ex, &o->out[k]);
    ex->recomputing = 1;
    int rc = fwd(ex, i, err);
    ex->recomputing = 0;
    return rc;
}

void exec_recompute_release(sb_executor *ex, int i)
{
    if (!flagged(ex, i))
        return;
    opx *o = &ex->ops[i];
    drop_saved(ex, o);
    for (int k = 0; k < SB_MAX_IO; k++) {
        exec_tb_free(ex, &o->out[k]);
        exec_tb_free(ex, &o->dout[k]);
    }
}
