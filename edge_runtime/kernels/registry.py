"""Forward kernels, registered by op name against the schemas in ``schemas/``.

A kernel is a pure function ``kernel(*inputs, xp, **attrs) -> array | tuple[array, ...]``:

- ``inputs`` arrive positionally, in schema order; an omitted optional input is ``None``;
- every attribute declared by the schema arrives by keyword, with its default filled in;
  a graph attribute arrives as a callable ``body(*values) -> list of values``;
- ``xp`` is the array namespace (``numpy`` or ``cupy``); kernels never import cupy.

They return one array or a tuple with one entry per declared output (the runtime keeps as many
as the node has). A kernel whose optional outputs are costly registers with
``output_count=True`` and then also receives ``n_outputs``, the number the node uses, so it can
skip the rest (MaxPool's Indices). A kernel that only reads some inputs as small host values
(shapes, axes, pads: through ``ints``) names their positions in ``host_inputs``: on the GPU those
are not copied to the device, so shape arithmetic never costs a copy and a wait each way.
A kernel whose NumPy calls have no bfloat16 loop (BLAS products: NumPy's matmul hands ml_dtypes'
bfloat16 back as float32) registers with ``bfloat16_via_float32=True``: bfloat16 inputs are
widened to float32 and its float32 outputs narrowed back, so bfloat16 in gives bfloat16 out, as
onnxruntime gives.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from schemas.op_table import OpTable, registering_module
from schemas.registry import UnsupportedOpError, get_schema, qualified_name

Kernel = Callable[..., object]

_KERNELS: OpTable[Kernel] = OpTable(
    "kernel", load=lambda: _load_families(),
    missing=lambda name, domain: UnsupportedOpError(f"op {qualified_name(name, domain)!r} has no edge runtime kernel"))
_WANTS_OUTPUT_COUNT: set[tuple[str, str]] = set()
_HOST_INPUTS: dict[tuple[str, str], frozenset[int]] = {}


def _via_float32(fn: Kernel) -> Kernel:
    """``fn`` computing bfloat16 inputs in float32 and returning its float32 results as bfloat16."""

    @functools.wraps(fn)
    def run(*inputs, xp, **attrs):
        narrow = next((x.dtype for x in inputs if getattr(x, "dtype", None) is not None and x.dtype.kind == "V"), None)
        if narrow is None:
            return fn(*inputs, xp=xp, **attrs)
        wide = [x.astype(np.float32) if getattr(x, "dtype", None) == narrow else x for x in inputs]
        out = fn(*wide, xp=xp, **attrs)
        if isinstance(out, tuple):
            return tuple(y.astype(narrow) if getattr(y, "dtype", None) == np.float32 else y for y in out)
        return out.astype(narrow) if out.dtype == np.float32 else out

    return run


def kernel(name: str, domain: str = "", *, output_count: bool = False, host_inputs: tuple[int, ...] = (),
           bfloat16_via_float32: bool = False) -> Callable[[Kernel], Kernel]:
    """Register ``fn`` as the forward kernel of op ``name``; the op must already be declared."""

    module = registering_module()

    def register(fn: Kernel) -> Kernel:
        get_schema(name, domain)  # fails loudly for an op nobody declared
        key = (domain, name)
        _KERNELS.add(name, domain, _via_float32(fn) if bfloat16_via_float32 else fn, module=module)
        if output_count:
            _WANTS_OUTPUT_COUNT.add(key)
        if host_inputs:
            _HOST_INPUTS[key] = frozenset(host_inputs)
        return fn

    return register


def wants_output_count(name: str, domain: str = "") -> bool:
    """Whether the kernel of ``name`` takes ``n_outputs`` (the number of outputs the node uses)."""
    _load_families()
    return (domain, name) in _WANTS_OUTPUT_COUNT


def host_inputs(name: str, domain: str = "") -> frozenset[int]:
    """Input positions the kernel of ``name`` reads only as host values (see the module docstring)."""
    _load_families()
    return _HOST_INPUTS.get((domain, name), frozenset())


def get_kernel(name: str, domain: str = "") -> Kernel:
    return _KERNELS.get(name, domain)


def has_kernel(name: str, domain: str = "") -> bool:
    return _KERNELS.has(name, domain)


def registered_kernels() -> list[tuple[str, str]]:
    return _KERNELS.keys()


def kernel_modules() -> dict[tuple[str, str], str]:
    """The module that registered each kernel: its family file (see ``schemas.op_table``)."""
    return _KERNELS.modules()


_loaded = False


def _load_families() -> None:
    # The flag goes up only once every family has registered: a thread that sees it set must find
    # every kernel. A thread arriving mid-import waits on Python's import lock for the same module.
    global _loaded
    if not _loaded:
        import edge_runtime.kernels.families  # noqa: F401

        _loaded = True
