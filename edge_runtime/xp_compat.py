"""The array namespace kernels receive on a device: CuPy, made to take the few NumPy-only calls
the kernels make.

Kernels are written against NumPy's API and receive ``xp``; CuPy follows that API except for a few
keyword arguments (``as_strided(writeable=)``, ``indices(sparse=)``) and ``multiply.at``, which
CuPy does not implement (ScatterND/ScatterElements with reduction='mul'). ``compat_namespace(base)``
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

    namespace.multiply = UfuncWithAt(base.multiply, lambda a, index, b: ufunc_at_in_rounds(base, base.multiply, a, index, b))
    namespace.lib = types.SimpleNamespace(**{k: v for k, v in vars(base.lib).items() if not k.startswith("__")})
    namespace.lib.stride_tricks = types.SimpleNamespace(**{**vars(base.lib.stride_tricks), "as_strided": as_strided})
    namespace.indices = indices
    return namespace


class UfuncWithAt:
    """A ufunc whose ``at`` is replaced; everything else (calls, ``reduce``, ``out=``) is the ufunc's."""

    def __init__(self, ufunc: Any, at: Any):
        self._ufunc = ufunc
        self.at = at

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ufunc(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ufunc, name)


def ufunc_at_in_rounds(xp: Any, ufunc: Any, a: Any, index: Any, b: Any) -> None:
    """``ufunc.at(a, index, b)`` from plain fancy-index updates: duplicate targets are applied in
    rounds, each round touching every target at most once (as many rounds as the most repeated
    target). ``a`` must be C-contiguous (it is updated through a flat view); ``index`` is a tuple
    of integer index arrays over ``a``'s leading axes, as the scatter kernels pass."""
    if not a.flags.c_contiguous:
        raise ValueError("ufunc_at_in_rounds needs a C-contiguous target")
    index = index if isinstance(index, tuple) else (index,)
    lead = len(index)
    arrays = xp.broadcast_arrays(*[xp.asarray(i) for i in index])
    shape = arrays[0].shape
    positions = [xp.where(i < 0, i + a.shape[axis], i).reshape(-1) for axis, i in enumerate(arrays)]
    flat = xp.ravel_multi_index(tuple(positions), a.shape[:lead]) if lead > 1 else positions[0]
    updates = xp.broadcast_to(xp.asarray(b, dtype=a.dtype), shape + a.shape[lead:]).reshape((flat.size,) + a.shape[lead:])
    order = xp.argsort(flat)
    flat, updates = flat[order], updates[order]
    if flat.size == 0:
        return
    rank = xp.arange(flat.size) - xp.searchsorted(flat, flat, side="left")  # place among equal targets
    target = a.reshape((-1,) + a.shape[lead:])
    for r in range(int(rank.max()) + 1):
        chosen = rank == r
        rows = flat[chosen]
        target[rows] = ufunc(target[rows], updates[chosen])
