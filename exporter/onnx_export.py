"""ONNX out: an IR model becomes an ``onnx.ModelProto`` that onnxruntime and ``onnx.checker`` accept.

    proto = to_onnx(model)
    onnx.save(proto, "model.onnx")

Constants become initializers (of the graph that holds them, subgraphs included), nested graphs
become If/Loop/Scan bodies, flowstack's fused ops are written back as the two standard ops they
stand for, and ops ONNX deprecated (Scatter, Upsample) as their replacements. Types missing from
the IR are filled in by ONNX shape inference. The opset is the model's, kept within what
onnxruntime reads where the nodes allow.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edge_runtime.kernels import has_kernel
from exporter import ir
from exporter.onnx_import import every_node
from exporter.onnx_upgrade import form_opset
from exporter.passes.graph_edit import copy_graph, rename_value
from schemas import UnsupportedOpError, dtypes, get_schema, has_schema
from schemas.ops.fused import ACTIVATIONS
from schemas.ops.fused import DOMAIN as FUSED_DOMAIN
from schemas.ops.ml import ML as ML_DOMAIN

# Imported graphs hold nodes in the current-opset forms (see exporter.onnx_upgrade: e.g. the
# Reduce ops' axes as an input), so an older opset number must be raised to where those exist.
MIN_OPSET = 18
# The newest opset onnxruntime 1.31 reads. A model declaring a newer one is written at this one
# unless one of its nodes has a form that only the newer opsets define.
MAX_OPSET = 26

_FUSED_BASE = {"FusedConv": "Conv", "FusedGemm": "Gemm"}

# ONNX's own domains beside the default one: their ops are written as they are, in their domain
# (FlexAttention, the training optimizers), at version 1 of the preview ones unless the model says.
ONNX_DOMAINS = (ML_DOMAIN, "ai.onnx.preview", "ai.onnx.preview.training")

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
    """Write ``model`` as ONNX (opset: unless given, the model's, at least ``MIN_OPSET`` and, where its
    nodes allow, at most ``MAX_OPSET``; the IR version: the oldest that opset allows).

    Raises ``UnsupportedOpError`` naming the node for ops that have no ONNX form (training ops), or
    the input whose type ONNX needs and the IR does not record.
    """
    writer = _GraphWriter()
    graph = writer.graph(model.graph, _public_names(model))
    _check_inputs_typed(graph)
    version = opset or _default_opset(graph, model.opset_imports.get("", MIN_OPSET))
    opsets = [helper.make_opsetid("", version)]
    opsets += [helper.make_opsetid(d, v) for d, v in model.opset_imports.items() if d not in ("", FUSED_DOMAIN)]
    ml_ops = {n.op_type for n in every_node(graph) if n.domain == ML_DOMAIN}
    if ml_ops and ML_DOMAIN not in model.opset_imports:  # a graph built here: TreeEnsemble needs ai.onnx.ml 5
        opsets.append(helper.make_opsetid(ML_DOMAIN, 5 if "TreeEnsemble" in ml_ops else 3))
    preview = {n.domain for n in every_node(graph)} & set(ONNX_DOMAINS[1:])
    opsets += [helper.make_opsetid(d, 1) for d in sorted(preview - set(model.opset_imports))]
    proto = helper.make_model(graph, opset_imports=opsets, producer_name="flowstack", producer_version="0.1.0")
    proto.ir_version = helper.find_min_ir_version_for(list(proto.opset_import), ignore_unknown=True)
    for key, value in model.metadata.items():
        proto.metadata_props.add(key=key, value=str(value))
    return _fill_types(proto)


def _check_inputs_typed(graph: onnx.GraphProto) -> None:
    """A graph input must be declared with its type, and shape inference cannot recover an input's:
    an input whose (element) type the IR does not know, as a sequence imported without one, has no
    ONNX declaration."""
    for value in graph.input:
        if not value.HasField("type"):
            raise UnsupportedOpError(f"graph input {value.name!r} has a type the IR does not fully record (a sequence "
                                     "or an optional without its element type, or an undefined element type); ONNX "
                                     "cannot declare it")


def _default_opset(graph: onnx.GraphProto, declared: int) -> int:
    """The declared opset, within [MIN_OPSET, MAX_OPSET] where every node has the same form there,
    raised where a node needs more: the IR holds each op in its upgraded form
    (``exporter.onnx_upgrade.form_opset``), and an op first versioned above MAX_OPSET keeps its opset.
    """
    version = max(min(declared, MAX_OPSET), MIN_OPSET)
    for node in every_node(graph):
        if node.domain in ("", "ai.onnx"):
            version = max(version, form_opset(node.op_type), _since_version(node.op_type, declared))
    return version


@functools.cache
def _since_version(op_type: str, opset: int) -> int:
    """The opset that introduced the version of ``op_type`` in force at ``opset`` (for an op the writer
    introduces that ``opset`` predates, its first version)."""
    try:
        return onnx.defs.get_schema(op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        versions = [s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op_type and not s.domain]
        return min(versions, default=1)


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
        self._like: dict[str, str] = {}  # a made-up name -> the value whose element type it has

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
        # Constants an expansion replaced (a channels-last weight, written back planar) or that no
        # node reads would otherwise be written too, doubling the weights.
        read = {n for node in nodes for n in _reads(node)} | set(g.outputs)
        initializers = [t for t in initializers if t.name in read]
        return helper.make_graph(nodes, g.name, inputs, outputs, initializers)

    def node(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        if node.domain == FUSED_DOMAIN and node.op_type in _EXPANSIONS:
            return _EXPANSIONS[node.op_type](self, g, node, initializers)
        if node.domain in ("", "ai.onnx") and node.op_type in _REPLACEMENTS:
            node = _REPLACEMENTS[node.op_type](node)
        if node.domain not in ("", "ai.onnx", *ONNX_DOMAINS):
            # Ops the edge runtime runs (MatrixInverse) have no standard equivalent; the rest are training ops.
            hint = ("no standard ONNX op computes it" if has_kernel(node.op_type, node.domain)
                    else "export the inference graph (freeze prunes training ops)")
            raise UnsupportedOpError(f"node {node.name!r} (op {node.domain}::{node.op_type}) has no ONNX form; {hint}")
        attrs = [self._attribute(node, k, v) for k, v in node.attrs.items() if v is not None]
        proto = helper.make_node(node.op_type, node.inputs, node.outputs, name=node.name or None,
                                 domain=node.domain if node.domain in ONNX_DOMAINS else None)
        proto.attribute.extend(attrs)
        return [proto]

    def _expand_fused(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        base = _FUSED_BASE[node.op_type]
        attrs = {k: v for k, v in node.attrs.items() if k not in ("activation", "activation_params")}
        linear_out = self._fresh(g, f"{node.outputs[0]}_{base.lower()}", like=node.outputs[0])
        name = node.name or node.outputs[0]
        linear = ir.Node(base, list(node.inputs), [linear_out], attrs, name)
        return self.node(g, linear, initializers) + self._activation(g, node, linear_out, initializers)

    def _expand_matmul(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        """MatMul, Add of the bias, then the activation (each where the node has it)."""
        name = node.name or node.outputs[0]
        activation = node.attrs.get("activation") or ""
        bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else ""
        product = self._fresh(g, f"{node.outputs[0]}_matmul", like=node.outputs[0]) if bias or activation else node.outputs[0]
        steps = self.node(g, ir.Node("MatMul", list(node.inputs[:2]), [product], {}, name), initializers)
        if bias:
            biased = self._fresh(g, f"{node.outputs[0]}_add", like=node.outputs[0]) if activation else node.outputs[0]
            steps += self.node(g, ir.Node("Add", [product, bias], [biased], {}, f"{name}_bias"), initializers)
            product = biased
        return steps + (self._activation(g, node, product, initializers) if activation else [])

    def _activation(self, g: ir.Graph, node: ir.Node, source: str, initializers: list) -> list[onnx.NodeProto]:
        """The standard op of ``node``'s activation, reading ``source`` and writing ``node``'s output."""
        activation = node.attrs["activation"]
        params = list(node.attrs.get("activation_params") or [])
        name = node.name or node.outputs[0]
        act_inputs, act_attrs = [source], {}
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
        return self.node(g, act, initializers)

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

    def _expand_squeeze_excite(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        """ReduceMean over the spatial axes, the gate's two 1x1 convolutions, Mul, the projection:
        planar (Fused)Convs, or ChannelsLastConvs and a FusedMatMul (written back as their own expansions)."""
        name = node.name or node.outputs[0]
        channels_last = bool(node.attrs.get("channels_last"))
        inputs = list(node.inputs) + [""] * (7 - len(node.inputs))
        x, w_reduce = inputs[0], g.values.get(inputs[1])
        rank = w_reduce.data.ndim if w_reduce is not None and w_reduce.data is not None else len(g.values[x].shape)
        axes = self._fresh(g, f"{name}_axes")
        initializers.append(self._tensor(np.arange(1, rank - 1) if channels_last else np.arange(2, rank), axes))
        mean, hidden, gate, gated = (self._fresh(g, f"{name}_{part}", like=x) for part in ("mean", "reduce", "gate", "gated"))

        def conv(prefix: str, ins: list[str], out: str, label: str) -> list[onnx.NodeProto]:
            while not ins[-1]:
                ins = ins[:-1]
            activation = node.attrs.get(f"{prefix}activation") or ""
            attrs = {"activation": activation, "activation_params": list(node.attrs.get(f"{prefix}activation_params") or [])}
            if channels_last and not prefix:  # the projection's (C, M) weights: MatMul, Add, the activation
                made = ir.Node("FusedMatMul", ins, [out], attrs, label, FUSED_DOMAIN)
            elif channels_last:
                made = ir.Node("ChannelsLastConv", ins, [out], {"kernel_shape": [1] * (rank - 2), **attrs}, label, FUSED_DOMAIN)
            elif activation:
                made = ir.Node("FusedConv", ins, [out], attrs, label, FUSED_DOMAIN)
            else:
                made = ir.Node("Conv", ins, [out], {}, label)
            return self.node(g, made, initializers)

        return (self.node(g, ir.Node("ReduceMean", [x, axes], [mean], {"keepdims": 1}, f"{name}_mean"), initializers)
                + conv("reduce_", [mean, *inputs[1:3]], hidden, f"{name}_reduce")
                + conv("gate_", [hidden, *inputs[3:5]], gate, f"{name}_gate")
                + self.node(g, ir.Node("Mul", [x, gate], [gated], {}, f"{name}_mul"), initializers)
                + conv("", [gated, *inputs[5:7]], node.outputs[0], name))

    def _expand_channels_last(self, g: ir.Graph, node: ir.Node, initializers: list) -> list[onnx.NodeProto]:
        """Transpose to (N, C, spatial...), the planar op (weights back to (M, C, kernel...)), transpose back."""
        name = node.name or node.outputs[0]
        conv = node.op_type == "ChannelsLastConv"
        rank = g.values[node.inputs[1]].data.ndim if conv else len(node.attrs["kernel_shape"]) + 2
        planar_in = self._fresh(g, f"{node.inputs[0]}_planar", like=node.inputs[0])
        planar_out = self._fresh(g, f"{node.outputs[0]}_planar", like=node.outputs[0])
        inputs, attrs = [planar_in, *node.inputs[1:]], dict(node.attrs)
        base, domain = "MaxPool", ""
        if conv:
            inputs[1] = self._fresh(g, f"{node.inputs[1]}_oihw", like=node.inputs[1])
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

    def _float_type(self, g: ir.Graph, node: ir.Node) -> np.dtype:
        """The element type of ``node``'s data, for the constants its expansion adds (Clip's bounds):
        its weights', its input's or its output's, looking through the names this writer made up."""
        for name in (*node.inputs[1:2], *node.inputs[:1], *node.outputs):
            while name in self._like:
                name = self._like[name]
            value = g.values.get(name)
            if value is not None and value.data is not None:
                return value.data.dtype
            if value is not None and value.dtype and dtypes.is_known(value.dtype):
                try:
                    return dtypes.to_numpy(value.dtype)
                except dtypes.DTypeError:
                    continue
        return np.dtype(np.float32)

    def _fresh(self, g: ir.Graph, hint: str, like: str | None = None) -> str:
        """A name no value of ``g`` has; ``like``: the value whose element type it has."""
        self._count += 1
        name = f"{hint}__{self._count}"
        while name in g.values:
            self._count += 1
            name = f"{hint}__{self._count}"
        if like:
            self._like[name] = like
        return name

    def _attribute(self, node: ir.Node, key: str, value: Any) -> onnx.AttributeProto:
        declared = None
        if has_schema(node.op_type, node.domain) and key in get_schema(node.op_type, node.domain).attrs:
            declared = get_schema(node.op_type, node.domain).attrs[key].type
        if isinstance(value, ir.Graph):
            return helper.make_attribute(key, self.graph(value))
        if isinstance(value, np.ndarray) and declared not in (None, "tensor"):
            value = value.tolist()  # a list (or number) held as an array, not a tensor attribute
        if declared in ("ints", "floats", "strings") and not isinstance(value, (list, tuple, np.ndarray)):
            value = [value]
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
        if value is None:
            return onnx.ValueInfoProto(name=name)  # typed later by shape inference
        if value.data is not None:  # a constant graph output: its data says
            t = ir.ElementType(dtypes.from_numpy(value.data.dtype), tuple(value.data.shape))
        else:
            t = ir.ElementType(value.dtype, value.shape, value.element)
        proto = _type_proto(t)
        if proto is None:
            return onnx.ValueInfoProto(name=name)
        return helper.make_value_info(name, proto)


