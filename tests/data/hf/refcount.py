#!/usr/bin/env python3
"""Reference parameter counts of the configs in this folder, as Hugging Face
transformers counts them (sum(p.numel() for p in model.parameters()), tied
weights once, buffers not counted), written independently of shardbench's
reader: each architecture's modules listed as its transformers modeling file
builds them (nn.Linear with or without bias, nn.Embedding, the norms' weights
and biases). DeepSeek-V3's next-token-prediction layer is not built by
transformers and not counted; its router's e_score_correction_bias is a
buffer. Active: the parameters one token uses (MoE: k of the E routed
experts of each sparse layer; embeddings, attention, router, shared experts
and norms in full).

Run: python3 tests/data/hf/refcount.py > tests/data/hf/expected.tsv
"""
import json
import os
import sys


def lin(i, o, bias=False):
    return i * o + (o if bias else 0)


def attn_gqa(c, hd, qkv_bias, o_bias):
    h, nh = c["hidden_size"], c["num_attention_heads"]
    kv = c.get("num_key_value_heads") or nh
    return (lin(h, nh * hd, qkv_bias) + 2 * lin(h, kv * hd, qkv_bias) +
            lin(nh * hd, h, o_bias))


def gated_mlp(h, ff, bias=False):
    return 2 * lin(h, ff, bias) + lin(ff, h, bias)


def llama_like(c, arch):
    h, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    hd = c.get("head_dim") or h // c["num_attention_heads"]
    tie_default = arch == "Gemma2ForCausalLM"
    tie = c.get("tie_word_embeddings", tie_default)
    ab = c.get("attention_bias", False)
    qkv_bias = ab or arch in ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM")
    o_bias = ab and arch not in ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM")
    attn = attn_gqa(c, hd, qkv_bias, o_bias)
    if arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
        attn += 2 * hd  # q_norm, k_norm over head_dim
    norms = (4 if arch == "Gemma2ForCausalLM" else 2) * h
    dense = gated_mlp(h, c["intermediate_size"], c.get("mlp_bias", False))
    total = active = 0
    for i in range(L):
        layer, act = attn + norms, attn + norms
        E = moe_experts(c, arch, i)
        if E:
            k, mff = c["num_experts_per_tok"], moe_ff(c, arch)
            router = lin(h, E)
            experts = E * gated_mlp(h, mff)
            shared = shared_mlp(c, arch, h)
            layer += router + experts + shared
            act += router + k * gated_mlp(h, mff) + shared
        else:
            layer += dense
            act += dense
        total += layer
        active += act
    emb = V * h
    head = 0 if tie else V * h
    return total + emb + head + h, active + emb + head + h


def moe_experts(c, arch, i):
    if arch == "MixtralForCausalLM":
        return c["num_local_experts"]
    if arch in ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM"):
        step = c.get("decoder_sparse_step", 1)
        if i in (c.get("mlp_only_layers") or []) or (i + 1) % step:
            return 0
        return c["num_experts"]
    if arch in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"):
        if i >= c.get("first_k_dense_replace", 0) and i % c.get("moe_layer_freq", 1) == 0:
            return c["n_routed_experts"]
    return 0


def moe_ff(c, arch):
    return c["intermediate_size"] if arch == "MixtralForCausalLM" else c["moe_intermediate_size"]


def shared_mlp(c, arch, h):
    if arch == "Qwen2MoeForCausalLM" and c.get("shared_expert_intermediate_size", 0):
        # shared_expert (gated MLP) + shared_expert_gate Linear(h, 1)
        return gated_mlp(h, c["shared_expert_intermediate_size"]) + lin(h, 1)
    if arch.startswith("Deepseek") and c.get("n_shared_experts"):
        return gated_mlp(h, c["n_shared_experts"] * c["moe_intermediate_size"])
    return 0


def deepseek(c, arch):
    """MLA replaces the attention of llama_like."""
    h, nh = c["hidden_size"], c["num_attention_heads"]
    nope, rope, vd = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    qr, kvr = c.get("q_lora_rank"), c["kv_lora_rank"]
    if qr:
        q = lin(h, qr) + qr + lin(qr, nh * (nope + rope))  # q_a_proj, q_a_layernorm, q_b_proj
    else:
        q = lin(h, nh * (nope + rope))
    kv = lin(h, kvr + rope) + kvr + lin(kvr, nh * (nope + vd))
    mla = q + kv + lin(nh * vd, h)
    c2 = dict(c, attention_bias=False)
    # llama_like with GQA attention swapped for MLA: subtract one, add the other
    hd = h // nh
    gqa = attn_gqa(c2, hd, False, False)
    t, a = llama_like(c2, arch)
    L = c["num_hidden_layers"]
    return t + L * (mla - gqa), a + L * (mla - gqa)


def gpt2(c):
    h, L, V, P = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]
    ff = c.get("n_inner") or 4 * h
    layer = 2 * 2 * h + lin(h, 3 * h, True) + lin(h, h, True) + lin(h, ff, True) + lin(ff, h, True)
    tie = c.get("tie_word_embeddings", True)
    t = V * h + P * h + L * layer + 2 * h + (0 if tie else V * h)
    return t, t


def neox(c):
    h, L, V, ff = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"]
    b = c.get("attention_bias", True)
    layer = 2 * 2 * h + lin(h, 3 * h, b) + lin(h, h, b) + lin(h, ff, True) + lin(ff, h, True)
    tie = c.get("tie_word_embeddings", False)
    t = V * h + L * layer + 2 * h + (0 if tie else V * h)
    return t, t


def count(c):
    arch = c["architectures"][0]
    if arch == "GPT2LMHeadModel":
        return gpt2(c)
    if arch == "GPTNeoXForCausalLM":
        return neox(c)
    if arch.startswith("Deepseek"):
        return deepseek(c, arch)
    return llama_like(c, arch)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    print("# name\tparameter_count\tactive_parameter_count (refcount.py)")
    for name in sorted(os.listdir(here)):
        path = os.path.join(here, name, "config.json")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            t, a = count(json.load(f))
        print(f"{name}\t{t}\t{a}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
