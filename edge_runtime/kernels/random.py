"""ONNX's random ops: RandomUniformLike and Bernoulli.

Drawn on the host with NumPy's RandomState, seeded by the node's ``seed`` where it has one (so a
seeded node draws what ONNX's reference evaluator draws, on every run and every device) and from
fresh entropy where not; results are moved to the inputs' device.
"""

from __future__ import annotations

import math

import numpy as np

from edge_runtime.kernels.registry import kernel
from schemas.ops.shape import dtype_from_code


def _generator(seed: float | None) -> np.random.RandomState:
    if seed is None or math.isnan(seed):
        return np.random.RandomState()
    return np.random.RandomState(int(seed))


def _dtype(code: int | None, like, op: str) -> np.dtype:
    return like.dtype if code is None or code == 0 else dtype_from_code(code, op)


# the element types ONNX's RandomUniformLike may draw
UNIFORM_TYPES = ("float16", "float32", "float64", "bfloat16")


@kernel("RandomUniformLike")
def random_uniform_like(x, *, xp, dtype, high, low, seed):
    out = _dtype(dtype, x, "RandomUniformLike")
    if out.name not in UNIFORM_TYPES:
        raise ValueError(f"RandomUniformLike: dtype must be one of {UNIFORM_TYPES}, got {out}")
    values = _generator(seed).rand(*x.shape).astype(out)  # scaled in the output type, as the reference does
    values *= high - low
    values += low
    return xp.asarray(values)


@kernel("Bernoulli", host_inputs=(0,))
def bernoulli(p, *, xp, dtype, seed):
    if p.size and not (p.min() >= 0 and p.max() <= 1):  # NaN fails both
        raise ValueError(f"Bernoulli: probabilities must lie in [0, 1], got values from {p.min()} to {p.max()}")
    return xp.asarray(_generator(seed).binomial(1, p).astype(_dtype(dtype, p, "Bernoulli")))
