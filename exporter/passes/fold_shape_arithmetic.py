"""Fold the shape arithmetic exporters write around every reshape, where the dims it reads are known.

PyTorch's exporters compute each ``view``/``reshape`` target at run time: ``Shape(x)`` ->
``Gather`` -> ``Unsqueeze`` -> ``Concat`` (with ``Slice``, ``Cast``, ``Mul``, ``Div`` in between)
-> ``Reshape``. Constant folding cannot touch them (``Shape`` reads an activation), yet with the
value shapes known (from the importer or ``refine_shapes``) every dim but the batch is a
constant: LeViT-128S ran 73 ``Shape`` nodes and their chains, about 300 small ops a run, and
Swin-T 112. This pass evaluates such chains over dims that may be unknown: a value every one of
whose entries is known becomes a constant, and a ``Reshape`` target with exactly one unknown
entry (the batch) becomes a constant with -1 there, which resolves to the same size whenever the
original target was valid (the element count fixes it); an unknown entry that is the reshaped
value's own dim at the same axis (``x.flatten(2)``: ``Concat(Shape(x)[:2], [-1])``) becomes 0,
"copy that dim". Dead code elimination then drops the chains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import add_constant, all_graphs, constant, copy_model, remove_nodes

Dims = tuple[Optional[int], ...]  # None = unknown until run time
Origin = Optional[tuple[str, int]]  # (value, axis): the entry is that value's dim


@dataclass(frozen=True)
class Symbolic:
    """An integer tensor of rank 0 or 1 whose entries are known or not (``None``), with where each
    entry came from when it is a dim of some value read by ``Shape``."""

    dims: Dims
    scalar: bool
    dtype: np.dtype
    origins: tuple[Origin, ...] = ()

    def origin(self, i: int) -> Origin:
        return self.origins[i] if i < len(self.origins) else None

    @property
    def known(self) -> bool:
        return all(d is not None for d in self.dims)

    def array(self) -> np.ndarray:
        data = np.array(self.dims, dtype=self.dtype)
        return data.reshape(()) if self.scalar else data


def fold_shape_arithmetic(model: ir.Model) -> tuple[ir.Model, int]:
    """Turn known shape arithmetic into constants; returns the new model and how many nodes changed."""
    model = copy_model(model)
    changed = 0
    for graph in all_graphs(model.graph):
        changed += _fold_graph(graph)
    return model, changed


def _fold_graph(graph: ir.Graph) -> int:
    symbols: dict[str, Symbolic] = {}
    doomed: list[ir.Node] = []
    retargeted = 0
    for node in graph.nodes:
        if node.domain != "" or any(node.subgraphs()):
            continue
        if node.op_type == "Reshape" and _retarget_reshape(graph, node, symbols):
            retargeted += 1
            continue
        rule = _RULES.get(node.op_type)
        if rule is None or len(node.outputs) != 1:
            continue
        args = [_symbol(graph, name, symbols) if name else None for name in node.inputs]
        try:
            result = rule(graph, node, args)
        except (ValueError, IndexError, TypeError, ZeroDivisionError):
            result = None
        if result is None:
            continue
        if result.known and node.outputs[0] not in graph.outputs:
            graph.values[node.outputs[0]] = ir.Value(node.outputs[0], data=result.array())
            doomed.append(node)
        else:
            symbols[node.outputs[0]] = result
    remove_nodes(graph, doomed)
    return len(doomed) + retargeted


def _symbol(graph: ir.Graph, name: str, symbols: dict[str, Symbolic]) -> Symbolic | None:
    if name in symbols:
        return symbols[name]
    data = constant(graph, name)
    if data is None or data.ndim > 1 or data.dtype.kind not in "iu" or data.size > 64:
        return None
    return Symbolic(tuple(int(v) for v in data.reshape(-1)), data.ndim == 0, data.dtype)


def _retarget_reshape(graph: ir.Graph, node: ir.Node, symbols: dict[str, Symbolic]) -> bool:
    """A Reshape target whose unknown entries are the data's own dims at the same axis (0: copy it)
    but for at most one (-1, where the target has none) becomes a constant."""
    target = symbols.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if target is None or target.scalar or node.attrs.get("allowzero", 0):
        return False
    dims = [0 if d is None and target.origin(i) == (node.inputs[0], i) else d for i, d in enumerate(target.dims)]
    unknown = [i for i, d in enumerate(dims) if d is None]
    if len(unknown) + (-1 in dims) > 1:
        return False
    dims = np.array([-1 if d is None else d for d in dims], np.int64)
    node.inputs[1] = add_constant(graph, f"{node.name or node.outputs[0]}_target", dims)
    return True


# ------------------------------------------------------------------------------ the op rules
# Each rule: (graph, node, input symbols or None) -> the output's Symbolic, or None where unknown.

Rule = Callable[[ir.Graph, ir.Node, list], Optional[Symbolic]]


def _shape(graph: ir.Graph, node: ir.Node, args: list) -> Symbolic | None:
    value = graph.values.get(node.inputs[0])
    if value is None:
        return None
    shape = value.data.shape if value.data is not None else value.shape
    if shape is None:
        return None
    dims = tuple(None if d is None or d < 0 else int(d) for d in shape)
    origins = tuple((node.inputs[0], axis) for axis in range(len(dims)))
    window = slice(node.attrs.get("start", 0), node.attrs.get("end"))
    return Symbolic(dims[window], False, np.dtype(np.int64), origins[window])


def _gather(graph: ir.Graph, node: ir.Node, args: list) -> Symbolic | None:
    data, indices = args[0], constant(graph, node.inputs[1])
    if data is None or data.scalar or indices is None or node.attrs.get("axis", 0) != 0 or indices.ndim > 1:
        return None
    picked = [int(i) for i in indices.reshape(-1)]
    return Symbolic(tuple(data.dims[i] for i in picked), indices.ndim == 0, data.dtype,
                    tuple(data.origin(i % len(data.dims)) for i in picked))


def _unsqueeze(graph: ir.Graph, node: ir.Node, args: list) -> Symbolic | None:
    data = args[0]
    axes = constant(graph, node.inputs[1]) if len(node.inputs) > 1 else np.array(node.attrs.get("axes") or [])
    if data is None or not data.scalar or axes is None or [int(a) for a in axes.reshape(-1)] not in ([0], [-1]):
        return None
    return Symbolic(data.dims, False, data.dtype, data.origins)


def _squeeze(graph: ir.Graph, node: ir.Node, args: list) -> Symbolic | None:
    data = args[0]
    if data is None or data.scalar or len(data.dims) != 1:
        return None
    return Symbolic(data.dims, True, data.dtype, data.origins)


def _concat(graph: ir.Graph, node: ir.Node, args: list) -> Symbolic | None:
    if node.attrs.get("axis", 0) not in (0, -1) or any(a is None or a.scalar for a in args):
        return None
    return Symbolic(tuple(d for a in args for d in a.dims), False, args[0].dtype,
                    tuple(a.origin(i) for a in args for i in range(len(a.dims))))


def _cast(graph: ir.Graph, node: ir.Node, args: list) -> Symbolic | None:
    from schemas import dtypes

    data = args[0]
    try:
        target = np.dtype(dtypes.to_numpy(node.attrs.get("to")))
    except (dtypes.DTypeError, TypeError):
        return None
    if data is None or target.kind not in "iu":
        return None
    return Symbolic(data.dims, data.scalar, target, data.origins)


def _identity(graph: ir.Graph, node: ir.Node, args: list) -> Symbolic | None:
    return args[0]


def _slice(graph: ir.Graph, node: ir.Node, args: list) -> Symbolic | None:
    data = args[0]
    params = [constant(graph, n) if n else None for n in node.inputs[1:5]]
    if data is None or data.scalar or any(p is None for p in params[:2]):
        return None
    starts, ends = params[0].reshape(-1), params[1].reshape(-1)
    axes = params[2] if len(params) > 2 and params[2] is not None else np.zeros(1, np.int64)
    steps = params[3] if len(params) > 3 and params[3] is not None else np.ones(1, np.int64)
    if len(starts) != 1 or int(axes.reshape(-1)[0]) not in (0, -1) or int(steps.reshape(-1)[0]) != 1:
        return None  # a negative step clamps its ends unlike Python's slices
    n = len(data.dims)
    start, end = (int(np.clip(v, -(n + 1), n + 1)) for v in (starts[0], ends[0]))
    origins = tuple(data.origin(i) for i in range(n))
    return Symbolic(data.dims[start:end], False, data.dtype, origins[start:end])


def _elementwise(op: Callable[[int, int], int]) -> Rule:
    def rule(graph: ir.Graph, node: ir.Node, args: list) -> Symbolic | None:
        a, b = args[0], args[1] if len(args) > 1 else None
        if a is None or b is None:
            return None
        if len(a.dims) != len(b.dims) and 1 not in (len(a.dims), len(b.dims)):
            return None
        n = max(len(a.dims), len(b.dims))
        pick = lambda s, i: s.dims[0] if len(s.dims) == 1 else s.dims[i]  # noqa: E731
        dims = tuple(None if pick(a, i) is None or pick(b, i) is None else op(pick(a, i), pick(b, i))
                     for i in range(n))
        return Symbolic(dims, a.scalar and b.scalar, a.dtype)
    return rule


def _truncating_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


_RULES: dict[str, Rule] = {
    "Shape": _shape,
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Cast": _cast,
    "Identity": _identity,
    "Slice": _slice,
    "Add": _elementwise(lambda a, b: a + b),
    "Sub": _elementwise(lambda a, b: a - b),
    "Mul": _elementwise(lambda a, b: a * b),
    "Div": _elementwise(_truncating_div),
}
