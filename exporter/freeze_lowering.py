"""Trainer ops spelled in edge runtime (ONNX) ops at inference, one lowering function per op.

A lowering gets the freezer (for fresh names and the variables' values), the trainer node, the
IR names of its inputs and outputs, and the scope being built, and returns the IR nodes.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.freeze_source import TRAINER_DOMAIN, FreezeError
from schemas import dtypes
from schemas.registry import qualified_name

__all__ = ["LSTM_TRAINING_OUTPUTS", "Scope", "check_edge_kernel", "contiguous", "ir_value", "lower_batch_norm",
           "lower_fill_like", "lower_lstm_block_cell", "lower_lstm_block_fused", "lower_same_op"]


class Scope:
    """One IR graph being built (main, a Loop body, an If branch) and the trainer tensors named in it."""

    def __init__(self, graph: ir.Graph, names: dict | None = None):
        self.graph = graph
        self.names: dict = dict(names or {})  # trainer Tensor -> IR value name


def lower_batch_norm(freezer, node, ins: list[str], outs: list[str], scope: Scope) -> list[ir.Node]:
    """BatchNormTraining as inference's BatchNormalization over its scope's moving statistics."""
    prefix = node.name.rsplit("/", 1)[0] + "/" if "/" in node.name else ""
    stats = []
    for stat in ("moving_mean", "moving_variance"):
        var = prefix + stat
        if var not in freezer.src.values:
            raise FreezeError(f"node {node.name!r} (BatchNormTraining): no variable {var!r} with its moving "
                              "statistics; build batch norm with trainer.layers.batch_normalization")
        name = freezer.fresh(var + ":0")
        scope.graph.values[name] = ir.Value(name, data=contiguous(freezer.src.values[var]))
        stats.append(name)
    for extra in outs[1:]:
        scope.graph.values.pop(extra, None)
    return [ir.Node("BatchNormalization", ins[:3] + stats, outs[:1], {"epsilon": float(node.attrs["epsilon"])},
                    name=node.name)]


def lower_fill_like(freezer, node, ins: list[str], outs: list[str], scope: Scope) -> list[ir.Node]:
    """OnesLike / ZerosLike as ConstantOfShape of the input's Shape."""
    fill = np.ones if node.op_type == "OnesLike" else np.zeros
    shape = freezer.fresh(f"{node.name}/shape")
    return [ir.Node("Shape", ins[:1], [shape], name=shape),
            ir.Node("ConstantOfShape", [shape], outs[:1], {"value": fill((1,), node.outputs[0].dtype)}, name=node.name)]


def lower_same_op(freezer, node, ins: list[str], outs: list[str], scope: Scope) -> list[ir.Node]:
    """An op the edge runtime runs as it is."""
    check_edge_kernel(node)
    attrs = {k: v for k, v in node.attrs.items() if v is not None}
    return [ir.Node(node.op_type, ins, outs, attrs, name=node.name, domain=node.domain)]


def check_edge_kernel(node) -> None:
    from edge_runtime.kernels import get_kernel, has_kernel

    # The registry is shared with the trainer's kernels; only those edge_runtime defines ship to devices.
    if not has_kernel(node.op_type, node.domain) or not get_kernel(node.op_type, node.domain).__module__.startswith("edge_runtime."):
        qual = qualified_name(node.op_type, node.domain)
        hint = ("it is a training-only op; export an output that does not depend on it"
                if node.domain == TRAINER_DOMAIN else "add an edge kernel for it in edge_runtime/kernels/")
        raise FreezeError(f"op {qual} (node {node.name!r}) has no edge runtime kernel, so the frozen model "
                          f"could not run on the edge: {hint}")


def lower_lstm_block_cell(freezer, node, ins, outs, scope: Scope) -> list[ir.Node]:
    """LSTMBlockCell (trainer/kernels/recurrent.py) in ONNX ops: z = [x, h] @ W + b; i, j, f, o = split(z, 4)
    (TensorFlow's gate layout); c' = sigmoid(f + forget_bias) c + sigmoid(i) tanh(j); h' = sigmoid(o) tanh(c')."""
    x, h, c, w, b = ins
    n = {k: freezer.fresh(f"{node.name}/{k}") for k in
         ("xh", "z", "zi", "zj", "zf", "zf_fb", "zo", "i", "j", "f", "o", "fc", "ij", "tc")}
    h_out, c_out = outs[:2]

    def op(op_type, inputs, outputs, **attrs):
        return ir.Node(op_type, inputs, outputs, attrs, name=outputs[0])

    nodes = [
        op("Concat", [x, h], [n["xh"]], axis=1),
        op("Gemm", [n["xh"], w, b], [n["z"]]),
        op("Split", [n["z"]], [n["zi"], n["zj"], n["zf"], n["zo"]], axis=1, num_outputs=4),
    ]
    forget_bias = float(node.attrs.get("forget_bias") or 0.0)
    if forget_bias:
        fb = freezer.fresh(f"{node.name}/forget_bias")
        scope.graph.values[fb] = ir.Value(fb, data=np.asarray(forget_bias, node.inputs[0].dtype))
        nodes.append(op("Add", [n["zf"], fb], [n["zf_fb"]]))
    zf = n["zf_fb"] if forget_bias else n["zf"]
    return nodes + [
        op("Sigmoid", [n["zi"]], [n["i"]]),
        op("Tanh", [n["zj"]], [n["j"]]),
        op("Sigmoid", [zf], [n["f"]]),
        op("Sigmoid", [n["zo"]], [n["o"]]),
        op("Mul", [n["f"], c], [n["fc"]]),
        op("Mul", [n["i"], n["j"]], [n["ij"]]),
        op("Add", [n["fc"], n["ij"]], [c_out]),
        op("Tanh", [c_out], [n["tc"]]),
        op("Mul", [n["o"], n["tc"]], [h_out]),
    ]


