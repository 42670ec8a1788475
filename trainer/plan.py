"""Plan types: what the plan compiler (``trainer/executor.py``, ``trainer/passes/``) produces and
sessions run. A leaf module: it imports nothing of the trainer core but its error types and the
dataflow executor (itself a leaf), so state, queues, checkpoints, partitioning and the compiler
can all import it.

- ``Step``: one kernel call: ``fn(*vals[ins], **attrs)`` (with the ``RunContext`` first when
  ``wants_ctx``), writing ``vals[outs]`` (one slot or a tuple of slots).
- ``FeedSpec``: how one fed value is checked and converted.
- ``FlatPlan``: straight-line steps per partition over a list of value slots; ``run`` does no
  graph work at all. ``DataflowPlan``: the same steps run by the frame-tagged ready-queue
  executor (graphs with control flow).
- ``TaskName``, ``RendezvousKey``, ``Partition``, ``RemotePartition``, ``SubgraphNode``: what the
  partition pass returns; a remote partition's ``subgraph`` (graph nodes by name, and the Send/Recv
  nodes of its cross-task transfers) is what the distributed runtime registers on that task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from trainer.dataflow_executor import run_dataflow
from trainer.errors import GraphError, KernelError, node_error

__all__ = ["DataflowPlan", "FeedSpec", "FlatPlan", "Partition", "RemotePartition", "RendezvousKey", "Step",
           "SubgraphNode", "SyntheticNode", "TaskName", "format_shape", "run_steps", "step_outputs"]


class Step:
    """One kernel call in a plan."""

    __slots__ = ("node", "fn", "ins", "outs", "attrs", "wants_ctx", "device")

    def __init__(self, node, fn, ins, outs, attrs, wants_ctx, device):
        self.node, self.fn, self.ins, self.outs = node, fn, ins, outs
        self.attrs, self.wants_ctx, self.device = attrs, wants_ctx, device


def step_outputs(step: Step) -> tuple:
    """The slots a step writes, as a tuple."""
    return (step.outs,) if step.outs.__class__ is int else tuple(step.outs)


class TaskName(NamedTuple):
    """A task of a cluster: ``("worker", 1)`` is ``/job:worker/task:1``."""

    job: str
    index: int

    def __str__(self) -> str:
        return f"/job:{self.job}/task:{self.index}"


@dataclass(frozen=True)
class RendezvousKey:
    """Names one Send/Recv transfer. Built from the graph tensor's name and the two device names,
    so it is the same on every task and across recompiles of the same graph."""

    tensor_name: str
    send_device: str
    recv_device: str

    @property
    def key(self) -> str:
        return f"{self.send_device};{self.recv_device};{self.tensor_name}"


class Partition(NamedTuple):
    """The steps one device of one task runs, in order. ``device`` is a local device name
    (``"CPU:0"``) on the local task, a full one (``"/job:ps/replica:0/task:0/device:CPU:0"``) on
    another task."""

    device: str
    steps: list


class SyntheticNode:
    """Stands in for a graph node in error messages for steps a pass adds (Send, Recv)."""

    domain = "flowstack"

    def __init__(self, name: str, op_type: str):
        self.name, self.op_type, self.control_inputs, self.inputs = name, op_type, [], []


@dataclass
class SubgraphNode:
    """One node of a task's share of a plan, as that task rebuilds it in its own graph.

    ``node`` is a graph node (kept with its attributes and device constraint), or None for a node
    the partitioner adds: ``op`` is then ``"Send"`` / ``"Recv"`` (a cross-task transfer under
    ``key``; a Recv's value has the type of ``tensor``, or is a scalar token when ``tensor`` is None)
    or ``"Token"`` (the scalar a Send of a control edge carries). ``inputs`` and
    ``control_inputs`` name tensors and nodes of the task's graph. ``run``: whether the task runs
    it every step (False for a constant or a written variable it only refers to).
    ``may_be_dead``: a Recv whose value may be dead (the task then runs the dataflow executor).
    """

    name: str
    op: str
    inputs: list
    control_inputs: list
    node: object = None
    key: RendezvousKey | None = None
    tensor: object = None
    run: bool = True
    may_be_dead: bool = False  # a Recv of a value from a cond branch


@dataclass
class RemotePartition:
    """What one other task runs for a plan: its partitions and the transfers joining them to the
    rest. ``sends``: values this task sends to other tasks; ``recvs``: values it receives.
    ``subgraph``: what is shipped to the task, in a run order that cannot deadlock against the
    other tasks' (see ``trainer/passes/subgraph.py``)."""

    task: TaskName
    partitions: list[Partition]
    sends: list[RendezvousKey] = field(default_factory=list)
    recvs: list[RendezvousKey] = field(default_factory=list)
    subgraph: list[SubgraphNode] = field(default_factory=list)

    @property
    def nodes(self) -> list:
        """The graph nodes this task runs (not the Send/Recv steps the partitioner added)."""
        return [s.node for p in self.partitions for s in p.steps if not isinstance(s.node, SyntheticNode)]


class FeedSpec:
    """How to check and convert one fed value; errors name the tensor, expected and actual."""

    __slots__ = ("tensor", "dtype", "rank", "known_dims", "slot")

    def __init__(self, tensor, slot: int):
        self.tensor = tensor
        self.slot = slot
        self.dtype = tensor.dtype
        shape = tensor.shape
        self.rank = None if shape is None else len(shape)
        self.known_dims = () if shape is None else tuple((i, d) for i, d in enumerate(shape) if d is not None)

    def convert(self, value):
        dt = self.dtype
        if type(value) is not np.ndarray or (dt is not None and value.dtype != dt):
            value = self._coerce(value)
        if self.rank is not None:
            shape = value.shape
            if len(shape) != self.rank or any(shape[i] != d for i, d in self.known_dims):
                raise ValueError(
                    f"cannot feed value of shape {shape} for tensor {self.tensor.name!r}, "
                    f"which has shape {format_shape(self.tensor.shape)}"
                )
        return value

    def _coerce(self, value):
        dt = self.dtype
        if hasattr(value, "__cuda_array_interface__"):
            return value
        if isinstance(value, np.ndarray) or isinstance(value, np.generic):
            arr = np.asarray(value)
            if dt is not None and arr.dtype != dt:
                if not np.can_cast(arr.dtype, dt, casting="same_kind") or (arr.dtype.kind == "b") != (dt.kind == "b"):
                    raise TypeError(
                        f"cannot feed value of dtype {arr.dtype} for tensor {self.tensor.name!r}, "
                        f"which has dtype {dt}"
                    )
                arr = arr.astype(dt)
            return arr
        try:
            arr = np.asarray(value, dtype=dt)
        except (TypeError, ValueError) as e:
            raise TypeError(f"cannot feed {type(value).__name__} for tensor {self.tensor.name!r} ({dt}): {e}") from None
        return arr


def format_shape(shape) -> str:
    if shape is None:
        return "<unknown>"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


class FlatPlan:
    """Straight-line steps over value slots; one partition per local device, joined by Send/Recv.

    ``remote_partitions`` lists what other tasks run for this plan (empty in one process).
    ``levels`` is set by the schedule pass when independent steps may run concurrently.
    """

    levels = None
    uploads: list = []  # (host slot, device slot, Device): feeds read on a GPU (trainer.devices.stage_host_inputs)

    def __init__(self, partitions, template, feeds, fetch_slots, copy_fetch, remote_partitions=()):
        self.partitions = partitions  # list of (device, [Step]), main partition first
        self.template = template
        self.feeds = feeds
        self.fetch_slots = fetch_slots
        self.copy_fetch = copy_fetch
        self.remote_partitions = list(remote_partitions)
        self.needs_rendezvous = len(partitions) > 1 or bool(self.remote_partitions)
        # The hot loop reads plain tuples.
        self.fast = [
            [(s.fn, s.ins, s.outs, s.attrs, s.wants_ctx) for s in steps] for _, steps in partitions
        ]
        self.steps = [s for _, steps in partitions for s in steps]

    def run(self, feed_values, rctx, pool=None):
        vals = self.template[:]
        for spec, v in zip(self.feeds, feed_values):
            vals[spec.slot] = v
        for host_slot, device_slot, device in self.uploads:  # feeds read on a GPU: copied up once
            vals[device_slot] = device.from_host(vals[host_slot])
        fast = self.fast
        if self.levels is not None and pool is not None:
            for light, light_objs, heavy in self.levels:
                futures = [pool.submit(run_steps, f, vals, rctx, objs) for f, objs in heavy[1:]]
                if heavy:
                    run_steps(heavy[0][0], vals, rctx, heavy[0][1])
                if light:
                    run_steps(light, vals, rctx, light_objs)
                for fut in futures:
                    fut.result()
        elif len(fast) == 1:
            run_steps(fast[0], vals, rctx, self.partitions[0][1])
        else:
            futures = [pool.submit(run_steps, f, vals, rctx, p[1]) for f, p in zip(fast[1:], self.partitions[1:])]
            try:
                run_steps(fast[0], vals, rctx, self.partitions[0][1])
            except BaseException:
                rctx.rendezvous.abort()
                raise
            for fut in futures:
                fut.result()
        out = [vals[s] for s in self.fetch_slots]
        for i in self.copy_fetch:
            out[i] = out[i].copy()
        return out


def run_steps(steps, vals, rctx, step_objs) -> None:
    """Run one partition's steps (``(fn, ins, outs, attrs, wants_ctx)`` tuples) over ``vals``."""
    try:
        for fn, ins, outs, attrs, wants_ctx in steps:
            if wants_ctx:
                r = fn(rctx, *[vals[i] for i in ins], **attrs)
            else:
                r = fn(*[vals[i] for i in ins], **attrs)
            if outs.__class__ is int:
                # kernels may return more outputs than the node keeps (MaxPool's indices)
                vals[outs] = r[0] if r.__class__ is tuple else r
            else:
                if r.__class__ is not tuple and r.__class__ is not list:
                    r = (r,)
                for s, v in zip(outs, r):
                    vals[s] = v
    except (GraphError, KernelError):
        raise
    except Exception as e:
        if rctx.rendezvous is not None:
            rctx.rendezvous.abort()
        failed = _failed_step(step_objs, vals)
        if failed is None:
            raise
        raise node_error(failed.node, e) from e


def _failed_step(steps, vals):
    # Output slots start as None and are filled in order, so the first unfilled one failed.
    for s in steps:
        first = s.outs if s.outs.__class__ is int else (s.outs[0] if s.outs else None)
        if first is not None and vals[first] is None:
            return s
    return None


class DataflowPlan:
    """Steps run by a ready queue over (frame, iteration)-tagged values, with dead-branch propagation."""

    def __init__(self, steps, consumers, controls, template, feeds, fetch_slots, copy_fetch, slot_owner, fetch_names):
        self.steps = steps
        self.consumers = consumers  # slot -> [(step index, input position)]
        self.controls = controls  # step index -> the steps it waits for without reading them
        self.template = template
        self.feeds = feeds
        self.fetch_slots = fetch_slots
        self.copy_fetch = copy_fetch
        self.slot_owner = slot_owner
        self.fetch_names = fetch_names
        self.partitions = [("", steps)]
        self.remote_partitions: list = []
        self.needs_rendezvous = False
        self.schedule = None  # the dataflow executor's per-step facts, built on the first run

    def run(self, feed_values, rctx, pool=None):
        return run_dataflow(self, feed_values, rctx)
