"""Forward kernels, registered by op name against the schemas in ``schemas/``.

A kernel is a pure function ``kernel(*inputs, xp, **attrs) -> array | tuple[array, ...]``:

- ``inputs`` arrive positionally, in schema order; an omitted optional input is ``None``;
- every attribute declared by the schema arrives by keyword, with its default filled in;
  a graph attribute arrives as a callable ``body(*values) -> list of values``;
- ``xp`` is the array namespace (``numpy`` or ``cupy``); kernels never import cupy.

They return one array or a tuple with one entry per declared output (the runtime keeps as many
as the node has).
"""

from __future__ import annotations

from typing import Callable

from schemas.registry import UnsupportedOpError, get_schema

Kernel = Callable[..., object]

_KERNELS: dict[tuple[str, str], Kernel] = {}


def kernel(name: str, domain: str = "") -> Callable[[Kernel], Kernel]:
    """Register ``fn`` as the forward kernel of op ``name``; the op must already be declared."""

    def register(fn: Kernel) -> Kernel:
        get_schema(name, domain)  # fails loudly for an op nobody declared
        key = (domain, name)
        if key in _KERNELS:
            raise ValueError(f"kernel for {name} registered twice")
        _KERNELS[key] = fn
        return fn

    return register


def get_kernel(name: str, domain: str = "") -> Kernel:
    _load_families()
    try:
        return _KERNELS[(domain, name)]
    except KeyError:
        qual = f"{domain}::{name}" if domain else name
        raise UnsupportedOpError(f"op {qual!r} has no edge runtime kernel") from None


def has_kernel(name: str, domain: str = "") -> bool:
    _load_families()
    return (domain, name) in _KERNELS


def registered_kernels() -> list[tuple[str, str]]:
    _load_families()
    return sorted(_KERNELS)


_loaded = False


def _load_families() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import edge_runtime.kernels.families  # noqa: F401
