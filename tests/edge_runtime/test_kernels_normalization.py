"""The normalization kernels' row-moment paths (``edge_runtime.kernels.row_moments``) against
onnxruntime (the ONNX reference implementation where onnxruntime has no kernel) and float64.

The one-pass moments must hold up where ``E[x^2] - E[x]^2`` cancels (rows whose mean dwarfs their
spread, constant rows, a mix in one tensor), and the BLAS-built factor matrices must honour every
scale and bias shape the ops allow: broadcast over the normalized axes, axis other than -1, no bias,
half and double inputs.
"""

from __future__ import annotations

import types

import numpy as np
import onnxruntime
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from edge_runtime.kernels.row_moments import row_mean_square
from tests.edge_runtime.kernel_calls import run_kernel as run

RNG = np.random.default_rng(20)


def peer(op: str, x: np.ndarray, constants: list[np.ndarray | None], opset: int, n_outputs: int = 1,
         reference: bool = False, **attrs) -> list[np.ndarray]:
    """One ``op`` node run by onnxruntime (or, with ``reference``, ONNX's reference evaluator)."""
    names = [f"c{i}" if c is not None else "" for i, c in enumerate(constants)]
    while names and not names[-1]:  # onnxruntime 1.31 crashes on a LayerNormalization with bias ""
        names.pop()
    outputs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op, ["x"] + names, outputs, **attrs)
    dtype = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        [node], op.lower(), [helper.make_tensor_value_info("x", dtype, x.shape)],
        [helper.make_empty_tensor_value_info(name) for name in outputs],
        [numpy_helper.from_array(c, n) for c, n in zip(constants, names) if c is not None])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    if reference:
        return ReferenceEvaluator(model).run(None, {"x": x})
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


def layer_norm_float64(x, scale, bias, axis: int, eps: float = 1e-5) -> np.ndarray:
    x64 = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    y = (x64 - x64.mean(axis=axes, keepdims=True)) / np.sqrt(x64.var(axis=axes, keepdims=True) + eps) * scale
    return y if bias is None else y + bias


def mixed_rows(shape: tuple[int, ...]) -> np.ndarray:
    """Rows of spread 1 around means from 0 to 1e3 (the one-pass variance's worst case and the rows
    it handles alone, in one tensor), one constant row and one of mean -1e3 to -2e3."""
    rows = RNG.standard_normal((int(np.prod(shape[:-1])), shape[-1]))
    rows += RNG.choice([0.0, 0.3, 0.9, 1.1, 5.0, 50.0, 1e3], size=(rows.shape[0], 1))
    rows[0] = 7.0
    rows[-1] -= 2e3
    return rows.reshape(shape).astype(np.float32)


def test_layer_norm_rows_with_a_large_mean_match_float64_and_onnxruntime() -> None:
    x = (RNG.standard_normal((8, 768)) + 1e3).astype(np.float32)
    scale = RNG.uniform(0.5, 1.5, 768).astype(np.float32)
    bias = RNG.standard_normal(768).astype(np.float32)
    y, mean, inv_std = run("LayerNormalization", x, scale, bias, axis=-1, n_outputs=3)
    np.testing.assert_allclose(y, layer_norm_float64(x, scale, bias, -1), rtol=0, atol=1e-5)
    want_y, want_mean, want_inv = peer("LayerNormalization", x, [scale, bias], 17, n_outputs=3, axis=-1)
    np.testing.assert_allclose(y, want_y, rtol=0, atol=2e-4)  # onnxruntime itself is 5e-5 off here
    np.testing.assert_allclose(mean, want_mean, rtol=1e-6)
    np.testing.assert_allclose(inv_std, want_inv, rtol=1e-4)


