"""Math kernels and shape rules: the edge cases the ONNX node suite leaves out.

Broadcasting, dtype preservation (float32 stays float32), numerical stability, integer
division semantics, string casts, refused element types, and shape errors that name the shapes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edge_runtime.kernels import get_kernel
from schemas import ShapeError, TensorType, UnsupportedOpError, get_schema, infer_types
from tests.edge_runtime.kernel_calls import run_kernel as run

F32 = np.dtype(np.float32)


def infer(op: str, *types, values=(), **attrs):
    schema = get_schema(op)
    return infer_types(schema, list(types), schema.resolve_attrs(attrs), input_values=list(values),
                       num_outputs=len(schema.outputs))


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only array, like a weight mapped from a .flow file: kernels must not write into it."""
    array = np.array(array)
    array.setflags(write=False)
    return array


# --- dtypes ----------------------------------------------------------------------------------

FLOAT_ACTIVATIONS = [
    ("LeakyRelu", {"alpha": 0.3}), ("Elu", {"alpha": 0.7}), ("Selu", {}), ("Celu", {"alpha": 2.0}),
    ("HardSigmoid", {}), ("HardSwish", {}), ("Gelu", {}), ("Gelu", {"approximate": "tanh"}),
    ("Sigmoid", {}), ("Softplus", {}), ("Softsign", {}), ("Mish", {}), ("Swish", {"alpha": 1.5}),
    ("Shrink", {"bias": 0.25, "lambd": 0.5}), ("ThresholdedRelu", {"alpha": 0.1}), ("Erf", {}),
    ("Softmax", {}), ("LogSoftmax", {"axis": 0}), ("Hardmax", {}), ("Tanh", {}), ("Round", {}),
]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("op, attrs", FLOAT_ACTIVATIONS, ids=lambda v: v if isinstance(v, str) else "")
def test_activations_keep_the_input_dtype(op: str, attrs: dict, dtype) -> None:
    x = np.linspace(-3, 3, 12, dtype=dtype).reshape(3, 4)
    y = run(op, frozen(x), **attrs)
    assert y.dtype == dtype and y.shape == x.shape


def test_mean_and_gemm_keep_float32() -> None:
    a = np.ones((2, 3), F32)
    assert run("Mean", a, a, a * 2).dtype == F32
    y = run("Gemm", a, a.T.copy(), np.ones(2, F32), alpha=0.5, beta=0.25)
    assert y.dtype == F32
    np.testing.assert_allclose(y, np.full((2, 2), 1.75, F32))


def test_pow_output_has_the_base_dtype() -> None:
    assert run("Pow", np.array([2, 3], np.int32), np.array([2.0, 0.5], F32)).dtype == np.int32
    y = run("Pow", np.array([2.0, 4.0], F32), np.array([3, -1], np.int64))
    assert y.dtype == F32
    np.testing.assert_allclose(y, [8.0, 0.25])
    infer_dtype = infer("Pow", TensorType(F32, (2,)), TensorType(np.dtype(np.int64), (2,)))[0].dtype
    assert infer_dtype == F32


@pytest.mark.parametrize("op", ["Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Equal"])
def test_comparisons_give_bool(op: str) -> None:
    y = run(op, np.arange(6, dtype=F32).reshape(2, 3), np.array([1.0, 2.0, 3.0], F32))
    assert y.dtype == bool and y.shape == (2, 3)
    assert infer(op, TensorType(F32, (2, 3)), TensorType(F32, (3,)))[0] == TensorType(np.dtype(bool), (2, 3))


# --- broadcasting ----------------------------------------------------------------------------


def test_variadic_ops_broadcast_every_input() -> None:
    a, b, c = np.ones((2, 1, 3), F32), np.arange(4, dtype=F32).reshape(4, 1), np.full((3,), 5.0, F32)
    np.testing.assert_array_equal(run("Sum", a, b, c), a + b + c)
    np.testing.assert_array_equal(run("Max", a, b, c), np.maximum(np.maximum(a, b), c))
    np.testing.assert_array_equal(run("Min", a, b, c), np.minimum(np.minimum(a, b), c))
    np.testing.assert_allclose(run("Mean", a, b, c), (a + b + c) / 3)
    assert infer("Sum", TensorType(F32, (2, 1, 3)), TensorType(F32, (4, 1)), TensorType(F32, (3,)))[0].shape == (2, 4, 3)


