"""The placer: user constraints first, then colocation, then a cost model.

A constraint naming another task than the placer's local task (``trainer/devices.py``) places
the node there, by its full device name (``CPU:0`` of that task where it names no device); the
partition pass then splits the plan by task. An op that updates a variable (Assign*, Apply*, Scatter*) goes where the variable lives. An op
with no constraint goes to the GPU when there is one, it has a GPU-capable kernel and the cost
model says it is big enough to pay for the transfer; otherwise to CPU:0. The cost model starts
from estimated flops and bytes per op and is refined by measured kernel times
(``CostModel.record``), which ``Session.run(..., trace=True)`` feeds.
"""

from __future__ import annotations

import functools
import math

from schemas.registry import get_schema
from trainer.devices import LOCAL_TASK, DeviceSpec, full_device_name

__all__ = ["CostModel", "Placer", "PlacementError"]

D = "flowstack"
_HOST_ONLY_STATEFUL = {"Save", "Restore", "FIFOQueue", "RandomShuffleQueue", "QueueEnqueue",
                       "QueueEnqueueMany", "QueueDequeue", "QueueDequeueMany", "QueueClose",
                       "QueueSize", "ScalarSummary", "HistogramSummary", "MergeSummary", "Placeholder"}


class PlacementError(ValueError):
    """A device constraint that cannot be met; names the node and the device."""


class CostModel:
    """Estimated seconds per op: flops/bytes estimates, replaced by measurements when there are some."""

    FLOPS_PER_S = 5e10
    BYTES_PER_S = 1e10

    def __init__(self):
        self.measured: dict[str, float] = {}

    def estimate(self, node) -> float:
        if node.name in self.measured:
            return self.measured[node.name]
        out_elems = sum(_elems(t) for t in node.outputs)
        in_elems = sum(_elems(t) for t in node.inputs if t is not None)
        flops = out_elems
        conv_like = {"Conv": (None, 1), "ConvBackpropInput": (0, 1), "ConvBackpropFilter": (0, 2)}
        if node.op_type in ("MatMul", "Gemm") and node.inputs and node.inputs[0].shape:
            k = node.inputs[0].shape[-1] or 1024
            flops = 2 * out_elems * k
        elif node.op_type in conv_like:
            y_index, w_index = conv_like[node.op_type]
            w = node.inputs[w_index] if len(node.inputs) > w_index else None
            y_elems = out_elems if y_index is None else _elems(node.inputs[y_index])
            if w is not None and w.shape:
                flops = 2 * y_elems * math.prod(d or 1 for d in w.shape[1:])
        return flops / self.FLOPS_PER_S + 4 * (out_elems + in_elems) / self.BYTES_PER_S

    def record(self, node, seconds: float) -> None:
        old = self.measured.get(node.name)
        self.measured[node.name] = seconds if old is None else 0.8 * old + 0.2 * seconds


def _elems(t) -> int:
    if t is None or t.shape is None:
        return 0
    return math.prod(1024 if d is None else d for d in t.shape)


class Placer:
    GPU_THRESHOLD_S = 2e-5

    def __init__(self, devices: list[str], cost_model: CostModel | None = None,
                 local_task: tuple[str, int] = LOCAL_TASK, soft_placement: bool = False):
        self.devices = devices
        self.local_task = tuple(local_task)
        # TF 1.x's allow_soft_placement: a constraint this session cannot meet (another task, a
        # device it lacks) keeps only what it can and the rules below choose the rest.
        self.soft_placement = soft_placement
        self.cost_model = cost_model or CostModel()
        self.default = "CPU:0"
        self.gpu = next((d for d in devices if d.startswith("GPU")), None)

    def place(self, nodes) -> dict:
        placement: dict = {}
        for n in nodes:
            placement[n] = self._place(n, placement)
        return placement

    def _place(self, node, placement) -> str:
        anchor = node.colocate_with
        schema = get_schema(node.op_type, node.domain)
        if anchor is None and schema.stateful and node.inputs and node.inputs[0] is not None:
            src = node.inputs[0].node
            if src.op_type == "Variable" and src.domain == D:
                anchor = src  # updates run where the variable lives
        if anchor is not None:
            return placement.get(anchor) or self._place(anchor, placement)
        if node.device:
            constrained = self._constraint(node)
            if constrained is not None:
                return constrained
        if self.gpu and node.op_type not in _HOST_ONLY_STATEFUL and node.domain == "":
            if self.cost_model.estimate(node) >= self.GPU_THRESHOLD_S:
                return self.gpu
        return self.default

    def _constraint(self, node) -> str | None:
        """The device a node's constraint names: a local device's short name, a remote device's
        full name (CPU:0 where it names only a task), or None where it leaves the choice to the
        rules (it names only the local task, or soft placement dropped what cannot be met)."""
        spec = _parse_device(node.device)
        if not spec.is_local(self.local_task) and not self.soft_placement:
            job, task = spec.task_name
            return full_device_name(spec.local_name or "CPU:0", (job if job is not None else self.local_task[0], task))
        name = spec.local_name
        if name is not None and name not in self.devices:
            if self.soft_placement:
                return None
            raise PlacementError(
                f"node {node.name!r} ({node.op_type}) is constrained to {node.device}, "
                f"but this session has only {self.devices}"
            )
        return name


@functools.lru_cache(maxsize=256)
def _parse_device(name: str) -> DeviceSpec:
    return DeviceSpec.parse(name)
