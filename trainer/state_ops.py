"""Sparse updates of a variable in place, as TensorFlow 1.15's ``tf.scatter_*`` spell them.

``scatter_<op>(ref, indices, updates)`` applies ``ref[indices] (op)= updates`` row by row
(``updates`` is ``indices.shape + ref.shape[1:]`` or a scalar); ``scatter_nd_<op>`` picks
elements or slices by index tuples (``indices`` is ``[..., K]``, ``updates`` is
``indices.shape[:-1] + ref.shape[K:]``). Each returns the updated variable (its ref), so a fetch
sees the value after the update. Repeated indices accumulate (assignment keeps the last one); an
index outside the variable fails the run with InvalidArgumentError naming it.

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     v = tf.Variable([1.0, 2.0, 3.0])
...     up = tf.scatter_add(v, [0, 2, 0], [10.0, 20.0, 30.0])
...     init = tf.global_variables_initializer()
>>> s = tf.Session(graph=g); _ = s.run(init); s.run(up).tolist()
[41.0, 2.0, 23.0]
"""

from __future__ import annotations

from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import convert_to_tensor

__all__ = ["scatter_add", "scatter_div", "scatter_max", "scatter_min", "scatter_mul", "scatter_nd_add",
           "scatter_nd_sub", "scatter_nd_update", "scatter_sub", "scatter_update"]


def _scatter(op_type: str, ref, indices, updates, use_locking: bool, name) -> Tensor:
    target = convert_to_tensor(ref)
    g = target.graph
    idx = convert_to_tensor(indices, graph=g)
    if idx.dtype is not None and idx.dtype.kind not in "iu":
        raise TypeError(f"{op_type}: indices must be int32 or int64, got {idx.dtype}")
    values = convert_to_tensor(updates, dtype=target.dtype, graph=g)
    with g.colocate_with(target.op):
        return g.create_op(op_type, [target, idx, values], {"use_locking": int(bool(use_locking))},
                           domain=TRAINER_DOMAIN, name=name or op_type).outputs[0]


def scatter_update(ref, indices, updates, use_locking: bool = True, name=None) -> Tensor:
    """``ref[indices] = updates``; with repeated indices the last update wins."""
    return _scatter("ScatterUpdate", ref, indices, updates, use_locking, name)


def scatter_add(ref, indices, updates, use_locking: bool = False, name=None) -> Tensor:
    return _scatter("ScatterAdd", ref, indices, updates, use_locking, name)


def scatter_sub(ref, indices, updates, use_locking: bool = False, name=None) -> Tensor:
    return _scatter("ScatterSub", ref, indices, updates, use_locking, name)


def scatter_mul(ref, indices, updates, use_locking: bool = False, name=None) -> Tensor:
    return _scatter("ScatterMul", ref, indices, updates, use_locking, name)


def scatter_div(ref, indices, updates, use_locking: bool = False, name=None) -> Tensor:
    """``ref[indices] /= updates``; integers divide truncating toward zero, as TensorFlow's kernel does."""
    return _scatter("ScatterDiv", ref, indices, updates, use_locking, name)


def scatter_max(ref, indices, updates, use_locking: bool = False, name=None) -> Tensor:
    return _scatter("ScatterMax", ref, indices, updates, use_locking, name)


def scatter_min(ref, indices, updates, use_locking: bool = False, name=None) -> Tensor:
    return _scatter("ScatterMin", ref, indices, updates, use_locking, name)


def scatter_nd_update(ref, indices, updates, use_locking: bool = True, name=None) -> Tensor:
    return _scatter("ScatterNdUpdate", ref, indices, updates, use_locking, name)


def scatter_nd_add(ref, indices, updates, use_locking: bool = False, name=None) -> Tensor:
    return _scatter("ScatterNdAdd", ref, indices, updates, use_locking, name)


def scatter_nd_sub(ref, indices, updates, use_locking: bool = False, name=None) -> Tensor:
    return _scatter("ScatterNdSub", ref, indices, updates, use_locking, name)
