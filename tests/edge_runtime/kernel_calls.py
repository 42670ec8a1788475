"""Calling one kernel directly, exactly as ``GraphPlan`` does, for the kernel unit tests."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import get_kernel, wants_output_count
from schemas import get_schema


def run_kernel(op: str, *inputs, domain: str = "", n_outputs: int | None = None, **attrs):
    """Run ``op``'s kernel on NumPy: inputs padded with None to the declared arity, every attribute
    resolved with its default, ``n_outputs`` (given, else all declared outputs) where the kernel
    asks for it, and NumPy's floating-point warnings off, as in the runtime."""
    schema = get_schema(op, domain)
    args = list(inputs)
    if schema.max_inputs is not None:
        args += [None] * (schema.max_inputs - len(args))
    resolved = schema.resolve_attrs(attrs)
    if wants_output_count(op, domain):
        resolved["n_outputs"] = len(schema.outputs) if n_outputs is None else n_outputs
    with np.errstate(all="ignore"):
        return get_kernel(op, domain)(*args, xp=np, **resolved)
