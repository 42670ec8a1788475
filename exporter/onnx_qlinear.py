"""onnxruntime's QOperator models as standard ops: each quantized-linear op becomes
``DequantizeLinear`` on its inputs, the float op, and ``QuantizeLinear`` on its output.

``onnxruntime.quantization.quantize_static(..., quant_format=QOperator)`` writes ``QLinearConv``
and ``QLinearMatMul`` (ONNX) and ``QGemm``, ``QLinearAdd``, ``QLinearSoftmax``... (the
``com.microsoft`` domain). Expanded at import, they run on the kernels every model uses, and
``exporter.onnx_dequantize`` then folds the dequantized weights into float constants and drops
the activations' quantize/dequantize pairs, leaving the float model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from exporter.ir import unused_name

MICROSOFT = "com.microsoft"


@dataclass(frozen=True)
class QLinearOp:
    """How a quantized-linear op maps onto its float op: (data, scale, zero point) input triples,
    the output's (scale, zero point) inputs (None: the op outputs float), the int32 bias input
    (scaled by the first two inputs' scales), and the attributes the float op keeps."""

    float_op: str
    operands: tuple[tuple[int, int, int], ...]
    output: tuple[int, int] | None
    bias: int | None = None
    attributes: tuple[str, ...] = ()
    fixed: dict = field(default_factory=dict)  # attributes that must have this value to expand


_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_BINARY = ((0, 1, 2), (3, 4, 5))

QLINEAR_OPS: dict[tuple[str, str], QLinearOp] = {
    ("", "QLinearConv"): QLinearOp("Conv", _BINARY, (6, 7), bias=8, attributes=_CONV_ATTRS),
    ("", "QLinearMatMul"): QLinearOp("MatMul", _BINARY, (6, 7)),
    (MICROSOFT, "QGemm"): QLinearOp("Gemm", _BINARY, (7, 8), bias=6, attributes=("alpha", "transA", "transB")),
    (MICROSOFT, "QLinearAdd"): QLinearOp("Add", _BINARY, (6, 7)),
    (MICROSOFT, "QLinearMul"): QLinearOp("Mul", _BINARY, (6, 7)),
    (MICROSOFT, "QLinearSoftmax"): QLinearOp("Softmax", ((0, 1, 2),), (3, 4), attributes=("axis",)),
    (MICROSOFT, "QLinearSigmoid"): QLinearOp("Sigmoid", ((0, 1, 2),), (3, 4)),
    (MICROSOFT, "QLinearLeakyRelu"): QLinearOp("LeakyRelu", ((0, 1, 2),), (3, 4), attributes=("alpha",)),
    (MICROSOFT, "QLinearGlobalAveragePool"): QLinearOp("GlobalAveragePool", ((0, 1, 2),), (3, 4),
                                                       fixed={"channels_last": 0}),
}


def _key(node: onnx.NodeProto) -> tuple[str, str]:
    return ("" if node.domain in ("", "ai.onnx") else node.domain, node.op_type)


def _input(node: onnx.NodeProto, index: int) -> str:
    return node.input[index] if index < len(node.input) else ""


class _Expander:
    def __init__(self, graph: onnx.GraphProto):
        self.graph = graph
        self.initializers = {t.name: t for t in graph.initializer}
        self.taken = {n for node in graph.node for n in (*node.input, *node.output)} | set(self.initializers)

    def name(self, hint: str) -> str:
        candidate = unused_name(hint, self.taken)
        self.taken.add(candidate)
        return candidate

    def constant(self, name: str) -> np.ndarray | None:
        tensor = self.initializers.get(name)
        return None if tensor is None else numpy_helper.to_array(tensor)

    def add_constant(self, hint: str, value: np.ndarray) -> str:
        name = self.name(hint)
        tensor = numpy_helper.from_array(value, name)
        self.graph.initializer.append(tensor)
        self.initializers[name] = tensor
        return name

    def expand(self, node: onnx.NodeProto, spec: QLinearOp) -> list[onnx.NodeProto] | None:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if any(attrs.get(k, v) != v for k, v in spec.fixed.items()):
            return None
        label = node.name or node.output[0]
        nodes, floats = [], []
        for data, scale, zero_point in spec.operands:
            out = self.name(f"{_input(node, data)}/dequantized")
            inputs = [_input(node, data), _input(node, scale), _input(node, zero_point)]
            nodes.append(helper.make_node("DequantizeLinear", inputs if inputs[2] else inputs[:2], [out],
                                          name=f"{label}/dequantize_{len(floats)}", **self._axis(node, data, scale)))
            floats.append(out)
        if spec.bias is not None and _input(node, spec.bias):
            bias = self._bias(node, spec, label)
            if bias is None:
                return None
            nodes.append(bias[0])
            floats.append(bias[1])
        kept = {k: v for k, v in attrs.items() if k in spec.attributes}
        if spec.output is None or not _input(node, spec.output[0]):
            nodes.append(helper.make_node(spec.float_op, floats, list(node.output), name=label, **kept))
            return nodes
        result = self.name(f"{node.output[0]}/float")
        nodes.append(helper.make_node(spec.float_op, floats, [result], name=label, **kept))
        scale, zero_point = (_input(node, i) for i in spec.output)
        nodes.append(helper.make_node("QuantizeLinear", [result, scale] + ([zero_point] if zero_point else []),
                                      list(node.output), name=f"{label}/quantize"))
        return nodes

    def _axis(self, node: onnx.NodeProto, data: int, scale: int) -> dict:
        """Per-channel weight scales run along the output-channel axis of the weight."""
        value = self.constant(_input(node, scale))
        if value is None or value.size <= 1:
            return {}
        weight = self.constant(_input(node, data))
        if node.op_type == "QGemm":
            trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
            return {"axis": 0 if trans_b else 1}
        if node.op_type == "QLinearMatMul" and weight is not None:
            return {"axis": weight.ndim - 1}
        return {"axis": 0}

    def _bias(self, node: onnx.NodeProto, spec: QLinearOp, label: str) -> tuple[onnx.NodeProto, str] | None:
        """The int32 bias as DequantizeLinear with scale = input scale x weight scale(s)."""
        (_, a_scale, _), (_, b_scale, _) = spec.operands
        a, b = self.constant(_input(node, a_scale)), self.constant(_input(node, b_scale))
        if a is None or b is None:
            return None
        scale = self.add_constant(f"{_input(node, spec.bias)}/scale",
                                  (a.astype(np.float32).reshape(()) * b.astype(np.float32).reshape(-1)).reshape(b.shape))
        out = self.name(f"{_input(node, spec.bias)}/dequantized")
        axis = {"axis": 0} if b.size > 1 else {}
        return helper.make_node("DequantizeLinear", [_input(node, spec.bias), scale], [out],
                                name=f"{label}/dequantize_bias", **axis), out


def expand_qlinear_ops(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with every quantized-linear op of the main graph expanded (the argument is left
    as it was; a model without any is returned as is)."""
    if not any(_key(node) in QLINEAR_OPS for node in proto.graph.node):
        return proto
    expanded = onnx.ModelProto()
    expanded.CopyFrom(proto)
    expander = _Expander(expanded.graph)
    nodes = []
    for node in expanded.graph.node:
        spec = QLINEAR_OPS.get(_key(node))
        replacement = expander.expand(node, spec) if spec is not None else None
        nodes.extend(replacement if replacement is not None else [node])
    del expanded.graph.node[:]
    expanded.graph.node.extend(nodes)
    used = {node.domain for node in nodes}
    kept = [o for o in expanded.opset_import if o.domain in used or o.domain in ("", "ai.onnx")]
    del expanded.opset_import[:]
    expanded.opset_import.extend(kept)
    return expanded
