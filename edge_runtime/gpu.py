"""The CUDA device, on CuPy. Imported only when a model is loaded with ``device="gpu"``.

Copies to the host of ``PINNED_BYTES`` or more land in page-locked memory from CuPy's pinned
pool (a DMA straight into the result, no staging copy); CuPy's own ``asarray`` already stages
uploads through pinned memory. ``concat_rows`` builds a batch from many requests in one pinned
buffer and uploads it with one copy, which is what the serving backend does with a batch.
"""

from __future__ import annotations

import functools

import cupy
import cupyx
import numpy as np

from edge_runtime.devices import DEVICE_KINDS, ArrayDevice
from edge_runtime.xp_compat import compat_namespace

PINNED_BYTES = 1 << 16


class CudaDevice(ArrayDevice):
    """CuPy's current CUDA device; kernels get CuPy through ``compat_namespace``."""

    def __init__(self):
        super().__init__("gpu", compat_namespace(cupy), cupy.ndarray)
        # What NumPy lacks and kernels look up with getattr: CUDA's erf is one fused kernel where
        # the portable float64 series is ~30 passes over the tensor (GELU in every encoder layer).
        try:
            from cupyx.scipy.special import erf
        except ImportError:
            return
        self.xp.erf = erf

    def upload(self, array: np.ndarray) -> cupy.ndarray:
        return cupy.asarray(array)

    def download(self, array: cupy.ndarray) -> np.ndarray:
        if array.nbytes < PINNED_BYTES:
            return array.get()
        out = cupyx.empty_pinned(array.shape, array.dtype)
        array.get(out=out)
        return out

    def concat_rows(self, parts: list[np.ndarray]) -> cupy.ndarray | np.ndarray:
        first = parts[0]
        if first.dtype.kind not in DEVICE_KINDS:
            return np.concatenate(parts)  # strings stay on the host
        rows = sum(len(p) for p in parts)
        staging = cupyx.empty_pinned((rows,) + first.shape[1:], first.dtype)
        start = 0
        for part in parts:
            staging[start:start + len(part)] = part
            start += len(part)
        out = cupy.empty(staging.shape, staging.dtype)
        out.set(staging)
        return out


@functools.lru_cache(maxsize=1)
def cuda_device() -> CudaDevice:
    """The process's CUDA device (one, shared by every model loaded on the GPU); fails where CUDA reports none."""
    if cupy.cuda.runtime.getDeviceCount() < 1:
        raise RuntimeError("CUDA reports no device")
    return CudaDevice()
