"""Elementwise math, activations, comparisons, logic, matrix products, casts and windows, with the
matrix inverse and the cumulative product's gradient helper (domain ``flowstack``).

Kernels never write into their inputs (they may be read-only views of the weights); where a
result is built in place, it is an array the kernel itself allocated.
"""

from __future__ import annotations

import math
from functools import reduce

import numpy as np

from edge_runtime.kernels.element_casts import cast_numeric
from edge_runtime.kernels.registry import kernel
from schemas import dtypes
from schemas.ops.shape import dtype_from_code


def _scalar(x, value):
    """``value`` as a scalar of ``x``'s dtype, so float32 stays float32."""
    return x.dtype.type(value)


# --- elementwise unary -----------------------------------------------------------------------

# A long chain of elementwise passes (GELU's) over a NumPy array of more than twice this many values
# runs a chunk of this many values at a time (256 KB of float32): a chunk's temporaries stay in the
# core's L2 cache from one pass to the next, where a whole feature map's go out to memory and back
# on every pass (benchmarks/RESULTS.md, session 18). A chain of a few cheap passes (HardSwish) loses
# more to the per-chunk calls than it gains, and one-pass functions (np.tanh) gain nothing.
CACHE_CHUNK_VALUES = 1 << 16


def in_cache_chunks(fn, x, xp):
    """``fn(x, xp)``, an elementwise function keeping ``x``'s shape and dtype, computed a chunk of
    CACHE_CHUNK_VALUES values at a time where ``x`` is a large NumPy array, else at once."""
    if xp.__name__ != "numpy" or x.size <= 2 * CACHE_CHUNK_VALUES:
        return fn(x, xp)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    for start in range(0, flat.size, CACHE_CHUNK_VALUES):
        out[start:start + CACHE_CHUNK_VALUES] = fn(flat[start:start + CACHE_CHUNK_VALUES], xp)
    return out.reshape(x.shape)


_UNARY = {
    "Abs": "abs", "Neg": "negative", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Reciprocal": "reciprocal", "Floor": "floor", "Ceil": "ceil", "Sign": "sign",
    "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "arcsin", "Acos": "arccos", "Atan": "arctan",
    "Sinh": "sinh", "Cosh": "cosh", "Asinh": "arcsinh", "Acosh": "arccosh", "Atanh": "arctanh",
    "Tanh": "tanh", "IsNaN": "isnan", "Not": "logical_not", "BitwiseNot": "invert",
    # ONNX Round is round-half-to-even, as numpy's.
    "Round": "round",
}


def _unary(name: str):
    def run(x, *, xp):
        return getattr(xp, name)(x)

    return run


for _op, _fn in _UNARY.items():
    kernel(_op)(_unary(_fn))


# Maclaurin coefficients of erf, 2/sqrt(pi) * (-1)^n / (n! (2n+1)), highest power first.
_ERF_SERIES = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(14)][::-1]
# Numerical Recipes' erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2): relative error < 1.2e-7.
_ERFC_POLY = [0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806,
              0.09678418, 0.37409196, 1.00002368, -1.26551223]


def _horner(coefficients, t):
    acc = coefficients[0]
    for c in coefficients[1:]:
        acc = acc * t + c
    return acc


def _erf(x, xp):
    native = getattr(xp, "erf", None)  # the GPU namespace carries CUDA's erf (edge_runtime.gpu)
    if native is not None and x.dtype in (xp.float32, xp.float64):
        return native(x)
    if x.dtype == xp.float32:
        return _erf_float32(x, xp)
    # numpy has no erf (and the edge runtime may not depend on scipy). Near 0 the series is
    # exact to float64; elsewhere 1 - erfc, whose error is ~1e-7 relative: float32-exact.
    z = x.astype(xp.float64)
    small = xp.clip(z, -0.5, 0.5)
    series = small * _horner(_ERF_SERIES, small * small)
    a = xp.minimum(xp.abs(z), 30.0)  # erfc(30) underflows to 0; avoids overflow in a*a
    t = 1.0 / (1.0 + 0.5 * a)
    tail = xp.sign(z) * (1.0 - t * xp.exp(_horner(_ERFC_POLY, t) - a * a))
    return xp.where(xp.abs(z) < 0.5, series, tail).astype(x.dtype, copy=False)


# The Maclaurin terms float32 needs on |z| < 0.5: the next one is below 1e-9 of erf there.
_ERF_SERIES_FLOAT32 = _ERF_SERIES[-8:]


