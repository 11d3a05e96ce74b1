"""A JAX reference of shardbench's runtime: the model graph of an exported
program (`shardbench export --to jax --format py`), run op by op with the
runtime's semantics (runtime/ops/, runtime/kernels/), its weight init and
its synthetic inputs and labels (runtime/executor/inputs.c, params.c),
trained with plain SGD as `shardbench run` does.

The graph comes from the export's DATA (ops with their iteration dims and
operand maps), so one small interpreter covers the Transformer and
AlexNet:
  einsum, dense   contraction over the op's named iteration dims; pw > 0: relu
  embedding       table[ids], table (vocab, embed)
  conv            cross-correlation NCHW x OIHW, stride, zero pad; pw > 0: relu
  pool            max (or average) over each window
  add             sum of the inputs; pw > 0: relu
  softmax         over the op's axis
  norm            layer norm over the op's axis, eps 1e-5, then gamma, beta
  softmax_xent    mean over rows of logsumexp - logit of the label
  stack, unstack, flatten, unflatten   moves
With `prog` given, every op's inputs and outputs are constrained to the
exported shardings (prog.constrain) inside jax.named_scope(op name).
"""
import numpy as np
import jax
import jax.numpy as jnp

M64 = (1 << 64) - 1


def _mix64(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(M64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def name_tag(s):
    h = 1469598103934665603
    for b in s.encode():
        h = ((h ^ b) * 1099511628211) & M64
    return h


def u01(seed, tag, n):
    """U[0,1) of elements 0..n-1 of the stream (seed, tag), as inputs.c."""
    with np.errstate(over="ignore"):
        key = _mix64(np.uint64(seed & M64) ^ _mix64(np.uint64(tag)))
        i = np.arange(n, dtype=np.uint64)
        x = _mix64(key ^ (i * np.uint64(0xD6E8FEB86659FD93)))
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def gen_floats(shape, seed, name, scale=1.0, offset=0.0):
    u = u01(seed, name_tag(name), int(np.prod(shape)))
    return (offset + scale * (2.0 * u - 1.0)).astype(np.float32).reshape(shape)


def gen_ints(shape, seed, name, rng):
    u = u01(seed, name_tag(name), int(np.prod(shape)))
    return np.floor(u * rng).astype(np.int32).reshape(shape)


class Model:
    def __init__(self, data):
        self.d = data
        self.ops = data["ops"]
        self.tensors = data["tensors"]

    # ---- weights, inputs, labels ---------------------------------------------
    def init_params(self, seed=1):
        return {n: gen_floats(w["shape"], seed, n, w["init_scale"], w["init_offset"])
                for n, w in self.d["weights"].items()}

    def batch(self, step, seed=1):
        """The inputs and labels of step `step` (inputs.c: seed + step)."""
        s = seed + step
        out = {}
        for op in self.ops:
            for k, o in enumerate(op["in"]):
                t = self.tensors[o["tensor"]]
                if t["kind"] != "input" or o["tensor"] in out:
                    continue
                if op["kind"] == "embedding":
                    out[o["tensor"]] = gen_ints(t["shape"], s, o["tensor"], op["dims"][-1]["size"])
                else:
                    out[o["tensor"]] = gen_floats(t["shape"], s, o["tensor"])
            if op["kind"] == "softmax_xent":
                rows = [d["size"] for d in op["dims"][:-1]]
                u = u01(s, name_tag(op["name"]) ^ 0x1ABE1, int(np.prod(rows)))
                out["labels:" + op["name"]] = np.floor(u * op["dims"][-1]["size"]).astype(
                    np.int32).reshape(rows)
        return out

    # ---- forward -------------------------------------------------------------
    def forward(self, params, batch, prog=None, acts=None):
        env = dict(batch)
        loss = 0.0
        for op in self.ops:
            name = op["name"]
            with jax.named_scope(name):
                xs = []
                for k, o in enumerate(op["in"]):
                    t = self.tensors[o["tensor"]]
                    x = params[o["tensor"]] if t["kind"] == "weight" else env[o["tensor"]]
                    if prog is not None:
                        x = prog.constrain(x, name, "in", k)
                    xs.append(x)
                ws = []
                for w in op["weights"]:
                    x = params[w["name"]]
                    if prog is not None:
                        x = jax.lax.with_sharding_constraint(x, prog.sharding(w["mesh"], w["spec"]))
                    ws.append(x)
                if op["kind"] == "softmax_xent":
                    loss = loss + self._xent(op, xs[0], env["labels:" + name])
                    continue
                ys = self._op(op, xs, ws)
                for k, o in enumerate(op["out"]):
                    y = ys[k]
                    if prog is not None:
                        y = prog.constrain(y, name, "out", k)
                    env[o["tensor"]] = y
                    if acts is not None:
                        acts[o["tensor"]] = y
        return loss

    @staticmethod
    def _letters(maps):
        return ["".join(chr(ord("a") + m) for m in mp) for mp in maps]

    def _op(self, op, xs, ws):
        kind = op["kind"]
        relu = (lambda y: jnp.maximum(y, 0.0)) if op["pw"] > 0 else (lambda y: y)
        if kind in ("einsum", "dense"):
            maps = [o["map"] for o in op["in"]] + [w["map"] for w in op["weights"]]
            ins = ",".join(self._letters(maps))
            out = self._letters([op["out"][0]["map"]])[0]
            return [relu(jnp.einsum(ins + "->" + out, *(xs + ws),
                                    precision=jax.lax.Precision.HIGHEST))]
        if kind == "embedding":
            return [jnp.take(ws[0], xs[0], axis=0)]
        if kind in ("add", "elementwise"):
            y = xs[0]
            for x in xs[1:]:
                y = y + x
            return [relu(y)]
        if kind == "softmax":
            a = op["in"][0]["map"].index(op["axis"])
            return [jax.nn.softmax(xs[0], axis=a)]
        if kind == "norm":
            x = xs[0]
            a = op["in"][0]["map"].index(op["axis"])
            mean = jnp.mean(x, axis=a, keepdims=True)
            var = jnp.mean((x - mean) ** 2, axis=a, keepdims=True)
            y = (x - mean) * jax.lax.rsqrt(var + 1e-5)
            shape = [1] * x.ndim
            shape[a] = x.shape[a]
            return [y * ws[0].reshape(shape) + ws[1].reshape(shape)]
        if kind == "unstack":
            return [jnp.take(xs[0], k, axis=op["axis"]) for k in range(len(op["out"]))]
        if kind == "stack":
            return [jnp.stack(xs, axis=op["axis"])]
        if kind in ("flatten", "unflatten", "reshape"):
            return [xs[0].reshape(self.tensors[op["out"][0]["tensor"]]["shape"])]
        if kind == "conv":
            (sh, sw), (ph, pw) = op["stride"], op["pad"]
            groups, dil = op.get("groups", 1), op.get("dilation", [1, 1])
            # grouped filter (group, out/G, in/G, kh, kw): the bytes of OIHW with I = in/G
            w = ws[0].reshape((-1,) + ws[0].shape[-3:]) if groups > 1 else ws[0]
            y = jax.lax.conv_general_dilated(xs[0], w, (sh, sw), [(ph, ph), (pw, pw)],
                                             rhs_dilation=tuple(dil), feature_group_count=groups,
                                             dimension_numbers=("NCHW", "OIHW", "NCHW"),
                                             precision=jax.lax.Precision.HIGHEST)
            return [relu(y)]
        if kind == "pool":
            (kh, kw), (sh, sw), (ph, pw) = op["kernel"], op["stride"], op["pad"]
            pads = [(0, 0), (0, 0), (ph, ph), (pw, pw)]
            if op["pool_avg"]:
                s = jax.lax.reduce_window(xs[0], 0.0, jax.lax.add, (1, 1, kh, kw), (1, 1, sh, sw), pads)
                return [s / (kh * kw)]
            return [jax.lax.reduce_window(xs[0], -jnp.inf, jax.lax.max, (1, 1, kh, kw),
                                          (1, 1, sh, sw), pads)]
        raise NotImplementedError("op kind %s (%s)" % (kind, op["name"]))

    @staticmethod
    def _xent(op, logits, labels):
        lse = jax.nn.logsumexp(logits, axis=-1)
        picked = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
        return jnp.mean(lse - picked)

    # ---- training ------------------------------------------------------------
    def sgd_step(self, params, batch, lr=0.01, prog=None, with_acts=False):
        def f(p):
            acts = {} if with_acts else None
            return self.forward(p, batch, prog, acts), acts

        (loss, acts), g = jax.value_and_grad(f, has_aux=True)(params)
        new = {n: params[n] - lr * g[n] for n in params}
        if prog is not None:
            new = {n: jax.lax.with_sharding_constraint(v, prog.sharding(
                self.d["weights"][n]["mesh"], self.d["weights"][n]["spec"])) for n, v in new.items()}
        return (loss, new, acts) if with_acts else (loss, new)
