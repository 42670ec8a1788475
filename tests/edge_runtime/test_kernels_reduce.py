"""Reduction kernels and shape rules: dtypes, empty sets, axes forms, stability, TopK ties."""

from __future__ import annotations

import numpy as np
import pytest

from schemas import ShapeError, TensorType, get_schema, infer_types
from tests.edge_runtime.kernel_calls import run_kernel as run

F32 = np.dtype(np.float32)
REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


def infer(op: str, *types, values=(), **attrs):
    schema = get_schema(op)
    return infer_types(schema, list(types), schema.resolve_attrs(attrs), input_values=list(values),
                       num_outputs=len(schema.outputs))


def axes(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


@pytest.mark.parametrize("op, dtype", [(op, np.float32) for op in REDUCE_OPS] + [
    (op, np.int32) for op in REDUCE_OPS if op not in ("ReduceLogSum", "ReduceLogSumExp")
])
def test_reductions_keep_the_input_dtype(op: str, dtype) -> None:
    x = np.arange(1, 7, dtype=dtype).reshape(2, 3)
    y = run(op, x, axes(1))
    assert y.dtype == dtype and y.shape == (2, 1)
    assert infer(op, TensorType(np.dtype(dtype), (2, 3)), TensorType(np.dtype(np.int64), (1,)),
                 values=[None, axes(1)])[0] == TensorType(np.dtype(dtype), (2, 1))


def test_int32_sum_does_not_widen() -> None:
    y = run("ReduceSum", np.full((4,), 2**30, np.int32), None, keepdims=0)
    assert y.dtype == np.int32 and y.shape == ()


@pytest.mark.parametrize("op, expected", [
    ("ReduceSum", 0.0), ("ReduceProd", 1.0), ("ReduceMax", -np.inf), ("ReduceMin", np.inf),
    ("ReduceL1", 0.0), ("ReduceL2", 0.0), ("ReduceSumSquare", 0.0), ("ReduceLogSum", -np.inf),
    ("ReduceLogSumExp", -np.inf),
])
def test_empty_set_reductions_give_the_identity(op: str, expected: float) -> None:
    y = run(op, np.zeros((2, 0, 4), F32), axes(1))
    assert y.shape == (2, 1, 4) and y.dtype == F32
    np.testing.assert_array_equal(y, np.full((2, 1, 4), expected, F32))


def test_empty_set_max_of_integers_is_the_lowest_value() -> None:
    y = run("ReduceMax", np.zeros((0, 3), np.int8), axes(0), keepdims=0)
    np.testing.assert_array_equal(y, np.full((3,), -128, np.int8))


def test_axes_forms() -> None:
    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    np.testing.assert_array_equal(run("ReduceSum", x, axes(-1, 0), keepdims=0), x.sum(axis=(0, 2)))
    np.testing.assert_array_equal(run("ReduceSum", x, None), x.sum(keepdims=True))
    np.testing.assert_array_equal(run("ReduceSum", x, axes()), x.sum(keepdims=True))
    # noop_with_empty_axes: reducing over no axes leaves the tensor as it is.
    np.testing.assert_array_equal(run("ReduceMax", x, None, noop_with_empty_axes=1), x)
    np.testing.assert_array_equal(run("ReduceSumSquare", -x, axes(), noop_with_empty_axes=1), x * x)


def test_reduce_shape_rules() -> None:
    x = TensorType(F32, (2, 3, 4))
    ax = TensorType(np.dtype(np.int64), (2,))
    assert infer("ReduceMean", x, ax, values=[None, axes(0, -1)], keepdims=0)[0].shape == (3,)
    assert infer("ReduceMean", x)[0].shape == (1, 1, 1)
    assert infer("ReduceMean", x, noop_with_empty_axes=1)[0].shape == (2, 3, 4)
    # Axes known only at run time: the rank survives keepdims, nothing more.
    assert infer("ReduceMean", x, ax)[0].shape == (None, None, None)
    assert infer("ReduceMean", x, ax, keepdims=0)[0].shape is None
    with pytest.raises(ShapeError, match="axis 3"):
        infer("ReduceSum", x, ax, values=[None, axes(3)])


def test_log_sum_exp_is_stable() -> None:
    x = np.array([[1e4, 1e4], [-1e4, -1e4], [-np.inf, -np.inf]], F32)
    y = run("ReduceLogSumExp", x, axes(1), keepdims=0)
    np.testing.assert_allclose(y, [1e4 + np.log(2), -1e4 + np.log(2), -np.inf], rtol=1e-6)
    assert y.dtype == F32


def test_integer_mean_truncates_like_onnx() -> None:
    y = run("ReduceMean", np.array([[1, 2], [3, 5]], np.int64), axes(1), keepdims=0)
    np.testing.assert_array_equal(y, [1, 4])


@pytest.mark.parametrize("op, select_last, expected", [
    ("ArgMax", 0, [0, 1]), ("ArgMax", 1, [1, 2]), ("ArgMin", 0, [2, 0]), ("ArgMin", 1, [2, 0]),
])
def test_arg_reductions_on_ties(op: str, select_last: int, expected: list[int]) -> None:
    x = np.array([[5, 5, 1], [0, 7, 7]], np.int32)
    y = run(op, x, axis=1, keepdims=0, select_last_index=select_last)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, expected)
    assert run(op, x, axis=-1).shape == (2, 1)
    assert infer(op, TensorType(np.dtype(np.int32), (2, 3)), axis=-1)[0] == TensorType(np.dtype(np.int64), (2, 1))


