"""FusedConvMaxPool against Conv, the activation and MaxPool run one after another."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import sliding_windows
from edge_runtime.kernels.fused import apply_activation
from schemas import ShapeError, TensorType, get_schema, infer_types
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run

CASES = [
    # (x shape, w shape, conv attrs, pool attrs): each picks one of the convolution's paths
    ((8, 1, 12, 12), (3, 1, 5, 5), {"pads": [2, 2, 2, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]}),  # flat, per image
    ((1, 4, 9, 9), (5, 4, 3, 3), {}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # flat, one matmul
    ((8, 6, 10, 10), (16, 6, 5, 5), {}, {"kernel_shape": [2, 2], "strides": [2, 2]}),  # channels-last
    ((2, 3, 15, 15), (8, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]},
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # strided: planar windows (ResNet's stem)
    ((2, 6, 8, 8), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}, {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 4, 9, 9), (6, 4, 1, 1), {}, {"kernel_shape": [3, 3], "strides": [3, 3]}),  # pointwise
    ((3, 4, 13), (5, 4, 3), {"pads": [1, 1]}, {"kernel_shape": [2], "strides": [2]}),  # 1-D
    ((2, 3, 6, 7), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, {"kernel_shape": [2, 3]}),  # pool stride 1
]
ACTIVATIONS = [("", []), ("Relu", []), ("Clip", [0.0, 6.0]), ("LeakyRelu", [0.1]), ("Sigmoid", []),
               ("LeakyRelu", [-0.5]), ("HardSigmoid", [-0.2, 0.5]), ("Swish", [1.0]),
               ("HardSwish", [])]  # the last four dip: pooled after


def _unfused(x, w, b, conv_attrs, pool_attrs, activation, params):
    if activation:
        y = run("FusedConv", x, w, b, domain=DOMAIN, activation=activation, activation_params=params, **conv_attrs)
    else:
        y = run("Conv", x, w, b, **conv_attrs)
    return run("MaxPool", y, **pool_attrs)[0]


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("activation, params", ACTIVATIONS)
@pytest.mark.parametrize("x_shape, w_shape, conv_attrs, pool_attrs", CASES)
def test_fused_conv_max_pool_matches_the_three_ops(x_shape, w_shape, conv_attrs, pool_attrs, activation, params,
                                                    with_bias) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32) if with_bias else None
    want = _unfused(x, w, b, conv_attrs, pool_attrs, activation, params)
    got = run("FusedConvMaxPool", x, w, b, domain=DOMAIN, activation=activation, activation_params=params,
              **conv_attrs, **{f"pool_{k}": v for k, v in pool_attrs.items()})
    assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_chunked_batch_takes_the_finished_convolution(monkeypatch) -> None:
    """A batch convolved a few images at a time comes back planar and whole, then is pooled."""
    monkeypatch.setattr(sliding_windows, "COLUMN_CHUNK_BYTES", 1)
    x_shape, w_shape, conv_attrs, pool_attrs = CASES[0]
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    want = _unfused(x, w, b, conv_attrs, pool_attrs, "Relu", [])
    got = run("FusedConvMaxPool", x, w, b, domain=DOMAIN, activation="Relu", activation_params=[], **conv_attrs,
              **{f"pool_{k}": v for k, v in pool_attrs.items()})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_shape_rule_is_the_conv_then_the_pool() -> None:
    schema = get_schema("FusedConvMaxPool", DOMAIN)
    types = [TensorType(np.dtype(np.float32), (None, 1, 28, 28)), TensorType(np.dtype(np.float32), (6, 1, 5, 5))]
    attrs = {"pads": [2, 2, 2, 2], "activation": "Relu", "pool_kernel_shape": [2, 2], "pool_strides": [2, 2]}
    (out,) = infer_types(schema, types, schema.resolve_attrs(attrs))
    assert out.shape == (None, 6, 14, 14)
    with pytest.raises(ShapeError, match="its max pool: .*does not fit"):
        infer_types(schema, types, schema.resolve_attrs({**attrs, "pool_kernel_shape": [40, 40]}))


# (fused activation, its params, the ONNX op computing the same, that op's attrs and extra inputs)
STANDALONE = [
    ("Relu", [], "Relu", {}, []), ("Sigmoid", [], "Sigmoid", {}, []), ("Tanh", [], "Tanh", {}, []),
    ("LeakyRelu", [0.1], "LeakyRelu", {"alpha": 0.1}, []), ("LeakyRelu", [-0.5], "LeakyRelu", {"alpha": -0.5}, []),
    ("HardSigmoid", [-0.2, 0.5], "HardSigmoid", {"alpha": -0.2, "beta": 0.5}, []),
    ("Clip", [0.0, 6.0], "Clip", {}, [np.float32(0.0), np.float32(6.0)]),
    ("Swish", [1.0], "Swish", {"alpha": 1.0}, []), ("Swish", [1.5], "Swish", {"alpha": 1.5}, []),
    ("Swish", [-0.75], "Swish", {"alpha": -0.75}, []), ("HardSwish", [], "HardSwish", {}, []),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("activation, params, op, attrs, extra", STANDALONE)
def test_fused_activation_matches_its_onnx_op(activation, params, op, attrs, extra, dtype) -> None:
    """Each fused activation, run in place on a convolution's output, computes what its own op does,
    out to where the sigmoids and tanh saturate."""
    x = np.concatenate([np.linspace(-40, 40, 801), [0.0, -1e-30, 1e-30, 88.0, -88.0, 1e4, -1e4]]).astype(dtype)
    want = run(op, x, *(np.asarray(e, dtype) for e in extra), **attrs)
    got = apply_activation(x.copy(), np, activation, params)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
