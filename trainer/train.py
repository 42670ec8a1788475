"""Optimizers as graph ops, gradient clipping, learning-rate schedules and the global step.

``minimize(loss)`` = ``compute_gradients`` (the backward graph) + ``apply_gradients`` (one fused
in-place update op per variable, e.g. ApplyAdam, plus the global-step increment).
"""

from __future__ import annotations

import numpy as np

from trainer.device_setter import (GreedyLoadBalancingStrategy, RoundRobinStrategy, byte_size_load_fn,
                                   replica_device_setter)
from trainer.distbelief import DistBeliefTrainer
from trainer.gradients import IndexedSlices, gradients
from trainer.sync_replicas import SyncReplicasOptimizer
from trainer.graph import TRAINER_DOMAIN, GraphKeys, get_default_graph
from trainer.partitioned_variables import PartitionedVariable
from trainer.ops import cast, constant, convert_to_tensor, group, make_op, multiply
from trainer.variables import Variable, trainable_variables
from trainer.distributed.cluster import ClusterSpec, TFConfigClusterResolver
from trainer.hooks import (CheckpointSaverHook, CheckpointSaverListener, FeedFnHook, FinalOpsHook,
                           GlobalStepWaiterHook, LoggingTensorHook, NanLossDuringTrainingError, NanTensorHook,
                           SecondOrStepTimer, SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues,
                           StepCounterHook, StopAtStepHook, SummarySaverHook)

__all__ = [
    "AdagradOptimizer", "AdamOptimizer", "CheckpointSaverHook", "CheckpointSaverListener", "ClusterSpec",
    "DistBeliefTrainer", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook", "SecondOrStepTimer", "SummarySaverHook",
    "cosine_decay_restarts", "linear_cosine_decay",
    "GradientDescentOptimizer", "GreedyLoadBalancingStrategy", "LazyAdamOptimizer", "LoggingTensorHook",
    "MomentumOptimizer", "MonitoredTrainingSession", "NanLossDuringTrainingError", "NanTensorHook", "Optimizer",
    "RMSPropOptimizer", "RoundRobinStrategy", "Server", "SessionRunArgs", "SessionRunContext", "SessionRunHook",
    "SessionRunValues", "StepCounterHook", "StopAtStepHook", "SyncReplicasOptimizer", "TFConfigClusterResolver",
    "byte_size_load_fn", "clip_by_global_norm", "cosine_decay", "create_global_step", "exponential_decay",
    "get_global_step", "get_or_create_global_step", "global_step", "inverse_time_decay", "natural_exp_decay",
    "piecewise_constant", "piecewise_constant_decay", "polynomial_decay", "replica_device_setter",
]


def get_or_create_global_step(graph=None):
    """The int64 scalar variable counting training steps (one per graph)."""
    g = graph or get_default_graph()
    existing = g.get_collection(GraphKeys.GLOBAL_STEP)
    if existing:
        return existing[0]
    with g.as_default(), g.name_scope("/"):
        step = Variable(np.zeros((), np.int64), trainable=False, name="global_step",
                        collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP])
    return step


def clip_by_global_norm(tensors, clip_norm):
    """(tensors scaled by min(1, clip_norm / global_norm), global_norm)."""
    present = [t for t in tensors if t is not None]
    dense = [t.values if isinstance(t, IndexedSlices) else t for t in present]
    clip = convert_to_tensor(np.asarray(clip_norm, dense[0].dtype), graph=dense[0].graph)
    scale, norm = make_op("ClipByGlobalNormScale", [clip, *dense], domain=TRAINER_DOMAIN, num_outputs=2).outputs
    out = []
    for t in tensors:
        if t is None:
            out.append(None)
        elif isinstance(t, IndexedSlices):
            shape = None if t.dense_like is not None else t.dense_shape
            out.append(IndexedSlices(multiply(t.values, scale), t.indices, shape, dense_like=t.dense_like))
        else:
            out.append(multiply(t, scale))
    return out, norm


