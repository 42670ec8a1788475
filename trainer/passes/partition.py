"""Partition: a plan's steps split by task and device, each value crossing them sent once.

Steps are grouped by where they were placed: ``(task, device)``. A local placement is a short
device name (``"CPU:0"``) on ``local_task``; a full name (``"/job:ps/replica:0/task:0/device:CPU:0"``)
is parsed for its task. Every input produced in another group becomes a Send step in the
producer's group and a Recv step in the consumer's:

- one Recv per (tensor, destination device) within a task, and one cross-task transfer per
  (tensor, destination task), whatever the number of readers: a second device of the same task
  gets the value from the task's first Recv by an ordinary local Send/Recv pair;
- a Send goes right after its producer, so receivers wake as early as possible;
- a fed value a remote task reads is sent from the main local device; a fetched value produced
  on a remote task is received there;
- a control edge across tasks sends a scalar token after its source runs (one per source node
  and destination task), received before the node that waits for it;
- each transfer is named by a ``RendezvousKey`` built from the graph tensor's name and full
  device names (short names within the local task), so keys are the same on every task and on
  every recompile of the same graph.

A plan with control flow runs on the dataflow executor, which starts a step when its inputs
are ready rather than in list order (``dataflow=True``): its local steps stay one group (the
executor handles its devices), and ``waits`` gives the order a list would have given: each
cross-task Send and Recv waits for the task's previous cross-task Send (as on remote tasks, see
``passes/subgraph.py``), a token's Send for the node it stands for, and a node for the token
Recv of its control edge from another task. No value crosses tasks inside a loop frame
(``passes/frames.py``); one from a cond branch may be dead, and its Recv says so
(``may_be_dead``: the receiving task then runs the dataflow executor too).

``partition(...)`` returns the local partitions (main device first) and one
``RemotePartition`` per other task, holding its partitions, the keys it sends and receives, and
its ``subgraph`` (``trainer/passes/subgraph.py``): the nodes the distributed runtime registers on
that task, which compiles them with this same pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

import numpy as np

from trainer.control_flow import may_be_dead
from trainer.devices import DeviceSpec, full_device_name
from trainer.kernels.training import recv, send
from trainer.passes.fuse_loops import LoopStep
from trainer.passes.subgraph import task_subgraph
from trainer.plan import Partition, RemotePartition, RendezvousKey, Step, SyntheticNode, TaskName, step_outputs

__all__ = ["Partitioned", "locate", "partition"]


@lru_cache(maxsize=256)
def locate(device: str, local_task: TaskName) -> tuple[TaskName, str]:
    """(task, device name) of a placement: short names stay short on the local task."""
    if not device.startswith("/"):
        return local_task, device
    spec = DeviceSpec.parse(device)
    if spec.is_local(local_task):
        return local_task, spec.local_name or "CPU:0"
    job, index = spec.task_name
    task = TaskName(job if job is not None else local_task.job, index)
    return task, full_device_name(spec.local_name or "CPU:0", task)


@dataclass
class Partitioned:
    """The partition pass's result."""

    local: list[Partition]
    remote: list[RemotePartition] = field(default_factory=list)
    fetch_slots: list[int] = field(default_factory=list)
    waits: dict[int, list[Step]] = field(default_factory=dict)  # id(step) -> steps it waits for (dataflow)


def partition(steps: Sequence[Step], template: list, slot_names: dict, *, local_task: TaskName,
              feed_slots: Sequence[int] = (), fetch_slots: Sequence[int] = (), tensors: dict | None = None,
              dataflow: bool = False) -> Partitioned:
    """Split ``steps`` by (task, device) with Send/Recv pairs (see the module docstring).

    ``template`` gains a slot per Recv (and per Send's unused output); ``fetch_slots`` comes back
    with the slots the local task reads each fetch from. ``tensors`` (graph tensors by name) gives
    a remote task's Recvs their types. ``dataflow``: the steps run on the dataflow executor.
    """
    local_task = TaskName(*local_task)
    where = {}  # placement -> (task, device)
    for s in steps:
        if s.device not in where:
            where[s.device] = locate(s.device, local_task)
    groups = list(dict.fromkeys(where.values()))
    if len(groups) <= 1 and (not groups or groups[0][0] == local_task):
        device = groups[0][1] if groups else "CPU:0"
        for s in steps:
            s.device = device
        return Partitioned([Partition(device, list(steps))], [], list(fetch_slots))
    return _Partitioner(template, slot_names, local_task, groups, tensors or {}, dataflow).run(
        steps, feed_slots, fetch_slots)


