"""Scan from opset 8 (batched on axis 0, optional per-example sequence_lens), which the importer
rewrites as a Loop over the batch running Scan-9 on each example: against a NumPy definition of
the opset-8 semantics, and a malformed node named at import."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import edge_runtime
from exporter.onnx_import import onnx_to_flow_bytes
from schemas import UnsupportedOpError

F32 = TensorProto.FLOAT
RNG = np.random.default_rng(8)


def _body():
    """(total, last) state; (x, y) slices -> total + x, y; scan outputs total + x and 2 * y."""
    nodes = [helper.make_node("Add", ["total", "x"], ["total_out"]),
             helper.make_node("Identity", ["y"], ["last_out"]),
             helper.make_node("Identity", ["total_out"], ["running"]),
             helper.make_node("Add", ["y", "y"], ["doubled"])]
    values = [helper.make_tensor_value_info(n, F32, [2]) for n in ("total", "last", "x", "y")]
    outs = [helper.make_tensor_value_info(n, F32, [2]) for n in ("total_out", "last_out", "running", "doubled")]
    return helper.make_graph(nodes, "body", values, outs)


def _model(with_lengths: bool, directions=(0, 1), num_scan_inputs: int = 2):
    node = helper.make_node("Scan", ["lengths" if with_lengths else "", "total0", "last0", "xs", "ys"],
                            ["total", "last", "running", "doubled"], name="scan8", body=_body(),
                            num_scan_inputs=num_scan_inputs, directions=list(directions))
    inputs = [helper.make_tensor_value_info("total0", F32, [3, 2]), helper.make_tensor_value_info("last0", F32, [3, 2]),
              helper.make_tensor_value_info("xs", F32, [3, 5, 2]), helper.make_tensor_value_info("ys", F32, [3, 5, 2])]
    if with_lengths:
        inputs.insert(0, helper.make_tensor_value_info("lengths", TensorProto.INT64, [3]))
    outputs = [helper.make_tensor_value_info(n, F32, None) for n in ("total", "last", "running", "doubled")]
    graph = helper.make_graph([node], "scan8", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])


def _by_definition(total0, last0, xs, ys, lengths, directions):
    """Scan-8: each example scans its first ``length`` steps (reversed inputs from their last valid
    step); scan outputs zero-padded to the longest. onnxruntime's Scan-8 gives exactly these."""
    finals, lasts, runnings, doubles = [], [], [], []
    for b, length in enumerate(lengths):
        total, last = total0[b].copy(), last0[b].copy()
        x, y = xs[b, :length], ys[b, :length]
        x, y = (x[::-1] if directions[0] else x), (y[::-1] if directions[1] else y)
        running, doubled = np.zeros_like(xs[b]), np.zeros_like(ys[b])
        for t in range(length):
            total, last = total + x[t], y[t]
            running[t], doubled[t] = total, 2 * y[t]
        finals.append(total), lasts.append(last), runnings.append(running), doubles.append(doubled)
    return [np.stack(v) for v in (finals, lasts, runnings, doubles)]


@pytest.mark.parametrize("with_lengths, directions", [(False, (0, 0)), (False, (1, 0)), (True, (0, 1)), (True, (1, 1))])
def test_batched_scan_matches_the_opset_8_semantics(with_lengths, directions) -> None:
    feeds = {"total0": RNG.standard_normal((3, 2)).astype(np.float32),
             "last0": RNG.standard_normal((3, 2)).astype(np.float32),
             "xs": RNG.standard_normal((3, 5, 2)).astype(np.float32),
             "ys": RNG.standard_normal((3, 5, 2)).astype(np.float32)}
    lengths = [5, 2, 4] if with_lengths else [5, 5, 5]
    if with_lengths:
        feeds["lengths"] = np.array(lengths, np.int64)
    out = edge_runtime.load(onnx_to_flow_bytes(_model(with_lengths, directions))).run(feeds)
    want = _by_definition(feeds["total0"], feeds["last0"], feeds["xs"], feeds["ys"], lengths, directions)
    for name, w in zip(("total", "last", "running", "doubled"), want):
        np.testing.assert_allclose(out[name], w, rtol=1e-6, err_msg=name)


def test_a_scan_input_count_beyond_the_inputs_is_named() -> None:
    with pytest.raises(UnsupportedOpError, match=r"node 'scan8' \(Scan, opset 8\): num_scan_inputs is 5, but it must "
                                                 r"count 1 to 4 of its 4 state and scan inputs"):
        onnx_to_flow_bytes(_model(False, num_scan_inputs=5))