def test_single_input_variadic_returns_a_new_array() -> None:
    x = frozen(np.ones(3, F32))
    y = run("Sum", x)
    assert y is not x and y.flags.writeable


def test_where_and_prelu_broadcast() -> None:
    cond = np.array([[True], [False]])
    np.testing.assert_array_equal(run("Where", cond, np.float32(1), np.zeros(3, F32)), [[1, 1, 1], [0, 0, 0]])
    x = np.array([[-2.0, 2.0], [-4.0, 4.0]], F32)
    y = run("PRelu", x, np.array([0.5, 0.25], F32))
    np.testing.assert_array_equal(y, [[-1.0, 2.0], [-2.0, 4.0]])
    assert y.dtype == F32


def test_clip_with_optional_bounds() -> None:
    x = np.array([-5, 0, 5], np.int32)
    np.testing.assert_array_equal(run("Clip", x, np.array(-1, np.int32), None), [-1, 0, 5])
    np.testing.assert_array_equal(run("Clip", x, None, np.array(1, np.int32)), [-5, 0, 1])
    assert run("Clip", x, None, None) is not x
    # min > max: every element becomes max, as ONNX specifies.
    np.testing.assert_array_equal(run("Clip", x, np.array(3, np.int32), np.array(1, np.int32)), [1, 1, 1])


# --- numerical stability ---------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_is_stable_for_large_values(op: str) -> None:
    x = np.array([[1e4, 1e4 - 1, 1e4 - 2], [-1e4, -1e4 - 1, -1e4 - 2]], F32)
    small = np.array([0.0, -1.0, -2.0])
    expected = np.exp(small) / np.exp(small).sum()
    expected = expected if op == "Softmax" else np.log(expected)
    y = run(op, x)
    assert y.dtype == F32 and np.isfinite(y).all()
    np.testing.assert_allclose(y, np.stack([expected, expected]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("offset", [0.0, -5.0, -9.0, -30.0, -80.0, -1e4])
def test_softmax_rows_far_below_the_maximum_keep_their_precision(offset: float) -> None:
    # Rows are shifted by the whole tensor's maximum where every row's sum stays above 2^-12, by
    # their own maximum otherwise: either way within a few float32 ulps of the exact softmax.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 50)).astype(F32) * 4
    x[1] += np.float32(offset)
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=-1, keepdims=True))
    want = e / e.sum(axis=-1, keepdims=True)
    for axis in (-1, 1):
        got = run("Softmax", x, axis=axis)
        e = np.exp(wide - wide.max(axis=axis, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(axis=axis, keepdims=True), rtol=3e-6, atol=1e-30)
    np.testing.assert_allclose(run("Softmax", x), want, rtol=3e-6, atol=1e-30)


@pytest.mark.parametrize("low_rows", [1, 3, 30])
def test_softmax_rows_far_below_their_heads_maximum_are_redone_alone(low_rows: int) -> None:
    """Each head (trailing 2-D slab) shifted by its own maximum; the few rows still too far below it
    are redone by their own maximum (a quarter or more of the rows: every row is), a row of -inf
    and a strided input included, all within float32's ulps of the exact softmax."""
    rng = np.random.default_rng(low_rows)
    x = rng.standard_normal((2, 3, 16, 40)).astype(F32) * 4
    x[1, 2] += np.float32(25)  # one hot head
    flat = x.reshape(-1, 40)
    flat[rng.choice(flat.shape[0], low_rows, replace=False)] -= np.float32(40)
    flat[5] = -np.inf
    for arg in (x, np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)):
        wide = arg.astype(np.float64)
        top = wide.max(axis=-1, keepdims=True)
        e = np.exp(wide - np.where(np.isfinite(top), top, 0))
        with np.errstate(invalid="ignore"):
            want = e / e.sum(axis=-1, keepdims=True)
            got = run("Softmax", arg, axis=-1)
        np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-30)
        assert np.isnan(got.reshape(-1, 40)[5]).all()  # 0 / 0, as the per-row path gives


