"""structure.py JAX.json TORCH.json TORCH.py: the structure of the JSON
forms of `shardbench export --to jax|torch` and the PyTorch module (its
syntax, and that its DATA is the JSON form). Exit 1 naming the fault."""
import ast
import json
import math
import re
import sys


def fail(msg):
    sys.exit("structure.py: " + msg)


def check(d, torch):
    want = "shardbench-torch-1" if torch else "shardbench-jax-1"
    if d.get("format") != want:
        fail("format %r, want %r" % (d.get("format"), want))
    p = d["p"]
    for i, m in enumerate(d["meshes"]):
        if math.prod(m["shape"]) != p or len(m["shape"]) != len(m["axis_names"]):
            fail("mesh %d: shape %s over p = %d" % (i, m["shape"], p))

    def spec_ok(where, mesh, spec, shape, placements=None):
        names = d["meshes"][mesh]["axis_names"]
        if len(spec) != len(shape):
            fail("%s: spec %s for shape %s" % (where, spec, shape))
        used = [a for s in spec if s for a in (s if isinstance(s, list) else [s])]
        if any(a not in names for a in used) or len(used) != len(set(used)):
            fail("%s: spec %s on mesh axes %s" % (where, spec, names))
        if placements is not None:
            if len(placements) != len(names):
                fail("%s: placements %s on mesh axes %s" % (where, placements, names))
            for pl in placements:
                m = re.fullmatch(r"Shard\((\d+)\)|Replicate\(\)", pl)
                if not m or (m.group(1) and int(m.group(1)) >= len(shape)):
                    fail("%s: placement %s" % (where, pl))

    for n, w in d["weights"].items():
        spec_ok("weight " + n, w["mesh"], w["spec"], w["shape"], w.get("placements") if torch else None)
    for n, a in d["activations"].items():
        spec_ok("activation " + n, a["mesh"], a["spec"], d["tensors"][n]["shape"],
                a.get("placements") if torch else None)
    for op in d["ops"]:
        for role in ("in", "out"):
            for o in op[role]:
                if o["tensor"] not in d["tensors"]:
                    fail("op %s: unknown tensor %s" % (op["name"], o["tensor"]))
                spec_ok("op %s %s" % (op["name"], o["tensor"]), op["mesh"], o["spec"],
                        d["tensors"][o["tensor"]]["shape"])
        if op["predicted_comm_words"] < 0:
            fail("op %s: negative predicted communication" % op["name"])
    if torch:
        names = {op["name"] for op in d["ops"]}
        for n, s in d["parallelize_plan"].items():
            if n not in names or s not in ("ColwiseParallel()", "RowwiseParallel()", "SequenceParallel()"):
                fail("parallelize_plan %s: %s" % (n, s))
    if not isinstance(d["not_expressed"], list):
        fail("not_expressed is not a list")


jx, th = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
check(jx, False)
check(th, True)
if [o["name"] for o in jx["ops"]] != [o["name"] for o in th["ops"]]:
    fail("the JAX and PyTorch forms list different ops")
tree = ast.parse(open(sys.argv[3]).read())
lit = [n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "loads"]
if len(lit) != 1 or json.loads(lit[0]) != th:
    fail("%s: DATA is not the PyTorch JSON form" % sys.argv[3])
print("structure.py: %s, %s, %s ok (%d ops, %d weights, %d plan entries)"
      % (sys.argv[1], sys.argv[2], sys.argv[3], len(th["ops"]), len(th["weights"]), len(th["parallelize_plan"])))
