"""The kernel of PyFunc (schemas/ops/py_func.py): call the Python function registered in this process."""

from __future__ import annotations

import numpy as np

from trainer.graph import GraphError
from trainer.kernels.registry import stateful_kernel
from trainer.py_func import registered_function


@stateful_kernel("PyFunc")
def py_func(rctx, *inputs, xp, token, Tout, num_outputs):  # noqa: N803 - TF's attribute name
    fn = registered_function(token)
    result = fn(*[np.asarray(v) for v in inputs])
    values = list(result) if isinstance(result, (list, tuple)) else ([] if result is None and not Tout else [result])
    if len(values) != len(Tout):
        raise GraphError(f"py_func {token}: the function returned {len(values)} values; Tout lists {len(Tout)}")
    out = []
    for value, dtype in zip(values, Tout):
        arr = np.asarray(value)
        if arr.dtype != np.dtype(dtype) and not np.can_cast(arr.dtype, np.dtype(dtype), "same_kind"):
            raise GraphError(f"py_func {token}: the function returned {arr.dtype} where Tout says {dtype}")
        out.append(arr.astype(dtype, copy=False))
    return tuple(out)
