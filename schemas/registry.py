"""The op registry: every op is declared once, here, with its signature and shape rule.

An op schema names the op's inputs, outputs and typed attributes (with defaults) and carries a
shape/dtype inference rule. Graph building (trainer), serialization (exporter) and validation
(edge_runtime) all read the same declaration; kernels and gradient rules hang off it by name.

Declaring an op::

    @op("Relu", inputs=["X"], outputs=["Y"], differentiable=True)
    def _relu(ctx):
        return [ctx.input(0)]

Input and output names use a small notation: ``"B?"`` is optional, ``"inputs*"`` is variadic
(only the last one may be).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from schemas.op_table import registering_module

__all__ = [
    "Attr",
    "InferenceContext",
    "OpSchema",
    "Param",
    "REQUIRED",
    "ShapeError",
    "TensorType",
    "UnsupportedOpError",
    "all_schemas",
    "get_schema",
    "has_schema",
    "infer_types",
    "op",
]

ATTR_TYPES = ("int", "float", "string", "ints", "floats", "strings", "tensor", "graph")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class ShapeError(ValueError):
    """Inputs whose shapes or dtypes an op cannot accept; names the op and what is wrong."""


class UnsupportedOpError(ValueError):
    """An op (or an op version or attribute value) flowstack has no implementation for."""


@dataclass(frozen=True)
class Attr:
    """A typed attribute. ``default=None`` means optional and absent; ``REQUIRED`` must be given."""

    type: str
    default: Any = None

    def __post_init__(self) -> None:
        if self.type not in ATTR_TYPES:
            raise ValueError(f"unknown attribute type {self.type!r}; expected one of {ATTR_TYPES}")


@dataclass(frozen=True)
class Param:
    name: str
    optional: bool = False
    variadic: bool = False

    @classmethod
    def parse(cls, spec: str) -> "Param":
        if spec.endswith("*"):
            return cls(spec[:-1], optional=True, variadic=True)
        if spec.endswith("+"):
            return cls(spec[:-1], optional=False, variadic=True)
        if spec.endswith("?"):
            return cls(spec[:-1], optional=True)
        return cls(spec)


@dataclass(frozen=True)
class TensorType:
    """What is known about a tensor before running: dtype (None if unknown) and shape.

    ``shape`` is None when even the rank is unknown; a dim is None when its size is unknown.
    """

    dtype: np.dtype | None
    shape: tuple[int | None, ...] | None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


UNKNOWN = TensorType(None, None)

ShapeRule = Callable[["InferenceContext"], Sequence[TensorType]]


@dataclass(frozen=True)
class OpSchema:
    name: str
    domain: str
    inputs: tuple[Param, ...]
    outputs: tuple[Param, ...]
    attrs: Mapping[str, Attr]
    infer: ShapeRule
    differentiable: bool = False
    stateful: bool = False
    doc: str = ""
    # An int attribute that, when given, must equal the node's output count (Split's num_outputs).
    # Checked before shape inference and kernels, which make one entry per counted output.
    output_count_attr: str | None = None
    # The module that declared the op: schemas/ops/<family>.py (see schemas/op_table.py).
    module: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.domain, self.name)

    @property
    def min_inputs(self) -> int:
        return sum(1 for p in self.inputs if not p.optional)

    @property
    def max_inputs(self) -> int | None:
        if self.inputs and self.inputs[-1].variadic:
            return None
        return len(self.inputs)

    @property
    def max_outputs(self) -> int | None:
        if self.outputs and self.outputs[-1].variadic:
            return None
        return len(self.outputs)

    def resolve_attrs(self, given: Mapping[str, Any], where: str = "") -> dict[str, Any]:
        """Merge given attribute values with the declared defaults; reject unknown or missing ones."""
        unknown = set(given) - set(self.attrs)
        if unknown:
            raise UnsupportedOpError(
                f"{where}{self.name}: unknown attribute(s) {sorted(unknown)}; "
                f"declared: {sorted(self.attrs)}"
            )
        resolved = {}
        for name, attr in self.attrs.items():
            if name in given:
                resolved[name] = given[name]
            elif attr.default is REQUIRED:
                raise UnsupportedOpError(f"{where}{self.name}: required attribute {name!r} is missing")
            else:
                resolved[name] = attr.default
        return resolved

    def check_attr_types(self, given: Mapping[str, Any], where: str = "") -> None:
        """Reject a given attribute whose value is not of its declared type (a string where an int
        belongs, a graph for a list): kernels trust their attributes."""
        for name, value in given.items():
            attr = self.attrs.get(name)
            if attr is not None and value is not None and not _ATTR_VALUE_CHECKS[attr.type](value):
                raise ShapeError(f"{where}{self.name}: attribute {name!r} must be {attr.type}, got {_describe(value)}")

    def check_given(self, given: Sequence[bool], where: str = "") -> None:
        """Reject an omitted input (``""`` in ONNX, -1 in .flow) where the op requires one."""
        for i, present in enumerate(given):
            param = self.inputs[min(i, len(self.inputs) - 1)] if self.inputs else None
            if not present and param is not None and not (param.optional or param.variadic):
                raise ShapeError(f"{where}{self.name}: input {i} ({param.name!r}) is required but omitted")

    def check_arity(self, n_inputs: int, n_outputs: int, where: str = "") -> None:
        hi = self.max_inputs
        if n_inputs < self.min_inputs or (hi is not None and n_inputs > hi):
            expected = f"{self.min_inputs}..{'any' if hi is None else hi}"
            raise ShapeError(f"{where}{self.name}: takes {expected} inputs, got {n_inputs}")
        ho = self.max_outputs
        if n_outputs < 1 or (ho is not None and n_outputs > ho):
            raise ShapeError(
                f"{where}{self.name}: produces 1..{'any' if ho is None else ho} outputs, got {n_outputs}"
            )

    def output_count_mismatch(self, given: Mapping[str, Any], n_outputs: int) -> str | None:
        """Why a count attribute disagrees with the node's outputs, or None when it agrees: a kernel
        trusting ``num_outputs=10**9`` on a one-output node would allocate and loop for minutes."""
        count = given.get(self.output_count_attr) if self.output_count_attr else None
        if count is None or count == n_outputs:
            return None
        return f"{self.output_count_attr} is {count} but the node has {n_outputs} outputs"

    def check_output_count(self, given: Mapping[str, Any], n_outputs: int, where: str = "") -> None:
        problem = self.output_count_mismatch(given, n_outputs)
        if problem:
            raise ShapeError(f"{where}{self.name}: {problem}")


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating))


def _is_list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (list, tuple)) and all(check(x) for x in v)


def _is_graph(v: Any) -> bool:
    # Each reader has its own graph type (an IR graph, a subgraph reference); none is a plain value.
    return not isinstance(v, (int, float, str, bytes, list, tuple, np.ndarray, np.generic))


# Whether a given value fits a declared attribute type. Ints are valid floats, and an empty list is
# valid for every list type: formats that store them cannot tell those apart.
_ATTR_VALUE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "float": _is_number,
    "string": lambda v: isinstance(v, str),
    "ints": _is_list_of(_is_int),
    "floats": _is_list_of(_is_number),
    "strings": _is_list_of(lambda v: isinstance(v, str)),
    "tensor": lambda v: isinstance(v, np.ndarray),
    "graph": _is_graph,
}


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"a list ({value[:4]!r}{'...' if len(value) > 4 else ''})"
    if isinstance(value, np.ndarray):
        return f"a tensor of shape {list(value.shape)}"
    if _is_graph(value):
        return "a graph"
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


@dataclass
class InferenceContext:
    """What a shape rule sees: input types, known constant input values and resolved attrs."""

    schema: OpSchema
    input_types: Sequence[TensorType | None]
    attrs: Mapping[str, Any]
    input_values: Sequence[np.ndarray | None] = ()
    num_outputs: int = 1
    name: str = ""
    # input index -> its integer elements as far as the graph builder knows them (None where not)
    partial_values: Callable[[int], list[int | None] | None] | None = None

    def input(self, i: int) -> TensorType:
        if i >= len(self.input_types) or self.input_types[i] is None:
            return UNKNOWN
        return self.input_types[i]

    def has_input(self, i: int) -> bool:
        return i < len(self.input_types) and self.input_types[i] is not None

    def value(self, i: int) -> np.ndarray | None:
        """The constant value of input ``i`` if known at build time, else None."""
        if i < len(self.input_values):
            return self.input_values[i]
        return None

    def known_ints(self, i: int) -> list[int | None] | None:
        """Input ``i``'s integer elements as far as known at build time: a constant's all, else what
        the graph builder can tell of a vector built from pieces (``[tf.shape(x)[0], 32]`` is
        ``[None, 32]``), else None."""
        value = self.value(i)
        if value is not None:
            return [int(v) for v in np.asarray(value).reshape(-1)]
        return None if self.partial_values is None else self.partial_values(i)

    @property
    def num_inputs(self) -> int:
        return len(self.input_types)

    def fail(self, message: str) -> ShapeError:
        node = f" (node {self.name!r})" if self.name else ""
        return ShapeError(f"{self.schema.name}{node}: {message}")


_SCHEMAS: dict[tuple[str, str], OpSchema] = {}


def op(
    name: str,
    *,
    inputs: Sequence[str],
    outputs: Sequence[str],
    attrs: Mapping[str, Attr] | None = None,
    domain: str = "",
    differentiable: bool = False,
    stateful: bool = False,
    doc: str = "",
    output_count_attr: str | None = None,
) -> Callable[[ShapeRule], ShapeRule]:
    """Declare an op; the decorated function is its shape/dtype inference rule."""

    module = registering_module()

    def register(rule: ShapeRule) -> ShapeRule:
        key = (domain, name)
        if key in _SCHEMAS:
            raise ValueError(f"op {domain + '::' if domain else ''}{name} declared twice")
        params_in = tuple(Param.parse(s) for s in inputs)
        params_out = tuple(Param.parse(s) for s in outputs)
        for params in (params_in, params_out):
            if any(p.variadic for p in params[:-1]):
                raise ValueError(f"{name}: only the last input/output may be variadic")
        _SCHEMAS[key] = OpSchema(
            name=name,
            domain=domain,
            inputs=params_in,
            outputs=params_out,
            attrs=dict(attrs or {}),
            infer=rule,
            differentiable=differentiable,
            stateful=stateful,
            doc=doc or (rule.__doc__ or ""),
            output_count_attr=output_count_attr,
            module=module,
        )
        return rule

    return register


def qualified_name(name: str, domain: str = "") -> str:
    """How messages name an op: ``domain::Name``, or just ``Name`` in the default ONNX domain."""
    return f"{domain}::{name}" if domain else name


def get_schema(name: str, domain: str = "") -> OpSchema:
    _load_families()
    try:
        return _SCHEMAS[(domain, name)]
    except KeyError:
        raise UnsupportedOpError(f"op {qualified_name(name, domain)!r} is not in the flowstack op registry") from None


def has_schema(name: str, domain: str = "") -> bool:
    _load_families()
    return (domain, name) in _SCHEMAS


def all_schemas() -> Iterator[OpSchema]:
    _load_families()
    return iter(sorted(_SCHEMAS.values(), key=lambda s: (s.domain, s.name)))


def infer_types(
    schema: OpSchema,
    input_types: Sequence[TensorType | None],
    attrs: Mapping[str, Any],
    *,
    input_values: Sequence[np.ndarray | None] = (),
    num_outputs: int = 1,
    name: str = "",
    partial_values: Callable[[int], list[int | None] | None] | None = None,
) -> list[TensorType]:
    """Run an op's shape rule; pads the result to ``num_outputs`` with unknown types."""
    ctx = InferenceContext(schema, list(input_types), attrs, list(input_values), num_outputs, name, partial_values)
    result = list(schema.infer(ctx))
    while len(result) < num_outputs:
        result.append(UNKNOWN)
    return result[:num_outputs]


_loaded = False


def _load_families() -> None:
    # The op families register themselves on import; importing them lazily keeps
    # `import schemas.registry` cheap and free of import cycles.
    global _loaded
    if not _loaded:
        _loaded = True
        import schemas.ops  # noqa: F401
