"""More of ``tf.train``'s optimizers, composed from graph ops (no fused kernel of their own):
Adadelta, FTRL-Proximal, proximal gradient descent, proximal Adagrad and Adagrad dual averaging,
with TensorFlow 1.x's update rules.

Each update reads snapshots of its slots (``read_value``) before assigning them, so the rule sees
the old values exactly as TensorFlow's fused kernels do.
"""

from __future__ import annotations

import numpy as np

from trainer.gradients import IndexedSlices
from trainer.ops import cast, constant, convert_to_tensor, group, make_op, multiply, sqrt, subtract
from trainer.train import Optimizer, deduplicate_indexed_slices

__all__ = ["AdadeltaOptimizer", "AdagradDAOptimizer", "FtrlOptimizer", "ProximalAdagradOptimizer",
           "ProximalGradientDescentOptimizer"]


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


def _relu(x):
    return make_op("Relu", [x]).outputs[0]


def _row_update(var, grad, slots, rule):
    """Apply ``rule(g, var, *slots) -> [new var, *new slots]`` elementwise: to whole tensors for a
    dense gradient, to the touched rows only for IndexedSlices (duplicate rows summed first, as
    TF's ``_apply_sparse_duplicate_indices`` does). Every new value is computed from the old ones
    before any is written."""
    from trainer.state_ops import scatter_update

    targets = [var, *slots]
    graph = var.graph
    with graph.colocate_with(var.node):
        if isinstance(grad, IndexedSlices):
            values, indices = deduplicate_indexed_slices(grad, var)
            olds = [make_op("Gather", [t.read_value(), indices]).outputs[0] for t in targets]
            news = rule(values, *olds)
            with graph.control_dependencies(news):
                return group(*[scatter_update(t, indices, n) for t, n in zip(targets, news)])
        news = rule(grad, *[t.read_value() for t in targets])
        with graph.control_dependencies(news):
            return group(*[t.assign(n) for t, n in zip(targets, news)])


class ProximalAdagradOptimizer(Optimizer):
    """TF's ApplyProximalAdagrad (FOBOS with Adagrad's rate): accum += g^2; a = lr / sqrt(accum);
    v = var - a g; var = sign(v) max(|v| - a l1, 0) / (1 + a l2)."""

    name = "ProximalAdagrad"

    def __init__(self, learning_rate, initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False, name="ProximalAdagrad"):
        if initial_accumulator_value <= 0:
            raise ValueError(f"ProximalAdagradOptimizer: initial_accumulator_value must be positive, "
                             f"got {initial_accumulator_value}")
        super().__init__(learning_rate, use_locking, name)
        self.initial, self.l1, self.l2 = initial_accumulator_value, l1_regularization_strength, l2_regularization_strength

    def _apply(self, grad, var):
        accum = self._slot(var, "accumulator", self.initial)
        l1, l2 = float(self.l1), float(self.l2)

        def rule(g, v, acc):
            new_acc = acc + g * g
            rate = self._lr * make_op("Reciprocal", [sqrt(new_acc)]).outputs[0]
            prox = v - g * rate
            if l1 > 0:
                new_v = _sign(prox) * _relu(_abs(prox) - rate * l1) / (rate * l2 + 1.0)
            else:
                new_v = prox / (rate * l2 + 1.0)
            return [new_v, new_acc]

        return _row_update(var, grad, [accum], rule)


class AdagradDAOptimizer(Optimizer):
    """Adagrad dual averaging (TF's ApplyAdagradDA), for sparse linear models: with g, gg the
    accumulated gradients and squared gradients and T = global_step + 1,
    var = lr sign(-g) max(|g| - l1 T, 0) / (l2 T lr + sqrt(gg))."""

    name = "AdagradDA"

    def __init__(self, learning_rate, global_step, initial_gradient_squared_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, use_locking=False,
                 name="AdagradDA"):
        if initial_gradient_squared_accumulator_value <= 0:
            raise ValueError(f"AdagradDAOptimizer: initial_gradient_squared_accumulator_value must be positive, "
                             f"got {initial_gradient_squared_accumulator_value}")
        if global_step is None:
            raise ValueError("AdagradDAOptimizer: global_step is required (pass tf.train.get_or_create_global_step())")
        super().__init__(learning_rate, use_locking, name)
        self.global_step = global_step
        self.initial = initial_gradient_squared_accumulator_value
        self.l1, self.l2 = l1_regularization_strength, l2_regularization_strength

    def _apply(self, grad, var):
        g_acc = self._slot(var, "gradient_accumulator")
        gg_acc = self._slot(var, "gradient_squared_accumulator", self.initial)
        step = convert_to_tensor(self.global_step)
        t = cast(step + constant(np.asarray(1, step.dtype)), var.dtype)
        l1, l2 = float(self.l1), float(self.l2)

        def rule(g, v, acc, sq_acc):
            new_acc, new_sq = acc + g, sq_acc + g * g
            denom = t * self._lr * l2 + sqrt(new_sq)
            if l1 > 0:
                new_v = self._lr * _sign(-new_acc) * _relu(_abs(new_acc) - t * l1) / denom
            else:
                new_v = -new_acc * self._lr / denom
            return [new_v, new_acc, new_sq]

        return _row_update(var, grad, [g_acc, gg_acc], rule)
