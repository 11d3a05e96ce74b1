/* arch.c: which architecture a Hugging Face config is (`architectures`,
 * else `model_type`) and the keys each one reads into an hf_cfg, with the
 * defaults of its transformers config class. A value the model does not
 * build is refused naming the key; one it builds approximately is noted
 * (sb_hf_info.approx, with what differs). docs/models.md, "Hugging Face
 * configs", lists them. */
#define _GNU_SOURCE
#include "hf_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef enum {
    A_LLAMA, A_MISTRAL, A_MIXTRAL, A_QWEN2, A_QWEN3, A_QWEN2_MOE, A_QWEN3_MOE, A_GEMMA2,
    A_PHI3, A_DEEPSEEK_V2, A_DEEPSEEK_V3, A_NEOX, A_GPT2, A_COUNT
} hf_arch;

static const struct {
    const char *cls, *type;
} archs[A_COUNT] = {
    [A_LLAMA] = {"LlamaForCausalLM", "llama"},
    [A_MISTRAL] = {"MistralForCausalLM", "mistral"},
    [A_MIXTRAL] = {"MixtralForCausalLM", "mixtral"},
    [A_QWEN2] = {"Qwen2ForCausalLM", "qwen2"},
    [A_QWEN3] = {"Qwen3ForCausalLM", "qwen3"},
    [A_QWEN2_MOE] = {"Qwen2MoeForCausalLM", "qwen2_moe"},
    [A_QWEN3_MOE] = {"Qwen3MoeForCausalLM", "qwen3_moe"},
    [A_GEMMA2] = {"Gemma2ForCausalLM", "gemma2"},
    [A_PHI3] = {"Phi3ForCausalLM", "phi3"},
    [A_DEEPSEEK_V2] = {"DeepseekV2ForCausalLM", "deepseek_v2"},
    [A_DEEPSEEK_V3] = {"DeepseekV3ForCausalLM", "deepseek_v3"},
    [A_NEOX] = {"GPTNeoXForCausalLM", "gpt_neox"},
    [A_GPT2] = {"GPT2LMHeadModel", "gpt2"},
};

#define NOTE(R, ...) hf_note((R)->info->approx, sizeof (R)->info->approx, __VA_ARGS__)

/* The architecture by `architectures[0]`, else by `model_type`. */
static int find_arch(hf_reader *R, hf_arch *a)
{
    const char *type = NULL, *cls = NULL;
    if (hf_str(R, "model_type", NULL, &type))
        return -1;
    json_t *v = hf_get(R, "architectures");
    if (v) {
        if (!json_is_array(v) || json_array_size(v) < 1 || !json_is_string(json_array_get(v, 0)))
            return hf_fail(R, "architectures", "expected a list of class names");
        if (json_array_size(v) > 1)
            return hf_fail(R, "architectures", "%zu classes: one is read", json_array_size(v));
        cls = json_string_value(json_array_get(v, 0));
    }
    for (int i = 0; i < A_COUNT; i++)
        if ((cls && strcmp(cls, archs[i].cls) == 0) || (!cls && type && strcmp(type, archs[i].type) == 0)) {
            if (type && strcmp(type, archs[i].type) != 0)
                return hf_fail(R, "model_type", "'%s' but architectures says %s ('%s')", type,
                               cls, archs[i].type);
            *a = (hf_arch)i;
            snprintf(R->info->arch, sizeof R->info->arch, "%s", archs[i].cls);
            return 0;
        }
    char known[1024] = "";
    for (int i = 0; i < A_COUNT; i++)
        hf_note(known, sizeof known, "%s", archs[i].cls);
    return hf_fail(R, NULL,
                   "architecture %s%s%s (model_type %s) is not one the reader builds (keys read: "
                   "architectures, model_type; known: %s)",
                   cls ? "'" : "", cls ? cls : "(none)", cls ? "'" : "", type ? type : "(none)",
                   known);
}

