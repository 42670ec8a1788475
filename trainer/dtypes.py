"""TensorFlow 1.x dtype objects (``tf.float32``, ``tf.as_dtype``) over NumPy dtypes.

A ``DType`` exposes ``.dtype`` (its NumPy dtype), which NumPy itself honours, so ``tf.float32``
works wherever the trainer or NumPy accepts a dtype: ``np.zeros(3, tf.float32)``,
``placeholder(tf.float32)``, ``cast(x, tf.int64)``. It compares equal to the NumPy dtype it wraps,
so ``tensor.dtype == tf.float32`` holds. Strings follow TensorFlow, not NumPy: ``"float"`` is
float32 (NumPy reads it as float64) and ``"double"`` float64.

>>> import numpy as np
>>> as_dtype("float") == np.float32, float32.as_numpy_dtype is np.float32, int64.name
(True, True, 'int64')
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DType", "as_dtype", "as_numpy_dtype", "bfloat16", "bool", "complex64", "complex128", "double", "float16",
    "float32", "float64", "half", "int8", "int16", "int32", "int64", "string", "uint8", "uint16", "uint32",
    "uint64",
]


class DType:
    """One TensorFlow dtype: ``name``, ``as_numpy_dtype``, ``is_floating``, ``is_integer``, ``min``/``max``."""

    __slots__ = ("_np", "name")

    def __init__(self, numpy_dtype, name: str):
        self._np = np.dtype(numpy_dtype)
        self.name = name

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype; NumPy converts any object with this attribute, so DType is accepted by it."""
        return self._np

    @property
    def as_numpy_dtype(self) -> type:
        return self._np.type

    @property
    def base_dtype(self) -> "DType":
        return self

    @property
    def is_floating(self) -> bool:
        return self._np.kind == "f"

    @property
    def is_integer(self) -> bool:
        return self._np.kind in "iu"

    @property
    def is_bool(self) -> bool:
        return self._np.kind == "b"

    @property
    def is_complex(self) -> bool:
        return self._np.kind == "c"

    @property
    def size(self) -> int:
        return self._np.itemsize

    @property
    def min(self):
        return np.finfo(self._np).min if self.is_floating else np.iinfo(self._np).min

    @property
    def max(self):
        return np.finfo(self._np).max if self.is_floating else np.iinfo(self._np).max

    def __eq__(self, other) -> bool:
        try:
            return self._np == as_numpy_dtype(other)
        except TypeError:
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self._np)

    def __getattr__(self, attr: str):
        """What a NumPy dtype has (``kind``, ``type``, ``itemsize``, ...): a tensor's ``dtype`` is a DType,
        and code written for NumPy dtypes keeps working on it."""
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self._np, attr)

    def __repr__(self) -> str:
        return f"tf.{self.name}"


float16 = half = DType(np.float16, "float16")
float32 = DType(np.float32, "float32")
float64 = double = DType(np.float64, "float64")
bfloat16 = float32  # no bfloat16 in NumPy: computed in float32, as TensorFlow does on CPU
int8 = DType(np.int8, "int8")
int16 = DType(np.int16, "int16")
int32 = DType(np.int32, "int32")
int64 = DType(np.int64, "int64")
uint8 = DType(np.uint8, "uint8")
uint16 = DType(np.uint16, "uint16")
uint32 = DType(np.uint32, "uint32")
uint64 = DType(np.uint64, "uint64")
bool = DType(np.bool_, "bool")  # noqa: A001 - TensorFlow's name
complex64 = DType(np.complex64, "complex64")
complex128 = DType(np.complex128, "complex128")
string = DType(object, "string")

_BY_NAME = {d.name: d for d in (float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32,
                                 uint64, bool, complex64, complex128, string)}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "bfloat16": float32})
_BY_NUMPY = {d.dtype: d for d in _BY_NAME.values()}


def as_dtype(type_value) -> DType:
    """``tf.as_dtype``: a DType from a DType, a NumPy dtype or type, or a TensorFlow dtype name."""
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, str) and type_value in _BY_NAME:
        return _BY_NAME[type_value]
    try:
        return _BY_NUMPY[np.dtype(type_value)]
    except (TypeError, KeyError):
        raise TypeError(f"cannot convert {type_value!r} to a dtype; use one of {sorted(_BY_NAME)}") from None


def tensor_dtype(numpy_dtype: np.dtype | None) -> "DType | np.dtype | None":
    """What ``Tensor.dtype`` shows: the DType of a numeric or bool NumPy dtype, else the NumPy dtype.

    String tensors keep NumPy's object dtype (still ``== tf.string``): graph files and attributes
    record ``tensor.dtype.name``, which must stay a name NumPy reads ("object", not "string")."""
    if numpy_dtype is None or numpy_dtype.kind == "O":
        return numpy_dtype
    return _BY_NUMPY.get(numpy_dtype, numpy_dtype)


def as_numpy_dtype(type_value) -> np.dtype | None:
    """The NumPy dtype for anything ``as_dtype`` accepts (None stays None: "infer it")."""
    if type_value is None:
        return None
    if isinstance(type_value, str) and type_value in _BY_NAME:
        return _BY_NAME[type_value].dtype
    try:
        return np.dtype(type_value)
    except TypeError:
        raise TypeError(f"cannot convert {type_value!r} to a dtype; use one of {sorted(_BY_NAME)}") from None
