#!/usr/bin/python3
"""tests/data/onnx/make_vision.py: static and dynamic-batch twins of the
torchvision exports, for the importer's tests (tests/unit/test_onnx_dyn.c,
tests/cli/onnx_vision_cli.sh).

Run with Debian's python3-torch 1.13, python3-onnx and python3-torchvision
0.14 (apt-get install -y python3-torch python3-onnx python3-torchvision)
from the repository root:

    /usr/bin/python3 tests/data/onnx/make_vision.py [--outdir DIR]

Every file is graph-only (export_params=False). A `_dyn` file is the same
module as its static twin exported with dynamic_axes {0: "batch"} on x and
y; the static one has torch's default, a batch of 2 written as a number.
The .onnx files are committed beside it; CI does not need torch. It prints
the parameter counts the tests check (torch's own numbers).

Files:
  vit_mini13.onnx, vit_mini17.onnx, vit_mini13_dyn.onnx, vit_mini17_dyn.onnx
        torchvision's VisionTransformer (the vit_b_16 code of vit13.onnx)
        reduced so that it trains in the tests: image 32, patch 16 (4
        patches + the class token), 2 layers, 4 heads, width 64, MLP 128,
        10 classes; opsets 13 and 17. With the batch dynamic, torch writes
        the class token's expand as Shape/Gather/Unsqueeze/Concat feeding an
        Expand, and the patches' flatten as a Reshape whose shape is a
        Concat of the batch read from Shape and constants
  resnet18_static.onnx, resnext50_32x4d_static.onnx, mobilenet_v2_static.onnx
        the static twins of make.py's resnet18.onnx, resnext50_32x4d.onnx
        (opset 13) and mobilenet_v2.onnx (opset 17), which make.py exports
        with a dynamic batch: 64 x 64 input, 1000 classes
  resnet18_c10.onnx, resnet18_c10_static.onnx
        resnet18 with 10 classes at 32 x 32, dynamic and static (opset 13):
        small enough to train in the tests (11.2 M weights)
  droplast_dyn.onnx
        a conv and a Linear after x[: x.shape[0] - 1] with a dynamic batch
        (opset 13): the Slice's end is batch - 1, which is not a product of
        the params: refused, naming the Sub
"""
import argparse
import os

import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))


def kept_params(model):
    """The parameters a model file keeps. ViT: all but the biases of the
    conv, Linears and attention projections and the learned positions (the
    importer fuses them into their producer as pointwise ops); the norms'
    scales and shifts stay. CNNs: the conv and Linear weights (torch's
    eval export folds each batch norm into its conv's weight and bias)."""
    n = 0
    for name, p in model.named_parameters():
        if isinstance(model, torchvision.models.VisionTransformer):
            if (name.endswith("bias") and ".ln" not in name) or name == "encoder.pos_embedding":
                continue
        elif p.dim() < 2:
            continue
        n += p.numel()
    return n


def export(model, size, path, opset, dynamic):
    model.eval()
    dyn = {"x": {0: "batch"}, "y": {0: "batch"}} if dynamic else None
    torch.onnx.export(model, (torch.randn(2, 3, size, size),), path, opset_version=opset,
                      input_names=["x"], output_names=["y"], export_params=False,
                      do_constant_folding=True, dynamic_axes=dyn)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"{path}: {os.path.getsize(path)} bytes, {nparams} parameters, "
          f"{kept_params(model)} kept by the model file")


def vit_mini():
    torch.manual_seed(0)
    return torchvision.models.VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=4,
                                                hidden_dim=64, mlp_dim=128, num_classes=10)


class DropLast(nn.Module):
    """All samples but the last: shape arithmetic the importer refuses."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = x[: x.shape[0] - 1]
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--outdir", default=HERE)
    a = ap.parse_args()
    out = lambda name: os.path.join(a.outdir, name)  # noqa: E731
    for opset in (13, 17):
        for dyn in (False, True):
            export(vit_mini(), 32, out(f"vit_mini{opset}{'_dyn' if dyn else ''}.onnx"), opset, dyn)
    tv = torchvision.models
    export(tv.resnet18(), 64, out("resnet18_static.onnx"), 13, False)
    export(tv.resnext50_32x4d(), 64, out("resnext50_32x4d_static.onnx"), 13, False)
    export(tv.mobilenet_v2(), 64, out("mobilenet_v2_static.onnx"), 17, False)
    for dyn in (False, True):
        torch.manual_seed(0)
        export(tv.resnet18(num_classes=10), 32, out(f"resnet18_c10{'' if dyn else '_static'}.onnx"), 13, dyn)
    torch.manual_seed(0)
    export(DropLast(), 8, out("droplast_dyn.onnx"), 13, True)


if __name__ == "__main__":
    main()
