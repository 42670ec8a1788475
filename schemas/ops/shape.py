"""Shape, layout, indexing and constant ops: what moves or picks elements without computing on them.

The rules are exact whenever the values they depend on (a Reshape's target shape, a Slice's
starts and ends, a Split's sizes, ...) are constants at build time, and fall back to known ranks
with unknown dims when they are not.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from schemas.dtypes import DTypeError, to_numpy
from schemas.ops.rules import (
    INT64,
    broadcast_shapes,
    const_ints,
    normalize_axis,
    same_as_input,
)
from schemas.registry import REQUIRED, Attr, TensorType, UnsupportedOpError, op

OBJECT = np.dtype(object)
FLOAT32 = np.dtype(np.float32)


def dtype_from_code(code: int, where: str) -> np.dtype:
    """The NumPy dtype of an ONNX element type code given as an attribute (Cast-like ``to``).

    >>> dtype_from_code(7, "EyeLike")
    dtype('int64')
    """
    try:
        return to_numpy(code)
    except DTypeError as exc:
        raise UnsupportedOpError(f"{where}: {exc}") from None


def _prod(dims: Sequence[int | None]) -> int | None:
    return None if any(d is None for d in dims) else math.prod(dims)


def _with_dims(shape, updates: dict[int, int | None]) -> tuple[int | None, ...]:
    return tuple(updates.get(i, d) for i, d in enumerate(shape))


def _vector_length(ctx, index: int) -> int | None:
    """Length of a 1-D input (axes, pads, shape) from its value or its static shape."""
    values = const_ints(ctx, index)
    if values is not None:
        return len(values)
    shape = ctx.input(index).shape
    return shape[0] if shape is not None and len(shape) == 1 else None


@op(
    "Constant",
    inputs=[],
    outputs=["output"],
    attrs={
        "value": Attr("tensor"),
        "sparse_value": Attr("tensor"),
        "value_float": Attr("float"),
        "value_floats": Attr("floats"),
        "value_int": Attr("int"),
        "value_ints": Attr("ints"),
        "value_string": Attr("string"),
        "value_strings": Attr("strings"),
    },
)
def _constant(ctx):
    given = [k for k, v in ctx.attrs.items() if v is not None]
    if len(given) != 1:
        raise ctx.fail(f"exactly one value attribute must be set, got {sorted(given)}")
    (kind,) = given
    value = ctx.attrs[kind]
    if kind == "sparse_value":
        raise UnsupportedOpError(f"{ctx.schema.name}: sparse_value (sparse tensors) is not supported")
    if kind == "value":
        array = np.asarray(value)
        return [TensorType(array.dtype, array.shape)]
    dtype = {"float": FLOAT32, "int": INT64, "string": OBJECT}[kind.split("_")[1].rstrip("s")]
    shape = (len(value),) if kind.endswith("s") else ()
    return [TensorType(dtype, shape)]


@op("Reshape", inputs=["data", "shape"], outputs=["reshaped"], attrs={"allowzero": Attr("int", 0)},
    differentiable=True)
def _reshape(ctx):
    data = ctx.input(0)
    target = const_ints(ctx, 1)
    if target is None:
        known = ctx.known_ints(1)
        if known is not None:
            return [TensorType(data.dtype, _partly_known_reshape(ctx, data.shape, known))]
        n = _vector_length(ctx, 1)
        return [TensorType(data.dtype, None if n is None else (None,) * n)]
    if target.count(-1) > 1:
        raise ctx.fail(f"shape {target} has more than one -1")
    if any(t < -1 for t in target):
        raise ctx.fail(f"shape {target} has a negative dim other than -1")
    out: list[int | None] = []
    for i, t in enumerate(target):
        if t == 0 and not ctx.attrs["allowzero"]:
            if data.shape is not None and i >= len(data.shape):
                raise ctx.fail(f"shape {target} copies dim {i} (0) but the input {data.shape} has rank {len(data.shape)}")
            out.append(None if data.shape is None else data.shape[i])
        else:
            out.append(None if t == -1 else t)
    if 0 in target and -1 in target and ctx.attrs["allowzero"]:
        raise ctx.fail(f"shape {target} has both 0 and -1 with allowzero=1")
    total = None if data.shape is None else _prod(data.shape)
    known = _prod([d for i, d in enumerate(out) if target[i] != -1])
    if -1 in target:
        if total is not None and known is not None:
            if known == 0 or total % known:
                raise ctx.fail(f"cannot reshape {data.shape} ({total} elements) to {target}")
            out[target.index(-1)] = total // known
    elif total is not None and known is not None and total != known:
        raise ctx.fail(f"cannot reshape {data.shape} ({total} elements) to {target} ({known} elements)")
    if -1 in target and out[target.index(-1)] is None and data.shape is not None and not ctx.attrs["allowzero"]:
        # the unknown dims all copied by a 0 (an unknown batch kept): they cancel out of the -1
        copied = {i for i, t in enumerate(target) if t == 0}
        rest = _prod([d for i, d in enumerate(data.shape) if i not in copied])
        fixed = _prod([t for t in target if t > 0])
        if rest is not None and fixed and rest % fixed == 0:
            out[target.index(-1)] = rest // fixed
    return [TensorType(data.dtype, tuple(out))]


def _partly_known_reshape(ctx, shape, target: list[int | None]) -> tuple[int | None, ...]:
    """Reshape's output dims from a target shape only some of whose elements are known: a known
    positive dim stands, a 0 copies the input's dim (unless ``allowzero``), the rest are unknown."""
    out: list[int | None] = []
    for i, t in enumerate(target):
        if t == 0 and not ctx.attrs["allowzero"]:
            out.append(None if shape is None or i >= len(shape) else shape[i])
        else:
            out.append(t if t is not None and t >= 0 else None)
    return tuple(out)


