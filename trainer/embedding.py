"""``embedding_lookup`` over a Variable, a list of shards or a PartitionedVariable.

With several shards, ids are routed to shards (``"mod"``: id % n, local row id // n; ``"div"``:
contiguous ranges, the first ``rows % n`` shards one row longer, as the partitioners make them),
each shard's Gather is colocated with the shard, so only the requested rows leave its device,
and DynamicStitch puts the rows back in the order of ``ids``. The gradient reaching each shard is
an IndexedSlices of just those rows, which the optimizers apply sparsely on the shard's device.

Checkpoints store a partitioned table as its shards concatenated (trainer/saver.py): under
``"div"`` that is the table in id order, so re-sharding keeps every id's row; under ``"mod"``
the id -> row mapping depends on the shard count (as in TensorFlow).
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import reduce_sum
from trainer.graph import Tensor
from trainer.ops import cast, constant, convert_to_tensor, gather, make_op, maximum, minimum, sqrt, where
from trainer.partitioned_variables import PartitionedVariable

__all__ = ["embedding_lookup"]

D = "flowstack"
STRATEGIES = ("mod", "div")


def _shards(params) -> list:
    """The shard Variables (or tensors) of ``params``, in order."""
    if isinstance(params, PartitionedVariable):
        return list(params)
    if isinstance(params, (list, tuple)):
        if not params:
            raise ValueError("embedding_lookup: params is an empty list; it needs at least one shard")
        return list(params)
    return [params]


def _onnx(op_type, inputs, attrs=None, n=None):
    node = make_op(op_type, inputs, attrs or {}, num_outputs=n)
    return node.outputs if n else node.outputs[0]


def _int(value) -> Tensor:
    return constant(np.asarray(value, np.int64))


def _route(flat_ids: Tensor, sizes: list[int], strategy: str) -> tuple[Tensor, Tensor]:
    """(shard of each id, row of each id inside its shard). A negative id gets shard -1 and an id
    past the table a shard (div) or row (mod) out of range, so DynamicPartition or the shard's
    Gather fails naming its node instead of reading a wrong row."""
    n = len(sizes)
    if strategy == "mod":
        shard, row = _onnx("Mod", [flat_ids, _int(n)]), _onnx("Div", [flat_ids, _int(n)])
    else:
        shard, row = _route_div(flat_ids, sizes)
    return where(_onnx("Less", [flat_ids, _int(0)]), _int(-1), shard), row


def _route_div(flat_ids: Tensor, sizes: list[int]) -> tuple[Tensor, Tensor]:
    n = len(sizes)
    total = sum(sizes)
    per, extras = divmod(total, n)
    # TensorFlow's rule: the first `extras` shards hold per + 1 rows, the others per rows.
    big = _onnx("Div", [flat_ids, _int(per + 1)])
    small = _onnx("Div", [_onnx("Sub", [flat_ids, _int(extras)]), _int(per)])
    shard = maximum(big, small)
    in_big = _onnx("Less", [shard, _int(extras)])
    row = where(in_big, _onnx("Mod", [flat_ids, _int(per + 1)]),
                _onnx("Mod", [_onnx("Sub", [flat_ids, _int(extras)]), _int(per)]))
    return shard, row


def _clip_rows(rows: Tensor, max_norm) -> Tensor:
    """Rows scaled down to L2 norm ``max_norm`` where they exceed it."""
    if max_norm is None:
        return rows
    axes = list(range(1, len(rows.shape))) if rows.shape is not None else [-1]
    norm = sqrt(reduce_sum(rows * rows, axis=axes, keepdims=True))
    limit = constant(np.asarray(max_norm, rows.dtype))
    scale = minimum(constant(np.asarray(1, rows.dtype)), limit / maximum(norm, constant(np.asarray(1e-12, rows.dtype))))
    return rows * scale


def _gather_on(shard, ids: Tensor, max_norm) -> Tensor:
    """Gather ``ids`` from ``shard`` on the shard's device (so only those rows move)."""
    g = ids.graph
    node = getattr(shard, "node", None) or convert_to_tensor(shard).node
    with g.colocate_with(node):
        return _clip_rows(gather(shard, ids, axis=0), max_norm)


def embedding_lookup(params, ids, partition_strategy: str = "mod", name: str | None = None,
                     max_norm=None) -> Tensor:
    """Rows of the (possibly sharded) table ``params`` at ``ids``: shape ``ids.shape + row shape``.

    ``max_norm`` clips each row's L2 norm. The gradient is sparse (IndexedSlices per shard).
    """
    if partition_strategy not in STRATEGIES:
        raise ValueError(f"embedding_lookup: partition_strategy must be one of {STRATEGIES}, got {partition_strategy!r}")
    shards = _shards(params)
    first = convert_to_tensor(shards[0])
    ids = convert_to_tensor(ids, graph=first.graph)
    if ids.dtype is None or ids.dtype.kind not in "iu":
        raise TypeError(f"embedding_lookup: ids must be integers, got {ids.dtype} ({ids.name})")
    g = first.graph
    with g.as_default(), g.name_scope(name or "embedding_lookup"):
        if ids.dtype != np.int64:
            ids = cast(ids, np.int64)
        if len(shards) == 1:
            return _gather_on(shards[0], ids, max_norm)
        sizes = []
        for i, s in enumerate(shards):
            shape = convert_to_tensor(s).shape
            if shape is None or shape[0] is None:
                raise ValueError(f"embedding_lookup: shard {i} needs a known number of rows, got shape {shape}")
            sizes.append(shape[0])
        flat = _onnx("Reshape", [ids, _int([-1])])
        shard_of, row_of = _route(flat, sizes, partition_strategy)
        n = len(shards)
        rows_per_shard = make_op("DynamicPartition", [row_of, shard_of], {"num_partitions": n}, domain=D,
                                 num_outputs=n).outputs
        positions = _onnx("Range", [_int(0), _onnx("Size", [flat]), _int(1)])
        pos_per_shard = make_op("DynamicPartition", [positions, shard_of], {"num_partitions": n}, domain=D,
                                num_outputs=n).outputs
        gathered = [_gather_on(s, r, max_norm) for s, r in zip(shards, rows_per_shard)]
        merged = make_op("DynamicStitch", [*pos_per_shard, *gathered], {"N": n}, domain=D).outputs[0]
        row_shape = list(first.shape[1:])
        if ids.shape is not None and list(ids.shape).count(None) <= 1:  # a constant shape keeps the static one
            out_shape = _int([-1 if d is None else d for d in ids.shape] + row_shape)
        else:
            out_shape = _onnx("Concat", [_onnx("Shape", [ids]), _int(row_shape)], {"axis": 0})
        return _onnx("Reshape", [merged, out_shape])
