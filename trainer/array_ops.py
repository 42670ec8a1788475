"""The core ops as TensorFlow 1.15 spells them: constructors, shape and math ops, legacy keywords.

Each is composed from registered ops (ConstantOfShape, Unsqueeze, Split, OneHot, ...), so
gradients come from those ops' rules. The reductions and ``argmax`` accept TensorFlow 1.x's
older keywords (``reduction_indices``, ``keep_dims``, ``dimension``) next to ``axis``/``keepdims``.

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
...     s = tf.reduce_sum(x, reduction_indices=[1], keep_dims=True)
...     parts = tf.unstack(tf.stack([x, x * 2.0], axis=0))
>>> tf.Session(g).run([s, parts[1]])[0].tolist()
[[3.0], [7.0]]
"""

from __future__ import annotations

import builtins

import numpy as np

from trainer import ops
from trainer.dtypes import as_numpy_dtype
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import cast, constant, convert_to_tensor, make_op, unary_op

__all__ = [
    "argmax", "argmin", "assign", "assign_add", "assign_sub", "ceil", "clip_by_norm", "clip_by_value", "cos",
    "count_nonzero", "cumsum", "decode_raw", "div", "einsum", "expand_dims", "eye", "fill", "floor", "floordiv", "gather_nd",
    "greater_equal", "less_equal", "lin_space", "linspace", "log1p", "logical_and", "logical_not", "logical_or",
    "matmul", "mod", "norm", "not_equal", "one_hot", "ones", "ones_like", "pad", "range", "rank",
    "realdiv", "reciprocal", "reduce_all", "reduce_any", "reduce_logsumexp", "reduce_max", "reduce_mean",
    "reduce_min", "reduce_prod", "reduce_sum", "reverse", "round", "rsqrt", "scalar_mul", "sequence_mask",
    "sign", "sin", "size", "slice", "softplus", "split", "squared_difference", "squeeze", "stack", "tile",
    "to_double", "to_float", "to_int32", "to_int64", "truediv", "unstack", "zeros", "zeros_like",
]


def _ints(values, graph=None) -> Tensor:
    if ops.holds_tensors(values):
        return ops.pack(values, np.int64)
    if isinstance(values, Tensor) or hasattr(values, "as_tensor"):
        t = convert_to_tensor(values)
        return t if t.dtype == np.int64 else cast(t, np.int64)
    return constant(np.asarray(values, np.int64), graph=graph)


def _one_of(name: str, **spellings):
    """The one keyword given among TensorFlow's spellings of an argument (None if none is)."""
    given = {k: v for k, v in spellings.items() if v is not None}
    if len(given) > 1:
        raise ValueError(f"{name}: give only one of {', '.join(given)}")
    return next(iter(given.values()), None)


# -- constructors --------------------------------------------------------------------------------
def fill(dims, value, name=None) -> Tensor:
    """A tensor of shape ``dims`` (a list or a shape tensor) filled with the scalar ``value`` (a
    Python or NumPy scalar, or a scalar tensor computed at run time)."""
    if isinstance(value, Tensor) or hasattr(value, "as_tensor"):
        return broadcast_to(value, dims, name=name or "Fill")
    v = np.asarray(value)
    if v.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        v = v.astype(np.float32)
    return make_op("ConstantOfShape", [_ints(dims)], {"value": v.reshape(1)}, name=name or "Fill").outputs[0]


def zeros(shape, dtype=np.float32, name=None) -> Tensor:
    return fill(shape, np.zeros((), as_numpy_dtype(dtype)), name=name or "zeros")


def ones(shape, dtype=np.float32, name=None) -> Tensor:
    return fill(shape, np.ones((), as_numpy_dtype(dtype)), name=name or "ones")


def zeros_like(tensor, dtype=None, name=None, optimize=True) -> Tensor:
    out = ops.zeros_like(tensor, name=name)
    return out if dtype is None or as_numpy_dtype(dtype) == out.dtype else cast(out, dtype)


def ones_like(tensor, dtype=None, name=None, optimize=True) -> Tensor:
    out = ops.ones_like(tensor, name=name)
    return out if dtype is None or as_numpy_dtype(dtype) == out.dtype else cast(out, dtype)


def eye(num_rows: int, num_columns: int | None = None, dtype=np.float32, name=None) -> Tensor:
    return constant(np.eye(num_rows, num_columns, dtype=as_numpy_dtype(dtype)), name=name or "eye")


def range(start, limit=None, delta=1, dtype=None, name="range") -> Tensor:  # noqa: A001 - TF's name
    """``range(5)`` or ``range(2, 10, 2)``; integers give int32 as in TensorFlow."""
    if limit is None:
        start, limit = 0, start
    values = [start, limit, delta]
    if dtype is None:
        tensors = [v for v in values if isinstance(v, Tensor)]
        if tensors:
            dtype = tensors[0].dtype
        else:
            dtype = np.float32 if any(isinstance(v, float) for v in values) else np.int32
    dt = as_numpy_dtype(dtype)
    ins = [v if isinstance(v, Tensor) else constant(np.asarray(v, dt)) for v in values]
    ins = [v if v.dtype == dt else cast(v, dt) for v in ins]
    return make_op("Range", ins, name=name).outputs[0]


def lin_space(start, stop, num: int, name=None) -> Tensor:
    return constant(np.linspace(start, stop, num, dtype=np.float32), name=name or "LinSpace")


linspace = lin_space


# -- shape ops -----------------------------------------------------------------------------------
def expand_dims(input, axis=None, name=None, dim=None) -> Tensor:  # noqa: A002 - TF's name
    axis = _one_of("expand_dims", axis=axis, dim=dim)
    if axis is None:
        raise ValueError("expand_dims needs axis")
    x = convert_to_tensor(input)
    return make_op("Unsqueeze", [x, _ints([axis], x.graph)], name=name).outputs[0]


