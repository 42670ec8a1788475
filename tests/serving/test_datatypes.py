"""Tensor decoding and encoding: every KServe datatype, raw and JSON, and the size checks."""

from __future__ import annotations

import numpy as np
import pytest

from serving import datatypes
from serving.errors import ECHO_LIMIT, InvalidRequest, shown

NUMERIC = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64"]


@pytest.mark.parametrize("datatype", NUMERIC)
def test_raw_and_json_round_trip(datatype):
    dtype = datatypes.to_numpy(datatype)
    array = (np.arange(6) % 2 == 0) if datatype == "BOOL" else np.arange(6).astype(dtype)
    array = array.reshape(2, 3)
    assert datatypes.from_numpy(array.dtype) == datatype
    np.testing.assert_array_equal(datatypes.from_raw("t", datatype, (2, 3), datatypes.to_raw(array)), array)
    np.testing.assert_array_equal(datatypes.from_json("t", datatype, (2, 3), datatypes.to_json(array)), array)


def test_bytes_tensors():
    array = np.array([b"a", b"", "h\u00e9llo".encode()], dtype=object)
    raw = datatypes.to_raw(array)
    assert raw[:5] == b"\x01\x00\x00\x00a"
    assert list(datatypes.from_raw("s", "BYTES", (3,), raw)) == list(array)
    assert list(datatypes.from_json("s", "BYTES", (3,), ["a", "", "h\u00e9llo"])) == list(array)
    assert datatypes.to_json(array) == ["a", "", "h\u00e9llo"]
    with pytest.raises(InvalidRequest, match="truncated BYTES element length"):
        datatypes.from_raw("s", "BYTES", (3,), raw[:-9] + b"\x01")
    with pytest.raises(InvalidRequest, match="runs past the end"):
        datatypes.from_raw("s", "BYTES", (1,), b"\x09\x00\x00\x00abc")
    with pytest.raises(InvalidRequest, match="needs 2 BYTES elements, got 3"):
        datatypes.from_raw("s", "BYTES", (2,), raw)
    with pytest.raises(InvalidRequest, match="BYTES data must be strings"):
        datatypes.from_json("s", "BYTES", (2,), ["a", 3])


@pytest.mark.parametrize(
    "datatype, data, message",
    [
        ("INT32", [1.5, 2.0], "must be integers, got floats"),
        ("INT8", [1, 300], "out of range for INT8"),
        ("BOOL", [1, 0], "must be true/false"),
        ("FP32", [[1.0], [2.0, 3.0]], "not a regular array"),
        ("FP32", None, "no 'data'"),
    ],
)
def test_json_data_is_checked(datatype, data, message):
    with pytest.raises(InvalidRequest, match=message):
        datatypes.from_json("t", datatype, (2,), data)


def test_declared_shapes_are_checked_before_allocating():
    with pytest.raises(InvalidRequest, match="more than the limit of 1000"):
        datatypes.check_shape("t", [1 << 30, 1 << 30], max_elements=1000)
    with pytest.raises(InvalidRequest, match="needs 8 bytes, got 4"):
        datatypes.from_raw("t", "FP32", (2,), b"\x00" * 4)
    with pytest.raises(InvalidRequest, match="unknown datatype 'FP8'"):
        datatypes.to_numpy("FP8", "t")
    assert datatypes.check_shape("t", [0, 1 << 40], max_elements=10) == (0, 1 << 40)


@pytest.mark.parametrize("data", [[["a", "b"], []], [["a"], "b"], ["a", ["b"]], [[], ["a", "b"]], [[["a"]], [["b"]], "c"]])
def test_ragged_bytes_data_is_refused(data):
    count = 3 if data[-1] == "c" else 2
    with pytest.raises(InvalidRequest, match="input 's': data is not a regular array"):
        datatypes.from_json("s", "BYTES", (count,), data)


def test_binary_values_only_where_asked():
    assert list(datatypes.bytes_from_json("s", [{"b64": "/wA="}, "\u00e9"], b64=True)) == [b"\xff\x00", "\u00e9".encode()]
    assert datatypes.bytes_from_json("s", [[{"b64": ""}], [{"b64": "YQ"}]], b64=True).tolist() == [[b""], [b"a"]]
    with pytest.raises(InvalidRequest, match="BYTES data must be strings, got dict"):
        datatypes.from_json("s", "BYTES", (1,), [{"b64": "YQ=="}])
    with pytest.raises(InvalidRequest, match="'b64' value 'Y' is not valid base64"):
        datatypes.bytes_from_json("s", [{"b64": "Y"}], b64=True)


def test_echoed_values_are_clipped():
    assert shown("x") == "'x'" and shown([1, 2]) == "[1, 2]"
    for value in ("x" * 10_000, [1] * 10_000, {str(i): i for i in range(10_000)}, [["y" * 10_000]], 10**1000):
        text = shown(value)
        assert len(text) == ECHO_LIMIT and text.endswith("..."), text
    for shape in (["s"] * 10_000, [1] * 10_000, [1 << 62] * 32, [-1] * 10):
        with pytest.raises(InvalidRequest) as info:
            datatypes.check_shape("n" * 10_000, shape, 10)
        assert len(str(info.value)) < 4 * ECHO_LIMIT  # each echoed value clipped