/* rope_theta and rope_scaling: the rope op takes an integer base and no
 * scaling; llama3 and yarn scaling only change the angles (noted), any
 * other type is refused. */
static int read_rope(hf_reader *R, hf_cfg *c, const char *theta_key, double def)
{
    double theta;
    if (hf_real(R, theta_key, def, &theta))
        return -1;
    if (theta < 2 || theta > 1e12 || theta != floor(theta))
        return hf_fail(R, theta_key, "%.17g: the rope op takes an integer base of at least 2",
                       theta);
    c->theta = (int64_t)theta;
    json_t *s = hf_get(R, "rope_scaling");
    if (!s)
        return 0;
    if (!json_is_object(s))
        return hf_fail(R, "rope_scaling", "expected an object or null");
    const char *t = json_string_value(json_object_get(s, "rope_type"));
    if (!t)
        t = json_string_value(json_object_get(s, "type"));
    if (!t)
        return hf_fail(R, "rope_scaling", "no rope_type or type");
    if (strcmp(t, "default") == 0)
        return 0;
    if (strcmp(t, "llama3") == 0 || strcmp(t, "yarn") == 0) {
        NOTE(R, "rope_scaling %s: rope turns at the unscaled base-%lld angles (the scaling changes "
                "only the angles of the slow dims; FLOP, memory and parameters exact)",
             t, (long long)c->theta);
        return 0;
    }
    return hf_fail(R, "rope_scaling", "type '%s' is not modelled (known: default, llama3, yarn)", t);
}

static int read_eps(hf_reader *R, const char *key, double def)
{
    double eps;
    if (hf_real(R, key, def, &eps))
        return -1;
    if (eps <= 0)
        return hf_fail(R, key, "%g: must be positive", eps);
    if (fabs(eps - 1e-5) > 1e-12)
        NOTE(R, "%s=%g: the norms use eps 1e-5 (a relative change of the normalised values of "
                "about |eps - 1e-5| / (2 mean square), under 1e-5 for unit activations)",
             key, eps);
    return 0;
}

/* An activation name to the MLP kind; gated: SwiGLU or GeGLU. */
static int read_act(hf_reader *R, hf_cfg *c, const char *key, const char *def, int gated)
{
    const char *a;
    if (hf_str(R, key, def, &a))
        return -1;
    int tanh_form = !strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh") ||
                    !strcmp(a, "gelu_fast");
    if (gated && !strcmp(a, "silu"))
        c->mlp = HF_MLP_SWIGLU;
    else if (gated && tanh_form)
        c->mlp = HF_MLP_GEGLU;
    else if (!gated && tanh_form)
        c->mlp = HF_MLP_GELU_TANH;
    else if (!gated && !strcmp(a, "gelu"))
        c->mlp = HF_MLP_GELU;
    else
        return hf_fail(R, key, "'%s' is not modelled here (known: %s)", a,
                       gated ? "silu, gelu_pytorch_tanh" : "gelu, gelu_new, gelu_fast");
    return 0;
}

static int read_dropout(hf_reader *R, const char *key)
{
    double p;
    if (hf_real(R, key, 0, &p))
        return -1;
    if (p < 0 || p >= 1)
        return hf_fail(R, key, "%g: a probability in [0, 1) is needed", p);
    if (p > 0)
        NOTE(R, "%s=%g: no dropout (it adds one elementwise pass; the function trained differs)",
             key, p);
    return 0;
}

/* seq (max_position_embeddings capped at 8192) and batch (about 4M
 * tokens), or their --set values. */
