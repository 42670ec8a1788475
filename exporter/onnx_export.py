"""ONNX out: an IR model becomes an ``onnx.ModelProto`` that onnxruntime and ``onnx.checker`` accept.

    proto = to_onnx(model)
    onnx.save(proto, "model.onnx")

Constants become initializers (of the graph that holds them, subgraphs included), nested graphs
become If/Loop/Scan bodies, and flowstack's fused ops are written back as the two standard ops
they stand for. Types missing from the IR are filled in by ONNX shape inference.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from exporter import ir
from exporter.passes.graph_edit import copy_graph, rename_value
from schemas import UnsupportedOpError, dtypes, get_schema, has_schema
from schemas.ops.fused import ACTIVATIONS
from schemas.ops.fused import DOMAIN as FUSED_DOMAIN

# Imported graphs hold nodes in the current-opset forms (see exporter.onnx_upgrade: e.g. the
# Reduce ops' axes as an input), so an older opset number must be raised to where those exist.
MIN_OPSET = 18

_FUSED_BASE = {"FusedConv": "Conv", "FusedGemm": "Gemm"}
_CHANNELS_LAST = {"ChannelsLastConv", "ChannelsLastMaxPool"}

_ATTR_TYPES = {
    "int": onnx.AttributeProto.INT,
    "float": onnx.AttributeProto.FLOAT,
    "string": onnx.AttributeProto.STRING,
    "ints": onnx.AttributeProto.INTS,
    "floats": onnx.AttributeProto.FLOATS,
    "strings": onnx.AttributeProto.STRINGS,
    "tensor": onnx.AttributeProto.TENSOR,
    "graph": onnx.AttributeProto.GRAPH,
}


def to_onnx(model: ir.Model, opset: int | None = None) -> onnx.ModelProto:
    """Write ``model`` as ONNX (opset: the model's, at least ``MIN_OPSET``, unless given).

    Raises ``UnsupportedOpError`` naming the node for ops that have no ONNX form (training ops).
    """
    version = opset or max(model.opset_imports.get("", MIN_OPSET), MIN_OPSET)
    writer = _GraphWriter()
    graph = writer.graph(model.graph, _public_names(model))
    opsets = [helper.make_opsetid("", version)]
    opsets += [helper.make_opsetid(d, v) for d, v in model.opset_imports.items() if d not in ("", FUSED_DOMAIN)]
    proto = helper.make_model(graph, opset_imports=opsets, producer_name="flowstack", producer_version="0.1.0")
    proto.ir_version = helper.find_min_ir_version_for(list(proto.opset_import), ignore_unknown=True)
    for key, value in model.metadata.items():
        proto.metadata_props.add(key=key, value=str(value))
    return _fill_types(proto)


def _public_names(model: ir.Model) -> dict[str, str]:
    """Value name -> public name, from the serving_default signature (ONNX has only value names)."""
    sig = model.signatures.get("serving_default")
    if sig is None:
        return {}
    names = {v: k for k, v in sig.inputs.items()}
    names.update({v: k for k, v in sig.outputs.items()})
    return {v: k for v, k in names.items() if v != k}


class _GraphWriter:
    def __init__(self) -> None:
        self._count = 0

    def graph(self, g: ir.Graph, renames: dict[str, str] | None = None) -> onnx.GraphProto:
        renames = renames or {}
        if renames:
            g = _renamed(g, renames)
        initializers = [self._tensor(v.data, n) for n, v in g.values.items() if v.data is not None]
        nodes: list[onnx.NodeProto] = []
        for node in g.nodes:
            nodes.extend(self.node(g, node, initializers))
        inputs = [self._value_info(g, n) for n in g.inputs]
        outputs = [self._value_info(g, n) for n in g.outputs]
        return helper.make_graph(nodes, g.name, inputs, outputs, initializers)

    def node(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        if node.domain == FUSED_DOMAIN and node.op_type in _FUSED_BASE:
            return self._expand_fused(g, node, initializers)
        if node.domain == FUSED_DOMAIN and node.op_type == "FusedConvMaxPool":
            return self._expand_conv_max_pool(g, node, initializers)
        if node.domain == FUSED_DOMAIN and node.op_type == "FusedConvPointwise":
            return self._expand_conv_pointwise(g, node, initializers)
        if node.domain == FUSED_DOMAIN and node.op_type == "FusedPointwiseConv":
            return self._expand_pointwise_conv(g, node, initializers)
        if node.domain == FUSED_DOMAIN and node.op_type in _CHANNELS_LAST:
            return self._expand_channels_last(g, node, initializers)
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(
                f"node {node.name!r} (op {node.domain}::{node.op_type}) has no ONNX form; "
                "export the inference graph (freeze prunes training ops)"
            )
        attrs = [self._attribute(node, k, v) for k, v in node.attrs.items() if v is not None]
        proto = helper.make_node(node.op_type, node.inputs, node.outputs, name=node.name or None)
        proto.attribute.extend(attrs)
        return [proto]

    def _expand_fused(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        base = _FUSED_BASE[node.op_type]
        attrs = {k: v for k, v in node.attrs.items() if k not in ("activation", "activation_params")}
        activation = node.attrs["activation"]
        params = list(node.attrs.get("activation_params") or [])
        linear_out = self._fresh(g, f"{node.outputs[0]}_{base.lower()}")
        name = node.name or node.outputs[0]
        linear = ir.Node(base, list(node.inputs), [linear_out], attrs, name)
        act_inputs, act_attrs = [linear_out], {}
        if activation == "Clip":
            for bound, default in zip(params, (-np.inf, np.inf)):
                if bound == default:
                    act_inputs.append("")
                else:
                    const = self._fresh(g, f"{name}_clip_bound")
                    initializers.append(numpy_helper.from_array(np.asarray(bound, dtype=self._float_type(g, node)), const))
                    act_inputs.append(const)
            while act_inputs[-1] == "":
                act_inputs.pop()
        else:
            act_attrs = dict(zip(ACTIVATIONS[activation], params))
        act = ir.Node(activation, act_inputs, list(node.outputs), act_attrs, f"{name}_{activation.lower()}")
        return self.node(g, linear, initializers) + self.node(g, act, initializers)

    def _expand_conv_max_pool(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        """(Fused)Conv, then MaxPool with the ``pool_`` attributes."""
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("pool_")}
        if not attrs.get("activation"):
            attrs = {k: v for k, v in attrs.items() if k not in ("activation", "activation_params")}
        base, domain = ("FusedConv", FUSED_DOMAIN) if attrs.get("activation") else ("Conv", "")
        name = node.name or node.outputs[0]
        conv_out = self._fresh(g, f"{node.outputs[0]}_conv")
        pool_attrs = {k[len("pool_"):]: v for k, v in node.attrs.items() if k.startswith("pool_")}
        return (self.node(g, ir.Node(base, list(node.inputs), [conv_out], attrs, name, domain), initializers)
                + self.node(g, ir.Node("MaxPool", [conv_out], list(node.outputs), pool_attrs, f"{name}_max_pool"),
                            initializers))

    def _expand_conv_pointwise(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        """(Fused)Conv, then the 1x1 (Fused)Conv with the ``pointwise_`` activation."""
        name = node.name or node.outputs[0]
        conv_out = self._fresh(g, f"{node.outputs[0]}_conv")
        inputs = list(node.inputs) + [""] * (5 - len(node.inputs))
        return self._two_convolutions(g, node, initializers, (
            ("", inputs[:3], [conv_out], name),
            ("pointwise_", [conv_out, inputs[3], inputs[4]], list(node.outputs), f"{name}_pointwise"),
        ))

    def _expand_pointwise_conv(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        """The 1x1 (Fused)Conv with the ``pointwise_`` activation, then the windowed (Fused)Conv."""
        name = node.name or node.outputs[0]
        pointwise_out = self._fresh(g, f"{node.outputs[0]}_pointwise")
        inputs = list(node.inputs) + [""] * (5 - len(node.inputs))
        return self._two_convolutions(g, node, initializers, (
            ("pointwise_", inputs[:3], [pointwise_out], f"{name}_pointwise"),
            ("", [pointwise_out, inputs[3], inputs[4]], list(node.outputs), name),
        ))

    def _two_convolutions(self, g: ir.Graph, node: ir.Node, initializers: list, steps_spec) -> list[onnx.NodeProto]:
        """The two (Fused)Convs of a FusedConvPointwise or FusedPointwiseConv: for each ``(prefix,
        inputs, outputs, name)`` the ``<prefix>activation``; the window attributes go to the
        convolution without a prefix, the 1x1 one takes the defaults."""
        window = {k: v for k, v in node.attrs.items() if not k.startswith("pointwise_")}
        steps = []
        for prefix, ins, outs, label in steps_spec:
            attrs = {} if prefix else window
            activation = node.attrs.get(f"{prefix}activation") or ""
            attrs = {k: v for k, v in attrs.items() if k not in ("activation", "activation_params")}
            if activation:
                attrs.update(activation=activation, activation_params=list(node.attrs.get(f"{prefix}activation_params") or []))
            while ins and not ins[-1]:
                ins = ins[:-1]
            base, domain = ("FusedConv", FUSED_DOMAIN) if activation else ("Conv", "")
            steps += self.node(g, ir.Node(base, ins, outs, attrs, label, domain), initializers)
        return steps

    def _expand_channels_last(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        """Transpose to (N, C, spatial...), the planar op (weights back to (M, C, kernel...)), transpose back."""
        name = node.name or node.outputs[0]
        conv = node.op_type == "ChannelsLastConv"
        rank = g.values[node.inputs[1]].data.ndim if conv else len(node.attrs["kernel_shape"]) + 2
        planar_in, planar_out = self._fresh(g, f"{node.inputs[0]}_planar"), self._fresh(g, f"{node.outputs[0]}_planar")
        inputs, attrs = [planar_in, *node.inputs[1:]], dict(node.attrs)
        base, domain = "MaxPool", ""
        if conv:
            inputs[1] = self._fresh(g, f"{node.inputs[1]}_oihw")
            initializers.append(self._tensor(np.moveaxis(g.values[node.inputs[1]].data, -1, 1), inputs[1]))
            base, domain = ("FusedConv", FUSED_DOMAIN) if attrs.get("activation") else ("Conv", "")
            if base == "Conv":
                attrs = {k: v for k, v in attrs.items() if k not in ("activation", "activation_params")}
        planar = ir.Node(base, inputs, [planar_out], attrs, name, domain)
        spatial = list(range(2, rank))
        return (self.node(g, ir.Node("Transpose", [node.inputs[0]], [planar_in], {"perm": [0, rank - 1, *range(1, rank - 1)]},
                                     f"{name}_to_planar"), initializers)
                + self.node(g, planar, initializers)
                + self.node(g, ir.Node("Transpose", [planar_out], list(node.outputs), {"perm": [0, *spatial, 1]},
                                       f"{name}_to_channels_last"), initializers))

    @staticmethod
    def _float_type(g: ir.Graph, node: ir.Node) -> np.dtype:
        w = g.values.get(node.inputs[1])
        return w.data.dtype if w is not None and w.data is not None else np.dtype(np.float32)

    def _fresh(self, g: ir.Graph, hint: str) -> str:
        self._count += 1
        name = f"{hint}__{self._count}"
        while name in g.values:
            self._count += 1
            name = f"{hint}__{self._count}"
        return name

    def _attribute(self, node: ir.Node, key: str, value: Any) -> onnx.AttributeProto:
        declared = None
        if has_schema(node.op_type, node.domain) and key in get_schema(node.op_type, node.domain).attrs:
            declared = get_schema(node.op_type, node.domain).attrs[key].type
        if isinstance(value, ir.Graph):
            return helper.make_attribute(key, self.graph(value))
        if isinstance(value, np.ndarray):
            return helper.make_attribute(key, self._tensor(value, key))
        if isinstance(value, (list, tuple)):
            if declared == "floats":
                value = [float(v) for v in value]
            elif declared == "ints":
                value = [int(v) for v in value]
            if not value:
                return helper.make_attribute(key, [], attr_type=_ATTR_TYPES.get(declared or "ints"))
        elif declared == "float":
            value = float(value)
        elif declared == "int":
            value = int(value)
        return helper.make_attribute(key, value)

    @staticmethod
    def _tensor(data: np.ndarray, name: str) -> onnx.TensorProto:
        data = np.asarray(data)
        if data.dtype == object:
            data = np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])(data)
        return numpy_helper.from_array(data, name)

    @staticmethod
    def _value_info(g: ir.Graph, name: str) -> onnx.ValueInfoProto:
        value = g.values.get(name)
        code = value.dtype if value is not None else None
        if value is not None and value.data is not None:
            code = dtypes.from_numpy(value.data.dtype)
        if not code or code in (dtypes.SEQUENCE, dtypes.OPTIONAL):
            return onnx.ValueInfoProto(name=name)  # typed later by shape inference
        shape = None if value.shape is None else [None if d < 0 else d for d in value.shape]
        return helper.make_tensor_value_info(name, code, shape)


def _renamed(g: ir.Graph, renames: dict[str, str]) -> ir.Graph:
    """The main graph with signature names as value names (inputs and outputs are then public)."""
    g = copy_graph(g)
    for old, new in renames.items():
        if new in g.values or any(new in n.outputs for n in g.nodes):
            continue  # the public name is taken by another value; keep the internal one
        if old in g.inputs:
            g.inputs = [new if n == old else n for n in g.inputs]
        rename_value(g, old, new)
    return g


def _fill_types(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Give graph outputs (main and nested) whose type the IR did not know the inferred one."""
    if all(v.HasField("type") for v in proto.graph.output):
        return proto
    inferred = onnx.shape_inference.infer_shapes(proto)
    known = {v.name: v.type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for v in proto.graph.output:
        if not v.HasField("type") and v.name in known:
            v.type.CopyFrom(known[v.name])
    return proto
