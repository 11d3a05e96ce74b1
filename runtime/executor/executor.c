/* executor.c: the SPMD executor. Every rank builds the same plan from the
 * model and the strategy (plan.c), holds only its boxes, and runs real
 * training steps: forward through every op (relayout of each input from its
 * producer, local kernels, all-reduce of partial sums), softmax cross-entropy
 * loss, backward in reverse (gradients flow back to producers by an
 * accumulating relayout, so halos, replicas and fan-out all sum), all-reduce
 * of weight gradients over data-parallel replicas, SGD or Adam (with ZeRO:
 * sliced over those replicas, params.c).
 *
 * Pipeline (sb_strategy.pipe): ops run on their stage's ranks, each
 * rank runs its stage's events of the step (GPipe or 1F1B over the
 * micro-batches, run_schedule), relayouts across stages go point to point,
 * and weight gradients are summed over the micro-batches before their
 * all-reduce and the update.
 *
 * Backward note: the cost model all-reduces input gradients over the ranks
 * that differ only in dims absent from the input; here those partial sums
 * are summed by the accumulating relayout that returns them to the producer
 * (a reduce instead of an all-reduce: the same numbers, fewer bytes). */
#define _GNU_SOURCE
#include "shardbench/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/kinds.h"
#include "shardbench/dtensor.h"
#include "params.h"
#include "plan.h"
#include "recompute.h"
#include "services.h"

/* ---- plan --------------------------------------------------------------------- */

static int operand_box_of_rank(const sb_executor *ex, int opi, int r, int is_input, int slot,
                               sb_box *b)
{
    const opx *o = &ex->ops[opi];
    const sb_op *op = &ex->m->ops[opi];
    int g[SB_MAX_DIMS];
    if (!exec_coords(ex, o, r, g)) {
        b->nd = 0;
        return 0;
    }
    plan_operand_box(ex->m, op, is_input ? &op->in[slot] : &op->out[slot], o->c, g, is_input, b);
    return 0;
}

/* Point-to-point tags of the relayouts into op i's input slot k (forward)
 * and back (backward): runs of different edges between two ranks may come
 * in different orders on the two sides (a pipeline's schedule). */
static int tag_of(int i, int k, int backward)
{
    return (int)(((long long)i * SB_MAX_IO + k) * 2 + backward) % 32768;
}

static int build_relayouts(sb_executor *ex, sb_error *err)
{
    int n = ex->size;
    sb_box *src = calloc((size_t)n, sizeof *src), *dst = calloc((size_t)n, sizeof *dst);
    if (!src || !dst) {
        free(src);
        free(dst);
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    }
    int rc = 0;
    for (int i = 0; i < ex->m->nops && !rc; i++) {
        const sb_op *op = &ex->m->ops[i];
        for (int k = 0; k < op->nin && !rc; k++) {
            const sb_tensor *t = &ex->m->tensors[op->in[k].tensor];
            if (t->producer < 0)
                continue;
            int64_t shape[SB_MAX_DIMS];
            for (int d = 0; d < t->ndims; d++)
                shape[d] = t->dims[d].size;
            for (int r = 0; r < n; r++) {
                operand_box_of_rank(ex, t->producer, r, 0, t->producer_slot, &src[r]);
                operand_box_of_rank(ex, i, r, 1, k, &dst[r]);
            }
            rc = sb_relayout_plan(ex->comm, t->ndims, shape, src, dst, SB_RELAYOUT_COPY,
                                  &ex->ops[i].fwd[k], err);
            if (!rc)
                rc = sb_relayout_plan(ex->comm, t->ndims, shape, dst, src, SB_RELAYOUT_ACCUM,
                                      &ex->ops[i].bwd[k], err);
        }
    }
    free(src);
    free(dst);
    return rc;
}