static int read_seq(hf_reader *R, hf_cfg *c, const char *key, int64_t def)
{
    if (hf_int(R, key, 0, def, 1, &c->max_pos))
        return -1;
    c->seq = hf_setting(R, "seq", c->max_pos < 8192 ? c->max_pos : 8192);
    if (c->seq < 1)
        return hf_fail(R, NULL, "--set seq=%lld: must be positive", (long long)c->seq);
    int64_t b = ((int64_t)1 << 22) / c->seq;
    c->batch = hf_setting(R, "batch", b < 1 ? 1 : b);
    if (c->batch < 1)
        return hf_fail(R, NULL, "--set batch=%lld: must be positive", (long long)c->batch);
    if (c->seq > ((int64_t)1 << 40) || c->batch > ((int64_t)1 << 40) / c->seq)
        return hf_fail(R, NULL, "seq=%lld x batch=%lld: too many tokens (at most 2^40)",
                       (long long)c->seq, (long long)c->batch);
    return 0;
}

/* The keys of a Llama-style decoder (Llama, Mistral, Qwen2/3, Gemma 2,
 * Phi-3, the MoEs, DeepSeek): sizes, heads, rope, norms, tying. */
static int read_decoder(hf_reader *R, hf_cfg *c, int tie_def, int64_t theta_def)
{
    c->k = (hf_keys){.vocab = "vocab_size", .hidden = "hidden_size", .layers = "num_hidden_layers",
                     .heads = "num_attention_heads", .kv_heads = "num_key_value_heads",
                     .ff = "intermediate_size", .head_dim = "head_dim"};
    if (hf_int(R, "vocab_size", 1, 0, 1, &c->vocab) || hf_int(R, "hidden_size", 1, 0, 1, &c->hidden) ||
        hf_int(R, "num_hidden_layers", 1, 0, 1, &c->layers) ||
        hf_int(R, "num_attention_heads", 1, 0, 1, &c->heads) ||
        hf_int(R, "num_key_value_heads", 0, c->heads, 1, &c->kv_heads) ||
        hf_int(R, "intermediate_size", 1, 0, 1, &c->ff))
        return -1;
    json_t *hd = json_object_get(R->root, "head_dim");
    c->head_dim_given = hd && !json_is_null(hd);
    if (c->head_dim_given) {
        if (hf_int(R, "head_dim", 1, 0, 1, &c->head_dim))
            return -1;
    } else {
        hf_get(R, "head_dim");
        if (c->hidden % c->heads)
            return hf_fail(R, "num_attention_heads", "%lld does not divide hidden_size %lld (no "
                           "head_dim given)", (long long)c->heads, (long long)c->hidden);
        c->head_dim = c->hidden / c->heads;
    }
    if (c->heads % c->kv_heads)
        return hf_fail(R, "num_key_value_heads", "%lld does not divide num_attention_heads %lld",
                       (long long)c->kv_heads, (long long)c->heads);
    if (c->head_dim % 2)
        return hf_fail(R, c->head_dim_given ? "head_dim" : "num_attention_heads",
                       "head_dim %lld is odd: rotary needs it even", (long long)c->head_dim);
    c->rotary_dim = c->head_dim;
    if (read_rope(R, c, "rope_theta", (double)theta_def) ||
        hf_bool(R, "tie_word_embeddings", tie_def, &c->tie) ||
        read_seq(R, c, "max_position_embeddings", 2048) || read_dropout(R, "attention_dropout"))
        return -1;
    return read_eps(R, "rms_norm_eps", 1e-6);
}

/* A sliding window (Mistral, Phi-3, Gemma 2): the softmax's window=, a key
 * sliding_window or more before its query masked (transformers' sliding
 * mask). The attention is priced dense, as the runtime computes it. */
static int read_window(hf_reader *R, hf_cfg *c, int applies)
{
    int64_t w;
    if (hf_int(R, "sliding_window", 0, 0, 0, &w))
        return -1;
    c->window = applies ? w : 0;
    if (c->window > 0 && c->window < c->seq)
        NOTE(R, "sliding_window=%lld < seq=%lld: the window's mask is applied, the attention "
                "priced dense (a windowed kernel would skip (seq - window) / seq of the far "
                "keys' work)", (long long)w, (long long)c->seq);
    return 0;
}

