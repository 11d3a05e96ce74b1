#!/usr/bin/python3
"""perf/step_torch.py: the PyTorch peer of perf/step.

Builds, in PyTorch (CPU, fp32), the same network as a shardbench model
file, at the sizes perf/step passes, and trains it one step at a time on
request, so that perf/step can time shardbench and PyTorch side by side in
one invocation. Not a general model-file interpreter: it knows the three
networks perf/step compares (models/alexnet.model, models/transformer.model,
models/llama3-8b.model).

What is the same as shardbench's step (runtime/executor/executor.c):
- the graph: every op of the model file, with the same shapes, no biases
  (shardbench's conv and dense have none), fused relu where the file says
  pw > 0, layer norm with scale and shift (eps 1e-5), unscaled attention
  logits (the files have no 1/sqrt(dk)), post-norm residuals (transformer);
  for llama3-8b: RMSNorm with a scale (eps 1e-5), rotary embedding on q and
  k (rotate-half, theta from the file), grouped-query heads, a causal mask,
  SwiGLU, pre-norm residuals;
- a fresh synthetic batch and fresh labels every step, drawn inside the step;
- the loss: mean softmax cross-entropy over all rows;
- the update: plain SGD (no momentum, no weight decay), lr 0.01, gradients
  dropped after each step (zero_grad(set_to_none=True)).
What differs: the random numbers (torch's generator, not shardbench's hash),
and the kernels (PyTorch's own: oneDNN convolutions and pooling, BLAS GEMMs).

Protocol (one line each way, stdout flushed):
  peer:  {"ready": true, ...facts...}          once the model is built
  host:  step                                   -> peer: "step SECONDS LOSS"
  host:  quit                                   -> peer exits 0
  peer:  {"error": "..."}                       then exits 1, on any failure
Run by hand: step_torch.py --model alexnet --set batch=16 --threads 2 --steps 3
"""
import argparse
import json
import os
import sys
import time


def fail(msg):
    print(json.dumps({"error": msg}), flush=True)
    sys.exit(1)


try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001 - any import failure is reported the same way
    fail("cannot import torch with %s: %s (Debian: apt-get install python3-torch)"
         % (sys.executable, e))


def blas_library():
    """The BLAS shared objects mapped into this process (after torch loaded)."""
    seen = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                path = parts[5]
                base = os.path.basename(path)
                if ("blas" in base or "mkl" in base or "dnnl" in base) and path not in seen:
                    seen.append(path)
    except OSError:
        pass
    return [os.path.realpath(p) for p in seen]


# ---- AlexNet (models/alexnet.model) ---------------------------------------

