"""TensorFlow 1.x's ParseSequenceExample (domain ``flowstack``): serialized
``tf.train.SequenceExample`` records to context tensors and per-step feature-list tensors.

Its kernel (trainer/kernels/sequence_examples.py) decodes protobuf, which the edge runtime does
not carry, so the op runs in the trainer only.
"""

from __future__ import annotations

import json

import numpy as np

from schemas.ops.data import SEQUENCE, SPARSE
from schemas.registry import REQUIRED, Attr, TensorType, op

D = "flowstack"
INT64 = np.dtype(np.int64)


def _feature_types(kinds, dtypes, shapes, outer: tuple, sequence: bool) -> list[TensorType]:
    types = []
    for kind, dtype, shape in zip(kinds, dtypes, shapes):
        dtype = np.dtype(dtype)
        steps = (None,) if sequence else ()
        if kind == SPARSE:
            rank = len(outer) + len(steps) + 1
            types += [TensorType(INT64, (None, rank)), TensorType(dtype, (None,)), TensorType(INT64, (rank,))]
        else:
            types.append(TensorType(dtype, outer + steps + tuple(shape)))
            if kind == SEQUENCE:
                types.append(TensorType(INT64, outer))  # the steps each record holds
    return types


@op("ParseSequenceExample", domain=D, inputs=["serialized", "defaults*"], outputs=["values*"],
    attrs={"context_keys": Attr("strings", ()), "context_dtypes": Attr("strings", ()),
           "context_shapes": Attr("string", "[]"), "context_kinds": Attr("ints", ()),
           "sequence_keys": Attr("strings", ()), "sequence_dtypes": Attr("strings", ()),
           "sequence_shapes": Attr("string", "[]"), "sequence_kinds": Attr("ints", ()),
           "sequence_allow_missing": Attr("ints", ()), "num_outputs": Attr("int", REQUIRED)},
    output_count_attr="num_outputs",
    doc="Serialized tf.train.SequenceExample records (a scalar or a vector) to tensors: each context feature "
        "(FIXED: the value or its default, SPARSE: indices, values, dense_shape) then each feature list "
        "(SEQUENCE: [steps, *shape] padded with its default across a batch, then the step counts; SPARSE: "
        "indices, values, dense_shape one rank up). defaults: one per context feature, then one scalar per "
        "feature list (empty arrays where there is none).")
def _parse_sequence_example(ctx):
    serialized = ctx.input(0).shape
    if serialized is not None and len(serialized) > 1:
        raise ctx.fail(f"serialized must be a scalar or a vector, got shape {serialized}")
    outer = () if serialized is None or len(serialized) == 0 else (serialized[0],)
    a = ctx.attrs
    return (_feature_types(a["context_kinds"], a["context_dtypes"], json.loads(a["context_shapes"]), outer, False)
            + _feature_types(a["sequence_kinds"], a["sequence_dtypes"], json.loads(a["sequence_shapes"]), outer,
                             True))
