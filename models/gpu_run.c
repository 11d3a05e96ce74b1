/* gpu_run.c: a model as a GPU training framework runs it
 * (sb_model_gpu_run): its tensors kept as autograd keeps them, its
 * attention as one fused kernel (sb_model_fuse_attention), its output layer
 * and routers as plain linears and its other linears' fp8 conversions as
 * Transformer Engine runs them (mark_fp8_inputs).
 *
 * A model file writes attention as three ops: scores = einsum(q, k), w =
 * softmax(scores, axis=mem, causal=seq), s = einsum(w, v) (Gemma 2: a
 * softcap of the scores before the softmax; MLA: the scores the sum of
 * two einsums, the head dim's no-rotary and rotary parts; both fused). A GPU computes
 * them in one FlashAttention-style kernel that never stores the S x S
 * scores or weights and recomputes them in the backward; this pass marks
 * the three ops so that the cost and memory models price that kernel
 * (docs/cost-model.md, "Fused attention"). It changes no op's meaning. */
#include "shardbench/model.h"

#include <stdlib.h>

/* Pairs (query i, key j) a causal softmax keeps, of sq queries and sk keys:
 * j <= i, and with a window w also j > i - w (sb_op.window). */
static double kept_fraction(const sb_op *sm)
{
    if (sm->causal < 0)
        return 1.0;
    double sq = (double)sm->dims[sm->causal].size, sk = (double)sm->dims[sm->axis].size;
    double kept = 0.0;
    for (int64_t i = 0; i < sm->dims[sm->causal].size; i++) {
        double hi = (double)i < sk - 1 ? (double)i : sk - 1; /* last key kept */
        double lo = sm->window > 0 && i - sm->window + 1 > 0 ? (double)(i - sm->window + 1) : 0.0;
        if (hi >= lo)
            kept += hi - lo + 1.0;
    }
    return kept / (sq * sk);
}

/* 1 when op is an einsum of two activations or inputs (no weight) */
static int einsum_of_activations(const sb_model *m, const sb_op *op)
{
    if (op->kind != SB_OP_EINSUM || op->nin != 2 || op->nout != 1 || op->nweights)
        return 0;
    for (int k = 0; k < 2; k++)
        if (m->tensors[op->in[k].tensor].kind == SB_TENSOR_WEIGHT)
            return 0;
    return 1;
}

