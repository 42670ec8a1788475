"""Execution plans: the subgraph a (fetches, feeds) pair needs, compiled once, walked per run.

``compile_plan`` prunes the graph to what the fetches need (feeds cut their producers), checks it
(missing feeds, cycles), places it on devices, splits it into per-device partitions joined by
Send/Recv, and resolves every kernel and attribute. A ``FlatPlan`` is a list of steps
``(fn, input_slots, output_slot(s), attrs, wants_ctx)`` over a list of value slots; running it
does no graph work at all. Graphs with control flow get a ``DataflowPlan`` instead: the same
steps, run by a ready-queue executor that tags values with (frame, iteration) and propagates
dead branches.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

import numpy as np

from edge_runtime.kernels import get_kernel
from edge_runtime.kernels.registry import wants_output_count
from schemas.registry import get_schema
from trainer.devices import stage_host_inputs
from trainer.graph import GraphError, Node, Tensor
from trainer.state import (FailedPreconditionError, OutOfRangeError, get_stateful_kernel, stack_pop_many,
                           stack_push_many)

__all__ = ["compile_plan", "FlatPlan", "DataflowPlan", "KernelError"]

CONTROL_FLOW_OPS = frozenset({"Switch", "Merge", "Enter", "Exit", "NextIteration"})  # ops that route by frame
D = "flowstack"
_DEAD = object()


class KernelError(RuntimeError):
    """A kernel failed while running; names the node and its op."""


def _needed_nodes(fetch_nodes: Sequence[Node], fed: set, whole_loops: bool = True) -> list[Node]:
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
            if t is None or t in fed:
                continue
            if i == 0 and node.op_type == "Assign" and node.domain == D:
                continue  # Assign writes its ref; it does not read it
            stack.append(t.node)
        stack.extend(c for c in node.control_inputs if not any(o in fed for o in c.outputs))
    return list(seen)


def _producers(n, fed: set):
    """What ``n`` waits for: its inputs' producers (not a loop's back edge, not the variable an
    Assign writes, not fed tensors) and its control inputs."""
    for i, t in enumerate(n.inputs):
        if t is None or t in fed:
            continue
        if n.op_type == "Merge" and t.node.op_type == "NextIteration":
            continue  # a loop's back edge
        if i == 0 and n.op_type == "Assign" and n.domain == D:
            continue
        yield t.node
    yield from n.control_inputs


def _kahn(items: list, deps: dict, sort_key=None) -> tuple[list, dict]:
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
    deps = {n: {p for p in _producers(n, fed) if p in node_set} for n in nodes}
    order, indeg = _kahn(nodes, deps, sort_key=lambda n: n.id)
    if len(order) != len(nodes):
        stuck = sorted((n for n in nodes if indeg[n] > 0), key=lambda n: n.id)
        names = ", ".join(repr(n.name) for n in stuck[:6])
        raise GraphError(
            f"the graph has a cycle that is not a loop construct (while_loop); nodes on or after it: {names}"
        )
    return order


def resolve_kernel(node: Node):
    """(fn, wants_ctx) for a node: a stateful trainer kernel or a pure registered kernel."""
    schema = get_schema(node.op_type, node.domain)
    if schema.stateful:
        return get_stateful_kernel(node.op_type, node.domain), True
    import trainer.kernels  # noqa: F401  (registers the trainer's pure helper kernels)

    return get_kernel(node.op_type, node.domain), False


def _kernel_attrs(node: Node, xp) -> dict:
    attrs = dict(node.attrs)
    if wants_output_count(node.op_type, node.domain):
        attrs["n_outputs"] = len(node.outputs)
    if node.op_type == "Assign" and node.domain == D:
        attrs["_var"] = node.inputs[0].node.attrs["shared_name"]
    attrs["xp"] = xp
    return attrs


class FeedSpec:
    """How to check and convert one fed value; errors name the tensor, expected and actual."""

    __slots__ = ("tensor", "dtype", "rank", "known_dims", "slot")

    def __init__(self, tensor: Tensor, slot: int):
        self.tensor = tensor
        self.slot = slot
        self.dtype = tensor.dtype
        shape = tensor.shape
        self.rank = None if shape is None else len(shape)
        self.known_dims = () if shape is None else tuple((i, d) for i, d in enumerate(shape) if d is not None)

    def convert(self, value):
        dt = self.dtype
        if type(value) is not np.ndarray or (dt is not None and value.dtype != dt):
            value = self._coerce(value)
        if self.rank is not None:
            shape = value.shape
            if len(shape) != self.rank or any(shape[i] != d for i, d in self.known_dims):
                raise ValueError(
                    f"cannot feed value of shape {shape} for tensor {self.tensor.name!r}, "
                    f"which has shape {_fmt_shape(self.tensor.shape)}"
                )
        return value

    def _coerce(self, value):
        dt = self.dtype
        if hasattr(value, "__cuda_array_interface__"):
            return value
        if isinstance(value, np.ndarray) or isinstance(value, np.generic):
            arr = np.asarray(value)
            if dt is not None and arr.dtype != dt:
                if not np.can_cast(arr.dtype, dt, casting="same_kind") or (arr.dtype.kind == "b") != (dt.kind == "b"):
                    raise TypeError(
                        f"cannot feed value of dtype {arr.dtype} for tensor {self.tensor.name!r}, "
                        f"which has dtype {dt}"
                    )
                arr = arr.astype(dt)
            return arr
        try:
            arr = np.asarray(value, dtype=dt)
        except (TypeError, ValueError) as e:
            raise TypeError(f"cannot feed {type(value).__name__} for tensor {self.tensor.name!r} ({dt}): {e}") from None
        return arr


def _fmt_shape(shape):
    if shape is None:
        return "<unknown>"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


class Step:
    """One kernel call in a plan."""

    __slots__ = ("node", "fn", "ins", "outs", "attrs", "wants_ctx", "device")

    def __init__(self, node, fn, ins, outs, attrs, wants_ctx, device):
        self.node, self.fn, self.ins, self.outs = node, fn, ins, outs
        self.attrs, self.wants_ctx, self.device = attrs, wants_ctx, device


class FlatPlan:
    """Straight-line steps over value slots; one partition per device, joined by Send/Recv."""

    def __init__(self, partitions, template, feeds, fetch_slots, copy_fetch, n_slots):
        self.partitions = partitions  # list of (device, [Step]), main partition first
        self.template = template
        self.feeds = feeds
        self.fetch_slots = fetch_slots
        self.copy_fetch = copy_fetch
        # The hot loop reads plain tuples.
        self.fast = [
            [(s.fn, s.ins, s.outs, s.attrs, s.wants_ctx) for s in steps] for _, steps in partitions
        ]
        self.steps = [s for _, steps in partitions for s in steps]

    def enable_parallel(self, cost_model, threshold_s: float = 1e-4) -> None:
        """Run independent expensive steps of one step concurrently (single-device plans).

        Steps are grouped in dependency levels; within a level, steps the cost model deems
        expensive go to the session's thread pool (NumPy releases the GIL in BLAS and most
        ufuncs) while the rest run inline. The level barrier keeps it simple and safe.
        """
        if len(self.partitions) != 1:
            return
        steps = self.partitions[0][1]
        slot_level: dict = {}
        node_level: dict = {}
        levels: list = []
        for i, st in enumerate(steps):
            lv = 0
            for slot in st.ins:
                lv = max(lv, slot_level.get(slot, -1) + 1)
            for c in st.node.control_inputs:
                lv = max(lv, node_level.get(c, -1) + 1)
            for o in ((st.outs,) if isinstance(st.outs, int) else st.outs):
                slot_level[o] = lv
            node_level[st.node] = lv
            while len(levels) <= lv:
                levels.append([])
            levels[lv].append(i)
        fast = self.fast[0]
        self.levels = []
        for level in levels:
            heavy = [i for i in level if not isinstance(steps[i].node, LoopStep)
                     and cost_model.estimate(steps[i].node) >= threshold_s]
            light = [i for i in level if i not in heavy]
            self.levels.append(([fast[i] for i in light], [steps[i] for i in light],
                                [([fast[i]], [steps[i]]) for i in heavy]))

    levels = None
    uploads: list = []

    def run(self, feed_values, rctx, pool=None):
        vals = self.template[:]
        for spec, v in zip(self.feeds, feed_values):
            vals[spec.slot] = v
        for host_slot, device_slot, device in self.uploads:  # feeds read on a GPU: copied up once
            vals[device_slot] = device.from_host(vals[host_slot])
        fast = self.fast
        if self.levels is not None and pool is not None:
            for light, light_objs, heavy in self.levels:
                futures = [pool.submit(_run_steps, f, vals, rctx, objs) for f, objs in heavy[1:]]
                if heavy:
                    _run_steps(heavy[0][0], vals, rctx, heavy[0][1])
                if light:
                    _run_steps(light, vals, rctx, light_objs)
                for fut in futures:
                    fut.result()
        elif len(fast) == 1:
            _run_steps(fast[0], vals, rctx, self.partitions[0][1])
        else:
            futures = [pool.submit(_run_steps, f, vals, rctx, p[1]) for f, p in zip(fast[1:], self.partitions[1:])]
            try:
                _run_steps(fast[0], vals, rctx, self.partitions[0][1])
            except BaseException:
                rctx.rendezvous.abort()
                raise
            for fut in futures:
                fut.result()
        out = [vals[s] for s in self.fetch_slots]
        for i in self.copy_fetch:
            out[i] = out[i].copy()
        return out


def _run_steps(steps, vals, rctx, step_objs):
    try:
        for fn, ins, outs, attrs, wants_ctx in steps:
            if wants_ctx:
                r = fn(rctx, *[vals[i] for i in ins], **attrs)
            else:
                r = fn(*[vals[i] for i in ins], **attrs)
            if outs.__class__ is int:
                # kernels may return more outputs than the node keeps (MaxPool's indices)
                vals[outs] = r[0] if r.__class__ is tuple else r
            else:
                if r.__class__ is not tuple and r.__class__ is not list:
                    r = (r,)
                for s, v in zip(outs, r):
                    vals[s] = v
    except (GraphError, KernelError):
        raise
    except Exception as e:
        if rctx.rendezvous is not None:
            rctx.rendezvous.abort()
        failed = _failed_step(step_objs, vals)
        if failed is None:
            raise
        raise node_error(failed.node, e) from e


def node_error(node: Node, e: Exception) -> Exception:
    """The error ``e`` re-raised naming the node; state errors keep their type so callers can catch them."""
    where = f"node {node.name!r} ({node.op_type})"
    if isinstance(e, (FailedPreconditionError, OutOfRangeError)):
        return type(e)(f"{where}: {e}")
    return KernelError(f"{where} failed: {type(e).__name__}: {e}")


def _failed_step(steps, vals):
    # Output slots start as None and are filled in order, so the first unfilled one failed.
    for s in steps:
        first = s.outs if s.outs.__class__ is int else (s.outs[0] if s.outs else None)
        if first is not None and vals[first] is None:
            return s
    return None


class DataflowPlan:
    """Steps run by a ready queue over (frame, iteration)-tagged values, with dead-branch propagation."""

    def __init__(self, steps, consumers, initial, template, feeds, fetch_slots, copy_fetch, slot_owner):
        self.steps = steps
        self.consumers = consumers  # slot -> [(step index, input position)]
        self.initial = initial  # steps with no inputs at all (run once in the root frame)
        self.template = template
        self.feeds = feeds
        self.fetch_slots = fetch_slots
        self.copy_fetch = copy_fetch
        self.slot_owner = slot_owner
        self.partitions = [("", steps)]

    def run(self, feed_values, rctx, pool=None):
        from trainer.dataflow_executor import run_dataflow

        return run_dataflow(self, feed_values, rctx)


def compile_plan(graph, fetch_tensors: Sequence[Tensor], target_nodes: Sequence[Node], feed_tensors, session,
                 *, sub_plan: bool = False):
    """Build the plan for fetching ``fetch_tensors`` and running ``target_nodes`` given feeds.

    ``sub_plan`` compiles the inside of one loop (cond or body) for a fused loop step: no
    whole-loop closure, no copies of fetched values, and it must come out flat.
    """
    fed = set(feed_tensors)
    for t in list(fetch_tensors) + list(feed_tensors):
        if t.graph is not graph:
            raise GraphError(f"tensor {t.name} belongs to another graph than the session's")
    for n in target_nodes:
        if n.graph is not graph:
            raise GraphError(f"node {n.name} belongs to another graph than the session's")
    roots = [t.node for t in fetch_tensors if t not in fed] + list(target_nodes)
    nodes = _needed_nodes(roots, fed, whole_loops=not sub_plan)
    for n in nodes:
        if n.op_type == "Placeholder" and n.domain == D and not all(o in fed for o in n.outputs):
            needed_by = _who_needs(n, roots, fed)
            raise GraphError(
                f"placeholder {n.outputs[0].name!r} (dtype {n.outputs[0].dtype}, shape "
                f"{_fmt_shape(n.outputs[0].shape)}) must be fed: {needed_by} depends on it"
            )
    order = _toposort(nodes, fed)
    placement = session._placer.place(order)
    loop_steps = _fuse_loops(graph, order, session) if (session.fuse_loops and not sub_plan) else []
    if loop_steps:
        order = _collapse_loops(order, loop_steps, fed)
        for lp in loop_steps:
            placement[lp] = placement[lp.anchor]
    dynamic = any(n.op_type in CONTROL_FLOW_OPS and n.domain == D for n in order)
    if sub_plan and dynamic:
        raise GraphError("internal: a fused loop body still contains control flow")

    slots: dict[Tensor, int] = {}
    template: list = []

    def slot_of(t: Tensor) -> int:
        s = slots.get(t)
        if s is None:
            s = slots[t] = len(template)
            template.append(None)
        return s

    none_slot = None
    feeds = [FeedSpec(t, slot_of(t)) for t in feed_tensors]
    steps: list[Step] = []
    first_device = placement[order[0]] if order else None
    pushes: list = []  # (node, stack name, slot) of a fused loop body's StackPushes
    pops: dict = {}  # index slot -> the one step popping every stack at that index
    for n in order:
        if n.outputs and all(o in fed for o in n.outputs):
            continue
        dev = placement[n]
        xp = session._devices[dev].xp
        if isinstance(n, LoopStep):
            lp = n
            step = Step(lp, lp.run, tuple(slot_of(t) for t in lp.inputs), tuple(slot_of(t) for t in lp.outputs),
                        {}, True, dev)
            steps.append(step)
            continue
        # (inside a fused loop body a constant's control edge from the pivot only tags frames)
        if n.op_type == "Constant" and n.domain == "" and (sub_plan or not n.control_inputs):
            value = get_kernel("Constant")(xp=xp, **n.attrs)
            template[slot_of(n.outputs[0])] = session._devices[dev].from_host(value)
            continue
        if sub_plan and n.op_type == "Identity" and n.domain == "" and n.inputs[0] is not None:
            # Identity returns its input object: inside a flat loop body its output can share the
            # input's slot (a third of an LSTM body's steps are these).
            slots[n.outputs[0]] = slot_of(n.inputs[0])
            continue
        if sub_plan and n.domain == D and n.op_type in ("StackPush", "StackPop") and placement[n] == first_device:
            # A loop body pushes (and its gradient pops) a dozen values per iteration: one step
            # does them all (a push passes its input through, so its output shares the slot).
            if n.op_type == "StackPush":
                slots[n.outputs[0]] = slot_of(n.inputs[0])
                pushes.append((n, n.attrs["stack_name"], slots[n.outputs[0]]))
            else:
                index = slot_of(n.inputs[0])
                if index not in pops:
                    pops[index] = Step(n, stack_pop_many, (index,), [], {"stack_names": []}, True, dev)
                    steps.append(pops[index])
                pops[index].outs.append(slot_of(n.outputs[0]))
                pops[index].attrs["stack_names"].append(n.attrs["stack_name"])
            continue
        fn, wants_ctx = resolve_kernel(n)
        ins = []
        for i, t in enumerate(n.inputs):
            if t is None or (i == 0 and n.op_type == "Assign" and n.domain == D):
                if none_slot is None:
                    none_slot = len(template)
                    template.append(None)
                ins.append(none_slot)
            else:
                ins.append(slot_of(t))
        declared = get_schema(n.op_type, n.domain).max_inputs
        while declared is not None and len(ins) < declared:  # omitted optional inputs arrive as None
            if none_slot is None:
                none_slot = len(template)
                template.append(None)
            ins.append(none_slot)
        out_slots = tuple(slot_of(o) for o in n.outputs)
        outs = out_slots[0] if len(out_slots) == 1 else out_slots
        step = Step(n, fn, tuple(ins), outs, _kernel_attrs(n, xp), wants_ctx, dev)
        steps.append(step)
    for step in pops.values():
        step.outs = tuple(step.outs)
    if pushes:
        steps.append(Step(pushes[0][0], stack_push_many, tuple(s for _, _, s in pushes), (),
                          {"stack_names": [name for _, name, _ in pushes]}, True, first_device))
    fetch_slots = [slots[t] if t in slots else slot_of(t) for t in fetch_tensors]
    copy_fetch = [] if sub_plan else [i for i, t in enumerate(fetch_tensors) if _aliases_state(t) and t not in fed]
    if dynamic:
        plan = _dataflow_plan(steps, template, feeds, fetch_slots, copy_fetch, slots)
        plan.fetch_names = [t.name for t in fetch_tensors]
        return plan
    from trainer.partition import partition_steps

    partitions = partition_steps(steps, placement, template, session)
    uploads = stage_host_inputs(partitions, template, [f.slot for f in feeds], session._devices)
    plan = FlatPlan(partitions, template, feeds, fetch_slots, copy_fetch, len(template))
    plan.uploads = uploads
    if session.parallel_ops and not sub_plan:
        plan.enable_parallel(session.cost_model)
    return plan


def _aliases_state(t: Tensor) -> bool:
    # Fetched values that are variable buffers are copied so later steps cannot change them.
    node = t.node
    while node.op_type in ("Identity",) and node.inputs:
        node = node.inputs[0].node
    return get_schema(node.op_type, node.domain).stateful


def _who_needs(node: Node, roots, fed) -> str:
    for r in roots:
        if r is node:
            return f"fetch {r.name!r}"
    return "fetch " + ", ".join(repr(r.name) for r in roots[:3])


def _dataflow_plan(steps, template, feeds, fetch_slots, copy_fetch, slots):
    consumers: dict[int, list] = {}
    slot_owner: dict[int, int] = {}
    for si, s in enumerate(steps):
        outs = (s.outs,) if isinstance(s.outs, int) else s.outs
        for o in outs:
            slot_owner[o] = si
    initial = []
    for si, s in enumerate(steps):
        n_deps = 0
        for pos, slot in enumerate(s.ins):
            if slot in slot_owner:
                consumers.setdefault(slot, []).append((si, pos))
                n_deps += 1
        if n_deps == 0 and not s.node.control_inputs:
            initial.append(si)
    return DataflowPlan(steps, consumers, initial, template, feeds, fetch_slots, copy_fetch, slot_owner)


class LoopStep:
    """A whole while_loop run as one plan step: flat sub-plans for its cond and body, iterated in
    Python. Used for loops with no nested control flow, where per-iteration frame bookkeeping
    would cost more than the body itself (an LSTM step). Iterations then run one after another.
    """

    op_type = "WhileLoop"
    domain = D

    def __init__(self, loop, session, nodes):
        self.loop = loop
        self.name = loop.frame_name
        self.nodes = nodes
        self.control_inputs: list = []
        self.inputs = [e.inputs[0] for e in loop.enters] + list(self.captured)
        self.outputs = loop.exit_tensors()
        graph = loop.ctx.graph
        merged = [m.outputs[0] for m in loop.merges]
        const_outs = [loop.ctx.captured()[t] for t in self.captured]
        self.cond = compile_plan(graph, [loop.loop_cond.outputs[0]], [], merged + const_outs, session, sub_plan=True)
        body_in = [sw.outputs[1] for sw in loop.switches]
        nexts = [n.inputs[0] for n in loop.next_iterations]
        # Stack pushes the gradient added later are nobody's input: run them as targets.
        pushes = [n for n in loop.ctx.nodes if n.op_type == "StackPush" and n.domain == D]
        self.body = compile_plan(graph, nexts, pushes, body_in + const_outs, session, sub_plan=True)
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


def _collapse_loops(order, loop_steps, fed) -> list:
    """The plan order with each fused loop's nodes replaced by its LoopStep, re-sorted."""
    rep = {n: lp for lp in loop_steps for n in lp.nodes}
    items = [n for n in order if n not in rep] + list(loop_steps)
    item_set = set(items)
    deps = {}
    for it in items:
        producers = (rep.get(p, p) for p in _producers(it, fed))
        deps[it] = {p for p in producers if p in item_set and p is not it}
    return _kahn(items, deps)[0]


def _fuse_loops(graph, order, session) -> list:
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
        step = LoopStep(loop, session, nodes)
        step.anchor = first_exit
        if len(step.cond.partitions) == 1 and len(step.body.partitions) == 1:
            fused.append(step)  # loops spanning devices stay on the dataflow executor
    return fused