def squeeze(input, axis=None, name=None, squeeze_dims=None) -> Tensor:  # noqa: A002
    axis = _one_of("squeeze", axis=axis, squeeze_dims=squeeze_dims)
    x = convert_to_tensor(input)
    if axis is None:
        if x.shape is None or None in x.shape:
            raise ValueError(f"squeeze without axis needs a static shape, got {x.shape} for {x.name}")
        axis = [i for i, d in enumerate(x.shape) if d == 1]
    return ops.squeeze(x, axis, name=name)


def stack(values, axis: int = 0, name="stack") -> Tensor:
    """Join same-shaped tensors along a new axis."""
    parts = [expand_dims(v, axis) for v in values]
    return ops.concat(parts, axis=axis, name=name)


def unstack(value, num: int | None = None, axis: int = 0, name="unstack") -> list[Tensor]:
    """Split ``value`` along ``axis`` into its ``num`` slices (the axis removed)."""
    x = convert_to_tensor(value)
    n = num if num is not None else (None if x.shape is None else x.shape[axis])
    if n is None:
        raise ValueError(f"unstack: cannot infer num from {x.name}'s shape {x.shape}; pass num=")
    if n == 1:
        return [ops.squeeze(x, [axis])]
    parts = make_op("Split", [x], {"axis": axis, "num_outputs": n}, num_outputs=n, name=name).outputs
    return [ops.squeeze(p, [axis]) for p in parts]


def split(value, num_or_size_splits, axis: int = 0, num=None, name="split") -> list[Tensor]:
    """``num_or_size_splits`` equal parts, or parts of the listed sizes, along ``axis``."""
    x = convert_to_tensor(value)
    if isinstance(num_or_size_splits, (int, np.integer)):
        n = int(num_or_size_splits)
        if n == 1:
            return [ops.identity(x)]
        return list(make_op("Split", [x], {"axis": axis, "num_outputs": n}, num_outputs=n, name=name).outputs)
    sizes = [int(s) for s in num_or_size_splits]
    return list(make_op("Split", [x, _ints(sizes, x.graph)], {"axis": axis}, num_outputs=len(sizes),
                        name=name).outputs)


def tile(input, multiples, name=None) -> Tensor:  # noqa: A002
    x = convert_to_tensor(input)
    return make_op("Tile", [x, _ints(multiples, x.graph)], name=name).outputs[0]


def pad(tensor, paddings, mode: str = "CONSTANT", name=None, constant_values=0) -> Tensor:
    """Pad with ``paddings`` [[before, after], ...] per axis; CONSTANT, REFLECT or SYMMETRIC->edge-less."""
    x = convert_to_tensor(tensor)
    p = np.asarray(paddings, np.int64)
    onnx_pads = np.concatenate([p[:, 0], p[:, 1]])
    modes = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "edge"}
    if mode.upper() not in modes:
        raise ValueError(f"pad: mode must be one of {sorted(modes)}, got {mode!r}")
    value = constant(np.asarray(constant_values, x.dtype), graph=x.graph)
    return make_op("Pad", [x, _ints(onnx_pads, x.graph), value], {"mode": modes[mode.upper()]}, name=name).outputs[0]


def slice(input_, begin, size, name=None) -> Tensor:  # noqa: A001 - TF's name
    """``input_[begin[i]:begin[i]+size[i]]`` per axis; size -1 runs to the end."""
    x = convert_to_tensor(input_)
    if any(isinstance(v, Tensor) or ops.holds_tensors(v) for v in (begin, size)):
        # known at run time only (TF1's tf.slice(x, [0, 0], [batch, -1])): ends computed in the graph
        b, n = _ints(begin, x.graph), _ints(size, x.graph)
        if b.shape is None or b.shape[0] is None:
            raise ValueError(f"slice: the length of begin must be known, got shape {b.shape}")
        to_end = constant(np.asarray(np.iinfo(np.int64).max, np.int64), graph=x.graph)
        ends = ops.where(ops.equal(n, constant(np.asarray(-1, np.int64), graph=x.graph)), to_end, ops.add(b, n))
        axes = _ints(list(builtins.range(b.shape[0])), x.graph)
        return make_op("Slice", [x, b, ends, axes], name=name).outputs[0]
    begin = [int(b) for b in begin]
    ends = [np.iinfo(np.int64).max if int(s) == -1 else b + int(s) for b, s in zip(begin, size)]
    axes = list(builtins.range(len(begin)))
    c = [_ints(v, x.graph) for v in (begin, ends, axes)]
    return make_op("Slice", [x, *c], name=name).outputs[0]


def reverse(tensor, axis, name=None) -> Tensor:
    x = convert_to_tensor(tensor)
    axes = [axis] if isinstance(axis, int) else list(axis)
    n = len(axes)
    c = [_ints(v, x.graph) for v in ([-1] * n, [np.iinfo(np.int64).min] * n, axes, [-1] * n)]
    return make_op("Slice", [x, *c], name=name).outputs[0]


def gather_nd(params, indices, name=None, batch_dims: int = 0) -> Tensor:
    x = convert_to_tensor(params)
    return make_op("GatherND", [x, _ints(indices, x.graph)], {"batch_dims": batch_dims}, name=name).outputs[0]


