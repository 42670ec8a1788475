"""The GPU loss, pooling-gradient, ReLU-gradient and reduction kernels (``trainer.gpu_nn``) against
the portable kernels on NumPy. Skipped where CuPy finds no GPU (the module imports CuPy, so it is
imported inside the tests)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.devices import open_device
from edge_runtime.kernels import get_kernel

D = "flowstack"


def _gpu_xp():
    """The array namespace a GPU device hands kernels (CuPy behind the NumPy-compat layer)."""
    return open_device("gpu").xp


POOL_CASES = {
    "2x2 stride 2": ((3, 4, 12, 12), (2, 2), (2, 2), (0, 0, 0, 0), 0),
    "3x3 stride 2 pad 1 (overlapping)": ((2, 3, 11, 10), (3, 3), (2, 2), (1, 1, 1, 1), 0),
    "3x3 stride 2 ceil": ((2, 2, 10, 10), (3, 3), (2, 2), (0, 0, 0, 0), 1),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_gpu_max_pool_gradient_matches_the_portable_kernel(case: str) -> None:
    import cupy

    from trainer import gpu_nn

    shape, kernel, strides, pads, ceil_mode = POOL_CASES[case]
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, :4, :4] = 1.0  # ties: the first maximum of each window takes the gradient
    attrs = {"auto_pad": "NOTSET", "ceil_mode": ceil_mode, "dilations": None, "kernel_shape": list(kernel),
             "pads": list(pads), "storage_order": 0, "strides": list(strides), "count_include_pad": 0}
    y = get_kernel("MaxPool")(x, xp=np, n_outputs=1, **{k: v for k, v in attrs.items() if k != "count_include_pad"})
    y = y[0] if isinstance(y, tuple) else y
    dy = rng.standard_normal(y.shape).astype(np.float32)
    want = get_kernel("MaxPoolGrad", D)(dy, x, xp=np, **attrs)
    got = gpu_nn.max_pool_grad(cupy.asarray(dy), cupy.asarray(x), xp=_gpu_xp(), **attrs)
    np.testing.assert_allclose(got.get(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("classes", [10, 1000])
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_gpu_sparse_softmax_cross_entropy_matches_the_portable_kernel(classes: int, label_dtype) -> None:
    import cupy

    from trainer import gpu_nn

    rng = np.random.default_rng(3)
    logits = (4 * rng.standard_normal((3, 7, classes))).astype(np.float32)
    labels = rng.integers(0, classes, (3, 7)).astype(label_dtype)
    loss, grad = get_kernel("SparseSoftmaxCrossEntropyWithLogits", D)(logits, labels, xp=np)
    got_loss, got_grad = gpu_nn.sparse_softmax_xent(cupy.asarray(logits), cupy.asarray(labels), xp=_gpu_xp())
    assert got_loss.shape == loss.shape and got_grad.shape == grad.shape
    np.testing.assert_allclose(got_loss.get(), loss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_grad.get(), grad, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_gpu_sparse_softmax_cross_entropy_gives_nan_rows_for_labels_out_of_range() -> None:
    import cupy

    from trainer import gpu_nn

    logits = cupy.zeros((3, 4), dtype=cupy.float32)
    loss, grad = gpu_nn.sparse_softmax_xent(logits, cupy.asarray([1, 4, -1]), xp=_gpu_xp())
    loss, grad = loss.get(), grad.get()
    np.testing.assert_allclose(loss[0], np.log(4), rtol=1e-6)
    assert np.isnan(loss[1:]).all() and np.isnan(grad[1:]).all() and not np.isnan(grad[0]).any()


@pytest.mark.gpu
def test_gpu_relu_gradient_and_bias_sums_match_the_portable_kernels() -> None:
    import cupy

    from trainer import gpu_nn

    rng = np.random.default_rng(4)
    dy, y = (rng.standard_normal((5, 6, 7, 8)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(gpu_nn.relu_grad(cupy.asarray(dy), cupy.asarray(y), xp=_gpu_xp()).get(),
                                  get_kernel("ReluGrad", D)(dy, y, xp=np))
    for axes, keepdims in (((0, 2, 3), 0), ((0, 2, 3), 1), ((1, 3), 0), ((3,), 1), ((0, 1), 0)):
        want = get_kernel("ReduceSum")(dy, np.asarray(axes), xp=np, keepdims=keepdims, noop_with_empty_axes=0)
        got = gpu_nn.reduce_sum(cupy.asarray(dy), np.asarray(axes), xp=_gpu_xp(), keepdims=keepdims, noop_with_empty_axes=0)
        assert got.shape == want.shape, axes
        np.testing.assert_allclose(got.get(), want, rtol=1e-4, atol=1e-4, err_msg=str(axes))
