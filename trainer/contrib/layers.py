"""``tf.contrib.layers``: initializers, regularizers and the two layers tutorials use most."""

from __future__ import annotations

import numpy as np

from trainer import initializers
from trainer.array_ops import reduce_sum
from trainer.initializers import variance_scaling_initializer, xavier_initializer
from trainer.ops import add_n, convert_to_tensor, make_op, multiply
from trainer.variable_scopes import get_variable, variable_scope

__all__ = [
    "apply_regularization", "flatten", "fully_connected", "l1_regularizer", "l2_regularizer",
    "sum_regularizer", "variance_scaling_initializer", "xavier_initializer", "xavier_initializer_conv2d",
]

xavier_initializer_conv2d = xavier_initializer


def _regularizer(name: str, scale: float, penalty):
    """A regularizer: ``penalty(w)`` for a weight tensor ``w``, None where ``scale`` is 0."""
    if scale < 0:
        raise ValueError(f"{name}: scale must be >= 0, got {scale}")

    def regularize(weights):
        if scale == 0:
            return None
        return penalty(convert_to_tensor(weights))

    return regularize


def l2_regularizer(scale: float, scope=None):
    """``w -> scale * sum(w**2) / 2`` (TensorFlow's l2_loss scaled)."""
    return _regularizer("l2_regularizer", scale, lambda w: multiply(
        reduce_sum(multiply(w, w)), np.asarray(0.5 * scale, w.dtype), name="l2_regularizer"))


def l1_regularizer(scale: float, scope=None):
    """``w -> scale * sum(|w|)``."""
    return _regularizer("l1_regularizer", scale, lambda w: multiply(
        reduce_sum(make_op("Abs", [w]).outputs[0]), np.asarray(scale, w.dtype), name="l1_regularizer"))


def sum_regularizer(regularizer_list, scope=None):
    def regularize(weights):
        parts = [p for p in (r(weights) for r in regularizer_list) if p is not None]
        return add_n(parts) if parts else None

    return regularize


def apply_regularization(regularizer, weights_list=None):
    """The sum of ``regularizer`` over ``weights_list`` (default: all trainable variables)."""
    from trainer.variables import trainable_variables

    parts = [p for p in (regularizer(w) for w in (weights_list or trainable_variables())) if p is not None]
    if not parts:
        raise ValueError("apply_regularization: the regularizer gave no penalty for any weight")
    return add_n(parts)


def flatten(inputs, outputs_collections=None, scope=None):
    """[batch, ...] to [batch, everything else]."""
    return make_op("Flatten", [inputs], {"axis": 1}).outputs[0]


_RELU_DEFAULT = object()  # TensorFlow's default activation_fn is relu; None means linear


def fully_connected(inputs, num_outputs: int, activation_fn=_RELU_DEFAULT, normalizer_fn=None, normalizer_params=None,
                    weights_initializer=None, weights_regularizer=None, biases_initializer=initializers.Zeros,
                    biases_regularizer=None, reuse=None, variables_collections=None, outputs_collections=None,
                    trainable: bool = True, scope=None):
    """``activation_fn(inputs @ weights + biases)``; TensorFlow's default activation is relu."""
    from trainer.nn import relu

    x = convert_to_tensor(inputs)
    act = relu if activation_fn is _RELU_DEFAULT else activation_fn
    with variable_scope(scope, default_name="fully_connected", reuse=reuse):
        w = get_variable("weights", [x.shape[-1], num_outputs], dtype=x.dtype,
                         initializer=weights_initializer or initializers.GlorotUniform(),
                         regularizer=weights_regularizer, trainable=trainable)
        y = make_op("MatMul", [x, w]).outputs[0]
        if normalizer_fn is not None:
            y = normalizer_fn(y, **(normalizer_params or {}))
        elif biases_initializer is not None:
            b = get_variable("biases", [num_outputs], dtype=x.dtype, initializer=biases_initializer,
                             regularizer=biases_regularizer, trainable=trainable)
            y = make_op("Add", [y, b]).outputs[0]
        return y if act is None else act(y)



def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.layers", name, globals())