def _erf_float32(x, xp):
    """erf in float32 throughout: the Maclaurin series on |z| < 0.5 (no 1 - h cancellation near 0,
    so small z keep float32's relative accuracy) and Abramowitz and Stegun 7.1.26 beyond (1.5e-7
    absolute, under 3e-7 relative where erf >= 0.52); within 4e-7 of erf everywhere, far inside
    the ONNX Erf test's rtol 1e-3 (4 x 64 x 1536: 6.6 ms where the float64 path takes 19.0)."""
    one = x.dtype.type
    small = xp.clip(x, one(-0.5), one(0.5))
    series = small * _horner([one(c) for c in _ERF_SERIES_FLOAT32], small * small)
    a = xp.minimum(xp.abs(x), one(10))  # erf(10) is 1 in float32; keeps a * a finite
    t = one(1) / (one(1) + one(_AS_P) * a)
    h = t * _horner([one(c) for c in _AS_POLY], t) * xp.exp(-(a * a))
    tail = xp.sign(x) * (one(1) - h)
    return xp.where(xp.abs(x) < one(0.5), series, tail)


@kernel("Erf")
def erf(x, *, xp):
    return _erf(x, xp)


@kernel("IsInf")
def is_inf(x, *, xp, detect_negative, detect_positive):
    inf = xp.isinf(x)
    if detect_negative and detect_positive:
        return inf
    if detect_negative or detect_positive:
        return inf & ((x < 0) if detect_negative else (x > 0))
    return xp.zeros(x.shape, dtype=bool)


# --- activations -----------------------------------------------------------------------------


# Below this many elements maximum() is the cheaper call; above it, clip() (measured on float32).
_RELU_CLIP_MIN_SIZE = 8192


def relu_into(x, xp, out=None):
    """max(x, 0), written to ``out`` (a new array when None).

    NumPy's maximum() against a scalar takes a loop that is not vectorized: 4-5x slower than
    maximum() of two arrays or than clip() (1M float32: 517 us against 118 us), so large float
    arrays go through clip(x, 0, inf), which gives the same values, NaN included.
    """
    if x.dtype.kind == "f" and x.size >= _RELU_CLIP_MIN_SIZE:
        return xp.clip(x, _scalar(x, 0), _scalar(x, xp.inf), out=out)
    return xp.maximum(x, _scalar(x, 0), out=out)


@kernel("Relu")
def relu(x, *, xp):
    return relu_into(x, xp)


@kernel("LeakyRelu")
def leaky_relu(x, *, xp, alpha):
    # max(x, alpha x) for alpha <= 1 and min(x, alpha x) above: no per-element choice (xp.where
    # mispredicts a branch on every other value of real activations: 4.7 of 5.3 ms for a million)
    if alpha == 0:  # Relu: infinities times 0 would make NaN
        return xp.maximum(x, _scalar(x, 0))
    scaled = xp.asarray(x * _scalar(x, alpha))  # a 0-d input's product is a scalar
    return xp.maximum(x, scaled, out=scaled) if alpha <= 1 else xp.minimum(x, scaled, out=scaled)


@kernel("PRelu")
def prelu(x, slope, *, xp):
    # max(x, 0) + min(x, 0) * slope, for any slope and no per-element choice (see leaky_relu)
    negative = xp.minimum(x, _scalar(x, 0)) * slope
    negative += xp.maximum(x, _scalar(x, 0))
    return negative.astype(x.dtype, copy=False)


def _sigmoid(x, xp):
    """1 / (1 + exp(-x)): as precise as the textbook form for either sign, with one exponential.
    Where exp(-x) passes the dtype's range it is inf and the result its limit, 0 (the true value is
    under the smallest normal float there). Half-precision inputs are computed in float32, whose
    range holds every value they can take. Four passes, where exp(min(x, 0)) / (1 + exp(-|x|)) took
    seven with two exponentials."""
    y = xp.negative(x.astype(xp.float32) if x.dtype.itemsize < 4 else x)
    y = xp.asarray(y)  # a 0-d input's ufuncs give a scalar
    with np.errstate(over="ignore"):  # exp(-x) overflowing to inf is the intended limit
        xp.exp(y, out=y)
    y += y.dtype.type(1)
    xp.reciprocal(y, out=y)
    return y.astype(x.dtype, copy=False)


@kernel("Sigmoid")
def sigmoid(x, *, xp):
    return _sigmoid(x, xp)


