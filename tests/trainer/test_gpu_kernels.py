"""The fused CuPy optimizer updates (``trainer.gpu_kernels``) against the portable kernels on
NumPy, over several steps; and a ``GPU:0`` device lowers its updates to them. Skipped where CuPy
finds no GPU (the module imports CuPy, so it is imported inside the tests)."""

from __future__ import annotations

import numpy as np
import pytest

from trainer.kernels import training

# float32 rounding (CUDA may fuse a multiply and an add) grows over the steps; m and v near zero
# need the absolute tolerance.
RTOL, ATOL, STEPS = 1e-5, 1e-6, 5


def _arrays(seed: int, n: int, shape=(64, 33)):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]


def _scalar(value: float) -> np.ndarray:
    return np.asarray(value, np.float32)


@pytest.mark.gpu
def test_fused_adam_matches_the_portable_kernel_over_several_steps() -> None:
    import cupy

    from trainer import gpu_kernels

    var, = _arrays(0, 1)
    m, v = np.zeros_like(var), np.zeros_like(var)
    dvar, dm, dv = (cupy.asarray(a) for a in (var, m, v))
    lr, beta1, beta2, eps = (_scalar(x) for x in (1e-2, 0.9, 0.999, 1e-8))
    b1p, b2p = beta1.copy(), beta2.copy()
    for step, grad in enumerate(_arrays(1, STEPS)):
        training.apply_adam(None, var, m, v, b1p, b2p, lr, beta1, beta2, eps, grad, xp=np)
        # hyper-parameters as the trainer holds them on the GPU: 0-d device arrays
        out = gpu_kernels.apply_adam(None, dvar, dm, dv, *(cupy.asarray(x) for x in (b1p, b2p, lr, beta1, beta2, eps)),
                                     cupy.asarray(grad), xp=cupy)
        assert out is dvar, "updated in place"
        for name, host, device in (("var", var, dvar), ("m", m, dm), ("v", v, dv)):
            np.testing.assert_allclose(device.get(), host, rtol=RTOL, atol=ATOL, err_msg=f"{name} at step {step}")
        b1p, b2p = b1p * beta1, b2p * beta2


@pytest.mark.gpu
@pytest.mark.parametrize("use_nesterov", [0, 1])
def test_fused_momentum_matches_the_portable_kernel_over_several_steps(use_nesterov: int) -> None:
    import cupy

    from trainer import gpu_kernels

    var, = _arrays(2, 1)
    accum = np.zeros_like(var)
    dvar, daccum = cupy.asarray(var), cupy.asarray(accum)
    lr, momentum = _scalar(0.05), _scalar(0.9)
    for step, grad in enumerate(_arrays(3, STEPS)):
        training.apply_momentum(None, var, accum, lr, grad, momentum, xp=np, use_nesterov=use_nesterov)
        # host scalars are accepted too (uploaded as the variable's dtype)
        gpu_kernels.apply_momentum(None, dvar, daccum, lr, cupy.asarray(grad), momentum, xp=cupy,
                                   use_nesterov=use_nesterov)
        np.testing.assert_allclose(dvar.get(), var, rtol=RTOL, atol=ATOL, err_msg=f"var at step {step}")
        np.testing.assert_allclose(daccum.get(), accum, rtol=RTOL, atol=ATOL, err_msg=f"accum at step {step}")


@pytest.mark.gpu
def test_fused_gradient_descent_matches_the_portable_kernel_over_several_steps() -> None:
    import cupy

    from trainer import gpu_kernels

    var, = _arrays(4, 1)
    dvar = cupy.asarray(var)
    alpha = _scalar(0.1)
    for step, delta in enumerate(_arrays(5, STEPS)):
        training.apply_gradient_descent(None, var, alpha, delta, xp=np)
        gpu_kernels.apply_gradient_descent(None, dvar, cupy.asarray(alpha), cupy.asarray(delta), xp=cupy)
        np.testing.assert_allclose(dvar.get(), var, rtol=RTOL, atol=ATOL, err_msg=f"var at step {step}")


@pytest.mark.gpu
def test_a_gpu_device_lowers_its_optimizer_updates_to_the_fused_kernels() -> None:
    from trainer import gpu_kernels
    from trainer.devices import Device

    overrides = Device("GPU:0").kernel_overrides
    assert overrides[("flowstack", "ApplyAdam")] is gpu_kernels.apply_adam
    assert overrides[("flowstack", "ApplyMomentum")] is gpu_kernels.apply_momentum
    assert overrides[("flowstack", "ApplyGradientDescent")] is gpu_kernels.apply_gradient_descent
