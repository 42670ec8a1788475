"""The trainer run in inference mode, the reference an exported model is checked against."""

from __future__ import annotations

import numpy as np

from exporter.freeze_source import TRAINER_DOMAIN, FreezeSource

__all__ = ["inference_outputs", "upstream_nodes"]


def inference_outputs(src: FreezeSource, feeds: dict, fetches: dict) -> dict[str, np.ndarray]:
    """Run the trainer in inference mode: dropout masks fed as ones, training batch norm fed as the
    moving-statistics normalization of its inputs (one extra run per batch norm, in graph order)."""
    feeds = dict(feeds)
    needed = upstream_nodes(fetches.values(), set(feeds))
    for node in src.graph.nodes:
        if node.domain != TRAINER_DOMAIN or node not in needed:
            continue
        if node.op_type == "DropoutMask":
            x = src.session.run(node.inputs[0], feeds)
            feeds[node.outputs[0]] = np.ones_like(x)
        elif node.op_type == "BatchNormTraining":
            x, gamma, beta = src.session.run(list(node.inputs[:3]), feeds)
            scope = node.name.rsplit("/", 1)[0] + "/" if "/" in node.name else ""
            mean, var = src.values[scope + "moving_mean"], src.values[scope + "moving_variance"]
            shape = (1, -1) + (1,) * (x.ndim - 2)
            eps = x.dtype.type(node.attrs["epsilon"])
            y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * gamma.reshape(shape) + beta.reshape(shape)
            feeds[node.outputs[0]] = y.astype(x.dtype)
    names = list(fetches)
    values = src.session.run([fetches[n] for n in names], feeds)
    return dict(zip(names, values))


def upstream_nodes(tensors, fed: set) -> set:
    """Nodes the tensors read through data edges, not looking past fed tensors."""
    nodes: set = set()
    stack = list(tensors)
    while stack:
        t = stack.pop()
        if t in fed or t.node in nodes:
            continue
        nodes.add(t.node)
        stack.extend(i for i in t.node.inputs if i is not None)
    return nodes
