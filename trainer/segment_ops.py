"""TensorFlow 1.15's segment reductions beyond the sum, and the row-routing pair
``dynamic_partition`` / ``dynamic_stitch``.

``segment_<op>(data, segment_ids)`` reduces the rows of ``data`` sharing a (sorted) id; the
output has ``segment_ids[-1] + 1`` rows, an empty segment 0. ``unsorted_segment_<op>(data,
segment_ids, num_segments)`` takes ids in any order and of any shape leading ``data``'s; an empty
segment holds the reduction's identity (the dtype's lowest value for max, highest for min, 1 for
prod), a negative id drops its row. Ids out of range fail the run with InvalidArgumentError.

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     m = tf.segment_max(tf.constant([3.0, 1.0, 4.0, 1.0, 5.0]), tf.constant([0, 0, 1, 3, 3]))
>>> tf.Session(graph=g).run(m).tolist()
[3.0, 4.0, 0.0, 5.0]
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import expand_dims, unsorted_segment_sum
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import cast, convert_to_tensor, divide, make_op, maximum, ones_like, sqrt

__all__ = ["dynamic_partition", "dynamic_stitch", "segment_max", "segment_min", "segment_prod",
           "unsorted_segment_max", "unsorted_segment_min", "unsorted_segment_prod", "unsorted_segment_sqrt_n"]


def _sorted(op_type: str, data, segment_ids, name) -> Tensor:
    return make_op(op_type, [convert_to_tensor(data), convert_to_tensor(segment_ids)], domain=TRAINER_DOMAIN,
                   name=name or op_type).outputs[0]


def _unsorted(op_type: str, data, segment_ids, num_segments, name) -> Tensor:
    x, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    n = num_segments if isinstance(num_segments, Tensor) else np.asarray(num_segments, np.int64)
    return make_op(op_type, [x, ids, n], domain=TRAINER_DOMAIN, name=name or op_type).outputs[0]


def segment_max(data, segment_ids, name=None) -> Tensor:
    return _sorted("SegmentMax", data, segment_ids, name)


def segment_min(data, segment_ids, name=None) -> Tensor:
    return _sorted("SegmentMin", data, segment_ids, name)


def segment_prod(data, segment_ids, name=None) -> Tensor:
    return _sorted("SegmentProd", data, segment_ids, name)


def unsorted_segment_max(data, segment_ids, num_segments, name=None) -> Tensor:
    return _unsorted("UnsortedSegmentMax", data, segment_ids, num_segments, name)


def unsorted_segment_min(data, segment_ids, num_segments, name=None) -> Tensor:
    return _unsorted("UnsortedSegmentMin", data, segment_ids, num_segments, name)


def unsorted_segment_prod(data, segment_ids, num_segments, name=None) -> Tensor:
    return _unsorted("UnsortedSegmentProd", data, segment_ids, num_segments, name)


def _per_row(values: Tensor, extra_dims: int) -> Tensor:
    """``values`` with ``extra_dims`` trailing axes of 1, to scale each row's entries alike."""
    for _ in range(extra_dims):
        values = expand_dims(values, -1)
    return values


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None) -> Tensor:
    """Each segment's sum divided by the square root of its row count (0 for an empty segment);
    rows with a negative id are dropped."""
    x = convert_to_tensor(data)
    ids = convert_to_tensor(segment_ids)
    if x.shape is None or ids.shape is None:
        raise ValueError("unsorted_segment_sqrt_n: the ranks of data and segment_ids must be known")
    total = unsorted_segment_sum(x, ids, num_segments)
    counts = _per_row(unsorted_segment_sum(ones_like(cast(ids, x.dtype)), ids, num_segments),
                      len(x.shape) - len(ids.shape))
    return divide(total, sqrt(maximum(counts, np.ones((), x.dtype))), name=name)


def dynamic_partition(data, partitions, num_partitions: int, name=None) -> list[Tensor]:
    """``num_partitions`` tensors: the rows of ``data`` whose ``partitions`` entry is i, in order."""
    return make_op("DynamicPartition", [convert_to_tensor(data), convert_to_tensor(partitions)],
                   {"num_partitions": int(num_partitions)}, domain=TRAINER_DOMAIN, name=name or "DynamicPartition",
                   num_outputs=int(num_partitions)).outputs


def dynamic_stitch(indices, data, name=None) -> Tensor:
    """``merged[indices[i][j]] = data[i][j]``: rows interleaved back by position (later ones win)."""
    indices, data = [convert_to_tensor(i) for i in indices], [convert_to_tensor(d) for d in data]
    if len(indices) != len(data):
        raise ValueError(f"dynamic_stitch: {len(indices)} index tensors but {len(data)} data tensors")
    return make_op("DynamicStitch", [*indices, *data], {"N": len(indices)}, domain=TRAINER_DOMAIN,
                   name=name or "DynamicStitch").outputs[0]
