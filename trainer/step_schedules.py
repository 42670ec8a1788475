"""``tf.train.noisy_linear_cosine_decay`` and ``tf.train.assert_global_step``: the global-step
helpers of ``tf.train`` that ``trainer/train.py``'s schedules leave out."""

from __future__ import annotations

import numpy as np

from trainer.ops import cast, constant, convert_to_tensor, make_op, multiply

__all__ = ["assert_global_step", "noisy_linear_cosine_decay"]


def noisy_linear_cosine_decay(learning_rate, global_step, decay_steps, initial_variance=1.0, variance_decay=0.55,
                              num_periods=0.5, alpha=0.0, beta=0.001, name=None):
    """TF's formula: with t = min(step, decay_steps), linear = (decay_steps - t) / decay_steps,
    eps ~ N(0, initial_variance / (1 + t)^variance_decay) drawn each run and
    cosine = (1 + cos(2 pi num_periods t / decay_steps)) / 2, the rate is
    ``lr * ((alpha + linear + eps) * cosine + beta)``."""
    from trainer.random_ops import random_normal
    from trainer.train import rate_tensor

    if global_step is None:
        raise ValueError("global_step is required for noisy_linear_cosine_decay.")
    if decay_steps <= 0:
        raise ValueError(f"noisy_linear_cosine_decay: decay_steps must be positive, got {decay_steps}")
    step = cast(convert_to_tensor(global_step), np.float32)
    step = make_op("Min", [step, constant(np.float32(decay_steps))]).outputs[0]
    linear = (float(decay_steps) - step) / float(decay_steps)
    variance = float(initial_variance) / make_op("Pow", [step + 1.0, constant(np.float32(variance_decay))]).outputs[0]
    noisy = linear + random_normal([]) * make_op("Sqrt", [variance]).outputs[0]
    cosine = (make_op("Cos", [step * float(2.0 * np.pi * num_periods / decay_steps)]).outputs[0] + 1.0) * 0.5
    return multiply(rate_tensor(learning_rate), (noisy + float(alpha)) * cosine + float(beta), name=name)


def assert_global_step(global_step_tensor) -> None:
    """A TypeError unless ``global_step_tensor`` is an integer scalar Variable or Tensor."""
    from trainer.graph import Tensor
    from trainer.variables import Variable

    if not isinstance(global_step_tensor, (Variable, Tensor)):
        raise TypeError(f'Existing "global_step" must be a Variable or Tensor: {global_step_tensor!r}.')
    dtype = np.dtype(global_step_tensor.dtype)
    if dtype.kind not in "iu":
        raise TypeError(f'Existing "global_step" does not have integer type: {dtype}')
    shape = global_step_tensor.shape
    if shape is not None and len(shape) != 0 and None not in shape:
        raise TypeError(f'Existing "global_step" is not scalar: {shape}')