def _type_proto(t: ir.ElementType) -> onnx.TypeProto | None:
    """``t`` as ONNX declares it, or None where the IR does not know it fully (an undefined element
    type, a sequence or optional of unknown elements)."""
    if t.dtype in _CONTAINER_TYPES:
        inner = None if t.element is None else _type_proto(t.element)
        return None if inner is None else _CONTAINER_TYPES[t.dtype](inner)
    if not t.dtype:
        return None
    shape = None if t.shape is None else [None if d < 0 else d for d in t.shape]
    return helper.make_tensor_type_proto(t.dtype, shape)


_CONTAINER_TYPES: dict[int, Callable[[onnx.TypeProto], onnx.TypeProto]] = {
    dtypes.SEQUENCE: helper.make_sequence_type_proto,
    dtypes.OPTIONAL: helper.make_optional_type_proto,
}


_Expansion = Callable[[_GraphWriter, ir.Graph, ir.Node, list], "list[onnx.NodeProto]"]

# flowstack op -> how it is written as standard ops.
_EXPANSIONS: dict[str, _Expansion] = {
    "FusedConv": _GraphWriter._expand_fused,
    "FusedGemm": _GraphWriter._expand_fused,
    "FusedConvMaxPool": _GraphWriter._expand_conv_max_pool,
    "FusedConvPointwise": _GraphWriter._expand_conv_pointwise,
    "FusedPointwiseConv": _GraphWriter._expand_pointwise_conv,
    "ChannelsLastConv": _GraphWriter._expand_channels_last,
    "SqueezeExciteConv": _GraphWriter._expand_squeeze_excite,
    "FusedMatMul": _GraphWriter._expand_matmul,
    "ChannelsLastMaxPool": _GraphWriter._expand_channels_last,
}