static int read_llama_like(hf_reader *R, hf_cfg *c, hf_arch a)
{
    int64_t theta = a == A_LLAMA || a == A_PHI3 || a == A_GEMMA2 ? 10000 : 1000000;
    if (a == A_MISTRAL || a == A_MIXTRAL)
        theta = a == A_MIXTRAL ? 1000000 : 10000;
    if (read_decoder(R, c, a == A_GEMMA2, theta))
        return -1;
    int ab = a == A_QWEN2 || a == A_QWEN2_MOE, mb = 0;
    if (a == A_LLAMA || a == A_QWEN3 || a == A_QWEN3_MOE || a == A_GEMMA2)
        if (hf_bool(R, "attention_bias", 0, &ab))
            return -1;
    int64_t tp;
    if (a == A_LLAMA && (hf_bool(R, "mlp_bias", 0, &mb) || hf_int(R, "pretraining_tp", 0, 1, 1, &tp)))
        return -1;
    c->qkv_bias = ab;
    c->o_bias = ab && a != A_QWEN2 && a != A_QWEN2_MOE;
    c->mlp_bias = mb;
    c->qk_norm = a == A_QWEN3 || a == A_QWEN3_MOE;
    if (read_act(R, c, "hidden_act", a == A_GEMMA2 ? "gelu_pytorch_tanh" : "silu", 1))
        return -1;
    if (a == A_QWEN2 || a == A_QWEN3 || a == A_QWEN2_MOE || a == A_QWEN3_MOE) {
        int use;
        if (hf_bool(R, "use_sliding_window", 0, &use) || read_window(R, c, 0))
            return -1;
        if (use)
            return hf_fail(R, "use_sliding_window", "true: Qwen's windowed layers (from "
                           "max_window_layers on) are not modelled");
    } else if (a != A_LLAMA && a != A_DEEPSEEK_V2 && a != A_DEEPSEEK_V3 && read_window(R, c, 1)) {
        return -1;
    }
    c->window_alt = a == A_GEMMA2;
    if (a == A_PHI3) {
        double prf;
        if (read_dropout(R, "resid_pdrop") || read_dropout(R, "embd_pdrop") ||
            hf_real(R, "partial_rotary_factor", 1.0, &prf))
            return -1;
        if (prf <= 0 || prf > 1)
            return hf_fail(R, "partial_rotary_factor", "%g: in (0, 1] needed", prf);
        c->rotary_dim = (int64_t)((double)c->head_dim * prf);
    }
    return 0;
}

/* A logit soft-cap c (y = c*tanh(x/c), the softcap op): absent is the
 * config class's default (Gemma2Config: 50 attention, 30 final), null is
 * none (0), else a positive whole number (the op takes an integer cap, as
 * rope an integer base); --set KEY=N replaces it, N = 0 drops it. */
static int read_cap(hf_reader *R, const char *key, double def, int64_t *out)
{
    double v = json_object_get(R->root, key) ? 0 : def; /* null: none */
    int given = hf_get(R, key) != NULL;
    if (given && hf_real(R, key, 0, &v))
        return -1;
    if (given && (v <= 0 || v != floor(v) || v > 1e9))
        return hf_fail(R, key, "%g: a soft-cap must be a whole number in [1, 1e9] (the softcap "
                       "op takes an integer cap)", v);
    *out = hf_setting(R, key, (int64_t)v);
    if (*out < 0 || *out > 1000000000)
        return hf_fail(R, key, "--set %lld: in [0, 1e9] needed (0: no cap)", (long long)*out);
    return 0;
}