/* Checks what the runtime can run, identically on every rank. */
static int check_model(const sb_model *m, sb_error *err)
{
    int nloss = 0;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        if (op->kind == SB_OP_SOFTMAX_XENT)
            nloss++;
        if (op->kind == SB_OP_NORM && op->batchnorm && op->ndims != 2 && op->ndims != 4)
            return sb_fail(err, SB_EXIT_INPUT, "op '%s': batchnorm needs a rank-2 or rank-4 input",
                           op->name);
        for (int k = 0; k < op->nin; k++) {
            const sb_tensor *t = &m->tensors[op->in[k].tensor];
            if (t->producer >= 0 && m->ops[t->producer].kind == SB_OP_SOFTMAX_XENT)
                return sb_fail(err, SB_EXIT_INPUT,
                               "op '%s' consumes the loss '%s' (softmax_xent ends the graph)",
                               op->name, t->name);
        }
    }
    if (nloss == 0)
        return sb_fail(err, SB_EXIT_INPUT, "model '%s' has no softmax_xent loss to train", m->name);
    return 0;
}

/* Checks that a dataset fits the model (identically on every rank). */
/* ---- ops, through their kind's entry (ops/kinds.h) ------------------------------ */

static const sb_op_runtime *kind_of(const sb_executor *ex, int i)
{
    return sb_op_runtime_table[ex->m->ops[i].kind];
}

/* Every op's groups and state, in op order on every rank. Collective. */
static int setup_groups(sb_executor *ex, sb_error *err)
{
    for (int i = 0; i < ex->m->nops; i++) {
        const sb_op_runtime *k = kind_of(ex, i);
        if (k->setup_groups && k->setup_groups(ex, &ex->ops[i], err))
            return -1;
    }
    return 0;
}

#ifdef SB_TEST_SLOWDOWN
/* Only in a build configured with SHARDBENCH_TEST_SLOWDOWN=KIND:FACTOR (for
 * perf/regress): spins FACTOR times the op's own compute time (its
 * communication left out) after each forward and backward of ops of KIND
 * ("all": every op). $SHARDBENCH_TEST_SLOWDOWN (same form) overrides the
 * configured one at run time. */
static void sb_test_slowdown(const char *kind, double took)
{
    static char want[64];
    static double factor = -1;
    if (factor < 0) {
        const char *spec = getenv("SHARDBENCH_TEST_SLOWDOWN");
        if (!spec || !strchr(spec, ':'))
            spec = SB_TEST_SLOWDOWN;
        const char *colon = strchr(spec, ':');
        snprintf(want, sizeof want, "%.*s", colon ? (int)(colon - spec) : 0, spec);
        factor = colon ? atof(colon + 1) : 0;
        if (!(factor > 0))
            factor = 0;
    }
    if (factor > 0 && took > 0 && (!strcmp(want, "all") || !strcmp(want, kind))) {
        double end = sb_now() + factor * took;
        while (sb_now() < end)
            ;
    }
}
#endif

/* Runs one direction of an op on this rank's box and books its time: ops
 * that do not time their kernels themselves count all non-comm time as
 * compute. Kinds that run on every rank time themselves. */
static int run_op(sb_executor *ex, opx *o, int backward, sb_error *err)
{
    const sb_op_runtime *k = kind_of(ex, o->idx);
    int (*fn)(sb_executor *, opx *, sb_error *) = backward ? k->backward : k->forward;
    if (k->every_rank)
        return fn(ex, o, err);
    if (!o->in_grid)
        return 0;
    int t0 = exec_mark(ex), n0 = exec_nbooked(ex);
    int rc = fn(ex, o, err);
#ifdef SB_TEST_SLOWDOWN
    sb_test_slowdown(sb_op_kind_name(ex->m->ops[o->idx].kind),
                     exec_rest_now(ex, o->idx, t0, n0, EXEC_T_COMM)); /* its compute only */
#endif
    if (!exec_booked_since(ex, n0, o->idx, EXEC_T_COMPUTE)) /* the span less its communication */
        exec_book_rest(ex, o->idx, EXEC_T_COMPUTE, t0, n0, EXEC_T_COMM, 0);
    return rc;
}
/* ---- the step ------------------------------------------------------------------ */

