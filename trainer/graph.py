"""Dataflow graphs: nodes are ops from the registry, edges are tensors; built once, run many times.

A ``Graph`` owns ``Node``s in creation order (which is a topological order: a node's inputs always
exist before it). Every node is checked against its op schema when it is built, so a shape error
is raised at the line that built the node, naming the op, the node and both shapes.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from schemas.registry import ShapeError, TensorType, get_schema, infer_types
from trainer.devices import DeviceSpec
from trainer.dtypes import tensor_dtype
from trainer.errors import GraphError
from trainer.partial_values import known_elements
from trainer.tensor_shape import as_shape_tuple, merge_shapes, shapes_compatible, static_shape

__all__ = [
    "Graph",
    "GraphError",
    "GraphKeys",
    "Node",
    "Tensor",
    "control_dependencies",
    "device",
    "get_default_graph",
    "name_scope",
    "reset_default_graph",
]

TRAINER_DOMAIN = "flowstack"


class GraphKeys:
    """Names of the standard collections."""

    GLOBAL_VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    UPDATE_OPS = "update_ops"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    GLOBAL_STEP = "global_step"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    TRAIN_OP = "train_op"
    METRIC_VARIABLES = "metric_variables"
    # filled by the caller (a layer's outputs_collections / variables_collections), as in TensorFlow
    ACTIVATIONS = "activations"
    WEIGHTS = "weights"
    BIASES = "biases"


def _operator(op: str, node_name: str, *, reflected: bool = False, module: str = "ops"):
    """A binary operator method of Tensor that builds ``trainer.<module>.<op>`` (operands swapped
    if ``reflected``) as a node named ``node_name``: TensorFlow's name for it (``x + b`` is "add")."""

    def method(self, other):
        import importlib
        build = getattr(importlib.import_module(f"trainer.{module}"), op)
        return build(other, self, name=node_name) if reflected else build(self, other, name=node_name)

    return method


