"""tf.as_string: numbers and bools formatted as TensorFlow 1.15's AsString (printf) does, fetched as bytes."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

CASES = [  # (value, dtype, keyword arguments, what TF 1.15 gives)
    ([3.5, -0.25], tf.float32, {}, [b"3.500000", b"-0.250000"]),
    ([3.14159, 2.0], tf.float64, {"precision": 2}, [b"3.14", b"2.00"]),
    ([1234.5678], tf.float64, {"scientific": True, "precision": 3}, [b"1.235e+03"]),
    ([0.1, 1e-7, 100.0], tf.float32, {"shortest": True}, [b"0.1", b"1e-07", b"100"]),
    ([1.5], tf.float32, {"precision": 1, "width": 6}, [b"   1.5"]),
    ([1.5], tf.float32, {"precision": 1, "width": 6, "fill": "-"}, [b"1.5   "]),
    ([1, 22, -3], tf.int32, {"width": 4, "fill": "0"}, [b"0001", b"0022", b"-003"]),
    ([7, -7], tf.int64, {"fill": "+"}, [b"+7", b"-7"]),
    ([12], tf.int8, {"width": 3}, [b" 12"]),
    ([True, False], tf.bool, {}, [b"true", b"false"]),
    ([float("inf"), float("nan")], tf.float32, {}, [b"inf", b"nan"]),
    ([1 + 2j], tf.complex64, {"precision": 1}, [b"(1.0,2.0)"]),
]


@pytest.mark.parametrize("value, dtype, kwargs, expected", CASES, ids=[str(c[2]) + c[1].name for c in CASES])
def test_formats_as_tf(value, dtype, kwargs, expected):
    s = tf.as_string(tf.constant(value, dtype), **kwargs)
    assert s.dtype == tf.string and s.shape == (len(value),)
    out = tf.Session().run(s)
    assert out.dtype == object and out.tolist() == expected


def test_keeps_the_shape_and_is_in_tf_strings():
    x = tf.placeholder(tf.int32, [None, 2])
    s = tf.strings.as_string(x)
    assert s.shape == (None, 2)
    out = tf.Session().run(s, {x: [[1, 2], [3, 4]]})
    assert out.tolist() == [[b"1", b"2"], [b"3", b"4"]]
    assert tf.Session().run(tf.as_string(5)) == b"5"


@pytest.mark.parametrize("dtype, kwargs, message", [
    (tf.int32, {"precision": 2}, "precision not supported for datatype int32"),
    (tf.int64, {"scientific": True}, "scientific not supported for datatype int64"),
    (tf.bool, {"shortest": True}, "shortest not supported for datatype bool"),
    (tf.float32, {"scientific": True, "shortest": True}, "Cannot select both scientific and shortest notation"),
    (tf.float32, {"fill": "x", "width": 3}, 'Fill argument not supported: "x"'),
    (tf.float32, {"fill": "00"}, "Fill string must be one or fewer characters"),
])
def test_refused_attribute_combinations_are_invalid_arguments(dtype, kwargs, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match="AsString: " + message):
        tf.as_string(tf.constant([1], dtype), **kwargs)


def test_dtypes_tf_has_no_kernel_for_are_type_errors():
    with pytest.raises(TypeError, match="as_string: input has dtype uint8"):
        tf.as_string(tf.constant(np.array([1], np.uint8)))
    with pytest.raises(TypeError, match="as_string: input has dtype object"):
        tf.as_string(tf.constant(["a"]))
