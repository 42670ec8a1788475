"""Rewrites of ONNX nodes written against older opsets into the forms our op set declares.

flowstack's schemas follow the current ONNX opset (e.g. ``axes`` of the Reduce ops is an input).
Each upgrader rewrites one op from the opsets where it differed; the importer runs the ones that
apply before checking a node against the registry. Registered in a table keyed by op name.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from exporter import ir
from schemas import UnsupportedOpError, dtypes

Upgrader = Callable[["UpgradeContext", ir.Node], list[ir.Node]]
_UPGRADERS: dict[str, list[tuple[int, Upgrader]]] = {}


class UpgradeContext:
    def __init__(self, graph: ir.Graph, opset: int):
        self.graph = graph
        self.opset = opset
        self._counter = 0

    def constant(self, hint: str, value: np.ndarray) -> str:
        self._counter += 1
        name = f"{hint}__upgraded_{self._counter}"
        while name in self.graph.values:
            self._counter += 1
            name = f"{hint}__upgraded_{self._counter}"
        self.graph.values[name] = ir.Value(name, data=np.asarray(value))
        return name

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{hint}__tmp_{self._counter}"

    def rank(self, name: str) -> int | None:
        v = self.graph.values.get(name)
        if v is None:
            return None
        if v.data is not None:
            return v.data.ndim
        return None if v.shape is None else len(v.shape)


def upgrader(op_type: str, below: int) -> Callable[[Upgrader], Upgrader]:
    """Register ``fn`` to rewrite ``op_type`` nodes of models whose opset is below ``below``."""

    def register(fn: Upgrader) -> Upgrader:
        _UPGRADERS.setdefault(op_type, []).append((below, fn))
        return fn

    return register


def upgrade(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    nodes = [node]
    for below, fn in _UPGRADERS.get(node.op_type, ()):
        if ctx.opset < below:
            nodes = [out for n in nodes for out in (fn(ctx, n) if n.op_type == node.op_type else [n])]
    return nodes


def form_opset(op_type: str) -> int:
    """The first opset in which ``op_type`` has the form the IR holds after ``upgrade`` (1: any opset).

    An upgraded node is in the form of the opset its upgrader lifts it to, so a writer must not
    declare an older one (DFT-20's axis input is not valid DFT-17).
    """
    return max((below for below, _ in _UPGRADERS.get(op_type, ())), default=1)


def _attr_to_input(op_type: str, attr: str, position: int, dtype=np.int64, below: int = 13) -> None:
    def rewrite(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
        if attr in node.attrs:
            value = node.attrs.pop(attr)
            while len(node.inputs) < position:
                node.inputs.append("")
            node.inputs.insert(position, ctx.constant(f"{node.name or op_type}_{attr}", np.asarray(value, dtype=dtype)))
        return [node]

    upgrader(op_type, below)(rewrite)


# axes moved from attribute to input: ReduceSum and Squeeze/Unsqueeze in opset 13, the rest in 18.
_attr_to_input("ReduceSum", "axes", 1, below=13)
for _op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
            "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"):
    _attr_to_input(_op, "axes", 1, below=18)
_attr_to_input("Squeeze", "axes", 1, below=13)
_attr_to_input("Unsqueeze", "axes", 1, below=13)
_attr_to_input("Split", "split", 1, below=13)
_attr_to_input("TopK", "k", 1, below=10)
_attr_to_input("Reshape", "shape", 1, below=5)
_attr_to_input("Upsample", "scales", 1, dtype=np.float32, below=9)


@upgrader("Slice", below=10)
def _slice_attrs(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    starts, ends = node.attrs.pop("starts"), node.attrs.pop("ends")
    axes = node.attrs.pop("axes", list(range(len(starts))))
    node.inputs = [node.inputs[0]] + [ctx.constant(f"{node.name}_{k}", np.asarray(v, np.int64))
                                      for k, v in (("starts", starts), ("ends", ends), ("axes", axes))]
    return [node]


@upgrader("Pad", below=11)
def _pad_attrs(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    pads = node.attrs.pop("pads", node.attrs.pop("paddings", None))
    value = node.attrs.pop("value", 0.0)
    node.inputs = [node.inputs[0], ctx.constant(f"{node.name}_pads", np.asarray(pads, np.int64)),
                   ctx.constant(f"{node.name}_value", np.asarray(value, np.float32))]
    return [node]


@upgrader("Clip", below=11)
def _clip_attrs(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    lo, hi = node.attrs.pop("min", None), node.attrs.pop("max", None)
    node.inputs = [node.inputs[0],
                   ctx.constant(f"{node.name}_min", np.float32(lo)) if lo is not None else "",
                   ctx.constant(f"{node.name}_max", np.float32(hi)) if hi is not None else ""]
    return [node]


@upgrader("Dropout", below=12)
def _dropout_attrs(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    ratio = node.attrs.pop("ratio", 0.5)
    node.attrs.pop("is_test", None)
    node.inputs = [node.inputs[0], ctx.constant(f"{node.name}_ratio", np.float32(ratio))]
    return [node]


@upgrader("BatchNormalization", below=9)
def _batchnorm_attrs(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    for legacy in ("is_test", "spatial", "consumed_inputs"):
        node.attrs.pop(legacy, None)
    node.outputs = node.outputs[:1]
    return [node]


@upgrader("Gemm", below=7)
def _gemm_broadcast(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    node.attrs.pop("broadcast", None)
    return [node]


@upgrader("Resize", below=11)
def _resize_no_roi(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    node.inputs = [node.inputs[0], "", node.inputs[1]]
    return [node]


# GridSample's modes were renamed in opset 20; PyTorch still exports the old names at opset 16-19.
_GRID_SAMPLE_MODES = {"bilinear": "linear", "bicubic": "cubic"}


@upgrader("GridSample", below=20)
def _grid_sample_mode_names(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    mode = node.attrs.get("mode", "bilinear")
    node.attrs["mode"] = _GRID_SAMPLE_MODES.get(mode, mode)
    return [node]


@upgrader("Cast", below=6)
def _cast_string_type(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    to = node.attrs.get("to")
    if isinstance(to, str):
        from onnx import TensorProto

        node.attrs["to"] = int(getattr(TensorProto, to.upper()))
    return [node]


def _legacy_broadcast(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    # Before opset 7, B was broadcast against A starting at `axis` (default: align trailing dims).
    node.attrs.pop("consumed_inputs", None)
    if not node.attrs.pop("broadcast", 0) or "axis" not in node.attrs:
        node.attrs.pop("axis", None)
        return [node]
    axis = node.attrs.pop("axis")
    rank_a, rank_b = ctx.rank(node.inputs[0]), ctx.rank(node.inputs[1])
    if rank_a is None or rank_b is None:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op_type}): legacy broadcast with axis={axis} needs known ranks")
    trailing = rank_a - (axis % rank_a) - rank_b
    if trailing > 0:
        unsq = ctx.fresh(f"{node.inputs[1]}_aligned")
        axes = ctx.constant(f"{node.name}_axes", np.arange(rank_b, rank_b + trailing, dtype=np.int64))
        pre = ir.Node("Unsqueeze", [node.inputs[1], axes], [unsq], {}, f"{node.name}/align")
        node.inputs = [node.inputs[0], unsq]
        return [pre, node]
    return [node]


for _op in ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less", "PRelu"):
    upgrader(_op, below=7)(_legacy_broadcast)


def _drop_consumed_inputs(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    node.attrs.pop("consumed_inputs", None)
    return [node]


for _op in ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Selu", "HardSigmoid", "Neg", "Abs", "Exp",
            "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Clip", "Sum", "Max", "Min", "Mean"):
    upgrader(_op, below=6)(_drop_consumed_inputs)


def _coerced_softmax(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    # Before opset 13 these ops flattened the input to 2-D at `axis` and normalised each row.
    axis = node.attrs.get("axis", 1)
    rank = ctx.rank(node.inputs[0])
    if rank is not None and axis % max(rank, 1) == rank - 1:
        node.attrs["axis"] = -1
        return [node]
    x, (y,) = node.inputs[0], node.outputs
    flat, soft, shape = ctx.fresh(f"{x}_2d"), ctx.fresh(f"{y}_2d"), ctx.fresh(f"{x}_shape")
    base = node.name or node.op_type
    return [
        ir.Node("Flatten", [x], [flat], {"axis": axis}, f"{base}/flatten"),
        ir.Node(node.op_type, [flat], [soft], {"axis": -1}, f"{base}/rows"),
        ir.Node("Shape", [x], [shape], {}, f"{base}/shape"),
        ir.Node("Reshape", [soft, shape], [y], {}, f"{base}/restore"),
    ]


for _op in ("Softmax", "LogSoftmax", "Hardmax"):
    upgrader(_op, below=13)(_coerced_softmax)


@upgrader("Concat", below=4)
def _concat_default_axis(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    node.attrs.setdefault("axis", 1)  # the default before opset 4
    return [node]


@upgrader("PRelu", below=7)
def _prelu_channel_slope(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    # Before opset 7 a 1-D slope of length C applied along axis 1 (per channel), not to the last axis.
    slope = ctx.graph.values.get(node.inputs[1])
    rank = ctx.rank(node.inputs[0])
    if slope is None or slope.data is None or slope.data.ndim != 1 or rank is None or rank < 3 or slope.data.size == 1:
        return [node]
    node.inputs[1] = ctx.constant(f"{node.inputs[1]}_per_channel", slope.data.reshape((-1,) + (1,) * (rank - 2)))
    return [node]


@upgrader("DFT", below=20)
def _dft_axis_input(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    # DFT-17 took `axis` as an attribute defaulting to 1; DFT-20 takes it as input 2 (default -2).
    axis = node.attrs.pop("axis", 1)
    while len(node.inputs) < 2:
        node.inputs.append("")
    node.inputs[2:3] = [ctx.constant(f"{node.name or 'DFT'}_axis", np.asarray(axis, np.int64))]
    return [node]


@upgrader("Scan", below=9)
def _batched_scan(ctx: UpgradeContext, node: ir.Node) -> list[ir.Node]:
    """Scan-8 (inputs: sequence_lens?, states, scan inputs, every one batched on axis 0, sequences
    on axis 1) as a Loop over the batch whose body slices one example and runs Scan-9 on it with the
    original body. The Loop stacks each example's final states and scan outputs back along axis 0;
    with sequence_lens, each example's inputs are cut to its length and its scan outputs padded with
    zeros back to the longest, as Scan-8 specifies."""
    base = node.name or "Scan"
    lengths, operands = node.inputs[0], list(node.inputs[1:])
    scans = node.attrs.get("num_scan_inputs")
    if not isinstance(scans, int) or not 0 < scans <= len(operands):
        raise UnsupportedOpError(f"node {base!r} (Scan, opset 8): num_scan_inputs is {scans}, but it must count "
                                 f"1 to {len(operands)} of its {len(operands)} state and scan inputs")
    states = len(operands) - scans
    body = ir.Graph(name=f"{base}/example")
    index, cond = f"{base}/i", f"{base}/cond"
    body.values[index] = ir.Value(index, dtypes.INT64, ())
    body.values[cond] = ir.Value(cond, dtypes.BOOL, ())
    body.inputs = [index, cond]

    def constant(hint: str, value) -> str:
        name = f"{base}/{hint}"
        body.values[name] = ir.Value(name, data=np.asarray(value, np.int64))
        return name

    def add(op_type: str, inputs: list[str], hint: str, **attrs) -> str:
        out = f"{base}/{hint}"
        body.nodes.append(ir.Node(op_type, inputs, [out], attrs, out))
        return out

    examples = [add("Gather", [v, index], f"example{k}", axis=0) for k, v in enumerate(operands)]
    if lengths:
        length = add("Reshape", [add("Gather", [lengths, index], "length", axis=0), constant("one", [1])],
                     "length_1d")
        zero, axis0 = constant("zero", [0]), constant("axis0", [0])
        full = add("Shape", [examples[states]], "full_length", start=0, end=1)
        for k in range(states, len(examples)):
            examples[k] = add("Slice", [examples[k], zero, length, axis0], f"cut{k}")
    scan_outputs = [f"{base}/out{k}" for k in range(len(node.outputs))]
    attrs = {"body": node.attrs["body"], "num_scan_inputs": scans}
    if node.attrs.get("directions"):
        attrs["scan_input_directions"] = list(node.attrs["directions"])
    body.nodes.append(ir.Node("Scan", examples, list(scan_outputs), attrs, f"{base}/scan"))
    if lengths:
        pads = add("Concat", [zero, add("Sub", [full, length], "gap")], "pads", axis=0)
        for k in range(states, len(scan_outputs)):
            scan_outputs[k] = add("Pad", [scan_outputs[k], pads, "", axis0], f"padded{k}")
    body.outputs = [add("Identity", [cond], "cond_out"), *scan_outputs]
    batch = ctx.fresh(f"{base}_batch")
    shape = ctx.fresh(f"{base}_shape")
    return [ir.Node("Shape", [operands[-1]], [shape], {"start": 0, "end": 1}, f"{base}/shape"),
            ir.Node("Squeeze", [shape], [batch], {}, f"{base}/batch"),
            ir.Node("Loop", [batch, ""], list(node.outputs), {"body": body}, f"{base}/batches")]
