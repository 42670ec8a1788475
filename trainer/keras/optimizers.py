"""``tf.keras.optimizers``: Keras' update rules as graph ops (``get_updates(loss, params)``), with
Keras' defaults and formulas (RMSprop and Adagrad divide by ``sqrt(acc) + epsilon``, Adam's
``epsilon`` is 1e-7). ``lr`` is a variable, so callbacks (LearningRateScheduler, ReduceLROnPlateau)
change it between steps; ``decay`` scales it by ``1 / (1 + decay * iterations)``. A ``tf.train``
optimizer passed to ``compile`` is wrapped as ``TFOptimizer``."""

from __future__ import annotations

import numpy as np

import trainer as tf
from trainer.gradients import IndexedSlices
from trainer.keras import backend as K
from trainer.keras import schedules  # tf.keras.optimizers.schedules
from trainer.keras.serialization import deserialize as deserialize_object

__all__ = ["Adadelta", "Adagrad", "Adam", "Adamax", "Ftrl", "Nadam", "Optimizer", "RMSprop", "SGD", "TFOptimizer",
           "deserialize", "get", "serialize"]


def _dense(grad):
    return grad.to_dense() if isinstance(grad, IndexedSlices) else grad


class Optimizer:
    """Subclasses define ``rule(p, g, state) -> (new_p, [(slot, new value)])`` and their slots."""

    slot_names: tuple = ()
    arguments: tuple = ()

    def __init__(self, learning_rate=None, lr=None, decay: float = 0.0, clipnorm=None, clipvalue=None,
                 default_lr: float = 0.001, **kwargs):
        allowed = {"name", "epsilon"}
        unknown = set(kwargs) - allowed
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument(s) {sorted(unknown)}")
        rate = learning_rate if learning_rate is not None else lr if lr is not None else default_lr
        # a LearningRateSchedule computes the rate from the step each update (the lr variable is then unused)
        self.schedule = rate if isinstance(rate, schedules.LearningRateSchedule) else None
        self.initial_lr = 0.0 if self.schedule is not None else float(rate)
        self.clipnorm, self.clipvalue = clipnorm, clipvalue
        self.initial_decay = float(decay)
        self.state: dict = {}  # graph -> {"iterations", "lr", "decay"} variables
        self.weights: list = []

    def _state_variable(self, name: str):
        """The optimizer's ``iterations``/``lr``/``decay`` variable in the default graph, made on first use
        (an optimizer may be made before the graph its model lives in)."""
        graph = tf.get_default_graph()
        if graph not in self.state:
            with graph.as_default(), graph.name_scope(type(self).__name__ + "/"):
                self.state[graph] = {
                    "iterations": tf.Variable(np.asarray(0, np.int64), trainable=False, name="iterations"),
                    "lr": tf.Variable(np.asarray(self.initial_lr, np.float32), trainable=False, name="lr"),
                    "decay": tf.Variable(np.asarray(self.initial_decay, np.float32), trainable=False,
                                         name="decay")}
        return self.state[graph][name]

    iterations = property(lambda self: self._state_variable("iterations"))
    lr = learning_rate = property(lambda self: self._state_variable("lr"))
    decay = property(lambda self: self._state_variable("decay"))

    def get_gradients(self, loss, params):
        grads = [_dense(g) for g in tf.gradients(loss, params)]
        missing = [p.op.name for p, g in zip(params, grads) if g is None]
        if missing:
            raise ValueError(f"An operation has `None` for gradient: the loss does not depend on {missing}. Please "
                             "make sure that all of your ops have a gradient defined (i.e. are differentiable).")
        if self.clipnorm is not None and self.clipnorm > 0:
            grads, _ = tf.clip_by_global_norm(grads, self.clipnorm)
        if self.clipvalue is not None and self.clipvalue > 0:
            grads = [tf.clip_by_value(g, -self.clipvalue, self.clipvalue) for g in grads]
        return grads

    def current_lr(self):
        if self.schedule is not None:
            return tf.cast(self.schedule(self.iterations), tf.float32)
        if not self.initial_decay:
            return self.lr.as_tensor()
        return self.lr * (1.0 / (1.0 + self.decay * tf.cast(self.iterations, tf.float32)))

    def slot(self, p, name: str):
        with tf.name_scope(type(self).__name__):
            v = tf.Variable(np.zeros(tuple(p.shape), np.dtype(p.dtype)), trainable=False,
                            name=p.op.name.replace("/", "_") + "_" + name)
        self.weights.append(v)
        return v

    def get_updates(self, loss, params) -> list:
        """Every new value is computed before any variable is assigned (the reads of one step see one
        state): the assignments wait on all of them."""
        grads = self.get_gradients(loss, params)
        t = tf.cast(self.iterations, tf.float32) + 1.0
        lr = self.current_lr()
        self.prepare(t)
        new_values = list(self.extra_new_values())
        for p, g in zip(params, grads):
            state = {name: self.slot(p, name) for name in self.slot_names}
            new_p, slot_values = self.rule(p, g, state, lr, t)
            if getattr(p, "constraint", None) is not None:
                new_p = p.constraint(new_p)
            new_values += slot_values + [(p, new_p)]
        with tf.control_dependencies([value for _, value in new_values]):
            return [tf.assign(var, value) for var, value in new_values] + \
                [tf.assign_add(self.iterations, np.asarray(1, np.int64))]

    def prepare(self, t) -> None:
        """Per-step quantities shared by every parameter's rule (Nadam's momentum schedule)."""

    def extra_new_values(self) -> list:
        """(variable, new value) pairs besides the parameters and their slots."""
        return []

    def rule(self, p, g, state: dict, lr, t):
        raise NotImplementedError

    def get_config(self) -> dict:
        rate = schedules.serialize(self.schedule) if self.schedule is not None else float(K.get_value(self.lr))
        config = {"lr": rate, "decay": float(K.get_value(self.decay))}
        config.update({name: getattr(self, name) for name in self.arguments})
        if self.clipnorm is not None:
            config["clipnorm"] = self.clipnorm
        if self.clipvalue is not None:
            config["clipvalue"] = self.clipvalue
        return config

    @classmethod
    def from_config(cls, config: dict):
        if isinstance(config.get("lr"), dict):
            config = {**config, "lr": schedules.deserialize(config["lr"])}
        return cls(**config)