def one_hot(indices, depth: int, on_value=None, off_value=None, axis: int = -1, dtype=None, name=None) -> Tensor:
    dt = as_numpy_dtype(dtype) or (np.asarray(on_value).dtype if on_value is not None else np.dtype(np.float32))
    if dt == np.float64 and dtype is None:
        dt = np.dtype(np.float32)
    idx = convert_to_tensor(indices)
    values = constant(np.asarray([0 if off_value is None else off_value, 1 if on_value is None else on_value], dt),
                      graph=idx.graph)
    return make_op("OneHot", [idx, _ints(depth, idx.graph), values], {"axis": axis}, name=name).outputs[0]


def sequence_mask(lengths, maxlen=None, dtype=np.bool_, name=None) -> Tensor:
    """[batch, maxlen] with True where position < lengths[b]."""
    lengths = convert_to_tensor(lengths)
    lengths = lengths if lengths.dtype == np.int64 else cast(lengths, np.int64)
    if maxlen is None:
        maxlen = reduce_max(lengths)
    positions = range(0, maxlen, 1, dtype=np.int64)
    mask = ops.less(expand_dims(positions, 0), expand_dims(lengths, 1))
    dt = as_numpy_dtype(dtype)
    return mask if dt == np.bool_ else cast(mask, dt, name=name)


def size(input, name=None, out_type=np.int32) -> Tensor:  # noqa: A002
    return cast(make_op("Size", [input]).outputs[0], out_type, name=name)


def rank(input, name=None) -> Tensor:  # noqa: A002
    x = convert_to_tensor(input)
    return constant(np.asarray(len(x.shape), np.int32), name=name or "Rank")