@kernel("HardSigmoid")
def hard_sigmoid(x, *, xp, alpha, beta):
    return xp.clip(x * _scalar(x, alpha) + _scalar(x, beta), _scalar(x, 0), _scalar(x, 1))


@kernel("HardSwish")
def hard_swish(x, *, xp):
    return x * xp.clip(x / _scalar(x, 6) + _scalar(x, 0.5), _scalar(x, 0), _scalar(x, 1))


# Abramowitz and Stegun 7.1.26: erf(z) = 1 - t * P(t) * exp(-z^2) for z >= 0, t = 1 / (1 + p z), to
# 1.5e-7 absolute (float32 Erf; the float64 ``_erf`` costs 8x).
_AS_P = 0.3275911
_AS_POLY = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)  # highest power first

# erf(x / sqrt 2) = tanh(x * Q(x^2)) with this Q (lowest power first; Q(0) = sqrt(2 / pi)), to 1.8e-7
# absolute over every x: atanh(erf(x / sqrt 2)) fitted on [0, 6.4] by least squares weighted towards
# the largest error in erf (beyond 6.4, x * Q(x^2) only grows, past 15.9, and tanh stays at 1).
_GELU_TANH_ARGUMENT = (0.7978846979853464, 0.03633412421926923, -3.372544788012786e-05, -5.484663739836336e-05,
                       3.8866737646736475e-06, -1.2687979791120574e-07, 1.6335933369915345e-09)


def _gelu_erf_fast(x, xp):
    """x * Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, in ``x``'s precision, as
    x * (1 + tanh(x * Q(x^2))) / 2 (``_GELU_TANH_ARGUMENT``): the exact Gelu to float32's accuracy,
    where the usual tanh approximation (Q of degree 1) is off by up to 3e-4. 20 passes' worth of
    work over the data, where erf by 7.1.26 folded into Gelu took 24 (its exp and division cost
    several passes each) and tanh costs two. x is raised to -20 first, where Phi is 0 in float32,
    so that x = -inf gives 0 and not -inf * 0; x = +inf gives inf (Q(inf) = inf, tanh 1)."""
    one = x.dtype.type
    xc = xp.clip(x, one(-20), one(xp.inf))  # clip, not maximum(): see relu_into
    s = xc * xc
    q = s * one(_GELU_TANH_ARGUMENT[-1])
    for c in _GELU_TANH_ARGUMENT[-2:0:-1]:
        q += one(c)
        q *= s
    q += one(_GELU_TANH_ARGUMENT[0])
    q *= xc
    xp.tanh(q, out=q)
    q *= one(0.5)
    q += one(0.5)
    q *= xc
    return q


def _gelu_tanh(x, xp):
    """x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 in one temporary, Horner-style as
    x (c + c 0.044715 x^2): eight passes where the formula as written takes eleven and six temporaries
    (GPT-2's 64x3072 gelu_new 176 -> 105 us alone)."""
    c = math.sqrt(2 / math.pi)
    t = x * x
    t *= _scalar(x, c * 0.044715)
    t += _scalar(x, c)
    t *= x
    xp.tanh(t, out=t)
    t *= _scalar(x, 0.5)
    t += _scalar(x, 0.5)
    t *= x
    return t


