"""The registry of stateful kernels: kernels that read or write session state.

A stateful kernel is registered by op name with ``@stateful_kernel``, the same decorator style as
the pure kernels' ``@kernel`` (``edge_runtime.kernels``), and receives the run's ``RunContext``
first: ``fn(rctx, *inputs, xp, **attrs)``. Importing ``trainer.kernels`` registers every family.
"""

from __future__ import annotations

from typing import Callable

from schemas.op_table import OpTable, registering_module
from schemas.registry import UnsupportedOpError, get_schema

__all__ = ["get_stateful_kernel", "has_stateful_kernel", "stateful_kernel", "stateful_kernel_modules"]

D = "flowstack"
_STATEFUL: OpTable[Callable] = OpTable(
    "stateful kernel",
    missing=lambda name, domain: UnsupportedOpError(f"stateful op {domain}::{name} has no trainer kernel"))


def stateful_kernel(name: str, domain: str = D) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the stateful kernel of op ``name``; the op must already be declared."""

    module = registering_module()

    def register(fn: Callable) -> Callable:
        get_schema(name, domain)
        _STATEFUL.add(name, domain, fn, module=module)
        return fn

    return register


def get_stateful_kernel(name: str, domain: str = D) -> Callable:
    return _STATEFUL.get(name, domain)


def has_stateful_kernel(name: str, domain: str = D) -> bool:
    return _STATEFUL.has(name, domain)


def stateful_kernel_modules() -> dict[tuple[str, str], str]:
    """The module that registered each stateful kernel: its family file (see ``schemas.op_table``)."""
    return _STATEFUL.modules()