/* Test hook: SHARDBENCH_TEST_CREATE_FAIL=R makes rank R fail (out of
 * memory) in the local part of sb_executor_create, before any collective. */
static int test_hook_create_fail(int rank, sb_error *err)
{
    const char *v = getenv("SHARDBENCH_TEST_CREATE_FAIL");
    if (v && *v && atoi(v) == rank)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory (SHARDBENCH_TEST_CREATE_FAIL on "
                       "rank %d)", rank);
    return 0;
}

/* The pipeline (stages, micro-batches) and the model a micro-batch sees.
 * Local; the same verdict on every rank. */
static int setup_pipeline(sb_executor *ex, const sb_model *m, const sb_strategy *st,
                          const sb_exec_opts *opts, sb_error *err)
{
    ex->pipe = st->pipe;
    if (sb_pipeline_check(&ex->pipe, m, ex->size, err))
        return -1;
    ex->full = ex->m = m;
    ex->nmb = ex->pipe.microbatches;
    int S = ex->pipe.nstages;
    for (int s = 0; s < S; s++) {
        int r0 = sb_pipeline_first_rank(&ex->pipe, s);
        if (ex->rank >= r0 && ex->rank < r0 + ex->pipe.devices[s])
            ex->stage = s;
    }
    if (sb_pipeline_is_none(&ex->pipe))
        return 0;
    if (opts && opts->data)
        return sb_fail(err, SB_EXIT_INPUT, "--data: not with a pipeline (%d stages, %d "
                       "micro-batches) yet; train on real data without one", S, ex->nmb);
    for (int i = 0; i < m->nops; i++)
        if (S > 1 && sb_op_runtime_table[m->ops[i].kind]->every_rank)
            return sb_fail(err, SB_EXIT_INPUT, "pipeline stages: op '%s' (%s) runs on every rank "
                           "and cannot be one stage's", m->ops[i].name,
                           sb_op_kind_name(m->ops[i].kind));
    if (ex->nmb > 1) {
        if (exec_micro_model(ex, m, ex->nmb, err))
            return -1;
        ex->m = &ex->micro;
    }
    /* stages move on their own: relayouts point to point */
    ex->p2p = S > 1;
    return ex->p2p ? sb_relayout_pending_new(&ex->pending, err) : 0;
}

/* What sb_executor_create does on this rank alone: the op grids and boxes,
 * the weights' declarations, the dataset, the relayout plans. */
static int create_local(sb_executor *ex, const sb_model *m, const sb_strategy *st,
                        const sb_exec_opts *opts, sb_error *err)
{
    if (check_model(m, err))
        return -1;
    if (setup_pipeline(ex, m, st, opts, err))
        return -1;
    m = ex->m;
    ex->ops = calloc((size_t)m->nops, sizeof *ex->ops);
    ex->times = calloc((size_t)m->nops, sizeof *ex->times);
    ex->phase_marks = malloc((size_t)m->nops * 4 * sizeof *ex->phase_marks);
    ex->phase_t = malloc((size_t)m->nops * 4 * sizeof *ex->phase_t);
    ex->params = calloc(SB_EXEC_MAX_PARAMS_TOTAL, sizeof *ex->params);
    if (!ex->ops || !ex->times || !ex->phase_marks || !ex->phase_t || !ex->params)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int k = 0; k < 4 * m->nops; k++) {
        ex->phase_marks[k] = -1;
        ex->phase_t[k] = NAN;
    }
    ex->step_mark = -1;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        opx *o = &ex->ops[i];
        o->idx = i;
        memcpy(o->c, sb_strategy_config(st, i), (size_t)op->ndims * sizeof(int));
        o->kcomm = o->acomm = MPI_COMM_NULL;
        o->q = plan_grid_size(o->c, op->ndims);
        int s = sb_pipeline_stage_of(&ex->pipe, i);
        o->r0 = sb_pipeline_first_rank(&ex->pipe, s);
        o->nr = ex->pipe.devices[s];
        if (!(o->mb = calloc((size_t)ex->nmb, sizeof *o->mb)))
            return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
        if (o->q > o->nr)
            return sb_fail(err, SB_EXIT_INPUT,
                           "op '%s' needs %d ranks under its config but only %d are running%s",
                           op->name, o->q, o->nr, ex->pipe.nstages > 1 ? " its stage" : "");
        for (int d = 0; d < op->ndims && ex->nmb > 1; d++)
            if (op->dims[d].size % o->c[d])
                return sb_fail(err, SB_EXIT_INPUT,
                               "op '%s' splits %s %d ways, but each of the %d micro-batches has %lld",
                               op->name, op->dims[d].name, o->c[d], ex->nmb,
                               (long long)op->dims[d].size);
        o->in_grid = exec_coords(ex, o, ex->rank, o->g);
        if (o->in_grid)
            plan_iter_box(op, o->c, o->g, o->lo, o->hi);
        if (exec_declare_params(ex, o, err))
            return -1;
    }
    if (exec_tied_declare(ex, err))
        return -1;
    if (exec_recompute_setup(ex, ex->full, st, err))
        return -1;
    if (opts && opts->data && exec_setup_data(ex, opts, err))
        return -1;
    if (sb_group_cache_new(ex->comm, &ex->groups, err))
        return -1;
    if (ex->be->comm_split) /* NCCL communicators split alongside the groups' */
        sb_group_cache_set_split_hook(ex->groups, ex->be->comm_split);
    if (build_relayouts(ex, err))
        return -1;
    return test_hook_create_fail(ex->rank, err);
}