class Tensor:
    """Output ``index`` of ``node``: a symbolic value with a static dtype and (partial) shape."""

    __slots__ = ("node", "index", "type", "__weakref__")
    # NumPy hands arithmetic with an array on the left to the tensor's reflected operator
    # (``weights * t`` builds a Mul node, as in TensorFlow) instead of looping over the array and
    # building one node per element; a NumPy function called on a tensor raises TypeError.
    __array_ufunc__ = None

    def __init__(self, node: "Node", index: int, type: TensorType):
        self.node = node
        self.index = index
        self.type = type

    @property
    def name(self) -> str:
        return f"{self.node.name}:{self.index}"

    @property
    def graph(self) -> "Graph":
        return self.node.graph

    @property
    def op(self) -> "Node":
        return self.node

    @property
    def dtype(self):
        """TF1's DType (``tf.float32``: ``.as_numpy_dtype``, ``.base_dtype``, ``.is_floating``); it equals
        and stands in for the NumPy dtype (``t.dtype == np.float32``)."""
        return tensor_dtype(self.type.dtype)

    @property
    def shape(self) -> tuple[int | None, ...] | None:
        """The static shape: a tuple of ints and None (None for an unknown rank) that also has
        TF1's TensorShape methods (``x.shape.as_list()``, ``x.shape[-1].value``)."""
        return static_shape(self.type.shape)

    def set_shape(self, shape) -> None:
        """TF1's ``set_shape``: add what ``shape`` (a TensorShape, list or None) says to what is known
        of this tensor's shape; a shape that contradicts it raises ValueError."""
        given, known = as_shape_tuple(shape), self.type.shape
        if not shapes_compatible(known, given):
            raise ValueError(f"Shapes {known} and {given} are not compatible (tensor {self.name})")
        merged = merge_shapes(known, given)
        self.type = TensorType(self.type.dtype, merged)

    def __repr__(self) -> str:
        return f"<tf.Tensor {self.name!r} shape={self.get_shape()} dtype={self._dtype_name()}>"

    def __str__(self) -> str:
        """As TensorFlow 1.x prints a tensor: ``Tensor("input:0", shape=(?, 784), dtype=float32)``."""
        shape = self.get_shape()
        return (f'Tensor("{self.name}"' + (f", shape={shape}" if shape.ndims is not None else "")
                + f", dtype={self._dtype_name()}" + (f", device={self.node.device}" if self.node.device else "") + ")")

    def _dtype_name(self) -> str:
        return "unknown" if self.type.dtype is None else self.dtype.name

    # Operator overloads build nodes in the tensor's graph (trainer.ops, imported when first used),
    # named as TensorFlow 1.x names them.
    __add__, __radd__ = _operator("add", "add"), _operator("add", "add", reflected=True)
    __sub__, __rsub__ = _operator("subtract", "sub"), _operator("subtract", "sub", reflected=True)
    __mul__, __rmul__ = _operator("multiply", "mul"), _operator("multiply", "mul", reflected=True)
    __truediv__, __rtruediv__ = _operator("divide", "truediv"), _operator("divide", "truediv", reflected=True)
    __matmul__ = _operator("matmul", "matmul")
    __pow__ = _operator("pow", "pow")
    __rmatmul__ = _operator("matmul", "matmul", reflected=True)
    __rpow__ = _operator("pow", "pow", reflected=True)
    __floordiv__ = _operator("floordiv", "floordiv", module="array_ops")
    __rfloordiv__ = _operator("floordiv", "floordiv", reflected=True, module="array_ops")
    __mod__ = _operator("floormod", "mod", module="array_ops")
    __rmod__ = _operator("floormod", "mod", reflected=True, module="array_ops")
    __lt__ = _operator("less", "Less")
    __gt__ = _operator("greater", "Greater")
    __le__ = _operator("less_equal", "LessEqual", module="array_ops")
    __ge__ = _operator("greater_equal", "GreaterEqual", module="array_ops")
    __and__ = _operator("logical_and", "LogicalAnd", module="array_ops")
    __rand__ = _operator("logical_and", "LogicalAnd", reflected=True, module="array_ops")
    __or__ = _operator("logical_or", "LogicalOr", module="array_ops")
    __ror__ = _operator("logical_or", "LogicalOr", reflected=True, module="array_ops")
    __xor__ = _operator("logical_xor", "LogicalXor", module="array_ops")
    __rxor__ = _operator("logical_xor", "LogicalXor", reflected=True, module="array_ops")

    def __invert__(self):
        from trainer import array_ops
        return array_ops.logical_not(self)

    def __abs__(self):
        from trainer import ops
        return ops.abs(self)

    def __neg__(self):
        from trainer import ops
        return ops.negative(self)

    def __getitem__(self, key):
        from trainer import ops
        return ops.getitem(self, key)

    def eval(self, feed_dict=None, session=None):
        """This tensor's value in ``session`` (default: the InteractiveSession)."""
        from trainer.interactive import eval_tensor
        return eval_tensor(self, feed_dict, session)

    def get_shape(self):
        """The static shape as TF1's TensorShape (``.as_list()``, ``.ndims``)."""
        from trainer.tensor_shape import TensorShape
        return TensorShape(self.shape)

    # Tensors are graph edges: identity semantics, so they can be dict keys (feeds, fetches).
    __hash__ = object.__hash__

    def __eq__(self, other):  # noqa: D105 - identity, as dict keys need
        return self is other

    def __bool__(self):
        raise TypeError(f"tensor {self.name} has no truth value while building a graph; use cond()")


class Node:
    """One op instance: ``op_type`` in ``domain`` with ``inputs``, ``attrs`` and ``outputs``.

    ``inputs`` holds Tensors, or None for an omitted optional input. ``control_inputs`` are nodes
    that must run first. ``device`` is the requested device ("" = let the placer choose).
    """

    def __init__(self, graph, name, op_type, domain, inputs, attrs, control_inputs, device):
        self.graph = graph
        self.name = name
        self.op_type = op_type
        self.domain = domain
        self.inputs: list[Tensor | None] = list(inputs)
        self.attrs: dict[str, Any] = attrs
        self.control_inputs: list[Node] = list(control_inputs)
        self.device: str = device
        self.outputs: list[Tensor] = []
        self.id = len(graph._nodes)
        self.cf_context = None  # control-flow context (cond branch or loop) the node lives in
        self.colocate_with: Node | None = None

    @property
    def schema(self):
        return get_schema(self.op_type, self.domain)

    @property
    def type(self) -> str:
        return self.op_type

    @property
    def stateful(self) -> bool:
        return self.schema.stateful

    def output(self, i: int = 0) -> Tensor:
        return self.outputs[i]

    def run(self, feed_dict=None, session=None) -> None:
        """Run this node in ``session`` (default: the InteractiveSession), as TF1's ``op.run()``."""
        from trainer.interactive import eval_tensor
        eval_tensor(self, feed_dict, session)

    def __repr__(self) -> str:
        dom = f"{self.domain}::" if self.domain else ""
        return f"<Node {self.name} {dom}{self.op_type}>"

    __hash__ = object.__hash__


