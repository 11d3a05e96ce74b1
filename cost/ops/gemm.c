/* ops/gemm.c: the search stage's facts of the GEMM-like kinds: conv, dense,
 * einsum, embedding. Iteration dims have roles (batch, m, n, k: the parser
 * sets them); compute is 3·m'n'k' multiply-adds per batch element (forward,
 * input gradient, weight gradient) and communication the three all-reduces
 * (docs/cost-model.md, "GEMM-like ops"). */
#include "../kinds.h"
#include "shardbench/precision.h"

#include <math.h>

/* A fused attention kernel (models/attention.c) per device: one tile loop
 * over (queries m) x (kept keys) per batch element, as FlashAttention-2
 * computes it. The scores' products (head dim k: S = QK^T) run 4 times:
 * the forward, the backward's recomputation of S, dQ = dS K and dK = dS^T Q;
 * the values' products (head dim n: O = P V) 3 times: the forward, dV =
 * P^T dO and dP = dO V^T. With equal head dims that is 3.5 x the forward
 * (--algo megatron's 2.5 x for the backward), the backward's at the
 * machine's backward kernel rate where it gives one. The mask's skipped
 * pairs (attn_frac) are never computed. In FLOP at F. */
static double attn_share(const sb_op *op, const sb_cost_params *cp, double batch, double m,
                         double n, double k)
{
    /* the forward product once, the backward's (at the backward kernel's rate) 3 or 2 times */
    int scores = op->attn == SB_ATTN_SCORES;
    double keys = (scores ? n : k) * op->attn_frac, dh = scores ? k : n;
    double s = sb_attn_gpu_seconds(cp, batch, m, keys, dh, 0) +
               (scores ? 3.0 : 2.0) * sb_attn_gpu_seconds(cp, batch, m, keys, dh, 1);
    return s * cp->tflops * 1e12;
}

/* The input slot of an einsum that a moe_gate produced (its dispatch or
 * combine: one-hot in the expert and capacity slot), or -1. */
static int routed_slot(const sb_model *m, const sb_op *op)
{
    if (op->kind != SB_OP_EINSUM || op->nin != 2)
        return -1;
    for (int k = 0; k < 2; k++) {
        int pr = m->tensors[op->in[k].tensor].producer;
        if (pr >= 0 && m->ops[pr].kind == SB_OP_MOE_GATE)
            return k;
    }
    return -1;
}

/* Of the per-device elements of o (a moe_gate's output: (group, seq,
 * expert, cap)), those a (token, expert) map leaves out: all but one per
 * capacity slot of the device's block. */
static double routed_cap_elems(const sb_model *m, const sb_op *op, const sb_operand *o,
                               const int *c)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    int lay[SB_MAX_DIMS];
    sb_operand_layout(op, o, t->ndims, c, lay);
    double all = sb_operand_elems(m, op, o, c), slots = (double)t->dims[t->ndims - 1].size
                                                        / lay[t->ndims - 1];
    return all - all / slots;
}

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
    if (op->attn && cp->gpu_sms > 0) /* a fused attention's share: its collectives as the
                                        einsum's, its compute in the fused kernel */
        return attn_share(op, cp, batch, dm / cm, dn / cn, dk / ck)
               + sb_gemm_comm_cost(cp, batch, dm / cm, dn / cn, dk / ck, g);
    int routed = cp->gpu_sms > 0 ? routed_slot(m, op) : -1;
    if (routed >= 0) { /* GPU: GShard's dispatch or combine by the router's one-hot is a
                          gather or scatter of the tokens (each token to its top-k slots),
                          not a GEMM: the tokens and the slots read and written each way
                          (memory-bound), with the einsum's collectives */
        double x = sb_operand_elems(m, op, &op->in[1 - routed], c);
        double y = sb_operand_elems(m, op, &op->out[0], c);
        return sb_elem_cost(cp, x + y, 0.0, 1.0, 1.0)
               + sb_gemm_comm_cost(cp, batch, dm / cm, dn / cn, dk / ck, g);
    }
    if (op->kind == SB_OP_EMBEDDING && cp->gpu_sms > 0) /* GPU: a gather, not a GEMM: the rows
                                                           read and written, the gradient rows
                                                           read and added (memory-bound) */
        return sb_gemm_cost(cp, batch, dm / cm, dn / cn, dk / ck, g, op->pw, 0.0)
               + sb_elem_cost(cp, batch * (dm / cm) * (dn / cn), 0.0, 2.0, 2.0);
    double mac = op->kind == SB_OP_CONV ? cp->conv_ratio : 1.0;
    if (cp->gpu_sms > 0 && cp->precision == SB_PREC_FP8) {
        /* a product of activations, a conv, the output layer and a router
         * (Megatron-LM's own linears, not Transformer Engine's) stay in bf16 */
        if (!sb_op_fp8_linear(m, op)) {
            sb_cost_params a = *cp;
            a.gpu_peak_tflops = cp->gpu_attn_peak_tflops > 0 ? cp->gpu_attn_peak_tflops
                                                             : cp->gpu_peak_tflops;
            if (cp->gpu_attn_gemm_eff > 0)
                a.gpu_gemm_eff = cp->gpu_attn_gemm_eff;
            return sb_gemm_cost(&a, batch, dm / cm, dn / cn, dk / ck, g, op->pw, mac);
        }
        /* a linear layer: its output gradient (backward) cast-transposed to
         * fp8, 2 bytes read and 1 + 1 written an element, and its input
         * (sb_op.fp8_in): the same where it casts it, nothing where another
         * linear of its module does, the fp8 copy's transpose (1 + 1) where
         * a norm fused into it wrote that copy (models/gpu_run.c); the
         * module's first linear runs its kernels (one cast of the fused
         * output gradient, one of the input) */
        int shared = op->fp8_in == SB_FP8_IN_SHARED;
        double in_bytes = shared ? 0.0 : op->fp8_in == SB_FP8_IN_NORM ? 2.0 : 4.0;
        double cast = batch * (dm / cm) * ((dk / ck) * in_bytes + (dn / cn) * 4.0);
        double kernels = shared ? 0.0 : 2.0;
        return sb_gemm_cost(cp, batch, dm / cm, dn / cn, dk / ck, g, op->pw, mac) +
               (cast / (cp->gpu_hbm_gbs * 1e9 * cp->gpu_hbm_eff) + kernels * cp->gpu_kernel_us * 1e-6) *
                   cp->tflops * 1e12;
    }
    return sb_gemm_cost(cp, batch, dm / cm, dn / cn, dk / ck, g, op->pw, mac);
}

/* GEMM-like ops copy their operands into canonical order and build the
 * product before the all-reduce. A fused attention (models/attention.c)
 * keeps no S x S tensor: the scores einsum no output, the values einsum no
 * softmax weights; the kernel's tiles live in on-chip memory. */
static void memory_gemm(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    int routed = op->gpu_run ? routed_slot(m, op) : -1;
    if (op->attn == SB_ATTN_SCORES)
        e->outs = 0.0;
    else if (op->attn == SB_ATTN_VALUES)
        e->in -= sb_operand_elems(m, op, &op->in[op->attn_slot], c);
    else if (routed >= 0) /* GPU: the gather or scatter reads the router's (token, expert)
                             map (its last dim, the capacity slots, not materialized) */
        e->in -= routed_cap_elems(m, op, &op->in[routed], c);
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
