"""Models made by PyTorch: ``torch.onnx.export``, our import (as written and after ``optimize``), the
edge runtime, compared with onnxruntime and with PyTorch itself.

Each bug this path turned up has two tests here: one that builds the smallest offending ONNX graph
with onnx.helper and compares with onnxruntime, so that CI without torch still guards the fix, and
one that exports the PyTorch module that showed it (skipped where torch is not installed; torch is
a test-time peer, never a dependency of the packages).
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from edge_runtime import ModelFormatError, load
from exporter import flow_writer
from exporter.onnx_import import import_onnx, onnx_to_flow_bytes
from exporter.passes import optimize
from tests.exporter.test_onnx_import import make_model, tensor

# -------------------------------------------------------------------------------------- helpers


def const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def flow_models(model: onnx.ModelProto) -> dict[str, object]:
    """The model as ``flowstack convert --no-optimize`` and as ``flowstack convert`` write it."""
    return {
        "imported": load(onnx_to_flow_bytes(model)),
        "optimized": load(flow_writer.to_bytes(optimize(import_onnx(model))[0])),
    }


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_close(got, want, what: str, rtol: float = 1e-4) -> None:
    """Equal shapes, and values within ``rtol`` of the reference's largest magnitude (at least 1)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    elif want.size:
        scale = max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(got, want, rtol=0, atol=rtol * scale, err_msg=what)


def assert_matches_onnxruntime(model: onnx.ModelProto, *feed_sets: dict[str, np.ndarray]) -> None:
    names = [o.name for o in model.graph.output]
    for label, flow in flow_models(model).items():
        for feeds in feed_sets:
            got = flow.run(feeds)
            for name, want in zip(names, onnxruntime_outputs(model, feeds)):
                shapes = {k: v.shape for k, v in feeds.items()}
                assert_close(got[name], want, f"{label} {name} for {shapes}")


# ------------------------------------------ common subexpressions: a scalar is not its 1-element twin


def test_cse_keeps_a_scalar_constant_apart_from_its_one_element_twin() -> None:
    # nn.MultiheadAttention's export holds Constant 4 (a Gather index) beside Constant [4] (a
    # Concat piece): merged, a Concat met a 0-d input (np.ascontiguousarray made the key 1-d).
    model = make_model(
        [helper.make_node("Gather", ["x", "scalar"], ["picked"], axis=1),
         helper.make_node("Gather", ["x", "vector"], ["kept"], axis=1)],
        [tensor("x", ["batch", 4])], [tensor("picked", ["batch"]), tensor("kept", ["batch", 1])],
        [const("scalar", np.int64(1)), const("vector", np.array([1], np.int64))],
    )
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_matches_onnxruntime(model, {"x": x}, {"x": x[:1]})


# ------------------------------------------------------------- CumSum with a one-element axis tensor


def test_cumsum_takes_a_one_element_axis_tensor() -> None:
    # PyTorch's default (dynamo) exporter writes CumSum's axis as shape [1] (logcumsumexp,
    # repeat_interleave with a tensor of repeats); onnxruntime takes it.
    model = make_model(
        [helper.make_node("CumSum", ["x", "axis"], ["y"]),
         helper.make_node("CumSum", ["x", "axis"], ["z"], reverse=1, exclusive=1)],
        [tensor("x", ["batch", 5])], [tensor("y", ["batch", 5]), tensor("z", ["batch", 5])],
        [const("axis", np.array([-1], np.int64))],
    )
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x})


# ---------------------------------------------------------------------------------------- Resize


def resize_model(shape, *, scales=None, mode: str, coordinate_transformation_mode: str,
                 nearest_mode: str = "round_prefer_floor") -> onnx.ModelProto:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, nearest_mode=nearest_mode,
                            coordinate_transformation_mode=coordinate_transformation_mode)
    return make_model([node], [tensor("x", ["batch", *shape[1:]])], [tensor("y", None)],
                      [const("scales", np.array(scales, np.float32))])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scale", [1.5, 0.6])
def test_resize_align_corners_divides_by_the_integer_output_length(mode: str, scale: float) -> None:
    # F.interpolate(scale_factor=1.5, align_corners=True) on 7x9 gives 10x13 (7 * 1.5 = 10.5):
    # the corners of that 10-long axis align, so sample i is at i * 6 / 9 (onnxruntime, PyTorch).
    model = resize_model((1, 2, 7, 9), scales=[1, 1, scale, scale], mode=mode,
                         coordinate_transformation_mode="align_corners")
    x = np.random.default_rng(1).standard_normal((2, 2, 7, 9)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x})


