#!/usr/bin/python3
"""tests/data/onnx/make_llm.py: graph-only ONNX exports of today's transformer
families, for the importer's tests (tests/unit/test_onnx.c).

Run with Debian's python3-torch 1.13, python3-onnx and python3-torchvision
(apt-get install -y python3-torch python3-onnx python3-torchvision) from the
repository root:

    /usr/bin/python3 tests/data/onnx/make_llm.py [--outdir DIR]

Every file is graph-only (export_params=False: weights become graph inputs
without data). Most have a static batch of 2 (no dynamic_axes): the importer
still makes `batch` a param; the `*_dyn.onnx` twins are the same modules
exported with a symbolic batch (dynamic_axes on x and y), as users export. The .onnx files are committed beside it; CI
does not need torch. The parameter counts the tests check are printed here.

Files:
  mha17.onnx                  a 1-layer encoder with nn.MultiheadAttention
                              (no mask) and a tanh-GELU MLP, opset 17: imports
                              with the model ops of any build
  llama13.onnx, llama17.onnx  a 2-layer Llama-style decoder (opset 13, 17):
                              RMSNorm as x * rsqrt(mean(x^2) + eps) * w,
                              rotary embedding with rotate_half
                              (Slice/Neg/Concat/Mul) and cos/sin tables,
                              grouped-query attention (4 heads, 2 kv heads,
                              expand+reshape of the kv heads), a causal mask
                              (Where on a constant lower triangle), SwiGLU MLP
  llama_theta.onnx            1 layer of it with Llama 3's theta 500000 (opset 17)
  llama_badrope.onnx          1 layer with tables that are not rotary (the last
                              position off by one): the rotary pattern is refused
  masks.onnx                  onnx.helper, opset 17: a causal mask made with
                              ConstantOfShape/Trilu/Cast/Where before Softmax,
                              a Reshape shape through Range and Gather
  gpt2_13.onnx, gpt2_17.onnx  a 2-layer GPT-2-style decoder:
                              nn.MultiheadAttention with a causal attn_mask,
                              LayerNorm, GELU (Erf), learned positions
  vit13.onnx, vit17.onnx      torchvision vit_b_16 at image_size 32 (4
                              patches + class token: Concat, Expand)
  llama13_dyn.onnx, llama17_dyn.onnx, gpt2_13_dyn.onnx, gpt2_17_dyn.onnx,
  mha17_dyn.onnx              the same with a dynamic batch axis; vit13 and
                              vit17's twins are make_vision.py's vit_mini*
                              (the same torchvision code reduced to 2 layers
                              of width 64: vit_b_16 with a dynamic batch is
                              341 KB at opset 13)
"""
import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


def kept_params(model):
    """The parameters a model file keeps: all but the biases of Linear and
    attention projections and the learned positions (the importer fuses
    them into their producer as pointwise ops); norm scales and shifts
    stay (norm's gamma and beta, rmsnorm's gamma)."""
    n = 0
    for name, p in model.named_parameters():
        norm = any(k in name for k in ("ln", "norm", ".n1.", ".n2."))
        if name.endswith("bias") and not norm:
            continue
        if name in ("wpe", "encoder.pos_embedding"):
            continue
        n += p.numel()
    return n


