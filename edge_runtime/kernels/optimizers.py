"""ONNX's optimizer updates (ai.onnx.preview.training): Adagrad, Momentum and Adam.

R (the learning rate) and T (the update count) are read as host scalars; every tensor is updated
in its own type, the scalars' arithmetic kept as Python floats so that it never widens a float32
X to float64.
"""

from __future__ import annotations

import math

from edge_runtime.kernels.registry import kernel
from schemas.ops.optimizers import OPERAND_GROUPS, operand_count

D = "ai.onnx.preview.training"
MOMENTUM_MODES = ("standard", "nesterov")


def _scalars(name: str, r, t) -> tuple[float, int]:
    if r.size != 1 or t.size != 1:
        raise ValueError(f"{name}: R and T must be scalars, got shapes {tuple(r.shape)} and {tuple(t.shape)}")
    return float(r.reshape(-1)[0]), int(t.reshape(-1)[0])


def _groups(name: str, operands) -> list[list]:
    """``operands`` split into the op's groups (X's, G's, then its states), each member checked
    against the shape of the X it goes with."""
    n = operand_count(name, len(operands))
    groups = [list(operands[i * n:(i + 1) * n]) for i in range(len(OPERAND_GROUPS[name]))]
    for label, group in zip(OPERAND_GROUPS[name][1:], groups[1:]):
        for j, (x, other) in enumerate(zip(groups[0], group)):
            if other.shape != x.shape:
                raise ValueError(f"{name}: {label}{j + 1} has shape {tuple(other.shape)} but X{j + 1} has "
                                 f"{tuple(x.shape)}")
    return groups


@kernel("Adagrad", domain=D, host_inputs=(0, 1))
def adagrad(r, t, *operands, xp, decay_factor, epsilon, norm_coefficient):
    rate, step = _scalars("Adagrad", r, t)
    rate /= 1 + step * decay_factor
    xs, hs = [], []
    for x, g, h in zip(*_groups("Adagrad", operands)):
        g = g + norm_coefficient * x
        h = h + g * g
        xs.append(x - rate * g / (xp.sqrt(h) + epsilon))
        hs.append(h)
    return (*xs, *hs)


@kernel("Momentum", domain=D, host_inputs=(0, 1))
def momentum(r, t, *operands, xp, alpha, beta, mode, norm_coefficient):
    if mode not in MOMENTUM_MODES:
        raise ValueError(f"Momentum: mode must be one of {MOMENTUM_MODES}, got {mode!r}")
    rate, step = _scalars("Momentum", r, t)
    beta = beta if step > 0 else 1.0  # the first update takes the whole gradient
    xs, vs = [], []
    for x, g, v in zip(*_groups("Momentum", operands)):
        g = g + norm_coefficient * x
        v = alpha * v + beta * g
        xs.append(x - rate * (v if mode == "standard" else g + alpha * v))
        vs.append(v)
    return (*xs, *vs)


@kernel("Adam", domain=D, host_inputs=(0, 1))
def adam(r, t, *operands, xp, alpha, beta, epsilon, norm_coefficient, norm_coefficient_post):
    rate, step = _scalars("Adam", r, t)
    if step > 0:  # bias correction of both moments
        rate *= math.sqrt(1 - beta ** step) / (1 - alpha ** step)
    xs, vs, hs = [], [], []
    for x, g, v, h in zip(*_groups("Adam", operands)):
        g = g + norm_coefficient * x
        v = alpha * v + (1 - alpha) * g
        h = beta * h + (1 - beta) * (g * g)
        xs.append((1 - norm_coefficient_post) * (x - rate * (v / (xp.sqrt(h) + epsilon))))
        vs.append(v)
        hs.append(h)
    return (*xs, *vs, *hs)
