#!/usr/bin/python3
"""tests/data/onnx/make_dyn.py: ONNX exports with dynamic axes and torch's
seq-first nn.Transformer, for the importer's tests (tests/unit/test_onnx_dyn.c,
tests/cli/onnx_cli.sh).

Run with Debian's python3-torch 1.13 and python3-onnx (apt-get install -y
python3-torch python3-onnx) from the repository root:

    /usr/bin/python3 tests/data/onnx/make_dyn.py [--outdir DIR]

Every file is graph-only (export_params=False) and opset 14. The .onnx
files are committed beside it; CI does not need torch. It prints the
parameter counts and shapes the tests check (torch's own numbers).

Files:
  gqa_dyn14.onnx       make_llm.py's 2-layer Llama-style decoder (4 heads,
                       2 kv heads) with the kv heads repeated by
                       repeat_interleave(2, dim=1), as Hugging Face's
                       repeat_kv is often written, exported with a dynamic
                       batch axis ("batch"): torch writes the repeat of k
                       (whose head count its shape inference lost after the
                       rotary Add) as SplitToSequence / SequenceEmpty / Loop
                       / ConcatFromSequence, that of v as Split / Expand /
                       Reshape / Concat, and cuts the rotary tables and the
                       causal mask with Slice at Shape-derived bounds
  gqa_dynseq14.onnx    the same with the sequence axis dynamic too ("seq"):
                       the tables are cut at the dynamic length, which the
                       import needs as a number (--dim seq=16)
  gqa_uneven14.onnx    1 layer of it repeating the 2 kv heads 1 and 3 times
                       (repeat_interleave(tensor([1, 3]), dim=1)): not one
                       count, so both forms are refused, naming why
  nn_transformer14.onnx  torch.nn.Transformer(d_model=16, nhead=2, 1 encoder
                       and 1 decoder layer, dim_feedforward=32) and a Linear
                       to 10 classes (the logits the import trains), static
                       (seq=16, batch=16, 16) inputs (seq-first, the default
                       batch_first=False): its attention flattens (seq,
                       batch) to one Gemm axis; seq = batch = d_model, so
                       every reshape's sizes coincide (seq * batch = batch *
                       d_model, ...: the sizes that gave "inner dims 16 and
                       16 differ")
  nn_transformer_dyn14.onnx  the same with the batch axis (dim 1) dynamic:
                       the cross-attention's packed in_proj_weight and bias
                       are cut with Slice ([:E], [E:]) at Shape-derived
                       bounds, the (seq, batch) rows flattened as before
  nn_transformer_dynlen14.onnx  the same with the source and target lengths
                       dynamic too ("S", "T"): two sequence params
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_llm  # noqa: E402  (the Llama-style decoder of the other exports)


class RepeatAttention(make_llm.LlamaAttention):
    """make_llm.LlamaAttention with the kv heads repeated by repeat_interleave
    (by `counts`, a tensor of one count per kv head, when given)."""
    counts = None

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        v = self.v(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        cos, sin = self.cos[:s], self.sin[:s]
        q = q * cos + make_llm.rotate_half(q) * sin
        k = k * cos + make_llm.rotate_half(k) * sin
        rep = self.h // self.kvh if self.counts is None else torch.tensor(self.counts)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        a = (q @ k.transpose(2, 3)) / math.sqrt(self.hd)
        a = torch.where(self.causal[:s, :s], a, torch.tensor(float("-inf")))
        a = a.softmax(-1)
        o = (a @ v).transpose(1, 2).reshape(b, s, self.h * self.hd)
        return self.o(o)


def gqa_model(layers=2, counts=None):
    torch.manual_seed(0)
    m = make_llm.Llama(layers=layers)  # vocab 100, embed 64, 4 heads, 2 kv heads, ff 128, seq 16
    for layer in m.layers:
        old = layer.attn
        layer.attn = RepeatAttention(64, 4, 2, 16)
        layer.attn.counts = counts
        layer.attn.load_state_dict(old.state_dict())
    return m.eval()


def export(model, args, path, inputs, dynamic):
    torch.onnx.export(model, args, path, opset_version=14, input_names=list(inputs), output_names=["y"],
                      export_params=False, do_constant_folding=True, dynamic_axes=dynamic)
    n = sum(p.numel() for p in model.parameters())
    print(f"{path}: {os.path.getsize(path)} bytes, {n} parameters, "
          f"{make_llm.kept_params(model)} kept by the model file")


class Seq2Seq(nn.Module):
    """torch.nn.Transformer and a Linear to 10 classes per position: logits,
    so that the import has a loss and trains."""

    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                dim_feedforward=32)
        self.head = nn.Linear(16, 10)

    def forward(self, src, tgt):
        return self.head(self.t(src, tgt))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", default=HERE)
    a = ap.parse_args()
    m = gqa_model()
    ids = torch.randint(0, 100, (2, 16))
    with torch.no_grad():
        print("gqa: logits", tuple(m(ids).shape))
    export(m, (ids,), os.path.join(a.outdir, "gqa_dyn14.onnx"), ["x"], {"x": {0: "batch"}, "y": {0: "batch"}})
    export(m, (ids,), os.path.join(a.outdir, "gqa_dynseq14.onnx"), ["x"],
           {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
    export(gqa_model(layers=1, counts=[1, 3]), (ids,), os.path.join(a.outdir, "gqa_uneven14.onnx"), ["x"],
           {"x": {0: "batch"}, "y": {0: "batch"}})
    torch.manual_seed(0)
    t = Seq2Seq().eval()
    src, tgt = torch.randn(16, 16, 16), torch.randn(16, 16, 16)
    with torch.no_grad():
        print("nn.Transformer: output", tuple(t(src, tgt).shape))
    # nn.Transformer's norms are LayerNorms: every parameter but the
    # Linear/attention biases is kept (weights, norm scales and shifts)
    kept = sum(p.numel() for name, p in t.named_parameters()
               if not (name.endswith("bias") and "norm" not in name))
    export(t, (src, tgt), os.path.join(a.outdir, "nn_transformer14.onnx"), ["src", "tgt"], None)
    export(t, (src, tgt), os.path.join(a.outdir, "nn_transformer_dyn14.onnx"), ["src", "tgt"],
           {"src": {1: "batch"}, "tgt": {1: "batch"}, "y": {1: "batch"}})
    export(t, (src, tgt), os.path.join(a.outdir, "nn_transformer_dynlen14.onnx"), ["src", "tgt"],
           {"src": {0: "S", 1: "batch"}, "tgt": {0: "T", 1: "batch"}, "y": {0: "T", 1: "batch"}})
    print(f"nn_transformer14.onnx: {kept} kept (weights and norm scales/shifts, no Linear biases)")


if __name__ == "__main__":
    main()
