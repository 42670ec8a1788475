"""Shape arithmetic done once per input shape, not on every run.

Exporters write a chain of small integer ops around every Reshape of a dynamic graph
(``Shape -> Gather -> Unsqueeze -> Concat``: a large share of the nodes of PyTorch's transformer
exports; counts in benchmarks/RESULTS.md), and each costs a kernel call and a turn of the plan loop on every run although its value
depends only on the shapes ``Shape`` and ``Size`` read. ``ShapeMemo`` runs a graph once in full for
each new combination of input shapes, keeps the small values those chains produced, and from then
on runs the graph without them, their values in place of constants.

Nothing is assumed about how shapes flow through the graph: every ``Shape`` and ``Size`` node stays
in the plan and checks that the tensor it reads has the shape it had when the values were kept. A
graph whose shapes depend on its data (``NonZero``, say) fails that check; the run is then made
again in full and its values kept instead, and a plan whose checks keep failing stops memoizing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from edge_runtime.kernels import get_kernel

if TYPE_CHECKING:  # plan.py imports this module
    from edge_runtime.plan import GraphPlan, Step

# Nodes that read only their input's shape: where the kept values come from.
SHAPE_READERS = frozenset({"Shape", "Size"})

# Deterministic ops, without state, that shape arithmetic is written with. One of these is kept when
# each of its inputs is a constant or a kept value and each output is small (below).
SHAPE_ARITHMETIC = SHAPE_READERS | frozenset({
    "Abs", "Add", "And", "Cast", "Ceil", "Concat", "ConstantOfShape", "Div", "Equal", "Expand", "Flatten",
    "Floor", "Gather", "Greater", "GreaterOrEqual", "Identity", "Less", "LessOrEqual", "Max", "Min", "Mod",
    "Mul", "Neg", "Not", "Or", "Range", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "Reshape",
    "Slice", "Sqrt", "Squeeze", "Sub", "Tile", "Transpose", "Unsqueeze", "Where",
})

# Values kept are shapes, axes and indices; anything larger is data and is computed on every run.
MAX_KEPT_ELEMENTS = 64

# Input shape combinations remembered per plan (the oldest is dropped). A plan stops memoizing
# after MAX_FAILED_CHECKS failed checks (its shapes depend on its data), or where its input shapes
# keep changing: after JUDGED_AFTER_RECORDS runs in full that kept values, if fewer runs used kept
# values than made them (a run that keeps values costs more than a plain one: ViT-Tiny 27 ms
# against 21.7, one BLAS thread).
MAX_SPECIALIZATIONS = 8
MAX_FAILED_CHECKS = 3
JUDGED_AFTER_RECORDS = 16


class ShapeChanged(RuntimeError):
    """A ``Shape`` or ``Size`` node read a shape other than the one its kept value was computed from."""


@dataclass(frozen=True)
class Specialization:
    """A plan's steps for one combination of input shapes: kept values in the template, the steps
    that computed them gone, each shape reader replaced by a check."""

    template: list[Any]
    steps: list["Step"]


class ShapeMemo:
    def __init__(self, plan: "GraphPlan"):
        self.plan = plan
        self.candidates = [i for i, step in enumerate(plan.steps)
                           if step.op_type in SHAPE_ARITHMETIC and not step.graph_attrs and not step.implicit
                           and _default_domain(step)]
        self.by_shapes: dict[tuple, Specialization] = {}
        self.failed_checks = 0
        self.records = 0
        self.hits = 0

    @classmethod
    def for_plan(cls, plan: "GraphPlan") -> "ShapeMemo | None":
        """A memo for ``plan`` where it reads shapes at all, else None."""
        if not any(step.op_type in SHAPE_READERS for step in plan.steps):
            return None
        return cls(plan)

    def execute(self, args: list[Any]) -> list[Any]:
        """The plan's outputs for ``args``, with the kept values for their shapes where there are any."""
        if self.gave_up:
            return self.plan.run_steps(args, self.plan.steps)
        key = tuple(getattr(value, "shape", None) for value in args)
        specialization = self.by_shapes.get(key)
        if specialization is not None:
            try:
                outputs = self.plan.run_steps(args, specialization.steps, specialization.template)
                self.hits += 1
                return outputs
            except ShapeChanged:
                self.failed_checks += 1
                self.by_shapes.pop(key, None)
        outputs, specialization = self._record(args)
        self.records += 1
        if self.gave_up:
            self.by_shapes.clear()
        elif specialization is not None:
            if len(self.by_shapes) >= MAX_SPECIALIZATIONS:
                self.by_shapes.pop(next(iter(self.by_shapes)), None)
            self.by_shapes[key] = specialization
        return outputs

    @property
    def gave_up(self) -> bool:
        """Whether this plan runs in full from now on: its shapes depend on its data, or keep changing."""
        return self.failed_checks >= MAX_FAILED_CHECKS or (self.records >= JUDGED_AFTER_RECORDS
                                                            and self.hits < self.records)

    def _record(self, args: list[Any]) -> tuple[list[Any], Specialization | None]:
        """One run in full that keeps every candidate's outputs and each shape reader's input shape,
        and the specialization built from them (None where nothing can be kept)."""
        plan = self.plan
        candidate_outputs = {slot for i in self.candidates for slot in plan.steps[i].outputs}
        read_shapes: dict[int, tuple[int, ...]] = {}
        steps = list(plan.steps)
        for i in self.candidates:
            step = steps[i]
            release = tuple(slot for slot in step.release if slot not in candidate_outputs)
            kernel = _shape_noted(step.kernel, read_shapes, i) if step.op_type in SHAPE_READERS else step.kernel
            steps[i] = replace(step, kernel=kernel, release=release)
        env = plan.fresh_env(args)
        plan.run_on(env, steps)
        outputs = [env[slot] for slot in plan.outputs]
        return outputs, self._specialize(env, read_shapes)

    def _specialize(self, env: list[Any], read_shapes: dict[int, tuple[int, ...]]) -> Specialization | None:
        plan = self.plan
        kept: dict[int, Any] = {}
        kept_steps: set[int] = set()
        for i in self.candidates:
            step = plan.steps[i]
            reads_shape = step.op_type in SHAPE_READERS
            if not reads_shape and not all(s < 0 or plan.template[s] is not None or s in kept for s in step.inputs):
                continue
            values = [env[slot] for slot in step.outputs]
            if not all(_small(value) for value in values) or any(slot in plan.outputs for slot in step.outputs):
                continue  # data, or handed to the caller (who may write into it)
            for slot, value in zip(step.outputs, values):
                if isinstance(value, np.ndarray):
                    value = value.copy()
                    value.setflags(write=False)  # shared by every later run, like a constant
                kept[slot] = value
            kept_steps.add(i)
        if not any(plan.steps[i].op_type not in SHAPE_READERS for i in kept_steps):
            return None  # only the shape readers themselves: nothing to skip
        template = list(plan.template)
        for slot, value in kept.items():
            template[slot] = value
        steps = []
        for i, step in enumerate(plan.steps):
            if i not in kept_steps:
                steps.append(step)
            elif step.op_type in SHAPE_READERS:
                check = _shape_checked(read_shapes[i], kept[step.outputs[0]])
                steps.append(replace(step, kernel=check, inputs=step.inputs[:1], attrs={}, host_inputs=frozenset()))
        return Specialization(template, plan.with_lifetimes(steps, keep=set(kept)))


def _default_domain(step: "Step") -> bool:
    # Steps carry no domain; a custom-domain op of the same name has its own kernel, not the ONNX one.
    return step.kernel is get_kernel(step.op_type, "")


def _small(value: Any) -> bool:
    """A NumPy array or scalar (Gather of one index gives one) of at most MAX_KEPT_ELEMENTS numbers."""
    return isinstance(value, (np.ndarray, np.generic)) and value.size <= MAX_KEPT_ELEMENTS and value.dtype.kind in "biuf"


def _shape_noted(kernel: Callable[..., Any], read_shapes: dict[int, tuple[int, ...]], index: int) -> Callable[..., Any]:
    def noted(x, *rest, **attrs):
        read_shapes[index] = tuple(x.shape)
        return kernel(x, *rest, **attrs)

    return noted


def _shape_checked(shape: tuple[int, ...], value: Any) -> Callable[..., Any]:
    def checked(x, *, xp):
        if tuple(x.shape) != shape:
            raise ShapeChanged(f"read shape {tuple(x.shape)} where {shape} was kept")
        return value

    return checked
