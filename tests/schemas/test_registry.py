"""Walks the op registry: every op has a kernel, a shape rule, and a conformance case."""

from __future__ import annotations

from functools import lru_cache

import pytest

import trainer  # noqa: F401  (registers the trainer's kernels for its own ops)
from edge_runtime.kernels import has_kernel, registered_kernels
from schemas import all_schemas, get_schema
from schemas.registry import OpSchema, UnsupportedOpError

# Ops that the ONNX node suite has no case for, each with the test in our suite that covers it.
OWN_CASES = {
    "Upsample": "tests/conformance (PyTorchConverted upsample cases) and tests/edge_runtime/test_kernels_nn.py",
    "GlobalLpPool": "tests/edge_runtime/test_kernels_nn.py::test_global_lp_pool",
    "ConcatFromSequence": "tests/edge_runtime/test_kernels_control.py and the Simple sequence model cases",
    "Optional": "tests/edge_runtime/test_kernels_control.py",
    "SequenceAt": "tests/edge_runtime/test_kernels_control.py and the Simple sequence model cases",
    "SequenceConstruct": "tests/edge_runtime/test_kernels_control.py and the Simple sequence model cases",
    "SequenceErase": "tests/edge_runtime/test_kernels_control.py and the Simple sequence model cases",
}


@lru_cache(maxsize=1)
def onnx_case_ops() -> frozenset[str]:
    from onnx.backend.test.case.node import collect_testcases

    return frozenset(n.op_type for case in collect_testcases(None) for n in case.model.graph.node)


SCHEMAS = list(all_schemas())


def _id(schema: OpSchema) -> str:
    return f"{schema.domain}::{schema.name}" if schema.domain else schema.name


@pytest.mark.parametrize("schema", SCHEMAS, ids=_id)
def test_op_has_kernel_and_shape_rule(schema: OpSchema) -> None:
    assert callable(schema.infer), f"{schema.name} has no shape rule"
    if schema.stateful:
        return  # variables, queues, save/restore: run by the trainer's executor, not an edge kernel
    assert has_kernel(schema.name, schema.domain), f"{_id(schema)} is declared but has no kernel"


@pytest.mark.parametrize("schema", [s for s in SCHEMAS if s.domain == ""], ids=_id)
def test_onnx_op_has_conformance_case(schema: OpSchema) -> None:
    assert schema.name in onnx_case_ops() or schema.name in OWN_CASES, (
        f"{schema.name} has no ONNX node test case; add one to OWN_CASES with the test that covers it"
    )


def test_every_kernel_has_a_schema() -> None:
    for domain, name in registered_kernels():
        assert get_schema(name, domain).name == name


def test_unknown_op_is_reported_by_name() -> None:
    with pytest.raises(UnsupportedOpError, match="NoSuchOp"):
        get_schema("NoSuchOp")