class AlexNet(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        wd = p["width_div"]
        c1, c2, c3, c4, c5 = 96 // wd, 256 // wd, 384 // wd, 384 // wd, 256 // wd
        units = 4096 // wd
        self.conv1 = torch.nn.Conv2d(3, c1, 11, stride=4, bias=False)
        self.conv2 = torch.nn.Conv2d(c1, c2, 5, padding=2, bias=False)
        self.conv3 = torch.nn.Conv2d(c2, c3, 3, padding=1, bias=False)
        self.conv4 = torch.nn.Conv2d(c3, c4, 3, padding=1, bias=False)
        self.conv5 = torch.nn.Conv2d(c4, c5, 3, padding=1, bias=False)
        side = p["image"]
        side = (side - 11) // 4 + 1      # conv1
        side = (side - 3) // 2 + 1       # pool1
        side = (side - 3) // 2 + 1       # pool2 (conv2..5 keep the size)
        side = (side - 3) // 2 + 1       # pool5
        self.fc6 = torch.nn.Linear(c5 * side * side, units, bias=False)
        self.fc7 = torch.nn.Linear(units, units, bias=False)
        self.fc8 = torch.nn.Linear(units, p["classes"], bias=False)
        self.p = p

    def batch(self):
        p = self.p
        x = torch.rand(p["batch"], 3, p["image"], p["image"]) * 2 - 1
        y = torch.randint(0, p["classes"], (p["batch"],))
        return x, y

    def forward(self, x, y):
        x = F.max_pool2d(F.relu(self.conv1(x)), 3, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 3, 2)
        x = F.relu(self.conv3(x))
        x = F.relu(self.conv4(x))
        x = F.max_pool2d(F.relu(self.conv5(x)), 3, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc6(x))
        x = F.relu(self.fc7(x))
        return F.cross_entropy(self.fc8(x), y)


# ---- Transformer (models/transformer.model) --------------------------------

def weight(*shape, scale):
    return torch.nn.Parameter((torch.rand(*shape) * 2 - 1) * scale)


class Attention(torch.nn.Module):
    """self_attention / cross_attention + attend of the model file."""

    def __init__(self, p, cross):
        super().__init__()
        h, e, d = p["heads"], p["embed"], p["dk"]
        self.cross = cross
        self.wqkv = weight(3, h, e, d, scale=e ** -0.5)   # stack heads embed dk
        self.wo = weight(h, e, d, scale=(h * d) ** -0.5)  # heads embed dk
        self.norm = torch.nn.LayerNorm(e, eps=1e-5)

    def forward(self, x, mem=None):
        if self.cross:
            st = torch.stack((x, mem, mem), 0)
            qkv = torch.einsum("tbse,thed->tbhsd", st, self.wqkv)
        else:
            qkv = torch.einsum("bse,thed->tbhsd", x, self.wqkv)
        q, k, v = torch.unbind(qkv, 0)
        logits = torch.einsum("bhsd,bhmd->bhsm", q, k)
        w = torch.softmax(logits, dim=-1)
        s = torch.einsum("bhsm,bhmd->bhsd", w, v)
        o = torch.einsum("bhsd,hed->bse", s, self.wo)
        return self.norm(x + o)


class FeedForward(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        e, f = p["embed"], p["ff"]
        self.w1 = weight(e, f, scale=e ** -0.5)
        self.w2 = weight(f, e, scale=f ** -0.5)
        self.norm = torch.nn.LayerNorm(e, eps=1e-5)

    def forward(self, x):
        h = F.relu(torch.einsum("bse,ef->bsf", x, self.w1))
        o = torch.einsum("bsf,fe->bse", h, self.w2)
        return self.norm(x + o)


class Transformer(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        e, vocab = p["embed"], p["vocab"]
        self.src_embed = torch.nn.Parameter(torch.rand(vocab, e) * 2 - 1)
        self.tgt_embed = torch.nn.Parameter(torch.rand(vocab, e) * 2 - 1)
        self.enc = torch.nn.ModuleList(
            torch.nn.ModuleList((Attention(p, False), FeedForward(p)))
            for _ in range(p["layers"]))
        self.dec = torch.nn.ModuleList(
            torch.nn.ModuleList((Attention(p, False), Attention(p, True), FeedForward(p)))
            for _ in range(p["layers"]))
        self.wout = weight(e, vocab, scale=e ** -0.5)
        self.p = p

    def batch(self):
        p = self.p
        b, s, e, vocab = p["batch"], p["seq"], p["embed"], p["vocab"]
        src = torch.randint(0, vocab, (b, s))
        tgt = torch.randint(0, vocab, (b, s))
        pos = torch.rand(b, s, e) * 2 - 1
        y = torch.randint(0, vocab, (b * s,))
        return (src, tgt, pos), y

    def forward(self, inputs, y):
        src, tgt, pos = inputs
        x = F.embedding(src, self.src_embed) + pos
        for att, ff in self.enc:
            x = ff(att(x))
        mem = x
        t = F.embedding(tgt, self.tgt_embed) + pos
        for att, cross, ff in self.dec:
            t = ff(cross(att(t), mem))
        logits = torch.einsum("bse,ev->bsv", t, self.wout)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y)


# ---- Llama (models/llama3-8b.model) ---------------------------------------

def rmsnorm(x, gamma):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * gamma


def rope(x, theta):
    """rotate-half rotary embedding over the last dim; positions along dim -2"""
    seq, d = x.shape[-2], x.shape[-1]
    inv = theta ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2.0 / d)
    ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang).float(), torch.sin(ang).float()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)


