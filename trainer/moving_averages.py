"""``tf.train.ExponentialMovingAverage``: shadow variables that track others' moving averages.

``apply(var_list)`` makes one non-trainable shadow per variable, starting at the variable's
initial value, and returns the op that moves every shadow: ``shadow -= (1 - decay) * (shadow - var)``,
with ``decay = min(decay, (1 + n) / (10 + n))`` when ``num_updates`` (usually the global step) is given.
Evaluation code reads ``average(var)``, or restores the averages into the variables themselves
with ``Saver(ema.variables_to_restore())``, as TF1's evaluation scripts do.
"""

from __future__ import annotations

import numpy as np

from trainer.graph import GraphKeys
from trainer.ops import cast, constant, convert_to_tensor, group, identity, make_op, multiply, subtract
from trainer.variables import Variable

__all__ = ["ExponentialMovingAverage"]


class ExponentialMovingAverage:
    def __init__(self, decay: float, num_updates=None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage"):
        if zero_debias:
            raise ValueError("ExponentialMovingAverage: zero_debias=True is not supported")
        self.decay, self.num_updates, self.name = decay, num_updates, name
        self._averages: dict = {}

    def average_name(self, var) -> str:
        return f"{var.op.name}/{self.name}"

    def average(self, var):
        """The shadow of ``var`` (None if ``apply`` has not seen it)."""
        return self._averages.get(var)

    def variables_to_restore(self, moving_avg_variables=None) -> dict:
        """``{checkpoint name: variable}`` restoring each averaged variable (default: the trainable
        ones and those ``apply`` averaged) from its shadow's name and every other global variable
        from its own op name, as TensorFlow's: ``Saver(ema.variables_to_restore())`` in an
        evaluation graph loads the averages into the model's variables."""
        from trainer.variables import global_variables, trainable_variables

        chosen = list(moving_avg_variables) if moving_avg_variables is not None else (
            trainable_variables() + [v for v in self._averages if not v.trainable])
        names = {self.average_name(v): v for v in chosen}
        for v in global_variables():
            if v not in chosen and v.op.name not in names:
                names[v.op.name] = v
        return names

    def _decay(self, dtype):
        decay = constant(np.asarray(self.decay, dtype))
        if self.num_updates is None:
            return decay
        n = cast(convert_to_tensor(self.num_updates), dtype)
        ramp = make_op("Div", [n + 1.0, n + 10.0]).outputs[0]
        return make_op("Min", [decay, ramp]).outputs[0]

    def apply(self, var_list=None):
        """Create missing shadows and return one op updating all of them."""
        from trainer.variables import trainable_variables

        var_list = list(var_list) if var_list is not None else trainable_variables()
        if not var_list:
            raise ValueError("ExponentialMovingAverage.apply: no variables to average")
        graph = var_list[0].graph
        updates = []
        with graph.as_default():
            for var in var_list:
                if var.dtype.kind != "f":
                    raise TypeError(f"ExponentialMovingAverage: {var.name} is {var.dtype.name}, not a float")
                if var not in self._averages:
                    with graph.control_dependencies(None):  # apply() is often built after the train op
                        start = identity(var.initializer.outputs[0])  # the value the initializer set
                    with graph.name_scope("/"):
                        self._averages[var] = Variable(
                            start, trainable=False, name=self.average_name(var),
                            collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.MOVING_AVERAGE_VARIABLES])
            with graph.name_scope(self.name):
                for var in var_list:
                    shadow = self._averages[var]
                    one_minus = subtract(np.asarray(1, var.dtype), self._decay(var.dtype))
                    updates.append(shadow.assign_sub(multiply(subtract(shadow, var), one_minus)))
                return group(*updates, name="update")
