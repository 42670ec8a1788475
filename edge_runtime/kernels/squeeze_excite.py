"""SqueezeExciteConv: a squeeze-excite gate and the 1x1 convolution that reads the gated input.

Apart, the gate's two convolutions of 1x1 planes cost a convolution kernel's call each, and the
gating a pass over X. Here the gate is two products of (N, C) rows, and the gates scale the
projection's weights per image instead of X when its M output channels are fewer than the plane's
pixels: Conv1x1(X * g, W) == Conv1x1(X, W * g), exactly up to rounding. Channels-last, the
projection is ``FusedMatMul``'s product with (C, M) weights.
"""

from __future__ import annotations

import math

from edge_runtime.kernels.fused import apply_activation, fused_matmul
from edge_runtime.kernels.registry import kernel
from schemas.ops.fused import DOMAIN


def _rows_times(v, w, b, xp, activation: str, params):
    """(N, K) rows ``v`` through a 1x1 convolution of weights (O, K, 1...) or (O, 1..., K), its
    bias and activation: (N, O)."""
    y = xp.matmul(v, w.reshape(w.shape[0], -1).T)
    if b is not None:
        y += b
    return apply_activation(y, xp, activation, params) if activation else y


@kernel("SqueezeExciteConv", DOMAIN)
def squeeze_excite_conv(x, w_reduce, b_reduce, w_expand, b_expand, w, b, *, xp, channels_last, reduce_activation,
                        reduce_activation_params, gate_activation, gate_activation_params, activation,
                        activation_params):
    n = x.shape[0]
    spatial = tuple(range(1, x.ndim - 1)) if channels_last else tuple(range(2, x.ndim))
    c, pixels = x.shape[-1] if channels_last else x.shape[1], math.prod(x.shape[a] for a in spatial)
    means = xp.mean(x, axis=spatial)
    hidden = _rows_times(means, w_reduce, b_reduce, xp, reduce_activation, reduce_activation_params)
    gates = _rows_times(hidden, w_expand, b_expand, xp, gate_activation, gate_activation_params)  # (N, C)
    m = w.shape[1] if channels_last else w.shape[0]
    w2 = w if channels_last else w.reshape(m, c)  # (C, M) channels-last, (M, C) planar
    if m < pixels:  # fewer multiplies scaling the weights, per image
        weights = [w2 * (gates[i][:, None] if channels_last else gates[i]) for i in range(n)]
    else:
        weights = [w2] * n
        x = x * gates.reshape((n,) + (1,) * len(spatial) + (c,) if channels_last else (n, c) + (1,) * len(spatial))
    project = fused_matmul if channels_last else _planar_pointwise
    images = [project(x[i:i + 1], weights[i], b, xp=xp, activation=activation, activation_params=activation_params)
              for i in range(n)]
    if n == 0:  # no images to multiply: the empty output of the projection's shape
        shape = x.shape[:-1] + (m,) if channels_last else (0, m) + x.shape[2:]
        return xp.empty(shape, dtype=xp.result_type(x, w2))
    return images[0] if n == 1 else xp.concatenate(images)


def _planar_pointwise(x, w2, b, *, xp, activation: str, activation_params):
    """The 1x1 convolution of one planar image (1, C, spatial...) by (M, C) weights: one matmul."""
    y = xp.matmul(w2, x.reshape(x.shape[1], -1))
    if b is not None:
        y += b.reshape(-1, 1)
    if activation:
        apply_activation(y, xp, activation, activation_params)
    return y.reshape((1, w2.shape[0]) + x.shape[2:])
