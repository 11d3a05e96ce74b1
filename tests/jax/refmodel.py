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
  softmax         over the op's axis; causal: keys (axis index) beyond the
                  query (index along the `causal` dim) get probability 0
  norm            layer norm over the op's axis, eps 1e-5, then gamma, beta
  rmsnorm         x / sqrt(mean of x^2 over the axis + 1e-5) * gamma
  rope            Hugging Face Llama's rotary embedding (rotate_half) over
                  the head dim `axis`, positions along the `seq` dim
  softmax_xent    mean over rows of logsumexp - logit of the label
  softcap         cap * tanh(x / cap)
  moe_gate        top-k router (runtime/kernels/moe_route.h): combine, dispatch;
                  its load-balancing loss (moe_aux > 0) joins the loss
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
                if op["kind"] == "moe_gate" and op["moe_aux"] > 0:
                    loss = loss + op["moe_aux"] * self._moe_aux(xs[0])
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
        if kind == "act":
            return [self._act(op["fn"], xs[0])]
        if kind == "softcap":  # Gemma 2's logit soft-capping
            return [op["cap"] * jnp.tanh(xs[0] / op["cap"])]
        if kind in ("mul", "expand"):
            # the smaller operand follows its map: put its dims in the output's
            # places (1 where it lacks one), then broadcast
            out_shape = self.tensors[op["out"][0]["tensor"]]["shape"]
            k = 1 if kind == "mul" else 0
            shape = [1] * len(out_shape)
            for j, d in enumerate(op["in"][k]["map"]):
                shape[d] = xs[k].shape[j]
            s = jnp.broadcast_to(xs[k].reshape(shape), out_shape)
            return [xs[0] * s if kind == "mul" else s]
        if kind == "softmax":
            mp = op["in"][0]["map"]
            a = mp.index(op["axis"])
            x = xs[0]
            if op.get("causal") is not None:
                q = mp.index(op["causal"])
                key = np.arange(x.shape[a]).reshape([-1 if i == a else 1 for i in range(x.ndim)])
                query = np.arange(x.shape[q]).reshape([-1 if i == q else 1 for i in range(x.ndim)])
                x = jnp.where(key > query, -jnp.inf, x)
            return [jax.nn.softmax(x, axis=a)]
        if kind == "rmsnorm":
            x = xs[0]
            a = op["in"][0]["map"].index(op["axis"])
            ms = jnp.mean(x * x, axis=a, keepdims=True)
            shape = [1] * x.ndim
            shape[a] = x.shape[a]
            return [x * jax.lax.rsqrt(ms + 1e-5) * ws[0].reshape(shape)]
        if kind == "rope":
            x = xs[0]
            mp = op["in"][0]["map"]
            d, s = mp.index(op["axis"]), mp.index(op["seq"])
            D, S = x.shape[d], x.shape[s]
            # as transformers' LlamaRotaryEmbedding: inv_freq over i = 0, 2, ..
            # D-2, emb = cat(freqs, freqs), q*cos + rotate_half(q)*sin
            inv_freq = 1.0 / (op["theta"] ** (np.arange(0, D, 2, dtype=np.float64) / D))
            freqs = np.arange(S, dtype=np.float64)[:, None] * inv_freq[None, :]
            emb = np.concatenate([freqs, freqs], axis=-1)  # (S, D)
            if d < s:
                emb = emb.T
            shape = [1] * x.ndim
            shape[s], shape[d] = S, D
            cos = np.cos(emb).astype(np.float32).reshape(shape)
            sin = np.sin(emb).astype(np.float32).reshape(shape)
            x1, x2 = jnp.split(x, 2, axis=d)
            return [x * cos + jnp.concatenate([-x2, x1], axis=d) * sin]
        if kind == "norm":
            x = xs[0]
            a = op["in"][0]["map"].index(op["axis"])
            mean = jnp.mean(x, axis=a, keepdims=True)
            var = jnp.mean((x - mean) ** 2, axis=a, keepdims=True)
            y = (x - mean) * jax.lax.rsqrt(var + 1e-5)
            shape = [1] * x.ndim
            shape[a] = x.shape[a]
            return [y * ws[0].reshape(shape) + ws[1].reshape(shape)]
        if kind == "reduce_mean":
            # the reduced dims: the input's that the output does not follow
            kept = set(op["out"][0]["map"])
            axes = tuple(i for i in range(xs[0].ndim) if i not in kept)
            y = jnp.mean(xs[0], axis=axes)
            return [y.reshape(self.tensors[op["out"][0]["tensor"]]["shape"])]
        if kind == "concat":
            return [jnp.concatenate(xs, axis=op["axis"])]
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
        if kind == "moe_gate":
            return self._moe_gate(op, xs[0])
        raise NotImplementedError("op kind %s (%s)" % (kind, op["name"]))

    @staticmethod
    def _act(fn, x):
        if fn == "relu":
            return jnp.maximum(x, 0.0)
        if fn == "relu6":
            return jnp.clip(x, 0.0, 6.0)
        if fn == "silu":
            return jax.nn.silu(x)
        if fn == "gelu":
            return jax.nn.gelu(x, approximate=False)
        if fn == "gelu_tanh":
            return jax.nn.gelu(x, approximate=True)
        if fn == "sigmoid":
            return jax.nn.sigmoid(x)
        if fn == "tanh":
            return jnp.tanh(x)
        raise NotImplementedError("act fn %s" % fn)

    @staticmethod
    def _moe_gate(op, logits):
        """logits (group, seq, expert) -> combine, dispatch (group, seq,
        expert, cap): each token's top-k experts (ties to the lower index),
        weights the softmax of the chosen logits, slots by choice rank then
        token, choices past the capacity dropped. The routing is constant;
        gradient flows through the weights only."""
        k, cap = op["topk"], op["dims"][3]["size"]
        G, S, E = logits.shape
        _, idx = jax.lax.top_k(jax.lax.stop_gradient(logits), k)        # (G, S, k)
        w = jax.nn.softmax(jnp.take_along_axis(logits, idx, axis=-1), axis=-1)
        onehot = jax.nn.one_hot(idx, E, dtype=jnp.int32)                # (G, S, k, E)
        order = onehot.transpose(0, 2, 1, 3).reshape(G, k * S, E)      # choice rank, then token
        before = jnp.cumsum(order, axis=1) - order
        slot = (before * order).sum(-1).reshape(G, k, S).transpose(0, 2, 1)
        slot_oh = jax.nn.one_hot(jnp.where(slot < cap, slot, cap), cap + 1)[..., :cap]
        disp = jnp.einsum("gske,gskc->gsec", onehot.astype(jnp.float32), slot_oh)
        comb = jnp.einsum("gsk,gske,gskc->gsec", w, onehot.astype(jnp.float32), slot_oh)
        return [comb, jax.lax.stop_gradient(disp)]

    @staticmethod
    def _moe_aux(logits):
        """GShard's balance loss, mean over groups of E · sum_e f_e · P_e: f
        the share of first choices (constant), P the mean probability."""
        E = logits.shape[-1]
        first = jax.nn.one_hot(jnp.argmax(jax.lax.stop_gradient(logits), axis=-1), E)
        f = jnp.mean(first, axis=1)
        P = jnp.mean(jax.nn.softmax(logits, axis=-1), axis=1)
        return jnp.mean(E * jnp.sum(f * P, axis=-1))

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