# -- reductions with TensorFlow 1.x's keywords ---------------------------------------------------
def _reduction(op_type: str):
    def reduce(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
        axis = _one_of(op_type, axis=axis, reduction_indices=reduction_indices)
        keep = _one_of(op_type, keepdims=keepdims, keep_dims=keep_dims)
        x = convert_to_tensor(input_tensor)
        with x.graph.as_default():
            axes = None if axis is None else _ints([axis] if isinstance(axis, (int, np.integer)) else list(axis))
        return make_op(op_type, [x, axes], {"keepdims": int(bool(keep))}, name=name).outputs[0]

    reduce.__name__ = op_type
    reduce.__doc__ = f"{op_type} over ``axis`` (alias ``reduction_indices``); all axes when None."
    return reduce


reduce_sum = _reduction("ReduceSum")
reduce_mean = _reduction("ReduceMean")
reduce_max = _reduction("ReduceMax")
reduce_min = _reduction("ReduceMin")
reduce_prod = _reduction("ReduceProd")
reduce_logsumexp = _reduction("ReduceLogSumExp")


def _bool_reduction(op_type: str):
    inner = _reduction(op_type)

    def reduce(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
        x = cast(input_tensor, np.int32)
        return cast(inner(x, axis, keepdims, None, reduction_indices, keep_dims), np.bool_, name=name)

    reduce.__doc__ = f"Logical {'or' if op_type == 'ReduceMax' else 'and'} over ``axis``."
    return reduce


reduce_any = _bool_reduction("ReduceMax")
reduce_all = _bool_reduction("ReduceMin")


def count_nonzero(input_tensor, axis=None, keepdims=None, dtype=np.int64, name=None, reduction_indices=None,
                  keep_dims=None) -> Tensor:
    x = convert_to_tensor(input_tensor)
    nz = cast(not_equal(x, constant(np.zeros((), x.dtype), graph=x.graph)), dtype)
    return reduce_sum(nz, axis, keepdims, name, reduction_indices, keep_dims)


def _arg(op_type: str):
    def arg(input, axis=None, name=None, dimension=None, output_type=np.int64):  # noqa: A002
        axis = _one_of(op_type, axis=axis, dimension=dimension)
        out = make_op(op_type, [input], {"axis": 0 if axis is None else int(axis), "keepdims": 0},
                      name=None if as_numpy_dtype(output_type) != np.int64 else name).outputs[0]
        return out if as_numpy_dtype(output_type) == np.int64 else cast(out, output_type, name=name)

    arg.__doc__ = f"{op_type} over ``axis`` (alias ``dimension``; axis 0 when None, as TensorFlow)."
    return arg


argmax = _arg("ArgMax")
argmin = _arg("ArgMin")


# -- math ------------------------------------------------------------------------------------------
def matmul(a, b, transpose_a: bool = False, transpose_b: bool = False, adjoint_a: bool = False,
           adjoint_b: bool = False, a_is_sparse=False, b_is_sparse=False, name=None) -> Tensor:
    a, b = convert_to_tensor(a), convert_to_tensor(b)

    def swap(t):
        rank_ = len(t.shape)
        return ops.transpose(t, list(builtins.range(rank_ - 2)) + [rank_ - 1, rank_ - 2])

    a = swap(a) if transpose_a or adjoint_a else a
    b = swap(b) if transpose_b or adjoint_b else b
    return ops.matmul(a, b, name=name)


floor = unary_op("Floor")
ceil = unary_op("Ceil")
round = unary_op("Round")  # noqa: A001 - TF's name (half to even, as TensorFlow)
sign = unary_op("Sign")
sin = unary_op("Sin")
cos = unary_op("Cos")
reciprocal = unary_op("Reciprocal")
softplus = unary_op("Softplus")
logical_not = unary_op("Not")


def rsqrt(x, name=None) -> Tensor:
    return reciprocal(ops.sqrt(x), name=name)


def log1p(x, name=None) -> Tensor:
    return ops.log(ops.add(x, 1.0), name=name)


def _binary(op_type: str):
    def build(x, y, name=None) -> Tensor:
        x, y = ops.align_integer_operands(x, y)
        return make_op(op_type, [x, y], name=name).outputs[0]

    build.__doc__ = f"Elementwise {op_type} with broadcasting."
    return build


greater_equal = _binary("GreaterOrEqual")
less_equal = _binary("LessOrEqual")
logical_and = _binary("And")
logical_or = _binary("Or")
mod = _binary("Mod")
div = truediv = realdiv = _binary("Div")


def not_equal(x, y, name=None) -> Tensor:
    return logical_not(ops.equal(x, y), name=name)


def floordiv(x, y, name=None) -> Tensor:
    """``x // y``, rounding toward minus infinity for integers too (Div truncates them)."""
    x, y = ops.align_integer_operands(x, y)
    if _is_integer(x) or _is_integer(y):
        return ops.divide(ops.subtract(x, mod(x, y)), y, name=name)
    return floor(ops.divide(x, y), name=name)


def _is_integer(x) -> bool:
    dtype = x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
    return dtype is not None and np.dtype(dtype).kind in "iu"


def squared_difference(x, y, name=None) -> Tensor:
    d = ops.subtract(x, y)
    return ops.multiply(d, d, name=name)


def scalar_mul(scalar, x, name=None) -> Tensor:
    return ops.multiply(x, scalar, name=name)


def clip_by_value(t, clip_value_min, clip_value_max, name=None) -> Tensor:
    x = convert_to_tensor(t)
    lo, hi = (v if isinstance(v, Tensor) else constant(np.asarray(v, x.dtype), graph=x.graph)
              for v in (clip_value_min, clip_value_max))
    return make_op("Clip", [x, lo, hi], name=name).outputs[0]


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None, keep_dims=None) -> Tensor:  # noqa: A002
    if ord not in ("euclidean", "fro", 2):
        raise ValueError(f"norm: only the euclidean (2-) norm is supported, got ord={ord!r}")
    return ops.sqrt(reduce_sum(ops.square(tensor), axis, keepdims, None, None, keep_dims), name=name)


def clip_by_norm(t, clip_norm, axes=None, name=None) -> Tensor:
    """``t * clip_norm / max(l2norm(t), clip_norm)`` over ``axes`` (all when None)."""
    x = convert_to_tensor(t)
    n = norm(x, axis=axes, keepdims=True)
    return ops.multiply(x, ops.divide(clip_norm, ops.maximum(n, clip_norm)), name=name)


def cumsum(x, axis: int = 0, exclusive: bool = False, reverse: bool = False, name=None) -> Tensor:
    x = convert_to_tensor(x)
    return make_op("CumSum", [x, constant(np.asarray(axis, np.int64), graph=x.graph)],
                   {"exclusive": int(exclusive), "reverse": int(reverse)}, name=name).outputs[0]


def einsum(equation: str, *inputs, name=None) -> Tensor:
    return make_op("Einsum", list(inputs), {"equation": equation}, name=name).outputs[0]


def to_float(x, name="ToFloat") -> Tensor:
    return cast(x, np.float32, name=name)


def to_double(x, name="ToDouble") -> Tensor:
    return cast(x, np.float64, name=name)


def to_int32(x, name="ToInt32") -> Tensor:
    return cast(x, np.int32, name=name)


def to_int64(x, name="ToInt64") -> Tensor:
    return cast(x, np.int64, name=name)


# -- variable updates as functions ---------------------------------------------------------------
def assign(ref, value, validate_shape=None, use_locking=None, name=None) -> Tensor:
    return ref.assign(value, name=name)


def assign_add(ref, value, use_locking=None, name=None) -> Tensor:
    return ref.assign_add(value, name=name)


def assign_sub(ref, value, use_locking=None, name=None) -> Tensor:
    return ref.assign_sub(value, name=name)



# -- more math, as scripts reach for it -----------------------------------------------------------
tan = unary_op("Tan")
asin = unary_op("Asin")
acos = unary_op("Acos")
atan = unary_op("Atan")
sinh = unary_op("Sinh")
cosh = unary_op("Cosh")
erf = unary_op("Erf")
is_nan = unary_op("IsNaN")
is_inf = unary_op("IsInf")
matrix_determinant = unary_op("Det")


def expm1(x, name=None) -> Tensor:
    return ops.subtract(ops.exp(x), 1.0, name=name)


def is_finite(x, name=None) -> Tensor:
    return logical_not(logical_or(is_nan(x), is_inf(x)), name=name)


def logical_xor(x, y, name=None) -> Tensor:
    return make_op("Xor", [x, y], name=name).outputs[0]


def floormod(x, y, name=None) -> Tensor:
    """``x - floor(x / y) * y`` (the sign of ``y``, as Python's %)."""
    x, y = ops.align_integer_operands(x, y)
    if _is_integer(x) or _is_integer(y):
        return mod(x, y, name=name)  # Mod with fmod=0: the sign of the divisor
    return ops.subtract(x, ops.multiply(floordiv(x, y), y), name=name)


def log_sigmoid(x, name=None) -> Tensor:
    return ops.negative(softplus(ops.negative(x)), name=name)


def matrix_transpose(a, name="matrix_transpose") -> Tensor:
    a = convert_to_tensor(a)
    r = len(a.shape)
    return ops.transpose(a, list(builtins.range(r - 2)) + [r - 1, r - 2], name=name)


def qr(input, full_matrices: bool = False, name=None) -> tuple[Tensor, Tensor]:  # noqa: A002 - TF's name
    """``(q, r)`` with ``input = q @ r`` per matrix of the last two axes: q's columns orthonormal,
    r upper-triangular (``tf.qr``, ``tf.linalg.qr``)."""
    q, r = make_op("Qr", [convert_to_tensor(input)], {"full_matrices": int(bool(full_matrices))},
                   domain=TRAINER_DOMAIN, name=name or "Qr", num_outputs=2).outputs
    return q, r


def matrix_inverse(input, adjoint: bool = False, name=None) -> Tensor:  # noqa: A002
    x = matrix_transpose(input) if adjoint else input
    return make_op("MatrixInverse", [x], domain="flowstack", name=name).outputs[0]


def matrix_band_part(input, num_lower: int, num_upper: int, name=None) -> Tensor:  # noqa: A002
    """Entries with -num_lower <= col - row <= num_upper kept (negative: unbounded), others zero."""
    x = convert_to_tensor(input)
    if num_lower >= 0:
        x = make_op("Trilu", [x, constant(np.asarray(-num_lower, np.int64), graph=x.graph)], {"upper": 1}).outputs[0]
    if num_upper >= 0:
        x = make_op("Trilu", [x, constant(np.asarray(num_upper, np.int64), graph=x.graph)], {"upper": 0}).outputs[0]
    return ops.identity(x, name=name)


def tensordot(a, b, axes, name=None) -> Tensor:
    """Contract ``a``'s last ``axes`` axes with ``b``'s first ones (or the listed axis pairs)."""
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    letters = "abcdefghijklmnopqrstuvwxyz"
    ra, rb = len(a.shape), len(b.shape)
    if isinstance(axes, (int, np.integer)):
        pairs = [(ra - int(axes) + i, i) for i in builtins.range(int(axes))]
    else:
        xa, xb = ([axes[0]] if isinstance(axes[0], int) else axes[0]), ([axes[1]] if isinstance(axes[1], int)
                                                                        else axes[1])
        pairs = [(i % ra, j % rb) for i, j in zip(xa, xb)]
    sa, sb = list(letters[:ra]), list(letters[ra:ra + rb])
    for i, j in pairs:
        sb[j] = sa[i]
    contracted = {sa[i] for i, _ in pairs}
    out = "".join(c for c in sa if c not in contracted) + "".join(c for c in sb if c not in contracted)
    return einsum(f"{''.join(sa)},{''.join(sb)}->{out}", a, b, name=name)


def trace(x, name=None) -> Tensor:
    return reduce_sum(diag_part(x), axis=-1, name=name)


def diag(diagonal, name=None) -> Tensor:
    """A square matrix with ``diagonal`` (1-D) on its diagonal."""
    d = convert_to_tensor(diagonal)
    n = d.shape[0]
    return ops.multiply(expand_dims(d, 0), constant(np.eye(n, dtype=d.dtype), graph=d.graph), name=name)


def diag_part(input, name=None) -> Tensor:  # noqa: A002
    """The diagonal of the last two (square, static) axes."""
    x = convert_to_tensor(input)
    n = x.shape[-1]
    if n is None or x.shape[-2] != n:
        raise ValueError(f"diag_part needs square last axes of static size, got shape {x.shape}")
    eye_ = constant(np.eye(n, dtype=x.dtype), graph=x.graph)
    return reduce_sum(ops.multiply(x, eye_), axis=-1, name=name)


def boolean_mask(tensor, mask, name="boolean_mask", axis=None) -> Tensor:
    """The entries of ``tensor`` where ``mask`` is True. A K-D mask covers K axes of ``tensor`` from
    ``axis`` on; those axes become one, of the True entries (per-token losses masked by
    ``tf.sequence_mask`` give a 1-D result)."""
    x = convert_to_tensor(tensor)
    m = convert_to_tensor(mask)
    start = int(axis or 0)
    if m.shape is None:
        raise ValueError("boolean_mask: the mask's rank must be known")
    k = len(m.shape)
    if k > 1:
        if x.shape is None:
            raise ValueError("boolean_mask: the tensor's rank must be known for a mask of two or more dimensions")
        start %= len(x.shape)
        dims = make_op("Shape", [x]).outputs[0]
        kept = [d if d is not None else ops.gather(dims, constant(np.asarray(i, np.int64), graph=x.graph))
                for i, d in enumerate(x.shape)]
        x = ops.reshape(x, kept[:start] + [-1] + kept[start + k:])
        m = ops.reshape(m, [-1])
    return make_op("Compress", [x, m], {"axis": start}, name=name).outputs[0]


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=np.int32, name=None) -> Tensor:
    """How often each value 0, 1, ..., max(arr) occurs in the int32 ``arr`` (with ``weights``: their
    sums), at least ``minlength`` and at most ``maxlength`` bins (larger values are dropped)."""
    x = convert_to_tensor(arr, dtype=np.int32)
    flat = ops.reshape(x, [-1])
    size = ops.add(reduce_max(ops.concat([flat, constant(np.array([-1], np.int32), graph=x.graph)], 0)), 1)
    if minlength is not None:
        size = ops.maximum(size, np.int32(minlength))
    if maxlength is not None:
        size = ops.minimum(size, np.int32(maxlength))
    if weights is None:
        w = constant(np.zeros(0, as_numpy_dtype(dtype)), graph=x.graph)
    else:
        w = convert_to_tensor(weights)
        if w.shape is not None and x.shape is not None and list(w.shape) != list(x.shape):
            raise ValueError(f"bincount: weights of shape {w.shape} must match arr of shape {x.shape}")
    return make_op("Bincount", [x, size, w], domain=TRAINER_DOMAIN, name=name or "bincount").outputs[0]