static int read_gemma2(hf_reader *R, hf_cfg *c)
{
    if (read_llama_like(R, c, A_GEMMA2) || read_act(R, c, "hidden_activation", "gelu_pytorch_tanh", 1))
        return -1;
    c->sandwich = 1;
    double q;
    if (read_cap(R, "attn_logit_softcapping", 50, &c->attn_cap) ||
        read_cap(R, "final_logit_softcapping", 30, &c->final_cap) ||
        hf_real(R, "query_pre_attn_scalar", (double)c->head_dim, &q))
        return -1;
    NOTE(R, "Gemma 2's sqrt(hidden_size) embedding scale and query_pre_attn_scalar=%g are not "
            "applied (constant factors; no op, as every model here leaves out 1/sqrt(d); the "
            "attention soft-cap then caps the unscaled logits)", q);
    return 0;
}

/* Which of the layers are mixtures: Qwen's decoder_sparse_step and
 * mlp_only_layers, DeepSeek's first_k_dense_replace and moe_layer_freq. */
static int read_qwen_sparse(hf_reader *R, hf_cfg *c)
{
    int64_t step;
    if (hf_int(R, "decoder_sparse_step", 0, 1, 1, &step))
        return -1;
    json_t *only = hf_get(R, "mlp_only_layers");
    if (only && !json_is_array(only))
        return hf_fail(R, "mlp_only_layers", "expected a list of layer indices");
    c->layer_freq = step;
    for (int64_t i = 0; i < c->layers && i < HF_MAX_LAYERS; i++)
        c->sparse[i] = (i + 1) % step == 0;
    size_t k;
    json_t *e;
    json_array_foreach(only, k, e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return hf_fail(R, "mlp_only_layers", "item %zu: expected a layer index", k);
        if (json_integer_value(e) < c->layers && json_integer_value(e) < HF_MAX_LAYERS)
            c->sparse[json_integer_value(e)] = 0;
    }
    return 0;
}

static int read_moe_qwen(hf_reader *R, hf_cfg *c, hf_arch a)
{
    if (read_llama_like(R, c, a))
        return -1;
    int norm;
    c->k.experts = "num_experts", c->k.topk = "num_experts_per_tok", c->k.moe_ff = "moe_intermediate_size";
    if (hf_int(R, "num_experts", 1, 0, 1, &c->experts) ||
        hf_int(R, "num_experts_per_tok", 1, 0, 1, &c->topk) ||
        hf_int(R, "moe_intermediate_size", 1, 0, 1, &c->moe_ff) ||
        hf_bool(R, "norm_topk_prob", 0, &norm) || read_qwen_sparse(R, c))
        return -1;
    if (a == A_QWEN2_MOE) {
        if (hf_int(R, "shared_expert_intermediate_size", 0, 0, 0, &c->shared_ff))
            return -1;
        c->shared = c->shared_ff > 0 ? HF_SHARED_GATED : HF_SHARED_NONE;
        c->k.shared = "shared_expert_intermediate_size";
    }
    if (!norm)
        NOTE(R, "norm_topk_prob=false: the chosen experts' weights are renormalised over the "
                "top %lld (moe_gate); the gate's values differ, FLOP, memory and parameters do "
                "not", (long long)c->topk);
    return 0;
}

static int read_mixtral(hf_reader *R, hf_cfg *c)
{
    if (read_llama_like(R, c, A_MIXTRAL) ||
        hf_int(R, "num_local_experts", 1, 0, 1, &c->experts) ||
        hf_int(R, "num_experts_per_tok", 1, 0, 1, &c->topk))
        return -1;
    double jitter, coef;
    int logits;
    if (hf_real(R, "router_jitter_noise", 0, &jitter) || hf_real(R, "router_aux_loss_coef", 0.001, &coef) ||
        hf_bool(R, "output_router_logits", 0, &logits))
        return -1;
    if (jitter > 0)
        NOTE(R, "router_jitter_noise=%g: no noise on the router's logits", jitter);
    if (logits && coef > 0)
        NOTE(R, "router_aux_loss_coef=%g: no load-balancing loss in the trained function", coef);
    c->moe_ff = c->ff;
    c->k.experts = "num_local_experts", c->k.topk = "num_experts_per_tok", c->k.moe_ff = "intermediate_size";
    for (int64_t i = 0; i < c->layers && i < HF_MAX_LAYERS; i++)
        c->sparse[i] = 1;
    return 0;
}

