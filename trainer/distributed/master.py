"""The master side of a distributed session: compile a (fetches, feeds) pair once, run it per step.

``compile`` runs the single-process plan compiler (``trainer.executor.compile_plan``) with remote
placement allowed: its partition pass splits the plan by task and device. The session's own
task runs the local partitions it returns; each other task's ``RemotePartition`` is registered on
that task once (after waiting, bounded, for the task to come up), as the subgraph the pass chose
for it (``partitions.describe``), and the task compiles it with the same pipeline. A step then
gets a fresh step id, starts RunStep on every remote task, runs the local partitions, and waits
for all of them; the first failure aborts the step on every task taking part (their waiting
Recvs fail at once), and that first error is raised.
"""

from __future__ import annotations

import secrets
from typing import Sequence

from trainer.distributed.cluster import split_task_name
from trainer.distributed.errors import AbortedError, DistributedError
from trainer.distributed.partitions import describe, run_partition
from trainer.distributed.server import Server, server_for_target
from trainer.executor import compile_plan
from trainer.graph import GraphError, Node, Tensor
from trainer.passes.partition import locate
from trainer.placement import Placer
from trainer.plan import TaskName

__all__ = ["DistributedPlan", "DistributedRuntime", "TaskPlacementError", "connect"]


class TaskPlacementError(GraphError):
    """A node constrained to a task outside the cluster; names the node and the task."""


def connect(target: str, devices: Sequence[str] = ("CPU:0",)) -> "DistributedRuntime":
    """The runtime of the in-process server whose target is ``target``; ``devices`` are the
    session's own (where the nodes it keeps may be placed)."""
    return DistributedRuntime(server_for_target(target), devices)


class DistributedRuntime:
    """Compiles plans whose partitions run on the tasks of ``server``'s cluster. A session using
    it runs as the server's task (``task``) on the task's variables (``state``)."""

    def __init__(self, server: Server, devices: Sequence[str] = ("CPU:0",)):
        self.server, self.devices = server, list(devices)
        self.task = TaskName(*split_task_name(server.task))
        self.state = server.service.state
        self._ready: set[str] = set()
        self._registered: list = []  # (peer, handle) of every partition this session registered

    def compile(self, graph, fetch_tensors: Sequence[Tensor], target_nodes: Sequence[Node], feed_tensors, session):
        plan = compile_plan(graph, fetch_tensors, target_nodes, feed_tensors, session, allow_remote=True)
        if not plan.remote_partitions:
            return plan
        server = self.server
        for rp in plan.remote_partitions:
            self._check_in_cluster(rp)
        remote, sources = [], {}
        for rp in plan.remote_partitions:
            task = str(rp.task)
            peer = server.peer(task)
            self._ensure_ready(task)
            desc, arrays = describe(rp)
            handle = peer.register(desc, arrays)
            remote.append((peer, handle))
            self._registered.append((peer, handle))
            for key in rp.sends:
                if locate(key.recv_device, self.task)[0] == self.task:
                    sources[key.key] = peer.start_recv
        return DistributedPlan(server, plan, sources, remote)

    def _check_in_cluster(self, rp) -> None:
        task = str(rp.task)
        if not self.server.cluster.has_task(task):
            node = min((sn.node for sn in rp.subgraph if sn.node is not None), key=lambda n: n.id)
            raise TaskPlacementError(f"node {node.name!r} ({node.op_type}) is placed on {task}, which is not in the "
                                     f"cluster (tasks: {', '.join(self.server.cluster.tasks())})")

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
        placement = Placer(self.devices, local_task=self.task).place([v.node for v in variables])
        by_task: dict[str, list[str]] = {}
        for v in variables:
            by_task.setdefault(str(locate(placement[v.node], self.task)[0]), []).append(v.node.attrs["shared_name"])
        missing = []
        for task, names in by_task.items():
            if task == server.task:
                missing += [n for n in names if n not in self.state.variables]
                continue
            self._ensure_ready(task)
            missing += server.peer(task).uninitialized(names)
        return missing

    def _ensure_ready(self, task: str) -> None:
        if task not in self._ready:
            self.server.peer(task).wait_ready(self.server.startup_timeout)
            self._ready.add(task)


class DistributedPlan:
    """A plan spanning tasks; ``run`` has the single-process plans' signature. ``plan`` is the
    session task's share, ``sources`` starts pulling each value it receives from another task,
    ``remote`` the (peer, handle) of each other task's registered share."""

    def __init__(self, server: Server, plan, sources: dict, remote: list):
        self.server, self.plan, self.sources, self.remote = server, plan, sources, remote
        self.feeds = plan.feeds
        # As far as Session.run is concerned: one partition, which brings its own rendezvous.
        self.partitions = [(server.task, [])]
        self.remote_partitions: list = []
        self.needs_rendezvous = False

    def run(self, feed_values, rctx, pool=None) -> list:
        step_id = secrets.randbits(63)
        futures = [(peer, peer.run_step_future(handle, step_id)) for peer, handle in self.remote]
        errors: list[BaseException] = []
        values = None
        service = self.server.service
        try:
            values = run_partition(self.plan, rctx.session, service.table, step_id, self.sources, service.timeout,
                                   feed_values, pool)
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