@pytest.mark.parametrize("scale, ctm, nearest_mode", [
    (1.2, "asymmetric", "floor"),           # F.interpolate(scale_factor=1.2, mode="nearest")
    (0.6, "asymmetric", "floor"),
    (0.7, "half_pixel", "round_prefer_floor"),
])
def test_resize_nearest_picks_the_pixel_onnxruntime_picks(scale: float, ctm: str, nearest_mode: str) -> None:
    # 6 / 1.2f is 4.9999998 in float64 and 5.0 in float32, the precision onnxruntime and PyTorch
    # compute nearest coordinates in; floor then picks pixel 4 or 5.
    model = resize_model((1, 1, 2, 10), scales=[1, 1, 1, scale], mode="nearest",
                         coordinate_transformation_mode=ctm, nearest_mode=nearest_mode)
    x = np.arange(2 * 20, dtype=np.float32).reshape(2, 1, 2, 10)
    assert_matches_onnxruntime(model, {"x": x})


def test_resize_to_sizes_runs_on_an_empty_batch() -> None:
    # F.interpolate(size=...) exports sizes = Concat(Shape(x)[:2], size); a batch of 0 divided by 0.
    model = make_model(
        [helper.make_node("Shape", ["x"], ["nc"], end=2), helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
         helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear")],
        [tensor("x", ["batch", 2, 3, 5])], [tensor("y", ["batch", 2, 4, 6])],
        [const("hw", np.array([4, 6], np.int64))],
    )
    x = np.random.default_rng(2).standard_normal((2, 2, 3, 5)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, {"x": x[:0]})


# ------------------------------------------------------------------------------------ GridSample


def test_grid_sample_runs_on_an_empty_batch() -> None:
    model = make_model([helper.make_node("GridSample", ["x", "grid"], ["y"])],
                       [tensor("x", ["batch", 2, 3, 5]), tensor("grid", ["batch", 4, 6, 2])],
                       [tensor("y", ["batch", 2, 4, 6])], opset=16)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 3, 5)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 4, 6, 2)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x, "grid": grid}, {"x": x[:0], "grid": grid[:0]})


# ------------------------------------------------------------------------- import diagnostics


def test_a_value_nothing_defines_is_named_not_called_a_cycle() -> None:
    # PyTorch 2.13's dynamo exporter can write such a graph (acos(x.clamp(-1, 1)) + asin(x.clamp(-1, 1))
    # reads Clip bounds t_min_1/t_max_1 that it never defines); the stalled reader and everything
    # after it used to be reported as "a cycle among nodes [...]".
    model = make_model(
        [helper.make_node("Clip", ["x", "t_min_1", ""], ["clamped"], name="node_Clip_12"),
         helper.make_node("Acos", ["clamped"], ["y"], name="node_acos")],
        [tensor("x", [2, 3])], [tensor("y", [2, 3])],
    )
    with pytest.raises(ModelFormatError, match=r"reads undefined value\(s\) \['t_min_1'\] \(read by node\(s\) \['node_Clip_12'\]\)"):
        import_onnx(model)


# --------------------------------------------------------------------- the same, from PyTorch modules


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def torch_export(torch, module, args, *, opset: int | None = 17, dynamic: dict | None = None) -> onnx.ModelProto:
    """``module`` exported by the TorchScript exporter; inputs named in0, in1, ...; dims in ``dynamic`` named."""
    names = [f"in{i}" for i in range(len(args))]
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the exporter's own deprecation and tracer warnings
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), tuple(args), buffer, input_names=names, opset_version=opset,
                          dynamic_axes=dynamic, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())


def assert_matches_torch(torch, module, model: onnx.ModelProto, *arg_sets) -> None:
    names = [i.name for i in model.graph.input]
    for label, flow in flow_models(model).items():
        for args in arg_sets:
            with torch.no_grad():
                want = module(*args)
            got = flow.run({n: a.numpy() for n, a in zip(names, args)})
            assert_close(list(got.values())[0], want.numpy(), f"{label} for {[tuple(a.shape) for a in args]}")


