"""Synchronous training with backup workers: ``SyncReplicasOptimizer`` and gradient accumulators.

Each worker's train op tags its gradients with the global step it read, adds them to one
accumulator per variable (on the variable's device), then waits for a token. The chief's sync op
waits until every accumulator holds ``replicas_to_aggregate`` (m) gradients of the current step,
takes their means, applies them with the wrapped optimizer, advances the global step and the
accumulators' steps, and enqueues a token per replica. With n = total_num_replicas > m, the n - m
slowest gradients of a step are dropped (backup workers, the paper's section 4.4).

Robust where TensorFlow's hung (tensorflow#5022): the accumulators keep only the first m
gradients of a step and need no particular worker; a worker holds nothing others wait for (its
token is only its own permission to go on, and the tokens a dead worker leaves let the live ones
fill in); the chief waits for all accumulators before taking from any, so a timeout leaves
nothing half-taken; every wait (token, accumulator) has a timeout and fails with
DeadlineExceededError naming what it waited for. The chief's wait for gradients polls
(CHIEF_POLL_SECS), so ending a job does not wait out timeout_secs.

Works in one process (replicas as threads on one Session) and, placed by replica_device_setter,
across tasks: the accumulators and token queue are colocated with the variables and global step.
"""

from __future__ import annotations

import threading

import numpy as np

from trainer.accumulator_buffer import REDUCTIONS
from trainer.errors import DeadlineExceededError
from trainer.gradients import IndexedSlices
from trainer.graph import TRAINER_DOMAIN, Node, Tensor, get_default_graph
from trainer.hooks import SessionRunHook
from trainer.ops import cast, constant, convert_to_tensor, group, make_op
from trainer.queues import FIFOQueue

__all__ = ["ConditionalAccumulator", "SparseConditionalAccumulator", "SyncReplicasHook", "SyncReplicasOptimizer"]

D = TRAINER_DOMAIN


def snapshot(value) -> Tensor:
    """A copy of ``value`` taken when it runs (a variable's Identity would alias its live buffer)."""
    return make_op("Snapshot", [value], domain=D).outputs[0]


# The chief's sync op waits this long for gradients, then its loop looks at its stop flag and waits
# again: ending the session takes at most this, not timeout_secs.
CHIEF_POLL_SECS = 0.5


def _ms(timeout) -> int:
    return -1 if timeout is None else max(0, int(timeout * 1000))


class ConditionalAccumulator:
    """An accumulator of dense gradients for one variable, tagged with a global step."""

    op_type = "ConditionalAccumulator"

    def __init__(self, dtype, shape, shared_name: str | None = None, name: str = "conditional_accumulator",
                 reduction_type: str = "MEAN", max_accumulated: int = -1):
        if reduction_type not in REDUCTIONS:
            raise ValueError(f"{type(self).__name__} {name!r}: reduction_type must be one of {REDUCTIONS}, "
                             f"got {reduction_type!r}")
        g = get_default_graph()
        self.dtype, self.shape = np.dtype(dtype), tuple(int(d) for d in shape)
        self._attrs = {"dtype": self.dtype.name, "shape": list(self.shape)}
        self.node = g.create_op(self.op_type, [], {**self._attrs, "max_accumulated": max_accumulated,
                                                   "reduction_type": reduction_type}, domain=D, name=name)
        self.node.attrs["shared_name"] = shared_name or self.node.name
        self._attrs["shared_name"] = self.node.attrs["shared_name"]
        self.handle = self.node.outputs[0]
        self.graph = g

    def _op(self, op_type, inputs, attrs=None, n=None, name=None) -> Node:
        g = self.graph
        with g.as_default(), g.colocate_with(self.node):
            ins = [self.handle] + [convert_to_tensor(x) for x in inputs]
            return g.create_op(op_type, ins, attrs or {}, domain=D, num_outputs=n, name=name or f"{self.node.name}/{op_type}")

    @staticmethod
    def _step(local_step):
        t = convert_to_tensor(local_step)
        return t if t.dtype == np.int64 else cast(t, np.int64)

    def apply_grad(self, grad, local_step=0, name=None) -> Node:
        return self._op("AccumulatorApplyGradient", [self._step(local_step), grad], name=name)

    def take_grad(self, num_required: int, timeout: float | None = None, name=None) -> Tensor:
        return self._op("AccumulatorTakeGradient", [constant(np.asarray(num_required, np.int64))],
                        {**self._attrs, "timeout_ms": _ms(timeout)}, name=name).outputs[0]

    def set_global_step(self, new_global_step, name=None) -> Node:
        return self._op("AccumulatorSetGlobalStep", [self._step(new_global_step)], name=name)

    def num_accumulated(self, name=None) -> Tensor:
        return self._op("AccumulatorNumAccumulated", [], name=name).outputs[0]


