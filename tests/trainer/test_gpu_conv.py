"""The GPU convolution and its gradients (``trainer.gpu_conv``: im2col, one GEMM, col2im) against
the portable kernels on NumPy, over the window shapes models use. Skipped where CuPy finds no GPU
(the module imports CuPy, so it is imported inside the tests)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.devices import open_device
from edge_runtime.kernels import get_kernel

D = "flowstack"
RTOL, ATOL = 1e-4, 1e-4

# (input shape, filters, kernel, strides, pads, dilations, auto_pad)
CONV_CASES = {
    "3x3 valid": ((4, 3, 12, 12), 8, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), "NOTSET"),
    "3x3 stride 2 pad 1": ((3, 5, 11, 9), 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), "NOTSET"),
    "3x2 dilated, uneven pads": ((2, 4, 10, 13), 5, (3, 2), (1, 2), (2, 0, 1, 1), (2, 3), "NOTSET"),
    "5x5 same upper, stride 2": ((2, 3, 9, 10), 4, (5, 5), (2, 2), None, (1, 1), "SAME_UPPER"),
    "1x1": ((5, 7, 6, 6), 3, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), "NOTSET"),
}


def _gpu_xp():
    """The array namespace a GPU device hands kernels (CuPy behind the NumPy-compat layer)."""
    return open_device("gpu").xp


def _conv_attrs(kernel, strides, pads, dilations, auto_pad) -> dict:
    return {"auto_pad": auto_pad, "dilations": list(dilations), "group": 1, "kernel_shape": list(kernel),
            "pads": None if pads is None else list(pads), "strides": list(strides)}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_gpu_convolution_and_its_gradients_match_the_portable_kernels(case: str) -> None:
    import cupy

    from trainer import gpu_conv

    shape, filters, kernel, strides, pads, dilations, auto_pad = CONV_CASES[case]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((filters, shape[1]) + kernel).astype(np.float32)
    b = rng.standard_normal(filters).astype(np.float32)
    attrs = _conv_attrs(kernel, strides, pads, dilations, auto_pad)
    y = get_kernel("Conv")(x, w, b, xp=np, **attrs)
    dx_, dw_, db_ = (cupy.asarray(a) for a in (x, w, b))
    got = gpu_conv.conv(dx_, dw_, db_, xp=_gpu_xp(), **attrs)
    np.testing.assert_allclose(got.get(), y, rtol=RTOL, atol=ATOL, err_msg="Conv")
    np.testing.assert_allclose(gpu_conv.conv(dx_, dw_, None, xp=_gpu_xp(), **attrs).get(),
                               get_kernel("Conv")(x, w, None, xp=np, **attrs), rtol=RTOL, atol=ATOL,
                               err_msg="Conv without bias")

    dy = rng.standard_normal(y.shape).astype(np.float32)
    ddy = cupy.asarray(dy)
    np.testing.assert_allclose(gpu_conv.conv_backprop_filter(ddy, dx_, dw_, xp=_gpu_xp(), **attrs).get(),
                               get_kernel("ConvBackpropFilter", D)(dy, x, w, xp=np, **attrs), rtol=RTOL, atol=1e-3,
                               err_msg="ConvBackpropFilter")
    np.testing.assert_allclose(gpu_conv.conv_backprop_input(ddy, dw_, dx_, xp=_gpu_xp(), **attrs).get(),
                               get_kernel("ConvBackpropInput", D)(dy, w, x, xp=np, **attrs), rtol=RTOL, atol=ATOL,
                               err_msg="ConvBackpropInput")


@pytest.mark.gpu
def test_gpu_convolution_falls_back_for_groups_and_integers() -> None:
    import cupy

    from trainer import gpu_conv

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 7, 7)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    attrs = _conv_attrs((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "NOTSET") | {"group": 2}
    np.testing.assert_allclose(gpu_conv.conv(cupy.asarray(x), cupy.asarray(w), None, xp=_gpu_xp(), **attrs).get(),
                               get_kernel("Conv")(x, w, None, xp=np, **attrs), rtol=RTOL, atol=ATOL)
