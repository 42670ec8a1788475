"""Frames: every cond and while_loop runs on one task; values cross tasks only at its boundary.

A value inside a loop frame has one instance per iteration and one inside a cond branch may be
dead; a Send/Recv pair moves one live value per step. So, as TensorFlow's partitioner would
without its frame-aware rendezvous, a plan spanning tasks keeps each *region* (a top-level cond
or while_loop with everything nested in it, its Exits included) on the task of the region's
pivot (the node every iteration or branch waits on, built under the same device scope as the
loop or cond itself):

- a stateless node of the region placed on another task (a device constraint, or colocation
  with a variable: ``embedding_lookup``'s Gather, the Enter a body reads a variable through) is
  placed on the region's device instead; what it reads from outside the region then enters
  through the region's Enters (or cond Switches), so the value crosses tasks once per step,
  before the loop starts. A variable's gradient leaves the gradient loop through its Exit and
  crosses tasks after the loop;
- a stateful node of the region on another task (but the loop's own stacks and accumulators,
  ``STEP_LOCAL_OPS``) (an update of a variable that lives there)
  would exchange values with the loop every iteration: a ``PlacementError`` names it, the loop
  and both tasks;
- a forward loop and the gradient loop that pops its per-iteration values must share a task
  (their stacks are step-local);
- what is left crossing tasks must be a live value of the top level (not in a loop, not in a
  cond branch, not a Switch's), read outside every loop frame (an Enter of a top-level loop, or a
  branch of a top-level cond waiting on it, reads there); anything else is a ``PlacementError``
  naming the edge.

Graphs imported from a description have no context records; their control flow is taken as is.
"""

from __future__ import annotations

from typing import Callable

from trainer.control_flow import WhileContext
from trainer.passes.partition import locate
from trainer.placement import PlacementError
from trainer.plan import TaskName

__all__ = ["confine_regions"]

D = "flowstack"
# Stateful ops whose state lives in the step, not on a task: the loop's stacks and a gradient
# loop's private accumulators follow their region like stateless nodes.
STEP_LOCAL_OPS = frozenset({(D, "StackPush"), (D, "StackPop"), (D, "AccumulateAdd")})


def confine_regions(order: list, placement: dict, place_anchor: Callable, local_task: TaskName, fed: set) -> None:
    """Re-place ``order``'s region nodes onto their region's device (in ``placement``) and check
    that the plan's cross-task edges carry only top-level values (see the module docstring).
    ``place_anchor(node)`` places a region's pivot that is not in ``order`` (inside a fused loop)."""
    task_of = _TaskOf(local_task)
    if all(_root(n) is None for n in order):
        return
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
            raise PlacementError(
                f"node {n.name!r} ({n.op_type}) inside {_describe(root)} is placed on {task_of(placement[n])}, "
                f"but the {_kind(root)} runs on {task_of(device)}: it would exchange values with the "
                f"{_kind(root)} in every {'iteration' if isinstance(root, WhileContext) else 'branch it takes'}, "
                "and values cross tasks only at a loop's or cond's boundary (flowstack has no frame-aware "
                f"rendezvous). Colocate them: place what {n.name!r} updates on {task_of(device)}, or update it "
                f"after the {_kind(root)} from its outputs")
        placement[n] = device
    _check_stacks(order, placement, task_of)
    _check_edges(order, placement, task_of, fed)


class _TaskOf:
    def __init__(self, local_task: TaskName):
        self.local_task = local_task

    def __call__(self, device: str) -> TaskName:
        return locate(device, self.local_task)[0]


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


def _kind(ctx) -> str:
    return "loop" if isinstance(ctx, WhileContext) else "cond"


def _describe(ctx) -> str:
    if isinstance(ctx, WhileContext):
        return f"while_loop {ctx.frame_name!r}"
    return f"the cond on {ctx.pred.name!r}"


def _top_level_value(n) -> bool:
    """Whether ``n``'s outputs are one live value per step (not per iteration, never dead)."""
    return _outermost(getattr(n, "cf_context", None)) is None and not (n.op_type == "Switch" and n.domain == D)


def _reads_at_top(n) -> bool:
    """Whether ``n`` reads its inputs once per step: outside every loop frame (a branch of a
    top-level cond reads there too), or an Enter into a loop that is."""
    ctx = _context(n)
    if n.op_type == "Enter" and n.domain == D and ctx is not None:
        ctx = ctx.outer
    while ctx is not None:
        if isinstance(ctx, WhileContext):
            return False
        ctx = ctx.outer
    return True


def _check_edges(order, placement, task_of, fed) -> None:
    present = set(order)
    for n in order:
        sources = [t.node for t in n.inputs if t is not None and t not in fed] + list(n.control_inputs)
        for p in sources:
            if p not in present or task_of(placement[p]) == task_of(placement[n]):
                continue
            if _top_level_value(p) and _reads_at_top(n):
                continue
            where = _root(p) or _root(n) or getattr(n.cf_context, "outer", None)
            region = _describe(where) if where is not None else "a cond"
            raise PlacementError(
                f"node {n.name!r} ({n.op_type}) on {task_of(placement[n])} reads {p.name!r} ({p.op_type}) on "
                f"{task_of(placement[p])} inside {region}: values cross tasks only at a loop's or cond's "
                "boundary; place both on one task")


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
