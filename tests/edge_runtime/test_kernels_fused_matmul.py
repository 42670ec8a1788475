"""FusedMatMul: A's last axis times (K, N) B, a bias, an activation; against MatMul, Add and the
activation's op, at several ranks, a batch, float64, no bias; its shape rule."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import fused
from schemas import ShapeError, TensorType, get_schema, infer_types
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run

ACTIVATIONS = [("", []), ("Relu", []), ("Clip", [0.0, 6.0]), ("Swish", [1.0]), ("Swish", [0.5]), ("Sigmoid", [])]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("activation, params", ACTIVATIONS)
@pytest.mark.parametrize("a_shape, n", [((2, 5, 4, 6), 7), ((1, 3, 3, 20), 8), ((9, 4), 3), ((5,), 2)])
def test_fused_matmul_matches_matmul_add_and_the_activation(a_shape, n, activation, params, bias, dtype) -> None:
    rng = np.random.default_rng(len(a_shape) + n)
    a = (rng.standard_normal(a_shape) * 2).astype(dtype)
    b = rng.standard_normal((a_shape[-1], n)).astype(dtype)
    c = rng.standard_normal(n).astype(dtype) if bias else None
    want = run("MatMul", a, b) + (c if bias else 0)
    if activation:
        want = fused.apply_activation(want.astype(dtype), np, activation, params)
    got = run("FusedMatMul", a, b, c, domain=DOMAIN, activation=activation, activation_params=params)
    assert got.dtype == dtype and got.shape == a_shape[:-1] + (n,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_silu_with_enough_rows_scales_b_and_matches_to_the_bit(monkeypatch) -> None:
    """More rows than B has: B and the bias halved for SiLU's three-pass form, the unscaled result to the bit."""
    rng = np.random.default_rng(2)
    a, b, c = rng.standard_normal((1, 6, 6, 8)), rng.standard_normal((8, 5)), rng.standard_normal(5)
    a, b, c = (v.astype(np.float32) for v in (a, b, c))
    got = run("FusedMatMul", a, b, c, domain=DOMAIN, activation="Swish", activation_params=[1.0])
    monkeypatch.setattr(fused, "input_scale", lambda activation, params: 1.0)
    np.testing.assert_array_equal(got, run("FusedMatMul", a, b, c, domain=DOMAIN, activation="Swish",
                                           activation_params=[1.0]))


def _infer(*shapes, **attrs):
    schema = get_schema("FusedMatMul", DOMAIN)
    types = [TensorType(np.dtype(np.float32), s) for s in shapes]
    return infer_types(schema, types, schema.resolve_attrs(attrs))


def test_shape_rule() -> None:
    assert _infer((None, 7, 7, 16), (16, 4), (4,))[0].shape == (None, 7, 7, 4)
    assert _infer((3, 16), (16, 4))[0].shape == (3, 4)
    with pytest.raises(ShapeError, match="A's last axis has 15 values; B has 16 rows"):
        _infer((1, 7, 7, 15), (16, 4))
    with pytest.raises(ShapeError, match=r"B must be a \(K, N\) matrix"):
        _infer((1, 16), (16, 4, 1))
    with pytest.raises(ShapeError, match="C must be a bias of B's 4 columns"):
        _infer((1, 16), (16, 4), (5,))
    with pytest.raises(ShapeError, match="activation 'Gelu' is not one of"):
        _infer((1, 16), (16, 4), activation="Gelu")
