"""Layers: functions that create their variables and return the output tensor (NCHW for images)."""

from __future__ import annotations

import math

import numpy as np

from trainer import init, nn
from trainer.graph import TRAINER_DOMAIN, GraphKeys, get_default_graph
from trainer.ops import convert_to_tensor, make_op, multiply, subtract
from trainer.variables import Variable

__all__ = ["average_pooling2d", "batch_normalization", "conv2d", "dense", "dropout", "embedding", "flatten",
           "layer_norm", "max_pooling2d"]

_ACTIVATIONS = {None: None, "relu": nn.relu, "tanh": nn.tanh, "sigmoid": nn.sigmoid, "softmax": nn.softmax}


def _activate(y, activation):
    fn = _ACTIVATIONS[activation] if isinstance(activation, str) or activation is None else activation
    return y if fn is None else fn(y)


def dense(x, units: int, activation=None, use_bias: bool = True, name: str = "dense",
          kernel_initializer=init.glorot_uniform):
    """``activation(x @ W + b)``; a 2-D input becomes one fused Gemm."""
    x = convert_to_tensor(x)
    g = x.graph
    with g.as_default(), g.name_scope(name):
        fan_in = x.shape[-1]
        w = Variable(kernel_initializer((fan_in, units), dtype=x.dtype), name="kernel")
        b = Variable(np.zeros((units,), x.dtype), name="bias") if use_bias else None
        if len(x.shape) == 2:
            y = make_op("Gemm", [x, w, b]).outputs[0]
        else:
            y = make_op("MatMul", [x, w]).outputs[0]
            if b is not None:
                y = y + b
        return _activate(y, activation)


def conv2d(x, filters: int, kernel_size, strides=(1, 1), padding: str = "same", activation=None,
           use_bias: bool = True, name: str = "conv2d", kernel_initializer=init.he_normal):
    """Convolution of NCHW ``x`` with ``filters`` kernels of ``kernel_size``."""
    x = convert_to_tensor(x)
    ks = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    g = x.graph
    with g.as_default(), g.name_scope(name):
        w = Variable(kernel_initializer((filters, x.shape[1]) + ks, dtype=x.dtype), name="kernel")
        b = Variable(np.zeros((filters,), x.dtype), name="bias") if use_bias else None
        y = nn.conv2d(x, w, b, strides=strides, padding=padding)
        return _activate(y, activation)


def max_pooling2d(x, pool_size, strides=None, padding: str = "valid", name=None):
    ps = (pool_size, pool_size) if isinstance(pool_size, int) else tuple(pool_size)
    st = strides if strides is None or not isinstance(strides, int) else (strides, strides)
    return nn.max_pool(x, ps, st, padding, name=name)


def average_pooling2d(x, pool_size, strides=None, padding: str = "valid", name=None):
    ps = (pool_size, pool_size) if isinstance(pool_size, int) else tuple(pool_size)
    st = strides if strides is None or not isinstance(strides, int) else (strides, strides)
    return nn.avg_pool(x, ps, st, padding, name=name)


def flatten(x, name=None):
    return make_op("Flatten", [x], {"axis": 1}, name=name).outputs[0]


def batch_normalization(x, training: bool, momentum: float = 0.99, epsilon: float = 1e-3, name="batch_norm"):
    """Normalize over all axes but 1 (channels). ``training=True`` uses batch statistics and adds
    moving-average updates to the UPDATE_OPS collection; ``False`` uses the moving averages."""
    x = convert_to_tensor(x)
    g = x.graph
    c = x.shape[1]
    with g.as_default(), g.name_scope(name):
        gamma = Variable(np.ones((c,), x.dtype), name="gamma")
        beta = Variable(np.zeros((c,), x.dtype), name="beta")
        mm = Variable(np.zeros((c,), x.dtype), trainable=False, name="moving_mean",
                      collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.MOVING_AVERAGE_VARIABLES])
        mv = Variable(np.ones((c,), x.dtype), trainable=False, name="moving_variance",
                      collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.MOVING_AVERAGE_VARIABLES])
        if not training:
            return make_op("BatchNormalization", [x, gamma, beta, mm, mv], {"epsilon": epsilon}, num_outputs=1).outputs[0]
        y, mean, var, _ = make_op("BatchNormTraining", [x, gamma, beta], {"epsilon": epsilon},
                                  domain=TRAINER_DOMAIN).outputs
        n = None if x.shape is None else math.prod(d or 0 for d in x.shape) // max(c, 1)
        unbiased = var if not n or n < 2 else multiply(var, n / (n - 1.0))
        decay = 1.0 - momentum
        upd_m = mm.assign_sub(multiply(subtract(mm, mean), decay))
        upd_v = mv.assign_sub(multiply(subtract(mv, unbiased), decay))
        g.add_to_collection(GraphKeys.UPDATE_OPS, upd_m.node)
        g.add_to_collection(GraphKeys.UPDATE_OPS, upd_v.node)
        return y


def layer_norm(x, epsilon: float = 1e-5, name="layer_norm"):
    """Normalize over the last axis, with a learned scale and shift."""
    x = convert_to_tensor(x)
    g = x.graph
    d = x.shape[-1]
    with g.as_default(), g.name_scope(name):
        gamma = Variable(np.ones((d,), x.dtype), name="gamma")
        beta = Variable(np.zeros((d,), x.dtype), name="beta")
        return make_op("LayerNormalization", [x, gamma, beta], {"axis": -1, "epsilon": epsilon},
                       num_outputs=1).outputs[0]


def dropout(x, rate: float, training: bool = True, name=None):
    return nn.dropout(x, rate, name=name) if training and rate > 0 else x


def embedding(ids, vocab_size: int, dim: int, name: str = "embedding"):
    """Rows of a (vocab_size, dim) table at ``ids``; trains through sparse (IndexedSlices) gradients."""
    g = get_default_graph()
    with g.name_scope(name):
        table = Variable(init.uniform((vocab_size, dim)), name="embeddings")
        return nn.embedding_lookup(table, ids)