class SparseConditionalAccumulator(ConditionalAccumulator):
    """An accumulator of IndexedSlices gradients (rows of a variable); keeps only touched rows."""

    op_type = "SparseConditionalAccumulator"

    def apply_indexed_slices_grad(self, grad: IndexedSlices, local_step=0, name=None) -> Node:
        row = [-1] + list(self.shape[1:])
        values = make_op("Reshape", [grad.values, constant(np.asarray(row, np.int64))]).outputs[0]
        indices = make_op("Reshape", [grad.indices, constant(np.asarray([-1], np.int64))]).outputs[0]
        return self._op("SparseAccumulatorApplyGradient", [self._step(local_step), indices, values], name=name)

    apply_grad = apply_indexed_slices_grad

    def take_indexed_slices_grad(self, num_required: int, like: Tensor, timeout: float | None = None,
                                 name=None) -> IndexedSlices:
        """The mean rows (each over the gradients that touched it) as IndexedSlices over a tensor
        shaped like ``like`` (the variable)."""
        indices, values, _ = self._op("SparseAccumulatorTakeGradient", [constant(np.asarray(num_required, np.int64))],
                                      {**self._attrs, "timeout_ms": _ms(timeout)}, n=3, name=name).outputs
        return IndexedSlices(values, indices, dense_like=like)


class SyncReplicasOptimizer:
    """``SyncReplicasOptimizer(opt, replicas_to_aggregate=m, total_num_replicas=n)``: apply the mean of
    the first m of n replicas' gradients per step with ``opt`` (TF's API: ``minimize``,
    ``apply_gradients``, ``make_session_run_hook(is_chief, num_tokens)``).

    ``timeout_secs`` bounds every wait: a worker waiting for its token, the chief waiting for
    gradients. ``apply_gradients`` may be called once.
    """

    def __init__(self, opt, replicas_to_aggregate: int, total_num_replicas: int | None = None,
                 timeout_secs: float = 60.0, name: str = "sync_replicas"):
        total = replicas_to_aggregate if total_num_replicas is None else total_num_replicas
        if replicas_to_aggregate < 1 or total < 1:
            raise ValueError(f"SyncReplicasOptimizer: replicas_to_aggregate ({replicas_to_aggregate}) and "
                             f"total_num_replicas ({total}) must be >= 1")
        if timeout_secs <= 0:
            raise ValueError(f"SyncReplicasOptimizer: timeout_secs must be positive, got {timeout_secs}")
        self._opt = opt
        self.replicas_to_aggregate = replicas_to_aggregate
        self.total_num_replicas = total
        self.tokens_per_step = max(total, replicas_to_aggregate)
        self.timeout_secs = timeout_secs
        self.name = name
        self.accumulators: list[tuple[ConditionalAccumulator, object]] = []
        self.chief_sync_op: Node | None = None
        self._token_queue: FIFOQueue | None = None
        self._global_step = None

    def compute_gradients(self, loss, var_list=None):
        return self._opt.compute_gradients(loss, var_list)

    def minimize(self, loss, global_step=None, var_list=None, name=None):
        return self.apply_gradients(self.compute_gradients(loss, var_list), global_step=global_step, name=name)

    def get_slot(self, var, name):
        return self._opt.get_slot(var, name)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None) -> Node:
        """The worker's train op; also builds the chief's sync op (``chief_sync_op``)."""
        if global_step is None:
            raise ValueError("SyncReplicasOptimizer.apply_gradients needs global_step (it tags and paces the steps)")
        if self.chief_sync_op is not None:
            raise ValueError("SyncReplicasOptimizer.apply_gradients may be called only once")
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("no gradients for any variable: does the loss depend on them?")
        graph = pairs[0][1].graph
        m = self.replicas_to_aggregate
        with graph.as_default(), graph.name_scope(name or self.name):
            local_step = snapshot(global_step)  # the step these gradients belong to
            applies = []
            for grad, var in pairs:
                kind = SparseConditionalAccumulator if isinstance(grad, IndexedSlices) else ConditionalAccumulator
                with graph.colocate_with(var.node):
                    acc = kind(var.dtype, var.shape, shared_name=f"{var.op.name}/grad_accum", max_accumulated=m,
                               name=f"{var.op.name.replace('/', '_')}_grad_accum")
                applies.append(acc.apply_grad(grad, local_step))
                self.accumulators.append((acc, var))
            with graph.colocate_with(global_step.node):
                self._token_queue = FIFOQueue(-1, [np.int64], shapes=[()], name="sync_token_q")
            with graph.control_dependencies(applies), graph.colocate_with(global_step.node):
                token = self._token_queue.dequeue(name="wait_for_token", timeout=self.timeout_secs)
            train_op = group(token, name="train_op")
            self.chief_sync_op = self._build_chief_op(graph, global_step)
        self._global_step = global_step
        return train_op

    def _build_chief_op(self, graph, global_step) -> Node:
        m = self.replicas_to_aggregate
        with graph.colocate_with(global_step.node):
            wait = min(self.timeout_secs, CHIEF_POLL_SECS)
            ready = graph.create_op("AccumulatorWaitAll", [acc.handle for acc, _ in self.accumulators],
                                    {"num_required": m, "timeout_ms": _ms(wait)}, domain=D,
                                    name="wait_for_gradients")
        aggregated = []
        with graph.control_dependencies([ready]):
            for acc, var in self.accumulators:
                if isinstance(acc, SparseConditionalAccumulator):
                    aggregated.append((acc.take_indexed_slices_grad(m, var.tensor, self.timeout_secs), var))
                else:
                    aggregated.append((acc.take_grad(m, self.timeout_secs), var))
        update = self._opt.apply_gradients(aggregated, global_step=global_step)
        with graph.control_dependencies([update]):
            step_now = snapshot(global_step)
            set_steps = [acc.set_global_step(step_now) for acc, _ in self.accumulators]
        with graph.control_dependencies(set_steps):
            enqueue = self._enqueue_tokens(graph, global_step, step_now, self.tokens_per_step)
        return group(enqueue, name="chief_sync_op")

    def _enqueue_tokens(self, graph, global_step, step, count: int) -> Node:
        with graph.colocate_with(global_step.node):
            tokens = make_op("Expand", [step, constant(np.asarray([count], np.int64))]).outputs[0]
            return self._token_queue.enqueue_many([tokens], name="enqueue_tokens")

    def get_init_tokens_op(self, num_tokens: int = -1) -> Node | None:
        """Tokens that let workers start before the first aggregation (-1: replicas_to_aggregate)."""
        if self.chief_sync_op is None:
            raise ValueError("call apply_gradients (or minimize) before get_init_tokens_op")
        if num_tokens == -1:
            num_tokens = self.replicas_to_aggregate
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be >= -1, got {num_tokens}")
        if num_tokens == 0:
            return None
        graph = self._global_step.graph
        with graph.as_default(), graph.name_scope(self.name + "/"):
            return self._enqueue_tokens(graph, self._global_step, snapshot(self._global_step), num_tokens)

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> "SyncReplicasHook":
        """The hook that starts the chief's sync loop (on the chief) when the session is created."""
        if self.chief_sync_op is None:
            raise ValueError("call apply_gradients (or minimize) before make_session_run_hook")
        init_tokens = self.get_init_tokens_op(num_tokens) if is_chief else None
        return SyncReplicasHook(self, is_chief, init_tokens)