def reference_top_k(x: np.ndarray, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise top k, ties broken by lower index first (a slow, obviously correct version)."""
    rows = x.reshape(-1, x.shape[-1])
    order = [sorted(range(len(r)), key=lambda i: ((-r[i].item() if largest else r[i].item()), i))[:k] for r in rows]
    idx = np.array(order, np.int64).reshape(x.shape[:-1] + (k,))
    return np.take_along_axis(x, idx, axis=-1), idx


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("n, k", [(6, 3), (200, 5), (200, 1), (64, 64), (64, 0)])
def test_top_k_orders_ties_by_lower_index(largest: int, n: int, k: int) -> None:
    # Few distinct values, so ties are everywhere; n >> k takes the partition path.
    x = np.random.default_rng(n + k).integers(0, 4, size=(3, n)).astype(F32)
    values, indices = run("TopK", x, np.array([k], np.int64), largest=largest)
    expected_values, expected_indices = reference_top_k(x, k, bool(largest))
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(values, expected_values)
    assert indices.dtype == np.int64 and values.dtype == F32


@pytest.mark.parametrize("dtype", [F32, np.int32])
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("k", [1, 5, 8])
def test_few_top_entries_by_arg_max_passes_order_ties_and_extremes_alike(dtype, largest: int, k: int) -> None:
    """The arg-max passes (k <= FEW_TOP) break ties and meet the dtype's extreme values (which they
    use as the taken entries' marker) as the slow reference does."""
    rng = np.random.default_rng(k + largest)
    x = rng.integers(-2, 3, size=(4, 50)).astype(dtype)
    extreme = np.iinfo(dtype) if dtype != F32 else None
    x[1, :12] = (extreme.min if largest else extreme.max) if extreme else (-np.inf if largest else np.inf)
    x[2] = x[1]  # a row whose top k reach into the extreme values
    x[2, 12:] = x[1, 0]
    values, indices = run("TopK", x, np.array([k], np.int64), largest=largest)
    expected_values, expected_indices = reference_top_k(x, k, bool(largest))
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(values, expected_values)


def test_top_k_along_a_middle_axis_and_with_nans() -> None:
    x = np.random.default_rng(1).standard_normal((2, 40, 3)).astype(F32)
    values, indices = run("TopK", x, np.array([3], np.int64), axis=1)
    assert values.shape == indices.shape == (2, 3, 3)
    np.testing.assert_array_equal(values, -np.sort(-x, axis=1)[:, :3])
    x[0, 5, 0] = np.nan
    values, _ = run("TopK", x, np.array([2], np.int64), axis=1, largest=0)
    assert np.isfinite(values).all()


def test_top_k_shape_rule() -> None:
    x = TensorType(F32, (2, 10))
    k = TensorType(np.dtype(np.int64), (1,))
    values, indices = infer("TopK", x, k, values=[None, np.array([4])])
    assert values == TensorType(F32, (2, 4)) and indices == TensorType(np.dtype(np.int64), (2, 4))
    assert infer("TopK", x, k)[0].shape == (2, None)
    with pytest.raises(ShapeError, match=r"K=11.*\(2, 10\)"):
        infer("TopK", x, k, values=[None, np.array([11])])
