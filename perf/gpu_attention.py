#!/usr/bin/python3
"""perf/gpu_attention.py: the measuring side of perf/gpu_attention.

Times cuDNN's fused attention, the kernel Transformer Engine runs on
Hopper, through PyTorch's scaled_dot_product_attention held to the cuDNN
backend (SDPBackend.CUDNN_ATTENTION: no other backend may stand in for
it), at the points perf/gpu_attention asks for. Each point: `batch`
sequences of `seq` tokens, `heads` heads of `dim`, bf16, with or without
the causal mask; the forward alone (with grad on: the training kernel,
which writes the softmax statistics the backward reads), then the
backward alone (of one forward's graph, kept and run again, as
FlashAttention's own benchmarks time it); calls in batches of about 50 ms
between a pair of CUDA events, the median of the batches' per-call times
over `seconds` for each; `--warmup` seconds of the first point first, so
that the clock has settled.

Protocol (stdout, one JSON object a line, flushed):
  {"ready": true, "device": ..., "torch": ..., "cudnn": ...}
  {"seq": S, "batch": B, "heads": H, "dim": D, "causal": 0|1,
   "fwd_s": median, "fwd_min": ..., "fwd_max": ..., "bwd_s": ...,
   "bwd_min": ..., "bwd_max": ..., "batches": n}            a point
  {"error": "..."}   then exit 1 on a failure; exit 77 where nothing can be
                     measured here (no PyTorch, no CUDA device, no cuDNN
                     attention in this PyTorch or on this GPU)
The protocol is written to a copy of stdout; stdout itself is sent to
stderr, so that what a library prints cannot break a line.
Run by hand: gpu_attention.py --points 512x32c,8192x2c --seconds 0.5
"""
import argparse
import json
import os
import statistics
import sys


# the protocol goes to a copy of stdout; stdout itself goes to stderr, so that
# nothing a library prints there can break a line of the protocol
PROTO = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)


def say(obj):
    print(json.dumps(obj), file=PROTO, flush=True)


def stop(msg, code=1):
    say({"error": msg})
    sys.exit(code)


def first_line(e):
    return (str(e).splitlines() or [type(e).__name__])[0]


def parse_points(text):
    """'SEQxBATCH[c]' items joined by commas: c marks the causal mask."""
    pts = []
    for item in text.split(","):
        causal = item.endswith("c")
        body = item[:-1] if causal else item
        seq, sep, batch = body.partition("x")
        if not sep or not seq.isdigit() or not batch.isdigit() or int(seq) < 1 or int(batch) < 1:
            stop(f"--points: '{item}' is not SEQxBATCH or SEQxBATCHc")
        pts.append((int(seq), int(batch), causal))
    return pts


def timed_batches(torch, op, seconds):
    """Per-call seconds of op() in ~50 ms batches over `seconds`, each batch's calls
    between one pair of CUDA events: (median, min, max, batches)."""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]

    def batch(reps):
        ev[0].record()
        for _ in range(reps):
            op()
        ev[1].record()
        ev[1].synchronize()
        return ev[0].elapsed_time(ev[1]) / 1e3

    batch(1)  # warm-up: the engine's plan and its workspace
    reps = max(1, int(0.05 / max(batch(1), 1e-6)))
    per_call, spent = [], 0.0
    while spent < seconds or len(per_call) < 3:
        t = batch(reps)
        per_call.append(t / reps)
        spent += t
    return statistics.median(per_call), min(per_call), max(per_call), len(per_call)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", required=True, help="SEQxBATCH[c],... (c: causal)")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of the first point first")
    a = ap.parse_args()
    if a.heads < 1 or a.dim < 1 or not a.seconds > 0 or a.warmup < 0:
        stop("--heads, --dim and --seconds must be positive, --warmup not negative")
    points = parse_points(a.points)
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention as sdpa
    except Exception as e:  # ImportError, or a library that does not load (OSError)
        stop(f"no PyTorch with torch.nn.attention here ({type(e).__name__}: {e})", 77)
    if not torch.cuda.is_available():
        stop("no GPU: torch.cuda.is_available() is False", 77)
    if not hasattr(SDPBackend, "CUDNN_ATTENTION") or not torch.backends.cudnn.is_available():
        stop(f"PyTorch {torch.__version__} has no cuDNN attention here", 77)
    dev, dt = "cuda", torch.bfloat16

    def cudnn_only():  # a fresh context each time (a generator-based context manager)
        return sdpa_kernel([SDPBackend.CUDNN_ATTENTION])

    try:  # a small call first: a GPU or build without cuDNN's kernel has nothing to measure
        x = torch.zeros((1, 1, 128, a.dim), device=dev, dtype=dt)
        with cudnn_only():
            sdpa(x, x, x, is_causal=True)
        torch.cuda.synchronize()
    except RuntimeError as e:
        stop(f"cuDNN's attention does not run here: {first_line(e)}", 77)
    say({"ready": True, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
         "cudnn": torch.backends.cudnn.version()})
    gen = torch.Generator(device=dev).manual_seed(1)
    warm = a.warmup
    for seq, batch, causal in points:
        shape = (batch, a.heads, seq, a.dim)
        try:
            q, k, v = (torch.randn(shape, device=dev, dtype=dt, generator=gen).requires_grad_()
                       for _ in range(3))
            with cudnn_only():
                o = sdpa(q, k, v, is_causal=causal)  # the graph the backward runs again
            do = torch.empty_like(o).normal_(generator=gen)  # o's own strides: no copy in the backward

            def fwd():  # with grad on: the training kernel, which writes the softmax stats
                sdpa(q, k, v, is_causal=causal)

            def bwd():  # dQ, dK, dV of the kept graph, nothing accumulated
                torch.autograd.grad(o, (q, k, v), do, retain_graph=True)

            with cudnn_only():
                if warm > 0:  # the clock settles before the first point is timed
                    timed_batches(torch, lambda: (fwd(), bwd()), warm)
                    warm = 0
                f = timed_batches(torch, fwd, a.seconds)
                b = timed_batches(torch, bwd, a.seconds)
        except RuntimeError as e:  # the cuDNN backend refused the shape, or out of memory
            stop(f"seq {seq} batch {batch}{' causal' if causal else ''}: {first_line(e)}")
        say({"seq": seq, "batch": batch, "heads": a.heads, "dim": a.dim, "causal": int(causal),
             "fwd_s": f[0], "fwd_min": f[1], "fwd_max": f[2], "bwd_s": b[0], "bwd_min": b[1],
             "bwd_max": b[2], "batches": min(f[3], b[3])})
        del q, k, v, do, o
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