def test_torch_multihead_attention_with_padding_mask_survives_the_optimizer(torch) -> None:
    torch.manual_seed(0)

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = torch.nn.MultiheadAttention(16, 4, batch_first=True)

        def forward(self, x, mask):
            return self.attention(x, x, x, key_padding_mask=mask, need_weights=False)[0]

    x, mask = torch.randn(2, 5, 16), torch.zeros(2, 5, dtype=torch.bool)
    mask[1, 3:] = True
    module = Attention()
    model = torch_export(torch, module, [x, mask], dynamic={"in0": {0: "batch"}, "in1": {0: "batch"}})
    assert_matches_torch(torch, module, model, [x, mask], [torch.randn(3, 5, 16), torch.zeros(3, 5, dtype=torch.bool)])


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_torch_interpolate_align_corners_with_a_fractional_scale(torch, mode: str) -> None:
    class Upsample(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, scale_factor=1.5, mode=mode, align_corners=True)

    x = torch.randn(2, 3, 7, 9, generator=torch.Generator().manual_seed(1))
    assert_matches_torch(torch, Upsample(), torch_export(torch, Upsample(), [x]), [x])


@pytest.mark.parametrize("scale", [0.6, 1.2])
def test_torch_interpolate_nearest_with_a_non_dyadic_scale(torch, scale: float) -> None:
    class Resample(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, scale_factor=scale, mode="nearest")

    x = torch.randn(2, 3, 9, 11, generator=torch.Generator().manual_seed(2))
    assert_matches_torch(torch, Resample(), torch_export(torch, Resample(), [x]), [x])


def test_torch_interpolate_to_a_size_and_grid_sample_on_an_empty_batch(torch) -> None:
    class Warp(torch.nn.Module):
        def forward(self, x):
            grid = torch.tanh(x[:, :2].permute(0, 2, 3, 1))
            return torch.nn.functional.grid_sample(torch.nn.functional.interpolate(x, size=(5, 7), mode="bilinear"),
                                                   grid, align_corners=False)

    x = torch.randn(2, 3, 6, 8, generator=torch.Generator().manual_seed(3))
    model = torch_export(torch, Warp(), [x], dynamic={"in0": {0: "batch"}})
    assert_matches_torch(torch, Warp(), model, [x], [x[:0]])


def test_torch_dynamo_export_of_logcumsumexp(torch) -> None:
    pytest.importorskip("onnxscript")  # the dynamo exporter's translator

    class LogCumSumExp(torch.nn.Module):
        def forward(self, x):
            return torch.logcumsumexp(x, -1)

    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(LogCumSumExp(), (x,), dynamo=True, verbose=False)
    assert_matches_torch(torch, LogCumSumExp(), program.model_proto, [x])


@pytest.mark.slow
def test_torch_mobilenet_v3_block_runs_its_hard_swishes_fused(torch) -> None:
    """MobileNetV3's inverted residual (1x1 expand, depthwise 5x5, squeeze-excite gated by
    Hardsigmoid, 1x1 project) with nn.Hardswish after the convolutions: after ``optimize`` no
    HardSwish runs on its own, and the block matches PyTorch."""
    nn = torch.nn
    torch.manual_seed(4)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.expand = nn.Sequential(nn.Conv2d(16, 48, 1, bias=False), nn.BatchNorm2d(48), nn.Hardswish())
            self.depthwise = nn.Sequential(nn.Conv2d(48, 48, 5, 2, 2, groups=48, bias=False), nn.BatchNorm2d(48),
                                           nn.Hardswish())
            self.reduce, self.gate = nn.Conv2d(48, 12, 1), nn.Conv2d(12, 48, 1)
            self.project = nn.Sequential(nn.Conv2d(48, 24, 1, bias=False), nn.BatchNorm2d(24))
            self.head = nn.Sequential(nn.Flatten(), nn.Linear(24 * 8 * 8, 32), nn.Hardswish())

        def forward(self, x):
            y = self.depthwise(self.expand(x))
            s = nn.functional.hardsigmoid(self.gate(torch.relu(self.reduce(y.mean((2, 3), keepdim=True)))))
            return self.head(self.project(y * s))

    module = Block().eval()
    x = torch.rand(2, 16, 16, 16)
    model = torch_export(torch, module, [x], dynamic={"in0": {0: "batch"}})
    assert sum(n.op_type == "HardSwish" for n in model.graph.node) == 3
    optimized = optimize(import_onnx(model))[0]
    assert "HardSwish" not in [n.op_type for n in optimized.graph.nodes]
    assert_matches_torch(torch, module, model, [x], [torch.rand(1, 16, 16, 16)])