def unsorted_segment_sum(data, segment_ids, num_segments, name=None) -> Tensor:
    """Row ``i`` of the result sums the rows of ``data`` whose segment id is ``i``; rows with a
    negative id are dropped, as in TensorFlow. ``num_segments`` is an int or a scalar tensor."""
    from trainer.graph import constant_value

    x = convert_to_tensor(data)
    ids = convert_to_tensor(segment_ids)
    if x.shape is None or ids.shape is None:
        raise ValueError("unsorted_segment_sum: the ranks of data and segment_ids must be known")
    ids = ids if ids.dtype == np.int64 else cast(ids, np.int64)
    known = constant_value(ids)
    if known is None or (np.asarray(known) < 0).any():
        x, ids = _drop_negative_ids(x, ids)
    zeros_ = fill(_segment_result_shape(x, len(ids.shape), num_segments), np.zeros((), x.dtype))
    return make_op("ScatterND", [zeros_, expand_dims(ids, -1), x], {"reduction": "add"}, name=name).outputs[0]


def _drop_negative_ids(x: Tensor, ids: Tensor) -> tuple[Tensor, Tensor]:
    """(``x`` with the rows of negative ids zeroed, the ids clipped at 0)."""
    zero = constant(np.zeros((), np.int64), graph=ids.graph)
    keep = greater_equal(ids, zero)
    for _ in builtins.range(len(x.shape) - len(ids.shape)):
        keep = expand_dims(keep, -1)
    return ops.where(keep, x, ops.zeros_like(x)), ops.maximum(ids, zero)


