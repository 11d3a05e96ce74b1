#!/usr/bin/python3
"""tests/data/onnx/make.py: exports the small ONNX files the importer tests use.

Run once with Debian's python3-torch and python3-onnx (apt-get install -y
python3-torch python3-onnx python3-torchvision) from the repository root:

    /usr/bin/python3 tests/data/onnx/make.py [--torchvision DIR]

The .onnx files it writes are committed beside it; CI does not need torch.
Every model is tiny (a few KB graph-only, tens of KB with weights) and
exported with a symbolic batch dimension (dynamic_axes), so the importer's
`batch` parameter is exercised. `*_w.onnx` files carry their weights as
initializers; the others are graph-only (export_params=False: the weights
become graph inputs without data, as torch writes them).

--torchvision DIR also exports every classification model of
torchvision.models (torchvision.models.list_models), graph-only, into DIR
(not committed): the list of which import is in models/README.md.

Files:
  cnn.onnx, cnn_w.onnx          conv/bn/relu/maxpool/conv/bn/relu/global avg
                                pool/flatten/gemm (opset 13)
  transformer.onnx              a 2-layer encoder: embedding (Gather), the
                                decomposed layer norm of opset 13
                                (ReduceMean/Sub/Pow/Sqrt/Div), attention with
                                MatMul/Softmax, Gelu as the Erf pattern
  transformer17_w.onnx          the same at opset 17 (LayerNormalization),
                                with weights
  einsum.onnx                   attention written with torch.einsum (Einsum)
  lstm.onnx, lstm_w.onnx        an LSTM language model: Gather embedding,
                                LSTM, Linear to the vocabulary, LogSoftmax
  resnet18.onnx                 torchvision ResNet-18, graph-only, 64x64 input
  resnext50_32x4d.onnx          torchvision ResNeXt-50 32x4d (grouped 3x3
                                convs, group=32), graph-only, 64x64 input
  mobilenet_v2.onnx             torchvision MobileNet-V2 (depthwise convs,
                                Clip as ReLU6), graph-only, 64x64 input,
                                opset 17
  unsupported.onnx              a depthwise conv (it imports since groups
                                are in the model format), ConvTranspose and
                                an unsupported op (ArgMax): every
                                unsupported node must be listed in one error
  ops.onnx                      written by make_ops.py (onnx.helper, no torch):
                                Pad, ceil_mode, Split, Concat of 18, Slice

The static-batch twins of resnet18, resnext50_32x4d and mobilenet_v2 are
make_vision.py's *_static.onnx.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


def export(model, args, name, opset=13, weights=False, inputs=("x",), outdir=HERE,
           dyn_seq=False):
    model.eval()
    path = os.path.join(outdir, name)
    dyn = {n: {0: "batch"} for n in inputs}
    if dyn_seq:
        for n in inputs:
            dyn[n][1] = "seq"
    dyn["y"] = {0: "batch"}
    torch.onnx.export(model, args, path, opset_version=opset, input_names=list(inputs),
                      output_names=["y"], dynamic_axes=dyn, export_params=weights,
                      do_constant_folding=True)
    print(f"{path}: {os.path.getsize(path)} bytes")


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, 1)
        x = torch.flatten(x, 1)
        return self.fc(x)


class Block(nn.Module):
    """Post-norm Transformer encoder layer written out by hand."""

    def __init__(self, embed=32, heads=4, ff=64, use_einsum=False):
        super().__init__()
        self.h, self.dk = heads, embed // heads
        self.q = nn.Linear(embed, embed)
        self.k = nn.Linear(embed, embed)
        self.v = nn.Linear(embed, embed)
        self.o = nn.Linear(embed, embed)
        self.ln1 = nn.LayerNorm(embed)
        self.ff1 = nn.Linear(embed, ff)
        self.ff2 = nn.Linear(ff, embed)
        self.ln2 = nn.LayerNorm(embed)
        self.use_einsum = use_einsum

    def forward(self, x):
        b, s, e = x.shape
        q = self.q(x).view(b, s, self.h, self.dk).transpose(1, 2)
        k = self.k(x).view(b, s, self.h, self.dk).transpose(1, 2)
        v = self.v(x).view(b, s, self.h, self.dk).transpose(1, 2)
        if self.use_einsum:
            a = torch.einsum("bhsd,bhtd->bhst", q, k) / (self.dk ** 0.5)
            a = a.softmax(-1)
            o = torch.einsum("bhst,bhtd->bhsd", a, v)
        else:
            a = (q @ k.transpose(-2, -1)) / (self.dk ** 0.5)
            a = a.softmax(-1)
            o = a @ v
        o = o.transpose(1, 2).reshape(b, s, e)
        x = self.ln1(x + self.o(o))
        x = self.ln2(x + self.ff2(F.gelu(self.ff1(x))))
        return x


class Transformer(nn.Module):
    def __init__(self, vocab=100, embed=32, layers=2, use_einsum=False):
        super().__init__()
        self.emb = nn.Embedding(vocab, embed)
        self.layers = nn.ModuleList([Block(embed, use_einsum=use_einsum) for _ in range(layers)])
        self.out = nn.Linear(embed, vocab)

    def forward(self, x):
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)


class LSTMLM(nn.Module):
    def __init__(self, vocab=100, units=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, units)
        self.rnn = nn.LSTM(units, units, batch_first=True)
        self.out = nn.Linear(units, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return F.log_softmax(self.out(h), dim=-1)


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 4, 3, padding=1, groups=4)  # depthwise
        self.c2 = nn.Conv2d(4, 8, 1)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)

    def forward(self, x):
        x = self.up(F.relu(self.c2(self.c1(x))))
        return torch.flatten(x, 1).softmax(-1).argmax(-1, keepdim=True).float()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchvision", metavar="DIR")
    a = ap.parse_args()
    img = torch.randn(2, 3, 16, 16)
    ids = torch.randint(0, 100, (2, 8))
    export(CNN(), (img,), "cnn.onnx")
    export(CNN(), (img,), "cnn_w.onnx", weights=True)
    export(Transformer(), (ids,), "transformer.onnx")
    export(Transformer(), (ids,), "transformer17_w.onnx", opset=17, weights=True)
    export(Transformer(layers=1, use_einsum=True), (ids,), "einsum.onnx")
    export(LSTMLM(), (ids,), "lstm.onnx")
    export(LSTMLM(), (ids,), "lstm_w.onnx", weights=True)
    export(Unsupported(), (torch.randn(2, 4, 8, 8),), "unsupported.onnx")
    import torchvision
    export(torchvision.models.resnet18(), (torch.randn(2, 3, 64, 64),), "resnet18.onnx")
    export(torchvision.models.resnext50_32x4d(), (torch.randn(2, 3, 64, 64),),
           "resnext50_32x4d.onnx")
    export(torchvision.models.mobilenet_v2(), (torch.randn(2, 3, 64, 64),), "mobilenet_v2.onnx",
           opset=17)
    if a.torchvision:
        os.makedirs(a.torchvision, exist_ok=True)
        for name in torchvision.models.list_models(module=torchvision.models):
            try:
                kw = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
                m = getattr(torchvision.models, name)(**kw)
                size = 299 if name == "inception_v3" else 224
                export(m, (torch.randn(1, 3, size, size),), name + ".onnx", outdir=a.torchvision)
            except Exception as e:  # noqa: BLE001 (report and go on)
                print(f"{name}: export failed: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