int sb_executor_create(MPI_Comm comm, const sb_model *m, const sb_strategy *st,
                       const sb_backend *be, const sb_exec_opts *opts, sb_executor **out,
                       sb_error *err)
{
    *out = NULL;
    /* before anything that depends on them: every rank must run the same
     * plan, or collectives mismatch (a hang) and configs differ */
    if (sb_agree_plan(comm, m, st, be, opts, err))
        return -1;
    if (st->zero < 0 || st->zero > 3) /* the same on every rank (agreed) */
        return sb_fail(err, SB_EXIT_INPUT, "ZeRO stage %d: not 0, 1, 2 or 3", st->zero);
    if (sb_ops_check_backend(be, m, err)) /* the same backend on every rank (agreed) */
        return -1;
    sb_executor *ex = calloc(1, sizeof *ex);
    int rc = ex ? 0 : sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    if (ex) {
        ex->comm = comm;
        ex->m = m;
        ex->be = be;
        ex->lr = opts && opts->lr > 0 ? opts->lr : 0.01f;
        ex->update = opts ? opts->update : SB_UPDATE_SGD;
        ex->beta1 = opts && opts->beta1 > 0 ? opts->beta1 : 0.9f;
        ex->beta2 = opts && opts->beta2 > 0 ? opts->beta2 : 0.999f;
        ex->eps = opts && opts->eps > 0 ? opts->eps : 1e-8f;
        ex->seed = opts && opts->seed ? opts->seed : 1;
        ex->zero = st->zero;
        ex->ledger.cpu = opts && opts->cpu_times && !be->mark; /* host marks only */
        MPI_Comm_rank(comm, &ex->rank);
        MPI_Comm_size(comm, &ex->size);
        if (be == &sb_backend_cpu || be == sb_backend_cpu_devmem())
            sb_cpu_threads_sync(); /* the kernels' OpenMP loops use OpenBLAS's thread count */
        rc = create_local(ex, m, st, opts, err);
    }
    /* a failure of one rank (memory) must not leave the others in the
     * group set-up's collectives */
    if (sb_agree(comm, rc, err, NULL) || setup_groups(ex, err)
        || sb_agree(comm, exec_init_params(ex, err) ? -1 : exec_tied_plans(ex, err), err, NULL)) {
        sb_executor_free(ex);
        return -1;
    }
    *out = ex;
    return 0;
}

/* Micro-batches: op o's buffers of the running micro-batch are in o's
 * fields (what the op kinds see) while it runs, in o->mb[] otherwise. */
