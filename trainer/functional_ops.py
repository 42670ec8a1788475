"""``map_fn``, ``scan``, ``foldl`` and ``foldr`` over the first axis, as while_loops.

Each step's result is written into a [n, ...] buffer with ScatterND, so the loop's gradient runs
through the while_loop gradient machinery like ``dynamic_rnn``'s. ``map_fn`` learns its result's
shape and dtype by building ``fn`` once on the first element outside the loop (those ops are never
run); ``fn`` must not create variables. Elements, results and accumulators may be nests (tuples,
lists, dicts) of tensors, as in TensorFlow.

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
from trainer.nest import flatten, pack_as
from trainer.ops import cast, concat, constant, convert_to_tensor, gather, less, make_op, reshape
from trainer.dtypes import as_numpy_dtype

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


def _flat_elements(elems, what: str) -> tuple[list[Tensor], Tensor]:
    """``elems`` (a tensor, or a tuple/list/dict nest of them) flattened, and their common length."""
    flat = [convert_to_tensor(e) for e in flatten(elems)]
    if not flat:
        raise ValueError(f"{what}: elems must hold at least one tensor")
    n = _length(flat[0])
    lengths = {x.shape[0] for x in flat if x.shape is not None and x.shape[0] is not None}
    if len(lengths) > 1:
        raise ValueError(f"{what}: the tensors of elems must have the same length along axis 0, got {sorted(lengths)}")
    return flat, n


def _element(elems, flat: list[Tensor], t) -> object:
    """Element ``t`` of every tensor of ``elems``, in ``elems``' nesting."""
    return pack_as(elems, [gather(x, t, axis=0) for x in flat])


def _flat_result(value) -> list[Tensor]:
    return [convert_to_tensor(v) for v in flatten(value)]


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False,
           infer_shape=True, name=None):
    """``stack([fn(e) for e in elems])`` for elements along axis 0. ``elems`` may be a nest (tuple,
    list or dict) of tensors of one length, passed to ``fn`` sliced in the same nest; ``fn`` may
    return a nest, ``dtype`` giving its dtypes where they differ from ``elems``'."""
    flat, n = _flat_elements(elems, "map_fn")
    zero = constant(np.asarray(0, np.int64), graph=flat[0].graph)
    probe = fn(_element(elems, flat, zero))
    probes = _flat_result(probe)
    dtypes = [None] * len(probes) if dtype is None else [as_numpy_dtype(d) for d in flatten(dtype)]
    if len(dtypes) != len(probes):
        raise ValueError(f"map_fn: dtype has {len(dtypes)} entries but fn returns {len(probes)} tensors")
    buffers = [_buffer(n, p if d is None or p.dtype == d else cast(p, d)) for p, d in zip(probes, dtypes)]

    def body(t, *outs):
        ys = _flat_result(fn(_element(elems, flat, t)))
        ys = [y if y.dtype == out.dtype else cast(y, out.dtype) for y, out in zip(ys, outs)]
        return [t + np.asarray(1, np.int64)] + [_write(out, t, y) for out, y in zip(outs, ys)]

    t0 = constant(np.asarray(0, np.int64))
    results = while_loop(lambda t, *outs: less(t, n), body, [t0] + buffers, name=name or "map")[1:]
    return pack_as(probe, list(results))


def scan(fn, elems, initializer=None, parallel_iterations=None, back_prop=True, swap_memory=False,
         infer_shape=True, reverse=False, name=None):  # noqa: A002 - TF's keyword
    """Every ``a = fn(a, e)`` along axis 0, stacked (``a`` starts at ``initializer`` or elems[0]).
    ``elems``, ``initializer`` and ``a`` may be nests, as in ``map_fn``."""
    flat, n = _flat_elements(elems, "scan")
    backwards = reverse
    if backwards:
        flat = [reverse_axis0(x) for x in flat]
    zero = constant(np.asarray(0, np.int64))
    if initializer is None:
        state, t0 = _element(elems, flat, zero), 1
    else:
        state, t0 = initializer, 0
    a0 = _flat_result(state)
    outs0 = [_buffer(n, a) for a in a0]
    if t0 == 1:
        outs0 = [_write(out, zero, a) for out, a in zip(outs0, a0)]
    k = len(a0)

    def body(t, *vars_):
        a = _flat_result(fn(pack_as(state, list(vars_[:k])), _element(elems, flat, t)))
        return [t + np.asarray(1, np.int64)] + a + [_write(out, t, v) for out, v in zip(vars_[k:], a)]

    start = constant(np.asarray(t0, np.int64))
    results = list(while_loop(lambda t, *vars_: less(t, n), body, [start] + a0 + outs0, name=name or "scan")[1 + k:])
    if backwards:
        results = [reverse_axis0(r) for r in results]
    return pack_as(state, results)


def reverse_axis0(x: Tensor) -> Tensor:
    return reverse(x, [0])


def foldl(fn, elems, initializer=None, parallel_iterations=None, back_prop=True, swap_memory=False,
          name=None):
    """The final ``a = fn(a, e)`` over elements along axis 0, first to last (nests as in ``scan``)."""
    flat, n = _flat_elements(elems, "foldl")
    return _fold(fn, elems, flat, n, initializer, name or "foldl")


def foldr(fn, elems, initializer=None, parallel_iterations=None, back_prop=True, swap_memory=False,
          name=None):
    """As ``foldl``, last element first."""
    flat, n = _flat_elements(elems, "foldr")
    return _fold(fn, elems, [reverse_axis0(x) for x in flat], n, initializer, name or "foldr")


def _fold(fn, elems, flat: list[Tensor], n, initializer, name: str):
    zero = constant(np.asarray(0, np.int64))
    if initializer is None:
        state, t0 = _element(elems, flat, zero), 1
    else:
        state, t0 = initializer, 0
    a0 = _flat_result(state)

    def body(t, *a):
        return [t + np.asarray(1, np.int64)] + _flat_result(fn(pack_as(state, list(a)), _element(elems, flat, t)))

    start = constant(np.asarray(t0, np.int64))
    return pack_as(state, list(while_loop(lambda t, *a: less(t, n), body, [start] + a0, name=name)[1:]))
