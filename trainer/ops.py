"""Ops as plain functions: each builds one node in the default graph (or the inputs' graph).

``make_op`` is the one way nodes are built: it converts Python/NumPy values to constants, checks
the inputs against the op's schema and runs its shape rule, so errors surface at build time.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from trainer.dtypes import as_numpy_dtype
from trainer.graph import TRAINER_DOMAIN, Graph, GraphError, Node, Tensor, get_default_graph

__all__ = [
    "add", "add_n", "argmax", "cast", "concat", "constant", "divide", "equal", "exp", "gather",
    "greater", "group", "holds_tensors", "identity", "less", "log", "make_op", "matmul", "maximum", "minimum",
    "multiply", "negative", "no_op", "ones_like", "pack", "placeholder", "pow", "reshape", "shape", "sigmoid", "sqrt",
    "square", "squeeze",
    "stop_gradient", "subtract", "tanh", "transpose", "unary_op", "where", "zeros_like", "abs", "convert_to_tensor",
]

_DEFAULT_FLOAT = np.dtype(np.float32)


def _graph_of(values) -> Graph:
    default = get_default_graph()
    if default.capture is not None:  # tracing a function: its ops go in its graph, capturing the caller's
        return default
    for v in values:
        if isinstance(v, Tensor):
            return v.graph
        if hasattr(v, "tensor") and isinstance(getattr(v, "tensor"), Tensor):
            return v.tensor.graph
    return get_default_graph()


def _is_tensor_like(value) -> bool:
    return isinstance(value, Tensor) or hasattr(value, "as_tensor")


def holds_tensors(value) -> bool:
    """Whether a (nested) list or tuple has a Tensor or Variable among its entries."""
    return isinstance(value, (list, tuple)) and any(_is_tensor_like(v) or holds_tensors(v) for v in value)


def pack(values, dtype=None, name: str | None = None) -> Tensor:
    """A (nested) list mixing tensors and numbers as one tensor, as TensorFlow packs
    ``tf.reshape(x, [tf.shape(x)[0], -1])``'s shape: scalars stacked along a new first axis.
    Numbers and tensors of another dtype are cast to ``dtype`` (the first tensor's, if None)."""
    flat = list(values)
    if dtype is None:
        first = next((v for v in _flatten(flat) if _is_tensor_like(v)), None)
        dtype = convert_to_tensor(first).dtype if first is not None else None
    dtype = as_numpy_dtype(dtype)
    parts = []
    for v in flat:
        t = pack(v, dtype) if holds_tensors(v) else convert_to_tensor(v) if _is_tensor_like(v) else constant(
            np.asarray(v, dtype))
        if dtype is not None and t.dtype != dtype:
            t = cast(t, dtype)
        parts.append(make_op("Unsqueeze", [t, constant(np.asarray([0], np.int64))]).outputs[0])
    return make_op("Concat", parts, {"axis": 0}, name=name or "packed").outputs[0]


def _flatten(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _flatten(v)
        else:
            yield v


def convert_to_tensor(value, dtype=None, graph: Graph | None = None, name: str | None = None) -> Tensor:
    """A Tensor as is; a Variable as its value; a list holding tensors packed (``pack``); anything
    array-like as a Constant node."""
    dtype = as_numpy_dtype(dtype)
    if holds_tensors(value):
        return pack(value, dtype, name=name)
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype is not None and np.dtype(dtype) != value.dtype:
            raise GraphError(f"tensor {value.name} has dtype {value.dtype}, expected {np.dtype(dtype)}")
        return value
    if hasattr(value, "as_tensor"):
        return value.as_tensor()
    return constant(value, dtype=dtype, graph=graph, name=name)


def make_op(
    op_type: str,
    inputs: Sequence[Any],
    attrs: dict[str, Any] | None = None,
    *,
    domain: str = "",
    name: str | None = None,
    num_outputs: int | None = None,
    graph: Graph | None = None,
) -> Node:
    """Build a node of ``op_type``; non-tensor inputs become constants matching the tensors' dtype,
    and a list holding tensors (``tf.concat([[batch], [2]], 0)``'s ``[batch]``) is packed."""
    g = graph or _graph_of(inputs)
    like = next((v.dtype for v in inputs if isinstance(v, Tensor) and v.dtype is not None), None)
    if like is None:
        like = next((v.dtype for v in inputs if hasattr(v, "as_tensor")), None)
    tensors = []
    for v in inputs:
        if v is None or isinstance(v, Tensor):
            tensors.append(v)
        elif hasattr(v, "as_tensor"):
            tensors.append(v.as_tensor())
        elif holds_tensors(v):
            with g.as_default():
                tensors.append(pack(v))
        else:
            dt = like if (like is not None and like.kind == "f" and _is_float_like(v)) else None
            tensors.append(constant(v, dtype=dt, graph=g))
    return g.create_op(op_type, tensors, attrs or {}, domain=domain, name=name, num_outputs=num_outputs)


def _is_float_like(v) -> bool:
    return isinstance(v, (int, float)) or (isinstance(v, np.ndarray) and v.dtype.kind in "fiu")


def unary_op(op_type: str, domain: str = ""):
    """The builder of the one-input op ``op_type``: ``f(x, name=None) -> Tensor``."""

    def build(x, name: str | None = None) -> Tensor:
        return make_op(op_type, [x], domain=domain, name=name).outputs[0]

    build.__name__ = op_type.lower()
    build.__doc__ = f"Elementwise {op_type}."
    return build


def align_integer_operands(a, b):
    """Integer operands of an elementwise op meet at one dtype: a Python int takes the other
    operand's, and the narrower of two integer tensors is cast to the wider. (Python ints make
    int64 constants here, where TensorFlow makes int32, so ``tf.constant(0) < n`` must work for an
    int32 ``n``.)"""
    def is_int_tensor(x) -> bool:
        return isinstance(x, Tensor) and x.dtype is not None and np.dtype(x.dtype).kind == "i"

    def is_py_int(x) -> bool:
        return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))

    if is_int_tensor(a) and is_py_int(b):
        return a, np.asarray(b, np.dtype(a.dtype))
    if is_py_int(a) and is_int_tensor(b):
        return np.asarray(a, np.dtype(b.dtype)), b
    if is_int_tensor(a) and is_int_tensor(b) and a.dtype != b.dtype:
        wider = max(np.dtype(a.dtype), np.dtype(b.dtype), key=lambda d: d.itemsize)
        return (a if a.dtype == wider else cast(a, wider)), (b if b.dtype == wider else cast(b, wider))
    return a, b


