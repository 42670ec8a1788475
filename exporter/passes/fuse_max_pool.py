"""Fuse a MaxPool into the Conv or FusedConv that feeds it (``flowstack::FusedConvMaxPool``).

The fused kernel pools the convolution's raw output and adds the bias and applies the activation
afterwards, on the pooled values: exact when the activation never decreases (a max commutes with
it and with a per-channel bias) and every pooling window holds at least one real value (its pads
are smaller than its kernel). Applies only then, to a MaxPool without dilations, auto padding,
ceil mode or an indices output, whose input the convolution's output feeds alone.
"""

from __future__ import annotations

from edge_runtime.kernels import has_kernel
from exporter import ir
from exporter.passes.graph_edit import fuse_into_producers, producers, readers
from schemas.ops.fused import DOMAIN, monotone_activation

FUSED = "FusedConvMaxPool"


def fuse_max_pools(model: ir.Model) -> tuple[ir.Model, int]:
    """Fuse (Fused)Conv + MaxPool pairs; returns the new model and how many were fused."""
    if not has_kernel(FUSED, DOMAIN):
        return model, 0
    return fuse_into_producers(model, DOMAIN, _fuse)


def _plain_pool(pool: ir.Node) -> bool:
    a = pool.attrs
    kernel = list(a.get("kernel_shape") or [])
    pads = list(a.get("pads") or [0] * (2 * len(kernel)))
    return (
        bool(kernel)
        and (len(pool.outputs) == 1 or not any(pool.outputs[1:]))
        and a.get("auto_pad", "NOTSET") == "NOTSET"
        and not a.get("ceil_mode", 0)
        and all(d == 1 for d in (a.get("dilations") or []))
        and len(pads) == 2 * len(kernel)
        and all(p < k for p, k in zip(pads, kernel + kernel))  # every window holds a real value
    )


def _fuse(graph: ir.Graph, pool: ir.Node) -> bool:
    if (pool.domain, pool.op_type) != ("", "MaxPool"):
        return False
    x = pool.inputs[0]
    conv = producers(graph).get(x)
    if conv is None or (conv.domain, conv.op_type) not in (("", "Conv"), (DOMAIN, "FusedConv")):
        return False
    if x in graph.outputs or [id(n) for n in readers(graph).get(x, [])] != [id(pool)] or not _plain_pool(pool):
        return False
    activation = conv.attrs.get("activation", "")
    params = list(conv.attrs.get("activation_params") or [])
    if not monotone_activation(activation, params):
        return False
    conv.op_type, conv.domain = FUSED, DOMAIN
    conv.attrs = {**conv.attrs, "activation": activation, "activation_params": params}
    for name in ("kernel_shape", "strides", "pads"):
        if pool.attrs.get(name):
            conv.attrs[f"pool_{name}"] = list(pool.attrs[name])
    conv.outputs = [pool.outputs[0]]
    return True
