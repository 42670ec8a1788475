"""``tf.TensorArray``: a list of same-shaped tensors built up in a ``while_loop`` (decoders, custom
RNNs), as TensorFlow 1.x's graph-mode class.

Here a TensorArray is a value, not a resource: its elements are one tensor, the *flow*
(schemas/ops/tensor_array.py), and ``write``/``scatter``/``unstack`` return a new TensorArray
over a new flow, as TensorFlow's do (always use the returned one). Reading is a ``Gather`` of the
flow, so gradients flow through reads and writes alike, inside loops too. Elements must share one
shape (``split`` into pieces of different lengths is not supported).
"""

from __future__ import annotations

import numpy as np

from trainer.dtypes import as_dtype
from trainer.graph import Tensor
from trainer.ops import cast, concat, constant, convert_to_tensor, gather, identity, make_op, no_op, reshape, shape
from trainer.tensor_shape import TensorShape, as_shape_tuple, merge_shapes, shapes_compatible

__all__ = ["TensorArray"]

D = "flowstack"


def _merge(known: tuple | None, new: tuple | None, what: str) -> tuple | None:
    if not shapes_compatible(known, new):
        raise ValueError(f"TensorArray: {what} has shape {new}, but the array holds elements of shape {known}")
    return merge_shapes(known, new)