def rate_tensor(learning_rate):
    """A schedule's starting rate as a float32 graph value: a number as a constant, a tensor or
    variable (optimize_loss's learning_rate variable, another schedule) as it is, cast to float32
    if it is another dtype, so the schedules take either as TensorFlow's do."""
    if isinstance(learning_rate, (int, float, np.number)) and not isinstance(learning_rate, bool):
        return constant(np.float32(learning_rate))
    rate = convert_to_tensor(learning_rate)
    return rate if rate.dtype == np.float32 else cast(rate, np.float32)


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """``lr * decay_rate ** (step / decay_steps)`` as a graph value (recomputed every step)."""
    step = cast(convert_to_tensor(global_step), np.float32)
    p = step / float(decay_steps)
    if staircase:
        p = make_op("Floor", [p]).outputs[0]
    return multiply(rate_tensor(learning_rate), make_op("Pow", [constant(np.float32(decay_rate)), p]).outputs[0],
                    name=name)


def piecewise_constant(global_step, boundaries, values):
    """values[i] while boundaries[i-1] <= step < boundaries[i]."""
    from trainer.ops import greater, where

    step = convert_to_tensor(global_step)
    out = constant(np.float32(values[-1]))
    for b, v in reversed(list(zip(boundaries, values[:-1]))):
        out = where(greater(constant(np.asarray(b, step.dtype)), step), constant(np.float32(v)), out)
    return out


def deduplicate_indexed_slices(grad: IndexedSlices, var) -> tuple:
    """(values, indices) of ``grad`` with one row per distinct index, repeated rows summed."""
    row_shape = [int(d) for d in var.shape[1:]]
    flat_idx = make_op("Reshape", [grad.indices, constant(np.asarray([-1], np.int64))]).outputs[0]
    flat_idx = flat_idx if flat_idx.dtype == np.int64 else cast(flat_idx, np.int64)
    values = make_op("Reshape", [grad.values, constant(np.asarray([-1] + row_shape, np.int64))]).outputs[0]
    unique, _, inverse, _ = make_op("Unique", [flat_idx], {"sorted": 1}, num_outputs=4).outputs
    count = make_op("Size", [unique]).outputs[0]
    summed = make_op("UnsortedSegmentSum", [values, inverse, count], domain=TRAINER_DOMAIN).outputs[0]
    return summed, unique


def _flatten(var_list) -> list:
    """Variables, with each PartitionedVariable replaced by its shards (as TensorFlow does)."""
    out = []
    for v in var_list:
        out.extend(v if isinstance(v, PartitionedVariable) else [v])
    return out