def _binary(op_type: str):
    def build(a, b, name: str | None = None) -> Tensor:
        a, b = align_integer_operands(a, b)
        return make_op(op_type, [a, b], name=name).outputs[0]

    build.__name__ = op_type.lower()
    build.__doc__ = f"Elementwise {op_type} with NumPy broadcasting."
    return build


def constant(value, dtype=None, shape=None, name: str | None = None, graph: Graph | None = None) -> Tensor:
    """A Constant node holding ``value`` (Python floats default to float32, as in TensorFlow);
    with ``shape``, a scalar or matching-size ``value`` is broadcast or reshaped to it."""
    dtype = as_numpy_dtype(dtype)
    arr = np.asarray(value, dtype=dtype)
    if dtype is None and arr.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        arr = arr.astype(np.float32)
    if arr.dtype.kind in "US":  # text is tf.string: an object array of str (or bytes), as string kernels take
        arr = arr.astype(object)
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        arr = np.broadcast_to(arr, shape).copy() if arr.size == 1 else arr.reshape(shape)
    g = graph or get_default_graph()
    return g.create_op("Constant", [], {"value": arr}, name=name or "Const").outputs[0]


def placeholder(dtype, shape=None, name: str | None = None) -> Tensor:
    """A graph input that must be fed: ``placeholder(np.float32, (None, 784))``."""
    attrs = {"dtype": as_numpy_dtype(dtype).name}
    if shape is not None:
        attrs["shape"] = [-1 if d is None else int(d) for d in shape]
    return get_default_graph().create_op(
        "Placeholder", [], attrs, domain=TRAINER_DOMAIN, name=name or "Placeholder"
    ).outputs[0]