static int read_deepseek(hf_reader *R, hf_cfg *c, hf_arch a)
{
    if (read_llama_like(R, c, a))
        return -1;
    int64_t freq, shared, nextn;
    int norm, bias;
    c->k.experts = "n_routed_experts", c->k.topk = "num_experts_per_tok", c->k.moe_ff = "moe_intermediate_size";
    if (hf_int(R, "n_routed_experts", 1, 0, 1, &c->experts) ||
        hf_int(R, "num_experts_per_tok", 1, 0, 1, &c->topk) ||
        hf_int(R, "moe_intermediate_size", 1, 0, 1, &c->moe_ff) ||
        hf_int(R, "n_shared_experts", 0, 0, 0, &shared) ||
        hf_int(R, "first_k_dense_replace", 0, 0, 0, &c->first_dense) ||
        hf_int(R, "moe_layer_freq", 0, 1, 1, &freq) ||
        hf_int(R, "q_lora_rank", 0, 0, 0, &c->q_lora) ||
        hf_int(R, "kv_lora_rank", 1, 0, 1, &c->kv_lora) ||
        hf_int(R, "qk_nope_head_dim", 1, 0, 1, &c->qk_nope) ||
        hf_int(R, "qk_rope_head_dim", 1, 0, 2, &c->qk_rope) ||
        hf_int(R, "v_head_dim", 1, 0, 1, &c->v_dim) ||
        hf_int(R, "num_nextn_predict_layers", 0, 0, 0, &nextn) ||
        hf_bool(R, "norm_topk_prob", 0, &norm) || hf_bool(R, "attention_bias", 0, &bias))
        return -1;
    if (bias)
        return hf_fail(R, "attention_bias", "true: biases of MLA's projections are not modelled");
    if (c->qk_rope % 2)
        return hf_fail(R, "qk_rope_head_dim", "%lld is odd: rotary needs it even", (long long)c->qk_rope);
    const char *score, *method;
    double scale;
    if (hf_str(R, "scoring_func", "softmax", &score) || hf_str(R, "topk_method", "greedy", &method) ||
        hf_real(R, "routed_scaling_factor", 1.0, &scale))
        return -1;
    hf_get(R, "n_group"), hf_get(R, "topk_group");
    if (strcmp(score, "softmax") || !norm || strcmp(method, "greedy") || scale != 1.0)
        NOTE(R, "router (scoring_func %s, topk_method %s, norm_topk_prob %s, routed_scaling_factor "
                "%g): moe_gate's softmax top-%lld, renormalised; the gate's values differ, FLOP, "
                "memory and parameters do not", score, method, norm ? "true" : "false", scale,
             (long long)c->topk);
    if (nextn > 0)
        NOTE(R, "num_nextn_predict_layers=%lld: the next-token-prediction layers are not built "
                "(transformers does not build them either)", (long long)nextn);
    c->mla = 1;
    c->layer_freq = freq;
    c->shared = shared > 0 ? HF_SHARED_PLAIN : HF_SHARED_NONE;
    c->shared_ff = shared * c->moe_ff;
    c->shared_n = shared;
    c->k.shared = "n_shared_experts";
    for (int64_t i = 0; i < c->layers && i < HF_MAX_LAYERS; i++)
        c->sparse[i] = i >= c->first_dense && i % freq == 0;
    return 0;
}

