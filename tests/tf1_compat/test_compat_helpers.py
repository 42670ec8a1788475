"""tf.compat's helpers for writing version-independent code: type tuples, string and dimension
helpers, and the forward-compatibility window."""

from __future__ import annotations

import numbers

import numpy as np
import pytest

import trainer as tf


def test_type_tuples_classify_python_and_numpy_scalars():
    c = tf.compat
    assert isinstance(b"x", c.bytes_or_text_types) and isinstance("x", c.bytes_or_text_types)
    assert not isinstance(bytearray(b"x"), c.bytes_or_text_types)
    assert all(isinstance(v, c.integral_types) for v in (3, np.int8(1), np.uint64(2), True))
    assert not isinstance(2.0, c.integral_types)
    assert all(isinstance(v, c.real_types) for v in (3, 2.5, np.float16(1), np.int32(4)))
    assert not isinstance(1j, c.real_types)
    assert all(isinstance(v, c.complex_types) for v in (1j, np.complex64(1), 2.0, np.int8(1)))
    assert numbers.Integral in c.integral_types


def test_string_and_dimension_helpers():
    c = tf.compat
    assert c.as_str_any(b"caf\xc3\xa9") == "café" and c.as_str_any(12) == "12" and c.as_str_any("s") == "s"
    assert c.dimension_value(tf.Dimension(7)) == 7 and c.dimension_value(None) is None and c.dimension_value(5) == 5
    x = tf.placeholder(tf.float32, [None, 3])
    assert c.dimension_value(c.dimension_at_index(x.shape, 1)) == 3
    assert c.dimension_value(c.dimension_at_index(x.shape, 0)) is None
    assert c.dimension_value(c.dimension_at_index(tf.TensorShape(None), 4)) is None
    with pytest.raises(IndexError):
        c.dimension_at_index(tf.TensorShape([1, 2]), 2)


def test_forward_compatibility_window_and_its_context_manager():
    c = tf.compat
    assert c.forward_compatible(2019, 1, 1) and not c.forward_compatible(2030, 1, 1)
    with c.forward_compatibility_horizon(2031, 1, 1):
        assert c.forward_compatible(2030, 1, 1)
        with c.forward_compatibility_horizon(2018, 1, 1):
            assert not c.forward_compatible(2019, 1, 1)
        assert c.forward_compatible(2030, 1, 1)
    assert not c.forward_compatible(2030, 1, 1)
    with pytest.raises(ValueError):
        c.forward_compatible(2019, 13, 1)