class Optimizer:
    """Base class: subclasses say which slots a variable needs and which fused op applies an update.

    ``name`` (the class's by default, e.g. "Adam") scopes the update ops and names the slots;
    ``use_locking`` is accepted for TensorFlow 1.x's signatures (updates here are never torn).
    """

    name = "Optimizer"

    def __init__(self, learning_rate, use_locking: bool = False, name: str | None = None):
        self.learning_rate = learning_rate
        self._slots: dict = {}
        if name is not None:
            self.name = name

    GATE_NONE, GATE_OP, GATE_GRAPH = 0, 1, 2  # TF's gating modes: scheduling only, the values are the same

    def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP, aggregation_method=None,
                          colocate_gradients_with_ops=False, grad_loss=None):
        from trainer.tf1_gradients import check_aggregation_method

        check_aggregation_method(aggregation_method, f"{type(self).__name__}.compute_gradients")
        if gate_gradients not in (self.GATE_NONE, self.GATE_OP, self.GATE_GRAPH):
            raise ValueError(f"gate_gradients must be one of Optimizer.GATE_NONE, GATE_OP, GATE_GRAPH; "
                             f"got {gate_gradients!r}")
        var_list = _flatten(var_list) if var_list is not None else trainable_variables(convert_to_tensor(loss).graph)
        if not var_list:
            raise ValueError("no trainable variables to optimize")
        grads = gradients(loss, var_list, grad_loss)
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("no gradients for any variable: does the loss depend on them?")
        graph = pairs[0][1].graph
        with graph.as_default(), graph.name_scope(name or self.name):
            self._prepare(graph, pairs[0][1].dtype)
            updates = [self._constrained(self._apply(g, v), v) for g, v in pairs]
            finish = self._finish(updates)
            if global_step is not None:
                with graph.control_dependencies(finish):
                    return group(global_step.assign_add(np.asarray(1, global_step.dtype)), name="train_op")
            return group(*finish, name="train_op")

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=GATE_OP, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None):
        grads = self.compute_gradients(loss, var_list, gate_gradients=gate_gradients,
                                       aggregation_method=aggregation_method,
                                       colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        return self.apply_gradients(grads, global_step=global_step, name=name)

    @staticmethod
    def _constrained(update, var):
        """``update``, then ``var`` set to ``var.constraint(var)`` where it has a constraint, as
        TensorFlow's optimizers apply a variable's constraint after each update."""
        if getattr(var, "constraint", None) is None:
            return update
        with var.graph.control_dependencies([update]):
            return var.assign(var.constraint(var))

    # -- subclass hooks ----------------------------------------------------------------------
    def _prepare(self, graph, dtype):
        self._lr = self._scalar(self.learning_rate, dtype)

    def _scalar(self, value, dtype):
        if hasattr(value, "as_tensor") or hasattr(value, "node"):
            t = convert_to_tensor(value)
            return t if t.dtype == dtype else cast(t, dtype)
        return constant(np.asarray(value, dtype))

    def _slot(self, var, name, init=0.0):
        """``var``'s slot ``name``, made on first use and named as TensorFlow names slots: the
        optimizer's name under the variable's, made unique, so the slots come out ``w/Adam``,
        ``w/Adam_1``, ... in the order ``_apply`` asks for them (Adam: m, then v; see
        trainer/slot_names.py, which maps these names to the ones older checkpoints hold)."""
        key = (var, name)
        if key not in self._slots:
            g = var.graph
            with g.as_default(), g.name_scope(var.op.name + "/"), g.colocate_with(var.node):
                slot = Variable(np.full(var.shape, init, var.dtype), trainable=False, name=self.name)
            if var.save_slice_info is not None:  # a shard's slot is the same shard of the logical slot
                slot.save_slice_info = var.save_slice_info.slot(slot.op.name[len(var.op.name):])
            self._slots[key] = slot
        return self._slots[key]

    def get_slot(self, var, name):
        return self._slots.get((var, name))

    def get_slot_names(self) -> list[str]:
        """The names of the slots this optimizer made (Adam: ``["m", "v"]``)."""
        return sorted({name for _, name in self._slots})

    def variables(self) -> list[Variable]:
        """The optimizer's state, sorted by name as TensorFlow sorts it: its slots and the variables
        that are no variable's slot (Adam's ``beta1_power``, ``beta2_power``)."""
        return sorted([*self._non_slot_variables(), *self._slots.values()], key=lambda v: v.name)

    def _non_slot_variables(self) -> list[Variable]:
        return []

    def _apply(self, grad, var):
        raise NotImplementedError

    def _finish(self, updates):
        return updates

    def _fused(self, op_type, inputs, attrs=None):
        var = inputs[0]
        g = var.graph
        with g.colocate_with(var.node):
            return g.create_op(op_type, [convert_to_tensor(i) for i in inputs], attrs or {},
                               domain=TRAINER_DOMAIN, name=f"update_{var.op.name}").outputs[0]

    @staticmethod
    def _dense(grad):
        return grad.to_dense() if isinstance(grad, IndexedSlices) else grad

    def _sparse(self, op_type, var, grad, inputs, attrs=None):
        """A SparseApply* update of the rows ``grad`` touches, duplicates summed first, built on the
        variable's device so only the gradient's rows travel there. ``inputs(values, indices)``
        lists the op's inputs."""
        g = var.graph
        with g.colocate_with(var.node):
            values, indices = deduplicate_indexed_slices(grad, var)
            return g.create_op(op_type, [convert_to_tensor(i) for i in inputs(values, indices)], attrs or {},
                               domain=TRAINER_DOMAIN, name=f"update_{var.op.name}").outputs[0]


class GradientDescentOptimizer(Optimizer):
    name = "GradientDescent"

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(learning_rate, use_locking, name)

    def _apply(self, grad, var):
        if isinstance(grad, IndexedSlices):  # touch only the gathered rows (ScatterSub sums repeats)
            g = var.graph
            with g.colocate_with(var.node):
                return make_op("ScatterSub", [var, grad.indices, multiply(grad.values, self._lr)],
                               domain=TRAINER_DOMAIN, name=f"update_{var.op.name}").outputs[0]
        return self._fused("ApplyGradientDescent", [var, self._lr, grad])


class MomentumOptimizer(Optimizer):
    name = "Momentum"

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False):
        super().__init__(learning_rate, use_locking, name)
        self.momentum = momentum
        self.use_nesterov = use_nesterov

    def _prepare(self, graph, dtype):
        super()._prepare(graph, dtype)
        self._mom = self._scalar(self.momentum, dtype)

    def _apply(self, grad, var):
        attrs = {"use_nesterov": int(self.use_nesterov)}
        if isinstance(grad, IndexedSlices):  # as TF: rows without gradient keep their momentum unapplied
            accum = self._slot(var, "momentum")
            return self._sparse("SparseApplyMomentum", var, grad,
                                lambda values, indices: [var, accum, self._lr, values, indices, self._mom], attrs)
        return self._fused("ApplyMomentum", [var, self._slot(var, "momentum"), self._lr, grad, self._mom], attrs)


