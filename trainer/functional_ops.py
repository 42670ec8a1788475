"""``map_fn``, ``scan``, ``foldl`` and ``foldr`` over the first axis, as while_loops.

Each step's result is written into a [n, ...] buffer with ScatterND, so the loop's gradient runs
through the while_loop gradient machinery like ``dynamic_rnn``'s. ``map_fn`` learns its result's
shape and dtype by building ``fn`` once on the first element outside the loop (those ops are never
run); ``fn`` must return one tensor and must not create variables.

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     squares = tf.map_fn(lambda x: x * x, tf.constant([1.0, 2.0, 3.0]))
...     sums = tf.scan(lambda a, x: a + x, tf.constant([1.0, 2.0, 3.0]))
>>> [v.tolist() for v in tf.Session(g).run([squares, sums])]
[[1.0, 4.0, 9.0], [1.0, 3.0, 6.0]]
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import expand_dims, fill, reverse
from trainer.control_flow import while_loop
from trainer.graph import Tensor
from trainer.ops import cast, concat, constant, convert_to_tensor, gather, less, make_op, reshape

__all__ = ["foldl", "foldr", "map_fn", "scan"]


def _length(x: Tensor) -> Tensor:
    if x.shape is not None and x.shape[0] is not None:
        return constant(np.asarray(x.shape[0], np.int64), graph=x.graph)
    return make_op("Shape", [x]).outputs[0][0]


def _buffer(n: Tensor, like: Tensor) -> Tensor:
    if like.shape is None or any(d is None for d in like.shape):
        raise ValueError(f"map_fn/scan: fn must return a tensor of static shape, got {like.shape}")
    dims = concat([reshape(n, [1]), constant(np.asarray(like.shape, np.int64), graph=like.graph)], axis=0)
    return fill(dims, np.zeros((), like.dtype))


def _write(buffer: Tensor, t: Tensor, value: Tensor) -> Tensor:
    index = make_op("Reshape", [t, constant(np.asarray([1, 1], np.int64))]).outputs[0]
    return make_op("ScatterND", [buffer, index, expand_dims(value, 0)]).outputs[0]


def _single(elems, what: str) -> Tensor:
    if isinstance(elems, (list, tuple, dict)):
        raise ValueError(f"{what}: only a single tensor of elements is supported, got a {type(elems).__name__}")
    return convert_to_tensor(elems)


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False,
           infer_shape=True, name=None) -> Tensor:
    """``stack([fn(e) for e in elems])`` for elements along axis 0."""
    x = _single(elems, "map_fn")
    probe = convert_to_tensor(fn(gather(x, constant(np.asarray(0, np.int64), graph=x.graph), axis=0)))
    n = _length(x)

    def body(t, out):
        y = convert_to_tensor(fn(gather(x, t, axis=0)))
        if y.dtype != out.dtype:
            y = cast(y, out.dtype)
        return [t + np.asarray(1, np.int64), _write(out, t, y)]

    t0 = constant(np.asarray(0, np.int64))
    return while_loop(lambda t, out: less(t, n), body, [t0, _buffer(n, probe)], name=name or "map")[1]


def scan(fn, elems, initializer=None, parallel_iterations=None, back_prop=True, swap_memory=False,
         infer_shape=True, reverse=False, name=None) -> Tensor:  # noqa: A002 - TF's keyword
    """Every ``a = fn(a, e)`` along axis 0, stacked (``a`` starts at ``initializer`` or elems[0])."""
    x = _single(elems, "scan")
    backwards = reverse
    if backwards:
        x = reverse_axis0(x)
    n = _length(x)
    if initializer is None:
        a0, t0 = gather(x, constant(np.asarray(0, np.int64)), axis=0), 1
    else:
        a0, t0 = convert_to_tensor(initializer), 0
    out0 = _buffer(n, a0)
    if t0 == 1:
        out0 = _write(out0, constant(np.asarray(0, np.int64)), a0)

    def body(t, a, out):
        a = convert_to_tensor(fn(a, gather(x, t, axis=0)))
        return [t + np.asarray(1, np.int64), a, _write(out, t, a)]

    start = constant(np.asarray(t0, np.int64))
    out = while_loop(lambda t, a, out: less(t, n), body, [start, a0, out0], name=name or "scan")[2]
    return reverse_axis0(out) if backwards else out


def reverse_axis0(x: Tensor) -> Tensor:
    return reverse(x, [0])


def foldl(fn, elems, initializer=None, parallel_iterations=None, back_prop=True, swap_memory=False,
          name=None) -> Tensor:
    """The final ``a = fn(a, e)`` over elements along axis 0, first to last."""
    x = _single(elems, "foldl")
    n = _length(x)
    if initializer is None:
        a0, t0 = gather(x, constant(np.asarray(0, np.int64)), axis=0), 1
    else:
        a0, t0 = convert_to_tensor(initializer), 0

    def body(t, a):
        return [t + np.asarray(1, np.int64), convert_to_tensor(fn(a, gather(x, t, axis=0)))]

    start = constant(np.asarray(t0, np.int64))
    return while_loop(lambda t, a: less(t, n), body, [start, a0], name=name or "foldl")[1]


def foldr(fn, elems, initializer=None, parallel_iterations=None, back_prop=True, swap_memory=False,
          name=None) -> Tensor:
    """As ``foldl``, last element first."""
    return foldl(fn, reverse_axis0(_single(elems, "foldr")), initializer, name=name or "foldr")