static void mb_enter(sb_executor *ex, opx *o)
{
    o->bufs = o->mb[ex->cur_mb];
}

static void mb_leave(sb_executor *ex, opx *o)
{
    o->mb[ex->cur_mb] = o->bufs;
    memset(&o->bufs, 0, sizeof o->bufs);
}

static int stage_of(const sb_executor *ex, int i) { return sb_pipeline_stage_of(&ex->pipe, i); }

/* Op i's inputs (generated, or relayouted from their producers' outputs)
 * and output buffers, then its forward. A recomputed forward (recompute.c)
 * reads an input received from an earlier stage where it was kept: that
 * stage sent it once and sends nothing again. */
static int forward_op_body(sb_executor *ex, int i, sb_error *err)
{
    const sb_model *m = ex->m;
    opx *o = &ex->ops[i];
    const sb_op *op = &m->ops[i];
    for (int k = 0; k < op->nin; k++) {
        const sb_tensor *t = &m->tensors[op->in[k].tensor];
        if (t->kind == SB_TENSOR_WEIGHT)
            continue;
        if (ex->recomputing && exec_recompute_kept_input(ex, i, k))
            continue;
        sb_box box = {0};
        if (o->in_grid)
            plan_operand_box(m, op, &op->in[k], o->c, o->g, 1, &box);
        if (exec_tb_alloc(ex, &o->in[k], &box, err))
            return -1;
        if (t->producer < 0) {
            if (exec_gen_input(ex, o, k, err))
                return -1;
        } else {
            opx *pr = &ex->ops[t->producer];
            if (exec_move(ex, o, o->fwd[k], tag_of(i, k, 0),
                          &pr->mb[ex->cur_mb].out[t->producer_slot], &o->in[k], err))
                return -1;
        }
    }
    for (int k = 0; k < op->nout; k++) {
        sb_box box = {0};
        if (o->in_grid && op->kind != SB_OP_SOFTMAX_XENT)
            plan_operand_box(m, op, &op->out[k], o->c, o->g, 0, &box);
        if (exec_tb_alloc(ex, &o->out[k], &box, err))
            return -1;
    }
    if (exec_zero_gather(ex, o, err))
        return -1;
    int rc = run_op(ex, o, 0, err);
    exec_zero_drop(ex, o);
    return rc;
}

/* Pipeline: op i's outputs (this micro-batch's), sent to their consumers
 * on later stages (the sending half of their input relayouts). */
static int send_outputs(sb_executor *ex, int i, sb_error *err)
{
    const sb_model *m = ex->m;
    const sb_op *op = &m->ops[i];
    tbuf none = {0};
    for (int j = i + 1; j < m->nops; j++) {
        if (stage_of(ex, j) == stage_of(ex, i))
            continue;
        const sb_op *cop = &m->ops[j];
        for (int s = 0; s < cop->nin; s++)
            for (int k = 0; k < op->nout; k++)
                if (cop->in[s].tensor == op->out[k].tensor
                    && exec_move(ex, &ex->ops[i], ex->ops[j].fwd[s], tag_of(j, s, 0),
                                 &ex->ops[i].mb[ex->cur_mb].out[k], &none, err))
                    return -1;
    }
    return 0;
}

/* Every consumer's input gradient of op i's output k, summed into that
 * output's box: the first one straight into it (an accumulating relayout
 * overwrites its destination), the others through a buffer; zeros when
 * nobody consumes the output. */
