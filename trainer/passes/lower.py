"""Lower: placed nodes become ``Step``s over value slots, with kernels and attributes resolved.

Every node gets the generic lowering (``kernel_step``: its kernel, or its device's override of it
(``Device.kernel_overrides``), one slot per input and output,
omitted optional inputs as None, the kernel's attributes plus ``xp`` of its device) unless
``LOWERING_RULES`` has a rule for its op. A rule ``rule(lowering, node, device) -> bool`` emits
what the node becomes and returns True, or returns False to fall back to the generic lowering:

- ``Constant``: no step; its value goes into the plan's slot template, on its device unless every
  reader reads it as a host value (a kernel's ``host_inputs``: shapes, axes), where it stays a
  NumPy array so that a GPU step never waits to read it back;
- ``Identity`` (inside a fused loop body): its output shares its input's slot;
- ``StackPush`` / ``StackPop`` (inside a fused loop body): one step pushes every stack, one step
  per index pops them (a loop body pushes a dozen values per iteration);
- ``Assign``: its ref input is not read (the kernel gets None) and it learns its variable's name
  (through the Switch or Enter a cond branch or loop body reaches it by);
- ``WhileLoop`` (a fused ``LoopStep``): the loop's ``run`` is the kernel.

A step placed on another task (a full device name, see ``trainer/devices.py``) is lowered with a
host (NumPy) stand-in for its device: the task that runs it owns the real one.

Placeholders need no rule: a needed placeholder is always fed (the prune pass checks it), and a
fed tensor's producer is never lowered.
"""

from __future__ import annotations

from typing import Callable, Sequence

from edge_runtime.kernels import get_kernel
from edge_runtime.kernels.registry import host_inputs, wants_output_count
from schemas.registry import get_schema
import trainer.kernels  # noqa: F401  (registers every trainer kernel family)
from trainer.devices import Device
from trainer.graph import Node, Tensor
from trainer.kernels.registry import get_stateful_kernel
from trainer.kernels.training import stack_pop_many, stack_push_many
from trainer.passes.prune import reads_input
from trainer.plan import FeedSpec, Step

__all__ = ["LOWERING_RULES", "Lowered", "Lowering", "host_read_tensors", "lower", "resolve_kernel"]

D = "flowstack"
_HOST = Device("CPU:0")


def resolve_kernel(node: Node, device: Device = _HOST):
    """(fn, wants_ctx) for a node on ``device``: the device's own kernel for the op where it has one
    (``Device.kernel_overrides``), else a stateful trainer kernel or a pure registered kernel."""
    schema = get_schema(node.op_type, node.domain)
    override = device.kernel_overrides.get((node.domain, node.op_type))
    if override is not None:
        return override, schema.stateful
    if schema.stateful:
        return get_stateful_kernel(node.op_type, node.domain), True
    return get_kernel(node.op_type, node.domain), False


def host_read_tensors(order: Sequence[Node]) -> set[Tensor]:
    """The tensors that every reader among ``order`` reads as a host value (``host_inputs``)."""
    host: dict[Tensor, bool] = {}
    for n in order:
        positions = host_inputs(n.op_type, n.domain)
        for i, t in enumerate(n.inputs):
            if t is not None:
                host[t] = host.get(t, True) and i in positions
    return {t for t, only_host in host.items() if only_host}


class Lowered:
    """What lowering produced: steps in run order over the slots of ``template``."""

    def __init__(self, steps, template, slots, feeds, fetch_slots, slot_names):
        self.steps = steps
        self.template = template  # initial slot values (constants), None elsewhere
        self.slots = slots  # Tensor -> slot
        self.feeds = feeds
        self.fetch_slots = fetch_slots
        self.slot_names = slot_names  # slot -> graph tensor name (rendezvous keys use it)


class Lowering:
    """The state of lowering one plan; rules add steps and slots through it."""

    def __init__(self, session, placement: dict, sub_plan: bool, first_device, host_read: set | frozenset = frozenset()):
        self.session = session
        self.host_read = host_read  # tensors only read as host values: constants among them stay NumPy
        self.placement = placement
        self.sub_plan = sub_plan  # lowering the inside of a fused loop (cond or body)
        self.first_device = first_device
        self.slots: dict[Tensor, int] = {}
        self.slot_names: dict[int, str] = {}
        self.template: list = []
        self.steps: list[Step] = []
        self._none_slot = None
        self.pushes: list = []  # (node, stack name, slot) of a fused loop body's StackPushes
        self.pops: dict = {}  # index slot -> the one step popping every stack at that index

    def slot_of(self, t: Tensor) -> int:
        s = self.slots.get(t)
        if s is None:
            s = self.slots[t] = len(self.template)
            self.slot_names[s] = t.name
            self.template.append(None)
        return s

    def device(self, dev: str) -> Device:
        """The device a step placed on ``dev`` runs on here (a host stand-in for another task's)."""
        return _HOST if dev.startswith("/") else self.session.device(dev)

    def none_slot(self) -> int:
        """A slot that stays None: an omitted optional input, or an input a kernel does not read."""
        if self._none_slot is None:
            self._none_slot = len(self.template)
            self.template.append(None)
        return self._none_slot

    def kernel_step(self, n: Node, dev, extra_attrs: dict | None = None) -> None:
        """The generic lowering: one step calling the node's kernel."""
        device = self.device(dev)
        fn, wants_ctx = resolve_kernel(n, device)
        ins = [self.none_slot() if t is None or not reads_input(n, i) else self.slot_of(t)
               for i, t in enumerate(n.inputs)]
        declared = get_schema(n.op_type, n.domain).max_inputs
        while declared is not None and len(ins) < declared:  # omitted optional inputs arrive as None
            ins.append(self.none_slot())
        out_slots = tuple(self.slot_of(o) for o in n.outputs)
        outs = out_slots[0] if len(out_slots) == 1 else out_slots
        xp = device.xp
        attrs = dict(n.attrs)
        if wants_output_count(n.op_type, n.domain):
            attrs["n_outputs"] = len(n.outputs)
        if extra_attrs:
            attrs.update(extra_attrs)
        attrs["xp"] = xp
        self.steps.append(Step(n, fn, tuple(ins), outs, attrs, wants_ctx, dev))

    def finish(self) -> None:
        for step in self.pops.values():
            step.outs = tuple(step.outs)
        if self.pushes:
            self.steps.append(Step(self.pushes[0][0], stack_push_many, tuple(s for _, _, s in self.pushes), (),
                                   {"stack_names": [name for _, name, _ in self.pushes]}, True, self.first_device))


