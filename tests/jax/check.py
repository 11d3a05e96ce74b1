"""Runs exported JAX programs and checks them (tests/jax/check.sh).

usage: check.py RUN_LOSSES.json TABLE.tsv MODULE.py...

Each MODULE is `shardbench export S --to jax --format py`. For each: the
model of its DATA (refmodel.py) trains 3 SGD steps sharded as exported
(one jitted step, weights placed with the exported shardings, every op
boundary constrained), and
  (a) the compiled step's shardings, read back from the executable,
      equal the exported ones for every weight (in and out) and every op
      output (is_equivalent_to), all on the one device mesh, and each of
      an op's q devices holds the box shardbench's rank of that number
      holds (runtime/executor/plan.c);
  (b) its losses equal the same model unsharded (one device) and
      shardbench's own `run` (RUN_LOSSES.json: {"model params": [losses]})
      within float tolerance;
  (c) the collectives XLA inserted (compiled HLO text) are counted per op
      and written beside the cost model's predicted communication to
      TABLE.tsv.
Exit 1 on any mismatch, naming it.
"""
import importlib.util
import json
import os
import re
import sys

import numpy as np
import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refmodel  # noqa: E402

STEPS = 3
RTOL = 2e-5
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
DTYPE_BYTES = {"f32": 4, "s32": 4, "f64": 8, "s64": 8, "pred": 1, "bf16": 2, "f16": 2, "u32": 4}


def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def shape_bytes(text):
    """Bytes of an HLO result shape: f32[8,16]{1,0} or a tuple of them."""
    n = 0
    for dt, dims in re.findall(r"\b([a-z]+[0-9]*)\[([0-9,]*)\]", text):
        if dt in DTYPE_BYTES:
            n += DTYPE_BYTES[dt] * int(np.prod([int(d) for d in dims.split(",") if d] or [1]))
    return n


def group_size(line):
    """Devices in one group of a collective: replica_groups {{0,1},{2,3}} or
    the iota form [groups,size]<=[n]; collective-permute: 2 (a pair)."""
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=", line)
    if m:
        return int(m.group(2))
    m = re.search(r"replica_groups=\{\{([0-9,]*)\}", line)
    if m:
        return len(m.group(1).split(","))
    return 2


def moved_bytes(kind, size, q):
    """Bytes one device sends for a collective whose result is `size` bytes
    over q devices, as the cost model counts (ring all-reduce 2(q-1)/q)."""
    if q <= 1:
        return 0
    if kind == "all-reduce":
        return size * 2 * (q - 1) / q
    if kind == "reduce-scatter":
        return size * (q - 1)
    if kind in ("all-gather", "all-to-all"):
        return size * (q - 1) / q
    return size  # collective-permute


def hlo_collectives(hlo, op_names):
    """{op name or '(other)': {kind: bytes one device sends}} of the
    compiled HLO, each collective given to the op whose named_scope its
    metadata names (jvp(...) and transpose(...) wrappers taken off)."""
    out = {}
    for line in hlo.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?\S+\s*=\s*(.*?)\s+(" + "|".join(COLLECTIVES)
                     + r")(?:-start)?\(", line)
        if not m:
            continue
        kind = m.group(2)
        b = shape_bytes(m.group(1))
        if "-start(" in line and kind in ("all-gather", "collective-permute"):
            b //= 2  # async start: (operand, result) tuple
        b = moved_bytes(kind, b, group_size(line))
        meta = re.search(r'op_name="([^"]*)"', line)
        owner = "(other)"
        if meta:
            path = "/" + re.sub(r"(jvp|transpose|vmap|remat)\(", "", meta.group(1)).replace(")", "") + "/"
            best = ""
            for name in op_names:  # op names hold '/': the longest that occurs
                if "/" + name + "/" in path and len(name) > len(best):
                    best = name
            owner = best or owner
        out.setdefault(owner, {}).setdefault(kind, 0)
        out[owner][kind] += b
    return out


def runtime_box(op, mp, shape, r):
    """The box shardbench's rank r holds of a tensor (or weight) with map
    mp under op's config (runtime/executor/plan.c), or None when r is
    outside the op's grid or the map has a flat side."""
    c = op["config"]
    q = int(np.prod(c))
    if r >= q or any(m < -1 for m in mp):
        return None
    g = []
    for ci in reversed(c):
        g.append(r % ci)
        r //= ci
    g = g[::-1]
    box = []
    for j, m in enumerate(mp):
        if m < 0 or c[m] == 1:
            box.append((0, shape[j]))
        else:
            step = op["dims"][m]["size"] // c[m]
            box.append((g[m] * step, g[m] * step + step))
    return tuple(box)


def placement_mismatches(data, ws, acts, devices):
    """Every weight and op output: the indices JAX gives each of the op's
    q devices equal the box shardbench's rank of that number holds."""
    bad = []
    for op in data["ops"]:
        items = []
        for k, o in enumerate(op["in"]):
            if data["tensors"][o["tensor"]]["kind"] == "weight":
                items.append((o["tensor"], o["map"], ws[o["tensor"]]))
        for w in op["weights"]:
            items.append((w["name"], w["map"], ws[w["name"]]))
        for o in op["out"]:
            if o["tensor"] in acts and op["kind"] != "softmax_xent":
                items.append((o["tensor"], o["map"], acts[o["tensor"]]))
        for name, mp, sh in items:
            shape = (data["weights"][name]["shape"] if name in data["weights"]
                     else data["tensors"][name]["shape"])
            idx = sh.devices_indices_map(tuple(shape))
            for r in range(op["devices"]):
                box = runtime_box(op, mp, shape, r)
                if box is None:
                    continue
                got = tuple((sl.start or 0, shape[j] if sl.stop is None else sl.stop)
                            for j, sl in enumerate(idx[devices[r]]))
                if got != box:
                    bad.append("%s on device %d: JAX %s, shardbench rank %d %s" % (name, r, got, r, box))
                    break
    return bad


