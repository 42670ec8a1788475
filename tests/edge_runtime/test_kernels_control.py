"""Control flow, sequence and optional kernels, called directly with Python callables as bodies
(the contract the runtime gives graph attributes), plus their shape rules."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels.control import EMPTY_OPTIONAL
from schemas import ShapeError, get_schema
from schemas.registry import UNKNOWN, TensorType, infer_types
from tests.edge_runtime.kernel_calls import run_kernel as call

F32 = np.dtype(np.float32)


def infer(op, types, n_out=1, values=(), **attrs):
    schema = get_schema(op)
    return infer_types(schema, types, schema.resolve_attrs(attrs), input_values=values, num_outputs=n_out)


# --- If ---------------------------------------------------------------------------------------


def test_if_runs_only_the_chosen_branch():
    ran = []
    then = lambda: ran.append("then") or [np.float32(1), np.arange(3)]  # noqa: E731
    other = lambda: ran.append("else") or [np.float32(2), np.arange(4)]  # noqa: E731
    out = call("If", np.array(True), then_branch=then, else_branch=other, n_outputs=2)
    assert ran == ["then"] and out[0] == 1 and len(out[1]) == 3
    out = call("If", np.array([False]), then_branch=then, else_branch=other, n_outputs=2)
    assert ran == ["then", "else"] and out[0] == 2


def test_if_rule_checks_the_condition():
    assert infer("If", [TensorType(np.dtype(bool), ())], n_out=2, then_branch=1, else_branch=2) == [UNKNOWN] * 2
    with pytest.raises(ShapeError, match="bool"):
        infer("If", [TensorType(F32, ())], then_branch=1, else_branch=2)


# --- Loop -------------------------------------------------------------------------------------


def counting_body(log):
    def body(i, cond, total):
        log.append((i.dtype, bool(cond)))
        return [total + i < 10, total + i, (total * 2).astype(np.float32)]

    return body


def test_loop_with_trip_count_and_condition_stacks_scan_outputs():
    log = []
    trip, cond, start = np.array(10, np.int64), np.array(True), np.array(0, np.int64)
    total, scanned = call("Loop", trip, cond, start, body=counting_body(log))
    # totals 0, 0+0, 0+1, 1+2, 3+3, 6+4 -> stops after total 10 makes the condition false
    assert int(total) == 10
    np.testing.assert_array_equal(scanned, np.array([0, 0, 2, 6, 12], np.float32))
    assert scanned.dtype == np.float32 and len(log) == 5
    assert all(dtype == np.int64 for dtype, _ in log)


def test_loop_without_condition_ignores_the_body_condition():
    (total, scanned) = call("Loop", np.array(3, np.int64), None, np.array(0, np.int64), body=counting_body([]))
    assert int(total) == 0 + 0 + 1 + 2 and scanned.shape == (3,)


def test_loop_without_trip_count_runs_while_the_condition_holds():
    body = lambda i, cond, x: [x * 2 < 100, x * 2]  # noqa: E731
    (x,) = call("Loop", None, np.array(True), np.array(3), body=body)
    assert int(x) == 192


def test_loop_with_zero_iterations_returns_initial_values_and_empty_scans():
    body = lambda i, cond, x: [cond, x + 1, x]  # noqa: E731
    out = call("Loop", np.array(0, np.int64), None, np.array([1.0, 2.0]), body=body)
    np.testing.assert_array_equal(out[0], [1.0, 2.0])
    assert out[1].shape == (0,)
    out = call("Loop", np.array(5, np.int64), np.array(False), np.array([1.0]), body=body)
    np.testing.assert_array_equal(out[0], [1.0])


def test_loop_carries_sequences():
    body = lambda i, cond, seq: [cond, call("SequenceInsert", seq, i, None)]  # noqa: E731
    (seq,) = call("Loop", np.array(3, np.int64), None, [], body=body)
    assert [int(v) for v in seq] == [0, 1, 2]


def test_loop_rule_keeps_carried_dtypes():
    types = [TensorType(np.dtype(np.int64), ()), None, TensorType(F32, (2, 3))]
    carried, scan = infer("Loop", types, n_out=2, body=1)
    assert carried == TensorType(F32, None) and scan == UNKNOWN
    with pytest.raises(ShapeError, match="int64"):
        infer("Loop", [TensorType(F32, ())], body=1)


# --- Scan -------------------------------------------------------------------------------------


def cumulative_body(state, x):
    new = state + x
    return [new, new.copy()]


def test_scan_sums_along_axis_zero():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    final, ys = call("Scan", np.zeros(2, np.float32), x, body=cumulative_body, num_scan_inputs=1)
    np.testing.assert_array_equal(final, x.sum(0))
    np.testing.assert_array_equal(ys, np.cumsum(x, axis=0))


def test_scan_axes_and_directions():
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)  # scanned along axis 1 (3 steps)
    final, ys = call(
        "Scan", np.zeros(2, np.float32), x[0].T.copy(), body=cumulative_body, num_scan_inputs=1,
        scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[-1], scan_output_directions=[1],
    )
    steps = x[0].T[:, ::-1].T  # (3, 2): rows in reverse order
    expected = np.cumsum(steps, axis=0)[::-1]  # reversed output direction
    np.testing.assert_array_equal(final, steps.sum(0))
    np.testing.assert_array_equal(ys, expected.T)  # output axis -1: steps last


def test_scan_with_two_states_and_inputs():
    def body(s, p, a, b):
        return [s + a, p * b, s + a + b]

    a = np.ones((4, 2), np.float32)
    b = np.full((4, 2), 2, np.float32)
    s, p, ys = call("Scan", np.zeros(2, np.float32), np.ones(2, np.float32), a, b, body=body, num_scan_inputs=2)
    np.testing.assert_array_equal(s, [4, 4])
    np.testing.assert_array_equal(p, [16, 16])
    np.testing.assert_array_equal(ys[:, 0], [3, 4, 5, 6])


def test_scan_rule():
    types = [TensorType(F32, (2,)), TensorType(F32, (3, 2))]
    assert infer("Scan", types, n_out=2, body=1, num_scan_inputs=1) == [TensorType(F32, (2,)), UNKNOWN]
    with pytest.raises(ShapeError, match="scan_input_axes"):
        infer("Scan", types, body=1, num_scan_inputs=1, scan_input_axes=[0, 1])


# --- sequences --------------------------------------------------------------------------------


def test_sequence_ops_build_new_lists():
    a, b, c = (np.full(2, v, np.float32) for v in (1, 2, 3))
    seq = call("SequenceConstruct", a, b)
    longer = call("SequenceInsert", seq, c, np.array(-1))
    assert len(seq) == 2, "SequenceInsert must not mutate its input"
    assert [float(t[0]) for t in longer] == [1, 3, 2]
    assert float(call("SequenceAt", longer, np.array(-1, np.int32))[0]) == 2
    shorter = call("SequenceErase", longer, np.array(0))
    assert [float(t[0]) for t in shorter] == [3, 2] and len(longer) == 3
    assert [float(t[0]) for t in call("SequenceErase", longer, None)] == [1, 3]
    length = call("SequenceLength", longer)
    assert length.dtype == np.int64 and length.shape == () and int(length) == 3
    assert call("SequenceEmpty") == []
    with pytest.raises(IndexError):
        call("SequenceAt", seq, np.array(2))


def test_split_to_sequence():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    parts = call("SplitToSequence", x, None, axis=1)
    assert len(parts) == 4 and parts[0].shape == (3, 1)
    parts = call("SplitToSequence", x, None, axis=1, keepdims=0)
    assert parts[0].shape == (3,)
    parts = call("SplitToSequence", x, np.array(3), axis=1)  # scalar: chunks of 3, the last shorter
    assert [p.shape[1] for p in parts] == [3, 1]
    parts = call("SplitToSequence", x, np.array([1, 2]), axis=0)
    assert [p.shape[0] for p in parts] == [1, 2]
    with pytest.raises(ValueError, match="add up"):
        call("SplitToSequence", x, np.array([1, 1]), axis=0)


def test_concat_from_sequence():
    seq = [np.ones((2, 3)), np.zeros((2, 3))]
    assert call("ConcatFromSequence", seq, axis=1).shape == (2, 6)
    assert call("ConcatFromSequence", seq, axis=-1, new_axis=1).shape == (2, 3, 2)
    assert call("ConcatFromSequence", seq, axis=0, new_axis=1).shape == (2, 2, 3)


def test_sequence_map_zips_sequences_and_shares_tensors():
    seq = [np.arange(2), np.arange(3)]
    other = [np.ones(2, np.int64), np.ones(3, np.int64)]
    shift = np.array(10)
    sums, shapes = call(
        "SequenceMap", seq, other, shift, body=lambda a, b, s: [a + b + s, np.array(a.shape, np.int64)]
    )
    assert [list(v) for v in sums] == [[11, 12], [11, 12, 13]]
    assert [list(v) for v in shapes] == [[2], [3]]
    (empty,) = call("SequenceMap", [], body=lambda a: [a])[:1]
    assert empty == []


def test_sequence_rules():
    seq = infer("SequenceConstruct", [TensorType(F32, (2,)), TensorType(F32, (3,))])[0]
    assert seq == TensorType(F32, None)
    assert infer("SequenceLength", [seq]) == [TensorType(np.dtype(np.int64), ())]
    assert infer("SequenceEmpty", [], dtype=7) == [TensorType(np.dtype(np.int64), None)]
    with pytest.raises(ShapeError, match="share one dtype"):
        infer("SequenceConstruct", [TensorType(F32, (2,)), TensorType(np.dtype(np.int64), (3,))])
    with pytest.raises(ShapeError, match="cannot insert"):
        infer("SequenceInsert", [seq, TensorType(np.dtype(np.int32), (2,))])


# --- optionals --------------------------------------------------------------------------------


def test_optional_values():
    x = np.arange(3)
    assert call("Optional", x) is x
    empty = call("Optional", None, type="tensor(float)")
    assert empty is EMPTY_OPTIONAL
    for value, has in ((x, True), ([x], True), ([], True), (EMPTY_OPTIONAL, False), (None, False)):
        result = call("OptionalHasElement", value)
        assert result.dtype == np.bool_ and result.shape == () and bool(result) is has
    assert call("OptionalGetElement", x) is x
    with pytest.raises(ValueError, match="empty optional"):
        call("OptionalGetElement", EMPTY_OPTIONAL)


def test_optional_rules():
    t = TensorType(F32, (4,))
    assert infer("Optional", [t]) == [t]
    assert infer("OptionalGetElement", [t]) == [t]
    assert infer("OptionalHasElement", [None]) == [TensorType(np.dtype(bool), ())]