def _segment_result_shape(x: Tensor, ids_rank: int, num_segments):
    """[num_segments, *x.shape[ids_rank:]]: a list when every size is known, else a shape tensor."""
    inner = list(x.shape[ids_rank:])
    if not isinstance(num_segments, Tensor) and all(d is not None for d in inner):
        return [int(num_segments)] + [int(d) for d in inner]
    count = ops.reshape(cast(convert_to_tensor(num_segments), np.int64), [1])
    rest = make_op("Slice", [ops.shape(x), constant(np.array([ids_rank], np.int64), graph=x.graph),
                             constant(np.array([np.iinfo(np.int64).max], np.int64), graph=x.graph)]).outputs[0]
    return ops.concat([count, cast(rest, np.int64)], 0)


def _segment_count(ids: Tensor):
    """The row count of a sorted-segment result: the last id + 1, an int when the ids are constant."""
    from trainer.graph import constant_value

    value = constant_value(ids)
    if value is not None:
        return int(np.max(value)) + 1 if np.size(value) else 0
    last = make_op("ReduceMax", [cast(ids, np.int64)], {"keepdims": 0}).outputs[0]
    return ops.add(last, constant(np.ones((), np.int64), graph=ids.graph))


def segment_sum(data, segment_ids, name=None) -> Tensor:
    """As ``unsorted_segment_sum`` for sorted ids: the result has ``segment_ids[-1] + 1`` rows."""
    ids = convert_to_tensor(segment_ids)
    return unsorted_segment_sum(data, ids, _segment_count(ids), name=name)


def sort(values, axis: int = -1, direction: str = "ASCENDING", name=None) -> Tensor:
    return _top_all(values, axis, direction, name)[0]


def argsort(values, axis: int = -1, direction: str = "ASCENDING", stable: bool = False, name=None) -> Tensor:
    return cast(_top_all(values, axis, direction, None)[1], np.int32, name=name)


def _top_all(values, axis, direction, name):
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"direction must be ASCENDING or DESCENDING, got {direction!r}")
    x = convert_to_tensor(values)
    n = make_op("Shape", [x]).outputs[0]
    k = ops.reshape(ops.gather(n, constant(np.asarray(axis, np.int64), graph=x.graph)), [1])
    return make_op("TopK", [x, k], {"axis": axis, "largest": int(direction == "DESCENDING"), "sorted": 1},
                   num_outputs=2, name=name).outputs


def unique(x, out_idx=np.int32, name=None):
    """(unique values in first-seen order, each element's index into them)."""
    y, _, inverse, _ = make_op("Unique", [x], {"sorted": 0}, num_outputs=4, name=name).outputs
    return y, cast(inverse, out_idx)


def global_norm(t_list, name=None) -> Tensor:
    """sqrt(sum of squares of every tensor in ``t_list``)."""
    return ops.sqrt(ops.add_n([reduce_sum(ops.square(t)) for t in t_list if t is not None]), name=name)


def shape_n(input, out_type=np.int32, name=None) -> list[Tensor]:  # noqa: A002
    return [cast(ops.shape(t), out_type) for t in input]


def identity_n(input, name=None) -> list[Tensor]:  # noqa: A002
    return [ops.identity(t) for t in input]


def identity_n_node(tensors, name=None) -> list[Tensor]:
    """``tensors`` through one IdentityN node (a gradient override sees them all at once)."""
    tensors = [ops.convert_to_tensor(t) for t in tensors]
    node = tensors[0].graph.create_op("IdentityN", tensors, {"num_outputs": len(tensors)}, domain="flowstack",
                                      num_outputs=len(tensors), name=name or "IdentityN")
    return list(node.outputs)


def where_v2(condition, x=None, y=None, name=None) -> Tensor:
    """``where(c, x, y)`` elementwise; with only ``condition``, the [n, rank] indices of its True entries."""
    if x is None and y is None:
        return ops.transpose(make_op("NonZero", [condition]).outputs[0], [1, 0], name=name)
    return ops.where(condition, x, y, name=name)


where = where_v2


__all__ += [
    "acos", "argsort", "asin", "atan", "boolean_mask", "cosh", "diag", "diag_part", "erf", "expm1", "floormod",
    "global_norm", "identity_n", "is_finite", "is_inf", "is_nan", "log_sigmoid", "logical_xor", "matrix_band_part",
    "matrix_determinant", "matrix_inverse", "matrix_transpose", "segment_sum", "shape_n", "sinh", "sort", "tan",
    "tensordot", "trace", "unique", "unsorted_segment_sum", "where", "where_v2",
]


