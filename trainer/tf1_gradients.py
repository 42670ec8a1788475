"""``tf.gradients`` and ``tf.hessians`` with TensorFlow 1.15's signatures, and ``tf.AggregationMethod``.

The backward walk is ``trainer.gradients.gradients``; this module adds TF1's arguments around it.
Every aggregation method sums the partial gradients reaching a tensor, as TF's do: they differ in
when the partials are added (memory), not in the sum, so each is accepted and checked by name.
``colocate_gradients_with_ops`` and ``gate_gradients`` change placement and scheduling in TF, not
values: flowstack's placer already puts a gradient op beside the op it differentiates.
"""

from __future__ import annotations

import numpy as np

from trainer.gradients.registry import IndexedSlices
from trainer.gradients.registry import gradients as backward

__all__ = ["AggregationMethod", "UnconnectedGradients", "check_aggregation_method", "gradients", "hessians"]


class AggregationMethod:
    """How partial gradients are combined (TensorFlow's names); all give the same sum here."""

    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


class UnconnectedGradients:
    """What ``gradients`` returns for an x the ys do not depend on: None, or zeros of x's shape."""

    NONE = "none"
    ZERO = "zero"


_METHODS = (None, AggregationMethod.ADD_N, AggregationMethod.EXPERIMENTAL_TREE,
            AggregationMethod.EXPERIMENTAL_ACCUMULATE_N)


def check_aggregation_method(aggregation_method, where: str = "gradients") -> None:
    """A ValueError naming ``where`` for a value that is not an ``AggregationMethod``."""
    if aggregation_method not in _METHODS or isinstance(aggregation_method, bool):
        raise ValueError(f"{where}: invalid aggregation_method specified {aggregation_method!r}; use one of "
                         "tf.AggregationMethod.ADD_N, EXPERIMENTAL_TREE, EXPERIMENTAL_ACCUMULATE_N or None")


def _unconnected(value) -> str:
    value = getattr(value, "value", value)
    if value not in (UnconnectedGradients.NONE, UnconnectedGradients.ZERO):
        raise ValueError(f"gradients: unconnected_gradients must be 'none' or 'zero', got {value!r}")
    return value


def gradients(ys, xs, grad_ys=None, name: str = "gradients", colocate_gradients_with_ops: bool = False,
              gate_gradients: bool = False, aggregation_method=None, stop_gradients=None,
              unconnected_gradients=UnconnectedGradients.NONE) -> list:
    """TF 1.15's ``tf.gradients``: d(sum of ys)/d(x) for each x (None, or zeros with
    ``unconnected_gradients="zero"``, where the ys do not depend on x)."""
    from trainer.ops import zeros_like

    check_aggregation_method(aggregation_method)
    unconnected = _unconnected(unconnected_gradients)
    stops = stop_gradients if isinstance(stop_gradients, (list, tuple)) else (
        [] if stop_gradients is None else [stop_gradients])
    grads = backward(ys, xs, grad_ys, stops, name=name or "gradients")
    xs_list = xs if isinstance(xs, (list, tuple)) else [xs]
    if unconnected == UnconnectedGradients.ZERO:
        grads = [zeros_like(x) if g is None else g for g, x in zip(grads, xs_list)]
    return grads


def _static_size(x, where: str) -> int:
    shape = x.shape
    if shape is None or any(d is None for d in shape):
        raise ValueError(f"{where}: x {x.name} needs a fully known shape, got {shape}")
    return int(np.prod(shape, dtype=np.int64))


def hessians(ys, xs, name: str = "hessians", colocate_gradients_with_ops: bool = False,
             gate_gradients: bool = False, aggregation_method=None) -> list:
    """TF 1.15's ``tf.hessians``: for each x, the matrix of second derivatives of sum(ys), shaped
    ``x.shape + x.shape``. Each x needs a fully known shape (one gradient graph per element)."""
    from trainer.array_ops import stack
    from trainer.ops import convert_to_tensor, reshape, zeros_like

    check_aggregation_method(aggregation_method, "hessians")
    xs_list = [convert_to_tensor(x) for x in (xs if isinstance(xs, (list, tuple)) else [xs])]
    graph = xs_list[0].graph
    out = []
    with graph.as_default(), graph.name_scope(name or "hessians"):
        for x, grad in zip(xs_list, backward(ys, xs_list)):
            size = _static_size(x, "hessians")
            if grad is None:
                out.append(None)
                continue
            if isinstance(grad, IndexedSlices):
                grad = grad.to_dense()
            flat = reshape(grad, [-1])
            rows = []
            for i in range(size):
                row = backward(flat[i], [x])[0]
                row = zeros_like(x) if row is None else (row.to_dense() if isinstance(row, IndexedSlices) else row)
                rows.append(reshape(row, [-1]))
            out.append(reshape(stack(rows), list(x.shape) * 2))
    return out
