"""Sessions: run parts of a graph, many times, from several threads at once.

``Session.run(fetches, feed_dict)`` compiles a plan the first time it sees a (fetches, feeds)
pair and reuses it afterwards, so a training step does no graph work: it checks the feeds, walks
the cached steps and returns the fetched values in the structure they were asked for.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from edge_runtime.allocator import keep_freed_memory
from trainer.default_session import pushed_session
from trainer.devices import LOCAL_TASK, Device, DeviceSpec, available_devices, canonical_device
from trainer.executor import compile_plan
from trainer.graph import Graph, GraphError, Node, Tensor, get_default_graph
from trainer.placement import CostModel, Placer
from trainer.plan import FlatPlan, TaskName
from trainer.rendezvous import Rendezvous
from trainer.state import RunContext, SessionState
from trainer.step_stats import StepStats, step_stats_of

__all__ = ["Session"]


class _FetchMapper:
    """Flattens a fetch structure (tensor, node, list, tuple, dict) and rebuilds it from values."""

    def __init__(self, graph: Graph, fetches):
        self.tensors: list[Tensor] = []
        self.targets: list[Node] = []
        self.build = self._parse(graph, fetches)

    def _parse(self, graph, f):
        if isinstance(f, (list, tuple)):
            parts = [self._parse(graph, x) for x in f]
            kind = type(f)
            if isinstance(f, tuple) and hasattr(f, "_fields"):  # a namedtuple (LSTMStateTuple) comes back as one
                return lambda vals: kind(*(p(vals) for p in parts))
            return lambda vals: tuple(p(vals) for p in parts) if isinstance(f, tuple) else [p(vals) for p in parts]
        if isinstance(f, dict):
            parts = {k: self._parse(graph, v) for k, v in f.items()}
            return lambda vals: {k: p(vals) for k, p in parts.items()}
        if hasattr(f, "composite_parts"):  # a SparseTensor: fetched as its parts, answered as one value
            parts = [self._parse(graph, t) for t in f.composite_parts()]
            return lambda vals: f.composite_value([p(vals) for p in parts])
        t = _resolve(graph, f)
        if isinstance(t, Node):
            self.targets.append(t)
            return lambda vals: None
        i = len(self.tensors)
        self.tensors.append(t)
        return lambda vals: vals[i]


def _resolve(graph: Graph, f):
    if isinstance(f, (Tensor, Node)):
        return f
    if hasattr(f, "as_tensor"):
        return f.as_tensor()
    if hasattr(f, "node") and isinstance(f.node, Node):
        return f.node
    if isinstance(f, str):
        return graph.tensor(f) if ":" in f else graph.node(f)
    raise TypeError(f"cannot fetch {type(f).__name__} {f!r}: expected a Tensor, a node, or a name")


def _expand_composite_feeds(feed_dict: dict) -> dict:
    """A fed SparseTensor as a feed of each of its parts."""
    expanded = {}
    for key, value in feed_dict.items():
        if hasattr(key, "composite_parts"):
            expanded.update(zip(key.composite_parts(), key.composite_feed(value)))
        else:
            expanded[key] = value
    return expanded


def _fetch_key(fetches):
    if isinstance(fetches, list):
        return ("l", *fetches)
    if isinstance(fetches, dict):
        return ("d", *fetches.items())
    return fetches


class _Compiled:
    __slots__ = ("plan", "mapper", "feed_tensors", "single")

    def __init__(self, plan, mapper, feed_tensors, single):
        self.plan, self.mapper, self.feed_tensors, self.single = plan, mapper, feed_tensors, single



def _quiet_floats() -> None:
    """A session worker thread's NumPy floating-point state: TensorFlow computes inf and nan silently
    (tf.debugging.check_numerics is how a graph asks for them to fail), so NumPy's warnings about
    them are noise, and errors where a program turns warnings into errors."""
    np.seterr(all="ignore")

class Session:
    """Runs a graph: ``with Session(graph) as sess: sess.run(train_op, {x: batch})``.

    ``devices`` lists the devices this session may place ops on (default: ``CPU:0`` plus ``GPU:0``
    where CuPy finds one); ``num_cpu_devices`` adds ``CPU:1``... to exercise partitioning.
    ``fuse_loops=False`` runs every while_loop on the frame-tagged dataflow executor.
    ``parallel_ops=True`` runs independent expensive ops of one step concurrently on
    ``inter_op_threads`` threads (worth it with single-threaded BLAS on several cores).
    ``allow_soft_placement=True`` is TF 1.x's option of that name: a device constraint this
    session cannot meet (another task's device, a device it lacks) is relaxed instead of refused,
    so a graph built for a cluster (``replica_device_setter``) runs in one process.
    ``local_task`` is the task ``(job, index)`` this session runs as: nodes placed on other tasks
    are remote. A plain session is ``("localhost", 0)`` and refuses plans with remote nodes
    (``allow_remote`` is False).
    ``target="grpc://host:port"`` (the ``target`` of a ``trainer.train.Server`` started in this
    process) runs the graph on the server's cluster: nodes placed on other tasks run there.
    ``state`` shares variables with other sessions (the partitions one cluster task runs).
    """

    # Whether plans may place nodes on other tasks (their partitions land in plan.remote_partitions).
    allow_remote = False

    def __init__(self, graph: Graph | None = None, *, target: str | None = None, devices=None,
                 num_cpu_devices: int = 1, inter_op_threads: int = 4, fuse_loops: bool = True,
                 parallel_ops: bool = False, local_task: tuple[str, int] = LOCAL_TASK,
                 allow_soft_placement: bool = False, state: SessionState | None = None, config=None):
        if isinstance(graph, str):  # TensorFlow 1.x's Session(target, graph=, config=)
            graph, target = None, graph or None
        if config is not None and getattr(config, "inter_op_parallelism_threads", 0):
            inter_op_threads = config.inter_op_parallelism_threads
        if config is not None and getattr(config, "allow_soft_placement", False):
            allow_soft_placement = True
        self.config = config  # a tf.ConfigProto, kept for the script (see trainer.session_config)

        self.graph = graph or get_default_graph()
        names = list(devices) if devices is not None else available_devices(num_cpu_devices)
        names = [canonical_device(n) for n in names]
        self._devices = {n: Device(n) for n in names}
        if any(n.startswith("CPU") for n in names):
            keep_freed_memory()  # a CNN training step faulted in ~2,500-4,000 pages without it (88.9 vs 96 ms)
        self.target = target
        self.runtime = None  # the distributed runtime of a session with a target
        if target:
            from trainer.distributed.master import connect

            self.runtime = connect(target, names)
            local_task = self.runtime.task  # the session runs as its server's task, on that task's variables
            state = self.runtime.state if state is None else state
        self.cost_model = CostModel()
        self.local_task = TaskName(*local_task)
        self._placer = Placer(names, self.cost_model, self.local_task, soft_placement=allow_soft_placement)
        self._state = state if state is not None else SessionState()
        self._plans: dict = {}
        self._plan_lock = threading.Lock()
        self._compile_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(inter_op_threads, len(names)),
                                        thread_name_prefix="flowstack-partition", initializer=_quiet_floats)
        self._closed = False
        # Loops without nested control flow run as one step (flat sub-plans per iteration);
        # False keeps every loop on the frame-tagged dataflow executor (iterations may overlap).
        self.fuse_loops = fuse_loops
        # Run independent expensive ops of a step on the thread pool (see trainer/passes/schedule.py).
        self.parallel_ops = parallel_ops

    # -- running ----------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None, *, trace: bool = False):
        """Fetch values (same structure as ``fetches``) running only what they need.

        With ``options`` asking for a trace (``RunOptions(trace_level=FULL_TRACE)``) and a
        ``run_metadata``, the run times each kernel into ``run_metadata.step_stats``
        (``trainer.step_stats``); ``trace`` times them into the placer's cost model only.

        >>> import numpy as np, trainer
        >>> g = trainer.Graph()
        >>> with g.as_default():
        ...     x = trainer.placeholder(np.float32, (None, 2)); y = x * 2.0
        >>> trainer.Session(g).run(y, {x: np.ones((1, 2), np.float32)})
        array([[2., 2.]], dtype=float32)
        """
        if self._closed:
            raise RuntimeError("attempted to use a closed Session")
        if feed_dict and any(hasattr(k, "composite_parts") for k in feed_dict):
            feed_dict = _expand_composite_feeds(feed_dict)
        feed_keys = tuple(feed_dict) if feed_dict else ()
        try:
            key = (_fetch_key(fetches), feed_keys)
            compiled = self._plans.get(key)
        except TypeError:  # unhashable fetch structure: compile (uncached)
            key, compiled = None, None
        if compiled is None:
            with self._compile_lock:  # threads starting the same new plan compile (and register) it once
                compiled = self._plans.get(key) if key is not None else None
                if compiled is None:
                    compiled = self._compile(fetches, feed_keys, key)
        plan = compiled.plan
        feed_values = [spec.convert(feed_dict[k]) for spec, k in zip(plan.feeds, feed_keys)] if feed_keys else ()
        rctx = RunContext(self, Rendezvous() if plan.needs_rendezvous else None)
        wants_stats = run_metadata is not None and getattr(options, "trace_level", 0) > 0
        with np.errstate(all="ignore"):  # inf and nan are values in TensorFlow, not warnings
            if trace or wants_stats:
                values = self._run_traced(plan, feed_values, rctx, run_metadata if wants_stats else None)
            else:
                values = plan.run(feed_values, rctx, self._pool)
        if self._devices.keys() - {"CPU:0"}:
            values = [v if isinstance(v, np.ndarray) or v is None else _to_host(v) for v in values]
        values = [as_fetched_strings(v) if isinstance(v, np.ndarray) and v.dtype == object else v for v in values]
        if compiled.single:
            return values[0] if compiled.mapper.tensors else None
        return compiled.mapper.build(values)

    def _compile(self, fetches, feed_keys, key):
        mapper = _FetchMapper(self.graph, fetches)
        feed_tensors = []
        for k in feed_keys:
            t = _resolve(self.graph, k)
            if isinstance(t, Node):
                if len(t.outputs) != 1:
                    raise GraphError(f"cannot feed node {t.name!r}; feed one of its output tensors")
                t = t.outputs[0]
            feed_tensors.append(t)
        if self.runtime is not None:
            plan = self.runtime.compile(self.graph, mapper.tensors, mapper.targets, feed_tensors, self)
        else:
            plan = compile_plan(self.graph, mapper.tensors, mapper.targets, feed_tensors, self,
                                allow_remote=self.allow_remote)
        single = isinstance(fetches, (Tensor, Node)) or hasattr(fetches, "as_tensor") or isinstance(fetches, str)
        compiled = _Compiled(plan, mapper, feed_tensors, single)
        if key is not None:
            with self._plan_lock:
                self._plans[key] = compiled
        return compiled

    def _run_traced(self, plan, feed_values, rctx, run_metadata=None):
        """Runs step by step, timing each kernel into the cost model and, given ``run_metadata``,
        its ``step_stats`` (single partition only; other plans run untimed, with empty stats)."""
        if not isinstance(plan, FlatPlan) or len(plan.partitions) != 1:
            if run_metadata is not None:
                run_metadata.step_stats = StepStats()
            return plan.run(feed_values, rctx, self._pool)
        timings = []
        orig = plan.fast[0]
        wrapped = []
        for (fn, ins, outs, attrs, wants), step in zip(orig, plan.partitions[0][1]):
            def timed(*a, _fn=fn, _node=step.node, **kw):
                t0 = time.time()
                r = _fn(*a, **kw)
                timings.append((_node, t0, time.time()))
                return r
            wrapped.append((timed, ins, outs, attrs, wants))
        plan.fast[0] = wrapped
        try:
            return plan.run(feed_values, rctx, self._pool)
        finally:
            plan.fast[0] = orig
            for node, start, end in timings:
                self.cost_model.record(node, end - start)
            if run_metadata is not None:
                run_metadata.step_stats = step_stats_of(str(plan.partitions[0][0]), timings)

    # -- state access (exporter, saver) ------------------------------------------------------
    def variable_values(self) -> dict[str, np.ndarray]:
        """Copies of every initialized variable's value, by variable name."""
        return {k: _to_host(v).copy() for k, v in self._state.variables.items()}

    @property
    def graph_def(self):
        """The session's graph serialized (TF1's ``sess.graph_def``)."""
        return self.graph.as_graph_def()

    def close(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=False)
        if self.runtime is not None:
            self.runtime.close()  # the other tasks drop this session's partitions

    def as_default(self):
        """``with sess.as_default():`` makes this the session ``tensor.eval()`` and ``op.run()`` use."""
        return pushed_session(self)

    def __enter__(self):
        """``with Session() as sess:`` makes it the default session and its graph the default graph."""
        self._default = contextlib.ExitStack()
        self._default.enter_context(self.graph.as_default())
        self._default.enter_context(self.as_default())
        return self

    def __exit__(self, *exc):
        self._default.__exit__(*exc)
        self.close()
        return False

    @property
    def devices(self) -> list[str]:
        return list(self._devices)

    # -- what the plan compiler, kernels and the exporter read ------------------------------------
    @property
    def placer(self) -> Placer:
        """The placer this session's plans are placed with."""
        return self._placer

    @property
    def state(self) -> SessionState:
        """Variable buffers, queues and random state: what outlives a step."""
        return self._state

    def device(self, name: str) -> Device:
        """The ``Device`` named ``name``: a short name (``"CPU:0"``) or a full name of this session's
        task (``"/job:localhost/replica:0/task:0/device:CPU:0"``)."""
        device = self._devices.get(name)
        if device is None:
            spec = DeviceSpec.parse(name)
            device = self._devices.get(spec.local_name) if spec.is_local(self.local_task) else None
            if device is None:
                raise ValueError(f"device {name!r} is not one of this session's devices {list(self._devices)} "
                                 f"on {self.local_task}")
        return device


def as_fetched_strings(value: np.ndarray):
    """A fetched string tensor as TensorFlow 1.x returns it: its elements ``bytes`` (UTF-8 for text),
    a scalar as a ``bytes`` object; other object arrays (sequences, tensor lists) as they are."""
    flat = value.reshape(-1)
    if not all(isinstance(e, (str, bytes)) for e in flat):
        return value
    encoded = np.empty(value.shape, dtype=object)
    encoded.reshape(-1)[:] = [e.encode() if isinstance(e, str) else e for e in flat]
    return encoded[()] if value.ndim == 0 else encoded


def _to_host(v):
    if isinstance(v, np.ndarray) or v is None:
        return v
    return v.get() if hasattr(v, "get") else np.asarray(v)
