"""JSON bodies: float tensor data read straight into arrays, everything else as the general reader reads it."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest

from serving.errors import InvalidRequest
from serving.json_body import load_infer_body, load_json_object


def body(data, datatype: str = "FP32", **extra) -> bytes:
    doc = {"id": "r1", "inputs": [{"name": "x", "datatype": datatype, "shape": [len(data)], "data": data}], **extra}
    return json.dumps(doc).encode()


def test_flat_float_data_comes_as_a_float64_array_and_the_rest_as_python() -> None:
    raw = body([0.5, -1.25, 3, 1e-7], outputs=[{"name": "y", "parameters": {"binary_data": True}}],
               parameters={"timeout": 5})
    doc = load_infer_body(raw)
    data = doc["inputs"][0]["data"]
    assert isinstance(data, np.ndarray) and data.dtype == np.float64
    np.testing.assert_array_equal(data, [0.5, -1.25, 3.0, 1e-7])
    plain = orjson.loads(raw)
    del plain["inputs"][0]["data"], doc["inputs"][0]["data"]
    assert doc == plain


@pytest.mark.parametrize("data", [
    [[1.0, 2.0], [3.0, 4.0]],  # nested: the general decoding checks it is regular
    [[1.0, 2.0], [3.0]],  # ragged
    [1.0, []],
    [True, 2.0],
    ["1.5", 2.0],
    [None, 1.0],
])
def test_anything_but_a_flat_list_of_numbers_stays_python(data) -> None:
    doc = load_infer_body(body(data))
    assert doc["inputs"][0]["data"] == data


def test_single_element_arrays_among_numbers_read_flattened() -> None:
    # The flatness check compares element counts, so [2.0] passes for a number: the values still
    # come in row-major order, as the protocol's flattened data is.
    np.testing.assert_array_equal(load_infer_body(body([1.0, [2.0]]))["inputs"][0]["data"], [1.0, 2.0])
    assert load_infer_body(body([]))["inputs"][0]["data"].shape == (0,)


def test_integer_datatypes_keep_their_exact_values() -> None:
    big = 2**62 + 1  # not representable in float64
    doc = load_infer_body(body([big, -3], datatype="INT64"))
    assert doc["inputs"][0]["data"] == [big, -3]


@pytest.mark.parametrize("raw", [
    b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": [NaN, Infinity]}]}',
    b'{"id": 123456789012345678901234567890, "inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}]}',
    b'{"inputs": 5}',
    b'{"inputs": [1, "two", [3]]}',
    b'{"a": 1, "a": 2}',
    b'{"inputs": [{"name": "x", "name": "y", "datatype": "FP32", "shape": [1], "data": [1]}]}',
    b'{"inputs": [{"name": "x", "datatype": {"t": 1}, "shape": [1], "data": [1]}]}',
])
def test_what_simdjson_does_not_read_the_general_reader_does(raw: bytes) -> None:
    assert repr(load_infer_body(raw)) == repr(load_json_object(raw))


@pytest.mark.parametrize("raw, message", [
    (b"[1, 2]", "must be a JSON object, got list"),
    (b'"text"', "must be a JSON object, got str"),
    (b'{"inputs": [', "not valid JSON"),
    (b"\xff\xfe{", "not valid JSON"),
    (b'{"x": 1} trailing', "not valid JSON"),
])
def test_bad_bodies_get_the_general_readers_errors(raw: bytes, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        load_infer_body(raw)
    with pytest.raises(InvalidRequest, match=message):
        load_json_object(raw)


def test_a_body_is_read_while_an_earlier_ones_values_are_still_held() -> None:
    first = load_infer_body(body([1.0, 2.0]))
    second = load_infer_body(body([3.0, 4.0]))
    np.testing.assert_array_equal(first["inputs"][0]["data"], [1.0, 2.0])
    np.testing.assert_array_equal(second["inputs"][0]["data"], [3.0, 4.0])


def test_memoryview_bodies_are_read() -> None:
    raw = b"xx" + body([1.5])
    doc = load_infer_body(memoryview(raw)[2:])
    np.testing.assert_array_equal(doc["inputs"][0]["data"], [1.5])