static int gather_output_grad(sb_executor *ex, int i, int k, sb_error *err)
{
    const sb_model *m = ex->m;
    opx *o = &ex->ops[i];
    const sb_op *op = &m->ops[i];
    int first = 1;
    for (int j = i + 1; j < m->nops; j++) {
        opx *cx = &ex->ops[j];
        const sb_op *cop = &m->ops[j];
        for (int s = 0; s < cop->nin; s++) {
            if (cop->in[s].tensor != op->out[k].tensor)
                continue;
            const tbuf *src = &cx->mb[ex->cur_mb].din[s];
            if (first) {
                first = 0;
                if (exec_tb_alloc(ex, &o->dout[k], &o->out[k].box, err)
                    || exec_move(ex, o, cx->bwd[s], tag_of(j, s, 1), src, &o->dout[k], err))
                    return -1;
                continue;
            }
            tbuf tmp = {0};
            if (exec_tb_alloc(ex, &tmp, &o->out[k].box, err))
                return -1;
            if (exec_move(ex, o, cx->bwd[s], tag_of(j, s, 1), src, &tmp, err)) {
                exec_tb_free(ex, &tmp);
                return -1;
            }
            if (tmp.n) {
                const float *ins[2] = {o->dout[k].p, tmp.p};
                ex->be->sum->add_forward(o->dout[k].p, ins, 2, (size_t)tmp.n, 0);
            }
            exec_tb_free(ex, &tmp);
        }
    }
    if (first && exec_tb_zeros(ex, &o->dout[k], &o->out[k].box, err))
        return -1;
    return 0;
}

/* Op i's output gradients, its backward, then (after the last
 * micro-batch) the all-reduce of its weight gradients over their
 * data-parallel replicas: the micro-batches' gradients add up in between. */
static int backward_op_body(sb_executor *ex, int i, sb_error *err)
{
    opx *o = &ex->ops[i];
    const sb_op *op = &ex->m->ops[i];
    for (int k = 0; k < op->nout; k++)
        if (gather_output_grad(ex, i, k, err))
            return -1;
    for (int k = 0; k < op->nin; k++)
        if (exec_tb_zeros(ex, &o->din[k], &o->in[k].box, err))
            return -1;
    if (exec_zero_gather(ex, o, err) || (ex->cur_mb == 0 && exec_zero_grad_begin(ex, o, err)))
        return -1;
    int rc = run_op(ex, o, 1, err);
    exec_zero_drop(ex, o);
    if (rc || ex->cur_mb < ex->nmb - 1)
        return rc;
    return exec_zero_grad_end(ex, o, err);
}

/* An op's forward or backward with the executor's own work around its
 * kernels and communication booked to it as other_s: its buffers taken
 * and zeroed, inputs generated, consumers' gradients summed. That work
 * follows the op's local shapes, so the predictive model prices it per op
 * config (measure/profile_run.c) instead of leaving it to the step's fixed part. */
static int timed_op(sb_executor *ex, int i, int backward, sb_error *err)
{
    int t0 = exec_mark(ex), n0 = exec_nbooked(ex);
    int rc = backward ? backward_op_body(ex, i, err) : forward_op_body(ex, i, err);
    /* the span less the op's compute and communication, when positive */
    int t1 = exec_book_rest(ex, i, EXEC_T_OTHER, t0, n0, EXEC_T_COMPUTE | EXEC_T_COMM, 1);
    int *pm = ex->phase_marks + 4 * i + 2 * backward; /* first entry, last exit */
    if (pm[0] < 0)
        pm[0] = t0;
    pm[1] = t1;
    return rc;
}

static int forward_op(sb_executor *ex, int i, sb_error *err) { return timed_op(ex, i, 0, err); }
static int backward_op(sb_executor *ex, int i, sb_error *err) { return timed_op(ex, i, 1, err); }

/* Pipeline: op i's input gradients (this micro-batch's), sent back to
 * their producers on earlier stages. */
static int send_input_grads(sb_executor *ex, int i, sb_error *err)
{
    const sb_model *m = ex->m;
    const sb_op *op = &m->ops[i];
    tbuf none = {0};
    for (int k = 0; k < op->nin; k++) {
        const sb_tensor *t = &m->tensors[op->in[k].tensor];
        if (t->producer < 0 || stage_of(ex, t->producer) == stage_of(ex, i))
            continue;
        if (exec_move(ex, &ex->ops[i], ex->ops[i].bwd[k], tag_of(i, k, 1),
                      &ex->ops[i].mb[ex->cur_mb].din[k], &none, err))
            return -1;
    }
    return 0;
}