def test_softmax_nan_in_one_row_leaves_the_others() -> None:
    x = np.array([[1.0, 2.0, 3.0], [1.0, np.nan, 0.0]], F32)
    y = run("Softmax", x)
    assert np.isnan(y[1]).all()
    np.testing.assert_allclose(y[0], np.exp([-2.0, -1.0, 0.0]) / np.exp([-2.0, -1.0, 0.0]).sum(), rtol=1e-6)


def test_softmax_of_a_row_with_minus_infinity() -> None:
    y = run("Softmax", np.array([[0.0, -np.inf, 0.0]], F32))
    np.testing.assert_array_equal(y, [[0.5, 0.0, 0.5]])


def test_sigmoid_softplus_and_swish_saturate_without_overflow() -> None:
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], F32)
    np.testing.assert_allclose(run("Sigmoid", x), [0.0, 0.0, 0.5, 1.0, 1.0], atol=1e-20)
    np.testing.assert_allclose(run("Softplus", x), [0.0, 0.0, math.log(2), 50.0, 1000.0], rtol=1e-6, atol=1e-20)
    np.testing.assert_allclose(run("Swish", x), [0.0, 0.0, 0.0, 50.0, 1000.0], atol=1e-18)
    np.testing.assert_allclose(run("Mish", x), [0.0, 0.0, 0.0, 50.0, 1000.0], atol=1e-18)


@pytest.mark.parametrize("dtype, low", [(np.float16, -9), (np.float32, -87), (np.float64, -700)])
def test_sigmoid_keeps_relative_precision_for_either_sign_without_overflow(dtype, low) -> None:
    x = np.concatenate([np.linspace(low, 30, 4001), [0.0, -0.0]]).astype(dtype)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # none escapes, whatever the sign
        got = get_kernel("Sigmoid")(x, xp=np)
    want = 1 / (1 + np.exp(-x.astype(np.longdouble)))
    eps = np.finfo(dtype).eps
    np.testing.assert_array_less(np.abs(got - want) / want, 4 * eps)  # relative, down to the normal floats
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        extremes = get_kernel("Sigmoid")(np.array([-np.inf, np.inf, np.nan, -1e4], dtype), xp=np)
    assert extremes.dtype == dtype
    np.testing.assert_array_equal(extremes, np.array([0, 1, np.nan, 0], dtype))
    assert get_kernel("Sigmoid")(np.array(2.0, dtype), xp=np).shape == ()


def test_erf_matches_the_standard_library() -> None:
    x = np.concatenate([np.linspace(-6, 6, 1201), [1e-9, -1e-12, 0.4999, 0.5, 30.0, -1e300, np.inf]])
    expected = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(run("Erf", x), expected, rtol=2e-7, atol=1e-15)
    assert np.isnan(run("Erf", np.array([np.nan], F32)))[0]


def test_float32_erf_stays_float32_within_the_onnx_tolerance() -> None:
    # float32 in, computed in float32: within the ONNX Erf test's tolerance (rtol 1e-3, atol 1e-7)
    # by a wide margin, small arguments keeping their relative accuracy
    x = np.concatenate([np.linspace(-6, 6, 4801), np.geomspace(1e-30, 6, 2000), [0.0, 0.5, -0.5, 30.0, np.inf]])
    x = np.concatenate([x, -x]).astype(F32)
    got = run("Erf", x)
    assert got.dtype == F32
    expected = np.array([math.erf(v) for v in x.astype(np.float64)])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=4e-7)


# --- integer semantics -----------------------------------------------------------------------


def test_integer_div_truncates_toward_zero() -> None:
    a = np.array([7, -7, 7, -7, 6], np.int32)
    b = np.array([2, 2, -2, -2, 3], np.int32)
    y = run("Div", a, b)
    np.testing.assert_array_equal(y, [3, -3, -3, 3, 2])
    assert y.dtype == np.int32


