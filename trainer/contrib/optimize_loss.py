"""``tf.contrib.layers.optimize_loss``: one call from a loss to a training op, the way tf.learn-era
models (seq2seq tutorials, contrib estimators) build theirs.

The optimizer may be a name ("Adam", "SGD", ...), an Optimizer subclass or a factory taking the
learning rate, or an Optimizer instance. Around the optimizer's own compute/apply it adds what
TensorFlow 1.x's does: UPDATE_OPS run before the loss, a learning-rate variable and decay,
gradient noise and per-variable multipliers, clipping by global norm (or by a callable on the
(gradient, variable) pairs), the summaries asked for, and the loss returned behind the update.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer import summary
from trainer.array_ops import global_norm
from trainer.gradients.registry import IndexedSlices
from trainer.graph import GraphKeys, Tensor, control_dependencies, get_default_graph
from trainer.initializers import constant_initializer
from trainer.ops import convert_to_tensor, identity, multiply, shape
from trainer.random_ops import random_normal
from trainer.train import (AdagradOptimizer, AdamOptimizer, FtrlOptimizer, GradientDescentOptimizer, MomentumOptimizer,
                           Optimizer, RMSPropOptimizer, assert_global_step, clip_by_global_norm, get_global_step)
from trainer.variable_scopes import get_variable, variable_scope
from trainer.variables import trainable_variables

__all__ = ["OPTIMIZER_CLS_NAMES", "OPTIMIZER_SUMMARIES", "optimize_loss"]

OPTIMIZER_CLS_NAMES: dict[str, Callable[..., Optimizer]] = {
    "Adagrad": AdagradOptimizer,
    "Adam": AdamOptimizer,
    "Ftrl": FtrlOptimizer,
    "Momentum": lambda learning_rate: MomentumOptimizer(learning_rate, momentum=0.9),
    "RMSProp": RMSPropOptimizer,
    "SGD": GradientDescentOptimizer,
}

OPTIMIZER_SUMMARIES = ("learning_rate", "loss", "gradients", "gradient_norm", "global_gradient_norm")


def optimize_loss(loss, global_step, learning_rate, optimizer, gradient_noise_scale=None, gradient_multipliers=None,
                  clip_gradients=None, learning_rate_decay_fn=None, update_ops=None, variables=None, name=None,
                  summaries=None, colocate_gradients_with_ops=False, increment_global_step=True) -> Tensor:
    """The loss tensor, given back only once the optimizer's update has run: fetch it to train one step
    (its value is the loss the gradients were taken of; see the module docstring)."""
    loss = convert_to_tensor(loss)
    if loss.shape is not None and len(loss.shape) != 0:
        raise ValueError(f"optimize_loss: loss must be a scalar, got shape {tuple(loss.shape)}")
    if global_step is None:
        global_step = get_global_step()
    else:
        assert_global_step(global_step)
    summaries = _summaries(summaries)
    with variable_scope(name, "OptimizeLoss", [loss, global_step]):
        if update_ops is None:
            update_ops = get_default_graph().get_collection(GraphKeys.UPDATE_OPS)
        if update_ops:
            with control_dependencies(list(update_ops)):
                loss = identity(loss)
        lr = _learning_rate(learning_rate)
        if lr is not None and learning_rate_decay_fn is not None:
            if global_step is None:
                raise ValueError("optimize_loss: learning_rate_decay_fn needs a global_step, and none was given or "
                                 "created (tf.train.get_or_create_global_step())")
            lr = learning_rate_decay_fn(lr, global_step)
            if "learning_rate" in summaries:
                summary.scalar("learning_rate", lr)
        opt = _optimizer(optimizer, lr, learning_rate is not None)
        pairs = opt.compute_gradients(loss, trainable_variables() if variables is None else variables,
                                      colocate_gradients_with_ops=colocate_gradients_with_ops)
        if gradient_noise_scale is not None:
            pairs = [(_with_noise(g, gradient_noise_scale), v) for g, v in pairs]
        if gradient_multipliers is not None:
            pairs = _multiplied(pairs, gradient_multipliers)
        if {"global_gradient_norm", "gradient_norm"} & summaries:
            summary.scalar("global_norm/gradient_norm", global_norm([g for g, _ in pairs]))
        if clip_gradients is not None:
            pairs = _clipped(pairs, clip_gradients)
            if {"global_gradient_norm", "gradient_norm"} & summaries:
                summary.scalar("global_norm/clipped_gradient_norm", global_norm([g for g, _ in pairs]))
        if "loss" in summaries:
            summary.scalar("loss", loss)
        _gradient_summaries(pairs, summaries)
        update = opt.apply_gradients(pairs, global_step=global_step if increment_global_step else None, name="train")
        with control_dependencies([update]):
            return identity(loss)


def _summaries(requested) -> set[str]:
    if requested is None:
        return {"loss", "learning_rate", "global_gradient_norm"}
    unknown = [s for s in requested if s not in OPTIMIZER_SUMMARIES]
    if unknown:
        raise ValueError(f"optimize_loss: summaries must be among {list(OPTIMIZER_SUMMARIES)}, got {unknown}")
    return set(requested)


def _learning_rate(learning_rate):
    """A scalar tensor as given, a float as a non-trainable ``learning_rate`` variable, or None."""
    if learning_rate is None:
        return None
    if isinstance(learning_rate, Tensor) or hasattr(learning_rate, "value"):
        shape = learning_rate.shape
        if shape is not None and len(shape) != 0:
            raise ValueError(f"optimize_loss: learning_rate must be a scalar, got shape {tuple(shape)}")
        return learning_rate
    if isinstance(learning_rate, (int, float)) and not isinstance(learning_rate, bool):
        if learning_rate < 0:
            raise ValueError(f"optimize_loss: learning_rate must be >= 0, got {learning_rate}")
        return get_variable("learning_rate", [], dtype=np.float32, trainable=False,
                            initializer=constant_initializer(float(learning_rate)))
    raise ValueError(f"optimize_loss: learning_rate must be a scalar Tensor or a float, got "
                     f"{type(learning_rate).__name__}")


def _optimizer(optimizer, lr, has_rate: bool) -> Optimizer:
    if isinstance(optimizer, Optimizer):
        return optimizer
    if isinstance(optimizer, str):
        if optimizer not in OPTIMIZER_CLS_NAMES:
            raise ValueError(f"optimize_loss: optimizer name must be one of {sorted(OPTIMIZER_CLS_NAMES)}, "
                             f"got {optimizer!r}")
        if lr is None:
            raise ValueError(f"optimize_loss: optimizer {optimizer!r} needs a learning_rate")
        return OPTIMIZER_CLS_NAMES[optimizer](learning_rate=lr)
    if isinstance(optimizer, type) and issubclass(optimizer, Optimizer):
        if lr is None:
            raise ValueError(f"optimize_loss: optimizer class {optimizer.__name__} needs a learning_rate")
        return optimizer(learning_rate=lr)
    if callable(optimizer):
        made = optimizer(lr) if has_rate else optimizer()
        if not isinstance(made, Optimizer):
            raise ValueError(f"optimize_loss: the optimizer function returned {type(made).__name__}, not an Optimizer")
        return made
    raise ValueError("optimize_loss: optimizer must be a name, an Optimizer subclass, an Optimizer or a function "
                     f"returning one, got {type(optimizer).__name__}")


def _values(gradient):
    return gradient.values if isinstance(gradient, IndexedSlices) else gradient


def _with_noise(gradient, scale: float):
    """The gradient plus zero-mean normal noise of standard deviation ``scale`` (None stays None)."""
    if gradient is None:
        return None
    values = _values(gradient)
    noisy = values + random_normal(shape(values), stddev=scale, dtype=values.dtype)
    return IndexedSlices(noisy, gradient.indices, gradient.dense_shape) if isinstance(gradient, IndexedSlices) else noisy


def _multiplied(pairs, multipliers: dict):
    """Each gradient whose variable (or variable name) ``multipliers`` lists, scaled by its factor."""
    by_name = {getattr(k, "name", k): float(v) for k, v in multipliers.items()}
    out = []
    for g, v in pairs:
        factor = by_name.get(v.name, by_name.get(v.name.split(":")[0]))
        if g is not None and factor is not None:
            scale = np.asarray(factor, dtype=_values(g).dtype)
            g = (IndexedSlices(multiply(g.values, scale), g.indices, g.dense_shape) if isinstance(g, IndexedSlices)
                 else multiply(g, scale))
        out.append((g, v))
    return out


def _clipped(pairs, clip_gradients):
    if isinstance(clip_gradients, (int, float)) and not isinstance(clip_gradients, bool):
        gradients, variables = zip(*pairs)
        clipped, _ = clip_by_global_norm(list(gradients), float(clip_gradients))
        return list(zip(clipped, variables))
    if callable(clip_gradients):
        return clip_gradients(pairs)
    raise ValueError(f"optimize_loss: clip_gradients must be a float or a callable, got {type(clip_gradients).__name__}")


def _gradient_summaries(pairs, summaries: set[str]) -> None:
    for g, v in pairs:
        if g is None:
            continue
        values = _values(g)
        label = v.name.replace(":", "_")
        if "gradients" in summaries:
            summary.histogram(f"gradients/{label}", values)
        if "gradient_norm" in summaries:
            summary.scalar(f"gradient_norm/{label}", global_norm([values]))
