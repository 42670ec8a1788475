"""A task's registered partitions: shipped once, compiled once, run every step.

The master ships each other task its ``RemotePartition.subgraph`` (the partition pass's decision,
``trainer/passes/subgraph.py``) as a graph description in the checkpoint format's node records
(``describe``: no pickle, constants as raw arrays). The task rebuilds the graph and compiles it
with the single-process pipeline (placement on its own devices, kernels, local Send/Recv between
its CPU and GPU) into a session that shares the task's variables with every other partition on
the task (``RegisteredPartition``). ``run_partition`` runs a compiled plan for one step, its
cross-task Send/Recv meeting through a ``StepRendezvous``: the master's own share of a plan runs
the same way.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Mapping

import numpy as np

from trainer.checkpoint_format import FORMAT_VERSION
from trainer.devices import DeviceSpec
from trainer.distributed.cluster import split_task_name, task_name
from trainer.distributed.rendezvous import StepRendezvous, StepTable
from trainer.executor import compile_plan
from trainer.plan import RemotePartition, SubgraphNode
from trainer.saver import graph_from_dict, node_to_dict
from trainer.state import RunContext, SessionState

__all__ = ["RegisteredPartition", "describe", "run_partition", "sending_task"]

D = "flowstack"
_TOKEN = np.dtype(np.int8)


def sending_task(key) -> str:
    """The task that sends a cross-task transfer (its key's send device is a full name)."""
    return task_name(*DeviceSpec.parse(key.send_device).task_name)


def describe(rp: RemotePartition) -> tuple[dict, dict]:
    """(description, arrays) to register ``rp`` on its task: its subgraph's node records, the
    nodes to run each step, and which task sends each value it receives."""
    arrays: dict = {}
    records = [_record(sn, arrays) for sn in rp.subgraph]
    graph = {"format": "flowstack-graph", "version": FORMAT_VERSION, "nodes": records, "collections": {},
             "loops": [], "conds": []}
    return {"graph": graph, "targets": [sn.name for sn in rp.subgraph if sn.run],
            "remote_sources": {k.key: sending_task(k) for k in rp.recvs}}, arrays


def _record(sn: SubgraphNode, arrays: dict) -> dict:
    if sn.node is not None:
        rec = node_to_dict(sn.node, arrays)
        device = sn.node.device if sn.run else ""
        rec.update(inputs=sn.inputs, control_inputs=sn.control_inputs,
                   device=(DeviceSpec.parse(device).local_name or "") if device else "")
        return rec
    if sn.op == "Token":
        arrays[f"{sn.name}/value"] = np.zeros((), _TOKEN)
        return _added(sn, "Constant", "", {"value": {"__array__": f"{sn.name}/value"}}, [(_TOKEN, ())])
    key = sn.key
    attrs = {"tensor_name": key.tensor_name, "send_device": key.send_device, "recv_device": key.recv_device}
    if sn.op == "Send":
        return _added(sn, "Send", D, attrs, [(None, None)])
    t = sn.tensor
    return _added(sn, "Recv", D, dict(attrs, may_be_dead=int(sn.may_be_dead)),
                  [(_TOKEN, ()) if t is None else (t.dtype, t.shape)])


def _added(sn: SubgraphNode, op: str, domain: str, attrs: dict, outputs) -> dict:
    """A node record in ``node_to_dict``'s format for a node the partitioner added."""
    return {"name": sn.name, "op": op, "domain": domain, "inputs": sn.inputs, "control_inputs": sn.control_inputs,
            "attrs": attrs, "device": "CPU:0",
            "outputs": [{"dtype": None if dt is None else np.dtype(dt).name,
                         "shape": None if sh is None else [-1 if d is None else d for d in sh]} for dt, sh in outputs]}


def run_partition(plan, session, table: StepTable, step_id: int, sources: Mapping[str, Callable], timeout: float,
                  feed_values=(), pool: ThreadPoolExecutor | None = None) -> list:
    """Run a compiled plan for step ``step_id``; its Recvs of values other tasks send start at once."""
    rendezvous = StepRendezvous(table, step_id, sources, timeout)
    rendezvous.prefetch()
    try:
        return plan.run(list(feed_values), RunContext(session, rendezvous), pool)
    finally:
        rendezvous.cancel_pending()


class RegisteredPartition:
    """One task's share of a plan, compiled on that task."""

    def __init__(self, desc: dict, arrays: Mapping, *, state: SessionState, table: StepTable,
                 receive_from: Callable[[str], Callable], pool: ThreadPoolExecutor, timeout: float):
        from trainer.session import Session

        self.graph = graph_from_dict(desc["graph"], dict(arrays), source=f"partition for {table.task}")
        self.session = Session(self.graph, state=state, local_task=split_task_name(table.task))
        g = self.graph
        targets = [g.node(n) for n in desc.get("targets", [])]
        self.plan = compile_plan(g, [], targets, [], self.session)
        self.sources = {key: receive_from(task) for key, task in desc.get("remote_sources", {}).items()}
        self.table, self.pool, self.timeout = table, pool, timeout

    def run(self, step_id: int) -> list:
        return run_partition(self.plan, self.session, self.table, step_id, self.sources, self.timeout, (), self.pool)
