"""Sample serialized tf.train.Example records for a model whose input is parsed by ParseExample (an
Estimator exported with ``build_parsing_serving_input_receiver_fn``): the export's parity checks
need feeds, and random bytes are not records.

Each record lists every feature the ParseExample node reads, with values of the declared dtype and
shape: floats from a normal draw, int64s 0 or 1 (valid ids for any identity column), strings from a
few short words. Every other record leaves out the features that have a default, so the defaults'
path is checked too; sequence and var-len features get zero to three values.
"""

from __future__ import annotations

import json
import math

import numpy as np

from edge_runtime.example_records import FEATURE_LISTS, encode_example
from exporter import ir
from schemas.ops.data import FIXED

__all__ = ["SAMPLE_RECORDS", "example_record_samples"]

SAMPLE_RECORDS = 4
_WORDS = (b"a", b"b", b"c", b"\xc3\xa9t\xc3\xa9")


def _values(dtype: str, count: int, rng: np.random.Generator):
    if dtype == "float32":
        return rng.standard_normal(count).astype(np.float32)
    if dtype == "int64":
        return rng.integers(0, 2, count).astype(np.int64)
    return [_WORDS[i] for i in rng.integers(0, len(_WORDS), count)]


def _record(node: ir.Node, graph: ir.Graph, index: int, rng: np.random.Generator) -> bytes:
    features = {}
    defaults = node.inputs[1:]
    for position, (key, dtype, shape, kind) in enumerate(zip(node.attrs["keys"], node.attrs["dtypes"],
                                                             json.loads(node.attrs["shapes"]), node.attrs["kinds"])):
        default = graph.values.get(defaults[position]) if position < len(defaults) else None
        has_default = default is not None and default.data is not None and default.data.size > 0
        if kind == FIXED and has_default and index % 2:
            continue
        count = math.prod(shape) if kind == FIXED else math.prod(shape) * int(rng.integers(0, 4))
        features[key] = (FEATURE_LISTS[dtype], _values(dtype, count, rng))
    return encode_example(features)


def example_record_samples(model: ir.Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Records for each public input that a ParseExample node parses, shaped as the input is declared
    (an unknown dimension: ``SAMPLE_RECORDS``)."""
    graph = model.graph
    rng = np.random.default_rng(seed)
    samples = {}
    for node in graph.nodes:
        if node.op_type != "ParseExample" or not node.inputs or node.inputs[0] not in graph.inputs:
            continue
        name = node.inputs[0]
        declared = graph.values[name].shape
        shape = () if declared is None else tuple(SAMPLE_RECORDS if d < 0 else d for d in declared)
        records = np.empty(math.prod(shape), dtype=object)
        records[:] = [_record(node, graph, i, rng) for i in range(records.size)]
        samples[name] = records.reshape(shape)
    return samples
