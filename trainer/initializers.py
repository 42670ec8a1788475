"""TensorFlow 1.x initializers (``tf.initializers``, ``tf.glorot_uniform_initializer``, ...).

An initializer is called with a shape (and dtype) and returns the initial-value tensor: random
ones build random ops (``trainer.random_ops``), so ``set_random_seed`` makes them reproducible and
each ``global_variables_initializer()`` run draws anew, as in TensorFlow. Fans follow TensorFlow's
layouts: a kernel's last axis is its output, the one before it its input ([h, w, in, out]).

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     w = tf.get_variable("w", [3, 2], initializer=tf.constant_initializer(0.5))
...     init = tf.global_variables_initializer()
>>> s = tf.Session(g); _ = s.run(init); s.run(w).tolist()
[[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]
"""

from __future__ import annotations

import math

import numpy as np

from trainer import random_ops
from trainer.dtypes import as_numpy_dtype
from trainer.graph import Tensor
from trainer.ops import constant as constant_tensor

__all__ = [
    "Constant", "GlorotNormal", "GlorotUniform", "Initializer", "Ones", "RandomNormal", "RandomUniform",
    "TruncatedNormal", "VarianceScaling", "Zeros", "constant", "constant_initializer", "glorot_normal",
    "glorot_normal_initializer", "glorot_uniform", "glorot_uniform_initializer", "he_normal", "he_uniform",
    "lecun_normal", "lecun_uniform", "ones", "ones_initializer", "random_normal", "random_normal_initializer",
    "random_uniform", "random_uniform_initializer", "truncated_normal", "truncated_normal_initializer",
    "variance_scaling", "variance_scaling_initializer", "xavier_initializer", "zeros", "zeros_initializer",
]


class Initializer:
    """``init(shape, dtype=None, partition_info=None) -> Tensor``."""

    def __init__(self, dtype=np.float32):
        self.dtype = as_numpy_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        return self._build([int(d) for d in shape], as_numpy_dtype(dtype) or self.dtype)

    def _build(self, shape: list[int], dtype: np.dtype) -> Tensor:
        raise NotImplementedError


class Zeros(Initializer):
    def _build(self, shape, dtype):
        return constant_tensor(np.zeros(shape, dtype))


class Ones(Initializer):
    def _build(self, shape, dtype):
        return constant_tensor(np.ones(shape, dtype))


class Constant(Initializer):
    """A scalar broadcast to the shape, or a value of exactly the shape's size (reshaped)."""

    def __init__(self, value=0, dtype=np.float32, verify_shape=False):
        super().__init__(dtype)
        self.value = np.asarray(value)

    def _build(self, shape, dtype):
        v = self.value.astype(dtype)
        if v.size == 1:
            return constant_tensor(np.full(shape, v.reshape(()), dtype))
        if v.size != math.prod(shape):
            raise ValueError(f"constant_initializer: value of {v.size} elements cannot fill shape {shape}")
        return constant_tensor(v.reshape(shape))


class RandomNormal(Initializer):
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=np.float32):
        super().__init__(dtype)
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def _build(self, shape, dtype):
        return random_ops.random_normal(shape, self.mean, self.stddev, dtype, seed=self.seed)


class TruncatedNormal(RandomNormal):
    def _build(self, shape, dtype):
        return random_ops.truncated_normal(shape, self.mean, self.stddev, dtype, seed=self.seed)


class RandomUniform(Initializer):
    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=np.float32):
        super().__init__(dtype)
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def _build(self, shape, dtype):
        return random_ops.random_uniform(shape, self.minval, self.maxval, dtype, seed=self.seed)


def _fans(shape: list[int]) -> tuple[int, int]:
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