def test_layer_norm_mixed_rows_match_float64() -> None:
    x = mixed_rows((4, 32, 384))
    scale = RNG.uniform(0.5, 1.5, 384).astype(np.float32)
    bias = RNG.standard_normal(384).astype(np.float32)
    y, mean, inv_std = run("LayerNormalization", x, scale, bias, axis=-1, n_outputs=3)
    np.testing.assert_allclose(y, layer_norm_float64(x, scale, bias, -1), rtol=0, atol=1e-5)
    np.testing.assert_allclose(y[0, 0], bias, rtol=0, atol=1e-6)  # a constant row is all bias
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(mean, x64.mean(axis=-1, keepdims=True), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(inv_std, 1 / np.sqrt(x64.var(axis=-1, keepdims=True) + 1e-5), rtol=1e-5)


@pytest.mark.parametrize("shape, axis, scale_shape, with_bias", [
    ((2, 6, 10), 1, (6, 10), True),  # two normalized axes
    ((2, 6, 10), 1, (1, 10), True),  # scale broadcast over the first of them
    ((2, 6, 10), -1, (10,), False),  # no bias
    ((3, 4, 5, 6), 2, (6,), True),
    ((5, 7), 0, (5, 7), True),  # the whole tensor one row
])
def test_layer_norm_axes_and_parameter_shapes_match_onnxruntime(shape, axis, scale_shape, with_bias) -> None:
    x = (RNG.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    scale = RNG.uniform(0.5, 1.5, scale_shape).astype(np.float32)
    bias = RNG.standard_normal(scale_shape).astype(np.float32) if with_bias else None
    got = run("LayerNormalization", x, scale, bias, axis=axis, n_outputs=3)
    want = peer("LayerNormalization", x, [scale, bias], 17, n_outputs=3, axis=axis)
    assert got[0].shape == x.shape
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_layer_norm_returns_only_y_when_the_node_drops_the_statistics() -> None:
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    y = run("LayerNormalization", x, np.ones(8, np.float32), None, axis=-1, n_outputs=1)
    assert isinstance(y, np.ndarray) and y.shape == (3, 8)


@pytest.mark.parametrize("dtype, rtol", [(np.float16, 2e-3), (np.float64, 1e-12)])
def test_layer_norm_half_and_double_match_onnxruntime(dtype, rtol: float) -> None:
    x = (RNG.standard_normal((4, 16, 64)) * 3 + 2).astype(dtype)
    scale = RNG.uniform(0.5, 1.5, 64).astype(dtype)
    bias = RNG.standard_normal(64).astype(dtype)
    y = run("LayerNormalization", x, scale, bias, axis=-1, n_outputs=1)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, peer("LayerNormalization", x, [scale, bias], 17, axis=-1)[0], rtol=rtol, atol=rtol)


def test_layer_norm_scale_with_leading_ones_beyond_the_normalized_axes() -> None:
    """A (1, 1, n) scale over the last axis: the fast path."""
    x = RNG.standard_normal((2, 6, 10)).astype(np.float32)
    scale = RNG.uniform(0.5, 1.5, (1, 1, 10)).astype(np.float32)
    bias = RNG.standard_normal((1, 10)).astype(np.float32)
    y = run("LayerNormalization", x, scale, bias, axis=-1, n_outputs=1)
    np.testing.assert_allclose(y, layer_norm_float64(x, scale, bias, -1), rtol=1e-5, atol=1e-6)


def test_layer_norm_scale_beyond_the_normalized_axes_follows_broadcasting() -> None:
    """A scale that varies along an axis outside the normalized ones (not what the op declares, but
    NumPy broadcasting gives it a meaning): the general path, as before."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    scale = RNG.uniform(0.5, 1.5, (3, 1)).astype(np.float32)
    y = run("LayerNormalization", x, scale, None, axis=-1, n_outputs=1)
    np.testing.assert_allclose(y, layer_norm_float64(x, scale, None, -1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale_shape", [(32,), (1, 32), (4, 32)])
def test_rms_norm_scale_shapes_match_onnxruntime(scale_shape) -> None:
    x = (RNG.standard_normal((2, 4, 32)) + 3).astype(np.float32)
    scale = RNG.uniform(0.5, 1.5, scale_shape).astype(np.float32)
    axis = -len(scale_shape)
    y = run("RMSNormalization", x, scale, axis=axis, epsilon=1e-6)
    want = peer("RMSNormalization", x, [scale], 23, axis=axis, epsilon=1e-6)[0]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def group_norm_float64(x, scale, bias, groups: int, eps: float = 1e-5) -> np.ndarray:
    grouped = x.astype(np.float64).reshape(x.shape[0], groups, -1)
    normed = (grouped - grouped.mean(axis=-1, keepdims=True)) / np.sqrt(grouped.var(axis=-1, keepdims=True) + eps)
    per_channel = (1, -1) + (1,) * (x.ndim - 2)
    return normed.reshape(x.shape) * scale.reshape(per_channel) + bias.reshape(per_channel)


def with_channel_means(x: np.ndarray, means: list[float]) -> np.ndarray:
    """``x`` with each (sample, channel) moved by one of ``means`` (the large ones dwarf its spread)."""
    return x + RNG.choice(means, size=x.shape[:2] + (1,) * (x.ndim - 2)).astype(x.dtype)


@pytest.mark.parametrize("shape", [(2, 8, 16, 16), (1, 6, 50), (1, 4, 3, 5, 6)])
def test_instance_norm_matches_float64_and_onnxruntime(shape) -> None:
    x = with_channel_means(RNG.standard_normal(shape).astype(np.float32), [0.0, 0.5, 3.0, 120.0])
    scale = RNG.uniform(0.5, 1.5, shape[1]).astype(np.float32)
    bias = RNG.standard_normal(shape[1]).astype(np.float32)
    y = run("InstanceNormalization", x, scale, bias, epsilon=1e-5)
    np.testing.assert_allclose(y, group_norm_float64(x, scale, bias, shape[1]), rtol=0, atol=2e-6)
    # onnxruntime's float32 moments are up to 1e-4 off on the channels of mean 120
    np.testing.assert_allclose(y, peer("InstanceNormalization", x, [scale, bias], 17)[0], rtol=0, atol=3e-4)


def test_instance_norm_of_a_batch_of_vectors_is_its_bias() -> None:
    """(N, C) input: every channel one value, normalized to zero (onnxruntime refuses the rank)."""
    x = RNG.standard_normal((3, 5)).astype(np.float32) * 100
    bias = RNG.standard_normal(5).astype(np.float32)
    y = run("InstanceNormalization", x, np.ones(5, np.float32), bias, epsilon=1e-5)
    np.testing.assert_allclose(y, np.broadcast_to(bias, (3, 5)), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype, rtol, reference", [(np.float16, 2e-3, False), (np.float64, 1e-10, True)])
def test_instance_norm_half_and_double(dtype, rtol: float, reference: bool) -> None:
    x = (RNG.standard_normal((2, 3, 7, 5)) * 2 + 1).astype(dtype)
    scale = RNG.uniform(0.5, 1.5, 3).astype(dtype)
    bias = RNG.standard_normal(3).astype(dtype)
    y = run("InstanceNormalization", x, scale, bias, epsilon=1e-5)
    assert y.dtype == dtype
    want = peer("InstanceNormalization", x, [scale, bias], 17, reference=reference)[0]
    np.testing.assert_allclose(y, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("shape, groups, dtype", [
    ((2, 8, 5, 5), 4, np.float32),
    ((1, 6, 9), 3, np.float32),
    ((2, 4, 3, 3), 1, np.float32),
    ((2, 4, 3, 3), 4, np.float64),
    ((1, 8, 4, 4), 2, np.float16),
])
def test_group_norm_matches_float64_and_onnxruntime(shape, groups: int, dtype) -> None:
    x = (RNG.standard_normal(shape) * 2).astype(dtype)
    want = peer("GroupNormalization", x, [np.ones(shape[1], dtype), np.zeros(shape[1], dtype)], 21,
                num_groups=groups, epsilon=1e-5)[0]
    tolerance = 3e-3 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(run("GroupNormalization", x, np.ones(shape[1], dtype), np.zeros(shape[1], dtype),
                                   num_groups=groups, epsilon=1e-5), want, rtol=tolerance, atol=tolerance)
    x[0, : shape[1] // groups] += 40  # the first group's mean dwarfs its spread
    scale = RNG.uniform(0.5, 1.5, shape[1]).astype(dtype)
    bias = RNG.standard_normal(shape[1]).astype(dtype)
    y = run("GroupNormalization", x, scale, bias, num_groups=groups, epsilon=1e-5)
    assert y.dtype == dtype
    # onnxruntime (and the reference evaluator) take these moments in float32, 1e-4 off
    precise = 3e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(y, group_norm_float64(x, scale, bias, groups), rtol=0, atol=precise)
    want = peer("GroupNormalization", x, [scale, bias], 21, num_groups=groups, epsilon=1e-5)[0]
    np.testing.assert_allclose(y, want, rtol=0, atol=3e-3 if dtype == np.float16 else 3e-4)


def test_row_mean_square_without_vecdot_agrees() -> None:
    """NumPy before 2.0 has no ``vecdot``: the einsum loop must give the same mean squares."""
    rows = RNG.standard_normal((7, 33)).astype(np.float32)
    without_vecdot = types.SimpleNamespace(einsum=np.einsum)
    np.testing.assert_allclose(row_mean_square(rows, without_vecdot), row_mean_square(rows, np), rtol=1e-6)
    np.testing.assert_allclose(row_mean_square(rows, np), (rows.astype(np.float64) ** 2).mean(axis=1), rtol=1e-6)
