"""Separable window reductions without a padded copy (``nn.reduce_windows``) against the plain
reduction of a padded input's window view, on every pooling path that uses them."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import sliding_windows
from edge_runtime.kernels.nn import padded_for_max, pool_window, reduce_windows
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run

# (x shape, attrs): overlapping and non-overlapping windows, pads reaching one or more taps into
# the padding, ceil_mode windows that end in the extra padding, dilation, 1-D to 3-D, odd sizes
CASES = [
    ((1, 64, 112, 112), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # ResNet's stem pool
    ((2, 5, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 10, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # even/odd mix
    ((1, 3, 9, 7), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1}),
    ((1, 2, 7, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),  # last window half out
    ((1, 2, 8, 8), {"kernel_shape": [3, 3], "strides": [3, 3], "ceil_mode": 1}),
    ((2, 4, 10, 10), {"kernel_shape": [3, 3], "dilations": [2, 1], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 9, 11), {"kernel_shape": [3, 2], "dilations": [2, 3], "pads": [2, 1, 2, 3], "strides": [1, 2]}),
    ((1, 2, 6, 6), {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 5, 5), {"kernel_shape": [5, 5], "pads": [4, 4, 4, 4], "strides": [3, 3]}),  # windows mostly pad
    ((1, 2, 5, 5), {"kernel_shape": [1, 1]}),  # reduces nothing: still a fresh array
    ((1, 2, 5, 5), {"kernel_shape": [1, 1], "strides": [2, 2]}),
    ((1, 2, 5, 5), {"kernel_shape": [1, 3], "pads": [1, 1, 1, 1]}),  # a 1-tap axis fully padded at its ends
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2]}),
    ((2, 3, 12), {"kernel_shape": [4], "strides": [1], "pads": [2, 1], "dilations": [2]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [3, 2, 2], "strides": [2, 2, 2], "ceil_mode": 1}),
    # axes reduced as shifts of the flattened array (``window_shifts``): outputs as long as the
    # input at stride 1, half as long at stride 2 (even lengths), edge rows recomputed; stride 1
    # over a padded copy where windows span a tenth of an axis or more
    ((1, 3, 8, 8), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 2, 24, 22), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 2, 44, 48), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
    ((1, 2, 44, 48), {"kernel_shape": [5, 5], "pads": [4, 0, 0, 4]}),  # pads on one side only
    ((1, 2, 50, 50), {"kernel_shape": [3, 3], "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 2, 10, 10), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),  # YOLO's SPPF pool
    ((1, 2, 3, 3), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),  # planes shorter than the window
    ((2, 3, 6, 7), {"kernel_shape": [5, 3], "pads": [4, 0, 0, 2]}),  # pads on one side only
    ((1, 2, 7, 6), {"kernel_shape": [3, 3], "dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    ((1, 2, 12, 12), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 0, 1, 1]}),
    ((1, 2, 12, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ((1, 2, 12, 12), {"kernel_shape": [4, 4], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((3, 2, 12, 12), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 2, 12, 12), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),  # last window half out
    ((1, 2, 6, 8, 8), {"kernel_shape": [3, 3, 3], "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 2, 4, 8, 8), {"kernel_shape": [1, 3, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 0, 1, 1]}),
    ((2, 3, 16), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
]
DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int16, np.int8, np.uint8]


def sample(shape, dtype) -> np.ndarray:
    rng = np.random.default_rng(sum(shape))
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


def padded_view_max(x: np.ndarray, attrs: dict) -> np.ndarray:
    win = pool_window(x, attrs["kernel_shape"], attrs.get("strides"), attrs.get("dilations"), attrs.get("pads"),
                      attrs.get("auto_pad", "NOTSET"), attrs.get("ceil_mode", 0))
    view = sliding_windows.windows(padded_for_max(x, np, win), np, win)
    return view.max(axis=tuple(range(x.ndim, view.ndim)))


def channels_last(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, 1, -1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape, attrs", CASES)
def test_max_pool_matches_the_padded_window_view(x_shape, attrs, dtype) -> None:
    x = sample(x_shape, dtype)
    want = padded_view_max(x, attrs)
    got = run("MaxPool", x, n_outputs=1, **attrs)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)
    got_last = run("ChannelsLastMaxPool", channels_last(x), domain=DOMAIN, **attrs)
    np.testing.assert_array_equal(got_last, channels_last(want))


def test_max_pool_of_a_window_that_is_all_padding_is_the_lowest_value() -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    win = pool_window(x, [1, 1], [3, 3], None, [2, 2, 0, 0], "NOTSET", 0)
    got = reduce_windows(x, np, np.maximum, win, -np.inf)
    np.testing.assert_array_equal(got, padded_view_max(x, {"kernel_shape": [1, 1], "strides": [3, 3],
                                                           "pads": [2, 2, 0, 0]}))
    assert np.isneginf(got[0, 0, 0, 0])


def test_results_never_alias_the_input() -> None:
    x = sample((1, 2, 5, 5), np.float32)
    for attrs in ({"kernel_shape": [1, 1]}, {"kernel_shape": [1, 1], "strides": [2, 2]}):
        y = run("MaxPool", x, n_outputs=1, **attrs)
        assert not np.shares_memory(x, y)
        y = run("ChannelsLastMaxPool", channels_last(x), domain=DOMAIN, **attrs)
        assert y.flags.writeable and y.base is None


@pytest.mark.parametrize("x_shape, attrs", CASES[1:])  # not the stem pool: its view's float64 sum is slow
def test_window_sums_match_the_zero_padded_window_view(x_shape, attrs) -> None:
    x = sample(x_shape, np.float64)
    win = pool_window(x, attrs["kernel_shape"], attrs.get("strides"), attrs.get("dilations"), attrs.get("pads"),
                      attrs.get("auto_pad", "NOTSET"), attrs.get("ceil_mode", 0))
    view = sliding_windows.windows(sliding_windows.pad_spatial(x, np, win.pad_begin, win.padded_end), np, win)
    want = view.sum(axis=tuple(range(x.ndim, view.ndim)))
    np.testing.assert_allclose(reduce_windows(x, np, np.add, win, 0), want, rtol=1e-12, atol=1e-12)


def test_max_pool_indices_still_come_from_the_padded_input() -> None:
    x = sample((1, 2, 7, 7), np.float32)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    y, idx = run("MaxPool", x, **attrs)
    np.testing.assert_array_equal(y, padded_view_max(x, attrs))
    np.testing.assert_array_equal(x.reshape(-1)[idx], y)
