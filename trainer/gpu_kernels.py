"""The kernels a ``GPU:n`` device uses in place of the portable ones (``Device.kernel_overrides``,
see ``trainer/devices.py``): the fused optimizer updates here, convolutions from ``gpu_conv`` and
the loss, pooling-gradient and reduction kernels from ``gpu_nn``, all in ``KERNEL_OVERRIDES``.
Imports CuPy: imported only when a GPU device is opened, never on the CPU path.

The portable ``ApplyAdam`` (``trainer/kernels/training.py``) is ten elementwise passes, each a
kernel launch on the GPU, plus host arithmetic on the 0-d hyper-parameters; here m, v and the
variable are updated in place by one ``ElementwiseKernel`` launch per variable. The
hyper-parameters (lr, betas, epsilon, the beta powers) stay 0-d device arrays that the kernel
broadcasts and reads on the device, so the step never waits for the GPU to learn them.
The arithmetic follows the portable kernels' order, so results agree to float32 rounding.
"""

from __future__ import annotations

import cupy

from trainer import gpu_conv, gpu_nn

__all__ = ["KERNEL_OVERRIDES", "apply_adam", "apply_gradient_descent", "apply_momentum"]

D = "flowstack"

_ADAM = cupy.ElementwiseKernel(
    "T grad, T lr, T beta1, T beta2, T epsilon, T beta1_power, T beta2_power",
    "T var, T m, T v",
    """
    m = m * beta1 + grad * (T(1) - beta1);
    v = v * beta2 + grad * grad * (T(1) - beta2);
    T alpha = lr * sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
    var -= (m / (sqrt(v) + epsilon)) * alpha;
    """,
    "flowstack_apply_adam",
)

_GRADIENT_DESCENT = cupy.ElementwiseKernel(
    "T delta, T alpha", "T var", "var -= delta * alpha;", "flowstack_apply_gradient_descent")

_MOMENTUM = cupy.ElementwiseKernel(
    "T grad, T lr, T momentum", "T var, T accum",
    "accum = accum * momentum + grad; var -= accum * lr;",
    "flowstack_apply_momentum")

_NESTEROV = cupy.ElementwiseKernel(
    "T grad, T lr, T momentum", "T var, T accum",
    "accum = accum * momentum + grad; var -= (accum * momentum + grad) * lr;",
    "flowstack_apply_momentum_nesterov")


def _like(value, var: cupy.ndarray) -> cupy.ndarray:
    """``value`` (a device array, or a host scalar or array) as a device array of ``var``'s dtype;
    a device array of that dtype passes as is, so nothing waits for the GPU."""
    if isinstance(value, cupy.ndarray) and value.dtype == var.dtype:
        return value
    return cupy.asarray(value, dtype=var.dtype)


def apply_adam(rctx, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, *, xp):
    """ApplyAdam in one launch: m, v and ``var`` updated in place."""
    params = (_like(p, var) for p in (grad, lr, beta1, beta2, epsilon, beta1_power, beta2_power))
    _ADAM(*params, var, m, v)
    return var


def apply_gradient_descent(rctx, var, alpha, delta, *, xp):
    """ApplyGradientDescent in one launch, in place on ``var``."""
    _GRADIENT_DESCENT(_like(delta, var), _like(alpha, var), var)
    return var


def apply_momentum(rctx, var, accum, lr, grad, momentum, *, xp, use_nesterov):
    """ApplyMomentum in one launch: ``accum`` and ``var`` updated in place."""
    kernel = _NESTEROV if use_nesterov else _MOMENTUM
    kernel(_like(grad, var), _like(lr, var), _like(momentum, var), var, accum)
    return var


KERNEL_OVERRIDES = {
    (D, "ApplyAdam"): apply_adam,
    (D, "ApplyGradientDescent"): apply_gradient_descent,
    (D, "ApplyMomentum"): apply_momentum,
    **gpu_conv.OVERRIDES,
    **gpu_nn.OVERRIDES,
}
