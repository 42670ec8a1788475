"""Developer tool: run ONNX backend node cases for some ops straight through the kernels.

    python scripts/dev_node_cases.py Conv MaxPool

Calls kernels directly on the cases' inputs (no .flow round trip), so a kernel can be checked
before the importer knows about it. The real conformance run is tests/conformance/.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.backend.test.case.node import collect_testcases

from edge_runtime.kernels import get_kernel, wants_output_count
from schemas import get_schema


def attr_value(attr: onnx.AttributeProto, outer: dict):
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, onnx.GraphProto):
        return lambda *args, g=value: run_graph(g, dict(outer), args)
    return value


def run_graph(graph: onnx.GraphProto, env: dict, args=()):
    for init in graph.initializer:
        env[init.name] = numpy_helper.to_array(init)
    for vi, a in zip(graph.input, args):
        env[vi.name] = a
    for node in graph.node:
        schema = get_schema(node.op_type, node.domain if node.domain != "ai.onnx" else "")
        attrs = schema.resolve_attrs({a.name: attr_value(a, env) for a in node.attribute})
        n_declared = len(schema.inputs)
        ins = [env[n] if n else None for n in node.input]
        if not (schema.inputs and schema.inputs[-1].variadic):
            ins += [None] * (n_declared - len(ins))
        if wants_output_count(node.op_type, schema.domain):
            attrs["n_outputs"] = len(node.output)
        out = get_kernel(node.op_type, schema.domain)(*ins, xp=np, **attrs)
        out = out if isinstance(out, tuple) else (out,)
        for name, value in zip(node.output, out):
            if name:
                env[name] = value
    return [env[o.name] for o in graph.output]


def main(ops: list[str]) -> None:
    warnings.simplefilter("ignore")
    passed = failed = 0
    for case in collect_testcases(None):
        if not {n.op_type for n in case.model.graph.node} <= set(ops):
            continue
        for inputs, expected in case.data_sets:
            try:
                feeds = dict(zip([i.name for i in case.model.graph.input], inputs))
                got = run_graph(case.model.graph, feeds)
                for g, e in zip(got, expected):
                    if isinstance(e, np.ndarray):
                        np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol)
                        assert np.asarray(g).dtype == e.dtype, f"dtype {np.asarray(g).dtype} != {e.dtype}"
                passed += 1
            except Exception as exc:  # report and go on: this is a survey tool
                failed += 1
                print(f"FAIL {case.name}: {type(exc).__name__}: {str(exc)[:300]}")
    print(f"{passed} passed, {failed} failed")


if __name__ == "__main__":
    main(sys.argv[1:])