# -- the rest of the everyday core ops ------------------------------------------------------------
asinh = unary_op("Asinh")
acosh = unary_op("Acosh")
atanh = unary_op("Atanh")
rint = unary_op("Round")
arg_max = argmax  # TensorFlow 1.x's older names
arg_min = argmin
floor_div = floordiv
truncatediv = _binary("Div")  # integer Div truncates toward zero, as C and TensorFlow do


def truncatemod(x, y, name=None) -> Tensor:
    """``x - trunc(x / y) * y`` (the sign of ``x``, as C's fmod)."""
    return make_op("Mod", [x, y], {"fmod": 1}, name=name).outputs[0]


def erfc(x, name=None) -> Tensor:
    return ops.subtract(1.0, erf(x), name=name)


def div_no_nan(x, y, name=None) -> Tensor:
    """``x / y``, 0 where ``y`` is 0."""
    y = convert_to_tensor(y)
    zero = constant(np.zeros((), y.dtype), graph=y.graph)
    is_zero = ops.equal(y, zero)
    safe = ops.where(is_zero, constant(np.ones((), y.dtype), graph=y.graph), y)
    return ops.where(is_zero, zeros_like(ops.divide(x, safe)), ops.divide(x, safe), name=name)


def saturate_cast(value, dtype, name=None) -> Tensor:
    """Cast with values clamped to the target dtype's range first."""
    x = convert_to_tensor(value)
    dt = as_numpy_dtype(dtype)
    if dt.kind in "iu" or (dt.kind == "f" and x.dtype.kind == "f" and dt.itemsize < x.dtype.itemsize):
        info = np.iinfo(dt) if dt.kind in "iu" else np.finfo(dt)
        lo = max(float(info.min), float(np.finfo(x.dtype).min)) if x.dtype.kind == "f" else int(info.min)
        hi = min(float(info.max), float(np.finfo(x.dtype).max)) if x.dtype.kind == "f" else int(info.max)
        x = clip_by_value(x, np.asarray(lo, x.dtype), np.asarray(hi, x.dtype))
    return cast(x, dt, name=name)


def to_bfloat16(x, name="ToBFloat16") -> Tensor:
    return cast(x, np.float32, name=name)  # computed in float32 (NumPy has no bfloat16)


def broadcast_to(input, shape, name=None) -> Tensor:  # noqa: A002
    x = convert_to_tensor(input)
    return make_op("Expand", [x, _ints(shape, x.graph)], name=name).outputs[0]


def cumprod(x, axis: int = 0, exclusive: bool = False, reverse: bool = False, name=None) -> Tensor:
    x = convert_to_tensor(x)
    return make_op("CumProd", [x, constant(np.asarray(axis, np.int64), graph=x.graph)],
                   {"exclusive": int(exclusive), "reverse": int(reverse)}, name=name).outputs[0]


def reverse_sequence(input, seq_lengths, seq_axis=None, batch_axis=None, name=None, seq_dim=None,  # noqa: A002
                     batch_dim=None) -> Tensor:
    """Each example's first ``seq_lengths[b]`` entries along ``seq_axis`` reversed."""
    seq_axis = _one_of("reverse_sequence", seq_axis=seq_axis, seq_dim=seq_dim)
    batch_axis = _one_of("reverse_sequence", batch_axis=batch_axis, batch_dim=batch_dim) or 0
    if seq_axis is None:
        raise ValueError("reverse_sequence needs seq_axis")
    return make_op("ReverseSequence", [input, cast(convert_to_tensor(seq_lengths), np.int64)],
                   {"time_axis": int(seq_axis), "batch_axis": int(batch_axis)}, name=name).outputs[0]


reverse_v2 = reverse


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                  shrink_axis_mask=0, name=None) -> Tensor:
    """``input_[begin:end:strides]`` per axis, with TensorFlow's begin/end/shrink masks."""
    if ellipsis_mask or new_axis_mask:
        raise ValueError("strided_slice: ellipsis_mask and new_axis_mask are not supported; index with [..., None]")
    x = convert_to_tensor(input_)
    n = _slice_spec_length(begin)
    begin, end = _slice_spec(begin, n), _slice_spec(end, n)
    strides = [1] * n if strides is None else list(strides)
    key = []
    for i in builtins.range(n):
        if shrink_axis_mask >> i & 1:
            key.append(begin[i])
            continue
        b = None if begin_mask >> i & 1 else begin[i]
        e = None if end_mask >> i & 1 else end[i]
        key.append(builtins.slice(b, e, int(strides[i])))
    out = ops.getitem(x, builtins.tuple(key))
    return out if name is None else ops.identity(out, name=name)


def _slice_spec_length(spec) -> int:
    if isinstance(spec, Tensor):
        if spec.shape is None or spec.shape[0] is None:
            raise ValueError(f"strided_slice: the length of begin ({spec.name}) must be known")
        return int(spec.shape[0])
    return len(spec)


def _slice_spec(spec, n: int) -> list:
    """A begin or end as n entries: ints, or scalar tensors (``x[i * k:(i + 1) * k]`` for a tensor i)."""
    if isinstance(spec, Tensor):
        return [spec[i] for i in builtins.range(n)]
    return [v if isinstance(v, Tensor) or hasattr(v, "as_tensor") else int(v) for v in spec]


def scatter_nd(indices, updates, shape, name=None) -> Tensor:
    """Zeros of ``shape`` with ``updates`` added at ``indices`` (duplicates sum, as TensorFlow)."""
    u = convert_to_tensor(updates)
    base = zeros(shape, u.dtype)
    return make_op("ScatterND", [base, _ints(indices, u.graph), u], {"reduction": "add"}, name=name).outputs[0]


