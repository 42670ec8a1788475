"""Initial values for variables, computed in NumPy when the variable is built (seedable).

Values come from one process-wide generator (``set_seed``), except in a graph with a graph-level
seed (``tf.set_random_seed``): there they come from the graph's own stream, so rebuilding a seeded
graph reproduces its initial values whatever ran before in the process, as in TensorFlow 1.x.
"""

from __future__ import annotations

import math

import numpy as np

from trainer.graph import get_default_graph

__all__ = ["glorot_uniform", "he_normal", "ones", "set_seed", "truncated_normal", "zeros", "uniform"]

_rng = np.random.default_rng(0)


def set_seed(seed: int) -> None:
    """Make variable initialization reproducible."""
    global _rng
    _rng = np.random.default_rng(seed)


def _generator() -> np.random.Generator:
    g = get_default_graph()
    if g.seed is None:
        return _rng
    if g.initial_value_stream is None or g.initial_value_stream[0] != g.seed:
        g.initial_value_stream = (g.seed, np.random.default_rng([g.seed, _INITIAL_VALUE_STREAM]))
    return g.initial_value_stream[1]


_INITIAL_VALUE_STREAM = 0x1A17  # keeps the stream apart from the graph's random ops seeded by the same seed


def _fans(shape):
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:]) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive  # (out, in, k...) filters


def glorot_uniform(shape, dtype=np.float32):
    fan_in, fan_out = _fans(shape)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return _generator().uniform(-limit, limit, size=shape).astype(dtype)


def he_normal(shape, dtype=np.float32):
    fan_in, _ = _fans(shape)
    return (_generator().standard_normal(shape) * math.sqrt(2.0 / fan_in)).astype(dtype)


def truncated_normal(shape, stddev=0.05, dtype=np.float32):
    rng = _generator()
    v = rng.standard_normal(shape)
    while True:
        bad = np.abs(v) > 2
        if not bad.any():
            return (v * stddev).astype(dtype)
        v[bad] = rng.standard_normal(int(bad.sum()))


def uniform(shape, low=-0.05, high=0.05, dtype=np.float32):
    return _generator().uniform(low, high, size=shape).astype(dtype)


def zeros(shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def ones(shape, dtype=np.float32):
    return np.ones(shape, dtype)
