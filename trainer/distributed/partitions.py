"""A task's registered partitions: a graph received once, compiled once, run every step.

``RegisteredPartition`` rebuilds a ``TaskGraph``'s graph with the checkpoint format's reader,
compiles it with the single-process executor (placement on the task's devices, kernels, local
Send/Recv between its CPU and GPU) into a session that shares the task's variables with every
other partition on the task, and runs it for a step with a ``StepRendezvous``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Mapping

from trainer.distributed.rendezvous import StepRendezvous, StepTable
from trainer.distributed.task_partition import HOST
from trainer.executor import compile_plan
from trainer.rendezvous import rendezvous_key
from trainer.saver import graph_from_dict
from trainer.state import RunContext, SessionState

__all__ = ["RegisteredPartition", "remote_key"]


def remote_key(tensor_name: str) -> str:
    """The rendezvous key of a cross-task Send/Recv pair (both run on ``HOST`` of their task)."""
    return rendezvous_key(tensor_name, HOST, HOST)


class RegisteredPartition:
    """One task's share of a plan, compiled on that task."""

    def __init__(self, desc: dict, arrays: Mapping, *, state: SessionState, table: StepTable,
                 receive_from: Callable[[str], Callable], pool: ThreadPoolExecutor, timeout: float):
        from trainer.session import Session

        self.graph = graph_from_dict(desc["graph"], dict(arrays), source=f"partition for {table.task}")
        self.session = Session(self.graph, state=state)
        g = self.graph
        fetches = [g.tensor(n) for n in desc.get("fetches", [])]
        feeds = [g.tensor(n) for n in desc.get("feeds", [])]
        targets = [g.node(n) for n in desc.get("targets", [])]
        self.plan = compile_plan(g, fetches, targets, feeds, self.session)
        self.remote_sources = {remote_key(name): receive_from(task) for name, task in desc.get("remote_sources", {}).items()}
        self.table, self.pool, self.timeout = table, pool, timeout

    @property
    def feeds(self):
        return self.plan.feeds

    def run(self, step_id: int, feed_values=()) -> list:
        rendezvous = StepRendezvous(self.table, step_id, self.remote_sources, self.timeout)
        rendezvous.prefetch()
        try:
            return self.plan.run(list(feed_values), RunContext(self.session, rendezvous), self.pool)
        finally:
            rendezvous.cancel_pending()