def _scatter_elements(node: ir.Node) -> ir.Node:
    """Scatter, deprecated since opset 11, is ScatterElements under its old name."""
    return ir.Node("ScatterElements", list(node.inputs), list(node.outputs), dict(node.attrs), node.name)


def _resize(node: ir.Node) -> ir.Node:
    """Upsample, deprecated since opset 10, is Resize with its conventions (as the edge kernel runs it)."""
    attrs = {"mode": node.attrs.get("mode") or "nearest", "coordinate_transformation_mode": "asymmetric",
             "nearest_mode": "floor"}
    return ir.Node("Resize", [node.inputs[0], "", node.inputs[1]], list(node.outputs), attrs, node.name)


def _optional(node: ir.Node) -> ir.Node:
    """Optional's ``type`` is a TypeProto the IR keeps as ``ir.ElementType``'s text: it is needed
    only without an input (an empty optional), and then written back as the TypeProto."""
    text = node.attrs.get("type")
    if text is None or isinstance(text, onnx.TypeProto):
        return node
    attrs = {k: v for k, v in node.attrs.items() if k != "type"}
    if not (node.inputs and node.inputs[0]):
        try:
            proto = _type_proto(ir.ElementType.parse(str(text)))
        except ValueError:
            proto = None
        if proto is None:
            raise UnsupportedOpError(f"node {node.name!r} (op Optional): its type {text!r} (the element type of an "
                                     "empty optional) cannot be written back to ONNX")
        attrs["type"] = proto
    return ir.Node(node.op_type, list(node.inputs), list(node.outputs), attrs, node.name, node.domain)


# Standard ops the IR keeps in a form that ONNX deprecated or that must be rewritten -> that rewrite.
_REPLACEMENTS: dict[str, Callable[[ir.Node], ir.Node]] = {
    "Scatter": _scatter_elements,
    "Upsample": _resize,
    "Optional": _optional,
}


def _reads(node: onnx.NodeProto) -> Iterator[str]:
    """The names ``node`` reads, those its nested graphs read included (outer-scope captures)."""
    yield from (n for n in node.input if n)
    for attr in node.attribute:
        for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
            for inner in sub.node:
                yield from _reads(inner)
            yield from (o.name for o in sub.output)


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
