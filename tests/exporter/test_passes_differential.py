"""Differential tests: small ONNX models run by onnxruntime (the oracle) and by the edge runtime,
both as imported and after the exporter's default passes.

Each case is a named minimal model. The pass cases aim at one rewrite each (and at the near misses
that must be left alone, or be rewritten correctly), and say which fused op must, or must not,
come out. The kernel cases each reproduced a bug a seeded random scan found: they failed before the
fix, on the plain import and the optimized model alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper, numpy_helper

from edge_runtime import load
from exporter import flow_writer
from exporter.onnx_import import import_onnx
from exporter.passes import optimize
from exporter.passes.graph_edit import op_counts

INT64_MIN = np.iinfo(np.int64).min


@dataclass
class Net:
    """A graph under construction: nodes, initializers, graph inputs (fed) and outputs."""

    feeds: dict[str, np.ndarray] = field(default_factory=dict)
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    opset: int = 20
    dynamic_batch: bool = False
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    def input(self, *shape: int, values: np.ndarray | None = None) -> str:
        name = f"x{len(self.feeds)}"
        self.feeds[name] = self.randn(*shape) if values is None else values
        return name

    def randn(self, *shape: int) -> np.ndarray:
        return self.rng.standard_normal(shape).astype(np.float32)

    def const(self, value) -> str:
        name = f"c{len(self.constants)}"
        self.constants[name] = np.asarray(value)
        return name

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attrs) -> str:
        names = [f"{op_type.lower()}{len(self.nodes)}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attrs))
        return names[0]

    def conv(self, x: str, c_in: int, c_out: int, kernel=(3, 3), bias: bool = True, group: int = 1, **attrs) -> str:
        w = self.const(self.randn(c_out, c_in // group, *kernel) / np.float32(np.sqrt(c_in // group * np.prod(kernel))))
        return self.op("Conv", x, w, *([self.const(self.randn(c_out))] if bias else []), group=group, **attrs)

    def batch_norm(self, x: str, c: int, **attrs) -> str:
        stats = [self.randn(c), self.randn(c), self.randn(c), self.rng.uniform(0.5, 2.0, c).astype(np.float32)]
        return self.op("BatchNormalization", x, *map(self.const, stats), **attrs)

    def model(self) -> onnx.ModelProto:
        def value(name: str, array: np.ndarray) -> onnx.ValueInfoProto:
            shape = list(array.shape)
            if self.dynamic_batch:
                shape[0] = "N"
            return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), shape)

        graph = helper.make_graph(
            self.nodes, "case", [value(n, a) for n, a in self.feeds.items()],
            [helper.make_value_info(n, onnx.TypeProto()) for n in self.outputs],
            [numpy_helper.from_array(a, n) for n, a in self.constants.items()],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8
        return model


@dataclass
class Case:
    net: Net
    fused: tuple[str, ...] = ()  # op types the optimized model must contain
    not_fused: tuple[str, ...] = ()  # op types it must not contain


CASES: dict[str, Callable[[], Case]] = {}


def case(build: Callable[[], Case]) -> Callable[[], Case]:
    CASES[build.__name__] = build
    return build


# --------------------------------------------------------------------- fold_batch_norm, fuse_activation


@case
def conv_without_bias_bn_relu() -> Case:
    n = Net()
    y = n.conv(n.input(2, 3, 8, 8), 3, 4, bias=False, pads=[1, 1, 1, 1])
    n.outputs = [n.op("Relu", n.batch_norm(y, 4, epsilon=1e-3))]
    return Case(n, fused=("FusedConv",), not_fused=("BatchNormalization",))


@case
def conv_bn_tiny_epsilon_clip_without_min() -> Case:
    n = Net()
    y = n.batch_norm(n.conv(n.input(1, 3, 7, 9), 3, 4, strides=[2, 2], pads=[0, 1, 2, 0]), 4, epsilon=1e-9)
    n.outputs = [n.op("Clip", y, "", n.const(np.float32(0.5)))]
    return Case(n, fused=("FusedConv",), not_fused=("BatchNormalization",))


@case
def conv_clip_min_above_max() -> Case:
    n = Net()
    y = n.conv(n.input(2, 3, 6, 6), 3, 4, auto_pad="SAME_LOWER", strides=[2, 2])
    n.outputs = [n.op("Clip", y, n.const(np.float32(1.0)), n.const(np.float32(-1.0)))]
    return Case(n, fused=("FusedConv",))


@case
def conv_leaky_relu_alpha_above_one_then_max_pool() -> Case:
    """LeakyRelu with alpha > 1 still never decreases, so the max pool is taken before it."""
    n = Net()
    y = n.op("LeakyRelu", n.batch_norm(n.conv(n.input(2, 3, 8, 8), 3, 4), 4), alpha=2.5)
    n.outputs = [n.op("MaxPool", y, kernel_shape=[2, 2], strides=[2, 2])]
    return Case(n, fused=("FusedConvMaxPool",), not_fused=("BatchNormalization",))


@case
def conv_leaky_relu_negative_alpha_then_max_pool() -> Case:
    """With alpha < 0 the activation does not commute with a max: fused into the Conv, not pooled."""
    n = Net()
    y = n.op("LeakyRelu", n.conv(n.input(2, 3, 8, 8), 3, 4), alpha=-0.5)
    n.outputs = [n.op("MaxPool", y, kernel_shape=[2, 2], strides=[2, 2])]
    return Case(n, fused=("FusedConv",), not_fused=("FusedConvMaxPool",))


@case
def conv_intermediate_is_also_a_graph_output() -> Case:
    n = Net()
    y = n.conv(n.input(1, 3, 6, 6), 3, 4, pads=[1, 1, 1, 1])
    n.outputs = [n.op("Relu", n.batch_norm(y, 4)), y]
    return Case(n, not_fused=("FusedConv",))


@case
def conv_output_with_a_second_reader() -> Case:
    n = Net()
    y = n.conv(n.input(1, 3, 6, 6), 3, 4)
    n.outputs = [n.op("Relu", y), n.op("Sigmoid", y)]
    return Case(n, not_fused=("FusedConv",))


@case
def gemm_transposes_alpha_beta_broadcast_c_bn_hard_sigmoid() -> Case:
    n = Net()
    x = n.op("Transpose", n.input(4, 6), perm=[1, 0])
    y = n.op("Gemm", x, n.const(n.randn(6, 5)), n.const(n.randn(1, 5)), transA=1, alpha=0.5, beta=2.0)
    n.outputs = [n.op("HardSigmoid", n.batch_norm(y, 5), alpha=0.3, beta=0.4)]
    return Case(n, fused=("FusedGemm",), not_fused=("BatchNormalization",))


@case
def gemm_trans_b_scalar_c_leaky_relu_negative_alpha() -> Case:
    n = Net()
    y = n.op("Gemm", n.input(3, 4), n.const(n.randn(5, 4)), n.const(np.float32(0.7)), transB=1, beta=-1.0)
    n.outputs = [n.op("LeakyRelu", y, alpha=-0.5)]
    return Case(n, fused=("FusedGemm",))


@case
def matmul_add_bn() -> Case:
    n = Net()
    y = n.op("Add", n.op("MatMul", n.input(3, 6), n.const(n.randn(6, 4))), n.const(n.randn(4)))
    n.outputs = [n.batch_norm(y, 4, epsilon=0.1)]
    return Case(n, not_fused=("BatchNormalization",))


# ------------------------------------------------------------------------------------ fuse_max_pool


@case
def conv_clip_max_pool_with_pads() -> Case:
    n = Net(dynamic_batch=True)
    y = n.op("Clip", n.conv(n.input(3, 3, 9, 9), 3, 4, pads=[1, 1, 1, 1]), n.const(np.float32(0)), n.const(np.float32(6)))
    n.outputs = [n.op("MaxPool", y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    return Case(n, fused=("FusedConvMaxPool",))


@case
def conv_relu_max_pool_with_ceil_mode() -> Case:
    n = Net()
    y = n.op("Relu", n.conv(n.input(2, 3, 9, 9), 3, 4))
    n.outputs = [n.op("MaxPool", y, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)]
    return Case(n, fused=("FusedConv",), not_fused=("FusedConvMaxPool",))


@case
def conv_1d_bn_tanh_max_pool() -> Case:
    n = Net()
    y = n.op("Tanh", n.batch_norm(n.conv(n.input(2, 3, 17), 3, 4, kernel=(3,), pads=[1, 0]), 4))
    n.outputs = [n.op("MaxPool", y, kernel_shape=[2], strides=[2], pads=[1, 0])]
    return Case(n, fused=("FusedConvMaxPool",), not_fused=("BatchNormalization",))


# ------------------------------------------------------------------- fuse_pointwise(_strided)


@case
def depthwise_then_project_16x16() -> Case:
    n = Net()
    y = n.conv(n.input(1, 8, 16, 16), 8, 8, group=8, pads=[1, 1, 1, 1])
    y = n.op("Clip", y, n.const(np.float32(0)), n.const(np.float32(6)))
    n.outputs = [n.conv(y, 8, 3, kernel=(1, 1))]
    return Case(n, fused=("FusedConvPointwise",))


@case
def dilated_conv_asymmetric_pads_then_project_batch_3() -> Case:
    n = Net()
    y = n.conv(n.input(3, 4, 12, 32), 4, 6, bias=False, dilations=[2, 2], pads=[0, 1, 2, 1])
    n.outputs = [n.op("Sigmoid", n.conv(n.op("Relu", y), 6, 2, kernel=(1, 1)))]
    return Case(n, fused=("FusedConvPointwise",))


@case
def project_output_also_read_elsewhere() -> Case:
    n = Net()
    y = n.conv(n.input(1, 4, 16, 16), 4, 4, group=4, pads=[1, 1, 1, 1])
    n.outputs = [n.conv(y, 4, 2, kernel=(1, 1)), n.op("Neg", y)]
    return Case(n, not_fused=("FusedConvPointwise",))


@case
def expand_then_strided_depthwise_28x28_same_upper() -> Case:
    n = Net(dynamic_batch=True)
    y = n.op("Relu", n.conv(n.input(2, 3, 28, 28), 3, 8, kernel=(1, 1)))
    y = n.conv(y, 8, 8, group=8, strides=[2, 2], auto_pad="SAME_UPPER")
    n.outputs = [n.op("Clip", y, n.const(np.float32(0)), n.const(np.float32(6)))]
    return Case(n, fused=("FusedPointwiseConv",))


@case
def expand_then_strided_depthwise_odd_plane_stride_3() -> Case:
    n = Net()
    y = n.batch_norm(n.conv(n.input(1, 2, 31, 29), 2, 6, kernel=(1, 1), bias=False), 6)
    n.outputs = [n.conv(n.op("Relu", y), 6, 6, kernel=(5, 3), group=6, strides=[3, 2], pads=[2, 0, 1, 1])]
    return Case(n, fused=("FusedPointwiseConv",), not_fused=("BatchNormalization",))


@case
def expand_then_strided_depthwise_empty_batch() -> Case:
    n = Net(dynamic_batch=True)
    y = n.op("Relu", n.conv(n.input(0, 3, 28, 28), 3, 6, kernel=(1, 1)))
    n.outputs = [n.conv(y, 6, 6, group=6, strides=[2, 2], pads=[1, 1, 1, 1])]
    return Case(n, fused=("FusedPointwiseConv",))


@case
def expand_then_strided_depthwise_below_28x28() -> Case:
    n = Net()
    y = n.conv(n.input(1, 3, 27, 27), 3, 6, kernel=(1, 1))
    n.outputs = [n.conv(y, 6, 6, group=6, strides=[2, 2], pads=[1, 1, 1, 1])]
    return Case(n, not_fused=("FusedPointwiseConv",))


# --------------------------------------------------------------------------- fuse_squeeze_excite


def _squeeze_excite(n: Net, x: str, c: int, out: int) -> str:
    """ReduceMean over the plane, 1x1 Conv + SiLU, 1x1 Conv + Sigmoid, x * gate, 1x1 projection."""
    s = n.op("ReduceMean", x, n.const(np.array([2, 3], np.int64)), keepdims=1)
    r = n.conv(s, c, 2, kernel=(1, 1))
    g = n.op("Sigmoid", n.conv(n.op("Mul", r, n.op("Sigmoid", r)), 2, c, kernel=(1, 1)))
    return n.conv(n.op("Mul", x, g), c, out, kernel=(1, 1))


@case
def squeeze_excite_batch_of_three() -> Case:
    n = Net()
    n.outputs = [_squeeze_excite(n, n.input(3, 6, 9, 7), 6, 5)]
    return Case(n, fused=("SqueezeExciteConv",))


@case
def squeeze_excite_empty_batch() -> Case:
    n = Net(dynamic_batch=True)
    n.outputs = [_squeeze_excite(n, n.input(0, 6, 5, 5), 6, 4)]
    return Case(n, fused=("SqueezeExciteConv",))


@case
def squeeze_excite_channels_last_batch_of_two() -> Case:
    n = Net()
    y = n.op("Relu", n.conv(n.input(2, 16, 8, 8), 16, 24, kernel=(1, 1)))
    y = n.op("Relu", n.conv(y, 24, 24, group=24, pads=[1, 1, 1, 1]))
    n.outputs = [_squeeze_excite(n, y, 24, 16)]
    return Case(n, fused=("SqueezeExciteConv", "ChannelsLastConv"))


@case
def channels_last_pointwise_as_matmul_empty_batch() -> Case:
    n = Net(dynamic_batch=True)
    y = n.op("Relu", n.conv(n.input(0, 16, 8, 8), 16, 24, kernel=(1, 1)))
    y = n.op("Relu", n.conv(y, 24, 24, group=24, pads=[1, 1, 1, 1]))
    n.outputs = [n.conv(y, 24, 16, kernel=(1, 1))]
    return Case(n, fused=("FusedMatMul", "ChannelsLastConv"))


# ----------------------------------------------- channels_last, merge_matmuls, cleanups


@case
def small_plane_conv_chain_flatten_gemm() -> Case:
    n = Net()
    y = n.op("Relu", n.conv(n.input(2, 16, 7, 7), 16, 16, pads=[1, 1, 1, 1]))
    y = n.op("MaxPool", n.op("Relu", n.conv(y, 16, 16, pads=[1, 1, 1, 1])), kernel_shape=[2, 2], strides=[2, 2])
    y = n.op("Gemm", n.op("Flatten", y, axis=1), n.const(n.randn(16 * 3 * 3, 5) / np.float32(12)), n.const(n.randn(5)))
    n.outputs = [y]
    return Case(n, fused=("ChannelsLastConv",))


@case
def sibling_matmuls_with_biases_one_public() -> Case:
    n = Net()
    x = n.input(3, 8)
    q, k, v = (n.op("MatMul", x, n.const(n.randn(8, w))) for w in (4, 4, 6))
    k_biased = n.op("Add", n.const(n.randn(4)), k)
    n.outputs = [n.op("Add", q, n.const(n.randn(4))), k_biased, v, n.op("Mul", k_biased, k_biased)]
    return Case(n, fused=("Split",))


@case
def transpose_pair_reshape_chain_and_duplicates() -> Case:
    n = Net()
    x = n.input(2, 3, 4)
    y = n.op("Transpose", n.op("Transpose", x, perm=[0, 2, 1]), perm=[0, 2, 1])
    y = n.op("Reshape", n.op("Reshape", y, n.const(np.int64([6, -1]))), n.const(np.int64([2, -1, 4])))
    y = n.op("Reshape", n.op("Reshape", y, n.const(np.int64([3, 8]))), n.const(np.int64([0, 2, 4])))  # 0: from (3, 8)
    a, b = n.op("Relu", y), n.op("Relu", y)
    n.outputs = [n.op("Add", a, b), b, n.op("Identity", a)]
    return Case(n, not_fused=("Transpose",))


# ------------------------------------------------------------------------ kernels (regressions)


@case
def slice_backwards_from_before_the_first_element() -> Case:
    """ONNX clamps a start below -dim to 0 when stepping backwards: element 0 is kept."""
    n = Net()
    x = n.input(5, values=np.arange(5, dtype=np.float32))
    n.outputs = [n.op("Slice", x, *map(n.const, (np.int64([-1000]), np.int64([-1000]), np.int64([0]), np.int64([-2]))))]
    return Case(n)


@case
def slice_backwards_from_int64_min() -> Case:
    n = Net()
    x = n.input(2, 6)
    n.outputs = [n.op("Slice", x, *map(n.const, (np.int64([INT64_MIN]), np.int64([-1000]), np.int64([1]), np.int64([-1]))))]
    return Case(n)


@case
def resize_half_pixel_symmetric_nearest_at_exact_coordinates() -> Case:
    """Scales 1.5 and 0.5 map output pixels onto exact input coordinates, where ceil must not round up."""
    n = Net()
    x = n.input(1, 1, 3, 7, values=np.arange(21, dtype=np.float32).reshape(1, 1, 3, 7))
    n.outputs = [n.op("Resize", x, "", n.const(np.float32([1, 1, 1.5, 0.5])), mode="nearest",
                      coordinate_transformation_mode="half_pixel_symmetric", nearest_mode="ceil")]
    return Case(n)


@case
def resize_by_a_scale_float32_cannot_hold() -> Case:
    """10 * float32(0.7) is 6.9999998 in float64 but 7 in float32, as onnxruntime (and ONNX's shape
    inference) compute it: 7 columns."""
    n = Net()
    x = n.input(1, 2, 3, 10)
    n.outputs = [n.op("Resize", x, "", n.const(np.float32([1, 1, 1.3, 0.7])), mode="linear")]
    return Case(n)


@case
def softmaxes_along_an_empty_axis() -> Case:
    n = Net()
    x = n.input(2, 0)
    n.outputs = [n.op(op, x, axis=-1) for op in ("Softmax", "LogSoftmax", "Hardmax")]
    return Case(n)


@case
def mean_variance_normalization_of_an_empty_batch() -> Case:
    n = Net()
    n.outputs = [n.op("MeanVarianceNormalization", n.input(0, 3, 4, 4))]
    return Case(n)


@case
def conv_transpose_output_shape_beyond_the_taps() -> Case:
    """Stride 3 over a 1x1 kernel covers 4 rows of the 6 asked for: the rest is the bias, at the end."""
    n = Net()
    x = n.input(1, 1, 2, 1, values=np.float32([1, 2]).reshape(1, 1, 2, 1))
    n.outputs = [n.op("ConvTranspose", x, n.const(np.ones((1, 1, 1, 1), np.float32)), n.const(np.float32([0.5])),
                      strides=[3, 1], output_shape=[6, 1])]
    return Case(n)


@case
def conv_transpose_grouped_output_shape_beyond_the_taps() -> Case:
    n = Net()
    x = n.input(2, 4, 3, 5)
    w = n.const(n.randn(4, 1, 2, 3))
    n.outputs = [n.op("ConvTranspose", x, w, n.const(n.randn(2)), group=2, strides=[3, 1], output_shape=[10, 7])]
    return Case(n)


@case
def grid_sample_reflection_of_a_single_pixel_with_align_corners() -> Case:
    n = Net()
    x = n.input(1, 1, 3, 1, values=np.float32([0, 1, 2]).reshape(1, 1, 3, 1))
    grid = n.input(1, 1, 3, 2, values=np.float32([[[[-1.2, -0.9], [0.3, 0.5], [1.7, 0.0]]]]))
    n.outputs = [n.op("GridSample", x, grid, mode=mode, padding_mode="reflection", align_corners=1)
                 for mode in ("linear", "cubic")]
    return Case(n)


@case
def grid_sample_cubic_border_within_half_a_pixel_of_the_edge() -> Case:
    n = Net()
    x = n.input(1, 1, 3, 4, values=np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4) ** 2)
    grid = n.input(1, 1, 3, 2, values=np.float32([[[[-0.9, -0.95], [0.95, 0.9], [0.3, -0.2]]]]))
    n.outputs = [n.op("GridSample", x, grid, mode="cubic", padding_mode="border", align_corners=0)]
    return Case(n)


# ------------------------------------------------------------------------------------------ the test


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


@pytest.mark.parametrize("name", CASES)
def test_matches_onnxruntime_imported_and_optimized(name) -> None:
    built = CASES[name]()
    model = built.net.model()
    want = onnxruntime_outputs(model, built.net.feeds)
    imported = import_onnx(model)
    optimized, _ = optimize(imported)
    for label, ir_model in (("imported", imported), ("optimized", optimized)):
        got = load(flow_writer.to_bytes(ir_model)).run(built.net.feeds)
        for out, expected in want.items():
            where = f"{label}: output {out}"
            assert got[out].shape == expected.shape, where
            scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
            np.testing.assert_allclose(got[out], expected, rtol=1e-4, atol=1e-4 * scale, err_msg=where)
    counts = op_counts(optimized.graph)
    assert all(counts[op] for op in built.fused), f"expected {built.fused} in {dict(counts)}"
    assert not any(counts[op] for op in built.not_fused), f"expected none of {built.not_fused} in {dict(counts)}"
