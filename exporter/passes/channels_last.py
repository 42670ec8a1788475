"""Run chains of small-plane convolutions channels-last (``flowstack::ChannelsLastConv`` / ``ChannelsLastMaxPool``).

On NumPy a convolution over small planes is fastest channels-last: its columns are gathered in runs
of kernel_width * C contiguous values and the whole batch is one matmul, and a depthwise
convolution is one einsum over its taps (see ``edge_runtime.kernels.sliding_windows``). Converting
each convolution on its own would pay two transposes a node; this pass converts whole regions
instead: every qualifying convolution (group-1 ones, and depthwise and 1x1 ones on
planes up to DEPTHWISE_MAX_PIXELS), and the max pools, activations, Add/Mul/Sub/Max/Min of two
region values (broadcasts between them included), global pools and reductions keeping their axes
that read only region values, joined into connected regions. A Transpose enters a region and one
leaves it where a planar op or a graph output reads it, except where the reader is Flatten(axis=1)
feeding Gemms with constant weights: those weights' rows are permuted to the (spatial..., C) order
instead, so the region leaves with no copy at all. A region is converted only when it holds more
convolutions than it needs Transposes (MobileNetV2's pointwise pairs between planar depthwise
convolutions, one Transpose per convolution, measured 3% slower), one of them over a plane.

Converted values get new names (``<name>/nhwc``), so the parity check never compares a channels-last
tensor with the planar one of the same name; values leaving the region keep their names and layout.
"""

from __future__ import annotations

import math
from typing import Container

import numpy as np

from edge_runtime.kernels import sliding_windows
from exporter import ir
from exporter.passes.graph_edit import add_constant, all_graphs, constant, copy_model, fresh_name, readers
from schemas.ops.fused import ACTIVATIONS, DOMAIN
from schemas.ops.layout import to_channels_last as channels_last_shape

# Group-1 convolutions qualify with at least MIN_CHANNELS input channels (or exactly 1, where
# channels-last is the same memory order) on planes of any size: inside a region, free of the
# transposes a lone one pays, the channels-last kernel is as fast or faster than the planar one on
# every plane measured (one BLAS thread, planar -> channels-last ms: ResNet-18's 64@56x56 3x3 1.38
# -> 1.28, 128@28x28 1.29 -> 1.13, batch 8 of 128@28x28 9.97 -> 9.01, of 64@56x56 13.65 -> 13.68).
# With fewer channels a convolution qualifies on a plane of more than MAX_PIXELS outputs whose
# kernel rows span at least MIN_CHANNELS values (kernel_width * C): ResNet's 7x7 stride-2 stem of
# 3 channels 2.20 -> 1.83 ms, but a 3x3 one (runs of 9 values) 0.27 -> 0.38 ms; on small planes
# the runs of few values do not pay.
MAX_PIXELS = sliding_windows.CHANNELS_LAST_COLUMNS_MAX_PIXELS
MIN_CHANNELS = sliding_windows.CHANNELS_LAST_COLUMNS_MIN_CHANNELS
# Depthwise and stride-1 1x1 convolutions qualify on input planes of at most this many pixels
# (strided 1x1 ones, ResNet's downsampling shortcuts, on any): there the
# channels-last depthwise kernel (one einsum over the taps) beats the planar im2col and the fused
# planar pairs (576@14x14 3x3 242 -> 124 us, 1152@7x7 5x5 464 -> 169). With 56x56 planes too,
# MobileNetV2 ran 10.23 against 9.99 ms (one BLAS thread, alternated): the planar pairs
# (``FusedConvPointwise``, ``FusedPointwiseConv``) are as fast there, and the regions' edges cost.
DEPTHWISE_MAX_PIXELS = 28 * 28