class AdamOptimizer(Optimizer):
    name = "Adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False, name="Adam"):
        super().__init__(learning_rate, use_locking, name)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self._powers = None

    def _prepare(self, graph, dtype):
        super()._prepare(graph, dtype)
        self._b1, self._b2, self._eps = (self._scalar(v, dtype) for v in (self.beta1, self.beta2, self.epsilon))
        if self._powers is None:
            with graph.name_scope("/"):
                self._powers = (Variable(np.asarray(self.beta1, dtype), trainable=False, name="beta1_power"),
                                Variable(np.asarray(self.beta2, dtype), trainable=False, name="beta2_power"))

    def _non_slot_variables(self) -> list[Variable]:
        return list(self._powers or ())

    def _apply(self, grad, var):
        p1, p2 = self._powers
        return self._fused("ApplyAdam", [var, self._slot(var, "m"), self._slot(var, "v"), p1, p2, self._lr,
                                         self._b1, self._b2, self._eps, self._dense(grad)])

    def _finish(self, updates):
        p1, p2 = self._powers
        g = p1.graph
        with g.control_dependencies(updates):
            with g.colocate_with(p1.node):
                u1 = make_op("Assign", [p1, multiply(p1, self._b1)], domain=TRAINER_DOMAIN).outputs[0]
            with g.colocate_with(p2.node):
                u2 = make_op("Assign", [p2, multiply(p2, self._b2)], domain=TRAINER_DOMAIN).outputs[0]
        return list(updates) + [u1, u2]


class LazyAdamOptimizer(AdamOptimizer):
    """Adam whose sparse gradients (embedding lookups) update m, v and the variable in the touched
    rows only, on the variable's device (TensorFlow's LazyAdamOptimizer). AdamOptimizer decays m and
    v of every row each step, which costs the whole table per step; dense gradients are the same."""

    def _apply(self, grad, var):
        if not isinstance(grad, IndexedSlices):
            return super()._apply(grad, var)
        p1, p2, m, v = (*self._powers, self._slot(var, "m"), self._slot(var, "v"))
        return self._sparse("SparseApplyAdam", var, grad, lambda values, indices: [
            var, m, v, p1, p2, self._lr, self._b1, self._b2, self._eps, values, indices])


class AdagradOptimizer(Optimizer):
    name = "Adagrad"

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"):
        super().__init__(learning_rate, use_locking, name)
        self.initial = initial_accumulator_value

    def _apply(self, grad, var):
        accum = self._slot(var, "accumulator", self.initial)
        if isinstance(grad, IndexedSlices):  # the same result as dense: untouched rows get no update
            return self._sparse("SparseApplyAdagrad", var, grad,
                                lambda values, indices: [var, accum, self._lr, values, indices])
        return self._fused("ApplyAdagrad", [var, accum, self._lr, grad])


