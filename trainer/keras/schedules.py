"""``tf.keras.optimizers.schedules``: learning rates as functions of the optimizer's step, built on
tf.train's decay functions. An optimizer given one computes its rate from ``iterations`` each step."""

from __future__ import annotations

import trainer as tf

__all__ = ["ExponentialDecay", "InverseTimeDecay", "LearningRateSchedule", "PiecewiseConstantDecay",
           "PolynomialDecay", "deserialize", "serialize"]


class LearningRateSchedule:
    """``schedule(step) -> learning rate`` (a tensor); ``get_config`` lists the constructor's arguments."""

    def __call__(self, step):
        raise NotImplementedError

    def get_config(self) -> dict:
        from trainer.keras.serialization import config_from_attributes

        return config_from_attributes(self)

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)


class ExponentialDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float, staircase: bool = False,
                 name=None):
        self.initial_learning_rate, self.decay_steps, self.decay_rate = initial_learning_rate, decay_steps, decay_rate
        self.staircase, self.name = staircase, name

    def __call__(self, step):
        return tf.train.exponential_decay(self.initial_learning_rate, step, self.decay_steps, self.decay_rate,
                                          self.staircase)


class InverseTimeDecay(ExponentialDecay):
    def __call__(self, step):
        return tf.train.inverse_time_decay(self.initial_learning_rate, step, self.decay_steps, self.decay_rate,
                                           self.staircase)


class PolynomialDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate: float, decay_steps: int, end_learning_rate: float = 0.0001,
                 power: float = 1.0, cycle: bool = False, name=None):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.end_learning_rate, self.power, self.cycle, self.name = end_learning_rate, power, cycle, name

    def __call__(self, step):
        return tf.train.polynomial_decay(self.initial_learning_rate, step, self.decay_steps, self.end_learning_rate,
                                         self.power, self.cycle)


class PiecewiseConstantDecay(LearningRateSchedule):
    def __init__(self, boundaries, values, name=None):
        if len(values) != len(boundaries) + 1:
            raise ValueError("The length of boundaries should be 1 less than the length of values")
        self.boundaries, self.values, self.name = list(boundaries), list(values), name

    def __call__(self, step):
        return tf.train.piecewise_constant(step, self.boundaries, self.values)


SCHEDULES = {cls.__name__: cls for cls in (ExponentialDecay, InverseTimeDecay, PolynomialDecay,
                                          PiecewiseConstantDecay)}


def serialize(schedule) -> dict:
    return {"class_name": type(schedule).__name__, "config": schedule.get_config()}


def deserialize(config, custom_objects=None) -> "LearningRateSchedule":
    from trainer.keras.serialization import deserialize as deserialize_object

    return deserialize_object(config, SCHEDULES, "learning rate schedule", custom_objects)