class TensorArray:
    """``TensorArray(dtype, size=None, dynamic_size=None, element_shape=None, ...)``."""

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, tensor_array_name=None,
                 handle=None, flow=None, infer_shape: bool = True, element_shape=None,
                 colocate_with_first_write_call: bool = True, name=None):
        if handle is not None:
            raise ValueError("TensorArray: handle= is not supported (flowstack's TensorArrays are values, not "
                             "resources); pass flow= to rebuild one")
        if size is None and not dynamic_size and flow is None:
            raise ValueError("TensorArray: give size=, or dynamic_size=True")
        self._dtype = as_dtype(dtype)
        self._dynamic_size = bool(dynamic_size)
        self._infer_shape = infer_shape
        self._element_shape = as_shape_tuple(element_shape)
        self._size = cast(convert_to_tensor(-1 if size is None else size), np.int64)
        static = None if size is None or isinstance(size, Tensor) else int(size)
        if flow is not None:
            self._flow = convert_to_tensor(flow)
        elif static is not None and not self._dynamic_size and self._element_shape is not None \
                and None not in self._element_shape:
            self._flow = constant(np.zeros((static,) + self._element_shape, self._dtype.as_numpy_dtype),
                                  name=name or "TensorArray")
        else:  # allocated by the first write, once the element shape is known
            self._flow = constant(np.zeros((0,), self._dtype.as_numpy_dtype), name=name or "TensorArray")

    # -- what it is ---------------------------------------------------------------------------------
    @property
    def flow(self) -> Tensor:
        return self._flow

    @property
    def dtype(self):
        return self._dtype

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic_size

    @property
    def element_shape(self) -> TensorShape:
        return TensorShape(self._element_shape)

    @property
    def handle(self):
        raise AttributeError("TensorArray.handle: flowstack's TensorArrays are values; use .flow")

    def shape_may_change(self) -> bool:
        """Whether a write can change the flow's shape (so a loop must not fix it)."""
        return self._dynamic_size or self._flow.shape in (None, (0,))

    def with_flow(self, flow: Tensor, element_shape: tuple | None = None) -> "TensorArray":
        """This array's configuration over another flow (what a write returns; loops rebuild theirs so)."""
        ta = object.__new__(TensorArray)
        ta._dtype, ta._dynamic_size, ta._infer_shape, ta._size = self._dtype, self._dynamic_size, self._infer_shape, self._size
        ta._element_shape = self._element_shape if element_shape is None else element_shape
        ta._flow = flow
        return ta

    # -- writing: each returns a new TensorArray -----------------------------------------------------
    def write(self, index, value, name=None) -> "TensorArray":
        value = self._value(value, "write")
        return self._scatter(index, value, value.shape, name or "TensorArrayWrite")

    def scatter(self, indices, value, name=None) -> "TensorArray":
        value = self._value(value, "scatter")
        return self._scatter(indices, value, None if value.shape is None else value.shape[1:], name or "TensorArrayScatter")

    def unstack(self, value, name=None) -> "TensorArray":
        value = self._value(value, "unstack")
        from trainer.array_ops import range as tf_range

        indices = tf_range(gather(shape(value), 0))
        return self._scatter(indices, value, None if value.shape is None else value.shape[1:], name or "TensorArrayUnstack")

    def split(self, value, lengths, name=None):
        raise NotImplementedError("TensorArray.split is not supported: flowstack's TensorArray holds elements of one "
                                  "shape; reshape value and unstack it when the lengths are equal")

    def identity(self) -> "TensorArray":
        return self.with_flow(identity(self._flow))

    def close(self, name=None):
        return no_op(name=name)

    def grad(self, source, flow=None, name=None):
        raise NotImplementedError("TensorArray.grad is not supported: tf.gradients differentiates through "
                                  "TensorArray reads and writes")

    # -- reading -------------------------------------------------------------------------------------
    def read(self, index, name=None) -> Tensor:
        out = gather(self._flow, cast(convert_to_tensor(index), np.int64), name=name or "TensorArrayRead")
        if self._element_shape is not None:
            out.set_shape(self._element_shape)
        return out

    def gather(self, indices, name=None) -> Tensor:
        out = gather(self._flow, cast(convert_to_tensor(indices), np.int64), name=name or "TensorArrayGather")
        if self._element_shape is not None and out.shape is not None and len(out.shape) == len(self._element_shape) + 1:
            out.set_shape((out.shape[0],) + self._element_shape)
        return out

    def stack(self, name=None) -> Tensor:
        known = self._element_shape is not None and None not in self._element_shape
        out = make_op("TensorArrayStack", [self._flow],
                      {"element_shape": list(self._element_shape) if known else [], "element_shape_known": int(known)},
                      domain=D, name=name or "TensorArrayStack").outputs[0]
        if self._element_shape is not None:
            out.set_shape((None,) + self._element_shape)
        return out

    def concat(self, name=None) -> Tensor:
        """The elements joined along their first axis."""
        stacked = self.stack()
        rest = self._element_shape[1:] if self._element_shape is not None else None
        target = [-1, *rest] if rest is not None and None not in rest else \
            concat([constant(np.array([-1], np.int64)), make_op("Slice", [shape(stacked), np.array([2], np.int64),
                                                                         np.array([2 ** 62], np.int64)]).outputs[0]], 0)
        return reshape(stacked, target, name=name or "TensorArrayConcat")

    def size(self, name=None) -> Tensor:
        return make_op("TensorArraySize", [self._flow, self._size], domain=D, name=name or "TensorArraySize").outputs[0]

    # -- plumbing ------------------------------------------------------------------------------------
    def _value(self, value, what: str) -> Tensor:
        value = convert_to_tensor(value, dtype=self._dtype.as_numpy_dtype) if not isinstance(value, Tensor) else value
        if value.dtype != self._dtype.as_numpy_dtype:
            raise TypeError(f"TensorArray.{what}: the array holds {self._dtype.name}, got a value of {value.dtype}")
        return value

    def _scatter(self, indices, value: Tensor, element_shape: tuple | None, name: str) -> "TensorArray":
        merged = _merge(self._element_shape, element_shape, "the value written") if self._infer_shape else self._element_shape
        flow = make_op("TensorArrayScatter", [self._flow, cast(convert_to_tensor(indices), np.int64), value, self._size],
                       {"dynamic_size": int(self._dynamic_size)}, domain=D, name=name).outputs[0]
        return self.with_flow(flow, merged)