class SyncReplicasHook(SessionRunHook):
    """On the chief, enqueues the initial tokens and runs ``chief_sync_op`` in a loop on a thread
    until ``end`` (or the session fails); workers need nothing."""

    def __init__(self, opt: SyncReplicasOptimizer, is_chief: bool, init_tokens_op: Node | None):
        self.opt, self.is_chief, self.init_tokens_op = opt, is_chief, init_tokens_op
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.steps = 0

    def after_create_session(self, session, coord=None) -> None:
        """Start the chief's loop. ``coord`` (a Coordinator) is optional: a MonitoredTrainingSession
        that passes the global step here instead is fine; only an object with ``should_stop`` is used."""
        if not self.is_chief:
            return
        if not hasattr(coord, "should_stop"):
            coord = None
        if self.init_tokens_op is not None:
            session.run(self.init_tokens_op)
        self._thread = threading.Thread(target=self._loop, args=(session, coord), name="sync-replicas-chief",
                                        daemon=True)
        self._thread.start()

    def _loop(self, session, coord) -> None:
        while not self._stop.is_set() and not (coord is not None and coord.should_stop()):
            try:
                session.run(self.opt.chief_sync_op)
                self.steps += 1
            except DeadlineExceededError:
                continue  # not enough gradients yet (workers slow, dead or done): look at the stop flag, wait again
            except BaseException as e:  # noqa: BLE001 - reported to the coordinator and kept for end()
                if not self._stop.is_set():
                    self.error = e
                    if coord is not None:
                        coord.request_stop(e)
                return

    def end(self, session=None, timeout: float | None = None) -> None:
        """Stop the chief's loop; it returns once its current wait for gradients (CHIEF_POLL_SECS) ends."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout if timeout is not None else CHIEF_POLL_SECS + self.opt.timeout_secs + 5)
            if self._thread.is_alive():
                raise DeadlineExceededError("the chief's sync loop did not stop")