/* Every buffer that lives for one micro-batch, back to the pool. */
static void release_buffers(sb_executor *ex, opx_bufs *b)
{
    for (int k = 0; k < SB_MAX_IO; k++) {
        exec_tb_free(ex, &b->in[k]);
        exec_tb_free(ex, &b->din[k]);
        exec_tb_free(ex, &b->out[k]);
        exec_tb_free(ex, &b->dout[k]);
    }
    for (int k = 0; k < 4; k++)
        exec_tb_free(ex, &b->save[k]);
    exec_tb_free(ex, &b->ids);
}

static void release_step_buffers(sb_executor *ex, opx *o)
{
    release_buffers(ex, &o->bufs);
    for (int j = 0; o->mb && j < ex->nmb; j++)
        release_buffers(ex, &o->mb[j]);
}

/* One event of this rank's schedule: the forward or the backward of
 * micro-batch mb through the ops of its stage (every op without a
 * pipeline). After a backward the micro-batch's buffers go back to the
 * pool. */
static int run_event(sb_executor *ex, int backward, int mb, sb_error *err)
{
    const sb_pipeline *pl = &ex->pipe;
    int a = pl->first_op[ex->stage], b = pl->first_op[ex->stage + 1];
    ex->cur_mb = mb;
    for (int n = 0; n < b - a; n++) {
        int i = backward ? b - 1 - n : a + n;
        opx *o = &ex->ops[i];
        mb_enter(ex, o);
        int rc = backward ? exec_recompute_forward(ex, i, forward_op, err) || backward_op(ex, i, err)
                          : forward_op(ex, i, err);
        if (!rc) { /* recomputation (recompute.c): no-ops for an op not flagged */
            if (backward)
                exec_recompute_release(ex, i);
            else
                exec_recompute_drop(ex, i);
        }
        mb_leave(ex, o);
        if (rc || (ex->p2p && (backward ? send_input_grads(ex, i, err) : send_outputs(ex, i, err))))
            return -1;
    }
    if (backward)
        for (int i = a; i < b; i++)
            release_buffers(ex, &ex->ops[i].mb[mb]);
    return 0;
}

/* This rank's events of a step: GPipe runs every forward, then every
 * backward; 1F1B runs S-s-1 forwards on stage s (fewer when M is smaller),
 * then one forward and one backward in turn, then the backwards left, so
 * stage s holds at most S-s micro-batches' activations. */
static int run_schedule(sb_executor *ex, sb_error *err)
{
    int M = ex->nmb, S = ex->pipe.nstages;
    if (ex->pipe.schedule == SB_SCHEDULE_GPIPE) {
        for (int j = 0; j < M; j++)
            if (run_event(ex, 0, j, err))
                return -1;
        for (int j = 0; j < M; j++)
            if (run_event(ex, 1, j, err))
                return -1;
        return 0;
    }
    int w = S - ex->stage - 1 < M ? S - ex->stage - 1 : M;
    for (int j = 0; j < w; j++)
        if (run_event(ex, 0, j, err))
            return -1;
    for (int k = 0; k < M - w; k++)
        if (run_event(ex, 0, w + k, err) || run_event(ex, 1, k, err))
            return -1;
    for (int k = M - w; k < M; k++)
        if (run_event(ex, 1, k, err))
            return -1;
    return 0;
}

