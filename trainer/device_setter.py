"""``replica_device_setter``: variables on parameter-server tasks, everything else on the worker.

A device function for ``trainer.device(...)``: each node whose op is a variable goes to a PS task
chosen by a strategy, every other node to the worker device. Nodes that update a variable
(Assign, optimizer applies, slots) are colocated with it, so they follow it to its PS task.

The default strategy balances bytes greedily (each variable to the PS task with the fewest bytes
so far). TensorFlow's default was round robin, which put 93.7 MB on one PS and 0.7 MB on another
when variable sizes alternate (tensorflow#24953); ``RoundRobinStrategy`` is kept for comparison.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Iterable

import numpy as np

from trainer.devices import DeviceSpec
from trainer.graph import Node

__all__ = [
    "GreedyLoadBalancingStrategy",
    "RoundRobinStrategy",
    "STANDARD_PS_OPS",
    "byte_size_load_fn",
    "replica_device_setter",
]

# Ops that hold state a PS serves: variables and the shards of partitioned variables (TF's names).
STANDARD_PS_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "VarHandleOp", "MutableHashTable",
                   "MutableHashTableOfTensors", "MutableDenseHashTable")


def byte_size_load_fn(node: Node) -> int:
    """Bytes of the variable ``node`` outputs (its dtype size times its element count)."""
    out = node.outputs[0] if node.outputs else None
    if out is None or out.shape is None or out.dtype is None or any(d is None for d in out.shape):
        raise ValueError(f"byte_size_load_fn: node {node.name!r} ({node.op_type}) has no fully known shape and dtype")
    return math.prod(out.shape) * np.dtype(out.dtype).itemsize


class RoundRobinStrategy:
    """PS task ``0, 1, ..., n-1, 0, ...`` in creation order, whatever the sizes (TensorFlow's default)."""

    def __init__(self, num_tasks: int):
        if num_tasks <= 0:
            raise ValueError(f"RoundRobinStrategy: num_tasks must be positive, got {num_tasks}")
        self.num_tasks = num_tasks
        self._next = 0

    def __call__(self, node: Node) -> int:
        task = self._next
        self._next = (self._next + 1) % self.num_tasks
        return task


class GreedyLoadBalancingStrategy:
    """Each node to the task with the least load so far (ties to the lowest index); ``load_fn(node)``
    measures a node's load, bytes by default. ``loads`` shows the result."""

    def __init__(self, num_tasks: int, load_fn: Callable[[Node], float] = byte_size_load_fn):
        if num_tasks <= 0:
            raise ValueError(f"GreedyLoadBalancingStrategy: num_tasks must be positive, got {num_tasks}")
        self.num_tasks = num_tasks
        self.load_fn = load_fn
        self.loads = [0] * num_tasks

    def __call__(self, node: Node) -> int:
        task = min(range(self.num_tasks), key=lambda i: (self.loads[i], i))
        self.loads[task] += self.load_fn(node)
        return task


def _ps_tasks_of(cluster, ps_device: str) -> int:
    jobs = cluster.as_dict() if hasattr(cluster, "as_dict") else dict(cluster)
    job = DeviceSpec.parse(ps_device).job or "ps"
    tasks = jobs.get(job, [])
    return len(tasks) if isinstance(tasks, (list, tuple)) else len(dict(tasks))


def replica_device_setter(ps_tasks: int = 0, ps_device: str = "/job:ps", worker_device: str = "/job:worker",
                          merge_devices: bool = True, cluster=None, ps_ops: Iterable[str] | None = None,
                          ps_strategy: Callable[[Node], int] | None = None):
    """A device function: variable ops to ``ps_device`` task ``ps_strategy(node)``, others to ``worker_device``.

    ``cluster`` (a ClusterSpec or a ``{"ps": [...], ...}`` dict) gives the number of PS tasks; else
    ``ps_tasks`` does. With no PS task it returns None (no constraint), as TensorFlow's does. A
    device already chosen by an outer scope keeps the parts it sets (``merge_devices``).
    """
    if cluster is not None:
        ps_tasks = _ps_tasks_of(cluster, ps_device)
    if ps_tasks < 0:
        raise ValueError(f"replica_device_setter: ps_tasks must be >= 0, got {ps_tasks}")
    if ps_tasks == 0:
        return None
    if not merge_devices:
        raise ValueError("replica_device_setter: merge_devices=False is not supported (TF deprecated it)")
    strategy = ps_strategy or GreedyLoadBalancingStrategy(ps_tasks)
    ps_ops = frozenset(ps_ops if ps_ops is not None else STANDARD_PS_OPS)
    ps_spec = DeviceSpec.parse(ps_device)
    worker_spec = DeviceSpec.parse(worker_device or "")

    def device_function(node: Node) -> str:
        current = DeviceSpec.parse(node.device or "")  # what outer device scopes chose: it wins
        if node.op_type in ps_ops:
            spec = ps_spec
            if spec.job and (current.job is None or current.job == spec.job):
                task = strategy(node)
                if not 0 <= task < ps_tasks:
                    raise ValueError(f"replica_device_setter: strategy chose PS task {task} for {node.name!r}; "
                                     f"the cluster has {ps_tasks}")
                spec = replace(spec, task=task)
            return str(current.merged_over(spec))
        return str(current.merged_over(worker_spec))

    device_function.ps_strategy = strategy
    return device_function
