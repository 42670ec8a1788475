"""TensorFlow 1.15's special functions and the ``tf.math`` ops it builds from them: ``tf.lgamma``,
``tf.math.igamma``, ``tf.math.xlogy``, ``tf.math.reduce_variance`` & co.

Ops TensorFlow runs as kernels of their own are graph ops here too (schemas/ops/special.py, with
TensorFlow's gradients); the ones TensorFlow composes in Python (lbeta, bessel_i0, polyval,
reduce_std, ...) are composed the same way. ``__all__`` holds the names TensorFlow has at ``tf.*``;
the rest exist only under ``tf.math`` (trainer/tf_math.py imports them).
"""

from __future__ import annotations

import numpy as np

from trainer import array_ops as A
from trainer import ops
from trainer.dtypes import as_numpy_dtype
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import constant, convert_to_tensor, make_op

__all__ = ["accumulate_n", "angle", "atan2", "complex", "conj", "digamma", "imag", "invert_permutation",
           "is_non_decreasing", "is_strictly_increasing", "lbeta", "lgamma", "polygamma", "real", "to_complex128",
           "to_complex64", "zeta"]


def _op(op_type: str, inputs, name=None, attrs=None) -> Tensor:
    return make_op(op_type, inputs, attrs or {}, domain=TRAINER_DOMAIN, name=name).outputs[0]


def _same_dtype(*values):
    """Tensors of one dtype: the first tensor's (or, with none, the first array's or number's), which
    Python numbers and arrays then take, as TensorFlow's binary ops convert their operands."""
    leader = next((v for v in values if isinstance(v, Tensor)), None)
    if leader is None:
        leader = convert_to_tensor(next((v for v in values if not isinstance(v, (int, float))), values[0]))
    return [v if isinstance(v, Tensor) else convert_to_tensor(np.asarray(v, leader.dtype), graph=leader.graph)
            for v in values]


def lgamma(x, name=None) -> Tensor:
    """log |Gamma(x)| elementwise."""
    return _op("Lgamma", [x], name)


def digamma(x, name=None) -> Tensor:
    """psi(x) = d/dx lgamma(x)."""
    return _op("Digamma", [x], name)


def polygamma(a, x, name=None) -> Tensor:
    """The ``a``-th derivative of digamma at ``x`` (``a`` a non-negative integer in x's float dtype)."""
    return _op("Polygamma", _same_dtype(a, x), name)


def zeta(x, q, name=None) -> Tensor:
    """The Hurwitz zeta function sum over k >= 0 of (k + q)^-x."""
    return _op("Zeta", _same_dtype(x, q), name)


def igamma(a, x, name=None) -> Tensor:
    """The regularized lower incomplete gamma function P(a, x)."""
    return _op("Igamma", _same_dtype(a, x), name)


def igammac(a, x, name=None) -> Tensor:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return _op("Igammac", _same_dtype(a, x), name)


def betainc(a, b, x, name=None) -> Tensor:
    """The regularized incomplete beta integral I_x(a, b)."""
    return _op("Betainc", _same_dtype(a, b, x), name)


def lbeta(x, name=None) -> Tensor:
    """log(|Beta(x)|) over the last axis: sum(lgamma(x)) - lgamma(sum(x)) (TensorFlow's composite;
    -inf for an empty last axis)."""
    x = convert_to_tensor(x)
    return ops.subtract(A.reduce_sum(lgamma(x), axis=-1), lgamma(A.reduce_sum(x, axis=-1)), name=name)


def bessel_i0e(x, name=None) -> Tensor:
    return _op("BesselI0e", [x], name)


def bessel_i1e(x, name=None) -> Tensor:
    return _op("BesselI1e", [x], name)


def bessel_i0(x, name=None) -> Tensor:
    """I0(x) = exp(|x|) * bessel_i0e(x), as TensorFlow computes it."""
    x = convert_to_tensor(x)
    return ops.multiply(ops.exp(ops.abs(x)), bessel_i0e(x), name=name)


def bessel_i1(x, name=None) -> Tensor:
    """I1(x) = exp(|x|) * bessel_i1e(x), as TensorFlow computes it."""
    x = convert_to_tensor(x)
    return ops.multiply(ops.exp(ops.abs(x)), bessel_i1e(x), name=name)


def atan2(y, x, name=None) -> Tensor:
    """The angle of (x, y) in [-pi, pi] elementwise (note the argument order: y first)."""
    return _op("Atan2", _same_dtype(y, x), name)