class Graph:
    """A dataflow graph. Use ``with graph.as_default():`` to build into it."""

    def __init__(self):
        self._nodes: list[Node] = []
        self._by_name: dict[str, Node] = {}
        self._name_counts: dict[str, int] = {}
        self._collections: dict[str, list] = {}
        self._lock = threading.RLock()
        self._local = threading.local()
        self.loops: list = []  # WhileLoop records, so exporters can rebuild functional Loop ops
        self.conds: list = []
        self.version = 0  # bumps on every new node; sessions key plans on it
        self.seed: int | None = None  # graph-level random seed (set_random_seed)
        # (seed, generator) of the initial values trainer.init computes in NumPy under that seed
        self.initial_value_stream: tuple[int, np.random.Generator] | None = None
        # Called with an input from another graph (a function graph capturing its caller's tensor, as a
        # dataset function does); returns the tensor of this graph that stands for it. None: refused.
        self.capture: Callable[[Tensor], Tensor] | None = None

    # -- per-thread building state ----------------------------------------------------------
    def _state(self):
        st = self._local
        if not hasattr(st, "scope"):
            st.scope = []
            st.control = []
            st.device = []
            st.cf = []
            st.colocate = []
            st.gradient_override = {}
        return st

    def as_default(self):
        return _pushed(_graph_stack(), self)

    # -- nodes ------------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        """All nodes in creation (topological) order."""
        return list(self._nodes)

    def get_operations(self) -> list[Node]:
        return self.nodes

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._by_name), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise GraphError(f"no node named {name!r} in this graph{hint}") from None

    get_operation_by_name = node

    def has_node(self, name: str) -> bool:
        """Whether a node named ``name`` is in this graph."""
        return name in self._by_name

    def tensor(self, name: str) -> Tensor:
        """``"node:0"`` (or ``"node"`` for output 0) to its Tensor."""
        node_name, _, idx = name.partition(":")
        node = self.node(node_name)
        i = int(idx or 0)
        if i >= len(node.outputs):
            raise GraphError(f"node {node_name!r} has {len(node.outputs)} outputs; asked for {name!r}")
        return node.outputs[i]

    get_tensor_by_name = tensor

    def get_name_scope(self) -> str:
        """The name scope open in this thread ("" at the top), without the trailing slash."""
        return "/".join(self._state().scope)

    def unique_name(self, name: str) -> str:
        st = self._state()
        full = "/".join(st.scope + [name]) if st.scope else name
        with self._lock:
            if full not in self._by_name and full not in self._name_counts:
                self._name_counts[full] = 0
                return full
            n = self._name_counts.get(full, 0)
            while True:
                n += 1
                candidate = f"{full}_{n}"
                if candidate not in self._by_name and candidate not in self._name_counts:
                    self._name_counts[full] = n
                    self._name_counts[candidate] = 0
                    return candidate

    def create_op(
        self,
        op_type: str,
        inputs: Sequence[Tensor | None],
        attrs: dict[str, Any] | None = None,
        *,
        domain: str = "",
        name: str | None = None,
        num_outputs: int | None = None,
        output_types: Sequence[TensorType] | None = None,
        control_inputs: Sequence[Node] = (),
        in_context: bool = True,
    ) -> Node:
        """Build a node, validated against the op registry; shape errors name op, node and shapes."""
        schema = get_schema(op_type, domain)
        st = self._state()
        inputs = list(inputs)
        for i, t in enumerate(inputs):
            if t is not None and not isinstance(t, Tensor):
                raise GraphError(f"{op_type}: input {i} is {type(t).__name__}, not a Tensor")
            if t is not None and t.node.graph is not self and self.capture is not None:
                inputs[i] = t = self.capture(t)
            if t is not None and t.node.graph is not self:
                raise GraphError(
                    f"{op_type}: input {i} ({t.name}) belongs to another graph; "
                    "all inputs of a node must come from the graph it is built in"
                )
        while inputs and inputs[-1] is None:
            inputs.pop()
        ctx = st.cf[-1] if (st.cf and in_context) else None
        if ctx is not None:
            inputs = ctx.enter_inputs(inputs)
        node_name = self.unique_name(name or op_type)
        if ":" in node_name:
            raise GraphError(f"{op_type}: node name {node_name!r} has a ':', which separates a tensor's output "
                             "index ('w:0' is output 0 of node 'w'); name the node without it (a variable's "
                             "node name is variable.op.name)")
        resolved = schema.resolve_attrs(attrs or {}, where=f"node {node_name!r}: ")
        n_out = num_outputs if num_outputs is not None else max(len(schema.outputs), 1)
        if schema.max_outputs is None and num_outputs is None:
            n_out = max(len(schema.outputs) - 1, 1)
        schema.check_arity(len(inputs), n_out, where=f"node {node_name!r}: ")
        if output_types is None:
            in_types = [None if t is None else t.type for t in inputs]
            in_values = [None if t is None else constant_value(t) for t in inputs]
            try:
                output_types = infer_types(
                    schema, in_types, resolved, input_values=in_values, num_outputs=n_out, name=node_name,
                    partial_values=lambda i: known_elements(inputs[i]) if i < len(inputs) else None,
                )
            except ShapeError:
                raise
            except Exception as e:  # a shape rule tripping over odd input is still a shape error
                shapes = [None if t is None else t.shape for t in inputs]
                raise ShapeError(f"{op_type} (node {node_name!r}): inputs {shapes}: {e}") from e
        ctrl = list(control_inputs)
        for deps in st.control:
            ctrl.extend(d for d in deps if d not in ctrl)
        # Colocation overrides device scopes, as in TF: a slot or an update is built on its
        # variable's device, and a device function (replica_device_setter) never sees it.
        device_fn = not st.colocate and any(callable(entry) for entry in st.device)
        if st.colocate:
            dev = st.colocate[-1].device
        else:
            dev = str(_merged_device_scopes(st.device)) if st.device and not device_fn else ""
        with self._lock:
            node = Node(self, node_name, op_type, domain, inputs, resolved, ctrl, dev)
            node.outputs = [Tensor(node, i, t) for i, t in enumerate(output_types)]
            if st.colocate:
                node.colocate_with = st.colocate[-1]
            if op_type in st.gradient_override:
                node.gradient_override = st.gradient_override[op_type]
            if ctx is not None:
                node.cf_context = ctx
                ctx.add_node(node)
            self._nodes.append(node)
            self._by_name[node_name] = node
            self.version += 1
        if device_fn:
            node.device = _apply_device_scopes(st.device, node)
        return node

    # -- scopes -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def name_scope(self, name: str | None):
        st = self._state()
        if not name:
            yield ""
            return
        if name.endswith("/"):  # re-enter an existing scope exactly
            parts = [p for p in name.rstrip("/").split("/") if p]
        else:
            parts = self.unique_name(name).split("/")
        saved = st.scope
        st.scope = parts
        try:
            yield "/".join(parts) + "/"
        finally:
            st.scope = saved

    @contextlib.contextmanager
    def control_dependencies(self, deps):
        st = self._state()
        if deps is None:  # clears outer dependencies, as in TensorFlow
            saved = st.control
            st.control = []
            try:
                yield
            finally:
                st.control = saved
            return
        nodes = [d.node if isinstance(d, Tensor) else _as_node(d) for d in deps]
        with _pushed(st.control, nodes):
            yield

    @contextlib.contextmanager
    def device(self, name_or_function):
        """Constrain the ops built inside to a device (see ``trainer.device``)."""
        st = self._state()
        if callable(name_or_function):
            entry = name_or_function
        else:
            entry = DeviceSpec.parse(str(name_or_function)) if name_or_function else None  # a tf.DeviceSpec too
        with _pushed(st.device, entry):
            yield

    @contextlib.contextmanager
    def colocate_with(self, node: "Node"):
        st = self._state()
        with _pushed(st.colocate, _as_node(node)):
            yield

    @contextlib.contextmanager
    def control_flow_context(self, ctx):
        """Nodes built inside belong to the cond or while_loop context ``ctx`` (trainer/control_flow.py)."""
        st = self._state()
        with _pushed(st.cf, ctx):
            yield ctx

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict[str, str]):
        """Ops of a type in ``op_type_map`` built inside take their gradient from the function
        registered under the mapped name (``RegisterGradient``, trainer/gradient_overrides.py)."""
        if not isinstance(op_type_map, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in op_type_map.items()):
            raise TypeError(f"gradient_override_map: expected a dict of op type strings to gradient names, "
                            f"got {op_type_map!r}")
        from trainer.gradient_overrides import flowstack_op_type

        st = self._state()
        saved = st.gradient_override
        st.gradient_override = {**saved, **{flowstack_op_type(k): v for k, v in op_type_map.items()}}
        try:
            yield
        finally:
            st.gradient_override = saved

    def current_control_flow_context(self):
        """The innermost cond or while_loop context being built, or None outside any."""
        st = self._state()
        return st.cf[-1] if st.cf else None

    # -- collections ------------------------------------------------------------------------
    def add_to_collection(self, key: str, value) -> None:
        with self._lock:
            self._collections.setdefault(key, []).append(value)

    def get_collection(self, key: str, scope: str | None = None) -> list:
        """The items in collection ``key``; with ``scope``, as TensorFlow does, those whose ``name``
        the regular expression matches from its start ("dense" keeps "dense/kernel:0" and also
        "dense_1/kernel:0"; "dense/" keeps only the first). Items without a name are left out."""
        items = list(self._collections.get(key, []))
        if scope:
            pattern = re.compile(scope)
            items = [v for v in items if isinstance(getattr(v, "name", None), str) and pattern.match(v.name)]
        return items

    def get_collection_ref(self, key: str) -> list:
        """The collection's own list (TF1's API: appending to it adds to the collection)."""
        with self._lock:
            return self._collections.setdefault(key, [])

    def get_all_collection_keys(self) -> list[str]:
        return sorted(self._collections)

    def as_graph_def(self, from_version=None, add_shapes: bool = False):
        """TF1's serialized graph (trainer/graph_def.py's GraphDef); shapes are always in it."""
        from trainer.graph_def import as_graph_def  # it builds on the saver, which builds on this module

        return as_graph_def(self)

    def finalize(self) -> None:
        self._finalized = True

    def __iter__(self) -> Iterator[Node]:
        return iter(list(self._nodes))

    def __len__(self) -> int:
        return len(self._nodes)

    def __bool__(self) -> bool:
        """Always true: ``Session(graph=Graph())`` and every ``graph or get_default_graph()`` must
        take an empty graph as given, not fall back to the default one."""
        return True


