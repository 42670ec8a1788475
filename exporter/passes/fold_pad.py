"""Fold a zero Pad of the spatial axes into the Conv nodes that read it (the Conv's own ``pads``).

Exporters write TensorFlow's "SAME" padding, which is asymmetric for stride 2, as an explicit
``Pad`` in front of a ``Conv`` with no padding: Hugging Face's MobileNetV1/V2 (``tf_padding``)
pad every convolution that way, 1x1 ones included (with zero pads), and EfficientNet pads each
stride-2 depthwise convolution with ``nn.ZeroPad2d``. Each Pad copies a whole activation and
keeps the Conv from the channels-last and 1x1 rewrites that follow. A constant-mode Pad with
value 0, constant non-negative pads and no padding of the batch or channel axes is exactly the
Conv's own zero padding, so the Conv takes the pads (added to its own) and reads the Pad's input.
Applies only when every reader of the Pad's output is such a Conv (reading it as its data input,
with ``auto_pad`` NOTSET or VALID, as ``padding="valid"`` exports) and the output is not a graph output.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import all_graphs, constant, copy_model, readers, remove_nodes


def fold_pads(model: ir.Model) -> tuple[ir.Model, int]:
    """Fold zero Pads into the Convs that read them; returns the new model and how many Pads went."""
    model = copy_model(model)
    folded = 0
    for graph in all_graphs(model.graph):
        read_by = readers(graph)
        doomed = [node for node in graph.nodes
                  if (node.domain, node.op_type) == ("", "Pad") and _fold(graph, node, read_by)]
        remove_nodes(graph, doomed)
        folded += len(doomed)
    return model, folded


def spatial_pads(graph: ir.Graph, pad: ir.Node, rank: int) -> list[int] | None:
    """The Pad's zero padding of a rank-``rank`` tensor as a Conv's ``pads`` (begins of the spatial
    axes, then their ends), or None where it is not a constant zero padding of the spatial axes alone."""
    if pad.attrs.get("mode", "constant") != "constant":
        return None
    inputs = list(pad.inputs) + [""] * (4 - len(pad.inputs))  # the importer upgrades opset < 11's attributes
    pads = constant(graph, inputs[1]) if inputs[1] else None
    value = constant(graph, inputs[2]) if inputs[2] else 0.0
    axes = constant(graph, inputs[3]) if inputs[3] else None
    if pads is None or value is None or (inputs[3] and axes is None):
        return None
    value = np.asarray(value).reshape(-1)
    if value.size > 1 or (value.size and value[0] != 0):
        return None
    pads = [int(p) for p in np.asarray(pads).reshape(-1)]
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in np.asarray(axes).reshape(-1)]
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes) or any(p < 0 for p in pads):
        return None
    begin, end = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        begin[axis], end[axis] = pads[i], pads[i + len(axes)]
    if begin[:2] != [0, 0] or end[:2] != [0, 0]:
        return None
    return begin[2:] + end[2:]


def _plain_conv_input(node: ir.Node, name: str) -> bool:
    return (
        (node.domain, node.op_type) == ("", "Conv")
        and node.inputs[0] == name
        and name not in node.inputs[1:]
        and node.attrs.get("auto_pad", "NOTSET") in ("NOTSET", "VALID")  # VALID: no padding of its own
        and bool(node.attrs.get("kernel_shape"))
    )


def _fold(graph: ir.Graph, pad: ir.Node, read_by: dict[str, list[ir.Node]]) -> bool:
    out = pad.outputs[0]
    convs = read_by.get(out, [])
    if out in graph.outputs or not convs or not all(_plain_conv_input(c, out) for c in convs):
        return False
    rank = len(convs[0].attrs["kernel_shape"]) + 2
    extra = spatial_pads(graph, pad, rank)
    if extra is None or any(len(c.attrs["kernel_shape"]) + 2 != rank for c in convs):
        return False
    for conv in convs:
        own = list(conv.attrs.get("pads") or [0] * len(extra))
        if conv.attrs.get("auto_pad", "NOTSET") == "VALID":
            own = [0] * len(extra)
        conv.attrs = {**conv.attrs, "pads": [a + b for a, b in zip(own, extra)], "auto_pad": "NOTSET"}
        conv.inputs[0] = pad.inputs[0]
    return True
