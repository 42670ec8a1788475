"""ShapeMemo: a graph's shape arithmetic kept per input shape, checked by every Shape node, and run
again in full where the shapes a graph reads depend on its data."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime import load
from edge_runtime.shape_memo import JUDGED_AFTER_RECORDS, MAX_FAILED_CHECKS, MAX_SPECIALIZATIONS
from exporter import flow_writer, ir
from schemas import dtypes


def int_constant(g: ir.Graph, name: str, values) -> str:
    g.values[name] = ir.Value(name, data=np.array(values, dtype=np.int64))
    return name


def reshape_by_shape_arithmetic() -> ir.Model:
    """y = x (B, 40) reshaped to (B, 5, 8) with the target computed as PyTorch exports it:
    Concat(Unsqueeze(Gather(Shape(x), 0)), [5], [8]), then doubled; also the ones of x's shape
    from ConstantOfShape: an output, and (but at batch 1) larger than a shape."""
    g = ir.Graph(name="reshape")
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (-1, 40))
    g.values["y"] = ir.Value("y", dtypes.FLOAT, (-1, 5, 8))
    g.values["ones"] = ir.Value("ones", dtypes.FLOAT, (-1, 40))
    g.inputs, g.outputs = ["x"], ["y", "ones"]
    g.values["one"] = ir.Value("one", data=np.array([1.0], np.float32))
    g.nodes = [
        ir.Node("Shape", ["x"], ["shape"]),
        ir.Node("Gather", ["shape", int_constant(g, "zero", 0)], ["batch"], {"axis": 0}),
        ir.Node("Unsqueeze", ["batch", int_constant(g, "axes", [0])], ["batch1"]),
        ir.Node("Concat", ["batch1", int_constant(g, "five", [5]), int_constant(g, "eight", [8])], ["target"], {"axis": 0}),
        ir.Node("Reshape", ["x", "target"], ["r"]),
        ir.Node("Add", ["r", "r"], ["y"]),
        ir.Node("ConstantOfShape", ["shape"], ["ones"], {"value": np.array([1.0], np.float32)}),
    ]
    return ir.Model(g, opset_imports={"": 21})


def reshape_by_data_dependent_shape() -> ir.Model:
    """y = x reshaped to (count, -1) where count is the number of non-zeros of m: the shape Shape
    reads comes from the data, so kept values must not outlive it."""
    g = ir.Graph(name="nonzero")
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (12,))
    g.values["m"] = ir.Value("m", dtypes.FLOAT, (4,))
    g.values["y"] = ir.Value("y", dtypes.FLOAT, (-1, -1))
    g.inputs, g.outputs = ["x", "m"], ["y"]
    g.nodes = [
        ir.Node("NonZero", ["m"], ["where"]),
        ir.Node("Shape", ["where"], ["where_shape"]),
        ir.Node("Slice", ["where_shape", int_constant(g, "one", [1]), int_constant(g, "two", [2])], ["count"]),
        ir.Node("Concat", ["count", int_constant(g, "rest", [-1])], ["target"], {"axis": 0}),
        ir.Node("Reshape", ["x", "target"], ["y"]),
    ]
    return ir.Model(g, opset_imports={"": 21})


def test_shape_arithmetic_runs_once_per_input_shape() -> None:
    model = load(flow_writer.to_bytes(reshape_by_shape_arithmetic()))
    rng = np.random.default_rng(0)
    for batch in (2, 5, 1, 2, 0, 5, 1):
        x = rng.standard_normal((batch, 40)).astype(np.float32)
        out = model.run({"x": x})
        np.testing.assert_array_equal(out["y"], 2 * x.reshape(batch, 5, 8))
        np.testing.assert_array_equal(out["ones"], np.ones((batch, 40), np.float32))
        assert out["ones"].flags.writeable  # an output is the caller's, never a kept value
    memo = model.plan.shape_memo
    assert sorted(key[0] for key in memo.by_shapes) == [(0, 40), (1, 40), (2, 40), (5, 40)]
    for batch in (1, 2):
        specialization = memo.by_shapes[((batch, 40),)]
        # Gather, Unsqueeze and Concat gone, Shape a check; ConstantOfShape makes an output
        assert [step.op_type for step in specialization.steps] == ["Shape", "Reshape", "Add", "ConstantOfShape"]
        target = specialization.template[specialization.steps[1].inputs[1]]
        assert target.tolist() == [batch, 5, 8] and not target.flags.writeable


def test_shapes_that_depend_on_the_data_are_read_again() -> None:
    model = load(flow_writer.to_bytes(reshape_by_data_dependent_shape()))
    x = np.arange(12, dtype=np.float32)
    # same input shapes every time, a different number of non-zeros each time: each run's Shape
    # check finds another shape than the kept one's, and the run is made again in full
    for count in (2, 3, 4, 3, 1, 2, 4):
        m = np.zeros(4, np.float32)
        m[:count] = 1
        np.testing.assert_array_equal(model.run({"x": x, "m": m})["y"], x.reshape(count, -1))
    memo = model.plan.shape_memo
    assert memo.failed_checks >= MAX_FAILED_CHECKS and memo.gave_up and not memo.by_shapes


def test_input_shapes_that_keep_changing_end_the_memoizing() -> None:
    # every batch a new one: each run would keep values no later run uses, at a run's cost and more
    model = load(flow_writer.to_bytes(reshape_by_shape_arithmetic()))
    memo = model.plan.shape_memo
    for batch in range(1, JUDGED_AFTER_RECORDS + 3):
        x = np.full((batch, 40), batch, np.float32)
        np.testing.assert_array_equal(model.run({"x": x})["y"], 2 * x.reshape(batch, 5, 8))
        assert memo.gave_up == (batch >= JUDGED_AFTER_RECORDS)
    assert not memo.by_shapes and memo.records == JUDGED_AFTER_RECORDS


def test_a_few_input_shapes_taking_turns_keep_their_values() -> None:
    model = load(flow_writer.to_bytes(reshape_by_shape_arithmetic()))
    batches = list(range(1, MAX_SPECIALIZATIONS + 1))
    for batch in batches * 4:
        x = np.full((batch, 40), batch, np.float32)
        np.testing.assert_array_equal(model.run({"x": x})["y"], 2 * x.reshape(batch, 5, 8))
    memo = model.plan.shape_memo
    assert not memo.gave_up and memo.records == len(batches) and len(memo.by_shapes) == len(batches)


def test_a_kept_value_is_shared_read_only_by_later_runs() -> None:
    model = load(flow_writer.to_bytes(reshape_by_shape_arithmetic()))
    x = np.ones((3, 40), np.float32)
    first = model.run({"x": x})["y"]
    second = model.run({"x": x})["y"]
    assert first is not second and first.flags.writeable
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("preserve", [False, True])
def test_interpreter_reads_the_same_values_with_and_without_the_memo(preserve) -> None:
    from edge_runtime import Interpreter

    interpreter = Interpreter(model_content=flow_writer.to_bytes(reshape_by_shape_arithmetic()),
                              experimental_preserve_all_tensors=preserve)
    index = interpreter.get_input_details()[0]["index"]
    interpreter.resize_tensor_input(index, [4, 40])
    interpreter.allocate_tensors()
    x = np.arange(160, dtype=np.float32).reshape(4, 40)
    for _ in range(2):
        interpreter.set_tensor(index, x)
        interpreter.invoke()
        outputs = {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}
        np.testing.assert_array_equal(outputs["y"], 2 * x.reshape(4, 5, 8))