_CONVS = {("", "Conv"), (DOMAIN, "FusedConv")}
_UNARY = {*ACTIVATIONS, "HardSwish", "Elu", "Selu", "Softplus"}
_BINARY = {"Add", "Sub", "Mul", "Max", "Min"}
# Reductions that keep their axes (squeeze-excite's mean over the plane) stay in a region, their
# axes renumbered; a global pool becomes the reduction over the spatial axes.
_REDUCTIONS = {"ReduceMean", "ReduceMax", "ReduceSum"}
_GLOBAL_POOLS = {"GlobalAveragePool": "ReduceMean", "GlobalMaxPool": "ReduceMax"}
_TO_PLANAR = "to_planar"
_TO_CHANNELS_LAST = "to_channels_last"


def to_channels_last(model: ir.Model) -> tuple[ir.Model, int]:
    """Convert qualifying regions; returns the new model and how many nodes now run channels-last."""
    model = copy_model(model)
    converted = sum(_convert_graph(graph) for graph in all_graphs(model.graph))
    if converted:
        model.opset_imports.setdefault(DOMAIN, 1)
    return model, converted


def _shape(graph: ir.Graph, name: str) -> tuple[int, ...] | None:
    value = graph.values.get(name)
    return None if value is None else value.shape


def _known_but_batch(shape) -> bool:
    return shape is not None and len(shape) >= 3 and all(d > 0 for d in shape[1:])


def _is_conv(graph: ir.Graph, node: ir.Node) -> bool:
    if (node.domain, node.op_type) not in _CONVS:
        return False
    w = constant(graph, node.inputs[1])
    bias = node.inputs[2] if len(node.inputs) > 2 else ""
    x, y = _shape(graph, node.inputs[0]), _shape(graph, node.outputs[0])
    if w is None or (bias and constant(graph, bias) is None) or not (_known_but_batch(x) and _known_but_batch(y)):
        return False
    group = node.attrs.get("group") or 1
    if group != 1:
        return group == x[1] == w.shape[0] and w.shape[1] == 1 and math.prod(x[2:]) <= DEPTHWISE_MAX_PIXELS
    if all(k == 1 for k in w.shape[2:]):  # a 1x1 convolution is one matmul in either layout
        return math.prod(x[2:]) <= DEPTHWISE_MAX_PIXELS or any(s > 1 for s in node.attrs.get("strides") or ())
    if x[1] >= MIN_CHANNELS or x[1] == 1:
        return True
    return math.prod(y[2:]) > MAX_PIXELS and w.shape[-1] * x[1] >= MIN_CHANNELS  # a stem on a large plane


