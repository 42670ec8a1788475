"""Execution plans: the subgraph a (fetches, feeds) pair needs, compiled once, walked per run.

``compile_plan`` is a pipeline of passes, each a function in ``trainer/passes/`` (or the placer),
each reading the previous one's output:

1. **prune** (``passes/prune.py``): the nodes the fetches and targets need, feeds cutting their
   producers, whole loops kept; missing feeds and cycles are errors; a topological order.
2. **place** (``trainer/placement.py``): a device per node: constraints (``trainer.device``)
   first, then colocation with the variable an op updates, then the cost model. A local
   placement is a short name (``"CPU:0"``); one on another task is a full name
   (``"/job:ps/replica:0/task:0/device:CPU:0"``). The session's *local task* decides which is
   which (``trainer/devices.py``); a plain session is ``/job:localhost/task:0`` and refuses a
   plan that needs another task (``no cluster configured``), as TF 1.x's local session did.
   Across tasks, **confine regions** (``passes/frames.py``) keeps each cond and while_loop on
   one task, so values cross tasks only at their boundaries.
3. **fuse loops** (``passes/fuse_loops.py``): a while_loop without nested control flow becomes
   one ``LoopStep`` whose cond and body are flat sub-plans compiled by this same pipeline.
4. **lower** (``passes/lower.py``): nodes become ``Step``s over value slots with kernels and
   attributes resolved; op-specific lowerings (Constant, Identity, StackPush/Pop, Assign, fused
   loops) are a table, ``LOWERING_RULES``.
5. **partition** (``passes/partition.py``): steps split by (task, device) with one Send/Recv
   pair per (tensor, destination device) within a task and per (tensor, destination task)
   across tasks (a control edge across tasks sends a token), named by ``RendezvousKey``s (tensor
   name, source and destination device) that are stable across recompiles. Local partitions run
   here; each other task's share comes back as a ``RemotePartition`` whose ``subgraph``
   (``passes/subgraph.py``) the distributed runtime registers on that task, which compiles it with
   this same pipeline.
6. **schedule** (``passes/schedule.py``, with ``Session(parallel_ops=True)``): dependency levels
   whose expensive steps run on the thread pool.

Graphs with control flow left after loop fusion run on the frame-tagged dataflow executor
(``DataflowPlan``, ``trainer/dataflow_executor.py``); across tasks they are partitioned by task
only, the pass adding the waits that list order gives a flat plan. Plan types
live in the leaf module ``trainer/plan.py``. A ``FlatPlan`` is a list of steps
``(fn, input_slots, output_slot(s), attrs, wants_ctx)`` per partition over a list of value
slots; running it does no graph work at all.
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

from schemas.registry import get_schema
from trainer.devices import stage_host_inputs
from trainer.errors import GraphError, KernelError
from trainer.graph import Node, Tensor
from trainer.passes.frames import confine_regions
from trainer.passes.fuse_loops import CONTROL_FLOW_OPS, LoopStep, fuse_loops
from trainer.passes.lower import lower
from trainer.passes.partition import partition
from trainer.passes.prune import prune
from trainer.passes.schedule import schedule_levels
from trainer.placement import PlacementError
from trainer.plan import DataflowPlan, FlatPlan, TaskName

__all__ = ["DataflowPlan", "FlatPlan", "KernelError", "LoopStep", "compile_plan"]

D = "flowstack"


def compile_plan(graph, fetch_tensors: Sequence[Tensor], target_nodes: Sequence[Node], feed_tensors, session,
                 *, sub_plan: bool = False, allow_remote: bool = False):
    """Build the plan for fetching ``fetch_tensors`` and running ``target_nodes`` given feeds.

    ``session`` supplies the placer (``session.placer``), devices (``session.device(name)``),
    the cost model, ``local_task`` (the task this plan runs on, which its placer was made for)
    and the ``fuse_loops``/``parallel_ops`` options. With ``allow_remote`` a plan may place nodes on other tasks, whose partitions come back in
    ``plan.remote_partitions`` (the distributed runtime registers them there); without it such a
    placement is a ``PlacementError`` naming the node and its device.

    ``sub_plan`` compiles the inside of one loop (cond or body) for a fused loop step: no
    whole-loop closure, no copies of fetched values, and it must come out flat.
    """
    local_task = TaskName(*session.local_task)
    feed_tensors = list(feed_tensors)
    fed = set(feed_tensors)
    order = prune(graph, fetch_tensors, target_nodes, feed_tensors, whole_loops=not sub_plan)
    placement = session.placer.place(order)
    if not allow_remote:
        _check_local(order, placement)
    else:
        confine_regions(order, placement, partial(_place_one, session.placer), local_task, fed)
    if session.fuse_loops and not sub_plan:
        compile_sub = partial(compile_plan, sub_plan=True, allow_remote=allow_remote)
        order = fuse_loops(graph, order, placement, session, fed, compile_sub)
    dynamic = any(_needs_dataflow(n) for n in order)
    if sub_plan and dynamic:
        raise GraphError("internal: a fused loop body still contains control flow")

    lowered = lower(order, placement, feed_tensors, fetch_tensors, session, sub_plan=sub_plan)
    copy_fetch = [] if sub_plan else [i for i, t in enumerate(fetch_tensors) if _aliases_state(t) and t not in fed]
    remote = any(d.startswith("/") for d in placement.values())
    if dynamic and not remote:
        return _dataflow_plan(lowered.steps, lowered, lowered.fetch_slots, copy_fetch, fetch_tensors)
    parts = partition(lowered.steps, lowered.template, lowered.slot_names, local_task=local_task,
                      feed_slots=[f.slot for f in lowered.feeds], fetch_slots=lowered.fetch_slots,
                      tensors={t.name: t for t in lowered.slots}, dataflow=dynamic)
    if dynamic:
        plan = _dataflow_plan(parts.local[0].steps, lowered, parts.fetch_slots, copy_fetch, fetch_tensors, parts.waits)
        plan.remote_partitions = parts.remote
        return plan
    uploads = stage_host_inputs(parts.local, lowered.template, [f.slot for f in lowered.feeds], session.device)
    plan = FlatPlan(parts.local, lowered.template, lowered.feeds, parts.fetch_slots, copy_fetch, parts.remote)
    plan.uploads = uploads
    if session.parallel_ops and not sub_plan:
        schedule_levels(plan, session.cost_model)
    return plan


def _check_local(order, placement) -> None:
    """A session without a cluster runs every node itself (TF 1.x's local session did too)."""
    for n in order:
        device = placement[n]
        if device.startswith("/"):
            raise PlacementError(f"node {n.name!r} ({n.op_type}) is placed on {device}, another task, but no "
                                 "cluster is configured; use Session(target=server.target)")


def _needs_dataflow(n) -> bool:
    """Control flow, or a Recv of a value from another task's cond branch (it may be dead)."""
    return n.domain == D and (n.op_type in CONTROL_FLOW_OPS or (n.op_type == "Recv" and n.attrs.get("may_be_dead")))


def _place_one(placer, node) -> str:
    return placer.place([node])[node]


def _aliases_state(t: Tensor) -> bool:
    # Fetched values that are variable buffers are copied so later steps cannot change them.
    node = t.node
    while node.op_type in ("Identity",) and node.inputs:
        node = node.inputs[0].node
    return get_schema(node.op_type, node.domain).stateful


def _dataflow_plan(steps, lowered, fetch_slots, copy_fetch, fetch_tensors, waits=None) -> DataflowPlan:
    """``steps`` for the dataflow executor: who consumes each slot, and the steps each one waits
    for without reading them (its node's control inputs, and ``waits`` the partition pass added)."""
    consumers: dict[int, list] = {}
    slot_owner: dict[int, int] = {}
    for si, s in enumerate(steps):
        outs = (s.outs,) if isinstance(s.outs, int) else s.outs
        for o in outs:
            slot_owner[o] = si
    for si, s in enumerate(steps):
        for pos, slot in enumerate(s.ins):
            if slot in slot_owner:
                consumers.setdefault(slot, []).append((si, pos))
    index = {s.node: i for i, s in enumerate(steps)}
    step_index = {id(s): i for i, s in enumerate(steps)}
    waits = waits or {}
    controls = [[index[c] for c in s.node.control_inputs if c in index]
                + [step_index[id(w)] for w in waits.get(id(s), ())] for s in steps]
    return DataflowPlan(steps, consumers, controls, lowered.template, lowered.feeds, fetch_slots, copy_fetch,
                        slot_owner, [t.name for t in fetch_tensors])