def nextafter(x1, x2, name=None) -> Tensor:
    """The next representable floating-point value after ``x1`` towards ``x2``."""
    return _op("NextAfter", _same_dtype(x1, x2), name)


def xlogy(x, y, name=None) -> Tensor:
    """``x * log(y)``, 0 where x is 0 (whatever y is)."""
    x, y = _same_dtype(x, y)
    is_zero = ops.equal(x, constant(np.zeros((), x.dtype), graph=x.graph))
    safe_y = A.where(is_zero, A.ones_like(y) + A.zeros_like(x), y + A.zeros_like(x))
    return A.where(is_zero, A.zeros_like(safe_y), ops.multiply(x, ops.log(safe_y)), name=name)


def xdivy(x, y, name=None) -> Tensor:
    """``x / y``, 0 where x is 0 (whatever y is)."""
    x, y = _same_dtype(x, y)
    is_zero = ops.equal(x, constant(np.zeros((), x.dtype), graph=x.graph))
    safe_y = A.where(is_zero, A.ones_like(y) + A.zeros_like(x), y + A.zeros_like(x))
    return A.where(is_zero, A.zeros_like(safe_y), ops.divide(x, safe_y), name=name)


def multiply_no_nan(x, y, name=None) -> Tensor:
    """``x * y``, 0 where y is 0 even when x is inf or NaN."""
    x, y = _same_dtype(x, y)
    is_zero = ops.equal(y, constant(np.zeros((), y.dtype), graph=y.graph))
    safe_x = A.where(is_zero, A.zeros_like(x) + A.zeros_like(y), x + A.zeros_like(y))
    return A.where(is_zero, A.zeros_like(safe_x), ops.multiply(safe_x, y), name=name)


def reciprocal_no_nan(x, name=None) -> Tensor:
    """``1 / x``, 0 where x is 0."""
    x = convert_to_tensor(x)
    if x.dtype is not None and x.dtype.kind not in "fc":
        raise TypeError(f"reciprocal_no_nan: x must be floating point or complex, got {x.dtype}")
    return A.div_no_nan(A.ones_like(x), x, name=name)


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    """mean((x - mean(x))^2) over ``axis`` (TensorFlow's composite)."""
    x = convert_to_tensor(input_tensor)
    if x.dtype is not None and x.dtype.kind not in "fc":
        raise TypeError(f"reduce_variance: input_tensor must be floating point, got {x.dtype}")
    means = A.reduce_mean(x, axis=axis, keepdims=True)
    deviations = ops.square(ops.subtract(x, means))
    return A.reduce_mean(deviations, axis=axis, keepdims=keepdims, name=name)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    """sqrt(reduce_variance(x))."""
    return ops.sqrt(reduce_variance(input_tensor, axis=axis, keepdims=keepdims), name=name)


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    """sqrt(sum(x^2)) over ``axis``; integer inputs give the truncated integer root, as in TensorFlow."""
    x = convert_to_tensor(input_tensor)
    if x.dtype is not None and x.dtype.kind in "iu":
        wide = ops.cast(x, np.float64)
        return ops.cast(ops.sqrt(A.reduce_sum(ops.square(wide), axis=axis, keepdims=keepdims)), x.dtype, name=name)
    return ops.sqrt(A.reduce_sum(ops.square(x), axis=axis, keepdims=keepdims), name=name)


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None) -> Tensor:
    """log(cumsum(exp(x))) along ``axis``, computed without overflow (a running logaddexp)."""
    x = convert_to_tensor(x)
    return _op("CumulativeLogsumexp", [x, constant(np.asarray(axis, np.int64), graph=x.graph)], name,
               {"exclusive": int(bool(exclusive)), "reverse": int(bool(reverse))})


def polyval(coeffs, x, name=None) -> Tensor:
    """coeffs[0] * x^(n-1) + ... + coeffs[n-1], by Horner's rule; 0 for no coefficients."""
    if not isinstance(coeffs, (list, tuple)):
        raise ValueError(f"polyval: coeffs must be a list of tensors or numbers, got {type(coeffs).__name__}")
    x = convert_to_tensor(x)
    if not coeffs:
        return A.zeros_like(x, name=name)
    p = convert_to_tensor(coeffs[0], dtype=x.dtype, graph=x.graph)
    for c in coeffs[1:]:
        p = ops.add(convert_to_tensor(c, dtype=x.dtype, graph=x.graph), ops.multiply(p, x))
    return ops.identity(p, name=name)


