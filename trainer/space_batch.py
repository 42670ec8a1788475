"""``tf.space_to_batch(_nd)`` and ``tf.batch_to_space(_nd)``: spatial blocks moved into the batch
dimension and back (as atrous convolutions use them), composed from Pad, Reshape, Transpose and
Slice, so their gradients are those ops' rules.

``space_to_batch_nd(x, block_shape, paddings)`` pads the M spatial dims of ``x`` [batch, s1..sM,
rest...] by ``paddings`` [M, 2], then takes each position within a block as a batch of its own:
the result is [prod(block_shape) * batch, padded_s1 / b1, ..., rest...], batch index
``(i1 * b2 + i2) * batch + n`` for the block offset (i1, i2) of image n. ``batch_to_space_nd``
inverts it and crops by ``crops``. The spatial dims must be known when the graph is built.

>>> import numpy as np, trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     x = tf.constant(np.arange(4.0).reshape(1, 2, 2, 1))
...     y = tf.space_to_batch(x, [[0, 0], [0, 0]], block_size=2)
>>> tf.Session(graph=g).run(y).reshape(-1).tolist()
[0.0, 1.0, 2.0, 3.0]
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import pad, slice as slice_
from trainer.graph import Tensor
from trainer.ops import convert_to_tensor, reshape, transpose

__all__ = ["batch_to_space", "batch_to_space_nd", "space_to_batch", "space_to_batch_nd"]


def _blocks(what: str, x: Tensor, block_shape, pairs, pairs_name: str) -> tuple[list[int], np.ndarray]:
    block = [int(b) for b in np.asarray(block_shape).reshape(-1)]
    amounts = np.asarray(pairs, np.int64).reshape(-1, 2) if np.size(pairs) else np.zeros((0, 2), np.int64)
    if any(b < 1 for b in block):
        raise ValueError(f"{what}: block_shape must be positive, got {block}")
    if amounts.shape[0] != len(block) or (amounts < 0).any():
        raise ValueError(f"{what}: {pairs_name} must be {len(block)} non-negative [before, after] pairs, got "
                         f"{amounts.tolist()}")
    if x.shape is None or len(x.shape) < len(block) + 1:
        raise ValueError(f"{what}: input must have rank of at least {len(block) + 1} and a known shape, got "
                         f"{x.shape}")
    if any(d is None for d in x.shape[1:]):
        raise ValueError(f"{what}: the dims after the batch must be known when the graph is built, got {x.shape}")
    return block, amounts


def space_to_batch_nd(input, block_shape, paddings, name=None) -> Tensor:  # noqa: A002 - TF's name
    x = convert_to_tensor(input)
    block, amounts = _blocks("space_to_batch_nd", x, block_shape, paddings, "paddings")
    m = len(block)
    rest = list(x.shape[1 + m:])
    padded = [int(d + a.sum()) for d, a in zip(x.shape[1:1 + m], amounts)]
    for i, (d, b) in enumerate(zip(padded, block)):
        if d % b:
            raise ValueError(f"space_to_batch_nd: padded_shape[{i}]={d} is not divisible by block_shape[{i}]={b}")
    y = pad(x, [[0, 0], *amounts.tolist(), *([[0, 0]] * len(rest))]) if amounts.any() else x
    split = [-1] + [v for d, b in zip(padded, block) for v in (d // b, b)] + rest
    y = reshape(y, split)
    blocks, rows = [2 + 2 * i for i in range(m)], [1 + 2 * i for i in range(m)]
    y = transpose(y, blocks + [0] + rows + list(range(1 + 2 * m, 1 + 2 * m + len(rest))))
    return reshape(y, [-1] + [d // b for d, b in zip(padded, block)] + rest, name=name)


def batch_to_space_nd(input, block_shape, crops, name=None) -> Tensor:  # noqa: A002 - TF's name
    x = convert_to_tensor(input)
    block, amounts = _blocks("batch_to_space_nd", x, block_shape, crops, "crops")
    m = len(block)
    spatial, rest = list(x.shape[1:1 + m]), list(x.shape[1 + m:])
    total = int(np.prod(block))
    if x.shape[0] is not None and x.shape[0] % total:
        raise ValueError(f"batch_to_space_nd: the batch {x.shape[0]} is not divisible by the product of "
                         f"block_shape, {total}")
    full = [d * b for d, b in zip(spatial, block)]
    for i, (d, a) in enumerate(zip(full, amounts)):
        if a.sum() > d:
            raise ValueError(f"batch_to_space_nd: crops[{i}] = {a.tolist()} crop more than the {d} rows of dim {i + 1}")
    y = reshape(x, block + [-1] + spatial + rest)
    perm = [m] + [v for i in range(m) for v in (m + 1 + i, i)] + list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    if not amounts.any():
        return reshape(transpose(y, perm), [-1] + full + rest, name=name)
    y = reshape(transpose(y, perm), [-1] + full + rest)
    begin = [0] + amounts[:, 0].tolist() + [0] * len(rest)
    size = [-1] + [d - int(a.sum()) for d, a in zip(full, amounts)] + rest
    return slice_(y, begin, size, name=name)


def space_to_batch(input, paddings, block_size=None, name=None, block_shape=None) -> Tensor:  # noqa: A002
    """TF 1.x's 4-D form: [batch, height, width, depth] with a square ``block_size``."""
    size = block_size if block_size is not None else block_shape
    if size is None:
        raise ValueError("space_to_batch: give block_size")
    return space_to_batch_nd(input, [int(size)] * 2, paddings, name=name)


def batch_to_space(input, crops, block_size=None, name=None, block_shape=None) -> Tensor:  # noqa: A002
    """TF 1.x's 4-D form, the inverse of ``space_to_batch``."""
    size = block_size if block_size is not None else block_shape
    if size is None:
        raise ValueError("batch_to_space: give block_size")
    return batch_to_space_nd(input, [int(size)] * 2, crops, name=name)