int sb_executor_step(sb_executor *ex, double *loss, sb_error *err)
{
    const sb_model *m = ex->m;
    ex->loss_sum = 0;
    double total = 0;
    exec_times_settle(ex); /* anything booked since the last step (a failed one) */
    ex->step_mark = exec_mark(ex); /* the origin of the ops' phase times */
    if (exec_tied_pull(ex, err)) /* tied weights' copies from their tables (tied.c) */
        return -1;
    if (sb_pipeline_is_none(&ex->pipe)) {
        if (run_event(ex, 0, 0, err))
            return -1;
        MPI_Allreduce(&ex->loss_sum, &total, 1, MPI_DOUBLE, MPI_SUM, ex->comm);
        if (ex->data) {
            /* a record one rank could not read: every rank stops here, together */
            sb_error e = ex->data_failed ? ex->data_err : (sb_error){0};
            int bad = ex->data_failed;
            ex->data_failed = 0;
            if (sb_agree(ex->comm, bad ? -1 : 0, &e, NULL)) {
                *err = e;
                for (int i = 0; i < m->nops; i++)
                    release_step_buffers(ex, &ex->ops[i]);
                exec_times_settle(ex);
                return -2;
            }
        }
        if (run_event(ex, 1, 0, err))
            return -1;
    } else {
        /* the loss op's stage adds the micro-batches' shares of the mean */
        if (run_schedule(ex, err) || sb_relayout_pending_wait(ex->pending, err))
            return -1;
        MPI_Allreduce(&ex->loss_sum, &total, 1, MPI_DOUBLE, MPI_SUM, ex->comm);
    }
    *loss = total;
    /* update once per step, on the micro-batches' summed gradients (a
     * tied copy's added into its table's first, tied.c) */
    if (exec_tied_push(ex, err))
        return -1;
    for (int pi = 0; pi < ex->nparams - ex->nshadow; pi++)
        if (ex->params[pi].n && exec_zero_update(ex, &ex->params[pi], err))
            return -1;
    ex->step++;
    exec_times_settle(ex); /* the step's marks read once, its times booked */
    return 0;
}

/* ---- accessors -------------------------------------------------------------------- */

const sb_op_time *sb_executor_op_times(const sb_executor *ex) { return ex->times; }

int sb_executor_cpu_times(const sb_executor *ex) { return ex->ledger.cpu; }

const double *sb_executor_op_phase_times(const sb_executor *ex) { return ex->phase_t; }

void sb_executor_reset_times(sb_executor *ex)
{
    exec_ledger_clear(&ex->ledger);
    for (int k = 0; k < 4 * ex->m->nops; k++)
        ex->phase_marks[k] = -1;
    ex->step_mark = -1;
    memset(ex->times, 0, (size_t)ex->m->nops * sizeof *ex->times);
}

int64_t sb_executor_peak_bytes(const sb_executor *ex) { return ex->peak_bytes; }

int sb_executor_nweights(const sb_executor *ex) { return ex->nparams - ex->nshadow; }

int sb_executor_steps_done(const sb_executor *ex) { return ex->step; }
void sb_executor_set_steps_done(sb_executor *ex, int steps) { ex->step = steps; }
MPI_Comm sb_executor_comm(const sb_executor *ex) { return ex->comm; }
sb_update_rule sb_executor_update(const sb_executor *ex) { return ex->update; }
int sb_executor_zero(const sb_executor *ex) { return ex->zero; }
const sb_backend *sb_executor_backend(const sb_executor *ex) { return ex->be; }

void sb_executor_free(sb_executor *ex)
{
    if (!ex)
        return;
    if (ex->ops)
        for (int i = 0; i < ex->m->nops; i++) {
            opx *o = &ex->ops[i];
            for (int k = 0; k < SB_MAX_IO; k++) {
                sb_relayout_free(o->fwd[k]);
                sb_relayout_free(o->bwd[k]);
            }
            release_step_buffers(ex, o);
            free(o->mb);
            if (kind_of(ex, i)->release)
                kind_of(ex, i)->release(ex, o);
        }
    if (ex->params) {
        exec_tied_free(ex);
        exec_params_free(ex);
    }
    exec_pool_drain(ex);
    sb_group_cache_free(ex->groups);
    if (ex->be && ex->be->comm_release)
        ex->be->comm_release(); /* NCCL comms of the freed groups, outside MPI's callbacks */
    sb_relayout_pending_free(ex->pending);
    sb_model_free(&ex->micro);
    free(ex->mb_dim);
    free(ex->perm);
    free(ex->recompute);
    free(ex->ops);
    free(ex->times);
    free(ex->phase_marks);
    free(ex->phase_t);
    exec_ledger_free(&ex->ledger);
    free(ex->params);
    free(ex);
}

