"""The gradient table and the backward walk.

A gradient rule is ``rule(node, grads) -> [grad for each input]``: ``grads`` holds one entry per
node output (None where nothing flows back), the result one per input (None = no gradient).
Rules are registered by op name, one line for most ops thanks to the helpers below.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from schemas.op_table import OpTable, import_families, registering_module
from schemas.registry import qualified_name
from trainer.graph import TRAINER_DOMAIN, GraphError, Node, Tensor

__all__ = [
    "IndexedSlices",
    "NO_GRADIENT",
    "get_gradient",
    "gradient_modules",
    "gradients",
    "has_gradient",
    "register_gradient",
]

GradRule = Callable[[Node, list], list]
_GRADS: OpTable[GradRule] = OpTable(
    "gradient", load=lambda: _load(),
    missing=lambda name, domain: LookupError(f"no gradient rule for op {qualified_name(name, domain)!r}"))


def NO_GRADIENT(node: Node, grads) -> list:
    """Rule for ops whose outputs do not depend smoothly on their inputs (Shape, ArgMax, Equal...)."""
    return [None] * len(node.inputs)


def register_gradient(name: str, domain: str = "", *, module: str | None = None):
    """Register ``rule`` as the gradient of op ``name``; ``module`` (default: the caller's) is its family file."""
    module = module or registering_module()

    def register(rule: GradRule) -> GradRule:
        _GRADS.add(name, domain, rule, module=module)
        return rule

    return register


_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        import_families("trainer.gradients")
        _loaded = True


def get_gradient(name: str, domain: str = "") -> GradRule:
    return _GRADS.get(name, domain)


def has_gradient(name: str, domain: str = "") -> bool:
    return _GRADS.has(name, domain)


def gradient_modules() -> dict[tuple[str, str], str]:
    """The module that registered each gradient rule: its family file (see ``schemas.op_table``)."""
    return _GRADS.modules()


class IndexedSlices:
    """TensorFlow's ``IndexedSlices(values, indices, dense_shape=None)``: rows ``values`` at
    ``indices`` of a dense tensor of shape ``dense_shape``, the gradient of a gather or an embedding
    lookup. The ones flowstack's gradients build also hold ``dense_like``, the tensor the rows belong
    to (the variable): densifying them needs no shape op. Converting one to a tensor densifies it
    (duplicate indices add up), as TensorFlow's ``convert_to_tensor`` does.
    """

    def __init__(self, values: Tensor, indices: Tensor, dense_shape=None, *, dense_like: Tensor | None = None):
        self.values = values
        self.indices = indices
        self.dense_like = dense_like
        self._dense_shape = dense_shape

    @property
    def dense_shape(self) -> Tensor | None:
        """The dense tensor's shape as a 1-D int64 tensor (None where neither it nor ``dense_like`` is known)."""
        if self._dense_shape is None and self.dense_like is not None:
            from trainer.ops import make_op

            with self.dense_like.graph.as_default():
                self._dense_shape = make_op("Shape", [self.dense_like]).outputs[0]
        if self._dense_shape is not None and not isinstance(self._dense_shape, Tensor):
            from trainer.ops import convert_to_tensor

            with self.graph.as_default():
                self._dense_shape = convert_to_tensor(np.asarray(self._dense_shape, np.int64))
        return self._dense_shape

    @property
    def graph(self):
        return self.values.graph

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def name(self) -> str:
        return self.values.name

    @property
    def op(self):
        return self.values.op

    def __repr__(self) -> str:
        return f"IndexedSlices(indices={self.indices!r}, values={self.values!r}, dense_shape={self._dense_shape!r})"

    def to_dense(self) -> Tensor:
        from trainer.ops import make_op

        like = self.dense_like
        if like is None:
            if self.dense_shape is None:
                raise ValueError(f"IndexedSlices {self.values.name}: cannot densify without dense_shape")
            with self.graph.as_default():
                like = make_op("ConstantOfShape", [self.dense_shape], {"value": np.zeros(1, self.dtype)}).outputs[0]
        return make_op("ScatterToDense", [self.values, self.indices, like], domain=TRAINER_DOMAIN).outputs[0]

    as_tensor = to_dense


def _dense(g):
    return g.to_dense() if isinstance(g, IndexedSlices) else g


def _aggregate(partials: list, keep_sparse: bool):
    partials = [p for p in partials if p is not None]
    if not partials:
        return None
    if len(partials) == 1:
        return partials[0] if keep_sparse else _dense(partials[0])
    from trainer.ops import add_n

    return add_n([_dense(p) for p in partials])


def _between(ys: Sequence[Tensor], xs: Sequence[Tensor], stop: set) -> set:
    """Nodes on some path from an x to a y (the only ones whose gradients matter)."""
    back = set()
    stack = [y.node for y in ys]
    while stack:
        n = stack.pop()
        if n in back:
            continue
        back.add(n)
        if n in stop:
            continue
        loop = getattr(n, "while_loop", None)
        if loop is not None:  # a loop is differentiated whole: step over its body
            stack.extend(loop.outer_inputs())
            continue
        stack.extend(t.node for t in n.inputs if t is not None)
    x_nodes = {x.node for x in xs}
    fwd = set()
    consumers: dict[Node, list[Node]] = {}
    for n in back:
        loop = getattr(n, "while_loop", None)
        sources = loop.outer_inputs() if loop is not None else [t.node for t in n.inputs if t is not None]
        for src in sources:
            consumers.setdefault(src, []).append(n)
    stack = list(x_nodes)
    while stack:
        n = stack.pop()
        if n in fwd:
            continue
        fwd.add(n)
        stack.extend(consumers.get(n, ()))
    return back & fwd


def gradients(ys, xs, grad_ys=None, stop_gradients=(), *, name: str = "gradients") -> list:
    """d(sum of ys)/d(x) for each x, summing partial gradients over all paths.

    Returns a Tensor per x (an ``IndexedSlices`` where the gradient is sparse, e.g. through
    Gather), or None where y does not depend on x. The backward ops are built under the name
    scope ``name``; a node's rule is the one ``trainer.gradient_overrides.gradient_rule`` picks
    (a ``gradient_override_map`` entry, a ``RegisterGradient`` function, else the table's).
    """
    from trainer.gradient_overrides import gradient_rule
    from trainer.gradients.dataflow import while_loop_gradient
    from trainer.ops import convert_to_tensor, ones_like

    ys = [convert_to_tensor(y) for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
    xs_list = xs if isinstance(xs, (list, tuple)) else [xs]
    xs_t = [convert_to_tensor(x) for x in xs_list]
    graph = ys[0].graph
    for t in ys + xs_t:
        if t.graph is not graph:
            raise GraphError(f"gradients: tensor {t.name} belongs to another graph than {ys[0].name}")
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    elif not isinstance(grad_ys, (list, tuple)):
        grad_ys = [grad_ys]
    stop = {convert_to_tensor(s).node for s in stop_gradients}
    stop |= {n for n in graph if getattr(n, "stop_gradient", False)}
    x_set = set(xs_t)
    grads: dict[Tensor, list] = {}
    with graph.as_default(), graph.name_scope(name or "gradients"):
        for y, gy in zip(ys, grad_ys):
            grads.setdefault(y, []).append(ones_like(y) if gy is None else convert_to_tensor(gy, graph=graph))
        todo = _between(ys, xs_t, stop)
        done_loops = set()
        for node in sorted(todo, key=lambda n: n.id, reverse=True):
            if node in stop:
                continue
            loop = getattr(node, "while_loop", None)
            if loop is not None:
                if id(loop) in done_loops:
                    continue
                done_loops.add(id(loop))
                exit_grads = [_aggregate(grads.get(t, []), False) for t in loop.exit_tensors()]
                for t, g in while_loop_gradient(loop, exit_grads, wanted=lambda t: t.node in todo):
                    grads.setdefault(t, []).append(g)
                continue
            out_grads = [_aggregate(grads.get(t, []), t in x_set) for t in node.outputs]
            if all(g is None for g in out_grads):
                continue
            if not any(t is not None and t.node in todo for t in node.inputs):
                continue  # an x itself (or a source): nothing further back needs a gradient
            rule = gradient_rule(node)
            dense = [_dense(g) for g in out_grads]
            with graph.name_scope(node.name.replace("/", "_") + "_grad"):
                in_grads = rule(node, dense)
            if len(in_grads) != len(node.inputs):
                raise GraphError(
                    f"gradient of {node.op_type} returned {len(in_grads)} values for {len(node.inputs)} inputs"
                )
            for t, g in zip(node.inputs, in_grads):
                if t is not None and g is not None and t.node in todo:
                    grads.setdefault(t, []).append(g)
        return [_aggregate(grads.get(x, []), True) for x in xs_t]
