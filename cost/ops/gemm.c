/* ops/gemm.c: the search stage's facts of the GEMM-like kinds: conv, dense,
 * einsum, embedding. Iteration dims have roles (batch, m, n, k: the parser
 * sets them); compute is 3·m'n'k' multiply-adds per batch element (forward,
 * input gradient, weight gradient) and communication the three all-reduces
 * (docs/cost-model.md, "GEMM-like ops"). */
#include "../kinds.h"

#include <math.h>

static double cost_gemm_like(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    double batch = 1.0;
    double dm = 1, dn = 1, dk = 1, cm = 1, cn = 1, ck = 1;
    uint32_t in_m = 0, in_n = 0, in_k = 0; /* the dims of each role */
    for (int i = 0; i < op->ndims; i++) {
        double d = (double)op->dims[i].size;
        switch (op->role[i]) {
        case SB_ROLE_BATCH: batch *= d / c[i]; break;
        case SB_ROLE_M: dm *= d; cm *= c[i]; in_m |= 1u << i; break;
        case SB_ROLE_N: dn *= d; cn *= c[i]; in_n |= 1u << i; break;
        case SB_ROLE_K: dk *= d; ck *= c[i]; in_k |= 1u << i; break;
        default: break; /* SB_ROLE_NONE: a dim outside the product */
        }
    }
    const sb_coll_group one = {1.0, 1.0, 1.0};
    int none = cp->coll_mode == SB_COLL_FREE; /* no collective priced: no group needed */
    sb_coll_group g[3] = {none ? one : sb_op_group(cp, op, c, in_m),
                          none ? one : sb_op_group(cp, op, c, in_n),
                          none ? one : sb_op_group(cp, op, c, in_k)};
    if (cp->wgrad_free && sb_op_trains_weight(m, op)) /* g[0] reduces the weight's gradient */
        g[0] = one;
    if (op->kind == SB_OP_EMBEDDING && cp->gpu_sms > 0) /* GPU: a gather, not a GEMM: the rows
                                                           read and written, the gradient rows
                                                           read and added (memory-bound) */
        return sb_gemm_cost(cp, batch, dm / cm, dn / cn, dk / ck, g, op->pw, 0.0)
               + sb_elem_cost(cp, batch * (dm / cm) * (dn / cn), 0.0, 2.0, 2.0);
    return sb_gemm_cost(cp, batch, dm / cm, dn / cn, dk / ck, g, op->pw,
                        op->kind == SB_OP_CONV ? cp->conv_ratio : 1.0);
}

/* GEMM-like ops copy their operands into canonical order and build the
 * product before the all-reduce. */
static void memory_gemm(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    e->scratch = e->in + (e->weights > e->wmax ? e->weights : e->wmax) + 2.0 * e->outs;
}

/* The CPU conv kernels' im2col workspace (runtime/kernels/k_conv.c): the columns
 * of a group of g images, g = ceil(1536 / (h_out w_out)) but at most 16 and
 * at most 8 Mi floats, each image (C' R' S' + N') h_out w_out floats.
 * conv dims: 0 batch, 1 channels_in, 2 h, 3 w, 4 kh, 5 kw, 6 channels, and
 * 7 group when grouped (C' and N' count every group of the device's box:
 * the kernels size the workspace by all channels). */
static double conv_workspace_elems(const sb_op *op, const int *c)
{
    double groups = op->ndims > 7 ? sb_per_dev(op, c, 7) : 1.0;
    double hw = sb_per_dev(op, c, 2) * sb_per_dev(op, c, 3);
    double crs = groups * sb_per_dev(op, c, 1) * sb_per_dev(op, c, 4) * sb_per_dev(op, c, 5);
    if (hw <= 0)
        return 0.0;
    double g = ceil(1536.0 / hw);
    if (g > 16)
        g = 16;
    while (g > 1 && g * crs * hw > 8388608.0)
        g--;
    return g * (crs + groups * sb_per_dev(op, c, 6)) * hw;
}

static void memory_conv(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    e->scratch = conv_workspace_elems(op, c) + e->outs;
}

/* The embedding holds its ids as int32 beside the float copy of its input. */
static void memory_embedding(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    for (int k = 0; k < op->nin; k++)
        if (m->tensors[op->in[k].tensor].kind != SB_TENSOR_WEIGHT)
            e->in += sb_operand_elems(m, op, &op->in[k], c);
    e->scratch = e->in + (e->weights > e->wmax ? e->weights : e->wmax) + 2.0 * e->outs;
}

const sb_kind_search sb_search_conv = {.cost = cost_gemm_like, .memory = memory_conv};
const sb_kind_search sb_search_dense = {.cost = cost_gemm_like, .memory = memory_gemm};
const sb_kind_search sb_search_einsum = {.cost = cost_gemm_like, .memory = memory_gemm};
const sb_kind_search sb_search_embedding = {.cost = cost_gemm_like, .memory = memory_embedding};