class _Partitioner:
    def __init__(self, template, slot_names, local_task, groups, tensors, dataflow):
        self.template = template
        self.slot_names = slot_names
        self.local_task = local_task
        self.tensors = tensors
        self.dataflow = dataflow
        local = [g for g in groups if g[0] == local_task]
        self.main = local[0] if local else (local_task, "CPU:0")
        if dataflow:
            groups = [g for g in groups if g[0] != local_task]
        self.groups = list(dict.fromkeys([self.main] + groups))
        self.steps_of: dict = {g: [] for g in self.groups}
        self.producer: dict[int, tuple] = {}  # slot -> group
        self.producer_step: dict[int, Step] = {}  # slot -> the step after which it can be sent
        self.received: dict[tuple, int] = {}  # (slot, group) -> the slot the group reads it from
        self.task_received: dict[tuple, tuple] = {}  # (slot, task) -> (group, slot) of its cross-task Recv
        self.pending_sends: dict[int, list] = {}  # id(step) -> Sends to emit right after it
        self.early_sends: list = []  # Sends of fed values (no producer step): first in the main partition
        self.sends: dict = {}  # task -> [RendezvousKey]
        self.recvs: dict = {}
        self.feeds: set = set()
        # One global order of every task's steps (3i for step i, a Recv it needs just before, a Send
        # just after its producer): a remote task's subgraph keeps it, see trainer/passes/subgraph.py.
        self.rank: dict[int, float] = {}
        self.now = -1
        self.cross: dict[int, RendezvousKey] = {}  # id(Send or Recv step) -> key of a cross-task transfer
        self.token_slots: dict = {}  # node -> the slot of the token its control edges send
        self.token_nodes: dict[int, object] = {}  # token slot -> its node
        self.token_sends: dict[int, object] = {}  # id(cross-task Send of a token) -> its node
        self.waits: dict[int, list[Step]] = {}  # id(step) -> steps it waits for besides its inputs
        self.dead_keys: set = set()  # cross-task transfers of values that may be dead (from a cond branch)

    def run(self, steps, feed_slots, fetch_slots) -> Partitioned:
        groups = [self._group(s.device) for s in steps]
        node_step = {}  # graph node -> (step, group), for control edges
        for i, (s, group) in enumerate(zip(steps, groups)):
            if group != self.main or not self.dataflow:
                s.device = group[1]
            self.rank[id(s)] = 3 * i
            for o in step_outputs(s):
                self.producer[o] = group
                self.producer_step[o] = s
            for n in (s.node.nodes if isinstance(s.node, LoopStep) else (s.node,)):
                node_step[n] = (s, group)
        for slot in feed_slots:
            self.producer.setdefault(slot, self.main)
        self.feeds = set(feed_slots)
        for i, (s, group) in enumerate(zip(steps, groups)):
            self.now = 3 * i - 1
            s.ins = tuple(self._read(slot, group) for slot in s.ins)
            for c in s.node.control_inputs:
                source = node_step.get(c)
                if source is not None and source[1][0] != group[0]:
                    token = self._read(self._token_slot(c, *source), group)
                    self.waits.setdefault(id(s), []).append(self.producer_step[token])
            self.steps_of[group].append(s)
        # A fetch produced on another local device is read from the shared slots after the run;
        # one produced on another task is received by the main device.
        self.now = 3 * len(steps)
        fetches = [slot if self.producer.get(slot, self.main)[0] == self.local_task else self._read(slot, self.main)
                   for slot in fetch_slots]
        self._place_sends()
        if self.dataflow:
            self._chain_transfers(self.steps_of[self.main])
        local = [Partition(g[1], self.steps_of[g]) for g in self.groups if g[0] == self.local_task]
        remote = []
        for task in dict.fromkeys(g[0] for g in self.groups if g[0] != self.local_task):
            parts = [Partition(g[1], self.steps_of[g]) for g in self.groups if g[0] == task]
            ordered = sorted((s for p in parts for s in p.steps), key=lambda s: self.rank[id(s)])
            subgraph = task_subgraph(ordered, self.cross, self.token_sends, self.tensors, self.dead_keys)
            remote.append(RemotePartition(task, parts, self.sends.get(task, []), self.recvs.get(task, []), subgraph))
        return Partitioned(local, remote, fetches, self.waits)

    def _group(self, device: str) -> tuple:
        group = locate(device, self.local_task)
        return self.main if self.dataflow and group[0] == self.local_task else group

    def _chain_transfers(self, steps) -> None:
        """Each cross-task Send and Recv of ``steps`` waits for the previous cross-task Send."""
        last_send = None
        for s in sorted((s for s in steps if id(s) in self.cross), key=lambda s: self.rank[id(s)]):
            if last_send is not None:
                self.waits.setdefault(id(s), []).append(last_send)
            if s.node.op_type == "Send":
                last_send = s

    def _token_slot(self, node, step, group) -> int:
        """The slot of the token a control edge from ``node`` (run by ``step`` on ``group``) sends."""
        slot = self.token_slots.get(node)
        if slot is None:
            slot = self.token_slots[node] = _new_slot(self.template)
            self.template[slot] = np.zeros((), np.int8)
            self.slot_names[slot] = f"^{node.name}"
            self.producer[slot] = group
            self.producer_step[slot] = step
            self.token_nodes[slot] = node
        return slot

    def _read(self, slot: int, group: tuple) -> int:
        """The slot ``group`` reads ``slot`` from, adding the transfers it needs."""
        src = self.producer.get(slot)
        if src is None or src == group or (slot in self.feeds and src[0] == group[0]):
            return slot  # a constant, a value of this group, or a fed value this task holds
        key = (slot, group)
        if key in self.received:
            return self.received[key]
        if src[0] == group[0]:
            r = self._transfer(slot, src, group)
        else:
            first = self.task_received.get((slot, group[0]))
            if first is None:
                r = self._transfer(slot, src, group)
                self.task_received[(slot, group[0])] = (group, r)
            else:
                first_group, first_slot = first
                r = first_slot if first_group == group else self._read(first_slot, group)
        self.received[key] = r
        return r

    def _transfer(self, slot: int, src: tuple, dst: tuple) -> int:
        name = self.slot_names.get(slot, f"slot{slot}")
        cross_task = src[0] != dst[0]
        send_device = self._key_device(src, cross_task)
        recv_device = self._key_device(dst, cross_task)
        attrs = {"tensor_name": name, "send_device": send_device, "recv_device": recv_device, "xp": None}
        sender = Step(SyntheticNode(f"_send/{name}", "Send"), send, (slot,), _new_slot(self.template),
                      dict(attrs), True, src[1])
        if slot in self.feeds:
            self.early_sends.append((src, sender))
            self.rank[id(sender)] = -1
        else:
            after = self.producer_step[slot]
            self.pending_sends.setdefault(id(after), []).append(sender)
            if slot in self.token_nodes:
                self.waits[id(sender)] = [after]  # a token is a constant: it waits for its node
            self.rank[id(sender)] = self.rank[id(after)] + 1
        r = _new_slot(self.template)
        self.slot_names[r] = name  # a further hop of the received value carries the tensor's name
        dead = cross_task and slot in self.producer_step and may_be_dead(self.producer_step[slot].node)
        receiver = Step(SyntheticNode(f"_recv/{name}", "Recv"), recv, (), r, dict(attrs, may_be_dead=int(dead)), True,
                        dst[1])
        self.steps_of[dst].append(receiver)
        self.rank[id(receiver)] = self.now
        self.producer[r] = dst
        self.producer_step[r] = receiver
        if cross_task:
            key = RendezvousKey(name, send_device, recv_device)
            self.sends.setdefault(src[0], []).append(key)
            self.recvs.setdefault(dst[0], []).append(key)
            self.cross[id(sender)] = self.cross[id(receiver)] = key
            if dead:
                self.dead_keys.add(key)
            if slot in self.token_nodes:
                self.token_sends[id(sender)] = self.token_nodes[slot]
        return r

    def _key_device(self, group, cross_task: bool) -> str:
        task, device = group
        if cross_task and task == self.local_task:
            return full_device_name(device, task)
        return device

    def _place_sends(self) -> None:
        for group, lst in self.steps_of.items():
            out = [s for g, s in self.early_sends if g == group]
            for s in lst:
                out.append(s)
                out.extend(self.pending_sends.pop(id(s), ()))
            self.steps_of[group] = out


def _new_slot(template) -> int:
    template.append(None)
    return len(template) - 1
