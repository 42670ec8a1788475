"""TF 1.x's string functions: ``tf.string_split``, ``tf.string_to_number``, ``tf.string_join`` and
the ``tf.strings`` namespace's spellings of them. String tensors hold ``str`` or ``bytes``
(TensorFlow's); a split keeps the kind it was given."""

from __future__ import annotations

import numpy as np

from trainer.dtypes import as_dtype
from trainer.ops import convert_to_tensor, make_op
from trainer.sparse_tensor import SparseTensor

__all__ = ["split", "string_join", "string_split", "string_to_number", "to_number"]

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
