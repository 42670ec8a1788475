"""TensorFlow Serving's example-based calls, Classify and Regress, over REST and gRPC: the inputs
as serialized tf.train.Example records for a model whose one input is those records (an Estimator
exported with ``build_parsing_serving_input_receiver_fn``: its .flow lists that input as
ParseExample's), and the model's one output as per-example scores or values.

JSON examples (REST):
Each example is an object of feature name -> a value or a list of values, typed as TF Serving
types them: a JSON integer (or true / false, as 1 / 0) goes to the feature's int64 list, a number
with a fraction or exponent to its float list, a string (UTF-8) or ``{"b64": "<base64>"}`` to its
bytes list; one feature's values must all go to one list. ``context`` features are added to every
example, which wins where both name a feature (TF Serving's ExampleListWithContext).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edge_runtime.example_records import encode_example, example_inputs
from serving import datatypes
from serving.core import InferInput, InferRequest
from serving.errors import InvalidRequest, shown

__all__ = ["class_labels", "example_records", "examples_request", "is_example_records_input", "records_request",
           "results_per_example"]

_INT64_RANGE = (-(1 << 63), (1 << 63) - 1)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def is_example_records_input(specs, metadata: dict) -> bool:
    """Whether a model's inputs are one string vector of records (its export lists it as read by
    ParseExample: edge_runtime.example_records.example_inputs)."""
    return (len(specs) == 1 and specs[0].name in example_inputs(metadata)
            and datatypes.from_numpy(specs[0].dtype) == "BYTES" and len(specs[0].shape) == 1)


def _typed(value: Any, feature: str, where: str) -> tuple[str, Any]:
    """(list kind, value) of one JSON value of ``feature``."""
    if isinstance(value, bool):
        return "int64_list", int(value)
    if isinstance(value, int):
        if not _INT64_RANGE[0] <= value <= _INT64_RANGE[1]:
            raise InvalidRequest(f"{where}: feature {shown(feature)} has {value}, outside int64")
        return "int64_list", value
    if isinstance(value, float):
        if abs(value) > _FLOAT32_MAX:
            raise InvalidRequest(f"{where}: feature {shown(feature)} has {value}, which does not fit a float32")
        return "float_list", value
    if isinstance(value, (str, dict)):
        return "bytes_list", datatypes.bytes_from_json(f"{where}: feature {feature}", value, b64=True)[()]
    raise InvalidRequest(f"{where}: feature {shown(feature)} has an element of unexpected JSON type "
                         f"{type(value).__name__} (expected numbers, strings or {{\"b64\": ...}} objects)")


def _example(example: Any, where: str) -> bytes:
    if not isinstance(example, dict):
        raise InvalidRequest(f"{where} must be an object of feature -> value(s), got {type(example).__name__}")
    features = {}
    for feature, content in example.items():
        kind, values = None, []
        for value in content if isinstance(content, list) else [content]:
            value_kind, typed = _typed(value, feature, where)
            if kind is not None and value_kind != kind:
                raise InvalidRequest(f"{where}: feature {shown(feature)} mixes {kind[:-5]} and {value_kind[:-5]} "
                                     "values; a feature's values must share one type")
            kind = value_kind
            values.append(typed)
        features[feature] = (kind, values)
    return encode_example(features)


def example_records(examples: list, context: dict) -> np.ndarray:
    """Each example, merged over ``context``, as a serialized tf.train.Example (an object array)."""
    records = np.empty(len(examples), dtype=object)
    for i, example in enumerate(examples):
        records[i] = _example({**context, **example}, f"examples[{i}]")
    return records


def examples_request(examples: list, context: dict, spec, name: str, version: str,
                     max_elements: int) -> InferRequest:
    """The infer request feeding JSON examples' records to the model's one records input ``spec``."""
    if not isinstance(context, dict):
        raise InvalidRequest("'context' must be an object of feature -> value(s)")
    _example(context, "context")  # its errors named as the context's, not the first example's
    return records_request(example_records(examples, context), spec, name, version, max_elements)


def records_request(records: np.ndarray, spec, name: str, version: str, max_elements: int) -> InferRequest:
    """The infer request feeding ``records`` (serialized Examples) to the model's records input ``spec``."""
    shape = datatypes.check_shape(spec.name, [len(records)], max_elements)
    return InferRequest(name, [InferInput(spec.name, "BYTES", tuple(shape), records)], version, protocol="tfserving")


def results_per_example(output, rows: int, method: str, call: str) -> np.ndarray:
    """The model's one output as float64 rows, one per example: the class scores (``classify``) or
    the one value (``regress``) of each; ``call`` names the call in errors (``:regress``, ``Regress``)."""
    values = np.asarray(output.data)
    if values.dtype.kind not in "biuf" or not values.ndim or values.shape[0] != rows:
        raise InvalidRequest(f"output {output.name!r} (shape {list(values.shape)}) does not give one "
                             f"{'set of scores' if method == 'classify' else 'value'} per example")
    flat = values.reshape(rows, -1).astype(np.float64)
    if method == "regress" and flat.shape[1] != 1:
        raise InvalidRequest(f"{call} needs one value per example; output {output.name!r} gives {flat.shape[1]} "
                             "(use classify or predict)")
    return flat


def class_labels(metadata: dict, count: int) -> list[str]:
    """The classes' names: the model's ``labels`` metadata, else the class indices."""
    labels = metadata.get("labels", "").splitlines()
    return labels if len(labels) == count else [str(i) for i in range(count)]
