"""Initial values for variables, computed in NumPy when the variable is built (seedable)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["glorot_uniform", "he_normal", "ones", "set_seed", "truncated_normal", "zeros", "uniform"]

_rng = np.random.default_rng(0)


def set_seed(seed: int) -> None:
    """Make variable initialization reproducible."""
    global _rng
    _rng = np.random.default_rng(seed)


def _fans(shape):
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:]) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive  # (out, in, k...) filters


def glorot_uniform(shape, dtype=np.float32):
    fan_in, fan_out = _fans(shape)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return _rng.uniform(-limit, limit, size=shape).astype(dtype)


def he_normal(shape, dtype=np.float32):
    fan_in, _ = _fans(shape)
    return (_rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)).astype(dtype)


def truncated_normal(shape, stddev=0.05, dtype=np.float32):
    v = _rng.standard_normal(shape)
    while True:
        bad = np.abs(v) > 2
        if not bad.any():
            return (v * stddev).astype(dtype)
        v[bad] = _rng.standard_normal(int(bad.sum()))


def uniform(shape, low=-0.05, high=0.05, dtype=np.float32):
    return _rng.uniform(low, high, size=shape).astype(dtype)


def zeros(shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def ones(shape, dtype=np.float32):
    return np.ones(shape, dtype)
