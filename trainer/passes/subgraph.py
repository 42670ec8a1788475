"""Subgraph: a remote task's share of a plan as the graph nodes that task rebuilds and compiles.

Lowered steps hold kernel functions, which do not cross the wire. What does is what they came
from: the graph nodes the partition pass put on the task (by name, with their attributes), the
constants they read and the variables they write (referred to, not run), and one Send or Recv
node per cross-task transfer the pass decided, under its ``RendezvousKey``. The task compiles
them with this same pipeline (prune, place on its own devices, lower, partition among them), so
the split between tasks is made once, here, and each task's split among its devices there.

Order: every task runs its share straight through, so a Recv that blocks a task before it sends
what its peer waits for would deadlock the step. The partition pass ranks all steps of all tasks
in one order where each Send comes before its Recv; here every cross-task Send and Recv waits
(a control edge) for the task's previous cross-task Send in that order, so whatever order the
task's compiler picks, a blocked Recv waits for a Send that comes earlier in the global order,
and the waits cannot form a cycle.
"""

from __future__ import annotations

from typing import Sequence

from trainer.errors import GraphError
from trainer.passes.fuse_loops import LoopStep
from trainer.passes.prune import reads_input
from trainer.plan import RendezvousKey, Step, SubgraphNode, SyntheticNode

__all__ = ["node_name", "task_subgraph"]


def node_name(name: str) -> str:
    """A tensor or device name made fit for a node name (no ':' to confuse ``node:output``)."""
    return name.replace(":", "_")


def task_subgraph(steps: Sequence[Step], cross: dict[int, RendezvousKey], token_sends: dict[int, object],
                  tensors: dict, dead_keys: set = frozenset()) -> list[SubgraphNode]:
    """The nodes of one task's ``steps`` (in the global order). ``cross`` keys the cross-task
    Send and Recv steps by ``id``; ``token_sends`` names the node whose control edge a Send's
    token stands for; ``tensors`` gives received values their types; ``dead_keys`` are the
    transfers whose values may be dead (from a cond branch)."""
    builder = _Builder(tensors, dead_keys)
    for s in steps:
        if id(s) not in cross and not isinstance(s.node, SyntheticNode):
            builder.runs.update(_graph_nodes(s.node))
    for s in steps:
        key = cross.get(id(s))
        if key is not None:
            if s.node.op_type == "Recv":
                builder.recv(key)
            else:
                builder.send(key, token_sends.get(id(s)))
        elif not isinstance(s.node, SyntheticNode):  # a Send/Recv between the task's own devices: its compiler's
            for n in _graph_nodes(s.node):
                builder.node(n)
    return builder.out


def _graph_nodes(item) -> list:
    return sorted(item.nodes, key=lambda n: n.id) if isinstance(item, LoopStep) else [item]


class _Builder:
    def __init__(self, tensors: dict, dead_keys):
        self.tensors = tensors
        self.dead_keys = dead_keys
        self.out: list[SubgraphNode] = []
        self.emitted: dict[str, SubgraphNode] = {}
        self.runs: set = set()  # graph nodes the task runs
        self.received: dict[str, str] = {}  # tensor name (or "^node" for a token) -> Recv node name
        self.last_send: str | None = None

    def add(self, sn: SubgraphNode) -> None:
        self.out.append(sn)
        self.emitted[sn.name] = sn

    def recv(self, key: RendezvousKey) -> None:
        name = f"_recv/{node_name(key.tensor_name)}"
        tensor = None if key.tensor_name.startswith("^") else self.tensors[key.tensor_name]
        self.add(SubgraphNode(name, "Recv", [], self._after_sends(), key=key, tensor=tensor,
                              may_be_dead=key in self.dead_keys))
        self.received[key.tensor_name] = name

    def send(self, key: RendezvousKey, token_of) -> None:
        if token_of is not None:
            value = f"_token/{node_name(token_of.name)}"
            if value not in self.emitted:
                self.add(SubgraphNode(value, "Token", [], [token_of.name]))
            value += ":0"
        else:
            value = key.tensor_name  # a cross-task Send always leaves the task that produced the value
        name = f"_send/{node_name(key.tensor_name)}/to_{node_name(key.recv_device)}"
        self.add(SubgraphNode(name, "Send", [value], self._after_sends(), key=key))
        self.last_send = name

    def _after_sends(self) -> list[str]:
        return [] if self.last_send is None else [self.last_send]

    def node(self, n) -> None:
        known = self.emitted.get(n.name)
        if known is not None:  # referred to before it runs (an Assign's variable): now it runs too
            known.run, known.control_inputs = True, self._controls(n)
            return
        self.add(SubgraphNode(n.name, n.op_type, self._inputs(n), self._controls(n), node=n))

    def _inputs(self, n) -> list:
        return [None if t is None else self._input(n, i, t) for i, t in enumerate(n.inputs)]

    def _input(self, n, i: int, t) -> str:
        recv = self.received.get(t.name)
        if recv is not None:
            return f"{recv}:0"
        if t.node in self.runs:
            return t.name
        producer = t.node
        if not reads_input(n, i) or (producer.op_type == "Constant" and producer.domain == ""):
            # a variable written here, or a constant (the plan keeps constants as values: copied)
            if producer.name not in self.emitted:
                self.add(SubgraphNode(producer.name, producer.op_type, self._inputs(producer), [], node=producer,
                                      run=False))
            return t.name
        raise GraphError(f"internal: node {n.name!r} reads {t.name!r} on a task that neither produces nor "
                         "receives it")

    def _controls(self, n) -> list[str]:
        names = []
        for c in n.control_inputs:
            if c in self.runs:
                names.append(c.name)
            elif f"^{c.name}" in self.received:
                names.append(self.received[f"^{c.name}"])
        return names
