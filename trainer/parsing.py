"""``tf.parse_single_example`` / ``tf.parse_example`` and their feature specs: serialized
``tf.train.Example`` records (trainer/example_proto.py) to dense tensors, as a TF1 TFRecord input
pipeline reads them.

``FixedLenFeature`` gives a tensor of its shape per record (its ``default_value`` where a record
lacks the key, else an error naming the key); ``FixedLenSequenceFeature(allow_missing=True)`` a
tensor of any number of such values, padded with its default across a batch. ``VarLenFeature``
gives a SparseTensor in TensorFlow, which flowstack does not have: it is refused with that advice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from trainer.dtypes import as_dtype
from trainer.ops import constant, convert_to_tensor, make_op

__all__ = ["FEATURE_LISTS", "FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "parse_example",
           "parse_single_example"]

# A parsed tensor's dtype -> the list of a tf.train.Feature that holds its values.
FEATURE_LISTS = {"float32": "float_list", "int64": "int64_list", "object": "bytes_list"}


@dataclass(frozen=True)
class FixedLenFeature:
    shape: tuple = ()
    dtype: object = None
    default_value: object = None


@dataclass(frozen=True)
class FixedLenSequenceFeature:
    shape: tuple = ()
    dtype: object = None
    allow_missing: bool = False
    default_value: object = None


@dataclass(frozen=True)
class VarLenFeature:
    dtype: object = None


def _numpy_dtype(spec, key: str) -> np.dtype:
    dtype = np.dtype(as_dtype(spec.dtype).as_numpy_dtype)
    if dtype.name not in FEATURE_LISTS:
        raise ValueError(f"feature {key!r}: dtype {dtype} is not one of tf.float32, tf.int64, tf.string (the "
                         f"three lists a tf.train.Feature holds)")
    return dtype


def _default(spec, dtype: np.dtype, shape: tuple, key: str) -> np.ndarray:
    if spec.default_value is None:
        return np.zeros((0,), dtype)  # required
    value = np.asarray(spec.default_value, dtype=dtype)
    if isinstance(spec, FixedLenSequenceFeature):
        return value.reshape(())
    try:
        return np.broadcast_to(value, shape).copy()
    except ValueError:
        raise ValueError(f"feature {key!r}: default_value of shape {value.shape} does not fit shape {shape}") from None


def parse_example(serialized, features: dict, name=None, example_names=None) -> dict:
    """A batch of serialized Examples to ``{key: tensor [batch, *shape]}``."""
    if not features:
        raise ValueError("parse_example: features is empty")
    keys = sorted(features)
    dtypes, shapes, sequence, defaults = [], [], [], []
    for key in keys:
        spec = features[key]
        if isinstance(spec, VarLenFeature):
            raise NotImplementedError(f"feature {key!r}: VarLenFeature gives a SparseTensor, which flowstack does not "
                                      f"have; use FixedLenSequenceFeature(shape, dtype, allow_missing=True) for a "
                                      f"dense, padded tensor")
        if isinstance(spec, FixedLenSequenceFeature) and not spec.allow_missing:
            raise ValueError(f"feature {key!r}: FixedLenSequenceFeature in an Example needs allow_missing=True")
        if not isinstance(spec, (FixedLenFeature, FixedLenSequenceFeature)):
            raise TypeError(f"feature {key!r}: expected FixedLenFeature or FixedLenSequenceFeature, got "
                            f"{type(spec).__name__}")
        dtype = _numpy_dtype(spec, key)
        shape = tuple(int(d) for d in (spec.shape if isinstance(spec.shape, (list, tuple)) else [spec.shape]))
        dtypes.append(dtype.name)
        shapes.append(list(shape))
        sequence.append(int(isinstance(spec, FixedLenSequenceFeature)))
        defaults.append(constant(_default(spec, dtype, shape, key)))
    attrs = {"keys": keys, "dtypes": dtypes, "shapes": json.dumps(shapes), "sequence": sequence,
             "num_outputs": len(keys)}
    node = make_op("ParseExample", [convert_to_tensor(serialized), *defaults], attrs, domain="flowstack",
                   name=name or "ParseExample", num_outputs=len(keys))
    return dict(zip(keys, node.outputs))


def parse_single_example(serialized, features: dict, name=None, example_names=None) -> dict:
    """One serialized Example to ``{key: tensor of the feature's shape}``."""
    return parse_example(serialized, features, name=name or "ParseSingleExample")
