/* ops/moe.c: the search stage's facts of moe_gate, the router of a mixture
 * of experts (iteration space (group, seq, expert, cap), only group split).
 * The experts, their dispatch and their combine are einsums (gemm.c); the
 * all-to-all of expert parallelism is the relayout on the edges between the
 * dispatch einsum (split on group) and the expert einsums (split on expert),
 * priced by the edge cost (docs/cost-model.md, "mixture of experts"). */
#include "../kinds.h"

/* Elementwise work, with l = group'·seq·expert logits and e the per-device
 * elements (group', seq, expert, cap): forward softmax 4l, top-k k·l, the
 * two outputs written 2e; backward the routing again (4l + k·l) and the
 * combine gradient read (e); with the load-balancing loss, its value (2l)
 * and its gradient (4l). No communication: a group lies on one device. */
static double cost_moe_gate(const sb_model *m, const sb_op *op, const int *c, const sb_cost_params *cp)
{
    (void)m;
    double e = sb_per_device_elems(op, c);
    double l = sb_per_dev(op, c, 0) * sb_per_dev(op, c, 1) * sb_per_dev(op, c, 2);
    if (cp->gpu_sms > 0) /* GPU: the outputs are (token, expert) maps (memory_moe_gate) */
        e = l;
    double aux = op->moe_aux > 0 ? 6.0 * l : 0.0;
    return ((8.0 + 2.0 * op->topk) * l + 3.0 * e + aux) * cp->elem_ratio;
}

/* Operands (logits, combine, dispatch); nothing saved (the backward redoes
 * the routing from the logits); scratch: a buffer per output that sums its
 * consumers' gradients, plus the routing (expert, slot and weight of each of
 * the k choices of each token, a slot count and a first-choice share per
 * expert) and the groups' balance losses. */
static void memory_moe_gate(const sb_model *m, const sb_op *op, const int *c, sb_mem_elems *e)
{
    sb_mem_operands(m, op, c, e);
    double g = sb_per_dev(op, c, 0), s = sb_per_dev(op, c, 1), x = sb_per_dev(op, c, 2);
    if (op->gpu_run) /* GPU (sb_model_gpu_run): the router keeps a (token, expert) map of
                        probabilities and one of choices (Megatron-Core's TopKRouter), never
                        the one-hot over the capacity slots (C times as many: 320 on
                        DeepSeek-V3, 2.5 GiB a layer and sequence in bf16) */
        e->outs = 2.0 * g * s * x;
    e->scratch = e->outs + 3.0 * g * s * op->topk + 2.0 * g * x + g;
}

const sb_kind_search sb_search_moe_gate = {.cost = cost_moe_gate, .memory = memory_moe_gate};