# Our gates (LSTMBlockCell's column blocks of W, TensorFlow's i, j, f, o) in ONNX LSTM's order (i, o, f, c).
_ONNX_LSTM_GATES = (0, 3, 2, 1)


def lower_lstm_block_fused(freezer, node, ins, outs, scope: Scope) -> list[ir.Node]:
    """LSTMBlockFused as one ONNX LSTM: W [I + H, 4H] is transposed, its gate blocks put in ONNX's
    order and split into W (input rows) and R (recurrent rows); b (plus forget_bias) is Wb and Rb is
    zero; Y [T, 1, B, H] and the final states lose their direction axis. The weight reshuffle is
    ops on the weights, which constant folding turns into the ONNX weights."""
    x, h0, c0, w, b = ins
    shape = node.inputs[3].shape
    if shape is None or None in shape:
        raise FreezeError(f"LSTMBlockFused node {node.name!r}: its weights' shape {shape} is not known; "
                          "freeze a graph whose W is a variable")
    hidden = shape[1] // 4
    width = shape[0] - hidden
    dtype = node.inputs[3].dtype
    n = {k: freezer.fresh(f"{node.name}/{k}") for k in
         ("wt", "wt_onnx", "w_x", "w_r", "W", "R", "b_onnx", "b_fb", "b_flat", "B", "h0", "c0", "Y", "Y_h", "Y_c")}

    def const(key, value):
        name = freezer.fresh(f"{node.name}/{key}")
        scope.graph.values[name] = ir.Value(name, data=contiguous(value))
        return name

    def op(op_type, inputs, outputs, **attrs):
        return ir.Node(op_type, inputs, outputs, attrs, name=outputs[0])

    rows = const("gate_rows", np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in _ONNX_LSTM_GATES]))
    axis0, axis1 = const("axis0", np.int64([0])), const("axis1", np.int64([1]))
    split = const("split", np.int64([width]))
    forget = np.zeros(4 * hidden, dtype)
    forget[2 * hidden:3 * hidden] = node.attrs["forget_bias"]  # ONNX's f block
    rb = np.zeros(4 * hidden, dtype)
    for extra in outs[3:]:
        scope.graph.values.pop(extra, None)
    y, h_n, c_n = outs[:3]
    return [
        op("Transpose", [w], [n["wt"]], perm=[1, 0]),
        op("Gather", [n["wt"], rows], [n["wt_onnx"]], axis=0),
        op("Slice", [n["wt_onnx"], const("start", np.int64([0])), split, axis1], [n["w_x"]]),
        op("Slice", [n["wt_onnx"], split, const("end", np.int64([width + hidden])), axis1], [n["w_r"]]),
        op("Unsqueeze", [n["w_x"], axis0], [n["W"]]),
        op("Unsqueeze", [n["w_r"], axis0], [n["R"]]),
        op("Gather", [b, rows], [n["b_onnx"]], axis=0),
        op("Add", [n["b_onnx"], const("forget_bias", forget)], [n["b_fb"]]),
        op("Concat", [n["b_fb"], const("Rb", rb)], [n["b_flat"]], axis=0),
        op("Unsqueeze", [n["b_flat"], axis0], [n["B"]]),
        op("Unsqueeze", [h0, axis0], [n["h0"]]),
        op("Unsqueeze", [c0, axis0], [n["c0"]]),
        op("LSTM", [x, n["W"], n["R"], n["B"], "", n["h0"], n["c0"]], [n["Y"], n["Y_h"], n["Y_c"]], hidden_size=hidden),
        op("Squeeze", [n["Y"], axis1], [y]),
        op("Squeeze", [n["Y_h"], axis0], [h_n]),
        op("Squeeze", [n["Y_c"], axis0], [c_n]),
    ]


# Trainer LSTM ops: (first output kept for training only, what to export instead).
LSTM_TRAINING_OUTPUTS = {
    "LSTMBlockCell": (2, "h (output 0) or c (output 1)"),
    "LSTMBlockFused": (3, "y (output 0), h_n (output 1) or c_n (output 2)"),
}


def contiguous(data) -> np.ndarray:
    # Not np.ascontiguousarray: it turns a 0-d array into a 1-d one.
    data = np.asarray(data)
    return data if data.flags.c_contiguous else data.copy(order="C")


def ir_value(name: str, t) -> ir.Value:
    """The IR value ``name`` with trainer tensor ``t``'s dtype and shape (-1 where unknown)."""
    dtype = None if t.dtype is None else dtypes.from_numpy(t.dtype)
    shape = None if t.shape is None else tuple(-1 if d is None else int(d) for d in t.shape)
    return ir.Value(name, dtype, shape)
