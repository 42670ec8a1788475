"""Compiling and launching the trainer's CUDA C++ kernels (``gpu_conv``, ``gpu_nn``) through CuPy.

A ``RawSource`` is one CUDA source whose element types are typedefs (``T`` for the floats, ``L``
for labels, ...): it is compiled once per set of types, on first use. ``launch_over`` runs a
grid-stride kernel over ``total`` elements; ``window_args`` passes a 2-D window to a kernel as the
ints its index arithmetic reads.

Imports CuPy: imported only when a GPU device is opened (through ``trainer.gpu_kernels``).
"""

from __future__ import annotations

import cupy

from edge_runtime.kernels.sliding_windows import Window

__all__ = ["FLOAT_TYPES", "MAX_BLOCKS", "THREADS", "RawSource", "launch_over", "window_args"]

THREADS = 256
MAX_BLOCKS = 65535
FLOAT_TYPES = {"float32": "float", "float64": "double"}  # the dtypes the kernels take, as CUDA types


class RawSource:
    """One CUDA source, compiled once for each set of typedefs its functions are asked for with."""

    def __init__(self, source: str):
        self.source = source
        self.modules: dict[tuple, cupy.RawModule] = {}

    def function(self, name: str, **typedefs: str) -> cupy.RawKernel:
        """The kernel ``name`` with each alias typedef'd to its CUDA type (``T="float"``)."""
        key = tuple(sorted(typedefs.items()))
        module = self.modules.get(key)
        if module is None:
            prelude = "".join(f"typedef {cuda} {alias};\n" for alias, cuda in key)
            module = self.modules[key] = cupy.RawModule(code=prelude + self.source)
        return module.get_function(name)


def launch_over(kernel: cupy.RawKernel, total: int, args: tuple) -> None:
    """Run a grid-stride ``kernel`` over ``total`` elements, THREADS a block."""
    blocks = max(1, min(MAX_BLOCKS, -(-total // THREADS)))
    kernel((blocks,), (THREADS,), args)


def window_args(x_shape: tuple, win: Window) -> tuple:
    """N, C, H, W of a 4-D input, then the 2-D window's kernel, output, strides, begin pads and
    dilations, as the int32 arguments the kernels declare in that order."""
    n, c, h, w = x_shape
    (kh, kw), (oh, ow) = win.kernel, win.out
    (sh, sw), (ph, pw), (dh, dw) = win.strides, win.pad_begin, win.dilations
    return tuple(cupy.int32(v) for v in (n, c, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw))
