"""Shape rules against the ONNX node cases: every one-node case of an op we run, every family.

A graph builder knows the constant inputs of a node (shapes, axes, pads, scalars such as a Range's
bounds), so the rule gets the values of 0-D inputs and of 1-D integer inputs; it must then infer
the dtype exactly and every dim it claims to know. A second pass gives no values at all: the rule
must still not claim a wrong dtype or dim.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402
from onnx.backend.test.case.node import collect_testcases  # noqa: E402

from edge_runtime.kernels import get_kernel, has_kernel  # noqa: E402
from schemas import dtypes, get_schema  # noqa: E402
from schemas.registry import ShapeError, TensorType, UnsupportedOpError, infer_types  # noqa: E402

# Cases whose rule is known to be wrong, each with why; reviewed like code. Every entry names an op
# of another family: fix the rule and delete the line.
XFAIL: dict[str, str] = {
    "test_if": "control: If's rule returns UNKNOWN outputs (it cannot see its branches' output types)",
    "test_scan9_multi_state": "control: Scan's rule leaves state outputs' dtype unknown (initial states give it)",
    "test_scan9_scalar": "control: Scan's rule leaves state outputs' dtype unknown (initial states give it)",
    "test_scan9_sum": "control: Scan's rule leaves state outputs' dtype unknown (initial states give it)",
    "test_scan_sum": "control: Scan-8 (batch axis, sequence_lens input) is inferred with Scan-9 rules: "
    "scan output (1, 2) instead of (1, 3, 2); dtypes unknown",
    "test_sequence_insert_at_front": "control: SequenceInsert rejects a 1-D position of one element, (1,)",
}


@lru_cache(maxsize=1)
def single_node_cases() -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    found = {}
    for case in cases:
        nodes = case.model.graph.node
        if len(nodes) == 1 and has_kernel(nodes[0].op_type, _domain(nodes[0])):
            found[case.name] = case
    return found


def _domain(node) -> str:
    return "" if node.domain in ("", "ai.onnx") else node.domain


def _attr_value(attr):
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, onnx.GraphProto):
        return lambda *args, graph=value: _run_graph(graph, list(args))
    return value


def _run_node(node, inputs: list):
    schema = get_schema(node.op_type, _domain(node))
    attrs = schema.resolve_attrs({a.name: _attr_value(a) for a in node.attribute})
    if not (schema.inputs and schema.inputs[-1].variadic):
        inputs = inputs + [None] * (len(schema.inputs) - len(inputs))
    out = get_kernel(node.op_type, schema.domain)(*inputs, xp=np, **attrs)
    return out if isinstance(out, tuple) else (out,)


def _run_graph(graph, args: list) -> list:
    """Runs a subgraph (an If branch, a Loop body) through the kernels, for graph attributes."""
    env = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    env.update(zip([i.name for i in graph.input], args))
    for node in graph.node:
        outs = _run_node(node, [env.get(n) if n else None for n in node.input])
        env.update((n, v) for n, v in zip(node.output, outs) if n)
    return [env[o.name] for o in graph.output]


def _type_of(value) -> TensorType:
    if isinstance(value, (np.ndarray, np.generic)):
        return TensorType(_canonical(value.dtype), tuple(value.shape))
    if isinstance(value, list):  # a sequence: element dtype, no single shape
        dtypes = {_canonical(np.asarray(v).dtype) for v in value}
        return TensorType(dtypes.pop() if len(dtypes) == 1 else None, None)
    return TensorType(None, None)


def _as_arrays(values: list) -> list:
    """ONNX stores values of some element types as TensorProtos; convert those NumPy can hold."""
    converted = []
    for value in values:
        if isinstance(value, onnx.TensorProto):
            if not dtypes.is_known(value.data_type):
                name = onnx.TensorProto.DataType.Name(value.data_type)
                pytest.skip(f"element type {name} has no NumPy equivalent")
            value = numpy_helper.to_array(value)
        converted.append(value)
    return converted


def _canonical(dtype: np.dtype) -> np.dtype:
    return np.dtype(object) if dtype.kind in "OUS" else dtype


def _known_value(value) -> np.ndarray | None:
    if not isinstance(value, (np.ndarray, np.generic)):
        return None
    value = np.asarray(value)
    if value.ndim == 0 or (value.ndim == 1 and value.dtype.kind in "iub"):
        return value
    return None


def _check(name: str, with_values: bool) -> None:
    case = single_node_cases()[name]
    node = case.model.graph.node[0]
    schema = get_schema(node.op_type, _domain(node))
    inputs, expected = (_as_arrays(values) for values in case.data_sets[0])
    feeds = dict(zip([i.name for i in case.model.graph.input], inputs))
    node_inputs = [feeds.get(n) if n else None for n in node.input]
    types = [_type_of(v) if n else None for n, v in zip(node.input, node_inputs)]
    values = [_known_value(v) if with_values else None for v in node_inputs]
    try:
        attrs = schema.resolve_attrs({a.name: _attr_value(a) for a in node.attribute})
        inferred = infer_types(schema, types, attrs, input_values=values, num_outputs=len(node.output),
                               name=name)
        _compare(inferred, node, dict(zip([o.name for o in case.model.graph.output], expected)), with_values)
    except UnsupportedOpError as exc:
        pytest.skip(f"unsupported: {exc}")
    except (AssertionError, ShapeError):
        _skip_if_kernel_unsupported(node, node_inputs)
        raise


def _compare(inferred: list[TensorType], node, expected_by_name: dict, with_values: bool) -> None:
    for i, out_name in enumerate(node.output):
        want = expected_by_name.get(out_name)
        if not isinstance(want, np.ndarray):
            continue  # omitted output, or a sequence / optional value
        got = inferred[i]
        if with_values or got.dtype is not None:
            assert got.dtype == _canonical(want.dtype), f"output {i}: dtype {got.dtype} != {want.dtype}"
        if got.shape is not None:
            assert len(got.shape) == want.ndim, f"output {i}: shape {got.shape} != {want.shape}"
            for d, w in zip(got.shape, want.shape):
                assert d is None or d == w, f"output {i}: shape {got.shape} != {want.shape}"


def _skip_if_kernel_unsupported(node, inputs: list) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _run_node(node, inputs)
    except UnsupportedOpError as exc:
        pytest.skip(f"kernel unsupported: {exc}")
    except Exception:  # noqa: BLE001 - a kernel bug is not this test's finding
        pass


def _params():
    return [pytest.param(n, marks=pytest.mark.xfail(reason=XFAIL[n], strict=False)) if n in XFAIL else n
            for n in sorted(single_node_cases())]


@pytest.mark.parametrize("name", _params())
def test_rule_matches_case_with_constant_inputs(name: str) -> None:
    _check(name, with_values=True)


@pytest.mark.parametrize("name", _params())
def test_rule_never_guesses_wrong_without_values(name: str) -> None:
    _check(name, with_values=False)


@pytest.mark.parametrize(
    ("data", "target", "want"),
    [
        ((None, 128, 14, 14), [0, 128, -1], (None, 128, 196)),  # x.flatten(2) with an unknown batch
        ((None, 196, 4, 16), [0, 196, -1], (None, 196, 64)),
        ((None, 128, None, 14), [0, 128, -1], (None, 128, None)),  # an unknown dim not copied: unknown
        ((None, 6), [-1, 3], (None, 3)),  # no 0 copies the unknown batch: unknown
    ],
)
def test_reshape_minus_one_is_known_when_the_unknown_dims_are_copied(data, target, want) -> None:
    (out,) = infer_types(get_schema("Reshape"), [TensorType(np.dtype(np.float32), data),
                                                 TensorType(np.dtype(np.int64), (len(target),))],
                         {"allowzero": 0}, input_values=[None, np.array(target, np.int64)])
    assert out.shape == want