add = _binary("Add")
subtract = _binary("Sub")
multiply = _binary("Mul")
divide = _binary("Div")
equal = _binary("Equal")
greater = _binary("Greater")
less = _binary("Less")
pow = _binary("Pow")
matmul = _binary("MatMul")
negative = unary_op("Neg")
exp = unary_op("Exp")
log = unary_op("Log")
sqrt = unary_op("Sqrt")
tanh = unary_op("Tanh")
sigmoid = unary_op("Sigmoid")
abs = unary_op("Abs")
identity = unary_op("Identity")


def square(x, name=None) -> Tensor:
    return multiply(x, x, name=name)


def maximum(*xs, name=None) -> Tensor:
    return make_op("Max", list(xs), name=name).outputs[0]


def minimum(*xs, name=None) -> Tensor:
    return make_op("Min", list(xs), name=name).outputs[0]


def add_n(xs: Sequence, name=None) -> Tensor:
    xs = list(xs)
    if len(xs) == 1:
        return convert_to_tensor(xs[0])
    return make_op("Sum", xs, name=name or "AddN").outputs[0]


def zeros_like(x, name=None) -> Tensor:
    return make_op("ZerosLike", [x], domain=TRAINER_DOMAIN, name=name).outputs[0]


def ones_like(x, name=None) -> Tensor:
    return make_op("OnesLike", [x], domain=TRAINER_DOMAIN, name=name).outputs[0]


def stop_gradient(x, name=None) -> Tensor:
    """Identity whose gradient is zero (the gradient walk stops here)."""
    node = make_op("Identity", [x], name=name or "StopGradient")
    node.stop_gradient = True
    return node.outputs[0]


def where(cond, x, y, name=None) -> Tensor:
    return make_op("Where", [cond, x, y], name=name).outputs[0]


def cast(x, dtype, name=None) -> Tensor:
    from schemas.dtypes import from_numpy

    return make_op("Cast", [x], {"to": from_numpy(as_numpy_dtype(dtype))}, name=name).outputs[0]


def _axes(axis) -> Tensor | None:
    if axis is None:
        return None
    return constant(np.asarray(list(axis) if isinstance(axis, (list, tuple)) else [axis], np.int64))


def argmax(x, axis: int = -1, name=None) -> Tensor:
    return make_op("ArgMax", [x], {"axis": axis, "keepdims": 0}, name=name).outputs[0]


def reshape(x, shape, name=None) -> Tensor:
    x = convert_to_tensor(x)
    if holds_tensors(shape):
        shape = pack(shape, np.int64)
    elif not isinstance(shape, Tensor):
        with x.graph.as_default():
            shape = constant(np.asarray([-1 if d is None else d for d in shape], np.int64))
    return make_op("Reshape", [x, shape], name=name).outputs[0]


def transpose(x, perm=None, name=None) -> Tensor:
    attrs = {} if perm is None else {"perm": list(perm)}
    return make_op("Transpose", [x], attrs, name=name).outputs[0]


def concat(values, axis: int, name=None) -> Tensor:
    return make_op("Concat", list(values), {"axis": int(axis)}, name=name).outputs[0]


def gather(params, indices, axis: int = 0, name=None) -> Tensor:
    return make_op("Gather", [params, indices], {"axis": axis}, name=name).outputs[0]


def shape(x, name=None) -> Tensor:
    return make_op("Shape", [x], name=name).outputs[0]


