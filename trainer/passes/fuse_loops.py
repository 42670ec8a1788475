"""Fuse loops: a while_loop with no nested control flow becomes one plan step (``LoopStep``).

Its cond and body compile into flat sub-plans iterated in Python, so an LSTM step pays no
per-iteration frame bookkeeping. Loops whose sub-plans span devices stay on the dataflow
executor. The pass runs after placement (a fused loop runs where its first Exit was placed) and
before lowering, which lowers a ``LoopStep`` like any node.
"""

from __future__ import annotations

from typing import Callable

from trainer.passes.prune import kahn, producers

__all__ = ["CONTROL_FLOW_OPS", "LoopStep", "collapse_loops", "fuse_loops"]

D = "flowstack"
CONTROL_FLOW_OPS = frozenset({"Switch", "Merge", "Enter", "Exit", "NextIteration"})  # ops that route by frame

# compile_sub(graph, fetch_tensors, target_nodes, feed_tensors, session) -> a flat plan of one loop's inside
SubPlanCompiler = Callable[..., object]


class LoopStep:
    """A whole while_loop run as one plan step: flat sub-plans for its cond and body, iterated in
    Python. Used for loops with no nested control flow, where per-iteration frame bookkeeping
    would cost more than the body itself (an LSTM step). Iterations then run one after another.
    """

    op_type = "WhileLoop"
    domain = D

    def __init__(self, loop, session, nodes, compile_sub: SubPlanCompiler):
        self.loop = loop
        self.name = loop.frame_name
        self.nodes = nodes
        self.control_inputs: list = []
        self.inputs = [e.inputs[0] for e in loop.enters] + list(self.captured)
        self.outputs = loop.exit_tensors()
        graph = loop.ctx.graph
        merged = [m.outputs[0] for m in loop.merges]
        const_outs = [loop.ctx.captured()[t] for t in self.captured]
        self.cond = compile_sub(graph, [loop.loop_cond.outputs[0]], [], merged + const_outs, session)
        body_in = [sw.outputs[1] for sw in loop.switches]
        nexts = [n.inputs[0] for n in loop.next_iterations]
        # Stack pushes the gradient added later are nobody's input: run them as targets.
        pushes = [n for n in loop.ctx.nodes if n.op_type == "StackPush" and n.domain == D]
        self.body = compile_sub(graph, nexts, pushes, body_in + const_outs, session)
        self.n_vars = len(loop.enters)

    @property
    def captured(self):
        return list(self.loop.ctx.captured())

    def run(self, rctx, *values, xp=None):
        n = self.n_vars
        current = list(values[:n])
        consts = list(values[n:])
        cond, body = self.cond, self.body
        while bool(cond.run(current + consts, rctx)[0]):
            current = body.run(current + consts, rctx)
        return tuple(current)


def fuse_loops(graph, order: list, placement: dict, session, fed: set, compile_sub: SubPlanCompiler) -> list:
    """The run order with each fusable top-level loop replaced by its ``LoopStep`` (placed where
    its first Exit is; ``placement`` gains an entry per LoopStep)."""
    loop_steps = _fusable_loops(graph, order, session, compile_sub)
    if not loop_steps:
        return order
    for lp in loop_steps:
        placement[lp] = placement[lp.anchor]
    return collapse_loops(order, loop_steps, fed)


def collapse_loops(order, loop_steps, fed) -> list:
    """The plan order with each fused loop's nodes replaced by its LoopStep, re-sorted."""
    rep = {n: lp for lp in loop_steps for n in lp.nodes}
    items = [n for n in order if n not in rep] + list(loop_steps)
    item_set = set(items)
    deps = {}
    for it in items:
        deps[it] = {p for p in (rep.get(p, p) for p in producers(it, fed)) if p in item_set and p is not it}
    return kahn(items, deps)[0]


def _fusable_loops(graph, order, session, compile_sub) -> list:
    """A LoopStep for each top-level loop of the plan with no nested control flow."""
    present = set(order)
    fused = []
    for loop in graph.loops:
        ctx = loop.ctx
        if ctx.outer is not None or not any(e in present for e in loop.exits):
            continue
        own = set(loop.enters) | set(loop.merges) | set(loop.switches) | set(loop.next_iterations)
        own.add(loop.loop_cond)
        nested = [n for n in ctx.nodes if n.op_type in CONTROL_FLOW_OPS and n.domain == D and n not in own
                  and not (n.op_type == "Enter" and n.attrs.get("is_constant"))]
        if nested:
            continue
        first_exit = min((e for e in loop.exits if e in present), key=order.index)
        nodes = set(ctx.nodes) | set(loop.exits)
        step = LoopStep(loop, session, nodes, compile_sub)
        step.anchor = first_exit
        if all(len(sub.partitions) == 1 and not sub.remote_partitions for sub in (step.cond, step.body)):
            fused.append(step)  # loops spanning devices stay on the dataflow executor
    return fused
