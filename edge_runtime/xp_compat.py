"""The array namespace kernels receive on a device: CuPy, made to take the few NumPy-only calls
the kernels make.

Kernels are written against NumPy's API and receive ``xp``; CuPy follows that API except for a few
keyword arguments (``as_strided(writeable=)``, ``indices(sparse=)``). ``compat_namespace(base)``
returns a module object holding everything ``base`` holds, with those functions replaced by
versions that accept NumPy's signature, so kernels stay free of ``if xp is cupy`` branches. It
never imports CuPy itself (``edge_runtime.gpu`` passes the module in), so it is tested on NumPy.
"""

from __future__ import annotations

import types
from typing import Any, Sequence


def compat_namespace(base: types.ModuleType) -> types.ModuleType:
    """A module with ``base``'s attributes (name included) and NumPy-compatible replacements."""
    namespace = types.ModuleType(base.__name__)
    namespace.__dict__.update({k: v for k, v in vars(base).items() if k not in ("__loader__", "__spec__")})
    base_as_strided = base.lib.stride_tricks.as_strided
    base_indices = base.indices

    def as_strided(x: Any, shape: Sequence[int] | None = None, strides: Sequence[int] | None = None,
                   subok: bool = False, writeable: bool = True) -> Any:
        # CuPy views have no read-only flag; kernels only read the windows they ask for read-only.
        del subok, writeable
        return base_as_strided(x, shape, strides)

    def indices(dimensions: Sequence[int], dtype: Any = int, sparse: bool = False) -> Any:
        if not sparse:
            return base_indices(tuple(dimensions), dtype=dtype)
        rank = len(dimensions)
        return tuple(base.arange(n, dtype=dtype).reshape((1,) * axis + (n,) + (1,) * (rank - axis - 1))
                     for axis, n in enumerate(dimensions))

    namespace.lib = types.SimpleNamespace(**{k: v for k, v in vars(base.lib).items() if not k.startswith("__")})
    namespace.lib.stride_tricks = types.SimpleNamespace(**{**vars(base.lib.stride_tricks), "as_strided": as_strided})
    namespace.indices = indices
    return namespace
