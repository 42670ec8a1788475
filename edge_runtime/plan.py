"""Execution plans: a subgraph resolved once into a flat list of steps.

Loading resolves every op to its kernel, fills attribute defaults, turns graph attributes into
plans of their own, and computes for each step which intermediates die after it. Running walks
the steps with a fresh slot list per call (so concurrent calls never share state) and does no
graph work at all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from edge_runtime.devices import HOST, ArrayDevice, host_only
from edge_runtime.format import GraphRef, ModelDef, ModelFormatError, OperatorDef
from edge_runtime.kernels import get_kernel, host_inputs, wants_output_count
from edge_runtime.shape_memo import ShapeChanged, ShapeMemo
from schemas import ShapeError, UnsupportedOpError, get_schema


# Planning and running a nested graph each take a few Python frames per level: a file nesting
# If-in-If a thousand deep would hit the interpreter's recursion limit. Real models nest a few deep.
MAX_SUBGRAPH_DEPTH = 64

# Integer constants up to this many elements stay on the host on a GPU plan: they are shapes, axes
# and pads, read back as Python ints (a device copy would cost a wait for the GPU on every read).
SMALL_HOST_INTS = 64

# Graph attributes whose outputs are exactly the node's outputs: a branch yielding fewer would
# leave the node's last outputs unset and the run would return None for them without a word.
_GRAPHS_YIELDING_NODE_OUTPUTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "If"): ("then_branch", "else_branch"),
}


class ExecutionError(RuntimeError):
    """A kernel failed while running; names the node and op."""


@dataclass
class Step:
    kernel: Callable[..., Any]
    inputs: tuple[int, ...]  # slot per declared input, -1 = omitted
    outputs: tuple[int, ...]
    attrs: dict[str, Any]
    graph_attrs: dict[str, "GraphPlan"]
    implicit: tuple[int, ...]
    release: tuple[int, ...]  # slots whose last reader is this step
    label: str
    op_type: str
    host_inputs: frozenset[int] = frozenset()  # positions the kernel reads as host values (shapes, axes)


class GraphPlan:
    def __init__(self, model: ModelDef, index: int, device: ArrayDevice, plans: dict[int, "GraphPlan"],
                 preserve_all: bool = False):
        plans[index] = self
        graph = model.subgraphs[index]
        self.index = index
        self.device = device
        self.xp = device.xp
        self.inputs = tuple(graph.inputs)
        self.outputs = tuple(graph.outputs)
        self.template: list[Any] = [None] * len(graph.tensors)
        for slot, tensor in enumerate(graph.tensors):
            if tensor.data is not None:
                # weights go to the device once, here: every run (and serving instance) shares them;
                # small integer tensors (shapes, axes) stay on the host for the shape arithmetic
                small_ints = tensor.data.dtype.kind in "iu" and tensor.data.size <= SMALL_HOST_INTS
                self.template[slot] = tensor.data if small_ints else device.to_device(tensor.data)
        self.steps: list[Step] | None = None  # None while being planned: how recursion is caught
        steps = [self._step(model, index, i, op, plans) for i, op in enumerate(graph.operators)]
        if preserve_all:
            # LiteRT's experimental_preserve_all_tensors: every value of the graph comes back after
            # its outputs, so none is released and each can be read after the run
            every = [*self.inputs, *(s for s, v in enumerate(self.template) if v is not None),
                     *(s for step in steps for s in step.outputs)]
            self.outputs += tuple(s for s in dict.fromkeys(every) if s not in self.outputs)
        self._check_dataflow(graph, steps)
        self.steps = self.with_lifetimes(steps)
        # the main graph's shape arithmetic once per input shape (host only: on a device the steps
        # of small integers already stay on the host)
        self.shape_memo = ShapeMemo.for_plan(self) if index == 0 and device.is_host and not preserve_all else None

    def _step(self, model: ModelDef, sub: int, i: int, op: OperatorDef, plans) -> Step:
        label = f"subgraph {sub}, node {i} {op.name!r} ({op.op_type})"
        try:
            schema = get_schema(op.op_type, op.domain)
            kernel = get_kernel(op.op_type, op.domain)
        except UnsupportedOpError as exc:
            raise UnsupportedOpError(f"{label}: {exc}") from None
        try:
            schema.check_arity(len(op.inputs), len(op.outputs), where=f"{label}: ")
            schema.check_given([slot >= 0 for slot in op.inputs], where=f"{label}: ")
            schema.check_attr_types(op.attrs, where=f"{label}: ")
            schema.check_output_count(op.attrs, len(op.outputs), where=f"{label}: ")
        except ShapeError as exc:
            raise ModelFormatError(str(exc)) from None
        inputs = list(op.inputs)
        if schema.max_inputs is not None:
            inputs += [-1] * (schema.max_inputs - len(inputs))
        attrs, graph_attrs = {}, {}
        for key, value in schema.resolve_attrs(op.attrs, where=f"{label}: ").items():
            if isinstance(value, GraphRef):
                plan = plans.get(value.index)
                if plan is None:
                    depth = sum(1 for p in plans.values() if p.steps is None)  # the plans above this one
                    if depth >= MAX_SUBGRAPH_DEPTH:
                        raise ModelFormatError(f"{label}: attribute {key!r} nests subgraph {value.index} more than "
                                               f"{MAX_SUBGRAPH_DEPTH} graphs deep")
                    plan = GraphPlan(model, value.index, self.device, plans)
                elif plan.steps is None:
                    # ONNX graphs never recurse; a file that does would only stop at the stack limit.
                    raise ModelFormatError(f"{label}: attribute {key!r} refers to subgraph {value.index}, which "
                                           f"contains this node: a subgraph cannot call itself")
                graph_attrs[key] = plan
            else:
                attrs[key] = value
        _check_graph_arity(label, op, graph_attrs)
        if wants_output_count(op.op_type, op.domain):
            attrs["n_outputs"] = len(op.outputs)
        return Step(kernel, tuple(inputs), tuple(op.outputs), attrs, graph_attrs, tuple(op.implicit_inputs), (), label,
                    op.op_type, host_inputs(op.op_type, op.domain))

    def _check_dataflow(self, graph, steps: list[Step]) -> None:
        """Every value read must be written once, before it is read: a file that says otherwise is corrupt.
        (Unread tensors may have several writers: omitted optional outputs all share the tensor ''.)"""
        read = set(graph.outputs).union(*(step.inputs + step.implicit for step in steps))
        written = {s: "is a constant" for s, v in enumerate(self.template) if v is not None}
        written.update((s, f"is an input of subgraph {self.index}") for s in self.inputs)
        for step in steps:
            for slot in step.inputs + step.implicit:
                if slot >= 0 and slot not in written:
                    raise ModelFormatError(f"{step.label} reads tensor {slot} ({graph.tensors[slot].name!r}) before any node writes it")
            for slot in step.outputs:
                if slot in written and slot in read:
                    raise ModelFormatError(f"{step.label} writes tensor {slot} ({graph.tensors[slot].name!r}), which "
                                           f"{written[slot]}; a tensor that is read has exactly one writer")
                written[slot] = f"{step.label} already writes"
        for slot in self.outputs:
            if slot not in written:
                raise ModelFormatError(f"subgraph {self.index}: output tensor {slot} ({graph.tensors[slot].name!r}) is never written")

    def with_lifetimes(self, steps: list[Step], keep: set[int] = frozenset()) -> list[Step]:
        """``steps`` with each one releasing the slots it reads last, but for the outputs, the
        constants and ``keep``."""
        keep = set(keep) | set(self.outputs) | {s for s, v in enumerate(self.template) if v is not None}
        last_use: dict[int, int] = {}
        for i, step in enumerate(steps):
            for slot in step.inputs + step.implicit:
                if slot >= 0:
                    last_use[slot] = i
        release: dict[int, list[int]] = {}
        for slot, i in last_use.items():
            if slot not in keep:
                release.setdefault(i, []).append(slot)
        return [replace(step, release=tuple(release.get(i, ()))) for i, step in enumerate(steps)]

    def execute(self, args: list[Any]) -> list[Any]:
        # inf and nan are results ONNX defines (log(0), 0/0, overflow), not failures: NumPy's
        # floating-point warnings about them are noise, and errors where warnings are errors.
        with np.errstate(all="ignore"):
            if self.shape_memo is not None:
                return self.shape_memo.execute(args)
            return self.run_steps(args, self.steps)

    def run_steps(self, args: list[Any], steps: list[Step], template: list[Any] | None = None) -> list[Any]:
        """The outputs of running ``steps`` (this plan's, or a specialization of them) on ``args``."""
        env = self.fresh_env(args, template)
        self.run_on(env, steps)
        return [env[i] for i in self.outputs]

    def fresh_env(self, args: list[Any], template: list[Any] | None = None) -> list[Any]:
        """A run's slots: the constants of ``template`` (this plan's by default) and the inputs."""
        env = list(self.template if template is None else template)
        for slot, value in zip(self.inputs, args):
            env[slot] = value
        return env

    def run_on(self, env: list[Any], steps: list[Step]) -> None:
        xp = self.xp
        device = None if self.device.is_host else self.device
        for step in steps:
            values = [env[i] if i >= 0 else None for i in step.inputs]
            attrs = step.attrs
            if step.graph_attrs:
                attrs = dict(attrs)
                captured = [env[i] for i in step.implicit]
                for key, plan in step.graph_attrs.items():
                    attrs[key] = plan.bind(captured)
            if device is not None:
                xp, values = _placed(device, values, not step.graph_attrs, step.host_inputs)
            try:
                result = step.kernel(*values, xp=xp, **attrs)
            except (ExecutionError, UnsupportedOpError, ShapeChanged):
                raise
            except Exception as exc:
                raise ExecutionError(f"{step.label}: {type(exc).__name__}: {exc}") from exc
            if type(result) is tuple:
                for slot, value in zip(step.outputs, result):
                    env[slot] = value
            else:
                env[step.outputs[0]] = result
            for slot in step.release:
                env[slot] = None

    def bind(self, captured: list[Any]) -> Callable[..., list[Any]]:
        """The callable a control-flow kernel receives: formal inputs in, outputs out."""

        def body(*formal: Any) -> list[Any]:
            return self.execute(list(formal) + captured)

        return body


def _placed(device: ArrayDevice, values: list[Any], host_if_all_host: bool = True,
            keep: frozenset[int] = frozenset()) -> tuple[Any, list[Any]]:
    """Where one step runs on an accelerator plan: on the host (NumPy) when an input must stay there
    (strings, bfloat16), with its other inputs brought over, or when every input is already there
    (shape arithmetic: Shape -> Gather -> Concat stays on the host, no copy each way); otherwise on
    the device, with any host input (a host step's result) copied up, except the positions in
    ``keep``, which the kernel reads as host values. Steps running graphs always take the device
    (their bodies may compute from device values)."""
    if any(host_only(v) for v in values):
        return HOST.xp, [device.to_host(v) for v in values]
    if host_if_all_host and not any(_on_device(device, v) for i, v in enumerate(values) if i not in keep):
        return HOST.xp, values
    if keep:
        return device.xp, [v if i in keep else device.to_device(v) for i, v in enumerate(values)]
    return device.xp, [device.to_device(v) for v in values]


def _on_device(device: ArrayDevice, value: Any) -> bool:
    if type(value) is list:
        return any(_on_device(device, v) for v in value)
    return isinstance(value, device.array_type)


def _check_graph_arity(label: str, op: OperatorDef, graph_attrs: dict[str, GraphPlan]) -> None:
    for key in _GRAPHS_YIELDING_NODE_OUTPUTS.get((op.domain, op.op_type), ()):
        plan = graph_attrs.get(key)
        if plan is not None and len(plan.outputs) != len(op.outputs):
            raise ModelFormatError(f"{label}: attribute {key!r} (subgraph {plan.index}) returns {len(plan.outputs)} "
                                   f"values but the node has {len(op.outputs)} outputs")