def test_mod_sign_follows_the_divisor_or_the_dividend() -> None:
    a = np.array([7, -7, 7, -7], np.int64)
    b = np.array([3, 3, -3, -3], np.int64)
    np.testing.assert_array_equal(run("Mod", a, b), [1, 2, -2, -1])
    np.testing.assert_array_equal(run("Mod", a, b, fmod=1), [1, -1, 1, -1])
    y = run("Mod", np.array([-7.5], F32), np.array([2.0], F32), fmod=1)
    assert y.dtype == F32 and y[0] == -1.5


def test_bit_shift_directions() -> None:
    x = np.array([16, 4, 1], np.uint8)
    np.testing.assert_array_equal(run("BitShift", x, np.array([1, 2, 3], np.uint8), direction="RIGHT"), [8, 1, 0])
    np.testing.assert_array_equal(run("BitShift", x, np.array([1], np.uint8), direction="LEFT"), [32, 8, 2])


# --- linear algebra --------------------------------------------------------------------------


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape", [None, (), (5,), (1, 5), (3, 1), (3, 5)])
def test_gemm_transposes_and_bias_broadcast(trans_a: int, trans_b: int, c_shape) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 3) if trans_a else (3, 4)).astype(F32)
    b = rng.standard_normal((5, 4) if trans_b else (4, 5)).astype(F32)
    c = None if c_shape is None else frozen(rng.standard_normal(c_shape).astype(F32))
    y = run("Gemm", frozen(a), frozen(b), c, alpha=2.0, beta=0.5, transA=trans_a, transB=trans_b)
    expected = 2.0 * (a.T if trans_a else a) @ (b.T if trans_b else b) + (0 if c is None else 0.5 * c)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    assert y.dtype == F32 and y.shape == (3, 5)
    types = [TensorType(F32, a.shape), TensorType(F32, b.shape)] + ([] if c is None else [TensorType(F32, c.shape)])
    assert infer("Gemm", *types, transA=trans_a, transB=trans_b)[0] == TensorType(F32, (3, 5))


def test_einsum_shape_rule_follows_the_equation() -> None:
    a, b = TensorType(F32, (2, 3, 4)), TensorType(F32, (2, 4, 5))
    assert infer("Einsum", a, b, equation="bij,bjk->bik")[0].shape == (2, 3, 5)
    assert infer("Einsum", a, equation="...ij->...ji")[0].shape == (2, 4, 3)
    assert infer("Einsum", a, equation="ijk")[0].shape == (2, 3, 4)
    assert infer("Einsum", TensorType(F32, (3, 3)), equation="ii")[0].shape == ()
    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    np.testing.assert_allclose(run("Einsum", x, equation="...ij->...ji"), np.swapaxes(x, -1, -2))


def test_trilu_and_cumulative_ops() -> None:
    x = np.arange(1, 10, dtype=np.int32).reshape(3, 3)
    np.testing.assert_array_equal(run("Trilu", x, np.array(1, np.int64), upper=0), np.tril(x, 1))
    np.testing.assert_array_equal(run("Trilu", x, None), np.triu(x))
    v = np.array([1, 2, 3, 4], np.int32)
    axis = np.array(0, np.int64)
    y = run("CumSum", v, axis, exclusive=1, reverse=1)
    np.testing.assert_array_equal(y, [9, 7, 4, 0])
    assert y.dtype == np.int32
    np.testing.assert_array_equal(run("CumProd", v, axis, exclusive=1), [1, 1, 2, 6])
    np.testing.assert_array_equal(run("CumProd", v, np.array(-1, np.int32), reverse=1), [24, 24, 12, 4])


def test_exclusive_cumsum_of_an_empty_axis() -> None:
    y = run("CumSum", np.zeros((2, 0), F32), np.array(1, np.int64), exclusive=1)
    assert y.shape == (2, 0) and y.dtype == F32


@pytest.mark.parametrize("negative, positive, expected", [
    (1, 1, [True, True, False, False]), (1, 0, [True, False, False, False]),
    (0, 1, [False, True, False, False]), (0, 0, [False, False, False, False]),
])
def test_is_inf_directions(negative: int, positive: int, expected: list[bool]) -> None:
    x = np.array([-np.inf, np.inf, np.nan, 1.0], F32)
    np.testing.assert_array_equal(run("IsInf", x, detect_negative=negative, detect_positive=positive), expected)