class SGD(Optimizer):
    arguments = ("momentum", "nesterov")

    def __init__(self, learning_rate=None, momentum: float = 0.0, decay: float = 0.0, nesterov: bool = False,
                 lr=None, **kwargs):
        super().__init__(learning_rate, lr, decay, default_lr=0.01, **kwargs)
        self.momentum, self.nesterov = float(momentum), nesterov
        self.slot_names = ("moment",) if self.momentum else ()

    def rule(self, p, g, state, lr, t):
        if not self.momentum:
            return p - lr * g, []
        v = self.momentum * state["moment"] - lr * g
        new_p = p + self.momentum * v - lr * g if self.nesterov else p + v
        return new_p, [(state["moment"], v)]


class RMSprop(Optimizer):
    arguments = ("rho", "epsilon")
    slot_names = ("accumulator",)

    def __init__(self, learning_rate=None, rho: float = 0.9, epsilon=None, decay: float = 0.0, lr=None, **kwargs):
        super().__init__(learning_rate, lr, decay, default_lr=0.001, **kwargs)
        self.rho, self.epsilon = float(rho), K.epsilon() if epsilon is None else float(epsilon)

    def rule(self, p, g, state, lr, t):
        a = self.rho * state["accumulator"] + (1.0 - self.rho) * tf.square(g)
        return p - lr * g / (tf.sqrt(a) + self.epsilon), [(state["accumulator"], a)]


class Adagrad(Optimizer):
    arguments = ("epsilon",)
    slot_names = ("accumulator",)

    def __init__(self, learning_rate=None, epsilon=None, decay: float = 0.0, lr=None, **kwargs):
        super().__init__(learning_rate, lr, decay, default_lr=0.01, **kwargs)
        self.epsilon = K.epsilon() if epsilon is None else float(epsilon)

    def rule(self, p, g, state, lr, t):
        a = state["accumulator"] + tf.square(g)
        return p - lr * g / (tf.sqrt(a) + self.epsilon), [(state["accumulator"], a)]