def _as_node(x) -> Node:
    if isinstance(x, Node):
        return x
    if isinstance(x, Tensor):
        return x.node
    if hasattr(x, "node"):  # Variable, queue handles
        return x.node
    raise GraphError(f"expected a node or tensor, got {type(x).__name__}")


def constant_value(t: Tensor) -> np.ndarray | None:
    """The value of ``t`` if it is known at build time (a constant), else None."""
    node = t.node
    if node.op_type == "Constant" and node.domain == "":
        return node.attrs.get("value")
    return None


# -- the default graph ------------------------------------------------------------------------
_global_default: Graph | None = None
_stack = threading.local()


def _graph_stack() -> list:
    if not hasattr(_stack, "graphs"):
        _stack.graphs = []
    return _stack.graphs


@contextlib.contextmanager
def _pushed(stack: list, entry):
    """``entry`` on top of ``stack`` for the with-block: the graph's scopes and the default graph."""
    stack.append(entry)
    try:
        yield entry
    finally:
        stack.pop()


def get_default_graph() -> Graph:
    """The innermost ``as_default()`` graph of this thread, else the process-wide default."""
    global _global_default
    stack = _graph_stack()
    if stack:
        return stack[-1]
    if _global_default is None:
        _global_default = Graph()
    return _global_default