class LlamaLayer(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        e, g, r, d, f = p["embed"], p["kv_heads"], p["rep"], p["dk"], p["ff"]
        self.wq = weight(g, r, e, d, scale=e ** -0.5)
        self.wk = weight(g, e, d, scale=e ** -0.5)
        self.wv = weight(g, e, d, scale=e ** -0.5)
        self.wo = weight(g, r, d, e, scale=(g * r * d) ** -0.5)
        self.wg = weight(e, f, scale=e ** -0.5)
        self.wu = weight(e, f, scale=e ** -0.5)
        self.wd = weight(f, e, scale=f ** -0.5)
        self.n1 = torch.nn.Parameter(torch.ones(e))
        self.n2 = torch.nn.Parameter(torch.ones(e))
        self.theta = float(p["theta"])
        s = p["seq"]
        self.register_buffer("mask", torch.triu(torch.full((s, s), float("-inf")), 1))

    def forward(self, x):
        h = rmsnorm(x, self.n1)
        q = rope(torch.einsum("bse,gred->bgrsd", h, self.wq), self.theta)
        k = rope(torch.einsum("bse,ged->bgsd", h, self.wk), self.theta)
        v = torch.einsum("bse,ged->bgsd", h, self.wv)
        logits = torch.einsum("bgrsd,bgmd->bgrsm", q, k) + self.mask
        s = torch.einsum("bgrsm,bgmd->bgrsd", torch.softmax(logits, dim=-1), v)
        x = x + torch.einsum("bgrsd,grde->bse", s, self.wo)
        h = rmsnorm(x, self.n2)
        m = F.silu(torch.einsum("bse,ef->bsf", h, self.wg)) * torch.einsum("bse,ef->bsf", h, self.wu)
        return x + torch.einsum("bsf,fe->bse", m, self.wd)


class Llama(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        e, vocab = p["embed"], p["vocab"]
        self.embed = torch.nn.Parameter(torch.rand(vocab, e) * 2 - 1)
        self.layers = torch.nn.ModuleList(LlamaLayer(p) for _ in range(p["layers"]))
        self.norm = torch.nn.Parameter(torch.ones(e))
        self.wout = weight(e, vocab, scale=e ** -0.5)
        self.p = p

    def batch(self):
        p = self.p
        b, s, vocab = p["batch"], p["seq"], p["vocab"]
        return torch.randint(0, vocab, (b, s)), torch.randint(0, vocab, (b * s,))

    def forward(self, tokens, y):
        x = F.embedding(tokens, self.embed)
        for layer in self.layers:
            x = layer(x)
        logits = torch.einsum("bse,ev->bsv", rmsnorm(x, self.norm), self.wout)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y)


MODELS = {
    "alexnet": (AlexNet, {"batch": 128, "classes": 1024, "image": 227, "width_div": 1}),
    "transformer": (Transformer, {"batch": 64, "vocab": 50000, "seq": 256, "embed": 512,
                                  "heads": 8, "dk": 64, "ff": 2048, "layers": 6}),
    "llama3-8b": (Llama, {"batch": 512, "seq": 8192, "vocab": 128256, "embed": 4096,
                          "heads": 32, "kv_heads": 8, "rep": 4, "dk": 128, "ff": 14336,
                          "layers": 32, "theta": 500000}),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a model parameter (as the model file's `param`)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0,
                    help="run this many steps by itself and print them (no protocol)")
    a = ap.parse_args()
    cls, params = MODELS[a.model]
    params = dict(params)
    for s in a.set:
        name, _, value = s.partition("=")
        if name not in params:
            fail("model %s has no parameter '%s'" % (a.model, name))
        try:
            params[name] = int(value)
        except ValueError:
            fail("--set %s: '%s' is not an integer" % (name, value))

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    try:
        model = cls(params)
    except RuntimeError as e:
        fail("building %s: %s" % (a.model, e))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)

    def step():
        t0 = time.perf_counter()
        x, y = model.batch()
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
        return time.perf_counter() - t0, value

    facts = {
        "ready": True,
        "model": a.model,
        "params": params,
        "weights": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "blas_libraries": blas_library(),
        "python": sys.executable,
    }
    if a.steps:
        print(json.dumps(facts))
        for i in range(a.steps):
            t, loss = step()
            print("step %d  loss %.6f  %.4f s" % (i, loss, t), flush=True)
        return
    print(json.dumps(facts), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "step":
            try:
                t, loss = step()
            except RuntimeError as e:
                fail("step: %s" % e)
            print("step %.9f %.9g" % (t, loss), flush=True)
        elif cmd == "quit":
            return
        else:
            fail("unknown command '%s'" % cmd)


if __name__ == "__main__":
    main()