def _follows_region(graph: ir.Graph, node: ir.Node, inside: Container[str]) -> bool:
    """A layout-agnostic node (or a max pool) whose data inputs are all region values."""
    if node.domain != "" or not node.inputs or node.inputs[0] not in inside:
        return False
    if node.op_type == "MaxPool":
        return len([o for o in node.outputs if o]) == 1 and _known_but_batch(_shape(graph, node.inputs[0]))
    if node.op_type in _UNARY:
        return all(constant(graph, n) is not None and constant(graph, n).size == 1 for n in node.inputs[1:] if n)
    if node.op_type in _BINARY and len(node.inputs) == 2:  # Max and Min are variadic: two only
        # both transposed alike, so any broadcast between them (a squeeze-excite's (N, C, 1, 1)
        # scale) is the same broadcast channels-last
        a, b = (_shape(graph, n) for n in node.inputs)
        return node.inputs[1] in inside and _known_but_batch(a) and _known_but_batch(b) and len(a) == len(b)
    if node.op_type in _GLOBAL_POOLS:
        return _known_but_batch(_shape(graph, node.inputs[0]))
    if node.op_type in _REDUCTIONS:
        axes = constant(graph, node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
        return (node.attrs.get("keepdims", 1) == 1 and axes is not None and axes.size > 0
                and _known_but_batch(_shape(graph, node.inputs[0])))
    return False


def _regions(graph: ir.Graph) -> list[list[ir.Node]]:
    """Connected groups of nodes that could run channels-last, in graph order."""
    group_of: dict[str, int] = {}  # value name -> region id
    parent: list[int] = []

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    members: list[tuple[ir.Node, int]] = []
    for node in graph.nodes:
        if _is_conv(graph, node):
            joined = [group_of[node.inputs[0]]] if node.inputs[0] in group_of else []
        elif _follows_region(graph, node, group_of):
            joined = [group_of[n] for n in node.inputs if n in group_of]
        else:
            continue
        parent.append(len(parent))
        region = parent[-1]
        for other in joined:
            parent[find(other)] = region
        group_of[node.outputs[0]] = region
        members.append((node, region))
    grouped: dict[int, list[ir.Node]] = {}
    for node, region in members:
        grouped.setdefault(find(region), []).append(node)
    return list(grouped.values())


def _flatten_into_gemms(graph: ir.Graph, name: str, reads: dict[str, list[ir.Node]]) -> ir.Node | None:
    """The Flatten(axis=1) that alone reads ``name``, if only Gemms with constant weights read its output."""
    users = reads.get(name, [])
    if len(users) != 1 or name in graph.outputs:
        return None
    flatten = users[0]
    if flatten.op_type != "Flatten" or flatten.domain != "" or flatten.attrs.get("axis", 1) != 1:
        return None
    if flatten.outputs[0] in graph.outputs or not reads.get(flatten.outputs[0]):
        return None
    rows = math.prod(graph.values[name].shape[1:])
    for gemm in reads[flatten.outputs[0]]:
        if gemm.op_type not in ("Gemm", "FusedGemm") or gemm.inputs[0] != flatten.outputs[0] or gemm.attrs.get("transA", 0):
            return None
        w = constant(graph, gemm.inputs[1])
        if w is None or w.ndim != 2 or w.shape[1 if gemm.attrs.get("transB", 0) else 0] != rows:
            return None
    return flatten


def _transposes_needed(graph: ir.Graph, region: list[ir.Node], reads) -> int:
    made = {node.outputs[0] for node in region}
    members = {id(node) for node in region}
    entries = {node.inputs[0] for node in region if node.inputs[0] not in made}
    exits = {name for name in made if name in graph.outputs or any(id(r) not in members for r in reads.get(name, []))}
    # a pooled (N, C, 1...) value leaves as a copy of C values an image: no cost worth counting
    costly = [name for name in exits if math.prod(graph.values[name].shape[2:]) > 1]
    return len(entries) + sum(1 for name in costly if _flatten_into_gemms(graph, name, reads) is None)


def _profitable(graph: ir.Graph, region: list[ir.Node], reads) -> bool:
    """More convolutions than Transposes, and one of them over a plane (a squeeze-excite's 1x1
    convolutions of pooled values alone gain nothing)."""
    convs = [n for n in region if (n.domain, n.op_type) in _CONVS]
    return (len(convs) > _transposes_needed(graph, region, reads)
            and any(math.prod(graph.values[n.outputs[0]].shape[2:]) > 1 for n in convs))


def _convert_graph(graph: ir.Graph) -> int:
    reads = readers(graph)
    regions = [r for r in _regions(graph) if _profitable(graph, r, reads)]
    if not regions:
        return 0
    converting = {id(node) for region in regions for node in region}
    renamed: dict[str, str] = {}  # planar name -> channels-last name
    for region in regions:
        for node in region:
            name = node.outputs[0]
            renamed[name] = fresh_name(graph, f"{name}/nhwc")
            graph.values[renamed[name]] = ir.Value(renamed[name], graph.values[name].dtype,
                                                   channels_last_shape(graph.values[name].shape))
    nodes: list[ir.Node] = []
    entered: dict[str, str] = {}
    for node in graph.nodes:
        if id(node) not in converting:
            nodes.append(node)
            continue
        name = node.inputs[0]  # only a convolution may read a value from outside its region
        if name not in renamed and name not in entered:
            entered[name] = fresh_name(graph, f"{name}/nhwc")
            graph.values[entered[name]] = ir.Value(entered[name], graph.values[name].dtype,
                                                   channels_last_shape(graph.values[name].shape))
            nodes.append(_transpose(name, entered[name], len(graph.values[name].shape), _TO_CHANNELS_LAST))
        nodes.append(_converted(graph, node, {**entered, **renamed}))
        out = node.outputs[0]
        outside = [r for r in reads.get(out, []) if id(r) not in converting]
        if out in graph.outputs or outside:
            flatten = _flatten_into_gemms(graph, out, reads)
            if flatten is not None:
                _permute_gemm_rows(graph, flatten, renamed[out], reads)
            else:
                nodes.append(_transpose(renamed[out], out, len(graph.values[out].shape), _TO_PLANAR))
    graph.nodes = nodes
    return len(converting)


def _transpose(source: str, target: str, rank: int, direction: str) -> ir.Node:
    spatial = list(range(2, rank)) if direction == _TO_CHANNELS_LAST else list(range(1, rank - 1))
    perm = [0, *spatial, 1] if direction == _TO_CHANNELS_LAST else [0, rank - 1, *spatial]
    return ir.Node("Transpose", [source], [target], {"perm": perm}, name=f"{target}/{direction}")


def _converted(graph: ir.Graph, node: ir.Node, names: dict[str, str]) -> ir.Node:
    inputs = [names.get(n, n) for n in node.inputs]
    outputs = [names[node.outputs[0]]]
    if (node.domain, node.op_type) in _CONVS:
        w = constant(graph, node.inputs[1])
        inputs[1] = add_constant(graph, f"{node.inputs[1]}/ohwi", np.moveaxis(w, 1, -1))
        attrs = {k: v for k, v in node.attrs.items() if k not in ("activation", "activation_params")}
        if node.op_type == "FusedConv":
            attrs.update(activation=node.attrs["activation"], activation_params=node.attrs["activation_params"])
        return ir.Node("ChannelsLastConv", inputs, outputs, attrs, node.name, DOMAIN)
    if node.op_type == "MaxPool":
        attrs = {k: v for k, v in node.attrs.items() if k != "storage_order"}
        return ir.Node("ChannelsLastMaxPool", inputs[:1], outputs, attrs, node.name, DOMAIN)
    rank = len(graph.values[node.inputs[0]].shape)
    if node.op_type in _GLOBAL_POOLS:
        axes = add_constant(graph, f"{node.outputs[0]}/axes", np.arange(1, rank - 1, dtype=np.int64))
        return ir.Node(_GLOBAL_POOLS[node.op_type], [inputs[0], axes], outputs, {"keepdims": 1}, node.name)
    if node.op_type in _REDUCTIONS:
        planar = constant(graph, node.inputs[1]).reshape(-1) % rank
        moved = np.array([0 if a == 0 else rank - 1 if a == 1 else a - 1 for a in planar.tolist()], dtype=np.int64)
        inputs[1] = add_constant(graph, f"{node.inputs[1]}/nhwc", moved)
    return ir.Node(node.op_type, inputs, outputs, dict(node.attrs), node.name, node.domain)


def _permute_gemm_rows(graph: ir.Graph, flatten: ir.Node, source: str, reads) -> None:
    """Flatten the channels-last ``source`` instead, and reorder the reading Gemms' weights to match."""
    n, *spatial, c = graph.values[source].shape
    flat = fresh_name(graph, f"{flatten.outputs[0]}/nhwc")
    graph.values[flat] = ir.Value(flat, graph.values[flatten.outputs[0]].dtype, graph.values[flatten.outputs[0]].shape)
    for gemm in reads[flatten.outputs[0]]:
        w = constant(graph, gemm.inputs[1])
        if gemm.attrs.get("transB", 0):  # (M, C * spatial) -> (M, spatial * C)
            permuted = np.moveaxis(w.reshape(w.shape[0], c, *spatial), 1, -1).reshape(w.shape)
        else:  # (C * spatial, M) -> (spatial * C, M)
            permuted = np.moveaxis(w.reshape(c, *spatial, w.shape[1]), 0, -2).reshape(w.shape)
        gemm.inputs = [flat, add_constant(graph, f"{gemm.inputs[1]}/nhwc", permuted), *gemm.inputs[2:]]
    flatten.inputs = [source]
    flatten.outputs = [flat]
