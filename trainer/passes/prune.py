"""Prune: the nodes a (fetches, targets, feeds) triple needs, checked and in run order.

Feeds cut their producers; a while_loop is kept whole (its stack pushes feed gradient loops)
unless pruning the inside of one loop for a fused loop step. A placeholder that is needed but not
fed, and a cycle that is not a loop construct, are errors naming the nodes.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, Iterator, Sequence

from trainer.errors import GraphError
from trainer.graph import Node, Tensor
from trainer.plan import format_shape

__all__ = ["UNREAD_REF_INPUTS", "kahn", "producers", "prune", "reads_input"]

D = "flowstack"
# Inputs an op writes without reading them: Assign's ref is its destination. Nothing waits for
# the producer of such an input and the kernel receives None there.
UNREAD_REF_INPUTS: dict[tuple[str, str], int] = {(D, "Assign"): 0}


def reads_input(node: Node, i: int) -> bool:
    """Whether ``node`` reads its input ``i`` (not an input it only writes)."""
    return UNREAD_REF_INPUTS.get((node.domain, node.op_type)) != i


def prune(graph, fetch_tensors: Sequence[Tensor], target_nodes: Sequence[Node], feed_tensors: Iterable[Tensor],
          *, whole_loops: bool = True) -> list[Node]:
    """Every node the fetches and targets need given the feeds, in a topological run order."""
    feed_tensors = list(feed_tensors)
    fed = set(feed_tensors)
    for t in list(fetch_tensors) + feed_tensors:
        if t.graph is not graph:
            raise GraphError(f"tensor {t.name} belongs to another graph than the session's")
    for n in target_nodes:
        if n.graph is not graph:
            raise GraphError(f"node {n.name} belongs to another graph than the session's")
    roots = [t.node for t in fetch_tensors if t not in fed] + list(target_nodes)
    nodes = _needed_nodes(roots, fed, whole_loops)
    for n in nodes:
        if n.op_type == "Placeholder" and n.domain == D and not all(o in fed for o in n.outputs):
            raise GraphError(
                f"placeholder {n.outputs[0].name!r} (dtype {n.outputs[0].dtype}, shape "
                f"{format_shape(n.outputs[0].shape)}) must be fed: {_who_needs(n, roots)} depends on it"
            )
    return _toposort(nodes, fed)


def _needed_nodes(fetch_nodes: Sequence[Node], fed: set, whole_loops: bool) -> list[Node]:
    """Every node the fetches depend on, not looking past fed tensors; whole loops come along."""
    seen: set = set()
    stack = list(fetch_nodes)
    loops_added: set = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        ctx = node.cf_context if whole_loops else None
        while ctx is not None:
            loop = getattr(ctx, "loop_nodes", None)
            if loop is not None and id(ctx) not in loops_added:
                loops_added.add(id(ctx))
                stack.extend(loop)  # a loop runs whole: its stack pushes feed gradient loops
            ctx = ctx.outer
        for i, t in enumerate(node.inputs):
            if t is None or t in fed or not reads_input(node, i):
                continue
            stack.append(t.node)
        stack.extend(c for c in node.control_inputs if not any(o in fed for o in c.outputs))
    return list(seen)


def producers(n, fed: set) -> Iterator:
    """What ``n`` waits for: its inputs' producers (not a loop's back edge, not the variable an
    Assign writes, not fed tensors) and its control inputs."""
    for i, t in enumerate(n.inputs):
        if t is None or t in fed:
            continue
        if n.op_type == "Merge" and t.node.op_type == "NextIteration":
            continue  # a loop's back edge
        if not reads_input(n, i):
            continue
        yield t.node
    yield from n.control_inputs


def kahn(items: list, deps: dict, sort_key=None) -> tuple[list, dict]:
    """Kahn's topological order of ``items`` given each one's set of dependencies; also returns
    the remaining in-degrees (non-zero for items on or after a cycle)."""
    consumers: dict = {it: [] for it in items}
    indeg = {}
    for it in items:
        indeg[it] = len(deps[it])
        for d in deps[it]:
            consumers[d].append(it)
    first = [it for it in items if indeg[it] == 0]
    ready = deque(sorted(first, key=sort_key) if sort_key else first)
    order = []
    while ready:
        it = ready.popleft()
        order.append(it)
        for c in consumers[it]:
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    return order, indeg


def _toposort(nodes: list[Node], fed: set) -> list[Node]:
    node_set = set(nodes)
    deps = {n: {p for p in producers(n, fed) if p in node_set} for n in nodes}
    order, indeg = kahn(nodes, deps, sort_key=lambda n: n.id)
    if len(order) != len(nodes):
        stuck = sorted((n for n in nodes if indeg[n] > 0), key=lambda n: n.id)
        names = ", ".join(repr(n.name) for n in stuck[:6])
        raise GraphError(
            f"the graph has a cycle that is not a loop construct (while_loop); nodes on or after it: {names}"
        )
    return order


def _who_needs(node: Node, roots) -> str:
    for r in roots:
        if r is node:
            return f"fetch {r.name!r}"
    return "fetch " + ", ".join(repr(r.name) for r in roots[:3])