static int read_neox(hf_reader *R, hf_cfg *c)
{
    c->k = (hf_keys){.vocab = "vocab_size", .hidden = "hidden_size", .layers = "num_hidden_layers",
                     .heads = "num_attention_heads", .ff = "intermediate_size"};
    double pct;
    if (hf_int(R, "vocab_size", 1, 0, 1, &c->vocab) || hf_int(R, "hidden_size", 1, 0, 1, &c->hidden) ||
        hf_int(R, "num_hidden_layers", 1, 0, 1, &c->layers) ||
        hf_int(R, "num_attention_heads", 1, 0, 1, &c->heads) ||
        hf_int(R, "intermediate_size", 1, 0, 1, &c->ff) || hf_real(R, "rotary_pct", 0.25, &pct) ||
        read_rope(R, c, "rotary_emb_base", 10000) || read_seq(R, c, "max_position_embeddings", 2048) ||
        hf_bool(R, "use_parallel_residual", 1, &c->parallel_residual) ||
        hf_bool(R, "tie_word_embeddings", 0, &c->tie) || hf_bool(R, "attention_bias", 1, &c->qkv_bias) ||
        read_act(R, c, "hidden_act", "gelu", 0) || read_eps(R, "layer_norm_eps", 1e-5) ||
        read_dropout(R, "attention_dropout") || read_dropout(R, "hidden_dropout"))
        return -1;
    if (c->hidden % c->heads)
        return hf_fail(R, "num_attention_heads", "%lld does not divide hidden_size %lld",
                       (long long)c->heads, (long long)c->hidden);
    c->kv_heads = c->heads;
    c->head_dim = c->hidden / c->heads;
    if (pct <= 0 || pct > 1)
        return hf_fail(R, "rotary_pct", "%g: in (0, 1] needed", pct);
    c->rotary_dim = (int64_t)((double)c->head_dim * pct);
    c->o_bias = c->qkv_bias;
    c->mlp_bias = 1;
    c->norm = HF_NORM_LAYER;
    return 0;
}

static int read_gpt2(hf_reader *R, hf_cfg *c)
{
    c->k = (hf_keys){.vocab = "vocab_size", .hidden = "n_embd", .layers = "n_layer",
                     .heads = "n_head", .ff = "n_inner"};
    if (hf_int(R, "vocab_size", 1, 0, 1, &c->vocab) || hf_int(R, "n_embd", 1, 0, 1, &c->hidden) ||
        hf_int(R, "n_layer", 1, 0, 1, &c->layers) || hf_int(R, "n_head", 1, 0, 1, &c->heads) ||
        read_seq(R, c, "n_positions", 1024) || hf_bool(R, "tie_word_embeddings", 1, &c->tie) ||
        read_act(R, c, "activation_function", "gelu_new", 0) ||
        read_eps(R, "layer_norm_epsilon", 1e-5) || read_dropout(R, "resid_pdrop") ||
        read_dropout(R, "embd_pdrop") || read_dropout(R, "attn_pdrop"))
        return -1;
    if (hf_int(R, "n_inner", 0, 4 * c->hidden, 1, &c->ff))
        return -1;
    if (c->hidden % c->heads)
        return hf_fail(R, "n_head", "%lld does not divide n_embd %lld", (long long)c->heads,
                       (long long)c->hidden);
    if (c->seq > c->max_pos)
        return hf_fail(R, "n_positions", "%lld learned positions, fewer than seq=%lld",
                       (long long)c->max_pos, (long long)c->seq);
    c->kv_heads = c->heads;
    c->head_dim = c->hidden / c->heads;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->norm = HF_NORM_LAYER;
    c->theta = 0;
    return 0;
}