class Adadelta(Optimizer):
    arguments = ("rho", "epsilon")
    slot_names = ("accumulator", "delta_accumulator")

    def __init__(self, learning_rate=None, rho: float = 0.95, epsilon=None, decay: float = 0.0, lr=None, **kwargs):
        super().__init__(learning_rate, lr, decay, default_lr=1.0, **kwargs)
        self.rho, self.epsilon = float(rho), K.epsilon() if epsilon is None else float(epsilon)

    def rule(self, p, g, state, lr, t):
        a = self.rho * state["accumulator"] + (1.0 - self.rho) * tf.square(g)
        update = g * tf.sqrt(state["delta_accumulator"] + self.epsilon) / tf.sqrt(a + self.epsilon)
        d = self.rho * state["delta_accumulator"] + (1.0 - self.rho) * tf.square(update)
        return p - lr * update, [(state["accumulator"], a), (state["delta_accumulator"], d)]


class Adam(Optimizer):
    arguments = ("beta_1", "beta_2", "epsilon", "amsgrad")

    def __init__(self, learning_rate=None, beta_1: float = 0.9, beta_2: float = 0.999, epsilon=None,
                 decay: float = 0.0, amsgrad: bool = False, lr=None, **kwargs):
        super().__init__(learning_rate, lr, decay, default_lr=0.001, **kwargs)
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = K.epsilon() if epsilon is None else float(epsilon)
        self.amsgrad = amsgrad
        self.slot_names = ("m", "v", "vhat") if amsgrad else ("m", "v")

    def rule(self, p, g, state, lr, t):
        lr_t = lr * tf.sqrt(1.0 - tf.pow(self.beta_2, t)) / (1.0 - tf.pow(self.beta_1, t))
        m = self.beta_1 * state["m"] + (1.0 - self.beta_1) * g
        v = self.beta_2 * state["v"] + (1.0 - self.beta_2) * tf.square(g)
        slots = [(state["m"], m), (state["v"], v)]
        if self.amsgrad:
            v = tf.maximum(state["vhat"], v)
            slots.append((state["vhat"], v))
        return p - lr_t * m / (tf.sqrt(v) + self.epsilon), slots


class Adamax(Optimizer):
    arguments = ("beta_1", "beta_2", "epsilon")
    slot_names = ("m", "u")

    def __init__(self, learning_rate=None, beta_1: float = 0.9, beta_2: float = 0.999, epsilon=None,
                 decay: float = 0.0, lr=None, **kwargs):
        super().__init__(learning_rate, lr, decay, default_lr=0.002, **kwargs)
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = K.epsilon() if epsilon is None else float(epsilon)

    def rule(self, p, g, state, lr, t):
        lr_t = lr / (1.0 - tf.pow(self.beta_1, t))
        m = self.beta_1 * state["m"] + (1.0 - self.beta_1) * g
        u = tf.maximum(self.beta_2 * state["u"], tf.abs(g))
        return p - lr_t * m / (u + self.epsilon), [(state["m"], m), (state["u"], u)]


class Nadam(Optimizer):
    """Adam with Nesterov momentum and Keras 2.2's momentum schedule (``schedule_decay``)."""

    arguments = ("beta_1", "beta_2", "epsilon", "schedule_decay")
    slot_names = ("m", "v")

    def __init__(self, learning_rate=None, beta_1: float = 0.9, beta_2: float = 0.999, epsilon=None,
                 schedule_decay: float = 0.004, lr=None, **kwargs):
        super().__init__(learning_rate, lr, 0.0, default_lr=0.002, **kwargs)
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = K.epsilon() if epsilon is None else float(epsilon)
        self.schedule_decay = float(schedule_decay)

    def prepare(self, t) -> None:
        with tf.name_scope("Nadam/"):
            self.m_schedule = tf.Variable(np.asarray(1.0, np.float32), trainable=False, name="m_schedule")
        self.momentum_cache_t = self.beta_1 * (1.0 - 0.5 * tf.pow(0.96, t * self.schedule_decay))
        self.momentum_cache_t_1 = self.beta_1 * (1.0 - 0.5 * tf.pow(0.96, (t + 1.0) * self.schedule_decay))
        self.m_schedule_new = self.m_schedule * self.momentum_cache_t
        self.m_schedule_next = self.m_schedule * self.momentum_cache_t * self.momentum_cache_t_1

    def extra_new_values(self) -> list:
        return [(self.m_schedule, self.m_schedule_new)]

    def rule(self, p, g, state, lr, t):
        g_prime = g / (1.0 - self.m_schedule_new)
        m = self.beta_1 * state["m"] + (1.0 - self.beta_1) * g
        m_prime = m / (1.0 - self.m_schedule_next)
        v = self.beta_2 * state["v"] + (1.0 - self.beta_2) * tf.square(g)
        v_prime = v / (1.0 - tf.pow(self.beta_2, t))
        m_bar = (1.0 - self.momentum_cache_t) * g_prime + self.momentum_cache_t_1 * m_prime
        return p - lr * m_bar / (tf.sqrt(v_prime) + self.epsilon), [(state["m"], m), (state["v"], v)]


