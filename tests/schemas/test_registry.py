"""Walks the op registry: every op has a kernel, a shape rule, and a conformance case."""

from __future__ import annotations

from functools import lru_cache

import pytest

import trainer  # noqa: F401  (registers the trainer's kernels for its own ops)
from edge_runtime.kernels import has_kernel, kernel, registered_kernels
from schemas import all_schemas, get_schema
from schemas.registry import OpSchema, UnsupportedOpError
from trainer.kernels.registry import has_stateful_kernel, stateful_kernel

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
def test_op_has_kernel(schema: OpSchema) -> None:
    if schema.stateful:  # variables, queues, save/restore: the trainer's stateful kernels run them
        assert has_stateful_kernel(schema.name, schema.domain), f"{_id(schema)} is stateful but has no stateful kernel"
        assert not has_kernel(schema.name, schema.domain), f"{_id(schema)} is stateful but has a pure kernel"
    else:
        assert has_kernel(schema.name, schema.domain), f"{_id(schema)} is declared but has no kernel"


@pytest.mark.parametrize("schema", [s for s in SCHEMAS if s.domain == ""], ids=_id)
def test_onnx_op_has_conformance_case(schema: OpSchema) -> None:
    assert schema.name in onnx_case_ops() or schema.name in OWN_CASES, (
        f"{schema.name} has no ONNX node test case; add one to OWN_CASES with the test that covers it"
    )


@pytest.mark.parametrize("register", [kernel, stateful_kernel], ids=["kernel", "stateful_kernel"])
def test_a_kernel_for_an_undeclared_op_is_refused(register) -> None:
    with pytest.raises(UnsupportedOpError, match="NoSuchOp"):
        register("NoSuchOp")(lambda *inputs, xp: inputs)
    assert ("", "NoSuchOp") not in registered_kernels()


@pytest.mark.parametrize("register", [kernel, stateful_kernel], ids=["kernel", "stateful_kernel"])
def test_a_second_kernel_for_an_op_is_refused(register) -> None:
    name, domain = ("Relu", "") if register is kernel else ("Variable", "flowstack")
    with pytest.raises(ValueError, match=f"kernel for {name} registered twice"):
        register(name, domain)(lambda *inputs, xp: inputs)


def test_unknown_op_is_reported_by_name() -> None:
    with pytest.raises(UnsupportedOpError, match="NoSuchOp"):
        get_schema("NoSuchOp")