def meshgrid(*args, indexing: str = "xy", name=None) -> list[Tensor]:
    """Coordinate grids of 1-D tensors (``xy`` swaps the first two axes, as NumPy)."""
    xs = [convert_to_tensor(a) for a in args]
    sizes = [x.shape[0] for x in xs]
    if any(s is None for s in sizes):
        raise ValueError("meshgrid needs inputs of static length")
    if indexing == "xy" and len(xs) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(xs):
        axis = (1 - i if i < 2 else i) if indexing == "xy" and len(xs) >= 2 else i
        shape = [1] * len(xs)
        shape[axis] = -1
        out.append(broadcast_to(ops.reshape(x, shape), sizes))
    return out


def unique_with_counts(x, out_idx=np.int32, name=None):
    """(unique values in first-seen order, each element's index into them, each value's count)."""
    y, _, inverse, counts = make_op("Unique", [x], {"sorted": 0}, num_outputs=4, name=name).outputs
    return y, cast(inverse, out_idx), cast(counts, out_idx)


def unsorted_segment_mean(data, segment_ids, num_segments, name=None) -> Tensor:
    """Each segment's mean (0 for an empty one); rows with a negative id are dropped."""
    x = convert_to_tensor(data)
    ids = convert_to_tensor(segment_ids)
    total = unsorted_segment_sum(x, ids, num_segments)
    counts = unsorted_segment_sum(ones_like(cast(ids, x.dtype)), ids, num_segments)
    counts = ops.maximum(counts, constant(np.ones((), x.dtype), graph=x.graph))
    for _ in builtins.range(len(x.shape) - len(ids.shape)):
        counts = expand_dims(counts, -1)
    return ops.divide(total, counts, name=name)


def segment_mean(data, segment_ids, name=None) -> Tensor:
    """As ``unsorted_segment_mean`` for sorted ids: the result has ``segment_ids[-1] + 1`` rows."""
    ids = convert_to_tensor(segment_ids)
    return unsorted_segment_mean(data, ids, _segment_count(ids), name=name)


def confusion_matrix(labels, predictions, num_classes: int | None = None, weights=None, dtype=np.int32,
                     name=None) -> Tensor:
    """[num_classes, num_classes] counts of (label, prediction) pairs."""
    labels = cast(convert_to_tensor(labels), np.int64)
    predictions = cast(convert_to_tensor(predictions), np.int64)
    if num_classes is None:
        raise ValueError("confusion_matrix needs num_classes (the class count is not inferred from data here)")
    pairs = stack([labels, predictions], axis=1)
    dt = as_numpy_dtype(dtype)
    values = ones_like(cast(labels, dt)) if weights is None else cast(convert_to_tensor(weights), dt)
    return scatter_nd(pairs, values, [num_classes, num_classes], name=name)


def matrix_diag(diagonal, name=None) -> Tensor:
    """Batched ``diag``: [..., n] to [..., n, n]."""
    d = convert_to_tensor(diagonal)
    n = d.shape[-1]
    return ops.multiply(expand_dims(d, -1), constant(np.eye(n, dtype=d.dtype), graph=d.graph), name=name)


matrix_diag_part = diag_part


def matrix_solve(matrix, rhs, adjoint: bool = False, name=None) -> Tensor:
    """``inverse(matrix) @ rhs`` (through MatrixInverse, whose gradient is known)."""
    return ops.matmul(matrix_inverse(matrix, adjoint=adjoint), rhs, name=name)


def clip_by_average_norm(t, clip_norm, name=None) -> Tensor:
    """``t * clip_norm / max(l2norm(t) / size(t), clip_norm)``."""
    x = convert_to_tensor(t)
    avg = ops.divide(norm(x), cast(size(x), x.dtype))
    return ops.multiply(x, ops.divide(clip_norm, ops.maximum(avg, clip_norm)), name=name)


def parallel_stack(values, name="parallel_stack") -> Tensor:
    return stack(values, 0, name=name)


def tuple(tensors, name=None, control_inputs=None) -> list:  # noqa: A001 - TF's name
    """The tensors, each available only once all of them (and ``control_inputs``) are computed."""
    tensors = [convert_to_tensor(t) for t in tensors]
    gate = ops.group(*tensors, *(control_inputs or ()))
    g = tensors[0].graph
    with g.control_dependencies([gate]):
        return [ops.identity(t) for t in tensors]


__all__ += [
    "acosh", "arg_max", "arg_min", "asinh", "atanh", "broadcast_to", "clip_by_average_norm", "confusion_matrix",
    "cumprod", "div_no_nan", "erfc", "floor_div", "matrix_diag", "matrix_diag_part", "matrix_solve", "meshgrid",
    "parallel_stack", "reverse_sequence", "reverse_v2", "rint", "saturate_cast", "scatter_nd", "segment_mean",
    "strided_slice", "to_bfloat16", "truncatediv", "truncatemod", "tuple", "unique_with_counts",
    "unsorted_segment_mean", "qr", "bincount",
]


def decode_raw(input_bytes=None, out_type=None, little_endian: bool = True, name=None, bytes=None) -> Tensor:  # noqa: A002
    """``tf.decode_raw``: each string's bytes as a vector of ``out_type`` (a TFRecord holding ``array.tobytes()``)."""
    if out_type is None:
        raise ValueError("decode_raw needs out_type (e.g. tf.uint8 or tf.float32)")
    return make_op("DecodeRaw", [input_bytes if input_bytes is not None else bytes],
                   {"out_type": as_numpy_dtype(out_type).name, "little_endian": int(bool(little_endian))},
                   domain=TRAINER_DOMAIN, name=name).outputs[0]
