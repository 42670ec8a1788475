"""Devices: one abstraction (allocate, run a kernel, copy to and from host) over NumPy and CuPy,
and device names.

``CPU:n`` runs on NumPy (several CPU devices exist so partitioning can be exercised on one
machine); ``GPU:n`` runs on CuPy and exists only where CuPy finds a CUDA device. Kernels never
import CuPy: they receive the device's array namespace as ``xp`` (the edge runtime's CUDA device:
CuPy behind its NumPy-compat layer). Values stay on their device across steps: variables live
where they were placed, and ``stage_host_inputs`` gives a GPU partition its own copy of each
constant once and of each feed once per run.

A device may replace the portable kernel of an op with its own: ``Device.kernel_overrides`` maps
``(domain, op_type)`` to a kernel of the same signature, and lowering uses it for steps placed on
that device. ``GPU:n`` takes its table from ``trainer.gpu_kernels`` (fused CuPy optimizer updates:
one launch per variable where the portable kernels make ten; convolutions as one im2col launch and
one GEMM; one-launch loss, pooling-gradient and ReLU-gradient kernels); ``CPU:n`` has none.

Device names follow TensorFlow's: ``"CPU:0"``, ``"/device:GPU:0"``, ``"/job:ps/task:0"``,
``"/job:worker/task:1/CPU:0"``, ``"/job:worker/replica:0/task:1/device:CPU:0"``. A
``DeviceSpec`` holds the parts (job, replica, task, device type, device index), each optional.
Nested ``trainer.device(...)`` scopes merge as TF 1.x's: the inner scope's parts win and the
outer scope fills in what the inner leaves unspecified.

Which names are local: a session runs as one task of a cluster, its *local task*. A plain
``Session(graph)`` has no cluster and is the task ``/job:localhost/replica:0/task:0``, as TF
1.x's local session: names without a job or task, or naming ``/job:localhost/task:0``, are local
devices; a name of another job or task is a remote device. The placer keeps a local placement's
short name (``"CPU:0"``) and writes a remote one in full (``str(DeviceSpec)``); the partition
pass splits the plan by task and a plain session refuses plans with remote partitions (TF 1.x
likewise refused devices its session did not have).
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import astuple, dataclass

import numpy as np

from edge_runtime.devices import HOST, open_device
from edge_runtime.kernels.registry import host_inputs

__all__ = ["LOCAL_TASK", "Device", "DeviceSpec", "available_devices", "canonical_device", "full_device_name",
           "gpu_available", "stage_host_inputs", "to_host"]

_NAME = re.compile(r"^(?:/?(?:device:)?)?(cpu|gpu)(?::(\d+))?$", re.IGNORECASE)
_PART = re.compile(r"^(?:(job):([A-Za-z_][\w-]*)|(replica):(\d+)|(task):(\d+)|(?:device:)?(cpu|gpu)(?::(\d+|\*))?)$",
                   re.IGNORECASE)
GPU_KERNELS_MODULE = "trainer.gpu_kernels"  # a GPU device's kernel_overrides live there
LOCAL_TASK = ("localhost", 0)  # the task a session without a cluster is (TF 1.x's local session)


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device name; every part may be unspecified (None).

    >>> str(DeviceSpec.parse("/job:worker/task:1/cpu:0"))
    '/job:worker/replica:0/task:1/device:CPU:0'
    >>> DeviceSpec.parse("GPU:0").merged_over(DeviceSpec.parse("/job:ps/task:0")).task_name
    ('ps', 0)
    """

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def parse(cls, name: str) -> "DeviceSpec":
        """Parse a device name; an unknown part is a ValueError naming the name and the part."""
        fields: dict = {}
        text = name.strip()
        for part in (p for p in text.split("/") if p):
            m = _PART.match(part)
            if m is None:
                raise ValueError(f"unknown device {name!r}: cannot parse {part!r}; expected /job:<name>, "
                                 f"/replica:<n>, /task:<n> and a device CPU:<n> or GPU:<n>")
            if m.group(1):
                fields["job"] = m.group(2)
            elif m.group(3):
                fields["replica"] = int(m.group(4))
            elif m.group(5):
                fields["task"] = int(m.group(6))
            else:
                fields["device_type"] = m.group(7).upper()
                index = m.group(8)
                fields["device_index"] = None if index in (None, "*") else int(index)
        return cls(**fields)

    def merged_over(self, outer: "DeviceSpec") -> "DeviceSpec":
        """This spec with its unspecified parts filled in from ``outer`` (an inner device scope over
        an outer one)."""
        return DeviceSpec(*(mine if mine is not None else theirs
                            for mine, theirs in zip(astuple(self), astuple(outer))))

    @property
    def task_name(self) -> tuple[str, int] | None:
        """``(job, task)``, or None where the name names no job or task."""
        if self.job is None and self.task is None:
            return None
        return (self.job, self.task if self.task is not None else 0)

    @property
    def local_name(self) -> str | None:
        """The device part alone (``"CPU:0"``), None where no device type is named."""
        if self.device_type is None:
            return None
        return f"{self.device_type}:{self.device_index or 0}"

    def is_local(self, local_task: tuple[str, int]) -> bool:
        """Whether this names a device of ``local_task`` (a name without job and task does)."""
        task = self.task_name
        if task is None:
            return True
        job = task[0] if task[0] is not None else local_task[0]
        return (job, task[1]) == tuple(local_task)

    def __str__(self) -> str:
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.job is not None or self.task is not None:
            parts.append(f"/replica:{self.replica or 0}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            parts.append(f"/device:{self.local_name}")
        if self.job is None and self.task is None:
            return self.local_name or ""
        return "".join(parts)


def full_device_name(local_name: str, task: tuple[str, int]) -> str:
    """``"CPU:0"`` on task ``("worker", 1)`` -> ``"/job:worker/replica:0/task:1/device:CPU:0"``."""
    return f"/job:{task[0]}/replica:0/task:{task[1]}/device:{local_name}"


def canonical_device(name: str) -> str:
    """"/device:GPU:0", "gpu", "GPU:0" -> "GPU:0"."""
    m = _NAME.match(name.strip())
    if not m:
        raise ValueError(f"unknown device {name!r}; expected 'CPU:<n>' or 'GPU:<n>'")
    return f"{m.group(1).upper()}:{int(m.group(2) or 0)}"


@functools.lru_cache(maxsize=None)
def _cupy():
    try:
        import cupy  # noqa: PLC0415 - optional

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:
        return None
    return None


def gpu_available() -> bool:
    return _cupy() is not None


class Device:
    """A place kernels run: its array namespace plus host transfers."""

    def __init__(self, name: str):
        self.name = canonical_device(name)
        self.kind, index = self.name.split(":")
        self.index = int(index)
        if self.kind == "GPU":
            if _cupy() is None:
                raise ValueError(f"device {self.name} requested but CuPy finds no CUDA device")
            self.backend = open_device("gpu")
            # imports CuPy: never on the CPU path
            self.kernel_overrides: dict = importlib.import_module(GPU_KERNELS_MODULE).KERNEL_OVERRIDES
        else:
            self.backend = HOST
            self.kernel_overrides = {}
        self.xp = self.backend.xp

    def allocate(self, shape, dtype):
        return self.xp.empty(shape, dtype=dtype)

    def run(self, kernel, *inputs, **attrs):
        return kernel(*inputs, xp=self.xp, **attrs)

    def from_host(self, array):
        return self.backend.to_device(array)

    def to_host(self, array):
        return self.backend.to_host(array)

    def __repr__(self) -> str:
        return f"<Device {self.name}>"


def to_host(array):
    """A host (NumPy) copy of a device array; NumPy arrays and None pass through."""
    if isinstance(array, np.ndarray) or array is None:
        return array
    return array.get() if hasattr(array, "get") else np.asarray(array)


def stage_host_inputs(partitions, template: list, feed_slots: list[int], device_of) -> list[tuple[int, int, "Device"]]:
    """Give each accelerator partition its own copy of the values it reads that no step of it
    produces: a constant placed elsewhere is copied into a new template slot now, once; a feed gets
    a new slot, returned as ``(host slot, device slot, device)`` for the plan to fill once per run.
    Rewrites the steps' input slots; ``device_of`` maps a partition's device name to its ``Device``."""
    feeds = set(feed_slots)
    uploads: list[tuple[int, int, Device]] = []
    for name, steps in partitions:
        device = device_of(name)
        if device.backend.is_host:
            continue
        produced = {o for s in steps for o in ((s.outs,) if isinstance(s.outs, int) else s.outs)}
        copies: dict[int, int] = {}
        for step in steps:
            ins = list(step.ins)
            on_host = host_inputs(step.node.op_type, step.node.domain)
            for k, slot in enumerate(ins):
                if slot in produced or k in on_host or (slot not in feeds and not isinstance(template[slot], np.ndarray)):
                    continue
                if slot not in copies:
                    copies[slot] = len(template)
                    if slot in feeds:
                        template.append(None)
                        uploads.append((slot, copies[slot], device))
                    else:
                        template.append(device.from_host(template[slot]))
                ins[k] = copies[slot]
            step.ins = tuple(ins)
    return uploads


def available_devices(num_cpus: int = 1) -> list[str]:
    names = [f"CPU:{i}" for i in range(num_cpus)]
    if gpu_available():
        names.append("GPU:0")
    return names
