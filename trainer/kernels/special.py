"""Kernels of the special-function ops (schemas/ops/special.py): NumPy, computed in float64 by
``trainer.special_functions`` and returned in the inputs' dtype."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel
from trainer import special_functions as sf
from trainer.errors import InvalidArgumentError

D = "flowstack"


def _elementwise(fn):
    def run(*inputs, xp):
        dtype = np.result_type(*inputs)
        shape = np.broadcast_shapes(*(np.shape(v) for v in inputs))
        out = fn(*(np.asarray(v, np.float64) for v in inputs))
        return xp.asarray(np.broadcast_to(out, shape).astype(dtype))

    return run


kernel("Lgamma", domain=D)(_elementwise(sf.lgamma))
kernel("Digamma", domain=D)(_elementwise(sf.digamma))
kernel("Polygamma", domain=D)(_elementwise(sf.polygamma))
kernel("Zeta", domain=D)(_elementwise(sf.zeta))
kernel("Igamma", domain=D)(_elementwise(sf.igamma))
kernel("Igammac", domain=D)(_elementwise(sf.igammac))
kernel("IgammaGradA", domain=D)(_elementwise(sf.igamma_grad_a))
kernel("Betainc", domain=D)(_elementwise(sf.betainc))
kernel("BesselI0e", domain=D)(_elementwise(sf.bessel_i0e))
kernel("BesselI1e", domain=D)(_elementwise(sf.bessel_i1e))


@kernel("Atan2", domain=D)
def atan2(y, x, *, xp):
    return xp.arctan2(y, x).astype(np.result_type(y, x))


@kernel("NextAfter", domain=D)
def next_after(x1, x2, *, xp):
    return xp.nextafter(x1, x2).astype(np.result_type(x1, x2))


@kernel("InvertPermutation", domain=D)
def invert_permutation(x, *, xp):
    n = x.shape[0]
    seen = np.zeros(n, bool)
    values = np.asarray(x)
    bad = (values < 0) | (values >= n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidArgumentError(f"InvertPermutation: x[{i}] = {int(values[i])} is not in [0, {n})")
    seen[values] = True
    if not seen.all():
        raise InvalidArgumentError(f"InvertPermutation: x is not a permutation of 0..{n - 1} (a value repeats)")
    out = np.empty_like(values)
    out[values] = np.arange(n, dtype=values.dtype)
    return xp.asarray(out)


@kernel("CumulativeLogsumexp", domain=D)
def cumulative_logsumexp(x, axis, *, xp, exclusive, reverse):
    axis = int(axis) % max(x.ndim, 1)
    v = np.moveaxis(np.asarray(x), axis, -1)
    if reverse:
        v = v[..., ::-1]
    if exclusive:
        v = np.concatenate([np.full(v.shape[:-1] + (1,), -np.inf, v.dtype), v[..., :-1]], axis=-1)
    out = np.logaddexp.accumulate(v, axis=-1) if v.shape[-1] else v
    if reverse:
        out = out[..., ::-1]
    return xp.asarray(np.ascontiguousarray(np.moveaxis(out, -1, axis)).astype(x.dtype))


@kernel("Complex", domain=D)
def complex_(real, imag, *, xp):
    dtype = np.complex64 if np.result_type(real, imag) == np.float32 else np.complex128
    return (real + 1j * imag).astype(dtype)


@kernel("Real", domain=D)
def real(x, *, xp):
    return xp.ascontiguousarray(x.real)


@kernel("Imag", domain=D)
def imag(x, *, xp):
    return xp.ascontiguousarray(x.imag)


@kernel("Angle", domain=D)
def angle(x, *, xp):
    return xp.angle(x).astype(x.real.dtype)


@kernel("Conj", domain=D)
def conj(x, *, xp):
    return xp.conj(x)
