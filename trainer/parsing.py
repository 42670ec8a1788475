"""``tf.parse_single_example`` / ``tf.parse_example`` and their feature specs: serialized
``tf.train.Example`` records (trainer/example_proto.py) to dense tensors, as a TF1 TFRecord input
pipeline reads them.

``FixedLenFeature`` gives a tensor of its shape per record (its ``default_value`` where a record
lacks the key, else an error naming the key); ``FixedLenSequenceFeature(allow_missing=True)`` a
tensor of any number of such values, padded with its default across a batch; ``VarLenFeature`` a
SparseTensor of each record's values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from edge_runtime.example_records import FEATURE_LISTS
from schemas.ops.data import FIXED, SEQUENCE, SPARSE
from trainer.dtypes import as_dtype
from trainer.ops import constant, convert_to_tensor, make_op
from trainer.sparse_tensor import SparseTensor

__all__ = ["FEATURE_LISTS", "FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "parse_example",
           "parse_single_example"]



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


_KIND = {FixedLenFeature: FIXED, FixedLenSequenceFeature: SEQUENCE, VarLenFeature: SPARSE}


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
    """A batch of serialized Examples to ``{key: tensor [batch, *shape]}`` (a SparseTensor of
    [batch, longest] for a VarLenFeature)."""
    if not features:
        raise ValueError("parse_example: features is empty")
    keys = sorted(features)
    dtypes, shapes, kinds, defaults = [], [], [], []
    for key in keys:
        spec = features[key]
        if isinstance(spec, FixedLenSequenceFeature) and not spec.allow_missing:
            raise ValueError(f"feature {key!r}: FixedLenSequenceFeature in an Example needs allow_missing=True")
        if not isinstance(spec, (FixedLenFeature, FixedLenSequenceFeature, VarLenFeature)):
            raise TypeError(f"feature {key!r}: expected FixedLenFeature, FixedLenSequenceFeature or VarLenFeature, got "
                            f"{type(spec).__name__}")
        dtype = _numpy_dtype(spec, key)
        raw_shape = getattr(spec, "shape", ())
        shape = tuple(int(d) for d in (raw_shape if isinstance(raw_shape, (list, tuple)) else [raw_shape]))
        dtypes.append(dtype.name)
        shapes.append(list(shape))
        kinds.append(_KIND[type(spec)])
        defaults.append(constant(np.zeros((0,), dtype) if isinstance(spec, VarLenFeature)
                                 else _default(spec, dtype, shape, key)))
    count = sum(3 if kind == SPARSE else 1 for kind in kinds)
    attrs = {"keys": keys, "dtypes": dtypes, "shapes": json.dumps(shapes), "kinds": kinds, "num_outputs": count}
    outputs = iter(make_op("ParseExample", [convert_to_tensor(serialized), *defaults], attrs, domain="flowstack",
                           name=name or "ParseExample", num_outputs=count).outputs)
    return {key: SparseTensor(next(outputs), next(outputs), next(outputs)) if kind == SPARSE else next(outputs)
            for key, kind in zip(keys, kinds)}


def parse_single_example(serialized, features: dict, name=None, example_names=None) -> dict:
    """One serialized Example to ``{key: tensor of the feature's shape}``."""
    return parse_example(serialized, features, name=name or "ParseSingleExample")
