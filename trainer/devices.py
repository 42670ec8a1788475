"""Devices: one abstraction (allocate, run a kernel, copy to and from host) over NumPy and CuPy.

``CPU:n`` runs on NumPy (several CPU devices exist so partitioning can be exercised on one
machine); ``GPU:n`` runs on CuPy and exists only where CuPy finds a CUDA device. Kernels never
import CuPy: they receive the device's array namespace as ``xp``.
"""

from __future__ import annotations

import functools
import re

import numpy as np

__all__ = ["Device", "available_devices", "canonical_device", "gpu_available"]

_NAME = re.compile(r"^(?:/?(?:device:)?)?(cpu|gpu)(?::(\d+))?$", re.IGNORECASE)


def canonical_device(name: str) -> str:
    """"/device:GPU:0", "gpu", "GPU:0" -> "GPU:0"; "/job:ps/task:0/cpu:0" -> "/job:ps/task:0/CPU:0"."""
    if name.strip().startswith("/job:"):  # a task of a cluster (trainer.distributed)
        from trainer.distributed.cluster import parse_task_device

        task, local = parse_task_device(name.strip())
        return f"{task}/{local}" if local else task
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
            cp = _cupy()
            if cp is None:
                raise ValueError(f"device {self.name} requested but CuPy finds no CUDA device")
            self.xp = cp
        else:
            self.xp = np

    def allocate(self, shape, dtype):
        return self.xp.empty(shape, dtype=dtype)

    def run(self, kernel, *inputs, **attrs):
        return kernel(*inputs, xp=self.xp, **attrs)

    def from_host(self, array):
        if self.xp is np or array is None or (isinstance(array, np.ndarray) and array.dtype == object):
            return array
        return self.xp.asarray(array)

    def to_host(self, array):
        if isinstance(array, np.ndarray) or array is None:
            return array
        return array.get() if hasattr(array, "get") else np.asarray(array)

    def __repr__(self) -> str:
        return f"<Device {self.name}>"


def available_devices(num_cpus: int = 1) -> list[str]:
    names = [f"CPU:{i}" for i in range(num_cpus)]
    if gpu_available():
        names.append("GPU:0")
    return names
