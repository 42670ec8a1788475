"""benchmarks.ops_vs_onnxruntime: every node case builds, converts and agrees with onnxruntime
(as it must before it is timed), and the table reports failures, then each node worst first."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import ops_vs_onnxruntime as sweep
from benchmarks.edge_vs_onnxruntime import agree, flow_bytes, ort_session
from edge_runtime import load


@pytest.mark.parametrize("case", sweep.CASES, ids=lambda c: f"{c.op} {c.label}")
def test_every_case_converts_and_agrees_with_onnxruntime(case) -> None:
    """What bench_onnx checks before it times a node, on small shapes."""
    model, feeds = case.build(0.25, np.random.default_rng(0))
    got = load(flow_bytes(model)).run(feeds)
    names = [o.name for o in model.graph.output]
    agree(case.label, "edge runtime", [got[n] for n in names], ort_session(model.SerializeToString()).run(names, feeds))


@pytest.mark.slow
def test_the_table_puts_the_worst_node_first_and_names_failures() -> None:
    rows = [sweep.run_case(case, 0.25, 0.02) for case in sweep.CASES if case.op in ("HardSwish", "ArgMax")]
    broken = sweep.Row("Broken node", "Broken", error="UnsupportedOpError: no kernel")
    lines = sweep.render(rows + [broken]).splitlines()
    assert lines[2].startswith("| Broken node | Broken | UnsupportedOpError: no kernel |")  # failures first
    ratios = [float(line.split("|")[5]) for line in lines[3:3 + len(rows)]]
    assert ratios == sorted(ratios, reverse=True)


def test_unknown_ops_are_refused() -> None:
    with pytest.raises(SystemExit):
        sweep.main(["--ops", "NoSuchOp"])


def test_cases_scale_their_spatial_sizes() -> None:
    case = next(c for c in sweep.CASES if c.op == "Resize")
    _, full = case.build(1.0, np.random.default_rng(0))
    _, small = case.build(0.25, np.random.default_rng(0))
    assert full["x"].shape[:2] == small["x"].shape[:2] and full["x"].size > small["x"].size