def same(a, b, rtol=RTOL):
    return all(abs(x - y) <= rtol * max(1.0, abs(y)) for x, y in zip(a, b)) and len(a) == len(b)


def main():
    run_losses = json.load(open(sys.argv[1]))
    table = open(sys.argv[2], "w")
    table.write("strategy\top\tpredicted_bytes\txla_bytes\txla_kinds\n")
    failures = []
    unsharded = {}
    for path in sys.argv[3:]:
        prog = load(path)
        data = prog.DATA
        label = os.path.basename(path)[:-3]
        key = data["model"] + " " + data["params"]
        model = refmodel.Model(data)
        batches = [model.batch(s) for s in range(STEPS)]

        # the same model unsharded, once per model and sizes
        if key not in unsharded:
            step1 = jax.jit(lambda p, b: model.sgd_step(p, b))  # numpy in: device 0 only
            p = model.init_params()
            losses = []
            for b in batches:
                loss, p = step1(p, b)
                losses.append(float(loss))
            unsharded[key] = losses

        ws = prog.weight_shardings()
        acts = prog.activation_shardings()
        params = {n: jax.device_put(v, ws[n]) for n, v in model.init_params().items()}
        step = jax.jit(lambda p, b: model.sgd_step(p, b, prog=prog, with_acts=True))
        compiled = step.lower(params, batches[0]).compile()

        # (a) shardings read back from the executable
        in_sh = compiled.input_shardings[0][0]
        _, out_w, out_a = compiled.output_shardings
        bad = []
        for n, s in ws.items():
            nd = len(data["weights"][n]["shape"])
            if not in_sh[n].is_equivalent_to(s, nd):
                bad.append("weight %s in: %s, exported %s" % (n, in_sh[n], s.spec))
            if not out_w[n].is_equivalent_to(s, nd):
                bad.append("weight %s out: %s, exported %s" % (n, out_w[n], s.spec))
        for n, s in acts.items():
            if n not in out_a:
                continue  # the loss
            nd = len(data["tensors"][n]["shape"])
            if not out_a[n].is_equivalent_to(s, nd):
                bad.append("activation %s: %s, exported %s" % (n, out_a[n], s.spec))
        nchecked = len(ws) + len(out_a)
        # every device 0..q-1 of each op holds what shardbench's rank holds
        bad += placement_mismatches(data, ws, acts, jax.devices()[:data["p"]])
        # p a power of 2: every sharding on the one device mesh
        if not (P_ := data["p"]) & (P_ - 1):
            meshes = {s.mesh for s in list(ws.values()) + list(acts.values())}
            if meshes != {prog.device_mesh()}:
                bad.append("p = %d: shardings on %d meshes, not the one device mesh" % (P_, len(meshes)))

        # (b) losses
        losses = []
        for b in batches:
            loss, params, _ = compiled(params, b)
            losses.append(float(loss))
        ok_ref = same(losses, unsharded[key])
        ok_run = key in run_losses and same(losses, run_losses[key])
        if not ok_ref:
            bad.append("losses %s, unsharded JAX %s" % (losses, unsharded[key]))
        if not ok_run:
            bad.append("losses %s, shardbench run %s" % (losses, run_losses.get(key)))

        # (c) communication, predicted beside what XLA inserted
        names = [op["name"] for op in data["ops"]]
        coll = hlo_collectives(compiled.as_text(), set(names))
        pred = {op["name"]: op["predicted_comm_words"] * 4 for op in data["ops"]}
        for r in data["relayouts"]:
            pred[r["to"]] += r["predicted_words"] * 4 * 2  # forward and backward
        tot_p = tot_x = 0
        for n in names + ["(other)"]:
            x = sum(coll.get(n, {}).values())
            pb = pred.get(n, 0)
            tot_p += pb
            tot_x += x
            if x or pb:
                kinds = ",".join("%s:%.0f" % kv for kv in sorted(coll.get(n, {}).items()))
                table.write("%s\t%s\t%.0f\t%.0f\t%s\n" % (label, n, pb, x, kinds or "-"))
        table.write("%s\tTOTAL\t%.0f\t%.0f\t-\n" % (label, tot_p, tot_x))
        status = "ok" if not bad else "FAIL"
        print("%-34s %s  shardings %d checked  losses %s  run %s  comm bytes/device predicted %.0f "
              "xla %.0f" % (label, status, nchecked, " ".join("%.6f" % v for v in losses),
                          " ".join("%.6f" % v for v in run_losses.get(key, [])), tot_p, tot_x))
        for b in bad[:20]:
            print("   ", b)
        failures += [label + ": " + b for b in bad]
    table.close()
    if failures:
        print("%d mismatches" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