# -- rules ----------------------------------------------------------------------------------------
def _constant(lw: Lowering, n: Node, dev) -> bool:
    # (inside a fused loop body a constant's control edge from the pivot only tags frames)
    if n.control_inputs and not lw.sub_plan:
        return False
    # a value only read as a host value (a shape, axes) is made on the host, never uploaded
    device = _HOST if n.outputs[0] in lw.host_read else lw.device(dev)
    value = get_kernel("Constant")(xp=device.xp, **n.attrs)
    lw.template[lw.slot_of(n.outputs[0])] = device.from_host(value)
    return True


def _identity(lw: Lowering, n: Node, dev) -> bool:
    if not lw.sub_plan or n.inputs[0] is None:
        return False
    # Identity returns its input object: inside a flat loop body its output can share the input's
    # slot (a third of an LSTM body's steps are these).
    lw.slots[n.outputs[0]] = lw.slot_of(n.inputs[0])
    return True


def _stack_push(lw: Lowering, n: Node, dev) -> bool:
    if not lw.sub_plan or dev != lw.first_device:
        return False
    # A push passes its input through, so its output shares the slot; one step does them all.
    lw.slots[n.outputs[0]] = lw.slot_of(n.inputs[0])
    lw.pushes.append((n, n.attrs["stack_name"], lw.slots[n.outputs[0]]))
    return True


def _stack_pop(lw: Lowering, n: Node, dev) -> bool:
    if not lw.sub_plan or dev != lw.first_device:
        return False
    index = lw.slot_of(n.inputs[0])
    step = lw.pops.get(index)
    if step is None:
        step = lw.pops[index] = Step(n, stack_pop_many, (index,), [], {"stack_names": []}, True, dev)
        lw.steps.append(step)
    step.outs.append(lw.slot_of(n.outputs[0]))
    step.attrs["stack_names"].append(n.attrs["stack_name"])
    return True


def _assign(lw: Lowering, n: Node, dev) -> bool:
    lw.kernel_step(n, dev, {"_var": _variable_of(n.inputs[0]).attrs["shared_name"]})
    return True


# Ops that pass a variable's buffer through unchanged: an Assign in a cond branch or a loop body
# reaches its variable through a Switch or an Enter.
_PASS_THROUGH = frozenset({(D, "Switch"), (D, "Enter"), ("", "Identity")})


def _variable_of(t: Tensor) -> Node:
    node = t.node
    while (node.domain, node.op_type) in _PASS_THROUGH and node.inputs:
        node = node.inputs[0].node
    return node


def _loop_step(lw: Lowering, lp, dev) -> bool:
    lw.steps.append(Step(lp, lp.run, tuple(lw.slot_of(t) for t in lp.inputs),
                         tuple(lw.slot_of(t) for t in lp.outputs), {}, True, dev))
    return True


LoweringRule = Callable[[Lowering, Node, object], bool]
LOWERING_RULES: dict[tuple[str, str], LoweringRule] = {
    ("", "Constant"): _constant,
    ("", "Identity"): _identity,
    (D, "StackPush"): _stack_push,
    (D, "StackPop"): _stack_pop,
    (D, "Assign"): _assign,
    (D, "WhileLoop"): _loop_step,
}


def lower(order: Sequence, placement: dict, feed_tensors: Sequence[Tensor], fetch_tensors: Sequence[Tensor],
          session, *, sub_plan: bool = False) -> Lowered:
    """Steps for the placed nodes ``order`` (fed tensors' producers are skipped)."""
    fed = set(feed_tensors)
    lw = Lowering(session, placement, sub_plan, placement[order[0]] if order else None, host_read_tensors(order))
    feeds = [FeedSpec(t, lw.slot_of(t)) for t in feed_tensors]
    rules = LOWERING_RULES
    for n in order:
        if n.outputs and all(o in fed for o in n.outputs):
            continue
        dev = placement[n]
        rule = rules.get((n.domain, n.op_type))
        if rule is None or not rule(lw, n, dev):
            lw.kernel_step(n, dev)
    lw.finish()
    fetch_slots = [lw.slots[t] if t in lw.slots else lw.slot_of(t) for t in fetch_tensors]
    return Lowered(lw.steps, lw.template, lw.slots, feeds, fetch_slots, lw.slot_names)
