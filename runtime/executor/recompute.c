/* recompute.c: activation recomputation (sb_strategy.recompute).
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
 * are never recomputed (sb_op_recomputable).
 *
 * Pipeline (stages, micro-batches): all of the above per micro-batch (the
 * op's buffers of micro-batch j are o->mb[j]). An input received from an
 * earlier stage (exec_recompute_kept_input) is not dropped: its producer's
 * outputs live on other ranks, which sent them once, after the producer's
 * forward of that micro-batch, and send nothing again. So the stage keeps
 * the received box of every micro-batch in flight, and the recomputed
 * forward reads it where it is (forward_op skips that input); inputs from
 * the op's own stage are relayouted again, by the stage's ranks, which all
 * recompute the op at the same point of their (equal) schedules. */
#include "recompute.h"

#include <stdlib.h>

#include "services.h"

int exec_recompute_setup(sb_executor *ex, const sb_model *m, const sb_strategy *st,
                         sb_error *err)
{
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

int exec_recompute_kept_input(const sb_executor *ex, int i, int k)
{
    const sb_tensor *t = &ex->m->tensors[ex->m->ops[i].in[k].tensor];
    return flagged(ex, i) && t->producer >= 0
           && sb_pipeline_stage_of(&ex->pipe, t->producer) != sb_pipeline_stage_of(&ex->pipe, i);
}

/* the buffers a recomputed op drops after its forward; keep_received: not
 * the inputs received from an earlier stage (its recomputed forward reads
 * them again) */
static void drop_saved(sb_executor *ex, opx *o, int keep_received)
{
    const sb_op *op = &ex->m->ops[o->idx];
    for (int k = 0; k < op->nin; k++)
        if (ex->m->tensors[op->in[k].tensor].kind != SB_TENSOR_WEIGHT
            && !(keep_received && exec_recompute_kept_input(ex, o->idx, k)))
            exec_tb_free(ex, &o->in[k]);
    for (int k = 0; k < 4; k++)
        exec_tb_free(ex, &o->save[k]);
    exec_tb_free(ex, &o->ids);
}

void exec_recompute_drop(sb_executor *ex, int i)
{
    if (flagged(ex, i))
        drop_saved(ex, &ex->ops[i], 1);
}

int exec_recompute_forward(sb_executor *ex, int i, exec_forward_fn fwd, sb_error *err)
{
    if (!flagged(ex, i))
        return 0;
    opx *o = &ex->ops[i];
    /* the forward allocates its outputs and statistics afresh: the kept
     * outputs go back to the pool first (their values come back equal);
     * inputs received from an earlier stage stay, the forward reads them */
    drop_saved(ex, o, 1);
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
    drop_saved(ex, o, 0);
    for (int k = 0; k < SB_MAX_IO; k++) {
        exec_tb_free(ex, &o->out[k]);
        exec_tb_free(ex, &o->dout[k]);
    }
}
