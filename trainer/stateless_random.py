"""``tf.random.stateless_*``: random tensors that are a function of a [2]-int seed alone, from
TensorFlow's Philox4x32-10 stream laid out as TensorFlow lays it out (trainer/philox.py), so the
same seed gives the same values in every run, session and process."""

from __future__ import annotations

import numpy as np

from trainer import ops
from trainer.dtypes import as_numpy_dtype
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import cast, constant, convert_to_tensor, make_op
from trainer.random_ops import shape_tensor

__all__ = ["stateless_categorical", "stateless_multinomial", "stateless_normal", "stateless_truncated_normal",
           "stateless_uniform"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _seed(seed, graph) -> Tensor:
    s = convert_to_tensor(seed, graph=graph)
    if s.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"stateless random op: seed must be int32 or int64, got {s.dtype}")
    return s


def _float_dtype(dtype, what: str) -> np.dtype:
    dt = as_numpy_dtype(dtype)
    if dt not in _FLOATS:
        raise TypeError(f"{what}: dtype must be float32 or float64, got {dt}")
    return dt


def _draw(op_type: str, shape, seed, dtype) -> Tensor:
    from trainer.graph import get_default_graph

    g = get_default_graph()
    return make_op(op_type, [shape_tensor(shape, g), _seed(seed, g)], {"dtype": dtype.name},
                   domain=TRAINER_DOMAIN).outputs[0]


def stateless_uniform(shape, seed, minval=0, maxval=None, dtype=np.float32, name=None) -> Tensor:
    """U[minval, maxval) as a function of ``seed``; integer dtypes need both bounds."""
    dt = as_numpy_dtype(dtype)
    if dt in (np.dtype(np.int32), np.dtype(np.int64)):
        if maxval is None:
            raise ValueError("stateless_uniform: Must specify maxval for integer dtype")
        from trainer.graph import get_default_graph

        g = get_default_graph()
        bounds = [constant(np.asarray(v, dt), graph=g) if not isinstance(v, Tensor) else cast(v, dt)
                  for v in (minval, maxval)]
        return make_op("StatelessRandomUniformInt", [shape_tensor(shape, g), _seed(seed, g), *bounds],
                       {"dtype": dt.name}, domain=TRAINER_DOMAIN, name=name).outputs[0]
    dt = _float_dtype(dt, "stateless_uniform")
    u = _draw("StatelessRandomUniform", shape, seed, dt)
    maxval = 1.0 if maxval is None else maxval
    return ops.add(ops.multiply(u, ops.subtract(convert_to_tensor(maxval, dtype=dt), minval)), minval, name=name)


def stateless_normal(shape, seed, mean=0.0, stddev=1.0, dtype=np.float32, name=None) -> Tensor:
    """N(mean, stddev^2) as a function of ``seed``."""
    z = _draw("StatelessRandomNormal", shape, seed, _float_dtype(dtype, "stateless_normal"))
    return ops.add(ops.multiply(z, stddev), mean, name=name)


def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0, dtype=np.float32, name=None) -> Tensor:
    """N(mean, stddev^2) within 2 stddev of the mean, as a function of ``seed``."""
    z = _draw("StatelessTruncatedNormal", shape, seed, _float_dtype(dtype, "stateless_truncated_normal"))
    return ops.add(ops.multiply(z, stddev), mean, name=name)


def stateless_multinomial(logits, num_samples, seed, output_dtype=np.int64, name=None) -> Tensor:
    """``num_samples`` class ids per row of ``logits`` [batch, classes], as a function of ``seed``."""
    logits = convert_to_tensor(logits)
    out = as_numpy_dtype(output_dtype)
    if out not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"stateless_multinomial: output_dtype must be int32 or int64, got {out}")
    n = num_samples if isinstance(num_samples, Tensor) else constant(np.asarray(num_samples, np.int32),
                                                                         graph=logits.graph)
    return make_op("StatelessMultinomial", [logits, n, _seed(seed, logits.graph)], {"output_dtype": out.name},
                   domain=TRAINER_DOMAIN, name=name).outputs[0]


def stateless_categorical(logits, num_samples, seed, dtype=np.int64, name=None) -> Tensor:
    """``tf.random.stateless_categorical``: stateless_multinomial with its output type named ``dtype``."""
    return stateless_multinomial(logits, num_samples, seed, output_dtype=dtype, name=name)
