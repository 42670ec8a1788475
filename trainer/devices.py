"""Devices: one abstraction (allocate, run a kernel, copy to and from host) over NumPy and CuPy.

``CPU:n`` runs on NumPy (several CPU devices exist so partitioning can be exercised on one
machine); ``GPU:n`` runs on CuPy and exists only where CuPy finds a CUDA device. Kernels never
import CuPy: they receive the device's array namespace as ``xp`` (the edge runtime's CUDA device:
CuPy behind its NumPy-compat layer). Values stay on their device across steps: variables live
where they were placed, and ``stage_host_inputs`` gives a GPU partition its own copy of each
constant once and of each feed once per run.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from edge_runtime.devices import HOST, open_device

__all__ = ["Device", "available_devices", "canonical_device", "gpu_available", "stage_host_inputs"]

_NAME = re.compile(r"^(?:/?(?:device:)?)?(cpu|gpu)(?::(\d+))?$", re.IGNORECASE)


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
        else:
            self.backend = HOST
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


def stage_host_inputs(partitions, template: list, feed_slots: list[int], devices: dict) -> list[tuple[int, int, "Device"]]:
    """Give each accelerator partition its own copy of the values it reads that no step of it
    produces: a constant placed elsewhere is copied into a new template slot now, once; a feed gets
    a new slot, returned as ``(host slot, device slot, device)`` for the plan to fill once per run.
    Rewrites the steps' input slots."""
    feeds = set(feed_slots)
    uploads: list[tuple[int, int, Device]] = []
    for name, steps in partitions:
        device = devices[name]
        if device.backend.is_host:
            continue
        produced = {o for s in steps for o in ((s.outs,) if isinstance(s.outs, int) else s.outs)}
        copies: dict[int, int] = {}
        for step in steps:
            ins = list(step.ins)
            for k, slot in enumerate(ins):
                if slot in produced or (slot not in feeds and not isinstance(template[slot], np.ndarray)):
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