int hf_read_cfg(hf_reader *R, hf_cfg *c)
{
    memset(c, 0, sizeof *c);
    hf_arch a;
    if (find_arch(R, &a))
        return -1;
    int rc;
    switch (a) {
    case A_GPT2: rc = read_gpt2(R, c); break;
    case A_NEOX: rc = read_neox(R, c); break;
    case A_GEMMA2: rc = read_gemma2(R, c); break;
    case A_MIXTRAL: rc = read_mixtral(R, c); break;
    case A_QWEN2_MOE:
    case A_QWEN3_MOE: rc = read_moe_qwen(R, c, a); break;
    case A_DEEPSEEK_V2:
    case A_DEEPSEEK_V3: rc = read_deepseek(R, c, a); break;
    default: rc = read_llama_like(R, c, a); break;
    }
    if (rc)
        return -1;
    if (c->layers > HF_MAX_LAYERS)
        return hf_fail(R, c->k.layers, "%lld: at most %d layers", (long long)c->layers, HF_MAX_LAYERS);
    if (c->rotary_dim % 2 || (c->theta && c->rotary_dim < 2))
        return hf_fail(R, a == A_NEOX ? "rotary_pct" : "partial_rotary_factor",
                       "gives %lld rotary dims: a positive even number is needed",
                       (long long)c->rotary_dim);
    if (c->experts && c->topk > c->experts)
        return hf_fail(R, "num_experts_per_tok", "%lld is more than the %lld experts",
                       (long long)c->topk, (long long)c->experts);
    c->dense_ff = c->ff;
    if (hf_get(R, "quantization_config"))
        NOTE(R, "quantization_config: the memory model counts every value in fp32");
    return 0;
}

/* Why --algo megatron's per-layer model (search/megatron.c: SwiGLU, RMSNorm,
 * full rotary, GQA, any head_dim, QK norms, biases on Q, K and V only, dense
 * causal attention, a head tied or not, every layer's MLP the same mixture
 * of experts of their own width or none) cannot price config c of
 * architecture cls as it is, or "" when it can: Llama, Mistral, Mixtral,
 * Qwen2, Qwen3 and Qwen3-MoE configs without the features below. */
/* 1 when a mixture of experts leaves some layer dense (Qwen's mlp_only_layers) */
static int dense_among_experts(const hf_cfg *c)
{
    for (int64_t i = 0; c->experts && i < c->layers && i < HF_MAX_LAYERS; i++)
        if (!c->sparse[i])
            return 1;
    return 0;
}

void hf_grid_why(const hf_cfg *c, const char *cls, char *why, size_t cap)
{
    why[0] = '\0';
    static const int ok[] = {A_LLAMA, A_MISTRAL, A_MIXTRAL, A_QWEN2, A_QWEN3, A_QWEN2_MOE,
                             A_QWEN3_MOE};
    int known = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        known |= !strcmp(cls, archs[ok[i]].cls);
    if (!known) {
        snprintf(why, cap, "the grid's per-layer model prices Llama, Mistral, Mixtral and "
                 "Qwen 2, 3 (dense and MoE) configs only");
        return;
    }
    if (c->window > 0 && c->window < c->seq)
        snprintf(why, cap, "sliding_window=%lld < seq=%lld (the grid prices dense causal "
                 "attention)", (long long)c->window, (long long)c->seq);
    else if (c->o_bias || c->mlp_bias)
        snprintf(why, cap, "attention_bias / mlp_bias (the grid prices biases on Q, K and V "
                 "only)");
    else if (!c->theta || c->rotary_dim != c->head_dim)
        snprintf(why, cap, "rotary on %lld of %lld head dims (the grid prices full rotary)",
                 (long long)c->rotary_dim, (long long)c->head_dim);
    else if (c->norm != HF_NORM_RMS || c->mlp != HF_MLP_SWIGLU || c->parallel_residual ||
             c->sandwich || c->attn_cap || c->final_cap || c->mla ||
             c->shared != HF_SHARED_NONE || c->first_dense || c->layer_freq > 1 ||
             dense_among_experts(c))
        snprintf(why, cap, "a layer the grid does not price (norms, MLP, caps, shared "
                 "experts, dense layers among the experts' as first_k_dense_replace or "
                 "mlp_only_layers make them)");
}

