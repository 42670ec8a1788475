"""The channels-last pass: which regions it converts, what it leaves planar, and that results never change."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_runtime import load
from exporter import flow_writer
from exporter.onnx_export import to_onnx
from exporter.onnx_import import import_onnx
from exporter.passes import optimize
from exporter.passes.channels_last import to_channels_last
from exporter.passes.graph_edit import op_counts
from exporter.verify import check_parity

RNG = np.random.default_rng(0)


class Net:
    """A small ONNX graph builder: every helper returns its output's name."""

    def __init__(self, channels: int, side: int):
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.input = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, side, side])

    def _const(self, data: np.ndarray) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(data.astype(np.float32), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        out = f"{op_type.lower()}{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int = 3, group: int = 1, **attrs) -> str:
        w = self._const(RNG.standard_normal((cout, cin // group, k, k)) / np.sqrt(cin * k * k))
        if group != 1:  # left out otherwise, as most exporters do
            attrs["group"] = group
        return self.op("Relu", [self.op("Conv", [x, w, self._const(RNG.standard_normal(cout) * 0.1)], **attrs)])

    def gemm(self, x: str, n_in: int, n_out: int, trans_b: int = 0) -> str:
        shape = (n_out, n_in) if trans_b else (n_in, n_out)
        w = self._const(RNG.standard_normal(shape) / np.sqrt(n_in))
        return self.op("Gemm", [x, w, self._const(np.zeros(n_out))], transB=trans_b)

    def model(self, *outputs: str):
        values = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        graph = helper.make_graph(self.nodes, "net", [self.input], values, self.inits)
        return import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def digits_like(trans_b: int = 0):
    """conv(1 -> 32) -> conv(32 -> 64) -> maxpool -> flatten -> gemm -> relu -> gemm, on 8x8 images."""
    net = Net(1, 8)
    h = net.conv(net.conv("x", 1, 32, pads=[1, 1, 1, 1]), 32, 64, pads=[1, 1, 1, 1])
    h = net.op("Flatten", [net.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])], axis=1)
    return net.model(net.gemm(net.op("Relu", [net.gemm(h, 1024, 32, trans_b)]), 32, 10))


def same_outputs(reference, candidate, batch: int = 3) -> None:
    x = RNG.standard_normal((batch,) + tuple(reference.graph.values["x"].shape[1:])).astype(np.float32)
    check_parity(reference, candidate, samples={"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_conv_chain_runs_channels_last_and_leaves_through_the_gemm_weights(trans_b) -> None:
    model = digits_like(trans_b)
    optimized, report = optimize(model)
    counts = op_counts(optimized.graph)
    assert counts["ChannelsLastConv"] == 2 and counts["ChannelsLastMaxPool"] == 1
    assert counts["Transpose"] == 1  # into the region; out of it through the permuted Gemm weights
    assert report.changes["to_channels_last"] == 3
    for batch in (1, 2, 64):  # the matmul runs either way round by the number of rows
        same_outputs(model, optimized, batch)


def test_pass_is_idempotent() -> None:
    once, changed = to_channels_last(optimize(digits_like())[0])
    assert changed == 0
    assert op_counts(once.graph) == op_counts(optimize(digits_like())[0].graph)


def test_region_output_read_by_a_planar_op_and_the_graph_keeps_its_layout() -> None:
    net = Net(16, 6)
    a = net.conv("x", 16, 16, pads=[1, 1, 1, 1])
    b = net.conv(a, 16, 16, pads=[1, 1, 1, 1])
    c = net.conv(b, 16, 16, pads=[1, 1, 1, 1])
    residual = net.op("Add", [c, a])
    model = net.model(residual, net.op("GlobalAveragePool", [residual]))
    optimized, _ = optimize(model)
    counts = op_counts(optimized.graph)
    # in, out for the residual, out for the pool (which runs in the region, as a ReduceMean)
    assert counts["ChannelsLastConv"] == 3 and counts["Add"] == 1 and counts["Transpose"] == 3
    assert counts["ReduceMean"] == 1 and "GlobalAveragePool" not in counts
    assert optimized.graph.outputs == model.graph.outputs
    same_outputs(model, optimized)


def test_variadic_max_of_region_values_stays_planar_and_correct() -> None:
    net = Net(16, 6)
    a = net.conv("x", 16, 16, pads=[1, 1, 1, 1])
    b = net.conv(a, 16, 16, pads=[1, 1, 1, 1])
    c = net.conv(b, 16, 16, pads=[1, 1, 1, 1])
    model = net.model(net.op("Max", [a, b, c]))
    optimized, _ = optimize(model)
    assert op_counts(optimized.graph)["Max"] == 1
    same_outputs(model, optimized)


def resnet_like(stem_kernel: int):
    """A ResNet stem of 3 channels (stride 2, then a 3x3/2 max pool) on 64x64 images, a basic block
    with an identity shortcut, and a downsampling block whose shortcut is a strided 1x1 convolution."""
    net = Net(3, 64)
    pad = stem_kernel // 2
    h = net.op("MaxPool", [net.conv("x", 3, 16, k=stem_kernel, strides=[2, 2], pads=[pad] * 4)],
               kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    body = net.conv(net.conv(h, 16, 16, pads=[1, 1, 1, 1]), 16, 16, pads=[1, 1, 1, 1])
    h = net.op("Relu", [net.op("Add", [body, h])])
    down = net.conv(net.conv(h, 16, 32, strides=[2, 2], pads=[1, 1, 1, 1]), 32, 32, pads=[1, 1, 1, 1])
    h = net.op("Add", [down, net.conv(h, 16, 32, k=1, strides=[2, 2])])
    return net.model(net.op("GlobalAveragePool", [h]))


def test_resnet_runs_channels_last_from_its_stem_on() -> None:
    # 7x7 kernel rows of 3 channels span 21 values: the stem joins the region on its 32x32 plane,
    # and so does the strided 1x1 shortcut on its 16x16 input
    model = resnet_like(7)
    optimized, _ = optimize(model)
    counts = op_counts(optimized.graph)
    assert counts["ChannelsLastConv"] == 6 and counts["ChannelsLastMaxPool"] == 1
    assert not {"Conv", "FusedConv", "FusedConvMaxPool", "MaxPool"} & set(counts)
    for batch in (1, 2):
        same_outputs(model, optimized, batch)


def test_a_3x3_stem_of_few_channels_stays_planar() -> None:
    # kernel rows of 3 channels span 9 values: too short a run to gather, however large the plane;
    # the first block, whose Add reads the planar pool, stays planar with it
    model = resnet_like(3)
    optimized, _ = optimize(model)
    counts = op_counts(optimized.graph)
    assert counts["FusedConvMaxPool"] == 1 and counts["ChannelsLastConv"] == 3
    same_outputs(model, optimized)


@pytest.mark.parametrize("case", ["few channels on a large plane", "grouped", "few channels", "lone conv",
                                  "pair between planar ops", "stride-1 1x1 on a large plane"])
def test_unprofitable_convolutions_stay_planar(case) -> None:
    if case == "few channels on a large plane":  # 30x30 outputs, but runs of 3 * 4 values
        net = Net(4, 30)
        h = "x"
        for _ in range(3):  # one more than the two Transposes a region needs: only the rule keeps them planar
            h = net.conv(h, 4, 4, pads=[1, 1, 1, 1])
    elif case == "stride-1 1x1 on a large plane":  # planar 1x1 convolutions are as fast there
        net = Net(16, 30)
        h = net.conv(net.conv(net.conv("x", 16, 32, k=1), 32, 16, k=1), 16, 16, k=1)
    elif case == "grouped":
        net = Net(16, 8)
        h = net.conv(net.conv("x", 16, 16, group=4, pads=[1, 1, 1, 1]), 16, 16, group=16, pads=[1, 1, 1, 1])
    elif case == "few channels":  # runs of kernel_width * 6 values: too short to gather
        net = Net(6, 8)
        h = net.conv(net.conv("x", 6, 6, pads=[1, 1, 1, 1]), 6, 6, pads=[1, 1, 1, 1])
    elif case == "lone conv":  # one convolution between planar ops would pay two transposes
        net = Net(16, 8)
        h = net.op("GlobalAveragePool", [net.conv("x", 16, 16, pads=[1, 1, 1, 1])])
    else:  # two 1x1 convolutions between grouped (not depthwise) ones: no gain either
        net = Net(16, 8)
        h = net.conv(net.conv(net.conv("x", 16, 16, group=4, pads=[1, 1, 1, 1]), 16, 32, k=1), 32, 16, k=1)
        h = net.conv(h, 16, 16, group=4, pads=[1, 1, 1, 1])
    model = net.model(h)
    optimized, report = optimize(model)
    assert report.changes["to_channels_last"] == 0 and "ChannelsLastConv" not in op_counts(optimized.graph)


def inverted_residuals(side: int, pool: str):
    """Two MobileNetV2/EfficientNet blocks: 1x1 expand, depthwise 3x3 (stride 1, then 2), a
    squeeze-excite scale (``pool``, two 1x1 convolutions, Sigmoid, a broadcast Mul), 1x1 project."""
    net = Net(16, side)
    h = "x"
    for stride in (1, 2):
        e = net.conv(net.conv(h, 16, 48, k=1), 48, 48, group=48, strides=[stride, stride], pads=[1, 1, 1, 1])
        if pool.startswith("Global"):
            s = net.op(pool, [e])
        else:
            s = net.op("ReduceMean", [e], axes=[2, 3], keepdims=1)
        s = net.op("Sigmoid", [net.conv(net.conv(s, 48, 8, k=1), 8, 48, k=1)])
        h = net.conv(net.op("Mul", [e, s]), 48, 16, k=1)
    return net.model(h)


@pytest.mark.parametrize("pool", ["GlobalAveragePool", "GlobalMaxPool", "ReduceMean"])
def test_depthwise_blocks_run_channels_last_with_their_squeeze_excite(pool) -> None:
    model = inverted_residuals(14, pool)
    optimized, _ = optimize(model)
    counts = op_counts(optimized.graph)
    # the 1x1 ones then run as FusedMatMul (pointwise_to_matmul); into the region, out of it: two Transposes
    assert counts["ChannelsLastConv"] + counts["FusedMatMul"] == 10 and counts["Transpose"] == 2
    reduction = "ReduceMax" if pool == "GlobalMaxPool" else "ReduceMean"
    assert counts[reduction] == 2 and counts["Mul"] == 2 and not {"GlobalAveragePool", "GlobalMaxPool"} & set(counts)
    depthwise = [n for n in optimized.graph.nodes if n.op_type == "ChannelsLastConv" and n.attrs.get("group", 1) > 1]
    assert len(depthwise) == 2
    for batch in (1, 3):
        same_outputs(model, optimized, batch)
    proto = to_onnx(optimized)  # standard ONNX again, as onnxruntime runs it
    x = RNG.standard_normal((2, 16, 14, 14)).astype(np.float32)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(next(iter(load(flow_writer.to_bytes(optimized)).run({"x": x}).values())), want,
                               rtol=1e-4, atol=1e-5)


def test_depthwise_blocks_on_large_planes_stay_planar() -> None:
    # 900 pixels an input plane; the second block's project convolution (15x15) alone stays too,
    # and so do the squeeze-excite's 1x1 convolutions of pooled values (no plane to gain on)
    model = inverted_residuals(30, "GlobalAveragePool")
    optimized, report = optimize(model)
    assert report.changes["to_channels_last"] == 0 and "ChannelsLastConv" not in op_counts(optimized.graph)
    same_outputs(model, optimized)


def test_converted_model_writes_standard_onnx_that_onnxruntime_runs() -> None:
    model, _ = optimize(digits_like())
    proto = to_onnx(model)
    onnx.checker.check_model(proto, full_check=True)
    assert not {n.op_type for n in proto.graph.node} & {"ChannelsLastConv", "ChannelsLastMaxPool"}
    x = RNG.standard_normal((4, 1, 8, 8)).astype(np.float32)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = load(flow_writer.to_bytes(model)).run({"x": x})
    got = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(got, next(iter(want.values())), rtol=1e-4, atol=1e-5)


def random_net(seed: int):
    """A random chain of convolutions (1 or 16-24 channels, 1x1..3x3, strides, dilations, pads),
    max pools, activations and residual Adds on small planes, ending planar or through Flatten+Gemm."""
    rng = np.random.default_rng(seed)
    channels, side = int(rng.choice([1, 16, 24])), int(rng.integers(5, 12))
    net = Net(channels, side)
    h, shape = "x", (channels, side, side)
    for _ in range(int(rng.integers(2, 6))):
        c, s = shape[0], shape[1]
        kind = rng.choice(["conv", "conv", "pool", "residual"])
        if kind == "pool" and s >= 4:
            h = net.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, int(s % 2), int(s % 2)])
            shape = (c, (s + s % 2) // 2, (s + s % 2) // 2)
        elif kind == "residual" and c >= 16:
            h = net.op("Add", [net.conv(h, c, c, k=3, pads=[1, 1, 1, 1]), h])
        else:
            k, stride, dilation = int(rng.choice([1, 3])), int(rng.choice([1, 1, 2])), int(rng.choice([1, 1, 2]))
            pad = dilation * (k // 2)
            out = int(rng.choice([16, 24]))
            h = net.conv(h, c, out, k=k, strides=[stride, stride], dilations=[dilation, dilation], pads=[pad] * 4)
            shape = (out, (s - 1) // stride + 1, (s - 1) // stride + 1)
    if rng.random() < 0.5:
        h = net.gemm(net.op("Flatten", [h], axis=1), int(np.prod(shape)), 5, trans_b=int(rng.integers(2)))
    return net.model(h)


@pytest.mark.parametrize("seed", range(24))
def test_random_conv_graphs_keep_their_outputs(seed) -> None:
    model = random_net(seed)
    optimized, _ = optimize(model)
    for batch in (1, 3):
        same_outputs(model, optimized, batch)