class RMSPropOptimizer(Optimizer):
    name = "RMSProp"

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False, centered=False,
                 name="RMSProp"):
        if centered:
            raise ValueError("RMSPropOptimizer: centered=True is not supported; leave it False")
        super().__init__(learning_rate, use_locking, name)
        self.decay, self.momentum, self.epsilon = decay, momentum, epsilon

    def _prepare(self, graph, dtype):
        super()._prepare(graph, dtype)
        self._rho, self._mom, self._eps = (self._scalar(v, dtype) for v in (self.decay, self.momentum, self.epsilon))

    def _apply(self, grad, var):
        return self._fused("ApplyRMSProp", [var, self._slot(var, "rms", 1.0), self._slot(var, "momentum"), self._lr,
                                            self._rho, self._mom, self._eps, self._dense(grad)])


def get_global_step(graph=None):
    """The graph's global step variable, or None if none was created."""
    steps = (graph or get_default_graph()).get_collection(GraphKeys.GLOBAL_STEP)
    return steps[0] if steps else None


def _step_fraction(global_step, decay_steps, staircase: bool = False, cap: bool = False):
    p = cast(convert_to_tensor(global_step), np.float32) / float(decay_steps)
    if staircase:
        p = make_op("Floor", [p]).outputs[0]
    if cap:
        p = make_op("Min", [p, constant(np.float32(1.0))]).outputs[0]
    return p


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """``lr / (1 + decay_rate * step / decay_steps)``."""
    p = _step_fraction(global_step, decay_steps, staircase)
    return make_op("Div", [rate_tensor(learning_rate), p * float(decay_rate) + 1.0], name=name).outputs[0]


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """``lr * exp(-decay_rate * step / decay_steps)``."""
    p = _step_fraction(global_step, decay_steps, staircase)
    return multiply(rate_tensor(learning_rate), make_op("Exp", [p * -float(decay_rate)]).outputs[0], name=name)


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                     name=None):
    """``(lr - end) * (1 - min(step, decay_steps) / decay_steps) ** power + end``."""
    if cycle:
        raise ValueError("polynomial_decay: cycle=True is not supported")
    p = _step_fraction(global_step, decay_steps, cap=True)
    frac = make_op("Pow", [1.0 - p, constant(np.float32(power))]).outputs[0]
    return (rate_tensor(learning_rate) - float(end_learning_rate)) * frac + float(end_learning_rate)


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    """``lr * ((1 - alpha) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2 + alpha)``."""
    p = _step_fraction(global_step, decay_steps, cap=True)
    cosine = make_op("Cos", [p * float(np.pi)]).outputs[0]
    return multiply(rate_tensor(learning_rate), (cosine + 1.0) * (0.5 * (1.0 - alpha)) + float(alpha), name=name)


def cosine_decay_restarts(learning_rate, global_step, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0, name=None):
    """SGDR: cosine decay over ``first_decay_steps``, restarting with periods ``t_mul`` times longer
    and peaks ``m_mul`` times lower each time (TensorFlow's formula)."""
    if global_step is None:
        raise ValueError("global_step is required for cosine_decay_restarts.")
    fraction = _step_fraction(global_step, first_decay_steps)
    if t_mul == 1.0:
        restart = make_op("Floor", [fraction]).outputs[0]
        fraction = fraction - restart
    else:
        log_t = float(np.log(t_mul))
        restart = make_op("Floor", [make_op("Log", [1.0 - fraction * (1.0 - t_mul)]).outputs[0] / log_t]).outputs[0]
        period = make_op("Pow", [constant(np.float32(t_mul)), restart]).outputs[0]
        fraction = (fraction - (1.0 - period) / (1.0 - t_mul)) / period
    peak = make_op("Pow", [constant(np.float32(m_mul)), restart]).outputs[0]
    cosine = (make_op("Cos", [fraction * float(np.pi)]).outputs[0] + 1.0) * peak * 0.5
    return multiply(rate_tensor(learning_rate), cosine * (1.0 - alpha) + float(alpha), name=name)