@op("Flatten", inputs=["input"], outputs=["output"], attrs={"axis": Attr("int", 1)}, differentiable=True)
def _flatten(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(x.dtype, (None, None))]
    rank, axis = len(x.shape), ctx.attrs["axis"]
    if not -rank <= axis <= rank:
        raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return [TensorType(x.dtype, (_prod(x.shape[:axis]), _prod(x.shape[axis:])))]


@op("Transpose", inputs=["data"], outputs=["transposed"], attrs={"perm": Attr("ints")}, differentiable=True)
def _transpose(ctx):
    x, perm = ctx.input(0), ctx.attrs["perm"]
    if x.shape is None:
        return [TensorType(x.dtype, None if perm is None else (None,) * len(perm))]
    rank = len(x.shape)
    perm = list(range(rank))[::-1] if perm is None else [normalize_axis(ctx, p, rank) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise ctx.fail(f"perm {ctx.attrs['perm']} is not a permutation of the {rank} axes of {x.shape}")
    return [TensorType(x.dtype, tuple(x.shape[p] for p in perm))]


def _axes(ctx, axes: Sequence[int], rank: int) -> list[int]:
    normalized = [normalize_axis(ctx, a, rank) for a in axes]
    if len(set(normalized)) != len(normalized):
        raise ctx.fail(f"axes {list(axes)} repeat an axis")
    return normalized


@op("Squeeze", inputs=["data", "axes?"], outputs=["squeezed"], differentiable=True)
def _squeeze(ctx):
    x = ctx.input(0)
    axes = const_ints(ctx, 1) if ctx.has_input(1) else None
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if axes is None:
        if ctx.has_input(1) or any(d is None for d in x.shape):
            return [TensorType(x.dtype, None)]
        return [TensorType(x.dtype, tuple(d for d in x.shape if d != 1))]
    axes = _axes(ctx, axes, len(x.shape))
    for a in axes:
        if x.shape[a] not in (1, None):
            raise ctx.fail(f"cannot squeeze axis {a} of size {x.shape[a]} (shape {x.shape})")
    return [TensorType(x.dtype, tuple(d for i, d in enumerate(x.shape) if i not in axes))]


@op("Unsqueeze", inputs=["data", "axes"], outputs=["expanded"], differentiable=True)
def _unsqueeze(ctx):
    x = ctx.input(0)
    axes = const_ints(ctx, 1)
    if x.shape is None or axes is None:
        n = _vector_length(ctx, 1)
        rank = None if x.shape is None or n is None else len(x.shape) + n
        return [TensorType(x.dtype, None if rank is None else (None,) * rank)]
    rank = len(x.shape) + len(axes)
    axes = set(_axes(ctx, axes, rank))
    dims = iter(x.shape)
    return [TensorType(x.dtype, tuple(1 if i in axes else next(dims) for i in range(rank)))]


def merge_dims(ctx, a: int | None, b: int | None, what: str) -> int | None:
    """One dim known from two places: None if neither knows it, a failure if they disagree."""
    if a is not None and b is not None and a != b:
        raise ctx.fail(f"{what}: {a} != {b}")
    return a if a is not None else b


@op("Concat", inputs=["inputs+"], outputs=["concat_result"], attrs={"axis": Attr("int", REQUIRED)},
    differentiable=True)
def _concat(ctx):
    types = [ctx.input(i) for i in range(ctx.num_inputs)]
    dtype = next((t.dtype for t in types if t.dtype is not None), None)
    shapes = [t.shape for t in types if t.shape is not None]
    if not shapes:
        return [TensorType(dtype, None)]
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        raise ctx.fail(f"inputs must share one rank, got shapes {shapes}")
    axis = normalize_axis(ctx, ctx.attrs["axis"], rank)
    out: list[int | None] = []
    for i in range(rank):
        if i == axis:
            sizes = [t.shape[i] if t.shape is not None else None for t in types]
            out.append(sum(sizes) if None not in sizes else None)
        else:
            dim = None
            for s in shapes:
                dim = merge_dims(ctx, dim, s[i], f"inputs differ in dim {i} off the concat axis ({shapes})")
            out.append(dim)
    return [TensorType(dtype, tuple(out))]


@op("Split", inputs=["input", "split?"], outputs=["outputs+"],
    attrs={"axis": Attr("int", 0), "num_outputs": Attr("int")}, differentiable=True,
    output_count_attr="num_outputs")
def _split(ctx):
    x = ctx.input(0)
    n = ctx.num_outputs
    if x.shape is None:
        return [TensorType(x.dtype, None)] * n
    axis = normalize_axis(ctx, ctx.attrs["axis"], len(x.shape))
    dim = x.shape[axis]
    sizes: list[int | None]
    if ctx.has_input(1):
        given = const_ints(ctx, 1)
        sizes = [None] * n if given is None else given
        if given is not None and (len(given) != n or (dim is not None and sum(given) != dim)):
            raise ctx.fail(f"split {given} does not cut axis {axis} of size {dim} into {n} outputs")
    else:
        parts = ctx.attrs["num_outputs"] or n
        if parts != n:
            raise ctx.fail(f"num_outputs is {parts} but the node has {n} outputs")
        if dim is None:
            sizes = [None] * n
        else:
            chunk = -(-dim // n)
            sizes = [max(0, min(chunk, dim - chunk * i)) for i in range(n)]
    return [TensorType(x.dtype, _with_dims(x.shape, {axis: s})) for s in sizes]


def onnx_slice(dim: int, start: int, end: int, step: int) -> slice:
    """The Python slice that keeps what ONNX Slice keeps along an axis of ``dim`` elements.

    Python clamps starts and ends as ONNX does but in one case: stepping backwards from a start
    before the first element (below -dim), Python keeps nothing, while ONNX clamps the start to 0
    and keeps element 0 (as onnxruntime does).
    """
    if step < 0 and start < -dim:
        start = 0
    return slice(start, end, step)


def slice_length(dim: int, start: int, end: int, step: int) -> int:
    """Elements a Slice keeps along one axis."""
    return len(range(*onnx_slice(dim, start, end, step).indices(dim)))


@op("Slice", inputs=["data", "starts", "ends", "axes?", "steps?"], outputs=["output"], differentiable=True)
def _slice(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    rank = len(x.shape)
    starts, ends = const_ints(ctx, 1), const_ints(ctx, 2)
    axes = const_ints(ctx, 3) if ctx.has_input(3) else None
    steps = const_ints(ctx, 4) if ctx.has_input(4) else None
    n = _vector_length(ctx, 1)
    if axes is None and not ctx.has_input(3) and n is not None:
        axes = list(range(n))
    if axes is None:
        return [TensorType(x.dtype, (None,) * rank)]
    axes = _axes(ctx, axes, rank)
    if starts is None or ends is None or (ctx.has_input(4) and steps is None):
        return [TensorType(x.dtype, _with_dims(x.shape, {a: None for a in axes}))]
    steps = steps or [1] * len(axes)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    if 0 in steps:
        raise ctx.fail("steps must not be 0")
    dims = {}
    for a, s, e, st in zip(axes, starts, ends, steps):
        dims[a] = None if x.shape[a] is None else slice_length(x.shape[a], s, e, st)
    return [TensorType(x.dtype, _with_dims(x.shape, dims))]


@op("Gather", inputs=["data", "indices"], outputs=["output"], attrs={"axis": Attr("int", 0)},
    differentiable=True)
def _gather(ctx):
    data, indices = ctx.input(0), ctx.input(1)
    if data.shape is None or indices.shape is None:
        return [TensorType(data.dtype, None)]
    axis = normalize_axis(ctx, ctx.attrs["axis"], len(data.shape))
    return [TensorType(data.dtype, data.shape[:axis] + indices.shape + data.shape[axis + 1:])]


@op("GatherElements", inputs=["data", "indices"], outputs=["output"], attrs={"axis": Attr("int", 0)},
    differentiable=True)
def _gather_elements(ctx):
    data, indices = ctx.input(0), ctx.input(1)
    if data.shape is not None and indices.shape is not None:
        if len(data.shape) != len(indices.shape):
            raise ctx.fail(f"data {data.shape} and indices {indices.shape} must have the same rank")
        axis = normalize_axis(ctx, ctx.attrs["axis"], len(data.shape))
        for a, (d, i) in enumerate(zip(data.shape, indices.shape)):
            if a != axis and d is not None and i is not None and i > d:
                raise ctx.fail(f"indices {indices.shape} are longer than data {data.shape} on axis {a}")
    return [TensorType(data.dtype, indices.shape)]


@op("GatherND", inputs=["data", "indices"], outputs=["output"], attrs={"batch_dims": Attr("int", 0)},
    differentiable=True)
def _gather_nd(ctx):
    data, indices = ctx.input(0), ctx.input(1)
    b = ctx.attrs["batch_dims"]
    if data.shape is None or indices.shape is None or indices.shape[-1] is None:
        return [TensorType(data.dtype, None)]
    k = indices.shape[-1]
    if b + k > len(data.shape):
        raise ctx.fail(f"indices {indices.shape} index {k} dims past {b} batch dims of data {data.shape}")
    return [TensorType(data.dtype, indices.shape[:-1] + data.shape[b + k:])]


op("ScatterND", inputs=["data", "indices", "updates"], outputs=["output"],
   attrs={"reduction": Attr("string", "none")}, differentiable=True)(same_as_input(0))
op("ScatterElements", inputs=["data", "indices", "updates"], outputs=["output"],
   attrs={"axis": Attr("int", 0), "reduction": Attr("string", "none")}, differentiable=True)(same_as_input(0))
op("Scatter", inputs=["data", "indices", "updates"], outputs=["output"],
   attrs={"axis": Attr("int", 0)}, differentiable=True, doc="Deprecated alias of ScatterElements.")(
    same_as_input(0))


@op("Expand", inputs=["input", "shape"], outputs=["output"], differentiable=True)
def _expand(ctx):
    x = ctx.input(0)
    target = ctx.known_ints(1)
    if target is None:
        n = _vector_length(ctx, 1)
        if x.shape is None or n is None:
            return [TensorType(x.dtype, None)]
        return [TensorType(x.dtype, (None,) * max(n, len(x.shape)))]
    # A 1 in the target shape keeps the input's dim: that is plain broadcasting of the two shapes
    # (an unknown target dim is 1 or the input's where that is above 1).
    return [TensorType(x.dtype, broadcast_shapes(ctx, [x.shape, tuple(target)]))]


@op("Tile", inputs=["input", "repeats"], outputs=["output"], differentiable=True)
def _tile(ctx):
    x = ctx.input(0)
    repeats = ctx.known_ints(1)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if repeats is None:
        return [TensorType(x.dtype, (None,) * len(x.shape))]
    if len(repeats) != len(x.shape):
        raise ctx.fail(f"repeats {repeats} must have one entry per dim of {x.shape}")
    return [TensorType(x.dtype, tuple(None if d is None or r is None else d * r for d, r in zip(x.shape, repeats)))]


@op("Pad", inputs=["data", "pads", "constant_value?", "axes?"], outputs=["output"],
    attrs={"mode": Attr("string", "constant")}, differentiable=True)
def _pad(ctx):
    x = ctx.input(0)
    if ctx.attrs["mode"] not in ("constant", "reflect", "edge", "wrap"):
        raise UnsupportedOpError(f"Pad: mode {ctx.attrs['mode']!r} is not one of constant, reflect, edge, wrap")
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    rank = len(x.shape)
    pads = const_ints(ctx, 1)
    axes = list(range(rank)) if not ctx.has_input(3) else const_ints(ctx, 3)
    if axes is None:
        return [TensorType(x.dtype, (None,) * rank)]
    axes = _axes(ctx, axes, rank)
    if pads is None:
        return [TensorType(x.dtype, _with_dims(x.shape, {a: None for a in axes}))]
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"pads {pads} must have 2 entries per padded axis {axes}")
    n = len(axes)
    dims = {}
    for i, a in enumerate(axes):
        d = x.shape[a]
        dims[a] = None if d is None else d + pads[i] + pads[i + n]
        if dims[a] is not None and dims[a] < 0:
            raise ctx.fail(f"pads {pads} crop axis {a} of size {d} below zero")
    return [TensorType(x.dtype, _with_dims(x.shape, dims))]


@op("Shape", inputs=["data"], outputs=["shape"], attrs={"start": Attr("int", 0), "end": Attr("int")})
def _shape(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(INT64, (None,))]
    return [TensorType(INT64, (len(x.shape[ctx.attrs["start"]:ctx.attrs["end"]]),))]


op("Size", inputs=["data"], outputs=["size"])(lambda ctx: [TensorType(INT64, ())])


@op("Range", inputs=["start", "limit", "delta"], outputs=["output"], attrs={"stash_type": Attr("int", 1)})
def _range(ctx):
    dtype = ctx.input(0).dtype
    values = [ctx.value(i) for i in range(3)]
    for i, t in enumerate(ctx.input(i) for i in range(3)):
        if t.shape not in (None, ()) and _prod(t.shape) != 1:
            raise ctx.fail(f"input {i} must be a scalar, got shape {t.shape}")
    if any(v is None for v in values):
        return [TensorType(dtype, (None,))]
    start, limit, delta = (np.asarray(v).reshape(()).item() for v in values)
    if delta == 0:
        raise ctx.fail("delta must not be 0")
    return [TensorType(dtype, (max(math.ceil((limit - start) / delta), 0),))]


@op("ConstantOfShape", inputs=["input"], outputs=["output"], attrs={"value": Attr("tensor")})
def _constant_of_shape(ctx):
    value = ctx.attrs["value"]
    dtype = FLOAT32 if value is None else np.asarray(value).dtype
    if value is not None and np.asarray(value).size != 1:
        raise ctx.fail(f"value must hold one element, got shape {np.asarray(value).shape}")
    shape = ctx.known_ints(0)
    if shape is not None:
        return [TensorType(dtype, tuple(shape))]
    n = _vector_length(ctx, 0)
    return [TensorType(dtype, None if n is None else (None,) * n)]


op("Identity", inputs=["input"], outputs=["output"], differentiable=True)(same_as_input(0))
op("IdentityN", domain="flowstack", inputs=["input*"], outputs=["output*"], differentiable=True,
   attrs={"num_outputs": Attr("int", 0)}, output_count_attr="num_outputs",
   doc="Its inputs, unchanged, as one node (TensorFlow's IdentityN): a gradient override on it maps the "
       "gradients of all its outputs at once, which tf.custom_gradient uses.")(
    lambda ctx: [ctx.input(i) for i in range(ctx.num_inputs)])


@op("OneHot", inputs=["indices", "depth", "values"], outputs=["output"], attrs={"axis": Attr("int", -1)})
def _one_hot(ctx):
    indices, values = ctx.input(0), ctx.input(2)
    depth = ctx.value(1)
    if indices.shape is None:
        return [TensorType(values.dtype, None)]
    rank = len(indices.shape) + 1
    axis = normalize_axis(ctx, ctx.attrs["axis"], rank)
    dim = None if depth is None else int(np.asarray(depth).reshape(-1)[0])
    shape = indices.shape[:axis] + (dim,) + indices.shape[axis:]
    return [TensorType(values.dtype, shape)]


@op("NonZero", inputs=["X"], outputs=["Y"])
def _non_zero(ctx):
    x = ctx.input(0)
    return [TensorType(INT64, (None if x.shape is None else len(x.shape), None))]


@op("Compress", inputs=["input", "condition"], outputs=["output"], attrs={"axis": Attr("int")},
    differentiable=True)
def _compress(ctx):
    x = ctx.input(0)
    condition = ctx.value(1)
    axis = ctx.attrs["axis"]
    if axis is None:
        kept = None if condition is None else int(np.count_nonzero(condition))
        return [TensorType(x.dtype, (kept,))]
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    axis = normalize_axis(ctx, axis, len(x.shape))
    kept = None if condition is None else int(np.count_nonzero(np.asarray(condition)[: x.shape[axis]]))
    return [TensorType(x.dtype, _with_dims(x.shape, {axis: kept}))]


@op("Unique", inputs=["X"], outputs=["Y", "indices?", "inverse_indices?", "counts?"],
    attrs={"axis": Attr("int"), "sorted": Attr("int", 1)})
def _unique(ctx):
    x = ctx.input(0)
    axis = ctx.attrs["axis"]
    if axis is None:
        y = TensorType(x.dtype, (None,))
        scanned = None if x.shape is None else _prod(x.shape)
    elif x.shape is None:
        y, scanned = TensorType(x.dtype, None), None
    else:
        axis = normalize_axis(ctx, axis, len(x.shape))
        y = TensorType(x.dtype, _with_dims(x.shape, {axis: None}))
        scanned = x.shape[axis]
    found = TensorType(INT64, (None,))
    return [y, found, TensorType(INT64, (scanned,)), found][: ctx.num_outputs]


@op("ReverseSequence", inputs=["input", "sequence_lens"], outputs=["Y"],
    attrs={"batch_axis": Attr("int", 1), "time_axis": Attr("int", 0)}, differentiable=True)
def _reverse_sequence(ctx):
    x = ctx.input(0)
    if x.shape is not None and len(x.shape) < 2:
        raise ctx.fail(f"input must have rank >= 2, got shape {x.shape}")
    return [x]


@op("EyeLike", inputs=["input"], outputs=["output"], attrs={"dtype": Attr("int"), "k": Attr("int", 0)})
def _eye_like(ctx):
    x = ctx.input(0)
    if x.shape is not None and len(x.shape) != 2:
        raise ctx.fail(f"input must be 2-D, got shape {x.shape}")
    code = ctx.attrs["dtype"]
    dtype = x.dtype if code is None else dtype_from_code(code, "EyeLike")
    return [TensorType(dtype, x.shape)]


@op("CenterCropPad", inputs=["input_data", "shape"], outputs=["output_data"], attrs={"axes": Attr("ints")},
    differentiable=True)
def _center_crop_pad(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    rank = len(x.shape)
    axes = _axes(ctx, ctx.attrs["axes"] or range(rank), rank)
    target = const_ints(ctx, 1)
    if target is None:
        return [TensorType(x.dtype, _with_dims(x.shape, {a: None for a in axes}))]
    if len(target) != len(axes):
        raise ctx.fail(f"shape {target} must have one entry per axis {axes}")
    return [TensorType(x.dtype, _with_dims(x.shape, dict(zip(axes, target))))]


@op("TensorScatter", inputs=["past_cache", "update", "write_indices?"], outputs=["present_cache"],
    attrs={"axis": Attr("int", -2), "mode": Attr("string", "linear")})
def _tensor_scatter(ctx):
    cache, update = ctx.input(0), ctx.input(1)
    if ctx.attrs["mode"] not in ("linear", "circular"):
        raise ctx.fail(f"mode must be linear or circular, got {ctx.attrs['mode']!r}")
    if cache.shape is not None and update.shape is not None:
        if len(cache.shape) != len(update.shape):
            raise ctx.fail(f"past_cache {cache.shape} and update {update.shape} differ in rank")
        axis = normalize_axis(ctx, ctx.attrs["axis"], len(cache.shape))
        for i, (c, u) in enumerate(zip(cache.shape, update.shape)):
            if i != axis:
                merge_dims(ctx, c, u, f"past_cache {cache.shape} and update {update.shape} differ in dim {i}")
    return [cache]


@op("BitCast", inputs=["input"], outputs=["output"], attrs={"to": Attr("int", REQUIRED)})
def _bit_cast(ctx):
    x = ctx.input(0)
    dtype = dtype_from_code(ctx.attrs["to"], "BitCast")
    if dtype == OBJECT or x.dtype == OBJECT:
        raise ctx.fail("strings cannot be bit-cast")
    if x.dtype is not None and x.dtype.itemsize != dtype.itemsize:
        raise ctx.fail(f"{x.dtype} and {dtype} differ in bit width")
    return [TensorType(dtype, x.shape)]


# -- flowstack ops: gradient helpers --------------------------------------------------------------
D = "flowstack"


@op("ScatterToDense", domain=D, inputs=["values", "indices", "like"], outputs=["dense"],
    doc="Sum rows ``values`` into a zero tensor shaped like ``like`` at ``indices`` (densifies IndexedSlices).")
def _scatter_to_dense(ctx):
    return [TensorType(ctx.input(0).dtype, ctx.input(2).shape)]


@op("GatherGrad", domain=D, inputs=["dY", "indices", "X"], outputs=["dX"], attrs={"axis": Attr("int", 0)},
    doc="Dense gradient of Gather along any axis.")
def _gather_grad(ctx):
    return [ctx.input(2)]


op("SliceGrad", domain=D, inputs=["dY", "X"], outputs=["dX"],
   attrs={"starts": Attr("ints", REQUIRED), "ends": Attr("ints", REQUIRED), "axes": Attr("ints"),
          "steps": Attr("ints")},
   doc="Gradient of Slice: dY written into zeros shaped like X at the sliced positions.")(same_as_input(1))


# -- TensorFlow's Bitcast and BroadcastArgs (domain flowstack) ----------------------------------------
@op("Bitcast", domain="flowstack", inputs=["input"], outputs=["output"], attrs={"type": Attr("string", REQUIRED)},
    doc="``input``'s bytes read as ``type``: a wider type eats the last dim (its size must be the width "
        "ratio), a narrower one adds a last dim of the ratio (TensorFlow's Bitcast; no gradient).")
def _bitcast(ctx):
    x = ctx.input(0)
    try:
        out = np.dtype(ctx.attrs["type"])
    except TypeError as e:
        raise ctx.fail(f"unknown type {ctx.attrs['type']!r}") from e
    if x.dtype is None or x.shape is None:
        return [TensorType(out, None)]
    if x.dtype.kind in "OUSb" or out.kind in "OUSb":
        raise ctx.fail(f"cannot bitcast between {x.dtype} and {out}: both must be numeric")
    a, b = x.dtype.itemsize, out.itemsize
    if a == b:
        return [TensorType(out, x.shape)]
    if a > b:
        return [TensorType(out, x.shape + (a // b,))]
    if not x.shape or (x.shape[-1] is not None and x.shape[-1] != b // a):
        raise ctx.fail(f"cannot bitcast {x.dtype} of shape {x.shape} to {out}: the last dim must be {b // a}")
    return [TensorType(out, x.shape[:-1])]


@op("BroadcastArgs", domain="flowstack", inputs=["s0", "s1"], outputs=["r0"],
    doc="The shape two shapes broadcast to, NumPy's rules (TensorFlow's BroadcastArgs).")
def _broadcast_args(ctx):
    s0, s1 = ctx.input(0), ctx.input(1)
    for k, s in enumerate((s0, s1)):
        if s.shape is not None and len(s.shape) != 1:
            raise ctx.fail(f"s{k} must be a 1-D shape vector, got rank {len(s.shape)}")
        if s.dtype is not None and s.dtype.kind not in "iu":
            raise ctx.fail(f"s{k} must be int32 or int64, got {s.dtype}")
    a, b = ctx.known_ints(0), ctx.known_ints(1)
    if a is not None and b is not None and None not in a and None not in b:
        try:
            np.broadcast_shapes(tuple(a), tuple(b))
        except ValueError as e:
            raise ctx.fail(f"incompatible shapes {a} and {b}") from e
    n0 = s0.shape[0] if s0.shape else None
    n1 = s1.shape[0] if s1.shape else None
    return [TensorType(s0.dtype, (None if n0 is None or n1 is None else max(n0, n1),))]
