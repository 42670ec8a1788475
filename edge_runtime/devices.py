"""Where a loaded model's kernels run: the host (NumPy) or an accelerator (CuPy, ``edge_runtime.gpu``).

A device is an array namespace (``xp``, what kernels receive) plus the two copies between it and
the host. Values CuPy cannot hold (strings and other object arrays, and dtypes NumPy knows only
through ml_dtypes, such as bfloat16) stay on the host; a step that reads one runs on NumPy with
its other inputs brought to the host, and its results go back to the device when a device step
reads them. Sequences (Python lists of tensors) move element by element.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

# Bool, integers, unsigned, floats and complex: what a CUDA array holds. Kind "V" (ml_dtypes'
# bfloat16, float8) and "O"/"U"/"S" (strings) stay on the host.
DEVICE_KINDS = frozenset("biufc")


def host_only(value: Any) -> bool:
    """Whether ``value`` (an array, a scalar or a sequence of them) must stay on the host."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype.kind not in DEVICE_KINDS
    if type(value) is list or type(value) is tuple:
        return any(host_only(v) for v in value)
    return False


class ArrayDevice:
    """An array namespace and the copies to and from the host; the host device copies nothing."""

    def __init__(self, name: str, xp: Any, array_type: type | None = None):
        self.name = name
        self.xp = xp
        self.array_type = array_type  # None on the host

    def upload(self, array: np.ndarray) -> Any:
        """One host array on the device (the device subclass says how)."""
        return array

    def download(self, array: Any) -> np.ndarray:
        """One device array on the host (the device subclass says how)."""
        return array

    def concat_rows(self, parts: list[np.ndarray]) -> Any:
        """Host arrays concatenated along axis 0, on this device (a batch of requests)."""
        return self.to_device(np.concatenate(parts))

    @property
    def is_host(self) -> bool:
        return self.array_type is None

    def to_device(self, value: Any) -> Any:
        """``value`` with every host array the device can hold copied to it (lists element-wise)."""
        if self.array_type is None or isinstance(value, self.array_type):
            return value
        if isinstance(value, (np.ndarray, np.generic)):
            return self.upload(np.asarray(value)) if value.dtype.kind in DEVICE_KINDS else value
        if type(value) is list:
            return [self.to_device(v) for v in value]
        return value

    def to_host(self, value: Any) -> Any:
        """``value`` with every device array copied back to the host (lists element-wise)."""
        if self.array_type is None:
            return value
        if isinstance(value, self.array_type):
            return self.download(value)
        if type(value) is list:
            return [self.to_host(v) for v in value]
        return value

    def __repr__(self) -> str:
        return f"<ArrayDevice {self.name}>"


HOST = ArrayDevice("cpu", np)


def open_device(name: str) -> ArrayDevice:
    """The device called ``name`` ("cpu" or "gpu"); "gpu" fails here, with what is missing, where
    CuPy or a CUDA device is not usable."""
    if name == "cpu":
        return HOST
    if name == "gpu":
        try:
            gpu = importlib.import_module("edge_runtime.gpu")  # imports CuPy: never on the CPU path
            return gpu.cuda_device()
        except Exception as exc:  # ImportError, CUDA driver errors
            raise RuntimeError(f"device 'gpu' needs CuPy and a CUDA GPU, and none is usable here: {exc}") from exc
    raise ValueError(f"unknown device {name!r}; expected 'cpu' or 'gpu'")
