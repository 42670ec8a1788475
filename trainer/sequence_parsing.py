"""``tf.io.parse_single_sequence_example`` / ``parse_sequence_example``: serialized
``tf.train.SequenceExample`` records (trainer/example_proto.py) to the context's tensors and the
feature lists' per-step tensors, as TF1 sequence models read them.

Context features are ``FixedLenFeature`` (a tensor of its shape; its default where a record lacks
it) or ``VarLenFeature`` (a SparseTensor). Feature lists are ``FixedLenSequenceFeature`` (a tensor
[steps, *shape]; ``allow_missing=True`` lets a record lack the list) or ``VarLenFeature`` (a
SparseTensor [steps, longest]). A batch pads the steps with the feature's ``default_value`` (else
zeros) and ``parse_sequence_example`` also gives each list's step counts.
"""

from __future__ import annotations

import json

import numpy as np

from schemas.ops.data import FIXED, SEQUENCE, SPARSE
from trainer.dtypes import as_dtype
from trainer.ops import constant, convert_to_tensor, make_op
from trainer.parsing import FEATURE_LISTS, FixedLenFeature, FixedLenSequenceFeature, VarLenFeature
from trainer.sparse_tensor import SparseTensor

__all__ = ["parse_sequence_example", "parse_single_sequence_example"]


def _dtype(spec, key: str) -> np.dtype:
    dtype = np.dtype(as_dtype(spec.dtype).as_numpy_dtype)
    if dtype.name not in FEATURE_LISTS:
        raise ValueError(f"feature {key!r}: dtype {dtype} is not one of tf.float32, tf.int64, tf.string")
    return dtype


def _shape(spec) -> tuple:
    raw = getattr(spec, "shape", ())
    return tuple(int(d) for d in (raw if isinstance(raw, (list, tuple)) else [raw]))


def _context(features: dict) -> tuple[dict, list]:
    attrs = {"context_keys": [], "context_dtypes": [], "context_kinds": []}
    shapes, defaults = [], []
    for key in sorted(features):
        spec = features[key]
        if not isinstance(spec, (FixedLenFeature, VarLenFeature)):
            raise TypeError(f"context feature {key!r}: expected FixedLenFeature or VarLenFeature, got "
                            f"{type(spec).__name__}")
        dtype, shape = _dtype(spec, key), _shape(spec)
        default = np.zeros((0,), dtype)
        if isinstance(spec, FixedLenFeature) and spec.default_value is not None:
            value = np.asarray(spec.default_value, dtype=dtype)
            if value.size != int(np.prod(shape)) and value.size != 1:
                raise ValueError(f"context feature {key!r}: default_value of shape {value.shape} does not fit {shape}")
            default = np.broadcast_to(value.reshape(-1) if value.size > 1 else value, (int(np.prod(shape)),)).copy()
        attrs["context_keys"].append(key)
        attrs["context_dtypes"].append(dtype.name)
        attrs["context_kinds"].append(SPARSE if isinstance(spec, VarLenFeature) else FIXED)
        shapes.append(list(shape))
        defaults.append(constant(default))
    attrs["context_shapes"] = json.dumps(shapes)
    return attrs, defaults


def _sequence(features: dict) -> tuple[dict, list]:
    attrs = {"sequence_keys": [], "sequence_dtypes": [], "sequence_kinds": [], "sequence_allow_missing": []}
    shapes, defaults = [], []
    for key in sorted(features):
        spec = features[key]
        if not isinstance(spec, (FixedLenSequenceFeature, VarLenFeature)):
            raise TypeError(f"sequence feature {key!r}: expected FixedLenSequenceFeature or VarLenFeature, got "
                            f"{type(spec).__name__}")
        dtype = _dtype(spec, key)
        default = np.zeros((0,), dtype)
        if getattr(spec, "default_value", None) is not None:
            default = np.asarray(spec.default_value, dtype=dtype).reshape(1)
        attrs["sequence_keys"].append(key)
        attrs["sequence_dtypes"].append(dtype.name)
        attrs["sequence_kinds"].append(SPARSE if isinstance(spec, VarLenFeature) else SEQUENCE)
        attrs["sequence_allow_missing"].append(int(bool(getattr(spec, "allow_missing", False))))
        shapes.append(list(_shape(spec)))
        defaults.append(constant(default))
    attrs["sequence_shapes"] = json.dumps(shapes)
    return attrs, defaults


def _parse(serialized, context_features, sequence_features, name, rank: int):
    context_features, sequence_features = dict(context_features or {}), dict(sequence_features or {})
    if not context_features and not sequence_features:
        raise ValueError("parse_sequence_example: give context_features or sequence_features (both are empty)")
    records = convert_to_tensor(serialized)
    if records.shape is not None and len(records.shape) != rank:
        what = "a scalar string" if rank == 0 else "a vector of strings"
        raise ValueError(f"parse_sequence_example: serialized must be {what}, got shape {records.shape}")
    c_attrs, c_defaults = _context(context_features)
    s_attrs, s_defaults = _sequence(sequence_features)
    count = sum(3 if k == SPARSE else 1 for k in c_attrs["context_kinds"]) + \
        sum(3 if k == SPARSE else 2 for k in s_attrs["sequence_kinds"])
    outputs = iter(make_op("ParseSequenceExample", [records, *c_defaults, *s_defaults],
                           {**c_attrs, **s_attrs, "num_outputs": count}, domain="flowstack",
                           name=name or "ParseSequenceExample", num_outputs=count).outputs)
    context = {key: SparseTensor(next(outputs), next(outputs), next(outputs)) if kind == SPARSE else next(outputs)
               for key, kind in zip(c_attrs["context_keys"], c_attrs["context_kinds"])}
    sequences, lengths = {}, {}
    for key, kind in zip(s_attrs["sequence_keys"], s_attrs["sequence_kinds"]):
        if kind == SPARSE:
            sequences[key] = SparseTensor(next(outputs), next(outputs), next(outputs))
        else:
            sequences[key], lengths[key] = next(outputs), next(outputs)
    return context, sequences, lengths


def parse_single_sequence_example(serialized, context_features=None, sequence_features=None, example_name=None,
                                  name=None) -> tuple[dict, dict]:
    """One serialized SequenceExample to ``(context, feature_lists)`` dicts of tensors."""
    context, sequences, _ = _parse(serialized, context_features, sequence_features, name, 0)
    return context, sequences


def parse_sequence_example(serialized, context_features=None, sequence_features=None, example_names=None,
                           name=None) -> tuple[dict, dict, dict]:
    """A vector of serialized SequenceExamples to ``(context, feature_lists, lengths)``: each
    FixedLenSequenceFeature's tensor is [batch, longest, *shape] and ``lengths[key]`` its step counts."""
    return _parse(serialized, context_features, sequence_features, name, 1)
