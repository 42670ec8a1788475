"""GatherElements through one flat ``np.take`` (the NumPy path): the same values as
``take_along_axis`` on every axis, with negative indices, int32 indices, non-contiguous data and
indices shorter than the data; out-of-range indices refused, never read from a neighbouring row."""

from __future__ import annotations

import numpy as np
import pytest

from tests.edge_runtime.kernel_calls import run_kernel as run

RNG = np.random.default_rng(20)


def reference(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    head = tuple(slice(None) if a == axis else slice(0, n) for a, n in enumerate(indices.shape))
    size = data.shape[axis]
    return np.take_along_axis(data[head], np.where(indices < 0, indices + size, indices), axis=axis)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_every_axis_matches_take_along_axis(axis: int, dtype) -> None:
    data = RNG.standard_normal((3, 5, 7)).astype(np.float32)
    size = data.shape[axis]
    shape = list(data.shape)
    shape[axis] = 4
    indices = RNG.integers(-size, size, shape).astype(dtype)
    got = run("GatherElements", data, indices, axis=axis)
    np.testing.assert_array_equal(got, reference(data, indices, axis % 3))


def test_deberta_relative_position_gather() -> None:
    """(heads, queries, 2 * span) gathered to (heads, queries, keys), the same indices per head."""
    data = RNG.standard_normal((12, 16, 64)).astype(np.float32)
    positions = np.clip(np.arange(16)[:, None] - np.arange(16)[None, :] + 32, 0, 63)
    indices = np.broadcast_to(positions, (12, 16, 16)).copy()
    np.testing.assert_array_equal(run("GatherElements", data, indices, axis=2), reference(data, indices, 2))


def test_non_contiguous_data_and_shorter_indices() -> None:
    data = RNG.standard_normal((6, 4)).astype(np.float32).T  # (4, 6), a transposed view
    indices = RNG.integers(0, 6, (3, 2))  # shorter on axis 0, gathering along axis 1
    np.testing.assert_array_equal(run("GatherElements", data, indices, axis=1), reference(data, indices, 1))


@pytest.mark.parametrize("bad", [5, -6])
def test_out_of_range_index_is_refused(bad: int) -> None:
    """Index 5 of a row of 5 would be the next row's first element in the flat data: refused."""
    data = np.arange(10, dtype=np.float32).reshape(2, 5)
    indices = np.array([[0, bad], [1, 2]], np.int64)
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds for axis 1 with size 5"):
        run("GatherElements", data, indices, axis=1)


def test_empty_indices_give_an_empty_result() -> None:
    data = RNG.standard_normal((2, 3)).astype(np.float32)
    got = run("GatherElements", data, np.zeros((2, 0), np.int64), axis=1)
    assert got.shape == (2, 0) and got.dtype == np.float32
