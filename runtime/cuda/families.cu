/* runtime/cuda/families.cu: the cuda backend's kernel families that are
 * its kernels (runtime/kernels/cuda/) as they are, one table each
 * (backend.h). The families whose entries are the backend's own functions
 * (gemm, conv, optim: cuBLAS, cuDNN, the bf16 copies) are in
 * backend_cuda.cu beside them. */
#include "cuda_internal.h"
#include "shardbench/kernels.h"

extern const sb_embed_kernels sbc_embed = {
    .embedding_forward = sbk_embedding_forward,
    .embedding_backward = sbk_embedding_backward,
};

extern const sb_lstm_kernels sbc_lstm = {
    .lstm_pointwise_forward = sbk_lstm_pointwise_forward,
    .lstm_pointwise_backward = sbk_lstm_pointwise_backward,
};

extern const sb_norm_kernels sbc_norm = {
    .norm_finish_stats = sbk_norm_finish_stats,
    .norm_mean = sbk_norm_mean,
    .norm_rstd = sbk_norm_rstd,
    .layernorm_centered = sbk_layernorm_centered,
    .batchnorm_centered = sbk_batchnorm_centered,
    .layernorm_stats = sbk_layernorm_stats,
    .layernorm_apply = sbk_layernorm_apply,
    .layernorm_backward_stats = sbk_layernorm_backward_stats,
    .layernorm_backward_apply = sbk_layernorm_backward_apply,
    .rmsnorm_stats = sbk_rmsnorm_stats,
    .rmsnorm_apply = sbk_rmsnorm_apply,
    .rmsnorm_backward_stats = sbk_rmsnorm_backward_stats,
    .rmsnorm_backward_apply = sbk_rmsnorm_backward_apply,
    .batchnorm_stats = sbk_batchnorm_stats,
    .batchnorm_apply = sbk_batchnorm_apply,
    .batchnorm_backward_stats = sbk_batchnorm_backward_stats,
    .batchnorm_backward_apply = sbk_batchnorm_backward_apply,
};

extern const sb_softmax_kernels sbc_softmax = {
    .softmax_partial_max = sbk_softmax_partial_max,
    .softmax_partial_sumexp = sbk_softmax_partial_sumexp,
    .softmax_apply = sbk_softmax_apply,
    .softmax_backward_dot = sbk_softmax_backward_dot,
    .softmax_backward_apply = sbk_softmax_backward_apply,
    .causal_mask = sbk_causal_mask,
    .xent_partial_picked = sbk_xent_partial_picked,
    .xent_loss = sbk_xent_loss,
    .softmax_xent_backward = sbk_softmax_xent_backward,
};

extern const sb_rope_kernels sbc_rope = {
    .rope_forward = sbk_rope_forward,
    .rope_backward = sbk_rope_backward,
};

extern const sb_pointwise_kernels sbc_pointwise = {
    .act_forward = sbk_act_forward,
    .act_backward = sbk_act_backward,
    .mul_forward = sbk_mul_forward,
    .mul_backward = sbk_mul_backward,
    .expand_forward = sbk_expand_forward,
    .expand_backward = sbk_expand_backward,
    .softcap_forward = sbk_softcap_forward,
    .softcap_backward = sbk_softcap_backward,
};

extern const sb_sum_kernels sbc_sum = {
    .add_forward = sbk_add_forward,
    .add_backward = sbk_add_backward,
    .reduce_mean_forward = sbk_reduce_mean_forward,
    .reduce_mean_backward = sbk_reduce_mean_backward,
};

extern const sb_moe_kernels sbc_moe = {
    .moe_gate_work_floats = sb_moe_gate_work_floats,
    .moe_gate_forward = sbk_moe_gate_forward,
    .moe_gate_backward = sbk_moe_gate_backward,
};

extern const sb_move_kernels sbc_move = {
    .box_copy = sbk_box_copy,
    .permute = sbk_permute,
};
