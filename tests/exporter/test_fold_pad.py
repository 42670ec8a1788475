"""fold_pads: a zero Pad of the spatial axes in front of Convs (TensorFlow "SAME" padding as exporters
write it) becomes the Convs' own pads; near misses (other modes, a nonzero value, padded channels,
another reader) stay."""

from __future__ import annotations

import numpy as np
import pytest

from exporter import ir
from exporter.passes import fold_pads, optimize
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn

X_SHAPE = (2, 3, 7, 7)


def padded_conv(pads=(0, 0, 0, 1, 0, 0, 1, 2), value=None, mode=None, conv_pads=None, strides=(2, 2),
                group: int = 1, second_reader: str | None = None, pad_is_output: bool = False,
                axes=None, auto_pad: str | None = None) -> ir.Model:
    """Pad(x) -> Conv 3x3; knobs to build the near misses."""
    constants = {"w": randn(4 if group == 1 else 3, 3 // group, 3, 3), "b": randn(4 if group == 1 else 3)}
    pad_attrs = {"mode": mode} if mode else {}
    constants["pads"] = np.array(pads, np.int64)
    pad_inputs = ["x", "pads"]
    if value is not None or axes is not None:
        constants["value"] = np.float32(value or 0)
        pad_inputs.append("value")
    if axes is not None:
        constants["axes"] = np.array(axes, np.int64)
        pad_inputs.append("axes")
    conv_attrs = {"kernel_shape": [3, 3], "strides": list(strides), "group": group}
    if conv_pads:
        conv_attrs["pads"] = list(conv_pads)
    if auto_pad:
        conv_attrs["auto_pad"] = auto_pad
    nodes = [ir.Node("Pad", pad_inputs, ["p"], pad_attrs, name="pad"),
             ir.Node("Conv", ["p", "w", "b"], ["y"], conv_attrs, name="conv")]
    outputs = ["y"]
    if second_reader == "Conv":
        nodes.append(ir.Node("Conv", ["p", "w"], ["y2"], {"kernel_shape": [3, 3], "group": group}, name="conv2"))
        outputs.append("y2")
    elif second_reader:
        nodes.append(ir.Node(second_reader, ["p"], ["y2"], name="other"))
        outputs.append("y2")
    if pad_is_output:
        outputs.append("p")
    return model(graph(nodes, ["x"], outputs, constants, {"x": X_SHAPE}))


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: padded_conv(), id="asymmetric SAME padding for stride 2"),
        pytest.param(lambda: padded_conv(pads=(0, 0, 1, 1, 0, 0, 1, 1), strides=(1, 1), conv_pads=(1, 0, 0, 1)),
                     id="added to the conv's own pads"),
        pytest.param(lambda: padded_conv(pads=(0,) * 8), id="zero pads of a 1x1 conv's input"),
        pytest.param(lambda: padded_conv(value=0.0, group=3), id="explicit zero value, depthwise"),
        pytest.param(lambda: padded_conv(pads=(1, 2, 1, 0), axes=[-2, -1]), id="opset 18 axes"),
        pytest.param(lambda: padded_conv(second_reader="Conv"), id="two conv readers"),
        pytest.param(lambda: padded_conv(auto_pad="VALID"), id="auto_pad VALID, as padding='valid' exports"),
    ],
)
def test_zero_pad_folds_into_its_convs(build) -> None:
    before = build()
    after, count = fold_pads(before)
    assert count == 1 and "Pad" not in ops(after) and ops(before)[0] == "Pad", "input model was edited"
    assert all(n.inputs[0] == "x" for n in after.graph.nodes)
    assert_same_outputs(before, after, x=randn(*X_SHAPE))


def test_folded_pads_are_the_convs_pads_begin_then_end() -> None:
    after, _ = fold_pads(padded_conv(pads=(0, 0, 1, 1, 0, 0, 1, 1), strides=(1, 1), conv_pads=(1, 0, 0, 1)))
    assert after.graph.nodes[0].attrs["pads"] == [2, 1, 1, 2]


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: padded_conv(mode="reflect"), id="reflect mode"),
        pytest.param(lambda: padded_conv(mode="edge"), id="edge mode"),
        pytest.param(lambda: padded_conv(value=0.5), id="nonzero value"),
        pytest.param(lambda: padded_conv(pads=(0, 0, 1, 1), axes=[1, 2]), id="opset 18 axes with channels"),
        pytest.param(lambda: padded_conv(pads=(0, 1, 0, 0, 0, 0, 0, 0)), id="pads the channels"),
        pytest.param(lambda: padded_conv(pads=(0, 0, -1, 0, 0, 0, 0, 0)), id="a negative pad crops"),
        pytest.param(lambda: padded_conv(second_reader="Relu"), id="another reader"),
        pytest.param(lambda: padded_conv(pad_is_output=True), id="pad output is a graph output"),
        pytest.param(lambda: padded_conv(auto_pad="SAME_UPPER", strides=(1, 1)), id="auto_pad SAME_UPPER"),
    ],
)
def test_near_misses_are_left_alone(build) -> None:
    before = build()
    after, count = fold_pads(before)
    assert count == 0 and ops(after) == ops(before)


def test_optimize_folds_the_pad_and_matches() -> None:
    before = padded_conv()
    after, report = optimize(before)
    assert report.changes["fold_pads"] == 1 and not report.ops_after["Pad"]
    assert_same_outputs(before, after, x=randn(*X_SHAPE))
