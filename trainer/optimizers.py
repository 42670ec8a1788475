"""More of ``tf.train``'s optimizers, composed from graph ops (no fused kernel of their own):
Adadelta, FTRL-Proximal and proximal gradient descent, with TensorFlow 1.x's update rules.

Each update reads snapshots of its slots (``read_value``) before assigning them, so the rule sees
the old values exactly as TensorFlow's fused kernels do.
"""

from __future__ import annotations

import numpy as np

from trainer.ops import constant, group, make_op, multiply, sqrt, subtract
from trainer.train import Optimizer

__all__ = ["AdadeltaOptimizer", "FtrlOptimizer", "ProximalGradientDescentOptimizer"]


def _sign(x):
    return make_op("Sign", [x]).outputs[0]


def _abs(x):
    return make_op("Abs", [x]).outputs[0]


class AdadeltaOptimizer(Optimizer):
    """accum = rho accum + (1-rho) g^2; update = sqrt(accum_update + eps) / sqrt(accum + eps) g;
    accum_update = rho accum_update + (1-rho) update^2; var -= lr update."""

    name = "Adadelta"

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False, name="Adadelta"):
        super().__init__(learning_rate, use_locking, name)
        self.rho, self.epsilon = rho, epsilon

    def _apply(self, grad, var):
        g = self._dense(grad)
        dt = var.dtype
        rho, eps = constant(np.asarray(self.rho, dt)), constant(np.asarray(self.epsilon, dt))
        accum, accum_update = self._slot(var, "accum"), self._slot(var, "accum_update")
        new_accum = accum.assign(rho * accum.read_value() + (1.0 - rho) * g * g)
        update = sqrt(accum_update.read_value() + eps) / sqrt(new_accum + eps) * g
        graph = var.graph
        with graph.control_dependencies([update]):
            new_update = accum_update.assign(rho * accum_update.read_value() + (1.0 - rho) * update * update)
        with graph.control_dependencies([new_update]):
            return var.assign_sub(multiply(update, self._lr))


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (McMahan et al. 2013), TensorFlow's ApplyFtrl rule with l1/l2 regularization."""

    name = "Ftrl"

    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, use_locking=False, name="Ftrl"):
        super().__init__(learning_rate, use_locking, name)
        if learning_rate_power > 0:
            raise ValueError(f"FtrlOptimizer: learning_rate_power must be <= 0, got {learning_rate_power}")
        self.power, self.initial = learning_rate_power, initial_accumulator_value
        self.l1, self.l2 = l1_regularization_strength, l2_regularization_strength

    def _apply(self, grad, var):
        g = self._dense(grad)
        dt = var.dtype
        accum, linear = self._slot(var, "accum", self.initial), self._slot(var, "linear")
        neg_power = constant(np.asarray(-self.power, dt))
        old_accum = accum.read_value()
        new_accum = old_accum + g * g
        sigma = (make_op("Pow", [new_accum, neg_power]).outputs[0]
                 - make_op("Pow", [old_accum, neg_power]).outputs[0]) / self._lr
        new_linear = linear.read_value() + g - sigma * var.read_value()
        l1 = constant(np.asarray(self.l1, dt))
        quadratic = make_op("Pow", [new_accum, neg_power]).outputs[0] / self._lr + 2.0 * float(self.l2)
        shrunk = (_sign(new_linear) * l1 - new_linear) / quadratic
        value = make_op("Where", [make_op("Greater", [_abs(new_linear), l1]).outputs[0], shrunk,
                                  shrunk * 0.0]).outputs[0]
        graph = var.graph
        with graph.control_dependencies([value]):
            return group(accum.assign(new_accum), linear.assign(new_linear), var.assign(value))


class ProximalGradientDescentOptimizer(Optimizer):
    """var = sign(v) max(|v| - lr l1, 0) / (1 + lr l2) with v = var - lr g."""

    name = "ProximalGradientDescent"

    def __init__(self, learning_rate, l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="ProximalGradientDescent"):
        super().__init__(learning_rate, use_locking, name)
        self.l1, self.l2 = l1_regularization_strength, l2_regularization_strength

    def _apply(self, grad, var):
        g = self._dense(grad)
        prox = subtract(var.read_value(), multiply(g, self._lr))
        shrink = make_op("Relu", [_abs(prox) - self._lr * float(self.l1)]).outputs[0]
        return var.assign(_sign(prox) * shrink / (self._lr * float(self.l2) + 1.0))