def export(model, args, path, opset, inputs=("x",), dynamic=False):
    model.eval()
    dyn = {n: {0: "batch"} for n in list(inputs) + ["y"]} if dynamic else None
    torch.onnx.export(model, args, path, opset_version=opset, input_names=list(inputs),
                      output_names=["y"], export_params=False, do_constant_folding=True,
                      dynamic_axes=dyn)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"{path}: {os.path.getsize(path)} bytes, {nparams} parameters, "
          f"{kept_params(model)} kept by the model file")


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, embed, heads, kv_heads, seq, theta=10000.0, shifted=False):
        super().__init__()
        self.h, self.kvh, self.hd = heads, kv_heads, embed // heads
        self.q = nn.Linear(embed, heads * self.hd, bias=False)
        self.k = nn.Linear(embed, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(embed, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(heads * self.hd, embed, bias=False)
        inv = 1.0 / (theta ** (torch.arange(0, self.hd, 2).float() / self.hd))
        f = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        if shifted:  # not a rotary table: the last position off by one
            emb[-1] += inv.repeat(2)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer("causal", torch.ones(seq, seq, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        v = self.v(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        cos, sin = self.cos[:s], self.sin[:s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kvh
        k = k[:, :, None].expand(b, self.kvh, rep, s, self.hd).reshape(b, self.h, s, self.hd)
        v = v[:, :, None].expand(b, self.kvh, rep, s, self.hd).reshape(b, self.h, s, self.hd)
        a = (q @ k.transpose(2, 3)) / math.sqrt(self.hd)
        a = torch.where(self.causal[:s, :s], a, torch.tensor(float("-inf")))
        a = a.softmax(-1)
        o = (a @ v).transpose(1, 2).reshape(b, s, self.h * self.hd)
        return self.o(o)


class LlamaMLP(nn.Module):
    def __init__(self, embed, ff):
        super().__init__()
        self.gate = nn.Linear(embed, ff, bias=False)
        self.up = nn.Linear(embed, ff, bias=False)
        self.down = nn.Linear(ff, embed, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LlamaLayer(nn.Module):
    def __init__(self, embed, heads, kv_heads, ff, seq, theta=10000.0, shifted=False):
        super().__init__()
        self.n1 = RMSNorm(embed)
        self.attn = LlamaAttention(embed, heads, kv_heads, seq, theta, shifted)
        self.n2 = RMSNorm(embed)
        self.mlp = LlamaMLP(embed, ff)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class Llama(nn.Module):
    def __init__(self, vocab=100, embed=64, heads=4, kv_heads=2, ff=128, seq=16, layers=2, theta=10000.0,
                 shifted=False):
        super().__init__()
        self.emb = nn.Embedding(vocab, embed)
        self.layers = nn.ModuleList([LlamaLayer(embed, heads, kv_heads, ff, seq, theta, shifted)
                                     for _ in range(layers)])
        self.norm = RMSNorm(embed)
        self.out = nn.Linear(embed, vocab, bias=False)

    def forward(self, x):
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(self.norm(h))


class GPT2Layer(nn.Module):
    def __init__(self, embed, heads, seq):
        super().__init__()
        self.ln1 = nn.LayerNorm(embed)
        self.attn = nn.MultiheadAttention(embed, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(embed)
        self.fc = nn.Linear(embed, 4 * embed)
        self.proj = nn.Linear(4 * embed, embed)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1), persistent=False)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.mask, need_weights=False)[0]
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class GPT2(nn.Module):
    def __init__(self, vocab=100, embed=64, heads=4, seq=16, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, embed)
        self.wpe = nn.Parameter(torch.zeros(1, seq, embed))
        self.layers = nn.ModuleList([GPT2Layer(embed, heads, seq) for _ in range(layers)])
        self.ln = nn.LayerNorm(embed)
        self.head = nn.Linear(embed, vocab, bias=False)

    def forward(self, x):
        h = self.wte(x) + self.wpe
        for layer in self.layers:
            h = layer(h)
        return self.head(self.ln(h))


class MHANet(nn.Module):
    """A 1-layer pre-norm encoder with nn.MultiheadAttention (no mask) and
    a tanh-GELU MLP: what imports without the newer model ops."""

    def __init__(self, vocab=100, embed=32, heads=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, embed)
        self.ln1 = nn.LayerNorm(embed)
        self.attn = nn.MultiheadAttention(embed, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(embed)
        self.fc = nn.Linear(embed, 2 * embed)
        self.proj = nn.Linear(2 * embed, embed)
        self.head = nn.Linear(embed, vocab)

    def forward(self, x):
        h = self.emb(x)
        a = self.ln1(h)
        h = h + self.attn(a, a, a, need_weights=False)[0]
        h = h + self.proj(F.gelu(self.fc(self.ln2(h)), approximate="tanh"))
        return self.head(h)


def masks(path):
    """A graph written with onnx.helper (opset 17): the causal mask built
    the way exporters without constant folding write it (ConstantOfShape of
    ones, Trilu, Cast to bool, Where(mask, scores, -inf) before Softmax) and
    a Reshape whose shape comes through Range and Gather."""
    import onnx
    from onnx import TensorProto, helper
    c = lambda name, vals: helper.make_node(  # noqa: E731
        "Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [len(vals)], vals))
    nodes = [
        c("mshape", [8, 8]),
        helper.make_node("ConstantOfShape", ["mshape"], ["ones"],
                         value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])),
        helper.make_node("Trilu", ["ones"], ["tril"], upper=0),
        helper.make_node("Cast", ["tril"], ["keep"], to=TensorProto.BOOL),
        helper.make_node("Constant", [], ["ninf"],
                         value=helper.make_tensor("ninf", TensorProto.FLOAT, [], [float("-inf")])),
        helper.make_node("Where", ["keep", "x", "ninf"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
        helper.make_node("Shape", ["p"], ["shp"]),
        c("s0", [0]), c("s2", [2]),
        helper.make_node("Slice", ["shp", "s0", "s2"], ["lead"]),
        c("r0", [2]), c("r1", [20]), c("r2", [2]),
        helper.make_node("Squeeze", ["r0"], ["rs"]), helper.make_node("Squeeze", ["r1"], ["rl"]),
        helper.make_node("Squeeze", ["r2"], ["rd"]),
        helper.make_node("Range", ["rs", "rl", "rd"], ["rng"]),
        c("i7", [3]),
        helper.make_node("Gather", ["rng", "i7"], ["eight"]),  # Range(2, 20, 2)[3] = 8
        helper.make_node("Mul", ["eight", "eight"], ["sixtyfour"]),
        helper.make_node("Concat", ["lead", "sixtyfour"], ["tshape"], axis=0),
        helper.make_node("Reshape", ["p", "tshape"], ["y"]),
    ]
    g = helper.make_graph(nodes, "masks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 64])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_llm.py")
    onnx.checker.check_model(m)
    onnx.save(m, path)
    print(f"{path}: {os.path.getsize(path)} bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", default=HERE)
    a = ap.parse_args()
    ids = torch.randint(0, 100, (2, 16))
    export(MHANet(), (torch.randint(0, 100, (2, 8)),), os.path.join(a.outdir, "mha17.onnx"), 17)
    masks(os.path.join(a.outdir, "masks.onnx"))
    export(Llama(layers=1, theta=500000.0), (ids,), os.path.join(a.outdir, "llama_theta.onnx"), 17)
    export(Llama(layers=1, shifted=True), (ids,), os.path.join(a.outdir, "llama_badrope.onnx"), 17)
    for opset in (13, 17):
        for dyn in (False, True):
            sfx = "_dyn" if dyn else ""
            torch.manual_seed(0)
            export(Llama(), (ids,), os.path.join(a.outdir, f"llama{opset}{sfx}.onnx"), opset, dynamic=dyn)
            torch.manual_seed(0)
            export(GPT2(), (ids,), os.path.join(a.outdir, f"gpt2_{opset}{sfx}.onnx"), opset, dynamic=dyn)
    export(MHANet(), (torch.randint(0, 100, (2, 8)),), os.path.join(a.outdir, "mha17_dyn.onnx"), 17,
           dynamic=True)
    import torchvision
    for opset in (13, 17):
        vit = torchvision.models.vit_b_16(image_size=32)
        export(vit, (torch.randn(2, 3, 32, 32),), os.path.join(a.outdir, f"vit{opset}.onnx"), opset)


if __name__ == "__main__":
    main()
