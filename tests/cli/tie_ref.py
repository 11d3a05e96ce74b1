#!/usr/bin/env python3
"""An independent numpy reference of a tied output head: three SGD steps of
tests/data/models/tied-tiny.model at one rank, with ONE table T (vocab,
embed) that the embedding reads by rows and the head reads as T^T:

    x = T[tokens]; logits = x @ T.T; loss = mean(logsumexp - picked)
    dlogits = (softmax - onehot) / rows
    dT = scatter-add over tokens of dlogits @ T   (the embedding's rows)
       + dlogits^T @ x                            (the head, transposed)

The weights and batches are the runtime's (hf_ref.py's generators: step s
draws with seed 1 + s). The losses of steps 2 and 3 hold the summed
gradient: a head whose gradient is dropped or counted twice moves them by
about 1e-2. The first loss is the forward alone.

usage: tie_ref.py EXPORT.json LR LOSS1 LOSS2 LOSS3
exits 1 when a loss differs from the reference by more than 1e-5 relative.
"""
import json
import sys

import numpy as np

from hf_ref import W, tag, u01


def losses(export, params, lr, steps):
    B, S = params["batch"], params["seq"]
    T = W(export)("x0.table")
    V = T.shape[0]
    out = []
    for s in range(steps):
        seed = 1 + s
        tok = np.floor(u01(seed, tag("tokens"), B * S) * V).astype(int)
        lab = np.floor(u01(seed, tag("loss") ^ 0x1ABE1, B * S) * V).astype(int)
        x = T[tok]
        logits = x @ T.T
        mx = logits.max(-1, keepdims=True)
        e = np.exp(logits - mx)
        lse = np.log(e.sum(-1)) + mx[:, 0]
        out.append(float(np.mean(lse - logits[np.arange(B * S), lab])))
        d = e / e.sum(-1, keepdims=True)
        d[np.arange(B * S), lab] -= 1.0
        d /= B * S
        dT = d.T @ x
        np.add.at(dT, tok, d @ T)
        T = T - lr * dT
    return out


def main():
    export = json.load(open(sys.argv[1]))
    lr = float(sys.argv[2])
    got = [float(v) for v in sys.argv[3:]]
    params = {k: int(v) for k, v in (kv.split("=") for kv in export["params"].split(","))}
    assert "wout" not in export["weights"], "the tied head is a weight of its own"
    ref = losses(export, params, lr, len(got))
    bad = [i for i in range(len(got)) if abs(ref[i] - got[i]) > 1e-5 * max(1.0, abs(got[i]))]
    for i in range(len(got)):
        print("tie_ref: step %d: reference %.7f, shardbench %.7f%s" %
              (i + 1, ref[i], got[i], "  DIFFERENT" if i in bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