class VarianceScaling(Initializer):
    """Samples with variance ``scale / n``, n the fan_in, fan_out or their mean (``mode``)."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None, dtype=np.float32):
        super().__init__(dtype)
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"variance_scaling: mode must be fan_in, fan_out or fan_avg, got {mode!r}")
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError("variance_scaling: distribution must be truncated_normal, untruncated_normal or "
                             f"uniform, got {distribution!r}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed

    def _build(self, shape, dtype):
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        variance = self.scale / max(1.0, n)
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * variance)
            return random_ops.random_uniform(shape, -limit, limit, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(shape, 0.0, math.sqrt(variance), dtype, seed=self.seed)
        # 0.8796...: the standard deviation of N(0, 1) truncated to [-2, 2], divided out as TensorFlow does
        return random_ops.truncated_normal(shape, 0.0, math.sqrt(variance) / 0.87962566103423978, dtype,
                                           seed=self.seed)


class GlorotUniform(VarianceScaling):
    def __init__(self, seed=None, dtype=np.float32):
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)


class GlorotNormal(VarianceScaling):
    def __init__(self, seed=None, dtype=np.float32):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)


def xavier_initializer(uniform: bool = True, seed=None, dtype=np.float32) -> Initializer:
    """``tf.contrib.layers.xavier_initializer``: Glorot uniform (or normal)."""
    return GlorotUniform(seed, dtype) if uniform else GlorotNormal(seed, dtype)


def he_normal(seed=None) -> Initializer:
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None) -> Initializer:
    return VarianceScaling(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None) -> Initializer:
    return VarianceScaling(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None) -> Initializer:
    return VarianceScaling(1.0, "fan_in", "uniform", seed)


# TensorFlow 1.x spells each both as tf.<x>_initializer and tf.initializers.<x>.
zeros = zeros_initializer = Zeros
ones = ones_initializer = Ones
constant = constant_initializer = Constant
random_normal = random_normal_initializer = RandomNormal
truncated_normal = truncated_normal_initializer = TruncatedNormal
random_uniform = random_uniform_initializer = RandomUniform
variance_scaling = variance_scaling_initializer = VarianceScaling
glorot_uniform = glorot_uniform_initializer = GlorotUniform
glorot_normal = glorot_normal_initializer = GlorotNormal


class Identity(Initializer):
    """``gain`` times the identity matrix (2-D shapes only)."""

    def __init__(self, gain: float = 1.0, dtype=np.float32):
        super().__init__(dtype)
        self.gain = gain

    def _build(self, shape, dtype):
        if len(shape) != 2:
            raise ValueError(f"identity initializer needs a 2-D shape, got {shape}")
        return constant_tensor(np.eye(*shape, dtype=dtype) * dtype.type(self.gain))


class UniformUnitScaling(Initializer):
    """U[-sqrt(3 / fan_in) * factor, sqrt(3 / fan_in) * factor] (fan_in: all dims but the last)."""

    def __init__(self, factor: float = 1.0, seed=None, dtype=np.float32):
        super().__init__(dtype)
        self.factor, self.seed = factor, seed

    def _build(self, shape, dtype):
        fan_in = math.prod(shape[:-1]) if len(shape) > 1 else (shape[0] if shape else 1)
        limit = math.sqrt(3.0 / max(fan_in, 1)) * self.factor
        return random_ops.random_uniform(shape, -limit, limit, dtype, seed=self.seed)


class Orthogonal(Initializer):
    """``gain`` times a random orthogonal matrix, reshaped: the Q of a Gaussian matrix's QR
    decomposition with its columns' signs fixed by R's diagonal, as TensorFlow builds it (the
    shape flattened to [prod(shape[:-1]), shape[-1]]; rows or columns orthonormal, whichever fit)."""

    def __init__(self, gain: float = 1.0, seed=None, dtype=np.float32):
        super().__init__(dtype)
        self.gain, self.seed = gain, seed

    def _build(self, shape, dtype):
        from trainer.array_ops import diag_part, qr, sign
        from trainer.ops import multiply, reshape, transpose

        if len(shape) < 2:
            raise ValueError(f"The tensor to initialize must be at least two-dimensional, got shape {shape}")
        if dtype.kind != "f":
            raise ValueError(f"orthogonal_initializer: expected a float dtype, got {dtype.name}")
        rows, cols = math.prod(shape[:-1]), shape[-1]
        flat = (cols, rows) if rows < cols else (rows, cols)
        q, r = qr(random_ops.random_normal(list(flat), 0.0, 1.0, dtype, seed=self.seed))
        q = multiply(q, sign(diag_part(r)))
        if rows < cols:
            q = transpose(q)
        return multiply(reshape(q, shape), dtype.type(self.gain))


identity = identity_initializer = Identity
orthogonal = orthogonal_initializer = Orthogonal
uniform_unit_scaling = uniform_unit_scaling_initializer = UniformUnitScaling


def global_variables():
    """``tf.initializers.global_variables()``: the op initializing every global variable."""
    from trainer.variables import global_variables_initializer

    return global_variables_initializer()


def local_variables():
    from trainer.variables import local_variables_initializer

    return local_variables_initializer()


def variables(var_list, name: str = "init"):
    from trainer.variables import variables_initializer

    return variables_initializer(var_list, name=name)


def tables_initializer(name: str = "init_all_tables"):
    """``tf.initializers.tables_initializer``: the op that readies the graph's lookup tables."""
    from trainer.lookup_ops import tables_initializer as initialize_tables

    return initialize_tables(name=name)


__all__ += ["Identity", "Orthogonal", "UniformUnitScaling", "global_variables", "identity", "identity_initializer",
            "local_variables", "orthogonal", "orthogonal_initializer", "tables_initializer",
            "uniform_unit_scaling", "uniform_unit_scaling_initializer", "variables"]


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.initializers", name, globals())
