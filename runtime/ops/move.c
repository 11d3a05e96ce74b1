/* move.c: the data movement kinds, pure copies on this rank's boxes:
 * concat, split, stack and unstack (a part is a box of the many-sided
 * tensor; never-split axes), flatten and unflatten (a contiguous range),
 * transpose (a permutation). Backward adds the copies back. */
#include "common.h"

/* dst box region [lo, lo+size) of a buffer shaped dst_dims (+)= src shaped size */
static void put(sb_executor *ex, float *dst, const int *dst_dims, const int *lo, const float *src,
                const int *size, int nd, int acc)
{
    int zero[SB_MAX_DIMS] = {0};
    ex->be->move->box_copy(dst, dst_dims, lo, src, size, zero, size, nd, acc);
}

static void get(sb_executor *ex, float *dst, const int *size, const float *src, const int *src_dims,
                const int *lo, int nd, int acc)
{
    int zero[SB_MAX_DIMS] = {0};
    ex->be->move->box_copy(dst, size, zero, src, src_dims, lo, size, nd, acc);
}

/* concat/split/stack/unstack: the many-sided tensor (big) and its parts, all
 * boxes of rank nd where parts have size 1 on a stacked axis */
static int parts_move(sb_executor *ex, opx *o, int backward)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int many_in = op->kind == SB_OP_CONCAT || op->kind == SB_OP_STACK;
    const tbuf *big = many_in ? &o->out[0] : &o->in[0];
    float *bigd = many_in ? o->dout[0].p : o->din[0].p;
    int nd = big->box.nd, bdims[SB_MAX_DIMS];
    ops_box_dims(&big->box, bdims);
    int nparts = many_in ? op->nin : op->nout;
    int stacked = op->kind == SB_OP_STACK || op->kind == SB_OP_UNSTACK;
    int a = op->axis, offset = 0;
    for (int k = 0; k < nparts; k++) {
        tbuf *part = many_in ? &o->in[k] : &o->out[k];
        float *partd = many_in ? o->din[k].p : o->dout[k].p;
        int pdims[SB_MAX_DIMS], lo[SB_MAX_DIMS] = {0};
        if (stacked) {
            int n = 0;
            for (int i = 0; i < nd; i++)
                pdims[i] = i == a ? 1 : (int)(part->box.hi[n] - part->box.lo[n]), n += i != a;
        } else {
            ops_box_dims(&part->box, pdims);
        }
        lo[a] = offset;
        offset += pdims[a];
        if (!part->n)
            continue;
        if (!backward) {
            if (many_in)
                put(ex, big->p, bdims, lo, part->p, pdims, nd, 0);
            else
                get(ex, part->p, pdims, big->p, bdims, lo, nd, 0);
        } else {
            int input_part = many_in && ex->m->tensors[op->in[k].tensor].kind == SB_TENSOR_INPUT;
            if (many_in && !input_part)
                get(ex, partd, pdims, bigd, bdims, lo, nd, 1);
            else if (!many_in && ex->m->tensors[op->in[0].tensor].kind != SB_TENSOR_INPUT)
                put(ex, bigd, bdims, lo, partd, pdims, nd, 1);
        }
    }
    return 0;
}

static int copy_flat(sb_executor *ex, float *dst, const float *src, int64_t n, int acc)
{
    int d = (int)n, z = 0;
    if (n)
        ex->be->move->box_copy(dst, &d, &z, src, &d, &z, &d, 1, acc);
    return 0;
}

static int transpose_move(sb_executor *ex, opx *o, int backward)
{
    const sb_op *op = &ex->m->ops[o->idx];
    int nd = o->in[0].box.nd, dims[SB_MAX_DIMS], odims[SB_MAX_DIMS], inv[SB_MAX_DIMS];
    ops_box_dims(&o->in[0].box, dims);
    ops_box_dims(&o->out[0].box, odims);
    for (int j = 0; j < nd; j++)
        inv[op->perm[j]] = j;
    if (!o->in[0].n)
        return 0;
    if (!backward)
        ex->be->move->permute(o->out[0].p, o->in[0].p, nd, dims, op->perm, 0);
    else
        ex->be->move->permute(o->din[0].p, o->dout[0].p, nd, odims, inv, 1);
    return 0;
}

static int parts_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    return parts_move(ex, o, 0);
}

static int parts_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    return parts_move(ex, o, 1);
}

static int flat_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    return copy_flat(ex, o->out[0].p, o->in[0].p, o->in[0].n, 0);
}

static int flat_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    const sb_op *op = &ex->m->ops[o->idx];
    if (ops_is_model_input(ex, op, 0))
        return 0;
    return copy_flat(ex, o->din[0].p, o->dout[0].p, o->in[0].n, 1);
}

static int transpose_forward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    return transpose_move(ex, o, 0);
}

static int transpose_backward(sb_executor *ex, opx *o, sb_error *err)
{
    (void)err;
    return transpose_move(ex, o, 1);
}

const sb_op_runtime sb_op_runtime_concat = {
    .forward = parts_forward, .backward = parts_backward, .families = SB_FAM(MOVE)};
const sb_op_runtime sb_op_runtime_split = {
    .forward = parts_forward, .backward = parts_backward, .families = SB_FAM(MOVE)};
const sb_op_runtime sb_op_runtime_stack = {
    .forward = parts_forward, .backward = parts_backward, .families = SB_FAM(MOVE)};
const sb_op_runtime sb_op_runtime_unstack = {
    .forward = parts_forward, .backward = parts_backward, .families = SB_FAM(MOVE)};
const sb_op_runtime sb_op_runtime_flatten = {
    .forward = flat_forward, .backward = flat_backward, .families = SB_FAM(MOVE)};
const sb_op_runtime sb_op_runtime_unflatten = {
    .forward = flat_forward, .backward = flat_backward, .families = SB_FAM(MOVE)};
const sb_op_runtime sb_op_runtime_transpose = {
    .forward = transpose_forward, .backward = transpose_backward, .families = SB_FAM(MOVE)};