def linear_cosine_decay(learning_rate, global_step, decay_steps, num_periods=0.5, alpha=0.0, beta=0.001, name=None):
    """``lr * ((alpha + linear) * cosine + beta)``: linear = 1 - min(step, decay_steps) / decay_steps,
    cosine = (1 + cos(2 pi num_periods step / decay_steps)) / 2 (TensorFlow's formula)."""
    if global_step is None:
        raise ValueError("global_step is required for linear_cosine_decay.")
    fraction = _step_fraction(global_step, decay_steps, cap=True)
    cosine = (make_op("Cos", [fraction * float(2.0 * np.pi * num_periods)]).outputs[0] + 1.0) * 0.5
    return multiply(rate_tensor(learning_rate), (1.0 - fraction + float(alpha)) * cosine + float(beta),
                    name=name)


def global_step(sess, global_step_tensor) -> int:
    """The global step's current value in ``sess``."""
    return int(sess.run(global_step_tensor))


create_global_step = get_or_create_global_step
piecewise_constant_decay = piecewise_constant

# TensorFlow 1.x reaches these as tf.train.<name>; they live in their own modules.
LAZY_ATTRIBUTES = {
    "Server": ("trainer.distributed.server", "Server"),  # needs grpcio, an extra: trainer.train imports without it
    "Saver": ("trainer.saver", "Saver"),
    "SaverDef": ("trainer.saver", "SaverDef"),
    "latest_checkpoint": ("trainer.saver", "latest_checkpoint"),
    "MonitoredTrainingSession": ("trainer.monitored", "MonitoredTrainingSession"),
    "Coordinator": ("trainer.queues", "Coordinator"),
    "QueueRunner": ("trainer.queues", "QueueRunner"),
    "start_queue_runners": ("trainer.queues", "start_queue_runners"),
    "ExponentialMovingAverage": ("trainer.moving_averages", "ExponentialMovingAverage"),
    "write_graph": ("trainer.graph_def", "write_graph"),
    "Supervisor": ("trainer.supervisor", "Supervisor"),
    **{name: ("trainer.example_proto", name) for name in (
        "BytesList", "Example", "Feature", "FeatureList", "FeatureLists", "Features", "FloatList", "Int64List",
        "SequenceExample")},
    **{name: ("trainer.input_producers", name) for name in (
        "add_queue_runner", "batch", "batch_join", "input_producer", "limit_epochs", "match_filenames_once",
        "maybe_batch", "maybe_shuffle_batch", "range_input_producer", "shuffle_batch", "shuffle_batch_join",
        "slice_input_producer", "string_input_producer")},
    **{name: ("trainer.optimizers", name) for name in (
        "AdadeltaOptimizer", "AdagradDAOptimizer", "FtrlOptimizer", "ProximalAdagradOptimizer",
        "ProximalGradientDescentOptimizer")},
    **{name: ("trainer.session_manager", name) for name in ("SessionManager", "WorkerSessionCreator")},
    **{name: ("trainer.training_loops", name) for name in ("LooperThread", "basic_train_loop")},
    **{name: ("trainer.step_schedules", name) for name in ("assert_global_step", "noisy_linear_cosine_decay")},
    "summary_iterator": ("trainer.summary_events", "summary_iterator"),
    **{name: ("trainer.checkpoint_utils", name) for name in (
        "checkpoint_exists", "checkpoints_iterator", "get_checkpoint_mtimes", "get_checkpoint_state",
        "init_from_checkpoint", "list_variables", "load_variable", "remove_checkpoint", "update_checkpoint_state")},
    **{name: ("trainer.monitored_session", name) for name in (
        "ChiefSessionCreator", "MonitoredSession", "Scaffold", "SessionCreator", "SingularMonitoredSession")},
    **{name: ("trainer.meta_graph", name) for name in ("export_meta_graph", "import_meta_graph")},
    "load_checkpoint": ("trainer.checkpoint_utils", "load_checkpoint_reader"),
    "NewCheckpointReader": ("trainer.checkpoint_utils", "load_checkpoint_reader"),  # TF 1.x's older spelling
    **{name: ("trainer.warm_starting", name) for name in ("VocabInfo", "warm_start")},
}


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol, resolve_lazy

    if name in LAZY_ATTRIBUTES:
        try:
            return resolve_lazy(name, LAZY_ATTRIBUTES)
        except ImportError:
            pass  # a build without that module: the symbol is unsupported here
    raise missing_symbol("tf.train", name, globals())