def reset_default_graph() -> None:
    global _global_default
    _global_default = Graph()


def name_scope(name: str | None, default_name: str | None = None, values=None):
    """TF1's ``tf.name_scope(name, default_name=None, values=None)``: ``name``, or ``default_name``
    when ``name`` is None (a library function's own scope, made unique); built in the graph of the
    tensors in ``values`` if there are any, else the default graph."""
    graph = next((v.graph for v in values or () if isinstance(v, Tensor)), None) or get_default_graph()
    return graph.name_scope(name if name else default_name)


def control_dependencies(deps):
    return get_default_graph().control_dependencies(deps)


def device(name_or_function):
    """Constrain the ops built inside to a device: ``with device("GPU:0"): ...``.

    Takes TF 1.x's names (``"/job:ps/task:0"``, ``"/job:worker/task:1/CPU:0"``, ...; see
    ``trainer.devices``) or a function of the op returning one (as ``replica_device_setter``
    does). Nested scopes merge: the innermost applies first, and each outer name fills in the
    parts the inner ones left unspecified; a function receives the op with the device set so far
    and its result replaces it. ``device(None)`` (or ``""``) ignores the scopes outside it.
    """
    return get_default_graph().device(name_or_function)


def _merged_device_scopes(scopes) -> DeviceSpec:
    spec = DeviceSpec()
    for entry in reversed(scopes):
        if entry is None:
            break
        spec = spec.merged_over(entry)
    return spec


def _apply_device_scopes(scopes, node) -> str:
    """The device of ``node`` under ``scopes`` (outermost first) when some scope is a function."""
    spec = DeviceSpec()
    for entry in reversed(scopes):
        if entry is None:
            break
        if callable(entry):
            node.device = str(spec)
            result = entry(node)
            spec = result if isinstance(result, DeviceSpec) else DeviceSpec.parse(result or "")
        else:
            spec = spec.merged_over(entry)
    return str(spec)