def squeeze(x, axis, name=None) -> Tensor:
    x = convert_to_tensor(x)
    with x.graph.as_default():
        axes = _axes(axis)
    return make_op("Squeeze", [x, axes], name=name).outputs[0]


def getitem(x: Tensor, key) -> Tensor:
    """Basic slicing ``x[1:3, ::2]`` and integer indexing through Slice (+ Squeeze)."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        i = key.index(Ellipsis)
        rank = len(x.shape) if x.shape is not None else None
        if rank is None:
            raise GraphError(f"indexing tensor {x.name} with ... needs a known rank")
        fill = rank - sum(1 for k in key if k is not None and k is not Ellipsis)
        key = key[:i] + (slice(None),) * fill + key[i + 1:]
    if any(k is None for k in key):  # newaxis: index without them, then insert length-1 axes
        kept = [k for k in key if k is not None]
        out_positions, pos = [], 0
        for k in key:
            if k is None:
                out_positions.append(pos)
                pos += 1
            elif not isinstance(k, (int, np.integer)):
                pos += 1
        inner = getitem(x, tuple(kept)) if kept else x
        with inner.graph.as_default():
            axes_t = constant(np.asarray(out_positions, np.int64))
        return make_op("Unsqueeze", [inner, axes_t]).outputs[0]
    starts, ends, axes, steps, squeeze_axes = [], [], [], [], []
    for axis, k in enumerate(key):
        if isinstance(k, slice):
            if k == slice(None):
                continue
            step = 1 if k.step is None else k.step
            starts.append(k.start if k.start is not None else (0 if step > 0 else -1))
            ends.append(k.stop if k.stop is not None else (np.iinfo(np.int64).max if step > 0 else np.iinfo(np.int64).min))
            axes.append(axis)
            steps.append(step)
        elif isinstance(k, (int, np.integer)):
            starts.append(int(k))
            ends.append(int(k) + 1 if k != -1 else np.iinfo(np.int64).max)
            axes.append(axis)
            steps.append(1)
            squeeze_axes.append(axis)
        elif _is_tensor_like(k) and convert_to_tensor(k).shape == ():  # x[i] for a scalar tensor i
            with x.graph.as_default():
                i = cast(convert_to_tensor(k), np.int64)
                last = equal(i, constant(np.int64(-1)))
                starts.append(i)
                ends.append(where(last, constant(np.iinfo(np.int64).max), add(i, constant(np.int64(1)))))
            axes.append(axis)
            steps.append(1)
            squeeze_axes.append(axis)
        else:
            raise GraphError(f"unsupported index {k!r} for tensor {x.name}")
    if not axes:
        return x
    with x.graph.as_default():  # bounds may be tensors (x[:n] for a tensor n): packed into one
        c = [pack(v, np.int64) if holds_tensors(v) else constant(np.asarray(v, np.int64))
             for v in (starts, ends, axes, steps)]
    out = make_op("Slice", [x, *c]).outputs[0]
    return squeeze(out, squeeze_axes) if squeeze_axes else out


def no_op(name=None, control_inputs=()) -> Node:
    return get_default_graph().create_op(
        "NoOp", [], {}, domain=TRAINER_DOMAIN, name=name or "NoOp", control_inputs=control_inputs
    )


def group(*inputs, name=None) -> Node:
    """One node that runs all ``inputs`` (tensors or nodes) when run."""
    nodes = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            nodes.extend(_as_nodes(x))
        else:
            nodes.extend(_as_nodes([x]))
    g = nodes[0].graph if nodes else get_default_graph()
    return g.create_op("NoOp", [], {}, domain=TRAINER_DOMAIN, name=name or "group_deps", control_inputs=nodes)


def _as_nodes(xs) -> list[Node]:
    out = []
    for x in xs:
        if isinstance(x, Node):
            out.append(x)
        elif isinstance(x, Tensor):
            out.append(x.node)
        elif hasattr(x, "node"):
            out.append(x.node)
        else:
            raise GraphError(f"group: {x!r} is not a node or tensor")
    return out
