/* common.h: small helpers shared by the op kinds (ops/). Internal to
 * runtime/ops/. */
#ifndef SB_RUNTIME_OPS_COMMON_H
#define SB_RUNTIME_OPS_COMMON_H

#include "../executor/plan.h"
#include "../executor/services.h"
#include "kinds.h"

/* extent of iteration dim i in this rank's box */
static inline int64_t ops_ext(const opx *o, int i) { return o->hi[i] - o->lo[i]; }

/* element stride of iteration dim d in this rank's (dense) box of nd dims */
static inline int64_t ops_stride(const opx *o, int nd, int d)
{
    int64_t s = 1;
    for (int i = d + 1; i < nd; i++)
        s *= ops_ext(o, i);
    return s;
}

/* a box's extents as ints */
static inline void ops_box_dims(const sb_box *b, int *d)
{
    for (int i = 0; i < b->nd; i++)
        d[i] = (int)(b->hi[i] - b->lo[i]);
}

/* the iteration dims of a role (SB_ROLE_*) as a mask */
static inline uint32_t ops_role_mask(const sb_op *op, int role)
{
    uint32_t m = 0;
    for (int i = 0; i < op->ndims; i++)
        if (op->role[i] == role)
            m |= 1u << i;
    return m;
}

/* whether input slot k of op is a model input (it takes no gradient) */
static inline int ops_is_model_input(const sb_executor *ex, const sb_op *op, int k)
{
    return ex->m->tensors[op->in[k].tensor].kind == SB_TENSOR_INPUT;
}

/* relu in place on n floats (after a partial-sum all-reduce) */
static inline int ops_relu_inplace(sb_executor *ex, float *p, int64_t n)
{
    const float *ins[1] = {p};
    if (n)
        ex->be->sum->add_forward(p, ins, 1, (size_t)n, 1);
    return 0;
}

/* setup_groups of the kinds that sum partial products over their split
 * reduction (K) dims: the K group, kcomm */
static inline int ops_setup_kcomm(sb_executor *ex, opx *o, sb_error *err)
{
    const sb_op *op = &ex->m->ops[o->idx];
    return exec_make_group(ex, o, ops_role_mask(op, SB_ROLE_K), &o->kcomm, err);
}

#endif