int sb_model_fuse_attention(sb_model *m, sb_error *err)
{
    /* readers[t]: how many input slots read tensor t; reader[t]: the last one's op */
    int *readers = sb_calloc((size_t)m->ntensors * 2 + 1, sizeof *readers, err);
    if (!readers)
        return -1;
    int *reader = readers + m->ntensors, n = 0;
    for (int i = 0; i < m->nops; i++)
        for (int k = 0; k < m->ops[i].nin; k++) {
            readers[m->ops[i].in[k].tensor]++;
            reader[m->ops[i].in[k].tensor] = i;
        }
    for (int i = 0; i < m->nops; i++) {
        sb_op *sm = &m->ops[i];
        if (sm->kind != SB_OP_SOFTMAX || sm->nin != 1 || sm->nout != 1 || sm->attn)
            continue;
        int ts = sm->in[0].tensor, tw = sm->out[0].tensor, l = m->tensors[ts].producer;
        int cap = -1; /* a soft-cap of the scores between them (Gemma 2) */
        if (l >= 0 && m->ops[l].kind == SB_OP_SOFTCAP && m->ops[l].nin == 1 && readers[ts] == 1) {
            cap = l;
            ts = m->ops[l].in[0].tensor;
            l = m->tensors[ts].producer;
        }
        /* the scores: one einsum, or the sum of two (MLA: the no-rotary and
         * the rotary parts of the head dim, one kernel over both) */
        int l2 = -1, sum = -1;
        if (l >= 0 && m->ops[l].kind == SB_OP_ELEMENTWISE && m->ops[l].nin == 2 &&
            !m->ops[l].pw && readers[ts] == 1 && !m->ops[l].attn) {
            int a = m->tensors[m->ops[l].in[0].tensor].producer;
            int b = m->tensors[m->ops[l].in[1].tensor].producer;
            if (a < 0 || b < 0 || a == b || readers[m->ops[l].in[0].tensor] != 1 ||
                readers[m->ops[l].in[1].tensor] != 1 || !einsum_of_activations(m, &m->ops[b]) ||
                m->ops[b].attn)
                continue;
            sum = l, l = a, l2 = b;
            ts = m->ops[sum].in[0].tensor;
        }
        if (l < 0 || readers[ts] != 1 || readers[tw] != 1 || !einsum_of_activations(m, &m->ops[l]))
            continue;
        int v = reader[tw];
        sb_op *vo = &m->ops[v];
        if (!einsum_of_activations(m, vo) || vo->attn || m->ops[l].attn)
            continue;
        int slot = vo->in[0].tensor == tw ? 0 : 1;
        if (vo->in[1 - slot].tensor == tw) /* w times itself: not attention */
            continue;
        double f = kept_fraction(sm);
        /* the kernel contracts the whole head dim in a tile: it has no S x S
           partial scores to all-reduce, so the scores never split it */
        for (int q = 0; q < m->ops[l].ndims; q++)
            if (m->ops[l].role[q] == SB_ROLE_K)
                m->ops[l].nosplit |= 1u << q;
        for (int q = 0; l2 >= 0 && q < m->ops[l2].ndims; q++)
            if (m->ops[l2].role[q] == SB_ROLE_K)
                m->ops[l2].nosplit |= 1u << q;
        m->ops[l].attn = SB_ATTN_SCORES;
        sm->attn = SB_ATTN_SOFTMAX;
        if (cap >= 0)
            m->ops[cap].attn = SB_ATTN_SOFTMAX, m->ops[cap].attn_frac = f;
        if (sum >= 0) {
            m->ops[sum].attn = SB_ATTN_SOFTMAX, m->ops[sum].attn_frac = f;
            m->ops[l2].attn = SB_ATTN_SCORES, m->ops[l2].attn_frac = f;
        }
        vo->attn = SB_ATTN_VALUES;
        vo->attn_slot = slot;
        m->ops[l].attn_frac = sm->attn_frac = vo->attn_frac = f;
        n++;
    }
    free(readers);
    return n;
}

/* The op that writes tensor t, or -1 (a model input). */
static int producer(const sb_model *m, int t)
{
    for (int i = 0; i < m->nops; i++)
        for (int k = 0; k < m->ops[i].nout; k++)
            if (m->ops[i].out[k].tensor == t)
                return i;
    return -1;
}

/* Marks each loss's output layer: the dense or einsum that writes the loss's
 * input, or that input's through ops of one data input and no weight
 * (Gemma 2's final softcap, a reshape). */
static void mark_loss_inputs(sb_model *m)
{
    for (int l = 0; l < m->nops; l++) {
        if (m->ops[l].kind != SB_OP_SOFTMAX_XENT)
            continue;
        for (int p = producer(m, m->ops[l].in[0].tensor), hops = 0; p >= 0 && hops < 8; hops++) {
            sb_op *o = &m->ops[p];
            if (o->kind == SB_OP_DENSE || o->kind == SB_OP_EINSUM) {
                o->feeds_loss = 1;
                break;
            }
            if (o->nin != 1 || o->nweights)
                break;
            p = producer(m, o->in[0].tensor);
        }
    }
}

int sb_op_fp8_linear(const sb_model *m, const sb_op *op)
{
    return (op->kind == SB_OP_DENSE || op->kind == SB_OP_EINSUM) && !op->feeds_loss &&
           !op->routes && sb_op_trains_weight(m, op);
}

int sb_op_fp8_input(const sb_model *m, const sb_op *op)
{
    if (!sb_op_fp8_linear(m, op))
        return -1;
    for (int k = 0; k < op->nin; k++)
        if (m->tensors[op->in[k].tensor].kind != SB_TENSOR_WEIGHT)
            return op->in[k].tensor;
    return -1;
}

