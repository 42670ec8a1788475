"""The registry of stateful kernels: kernels that read or write session state.

A stateful kernel is registered by op name with ``@stateful_kernel``, the same decorator style as
the pure kernels' ``@kernel`` (``edge_runtime.kernels``), and receives the run's ``RunContext``
first: ``fn(rctx, *inputs, xp, **attrs)``. Importing ``trainer.kernels`` registers every family.
"""

from __future__ import annotations

from typing import Callable

from schemas.registry import UnsupportedOpError, get_schema

__all__ = ["get_stateful_kernel", "has_stateful_kernel", "stateful_kernel"]

D = "flowstack"
_STATEFUL: dict[tuple[str, str], Callable] = {}


def stateful_kernel(name: str, domain: str = D) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the stateful kernel of op ``name``; the op must already be declared."""

    def register(fn: Callable) -> Callable:
        get_schema(name, domain)
        if (domain, name) in _STATEFUL:
            raise ValueError(f"stateful kernel for {name} registered twice")
        _STATEFUL[(domain, name)] = fn
        return fn

    return register


def get_stateful_kernel(name: str, domain: str = D) -> Callable:
    try:
        return _STATEFUL[(domain, name)]
    except KeyError:
        raise UnsupportedOpError(f"stateful op {domain}::{name} has no trainer kernel") from None


def has_stateful_kernel(name: str, domain: str = D) -> bool:
    return (domain, name) in _STATEFUL
