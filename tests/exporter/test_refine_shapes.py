"""refine_shapes: the shapes onnx's inference loses behind a computed value (PyTorch's F.pad with its
pads computed at run time, as in Hugging Face's MobileNetV2) come back from the registry's shape
rules once the computation is folded, and the channels-last rewrite then applies."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from exporter import ir
from exporter.onnx_import import import_onnx
from exporter.passes import fold_constants, optimize, refine_shapes
from tests.exporter.test_passes import graph, model, randn, run

RNG = np.random.default_rng(3)


def tf_padded_convs(depth: int = 1) -> onnx.ModelProto:
    """x -> Pad (pads Cast from a constant, as PyTorch computes them) -> 3x3 stride-2 Conv -> Relu,
    then ``depth`` more padded 3x3 Conv -> Relu of 16 channels, with a dynamic batch."""
    nodes = [
        helper.make_node("Constant", [], ["pads32"], value=numpy_helper.from_array(
            np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int32))),
        helper.make_node("Cast", ["pads32"], ["pads"], to=TensorProto.INT64),
        helper.make_node("Constant", [], ["same32"], value=numpy_helper.from_array(
            np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int32))),
        helper.make_node("Cast", ["same32"], ["same"], to=TensorProto.INT64),
        helper.make_node("Pad", ["x", "pads"], ["p0"]),
        helper.make_node("Conv", ["p0", "w0"], ["c0"], kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["c0"], ["r0"]),
    ]
    weights = [numpy_helper.from_array(RNG.standard_normal((16, 3, 3, 3)).astype(np.float32), "w0")]
    for i in range(1, depth + 1):
        nodes += [helper.make_node("Pad", [f"r{i - 1}", "same"], [f"p{i}"]),
                  helper.make_node("Conv", [f"p{i}", f"w{i}"], [f"c{i}"], kernel_shape=[3, 3]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        weights.append(numpy_helper.from_array(RNG.standard_normal((16, 16, 3, 3)).astype(np.float32) / 12, f"w{i}"))
    nodes.append(helper.make_node("Identity", [f"r{depth}"], ["y"]))
    g = helper.make_graph(
        nodes, "tf_padded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        weights,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_import_loses_the_plane_behind_the_computed_pads() -> None:
    imported = import_onnx(tf_padded_convs())
    shape = imported.graph.values["r1"].shape
    assert shape is None or -1 in shape[1:]


def test_folded_pads_give_back_every_shape_downstream() -> None:
    folded, _ = fold_constants(import_onnx(tf_padded_convs()))
    refined, count = refine_shapes(folded)
    values = refined.graph.values
    assert count >= 3
    assert values["p0"].shape == (-1, 3, 33, 33)
    assert values["c0"].shape == values["r0"].shape == values["r1"].shape == (-1, 16, 16, 16)
    assert refine_shapes(refined)[1] == 0, "a second run learns nothing more"


def test_channels_last_applies_after_the_pads_fold_and_outputs_match_onnxruntime() -> None:
    proto = tf_padded_convs(depth=3)
    optimized, report = optimize(import_onnx(proto))
    assert report.changes["fold_pads"] == 4 and report.ops_after["ChannelsLastConv"] == 3
    x = RNG.standard_normal((2, 3, 32, 32)).astype(np.float32)
    want = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    np.testing.assert_allclose(run(optimized, x=x)["y"], want, rtol=1e-4, atol=1e-4)


def test_known_dims_are_never_changed() -> None:
    # a declared (2, 4, 9, 9) on a 3x3 valid convolution of a 7x7 input: the rule says 5x5, the record stays
    g = graph([ir.Node("Conv", ["x", "w"], ["y"], {"kernel_shape": [3, 3]}, name="conv")], ["x"], ["y"],
              constants={"w": randn(4, 3, 3, 3)}, shapes={"x": (2, 3, 7, 7), "y": (2, 4, 9, -1)})
    refined, count = refine_shapes(model(g))
    assert refined.graph.values["y"].shape == (2, 4, 9, 5) and count == 1


def test_a_runtime_shape_gives_the_rank_at_most() -> None:
    def reshape(target_shape):
        g = graph([ir.Node("Reshape", ["x", "s"], ["y"], name="reshape")], ["x", "s"], ["y"], shapes={"x": (2, 6)})
        g.values["s"] = ir.Value("s", 7, target_shape)  # int64, computed at run time
        return refine_shapes(model(g))[0].graph.values["y"]

    assert reshape(None).shape is None and reshape(None).dtype == 1  # float, rank unknown
    assert reshape((3,)).shape == (-1, -1, -1)


def reshape_to_shape_of_x(**shape_attrs) -> ir.Model:
    """Reshape(Flatten(x), Shape(x)): how PyTorch exports GroupNorm's way back to its input's shape."""
    nodes = [ir.Node("Flatten", ["x"], ["f"], name="flatten"), ir.Node("Shape", ["x"], ["s"], shape_attrs, name="shape"),
             ir.Node("Reshape", ["f", "s"], ["y"], name="reshape")]
    return model(graph(nodes, ["x"], ["y"], shapes={"x": (-1, 4, 6, 6)}))


def test_reshape_to_the_shape_of_a_value_takes_its_shape() -> None:
    before = reshape_to_shape_of_x()
    assert before.graph.values.get("y") is None or before.graph.values["y"].shape is None
    refined, _ = refine_shapes(before)
    assert refined.graph.values["y"].shape == (-1, 4, 6, 6)
    x = randn(2, 4, 6, 6)
    np.testing.assert_array_equal(run(refined, x=x)["y"], x)


def test_reshape_to_part_of_a_shape_is_left_to_the_rule() -> None:
    refined, _ = refine_shapes(reshape_to_shape_of_x(start=1))
    shape = refined.graph.values["y"].shape
    assert shape is None or all(d == -1 for d in shape)