def invert_permutation(x, name=None) -> Tensor:
    """y with y[x[i]] = i, for a vector x holding a permutation of 0..n-1."""
    return _op("InvertPermutation", [x], name)


def _pairwise_all(x, compare, what: str, name) -> Tensor:
    x = convert_to_tensor(x)
    if x.dtype is not None and x.dtype.kind not in "iuf":
        raise TypeError(f"{what}: x must be a numeric tensor, got {x.dtype}")
    flat = ops.reshape(x, [-1])
    return A.reduce_all(compare(flat[1:], flat[:-1]), name=name)


def is_non_decreasing(x, name=None) -> Tensor:
    """Whether x[i] <= x[i + 1] throughout x (flattened); True for fewer than two elements."""
    return _pairwise_all(x, A.greater_equal, "is_non_decreasing", name)


def is_strictly_increasing(x, name=None) -> Tensor:
    """Whether x[i] < x[i + 1] throughout x (flattened); True for fewer than two elements."""
    return _pairwise_all(x, ops.greater, "is_strictly_increasing", name)


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None) -> Tensor:
    """The sum of ``inputs``, a list of tensors of one dtype and shape (TensorFlow checks both)."""
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError("accumulate_n: inputs must be a list of at least one Tensor with the same dtype and shape")
    inputs = [convert_to_tensor(t) for t in inputs]
    if any(t.dtype != inputs[0].dtype for t in inputs):
        raise ValueError("accumulate_n: inputs must be a list of at least one Tensor with the same dtype and shape")
    shapes = [t.shape for t in inputs] + ([tuple(shape)] if shape is not None else [])
    known = [s for s in shapes if s is not None]
    for s in known[1:]:
        if len(s) != len(known[0]) or any(a is not None and b is not None and a != b for a, b in zip(s, known[0])):
            raise ValueError(f"accumulate_n: input shapes {shapes} are not compatible")
    if tensor_dtype is not None and as_numpy_dtype(tensor_dtype) != inputs[0].dtype:
        raise TypeError(f"accumulate_n: tensor_dtype is {as_numpy_dtype(tensor_dtype)}, but input is of type "
                        f"{inputs[0].dtype}")
    if len(inputs) == 1 and name is None:
        return inputs[0]
    return ops.add_n(inputs, name=name)


# -- complex numbers ------------------------------------------------------------------------------
_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}


def complex(real, imag, name=None) -> Tensor:  # noqa: A001 - TensorFlow's name
    """real + 1j * imag: float32 parts give complex64, float64 parts complex128."""
    real, imag = _same_dtype(real, imag)
    if real.dtype not in _COMPLEX_OF:
        raise TypeError(f"complex: real and imag must be float32 or float64, got {real.dtype}")
    return _op("Complex", [real, imag], name)


def real(input, name=None) -> Tensor:  # noqa: A002
    """The real part of a complex tensor; a real tensor as it is."""
    x = convert_to_tensor(input)
    return _op("Real", [x], name) if x.dtype.kind == "c" else x


def imag(input, name=None) -> Tensor:  # noqa: A002
    """The imaginary part of a complex tensor; zeros for a real one."""
    x = convert_to_tensor(input)
    return _op("Imag", [x], name) if x.dtype.kind == "c" else A.zeros_like(x, name=name)


def conj(x, name=None) -> Tensor:
    """The complex conjugate; a real tensor as it is."""
    x = convert_to_tensor(x)
    if x.dtype.kind not in "fiuc":
        raise TypeError(f"conj: expected a numeric tensor, got {x.dtype}")
    return _op("Conj", [x], name) if x.dtype.kind == "c" else x


def angle(input, name=None) -> Tensor:  # noqa: A002
    """The argument of each complex element, in [-pi, pi]; pi for negative reals, 0 otherwise."""
    x = convert_to_tensor(input)
    if x.dtype.kind == "c":
        return _op("Angle", [x], name)
    pi = constant(np.asarray(np.pi, x.dtype), graph=x.graph)
    return A.where(ops.less(x, A.zeros_like(x)), pi + A.zeros_like(x), A.zeros_like(x), name=name)


def to_complex64(x, name="ToComplex64") -> Tensor:
    return ops.cast(x, np.complex64, name=name)


def to_complex128(x, name="ToComplex128") -> Tensor:
    return ops.cast(x, np.complex128, name=name)
