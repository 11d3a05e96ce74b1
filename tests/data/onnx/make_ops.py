#!/usr/bin/python3
"""tests/data/onnx/make_ops.py: writes ops.onnx, a hand-built graph (onnx.helper,
no torch: apt-get install python3-onnx) for the importer paths the torch
exports do not reach. Run from the repository root:

    /usr/bin/python3 tests/data/onnx/make_ops.py

ops.onnx (opset 13, graph-only, symbolic batch "N"):
  x[N,4,10,10] -> Pad(h, w by 1) -> Conv 3x3 (pads 0: the Pad is its padding)
  -> BatchNormalization -> Relu -> MaxPool 3x3/2 ceil_mode=1 (10 -> 5)
  -> Split(2 on channels) -> Concat of 18 parts (more than 16: chained)
  -> Slice channels [8, 16) of 72 (an even split into 9) -> Sigmoid
  -> GlobalAveragePool -> Flatten -> Gemm(transB) -> Softmax
fuse.onnx: a conv output read by an Add before a Relu (no fusion allowed).
softcap.onnx (opset 14): Gemma 2's logit soft-capping as torch exports
  c * tanh(x / c): x[N,8,16] -> MatMul -> Div(2.5) -> Tanh -> Mul(2.5) (a cap
  that is not a whole number: left to the operators) -> MatMul to 32 logits
  -> Div(30) -> Tanh -> Mul(30) (softcap, cap=30) -> LogSoftmax.
"""
import os

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))


def const(name, vals):
    return helper.make_node("Constant", [], [name], name=name,
                            value=helper.make_tensor(name + "_v", TensorProto.INT64, [len(vals)], vals))


def main():
    nodes = [
        const("pads", [0, 0, 1, 1, 0, 0, 1, 1]),
        helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad", mode="constant"),
        helper.make_node("Conv", ["xp", "w1"], ["c1"], name="conv", kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c1", "s", "b", "m", "v"], ["n1"], name="bn"),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                         ceil_mode=1),
        const("halves", [4, 4]),
        helper.make_node("Split", ["p1", "halves"], ["h0", "h1"], name="split", axis=1),
        helper.make_node("Concat", ["h0", "h1"] * 9, ["cat"], name="cat", axis=1),
        const("st", [8]), const("en", [16]), const("ax", [1]),
        helper.make_node("Slice", ["cat", "st", "en", "ax"], ["sl"], name="slice"),
        helper.make_node("Sigmoid", ["sl"], ["sg"], name="sigmoid"),
        helper.make_node("GlobalAveragePool", ["sg"], ["gp"], name="gap"),
        helper.make_node("Flatten", ["gp"], ["fl"], name="flatten", axis=1),
        helper.make_node("Gemm", ["fl", "wf", "bf"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=-1),
    ]
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("x", f, ["N", 4, 10, 10])]
    for name, shape in [("w1", [8, 4, 3, 3]), ("s", [8]), ("b", [8]), ("m", [8]), ("v", [8]),
                        ("wf", [10, 8]), ("bf", [10])]:
        inputs.append(helper.make_tensor_value_info(name, f, shape))
    graph = helper.make_graph(nodes, "ops", inputs, [helper.make_tensor_value_info("y", f, ["N", 10])])
    model = helper.make_model(graph, producer_name="make_ops.py", opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    save(model, "ops.onnx")

    # fuse.onnx: the conv's output is read by an Add before the Relu reads it,
    # so the Relu must not fuse into the conv (the Add needs the raw output).
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], name="conv", kernel_shape=[1, 1]),
        helper.make_node("Add", ["c", "c"], ["a"], name="twice"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["a", "r"], ["y"], name="sum"),
    ]
    inputs = [helper.make_tensor_value_info("x", f, ["N", 4, 6, 6]),
              helper.make_tensor_value_info("w1", f, [4, 4, 1, 1])]
    graph = helper.make_graph(nodes, "fuse", inputs, [helper.make_tensor_value_info("y", f, ["N", 4, 6, 6])])
    model = helper.make_model(graph, producer_name="make_ops.py", opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    save(model, "fuse.onnx")
    softcap()


def fconst(name, v):
    return helper.make_node("Constant", [], [name], name=name,
                            value=helper.make_tensor(name + "_v", TensorProto.FLOAT, [], [v]))


def softcap():
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        fconst("c1", 2.5), helper.make_node("Div", ["h", "c1"], ["h1"], name="div1"),
        helper.make_node("Tanh", ["h1"], ["h2"], name="tanh1"),
        helper.make_node("Mul", ["h2", "c1"], ["h3"], name="mul1"),
        helper.make_node("MatMul", ["h3", "w2"], ["logits"], name="head"),
        fconst("c2", 30.0), helper.make_node("Div", ["logits", "c2"], ["l1"], name="div2"),
        helper.make_node("Tanh", ["l1"], ["l2"], name="tanh2"),
        helper.make_node("Mul", ["l2", "c2"], ["l3"], name="mul2"),
        helper.make_node("LogSoftmax", ["l3"], ["y"], name="logsoftmax", axis=-1),
    ]
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("x", f, ["N", 8, 16]),
              helper.make_tensor_value_info("w1", f, [16, 16]),
              helper.make_tensor_value_info("w2", f, [16, 32])]
    graph = helper.make_graph(nodes, "softcap", inputs, [helper.make_tensor_value_info("y", f, ["N", 8, 32])])
    model = helper.make_model(graph, producer_name="make_ops.py", opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 7
    save(model, "softcap.onnx")


def save(model, name):
    onnx.checker.check_model(model)
    path = os.path.join(HERE, name)
    onnx.save(model, path)
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