@kernel("Gelu")
def gelu(x, *, xp, approximate):
    half = _scalar(x, 0.5)
    if approximate == "tanh":
        return in_cache_chunks(_gelu_tanh, x, xp)
    if approximate != "none":
        raise ValueError(f"Gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if x.dtype == xp.float32 and getattr(xp, "erf", None) is None:
        return in_cache_chunks(_gelu_erf_fast, x, xp)
    # a native erf (CUDA's, on the GPU namespace) is one kernel: five passes, not the polynomial's 20
    return half * x * (_scalar(x, 1) + _erf(x / _scalar(x, math.sqrt(2)), xp))


def _exponential_below_zero(x, xp, alpha):
    """x above 0, alpha (e^x - 1) below: max(x, 0) + alpha expm1(min(x, 0)), with no per-element
    choice (see leaky_relu)."""
    y = xp.expm1(xp.minimum(x, _scalar(x, 0)))
    y *= _scalar(x, alpha)
    y += xp.maximum(x, _scalar(x, 0))
    return xp.asarray(y)


@kernel("Elu")
def elu(x, *, xp, alpha):
    return _exponential_below_zero(x, xp, alpha)


@kernel("Selu")
def selu(x, *, xp, alpha, gamma):
    y = _exponential_below_zero(x, xp, alpha)
    y *= _scalar(x, gamma)
    return y


@kernel("Celu")
def celu(x, *, xp, alpha):
    a = _scalar(x, alpha)
    zero = _scalar(x, 0)
    return xp.maximum(x, zero) + xp.minimum(zero, a * xp.expm1(xp.minimum(x, zero) / a))


def _softplus(x, xp):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large |x|.
    return xp.maximum(x, _scalar(x, 0)) + xp.log1p(xp.exp(-xp.abs(x)))


@kernel("Softplus")
def softplus(x, *, xp):
    return _softplus(x, xp)


@kernel("Softsign")
def softsign(x, *, xp):
    return x / (_scalar(x, 1) + xp.abs(x))


@kernel("Mish")
def mish(x, *, xp):
    return x * xp.tanh(_softplus(x, xp))


@kernel("Swish")
def swish(x, *, xp, alpha):
    """x * sigmoid(alpha x), the sigmoid as (tanh(alpha x / 2) + 1) / 2 in one temporary: five passes
    and no exponential (a Llama MLP's 64x1376 SiLU on a Split view: 522 -> 43 us alone, 600 -> 65 us
    in the whole model, against the two-exponential sigmoid of session 17)."""
    if x.dtype.kind != "f" or x.dtype.itemsize < 4:  # half precision: tanh's rounding near 1 shows
        return x * _sigmoid(x * _scalar(x, alpha), xp)
    gate = x * _scalar(x, alpha / 2)
    xp.tanh(gate, out=gate)
    gate *= _scalar(x, 0.5)
    gate += _scalar(x, 0.5)
    gate *= x
    return gate


@kernel("Shrink")
def shrink(x, *, xp, bias, lambd):
    # Python float scalars are weak: float inputs keep their dtype, integer ones come back.
    y = xp.where(x < -lambd, x + bias, xp.where(x > lambd, x - bias, 0))
    return y.astype(x.dtype, copy=False)


@kernel("ThresholdedRelu")
def thresholded_relu(x, *, xp, alpha):
    return xp.where(x > _scalar(x, alpha), x, _scalar(x, 0))


@kernel("Clip")
def clip(x, lo, hi, *, xp):
    # clip is min(max(x, lo), hi): when lo > hi every element becomes hi, as ONNX specifies.
    if lo is None and hi is None:
        return x.copy()
    lo = None if lo is None else lo.astype(x.dtype, copy=False)
    hi = None if hi is None else hi.astype(x.dtype, copy=False)
    return xp.clip(x, lo, hi)


def _max_shifted(x, axis, xp):
    """x - max(x) along axis, with rows that are all -inf left as they are (not NaN)."""
    m = x.max(axis=axis, keepdims=True)  # the method: np.max's dispatch wrapper costs more on small x
    return x - xp.where(xp.isfinite(m), m, _scalar(x, 0))


# Where a row's exponentials, shifted by the whole tensor's maximum, sum to less than this, the
# tensor is normalized by each row's own maximum instead. A row's largest terms then sit at most
# about 8.3 + ln(row length) below the shift, so exp's argument carries at most that many times
# float32's 2^-24 more rounding than with the row's own maximum (~1e-6 relative at 128 columns),
# and nothing that matters underflows.
SOFTMAX_MIN_SHIFTED_SUM = 2.0 ** -12


# Below this many values the product's call costs more than the reduction (a 2x5 softmax 4.7 -> 6.0 us).
SOFTMAX_BLAS_MIN_SIZE = 4096


def slab_maxima(x):
    """Each trailing 2-D slab's maximum (a head's scores in attention), shaped to broadcast against
    ``x``, or None below 3 dims or for a strided ``x``. One reduction along contiguous slabs: a
    shift closer to each row's own maximum than the whole tensor's, where heads' scores spread
    apart."""
    if x.ndim < 3 or not x.flags.c_contiguous or x.size == 0:
        return None
    slabs = x.reshape(-1, x.shape[-2] * x.shape[-1])
    return np.maximum.reduce(slabs, axis=1).reshape(x.shape[:-2] + (1, 1))


def _sums_along(e, axis):
    """``e``'s sums along ``axis``, kept as a length-1 axis. Along the last axis of more than one
    row and enough values, one matrix-vector product with ones: BLAS sums attention's rows of 128
    scores several times faster than NumPy's reduction along them."""
    n = e.shape[axis]
    if axis % e.ndim != e.ndim - 1 or e.size == n or e.size < SOFTMAX_BLAS_MIN_SIZE:
        return np.add.reduce(e, axis=axis, keepdims=True)
    return np.matmul(e.reshape(-1, n), np.ones(n, dtype=e.dtype)).reshape(e.shape[:-1] + (1,))


def _softmax_shifted_by_top(x, axis):
    """Softmax shifted by max(x) over each trailing 2-D slab (over the whole array below 3 dims, or
    along another axis), or None where that is not safe (a NaN or inf, or a row so far below its
    slab's maximum that its sum falls under SOFTMAX_MIN_SHIFTED_SUM).

    Softmax is invariant to a shift along its axis, and a shift by the maximum of every element
    keeps every exponential <= 1 just as the per-row maximum does, but is one reduction over
    contiguous memory instead of one along the axis (slow for short rows): attention's
    (1, 4, 128, 128) scores 117 -> 73 us."""
    if x.dtype not in (np.float32, np.float64):
        return None
    # The reductions as ufunc calls and the scalar tested by ``math``: what ``x.max()``,
    # ``e.sum()``, ``np.isfinite`` and ``total.min()`` compute, without their dispatch (a (1, 10)
    # softmax 5.0 -> 4.5 us, the serving benchmark's output layer).
    top = slab_maxima(x) if axis % x.ndim == x.ndim - 1 else None
    if top is None:
        top = np.maximum.reduce(x, axis=None)
        if not math.isfinite(top):
            return None
    elif not np.isfinite(top).all():
        return None
    e = np.subtract(x, top, order="C")  # C order whatever x's: its rows are views below
    np.exp(e, out=e)
    total = _sums_along(e, axis)
    if not np.minimum.reduce(total, axis=None) >= SOFTMAX_MIN_SHIFTED_SUM:
        if axis % x.ndim != x.ndim - 1 or not _reshift_low_rows(x, e, total):
            return None
    np.reciprocal(total, out=total)
    e *= total
    return e


def _reshift_low_rows(x, e, total) -> bool:
    """Redo, each by its own maximum, the rows of ``e`` (exp of ``x`` shifted along the last axis)
    whose ``total`` fell under SOFTMAX_MIN_SHIFTED_SUM, in place; False (nothing done) where more
    than a quarter of the rows did, for which the per-row path over everything costs no more."""
    n = x.shape[-1]
    if not (e.flags.c_contiguous and total.flags.c_contiguous):
        return False
    rows, sums = e.reshape(-1, n), total.reshape(-1)
    low = np.flatnonzero(~(sums >= SOFTMAX_MIN_SHIFTED_SUM))
    if low.size * 4 > sums.size:
        return False
    redo = x.reshape(-1, n)[low]
    top = redo.max(axis=1, keepdims=True)
    redo -= np.where(np.isfinite(top), top, 0)  # a row of -inf stays -inf: exps of 0, as the per-row path
    np.exp(redo, out=redo)
    rows[low] = redo
    sums[low] = redo.sum(axis=1)
    return True


@kernel("Softmax")
def softmax(x, *, xp, axis):
    if x.size == 0:  # nothing to normalize, and a max along an empty axis raises
        return xp.empty(x.shape, dtype=x.dtype)
    if xp.__name__ == "numpy":
        e = _softmax_shifted_by_top(x, axis)
        if e is not None:
            return e
    e = _max_shifted(x, axis, xp)
    xp.exp(e, out=e)
    e /= _sums_along(e, axis) if xp.__name__ == "numpy" else e.sum(axis=axis, keepdims=True)
    return e


@kernel("LogSoftmax")
def log_softmax(x, *, xp, axis):
    if x.size == 0:  # nothing to normalize, and a max along an empty axis raises
        return xp.empty(x.shape, dtype=x.dtype)
    shifted = _max_shifted(x, axis, xp)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


@kernel("Hardmax")
def hardmax(x, *, xp, axis):
    if x.size == 0:  # an argmax along an empty axis has no value
        return xp.empty(x.shape, dtype=x.dtype)
    axis = axis % x.ndim
    first = xp.argmax(x, axis=axis)
    positions = xp.arange(x.shape[axis]).reshape((-1,) + (1,) * (x.ndim - axis - 1))
    return (positions == xp.expand_dims(first, axis)).astype(x.dtype)


# --- binary and variadic with broadcasting ---------------------------------------------------


@kernel("Add")
def add(a, b, *, xp):
    return xp.add(a, b)


@kernel("Sub")
def sub(a, b, *, xp):
    return xp.subtract(a, b)


@kernel("Mul")
def mul(a, b, *, xp):
    return xp.multiply(a, b)


@kernel("Div")
def div(a, b, *, xp):
    if a.dtype.kind in "iu":
        return _int_div(a, b, xp)
    return xp.divide(a, b)


def _int_div(a, b, xp):
    # ONNX integer division truncates toward zero (C semantics), unlike numpy's floor_divide.
    q = xp.floor_divide(a, b)
    fix = (xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix).astype(a.dtype)


@kernel("Pow")
def pow_(x, y, *, xp):
    # The result has the base's dtype; an integer base with a float exponent computes in float.
    if y.dtype != x.dtype and not (x.dtype.kind in "iu" and y.dtype.kind == "f"):
        y = y.astype(x.dtype)
    return xp.power(x, y).astype(x.dtype, copy=False)


@kernel("Mod")
def mod(a, b, *, xp, fmod):
    # fmod=1: sign of the dividend (C fmod); fmod=0: sign of the divisor (Python %).
    if fmod:
        return xp.fmod(a, b)
    if a.dtype.kind != "f":
        return xp.mod(a, b)
    # Python's % from fmod, as NumPy computes it: CuPy's own float mod gives NaN for x % inf and
    # loses the sign of zero results.
    r = xp.fmod(a, b)
    return xp.where(r != 0, xp.where((r < 0) != (b < 0), r + b, r), xp.copysign(r, b))


@kernel("BitShift")
def bit_shift(x, y, *, xp, direction):
    if direction == "LEFT":
        return xp.left_shift(x, y)
    if direction == "RIGHT":
        return xp.right_shift(x, y)
    raise ValueError(f"BitShift: direction must be 'LEFT' or 'RIGHT', got {direction!r}")


_BINARY = {
    "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor",
    "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
    "Equal": "equal", "Greater": "greater", "GreaterOrEqual": "greater_equal",
    "Less": "less", "LessOrEqual": "less_equal",
}


def _binary(name: str):
    def run(a, b, *, xp):
        return getattr(xp, name)(a, b)

    return run


for _op, _fn in _BINARY.items():
    kernel(_op)(_binary(_fn))


def _variadic(name: str):
    def run(*arrays, xp):
        ufunc = getattr(xp, name)
        if len(arrays) == 1:
            return arrays[0].copy()
        return reduce(ufunc, arrays)

    return run


for _op, _fn in (("Sum", "add"), ("Max", "maximum"), ("Min", "minimum")):
    kernel(_op)(_variadic(_fn))


@kernel("Mean")
def mean(*arrays, xp):
    total = reduce(xp.add, arrays)
    return (total / _scalar(total, len(arrays))).astype(total.dtype, copy=False)


@kernel("Where")
def where(condition, x, y, *, xp):
    return xp.where(condition, x, y)


# --- linear algebra --------------------------------------------------------------------------


@kernel("MatMul", bfloat16_via_float32=True)
def matmul(a, b, *, xp):
    if a.ndim > 2 and b.ndim == 2:
        return _stacked_rows_matmul(a, b, xp)
    return xp.matmul(a, b)


def _stacked_rows_matmul(a, b, xp):
    """``a @ b`` for a stack ``a`` (..., K) against one matrix ``b`` (K, N) as one GEMM over all rows.

    ``matmul`` would make one BLAS call per leading index, and PyTorch's attention export feeds
    its input projection a transposed (S, B, E) view: S calls of B rows each (ViT-Tiny's 197
    calls of one row). The leading axes are taken in memory order, so a transposed view is read
    in place; the product comes back as the same transposed view of a fresh array.
    """
    lead = a.ndim - 1
    order = sorted(range(lead), key=lambda axis: -a.strides[axis])
    in_memory_order = a.transpose(*order, lead)
    rows = in_memory_order.reshape(-1, a.shape[-1])  # a view where that order is contiguous, else one copy
    y = xp.matmul(rows, b).reshape(*in_memory_order.shape[:-1], b.shape[-1])
    inverse = sorted(range(lead), key=order.__getitem__)
    return y.transpose(*inverse, lead)


# A Gemm of few rows against an (N, K) weight (transB=1, PyTorch's Linear layout, and the layout
# the exporter gives every constant Gemm weight) runs as (B @ A^T)^T: OpenBLAS is 1.4-3x slower on
# A @ B^T there (1024x1024 weights: 2 rows 720 -> 220 us, 8 rows 806 -> 392 us, 32 rows 1286 ->
# 797 us on one thread; 0.34-0.74x on two threads). Up to 64 rows it pays for every weight
# measured; beyond, only for large ones (Zen 4, two threads, swapped / not at 80-128 rows:
# 1024x1024 0.88-0.97, 1024x4096 0.83-0.88, but 256x256 1.00-1.17 and 1024x256 1.01-1.12; on one
# thread 0.79-0.96 for all but 256x256), so weights of GEMM_SWAP_LARGE_WEIGHT elements and more
# swap up to GEMM_SWAP_LARGE_MAX_ROWS. (On Zen 5 the orientations ran even from about 96 rows.)
# Small weights swap down to GEMM_SWAP_MIN_SIDE on a side: Zen 5, one thread, swapped / not at
# 16-32 rows, LeNet's 400->120 0.49-0.61 and 120->84 0.64-0.73, 784->128 0.49-0.63 with AVX-512
# kernels, 0.79-0.94 with AVX2 ones; at 2-8 rows 1.00-1.07 with AVX-512 and 0.78-0.88 with AVX2.
# Under 80 on a side (64x32, 84->10) it did not pay.
GEMM_SWAP_MAX_ROWS = 64
GEMM_SWAP_LARGE_MAX_ROWS = 128
GEMM_SWAP_LARGE_WEIGHT = 1 << 20
GEMM_SWAP_MIN_SIDE = 80


def _swap_pays(rows: int, b) -> bool:
    """Whether ``(B @ A^T)^T`` beats ``A @ B^T`` for ``rows`` rows against the (N, K) weight ``b``."""
    if rows < 2 or min(b.shape) < GEMM_SWAP_MIN_SIDE or not b.flags.c_contiguous:
        return False
    return rows <= (GEMM_SWAP_LARGE_MAX_ROWS if b.size >= GEMM_SWAP_LARGE_WEIGHT else GEMM_SWAP_MAX_ROWS)


@kernel("Gemm", bfloat16_via_float32=True)
def gemm(a, b, c, *, xp, alpha, beta, transA, transB):
    # One BLAS call (transposes are free views); scale and bias go into the fresh product.
    a = a.T if transA else a
    if transB and _swap_pays(a.shape[0], b):
        # Left column-major, (A B^T) as the transposed view of the product: a Gemm reading it
        # swaps again and gets a row-major operand, so a chain of Linear layers copies nothing
        # (the benchmark MLP 0.345 -> 0.322 ms); readers that need rows copy as they would a view.
        y = xp.matmul(b, a.T).T
    else:
        y = xp.matmul(a, b.T if transB else b)
    if alpha != 1.0:
        y *= _scalar(y, alpha)
    if c is not None and beta != 0.0:
        y += c if beta == 1.0 else c * _scalar(c, beta)
    return y


@kernel("Einsum", bfloat16_via_float32=True)
def einsum(*operands, xp, equation):
    return xp.einsum(equation, *operands, optimize=True)


@kernel("Det")
def det(x, *, xp):
    return xp.linalg.det(x)


@kernel("Trilu")
def trilu(x, k, *, xp, upper):
    diagonal = 0 if k is None else int(k)
    return xp.triu(x, diagonal) if upper else xp.tril(x, diagonal)


def _cumulative(name: str, identity: int):
    def run(x, axis, *, xp, exclusive, reverse):
        # ONNX asks for a 0-d axis; PyTorch's default (dynamo) exporter writes a one-element 1-d
        # one, which onnxruntime also takes.
        axis = int(axis.reshape(())) % x.ndim
        if reverse:
            x = xp.flip(x, axis)
        y = getattr(xp, name)(x, axis=axis, dtype=x.dtype)
        if exclusive and x.shape[axis]:
            # Shift by one along axis rather than subtract/divide: exact, and safe for zeros.
            head = xp.full(x.shape[:axis] + (1,) + x.shape[axis + 1:], identity, dtype=x.dtype)
            body = xp.take(y, xp.arange(x.shape[axis] - 1), axis=axis)
            y = xp.concatenate([head, body], axis=axis)
        return xp.flip(y, axis) if reverse else y

    return run


kernel("CumSum")(_cumulative("cumsum", 0))
kernel("CumProd")(_cumulative("cumprod", 1))


# --- types -----------------------------------------------------------------------------------


def _cast(x, dtype, xp, saturate: int = 1, round_mode: str = "up"):
    if dtype.kind == "O":  # ONNX strings are object arrays of str
        if x.dtype.kind == "O":
            return x.copy()
        return (x.astype(np.float32) if dtypes.is_extended(x.dtype) else x).astype(str).astype(object)
    if x.dtype.kind in "OUS":
        # float('inf'), float('NaN'), ... parse every spelling ONNX allows.
        numeric = float if dtype.kind in "fc" or dtypes.is_extended(dtype) else dtype
        x = xp.asarray(x.astype(str).astype(numeric))
    return cast_numeric(x, dtype, bool(saturate), round_mode)


@kernel("Cast")
def cast(x, *, xp, to, saturate, round_mode):
    return _cast(x, dtype_from_code(to, "Cast"), xp, saturate, round_mode)


@kernel("CastLike")
def cast_like(x, target, *, xp, saturate, round_mode):
    return _cast(x, target.dtype, xp, saturate, round_mode)


# --- windows ---------------------------------------------------------------------------------


def _window(coefficients):
    """A generalized cosine window: sum_k (-1)^k a_k cos(2 pi k n / N)."""

    def run(size, *, xp, output_datatype, periodic):
        n = int(size)
        denominator = n if periodic else n - 1
        phase = 2 * math.pi * xp.arange(n, dtype=xp.float64) / max(denominator, 1)
        w = sum((-1) ** k * a * xp.cos(k * phase) for k, a in enumerate(coefficients))
        return xp.asarray(w).astype(dtype_from_code(output_datatype, "window output_datatype"))

    return run


kernel("HannWindow")(_window([0.5, 0.5]))
kernel("HammingWindow")(_window([25 / 46, 21 / 46]))
kernel("BlackmanWindow")(_window([0.42, 0.5, 0.08]))


@kernel("MatrixInverse", domain="flowstack")
def matrix_inverse(x, *, xp):
    return xp.linalg.inv(x)


@kernel("Qr", domain="flowstack")
def qr(x, *, xp, full_matrices):
    q, r = xp.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return q, r


# ------------------------------------------------------------------------------------- CumProd


def _backward_recurrence(xp, a, b):
    """s[k] = a[k] * s[k+1] + b[k] along the last axis (a[-1] = 0), in log2(n) vectorized steps.

    A Hillis-Steele scan over affine maps: after the step with stride ``d``, entry k holds the
    composition of the maps k .. k+2d-1; entries whose span reaches the end are final.
    """
    n = a.shape[-1]
    a, b = a[..., ::-1], b[..., ::-1]  # now s[m] = a[m] * s[m-1] + b[m], with a[0] = 0
    d = 1
    while d < n:
        b = xp.concatenate([b[..., :d], b[..., d:] + a[..., d:] * b[..., :-d]], axis=-1)
        a = xp.concatenate([a[..., :d], a[..., d:] * a[..., :-d]], axis=-1)
        d *= 2
    return b[..., ::-1]


@kernel("CumProdGrad", domain="flowstack")
def cum_prod_grad(dy, x, axis, *, xp, exclusive, reverse):
    """dx[k] = (product of x before k) * sum over i >= k of dy[i] * (product of x over k+1..i).

    The right factor obeys s[k] = dy[k] + x[k+1] * s[k+1]; solving that recurrence never divides
    by x, so zeros in x are exact (dividing cumsum(dy * y) by x is not).
    """
    axis = int(axis) % x.ndim
    if x.shape[axis] == 0:
        return xp.zeros_like(x)
    g, v = xp.moveaxis(dy, axis, -1), xp.moveaxis(x, axis, -1)
    if reverse:
        g, v = g[..., ::-1], v[..., ::-1]
    one = xp.ones(v.shape[:-1] + (1,), dtype=v.dtype)
    if exclusive:  # y[i] is the inclusive product at i-1: its gradient arrives one step later
        g = xp.concatenate([g[..., 1:], xp.zeros_like(one)], axis=-1)
    before = xp.concatenate([one, xp.cumprod(v[..., :-1], axis=-1)], axis=-1)
    after = _backward_recurrence(xp, xp.concatenate([v[..., 1:], xp.zeros_like(one)], axis=-1), g)
    dx = before * after
    if reverse:
        dx = dx[..., ::-1]
    return xp.ascontiguousarray(xp.moveaxis(dx, -1, axis)).astype(x.dtype)
