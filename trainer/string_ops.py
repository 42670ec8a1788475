"""TF 1.x's string functions: ``tf.string_split``, ``tf.string_to_number``, ``tf.string_join`` and
the ``tf.strings`` namespace's spellings of them. String tensors hold ``str`` or ``bytes``
(TensorFlow's); a split keeps the kind it was given."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels.text import as_string_format
from trainer.dtypes import as_dtype
from trainer.errors import InvalidArgumentError
from trainer.ops import convert_to_tensor, make_op
from trainer.sparse_tensor import SparseTensor

__all__ = ["as_string", "split", "string_join", "string_split", "string_to_number", "to_number"]

D = "flowstack"


def _split(source, delimiter: str, skip_empty: bool, maxsplit: int, whitespace: bool, name) -> SparseTensor:
    x = convert_to_tensor(source)
    if x.shape is not None and len(x.shape) != 1:
        raise ValueError(f"string_split: the source must be 1-D, got shape {x.shape}")
    attrs = {"delimiter": delimiter, "skip_empty": int(skip_empty), "maxsplit": maxsplit, "whitespace": int(whitespace)}
    indices, values, dense_shape = make_op("StringSplitSparse", [x], attrs, domain=D, name=name or "StringSplit",
                                           num_outputs=3).outputs
    return SparseTensor(indices, values, dense_shape)


def string_split(source, delimiter: str = " ", skip_empty: bool = True, name=None) -> SparseTensor:
    """Each string of the 1-D ``source`` split at every character of ``delimiter`` (an empty
    delimiter: into characters), as a SparseTensor [len(source), most tokens]."""
    return _split(source, delimiter, skip_empty, -1, False, name)


def split(source, sep=None, maxsplit: int = -1, result_type: str = "SparseTensor", name=None) -> SparseTensor:
    """``tf.strings.split``: at ``sep`` (a whole string; None splits at runs of whitespace)."""
    if result_type != "SparseTensor":
        raise NotImplementedError("tf.strings.split: result_type='RaggedTensor' is not supported; flowstack returns "
                                  "a SparseTensor")
    if sep is None:
        return _split(source, "", True, maxsplit, True, name)
    if len(sep) != 1:
        raise NotImplementedError("tf.strings.split: a separator of more than one character is not supported")
    return _split(source, sep, False, maxsplit, False, name)


def string_to_number(string_tensor, out_type=np.float32, name=None):
    """Each string parsed as a number (float32 by default; float64, int32, int64)."""
    return make_op("StringToNumber", [convert_to_tensor(string_tensor)],
                   {"out_type": np.dtype(as_dtype(out_type).as_numpy_dtype).name}, domain=D,
                   name=name or "StringToNumber").outputs[0]


to_number = string_to_number


def string_join(inputs, separator: str = "", name=None):
    """The strings of ``inputs`` (broadcast against each other) joined with ``separator``."""
    parts = [convert_to_tensor(x) for x in inputs]
    if not parts:
        raise ValueError("string_join: no inputs")
    out = parts[0]
    for part in parts[1:]:
        if separator:
            out = make_op("StringConcat", [out, convert_to_tensor(np.array(separator, dtype=object))]).outputs[0]
        out = make_op("StringConcat", [out, part]).outputs[0]
    return out if name is None else make_op("Identity", [out], name=name).outputs[0]


# TF 1.15's AsString takes these; other dtypes (uint8, float16, strings) fail when the op is built.
_AS_STRING_DTYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "complex64", "complex128", "bool")


def as_string(input, precision: int = -1, scientific: bool = False, shortest: bool = False,  # noqa: A002 - TF's name
              width: int = -1, fill: str = "", name=None):
    """Each element as a string, formatted as TensorFlow's AsString (printf) does: ``%d`` for
    integers; for floats ``%f`` (``%e`` scientific, ``%g`` shortest) with ``precision`` digits;
    ``width`` pads with ``fill`` (one of `` +-0#``); bools become ``true``/``false``.

    >>> import trainer as tf
    >>> g = tf.Graph()
    >>> with g.as_default():
    ...     s = tf.as_string(tf.constant([3.5, -0.25]), precision=2, width=7)
    >>> tf.Session(graph=g).run(s).tolist()
    [b'   3.50', b'  -0.25']
    """
    x = convert_to_tensor(input)
    if x.dtype is not None and x.dtype.name not in _AS_STRING_DTYPES:
        raise TypeError(f"as_string: input has dtype {x.dtype.name}, not one of {', '.join(_AS_STRING_DTYPES)}")
    if x.dtype is not None:
        try:
            as_string_format(x.dtype, precision, scientific, shortest, width, fill)
        except ValueError as e:
            raise InvalidArgumentError(f"AsString: {e}") from None
    attrs = {"precision": int(precision), "scientific": int(bool(scientific)), "shortest": int(bool(shortest)),
             "width": int(width), "fill": fill}
    return make_op("AsString", [x], attrs, domain=D, name=name or "AsString").outputs[0]
