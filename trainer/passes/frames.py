"""Frames: every while_loop runs on one task; values cross tasks only at its boundary.

A value inside a loop frame has one instance per iteration, and a Send/Recv pair moves one value
per step (a dead one too: the dataflow executor's Send sends the marker, so a cond's branches may
span tasks). So, as TensorFlow's partitioner would without its frame-aware rendezvous, a plan
spanning tasks keeps each *region* (a top-level cond or while_loop with everything nested in it,
its Exits included) on the task of the region's pivot (the node every iteration or branch waits
on, built under the same device scope as the loop or cond itself):

- a stateless node of the region placed on another task (a device constraint, or colocation
  with a variable: ``embedding_lookup``'s Gather, the Enter a body reads a variable through) is
  placed on the region's device instead; what it reads from outside the region then enters
  through the region's Enters (or cond Switches), so the value crosses tasks once per step,
  before the loop starts (for a Gather colocated with a table shard, the whole shard where
  TensorFlow would send rows each iteration: logged). A variable's gradient leaves the gradient
  loop through its Exit and crosses tasks after the loop;
- a stateful node inside a loop frame on another task (an update of a variable that lives
  there; not the loop's own stacks and accumulators, ``STEP_LOCAL_OPS``) would exchange values
  with the loop every iteration: a ``PlacementError`` names it, the loop and both tasks. One in
  a top-level cond's branch (a conditional update of a PS variable) stays with its variable:
  its inputs cross once per step, dead when the branch is not taken;
- a forward loop and the gradient loop that pops its per-iteration values must share a task
  (their stacks are step-local);
- what is left crossing tasks must be made outside every loop frame and read outside every loop
  frame (an Enter into a top-level loop reads there); anything else is a ``PlacementError``
  naming the edge.

Graphs imported from a description have no context records; their control flow is taken as is.
"""

from __future__ import annotations

import logging
from typing import Callable

from trainer.control_flow import WhileContext
from trainer.passes.partition import locate
from trainer.placement import PlacementError
from trainer.plan import TaskName

__all__ = ["confine_regions"]

log = logging.getLogger("trainer.placement")

D = "flowstack"
# Stateful ops whose state lives in the step, not on a task: the loop's stacks and a gradient
# loop's private accumulators follow their region like stateless nodes.
STEP_LOCAL_OPS = frozenset({(D, "StackPush"), (D, "StackPop"), (D, "AccumulateAdd")})


def confine_regions(order: list, placement: dict, place_anchor: Callable, local_task: TaskName, fed: set) -> None:
    """Re-place ``order``'s region nodes onto their region's device (in ``placement``) and check
    that no value crosses tasks inside a loop frame (see the module docstring).
    ``place_anchor(node)`` places a region's pivot that is not in ``order`` (inside a fused loop)."""
    if all(_root(n) is None for n in order):
        return

    def task_of(device: str) -> TaskName:
        return locate(device, local_task)[0]

    anchors: dict = {}
    for n in order:
        root = _root(n)
        if root is None:
            continue
        anchor = root.pivot.node
        device = anchors.get(root)
        if device is None:
            device = anchors[root] = placement.get(anchor) or place_anchor(anchor)
        if task_of(placement[n]) == task_of(device):
            continue
        if n.stateful and (n.domain, n.op_type) not in STEP_LOCAL_OPS:
            loop = _innermost_loop(_context(n))
            if loop is None:
                continue  # a conditional update in a top-level cond: it stays with its variable
            raise PlacementError(
                f"node {n.name!r} ({n.op_type}) inside while_loop {loop.frame_name!r} is placed on "
                f"{task_of(placement[n])}, but the loop runs on {task_of(device)}: it would exchange values with "
                "the loop in every iteration, and values cross tasks only at a loop's boundary (flowstack has "
                f"no frame-aware rendezvous). Colocate them: place what {n.name!r} updates on {task_of(device)}, "
                "or update it after the loop from the loop's outputs")
        if n.op_type == "Enter" and n.colocate_with is not None:
            t = n.inputs[0]
            log.info("while_loop %r on %s reads %s (%s, shape %s) whole from %s, once per step before the loop, "
                     "for %s colocated with it (TensorFlow would send what the body reads each iteration)",
                     n.cf_context.frame_name, task_of(device), t.name, t.dtype, t.shape, task_of(placement[n]),
                     n.name)
        placement[n] = device
    _check_stacks(order, placement, task_of)
    _check_edges(order, placement, task_of, fed)


def _context(n):
    """The innermost context a node computes in: an Exit belongs to the loop it leaves."""
    loop = getattr(n, "while_loop", None)
    if n.op_type == "Exit" and n.domain == D and loop is not None:
        return loop.ctx
    return getattr(n, "cf_context", None)


def _root(n):
    """The outermost cond or while_loop context ``n`` computes in (None at the top level)."""
    return _outermost(_context(n))


def _outermost(ctx):
    while ctx is not None and ctx.outer is not None:
        ctx = ctx.outer
    return ctx


def _describe(ctx) -> str:
    if isinstance(ctx, WhileContext):
        return f"while_loop {ctx.frame_name!r}"
    return f"the cond on {ctx.pred.name!r}"


def _innermost_loop(ctx):
    while ctx is not None and not isinstance(ctx, WhileContext):
        ctx = ctx.outer
    return ctx


def _made_once_per_step(n) -> bool:
    """Whether ``n``'s outputs are one value per step (maybe dead), not one per iteration."""
    return _innermost_loop(getattr(n, "cf_context", None)) is None


def _reads_once_per_step(n) -> bool:
    """Whether ``n`` reads its inputs once per step: outside every loop frame, or an Enter into a
    loop that is."""
    ctx = _context(n)
    if n.op_type == "Enter" and n.domain == D and ctx is not None:
        ctx = ctx.outer
    return _innermost_loop(ctx) is None


def _check_edges(order, placement, task_of, fed) -> None:
    present = set(order)
    for n in order:
        sources = [t.node for t in n.inputs if t is not None and t not in fed] + list(n.control_inputs)
        for p in sources:
            if p not in present or task_of(placement[p]) == task_of(placement[n]):
                continue
            if _made_once_per_step(p) and _reads_once_per_step(n):
                continue
            loop = _innermost_loop(getattr(p, "cf_context", None)) or _innermost_loop(_context(n))
            raise PlacementError(
                f"node {n.name!r} ({n.op_type}) on {task_of(placement[n])} reads {p.name!r} ({p.op_type}) on "
                f"{task_of(placement[p])} inside while_loop {loop.frame_name!r}: values cross tasks only at a "
                "loop's boundary; place both on one task")


def _check_stacks(order, placement, task_of) -> None:
    pushed = {n.attrs["stack_name"]: n for n in order if n.op_type == "StackPush" and n.domain == D}
    for n in order:
        if n.op_type != "StackPop" or n.domain != D:
            continue
        push = pushed.get(n.attrs["stack_name"])
        if push is not None and task_of(placement[push]) != task_of(placement[n]):
            raise PlacementError(
                f"node {n.name!r} (StackPop) in {_describe(_root(n))} runs on {task_of(placement[n])}, but "
                f"{_describe(_root(push))} pushes the values it pops on {task_of(placement[push])}: build the "
                "gradient under the same device scope as the loop")
