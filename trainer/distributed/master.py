"""The master side of a distributed session: compile a (fetches, feeds) pair once, run it per step.

``compile`` partitions the pruned graph by task (``partition_by_task``), registers each other
task's partition on that task once (after waiting, bounded, for the task to come up) and compiles
its own task's partition in-process. A step then gets a fresh step id, starts RunStep on every
remote task, runs the local partition, and waits for all of them; the first failure aborts the step
on every task taking part (their waiting Recvs fail at once), and that first error is raised.
"""

from __future__ import annotations

import secrets
from typing import Sequence

from trainer.distributed.errors import AbortedError, DistributedError
from trainer.distributed.server import Server, server_for_target
from trainer.distributed.task_partition import TaskAssigner, partition_by_task
from trainer.graph import Node, Tensor

__all__ = ["DistributedPlan", "DistributedRuntime", "connect"]


def connect(target: str, devices: Sequence[str] = ("CPU:0",)) -> "DistributedRuntime":
    """The runtime of the in-process server whose target is ``target``; ``devices`` are the
    session's own (where the nodes it keeps may be placed)."""
    return DistributedRuntime(server_for_target(target), devices)


class DistributedRuntime:
    """Compiles plans whose partitions run on the tasks of ``server``'s cluster."""

    def __init__(self, server: Server, devices: Sequence[str] = ("CPU:0",)):
        self.server, self.devices = server, list(devices)
        self._ready: set[str] = set()
        self._registered: list = []  # (peer, handle) of every partition this session registered

    def compile(self, graph, fetch_tensors: Sequence[Tensor], target_nodes: Sequence[Node], feed_tensors, session):
        server = self.server
        parts = partition_by_task(graph, fetch_tensors, target_nodes, feed_tensors, server.cluster, server.task,
                                  self.devices)
        remote = []
        for task, part in parts.items():
            if task == server.task:
                continue
            peer = server.peer(task)
            self._ensure_ready(task)
            handle = peer.register(_desc(part), part.arrays)
            remote.append((peer, handle))
            self._registered.append((peer, handle))
        local_part = parts[server.task]
        local = server.service.build_partition(_desc(local_part), local_part.arrays)
        return DistributedPlan(server, local, remote)

    def close(self) -> None:
        """Ask every task to drop the partitions this session registered there (best effort:
        a task that is gone has nothing to drop)."""
        registered, self._registered = self._registered, []
        for peer, handle in registered:
            try:
                peer.deregister(handle)
            except DistributedError:
                pass

    def uninitialized_variables(self, variables) -> list[str]:
        """Names of ``variables`` that the tasks holding them have no value for yet."""
        server = self.server
        assign = TaskAssigner(server.cluster, server.task, [v.node for v in variables], self.devices)
        by_task: dict[str, list[str]] = {}
        for v in variables:
            by_task.setdefault(assign(v.node)[0], []).append(v.node.attrs["shared_name"])
        missing = []
        for task, names in by_task.items():
            if task == server.task:
                missing += [n for n in names if n not in server.service.state.variables]
                continue
            self._ensure_ready(task)
            missing += server.peer(task).uninitialized(names)
        return missing

    def _ensure_ready(self, task: str) -> None:
        if task not in self._ready:
            self.server.peer(task).wait_ready(self.server.startup_timeout)
            self._ready.add(task)


def _desc(part) -> dict:
    return {"graph": part.graph_dict(), "targets": part.targets, "fetches": part.fetches, "feeds": part.feeds,
            "remote_sources": part.remote_sources}


class DistributedPlan:
    """A plan spanning tasks; ``run`` has the single-process plans' signature."""

    def __init__(self, server: Server, local, remote):
        self.server, self.local, self.remote = server, local, remote
        self.feeds = local.feeds
        # As far as Session.run is concerned: one partition, which brings its own rendezvous.
        self.partitions = [(server.task, [])]
        self.remote_partitions: list = []
        self.needs_rendezvous = False

    def run(self, feed_values, rctx=None, pool=None) -> list:
        step_id = secrets.randbits(63)
        futures = [(peer, peer.run_step_future(handle, step_id)) for peer, handle in self.remote]
        errors: list[BaseException] = []
        values = None
        try:
            values = self.local.run(step_id, feed_values)
        except Exception as e:  # noqa: BLE001 - collected, the first real one is raised below
            errors.append(e)
            self._abort(step_id, e)
        for peer, future in futures:
            try:
                peer.result_of_step(future)
            except Exception as e:  # noqa: BLE001
                if not errors:
                    self._abort(step_id, e)
                errors.append(e)
        if errors:
            raise _first_cause(errors)
        return values

    def _abort(self, step_id: int, error: BaseException) -> None:
        reason = f"{type(error).__name__}: {error}"
        self.server.service.table.abort(step_id, reason)
        for peer, _ in self.remote:
            try:
                peer.abort(step_id, reason)
            except Exception:  # noqa: BLE001 - an unreachable peer has no step to abort
                pass


def _first_cause(errors: list[BaseException]) -> BaseException:
    """The first error that is not just another task noticing the abort; a kernel's error that a
    peer caused (unreachable, timed out) keeps the peer error's type and the node's name."""
    first = next((e for e in errors if not isinstance(e, AbortedError) and "was aborted" not in str(e)), errors[0])
    cause = first.__cause__
    if isinstance(cause, DistributedError) and not isinstance(first, DistributedError):
        return type(cause)(str(first))
    return first
