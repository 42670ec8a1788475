"""Partitioning by task: the subgraph a (fetches, feeds) pair needs, split into one graph per task.

Each node goes to the task the placer puts it on (``trainer.placement``: the node it is colocated
with, so an optimizer update goes where its variable lives; else the task its device or device
function names, ``/job:ps/task:0``; else the task running the session). Every value crossing tasks becomes a Send in its producer's graph and a Recv
in its consumer's (one per tensor and receiving task, whatever the number of readers); a control
edge across tasks sends a scalar token. Fetched values are sent to the session's task, fed values
start there. Each task's graph comes out in ``graph_to_dict``'s format (no pickle), ready to be
registered once on that task and run every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from trainer.devices import DeviceSpec
from trainer.distributed.cluster import ClusterSpec, split_task_name
from trainer.graph import GraphError, Node, Tensor
from trainer.passes.partition import locate
from trainer.placement import Placer
from trainer.plan import TaskName
from trainer.saver import FORMAT_VERSION, node_to_dict

__all__ = ["TaskAssigner", "TaskGraph", "TaskPlacementError", "partition_by_task"]

D = "flowstack"
# The local device every cross-task Send/Recv runs on (each task's session has it).
HOST = "CPU:0"


class TaskPlacementError(GraphError):
    """A node constrained to a task outside the cluster; names the node and the task."""


@dataclass
class TaskGraph:
    """What one task runs per step: its graph, the nodes to run, and (on the session's task) the
    tensors to fetch and the placeholders standing for the feeds."""

    task: str
    nodes: list[dict] = field(default_factory=list)
    arrays: dict = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)
    fetches: list[str] = field(default_factory=list)   # tensor names, session's task only
    feeds: list[str] = field(default_factory=list)     # placeholder tensor names, one per feed
    remote_sources: dict[str, str] = field(default_factory=dict)  # Recv tensor_name -> sending task
    _keys: list = field(default_factory=list)
    _kinds: list = field(default_factory=list)

    def add(self, record: dict, key: tuple, kind: str = "") -> None:
        """Add a node record at ``key`` in the global order (see ``order``)."""
        self._keys.append((*key, len(self._keys)))
        self._kinds.append(kind)
        self.nodes.append(record)

    def order(self) -> None:
        """Sort the records by one global topological order of all tasks' nodes and make every
        Recv wait (control edge) for the Sends that come before it in that order, Sends in order.

        Each task runs its partition straight through; without these edges a Recv could block
        the task before it sent what its peer is waiting for (a deadlock across tasks). With
        them, a blocked Recv always waits for a Send that is earlier in the global order, so
        the waits cannot form a cycle.
        """
        ranked = sorted(range(len(self.nodes)), key=self._keys.__getitem__)
        self.nodes = [self.nodes[i] for i in ranked]
        self._kinds = [self._kinds[i] for i in ranked]
        self._keys = [self._keys[i] for i in ranked]
        last_send = None
        for rec, kind in zip(self.nodes, self._kinds):
            if kind in ("send", "recv") and last_send is not None and last_send not in rec["control_inputs"]:
                rec["control_inputs"] = [*rec["control_inputs"], last_send]
            if kind == "send":
                last_send = rec["name"]

    def graph_dict(self) -> dict:
        return {"format": "flowstack-graph", "version": FORMAT_VERSION, "nodes": self.nodes,
                "collections": {}, "loops": [], "conds": []}


def _needed(roots: Sequence[Node], fed: set) -> set[Node]:
    seen: set = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        ctx = n.cf_context
        while ctx is not None:  # a loop runs whole (its stack pushes feed its gradient loop)
            stack.extend(getattr(ctx, "loop_nodes", None) or ())
            ctx = ctx.outer
        stack.extend(t.node for t in n.inputs if t is not None and t not in fed)
        stack.extend(n.control_inputs)
    return seen


class TaskAssigner:
    """Node -> (task, local device constraint): the placer's decision (user constraints, device
    functions, colocation, updates where their variable lives), read for its task."""

    def __init__(self, cluster: ClusterSpec, local_task: str, nodes, devices=("CPU:0",)):
        self.cluster, self.local_task = cluster, local_task
        self.placer = Placer(list(devices), local_task=TaskName(*split_task_name(local_task)))
        self.placement = self.placer.place(sorted(nodes, key=lambda n: n.id))
        self.memo: dict[Node, tuple[str, str]] = {}

    def __call__(self, node: Node) -> tuple[str, str]:
        hit = self.memo.get(node)
        if hit is None:
            hit = self.memo[node] = self._assign(node)
        return hit

    def _assign(self, node: Node) -> tuple[str, str]:
        task, _ = locate(self.placement[node], self.placer.local_task)
        task = str(TaskName(*task))
        if not self.cluster.has_task(task):
            raise TaskPlacementError(f"node {node.name!r} ({node.op_type}) is placed on {task}, which is not in the "
                                     f"cluster (tasks: {', '.join(self.cluster.tasks())})")
        local = DeviceSpec.parse(node.device).local_name if node.device else None
        return task, local or ""


def partition_by_task(graph, fetch_tensors: Sequence[Tensor], target_nodes: Sequence[Node],
                      feed_tensors: Sequence[Tensor], cluster: ClusterSpec, local_task: str,
                      devices: Sequence[str] = ("CPU:0",)) -> dict[str, TaskGraph]:
    """One ``TaskGraph`` per task taking part, the session's task (``local_task``) first;
    ``devices`` are the session's own."""
    fed = set(feed_tensors)
    roots = [t.node for t in fetch_tensors if t not in fed] + list(target_nodes)
    needed = _needed(roots, fed)
    assign = TaskAssigner(cluster, local_task, needed, devices)
    parts: dict[str, TaskGraph] = {local_task: TaskGraph(local_task)}

    def part(task: str) -> TaskGraph:
        if task not in parts:
            parts[task] = TaskGraph(task)
        return parts[task]

    local = parts[local_task]
    feed_names: dict[Tensor, str] = {}
    for i, t in enumerate(feed_tensors):
        name = f"_feed/{i}"
        local.add(_node(name, "Placeholder", D, [], {"dtype": t.dtype.name if t.dtype is not None else "float32"},
                        [(t.dtype, t.shape)], [], attrs_shape=t.shape), (-1, 0))
        feed_names[t] = f"{name}:0"
        local.feeds.append(f"{name}:0")

    transfers: dict[tuple[str, str, str], str] = {}  # (sender, tensor name there, receiver) -> Recv output

    def transfer(src_task: str, src_name: str, dtype, shape, dst_task: str, produced_at: int, consumed_at) -> str:
        key = (src_task, src_name, dst_task)
        if key not in transfers:
            tensor_name = f"{src_task}/{src_name}->{dst_task}"
            attrs = {"tensor_name": tensor_name, "send_device": HOST, "recv_device": HOST}
            sender = part(src_task)
            send_name = f"_send/{_plain(src_name)}/to_{_plain(dst_task)}"
            sender.add(_node(send_name, "Send", D, [src_name], attrs, [(None, None)], [], device=HOST),
                       (produced_at, 3), kind="send")
            sender.targets.append(send_name)
            receiver = part(dst_task)
            recv_name = f"_recv/{_plain(src_name)}/from_{_plain(src_task)}"
            receiver.add(_node(recv_name, "Recv", D, [], attrs, [(dtype, shape)], [], device=HOST),
                         (consumed_at, 0), kind="recv")
            receiver.remote_sources[tensor_name] = src_task
            transfers[key] = f"{recv_name}:0"
        return transfers[key]

    copies: dict[tuple[Node, str], str] = {}

    def copy_constant(n: Node, task: str) -> str:
        """A constant read on another task is copied there (cheaper than sending it every step)."""
        if (n, task) not in copies:
            receiver = part(task)
            rec = node_to_dict(n, receiver.arrays)
            rec.update(name=f"{n.name}/on_{_plain(task)}", device="")
            receiver.add(rec, (n.id, 1))
            copies[(n, task)] = f"{rec['name']}:0"
        return copies[(n, task)]

    def value_on(t: Tensor, task: str, consumed_at) -> str:
        """The name under which task ``task`` reads tensor ``t``."""
        if t in fed:
            name = feed_names[t]
            return name if task == local_task else transfer(local_task, name, t.dtype, t.shape, task, -1, consumed_at)
        src_task = assign(t.node)[0]
        if src_task == task:
            return t.name
        if _is_plain_constant(t.node):
            return copy_constant(t.node, task)
        return transfer(src_task, t.name, t.dtype, t.shape, task, t.node.id, consumed_at)

    def controls_on(n: Node, task: str) -> list[str]:
        """``n``'s control inputs as seen on ``task``: a token per other task that runs after them."""
        names, remote = [], {}
        for c in n.control_inputs:
            src_task = assign(c)[0]
            if src_task == task:
                names.append(c.name)
            else:
                remote.setdefault(src_task, []).append(c)
        for src_task, deps in remote.items():
            name = f"_ctrl/{_plain(n.name)}/from_{_plain(src_task)}"
            sender = part(src_task)
            at = max(c.id for c in deps)
            sender.add(_node(name, "Constant", "", [], {"value": np.zeros((), np.int8)},
                             [(np.dtype(np.int8), ())], [c.name for c in deps], arrays=sender.arrays), (at, 2))
            names.append(transfer(src_task, f"{name}:0", np.dtype(np.int8), (), task, at, n.id).rpartition(":")[0])
        return names

    for n in sorted(needed, key=lambda n: n.id):
        task, device = assign(n)
        inputs = [None if t is None else value_on(t, task, n.id) for t in n.inputs]
        controls = controls_on(n, task)
        rec = node_to_dict(n, part(task).arrays)
        rec.update(inputs=inputs, control_inputs=controls, device=device)
        part(task).add(rec, (n.id, 1))
    for n in target_nodes:
        part(assign(n)[0]).targets.append(n.name)
    last = max((n.id for n in needed), default=0) + 1
    for t in fetch_tensors:
        local.fetches.append(value_on(t, local_task, last))
    for p in parts.values():
        p.order()
    return parts


def _is_plain_constant(n: Node) -> bool:
    return n.op_type == "Constant" and n.domain == "" and not n.inputs and not n.control_inputs


def _plain(name: str) -> str:
    """A tensor or task name made fit for a node name (no ':' to confuse "node:output")."""
    return name.replace("/job:", "").replace("/task:", ".").replace(":", "_")


def _node(name, op, domain, inputs, attrs, outputs, controls, device="", attrs_shape=None, arrays=None) -> dict:
    """A node record in ``node_to_dict``'s format for a node the partitioner adds."""
    if attrs_shape is not None:
        attrs = dict(attrs, shape=[-1 if d is None else int(d) for d in attrs_shape])
    encoded = {}
    for k, v in attrs.items():
        if isinstance(v, np.ndarray):
            arrays[f"{name}/{k}"] = v
            v = {"__array__": f"{name}/{k}"}
        encoded[k] = v
    return {"name": name, "op": op, "domain": domain, "inputs": inputs, "control_inputs": controls,
            "attrs": encoded, "device": device,
            "outputs": [{"dtype": None if dt is None else np.dtype(dt).name,
                         "shape": None if sh is None else [-1 if d is None else d for d in sh]} for dt, sh in outputs]}