def test_hardmax_picks_the_first_of_tied_maxima() -> None:
    y = run("Hardmax", np.array([[3.0, 3.0, 1.0], [0.0, 2.0, 2.0]], F32), axis=1)
    np.testing.assert_array_equal(y, [[1, 0, 0], [0, 1, 0]])


# --- casts -----------------------------------------------------------------------------------


def test_cast_between_strings_and_numbers() -> None:
    s = np.array(["1.5", "-INF", "NaN", "1e3"], dtype=object)
    y = run("Cast", s, to=1)
    assert y.dtype == F32
    np.testing.assert_array_equal(y, np.array([1.5, -np.inf, np.nan, 1000.0], F32))
    back = run("Cast", np.array([1.5, 2.0], F32), to=8)
    assert back.dtype == object and list(back) == ["1.5", "2.0"]
    np.testing.assert_array_equal(run("Cast", np.array(["7", "-2"], dtype=object), to=6), [7, -2])


@pytest.mark.parametrize("code, name", [(27, "FLOAT6E2M3"), (28, "FLOAT6E3M2"), (99, "code 99")])
def test_cast_to_types_without_a_dtype_is_refused_by_name(code: int, name: str) -> None:
    with pytest.raises(UnsupportedOpError, match=name):
        run("Cast", np.ones(2, F32), to=code)
    with pytest.raises(UnsupportedOpError, match=name):
        infer("Cast", TensorType(F32, (2,)), to=code)


def test_cast_like_takes_the_target_dtype() -> None:
    y = run("CastLike", np.array([1.7, -1.7], F32), np.zeros(0, np.int8))
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, [1, -1])
    assert infer("CastLike", TensorType(F32, (2,)), TensorType(np.dtype(np.int8), (0,)))[0].dtype == np.int8


def test_windows() -> None:
    np.testing.assert_allclose(run("HannWindow", np.array(4, np.int64)), [0.0, 0.5, 1.0, 0.5], atol=1e-7)
    y = run("HammingWindow", np.array(3, np.int64), periodic=0, output_datatype=11)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, [4 / 46, 1.0, 4 / 46])


# --- shape errors ----------------------------------------------------------------------------


def test_broadcast_error_names_both_shapes() -> None:
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(4, 3\)"):
        infer("Add", TensorType(F32, (2, 3)), TensorType(F32, (4, 3)))


def test_gemm_and_matmul_errors_name_both_shapes() -> None:
    with pytest.raises(ShapeError, match=r"\(3, 4\).*\(5, 6\)"):
        infer("Gemm", TensorType(F32, (3, 4)), TensorType(F32, (5, 6)))
    with pytest.raises(ShapeError, match=r"\(3, 4\).*\(5, 6\)"):
        infer("MatMul", TensorType(F32, (3, 4)), TensorType(F32, (5, 6)))
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(4, 1\)"):
        infer("Gemm", TensorType(F32, (4, 3)), TensorType(F32, (3, 1)), TensorType(F32, (2, 3)))


def test_softmax_axis_out_of_range() -> None:
    with pytest.raises(ShapeError, match="axis 2"):
        infer("Softmax", TensorType(F32, (2, 3)), axis=2)


def test_unknown_shapes_stay_unknown() -> None:
    unknown = TensorType(F32, None)
    assert infer("Gemm", unknown, unknown)[0] == TensorType(F32, None)
    assert infer("Add", TensorType(F32, (None, 3)), TensorType(F32, (2, 1)))[0].shape == (2, 3)


def test_ieee_special_results() -> None:
    # inf and nan are answers, not failures (tests/edge_runtime/test_runtime.py checks the runtime does not warn).
    zero = np.zeros(1, F32)
    assert run("Log", zero)[0] == -np.inf
    assert np.isnan(run("Div", zero, zero))[0]
    assert np.isnan(run("Mod", np.array([np.inf], F32), np.ones(1, F32), fmod=1))[0]
    assert np.isnan(run("Softmax", np.full((1, 2), -np.inf, F32))).all()
    assert run("Exp", np.array([100.0], np.float16))[0] == np.inf