class Ftrl(Optimizer):
    """FTRL-Proximal with TensorFlow's update (tf.train.FtrlOptimizer's ApplyFtrl), ``lr`` a variable."""

    arguments = ("learning_rate_power", "initial_accumulator_value", "l1_regularization_strength",
                 "l2_regularization_strength")

    def __init__(self, learning_rate=None, learning_rate_power: float = -0.5, initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0, l2_regularization_strength: float = 0.0,
                 l2_shrinkage_regularization_strength: float = 0.0, lr=None, **kwargs):
        if l2_shrinkage_regularization_strength:
            raise NotImplementedError("Ftrl(l2_shrinkage_regularization_strength=...) is not built in flowstack")
        super().__init__(learning_rate, lr, 0.0, default_lr=0.001, **kwargs)
        self.learning_rate_power, self.initial_accumulator_value = learning_rate_power, initial_accumulator_value
        self.l1_regularization_strength = l1_regularization_strength
        self.l2_regularization_strength = l2_regularization_strength

    def get_updates(self, loss, params) -> list:
        rule = tf.train.FtrlOptimizer(self.lr, self.learning_rate_power, self.initial_accumulator_value,
                                      self.l1_regularization_strength, self.l2_regularization_strength)
        grads = self.get_gradients(loss, params)
        return [rule.apply_gradients(list(zip(grads, params))),
                tf.assign_add(self.iterations, np.asarray(1, np.int64))]


class TFOptimizer(Optimizer):
    """A ``tf.train`` optimizer used by ``compile``: its own update ops, plus the iteration count."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.clipnorm = self.clipvalue = None
        self.initial_lr, self.initial_decay = 0.0, 0.0
        self.state, self.weights = {}, []

    @property
    def lr(self):
        rate = self.optimizer.learning_rate
        if isinstance(rate, tf.Variable):
            return rate
        raise AttributeError("this tf.train optimizer's learning rate is a constant; pass a tf.Variable as its "
                             "learning_rate to change it from a callback")

    def get_updates(self, loss, params) -> list:
        return [self.optimizer.minimize(loss, var_list=params),
                tf.assign_add(self.iterations, np.asarray(1, np.int64))]

    def get_config(self) -> dict:
        raise NotImplementedError("a tf.train optimizer cannot be serialized in a Keras model's config")


OPTIMIZERS = {"sgd": SGD, "rmsprop": RMSprop, "adagrad": Adagrad, "adadelta": Adadelta, "adam": Adam,
              "adamax": Adamax, "nadam": Nadam, "ftrl": Ftrl}
OPTIMIZERS.update({cls.__name__: cls for cls in (SGD, RMSprop, Adagrad, Adadelta, Adam, Adamax, Nadam, Ftrl)})


def serialize(optimizer) -> dict:
    return {"class_name": type(optimizer).__name__, "config": optimizer.get_config()}


def deserialize(config, custom_objects=None) -> "Optimizer":
    if isinstance(config, dict):
        return deserialize_object(config, OPTIMIZERS, "optimizer", custom_objects)
    found = deserialize_object(config.lower() if config.lower() in OPTIMIZERS else config, OPTIMIZERS, "optimizer",
                               custom_objects)
    return found() if isinstance(found, type) else found


def get(identifier) -> Optimizer:
    """An optimizer from a name (``"adam"``), a config dict, a Keras optimizer or a ``tf.train`` one."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, tf.train.Optimizer):
        return TFOptimizer(identifier)
    if isinstance(identifier, (str, dict)):
        return deserialize(identifier)
    raise ValueError(f"Could not interpret optimizer identifier: {identifier!r}")


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.optimizers", name, globals())
