"""``tf.contrib.metrics.streaming_concat`` and ``streaming_dynamic_auc``: metrics that keep every
value seen, not running totals.

``streaming_concat`` grows a local variable (no fixed shape) by each batch along ``axis``, up to
``max_size`` entries. ``streaming_dynamic_auc`` keeps every label, prediction and weight that way
and computes the exact area under the ROC (or PR) curve over them: the predictions sorted from
high to low, one curve point per distinct prediction, trapezoids between the points, as
TensorFlow's; when every label is the same the AUC is undefined and 0 is reported.
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import (argsort, cumsum, logical_or, pad, range as range_, reduce_max, reduce_min, reduce_sum, size,
                               unique_with_counts)
from trainer.control_flow import cond
from trainer.graph import TRAINER_DOMAIN, GraphKeys, Tensor, control_dependencies, name_scope
from trainer.metrics import METRIC_VARIABLES, collected
from trainer.ops import (abs as abs_, cast, concat, constant, convert_to_tensor, equal, gather, greater, identity,
                         minimum, ones_like, reshape, shape, where)
from trainer.variables import Variable

__all__ = ["streaming_concat", "streaming_dynamic_auc"]

F64 = np.float64


def _growing(values: Tensor, axis: int, max_size: int | None, name: str) -> tuple[Tensor, Tensor]:
    """Every batch of ``values`` concatenated along ``axis`` (kept in a local variable), and the update."""
    if values.shape is None:
        raise ValueError("streaming_concat: values must have a statically known rank")
    rank = len(values.shape)
    if not 0 <= axis < rank:
        raise ValueError(f"streaming_concat: axis must be in [0, {rank}), given {axis}")
    if any(d is None for i, d in enumerate(values.shape) if i != axis):
        raise ValueError(f"streaming_concat: the size of values must be statically known along every axis but "
                         f"{axis}, got shape {values.shape}")
    empty = np.zeros([0 if i == axis else d for i, d in enumerate(values.shape)], values.dtype)
    variable = Variable(empty, trainable=False, name=name, validate_shape=False,
                        collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES])
    open_shape = [-1 if i == axis else d for i, d in enumerate(values.shape)]  # static: known but along axis
    value = reshape(variable.value(), open_shape)
    grown = concat([value, values], axis=axis)
    if max_size is not None:
        kept = minimum(gather(shape(grown), axis), np.int64(max_size))
        grown = gather(grown, range_(kept), axis=axis)
    graph = variable.graph
    with graph.colocate_with(variable.node):  # tf.assign(..., validate_shape=False): the value may grow
        update = graph.create_op("Assign", [variable.tensor, grown], {"validate_shape": 0}, domain=TRAINER_DOMAIN,
                                 name="grow").outputs[0]
    return value, reshape(update, open_shape)


def streaming_concat(values, axis: int = 0, max_size: int | None = None, metrics_collections=None,
                     updates_collections=None, name=None):
    """(every batch's values concatenated along ``axis``, the op that appends the next batch)."""
    if max_size is not None and max_size < 1:
        raise ValueError(f"streaming_concat: max_size must be positive, given {max_size}")
    values = convert_to_tensor(values)
    with name_scope(name or "streaming_concat"):
        value, update = _growing(values, axis, max_size, "array")
    return collected(value, update, metrics_collections, updates_collections)


def _exact_auc(labels: Tensor, predictions: Tensor, weights: Tensor, curve: str) -> Tensor:
    """The trapezoidal area over one curve point per distinct prediction (0 when the labels are all equal)."""
    def area():
        order = argsort(predictions, direction="DESCENDING", stable=True)
        ordered_labels, ordered_weights = gather(labels, order), gather(weights, order)
        _, _, counts = unique_with_counts(gather(predictions, order))
        splits = cast(pad(cumsum(counts), [[1, 0]]), np.int32)
        positive = cast(ordered_labels, F64) * ordered_weights
        tp = gather(pad(cumsum(positive), [[1, 0]]), splits)
        if curve == "ROC":
            fp = gather(pad(cumsum(ordered_weights - positive), [[1, 0]]), splits)
            xs, ys = fp / fp[-1], tp / tp[-1]
        else:
            called = gather(pad(cumsum(ordered_weights), [[1, 0]]), splits)
            xs = tp / tp[-1]
            ys = where(greater(splits, 0), tp / where(greater(called, 0.0), called, ones_like(called)),
                       ones_like(tp))
        return reduce_sum((ys[1:] + ys[:-1]) / 2.0 * abs_(xs[1:] - xs[:-1]))

    same = equal(reduce_min(cast(labels, np.int32)), reduce_max(cast(labels, np.int32)))
    return cond(logical_or(same, equal(size(labels), 0)), lambda: constant(F64(0)), area)


def streaming_dynamic_auc(labels, predictions, curve: str = "ROC", metrics_collections=(), updates_collections=(),
                          name=None, weights=None):
    """The exact AUC over every label (0/1 or bool) and prediction seen (see the module docstring)."""
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be either ROC or PR, {curve} unknown")
    labels = reshape(convert_to_tensor(labels), (-1,))
    if labels.dtype is not None and labels.dtype != np.bool_ and labels.dtype.kind not in "iu":
        raise ValueError(f"streaming_dynamic_auc: labels must be bool or integer 0/1, got {labels.dtype}")
    predictions = reshape(cast(convert_to_tensor(predictions), F64), (-1,))
    w = ones_like(predictions)
    if weights is not None:
        w = reshape(cast(convert_to_tensor(weights), F64), (-1,)) * w
    binary = cast(labels, np.bool_) if labels.dtype != np.bool_ else labels
    with name_scope(name or "dynamic_auc"):
        seen_labels, label_update = _growing(cast(binary, np.int32), 0, None, "concat_labels")
        seen_predictions, prediction_update = _growing(predictions, 0, None, "concat_preds")
        seen_weights, weight_update = _growing(w, 0, None, "concat_weights")
        value = _exact_auc(seen_labels, seen_predictions, seen_weights, curve)
        with control_dependencies([label_update, prediction_update, weight_update]):
            update = _exact_auc(identity(label_update), identity(prediction_update), identity(weight_update), curve)
    return collected(value, update, metrics_collections, updates_collections)