@pytest.mark.parametrize("size", [7, 100_000])  # maximum() below the clip threshold, clip() above
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_relu_either_path_is_max_with_zero(size, dtype) -> None:
    from edge_runtime.kernels.math import relu_into

    rng = np.random.default_rng(3)
    x = (rng.standard_normal(size) * 10).astype(dtype)
    if x.dtype.kind == "f":
        x[:3] = [np.nan, -np.inf, np.inf]
    want = np.maximum(x, 0)
    np.testing.assert_array_equal(run("Relu", x), want)
    out = x.copy()
    assert relu_into(out, np, out=out) is out  # in place, as the fused kernels use it
    np.testing.assert_array_equal(out, want)


def test_swish_and_tanh_gelu_match_their_formulas_on_strided_views() -> None:
    # A Llama MLP's SiLU reads a Split view of the merged gate/up product; GPT-2's gelu_new a Gemm output.
    wide = np.linspace(-12, 12, 2 * 3 * 160).reshape(3, 320)
    x64 = wide[:, ::2]
    x = frozen(wide.astype(F32))[:, ::2]
    for alpha in (1.0, 1.7):
        want = x64 / (1 + np.exp(-alpha * x64))
        np.testing.assert_allclose(run("Swish", x, alpha=alpha), want, rtol=2e-6, atol=1e-6)
    c = math.sqrt(2 / math.pi)
    want = 0.5 * x64 * (1 + np.tanh(c * (x64 + 0.044715 * x64 ** 3)))
    got = run("Gelu", x, approximate="tanh")
    assert got.dtype == F32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(run("Gelu", np.array([3e38, -3e38, 0.0], F32), approximate="tanh"), [3e38, 0, 0])


class NumpyWithErf:
    """NumPy plus a native ``erf``, as the GPU namespace carries CUDA's: counts its calls."""

    def __init__(self):
        self.erf_calls = 0

    def __getattr__(self, name):
        return getattr(np, name)

    def erf(self, x):
        self.erf_calls += 1
        return np.vectorize(math.erf, otypes=[x.dtype])(x)


def test_gelu_takes_a_native_erf_over_the_float32_polynomial() -> None:
    # On the GPU the polynomial is ~20 launches over the tensor where erf is one.
    x = np.linspace(-6, 6, 97).astype(F32)
    xp = NumpyWithErf()
    got = get_kernel("Gelu")(x, xp=xp, approximate="none")
    assert xp.erf_calls == 1 and got.dtype == F32
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    np.testing.assert_allclose(got, exact, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op, attrs", [("Gelu", {}), ("Gelu", {"approximate": "tanh"})])
def test_large_activations_in_cache_chunks_equal_the_whole_computation(op, attrs) -> None:
    # Over 2 * CACHE_CHUNK_VALUES values the passes run chunk by chunk: bit for bit the values that
    # pieces under the threshold give, with the shape and dtype, from a transposed view too.
    x = np.random.default_rng(0).standard_normal((700, 333)).astype(F32) * 4
    for source in (x, x.T):
        got = run(op, source, **attrs)
        assert got.shape == source.shape and got.dtype == F32
        want = np.concatenate([run(op, np.ascontiguousarray(source[i:i + 100]), **attrs)
                               for i in range(0, len(source), 100)])
        np.testing.assert_array_equal(got, want)


def test_gelu_float32_matches_the_exact_function() -> None:
    x = np.concatenate([np.linspace(-10, 10, 20001), [-1e4, -30.0, -6.0, 0.0, 6.0, 30.0, 1e4]]).astype(F32)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    got = run("Gelu", x)
    assert got.dtype == F32
    np.testing.assert_array_less(np.abs(got - exact), 2e-7 * np.maximum(1, np.abs(x)) + 1.2e-7 * np.abs(exact))
    at_inf, at_minus_inf, at_nan = run("Gelu", np.array([np.inf, -np.inf, np.nan], F32))
    assert at_inf == np.inf and at_minus_inf == 0 and np.isnan(at_nan)
    extremes = np.array([3e38, -3e38, 1e-30, -1e-30], F32)
    np.testing.assert_allclose(run("Gelu", extremes), [3e38, 0, 0.5e-30, -0.5e-30], rtol=1e-6, atol=0)
