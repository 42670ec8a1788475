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
- each transfer is named by a ``RendezvousKey`` built from the graph tensor's name and full
  device names (short names within the local task), so keys are the same on every task and on
  every recompile of the same graph.

``partition(...)`` returns the local partitions (main device first) and one
``RemotePartition`` per other task, holding its partitions and the keys it sends and receives:
what the distributed runtime registers on that task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

from trainer.devices import DeviceSpec, full_device_name
from trainer.kernels.training import recv, send
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


def partition(steps: Sequence[Step], template: list, slot_names: dict, *, local_task: TaskName,
              feed_slots: Sequence[int] = (), fetch_slots: Sequence[int] = ()) -> Partitioned:
    """Split ``steps`` by (task, device) with Send/Recv pairs (see the module docstring).

    ``template`` gains a slot per Recv (and per Send's unused output); ``fetch_slots`` comes back
    with the slots the local task reads each fetch from.
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
    return _Partitioner(template, slot_names, local_task, groups).run(steps, feed_slots, fetch_slots)


class _Partitioner:
    def __init__(self, template, slot_names, local_task, groups):
        self.template = template
        self.slot_names = slot_names
        self.local_task = local_task
        local = [g for g in groups if g[0] == local_task]
        self.main = local[0] if local else (local_task, "CPU:0")
        self.groups = list(dict.fromkeys([self.main] + groups))
        self.steps_of: dict = {g: [] for g in self.groups}
        self.producer: dict[int, tuple] = {}  # slot -> group
        self.received: dict[tuple, int] = {}  # (slot, group) -> the slot the group reads it from
        self.task_received: dict[tuple, tuple] = {}  # (slot, task) -> (group, slot) of its cross-task Recv
        self.pending_sends: dict[int, list] = {}  # slot -> Sends to emit right after its producer
        self.early_sends: list = []  # Sends of fed values (no producer step): first in the main partition
        self.sends: dict = {}  # task -> [RendezvousKey]
        self.recvs: dict = {}
        self.feeds: set = set()

    def run(self, steps, feed_slots, fetch_slots) -> Partitioned:
        groups = [locate(s.device, self.local_task) for s in steps]
        for s, group in zip(steps, groups):
            s.device = group[1]
            for o in step_outputs(s):
                self.producer[o] = group
        for slot in feed_slots:
            self.producer.setdefault(slot, self.main)
        self.feeds = set(feed_slots)
        for s, group in zip(steps, groups):
            s.ins = tuple(self._read(slot, group) for slot in s.ins)
            self.steps_of[group].append(s)
        # A fetch produced on another local device is read from the shared slots after the run;
        # one produced on another task is received by the main device.
        fetches = [slot if self.producer.get(slot, self.main)[0] == self.local_task else self._read(slot, self.main)
                   for slot in fetch_slots]
        self._place_sends()
        local = [Partition(g[1], self.steps_of[g]) for g in self.groups if g[0] == self.local_task]
        remote = []
        for task in dict.fromkeys(g[0] for g in self.groups if g[0] != self.local_task):
            parts = [Partition(g[1], self.steps_of[g]) for g in self.groups if g[0] == task]
            remote.append(RemotePartition(task, parts, self.sends.get(task, []), self.recvs.get(task, [])))
        return Partitioned(local, remote, fetches)

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
        else:
            self.pending_sends.setdefault(slot, []).append(sender)
        r = _new_slot(self.template)
        self.slot_names[r] = name  # a further hop of the received value carries the tensor's name
        self.steps_of[dst].append(Step(SyntheticNode(f"_recv/{name}", "Recv"), recv, (), r, attrs, True, dst[1]))
        self.producer[r] = dst
        if cross_task:
            key = RendezvousKey(name, send_device, recv_device)
            self.sends.setdefault(src[0], []).append(key)
            self.recvs.setdefault(dst[0], []).append(key)
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
                for o in step_outputs(s):
                    if self.producer.get(o) == group:
                        out.extend(self.pending_sends.pop(o, []))
            self.steps_of[group] = out


def _new_slot(template) -> int:
    template.append(None)
    return len(template) - 1