/* Marks each router: the linear whose output a moe_gate reads (Megatron-LM's
 * router, a plain linear: bf16 under fp8). */
static void mark_routers(sb_model *m)
{
    for (int i = 0; i < m->nops; i++)
        m->ops[i].routes = 0;
    for (int g = 0; g < m->nops; g++) {
        if (m->ops[g].kind != SB_OP_MOE_GATE)
            continue;
        int p = producer(m, m->ops[g].in[0].tensor);
        if (p >= 0 && (m->ops[p].kind == SB_OP_DENSE || m->ops[p].kind == SB_OP_EINSUM))
            m->ops[p].routes = 1;
    }
}

/* How Transformer Engine converts each fp8 linear's input (sb_op.fp8_in,
 * fp8_out). A run of fp8 linears next to each other in op order reading one
 * tensor is one module (a model file writes Megatron's fused QKV as three
 * einsums of one input, gate and up as two): its first casts the input, the
 * rest use that copy. A layer or RMS norm whose output only one such run
 * reads is fused into it (LayerNormLinear): it writes the fp8 copy itself
 * and the run's first transposes it. Linears of one tensor apart in op order
 * (another layer's cross-attention reading the encoder's output) are
 * modules of their own. Marked at any precision; the cost model reads them
 * under fp8 only; a pipeline cut through a module undoes them in the stage
 * (search/pipe_models.c, pipe_sub_model). */
static int mark_fp8_inputs(sb_model *m, sb_error *err)
{
    /* per tensor: its readers (input slots), the fp8 linears among them, the runs */
    int *nread = sb_calloc((size_t)m->ntensors * 4 + 1, sizeof *nread, err);
    if (!nread)
        return -1;
    int *nlin = nread + m->ntensors, *runs = nlin + m->ntensors, *first = runs + m->ntensors;
    for (int i = 0, prev = -1; i < m->nops; i++) {
        sb_op *op = &m->ops[i];
        op->fp8_in = SB_FP8_IN_CAST, op->fp8_out = 0, op->fp8_span = 0;
        for (int k = 0; k < op->nin; k++)
            nread[op->in[k].tensor]++;
        int t = sb_op_fp8_input(m, op);
        if (t >= 0) {
            nlin[t]++;
            if (t == prev) {
                op->fp8_in = SB_FP8_IN_SHARED;
            } else {
                runs[t]++;
                first[t] = i;
            }
        }
        prev = t;
    }
    for (int t = 0; t < m->ntensors; t++) {
        int p = m->tensors[t].producer;
        if (!nlin[t] || nlin[t] != nread[t] || runs[t] != 1 || p < 0 || m->ops[p].nout != 1 ||
            !(m->ops[p].kind == SB_OP_RMSNORM || (m->ops[p].kind == SB_OP_NORM && !m->ops[p].batchnorm)))
            continue;
        int e = first[t]; /* the run's last linear */
        while (e + 1 < m->nops && m->ops[e + 1].fp8_in == SB_FP8_IN_SHARED) /* reads t: a run */
            e++;
        m->ops[p].fp8_out = 1;
        m->ops[p].fp8_span = e - p;
        m->ops[first[t]].fp8_in = SB_FP8_IN_NORM;
        m->ops[first[t]].fp8_span = e - first[t];
    }
    free(nread);
    return 0;
}

int sb_model_gpu_run(sb_model *m, int fuse, sb_error *err)
{
    for (int i = 0; i < m->nops; i++)
        m->ops[i].gpu_run = 1;
    mark_loss_inputs(m);
    mark_routers(m);
    if (mark_fp8_inputs(m, err))
        return -1;
    return fuse && sb_model_fuse_attention(m, err) < 0 ? -1 : 0;
}

int sb_model_fused_attentions(const sb_model *m)
{
    int n = 0;
    for (int i = 0; i < m->nops; i++)
        n += m->ops[i].attn == SB_ATTN_SOFTMAX && m->ops[i].kind == SB_OP_SOFTMAX;
    return n;
}
